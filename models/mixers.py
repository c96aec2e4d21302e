"""Per-layer parameter counts of each mixer (registered in :mod:`models.layers`).

``d`` hidden, ``H``/``H_kv`` heads, ``h`` head_dim:

* ``gqa``, ``sliding``, ``chunked``: ``d*H*h + 2*d*H_kv*h + H*h*d``; ``+ d*H*h``
  with an output gate (Qwen3-Next: ``q_proj`` also yields the gate);
  ``+ H*h + 2*H_kv*h`` with q/k/v bias; ``+ d`` with an output bias; ``+ 2h``
  with q/k norms (``+ (H + H_kv)*h`` when they span all heads, ``qk_norm_all_heads``);
  ``+ H * attention_sinks`` learned sink logits (gpt-oss);
* ``mla``: ``d*r_q + r_q + r_q*H*(h_nope + h_rope)`` (or ``d*H*(h_nope +
  h_rope)``), ``d*(r_kv + h_rope) + r_kv``, ``r_kv*H*(h_nope + h_v)``, ``H*h_v*d``;
* ``ssm`` (Mamba-2, Dao & Gu 2024, ``mamba_ssm.modules.mamba2``): ``in_proj``
  ``d*(2*d_in + 2*G*N + H_s)`` with ``d_in = H_s*P``, a depthwise conv over
  ``d_in + 2*G*N`` channels of width ``K`` with bias (``(K + 1)`` per channel),
  ``dt_bias``, ``A_log`` and ``D`` (``3*H_s``), the gated norm ``d_in``,
  ``out_proj`` ``d_in*d``;
* ``linear_attention`` (gated delta net, Yang et al. 2024; the Qwen3-Next
  layout of ``transformers``): ``in_proj_qkvz`` ``d*(2*H_k*d_k + 2*H_v*d_v)``,
  ``in_proj_ba`` ``d*2*H_v``, a conv over ``2*H_k*d_k + H_v*d_v`` channels of
  width ``K`` without bias, ``dt_bias`` and ``A_log`` (``2*H_v``), the gated norm
  ``d_v``, ``out_proj`` ``H_v*d_v*d``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from .layers import register_mixer_params

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = [
    "attention_params",
    "mla_params",
    "ssm_params",
    "mamba_params",
    "linear_attention_params",
    "no_mixer_params",
]


@register_mixer_params("none")
def no_mixer_params(cfg: ModelConfig) -> sympy.Expr:
    """An MLP-only layer has no mixer weights."""
    return sympy.Integer(0)


@register_mixer_params("gqa")
@register_mixer_params("sliding")
@register_mixer_params("chunked")
def attention_params(cfg: ModelConfig) -> sympy.Expr:
    """Softmax attention weights of one layer (module doc)."""
    d, H, h, hkv = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.num_key_value_heads
    assert h is not None and hkv is not None  # ModelConfig.__post_init__ fills both in
    p = d * H * h * (2 if cfg.attn_output_gate else 1) + 2 * d * hkv * h + H * h * d
    if cfg.qkv_bias:
        p += H * h + 2 * hkv * h
    if cfg.qk_norm:
        p += (H + hkv) * h if cfg.qk_norm_all_heads else 2 * h
    if cfg.o_bias:
        p += d
    return p + H * cfg.attention_sinks


@register_mixer_params("mla")
def mla_params(cfg: ModelConfig) -> sympy.Expr:
    """Multi-head latent attention weights of one layer (module doc)."""
    d, H = cfg.hidden_size, cfg.num_attention_heads
    nope, rope_d, vd, r_kv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    # an mla layer has all four (ModelConfig checks the MLA fields all-or-none, check_layers kv_lora_rank)
    assert nope is not None and rope_d is not None and vd is not None and r_kv is not None
    qk = nope + rope_d
    if cfg.q_lora_rank is not None:
        q = d * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * H * qk
    else:
        q = d * H * qk
    kv_a = d * (r_kv + rope_d) + r_kv
    kv_b = r_kv * H * (nope + vd)
    return q + kv_a + kv_b + H * vd * d


@register_mixer_params("ssm")
def ssm_params(cfg: ModelConfig) -> sympy.Expr:
    """Mamba-2 mixer weights of one layer (module doc)."""
    d, Hs, P = cfg.hidden_size, cfg.ssm_num_heads, cfg.ssm_head_dim
    G, N, K = cfg.ssm_n_groups, cfg.ssm_state_size, cfg.ssm_conv_kernel
    assert Hs is not None and P is not None and N is not None  # check_layers requires them of ssm layers
    d_in = Hs * P
    conv_ch = d_in + 2 * G * N
    return d * (2 * d_in + 2 * G * N + Hs) + conv_ch * (K + 1) + 3 * Hs + d_in + d_in * d


@register_mixer_params("mamba")
def mamba_params(cfg: ModelConfig) -> sympy.Expr:
    """Mamba-1 mixer weights of one layer: ``in_proj`` ``2dD``, the conv ``D(K + 1)``,
    ``x_proj`` ``D(R + 2N)``, ``dt_proj`` ``RD + D``, ``A`` ``DN``, ``D`` skip ``D``, ``out_proj``
    ``Dd`` (Gu & Dao 2023; ``JambaMambaMixer``, whose three inner RMSNorms of ``R``, ``N`` and ``N``
    add ``R + 2N``)."""
    d, D, N = cfg.hidden_size, cfg.ssm_inner_size, cfg.ssm_state_size
    R, K = cfg.ssm_dt_rank, cfg.ssm_conv_kernel
    assert D is not None and N is not None and R is not None  # check_layers requires them of mamba layers
    norms = R + 2 * N if cfg.ssm_inner_norms else 0
    return 2 * d * D + D * (K + 1) + D * (R + 2 * N) + R * D + D + D * N + D + D * d + norms


@register_mixer_params("linear_attention")
def linear_attention_params(cfg: ModelConfig) -> sympy.Expr:
    """Gated-delta-net mixer weights of one layer (module doc)."""
    d = cfg.hidden_size
    hk, hv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
    dk, dv, K = cfg.linear_key_head_dim, cfg.linear_value_head_dim, cfg.linear_conv_kernel
    # check_layers requires all four of linear_attention layers
    assert hk is not None and hv is not None and dk is not None and dv is not None
    qkvz = d * (2 * hk * dk + 2 * hv * dv)
    conv = (2 * hk * dk + hv * dv) * K
    return qkvz + d * 2 * hv + conv + 2 * hv + dv + hv * dv * d
