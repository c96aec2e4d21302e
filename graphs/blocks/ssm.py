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
from costmodel.tensor import Tensor

from .layer_base import LayerBase
from .registry import Ref, register_mixer

__all__ = ["ssm", "recurrent_state"]


def recurrent_state(layer: LayerBase, local: str, width: Any, dtype: str) -> Ref:
    """The state carried from the previous step (decode, or a chunk after a cached prefix): a
    cache-like source whose residency the op that writes it records."""
    t = Tensor(layer.b.name(local), (layer.dims.batch, width), dtype)
    n, t = layer.b.source(local, t, "kv_cache", resident=False)
    return n, t


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
    carried = dims.phase == "decode" or dims.prefix != 0
    zx = layer.linear("in_proj", h, 2 * d_in + 2 * G * N + Hs)
    conv_in: list[Any] = [(*zx, T * ch * ab), layer.weight("conv1d.weight", (ch, K + 1))]
    if carried:
        conv_in.append(recurrent_state(layer, "conv_state", (K - 1) * ch, layer.act))
    conv = layer.b.op(
        "conv1d",
        "causal_conv1d",
        conv_in,
        [Tensor(layer.b.name("conv1d"), (T, ch), layer.act)],
        extra=Cost.resident(state=B * (K - 1) * ch * ab),
        tokens=T,
        channels=ch,
        width=K,
        batch=B,
        dtype=layer.act,
        weight_dtype=layer.wd,
        state="read_write" if carried else "write",
    )[0]
    # x, B and C come from the conv, dt from in_proj; A_log, D and dt_bias are H each
    scan_w = layer.weight("A_D_dt_bias", (3 * Hs,))
    scan_in: list[Any] = [conv, (*zx, T * Hs * ab), scan_w]
    if carried:
        scan_in.append(recurrent_state(layer, "ssm_state", Hs * P * N, sdt))
    y = layer.b.op(
        "scan",
        "selective_scan",
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
    gated = layer.b.op(
        "gate",
        "elementwise",
        [y, (*zx, T * d_in * ab)],
        [Tensor(layer.b.name("gate"), (T, d_in), layer.act)],
        n=T * d_in,
        inputs=2,
        vector_ops=5,  # silu(z) (4) and the product
        sfu_ops=1,
        dtype=layer.act,
    )[0]
    normed = layer.norm("norm", gated, T, d_in)
    return layer.linear("out_proj", normed, cfg.hidden_size, reduce=True)
