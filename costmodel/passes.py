"""Passes over cost graphs, and a pipeline that runs them in order.

A :class:`Pass` is a named callable ``graph -> graph`` that says whether it
modifies its input in place (``inplace``) or returns a new graph. Passes
that produce a report store it in ``graph.graph["reports"][name]``, so a
pipeline returns one graph carrying every result.

Built-ins:

``bind_dims(bindings)``
    substitute dimension symbols in every cost, edge and tensor (new graph);
``annotate_hardware(hw)``
    per op node: bound kind, time bound, intensity, terms (in place, under
    the ``"roofline"`` attribute);
``classify(hw)``
    the per-node roofline table (:func:`costmodel.graph.classify_graph`);
``suggest_fusion(hw)``
    fusion suggestions and the audit of the suggested plan;
``plan_fusion(hw)``
    the fusion planner's plan (:func:`costmodel.fusion_plan.plan_fusions`), handed back as
    groups, priced against the unfused plan and the ideal; a pipeline runs
    ``suggest_fusion`` -> ``plan_fusion`` -> ``report``;
``report()``
    totals: FLOPs by unit, DRAM bytes, footprint, node count.

>>> from costmodel.passes import Pipeline, report
>>> Pipeline([report()]).names
['report']
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import sympy

from .cost import Bindings, Cost, as_float, bind
from .errors import CostModelError
from .expr import to_expr
from .graph import BYTES, COST, INPUTS, KIND, OP_KIND, OUTPUTS, REPEAT, TENSOR, classify_graph, graph_total
from .hardware import Hardware, get_device
from .roofline import bound
from .tensor import Tensor

__all__ = [
    "Pass",
    "Pipeline",
    "bind_dims",
    "annotate_hardware",
    "classify",
    "suggest_fusion",
    "plan_fusion",
    "report",
    "ROOFLINE",
]

#: node attribute written by :func:`annotate_hardware`
ROOFLINE = "roofline"


@dataclass(frozen=True)
class Pass:
    """A named graph transformation; ``inplace`` says whether it mutates its input."""

    name: str
    fn: Callable[[nx.DiGraph], nx.DiGraph]
    inplace: bool = False

    def __post_init__(self) -> None:  # Pass("x", None) was taken, and failed when run
        if not isinstance(self.name, str) or not self.name:
            raise CostModelError(f"a pass's name must be a non-empty str, got {self.name!r:.40}")
        if not callable(self.fn):
            raise CostModelError(
                f"pass {self.name!r}: fn must be a callable graph -> graph, got {type(self.fn).__name__}"
            )

    def __call__(self, g: nx.DiGraph) -> nx.DiGraph:
        out = self.fn(g)
        if not isinstance(out, nx.DiGraph):
            raise CostModelError(f"pass {self.name!r} must return a graph, got {type(out).__name__}")
        return out


class Pipeline:
    """Run passes in order; ``copy_input=True`` protects the caller's graph from in-place passes."""

    def __init__(self, passes: Sequence[Pass], *, copy_input: bool = True) -> None:
        self.passes = list(passes)
        for i, p in enumerate(self.passes):  # Pipeline([1]) was taken, and failed when run
            if not isinstance(p, Pass):
                raise CostModelError(
                    f"passes[{i}] must be a Pass (Pass(name, fn) or a built-in such as bind_dims(...)), "
                    f"got {type(p).__name__} {p!r:.40}"
                )
        self.copy_input = copy_input

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.passes]

    def __call__(self, g: nx.DiGraph) -> nx.DiGraph:
        if self.copy_input and any(p.inplace for p in self.passes):
            g = copy.deepcopy(g)
        for p in self.passes:
            g = p(g)
        return g


def _store(g: nx.DiGraph, name: str, value: Any) -> None:
    g.graph.setdefault("reports", {})[name] = value


def _subs_tensor(t: Tensor, table: dict[sympy.Symbol, sympy.Expr]) -> Tensor:
    return Tensor(t.name, tuple(to_expr(s, field=f"{t.name} shape").subs(table) for s in t.shape), t.dtype)


def bind_dims(bindings: Bindings) -> Pass:
    """Substitute ``bindings`` everywhere: costs, edge bytes, tensor shapes, repeats (a new graph)."""
    table = bind(bindings)

    def run(g: nx.DiGraph) -> nx.DiGraph:
        h = copy.deepcopy(g)
        for _, d in h.nodes(data=True):
            if isinstance(d.get(COST), Cost):
                d[COST] = d[COST].subs(table)
            for key in (INPUTS, OUTPUTS):
                if key in d:
                    d[key] = tuple(_subs_tensor(t, table) for t in d[key])
            if REPEAT in d:
                d[REPEAT] = to_expr(d[REPEAT], field="repeat").subs(table)
        for _, _, d in h.edges(data=True):
            if TENSOR in d:
                d[TENSOR] = _subs_tensor(d[TENSOR], table)
            if BYTES in d:
                d[BYTES] = to_expr(d[BYTES], field="edge bytes").subs(table)
        return h

    return Pass("bind_dims", run)


def annotate_hardware(hw: Hardware | str) -> Pass:
    """Write ``{kind, time_s, lower_s, intensity, terms_s}`` on every op node (in place)."""
    dev = get_device(hw)

    def run(g: nx.DiGraph) -> nx.DiGraph:
        for _, d in g.nodes(data=True):
            if d.get(KIND) != OP_KIND:
                continue
            c: Cost = d[COST]
            b = bound(c, dev)
            numeric = c.is_numeric
            ann: dict[str, Any] = {"device": dev.name, "unbounded": list(b.unbounded)}
            if numeric and b.terms:
                nbytes = as_float(c.bytes)
                ann.update(
                    kind=b.kind,
                    time_s=as_float(b.time),
                    lower_s=as_float(b.lower),
                    intensity=as_float(c.flops) / nbytes if nbytes else None,
                    terms_s={k: as_float(v) for k, v in b.terms.items()},
                )
            else:
                ann.update(lower=b.lower, regions=b.regions() if b.terms else {})
            d[ROOFLINE] = ann
        return g

    return Pass("annotate_hardware", run, inplace=True)


def classify(hw: Hardware | str) -> Pass:
    """Store the per-node roofline table under ``graph["reports"]["classify"]`` (in place)."""
    dev = get_device(hw)

    def run(g: nx.DiGraph) -> nx.DiGraph:
        _store(g, "classify", classify_graph(g, dev))
        return g

    return Pass("classify", run, inplace=True)


def suggest_fusion(hw: Hardware | str) -> Pass:
    """Store fusion suggestions and the audit of the suggested plan (in place)."""
    dev = get_device(hw)

    def run(g: nx.DiGraph) -> nx.DiGraph:
        from .fusion_audit import audit, suggest_fusions

        sugg, plan = suggest_fusions(g, dev)
        _store(
            g,
            "suggest_fusion",
            {"suggestions": [s.to_dict() for s in sugg], "audit": audit(g, dev, plan).to_dict()},
        )
        return g

    return Pass("suggest_fusion", run, inplace=True)


def plan_fusion(
    hw: Hardware | str, *, backend: str = "default", objective: str = "time", method: str = "auto"
) -> Pass:
    """Store the planner's plan and its audit against unfused and ideal (in place; numeric graphs)."""
    dev = get_device(hw)

    def run(g: nx.DiGraph) -> nx.DiGraph:
        from .fusion_audit import audit
        from .fusion_plan import plan_fusions

        res = plan_fusions(g, dev, backend=backend, objective=objective, method=method)
        _store(g, "plan_fusion", {"plan": res.to_dict(), "audit": audit(g, dev, res.plan).to_dict()})
        return g

    return Pass("plan_fusion", run, inplace=True)


def report() -> Pass:
    """Store totals (FLOPs per unit, DRAM bytes, footprint, node counts) as expressions (in place)."""

    def run(g: nx.DiGraph) -> nx.DiGraph:
        ops = graph_total(g, kinds=[OP_KIND])
        allc = graph_total(g)
        _store(
            g,
            "report",
            {
                "flops": ops.flops,
                "flops_by_unit": {u: ops.flops_on(u) for u in ("tensor", "vector", "sfu")},
                "dram_bytes": ops.bytes,
                "footprint": dict(allc.footprint_terms),
                "op_nodes": sum(1 for _, d in g.nodes(data=True) if d.get(KIND) == OP_KIND),
                "unknown_ops": dict(g.graph.get("unknown_ops", {})),
            },
        )
        return g

    return Pass("report", run, inplace=True)
