"""The empty mixer (``none``): a layer that is its MLP alone (Nemotron-H's ``-`` and ``E`` blocks).

The layer builder skips the mixer's norm and residual for it, so it has no weights and adds
no nodes.
"""

from __future__ import annotations

import sympy

from .base import ConfigView, LayerContext, Mixer, Ref, register_mixer

__all__ = ["NoMixer"]


@register_mixer
class NoMixer(Mixer):
    """No token mixing: the layer is its MLP."""

    name = "none"

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """An MLP-only layer has no mixer weights."""
        return sympy.Integer(0)

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Nothing to add: the input passes through."""
        return h
