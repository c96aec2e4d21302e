"""Transformer layer and whole-model dataflow graphs, prefill and decode.

``build_layer(config, phase)`` and ``build_model(config, phase)`` return a
``networkx.DiGraph`` whose op nodes carry symbolic :class:`Cost` s from the
rule registry and whose edges carry tensors (symbolic shapes, dtypes) and the
bytes moved. Phases (DESIGN.md):

* ``prefill``: ``T = B*S`` tokens; causal attention of ``S`` queries over the
  ``S`` keys of each sequence; K and V written to the cache (``T`` tokens).
* ``decode``: ``T = B`` tokens, one per sequence, attending over ``ctx``
  cached keys (``ctx`` counts the new token); the cache write is the new
  token's slice only.

Weights and KV caches are source nodes (``kind = "weight"`` / ``"kv_cache"``);
the embedding is a gather (its edge moves ``T`` rows); ``lm_head`` reads its
whole matrix. A layer group stands for its ``L`` copies through ``repeat``;
:func:`costmodel.graph.expand` unrolls it.

Per-layer ops (dense, GQA)::

    attn_norm -> q/k/v_proj (+bias) [-> q/k_norm] -> rope_q, rope_k -> k/v_cache_write
              -> attention -> o_proj -> attn_residual
    mlp_norm -> gate_proj, up_proj -> act (silu(g)*u) -> down_proj -> mlp_residual

MoE replaces the MLP with router -> softmax -> top-k -> expert gate/up
(grouped GEMMs over the touched experts) -> act -> down -> weighted combine
(+ shared experts). MLA replaces attention with the latent path: q (low-rank)
and kv_a projections, a cache of ``kv_lora_rank + qk_rope_head_dim`` per
token, decompression by ``kv_b_proj`` in prefill, and weight absorption in
decode (attention of ``H`` heads over one latent KV head).
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.graph import GROUP, REPEAT
from costmodel.keys import G_BATCH, G_EXIT, G_GROUPS, G_TOKENS, GROUP_ENTRY, GROUP_EXIT, Role
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.tensor import Tensor
from models.config import ModelConfig
from models.layers import LayerSpec, layer_groups
from models.mixers import get_mixer, get_mlp

from .builder import GraphBuilder
from .layer_base import LayerBase
from .mtp import add_mtp
from .phase import PHASES, PhaseDims, phase_dims

__all__ = ["PHASES", "PhaseDims", "phase_dims", "build_layer", "build_model"]


class _Layer(LayerBase):
    """One layer group: norm, the mixer, residual, then (unless the spec's MLP is
    ``none``) norm, the MLP, residual. The mixer and the MLP are the plug-ins its spec
    names (:mod:`models.mixers`)."""

    def build(self, x: tuple[str, Tensor]) -> tuple[str, Tensor]:
        cfg, T = self.cfg, self.dims.tokens
        d = cfg.hidden_size
        y = x
        if self.spec.mixer != "none":
            h = self.norm("attn_norm", y, T, d)
            a = get_mixer(self.spec.mixer).build(self, h)
            if cfg.sandwich_norm:
                a = self.norm("post_attn_norm", a, T, d)
            y = self.add("attn_residual", y, a)
        if self.spec.mlp != "none":
            if cfg.parallel_block and self.spec.mixer != "none":
                m_in = h  # a parallel block: the MLP reads the mixer's norm of the layer input
            else:
                m_in = self.norm("mlp_norm", y, T, d)
            m = get_mlp(self.spec.mlp).build(self, m_in)
            if cfg.sandwich_norm:
                m = self.norm("post_mlp_norm", m, T, d)
            y = self.add("mlp_residual", y, m)
        # entry edges: x feeds the first norm and the first residual
        first = ("attn_norm", "attn_residual") if self.spec.mixer != "none" else ("mlp_norm", "mlp_residual")
        for n in (self.b.name(first[0]), self.b.name(first[1])):
            self.entry.append((x[0], n, dict(self.g.edges[x[0], n])))
        return y


def _group_info(layer: _Layer, exit_ref: tuple[str, Tensor], repeat: object) -> dict[str, Any]:
    return {REPEAT: to_expr(repeat, field="repeat"), GROUP_ENTRY: layer.entry, GROUP_EXIT: exit_ref[0]}


def _config(config: object) -> ModelConfig:
    """``config`` itself, or what :func:`models.catalog.get_model` resolves it to (a catalog name,
    a config.json path, a parsed one), one line naming the value otherwise (a name was an
    AttributeError: 'str' object has no attribute 'vocab_size')."""
    if isinstance(config, ModelConfig):
        return config
    from models.catalog import get_model

    return get_model(config)  # type: ignore[arg-type]  # get_model names a wrong type itself


def build_layer(
    config: ModelConfig | str,
    phase: str,
    *,
    batch: object = B_sym,
    seq: object = S_sym,
    ctx: object = ctx_sym,
    kind: str | None = None,
    repeat: object = 1,
    prefix: object = 0,
    tp: object = 1,
    spec: LayerSpec | None = None,
    link: str = "scale_up",
    sparse_head_tile: int = 1,
) -> nx.DiGraph:
    """One Transformer layer of ``config`` for ``phase`` (see module doc).

    ``spec`` names its mixer and MLP (default: the config's last layer group);
    ``kind`` (``"dense"`` or ``"moe"``) only swaps the MLP of that default.
    The layer input is an ``input`` node ``x`` of shape ``[T, d]``. ``prefix``,
    ``tp``, ``link`` and ``sparse_head_tile`` as in :func:`build_model`.

    Parameters
    ----------
    config : ModelConfig or str
        The model, or a catalog name or config.json path.
    phase : str
        ``"prefill"`` or ``"decode"``.
    batch : int or sympy.Expr, default the symbol ``B``
        Sequences.
    seq : int or sympy.Expr, default the symbol ``S``
        Prompt (or chunk) tokens per sequence, prefill.
    ctx : int or sympy.Expr, default the symbol ``ctx``
        Cached keys per sequence, decode (the new token's included).
    kind : str, optional
        ``"dense"`` or ``"moe"``: the MLP of the default layer; None: the config's.
    repeat : int or sympy.Expr, default 1
        How many copies of the layer the graph stands for (its nodes' repeat count).
    prefix : int or sympy.Expr, default 0
        Cached tokens before a prefill chunk.
    tp : int or sympy.Expr, default 1
        Tensor-parallel degree.
    spec : LayerSpec, optional
        The mixer and MLP; None: the config's last layer group's.
    link : str, default "scale_up"
        The link the collectives cross.
    sparse_head_tile : int, default 1
        The query-head multiple of the device's sparse-attention kernel.

    Returns
    -------
    networkx.DiGraph
        Op nodes (a ``Cost`` each), weight and KV-cache sources, tensors on the edges.
    """
    config = _config(config)
    if spec is None:
        spec = layer_groups(config)[-1].spec
        if kind is not None:
            if kind not in ("dense", "moe"):
                raise CostModelError(f"layer kind {kind!r} not allowed; allowed: ('dense', 'moe')")
            if kind == "moe" and not config.is_moe:
                raise CostModelError(f"{config.name} has no experts: kind='moe' needs a MoE config")
            spec = LayerSpec(spec.mixer, kind)
    elif spec.mlp == "moe" and not config.is_moe:
        raise CostModelError(f"{config.name} has no experts: a moe layer needs a MoE config")
    if spec.mixer == "none" and spec.mlp == "none":
        raise CostModelError("a layer needs a mixer or an MLP: LayerSpec('none', 'none') builds nothing")
    missing = get_mixer(spec.mixer).missing(config)
    if missing:
        raise CostModelError(f"{config.name}: a {spec.mixer} layer needs {', '.join(missing)}")
    dims = phase_dims(
        phase, batch, seq, ctx, prefix=prefix, tp=tp, link=link, sparse_head_tile=sparse_head_tile
    )
    g = nx.DiGraph(model=config.name, phase=phase)
    xb = GraphBuilder(g, phase=phase, group="input")
    x = xb.source(
        "x",
        Tensor("input.x", (dims.tokens, config.hidden_size), config.activation_dtype),
        "input",
        resident=False,
    )
    layer = _Layer(g, config, dims, "layer", repeat, spec)
    y = layer.build(x)
    g.graph[G_GROUPS] = {"layer": _group_info(layer, y, repeat)}
    g.graph[G_EXIT] = y[0]
    return g


def build_model(
    config: ModelConfig | str,
    phase: str,
    *,
    batch: object = B_sym,
    seq: object = S_sym,
    ctx: object = ctx_sym,
    logits: str = "last",
    prefix: object = 0,
    tp: object = 1,
    link: str = "scale_up",
    sparse_head_tile: int = 1,
) -> nx.DiGraph:
    """The whole model: embedding gather, layer groups (repeated), final norm, lm_head.

    Layer groups: ``layers`` (repeat ``L``) for dense models; ``dense``
    (``first_k_dense_replace``) and ``moe`` for MoE models. ``logits="last"``
    computes the lm_head for the last position of each sequence only (what
    serving engines do in prefill); ``"all"`` for every token.

    ``prefix`` (prefill only) builds one chunk of a chunked prefill: ``S`` new
    tokens after ``prefix`` cached ones. ``tp`` is the tensor-parallel degree
    (Megatron-LM style, Shoeybi et al. 2019): the graph is one device's share,
    attention heads and MLP columns split ``tp`` ways, KV heads replicated
    when ``tp > H_kv``, an all-reduce after each row-parallel matmul (two per
    layer), a vocab-parallel embedding (all-reduce) and lm_head (all-gather). ``link`` is the
    link those collectives cross: ``scale_up``, or ``scale_out`` for a ``tp`` group wider than
    the device's scale-up domain (:meth:`costmodel.hardware.Hardware.group_link` chooses).
    ``sparse_head_tile`` is the query-head multiple of the device's sparse-attention kernel (a
    DSA layer's heads padded to it; :func:`models.mixers.dsa.sparse_head_tile` chooses).

    Parameters
    ----------
    config : ModelConfig or str
        The model (numeric, symbolic or mixed), or a catalog name or config.json path.
    phase : str
        ``"prefill"`` or ``"decode"``.
    batch : int or sympy.Expr, default the symbol ``B``
        Sequences.
    seq : int or sympy.Expr, default the symbol ``S``
        Prompt (or chunk) tokens per sequence, prefill.
    ctx : int or sympy.Expr, default the symbol ``ctx``
        Cached keys per sequence, decode (the new token's included).
    logits : str, default "last"
        ``"last"`` (the lm_head for each sequence's last position) or ``"all"``.
    prefix : int or sympy.Expr, default 0
        Cached tokens before a prefill chunk.
    tp : int or sympy.Expr, default 1
        Tensor-parallel degree.
    link : str, default "scale_up"
        ``scale_up`` or ``scale_out``.
    sparse_head_tile : int, default 1
        The query-head multiple of the device's sparse-attention kernel.

    Returns
    -------
    networkx.DiGraph
        One device's graph of a step: op nodes carry a ``Cost`` (FLOPs, bytes) and a repeat count.

    One decode token of ``tiny`` (d 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 176, vocab 256),
    ``ctx`` left symbolic: each matmul weight once (a MAC = 2 FLOPs), ``2 x (2 x (4096 + 2 x 2048
    + 4096 + 3 x 64 x 176) + 64 x 256) = 217088``, and ``4 L H d ctx = 512 ctx`` of attention:

    >>> from costmodel.graph import graph_total
    >>> from models import get_model
    >>> graph_total(build_model(get_model("tiny"), "decode", batch=1)).flops_on("tensor")
    512*ctx + 217088
    """
    config = _config(config)
    if logits not in ("last", "all"):
        raise CostModelError(f"logits {logits!r} not allowed; allowed: last, all")
    dims = phase_dims(
        phase, batch, seq, ctx, prefix=prefix, tp=tp, link=link, sparse_head_tile=sparse_head_tile
    )
    p = dims.tp
    if p.is_number and config.vocab_size.is_number and config.vocab_size % p != 0:
        raise CostModelError(f"{config.name}: vocab_size ({config.vocab_size}) is not divisible by tp ({p})")
    cfg = config
    g = nx.DiGraph(model=cfg.name, phase=phase)
    T, d, V = dims.tokens, cfg.hidden_size, cfg.vocab_size
    eb = GraphBuilder(g, phase=phase, group="embed")
    ids = eb.source("input_ids", Tensor("embed.input_ids", (T,), "int32"), "input", resident=False)
    table = eb.source(
        "embed_tokens.weight",
        Tensor("embed.embed_tokens.weight", (V / p, d), cfg.embedding_weight_dtype),
        "weight",
    )
    # each device gathers the rows that fall in its vocabulary shard: T/p on average
    x = eb.op(
        "embed_tokens",
        "embedding",
        Role.EMBEDDING,
        [ids, (*table, T * d * table[1].dtype.bytes / p)],
        [Tensor("embed.embed_tokens", (T, d), cfg.activation_dtype)],
        tokens=T,
        hidden=d,
        dtype=cfg.activation_dtype,
    )[0]
    if p != 1:
        x = eb.op(
            "embed_all_reduce",
            "all_reduce",
            Role.COLLECTIVE,
            [x],
            [Tensor("embed.embed_all_reduce", (T, d), cfg.activation_dtype)],
            elements=T * d,
            p=p,
            dtype=cfg.activation_dtype,
            link=dims.link,
        )[0]
    groups: dict[str, Any] = {}
    for grp in layer_groups(cfg):
        layer = _Layer(g, cfg, dims, grp.name, grp.count, grp.spec)
        x = layer.build(x)
        groups[grp.name] = _group_info(layer, x, grp.count)
    hb = GraphBuilder(g, phase=phase, group="head")
    rows = T if (logits == "all" or phase == "decode") else dims.batch
    last = x
    if rows is not T:
        # keep the last position of each sequence: a strided view, no bytes
        last = hb.op(
            "last_token",
            "view",
            Role.VIEW,
            [(*x, 0)],  # a view reads nothing; final_norm reads the rows it keeps
            [Tensor("head.last_token", (rows, d), cfg.activation_dtype)],
            elements=rows * d,
        )[0]
    fw = hb.source("final_norm.weight", Tensor("head.final_norm.weight", (d,), cfg.weight_dtype), "weight")
    fin_refs: list[Any] = [last, fw]
    if cfg.norm == "layernorm":
        fin_refs.append(
            hb.source("final_norm.bias", Tensor("head.final_norm.bias", (d,), cfg.weight_dtype), "weight")
        )
    ln_bias: dict[str, Any] = {"bias": True} if cfg.norm == "layernorm" else {}
    fin = hb.op(
        "final_norm",
        cfg.norm,
        Role.NORM,
        fin_refs,
        [Tensor("head.final_norm", (rows, d), cfg.activation_dtype)],
        rows=rows,
        cols=d,
        dtype=cfg.activation_dtype,
        weight_dtype=cfg.weight_dtype,
        **ln_bias,
    )[0]
    if cfg.tie_word_embeddings:
        head_w: tuple[str, Tensor] = table  # the embedding table, read in full by the lm_head
    else:
        head_w = hb.source(
            "lm_head.weight", Tensor("head.lm_head.weight", (d, V / p), cfg.lm_head_weight_dtype), "weight"
        )
    # the lm_head runs at the matmul dtype like every other linear (W8A8 / W4A4: fp8 or nvfp4
    # activations, quantised in the final norm's epilogue); its output logits stay in act dtype
    mmd = cfg.lm_head_matmul_dtype  # the activation dtype when the checkpoint kept the head unquantised
    head_refs: list[Any] = [(*fin, rows * d * get_dtype(mmd).bytes), head_w]
    if cfg.lm_head_bias:
        head_refs.append(
            hb.source("lm_head.bias", Tensor("head.lm_head.bias", (V / p,), cfg.weight_dtype), "weight")
        )
    logit = hb.op(
        "lm_head",
        "gemm",
        Role.HEAD,
        head_refs,
        [Tensor("head.lm_head", (rows, V / p), cfg.activation_dtype)],
        M=rows,
        N=V / p,
        K=d,
        dtype=mmd,
        w_dtype=cfg.lm_head_weight_dtype,
        out_dtype=cfg.activation_dtype,
        bias=cfg.lm_head_bias,
    )[0]
    if p != 1:
        hb.op(
            "logits_all_gather",
            "all_gather",
            Role.COLLECTIVE,
            [logit],
            [Tensor("head.logits_all_gather", (rows, V), cfg.activation_dtype)],
            elements=rows * V,
            p=p,
            dtype=cfg.activation_dtype,
            link=dims.link,
        )
    if cfg.mtp_layers and cfg.mtp_active:  # only speculative decoding loads and runs them (ModelConfig)
        groups["mtp"] = add_mtp(g, cfg, dims, x, ids, _Layer)
    g.graph[G_GROUPS] = groups
    g.graph[G_TOKENS] = T
    g.graph[G_BATCH] = dims.batch
    for _n, data in g.nodes(data=True):
        data.setdefault(GROUP, "")
        data.setdefault(REPEAT, 1)
    return g
