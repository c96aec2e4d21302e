"""The Hugging Face family ``starcoder2``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import bool_field
from ..hf_families import (
    Getter,
    gpt2_style,
    register_family,
    sliding_everywhere,
)

__all__ = ["read_starcoder2"]


@register_family("starcoder2")
def read_starcoder2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """StarCoder2: LayerNorm with bias, ``use_bias`` on every linear, a plain GELU MLP (``c_fc``,
    ``c_proj``), a ``sliding_window`` on every layer, tied embeddings (``Starcoder2Config``)."""
    gpt2_style(common, bool_field(cfg, "use_bias", name, True))
    common["tie_word_embeddings"] = bool_field(cfg, "tie_word_embeddings", name, True)
    sliding_everywhere(cfg, common, get, name)
