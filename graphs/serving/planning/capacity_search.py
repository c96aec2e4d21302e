r"""The highest request rate a deployment serves within its latency SLOs (bisection over rates).

A rate *meets* the SLOs when the ``percentile`` (default P99) of TTFT is at most ``slo_ttft``
and that of TPOT at most ``slo_tpot``, over a simulation of ``requests`` requests whose lengths
are drawn once (same seed) and whose arrival times are scaled to each rate. The rate is bracketed
by doubling from ``start``, then bisected in log space to ``rel_tol``; each probe is one
:func:`graphs.serving.sim.simulator.simulate`.

Doubling never goes past a physical ceiling, the rate at which the token-wise kernels alone
would run back to back at their fastest (:meth:`graphs.serving.step.mixed.MixedStep.max_tokens_per_s`
per replica, or a data-parallel group's
:meth:`~graphs.serving.sim.data_parallel.RankStep.group_max_tokens_per_s`, over the workload's
mean tokens per request: prompt plus output minus one, since the first output token comes from
the prefill). When even the ceiling meets the SLOs, the
workload was too small to load the deployment (a few requests never queue): the result says so
(``saturated`` False) and gives no rate, rather than one no device could serve.

With an ``executor`` (a Dask ``Client`` or any ``concurrent.futures`` executor,
:mod:`graphs.serving.planning.executors`) the search probes ``at_once`` rates a round, each a task
carrying the model's config, the device's spec and the drawn requests: the bracket goes up (or
down) ``at_once`` doublings (halvings) a round, taken in order to the first miss (first meet),
and the bracket is then cut into ``k = at_once + 1`` equal parts in log space (a k-section: the
points :math:`lo\,(hi/lo)^{j/k}`, :math:`j = 1..k-1`), the new bracket the two points around the
first miss. A round narrows the bracket by :math:`k` where a bisection narrows it by 2, so
:math:`\lceil \log_k(\ln(hi/lo) / \ln(1 + rel\_tol)) \rceil` rounds instead of
:math:`\lceil \log_2 ... \rceil`. Both searches end with a bracket ``[lo, hi]``, ``lo`` meeting
and ``hi`` missing, ``hi / lo <= 1 + rel_tol``; where meeting the SLOs is monotone in the rate
both brackets hold the threshold rate, so the two answers agree to ``rel_tol``:
:math:`|lo_a / lo_b - 1| \le rel\_tol`. ``at_once = 1`` is the bisection, probe for probe.

Every rate probed is a short number (:func:`short_rate`: four significant digits where they fit
strictly inside the bracket, the ceiling rounded down), so the rate reported is the highest
probe that met the SLOs, simulated at exactly the rate printed: ``--rate`` of that number
replays its run (a probe at 53.19502 printed as 53.2 was another run than ``--rate 53.2``).

**The max rate's P10-P90** (``interval``, with a predictor: issue 42's "the max rate under SLOs").
The served-error table (:mod:`graphs.serving.sim.served_errors`) calibrates the mean TPOT of a
run like the one at the rate found ``r*``: measured over simulated lies in
:math:`[k_{lo}, k_{hi}]` with 80 % (:class:`~graphs.serving.sim.intervals.RunBands`, at that
run's regime; widened on an unmeasured device). TPOT is what a decode step takes, so that error
is taken as every iteration's: each end is the same search, started at ``r*``, with every
iteration's kernels :math:`k_{hi}` times (the P10 rate) and :math:`k_{lo}` times (the P90 rate)
their price (:attr:`~graphs.serving.pricing.overheads.EngineOverheads.kernel_scale`, never below
the roofline), so the scheduler's reaction, the queueing and TTFT follow in each run rather than
scaling a metric after the fact: near saturation a few per cent of step time moves the P99s by far
more, and the max rate by about as much as the step time. What it leaves out: the TTFT band's
request-path part (where a TTFT SLO binds at light load the band is narrower than it should be),
and the P99s' own error beyond the means' (the validation tables compare means). Up to
``2 max_probes`` more simulations (:attr:`MaxRate.band_probes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import numpy as np

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.results import Result

from ..engines.knobs import KERNEL_SCALE_RANGE
from ..pricing.overheads import EngineOverheads
from ..pricing.predictor import Predictor
from ..sim.data_parallel import check_group, rank_step
from ..sim.engine import EngineConfig
from ..sim.requests import RATE_RANGE, Request, synthetic
from ..sim.simulator import SimResult, Topology, default_overheads, simulate
from ..step.ledger_fit import keep_ledgers, ledgers_of
from ..step.mixed import mixed_step
from ..step.workload import as_workload
from .executors import map_ordered, received, send_once

__all__ = ["MaxRate", "max_rate", "ceiling_rate", "short_rate", "rate_text"]


@dataclass(frozen=True)
class MaxRate(Result):
    """The highest rate found within the SLOs, the probes that found it, and the result there.

    Attributes
    ----------
    rate : float or None
        Requests/s; None when even the lowest probe misses, or nothing missed.
    rate_per_device : float or None
        ``rate`` over the deployment's devices.
    percentile : float
        The percentile the SLOs bound.
    slo_ttft, slo_tpot : float or None
        The objectives (s).
    probes : tuple of (float, bool, float, float)
        ``(rate, meets, TTFT at the percentile, TPOT at the percentile)`` per simulation.
    at_rate : SimResult or None
        The simulation at ``rate``.
    ceiling_rate : float
        Requests/s the deployment can never exceed (module doc).
    saturated : bool
        Some probe missed the SLOs (else the rate is not determined).
    requests : int
        Requests each probe simulates.
    seed : int
        The seed of the lengths drawn once.
    prompt, output : str
        The length distributions.
    arrival : str
        The arrival process.
    rate_band : tuple of (float or None, float or None) or None
        With ``interval``: the max rate's P10 and P90 ends (module doc; None: not a rate, see
        ``band_notes``).
    band_scales : tuple of (float, float) or None
        ``(k_lo, k_hi)``, the kernel factors of the band searches (module doc): ``k_hi`` gives the
        P10 rate, ``k_lo`` the P90 rate.
    band_probes : tuple of tuple of (float, float, float, float)
        The band searches' simulations: kernel factor, rate, TTFT and TPOT at the percentile.
    band_notes : tuple of (str, str)
        Why an end of ``rate_band`` is None: every rate missed at that end, or every rate up to
        the physical ceiling met (the workload too small to load the deployment there).
    alone : tuple of (float, float) or None
        When no probed rate met the SLOs: the TTFT and TPOT at the percentile (s) of the same
        requests each sent alone, one after another (one client): what no rate can beat, so an
        SLO below it is one no rate meets (None otherwise).
    """

    rate: float | None  #: requests/s; None when even the lowest probe misses, or nothing missed
    rate_per_device: float | None
    percentile: float
    slo_ttft: float | None
    slo_tpot: float | None
    probes: tuple[tuple[float, bool, float, float], ...]  #: (rate, meets, TTFT pct, TPOT pct)
    at_rate: SimResult | None
    ceiling_rate: float  #: requests/s the deployment can never exceed (module doc)
    saturated: bool  #: some probe missed the SLOs (else the rate is not determined)
    requests: int  #: requests each probe simulates
    seed: int
    prompt: str
    output: str
    arrival: str
    #: with ``interval``: the max rate's P10 and P90 ends (requests/s; module doc; an end is None
    #: where it is not a rate, :attr:`band_notes` saying why)
    rate_band: tuple[float | None, float | None] | None = None
    #: the kernel factors of the band searches, ``(k_lo, k_hi)``: the calibrated TPOT band's ends
    #: over the run's own TPOT at the rate found; ``k_hi`` gives the P10 rate, ``k_lo`` the P90 rate
    band_scales: tuple[float, float] | None = None
    #: the band searches' simulations: ``(kernel factor, rate, TTFT and TPOT at the percentile)``
    band_probes: tuple[tuple[float, float, float, float], ...] = ()
    #: why an end of :attr:`rate_band` is None (``""`` where it is a rate)
    band_notes: tuple[str, str] = ("", "")
    #: no probed rate met the SLOs: the TTFT and TPOT at the percentile of each request alone (s)
    alone: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The search as plain values (``simulate --max-rate --json``), every key naming its unit:
        ``max_rate_requests_per_s`` (the highest probe that met the SLOs, simulated at exactly that
        rate; None: none found) and ``..._per_device``, ``ceiling_requests_per_s``, the SLOs
        (``slo_ttft_s``, ``slo_tpot_s``) at ``percentile``, each probe in the order run as an
        object (``rate_requests_per_s`` tried, ``meets_slos``, ``ttft_at_percentile_s``,
        ``tpot_at_percentile_s``), the run at the rate (``at_rate``), the workload, and with an
        interval the band (``rate_band``: each end's rate, kernel factor and why it is None) and
        its probes; ``alone``: each request alone's latencies at the percentile.

        Returns
        -------
        dict
        """

        def meets(t: float, p: float) -> bool:
            return (self.slo_ttft is None or t <= self.slo_ttft) and (
                self.slo_tpot is None or p <= self.slo_tpot
            )

        def at_pct(t: float, p: float) -> dict[str, float]:
            return {"ttft_at_percentile_s": t, "tpot_at_percentile_s": p}

        band = None
        if self.rate_band is not None:
            k_lo, k_hi = self.band_scales if self.band_scales is not None else (None, None)
            band = {
                "p10_requests_per_s": self.rate_band[0],
                "p90_requests_per_s": self.rate_band[1],
                "p10_kernel_factor": k_hi,  # the slow end gives the P10 rate (module doc)
                "p90_kernel_factor": k_lo,
                "p10_note": self.band_notes[0],
                "p90_note": self.band_notes[1],
            }
        return {
            "max_rate_requests_per_s": self.rate,
            "max_rate_requests_per_s_per_device": self.rate_per_device,
            "percentile": self.percentile,
            "slo_ttft_s": self.slo_ttft,
            "slo_tpot_s": self.slo_tpot,
            "probes": [
                {"rate_requests_per_s": r, "meets_slos": ok, **at_pct(t, p)} for r, ok, t, p in self.probes
            ],
            "at_rate": None if self.at_rate is None else self.at_rate.to_dict(),
            "ceiling_requests_per_s": self.ceiling_rate,
            "saturated": self.saturated,
            "requests": self.requests,
            "seed": self.seed,
            "prompt": self.prompt,
            "output": self.output,
            "arrival": self.arrival,
            "rate_band": band,
            "band_probes": [
                {"kernel_factor": k, "rate_requests_per_s": r, "meets_slos": meets(t, p), **at_pct(t, p)}
                for k, r, t, p in self.band_probes
            ],
            "alone": None if self.alone is None else at_pct(*self.alone),
        }


class _Workload(TypedDict):
    """The synthetic workload every probe simulates (MaxRate's last fields)."""

    requests: int
    seed: int
    prompt: str
    output: str
    arrival: str


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
    executor: Any = None,
    at_once: int = 2,
    interval: bool = False,
    **sim: Any,
) -> MaxRate:
    """Bisect the request rate (module doc; with an ``executor``, ``at_once`` probes a round: a
    k-section); ``sim`` goes to :func:`simulate` (topology, engine).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device of every replica.
    slo_ttft, slo_tpot : float or None
        The TTFT and TPOT objectives (s); at least one.
    requests : int
        Requests each probe simulates.
    prompt, output : str
        Length distributions (tokens; :func:`graphs.serving.sim.requests.sample_lengths`).
    arrival : str
        The arrival process (``poisson``, ``constant``, ``gamma:CV``).
    seed : int
        The random seed (lengths drawn once).
    percentile : float
        The percentile the SLOs bound, in ``(0, 100]``.
    start : float
        The first rate probed (requests/s).
    rel_tol : float
        Relative width of the final bracket.
    max_probes : int
        The most simulations run.
    progress : callable, optional
        ``progress(done, total)`` in probes.
    executor : Any, optional
        A Dask ``Client`` or ``concurrent.futures`` executor the probes run on (None: this
        process, one probe at a time: the bisection).
    at_once : int
        With ``executor``: the rates probed a round (module doc), in ``[1, 256]``.
    interval : bool
        Also find the max rate's P10 and P90 ends (module doc; a predictor in ``sim`` prices the
        probes: the bound has none): up to ``2 max_probes`` more simulations.
    **sim
        The rest of :func:`simulate`'s keywords (topology, engine, predictor ...).

    Returns
    -------
    MaxRate
        The rate (requests/s, and per device), the probes and the result at the rate.

    Raises
    ------
    CostModelError
        When neither SLO is given, or ``percentile`` or ``at_once`` is out of range.
    """
    if not (isinstance(at_once, int) and 1 <= at_once <= 256):
        raise CostModelError(
            f"max_rate's at_once (probes a round) must be a whole number in [1, 256], got {at_once!r}"
        )
    if slo_ttft is None and slo_tpot is None:
        raise CostModelError("max_rate needs at least one SLO (slo_ttft or slo_tpot)")
    if not 0 < percentile <= 100:
        raise CostModelError(f"percentile must be in (0, 100], got {percentile}")
    base = synthetic(requests, rate=1.0, prompt=prompt, output=output, arrival=arrival, seed=seed)
    ceiling = ceiling_rate(config, device, base, **sim)
    settings = _Workload(requests=requests, seed=seed, prompt=prompt, output=output, arrival=arrival)
    probes: list[tuple[float, bool, float, float]] = []
    results: dict[float, SimResult] = {}
    slos = (slo_ttft, slo_tpot, percentile)
    width = at_once if executor is not None else 1
    if executor is None:
        where: tuple[Any, Any, Any] = (config, device, base)
        ledgers: dict[tuple[Any, ...], Any] = {}
    else:  # each task carries the config and the device's spec (a worker may know neither name)
        where = (as_workload(config).config, get_device(device), send_once(executor, list(base)))
        ledgers = ledgers_of(where[0])  # the ones ceiling_rate built: a worker keeps them

    pred = sim.get("predictor")
    banded = interval and isinstance(pred, Predictor) and not pred.is_bound
    total = 3 * max_probes if banded else max_probes  # the progress bar's: the band searches' too

    def run(rates: list[float], kw: dict[str, Any]) -> list[tuple[float, float, SimResult]]:
        """Simulate ``rates`` with ``simulate``'s keywords ``kw`` (at once on the executor, the
        lowest started first: the same requests spread over a longer time cost at least as much to
        simulate): each one's TTFT and TPOT at the percentile and its run."""
        calls = [(*where, r, slos, ledgers, kw) for r in rates]
        return map_ordered(executor, _probe, calls, first=sorted(range(len(rates)), key=rates.__getitem__))

    def ok(t: float, p: float) -> bool:
        return (slo_ttft is None or t <= slo_ttft) and (slo_tpot is None or p <= slo_tpot)

    def meets(rates: list[float]) -> list[bool]:
        """Probe ``rates``, each recorded in order."""
        oks = []
        for rate, (t, p, res) in zip(rates, run(rates, sim), strict=True):
            probes.append((rate, ok(t, p), t, p))
            results[rate] = res
            oks.append(ok(t, p))
            if progress:
                progress(len(probes), total)
        return oks

    lo, hi = _bracket(meets, start, ceiling, width, max_probes, rel_tol, lambda: len(probes))
    band: tuple[float | None, float | None] | None = None
    scales = (
        _band_scales(config, results[lo], sim) if interval and lo is not None and hi is not None else None
    )
    # the band searches' probes: (kernel factor, rate, TTFT, TPOT)
    extra: list[tuple[float, float, float, float]] = []
    notes: list[str] = []  # each end's, where it is not a rate (None)
    if scales is not None:
        assert lo is not None
        base_ov = _overheads_of(sim)
        k_lo, k_hi = (_scaled(base_ov, k).kernel_scale / base_ov.kernel_scale for k in scales)
        scales = (k_lo, k_hi)  # the factors as run
        ends: list[float | None] = []
        for k in (scales[1], scales[0]):  # the slow end gives the P10 rate, the fast end the P90
            kw = {**sim, "overheads": _scaled(base_ov, k)}

            def meets_k(rates: list[float], kw: dict[str, Any] = kw, k: float = k) -> list[bool]:
                out = run(rates, kw)
                extra.extend((k, r, t, p) for r, (t, p, _) in zip(rates, out, strict=True))
                if progress:
                    progress(len(probes) + len(extra), total)
                return [ok(t, p) for t, p, _ in out]

            before = len(extra)

            def used(before: int = before) -> int:
                return len(extra) - before

            end_lo, end_hi = _bracket(meets_k, lo, ceiling, width, max_probes, rel_tol, used)
            ends.append(end_lo if end_hi is not None else None)
            if end_lo is None:
                notes.append("missed at every rate")
            elif end_hi is None:
                notes.append(NOT_DETERMINED)
            else:
                notes.append("")
        band = (ends[0], ends[1])
    common = (percentile, slo_ttft, slo_tpot, tuple(probes))
    if lo is None or hi is None:  # nothing met the SLOs, or nothing missed them
        alone = None
        if lo is None:  # what the same requests take one at a time: a floor no rate beats
            one = simulate(config, device, list(base), concurrency=1, **sim)
            alone = (_pct(one.per_request["ttft_s"], percentile), _pct(one.per_request["tpot_s"], percentile))
        return MaxRate(None, None, *common, None, ceiling, hi is not None, **settings, alone=alone)
    devices = results[lo].topology.devices
    return MaxRate(
        lo,
        lo / devices,
        *common,
        results[lo],
        ceiling,
        True,
        **settings,
        rate_band=band,
        band_scales=scales,
        band_probes=tuple(extra),
        band_notes=(notes[0], notes[1]) if notes else ("", ""),
    )


#: the fewest significant digits of a probed rate (:func:`short_rate`)
RATE_DIGITS = 4


def short_rate(
    x: float, above: float | None = None, below: float | None = None, *, down: bool = False
) -> float | None:
    """``x`` to the fewest significant digits, :data:`RATE_DIGITS` at least, that lie strictly
    between ``above`` and ``below`` (None: no bound), at most ``x`` with ``down``: the rate a
    probe simulates, so that a rate printed to its digits is the very rate simulated (a probe at
    53.19502 printed as 53.2 was not the run at 53.2, whose P99 could miss the SLO the probe met).
    None when no such number is near ``x`` (the bounds a float apart).

    Parameters
    ----------
    x : float
        The rate the search chose (requests/s).
    above, below : float or None
        Open bounds the result must lie within.
    down : bool
        Never round above ``x`` (a cap: the physical ceiling).

    Returns
    -------
    float or None
        The rate to probe.
    """
    for digits in range(RATE_DIGITS, 18):
        v = float(f"{x:.{digits}g}")
        if down and v > x:
            step = 10.0 ** (math.floor(math.log10(v)) - digits + 1)
            v = float(f"{v - step:.{digits}g}")
        if v > 0 and (above is None or v > above) and (below is None or v < below) and (not down or v <= x):
            return v
    ok = (above is None or x > above) and (below is None or x < below)
    return x if ok else None


def rate_text(x: float) -> str:
    """A probed rate as text that reads back as the very rate (:func:`short_rate`'s digits: 53.2,
    0.01563, 1,000 without a group separator: ``1000``).

    Parameters
    ----------
    x : float
        A rate (requests/s).

    Returns
    -------
    str
    """
    for digits in range(RATE_DIGITS, 18):
        text = f"{x:.{digits}g}"
        if float(text) == x:
            return text
    return repr(x)


#: an end of the band whose search met the SLOs at every rate up to the physical ceiling
NOT_DETERMINED = "not determined: met at every rate up to the physical ceiling (too few requests to load it)"


def _bracket(
    meets: Callable[[list[float]], list[bool]],
    start: float,
    ceiling: float,
    width: int,
    max_probes: int,
    rel_tol: float,
    used: Callable[[], int],
) -> tuple[float | None, float | None]:
    """The search of the module doc: doublings from ``start`` (at most ``ceiling``) to a miss, or
    halvings to a meet, then k-sections of the bracket to ``rel_tol``, ``width`` rates a round, until
    ``used()`` reaches ``max_probes``. Returns ``(lo, hi)``: the highest rate met and the lowest
    missed above it (None where none was). Every rate probed is a short number
    (:func:`short_rate`: four significant digits where they fit), the ceiling rounded down."""
    lo, hi = None, None
    top = short_rate(ceiling, down=True) or ceiling

    def short(x: float) -> float:
        return short_rate(x) or x

    rate, up = min(short(start), top), True
    while used() < max_probes:  # bracket: doublings up to the first miss, then halvings to a meet
        chain = [rate]
        while len(chain) < min(width, max_probes - used()):
            nxt = min(short(chain[-1] * 2), top) if up else short(chain[-1] / 2)
            if (up and chain[-1] >= top) or (not up and nxt < RATE_RANGE[0]):
                break
            chain.append(nxt)
        for r, ok in zip(chain, meets(chain), strict=True):
            if ok:
                lo = r
                if not up:
                    break
            else:
                hi = r
                if up:
                    break
        if lo is not None and hi is not None:
            break
        if up and lo is not None:  # every one met
            if chain[-1] >= top:
                break
            rate = min(short(chain[-1] * 2), top)
        else:  # the lowest probed missed: down from it (probes above it, taken with it, are moot)
            assert hi is not None
            up, rate = False, short(hi / 2)
            if rate < RATE_RANGE[0]:
                break
    if lo is not None and hi is not None:
        while hi / lo > 1 + rel_tol and used() < max_probes:
            n = min(width, max_probes - used())
            raw = (
                [math.sqrt(lo * hi)] if n == 1 else [lo * (hi / lo) ** (j / (n + 1)) for j in range(1, n + 1)]
            )
            pts: list[float] = []
            for r in raw:  # short, rising, strictly inside the bracket
                p = short_rate(r, pts[-1] if pts else lo, hi)
                if p is not None:
                    pts.append(p)
            if not pts:  # no number between the ends: the bracket is as narrow as it gets
                break
            for r, ok in zip(pts, meets(pts), strict=True):
                if not ok:
                    hi = r
                    break
                lo = r
    return lo, hi


def _band_scales(config: Any, at_rate: SimResult, sim: dict[str, Any]) -> tuple[float, float] | None:
    """The kernel scales of the max rate's P10-P90 (module doc): the ends of the calibrated TPOT
    band of the run at the rate found over its own mean TPOT (a decode step's time is what TPOT
    measures, so its calibrated error is taken as every iteration's). None when no predictor priced
    the probes (the bound has no band) or TPOT is not calibrated."""
    from ..sim.intervals import run_bands  # the served-error table loads on use

    pred = sim.get("predictor")
    if not isinstance(pred, Predictor) or pred.is_bound:
        return None
    bands = run_bands(at_rate, pred, as_workload(config).config.is_moe)
    cal = bands.calibrated if bands is not None else {}
    if bands is None or "TPOT mean s" not in cal or not bands.value("TPOT mean s") > 0:
        return None
    v = bands.value("TPOT mean s")
    lo, hi = cal["TPOT mean s"]
    return lo / v, hi / v


def _overheads_of(sim: dict[str, Any]) -> EngineOverheads:
    """The engine overheads the probes run with: ``sim``'s, else what :func:`simulate` takes for
    none (the predictor framework's defaults)."""
    ov = sim.get("overheads")
    if ov is not None:
        return ov
    return default_overheads(sim.get("predictor") or Predictor(), sim.get("engine") or EngineConfig())


def _scaled(ov: EngineOverheads, k: float) -> EngineOverheads:
    """``ov`` with its kernels ``k`` times slower (``kernel_scale`` times ``k``, held within the
    range :data:`~graphs.serving.engines.knobs.KERNEL_SCALE_RANGE` accepts: the factors
    :attr:`MaxRate.band_scales` reports are the ones run; the simulation still prices no step
    below its roofline)."""
    lo, hi = KERNEL_SCALE_RANGE
    return replace(ov, kernel_scale=min(max(ov.kernel_scale * k, lo), hi))


def _probe(
    config: Any,
    device: Any,
    base: Sequence[Request],
    rate: float,
    slos: tuple[float | None, float | None, float],
    ledgers: dict[tuple[Any, ...], Any],
    sim: dict[str, Any],
) -> tuple[float, float, SimResult]:
    """One probe (here or in a worker): ``base``'s arrival times scaled to ``rate``, simulated;
    its TTFT and TPOT at the percentile and the result. ``ledgers``: the memory ledgers the
    submitting process built, kept here (a worker otherwise walks the model's graph for them)."""
    keep_ledgers(ledgers)
    slo_ttft, slo_tpot, q = slos
    reqs = [replace(r, arrival_s=r.arrival_s / rate) for r in received(base)]
    res = simulate(config, device, reqs, slo_ttft=slo_ttft, slo_tpot=slo_tpot, rate=rate, **sim)
    return _pct(res.per_request["ttft_s"], q), _pct(res.per_request["tpot_s"], q), res


def ceiling_rate(config: Any, device: Any, requests: Sequence[Request], **sim: Any) -> float:
    """Requests/s the topology can never exceed on ``requests``' mean lengths (module doc):
    ``n C / mean(prompt + output - 1)`` for ``n`` replicas of ceiling ``C`` tokens/s, and for a
    disaggregated topology the smaller of the prefill pool's ``n_p C / mean(prompt)`` and the
    decode pool's ``n_d C / mean(output - 1)``.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device of every replica.
    requests : sequence of Request
        The workload (its mean lengths).
    **sim
        :func:`simulate`'s keywords (``topology``, ``engine``, ``tp`` ...).

    Returns
    -------
    float
        Requests per second.
    """
    topo = sim.get("topology") or Topology()
    eng = sim.get("engine") or EngineConfig()
    w, hw = as_workload(config), get_device(device)
    step = mixed_step(w, hw, tp=topo.tp)
    if topo.grouped:  # a replica is a group of dp ranks (or one EP rank) stepping together: its ceiling
        check_group(topo.dp, w.config.is_moe, topo.expert_parallel)  # as the simulation refuses it
        group = rank_step(
            w,
            hw,
            step,
            step,
            dp=topo.dp,
            tp=topo.tp,
            expert_parallel=topo.expert_parallel,
            dispatch=topo.moe_dispatch,
            predictor=Predictor(),
        )
        c = group.group_max_tokens_per_s(eng.max_num_batched_tokens, eng.iteration_overhead_s)
    else:
        c = step.max_tokens_per_s(eng.max_num_batched_tokens, eng.iteration_overhead_s)
    p = float(np.mean([r.prompt for r in requests]))
    d = float(np.mean([r.output - 1 for r in requests]))
    if not topo.disaggregated:
        return topo.replicas * c / (p + d)
    return min(topo.prefill_replicas * c / p, topo.decode_replicas * c / d if d > 0 else math.inf)
