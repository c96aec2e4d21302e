"""The Hugging Face family ``falcon``: what the reader adds to the common fields is in its docstring.

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fieldlog import layered
from ..fields import bool_field, first_field, int_field
from ..hf_families import (
    Getter,
    gpt2_style,
    register_family,
)

__all__ = ["read_falcon_fields", "read_falcon"]


def read_falcon_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Falcon's field names as the common ones: ``ffn_hidden_size`` (default ``4d``), the KV heads
    (``num_kv_heads`` with ``new_decoder_architecture``, else one with ``multi_query``), ``activation``;
    tied embeddings by default (``FalconConfig``)."""
    d = int_field(cfg, "hidden_size", name)
    heads = first_field(cfg, int_field, name, ("num_attention_heads", "n_head"))
    if bool_field(cfg, "new_decoder_architecture", name, False):
        kv = first_field(cfg, int_field, name, ("num_kv_heads", "n_head_kv"), heads)
    else:
        kv = 1 if bool_field(cfg, "multi_query", name, True) else heads
    over = {
        "num_hidden_layers": first_field(cfg, int_field, name, ("num_hidden_layers", "n_layer")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": int_field(cfg, "ffn_hidden_size", name, 4 * d),
        "hidden_act": cfg.get("activation", "gelu"),
    }
    return layered(cfg, defaults={"tie_word_embeddings": True}, overrides=over)


@register_family(
    "falcon",
    aliases={"falcon": read_falcon_fields},
    approximated=(
        "with new_decoder_architecture, the two parallel norms are built as a sequential layer "
        "(the same weights, FLOPs and bytes)",
    ),
)
def read_falcon(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Falcon: LayerNorm with bias, a plain GELU MLP, ``bias`` on every linear. Falcon-7B's parallel
    block has one ``input_layernorm``; ``new_decoder_architecture`` (40B, 180B) has two norms
    (``ln_attn``, ``ln_mlp``) in parallel, built as a sequential layer (the same weights, FLOPs and
    bytes: the MLP reads ``x`` rather than ``x + attn``). ALiBi (``alibi``) replaces rope: its per-score
    bias add is not charged."""
    two_norms = bool_field(cfg, "new_decoder_architecture", name, False) and (
        get(cfg, "num_ln_in_parallel_attn", name, None) != 1
    )
    gpt2_style(common, bool_field(cfg, "bias", name, False))
    common.update(
        parallel_block=bool_field(cfg, "parallel_attn", name, True) and not two_norms,
        rope=not bool_field(cfg, "alibi", name, False),
    )
