"""Serving phases on a device: prefill (TTFT), decode (TPOT), their limits.

All numbers are read off model graphs with the roofline of each node:

* a step's time is the sum over op nodes of ``repeat x max(unit and level
  terms)`` (kernels run one after another; each overlaps its own compute and
  memory): :func:`step_time`; the whole step as one roofline (perfect
  overlap across kernels) is reported beside it as the optimistic bound;
* decode's weight, KV and compute times are shown apart, and the knee batch
  and the context ceiling are solved from the graph's totals in ``B`` and
  ``ctx`` (:func:`decode_limits`);
* energy per token is ``power_w x step time / tokens`` (the device drawing its
  full TDP for the modelled time: a TDP-based estimate, not a measurement);
* near vs far memory: full-memory reads per second, devices to hold the
  weights, and the per-token bound when weights are split over them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.graph import COST, KIND, REPEAT, edge_bytes_total, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Level, NodeKind, Phase, Unit
from costmodel.results import Result
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import count, quantity
from costmodel.symbols import ctx as ctx_sym
from models.config import ModelConfig
from models.params import param_counts

from .totals import attention_flops, op_total, weight_bytes_read
from .workload import Workload, as_workload

__all__ = [
    "step_time",
    "PhaseReport",
    "PrefillReport",
    "DecodeReport",
    "DecodeLimits",
    "Regime",
    "NearFarMemory",
    "prefill_report",
    "decode_report",
    "decode_limits",
    "near_far_memory",
]


def step_time(g: nx.DiGraph, hw: Hardware) -> sympy.Expr:
    """``sum over op nodes of repeat x lower bound`` (plus launch overhead), in seconds."""
    total = sympy.Integer(0)
    for n in op_nodes(g):
        b = bound(g.nodes[n][COST], hw)
        total += g.nodes[n].get(REPEAT, 1) * (b.time if b.terms else b.launch)
    return total


def _unit_times(g: nx.DiGraph, hw: Hardware) -> dict[str, float]:
    """The whole step's terms (compute per unit, bytes per level, links) in seconds."""
    return {k: as_float(v) for k, v in bound(op_total(g), hw).terms.items()}


@dataclass(frozen=True)
class PhaseReport(Result):
    """Timing, traffic and throughput of one step (see module doc)."""

    model: str
    device: str
    phase: Phase
    batch: int
    tokens: int
    tp: int
    step_s: float  #: sum over kernels of each kernel's roofline
    optimistic_step_s: float  #: the whole step as one roofline
    terms_s: dict[str, float]  #: whole-step terms: compute per unit, bytes per level, links
    weight_read_s: float  #: weight bytes the graph reads, over DRAM bandwidth
    kv_read_s: float  #: KV-cache bytes read, over DRAM bandwidth
    attention_flop_share: float
    energy_per_token_j: float | None  #: TDP x step time / tokens: an estimate at full power

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "tokens_per_s": self.tokens_per_s}


@dataclass(frozen=True)
class PrefillReport(PhaseReport):
    """A prefill step; with chunking, ``step_s`` sums the chunks and the rest describes the whole prompt."""

    chunks: int = 1
    chunk: int | None = None
    unchunked_step_s: float | None = None  #: the prompt as one step, for comparison


@dataclass(frozen=True)
class DecodeReport(PhaseReport):
    """A decode step (``step_s`` is the TPOT bound).

    ``read_every_weight_once_s`` is the seed script's bound (all parameters,
    embedding included, over the bandwidth); the graph's own weight traffic
    ``weight_read_s`` leaves the input-embedding table out, because the
    gather reads only ``B`` rows (``embedding_table_read_s`` is what it
    would cost to stream it).
    """

    read_every_weight_once_s: float = 0.0
    embedding_table_read_s: float = 0.0
    device_hours_per_million_tokens: float | None = None

    @property
    def tpot_s(self) -> float:
        return self.step_s

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1 / self.step_s

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.batch / self.step_s / self.tp

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "tpot_s": self.tpot_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
        }


def _report_fields(
    w: Workload, hw: Hardware, g: nx.DiGraph, phase: Phase, batch: int, tokens: int, tp: int
) -> dict[str, Any]:
    step = as_float(step_time(g, hw))
    whole = bound(op_total(g), hw)
    bw = as_float(hw.bandwidth())
    flops = as_float(op_total(g).flops)
    return {
        "model": w.name,
        "device": hw.name,
        "phase": phase,
        "batch": batch,
        "tokens": tokens,
        "tp": tp,
        "step_s": step,
        "optimistic_step_s": as_float(whole.lower),
        "terms_s": _unit_times(g, hw),
        "weight_read_s": as_float(weight_bytes_read(g)) / bw,
        "kv_read_s": as_float(edge_bytes_total(g, source_kind=NodeKind.KV_CACHE)) / bw,
        "attention_flop_share": as_float(attention_flops(g)) / flops if flops else 0.0,
        "energy_per_token_j": as_float(hw.power_w) * step / tokens if hw.power_w is not None else None,
    }


#: most chunks a chunked prefill is evaluated over (one compiled call each)
MAX_CHUNKS = 1_000_000


def prefill_report(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int = 1,
    seq: int,
    chunk: int | None = None,
    tp: int = 1,
) -> PrefillReport:
    """TTFT lower bound of ``batch`` prompts of ``seq`` tokens.

    With ``chunk``, the prompt runs as ``ceil(seq / chunk)`` steps, each
    attending over the chunks before it (read from the KV cache); the chunk
    graph is built once with a symbolic prefix and compiled.
    """
    w = as_workload(config)
    hw = get_device(device)
    g = w.graph(Phase.PREFILL, batch=batch, seq=seq, tp=tp)
    fields = _report_fields(w, hw, g, Phase.PREFILL, batch, batch * seq, tp)
    if chunk is None or chunk >= seq:
        return PrefillReport(**fields)
    if chunk <= 0:
        raise CostModelError(f"chunk must be a positive number of tokens, got {chunk}")
    if seq // chunk > MAX_CHUNKS:
        raise CostModelError(
            f"{seq} tokens in chunks of {chunk} make {seq // chunk} chunks; at most {MAX_CHUNKS} (use a larger chunk)"
        )
    prefix = count("prefix")
    t_chunk = sympy.lambdify(
        prefix, w.step_time(hw, Phase.PREFILL, batch=batch, seq=chunk, prefix=prefix, tp=tp), "math"
    )
    n_full, rest = divmod(seq, chunk)
    total = sum(float(t_chunk(i * chunk)) for i in range(n_full))
    if rest:
        total += as_float(w.step_time(hw, Phase.PREFILL, batch=batch, seq=rest, prefix=n_full * chunk, tp=tp))
    # the report's graph quantities come from the unchunked prompt; the time from the chunks
    energy = as_float(hw.power_w) * total / (batch * seq) if hw.power_w is not None else None
    return PrefillReport(
        **{**fields, "step_s": total, "energy_per_token_j": energy},
        chunks=n_full + (1 if rest else 0),
        chunk=chunk,
        unchunked_step_s=fields["step_s"],
    )


def decode_report(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int = 1,
    ctx: int,
    tp: int = 1,
) -> DecodeReport:
    """One decode step: TPOT, tokens/s per user and per device, weight vs KV vs compute (see
    :class:`DecodeReport` for the two weight-read bounds)."""
    w = as_workload(config)
    hw = get_device(device)
    g = w.graph(Phase.DECODE, batch=batch, ctx=ctx, tp=tp)
    fields = _report_fields(w, hw, g, Phase.DECODE, batch, batch, tp)
    bw = as_float(hw.bandwidth())
    wbytes = as_float(
        sum(
            (n_d[COST].footprint_terms.get("weights", 0) * n_d.get(REPEAT, 1))
            for _, n_d in g.nodes(data=True)
            if n_d.get(KIND) == NodeKind.WEIGHT
        )
    )
    emb_s = as_float(param_counts(w.config).embedding * get_dtype(w.config.weight_dtype).bytes) / tp / bw
    step = fields["step_s"]
    return DecodeReport(
        **fields,
        read_every_weight_once_s=wbytes / bw,
        embedding_table_read_s=emb_s,
        device_hours_per_million_tokens=1e6 / (batch / step) * tp / 3600 if hw.power_w is not None else None,
    )


class Regime(StrEnum):
    """Whether growing the batch at this context ever turns a decode step compute-bound."""

    COMPUTE_BEYOND_KNEE = "compute-bound beyond the knee"
    MEMORY_AT_EVERY_BATCH = "memory-bound at every batch"


@dataclass(frozen=True)
class DecodeLimits(Result):
    """Where batching stops paying (see :func:`decode_limits`); expressions are in ``B`` and ``ctx``."""

    weights_time_s: float  #: ``a``: the fixed weight traffic per step
    memory_time_per_sequence: sympy.Expr  #: ``b(ctx)`` in seconds
    compute_time_per_sequence: sympy.Expr  #: ``c(ctx)`` in seconds, on the binding unit
    compute_unit: str
    ctx_ceiling: float | None  #: beyond this context no batch is compute-bound (None: never)
    ctx: int | None = None
    regime: Regime | None = None
    knee_batch: float | None = None  #: ``B* = a / (c - b)`` when compute-bound beyond it
    throughput_ceiling_tokens_per_s: float | None = None
    batch_for_90pct_of_ceiling: float | None = None  #: ``9a/b`` when memory-bound at every batch


def _root(f: Any, lo: float, hi: float) -> float | None:
    """The ``x`` in ``[lo, hi]`` where the increasing ``f`` crosses zero (bisection, 200 steps), or None."""
    if f(lo) >= 0:
        return lo
    if f(hi) < 0:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) >= 0 else (mid, hi)
    return hi


def decode_limits(
    config: ModelConfig | str | Workload, device: Hardware | str, *, ctx: int | None = None, tp: int = 1
) -> DecodeLimits:
    """Where batching stops paying, solved from the graph's totals.

    The whole decode step is ``T(B) = max(a + b B, c B)``: ``a`` the fixed
    weight traffic, ``b`` the per-sequence memory time (KV read at ``ctx``,
    activations), ``c`` the per-sequence compute time on the binding unit.
    When ``c > b`` the step turns compute-bound at the knee ``B* = a/(c - b)``
    and throughput saturates at ``1/c``; otherwise no batch is compute-bound
    and throughput creeps towards ``1/b`` (90% of it at ``B = 9a/b``). Both
    ``b`` and ``c`` grow linearly with ``ctx``; the context ceiling solves
    ``b(ctx) = c(ctx)``: beyond it, no batch reaches compute-bound.

    A MoE model reads more experts as the batch grows (``E (1 - (1 - k/E)^B)`` per layer,
    uniform routing), so its memory time is not linear in ``B``: ``b`` is then its slope once
    every expert is read (``lim T_mem / B``), and the knee and the 90 % batch are solved
    numerically on the exact ``T_mem(B)``.
    """
    w = as_workload(config)
    hw = get_device(device)
    g = w.graph(Phase.DECODE, batch=B_sym, ctx=ctx_sym, tp=tp)
    terms = bound(op_total(g), hw).terms
    mem = sympy.expand(sum(v for k, v in terms.items() if k == Level.DRAM))
    comp = {k: sympy.expand(v) for k, v in terms.items() if k in tuple(Unit)}
    a = mem.subs(B_sym, 0)
    b_per = sympy.expand((mem - a) / B_sym)
    linear = B_sym not in b_per.free_symbols
    if not linear:  # MoE: the slope once every expert is read
        b_per = sympy.expand(sympy.limit(mem / B_sym, B_sym, sympy.oo))
    c_unit = max(comp, key=lambda k: as_float(comp[k].subs({B_sym: 1, ctx_sym: ctx or 4096})))
    c_per = sympy.expand(comp[c_unit] / B_sym)
    x = quantity("x")  # ctx as a real number: the ceiling need not be whole
    ceiling = sympy.solve(sympy.Eq(b_per.subs(ctx_sym, x), c_per.subs(ctx_sym, x)), x)
    ceiling_val = [as_float(v) for v in ceiling if v.is_real and v > 0]
    base = DecodeLimits(
        weights_time_s=as_float(a.subs(ctx_sym, 1)),
        memory_time_per_sequence=b_per,
        compute_time_per_sequence=c_per,
        compute_unit=c_unit,
        ctx_ceiling=ceiling_val[0] if ceiling_val else None,
    )
    if ctx is None:
        return base
    a_n, b_n, c_n = (as_float(e.subs(ctx_sym, ctx)) for e in (a, b_per, c_per))
    t_mem = sympy.lambdify(B_sym, mem.subs(ctx_sym, ctx), "math")
    if c_n > b_n:
        if linear:
            knee = a_n / (c_n - b_n)
        else:  # smallest batch whose compute time reaches its memory time
            knee = _root(lambda bb: c_n * bb - t_mem(bb), 1e-9, 1e12)
        return dataclasses.replace(
            base,
            ctx=ctx,
            regime=Regime.COMPUTE_BEYOND_KNEE,
            knee_batch=knee,
            throughput_ceiling_tokens_per_s=1 / c_n,
        )
    if linear:
        b90 = 9 * a_n / b_n
    else:  # B / T_mem(B) reaches 90 % of 1 / b
        b90 = _root(lambda bb: bb / t_mem(bb) - 0.9 / b_n, 1e-9, 1e12)
    return dataclasses.replace(
        base,
        ctx=ctx,
        regime=Regime.MEMORY_AT_EVERY_BATCH,
        throughput_ceiling_tokens_per_s=1 / b_n,
        batch_for_90pct_of_ceiling=b90,
    )


@dataclass(frozen=True)
class NearFarMemory(Result):
    """A step that reads all weights once runs at most ``bandwidth / capacity`` times per second
    on a full device; splitting the weights over ``n`` devices divides the per-token bound by ``n``."""

    model: str
    device: str
    weights_bytes: float
    full_memory_reads_per_s: float
    devices_to_hold_weights: int
    per_token_bound_s: float


def near_far_memory(config: ModelConfig | str | Workload, device: Hardware | str) -> NearFarMemory:
    """Full-memory reads per second, devices to hold the weights, per-token bound."""
    cfg = as_workload(config).config
    hw = get_device(device)
    weights = as_float(param_counts(cfg).total * get_dtype(cfg.weight_dtype).bytes)
    cap, bw = as_float(hw.capacity()), as_float(hw.bandwidth())
    n = max(1, math.ceil(weights / cap))
    return NearFarMemory(cfg.name, hw.name, weights, bw / cap, n, weights / (n * bw))
