"""The Hugging Face family ``olmo2``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..hf_families import (
    Getter,
    register_family,
)

__all__ = ["read_olmo2"]


@register_family("olmo2", approximated=("the post-norms are built in the pre-norm places (the same cost)",))
def read_olmo2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """OLMo 2: norms after the attention and the MLP instead of before (``post_attention_layernorm``,
    ``post_feedforward_layernorm``: two a layer, built in the pre-norm places, the same cost) and
    q/k RMSNorms over all heads (``H*h`` and ``H_kv*h`` weights)."""
    common.update(qk_norm=True, qk_norm_all_heads=True)
