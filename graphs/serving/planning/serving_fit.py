"""Fit the engine overheads (:mod:`graphs.serving.pricing.overheads`) to a user's own serving benchmark.

Each measured run (:mod:`graphs.serving.planning.bench_results`) is replayed through the simulator with
its own requests (arrivals, prompt and output lengths). The terms
``theta = (kernel_scale, iteration_s, per_seq_s, per_token_s, request_s, output_token_s)``
minimise the relative residuals of group means: per run, the mean TTFT of each of
:data:`BINS` groups of requests by prompt length (which separates the per-token terms from the
request path) and the mean TPOT of each of :data:`BINS` groups by output length (weighted least
squares: a TTFT of 50 ms and a TPOT of 10 ms count alike)

.. math::

    \\min_\\theta \\sum_g \\Big(\\frac{\\hat y_g(\\theta) - y_g}{y_g}\\Big)^2

Means, not single requests: a request's TTFT depends on where its arrival falls within the
iteration in flight (up to a whole step), and any change of the terms reshuffles those phases,
so a single request's residual jumps where a group's mean moves smoothly.

The fit runs in two stages, the number of simulations bounded and reported
(:attr:`ServingFit.simulations`; about 2.5 times the Gauss-Newton stage's alone with the defaults).

First Gauss-Newton: the Jacobian ``J`` by forward differences of the simulator (one simulation
per term and run, each term stepped by its own scale), the step ``lstsq(J, -r)`` with the terms
kept in their valid ranges by an active set (a term the step would take below its bound, such as
a negative time, or a kernel scale below 1 on the bound, whose kernels would then run faster than
their roofline, is held at the bound and the others solved again: :func:`_bounded_step`; a term
past the top of its range, :data:`graphs.serving.pricing.overheads.TERM_RANGES`, is held there), and
a step is taken only if it lowers the cost, else a half and a quarter of it are tried; it stops
when no step helps or the step is under a twentieth of a term's scale. It gets into the valley of
the cost, but not to its bottom: the objective is rough (the simulation is of discrete events, and
a change of a thousandth in the kernel scale reshuffles which requests share an iteration, moving
the group means by a per cent or two), so it stops at a rough local minimum, and a forward
difference there measures the roughness as much as the slope. Planted terms (kernel scale 1.25,
0.5 ms per iteration, 8 ms per request) came back as 1.18, 0.76 ms and 8.6 ms, 6.4 of its standard
errors off, from runs with 1 % noise (``python -m benchmarks.serving_fit_planted``).

Then :data:`DESIGN_ROUNDS` design rounds: a Latin hypercube of :data:`DESIGN_POINTS_PER_TERM` points
per term (plus one) in a box of :data:`DESIGN_WIDTH` steps either side of the point found (within
the terms' ranges) is simulated, every group's residual is regressed on the terms over all the
points simulated so far (the surrogate: an affine model whose Jacobian and intercept average the
roughness out; the residuals are near affine in the terms over such a box, each term adding to the
latencies linearly through the queue), and the surrogate's bounded least-squares minimum is
simulated; the next round is centred on it. The fitted terms are those of the lowest cost among
the point Gauss-Newton stopped at and the surrogates' minima (a surrogate of a strongly non-affine
replay, a closed loop of equal requests, can miss), never the luckiest design point (whose low
cost is mostly roughness).

Standard errors are a bootstrap (:data:`BOOTSTRAP` resamples, no simulation each): each resample
draws the design points with replacement (the surrogate's own uncertainty from the roughness) and
the group means with replacement (each with its misfit at the fit: the measured noise and the
roughness the surrogate does not follow) and refits the surrogate's bounded minimum; the standard
error is the resamples' standard deviation. Two terms whose resampled estimates correlate beyond
:data:`TRADE_OFF_CORR` trade off (:attr:`ServingFit.trade_offs`: the kernel scale and the time per
iteration, both adding to every step, correlate at -0.9 to -1.0 on runs of 3-20 req/s), said with
the partner named: their sum's effect is known better than either. A term held at a bound of its
range (:attr:`ServingFit.at_bound`) has none (its interval is one sided; the others' resamples may
move it off the bound); a term the surrogate does not determine (a singular direction) is
reported as not determined instead of a number. ``design_rounds=0`` skips the design: the terms
where Gauss-Newton stopped, with the usual ``sqrt(diag((J^T J)^{-1}) s^2)``, ``s^2 = RSS / (m -
p)``, of its forward differences (local curvature only). ``bins`` sets the groups per run (1: a
run's means only) and ``metrics`` which latencies are fitted (TTFT, TPOT or both).

A summary-only run (:class:`graphs.serving.planning.bench_results.Summary`: a ``vllm bench serve`` result
without ``--save-detailed``, a GuideLLM report without per-request rows) has no requests to group:
its stated aggregates (mean and median TTFT and TPOT, requests per second) are its residuals, the
simulated ones computed the same way from the replay of its stated workload (GuideLLM's TPOT mean
token-weighted, ``sum(e2e - ttft) / sum(o - 1)``; the throughput ``n / (last finish - first send)``).

Terms the runs cannot tell apart are flagged (:attr:`ServingFit.collinear`): two columns of the
Jacobian whose cosine is above :data:`COLLINEAR_COS` move the residuals in proportion, so only a
combination of the two is determined (``iteration_s`` and ``per_seq_s`` when every run sits at a
similar batch size); neither gets a standard error, also where the fit ended with one of them
at its bound (the combination absorbed into the other).

Runs at the rates not fitted are held out: their mean TTFT, TPOT and E2E are predicted with the
fitted terms and compared with what was measured. The fit is written as a versioned JSON file
(:func:`write_fit`) that ``--predict-file`` reads back (:func:`read_fit`: a regular file of
bounded size, unique keys, every key checked).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.measured.corpus import FP8_SCALES
from costmodel.outfiles import atomic_write
from costmodel.safefile import read_user_file, unique_keys

from ..engines.knobs import FIT_DEFAULT_TERMS
from ..engines.moe_kernels import KERNEL_WORD
from ..pricing.overheads import TERM_RANGES, TERMS, EngineOverheads
from ..pricing.predictor import Predictor
from ..sim.engine import EngineConfig
from ..sim.simulator import Topology, simulate
from ..step.mixed import mixed_step
from ..step.workload import Workload
from .bench_results import BenchRun, json_error
from .executors import map_ordered, received, send_once

__all__ = [
    "BOOTSTRAP",
    "COLLINEAR_COS",
    "DESIGN_POINTS_PER_TERM",
    "DESIGN_ROUNDS",
    "DESIGN_WIDTH",
    "MAX_DESIGN_WIDTH",
    "TRADE_OFF_CORR",
    "METRICS",
    "SimulateRun",
    "fp8_matmuls",
    "FIT_FORMAT",
    "FIT_VERSION",
    "check_fit_kernel",
    "DEFAULT_TERMS",
    "DTYPE_PARTS",
    "dtypes_note",
    "served_dtypes",
    "MAX_FIT_REQUESTS",
    "RunError",
    "ServingFit",
    "fit_serving",
    "read_fit",
    "roofline_tpot_s",
    "roofline_ttft_s",
    "simulate_with",
    "write_fit",
]

FIT_FORMAT = "costmodel-serving-fit"
#: 2: kernels priced grey-box (Predictor.of's default), whose kernel_scale a 1 file does not fit;
#: 3: the FP8 activation-scale mode the kernels were priced with (``fp8_scales``; a 2 file: dynamic);
#: 4: the fused-MoE kernel an engine rule priced the experts with (``moe_kernel``; a 2 or 3 file:
#: none, the corpus's fastest, as every fit was priced before engine profiles named one);
#: 5: the formats the runs were replayed in (``dtypes``, :func:`served_dtypes`; a 2 to 4 file: not
#: recorded, null)
FIT_VERSION = 5
#: forward-difference step of each term (its own unit: s, or the dimensionless kernel scale):
#: large enough that the systematic change dominates the reshuffled iteration phases (module doc)
_STEP = {
    "kernel_scale": 5e-2,
    "iteration_s": 5e-4,
    "per_seq_s": 5e-6,
    "per_token_s": 5e-8,
    "request_s": 2e-3,
    "output_token_s": 1e-4,
    "per_prompt_token_s": 2e-6,
    "prefix_lookup_per_token_s": 2e-6,
}
#: fitted unless ``terms`` says otherwise (:data:`graphs.serving.engines.knobs.FIT_DEFAULT_TERMS`,
#: where the reasons are): the others keep their base values unless asked for
DEFAULT_TERMS = FIT_DEFAULT_TERMS
#: two fitted terms whose Jacobian columns have a cosine above this move every residual in
#: proportion: the runs determine a combination of them, not each (module doc). 0.998 is a
#: correlation at which the variance inflation ``1 / (1 - c^2)`` exceeds 250: a standard error
#: sixteen times the one the term would have alone
COLLINEAR_COS = 0.998
#: two fitted terms whose bootstrap estimates correlate beyond this (in absolute value) trade off:
#: a change of one is largely made up by the other, so each alone is known less well than the pair
#: (:attr:`ServingFit.trade_offs`; said with the partner named, short of :data:`COLLINEAR_COS`)
TRADE_OFF_CORR = 0.9
#: design rounds after Gauss-Newton (module doc): the first smooths the point it stopped at, the
#: second, centred on the first's surrogate minimum, refines it
DESIGN_ROUNDS = 2
#: points simulated per design round, per fitted term (plus one): enough that each group's
#: regression on the terms averages the phase roughness of single simulations
DESIGN_POINTS_PER_TERM = 6
#: the design box's half width, in forward-difference steps of each term: wider than the roughness
#: (which decorrelates within a thousandth of a kernel scale), narrow enough that the residuals stay
#: near affine
DESIGN_WIDTH = 2.0
#: the widest box of a later round, in steps: it spans three standard errors of the round before
MAX_DESIGN_WIDTH = 10.0
#: bootstrap resamples of the standard errors (each a least-squares refit of the surrogate: no simulation)
BOOTSTRAP = 400
_DESIGN_SEED = 20261201  #: the design's and the bootstrap's draws: a fit is the same every run
#: the requests of a run a fit replays by default (``calibrate serving --max-requests``): each
#: fit step simulates every run once per term and more, so a run's length sets the fit's time
#: (5,000 requests: about a second per simulation of an 8B model); a longer run is cut to its
#: first requests by arrival (:meth:`graphs.serving.planning.bench_results.BenchRun.first`), said
MAX_FIT_REQUESTS = 5_000
BINS = 8  #: groups per run of the TTFT (by prompt length) and TPOT (by output length) means
_LO = {t: TERM_RANGES[t][0] for t in TERMS}


def _lower_bounds(predict: str | None) -> dict[str, float]:
    """Each term's lower bound: zero for a time; for ``kernel_scale`` 1 when the kernels are
    priced at their roofline bound (a smaller scale would price them below it, and the simulator
    floors every iteration there: :func:`graphs.serving.pricing.overheads.scaled_kernels_s`), else the
    lowest accepted scale (a predictor's kernels may sit above their bound)."""
    return {**_LO, "kernel_scale": 1.0} if predict is None else dict(_LO)


def roofline_tpot_s(config: Any, device: str, *, tp: int = 1) -> float:
    """The shortest time per output token the roofline allows (s): one decode step of a single
    sequence at a one-token context (its weights read once, :class:`graphs.serving.step.mixed.MixedStep`).
    Without speculative decoding every output token after the first takes one step, and a step
    of more sequences or longer contexts takes no less, so a run's mean TPOT below this is not
    of this model on this device.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The device.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    float
        Seconds.
    """
    step = mixed_step(config, device, tp=tp)
    return float(step.time_sums(1, 1.0, [], [1.0] if step.windowed else None))


def roofline_ttft_s(
    config: Any, device: str, prompt: np.ndarray, cached: np.ndarray | None = None, *, tp: int = 1
) -> np.ndarray:
    """The shortest TTFT the roofline allows each request (s): one iteration prefilling its
    prompt's new tokens alone, after its cached ones (one chunk, its weights read once,
    :class:`graphs.serving.step.mixed.MixedStep`). Chunked prefill, a batch of others, queueing and
    the network only add to it, so a TTFT below this is not of this model on this device; at least
    one token is computed (an engine recomputes the last of a wholly cached prompt).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The device.
    prompt : numpy.ndarray
        Each request's prompt tokens.
    cached : numpy.ndarray, optional
        Each request's prompt tokens that may have been cached (None: none).
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    numpy.ndarray
        Seconds, one a request.
    """
    step = mixed_step(config, device, tp=tp)
    prompt = np.asarray(prompt, dtype=np.int64)
    new = prompt if cached is None else np.maximum(prompt - np.asarray(cached, dtype=np.int64), 1)
    pairs, at = np.unique(np.stack([new, prompt - new], axis=1), axis=0, return_inverse=True)
    # each distinct (new, cached) pair once, vectorised over the compiled forms (bit for bit the
    # scalar time_sums(0, 0.0, [(new, cached)]) of each: MixedStep.chunk_times)
    floors = step.chunk_times(pairs[:, 0].astype(float), pairs[:, 1].astype(float))
    return floors[np.asarray(at).reshape(-1)]


def fp8_matmuls(config: Any) -> bool:
    """Whether the model's matmuls take FP8 activations (W8A8: ``matmul_dtype``, else its
    activation or weight dtype, an FP8 one), so that an FP8 activation-scale mode prices them.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.

    Returns
    -------
    bool
    """
    name = config.matmul_dtype or config.act_dtype or config.dtype
    return get_dtype(str(name)).name.startswith("fp8")


def _mean_tpot(run: BenchRun) -> float | None:
    """The run's mean TPOT (s): stated by a summary, else of its multi-token requests."""
    if run.summary is not None:
        return run.summary.tpot_mean_s or run.summary.tpot_median_s
    tpot = run.tpot_s
    ok = np.isfinite(tpot)
    return float(tpot[ok].mean()) if ok.any() else None


def _check_physical(
    runs: Sequence[BenchRun],
    floor_s: float | None,
    where: str,
    ttft_floor: Callable[[BenchRun], np.ndarray] | None = None,
) -> None:
    """Refuse the first run whose mean TPOT, or a request's own TPOT, is below ``floor_s``
    (:func:`roofline_tpot_s`), or whose TTFT is below its prefill's ``ttft_floor(run)`` (each
    request's, :func:`roofline_ttft_s`; a summary's mean TTFT against the mean of its replayed
    requests' floors: the roofline is convex in the tokens, so the mean of a run's floors is at
    least the floor of its mean prompt)."""
    for run in runs:
        tpot = _mean_tpot(run)
        if floor_s is not None and tpot is not None and tpot < floor_s:
            raise CostModelError(
                f"{run.source}: mean TPOT {tpot * 1e3:.4g} ms is faster than the roofline "
                f"allows: one decode step of {where} takes at least {floor_s * 1e3:.4g} ms (its weights "
                "read once, one sequence); these runs are not of this model on this device in these "
                "formats (serving it quantised: give --weight-dtype / --matmul-dtype as served), or used "
                "speculative decoding, which a fit does not model"
            )
        if floor_s is not None and run.summary is None:
            with np.errstate(invalid="ignore"):
                fast = np.flatnonzero(run.tpot_s < floor_s)  # NaN (one output token): not compared
            if fast.size:
                i = int(fast[0])
                raise CostModelError(
                    f"{run.source}: {run.where(i)}: TPOT {float(run.tpot_s[i]) * 1e3:.4g} ms ((e2e - ttft) / "
                    f"{int(run.output[i]) - 1} tokens after the first) is faster than the roofline allows: one "
                    f"decode step of {where} takes at least {floor_s * 1e3:.4g} ms (its weights read once, one "
                    "sequence); not of this model on this device in these formats (quantised: give --weight-dtype "
                    "/ --matmul-dtype as served), or speculative decoding, which a fit does not model"
                )
        if ttft_floor is None:
            continue
        floors = ttft_floor(run)
        cached = "" if run.prefix is None else " (less its shared prefix, where prefix caching is replayed)"
        if run.summary is not None:
            ttft = run.summary.ttft_mean_s
            if ttft is not None and ttft < float(floors.mean()):
                raise CostModelError(
                    f"{run.source}: mean TTFT {ttft * 1e3:.4g} ms is faster than the roofline allows: a "
                    f"prefill of its mean prompt of {int(run.prompt[0]):,} tokens{cached} on {where} takes "
                    f"at least {float(floors.mean()) * 1e3:.4g} ms (one chunk, its weights read once); not "
                    "of this model on this device in these formats (quantised: give --weight-dtype / "
                    "--matmul-dtype as served), or its prompts were cached, which a fit replays only with "
                    "--enable-prefix-caching and the prefix named (--shared-prefix)"
                )
            continue
        fast = np.flatnonzero(run.ttft_s < floors)
        if fast.size:
            i = int(fast[0])
            raise CostModelError(
                f"{run.source}: {run.where(i)}: TTFT {float(run.ttft_s[i]) * 1e3:.4g} ms is faster than the "
                f"roofline allows: a prefill of its {int(run.prompt[i]):,} prompt tokens{cached} on {where} "
                f"takes at least {float(floors[i]) * 1e3:.4g} ms (one chunk, its weights read once); not of "
                "this model on this device in these formats (quantised: give --weight-dtype / --matmul-dtype "
                "as served), or its prompt was cached, which a fit replays only with "
                "--enable-prefix-caching and the prefix named (prefix_id, --shared-prefix)"
            )


@dataclass(frozen=True)
class RunError:
    """One run's predicted against measured mean latencies (relative errors: predicted/measured - 1).

    Attributes
    ----------
    source : str
        The result file (and run) measured.
    rate : float or None
        Its request rate (requests/s; None: a closed loop or all at once).
    fitted : bool
        The run was fitted on (False: held out).
    ttft_err, tpot_err, e2e_err : float
        Mean TTFT, TPOT and E2E, predicted over measured minus 1.
    """

    source: str
    rate: float | None
    fitted: bool
    ttft_err: float
    tpot_err: float
    e2e_err: float


@dataclass(frozen=True)
class ServingFit:
    """The fitted overheads, their standard errors (None: not determined), and every run's errors.

    Attributes
    ----------
    model, device : str
        What the runs served, by name.
    tp : int
        Tensor-parallel degree.
    predict : str or None
        The predictor framework the fit priced kernels with (None: the bound).
    overheads : EngineOverheads
        The fitted terms, the rest as given.
    stderr : dict of str to float or None
        Standard error per fitted term, in its unit (None: not determined).
    runs : list of RunError
        Every run's errors, fitted and held out.
    sources : list of str
        The result files, sorted.
    rms_residual : float
        RMS of the relative residuals at the optimum.
    at_bound : tuple of str
        Fitted terms held at a bound of their range.
    fp8_scales : str
        The FP8 activation scales the kernels were priced with.
    collinear : tuple of (str, str)
        Pairs of fitted terms the runs cannot tell apart.
    moe_kernel : str or None
        The fused-MoE kernel the engine's rules named for the experts, which priced them
        (:meth:`graphs.serving.engines.EngineProfile.moe_kernel`; None: the corpus's fastest).
    dtypes : dict of str to str or None
        The formats the runs were replayed in (:func:`served_dtypes`; None: a file from before
        they were recorded).
    trade_offs : tuple of (str, str, float)
        Pairs of fitted terms whose estimates correlate beyond :data:`TRADE_OFF_CORR`, and the
        correlation (those not already ``collinear``).
    uncertainty : str
        How ``stderr`` was computed.
    simulations : int
        Simulations the fit ran.
    """

    model: str
    device: str
    tp: int
    predict: str | None  #: the predictor framework the fit priced kernels with (None: the bound)
    overheads: EngineOverheads
    stderr: dict[str, float | None]
    runs: list[RunError] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    rms_residual: float = 0.0  #: of the relative per-request residuals at the optimum
    #: fitted terms held at a bound of their range (no standard error, null in the file's stderr)
    at_bound: tuple[str, ...] = ()
    fp8_scales: str = "dynamic"  #: the FP8 activation scales the kernels were priced with
    #: pairs of fitted terms the runs cannot tell apart (:data:`COLLINEAR_COS`; no standard errors)
    collinear: tuple[tuple[str, str], ...] = ()
    #: the fused-MoE kernel an engine rule priced the experts with (None: the corpus's fastest)
    moe_kernel: str | None = None
    #: the formats the runs were replayed in (:func:`served_dtypes`; None: not recorded)
    dtypes: dict[str, str] | None = None
    #: pairs of fitted terms whose estimates correlate beyond :data:`TRADE_OFF_CORR` (not those of
    #: ``collinear``), with the correlation
    trade_offs: tuple[tuple[str, str, float], ...] = ()
    #: how the standard errors were computed (a report's words; not in the fit file)
    uncertainty: str = ""
    #: simulations the fit ran (0: not recorded, a fit read from its file)
    simulations: int = 0

    @property
    def held_out(self) -> list[RunError]:
        return [r for r in self.runs if not r.fitted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FIT_FORMAT,
            "version": FIT_VERSION,
            "model": self.model,
            "device": self.device,
            "tp": self.tp,
            "predict": self.predict,
            "fp8_scales": self.fp8_scales,
            "moe_kernel": self.moe_kernel,
            "dtypes": self.dtypes,
            "overheads": self.overheads.to_dict(),
            "stderr": self.stderr,
            "runs": [{k: _finite(v) for k, v in asdict(r).items()} for r in self.runs],
            "sources": self.sources,
            "rms_residual": self.rms_residual,
        }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _simulate(run: BenchRun, theta: dict[str, float], base: EngineOverheads, sim: Callable[..., Any]) -> Any:
    return sim(run.requests, base.with_terms(**theta), run.concurrency)


def _simulate_one(
    runs: Sequence[BenchRun], i: int, theta: dict[str, float], base: EngineOverheads, sim: Callable[..., Any]
) -> Any:
    """Run ``i`` of ``runs`` simulated at ``theta`` (here or in a worker, which takes ``runs`` once)."""
    return _simulate(received(runs)[i], theta, base, sim)


#: ``simulate_run`` of :func:`fit_serving`: one simulator for every run, or one per run
SimulateRun = Callable[[list[Any], EngineOverheads, int | None], Any]


def _bins(key: np.ndarray, ok: np.ndarray, k: int) -> list[np.ndarray]:
    """``k`` groups of about equal size of the indices where ``ok``, by ascending ``key`` (none
    when no index is)."""
    idx = np.flatnonzero(ok)
    if not idx.size:
        return []
    idx = idx[np.argsort(key[idx], kind="stable")]
    return [b for b in np.array_split(idx, min(k, len(idx))) if len(b)]


def _groups(run: BenchRun, bins: int = BINS) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """TTFT groups by prompt length, TPOT groups by output length (module doc)."""
    k = max(1, min(bins, len(run.prompt) // 10))
    return (
        _bins(run.prompt, np.ones(len(run.prompt), dtype=bool), k),
        _bins(run.output, np.isfinite(run.tpot_s), k),
    )


#: what a fit reads of each run: groups per metric, and the metrics (``ttft``, ``tpot``)
_Read = tuple[int, tuple[str, ...]]
METRICS = ("ttft", "tpot")  #: the metrics a fit can read


def _stats(run: BenchRun, ttft: np.ndarray, tpot: np.ndarray, read: _Read = (BINS, METRICS)) -> np.ndarray:
    """Mean TTFT per prompt-length group and mean TPOT per output-length group (those of
    ``read``'s metrics)."""
    gt, gp = _groups(run, read[0])
    return np.array(
        ([ttft[g].mean() for g in gt] if "ttft" in read[1] else [])
        + ([tpot[g].mean() for g in gp] if "tpot" in read[1] else [])
    )


def _aggregates(pr: dict[str, np.ndarray], token_weighted: bool) -> dict[str, float]:
    """The aggregates a summary states, of simulated requests ``pr`` (module doc)."""
    ttft, tpot, e2e = pr["ttft_s"], pr["tpot_s"], pr["e2e_s"]
    multi = np.isfinite(tpot)
    if token_weighted:  # GuideLLM: sum(e2e - ttft) / sum(o - 1) over multi-token requests
        o = pr["output"][multi]
        tmean = float((e2e - ttft)[multi].sum() / (o - 1).sum()) if multi.any() else math.nan
    else:
        tmean = float(tpot[multi].mean()) if multi.any() else math.nan
    span = float((pr["arrival_s"] + e2e).max() - pr["arrival_s"].min())
    return {
        "ttft_mean": float(ttft.mean()),
        "ttft_median": float(np.median(ttft)),
        "tpot_mean": tmean,
        "tpot_median": float(np.median(tpot[multi])) if multi.any() else math.nan,
        "e2e_mean": float(e2e.mean()),
        "throughput": len(e2e) / span if span > 0 else math.nan,
    }


#: the summary aggregates fitted, by the metric they read (``e2e_mean`` is compared, not fitted)
_SUMMARY_FITTED = {
    "ttft": ("ttft_mean", "ttft_median"),
    "tpot": ("tpot_mean", "tpot_median"),
}


def _summary_keys(run: BenchRun, read: _Read) -> list[str]:
    """The stated aggregates a summary run is fitted on: its TTFT and TPOT means and medians, and
    its throughput unless the run was cut to its first requests (:meth:`BenchRun.first`): the
    stated throughput is the whole run's, and a window of it ends in a drain the run did not have
    (a run at 12 req/s cut to its first 10 replays at 8.7 completed req/s: a -27 % residual the
    terms would absorb)."""
    assert run.summary is not None
    stated = run.summary.stated()
    keys = [k for m in read[1] for k in _SUMMARY_FITTED[m] if k in stated]
    whole = run.in_file <= len(run.prompt)
    return keys + (
        ["throughput"] if whole and "throughput" in stated and len(read[1]) == len(METRICS) else []
    )


def _observed(run: BenchRun, read: _Read = (BINS, METRICS)) -> np.ndarray:
    if run.summary is not None:
        stated = run.summary.stated()
        return np.array([stated[k] for k in _summary_keys(run, read)])
    return _stats(run, run.ttft_s, run.tpot_s, read)


def _predicted(run: BenchRun, res: Any, read: _Read = (BINS, METRICS)) -> np.ndarray:
    if run.summary is not None:
        agg = _aggregates(res.per_request, run.summary.token_weighted)
        return np.array([agg[k] for k in _summary_keys(run, read)])
    return _stats(run, res.per_request["ttft_s"], res.per_request["tpot_s"], read)


def _errors(run: BenchRun, res: Any, fitted: bool) -> RunError:
    def rel(p: np.ndarray, m: np.ndarray) -> float:
        ok = np.isfinite(m) & np.isfinite(p)
        return float(np.mean(p[ok]) / np.mean(m[ok]) - 1) if ok.any() else math.nan

    pr = res.per_request
    if run.summary is not None:  # the stated means (a median where no mean is stated)
        agg, stated = _aggregates(pr, run.summary.token_weighted), run.summary.stated()

        def err(metric: str) -> float:
            k = next((k for k in (f"{metric}_mean", f"{metric}_median") if k in stated), None)
            return math.nan if k is None else agg[k] / stated[k] - 1

        return RunError(run.source, run.rate, fitted, err("ttft"), err("tpot"), err("e2e"))
    return RunError(
        run.source,
        run.rate,
        fitted,
        rel(pr["ttft_s"], run.ttft_s),
        rel(pr["tpot_s"], run.tpot_s),
        rel(pr["e2e_s"], run.e2e_s),
    )


def fit_serving(
    runs: Sequence[BenchRun],
    simulate_run: SimulateRun | Sequence[SimulateRun],
    *,
    base: EngineOverheads,
    held_out: Sequence[int] = (),
    terms: Sequence[str] = DEFAULT_TERMS,
    iterations: int = 8,
    model: str = "",
    device: str = "",
    tp: int = 1,
    predict: str | None = None,
    progress: Callable[[str], None] | None = None,
    fp8_scales: str = "dynamic",
    bins: int = BINS,
    metrics: Sequence[str] = METRICS,
    min_tpot_s: float | None = None,
    min_ttft_s: Callable[[BenchRun], np.ndarray] | None = None,
    ticks: Callable[[int, int], None] | None = None,
    executor: Any = None,
    moe_kernel: str | None = None,
    dtypes: dict[str, str] | None = None,
    design_rounds: int = DESIGN_ROUNDS,
    design_points: int | None = None,
    bootstrap: int = BOOTSTRAP,
) -> ServingFit:
    """Fit ``terms`` of ``base`` to ``runs`` but those indexed in ``held_out`` (module doc).

    ``simulate_run(requests, overheads, concurrency)`` simulates one run's requests (a closed
    loop of ``concurrency`` clients unless None) and returns its
    :class:`graphs.serving.sim.simulator.SimResult` (the caller fixes model, device, engine and
    predictor), or a sequence of them, one per run (runs of different models, devices or
    engines fitted together); ``model``, ``device``, ``tp``, ``predict`` and ``fp8_scales`` are
    recorded in the fit, the last two as the predictor ``simulate_run`` priced the kernels with.
    ``bins``: groups per run (1: a run's mean TTFT and mean TPOT only, for a source that
    publishes only those); ``metrics``: the latencies fitted (both by default; ``("tpot",)``
    fits the CPU terms to the decode cadence alone, where a TTFT miss has another cause);
    ``min_tpot_s``: the roofline's shortest TPOT (:func:`roofline_tpot_s`): a run faster than it
    is refused, naming the run and the bound. ``ticks(done, most)`` is called after each run's
    simulation, ``most`` the simulations the fit takes at most (a progress bar). ``kernel_scale`` never goes below 1 when the kernels
    are priced at their bound (``predict`` None), and a term that ends at a bound of its range is
    reported held there (:attr:`ServingFit.at_bound`), with no standard error. With an
    ``executor`` the simulations of one evaluation (every run at one parameter vector; every
    Jacobian column's; every run at the fit) run there at once, each a task carrying its run,
    the terms and ``simulate_run`` (picklable where the executor pickles: :func:`simulate_with`'s
    is): the fit is the one this process computes, the same simulations taken in the same order.

    Parameters
    ----------
    runs : sequence of BenchRun
        Measured runs.
    simulate_run : SimulateRun or sequence of SimulateRun
        ``simulate_run(requests, overheads, concurrency) -> SimResult``, one for all runs or one
        per run.
    base : EngineOverheads
        The engine's overheads the fit starts from (terms not fitted keep their values).
    held_out : sequence of int
        Indices of runs kept out of the fit (scored after it).
    terms : sequence of str
        The overhead terms fitted (:data:`~graphs.serving.engines.knobs.TERMS`).
    iterations : int
        Gauss-Newton iterations at most.
    model, device : str
        Recorded in the fit.
    tp : int
        Recorded in the fit.
    predict : str, optional
        The predictor the kernels were priced with (None: the bound), recorded.
    progress : callable, optional
        ``progress(line)``, one line per iteration.
    fp8_scales : str
        The FP8 activation-scale mode the kernels were priced with, recorded.
    moe_kernel : str, optional
        The fused-MoE kernel an engine rule priced the experts with, recorded (None: the corpus's
        fastest).
    dtypes : dict of str to str, optional
        The formats the runs were replayed in (:func:`served_dtypes`), recorded (None: not known).
    bins : int
        Groups per run (by prompt length for TTFT, output length for TPOT).
    metrics : sequence of str
        The latencies fitted: ``"ttft"``, ``"tpot"`` or both.
    min_tpot_s : float, optional
        The roofline's shortest TPOT (s); a run whose mean, or a request whose own, is faster is
        refused.
    min_ttft_s : callable, optional
        ``min_ttft_s(run)``: each of a run's requests' shortest TTFT (s) the roofline allows
        (:func:`roofline_tpot_s`'s prefill analogue, :func:`roofline_ttft_s`); a request faster
        than its own (a summary: a mean TTFT below their mean) is refused.
    ticks : callable, optional
        ``ticks(done, most)`` after each simulation.
    executor : Any, optional
        A Dask ``Client`` or ``concurrent.futures`` executor the simulations run on
        (:mod:`graphs.serving.planning.executors`; None: this process).
    design_rounds : int
        Rounds of the design after Gauss-Newton (:data:`DESIGN_ROUNDS`; 0: none, the terms where
        Gauss-Newton stopped and their standard errors of its local curvature, as before).
    design_points : int, optional
        Points simulated per design round (None: :data:`DESIGN_POINTS_PER_TERM` per term plus one).
    bootstrap : int
        Resamples of the bootstrap of the standard errors (no simulation each).

    Returns
    -------
    ServingFit
        The fitted terms (s; ``kernel_scale`` dimensionless), their standard errors, residuals on
        fitted and held-out runs.

    Raises
    ------
    CostModelError
        When an option is out of range, every run is held out, a run beats the roofline, or a
        measured latency is not finite and positive.
    """
    unknown = [t for t in terms if t not in TERMS]
    if unknown or not terms:
        raise CostModelError(f"terms to fit must be some of {', '.join(TERMS)}, got {list(terms)!r}")
    if len(set(terms)) < len(terms):  # two columns of one term: one copy ends at its bound, falsely said
        twice = next(t for t in terms if list(terms).count(t) > 1)
        raise CostModelError(
            f"terms to fit name {twice!r} {list(terms).count(twice)} times; give each term once"
        )
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise CostModelError(f"bins must be a positive whole number, got {bins!r}")
    bad = [m for m in metrics if m not in METRICS]
    if bad or not metrics or isinstance(metrics, str):
        raise CostModelError(f"metrics to fit must be some of {', '.join(METRICS)}, got {metrics!r}")
    read: _Read = (bins, tuple(metrics))
    if callable(simulate_run):
        sims: list[SimulateRun] = [simulate_run] * len(runs)
    else:
        sims = list(simulate_run)
        if len(sims) != len(runs):
            raise CostModelError(f"{len(sims)} simulators for {len(runs)} runs: give one, or one per run")
    if min_tpot_s is not None or min_ttft_s is not None:
        _check_physical(
            runs, min_tpot_s, f"{model or 'the model'} on {device or 'the device'} (tp {tp})", min_ttft_s
        )
    fit_idx = [i for i in range(len(runs)) if i not in set(held_out)]
    if not fit_idx:
        raise CostModelError("every run is held out: nothing left to fit")
    theta = {t: float(getattr(base, t)) for t in terms}
    say = progress or (lambda _msg: None)
    fitted = [runs[i] for i in fit_idx]
    obs = [_observed(r, read) for r in fitted]
    y = np.concatenate(obs)
    if y.size <= len(terms):
        one_token = sum(1 for r in fitted if np.all(np.asarray(r.output) <= 1))
        why = f"; {one_token} of them of one-token outputs, which have no TPOT" if one_token else ""
        dropped = sum(r.empty for r in fitted)
        left = (
            f" ({dropped:,} request(s) of 0 prompt or 0 output tokens were left out of the runs, "
            f"{sum(len(r.prompt) for r in fitted):,} kept)"
            if dropped
            else ""
        )
        raise CostModelError(
            f"{y.size} measured group mean(s) from {len(fitted)} fitted run(s){why}, for {len(terms)} "
            f"term(s): nothing to fit{left}; give more runs (another load, or a file of several runs) or fewer terms "
            "(--terms)"
        )
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise CostModelError("measured TTFTs and TPOTs must be finite and > 0 to fit relative residuals")

    p = len(terms)
    # each step: a Jacobian (p simulations) and up to three trials, then the runs once more
    if isinstance(design_rounds, bool) or not isinstance(design_rounds, int) or not 0 <= design_rounds <= 8:
        raise CostModelError(f"design_rounds must be a whole number in [0, 8], got {design_rounds!r}")
    k = DESIGN_POINTS_PER_TERM * p + 1 if design_points is None else design_points
    if isinstance(k, bool) or not isinstance(k, int) or not p + 2 <= k <= 1000:
        raise CostModelError(
            f"design_points must be a whole number in [{p + 2}, 1000] (the terms fitted plus two), got {k!r}"
        )
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or not 20 <= bootstrap <= 100_000:
        raise CostModelError(f"bootstrap must be a whole number in [20, 100000], got {bootstrap!r}")
    rounds = design_rounds
    # the fit's simulations at most: the start; each Gauss-Newton step's Jacobian (p) and up to three
    # trials; each design round's points and its surrogate's minimum (or, with no design, the last
    # point's Jacobian); then every run once more
    most = len(fit_idx) * (1 + iterations * (p + 3) + (rounds * (k + 1) if rounds else p)) + len(runs)
    done = [0]

    sent = send_once(executor, list(runs)) if executor is not None else runs

    def sim_all(calls: list[tuple[int, dict[str, float]]]) -> list[Any]:
        """Run ``i`` simulated at terms ``th`` for each call (at once on the executor), in order."""
        out = map_ordered(executor, _simulate_one, [(sent, i, th, base, sims[i]) for i, th in calls])
        for _ in out:
            done[0] += 1
            if ticks is not None:
                ticks(done[0], most)
        return out

    def residuals_at(ths: list[dict[str, float]]) -> list[np.ndarray]:
        """The relative residuals of the fitted runs at each of ``ths``."""
        res = sim_all([(i, th) for th in ths for i in fit_idx])
        n = len(fit_idx)
        out = []
        for j in range(len(ths)):
            pred = [
                _predicted(runs[i], r, read) for i, r in zip(fit_idx, res[j * n : (j + 1) * n], strict=True)
            ]
            out.append((np.concatenate(pred) - y) / y)
        return out

    def residuals(th: dict[str, float]) -> np.ndarray:
        return residuals_at([th])[0]

    h = np.array([_STEP[t] for t in terms])
    lows = _lower_bounds(predict)
    lo = np.array([lows[t] for t in terms])
    hi = np.array([TERM_RANGES[t][1] for t in terms])  # what an EngineOverheads accepts
    x = np.clip(np.array([theta[t] for t in terms]), lo, hi)

    def at(v: np.ndarray) -> dict[str, float]:
        return {t: float(c) for t, c in zip(terms, v, strict=True)}

    def jacobian(v: np.ndarray, r0: np.ndarray) -> np.ndarray:
        """Forward differences, in units of each term's step: columns of like size (backward for a
        term within a step of the top of its range)."""
        ups = [bool(v[k] + h[k] <= hi[k]) for k in range(p)]
        ths = [at(v + h * (np.arange(p) == k) if ups[k] else v - h * (np.arange(p) == k)) for k in range(p)]
        rs = residuals_at(ths)
        cols = [rs[k] - r0 if ups[k] else r0 - rs[k] for k in range(p)]
        return np.stack(cols, axis=1)

    r = residuals(at(x))
    with np.errstate(over="ignore"):
        cost = float(r @ r)
    if not math.isfinite(cost):  # a measured mean far below what any step takes
        raise CostModelError(
            "the relative residuals overflow: measured TTFTs or TPOTs far below what the simulator "
            "predicts for any terms (check the result files' units: seconds)"
        )
    J: np.ndarray | None = None
    for it in range(iterations):
        J = jacobian(x, r)
        say(f"fit step {it + 1}: rms relative residual {math.sqrt(cost / len(r)):.4g}")
        x_new = np.minimum(hi, _bounded_step(J, r, x, lo, h))
        if np.max(np.abs(x_new - x) / h) < 0.05:  # moves less than a twentieth of a step: done
            break
        for frac in (1.0, 0.5, 0.25):  # backtracking: a step is taken only if it lowers the cost
            xt = np.clip(x + frac * (x_new - x), lo, hi)  # rounding never takes a term past its bound
            rt = residuals(at(xt))
            if float(rt @ rt) < cost:
                x, r, cost, J = xt, rt, float(rt @ rt), None
                break
        else:  # no shorter step helps either: the start of this step is the optimum found
            break
    # the design rounds: a Latin hypercube of ``k`` points in a box of DESIGN_WIDTH steps about
    # the point found, every group's residual regressed on the terms over all of them (the
    # smoothed Jacobian and intercept: the phase roughness averaged out), the surrogate's bounded
    # minimum simulated, and the next round centred there (module doc)
    rng = np.random.default_rng(_DESIGN_SEED)
    X: list[np.ndarray] = []
    R: list[np.ndarray] = []
    xc, w = x, DESIGN_WIDTH * h
    for rnd in range(rounds):
        pts = _latin(rng, k, np.maximum(lo, xc - w), np.minimum(hi, xc + w))
        X += list(pts)
        R += residuals_at([at(v) for v in pts])
        a, Js = _surrogate(np.array(X), np.array(R), xc, h)
        xs = np.minimum(hi, _bounded_step(Js, a, xc, lo, h))
        rs = residuals(at(xs))
        # the next box spans the uncertainty found, at least DESIGN_WIDTH steps and at most
        # MAX_DESIGN_WIDTH: a surrogate on a box narrower than the valley's rough floor sees one dip
        sd = _bootstrap(np.array(X), np.array(R), xs, h, lo, hi, rs, rng, 50).std(axis=0)
        w = np.clip(3 * sd, DESIGN_WIDTH * h, MAX_DESIGN_WIDTH * h)
        say(
            f"design round {rnd + 1}: {len(X)} points simulated, surrogate minimum's rms relative residual "
            f"{math.sqrt(float(rs @ rs) / len(rs)):.4g}"
        )
        xc = xs
        if float(rs @ rs) < float(
            r @ r
        ):  # a surrogate far from affine (a closed loop) can miss: kept the better
            x, r = xs, rs
    x = np.where(
        x - lo < 1e-9 * h, lo, np.where(hi - x < 1e-9 * h, hi, x)
    )  # within rounding of a bound: at it
    theta = at(x)
    m = len(y)
    stderr: dict[str, float | None] = {t: None for t in terms}
    bound = [k_ for k_ in range(p) if x[k_] <= lo[k_] or x[k_] >= hi[k_]]
    free = [k_ for k_ in range(p) if k_ not in bound]
    trade: tuple[tuple[str, str, float], ...] = ()
    if rounds:
        Xa, Ra = np.array(X), np.array(R)
        _, J = _surrogate(Xa, Ra, x, h)
        boot = _bootstrap(Xa, Ra, x, h, lo, hi, r, rng, bootstrap)
        sd = boot.std(axis=0, ddof=1)
        determined = _determined(J, free)
        for k_ in free:
            if k_ in determined:
                stderr[terms[k_]] = float(sd[k_])
        trade = _trade_offs(boot, determined, terms)
        how = (
            f"bootstrap over the {m} group means and the {len(X)} design points ({bootstrap} resamples, "
            "no further simulation)"
        )
    else:  # no design: the local curvature of the last Gauss-Newton point (forward differences)
        J = jacobian(x, r)
        if free:
            Jf = (J / h)[:, free]  # the terms' own units
            s2 = float(r @ r) / max(m - len(free), 1)
            jtj = Jf.T @ Jf
            cond = np.linalg.cond(jtj)
            cov = np.linalg.pinv(jtj) * s2
            for j, k_ in enumerate(free):
                det = math.isfinite(cond) and cond < 1e14 and jtj[j, j] > 0
                stderr[terms[k_]] = float(math.sqrt(max(cov[j, j], 0.0))) if det else None
        how = "local curvature of the last Gauss-Newton step (forward differences)"
    # among every fitted term, those held at a bound too: one the other's column pushed to its
    # bound (every run at one batch size) is as undetermined as the pair
    collinear = _collinear(J / h, range(p), terms)
    for pair in collinear:  # only a combination of the two is determined: neither has its own error
        for t in pair:
            stderr[t] = None
    names = ", ".join(sorted({r.source for r in fitted}))
    fitted_ov = base.with_terms(**theta, basis=f"fitted to {len(fitted)} run(s) of {names}"[:300])
    final = sim_all([(i, theta) for i in range(len(runs))])
    errs = [_errors(run, res, i in fit_idx) for i, (run, res) in enumerate(zip(runs, final, strict=True))]
    if ticks is not None:
        ticks(done[0], done[0])
    return ServingFit(
        model=model,
        device=device,
        tp=tp,
        predict=predict,
        fp8_scales=fp8_scales,
        overheads=fitted_ov,
        stderr=stderr,
        runs=errs,
        sources=sorted({r.source for r in runs}),
        rms_residual=math.sqrt(float(r @ r) / len(r)),
        at_bound=tuple(terms[k_] for k_ in bound),
        collinear=collinear,
        moe_kernel=moe_kernel,
        dtypes=dict(dtypes) if dtypes is not None else None,
        trade_offs=tuple(pair for pair in trade if not any(set(pair[:2]) == set(c) for c in collinear)),
        uncertainty=how,
        simulations=done[0],
    )


def _latin(rng: np.random.Generator, k: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``k`` points of a Latin hypercube in the box ``[lo, hi]``: each term's range cut in ``k``
    strata, one point in each, the strata of the terms paired at random."""
    p = len(lo)
    u = (np.stack([rng.permutation(k) for _ in range(p)], axis=1) + rng.random((k, p))) / k
    return lo + u * (hi - lo)


def _surrogate(X: np.ndarray, R: np.ndarray, xc: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every group's residual regressed on the terms over the points ``X`` (rows) with residuals
    ``R`` (one row a point): the intercept at ``xc`` and the Jacobian in units of the steps ``h``
    (a column of zeros for a term the points do not vary)."""
    D = (X - xc) / h
    A = np.column_stack([np.ones(len(X)), D])
    coef = np.linalg.lstsq(A, R, rcond=None)[0]
    return coef[0], coef[1:].T


def _bootstrap(
    X: np.ndarray,
    R: np.ndarray,
    x: np.ndarray,
    h: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    r: np.ndarray,
    rng: np.random.Generator,
    n: int,
) -> np.ndarray:
    """``n`` refits of the surrogate's minimum (rows), each on the design points and the group
    means resampled with replacement: the points carry the roughness of the simulations (the
    surrogate's own uncertainty), the groups the misfit left at ``x`` (``r``: the measured noise
    and the roughness the surrogate does not follow), each group's residual moved by the
    surrogate's Jacobian; no simulation."""
    k, m = R.shape
    a0, _ = _surrogate(X, R, x, h)
    lack = r - a0  # the simulated residual at x less the surrogate's: roughness at the fit
    out = np.empty((n, len(x)))
    for b in range(n):
        pts = rng.integers(0, k, k)
        a, J = _surrogate(X[pts], R[pts], x, h)
        g = rng.integers(0, m, m)
        out[b] = np.minimum(hi, _bounded_step(J[g], (a + lack)[g], x, lo, h))
    return out


def _determined(J: np.ndarray, free: Sequence[int]) -> set[int]:
    """The terms indexed in ``free`` the surrogate's Jacobian determines: the free columns'
    normal matrix well conditioned and the term's column not zero."""
    if not free:
        return set()
    jtj = J[:, list(free)].T @ J[:, list(free)]
    cond = np.linalg.cond(jtj)
    if not (math.isfinite(cond) and cond < 1e14):
        return set()
    return {k for j, k in enumerate(free) if jtj[j, j] > 0}


def _trade_offs(boot: np.ndarray, idx: set[int], terms: Sequence[str]) -> tuple[tuple[str, str, float], ...]:
    """Pairs of the terms indexed in ``idx`` whose bootstrap estimates correlate beyond
    :data:`TRADE_OFF_CORR` (in absolute value), with the correlation."""
    out = []
    ks = sorted(idx)
    sd = boot.std(axis=0)
    for a, i in enumerate(ks):
        for j in ks[a + 1 :]:
            if sd[i] > 0 and sd[j] > 0:
                c = float(np.corrcoef(boot[:, i], boot[:, j])[0, 1])
                if abs(c) > TRADE_OFF_CORR:
                    out.append((terms[i], terms[j], c))
    return tuple(out)


def _collinear(J: np.ndarray, free: Sequence[int], terms: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """Pairs of the terms indexed in ``free`` whose Jacobian columns have a cosine above
    :data:`COLLINEAR_COS` (module doc)."""
    out = []
    norms = np.linalg.norm(J, axis=0)
    for a, i in enumerate(free):
        for j in free[a + 1 :]:
            if (
                norms[i] > 0
                and norms[j] > 0
                and abs(J[:, i] @ J[:, j]) / (norms[i] * norms[j]) > COLLINEAR_COS
            ):
                out.append((terms[i], terms[j]))
    return tuple(out)


def _bounded_step(J: np.ndarray, r: np.ndarray, x: np.ndarray, lo: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The Gauss-Newton step from ``x`` (``J`` in units of the steps ``h``) with each term kept at
    or above ``lo``: a term the unconstrained step would take below its bound is fixed at the
    bound and the others are solved again with its move accounted for (an active set), until
    none crosses."""
    p = len(x)
    fixed = np.zeros(p, dtype=bool)
    for _ in range(p + 1):
        u = np.where(fixed, (lo - x) / h, 0.0)  # the fixed terms' moves to their bounds, in steps
        if (~fixed).any():
            u[~fixed] = np.linalg.lstsq(J[:, ~fixed], -(r + J @ u), rcond=None)[0]
        x_new = np.where(fixed, lo, x + h * u)  # a fixed term exactly at its bound, not a rounding off it
        below = ~fixed & (x_new < lo)
        if not below.any():
            break
        fixed |= below
    return np.maximum(lo, x_new)


def simulate_with(
    config: Any,
    device: str,
    *,
    tp: int = 1,
    predict: str | None = None,
    engine: EngineConfig | None = None,
    fp8_scales: str = "dynamic",
    profile: Any = None,
) -> SimulateRun:
    """The ``simulate_run`` of :func:`fit_serving` for one model, device, tp and predictor (its
    FP8 GEMMs with ``fp8_scales`` activation scales, its fused MoE with the kernels ``profile``
    runs).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The device.
    tp : int
        Tensor-parallel degree.
    predict : str, optional
        The kernel predictor's name (None: the bound).
    engine : EngineConfig, optional
        The engine's knobs (default vLLM V1's).
    fp8_scales : str
        ``"dynamic"`` or ``"static"`` FP8 activation scales.
    profile : EngineProfile, optional
        The engine profile whose fused-MoE kernels price the experts
        (:meth:`~graphs.serving.pricing.predictor.Predictor.for_engine`); None: the framework's
        default profile's.

    Returns
    -------
    SimulateRun
        ``simulate_run(requests, overheads, concurrency) -> SimResult``, picklable (the config,
        the device's spec and the predictor in it: a worker process runs it).
    """
    pred = Predictor.of(predict, fp8_scales=fp8_scales)
    pred = pred.for_engine(profile) if profile is not None else pred
    return _SimulateWith(config, get_device(device), tp, pred, engine)


@dataclass(frozen=True)
class _SimulateWith:
    """:func:`simulate_with`'s simulator: plain values (the config, the device's spec, the
    predictor), so that it pickles to a worker process that knows neither name."""

    config: Any
    device: Hardware
    tp: int
    predictor: Predictor
    engine: EngineConfig | None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        config = self.config.config if isinstance(self.config, Workload) else self.config
        return (_SimulateWith, (config, self.device, self.tp, self.predictor, self.engine))

    def __call__(self, requests: list[Any], ov: EngineOverheads, concurrency: int | None = None) -> Any:
        return simulate(
            self.config,
            self.device,
            requests,
            topology=Topology(tp=self.tp),
            engine=self.engine,
            predictor=self.predictor,
            overheads=ov,
            concurrency=concurrency,
        )


def write_fit(fit: ServingFit, path: str, flag: str = "-o") -> None:
    """The fit as versioned JSON, written atomically.

    Parameters
    ----------
    fit : ServingFit
        The fit.
    path : str
        The output file (replaced atomically, never written through a link).
    flag : str
        The option that named ``path``, printed in an error.

    Raises
    ------
    CostModelError
        When the file cannot be written.
    """
    with atomic_write(path, flag) as f:
        json.dump(fit.to_dict(), f, indent=2, allow_nan=False, default=_no_nan)
        f.write("\n")


def _no_nan(x: Any) -> Any:
    raise TypeError(f"not JSON: {type(x).__name__}")


_KEYS = {
    "format",
    "version",
    "model",
    "device",
    "tp",
    "predict",
    "fp8_scales",
    "moe_kernel",
    "dtypes",
    "overheads",
    "stderr",
    "runs",
    "sources",
    "rms_residual",
}
MAX_FIT_BYTES = 4 * 2**20
#: the parts of a model whose format a fit records (:func:`served_dtypes`)
DTYPE_PARTS = ("weights", "experts", "matmul", "kv")


def served_dtypes(config: Any) -> dict[str, str]:
    """The formats ``config`` is served in, as a fit records them: ``weights`` (the linear
    layers' storage), ``experts`` (the routed experts' weights; MoE models only), ``matmul``
    (the GEMMs' operands: ``matmul_dtype``, else the activations') and ``kv`` (the cache).
    A fit's ``kernel_scale`` is a ratio to kernels priced in these formats, so the same file
    applied to another format carries it to other kernels (:func:`dtypes_note`).

    Parameters
    ----------
    config : ModelConfig
        The model as the runs served it (after ``--weight-dtype`` and its kin).

    Returns
    -------
    dict of str to str
    """
    from costmodel.dtypes import get_dtype

    out = {"weights": config.weight_dtype}
    if config.is_moe:
        out["experts"] = config.expert_weight_dtype
    out["matmul"] = config.matmul_dtype or config.activation_dtype
    out["kv"] = config.cache_dtype
    return {k: get_dtype(v).name for k, v in out.items()}  # canonical names (fp8 -> fp8_e4m3)


def dtypes_note(fit: ServingFit, dtypes: dict[str, str] | None) -> str | None:
    """A note when ``fit`` was made on runs replayed in other formats than ``dtypes`` (where it is
    applied), naming each part that differs; None when they agree or either is not known.

    Parameters
    ----------
    fit : ServingFit
        The fit read from its file.
    dtypes : dict of str to str or None
        :func:`served_dtypes` of the model it is applied to.

    Returns
    -------
    str or None
    """
    if fit.dtypes is None or dtypes is None:
        return None
    differ = [
        f"{k} {fit.dtypes[k]} there, {dtypes[k]} here"
        for k in DTYPE_PARTS
        if k in fit.dtypes and k in dtypes and fit.dtypes[k] != dtypes[k]
    ]
    if not differ:
        return None
    return (
        "the fit's runs were replayed in other formats (" + "; ".join(differ) + "): its kernel_scale is a "
        "ratio to kernels of those formats (refit with the formats served, --weight-dtype/--matmul-dtype/"
        "--kv-dtype on calibrate serving)"
    )


def _read_dtypes(value: Any, where: str) -> dict[str, str] | None:
    """A fit file's ``dtypes`` (null, or parts of :data:`DTYPE_PARTS` to dtype names), checked."""
    if value is None:
        return None
    from costmodel.dtypes import get_dtype

    if not isinstance(value, dict) or not value:
        raise CostModelError(
            f"{where}: dtypes must be an object of {', '.join(DTYPE_PARTS)} to dtype names, or null"
        )
    out = {}
    for k, v in value.items():
        if k not in DTYPE_PARTS:
            raise CostModelError(
                f"{where}: dtypes key {str(k)[:40]!r} unknown; allowed: {', '.join(DTYPE_PARTS)}"
            )
        if not isinstance(v, str):
            raise CostModelError(f"{where}: dtypes {k} must be a dtype name, got {str(v)[:40]!r}")
        try:
            out[k] = get_dtype(v).name
        except CostModelError:
            raise CostModelError(f"{where}: dtypes {k} {v[:40]!r} is not a dtype") from None
    return out


def check_fit_kernel(
    fit: ServingFit,
    profile: Any,
    config: Any,
    device: str,
    *,
    tp: int = 1,
    dp: int = 1,
    expert_parallel: bool = False,
    where: str = "--predict-file",
) -> None:
    """Refuse a fit whose experts were priced with another fused-MoE kernel than the one
    ``profile`` runs for the fit's own model and device (:func:`graphs.serving.sim.engine.moe_kernel_padding`):
    its kernel scale absorbed that kernel's time on its own runs, so under an engine that runs
    another it would count the gap twice or not at all. A fit applied to another model or device
    (said apart, where it is applied) is judged on its own model and device, which is where its
    scale was learnt; a fit of a model this process cannot resolve is judged on ``config`` when it
    names it, else not at all. A bound fit prices no kernel and is never refused.

    Parameters
    ----------
    fit : ServingFit
        The fit (its ``moe_kernel``).
    profile : EngineProfile
        The engine the prediction runs.
    config : ModelConfig
        The run's model (judged on when the fit's own model cannot be resolved but is this one).
    device : str
        The run's device (judged on with ``config`` when the fit's own cannot be resolved).
    tp, dp : int
        Tensor-parallel degree, and data-parallel ranks sharing the experts (which kernel runs
        does not depend on them).
    expert_parallel : bool
        Whole experts per device.
    where : str
        What to name the fit by in the error.

    Raises
    ------
    CostModelError
        When the two kernels differ.
    """
    from ..sim.engine import moe_kernel_padding

    if fit.predict is None:
        return
    model: Any = fit.model
    try:
        rule, _ = moe_kernel_padding(profile, model, fit.device, tp=fit.tp)
    except CostModelError:  # a model or device of a file this process cannot resolve
        if fit.model != getattr(config, "name", None):
            return
        rule, _ = moe_kernel_padding(profile, config, device, tp=tp, dp=dp, expert_parallel=expert_parallel)
    runs = rule.kernel if rule is not None else None
    if fit.moe_kernel != runs:

        def said(k: str | None) -> str:
            return f"the {k} MoE kernel" if k else "the corpus's fastest MoE kernel"

        raise CostModelError(
            f"{where[:200]} priced {fit.model[:80]}'s experts on {fit.device[:40]} with {said(fit.moe_kernel)}, "
            f"but engine {profile.ref} runs {said(runs)} for them: refit under this engine "
            f"(calibrate serving --engine {profile.ref})"
        )


def read_fit(path: str) -> ServingFit:
    """A fit file of :func:`write_fit` back; anything else is a one-line error naming the key.

    Parameters
    ----------
    path : str
        A fit file of :func:`write_fit`.

    Returns
    -------
    ServingFit

    Raises
    ------
    CostModelError
        When the file is not valid JSON, not a fit of this format, or a key is missing or invalid.
    """
    where = f"fit file {str(path)[:200]!r}"
    data = read_user_file(path, what="fit file", max_bytes=MAX_FIT_BYTES)
    try:
        doc = json.loads(data, object_pairs_hook=unique_keys())
    except (ValueError, RecursionError) as exc:
        raise CostModelError(f"{where} is not valid JSON: {json_error(exc)}") from None
    if not isinstance(doc, dict) or doc.get("format") != FIT_FORMAT:
        raise CostModelError(f"{where} is not a serving fit (format must be {FIT_FORMAT!r})")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in (2, 3, 4, FIT_VERSION):
        raise CostModelError(
            f"{where}: version {str(doc.get('version'))[:20]} not supported (this reads 2 to {FIT_VERSION})"
        )
    if doc.get("version") == 2:  # before the scale mode was recorded: every fit priced dynamic scales
        doc = {"fp8_scales": "dynamic", **doc}
    if doc.get("version") in (2, 3):  # before engines named MoE kernels: the corpus's fastest priced them
        doc = {"moe_kernel": None, **doc}
    if doc.get("version") in (2, 3, 4):  # before the formats were recorded
        doc = {"dtypes": None, **doc}
    extra, missing = sorted(set(doc) - _KEYS), sorted(_KEYS - set(doc))
    if extra or missing:
        raise CostModelError(
            f"{where}: {'unknown' if extra else 'missing'} key {(extra or missing)[0][:60]!r}"
        )
    for k in ("model", "device"):
        if not isinstance(doc[k], str):
            raise CostModelError(f"{where}: {k} must be a string")
    if isinstance(doc["tp"], bool) or not isinstance(doc["tp"], int) or not 1 <= doc["tp"] <= 4096:
        raise CostModelError(f"{where}: tp must be a whole number in [1, 4096]")
    if doc["fp8_scales"] not in FP8_SCALES:
        raise CostModelError(f"{where}: fp8_scales must be one of {', '.join(FP8_SCALES)}")
    mk = doc["moe_kernel"]
    if mk is not None and not (isinstance(mk, str) and KERNEL_WORD.fullmatch(mk)):
        raise CostModelError(
            f"{where}: moe_kernel must be a kernel's name (lower-case letters, digits, '_') or null"
        )
    if doc["predict"] is not None:
        Predictor.of(doc["predict"])  # a framework the corpus knows, else its one-line error
    ov = EngineOverheads.from_dict(doc["overheads"], f"{where}: overheads")
    # the record of what was fitted: not read back into the prediction, but a file that claims
    # them holds them in their written types (a hand edit's "runs": "garbage" was taken)
    if not isinstance(doc["runs"], list) or not all(isinstance(r, dict) for r in doc["runs"]):
        raise CostModelError(f"{where}: runs must be a list of objects (one a run)")
    rms = doc["rms_residual"]
    if rms is not None and (
        isinstance(rms, bool) or not isinstance(rms, int | float) or not math.isfinite(rms)
    ):
        raise CostModelError(f"{where}: rms_residual must be a finite number or null")
    if not isinstance(doc["sources"], list) or not all(isinstance(x, str) for x in doc["sources"]):
        raise CostModelError(f"{where}: sources must be a list of file names")
    se = doc["stderr"]
    if not isinstance(se, dict) or any(
        k not in TERMS or not (v is None or (isinstance(v, int | float) and math.isfinite(v)))
        for k, v in se.items()
    ):
        raise CostModelError(f"{where}: stderr must map terms of {', '.join(TERMS)} to numbers or null")
    return ServingFit(
        model=doc["model"][:200],
        device=doc["device"][:200],
        tp=doc["tp"],
        predict=doc["predict"],
        fp8_scales=doc["fp8_scales"],
        moe_kernel=mk,
        dtypes=_read_dtypes(doc["dtypes"], where),
        overheads=ov,
        stderr={k: (None if v is None else float(v)) for k, v in se.items()},
        sources=[x[:200] for x in doc["sources"]],
    )
