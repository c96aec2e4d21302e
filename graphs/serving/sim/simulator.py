"""Request-level serving simulation: TTFT, TPOT and end-to-end percentiles under a request rate.

Replicas (:class:`graphs.serving.sim.engine.Replica`) run continuous batching with chunked prefill
and a paged KV cache; every iteration costs the roofline step of its exact batch
(:class:`graphs.serving.step.mixed.MixedStep`, compiled once: no sympy per iteration). Topologies:

* one replica, or ``replicas`` behind a router: ``round_robin``, ``least_outstanding`` (the
  fewest prompt + output tokens still to process) or ``prefix`` (where the request's prefix or
  conversation is cached, within a load bound: :mod:`graphs.serving.sim.replica_routing`);
* disaggregated: ``prefill`` replicas run prompts, then the KV cache (``kv_bytes_per_token x
  prompt``) crosses a link (``bytes / bandwidth + layers x latency``, the terms of
  :mod:`graphs.serving.analysis.disagg`) to the least-loaded of ``decode`` replicas, which stream
  every token to the client, the first included: as vLLM's P/D proxy runs a request
  (``benchmarks/disagg_benchmarks/disagg_prefill_proxy_server.py`` of vllm-project/vllm: the
  prefill instance with ``max_tokens=1``, its token discarded, then the whole request on the decode
  instance, whose response is streamed back), and as vLLM's scheduler takes a prompt whose KV it
  holds whole (it recomputes the last token to sample from its logits). So the decode instance
  computes the prompt's last token in its first iteration with the request, and TTFT is prefill +
  transfer + that iteration (+ queueing at either), the disaggregated TTFT of ``serve disagg``.
  A one-token request ends at the prefill instance.

How requests are sent, as benchmark clients send them:

* open loop: each request at its ``arrival_s`` (a rate's arrivals, a trace's timestamps);
* a conversation's later turn (:mod:`graphs.serving.sim.requests`, ``session``): ``think_s`` after
  the previous turn's last token, so its send time comes out of the simulation;
* closed loop, ``concurrency=N``: ``N`` clients, each sending its next request (or its next
  conversation, turn after turn) when its previous answer has arrived plus that request's
  ``think_s``, in request order and never before the request's ``arrival_s``. Without a rate
  every ``arrival_s`` is 0 and the clients send back to back (GenAI-Perf/AIPerf ``--concurrency``,
  https://docs.nvidia.com/aiperf/benchmark-modes/load-generator-options-reference); with a rate a
  request waits for a free client after its scheduled time (``vllm bench serve --request-rate R
  --max-concurrency N``'s semaphore, vllm PR 9390; AIPerf's "request rate with max concurrency").
  ``stagger_s=T`` sends the clients' first requests at independent uniform times in ``[0, T)``
  (seeded, so a run repeats) instead of all at once: the steady state of a real closed loop.
  Identical requests sent together stay in step in a deterministic replay (each client sees the
  same iterations, so their phases keep their spacing: prompts of one round queue behind each
  other for as many rounds as the run has), while a real loop's jitter (iteration times, network,
  streaming) drifts the clients' phases apart until they are spread over a cycle; with ``T`` one
  request's send-to-last-token time the replay starts there (:func:`closed_loop_cycle`).

Requests that reach an idle replica at one instant: the first starts an iteration alone and the
others join the next one. An engine's loop does not wait to fill a batch: it schedules what its
queue holds when it wakes, and a server's front end hands a burst over one request after another
(each parsed and tokenised in turn), so the first prompt of a burst runs alone (vLLM V1's engine
core blocks on its input queue, then schedules). ``prefill --batch N`` prices N prompts in one
step, the offline engine's first iteration, which the simulator reaches when the first iteration
is already running.

A conversation's cached history lives on the replica that served its previous turn; only the
``prefix`` router keeps a conversation there (session affinity), so with the others a later turn
hits the cache only when it is routed back there (a disaggregated pool keeps it on the decode
side, a miss for the prefill side).

What is measured, as those tools measure it (NIM's benchmarking metrics,
https://docs.nvidia.com/nim/benchmarking/llm/metrics): TTFT is the first streamed token's time
(the end of the iteration that samples it) minus the request's send time, queueing included;
E2E is send to last token; TPOT ``(E2E - TTFT) / (output - 1)``. Throughput is completed
requests (and output tokens) over the duration, first send to last answer. For an open loop the
window between the first and the last arrival is also reported apart (steady state) from the
drain tail after the last arrival; a closed loop has no such split (no backlog outlives the
arrivals: each request is sent only when a client is free), so its throughput is the whole
run's, as ``vllm bench serve`` and AIPerf report it.

Each replica keeps its steadily decoding sequences in closed form and runs the iterations that
only decode them, up to the next event, at once (:mod:`graphs.serving.sim.skipping`; ``skip=False``
runs the per-sequence loop alone, the reference it equals); so does each rank of a data-parallel
group, and the group runs such iterations at once when every rank with work is in a window.

The event loop is a heap of (time, event) pairs: arrivals, iteration ends and KV arrivals. An
iteration-level model has few event kinds and no processes that wait on resources, so a plain
heap is simpler and faster than a discrete-event library (SimPy's generator processes would add
a context switch per iteration for nothing it needs).
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import itertools
import math
import numbers
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.outfiles import atomic_write
from costmodel.results import Result, plain
from models.config import ModelConfig

from ..analysis.parallel import dp_weights_saved
from ..engines.knobs import frontend_end_s
from ..pricing.kernel_sources import Coverage
from ..pricing.overheads import EngineOverheads
from ..pricing.predictor import Predictor, predicted_mixed_step
from ..pricing.protocols import IterationStep, MeteredIterationStep
from ..step.ledger_fit import build_ledger
from ..step.workload import Workload, as_workload
from .data_parallel import DISPATCHES, LockstepGroup, RankStep, check_group, group_step
from .engine import EngineConfig, Replica, kv_blocks, pool_memory, state_sequences
from .engine import Sequence as Seq
from .kv_tiers import KVTierConfig, KVTiers, TierStats, tier_stats
from .replica_routing import PrefixRouter, least_outstanding
from .requests import MAX_TOKENS, RATE_RANGE, THINK_RANGE, Request
from .specdec_sim import SpecConfig, SpecStats, Speculator

__all__ = [
    "Topology",
    "SimResult",
    "default_engine",
    "simulate",
    "simulate_steady_loop",
    "steady_stagger_s",
    "closed_loop_cycle",
    "default_overheads",
    "pool_blocks",
    "Summary",
]

ROUTERS = ("round_robin", "least_outstanding", "prefix")
MAX_REPLICAS = 4096  #: most replicas in one pool (and the largest tp)
#: KV-transfer link bandwidths accepted (bytes/s): 1 MB/s to 1 PB/s
LINK_BANDWIDTH_RANGE = (1e6, 1e15)
MAX_CONCURRENCY = 10**7  #: most closed-loop clients


@dataclass(frozen=True)
class Topology(Result):
    """How many replicas of ``tp`` devices, routed how; or disaggregated prefill/decode pools."""

    replicas: int = 1
    tp: int = 1
    router: str = "least_outstanding"
    prefill_replicas: int = 0  #: > 0: disaggregated, with ``decode_replicas``
    decode_replicas: int = 0
    link_bandwidth: float | None = None  #: bytes/s per direction for the KV transfer (disaggregated)
    link_latency: float = 0.0  #: s per layer's transfer
    prefix_eps: float = 0.5  #: router prefix: load bound, (1 + eps) x the mean outstanding tokens
    #: data-parallel attention ranks per replica, the MoE layers over all dp x tp devices
    #: (:mod:`graphs.serving.sim.data_parallel`); 1: none
    dp: int = 1
    #: experts whole per device (EP) over the dp x tp devices, else width-split; with dp 1 the tp
    #: group's own expert parallelism (vLLM's ``--enable-expert-parallel`` beside TP alone, SGLang's
    #: ``--ep-size`` equal to ``--tp-size``: :mod:`graphs.serving.sim.data_parallel`, D = 1)
    expert_parallel: bool = False
    moe_dispatch: str = "allgather_reducescatter"  #: with dp > 1: how tokens reach their experts

    def to_dict(self) -> dict[str, Any]:
        """Every field, the link's under keys that name their units (``link_bandwidth_bytes_per_s``,
        ``link_latency_s_per_layer``)."""
        out = super().to_dict()
        out["link_bandwidth_bytes_per_s"] = out.pop("link_bandwidth")
        out["link_latency_s_per_layer"] = out.pop("link_latency")
        return out

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise CostModelError(f"router {self.router!r} not allowed; allowed: {', '.join(ROUTERS)}")
        for name, lo in (
            ("replicas", 1),
            ("tp", 1),
            ("prefill_replicas", 0),
            ("decode_replicas", 0),
            ("dp", 1),
        ):
            v = getattr(self, name)
            if isinstance(v, numbers.Integral) and not isinstance(v, bool | int):
                v = int(v)  # a numpy integer is a whole number (np.int64(2) was refused as not one)
                object.__setattr__(self, name, v)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= MAX_REPLICAS:
                raise CostModelError(f"{name} must be a whole number in [{lo}, {MAX_REPLICAS}], got {v!r}")
        if (self.prefill_replicas > 0) != (self.decode_replicas > 0):
            raise CostModelError(
                "a disaggregated topology needs both prefill_replicas and decode_replicas > 0"
            )
        if self.disaggregated:
            bw_lo, bw_hi = LINK_BANDWIDTH_RANGE
            bw = self.link_bandwidth
            if not (isinstance(bw, int | float) and bw_lo <= bw <= bw_hi):
                raise CostModelError(
                    f"link_bandwidth must be in [{bw_lo:g}, {bw_hi:g}] bytes/s for a disaggregated "
                    f"topology, got {bw!r}"
                )
        PrefixRouter(self.prefix_eps)  # validates eps
        if not isinstance(self.expert_parallel, bool):
            raise CostModelError(f"expert_parallel must be true or false, got {self.expert_parallel!r}")
        if self.moe_dispatch not in DISPATCHES:
            raise CostModelError(
                f"moe_dispatch must be one of {', '.join(DISPATCHES)}, got {self.moe_dispatch!r}"
            )
        if self.grouped and (self.disaggregated or self.router == "prefix"):
            what = (
                "data-parallel attention (dp > 1)"
                if self.dp > 1
                else "expert parallelism inside the tp group"
            )
            raise CostModelError(f"{what} runs aggregated, behind a least_outstanding or round_robin router")
        if self.dp == 1 and self.tp == 1 and self.expert_parallel:
            raise CostModelError(
                "expert_parallel spreads the experts over a group of devices: it needs dp > 1 or tp > 1 "
                "(one device holds every expert)"
            )
        if self.dp == 1 and self.expert_parallel and self.moe_dispatch != "allgather_reducescatter":
            raise CostModelError(
                f"moe_dispatch {self.moe_dispatch!r} needs dp > 1: with dp 1 every device of the tp "
                "group holds every token after the attention's all-reduce, and the experts' outputs "
                "are summed by the tp all-reduce (no dispatch)"
            )
        lat = self.link_latency
        if not (isinstance(lat, int | float) and 0 <= lat <= 1):
            raise CostModelError(f"link_latency must be in [0, 1] s per layer, got {lat!r}")

    @property
    def disaggregated(self) -> bool:
        return self.prefill_replicas > 0

    @property
    def grouped(self) -> bool:
        """Whether a replica's MoE layers span a group priced by
        :mod:`graphs.serving.sim.data_parallel`: data-parallel attention (``dp > 1``) or the tp
        group's expert parallelism (``dp`` 1, ``expert_parallel``)."""
        return self.dp > 1 or self.expert_parallel

    @property
    def devices(self) -> int:
        n = self.prefill_replicas + self.decode_replicas if self.disaggregated else self.replicas
        return n * self.tp * self.dp


@dataclass(frozen=True)
class Summary(Result):
    """Mean and percentiles of one latency (s).

    Attributes
    ----------
    mean, p50, p90, p99 : float
        The mean and the 50th, 90th and 99th percentiles (s; NaN each with no samples).
    """

    mean: float
    p50: float
    p90: float
    p99: float

    def to_dict(self) -> dict[str, Any]:
        """The four numbers under keys that name their unit: ``mean_s``, ``p50_s``, ``p90_s``,
        ``p99_s``."""
        return {"mean_s": self.mean, "p50_s": self.p50, "p90_s": self.p90, "p99_s": self.p99}

    @classmethod
    def of(cls, x: np.ndarray) -> Summary:
        """Mean, P50, P90 and P99 of ``x`` (NaN each for an empty array).

        Parameters
        ----------
        x : numpy.ndarray
            Samples (s).

        Returns
        -------
        Summary
        """
        if x.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(x, [50, 90, 99])
        return cls(float(x.mean()), float(p50), float(p90), float(p99))


#: :meth:`SimResult.to_dict`'s keys for the fields whose names do not say their unit (simulate
#: --json: a key names its unit; were ``rate``, ``slo_attainment``, ``mean_batch``, ``mean_in_system``)
JSON_KEYS = {
    "rate": "rate_requests_per_s",
    "slo_attainment": "slo_attainment_fraction",
    "mean_batch": "mean_batch_sequences",
    "mean_in_system": "mean_requests_in_system",
}


@dataclass(frozen=True)
class SimResult(Result):
    """One simulation: per-request latencies, their summaries, throughput, goodput, utilisation.

    Attributes
    ----------
    model : str
        The model's name.
    device : str
        The device's name.
    topology : Topology
        Replicas, tensor parallelism, pools and the router.
    rate : float or None
        The offered rate as given (requests/s; None: not given).
    requests : int
        Requests simulated.
    duration_s : float
        First send to last finish (the drain tail included).
    ttft : Summary
        Time to first token over the requests (s).
    tpot : Summary
        Time per output token after the first, over the requests (s).
    e2e : Summary
        Send to last token, over the requests (s).
    requests_per_s : float
        Requests / duration_s: the drain tail after the last arrival included.
    output_tokens_per_s : float
        Output tokens / duration_s.
    output_tokens_per_s_per_device : float
        ``output_tokens_per_s`` over the topology's devices.
    steady_requests_per_s : float or None
        Completions per second between the first and the last arrival (None when every request
        arrives at once, and for a closed loop).
    steady_output_tokens_per_s : float or None
        Output tokens per second of that window.
    steady_window_s : float
        Last arrival - first arrival.
    offered_requests_per_s : float or None
        The arrivals' own rate over that window: (n - 1) / window.
    drain_s : float
        Last finish - last send: the tail after the arrivals stop (closed loop: the last E2E).
    time_origin_s : float
        The first arrival's time; every time inside is relative to it.
    goodput_requests_per_s : float or None
        Requests/s meeting both SLOs.
    slo_attainment : float or None
        Fraction of requests meeting both SLOs (None: no SLO given).
    preemptions : int
        Sequences preempted, over the replicas.
    prefix_cache_hits : int
        Admissions that started after a cached shared prefix.
    iterations : int
        Engine iterations, over the replicas.
    mean_batch : float
        Sequences per iteration, averaged over the iterations.
    mean_kv_utilisation : float
        Fraction of the KV blocks in use, averaged over the iterations.
    mean_in_system : float
        Requests waiting or running, time-averaged from the replicas' queue records.
    per_request : dict of str to numpy.ndarray
        Per request: ``arrival_s`` (the send time), ``ttft_s``, ``tpot_s``, ``e2e_s``, ``prompt``,
        ``output``, ``preemptions``, ``session``, ``turn``, ``queued_s`` (send + the request path)
        and ``scheduled_s`` (its first iteration's start).
    timeline : dict of str to numpy.ndarray
        ``t``, ``batch``, ``waiting``, ``running``, ``kv_used`` per iteration, all replicas, and
        ``replica``: the index of the replica (data-parallel rank; disaggregated, the prefill
        replicas first) that recorded each sample.
    predictor : str
        What priced the iterations (:class:`Predictor` label).
    coverage : Coverage or None
        A predicted run's iteration seconds by what they rest on (None for the bound).
    clamped_s : float
        Iteration seconds where a prediction fell below its bound (clamped).
    busy_device_s : float
        Device-seconds iterating (replica busy time x tp).
    prefill_device_s : float
        The part of ``busy_device_s`` attributed to prefill chunks (s; a mixed iteration's decodes
        are charged what they take alone).
    concurrency : int or None
        Closed-loop clients (None: open loop).
    spec : SpecStats or None
        Speculative decoding's counters (None: plain decoding).
    prefix_routed : tuple of (int, int) or None
        Router ``prefix``: (requests sent where their prefix or conversation is, those the load bound
        sent elsewhere).
    kv_tiers : TierStats or None
        Prefix hits from host memory / SSD and their load time.
    overheads : str or None
        The engine overheads used, on one line (:meth:`EngineOverheads.summary`; None: none).
    state_capped : tuple of (int, float) or None
        A pure state-space model's running sequences as its recurrent state caps them (the
        sequences, bytes of state each; said in the output); None otherwise.
    decode_capacity_tokens_per_s : float or None
        The most output tokens per second the decoding replicas can emit in a steady load of these
        requests: each at its best batch up to its largest (``max_num_seqs``, the token budget,
        the KV pool at the requests' mean decoding context), pure decode with its CPU terms,
        prefill not charged (an upper bound; :func:`graphs.serving.planning.cost.served_seconds`
        reads it). None when speculating, for DP/EP groups, or with no output tokens.
    """

    model: str
    device: str
    topology: Topology
    rate: float | None
    requests: int
    duration_s: float  #: first send to last finish (the drain tail included)
    ttft: Summary
    tpot: Summary
    e2e: Summary
    requests_per_s: float  #: requests / duration_s: the drain tail after the last arrival included
    output_tokens_per_s: float  #: likewise
    output_tokens_per_s_per_device: float
    #: steady state: completions and output tokens between the first and the last arrival, per
    #: second of that window (None when every request arrives at once, and for a closed loop)
    steady_requests_per_s: float | None
    steady_output_tokens_per_s: float | None
    steady_window_s: float  #: last arrival - first arrival
    offered_requests_per_s: float | None  #: the arrivals' own rate over that window: (n - 1) / window
    drain_s: float  #: last finish - last send: the tail after the arrivals stop (closed loop: the last E2E)
    time_origin_s: float  #: the first arrival's time; every time inside is relative to it
    goodput_requests_per_s: float | None  #: requests/s meeting both SLOs
    slo_attainment: float | None
    preemptions: int
    prefix_cache_hits: int  #: admissions that started after a cached shared prefix
    iterations: int
    mean_batch: float
    mean_kv_utilisation: float
    mean_in_system: float  #: requests waiting or running, time-averaged from the replicas' queue records
    #: arrival_s (the send time), ttft_s, tpot_s, e2e_s, prompt, output, preemptions, session, turn,
    #: queued_s (send + the request path) and scheduled_s (its first iteration's start: an
    #: iteration boundary, the admission delay and any queueing after queued_s)
    per_request: dict[str, np.ndarray]
    timeline: dict[
        str, np.ndarray
    ]  #: t, batch, waiting, running, kv_used, replica (per iteration, all replicas)
    predictor: str = "roofline bound"  #: what priced the iterations (:class:`Predictor` label)
    #: a predicted run's iteration seconds by what they rest on (None for the bound)
    coverage: Coverage | None = None
    clamped_s: float = 0.0  #: iteration seconds where a prediction fell below its bound (clamped)
    #: device-seconds iterating (replica busy time x tp), and the part attributed to prefill
    #: chunks (:mod:`graphs.serving.planning.cost`: a mixed iteration's decodes are charged what they take alone)
    busy_device_s: float = 0.0
    prefill_device_s: float = 0.0
    concurrency: int | None = None  #: closed-loop clients (None: open loop)
    spec: SpecStats | None = None  #: speculative decoding's counters (None: plain decoding)
    #: router prefix: (requests sent where their prefix or conversation is, those the load bound sent elsewhere)
    prefix_routed: tuple[int, int] | None = None
    kv_tiers: TierStats | None = None  #: prefix hits from host memory / SSD and their load time
    #: the engine overheads used, on one line (:meth:`EngineOverheads.summary`; None: none)
    overheads: str | None = None
    #: the most output tokens/s the decoding replicas can emit in a steady load of these requests
    #: (:func:`_decode_capacity`; None: speculating, DP/EP groups, or no output)
    decode_capacity_tokens_per_s: float | None = None
    #: a pure state-space model's running sequences capped by their recurrent state: (sequences,
    #: bytes of state each); None when its tokens' KV bounds the pool
    state_capped: tuple[int, float] | None = None

    @property
    def queue_share(self) -> float:
        """The simulated queue share of TTFT: the requests' mean wait before their first
        iteration over their mean TTFT,

        .. math::

            q = \\frac{\\overline{t_{sched} - t_{queued}}}{\\overline{TTFT}}

        with ``t_queued`` the request's arrival at the engine (send + request path) and
        ``t_sched`` its first iteration's start (``per_request``'s ``queued_s`` and
        ``scheduled_s``): the admission delay to the next step boundary plus any queueing
        behind other requests. Near 0 at light load (TTFT is request path + prefill), near 1
        when waiting dominates. Known for every simulated run before anything is measured, it
        tells the served-error calibration which regime a run is in
        (:func:`graphs.serving.sim.served_errors.regime`). 0 when no request had a positive TTFT.

        Returns
        -------
        float
            A fraction in [0, 1].
        """
        pr = self.per_request
        ttft = float(np.mean(pr["ttft_s"])) if len(pr["ttft_s"]) else 0.0
        if not ttft > 0:
            return 0.0
        wait = float(np.mean(np.maximum(pr["scheduled_s"] - pr["queued_s"], 0.0)))
        return min(max(wait / ttft, 0.0), 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Every summary field and :attr:`queue_share`, each under a key that names its unit
        (:data:`JSON_KEYS` renames those whose attribute does not; the latency summaries'
        ``mean_s`` ... ``p99_s``, :meth:`Summary.to_dict`); ``prefix_routed`` and ``state_capped``
        as objects that label their two numbers. The per-request and per-iteration arrays stay
        out (CSV, plots)."""
        skip = ("per_request", "timeline")
        out = {
            JSON_KEYS.get(f.name, f.name): plain(getattr(self, f.name))
            for f in fields(self)
            if f.name not in skip
        }
        if self.prefix_routed is not None:
            here, elsewhere = self.prefix_routed
            out["prefix_routed"] = {"to_their_prefix": here, "elsewhere_by_load_bound": elsewhere}
        if self.state_capped is not None:
            seqs, each = self.state_capped
            out["state_capped"] = {"sequences": seqs, "state_bytes_per_sequence": each}
        return out | {"queue_share": self.queue_share}

    def requests_csv(self, path: str, flag: str = "csv") -> None:
        """One row per request (arrivals relative to :attr:`time_origin_s`), written atomically; a
        number a request has none of (the TPOT of one that generated a single token) is an empty
        cell, as ``sweep`` and ``search`` write it, never ``nan``.

        Parameters
        ----------
        path : str
            The CSV file (replaced atomically, never written through a link).
        flag : str
            The option that named it, printed in an error.
        """
        keys = list(self.per_request)
        rows = zip(*(self.per_request[k].tolist() for k in keys), strict=True)
        with atomic_write(path, flag) as f:
            f.write(",".join(keys) + "\n")
            for r in rows:
                f.write(
                    ",".join("" if isinstance(v, float) and not math.isfinite(v) else repr(v) for v in r)
                    + "\n"
                )


def closed_loop_cycle(res: SimResult, think_s: float = 0.0) -> float:
    """One client's cycle in a closed loop (s): the median, over its requests, of send to last
    token, plus ``think_s`` before the next send. With every request alike, the clients of a
    steady loop each take this long per request, so their phases spread over it.

    Parameters
    ----------
    res : SimResult
        A closed loop's result (simulated with ``concurrency=N``).
    think_s : float
        The client's pause before its next send (s).

    Returns
    -------
    float
        Seconds per request per client.

    Raises
    ------
    CostModelError
        When ``res`` is not a closed loop's.
    """
    if res.concurrency is None:
        raise CostModelError("closed_loop_cycle reads a closed loop's result (simulate with concurrency=N)")
    return float(np.median(res.per_request["e2e_s"])) + think_s


def steady_stagger_s(
    config: Any, device: str, requests: Sequence[Request], *, concurrency: int, **kw: Any
) -> float:
    """The ``stagger_s`` of a closed loop's steady state (:func:`simulate`'s module doc): one
    client's cycle (:func:`closed_loop_cycle`) in a run that starts every client together.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The device.
    requests : sequence of Request
        What the clients send.
    concurrency : int
        Clients in the loop.
    **kw
        The rest of :func:`simulate`'s keywords (not ``stagger_s``).

    Returns
    -------
    float
        The stagger (s).

    Raises
    ------
    CostModelError
        When ``stagger_s`` is given.
    """
    if "stagger_s" in kw:
        raise CostModelError(
            "the steady loop chooses stagger_s itself (one cycle); give simulate(stagger_s=...)"
        )
    burst = simulate(config, device, requests, concurrency=concurrency, **{**kw, "progress": None})
    return closed_loop_cycle(burst, float(np.median([r.think_s for r in requests])))


def simulate_steady_loop(
    config: Any, device: str, requests: Sequence[Request], *, concurrency: int, **kw: Any
) -> SimResult:
    """A closed loop of ``concurrency`` clients in its steady state: its first sends spread
    uniformly over one cycle (:func:`steady_stagger_s`).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The device.
    requests : sequence of Request
        What the clients send.
    concurrency : int
        Clients in the loop.
    **kw
        The rest of :func:`simulate`'s keywords (not ``stagger_s``).

    Returns
    -------
    SimResult
    """
    cycle = steady_stagger_s(config, device, requests, concurrency=concurrency, **kw)
    return simulate(config, device, requests, concurrency=concurrency, stagger_s=cycle, **kw)


def pool_blocks(w: Workload, hw: Hardware, cfg: EngineConfig, ledger: Any) -> int:
    """KV blocks of one replica as :func:`simulate` sizes its pool: ``cfg.num_blocks`` when given,
    else :func:`~graphs.serving.sim.engine.kv_blocks` of the decode ``ledger`` on ``hw``'s memory.

    Parameters
    ----------
    w : Workload
        The model.
    hw : Hardware
        The device.
    cfg : EngineConfig
        The engine's knobs.
    ledger : MemoryLedger
        One device's decode ledger (weights, activation and KV bytes per token).

    Returns
    -------
    int
        Blocks.

    Raises
    ------
    CostModelError
        When no block fits (:func:`~graphs.serving.sim.engine.kv_blocks`).
    """
    return cfg.num_blocks or kv_blocks(
        ledger,
        pool_memory(hw),
        cfg,
        int(w.config.num_hidden_layers),
        int(getattr(w.config, "vocab_size", 0) or 0),
    )


def default_overheads(predictor: Predictor, engine: EngineConfig) -> EngineOverheads:
    """The engine overheads :func:`simulate` takes when given none: the predictor framework's
    defaults (none for the bound), with the engine's sequence and token limits.

    Parameters
    ----------
    predictor : Predictor
        What prices the iterations.
    engine : EngineConfig
        The scheduler's settings.

    Returns
    -------
    EngineOverheads
    """
    return EngineOverheads.default(
        predictor.framework,
        max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_num_batched_tokens,
    )


def default_engine(
    config: ModelConfig | str | Workload, device: Hardware | str, topology: Topology
) -> EngineConfig:
    """The engine :func:`simulate` runs when given none: the registered ``vllm`` profile (V1) set
    up for ``device`` and ``topology``'s tp and data-parallel ranks
    (:func:`graphs.serving.sim.engine.profile_engine`: its limits on the device, its KV-pool rule
    with the start-up reserves), as ``costmodel simulate`` builds it without ``--engine``, so the
    library and the command answer one question alike.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    topology : Topology
        Its tp, dp and expert parallelism.

    Returns
    -------
    EngineConfig
    """
    from ..engines import get_engine
    from .engine import profile_engine

    return profile_engine(
        get_engine("vllm"),
        config,
        device,
        tp=topology.tp,
        dp=topology.dp,
        expert_parallel=topology.expert_parallel,
    )


def _shown(value: Any) -> str:
    """A value as an error names it: its type and the start of its repr."""
    return f"{type(value).__name__} {repr(value)[:40]}"


def _check_types(requests: Any, topology: Any, engine: Any, predictor: Any) -> None:
    """Refuse an argument of :func:`simulate` of the wrong type in one line naming it (a dict
    for a :class:`Topology`, an engine's name for an :class:`EngineConfig`), before any work:
    else it fails deep inside on an attribute it lacks."""
    if topology is not None and not isinstance(topology, Topology):
        raise CostModelError(
            f"topology must be a Topology (Topology(tp=2, replicas=4)), got {_shown(topology)}"
        )
    if engine is not None and not isinstance(engine, EngineConfig):
        raise CostModelError(
            "engine must be an EngineConfig (an engine profile's on a device: "
            f"graphs.serving.sim.engine.profile_engine(get_engine('vllm'), ...)), got {_shown(engine)}"
        )
    if predictor is not None and not isinstance(predictor, Predictor | str):
        raise CostModelError(
            f"predictor must be a Predictor or a corpus framework's name (Predictor.of), got {_shown(predictor)}"
        )
    if isinstance(requests, str | bytes | dict) or not isinstance(requests, Sequence):
        raise CostModelError(f"requests must be a sequence of Request, got {_shown(requests)}")
    bad = next((i for i, r in enumerate(requests) if not isinstance(r, Request)), None)
    if bad is not None:
        raise CostModelError(
            f"requests[{bad}] must be a Request (synthetic() draws them), got {_shown(requests[bad])}"
        )


def _check_lengths(requests: Sequence[Request]) -> None:
    """Refuse a request whose prompt or output is not a whole number of tokens in
    ``[1, MAX_TOKENS]``, naming the request and the field (as :func:`simulate` names a bad
    arrival or think time): one numpy pass over each field, the requests walked only to name the
    first bad one.

    Parameters
    ----------
    requests : sequence of Request
        What is sent.

    Raises
    ------
    CostModelError
        When a prompt or an output is fractional, a bool, not a number, below 1 or above
        :data:`~graphs.serving.sim.requests.MAX_TOKENS`.
    """
    for name in ("prompt", "output"):
        values = [getattr(r, name) for r in requests]
        arr = np.asarray(values, dtype=object if any(type(v) is bool for v in values) else None)
        if arr.dtype.kind in "iu" and arr.min() >= 1 and arr.max() <= MAX_TOKENS:
            continue
        for r, v in zip(requests, values, strict=True):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= MAX_TOKENS:
                raise CostModelError(
                    f"request {r.rid}: {name} must be a whole number of tokens in [1, {MAX_TOKENS}], got {v!r}"
                )


def simulate(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    requests: Sequence[Request],
    *,
    topology: Topology | None = None,
    engine: EngineConfig | None = None,
    slo_ttft: float | None = None,
    slo_tpot: float | None = None,
    rate: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    predictor: Predictor | str | None = None,
    concurrency: int | None = None,
    spec: SpecConfig | None = None,
    kv_tiers: KVTierConfig | None = None,
    overheads: EngineOverheads | None = None,
    stagger_s: float | None = None,
    stagger_seed: int = 0,
    skip: bool = True,
) -> SimResult:
    """Serve ``requests`` on ``device`` (module doc) and summarise what each request saw.

    A conversation's turns (``Request.session``) are sent one after another's answer.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model: a catalog name, a ``config.json`` path, a config, or a workload built once.
    device : Hardware or str
        The device of every replica (a catalog name or a spec).
    requests : sequence of Request
        What is sent: arrival (s), prompt and output tokens (whole numbers in
        ``[1, MAX_TOKENS]``), optional prefix and session.
    topology : Topology, optional
        Replicas, tensor parallelism, disaggregated pools and the router (default: one replica).
    engine : EngineConfig, optional
        The scheduler's knobs and KV pool (default :func:`default_engine`: the ``vllm`` profile's
        on the device and topology, what ``costmodel simulate`` runs without ``--engine``; another
        engine profile builds its own: :func:`graphs.serving.sim.engine.profile_engine`).
    slo_ttft, slo_tpot : float, optional
        Latency objectives (s) the result counts requests against.
    rate : float, optional
        The offered rate (requests/s, in :data:`~graphs.serving.sim.requests.RATE_RANGE`),
        reported with the result (the arrivals carry the load).
    progress : callable, optional
        Called with (done, total) requests as the run goes.
    predictor : Predictor or str, optional
        What prices every iteration's kernels (:mod:`graphs.serving.pricing.predictor`; a corpus
        framework's name, ``"vllm"``, is :meth:`Predictor.of` it; default the roofline bound).
    concurrency : int, optional
        A closed loop of that many clients, each sending its next request when its answer arrives.
    spec : SpecConfig, optional
        Speculative decoding of every decode (:mod:`graphs.serving.sim.specdec_sim`; a predictor prices
        the target's and the draft's forwards, MTP's module as the full step minus the plain one).
    kv_tiers : KVTierConfig, optional
        Host memory and SSD below the prefix cache (:mod:`graphs.serving.sim.kv_tiers`).
    overheads : EngineOverheads, optional
        The engine around the kernels (:mod:`graphs.serving.pricing.overheads`): None takes the predictor
        framework's defaults when predicting and none for the bound, whose results stay exactly
        as they were; a fitted or given ``kernel_scale`` never prices a step below its roofline.
    stagger_s : float, optional
        Spreads a closed loop's first sends over ``[0, stagger_s)`` (s; needs ``concurrency``).
    stagger_seed : int
        The seed of those first sends.
    skip : bool
        Advance each replica's steadily decoding sequences in closed form
        (:mod:`graphs.serving.sim.skipping`; the same times as the per-sequence loop, which
        ``False`` runs alone as the reference).

    Returns
    -------
    SimResult
        Per-request latency statistics (TTFT, TPOT, E2E), throughput (steady state and overall),
        SLO attainment, preemptions, KV use, and with a predictor what its seconds rest on.

    Raises
    ------
    CostModelError
        When there are no requests, an SLO, ``rate``, arrival, think time, prompt or output
        length, ``concurrency`` or ``stagger_s`` is out of range, or options that cannot combine
        are combined (speculation with ``dp > 1``).
    """
    _check_types(requests, topology, engine, predictor)
    if isinstance(predictor, str):  # a corpus framework by name, as --predict takes it
        predictor = Predictor.of(predictor)
    w = as_workload(config)
    hw = get_device(device)
    topo = topology or Topology()
    cfg = engine or default_engine(w, hw, topo)
    if not requests:
        raise CostModelError("no requests to simulate")
    for name, slo in (("slo_ttft", slo_ttft), ("slo_tpot", slo_tpot)):
        if slo is not None and not (isinstance(slo, int | float) and 0 < slo <= 1e6):
            raise CostModelError(f"{name} must be in (0, 1e6] s, got {slo!r}")
    lo, hi = RATE_RANGE
    if rate is not None and (
        isinstance(rate, bool)
        or not (isinstance(rate, int | float | np.integer | np.floating) and lo <= rate <= hi)
    ):
        raise CostModelError(f"rate must be in [{lo:g}, {hi:g}] requests per second, got {rate!r}")
    t0 = min(r.arrival_s for r in requests)
    if not (math.isfinite(t0) and t0 >= 0):
        raise CostModelError(f"arrival times must be finite and >= 0, got {t0!r}")
    if concurrency is not None and (
        not isinstance(concurrency, int)
        or isinstance(concurrency, bool)
        or not 1 <= concurrency <= MAX_CONCURRENCY
    ):
        raise CostModelError(
            f"concurrency must be a whole number of clients in [1, {MAX_CONCURRENCY}], got {concurrency!r}"
        )
    if stagger_s is not None:
        if concurrency is None:
            raise CostModelError("stagger_s spreads a closed loop's first sends: it needs concurrency")
        if isinstance(stagger_s, bool) or not (isinstance(stagger_s, int | float) and 0 <= stagger_s <= 1e6):
            raise CostModelError(f"stagger_s must be in [0, 1e6] s, got {stagger_s!r}")
    lo, hi = THINK_RANGE
    think = np.array([r.think_s for r in requests], dtype=float)
    if not ((think >= lo) & (think <= hi)).all():  # NaN fails both
        bad = next(r for r in requests if not lo <= r.think_s <= hi)
        raise CostModelError(f"request {bad.rid}: think_s must be in [{lo:g}, {hi:g}] s, got {bad.think_s!r}")
    _check_lengths(requests)
    pred = predictor or Predictor()
    ov = overheads if overheads is not None else default_overheads(pred, cfg)
    step: IterationStep = predicted_mixed_step(w, hw, tp=topo.tp, predictor=pred)
    led = build_ledger(w, "decode", 1, topo.tp, None, None)
    if topo.grouped:  # attention DP or EP, the experts over the group (graphs.serving.sim.data_parallel)
        check_group(topo.dp, w.config.is_moe, topo.expert_parallel)
        if spec is not None:
            raise CostModelError(
                "speculative decoding with data-parallel attention (dp > 1) or expert parallelism is not modelled"
            )
        step = group_step(
            w,
            hw,
            dp=topo.dp,
            tp=topo.tp,
            expert_parallel=topo.expert_parallel,
            dispatch=topo.moe_dispatch,
            predictor=pred,
            rank=step,
        )
    if isinstance(step, MeteredIterationStep):
        step.reset()
    specs: list[Speculator] = []
    if spec is not None:  # the target's and the proposer's steps, each priced by the predictor
        specs.append(Speculator(spec, w, hw, topo.tp, predictor=pred))
        step, led = specs[0].target_step, specs[0].ledger
        specs[0].reset()
    pool_led: Any = led
    if topo.dp > 1:  # the experts spread over dp x tp devices: a device holds less than a tp-rank alone
        pool_led = SimpleNamespace(
            weights_bytes=as_float(led.weights_bytes) - dp_weights_saved(w, topo.tp, topo.dp),
            activation_bytes_per_token=led.activation_bytes_per_token,
            kv_bytes_per_token=led.kv_bytes_per_token,
        )
    blocks = pool_blocks(w, hw, cfg, pool_led)
    capped: tuple[int, float] | None = None
    if not cfg.num_blocks:  # a pure state-space model: its sequences' state fills the pool, not tokens
        states = state_sequences(
            pool_led,
            pool_memory(hw),
            cfg,
            int(w.config.num_hidden_layers),
            int(getattr(w.config, "vocab_size", 0) or 0),
        )
        if states is not None and states < cfg.max_num_seqs:
            cfg = dataclasses.replace(cfg, max_num_seqs=states)
            capped = (states, as_float(pool_led.state_bytes_per_sequence))
    tiered = kv_tiers is not None and kv_tiers.enabled
    host_bw = 0.0
    if tiered:
        assert kv_tiers is not None
        if not cfg.enable_prefix_caching:
            raise CostModelError("KV-cache tiers hold evicted prefixes: they need enable_prefix_caching")
        if kv_tiers.host_bandwidth is not None:
            host_bw = kv_tiers.host_bandwidth
        elif any(lk.name == "host" for lk in hw.links):
            host_bw = as_float(hw.link("host").bandwidth_bytes_per_s)
        else:
            raise CostModelError(
                f"device {hw.name} has no sourced host link in the catalog; give the host link bandwidth (bytes/s, --host-link-bandwidth)"
            )

    def pool(n: int, start: int) -> list[Replica]:
        def tiers() -> KVTiers | None:
            if not tiered:
                return None
            assert kv_tiers is not None
            return KVTiers(kv_tiers, host_bw, cfg.block_size, as_float(led.kv_bytes_per_token), topo.tp)

        return [
            Replica(step, blocks, cfg, start + i, specs[0] if specs else None, tiers(), ov, skip=skip)
            for i in range(n)
        ]

    groups: list[Any] = []
    if topo.grouped:
        assert isinstance(step, RankStep)
        groups = [LockstepGroup(pool(topo.dp, i * topo.dp), step.stage, i) for i in range(topo.replicas)]
    if groups:
        front = back = groups
    elif topo.disaggregated:
        front = pool(topo.prefill_replicas, 0)
        back = pool(topo.decode_replicas, topo.prefill_replicas)
        kv_tok = as_float(led.kv_bytes_per_token) * topo.tp  # the whole cache crosses, all tp shards
        layers = as_float(w.config.num_hidden_layers)
        link_bw = topo.link_bandwidth
        assert link_bw is not None  # Topology requires it of a disaggregated topology
    else:
        front = back = pool(topo.replicas, 0)
    replicas = [m for g in groups for m in g.members] if groups else front if front is back else front + back
    # every time relative to the first arrival: absolute timestamps (1e9 s of Unix time, 1e15 ...)
    # would otherwise leave TTFTs and TPOTs below the floating-point spacing of the clock
    seqs = [Seq(r if t0 == 0 else dataclasses.replace(r, arrival_s=r.arrival_s - t0)) for r in requests]
    # without chunked prefill a prompt is computed in one iteration: under recompute a preempted
    # sequence's prompt and output so far (vLLM), under guaranteed_no_evict only its prompt, never
    # preempted (TensorRT-LLM's MicroBatchScheduler counts a context's remaining length alone)
    no_evict = replicas[0].no_evict
    for s in seqs:
        one = s.req.prompt if no_evict else s.req.prompt + s.req.output
        if not cfg.enable_chunked_prefill and one > cfg.max_num_batched_tokens:
            what = (
                f"{s.req.prompt} prompt tokens) is longer than max_num_batched_tokens "
                f"({cfg.max_num_batched_tokens}): without chunked prefill a prompt must fit one iteration "
                "(as TensorRT-LLM's scheduler requires)"
                if no_evict
                else f"{s.req.prompt} + {s.req.output} tokens) is longer than max_num_batched_tokens "
                f"({cfg.max_num_batched_tokens}): without chunked prefill a (re)computed prompt must fit "
                "one iteration (as vLLM requires)"
            )
            raise CostModelError(f"request {s.req.rid} ({what}")
        if not front[0].fits_ever(s):
            raise CostModelError(
                f"request {s.req.rid} ({s.req.prompt} + {s.req.output} tokens) needs more KV blocks than a "
                f"replica has ({blocks} of {cfg.block_size} tokens)"
            )
    capacity = _decode_capacity(seqs, back, ov, cfg) if not groups and not specs else None
    if isinstance(step, MeteredIterationStep):
        step.reset()  # the capacity's steps priced nothing the run iterates
    events: list[tuple[float, int, str, Any]] = []
    counter = itertools.count()
    heads, follow = _chains(seqs)
    queued = collections.deque(heads)  # chains no client has taken yet (closed loop)

    def release(s: Seq, not_before: float) -> None:
        sent = max(s.req.arrival_s, not_before)
        if sent != s.req.arrival_s:  # sent later than its arrival_s: that is its send time
            s.req = dataclasses.replace(s.req, arrival_s=sent)
        # the request path (API server, tokenisation, prefix-cache hashing) before the engine's
        # queue; the admission delay after it is the event loop's own: a request reaching a busy
        # replica waits for the running iteration's end (kick runs only at iteration boundaries)
        path = ov.request_path_s(s.req.prompt, cfg.enable_prefix_caching)
        heapq.heappush(events, (sent + path, next(counter), "arrive", s))

    first = len(heads) if concurrency is None else min(concurrency, len(heads))
    starts = np.zeros(first)
    if stagger_s:  # each client's first send, uniform over [0, stagger_s) (module doc)
        starts = np.sort(np.random.default_rng(stagger_seed).uniform(0.0, stagger_s, first))
    for t_first in starts.tolist():
        release(queued.popleft(), t_first)
    rr = itertools.cycle(range(len(front)))
    rr_back = itertools.cycle(range(len(back)))
    by_prefix = {id(front): PrefixRouter(topo.prefix_eps), id(back): PrefixRouter(topo.prefix_eps)}
    in_flight: dict[int, list[tuple[Seq, int]]] = {}
    finished = 0
    # per iteration, when it ended and the output tokens it emitted: flat arrays (8 bytes a
    # value), where a million-request run does a million iterations
    emitted = _Emitted(array("d"), array("q"))
    # the shared front end (graphs.serving.engines.knobs, module doc): seconds per emitted token,
    # and per replica (or lockstep group) when it has drained the last handed-over iteration
    fe_s = ov.frontend_token_s / cfg.api_server_count
    drained: dict[int, float] = {}

    def route(pool_: list[Replica], cycle: Any, s: Seq) -> Replica:
        # one replica: no choice to make, and no O(running) sum of outstanding tokens per arrival
        if len(pool_) == 1 and topo.router != "prefix":
            return pool_[0]
        if topo.router == "round_robin":
            return pool_[next(cycle)]
        if topo.router == "prefix":
            return by_prefix[id(pool_)].pick(pool_, s)
        return least_outstanding(pool_)

    def kick(rep: Replica, now: float) -> None:
        if rep.busy_until is not None or rep.idle:
            return
        if skip:  # iterations that only decode, ending before the next event: run at once
            horizon = events[0][0] if events else math.inf
            ends = (
                rep.decode_window(now, horizon, (drained.get(id(rep), 0.0), fe_s))
                if fe_s
                else rep.decode_window(now, horizon)
            )
            if ends:
                n = len(rep.running)  # every one a steady decode: one token each
                emitted.ends.extend(ends)
                emitted.tokens.extend(itertools.repeat(n, len(ends)))
                now = ends[-1]
                if fe_s:  # the front end takes the window's last iteration's n tokens
                    drained[id(rep)] = now + n * fe_s
        batch = rep.schedule()
        size = rep.batch_len(batch)
        if not size:
            return
        end = now + rep.iteration_time(batch)
        if fe_s:  # handed over once the front end has drained the iteration before
            end = frontend_end_s(now, end - now, drained.get(id(rep), 0.0))
        for s, _ in batch:
            if s.scheduled_s is None:
                s.scheduled_s = now
        rep.busy_until = end
        in_flight[rep.index] = batch
        rep.sample(now, size)
        heapq.heappush(events, (end, next(counter), "iter", rep))

    while events:
        now, _, kind, obj = heapq.heappop(events)
        if kind == "arrive":
            obj.queued_s = now
            rep = route(front, rr, obj)
            obj.stop_after_prefill = topo.disaggregated
            rep.add(obj)
            # an idle replica starts an iteration on the first arrival: requests that reach it at
            # one instant do not wait for each other (module doc: an engine's loop does not wait)
            kick(rep, now)
        elif kind == "kv":
            obj.stop_after_prefill = False
            rep = route(back, rr_back, obj)
            # the decode instance holds the transferred prompt KV but for its last token, which it
            # computes to sample the client's first token (module doc: the prefill's is discarded)
            obj.computed = obj.req.prompt - 1
            obj.generated, obj.first_token_s = 0, None
            _admit_transferred(rep, obj)
            kick(rep, now)
        else:
            rep = obj
            batch = in_flight.pop(rep.index)
            rep.busy_until = None
            before = rep.emitted
            done, handed = rep.finish_iteration(batch, now)
            if handed:  # a prefill instance's one token goes to the proxy, not the client
                rep.emitted -= len(handed)
            emitted.ends.append(now)
            emitted.tokens.append(rep.emitted - before)
            if fe_s:  # the front end drains these tokens: the client sees each at their mean
                n_out = rep.emitted - before
                drained[id(rep)] = now + n_out * fe_s
                _stream(batch, done, now, (n_out + 1) / 2 * fe_s)
            finished += len(done)
            if progress and done:
                progress(finished, len(seqs))
            for s in done:  # the client has its answer: the conversation's next turn, or its next one
                nxt = follow.get(id(s))
                if nxt is None and queued:
                    nxt = queued.popleft()
                if nxt is not None:  # the answer reaches the client after its streaming
                    assert s.finish_s is not None
                    release(nxt, s.finish_s + ov.output_token_s * s.req.output + nxt.req.think_s)
            for s in handed:
                t_kv = s.req.prompt * kv_tok / link_bw + layers * topo.link_latency
                heapq.heappush(events, (now + t_kv, next(counter), "kv", s))
            kick(rep, now)
            if rep.idle:
                rep.sample(now, 0)  # the system empties: the queue-length record drops to zero
    if ov.output_token_s:  # detokenised and streamed one token after another (overheads doc)
        for s in seqs:
            assert s.first_token_s is not None and s.finish_s is not None
            s.first_token_s += ov.output_token_s
            s.finish_s += ov.output_token_s * s.req.output
    res = _summarise(
        w.name, hw.name, topo, rate, seqs, replicas, slo_ttft, slo_tpot, emitted, t0, concurrency
    )
    if capacity is not None:
        res = dataclasses.replace(res, decode_capacity_tokens_per_s=capacity)
    if capped is not None:
        res = dataclasses.replace(res, state_capped=capped)
    if specs:
        res = dataclasses.replace(res, spec=specs[0].stats())
    if tiered:
        res = dataclasses.replace(
            res, kv_tiers=tier_stats([r.tiers for r in replicas if r.tiers is not None])
        )
    if topo.router == "prefix":
        routers = {id(r): r for r in by_prefix.values()}.values()  # one when not disaggregated
        res = dataclasses.replace(
            res, prefix_routed=(sum(r.affine for r in routers), sum(r.bounded for r in routers))
        )
    policy = replicas[0].policy
    if not ov.is_zero or policy != "recompute":
        floored = sum(r.floored for r in replicas) + sum(
            g.floored for g in groups
        )  # said once: physics is a floor
        its = sum(r.iterations for r in replicas)
        held = (
            f"; the roofline floor bound the scaled kernels in {floored:,} of {its:,} iterations"
            if floored
            else ""
        )
        res = dataclasses.replace(res, overheads=f"{ov.summary()} (in force: {policy}){held}")
    if specs and not pred.is_bound:
        return dataclasses.replace(
            res, predictor=pred.label, coverage=specs[0].coverage(), clamped_s=specs[0].clamped_s
        )
    if not isinstance(step, MeteredIterationStep):
        return res
    return dataclasses.replace(res, predictor=pred.label, coverage=step.coverage(), clamped_s=step.clamped_s)


def _decode_capacity(
    seqs: list[Seq], back: list[Replica], ov: EngineOverheads, cfg: EngineConfig
) -> float | None:
    """The most output tokens per second the decoding replicas ``back`` can emit in a steady
    load of these requests (:attr:`SimResult.decode_capacity_tokens_per_s`): each replica's
    :meth:`~graphs.serving.sim.engine.Replica.decode_capacity` at the requests' mean decoding KV
    length, the output-token-weighted mean of ``prompt + output / 2`` (a decode of the ``j``-th
    token holds ``prompt + j`` tokens; with prefix caching each shared prefix held once, the
    sequences holding the rest), capped at the shared front end's
    ``api_server_count / frontend_token_s`` tokens/s where it has one, times the replicas."""
    out = np.array([s.req.output for s in seqs], dtype=float)
    total = float(out.sum())
    if total <= 0:
        return None
    prompt = np.array([s.req.prompt for s in seqs], dtype=float)
    ctx = float((out * (prompt + out / 2)).sum() / total)
    held, shared = ctx, 0.0
    if cfg.enable_prefix_caching:  # a shared prefix's blocks are held once, not by each sequence
        prefixes = {
            s.req.prefix_id: s.req.prefix for s in seqs if s.req.prefix_id is not None and s.req.prefix
        }
        if prefixes:
            own = np.array([s.req.prefix if s.req.prefix_id is not None else 0 for s in seqs], dtype=float)
            held = float((out * (prompt - own + out / 2)).sum() / total)
            shared = float(sum(prefixes.values()))
    got = back[0].decode_capacity(ctx, held, shared)
    if got is None:
        return None
    per = got[0]
    if ov.frontend_token_s > 0:
        per = min(per, cfg.api_server_count / ov.frontend_token_s)
    return per * len(back)


def _stream(batch: list[tuple[Seq, int]], done: list[Seq], now: float, delay_s: float) -> None:
    """Move the client's view of an iteration handed over at ``now`` by the front end's
    ``delay_s`` (:mod:`graphs.serving.engines.knobs`, module doc): the first tokens it sampled
    and the last tokens of the sequences it finished (a steady decode's middle tokens shift
    alike, which TPOT does not see)."""
    for s, _ in batch:
        if s.first_token_s == now:
            s.first_token_s = now + delay_s
    for s in done:
        if s.finish_s == now:
            s.finish_s = now + delay_s


class _Emitted(NamedTuple):
    """Per iteration of a run, in order: when it ended (s) and the output tokens it emitted."""

    ends: array[float]
    tokens: array[int]


def _chains(seqs: list[Seq]) -> tuple[list[Seq], dict[int, Seq]]:
    """What clients send: the first request of every conversation (a request without a session
    is one of its own) in send order (``arrival_s``, then request order), and each turn's next
    turn (keyed by ``id``) in ``turn`` order."""
    by_session: dict[int, list[Seq]] = {}
    heads: list[Seq] = []
    for s in seqs:
        if s.req.session is None:
            heads.append(s)
        else:
            by_session.setdefault(s.req.session, []).append(s)
    follow: dict[int, Seq] = {}
    for turns in by_session.values():
        turns.sort(key=lambda s: s.req.turn)
        heads.append(turns[0])
        follow.update((id(a), b) for a, b in itertools.pairwise(turns))
    order = {id(s): i for i, s in enumerate(seqs)}
    heads.sort(key=lambda s: (s.req.arrival_s, order[id(s)]))
    return heads, follow


def _admit_transferred(rep: Replica, s: Seq) -> None:
    """A sequence arriving with its prompt's KV: it waits for blocks like any other; its
    ``computed`` counts the transferred tokens, so the decode instance only decodes (a recompute
    preemption there would re-prefill it locally)."""
    s.replica = rep.index
    s.blocks = 0
    need = rep.admission_blocks(s, s.computed)
    if need <= rep.free_blocks and len(rep.running) < rep.cfg.max_num_seqs:
        rep.free_blocks -= need
        s.blocks = need
        rep.join(s)
    else:  # no room yet: recompute later from scratch (its KV could not be kept)
        s.computed = 0
        rep.add(s)


def _summarise(
    model: str,
    device: str,
    topo: Topology,
    rate: float | None,
    seqs: list[Seq],
    replicas: list[Replica],
    slo_ttft: float | None,
    slo_tpot: float | None,
    emitted: _Emitted,
    origin: float,
    concurrency: int | None,
) -> SimResult:
    missing = [s.req.rid for s in seqs if s.finish_s is None or s.generated != s.req.output]
    if missing:
        raise CostModelError(f"internal: {len(missing)} request(s) did not finish (first: {missing[0]})")
    for r in replicas:  # every block back: free, or held by a cached prefix nobody references
        cached = sum(e[0] for e in r.prefixes.values())
        if r.free_blocks + cached != r.num_blocks or any(e[2] for e in r.prefixes.values()):
            raise CostModelError(
                f"internal: replica {r.index} ends with {r.num_blocks - r.free_blocks - cached} block(s) leaked"
            )
    arrival = np.array([s.req.arrival_s for s in seqs])
    first = np.array([s.first_token_s for s in seqs], dtype=float)
    finish = np.array([s.finish_s for s in seqs], dtype=float)
    out = np.array([s.req.output for s in seqs])
    ttft = first - arrival
    e2e = finish - arrival
    multi = out > 1
    tpot = np.where(multi, (finish - first) / np.maximum(out - 1, 1), np.nan)
    span = float(finish.max() - arrival.min()) or math.inf
    ok = np.ones(len(seqs), dtype=bool)
    if slo_ttft is not None:
        ok &= ttft <= slo_ttft
    if slo_tpot is not None:
        ok &= ~multi | (tpot <= slo_tpot)
    has_slo = slo_ttft is not None or slo_tpot is not None
    # every replica's records, ordered as their tuples sort (time, then batch, waiting, ...), each
    # with its replica's index last (a page draws one line per replica: their samples interleave)
    recs = [(r.index, r.samples.array()) for r in replicas]
    tl = (
        np.concatenate([np.column_stack([a, np.full(len(a), i, dtype=float)]) for i, a in recs])
        if recs
        else np.zeros((0, 6))
    )
    tl = tl[np.lexsort(tl.T[::-1])]
    busy = tl[:, 1] > 0  # iteration records (the others mark a replica going idle)
    # their means, each column taken alone (a copy of every busy row is the run's size again)
    mean_batch = float(tl[busy, 1].mean()) if busy.any() else 0.0
    mean_kv = float(tl[busy, 4].mean()) if busy.any() else 0.0
    # Little's L, from the replicas' own queue records (waiting + running at each iteration start,
    # held until the next record): an independent check of rate x mean latency
    end = float(finish.max())
    area = 0.0
    for r in replicas:
        rec = r.samples.array()
        if len(rec):
            dt = np.diff(rec[:, 0], append=end)
            area += float(np.sum((rec[:, 2] + rec[:, 3]) * dt))
    mean_in = area / span if math.isfinite(span) else 0.0
    # steady state: what completes, and what is emitted, while requests still arrive
    t_first, t_last = float(arrival.min()), float(arrival.max())
    window = t_last - t_first
    steady_req = steady_tok = None
    em_s = np.frombuffer(emitted.ends, dtype=float) if len(emitted.ends) else np.zeros(0)
    em_n = (
        np.frombuffer(emitted.tokens, dtype=np.int64) if len(emitted.tokens) else np.zeros(0, dtype=np.int64)
    )
    if int(em_n.sum()) != int(out.sum()):
        raise CostModelError(f"internal: {int(em_n.sum())} tokens emitted for {int(out.sum())} asked")
    if window > 0 and concurrency is None:
        steady_req = float(np.count_nonzero(finish <= t_last)) / window
        steady_tok = float(em_n[em_s <= t_last].sum()) / window
    return SimResult(
        model=model,
        device=device,
        topology=topo,
        rate=rate,
        requests=len(seqs),
        duration_s=span,
        ttft=Summary.of(ttft),
        tpot=Summary.of(tpot[multi]),
        e2e=Summary.of(e2e),
        requests_per_s=len(seqs) / span,
        output_tokens_per_s=float(out.sum()) / span,
        output_tokens_per_s_per_device=float(out.sum()) / span / topo.devices,
        steady_requests_per_s=steady_req,
        steady_output_tokens_per_s=steady_tok,
        steady_window_s=window,
        offered_requests_per_s=(len(seqs) - 1) / window if window > 0 and concurrency is None else None,
        drain_s=end - t_last,
        time_origin_s=origin,
        goodput_requests_per_s=float(ok.sum()) / span if has_slo else None,
        slo_attainment=float(ok.mean()) if has_slo else None,
        preemptions=sum(r.preemptions for r in replicas),
        prefix_cache_hits=sum(r.prefix_hits for r in replicas),
        iterations=sum(r.iterations for r in replicas),
        mean_batch=mean_batch,
        mean_kv_utilisation=mean_kv,
        mean_in_system=mean_in,
        per_request={
            "arrival_s": arrival,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "prompt": np.array([s.req.prompt for s in seqs]),
            "output": out,
            "preemptions": np.array([s.preemptions for s in seqs]),
            "session": np.array([-1 if s.req.session is None else s.req.session for s in seqs]),
            "turn": np.array([s.req.turn for s in seqs]),
            # reached the engine's queue (send + request path), and its first iteration began
            "queued_s": np.array([s.queued_s for s in seqs], dtype=float),
            "scheduled_s": np.array([s.scheduled_s for s in seqs], dtype=float),
        },
        busy_device_s=sum(r.busy_s for r in replicas) * topo.tp,
        prefill_device_s=sum(r.prefill_s for r in replicas) * topo.tp,
        timeline={
            "t": tl[:, 0],
            "batch": tl[:, 1],
            "waiting": tl[:, 2],
            "running": tl[:, 3],
            "kv_used": tl[:, 4],
            "replica": tl[:, 5],
        },
        concurrency=concurrency,
    )
