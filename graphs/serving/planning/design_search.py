"""Design-space search: devices x dtypes x (tp, pp, ep, micro-batches) x batch x context.

Every point is one way to serve a model: a device type, weight and KV dtypes, a parallel plan
and a batch of sequences decoding at a context. Its numbers come from the compiled steps
(:mod:`graphs.serving.step.compiled`), evaluated on whole blocks of the grid at once:

* **TPOT** (s): the plan's decode step, as :func:`graphs.serving.analysis.parallel.parallel_plan` computes
  it: ``(m + pp - 1) (T(b, ctx) / pp + hop(b)) + 2 m L_moe a2a(b)`` with ``b = B / m`` sequences
  per micro-batch, ``T`` the compiled per-kernel decode step of the tp/ep graph, ``hop`` the
  stage-to-stage activation transfer and ``a2a`` one expert all-to-all;
* **TTFT** (s): one prompt of ``prompt`` tokens (default: the point's context) prefilled on the
  plan with nothing queued: ``T_prefill(1, prompt) + (pp - 1) hop(prompt) + 2 L_moe a2a(prompt)``;
* **memory per device** (bytes): the decode ledger at ``tp`` (weights, KV cache, activations,
  overhead) with the routed experts split ``ep`` ways and everything split evenly over the ``pp``
  stages (the embedding and lm_head sit on the end stages in practice: an approximation);
* tokens/s per user ``1 / TPOT``, tokens/s per device ``B / TPOT / (tp pp ep)``, and energy per
  token ``P (tp pp ep) TPOT / B`` (TDP: an estimate at full power).

A data-parallel plan (``dp > 1``, an MoE model: ``dp`` attention ranks of ``tp`` devices, each
with its own scheduler and KV cache, the experts over all ``dp x tp`` devices,
:mod:`graphs.serving.sim.data_parallel`) is priced by the simulator's own group step
(:func:`graphs.serving.sim.data_parallel.group_step`, :meth:`RankStep.lockstep_s`), point by point:

* **TPOT**: one lockstep iteration with every rank decoding ``B / dp`` sequences at the context,
  ``t_rank(B/dp) - X_tp(B/dp) + X_{dp tp}(B) + L_moe (dispatch + combine)(B)``: what
  ``simulate --dp`` prices for that batch (no engine overheads, as every plan here);
* **TTFT**: one rank prefilling the prompt alone, the other ranks idle;
* **memory per device**: the decode ledger of one rank at ``B / dp`` sequences less the routed
  experts it does not hold, ``E_tp (1 - 1/dp)`` (:func:`graphs.serving.analysis.parallel.dp_weights_saved`,
  the rule the simulator sizes each rank's KV pool by);
* devices ``dp x tp``; a point is valid when ``dp`` divides the batch and ``pp = m = 1``.

The context is a workload coordinate, not a knob (one frontier over several contexts would only
ever pick the shortest, whose KV reads are cheapest): each context gets its own frontier, and the
result holds them all, ordered by context. Points that do not fit in memory, whose micro-batches
do not divide the batch, or that miss an SLO are dropped; per context, the Pareto frontier of
tokens/s per user against tokens/s per device (optionally also energy per token, minimised) is
kept. A device named twice, or by two aliases (``h100``, ``h100-sxm``), is refused, naming it. The grid is cut into blocks; each block
reduces to its own frontier, and the frontiers merge (the frontier of a union is the frontier
of the union of the parts' frontiers). Blocks run in this process or, with a
``dask.distributed.Client``, on a cluster: each worker compiles a configuration once and keeps
only its block's frontier, so a grid of 1e9-1e10 points never exists in one memory.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import numpy as np

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.frontier import compile_expr, pareto_mask
from costmodel.hardware import Hardware, get_device
from costmodel.keys import LinkName, Phase
from costmodel.memo import BoundedCache
from costmodel.results import Result
from models.catalog import get_model
from models.config import ModelConfig

from ..analysis.parallel import MICROBATCH, comm_forms, dp_weights_saved, routed_expert_bytes
from ..pricing.kernel_sources import Coverage
from ..pricing.predictor import BOUND, Predictor
from ..pricing.priced import PricedStep, priced_step
from ..sim.data_parallel import DISPATCHES, MeteredRankStep, RankStep, check_group, experts_line, group_step
from ..sim.specdec_sim import spec_forms
from ..step.fit_check import nothing_fits_line
from ..step.ledger_fit import decode_memory, engine_pool_note
from ..step.workload import as_workload
from .cost import MISSING_CELLS, check_prices, device_rates, missing_cells, usd_per_m
from .plan_cards import plan_forms
from .search_plans import Plan, grid_size, plans_of, positive_ints

__all__ = ["RANK_BY", "SearchResult", "search", "Plan", "grid_size", "FRONTIER_COLUMNS"]

#: numeric columns of a frontier point, in order
METRICS = (
    "tpot_s",
    "ttft_s",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "energy_per_token_j",
    "memory_bytes",
    #: USD/h of the plan's devices over its B / TPOT output tokens/s, per 1e6: the point 100 % busy
    #: decoding (graphs.serving.planning.cost.usd_per_m, the definition every command uses)
    "usd_per_m_output",
)

#: a frontier point's keys, in order (``search --csv``'s header, also for an empty frontier)
FRONTIER_COLUMNS = (
    "device",
    "weight_dtype",
    "kv_dtype",
    "tp",
    "pp",
    "ep",
    "dp",
    "expert_parallel",
    "microbatches",
    "devices",
    "batch",
    "ctx",
    "plan",
    *METRICS,
)


@dataclass(frozen=True)
class _Block:
    """A task: one plan and a slice of its (pp, m, batch, ctx) grid, with the SLOs."""

    plan: Plan
    grid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  #: the four axes
    start: int
    stop: int
    prompt: int | None
    slo_ttft: float | None
    slo_tpot: float | None
    energy: bool
    cost: bool = False  #: USD per million output tokens as an objective (minimised)
    usd_per_hour: float = math.nan  #: the plan's device, all in (nan: no price)
    spec: Any = None  #: speculative decoding (graphs.serving.sim.specdec_sim.SpecConfig), tp plans only
    predictor: Predictor = BOUND


class _Settings(TypedDict):
    """What every block of one search shares (_Block's last fields)."""

    prompt: int | None
    slo_ttft: float | None
    slo_tpot: float | None
    energy: bool
    cost: bool
    spec: Any
    predictor: Predictor


@dataclass
class _Partial:
    """What a block reduces to: counts and its frontier points (coordinates, metrics, plan index)."""

    points: int = 0
    valid: int = 0
    fits: int = 0
    meets_slo: int = 0
    meets_ttft: int = 0  #: points that fit and meet the TTFT SLO, the TPOT one aside
    meets_tpot: int = 0  #: ... the TPOT SLO, the TTFT one aside
    best_ttft: float = math.inf  #: the lowest TTFT of the points that fit
    best_tpot: float = math.inf  #: the lowest TPOT of the points that fit
    #: the valid point that needs the least share of its device's memory: (share, bytes needed per
    #: device, the device's capacity, plan, batch, ctx); None: no valid point
    least_need: tuple[float, float, float, str, int, int] | None = None
    coords: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    metrics: np.ndarray = field(default_factory=lambda: np.zeros((0, len(METRICS))))
    plan: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))


@dataclass(frozen=True)
class SearchResult(Result):
    """The search's counts and its Pareto frontier (fastest user first), with the winners named."""

    model: str
    points: int  #: grid points evaluated
    valid: int  #: micro-batches divide the batch (and a pipelined plan's device has the stage link)
    fits: int  #: ... and the memory fits the device
    meets_slo: int  #: ... and TTFT and TPOT meet the SLOs
    objectives: tuple[str, ...]
    frontier: tuple[dict[str, Any], ...]
    best: dict[str, dict[str, Any]]  #: the winner per objective, when the grid has one context
    #: plans left out because tp x ep exceeds the device's scale-up domain and it has no scale-out link
    #: (an NVLink bridge of 2 PCIe cards)
    beyond_domain: tuple[str, ...] = ()
    best_by_ctx: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)  #: winners per context
    contexts: int = 0  #: contexts with a frontier
    duplicates: tuple[str, ...] = ()  #: plans equal to another (the model's own dtype by name), searched once
    #: what the search substituted or assumed, said once each: the matmul dtype each weight dtype runs
    #: with per device, a weight dtype replacing the routed experts' own, what --enable-expert-parallel
    #: means for dp 1 plans (the name is older than the last two)
    dtype_notes: tuple[str, ...] = ()
    predictor: str = "roofline bound"  #: what priced the steps (:attr:`Predictor.label`)
    #: a predicted search's frontier decode steps (summed) by what they rest on (None: the bound)
    coverage: Coverage | None = None
    #: what the data-parallel plans (dp > 1) assume, in one line (None: none searched)
    group_note: str | None = None
    meets_slo_ttft: int = 0  #: points that fit and meet the TTFT SLO (the TPOT one aside)
    meets_slo_tpot: int = 0  #: points that fit and meet the TPOT SLO (the TTFT one aside)
    best_ttft_s: float | None = None  #: the lowest TTFT of the points that fit (None: none fits)
    best_tpot_s: float | None = None  #: the lowest TPOT of the points that fit (None: none fits)
    #: the valid point needing the least share of its device's memory, when none fits: ``plan``,
    #: ``batch``, ``ctx``, ``needed_bytes`` (per device) and ``capacity_bytes`` (None: one fits)
    least_need: dict[str, Any] | None = None
    slo_ttft: float | None = None  #: the TTFT SLO searched with (seconds; None: none)
    slo_tpot: float | None = None  #: the TPOT SLO searched with (seconds; None: none)

    def verdict(self, slo_ttft: float | None = None, slo_tpot: float | None = None) -> list[str]:
        """Why the frontier is empty, in lines (none when it is not): no valid plan, nothing that
        fits in memory (the point needing the least, against its device), or no point that fits
        meets the SLOs (each SLO no point meets, with the lowest value seen; or each met alone by
        some, never both), as ``simulate --max-rate`` says that no probed rate meets them.

        Parameters
        ----------
        slo_ttft, slo_tpot : float or None
            The SLOs to judge by (seconds; None: those the search ran with, :attr:`slo_ttft` and
            :attr:`slo_tpot`).

        Returns
        -------
        list of str
        """
        if self.frontier:
            return []
        slo_ttft = self.slo_ttft if slo_ttft is None else slo_ttft
        slo_tpot = self.slo_tpot if slo_tpot is None else slo_tpot
        if not self.valid:
            dp = " or, for a data-parallel plan, by its dp" if self.group_note is not None else ""
            return [
                f"no valid plan: no batch is divisible by its micro-batches{dp} (or no pipelined plan's "
                "device has a stage link)"
            ]
        if not self.fits and self.least_need is not None:
            n = self.least_need
            point = f"{n['plan']} at batch {n['batch']} and ctx {n['ctx']}"
            return [nothing_fits_line(point, n["needed_bytes"], n["capacity_bytes"])]
        if not self.fits:
            return ["nothing fits in memory"]
        given = [
            (name, flag, slo, met, best)
            for name, flag, slo, met, best in (
                ("TTFT", "--slo-ttft", slo_ttft, self.meets_slo_ttft, self.best_ttft_s),
                ("TPOT", "--slo-tpot", slo_tpot, self.meets_slo_tpot, self.best_tpot_s),
            )
            if slo is not None
        ]
        missed = [
            f"the lowest {name} is {best:.4g} s > {slo:g} s ({flag})"
            for name, flag, slo, met, best in given
            if not met and best is not None
        ]
        if not given:  # no SLO: every point that fits is on some frontier
            return []
        if not missed:  # each SLO met by some point, never both at once
            missed = [
                " and ".join(f"{met:,} meet {name} <= {slo:g} s" for name, _, slo, met, _ in given)
                + ", none both"
            ]
        return [f"no point meets the SLOs: of the {self.fits:,} points that fit, {'; '.join(missed)}"]

    def to_text(self, *, top: int = 20, predicted: Sequence[str] = (), spec: Any = None) -> str:
        """The search in lines, as ``costmodel search`` prints it.

        Parameters
        ----------
        top : int
            Frontier rows to show (0: all): the two ends and an even spread between them.
        predicted : sequence of str
            What priced the steps, said after the counts (a predicted search's coverage lines).
        spec : SpecConfig, optional
            The speculative decoding every point ran, said once.

        Returns
        -------
        str
            The counts, notes, the frontier table (a metric a device has no figure for shown as
            :data:`_MISSING` says) and each context's winners.
        """
        from costmodel.report import format_table

        cost = "usd_per_m_output" in self.objectives
        per = f" over {self.contexts} contexts, one frontier each" if self.contexts > 1 else ""
        out = [
            f"{self.model}: {self.points:,} points; {self.valid:,} valid plans, {self.fits:,} fit in memory, "
            f"{self.meets_slo:,} meet the SLOs; Pareto frontier ({len(self.frontier)} points{per}, "
            f"{' vs '.join(self.objectives)}), by context, fastest user first:",
            *predicted,
        ]
        if spec is not None:
            out.append(
                f"  speculative decoding: {spec.draft} drafts k = {spec.k}, {spec.expected_tokens():.2f} expected "
                "tokens per verification; TPOT is the verify and draft steps over them"
            )
        if self.group_note:
            out.append(f"  {self.group_note}")
        out += [f"  note: {note}" for note in self.dtype_notes]
        if self.duplicates:
            out.append(f"  searched once, given twice: {', '.join(self.duplicates)}")
        if self.beyond_domain:
            out.append(
                "  left out, wider than the device's scale-up domain, with no scale_out link to price it over: "
                + ", ".join(self.beyond_domain)
            )
        cols = _COLUMNS + ((("usd_per_m_output", "$/M out 100% busy", ".4g"),) if cost else ())
        rows = list(self.frontier)
        if top and len(rows) > top:  # keep the ends and an even spread between them
            step = (len(rows) - 1) / (top - 1) if top > 1 else len(rows)
            rows = [rows[round(i * step)] for i in range(top)] if top > 1 else rows[:1]
        if len(rows) < len(self.frontier):
            out.append(
                f"  showing {len(rows)} of {len(self.frontier)} frontier points (--top 0 for all, --csv or --json)"
            )
        out.append(format_table(*_shown(rows, cols)))
        unpriced = sorted({r["device"] for r in self.frontier if cost and r["usd_per_m_output"] is None})
        if unpriced:
            out.append(
                f"  {', '.join(unpriced)}: no price: pass --price-per-hour (the cost objective ranks them last)"
            )
        energy = "energy_per_token_j" in self.objectives
        no_tdp = sorted({r["device"] for r in self.frontier if energy and r["energy_per_token_j"] is None})
        if no_tdp:  # said as a missing price is: the objective ranks them last, no winner among them
            out.append(
                f"  {', '.join(no_tdp)}: no TDP (power_w), so no energy per token: the energy objective "
                "ranks them last"
            )
        winners = list(self.best_by_ctx.items())
        most = len(winners) if not top else 3  # winners of the first contexts; top 0: all
        for ctx, best in winners[:most]:
            head = f"  ctx {ctx}: " if len(winners) > 1 else "  "
            out += [
                f"{head}{winner_words(name)}: {row['plan']}, batch {row['batch']}"
                for name, row in best.items()
            ]
        if len(winners) > most:
            out.append(f"  winners shown for {most} of {len(winners)} contexts (--top 0 or --json for all)")
        return "\n".join(out)


#: the frontier table's columns: (row key, heading, format)
_COLUMNS = (
    ("plan", "plan", "s"),
    ("batch", "batch", "s"),
    ("ctx", "ctx", "s"),
    ("ttft_s", "TTFT s", ".4g"),
    ("tpot_s", "TPOT s", ".4g"),
    ("tokens_per_s_per_user", "tok/s/user", ".1f"),
    ("tokens_per_s_per_device", "tok/s/device", ".1f"),
    ("energy_per_token_j", "J/token", ".4g"),
)
#: what a table cell says for a metric the device has no figure for (None in the rows)
_MISSING = MISSING_CELLS
#: the rows and columns with those cells as text (:func:`.cost.missing_cells`)
_shown = missing_cells


def _ep_note(expert_parallel: bool, dps: np.ndarray) -> tuple[str, ...]:
    """What ``expert_parallel`` means for a search that also holds ``dp 1`` plans: it shapes the
    data-parallel groups only; a dp 1 plan is priced tensor-parallel (each expert split tp ways),
    where ``simulate`` and ``size`` with ``--enable-expert-parallel`` at dp 1 run whole experts
    per rank of the tp group (a different step: said, not silently the same words)."""
    if not expert_parallel or not (dps == 1).any():
        return ()
    return (
        "--enable-expert-parallel shapes the dp > 1 plans only: the dp 1 plans here are tensor-parallel "
        "(each expert split tp ways); simulate and size run it at dp 1 as whole experts per rank of the tp group",
    )


class _Compiled:
    """The numpy functions one plan needs (built once per process per plan)."""

    def __init__(self, plan: Plan, link: str, predictor: Predictor = BOUND) -> None:
        cfg, hw = plan.config, plan.device
        self.decode: Any
        self.prefill: Any
        self.hop: Callable[..., Any]
        self.a2a: Callable[..., Any]
        if predictor.is_bound:  # kept across processes as a card (plan_cards): compiled once
            forms = plan_forms(cfg, hw, plan.tp, plan.ep, link)
            self.decode, self.prefill, self.memory = forms.decode, forms.prefill, forms.memory
            self.routed_bytes, self.hop, self.a2a = forms.routed_bytes, forms.hop, forms.a2a
        else:
            self.decode = priced_step(cfg, hw, Phase.DECODE, tp=plan.tp, ep=plan.ep, predictor=predictor)
            self.prefill = priced_step(cfg, hw, Phase.PREFILL, tp=plan.tp, ep=plan.ep, predictor=predictor)
            self.memory = decode_memory(cfg, hw, tp=plan.tp)
            self.routed_bytes = self.decode.memo(
                "routed_expert_bytes", lambda: routed_expert_bytes(plan.config, plan.tp)
            )
            hop, a2a = comm_forms(cfg, hw, link, plan.ep, plan.tp * plan.ep)  # ranks across tp x ep devices
            self.hop = compile_expr(hop, (MICROBATCH,))
            self.a2a = compile_expr(a2a, (MICROBATCH,))
        self.moe_layers = as_float(cfg.n_moe_layers) if cfg.is_moe else 0.0
        self.capacity = as_float(hw.memory_bytes())
        self.power = as_float(hw.power_w) if hw.power_w is not None else math.nan


class _CompiledGroup:
    """What a data-parallel plan needs (module doc): the simulator's group step, the rank's
    decode ledger and the expert bytes a device of the group does not hold."""

    def __init__(self, plan: Plan, predictor: Predictor = BOUND) -> None:
        cfg, hw = plan.config, plan.device
        self.step: RankStep = group_step(
            as_workload(cfg),
            hw,
            dp=plan.dp,
            tp=plan.tp,
            expert_parallel=plan.expert_parallel,
            dispatch=plan.dispatch,
            predictor=predictor,
        )
        self.memory = decode_memory(cfg, hw, tp=plan.tp)
        self.saved_bytes = dp_weights_saved(cfg, plan.tp, plan.dp)
        self.capacity = as_float(hw.memory_bytes())
        self.power = as_float(hw.power_w) if hw.power_w is not None else math.nan

    def decode_s(self, per_rank: float, ctx: float) -> float:
        """One lockstep decode iteration, every rank at ``per_rank`` sequences of KV length ``ctx`` (s)."""
        n = int(per_rank)
        return self.step.lockstep_s(n, n * ctx)

    def prefill_s(self, prompt: float) -> float:
        """One rank prefilling ``prompt`` tokens alone, the others idle (s)."""
        return self.step.lockstep_s(0, 0.0, [(prompt, 0.0)], busy=1)


_COMPILED: BoundedCache[_Compiled] = BoundedCache("search_plan", 512)
_GROUPS: BoundedCache[_CompiledGroup] = BoundedCache("search_group", 64)


def _compiled(plan: Plan, link: str = LinkName.SCALE_UP, predictor: Predictor = BOUND) -> _Compiled:
    return _COMPILED.get_or_build((plan, link, predictor), lambda: _Compiled(plan, link, predictor))


def _group(plan: Plan, predictor: Predictor = BOUND) -> _CompiledGroup:
    return _GROUPS.get_or_build((plan, predictor), lambda: _CompiledGroup(plan, predictor))


def _pointwise(f: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """``f`` at each point of equal-length ``arrays``, evaluated once per distinct point."""
    if not len(arrays[0]):
        return np.zeros(0)
    pts, inv = np.unique(np.column_stack(arrays), axis=0, return_inverse=True)
    vals = np.array([f(*p) for p in pts.tolist()], dtype=float)
    return vals[inv.reshape(-1)]


def _evaluate_group(block: _Block, pp: np.ndarray, m: np.ndarray, b: np.ndarray, ctx: np.ndarray) -> _Partial:
    """A data-parallel plan's block (module doc): its points evaluated one by one (each distinct
    once) by the group step."""
    plan = block.plan
    g = _group(plan, block.predictor)
    out = _Partial(points=len(b))
    valid = (pp == 1) & (m == 1) & (np.mod(b, plan.dp) == 0)
    out.valid = int(valid.sum())
    n = b / plan.dp  # sequences per rank
    mem = g.memory(n, ctx) - g.saved_bytes
    fits = valid & (mem <= g.capacity)
    out.fits = int(fits.sum())
    _least_need(block, out, valid, mem, g.capacity, (pp, m, b, ctx))
    tpot = np.full(len(b), np.inf)
    ttft = np.full(len(b), np.inf)
    sel = np.flatnonzero(fits)
    prompt = ctx if block.prompt is None else np.full_like(ctx, block.prompt)
    tpot[sel] = _pointwise(g.decode_s, n[sel], ctx[sel])
    ttft[sel] = _pointwise(g.prefill_s, prompt[sel])
    return _reduce(block, out, fits, (pp, m, b, ctx), tpot, ttft, mem, g.power)


def _evaluate(block: _Block) -> _Partial:
    """Evaluate one block of one plan's grid and reduce it to its frontier."""
    plan = block.plan
    shape = tuple(len(a) for a in block.grid)
    idx = np.unravel_index(np.arange(block.start, block.stop), shape)
    pp, m, b, ctx = (a[i].astype(float) for a, i in zip(block.grid, idx, strict=True))
    if plan.dp > 1:
        return _evaluate_group(block, pp, m, b, ctx)
    c = _compiled(plan, predictor=block.predictor)
    out = _Partial(points=len(b))
    valid = np.mod(b, m) == 0
    out.valid = int(valid.sum())
    mb = b / m
    t_model = c.decode.step_array(mb, ctx)
    sf = (
        spec_forms(plan.config, plan.device, plan.tp, block.spec, block.predictor)
        if block.spec is not None
        else None
    )
    if sf is not None:  # per output token: the verify and the draft's steps over E tokens
        t_model = sf.tpot(mb, ctx)
    hop_mb = np.where(pp > 1, c.hop(mb), 0.0)
    staged = np.isfinite(hop_mb)  # a device without the stage link runs no pipelined plan
    valid &= staged
    out.valid = int(valid.sum())
    tpot = (m + pp - 1) * (t_model / pp + hop_mb)
    if plan.ep > 1:
        tpot = tpot + 2 * c.a2a(mb) * c.moe_layers * m
    prompt = ctx if block.prompt is None else np.full_like(ctx, block.prompt)
    ttft = c.prefill.step_array(np.ones_like(prompt), prompt) + (pp - 1) * np.where(
        pp > 1, c.hop(prompt), 0.0
    )
    if sf is not None:
        ttft = ttft + sf.ttft_extra(prompt)
    if plan.ep > 1:
        ttft = ttft + 2 * c.a2a(prompt) * c.moe_layers
    mem = (c.memory(b, ctx) - c.routed_bytes * (1 - 1 / plan.ep)) / pp
    if sf is not None:
        mem = mem + sf.memory(b, ctx)
    fits = valid & (mem <= c.capacity)
    out.fits = int(fits.sum())
    _least_need(block, out, valid, mem, c.capacity, (pp, m, b, ctx))
    return _reduce(block, out, fits, (pp, m, b, ctx), tpot, ttft, mem, c.power)


def _reduce(
    block: _Block,
    out: _Partial,
    fits: np.ndarray,
    coords: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    tpot: np.ndarray,
    ttft: np.ndarray,
    mem: np.ndarray,
    power: float,
) -> _Partial:
    """The points that fit and meet the SLOs, their metrics, reduced to the block's frontier."""
    pp, m, b, ctx = coords
    plan = block.plan
    ok = fits.copy()
    if fits.any():  # what the points that fit reach: why none meets an SLO, said
        out.best_ttft, out.best_tpot = float(np.min(ttft[fits])), float(np.min(tpot[fits]))
    if block.slo_tpot is not None:
        ok &= tpot <= block.slo_tpot
        out.meets_tpot = int((fits & (tpot <= block.slo_tpot)).sum())
    if block.slo_ttft is not None:
        ok &= ttft <= block.slo_ttft
        out.meets_ttft = int((fits & (ttft <= block.slo_ttft)).sum())
    out.meets_slo = int(ok.sum())
    if not ok.any():
        return out
    sel = np.flatnonzero(ok)
    devices = plan.devices * pp[sel]
    per_user = 1 / tpot[sel]
    per_device = b[sel] / tpot[sel] / devices
    energy = power * devices * tpot[sel] / b[sel]
    usd = usd_per_m(block.usd_per_hour * devices, b[sel] / tpot[sel])  # 100 % busy decoding
    metrics = np.column_stack([tpot[sel], ttft[sel], per_user, per_device, energy, mem[sel], usd])
    keep = _front(metrics, block.energy, ctx=ctx[sel], cost=block.cost)
    out.coords = np.column_stack([pp[sel], m[sel], b[sel], ctx[sel]])[keep]
    out.metrics = metrics[keep]
    out.plan = np.zeros(len(out.metrics), dtype=int)
    return out


def _least_need(
    block: _Block,
    out: _Partial,
    valid: np.ndarray,
    mem: np.ndarray,
    capacity: float,
    coords: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Keep in ``out`` the valid point needing the least share of its device's memory (what a
    search where nothing fits says)."""
    sel = np.flatnonzero(valid)
    if not len(sel) or not capacity > 0:
        return
    i = int(sel[np.argmin(mem[sel])])
    pp, m, b, ctx = (float(a[i]) for a in coords)
    share = float(mem[i]) / capacity
    if out.least_need is None or share < out.least_need[0]:
        plan = block.plan
        out.least_need = (share, float(mem[i]), capacity, _plan_text(plan, int(pp), int(m)), int(b), int(ctx))


def _plan_text(plan: Plan, pp: int, m: int) -> str:
    """A plan as a frontier row names it: ``h100-sxm bf16/bf16 tp1 pp1 ep1 m1``."""
    dev, wd, kvd, tp, ep = plan.label
    dp = f"dp{plan.dp} " if plan.dp > 1 else ""
    moe = f" ({'experts whole' if plan.expert_parallel else 'experts split'}, {plan.dispatch})" if dp else ""
    return f"{dev} {wd}/{kvd} {dp}tp{tp} pp{pp} ep{ep} m{m}{moe}"


def _front(
    metrics: np.ndarray,
    energy: bool,
    group: np.ndarray | None = None,
    ctx: np.ndarray | None = None,
    cost: bool = False,
) -> np.ndarray:
    """Pareto mask: tokens/s per user and per device maximised (and energy per token minimised),
    within each context of ``ctx`` (a workload coordinate: points at different contexts never
    dominate each other).

    With energy: on one device, energy per token is ``P / (tokens/s per device)``, so within a
    ``group`` (one device) the third objective orders points as the second does and a point
    dominated in 2-D by a point of its own device is dominated in 3-D too. Only each device's
    2-D front can be on the 3-D front; the three objectives are resolved on their union. Cost
    (USD per million output tokens, ``c / (tokens/s per device)`` on one device of price ``c``)
    has the same form and joins (or replaces) energy the same way.
    """
    if ctx is not None and len(ctx):
        mask = np.zeros(len(metrics), dtype=bool)
        for c in np.unique(ctx):
            idx = np.flatnonzero(ctx == c)
            mask[idx] = _front(metrics[idx], energy, None if group is None else group[idx], cost=cost)
        return mask
    two_d = metrics[:, [2, 3]]
    extra = [4] * energy + [6] * cost
    if not extra:
        return pareto_mask(two_d, (True, True))
    group = np.zeros(len(metrics), dtype=int) if group is None else group
    cand = np.zeros(len(metrics), dtype=bool)
    for gid in np.unique(group):
        idx = np.flatnonzero(group == gid)
        cand[idx[pareto_mask(two_d[idx], (True, True))]] = True
    idx = np.flatnonzero(cand)
    pts = metrics[idx][:, [2, 3, *extra]]
    pts[:, 2:] = np.where(np.isfinite(pts[:, 2:]), pts[:, 2:], np.inf)  # no power or price: the worst
    mask = np.zeros(len(metrics), dtype=bool)
    mask[idx[pareto_mask(pts, (True, True) + (False,) * len(extra))]] = True
    return mask


def _blocks(
    plans: Sequence[Plan],
    grid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    size: int,
    hourly: Sequence[float] = (),
    **kw: Unpack[_Settings],
) -> Iterator[tuple[int, _Block]]:
    n = int(np.prod([len(a) for a in grid]))
    for i, plan in enumerate(plans):
        usd = hourly[i] if hourly else math.nan
        for lo in range(0, n, size):
            yield i, _Block(plan, grid, lo, min(n, lo + size), **kw, usd_per_hour=usd)


def _merge(
    parts: Sequence[_Partial], energy: bool, devices: np.ndarray | None = None, cost: bool = False
) -> _Partial:
    """Counts summed, frontiers merged (``devices[plan]``: the device group of each plan)."""
    total = _Partial()
    for p in parts:
        total.points += p.points
        total.valid += p.valid
        total.fits += p.fits
        total.meets_slo += p.meets_slo
        total.meets_ttft += p.meets_ttft
        total.meets_tpot += p.meets_tpot
        total.best_ttft = min(total.best_ttft, p.best_ttft)
        total.best_tpot = min(total.best_tpot, p.best_tpot)
        if p.least_need is not None and (total.least_need is None or p.least_need[0] < total.least_need[0]):
            total.least_need = p.least_need
    with_pts = [p for p in parts if len(p.metrics)]
    if not with_pts:
        return total
    coords = np.concatenate([p.coords for p in with_pts])
    metrics = np.concatenate([p.metrics for p in with_pts])
    plan = np.concatenate([p.plan for p in with_pts])
    keep = _front(
        metrics, energy, devices[plan] if devices is not None else None, ctx=coords[:, 3], cost=cost
    )
    total.coords, total.metrics, total.plan = coords[keep], metrics[keep], plan[keep]
    return total


#: what a predicted search ranks by: the prediction, or the pessimistic end of its interval
RANK_BY = ("point", "pessimistic")

#: most grid points one search takes (beyond this, use a Dask cluster: ``client=``)
MAX_LOCAL_POINTS = 2 * 10**8


def search(
    config: ModelConfig | str,
    *,
    devices: Sequence[str | Hardware],
    batches: Sequence[int],
    ctxs: Sequence[int],
    tp: Sequence[int] = (1,),
    pp: Sequence[int] = (1,),
    ep: Sequence[int] = (1,),
    microbatches: Sequence[int] = (1,),
    weight_dtypes: Sequence[str | None] = (None,),
    kv_dtypes: Sequence[str | None] = (None,),
    prompt: int | None = None,
    slo_ttft: float | None = None,
    slo_tpot: float | None = None,
    energy: bool = False,
    cost: bool = False,
    prices: Mapping[str, float] | None = None,
    electricity_per_kwh: float = 0.0,
    client: Any = None,
    block: int = 1 << 20,
    progress: Callable[[int, int], None] | None = None,
    spec: Any = None,
    predictor: Predictor | None = None,
    rank_by: str = "point",
    dp: Sequence[int] = (1,),
    expert_parallel: bool = False,
    moe_dispatch: str = "allgather_reducescatter",
) -> SearchResult:
    """Evaluate the whole grid and return its Pareto frontier (module doc).

    ``client``: a ``dask.distributed.Client``; blocks then run on its workers and only their
    frontiers come back. ``progress(done, total)`` is called as blocks complete. ``cost``: USD
    per million output tokens as an objective, minimised, at ``prices`` (USD per device-hour by
    device name or alias, else the catalog's) plus TDP at ``electricity_per_kwh``; a device without a
    price is never on the cost front unless it wins on the other objectives. ``spec``: every
    point decodes speculatively (a :class:`graphs.serving.sim.specdec_sim.SpecConfig`; its TPOT
    the verify and draft steps over the expected tokens, :class:`~graphs.serving.sim.specdec_sim.SpecForms`),
    for plans of tensor parallelism only.
    ``predictor`` prices every step (:mod:`graphs.serving.pricing.priced`; default the bound); ``rank_by``
    in :data:`RANK_BY`: ``pessimistic`` evaluates, filters and ranks every point at the
    pessimistic end of its prediction interval (:meth:`Predictor.interval`), ``point`` at the
    prediction. ``dp``: data-parallel attention ranks (an MoE model; 1: none), each ``dp > 1``
    plan priced by the simulator's group step (module doc) with its experts whole per device
    (``expert_parallel``) or split ``dp x tp`` ways, reached by ``moe_dispatch`` (one of
    :data:`graphs.serving.sim.data_parallel.DISPATCHES`).

    Parameters
    ----------
    config : ModelConfig or str
        The model, or its catalog name.
    devices : sequence of str or Hardware
        The device types searched (catalog names, aliases or specs); a repeat (also by an alias) is
        refused.
    batches : sequence of int
        The batch sizes searched (sequences decoding together, >= 1).
    ctxs : sequence of int
        The contexts searched (tokens per sequence, >= 1); each gets its own frontier.
    tp, pp, ep : sequence of int
        The tensor-, pipeline- and expert-parallel degrees searched (default 1 each); every ``pp``
        divides the layers, ``ep > 1`` needs an MoE model.
    microbatches : sequence of int
        The micro-batch counts ``m`` searched (default 1); a point is valid when ``m`` divides the
        batch.
    weight_dtypes, kv_dtypes : sequence of str or None
        The weight and KV-cache dtypes searched (None: the model's own); a repeat (also by an
        alias, as ``fp8`` and ``fp8_e4m3``) is refused, as one of ``devices`` is.
    prompt : int or None
        The TTFT prompt length (tokens, >= 1); None: the point's context.
    slo_ttft, slo_tpot : float or None
        Service-level objectives (s, positive): points whose TTFT or TPOT exceeds them are
        dropped; None: no limit.
    energy : bool
        Also minimise energy per token (J/token, at TDP).
    cost : bool
        Also minimise USD per million output tokens.
    prices : mapping of str to float or None
        USD per device-hour by device name or alias (``h100`` prices ``h100-sxm``), each key one
        of ``devices``, each price in :data:`~graphs.serving.planning.cost.PRICE_RANGE`; a device
        missing from it takes the catalog's price.
    electricity_per_kwh : float
        USD per kWh of TDP added to the hourly price (default 0).
    client : Any
        A ``dask.distributed.Client`` to run the blocks on; None: this process (at most
        :data:`MAX_LOCAL_POINTS` points).
    block : int
        Grid points per block (>= 1, default 2**20).
    progress : callable or None
        Called as ``progress(done, total)`` (grid points) as blocks complete.
    spec : Any
        A :class:`graphs.serving.sim.specdec_sim.SpecConfig`: every point decodes speculatively
        (tensor-parallel plans only); None: plain decoding.
    predictor : Predictor or None
        Prices every step; None: the roofline bound.
    rank_by : str
        One of :data:`RANK_BY`: ``point`` (the prediction) or ``pessimistic`` (the P90 end of
        its interval; needs a predictor).
    dp : sequence of int
        The data-parallel attention ranks searched (default 1: none; > 1 needs an MoE model).
    expert_parallel : bool
        With ``dp > 1``: whole experts per device, else each expert split ``dp x tp`` ways.
    moe_dispatch : str
        With ``dp > 1``: how tokens reach the experts, one of
        :data:`graphs.serving.sim.data_parallel.DISPATCHES`.

    Returns
    -------
    SearchResult
        The counts (points, valid, fitting, meeting the SLOs), the frontier per context and the
        winners per objective, with the plans left out, repeats, dtype notes, the predictor's
        label and coverage.

    Raises
    ------
    CostModelError
        When an axis or knob is out of range (an empty or non-positive axis, a ``pp`` that does
        not divide the layers, ``ep`` or ``dp > 1`` on a dense model, an unknown ``rank_by`` or
        ``moe_dispatch``, ``pessimistic`` without a predictor, group knobs without ``dp > 1``),
        ``prices`` or ``electricity_per_kwh`` without ``cost``, the grid exceeds
        :data:`MAX_LOCAL_POINTS` without a client, ``spec`` meets a plan other
        than tensor parallelism, every plan is wider than its scale-up domain, or a device or dtype is
        given twice (also by an alias).
    """
    pred = predictor or Predictor()
    if rank_by not in RANK_BY:
        raise CostModelError(f"rank_by {rank_by!r} not allowed; allowed: {', '.join(RANK_BY)}")
    if rank_by == "pessimistic":
        if pred.is_bound:
            raise CostModelError("rank_by pessimistic needs a predictor (the bound has no interval)")
        pred = pred.interval()[1]
    cfg = get_model(config) if isinstance(config, str) else config
    if isinstance(devices, str | Hardware) or not isinstance(devices, Sequence):
        raise CostModelError(
            f"devices must be a list of device names or specs, got {type(devices).__name__} {repr(devices)[:40]}"
        )
    if not devices:
        raise CostModelError("devices: give at least one device")
    tps, pps, eps, mbs, dps = (
        positive_ints(v, n)
        for v, n in ((tp, "tp"), (pp, "pp"), (ep, "ep"), (microbatches, "microbatches"), (dp, "dp"))
    )
    bs, cs = positive_ints(batches, "batches"), positive_ints(ctxs, "ctxs")
    for name, slo in (("slo_ttft", slo_ttft), ("slo_tpot", slo_tpot)):
        if slo is not None and not (isinstance(slo, int | float) and slo > 0 and math.isfinite(slo)):
            raise CostModelError(f"{name} must be a positive number of seconds, got {slo!r}")
    if prompt is not None and (not isinstance(prompt, int) or prompt < 1):
        raise CostModelError(f"prompt must be a positive whole number of tokens, got {prompt!r}")
    check_prompt_within(prompt, cs.tolist())
    if block < 1:
        raise CostModelError(f"block must be >= 1, got {block}")
    if not cost and (prices or electricity_per_kwh):  # were ignored, unsaid (SearchRequest refuses it)
        raise CostModelError(
            "prices and electricity_per_kwh price the cost objective: pass cost=True (else they are unused)"
        )
    layers = int(as_float(cfg.num_hidden_layers))
    bad_pp = [p for p in pps.tolist() if layers % p]
    if bad_pp:
        shown = ", ".join(map(str, bad_pp[:8])) + (f" and {len(bad_pp) - 8} more" if len(bad_pp) > 8 else "")
        divisors = [d for d in range(1, layers + 1) if layers % d == 0]
        raise CostModelError(
            f"pp {shown} must divide the {layers} layers of {cfg.name} (its divisors: "
            + ", ".join(map(str, divisors[:16]))
            + (", ..." if len(divisors) > 16 else "")
            + ")"
        )
    if (eps > 1).any() and not cfg.is_moe:
        raise CostModelError(f"{cfg.name} has no experts: expert parallelism (ep > 1) needs a MoE model")
    check_group(int(dps.max()), cfg.is_moe)
    if not isinstance(expert_parallel, bool):
        raise CostModelError(f"expert_parallel must be true or false, got {expert_parallel!r}")
    if moe_dispatch not in DISPATCHES:
        raise CostModelError(f"moe_dispatch must be one of {', '.join(DISPATCHES)}, got {moe_dispatch!r}")
    if (expert_parallel or moe_dispatch != DISPATCHES[0]) and not (dps > 1).any():
        raise CostModelError("expert_parallel and moe_dispatch shape a data-parallel group: they need dp > 1")
    if (dps > 1).all() and not ((pps == 1).any() and (mbs == 1).any()):
        # a group's points are valid at pp 1 and one micro-batch only (_evaluate_group)
        raise CostModelError(
            f"dp {sorted(set(dps.tolist()))} with pp {sorted(set(pps.tolist()))} and microbatches "
            f"{sorted(set(mbs.tolist()))}: a data-parallel group runs pp 1 and one micro-batch, so every point "
            "would be invalid; give pp 1 and microbatches 1 among them"
        )
    plans, beyond, dups, dtype_notes = plans_of(
        cfg,
        devices,
        weight_dtypes,
        kv_dtypes,
        tps.tolist(),
        eps.tolist(),
        dps.tolist(),
        expert_parallel,
        moe_dispatch,
    )
    grid = (pps, mbs, bs, cs)
    total = grid_size(len(plans), pps, mbs, bs, cs)
    if client is None and total > MAX_LOCAL_POINTS:
        raise CostModelError(
            f"the grid has {total:,} points; at most {MAX_LOCAL_POINTS:,} run in one process (pass a Dask client)"
        )
    if spec is not None and ((pps > 1).any() or (mbs > 1).any() or (eps > 1).any() or (dps > 1).any()):
        raise CostModelError(
            "speculative decoding in search prices tensor-parallel plans only: pp, microbatches, ep and dp must be 1"
        )
    kw = _Settings(
        prompt=prompt,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        energy=energy,
        cost=cost,
        spec=spec,
        predictor=pred,
    )
    given = check_prices(prices, [get_device(d) for d in devices])  # by alias too, each checked
    rates = {
        p.device.name: device_rates(p.device, given.get(p.device.name), electricity_per_kwh) for p in plans
    }
    hourly = [rates[p.device.name].usd_per_hour(1.0) or math.nan for p in plans]
    done = 0
    parts: list[_Partial] = []

    def collect(i: int, part: _Partial) -> None:
        nonlocal done
        part.plan = np.full(len(part.metrics), i, dtype=int)
        parts.append(part)
        done += part.points
        if progress:
            progress(done, total)

    if client is None:
        for i, blk in _blocks(plans, grid, block, hourly, **kw):
            collect(i, _evaluate(blk))
    else:
        # the optional [dask] extra loads only when a cluster evaluates the search
        from distributed import as_completed

        futures = {}
        for i, blk in _blocks(plans, grid, block, hourly, **kw):
            futures[client.submit(_evaluate, blk, pure=False)] = i
        for fut in as_completed(list(futures)):
            collect(futures[fut], fut.result())
            fut.release()
    names = sorted({p.device.name for p in plans})
    merged = _merge(parts, energy, np.array([names.index(p.device.name) for p in plans]), cost=cost)
    return dataclasses.replace(
        _result(cfg.name, plans, merged, energy, cost),
        beyond_domain=tuple(sorted(set(beyond))),
        duplicates=dups,
        dtype_notes=dtype_notes
        + _ep_note(expert_parallel, dps)
        + ((engine_pool_note(pred.framework),) if pred.framework else ()),
        predictor=pred.label,
        coverage=None if pred.is_bound else _coverage(plans, merged, pred, spec),
        group_note=_group_note(plans),
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
    )


def _group_note(plans: Sequence[Plan]) -> str | None:
    """The data-parallel plans' assumptions, once (:func:`graphs.serving.sim.data_parallel.experts_line`)."""
    group = next((p for p in plans if p.dp > 1), None)
    if group is None:
        return None
    return (
        "data-parallel plans (dp > 1): dp attention ranks x tp, each its own KV cache, stepping together "
        "(TPOT: every rank at batch / dp; TTFT: one rank's prefill alone); "
        + experts_line(group.expert_parallel, group.dispatch, "dp x tp")
    )


def _coverage(plans: Sequence[Plan], p: _Partial, pred: Predictor, spec: Any = None) -> Coverage | None:
    """The frontier points' decode steps (per micro-batch), summed, by what they rest on; with
    ``spec``, the verify and draft steps their TPOT is priced from (:meth:`SpecForms.coverage`)."""
    total: Coverage | None = None
    for i in np.unique(p.plan).tolist():
        sel = p.plan == i
        mb, ctx = p.coords[sel, 2] / p.coords[sel, 1], p.coords[sel, 3]
        if plans[i].dp > 1:  # the group's iterations, one per frontier point
            g = _group(plans[i], pred)
            assert isinstance(g.step, MeteredRankStep)
            g.step.reset()
            for b, c in zip((mb / plans[i].dp).tolist(), ctx.tolist(), strict=True):
                g.decode_s(b, c)
            cov = g.step.coverage()
        elif spec is not None:
            plan = plans[i]
            cov = spec_forms(plan.config, plan.device, plan.tp, spec, pred).coverage(mb, ctx)
            assert cov is not None
        else:
            step = _compiled(plans[i], predictor=pred).decode
            assert isinstance(step, PricedStep)
            cov = step.coverage_array(mb, ctx)
        total = cov if total is None else total + cov
    return total


def _result(model: str, plans: Sequence[Plan], p: _Partial, energy: bool, cost: bool = False) -> SearchResult:
    rows = []
    for coords, metrics, i in zip(p.coords.tolist(), p.metrics.tolist(), p.plan.tolist(), strict=True):
        plan = plans[i]
        dev, wd, kvd, tp, ep = plan.label
        ppv, mv, bv, cv = (int(v) for v in coords)
        row: dict[str, Any] = {
            "device": dev,
            "weight_dtype": wd,
            "kv_dtype": kvd,
            "tp": tp,
            "pp": ppv,
            "ep": ep,
            "dp": plan.dp,
            "expert_parallel": plan.expert_parallel,
            "microbatches": mv,
            "devices": plan.devices * ppv,
            "batch": bv,
            "ctx": cv,
            "plan": _plan_text(plan, ppv, mv),
        }
        row.update(
            {k: (float(v) if math.isfinite(v) else None) for k, v in zip(METRICS, metrics, strict=True)}
        )
        rows.append(row)
    rows.sort(key=lambda r: (r["ctx"], -r["tokens_per_s_per_user"]))
    by_ctx: dict[int, dict[str, dict[str, Any]]] = {}
    for c in sorted({r["ctx"] for r in rows}):
        by_ctx[c] = _winners([r for r in rows if r["ctx"] == c], energy, cost)
    objectives = (
        ("tokens_per_s_per_user", "tokens_per_s_per_device")
        + (("energy_per_token_j",) if energy else ())
        + (("usd_per_m_output",) if cost else ())
    )
    best = next(iter(by_ctx.values())) if len(by_ctx) == 1 else {}
    need = p.least_need
    finite = lambda v: float(v) if math.isfinite(v) else None  # noqa: E731
    return SearchResult(
        model,
        p.points,
        p.valid,
        p.fits,
        p.meets_slo,
        objectives,
        tuple(rows),
        best,
        best_by_ctx=by_ctx,
        contexts=len(by_ctx),
        meets_slo_ttft=p.meets_ttft,
        meets_slo_tpot=p.meets_tpot,
        best_ttft_s=finite(p.best_ttft),
        best_tpot_s=finite(p.best_tpot),
        least_need=(
            {
                "plan": need[3],
                "batch": need[4],
                "ctx": need[5],
                "needed_bytes": need[1],
                "capacity_bytes": need[2],
            }
            if need is not None and not p.fits
            else None
        ),
    )


def winner_words(name: str) -> str:
    """An objective's winner (a key of :attr:`SearchResult.best`) in words: its key's words, but
    the cost one's ``m`` (million), which read as metres: ``lowest cost per million output tokens``.

    Parameters
    ----------
    name : str
        The key, e.g. ``fastest_per_user`` or ``lowest_cost_per_m_output``.

    Returns
    -------
    str
    """
    return (
        "lowest cost per million output tokens"
        if name == "lowest_cost_per_m_output"
        else name.replace("_", " ")
    )


def check_prompt_within(prompt: int | None, ctxs: Sequence[int], *, flags: bool = False) -> None:
    """Refuse a TTFT ``prompt`` longer than a context searched: a request that prefilled
    ``prompt`` tokens decodes with at least that many cached, so a point at a shorter ``ctx``
    priced the TTFT of one request and the TPOT and memory of another (``--ctxs 1024 --prompt
    100000`` answered 4.25 s and 4.8 ms at 1,024 tokens of cache).

    Parameters
    ----------
    prompt : int or None
        The TTFT prompt (tokens; None: each point's context, always within it).
    ctxs : sequence of int
        The contexts searched (tokens).
    flags : bool
        Name the command line's options (``--prompt``, ``--ctxs``) rather than the parameters.

    Raises
    ------
    CostModelError
        When a context is shorter than the prompt: one line naming both and what is allowed.
    """
    if prompt is None or not ctxs or prompt <= min(ctxs):
        return
    p, c = ("--prompt", "--ctxs") if flags else ("prompt", "ctxs")
    short = sorted(x for x in ctxs if x < prompt)
    shown = ", ".join(f"{x:,}" for x in short[:4]) + (f" and {len(short) - 4} more" if len(short) > 4 else "")
    raise CostModelError(
        f"{p} {prompt:,} is longer than {c} {shown}: a request that prefilled {prompt:,} tokens decodes "
        f"with at least that many cached; give {c} of at least {prompt:,} (or leave {p} out: each "
        "point's context)"
    )


def _winners(
    rows: list[dict[str, Any]], energy: bool = False, cost: bool = False
) -> dict[str, dict[str, Any]]:
    """The best row of one context's frontier per objective. Energy and cost are named only when
    they are objectives: the frontier of the other objectives leaves out points that use less
    (Llama-3.1-8B on h100 and a100-sxm-80gb at ctx 4096 without ``--energy``: its frontier's least,
    h100 at batch 129, 0.139 J/token, where a100 at batch 130 takes 0.130)."""
    best = {
        "fastest_per_user": max(rows, key=lambda r: r["tokens_per_s_per_user"]),
        "highest_throughput_per_device": max(rows, key=lambda r: r["tokens_per_s_per_device"]),
    }
    with_energy = [r for r in rows if r["energy_per_token_j"] is not None]
    if energy and with_energy:
        best["lowest_energy_per_token"] = min(with_energy, key=lambda r: r["energy_per_token_j"])
    with_price = [r for r in rows if r["usd_per_m_output"] is not None]
    if cost and with_price:
        best["lowest_cost_per_m_output"] = min(with_price, key=lambda r: r["usd_per_m_output"])
    return best
