"""The gated delta-net mixer (Qwen3-Next's linear-attention layers; ``transformers``'
``Qwen3NextGatedDeltaNet``)::

    qkvz  = in_proj_qkvz(h)            # [T, 2 H_k d_k + 2 H_v d_v]
    ba    = in_proj_ba(h)              # [T, 2 H_v]: beta and the decay input
    qkv   = silu(conv1d(q, k, v))      # depthwise, width K, over 2 H_k d_k + H_v d_v channels
    o     = gated_delta_rule(q, k, v, alpha, beta)
    o     = rmsnorm(o) * silu(z)       # the gated norm, per value head
    out   = out_proj(o)                # [T, d], row parallel

Each sequence keeps a ``d_k x d_v`` state per value head and a conv state of
``(K - 1)`` inputs: constant in the context (the ``state`` footprint). Heads
split ``tp`` ways under tensor parallelism.

Per-layer weights: ``in_proj_qkvz`` ``d (2 H_k d_k + 2 H_v d_v)``, ``in_proj_ba`` ``2 d H_v``, a conv
over ``2 H_k d_k + H_v d_v`` channels of width ``K`` without bias, ``dt_bias`` and ``A_log``
(``2 H_v``), the gated norm ``d_v``, ``out_proj`` ``H_v d_v d``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import ConfigSpec, ConfigView, Dim, LayerContext, Mixer, Ref, register_mixer
from .recurrent import carries_state, causal_conv, recurrent_state, silu_gate

__all__ = ["LinearAttentionSpec", "LinearAttention"]


@register_spec
@dataclass(frozen=True, slots=True)
class LinearAttentionSpec(ConfigSpec):
    """The gated delta net's fields (``cfg.linear_attention``): key/value heads and head dims,
    the causal conv kernel and the chunk of the chunked (prefill) form."""

    slot: ClassVar[str] = "linear_attention"
    label: ClassVar[str] = "linear attention"
    dims: ClassVar[tuple[str, ...]] = (
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel",
        "linear_chunk_size",
    )
    symbolic_dims: ClassVar[tuple[str, ...]] = (
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
    )

    linear_num_key_heads: Dim = None
    linear_num_value_heads: Dim = None
    linear_key_head_dim: Dim = None
    linear_value_head_dim: Dim = None
    linear_conv_kernel: Dim = 4
    linear_chunk_size: Dim = 64


@register_mixer
class LinearAttention(Mixer):
    """Gated delta-net linear attention (module doc)."""

    name = "linear_attention"
    spec_slot = "linear_attention"
    needs = (
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
    )

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Gated-delta-net mixer weights of one layer (module doc)."""
        s = cfg.need(LinearAttentionSpec)
        d = cfg.hidden_size
        hk, hv = s.linear_num_key_heads, s.linear_num_value_heads
        dk, dv, K = s.linear_key_head_dim, s.linear_value_head_dim, s.linear_conv_kernel
        # check_layers requires all four of linear_attention layers
        assert hk is not None and hv is not None and dk is not None and dv is not None
        qkvz = d * (2 * hk * dk + 2 * hv * dv)
        conv = (2 * hk * dk + hv * dv) * K
        return qkvz + d * 2 * hv + conv + 2 * hv + dv + hv * dv * d

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """in_proj_qkvz and in_proj_ba read ``d``; out_proj the ``H_v*d_v`` value heads."""
        s = cfg.need(LinearAttentionSpec)
        assert s.linear_num_value_heads is not None and s.linear_value_head_dim is not None
        return {
            "in_proj_qkvz": cfg.hidden_size,
            "in_proj_ba": cfg.hidden_size,
            "out_proj": s.linear_num_value_heads * s.linear_value_head_dim,
        }

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Gated delta-net linear attention (module doc)."""
        cfg, dims = layer.cfg, layer.dims
        s = cfg.need(LinearAttentionSpec)
        T, B = dims.tokens, dims.batch
        hk = layer.split(s.linear_num_key_heads, "linear_num_key_heads")
        hv = layer.split(s.linear_num_value_heads, "linear_num_value_heads")
        dk, dv, K = s.linear_key_head_dim, s.linear_value_head_dim, s.linear_conv_kernel
        ch = 2 * hk * dk + hv * dv
        sdt = cfg.recurrent_state_dtype
        carried = carries_state(layer)
        qkvz = layer.linear("in_proj_qkvz", h, ch + hv * dv)
        ba = layer.linear("in_proj_ba", h, 2 * hv)
        conv = causal_conv(layer, qkvz, ch, K, bias=False)
        gate_w = layer.weight("A_log_dt_bias", (2 * hv,))
        rule_in: list[Any] = [conv, ba, gate_w]
        if carried:
            rule_in.append(recurrent_state(layer, "recurrent_state", hv * dk * dv, sdt))
        o = layer.b.op(
            "delta_rule",
            "gated_delta_rule",
            Role.SCAN,
            rule_in,
            [Tensor(layer.b.name("delta_rule"), (T, hv * dv), layer.act)],
            # the decay parameters are read beside the gates
            extra=Cost.resident(state=B * hv * dk * dv * get_dtype(sdt).bytes)
            + Cost.traffic(read=gate_w[1].bytes),
            tokens=T,
            key_heads=hk,
            value_heads=hv,
            key_dim=dk,
            value_dim=dv,
            batch=B,
            mode="recurrent" if dims.phase == "decode" else "chunked",
            chunk=s.linear_chunk_size,
            dtype=layer.act,
            state_dtype=sdt,
            read_state=carried,
        )[0]
        normed = layer.norm("norm", o, T * hv, dv)
        gated = silu_gate(layer, normed, qkvz, hv * dv)
        return layer.linear("out_proj", gated, cfg.hidden_size, reduce=True)
