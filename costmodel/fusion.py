"""Fusion plans: groups of ops run as one kernel, their validity and their cost.

A plan partitions a graph's op nodes into groups (a node may sit in several
groups only when it is declared recomputed). A valid group is *convex*: no
path leaves it and comes back. A fused group

* does the FLOPs of its members (a recomputed producer counts in every group
  that recomputes it);
* reads each external input once (the largest read any member makes of that
  producer), plus the members' side reads (tables, indices);
* writes a member's output only if something outside the group consumes it,
  it is a graph output, or it is persistent state (a KV-cache write); a
  multi-output group writes each output that leaves; internal edges are free;
* launches one kernel (``Hardware.launch_overhead_s`` each).

Views (metadata-only ops: no FLOPs, no bytes) are looked through: a view in a
group whose consumer is outside still makes its producer write, and a group
holding a view of an outside tensor reads what its members read of the view.

A single-op group costs exactly its node's cost, so the unfused plan is the
baseline. The *ideal* reads every source (weights, inputs, caches) once and
writes every final output once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import sympy

from .cost import Cost, as_float
from .errors import CostModelError
from .expr import to_expr
from .graph import BYTES, COST, KIND, OP_KIND, OUTPUTS, REPEAT, SOURCE_KINDS, TENSOR, op_nodes

__all__ = [
    "Group",
    "FusionPlan",
    "PlanIssue",
    "FusionError",
    "unfused_plan",
    "plan_from_groups",
    "check_plan",
    "group_cost",
    "group_traffic",
    "plan_cost",
    "ideal_cost",
    "group_footprint",
    "is_free",
    "source_view",
    "free_ops_memo",
    "out_bytes",
    "is_persistent",
]


class FusionError(CostModelError):
    """A fusion plan is invalid (see :func:`check_plan` for the issues)."""


@dataclass(frozen=True)
class Group:
    """Ops fused into one kernel, the on-chip level its intermediates claim,
    and the tile of each intermediate held there (rows x cols; ``None`` keeps
    the full extent)."""

    name: str
    members: tuple[str, ...]
    level: str = "smem"
    tile_rows: int | None = 128
    tile_cols: int | None = 128


@dataclass(frozen=True)
class FusionPlan:
    groups: tuple[Group, ...]
    recompute: frozenset[str] = field(default_factory=frozenset)

    def groups_of(self, node: str) -> list[Group]:
        return [gr for gr in self.groups if node in gr.members]

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data a user or a compiler can apply: ``Group(**d)`` rebuilds each."""
        return {
            "groups": [
                {
                    "name": gr.name,
                    "members": list(gr.members),
                    "level": gr.level,
                    "tile_rows": gr.tile_rows,
                    "tile_cols": gr.tile_cols,
                }
                for gr in self.groups
            ],
            "recompute": sorted(self.recompute),
        }


@dataclass(frozen=True)
class PlanIssue:
    """One problem of a plan: which group, what, and the offending path if any."""

    group: str
    problem: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        tail = f" (path: {' -> '.join(self.path)})" if self.path else ""
        return f"group {self.group!r}: {self.problem}{tail}"


def unfused_plan(g: nx.DiGraph) -> FusionPlan:
    """One kernel per op: the baseline."""
    return FusionPlan(tuple(Group(n, (n,)) for n in op_nodes(g)))


def plan_from_groups(g: nx.DiGraph, groups: list[Group], recompute: set[str] | None = None) -> FusionPlan:
    """``groups`` plus a singleton group for every op node they leave out."""
    covered = {m for gr in groups for m in gr.members}
    rest = [Group(n, (n,)) for n in op_nodes(g) if n not in covered]
    return FusionPlan(tuple(groups) + tuple(rest), frozenset(recompute or ()))


def check_plan(g: nx.DiGraph, plan: FusionPlan) -> list[PlanIssue]:
    """Every problem of ``plan`` on ``g`` (empty when valid).

    Checks membership (op nodes only), coverage (every op once, or several
    times when declared recomputed), convexity (with the offending path),
    and that a group does not mix layer groups of different repeat counts.
    """
    issues: list[PlanIssue] = []
    seen: dict[str, int] = {}
    for gr in plan.groups:
        if not gr.members:
            issues.append(PlanIssue(gr.name, "is empty"))
        for m in gr.members:
            if m not in g:
                issues.append(PlanIssue(gr.name, f"member {m!r} is not in the graph"))
            elif g.nodes[m].get(KIND) != OP_KIND:
                issues.append(PlanIssue(gr.name, f"member {m!r} is a {g.nodes[m].get(KIND)} node, not an op"))
            seen[m] = seen.get(m, 0) + 1
    for n in op_nodes(g):
        if n not in seen:
            issues.append(PlanIssue("-", f"op {n!r} is in no group"))
        elif seen[n] > 1 and n not in plan.recompute:
            issues.append(PlanIssue("-", f"op {n!r} is in {seen[n]} groups but not declared recomputed"))
    for gr in plan.groups:
        members = [m for m in gr.members if m in g]
        reps = {to_expr(g.nodes[m].get(REPEAT, 1), field=f"{m} repeat") for m in members}
        if len(reps) > 1:
            issues.append(PlanIssue(gr.name, f"mixes nodes repeated {sorted(map(str, reps))} times"))
        path = _escape_path(g, set(members))
        if path:
            issues.append(PlanIssue(gr.name, "is not convex: a path leaves the group and re-enters", path))
    return issues


def _escape_path(g: nx.DiGraph, members: set[str]) -> tuple[str, ...]:
    for u in members:
        for v in g.successors(u):
            if v in members:
                continue
            back = nx.descendants(g, v) & members
            if back:
                w = min(back)
                return (u, *nx.shortest_path(g, v, w))
    return ()


def _in_bytes(g: nx.DiGraph, n: str) -> sympy.Expr:
    return sympy.Add(
        *(to_expr(g.edges[u, n].get(BYTES, 0), field=f"edge {u}->{n} bytes") for u in g.predecessors(n))
    )


def out_bytes(g: nx.DiGraph, n: str) -> sympy.Expr:
    """Bytes of every tensor node ``n`` produces (what writing its outputs out costs)."""
    return sympy.Add(*(t.bytes for t in g.nodes[n].get(OUTPUTS, ())))


def is_free(g: nx.DiGraph, n: str) -> bool:
    """A metadata-only op (a view, a transpose, a reshape): no FLOPs, no bytes, no kernel."""
    memo = _FREE_MEMO.get(id(g))
    if memo is not None and n in memo:
        return memo[n]
    c = g.nodes[n].get(COST)
    free = g.nodes[n].get(KIND) == OP_KIND and c is not None and c.flops == 0 and c.bytes == 0
    if memo is not None:
        memo[n] = free
    return free


_FREE_MEMO: dict[int, dict[str, bool]] = {}


@contextlib.contextmanager
def free_ops_memo(g: nx.DiGraph) -> Iterator[None]:
    """Within the block, :func:`is_free` answers for ``g`` from a memo (for a planner that asks
    about the same nodes many times; the graph must not change inside the block)."""
    mine = id(g) not in _FREE_MEMO
    if mine:
        _FREE_MEMO[id(g)] = {}
    try:
        yield
    finally:
        if mine:
            del _FREE_MEMO[id(g)]


def _read_through(g: nx.DiGraph, u: str, m: str, mset: set[str], depth: int = 0) -> sympy.Expr:
    """Bytes a group holding ``m`` reads from outside producer ``u`` over edge ``u -> m``; when
    ``m`` is a view in the group (it reads nothing itself), what the group's members read of it."""
    b = to_expr(g.edges[u, m].get(BYTES, 0), field=f"edge {u}->{m} bytes")
    if b == 0 and depth < 16 and is_free(g, m):
        # per tensor the view yields, the most any member reads of it; distinct tensors (the parts
        # of a split) add up
        per: dict[str, list[sympy.Expr]] = {}
        for w in g.successors(m):
            if w in mset:
                per.setdefault(g.edges[m, w][TENSOR].name, []).append(_read_through(g, m, w, mset, depth + 1))
        if per:
            return sympy.Add(*(sympy.Max(*v) if len(v) > 1 else v[0] for v in per.values()))
    return b


def _consumers_outside(g: nx.DiGraph, m: str, mset: set[str], depth: int = 0) -> tuple[list[str], bool]:
    """Consumers of ``m``'s output outside the group, looking through the group's views (a view
    inside the group whose consumer is outside still needs ``m`` in DRAM), and whether the value
    is a graph output (``m``, or a view of it in the group, has no consumer)."""
    outside, sink = [], not list(g.successors(m))
    for v in g.successors(m):
        if v not in mset:
            outside.append(v)
        elif depth < 16 and is_free(g, v):
            more, end = _consumers_outside(g, v, mset, depth + 1)
            outside += more
            sink = sink or end
    return outside, sink


def is_persistent(g: nx.DiGraph, n: str) -> bool:
    """Whether ``n`` writes into persistent state (the KV cache): that write always reaches DRAM."""
    return "kv_cache" in g.nodes[n][COST].footprint_terms


def group_traffic(
    g: nx.DiGraph, plan: FusionPlan, group: Group, memo: dict[Any, float] | None = None
) -> tuple[Any, Any]:
    """DRAM bytes (read, written) of one kernel running ``group`` (module doc).

    With ``memo`` (a dict the caller keeps for one numeric graph) every node's and edge's bytes
    are read once as floats and the sums and maxima are Python's: the same accounting, fast
    enough for a planner pricing many candidate groups."""
    members = list(group.members)
    mset = set(members)
    if memo is None:
        val, mx = (lambda key, f: f()), sympy.Max
    else:

        def val(key: Any, f: Any) -> float:
            if key not in memo:
                memo[key] = as_float(f())
            return memo[key]

        mx = max
    ext: dict[tuple[str, str], Any] = {}
    side: Any = 0
    for m in members:
        for u in g.predecessors(m):
            if u in mset:
                continue
            direct = val(
                ("e", u, m), lambda u=u, m=m: to_expr(g.edges[u, m].get(BYTES, 0), field="edge bytes")
            )
            b = direct if direct != 0 or not is_free(g, m) else _read_through(g, u, m, mset)
            b = as_float(b) if memo is not None else b
            key = (u, g.edges[u, m][TENSOR].name)  # each tensor once; a producer's distinct outputs add up
            ext[key] = b if key not in ext else mx(ext[key], b)
        side += val(("s", m), lambda m=m: sympy.Max(0, g.nodes[m][COST].bytes_read() - _in_bytes(g, m)))
    writes: Any = 0
    for m in members:
        outside, sink = _consumers_outside(g, m, mset)
        # a consumer elsewhere that recomputes m itself does not need m's output from DRAM
        needs = [v for v in outside if not any(m in gr.members for gr in plan.groups_of(v))]
        first_writer = next((gr for gr in plan.groups if m in gr.members), group) is group
        if (needs or sink or is_persistent(g, m)) and first_writer:
            writes += val(("w", m), lambda m=m: sympy.Min(g.nodes[m][COST].bytes_written(), out_bytes(g, m)))
    reads = sum(ext.values(), side) if memo is not None else sympy.Add(*ext.values()) + side
    return reads, writes


def group_cost(g: nx.DiGraph, plan: FusionPlan, group: Group) -> Cost:
    """Cost of one kernel running ``group`` (module doc)."""
    members = list(group.members)
    if len(members) == 1:
        return g.nodes[members[0]][COST]
    flops = Cost(
        flop_terms={
            key: sympy.Add(*(g.nodes[m][COST].flop_terms.get(key, 0) for m in members))
            for key in {k for m in members for k in g.nodes[m][COST].flop_terms}
        }
    )
    reads, writes = group_traffic(g, plan, group)
    others = Cost.zero()
    for m in members:
        c = g.nodes[m][COST]
        others += Cost(
            footprint_terms=c.footprint_terms, comm_terms=c.comm_terms, comm_step_terms=c.comm_step_terms
        )
    return flops + Cost.traffic(read=reads, write=writes) + Cost.launches(1) + others


def plan_cost(g: nx.DiGraph, plan: FusionPlan, *, check: bool = True) -> Cost:
    """Sum of group costs times their repeat counts; invalid plans raise."""
    if check:
        issues = check_plan(g, plan)
        if issues:
            raise FusionError("invalid fusion plan: " + "; ".join(str(i) for i in issues))
    total = Cost.zero()
    for gr in plan.groups:
        total += group_cost(g, plan, gr) * g.nodes[gr.members[0]].get(REPEAT, 1)
    return total


def _source_read(g: nx.DiGraph, u: str, v: str, depth: int = 0) -> sympy.Expr:
    """Bytes ``v`` reads from ``u`` (times its repeat); through a view (an op that moves no
    bytes, e.g. a weight's transpose), what the view's consumers read of it."""
    b = to_expr(g.edges[u, v].get(BYTES, 0), field=f"edge {u}->{v} bytes")
    rep = to_expr(g.nodes[v].get(REPEAT, 1), field=f"{v} repeat")
    cost = g.nodes[v].get(COST)
    if b == 0 and depth < 16 and cost is not None and cost.bytes == 0 and cost.flops == 0:
        onward = [_source_read(g, v, w, depth + 1) for w in g.successors(v)]
        if onward:
            return sympy.Max(*onward) if len(onward) > 1 else onward[0]
    return b * rep


def ideal_cost(g: nx.DiGraph) -> Cost:
    """Every source read once, every final output written once, all FLOPs, one kernel per layer copy.

    Source reads use the largest read any consumer makes (a gather's rows,
    the touched experts), times the consumers' repeat.
    """
    flops = Cost.zero()
    for n in op_nodes(g):
        c = g.nodes[n][COST]
        flops += Cost(
            flop_terms=c.flop_terms, comm_terms=c.comm_terms, comm_step_terms=c.comm_step_terms
        ) * g.nodes[n].get(REPEAT, 1)
    reads = sympy.Integer(0)
    for s, d in g.nodes(data=True):
        if d.get(KIND) not in SOURCE_KINDS:
            continue
        per = [_source_read(g, s, v) for v in g.successors(s)]
        if per:
            reads += sympy.Max(*per) if len(per) > 1 else per[0]
    writes = sympy.Integer(0)
    for n in op_nodes(g):
        if not list(g.successors(n)) or is_persistent(g, n):
            writes += g.nodes[n][COST].bytes_written() * g.nodes[n].get(REPEAT, 1)
    return flops + Cost.traffic(read=reads, write=writes) + Cost.launches(1)


def source_view(g: nx.DiGraph, n: str, depth: int = 0) -> bool:
    """Whether ``n`` is a view of sources only (a transposed weight): what it yields is read from
    DRAM by its consumer, never an intermediate the kernel holds."""
    if not is_free(g, n) or depth > 16:
        return False
    preds = list(g.predecessors(n))
    return bool(preds) and all(
        g.nodes[p].get(KIND) in SOURCE_KINDS or source_view(g, p, depth + 1) for p in preds
    )


def group_footprint(g: nx.DiGraph, group: Group) -> sympy.Expr:
    """On-chip bytes of the group's live intermediates: one tile of each internal edge tensor
    (a view of a weight is no intermediate: its consumer streams it, e.g. a GEMM's working set).

    A tensor of shape ``(d_0, ..., d_{n-2}, d_{n-1})`` is a matrix of ``d_0 ... d_{n-2}`` rows
    (every leading dimension: batch, sequence, heads) and ``d_{n-1}`` columns, as a kernel
    flattens it; a tile keeps ``min(rows, tile_rows)`` of its rows and ``min(d_{n-1}, tile_cols)``
    of its columns (``None``: the full extent), so a tile's bytes are
    ``min(prod d_{<n-1}, tile_rows) * min(d_{n-1}, tile_cols) * dtype bytes``. A one-dimensional
    tensor is one column of ``d_0`` rows.
    """
    mset = set(group.members)
    seen: dict[str, sympy.Expr] = {}
    for u, v, d in g.edges(data=True):
        if u in mset and v in mset and not source_view(g, u):
            t = d[TENSOR]
            shape = list(t.shape)
            rows = sympy.Mul(*shape[:-1]) if len(shape) > 1 else (shape[0] if shape else sympy.Integer(1))
            cols = shape[-1] if len(shape) > 1 else sympy.Integer(1)
            if group.tile_rows is not None:
                rows = sympy.Min(rows, group.tile_rows)
            if group.tile_cols is not None and len(shape) > 1:
                cols = sympy.Min(cols, group.tile_cols)
            seen[t.name] = rows * cols * t.dtype.bytes
    return sympy.Add(*seen.values())
