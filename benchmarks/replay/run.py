"""A row's replay run in one mode, and its metric read back as the source's client read it.

Modes (:data:`MODES`): ``bound`` (every iteration at its per-kernel roofline), ``predicted`` (the
source engine's measured kernels alone, :func:`~benchmarks.replay.workload.predictor`) and
``simulated`` (``predicted`` plus the engine profile's own overheads: CPU time per iteration,
request path, streaming, CUDA-graph padding, scheduler policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from graphs.serving import simulate
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.pricing.predictor import Predictor
from graphs.serving.sim.simulator import SimResult, simulate_steady_loop

from .workload import RowWorkload, predictor, row_workload

__all__ = ["MODES", "Run", "overheads_for", "run_row", "simulate_row", "steady_rate"]

MODES = ("bound", "predicted", "simulated")


def overheads_for(w: RowWorkload, mode: str) -> EngineOverheads:
    """``overheads=`` for a mode: none at all for ``predicted`` (kernels only: ``simulate`` would
    otherwise add the framework's defaults), the profile's own (:meth:`EngineOverheads.for_framework`,
    with this engine's batch limits for its CUDA-graph sizes) for ``simulated``."""
    if mode == "predicted":
        return EngineOverheads()
    eng = w.engine
    return EngineOverheads.for_framework(
        w.profile or w.framework,
        max_num_seqs=eng.max_num_seqs,
        max_num_batched_tokens=eng.max_num_batched_tokens,
    )


@dataclass(frozen=True)
class Run:
    """What a metric is read from: the result, and per-request times as the client saw them."""

    res: SimResult
    ttft: np.ndarray  #: s, from the request's send
    tpot: np.ndarray
    e2e: np.ndarray
    finish: np.ndarray  #: s, sorted completion times


def _replay(w: RowWorkload, res: SimResult) -> Run:
    """Per-request latencies from each request's send (its arrival in the simulation).

    A ``concurrency`` load (a closed loop, :func:`~graphs.serving.sim.simulator.simulate_steady_loop`)
    and a ``steady`` load (a benchmark client's loop in its steady state, its first sends spread
    over one cycle) are read over their middle rounds: the first round starts the loop (a warm-up,
    which AIPerf runs apart) and the last one drains. A ``client`` load (the benchmark client as a
    source documents it, ``simulate(..., concurrency=N)`` from a burst) is read whole, as that
    client reads it: every request, the first burst and the drain included."""
    pr = res.per_request
    arrival = pr["arrival_s"]
    first = arrival + pr["ttft_s"]
    done = arrival + pr["e2e_s"]
    finish = np.sort(done)
    keep = np.ones(len(arrival), dtype=bool)
    if w.load in ("concurrency", "steady"):  # AIPerf warms up first; the last round drains
        assert w.concurrency is not None
        idx = np.argsort(arrival, kind="stable")
        keep[:] = False
        keep[idx[w.concurrency : len(idx) - w.concurrency]] = True
    return Run(res, (first - arrival)[keep], pr["tpot_s"][keep], (done - arrival)[keep], finish)


def steady_rate(finish: np.ndarray, full: int) -> float:
    """Completions per second while the system is full, over whole batches of ``full``
    completions (fixed-length requests that start together finish in waves): from the
    ``full``-th completion (the first batch, admitted together, is done) over as many whole
    batches as end before the ``full``-th from last (after it the last request has been
    admitted and the batch drains). Without one such batch (``--quick``), the whole run's mean."""
    a = full - 1
    k = (len(finish) - 1 - full - a) // full
    if k < 1 or finish[a + k * full] <= finish[a]:
        return len(finish) / float(finish[-1])
    return k * full / float(finish[a + k * full] - finish[a])


@cache
def simulate_row(
    w: RowWorkload, mode: str, quantile: float | None = None, overheads: EngineOverheads | None = None
) -> Run:
    """The row's replay in ``mode``; ``quantile``: every kernel at that quantile of its held-out
    error (:meth:`Predictor.at`), for the interval's ends; ``overheads``: these engine terms in
    place of the mode's (:func:`overheads_for`; a fit's trial values)."""
    pred = Predictor() if mode == "bound" else predictor(w).at(quantile)
    kw: dict[str, Any] = {}
    if mode != "bound":
        kw["overheads"] = overheads if overheads is not None else overheads_for(w, mode)
    run: Any = simulate
    if w.load == "client":  # the benchmark client: N clients sending back to back from a burst
        kw["concurrency"] = w.concurrency
    elif w.load in ("steady", "concurrency"):
        run = simulate_steady_loop  # the loop's steady state: first sends spread over a cycle
        kw["concurrency"] = w.concurrency
    res = run(
        w.config,
        w.device,
        list(w.requests),
        topology=w.topology,
        engine=w.engine,
        predictor=pred,
        rate=w.rate,
        **kw,
    )
    return _replay(w, res)


def run_row(row: dict[str, str], mode: str, *, quick: bool = False, quantile: float | None = None) -> float:
    """The row's metric from a replay in ``mode`` (one of :data:`MODES`), in the row's unit;
    ``quantile``: with every kernel at that quantile of its held-out error (not the bound)."""
    if mode not in MODES:
        raise CostModelError(f"mode {mode!r} not allowed; allowed: {', '.join(MODES)}")
    if quantile is not None and mode == "bound":
        raise CostModelError("the bound has no prediction interval: a quantile needs a predicted mode")
    w = row_workload(row, quick=quick)
    run = simulate_row(w, mode, quantile)
    res = run.res
    metric = row["metric"]
    out = sum(r.output for r in w.requests)
    osl = w.requests[0].output
    if metric in ("ttft_mean_s", "ttft_median_s", "ttft_p99_s"):
        return _stat(run.ttft, metric)
    if metric in ("itl_mean_s", "tpot_mean_s", "tpot_median_s", "tpot_p99_s"):
        return _stat(run.tpot, metric)
    if metric in ("e2e_mean_s", "e2e_median_s"):
        return _stat(run.e2e, metric)
    if w.load == "offline":  # output tokens over the published count's makespan
        full = w.engine.max_num_seqs * w.topology.replicas  # requests of one full batch
        span = run.finish[-1] + (w.published_requests - len(w.requests)) / steady_rate(run.finish, full)
        tokens, reqs = w.published_requests * osl, w.published_requests / span
        tok_s = tokens / span
    elif w.load in ("concurrency", "steady"):  # steady state: the closed loop's count is not published
        assert w.concurrency is not None
        reqs = steady_rate(run.finish, w.concurrency)
        tok_s = reqs * osl
    else:
        tok_s, reqs = out / res.duration_s, res.requests_per_s
    if metric == "requests_per_s":
        return reqs
    if metric == "per_gpu_output_throughput_tok_s":
        return tok_s / w.topology.devices
    if metric in ("output_throughput_tok_s", "mlperf_offline_tokens_s", "mlperf_server_tokens_s"):
        return tok_s
    raise CostModelError(f"row {row['id']}: metric {metric!r} has no reading")


def _stat(x: np.ndarray, metric: str) -> float:
    if metric.endswith("_p99_s"):
        return float(np.percentile(x, 99))
    if metric.endswith("_median_s"):
        return float(np.median(x))
    return float(np.mean(x))
