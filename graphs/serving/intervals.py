"""Prediction intervals of a served run: the simulation at both ends of its kernels' held-out errors.

A predicted simulation (:func:`graphs.serving.simulator.simulate` with a
:class:`~graphs.serving.predictor.Predictor`) prices every kernel at its fits' point
prediction. :func:`simulate_interval` runs it again at the optimistic and the pessimistic end
of :data:`~graphs.serving.predictor.INTERVAL` (P10 and P90 of each kernel's held-out error,
:meth:`Predictor.interval`): the same requests, the same scheduler, every iteration priced at
that quantile (and still clamped to the bound). Since a slower iteration delays every later
one, the scheduler's reaction (larger batches, queueing) is part of each end, which a scaled
point result would miss. Each reported metric's interval is the range of its two ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.results import Result

from .predictor import Predictor
from .simulator import SimResult, simulate

__all__ = ["METRICS", "SimInterval", "simulate_interval"]

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


@dataclass(frozen=True)
class SimInterval(Result):
    """A predicted run (``point``) with its runs at the optimistic (``low``: P10 of the kernels'
    held-out errors) and pessimistic (``high``: P90) ends; ``ranges`` maps each of
    :data:`METRICS` to its ``(lo, hi)``."""

    point: SimResult
    low: SimResult
    high: SimResult
    quantiles: tuple[float, float]

    def value(self, label: str) -> float:
        """The point run's value of one of :data:`METRICS`."""
        return _get(self.point, dict(METRICS)[label])

    @property
    def ranges(self) -> dict[str, tuple[float, float]]:
        out = {}
        for label, path in METRICS:
            a, b = _get(self.low, path), _get(self.high, path)
            out[label] = (min(a, b), max(a, b))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point.to_dict(),
            "quantiles": list(self.quantiles),
            "interval": {k: list(v) for k, v in self.ranges.items()},
        }


def simulate_interval(
    config: Any, device: Any, requests: Sequence[Any], *, predictor: Predictor, **kw: Any
) -> SimInterval:
    """:func:`simulate` at ``predictor``'s point and at both ends of its interval (module doc)."""
    if predictor.is_bound:
        raise CostModelError("a prediction interval needs a predictor (--predict): the bound has none")
    lo, hi = predictor.point.interval()
    assert lo.quantile is not None and hi.quantile is not None
    point = simulate(config, device, requests, predictor=predictor.point, **kw)
    low = simulate(config, device, requests, predictor=lo, **kw)
    high = simulate(config, device, requests, predictor=hi, **kw)
    return SimInterval(point, low, high, (lo.quantile, hi.quantile))
