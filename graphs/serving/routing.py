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
* and receives ``L_R ep`` times the balanced all-to-all volume.

With uniform routing and contiguous placement these are exactly ``1/ep`` of the graph's expert
work and weights, the engine's default EP scaling (:func:`graphs.serving.compiled.compiled_step`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.graph import COST
from costmodel.keys import BYTES, KIND, PARAMS, ROLE, Level, NodeKind, Role
from costmodel.results import Result

__all__ = ["Routing", "RankLoad", "parse_routing", "inclusion", "rank_load", "skew_experts", "PLACEMENTS"]

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
            raise CostModelError("a routing histogram needs non-negative counts, not all zero")
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
    """``uniform``, ``zipf:S`` or ``hist:C1,C2,...`` (one count per expert) -> :class:`Routing`."""
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


def inclusion(routing: Routing, experts: int, top_k: int) -> np.ndarray:
    """``pi_i`` for each expert, hottest first for Zipf (module doc: water filling)."""
    if routing.kind == "histogram":
        if len(routing.weights) != experts:
            raise CostModelError(
                f"the routing histogram has {len(routing.weights)} counts for {experts} experts"
            )
        w = np.array(routing.weights, dtype=float)
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


@dataclass(frozen=True)
class RankLoad(Result):
    """The busiest EP rank under a routing: its share of the routed rows and its copies."""

    rank: int
    row_share: float  #: L_R: of the layer's T k routed rows (balanced: 1 / ep)
    copies: tuple[tuple[int, float], ...]  #: (expert, inclusion probability of this copy) on the rank
    hottest_expert_tokens: float  #: pi_max: expected tokens of the hottest expert per token routed
    resident_experts: int  #: expert copies the rank holds (replicas add weights)


def rank_load(routing: Routing, experts: int, top_k: int, ep: int) -> RankLoad:
    """Place the experts (module doc) and return the busiest rank's load."""
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
    loads = [sum(p for _, p in rk) for rk in ranks]
    hot = int(np.argmax(loads))
    return RankLoad(hot, loads[hot] / top_k, tuple(ranks[hot]), float(pi.max()), len(ranks[hot]))


def skew_experts(g: nx.DiGraph, ep: int, routing: Routing) -> nx.DiGraph:
    """A copy of ``g`` whose routed-expert nodes cost what the busiest EP rank runs (module doc).

    Each expert node's cost is its rows part (everything but its weight reads) times ``L_R``,
    plus the weights of the rank's touched copies: the node's weight-edge bytes over the
    uniform touched count ``E (1 - (1 - k/E)^T)`` are one expert's matrices (``T``, ``E``, ``k``:
    the node's own rule parameters)."""
    g = g.copy()
    loads: dict[tuple[int, int], RankLoad] = {}
    for n, d in g.nodes(data=True):
        if d.get(ROLE) != Role.EXPERT:
            continue
        params = d.get(PARAMS, {})
        if params.get("capacity_factor") is not None:
            raise CostModelError(
                f"{n}: skewed routing with expert capacity buffers (moe_capacity_factor) is not modelled"
            )
        e, k, t = (sympy.sympify(params[x]) for x in ("experts", "top_k", "tokens"))
        key = (int(e), int(k))
        if key not in loads:
            loads[key] = rank_load(routing, *key, ep)
        load = loads[key]
        touched_uniform = e * (1 - (1 - k / e) ** t)
        touched_rank = sympy.Add(*(1 - (1 - sympy.Float(p, 17)) ** t for _, p in load.copies))
        share = sympy.Float(load.row_share, 17)
        w = sympy.Add(
            *(
                g.edges[u, n].get(BYTES, 0)
                for u in g.predecessors(n)
                if g.nodes[u].get(KIND) == NodeKind.WEIGHT
            )
        )
        c: Cost = d[COST] * share
        reads = dict(c.read_terms)
        reads[Level.DRAM] = reads.get(Level.DRAM, 0) - w * share + w / touched_uniform * touched_rank
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
