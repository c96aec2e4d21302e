"""The highest request rate a deployment serves within its latency SLOs (bisection over rates).

A rate *meets* the SLOs when the ``percentile`` (default P99) of TTFT is at most ``slo_ttft``
and that of TPOT at most ``slo_tpot``, over a simulation of ``requests`` requests whose lengths
are drawn once (same seed) and whose arrival times are scaled to each rate. The rate is bracketed
by doubling from ``start``, then bisected in log space to ``rel_tol``; each probe is one
:func:`graphs.serving.simulator.simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.results import Result

from .requests import synthetic
from .simulator import SimResult, simulate

__all__ = ["MaxRate", "max_rate"]


@dataclass(frozen=True)
class MaxRate(Result):
    """The highest rate found within the SLOs, the probes that found it, and the result there."""

    rate: float | None  #: requests/s; None when even the lowest probe misses
    rate_per_device: float | None
    percentile: float
    slo_ttft: float | None
    slo_tpot: float | None
    probes: tuple[tuple[float, bool, float, float], ...]  #: (rate, meets, TTFT pct, TPOT pct)
    at_rate: SimResult | None


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else 0.0


def max_rate(
    config: Any,
    device: Any,
    *,
    slo_ttft: float | None,
    slo_tpot: float | None,
    requests: int = 1000,
    prompt: str = "lognormal:1000,1.0",
    output: str = "lognormal:250,1.0",
    arrival: str = "poisson",
    seed: int = 0,
    percentile: float = 99.0,
    start: float = 1.0,
    rel_tol: float = 0.02,
    max_probes: int = 30,
    progress: Callable[[int, int], None] | None = None,
    **sim: Any,
) -> MaxRate:
    """Bisect the request rate (module doc); ``sim`` goes to :func:`simulate` (topology, engine)."""
    if slo_ttft is None and slo_tpot is None:
        raise CostModelError("max_rate needs at least one SLO (slo_ttft or slo_tpot)")
    if not 0 < percentile <= 100:
        raise CostModelError(f"percentile must be in (0, 100], got {percentile}")
    base = synthetic(requests, rate=1.0, prompt=prompt, output=output, arrival=arrival, seed=seed)
    probes: list[tuple[float, bool, float, float]] = []
    results: dict[float, SimResult] = {}

    def meets(rate: float) -> bool:
        reqs = [replace(r, arrival_s=r.arrival_s / rate) for r in base]
        res = simulate(config, device, reqs, slo_ttft=slo_ttft, slo_tpot=slo_tpot, rate=rate, **sim)
        t, p = _pct(res.per_request["ttft_s"], percentile), _pct(res.per_request["tpot_s"], percentile)
        ok = (slo_ttft is None or t <= slo_ttft) and (slo_tpot is None or p <= slo_tpot)
        probes.append((rate, ok, t, p))
        results[rate] = res
        if progress:
            progress(len(probes), max_probes)
        return ok

    lo, hi = None, None
    rate = start
    while len(probes) < max_probes:  # bracket
        if meets(rate):
            lo, rate = rate, rate * 2
        else:
            hi, rate = rate, rate / 2
        if lo is not None and hi is not None:
            break
        if rate < 1e-6:
            break
    if lo is None:
        return MaxRate(None, None, percentile, slo_ttft, slo_tpot, tuple(probes), None)
    while hi is not None and hi / lo > 1 + rel_tol and len(probes) < max_probes:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    devices = results[lo].topology.devices
    return MaxRate(lo, lo / devices, percentile, slo_ttft, slo_tpot, tuple(probes), results[lo])
