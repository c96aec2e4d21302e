"""Shared helpers of the layer builders: weights, linear layers, norms, caches."""

from __future__ import annotations

from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.tensor import Tensor
from models.config import ModelConfig

from .builder import GraphBuilder
from .phase import PhaseDims

__all__ = ["LayerBase", "SWIGLU_OPS", "GELU_OPS"]

#: per-element work of the gated activation silu(g)*u: negate, +1, divide, x u (vector) + exp (SFU)
SWIGLU_OPS = (4, 1)
#: tanh-approximate GELU: x^3, scale, add, scale, +1, x0.5, x x (vector) + tanh (SFU)
GELU_OPS = (7, 1)


class LayerBase:
    """Builds one layer group into ``g`` (helpers shared by the blocks)."""

    def __init__(
        self, g: nx.DiGraph, cfg: ModelConfig, dims: PhaseDims, group: str, repeat: object, moe: bool
    ) -> None:
        self.g, self.cfg, self.dims, self.moe = g, cfg, dims, moe
        self.b = GraphBuilder(g, phase=dims.phase, group=group, repeat=repeat)
        self.act = cfg.activation_dtype
        self.wd = cfg.weight_dtype
        self.kvd = cfg.cache_dtype
        self.entry: list[tuple[str, str, dict[str, Any]]] = []

    # -- helpers ---------------------------------------------------------
    def weight(self, local: str, shape: tuple[Any, ...]) -> tuple[str, Tensor]:
        return self.b.source(local, Tensor(self.b.name(local), shape, self.wd), "weight")

    def linear(
        self, local: str, x: tuple[str, Tensor], n_out: Any, *, bias: bool = False, rows: Any = None
    ) -> tuple[str, Tensor]:
        """``y[T, n_out] = x[T, k] @ W[k, n_out]`` (+ bias)."""
        T = self.dims.tokens if rows is None else rows
        k = x[1].shape[-1]
        w = self.weight(f"{local}.weight", (k, n_out))
        refs: list[Any] = [x, w]
        if bias:
            refs.append(self.weight(f"{local}.bias", (n_out,)))
        out = Tensor(self.b.name(local), (T, n_out), self.act)
        return self.b.op(
            local, "gemm", refs, [out], M=T, N=n_out, K=k, dtype=self.act, w_dtype=self.wd, bias=bias
        )[0]

    def norm(self, local: str, x: tuple[str, Tensor], rows: Any, cols: Any) -> tuple[str, Tensor]:
        cfg = self.cfg
        w = self.weight(f"{local}.weight", (cols,))
        refs: list[Any] = [x, w]
        if cfg.norm == "layernorm":
            refs.append(self.weight(f"{local}.bias", (cols,)))
        out = Tensor(self.b.name(local), x[1].shape, self.act)
        rule = cfg.norm
        ln_bias: dict[str, Any] = {"bias": True} if rule == "layernorm" else {}
        return self.b.op(
            local, rule, refs, [out], rows=rows, cols=cols, dtype=self.act, weight_dtype=self.wd, **ln_bias
        )[0]

    def add(self, local: str, a: tuple[str, Tensor], c: tuple[str, Tensor]) -> tuple[str, Tensor]:
        out = Tensor(self.b.name(local), a[1].shape, self.act)
        n = sympy.Mul(*a[1].shape)
        return self.b.op(local, "elementwise", [a, c], [out], n=n, inputs=2, dtype=self.act)[0]

    # -- blocks ----------------------------------------------------------
    def cache_write(self, local: str, src: tuple[str, Tensor], width: Any) -> tuple[str, Tensor]:
        T = self.dims.tokens
        out = Tensor(self.b.name(local), (T, width), self.kvd)
        n = self.b.op(local, "copy", [src], [out], elements=T * width, dtype=self.act, out_dtype=self.kvd)[0]
        # the write fills the cache: its residency is the new tokens' K (or V)
        self.g.nodes[n[0]]["cost"] = self.g.nodes[n[0]]["cost"] + _resident_kv(out.bytes)
        return n

    def cache(self, local: str, width: Any) -> tuple[str, Tensor, Any]:
        """Decode: the cached K (or V, or latent) for ``ctx`` tokens of each sequence."""
        dims = self.dims
        t = Tensor(self.b.name(local), (dims.batch, dims.kv_len, width), self.kvd)
        n, t = self.b.source(local, t, "kv_cache")
        return n, t, t.bytes


def _resident_kv(nbytes: sympy.Expr) -> Cost:
    return Cost.resident(kv_cache=nbytes)
