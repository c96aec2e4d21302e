"""Config files by name: what a user names (a catalog name, a ``config.json`` path or folder)
located, read once per file version and parsed, without building a model.

The light half of the model resolver (:mod:`models.resolver` builds the ModelConfig): the
command line reads names and bytes here before it imports sympy, and the family checks
(:mod:`models.check`) read the catalog's configs here. A file's bytes are kept under (absolute
path, device, inode, modification time in ns, size), so an edited file is read again and an
unchanged one never is (:data:`FILES`, at most :data:`MAX_CACHED` entries, the oldest dropped
first). No network access: ``org/name`` that is not an existing path is taken for a Hugging
Face hub id and refused with what to do instead (:class:`HubIdError`).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from costmodel.errors import CostModelError
from costmodel.safefile import read_user_file, unique_keys

from .fields import ModelConfigError
from .shipped import MODELS

__all__ = [
    "MAX_CACHED",
    "MAX_CONFIG_BYTES",
    "MAX_NAME",
    "GENERIC_STEMS",
    "FILES",
    "BoundedCache",
    "FileKey",
    "HubIdError",
    "UnknownModelError",
    "config_data",
    "config_error",
    "config_file",
    "config_identity",
    "config_name",
    "is_catalog_name",
    "is_folder",
    "locate",
    "parse_config",
    "read_config",
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


#: a file version: (absolute path, device, inode, modification time in ns, size)
FileKey = tuple[str, int, int, int, int]
K = TypeVar("K")
V = TypeVar("V")
_lock = threading.Lock()  # the caches are shared by threads (a search's, a simulation's)


class BoundedCache(Generic[K, V]):
    """A thread-safe cache of at most :data:`MAX_CACHED` entries, the least recently used dropped first."""

    def __init__(self) -> None:
        self.entries: OrderedDict[K, V] = OrderedDict()

    def recall(self, key: K) -> V | None:
        """The cached value of ``key`` (now the newest), or None."""
        with _lock:
            value = self.entries.get(key)
            if value is not None:
                self.entries.move_to_end(key)
            return value

    def remember(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key``, dropping the oldest entries past :data:`MAX_CACHED`."""
        with _lock:
            self.entries[key] = value
            self.entries.move_to_end(key)
            while len(self.entries) > MAX_CACHED:
                self.entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with _lock:
            self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)


#: the bytes of every config file read, by file version
FILES: BoundedCache[FileKey, bytes] = BoundedCache()


def config_error() -> type[CostModelError]:
    """The error type the loader raises for a bad file (:class:`~models.fields.ModelConfigError`)."""
    return ModelConfigError


def read_config(path: Path) -> tuple[FileKey, bytes]:
    """The bytes of a config file and the key they are cached under (module doc)."""
    name = str(path)[:200]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise config_error()(f"config file {name!r} does not exist") from None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise config_error()(f"config file {name!r} cannot be read: {why}") from None
    key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    raw = FILES.recall(key)
    if raw is not None:
        return key, raw
    try:
        raw = read_user_file(path, what="config file", max_bytes=MAX_CONFIG_BYTES)
    except CostModelError as exc:  # the loader's error type, imported only when there is one
        raise config_error()(str(exc)) from None
    return key, FILES.remember(key, raw)


def parse_config(raw: bytes, path: Path) -> dict[str, Any]:
    """A config file's JSON object (one-line errors naming the file)."""
    error = config_error
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


def config_file(path: Path) -> Path:
    """``path``, or the ``config.json`` inside it when it is a folder."""
    try:
        return path / "config.json" if path.is_dir() else path
    except (OSError, ValueError) as exc:
        raise config_error()(f"config file {str(path)[:200]!r} cannot be read: {exc}") from None


def is_folder(name: str) -> bool:
    """Whether ``name`` is a folder (one ``stat``, no ``Path`` built: a folder named like a
    catalog model in the working directory takes precedence; :func:`models.resolver.resolve_model`
    checks once per name and working directory)."""
    try:
        return os.path.isdir(name)
    except (OSError, ValueError):  # not a usable path (e.g. a component longer than the file system allows)
        return False


def _exists(name: str) -> bool:
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return False


#: catalog name -> what :func:`locate` returns for it (built once per process)
_catalog_paths: dict[str, tuple[Path, str, str, bool]] = {}


def locate(model: str | os.PathLike[str]) -> tuple[Path, str, str, bool]:
    """Where a named model's config lives: (file, model name, source, mtp). Catalog names are
    case-insensitive; a ``.json`` name or a folder is a path; anything else is an error."""
    if isinstance(model, os.PathLike):
        path = config_file(Path(model))
        return path, path.stem, str(path), False
    name = str(model)
    if len(name) > MAX_NAME:
        raise CostModelError(f"model {name[:40]!r}...: a name or path longer than {MAX_NAME} characters")
    if name.endswith(".json") or is_folder(name):
        path = config_file(Path(name))
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
    path, name, _, mtp = locate(model)
    return f"{name}{' mtp' if mtp else ''}", read_config(path)[1]


def config_data(model: str) -> dict[str, Any]:
    """``model``'s parsed ``config.json`` (a fresh dict each call; the file read once per
    process). Light: no sympy. Errors as :func:`resolve_model` raises them."""
    path = locate(model)[0]
    return parse_config(read_config(path)[1], path)


def is_catalog_name(name: str) -> bool:
    """Whether ``name`` names a catalog entry (case-insensitive) rather than a folder of that name."""
    return name.lower() in MODELS and not is_folder(name)


#: file stems that name no model (``config.json`` itself): such a config is named from its contents
GENERIC_STEMS = frozenset({"config", "model", "params"})


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
