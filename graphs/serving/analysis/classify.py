"""Per-node rooflines at any point, from forms compiled once per step.

:func:`costmodel.graph.classify_graph` bounds every node of a *numeric* graph with sympy: a
graph build and one ``bound`` per node for each new batch or context. Here each op node's
FLOPs, DRAM bytes and roofline terms (compute per unit, bytes per level, links) are read once
off the compiled step's symbolic graph and lambdified together with the step totals
:func:`analyze` reports, so a new point is one function call. The rows
are the same :class:`~costmodel.graph.NodeRow` s: ``time_s`` is the largest term (the
roofline lower bound), ``kind`` the term that attains it, ``share`` the node's part of the
summed bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.graph import COST, GROUP, OP, REPEAT, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Phase
from costmodel.node_row import NodeRow
from costmodel.roofline import bound
from models.config import ModelConfig

from ..step.compiled import CompiledStep, compiled_step, positive_int
from ..step.defaults import DEFAULT_SEQ
from ..step.totals import closed_forms, kv_cache_bytes_per_token, op_total, step_tokens, weight_bytes_read
from ..step.workload import Workload, as_workload
from .node_analysis import ModelAnalysis, NodeStatics, StepTotals, analysis_from_values, rows_from_values

__all__ = ["NodeTable", "node_table", "node_rows", "step_totals", "analyze", "ModelAnalysis", "StepTotals"]


@dataclass(frozen=True)
class NodeTable:
    """Static facts of the op nodes (:class:`~graphs.serving.analysis.node_analysis.NodeStatics`), the node
    table's expressions in the step's dims (:data:`~graphs.serving.analysis.node_analysis.TOTALS`, then per
    node its repeat, FLOPs, bytes and terms) and one compiled function of them."""

    statics: NodeStatics
    exprs: tuple[sympy.Expr, ...]
    fn: Any


def node_table(c: CompiledStep) -> NodeTable:
    """The compiled node table of ``c`` (built once per compiled step).

    Parameters
    ----------
    c : CompiledStep
        A compiled step.

    Returns
    -------
    NodeTable
        Each op node's roofline terms compiled as one function of the step's dims.
    """
    return c.memo("node_table", lambda: _build(c))


def _build(c: CompiledStep) -> NodeTable:
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
    statics = NodeStatics(tuple(names), tuple(kinds), tuple(groups), tuple(labels), tuple(unbounded))
    return NodeTable(statics, tuple(exprs), fn)


def node_rows(c: CompiledStep, *point: float) -> tuple[list[NodeRow], dict[str, float]]:
    """Every op node's :class:`NodeRow` at ``point`` (topological order) and the totals.

    Parameters
    ----------
    c : CompiledStep
        A compiled step.
    *point : float
        Values of its dims, in order (decode: ``B``, ``ctx``; prefill: ``B``, ``S``).

    Returns
    -------
    tuple of (list of NodeRow, dict of str to float)
        The rows (s, FLOP, bytes per node) and the step totals.
    """
    t = node_table(c)
    return rows_from_values(t.statics, t.fn(*point))


def step_totals(c: CompiledStep, *point: float) -> dict[str, float]:
    """The whole-step totals at ``point`` (see :data:`~graphs.serving.analysis.node_analysis.TOTALS`).

    Parameters
    ----------
    c : CompiledStep
        A compiled step.
    *point : float
        Values of its dims, in order.

    Returns
    -------
    dict of str to float
    """
    return node_rows(c, *point)[1]


def closed_forms_latex(forms: dict[str, sympy.Expr]) -> dict[str, str]:
    """The LaTeX of the ``*_bound`` closed forms (what ``--json`` and the HTML page show).

    Parameters
    ----------
    forms : dict of str to sympy.Expr
        Closed forms (:func:`graphs.serving.step.totals.closed_forms`).

    Returns
    -------
    dict of str to str
        LaTeX of the ``*_bound`` forms.
    """
    return {k: sympy.latex(v) for k, v in forms.items() if k.endswith("_bound")}


def analyze(
    model: ModelConfig | str | Workload,
    device: Hardware | str,
    phase: str,
    *,
    batch: int = 1,
    seq: int = DEFAULT_SEQ,
    ctx: int = 4096,
    tp: int = 1,
) -> ModelAnalysis:
    """Numeric per-node roofline of a model step on a device (:func:`node_rows`: the same rows
    :func:`~costmodel.graph.classify_graph` gives, from forms compiled once), whole-step totals
    and the symbolic closed forms of the phase (derived once per config and phase); ``tp``
    splits every layer over that many devices (the rows are one device's share).

    Parameters
    ----------
    model : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch : int
        Sequences in the step.
    seq : int
        Prompt tokens per sequence (prefill; default :data:`~graphs.serving.step.defaults.DEFAULT_SEQ`).
    ctx : int
        Cached tokens per sequence (decode).
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    ModelAnalysis
        Per-node rows (s, FLOP, bytes, bound kind), totals and closed forms.

    Raises
    ------
    CostModelError
        When ``phase`` is unknown or a count is not a positive integer.
    """
    w = as_workload(model)
    hw = get_device(device)
    if phase not in tuple(Phase):
        raise CostModelError(f"phase must be one of {', '.join(Phase)}, got {phase!r}")
    batch, tp = positive_int(batch, "batch"), positive_int(tp, "tp")
    point = (batch, positive_int(seq, "seq")) if phase == Phase.PREFILL else (batch, positive_int(ctx, "ctx"))
    c = compiled_step(w, hw, phase, tp=tp)
    t = node_table(c)
    forms = closed_forms(w.config, phase)
    return analysis_from_values(
        t.statics,
        t.fn(*point),
        c.point(*point),
        model=w.name,
        device=hw.name,
        phase=Phase(phase),
        batch=batch,
        seq=seq,
        ctx=ctx,
        tp=tp,
        closed_forms=forms,
        closed_forms_latex=closed_forms_latex(forms),
    )
