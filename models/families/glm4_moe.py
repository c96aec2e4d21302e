"""The Hugging Face family ``glm4_moe``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import bool_field
from ..hf_families import (
    Getter,
    moe_fields,
    register_family,
)

__all__ = ["read_glm4_moe"]


@register_family("glm4_moe")
def read_glm4_moe(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4.5 / 4.6 (``glm4_moe``): GQA with q/k/v bias (``attention_bias``) and per-head q/k norms
    (``use_qk_norm``), dense MLPs in the first ``first_k_dense_replace`` layers, then routed experts
    plus ``n_shared_experts`` shared ones under a sigmoid router with a correction bias; its
    ``num_nextn_predict_layers`` MTP layer is kept only with ``mtp=True`` (as DeepSeek-V3's)."""
    moe_fields(cfg, common, get, name)
    common["qk_norm"] = bool_field(cfg, "use_qk_norm", name, False)
