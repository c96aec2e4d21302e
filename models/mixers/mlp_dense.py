"""The dense MLP kind (``dense``): gated (SwiGLU ``down(silu(gate x) * up x)``, GeGLU) or plain
(GELU, squared ReLU) per ``ModelConfig.mlp``, of width ``intermediate_size``; and the shared
pieces the MoE kind reuses (the activation, a dense MLP of any width).

Weights: ``3 d I`` gated, ``2 d I`` plain; with ``mlp_bias`` the biases of the up (and gate)
projections (``I`` each) and of the down projection (``d``).
"""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.keys import Role
from costmodel.tensor import Tensor

from .base import MLP, ConfigView, LayerContext, Ref, register_mlp

__all__ = ["DenseMLP", "activation", "mlp", "mlp_params", "SWIGLU_OPS", "GELU_OPS", "RELU2_OPS"]

#: per-element work of the gated activation silu(g)*u: negate, +1, divide, x u (vector) + exp (SFU)
SWIGLU_OPS = (4, 1)
#: tanh-approximate GELU: x^3, scale, add, scale, +1, x0.5, x x (vector) + tanh (SFU)
GELU_OPS = (7, 1)
#: squared ReLU relu(x)**2: a max and a product (vector), no transcendental
RELU2_OPS = (2, 0)


def mlp_params(cfg: ConfigView, width: sympy.Expr | None = None) -> sympy.Expr:
    """Dense MLP weights: ``3*d*I`` gated, ``2*d*I`` plain; with ``mlp_bias`` the biases of the
    up (and gate) projections (``I`` each) and of the down projection (``d``).

    Parameters
    ----------
    cfg : ConfigView
        The model (``hidden_size`` ``d``, ``mlp``, ``mlp_bias``).
    width : sympy.Expr, optional
        The intermediate width ``I``; None: ``cfg.intermediate_size``.

    Returns
    -------
    sympy.Expr
        Parameters of one MLP.
    """
    i = cfg.intermediate_size if width is None else width
    p = (3 if cfg.gated_mlp else 2) * cfg.hidden_size * i
    if cfg.mlp_bias:
        p += (2 if cfg.gated_mlp else 1) * i + cfg.hidden_size
    return p


def activation(layer: LayerContext, local: str, ins: list[Any], rows: Any, width: Any) -> tuple[str, Tensor]:
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


def mlp(layer: LayerContext, x: Ref, width: Any, prefix: str, reduce: bool = True) -> Ref:
    """Dense MLP: gate and up projections (gated) or up only, activation, down.

    Column-parallel gate/up (``width / tp`` per device), row-parallel down
    followed by an all-reduce under tensor parallelism (``reduce``).
    """
    width = layer.split(width, f"{prefix} width")
    bias = layer.cfg.mlp_bias
    ins = [
        layer.linear(
            f"{prefix}.up_proj", x, width, bias=bias, merged="gate_up_proj" if layer.cfg.gated_mlp else ""
        )
    ]
    if layer.cfg.gated_mlp:
        # gate and up: one GEMM in every engine (vLLM's and SGLang's MergedColumnParallelLinear)
        ins.insert(0, layer.linear(f"{prefix}.gate_proj", x, width, bias=bias, merged="gate_up_proj"))
    a = activation(layer, f"{prefix}.act", ins, layer.dims.tokens, width)
    return layer.linear(f"{prefix}.down_proj", a, layer.cfg.hidden_size, reduce=reduce, bias=bias)


@register_mlp
class DenseMLP(MLP):
    """The dense MLP of width ``intermediate_size``."""

    name = "dense"

    def params(self, cfg: ConfigView, *, active: bool = False) -> sympy.Expr:
        return mlp_params(cfg)

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """gate/up read ``d``; down reads ``intermediate_size``."""
        return {"mlp.up_proj": cfg.hidden_size, "mlp.down_proj": cfg.intermediate_size}

    def build(self, layer: LayerContext, x: Ref) -> Ref:
        return mlp(layer, x, layer.cfg.intermediate_size, "mlp")
