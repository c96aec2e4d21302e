"""MLP blocks: dense (SwiGLU or GELU) and Mixture-of-Experts."""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.cost import Cost
from costmodel.rules import experts_touched
from costmodel.tensor import Tensor

from .layer_base import GELU_OPS, SWIGLU_OPS, LayerBase

__all__ = ["MLPBlocks"]


class MLPBlocks(LayerBase):
    """Dense and routed-expert MLPs."""

    def activation(self, local: str, ins: list[Any], rows: Any, width: Any) -> tuple[str, Tensor]:
        """``silu(gate) * up`` (two inputs) or ``gelu(up)`` (one), per ``cfg.mlp``."""
        vo, so = SWIGLU_OPS if self.cfg.mlp == "swiglu" else GELU_OPS
        out = Tensor(self.b.name(local), (rows, width), self.act)
        return self.b.op(
            local,
            "elementwise",
            ins,
            [out],
            n=rows * width,
            inputs=len(ins),
            vector_ops=vo,
            sfu_ops=so,
            dtype=self.act,
        )[0]

    def mlp(self, x: tuple[str, Tensor], width: Any, prefix: str, reduce: bool = True) -> tuple[str, Tensor]:
        """Dense MLP: gate and up projections (gated) or up only, activation, down.

        Column-parallel gate/up (``width / tp`` per device), row-parallel down
        followed by an all-reduce under tensor parallelism (``reduce``).
        """
        width = self.split(width, f"{prefix} width")
        ins = [self.linear(f"{prefix}.up_proj", x, width)]
        if self.cfg.mlp == "swiglu":
            ins.insert(0, self.linear(f"{prefix}.gate_proj", x, width))
        a = self.activation(f"{prefix}.act", ins, self.dims.tokens, width)
        return self.linear(f"{prefix}.down_proj", a, self.cfg.hidden_size, reduce=reduce)

    def moe_mlp(self, x: tuple[str, Tensor]) -> tuple[str, Tensor]:
        cfg, T = self.cfg, self.dims.tokens
        d, E, k = cfg.hidden_size, cfg.num_experts, cfg.num_experts_per_tok
        Ie = self.split(cfg.moe_intermediate_size, "moe_intermediate_size")  # each expert split over tp
        logits = self.linear("router", x, E, bias=False)
        probs = self.b.op(
            "router_softmax",
            "softmax",
            [logits],
            [Tensor(self.b.name("router_softmax"), (T, E), self.act)],
            rows=T,
            cols=E,
            dtype=self.act,
        )[0]
        sel_in: list[Any] = [probs]
        if cfg.router_bias:
            sel_in.append(self.weight("router.score_bias", (E,)))
        sel = self.b.op(
            "router_topk",
            "reduction",
            sel_in,
            [Tensor(self.b.name("router_topk"), (T, k), self.act)],
            # the per-expert score bias (DeepSeek's noaux_tc routing) is read beside the scores
            extra=Cost.traffic(read=E * Tensor("w", (1,), self.wd).dtype.bytes) if cfg.router_bias else None,
            rows=T,
            cols=E,
            dtype=self.act,
        )[0]
        touched = experts_touched(T, E, k)
        wb = sympy.sympify(Tensor("w", (1,), self.wd).dtype.bytes)
        mmb = sympy.sympify(Tensor("a", (1,), self.mmd).dtype.bytes)
        ab = sympy.sympify(Tensor("a", (1,), self.act).dtype.bytes)
        rows = T * k

        def experts(local: str, inp: tuple[str, Tensor], n_out: Any, k_in: Any) -> tuple[str, Tensor]:
            w = self.weight(f"{local}.weight", (E, k_in, n_out))
            out = Tensor(self.b.name(local), (rows, n_out), self.act)
            return self.b.op(
                local,
                "grouped_gemm",
                # each token's row is read once per expert it was routed to, at the matmul dtype
                [(*inp, rows * k_in * mmb), (*w, touched * k_in * n_out * wb)],
                [out],
                tokens=T,
                experts=E,
                top_k=k,
                N=n_out,
                K=k_in,
                dtype=self.mmd,
                w_dtype=self.wd,
                out_dtype=self.act,
            )[0]

        ins = [experts("experts.up_proj", x, Ie, d)]
        if cfg.mlp == "swiglu":
            ins.insert(0, experts("experts.gate_proj", x, Ie, d))
        a = self.activation("experts.act", ins, rows, Ie)
        down = experts("experts.down_proj", a, d, Ie)
        # weighted sum of the k expert outputs of each token, scaled by the router weights
        comb = self.b.op(
            "experts.combine",
            "reduction",
            [down, sel],
            [Tensor(self.b.name("experts.combine"), (T, d), self.act)],
            extra=Cost.traffic(read=T * k * ab),  # the k routing weights of each token
            rows=T * d,
            cols=k,
            dtype=self.act,
        )[0]
        if cfg.num_shared_experts != 0:
            sh = self.mlp(x, cfg.num_shared_experts * cfg.moe_intermediate_size, "shared", reduce=False)
            comb = self.add("shared_add", comb, sh)
        # routed and shared partial sums are reduced over the tp devices once
        return self.all_reduce("experts.all_reduce", comb)
