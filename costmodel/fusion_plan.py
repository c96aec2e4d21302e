"""Fusion planner: the legal partition of a graph into kernels with the least roofline time.

A plan is a partition of the op nodes into groups, each priced by
:func:`costmodel.fusion.group_cost` and bounded on the device
(:func:`costmodel.roofline.bound`: ``max`` of compute and DRAM time, plus one
launch). The planner minimises the sum of kernel bounds

.. math::

    \\min_{\\mathcal P} \\sum_{G \\in \\mathcal P} T(G) + \\epsilon\\,\\frac{D(G)}{\\beta}
    \\quad\\text{(objective ``time``; ``bytes`` swaps the two)}

subject to: every group convex and the kernels' quotient graph acyclic (a
schedule exists), legal under a backend's rule table
(:mod:`costmodel.fusion_legality`) and fitting the on-chip level it claims.
``epsilon = 1e-3`` breaks ties by traffic (a compute-bound kernel's epilogue
fusion saves bytes, not time).

Planning atoms are *units*: an op with the views of its output (a view of a
weight joins its only consumer); views are free, so this loses nothing.

**Exact** (needs the ``fusion`` extra, HiGHS through ``highspy``): every legal
convex connected group of units is enumerated (connected through edges, or
through a shared activation between sibling GEMMs where the table allows
horizontal groups), grown one neighbour at a time and closed under convexity
(:func:`_enumerate`: only convex groups are ever visited), pruned by the
monotone rules (anchors, fusible classes, capacity). Under the ``bytes``
objective, chain links that some bytes-optimal plan keeps together are merged
first (:func:`_premerge`, an exchange argument), which shrinks the units of an
ATen graph by up to a third; a set-partitioning ILP picks the groups

.. math::

    \\min \\sum_c w_c x_c \\quad\\text{s.t.}\\quad \\sum_{c \\ni u} x_c = 1\\ \\forall u,
    \\qquad x_c \\in \\{0, 1\\}

and a cycle among the chosen groups' quotient is cut (``sum x_c <= k - 1``
over its ``k`` groups) and the ILP re-solved until none is left. HiGHS
reports the gap it proves; the plan is certified optimal when the gap is 0
and the enumeration was complete (else the result says it was truncated).

**Regions** (the exact solve, ``decompose=True``): units that may share a kernel are linked
to their neighbours, and units one offered group holds are linked together; the components
are the regions, and a unit that runs alone (a collective, SDPA under the default rules, an
opaque op; every GEMM under Inductor's) is a region of its own. Every candidate lies in one
region (it is connected through such links, or offered), so the covering rows and the
additive objective separate by region. Only acyclicity couples them. Each region ``r`` is
solved with the cycles among its own kernels cut, every unit outside it counted as its own
kernel: a cycle found so stays a cycle whatever the other regions choose (merging the outside
units into kernels keeps the closed walk through ``r``'s kernel), and the restriction of any
valid plan to ``r`` has no such cycle (it would contract to one of the plan's). So each
region's optimum ``z_r`` relaxes the whole problem:

.. math::

    \\sum_r z_r \\le z^*, \\qquad \\sum_r \\underline{z}_r \\le z^*

(``\\underline z_r``: the lower bound HiGHS proves for the region). When the regions' plans
together have an acyclic quotient they are a valid plan of the sum's weight, hence optimal;
otherwise the regions on a cycle are merged and solved again (still a relaxation; at worst
one region, the monolithic solve). The reported gap is
``(sum_r value_r - sum_r bound_r) / sum_r value_r``. A region whose enumeration stops (more
than ``max_units`` units in a group, ``max_candidates``, or ``time_limit_s`` of enumeration)
is bounded below by its units as one kernel (:func:`_floor`: the weight is subadditive), so
the gap stays proven, never certified.

**Heuristic** (always available): dynamic programming over a topological
order of the units, whose contiguous segments are always convex with an
acyclic quotient (optimal over all segmentations of that order, ``O(n L)``
group evaluations for segments of at most ``L`` units), then greedy merges of
adjacent groups while a legal, convex, fitting merge lowers the objective.

Recomputation (``recompute=True``): a single-op elementwise group read by
several kernels is duplicated into each when that lowers the objective, its
FLOPs counted in every copy (:class:`costmodel.fusion.FusionPlan`'s
``recompute``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec

import networkx as nx
import sympy

from .cost import Cost, as_float
from .errors import CostModelError
from .expr import to_expr
from .fusion import (
    FusionPlan,
    Group,
    check_plan,
    free_ops_memo,
    group_cost,
    group_footprint,
    group_traffic,
    is_free,
    is_persistent,
    out_bytes,
    plan_cost,
)
from .fusion_bound import partition_traffic_floor, quiet_stdout
from .fusion_legality import (
    Legality,
    activation_gemm,
    activation_inputs,
    anchor_bytes,
    anchors_working_set,
    claim_level,
    get_legality,
    group_tile,
    group_violation,
    level_capacity,
    siblings,
    template_possible,
)
from .graph import BYTES, COST, REPEAT, TENSOR, op_nodes
from .hardware import Hardware, get_device
from .results import Result
from .roofline import bound

__all__ = [
    "PlannedGroup",
    "PlanResult",
    "plan_fusions",
    "solver_available",
    "OBJECTIVES",
    "METHODS",
    "kernel_time",
    "unit_groups",
]

OBJECTIVES = ("time", "bytes")
METHODS = ("auto", "exact", "heuristic")
_TIE = 1e-3


def solver_available() -> bool:
    """Whether the exact solver (HiGHS via ``highspy``, the ``fusion`` extra) is installed."""
    return importlib.util.find_spec("highspy") is not None


@dataclass(frozen=True)
class PlannedGroup(Result):
    """A kernel of the plan: members, the level its tiles claim, its cost and what fusing saves."""

    name: str
    members: tuple[str, ...]
    level: str | None
    footprint_bytes: float
    capacity_bytes: float | None
    bytes: float
    time_s: float  #: its roofline bound (compute or DRAM, plus one launch) times its repeat
    bytes_saved: float  #: against its members run as separate kernels, times the repeat
    time_saved_s: float


@dataclass(frozen=True)
class PlanResult(Result):
    """The planner's plan and how far it is proven from the optimum."""

    device: str
    backend: str
    objective: str
    method: str  #: "exact" or "heuristic"
    solver: str | None
    optimal: bool  #: certified: every region proved by HiGHS over a complete enumeration, or meeting a proven floor
    gap: float | None  #: relative gap the solver proves (None: heuristic without a bound)
    candidates: int
    complete: bool  #: the enumeration of legal groups was not truncated
    flops: float
    bytes: float
    time_s: float  #: sum of the kernels' roofline bounds
    kernels: float
    groups: tuple[PlannedGroup, ...]
    plan: FusionPlan
    solve_s: float
    notes: tuple[str, ...] = ()
    premerged: int = 0  #: chain links merged before the exact solve (:func:`_premerge`)
    units: int = 0  #: planning units (ops with the views of their outputs, after pre-merging)
    regions: int = 0  #: independent regions the exact solve split the units into (0: heuristic)


# ------------------------------------------------------------------ units and their graph
def _units(g: nx.DiGraph, ops: list[str]) -> list[tuple[str, ...]]:
    """Each op with the views of its output (a view of several joins the latest of them); a view
    of sources only joins its single consumer."""
    parent = {n: n for n in ops}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    opset = set(ops)
    rep = {n: str(g.nodes[n].get(REPEAT, 1)) for n in ops}
    for n in ops:
        if not is_free(g, n):
            continue
        preds = [u for u in g.predecessors(n) if u in opset and rep[u] == rep[n]]
        succs = [v for v in g.successors(n) if v in opset and rep[v] == rep[n]]
        if preds:
            # the latest producer (no other producer of the view after it): joining an earlier
            # one would put a unit both before and after the later one, a cycle of units
            last = next(
                (p for p in preds if not any(q != p and nx.has_path(g, p, q) for q in preds)), preds[0]
            )
            parent[find(n)] = find(last)
        elif len(succs) == 1:
            parent[find(n)] = find(succs[0])
    order = {n: i for i, n in enumerate(ops)}
    groups: dict[str, list[str]] = {}
    for n in ops:
        groups.setdefault(find(n), []).append(n)
    return sorted(
        (tuple(sorted(m, key=order.__getitem__)) for m in groups.values()), key=lambda u: order[u[0]]
    )


def _owned(g: nx.DiGraph, units: Sequence[tuple[str, ...]], owner: dict[str, int], n: int) -> list[list[int]]:
    """For each of ``n`` offered groups the units it takes: those whose op it holds (a unit of
    views only stays out: it costs nothing where it runs, and a compiler's kernel that lists a
    view its other readers also need could otherwise stop being convex)."""
    out: list[list[int]] = [[] for _ in range(n)]
    for i, u in enumerate(units):
        k = owner.get(_primary(g, u))
        if k is not None and not all(is_free(g, m) for m in u):
            out[k].append(i)
    return out


def unit_groups(g: nx.DiGraph, groups: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """A compiler's kernels as groups of whole planning units: each takes its ops with the views of
    their outputs (views cost nothing, so this moves no bytes but a view's; the result is what the
    planner is offered and can always match), aligned with ``groups`` (empty: views only)."""
    units = _units(g, op_nodes(g))
    owner = {m: k for k, grp in enumerate(groups) for m in grp}
    return [tuple(m for i in ids for m in units[i]) for ids in _owned(g, units, owner, len(groups))]


def _primary(g: nx.DiGraph, unit: Sequence[str]) -> str:
    """The member that places a unit: its op (a unit holds one op and views)."""
    return next((m for m in unit if not is_free(g, m)), unit[0])


class _Space:
    """Units, their DAG as bitmasks, and numeric costs of candidate groups on one device."""

    def __init__(
        self,
        g: nx.DiGraph,
        hw: Hardware,
        leg: Legality,
        objective: str,
        offered: Sequence[Sequence[str]] = (),
        premerge: bool = False,
    ) -> None:
        self.g, self.hw, self.leg, self.objective = g, hw, leg, objective
        self.ops = op_nodes(g)
        self.units = _units(g, self.ops)
        self.bw = as_float(hw.bandwidth())
        caps = [c for c in (level_capacity(hw, lvl) for lvl in leg.levels) if c is not None]
        self.max_capacity = max(caps) if caps else None
        # an offered group (a compiler's kernel) takes whole units: those whose op it holds
        owner = {m: k for k, grp in enumerate(offered) for m in grp}
        self.premerged = 0
        if premerge:
            self.units, self.premerged = _premerge(self, [owner.get(_primary(g, u)) for u in self.units])
        self._build()
        self.offered = [sum(1 << i for i in ids) for ids in _owned(g, self.units, owner, len(offered)) if ids]

    def _build(self) -> None:
        g, leg, n = self.g, self.leg, len(self.units)
        self.of = {m: i for i, u in enumerate(self.units) for m in u}
        self.succ: list[set[int]] = [set() for _ in range(n)]
        for u, v in g.edges():
            if u in self.of and v in self.of and self.of[u] != self.of[v]:
                self.succ[self.of[u]].add(self.of[v])
        self.pred: list[set[int]] = [set() for _ in range(n)]
        for i, ss in enumerate(self.succ):
            for j in ss:
                self.pred[j].add(i)
        topo = list(nx.topological_sort(nx.DiGraph([(i, j) for i in range(n) for j in self.succ[i]])))
        topo += [i for i in range(n) if i not in set(topo)]
        self.desc = [0] * n
        self.anc = [0] * n
        for i in reversed(topo):
            for j in self.succ[i]:
                self.desc[i] |= (1 << j) | self.desc[j]
        for i in topo:
            for j in self.pred[i]:
                self.anc[i] |= (1 << j) | self.anc[j]
        # neighbours: an edge either way (a compiler's horizontal groups come in as offered groups)
        self.nbr: list[set[int]] = [self.succ[i] | self.pred[i] for i in range(n)]
        if "gemm" in leg.horizontal:  # sibling GEMMs reading one activation: horizontal groups
            readers: dict[str, set[int]] = {}
            for i, u in enumerate(self.units):
                if any(leg.class_of(g, m) == "gemm" for m in u):
                    for m in u:
                        for s in activation_inputs(g, m):
                            if self.of.get(s) != i:
                                readers.setdefault(s, set()).add(i)
            for sib in readers.values():
                for i in sib:
                    self.nbr[i] |= sib - {i}
        self.cls = [{leg.class_of(g, m) for m in u} - {"free"} for u in self.units]
        self.anchors = [sum(leg.class_of(g, m) == "gemm" for m in u) for u in self.units]
        self.free_unit = [all(is_free(g, m) for m in u) for u in self.units]
        self.alone = [bool(c - leg.fusible) for c in self.cls]
        self.anchor_ops = {m for u in self.units for m in u if leg.class_of(g, m) == "gemm"}
        self.rep = [
            as_float(to_expr(g.nodes[u[0]].get(REPEAT, 1), field=f"{u[0]} repeat")) for u in self.units
        ]
        self._cache: dict[int, tuple[float, float, float, Group] | None] = {}
        self._memo: dict[object, float] = {}
        self._terms: dict[str, dict[str, float]] = {}
        self._anchor_bytes = {m: anchor_bytes(g, m, leg) for m in self.anchor_ops}
        self.overlap = as_float(self.hw.overlap)
        self.launch_s = as_float(self.hw.launch_overhead_s)
        # one tile of each tensor an edge carries, per tile shape (group_footprint of the pair)
        self._edge_tile: dict[tuple[str, str, int, int | None], tuple[str, float]] = {}

    def members(self, mask: int) -> tuple[str, ...]:
        out: list[str] = []
        i = 0
        while mask:
            if mask & 1:
                out.extend(self.units[i])
            mask >>= 1
            i += 1
        return tuple(out)

    def connected(self, mask: int) -> bool:
        """Whether the units of ``mask`` are connected through edges."""
        bits = _bits(mask)
        seen, todo = {bits[0]}, [bits[0]]
        while todo:
            i = todo.pop()
            for j in self.nbr[i]:
                if (mask >> j) & 1 and j not in seen:
                    seen.add(j)
                    todo.append(j)
        return len(seen) == len(bits)

    def convex(self, mask: int) -> bool:
        d = a = 0
        m, i = mask, 0
        while m:
            if m & 1:
                d |= self.desc[i]
                a |= self.anc[i]
            m >>= 1
            i += 1
        return not (d & a & ~mask)

    def closure(self, mask: int) -> int:
        """``mask`` with every unit on a path between two of its units (one step suffices: a unit
        between a member and a unit between two members is itself between two members)."""
        d = a = 0
        for i in _bits(mask):
            d |= self.desc[i]
            a |= self.anc[i]
        return mask | (d & a)

    def _tiles(self, members: tuple[str, ...], tiles: list[tuple[int, int | None]]) -> float:
        """One tile of each internal tensor (the least over ``tiles``), from per-edge
        :func:`costmodel.fusion.group_footprint` of the pair."""
        mset = set(members)
        seen: dict[str, float] = {}
        for u in members:
            for v in self.g.successors(u):
                if v in mset:
                    fps = []
                    for rows, cols in tiles:
                        key = (u, v, rows, cols)
                        if key not in self._edge_tile:
                            t = self.g.edges[u, v][TENSOR].name
                            fp = as_float(
                                group_footprint(self.g, Group("e", (u, v), tile_rows=rows, tile_cols=cols))
                            )
                            self._edge_tile[key] = (t, fp)
                        t, fp = self._edge_tile[key]
                        fps.append(fp)
                    seen[t] = min(fps)
        return sum(seen.values())

    def footprint(self, members: tuple[str, ...]) -> float:
        """Same as :func:`costmodel.fusion_legality.group_footprint_bytes`, from per-edge tiles."""
        tiles = self._tiles(members, [group_tile(self.g, members, self.leg)])
        return tiles + anchors_working_set(self.g, members, self.leg)

    def footprint_floor(self, members: tuple[str, ...]) -> float:
        """A footprint no superset of ``members`` goes below (the least tile each tensor can get, one
        GEMM working set while a FlashAttention chain may still complete): what pruning may use.

        A GEMM with a row reduction holds full rows (``anchor_tile x None``, :func:`group_tile`)
        in every superset unless a FlashAttention template may still form, which needs every
        anchor to be a product of activations: otherwise that tile is the least."""
        t = self.leg.anchor_tile
        held = [m for m in members if m in self.anchor_ops]
        anchors = [self._anchor_bytes[m] for m in held]
        one = ("flash_attention" in self.leg.templates and len(anchors) <= 2) or "gemm" in self.leg.horizontal
        ws = (max(anchors) if one else sum(anchors)) if anchors else 0.0
        flash = "flash_attention" in self.leg.templates and all(
            activation_gemm(self.g, m, self.leg) for m in held
        )
        rows = any(self.leg.class_of(self.g, m) in self.leg.row_reductions for m in members)
        tiles: list[tuple[int, int | None]] = (
            [(t, None)] if held and rows and not flash else [(1, None), (t, t)]
        )
        return self._tiles(members, tiles) + ws

    def price(self, members: tuple[str, ...]) -> tuple[float, float, float]:
        """(objective weight, DRAM bytes, roofline time) of one kernel running ``members``: its
        traffic from :func:`costmodel.fusion.group_traffic`, its compute terms the sum of its
        members' (:func:`costmodel.roofline.bound` terms are linear in the FLOPs), bounded by
        :class:`costmodel.roofline.Bound` with one launch."""
        rep = self.rep[self.of[members[0]]]
        if len(members) == 1:
            c = self.g.nodes[members[0]][COST]
            t, d = kernel_time(c, self.hw), as_float(c.bytes)
        else:
            gr = Group("c", members)
            r, w = group_traffic(self.g, FusionPlan((gr,)), gr, self._memo)
            d = r + w
            terms: dict[str, float] = {}
            for m in members:
                for k, v in self._compute_terms(m).items():
                    terms[k] = terms.get(k, 0.0) + v
            if d:
                terms["dram"] = terms.get("dram", 0.0) + d / self.bw
            # Bound.time with one launch, in floats: overlap * max + (1 - overlap) * sum + launch
            vals = list(terms.values())
            t = self.launch_s + (self.overlap * max(vals) + (1 - self.overlap) * sum(vals) if vals else 0.0)
        t, d = t * rep, d * rep
        w = t + _TIE * d / self.bw if self.objective == "time" else d / self.bw + _TIE * t
        return w, d, t

    def _compute_terms(self, m: str) -> dict[str, float]:
        if m not in self._terms:
            c = self.g.nodes[m][COST]
            b = bound(
                Cost(flop_terms=c.flop_terms, comm_terms=c.comm_terms, comm_step_terms=c.comm_step_terms),
                self.hw,
            )
            self._terms[m] = {k: as_float(v) for k, v in b.terms.items()}
        return self._terms[m]

    def candidate(self, mask: int, grown: bool = False) -> tuple[float, float, float, Group] | None:
        """The priced group of units ``mask``, or None when illegal, non-convex or too big."""
        if mask in self._cache:
            return self._cache[mask]
        out = None
        members = self.members(mask)
        single = mask & (mask - 1) == 0
        reps = {self.rep[i] for i in _bits(mask)}
        if single or (
            len(reps) == 1
            and self.convex(mask)
            and (grown or self.connected(mask))
            and group_violation(self.g, members, self.leg) is None
        ):
            claim = (
                None
                if single or all(self.leg.class_of(self.g, m) == "free" for m in members[1:])
                else claim_level(self.g, members, self.hw, self.leg, self.footprint(members))
            )
            if claim is None or not claim.checked or claim.level is not None:
                rows, cols = group_tile(self.g, members, self.leg)
                level = "smem" if claim is None or claim.level is None else claim.level
                w, d, t = self.price(members)
                out = (w, d, t, Group(_name(members), members, level=level, tile_rows=rows, tile_cols=cols))
        self._cache[mask] = out
        return out

    def monotone_ok(self, mask: int, anchors: int, members_n: int, max_units: int) -> bool:
        """Rules no superset can repair: too many anchors, an op that runs alone, too many units."""
        if members_n > max_units:
            return False
        if anchors <= self.leg.max_anchors:
            return True
        # more anchors: only siblings run as one GEMM or a template can hold them, and whether
        # they can depends on them alone
        ids = [m for i in _bits(mask) for m in self.units[i] if m in self.anchor_ops]
        if "gemm" in self.leg.horizontal and siblings(self.g, ids):
            return True
        if len(ids) != 2 or not self.leg.templates:
            return False
        return template_possible(self.g, ids[0], ids[1], self.leg)

    def hopeless(self, mask: int, pool: int) -> bool:
        """Whether no group ``T`` with ``mask <= T <= pool`` (as unit sets) passes the anchor rules
        of :func:`costmodel.fusion_legality.group_violation`, so the enumeration need not grow
        ``mask`` (``pool``: the units growth may still add, e.g. a region without its units that
        run alone). Two rules, each a property of every such ``T``:

        * *no meet*: two anchors with no path between them share a kernel only as a dual GEMM,
          whose outputs meet in a member; a meet is a common descendant of both, so when no unit of
          ``pool`` descends from both, no ``T`` holds one;
        * *loose*: a member on no path through any anchor of ``mask`` stays loose in ``T`` unless
          ``T`` adds an anchor it is on a path with; each such anchor must be able to join the
          ones already there (``max_anchors``, or a template :func:`template_possible` allows).

        Paths are taken between units (an op path implies a unit path, so a unit-level "no path"
        is an op-level one). Tables with horizontal GEMMs (siblings count as one anchor) are not
        judged: False."""
        if "gemm" in self.leg.horizontal:
            return False
        ids = _bits(mask)
        held = [i for i in ids if self.anchors[i]]
        if not held:
            return False
        if len(held) == 2 and not self._meet_possible(held[0], held[1], pool):
            return True
        tied = 0
        for j in held:
            tied |= self.desc[j] | self.anc[j] | 1 << j
        loose = [i for i in ids if not (tied >> i) & 1 and not self.free_unit[i]]
        if not loose:
            return False
        joinable = 0
        for k in _bits(pool & ~mask):
            if self.anchors[k] and self._may_join(held, k, pool):
                joinable |= self.desc[k] | self.anc[k]
        return any(not (joinable >> i) & 1 for i in loose)

    def _meet_possible(self, i: int, j: int, pool: int) -> bool:
        """Anchor units ``i`` and ``j`` are linked by a path, or some unit of ``pool`` (or one of
        them) descends from both (where a dual GEMM's outputs could meet)."""
        if (self.desc[i] >> j) & 1 or (self.desc[j] >> i) & 1:
            return True
        return bool((self.desc[i] | 1 << i) & (self.desc[j] | 1 << j) & pool)

    def _may_join(self, held: list[int], k: int, pool: int) -> bool:
        """Whether anchor unit ``k`` could share a kernel with anchor units ``held``."""
        if len(held) + 1 <= self.leg.max_anchors:
            return True
        if len(held) != 1 or not self.leg.templates:
            return False
        (h,) = held
        a = next(m for m in self.units[h] if m in self.anchor_ops)
        b = next(m for m in self.units[k] if m in self.anchor_ops)
        return template_possible(self.g, a, b, self.leg) and self._meet_possible(h, k, pool)


def _name(members: Sequence[str]) -> str:
    real = [m.split(".")[-1] for m in members]
    return "+".join(real) if len(real) <= 4 else f"{real[0]}+...+{real[-1]} ({len(real)} ops)"


# ------------------------------------------------------------------ pre-merging (exact, bytes)
def _premerge(sp: _Space, owners: list[int | None]) -> tuple[list[tuple[str, ...]], int]:
    """Units merged along chain links some bytes-optimal plan keeps together (an exchange argument).

    A unit ``U`` joins its consumer unit ``V`` when every plan that separates them can move ``U``
    into ``V``'s kernel without moving more DRAM bytes, i.e. when

    * ``V`` is ``U``'s only consumer unit (``U`` holds no graph output and nothing persistent),
      and ``U`` has at most one producer unit: ``U`` is a leaf of its kernel, whose rest stays
      connected and convex, and ``V``'s kernel with ``U`` stays convex with an acyclic quotient
      (a path from it back into ``U`` would already leave and re-enter ``V``'s kernel);
    * ``U`` holds no GEMM and every class in it may share a kernel; ``V`` may share one;
    * ``V``'s kernel is always anchorless where the table has anchors: no GEMM among ``V``, its
      descendants and its ancestors (or its ancestors run only through ``U``): so ``U`` never
      becomes a loose member next to a GEMM, and tiles stay single rows, whose sum over all the
      graph's tensors must fit the largest level (then capacity never binds);
    * the move saves at least what it may add:

      .. math::

          R_U + \\sum_{P \\to U} W_P \\le W_U + R_{U \\to V}

      (``R_U``: ``U``'s external reads, now done by ``V``'s kernel; ``W_P``: a producer's write
      its kernel may now need; ``W_U``: ``U``'s writes, all read by ``V``; ``R_{U -> V}``:
      ``V``'s reads of them);
    * no offered group (a compiler's kernel) holds one of the two without the other.

    Only the bytes objective: the exchange can move FLOPs into a kernel whose time then grows.
    Returns the merged units and how many links were merged."""
    g, leg = sp.g, sp.leg
    anchored = leg.max_anchors > 0 or bool(leg.templates)
    ops = [m for u in sp.units for m in u]
    rows = as_float(group_footprint(g, Group("all", tuple(ops), tile_rows=1, tile_cols=None)))
    if sp.max_capacity is not None and rows > sp.max_capacity:
        return sp.units, 0
    order = {m: i for i, m in enumerate(op_nodes(g))}
    memo: dict[object, float] = {}
    merged = 0
    while True:
        sp._build()
        hit = None
        for i, u in enumerate(sp.units):
            if len(sp.succ[i]) != 1 or len(sp.pred[i]) > 1 or sp.anchors[i] or sp.alone[i]:
                continue
            (j,) = sp.succ[i]
            if sp.alone[j] or sp.rep[i] != sp.rep[j] or owners[i] != owners[j]:
                continue
            if any(not list(g.successors(m)) or is_persistent(g, m) for m in u):
                continue
            if anchored:
                near = sp.desc[j] | (1 << j) | (0 if sp.pred[j] == {i} else sp.anc[j])
                if any(sp.anchors[k] for k in _bits(near)):
                    continue
            gu = Group("u", u)
            reads, writes = group_traffic(g, FusionPlan((gu,)), gu, memo)
            added = reads + sum(
                as_float(sympy.Min(g.nodes[p][COST].bytes_written(), out_bytes(g, p)))
                for p in (_primary(g, sp.units[k]) for k in sp.pred[i])
            )
            to_v = sum(
                max(
                    as_float(to_expr(g.edges[m, v].get(BYTES, 0), field=f"edge {m}->{v} bytes"))
                    for v in g.successors(m)
                    if sp.of.get(v) == j
                )
                for m in u
                if any(sp.of.get(v) == j for v in g.successors(m))
            )
            if added <= writes + to_v:
                hit = (i, j)
                break
        if hit is None:
            return sp.units, merged
        i, j = hit
        unit = tuple(sorted((*sp.units[i], *sp.units[j]), key=order.__getitem__))
        pairs = [
            (unit if k == j else x, o)
            for k, (x, o) in enumerate(zip(sp.units, owners, strict=True))
            if k != i
        ]
        pairs.sort(key=lambda p: order[p[0][0]])
        sp.units, owners = [p[0] for p in pairs], [p[1] for p in pairs]
        merged += 1


# ------------------------------------------------------------------ enumeration (exact)
def _enumerate(
    sp: _Space, max_units: int, max_candidates: int, within: int | None = None, deadline: float | None = None
) -> tuple[list[int], bool]:
    """Every connected legal convex group of units, grown by convex closure.

    From each unit, a group grows by one neighbouring unit and takes its convex closure (the
    units on paths between members: descendants of a member that are ancestors of one); every
    convex connected group is reached this way (add its units in an order that keeps each prefix
    connected: each closure stays inside it), and only convex groups are visited. A closure that
    breaks a rule no superset repairs (an op that runs alone, mixed repeat counts, too many
    anchors, a footprint above every level, more than ``max_units`` units) is not grown.

    ``within``: start only from those units (one region of :func:`_regions`: groups never leave
    it); ``deadline`` (a :func:`time.perf_counter` value): stop there, the enumeration then
    incomplete."""
    n = len(sp.units)
    found: list[int] = []
    complete = True
    frontier: list[int] = []
    for s in range(n):
        if within is not None and not (within >> s) & 1:
            continue
        if sp.alone[s]:
            found.append(1 << s)
        else:
            frontier.append(1 << s)
    seen = set(frontier)
    alone = sum(1 << i for i in range(n) if sp.alone[i])
    pool = ((1 << n) - 1 if within is None else within) & ~alone
    while frontier:
        grown: list[int] = []
        for sub in frontier:
            if deadline is not None and time.perf_counter() > deadline:
                return found, False
            if sp.candidate(sub, grown=True) is not None:
                found.append(sub)
                if len(found) >= max_candidates:
                    return found, False
            rep = sp.rep[_bits(sub)[0]]
            near = 0
            for i in _bits(sub):
                for j in sp.nbr[i]:
                    near |= 1 << j
            for w in _bits(near & ~sub & ~alone):
                t = sp.closure(sub | 1 << w)
                if t in seen:
                    continue
                seen.add(t)
                ids = _bits(t)
                if t & alone or any(sp.rep[i] != rep for i in ids):
                    continue
                a = sum(sp.anchors[i] for i in ids)
                # the rules no superset repairs first: a closure they refuse is no truncation
                if not sp.monotone_ok(t, a, 0, max_units) or (a and sp.hopeless(t, pool)):
                    continue
                if not _capacity_ok(sp, t):  # a floor every superset's footprint stays above
                    continue
                if len(ids) > max_units:
                    complete = False  # a larger group may exist: optimality is over groups of max_units
                    continue
                grown.append(t)
        frontier = grown
    return found, complete


def _capacity_ok(sp: _Space, mask: int) -> bool:
    """Capacity is monotone (a superset holds more tiles): prune a group that fits no level."""
    return sp.max_capacity is None or sp.footprint_floor(sp.members(mask)) <= sp.max_capacity


@dataclass(frozen=True)
class _Solved:
    """One set-partitioning solve: the groups chosen, their objective (``value``) and the lower
    bound HiGHS proves over the same candidates (``bound``), both in objective units."""

    chosen: list[int]
    value: float
    bound: float | None
    solved: bool  #: HiGHS proved the optimum (status Optimal, gap 0)
    status: str


def _solve(
    sp: _Space,
    masks: list[int],
    time_limit_s: float,
    start: Sequence[int] = (),
    universe: int | None = None,
) -> _Solved:
    """Set partitioning of the units of ``universe`` (default: all) over ``masks`` with HiGHS.

    Cycles among the chosen groups' quotient (every unit outside ``universe`` its own node: a
    cycle found so is a cycle whatever the rest of the graph's kernels are, module doc) are cut
    (``sum x_c <= k - 1`` over the ``k`` chosen groups on it) and the ILP re-solved until none is
    left. An empty ``chosen``: no feasible point found (the time limit)."""
    import highspy
    import numpy as np

    if universe is None:
        universe = (1 << len(sp.units)) - 1
    rows = _bits(universe)
    row_of = {u: r for r, u in enumerate(rows)}
    n, m = len(rows), len(masks)
    raw = np.array([sp.candidate(c)[0] for c in masks])  # type: ignore[index]
    # seconds are below HiGHS's absolute tolerances (1e-7 .. 1e-9): scale so the whole plan is ~1e6
    scale = 1e6 / max(float(raw.max()) * n, 1e-300)
    with quiet_stdout():  # HiGHS prints its banner from C on construction, before any option
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.addVars(m, np.zeros(m), np.ones(m))
    h.changeColsIntegrality(m, np.arange(m, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * m))
    h.changeColsCost(m, np.arange(m, dtype=np.int32), raw * scale)
    cover: list[list[int]] = [[] for _ in range(n)]
    for k, c in enumerate(masks):
        for i in _bits(c):
            cover[row_of[i]].append(k)
    starts: list[int] = []
    idx: list[int] = []
    for col in cover:
        starts.append(len(idx))
        idx.extend(col)
    h.addRows(
        n,
        np.ones(n),
        np.ones(n),
        len(idx),
        np.array(starts, dtype=np.int32),
        np.array(idx, dtype=np.int32),
        np.ones(len(idx)),
    )
    if start:  # the heuristic plan as the incumbent: a time limit then still returns a plan and its gap
        init = highspy.HighsSolution()
        init.col_value = [1.0 if c in set(start) else 0.0 for c in masks]
        init.value_valid = True
        h.setSolution(init)
    where = {c: k for k, c in enumerate(masks)}
    while True:
        # HiGHS's clock runs across re-solves: the limit is the budget of all of them together
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
        info = h.getInfo()
        # the bound holds for every plan (the cuts only remove cyclic ones), found or not
        lb = float(info.mip_dual_bound) / scale if np.isfinite(info.mip_dual_bound) else None
        sol = h.getSolution().col_value
        chosen = [masks[k] for k in range(m) if sol[k] > 0.5]
        covered = 0
        for c in chosen:
            covered |= c
        if covered != universe:  # no feasible point found (the time limit): the caller falls back
            return _Solved([], float("inf"), lb, False, status)
        cycle = [c for c in _quotient_cycle(sp, chosen) if c in where]
        if not cycle:
            value = sum(float(raw[where[c]]) for c in chosen)
            solved = status == "Optimal"
            return _Solved(chosen, value, value if solved else lb, solved, status)
        if status != "Optimal":  # out of time with a cyclic incumbent: the caller falls back
            return _Solved([], float("inf"), lb, False, f"{status} (a cycle of kernels left)")
        ks = [where[c] for c in cycle]
        h.addRow(-np.inf, len(ks) - 1, len(ks), np.array(ks, dtype=np.int32), np.ones(len(ks)))


def _quotient_cycle(sp: _Space, chosen: list[int]) -> list[int]:
    """Groups on a cycle of the kernels' dependency graph (empty when it is acyclic); a unit no
    chosen group holds is its own kernel (its singleton mask)."""
    home = {i: 1 << i for i in range(len(sp.units))}
    for c in chosen:
        i, x = 0, c
        while x:
            if x & 1:
                home[i] = c
            x >>= 1
            i += 1
    q = nx.DiGraph()
    q.add_nodes_from(set(home.values()))
    for i, ss in enumerate(sp.succ):
        for j in ss:
            if home[i] != home[j]:
                q.add_edge(home[i], home[j])
    try:
        return [u for u, _ in nx.find_cycle(q)]
    except nx.NetworkXNoCycle:
        return []


# ------------------------------------------------------------------ heuristic
def _dp(sp: _Space, max_units: int) -> list[int]:
    """Best segmentation of a topological order of the units (segments are convex, module doc)."""
    q = nx.DiGraph()
    q.add_nodes_from(range(len(sp.units)))
    q.add_edges_from((i, j) for i in range(len(sp.units)) for j in sp.succ[i])
    order = list(nx.lexicographical_topological_sort(q))
    n = len(order)
    best = [0.0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for i in range(1, n + 1):
        mask = 0
        for j in range(i - 1, max(-1, i - 1 - max_units), -1):
            mask |= 1 << order[j]
            if sp.alone[order[j]] and j != i - 1:
                break
            c = sp.candidate(mask)
            if c is not None and best[j] + c[0] < best[i]:
                best[i], cut[i] = best[j] + c[0], j
    out, i = [], n
    while i > 0:
        j = cut[i]
        mask = 0
        for k in range(j, i):
            mask |= 1 << order[k]
        out.append(mask)
        i = j
    return out[::-1]


def _greedy_merge(sp: _Space, groups: list[int]) -> list[int]:
    """Merge neighbouring groups while a legal, convex, fitting merge lowers the objective."""
    groups = list(groups)
    while True:
        best, pair = 0.0, None
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                ga, gb = groups[a], groups[b]
                if not any((gb >> j) & 1 for i in _bits(ga) for j in sp.nbr[i]):
                    continue
                c = sp.candidate(ga | gb)
                if c is None:
                    continue
                gain = sp.candidate(ga)[0] + sp.candidate(gb)[0] - c[0]  # type: ignore[index]
                if gain > best * (1 + 1e-12) and gain > 0:
                    best, pair = gain, (a, b)
        if pair is None:
            return groups
        a, b = pair
        groups[a] |= groups[b]
        del groups[b]


def _bits(mask: int) -> list[int]:
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def _recompute(g: nx.DiGraph, hw: Hardware, plan: FusionPlan, leg: Legality, weight: Any) -> FusionPlan:
    """Duplicate an elementwise producer into every other kernel that reads it, when that pays.

    Its own kernel keeps it (or is dropped when it held only that op and nothing else needs it);
    :func:`costmodel.fusion.group_cost` then writes it for no recomputing consumer and counts its
    FLOPs in every copy."""
    for p in [m for gr in plan.groups for m in gr.members if leg.class_of(g, m) == "elementwise"]:
        if p in plan.recompute:
            continue
        home = plan.groups_of(p)[0]
        readers = {h.name for v in g.successors(p) for h in plan.groups_of(v) if h.name != home.name}
        if not readers:
            continue
        alone = home.members == (p,) and all(
            any(h.name in readers for h in plan.groups_of(v)) for v in g.successors(p)
        )
        new = tuple(
            dataclasses.replace(h, members=(*h.members, p)) if h.name in readers else h
            for h in plan.groups
            if not (alone and h is home)
        )
        trial = FusionPlan(new, plan.recompute | ({p} if not alone or len(readers) > 1 else set()))
        if check_plan(g, trial) or any(
            group_violation(g, h.members, leg) or claim_level(g, h.members, hw, leg).level is None
            for h in new
            if h.name in readers
        ):
            continue
        if weight(trial) < weight(plan):
            plan = trial
    return plan


# ------------------------------------------------------------------ entry point
_P = ParamSpec("_P")


def _views_memoised(
    f: Callable[Concatenate[nx.DiGraph, _P], PlanResult],
) -> Callable[Concatenate[nx.DiGraph, _P], PlanResult]:
    """``f`` with :func:`costmodel.fusion.is_free` memoised for its graph while it runs."""

    @functools.wraps(f)
    def run(g: nx.DiGraph, *args: _P.args, **kwargs: _P.kwargs) -> PlanResult:
        with free_ops_memo(g):
            return f(g, *args, **kwargs)

    return run


@_views_memoised
def plan_fusions(
    g: nx.DiGraph,
    hw: Hardware | str = "h100",
    *,
    backend: str | Legality = "default",
    objective: str = "time",
    method: str = "auto",
    extra_groups: Iterable[Sequence[str]] = (),
    recompute: bool = False,
    max_units: int = 32,
    max_candidates: int = 200_000,
    premerge: bool | None = None,
    exact_limit: int = 400,
    time_limit_s: float = 10.0,
    decompose: bool = True,
) -> PlanResult:
    """The fusion plan of ``g`` with the least objective on ``hw`` under ``backend``'s rules (module doc).

    ``method``: ``exact`` (needs the ``fusion`` extra), ``heuristic``, or ``auto`` (exact when
    the solver is installed and the graph has at most ``exact_limit`` units). ``extra_groups``
    (e.g. a compiler's kernels) are offered as candidates even where the table would refuse
    them (each takes whole units: the ops it holds with their views): the plan is then never
    worse than theirs. ``premerge`` (default: with the ``bytes`` objective, without
    recomputation) merges chain links first (:func:`_premerge`). ``decompose`` (default on)
    solves region by region (module doc); off, one set-partitioning problem over all units.
    ``time_limit_s`` bounds each region's enumeration and, again, its solves together. The graph
    must be numeric (bind dims first).
    """
    dev = get_device(hw)
    leg = get_legality(backend)
    if objective not in OBJECTIVES:
        raise CostModelError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if method not in METHODS:
        raise CostModelError(f"method must be one of {METHODS}, got {method!r}")
    for n in op_nodes(g):
        c = g.nodes[n][COST]
        if not c.is_numeric:
            raise CostModelError(
                f"plan_fusions needs a numeric graph: node {n!r} has symbols "
                f"{sorted(map(str, (c.flops + c.bytes).free_symbols))}; bind them first (passes.bind_dims)"
            )
    t0 = time.perf_counter()
    extra_groups = [tuple(e) for e in extra_groups]
    if premerge is None:
        premerge = objective == "bytes" and not recompute
    sp = _Space(g, dev, leg, objective, extra_groups, premerge=premerge)
    notes: list[str] = []
    have = solver_available()
    if method == "exact" and not have:
        raise CostModelError(
            "method 'exact' needs the fusion extra (pip install 'costmodel[fusion]': highspy)"
        )
    exact = method == "exact" or (method == "auto" and have and len(sp.units) <= exact_limit)
    if method == "auto" and not have:
        notes.append(
            "exact solver not installed (the fusion extra, highspy): heuristic plan, no optimality gap"
        )
    elif method == "auto" and not exact:
        notes.append(f"{len(sp.units)} units > exact_limit {exact_limit}: heuristic plan")
    extras: list[int] = []
    for mask in sp.offered:
        if sp.convex(mask):
            extras.append(mask)
            members = sp.members(mask)
            if mask not in sp._cache or sp._cache[mask] is None:
                w, d, t = sp.price(members)
                sp._cache[mask] = (w, d, t, Group(_name(members), members))
    if sp.premerged:
        notes.append(
            f"{sp.premerged} chain links pre-merged (some bytes-optimal plan keeps each together): "
            "optimal in DRAM bytes, the time tie-break over plans that keep them"
        )
    gap: float | None = None
    optimal = False
    complete = True
    ncand = 0
    solver = None
    nregions = 0
    if exact:
        start = _better_with(sp, _greedy_merge(sp, _dp(sp, max_units)), extras)
        regions = _regions(sp, extras) if decompose else [(1 << len(sp.units)) - 1]
        nregions = len(regions)
        solved_all, chosen, value, lower, ncand, complete, status = _solve_regions(
            sp, regions, extras, start, max_units, max_candidates, time_limit_s
        )
        solver = "highs"
        if not chosen:
            notes.append(f"HiGHS found no plan ({status}): heuristic plan instead")
            chosen = start
            exact = False
        gap = None if lower is None else max(0.0, (value - lower) / value) if value > 0 else 0.0
        # a region is solved when HiGHS proved it over a complete enumeration, or when its plan
        # meets a floor proven over every plan (a truncated enumeration's region)
        optimal = solved_all and (gap or 0.0) <= 1e-9
        if not complete:
            notes.append(
                f"enumeration truncated (groups of at most {max_units} units, {max_candidates} candidates "
                f"or {time_limit_s:g} s per region): "
                + (
                    "certified by the clique-partition traffic floor (costmodel.fusion_bound)"
                    if optimal
                    else "the gap is against the region's one-kernel or clique-partition traffic floor"
                )
            )
        if not solved_all and status:
            notes.append(f"HiGHS stopped: {status}")
    else:
        chosen = _greedy_merge(sp, _dp(sp, max_units))
        if extras:
            chosen = _better_with(sp, chosen, extras)
        ncand = len(sp._cache)
    groups = [sp.candidate(c)[3] for c in chosen]  # type: ignore[index]
    plan = FusionPlan(tuple(groups))

    def weight(p: FusionPlan) -> float:
        c = plan_cost(g, p)
        b = bound(c, dev)
        t, d = as_float(b.time), as_float(c.bytes)
        return t + _TIE * d / sp.bw if objective == "time" else d / sp.bw + _TIE * t

    if recompute:
        plan = _recompute(g, dev, plan, leg, weight)
    issues = check_plan(g, plan)
    if issues:  # the construction guarantees a valid plan: a failure here is a bug, said loudly
        raise CostModelError("planner produced an invalid plan: " + "; ".join(map(str, issues)))
    res = _result(
        g,
        dev,
        leg,
        objective,
        plan,
        "exact" if exact else "heuristic",
        solver,
        optimal,
        gap,
        ncand,
        complete,
        time.perf_counter() - t0,
        notes,
    )
    return dataclasses.replace(res, premerged=sp.premerged, units=len(sp.units), regions=nregions)


def _regions(sp: _Space, extras: Sequence[int] = ()) -> list[int]:
    """The planning regions: units linked when they are neighbours that may both share a kernel,
    or held by one offered group; each unit that runs alone is a region of its own (module doc:
    no candidate group spans two regions)."""
    n = len(sp.units)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        if not sp.alone[i]:
            for j in sp.nbr[i]:
                if not sp.alone[j]:
                    parent[find(i)] = find(j)
    for e in extras:
        ids = _bits(e)
        for j in ids[1:]:
            parent[find(j)] = find(ids[0])
    out: dict[int, int] = {}
    for i in range(n):
        out[find(i)] = out.get(find(i), 0) | 1 << i
    return sorted(out.values(), key=lambda m: (m & -m).bit_length())


def _floor(sp: _Space, region: int) -> float:
    """A lower bound on the objective of every plan of ``region``: its units as one kernel per
    repeat count, legality, convexity and capacity ignored. The weight is subadditive over
    disjoint groups (compute terms add; a union reads each outside tensor at most as often and
    writes at most what its parts write; ``max`` of sums is at most the sum of ``max``; one
    launch at most as many), so no partition of the region weighs less."""
    by_rep: dict[float, list[str]] = {}
    for i in _bits(region):
        by_rep.setdefault(sp.rep[i], []).extend(sp.units[i])
    return sum(sp.price(tuple(members))[0] for members in by_rep.values())


def _conflicts(sp: _Space, region: int) -> set[tuple[int, int]]:
    """Unit pairs of ``region`` no legal group holds (``i < j``): their convex closure leaves the
    region or holds a unit that runs alone, mixes repeat counts, breaks a rule no superset
    repairs (:meth:`_Space.monotone_ok`, :meth:`_Space.hopeless`) or fits no level even at its
    least footprint (every group holding both holds the closure)."""
    alone = sum(1 << i for i in range(len(sp.units)) if sp.alone[i])
    pool = region & ~alone
    ids = _bits(region)
    out: set[tuple[int, int]] = set()
    for x, a in enumerate(ids):
        for b in ids[x + 1 :]:
            c = sp.closure(1 << a | 1 << b)
            held = sum(sp.anchors[i] for i in _bits(c))
            if (
                c & ~pool
                or sp.rep[a] != sp.rep[b]
                or not sp.monotone_ok(c, held, 0, len(sp.units))
                or (held and sp.hopeless(c, pool))
                or not _capacity_ok(sp, c)
            ):
                out.add((a, b))
    return out


#: the largest region the partition floor is built for: its transitivity rows grow as the cube of
#: the units (3 C(n, 3): 857,220 at 120 units), built and held in memory before HiGHS runs
_PARTITION_MAX_UNITS = 120


def _partition_floor(sp: _Space, region: int, time_limit_s: float) -> tuple[float, list[int] | None]:
    """A lower bound on the objective of every plan of ``region`` from
    :func:`costmodel.fusion_bound.partition_traffic_floor` (0 where it does not apply), and the
    relaxation's best partition when it is a valid plan (every part a legal candidate, no cycle
    of kernels), else None.

    Every kernel's weight is at least its DRAM time with the tie-break, :math:`(1 + \\epsilon)
    D/\\beta`, times its repeat count (``time``: the roofline bound is at least the DRAM term, the
    launch is not negative; ``bytes``: the same terms swapped), and the plan's ``D`` adds up to at
    least the floor. One repeat count per region and at most :data:`_PARTITION_MAX_UNITS` units
    (else 0: the one-kernel floor stands)."""
    ids = _bits(region)
    reps = {sp.rep[i] for i in ids}
    if len(reps) != 1 or not solver_available() or len(ids) > _PARTITION_MAX_UNITS:
        return 0.0, None
    fl = partition_traffic_floor(sp.g, sp.units, ids, _conflicts(sp, region), time_limit_s)
    bound = reps.pop() * (1 + _TIE) * fl.bytes / sp.bw
    plan = []
    for part in fl.parts:
        mask = sum(1 << i for i in part)
        if sp.candidate(mask) is None:
            return bound, None
        plan.append(mask)
    if not plan or _quotient_cycle(sp, plan):
        return bound, None
    return bound, plan


def _solve_regions(
    sp: _Space,
    regions: list[int],
    extras: list[int],
    start: list[int],
    max_units: int,
    max_candidates: int,
    time_limit_s: float,
) -> tuple[bool, list[int], float, float | None, int, bool, str]:
    """The exact plan, solved region by region (module doc); regions whose optima together make
    a cycle of kernels are merged and solved again. Returns (every region proved optimal, the
    chosen groups, their objective, a proven lower bound (None: unknown), candidates, every
    enumeration complete, the last non-optimal HiGHS status)."""
    cands: dict[int, list[int]] = {}
    done: dict[int, tuple[_Solved, bool]] = {}
    ncand = 0

    def enumerate_region(r: int) -> tuple[list[int], bool]:
        masks, complete = _enumerate(
            sp, max_units, max_candidates, within=r, deadline=time.perf_counter() + time_limit_s
        )
        inside = [c for c in (*extras, *start) if c & r == c]
        return list(dict.fromkeys([*masks, *inside])), complete

    def solve(r: int, masks: list[int], complete: bool) -> tuple[_Solved, bool]:
        mine = [c for c in start if c & r == c]
        if r & (r - 1) == 0:  # one unit: its own kernel
            w = sp.candidate(r)[0]  # type: ignore[index]
            return _Solved([r], w, w, True, "Optimal"), True
        floor, plan = 0.0, None
        if not complete:
            # HiGHS's bound would hold over the enumerated groups only: bound the region by the
            # better of its one-kernel floor and the clique-partition traffic floor, whose best
            # partition, when it is a valid plan, may meet it (then the region is proved)
            floor, plan = _partition_floor(sp, r, time_limit_s)
            floor = max(floor, _floor(sp, r))
            if plan is not None:
                masks.extend(c for c in plan if c not in set(masks))
                if _weight(sp, plan) <= floor * (1 + 1e-9):
                    return _Solved(plan, _weight(sp, plan), floor, True, "Optimal"), complete
        res = _solve(sp, masks, time_limit_s, mine, universe=r)
        if not res.chosen:  # no plan found in time: the heuristic's groups in the region
            res = _Solved(mine, _weight(sp, mine), res.bound, False, res.status)
        if not complete:
            if plan is not None and _weight(sp, plan) < res.value:
                res = dataclasses.replace(res, chosen=plan, value=_weight(sp, plan))
            res = dataclasses.replace(res, bound=floor, solved=res.value <= floor * (1 + 1e-9))
        return res, complete

    for r in regions:
        cands[r], complete = enumerate_region(r)
        ncand += len(cands[r])
        done[r] = solve(r, cands[r], complete)
    while True:
        chosen = [c for res, _ in done.values() for c in res.chosen]
        cycle = _quotient_cycle(sp, chosen)
        if not cycle:
            break
        # a cycle through several regions' kernels: solve those regions as one
        hit = [r for r in done if any(c & r for c in cycle)]
        if len(hit) < 2:  # each region's own cycles are cut: a cycle inside one is a bug, said loudly
            raise CostModelError("planner produced a cycle of kernels inside one region")
        merged = 0
        for r in hit:
            merged |= r
        masks = [c for r in hit for c in cands.pop(r)]
        complete = all(done[r][1] for r in hit)
        for r in hit:
            del done[r]
        cands[merged] = masks
        done[merged] = solve(merged, masks, complete)
    results = list(done.values())
    value = sum(res.value for res, _ in results)
    bounds = [res.bound for res, _ in results]
    lower = None if any(b is None for b in bounds) else sum(b for b in bounds if b is not None)
    status = next((res.status for res, _ in results if not res.solved), "")
    return (
        all(res.solved for res, _ in results),
        chosen,
        value,
        lower,
        ncand,
        all(c for _, c in results),
        status,
    )


def _weight(sp: _Space, masks: list[int]) -> float:
    """The objective of a plan given as unit masks (every mask a priced candidate)."""
    total = 0.0
    for c in masks:
        cand = sp.candidate(c)
        assert cand is not None  # masks come from candidates or the offered groups
        total += cand[0]
    return total


def _better_with(sp: _Space, chosen: list[int], extras: list[int]) -> list[int]:
    """Swap in an extra group (with singletons for what it displaces) where that lowers the objective."""
    for e in extras:
        touched = [c for c in chosen if c & e]
        rest = [c for c in chosen if not c & e]
        leftover = 0
        for c in touched:
            leftover |= c & ~e
        trial = [*rest, e, *(1 << i for i in _bits(leftover))]
        if _quotient_cycle(sp, trial):
            continue
        if _weight(sp, trial) < _weight(sp, chosen):
            chosen = trial
    return chosen


def _result(g, hw, leg, objective, plan, method, solver, optimal, gap, ncand, complete, solve_s, notes):  # type: ignore[no-untyped-def]
    total = plan_cost(g, plan)
    rows = []
    kernel_t = 0.0
    for gr in plan.groups:
        rep = as_float(to_expr(g.nodes[gr.members[0]].get(REPEAT, 1), field="repeat"))
        c = group_cost(g, plan, gr)
        t = kernel_time(c, hw) * rep
        kernel_t += t
        before_b = sum(as_float(g.nodes[m][COST].bytes) for m in gr.members) * rep
        before_t = sum(kernel_time(g.nodes[m][COST], hw) for m in gr.members) * rep
        claim = claim_level(g, gr.members, hw, leg) if len(gr.members) > 1 else None
        rows.append(
            PlannedGroup(
                gr.name,
                gr.members,
                claim.level if claim else None,
                claim.footprint_bytes if claim else 0.0,
                claim.capacity_bytes if claim else None,
                as_float(c.bytes) * rep,
                t,
                before_b - as_float(c.bytes) * rep,
                before_t - t,
            )
        )
    return PlanResult(
        device=hw.name,
        backend=leg.name,
        objective=objective,
        method=method,
        solver=solver,
        optimal=optimal,
        gap=gap,
        candidates=ncand,
        complete=complete,
        flops=as_float(total.flops),
        bytes=as_float(total.bytes),
        time_s=kernel_t,
        kernels=as_float(total.kernels),
        groups=tuple(rows),
        plan=plan,
        solve_s=solve_s,
        notes=tuple(notes),
    )


def kernel_time(c: Cost, hw: Hardware) -> float:
    """A kernel's roofline bound with its launch (a view's is zero)."""
    b = bound(c, hw)
    return as_float(b.time) if b.terms else as_float(b.launch)
