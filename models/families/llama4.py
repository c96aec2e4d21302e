"""The Hugging Face family ``llama4`` / ``llama4_text``: routed experts of ``intermediate_size`` plus
one shared expert of the same width in every ``interleave_moe_layer_step``-th
layer, dense layers of ``intermediate_size_mlp``; layers with RoPE use
chunked attention over ``attention_chunk_size`` positions, the NoPE layers
(``no_rope_layers`` 0, by default every 4th) attend to the whole context.
Only the text model is built (the vision encoder is not).

Registered with :func:`models.hf_families.register_family`; :mod:`models.hf_read` reads the common
fields first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fields import ModelConfigError
from ..hf_families import (
    Getter,
    indices,
    layer_period,
    nth,
    pattern_layers,
    register_family,
)
from ..layers import LayerSpec

__all__ = ["read_llama4"]


@register_family("llama4", "llama4_text")
def read_llama4(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    # Llama4TextConfig: an empty or absent no_rope_layers is every no_rope_layer_interval-th layer NoPE
    rope = cfg.get("no_rope_layers") or [
        int(not f) for f in nth(n, layer_period(cfg, get, name, "no_rope_layer_interval", 4))
    ]
    if not isinstance(rope, list) or len(rope) != n or not all(type(r) is int and r in (0, 1) for r in rope):
        raise ModelConfigError(f"{name}: no_rope_layers must list {n} entries of 0 (NoPE) or 1 (rope)")
    step = layer_period(cfg, get, name, "interleave_moe_layer_step", 1)
    every = [i for i, f in enumerate(nth(n, step)) if f]
    moe = cfg.get("moe_layers")  # Llama4TextConfig: only an absent list defaults to every step-th layer
    moe_set = set(every) if moe is None else indices(moe, "moe_layers", name, n)
    expert_w = common["intermediate_size"]
    common.update(
        intermediate_size=get(cfg, "intermediate_size_mlp", name, expert_w),
        num_experts=get(cfg, "num_local_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=expert_w,
        num_shared_experts=1,
        attention_chunk_size=get(cfg, "attention_chunk_size", name),
        nope_full_attention=True,  # the full-context layers are exactly the NoPE ones
        layer_types=tuple(
            LayerSpec("chunked" if rope[i] else "gqa", "moe" if i in moe_set else "dense") for i in range(n)
        ),
    )
