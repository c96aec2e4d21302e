"""Fusion audit: what each kernel boundary costs, what fusing saves, what fits on chip.

:func:`audit` prices a plan against the unfused baseline and the ideal on a
device: per group (FLOPs, DRAM bytes, intensity, bound kind, time before and
after), per boundary (the bytes a tensor costs by crossing kernels: one write
and one read per consuming kernel, ranked by their share of the time), and
the on-chip footprint of every fused group against the level it claims.
:func:`suggest_fusions` proposes groups from common patterns and says for
each what it saves and whether it stays memory-bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import networkx as nx
import sympy

from .cost import Cost, as_float
from .expr import to_expr
from .fusion import (
    FusionPlan,
    Group,
    PlanIssue,
    check_plan,
    group_cost,
    ideal_cost,
    out_bytes,
    plan_cost,
    plan_from_groups,
    unfused_plan,
)
from .graph import BYTES, COST, PARAMS, REPEAT, op_nodes
from .hardware.spec import Hardware
from .results import Result
from .roofline import bound

__all__ = [
    "AuditReport",
    "GroupRow",
    "Footprint",
    "PlanTotals",
    "audit",
    "Suggestion",
    "suggest_fusions",
    "boundaries",
    "Boundary",
]


def _time(c: Cost, hw: Hardware) -> float:
    b = bound(c, hw)
    return as_float(b.time) if b.terms else as_float(b.launch)


def _rep(g: nx.DiGraph, n: str) -> float:
    return as_float(to_expr(g.nodes[n].get(REPEAT, 1), field=f"{n} repeat"))


@dataclass(frozen=True)
class Boundary(Result):
    """A tensor crossing kernel boundaries: one write plus one read per consuming group, at DRAM
    bandwidth, times the producer's repeat count."""

    producer: str
    consumers: tuple[str, ...]
    bytes: float
    time_s: float
    share: float = 0.0  #: of the unfused layer's summed kernel bounds


def boundaries(g: nx.DiGraph, plan: FusionPlan, hw: Hardware) -> list[Boundary]:
    """Tensors crossing kernel boundaries under ``plan``, most expensive first.

    Each: producer, bytes (one write plus one read per consuming group),
    the time those bytes take at DRAM bandwidth (times the repeat count).
    """
    bw = as_float(hw.bandwidth())
    home = {m: gr.name for gr in plan.groups for m in gr.members}
    out = []
    for u in op_nodes(g):
        readers: dict[str, float] = {}
        for v in g.successors(u):
            if v in home and home[v] != home.get(u):
                b = as_float(to_expr(g.edges[u, v].get(BYTES, 0), field=f"edge {u}->{v} bytes"))
                readers[home[v]] = max(readers.get(home[v], 0.0), b)
        if not readers:
            continue
        write = as_float(sympy.Min(g.nodes[u][COST].bytes_written(), out_bytes(g, u)))
        nbytes = (write + sum(readers.values())) * _rep(g, u)
        out.append(Boundary(u, tuple(sorted(readers)), nbytes, nbytes / bw))
    return sorted(out, key=lambda r: -r.time_s)


@dataclass(frozen=True)
class GroupRow(Result):
    """A fused group of the plan: its cost before (members as separate kernels) and after."""

    group: str
    members: tuple[str, ...]
    repeat: float
    flops: float
    bytes_before: float
    bytes_after: float
    intensity: float | None
    kind: str
    time_before_s: float
    time_after_s: float


@dataclass(frozen=True)
class Footprint(Result):
    """On-chip bytes one SM holds for a fused group at the level it claims
    (:func:`costmodel.fusion_legality.working_set_bytes`: its internal tensors' tiles and its
    GEMMs' working sets; the capacity is the level's per SM, L2's shared by the SMs; None:
    unknown)."""

    group: str
    level: str
    footprint_bytes: float
    capacity_bytes: float | None
    fits: bool | None


@dataclass(frozen=True)
class PlanTotals(Result):
    """A plan's whole cost: FLOPs, DRAM bytes, kernels, its roofline (time and lower bound) and
    the sum of its kernels' bounds (None for the ideal, which is not a set of kernels)."""

    flops: float
    dram_bytes: float
    kernels: float
    time_s: float
    lower_s: float
    sum_of_kernel_bounds_s: float | None = None


@dataclass(frozen=True)
class AuditReport(Result):
    """Result of :func:`audit`: the plan's issues, groups, boundaries, totals and footprints."""

    device: str
    issues: tuple[PlanIssue, ...]
    groups: tuple[GroupRow, ...]
    boundaries: tuple[Boundary, ...]
    unfused: PlanTotals
    ideal: PlanTotals
    plan: PlanTotals | None  #: None when the plan is invalid
    footprints: tuple[Footprint, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["issues"] = [str(i) for i in self.issues]
        return d


def _summary(c: Cost, hw: Hardware, kernel_bounds_s: float | None = None) -> PlanTotals:
    b = bound(c, hw)
    return PlanTotals(
        as_float(c.flops),
        as_float(c.bytes),
        as_float(c.kernels),
        as_float(b.time),
        as_float(b.lower),
        kernel_bounds_s,
    )


def _no_capacity(hw: Hardware, level: str) -> str:
    """Why a group's on-chip fit at ``level`` is not checked: the level is unknown or states no
    capacity, or it is shared by the device's SMs and the device states no SM count (Gaudi 3's
    96 MiB L2: one SM's share is unknown)."""
    lvl = next((m for m in hw.memory if m.name == level), None)
    if lvl is not None and lvl.capacity_bytes is not None and lvl.per != "sm" and not hw.sm_count:
        return (
            f"device {hw.name!r} states no SM count, so one SM's share of its {level} is unknown: "
            "on-chip fit not checked"
        )
    return f"device {hw.name!r} gives no {level} capacity: on-chip fit not checked"


def audit(g: nx.DiGraph, hw: Hardware, plan: FusionPlan | None = None) -> AuditReport:
    """Price ``plan`` (default: the suggested plan) against unfused and ideal."""
    from .fusion_legality import get_legality, level_capacity, working_set_bytes

    leg = get_legality("default")
    plan = plan or suggest_fusions(g, hw)[1]
    issues = check_plan(g, plan)
    base = unfused_plan(g)
    layer_time = sum(_time(g.nodes[n][COST], hw) * _rep(g, n) for n in op_nodes(g))
    groups: list[GroupRow] = []
    foot: list[Footprint] = []
    if not issues:
        for gr in plan.groups:
            rep = _rep(g, gr.members[0])
            after = group_cost(g, plan, gr)
            before_t = sum(_time(g.nodes[m][COST], hw) for m in gr.members)
            before_b = sum(as_float(g.nodes[m][COST].bytes) for m in gr.members)
            b = bound(after, hw)
            groups.append(
                GroupRow(
                    group=gr.name,
                    members=tuple(gr.members),
                    repeat=rep,
                    flops=as_float(after.flops),
                    bytes_before=before_b,
                    bytes_after=as_float(after.bytes),
                    intensity=as_float(after.flops) / as_float(after.bytes)
                    if as_float(after.bytes)
                    else None,
                    kind=b.kind if b.terms else "none",
                    time_before_s=before_t * rep,
                    time_after_s=_time(after, hw) * rep,
                )
            )
            if len(gr.members) > 1:
                fp = working_set_bytes(g, gr, leg)
                cap = level_capacity(hw, gr.level)
                foot.append(Footprint(gr.name, gr.level, fp, cap, None if cap is None else fp <= cap))
                if cap is not None and fp > cap:
                    issues.append(
                        PlanIssue(
                            gr.name,
                            f"its working set needs {fp:.0f} B of {gr.level} per SM but the device "
                            f"gives {cap:.0f} B: use smaller tiles or count the re-reads",
                        )
                    )
                elif cap is None:
                    issues.append(
                        PlanIssue(
                            gr.name,
                            _no_capacity(hw, gr.level),
                        )
                    )
    bds = [
        dataclasses.replace(r, share=r.time_s / layer_time if layer_time else 0.0)
        for r in (boundaries(g, plan, hw) if not check_plan(g, plan) else [])
    ]
    valid = not check_plan(g, plan)
    return AuditReport(
        device=hw.name,
        issues=tuple(issues),
        groups=tuple(groups),
        boundaries=tuple(bds),
        unfused=_summary(plan_cost(g, base), hw, layer_time),
        ideal=_summary(ideal_cost(g), hw),
        plan=_summary(plan_cost(g, plan), hw, sum(r.time_after_s for r in groups)) if valid else None,
        footprints=tuple(foot),
    )


@dataclass(frozen=True)
class Suggestion:
    """A proposed fused group and what it buys on a device."""

    group: Group
    pattern: str
    bytes_saved: float
    time_saved_s: float
    kind_after: str
    still_memory_bound: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "members": list(self.group.members),
            "pattern": self.pattern,
            "bytes_saved": self.bytes_saved,
            "time_saved_s": self.time_saved_s,
            "kind_after": self.kind_after,
            "still_memory_bound": self.still_memory_bound,
        }


#: on-chip tile of each pattern's intermediates: (rows, cols); None keeps the full extent
_TILES = {
    "attention": (128, 128),  # S/P tiles of a FlashAttention block
    "gated": (128, 128),  # output tiles of the two matmuls
    "matmul": (128, 128),  # the matmul's output tile through its epilogue
    "residual": (1, None),  # one whole row per block: the norm reduces over it
    "elementwise": (1024, None),
}


def _candidates(g: nx.DiGraph) -> list[tuple[str, list[str]]]:
    """The patterns' candidate groups, told apart by op class (the legality table's data,
    :data:`costmodel.fusion_legality.OP_CLASSES`) and graph structure, never by rule name."""
    from .fusion_legality import activation_gemm, get_legality

    leg = get_legality("default")
    # a list in topological order, never a set: the candidates' order (and so which of two
    # overlapping ones the greedy pass keeps) must not depend on the string hash seed
    order = op_nodes(g)
    ops = set(order)
    cls = {n: leg.class_of(g, n) for n in order}

    def two_input_pointwise(n: str) -> bool:
        return cls.get(n) == "elementwise" and g.nodes[n][PARAMS].get("inputs") == 2

    found: list[tuple[str, list[str]]] = []
    # the softmax chain into attention: S = QK^T -> softmax (a row reduction) -> PV, both
    # matmuls products of two activations
    for n in order:
        if cls[n] == "reduction":
            pre = [u for u in g.predecessors(n) if u in ops and activation_gemm(g, u, leg)]
            post = [v for v in g.successors(n) if v in ops and activation_gemm(g, v, leg)]
            if len(pre) == 1 and len(post) == 1 and list(g.successors(pre[0])) == [n]:
                found.append(("attention: fuse the softmax chain (FlashAttention)", [pre[0], n, post[0]]))
    # gated MLP: gate and up matmuls read the same input, their product is the activation
    for n in order:
        if two_input_pointwise(n):
            pre = [u for u in g.predecessors(n) if cls.get(u) == "gemm" and not activation_gemm(g, u, leg)]
            if len(pre) == 2:
                src = [set(g.predecessors(u)) - {s for s in g.predecessors(u) if s not in ops} for u in pre]
                if src[0] and src[0] == src[1] and all(list(g.successors(u)) == [n] for u in pre):
                    found.append(("gated MLP: gate*up into one kernel (x read once)", [*sorted(pre), n]))
    # elementwise epilogues: a matmul whose only consumer is elementwise
    for n in order:
        if cls[n] == "gemm":
            succ = list(g.successors(n))
            if len(succ) == 1 and cls.get(succ[0]) == "elementwise":
                found.append(("matmul epilogue: elementwise fused into the producer", [n, succ[0]]))
    # residual add + the norm that reads it (fused add-norm)
    for n in order:
        if cls[n] == "norm":
            pre = [u for u in g.predecessors(n) if two_input_pointwise(u)]
            if len(pre) == 1:
                found.append(("residual add + norm in one pass", [pre[0], n]))
    # chains of elementwise ops
    for n in order:
        if cls[n] == "elementwise":
            succ = list(g.successors(n))
            if len(succ) == 1 and cls.get(succ[0]) == "elementwise":
                found.append(("elementwise chain in one pass", [n, succ[0]]))
    return found


def suggest_fusions(g: nx.DiGraph, hw: Hardware) -> tuple[list[Suggestion], FusionPlan]:
    """Greedy, non-overlapping fusions from common patterns, best first.

    Patterns: the softmax chain into attention, a gated MLP's gate*up,
    elementwise epilogues into their producer matmul, a residual add with the
    norm that reads it, and elementwise chains. Each candidate is kept only if
    convex and it saves bytes; each node joins one group at most. Candidates are tried pattern by
    pattern in the graph's topological order, so the answer does not depend on the hash seed.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph (its nodes' costs numeric).
    hw : Hardware
        The device the savings are timed on.

    Returns
    -------
    list of Suggestion
        The kept fusions, by time saved (descending, to 9 significant digits), then bytes saved
        (descending), then group name.
    FusionPlan
        The plan with every kept group.
    """
    from . import notes
    from .fusion_legality import claim_level, get_legality, working_set_bytes

    leg = get_legality("default")
    taken: set[str] = set()
    groups: list[Group] = []
    out: list[Suggestion] = []
    for pattern, members in _candidates(g):
        if taken & set(members):
            continue
        rows, cols = _TILES[pattern.split()[0].rstrip(":")]
        gr = Group(
            "+".join(m.split(".")[-1] for m in members), tuple(members), tile_rows=rows, tile_cols=cols
        )
        trial = plan_from_groups(g, [*groups, gr])
        if check_plan(g, trial):
            continue
        claim = claim_level(g, gr.members, hw, leg, working_set_bytes(g, gr, leg))
        if claim.checked and claim.level is None:
            # the planner prices on-chip fit the same way: a group no level holds is no kernel
            notes.say(
                f"fusion {gr.name} ({pattern.split(':')[0]}) not suggested: its working set at "
                f"{leg.anchor_tile}x{leg.anchor_tile} GEMM tiles, {claim.footprint_bytes:,.0f} B, fits "
                f"no on-chip level of {hw.name} (at most {claim.capacity_bytes:,.0f} B per SM)"
            )
            continue
        if claim.level is not None:
            gr = dataclasses.replace(gr, level=claim.level)
            trial = plan_from_groups(g, [*groups, gr])
        after = group_cost(g, trial, gr)
        before_b = sum(as_float(g.nodes[m][COST].bytes) for m in members)
        saved = before_b - as_float(after.bytes)
        if saved <= 0:
            continue
        rep = _rep(g, members[0])
        before_t = sum(_time(g.nodes[m][COST], hw) for m in members)
        b = bound(after, hw)
        kind = b.kind if b.terms else "none"
        out.append(
            Suggestion(
                gr,
                pattern,
                saved * rep,
                (before_t - _time(after, hw)) * rep,
                kind,
                kind not in ("tensor", "vector", "sfu"),
            )
        )
        groups.append(gr)
        taken |= set(members)
    # best first: time saved (to 9 significant digits: savings equal but for float rounding, as the
    # q and o projections' epilogues, tie), then bytes saved (both descending), then the group's name
    out.sort(key=lambda s: (-float(f"{s.time_saved_s:.9g}"), -s.bytes_saved, s.group.name))
    return out, plan_from_groups(g, groups)
