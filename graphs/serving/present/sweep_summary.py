"""``sweep`` as a library call: a checked request in, a summary that renders itself out.

:func:`run_sweep` evaluates a :class:`~graphs.serving.analysis.sweep_request.SweepRequest`'s grid
(:func:`graphs.serving.analysis.sweeps.sweep` with a predictor, else
:func:`~graphs.serving.analysis.sweeps.sweep_forms` over each configuration's compiled decode
forms) into a :class:`SweepSummary` with ``to_text()`` (what ``costmodel sweep`` prints),
``to_dict()`` (its ``--json``) and ``to_html()`` (:func:`.html_studies.report_page`: the frontier).

What stays with the caller: resolving the model, the forms' cache (cards), the predictor, ``--csv``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.text import format_table
from models.config import ModelConfig

from ..analysis.sweep_request import SweepRequest
from ..analysis.sweeps import DecodeForms, SweepResult, sweep, sweep_forms
from ..planning.cost import missing_cells
from ..pricing.predictor import Predictor
from ..step.ledger_fit import engine_pool_note
from .report_text import predicted_lines, served_error_dicts, served_error_lines, step_error_pairs

__all__ = ["SweepSummary", "run_sweep"]

#: most points that fit a sweep page draws beside the frontier (more: one in k, said in the legend)
MAX_DRAWN = 5000

#: the frontier's columns: (key, heading, format)
_COLUMNS = (
    ("device", "device", "s"),
    ("weight_dtype", "weights", "s"),
    ("kv_dtype", "KV", "s"),
    ("tp", "tp", "s"),
    ("batch", "batch", "s"),
    ("ctx", "ctx", "s"),
    ("tokens_per_s_per_user", "tok/s/user", ".1f"),
    ("tokens_per_s_per_device", "tok/s/device", ".1f"),
    ("energy_per_token_j", "J/token", ".4f"),
)


@dataclass(frozen=True)
class SweepSummary:
    """One decode sweep and what ``costmodel sweep`` prints of it.

    Attributes
    ----------
    request : SweepRequest
        The checked grid.
    result : SweepResult
        Every point, its frontier and notes.
    expected_errors : tuple of (str, str)
        With a predictor: ``(device, statement)``, the served expected errors of deployments like
        each frontier device's (:func:`.report_text.step_error_pairs`).
    """

    request: SweepRequest
    result: SweepResult
    expected_errors: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What ``sweep --json`` prints: every point's columns.

        Returns
        -------
        dict
        """
        res, req = self.result, self.request
        doc = res.to_dict()
        # every note the text prints, a program must not lose: the sweep's own, the engine's KV
        # pool with a predictor, and why the frontier is empty (the coverage as its own key)
        from costmodel.notes import said

        spoken = set(said())  # a note also said on stderr is kept once, as said (common.dump)
        own = [n for n in res.notes if f"note: {n}" not in spoken]
        notes = [*own, *((engine_pool_note(str(req.predict)),) if req.predict else ()), *res.verdict()]
        if notes:
            doc["notes"] = notes
        if res.coverage is not None:
            doc["coverage"] = res.coverage.to_dict()
        if self.expected_errors:
            doc["served_expected_error"] = served_error_dicts(self.expected_errors)
        return doc

    def to_text(self) -> str:
        """What ``costmodel sweep`` prints: the counts, the notes, with a predictor what priced the
        steps, and the Pareto frontier (``top`` of its rows, :func:`_spread`).

        Returns
        -------
        str
        """
        res, req = self.result, self.request
        front = res.frontier_index()  # the rows shown are built, not the whole frontier's
        per = f" over {res.contexts} contexts, one frontier each" if res.contexts > 1 else ""
        out = [
            f"{res.model}: {len(res):,} points, {res.fits:,} fit in memory; "
            f"Pareto frontier ({len(front)} points{per}), by context, fastest user first:"
        ]
        out += [f"  note: {note}" for note in res.notes]
        if req.predict:
            out.append(f"  note: {engine_pool_note(str(req.predict))}")
        if res.coverage is not None:
            devices = ",".join(req.devices)
            out += predicted_lines(str(req.predict), devices, res.coverage, what="every step's kernels")
            out.append("  (coverage of the frontier's steps)")
            out += served_error_lines(self.expected_errors)
        rows = res.rows(_spread(front.tolist(), req.top))
        if len(rows) < len(front):
            out.append(
                f"  showing {len(rows)} of {len(front)} frontier points (--top 0 for all, --csv or --json)"
            )
        # a device without a TDP says so in its energy cell (not nan), as search's table does
        out.append(format_table(*missing_cells(rows, _COLUMNS)))
        out += [f"  {line}" for line in res.verdict()]
        return "\n".join(out)

    def to_html(self, command: str = "") -> str:
        """A page (:func:`graphs.serving.present.html_studies.report_page`): every point that fits
        as tokens/s per user against per device, each context's frontier drawn over them (log
        axes: the rates span decades), the printed lines.

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        import math

        import numpy as np

        from costmodel.html import require_plotly
        from costmodel.html_figures import styled

        from .html_studies import report_page, with_notes

        go = require_plotly()
        # the points that fit, one in ``k`` past MAX_DRAWN (153,600 points of which 30,743 fit
        # made a 7.8 MB page; a 10M-point sweep's would be gigabytes)
        every = np.flatnonzero(self.result.columns["fits"]) if len(self.result) else np.zeros(0, int)
        k = max(1, math.ceil(len(every) / MAX_DRAWN))
        fits = self.result.rows(every[::k].tolist())
        front = self.result.frontier_index()
        # one frontier per context (SweepResult.frontier), a line each; past MAX_DRAWN points each
        # line goes through one in kf of its points and its last (1e6 points on 1,000 contexts:
        # half a million on the frontiers)
        kf = max(1, math.ceil(len(front) / MAX_DRAWN))
        ctx = self.result.columns["ctx"][front]
        starts = np.flatnonzero(np.r_[True, ctx[1:] != ctx[:-1]]) if len(front) else np.zeros(0, int)
        ends = [*starts[1:].tolist(), len(front)] if len(front) else []
        lines = []
        fig = go.Figure()
        for a, b in zip(starts.tolist(), ends, strict=True):
            keep = sorted({*range(a, b, kf), b - 1})
            name = f"frontier, ctx {ctx[a]}" if len(starts) > 1 else "frontier"
            lines.append(
                (name if kf == 1 else f"{name} (one in {kf})", self.result.rows(front[keep].tolist()))
            )
        drawn = "points that fit" if k == 1 else f"points that fit (one in {k} of {len(every):,})"
        for name, pts, mode in (
            (drawn, fits, "markers"),
            *((name, pts, "lines+markers") for name, pts in lines),
        ):
            fig.add_trace(
                go.Scatter(
                    x=[p["tokens_per_s_per_device"] for p in pts],
                    y=[p["tokens_per_s_per_user"] for p in pts],
                    mode=mode,
                    name=name,
                    text=[_hover(p) for p in pts],
                    hovertemplate="%{text}<extra></extra>",
                    **({"marker": {"color": "#c8c8c8"}} if mode == "markers" else {}),
                )
            )
        styled(
            fig,
            "decode sweep: tokens/s per user against per device"
            + (", one frontier per context" if len(starts) > 1 else ""),
            "tokens/s per device",
            "tokens/s per user",
            xaxis_type="log",
            yaxis_type="log",
        )
        # the notes the run said on stderr (the command line's cached forms say theirs there: a
        # tp group priced on the network, the matmul dtype) head the text, as to_dict keeps them
        return report_page(
            f"{self.result.model}: decode sweep",
            with_notes(self.to_text()),
            command=command,
            headline={"frontier": f"{len(front):,} points"},
            figures=[fig] if fits else [],  # nothing fits: the text says why, no empty axes
        )


def _spread(rows: Sequence[Any], top: int) -> list[Any]:
    """``top`` of the frontier's ``rows`` as search's text picks them: the two ends and an even
    spread between them (0: all), so every context's frontier shows, not the first one's rows."""
    if not top or len(rows) <= top:
        return list(rows)
    if top == 1:
        return [rows[0]]
    step = (len(rows) - 1) / (top - 1)
    return [rows[round(i * step)] for i in range(top)]


def _hover(p: Mapping[str, Any]) -> str:
    """A sweep point's hover, in the text table's columns and formats: ``h100-sxm weights
    fp8_e4m3, KV bf16, tp 1, batch 8, ctx 1024`` over ``386.5 tok/s/user, 3091.8 tok/s/device``."""
    from costmodel.html import plain

    what = (
        f"{p['device']} weights {p['weight_dtype']}, KV {p['kv_dtype']}, tp {p['tp']}, "
        f"batch {p['batch']}, ctx {p['ctx']}"
    )
    rates = f"{p['tokens_per_s_per_user']:.1f} tok/s/user, {p['tokens_per_s_per_device']:.1f} tok/s/device"
    return f"{plain(what)}<br>{rates}"


def run_sweep(
    request: SweepRequest,
    config: ModelConfig | None = None,
    *,
    forms: Sequence[DecodeForms] | None = None,
    predictor: Predictor | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SweepSummary:
    """Evaluate ``request``'s grid (module doc).

    Parameters
    ----------
    request : SweepRequest
        The checked grid.
    config : ModelConfig, optional
        The model (needed without ``forms``).
    forms : sequence of DecodeForms, optional
        Each configuration's compiled decode forms, in :meth:`SweepRequest.combos` order (the
        command's, read from cards); None: compiled here. Not with a predictor, which prices
        every step's kernels.
    predictor : Predictor, optional
        Prices every step's kernels (None: the bound).
    progress : callable, optional
        ``progress(done, total)``.

    Returns
    -------
    SweepSummary

    Raises
    ------
    CostModelError
        When neither the model nor its forms are given.
    """
    req = request
    grid: dict[str, Any] = {
        "batches": list(req.batches),
        "ctxs": list(req.ctxs),
        "tp": req.tp,
        "progress": progress,
    }
    if forms is not None and predictor is None:
        res = sweep_forms(forms[0].model, forms, **grid)
    else:
        if config is None:
            from costmodel.errors import CostModelError

            raise CostModelError("sweep needs a model (config) or its decode forms")
        res = sweep(
            config,
            devices=list(req.devices),
            weight_dtypes=list(req.weight_dtypes),
            kv_dtypes=list(req.kv_dtypes),
            predictor=predictor,
            **grid,
        )
    errors: tuple[tuple[str, str], ...] = ()
    if predictor is not None and predictor.framework is not None and config is not None:
        errors = step_error_pairs(
            predictor.framework,
            list(dict.fromkeys(str(d) for d in res.columns["device"][res.frontier_index()].tolist())),
            config.is_moe,
        )
    return SweepSummary(req, res, errors)
