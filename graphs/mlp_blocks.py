"""MLP blocks: dense (SwiGLU or GELU) and Mixture-of-Experts."""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.rules import experts_touched
from costmodel.tensor import Tensor

from .layer_base import GELU_OPS, SWIGLU_OPS, LayerBase

__all__ = ["MLPBlocks"]


class MLPBlocks(LayerBase):
    """Dense and routed-expert MLPs."""

    def mlp(self, x: tuple[str, Tensor], width: Any, prefix: str) -> tuple[str, Tensor]:
        T = self.dims.tokens
        if self.cfg.mlp == "swiglu":
            gate = self.linear(f"{prefix}.gate_proj", x, width)
            up = self.linear(f"{prefix}.up_proj", x, width)
            vo, so = SWIGLU_OPS
            a = self.b.op(
                f"{prefix}.act",
                "elementwise",
                [gate, up],
                [Tensor(self.b.name(f"{prefix}.act"), (T, width), self.act)],
                n=T * width,
                inputs=2,
                vector_ops=vo,
                sfu_ops=so,
                dtype=self.act,
            )[0]
        else:
            up = self.linear(f"{prefix}.up_proj", x, width)
            vo, so = GELU_OPS
            a = self.b.op(
                f"{prefix}.act",
                "elementwise",
                [up],
                [Tensor(self.b.name(f"{prefix}.act"), (T, width), self.act)],
                n=T * width,
                inputs=1,
                vector_ops=vo,
                sfu_ops=so,
                dtype=self.act,
            )[0]
        return self.linear(f"{prefix}.down_proj", a, self.cfg.hidden_size)

    def moe_mlp(self, x: tuple[str, Tensor]) -> tuple[str, Tensor]:
        cfg, T = self.cfg, self.dims.tokens
        d, E, k, Ie = cfg.hidden_size, cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size
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
            rows=T,
            cols=E,
            dtype=self.act,
        )[0]
        touched = experts_touched(T, E, k)
        wb = sympy.sympify(Tensor("w", (1,), self.wd).dtype.bytes)
        rows = T * k

        def experts(local: str, inp: tuple[str, Tensor], n_out: Any, k_in: Any) -> tuple[str, Tensor]:
            w = self.weight(f"{local}.weight", (E, k_in, n_out))
            out = Tensor(self.b.name(local), (rows, n_out), self.act)
            return self.b.op(
                local,
                "grouped_gemm",
                [inp, (*w, touched * k_in * n_out * wb)],
                [out],
                tokens=T,
                experts=E,
                top_k=k,
                N=n_out,
                K=k_in,
                dtype=self.act,
                w_dtype=self.wd,
            )[0]

        if cfg.mlp == "swiglu":
            g_ = experts("experts.gate_proj", x, Ie, d)
            u_ = experts("experts.up_proj", x, Ie, d)
            vo, so = SWIGLU_OPS
            a = self.b.op(
                "experts.act",
                "elementwise",
                [g_, u_],
                [Tensor(self.b.name("experts.act"), (rows, Ie), self.act)],
                n=rows * Ie,
                inputs=2,
                vector_ops=vo,
                sfu_ops=so,
                dtype=self.act,
            )[0]
        else:
            u_ = experts("experts.up_proj", x, Ie, d)
            vo, so = GELU_OPS
            a = self.b.op(
                "experts.act",
                "elementwise",
                [u_],
                [Tensor(self.b.name("experts.act"), (rows, Ie), self.act)],
                n=rows * Ie,
                inputs=1,
                vector_ops=vo,
                sfu_ops=so,
                dtype=self.act,
            )[0]
        down = experts("experts.down_proj", a, d, Ie)
        # weighted sum of the k expert outputs of each token, scaled by the router weights
        comb = self.b.op(
            "experts.combine",
            "reduction",
            [down, sel],
            [Tensor(self.b.name("experts.combine"), (T, d), self.act)],
            rows=T * d,
            cols=k,
            dtype=self.act,
        )[0]
        if cfg.num_shared_experts != 0:
            sh = self.mlp(x, cfg.num_shared_experts * Ie, "shared")
            return self.add("shared_add", comb, sh)
        return comb
