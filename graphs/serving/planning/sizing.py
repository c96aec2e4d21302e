"""Sizing: the cheapest (or fewest-device) deployment that serves a load within latency SLOs held
at a percentile (``percentile``, P99 by default; "P99" below stands for it).

A candidate is a device kind, a tensor-parallel degree ``tp`` and either ``n`` aggregated
replicas or a disaggregated ``p:d`` split of prefill and decode replicas (each of ``tp``
devices); for an MoE model also ``n`` aggregated replicas that are each a data-parallel group of
``dp`` ranks of ``tp`` devices (``dps``: attention data-parallel, the experts over all
``dp x tp`` devices, :mod:`graphs.serving.sim.data_parallel`; the simulator runs a group
aggregated only). The search runs in two stages:

1. **Analytic bounds prune.** Per (device, tp), from the compiled mixed step
   (:class:`graphs.serving.step.mixed.MixedStep`) and the decode ledger:

   * memory: the weights and activations must leave KV blocks for the longest request
     (:func:`graphs.serving.sim.engine.kv_blocks` over :func:`graphs.serving.sim.engine.kv_pool`:
     a group's rank without the experts its device does not hold), else the pair is out;
   * latency floors: a P99 TPOT is at least one decode step at batch 1 and the shortest
     context (a group's: that rank's share plus the experts and dispatch of its one token,
     :meth:`graphs.serving.sim.data_parallel.RankStep.lockstep_s`, the others idle); a P99 TTFT
     at least the prefill alone of the prompt at order statistic
     ``floor(0.99 (n - 1))`` (the lower of the two the interpolated P99 lies between: the
     requests from there up have a prompt at least that long, each prefilled in at least that
     time). A floor above its SLO rules the pair out, whatever the replica count;
   * capacity: ``n`` replicas serve at most ``n C / mean(prompt + output - 1)`` requests/s and a
     ``p:d`` split at most ``min(p C / mean(prompt), d C / mean(output - 1))``
     (:func:`graphs.serving.planning.capacity_search.ceiling_rate`, ``C`` the token-wise ceiling), so
     ``n >= ceil(R / per-replica ceiling)`` and likewise ``p``, ``d``.

2. **Simulation confirms.** Candidates are simulated (:func:`graphs.serving.sim.simulator.simulate`,
   the same requests for every one) in the order of their objective's lower bound (devices x
   price per hour, or devices); a candidate meets when its P99 TTFT and TPOT are within the SLOs.
   A missing aggregated candidate is followed by one more replica; a missing split by one more
   prefill replica when TTFT missed and one more decode replica when TPOT missed. The search
   stops when the next lower bound is no better than the best confirmed deployment (branch and
   bound: what is left cannot win) or after ``max_simulations``; past that point it only confirms
   runners-up, until it has ``runners_up`` of them and one for every device kind.

The objective ``cost`` is the deployment's USD per hour at its simulated utilisation
(:mod:`graphs.serving.planning.cost`). Every candidate serves the same requests and meets the SLOs, so
each serves the offered tokens per second to within its last request's TTFT over the arrival
span, and its USD per million tokens (that $/h over the tokens/s it served, the figure
``simulate`` prints for the same deployment) orders as its $/h does; ``gpus`` is the device
count (ties broken by cost). Runners-up are the best confirmed
deployment of each other (device, tp, dp, aggregated/disaggregated) family.

With an ``executor`` (a Dask ``Client`` or any ``concurrent.futures`` executor) the candidate
simulations run there, speculatively: while the search waits for a candidate, up to ``lookahead``
more of the queue, in its order, are in flight beside it, each submitted as another task ends
(the awaited one, a successor not yet submitted, goes whatever is in flight; so
``lookahead + 1`` tasks keep as many workers busy and, but for such a successor, none waits behind a busy worker: Dask
assigns a task of a group smaller than twice the cluster's threads to a worker at once, busy or
not, where it waits while another worker, freed, takes a later one). The search itself is unchanged (it
takes each candidate's result in the same order, and a speculative result it never reaches is
dropped), so the answer is the one-process answer: the same deployments, and the same numbers
but for the last digits where a worker reads a step from its card (checked to 1e-9) that this
process compiled. A Dask client's workers receive the requests once (scattered to each); a task
carries only its candidate, the model config, the engine's knobs and the memory ledgers this
process built for the bounds (a worker keeps them rather than build its own).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.results import Result, plain

from ..engines import EngineOverheads, EngineProfile, get_engine
from ..pricing.predictor import Predictor
from ..sim.data_parallel import DISPATCHES, RankStep, check_group, group_step
from ..sim.engine import EngineConfig, kv_blocks, kv_pool, profile_engine
from ..sim.requests import Request, synthetic
from ..sim.simulator import MAX_REPLICAS, SimResult, Topology, simulate
from ..step.ledger_fit import keep_ledgers, ledgers_of
from ..step.mixed import mixed_step
from ..step.option_checks import check_device_repeats
from ..step.workload import as_workload
from .capacity_search import ceiling_rate
from .cost import NO_PRICE, Rates, ServedTotals, TokenCost, check_prices, device_rates, totals_cost
from .executors import known_devices, received, send_once, submit
from .run_cards import RunOutcome, load_outcome, requests_digest, run_key, save_outcome

__all__ = ["Deployment", "SizingResult", "size_deployment", "OBJECTIVES", "DEFAULT_LINK_BANDWIDTH"]

OBJECTIVES = ("cost", "gpus")
#: KV-transfer bandwidth between disaggregated pools (bytes/s): one 400 Gb/s NIC per GPU
#: (ConnectX-7 NDR, as on Azure ND H100 v5: eight 400G InfiniBand HCAs for eight GPUs)
DEFAULT_LINK_BANDWIDTH = 50e9


@dataclass(frozen=True)
class Deployment(Result):
    """One simulated candidate: its shape, its latencies at the sizing's percentile against the SLOs,
    and its cost."""

    device: str
    tp: int
    replicas: int  #: aggregated replicas (0 when disaggregated)
    prefill_replicas: int
    decode_replicas: int
    devices: int
    ttft_at_percentile_s: float  #: TTFT at ``percentile`` over the requests (s)
    #: TPOT at ``percentile`` over the requests (s); 0 when no request generated a second token
    #: (``--output fixed:1``): there is none, said so (:attr:`has_tpot`), None in ``to_dict``
    tpot_at_percentile_s: float
    meets: bool
    cost: TokenCost | None  #: None: the device has no price
    #: the run (None: read from its card, :mod:`graphs.serving.planning.run_cards`)
    sim: SimResult | None = field(default=None, repr=False, compare=False)
    dp: int = 1  #: data-parallel ranks per replica (1: none)
    expert_parallel: bool = False  #: whole experts per device (dp > 1, or inside the tp group)
    percentile: float = 99.0  #: the percentile the two latencies are (P99: 99)

    @property
    def label(self) -> str:
        shape = (
            f"{self.prefill_replicas}P:{self.decode_replicas}D disaggregated"
            if self.prefill_replicas
            else f"{self.replicas} replica(s)"
        )
        ep = " EP" if self.expert_parallel else ""
        if self.dp > 1:
            return f"{self.device} dp{self.dp} x tp{self.tp}{ep} x {shape} = {self.devices} device(s)"
        return f"{self.device} tp{self.tp}{ep} x {shape} = {self.devices} device(s)"

    @property
    def has_tpot(self) -> bool:
        """Whether a request generated a second token, so that there is a TPOT (``simulate``
        prints "none: no request generated a second token" otherwise)."""
        return self.tpot_at_percentile_s > 0

    def to_dict(self) -> dict[str, Any]:
        d = {k: plain(getattr(self, k)) for k in self.__dataclass_fields__ if k != "sim"}
        d["label"] = self.label
        if not self.has_tpot:  # none to measure, not a TPOT of 0 s
            d["tpot_at_percentile_s"] = None
        return d

    def cells(self, slo_ttft: float, slo_tpot: float) -> dict[str, str]:
        """The candidate's numbers as :meth:`line` writes them, each under the words ``line``
        puts around it (the ``size --html`` page's table of candidates): its shape, its latencies
        at ``percentile`` (``P99 TTFT (s)``, ``P99 TPOT (ms)``) and their shares of the SLOs,
        whether it meets them, its $/h and $/M tokens (blended, input, output).

        Parameters
        ----------
        slo_ttft, slo_tpot : float
            The TTFT and TPOT service-level objectives (s) the percentile latencies are shown as
            shares of.

        Returns
        -------
        dict of str to str
            Heading -> cell, in the line's order; the same headings for every candidate (one
            without a price: the reason under ``$/h``, the other cost cells empty).
        """
        t, p, q, c = self.ttft_at_percentile_s, self.tpot_at_percentile_s, f"P{self.percentile:g}", self.cost
        row = {
            "deployment": self.label,
            f"{q} TTFT (s)": f"{t:.3f}",
            "TTFT, % of SLO": f"{100 * t / slo_ttft:.0f}%",
            f"{q} TPOT (ms)": f"{p * 1e3:.1f}" if self.has_tpot else _NO_TPOT,
            "TPOT, % of SLO": f"{100 * p / slo_tpot:.0f}%" if self.has_tpot else "-",
            "meets the SLOs": "yes" if self.meets else "no",
        }
        if c is None:  # the same columns for every candidate: the reason under $/h
            return {
                **row,
                "$/h": NO_PRICE,
                "$/M tokens blended": "",
                "$/M input alone": "",
                "$/M output alone": "",
            }
        return {
            **row,
            "$/h": f"${c.usd_per_hour:,.2f}",
            "$/M tokens blended": f"${c.usd_per_m_tokens:.4g}",
            "$/M input alone": f"${c.usd_per_m_input or 0:.4g}",
            "$/M output alone": f"${c.usd_per_m_output or 0:.4g}",
        }

    def line(self, slo_ttft: float, slo_tpot: float) -> str:
        """One line: its shape, its latencies at ``percentile`` (named: ``P95 TTFT`` at 95) and
        their shares of the SLOs (``slo_ttft``,
        ``slo_tpot``, s), and its cost: the $/h over the tokens/s the run served, as ``simulate``
        prints it (:class:`~graphs.serving.planning.cost.TokenCost`), or why there is none.

        Parameters
        ----------
        slo_ttft, slo_tpot : float
            The TTFT and TPOT service-level objectives (s) the percentile latencies are shown as
            shares of.

        Returns
        -------
        str
            The line, without a newline.
        """
        c = self.cells(slo_ttft, slo_tpot)
        q = f"P{self.percentile:g}"
        cost = (
            f"{c['$/h']}/h = {c['$/M tokens blended']}/M tokens blended "
            f"({c['$/M input alone']}/M input or {c['$/M output alone']}/M output alone)"
            if self.cost is not None
            else NO_PRICE
        )
        tpot = (
            f"{c[f'{q} TPOT (ms)']} ms ({c['TPOT, % of SLO']} of SLO)"
            if self.has_tpot
            else f"{_NO_TPOT} (no request generated a second token)"
        )
        ttft = f"{c[f'{q} TTFT (s)']} s ({c['TTFT, % of SLO']} of SLO)"
        return f"{self.label}: {q} TTFT {ttft}, {q} TPOT {tpot}; {cost}"


#: a candidate's TPOT where no request generated a second token
_NO_TPOT = "none"


@dataclass(frozen=True)
class SizingResult(Result):
    """The winner, the runners-up (best of each other family), what was pruned and simulated."""

    model: str
    rate: float
    slo_ttft: float
    slo_tpot: float
    percentile: float
    objective: str
    winner: Deployment | None
    runners_up: tuple[Deployment, ...]
    simulated: int  #: candidates confirmed (or refuted) by simulation
    pruned: tuple[str, ...]  #: (device, tp) pairs the analytic bounds ruled out, with why
    exhausted: bool  #: True: the bound proved nothing left could win; False: max_simulations ran out
    requests: int
    workload: str
    candidates: tuple[Deployment, ...] = ()  #: every simulated candidate, in simulation order
    notes: tuple[str, ...] = ()  #: what the candidates assume, said once each (a group across domains)

    def _share(self, d: Deployment) -> float:
        """The larger of ``d``'s latencies over its SLO (1: at it; no TPOT: the TTFT's alone)."""
        return max(d.ttft_at_percentile_s / self.slo_ttft, d.tpot_at_percentile_s / self.slo_tpot)

    def to_text(self, *, engine: EngineProfile | None = None, max_simulations: int | None = None) -> str:
        """The sizing in lines, as ``costmodel size`` prints it.

        Parameters
        ----------
        engine : EngineProfile, optional
            The engine every candidate ran: its :meth:`~EngineProfile.summary` is said once.
        max_simulations : int, optional
            The limit, named when it ran out before the bounds proved the winner (None: the
            candidates simulated).

        Returns
        -------
        str
            The question and the workload, the engine, what the bounds pruned, the winner with its
            cost and price source (or that none meets the SLOs), and the runners-up.
        """
        goal = "cheapest" if self.objective == "cost" else "fewest devices"
        out = [
            f"{self.model} at {self.rate:g} requests/s, P{self.percentile:g} TTFT <= {self.slo_ttft:g} s and "
            f"TPOT <= {self.slo_tpot:g} s: {goal}, {self.simulated} candidate(s) simulated",
            f"  workload: {self.workload}",
        ]
        if engine is not None:
            out.append(f"  {engine.summary()}")
        # every candidate is simulated on the bound: said, so a winner is read as the optimist it is
        out.append(
            "  latencies: the bound (every kernel at its roofline, no engine CPU time): a floor on what "
            "each candidate takes, so the winner is optimistic; `simulate --predict FRAMEWORK` checks it "
            "on measured kernels"
        )
        out += [f"  pruned by the bounds: {why}" for why in self.pruned]
        out += [f"  note: {note}" for note in self.notes]
        if self.winner is None:
            out.append(
                "  no simulated deployment meets the SLOs"
                + ("" if self.exhausted else " (raise --max-simulations)")
            )
            if self.candidates:  # how far the nearest one is: the larger of its two shares of the SLOs
                near = min(self.candidates, key=lambda d: self._share(d))
                out.append(f"  closest: {near.line(self.slo_ttft, self.slo_tpot)}")
            return "\n".join(out)
        w = self.winner
        out.append(f"  winner: {w.line(self.slo_ttft, self.slo_tpot)}")
        if w.cost is not None:
            out += [f"    {w.cost.line()}", f"    price: {w.cost.price_source}"]
        if not self.exhausted:
            limit = self.simulated if max_simulations is None else max_simulations
            out.append(
                f"  note: stopped after --max-simulations {limit}: the best confirmed so far, not proven the best"
            )
        out += [f"  runner-up: {d.line(self.slo_ttft, self.slo_tpot)}" for d in self.runners_up]
        return "\n".join(out)


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else 0.0


def _prefill_alone(step: Any, prompt: int, budget: int) -> float:
    """Seconds to prefill ``prompt`` tokens alone in chunks of at most ``budget`` tokens."""
    t, done = 0.0, 0
    while done < prompt:
        c = min(budget, prompt - done)
        t += step.time_sums(0, 0.0, [(float(c), float(done))])
        done += c
    return t


@dataclass(frozen=True)
class _Family:
    device: str
    tp: int
    disagg: bool
    rates: Rates
    dp: int = 1  #: data-parallel ranks per replica (module doc)
    #: the device as the caller gave it (a what-if ``Hardware`` copy keeps its own roofs: its name
    #: looked up again would be the catalog's device); None: ``device`` looked up
    hw: Hardware | None = field(default=None, compare=False)

    @property
    def spec(self) -> Hardware:
        """The device this family runs on."""
        return self.hw if self.hw is not None else get_device(self.device)


@dataclass(frozen=True)
class _Group:
    """How every data-parallel family of one sizing holds and reaches its experts."""

    expert_parallel: bool = False
    dispatch: str = DISPATCHES[0]

    def topology(self, fam: _Family, replicas: int) -> Topology:
        """``replicas`` aggregated replicas of ``fam`` (groups of ``fam.dp`` ranks when > 1; at
        ``dp`` 1 and ``tp`` > 1 with expert parallelism, the tp group's own: whole experts spread
        over its devices, as ``simulate --tp N --enable-expert-parallel`` runs it)."""
        if fam.dp == 1:
            return Topology(replicas=replicas, tp=fam.tp, expert_parallel=self._in_tp(fam.tp))
        return Topology(
            replicas=replicas,
            tp=fam.tp,
            dp=fam.dp,
            expert_parallel=self.expert_parallel,
            moe_dispatch=self.dispatch,
        )

    def _in_tp(self, tp: int) -> bool:
        """Expert parallelism inside a ``dp`` 1 family's tp group (one device: nothing to spread)."""
        return self.expert_parallel and tp > 1

    def step(self, w: Any, hw: Any, tp: int, dp: int) -> RankStep | None:
        """The bound's group step of ``dp`` ranks at ``tp`` (None: no group)."""
        if dp == 1 and not self._in_tp(tp):
            return None
        return group_step(
            w,
            hw,
            dp=dp,
            tp=tp,
            expert_parallel=self.expert_parallel,
            dispatch=self.dispatch if dp > 1 else DISPATCHES[0],  # no dispatch inside the tp group
            predictor=Predictor(),
        )


def _pair_engine(
    profile: EngineProfile | None,
    eng: EngineConfig,
    w: Any,
    hw: Any,
    tp: int,
    reqs: Sequence[Request],
    dp: int = 1,
    expert_parallel: bool = False,
) -> tuple[EngineConfig, EngineOverheads | None]:
    """The engine config and overheads a (device, tp, dp) family runs: ``eng`` and none without a
    profile; else the profile's, its pool sized for the family (the no-evict cap for equal
    requests; its experts whole per device with ``expert_parallel``) and, the bound having no CPU
    terms, its policy alone where it is not recompute."""
    if profile is None:
        return eng, None
    sizes = {r.prompt + r.output for r in reqs}
    cfg = profile_engine(
        profile,
        w,
        hw,
        tp=tp,
        dp=dp,
        request_tokens=sizes.pop() if len(sizes) == 1 else None,
        expert_parallel=expert_parallel,
    )
    return cfg, profile.overheads(terms=False) if profile.policy != "recompute" else None


def _floors(
    w: Any,
    hw: Any,
    tp: int,
    reqs: Sequence[Request],
    eng: EngineConfig,
    q: float,
    group: RankStep | None = None,
) -> tuple[float, float, str | None]:
    """(TTFT floor, TPOT floor, why the family cannot serve) for (device, tp), or a data-parallel
    ``group`` of ranks at ``tp`` (module doc)."""
    pool = kv_pool(w, hw, tp, group.stage.dp if group is not None else 1)
    try:
        blocks = eng.num_blocks or kv_blocks(pool, pool.capacity_bytes, eng)
    except CostModelError as e:
        return math.inf, math.inf, f"does not fit: {e}"
    longest = max(r.prompt + r.output for r in reqs)
    if blocks * eng.block_size < longest:
        return (
            math.inf,
            math.inf,
            (
                f"does not fit: {blocks * eng.block_size:,} KV tokens per replica < the longest request ({longest:,})"
            ),
        )
    step: Any = mixed_step(w, hw, tp=tp) if group is None else _Alone(group)
    o = eng.iteration_overhead_s
    ctx = float(min(r.prompt for r in reqs) + 1)
    # a sliding-window model's attention reads min(W, ctx) of each decode's context: it needs them
    tpot = step.time_sums(1, ctx, (), [ctx] if step.windowed else None) + o
    # the order statistic at floor(q/100 (n - 1)): the lower of the two the P99 interpolates
    # between, so at least n - that index requests have a prompt this long and the interpolated
    # TTFT percentile is at least its prefill (inverted_cdf took the upper one: with n < 100,
    # the longest prompt alone, a "floor" above simulated P99s that met the SLO)
    p_q = int(np.percentile([r.prompt for r in reqs], q, method="lower"))
    ttft = _prefill_alone(step, p_q, eng.max_num_batched_tokens) + o
    return ttft, tpot, None


class _Alone:
    """A group's iterations with one rank busy (:meth:`RankStep.lockstep_s`), as the floors read
    a step: each at least what the simulator prices when that rank's batch is the group's only
    work (another rank's work only adds tokens to the stage and a slower rank to the max)."""

    def __init__(self, group: RankStep) -> None:
        self.group = group

    @property
    def windowed(self) -> bool:
        return bool(self.group.windowed)

    def time_sums(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: Sequence[tuple[float, float]] = (),
        ctxs: Sequence[float] | None = None,
    ) -> float:
        return self.group.lockstep_s(n_dec, sum_ctx, chunks, busy=1, ctxs=ctxs)


def size_deployment(
    config: Any,
    *,
    rate: float,
    slo_ttft: float,
    slo_tpot: float,
    devices: Sequence[str | Hardware],
    tps: Sequence[int] = (1, 2, 4, 8),
    objective: str = "cost",
    disaggregated: bool = True,
    prices: dict[str, float] | None = None,
    electricity_per_kwh: float = 0.0,
    requests: int = 500,
    prompt: str = "lognormal:1000,1.0",
    output: str = "lognormal:250,1.0",
    arrival: str = "poisson",
    seed: int = 0,
    percentile: float = 99.0,
    engine: EngineConfig | None = None,
    profile: EngineProfile | str | None = None,
    link_bandwidth: float = DEFAULT_LINK_BANDWIDTH,
    max_simulations: int = 60,
    runners_up: int = 4,
    progress: Callable[[int, int], None] | None = None,
    allow_long_context: bool = False,
    executor: Any = None,
    lookahead: int = 2,
    dps: Sequence[int] = (1,),
    expert_parallel: bool = False,
    moe_dispatch: str = DISPATCHES[0],
    run_cards: bool = False,
) -> SizingResult:
    """The best deployment of ``config`` for ``rate`` requests/s within the SLOs (module doc).

    ``prices``: USD per device-hour by device name or alias, replacing the catalog's. A drawn
    request longer than the model's context limit is an error (a warning with
    ``allow_long_context``), as for ``decode --ctx``. ``profile``: an engine profile
    (:mod:`graphs.serving.engines`) whose scheduler and KV-pool rule every (device, tp) runs,
    its pool sized there (:func:`graphs.serving.sim.engine.profile_engine`; a pair it leaves no room
    is pruned), instead of ``engine``. ``executor``: where the candidate simulations run (a Dask
    ``Client`` or a ``concurrent.futures`` executor; module doc), up to ``lookahead`` candidates in
    flight beside the one the search waits for (at least 1; a worker's count less one keeps every
    worker busy). ``dps``: data-parallel ranks per replica to try
    (an MoE model; 1: plain replicas), each group's experts whole per device (``expert_parallel``)
    or split ``dp x tp`` ways, reached by ``moe_dispatch`` (module doc; aggregated only).
    ``run_cards``: read each candidate's run from its card when the form cache holds one, and
    card the runs it simulates (:mod:`graphs.serving.planning.run_cards`; the deployments of a
    run read from a card, or simulated on an ``executor``, carry ``sim=None``).

    Parameters
    ----------
    config : Any
        The model or workload: a :class:`~models.config.ModelConfig`, a catalog name or a
        :class:`~graphs.serving.step.workload.Workload`.
    rate : float
        The offered load (requests/s).
    slo_ttft, slo_tpot : float
        The TTFT and TPOT service-level objectives (s, in (0, 1e6]) the ``percentile`` latencies
        must meet.
    devices : sequence of str or Hardware
        The device kinds to try (catalog names, aliases or specs: a what-if copy such as
        ``get_device("h100").scaled({"memory": 2})`` runs as given; at least one, each once: two
        names of one catalog device are refused).
    tps : sequence of int
        The tensor-parallel degrees to try (devices per replica or rank; whole numbers >= 1, at
        least one).
    objective : str
        One of :data:`OBJECTIVES`: ``cost`` (USD per hour at the simulated utilisation) or
        ``gpus`` (devices, ties broken by cost).
    disaggregated : bool
        Also try disaggregated ``p:d`` splits of prefill and decode replicas.
    prices : dict of str to float or None
        USD per device-hour by device name or alias (``h100`` prices ``h100-sxm``), replacing the
        catalog's; each key one of ``devices``, each price in
        :data:`~graphs.serving.planning.cost.PRICE_RANGE`.
    electricity_per_kwh : float
        USD per kWh of TDP added to the hourly price (default 0).
    requests : int
        How many synthetic requests each candidate serves (the same ones for all).
    prompt, output : str
        The prompt and output length distributions (tokens), as ``--prompt``/``--output`` take
        them (:func:`graphs.serving.sim.requests.synthetic`).
    arrival : str
        The arrival process (default ``poisson``).
    seed : int
        The random seed the requests are drawn with.
    percentile : float
        The latency percentile held to the SLOs (in (0, 100], default 99).
    engine : EngineConfig or None
        The scheduler and KV-pool knobs every candidate runs; None: the defaults.
    profile : EngineProfile, str or None
        An engine profile, or its name (``vllm``, ``sglang@0.4``: the command's ``--engine``), to
        run instead of ``engine`` (not both), its pool sized per (device, tp).
    link_bandwidth : float
        The KV-transfer bandwidth between disaggregated pools (bytes/s, default
        :data:`DEFAULT_LINK_BANDWIDTH`).
    max_simulations : int
        The most candidates simulated before the search stops (>= 1).
    runners_up : int
        How many runners-up (best of other families) to confirm (a whole number >= 0).
    progress : callable or None
        Called as ``progress(done, total)`` (simulations) as candidates complete.
    allow_long_context : bool
        Warn, rather than refuse, when a drawn request is longer than the model's context limit.
    executor : Any
        A Dask ``Client`` or ``concurrent.futures`` executor the simulations run on; None: this
        process.
    lookahead : int
        Candidates in flight beside the one the search waits for, each submitted as a task ends
        (in [1, 1024]; the workers less one: every worker busy, none with a task waiting).
    dps : sequence of int
        The data-parallel ranks per replica to try (whole numbers in [1, ``MAX_REPLICAS``]; > 1
        needs an MoE model).
    expert_parallel : bool
        Whole experts per device, else each expert split ``dp x tp`` ways: with ``dps > 1`` over
        a data-parallel group, at ``dp`` 1 over the tp group (``tp`` > 1; aggregated candidates:
        a disaggregated pool keeps its experts split).
    moe_dispatch : str
        With ``dps > 1``: how tokens reach the experts, one of
        :data:`graphs.serving.sim.data_parallel.DISPATCHES`.
    run_cards : bool
        Reuse and keep the candidates' runs as cards (:mod:`graphs.serving.planning.run_cards`).

    Returns
    -------
    SizingResult
        The winner (None: no candidate met the SLOs), the runners-up, every simulated
        candidate, what was pruned and why, and whether the bound closed the search.

    Raises
    ------
    CostModelError
        When a knob is out of range (an unknown ``objective`` or ``moe_dispatch``, an SLO,
        ``percentile``, ``max_simulations``, ``lookahead`` or ``dps`` outside its range, no
        device or one given twice, both ``engine`` and ``profile``, group knobs without ``dps > 1``, ``dps > 1`` on
        a dense model), a drawn request exceeds the context limit without
        ``allow_long_context``, or ``objective`` is ``cost`` and a device has no price.
    """
    if objective not in OBJECTIVES:
        raise CostModelError(f"objective {objective!r} not allowed; allowed: {', '.join(OBJECTIVES)}")
    for name, v in (("slo_ttft", slo_ttft), ("slo_tpot", slo_tpot)):
        if not (isinstance(v, int | float) and 0 < v <= 1e6):
            raise CostModelError(f"{name} must be in (0, 1e6] s, got {v!r}")
    if not 0 < percentile <= 100:
        raise CostModelError(f"percentile must be in (0, 100], got {percentile}")
    if isinstance(devices, str | Hardware) or not isinstance(devices, Sequence):
        raise CostModelError(
            f"devices must be a list of device names or specs, got {type(devices).__name__} {repr(devices)[:40]}"
        )
    if not devices:
        raise CostModelError("devices: give at least one device")
    if isinstance(tps, str) or not isinstance(tps, Sequence):
        raise CostModelError(
            f"tps must be a list of whole numbers, got {type(tps).__name__} {repr(tps)[:40]}"
        )
    if not tps:
        raise CostModelError("tps: give at least one tensor-parallel degree")
    if any(isinstance(t, bool) or not isinstance(t, int | np.integer) or t < 1 for t in tps):
        raise CostModelError(f"tps must be whole numbers >= 1, got {list(tps)[:8]!r}")
    if isinstance(runners_up, bool) or not isinstance(runners_up, int) or runners_up < 0:
        raise CostModelError(f"runners_up must be a whole number >= 0, got {runners_up!r}")
    if isinstance(profile, str):  # an engine by name, as --engine takes it (vllm, sglang@0.4)
        profile = get_engine(profile, what="profile")
    elif profile is not None and not isinstance(profile, EngineProfile):
        raise CostModelError(
            f"profile must be an EngineProfile or an engine's name, got {type(profile).__name__} {repr(profile)[:40]}"
        )
    if engine is not None and not isinstance(engine, EngineConfig):
        raise CostModelError(
            "engine must be an EngineConfig (an engine by name goes in profile: profile='vllm'), got "
            f"{type(engine).__name__} {repr(engine)[:40]}"
        )
    if max_simulations < 1:
        raise CostModelError(f"max_simulations must be >= 1, got {max_simulations}")
    if engine is not None and profile is not None:
        raise CostModelError("give an engine config or an engine profile, not both")
    if not 1 <= lookahead <= 1024:
        raise CostModelError(f"lookahead must be in [1, 1024], got {lookahead}")
    w = as_workload(config)
    eng = engine or EngineConfig()
    dp_list = sorted(set(dps))
    if not dp_list or any(
        isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_REPLICAS for d in dp_list
    ):
        raise CostModelError(f"dps must be whole numbers in [1, {MAX_REPLICAS}], got {list(dps)!r}")
    check_group(dp_list[-1], w.config.is_moe)
    if moe_dispatch not in DISPATCHES:
        raise CostModelError(f"moe_dispatch must be one of {', '.join(DISPATCHES)}, got {moe_dispatch!r}")
    if moe_dispatch != DISPATCHES[0] and dp_list[-1] == 1:
        raise CostModelError("moe_dispatch shapes a data-parallel group's dispatch: it needs dps > 1")
    if expert_parallel and dp_list[-1] == 1 and max(tps) == 1:
        raise CostModelError(
            "expert_parallel spreads whole experts over a group's devices: it needs dps > 1 or tps > 1"
        )
    grouping = _Group(bool(expert_parallel), moe_dispatch)
    #: (device, tp, dp, disaggregated) -> the engine config and overheads its runs take (a
    #: profile's, sized per family: a disaggregated family's pools keep their experts split, so
    #: its KV pool holds another MoE kernel padding than the aggregated family's with EP inside tp)
    engines: dict[tuple[str, int, int, bool], tuple[EngineConfig, EngineOverheads | None]] = {}
    reqs = synthetic(requests, rate=rate, prompt=prompt, output=output, arrival=arrival, seed=seed)
    w.config.check_context(
        max(r.prompt + r.output for r in reqs),
        "the longest drawn request (prompt + output)",
        allow=allow_long_context,
    )
    reqs_id = requests_digest(reqs) if run_cards else None  # None: every candidate simulated
    prices = check_prices(prices, [get_device(d) for d in devices])  # by alias too, each checked
    pruned: list[str] = []
    notes: dict[str, None] = {}  #: said once each: a group priced across scale-up domains
    heap: list[tuple[float, float, int, _Family, int, int]] = []
    tie = 0
    fams: list[_Family] = []
    check_device_repeats(devices, "devices")  # one device twice (or by two aliases): refused, as search refuses it
    hws = {get_device(d).name: get_device(d) for d in devices}
    for name, hw in hws.items():
        rates = device_rates(hw, prices.get(name), electricity_per_kwh)
        if objective == "cost" and rates.price_usd_per_hour is None:
            raise CostModelError(f"{name}: {NO_PRICE} (or --objective gpus)")
        domain = next((lk.domain for lk in hw.links if lk.name == "scale_up"), None)
        for tp, dp in itertools.product(sorted(set(tps)), dp_list):
            at = f"{name} tp{tp}" if dp == 1 else f"{name} dp{dp} x tp{tp}"
            if domain is not None and tp * dp > domain:
                if not any(lk.name == "scale_out" for lk in hw.links):  # nothing to price it over
                    pruned.append(f"{at}: wider than its scale-up domain ({domain}), no scale_out link")
                    continue
                for note in hw.group_notes(tp * dp):  # priced on the network, as decode and simulate do
                    notes.setdefault(f"{at}: {note}")
            try:
                whole = grouping.expert_parallel and (dp > 1 or tp > 1)  # as its topology runs it
                pair = _pair_engine(profile, eng, w, hw, tp, reqs, dp, whole)
            except CostModelError as e:
                pruned.append(f"{at}: does not fit: {e}")
                continue
            engines[(name, tp, dp, False)] = pair
            group = grouping.step(w, hw, tp, dp)
            # EP inside the tp group prices the aggregated family only: a disaggregated family's
            # pools keep their experts split, so its floors, ceiling and engine are the plain tp step's
            split = dp == 1 and group is not None
            slos = (slo_ttft, slo_tpot, percentile)
            why = _ruled_out(w, hw, tp, reqs, pair[0], slos, group)
            plain: tuple[EngineConfig, EngineOverheads | None] | None = pair
            why_plain: str | None = None
            if split and disaggregated:  # its experts split by width: another padding in its pool
                try:
                    plain = _pair_engine(profile, eng, w, hw, tp, reqs, dp, False)
                except CostModelError as e:
                    plain, why_plain = None, f"does not fit: {e}"
            if dp == 1 and plain is not None:
                engines[(name, tp, dp, True)] = plain
            if not split:
                why_disagg = why
            elif plain is None:
                why_disagg = why_plain
            else:
                why_disagg = _ruled_out(w, hw, tp, reqs, plain[0], slos, None)
            if why is not None and why_disagg is not None and not split:
                pruned.append(f"{at}: {why}")
                continue
            if why is not None:
                pruned.append(f"{at} EP: {why}")
            else:
                fam = _Family(name, tp, False, rates, dp, hw)
                per_replica = ceiling_rate(w, hw, reqs, topology=grouping.topology(fam, 1), engine=pair[0])
                n0 = max(1, math.ceil(rate / per_replica))
                if n0 > MAX_REPLICAS:
                    pruned.append(
                        f"{at}: {rate:g} requests/s needs at least {n0:,} replicas "
                        f"(capacity bound), more than a pool holds ({MAX_REPLICAS})"
                    )
                else:
                    fams.append(fam)
                    heapq.heappush(heap, (*_bound(fam, n0 * tp * dp, objective), tie, fam, n0, 0))
                    tie += 1
            if disaggregated and dp == 1:  # a data-parallel group runs aggregated (module doc)
                if why_disagg is not None:
                    pruned.append(f"{name} tp{tp} disaggregated: {why_disagg}")
                    continue
                if split:  # the plain tp replica's ceiling, on its own engine
                    plain_engine = engines[(name, tp, dp, True)][0]
                    per_replica = ceiling_rate(w, hw, reqs, topology=Topology(tp=tp), engine=plain_engine)
                mean_p = float(np.mean([r.prompt for r in reqs]))
                mean_d = float(np.mean([r.output - 1 for r in reqs]))
                c = per_replica * (mean_p + mean_d)  # the token-wise ceiling C of one replica
                p0 = max(1, math.ceil(rate * mean_p / c))
                d0 = max(1, math.ceil(rate * mean_d / c)) if mean_d > 0 else 1
                if max(p0, d0) > MAX_REPLICAS:
                    pruned.append(
                        f"{name} tp{tp} disaggregated: needs {p0:,}P:{d0:,}D, more than a pool holds ({MAX_REPLICAS})"
                    )
                    continue
                dfam = _Family(name, tp, True, rates, hw=hw)
                fams.append(dfam)
                heapq.heappush(heap, (*_bound(dfam, (p0 + d0) * tp, objective), tie, dfam, p0, d0))
                tie += 1
    done: list[Deployment] = []
    futures: dict[tuple[_Family, int, int], Any] = {}  #: submitted to ``executor``, not yet taken
    finished = threading.Event()  #: set as each submitted task ends (its future's callback)
    sent: Any = None  #: the requests as the executor's tasks take them (:func:`send_once`)
    #: the ledgers the bounds built (one a tp), sent with each task: a worker keeps them
    ledgers = ledgers_of(w.config) if executor is not None else {}
    # the devices as this process resolves them (a --hw-file's too): a worker process knows only
    # the shipped catalog until :func:`_run_config` registers them there
    hw_by_name = {f.device: f.spec for f in fams} if executor is not None else {}
    best: dict[_Family, Deployment] = {}
    seen: set[tuple[_Family, int, int]] = set()
    winner: Deployment | None = None
    proven = False  # the bound showed that nothing left can beat the winner
    while heap:
        lb, lb2, _, fam, a, b = heapq.heappop(heap)
        if fam in best or (fam, a, b) in seen:
            continue  # a family's first confirmed size is its cheapest
        if winner is not None and (lb, lb2) >= _key(winner, objective):
            proven = True  # from here on only runners-up are confirmed: enough, and each device's best
            covered = {d.device for d in best.values()}
            if len(best) > runners_up and fam.device in covered:
                if covered >= {f.device for f in fams}:
                    break
                continue
        if len(done) >= max_simulations:
            break
        seen.add((fam, a, b))
        if executor is None:
            pair = engines[(fam.device, fam.tp, fam.dp, fam.disagg)]
            dep = _run(
                w, fam, a, b, reqs, rate, slo_ttft, slo_tpot, percentile, pair, link_bandwidth, grouping,
                reqs_id,
            )  # fmt: skip
        else:  # this candidate awaited, at most ``lookahead`` of the queue's next beside it in flight
            sent = send_once(executor, list(reqs)) if sent is None else sent

            def launch(lb_2: float, f2: _Family, a2: int, b2: int, to: Any) -> None:
                fut = submit(
                    executor, lb_2,
                    _run_config, w.config, ledgers, hw_by_name, f2, a2, b2, to, rate, slo_ttft, slo_tpot, percentile,
                    engines[(f2.device, f2.tp, f2.dp, f2.disagg)], link_bandwidth, grouping, reqs_id,
                )  # fmt: skip
                fut.add_done_callback(lambda _: finished.set())
                futures[(f2, a2, b2)] = fut

            if (fam, a, b) not in futures:
                launch(lb, fam, a, b, sent)
            awaited = futures[(fam, a, b)]
            try:
                while True:
                    finished.clear()  # before the states are read: a task ending after sets it again
                    # topped up first, also when the awaited one is done: its worker is free now, not
                    # when the search has read its result and the ones after it
                    free = lookahead + 1 - sum(not f.done() for f in futures.values())
                    for _lb, _, _, f2, a2, b2 in sorted(heap) if free > 0 else ():
                        if free <= 0:
                            break
                        if (f2, a2, b2) not in futures and f2 not in best and (f2, a2, b2) not in seen:
                            launch(_lb, f2, a2, b2, sent)
                            free -= 1
                    if awaited.done():
                        break
                    finished.wait()
                dep = futures.pop((fam, a, b)).result()
            except BaseException:  # the awaited run failed (or the wait was interrupted): no run left behind
                for fut in futures.values():
                    fut.cancel()
                raise
        done.append(dep)
        if progress:
            progress(len(done), max_simulations)
        if dep.meets:
            best[fam] = dep
            if winner is None or _key(dep, objective) < _key(winner, objective):
                winner = dep
            continue
        nxt = [(a + 1, 0)] if not fam.disagg else []
        if fam.disagg:
            if dep.ttft_at_percentile_s > slo_ttft:
                nxt.append((a + 1, b))
            if dep.tpot_at_percentile_s > slo_tpot:
                nxt.append((a, b + 1))
        for na, nb in nxt:
            if max(na, nb) > MAX_REPLICAS:
                continue  # a pool holds at most MAX_REPLICAS replicas: this family ends here
            n = (na + nb) * fam.tp if fam.disagg else na * fam.tp * fam.dp
            heapq.heappush(heap, (*_bound(fam, n, objective), tie, fam, na, nb))
            tie += 1
    for fut in futures.values():  # speculative runs the search never reached
        fut.cancel()
    others = sorted((d for d in best.values() if d is not winner), key=lambda d: _key(d, objective))
    shown = others[:runners_up]
    for d in others[runners_up:]:  # and the best of every device kind not shown yet
        if d.device not in {x.device for x in shown} and (winner is None or d.device != winner.device):
            shown.append(d)
    return SizingResult(
        model=w.name,
        rate=rate,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        percentile=percentile,
        objective=objective,
        winner=winner,
        runners_up=tuple(shown),
        simulated=len(done),
        pruned=tuple(pruned),
        exhausted=proven or not heap,
        requests=requests,
        workload=f"--requests {requests} --seed {seed} --prompt {prompt} --output {output} --arrival {arrival}",
        candidates=tuple(done),
        notes=tuple(notes),
    )


def _ruled_out(
    w: Any,
    hw: Hardware,
    tp: int,
    reqs: Sequence[Request],
    eng: EngineConfig,
    slos: tuple[float, float, float],
    group: RankStep | None,
) -> str | None:
    """Why a family's floors (:func:`_floors` with ``group``) rule it out under ``slos`` =
    ``(slo_ttft, slo_tpot, percentile)``; None: they do not."""
    slo_ttft, slo_tpot, percentile = slos
    ttft_lo, tpot_lo, why = _floors(w, hw, tp, reqs, eng, percentile, group)
    if why is None and tpot_lo > slo_tpot:
        why = f"TPOT floor {tpot_lo:.4g} s (one decode at batch 1) > SLO {slo_tpot:g} s"
    if why is None and ttft_lo > slo_ttft:
        why = f"TTFT floor {ttft_lo:.4g} s (the P{percentile:g} prompt alone) > SLO {slo_ttft:g} s"
    return why


def _bound(fam: _Family, devices: int, objective: str) -> tuple[float, float]:
    """The objective's lower bound for ``devices`` devices of ``fam`` (power only adds to price)."""
    price = fam.rates.price_usd_per_hour
    usd = devices * price if price is not None else math.inf
    return (usd, float(devices)) if objective == "cost" else (float(devices), usd)


def _key(d: Deployment, objective: str) -> tuple[float, float]:
    usd = d.cost.usd_per_hour if d.cost is not None else math.inf
    return (usd, float(d.devices)) if objective == "cost" else (float(d.devices), usd)


def _run_config(
    config: Any, ledgers: dict[tuple[Any, ...], Any], devices: dict[str, Hardware], *args: Any
) -> Deployment:
    """:func:`_run` in a worker process: the workload rebuilt from its config (a config pickles in
    a few kB; its built graphs are the worker's own), the memory ledgers this process built kept
    there (:func:`~graphs.serving.step.ledger_fit.keep_ledgers`: a worker's first run at a tp
    otherwise walks the model's graph for one, about 0.5 CPU s), and the candidates' devices as
    the submitting process resolved them registered where the worker's catalog lacks or differs
    from them (a ``--hw-file`` device, or one it replaced with ``--hw-override``). The deployment
    comes back without its run (``sim=None``, as from a run card): the search reads only the
    outcome, and a run's per-request arrays (4-11 MB pickled at 30,000 requests) would cross
    the process boundary for every candidate."""
    keep_ledgers(ledgers)
    known_devices(devices)
    fam, a, b, reqs, *rest = args
    return dataclasses.replace(_run(as_workload(config), fam, a, b, received(reqs), *rest), sim=None)


def _run(
    w: Any,
    fam: _Family,
    a: int,
    b: int,
    reqs: Sequence[Request],
    rate: float,
    slo_ttft: float,
    slo_tpot: float,
    q: float,
    pair: tuple[EngineConfig, EngineOverheads | None],
    link_bandwidth: float,
    grouping: _Group = _Group(),
    reqs_id: str | None = None,
) -> Deployment:
    """One candidate simulated (or, with ``reqs_id``, the digest of ``reqs``, read from its run
    card when the cache holds a good one, else simulated and carded)."""
    if fam.disagg:
        topo = Topology(tp=fam.tp, prefill_replicas=a, decode_replicas=b, link_bandwidth=link_bandwidth)
    else:
        topo = grouping.topology(fam, a)
    eng, ov = pair
    key = None
    if reqs_id is not None:
        key = run_key(
            w.config,
            fam.spec,
            topo,
            eng,
            ov,
            reqs_id,
            slo_ttft=slo_ttft,
            slo_tpot=slo_tpot,
            rate=rate,
            percentile=q,
        )
    out = load_outcome(key, reqs) if key is not None else None
    res = None
    if out is None:
        res = simulate(
            w,
            fam.spec,
            reqs,
            topology=topo,
            engine=eng,
            overheads=ov,
            slo_ttft=slo_ttft,
            slo_tpot=slo_tpot,
            rate=rate,
        )
        out = RunOutcome(
            _pct(res.per_request["ttft_s"], q), _pct(res.per_request["tpot_s"], q), ServedTotals.of(res)
        )
        if key is not None:
            save_outcome(key, out)
    t, p = out.ttft_s, out.tpot_s
    return Deployment(
        device=fam.device,
        tp=fam.tp,
        replicas=0 if fam.disagg else a,
        prefill_replicas=a if fam.disagg else 0,
        decode_replicas=b if fam.disagg else 0,
        devices=topo.devices,
        ttft_at_percentile_s=t,
        tpot_at_percentile_s=p,
        meets=t <= slo_ttft and p <= slo_tpot,
        cost=totals_cost(out.totals, fam.rates),
        sim=res,
        dp=fam.dp,
        expert_parallel=topo.expert_parallel,
        percentile=q,
    )
