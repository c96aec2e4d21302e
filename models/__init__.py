"""Model configurations: the ModelConfig type, a Hugging Face loader, a catalog, and one
resolver (:func:`resolve_model`) from what a user names to a ModelConfig.

Names load on first use (PEP 562), so locating a shipped config (``models/configs``) costs
no sympy import.
"""

from __future__ import annotations

from costmodel.lazy import lazy_exports

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "ModelConfig": "config",
    "ModelConfigError": "config",
    "AttentionSpec": "config",
    "MLASpec": "config",
    "DSASpec": "config",
    "MoESpec": "config",
    "SSMSpec": "config",
    "LinearAttentionSpec": "config",
    "ConfigSpec": "specs",
    "SpecMap": "specs",
    "register_spec": "specs",
    "spec_classes": "specs",
    "load_hf_config": "resolver",
    "config_from_hf_dict": "hf",
    "SUPPORTED_MODEL_TYPES": "hf",
    "NEW_ARCHITECTURES": "hf_families",
    "MODELS": "catalog",
    "CatalogModel": "catalog",
    "UnknownModelError": "catalog",
    "get_model": "catalog",
    "resolve_model": "resolver",
    "inspect_config": "check",
    "ConfigReport": "check",
    "HubIdError": "resolver",
    "model_names": "catalog",
    "ParamCounts": "params",
    "param_counts": "params",
    "param_bytes": "params",
    "attention_params": "params",
    "mlp_params": "params",
    "moe_params": "params",
    "LayerSpec": "layers",
    "LayerGroup": "layers",
    "layer_groups": "layers",
    "Mixer": "mixers",
    "register_mixer": "mixers",
    "get_mixer": "mixers",
    "mixer_names": "mixers",
    "MLP": "mixers",
    "register_mlp": "mixers",
    "get_mlp": "mixers",
    "mlp_names": "mixers",
    "ContextLimit": "context",
    "ContextLimitError": "context",
    "context_limit": "context",
    "check_context": "context",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
