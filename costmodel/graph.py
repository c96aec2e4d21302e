"""Dataflow graphs of costed ops: attribute keys, totals, validation, export.

A graph is a ``networkx.DiGraph``. Nodes are ops (``kind="op"``, with the
rule name, its parameters and a :class:`Cost`) or sources (``weight``,
``kv_cache``, ``input``) whose cost is their residency. Edges carry the
logical :class:`Tensor` and the bytes actually moved over them (a gather
reads ``T`` rows of its table; a MoE layer reads only the experts touched).
A node's ``repeat`` says how many identical copies it stands for (a layer
group of ``L`` layers is built once with ``repeat = L``); totals multiply by
it, and :func:`expand` unrolls the copies on request.

The core engine depends on neither ``graphs/`` nor ``models/``: builders
there use these keys and functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import networkx as nx
import sympy

from .cost import Cost, as_float
from .errors import CostModelError
from .expr import to_expr
from .hardware.spec import Hardware
from .keys import (  # the attribute keys live in costmodel.keys; re-exported here
    BYTES,
    COST,
    G_GROUPS,
    GROUP,
    GROUP_ENTRY,
    GROUP_EXIT,
    INPUTS,
    KIND,
    LAYER,
    OP,
    OUTPUTS,
    PARAMS,
    PHASE,
    REPEAT,
    TENSOR,
    UNKNOWN,
    NodeKind,
)
from .node_row import NodeRow
from .results import Result
from .roofline import bound
from .rules import get_rule
from .tensor import Tensor

__all__ = [
    "step_time",
    "checked_graph",
    "OP",
    "COST",
    "PARAMS",
    "KIND",
    "PHASE",
    "GROUP",
    "REPEAT",
    "INPUTS",
    "OUTPUTS",
    "TENSOR",
    "BYTES",
    "LAYER",
    "UNKNOWN",
    "NodeKind",
    "OP_KIND",
    "SOURCE_KINDS",
    "GraphError",
    "node_total",
    "graph_total",
    "edge_bytes_total",
    "validate_graph",
    "classify_graph",
    "NodeRow",
    "graph_to_dict",
    "write_graphml",
    "expand",
    "op_nodes",
]

OP_KIND = NodeKind.OP
SOURCE_KINDS = (NodeKind.WEIGHT, NodeKind.KV_CACHE, NodeKind.INPUT)


class GraphError(CostModelError):
    """A graph is malformed (cycle, inconsistent edge, unknown rule ...)."""


def op_nodes(g: nx.DiGraph) -> list[str]:
    """Op nodes in topological order."""
    return [n for n in nx.topological_sort(g) if g.nodes[n].get(KIND) == OP_KIND]


def node_total(g: nx.DiGraph, n: str) -> Cost:
    """A node's cost times its repeat count."""
    data = g.nodes[n]
    return data[COST] * data.get(REPEAT, 1)


def graph_total(
    g: nx.DiGraph, *, kinds: Iterable[str] | None = None, where: Callable[[str, dict], bool] | None = None
) -> Cost:
    """Sum of ``cost * repeat`` over nodes (optionally filtered).

    ``kinds`` selects node kinds (default: all, so residency of sources is
    included in ``footprint``); ``where(name, attrs)`` filters further.
    """
    wanted = set(kinds) if kinds is not None else None
    return Cost.sum(
        node_total(g, n)
        for n, data in g.nodes(data=True)
        if (wanted is None or data.get(KIND) in wanted) and (where is None or where(n, data))
    )


def edge_bytes_total(g: nx.DiGraph, *, source_kind: str | None = None) -> sympy.Expr:
    """Bytes moved over edges (times the consumer's repeat), optionally only
    edges leaving sources of ``source_kind`` (e.g. ``"weight"``)."""
    total = sympy.Integer(0)
    for u, v, data in g.edges(data=True):
        if source_kind is not None and g.nodes[u].get(KIND) != source_kind:
            continue
        total += data.get(BYTES, 0) * g.nodes[v].get(REPEAT, 1)
    return total


def _same(a: object, b: object) -> bool:
    """Two tensor dimensions are equal (a dimension read from a file goes through the safe parser)."""
    x, y = to_expr(a, field="tensor dimension"), to_expr(b, field="tensor dimension")
    return x == y or sympy.simplify(x - y) == 0


def validate_graph(g: nx.DiGraph) -> None:
    """Check the graph; raise :class:`GraphError` naming the first problem.

    * acyclic;
    * every node has a kind; every op node names a registered rule and has a
      ``Cost``;
    * every edge carries a tensor produced by its source (same shape and
      dtype) and consumed by its target, and non-negative bytes;
    * an op's in-edge bytes never exceed its cost's reads (numeric graphs):
      the edges say where the bytes come from, the cost how many there are.
    """
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        raise GraphError(f"graph has a cycle: {' -> '.join(str(u) for u, _ in cycle)}")
    for n, data in g.nodes(data=True):
        kind = data.get(KIND)
        if kind not in (OP_KIND, *SOURCE_KINDS):
            raise GraphError(f"node {n!r}: kind {kind!r} not allowed; allowed: op, {', '.join(SOURCE_KINDS)}")
        if not isinstance(data.get(COST), Cost):
            raise GraphError(f"node {n!r} has no Cost")
        if kind == OP_KIND:
            get_rule(data.get(OP, ""))  # raises UnknownRuleError naming the known rules
        if kind in SOURCE_KINDS and g.in_degree(n):
            raise GraphError(f"source node {n!r} ({kind}) has incoming edges")
    for u, v, data in g.edges(data=True):
        t = data.get(TENSOR)
        if not isinstance(t, Tensor):
            raise GraphError(f"edge {u!r} -> {v!r} carries no Tensor")
        if not any(o.name == t.name for o in g.nodes[u].get(OUTPUTS, ())):
            raise GraphError(f"edge {u!r} -> {v!r}: tensor {t.name!r} is not an output of {u!r}")
        for side, node in (("output", u), ("input", v)):
            attr = OUTPUTS if side == "output" else INPUTS
            declared = [x for x in g.nodes[node].get(attr, ()) if x.name == t.name]
            if g.nodes[node].get(KIND) == OP_KIND or side == "output":
                if not declared:
                    raise GraphError(f"edge {u!r} -> {v!r}: tensor {t.name!r} is not an {side} of {node!r}")
                d = declared[0]
                if (
                    d.dtype != t.dtype
                    or len(d.shape) != len(t.shape)
                    or not all(_same(a, b) for a, b in zip(d.shape, t.shape, strict=True))
                ):
                    raise GraphError(f"edge {u!r} -> {v!r}: tensor {t} does not match {node!r}'s {side} {d}")
        b = to_expr(data.get(BYTES, 0), field=f"edge {u}->{v} bytes")
        if b.is_number and b.is_negative:
            raise GraphError(f"edge {u!r} -> {v!r}: negative bytes {b}")
    # every byte an op reads through an edge is part of its rule's reads (checked when numeric)
    for n, data in g.nodes(data=True):
        if data.get(KIND) != OP_KIND:
            continue
        in_edges = sympy.Add(
            *(to_expr(g.edges[u, n].get(BYTES, 0), field=f"edge {u}->{n} bytes") for u in g.predecessors(n))
        )
        excess = in_edges - data[COST].bytes_read()
        if excess.is_number and excess > 0:
            raise GraphError(
                f"node {n!r}: its in-edges carry {in_edges} bytes but its cost reads only "
                f"{data[COST].bytes_read()}; edge bytes must be what the op reads"
            )


def checked_graph(g: object, name: str = "g") -> nx.DiGraph:
    """``g`` checked as a cost graph (a ``networkx.DiGraph``), or one line naming it: a model name
    passed where a graph is taken was an AttributeError ('str' object has no attribute 'nodes').

    Parameters
    ----------
    g : object
        What the caller passed.
    name : str, default "g"
        The parameter's name, for the error.

    Returns
    -------
    networkx.DiGraph
        ``g`` itself.

    Raises
    ------
    CostModelError
        When ``g`` is not a ``networkx.DiGraph``.
    """
    if not isinstance(g, nx.DiGraph):
        raise CostModelError(
            f"{name} must be a cost graph (a networkx.DiGraph from graphs.build_model or an importer), "
            f"got {type(g).__name__} {g!r:.40}"
        )
    return g


def step_time(g: nx.DiGraph, hw: Hardware | str) -> sympy.Expr:
    """A step's time: ``sum over op nodes of repeat x Bound.time`` (each kernel's roofline,
    overlap and launch included; a node with no terms costs its launch), in seconds.

    Kernels run one after another; each overlaps its own compute and memory traffic.

    Parameters
    ----------
    g : networkx.DiGraph
        A cost graph (:func:`graphs.build_model`): op nodes carry a ``Cost`` and a repeat count.
    hw : Hardware or str
        The device, or a catalog name or alias.

    Returns
    -------
    sympy.Expr
        Seconds; symbolic where the graph's dimensions are.
    """
    total = sympy.Integer(0)
    for n in op_nodes(checked_graph(g)):
        b = bound(g.nodes[n][COST], hw)
        total += g.nodes[n].get(REPEAT, 1) * (b.time if b.terms else b.launch)
    return total


def classify_graph(g: nx.DiGraph, hw: Hardware) -> list[NodeRow]:
    """Per-op roofline rows on ``hw`` (graph must be numeric), in topological order, with each
    node's share of the graph's summed lower bound."""
    rows = []
    for n in op_nodes(g):
        data = g.nodes[n]
        cost: Cost = data[COST]
        rep = as_float(to_expr(data.get(REPEAT, 1), field=f"{n} repeat"), what=f"{n} repeat")
        b = bound(cost, hw)
        flops = as_float(cost.flops, what=f"{n} flops")
        nbytes = as_float(cost.bytes, what=f"{n} bytes")
        lower = as_float(b.lower, what=f"{n} bound") if b.terms else 0.0
        rows.append(
            NodeRow(
                node=n,
                op=data[OP],
                group=data.get(GROUP, ""),
                repeat=rep,
                flops=flops,
                bytes=nbytes,
                intensity=flops / nbytes if nbytes else float("inf"),
                kind=b.kind if b.terms else "none",
                time_s=lower,
                total_time_s=lower * rep,
                unbounded=tuple(b.unbounded),
            )
        )
    total = sum(r.total_time_s for r in rows) or 1.0
    return [dataclasses.replace(r, share=r.total_time_s / total) for r in rows]


def _plain(v: Any) -> Any:
    if isinstance(v, Result):
        return v.to_dict()
    if isinstance(v, Cost):
        return v.to_dict()
    if isinstance(v, Tensor):
        return {"name": v.name, "shape": [str(s) for s in v.shape], "dtype": v.dtype.name}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return str(v)


def graph_to_dict(g: nx.DiGraph) -> dict[str, Any]:
    """Plain data (JSON-ready): nodes with attributes, edges with tensors and bytes."""
    return {
        "graph": {k: _plain(v) for k, v in g.graph.items()},
        "nodes": [{"id": n, **{k: _plain(v) for k, v in d.items()}} for n, d in g.nodes(data=True)],
        "edges": [
            {"source": u, "target": v, **{k: _plain(x) for k, x in d.items()}}
            for u, v, d in g.edges(data=True)
        ],
    }


def write_graphml(g: nx.DiGraph, path: str | Path) -> None:
    """Write GraphML with every attribute as a string (costs as their totals)."""
    h = nx.DiGraph()
    for n, d in g.nodes(data=True):
        attrs = {k: str(_plain(v)) for k, v in d.items() if k not in (COST, INPUTS, OUTPUTS)}
        if isinstance(d.get(COST), Cost):
            attrs["flops"] = str(d[COST].flops)
            attrs["dram_bytes"] = str(d[COST].bytes)
        h.add_node(n, **attrs)
    for u, v, d in g.edges(data=True):
        h.add_edge(u, v, tensor=str(d.get(TENSOR)), bytes=str(d.get(BYTES, 0)))
    nx.write_graphml(h, str(path))


#: most copies expand() unrolls one layer group into
MAX_EXPAND = 100_000


def expand(g: nx.DiGraph) -> nx.DiGraph:
    """Unroll repeated layer groups into one copy per layer.

    Uses ``g.graph["groups"]``: for each group, its ``repeat``, its
    ``entry`` edges (external producer -> group node, with the tensor) and
    its ``exit`` node. Copy ``i`` is named ``"{group}.{i}.{node}"`` and
    feeds copy ``i + 1``. Totals are unchanged (a property tested).
    """
    groups: dict[str, dict[str, Any]] = g.graph.get(G_GROUPS, {})
    out = nx.DiGraph(**{k: v for k, v in g.graph.items() if k != G_GROUPS})
    members = {name: [n for n, d in g.nodes(data=True) if d.get(GROUP) == name] for name in groups}
    renamed: dict[str, str] = {}  # last copy's name of each group node (for edges leaving the group)
    for n, d in g.nodes(data=True):
        if d.get(GROUP) not in groups:
            out.add_node(n, **d)
            renamed[n] = n
    for name, info in groups.items():
        reps = to_expr(info[REPEAT], field=f"group {name!r} repeat")
        if not reps.is_Integer:
            raise GraphError(f"group {name!r} has a symbolic repeat {reps}; bind it before expanding")
        if not 0 <= reps <= MAX_EXPAND:
            raise GraphError(
                f"group {name!r}: expand() unrolls 0 to {MAX_EXPAND} copies, got a repeat of {reps}"
            )
        reps = int(reps)
        prev_exit: str | None = None
        for i in range(reps):
            local = {
                n: f"{name}.{i}.{n[len(name) + 1 :] if n.startswith(name + '.') else n}"
                for n in members[name]
            }
            for n in members[name]:
                out.add_node(local[n], **{**g.nodes[n], REPEAT: 1, LAYER: i})
            for u, v, ed in g.edges(data=True):
                if u in local and v in local:
                    out.add_edge(local[u], local[v], **ed)
            for src, dst, ed in info[GROUP_ENTRY]:
                if prev_exit is None:
                    out.add_edge(renamed.get(src, src), local[dst], **ed)
                    continue
                # layer i reads layer i-1's output instead of the group's input
                t_exit = out.nodes[prev_exit][OUTPUTS][0]
                old = ed[TENSOR]
                out.add_edge(prev_exit, local[dst], **{**ed, TENSOR: t_exit, BYTES: t_exit.bytes})
                node = out.nodes[local[dst]]
                node[INPUTS] = tuple(t_exit if x.name == old.name else x for x in node.get(INPUTS, ()))
            prev_exit = local[info[GROUP_EXIT]]
            for n in members[name]:
                renamed[n] = local[n]
    for u, v, ed in g.edges(data=True):
        gu, gv = g.nodes[u].get(GROUP), g.nodes[v].get(GROUP)
        if gu in groups and gv in groups and gu == gv:
            continue
        if gv in groups and any(dst == v and src == u for src, dst, _ in groups[gv][GROUP_ENTRY]):
            continue
        out.add_edge(renamed[u], renamed[v], **ed)
    return out
