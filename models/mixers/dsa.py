r"""DeepSeek Sparse Attention (``dsa``; DeepSeek-V3.2-Exp report, sec. 2.1; transformers'
``DeepseekV32Attention`` and ``DeepseekV32Indexer``, ``model_type: deepseek_v32``).

A DSA layer is DeepSeek's MLA (:class:`~models.mixers.mla.MLA`) run in its *MQA mode* whose
attention sees only ``k = index_topk`` keys per query, chosen by a *lightning indexer*::

    q_resid = q_a_norm(q_a_proj(h))                         # MLA's own low-rank query
    q_I     = rope(wq_b(q_resid))        [T, H_I, d_I]      # rope on the first qk_rope_head_dim
    k_I     = rope(k_norm(wk(h)))        [T, d_I]           # LayerNorm with bias; one key per token
    w       = weights_proj(h)            [T, H_I]
    I[t, s] = sum_j w[t, j] ReLU(q_I[t, j] . k_I[s])        # lightning_indexer, causal
    idx     = topk(I, k)                                    # topk
    out     = MLA attention of each query over its idx keys # attention rule, slots=k

**MQA mode in both phases.** "We implement DSA based on the MQA mode of MLA, where each latent
vector (the key-value entry of MLA) will be shared across all query heads of the query token"
(the DeepSeek-V3.2 paper, arXiv:2512.02556, sec. 2.1, "Instantiate DSA Under MLA"). A prefill
therefore runs as a decode does: ``W_UK`` absorbed into the query (``q_absorb``), attention of
``H`` heads over the shared latent (``d = kv_lora_rank + qk_rope_head_dim``, ``d_v =
kv_lora_rank``, 576 / 512 for DeepSeek-V3.2), ``W_UV`` on the way out (``v_absorb``); no
``kv_b_proj`` decompression. vLLM 0.13.0's only sparse MLA backend on SM 9.0 and 10.x does
exactly this for every token ("the kernels want to use MQA 576/512 approach for both prefill
and decode", ``v1/attention/backends/mla/flashmla_sparse.py``). SGLang 0.5.5 and later run a
batch whose longest KV is at most ``k`` in the decompressed MHA form instead (``MHA_ONE_SHOT``,
its indexer skipping the logits) and its ``fa3`` NSA backend scores only the valid slots: neither
is modelled, so SGLang's short prefills are priced as the MQA-mode kernel runs them (higher).

**Every slot is computed.** FlashMLA's sparse kernels as vLLM 0.13.0 builds them loop over
all ``k / 64`` blocks of a query's indices and mask the invalid ones (a query with fewer than
``k`` preceding tokens) to :math:`-\infty` after :math:`QK^T` (``csrc/sm90/prefill/sparse/
fwd.cu``: ``num_topk_blocks = params.topk / B_TOPK``; the sparse decode kernel likewise), their
loads predicated off: the ``attention`` rule's ``slots = k``, :math:`N k` pairs per head, the
K/V of the valid ones read. Later FlashMLA takes a ``topk_length`` to stop early, which vLLM
0.13.0 does not pass (SGLang's build is assumed the same).

**Padded heads.** The same kernels compute a whole tile of query heads: vLLM 0.13.0 pads a
rank's heads to 64 on SM 9.0 and to 128 on SM 10.x (:data:`SPARSE_HEAD_TILES`), so at TP 8
DeepSeek-V3.2's 16 heads per rank compute as 64 on an H200. The device's tile reaches the graph
as the build's ``sparse_head_tile`` (:func:`sparse_head_tile`; the compiled serving steps pass
it); a graph built without a device keeps the model's heads. With an FP8 KV cache (vLLM's
``fp8_ds_mla``) vLLM 0.13.0 runs a rank of fewer than 32 heads wholly on the FP8 decode kernel,
which it does not pad, and pads only the prefill of a wider rank (:func:`padded_tile`).

Costs, per layer (``H_I`` index heads of ``d_I``, ``r_q`` = ``q_lora_rank``, ``H_p`` the
padded heads):

* weights: MLA's plus :math:`r_q H_I d_I + d\,d_I + 2 d_I + d H_I`;
* cache per token: MLA's latent ``(kv_lora_rank + qk_rope_head_dim)`` values of the KV dtype
  plus the index key, charged as the reference kernels store it: ``d_I`` FP8 values and one
  FP32 scale, ``d_I + 4`` bytes (132 B at ``d_I = 128``; DeepGEMM's ``fp8_mqa_logits``, vLLM);
* decode, per token: the indexer projections :math:`2 (r_q H_I d_I + d\,d_I + d H_I)` FLOPs,
  the logits :math:`2 H_I d_I\,ctx` tensor FLOPs reading ``ctx (d_I + 4)`` bytes of keys, the
  top-k over ``ctx`` logits, then MLA's absorbed attention of :math:`2 H_p k (d + d_v)` FLOPs
  reading ``min(ctx, k)`` latents (only those are read);
* prefill of ``S`` tokens: logits over the :math:`S(S+1)/2` causal pairs
  (:math:`H_I d_I S(S+1)` tensor FLOPs), the absorbed projections, and attention of
  :math:`2 H_p S k (d + d_v)` FLOPs.

The main attention node is the ``attention`` rule with ``slots = k``, so the serving mixed step
and the predictor take it as a windowed kernel, its bytes affine in ``min(k, ctx)``; the
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

__all__ = [
    "DSA",
    "indexer_params",
    "INDEX_KEY_DTYPE",
    "INDEX_SCALE_BYTES",
    "SPARSE_HEAD_TILES",
    "MIN_HEADS_FOR_BF16_PREFILL",
    "padded_heads",
    "padded_tile",
    "dsa_notes",
    "sparse_head_tile",
]

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


class _MQAModeMLA(MLA):
    """MLA run in its MQA mode in both phases: the absorbed query over the shared latent (the
    DeepSeek-V3.2 paper, sec. 2.1, "Instantiate DSA Under MLA"; vLLM 0.13.0's FlashMLA sparse
    backend, "MQA 576/512 approach for both prefill and decode")."""

    absorbed_prefill = True


#: MLA's formula and block, which a DSA layer runs with the indexer added (module doc)
_MLA = _MQAModeMLA()

#: the query-head multiple of FlashMLA's sparse kernels per device (module doc): vLLM 0.13.0
#: ``v1/attention/backends/mla/flashmla_sparse.py``, ``self.padding = 128 if
#: current_platform.is_device_capability_family(100) else 64`` ("kernel requires num_local_head
#: to be a multiple of 64 on hopper and 128 on blackwell"); SM 9.0 is the catalog's Hopper, SM 10.x
#: its B200, GB200, B300 and GB300 (its other Blackwell devices are SM 12.x)
SPARSE_HEAD_TILES: dict[str, int] = {"Hopper": 64, "b200": 128, "gb200": 128, "b300": 128, "gb300": 128}


#: vLLM 0.13.0 (``flashmla_sparse.py``): with an FP8 KV cache, a rank of fewer query heads runs
#: every token on the FP8 decode kernel ("mixed batch mode"), which is not padded; from this many
#: its prefill tokens run the padded BF16 kernel (on the up-converted cache) and its decodes the
#: FP8 one, unpadded
MIN_HEADS_FOR_BF16_PREFILL = 32


def padded_heads(heads: Any, tile: int) -> Any:
    """``heads`` rounded up to whole tiles of ``tile`` (the heads as they are at ``tile`` 1).

    >>> padded_heads(16, 64), padded_heads(128, 64), padded_heads(16, 1)
    (64, 128, 16)
    """
    return heads if tile == 1 else sympy.ceiling(sympy.Rational(1, tile) * heads) * tile


def padded_tile(phase: str, tile: int, kv_dtype: str, heads: Any) -> int:
    """The head tile a DSA attention node of this phase is padded to (module doc): the device's
    ``sparse_head_tile`` wherever the BF16 sparse kernel runs, every token with a BF16 KV cache;
    with an FP8 cache (vLLM 0.13.0's ``fp8_ds_mla``) only a prefill of at least
    :data:`MIN_HEADS_FOR_BF16_PREFILL` heads per rank, else 1.

    Parameters
    ----------
    phase : str
        ``prefill`` or ``decode``.
    tile : int
        The device's :func:`sparse_head_tile`.
    kv_dtype : str
        The KV-cache dtype.
    heads : int or sympy.Expr
        The rank's query heads (a symbolic count is taken as at least the threshold).

    Returns
    -------
    int
        The tile, or 1 (no padding).
    """
    if tile == 1 or not str(kv_dtype).startswith("fp8"):
        return tile
    h = heads if isinstance(heads, sympy.Basic) else sympy.Integer(heads)
    many = not h.is_number or bool(h >= MIN_HEADS_FOR_BF16_PREFILL)
    return tile if phase == "prefill" and many else 1


def dsa_notes(cfg: Any, tile: int, tp: int = 1) -> tuple[str, ...]:
    """What a device's answer says once about a DSA model's attention: the kernel form it priced
    (MQA mode, every top-k slot) and, where the device's tile pads them, the heads a rank computes
    (:func:`padded_tile`; ``()`` for a model without DSA layers).

    Parameters
    ----------
    cfg : ModelConfig
        The model.
    tile : int
        The device's :func:`sparse_head_tile`.
    tp : int
        The tensor-parallel degree (a rank's heads: ``num_attention_heads / tp``).

    Returns
    -------
    tuple of str
        One line, or none.

    >>> from models.resolver import resolve_model
    >>> dsa_notes(resolve_model("deepseek-v3.2"), 64, 8)[0].split("; ")[1]
    "a rank's 16 query heads computed as 64, the kernel's tile on this device"
    >>> len(dsa_notes(resolve_model("deepseek-v3.2"), 64, 1)[0].split("; "))  # 128 heads: no padding
    1
    >>> dsa_notes(resolve_model("llama-3.1-8b"), 64, 8)
    ()
    """
    ix, m = cfg.spec(DSASpec), cfg.spec(MLASpec)
    if ix is None or m is None:
        return ()
    line = (
        f"{cfg.name}: sparse attention priced as FlashMLA runs it (vLLM 0.13.0): MQA mode over the latent "
        f"({m.kv_lora_rank + m.qk_rope_head_dim} / {m.kv_lora_rank}), all {ix.index_topk} top-k slots of every "
        "query computed"
    )
    heads = sympy.Integer(cfg.num_attention_heads) / tp
    pre, dec = (
        padded_heads(heads, padded_tile(phase, tile, cfg.cache_dtype, heads))
        for phase in ("prefill", "decode")
    )
    if pre != heads:
        line += f"; a rank's {heads} query heads computed as {pre}, the kernel's tile on this device"
        line += " (in prefill only, with this FP8 cache)" if dec == heads else ""
    return (line,)


def sparse_head_tile(architecture: str, device: str) -> int:
    """The query-head multiple a DSA layer's sparse kernels compute on a device
    (:data:`SPARSE_HEAD_TILES`; 1 where none is known: the heads as they are).

    Parameters
    ----------
    architecture : str
        The device's catalog architecture (``Hopper``).
    device : str
        The device's catalog name (``b200``).

    Returns
    -------
    int
        The tile: 64, 128, or 1.

    >>> sparse_head_tile("Hopper", "h200-sxm"), sparse_head_tile("Blackwell", "b200")
    (64, 128)
    >>> sparse_head_tile("Blackwell", "rtx-pro-6000"), sparse_head_tile("Ampere", "a100-sxm-80gb")
    (1, 1)
    """
    return SPARSE_HEAD_TILES.get(device, SPARSE_HEAD_TILES.get(architecture, 1))


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
    indices as one more input, ``slots = index_topk`` (each query computes ``k`` slots and reads
    the keys of its ``min(t, k)`` valid ones) and its heads padded to the device's
    ``sparse_head_tile``."""

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
            params["slots"] = self._sparse.inner.cfg.need(DSASpec).index_topk
            dims = self._sparse.inner.dims  # the kernel computes whole tiles of query heads (module doc)
            tile = padded_tile(dims.phase, dims.sparse_head_tile, self._sparse.inner.kvd, params["heads"])
            params["heads"] = padded_heads(params["heads"], tile)
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
        """The latent cache as the sparse kernel reads it: the cache holds every position, the
        kernel gathers the selected ones, ``min(ctx, k)`` in decode and, before a chunk of new
        tokens (each a key of its own), ``min(prefix, k - 1)`` of the prefix: the positions the
        ``slots`` rule charges (``min(N_kv, N + k - 1)``)."""
        n, t, nbytes = self.inner.cache(local, width, tokens)
        k = self.inner.cfg.need(DSASpec).index_topk
        read = k if self.inner.dims.phase == "decode" else k - 1
        return n, t, nbytes / tokens * sympy.Min(tokens, read)

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
            pad=True,  # k slots a row whatever the context: the short ones padded
        )[0]
