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

Per-layer weights: ``in_proj`` ``d (2 d_in + 2 G N + H_s)`` with ``d_in = H_s P``, a depthwise
conv over ``d_in + 2 G N`` channels of width ``K`` with bias (``K + 1`` per channel),
``dt_bias``, ``A_log`` and ``D`` (``3 H_s``), the gated norm ``d_in``, ``out_proj`` ``d_in d``.
"""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.tensor import Tensor

from .base import ConfigView, LayerContext, Mixer, Ref, register_mixer
from .recurrent import SSMSpec, carries_state, causal_conv, recurrent_state, silu_gate

__all__ = ["SSM"]


@register_mixer
class SSM(Mixer):
    """Mamba-2's selective state-space mixer (module doc)."""

    name = "ssm"
    spec_slot = "ssm"
    needs = ("ssm_state_size", "ssm_num_heads", "ssm_head_dim")

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Mamba-2 mixer weights of one layer (module doc)."""
        s = cfg.need(SSMSpec)
        d, Hs, P = cfg.hidden_size, s.ssm_num_heads, s.ssm_head_dim
        G, N, K = s.ssm_n_groups, s.ssm_state_size, s.ssm_conv_kernel
        assert Hs is not None and P is not None and N is not None  # check_layers requires them of ssm layers
        d_in = Hs * P
        conv_ch = d_in + 2 * G * N
        return d * (2 * d_in + 2 * G * N + Hs) + conv_ch * (K + 1) + 3 * Hs + d_in + d_in * d

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """in_proj reads ``d``; out_proj the ``H_s*P`` inner channels."""
        s = cfg.need(SSMSpec)
        assert s.ssm_num_heads is not None and s.ssm_head_dim is not None  # check_layers requires them
        return {"in_proj": cfg.hidden_size, "out_proj": s.ssm_num_heads * s.ssm_head_dim}

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Mamba-2's selective state-space mixer (module doc)."""
        cfg, dims = layer.cfg, layer.dims
        s = cfg.need(SSMSpec)
        T, B = dims.tokens, dims.batch
        Hs = layer.split(s.ssm_num_heads, "ssm_num_heads")
        G = s.ssm_n_groups
        p = layer.tp
        if not (G.is_number and p.is_number and G % p != 0):
            G = layer.split(G, "ssm_n_groups")
        P, N, K = s.ssm_head_dim, s.ssm_state_size, s.ssm_conv_kernel
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
            extra=Cost.resident(state=B * Hs * P * N * get_dtype(sdt).bytes)
            + Cost.traffic(read=scan_w[1].bytes),
            tokens=T,
            heads=Hs,
            head_dim=P,
            state_size=N,
            groups=G,
            batch=B,
            mode="recurrent" if dims.phase == "decode" else "chunked",
            chunk=s.ssm_chunk_size,
            dtype=layer.act,
            state_dtype=sdt,
            read_state=carried,
        )[0]
        gated = silu_gate(layer, y, zx, d_in)
        normed = layer.norm("norm", gated, T, d_in)
        return layer.linear("out_proj", normed, cfg.hidden_size, reduce=True)
