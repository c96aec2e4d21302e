"""The Hugging Face family ``exaone``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fieldlog import layered
from ..hf_families import (
    Getter,
    register_family,
)

__all__ = ["read_exaone_fields", "read_exaone"]


def read_exaone_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """EXAONE 3 / 3.5 name the layer count ``num_layers`` and the activation ``activation_function``
    (``ExaoneConfig.attribute_map``)."""
    over = {}
    if "num_hidden_layers" not in cfg and "num_layers" in cfg:
        over["num_hidden_layers"] = cfg["num_layers"]
    return layered(cfg, defaults={"hidden_act": cfg.get("activation_function", "silu")}, overrides=over)


@register_family("exaone", aliases={"exaone": read_exaone_fields})
def read_exaone(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """EXAONE 3 / 3.5: Llama (``ln_1``/``ln_2`` RMSNorms, ``c_fc_0``/``c_fc_1``/``c_proj`` SwiGLU)."""
    common["o_bias"] = common["qkv_bias"]
