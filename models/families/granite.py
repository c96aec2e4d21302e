"""The Hugging Face family ``granite``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import bool_field
from ..hf_families import (
    Getter,
    register_family,
)

__all__ = ["read_granite"]


@register_family("granite")
def read_granite(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Granite 3: Llama with scalar multipliers (``embedding_multiplier``, ``residual_multiplier``,
    ``attention_multiplier``, ``logits_scaling``: one multiply per element, not charged) and biases on
    all four attention projections with ``attention_bias`` and on the MLP with ``mlp_bias``."""
    common.update(o_bias=common["qkv_bias"], mlp_bias=bool_field(cfg, "mlp_bias", name, False))
