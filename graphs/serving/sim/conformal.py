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

``sqrt`` (added after the first selection run, its scores seen before it was kept; the
criterion was then changed: ``benchmarks/interval_selection.py``): deployment ``j`` weighs
``sqrt(n_j) / sum_l sqrt(n_l)`` and each of its rows ``1 / (sqrt(n_j) sum_l sqrt(n_l))``, the
pooled CDF

.. math::

    \\hat F(t) = \\sum_{j=1}^{K} \\frac{\\sqrt{n_j}}{\\sum_l \\sqrt{n_l}}
    \\frac{1}{n_j} \\sum_{i=1}^{n_j} 1\\{s_{ji} \\le t\\},

with ``k = K`` (the deployments stay the units, as for ``deployment``). It lies between the two:
under a one-way random-effects model of the residuals (a deployment effect plus row noise,
intraclass correlation ``rho``), a deployment's mean has variance proportional to
``(1 + (n_j - 1) rho) / n_j`` (Kish, *Survey Sampling*, 1965, the design effect), so its
inverse-variance weight ``n_j / (1 + (n_j - 1) rho)`` runs from ``n_j`` (``rho = 0``: ``row``) to
1 (``rho = 1``: ``deployment``); ``sqrt(n_j)`` is that weight at ``rho = 1 / (sqrt(n_j) + 1)``,
the geometric middle of the two, fixed a priori rather than estimated. A deployment of many rows
(a load sweep) counts more than a deployment of one, but not ``n_j`` times. Unlike
``deployment`` it carries no finite-sample guarantee of Dunn et al.'s kind (a new deployment's
rows do not weigh as one subsampled row of each calibration deployment); its coverage of new
deployments is what the grouped cross-validation measures.

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

The scale (added after the ``sqrt`` weighting, its scores seen too; the name's part,
:data:`~graphs.serving.sim.served_errors.NORMALISATIONS`): ``normalised`` takes the MAD above;
``normalised-iqr`` half the weighted interquartile range, ``sigma_g = (q_0.75 - q_0.25) / 2``
(the weighted quantiles as :func:`weighted_ends` takes them; at least :data:`MIN_SCALE`), the
other classical robust scale (Rousseeuw & Croux, JASA 1993, "Alternatives to the median absolute
deviation": breakdown points 50 % and 25 %; for a symmetric distribution the two are equal,
for a skewed one they differ); ``shifted`` takes ``sigma_g = 1``, so each group's band is the
metric's pooled residuals ``s - m_g`` moved to its own median: its bias corrected, its spread the
metric's. The scale enters the scores as the MAD does (a fixed function of the group's
calibration rows), so the argument for the band's coverage is the MAD's; which is narrower is
what the grouped cross-validation measures.

**Regime** (Mondrian conformal, Vovk et al. 2005, section 4.5; ``/regime``). Every group of
the chain is split by the run's regime, known from the simulation before anything is measured:
``queued`` when the simulated queue share of TTFT
(:attr:`~graphs.serving.sim.simulator.SimResult.queue_share`: mean wait before the first
iteration over mean TTFT) is at least
:data:`~graphs.serving.sim.served_errors.QUEUE_SHARE_THRESHOLD` (0.5, fixed a priori), else
``light`` (:func:`~graphs.serving.sim.served_errors.regime`). Light-load TTFT is request path and
prefill, whose error is small; under queueing it is waiting, whose error is large, so one band for
both is too wide for the first and may be too narrow for the second. Within a regime the rows are
exchangeable as before, so each bucket's band keeps its coverage; the chain's groups of the run's
regime are tried first, then the metric's group of every regime. Normalised, the pooled quantile of
the scores is taken per regime too (the fallback group's over every row). A row without a queue
share cannot be calibrated this way and is refused.

**Expected error.** Each group's median ``|y / y_hat - 1|``, weighted as its method weighs rows
(deployment- or sqrt-weighted: each row weighing as in the band), so the "expected error on
deployments like this" is the same method's answer as the band.

Every band is asymmetric: the lower and upper ends are taken separately from the signed
residuals, since the simulator's errors have a sign (``s`` mostly positive on TTFT).

**Choice.** :func:`grouped_folds` leaves each calibration deployment out in turn;
``benchmarks/interval_selection.py`` fits every method of :data:`CANDIDATES` on the rest and
checks the left-out deployment's rows, and takes per metric the narrowest method that holds
at least 80 % of them and of a left-out deployment's rows on average (the criterion and its
history are stated there: first fixed before it was first run, changed once since).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from costmodel.errors import CostModelError
from costmodel.results import Result

from .served_errors import (
    ALPHA,
    CHAINS,
    MIN_DEPLOYMENTS,
    MIN_ROWS,
    NORMALISATIONS,
    QUEUE_SHARE_THRESHOLD,
    WEIGHTINGS,
    ErrorGroup,
    Level,
    conformal_ranks,
    regime,
)

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

#: the smallest scale a normalised group takes (log units: 1 %), so a group whose rows agree
#: exactly still scores a new row finitely
MIN_SCALE = 0.01


@dataclass(frozen=True)
class Residual(Result):
    """One compared validation row: its deployment key, metric group, lookup features, its
    signed error ``e = y_hat / y - 1`` (the residual is ``s = -ln(1 + e)``), its simulated run's
    queue share of TTFT (None: the row's table predates the column) and, on an E2E row, its
    simulated run's TTFT share of E2E, ``TTFT_hat / E2E_hat`` (None: not known; the ``composed``
    band, :func:`~graphs.serving.sim.served_errors.compose`, needs it)."""

    deployment: str
    metric: str
    framework: str
    device: str
    moe: bool
    error: float
    queue_share: float | None = None
    ttft_share: float | None = None

    @property
    def regime(self) -> str:
        """The row's regime bucket (:func:`~graphs.serving.sim.served_errors.regime`).

        Raises
        ------
        CostModelError
            When the row has no queue share.
        """
        if self.queue_share is None:
            raise CostModelError(
                f"row of {self.deployment[:80]!r} ({self.metric}) has no simulated queue share: a "
                "regime-conditioned method needs the tables regenerated with that column"
            )
        return regime(self.queue_share)

    @property
    def s(self) -> float:
        """``ln(y / y_hat)``."""
        return -math.log1p(self.error)


@dataclass(frozen=True)
class Method(Result):
    """A calibration method (module doc): ``weighting`` (``row``, ``deployment`` or ``sqrt``), ``chain``
    (a key of :data:`CHAINS`), whether the groups are ``normalised``, whether they are split
    by the run's ``regime``, and a normalised method's ``scale`` (``mad``, ``iqr`` or ``none``:
    the module doc)."""

    weighting: str
    chain: str
    normalised: bool
    regime: bool = False
    scale: str = "mad"

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise CostModelError(f"weighting {self.weighting!r} unknown; allowed: {', '.join(WEIGHTINGS)}")
        if self.chain not in CHAINS:
            raise CostModelError(f"chain {self.chain!r} unknown; allowed: {', '.join(CHAINS)}")
        scales = [s for s, _ in NORMALISATIONS.values()]
        if self.scale not in scales or (not self.normalised and self.scale != "mad"):
            raise CostModelError(
                f"scale {self.scale!r} unknown for a {'' if self.normalised else 'plain '}method; allowed: "
                + (", ".join(scales) if self.normalised else "mad (a plain method has no scale)")
            )

    @property
    def name(self) -> str:
        """``weighting/chain`` plus the normalisation (``/normalised``, ``/normalised-iqr`` or
        ``/shifted``, :data:`~graphs.serving.sim.served_errors.NORMALISATIONS`) and ``/regime``:
        how the tables name it."""
        part = next(p for p, (s, _) in NORMALISATIONS.items() if s == self.scale)
        return (
            f"{self.weighting}/{self.chain}"
            + (f"/{part}" if self.normalised else "")
            + ("/regime" if self.regime else "")
        )

    @classmethod
    def named(cls, name: str) -> Method:
        """The method :attr:`name` names.

        Parameters
        ----------
        name : str
            ``weighting/chain[/normalisation][/regime]`` (``deployment/full/normalised``).

        Returns
        -------
        Method

        Raises
        ------
        CostModelError
            When ``name`` does not have that form.
        """
        parts = name.split("/")
        rest = parts[2:]
        regime_ = rest[-1:] == ["regime"]
        norm = rest[:-1] if regime_ else rest
        if len(parts) < 2 or (norm and (len(norm) > 1 or norm[0] not in NORMALISATIONS)):
            raise CostModelError(
                f"method {name[:80]!r}: expected weighting/chain[/normalisation][/regime], the normalisation "
                f"one of {', '.join(NORMALISATIONS)}"
            )
        scale = NORMALISATIONS[norm[0]][0] if norm else "mad"
        return cls(parts[0], parts[1], bool(norm), regime_, scale)


#: the candidates the grouped cross-validation chooses among, fixed before it was first run
#: (``row/full`` is the calibration shipped before it; ``metric`` normalised equals ``metric``);
#: the regime-conditioned ones (module doc) were added after, each of the first ones split by
#: regime, listed after them so that a tie goes to the unconditioned method; the ``sqrt``-weighted
#: ones (module doc) were added after those, every chain, plain or normalised, alone or by
#: regime, then the normalised ones of the other scales, each listed after the earlier ones so
#: that a tie goes to an earlier method
CANDIDATES = tuple(
    Method(w, c, norm, reg)
    for first in (True, False)
    for reg in (False, True)
    for norm in (False, True)
    for w in WEIGHTINGS
    for c in CHAINS
    if not (norm and c == "metric") and (w != "sqrt") == first
) + tuple(
    # the other scales of the normalised methods (module doc), added after the sqrt weighting:
    # every weighting, chain (``metric`` normalised is ``metric``) and regime split, listed last
    Method(w, c, True, reg, scale)
    for scale in ("iqr", "none")
    for reg in (False, True)
    for w in WEIGHTINGS
    for c in CHAINS
    if c != "metric"
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
    """Each row's weight and the units ``k`` (module doc): ``row`` ``1/n`` over ``n`` rows;
    ``deployment`` ``1/(K n_j)`` and ``sqrt`` ``1/(sqrt(n_j) sum_l sqrt(n_l))``, over ``K``
    deployments."""
    if weighting == "row":
        return [1 / len(rows)] * len(rows), len(rows)
    per: dict[str, int] = defaultdict(int)
    for r in rows:
        per[r.deployment] += 1
    if weighting == "sqrt":
        total = math.fsum(math.sqrt(n) for n in per.values())
        return [1 / (math.sqrt(per[r.deployment]) * total) for r in rows], len(per)
    return [1 / (len(per) * per[r.deployment]) for r in rows], len(per)


def _wquantile(x: Sequence[float], w: Sequence[float], p: float) -> float:
    """The weighted ``p`` quantile: the smallest ``x`` whose weighted CDF reaches ``p``."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    total, acc = sum(w), 0.0
    for i in order:
        acc += w[i]
        if acc >= total * p - 1e-12:
            return x[i]
    return x[order[-1]]


def _wmedian(x: Sequence[float], w: Sequence[float]) -> float:
    """The weighted median: the smallest ``x`` whose weighted CDF reaches 1/2."""
    return _wquantile(x, w, 0.5)


def _scale(s: Sequence[float], w: Sequence[float], m: float, how: str) -> float:
    """A normalised group's scale (module doc): its residuals' weighted median absolute deviation
    about ``m`` (``mad``) or half their weighted interquartile range (``iqr``), at least
    :data:`MIN_SCALE`; 1 (``none``: the scores are shifted only)."""
    if how == "none":
        return 1.0
    if how == "iqr":
        return max((_wquantile(s, w, 0.75) - _wquantile(s, w, 0.25)) / 2, MIN_SCALE)
    return max(_wmedian([abs(x - m) for x in s], w), MIN_SCALE)


_Key = tuple[str, str | None, str | None, bool | None, str | None]  #: metric, framework, device, moe, regime


def _key(r: Residual, level: Level, by_regime: bool) -> _Key:
    fw, dev, moe = level
    return (
        r.metric,
        r.framework if fw else None,
        r.device if dev else None,
        r.moe if moe else None,
        r.regime if by_regime else None,
    )


def _label(key: _Key) -> str:
    metric, fw, dev, moe, reg = key
    kind = None if moe is None else ("MoE" if moe else "dense")
    parts = [p for p in (fw, dev, kind) if p]
    text = " ".join([metric, *parts]) if parts else f"{metric}, every validated deployment"
    if reg is not None:
        sign = ">=" if reg == "queued" else "<"
        text += f", {reg} runs (simulated queue share of TTFT {sign} {QUEUE_SHARE_THRESHOLD:g})"
    return text


def _group(key: _Key, rows: Sequence[Residual], weighting: str, low: float, high: float) -> ErrorGroup:
    """A group's band as factors, and its expected error: the median ``|e|`` of its rows,
    weighted as the method weighs them (deployment-weighted: each deployment's rows ``1/(K n_j)``; ``sqrt``: :func:`_weights`)."""
    metric, fw, dev, moe, reg = key
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
        regime=reg,
    )


def _levels(method: Method) -> list[tuple[Level, bool]]:
    """The lookup levels of ``method`` (module doc), each with whether it keys on the regime:
    its chain's, split by regime when the method is, then the metric's group of every regime."""
    chain = CHAINS[method.chain]
    if not method.regime:
        return [(level, False) for level in chain]
    return [(level, True) for level in chain] + [((False, False, False), False)]


def fit_groups(rows: Sequence[Residual], method: Method, alpha: float = ALPHA) -> list[ErrorGroup]:
    """Every group of ``method``'s chain that can answer (module doc), from calibration ``rows``.

    A plain group needs :data:`~graphs.serving.sim.served_errors.MIN_ROWS` rows of at least
    :data:`~graphs.serving.sim.served_errors.MIN_DEPLOYMENTS` deployments and, weighted by
    deployment or ``sqrt``, as many deployments as the upper rank needs; a normalised group needs
    ``MIN_ROWS`` rows of ``MIN_DEPLOYMENTS`` deployments for its location and scale, and its
    metric (regime-conditioned: its metric and regime) enough units for the pooled quantile.

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
        When a row's error is not finite or not above -100 %, or the method is
        regime-conditioned and a row has no queue share.
    """
    if any(not (math.isfinite(r.error) and r.error > -1) for r in rows):
        raise CostModelError("a row's error must be finite and > -100 %")
    levels = _levels(method)
    keyed: dict[_Key, list[Residual]] = defaultdict(list)
    for r in rows:
        for level, by_regime in levels:
            keyed[_key(r, level, by_regime)].append(r)

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
    scale: dict[_Key, tuple[float, float]] = {}
    for key, v in keyed.items():
        if enough(v):
            w, _ = _weights(v, method.weighting)
            s = [r.s for r in v]
            m = _wmedian(s, w)
            scale[key] = (m, _scale(s, w, m, method.scale))
    # the pooled scores: per metric, and per (metric, regime) when the method splits by regime
    pools: dict[tuple[str, str | None], list[tuple[Residual, float]]] = defaultdict(list)
    for r in rows:
        found = next((kk for level, reg in levels if (kk := _key(r, level, reg)) in scale), None)
        if found is not None:
            m, sd = scale[found]
            z = (r.s - m) / sd
            pools[(r.metric, None)].append((r, z))
            if method.regime:
                pools[(r.metric, r.regime)].append((r, z))
    for (metric, reg), scored in pools.items():
        w, k = _weights([r for r, _ in scored], method.weighting)
        ends = weighted_ends([z for _, z in scored], w, k, alpha)
        if ends is None:
            continue
        for key, (m, sd) in scale.items():
            if key[0] == metric and key[4] == reg:
                out.append(_group(key, keyed[key], method.weighting, m + sd * ends[0], m + sd * ends[1]))
    return sorted(out, key=lambda g: g.label)


def grouped_folds(rows: Sequence[Residual]) -> Iterator[tuple[str, list[Residual], list[Residual]]]:
    """Leave-one-deployment-out folds: for each deployment (sorted), ``(deployment, the other
    deployments' rows, its rows)``; no deployment's rows are ever on both sides.

    Parameters
    ----------
    rows : sequence of Residual
        The calibration rows.

    Yields
    ------
    tuple of (str, list of Residual, list of Residual)
        A deployment, the other deployments' rows and its own.
    """
    for dep in sorted({r.deployment for r in rows}):
        yield dep, [r for r in rows if r.deployment != dep], [r for r in rows if r.deployment == dep]
