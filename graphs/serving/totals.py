"""Totals and closed forms read off a model graph.

Every quantity here is a sum over the graph's nodes or edges (times their
``repeat``), never a separate formula: the closed forms *fall out* of the
graph. :func:`closed_forms` builds the graph of a symbolic copy of a config
and simplifies; :func:`analyze` does the numeric per-node roofline on a
device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost, as_float
from costmodel.errors import CostModelError
from costmodel.graph import (
    KIND,
    OP,
    OUTPUTS,
    REPEAT,
    NodeRow,
    classify_graph,
    edge_bytes_total,
    graph_total,
)
from costmodel.hardware import Hardware, get_device
from costmodel.keys import G_TOKENS, NodeKind, Phase
from costmodel.results import Result
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import quantity
from models.catalog import get_model
from models.config import ModelConfig

from ..blocks.transformer import build_model, phase_dims
from .workload import Workload, as_workload

__all__ = [
    "weight_params",
    "weight_bytes_read",
    "kv_cache_bytes_per_token",
    "op_total",
    "attention_flops",
    "GraphSummary",
    "summarize",
    "closed_forms",
    "analyze",
    "decode_energy_vs_batch",
    "ModelAnalysis",
    "StepTotals",
    "EnergyVsBatch",
]


def weight_params(g: nx.DiGraph) -> sympy.Expr:
    """Parameters held by weight nodes (numel x repeat); a tied table counts once."""
    total = sympy.Integer(0)
    for _, d in g.nodes(data=True):
        if d.get(KIND) == "weight":
            total += d[OUTPUTS][0].numel * d.get(REPEAT, 1)
    return sympy.expand(total)


def weight_bytes_read(g: nx.DiGraph) -> sympy.Expr:
    """Bytes read from weight nodes per step: the sum over their out-edges.

    The input-embedding gather reads ``T`` rows; MoE experts read the
    touched experts; the lm_head its whole matrix.
    """
    return sympy.expand(edge_bytes_total(g, source_kind="weight"))


def op_total(g: nx.DiGraph) -> Cost:
    """Sum of op-node costs times repeat."""
    return graph_total(g, kinds=[NodeKind.OP])


def attention_flops(g: nx.DiGraph) -> sympy.Expr:
    """FLOPs of the attention op nodes (score, softmax and PV work)."""
    return graph_total(g, kinds=[NodeKind.OP], where=lambda n, d: d.get(OP) == "attention").flops


def tidy(expr: sympy.Expr) -> sympy.Expr:
    """A readable canonical form, 5-10x faster than ``sympy.simplify`` on graph totals.

    A ratio over a monomial (``F / T``) expands to a sum of terms (``262144*S + 1.4e10 +
    1.05e9/S``); a ratio of sums is cancelled with common factors pulled out
    (``264704*S*(S + 1)/(...)``). Mathematically equal to the input: only its form changes.
    """
    cancelled = sympy.cancel(expr)
    _, den = sympy.fraction(cancelled)
    if not den.is_Add:
        return sympy.expand(expr)
    return sympy.factor_terms(cancelled)


def kv_cache_bytes_per_token(g: nx.DiGraph, tokens: sympy.Expr) -> sympy.Expr:
    """KV-cache bytes written per token, from the cache-write nodes' residency."""
    written = graph_total(g, kinds=[NodeKind.OP]).footprint_terms.get("kv_cache", sympy.Integer(0))
    return tidy(written / tokens)


@dataclass(frozen=True)
class GraphSummary:
    """Totals of one model graph (symbolic or numeric)."""

    tokens: sympy.Expr
    flops: sympy.Expr
    tensor_flops: sympy.Expr
    attention_flops: sympy.Expr
    dram_bytes: sympy.Expr
    weight_bytes_read: sympy.Expr
    kv_bytes_per_token: sympy.Expr
    weight_params: sympy.Expr
    footprint: dict[str, sympy.Expr]

    @property
    def flops_per_token(self) -> sympy.Expr:
        return tidy(self.flops / self.tokens)

    @property
    def tensor_flops_per_token(self) -> sympy.Expr:
        return tidy(self.tensor_flops / self.tokens)

    @property
    def attention_share(self) -> sympy.Expr:
        """Attention's share of all FLOPs (a function of ``S`` or ``ctx``)."""
        return self.attention_flops / self.flops


def summarize(g: nx.DiGraph) -> GraphSummary:
    ops = op_total(g)
    tokens = _tokens(g)
    allres = graph_total(g)
    return GraphSummary(
        tokens=tokens,
        flops=sympy.expand(ops.flops),
        tensor_flops=sympy.expand(ops.flops_on("tensor")),
        attention_flops=sympy.expand(attention_flops(g)),
        dram_bytes=sympy.expand(ops.bytes),
        weight_bytes_read=weight_bytes_read(g),
        kv_bytes_per_token=kv_cache_bytes_per_token(g, tokens),
        weight_params=weight_params(g),
        footprint={k: sympy.expand(v) for k, v in allres.footprint_terms.items()},
    )


def _tokens(g: nx.DiGraph) -> sympy.Expr:
    """Tokens the step processes, recorded by :func:`build_model` as ``g.graph[G_TOKENS]``."""
    if G_TOKENS not in g.graph:
        raise CostModelError(
            "the graph does not record its token count: summarize() needs a build_model graph"
        )
    return g.graph[G_TOKENS]


def closed_forms(config: ModelConfig | str, phase: str = "decode") -> dict[str, sympy.Expr]:
    """Closed forms in the config's own symbols, from a symbolic graph.

    Returns per-token FLOPs (all units and tensor only), DRAM bytes per step,
    weight bytes read per step, KV bytes per token, attention's FLOP share,
    and the same after binding the config's numbers (``*_bound``), leaving
    only ``B``, ``S``/``ctx`` free.
    """
    cfg = get_model(config) if isinstance(config, str) else config
    sym = ModelConfig.symbolic(like=cfg)
    s = summarize(build_model(sym, phase))
    forms = {
        "flops_per_token": s.flops_per_token,
        "tensor_flops_per_token": s.tensor_flops_per_token,
        "dram_bytes_per_step": s.dram_bytes,
        "weight_bytes_read_per_step": s.weight_bytes_read,
        "kv_bytes_per_token": s.kv_bytes_per_token,
        "attention_flop_share": s.attention_share,
    }
    vals = cfg.bindings(sym)
    for key in list(forms):
        forms[f"{key}_bound"] = tidy(forms[key].subs(vals))
    return forms


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
    """Numeric per-node roofline of a model step on a device (:func:`classify_graph` rows),
    whole-step totals and the symbolic closed forms of the phase."""
    w = as_workload(model)
    hw = get_device(device)
    dims = phase_dims(phase, batch, seq, ctx)
    g = w.graph(phase, batch=batch, seq=seq, ctx=ctx)
    rows = classify_graph(g, hw)
    s = summarize(g)
    step_s = sum(r.total_time_s for r in rows)
    whole = bound(op_total(g), hw)
    totals = StepTotals(
        tokens=as_float(dims.tokens),
        flops=as_float(s.flops),
        tensor_flops=as_float(s.tensor_flops),
        dram_bytes=as_float(s.dram_bytes),
        weight_bytes_read=as_float(s.weight_bytes_read),
        kv_bytes_per_token=as_float(s.kv_bytes_per_token),
        attention_flop_share=as_float(s.attention_share),
        sum_of_node_bounds_s=step_s,
        whole_step_bound_s=as_float(whole.lower),
        whole_step_kind=whole.kind,
        tokens_per_s=as_float(dims.tokens) / step_s if step_s else float("inf"),
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


@dataclass(frozen=True)
class EnergyVsBatch(Result):
    """Decode energy per step as functions of the batch ``B`` (joules), and where they cross."""

    arithmetic_j: sympy.Expr
    weight_reads_j: sympy.Expr
    total_j: sympy.Expr
    crossover_batch: float | None  #: arithmetic energy = weight-read energy
    ratio_at_batch_1: float  #: weight reads over arithmetic at B = 1


def decode_energy_vs_batch(
    config: ModelConfig | str | Workload, *, ctx: int = 1024, table: Any = None
) -> EnergyVsBatch:
    """Decode energy per step in the batch ``B``: weight reads vs arithmetic, and where they cross.

    Both come from the decode graph with symbolic ``B`` and the energy table
    (default Horowitz 45 nm): the weight-read energy is the DRAM energy of the
    bytes leaving weight nodes (flat in ``B``), the arithmetic energy grows
    with ``B``; the crossover batch solves arithmetic = weight reads.
    """
    from costmodel.energy import HOROWITZ_45NM, graph_energy

    g = as_workload(config).graph(Phase.DECODE, ctx=ctx)
    e = graph_energy(g, table or HOROWITZ_45NM)
    arith, weights = sympy.expand(e.arithmetic), sympy.expand(e.weight_reads)
    x = quantity("x")
    sol = sympy.solve(sympy.Eq(arith.subs(B_sym, x), weights.subs(B_sym, x)), x)
    return EnergyVsBatch(
        arithmetic_j=arith,
        weight_reads_j=weights,
        total_j=sympy.expand(e.total),
        crossover_batch=float(sol[0]) if sol else None,
        ratio_at_batch_1=float((weights / arith).subs(B_sym, 1)),
    )
