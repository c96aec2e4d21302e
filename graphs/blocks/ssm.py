"""The Mamba-2 mixer (Dao & Gu 2024; ``mamba_ssm.modules.mamba2.Mamba2``)::

    zxbcdt = in_proj(h)                      # [T, 2 d_in + 2 G N + H]
    xBC    = silu(conv1d(xBC))               # depthwise, width K, over d_in + 2 G N channels
    y      = selective_scan(x, dt, A, B, C, D)
    y      = rmsnorm(y * silu(z))            # the gated norm
    out    = out_proj(y)                     # [T, d], row parallel

Each sequence keeps a recurrent state (``H P N``) and a conv state
(``(K - 1)(d_in + 2 G N)``) that do not grow with the context: their
residency is the ``state`` footprint of the scan and conv ops. Under tensor
parallelism the heads split ``tp`` ways; the ``G`` groups of ``B``/``C`` split
when ``tp`` divides them and are replicated otherwise.
"""

from __future__ import annotations

from typing import Any

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.tensor import Tensor

from .layer_base import LayerBase
from .registry import Ref, register_mixer

__all__ = ["ssm", "recurrent_state", "causal_conv", "silu_gate"]


def recurrent_state(layer: LayerBase, local: str, width: Any, dtype: str) -> Ref:
    """The state carried from the previous step (decode, or a chunk after a cached prefix): a
    cache-like source whose residency the op that writes it records."""
    t = Tensor(layer.b.name(local), (layer.dims.batch, width), dtype)
    n, t = layer.b.source(local, t, "kv_cache", resident=False)
    return n, t


def carries_state(layer: LayerBase) -> bool:
    """A decode step, or a prefill chunk after a cached prefix, picks up the previous state."""
    return layer.dims.phase == "decode" or layer.dims.prefix != 0


def causal_conv(layer: LayerBase, src: Ref, channels: Any, width: Any, *, bias: bool = True) -> Ref:
    """The depthwise causal conv (and SiLU) of the recurrent mixers over the first ``channels``
    columns of ``src``, with its per-sequence conv state of ``width - 1`` inputs."""
    T, B = layer.dims.tokens, layer.dims.batch
    ab = get_dtype(layer.act).bytes
    carried = carries_state(layer)
    ins: list[Any] = [
        (*src, T * channels * ab),
        layer.weight("conv1d.weight", (channels, width + (1 if bias else 0))),
    ]
    if carried:
        ins.append(recurrent_state(layer, "conv_state", (width - 1) * channels, layer.act))
    return layer.b.op(
        "conv1d",
        "causal_conv1d",
        Role.CONV,
        ins,
        [Tensor(layer.b.name("conv1d"), (T, channels), layer.act)],
        extra=Cost.resident(state=B * (width - 1) * channels * ab),
        tokens=T,
        channels=channels,
        width=width,
        batch=B,
        dtype=layer.act,
        weight_dtype=layer.wd,
        state="read_write" if carried else "write",
        bias=bias,
    )[0]


def silu_gate(layer: LayerBase, y: Ref, z: Ref, width: Any) -> Ref:
    """``y * silu(z)`` over ``width`` columns, ``z`` a slice of the input projection."""
    T = layer.dims.tokens
    return layer.b.op(
        "gate",
        "elementwise",
        Role.ACTIVATION,
        [y, (*z, T * width * get_dtype(layer.act).bytes)],
        [Tensor(layer.b.name("gate"), (T, width), layer.act)],
        n=T * width,
        inputs=2,
        vector_ops=5,  # silu(z) (4) and the product
        sfu_ops=1,
        dtype=layer.act,
    )[0]


@register_mixer("ssm")
def ssm(layer: LayerBase, h: Ref) -> Ref:
    """Mamba-2's selective state-space mixer (module doc)."""
    cfg, dims = layer.cfg, layer.dims
    T, B = dims.tokens, dims.batch
    Hs = layer.split(cfg.ssm_num_heads, "ssm_num_heads")
    G = cfg.ssm_n_groups
    p = layer.tp
    if not (G.is_number and p.is_number and G % p != 0):
        G = layer.split(G, "ssm_n_groups")
    P, N, K = cfg.ssm_head_dim, cfg.ssm_state_size, cfg.ssm_conv_kernel
    d_in, ch = Hs * P, Hs * P + 2 * G * N
    ab = get_dtype(layer.act).bytes
    sdt = cfg.recurrent_state_dtype
    carried = carries_state(layer)
    zx = layer.linear("in_proj", h, 2 * d_in + 2 * G * N + Hs)
    conv = causal_conv(layer, zx, ch, K)
    # x, B and C come from the conv, dt from in_proj; A_log, D and dt_bias are H each
    scan_w = layer.weight("A_D_dt_bias", (3 * Hs,))
    scan_in: list[Any] = [conv, (*zx, T * Hs * ab), scan_w]
    if carried:
        scan_in.append(recurrent_state(layer, "ssm_state", Hs * P * N, sdt))
    y = layer.b.op(
        "scan",
        "selective_scan",
        Role.SCAN,
        scan_in,
        [Tensor(layer.b.name("scan"), (T, d_in), layer.act)],
        extra=Cost.resident(state=B * Hs * P * N * get_dtype(sdt).bytes) + Cost.traffic(read=scan_w[1].bytes),
        tokens=T,
        heads=Hs,
        head_dim=P,
        state_size=N,
        groups=G,
        batch=B,
        mode="recurrent" if dims.phase == "decode" else "chunked",
        chunk=cfg.ssm_chunk_size,
        dtype=layer.act,
        state_dtype=sdt,
        read_state=carried,
    )[0]
    gated = silu_gate(layer, y, zx, d_in)
    normed = layer.norm("norm", gated, T, d_in)
    return layer.linear("out_proj", normed, cfg.hidden_size, reduce=True)
