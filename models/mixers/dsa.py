r"""DeepSeek Sparse Attention (``dsa``; DeepSeek-V3.2-Exp report, sec. 2.1; transformers'
``DeepseekV32Attention`` and ``DeepseekV32Indexer``, ``model_type: deepseek_v32``).

A DSA layer is DeepSeek's MLA (:class:`~models.mixers.mla.MLA`, reused as is) whose attention
sees only ``k = index_topk`` keys per query, chosen by a *lightning indexer*::

    q_resid = q_a_norm(q_a_proj(h))                         # MLA's own low-rank query
    q_I     = rope(wq_b(q_resid))        [T, H_I, d_I]      # rope on the first qk_rope_head_dim
    k_I     = rope(k_norm(wk(h)))        [T, d_I]           # LayerNorm with bias; one key per token
    w       = weights_proj(h)            [T, H_I]
    I[t, s] = sum_j w[t, j] ReLU(q_I[t, j] . k_I[s])        # lightning_indexer, causal
    idx     = topk(I, k)                                    # topk
    out     = MLA attention of each query over its idx keys # attention rule, window=k pairs

Costs, per layer (``H_I`` index heads of ``d_I``, ``r_q`` = ``q_lora_rank``):

* weights: MLA's plus :math:`r_q H_I d_I + d\,d_I + 2 d_I + d H_I`;
* cache per token: MLA's latent ``(kv_lora_rank + qk_rope_head_dim)`` values of the KV dtype
  plus the index key, charged as the reference kernels store it: ``d_I`` FP8 values and one
  FP32 scale, ``d_I + 4`` bytes (132 B at ``d_I = 128``; DeepGEMM's ``fp8_mqa_logits``, vLLM);
* decode, per token: the indexer projections :math:`2 (r_q H_I d_I + d\,d_I + d H_I)` FLOPs,
  the logits :math:`2 H_I d_I\,ctx` tensor FLOPs reading ``ctx (d_I + 4)`` bytes of keys, the
  top-k over ``ctx`` logits, then MLA's absorbed attention over ``min(ctx, k)`` latents (only
  those are read);
* prefill of ``S`` tokens: logits over the :math:`S(S+1)/2` causal pairs
  (:math:`H_I d_I S(S+1)` tensor FLOPs) and attention over :math:`\sum_t \min(t, k)` pairs per
  head (the ``attention`` rule's ``window=k`` pair count) instead of :math:`S(S+1)/2`.

The main attention node is the ``attention`` rule with ``window = k`` pairs, so the serving
mixed step and the predictor take it as a windowed kernel, affine in ``min(k, ctx)``; the
indexer and the top-k are attention-role nodes too (they read every cached token), affine in
``ctx``. Under tensor parallelism the indexer is replicated on every device (vLLM builds its
three projections as ``ReplicatedLinear``); MLA's heads split as in ``mla``. ``weights_proj``
is kept in FP32 by transformers; it is priced at the layer's weight dtype (``H_I d`` values).
A chunk after ``p`` cached tokens charges the attention's K/V read as the windowed rule does
(``min(p + c, c + k - 1)`` positions), a lower bound when the selected keys spread wider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import ConfigSpec, ConfigView, Dim, EdgeRef, LayerContext, Mixer, Ref, register_mixer
from .mla import MLA, MLASpec

__all__ = ["DSA", "indexer_params", "INDEX_KEY_DTYPE", "INDEX_SCALE_BYTES"]

#: the index-key cache dtype of the reference kernels (DeepGEMM fp8_mqa_logits, vLLM)
INDEX_KEY_DTYPE = "fp8_e4m3"
#: one FP32 scale per cached index key
INDEX_SCALE_BYTES = 4


@register_spec
@dataclass(frozen=True, slots=True)
class DSASpec(ConfigSpec):
    """The lightning indexer's shapes (``cfg.dsa``): ``index_n_heads`` heads of
    ``index_head_dim``, keeping the ``index_topk`` best keys per query (all three or none)."""

    slot: ClassVar[str] = "dsa"
    label: ClassVar[str] = "DSA indexer"
    dims: ClassVar[tuple[str, ...]] = ("index_n_heads", "index_head_dim", "index_topk")
    required: ClassVar[tuple[str, ...]] = dims
    symbolic_dims: ClassVar[tuple[str, ...]] = dims

    index_n_heads: Dim = None
    index_head_dim: Dim = None
    index_topk: Dim = None


def indexer_params(cfg: ConfigView) -> sympy.Expr:
    """The lightning indexer's weights of one layer: ``wq_b`` (:math:`r_q H_I d_I`), ``wk``
    (:math:`d\\,d_I`), ``k_norm`` (LayerNorm weight and bias, :math:`2 d_I`), ``weights_proj``
    (:math:`d H_I`); transformers' ``DeepseekV32Indexer``."""
    ix, r_q = cfg.need(DSASpec), cfg.need(MLASpec).q_lora_rank
    n_i, d_i = ix.index_n_heads, ix.index_head_dim
    assert r_q is not None  # DSA.check
    return r_q * n_i * d_i + cfg.hidden_size * d_i + 2 * d_i + cfg.hidden_size * n_i


#: MLA's formula and block, which a DSA layer runs with the indexer added (module doc)
_MLA = MLA()


@register_mixer
class DSA(Mixer):
    """MLA whose attention reads only the ``index_topk`` keys a lightning indexer picks."""

    name = "dsa"
    spec_slot = "dsa"
    needs: ClassVar[tuple[str, ...]] = ("index_n_heads", "index_head_dim", "index_topk")

    def check(self, cfg: ConfigView) -> None:
        """MLA with a low-rank query (the indexer reads it), and the indexer's rope covering the
        first ``qk_rope_head_dim`` of its ``index_head_dim``."""
        m = cfg.spec(MLASpec)
        if m is None or m.kv_lora_rank is None or m.q_lora_rank is None:
            raise CostModelError(
                f"{cfg.name}: dsa layers are MLA with a low-rank query: kv_lora_rank and q_lora_rank "
                "must be set"
            )
        d_i, rope_d = cfg.need(DSASpec).index_head_dim, m.qk_rope_head_dim
        if d_i.is_number and rope_d.is_number and d_i < rope_d:
            raise CostModelError(
                f"{cfg.name}: dsa layers rotate the first qk_rope_head_dim ({rope_d}) of each index "
                f"head: index_head_dim must be >= {rope_d}, got {d_i}"
            )

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """MLA's weights plus the lightning indexer's (:func:`indexer_params`)."""
        return _MLA.params(cfg) + indexer_params(cfg)

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """MLA's linears, and the indexer's: ``index_wq_b`` reads the ``q_lora_rank`` latent,
        ``index_wk`` and ``index_weights_proj`` read ``d``."""
        m = cfg.need(MLASpec)
        return {
            **_MLA.linear_inputs(cfg),
            "index_wq_b": m.q_lora_rank,
            "index_wk": cfg.hidden_size,
            "index_weights_proj": cfg.hidden_size,
        }

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """MLA's block (:meth:`MLA.build`) seen through :class:`_SparseLayer`, which adds the
        indexer and the top-k before the attention node and limits it to ``index_topk`` keys."""
        return _MLA.build(cast(LayerContext, _SparseLayer(layer, h)), h)


class _SparseBuilder:
    """The layer's graph builder, but an attention-role op gets the indexer's top-k first: its
    indices as one more input and ``window = index_topk`` (each query scores ``min(t, k)`` keys)."""

    def __init__(self, sparse: _SparseLayer) -> None:
        self._sparse = sparse
        self._b = sparse.inner.b

    def name(self, local: str) -> str:
        return self._b.name(local)

    def source(self, local: str, tensor: Tensor, kind: str, *, resident: bool = True) -> tuple[str, Tensor]:
        return self._b.source(local, tensor, kind, resident=resident)

    def op(self, *args: Any, extra: Cost | None = None, **params: Any) -> list[tuple[str, Tensor]]:
        """:meth:`BuilderLike.op` (``local, rule, role, ins, outs``), the indexer first for attention."""
        local, rule, role, ins, outs = args
        if role == Role.ATTENTION:
            idx = self._sparse.indexer()
            ins = [*ins, idx]
            params["window"] = self._sparse.inner.cfg.need(DSASpec).index_topk
            read = Cost.traffic(read=idx[1].bytes)  # the selected positions, int32 per query and slot
            extra = read if extra is None else extra + read
        return self._b.op(local, rule, role, ins, outs, extra=extra, **params)


class _SparseLayer:
    """``layer`` as MLA's block sees it in a DSA layer (module doc): every member is the layer's
    own, but ``b`` adds the indexer before the attention op, ``norm`` keeps ``q_a_norm``'s output
    (the indexer's query input) and a decode step reads ``min(ctx, k)`` cached latents."""

    def __init__(self, layer: LayerContext, h: Ref) -> None:
        self.inner = layer
        self._h = h
        self._q_resid: Ref | None = None
        self.b = _SparseBuilder(self)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def norm(self, local: str, x: Ref, rows: Any, cols: Any) -> Ref:
        out = self.inner.norm(local, x, rows, cols)
        if local == "q_a_norm":
            self._q_resid = out
        return out

    def cache(self, local: str, width: Any, tokens: Any) -> tuple[str, Tensor, Any]:
        n, t, nbytes = self.inner.cache(local, width, tokens)  # the cache holds every position
        if self.inner.dims.phase == "decode":  # the sparse kernel gathers the selected latents only
            nbytes = nbytes / tokens * sympy.Min(tokens, self.inner.cfg.need(DSASpec).index_topk)
        return n, t, nbytes

    def indexer(self) -> Ref:
        """The lightning indexer and the top-k (module doc): returns the ``[T, k]`` int32 indices."""
        layer, cfg, dims = self.inner, self.inner.cfg, self.inner.dims
        ix = cfg.need(DSASpec)
        n_i, d_i, k, rope_d = (
            ix.index_n_heads,
            ix.index_head_dim,
            ix.index_topk,
            cfg.need(MLASpec).qk_rope_head_dim,
        )
        assert self._q_resid is not None, "dsa: q_a_norm was not built before the attention op"
        T, B, b = dims.tokens, dims.batch, Tensor("b", (1,), layer.act).dtype.bytes
        q = layer.linear("index_wq_b", self._q_resid, n_i * d_i)  # replicated: the full H_I heads
        kx = layer.linear("index_wk", self._h, d_i)
        k_norm = layer.b.op(
            "index_k_norm",
            "layernorm",
            Role.NORM,
            [kx, layer.weight("index_k_norm.weight", (d_i,)), layer.weight("index_k_norm.bias", (d_i,))],
            [Tensor(layer.b.name("index_k_norm"), (T, d_i), layer.act)],
            rows=T,
            cols=d_i,
            dtype=layer.act,
            weight_dtype=layer.wd,
            bias=True,
        )[0]
        w = layer.linear("index_weights_proj", self._h, n_i)
        q_pe, k_pe = (
            layer.b.op(
                f"index_rope_{which}",
                "rope",
                Role.ROPE,
                [(*src, T * heads * rope_d * b)],
                [Tensor(layer.b.name(f"index_rope_{which}"), (T, heads * rope_d), layer.act)],
                tokens=T,
                heads=heads,
                head_dim=rope_d,
                dtype=layer.act,
            )[0]
            for which, src, heads in (("q", q, n_i), ("k", k_norm, 1))
        )
        # the index-key cache: d_I FP8 values and one FP32 scale per token
        width = d_i + INDEX_SCALE_BYTES
        key_w = Tensor(layer.b.name("index_k_cache_write"), (T, width), INDEX_KEY_DTYPE)
        kw = layer.b.op(
            "index_k_cache_write",
            "copy",
            Role.CACHE_WRITE,
            [(*k_norm, T * (d_i - rope_d) * b), k_pe],  # the unrotated part and the rotated one
            [key_w],
            extra=Cost.traffic(write=INDEX_SCALE_BYTES * T) + Cost.resident(kv_cache=key_w.bytes),
            elements=T * d_i,
            dtype=layer.act,
            out_dtype=INDEX_KEY_DTYPE,
        )[0]
        # the logits kernel reads the keys as cached (FP8 and scale), the new tokens' from the write
        keys: list[EdgeRef]
        if dims.phase == "prefill" and dims.prefix == 0:
            keys = [kw]
        elif dims.phase == "prefill":
            kc = Tensor(layer.b.name("index_k_cache"), (B, dims.prefix, width), INDEX_KEY_DTYPE)
            keys = [layer.b.source("index_k_cache", kc, "kv_cache"), kw]
        else:
            kc = Tensor(layer.b.name("index_k_cache"), (B, dims.kv_len, width), INDEX_KEY_DTYPE)
            keys = [layer.b.source("index_k_cache", kc, "kv_cache"), (*kw, 0)]
        logits = layer.b.op(
            "index_logits",
            "lightning_indexer",
            Role.ATTENTION,
            [(*q, T * n_i * (d_i - rope_d) * b), q_pe, w, *keys],
            [Tensor(layer.b.name("index_logits"), (T, dims.kv_len), "fp32")],
            heads=n_i,
            q_len=dims.q_len,
            kv_len=dims.kv_len,
            head_dim=d_i,
            batch=B,
            causal=True,
            dtype=layer.act,
            key_bytes=width,
            weight_dtype=layer.act,
            compute_dtype=INDEX_KEY_DTYPE,
        )[0]
        from costmodel.rules.attention import causal_pairs  # rules load where a block is built

        pairs = B * causal_pairs(dims.q_len, dims.kv_len)  # the logits written, one per causal pair
        return layer.b.op(
            "index_topk",
            "topk",
            Role.ATTENTION,
            [(*logits, 4 * pairs)],
            [Tensor(layer.b.name("index_topk"), (T, k), "int32")],
            rows=T,
            elements=pairs,
            k=k,
        )[0]
