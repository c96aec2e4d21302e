"""DeepSeek-V3's multi-token-prediction module (arXiv:2412.19437 sec. 2.2), when a config keeps it.

Each of ``mtp_layers`` modules drafts one more token from the main model's last
hidden state ``h`` and the embedding of the token just predicted::

    e  = enorm(embed(t))            h' = hnorm(h)
    x  = eh_proj([h'; e])           # [T, 2d] x [2d, d]
    x  = decoder layer (MLA + MoE)  # one layer of the main model's kind
    logits = head(norm(x))

The published checkpoint stores the module's own embedding table and head
(the 14B of its 685B); the graph reads them as it stores them. Engines that
share the main model's tables read the same bytes from a different address.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from costmodel.dtypes import get_dtype
from costmodel.expr import to_expr
from costmodel.graph import REPEAT
from costmodel.keys import GROUP_ENTRY, GROUP_EXIT, Role
from costmodel.tensor import Tensor
from models.config import ModelConfig
from models.layers import LayerSpec

from .builder import GraphBuilder
from .layer_base import LayerBase
from .phase import PhaseDims

__all__ = ["add_mtp", "mtp_notes"]


def mtp_notes(cfg: ModelConfig) -> tuple[str, ...]:
    """What a run says about ``cfg``'s MTP modules when it leaves them out: a checkpoint with
    them (``mtp_layers``) that is not speculating with them (``mtp_active`` False) neither loads
    nor runs them, as vLLM and SGLang do (:class:`~models.config.ModelConfig`)."""
    if not cfg.mtp_layers or cfg.mtp_active:
        return ()
    return (
        f"{cfg.name}'s {cfg.mtp_layers} multi-token-prediction module(s) are neither loaded nor run "
        "without speculative decoding (as vLLM and SGLang); --spec-draft mtp drafts with them",
    )


def add_mtp(
    g: nx.DiGraph,
    cfg: ModelConfig,
    dims: PhaseDims,
    hidden: tuple[str, Tensor],
    ids: tuple[str, Tensor],
    layer_cls: type[LayerBase],
) -> dict[str, Any]:
    """Add the MTP modules (one group repeated ``mtp_layers`` times) fed by the main model's last
    hidden state and the token ids; returns the group's info (repeat, entry edges, exit)."""
    T, d, V, p = dims.tokens, cfg.hidden_size, cfg.vocab_size, dims.tp
    spec = LayerSpec("mla" if cfg.is_mla else "gqa", "moe" if cfg.is_moe else "dense")
    layer: LayerBase = layer_cls(g, cfg, dims, "mtp", cfg.mtp_layers, spec)
    b: GraphBuilder = layer.b
    act = cfg.activation_dtype
    table = layer.weight("embed_tokens.weight", (V / p, d))
    emb = b.op(
        "embed_tokens",
        "embedding",
        Role.EMBEDDING,
        [ids, (*table, T * d * table[1].dtype.bytes / p)],
        [Tensor(b.name("embed_tokens"), (T, d), act)],
        tokens=T,
        hidden=d,
        dtype=act,
    )[0]
    e = layer.norm("enorm", emb, T, d)
    h = layer.norm("hnorm", hidden, T, d)
    both = b.op(
        "concat",
        "copy",
        Role.VIEW,
        [e, h],
        [Tensor(b.name("concat"), (T, 2 * d), act)],
        elements=T * 2 * d,
        dtype=act,
    )[0]
    x = layer.linear("eh_proj", both, d)
    y = layer.build(x)
    fin = layer.norm("head_norm", y, T, d)
    head_w = layer.weight("head.weight", (d, V / p))
    mmd = cfg.matmul_dtype or act
    b.op(
        "head",
        "gemm",
        Role.HEAD,
        [(*fin, T * d * get_dtype(mmd).bytes), head_w],
        [Tensor(b.name("head"), (T, V / p), act)],
        M=T,
        N=V / p,
        K=d,
        dtype=mmd,
        w_dtype=cfg.weight_dtype,
        out_dtype=act,
    )
    entry = [
        (src, dst, dict(g.edges[src, dst]))
        for src, dst in ((ids[0], b.name("embed_tokens")), (hidden[0], b.name("hnorm")))
    ]
    return {
        REPEAT: to_expr(cfg.mtp_layers, field="mtp_layers"),
        GROUP_ENTRY: entry,
        GROUP_EXIT: b.name("head"),
    }
