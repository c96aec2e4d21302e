"""Catalog of real models: their ``config.json`` shipped as data, with sources.

Each entry (:mod:`models.shipped`, the table) is the Hugging Face configuration of the model
(the fields that shape it), loaded through :func:`models.resolver.resolve_model`, and the
published parameter figures it is checked against. Light: the table imports no sympy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .resolver import UnknownModelError, resolve_model
from .shipped import MODELS, CatalogModel, model_names

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = ["CatalogModel", "MODELS", "get_model", "model_names", "UnknownModelError"]


def get_model(name: str | os.PathLike[str] | Mapping[str, Any] | ModelConfig) -> ModelConfig:
    """The model ``name`` as a ModelConfig: a catalog name (case-insensitive), a config.json
    path or folder, a parsed config.json or a ModelConfig (:func:`models.resolver.resolve_model`,
    which the command line uses too).

    Parameters
    ----------
    name : str, os.PathLike, Mapping or ModelConfig
        A catalog name (:func:`model_names`), a ``config.json`` path or folder, a parsed
        ``config.json`` (named ``"model"``) or a ModelConfig.

    Returns
    -------
    ModelConfig
        The model.

    >>> get_model("llama-3.1-8b").num_hidden_layers
    32
    """
    return resolve_model(name)
