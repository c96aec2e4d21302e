"""Per-node rooflines at any point, from forms compiled once per step.

:func:`costmodel.graph.classify_graph` bounds every node of a *numeric* graph with sympy: a
graph build and one ``bound`` per node for each new batch or context. Here each op node's
FLOPs, DRAM bytes and roofline terms (compute per unit, bytes per level, links) are read once
off the compiled step's symbolic graph and lambdified together with the step totals
:func:`graphs.serving.totals.analyze` reports, so a new point is one function call. The rows
are the same :class:`~costmodel.graph.NodeRow` s: ``time_s`` is the largest term (the
roofline lower bound), ``kind`` the term that attains it, ``share`` the node's part of the
summed bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.graph import COST, GROUP, OP, REPEAT, NodeRow, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Phase
from costmodel.results import Result
from costmodel.roofline import bound
from models.config import ModelConfig

from .compiled import CompiledStep, compiled_step, positive_int
from .totals import closed_forms, kv_cache_bytes_per_token, op_total
from .workload import Workload, as_workload

__all__ = ["NodeTable", "node_table", "node_rows", "step_totals", "analyze", "ModelAnalysis", "StepTotals"]

#: whole-step quantities compiled beside the nodes (analyze's StepTotals)
TOTALS = ("tokens", "tensor_flops", "dram_bytes", "weight_bytes_read", "kv_bytes_per_token")


@dataclass(frozen=True)
class NodeTable:
    """Static facts of the op nodes and one compiled function of the step's dims returning, in
    order: the totals (:data:`TOTALS`), then per node its repeat, FLOPs, bytes and terms."""

    names: tuple[str, ...]
    ops: tuple[str, ...]
    groups: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]  #: each node's term labels
    unbounded: tuple[tuple[str, ...], ...]
    fn: Any


def node_table(c: CompiledStep) -> NodeTable:
    """The compiled node table of ``c`` (built once per compiled step)."""
    return c.memo("node_table", lambda: _build(c))


def _build(c: CompiledStep) -> NodeTable:
    from .totals import step_tokens, weight_bytes_read

    g, hw = c.graph, c.hardware
    assert g is not None, "compiled steps keep their graph"
    ops = op_total(g)
    tokens = step_tokens(g)
    exprs: list[sympy.Expr] = [
        tokens,
        ops.flops_on("tensor"),
        ops.bytes,
        weight_bytes_read(g),
        kv_cache_bytes_per_token(g, tokens),
    ]
    names, kinds, groups, labels, unbounded = [], [], [], [], []
    for n in op_nodes(g):
        d = g.nodes[n]
        cost = d[COST]
        b = bound(cost, hw)
        names.append(n)
        kinds.append(d[OP])
        groups.append(d.get(GROUP, ""))
        labels.append(tuple(b.terms))
        unbounded.append(tuple(b.unbounded))
        exprs.extend([sympy.sympify(d.get(REPEAT, 1)), cost.flops, cost.bytes, *b.terms.values()])
    fn = sympy.lambdify(c.forms.symbols, exprs, "math", cse=True)
    return NodeTable(tuple(names), tuple(kinds), tuple(groups), tuple(labels), tuple(unbounded), fn)


def node_rows(c: CompiledStep, *point: float) -> tuple[list[NodeRow], dict[str, float]]:
    """Every op node's :class:`NodeRow` at ``point`` (topological order) and the totals."""
    t = node_table(c)
    out = [float(v) for v in t.fn(*point)]
    totals = dict(zip(TOTALS, out[: len(TOTALS)], strict=True))
    parts = []
    i = len(TOTALS)
    for labels in t.labels:
        rep, flops, nbytes = out[i : i + 3]
        terms = out[i + 3 : i + 3 + len(labels)]
        i += 3 + len(labels)
        lower = max(terms) if terms else 0.0
        parts.append((rep, flops, nbytes, terms, lower))
    total = sum(p[0] * p[4] for p in parts) or 1.0
    rows = [
        NodeRow(
            node=name,
            op=op,
            group=group,
            repeat=rep,
            flops=flops,
            bytes=nbytes,
            intensity=flops / nbytes if nbytes else float("inf"),
            kind=labels[terms.index(lower)] if terms else "none",
            time_s=lower,
            total_time_s=lower * rep,
            unbounded=unb,
            share=lower * rep / total,
        )
        for name, op, group, labels, unb, (rep, flops, nbytes, terms, lower) in zip(
            t.names, t.ops, t.groups, t.labels, t.unbounded, parts, strict=True
        )
    ]
    return rows, totals


def step_totals(c: CompiledStep, *point: float) -> dict[str, float]:
    """The whole-step totals at ``point`` (see :data:`TOTALS`)."""
    return node_rows(c, *point)[1]


@dataclass(frozen=True)
class StepTotals(Result):
    """Whole-step totals of a model graph on a device."""

    tokens: float
    flops: float
    tensor_flops: float
    dram_bytes: float
    weight_bytes_read: float
    kv_bytes_per_token: float
    attention_flop_share: float
    sum_of_node_bounds_s: float  #: sum over kernels of each kernel's roofline
    whole_step_bound_s: float  #: the whole step as one roofline
    whole_step_kind: str
    tokens_per_s: float


@dataclass(frozen=True)
class ModelAnalysis(Result):
    """Per-node roofline of one step of a model on a device, with totals and closed forms."""

    model: str
    device: str
    phase: Phase
    batch: int
    seq: int | None
    ctx: int | None
    rows: tuple[NodeRow, ...]
    totals: StepTotals
    closed_forms: dict[str, sympy.Expr]

    def to_dict(self) -> dict[str, Any]:
        latex = {k: sympy.latex(v) for k, v in self.closed_forms.items() if k.endswith("_bound")}
        return {**super().to_dict(), "closed_forms_latex": latex}


def analyze(
    model: ModelConfig | str | Workload,
    device: Hardware | str,
    phase: str,
    *,
    batch: int = 1,
    seq: int = 1024,
    ctx: int = 4096,
) -> ModelAnalysis:
    """Numeric per-node roofline of a model step on a device (:func:`node_rows`: the same rows
    :func:`~costmodel.graph.classify_graph` gives, from forms compiled once), whole-step totals
    and the symbolic closed forms of the phase (derived once per config and phase)."""
    w = as_workload(model)
    hw = get_device(device)
    if phase not in tuple(Phase):
        raise CostModelError(f"phase must be one of {', '.join(Phase)}, got {phase!r}")
    batch = positive_int(batch, "batch")
    point = (batch, positive_int(seq, "seq")) if phase == Phase.PREFILL else (batch, positive_int(ctx, "ctx"))
    c = compiled_step(w, hw, phase)
    rows, t = node_rows(c, *point)
    v = c.point(*point)
    step_s = sum(r.total_time_s for r in rows)
    terms = v["terms_s"]
    totals = StepTotals(
        tokens=t["tokens"],
        flops=v["flops"],
        tensor_flops=t["tensor_flops"],
        dram_bytes=t["dram_bytes"],
        weight_bytes_read=t["weight_bytes_read"],
        kv_bytes_per_token=t["kv_bytes_per_token"],
        attention_flop_share=v["attention_flops"] / v["flops"] if v["flops"] else 0.0,
        sum_of_node_bounds_s=step_s,
        whole_step_bound_s=v["optimistic_step_s"],
        whole_step_kind=max(terms, key=lambda k: terms[k]) if terms else "none",
        tokens_per_s=t["tokens"] / step_s if step_s else float("inf"),
    )
    return ModelAnalysis(
        model=w.name,
        device=hw.name,
        phase=Phase(phase),
        batch=batch,
        seq=seq if phase == Phase.PREFILL else None,
        ctx=ctx if phase == Phase.DECODE else None,
        rows=tuple(rows),
        totals=totals,
        closed_forms=closed_forms(w.config, phase),
    )
