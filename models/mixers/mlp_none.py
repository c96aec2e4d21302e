"""The empty MLP kind (``none``): a layer that is its mixer alone (Mamba-2 blocks, Nemotron-H's
``M`` and ``*`` layers). The layer builder skips the MLP's norm and residual for it."""

from __future__ import annotations

import sympy

from .base import MLP, ConfigView, LayerContext, Ref, register_mlp

__all__ = ["NoMLP"]


@register_mlp
class NoMLP(MLP):
    """No feed-forward block: the layer is its mixer."""

    name = "none"

    def params(self, cfg: ConfigView, *, active: bool = False) -> sympy.Expr:
        """No MLP weights."""
        return sympy.Integer(0)

    def build(self, layer: LayerContext, x: Ref) -> Ref:
        """Nothing to add: the input passes through."""
        return x
