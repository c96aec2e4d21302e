"""The Hugging Face family registry (used by :mod:`models.hf_read`) and the helpers the family
readers share.

A family is one module of :mod:`models.families` (or a mixer plug-in's ``hf_families``): a reader
``reader(config, common, get, name)`` that adds to the common fields (``hidden_size``, heads,
vocabulary ... read by :mod:`models.hf_read`) what its family states, and the per-layer pattern
where the config gives one, registered for its ``model_type`` values with
:func:`register_family` (with the field renames applied before the common fields are read, and
what its mapping builds differently from the checkpoint). What the readers approximate, all a
few element-wise FLOPs or none: Gemma 2's logit soft-capping and Granite's and Cohere's scalar
multipliers are not charged, Cohere's bias-free LayerNorm is counted as an RMSNorm (the same
weights), OLMo 2's post-norms sit in the pre-norm places and Falcon-40B's two parallel norms are
built as a sequential layer (the same weights, FLOPs and bytes), rope is charged over the whole
head where only a fraction rotates, ALiBi's bias add is not charged (:data:`APPROXIMATED_FIELDS`,
:data:`APPROXIMATED_FAMILIES`).

:data:`NEW_ARCHITECTURES` lists the ``model_type`` values whose architecture needs a part the layer
specs lack, with what is missing and how to describe it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .fieldlog import layered
from .fields import MAX_PATTERN_LAYERS, ModelConfigError, bool_field, first_field, int_field, pattern_layers
from .layers import LayerSpec

__all__ = [
    "APPROXIMATED_FIELDS",
    "APPROXIMATED_FAMILIES",
    "FAMILIES",
    "FIELD_ALIASES",
    "NEW_ARCHITECTURES",
    "MAX_PATTERN_LAYERS",
    "Getter",
    "Reader",
    "Aliases",
    "register_family",
    "moe_fields",
    "unwrap_text_config",
    "pattern_layers",
    "mapped_layer_types",
    "nth",
    "indices",
    "moe_mask",
    "layer_period",
    "count",
    "built_as",
    "gpt2_style",
    "sliding_everywhere",
    "gemma_like",
    "int_field",
    "first_field",
]

#: ``get(config, field, model_name[, default])``: a checked integer field (:func:`models.fields.int_field`)
Getter = Callable[..., Any]
#: a family reader: ``reader(config, common, get, model_name)`` adds the family's fields to ``common``
Reader = Callable[[Mapping[str, Any], dict[str, Any], Getter, str], None]
#: a field renaming: ``aliases(config, model_name)`` -> the config under the common field names
Aliases = Callable[[Mapping[str, Any], str], Mapping[str, Any]]
R = TypeVar("R", bound=Reader)

#: model_type -> reader of its family fields, in registration order (:mod:`models.families`)
FAMILIES: dict[str, Reader] = {}
#: model_type -> its field names as the common ones, applied before the common fields are read
FIELD_ALIASES: dict[str, Aliases] = {}
#: model_type -> what its mapping builds differently from the checkpoint (the same weights and FLOPs
#: unless said), from the readers' docstrings
APPROXIMATED_FAMILIES: dict[str, tuple[str, ...]] = {}


def register_family(
    *model_types: str, aliases: Mapping[str, Aliases] | None = None, approximated: tuple[str, ...] = ()
) -> Callable[[R], R]:
    """Decorator: register a reader for ``model_types`` (a type registered twice is refused), with
    ``aliases`` (model_type -> field renaming) and the notes of what it ``approximated``."""

    def deco(reader: R) -> R:
        for mt in model_types:
            if mt in FAMILIES:
                raise ModelConfigError(f"model_type {mt!r} is already read by {FAMILIES[mt].__name__}")
            FAMILIES[mt] = reader
            if approximated:
                APPROXIMATED_FAMILIES[mt] = approximated
        FIELD_ALIASES.update(aliases or {})
        return reader

    return deco


def unwrap_text_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config's ``text_config`` (Gemma 3, Llama 4), keeping the top-level type,
    ``torch_dtype`` and ``quantization_config`` (they describe the whole checkpoint)."""
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise ModelConfigError(
            f"config field 'text_config' must be an object (the language model's fields), got {type(text).__name__} "
            f"{str(text)[:40]!r}"
        )
    if isinstance(text, Mapping) and cfg.get("model_type") in ("gemma3", "llama4", "qwen3_5", "qwen3_5_moe"):
        top: dict[str, Any] = {}
        if text.get("tie_word_embeddings") is None:
            top["tie_word_embeddings"] = cfg.get("tie_word_embeddings")
        for key in ("quantization_config", "torch_dtype", "dtype"):  # stated for the whole checkpoint
            if key in cfg and text.get(key) is None:
                top[key] = cfg[key]
        return layered(text, defaults=top, overrides={"model_type": cfg["model_type"]}, drop_none=True)
    return cfg


def mapped_layer_types(cfg: Mapping[str, Any], name: str, n: int, names: dict[str, str]) -> list[str] | None:
    """A config's ``layer_types`` (``n`` entries) as mixer names through ``names``; None when absent."""
    lt = cfg.get("layer_types")
    if lt is None:
        return None
    if not isinstance(lt, list) or len(lt) != n:
        raise ModelConfigError(f"{name}: layer_types must be a list of {n} entries")
    try:
        return [names[t] for t in lt]
    except (KeyError, TypeError):
        raise ModelConfigError(f"{name}: layer_types entries must be one of {sorted(names)}") from None


def nth(n: int, every: int) -> list[bool]:
    """True at every ``every``-th of ``n`` layers, counting from one (the last of each period)."""
    return [(i + 1) % every == 0 for i in range(n)]


def indices(value: Any, key: str, name: str, n: int) -> set[int]:
    """A config's list of layer indices (each in ``[0, n)``), checked; null reads as none."""
    if value is None:
        return set()
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n for i in value
    ):
        raise ModelConfigError(
            f"{name}: {key} must be a list of layer indices in [0, {n}), got {value!r:.120}"
        )
    return set(value)


def moe_mask(cfg: Mapping[str, Any], n: int, get: Getter, name: str) -> list[str]:
    """Each layer's MLP kind: ``moe`` every ``decoder_sparse_step``-th layer except ``mlp_only_layers``."""
    moe = nth(n, layer_period(cfg, get, name, "decoder_sparse_step", 1))
    only = indices(cfg.get("mlp_only_layers"), "mlp_only_layers", name, n)
    return ["moe" if (i not in only and moe[i]) else "dense" for i in range(n)]


def built_as(cfg: Mapping[str, Any], name: str, built: Mapping[str, bool], part: str) -> None:
    """Refuse a boolean field that states what the layer builder does not build (``built``: field ->
    the value the graph assumes; absent or null reads as that value, the transformers default)."""
    for key, want in built.items():
        if bool_field(cfg, key, name, want) != want:
            raise ModelConfigError(
                f"{name}: {key} {str(not want).lower()} is not modelled: {part} is built with "
                f"{key} {str(want).lower()}; describe the model as a ModelConfig to change it"
            )


def count(v: Any) -> bool:
    """Whether ``v`` is a whole number >= 1 (``bool`` refused)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def layer_period(cfg: Mapping[str, Any], get: Getter, name: str, key: str, default: int) -> int:
    """The period ``key`` of a layer pattern (every how many layers), refused below 1."""
    v = get(cfg, key, name, default)
    if v < 1:
        raise ModelConfigError(f"{name}: {key} must be >= 1, got {v}")
    return v


def sliding_everywhere(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Every layer attends a ``sliding_window`` (Phi-3-mini-4k's 2047, StarCoder2's 4096), when the config
    states one shorter than the context; otherwise full attention."""
    w = get(cfg, "sliding_window", name, None)
    limit = common.get("max_context")
    if w is not None and (limit is None or w < limit):
        n = pattern_layers(common, name)
        common.update(sliding_window=w, layer_types=tuple(LayerSpec("sliding", "dense") for _ in range(n)))


def gpt2_style(common: dict[str, Any], bias: bool) -> None:
    """LayerNorms with bias, a plain GELU MLP and ``bias`` on every linear (Phi-2, Falcon, StarCoder2)."""
    common.update(norm="layernorm", mlp="gelu", qkv_bias=bias, o_bias=bias, mlp_bias=bias)


def gemma_like(
    cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str, *, period: int, qk_norm: bool
) -> None:
    """Gemma 2 and 3: ``layer_types`` (or every ``sliding_window_pattern``-th layer global, default
    ``period``), the rest ``sliding_window`` local; GeGLU, sandwich norms, tied embeddings."""
    n = pattern_layers(common, name)
    mixers = mapped_layer_types(cfg, name, n, {"sliding_attention": "sliding", "full_attention": "gqa"})
    if mixers is None:
        full = nth(n, layer_period(cfg, get, name, "sliding_window_pattern", period))
        mixers = ["gqa" if f else "sliding" for f in full]
    common.update(
        mlp="geglu",
        qk_norm=qk_norm,
        sandwich_norm=True,  # post_attention_layernorm and post_feedforward_layernorm
        tie_word_embeddings=bool_field(cfg, "tie_word_embeddings", name, True),
        sliding_window=get(cfg, "sliding_window", name),
        layer_types=tuple(mixers),
    )


def moe_fields(
    cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str, *, router_bias: bool = True
) -> None:
    """DeepSeek-style MoE fields (``n_routed_experts``, ``n_shared_experts``, ``moe_intermediate_size``,
    ``first_k_dense_replace``), with the noaux_tc router's per-expert correction bias (``router_bias``:
    ``e_score_correction_bias``, stored in the checkpoint, a buffer in transformers)."""
    common.update(
        num_experts=get(cfg, "n_routed_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=get(cfg, "moe_intermediate_size", name),
        num_shared_experts=get(cfg, "n_shared_experts", name, 0),
        first_k_dense_replace=get(cfg, "first_k_dense_replace", name, 0),
        router_bias=router_bias,
    )


#: model_types whose architecture the layer specs do not express: what is missing, and how to describe it
NEW_ARCHITECTURES: dict[str, str] = {
    "minimax": "mixer: MiniMax-01 / M1 lightning attention (linear attention with a per-head decay, "
    "attn_type_list 0) is not a layer spec yet; a mixer plugin with its d_head x d_head state per head "
    "describes it",
    "kimi_linear": "mixer: Kimi Delta Attention (a gated delta rule with channel-wise decay) interleaved "
    "with MLA is not a layer spec yet; the linear_attention mixer with its head shapes is the nearest",
    "falcon_h1": "mixer: Falcon-H1 runs attention and a Mamba-2 mixer in parallel inside one layer; "
    "layer specs hold one mixer per layer (a parallel-mixer layer spec would describe it)",
    "phi3small": "mixer: Phi-3-small's block-sparse attention (local blocks plus vertical strides) is not "
    "a layer spec; a mixer plugin with its attended-block count per query describes it",
}

_SCALAR = "a scalar multiplier: one multiply per element, not charged"
#: config fields whose effect the graph leaves out or simplifies (the mappers' docstrings above) -> what
#: it does instead; ``costmodel model check`` names each one a config states with a value that is not
#: null, false or zero (:func:`models.check.approximations`)
APPROXIMATED_FIELDS: dict[str, str] = {
    "attn_logit_softcapping": "attention-score soft-capping (cap * tanh(s / cap)) not charged: three "
    "element-wise ops per score, in registers inside a fused attention kernel",
    "final_logit_softcapping": "logit soft-capping not charged: 3V element-wise ops per row against the "
    "lm_head's 2dV",
    "embedding_multiplier": _SCALAR,
    "residual_multiplier": _SCALAR,
    "attention_multiplier": _SCALAR,
    "logits_scaling": _SCALAR,
    "logit_scale": _SCALAR,
    "alibi": "ALiBi replaces rope: its per-score bias add is not charged",
    "partial_rotary_factor": "rope charged over the whole head where only this fraction of it rotates "
    "(a few vector FLOPs per token)",
    "num_nextn_predict_layers": "multi-token-prediction modules built only for speculative decoding with "
    "them (mtp); a plain step leaves them out",
    "num_mtp_modules": "multi-token-prediction modules not built (transformers builds none)",
}
