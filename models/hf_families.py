"""Hugging Face ``config.json`` fields of the layer-pattern families (used by :mod:`models.hf`).

Each mapper adds to the common fields (``hidden_size``, heads, vocabulary ...)
what its family states, and the per-layer pattern where the config gives one:

* ``gpt_oss``: every layer MoE (``num_local_experts``, ``num_experts_per_tok``,
  experts of width ``intermediate_size`` with a router bias), ``layer_types``
  of ``sliding_attention`` / ``full_attention`` with ``sliding_window``, one
  learned sink per head, q/k/v biases (``attention_bias``); its MXFP4 experts
  (``quantization_config``) are read by :mod:`models.quantization`;
* ``qwen3_moe``: ``num_experts``, ``moe_intermediate_size``, MoE every
  ``decoder_sparse_step``-th layer except ``mlp_only_layers``; q/k norms;
* ``qwen3_next``: ``layer_types`` of ``linear_attention`` / ``full_attention``
  (or one full layer every ``full_attention_interval``), gated-delta-net
  shapes (``linear_*``), gated full attention, MoE with a
  ``shared_expert_intermediate_size`` shared expert;
* ``gemma3`` / ``gemma3_text`` (fields under ``text_config`` for the
  multimodal checkpoint): ``layer_types`` or every ``sliding_window_pattern``-th
  layer global, the rest ``sliding_window`` local; GeGLU MLP; q/k norms; tied
  embeddings (its context limit: :mod:`models.context`);
* ``llama4`` / ``llama4_text``: routed experts of ``intermediate_size`` plus
  one shared expert of the same width in every ``interleave_moe_layer_step``-th
  layer, dense layers of ``intermediate_size_mlp``; layers with RoPE use
  chunked attention over ``attention_chunk_size`` positions, the NoPE layers
  (``no_rope_layers`` 0, by default every 4th) attend to the whole context.
  Only the text model is built (the vision encoder is not);
* ``mamba2``: every layer a Mamba-2 mixer without MLP (``state_size``,
  ``num_heads``, ``head_dim``, ``n_groups``, ``conv_kernel``, ``chunk_size``);
* ``jamba``: ``layers_block_type`` (or one attention layer every
  ``attn_layer_period`` at ``attn_layer_offset``), the others Mamba-1 mixers
  (``mamba_d_state``, ``mamba_expand``, ``mamba_dt_rank``, ``mamba_d_conv``);
  ``num_experts`` experts every ``expert_layer_period`` at ``expert_layer_offset``
  (or ``layers_num_experts``), dense MLPs elsewhere;
* ``nemotron_h``: ``hybrid_override_pattern``, one character per layer: ``M`` a
  Mamba-2 mixer, ``*`` attention, ``-`` a dense MLP, ``E`` a MoE, each a layer of
  its own; the Mamba fields carry a ``mamba_`` prefix (``mamba_num_heads``,
  ``mamba_head_dim``, ``mamba_n_groups`` or ``n_groups`` ...); attention heads are
  ``attention_head_dim`` wide; the MLP is squared ReLU (``mlp_hidden_act: relu2``);
* the Llama-like and newer decoders, each mapper's docstring stating what it sets and what the graph
  builds differently from the checkpoint: ``phi3``, ``phi``, ``falcon`` (field names through
  :data:`FIELD_ALIASES`), ``gemma2``, ``olmo2``, ``granite``, ``cohere``, ``glm``, ``glm4``,
  ``starcoder2``, ``internlm2``, ``exaone``, ``glm4_moe``, ``minimax_m2``, ``qwen3_5`` and
  ``qwen3_5_moe``. What they approximate, all a few element-wise FLOPs or none: Gemma 2's logit
  soft-capping and Granite's and Cohere's scalar multipliers are not charged, Cohere's bias-free
  LayerNorm is counted as an RMSNorm (the same weights), OLMo 2's post-norms sit in the pre-norm
  places and Falcon-40B's two parallel norms are built as a sequential layer (the same weights, FLOPs
  and bytes), rope is charged over the whole head where only a fraction rotates, ALiBi's bias add is
  not charged.

:data:`NEW_ARCHITECTURES` lists the ``model_type`` values whose architecture needs a part the layer
specs lack, with what is missing and how to describe it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .fieldlog import layered
from .fields import ModelConfigError, bool_field, first_field, int_field
from .layers import LayerSpec

__all__ = [
    "APPROXIMATED_FIELDS",
    "APPROXIMATED_FAMILIES",
    "FAMILIES",
    "FIELD_ALIASES",
    "NEW_ARCHITECTURES",
    "moe_fields",
    "unwrap_text_config",
    "int_field",
    "first_field",
]

Getter = Callable[..., Any]


def unwrap_text_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config's ``text_config`` (Gemma 3, Llama 4), keeping the top-level type,
    ``torch_dtype`` and ``quantization_config`` (they describe the whole checkpoint)."""
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and cfg.get("model_type") in ("gemma3", "llama4", "qwen3_5", "qwen3_5_moe"):
        top: dict[str, Any] = {}
        if text.get("tie_word_embeddings") is None:
            top["tie_word_embeddings"] = cfg.get("tie_word_embeddings")
        for key in ("quantization_config", "torch_dtype", "dtype"):  # stated for the whole checkpoint
            if key in cfg and text.get(key) is None:
                top[key] = cfg[key]
        return layered(text, defaults=top, overrides={"model_type": cfg["model_type"]}, drop_none=True)
    return cfg


#: the most layers a per-layer pattern may list (the deepest catalog model has 126)
MAX_PATTERN_LAYERS = 4096


def pattern_layers(common: dict[str, Any], name: str) -> int:
    """``num_hidden_layers``, refused above :data:`MAX_PATTERN_LAYERS` before any per-layer list is built."""
    n = common["num_hidden_layers"]
    if n < 1 or n > MAX_PATTERN_LAYERS:
        raise ModelConfigError(
            f"{name}: num_hidden_layers must be between 1 and {MAX_PATTERN_LAYERS} for a per-layer pattern, got {n}"
        )
    return n


def _layer_types(cfg: Mapping[str, Any], name: str, n: int, names: dict[str, str]) -> list[str] | None:
    lt = cfg.get("layer_types")
    if lt is None:
        return None
    if not isinstance(lt, list) or len(lt) != n:
        raise ModelConfigError(f"{name}: layer_types must be a list of {n} entries")
    try:
        return [names[t] for t in lt]
    except (KeyError, TypeError):
        raise ModelConfigError(f"{name}: layer_types entries must be one of {sorted(names)}") from None


def _gpt_oss(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    mixers = _layer_types(cfg, name, n, {"sliding_attention": "sliding", "full_attention": "gqa"})
    common.update(
        num_experts=get(cfg, "num_local_experts", name),
        num_experts_per_tok=first_field(cfg, get, name, ("num_experts_per_tok", "experts_per_token")),
        moe_intermediate_size=common["intermediate_size"],
        router_bias=True,
        mlp_bias=True,  # GptOssExperts: gate_up_proj_bias and down_proj_bias
        qkv_bias=bool_field(cfg, "attention_bias", name, True),
        o_bias=bool_field(cfg, "attention_bias", name, True),
        attention_sinks=1,
        sliding_window=get(cfg, "sliding_window", name),
        layer_types=tuple(LayerSpec(m, "moe") for m in (mixers or ["sliding", "gqa"] * (n // 2))),
    )


def _nth(n: int, every: int) -> list[bool]:
    """True at every ``every``-th of ``n`` layers, counting from one (the last of each period)."""
    return [(i + 1) % every == 0 for i in range(n)]


def _indices(value: Any, key: str, name: str, n: int) -> set[int]:
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


def _moe_mask(cfg: Mapping[str, Any], n: int, get: Getter, name: str) -> list[str]:
    moe = _nth(n, _period(cfg, get, name, "decoder_sparse_step", 1))
    only = _indices(cfg.get("mlp_only_layers"), "mlp_only_layers", name, n)
    return ["moe" if (i not in only and moe[i]) else "dense" for i in range(n)]


def _qwen3_moe(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    common.update(
        qk_norm=True,
        num_experts=get(cfg, "num_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=get(cfg, "moe_intermediate_size", name),
    )
    mlps = _moe_mask(cfg, n, get, name)
    if set(mlps) != {"moe"}:
        common["layer_types"] = tuple(LayerSpec("gqa", m) for m in mlps)


def _qwen3_next(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    mixers = _layer_types(cfg, name, n, {"linear_attention": "linear_attention", "full_attention": "gqa"})
    if mixers is None:
        full = _nth(n, _period(cfg, get, name, "full_attention_interval", 4))
        mixers = ["gqa" if f else "linear_attention" for f in full]
    _qwen3_moe(cfg, common, get, name)
    mlps = _moe_mask(cfg, n, get, name)
    common.update(
        attn_output_gate=True,
        shared_expert_gate=True,
        shared_expert_intermediate_size=get(cfg, "shared_expert_intermediate_size", name, None),
        linear_num_key_heads=get(cfg, "linear_num_key_heads", name),
        linear_num_value_heads=get(cfg, "linear_num_value_heads", name),
        linear_key_head_dim=get(cfg, "linear_key_head_dim", name),
        linear_value_head_dim=get(cfg, "linear_value_head_dim", name),
        linear_conv_kernel=get(cfg, "linear_conv_kernel_dim", name, 4),
        layer_types=tuple(LayerSpec(m, f) for m, f in zip(mixers, mlps, strict=True)),
    )


def _gemma3(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    _gemma_like(cfg, common, get, name, period=6, qk_norm=True)


def _llama4(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    # Llama4TextConfig: an empty or absent no_rope_layers is every no_rope_layer_interval-th layer NoPE
    rope = cfg.get("no_rope_layers") or [
        int(not f) for f in _nth(n, _period(cfg, get, name, "no_rope_layer_interval", 4))
    ]
    if not isinstance(rope, list) or len(rope) != n or not all(type(r) is int and r in (0, 1) for r in rope):
        raise ModelConfigError(f"{name}: no_rope_layers must list {n} entries of 0 (NoPE) or 1 (rope)")
    step = _period(cfg, get, name, "interleave_moe_layer_step", 1)
    every = [i for i, f in enumerate(_nth(n, step)) if f]
    moe = cfg.get("moe_layers")  # Llama4TextConfig: only an absent list defaults to every step-th layer
    moe_set = set(every) if moe is None else _indices(moe, "moe_layers", name, n)
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


def _mamba2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    heads = get(cfg, "num_heads", name)
    common.update(
        ssm_state_size=get(cfg, "state_size", name),
        ssm_num_heads=heads,
        ssm_head_dim=get(cfg, "head_dim", name),
        ssm_n_groups=get(cfg, "n_groups", name, 1),
        ssm_conv_kernel=get(cfg, "conv_kernel", name, 4),
        ssm_chunk_size=get(cfg, "chunk_size", name, 256),
        layer_types=tuple(LayerSpec("ssm", "none") for _ in range(n)),
        tie_word_embeddings=bool_field(cfg, "tie_word_embeddings", name, True),
    )
    built_as(cfg, name, {"use_conv_bias": True, "use_bias": False}, "the Mamba-2 mixer")


#: Nemotron-H's pattern characters -> (mixer, MLP) of the layer
_NEMOTRON = {"M": ("ssm", "none"), "*": ("gqa", "none"), "-": ("none", "dense"), "E": ("none", "moe")}


def _nemotron_h(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n = pattern_layers(common, name)
    pattern = cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - set(_NEMOTRON):
        raise ModelConfigError(
            f"{name}: hybrid_override_pattern must be {n} characters of {''.join(_NEMOTRON)}, got {pattern!r}"
        )
    act = cfg.get("mlp_hidden_act", "relu2")
    built_as(cfg, name, {"use_conv_bias": True, "use_bias": False}, "the Mamba-2 mixer")
    common.update(
        mlp_bias=bool_field(cfg, "mlp_bias", name, False),
        head_dim=get(cfg, "attention_head_dim", name, common["head_dim"]),
        mlp="relu2" if act == "relu2" else common["mlp"],
        ssm_state_size=get(cfg, "ssm_state_size", name),
        ssm_num_heads=get(cfg, "mamba_num_heads", name),
        ssm_head_dim=get(cfg, "mamba_head_dim", name),
        ssm_n_groups=first_field(cfg, get, name, ("mamba_n_groups", "n_groups"), 1),
        ssm_conv_kernel=first_field(cfg, get, name, ("mamba_d_conv", "conv_kernel"), 4),
        ssm_chunk_size=first_field(cfg, get, name, ("mamba_chunk_size", "chunk_size"), 256),
        layer_types=tuple(LayerSpec(*_NEMOTRON[c]) for c in pattern),
    )


def built_as(cfg: Mapping[str, Any], name: str, built: Mapping[str, bool], part: str) -> None:
    """Refuse a boolean field that states what the layer builder does not build (``built``: field ->
    the value the graph assumes; absent or null reads as that value, the transformers default)."""
    for key, want in built.items():
        if bool_field(cfg, key, name, want) != want:
            raise ModelConfigError(
                f"{name}: {key} {str(not want).lower()} is not modelled: {part} is built with "
                f"{key} {str(want).lower()}; describe the model as a ModelConfig to change it"
            )


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _period(cfg: Mapping[str, Any], get: Getter, name: str, key: str, default: int) -> int:
    v = get(cfg, key, name, default)
    if v < 1:
        raise ModelConfigError(f"{name}: {key} must be >= 1, got {v}")
    return v


def _jamba(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    n, d = pattern_layers(common, name), common["hidden_size"]
    blocks = cfg.get("layers_block_type")
    if blocks is None:
        period, offset = (
            _period(cfg, get, name, "attn_layer_period", 8),
            get(cfg, "attn_layer_offset", name, 4),
        )
        blocks = ["attention" if i % period == offset else "mamba" for i in range(n)]
    if not isinstance(blocks, list) or len(blocks) != n or set(blocks) - {"attention", "mamba"}:
        raise ModelConfigError(f"{name}: layers_block_type must list {n} of 'attention' / 'mamba'")
    experts = cfg.get("layers_num_experts")
    if experts is None:
        period, offset = (
            _period(cfg, get, name, "expert_layer_period", 2),
            get(cfg, "expert_layer_offset", name, 1),
        )
        e = get(cfg, "num_experts", name, 1)
        experts = [e if i % period == offset else 1 for i in range(n)]
    if not isinstance(experts, list) or len(experts) != n or not all(_count(e) for e in experts):
        raise ModelConfigError(f"{name}: layers_num_experts must list {n} positive integers")
    built_as(cfg, name, {"mamba_conv_bias": True, "mamba_proj_bias": False}, "the Mamba-1 mixer")
    rank = cfg.get("mamba_dt_rank", "auto")
    rank = math.ceil(d / 16) if rank == "auto" else get(cfg, "mamba_dt_rank", name)
    common.update(
        ssm_state_size=get(cfg, "mamba_d_state", name, 16),
        ssm_inner_size=get(cfg, "mamba_expand", name, 2) * d,
        ssm_dt_rank=rank,
        ssm_conv_kernel=get(cfg, "mamba_d_conv", name, 4),
        ssm_inner_norms=True,  # JambaMambaMixer normalises delta, B and C
        rope=False,  # Jamba's attention layers use no positional encoding (Lieber et al. 2024)
    )
    moe = max(experts) > 1
    if moe:
        common.update(
            num_experts=max(experts),
            num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
            moe_intermediate_size=common["intermediate_size"],
        )
    common["layer_types"] = tuple(
        LayerSpec("mamba" if b == "mamba" else "gqa", "moe" if (moe and e > 1) else "dense")
        for b, e in zip(blocks, experts, strict=True)
    )


#: model_type -> mapper of its family fields
FAMILIES: dict[str, Callable[[Mapping[str, Any], dict[str, Any], Getter, str], None]] = {
    "gpt_oss": _gpt_oss,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "gemma3": _gemma3,
    "gemma3_text": _gemma3,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "mamba2": _mamba2,
    "nemotron_h": _nemotron_h,
    "jamba": _jamba,
}


# ------------------------------------------------------------------ Llama-like decoders and the rest
# Families below differ from Llama in norms, biases, heads or field names; each mapper states what it
# sets, and what the graph builds differently from the checkpoint (always the same weights and FLOPs).


def _sliding_everywhere(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Every layer attends a ``sliding_window`` (Phi-3-mini-4k's 2047, StarCoder2's 4096), when the config
    states one shorter than the context; otherwise full attention."""
    w = get(cfg, "sliding_window", name, None)
    limit = common.get("max_context")
    if w is not None and (limit is None or w < limit):
        n = pattern_layers(common, name)
        common.update(sliding_window=w, layer_types=tuple(LayerSpec("sliding", "dense") for _ in range(n)))


def _gpt2_style(common: dict[str, Any], bias: bool) -> None:
    """LayerNorms with bias, a plain GELU MLP and ``bias`` on every linear (Phi-2, Falcon, StarCoder2)."""
    common.update(norm="layernorm", mlp="gelu", qkv_bias=bias, o_bias=bias, mlp_bias=bias)


def _phi3(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Phi-3 / Phi-4 (``model_type: phi3``): Llama with fused ``qkv_proj`` and ``gate_up_proj`` (the same
    weights), no biases, and a ``sliding_window`` on every layer where it is shorter than the context."""
    common["qkv_bias"] = False
    _sliding_everywhere(cfg, common, get, name)


def _phi(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Phi-1 / 1.5 / 2: a parallel block (one LayerNorm with bias feeds attention and the MLP), q/k/v and
    ``dense`` biases, a plain GELU MLP (``fc1``/``fc2``) with biases, a biased lm_head. Rope covers
    ``partial_rotary_factor`` of each head (charged over the whole head: a few vector FLOPs)."""
    if bool_field(cfg, "qk_layernorm", name, False):
        raise ModelConfigError(
            f"{name}: qk_layernorm (per-head LayerNorms with bias on q and k) has no layer spec; "
            "set qk_layernorm false or describe the model as a ModelConfig with qk_norm"
        )
    _gpt2_style(common, True)
    common.update(parallel_block=True, lm_head_bias=True)


def _falcon_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
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


def _falcon(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Falcon: LayerNorm with bias, a plain GELU MLP, ``bias`` on every linear. Falcon-7B's parallel
    block has one ``input_layernorm``; ``new_decoder_architecture`` (40B, 180B) has two norms
    (``ln_attn``, ``ln_mlp``) in parallel, built as a sequential layer (the same weights, FLOPs and
    bytes: the MLP reads ``x`` rather than ``x + attn``). ALiBi (``alibi``) replaces rope: its per-score
    bias add is not charged."""
    two_norms = bool_field(cfg, "new_decoder_architecture", name, False) and (
        get(cfg, "num_ln_in_parallel_attn", name, None) != 1
    )
    _gpt2_style(common, bool_field(cfg, "bias", name, False))
    common.update(
        parallel_block=bool_field(cfg, "parallel_attn", name, True) and not two_norms,
        rope=not bool_field(cfg, "alibi", name, False),
    )


def _gemma_like(
    cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str, *, period: int, qk_norm: bool
) -> None:
    n = pattern_layers(common, name)
    mixers = _layer_types(cfg, name, n, {"sliding_attention": "sliding", "full_attention": "gqa"})
    if mixers is None:
        full = _nth(n, _period(cfg, get, name, "sliding_window_pattern", period))
        mixers = ["gqa" if f else "sliding" for f in full]
    common.update(
        mlp="geglu",
        qk_norm=qk_norm,
        sandwich_norm=True,  # post_attention_layernorm and post_feedforward_layernorm
        tie_word_embeddings=bool_field(cfg, "tie_word_embeddings", name, True),
        sliding_window=get(cfg, "sliding_window", name),
        layer_types=tuple(mixers),
    )


def _gemma2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Gemma 2: local (``sliding_window``) and global layers alternating, local first; four norms a
    layer; GeGLU; tied embeddings; no q/k norms. Its logit soft-capping (``cap * tanh(s / cap)`` on
    every attention score, ``attn_logit_softcapping``, and on the logits, ``final_logit_softcapping``)
    is not charged: three element-wise ops per score, in registers inside a fused attention kernel,
    and ``3V`` per logit row against the lm_head's ``2dV``."""
    _gemma_like(cfg, common, get, name, period=2, qk_norm=False)


def _olmo2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """OLMo 2: norms after the attention and the MLP instead of before (``post_attention_layernorm``,
    ``post_feedforward_layernorm``: two a layer, built in the pre-norm places, the same cost) and
    q/k RMSNorms over all heads (``H*h`` and ``H_kv*h`` weights)."""
    common.update(qk_norm=True, qk_norm_all_heads=True)


def _granite(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Granite 3: Llama with scalar multipliers (``embedding_multiplier``, ``residual_multiplier``,
    ``attention_multiplier``, ``logits_scaling``: one multiply per element, not charged) and biases on
    all four attention projections with ``attention_bias`` and on the MLP with ``mlp_bias``."""
    common.update(o_bias=common["qkv_bias"], mlp_bias=bool_field(cfg, "mlp_bias", name, False))


def _cohere(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
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


def _glm(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4 (``glm``, the ``-hf`` checkpoints): Llama with fused ``gate_up_proj`` (the same weights) and
    q/k/v bias (``attention_bias``, read with the common fields); rope on half of each head."""


def _glm4(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4-0414 (``glm4``): GLM with norms after the attention and the MLP as well
    (``post_self_attn_layernorm``, ``post_mlp_layernorm``)."""
    common["sandwich_norm"] = True


def _starcoder2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """StarCoder2: LayerNorm with bias, ``use_bias`` on every linear, a plain GELU MLP (``c_fc``,
    ``c_proj``), a ``sliding_window`` on every layer, tied embeddings (``Starcoder2Config``)."""
    _gpt2_style(common, bool_field(cfg, "use_bias", name, True))
    common["tie_word_embeddings"] = bool_field(cfg, "tie_word_embeddings", name, True)
    _sliding_everywhere(cfg, common, get, name)


def _internlm2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """InternLM2 / 2.5 (remote code): Llama with a fused ``wqkv`` (the same weights) and ``bias`` on
    ``wqkv`` and ``wo``."""
    bias = bool_field(cfg, "bias", name, False)
    common.update(qkv_bias=bias, o_bias=bias)


def _exaone_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """EXAONE 3 / 3.5 name the layer count ``num_layers`` and the activation ``activation_function``
    (``ExaoneConfig.attribute_map``)."""
    over = {}
    if "num_hidden_layers" not in cfg and "num_layers" in cfg:
        over["num_hidden_layers"] = cfg["num_layers"]
    return layered(cfg, defaults={"hidden_act": cfg.get("activation_function", "silu")}, overrides=over)


def _exaone(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """EXAONE 3 / 3.5: Llama (``ln_1``/``ln_2`` RMSNorms, ``c_fc_0``/``c_fc_1``/``c_proj`` SwiGLU)."""
    common["o_bias"] = common["qkv_bias"]


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


def _glm4_moe(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """GLM-4.5 / 4.6 (``glm4_moe``): GQA with q/k/v bias (``attention_bias``) and per-head q/k norms
    (``use_qk_norm``), dense MLPs in the first ``first_k_dense_replace`` layers, then routed experts
    plus ``n_shared_experts`` shared ones under a sigmoid router with a correction bias; its
    ``num_nextn_predict_layers`` MTP layer is kept only with ``mtp=True`` (as DeepSeek-V3's)."""
    moe_fields(cfg, common, get, name)
    common["qk_norm"] = bool_field(cfg, "use_qk_norm", name, False)


def _minimax_m2(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """MiniMax-M2: full GQA attention in every layer (``attn_type_list`` all 1; a 0, MiniMax-01's
    lightning linear attention, is refused) with q/k RMSNorms over all heads (``qk_norm_type:
    per_layer``), every layer MoE: ``num_local_experts`` experts of width ``intermediate_size``, no
    shared expert, a sigmoid router with a correction bias (``use_routing_bias``). Its MTP modules
    (``num_mtp_modules``) are not built, as ``transformers`` builds none."""
    n = pattern_layers(common, name)
    kinds = cfg.get("attn_type_list")
    if kinds is not None and (not isinstance(kinds, list) or set(kinds) - {1} or len(kinds) != n):
        raise ModelConfigError(
            f"{name}: attn_type_list must list {n} ones (full attention); a 0 is MiniMax's lightning "
            "attention, a linear-attention mixer the layer specs do not have yet (a mixer plugin with its "
            "state size and per-token cost would describe it)"
        )
    if get(cfg, "shared_intermediate_size", name, 0):
        raise ModelConfigError(f"{name}: shared_intermediate_size > 0 (a shared expert) is not mapped")
    qk = bool_field(cfg, "use_qk_norm", name, True)
    kind = cfg.get("qk_norm_type", "per_layer")
    if qk and kind not in ("per_layer", "per_head"):
        raise ModelConfigError(f"{name}: qk_norm_type {kind!r} not allowed; allowed: per_layer, per_head")
    common.update(
        num_experts=get(cfg, "num_local_experts", name),
        num_experts_per_tok=get(cfg, "num_experts_per_tok", name),
        moe_intermediate_size=common["intermediate_size"],
        router_bias=bool_field(cfg, "use_routing_bias", name, True),
        qk_norm=qk,
        qk_norm_all_heads=qk and kind == "per_layer",
    )


def _qwen3_5(cfg: Mapping[str, Any], common: dict[str, Any], get: Getter, name: str) -> None:
    """Qwen3.5 (``qwen3_5_moe``, and ``qwen3_5`` dense; the text model of the multimodal checkpoint):
    Qwen3-Next's layers (gated delta net in three of four, gated attention in the fourth), its
    ``in_proj_qkv``/``in_proj_z``/``in_proj_b``/``in_proj_a`` split of the same weights as
    ``in_proj_qkvz``/``in_proj_ba``; MoE with a gated shared expert, or dense MLPs in the dense models."""
    if cfg.get("num_experts") is not None:
        _qwen3_next(cfg, common, get, name)
        return
    n = pattern_layers(common, name)
    mixers = _layer_types(cfg, name, n, {"linear_attention": "linear_attention", "full_attention": "gqa"})
    if mixers is None:
        full = _nth(n, _period(cfg, get, name, "full_attention_interval", 4))
        mixers = ["gqa" if f else "linear_attention" for f in full]
    common.update(
        qk_norm=True,
        attn_output_gate=True,
        linear_num_key_heads=get(cfg, "linear_num_key_heads", name),
        linear_num_value_heads=get(cfg, "linear_num_value_heads", name),
        linear_key_head_dim=get(cfg, "linear_key_head_dim", name),
        linear_value_head_dim=get(cfg, "linear_value_head_dim", name),
        linear_conv_kernel=get(cfg, "linear_conv_kernel_dim", name, 4),
        layer_types=tuple(LayerSpec(m, "dense") for m in mixers),
    )


FAMILIES.update(
    {
        "phi3": _phi3,
        "phi": _phi,
        "falcon": _falcon,
        "gemma2": _gemma2,
        "olmo2": _olmo2,
        "granite": _granite,
        "cohere": _cohere,
        "glm": _glm,
        "glm4": _glm4,
        "starcoder2": _starcoder2,
        "internlm2": _internlm2,
        "exaone": _exaone,
        "glm4_moe": _glm4_moe,
        "minimax_m2": _minimax_m2,
        "qwen3_5": _qwen3_5,
        "qwen3_5_text": _qwen3_5,
        "qwen3_5_moe": _qwen3_5,
        "qwen3_5_moe_text": _qwen3_5,
    }
)


def _qwen3_5_fields(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """Qwen3.5-MoE states no ``intermediate_size``: every layer is MoE, so the (unused) dense width is
    taken as the experts'."""
    if "intermediate_size" in cfg or cfg.get("num_experts") is None:
        return cfg
    return layered(cfg, overrides={"intermediate_size": int_field(cfg, "moe_intermediate_size", name)})


#: model_type -> its field names as the common ones, applied before the common fields are read
FIELD_ALIASES: dict[str, Callable[[Mapping[str, Any], str], Mapping[str, Any]]] = {
    "falcon": _falcon_fields,
    "exaone": _exaone_fields,
    "qwen3_5_moe": _qwen3_5_fields,
    "qwen3_5_moe_text": _qwen3_5_fields,
}

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

#: model_type -> what its mapping builds differently from the checkpoint (the same weights and FLOPs
#: unless said), from the mappers' docstrings above
APPROXIMATED_FAMILIES: dict[str, tuple[str, ...]] = {
    "cohere": (
        "the LayerNorm without bias is counted as an RMSNorm (the same d weights; the mean "
        "subtraction's d FLOPs per token not charged)",
    ),
    "olmo2": ("the post-norms are built in the pre-norm places (the same cost)",),
    "falcon": (
        "with new_decoder_architecture, the two parallel norms are built as a sequential layer "
        "(the same weights, FLOPs and bytes)",
    ),
}
