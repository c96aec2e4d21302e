"""Model configurations: the ModelConfig type, a Hugging Face loader, a catalog."""

from .catalog import MODELS, CatalogModel, UnknownModelError, get_model, model_names
from .config import ModelConfig, ModelConfigError
from .hf import SUPPORTED_MODEL_TYPES, config_from_hf_dict, load_hf_config
from .params import ParamCounts, attention_params, mlp_params, moe_params, param_counts

__all__ = [
    "ModelConfig",
    "ModelConfigError",
    "load_hf_config",
    "config_from_hf_dict",
    "SUPPORTED_MODEL_TYPES",
    "MODELS",
    "CatalogModel",
    "UnknownModelError",
    "get_model",
    "model_names",
    "ParamCounts",
    "param_counts",
    "attention_params",
    "mlp_params",
    "moe_params",
]
