"""Attention blocks: grouped-query (MHA/GQA/MQA), its sliding-window and chunked
variants (with optional learned sinks), and multi-head latent attention (MLA)."""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.keys import Role
from costmodel.rules.attention import chunk_keys
from costmodel.tensor import Tensor

from .layer_base import LayerBase
from .registry import Ref, register_mixer

__all__ = ["gqa", "sliding", "chunked", "mla", "softmax_attention"]


@register_mixer("gqa")
def gqa(layer: LayerBase, h: Ref) -> Ref:
    """Grouped-query attention (MHA and MQA as cases) over the whole context."""
    return softmax_attention(layer, h)


@register_mixer("sliding")
def sliding(layer: LayerBase, h: Ref) -> Ref:
    """Attention over the last ``sliding_window`` keys; the cache keeps only those."""
    return softmax_attention(layer, h, window=layer.cfg.sliding_window)


@register_mixer("chunked")
def chunked(layer: LayerBase, h: Ref) -> Ref:
    """Attention inside chunks of ``attention_chunk_size`` positions (Llama 4 local layers)."""
    return softmax_attention(layer, h, chunk=layer.cfg.attention_chunk_size)


def _cached(window: Any, chunk: Any, tokens: Any) -> Any:
    """Cached positions one sequence's queries read among ``tokens`` cached ones (before the step)."""
    if window is not None:
        return sympy.Min(tokens, window - 1)
    if chunk is not None:
        return tokens - chunk * sympy.floor(tokens / chunk)
    return tokens


def softmax_attention(layer: LayerBase, h: Ref, *, window: Any = None, chunk: Any = None) -> Ref:
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


@register_mixer("mla")
def mla(layer: LayerBase, h: Ref) -> Ref:
    """DeepSeek MLA: low-rank q, a latent KV cache, decompression or absorption.

    Every edge carries the slice its consumer reads: the rope ops read the
    ``qk_rope_head_dim`` part of q and of ``kv_a``; the latent norm reads the
    ``kv_lora_rank`` part; in decode the absorbed query reads ``q_nope``.
    """
    cfg, dims = layer.cfg, layer.dims
    T, H = dims.tokens, layer.split(cfg.num_attention_heads, "num_attention_heads")
    nope, rope_d, vd, r_kv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    # an mla layer has all four (ModelConfig checks the MLA fields all-or-none, check_layers kv_lora_rank)
    assert nope is not None and rope_d is not None and vd is not None and r_kv is not None
    b = Tensor("b", (1,), layer.act).dtype.bytes
    if cfg.q_lora_rank is not None:
        qa = layer.linear("q_a_proj", h, cfg.q_lora_rank)
        qa = layer.norm("q_a_norm", qa, T, cfg.q_lora_rank)
        q = layer.linear("q_b_proj", qa, H * (nope + rope_d))
    else:
        q = layer.linear("q_proj", h, H * (nope + rope_d))
    kva = layer.linear("kv_a_proj", h, r_kv + rope_d)
    lat = layer.b.op(
        "kv_a_norm",
        "rmsnorm",
        Role.NORM,
        [(*kva, T * r_kv * b), layer.weight("kv_a_norm.weight", (r_kv,))],
        [Tensor(layer.b.name("kv_a_norm"), (T, r_kv), layer.act)],
        rows=T,
        cols=r_kv,
        dtype=layer.act,
        weight_dtype=layer.wd,
    )[0]
    q_pe = layer.b.op(
        "rope_q",
        "rope",
        Role.ROPE,
        [(*q, T * H * rope_d * b)],
        [Tensor(layer.b.name("rope_q"), (T, H * rope_d), layer.act)],
        tokens=T,
        heads=H,
        head_dim=rope_d,
        dtype=layer.act,
    )[0]
    k_pe = layer.b.op(
        "rope_k",
        "rope",
        Role.ROPE,
        [(*kva, T * rope_d * b)],
        [Tensor(layer.b.name("rope_k"), (T, rope_d), layer.act)],
        tokens=T,
        heads=1,
        head_dim=rope_d,
        dtype=layer.act,
    )[0]
    # the cache holds the latent and the rope key: r_kv + rope_d per token, not full K and V
    lw = layer.cache_write("latent_cache_write", [lat, k_pe], r_kv + rope_d)
    kvb_w = layer.weight("kv_b_proj.weight", (r_kv, H * (nope + vd)))
    wd_bytes = kvb_w[1].dtype.bytes
    q_nope = (*q, T * H * nope * b)
    if dims.phase == "prefill":
        # decompress the latent of every key position: the new tokens and any cached prefix
        rows = dims.batch * dims.kv_len
        ins: list[Any] = [lat, kvb_w]
        if dims.prefix != 0:
            prefix = layer.cache("latent_cache", r_kv + rope_d, dims.prefix)
            ins.append((*prefix[:2], dims.batch * dims.prefix * r_kv * prefix[1].dtype.bytes))
        kv = layer.b.op(
            "kv_b_proj",
            "gemm",
            Role.LINEAR,
            ins,
            [Tensor(layer.b.name("kv_b_proj"), (rows, H * (nope + vd)), layer.act)],
            M=rows,
            N=H * (nope + vd),
            K=r_kv,
            dtype=layer.act,
            w_dtype=layer.wd,
        )[0]
        out = Tensor(layer.b.name("attention"), (T, H * vd), layer.act)
        # keys are [k_nope; k_pe] with k_pe broadcast over heads (materialised, as kernels do)
        o = layer.b.op(
            "attention",
            "attention",
            Role.ATTENTION,
            [q_nope, q_pe, kv, k_pe, (*lw, 0)],
            [out],
            batch=dims.batch,
            heads=H,
            kv_heads=H,
            q_len=dims.q_len,
            kv_len=dims.kv_len,
            head_dim=nope + rope_d,
            v_head_dim=vd,
            causal=True,
            dtype=layer.act,
        )[0]
    else:
        # absorb W_UK into the query: per head q_nope[T, nope] @ W_UK[nope, r_kv]
        qn = layer.b.op(
            "q_absorb",
            "batched_gemm",
            Role.LINEAR,
            [q_nope, (*kvb_w, H * nope * r_kv * wd_bytes)],
            [Tensor(layer.b.name("q_absorb"), (T, H * r_kv), layer.act)],
            batch=H,
            M=T,
            N=r_kv,
            K=nope,
            dtype=layer.act,
            w_dtype=layer.wd,
        )[0]
        cache = layer.cache("latent_cache", r_kv + rope_d, dims.kv_len)
        out = Tensor(layer.b.name("attention"), (T, H * r_kv), layer.act)
        o = layer.b.op(
            "attention",
            "attention",
            Role.ATTENTION,
            [qn, q_pe, cache, (*lw, 0)],
            [out],
            batch=dims.batch,
            heads=H,
            kv_heads=1,
            q_len=1,
            kv_len=dims.kv_len,
            head_dim=r_kv + rope_d,
            v_head_dim=r_kv,
            kv_shared=True,
            causal=True,
            dtype=layer.act,
            kv_dtype=layer.kvd,
        )[0]
        # absorb W_UV on the way out: per head o[T, r_kv] @ W_UV[r_kv, v]
        o = layer.b.op(
            "v_absorb",
            "batched_gemm",
            Role.LINEAR,
            [o, (*kvb_w, H * r_kv * vd * wd_bytes)],
            [Tensor(layer.b.name("v_absorb"), (T, H * vd), layer.act)],
            batch=H,
            M=T,
            N=vd,
            K=r_kv,
            dtype=layer.act,
            w_dtype=layer.wd,
        )[0]
    return layer.linear("o_proj", o, cfg.hidden_size, reduce=True)
