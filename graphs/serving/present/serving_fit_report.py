"""``calibrate serving`` as a library call: a checked request in, a report that renders itself out.

:func:`run_serving_fit` takes a :class:`~graphs.serving.planning.serving_fit_request.ServingFitRequest`
and a model, replays the request's runs on its engine (:func:`graphs.serving.sim.engine.profile_engine`),
fits the engine overheads (:func:`graphs.serving.planning.serving_fit.fit_serving`), writes the fit
file when the request names one, and returns a :class:`ServingFitReport` holding everything the
command prints: ``to_text()`` (what ``costmodel calibrate serving`` prints), ``to_dict()`` (what
its ``--json`` prints) and ``to_html()`` (a page of the fitted terms and every run's errors). It
sits in ``present``, beside :mod:`.simulation_report`, because a report renders with the present
wing's page helpers.

What stays with the caller: resolving the model from a name or file, checking the output path
before the work, progress lines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.hardware import get_device
from models.config import ModelConfig

from ..engines.knobs import TERMS
from ..planning.bench_results import BenchRun
from ..planning.serving_fit import (
    DESIGN_ROUNDS,
    TRADE_OFF_CORR,
    ServingFit,
    fit_serving,
    fp8_matmuls,
    roofline_tpot_s,
    roofline_ttft_s,
    served_dtypes,
    simulate_with,
    write_fit,
)
from ..planning.serving_fit_request import ServingFitRequest
from ..pricing.overheads import TERM_RANGES
from ..sim.engine import EngineConfig, moe_kernel_padding, profile_engine

__all__ = ["ServingFitReport", "run_serving_fit", "TERM_UNITS"]

#: how each term prints: (factor from its SI unit, unit); a term not listed prints in ms
TERM_UNITS: dict[str, tuple[float, str]] = {
    "kernel_scale": (1.0, ""),
    "per_seq_s": (1e6, " us"),
    "per_token_s": (1e9, " ns"),
    "output_token_s": (1e6, " us"),
}
_MS = (1e3, " ms")


def _pct(err: float) -> str:
    """A run's signed relative error as a percentage, ``n/a`` where the run has no value of the
    metric (a TPOT of runs whose every request generated one token: its error is NaN; the fit
    file's JSON holds null)."""
    return f"{100 * err:+6.1f}%" if np.isfinite(err) else f"{'n/a':>7s}"


def _why_collinear(a: str, b: str) -> str:
    """Why two fitted terms move the runs' means alike (said with the flag)."""
    pair = {a, b}
    if pair == {"iteration_s", "per_seq_s"}:
        return "every run sits at a similar batch size (add runs at other loads, or fit one of them: --terms)"
    if "per_token_s" in pair and "kernel_scale" in pair:
        return "both grow with the prompt (fit one of them: --terms)"
    if "output_token_s" in pair:
        return "both add to every output token (fit one of them: --terms)"
    return (
        "their effects on the fitted means are proportional (add runs at other loads, or fit fewer --terms)"
    )


@dataclass(frozen=True)
class ServingFitReport:
    """One ``calibrate serving`` fit and everything the command prints about it.

    Attributes
    ----------
    request : ServingFitRequest
        The settings it ran with.
    config : ModelConfig
        The model the runs served.
    fit : ServingFit
        The fitted overheads, their standard errors and every run's errors.
    runs : tuple of BenchRun
        The runs replayed, in the order read.
    held : tuple of int
        Indices of ``runs`` held out.
    why_held : str
        Why they were held out (empty: none by default).
    engine : EngineConfig
        The engine's knobs the runs were replayed with.
    fp8 : bool
        The kernels were priced with FP8 activation scales (a predictor and FP8 matmuls).
    """

    request: ServingFitRequest
    config: ModelConfig
    fit: ServingFit
    runs: tuple[BenchRun, ...]
    held: tuple[int, ...]
    why_held: str
    engine: EngineConfig
    fp8: bool = False

    @property
    def cut(self) -> list[BenchRun]:
        """The runs longer than the window replayed (``max_requests``): their first requests only."""
        return [run for run in self.runs if run.in_file > len(run.prompt)]

    def notes(self) -> list[str]:
        """The notes on what was replayed that the text prints and no other key of ``to_dict``
        holds: each run cut to its first requests (``--max-requests``) and the runs whose arrivals
        were redrawn (a vllm result holds no send times). ``to_dict`` carries them under
        ``"notes"``.

        Returns
        -------
        list of str
        """
        out = [_cut_note(c) for c in self.cut]
        drawn = sum(r.drawn for r in self.runs)
        if drawn:
            out.append(
                f"{drawn} run(s) hold no send times (vllm bench serve): arrivals redrawn at their rate, "
                f"--seed {self.request.seed}"
            )
        return out

    def replay_lines(self) -> list[str]:
        """What the replay ran with beyond the profile: prefix caching and the KV pool, said once.

        Returns
        -------
        list of str
        """
        req, eng = self.request, self.engine
        caching, prefixes = req.enable_prefix_caching, sum(r.prefixes for r in self.runs)
        pool = (
            f"{req.num_blocks:,} KV blocks (--num-blocks)"
            if req.num_blocks
            else "the KV pool by the profile's rule"
        )
        lines = [
            f"replayed with prefix caching {'on' if caching else 'off'}, {pool}, max-num-seqs {eng.max_num_seqs}, "
            f"max-num-batched-tokens {eng.max_num_batched_tokens}"
        ]
        if caching and prefixes:
            lines.append(
                f"prefix caching replayed: {prefixes} shared prefix(es) named by the runs; a request whose "
                "prefix is cached computes only the rest of its prompt"
            )
        elif caching:
            lines.append(
                "note: prefix caching is on but no run names a shared prefix (CSV prefix_id,prefix_tokens or "
                "--shared-prefix): nothing is replayed as cached"
            )
        elif prefixes:
            lines.append(
                f"note: the runs name {prefixes} shared prefix(es) but prefix caching is off: every prompt is "
                "replayed whole (--enable-prefix-caching when the engine ran with it, as vLLM V1 does by default)"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values (what ``calibrate serving --json`` prints): the fit file's
        path, the engine profile, the fit, the runs held out and why, the terms held at a bound,
        the pairs not told apart, the replay and what each summary-only run assumed (and each run's
        requests of 0 prompt or 0 output tokens left out), the notes, each term printed without a
        standard error and the words said beside it (``term_notes``), and the in-sample note when no
        run was held out (``in_sample``, else null), how the standard errors were computed and the
        simulations run (``uncertainty``), the pairs of terms that trade off with their correlation
        (``trade_offs``) and the simulations (``simulations``): every note the text prints.

        Returns
        -------
        dict
        """
        fit, runs = self.fit, self.runs
        held_out = [{"source": runs[i].source, "rate": runs[i].rate, "why": self.why_held} for i in self.held]
        engine = self.request.engine.to_dict()
        release_note = self.kernel_release_note()
        if release_note:
            engine["kernel_release_note"] = release_note
        return {
            "file": self.request.out,
            "engine": engine,
            **fit.to_dict(),
            "held_out": held_out,
            "at_bound": {t: getattr(fit.overheads, t) for t in fit.at_bound},
            "collinear": [list(p) for p in fit.collinear],
            "replay": self.replay_lines(),
            "assumed": {
                r.source: [
                    *(r.summary.assumed if r.summary is not None else ()),
                    *r.notes,
                    *filter(None, [r.left_out]),
                ]
                for r in runs
                if r.summary is not None or r.notes or r.left_out
            },
            "notes": self.notes(),  # what the text says of the replay: a program must not lose it
            # each fitted term the text gives no standard error, and why (held at a bound, not
            # told apart from another, not determined): the words the text prints beside it
            "term_notes": {t: said for t, _, _, said in self.term_rows() if t not in self._with_stderr()},
            "in_sample": self.in_sample_note(),
            "uncertainty": self.uncertainty_line(),
            "trade_offs": [{"terms": [a, b], "correlation": c} for a, b, c in fit.trade_offs],
            "simulations": fit.simulations,
        }

    def _with_stderr(self) -> set[str]:
        """The fitted terms the text prints with a standard error (``+-``)."""
        return {t for t, _, _, said in self.term_rows() if said.startswith("+- ")}

    def uncertainty_line(self) -> str | None:
        """How the ``+-`` were computed and the simulations the fit ran (None: a fit that did not
        record them); the text's line and ``to_dict``'s ``uncertainty``.

        Returns
        -------
        str or None
        """
        fit = self.fit
        if not fit.uncertainty:
            return None
        trades = (
            f"; terms whose estimates correlate beyond {TRADE_OFF_CORR:g} trade off (the pair is known "
            "better than each alone)"
            if fit.trade_offs
            else ""
        )
        return f"+- is one standard error: {fit.uncertainty}{trades}; {fit.simulations:,} simulations"

    def in_sample_note(self) -> str | None:
        """The note that no run was held out, so every error printed is in-sample (None when some
        run was held out); the text's line and ``to_dict``'s ``in_sample``.

        Returns
        -------
        str or None
        """
        if self.held:
            return None
        return (
            f"no run held out ({self.why_held or 'fewer than three runs'}; give three or more runs, or "
            "--holdout RATES): the error above is in-sample"
        )

    def kernel_release_note(self) -> str | None:
        """With measured kernels, the note that the engine profile describes an earlier release of
        the framework than the one the corpus measured them on
        (:func:`.simulation_report.kernel_release_note`): a fit then absorbs what the releases'
        kernels differ by into its terms (the kernel scale first). None otherwise.

        Returns
        -------
        str or None
        """
        from .simulation_report import kernel_release_note

        return kernel_release_note(self.request.engine, self.request.predict, self.fit.device)

    def term_rows(self) -> list[tuple[str, float, str, str]]:
        """Each fitted term: (name, value in its printed unit, unit, its standard error or why it
        has none), in the order fitted.

        Returns
        -------
        list of tuple
        """
        fit, predict = self.fit, self.request.predict
        rows = []
        for t in self.request.terms:
            k, unit = TERM_UNITS.get(t, _MS)
            v, se = getattr(fit.overheads, t), fit.stderr[t]
            other = next((a if b == t else b for a, b in fit.collinear if t in (a, b)), None)
            if t in fit.at_bound:
                top = v >= TERM_RANGES[t][1]
                if top:  # the runs ask for more than the term's range allows: said, not hidden
                    err = (
                        f"held at the top of its range, {v * k:.4g}{unit} (no standard error): the runs "
                        "are slower than these terms can make them (check the runs' time units)"
                    )
                elif t == "kernel_scale" and not predict:
                    err = "held at its bound 1: the roofline (a smaller scale would price kernels below it)"
                else:
                    err = f"held at its bound {v * k:.4g}{unit} (no standard error)"
            elif other is not None:
                err = f"not told apart from {other} by these runs: {_why_collinear(t, other)}"
            else:
                err = "not determined by these runs" if se is None else f"+- {se * k:.3g}{unit}"
                partners = [
                    f"{b if a == t else a} (correlation {c:+.2f})"
                    for a, b, c in fit.trade_offs
                    if t in (a, b)
                ]
                if se is not None and partners:  # known as a combination better than alone: said
                    err += "; trades off with " + ", ".join(partners)
            rows.append((t, v * k, unit, err))
        return rows

    def to_text(self) -> str:
        """What ``costmodel calibrate serving`` prints: what was fitted on what, the engine, the
        replay, the runs held out and assumed, each term with its error, the residual and every
        run's errors, and how to use the file.

        Returns
        -------
        str
        """
        req, fit, runs, held = self.request, self.fit, self.runs, self.held
        scales = f" (FP8 activation scales {req.scales})" if self.fp8 else ""
        out = [
            f"serving fit of {fit.model} on {fit.device} (tp {fit.tp}), kernels priced by "
            f"{req.predict or 'the roofline bound'}{scales}: {len(runs) - len(held)} run(s) fitted, "
            f"{len(held)} held out",
            f"  {req.engine.summary()}",
            *(f"  {line}" for line in self.replay_lines()),
        ]
        if fit.dtypes:  # what the kernel scale is a ratio to (a fit applied to other formats says so)
            out.append("  formats replayed: " + ", ".join(f"{k} {v}" for k, v in fit.dtypes.items()))
        release_note = self.kernel_release_note()
        if release_note:
            out.append(
                f"  note: {release_note}; the fitted terms absorb what the two releases' kernels differ by"
            )
        if held:
            out.append(f"  held out: {', '.join(runs[i].label for i in held)}; {self.why_held}")
        for run in runs:
            for said in run.summary.assumed if run.summary is not None else ():
                out.append(f"  assumed for {run.source} (a summary without per-request rows): {said}")
            for said in run.notes:
                out.append(f"  assumed for {run.source}: {said}")
        for run in runs:
            if run.left_out:
                out.append(f"  note: {run.source}: {run.left_out}")
        out += [f"  note: {note}" for note in self.notes()]
        out += [f"  {t:15s} {v:12.5g}{unit:3s}  {err}" for t, v, unit, err in self.term_rows()]
        if self.uncertainty_line():
            out.append(f"  {self.uncertainty_line()}")
        kept = [t for t in TERMS if t not in req.terms]
        if kept:
            held_at = ", ".join(
                f"{t} {getattr(fit.overheads, t) * TERM_UNITS.get(t, _MS)[0]:.4g}{TERM_UNITS.get(t, _MS)[1]}"
                for t in kept
            )
            whose = "the " + req.predict + " defaults" if req.predict else "zero, the bound"
            out.append(f"  not fitted (kept at {whose}'s values): {held_at}")
        out.append(
            "  rms relative residual of the group means (TTFT by prompt length, TPOT by output length): "
            f"{fit.rms_residual:.3g}"
        )
        for r in fit.runs:
            what = "fitted  " if r.fitted else "held out"
            rate = "all at once" if r.rate is None else f"{r.rate:8.4g} req/s"
            out.append(
                f"  {what} {rate:>14s}  mean TTFT {_pct(r.ttft_err)}  TPOT {_pct(r.tpot_err)}  "
                f"E2E {_pct(r.e2e_err)}  ({r.source})"
            )
        in_sample = self.in_sample_note()
        if in_sample:
            out.append(f"  {in_sample}")
        if req.out is not None:
            out.append(self._use_line())
        return "\n".join(out)

    def _use_line(self) -> str:
        """Where the fit was written and how to use it (the knobs the runs were replayed with, for
        a ``simulate`` of the same deployment)."""
        req = self.request
        again = f" --engine {req.engine.ref}" if req.engine_named else ""
        knobs = (" --enable-prefix-caching" if req.enable_prefix_caching else "") + (
            f" --num-blocks {req.num_blocks}" if req.num_blocks else ""
        )
        return (
            f"fit written to {req.out}; use it with --predict-file {req.out}{again} on simulate, decode or prefill"
            + (f" (and{knobs} on simulate, as the runs were replayed)" if knobs else "")
        )

    def to_html(self, command: str = "") -> str:
        """A page of the fit: the headline, the fitted terms with their errors and every run's
        predicted-over-measured errors (a bar chart and a table).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from costmodel.html import Section, page_html, rows_table
        from costmodel.html_figures import hbar_figure

        from .html_views import run_header

        fit = self.fit
        headline = {"fit": self.to_text().splitlines()[0], "rms residual": f"{fit.rms_residual:.3g}"}
        terms = [{"term": t, "value": f"{v:.5g}{u}", "error": e} for t, v, u, e in self.term_rows()]
        runs = [
            {
                "run": r.source,
                "rate (req/s)": "all at once" if r.rate is None else f"{r.rate:.4g}",
                "fitted": "fitted" if r.fitted else "held out",
                # a metric the run has no value of (every output one token: no TPOT) is n/a, as in
                # the text, never "+nan"
                "TTFT error %": _pct(r.ttft_err).strip().rstrip("%"),
                "TPOT error %": _pct(r.tpot_err).strip().rstrip("%"),
                "E2E error %": _pct(r.e2e_err).strip().rstrip("%"),
            }
            for r in fit.runs
        ]
        labels = [f"{r['run']} ({r['fitted']})" for r in runs]
        errors = [100 * r.e2e_err for r in fit.runs]
        sections = [
            Section("fitted terms", (rows_table(terms),), note="; ".join(self.replay_lines())),
            Section(
                "every run: predicted over measured",
                (
                    hbar_figure(
                        labels,
                        errors,
                        [f"{e:+.1f}%" for e in errors],
                        title="mean E2E error per run",
                        x_title="predicted / measured - 1 (%)",
                    ),
                    rows_table(runs),
                ),
            ),
        ]
        head = run_header(command, self.config, fit.device, fit.tp)
        return page_html(f"serving fit of {fit.model}", head, headline, sections)


def _cut_note(run: BenchRun) -> str:
    """The note on a run longer than the window replayed: its first requests by arrival only.

    Parameters
    ----------
    run : BenchRun
        A run read with ``max_requests`` below its file's count (``run.in_file``).

    Returns
    -------
    str
    """
    summary = (
        "; its stated means are of all of them, and its stated throughput (the whole run's) is not fitted"
        if run.summary is not None and run.summary.throughput_rps is not None
        else ("; its stated means are of all of them" if run.summary is not None else "")
    )
    return (
        f"{run.source} holds {run.in_file:,} requests: the fit replays its first {len(run.prompt):,} "
        f"by arrival (--max-requests){summary}"
    )


def _priced_moe_kernel(profile: Any, config: Any, device: str, tp: int) -> str | None:
    """The fused-MoE kernel ``profile``'s rules price the experts with (recorded in the fit)."""
    rule, _ = moe_kernel_padding(profile, config, device, tp=tp)
    return rule.kernel if rule is not None else None


def run_serving_fit(
    request: ServingFitRequest,
    config: ModelConfig,
    *,
    say: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
    ticks: Callable[[int, int], None] | None = None,
    executor: Any = None,
    design_rounds: int = DESIGN_ROUNDS,
) -> ServingFitReport:
    """Fit the engine overheads of ``request`` to its runs replayed on ``config`` (module doc),
    and write the fit file when the request names one.

    The engine replayed is the request's profile set up on the device
    (:func:`graphs.serving.sim.engine.profile_engine`: its batch limits and KV pool, the request's
    prefix caching and KV blocks); the terms start from the profile's overheads, all zero for the
    bound (which keeps the engine's preemption policy as it always ran).

    Parameters
    ----------
    request : ServingFitRequest
        The checked settings.
    config : ModelConfig
        The model the runs served.
    say : callable, optional
        ``say(line)`` for the notes said before the work (a run cut to its first requests).
    progress : callable, optional
        ``progress(line)`` for the fit's step lines.
    ticks : callable, optional
        ``ticks(done, most)`` after each simulation (a progress bar).
    executor : Any, optional
        A Dask ``Client`` or ``concurrent.futures`` executor the candidate simulations run on
        (:func:`~graphs.serving.planning.serving_fit.fit_serving`: the same fit; None: this process).
    design_rounds : int
        :func:`~graphs.serving.planning.serving_fit.fit_serving`'s design rounds (0: Gauss-Newton
        alone, its standard errors of the local curvature).

    Returns
    -------
    ServingFitReport

    Raises
    ------
    CostModelError
        A result file unreadable, a request longer than the model's context (unless
        ``request.allow_long_context``), a ``holdout`` rate no run has, a run faster than the
        roofline, or the fit file not writable.
    """
    runs = request.read_runs()
    for run in runs:  # as simulate --trace: a sequence past the model's context is refused
        longest = run.prompt + run.output
        j = int(np.argmax(longest))
        config.check_context(
            int(longest[j]),
            f"{run.source} {run.where(j)}: prompt_tokens {int(run.prompt[j]):,} + output_tokens "
            f"{int(run.output[j]):,} =",
            allow=request.allow_long_context,
        )
    held, why_held = request.held_out(runs)
    dev = get_device(request.device).name
    profile, tp, predict, scales = request.engine, request.tp, request.predict, request.scales
    caching = request.enable_prefix_caching
    eng = profile_engine(
        profile, config, dev, tp=tp, enable_prefix_caching=caching, num_blocks=request.num_blocks
    )
    # the terms start from the profile's (zero for the bound, which keeps the engine's policy)
    base = profile.overheads(
        max_num_seqs=eng.max_num_seqs, max_num_batched_tokens=eng.max_num_batched_tokens, terms=bool(predict)
    )
    if not predict and profile.policy == "recompute":
        base = dataclasses.replace(base, policy=None, basis="none")  # the bound as it always ran
    for c in [run for run in runs if run.in_file > len(run.prompt)]:
        if say is not None:  # said before the work: the fit reads a window of each long run
            say(f"note: {_cut_note(c)}")
    fit = fit_serving(
        runs,
        simulate_with(config, dev, tp=tp, predict=predict, engine=eng, fp8_scales=scales, profile=profile),
        base=base,
        held_out=held,
        terms=request.terms,
        model=config.name,
        device=dev,
        tp=tp,
        predict=predict,
        progress=progress,
        fp8_scales=scales,
        moe_kernel=_priced_moe_kernel(profile, config, dev, tp) if predict else None,
        dtypes=served_dtypes(config),
        min_tpot_s=roofline_tpot_s(config, dev, tp=tp),
        # a prefix is cached only where the replay caches it: the floor is of what the fit models
        min_ttft_s=lambda run: roofline_ttft_s(
            config, dev, run.prompt, run.prefix if caching else None, tp=tp
        ),
        ticks=ticks,
        executor=executor,
        design_rounds=design_rounds,
    )
    if request.out is not None:
        write_fit(fit, request.out)
    fp8 = bool(predict) and fp8_matmuls(config)  # the scale mode prices FP8 matmuls only
    return ServingFitReport(request, config, fit, tuple(runs), tuple(held), why_held, eng, fp8)
