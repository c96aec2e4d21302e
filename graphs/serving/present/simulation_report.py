"""``simulate`` as a library call: a checked request in, a report that renders itself out.

:func:`run_simulation` takes a :class:`~graphs.serving.sim.simulation_request.SimulationRequest`
and a model, runs what the request asks for, and returns a report holding everything the command
prints:

* a run at a rate, a closed loop, a trace or a replayed benchmark run (:class:`SimulationReport`):
  the simulation (:func:`graphs.serving.sim.simulator.simulate`), with ``interval`` its P10-P90
  ends (:func:`graphs.serving.sim.intervals.simulate_interval`), with ``compare`` the bound and a
  measured run beside it (:mod:`.comparison`), and its cost (:func:`graphs.serving.planning.cost.sim_cost`);
* ``max_rate``'s search (:class:`MaxRateReport`): the probes and the simulation at the rate found
  (:func:`graphs.serving.planning.capacity_search.max_rate`);
* ``rates``' sweep (:class:`RateSweepReport`): one run a rate, the same drawn workload at each,
  independent runs (on an ``executor`` at once: each the run this process computes).

Each report has ``to_text()`` (what ``costmodel simulate`` prints), ``to_dict()`` (what its
``--json`` prints) and ``to_html()`` (the page ``--html`` writes,
:func:`graphs.serving.present.html_studies.simulation_page`). It sits in ``present``, above
``planning``, because a run takes the planning wing's cost, rate search and benchmark reader.

What stays with the caller: resolving the model from a name or file, output files (``csv``,
``plot``), the progress bar.
"""

from __future__ import annotations

import dataclasses
import math
import os
import string
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from models.config import ModelConfig

from ..engines import EngineOverheads, EngineProfile
from ..planning.bench_results import BenchRun, read_results, replay_text
from ..planning.capacity_search import MaxRate, max_rate, rate_text
from ..planning.cost import Rates, TokenCost, device_rates, sim_cost
from ..planning.executors import known_devices, map_ordered
from ..planning.serving_fit import ServingFit, check_fit_kernel, read_fit
from ..pricing.predictor import Predictor
from ..sim.engine import EngineConfig, profile_engine
from ..sim.intervals import RunBands, SimInterval, run_bands, simulate_interval
from ..sim.requests import Request, Trace, read_trace, synthetic
from ..sim.simulation_request import SimulationRequest
from ..sim.simulator import SimResult, Topology, simulate, steady_stagger_s
from .comparison import Comparison, compare, measured_column, sim_column
from .report_text import cost_text, interval_text, predict_file_line, predicted_lines

__all__ = ["MaxRateReport", "RateSweepReport", "SimulationReport", "engine_config", "run_simulation"]

#: ``check_context(tokens, field)``: refuse (or warn about) a sequence past the model's context
ContextCheck = Callable[[int, str], None]
#: ``progress(done, total)``
Progress = Callable[[int, int], None]


def _priced_by(request: SimulationRequest) -> str:
    """How the iterations were priced, for titles: ``bound`` (every kernel at its roofline),
    ``predicted (vllm kernels)`` or ``calibrated (FILE)``."""
    if request.predict_file:
        return f"calibrated ({os.path.basename(request.predict_file)})"
    if request.predict:
        return f"predicted ({request.predict} kernels)"
    return "bound (kernels at their roofline)"


#: what a run priced by the bound says once: its latencies are a floor, not a prediction
BOUND_LINE = (
    "kernels: the bound (every kernel at its roofline, no engine CPU time): a floor on each latency, "
    "not a prediction; --predict FRAMEWORK prices them from measured kernels"
)


def bound_line(overhead_s: float) -> str:
    """:data:`BOUND_LINE`, or with ``--overhead-s`` the CPU time per iteration it adds.

    Parameters
    ----------
    overhead_s : float
        The run's ``--overhead-s`` (s per iteration; 0: none).

    Returns
    -------
    str
        The line, without its indent.
    """
    if overhead_s <= 0:
        return BOUND_LINE
    return (
        f"kernels: the bound (every kernel at its roofline) plus the {overhead_s:g} s per iteration "
        "--overhead-s gives: a floor on each latency but for that time, not a prediction; --predict "
        "FRAMEWORK prices the kernels from measurements"
    )


def kernel_release_note(profile: Any, predict: str | None, device: str) -> str | None:
    """The note a predicted run prints when its engine profile describes an earlier release of
    the framework than the one whose kernels the corpus measured on ``device``
    (:meth:`graphs.serving.engines.EngineProfile.kernel_release_note`); a device the corpus does
    not measure is priced from the others' fits, so their releases, the earliest compared; None
    without a predictor, with another framework's kernels (said apart), or without the corpus.

    Parameters
    ----------
    profile : EngineProfile
        The run's engine profile.
    predict : str or None
        The corpus framework pricing the kernels.
    device : str
        The catalog device.

    Returns
    -------
    str or None
    """
    if not predict or predict != profile.framework:
        return None
    from packaging.version import InvalidVersion, Version

    from costmodel.measured.corpus import SYSTEMS, framework_release

    label = None
    try:
        device = get_device(device).name  # an alias (h100) is the measured device it names
        measured = framework_release(device, predict)
        if measured is None and device not in SYSTEMS.values():  # priced from other devices' fits
            rels = sorted(
                {r for d in set(SYSTEMS.values()) if (r := framework_release(d, predict))}, key=Version
            )
            if rels:  # the earliest: where the profile predates it, it predates every one
                measured = rels[0]
                label = (
                    f"{rels[0]} to {rels[-1]} (other devices')"
                    if len(rels) > 1
                    else f"{rels[0]} (other devices')"
                )
    except (CostModelError, InvalidVersion):  # no corpus, or a device this process cannot name
        return None
    note: str | None = profile.kernel_release_note(measured, label)
    return note


def moe_kernel_note(
    profile: Any, config: Any, device: str, tp: int = 1, dp: int = 1, expert_parallel: bool = False
) -> str | None:
    """The note a run prints when its engine runs another fused-MoE kernel than the corpus's
    fastest for the model's experts on ``device`` (:meth:`~graphs.serving.engines.EngineProfile.moe_kernel`):
    which, why (the rule's first clause of source), and the weight bytes its padding adds to a
    device (:func:`graphs.serving.sim.engine.moe_kernel_padding`), out of the KV pool; said for
    the bound too, whose pool holds them. None where no rule applies.

    Parameters
    ----------
    profile : EngineProfile
        The run's engine profile.
    config : ModelConfig
        The model.
    device : str
        The catalog device.
    tp, dp : int
        Tensor-parallel degree, and data-parallel ranks sharing the experts.
    expert_parallel : bool
        Whole experts spread over the ``dp x tp`` devices (else split by width).

    Returns
    -------
    str or None
    """
    from ..sim.engine import moe_kernel_padding

    rule, padded = moe_kernel_padding(profile, config, device, tp=tp, dp=dp, expert_parallel=expert_parallel)
    if rule is None:
        return None
    hw = get_device(device)
    where = hw.architecture if hw.architecture in rule.architectures else hw.name
    text = (
        f"engine {profile.ref} runs {rule.dtype} experts with {rule.kernel} kernels on {where} "
        f"({rule.source.split(';')[0]}): with --predict their measured rows price the experts"
    )
    if padded > 0:
        text += (
            f"; their weights padded to multiples of {rule.pad[0]} (hidden) and {rule.pad[1]} (expert width) "
            f"hold {padded / 1e9:.2f} GB more a device, out of the KV pool"
        )
    return text


def engine_kernel_notes(
    profile: Any, predict: str | None, config: Any, device: str, topology: Topology
) -> dict[str, str]:
    """The kernel notes a run's engine says once (:func:`kernel_release_note`,
    :func:`moe_kernel_note`), by their ``--json`` key under ``engine``; those that do not apply
    left out.

    Parameters
    ----------
    profile : EngineProfile
        The run's engine profile.
    predict : str or None
        The corpus framework pricing the kernels.
    config : ModelConfig
        The model.
    device : str
        The catalog device.
    topology : Topology
        Its tp, dp and expert parallelism.

    Returns
    -------
    dict of str to str
    """
    t = topology
    notes = {
        "kernel_release_note": kernel_release_note(profile, predict, device),
        "moe_kernel_note": moe_kernel_note(profile, config, device, t.tp, t.dp, t.expert_parallel),
    }
    return {k: v for k, v in notes.items() if v}


def _fit_notes(
    request: SimulationRequest, fit: ServingFit | None, model: str, device: str, tp: int, config: Any
) -> list[str]:
    """The notes :func:`predict_file_line` says under a ``predict_file`` fit's line (fitted
    elsewhere, or on other formats), without their ``note:`` prefix; none without a fit."""
    if fit is None:
        return []
    lines = predict_file_line(str(request.predict_file), fit, model, device, tp, config).split("\n")
    return [ln.removeprefix("  note: ") for ln in lines[1:]]


def _engine_notes_of(
    request: SimulationRequest, config: Any, profile: EngineProfile, device: str, topology: Topology
) -> list[str]:
    """The notes on the engine a simulation runs, said by one run and by ``--max-rate`` alike:
    its KV pool and memory reserve, the kernels pricing it, its kernel notes
    (:func:`engine_kernel_notes`)."""
    from ..sim.engine import pool_memory_note

    out = [pool_memory_note(device)]
    out.append(
        profile.memory_note(
            topology.tp, int(config.num_hidden_layers), int(getattr(config, "vocab_size", 0) or 0)
        )
    )
    if request.predict and request.predict != profile.framework:
        out.append(
            f"{request.predict} kernels price engine {profile.ref}, whose own are {profile.framework}'s"
        )
    out += engine_kernel_notes(profile, request.predict, config, device, topology).values()
    return [note for note in out if note]


def _model_notes_of(request: SimulationRequest, config: Any, device: str, topology: Topology) -> list[str]:
    """The notes on the model and device, said by one run and by ``--max-rate`` alike: roof
    substitutions, a left-out MTP module, a sparse-attention tile, a tp group across scale-up
    domains."""
    from costmodel.hardware.fallback import roof_notes
    from graphs.blocks.mtp import mtp_notes
    from models.mixers.dsa import dsa_notes

    from ..step.compiled import sparse_tile

    spec = request.spec()
    plain_mtp = mtp_notes(config) if spec is None or spec.draft != "mtp" else ()  # MTP left out, said
    hw = get_device(device)  # a unit priced on another unit's roof; a tp group across domains
    # a DSA model's sparse-attention kernel: its form and the heads the device's tile pads
    sparse = dsa_notes(config, sparse_tile(config, hw), topology.tp)
    return [*roof_notes(hw), *plain_mtp, *sparse, *hw.group_notes(topology.tp)]


def _predicted(request: SimulationRequest, res: SimResult) -> list[str]:
    """What priced the iterations: the request's kernels, what their seconds rest on and the share
    clamped to the bound."""
    return predicted_lines(
        str(request.predict),
        res.device,
        res.coverage,
        what="every iteration's kernels",
        clamped_s=res.clamped_s,
    )


#: the columns the interval block's lines fit in (a 100-column terminal)
TEXT_WIDTH = 100


def _wrapped(text: str, indent: str, hanging: str) -> list[str]:
    """``text`` in lines of at most :data:`TEXT_WIDTH` columns, the first after ``indent``, the
    others after ``hanging``; names such as ``h100-sxm`` are never split."""
    return textwrap.wrap(
        text,
        width=TEXT_WIDTH,
        initial_indent=indent,
        subsequent_indent=hanging,
        break_on_hyphens=False,
        break_long_words=False,
    )


def _four_digits(v: float) -> str:
    """A fixed-point format spec printing ``v`` with four significant digits (a rate of 0.1514
    requests/s as ``0.1514``, not ``0.2``; 2,071 tokens/s as ``2,071``), thousands separated."""
    mag = math.floor(math.log10(abs(v))) if v and math.isfinite(v) else 0
    return f",.{min(max(3 - mag, 0), 6)}f"


def _interval_lines(iv: SimInterval) -> list[str]:
    """Each metric's P10-P90 interval beside its point value, tagged ``(a)``, ``(b)``... by what
    it rests on; each basis said once, wrapped, below the metrics (one tag per distinct basis),
    then the expected errors."""
    lo, hi = (round(100 * q) for q in iv.quantiles)
    out = _wrapped(
        f"P{lo}-P{hi} prediction interval (calibrated on whole simulations of validated deployments, "
        "never narrower than every kernel at that quantile of its held-out error):",
        "  ",
        "  ",
    )
    calibrated, basis = iv.calibrated, iv.basis
    tags: dict[str, str] = {}  # basis -> its tag, in the order the metrics first name it
    for label, (a, b) in calibrated.items():
        v = iv.value(label)
        fmt = ".4f" if label.endswith(" s") else _four_digits(v)
        n = len(tags)  # a, b, ... z, then 27, 28 ... (the metrics are seven)
        tag = tags.setdefault(basis[label], string.ascii_lowercase[n] if n < 26 else str(n + 1))
        out.append(f"    {label:16s} {v:{fmt}}  {interval_text(a, b, fmt)}  ({tag})")
    out.append("  what each interval rests on:")
    for why, tag in tags.items():
        out += _wrapped(f"({tag}) {why}", "    ", "        ")
    for line in iv.expected_errors():
        out += _wrapped(line, "  ", "    ")
    return out


@dataclass(frozen=True)
class SimulationReport:
    """One simulated run and everything ``costmodel simulate`` prints about it.

    Attributes
    ----------
    request : SimulationRequest
        The settings it ran with.
    config : ModelConfig
        The model simulated.
    result : SimResult
        The run (the interval's point value with ``interval``).
    profile : EngineProfile
        The engine profile as set up on the device.
    topology : Topology
        The replicas and how requests reach them.
    settings : str
        The workload in the command line's words (or what a replayed run took).
    cost : TokenCost or None
        The run's cost per million tokens (None: no price for the device).
    interval : SimInterval, optional
        The P10-P90 ends (``interval``).
    comparison : Comparison, optional
        ``compare``'s side-by-side.
    fit : ServingFit, optional
        The ``predict_file`` fit that priced it.
    stagger_s : float, optional
        A closed loop's first sends spread over this many seconds.
    """

    request: SimulationRequest
    config: ModelConfig
    result: SimResult
    profile: EngineProfile
    topology: Topology
    settings: str
    cost: TokenCost | None
    interval: SimInterval | None = None
    comparison: Comparison | None = None
    fit: ServingFit | None = None
    stagger_s: float | None = None

    @property
    def priced_by(self) -> str:
        """How the iterations were priced, in words (``bound``, ``predicted (vllm kernels)``,
        ``calibrated (FILE)``), for titles."""
        return _priced_by(self.request)

    @property
    def load(self) -> str:
        """The offered load in words, for titles (``at 20 requests/s``, ``with 8 clients``)."""
        r = self.request
        rate = (
            f"at {r.rate:g} requests/s"
            if r.rate is not None
            else ("" if self.result.concurrency else "of the trace")
        )
        clients = f"{self.result.concurrency} clients" if self.result.concurrency else ""
        return " with ".join(x for x in (rate, clients) if x)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain values (what ``simulate --json`` prints): the settings, the engine
        profile, the run, its cost, and the interval and comparison when run.

        Returns
        -------
        dict
        """
        doc = {
            "settings": self.settings,
            "engine": self.profile.to_dict(),
            **self.result.to_dict(),
            # the SLOs goodput and slo_attainment_fraction count against (None: not given)
            "slo_ttft_s": self.request.slo_ttft,
            "slo_tpot_s": self.request.slo_tpot,
            "cost": self.cost,
        }
        doc["engine"].update(
            engine_kernel_notes(
                self.profile, self.request.predict, self.config, self.result.device, self.topology
            )
        )
        if self.interval is not None:
            doc.update({k: v for k, v in self.interval.to_dict().items() if k not in ("point", "quantiles")})
        if self.comparison is not None:
            doc["comparison"] = self.comparison.to_dict()
        doc["notes"] = self.notes()  # what the text's head says: a program must not lose it
        return doc

    def to_text(self) -> str:
        """What ``costmodel simulate`` prints: what ran, the engine and notes, what priced it, the
        latency table, the interval and comparison, throughput, caches, routing, speculation,
        goodput and cost.

        Returns
        -------
        str
        """
        return "\n".join(self._head() + self._latencies() + self._throughput())

    def to_html(self, command: str = "") -> str:
        """The ``--html`` page (:func:`graphs.serving.present.html_studies.simulation_page`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from .html_studies import simulation_page

        return simulation_page(
            self.result,
            self.config,
            command=command,
            slo_ttft=self.request.slo_ttft,
            slo_tpot=self.request.slo_tpot,
            cost=self.cost,
            comparison=self.comparison,
        )

    def notes(self) -> list[str]:
        """Every note the text's head says (``note: ...``), in its order: the engine's KV pool and
        memory reserve, kernels of another framework, the engine's kernel notes, the device's roof
        substitutions, a left-out MTP module, a sparse-attention tile and a tp group across
        domains. ``to_dict`` carries them under ``"notes"``.

        Returns
        -------
        list of str
        """
        res = self.result
        fit = _fit_notes(self.request, self.fit, res.model, res.device, res.topology.tp, self.config)
        return self._engine_notes() + self._model_notes() + fit

    def _engine_notes(self) -> list[str]:
        """The notes on the engine (:func:`_engine_notes_of`)."""
        return _engine_notes_of(self.request, self.config, self.profile, self.result.device, self.topology)

    def _model_notes(self) -> list[str]:
        """The notes on the model and device (:func:`_model_notes_of`)."""
        return _model_notes_of(self.request, self.config, self.result.device, self.topology)

    def _head(self) -> list[str]:
        """The first lines: what ran, the workload, the engine, notes, what priced it."""
        from ..sim.data_parallel import dp_line

        res, topo, profile, req = self.result, self.topology, self.profile, self.request
        out = [
            f"{res.model} on {res.device}: {res.requests:,} requests over {res.duration_s:.1f} s, "
            f"{topo.devices} device(s), {res.iterations:,} iterations, {res.preemptions} preemption(s)",
            f"  {self.settings}",
        ]
        if topo.grouped:
            said = profile.sources.get("dp_load_balance", "")
            out.append(
                f"  {dp_line(topo, profile.dp_load_balance, profile.ref if said.startswith('ASSUMED') else '')}"
            )
        out.append(f"  {profile.summary()}")
        out += [f"  note: {note}" for note in self._engine_notes()]
        if self.stagger_s is not None:
            out.append(
                f"  closed loop: the clients' first sends drawn uniformly over {self.stagger_s:.3f} s (--seed {req.seed})"
            )
        out += [f"  note: {note}" for note in self._model_notes()]
        if self.fit is not None:
            out.append(
                predict_file_line(
                    str(req.predict_file), self.fit, res.model, res.device, res.topology.tp, self.config
                )
            )
        if res.overheads is not None:
            out.append(f"  {res.overheads}")
        if res.coverage is not None:
            out += _predicted(req, res)
        elif self.fit is None and not req.predict:
            out.append(f"  {bound_line(req.overhead_s)}")
        return out

    def _latencies(self) -> list[str]:
        """The latency table, the interval and the comparison."""
        res = self.result
        out = [f"  {'':10s} {'mean':>10s} {'P50':>10s} {'P90':>10s} {'P99':>10s}"]
        for name, s in (("TTFT s", res.ttft), ("TPOT s", res.tpot), ("E2E s", res.e2e)):
            if s.mean != s.mean:  # no samples (Summary.of): every request ended at its first token
                out.append(
                    f"  {name:10s} none: no request generated a second token (TPOT is the time between tokens)"
                )
                continue
            out.append(f"  {name:10s} {s.mean:10.4f} {s.p50:10.4f} {s.p90:10.4f} {s.p99:10.4f}")
        if self.interval is not None:
            out += _interval_lines(self.interval)
        if self.comparison is not None:
            out.append(
                "  side by side, the same requests (the bound: every kernel at its roofline, no engine time):"
            )
            out += self.comparison.lines()
        return out

    def _throughput(self) -> list[str]:
        """Throughput (closed loop, steady state, overall), the caches, routing, speculation,
        goodput and cost."""
        res, req = self.result, self.request
        out: list[str] = []
        if res.concurrency is not None:
            out += [
                f"  closed loop, {res.concurrency} client(s): {res.requests_per_s:.2f} requests/s, "
                f"{res.output_tokens_per_s:,.0f} output tokens/s ({res.output_tokens_per_s_per_device:,.0f} per device), "
                f"completed over the {res.duration_s:.1f} s from the first send to the last answer (as vllm bench "
                "serve and AIPerf count it)",
                "  no drain tail apart from it: a closed loop sends a request only when a client is free",
                f"  mean batch {res.mean_batch:.1f}, KV blocks {100 * res.mean_kv_utilisation:.0f}% used on average",
            ]
        elif res.steady_requests_per_s is not None and res.steady_output_tokens_per_s is not None:
            out.append(
                f"  steady-state throughput (first to last arrival, {res.steady_window_s:.1f} s) "
                f"{res.steady_requests_per_s:.2f} requests/s, {res.steady_output_tokens_per_s:,.0f} output tokens/s "
                f"({res.steady_output_tokens_per_s / self.topology.devices:,.0f} per device), arrivals "
                f"{res.offered_requests_per_s:.2f} requests/s"
            )
        else:
            out.append("  steady-state throughput: not defined (every request arrives at once)")
        if res.concurrency is None:
            out.append(
                f"  overall, the {res.drain_s:.1f} s drain tail after the last arrival included: "
                f"{res.requests_per_s:.2f} requests/s, {res.output_tokens_per_s:,.0f} output tokens/s; "
                f"mean batch {res.mean_batch:.1f}, KV blocks {100 * res.mean_kv_utilisation:.0f}% used on average"
            )
        if res.state_capped is not None:
            n, each = res.state_capped
            out.append(
                f"  running sequences capped at {n} (max_num_seqs lowered): the model keeps no KV per token, "
                f"each sequence's recurrent state ({each / 1e6:,.1f} MB) fills the pool"
            )
        shares = req.shared_prefix or req.prompt_pool or req.turns > 1
        if (
            res.prefix_cache_hits
            or req.enable_prefix_caching
            or (req.enable_prefix_caching is None and shares)
        ):
            out.append(f"  prefix cache hits: {res.prefix_cache_hits:,} admission(s)")
        if res.kv_tiers is not None:
            kt = res.kv_tiers
            gpu = res.prefix_cache_hits - kt.host_hits - kt.ssd_hits
            out.append(
                f"  prefix hits by tier: GPU {gpu:,}, host {kt.host_hits:,} loaded + {kt.host_recomputed:,} recomputed "
                f"instead, SSD {kt.ssd_hits:,} loaded + {kt.ssd_recomputed:,} recomputed instead (recomputing was "
                f"faster than the transfer); loads "
                f"{kt.load_s * 1e3:,.1f} ms in all over the {kt.host_bandwidth / 1e9:g} GB/s host link, "
                f"{kt.exposed_s * 1e3:,.1f} ms of it not hidden by compute (added to TTFTs)"
            )
        if res.prefix_routed is not None:
            out.append(
                f"  prefix router: {res.prefix_routed[0]:,} request(s) sent where their prefix or conversation is, "
                f"{res.prefix_routed[1]:,} sent elsewhere by the load bound (--prefix-eps {req.eps:g})"
            )
        if res.spec is not None:
            st = res.spec
            out.append(
                f"  speculative decoding ({st.draft} drafts k = {st.k}): {st.tokens_per_verification:.2f} tokens per "
                f"verification, {100 * st.acceptance:.1f}% of {st.drafted:,} drafted tokens accepted, the draft "
                f"{100 * st.draft_share:.1f}% of the forward time"
            )
        if res.goodput_requests_per_s is not None:
            out.append(
                f"  goodput {res.goodput_requests_per_s:.2f} requests/s over the whole run, drain tail included "
                f"({100 * (res.slo_attainment or 0):.1f}% meet the SLOs)"
            )
        out.append(f"  {cost_text(self.cost)}")
        return out


@dataclass(frozen=True)
class MaxRateReport:
    """``max_rate``'s search and everything ``costmodel simulate --max-rate`` prints about it.

    Attributes
    ----------
    request : SimulationRequest
        The settings it ran with (``max_rate`` on).
    config : ModelConfig
        The model simulated.
    search : MaxRate
        The probes, the rate found and the simulation there.
    profile : EngineProfile
        The engine profile as set up on the device (every probe runs it).
    topology : Topology
        The replicas and how requests reach them.
    cost : TokenCost or None
        The cost at the rate found (None: no rate, or no price for the device).
    fit : ServingFit, optional
        The ``predict_file`` fit that priced the probes.
    """

    request: SimulationRequest
    config: ModelConfig
    search: MaxRate
    profile: EngineProfile
    topology: Topology
    cost: TokenCost | None
    fit: ServingFit | None = None

    def to_dict(self) -> dict[str, Any]:
        """The search as plain values (what ``simulate --max-rate --json`` prints).

        Returns
        -------
        dict
        """
        bands = self.at_rate_bands
        doc = {
            **self.search.to_dict(),
            "engine": self.profile.to_dict(),
            "cost": self.cost,
            **({"at_rate_" + k: v for k, v in bands.to_dict().items()} if bands is not None else {}),
        }
        # as a single run's engine says them (every probe runs the same engine)
        device = get_device(self.request.device).name
        kernel_notes = engine_kernel_notes(
            self.profile, self.request.predict, self.config, device, self.topology
        )
        doc["engine"].update(kernel_notes)
        # what the text says beside the numbers: its notes and, where no rate was found, why
        doc["notes"] = [*self.notes(), *self._verdict()]
        return doc

    def notes(self) -> list[str]:
        """Every note the text's head says, in its order, as one ``simulate`` run says them (every
        probe runs the same engine and model): the engine's KV pool and memory reserve, kernels of
        another framework, the engine's kernel notes, the device's roof substitutions, a left-out
        MTP module, a sparse-attention tile, a tp group across domains, and the notes under a
        ``predict_file`` fit's line. ``to_dict`` carries them under ``"notes"``.

        Returns
        -------
        list of str
        """
        return self._engine_notes() + self._model_notes() + self._fit_notes()

    def _engine_notes(self) -> list[str]:
        """The notes on the engine (:func:`_engine_notes_of`)."""
        device = get_device(self.request.device).name
        return _engine_notes_of(self.request, self.config, self.profile, device, self.topology)

    def _model_notes(self) -> list[str]:
        """The notes on the model and device (:func:`_model_notes_of`)."""
        device = get_device(self.request.device).name
        return _model_notes_of(self.request, self.config, device, self.topology)

    def _fit_notes(self) -> list[str]:
        """The notes under the ``predict_file`` fit's line (none without one)."""
        req = self.request
        return _fit_notes(req, self.fit, self.config.name, req.device, self.topology.tp, self.config)

    def _verdict(self) -> list[str]:
        """Why no rate was found, as the text's last lines say it (none when one was): every
        probe met the SLOs (too few requests to load the deployment), or none did (and what each
        request alone takes)."""
        req, m = self.request, self.search
        if m.rate is not None:
            return []
        if not m.saturated:
            return [
                f"not determined: every probe up to the physical ceiling ({m.ceiling_rate:,.3f} requests/s, "
                f"the token-wise kernels back to back at their roofline) meets the SLOs; {req.requests:,} "
                "requests are too few to load the deployment (raise --requests)"
            ]
        out = ["no probed rate meets the SLOs"]
        if m.alone is not None:
            t, p = m.alone
            missed = [
                f"{name} {v:.4g} s > {slo:g} s"
                for name, v, slo in (("TTFT", t, req.slo_ttft), ("TPOT", p, req.slo_tpot))
                if slo is not None and v > slo
            ]
            out.append(
                f"each request alone (one client): P{req.slo_percentile:g} TTFT {t:.4g} s, TPOT {p:.4g} s"
                + (
                    f": {', '.join(missed)}, an SLO below what one request alone takes, which no rate meets"
                    if missed
                    else ": one at a time meets the SLOs; the lowest rates probed still queued"
                )
            )
        return out

    def _found(self) -> str:
        """How the max rate relates to the probes: the highest that met the SLOs (its number in
        the list, simulated at exactly that rate) and the lowest that missed above it."""
        m = self.search
        assert m.rate is not None
        met = next(n for n, p in enumerate(m.probes, 1) if p[0] == m.rate and p[1])
        above = [(p[0], n) for n, p in enumerate(m.probes, 1) if not p[1] and p[0] > m.rate]
        text = f"the highest probe that met the SLOs (probe {met}, simulated at exactly that rate)"
        if above:
            r, n = min(above)
            text += f"; the lowest that missed above it: {rate_text(r)} requests/s (probe {n})"
        return text

    @property
    def at_rate_bands(self) -> RunBands | None:
        """The calibrated bands and expected errors of the simulation at the rate found (with
        ``--predict``; None otherwise, or with no rate)."""
        m = self.search
        if m.at_rate is None or not self.request.predict:
            return None
        return run_bands(m.at_rate, Predictor.of(str(self.request.predict)), self.config.is_moe)

    def to_text(self) -> str:
        """What ``costmodel simulate --max-rate`` prints: the SLOs, the workload, the physical
        ceiling, the engine, each probe and the rate found with its cost.

        Returns
        -------
        str
        """
        req, m = self.request, self.search
        slos = " and ".join(
            f"{name} <= {v} s"
            for name, v in (("TTFT", req.slo_ttft), ("TPOT", req.slo_tpot))
            if v is not None
        )  # only the SLOs given (the rate search needs one at least)
        out = [
            f"{self.config.name} on {req.device}, {self.topology.devices} device(s): highest rate with "
            f"P{req.slo_percentile:g} {slos}",
            f"  {req.workload_text()}",
            f"  physical ceiling {m.ceiling_rate:,.3f} requests/s (the token-wise kernels back to back)",
            f"  {self.profile.summary()}",
        ]
        out += [f"  note: {note}" for note in self._engine_notes()]
        out += [f"  note: {note}" for note in self._model_notes()]
        if self.fit is None and not req.predict:
            out.append(f"  {bound_line(req.overhead_s)} (a rate found is a ceiling)")
        if self.fit is not None:
            out.append(
                predict_file_line(
                    str(req.predict_file),
                    self.fit,
                    self.config.name,
                    req.device,
                    self.topology.tp,
                    self.config,
                )
            )
        if m.at_rate is not None and m.at_rate.coverage is not None:
            out += _predicted(req, m.at_rate)
            out.append("  (coverage of the simulation at the max rate)")
        q = f"P{req.slo_percentile:g}"
        out.append(
            f"  probes in the order run (the same requests at each rate tried; {q} {slos} to meet the SLOs):"
        )
        for n, (rate, ok, t, p) in enumerate(m.probes, 1):
            missed = [
                name
                for name, v, slo in (("TTFT", t, req.slo_ttft), ("TPOT", p, req.slo_tpot))
                if slo is not None and v > slo
            ]
            verdict = "meets the SLOs" if ok else f"misses {' and '.join(missed) or 'the SLOs'}"
            out.append(
                f"  {n:3d}. rate {rate_text(rate):>9s} req/s  {q} TTFT {t:8.4g} s  TPOT {p:8.4g} s  {verdict}"
            )
        if m.rate is None:
            out += [f"  {line}" for line in self._verdict()]
        else:
            # the rate as simulated: a short number the probe ran at exactly, which --rate replays
            out.append(
                f"  max rate {rate_text(m.rate)} requests/s = {m.rate_per_device:.4g} requests/s per device "
                f"(--rate {m.rate!r} with the workload above replays the run at it)"
            )
            out.append(f"    {self._found()}")
            if m.rate_band is not None:
                out += _rate_band_lines(m)
            if m.at_rate is not None:
                out.append(f"  at that rate, {cost_text(self.cost)}")
            bands = self.at_rate_bands
            if bands is not None:
                for line in bands.expected_errors():
                    out += _wrapped(f"at that rate, {line}", "  ", "    ")
        return "\n".join(out)

    def to_html(self, command: str = "") -> str:
        """The ``--html`` page: the probes against the SLOs and the simulation at the rate found
        (:func:`graphs.serving.present.html_studies.simulation_page`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
        """
        from .html_studies import simulation_page

        return simulation_page(
            self.search,
            self.config,
            command=command,
            slo_ttft=self.request.slo_ttft,
            slo_tpot=self.request.slo_tpot,
            cost=self.cost,
        )


def _rate_band_lines(m: MaxRate) -> list[str]:
    """The max rate's P10-P90 (:attr:`MaxRate.rate_band`), what it rests on and the probes it took."""
    assert m.rate_band is not None and m.band_scales is not None
    lo, hi = m.rate_band

    def end(r: float | None, note: str) -> str:
        return note if r is None else f"{r:,.3f}"

    k_lo, k_hi = m.band_scales
    return [
        *_wrapped(
            f"P10-P90 of the max rate: [{end(lo, m.band_notes[0])}, {end(hi, m.band_notes[1])}] requests/s",
            "  ",
            "    ",
        ),
        *_wrapped(
            f"the same search with every iteration's kernels x{k_hi:.3f} (P10 rate) and x{k_lo:.3f} (P90 "
            "rate): the ends of the calibrated TPOT band at the rate found over its simulated TPOT, a "
            "decode step's time being what TPOT measures; the scheduler's reaction, queueing and TTFT "
            f"follow in each run; {len(m.band_probes)} more simulation(s)",
            "    ",
            "    ",
        ),
    ]


@dataclass(frozen=True)
class RateSweepReport:
    """``rates``' sweep: one :class:`SimulationReport` a rate, in the order given.

    Attributes
    ----------
    request : SimulationRequest
        The settings it ran with (``rates`` given).
    runs : tuple of SimulationReport
        Each rate's run (its request's ``rate`` that rate).
    """

    request: SimulationRequest
    runs: tuple[SimulationReport, ...]
    #: with ``--predict``, each run's calibrated bands and expected errors (one a run, in order)
    bands: tuple[RunBands, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The sweep as plain values (what ``simulate --rates --json`` prints): each run's
        :meth:`SimulationReport.to_dict` (its rate under ``rate_requests_per_s``) and, with ``--predict``, its calibrated
        ``interval``, ``interval_basis`` and ``expected_error`` (:class:`RunBands`).

        Returns
        -------
        dict
        """
        bands = self.bands or (None,) * len(self.runs)
        return {
            "rates": [
                {**r.to_dict(), **(b.to_dict() if b is not None else {})}
                for r, b in zip(self.runs, bands, strict=True)
            ]
        }

    def to_text(self) -> str:
        """What ``costmodel simulate --rates`` prints: what ran (the first run's head: the
        workload, engine, notes and pricing, the same at every rate) and one line a rate: its
        TTFT and TPOT percentiles (s), steady-state output tokens/s, goodput where SLOs are given,
        and USD per million tokens.

        Returns
        -------
        str
        """
        first = self.runs[0]
        res = first.result
        head = first._head()
        out = [
            f"{res.model} on {res.device}: {len(self.runs)} rate(s), {res.requests:,} requests each, "
            f"{first.topology.devices} device(s)",
            *head[1:],
        ]
        slo = self.request.slo_ttft is not None or self.request.slo_tpot is not None
        cols = f"  {'req/s':>10s} {'TTFT P50 s':>10s} {'TTFT P99 s':>10s} {'TPOT P50 s':>10s} {'TPOT P99 s':>10s} {'out tok/s':>10s}"
        out.append(cols + (f" {'goodput':>8s}" if slo else "") + f" {'$/M tok':>8s}")

        def pct(v: float) -> str:  # no samples: every request ended at its first token (no TPOT)
            return f"{v:10.4g}" if v == v else f"{'-':>10s}"

        for r in self.runs:
            x = r.result
            tok = (
                x.steady_output_tokens_per_s
                if x.steady_output_tokens_per_s is not None
                else x.output_tokens_per_s
            )
            lats = " ".join(pct(v) for v in (x.ttft.p50, x.ttft.p99, x.tpot.p50, x.tpot.p99))
            line = f"  {r.request.rate:10,.6g} {lats} {tok:10,.0f}"
            if slo:
                g = x.goodput_requests_per_s
                line += f" {g:8,.1f}" if g is not None else f" {'-':>8s}"
            c = r.cost
            line += f" {c.usd_per_m_tokens:8.3g}" if c is not None else f" {'-':>8s}"
            out.append(line)
        good = (
            "goodput: requests/s meeting the SLOs over the whole run, drain tail included (its window "
            "is not out tok/s's); "
            if slo
            else ""
        )
        out.append(
            f"  out tok/s: steady state (first to last arrival); {good}"
            "$/M tok: the deployment's $/h over every served token"
        )
        if self.bands:
            out += _sweep_band_lines(self.runs, self.bands)
        return "\n".join(out)


#: the sweep's banded metrics: (label in :data:`~graphs.serving.sim.intervals.METRICS`, column, format)
_SWEEP_BANDS = (
    ("TTFT mean s", "TTFT mean s", ".4g"),
    ("TPOT mean s", "TPOT mean s", ".4g"),
    ("E2E mean s", "E2E mean s", ".4g"),
    ("output tokens/s", "output tokens/s", ",.0f"),
)


def _sweep_band_lines(runs: Sequence[SimulationReport], bands: Sequence[RunBands]) -> list[str]:
    """A sweep's calibrated P10-P90 of each rate's means, one line a rate, then what they rest on
    and the expected errors, each distinct line said once with the rates it holds for."""
    out = _wrapped(
        "P10-P90 of each rate's means, as the value and its ends in % of it (calibrated on whole "
        "simulations of validated deployments, at each run's own regime; the kernels' own interval "
        "is not run in a sweep: --rate R adds it):",
        "  ",
        "  ",
    )
    out.append(f"  {'req/s':>10s}" + "".join(f"  {col:>20s}" for _, col, _ in _SWEEP_BANDS))
    said: dict[str, list[str]] = {}  # a basis or an expected error -> the rates it holds for
    for r, b in zip(runs, bands, strict=True):
        cal = b.calibrated
        cells = []
        for label, _, fmt in _SWEEP_BANDS:
            v = b.value(label)
            if label in cal and v > 0:
                lo, hi = cal[label]
                cells.append(f"{v:{fmt}} {100 * (lo / v - 1):+.0f}/{100 * (hi / v - 1):+.0f}%")
            else:
                cells.append("-")
        out.append(f"  {r.request.rate:10,.6g}" + "".join(f"  {c:>20s}" for c in cells))
        rate = f"{r.request.rate:,.6g}"
        shown = {label for label, _, _ in _SWEEP_BANDS}
        for label, why in b.basis.items():
            if label in shown:
                said.setdefault(f"{label}: {why}", []).append(rate)
        for line in b.expected_errors():
            said.setdefault(line, []).append(rate)
    everyone = len(runs)
    out += _wrapped(
        "output tokens/s: over the run's duration (the drain after the last arrival included), as "
        "validated; the table's out tok/s is the steady state",
        "  ",
        "    ",
    )
    out.append("  what each band rests on, and the expected error on deployments like these:")
    for line, at in said.items():
        where = "" if len(at) == everyone else f"at {', '.join(at)} req/s: "
        out += _wrapped(f"{where}{line}", "    ", "        ")
    return out


def run_simulation(
    request: SimulationRequest,
    config: ModelConfig | str,
    *,
    predictor: Predictor | None = None,
    fit: ServingFit | None = None,
    rates: Rates | None = None,
    check_context: ContextCheck | None = None,
    progress: Progress | None = None,
    executor: Any = None,
    at_once: int = 2,
) -> SimulationReport | MaxRateReport | RateSweepReport:
    """Run what ``request`` asks for on ``config`` and return its report (module doc).

    Parameters
    ----------
    request : SimulationRequest
        The checked settings (``max_rate`` on: the rate search).
    config : ModelConfig or str
        The model (its dtypes applied), or a catalog name or ``config.json`` path
        (:func:`models.resolver.resolve_model`).
    predictor : Predictor, optional
        What prices the kernels (None: ``request.predict``'s, dynamic FP8 scales; the bound
        without ``predict``).
    fit : ServingFit, optional
        ``request.predict_file`` already read (None: read here when the request names one; its
        predictor framework must be ``request.predict``).
    rates : Rates, optional
        Device prices for the cost line (None: the catalog's sourced price, no electricity).
    check_context : callable, optional
        ``check_context(tokens, field)`` refusing a request longer than the model's context (None:
        :meth:`ModelConfig.check_context`).
    progress : callable, optional
        ``progress(done, total)`` of the requests simulated (of the probes under ``max_rate``, the
        runs under ``rates``).
    executor : Any, optional
        A Dask ``Client`` or ``concurrent.futures`` executor ``max_rate``'s probes run on,
        ``at_once`` a round (:func:`~graphs.serving.planning.capacity_search.max_rate`: the same
        rate to its ``rel_tol``), or ``rates``' runs, all at once (the same runs); None: this
        process.
    at_once : int
        With ``executor``: the rates probed at once.

    Returns
    -------
    SimulationReport, MaxRateReport or RateSweepReport
        The run's report, the search's with ``max_rate``, the sweep's with ``rates``.

    Raises
    ------
    CostModelError
        When the fit's framework differs from ``request.predict``, a replayed file holds several runs
        and none is picked, or a request is longer than the model's context.
    """
    if not isinstance(request, SimulationRequest):
        raise CostModelError(
            f"request must be a SimulationRequest, got {type(request).__name__} {repr(request)[:40]}"
        )
    if not isinstance(config, ModelConfig):  # a catalog name or config.json path, as simulate takes
        from models.resolver import resolve_model

        config = resolve_model(config)
    if fit is None and request.predict_file:
        fit = read_fit(request.predict_file)
    if fit is not None and fit.predict != request.predict:
        raise CostModelError(
            f"--predict-file {str(request.predict_file)[:200]!r} was fitted with {fit.predict or 'the bound'}: "
            f"give predict={fit.predict!r} with it"
        )
    if fit is not None:  # its kernel scale absorbed the MoE kernel it was priced with
        check_fit_kernel(
            fit,
            request.engine,
            config,
            request.device,
            tp=request.tp,
            dp=request.dp,
            expert_parallel=request.enable_expert_parallel,
            where=f"--predict-file {str(request.predict_file)[:200]!r}",
        )
    if predictor is None:
        predictor = Predictor.of(request.predict)
    predictor = predictor.for_engine(request.engine)  # the MoE kernels the engine runs
    if rates is None:
        rates = device_rates(request.device)
    if check_context is None:
        check_context = config.check_context
    if request.rates is not None:
        return _sweep(request, config, predictor, fit, rates, check_context, progress, executor)
    topo = request.topology()
    # the defaults it picks there, as one data-parallel rank runs them
    profile = request.engine.for_device(get_device(request.device), topo.tp, topo.dp).for_data_parallel(
        topo.dp
    )
    if request.max_rate:
        where = (executor, at_once)
        return _max_rate_run(request, config, profile, topo, fit, predictor, rates, progress, where)
    trace, replayed, replay_said, reqs = _requests(request, check_context)
    concurrency = replayed.concurrency if replayed is not None else request.concurrency
    eng = engine_config(request, config, request.engine, reqs)  # its rank's split made once, there
    overheads = _overheads(request, profile, eng, fit)
    run = _run_settings(request, config, reqs, eng, topo, overheads, predictor, concurrency)
    run["progress"] = progress
    interval = None
    if request.interval:
        interval = simulate_interval(config, request.device, reqs, predictor=predictor, **run)
        res = interval.point
    else:
        res = simulate(config, request.device, reqs, predictor=predictor, **run)
    comparison = None
    if request.compare:  # with a fit, the profile's own terms price a "predicted" column beside it
        plain = _overheads(request, profile, eng, None) if fit is not None and request.predict else None
        comparison = _comparison(request, config, reqs, run, res, interval, replayed, predictor, plain)
    return SimulationReport(
        request=request,
        config=config,
        result=res,
        profile=profile,
        topology=topo,
        settings=replay_said or request.workload_text(trace),
        cost=sim_cost(res, rates),
        interval=interval,
        comparison=comparison,
        fit=fit,
        stagger_s=run.get("stagger_s"),
    )


def _sweep(
    request: SimulationRequest,
    config: ModelConfig,
    predictor: Predictor,
    fit: ServingFit | None,
    rates: Rates,
    check_context: ContextCheck,
    progress: Progress | None,
    executor: Any,
) -> RateSweepReport:
    """``rates``: the request at each rate, its requests checked against the context here (the
    check may be the caller's, which a worker lacks), each run where ``executor`` puts it, the
    lowest rate started first: the same requests at a lower rate span a longer time in more,
    smaller iterations, so it costs at least as much to simulate (``--rates 5,10,20,40``, 30,000
    requests: 8.2, 6.1, 3.7 and 1.6 s), and the longest first end soonest on a few workers
    (:func:`~graphs.serving.planning.executors.map_ordered`)."""
    # each rate one run (no kernel-end runs: the sweep's bands are the calibrated ones alone)
    runs = [dataclasses.replace(request, rates=None, rate=r, interval=False) for r in request.rate_list]
    for one in runs:
        _requests(one, check_context)
    devices = {request.device: get_device(request.device)}  # as this process resolves it
    total = len(runs)
    reports = map_ordered(
        executor,
        _rate_run,
        [(one, config, predictor, fit, rates, devices) for one in runs],
        each=(lambda done: progress(done, total)) if progress else None,
        first=sorted(range(total), key=lambda i: runs[i].rate or 0.0),
    )
    bands = (
        tuple(b for r in reports if (b := run_bands(r.result, predictor, config.is_moe)) is not None)
        if request.predict and request.interval
        else ()
    )
    return RateSweepReport(request, tuple(reports), bands if len(bands) == len(reports) else ())


def _rate_run(
    request: SimulationRequest,
    config: ModelConfig,
    predictor: Predictor,
    fit: ServingFit | None,
    rates: Rates,
    devices: dict[str, Any],
) -> SimulationReport:
    """One rate of a sweep (here or in a worker: the device registered there as the caller
    resolved it; the requests' context checked by the caller)."""
    known_devices(devices)
    out = run_simulation(request, config, predictor=predictor, fit=fit, rates=rates, check_context=_checked)
    assert isinstance(out, SimulationReport)  # a request of one rate
    return out


def _checked(tokens: int, field: str) -> None:
    """The context check of a sweep's run: done by the caller before it was sent."""


def _request_tokens(request: SimulationRequest, reqs: Sequence[Request] | None = None) -> int | None:
    """Prompt + output tokens of every request when they are all equal (the no-evict cap of an
    engine that reserves blocks at admission), else None: from the requests, or from ``fixed:``
    lengths of single-turn drawn requests (what ``max_rate`` draws)."""
    if reqs is not None:
        sizes = {r.prompt + r.output for r in reqs}
        return sizes.pop() if len(sizes) == 1 else None
    r = request
    if r.trace or r.turns > 1 or r.shared_prefix or r.prompt_pool:
        return None
    if r.prompt.startswith("fixed:") and r.output.startswith("fixed:"):
        try:
            return int(r.prompt[6:]) + int(r.output[6:])
        except ValueError:
            return None
    return None


def engine_config(
    request: SimulationRequest,
    config: ModelConfig,
    profile: EngineProfile,
    reqs: Sequence[Request] | None = None,
) -> EngineConfig:
    """The :class:`~graphs.serving.sim.engine.EngineConfig` a run simulates: ``profile`` (the
    request's engine as set up on its device) with the request's settings over it, for ``config``
    (:func:`graphs.serving.sim.engine.profile_engine`).

    Parameters
    ----------
    request : SimulationRequest
        The run's settings (tp, dp, prefix caching, overhead, KV blocks, scheduler policy).
    config : ModelConfig
        The model.
    profile : EngineProfile
        The engine profile as registered (with the user's settings), not set up for a device or
        a data-parallel rank: :func:`~graphs.serving.sim.engine.profile_engine` does both, once
        (a rank's profile is refused there).
    reqs : sequence of Request, optional
        The requests (their common length caps a no-evict engine's admission); None: from the
        request's ``fixed:`` lengths, as ``max_rate`` draws them.

    Returns
    -------
    EngineConfig
    """
    eng = profile_engine(
        profile,
        config,
        request.device,
        tp=request.tp,
        dp=request.dp,
        request_tokens=_request_tokens(request, reqs),
        enable_prefix_caching=request.enable_prefix_caching,  # None: the profile's
        iteration_overhead_s=request.overhead_s,
        num_blocks=request.num_blocks,
        expert_parallel=request.enable_expert_parallel,
    )
    if request.scheduler_policy:  # an explicit policy holds whatever overheads the run takes
        eng = dataclasses.replace(eng, scheduler_policy=request.scheduler_policy)
    return eng


def _overheads(
    request: SimulationRequest, profile: EngineProfile, eng: EngineConfig, fit: ServingFit | None
) -> EngineOverheads | None:
    """The engine overheads: a fit's; else the profile's CPU terms, capture sizes and policy when
    ``predict`` prices the kernels; for the bound the profile's policy alone (None under recompute:
    the bound runs exactly as it did before profiles)."""
    if fit is not None:
        return fit.overheads
    if request.predict:
        return profile.overheads(
            max_num_seqs=eng.max_num_seqs, max_num_batched_tokens=eng.max_num_batched_tokens
        )
    return profile.overheads(terms=False) if profile.policy != "recompute" else None


def _workload_from(request: SimulationRequest) -> tuple[BenchRun, str]:
    """``workload_from``'s run (``workload_run`` picks one of several) with ``shared_prefix``
    for a run that names none, and what the replay takes from it in words."""
    path = str(request.workload_from)
    runs = read_results(path, seed=request.seed)
    k = request.workload_run
    if k is None and len(runs) > 1:
        rates = ", ".join(f"{i}: {r.label}" for i, r in enumerate(runs))
        raise CostModelError(
            f"--workload-from {path[:200]!r} holds {len(runs)} runs ({rates[:400]}): pick one with --workload-run INDEX"
        )
    if k is not None and not 0 <= k < len(runs):
        raise CostModelError(f"--workload-run {k}: {path[:200]!r} holds runs 0 to {len(runs) - 1}")
    run = runs[k or 0].with_shared_prefix(request.shared_prefix)
    return run, f"workload from {path[:200]} ({run.source}): {replay_text(run, request.seed)}"


def _requests(
    request: SimulationRequest, check_context: ContextCheck
) -> tuple[Trace | None, BenchRun | None, str, list[Request]]:
    """The run's requests: a trace's, a replayed run's, or drawn (:func:`graphs.serving.sim.requests.synthetic`);
    checked against the model's context. Returns ``(trace, replayed run, what the replay took, requests)``."""
    trace = read_trace(request.trace) if request.trace else None
    replayed, replay_said = _workload_from(request) if request.workload_from else (None, "")
    if trace is not None:
        reqs = list(trace.requests)
    elif replayed is not None:
        reqs = list(replayed.requests)
    else:
        reqs = list(
            synthetic(
                request.requests,
                rate=request.rate,
                prompt=request.prompt,
                output=request.output,
                arrival=request.arrival,
                seed=request.seed,
                shared_prefix=request.shared_prefix,
                prompt_pool=request.prompt_pool or 0,
                turns=request.turns,
                think_s=request.think_time,
            )
        )
    longest = max(r.prompt + r.output for r in reqs)  # the most a sequence holds: its prompt and answer
    field = (
        "the trace's prompt + output"
        if trace is not None
        else f"{replayed.source}'s prompt + output"
        if replayed is not None
        else "--prompt + --output"
    )
    check_context(longest, field)
    return trace, replayed, replay_said, reqs


def _run_settings(
    request: SimulationRequest,
    config: ModelConfig,
    reqs: Sequence[Request],
    eng: EngineConfig,
    topo: Topology,
    overheads: EngineOverheads | None,
    predictor: Predictor,
    concurrency: int | None,
) -> dict[str, Any]:
    """The keyword arguments every simulation of this run takes (the interval's ends, the
    comparison's bound): SLOs, load, topology, engine, overheads, and a closed loop's stagger."""
    run: dict[str, Any] = dict(
        slo_ttft=request.slo_ttft,
        slo_tpot=request.slo_tpot,
        rate=request.rate,
        concurrency=concurrency,
        spec=request.spec(),
        kv_tiers=request.kv_tiers(),
        overheads=overheads,
        topology=topo,
        engine=eng,
    )
    if request.stagger == "cycle":  # one run started together measures the cycle the loop spreads over
        assert concurrency is not None  # the request refuses a stagger without clients
        others = {k: v for k, v in run.items() if k != "concurrency"}
        run["stagger_s"] = steady_stagger_s(
            config, request.device, reqs, concurrency=concurrency, predictor=predictor, **others
        )
    elif request.stagger is not None:
        run["stagger_s"] = float(request.stagger)
    if "stagger_s" in run:
        run["stagger_seed"] = request.seed
    return run


def _comparison(
    request: SimulationRequest,
    config: ModelConfig,
    reqs: Sequence[Request],
    run: dict[str, Any],
    res: SimResult,
    interval: SimInterval | None,
    replayed: BenchRun | None,
    predictor: Predictor,
    plain_overheads: EngineOverheads | None = None,
) -> Comparison:
    """``compare``: the bound (the same requests, every kernel at its roofline, no engine time),
    with a fit the prediction under the engine profile's own terms (``plain_overheads``), this run
    (predicted with its interval, or calibrated) and, with ``workload_from``, the measured run."""
    if request.predict or request.predict_file:
        bound_run = {**run, "overheads": EngineOverheads(), "progress": None}
        bound = simulate(config, request.device, reqs, predictor=None, **bound_run)
        cols = [sim_column("bound", bound)]
        if plain_overheads is not None:  # the same kernels under the profile's terms, not the fit's
            plain_run = {**run, "overheads": plain_overheads, "progress": None}
            plain = simulate(config, request.device, reqs, predictor=predictor, **plain_run)
            cols.append(sim_column(f"predicted ({request.predict} kernels)", plain))
        cols.append(sim_column(_priced_by(request), res, interval.calibrated if interval else None))
    else:
        cols = [sim_column("bound", res)]
    measured = None
    if replayed is not None:
        measured = f"measured ({os.path.basename(str(request.workload_from))})"
        cols.append(measured_column(measured, replayed))
    return compare(res.model, res.device, cols, measured=measured)


def _max_rate_run(
    request: SimulationRequest,
    config: ModelConfig,
    profile: EngineProfile,
    topo: Topology,
    fit: ServingFit | None,
    predictor: Predictor,
    rates: Rates,
    progress: Progress | None,
    where: tuple[Any, int] = (None, 1),
) -> MaxRateReport:
    """``max_rate``: the highest rate meeting the SLOs, every probe on the same engine; ``where``:
    the executor the probes run on and how many a round."""
    eng = engine_config(request, config, request.engine)  # the undivided profile: split once, there
    m = max_rate(
        config,
        request.device,
        slo_ttft=request.slo_ttft,
        slo_tpot=request.slo_tpot,
        requests=request.requests,
        prompt=request.prompt,
        output=request.output,
        arrival=request.arrival,
        seed=request.seed,
        percentile=request.slo_percentile,
        progress=progress,
        predictor=predictor,
        overheads=_overheads(request, profile, eng, fit),  # every probe with the same engine
        topology=topo,
        engine=eng,
        executor=where[0],
        at_once=where[1],
        interval=bool(request.interval),
    )
    cost = sim_cost(m.at_rate, rates) if m.at_rate else None
    return MaxRateReport(request, config, m, profile, topo, cost, fit)
