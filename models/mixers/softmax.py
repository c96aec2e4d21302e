r"""Softmax attention mixers: grouped-query (``gqa``: MHA, GQA and MQA as cases) and its
sliding-window (``sliding``) and chunked (``chunked``, Llama 4's local layers) variants, with
optional learned sinks (gpt-oss), q/k/v and output biases, q/k norms and an output gate.

Per-layer weights (``d`` hidden, ``H``/``H_kv`` heads, ``h`` head_dim):

.. math::

    N = d H h + 2 d H_{kv} h + H h d \;[+ d H h \text{ gate}]
        \;[+ H h + 2 H_{kv} h \text{ q/k/v bias}] \;[+ d \text{ o bias}]
        \;[+ 2 h \text{ q/k norms}] + H s

(q/k norms spanning all heads, ``qk_norm_all_heads``: ``(H + H_kv) h`` instead of ``2 h``),
with ``s = attention_sinks`` learned sink logits per head (the Qwen3-Next output gate is a
second half of ``q_proj``; transformers' ``LlamaAttention``, ``Qwen3NextAttention``,
``GptOssAttention``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import sympy

from costmodel.keys import Role
from costmodel.rules.attention import chunk_keys
from costmodel.tensor import Tensor

from .base import LayerContext, Mixer, Ref, register_mixer

if TYPE_CHECKING:
    from ..config import ModelConfig

__all__ = ["SoftmaxAttention", "GQA", "Sliding", "Chunked", "softmax_attention", "attention_params"]


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


class SoftmaxAttention(Mixer):
    """The softmax-attention family: one weight formula, one block; a subclass names the
    config field (if any) that limits the keys a query sees."""

    #: ``(keyword of softmax_attention, ModelConfig field)``, or None for the whole context
    limit: ClassVar[tuple[str, str] | None] = None

    def params(self, cfg: ModelConfig) -> sympy.Expr:
        return attention_params(cfg)

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        if self.limit is None:
            return softmax_attention(layer, h)
        kw, field = self.limit
        return softmax_attention(layer, h, **{kw: getattr(layer.cfg, field)})


@register_mixer
class GQA(SoftmaxAttention):
    """Grouped-query attention (MHA and MQA as cases) over the whole context."""

    name = "gqa"


@register_mixer
class Sliding(SoftmaxAttention):
    """Attention over the last ``sliding_window`` keys; the cache keeps only those."""

    name = "sliding"
    needs = ("sliding_window",)
    limit = ("window", "sliding_window")


@register_mixer
class Chunked(SoftmaxAttention):
    """Attention inside chunks of ``attention_chunk_size`` positions (Llama 4 local layers)."""

    name = "chunked"
    needs = ("attention_chunk_size",)
    limit = ("chunk", "attention_chunk_size")


def _cached(window: Any, chunk: Any, tokens: Any) -> Any:
    """Cached positions one sequence's queries read among ``tokens`` cached ones (before the step)."""
    if window is not None:
        return sympy.Min(tokens, window - 1)
    if chunk is not None:
        return tokens - chunk * sympy.floor(tokens / chunk)
    return tokens


def softmax_attention(layer: LayerContext, h: Ref, *, window: Any = None, chunk: Any = None) -> Ref:
    """q/k/v projections (q also yields an output gate when ``attn_output_gate``), optional q/k
    norms and rope, the KV-cache write and read, attention (``window`` or ``chunk`` limited,
    with the config's learned sinks), the output projection.

    A windowed or chunked layer's cache keeps at most ``W`` (or ``C``) positions per
    sequence (:data:`costmodel.keys.KV_CAP` on its cache writes); a decode step reads
    ``min(ctx, W)`` of them, or the current chunk's ``((ctx - 1) mod C) + 1``.
    """
    cfg, dims = layer.cfg, layer.dims
    T, hd = dims.tokens, cfg.head_dim
    H, Hkv = layer.split(cfg.num_attention_heads, "num_attention_heads"), layer.kv_heads_local()
    cap = window if window is not None else chunk
    gate = None
    if cfg.attn_output_gate:
        gate = layer.linear("q_gate_proj", h, H * hd, bias=cfg.qkv_bias)
    q = layer.linear("q_proj", h, H * hd, bias=cfg.qkv_bias)
    k = layer.linear("k_proj", h, Hkv * hd, bias=cfg.qkv_bias)
    v = layer.linear("v_proj", h, Hkv * hd, bias=cfg.qkv_bias)
    if cfg.qk_norm and cfg.qk_norm_all_heads:  # one norm over all heads (OLMo 2, MiniMax-M2)
        q = layer.norm("q_norm", q, T, H * hd)
        k = layer.norm("k_norm", k, T, Hkv * hd)
    elif cfg.qk_norm:
        q = layer.norm("q_norm", q, T * H, hd)
        k = layer.norm("k_norm", k, T * Hkv, hd)
    if cfg.rope and not (cfg.nope_full_attention and window is None and chunk is None):
        q = layer.b.op(
            "rope_q",
            "rope",
            Role.ROPE,
            [q],
            [Tensor(layer.b.name("rope_q"), q[1].shape, layer.act)],
            tokens=T,
            heads=H,
            head_dim=hd,
            dtype=layer.act,
        )[0]
        k = layer.b.op(
            "rope_k",
            "rope",
            Role.ROPE,
            [k],
            [Tensor(layer.b.name("rope_k"), k[1].shape, layer.act)],
            tokens=T,
            heads=Hkv,
            head_dim=hd,
            dtype=layer.act,
        )[0]
    kw = layer.cache_write("k_cache_write", [k], Hkv * hd, cap=cap)
    vw = layer.cache_write("v_cache_write", [v], Hkv * hd, cap=cap)
    out = Tensor(layer.b.name("attention"), (T, H * hd), layer.act)
    common = dict(
        batch=dims.batch,
        heads=H,
        kv_heads=Hkv,
        q_len=dims.q_len,
        kv_len=dims.kv_len,
        head_dim=hd,
        causal=True,
        dtype=layer.act,
        sinks=cfg.attention_sinks,
    )
    sink_w: list[Any] = []
    if cfg.attention_sinks:
        sink_w = [layer.weight("sinks", (H * cfg.attention_sinks,))]
    if window is not None:
        common["window"] = window
    if chunk is not None:
        common["chunk"] = chunk
    if dims.phase == "prefill" and dims.prefix == 0:
        # K and V are read as just computed (activation dtype); the writes run alongside
        o = layer.b.op(
            "attention", "attention", Role.ATTENTION, [q, k, v, *sink_w], [out], kv_dtype=layer.act, **common
        )[0]
    elif dims.phase == "prefill":
        # a chunk after `prefix` cached tokens: attention reads the cache, the new tokens included
        kc = layer.cache("k_cache", Hkv * hd, _cached(window, chunk, dims.prefix))
        vc = layer.cache("v_cache", Hkv * hd, _cached(window, chunk, dims.prefix))
        o = layer.b.op(
            "attention",
            "attention",
            Role.ATTENTION,
            [q, kc, vc, kw, vw, *sink_w],
            [out],
            kv_dtype=layer.kvd,
            **common,
        )[0]
    else:
        read = dims.kv_len
        if window is not None:
            read = sympy.Min(dims.kv_len, window)
        elif chunk is not None:
            read = chunk_keys(1, dims.kv_len, chunk)
        kc = layer.cache("k_cache", Hkv * hd, read)
        vc = layer.cache("v_cache", Hkv * hd, read)
        # the writes only order the step (the new token is part of ctx): no extra bytes on those edges
        o = layer.b.op(
            "attention",
            "attention",
            Role.ATTENTION,
            [q, kc, vc, (*kw, 0), (*vw, 0), *sink_w],
            [out],
            kv_dtype=layer.kvd,
            **common,
        )[0]
    if gate is not None:
        # o * sigmoid(gate): sigmoid (exp, add, divide) and the product per element
        o = layer.b.op(
            "output_gate",
            "elementwise",
            Role.ACTIVATION,
            [o, gate],
            [Tensor(layer.b.name("output_gate"), (T, H * hd), layer.act)],
            n=T * H * hd,
            inputs=2,
            vector_ops=3,
            sfu_ops=1,
            dtype=layer.act,
        )[0]
    return layer.linear("o_proj", o, cfg.hidden_size, reduce=True, bias=cfg.o_bias)
