"""One model resolver: what a user names becomes a :class:`~models.config.ModelConfig`.

:func:`resolve_model` accepts

* a catalog name (``llama-3.1-8b``, any case: :data:`models.catalog.MODELS`),
* a path to a Hugging Face ``config.json`` (a ``str`` ending in ``.json`` or any
  :class:`~pathlib.Path`), or the folder holding one,
* a parsed ``config.json`` (a mapping), or
* a :class:`ModelConfig` (returned as it is).

The command line and the library (:func:`models.get_model`, every ``graphs`` function that
takes a model) both come here, so a name that works in one works in the other.

A file is read once per process: its bytes are kept under (absolute path, device, inode,
modification time in ns, size), so an edited file is read again and an unchanged one never
is; the light readers (:func:`config_data`, :func:`config_identity`) that the command line
uses before it imports sympy share those bytes with :func:`resolve_model`. Both caches are
bounded (:data:`MAX_CACHED` entries, the oldest dropped first); the configs they hold are
frozen, so sharing them is safe.

No network access: ``org/name`` that is not an existing path is taken for a Hugging Face hub
id and refused with what to do instead (:class:`HubIdError`). This module imports no sympy;
building a ModelConfig (:mod:`models.hf`) does, on first use.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError
from costmodel.safefile import read_user_file, unique_keys

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
    "load_config_file",
    "resolve_model",
]

#: the largest config.json read (bytes): real ones are a few kB, their largest lists ~100 kB
MAX_CONFIG_BYTES = 16 * 2**20
#: the longest model name or path accepted (characters)
MAX_NAME = 500
#: entries each in-process cache keeps (files read, configs built)
MAX_CACHED = 64

_CONFIGS_DIR = Path(__file__).resolve().parent / "configs"
#: ``org/name`` as the Hugging Face hub spells repository ids
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class UnknownModelError(CostModelError):
    """A model name is not in the catalog."""


class HubIdError(UnknownModelError):
    """A Hugging Face hub id where a catalog name or a local path was expected."""


_FileKey = tuple[str, int, int, int, int]
_files: OrderedDict[_FileKey, bytes] = OrderedDict()
_configs: OrderedDict[tuple[Any, ...], ModelConfig] = OrderedDict()


_lock = threading.Lock()  # the caches are shared by threads (a search's, a simulation's)


def _recall(cache: OrderedDict[Any, Any], key: Any) -> Any:
    """The cached value of ``key`` (now the newest), or None."""
    with _lock:
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
        return value


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> Any:
    """Keep ``value`` under ``key``, dropping the oldest entries past :data:`MAX_CACHED`."""
    with _lock:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > MAX_CACHED:
            cache.popitem(last=False)
    return value


def clear_cache() -> None:
    """Forget every file read and config built (tests; a long-lived process that wants to)."""
    with _lock:
        _files.clear()
        _configs.clear()
        _catalog_configs.clear()


def _config_error() -> type[CostModelError]:
    from .config import ModelConfigError  # the error type the loader always raised

    return ModelConfigError


def _read(path: Path) -> tuple[_FileKey, bytes]:
    """The bytes of a config file and the key they are cached under (module doc)."""
    name = str(path)[:200]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _config_error()(f"config file {name!r} does not exist") from None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise _config_error()(f"config file {name!r} cannot be read: {why}") from None
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    raw = _recall(_files, key)
    if raw is not None:
        return key, raw
    try:
        raw = read_user_file(path, what="config file", max_bytes=MAX_CONFIG_BYTES)
    except CostModelError as exc:  # the loader's error type, imported only when there is one
        raise _config_error()(str(exc)) from None
    return key, _remember(_files, key, raw)


def _parse(raw: bytes, path: Path) -> dict[str, Any]:
    """A config file's JSON object (one-line errors naming the file)."""
    error = _config_error
    name = str(path)[:200]
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=unique_keys())
    except CostModelError as exc:  # a key given twice
        raise error()(f"config file {name!r}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error()(f"config file {name!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise error()(f"config file {name!r} is nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (4300)
        raise error()(f"config file {name!r} holds a value out of range: {exc}") from None
    if not isinstance(data, dict):
        raise error()(f"config file {name!r}: top level must be a JSON object")
    return data


def _file_of(path: Path) -> Path:
    """``path``, or the ``config.json`` inside it when it is a folder."""
    try:
        return path / "config.json" if path.is_dir() else path
    except (OSError, ValueError) as exc:
        raise _config_error()(f"config file {str(path)[:200]!r} cannot be read: {exc}") from None


def _is_dir(name: str) -> bool:
    """Whether ``name`` is a folder (one ``stat``, no ``Path`` built: a catalog name is checked
    on every call, since a folder of that name in the working directory takes precedence)."""
    try:
        return os.path.isdir(name)
    except (OSError, ValueError):  # not a usable path (e.g. a component longer than the file system allows)
        return False


def _exists(name: str) -> bool:
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return False


#: catalog name -> what :func:`_source` returns for it (built once per process)
_catalog_paths: dict[str, tuple[Path, str, str, bool]] = {}
#: (catalog name, name given, assumed family) -> its config, resolved once per process
_catalog_configs: dict[tuple[str, str | None, str | None], ModelConfig] = {}


def _source(model: str | os.PathLike[str]) -> tuple[Path, str, str, bool]:
    """Where a named model's config lives: (file, model name, source, mtp). Catalog names are
    case-insensitive; a ``.json`` name or a folder is a path; anything else is an error."""
    from .catalog import MODELS

    if isinstance(model, os.PathLike):
        path = _file_of(Path(model))
        return path, path.stem, str(path), False
    name = str(model)
    if len(name) > MAX_NAME:
        raise CostModelError(f"model {name[:40]!r}...: a name or path longer than {MAX_NAME} characters")
    if name.endswith(".json") or _is_dir(name):
        path = _file_of(Path(name))
        return path, path.stem, str(path), False
    key = name.lower()
    found = _catalog_paths.get(key)
    if found is not None:
        return found
    entry = MODELS.get(key)
    if entry is not None:
        found = (_CONFIGS_DIR / f"{entry.config or key}.json", key, entry.source, entry.mtp)
        _catalog_paths[key] = found  # a catalog entry's file never moves: its Path built once
        return found
    if _HUB_ID.fullmatch(name) and not _exists(name):
        raise HubIdError(
            f"model {name!r} looks like a Hugging Face hub id; costmodel reads no network: "
            "download its config.json and pass the path"
        )
    raise UnknownModelError(
        f"unknown model {name!r}; catalog models: {', '.join(MODELS)} (or a config.json path or folder)"
    )


def config_identity(model: str) -> tuple[str, bytes]:
    """What a cache key of ``model``'s results needs: the name the config gets, with its mtp
    flag, and the file's bytes (read once per process). Light: no sympy. Errors as
    :func:`resolve_model` raises them."""
    path, name, _, mtp = _source(model)
    return f"{name}{' mtp' if mtp else ''}", _read(path)[1]


def config_data(model: str) -> dict[str, Any]:
    """``model``'s parsed ``config.json`` (a fresh dict each call; the file read once per
    process). Light: no sympy. Errors as :func:`resolve_model` raises them."""
    path = _source(model)[0]
    return _parse(_read(path)[1], path)


def load_config_file(path: str | os.PathLike[str], name: str | None = None) -> ModelConfig:
    """The ModelConfig of a local ``config.json`` (or the folder holding one), named ``name``
    (default the file's stem); built once per file version and name."""
    file = _file_of(Path(path))
    return _build(file, name or file.stem, str(file), False)


#: file stems that name no model (``config.json`` itself): such a config is named from its contents
_GENERIC_STEMS = frozenset({"config", "model", "params"})


def config_name(data: Mapping[str, Any], path: Path) -> str:
    """A name for a config read from a file called ``config.json``: the last part of its
    ``_name_or_path`` (what ``save_pretrained`` records, ``meta-llama/Llama-3.1-8B`` ->
    ``Llama-3.1-8B``), else the folder holding it, else its first ``architectures`` entry, else
    the file's stem.

    >>> config_name({"_name_or_path": "Qwen/Qwen3-8B"}, Path("x/config.json"))
    'Qwen3-8B'
    >>> config_name({}, Path("downloads/acme-7b/config.json")), config_name({"architectures": ["LlamaForCausalLM"]}, Path("config.json"))
    ('acme-7b', 'LlamaForCausalLM')
    """
    given = data.get("_name_or_path")
    if isinstance(given, str) and given.strip().rstrip("/"):
        return given.strip().rstrip("/").rsplit("/", 1)[-1][:MAX_NAME]
    folder = path.parent.name
    if folder and folder not in (".", ".."):
        return folder[:MAX_NAME]
    arch = data.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0]:
        return arch[0][:MAX_NAME]
    return path.stem


def _build(path: Path, name: str, source: str, mtp: bool, assume_family: str | None = None) -> ModelConfig:
    key, raw = _read(path)
    memo = (key, name, source, mtp, assume_family)
    cfg = _recall(_configs, memo)
    if cfg is None:
        from .hf import config_from_hf_dict

        data = _parse(raw, path)
        if name == path.stem and path.stem.lower() in _GENERIC_STEMS:
            name = config_name(data, path)  # "config" names nothing: the checkpoint's own name
        built = config_from_hf_dict(data, name, source=source, mtp=mtp, assume_family=assume_family)
        cfg = _remember(_configs, memo, built)
    return cfg


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

    >>> resolve_model("TINY") is resolve_model("tiny")
    True
    >>> resolve_model("meta-llama/Llama-3.1-8B")
    Traceback (most recent call last):
    ...
    models.resolver.HubIdError: model 'meta-llama/Llama-3.1-8B' looks like a Hugging Face hub id; costmodel reads no network: download its config.json and pass the path
    """
    from .config import ModelConfig

    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, Mapping):
        from .hf import config_from_hf_dict

        return config_from_hf_dict(model, name or "model", assume_family=assume_family)
    if not isinstance(model, str | os.PathLike):
        raise CostModelError(
            f"model {type(model).__name__} {str(model)[:40]!r}: expected a catalog name, a config.json "
            "path or folder, a parsed config.json (dict) or a ModelConfig"
        )
    if isinstance(model, str):  # a catalog name seen before: one stat (a folder of that name wins)
        memo = (model.lower(), name, assume_family)
        cfg = _catalog_configs.get(memo)
        if cfg is not None and not _is_dir(model):
            return cfg
    path, default, source, mtp = _source(model)
    cfg = _build(path, name or default, source, mtp, assume_family)
    if isinstance(model, str) and model.lower() in _catalog_paths and not _is_dir(model):
        # a catalog entry: its file ships with the package and is not edited under a running
        # process, so the config is kept by name (clear_cache forgets it)
        _catalog_configs[(model.lower(), name, assume_family)] = cfg
    return cfg
