"""Read a parsed Hugging Face ``config.json`` of a ``model_type`` the loader maps into a ModelConfig
(:func:`read_hf_dict`; :mod:`models.hf` is the public entry, :mod:`models.resolver` reads files).

Supported ``model_type`` values and their field names:

* ``llama``, ``mistral``, ``qwen2``, ``qwen3``: ``hidden_size``,
  ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``
  (default: MHA), ``head_dim`` (default ``hidden/heads``),
  ``intermediate_size``, ``vocab_size``, ``tie_word_embeddings``,
  ``attention_bias`` (Qwen2 always has q/k/v bias; Qwen3 has q/k norms);
* ``mixtral``: adds ``num_local_experts`` and ``num_experts_per_tok``, every
  layer MoE with ``intermediate_size`` experts;
* ``deepseek_v3`` (and ``deepseek_v2``): ``n_routed_experts``,
  ``n_shared_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``first_k_dense_replace``, MLA ranks ``q_lora_rank``, ``kv_lora_rank``,
  ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``; ``noaux_tc``
  routing adds a per-expert router bias. Multi-token-prediction modules
  (``num_nextn_predict_layers``) are kept only with ``mtp=True``.

* ``kimi_k2``: Kimi K2's remote-code config, DeepSeek-V3's fields and layout;
* the layer-pattern families ``gpt_oss``, ``qwen3_moe``, ``qwen3_next``,
  ``gemma3`` (and ``gemma3_text``), ``llama4`` (and ``llama4_text``), ``mamba2``,
  ``nemotron_h``, ``jamba``, and the Llama-like and newer decoders ``phi3``, ``phi``,
  ``falcon``, ``gemma2``, ``olmo2``, ``granite``, ``cohere``, ``glm``, ``glm4``,
  ``starcoder2``, ``internlm2``, ``exaone``, ``glm4_moe``, ``minimax_m2``, ``qwen3_5``
  and ``qwen3_5_moe`` (and their ``_text`` configs): one module each in :mod:`models.families`,
  registered with :func:`models.hf_families.register_family`.

A ``model_type`` whose architecture needs a part the layer specs lack
(MiniMax-01's lightning attention, Kimi Delta Attention ...) is
refused with what is missing and how to describe it
(:data:`models.hf_families.NEW_ARCHITECTURES`). The families a mixer plug-in brings
(``Mixer.hf_families``, :mod:`models.mixers`) are read by that plug-in.

Every type: ``max_position_embeddings`` and ``rope_scaling`` give the context
limit (:mod:`models.context`); ``torch_dtype`` the float dtype and
``quantization_config`` the quantised weights' (GPTQ, AWQ, FP8, compressed-tensors,
ModelOpt, MXFP4, bitsandbytes: :mod:`models.quantization`), unknown ones refused.

No network access: a parsed dict only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from costmodel.dtypes import get_dtype

from .config import ModelConfig, ModelConfigError
from .context import context_limit
from .families import MODEL_TYPES
from .fieldlog import layered
from .fields import GELU_NAMES, bool_field, choice_field
from .fields import int_field as _get
from .hf_families import (
    FAMILIES,
    FIELD_ALIASES,
    NEW_ARCHITECTURES,
    moe_fields,
    pattern_layers,
    unwrap_text_config,
)
from .layers import LayerSpec
from .mixers import hf_families
from .quantization import check_group_size, float_dtype, quantized_fields

__all__ = ["read_hf_dict", "unsupported_model_type", "MISSING_MODEL_TYPE", "SUPPORTED_MODEL_TYPES"]

SUPPORTED_MODEL_TYPES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    *MODEL_TYPES,
)
#: the DeepSeek-V3 layout under other names (Kimi K2's remote-code config is DeepseekV3Config;
#: DeepSeek-V3.2's adds the sparse-attention indexer: models.families.deepseek_v32)
_DEEPSEEK = ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32")
#: the router top-k methods of DeepSeek's modelling code (V2: greedy, group_limited_greedy; V3: noaux_tc)
_TOPK_METHODS = ("greedy", "gready", "group_limited_greedy", "noaux_tc")

#: GELU's spellings (:data:`models.fields.GELU_NAMES`): a gated MLP with one is GeGLU
_GELU = GELU_NAMES
#: SiLU's (``swish`` is its other name there): a gated MLP with one is SwiGLU
_SILU = ("silu", "swish")


#: ``hint(config, name)``: a clause for the refusal of an unknown ``model_type`` (the nearest family)
Hint = Callable[[Mapping[str, Any], str], str]


#: what a refusal says of a config with no ``model_type`` (once "model_type 'None'")
MISSING_MODEL_TYPE = (
    "the field model_type is missing (the loader maps a config by it; a layer file gives layer_types instead)"
)


def unsupported_model_type(mt: Any) -> str:
    """The clause refusing a config's ``model_type``: the value as given, or that the field is
    missing or not a string.

    >>> unsupported_model_type("gpt2")
    "model_type 'gpt2' is not supported"
    >>> unsupported_model_type(5)
    'model_type 5 is not a string naming the architecture'
    >>> unsupported_model_type(None) == MISSING_MODEL_TYPE
    True
    """
    if mt is None:
        return MISSING_MODEL_TYPE
    if not isinstance(mt, str):
        return f"model_type {str(mt)[:80]} is not a string naming the architecture"
    return f"model_type {mt[:80]!r} is not supported"


def read_hf_dict(
    cfg: Mapping[str, Any],
    name: str = "model",
    source: str = "",
    *,
    mtp: bool = False,
    hint: Hint | None = None,
) -> ModelConfig:
    """Map a parsed ``config.json`` of a ``model_type`` the loader maps onto :class:`ModelConfig`
    (module doc); :func:`models.hf.config_from_hf_dict` is the public entry (it reads unknown
    types as a family that fits, or names the nearest one).

    Parameters
    ----------
    cfg : the parsed ``config.json`` (a recording view when the caller logs the fields read)
    name : the model's name (in the config and every message)
    source : where the config came from
    mtp : keep DeepSeek's multi-token-prediction modules (``num_nextn_predict_layers``)
    hint : what the refusal of an unknown ``model_type`` adds (:mod:`models.hf`: the nearest family)

    Returns
    -------
    ModelConfig
    """
    if not isinstance(cfg, Mapping):
        raise ModelConfigError(f"{name}: config must be a JSON object")
    cfg = unwrap_text_config(cfg)
    mt = cfg.get("model_type")
    if isinstance(mt, str) and mt in NEW_ARCHITECTURES:
        raise ModelConfigError(
            f"{name}: model_type {mt!r} is not supported: {NEW_ARCHITECTURES[mt]}; a ModelConfig with "
            "layer_types of LayerSpec(mixer, mlp) describes any mix of the existing mixers"
        )
    plugins = hf_families()  # the model types mixer plug-ins bring (models.mixers)
    if not isinstance(mt, str) or (mt not in SUPPORTED_MODEL_TYPES and mt not in plugins):
        raise ModelConfigError(
            f"{name}: {unsupported_model_type(mt)}; "
            + (f"{hint(cfg, name)}; " if hint is not None else "")
            + f"supported: {', '.join((*SUPPORTED_MODEL_TYPES, *plugins))}"
        )
    if mt in FIELD_ALIASES:
        cfg = FIELD_ALIASES[mt](cfg, name)
    act_field = (
        "hidden_activation" if "hidden_act" not in cfg and "hidden_activation" in cfg else "hidden_act"
    )
    act = cfg.get(act_field, "silu")
    if not isinstance(act, str):  # a list or number once fell through to SwiGLU
        raise ModelConfigError(
            f"{name}: config field {act_field!r} must be a string naming the activation (silu, gelu ...), "
            f"got {act!r:.60}"
        )
    if act not in _SILU + _GELU:  # any other name once fell through to SwiGLU, unsaid
        raise ModelConfigError(
            f"{name}: config field {act_field!r} {act[:40]!r} is not an activation the MLP is costed "
            f"with; known: {', '.join(_SILU + _GELU)}"
        )
    if mt == "mamba2":
        # no attention and no MLP: the attention fields take the SSM heads, the MLP width d_inner
        d = _get(cfg, "hidden_size", name)
        cfg = layered(
            cfg,
            defaults={
                "num_attention_heads": _get(cfg, "num_heads", name),
                "intermediate_size": _get(cfg, "expand", name, 2) * d,
            },
        )
    heads = _get(cfg, "num_attention_heads", name)
    common: dict[str, Any] = {
        "name": name,
        "hidden_size": _get(cfg, "hidden_size", name),
        "num_hidden_layers": _get(cfg, "num_hidden_layers", name),
        "num_attention_heads": heads,
        "num_key_value_heads": _get(cfg, "num_key_value_heads", name, heads),
        "head_dim": _get(cfg, "head_dim", name, None),
        "intermediate_size": _get(cfg, "intermediate_size", name),
        "vocab_size": _get(cfg, "vocab_size", name),
        "tie_word_embeddings": bool_field(cfg, "tie_word_embeddings", name, False),
        # gated (gate_proj, up_proj, down_proj) whatever the activation, as transformers' Llama,
        # Qwen, Mistral ... MLPs are; the plain two-matrix GELU MLPs' families say so themselves
        # (hf_families.gpt2_style: Phi-2, Falcon, StarCoder2)
        "mlp": "geglu" if act in _GELU else "swiglu",
        "dtype": float_dtype(cfg, name),
        "source": source,
    }
    limit = context_limit(cfg, name)
    if limit is not None:
        common["max_context"] = limit.tokens
    if mt == "qwen2":
        common["qkv_bias"] = True
    elif mt != "mamba2":
        common["qkv_bias"] = bool_field(cfg, "attention_bias", name, False)
    if mt in ("qwen3", "qwen3_next"):
        common["qk_norm"] = True
    if mt == "mixtral":
        common.update(
            num_experts=_get(cfg, "num_local_experts", name),
            num_experts_per_tok=_get(cfg, "num_experts_per_tok", name),
            moe_intermediate_size=common["intermediate_size"],
        )
    if mt in _DEEPSEEK:
        freq = _get(cfg, "moe_layer_freq", name, 1)
        if freq < 1:
            raise ModelConfigError(f"{name}: moe_layer_freq must be >= 1, got {freq}")
        if freq != 1:  # transformers' DeepseekV2: MoE where i >= first_k_dense_replace and i % freq == 0
            fk, n = _get(cfg, "first_k_dense_replace", name, 0), pattern_layers(common, name)
            common["layer_types"] = tuple(
                LayerSpec("mla", "moe" if (i >= fk and i % freq == 0) else "dense") for i in range(n)
            )
        # DeepSeek's remote code: noaux_tc adds a router bias per expert (e_score_correction_bias);
        # greedy and group_limited_greedy (V2; "gready" is V2's default as spelt in its code) add none.
        # Any other value (5, true, "noaux-tc") was once read as "no bias", unsaid
        topk = choice_field(cfg, "topk_method", name, _TOPK_METHODS, None)
        moe_fields(cfg, common, _get, name, router_bias=topk == "noaux_tc")
        common.update(
            q_lora_rank=_get(cfg, "q_lora_rank", name, None),
            kv_lora_rank=_get(cfg, "kv_lora_rank", name),
            qk_nope_head_dim=_get(cfg, "qk_nope_head_dim", name),
            qk_rope_head_dim=_get(cfg, "qk_rope_head_dim", name),
            v_head_dim=_get(cfg, "v_head_dim", name),
        )
        common["head_dim"] = common["qk_nope_head_dim"] + common["qk_rope_head_dim"]
    if mt in FAMILIES:
        FAMILIES[mt](cfg, common, _get, name)
    elif mt in plugins:
        plugins[mt](cfg, common, _get, name)
    if mt in (*_DEEPSEEK, "glm4_moe") and mtp:
        common["mtp_layers"] = _get(cfg, "num_nextn_predict_layers", name, 0)
    base = common["dtype"]
    if base not in ("fp32", "bf16", "fp16") and get_dtype(base).bits > 16:
        common["act_dtype"] = base  # fp64 weights compute in fp64 (fp8 ones in bf16: ModelConfig)
    moe = common.get("num_experts") is not None
    common.update(quantized_fields(cfg, name, base, is_moe=moe, tied=common["tie_word_embeddings"]))
    model = ModelConfig(**common)
    check_group_size(model)
    return model
