"""Shared helpers of the layer builders: weights, linear layers, norms, caches."""

from __future__ import annotations

from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.keys import COST, KV_CAP, MERGED, SCALE_BLOCK, Role
from costmodel.tensor import Tensor
from models.config import ModelConfig
from models.layers import LayerSpec

from .builder import GraphBuilder
from .phase import PhaseDims

__all__ = ["LayerBase"]


class LayerBase:
    """Builds one layer group into ``g`` (helpers shared by the blocks)."""

    def __init__(
        self, g: nx.DiGraph, cfg: ModelConfig, dims: PhaseDims, group: str, repeat: object, spec: LayerSpec
    ) -> None:
        self.g, self.cfg, self.dims, self.spec = g, cfg, dims, spec
        self.b = GraphBuilder(g, phase=dims.phase, group=group, repeat=repeat)
        self.act = cfg.activation_dtype
        self.wd = cfg.weight_dtype
        self.kvd = cfg.cache_dtype
        self.mmd = cfg.matmul_dtype or cfg.activation_dtype
        self.tp = dims.tp
        self.entry: list[tuple[str, str, dict[str, Any]]] = []

    def split(self, n: Any, what: str) -> sympy.Expr:
        """``n / tp``, refusing a split that does not divide."""
        n, p = to_expr(n, field=what), self.tp
        if n.is_number and p.is_number and n % p != 0:
            raise CostModelError(
                f"{self.cfg.name}: {what} ({n}) is not divisible by the tensor-parallel degree {p}"
            )
        return n / p

    def kv_heads_local(self) -> sympy.Expr:
        """KV heads per device: ``H_kv/p``, or one replicated head when ``p > H_kv``."""
        hkv, p = self.cfg.num_key_value_heads, self.tp
        assert hkv is not None  # ModelConfig.__post_init__ fills it in
        if hkv.is_number and p.is_number and p >= hkv:
            if p % hkv != 0:
                raise CostModelError(
                    f"{self.cfg.name}: tp {p} must be a multiple of num_key_value_heads {hkv}"
                )
            return sympy.Integer(1)
        return self.split(hkv, "num_key_value_heads")

    def build(self, x: tuple[str, Tensor]) -> tuple[str, Tensor]:
        """Add the layer fed by edge ``x``; returns its output edge (the subclass in
        :mod:`graphs.blocks.transformer` defines it)."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------
    def weight(self, local: str, shape: tuple[Any, ...], *, dtype: str | None = None) -> tuple[str, Tensor]:
        """A weight source node at the config's weight dtype (or ``dtype``)."""
        return self.b.source(local, Tensor(self.b.name(local), shape, dtype or self.wd), "weight")

    def linear(
        self,
        local: str,
        x: tuple[str, Tensor],
        n_out: Any,
        *,
        bias: bool = False,
        rows: Any = None,
        reduce: bool = False,
        role: Role = Role.LINEAR,
        merged: str = "",
    ) -> tuple[str, Tensor]:
        """``y[T, n_out] = x[T, k] @ W[k, n_out]`` (+ bias) on this device's shard.

        Matmuls run at ``cfg.matmul_dtype`` when set (W8A8, NVFP4 W4A4: the
        activation operand is quantised in its producer's epilogue), else at the
        activation dtype. ``reduce=True`` marks a row-parallel matmul: under
        tensor parallelism its partial sums are all-reduced over the devices.
        ``merged`` names the one GEMM the served engines run this projection in with its
        siblings that read the same input (``qkv_proj``, ``gate_up_proj``; recorded as
        :data:`~costmodel.keys.MERGED`, which the predictor prices them by); empty: its own kernel.
        """
        T = self.dims.tokens if rows is None else rows
        k = x[1].shape[-1]
        w = self.weight(f"{local}.weight", (k, n_out))
        refs: list[Any] = [x, w]
        if bias:
            refs.append(self.weight(f"{local}.bias", (n_out,)))
        # the activation operand is read at the matmul dtype (quantised in its producer)
        refs[0] = (*x, T * k * Tensor("a", (1,), self.mmd).dtype.bytes)
        out = Tensor(self.b.name(local), (T, n_out), self.act)
        y = self.b.op(
            local,
            "gemm",
            role,
            refs,
            [out],
            M=T,
            N=n_out,
            K=k,
            dtype=self.mmd,
            w_dtype=self.wd,
            out_dtype=self.act,
            bias=bias,
        )[0]
        self.g.nodes[y[0]][MERGED] = merged
        block = self.cfg.weight_scale_block
        if block is not None and get_dtype(self.wd).name == "fp8_e4m3":
            # FP8 weights in scale blocks (DeepSeek-V3's 128 x 128 in every linear layer) run the
            # block-scaled GEMM kernels, as the routed experts do (what the predictor prices)
            self.g.nodes[y[0]][SCALE_BLOCK] = block
        return self.all_reduce(f"{local}.all_reduce", y) if reduce else y

    def all_reduce(self, local: str, x: tuple[str, Tensor]) -> tuple[str, Tensor]:
        """Sum partial results over the ``tp`` devices (nothing when ``tp = 1``)."""
        if self.tp == 1:
            return x
        out = Tensor(self.b.name(local), x[1].shape, self.act)
        n = sympy.Mul(*x[1].shape)
        return self.b.op(
            local,
            "all_reduce",
            Role.COLLECTIVE,
            [x],
            [out],
            elements=n,
            p=self.tp,
            dtype=self.act,
            link=self.dims.link,
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
            local,
            rule,
            Role.NORM,
            refs,
            [out],
            rows=rows,
            cols=cols,
            dtype=self.act,
            weight_dtype=self.wd,
            **ln_bias,
        )[0]

    def add(self, local: str, a: tuple[str, Tensor], c: tuple[str, Tensor]) -> tuple[str, Tensor]:
        out = Tensor(self.b.name(local), a[1].shape, self.act)
        n = sympy.Mul(*a[1].shape)
        return self.b.op(local, "elementwise", Role.RESIDUAL, [a, c], [out], n=n, inputs=2, dtype=self.act)[0]

    # -- blocks ----------------------------------------------------------
    def cache_write(
        self, local: str, srcs: list[tuple[str, Tensor]], width: Any, *, cap: Any = None
    ) -> tuple[str, Tensor]:
        """Copy the new tokens' K (or V, or latent + rope key) into the cache, cast to its dtype.

        ``cap``: the layer keeps at most this many positions per sequence (a sliding
        window or an attention chunk), recorded as :data:`~costmodel.keys.KV_CAP`."""
        T = self.dims.tokens
        out = Tensor(self.b.name(local), (T, width), self.kvd)
        n = self.b.op(
            local,
            "copy",
            Role.CACHE_WRITE,
            srcs,
            [out],
            elements=T * width,
            dtype=self.act,
            out_dtype=self.kvd,
        )[0]
        # the write fills the cache: its residency is the new tokens' K (or V)
        self.g.nodes[n[0]][COST] = self.g.nodes[n[0]][COST] + _resident_kv(out.bytes)
        if cap is not None:
            self.g.nodes[n[0]][KV_CAP] = to_expr(cap, field="cache cap")
        return n

    def cache(self, local: str, width: Any, tokens: Any) -> tuple[str, Tensor, Any]:
        """The cached K (or V, or latent) of ``tokens`` positions per sequence."""
        t = Tensor(self.b.name(local), (self.dims.batch, tokens, width), self.kvd)
        n, t = self.b.source(local, t, "kv_cache")
        return n, t, t.bytes


def _resident_kv(nbytes: sympy.Expr) -> Cost:
    return Cost.resident(kv_cache=nbytes)
