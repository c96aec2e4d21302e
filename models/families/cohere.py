"""The Hugging Face family ``cohere``: what the reader adds to the common fields is in its docstring.

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

__all__ = ["read_cohere"]


@register_family(
    "cohere",
    approximated=(
        "the LayerNorm without bias is counted as an RMSNorm (the same d weights; the mean "
        "subtraction's d FLOPs per token not charged)",
    ),
)
def read_cohere(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Command R / R+: a parallel block under one LayerNorm *without* bias (counted as an RMSNorm: the
    same ``d`` weights; the mean subtraction's ``d`` FLOPs per token are not charged), optional
    per-head-weighted q/k norms (``use_qk_norm``: ``H*h`` and ``H_kv*h`` weights), tied embeddings;
    ``logit_scale`` is one multiply per logit (not charged)."""
    qk = bool_field(cfg, "use_qk_norm", name, False)
    common.update(
        parallel_block=True,
        qk_norm=qk,
        qk_norm_all_heads=qk,
        tie_word_embeddings=bool_field(cfg, "tie_word_embeddings", name, True),
    )
