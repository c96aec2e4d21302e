"""The Hugging Face family ``phi``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import ModelConfigError, bool_field
from ..hf_families import (
    Getter,
    gpt2_style,
    register_family,
)

__all__ = ["read_phi"]


@register_family("phi")
def read_phi(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Phi-1 / 1.5 / 2: a parallel block (one LayerNorm with bias feeds attention and the MLP), q/k/v and
    ``dense`` biases, a plain GELU MLP (``fc1``/``fc2``) with biases, a biased lm_head. Rope covers
    ``partial_rotary_factor`` of each head (charged over the whole head: a few vector FLOPs)."""
    if bool_field(cfg, "qk_layernorm", name, False):
        raise ModelConfigError(
            f"{name}: qk_layernorm (per-head LayerNorms with bias on q and k) has no layer spec; "
            "set qk_layernorm false or describe the model as a ModelConfig with qk_norm"
        )
    gpt2_style(common, True)
    common.update(parallel_block=True, lm_head_bias=True)
