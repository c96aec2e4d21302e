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

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.graph import COST, KIND, REPEAT, edge_bytes_total, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import count, quantity
from costmodel.symbols import ctx as ctx_sym
from models.catalog import get_model
from models.config import ModelConfig
from models.params import param_counts

from ..blocks.transformer import build_model
from .totals import attention_flops, op_total, weight_bytes_read

__all__ = [
    "step_time",
    "PhaseReport",
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
class PhaseReport:
    """Timing, traffic and throughput of one step (see module doc)."""

    model: str
    device: str
    phase: str
    batch: int
    tokens: int
    tp: int
    step_s: float
    optimistic_step_s: float
    terms_s: dict[str, float]
    weight_read_s: float
    kv_read_s: float
    attention_flop_share: float
    energy_per_token_j: float | None
    extra: dict[str, Any]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["tokens_per_s"] = self.tokens_per_s
        return d


def _report(
    cfg: ModelConfig,
    hw: Hardware,
    g: nx.DiGraph,
    phase: str,
    batch: int,
    tokens: int,
    tp: int,
    extra: dict[str, Any],
) -> PhaseReport:
    step = as_float(step_time(g, hw))
    whole = bound(op_total(g), hw)
    bw = as_float(hw.bandwidth())
    wread = as_float(weight_bytes_read(g)) / bw
    kvread = as_float(edge_bytes_total(g, source_kind="kv_cache")) / bw
    flops = as_float(op_total(g).flops)
    share = as_float(attention_flops(g)) / flops if flops else 0.0
    energy = as_float(hw.power_w) * step / tokens if hw.power_w is not None else None
    return PhaseReport(
        cfg.name,
        hw.name,
        phase,
        batch,
        tokens,
        tp,
        step,
        as_float(whole.lower),
        _unit_times(g, hw),
        wread,
        kvread,
        share,
        energy,
        extra,
    )


def prefill_report(
    config: ModelConfig | str,
    device: Hardware | str,
    *,
    batch: int = 1,
    seq: int,
    chunk: int | None = None,
    tp: int = 1,
) -> PhaseReport:
    """TTFT lower bound of ``batch`` prompts of ``seq`` tokens.

    With ``chunk``, the prompt runs as ``ceil(seq / chunk)`` steps, each
    attending over the chunks before it (read from the KV cache); the chunk
    graph is built once with a symbolic prefix and compiled.
    """
    cfg = get_model(config) if isinstance(config, str) else config
    hw = get_device(device)
    if chunk is None or chunk >= seq:
        g = build_model(cfg, "prefill", batch=batch, seq=seq, tp=tp)
        return _report(cfg, hw, g, "prefill", batch, batch * seq, tp, {"chunks": 1, "ttft_s": None})
    if chunk <= 0:
        raise CostModelError(f"chunk must be a positive number of tokens, got {chunk}")
    prefix = count("prefix")
    t_chunk = sympy.lambdify(
        prefix,
        step_time(build_model(cfg, "prefill", batch=batch, seq=chunk, prefix=prefix, tp=tp), hw),
        "math",
    )
    n_full, rest = divmod(seq, chunk)
    total = sum(float(t_chunk(i * chunk)) for i in range(n_full))
    if rest:
        last = build_model(cfg, "prefill", batch=batch, seq=rest, prefix=n_full * chunk, tp=tp)
        total += as_float(step_time(last, hw))
    # the report's graph quantities come from the unchunked prompt; the time from the chunks
    g = build_model(cfg, "prefill", batch=batch, seq=seq, tp=tp)
    rep = _report(
        cfg,
        hw,
        g,
        "prefill",
        batch,
        batch * seq,
        tp,
        {
            "chunks": n_full + (1 if rest else 0),
            "chunk": chunk,
            "unchunked_step_s": as_float(step_time(g, hw)),
        },
    )
    energy = as_float(hw.power_w) * total / (batch * seq) if hw.power_w is not None else None
    return PhaseReport(**{**rep.__dict__, "step_s": total, "energy_per_token_j": energy})


def decode_report(
    config: ModelConfig | str,
    device: Hardware | str,
    *,
    batch: int = 1,
    ctx: int,
    tp: int = 1,
) -> PhaseReport:
    """One decode step: TPOT, tokens/s per user and per device, weight vs KV vs compute.

    ``extra`` carries the seed script's "read every weight once" bound
    (all parameters, embedding included, over the bandwidth) next to the
    graph's own weight traffic, which leaves the input-embedding table out
    because the gather reads only ``B`` rows; and the per-device numbers.
    """
    cfg = get_model(config) if isinstance(config, str) else config
    hw = get_device(device)
    g = build_model(cfg, "decode", batch=batch, ctx=ctx, tp=tp)
    rep = _report(cfg, hw, g, "decode", batch, batch, tp, {})
    bw = as_float(hw.bandwidth())
    pc = param_counts(cfg)
    wbytes = as_float(
        sum(
            (n_d[COST].footprint_terms.get("weights", 0) * n_d.get(REPEAT, 1))
            for _, n_d in g.nodes(data=True)
            if n_d.get(KIND) == "weight"
        )
    )
    all_weights_s = wbytes / bw
    emb_s = as_float(pc.embedding * get_dtype(cfg.weight_dtype).bytes) / tp / bw
    rep.extra.update(
        {
            "tpot_s": rep.step_s,
            "tokens_per_s_per_user": 1 / rep.step_s,
            "tokens_per_s_per_device": batch / rep.step_s / tp,
            "read_every_weight_once_s": all_weights_s,
            "graph_weight_traffic_s": rep.weight_read_s,
            "weight_traffic_note": (
                f"reading every weight once takes {all_weights_s * 1e3:.2f} ms; the graph reads "
                f"{rep.weight_read_s * 1e3:.2f} ms of weights because the input-embedding table "
                f"({emb_s * 1e3:.2f} ms of it) is gathered, not streamed: only the {batch} row(s) in use are read"
            ),
        }
    )
    if hw.power_w is not None:
        rep.extra["device_hours_per_million_tokens"] = 1e6 / (batch / rep.step_s) * tp / 3600
    return rep


def decode_limits(
    config: ModelConfig | str, device: Hardware | str, *, ctx: int | None = None, tp: int = 1
) -> dict[str, Any]:
    """Where batching stops paying, solved from the graph's totals.

    The whole decode step is ``T(B) = max(a + b B, c B)``: ``a`` the fixed
    weight traffic, ``b`` the per-sequence memory time (KV read at ``ctx``,
    activations), ``c`` the per-sequence compute time on the binding unit.
    When ``c > b`` the step turns compute-bound at the knee ``B* = a/(c - b)``
    and throughput saturates at ``1/c``; otherwise no batch is compute-bound
    and throughput creeps towards ``1/b`` (90% of it at ``B = 9a/b``). Both
    ``b`` and ``c`` grow linearly with ``ctx``; the context ceiling solves
    ``b(ctx) = c(ctx)``: beyond it, no batch reaches compute-bound.
    """
    cfg = get_model(config) if isinstance(config, str) else config
    hw = get_device(device)
    g = build_model(cfg, "decode", batch=B_sym, ctx=ctx_sym, tp=tp)
    terms = bound(op_total(g), hw).terms
    mem = sympy.expand(sum(v for k, v in terms.items() if k in ("dram",)))
    comp = {k: sympy.expand(v) for k, v in terms.items() if k in ("tensor", "vector", "sfu")}
    a = mem.subs(B_sym, 0)
    b_per = sympy.expand((mem - a) / B_sym)
    c_unit = max(comp, key=lambda k: as_float(comp[k].subs({B_sym: 1, ctx_sym: ctx or 4096})))
    c_per = sympy.expand(comp[c_unit] / B_sym)
    x = quantity("x")  # ctx as a real number: the ceiling need not be whole
    ceiling = sympy.solve(sympy.Eq(b_per.subs(ctx_sym, x), c_per.subs(ctx_sym, x)), x)
    ceiling_val = [as_float(v) for v in ceiling]
    out: dict[str, Any] = {
        "weights_time_s": as_float(a.subs(ctx_sym, 1)),
        "memory_time_per_sequence": str(b_per),
        "compute_time_per_sequence": str(c_per),
        "compute_unit": c_unit,
        "ctx_ceiling": ceiling_val[0] if ceiling_val else None,
    }
    if ctx is not None:
        a_n, b_n, c_n = (as_float(x.subs(ctx_sym, ctx)) for x in (a, b_per, c_per))
        if c_n > b_n:
            out.update(
                knee_batch=a_n / (c_n - b_n),
                throughput_ceiling_tokens_per_s=1 / c_n,
                regime="compute-bound beyond the knee",
            )
        else:
            out.update(
                knee_batch=None,
                throughput_ceiling_tokens_per_s=1 / b_n,
                batch_for_90pct_of_ceiling=9 * a_n / b_n,
                regime="memory-bound at every batch (KV traffic grows with B)",
            )
        out["ctx"] = ctx
    return out


def near_far_memory(config: ModelConfig | str, device: Hardware | str) -> dict[str, Any]:
    """Full-memory reads per second, devices to hold the weights, per-token bound."""
    cfg = get_model(config) if isinstance(config, str) else config
    hw = get_device(device)
    weights = as_float(param_counts(cfg).total * get_dtype(cfg.weight_dtype).bytes)
    cap, bw = as_float(hw.capacity()), as_float(hw.bandwidth())
    n = max(1, math.ceil(weights / cap))
    return {
        "model": cfg.name,
        "device": hw.name,
        "weights_bytes": weights,
        "full_memory_reads_per_s": bw / cap,
        "devices_to_hold_weights": n,
        "per_token_bound_s": weights / (n * bw),
        "note": "a step that reads all weights once can run at most bandwidth/capacity times per second "
        "on a full device; splitting the weights over n devices divides the per-token bound by n",
    }
