"""Conformal calibration of the served-error groups: the candidate methods, their fits and the
grouped (leave-one-deployment-out) cross-validation that chooses among them.

The residual of a validation row ``i`` of deployment ``j`` is ``s_ji = ln(y_ji / y_hat_ji)``
(:mod:`graphs.serving.sim.served_errors`). Rows of one deployment (its lengths and loads) share
its engine, model and device, hence most of their error: rows are exchangeable *within* a
deployment, and deployments with each other, but a new deployment's rows are not exchangeable
with the calibration rows one by one. A method here is three choices:

**Weighting.** ``row``: every row weighs ``1/n`` (plain split conformal, Lei et al., JASA 2018,
"Distribution-free predictive inference for regression"). ``deployment``: every deployment
weighs ``1/K`` and its ``n_j`` rows ``1/(K n_j)`` each, the pooled CDF

.. math::

    \\hat F(t) = \\frac{1}{K} \\sum_{j=1}^{K} \\frac{1}{n_j} \\sum_{i=1}^{n_j} 1\\{s_{ji} \\le t\\}

of Dunn, Wasserman & Ramdas (JASA 2022, "Distribution-free prediction sets for two-layer
hierarchical models"), the expectation over draws of one row per deployment (their subsampling
method), for which the deployments are the exchangeable units. Either way, with ``k`` the units
(rows, or deployments) and the ranks ``r_lo = max(1, floor((k+1) alpha/2))``,
``r_hi = ceil((k+1)(1 - alpha/2))`` (:func:`~graphs.serving.sim.served_errors.conformal_ranks`),
the ends are the smallest residuals whose weighted CDF reaches ``r_lo / k`` and ``r_hi / k``
(:func:`weighted_ends`); with equal weights these are the order statistics ``s_(r_lo)`` and
``s_(r_hi)``. A group needs ``r_hi <= k``: 9 rows, or 9 deployments.

**Groups** (``chain``). The lookup chain a run is judged by: ``full`` (metric, framework, device,
dense/MoE) -> (metric, framework, dense/MoE) -> (metric, dense/MoE) -> (metric), ``engine``
(metric, framework, dense/MoE) -> (metric), or ``metric`` alone. The first group of the chain
with enough units answers.

**Normalised** (locally weighted conformal, Lei et al. 2018, section 5.2). Each group of the
chain gets a location and a scale, the weighted median ``m_g`` of its residuals and their
weighted median absolute deviation ``sigma_g`` (at least :data:`MIN_SCALE`), from a group of at
least ``MIN_DEPLOYMENTS`` deployments; every row of the metric is scored by the group it would be
judged by, ``z = (s - m_g) / sigma_g``, and the ends of the pooled ``z`` (weighted as above, ``k``
the metric's rows or deployments) give each group the band ``exp(m_g + sigma_g z_lo)`` to
``exp(m_g + sigma_g z_hi)``: a group whose rows scatter little gets a narrow band, a biased group
a shifted one, and the quantile rests on every deployment of the metric.

**Expected error.** Each group's median ``|y / y_hat - 1|``, weighted as its method weighs rows
(deployment-weighted: the median over deployments alike), so the "expected error on
deployments like this" is the same method's answer as the band.

Every band is asymmetric: the lower and upper ends are taken separately from the signed
residuals, since the simulator's errors have a sign (``s`` mostly positive on TTFT).

**Choice.** :func:`grouped_folds` leaves each calibration deployment out in turn;
``benchmarks/interval_selection.py`` fits every method of :data:`CANDIDATES` on the rest and
checks the left-out deployment's rows, and takes per metric the narrowest method that holds
at least 80 % of them (the criterion is stated there, fixed before it was first run).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from costmodel.errors import CostModelError
from costmodel.results import Result

from .served_errors import ALPHA, CHAINS, MIN_DEPLOYMENTS, MIN_ROWS, ErrorGroup, Level, conformal_ranks

__all__ = [
    "CANDIDATES",
    "MIN_SCALE",
    "Method",
    "Residual",
    "WEIGHTINGS",
    "fit_groups",
    "grouped_folds",
    "weighted_ends",
]

WEIGHTINGS = ("row", "deployment")  #: how rows weigh (module doc)
#: the smallest scale a normalised group takes (log units: 1 %), so a group whose rows agree
#: exactly still scores a new row finitely
MIN_SCALE = 0.01


@dataclass(frozen=True)
class Residual(Result):
    """One compared validation row: its deployment key, metric group, lookup features and its
    signed error ``e = y_hat / y - 1`` (the residual is ``s = -ln(1 + e)``)."""

    deployment: str
    metric: str
    framework: str
    device: str
    moe: bool
    error: float

    @property
    def s(self) -> float:
        """``ln(y / y_hat)``."""
        return -math.log1p(self.error)


@dataclass(frozen=True)
class Method(Result):
    """A calibration method (module doc): ``weighting`` (``row`` or ``deployment``), ``chain``
    (a key of :data:`CHAINS`) and whether the groups are ``normalised``."""

    weighting: str
    chain: str
    normalised: bool

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise CostModelError(f"weighting {self.weighting!r} unknown; allowed: {', '.join(WEIGHTINGS)}")
        if self.chain not in CHAINS:
            raise CostModelError(f"chain {self.chain!r} unknown; allowed: {', '.join(CHAINS)}")

    @property
    def name(self) -> str:
        """``weighting/chain`` plus ``/normalised``: how the tables name it."""
        return f"{self.weighting}/{self.chain}" + ("/normalised" if self.normalised else "")

    @classmethod
    def named(cls, name: str) -> Method:
        """The method :attr:`name` names.

        Parameters
        ----------
        name : str
            ``weighting/chain`` or ``weighting/chain/normalised`` (``deployment/full/normalised``).

        Returns
        -------
        Method

        Raises
        ------
        CostModelError
            When ``name`` does not have that form.
        """
        parts = name.split("/")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "normalised"):
            raise CostModelError(f"method {name!r}: expected weighting/chain[/normalised]")
        return cls(parts[0], parts[1], len(parts) == 3)


#: the candidates the grouped cross-validation chooses among, fixed before it was first run
#: (``row/full`` is the calibration shipped before it; ``metric`` normalised equals ``metric``)
CANDIDATES = tuple(
    Method(w, c, norm)
    for norm in (False, True)
    for w in WEIGHTINGS
    for c in CHAINS
    if not (norm and c == "metric")
)


def weighted_ends(
    s: Sequence[float], w: Sequence[float], k: int, alpha: float = ALPHA
) -> tuple[float, float] | None:
    """The conformal ends of residuals ``s`` with weights ``w`` (summing to 1) over ``k`` units
    (module doc): the smallest ``s`` whose weighted CDF reaches ``r_lo / k`` and ``r_hi / k``;
    None when ``k`` is too small for the upper rank.

    Parameters
    ----------
    s : sequence of float
        Residuals.
    w : sequence of float
        Their weights (each > 0, summing to 1).
    k : int
        Exchangeable units: rows (equal weights) or deployments.
    alpha : float
        Miscoverage, split equally between the tails.

    Returns
    -------
    (float, float) or None

    Raises
    ------
    CostModelError
        When the weights are not positive, one per residual and summing to 1.

    >>> weighted_ends([3.0, 1.0, 2.0, 0.0, 4.0, 5.0, 6.0, 7.0, 8.0], [1 / 9] * 9, 9)
    (0.0, 8.0)
    """
    ranks = conformal_ranks(k, alpha)
    if ranks is None or not s:
        return None
    if len(s) != len(w) or any(not (x > 0) for x in w) or not math.isclose(sum(w), 1.0, rel_tol=1e-9):
        raise CostModelError("conformal weights must be positive, one per residual, summing to 1")
    order = sorted(range(len(s)), key=lambda i: s[i])
    tol = 1e-9  # the CDF is a float sum: a level reached up to rounding counts as reached

    def end(level: float) -> float:
        acc = 0.0
        for i in order:
            acc += w[i]
            if acc >= level - tol:
                return s[i]
        return s[order[-1]]

    return end(ranks[0] / k), end(ranks[1] / k)


def _weights(rows: Sequence[Residual], weighting: str) -> tuple[list[float], int]:
    """Each row's weight and the units ``k`` (module doc)."""
    if weighting == "row":
        return [1 / len(rows)] * len(rows), len(rows)
    per: dict[str, int] = defaultdict(int)
    for r in rows:
        per[r.deployment] += 1
    return [1 / (len(per) * per[r.deployment]) for r in rows], len(per)


def _wmedian(x: Sequence[float], w: Sequence[float]) -> float:
    """The weighted median: the smallest ``x`` whose weighted CDF reaches 1/2."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    total, acc = sum(w), 0.0
    for i in order:
        acc += w[i]
        if acc >= total / 2 - 1e-12:
            return x[i]
    return x[order[-1]]


def _key(r: Residual, level: Level) -> tuple[str, str | None, str | None, bool | None]:
    fw, dev, moe = level
    return (r.metric, r.framework if fw else None, r.device if dev else None, r.moe if moe else None)


def _label(key: tuple[str, str | None, str | None, bool | None]) -> str:
    metric, fw, dev, moe = key
    kind = None if moe is None else ("MoE" if moe else "dense")
    parts = [p for p in (fw, dev, kind) if p]
    return " ".join([metric, *parts]) if parts else f"{metric}, every validated deployment"


def _group(
    key: tuple[str, str | None, str | None, bool | None],
    rows: Sequence[Residual],
    weighting: str,
    low: float,
    high: float,
) -> ErrorGroup:
    """A group's band as factors, and its expected error: the median ``|e|`` of its rows,
    weighted as the method weighs them (deployment-weighted: each deployment's rows ``1/(K n_j)``)."""
    metric, fw, dev, moe = key
    w, _ = _weights(rows, weighting)
    err = [abs(r.error) for r in rows]
    median_abs = statistics.median(err) if weighting == "row" else _wmedian(err, w)
    return ErrorGroup(
        metric=metric,
        framework=fw,
        device=dev,
        moe=moe,
        n=len(rows),
        deployments=len({r.deployment for r in rows}),
        low=math.exp(low),
        high=math.exp(high),
        median_abs=median_abs,
        label=_label(key),
    )


def fit_groups(rows: Sequence[Residual], method: Method, alpha: float = ALPHA) -> list[ErrorGroup]:
    """Every group of ``method``'s chain that can answer (module doc), from calibration ``rows``.

    A plain group needs :data:`~graphs.serving.sim.served_errors.MIN_ROWS` rows of at least
    :data:`~graphs.serving.sim.served_errors.MIN_DEPLOYMENTS` deployments and, weighted by
    deployment, as many deployments as the upper rank needs; a normalised group needs
    ``MIN_ROWS`` rows of ``MIN_DEPLOYMENTS`` deployments for its location and scale, and its
    metric enough units for the pooled quantile.

    Parameters
    ----------
    rows : sequence of Residual
        The calibration rows (any metrics).
    method : Method
        How to calibrate.
    alpha : float
        Miscoverage.

    Returns
    -------
    list of ErrorGroup
        Sorted by label.

    Raises
    ------
    CostModelError
        When a row's error is not finite or not above -100 %.
    """
    if any(not (math.isfinite(r.error) and r.error > -1) for r in rows):
        raise CostModelError("a row's error must be finite and > -100 %")
    chain = CHAINS[method.chain]
    keyed: dict[tuple[str, str | None, str | None, bool | None], list[Residual]] = defaultdict(list)
    for r in rows:
        for level in chain:
            keyed[_key(r, level)].append(r)

    def enough(v: Sequence[Residual]) -> bool:
        return len(v) >= MIN_ROWS and len({r.deployment for r in v}) >= MIN_DEPLOYMENTS

    out: list[ErrorGroup] = []
    if not method.normalised:
        for key, v in keyed.items():
            if not enough(v):
                continue
            w, k = _weights(v, method.weighting)
            ends = weighted_ends([r.s for r in v], w, k, alpha)
            if ends is not None:
                out.append(_group(key, v, method.weighting, *ends))
        return sorted(out, key=lambda g: g.label)
    scale: dict[tuple[str, str | None, str | None, bool | None], tuple[float, float]] = {}
    for key, v in keyed.items():
        if enough(v):
            w, _ = _weights(v, method.weighting)
            m = _wmedian([r.s for r in v], w)
            scale[key] = (m, max(_wmedian([abs(r.s - m) for r in v], w), MIN_SCALE))
    by_metric: dict[str, list[Residual]] = defaultdict(list)
    for r in rows:
        by_metric[r.metric].append(r)
    for metric, v in by_metric.items():
        scored = []
        for r in v:
            found = next((kk for level in chain if (kk := _key(r, level)) in scale), None)
            if found is not None:
                m, sd = scale[found]
                scored.append((r, (r.s - m) / sd))
        if not scored:
            continue
        w, k = _weights([r for r, _ in scored], method.weighting)
        ends = weighted_ends([z for _, z in scored], w, k, alpha)
        if ends is None:
            continue
        for key, (m, sd) in scale.items():
            if key[0] == metric:
                out.append(_group(key, keyed[key], method.weighting, m + sd * ends[0], m + sd * ends[1]))
    return sorted(out, key=lambda g: g.label)


def grouped_folds(rows: Sequence[Residual]) -> Iterator[tuple[str, list[Residual], list[Residual]]]:
    """Leave-one-deployment-out folds: for each deployment (sorted), ``(deployment, the other
    deployments' rows, its rows)``; no deployment's rows are ever on both sides.

    Parameters
    ----------
    rows : sequence of Residual

    Returns
    -------
    iterator of (str, list of Residual, list of Residual)
    """
    for dep in sorted({r.deployment for r in rows}):
        yield dep, [r for r in rows if r.deployment != dep], [r for r in rows if r.deployment == dep]
