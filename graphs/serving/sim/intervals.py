"""Prediction intervals of a served run: calibrated on whole simulations, with the simulation at
both ends of its kernels' held-out errors as one part.

A predicted simulation (:func:`graphs.serving.sim.simulator.simulate` with a
:class:`~graphs.serving.pricing.predictor.Predictor`) prices every kernel at its fits' point
prediction. :func:`simulate_interval` runs it again at the optimistic and the pessimistic end
of :data:`~graphs.serving.pricing.predictor.INTERVAL` (P10 and P90 of each kernel's held-out error,
:meth:`Predictor.interval`): the same requests, the same scheduler, every iteration priced at
that quantile (and still clamped to the bound). Since a slower iteration delays every later
one, the scheduler's reaction (larger batches, queueing) is part of each end, which a scaled
point result would miss; :attr:`SimInterval.ranges` is the range of its two ends and the point
itself: a percentile of a finite run (TTFT P90) need not move with every kernel's speed (the
queue's batches change with it), and an interval is never printed beside a point outside it (a
review found ``TTFT P90 s 0.0808 [0.0692, 0.0767]``).

That interval carries the kernels' error alone. The interval a user plans with,
:attr:`SimInterval.calibrated`, is calibrated on whole-simulation residuals of real deployments
(:mod:`graphs.serving.sim.served_errors`: conformal, each metric by the method a
leave-one-deployment-out cross-validation chose, :mod:`graphs.serving.sim.conformal`; per metric,
framework, device and dense/MoE as the method's chain allows; the held-out split left out), so
the engine's, the workload's and the load's errors are in it; each mean metric (TTFT, TPOT, E2E means and the throughputs) takes it where its
metric is calibrated, the hull of both intervals, since the run's kernels' own spread is
known for this run and the residuals' for runs like it. A metric the validation tables do not
calibrate (the P90s) keeps the kernels' interval, and says so (:attr:`SimInterval.basis`).
Where E2E's band is composed from the run's TTFT and TPOT bands
(:func:`~graphs.serving.sim.served_errors.compose`), it is composed at the point run's own
simulated split, its mean TTFT over its mean E2E.
A metric whose method is regime-conditioned is judged by the groups of the point run's own regime
(its simulated queue share of TTFT, :attr:`~graphs.serving.sim.simulator.SimResult.queue_share`),
as its validation rows were.

Those residuals come from measured devices. On a device whose kernels are priced from other
devices' fits (no kernel of its own in the corpus), the transfer adds its own error: the
leave-one-device-out median error ``m`` of each such kernel family (on a device of a generation
nobody measured, the leave-one-generation-out one: the same lookup,
:meth:`~graphs.serving.sim.served_errors.ServedErrors.neighbour_pct`), the largest of them taken. Read
as a normal error whose median absolute value is ``m``, its P90 is ``z = 1.2816 / 0.6745 = 1.90``
times ``m``; it is combined with each end's half-width in log space, as independent errors add,
``w = sqrt(ln(end / point)^2 + ln(1 + 1.90 m)^2)``, every metric widened (:attr:`SimInterval.device_error`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.results import Result

from ..pricing.kernel_sources import unmeasured_device_families
from ..pricing.predictor import Predictor
from ..step.workload import as_workload
from .served_errors import ServedErrors, served_errors
from .simulator import SimResult, simulate

__all__ = [
    "METRICS",
    "P90_PER_MEDIAN",
    "RunBands",
    "SimInterval",
    "run_bands",
    "simulate_interval",
    "transfer_error",
    "transfer_words",
    "widen",
]

#: a normal error's P90 over its median absolute value: ``Phi^-1(0.9) / Phi^-1(0.75)``
P90_PER_MEDIAN = 1.2815515655446004 / 0.6744897501960817

#: the validation tables' metric group of each mean metric (the P90s have none: the tables
#: compare means)
CALIBRATED = {
    "TTFT mean s": "TTFT",
    "TPOT mean s": "TPOT",
    "E2E mean s": "E2E",
    "output tokens/s": "throughput",
    "requests/s": "throughput",
}

#: (label, SimResult attribute path) of the metrics an interval is reported for
METRICS = (
    ("TTFT mean s", "ttft.mean"),
    ("TTFT P90 s", "ttft.p90"),
    ("TPOT mean s", "tpot.mean"),
    ("TPOT P90 s", "tpot.p90"),
    ("E2E mean s", "e2e.mean"),
    ("output tokens/s", "output_tokens_per_s"),
    ("requests/s", "requests_per_s"),
)


def _get(res: SimResult, path: str) -> float:
    v: Any = res
    for part in path.split("."):
        v = getattr(v, part)
    return float(v)


def _value(res: SimResult, label: str) -> float:
    """``res``'s value of the metric labelled ``label`` in :data:`METRICS`."""
    return _get(res, dict(METRICS)[label])


def _ttft_share(res: SimResult) -> float | None:
    """``res``'s mean TTFT over its mean E2E (the split a composed E2E band is taken at,
    :func:`~graphs.serving.sim.served_errors.compose`); None when it served no request."""
    e2e = _value(res, "E2E mean s")
    return min(_value(res, "TTFT mean s") / e2e, 1.0) if e2e > 0 else None


def transfer_error(cov: Any, device: str) -> tuple[float, str] | None:
    """``(m, family)``: the largest leave-one-device-out (new generation: leave-one-generation-out)
    median error ``m`` (a fraction) of the kernel families a priced run or step took from other
    devices' fits (:func:`~graphs.serving.pricing.kernel_sources.unmeasured_device_families`), or
    None when every kernel was priced from ``device``'s own measurements (module doc).

    Parameters
    ----------
    cov : Coverage or None
        The run's or step's seconds by source (None: priced at the bound, nothing transferred).
    device : str
        The catalog device name.

    Returns
    -------
    tuple of (float, str) or None
    """
    if cov is None:
        return None
    hw = get_device(device)
    table = served_errors()
    found = [
        (pct / 100, fam)
        for fam in unmeasured_device_families(cov)
        if (pct := table.neighbour_pct(fam, hw)) is not None
    ]
    return max(found) if found else None


def widen(point: float, band: tuple[float, float], m: float) -> tuple[float, float]:
    """``band`` around ``point`` widened by a transfer error of median ``m`` (module doc): each
    end's half-width in log space combined with the transfer's P90,

    .. math::

        w = \\sqrt{\\ln(\\text{end} / \\text{point})^2 + \\ln(1 + 1.90\\, m)^2}

    (an end on the wrong side of the point counts as the point; a band whose low end is not
    positive, or a point that is not positive, is returned as it is).

    Parameters
    ----------
    point : float
        The predicted value (any unit).
    band : tuple of float
        Its ``(lo, hi)``, in the same unit.
    m : float
        The transfer's median absolute error (a fraction).

    Returns
    -------
    tuple of float
        The widened ``(lo, hi)``.

    >>> lo, hi = widen(10.0, (9.0, 11.0), 0.0)
    >>> round(lo, 9), round(hi, 9)
    (9.0, 11.0)
    """
    lo, hi = band
    if not (point > 0 and lo > 0):
        return band
    extra = math.log1p(P90_PER_MEDIAN * m)
    w_lo = math.hypot(math.log(point / min(lo, point)), extra)
    w_hi = math.hypot(math.log(max(hi, point) / point), extra)
    return point * math.exp(-w_lo), point * math.exp(w_hi)


def transfer_words(dev: tuple[float, str], device: str) -> str:
    """How a transfer error ``dev`` (:func:`transfer_error`) widens a band, in a few words.

    Parameters
    ----------
    dev : tuple of (float, str)
        ``(m, family)``.
    device : str
        The catalog device name.

    Returns
    -------
    str
    """
    m, fam = dev
    split = served_errors().neighbour_basis(fam, get_device(device))
    return (
        f"widened for {device}'s kernels priced from other devices: "
        f"+-{100 * P90_PER_MEDIAN * m:.0f} % at P90 ({fam}, {split} median {100 * m:.0f} %)"
    )


@dataclass(frozen=True)
class RunBands(Result):
    """A predicted run's calibrated P10-P90 and expected errors from the run alone: the
    whole-simulation residuals' band of each calibrated mean metric (module doc) at the run's own
    regime and split, on an unmeasured device widened by the transfer's error; no kernel-end
    runs (a rate sweep's runs and a rate search's probes: :class:`SimInterval` adds them for one
    run).

    Attributes
    ----------
    point : SimResult
        The predicted run.
    deployment : tuple of (str, str, bool)
        The served-error lookup: framework, device name and whether the model is MoE.
    """

    point: SimResult
    deployment: tuple[str, str, bool]

    def value(self, label: str) -> float:
        """The run's value of one of :data:`METRICS`.

        Parameters
        ----------
        label : str
            A metric's label in :data:`METRICS` (its unit is the metric's).

        Returns
        -------
        float
            The run's value of that metric.
        """
        return _value(self.point, label)

    @property
    def ttft_share(self) -> float | None:
        """The run's simulated mean TTFT over its mean E2E (the split a composed E2E band is
        taken at, :func:`~graphs.serving.sim.served_errors.compose`); None when it served no
        request."""
        return _ttft_share(self.point)

    def _share(self, table: ServedErrors, group: str) -> float | None:
        """The run's queue share of TTFT where ``group``'s method is regime-conditioned (module
        doc), else None (not needed)."""
        return self.point.queue_share if table.conditioned(group) else None

    @property
    def device_error(self) -> tuple[float, str] | None:
        """``(m, family)``: the largest leave-one-device-out (new generation: leave-one-generation-out)
        median error (a fraction) of the kernel families this run priced from other devices' fits,
        or None on a measured device (module doc; :func:`transfer_error`)."""
        return transfer_error(self.point.coverage, self.deployment[1])

    @property
    def conformal(self) -> dict[str, tuple[float, float]]:
        """Each calibrated metric's whole-simulation band (P10 and P90 ends, the metric's unit),
        before any widening: the metrics of :data:`CALIBRATED` the table covers."""
        table = served_errors()
        out = {}
        for label, group in CALIBRATED.items():
            if table.covers(group):
                g, _ = table.like(group, *self.deployment, self._share(table, group), self.ttft_share)
                out[label] = g.interval(self.value(label))
        return out

    def widened(self, bands: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        """``bands`` on an unmeasured device widened by the transfer's error (module doc: each end's
        half-width in log space combined with ``ln(1 + 1.90 m)``); on a measured one unchanged.

        Parameters
        ----------
        bands : dict of str to (float, float)
            Metric label to its ``(lo, hi)`` (the point inside or not).

        Returns
        -------
        dict of str to (float, float)
        """
        dev = self.device_error
        if dev is None:
            return dict(bands)
        return {label: widen(self.value(label), band, dev[0]) for label, band in bands.items()}

    @property
    def calibrated(self) -> dict[str, tuple[float, float]]:
        """Each calibrated metric's P10-P90 to plan with: :attr:`conformal`, widened on an
        unmeasured device (:meth:`widened`)."""
        return self.widened(self.conformal)

    def plain_basis(self) -> dict[str, str]:
        """What each calibrated metric's whole-simulation band rests on, in a few words (without
        the widening of :attr:`device_words`).

        Returns
        -------
        dict of str to str
        """
        table = served_errors()
        out = {}
        for label, group in CALIBRATED.items():
            if table.covers(group):
                g, like = table.like(group, *self.deployment, self._share(table, group), self.ttft_share)
                rows = (
                    "" if table.composed(group) else f"{g.n} validation rows of {g.deployments} deployments: "
                )
                out[label] = f"{rows}{g.label}; {table.method_words(group)}" + (
                    "" if like else "; unlike this deployment"
                )
        return out

    @property
    def device_words(self) -> str | None:
        """How an unmeasured device's transfer error widens every band, or None (measured)."""
        dev = self.device_error
        return None if dev is None else transfer_words(dev, self.deployment[1])

    @property
    def basis(self) -> dict[str, str]:
        """What each calibrated metric's band rests on, in a few words."""
        words = self.device_words
        return {k: v if words is None else f"{v}; {words}" for k, v in self.plain_basis().items()}

    def expected_errors(self) -> list[str]:
        """One line per calibrated metric: the expected error on deployments like this one.

        Returns
        -------
        list of str
        """
        table = served_errors()
        groups = dict.fromkeys(CALIBRATED.values())
        return [
            table.statement(g, *self.deployment, self._share(table, g), self.ttft_share)
            for g in groups
            if table.covers(g)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": {k: list(v) for k, v in self.calibrated.items()},
            "interval_basis": self.basis,
            "expected_error": self.expected_errors(),
        }


def run_bands(res: SimResult, predictor: Predictor, moe: bool) -> RunBands | None:
    """The calibrated bands of a run ``predictor`` priced (:class:`RunBands`), or None for the
    bound (it predicts nothing: no band).

    Parameters
    ----------
    res : SimResult
        The run.
    predictor : Predictor
        What priced its iterations.
    moe : bool
        Whether the model is MoE (the lookup's dense/MoE kind).

    Returns
    -------
    RunBands or None
    """
    if predictor.is_bound or predictor.framework is None:
        return None
    return RunBands(res, (predictor.framework, get_device(res.device).name, moe))


@dataclass(frozen=True)
class SimInterval(Result):
    """A predicted run (``point``) with its runs at the optimistic (``low``: P10 of the kernels'
    held-out errors) and pessimistic (``high``: P90) ends; ``ranges`` maps each of
    :data:`METRICS` to its ``(lo, hi)``."""

    point: SimResult
    low: SimResult
    high: SimResult
    quantiles: tuple[float, float]
    #: the served-error lookup: framework, device name and whether the model is MoE
    deployment: tuple[str, str, bool] | None = None

    def value(self, label: str) -> float:
        """The point run's value of one of :data:`METRICS`.

        Parameters
        ----------
        label : str
            A metric's label in :data:`METRICS` (its unit is the metric's).

        Returns
        -------
        float
            The point run's value of that metric.
        """
        return _value(self.point, label)

    @property
    def bands(self) -> RunBands | None:
        """The point run's whole-simulation bands (:class:`RunBands`); None without a lookup key."""
        return None if self.deployment is None else RunBands(self.point, self.deployment)

    @property
    def ranges(self) -> dict[str, tuple[float, float]]:
        out = {}
        for label, path in METRICS:
            a, b, v = _get(self.low, path), _get(self.high, path), _get(self.point, path)
            out[label] = (min(a, b, v), max(a, b, v))  # the point inside (module doc)
        return out

    @property
    def device_error(self) -> tuple[float, str] | None:
        """``(m, family)``: the largest leave-one-device-out (new generation: leave-one-generation-out)
        median error (a fraction) of the kernel families this run priced from other devices' fits,
        or None on a measured device (module doc)."""
        bands = self.bands
        return None if bands is None else bands.device_error

    @property
    def calibrated(self) -> dict[str, tuple[float, float]]:
        """Each metric's P10-P90 to plan with (module doc): the hull of the kernels' interval
        and the whole-simulation residuals' where the metric is calibrated, else the kernels';
        on an unmeasured device widened by the transfer's error (:attr:`device_error`)."""
        out = dict(self.ranges)
        bands = self.bands
        if bands is None:
            return out
        for label, (a, b) in bands.conformal.items():
            k_lo, k_hi = out[label]
            out[label] = (min(a, k_lo), max(b, k_hi))
        return bands.widened(out)

    @property
    def basis(self) -> dict[str, str]:
        """What each metric's :attr:`calibrated` interval rests on, in a few words."""
        kernels = "kernels' held-out errors alone: not calibrated on whole simulations"
        out = dict.fromkeys((label for label, _ in METRICS), kernels)
        bands = self.bands
        if bands is None:
            return out
        out.update(bands.plain_basis())
        words = bands.device_words
        return out if words is None else {k: f"{v}; {words}" for k, v in out.items()}

    def expected_errors(self) -> list[str]:
        """One line per calibrated metric: the expected error on deployments like this one."""
        bands = self.bands
        return [] if bands is None else bands.expected_errors()

    @property
    def ttft_share(self) -> float | None:
        """The point run's simulated mean TTFT over its mean E2E (:attr:`RunBands.ttft_share`);
        None when it served no request."""
        return _ttft_share(self.point)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point.to_dict(),
            "quantiles": list(self.quantiles),
            "interval": {k: list(v) for k, v in self.calibrated.items()},
            "interval_basis": self.basis,
            "kernel_interval": {k: list(v) for k, v in self.ranges.items()},
            "expected_error": self.expected_errors(),
        }


def simulate_interval(
    config: Any, device: Any, requests: Sequence[Any], *, predictor: Predictor, **kw: Any
) -> SimInterval:
    """:func:`simulate` at ``predictor``'s point and at both ends of its interval (module doc).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model (a config or a catalog name) or workload, as :func:`simulate` takes it.
    device : Hardware or str
        The device: a spec or a catalog name.
    requests : sequence of Request
        The requests to serve (arrival times in s, prompt and output lengths in tokens).
    predictor : Predictor
        The kernel-time predictor; its point and its P10/P90 ends each price one run. The
        roofline bound (no interval) is refused.
    **kw : Any
        Passed on to each :func:`simulate` call.

    Returns
    -------
    SimInterval
        The point, low (P10) and high (P90) runs, the quantiles and the served-error lookup key
        (framework, device name, MoE or not).

    Raises
    ------
    CostModelError
        When ``predictor`` is the bound (no prediction interval).
    """
    if predictor.is_bound:
        raise CostModelError("a prediction interval needs a predictor (--predict): the bound has none")
    lo, hi = predictor.point.interval()
    assert lo.quantile is not None and hi.quantile is not None
    w = as_workload(config)
    point = simulate(w, device, requests, predictor=predictor.point, **kw)
    low = simulate(w, device, requests, predictor=lo, **kw)
    high = simulate(w, device, requests, predictor=hi, **kw)
    name = get_device(device).name
    assert predictor.framework is not None  # not the bound (refused above)
    return SimInterval(
        point, low, high, (lo.quantile, hi.quantile), (predictor.framework, name, w.config.is_moe)
    )
