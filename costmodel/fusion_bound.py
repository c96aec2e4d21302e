"""A lower bound on the DRAM traffic of every fusion plan of a region: clique partitioning.

The exact planner (:mod:`costmodel.fusion_plan`) bounds a region whose enumeration of legal
groups stops by its units as one kernel. That floor ignores what no plan avoids: two units that
never share a kernel (two GEMMs no template joins, an op on no path through a kernel's GEMM)
force every tensor between their kernels through DRAM. This module prices exactly that.

**The relaxation.** A plan of the region's units ``V`` is a partition into kernels. Keep only
two of the plan's conditions: the partition, and *conflicts* (pairs of units no legal group
holds together, given by the caller); drop convexity, acyclicity, capacity and every other rule.
With ``s_ij = 1`` when units ``i < j`` share a kernel, a partition is a 0/1 vector ``s`` that is
transitive (Grötschel and Wakabayashi's clique-partitioning polytope, *Math. Prog.* 45, 1989):

.. math::

    s_{ij} + s_{jk} - s_{ik} \\le 1 \\quad (\\text{each of the three rotations of } i<j<k),
    \\qquad s_{ij} = 0 \\ \\text{for a conflict}.

**The traffic of a partition**, as :func:`costmodel.fusion.group_traffic` counts it, with two
simplifications that only lower it (a view reading through to the group's members is counted 0,
and an op's consumers are seen through the views of its own unit only):

* a tensor ``t`` of producer ``u`` is read once per kernel that reads it and does not hold
  ``u``, the most any of that kernel's members reads of it. With the reader units sorted by
  what they read, ``r_1 \\ge r_2 \\ge ...``, the kernel's read is that of its first reader in
  the order, so the reads are :math:`\\sum_j r_j z_j` with
  :math:`z_j \\ge 1 - s_{u j} - \\sum_{l<j} s_{l j}`, :math:`z_j \\ge 0` (``z_j = 1`` exactly when
  reader ``j`` is the first of its kernel and ``u`` is elsewhere; ``s_{uj}`` is absent when
  ``u`` is outside the region);
* an op ``m`` of unit ``i`` is written (:math:`W_m`, the least of its written and output bytes)
  when it has no consumer, writes persistent state, has a consumer outside the region, or
  :math:`w_m \\ge 1 - s_{ij}` for a unit ``j`` holding a consumer (seen through the views unit
  ``i`` holds, as the traffic looks through a group's views);
* each op's reads beyond its inputs (``side``) are paid wherever it runs.

The minimum over ``s`` (a mixed-integer program solved with HiGHS; any bound HiGHS proves is a
bound too) is at most the traffic of every plan. A kernel of one op is priced by that op's own
DRAM bytes instead of :func:`~costmodel.fusion.group_traffic`; where the relaxation prices such a
singleton higher, by :math:`\\delta_i`, every kernel holding unit ``i`` is lowered by
:math:`\\delta_i` (a constant :math:`\\sum_i \\delta_i` off the bound), so it stays below every
plan's traffic.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import networkx as nx
import sympy

from .cost import as_float
from .expr import to_expr
from .fusion import FusionPlan, Group, group_traffic, is_free, is_persistent, out_bytes
from .graph import BYTES, COST, TENSOR

__all__ = ["TrafficFloor", "partition_traffic_floor", "quiet_stdout"]


@dataclass(frozen=True, slots=True)
class TrafficFloor:
    """A proven lower bound on the DRAM bytes of every plan of a region."""

    bytes: float  #: the bound (B)
    exact: bool  #: HiGHS proved the relaxation's optimum (else its dual bound, still a bound)
    status: str
    parts: tuple[tuple[int, ...], ...] = ()  #: the relaxation's best partition found (unit indices)


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence the process's C-level stdout in the block (HiGHS prints its banner on construction,
    before any option can turn it off)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def partition_traffic_floor(
    g: nx.DiGraph,
    units: Sequence[tuple[str, ...]],
    region: Sequence[int],
    conflicts: set[tuple[int, int]],
    time_limit_s: float = 10.0,
) -> TrafficFloor:
    """The least DRAM traffic of any partition of ``region`` (indices into ``units``, each a
    tuple of op names) that separates the ``conflicts`` (pairs ``(i, j)``, ``i < j``): a bound on
    every plan of the region (module doc).

    Parameters
    ----------
    g : the numeric cost graph.
    units : every planning unit of ``g`` (an op with the views of its output).
    region : the units to partition; ops of other units are outside (never in a kernel with them).
    conflicts : unit pairs no legal kernel holds together.
    time_limit_s : HiGHS's time limit; on it the bound is HiGHS's dual bound.

    Returns
    -------
    TrafficFloor
        Bytes (B) no plan of the region moves less than (HiGHS's dual bound, minus the singleton
        corrections), and the best partition HiGHS found, for the caller to check and use.
    """
    import highspy
    import numpy as np

    ids = list(region)
    pos = {u: k for k, u in enumerate(ids)}
    of = {m: pos[i] for i in ids for m in units[i]}
    n = len(ids)
    pair: dict[tuple[int, int], int] = {}
    for a, b in itertools.combinations(range(n), 2):
        pair[a, b] = len(pair)

    def s(a: int, b: int) -> int:
        return pair[(a, b) if a < b else (b, a)]

    const = 0.0
    cols_cost: list[float] = [0.0] * len(pair)
    rows: list[tuple[list[int], list[float], float]] = []  # sum coef*x >= lb

    def new_var(cost: float) -> int:
        cols_cost.append(cost)
        return len(cols_cost) - 1

    memo: dict[object, float] = {}

    def edge_bytes(u: str, m: str) -> float:
        key = ("e", u, m)
        if key not in memo:
            memo[key] = as_float(to_expr(g.edges[u, m].get(BYTES, 0), field=f"edge {u}->{m} bytes"))
        return memo[key]

    # reads: per tensor (producer, name), the reader units' largest read each
    readers: dict[tuple[str, str], dict[int, float]] = {}
    for m, k in of.items():
        for u in g.predecessors(m):
            if of.get(u) == k:
                continue
            read = edge_bytes(u, m) if (edge_bytes(u, m) != 0 or not is_free(g, m)) else 0.0
            key = (u, g.edges[u, m][TENSOR].name)
            per = readers.setdefault(key, {})
            per[k] = max(per.get(k, 0.0), read)
        c = g.nodes[m][COST]
        const += as_float(sympy.Max(0, c.bytes_read() - sum(edge_bytes(u, m) for u in g.predecessors(m))))
    for (u, _), per in readers.items():
        home = of.get(u)
        order = sorted(per, key=lambda k: -per[k])
        for idx, k in enumerate(order):
            r = per[k]
            if r <= 0:
                continue
            others = [s(k, home)] if home is not None else []
            others += [s(k, j) for j in order[:idx]]
            if not others:
                const += r
                continue
            z = new_var(r)  # z + sum s >= 1
            rows.append(([z, *others], [1.0] * (1 + len(others)), 1.0))
    # writes
    for m, k in of.items():
        w = as_float(sympy.Min(g.nodes[m][COST].bytes_written(), out_bytes(g, m)))
        if w <= 0:
            continue
        succ, sink = _consumers(g, m, of)
        if sink or is_persistent(g, m) or any(v not in of for v in succ):
            const += w
            continue
        others = sorted({of[v] for v in succ} - {k})
        if not others:
            continue
        x = new_var(w)  # x >= 1 - s_kj for each consumer unit j
        for j in others:
            rows.append(([x, s(k, j)], [1.0, 1.0], 1.0))
    # a singleton kernel is priced by its op's own bytes: lower the bound where the model is above
    delta = 0.0
    for i in ids:
        real = [m for m in units[i] if not is_free(g, m)]
        if len(units[i]) != 1 or not real:
            continue
        m = units[i][0]
        gr = Group("u", (m,))
        rd, wr = group_traffic(g, FusionPlan((gr,)), gr, memo)
        delta += max(0.0, as_float(rd) + as_float(wr) - as_float(g.nodes[m][COST].bytes_at("dram")))
    nv = len(cols_cost)
    with quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 0.0)
    upper = np.ones(nv)
    for a, b in conflicts:
        if a in pos and b in pos:
            upper[s(pos[a], pos[b])] = 0.0
    h.addVars(nv, np.zeros(nv), upper)
    npair = len(pair)
    h.changeColsIntegrality(
        npair, np.arange(npair, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * npair)
    )
    h.changeColsCost(nv, np.arange(nv, dtype=np.int32), np.array(cols_cost))
    for cols, coef, lb in rows:
        h.addRow(lb, np.inf, len(cols), np.array(cols, dtype=np.int32), np.array(coef))
    free = [a for a in range(n) if any(upper[s(a, b)] > 0 for b in range(n) if b != a)]
    for a, b, c in itertools.combinations(free, 3):
        ab, bc, ac = s(a, b), s(b, c), s(a, c)
        if upper[ab] + upper[bc] + upper[ac] < 2:
            continue  # at most one may be 1: transitivity holds
        for x, y, zz in ((ab, bc, ac), (ab, ac, bc), (ac, bc, ab)):
            h.addRow(-np.inf, 1.0, 3, np.array([x, y, zz], dtype=np.int32), np.array([1.0, 1.0, -1.0]))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else 0.0
    exact = status == "Optimal"
    parts: list[tuple[int, ...]] = []
    sol = h.getSolution()
    if sol.value_valid:
        val = sol.col_value
        root = list(range(n))  # the partition the incumbent's s_ij describe (transitive: components)

        def find(a: int) -> int:
            while root[a] != a:
                a = root[a]
            return a

        for (a, b), k in pair.items():
            if val[k] > 0.5:
                ra, rb = find(a), find(b)
                root[max(ra, rb)] = min(ra, rb)
        comps: dict[int, list[int]] = {}
        for a in range(n):
            comps.setdefault(find(a), []).append(ids[a])
        parts = [tuple(c) for c in comps.values()]
    return TrafficFloor(max(0.0, const + bound - delta), exact, status, tuple(parts))


def _consumers(g: nx.DiGraph, m: str, of: dict[str, int]) -> tuple[list[str], bool]:
    """The consumers of ``m``'s output seen through the views its own unit holds (always in its
    kernel), and whether the value leaves the graph (``m``, or such a view, has no consumer): as
    :func:`costmodel.fusion.group_traffic` looks through a group's views, here only through
    those every kernel holding ``m`` holds."""
    out: list[str] = []
    sink = False
    todo, seen = [m], {m}
    while todo:
        x = todo.pop()
        succ = list(g.successors(x))
        sink = sink or not succ
        for v in succ:
            if of.get(v) == of[m] and v not in seen and is_free(g, v):
                seen.add(v)
                todo.append(v)
            elif v != m:
                out.append(v)
    return out, sink
