"""The Hugging Face family ``phi3``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    register_family,
    sliding_everywhere,
)

__all__ = ["read_phi3"]


@register_family("phi3")
def read_phi3(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Phi-3 / Phi-4 (``model_type: phi3``): Llama with fused ``qkv_proj`` and ``gate_up_proj`` (the same
    weights), no biases, and a ``sliding_window`` on every layer where it is shorter than the context."""
    common["qkv_bias"] = False
    sliding_everywhere(cfg, common, get, name)
