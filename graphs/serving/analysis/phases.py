"""Serving phases on a device: prefill (TTFT), decode (TPOT), their limits.

All numbers are read off model graphs with the roofline of each node:

* a step's time is the sum over op nodes of ``repeat x max(unit and level
  terms)`` (kernels run one after another; each overlaps its own compute and
  memory): :func:`step_time`; the whole step as one roofline (perfect
  overlap across kernels) is reported beside it as the optimistic bound;
* decode's weight, KV and compute times are shown apart (the knee batch and the
  context ceiling are in :mod:`graphs.serving.analysis.limits`);
* energy per token is ``power_w x tp x ep x step time / tokens`` (every device of
  the step, ``ep`` expert-parallel ranks of ``tp`` devices each, drawing its full TDP for
  the modelled time: a TDP-based estimate, not a measurement);
* near vs far memory: full-memory reads per second, devices to hold the
  weights, and the per-token bound when weights are split over them.
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.hardware.fallback import roof_notes
from costmodel.keys import Phase
from graphs.blocks.mtp import mtp_notes
from models.config import ModelConfig
from models.mixers.dsa import dsa_notes
from models.params import param_bytes, param_counts
from models.quantization import weight_format_notes

from ..step.compiled import CompiledStep, compiled_step, positive_int, sparse_tile, step_time
from ..step.expert_routing import Routing, as_routing
from ..step.ledger_fit import ledger_terms, memory_note, routed_expert_bytes
from ..step.reports import (
    DecodeReport,
    NearFarMemory,
    PhaseReport,
    PrefillReport,
    chunk_plan,
    decode_from_fields,
    phase_fields,
    prefill_from_fields,
)
from ..step.workload import Workload, as_workload

__all__ = [
    "report_notes",
    "step_time",
    "PhaseReport",
    "PrefillReport",
    "DecodeReport",
    "NearFarMemory",
    "prefill_report",
    "decode_report",
    "near_far_memory",
]


def report_notes(config: ModelConfig, hw: Hardware, tp: int) -> tuple[str, ...]:
    """What a report says once about its inputs: the device's roof substitutions and
    preliminary figures (:func:`costmodel.hardware.fallback.roof_notes`), the weight format it
    priced (:func:`models.quantization.weight_format_notes`), MTP modules left out
    (:func:`graphs.blocks.mtp.mtp_notes`), a DSA model's sparse-attention kernel
    (:func:`models.mixers.dsa.dsa_notes`) and a tensor-parallel group across domains.

    Parameters
    ----------
    config : ModelConfig
    hw : Hardware
    tp : int
        The tensor-parallel group.

    Returns
    -------
    tuple of str
    """
    return (
        roof_notes(hw)
        + weight_format_notes(config)
        + mtp_notes(config)
        + dsa_notes(config, sparse_tile(config, hw), tp)
        + hw.group_notes(tp)
    )


def _report_fields(
    w: Workload,
    hw: Hardware,
    c: CompiledStep,
    phase: Phase,
    point: tuple[int, ...],
    tokens: int,
    tp: int,
    ep: int = 1,
) -> dict[str, Any]:
    """A report's numbers from the compiled step at ``point`` (no substitution); the energy
    counts the step's ``tp x ep`` devices (:func:`~graphs.serving.step.reports.phase_fields`)."""
    power = as_float(hw.power_w) if hw.power_w is not None else None
    return phase_fields(
        c.point(*point),
        model=w.name,
        device=hw.name,
        power_w=power,
        phase=phase,
        batch=point[0],
        tokens=tokens,
        tp=tp,
        notes=report_notes(w.config, hw, tp),
        ep=ep,
    )


def _with_memory_note(
    fields: dict[str, Any], w: Workload, hw: Hardware, phase: Phase, batch: int, tokens: int, tp: int, ep: int
) -> dict[str, Any]:
    """``fields`` with :func:`~graphs.serving.step.ledger_fit.memory_note` among the notes when
    the device memory does not hold the point."""
    note = memory_note(w, hw, phase=phase, batch=batch, tokens=tokens, tp=tp, ep=ep)
    return fields if note is None else {**fields, "notes": (*fields["notes"], note)}


def _need(w: Workload, hw: Hardware, tp: int, ep: int) -> tuple[Any, float]:
    """The decode ledger's bytes at ``(batch, ctx)`` as a plain function (a device's share of the
    routed experts at ``ep`` left out, as :func:`~graphs.serving.step.ledger_fit.capacity_check`
    counts them), and the device's capacity (bytes)."""
    terms = ledger_terms(w, phase=Phase.DECODE, tp=tp).terms_function()
    cap = as_float(hw.memory_bytes())
    spread = routed_expert_bytes(w, tp) * (1 - 1 / ep) if ep > 1 else 0.0
    return (lambda b, x: float(sum(terms(b, x, b, cap))) - spread), cap


def _experts_plan(w: Workload, ep: int, routing: Routing | None) -> int:
    """``ep`` checked: a whole number >= 1, and above one (or a skewed routing) only on a MoE model."""
    ep = positive_int(ep, "ep")
    routing = as_routing(routing)
    if not w.config.is_moe and (ep > 1 or (routing is not None and not routing.is_default)):
        what = "expert parallelism" if ep > 1 else "a routing distribution"
        raise CostModelError(f"{w.config.name} has no experts: {what} needs a MoE model")
    return ep


def prefill_report(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int = 1,
    seq: int,
    chunk: int | None = None,
    tp: int = 1,
    ep: int = 1,
    routing: Routing | None = None,
    allow_long_context: bool = False,
    check_memory: bool = True,
) -> PrefillReport:
    """TTFT lower bound of ``batch`` prompts of ``seq`` tokens.

    With ``chunk``, the prompt runs as ``ceil(seq / chunk)`` steps, each
    attending over the chunks before it (read from the KV cache); the chunk
    step is compiled once with a symbolic prefix and evaluated on every chunk at once.
    ``ep`` and ``routing``: the routed experts are the busiest EP rank's
    (:mod:`graphs.serving.step.expert_routing`; the all-to-all between ranks is not in the step).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    batch : int
        Prompts in the step.
    seq : int
        Prompt tokens each.
    chunk : int, optional
        Chunk size (tokens) of chunked prefill; None: one step.
    tp : int
        Tensor-parallel degree.
    ep : int
        Expert-parallel degree.
    routing : Routing or str, optional
        A routing distribution (MoE only; default uniform), or its text (``"zipf:1.2"``, as
        ``--routing`` takes it).
    allow_long_context : bool
        Cost a prompt beyond the model's context limit (the command's ``--allow-long-context``);
        False: refused with :class:`~costmodel.errors.ContextLimitError`, as the command refuses it.
    check_memory : bool
        When the device memory does not hold the point, say so among the ``notes`` (the
        verdict with which the command refuses it: :func:`~graphs.serving.step.ledger_fit.memory_note`);
        False: skip the check (a caller that checked capacity itself).

    Returns
    -------
    PrefillReport
        TTFT lower bound (s), the binding term, FLOPs and bytes.

    Raises
    ------
    CostModelError
        When a count is not a positive integer, or ``seq`` exceeds the model's context limit
        without ``allow_long_context`` (:class:`~costmodel.errors.ContextLimitError`).

    Examples
    --------
    ``costmodel prefill llama-3.1-8b --device h100 --seq 8192`` from Python, then in chunks of
    2048 (four steps, each attending over the chunks before it):

    >>> round(prefill_report("llama-3.1-8b", "h100", seq=8192).step_s * 1e3, 1)
    149.3
    >>> prefill_report("llama-3.1-8b", "h100", seq=8192, chunk=2048).chunks
    4
    """
    batch, seq, tp = positive_int(batch, "batch"), positive_int(seq, "seq"), positive_int(tp, "tp")
    if chunk is not None:  # a whole number of any type, as batch and seq (np.int64(512), 512.0)
        chunk = positive_int(chunk, "chunk")
    w = as_workload(config)
    if not allow_long_context:
        w.config.check_context(seq, "seq")
    hw = get_device(device)
    ep = _experts_plan(w, ep, routing)
    c = compiled_step(w, hw, Phase.PREFILL, tp=tp, ep=ep, routing=routing)
    fields = _report_fields(w, hw, c, Phase.PREFILL, (batch, seq), batch * seq, tp, ep)
    if check_memory:
        fields = _with_memory_note(fields, w, hw, Phase.PREFILL, batch, seq, tp, ep)
    plan = chunk_plan(seq, chunk)
    if plan is None or chunk is None:  # chunk_plan gives a plan only for a chunk
        return prefill_from_fields(fields)
    (n_full, rest), chunk = plan, int(chunk)
    import numpy as np  # only a chunked prefill needs it: a plain report stays light

    cc = compiled_step(w, hw, Phase.PREFILL, tp=tp, chunked=True, ep=ep, routing=routing)
    prefixes = np.arange(n_full, dtype=float) * chunk
    total = float(
        np.sum(cc.step_array(np.full_like(prefixes, batch), np.full_like(prefixes, chunk), prefixes))
    )
    if rest:
        total += cc.step(batch, rest, n_full * chunk)
    # the report's graph quantities come from the unchunked prompt; the time from the chunks
    power = as_float(hw.power_w) if hw.power_w is not None else None
    return prefill_from_fields(
        fields, chunk=chunk, chunks=n_full + (1 if rest else 0), chunked_s=total, power_w=power
    )


def decode_report(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int = 1,
    ctx: int,
    tp: int = 1,
    ep: int = 1,
    routing: Routing | None = None,
    allow_long_context: bool = False,
    check_memory: bool = True,
) -> DecodeReport:
    """One decode step: TPOT, tokens/s per user and per device, weight vs KV vs compute (see
    :class:`DecodeReport` for the two weight-read bounds). ``ep`` and ``routing``: the routed
    experts are the busiest EP rank's (:mod:`graphs.serving.step.expert_routing`; the all-to-all between
    ranks is not in the step: :func:`graphs.serving.analysis.parallel.parallel_plan` adds it).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    batch : int
        Sequences in the step.
    ctx : int
        Cached tokens per sequence.
    tp : int
        Tensor-parallel degree.
    ep : int
        Expert-parallel degree.
    routing : Routing or str, optional
        A routing distribution (MoE only; default uniform), or its text (``"zipf:1.2"``, as
        ``--routing`` takes it).
    allow_long_context : bool
        Cost a context beyond the model's context limit (the command's ``--allow-long-context``);
        False: refused with :class:`~costmodel.errors.ContextLimitError`, as the command refuses it.
    check_memory : bool
        When the device memory does not hold the point, say so among the ``notes`` (the
        verdict with which the command refuses it: :func:`~graphs.serving.step.ledger_fit.memory_note`);
        False: skip the check (a caller that checked capacity itself).

    Returns
    -------
    DecodeReport
        TPOT (s), tokens/s per user and per device, the weight, KV and compute terms.

    Raises
    ------
    CostModelError
        When a count is not a positive integer, or ``ctx`` exceeds the model's context limit
        without ``allow_long_context`` (:class:`~costmodel.errors.ContextLimitError`).

    Examples
    --------
    ``costmodel decode llama-3.1-8b --device h100 --batch 16 --ctx 4096`` from Python: the
    weights read once (4.48 ms over 3.35 TB/s) plus 16 x 4096 cached tokens of 131,072 B of KV
    each (2.56 ms), memory-bound:

    >>> r = decode_report("llama-3.1-8b", "h100", batch=16, ctx=4096)
    >>> round(r.step_s * 1e3, 2), round(r.weight_read_s * 1e3, 2), round(r.kv_read_s * 1e3, 2)
    (7.1, 4.48, 2.56)
    >>> r.bound_by.kind
    'memory'
    """
    batch, ctx, tp = positive_int(batch, "batch"), positive_int(ctx, "ctx"), positive_int(tp, "tp")
    w = as_workload(config)
    if not allow_long_context:
        w.config.check_context(ctx, "ctx")
    hw = get_device(device)
    ep = _experts_plan(w, ep, routing)
    c = compiled_step(w, hw, Phase.DECODE, tp=tp, ep=ep, routing=routing)
    fields = _report_fields(w, hw, c, Phase.DECODE, (batch, ctx), batch, tp, ep)
    if check_memory:  # the decode ledger at the point, compiled once per step (module doc)
        need, cap = c.memo("memory_need", lambda: _need(w, hw, tp, ep))
        if need(batch, ctx) > cap:
            fields = _with_memory_note(fields, w, hw, Phase.DECODE, batch, ctx, tp, ep)
    bw, wbytes, emb_bytes = c.memo("decode_constants", lambda: decode_constants(w, c, tp))
    return decode_from_fields(
        fields,
        bandwidth=bw,
        weights_bytes=wbytes,
        embedding_bytes=emb_bytes,
    )


def decode_constants(w: Workload, c: CompiledStep, tp: int) -> tuple[float, float, float]:
    """DRAM bandwidth, resident weight bytes and one device's share of the embedding table.

    Parameters
    ----------
    w : Workload
        The model's workload.
    c : CompiledStep
        Its compiled decode step.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    tuple of (float, float, float)
        Bandwidth (bytes/s), weight bytes held, embedding bytes per device.
    """
    emb = param_counts(w.config).embedding * get_dtype(w.config.embedding_weight_dtype).bytes / tp
    return as_float(c.hardware.bandwidth()), as_float(c.forms.weights_resident_bytes), as_float(emb)


def near_far_memory(config: ModelConfig | str | Workload, device: Hardware | str) -> NearFarMemory:
    """Full-memory reads per second, devices to hold the weights, per-token bound.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.

    Returns
    -------
    NearFarMemory
        Memory reads per second (1/s), devices to hold the weights, per-token bound (s).
    """
    cfg = as_workload(config).config
    hw = get_device(device)
    weights = as_float(param_bytes(cfg))
    cap, bw = as_float(hw.memory_bytes()), as_float(hw.bandwidth())
    n = max(1, math.ceil(weights / cap))
    return NearFarMemory(cfg.name, hw.name, weights, bw / cap, n, weights / (n * bw))
