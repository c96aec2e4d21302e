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

from costmodel.cost import Cost
from costmodel.energy import HOROWITZ_45NM, graph_energy
from costmodel.errors import CostModelError
from costmodel.graph import (
    KIND,
    OUTPUTS,
    REPEAT,
    checked_graph,
    edge_bytes_total,
    graph_total,
)
from costmodel.keys import COST, G_BATCH, G_TOKENS, KV_CAP, ROLE, NodeKind, Phase, Role
from costmodel.ledger import MemoryLedger
from costmodel.memo import BoundedCache
from costmodel.results import Result
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import quantity
from models.catalog import get_model
from models.config import ModelConfig

from ...blocks.transformer import build_model
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
    "decode_energy_vs_batch",
    "EnergyVsBatch",
]


def weight_params(g: nx.DiGraph) -> sympy.Expr:
    """Parameters held by weight nodes (numel x repeat); a tied table counts once.

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.

    Returns
    -------
    sympy.Expr
        Parameter count (elements).
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    total = sympy.Integer(0)
    for _, d in g.nodes(data=True):
        if d.get(KIND) == "weight":
            total += d[OUTPUTS][0].numel * d.get(REPEAT, 1)
    return sympy.expand(total)


def weight_bytes_read(g: nx.DiGraph) -> sympy.Expr:
    """Bytes read from weight nodes per step: the sum over their out-edges.

    The input-embedding gather reads ``T`` rows; MoE experts read the
    touched experts; the lm_head its whole matrix.

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.

    Returns
    -------
    sympy.Expr
        Bytes read from weights per step.
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    return sympy.expand(edge_bytes_total(g, source_kind="weight"))


def op_total(g: nx.DiGraph) -> Cost:
    """Sum of op-node costs times repeat.

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.

    Returns
    -------
    Cost
        FLOPs per unit and bytes per memory level of every op node, repeats counted.
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    return graph_total(g, kinds=[NodeKind.OP])


def attention_flops(g: nx.DiGraph) -> sympy.Expr:
    """FLOPs of the nodes whose role is attention (score, softmax and PV work, whatever the rule).

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.

    Returns
    -------
    sympy.Expr
        Attention FLOPs per step.
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    return graph_total(g, kinds=[NodeKind.OP], where=lambda n, d: d.get(ROLE) == Role.ATTENTION).flops


def tidy(expr: sympy.Expr) -> sympy.Expr:
    """A readable canonical form, 5-10x faster than ``sympy.simplify`` on graph totals.

    A ratio over a monomial (``F / T``) expands to a sum of terms (``262144*S + 1.4e10 +
    1.05e9/S``); a ratio of sums is cancelled with common factors pulled out
    (``264704*S*(S + 1)/(...)``). Mathematically equal to the input: only its form changes.

    Parameters
    ----------
    expr : sympy.Expr
        Any expression.

    Returns
    -------
    sympy.Expr
        The same value in a readable form.
    """
    cancelled = sympy.cancel(expr)
    _, den = sympy.fraction(cancelled)
    if not den.is_Add:
        return sympy.expand(expr)
    return sympy.factor_terms(cancelled)


def kv_cache_bytes_per_token(g: nx.DiGraph, tokens: sympy.Expr) -> sympy.Expr:
    """KV-cache bytes written per token, from the cache-write nodes' residency (every layer,
    capped ones included; :func:`cache_terms` separates them).

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.
    tokens : sympy.Expr
        Tokens the step writes (``T``).

    Returns
    -------
    sympy.Expr
        Bytes per token.
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    written = graph_total(g, kinds=[NodeKind.OP]).footprint_terms.get("kv_cache", sympy.Integer(0))
    return tidy(written / tokens)


@dataclass(frozen=True)
class CacheTerms:
    """What one sequence keeps between steps: ``C k + sum_j min(C, W_j) k_j + s`` bytes."""

    per_token: sympy.Expr  #: ``k``: bytes per cached token of layers that keep every position
    capped: tuple[tuple[sympy.Expr, sympy.Expr], ...]  #: ``(k_j, W_j)``: layers keeping ``W_j`` positions
    state: sympy.Expr  #: ``s``: recurrent state (SSM, linear attention) per sequence

    def bytes_per_sequence(self, ctx: Any) -> sympy.Expr:
        """Bytes one sequence of ``ctx`` cached tokens holds (the ledger's formula,
        :meth:`costmodel.ledger.MemoryLedger.kv_bytes_per_sequence`).

        Parameters
        ----------
        ctx : int or sympy.Expr
            Cached tokens of the sequence.

        Returns
        -------
        sympy.Expr
            Bytes.
        """
        led = MemoryLedger(0, self.per_token, capped_kv=self.capped, state_bytes_per_sequence=self.state)
        return tidy(led.kv_bytes_per_sequence(ctx))


def cache_terms(g: nx.DiGraph, tokens: Any, batch: Any) -> CacheTerms:
    """Split a model graph's cache residency into growing, capped and constant parts.

    Cache writes carry ``kv_cache`` residency for the ``tokens`` written, and
    :data:`~costmodel.keys.KV_CAP` when their layer keeps at most that many
    positions; recurrent mixers carry ``state`` residency for ``batch`` sequences.

    Parameters
    ----------
    g : networkx.DiGraph
        A model graph.
    tokens : sympy.Expr
        Tokens the step writes.
    batch : sympy.Expr
        Sequences in the step.

    Returns
    -------
    CacheTerms
        Growing bytes per token, capped layers' bytes and positions, state bytes per sequence.
    """
    full = sympy.Integer(0)
    capped: dict[sympy.Expr, sympy.Expr] = {}
    state = sympy.Integer(0)
    for _n, data in g.nodes(data=True):
        if data.get(KIND) != NodeKind.OP:
            continue
        terms, rep = data[COST].footprint_terms, data.get(REPEAT, 1)
        kv = terms.get("kv_cache")
        if kv is not None:
            cap = data.get(KV_CAP)
            if cap is None:
                full += kv * rep
            else:
                capped[cap] = capped.get(cap, sympy.Integer(0)) + kv * rep
        state += terms.get("state", 0) * rep
    return CacheTerms(
        tidy(full / tokens),
        tuple((tidy(v / tokens), w) for w, v in capped.items()),
        tidy(state / batch),
    )


@dataclass(frozen=True)
class GraphSummary:
    """Totals of one model graph (symbolic or numeric).

    Attributes
    ----------
    tokens : sympy.Expr
        Tokens of the step (prefill ``B S``, decode ``B``).
    flops, tensor_flops : sympy.Expr
        FLOPs on every unit, and on the matrix units (MAC = 2 FLOPs).
    attention_flops : sympy.Expr
        FLOPs of the attention nodes.
    dram_bytes : sympy.Expr
        DRAM bytes every op node moves.
    weight_bytes_read : sympy.Expr
        Bytes read from weights per step.
    kv_bytes_per_token : sympy.Expr
        KV-cache bytes written per token.
    weight_params : sympy.Expr
        Parameters held (elements; a tied table once).
    footprint : dict of str to sympy.Expr
        Resident bytes by kind (``weights``, ``kv_cache``, ``state`` ...).
    """

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
    """Totals of a model graph: FLOPs, bytes, weights read, KV bytes per token, parameters.

    Parameters
    ----------
    g : networkx.DiGraph
        A graph from :func:`graphs.blocks.build_model` (it records its token count).

    Returns
    -------
    GraphSummary
        Symbolic or numeric totals (FLOP, bytes, elements).

    Raises
    ------
    CostModelError
        When the graph does not record its tokens.
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    ops = op_total(g)
    tokens = step_tokens(g)
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


def step_tokens(g: nx.DiGraph) -> sympy.Expr:
    """Tokens the step processes, recorded by :func:`build_model` as ``g.graph[G_TOKENS]``.

    Parameters
    ----------
    g : networkx.DiGraph
        A graph from :func:`build_model`.

    Returns
    -------
    sympy.Expr
        Tokens of the step (prefill ``B S``, decode ``B``).

    Raises
    ------
    CostModelError
        When the graph does not record them.
    """
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

    Parameters
    ----------
    config : ModelConfig or str
        The model (a catalog name or ``config.json`` path, or a config).
    phase : str
        ``"decode"`` or ``"prefill"``.

    Returns
    -------
    dict of str to sympy.Expr
        FLOPs per token, bytes per step, KV bytes per token and per sequence, attention's FLOP
        share, each also ``*_bound`` to the config's numbers.
    """
    cfg = config if isinstance(config, ModelConfig) else get_model(config)  # None: one line, named
    return dict(_FORMS.get_or_build((cfg, phase), lambda: _closed_forms(cfg, phase)))


#: closed forms derived so far in this process, per (config, phase)
_FORMS: BoundedCache[dict[str, sympy.Expr]] = BoundedCache("closed_forms", 64)


def _closed_forms(cfg: ModelConfig, phase: str) -> dict[str, sympy.Expr]:
    """:func:`closed_forms`, derived (once per (config, phase) in a process: the dict is copied out)."""
    sym = ModelConfig.symbolic(like=cfg)
    g = build_model(sym, phase)
    s = summarize(g)
    forms = {
        "flops_per_token": s.flops_per_token,
        "tensor_flops_per_token": s.tensor_flops_per_token,
        "dram_bytes_per_step": s.dram_bytes,
        "weight_bytes_read_per_step": s.weight_bytes_read,
        "kv_bytes_per_token": s.kv_bytes_per_token,
        # what one sequence keeps at ctx: growing layers, capped ones (window, chunk), recurrent state
        "kv_bytes_per_sequence": cache_terms(g, s.tokens, g.graph[G_BATCH]).bytes_per_sequence(ctx_sym),
        "attention_flop_share": s.attention_share,
    }
    vals = cfg.bindings(sym)
    for key in list(forms):
        forms[f"{key}_bound"] = tidy(forms[key].subs(vals))
    return forms


@dataclass(frozen=True)
class EnergyVsBatch(Result):
    """Decode energy per step as functions of the batch ``B`` (joules), and where they cross.

    Attributes
    ----------
    arithmetic_j : sympy.Expr
        The step's arithmetic energy, in ``B`` (J).
    weight_reads_j : sympy.Expr
        DRAM energy of the bytes leaving weight nodes, flat in ``B`` (J).
    total_j : sympy.Expr
        The step's energy, in ``B`` (J).
    crossover_batch : float or None
        Arithmetic energy = weight-read energy.
    ratio_at_batch_1 : float
        Weight reads over arithmetic at ``B = 1``.
    """

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

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    ctx : int
        Cached tokens per sequence.
    table : EnergyTable, optional
        Energy per operation and per byte (J; default Horowitz 45 nm).

    Returns
    -------
    EnergyVsBatch
        Weight-read and arithmetic energy per step in ``B`` (J), and the crossover batch.
    """
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
