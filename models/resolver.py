"""One model resolver: what a user names becomes a :class:`~models.config.ModelConfig`.

:func:`resolve_model` accepts

* a catalog name (``llama-3.1-8b``, any case: :data:`models.catalog.MODELS`),
* a path to a Hugging Face ``config.json`` (a ``str`` ending in ``.json`` or any
  :class:`~pathlib.Path`), or the folder holding one,
* a layer file (:mod:`models.layer_file`: a JSON object with ``layer_types`` and no
  ``model_type``, by path or parsed), or
* a parsed ``config.json`` (a mapping), or
* a :class:`ModelConfig` (returned as it is).

The command line and the library (:func:`models.get_model`, every ``graphs`` function that
takes a model) both come here, so a name that works in one works in the other.

Files are located, read and parsed by :mod:`models.sources` (once per file version; the light
readers :func:`config_data` and :func:`config_identity` the command line uses before it
imports sympy live there and are re-exported here); the configs built from them are kept here,
bounded likewise (:data:`MAX_CACHED` entries, the oldest dropped first). The configs are
frozen, so sharing them is safe.

No network access: ``org/name`` that is not an existing path is taken for a Hugging Face hub
id and refused with what to do instead (:class:`HubIdError`). This module imports no sympy;
building a ModelConfig (:mod:`models.hf`) does, on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError

from .sources import (
    FILES,
    GENERIC_STEMS,
    MAX_CACHED,
    MAX_CONFIG_BYTES,
    MAX_NAME,
    BoundedCache,
    HubIdError,
    UnknownModelError,
    config_data,
    config_file,
    config_identity,
    config_name,
    is_catalog_name,
    locate,
    parse_config,
    read_config,
)

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = [
    "MAX_CACHED",
    "MAX_CONFIG_BYTES",
    "MAX_NAME",
    "HubIdError",
    "UnknownModelError",
    "clear_cache",
    "config_data",
    "config_identity",
    "config_name",
    "load_config_file",
    "load_hf_config",
    "resolve_model",
]

#: configs built, by (file version, name, source, mtp, assumed family)
_configs: BoundedCache[tuple[Any, ...], ModelConfig] = BoundedCache()
#: (catalog name, name given, assumed family, working directory) -> its config, resolved once
#: per process and working directory (issue 44 item 6: no stat per call)
_catalog_configs: dict[tuple[str, str | None, str | None, str], ModelConfig] = {}


def clear_cache() -> None:
    """Forget every file read and config built (tests; a long-lived process that wants to)."""
    FILES.clear()
    _configs.clear()
    _catalog_configs.clear()


def load_hf_config(path: str | Path, name: str | None = None) -> ModelConfig:
    """Read a local ``config.json`` (or the folder holding one) and map it (clear errors for
    bad files); read and built once per file version (:func:`load_config_file`).

    Parameters
    ----------
    path : str or Path
        A ``config.json`` file, or the folder holding one.
    name : str, optional
        The model's name; None: the file's stem (the checkpoint's own name for ``config.json``).

    Returns
    -------
    ModelConfig
        The mapped config.

    Raises
    ------
    CostModelError
        When ``path`` is not a path (None was a bare TypeError), or the file cannot be read or
        mapped (:class:`~models.config.ModelConfigError`).
    """
    if not isinstance(path, str | os.PathLike):
        raise CostModelError(
            f"path must be a config.json's path or its folder (str or Path), got {type(path).__name__} {path!r:.40}"
        )
    return load_config_file(path, name)


def load_config_file(path: str | os.PathLike[str], name: str | None = None) -> ModelConfig:
    """The ModelConfig of a local ``config.json`` (or the folder holding one), named ``name``
    (default the file's stem); built once per file version and name."""
    file = config_file(Path(path))
    return _build(file, name or file.stem, str(file), False)


def _build(path: Path, name: str, source: str, mtp: bool, assume_family: str | None = None) -> ModelConfig:
    key, raw = read_config(path)
    memo = (key, name, source, mtp, assume_family)
    cfg = _configs.recall(memo)
    if cfg is None:
        data = parse_config(raw, path)
        if name == path.stem and path.stem.lower() in GENERIC_STEMS:
            name = config_name(data, path)  # "config" names nothing: the checkpoint's own name
        built = _from_data(data, name, source, mtp, assume_family)
        cfg = _configs.remember(memo, built)
    return cfg


def _from_data(
    data: Mapping[str, Any], name: str, source: str, mtp: bool, assume_family: str | None
) -> ModelConfig:
    """A parsed file's ModelConfig: a layer file (:mod:`models.layer_file`: ``layer_types`` and no
    ``model_type``) or a Hugging Face ``config.json`` (:func:`models.hf.config_from_hf_dict`)."""
    from .layer_file import config_from_layer_file, is_layer_file

    if is_layer_file(data):
        if assume_family is not None:
            raise CostModelError(
                f"{name}: --assume-family ({assume_family}) reads a config.json of an unknown model_type; "
                "a layer file names its mixers itself"
            )
        return config_from_layer_file(data, name, source)
    from .hf import config_from_hf_dict

    return config_from_hf_dict(data, name, source=source, mtp=mtp, assume_family=assume_family)


def resolve_model(
    model: str | os.PathLike[str] | Mapping[str, Any] | ModelConfig,
    name: str | None = None,
    *,
    assume_family: str | None = None,
) -> ModelConfig:
    """``model`` as a :class:`ModelConfig`: a catalog name, a ``config.json`` path or folder, a
    parsed ``config.json`` (named ``name``, default ``"model"``) or a
    ModelConfig (module doc). A hub id (``org/name``, not a path) raises :class:`HubIdError`,
    any other unknown name :class:`UnknownModelError`, a bad file ``ModelConfigError``.
    ``assume_family`` reads a config of an unknown ``model_type`` as that family when its fields
    fit (:func:`models.hf.config_from_hf_dict`).

    Parameters
    ----------
    model : str, os.PathLike, Mapping or ModelConfig
        A catalog name (case-insensitive), a ``config.json`` path or folder, a parsed
        ``config.json``, or a ModelConfig (returned as it is).
    name : str, optional
        The model's name for a parsed dict (default ``"model"``) or a file (default its stem).
    assume_family : str, optional
        A family (``llama``, ``qwen2`` ...) to read an unknown ``model_type`` as; None: refused.

    Returns
    -------
    ModelConfig
        The model; a config that states no ``torch_dtype`` is read as bf16, said once
        (:func:`models.quantization.assumed_float_note`).

    >>> resolve_model("TINY") is resolve_model("tiny")
    True
    >>> resolve_model("meta-llama/Llama-3.1-8B")
    Traceback (most recent call last):
    ...
    models.sources.HubIdError: model 'meta-llama/Llama-3.1-8B' looks like a Hugging Face hub id; costmodel reads no network: download its config.json and pass the path
    """
    if type(model) is str:  # a catalog name resolved before in this working directory: no stat
        cwd = _cwd()
        cfg = _catalog_configs.get((model.lower(), name, assume_family, cwd)) if cwd else None
        if cfg is not None:
            return cfg
    from .config import ModelConfig

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, Mapping):
        return _from_data(model, name or "model", "", False, assume_family)
    if not isinstance(model, str | os.PathLike):
        raise CostModelError(
            f"model {type(model).__name__} {str(model)[:40]!r}: expected a catalog name, a config.json "
            "path or folder, a parsed config.json (dict) or a ModelConfig"
        )
    path, default, source, mtp = locate(model)
    cfg = _build(path, name or default, source, mtp, assume_family)
    if isinstance(model, str) and is_catalog_name(model) and (cwd := _cwd()):
        # a catalog entry: its file ships with the package and is not edited under a running
        # process, so the config is kept by name and working directory, where no folder of that
        # name was found (one made there later is not seen until clear_cache)
        _catalog_configs[(model.lower(), name, assume_family, cwd)] = cfg
    return cfg


def _cwd() -> str | None:
    """The working directory (a folder named like a catalog model there takes precedence), or
    None when it is gone."""
    try:
        return os.getcwd()
    except OSError:
        return None
