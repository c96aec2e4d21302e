"""The Mixture-of-Experts MLP kind (``moe``): a router (softmax, top-k, an optional per-expert
score bias), ``E`` routed experts as grouped GEMMs over the experts a step touches, the weighted
combine, and shared experts (with an optional sigmoid gate, Qwen2-MoE / Qwen3-Next).

Weights: ``E`` routed experts of ``mlp_params(moe_intermediate_size)``, the shared expert of
``shared_expert_intermediate_size`` (else ``num_shared_experts`` times the expert width;
``+ d`` for its gate), the router ``E d`` (``+ E`` with a router bias).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.keys import SCALE_BLOCK, Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import MLP, ConfigSpec, ConfigView, Dim, LayerContext, Ref, register_mlp
from .mlp_dense import activation, mlp, mlp_params

__all__ = ["MoESpec", "MoEMLP", "moe_params"]


@register_spec
@dataclass(frozen=True, slots=True)
class MoESpec(ConfigSpec):
    """The Mixture-of-Experts fields (``cfg.moe``): ``E`` routed experts of width
    ``moe_intermediate_size``, ``k`` per token, shared experts (``num_shared_experts`` of the
    expert width, or one of ``shared_expert_intermediate_size``, optionally gated), dense MLPs in
    the first ``first_k_dense_replace`` layers, a per-expert router bias, expert buffers of
    ``c*T*k/E`` rows (``moe_capacity_factor``, Switch; None: dropless)."""

    slot: ClassVar[str] = "moe"
    label: ClassVar[str] = "MoE"
    uniform_mlp: ClassVar[str | None] = "moe"
    leading_dense_field: ClassVar[str | None] = "first_k_dense_replace"
    dims: ClassVar[tuple[str, ...]] = (
        "num_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "num_shared_experts",
        "shared_expert_intermediate_size",
    )
    zero_dims: ClassVar[tuple[str, ...]] = ("num_shared_experts",)
    required: ClassVar[tuple[str, ...]] = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
    symbolic_dims: ClassVar[tuple[str, ...]] = dims

    num_experts: Dim = None
    num_experts_per_tok: Dim = None
    moe_intermediate_size: Dim = None
    num_shared_experts: Dim = 0
    shared_expert_intermediate_size: Dim = None  # default num_shared_experts * moe width
    shared_expert_gate: bool = False  # a sigmoid gate (d -> 1) on the shared expert (Qwen2-MoE, Qwen3-Next)
    moe_capacity_factor: float | None = None
    first_k_dense_replace: int = 0
    router_bias: bool = False

    def normalised(self, model: str) -> MoESpec:
        """As :meth:`ConfigSpec.normalised`; MoE-only fields without any expert count are refused
        as such."""
        if all(getattr(self, f) is None for f in self.required):
            raise CostModelError(f"{model}: shared experts / dense-first layers need a MoE config")
        return ConfigSpec.normalised(self, model)

    def check(self, model: str) -> None:
        e, k = self.num_experts, self.num_experts_per_tok
        if e.is_number and k.is_number and k > e:
            raise CostModelError(f"{model}: num_experts_per_tok ({k}) exceeds num_experts ({e})")
        fk = self.first_k_dense_replace
        if not isinstance(fk, int) or isinstance(fk, bool) or fk < 0:
            raise CostModelError(f"{model}: first_k_dense_replace must be an integer >= 0, got {fk!r}")
        cf = self.moe_capacity_factor
        if cf is not None and (isinstance(cf, bool) or not isinstance(cf, int | float) or not 0 < cf < 1e6):
            raise CostModelError(f"{model}: moe_capacity_factor must be a positive number, got {cf!r}")


def moe_params(cfg: ConfigView, experts: sympy.Expr | None = None) -> sympy.Expr:
    """One MoE layer: ``experts`` routed (default all) + shared + router.

    Parameters
    ----------
    cfg : ConfigView
        The model (its MoE spec: experts, expert width, shared experts).
    experts : sympy.Expr, optional
        Routed experts counted (``num_experts_per_tok`` for the active parameters); None: all.

    Returns
    -------
    sympy.Expr
        Parameters of one MoE layer.
    """
    m = cfg.need(MoESpec)
    e = m.num_experts if experts is None else experts
    per_expert = mlp_params(cfg, m.moe_intermediate_size)
    shared_w = m.shared_expert_intermediate_size
    shared = mlp_params(cfg, shared_w) if shared_w is not None else m.num_shared_experts * per_expert
    router = m.num_experts * cfg.hidden_size + (m.num_experts if m.router_bias else 0)
    if m.shared_expert_gate:
        shared += cfg.hidden_size
    return e * per_expert + shared + router


@register_mlp
class MoEMLP(MLP):
    """Routed (and shared) experts (module doc)."""

    name = "moe"
    spec_slot = "moe"

    def check(self, cfg: ConfigView) -> None:
        if not cfg.is_moe:
            raise CostModelError(f"{cfg.name}: moe layers need a MoE config (num_experts ...)")

    def params(self, cfg: ConfigView, *, active: bool = False) -> sympy.Expr:
        return moe_params(cfg, cfg.need(MoESpec).num_experts_per_tok if active else None)

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """The experts' gate/up read ``d``, their down the expert width; the shared expert's down
        its own width (``shared_expert_intermediate_size``, else ``n_shared`` expert widths)."""
        m = cfg.need(MoESpec)
        out = {"experts.up_proj": cfg.hidden_size, "experts.down_proj": m.moe_intermediate_size}
        shared = m.shared_expert_intermediate_size
        if shared is None and m.num_shared_experts != 0:
            shared = m.num_shared_experts * m.moe_intermediate_size
        if shared is not None:
            out.update({"shared.up_proj": cfg.hidden_size, "shared.down_proj": shared})
        return out

    def build(self, layer: LayerContext, x: Ref) -> Ref:
        """Router, routed experts, combine, shared experts, one all-reduce (module doc)."""
        cfg, T = layer.cfg, layer.dims.tokens
        m = cfg.need(MoESpec)
        d, E, k = cfg.hidden_size, m.num_experts, m.num_experts_per_tok
        Ie = layer.split(m.moe_intermediate_size, "moe_intermediate_size")  # each expert split over tp
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
        if m.router_bias:
            sel_in.append(layer.weight("router.score_bias", (E,)))
        sel = layer.b.op(
            "router_topk",
            "reduction",
            Role.ROUTER,
            sel_in,
            [Tensor(layer.b.name("router_topk"), (T, k), layer.act)],
            # the per-expert score bias (DeepSeek's noaux_tc routing) is read beside the scores
            extra=Cost.traffic(read=E * Tensor("w", (1,), layer.wd).dtype.bytes) if m.router_bias else None,
            rows=T,
            cols=E,
            dtype=layer.act,
        )[0]
        from costmodel.rules import experts_touched  # the rules load with the graph, not the config

        touched = experts_touched(T, E, k)
        ewd = cfg.expert_weight_dtype  # routed experts may be stored narrower (gpt-oss: mxfp4)
        wb = get_dtype(ewd).bytes
        mmb = get_dtype(layer.mmd).bytes
        ab = get_dtype(layer.act).bytes
        rows = T * k
        # FP8 weights in scale blocks run the block-scaled MoE kernels (what the predictor prices)
        block = cfg.weight_scale_block if get_dtype(ewd).name == "fp8_e4m3" else None
        scales = {SCALE_BLOCK: block} if block is not None else None

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
                capacity_factor=m.moe_capacity_factor,
                attrs=scales,
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
        shared = m.shared_expert_intermediate_size
        if shared is None and m.num_shared_experts != 0:
            shared = m.num_shared_experts * m.moe_intermediate_size
        if shared is not None:
            sh = mlp(layer, x, shared, "shared", reduce=False)
            if m.shared_expert_gate:  # sh * sigmoid(x @ w_g): one logit per token scales the shared expert
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
