"""The Hugging Face family ``nemotron_h``: ``hybrid_override_pattern``, one character per layer: ``M`` a
Mamba-2 mixer, ``*`` attention, ``-`` a dense MLP, ``E`` a MoE, each a layer of
its own; the Mamba fields carry a ``mamba_`` prefix (``mamba_num_heads``,
``mamba_head_dim``, ``mamba_n_groups`` or ``n_groups`` ...); attention heads are
``attention_head_dim`` wide; the MLP is squared ReLU (``mlp_hidden_act: relu2``).

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import GELU_NAMES, ModelConfigError, bool_field, first_field
from ..hf_families import (
    Getter,
    built_as,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_nemotron_h"]


#: Nemotron-H's pattern characters -> (mixer, MLP) of the layer
_NEMOTRON = {"M": ("ssm", "none"), "*": ("gqa", "none"), "-": ("none", "dense"), "E": ("none", "moe")}


@register_family("nemotron_h")
def read_nemotron_h(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - set(_NEMOTRON):
        raise ModelConfigError(
            f"{name}: hybrid_override_pattern must be {n} characters of {''.join(_NEMOTRON)}, got {pattern!r}"
        )
    act = cfg.get("mlp_hidden_act", "relu2")
    # transformers' NemotronHMLP is up_proj, act, down_proj (no gate) whatever the activation: a
    # squared ReLU or a GELU has that shape here; another name once fell through to SwiGLU, unsaid
    kinds = {"relu2": "relu2", **dict.fromkeys(GELU_NAMES, "gelu")}
    if not isinstance(act, str) or act not in kinds:
        raise ModelConfigError(
            f"{name}: config field 'mlp_hidden_act' {str(act)[:40]!r} is not an activation the MLP is "
            f"costed with; known: {', '.join(kinds)}"
        )
    built_as(cfg, name, {"use_conv_bias": True, "use_bias": False}, "the Mamba-2 mixer")
    common.update(
        mlp_bias=bool_field(cfg, "mlp_bias", name, False),
        head_dim=get(cfg, "attention_head_dim", name, common["head_dim"]),
        mlp=kinds[act],
        ssm_state_size=get(cfg, "ssm_state_size", name),
        ssm_num_heads=get(cfg, "mamba_num_heads", name),
        ssm_head_dim=get(cfg, "mamba_head_dim", name),
        ssm_n_groups=first_field(cfg, get, name, ("mamba_n_groups", "n_groups"), 1),
        ssm_conv_kernel=first_field(cfg, get, name, ("mamba_d_conv", "conv_kernel"), 4),
        ssm_chunk_size=first_field(cfg, get, name, ("mamba_chunk_size", "chunk_size"), 256),
        layer_types=tuple(LayerSpec(*_NEMOTRON[c]) for c in pattern),
    )
