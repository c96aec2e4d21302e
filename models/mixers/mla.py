r"""DeepSeek's multi-head latent attention (``mla``; DeepSeek-V2, arXiv:2405.04434 sec. 2.1).

Per-layer weights (``d`` hidden, ``H`` heads, ranks ``r_q``, ``r_kv``, head dims
``h_nope``, ``h_rope``, ``h_v``):

.. math::

    N = d r_q + r_q + r_q H (h_{nope} + h_{rope}) \;(\text{or } d H (h_{nope} + h_{rope}))
        + d (r_{kv} + h_{rope}) + r_{kv} + r_{kv} H (h_{nope} + h_v) + H h_v d

(``q_a_proj`` + its norm + ``q_b_proj``, ``kv_a_proj`` + its norm, ``kv_b_proj``, ``o_proj``;
transformers' ``DeepseekV3Attention``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import sympy

from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import ConfigSpec, ConfigView, Dim, LayerContext, Mixer, Ref, register_mixer

__all__ = ["MLASpec", "MLA"]


@register_spec
@dataclass(frozen=True, slots=True)
class MLASpec(ConfigSpec):
    """The latent-attention ranks and head dims (``cfg.mla``): all four of ``kv_lora_rank``,
    ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` or none; ``q_lora_rank`` None
    projects q at full rank (DeepSeek-V2-Lite)."""

    slot: ClassVar[str] = "mla"
    label: ClassVar[str] = "MLA"
    uniform_mixer: ClassVar[str | None] = "mla"
    dims: ClassVar[tuple[str, ...]] = (
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
        "q_lora_rank",
    )
    required: ClassVar[tuple[str, ...]] = (
        "kv_lora_rank",
        "qk_nope_head_dim",
        "qk_rope_head_dim",
        "v_head_dim",
    )
    symbolic_dims: ClassVar[tuple[str, ...]] = dims

    kv_lora_rank: Dim = None
    qk_nope_head_dim: Dim = None
    qk_rope_head_dim: Dim = None
    v_head_dim: Dim = None
    q_lora_rank: Dim = None


@register_mixer
class MLA(Mixer):
    """Multi-head latent attention: low-rank q, a latent KV cache, decompression or absorption."""

    name = "mla"
    spec_slot = "mla"
    needs = ("kv_lora_rank",)
    #: whether a prefill runs the absorbed (MQA) form as decode does, over the latent cache,
    #: instead of decompressing K/V with ``kv_b_proj`` (False: DeepSeek's MLA; a DSA layer's
    #: sparse kernels run the absorbed form in both phases, :mod:`.dsa`)
    absorbed_prefill: ClassVar[bool] = False

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Multi-head latent attention weights of one layer (module doc)."""
        d, H = cfg.hidden_size, cfg.num_attention_heads
        m = cfg.need(MLASpec)  # its four required fields checked by MLASpec.normalised
        nope, rope_d, vd, r_kv = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank
        qk = nope + rope_d
        if m.q_lora_rank is not None:
            q = d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * H * qk
        else:
            q = d * H * qk
        kv_a = d * (r_kv + rope_d) + r_kv
        kv_b = r_kv * H * (nope + vd)
        return q + kv_a + kv_b + H * vd * d

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """q_a/kv_a (or q_proj) read ``d``, q_b the ``q_lora_rank`` latent, kv_b the
        ``kv_lora_rank`` latent, o_proj the ``H*v_head_dim`` heads."""
        m = cfg.need(MLASpec)
        out = {
            "kv_a_proj": cfg.hidden_size,
            "kv_b_proj": m.kv_lora_rank,
            "o_proj": cfg.num_attention_heads * m.v_head_dim,
        }
        if m.q_lora_rank is not None:
            out.update(q_a_proj=cfg.hidden_size, q_b_proj=m.q_lora_rank)
        else:
            out["q_proj"] = cfg.hidden_size
        return out

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """DeepSeek MLA: low-rank q, a latent KV cache, decompression or absorption.

        Every edge carries the slice its consumer reads: the rope ops read the
        ``qk_rope_head_dim`` part of q and of ``kv_a``; the latent norm reads the
        ``kv_lora_rank`` part; in decode (and in a prefill of the absorbed form,
        :attr:`absorbed_prefill`) the absorbed query reads ``q_nope``.
        """
        cfg, dims = layer.cfg, layer.dims
        T, H = dims.tokens, layer.split(cfg.num_attention_heads, "num_attention_heads")
        m = cfg.need(MLASpec)  # its four required fields checked by MLASpec.normalised
        nope, rope_d, vd, r_kv = m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, m.kv_lora_rank
        b = Tensor("b", (1,), layer.act).dtype.bytes
        if m.q_lora_rank is not None:
            # q_a and kv_a: one GEMM (DeepSeek's fused_qkv_a_proj in vLLM, SGLang, TensorRT-LLM)
            qa = layer.linear("q_a_proj", h, m.q_lora_rank, merged="fused_qkv_a_proj")
            qa = layer.norm("q_a_norm", qa, T, m.q_lora_rank)
            q = layer.linear("q_b_proj", qa, H * (nope + rope_d))
        else:
            q = layer.linear("q_proj", h, H * (nope + rope_d))
        kva = layer.linear(
            "kv_a_proj", h, r_kv + rope_d, merged="fused_qkv_a_proj" if m.q_lora_rank is not None else ""
        )
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
        if dims.phase == "prefill" and not self.absorbed_prefill:
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
            if dims.phase == "prefill":
                # the absorbed form in prefill: the new tokens' latents from the write, the cached
                # prefix's from the cache
                latents: list[Any] = [lw]
                if dims.prefix != 0:
                    latents.insert(0, layer.cache("latent_cache", r_kv + rope_d, dims.prefix))
            else:
                latents = [layer.cache("latent_cache", r_kv + rope_d, dims.kv_len), (*lw, 0)]
            out = Tensor(layer.b.name("attention"), (T, H * r_kv), layer.act)
            o = layer.b.op(
                "attention",
                "attention",
                Role.ATTENTION,
                [qn, q_pe, *latents],
                [out],
                batch=dims.batch,
                heads=H,
                kv_heads=1,
                q_len=dims.q_len,
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
