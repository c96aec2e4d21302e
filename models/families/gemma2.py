"""The Hugging Face family ``gemma2``: what the reader adds to the common fields is in its docstring.

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

__all__ = ["read_gemma2"]


@register_family("gemma2")
def read_gemma2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Gemma 2: local (``sliding_window``) and global layers alternating, local first; four norms a
    layer; GeGLU; tied embeddings; no q/k norms. Its logit soft-capping (``cap * tanh(s / cap)`` on
    every attention score, ``attn_logit_softcapping``, and on the logits, ``final_logit_softcapping``)
    is not charged: three element-wise ops per score, in registers inside a fused attention kernel,
    and ``3V`` per logit row against the lm_head's ``2dV``."""
    gemma_like(cfg, common, get, name, period=2, qk_norm=False)
