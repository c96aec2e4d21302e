"""How far a served prediction has been from real deployments like it: the expected error and a
P10-P90 interval calibrated on whole-simulation residuals (conformal, per metric by the method a
grouped cross-validation chose).

The validation tables (``docs/serving_accuracy.md``: published serving measurements;
``docs/silicon_accuracy.md``: NVIDIA's measured runs of the aiconfigurator-core wheel) replay
real deployments through :func:`graphs.serving.simulate` with ``--predict`` and the engine's
overheads. Each compared row gives a residual of the whole simulation, kernels, scheduler,
overheads and load model together,

.. math::

    s_i = \\ln \\frac{y_i}{\\hat y_i}

with ``y`` the measured value and ``\\hat y`` the simulated one. The rows of deployments in the
held-out split (``benchmarks/data/heldout.toml``, fixed before the calibration) are left out;
the rest, grouped by metric (throughput, TPOT, TTFT, E2E), framework, device and dense/MoE,
make the shipped table (:data:`DATA_FILE`, written by ``benchmarks/served_errors.py --write``).

**Interval.** The method that calibrates each metric is chosen by leave-one-deployment-out
cross-validation on the calibration rows (:mod:`graphs.serving.sim.conformal`, which fits the
groups; ``benchmarks/interval_selection.py``); the table names it per metric
(:attr:`ServedErrors.methods`) with the lookup chain it uses. In its plainest form, for a new
run of the same group, split conformal prediction (Vovk et al.,
*Algorithmic Learning in a Random World*, 2005; Lei et al., JASA 2018, "Distribution-free
predictive inference for regression") gives, from the ``n`` sorted calibration residuals
``s_(1) <= ... <= s_(n)``,

.. math::

    y \\in \\left[\\hat y\\, e^{s_{(\\lfloor (n+1)\\alpha/2 \\rfloor)}},\\;
                 \\hat y\\, e^{s_{(\\lceil (n+1)(1-\\alpha/2) \\rceil)}}\\right]

with coverage at least ``1 - alpha`` when the new run is exchangeable with the group's rows
(``alpha = 0.2``: a P10-P90 interval). Rows of one deployment share its errors, so a new
deployment is exchangeable with the calibration *deployments*, not rows: the deployment-weighted
and normalised forms (:mod:`graphs.serving.sim.conformal`: the pooled CDF of Dunn, Wasserman &
Ramdas 2022, each deployment weighing ``1/K``; Lei et al.'s locally weighted scores
``(s - m_g) / sigma_g``) give every group such a band, as factors ``low``, ``high`` on the
simulated value, looked up the same way. A group needs ``n >= 9`` rows (else the upper rank
exceeds ``n``) from at least :data:`MIN_DEPLOYMENTS` deployments (a deployment's rows share its
errors); with fewer, the next broader group stands in (:meth:`ServedErrors.like`), and the
answer says which. The kernels' own spread (each kernel's held-out P10/P90 error,
:mod:`graphs.serving.sim.intervals`) is one part of these residuals, not added to them.

**Regime.** What a run's error is depends on what dominates it: TTFT at light load is the request
path and prefill (errors near 10 %), under queueing it is waiting, whose error is large. Every
simulated run knows which before anything is measured: its queue share of TTFT
(:attr:`graphs.serving.sim.simulator.SimResult.queue_share`, the mean wait before the first
iteration over the mean TTFT), and :func:`regime` buckets it, ``queued`` at and above
:data:`QUEUE_SHARE_THRESHOLD` (0.5, fixed a priori) and ``light`` below. A method named
``.../regime`` (:mod:`graphs.serving.sim.conformal`) calibrates each bucket apart (Mondrian
conformal); a run, the validation rows and ``simulate --predict`` alike, is judged by the groups
of its own bucket (:meth:`ServedErrors.like` takes its queue share), falling back to the metric's
group of every regime.

**E2E composed from TTFT and TPOT** (the method ``composed``, :data:`COMPOSED`; E2E only). A
request's latency is its first token and then one token per TPOT, ``E2E = TTFT + (OSL - 1) TPOT``,
and a run's mean likewise; the simulated run splits its own mean E2E the same way,
``E2E_hat = TTFT_hat + D_hat`` with ``D_hat = E2E_hat - TTFT_hat`` its mean decode time (exactly
``(OSL - 1) TPOT_hat`` at fixed lengths; where lengths vary, the mean over requests of each one's
decode time, which the TPOT band scales as it scales ``TPOT_hat``). With the run's simulated TTFT
share ``a = TTFT_hat / E2E_hat`` and the TTFT and TPOT groups the run is judged by (each metric's
own method and chain, its regime where that method is regime-conditioned), factors ``l_T, h_T``
and ``l_P, h_P``: the measured E2E splits the same way, so its ratio to the simulated one is
``r_E = a r_T + (1 - a) r_P`` of the parts' ratios ``r = y / y_hat``, and the E2E band is

.. math::

    \\widehat{E2E} \\left[a\\, l_T + (1 - a)\\, l_P,\\; a\\, h_T + (1 - a)\\, h_P\\right]

(:func:`compose`). Its ends are the sums of the parts' ends: the exact P10 and P90 of the sum when
the two errors are comonotone (quantiles add over comonotone sums: Dhaene, Denuit, Goovaerts, Kaas
& Vyncke, *Insurance: Mathematics and Economics* 31, 2002, "The concept of comonotonicity in
actuarial science and finance: theory": the quantile of a comonotonic sum is the sum of the
quantiles). Read against other dependence: for jointly normal errors of any correlation, whose
P10-P90 is the mean +- 1.28 sd, ``sd(a X + (1 - a) Y) <= a sd(X) + (1 - a) sd(Y)``, so the band is
at least as wide as the sum's own. Distribution-free it guarantees less: the sum lies in the band
whenever both parts lie in theirs, with probability at least ``1 - 2 alpha`` (60 %,
Bonferroni), which is why the cross-validation, not the argument, judges it. It rests on the TTFT
and TPOT calibration rows (many more deployments than E2E's own), and its expected error is
``a m_T + (1 - a) m_P`` of the parts' medians ``m`` (the median |error| of the sum when the
errors are comonotone and of one sign).

**Expected error.** The median of ``|y / \\hat y - 1|`` over the same group's rows (weighted as
the metric's method weighs them: deployments alike where it weighs deployments): "expected
error on deployments like this: +-X % (N validation rows: ...)". A run whose framework,
metric and dense/MoE kind has fewer than :data:`MIN_DEPLOYMENTS` validated deployments is
*unlike what was validated*, and says so.

**Kernels on a device nobody measured.** A kernel of a device the corpus does not measure is
priced from the other devices' fits on its datasheet ("neighbour"). How far that has been off
is measured by leaving each measured device out in turn (``docs/accuracy.md``, held-out error,
``device`` split, "calibrated + shape residuals": the median |error| of each left-out device's
rows). :meth:`ServedErrors.neighbour` states, for a family and a device, the median of those
per-device errors over the measured devices of the same memory kind (HBM, or GDDR: the
workstation and PCIe parts, whose errors run several times larger), and the worst of them.

A device of a generation nobody measured (its catalog architecture, ``NVIDIA Rubin``, ``AMD
CDNA 5``, is no measured device's: :attr:`costmodel.hardware.Hardware.generation`) has no sibling
in the fits, where each left-out device above had its own (H200 beside H100). Its expected error
is the leave-one-*generation*-out one (``generation`` split of :mod:`costmodel.measured.heldout`:
every measured device of a generation, of one memory kind, predicted from fits on the other
generations' devices only, their rows pooled; :class:`GenerationError`), stated as the median
over the held-out generations of the same memory kind of each one's median |error|,

.. math::

    X = \\operatorname{median}_{g} \\; \\operatorname{median}_{i \\in g} |e_i|,

with the worst generation's median and P90; a device of a measured generation keeps the
leave-one-device-out statement (:meth:`ServedErrors.new_generation`).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError
from costmodel.keys import memory_kind
from costmodel.results import Result

if TYPE_CHECKING:
    from costmodel.hardware import Hardware

__all__ = [
    "ALPHA",
    "CHAINS",
    "COMPOSED",
    "QUEUE_SHARE_THRESHOLD",
    "REGIMES",
    "DATA_FILE",
    "Level",
    "METRIC_GROUPS",
    "MIN_DEPLOYMENTS",
    "MIN_ROWS",
    "NORMALISATIONS",
    "WEIGHTINGS",
    "DeviceError",
    "ErrorGroup",
    "GenerationError",
    "ServedErrors",
    "compose",
    "conformal_ranks",
    "memory_kind",
    "parse",
    "regime",
    "served_errors",
]

ALPHA = 0.2  #: miscoverage: a P10-P90 interval
MIN_ROWS = 9  #: the fewest rows for which the upper rank ceil((n+1)(1 - ALPHA/2)) <= n
#: the fewest deployments a group is used with: rows of one deployment (its lengths and loads)
#: share its errors, so a group of one or two says little of the next deployment
MIN_DEPLOYMENTS = 3
#: the metrics calibrated, as the validation tables group them
METRIC_GROUPS = ("throughput", "TPOT", "TTFT", "E2E")
#: the shipped table, under this package
DATA_FILE = ("data", "served_errors.json")
_MAX_BYTES = 4 << 20  #: the data file is read whole; a larger one is not ours

#: how a calibration method weighs rows (:mod:`graphs.serving.sim.conformal`): each row alike,
#: each deployment alike, or each deployment by the square root of its row count
WEIGHTINGS = ("row", "deployment", "sqrt")
#: how a normalised method scores each group's residuals (:mod:`graphs.serving.sim.conformal`), by
#: the name's part: about its median, over its median absolute deviation (``normalised``), over half
#: its interquartile range (``normalised-iqr``), or not scaled at all (``shifted``); each with its
#: scale's key and its words in a basis line
NORMALISATIONS: dict[str, tuple[str, str]] = {
    "normalised": ("mad", "normalised by its group's spread"),
    "normalised-iqr": ("iqr", "normalised by its group's interquartile range"),
    "shifted": ("none", "shifted by its group's median"),
}
#: a weighting's words in a basis line
_WEIGHTING_WORDS = {
    "row": "each row weighing alike",
    "deployment": "each deployment weighing alike",
    "sqrt": "each deployment weighing by the square root of its rows",
}

#: one level of a lookup chain: whether its groups key on (framework, device, dense/MoE)
Level = tuple[bool, bool, bool]
#: the lookup chains a calibration method may use (:mod:`graphs.serving.sim.conformal`): the
#: first group of the chain with enough rows answers
CHAINS: dict[str, tuple[Level, ...]] = {
    "full": ((True, True, True), (True, False, True), (False, False, True), (False, False, False)),
    "engine": ((True, False, True), (False, False, False)),
    "metric": ((False, False, False),),
}

#: the E2E method that composes the run's TTFT and TPOT bands by its simulated split (module doc)
COMPOSED = "composed"

#: the regime buckets a regime-conditioned method (:mod:`graphs.serving.sim.conformal`) groups by
REGIMES = ("light", "queued")
#: the simulated queue share of TTFT (:attr:`graphs.serving.sim.simulator.SimResult.queue_share`)
#: at and above which a run is ``queued``: waiting before the first iteration is at least half of
#: its TTFT. Fixed a priori (before any residual was looked at by regime): the point where
#: waiting, not the request path and prefill, dominates the first token
QUEUE_SHARE_THRESHOLD = 0.5


def regime(queue_share: float) -> str:
    """The regime bucket of a simulated run from its queue share of TTFT (module doc):
    ``queued`` when ``queue_share >= QUEUE_SHARE_THRESHOLD``, else ``light``.

    Parameters
    ----------
    queue_share : float
        The simulated run's mean wait before its first iteration over its mean TTFT, in [0, 1]
        (:attr:`~graphs.serving.sim.simulator.SimResult.queue_share`).

    Returns
    -------
    str
        One of :data:`REGIMES`.

    Raises
    ------
    CostModelError
        When ``queue_share`` is not a number in [0, 1].

    >>> regime(0.1), regime(0.5), regime(0.93)
    ('light', 'queued', 'queued')
    """
    if not (isinstance(queue_share, float | int) and 0.0 <= queue_share <= 1.0):
        raise CostModelError(f"queue share {queue_share!r} not allowed; allowed: a fraction in [0, 1]")
    return "queued" if queue_share >= QUEUE_SHARE_THRESHOLD else "light"


def conformal_ranks(n: int, alpha: float = ALPHA) -> tuple[int, int] | None:
    """The 1-based ranks of the lower and upper split-conformal ends among ``n`` sorted residuals
    (module doc): ``(floor((n+1) alpha/2), ceil((n+1)(1-alpha/2)))``, or None when ``n`` is too
    small for the upper rank to exist.

    Parameters
    ----------
    n : int
        Calibration rows.
    alpha : float
        Miscoverage, split equally between the two tails.

    Returns
    -------
    tuple of int, or None

    >>> conformal_ranks(9), conformal_ranks(99), conformal_ranks(8)
    ((1, 9), (10, 90), None)
    """
    lo = math.floor((n + 1) * alpha / 2)
    hi = math.ceil((n + 1) * (1 - alpha / 2))
    if n < 1 or hi > n:
        return None
    return max(lo, 1), hi


@dataclass(frozen=True)
class ErrorGroup(Result):
    """One calibration group's residual summary (module doc; fitted by
    :func:`graphs.serving.sim.conformal.fit_groups`).

    ``low``/``high``: the conformal ends as factors on the simulated value (``e^{s_(lo)}`` and
    ``e^{s_(hi)}``); ``median_abs``: the median ``|y / y_hat - 1|``; ``n``: its rows;
    ``deployments``: how many deployments they come from; ``label``: what the group matched;
    ``regime``: the regime bucket its rows share (:func:`regime`; None: every regime)."""

    metric: str
    framework: str | None
    device: str | None
    moe: bool | None
    n: int
    deployments: int
    low: float
    high: float
    median_abs: float
    label: str
    regime: str | None = None

    @property
    def usable(self) -> bool:
        """Enough rows and deployments to stand for the next deployment (:data:`MIN_DEPLOYMENTS`)."""
        return self.n >= MIN_ROWS and self.deployments >= MIN_DEPLOYMENTS

    def interval(self, point: float) -> tuple[float, float]:
        """The calibrated P10-P90 interval of a simulated value ``point``: ``(point low,
        point high)``.

        Parameters
        ----------
        point : float
            The simulated value (the metric's unit: s, or tokens/s).

        Returns
        -------
        (float, float)
            Its P10 and P90 ends, in the same unit.
        """
        return point * self.low, point * self.high


def compose(ttft: ErrorGroup, tpot: ErrorGroup, ttft_share: float) -> ErrorGroup:
    """The E2E band of a run composed from its TTFT and TPOT groups by its simulated split (module
    doc, ``composed``): factors ``a l_T + (1 - a) l_P`` and ``a h_T + (1 - a) h_P`` on the
    simulated E2E, with ``a = TTFT_hat / E2E_hat``; expected error ``a m_T + (1 - a) m_P``.

    Parameters
    ----------
    ttft : ErrorGroup
        The TTFT group the run is judged by.
    tpot : ErrorGroup
        The TPOT group the run is judged by.
    ttft_share : float
        The run's simulated mean TTFT over its simulated mean E2E, in [0, 1].

    Returns
    -------
    ErrorGroup
        An E2E group (``n``: the rows of both parts; ``deployments``: the fewer of the two).

    Raises
    ------
    CostModelError
        When the groups are not a TTFT and a TPOT group, or ``ttft_share`` is not in [0, 1].

    >>> t = ErrorGroup("TTFT", None, None, None, 9, 3, 0.5, 2.0, 0.3, "TTFT")
    >>> p = ErrorGroup("TPOT", None, None, None, 9, 3, 0.9, 1.2, 0.1, "TPOT")
    >>> g = compose(t, p, 0.25)  # 0.25*0.5 + 0.75*0.9 = 0.8; 0.25*2 + 0.75*1.2 = 1.4
    >>> round(g.low, 6), round(g.high, 6), round(g.median_abs, 6)
    (0.8, 1.4, 0.15)
    """
    if (ttft.metric, tpot.metric) != ("TTFT", "TPOT"):
        raise CostModelError(
            f"an E2E band composes a TTFT and a TPOT group, not {ttft.metric} and {tpot.metric}"
        )
    if not (isinstance(ttft_share, float | int) and 0.0 <= ttft_share <= 1.0):
        raise CostModelError(f"TTFT share of E2E {ttft_share!r} not allowed; allowed: a fraction in [0, 1]")
    a, b = float(ttft_share), 1.0 - float(ttft_share)
    return ErrorGroup(
        metric="E2E",
        framework=ttft.framework if ttft.framework == tpot.framework else None,
        device=ttft.device if ttft.device == tpot.device else None,
        moe=ttft.moe if ttft.moe == tpot.moe else None,
        n=ttft.n + tpot.n,
        deployments=min(ttft.deployments, tpot.deployments),
        low=a * ttft.low + b * tpot.low,
        high=a * ttft.high + b * tpot.high,
        median_abs=a * ttft.median_abs + b * tpot.median_abs,
        label=(
            f"E2E composed at the run's simulated TTFT share {a:.2f} from {ttft.label} ({ttft.n} rows of "
            f"{ttft.deployments} deployments) and {tpot.label} ({tpot.n} rows of {tpot.deployments} deployments)"
        ),
    )


@dataclass(frozen=True)
class DeviceError(Result):
    """One measured device's held-out error when it was left out (module doc): ``median_pct``
    is the median |error| (%) of its ``rows``, ``kind`` its :func:`memory_kind`."""

    family: str
    device: str
    kind: str
    rows: int
    median_pct: float


@dataclass(frozen=True)
class GenerationError(Result):
    """One measured generation's held-out error when it was left out whole (module doc):
    ``median_pct`` and ``p90_pct`` are the median and P90 |error| (%) of the pooled ``rows`` of
    its ``devices`` of memory kind ``kind`` (:func:`memory_kind`), each predicted from fits on
    the other generations' devices."""

    family: str
    generation: str
    kind: str
    devices: tuple[str, ...]
    rows: int
    median_pct: float
    p90_pct: float


@dataclass(frozen=True)
class ServedErrors:
    """The calibration groups of :data:`DATA_FILE`, looked up from the most specific that has enough
    rows to the broadest (:meth:`like`)."""

    groups: tuple[ErrorGroup, ...]
    source: str  #: where the residuals come from (printed with every answer)
    heldout: str  #: the held-out split they leave out
    devices: tuple[DeviceError, ...] = ()  #: leave-one-device-out kernel errors (module doc)
    #: ``(metric, method name)``: the calibration each metric was fitted with
    #: (:class:`graphs.serving.sim.conformal.Method`; its chain is the lookup's); a metric not
    #: named is looked up along the ``full`` chain
    methods: tuple[tuple[str, str], ...] = ()
    #: ``(metric, framework, moe, deployments)``: how many calibration deployments each engine
    #: and dense/MoE kind has per metric, which says whether a run is like a validated one
    support: tuple[tuple[str, str, bool, int], ...] = ()
    generations: tuple[GenerationError, ...] = ()  #: leave-one-generation-out kernel errors (module doc)

    def method(self, metric: str) -> str:
        """The name of the method ``metric`` was calibrated with (``weighting/chain[/normalisation][/regime]``,
        :class:`graphs.serving.sim.conformal.Method`); ``row/full`` when the table names none.

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.

        Returns
        -------
        str
        """
        return dict(self.methods).get(metric, "row/full")

    def chain(self, metric: str) -> tuple[Level, ...]:
        """The lookup chain of ``metric``'s method (:data:`CHAINS`).

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.

        Returns
        -------
        tuple of Level
            The levels tried, most specific first: each whether the group keys on the
            framework, the device and the dense/MoE kind.

        Raises
        ------
        CostModelError
            When ``metric``'s band is composed (:meth:`composed`): its parts have the chains.
        """
        if self.composed(metric):
            raise CostModelError(f"{metric} is composed from TTFT and TPOT: it has no chain of its own")
        return CHAINS[self.method(metric).split("/")[1]]

    def method_words(self, metric: str) -> str:
        """``metric``'s method in words, as the answers print it.

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.

        Returns
        -------
        str
        """
        if self.composed(metric):
            return (
                f"composed from the run's TTFT band ({self.method_words('TTFT')}) and TPOT band "
                f"({self.method_words('TPOT')}) by its simulated split, their ends added (comonotone errors)"
            )
        weighting, _, rest = self.method(metric).partition("/")
        how = _WEIGHTING_WORDS.get(weighting, _WEIGHTING_WORDS["row"])
        norm = next(
            (f", {words}" for part, (_, words) in NORMALISATIONS.items() if part in rest.split("/")), ""
        )
        by = (
            f", within the run's regime (simulated queue share of TTFT below or at least "
            f"{QUEUE_SHARE_THRESHOLD:g})"
            if self.conditioned(metric)
            else ""
        )
        return f"conformal, {how}{norm}{by}"

    def composed(self, metric: str) -> bool:
        """Whether ``metric``'s band is composed from the run's TTFT and TPOT bands (:data:`COMPOSED`,
        E2E only; module doc).

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.

        Returns
        -------
        bool
        """
        return self.method(metric) == COMPOSED

    def conditioned(self, metric: str) -> bool:
        """Whether ``metric``'s method groups by the run's regime (:func:`regime`): its name ends
        in ``/regime``; a composed band (:meth:`composed`) is when either part's method is, since
        it then needs the run's queue share too.

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.

        Returns
        -------
        bool
        """
        if self.composed(metric):
            return self.conditioned("TTFT") or self.conditioned("TPOT")
        return self.method(metric).endswith("/regime")

    def neighbour(self, family: str, hw: Hardware) -> str | None:
        """One line: the expected error of ``family``'s kernels priced from other devices' fits
        on ``hw`` (module doc), or None when no device was left out for that family.

        Parameters
        ----------
        family : str
            The measured family (``gemm``, ``context_attention``, ``generation_attention``, ...).
        hw : Hardware
            The unmeasured device (its description gives its memory kind, its vendor whether
            any device of its make was measured).

        Returns
        -------
        str or None
        """
        # the hardware catalog (sympy) loads on use: reading the shipped table does not need it
        from costmodel.hardware import get_device

        device = hw.name
        if self.new_generation(family, hw):
            return self._generation_line(family, hw)
        found = self._pool(family, hw)
        if found is None:
            return None
        pool, who = found
        worst = max(pool, key=lambda d: d.median_pct)
        med = statistics.median(d.median_pct for d in pool)
        text = (
            f"{family} kernels priced from other devices' fits on {device}: expected error +-{med:.0f} % "
            f"(median of the held-out errors of {who}, each left out in turn; worst {worst.median_pct:.0f} % "
            f"on {worst.device})"
        )
        makes = {get_device(d.device).vendor for d in pool}
        if hw.vendor not in makes:
            text += f"; no {hw.vendor} device is measured, so a new architecture may be further off"
        return text

    def _pool(self, family: str, hw: Hardware) -> tuple[list[DeviceError], str] | None:
        """The left-out devices ``hw`` is judged by for ``family``: those of its memory kind when
        any was measured, else all; with the words that say which."""
        rows = [d for d in self.devices if d.family == family and d.device != hw.name]
        if not rows:
            return None
        kind = memory_kind(hw.description)
        same = [d for d in rows if d.kind == kind]
        if same:
            return same, f"{len(same)} measured {kind} devices"
        return rows, f"all {len(rows)} measured devices (none of {kind} memory)"

    def neighbour_pct(self, family: str, hw: Hardware) -> float | None:
        """The number :meth:`neighbour` states: the median over the pooled left-out devices (of a
        new generation: the left-out generations) of their median held-out error (%) for
        ``family``; None when nothing was left out.

        Parameters
        ----------
        family : str
            The measured family (``gemm``, ``context_attention``, ...).
        hw : Hardware
            The unmeasured device.

        Returns
        -------
        float or None
            The expected error (%), or None.
        """
        if self.new_generation(family, hw):
            gens = self._generation_pool(family, hw)
            return None if gens is None else statistics.median(g.median_pct for g in gens[0])
        found = self._pool(family, hw)
        return None if found is None else statistics.median(d.median_pct for d in found[0])

    def neighbour_basis(self, family: str, hw: Hardware) -> str:
        """Which held-out split :meth:`neighbour_pct` reads for ``hw``: ``leave-one-generation-out``
        or ``leave-one-device-out``.

        Parameters
        ----------
        family : str
            The measured family.
        hw : Hardware
            The device asked about.

        Returns
        -------
        str
        """
        return "leave-one-generation-out" if self.new_generation(family, hw) else "leave-one-device-out"

    def new_generation(self, family: str, hw: Hardware) -> bool:
        """Whether ``hw``'s generation (:attr:`~costmodel.hardware.Hardware.generation`; not given
        counts as new) has no device measured for ``family`` while the table holds
        leave-one-generation-out errors for it (module doc).

        Parameters
        ----------
        family : str
            The measured family.
        hw : Hardware
            The device asked about.

        Returns
        -------
        bool
        """
        from costmodel.hardware import get_device

        if not any(g.family == family for g in self.generations):
            return False
        measured = {get_device(d.device).generation for d in self.devices if d.family == family}
        measured |= {g.generation for g in self.generations if g.family == family}
        return not hw.generation or hw.generation not in measured

    def _generation_pool(self, family: str, hw: Hardware) -> tuple[list[GenerationError], str] | None:
        """The left-out generations a new generation's ``hw`` is judged by for ``family``: those of
        its memory kind when any was left out, else all; with the words that say which."""
        rows = [g for g in self.generations if g.family == family]
        if not rows:
            return None
        kind = memory_kind(hw.description)
        same = [g for g in rows if g.kind == kind]
        if same:
            return same, f"{len(same)} held-out {kind} generations"
        return rows, f"all {len(rows)} held-out generations (none of {kind} memory)"

    def _generation_line(self, family: str, hw: Hardware) -> str | None:
        """:meth:`neighbour`'s line for a device of a new generation (module doc)."""
        from costmodel.hardware import get_device

        found = self._generation_pool(family, hw)
        if found is None:
            return None
        pool, who = found
        med = statistics.median(g.median_pct for g in pool)
        worst = max(pool, key=lambda g: g.median_pct)
        each = ", ".join(f"{g.generation} {g.median_pct:.0f} %" for g in pool)
        gen = hw.generation or "its architecture not in the catalog"
        text = (
            f"{family} kernels neighbour-priced on {hw.name}, a new generation ({gen}: no device of it "
            f"measured): expected error +-{med:.0f} % from {who} (median of each generation's median "
            f"error with all its devices left out of the fits: {each}; worst {worst.generation}, P90 "
            f"{worst.p90_pct:.0f} % over {', '.join(worst.devices)})"
        )
        makes = {get_device(d).vendor for g in pool for d in g.devices}
        if hw.vendor not in makes:
            text += f"; no {hw.vendor} device is measured, so its kernels may be further off still"
        return text

    def covers(self, metric: str) -> bool:
        """Whether ``metric`` has a calibrated group at all (E2E had too few validation rows).

        Parameters
        ----------
        metric : str
            A metric group's name (one of :data:`METRIC_GROUPS` to be True).

        Returns
        -------
        bool
        """
        if self.composed(metric):
            return self.covers("TTFT") and self.covers("TPOT")
        return any(g.metric == metric and g.usable for g in self.groups)

    def like(
        self,
        metric: str,
        framework: str,
        device: str,
        moe: bool,
        queue_share: float | None = None,
        ttft_share: float | None = None,
    ) -> tuple[ErrorGroup, bool]:
        """The group a run is judged by, and whether it is like a validated deployment.

        Tried along the metric's chain (:meth:`chain`; ``full``: (metric, framework, device,
        moe), (metric, framework, moe), (metric, moe), (metric)); the first group with at least
        :data:`MIN_ROWS` rows of :data:`MIN_DEPLOYMENTS` deployments is taken. A metric whose
        method is regime-conditioned (:meth:`conditioned`) tries the chain's groups of the run's
        regime (:func:`regime` of ``queue_share``) and then the metric's group of every regime.
        A metric whose band is composed (:meth:`composed`) gets :func:`compose` of the run's TTFT
        and TPOT groups, each found so, at its ``ttft_share``; it is like a validated deployment
        when both parts are. A run is *like* a
        validated deployment when at least :data:`MIN_DEPLOYMENTS` calibration deployments share
        its metric, framework and dense/MoE kind (:attr:`support`; without it, when the group
        found keys on its framework and kind).

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.
        framework : str
            The engine framework whose kernels and profile priced it (``vllm``, ``trtllm``, ...).
        device : str
            The catalog device name (``h100-sxm`` ...).
        moe : bool
            Whether the model routes tokens to experts.
        queue_share : float, optional
            The run's simulated queue share of TTFT
            (:attr:`~graphs.serving.sim.simulator.SimResult.queue_share`); needed when the
            metric's method is regime-conditioned.
        ttft_share : float, optional
            The run's simulated mean TTFT over its simulated mean E2E; needed when the metric's
            band is composed.

        Returns
        -------
        (ErrorGroup, bool)

        Raises
        ------
        CostModelError
            When ``metric`` is not calibrated, its method is regime-conditioned and no
            ``queue_share`` is given, or its band is composed and no ``ttft_share`` is given.
        """
        if metric not in METRIC_GROUPS:
            raise CostModelError(f"metric {metric!r} not calibrated; allowed: {', '.join(METRIC_GROUPS)}")
        if self.composed(metric):
            if ttft_share is None:
                raise CostModelError(
                    f"{metric} is composed from TTFT and TPOT: the run's simulated TTFT share of E2E is needed"
                )
            t, t_like = self.like("TTFT", framework, device, moe, queue_share)
            p, p_like = self.like("TPOT", framework, device, moe, queue_share)
            return compose(t, p, ttft_share), t_like and p_like
        levels: list[tuple[Level, str | None]] = [(level, None) for level in self.chain(metric)]
        if self.conditioned(metric):
            if queue_share is None:
                raise CostModelError(
                    f"{metric} is calibrated per regime ({self.method(metric)}): the run's simulated "
                    "queue share of TTFT is needed"
                )
            bucket = regime(queue_share)
            levels = [(level, bucket) for level, _ in levels] + [((False, False, False), None)]
        support = {(m, f, k): n for m, f, k, n in self.support}
        for (use_fw, use_dev, use_moe), bucket_of in levels:
            fw, dev = (framework if use_fw else None), (device if use_dev else None)
            key = (metric, fw, dev, moe if use_moe else None, bucket_of)
            for g in self.groups:
                if (g.metric, g.framework, g.device, g.moe, g.regime) == key and g.usable:
                    if self.support:
                        return g, support.get((metric, framework, moe), 0) >= MIN_DEPLOYMENTS
                    return g, use_fw and use_moe
        raise CostModelError(f"{metric} is not calibrated: fewer than {MIN_ROWS} validation rows")

    def statement(
        self,
        metric: str,
        framework: str,
        device: str,
        moe: bool,
        queue_share: float | None = None,
        ttft_share: float | None = None,
    ) -> str:
        """One line: the expected error of ``metric`` on deployments like this one.

        Parameters
        ----------
        metric : str
            One of :data:`METRIC_GROUPS`.
        framework : str
            The engine framework that priced the run (``vllm``, ``trtllm``, ...).
        device : str
            The catalog device name.
        moe : bool
            Whether the model routes tokens to experts.
        queue_share : float, optional
            The run's simulated queue share of TTFT (:meth:`like`).
        ttft_share : float, optional
            The run's simulated TTFT share of E2E (:meth:`like`; a composed band).

        Returns
        -------
        str
            The line (median |error| in %), with a warning when the run is unlike the validated
            deployments.

        Raises
        ------
        CostModelError
            When ``metric`` is not calibrated (:meth:`like`).
        """
        g, like = self.like(metric, framework, device, moe, queue_share, ttft_share)
        weighting = self.method(metric).partition("/")[0]
        alike = f", {_WEIGHTING_WORDS[weighting]}" if weighting in ("deployment", "sqrt") else ""
        if self.composed(metric):
            text = (
                f"expected {metric} error on deployments like this: +-{100 * g.median_abs:.0f} % ({g.label})"
            )
        else:
            text = (
                f"expected {metric} error on deployments like this: +-{100 * g.median_abs:.0f} % "
                f"(median over {g.n} validation rows of {g.deployments} deployments{alike}: {g.label})"
            )
        if not like:
            kind = "MoE" if moe else "dense"
            text += (
                f"; fewer than {MIN_DEPLOYMENTS} validated {framework} {kind} deployments: "
                "this one is unlike what was validated"
            )
        return text


def _group(d: dict[str, Any]) -> ErrorGroup:
    """One group of the data file, every field checked."""
    try:
        g = ErrorGroup(
            metric=str(d["metric"]),
            framework=None if d["framework"] is None else str(d["framework"]),
            device=None if d["device"] is None else str(d["device"]),
            moe=None if d["moe"] is None else bool(d["moe"]),
            n=int(d["n"]),
            deployments=int(d["deployments"]),
            low=float(d["low"]),
            high=float(d["high"]),
            median_abs=float(d["median_abs"]),
            label=str(d["label"])[:200],
            regime=None if d.get("regime") is None else str(d["regime"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CostModelError(f"served_errors.json: a group is malformed ({exc})") from exc
    ok = (
        g.metric in METRIC_GROUPS
        and g.n >= 1
        and 0 < g.low <= g.high < 1e3
        and math.isfinite(g.median_abs)
        and g.median_abs >= 0
        and (g.regime is None or g.regime in REGIMES)
    )
    if not ok:
        raise CostModelError(f"served_errors.json: group {g.label!r} out of range")
    return g


def parse(text: str) -> ServedErrors:
    """:class:`ServedErrors` from the data file's text (strict JSON, every group checked).

    Parameters
    ----------
    text : str
        The JSON text of :data:`DATA_FILE` (or a file of its form).

    Returns
    -------
    ServedErrors

    Raises
    ------
    CostModelError
        When the text is not strict JSON, lacks the ``groups`` list, or an entry (group, device,
        generation, method, support) is malformed or out of range.
    """
    try:
        d = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as exc:
        raise CostModelError(f"served_errors.json is not valid JSON ({exc})") from exc
    if not isinstance(d, dict) or not isinstance(d.get("groups"), list):
        raise CostModelError("served_errors.json: expected an object with a 'groups' list")
    devices = d.get("devices", [])
    if not isinstance(devices, list):
        raise CostModelError("served_errors.json: 'devices' must be a list")
    generations = d.get("generations", [])
    if not isinstance(generations, list):
        raise CostModelError("served_errors.json: 'generations' must be a list")
    return ServedErrors(
        tuple(_group(g) for g in d["groups"]),
        str(d.get("source", ""))[:500],
        str(d.get("heldout", ""))[:500],
        tuple(_device(x) for x in devices),
        _methods(d.get("methods")),
        tuple(_support(x) for x in _list(d, "support")),
        tuple(_generation(x) for x in generations),
    )


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key)
    if not isinstance(v, list):
        raise CostModelError(f"served_errors.json: {key!r} must be a list")
    return v


def _methods(v: Any) -> tuple[tuple[str, str], ...]:
    """Each metric's method name (``weighting/chain[/normalisation][/regime]``, the normalisation a key of
    :data:`NORMALISATIONS`, or E2E's ``composed``), checked."""
    if not isinstance(v, dict):
        raise CostModelError("served_errors.json: 'methods' must map each metric to its method")
    out = []
    for metric, name in sorted(v.items()):
        parts = str(name).split("/")
        ok = (metric == "E2E" and name == COMPOSED) or (
            metric in METRIC_GROUPS
            and len(parts) in (2, 3, 4)
            and parts[0] in WEIGHTINGS
            and parts[1] in CHAINS
            and parts[2:]
            in ([], ["regime"], *([n] for n in NORMALISATIONS), *([n, "regime"] for n in NORMALISATIONS))
        )
        if not ok:
            what = f"method {str(name)[:40]!r} of {str(metric)[:20]!r}"
            raise CostModelError(f"served_errors.json: {what} unknown")
        out.append((str(metric), str(name)))
    return tuple(out)


def _support(x: Any) -> tuple[str, str, bool, int]:
    """One ``[metric, framework, moe, deployments]`` entry, checked."""
    try:
        metric, fw, moe, n = x
        out = (str(metric), str(fw), bool(moe), int(n))
    except (TypeError, ValueError) as exc:
        raise CostModelError(f"served_errors.json: a support entry is malformed ({exc})") from exc
    if out[0] not in METRIC_GROUPS or out[3] < 1:
        raise CostModelError(f"served_errors.json: support entry {out[:3]} out of range")
    return out


def _device(d: Any) -> DeviceError:
    """One leave-one-device-out entry of the data file, every field checked."""
    try:
        e = DeviceError(
            str(d["family"]), str(d["device"]), str(d["kind"]), int(d["rows"]), float(d["median_pct"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CostModelError(f"served_errors.json: a device entry is malformed ({exc})") from exc
    if not (e.rows >= 1 and math.isfinite(e.median_pct) and 0 <= e.median_pct < 1e4):
        raise CostModelError(f"served_errors.json: device entry {e.family}/{e.device} out of range")
    return e


def _generation(d: Any) -> GenerationError:
    """One leave-one-generation-out entry of the data file, every field checked."""
    try:
        devices = d["devices"]
        if not isinstance(devices, list) or not devices or len(devices) > 64:
            raise ValueError("'devices' must be a non-empty list")
        e = GenerationError(
            str(d["family"]),
            str(d["generation"])[:80],
            str(d["kind"]),
            tuple(str(x)[:80] for x in devices),
            int(d["rows"]),
            float(d["median_pct"]),
            float(d["p90_pct"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CostModelError(f"served_errors.json: a generation entry is malformed ({exc})") from exc
    ok = e.rows >= 1 and all(math.isfinite(v) and 0 <= v < 1e4 for v in (e.median_pct, e.p90_pct))
    if not (ok and e.median_pct <= e.p90_pct):
        raise CostModelError(f"served_errors.json: generation entry {e.family}/{e.generation} out of range")
    return e


@cache
def served_errors() -> ServedErrors:
    """The shipped calibration (:data:`DATA_FILE`), read once per process.

    Returns
    -------
    ServedErrors

    Raises
    ------
    CostModelError
        When the shipped file is larger than 4 MiB or does not parse (:func:`parse`).
    """
    data = resources.files(__package__).joinpath(*DATA_FILE)
    raw = data.read_bytes()
    if len(raw) > _MAX_BYTES:
        raise CostModelError("served_errors.json is larger than a calibration table can be")
    return parse(raw.decode("utf-8"))
