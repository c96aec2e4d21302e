"""Catalog of real models: their ``config.json`` shipped as data, with sources.

Each entry is the Hugging Face configuration of the model (the fields that
shape it), loaded through :func:`load_hf_config`, and the published parameter
figures it is checked against.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from costmodel.errors import CostModelError

from .config import ModelConfig
from .hf import config_from_hf_dict

__all__ = ["CatalogModel", "MODELS", "get_model", "model_names", "UnknownModelError"]


class UnknownModelError(CostModelError):
    """A model name is not in the catalog."""


@dataclass(frozen=True)
class CatalogModel:
    """A catalog entry: where its config comes from and what was published."""

    name: str
    source: str
    published_total: float | None = None
    published_non_embedding: float | None = None
    published_active: float | None = None
    published_source: str = ""


_HF = "https://huggingface.co/{}/blob/main/config.json"

MODELS: dict[str, CatalogModel] = {
    m.name: m
    for m in (
        CatalogModel(
            "llama-2-7b",
            _HF.format("meta-llama/Llama-2-7b-hf"),
            6.74e9,
            published_source="Hugging Face model page parameter count (6.74B)",
        ),
        CatalogModel(
            "llama-2-13b",
            _HF.format("meta-llama/Llama-2-13b-hf"),
            13.0e9,
            published_source="Llama 2 paper (Touvron et al. 2023), 13B",
        ),
        CatalogModel(
            "llama-2-70b",
            _HF.format("meta-llama/Llama-2-70b-hf"),
            69.0e9,
            published_source="Hugging Face model page parameter count (69B)",
        ),
        CatalogModel(
            "llama-3.1-8b",
            _HF.format("meta-llama/Llama-3.1-8B"),
            8.03e9,
            published_source="Llama 3.1 model card (8.03B)",
        ),
        CatalogModel(
            "llama-3.1-70b",
            _HF.format("meta-llama/Llama-3.1-70B"),
            70.6e9,
            published_source="Llama 3.1 model card (70.6B)",
        ),
        CatalogModel(
            "llama-3.1-405b",
            _HF.format("meta-llama/Llama-3.1-405B"),
            405e9,
            published_source="Llama 3.1 model card (405B)",
        ),
        CatalogModel(
            "qwen2.5-7b",
            _HF.format("Qwen/Qwen2.5-7B"),
            7.61e9,
            6.53e9,
            published_source="Qwen2.5-7B model card: 7.61B, 6.53B non-embedding",
        ),
        CatalogModel(
            "qwen2.5-72b",
            _HF.format("Qwen/Qwen2.5-72B"),
            72.7e9,
            70.0e9,
            published_source="Qwen2.5-72B model card: 72.7B, 70.0B non-embedding",
        ),
        CatalogModel(
            "mistral-7b",
            _HF.format("mistralai/Mistral-7B-v0.3"),
            7.25e9,
            published_source="Hugging Face model page parameter count (7.25B)",
        ),
        CatalogModel(
            "mixtral-8x7b",
            _HF.format("mistralai/Mixtral-8x7B-v0.1"),
            46.7e9,
            None,
            12.9e9,
            published_source="Mistral AI, 'Mixtral of experts' (2023): 46.7B total, 12.9B active",
        ),
        CatalogModel(
            "deepseek-v3",
            _HF.format("deepseek-ai/DeepSeek-V3"),
            671e9,
            None,
            37e9,
            published_source="DeepSeek-V3 technical report (arXiv:2412.19437): 671B total, 37B "
            "activated per token (the 14B multi-token-prediction module excluded)",
        ),
        CatalogModel(
            "tiny",
            "costmodel test config (2 layers, d=64, GQA 4/2, head_dim 16; 131,072-token context so every default runs)",
        ),
    )
}


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def get_model(name: str | ModelConfig) -> ModelConfig:
    """The catalog model ``name`` as a ModelConfig (case-insensitive)."""
    if isinstance(name, ModelConfig):
        return name
    key = str(name).lower()
    if key not in MODELS:
        raise UnknownModelError(f"unknown model {name!r}; catalog models: {', '.join(MODELS)}")
    return _load(key)


@functools.cache
def _load(key: str) -> ModelConfig:
    """A shipped config, read and validated once per process (configs are frozen: sharing is safe)."""
    text = resources.files(__package__).joinpath("configs", f"{key}.json").read_text(encoding="utf-8")
    return config_from_hf_dict(json.loads(text), key, source=MODELS[key].source)
