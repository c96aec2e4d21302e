"""The Mixture-of-Experts MLP kind (``moe``): a router (softmax, top-k, an optional per-expert
score bias), ``E`` routed experts as grouped GEMMs over the experts a step touches, the weighted
combine, and shared experts (with an optional sigmoid gate, Qwen2-MoE / Qwen3-Next).

Weights: ``E`` routed experts of ``mlp_params(moe_intermediate_size)``, the shared expert of
``shared_expert_intermediate_size`` (else ``num_shared_experts`` times the expert width;
``+ d`` for its gate), the router ``E d`` (``+ E`` with a router bias).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.rules import experts_touched
from costmodel.tensor import Tensor

from .base import MLP, LayerContext, Ref, register_mlp
from .mlp_dense import activation, mlp, mlp_params

if TYPE_CHECKING:
    from ..config import ModelConfig

__all__ = ["MoEMLP", "moe_params"]


def moe_params(cfg: ModelConfig, experts: sympy.Expr | None = None) -> sympy.Expr:
    """One MoE layer: ``experts`` routed (default all) + shared + router."""
    e = cfg.num_experts if experts is None else experts
    per_expert = mlp_params(cfg, cfg.moe_intermediate_size)
    shared_w = cfg.shared_expert_intermediate_size
    shared = mlp_params(cfg, shared_w) if shared_w is not None else cfg.num_shared_experts * per_expert
    router = cfg.num_experts * cfg.hidden_size + (cfg.num_experts if cfg.router_bias else 0)
    if cfg.shared_expert_gate:
        shared += cfg.hidden_size
    return e * per_expert + shared + router


@register_mlp
class MoEMLP(MLP):
    """Routed (and shared) experts (module doc)."""

    name = "moe"

    def check(self, cfg: ModelConfig) -> None:
        if not cfg.is_moe:
            raise CostModelError(f"{cfg.name}: moe layers need a MoE config (num_experts ...)")

    def params(self, cfg: ModelConfig, *, active: bool = False) -> sympy.Expr:
        return moe_params(cfg, cfg.num_experts_per_tok if active else None)

    def build(self, layer: LayerContext, x: Ref) -> Ref:
        """Router, routed experts, combine, shared experts, one all-reduce (module doc)."""
        cfg, T = layer.cfg, layer.dims.tokens
        d, E, k = cfg.hidden_size, cfg.num_experts, cfg.num_experts_per_tok
        Ie = layer.split(cfg.moe_intermediate_size, "moe_intermediate_size")  # each expert split over tp
        logits = layer.linear("router", x, E, bias=False, role=Role.ROUTER)
        probs = layer.b.op(
            "router_softmax",
            "softmax",
            Role.ROUTER,
            [logits],
            [Tensor(layer.b.name("router_softmax"), (T, E), layer.act)],
            rows=T,
            cols=E,
            dtype=layer.act,
        )[0]
        sel_in: list[Any] = [probs]
        if cfg.router_bias:
            sel_in.append(layer.weight("router.score_bias", (E,)))
        sel = layer.b.op(
            "router_topk",
            "reduction",
            Role.ROUTER,
            sel_in,
            [Tensor(layer.b.name("router_topk"), (T, k), layer.act)],
            # the per-expert score bias (DeepSeek's noaux_tc routing) is read beside the scores
            extra=Cost.traffic(read=E * Tensor("w", (1,), layer.wd).dtype.bytes) if cfg.router_bias else None,
            rows=T,
            cols=E,
            dtype=layer.act,
        )[0]
        touched = experts_touched(T, E, k)
        ewd = cfg.expert_weight_dtype  # routed experts may be stored narrower (gpt-oss: mxfp4)
        wb = get_dtype(ewd).bytes
        mmb = get_dtype(layer.mmd).bytes
        ab = get_dtype(layer.act).bytes
        rows = T * k

        def experts(local: str, inp: tuple[str, Tensor], n_out: Any, k_in: Any) -> tuple[str, Tensor]:
            w = layer.weight(f"{local}.weight", (E, k_in, n_out), dtype=ewd)
            out = Tensor(layer.b.name(local), (rows, n_out), layer.act)
            refs: list[Any] = [(*inp, rows * k_in * mmb), (*w, touched * k_in * n_out * wb)]
            extra = None
            if cfg.mlp_bias:  # per-expert biases (gpt-oss): read for the touched experts, one add per output
                bias_w = layer.weight(f"{local}.bias", (E, n_out))
                bb = bias_w[1].dtype.bytes
                refs.append((*bias_w, touched * n_out * bb))
                extra = Cost.traffic(read=touched * n_out * bb) + Cost.compute("vector", "fp32", rows * n_out)
            return layer.b.op(
                local,
                "grouped_gemm",
                Role.EXPERT,
                # each token's row is read once per expert it was routed to, at the matmul dtype
                refs,
                [out],
                extra=extra,
                tokens=T,
                experts=E,
                top_k=k,
                N=n_out,
                K=k_in,
                dtype=layer.mmd,
                w_dtype=ewd,
                out_dtype=layer.act,
                capacity_factor=cfg.moe_capacity_factor,
            )[0]

        ins = [experts("experts.up_proj", x, Ie, d)]
        if cfg.gated_mlp:
            ins.insert(0, experts("experts.gate_proj", x, Ie, d))
        a = activation(layer, "experts.act", ins, rows, Ie)
        down = experts("experts.down_proj", a, d, Ie)
        # weighted sum of the k expert outputs of each token, scaled by the router weights
        comb = layer.b.op(
            "experts.combine",
            "reduction",
            Role.COMBINE,
            [down, sel],
            [Tensor(layer.b.name("experts.combine"), (T, d), layer.act)],
            extra=Cost.traffic(read=T * k * ab),  # the k routing weights of each token
            rows=T * d,
            cols=k,
            dtype=layer.act,
        )[0]
        shared = cfg.shared_expert_intermediate_size
        if shared is None and cfg.num_shared_experts != 0:
            shared = cfg.num_shared_experts * cfg.moe_intermediate_size
        if shared is not None:
            sh = mlp(layer, x, shared, "shared", reduce=False)
            if cfg.shared_expert_gate:  # sh * sigmoid(x @ w_g): one logit per token scales the shared expert
                g = layer.linear("shared_gate", x, 1)
                sh = layer.b.op(
                    "shared_gate_mul",
                    "elementwise",
                    Role.ACTIVATION,
                    [sh, g],
                    [Tensor(layer.b.name("shared_gate_mul"), (T, d), layer.act)],
                    n=T * d,
                    inputs=2,
                    vector_ops=1,  # the product; the T sigmoids are negligible beside it
                    dtype=layer.act,
                )[0]
            comb = layer.add("shared_add", comb, sh)
        # routed and shared partial sums are reduced over the tp devices once
        return layer.all_reduce("experts.all_reduce", comb)
