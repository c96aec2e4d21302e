"""Serving phases on a device: prefill (TTFT), decode (TPOT), their limits.

All numbers are read off model graphs with the roofline of each node:

* a step's time is the sum over op nodes of ``repeat x max(unit and level
  terms)`` (kernels run one after another; each overlaps its own compute and
  memory): :func:`step_time`; the whole step as one roofline (perfect
  overlap across kernels) is reported beside it as the optimistic bound;
* decode's weight, KV and compute times are shown apart (the knee batch and the
  context ceiling are in :mod:`graphs.serving.limits`);
* energy per token is ``power_w x step time / tokens`` (the device drawing its
  full TDP for the modelled time: a TDP-based estimate, not a measurement);
* near vs far memory: full-memory reads per second, devices to hold the
  weights, and the per-token bound when weights are split over them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Phase
from costmodel.results import Result
from models.config import ModelConfig
from models.params import param_counts

from .compiled import CompiledStep, compiled_step, positive_int, step_time
from .workload import Workload, as_workload

__all__ = [
    "step_time",
    "PhaseReport",
    "PrefillReport",
    "DecodeReport",
    "NearFarMemory",
    "prefill_report",
    "decode_report",
    "near_far_memory",
]


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
    w: Workload, hw: Hardware, c: CompiledStep, phase: Phase, point: tuple[int, ...], tokens: int, tp: int
) -> dict[str, Any]:
    """A report's numbers from the compiled step at ``point`` (no substitution)."""
    v = c.point(*point)
    flops, step = v["flops"], v["step_s"]
    return {
        "model": w.name,
        "device": hw.name,
        "phase": phase,
        "batch": point[0],
        "tokens": tokens,
        "tp": tp,
        "step_s": step,
        "optimistic_step_s": v["optimistic_step_s"],
        "terms_s": v["terms_s"],
        "weight_read_s": v["weight_read_s"],
        "kv_read_s": v["kv_read_s"],
        "attention_flop_share": v["attention_flops"] / flops if flops else 0.0,
        "energy_per_token_j": _power(hw) * step / tokens if hw.power_w is not None else None,
    }


def _power(hw: Hardware) -> float:
    return as_float(hw.power_w)


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
    step is compiled once with a symbolic prefix and evaluated on every chunk at once.
    """
    batch, seq, tp = positive_int(batch, "batch"), positive_int(seq, "seq"), positive_int(tp, "tp")
    w = as_workload(config)
    hw = get_device(device)
    c = compiled_step(w, hw, Phase.PREFILL, tp=tp)
    fields = _report_fields(w, hw, c, Phase.PREFILL, (batch, seq), batch * seq, tp)
    if chunk is None or chunk >= seq:
        return PrefillReport(**fields)
    if chunk <= 0:
        raise CostModelError(f"chunk must be a positive number of tokens, got {chunk}")
    if seq // chunk > MAX_CHUNKS:
        raise CostModelError(
            f"{seq} tokens in chunks of {chunk} make {seq // chunk} chunks; at most {MAX_CHUNKS} (use a larger chunk)"
        )
    chunk = positive_int(chunk, "chunk")
    cc = compiled_step(w, hw, Phase.PREFILL, tp=tp, chunked=True)
    n_full, rest = divmod(seq, chunk)
    prefixes = np.arange(n_full, dtype=float) * chunk
    total = float(
        np.sum(cc.step_array(np.full_like(prefixes, batch), np.full_like(prefixes, chunk), prefixes))
    )
    if rest:
        total += cc.step(batch, rest, n_full * chunk)
    # the report's graph quantities come from the unchunked prompt; the time from the chunks
    energy = _power(hw) * total / (batch * seq) if hw.power_w is not None else None
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
    batch, ctx, tp = positive_int(batch, "batch"), positive_int(ctx, "ctx"), positive_int(tp, "tp")
    w = as_workload(config)
    hw = get_device(device)
    c = compiled_step(w, hw, Phase.DECODE, tp=tp)
    fields = _report_fields(w, hw, c, Phase.DECODE, (batch, ctx), batch, tp)
    bw, wbytes, emb_bytes = c.memo("decode_constants", lambda: _decode_constants(w, c, tp))
    step = fields["step_s"]
    return DecodeReport(
        **fields,
        read_every_weight_once_s=wbytes / bw,
        embedding_table_read_s=emb_bytes / bw,
        device_hours_per_million_tokens=1e6 / (batch / step) * tp / 3600 if hw.power_w is not None else None,
    )


def _decode_constants(w: Workload, c: CompiledStep, tp: int) -> tuple[float, float, float]:
    """DRAM bandwidth, resident weight bytes and one device's share of the embedding table."""
    emb = param_counts(w.config).embedding * get_dtype(w.config.weight_dtype).bytes / tp
    return as_float(c.hardware.bandwidth()), as_float(c.forms.weights_resident_bytes), as_float(emb)


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
