"""The Hugging Face family ``gemma3`` / ``gemma3_text`` (fields under ``text_config`` for the
multimodal checkpoint): ``layer_types`` or every ``sliding_window_pattern``-th
layer global, the rest ``sliding_window`` local; GeGLU MLP; q/k norms; tied
embeddings (its context limit: :mod:`models.context`).

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    gemma_like,
    register_family,
)

__all__ = ["read_gemma3"]


@register_family("gemma3", "gemma3_text")
def read_gemma3(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    gemma_like(cfg, common, get, name, period=6, qk_norm=True)
