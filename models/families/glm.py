"""The Hugging Face family ``glm``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    register_family,
)

__all__ = ["read_glm"]


@register_family("glm")
def read_glm(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4 (``glm``, the ``-hf`` checkpoints): Llama with fused ``gate_up_proj`` (the same weights) and
    q/k/v bias (``attention_bias``, read with the common fields); rope on half of each head."""
