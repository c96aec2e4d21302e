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

from dataclasses import dataclass
from typing import Any, ClassVar

import sympy

from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import (
    ConfigSpec,
    ConfigView,
    Dim,
    EdgeRef,
    LayerContext,
    Mixer,
    Ref,
    int_at_least_zero,
    register_mixer,
)

__all__ = [
    "AttentionSpec",
    "SoftmaxAttention",
    "GQA",
    "Sliding",
    "Chunked",
    "softmax_attention",
    "attention_params",
    "project_qkv",
    "write_kv",
    "kv_operands",
    "attention_shape",
]


@register_spec
@dataclass(frozen=True, slots=True)
class AttentionSpec(ConfigSpec):
    """The softmax-attention options (``cfg.attention``; every config has one, the defaults a
    plain Llama layer): biases, q/k norms, rope, sinks, the output gate, and the key limits of
    the ``sliding`` and ``chunked`` layers."""

    slot: ClassVar[str] = "attention"
    label: ClassVar[str] = "attention"
    always: ClassVar[bool] = True
    dims: ClassVar[tuple[str, ...]] = ("sliding_window", "attention_chunk_size")
    symbolic_dims: ClassVar[tuple[str, ...]] = ("sliding_window", "attention_chunk_size")

    qkv_bias: bool = False
    o_bias: bool = False  # a bias on the attention output projection (gpt-oss)
    qk_norm: bool = False
    # the q/k norms span all heads, H*h and H_kv*h weights (OLMo 2, Cohere, MiniMax-M2), not one
    # head_dim-wide norm shared by every head (Qwen3, Gemma 3)
    qk_norm_all_heads: bool = False
    rope: bool = True
    nope_full_attention: bool = False  # full-context layers take no rope (Llama 4's NoPE layers)
    attention_sinks: int = 0  # learned sink logits per head (gpt-oss: 1)
    attn_output_gate: bool = False  # q_proj also yields a sigmoid gate on the output (Qwen3-Next)
    sliding_window: Dim = None  # the ``sliding`` layers' window W (None: no sliding layers)
    attention_chunk_size: Dim = None  # the ``chunked`` layers' chunk C (None: no chunked layers)

    def check(self, model: str) -> None:
        if self.qk_norm_all_heads and not self.qk_norm:
            raise CostModelError(f"{model}: qk_norm_all_heads needs qk_norm=True")
        int_at_least_zero(model, "attention_sinks", self.attention_sinks)


def attention_params(cfg: ConfigView) -> sympy.Expr:
    """Softmax attention weights of one layer (module doc)."""
    d, H, h, hkv = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.num_key_value_heads
    assert h is not None and hkv is not None  # ModelConfig.__post_init__ fills both in
    a = cfg.need(AttentionSpec)
    p = d * H * h * (2 if a.attn_output_gate else 1) + 2 * d * hkv * h + H * h * d
    if a.qkv_bias:
        p += H * h + 2 * hkv * h
    if a.qk_norm:
        p += (H + hkv) * h if a.qk_norm_all_heads else 2 * h
    if a.o_bias:
        p += d
    return p + H * a.attention_sinks


class SoftmaxAttention(Mixer):
    """The softmax-attention family: one weight formula, one block; a subclass names the
    config field (if any) that limits the keys a query sees."""

    #: ``(keyword of softmax_attention, AttentionSpec field)``, or None for the whole context
    limit: ClassVar[tuple[str, str] | None] = None
    spec_slot: ClassVar[str | None] = "attention"

    def params(self, cfg: ConfigView) -> sympy.Expr:
        return attention_params(cfg)

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """q/k/v (and the output gate) read ``d``; o_proj reads the ``H*h`` concatenated heads."""
        assert cfg.head_dim is not None  # ModelConfig.__post_init__ fills it in
        return {
            "q_proj": cfg.hidden_size,
            "k_proj": cfg.hidden_size,
            "v_proj": cfg.hidden_size,
            "o_proj": cfg.num_attention_heads * cfg.head_dim,
        }

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        if self.limit is None:
            return softmax_attention(layer, h)
        kw, field = self.limit
        return softmax_attention(layer, h, **{kw: getattr(layer.cfg.need(AttentionSpec), field)})


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


#: the one GEMM vLLM's and SGLang's ``QKVParallelLinear`` and TensorRT-LLM's fused ``qkv_proj`` run
#: q, k and v in (Qwen3-Next's gated attention widens its q by the output gate: ``q_gate_proj``)
QKV = "qkv_proj"


def project_qkv(layer: LayerContext, h: Ref, *, rope: bool = True) -> tuple[Ref | None, Ref, Ref, Ref]:
    """The output gate (when ``attn_output_gate``; else None), q, k and v projections (with the
    config's q/k/v bias), the optional per-head q/k norms, and rope on q and k (``rope`` and
    the config's ``rope``): ``(gate, q, k, v)``, q ``[T, H h]``, k and v ``[T, H_kv h]`` per device."""
    cfg, T, hd = layer.cfg, layer.dims.tokens, layer.cfg.head_dim
    a = cfg.need(AttentionSpec)
    H, Hkv = layer.split(cfg.num_attention_heads, "num_attention_heads"), layer.kv_heads_local()
    gate = None
    if a.attn_output_gate:
        gate = layer.linear("q_gate_proj", h, H * hd, bias=a.qkv_bias, merged=QKV)
    q = layer.linear("q_proj", h, H * hd, bias=a.qkv_bias, merged=QKV)
    k = layer.linear("k_proj", h, Hkv * hd, bias=a.qkv_bias, merged=QKV)
    v = layer.linear("v_proj", h, Hkv * hd, bias=a.qkv_bias, merged=QKV)
    if a.qk_norm and a.qk_norm_all_heads:  # one norm over all heads (OLMo 2, MiniMax-M2)
        q = layer.norm("q_norm", q, T, H * hd)
        k = layer.norm("k_norm", k, T, Hkv * hd)
    elif a.qk_norm:
        q = layer.norm("q_norm", q, T * H, hd)
        k = layer.norm("k_norm", k, T * Hkv, hd)
    if rope and a.rope:
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
    return gate, q, k, v


def write_kv(layer: LayerContext, k: Ref, v: Ref, *, cap: Any = None) -> tuple[Ref, Ref]:
    """Copy the new tokens' K and V into the cache (``cap``: the positions it keeps per sequence)."""
    width = layer.kv_heads_local() * layer.cfg.head_dim
    return (
        layer.cache_write("k_cache_write", [k], width, cap=cap),
        layer.cache_write("v_cache_write", [v], width, cap=cap),
    )


def kv_operands(
    layer: LayerContext, k: Ref, v: Ref, kw: Ref, vw: Ref, *, window: Any = None, chunk: Any = None
) -> tuple[list[EdgeRef], str]:
    """The K and V an attention op of this phase reads, and their dtype.

    Prefill from the start reads K and V as just computed (activation dtype; the writes run
    alongside); a chunk after ``prefix`` cached tokens reads the cache and the new tokens'
    writes; a decode step reads ``ctx`` cached positions (``min(ctx, W)`` windowed, the current
    chunk's ``((ctx - 1) mod C) + 1`` chunked) and the writes only order the step (no bytes)."""
    dims, width = layer.dims, layer.kv_heads_local() * layer.cfg.head_dim
    if dims.phase == "prefill" and dims.prefix == 0:
        return [k, v], layer.act
    if dims.phase == "prefill":
        kc = layer.cache("k_cache", width, _cached(window, chunk, dims.prefix))
        vc = layer.cache("v_cache", width, _cached(window, chunk, dims.prefix))
        return [kc, vc, kw, vw], layer.kvd
    read = dims.kv_len
    if window is not None:
        read = sympy.Min(dims.kv_len, window)
    elif chunk is not None:
        from costmodel.rules.attention import chunk_keys  # the rules load with the graph, not the config

        read = chunk_keys(1, dims.kv_len, chunk)
    kc = layer.cache("k_cache", width, read)
    vc = layer.cache("v_cache", width, read)
    return [kc, vc, (*kw, 0), (*vw, 0)], layer.kvd


def attention_shape(layer: LayerContext) -> dict[str, Any]:
    """The ``attention`` rule's shape arguments for this layer and phase (causal, per device)."""
    cfg, dims = layer.cfg, layer.dims
    return dict(
        batch=dims.batch,
        heads=layer.split(cfg.num_attention_heads, "num_attention_heads"),
        kv_heads=layer.kv_heads_local(),
        q_len=dims.q_len,
        kv_len=dims.kv_len,
        head_dim=cfg.head_dim,
        causal=True,
        dtype=layer.act,
    )


def softmax_attention(layer: LayerContext, h: Ref, *, window: Any = None, chunk: Any = None) -> Ref:
    """q/k/v projections (q also yields an output gate when ``attn_output_gate``), optional q/k
    norms and rope, the KV-cache write and read, attention (``window`` or ``chunk`` limited,
    with the config's learned sinks), the output projection.

    A windowed or chunked layer's cache keeps at most ``W`` (or ``C``) positions per
    sequence (:data:`costmodel.keys.KV_CAP` on its cache writes); a decode step reads
    ``min(ctx, W)`` of them, or the current chunk's ``((ctx - 1) mod C) + 1``.
    """
    cfg, T, hd = layer.cfg, layer.dims.tokens, layer.cfg.head_dim
    H = layer.split(cfg.num_attention_heads, "num_attention_heads")
    rope = not (cfg.need(AttentionSpec).nope_full_attention and window is None and chunk is None)
    gate, q, k, v = project_qkv(layer, h, rope=rope)
    kw, vw = write_kv(layer, k, v, cap=window if window is not None else chunk)
    out = Tensor(layer.b.name("attention"), (T, H * hd), layer.act)
    common = {**attention_shape(layer), "sinks": cfg.need(AttentionSpec).attention_sinks}
    sink_w: list[Any] = []
    if cfg.need(AttentionSpec).attention_sinks:
        sink_w = [layer.weight("sinks", (H * cfg.need(AttentionSpec).attention_sinks,))]
    if window is not None:
        common["window"] = window
    if chunk is not None:
        common["chunk"] = chunk
    kv, kv_dtype = kv_operands(layer, k, v, kw, vw, window=window, chunk=chunk)
    o = layer.b.op(
        "attention", "attention", Role.ATTENTION, [q, *kv, *sink_w], [out], kv_dtype=kv_dtype, **common
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
    return layer.linear("o_proj", o, cfg.hidden_size, reduce=True, bias=cfg.need(AttentionSpec).o_bias)
