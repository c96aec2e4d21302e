"""Attention / FFN split across devices, and models held in on-chip SRAM.

Attention (KV-heavy, capacity-bound) runs on device A, the FFN or MoE
experts (weight-heavy, bandwidth-bound) on device B. Every layer ships the
hidden state ``[B, d]`` A -> B and back, so a decode step is

.. math::

    T = \\sum_{\\text{attention nodes}} T_A + \\sum_{\\text{FFN nodes}} T_B
        + 2L\\left(\\frac{B d b}{\\beta_\\text{link}} + \\alpha_\\text{hop}\\right)

For a model whose weights live in on-chip SRAM (an LPU), the devices needed
are ``ceil(weights / capacity)`` and consecutive layers sit on consecutive
chips: a token crosses ``n - 1`` hops per step, so ``(n - 1) alpha_hop`` is a
floor on the step however fast each chip is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.graph import COST, GROUP, KIND, REPEAT, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.keys import NodeKind, Phase
from costmodel.results import Result
from costmodel.roofline import bound
from models.config import ModelConfig
from models.params import param_bytes

from ..step.compiled import device_dims, positive_int
from ..step.ledger_fit import decode_memory
from ..step.option_checks import real_arg
from ..step.workload import Workload, as_workload

__all__ = ["attention_ffn_split", "sram_residency", "FFN_PREFIXES", "SplitReport", "SramReport"]

#: local node names (after the layer-group prefix) that belong to the FFN side
FFN_PREFIXES = ("mlp", "experts", "router", "shared")


def _is_ffn(node: str, group: str) -> bool:
    local = node[len(group) + 1 :] if node.startswith(group + ".") else node
    return local.startswith(FFN_PREFIXES)


@dataclass(frozen=True)
class SplitReport(Result):
    """A decode step with attention on one device type and the FFN on another (module doc).

    Attributes
    ----------
    model, attention_device, ffn_device : str
        What was run, by name.
    batch : int
        Sequences in the decode step.
    ctx : int
        Cached tokens per sequence.
    attention_s : float
        The attention side's kernels (and everything not FFN) on device A (s).
    ffn_s : float
        The FFN or expert kernels on device B (s).
    transfers_s : float
        ``2 L (B d_model a / bw + hop)``: the hidden state there and back per layer (s).
    transfers : int
        Link crossings per step, ``2 L``.
    step_s : float
        ``attention_s + ffn_s + transfers_s`` (s).
    ffn_weight_bytes : float
        The FFN side's weights (bytes).
    ffn_devices_to_hold_weights : int
        ``ceil(ffn_weight_bytes / capacity of B)``.
    attention_bytes : float
        What the attention side holds: the decode ledger's total on device A (weights, KV cache of
        ``batch`` sequences of ``ctx`` tokens, activations, reserve) less the FFN weights (bytes).
    attention_devices_to_hold : int
        ``ceil(attention_bytes / capacity of A)``: above 1, the step's attention time is for a
        device that cannot hold its KV cache (``serve split`` refuses it without ``--ignore-capacity``).
    """

    model: str
    attention_device: str
    ffn_device: str
    batch: int
    ctx: int
    attention_s: float
    ffn_s: float
    transfers_s: float  #: ``2 L (B d_model a / bw + hop)``: the hidden state there and back per layer
    transfers: int
    step_s: float
    ffn_weight_bytes: float
    ffn_devices_to_hold_weights: int
    attention_bytes: float = 0.0
    attention_devices_to_hold: int = 1


def attention_ffn_split(
    config: ModelConfig | str | Workload,
    attention_device: Hardware | str,
    ffn_device: Hardware | str,
    *,
    batch: int,
    ctx: int,
    link_bandwidth: float,
    hop_latency: float,
    allow_long_context: bool = False,
) -> SplitReport:
    """Decode step with attention on one device type and the FFN on another (module doc).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    attention_device : Hardware or str
        The device running attention (and the KV cache).
    ffn_device : Hardware or str
        The device running the FFN (or experts).
    batch : int
        Sequences in the decode step.
    ctx : int
        Cached tokens per sequence.
    link_bandwidth : float
        The link between them (bytes/s, > 0).
    hop_latency : float
        Latency per crossing (s, >= 0).
    allow_long_context : bool, default False
        Cost a ``ctx`` beyond the model's context limit (``serve split --allow-long-context``);
        False: refused with :class:`~models.context.ContextLimitError`, as the command refuses it.

    Returns
    -------
    SplitReport
        The step's attention, FFN and transfer terms (s) and the colocated comparison.

    Raises
    ------
    CostModelError
        When the link's numbers are not finite numbers in range (``link_bandwidth > 0``,
        ``hop_latency >= 0``), a count is not a positive integer, or ``ctx`` exceeds the model's
        context limit without ``allow_long_context``.
    """
    link_bandwidth = real_arg("link_bandwidth", link_bandwidth, 0, inclusive=False, unit="B/s")
    hop_latency = real_arg("hop_latency", hop_latency, 0, unit="s")
    batch, ctx = positive_int(batch, "batch"), positive_int(ctx, "ctx")
    w = as_workload(config)
    cfg = w.config
    if not allow_long_context:  # as decode_report refuses it
        cfg.check_context(ctx, "ctx")
    a, b = get_device(attention_device), get_device(ffn_device)
    g = w.graph(Phase.DECODE, batch=batch, ctx=ctx, **device_dims(cfg, a))  # the attention device's kernels
    t_attn = t_ffn = 0.0
    ffn_weights = 0.0
    for n in op_nodes(g):
        d = g.nodes[n]
        # the side is the node's, not the device's: both sides may be one device type (the same
        # catalog object), whose time must still split between them
        ffn = _is_ffn(n, d.get(GROUP, ""))
        bd = bound(d[COST], b if ffn else a)
        t = as_float(bd.time) if bd.terms else 0.0
        rep = as_float(d.get(REPEAT, 1))
        if ffn:
            t_ffn += t * rep
        else:
            t_attn += t * rep
    for n, d in g.nodes(data=True):
        if d.get(KIND) == NodeKind.WEIGHT and _is_ffn(n, d.get(GROUP, "")):
            ffn_weights += as_float(d[COST].footprint) * as_float(d.get(REPEAT, 1))
    layers = as_float(cfg.num_hidden_layers)
    hidden_bytes = batch * as_float(cfg.hidden_size * get_dtype(cfg.activation_dtype).bytes)
    t_xfer = 2 * layers * (hidden_bytes / link_bandwidth + hop_latency)
    cap_b = as_float(b.memory_bytes())
    # the attention side holds everything the colocated decode ledger does but the FFN weights
    held = float(decode_memory(w, a)(batch, ctx)) - ffn_weights
    cap_a = as_float(a.memory_bytes())
    return SplitReport(
        model=cfg.name,
        attention_device=a.name,
        ffn_device=b.name,
        batch=batch,
        ctx=ctx,
        attention_s=t_attn,
        ffn_s=t_ffn,
        transfers_s=t_xfer,
        transfers=int(2 * layers),
        step_s=t_attn + t_ffn + t_xfer,
        ffn_weight_bytes=ffn_weights,
        ffn_devices_to_hold_weights=max(1, math.ceil(ffn_weights / cap_b)),
        attention_bytes=held,
        attention_devices_to_hold=max(1, math.ceil(held / cap_a)),
    )


@dataclass(frozen=True)
class SramReport(Result):
    """A model held in on-chip SRAM devices: how many, and the latency floors of one step.

    Attributes
    ----------
    model, device : str
        What was run, by name.
    weights_bytes : float
        Every parameter's bytes.
    devices : int
        ``n = ceil(weights / capacity)``.
    hops_per_step : int
        ``n - 1``.
    hop_latency_floor_s : float
        ``(n - 1) x hop``: a token crosses every device boundary once (s).
    layer_hops_floor_s : float
        ``L x hop``: one hop per layer when layers are spread round-robin over ``n > 1`` devices;
        0 on one device, which a token never leaves (s).
    weight_read_bound_s : float
        Each device reading its share of the weights once, ``weights / (n bw)`` (s).
    """

    model: str
    device: str
    weights_bytes: float
    devices: int
    hops_per_step: int
    hop_latency_floor_s: float  #: ``(n - 1) x hop``: a token crosses every device boundary once
    layer_hops_floor_s: float  #: ``L x hop`` over ``n > 1`` devices round-robin (0 on one)
    weight_read_bound_s: float


def sram_residency(
    config: ModelConfig | str | Workload, device: Hardware | str, *, hop_latency: float
) -> SramReport:
    """Devices needed to hold the weights on ``device`` and the per-hop latency floor of a step.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        An on-chip-memory device (its capacity holds a share of the weights).
    hop_latency : float
        Latency per device-to-device hop (s, >= 0).

    Returns
    -------
    SramReport
        Devices needed, the hops per step and the latency floor (s).

    Raises
    ------
    CostModelError
        When ``hop_latency`` is not a finite number >= 0.
    """
    hop_latency = real_arg("hop_latency", hop_latency, 0, unit="s")
    cfg = as_workload(config).config
    hw = get_device(device)
    weights = as_float(param_bytes(cfg))
    n = max(1, math.ceil(weights / as_float(hw.memory_bytes())))
    layers = int(as_float(cfg.num_hidden_layers))
    return SramReport(
        model=cfg.name,
        device=hw.name,
        weights_bytes=weights,
        devices=n,
        hops_per_step=n - 1,
        hop_latency_floor_s=(n - 1) * hop_latency,
        layer_hops_floor_s=layers * hop_latency if n > 1 else 0.0,  # one device: no hop at all
        weight_read_bound_s=weights / (n * as_float(hw.bandwidth())),
    )
