"""Skewed expert routing: which experts a MoE layer's tokens go to, and the EP rank that waits.

A routing distribution gives each expert ``i`` of ``E`` its *inclusion probability*
``pi_i``: the chance that one token routes to it. A top-``k`` router sends every token to ``k``
distinct experts, so ``sum_i pi_i = k`` and ``pi_i <= 1``. From relative popularities ``w_i``
(Zipf: ``w_i = i^{-s}``, ``i = 1..E``, the hottest first; or a measured histogram of how many
token slots each expert received) the inclusion probabilities are proportional to ``w`` and
capped at one:

.. math::

    \\pi_i = \\min(1, c\\, w_i), \\qquad c:\\ \\sum_i \\min(1, c\\, w_i) = k

(water filling: an expert every token already picks takes no more; the excess goes to the
others in proportion to ``w``). Uniform routing (``s = 0``) is ``pi_i = k / E``. Of ``T``
tokens, expert ``i`` receives ``T pi_i`` in expectation, and is touched at all (its weights
read) with probability ``1 - (1 - pi_i)^T`` (tokens route independently).

Under expert parallelism over ``ep`` ranks the step waits for the busiest rank. A placement
puts experts on ranks: ``contiguous`` (experts ``r E/ep .. (r+1) E/ep - 1`` on rank ``r``, the
default of the engines' static layout) or ``balanced`` (the hottest first, each onto the least
loaded rank: LPT, Graham 1969). ``replicate=n`` gives the ``n`` hottest experts a second copy on
the least loaded other rank (as DeepSeek-V3's redundant experts do for inference), each copy
taking half its tokens. The busiest rank ``R`` (the most routed rows) then runs

* a share ``L_R = sum_{i in R} pi_i / k`` of the layer's ``T k`` routed rows (FLOPs and
  activation traffic; balanced: ``1/ep``);
* the weights of its touched copies: ``sum_{i in R} (1 - (1 - pi_i / c_i)^T)`` experts'
  ``K N`` matrices (``c_i`` copies of expert ``i``);
* and receives ``L_R ep`` times the balanced all-to-all volume (as ``T -> inf``: below).

These are expectations of the busiest rank chosen *before* the step. With ``T`` finite
tokens per step (decode: ``T = B``) the step waits for whichever rank is busiest *in that
step*: even uniform routing leaves it above the mean (:func:`busiest_rank`, below, which the
expert nodes cost: the default EP scaling of :func:`graphs.serving.step.compiled.compiled_step`
as well). Per step, let ``X_r`` be rank ``r``'s routed rows (token-expert assignments) and
``U_r`` its distinct touched expert copies (the weights it reads). Rank ``r`` holds copies
``i`` of inclusion probability ``p_i`` (``n_r`` copies); over ``T`` independent tokens

.. math::

    \\mathbb{E} X_r = T \\sum_{i \\in r} p_i, \\qquad
    \\operatorname{Var} X_r \\approx T \\sum_{i \\in r} p_i (1 - p_i)\\,\\frac{E - n_r}{E - 1},
    \\qquad
    \\mathbb{E} U_r = \\sum_{i \\in r} q_i, \\quad
    \\operatorname{Var} U_r \\approx \\sum_{i \\in r} q_i (1 - q_i)\\,\\frac{E - n_r}{E - 1},

with ``q_i = 1 - (1 - p_i)^T``. The factor ``(E - n_r)/(E - 1)`` is the finite-population
correction of a token's ``k`` *distinct* picks: for uniform routing ``X_r`` per token is
hypergeometric (``k`` draws from ``E``, ``n_r = E/ep`` marked), so the row variance is exact
there (and at ``T = 1``, where ``U_r = X_r``). The rows of all ranks sum to ``T k``, so the
average correlation between two ranks is ``-1/(ep - 1)`` and the spread that matters for the
maximum is ``s_r^2 = Var * ep / (ep - 1)``. For ``n`` exchangeable normal ranks with mean
``mu`` and that spread, ``E max = mu + e_n s`` with ``e_n = E max`` of ``n`` standard
normals (Tippett 1925; ``e_2 = 1/sqrt(pi)``, ``e_8 = 1.4236``). Ranks of unequal load (skew,
LPT, replicas) are grouped: sorted by mean rows, the ``j`` busiest are at least as busy as the
``j``-th, so

.. math::

    \\mathbb{E}\\max_r X_r \\approx \\min\\Big(T \\min(k, n_\\max),\\ \\max\\big(1,\\ \\max_j
    \\big[\\mu_{(j)} + e_j \\sqrt{\\overline{s^2}_{(1..j)}}\\big]\\big)\\Big)

(``j = 1`` is the busiest mean, the skew term; ``j = ep`` the balanced fluctuation; at least
one row when ``T >= 1``, at most ``min(k, n)`` of every token's); ``U`` likewise, capped at the
``n_max`` copies a rank holds, in the same rank order, each group term with the ``j``-th
rank's own spread (a short form: the group mean would sum every rank's powers). Only the group
terms that are the largest somewhere on a grid of token counts (1..64, then powers of two to
``2^24``) are written out. Units: rows and experts per step per
MoE layer. Limits: ``T -> inf`` gives ``E max X / (T k) -> max_r L_r`` (the mean model
above) and ``U -> n``; ``T = 1, k = 2, E = 8, ep = 2``: exact enumeration gives
``E max = 10/7 = 1.429``, the formula ``1 + sqrt(6/7)/sqrt(pi) = 1.522`` (+6.5 %). Against
a seeded Monte Carlo of top-``k`` routing with these inclusion probabilities
(``tests/test_routing_max.py``; 8 and 64 experts, ep 2 to 8, T 1 to 256): uniform routing
within 7 % at every ``T``, skewed (Zipf 1, 2; LPT; replicas) within 10 % for ``T >= 16``
and within 25 % below (the grouping underestimates near-tied ranks at ``T <= 4``). The roofline then takes each term's own busiest
rank (FLOPs and activation traffic from ``E max X``, weight reads from ``E max U``): an upper
bound on the busiest rank's bytes by subadditivity of the max, tight when one rank is busiest
in both (rows and touched experts rise together).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.graph import COST
from costmodel.keys import BYTES, EXPERT_PLAN, KIND, PARAMS, ROLE, Level, NodeKind, Role
from costmodel.results import Result

__all__ = [
    "devices_reached",
    "Routing",
    "RankLoad",
    "RankMax",
    "parse_routing",
    "as_routing",
    "inclusion",
    "placement",
    "rank_load",
    "busiest_rank",
    "normal_max",
    "skew_experts",
    "PLACEMENTS",
]

PLACEMENTS = ("contiguous", "balanced")
#: Zipf exponents accepted
EXPONENT_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class Routing(Result):
    """A routing distribution (``uniform``, ``zipf`` with ``exponent``, or a measured
    ``histogram`` of ``weights``) and the EP placement plan option (module doc)."""

    kind: str = "uniform"
    exponent: float = 0.0
    weights: tuple[float, ...] = ()
    placement: str = "contiguous"
    replicate: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "zipf", "histogram"):
            raise CostModelError(
                f"routing {self.kind!r} not allowed; allowed: uniform, zipf:S, hist:W1,W2,..."
            )
        lo, hi = EXPONENT_RANGE
        if not (isinstance(self.exponent, int | float) and lo <= self.exponent <= hi):
            raise CostModelError(f"zipf exponent must be in [{lo:g}, {hi:g}], got {self.exponent!r}")
        if self.kind == "histogram" and (
            not self.weights
            or any(not (math.isfinite(w) and w >= 0) for w in self.weights)
            or sum(self.weights) <= 0
        ):
            shown = ",".join(f"{w:g}" for w in self.weights[:8]) + ("..." if len(self.weights) > 8 else "")
            raise CostModelError(
                f"--routing hist: needs finite non-negative counts, not all zero; got hist:{shown}"
            )
        if self.placement not in PLACEMENTS:
            raise CostModelError(
                f"placement {self.placement!r} not allowed; allowed: {', '.join(PLACEMENTS)}"
            )
        if isinstance(self.replicate, bool) or not isinstance(self.replicate, int) or self.replicate < 0:
            raise CostModelError(f"replicate must be a whole number >= 0, got {self.replicate!r}")

    @property
    def is_default(self) -> bool:
        """Uniform, contiguous, no replicas: the engine's default EP scaling, unchanged."""
        balanced = self.kind == "uniform" or (self.kind == "zipf" and self.exponent == 0)
        return balanced and self.placement == "contiguous" and self.replicate == 0

    @property
    def label(self) -> str:
        base = {"uniform": "uniform", "zipf": f"zipf:{self.exponent:g}", "histogram": "histogram"}[self.kind]
        extra = "" if self.placement == "contiguous" else f", {self.placement} placement"
        return base + extra + (f", {self.replicate} hot expert(s) replicated" if self.replicate else "")


def parse_routing(text: str, placement: str = "contiguous", replicate: int = 0) -> Routing:
    """``uniform``, ``zipf:S`` or ``hist:C1,C2,...`` (one count per expert) -> :class:`Routing`.

    Parameters
    ----------
    text : str
        ``uniform``, ``zipf:S`` (exponent ``S >= 0``) or ``hist:C1,C2,...`` (token counts, one per
        expert).
    placement : str
        ``contiguous`` (default) or ``balanced`` (LPT over the ranks).
    replicate : int
        How many of the hottest experts get a second copy (0: none).

    Returns
    -------
    Routing

    Raises
    ------
    CostModelError
        When ``text`` is none of the three forms or a number in it is out of range.
    """
    kind, _, arg = text.strip().partition(":")
    values: list[float] | None = None
    try:
        values = [float(x) for x in arg.split(",")] if arg else []
    except ValueError:
        values = None
    if kind == "uniform" and values == []:
        return Routing("uniform", placement=placement, replicate=replicate)
    if kind == "zipf" and values is not None and len(values) == 1:
        return Routing("zipf", values[0], placement=placement, replicate=replicate)
    if kind == "hist" and values:
        return Routing("histogram", 0.0, tuple(values), placement, replicate)
    raise CostModelError(
        f"--routing must be uniform, zipf:S or hist:C1,C2,... (one count per expert), got {text[:60]!r}"
    )


def as_routing(routing: object) -> Routing | None:
    """A step's ``routing`` argument: None, a :class:`Routing`, or its command-line text
    (``"zipf:1.2"``, parsed by :func:`parse_routing`), as ``--routing`` takes it.

    Parameters
    ----------
    routing : Routing, str or None
        What the caller passed.

    Returns
    -------
    Routing or None
        The routing (None: uniform, the default).

    Raises
    ------
    CostModelError
        When ``routing`` is another type (a string was an AttributeError: 'str' object has no
        attribute 'is_default'), or text none of :func:`parse_routing`'s forms.

    >>> as_routing("zipf:1.2").label == parse_routing("zipf:1.2").label
    True
    """
    if routing is None or isinstance(routing, Routing):
        return routing
    if isinstance(routing, str):
        return parse_routing(routing)
    raise CostModelError(
        f"routing must be a Routing (parse_routing('zipf:1.2')) or its text, got {type(routing).__name__} "
        f"{routing!r:.40}"
    )


def inclusion(routing: Routing, experts: int, top_k: int) -> np.ndarray:
    """``pi_i`` for each expert, hottest first for Zipf (module doc: water filling).

    Parameters
    ----------
    routing : Routing
        The routing distribution.
    experts : int
        Routed experts ``E`` of the layer.
    top_k : int
        Experts ``k`` each token picks.

    Returns
    -------
    numpy.ndarray
        ``pi_i``, shape ``(E,)``, each in ``[0, 1]``, summing to ``k``.

    Raises
    ------
    CostModelError
        When a histogram's length is not ``E`` or fewer than ``k`` experts receive tokens.
    """
    if routing.kind == "histogram":
        if len(routing.weights) != experts:
            raise CostModelError(
                f"the routing histogram has {len(routing.weights)} counts for {experts} experts"
            )
        w = np.array(routing.weights, dtype=float)
        # only the ratios matter (pi is proportional to w): scale the hottest to 1 so that huge
        # counts (hist:1e308,1e308,...) cannot overflow the sums below to inf (every pi 0, a
        # step priced below its roofline); counts are finite and the largest > 0 (Routing checks)
        w = w / w.max()
        if not np.isfinite(w).all():  # pragma: no cover - finite counts over a finite max > 0
            raise CostModelError("--routing hist: counts are not finite after scaling by the largest")
    elif routing.kind == "zipf":
        w = np.arange(1, experts + 1, dtype=float) ** -routing.exponent
    else:
        w = np.ones(experts)
    if np.count_nonzero(w) < top_k:
        raise CostModelError(f"top-{top_k} routing needs at least {top_k} experts with tokens")
    pi = np.zeros(experts)
    capped = np.zeros(experts, dtype=bool)
    for _ in range(experts):  # each pass caps at least one more expert, or stops
        free = ~capped
        c = (top_k - capped.sum()) / w[free].sum()
        pi[free] = c * w[free]
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return pi


def devices_reached(experts: int, top_k: int, devices: int) -> float:
    r"""Expected number of the ``G`` devices a token's ``k`` distinct experts land on, the ``E``
    experts placed ``E / G`` per device and the ``k`` drawn uniformly without replacement:

    .. math:: \bar r = G \left(1 - \binom{E - E/G}{k} \Big/ \binom{E}{k}\right)

    (a device is missed when all ``k`` experts fall among the others). A dispatch that sends a
    token once per device (DeepEP, pplx) moves ``r`` copies (the mean above) of it, not ``k``.

    Parameters
    ----------
    experts : int
        Routed experts ``E``.
    top_k : int
        Distinct experts ``k`` per token.
    devices : int
        Devices ``G`` the experts are spread over, ``E / G`` each.

    Returns
    -------
    float
        Expected devices ``r`` a token reaches, in ``[1, min(k, G)]``.

    Raises
    ------
    CostModelError
        When ``E`` does not split evenly over ``G`` devices.

    >>> round(devices_reached(128, 8, 2), 4)  # Qwen3-30B-A3B over 2: 2 (1 - C(64,8)/C(128,8))
    1.9938
    >>> devices_reached(8, 2, 8)  # Mixtral over 8 devices: its 2 experts on 2 devices
    2.0
    """
    if devices <= 1:
        return 1.0
    if experts % devices:
        raise CostModelError(f"the {experts} experts do not split evenly over {devices} devices")
    per = experts / devices
    miss = math.comb(int(experts - per), top_k) / math.comb(experts, top_k) if experts - per >= top_k else 0.0
    return devices * (1.0 - miss)


@dataclass(frozen=True)
class RankLoad(Result):
    """The busiest EP rank under a routing: its share of the routed rows and its copies."""

    rank: int
    row_share: float  #: L_R: of the layer's T k routed rows (balanced: 1 / ep)
    copies: tuple[tuple[int, float], ...]  #: (expert, inclusion probability of this copy) on the rank
    hottest_expert_tokens: float  #: pi_max: expected tokens of the hottest expert per token routed
    resident_experts: int  #: expert copies the rank holds (replicas add weights)


def placement(routing: Routing, experts: int, top_k: int, ep: int) -> list[list[tuple[int, float]]]:
    """Each EP rank's expert copies as ``(expert, inclusion probability of this copy)`` (module doc).

    Parameters
    ----------
    routing : Routing
        The routing distribution and its placement option (``contiguous`` or ``balanced``, and
        ``replicate``).
    experts : int
        Routed experts ``E``.
    top_k : int
        Experts ``k`` per token.
    ep : int
        Expert-parallel ranks.

    Returns
    -------
    list of list of (int, float)
        For each rank, its expert copies as ``(expert index, inclusion probability of the copy)``.

    Raises
    ------
    CostModelError
        When ``ep`` does not divide ``E``, or ``replicate`` needs ``ep >= 2`` or exceeds ``E``.
    """
    if experts % ep:
        raise CostModelError(f"ep ({ep}) must divide the {experts} experts")
    if routing.replicate > experts or (routing.replicate and ep < 2):
        raise CostModelError(f"replicate ({routing.replicate}) needs ep >= 2 and at most {experts} experts")
    pi = inclusion(routing, experts, top_k)
    per = experts // ep
    ranks: list[list[tuple[int, float]]] = [[] for _ in range(ep)]
    order = np.argsort(-pi, kind="stable")
    copies = {int(i): (2 if j < routing.replicate else 1) for j, i in enumerate(order)}
    if routing.placement == "contiguous":
        for i in range(experts):
            ranks[i // per].append((i, pi[i] / copies[i]))
    else:
        load = np.zeros(ep)
        for i in order:  # LPT: the hottest first, each onto the least loaded rank with room
            room = [r for r in range(ep) if len(ranks[r]) < per]
            r = min(room, key=lambda x: (load[x], x))
            ranks[r].append((int(i), pi[i] / copies[int(i)]))
            load[r] += pi[i] / copies[int(i)]
    for i in order[: routing.replicate]:  # the second copy: the least loaded other rank
        home = next(r for r in range(ep) if any(e == i for e, _ in ranks[r]))
        load_now = [sum(p for _, p in ranks[r]) for r in range(ep)]
        r = min((x for x in range(ep) if x != home), key=lambda x: (load_now[x], x))
        ranks[r].append((int(i), pi[i] / 2))
    return ranks


def rank_load(routing: Routing, experts: int, top_k: int, ep: int) -> RankLoad:
    """Place the experts (module doc) and return the busiest rank's load.

    Parameters
    ----------
    routing : Routing
        The routing distribution and placement.
    experts : int
        Routed experts ``E``.
    top_k : int
        Experts ``k`` per token.
    ep : int
        Expert-parallel ranks.

    Returns
    -------
    RankLoad
        The busiest rank's share of the routed rows and its expert copies.
    """
    ranks = placement(routing, experts, top_k, ep)
    pi = inclusion(routing, experts, top_k)
    loads = [sum(p for _, p in rk) for rk in ranks]
    hot = int(np.argmax(loads))
    return RankLoad(hot, loads[hot] / top_k, tuple(ranks[hot]), float(pi.max()), len(ranks[hot]))


@functools.cache
def normal_max(n: int) -> float:
    """``e_n = E max(Z_1..Z_n)`` of ``n`` independent standard normals (Tippett 1925).

    .. math::

        e_n = \\int_0^\\infty \\big(1 - \\Phi(x)^n - \\Phi(-x)^n\\big)\\,dx

    (``E Z = int_0^inf P(Z > x) - P(Z < -x) dx``) by the trapezoid rule on ``[0, 12]``, step
    ``6e-5`` (error below ``1e-9``; ``e_3 = 3 / (2 sqrt(pi))``, ``e_8 = 1.423600``: Harter 1961).

    Parameters
    ----------
    n : int
        How many independent standard normals (ranks), ``>= 1``.

    Returns
    -------
    float
        ``e_n``, in standard deviations (``e_1 = 0``).

    Raises
    ------
    CostModelError
        When ``n < 1``.

    >>> round(normal_max(2) * math.sqrt(math.pi), 6)
    1.0
    """
    if n < 1:
        raise CostModelError(f"a maximum needs at least one rank, got {n}")
    x = np.linspace(0.0, 12.0, 200_001)
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    f = 1.0 - cdf**n - (1.0 - cdf) ** n
    return float(np.sum((f[1:] + f[:-1]) * np.diff(x)) / 2)


@dataclass(frozen=True)
class RankMax(Result):
    """Per step and MoE layer, the busiest EP rank's expected routed rows and touched experts
    (module doc: ``E max_r X_r`` and ``E max_r U_r``), as expressions in the step's tokens."""

    rows: sympy.Expr  #: token-expert rows on the busiest rank (balanced mean: T k / ep)
    touched: sympy.Expr  #: distinct expert copies it reads (balanced mean: E/ep (1 - (1 - k/E)^T))


#: token counts on which a candidate term of the maximum is compared with the others (every
#: batch to 64, then powers of two to 2^24): a term below another at all of them is dropped
_GRID = np.concatenate([np.arange(1.0, 65.0), 2.0 ** np.arange(7, 25)])


def busiest_rank(routing: Routing, experts: int, top_k: int, ep: int, tokens: object) -> RankMax:
    """``E max_r X_r`` and ``E max_r U_r`` over ``tokens`` tokens (module doc: normal
    approximation of the busiest of ``ep`` ranks, grouped by load). Of the ``ep`` group terms
    only those that are the largest somewhere on :data:`_GRID` are kept, so the expression
    stays small for the compiled step.

    Parameters
    ----------
    routing : Routing
        The routing distribution and placement.
    experts : int
        Routed experts ``E``.
    top_k : int
        Experts ``k`` per token.
    ep : int
        Expert-parallel ranks.
    tokens : int or sympy.Expr
        Tokens ``T`` of the step (decode: the batch; may be symbolic).

    Returns
    -------
    RankMax
        Expected routed rows and touched expert copies of the busiest rank, as expressions in
        ``tokens``.
    """
    t = sympy.sympify(tokens, strict=True)  # numbers and expressions only, never text
    ranks = placement(routing, experts, top_k, ep)
    order = sorted(range(ep), key=lambda r: -sum(p for _, p in ranks[r]))
    spread = ep / (ep - 1) if ep > 1 else 0.0
    keys = [tuple(sorted(float(p) for _, p in ranks[r])) for r in order]

    def stats(ps: tuple[float, ...], x: Any, power: Callable[[float], Any], part: int) -> tuple[Any, Any]:
        """At ``x`` tokens (numbers on the grid, or expressions: ``power(p) = (1 - p)^x``), part 0:
        E X_r and s_r^2 of X_r; part 1: E U_r = n - sum (1-p)^x and s_r^2 of U_r from
        sum q (1 - q) = sum (1-p)^x - (1-p)^{2x} (sums of powers: short when expanded)."""
        fpc = (experts - len(ps)) / (experts - 1) if experts > 1 else 0.0
        if part == 0:
            return x * sum(ps), x * sum(p * (1 - p) for p in ps) * fpc * spread
        once = sum(power(p) for p in ps)
        return len(ps) - once, (once - sum(power(p) ** 2 for p in ps)) * fpc * spread

    on_grid = {(ps, i): stats(ps, _GRID, lambda p: (1 - p) ** _GRID, i) for ps in set(keys) for i in (0, 1)}
    exact: dict[tuple[tuple[float, ...], int], tuple[Any, Any]] = {}

    def symbolic(ps: tuple[float, ...], part: int) -> tuple[Any, Any]:
        if (ps, part) not in exact:  # identical ranks share their expressions
            floats = tuple(sympy.Float(p, 17) for p in ps)
            exact[ps, part] = stats(floats, t, lambda p: (1 - p) ** t, part)
        return exact[ps, part]

    def grouped(part: int, floor: int, cap: Any) -> sympy.Expr:
        """max over groups j of mu_(j) + e_j s (module doc), only the terms that are the largest
        somewhere on the grid written out (rows: the group's mean spread; touched experts: the
        j-th rank's own, a short form)."""
        groups, acc = [], np.zeros_like(_GRID)
        for j, key in enumerate(keys, 1):
            mean, var = on_grid[key, part]
            acc = acc + var
            if j < ep and keys[j] == key:
                continue  # the next rank is the same: the larger group's term is the larger
            s2 = acc / j if part == 0 else var
            groups.append((j, key, mean + normal_max(j) * np.sqrt(np.maximum(s2, 0))))
        if t.is_number:  # every group at t itself (the grid need not hold it)
            x = float(t)
            num = {k: stats(k, x, lambda p: (1 - p) ** x, part) for k in set(keys)}
            vals = []
            for j, key, _ in groups:
                s2 = sum(num[k][1] for k in keys[:j]) / j if part == 0 else num[key][1]
                vals.append(num[key][0] + normal_max(j) * math.sqrt(max(s2, 0)))
            return sympy.Float(min(cap(x) if callable(cap) else cap, max(floor, *vals)), 17)
        best = np.max([v for *_, v in groups], axis=0)
        terms = []
        for j, key, v in groups:
            if not np.any(v >= best):
                continue  # never the largest on the grid
            mean, var = symbolic(key, part)
            s2 = sympy.Add(*(symbolic(k, part)[1] for k in keys[:j])) / j if part == 0 else var
            e = sympy.Float(normal_max(j), 17)
            terms.append(mean + (e * sympy.Pow(s2, sympy.Rational(1, 2), evaluate=False) if j > 1 else 0))
        top = terms[0] if len(terms) == 1 else sympy.Max(*terms, evaluate=False)
        return sympy.Min(
            cap(t) if callable(cap) else cap, sympy.Max(floor, top, evaluate=False), evaluate=False
        )

    n_max = max(len(rk) for rk in ranks)
    rows = grouped(0, 1, lambda x: x * min(top_k, n_max))
    touched = grouped(1, 1, n_max)
    return RankMax(rows, touched)


def skew_experts(g: nx.DiGraph, ep: int, routing: Routing) -> nx.DiGraph:
    """A copy of ``g`` whose routed-expert nodes cost what the busiest EP rank runs (module doc).

    Each expert node's cost is its rows part (everything but its weight reads) times
    ``E max X / (T k)``, plus ``E max U`` experts' matrices: the node's weight-edge bytes over
    the uniform touched count ``E (1 - (1 - k/E)^T)`` are one expert's matrices (``T``, ``E``,
    ``k``: the node's own rule parameters). The node's weight edges carry the same bytes, so
    the step's weight-read term (:func:`graphs.serving.step.totals.weight_bytes_read`) is the busiest
    rank's too, never above the bound it is a term of. With expert capacity buffers
    (``moe_capacity_factor``) every rank computes its ``E/ep`` experts' padded buffers whatever
    the routing: uniform routing is then exactly the ``1/ep`` share, a skewed one is refused.

    Parameters
    ----------
    g : networkx.DiGraph
        A step graph whose routed-expert nodes carry their rule parameters (``T``, ``E``, ``k``).
    ep : int
        Expert-parallel ranks.
    routing : Routing
        The routing distribution and placement.

    Returns
    -------
    networkx.DiGraph
        A copy of ``g`` priced as the busiest rank (``g`` itself when it has no routed experts).

    Raises
    ------
    CostModelError
        When a skewed routing meets expert capacity buffers, or the placement is invalid.
    """
    g = g.copy()
    maxima: dict[tuple[int, int, sympy.Expr], RankMax] = {}
    for n, d in g.nodes(data=True):
        if d.get(ROLE) != Role.EXPERT:
            continue
        # what a measured fused-MoE kernel of this rank is looked up by (graphs.serving.pricing.predict)
        d[EXPERT_PLAN] = (ep, routing.kind, routing.exponent, routing.placement, routing.replicate)
        params = d.get(PARAMS, {})
        weights = [u for u in g.predecessors(n) if g.nodes[u].get(KIND) == NodeKind.WEIGHT]
        if params.get("capacity_factor") is not None:
            if routing.is_default:
                d[COST] = d[COST] * sympy.Rational(1, ep)
                for u in weights:  # the weight-read term reports what the node's cost reads
                    g.edges[u, n][BYTES] = g.edges[u, n].get(BYTES, 0) / ep
                continue
            raise CostModelError(
                f"{n}: skewed routing with expert capacity buffers (moe_capacity_factor) is not modelled"
            )
        e, k, t = (sympy.sympify(params[x], strict=True) for x in ("experts", "top_k", "tokens"))
        key = (int(e), int(k), t)
        if key not in maxima:
            maxima[key] = busiest_rank(routing, int(e), int(k), ep, t)
        m = maxima[key]
        touched_uniform = e * (1 - (1 - k / e) ** t)
        share = m.rows / (t * k)
        w = sympy.Add(*(g.edges[u, n].get(BYTES, 0) for u in weights))
        for u in weights:  # the weight-read term (its edges) is the busiest rank's, as the cost is
            g.edges[u, n][BYTES] = g.edges[u, n].get(BYTES, 0) / touched_uniform * m.touched
        c: Cost = d[COST] * share
        reads = dict(c.read_terms)
        reads[Level.DRAM] = reads.get(Level.DRAM, 0) - w * share + w / touched_uniform * m.touched
        d[COST] = Cost(
            flop_terms=c.flop_terms,
            read_terms=reads,
            write_terms=c.write_terms,
            footprint_terms=c.footprint_terms,
            comm_terms=c.comm_terms,
            comm_step_terms=c.comm_step_terms,
            kernels=d[COST].kernels,
        )
    return g
