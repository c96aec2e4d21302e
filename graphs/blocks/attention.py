"""Attention blocks: grouped-query (MHA/GQA/MQA) and multi-head latent (MLA)."""

from __future__ import annotations

from typing import Any

from costmodel.tensor import Tensor

from .layer_base import LayerBase

__all__ = ["AttentionBlocks"]


class AttentionBlocks(LayerBase):
    """GQA and MLA attention with their KV-cache reads and writes."""

    def gqa(self, h: tuple[str, Tensor]) -> tuple[str, Tensor]:
        cfg, dims = self.cfg, self.dims
        T, hd = dims.tokens, cfg.head_dim
        H, Hkv = self.split(cfg.num_attention_heads, "num_attention_heads"), self.kv_heads_local()
        q = self.linear("q_proj", h, H * hd, bias=cfg.qkv_bias)
        k = self.linear("k_proj", h, Hkv * hd, bias=cfg.qkv_bias)
        v = self.linear("v_proj", h, Hkv * hd, bias=cfg.qkv_bias)
        if cfg.qk_norm:
            q = self.norm("q_norm", q, T * H, hd)
            k = self.norm("k_norm", k, T * Hkv, hd)
        if cfg.rope:
            q = self.b.op(
                "rope_q",
                "rope",
                [q],
                [Tensor(self.b.name("rope_q"), q[1].shape, self.act)],
                tokens=T,
                heads=H,
                head_dim=hd,
                dtype=self.act,
            )[0]
            k = self.b.op(
                "rope_k",
                "rope",
                [k],
                [Tensor(self.b.name("rope_k"), k[1].shape, self.act)],
                tokens=T,
                heads=Hkv,
                head_dim=hd,
                dtype=self.act,
            )[0]
        kw = self.cache_write("k_cache_write", [k], Hkv * hd)
        vw = self.cache_write("v_cache_write", [v], Hkv * hd)
        out = Tensor(self.b.name("attention"), (T, H * hd), self.act)
        common = dict(
            batch=dims.batch,
            heads=H,
            kv_heads=Hkv,
            q_len=dims.q_len,
            kv_len=dims.kv_len,
            head_dim=hd,
            causal=True,
            dtype=self.act,
        )
        if dims.phase == "prefill" and dims.prefix == 0:
            # K and V are read as just computed (activation dtype); the writes run alongside
            o = self.b.op("attention", "attention", [q, k, v], [out], kv_dtype=self.act, **common)[0]
        elif dims.phase == "prefill":
            # a chunk after `prefix` cached tokens: attention reads the cache, the new tokens included
            kc = self.cache("k_cache", Hkv * hd, dims.prefix)
            vc = self.cache("v_cache", Hkv * hd, dims.prefix)
            o = self.b.op("attention", "attention", [q, kc, vc, kw, vw], [out], kv_dtype=self.kvd, **common)[
                0
            ]
        else:
            kc = self.cache("k_cache", Hkv * hd, dims.kv_len)
            vc = self.cache("v_cache", Hkv * hd, dims.kv_len)
            # the writes only order the step (the new token is part of ctx): no extra bytes on those edges
            o = self.b.op(
                "attention", "attention", [q, kc, vc, (*kw, 0), (*vw, 0)], [out], kv_dtype=self.kvd, **common
            )[0]
        return self.linear("o_proj", o, cfg.hidden_size, reduce=True)

    def mla(self, h: tuple[str, Tensor]) -> tuple[str, Tensor]:
        """DeepSeek MLA: low-rank q, a latent KV cache, decompression or absorption.

        Every edge carries the slice its consumer reads: the rope ops read the
        ``qk_rope_head_dim`` part of q and of ``kv_a``; the latent norm reads the
        ``kv_lora_rank`` part; in decode the absorbed query reads ``q_nope``.
        """
        cfg, dims = self.cfg, self.dims
        T, H = dims.tokens, self.split(cfg.num_attention_heads, "num_attention_heads")
        nope, rope_d, vd, r_kv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
        b = Tensor("b", (1,), self.act).dtype.bytes
        if cfg.q_lora_rank is not None:
            qa = self.linear("q_a_proj", h, cfg.q_lora_rank)
            qa = self.norm("q_a_norm", qa, T, cfg.q_lora_rank)
            q = self.linear("q_b_proj", qa, H * (nope + rope_d))
        else:
            q = self.linear("q_proj", h, H * (nope + rope_d))
        kva = self.linear("kv_a_proj", h, r_kv + rope_d)
        lat = self.b.op(
            "kv_a_norm",
            "rmsnorm",
            [(*kva, T * r_kv * b), self.weight("kv_a_norm.weight", (r_kv,))],
            [Tensor(self.b.name("kv_a_norm"), (T, r_kv), self.act)],
            rows=T,
            cols=r_kv,
            dtype=self.act,
            weight_dtype=self.wd,
        )[0]
        q_pe = self.b.op(
            "rope_q",
            "rope",
            [(*q, T * H * rope_d * b)],
            [Tensor(self.b.name("rope_q"), (T, H * rope_d), self.act)],
            tokens=T,
            heads=H,
            head_dim=rope_d,
            dtype=self.act,
        )[0]
        k_pe = self.b.op(
            "rope_k",
            "rope",
            [(*kva, T * rope_d * b)],
            [Tensor(self.b.name("rope_k"), (T, rope_d), self.act)],
            tokens=T,
            heads=1,
            head_dim=rope_d,
            dtype=self.act,
        )[0]
        # the cache holds the latent and the rope key: r_kv + rope_d per token, not full K and V
        lw = self.cache_write("latent_cache_write", [lat, k_pe], r_kv + rope_d)
        kvb_w = self.weight("kv_b_proj.weight", (r_kv, H * (nope + vd)))
        wd_bytes = kvb_w[1].dtype.bytes
        q_nope = (*q, T * H * nope * b)
        if dims.phase == "prefill":
            # decompress the latent of every key position: the new tokens and any cached prefix
            rows = dims.batch * dims.kv_len
            ins: list[Any] = [lat, kvb_w]
            if dims.prefix != 0:
                prefix = self.cache("latent_cache", r_kv + rope_d, dims.prefix)
                ins.append((*prefix[:2], dims.batch * dims.prefix * r_kv * prefix[1].dtype.bytes))
            kv = self.b.op(
                "kv_b_proj",
                "gemm",
                ins,
                [Tensor(self.b.name("kv_b_proj"), (rows, H * (nope + vd)), self.act)],
                M=rows,
                N=H * (nope + vd),
                K=r_kv,
                dtype=self.act,
                w_dtype=self.wd,
            )[0]
            out = Tensor(self.b.name("attention"), (T, H * vd), self.act)
            # keys are [k_nope; k_pe] with k_pe broadcast over heads (materialised, as kernels do)
            o = self.b.op(
                "attention",
                "attention",
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
                dtype=self.act,
            )[0]
        else:
            # absorb W_UK into the query: per head q_nope[T, nope] @ W_UK[nope, r_kv]
            qn = self.b.op(
                "q_absorb",
                "batched_gemm",
                [q_nope, (*kvb_w, H * nope * r_kv * wd_bytes)],
                [Tensor(self.b.name("q_absorb"), (T, H * r_kv), self.act)],
                batch=H,
                M=T,
                N=r_kv,
                K=nope,
                dtype=self.act,
                w_dtype=self.wd,
            )[0]
            cache = self.cache("latent_cache", r_kv + rope_d, dims.kv_len)
            out = Tensor(self.b.name("attention"), (T, H * r_kv), self.act)
            o = self.b.op(
                "attention",
                "attention",
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
                dtype=self.act,
                kv_dtype=self.kvd,
            )[0]
            # absorb W_UV on the way out: per head o[T, r_kv] @ W_UV[r_kv, v]
            o = self.b.op(
                "v_absorb",
                "batched_gemm",
                [o, (*kvb_w, H * r_kv * vd * wd_bytes)],
                [Tensor(self.b.name("v_absorb"), (T, H * vd), self.act)],
                batch=H,
                M=T,
                N=vd,
                K=r_kv,
                dtype=self.act,
                w_dtype=self.wd,
            )[0]
        return self.linear("o_proj", o, cfg.hidden_size, reduce=True)
