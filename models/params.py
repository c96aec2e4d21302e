"""Parameter counts derived from a :class:`ModelConfig`, symbolic or numeric.

Per layer (``d`` hidden, ``H``/``H_kv`` heads, ``h`` head_dim, ``I`` MLP width):

* attention (MHA/GQA/MQA): ``d*H*h + 2*d*H_kv*h + H*h*d`` (+ ``H*h + 2*H_kv*h``
  with q/k/v bias, + ``2h`` with per-head q/k norms);
* attention (MLA): ``d*r_q + r_q + r_q*H*(h_nope + h_rope)`` (or
  ``d*H*(h_nope + h_rope)`` without a q low-rank), ``d*(r_kv + h_rope) + r_kv``,
  ``r_kv*H*(h_nope + h_v)``, ``H*h_v*d``;
* MLP: ``3*d*I`` gated (SwiGLU), ``2*d*I`` plain (GELU, biases not counted);
* MoE: ``E*3*d*I_e`` routed, ``n_shared*3*d*I_e`` shared, ``E*d`` router
  (+ ``E`` router bias);
* norms: ``2d`` (RMSNorm) or ``4d`` (LayerNorm with bias) per layer, ``d`` or
  ``2d`` final.

Embedding ``V*d``; lm_head ``V*d`` unless tied. *Non-embedding* excludes both
(the convention of the Qwen2.5 card's 6.53B); *active* counts ``k`` of the
``E`` routed experts per MoE layer (compute per token), while memory holds
*total*.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from costmodel.expr import to_expr

from .config import ModelConfig

__all__ = ["ParamCounts", "param_counts", "attention_params", "mlp_params", "moe_params"]


def attention_params(cfg: ModelConfig) -> sympy.Expr:
    """Attention weights of one layer (see module doc)."""
    d, H = cfg.hidden_size, cfg.num_attention_heads
    if cfg.is_mla:
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if cfg.q_lora_rank is not None:
            q = d * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * H * qk
        else:
            q = d * H * qk
        kv_a = d * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank
        kv_b = cfg.kv_lora_rank * H * (cfg.qk_nope_head_dim + cfg.v_head_dim)
        o = H * cfg.v_head_dim * d
        return q + kv_a + kv_b + o
    h, hkv = cfg.head_dim, cfg.num_key_value_heads
    p = d * H * h + 2 * d * hkv * h + H * h * d
    if cfg.qkv_bias:
        p += H * h + 2 * hkv * h
    if cfg.qk_norm:
        p += 2 * h
    return p


def mlp_params(cfg: ModelConfig, width: sympy.Expr | None = None) -> sympy.Expr:
    """Dense MLP weights: ``3*d*I`` gated, ``2*d*I`` plain."""
    i = cfg.intermediate_size if width is None else width
    return (3 if cfg.mlp == "swiglu" else 2) * cfg.hidden_size * i


def moe_params(cfg: ModelConfig, experts: sympy.Expr | None = None) -> sympy.Expr:
    """One MoE layer: ``experts`` routed (default all) + shared + router."""
    e = cfg.num_experts if experts is None else experts
    per_expert = mlp_params(cfg, cfg.moe_intermediate_size)
    router = cfg.num_experts * cfg.hidden_size + (cfg.num_experts if cfg.router_bias else 0)
    return e * per_expert + cfg.num_shared_experts * per_expert + router


def _norms(cfg: ModelConfig) -> tuple[sympy.Expr, sympy.Expr]:
    per_norm = cfg.hidden_size * (1 if cfg.norm == "rmsnorm" else 2)
    return 2 * per_norm, per_norm


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (numbers of values, not bytes)."""

    embedding: sympy.Expr
    lm_head: sympy.Expr
    per_dense_layer: sympy.Expr
    per_moe_layer: sympy.Expr
    final_norm: sympy.Expr
    total: sympy.Expr
    non_embedding: sympy.Expr
    active: sympy.Expr

    def bytes(self, bits_per_param: object = 16) -> sympy.Expr:
        """Weight bytes at ``bits_per_param`` (use the dtype's bits)."""
        return self.total * to_expr(bits_per_param, field="bits_per_param") / 8


def param_counts(cfg: ModelConfig) -> ParamCounts:
    """Total, non-embedding and active parameter counts of ``cfg``."""
    emb = cfg.vocab_size * cfg.hidden_size
    head = sympy.Integer(0) if cfg.tie_word_embeddings else emb
    layer_norms, final = _norms(cfg)
    attn = attention_params(cfg)
    dense = attn + layer_norms + mlp_params(cfg)
    if cfg.is_moe:
        moe = attn + layer_norms + moe_params(cfg)
        moe_active = attn + layer_norms + moe_params(cfg, cfg.num_experts_per_tok)
    else:
        moe = moe_active = sympy.Integer(0)
    body = cfg.n_dense_layers * dense + cfg.n_moe_layers * moe + final
    total = emb + head + body
    active = emb + head + cfg.n_dense_layers * dense + cfg.n_moe_layers * moe_active + final
    return ParamCounts(
        embedding=emb,
        lm_head=head,
        per_dense_layer=dense,
        per_moe_layer=moe,
        final_norm=final,
        total=sympy.expand(total),
        non_embedding=sympy.expand(body),
        active=sympy.expand(active),
    )
