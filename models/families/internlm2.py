"""The Hugging Face family ``internlm2``: what the reader adds to the common fields is in its docstring.

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

__all__ = ["read_internlm2"]


@register_family("internlm2")
def read_internlm2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """InternLM2 / 2.5 (remote code): Llama with a fused ``wqkv`` (the same weights) and ``bias`` on
    ``wqkv`` and ``wo``."""
    bias = bool_field(cfg, "bias", name, False)
    common.update(qkv_bias=bias, o_bias=bias)
