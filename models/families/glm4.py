"""The Hugging Face family ``glm4``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    register_family,
)

__all__ = ["read_glm4"]


@register_family("glm4")
def read_glm4(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4-0414 (``glm4``): GLM with norms after the attention and the MLP as well
    (``post_self_attn_layernorm``, ``post_mlp_layernorm``)."""
    common["sandwich_norm"] = True
