"""MLP blocks: dense (SwiGLU or GELU) and Mixture-of-Experts."""

from __future__ import annotations

from typing import Any

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.rules import experts_touched
from costmodel.tensor import Tensor

from .layer_base import GELU_OPS, RELU2_OPS, SWIGLU_OPS, LayerBase
from .registry import Ref, register_mlp

__all__ = ["activation", "mlp", "dense_mlp", "moe_mlp"]


def activation(layer: LayerBase, local: str, ins: list[Any], rows: Any, width: Any) -> tuple[str, Tensor]:
    """``silu(gate) * up`` (SwiGLU), ``gelu(gate) * up`` (GeGLU) or ``gelu(up)``, per ``cfg.mlp``."""
    vo, so = {"swiglu": SWIGLU_OPS, "relu2": RELU2_OPS}.get(layer.cfg.mlp, GELU_OPS)
    if layer.cfg.mlp == "geglu":
        vo += 1  # the product with up
    out = Tensor(layer.b.name(local), (rows, width), layer.act)
    return layer.b.op(
        local,
        "elementwise",
        Role.ACTIVATION,
        ins,
        [out],
        n=rows * width,
        inputs=len(ins),
        vector_ops=vo,
        sfu_ops=so,
        dtype=layer.act,
    )[0]


def mlp(layer: LayerBase, x: Ref, width: Any, prefix: str, reduce: bool = True) -> Ref:
    """Dense MLP: gate and up projections (gated) or up only, activation, down.

    Column-parallel gate/up (``width / tp`` per device), row-parallel down
    followed by an all-reduce under tensor parallelism (``reduce``).
    """
    width = layer.split(width, f"{prefix} width")
    bias = layer.cfg.mlp_bias
    ins = [layer.linear(f"{prefix}.up_proj", x, width, bias=bias)]
    if layer.cfg.gated_mlp:
        ins.insert(0, layer.linear(f"{prefix}.gate_proj", x, width, bias=bias))
    a = activation(layer, f"{prefix}.act", ins, layer.dims.tokens, width)
    return layer.linear(f"{prefix}.down_proj", a, layer.cfg.hidden_size, reduce=reduce, bias=bias)


@register_mlp("moe")
def moe_mlp(layer: LayerBase, x: Ref) -> Ref:
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


@register_mlp("dense")
def dense_mlp(layer: LayerBase, x: Ref) -> Ref:
    """The dense MLP of width ``intermediate_size``."""
    return mlp(layer, x, layer.cfg.intermediate_size, "mlp")
