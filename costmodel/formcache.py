"""A persistent cache of compiled forms across processes: JSON text, never pickle.

A command that derives closed forms (the decode report's step time, terms and limits in
``B`` and ``ctx``) can store them here as text and, in a later process, read them back with
:func:`costmodel.arith.compile_numeric` without importing sympy or building a graph. What
is stored is data: numbers and arithmetic text that the whitelisting parser checks before
anything is evaluated; a file that fails the check is ignored (and rebuilt).

Trust
    An entry is a header line ``costmodel-cache <FORMAT> <digest>`` and the JSON text. The
    digest is HMAC-SHA256 of that text keyed by the entry's own key, so an edited, truncated
    or renamed entry (one key's text under another key) is a miss, never an answer. It detects
    corruption and edits, not an adversary who recomputes it: whoever reads an entry still
    range-checks every constant (:mod:`graphs.serving.present.cards`). An entry is opened without
    following a link and without blocking, must be a regular file of at most
    :data:`MAX_BYTES`, and is parsed with NaN, infinities and repeated keys refused; anything
    else (a FIFO, a link to ``/dev/zero``, a directory, an oversized file) is a miss, and the
    next save replaces it. Saves write a temporary file and ``os.replace`` it, so two processes
    storing the same entry leave one whole entry and a reader never sees half of one.

Where
    ``$COSTMODEL_CACHE_DIR``, else ``platformdirs.user_cache_dir("costmodel")`` when
    platformdirs is installed, else ``$XDG_CACHE_HOME/costmodel`` or ``~/.cache/costmodel``.
    ``COSTMODEL_NO_CACHE=1`` turns the cache off (nothing read or written).
Key
    sha256 over the cache format, the engine version, a fingerprint of the engine's own
    source files (path, size and modification time of every ``.py``, ``.toml`` and ``.json``
    under ``costmodel``, ``graphs`` and ``models``) and the caller's parts (the model config's
    text, the device catalog's text, the device name, the plan, the dtypes). Any edit to the
    engine, the config or the catalog changes the key, so a stale entry is never read.
Shipped
    Entries built ahead ship with the package (:mod:`costmodel.formstore`), keyed by the same
    parts and checked as a whole by :func:`sources_fingerprint` of the files their build read
    (their contents, not their mtimes, so the same on every machine).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .safefile import read_regular_file, unique_keys

__all__ = [
    "enabled",
    "cache_dir",
    "source_fingerprint",
    "content_fingerprint",
    "sources_fingerprint",
    "cache_key",
    "load",
    "parse_entry",
    "entry_bytes",
    "save",
    "digest",
    "FORMAT",
    "MAX_BYTES",
]

FORMAT = 2  #: bumped when the stored layout changes (2: a digest header line)
MAX_BYTES = 16 * 2**20  #: the largest entry read back (a decode card is a few KB to a few hundred KB)
_MAGIC = b"costmodel-cache"
_PACKAGES = ("costmodel", "graphs", "models")
_fingerprint: str | None = None
_content: str | None = None


def enabled() -> bool:
    """False when ``COSTMODEL_NO_CACHE`` is set to anything but ``""`` or ``0``."""
    return os.environ.get("COSTMODEL_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    """The directory entries live in (module doc); not created until something is saved."""
    explicit = os.environ.get("COSTMODEL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "costmodel"
    return Path(user_cache_dir("costmodel"))


def source_fingerprint() -> str:
    """A hash of (path, size, mtime) of the engine's source and data files (once per process)."""
    global _fingerprint
    if _fingerprint is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for pkg in _PACKAGES:
            for dirpath, dirnames, filenames in os.walk(root / pkg):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if name.endswith((".py", ".toml", ".json")):
                        st = os.stat(os.path.join(dirpath, name))
                        h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _fingerprint = h.hexdigest()
    return _fingerprint


def content_fingerprint(*, refresh: bool = False) -> str:
    """:func:`sources_fingerprint` of every file :func:`source_fingerprint` stats (once per
    process, about 7 ms for the 2.6 MB of them). Unlike the (path, size, mtime) fingerprint it
    is the same wherever and whenever the same sources are installed; any edit of a byte
    changes it. ``refresh``: hash the files again."""
    global _content
    if _content is None or refresh:
        root = Path(__file__).resolve().parent.parent
        files = []
        for pkg in _PACKAGES:
            for dirpath, dirnames, filenames in os.walk(root / pkg):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
                files += [
                    f"{rel_dir}/{n}" for n in sorted(filenames) if n.endswith((".py", ".toml", ".json"))
                ]
        fp = sources_fingerprint(files, (), root=root)
        assert fp is not None, "a package file vanished while hashed"
        _content = fp
    return _content


#: a source path :func:`sources_fingerprint` reads: relative, in one of the packages, no part
#: starting with a dot (so never ``..``)
_SOURCE_PATH = re.compile(r"(?:costmodel|graphs|models)(?:/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*")
_MAX_SOURCE = 8 * 2**20  #: the largest source file hashed


def _importable(entry: os.DirEntry[str], suffixes: tuple[str, ...]) -> bool:
    """Could ``import`` find a module or package here: a file with an importable suffix, or a
    folder holding an ``__init__`` (a folder without one never shadows a module nor is listed
    by ``pkgutil``)."""
    if entry.name.startswith(".") or entry.name == "__pycache__":
        return False
    if entry.is_dir(follow_symlinks=False):
        return any(os.path.isfile(os.path.join(entry.path, "__init__" + s)) for s in suffixes)
    return entry.name.endswith(suffixes)


def sources_fingerprint(
    files: Iterable[str], dirs: Iterable[str], *, root: str | os.PathLike[str] | None = None
) -> str | None:
    """A hash of the contents of ``files`` and the importable names in ``dirs`` (paths relative
    to the installation's ``root``, ``/``-separated), or None when one cannot be read: a path
    outside the packages, a file missing, not regular or over 8 MiB, a folder missing.

    The hash is SHA-256 over each file's path and the SHA-256 of its bytes, then each folder's
    path and names, in the order given (each part prefixed by its length).

    A folder's names are its modules and packages (:func:`_importable`, sorted): a module
    added beside the ones a build imported changes it too, since ``pkgutil`` registries
    (:mod:`costmodel.rules`, the engine profiles, the mixers) import every module they find.
    The same sources give the same hash on every machine; any edit of a byte of a listed file,
    and any module added to or removed from a listed folder, changes it.
    """
    from importlib.machinery import all_suffixes

    base = str(Path(__file__).resolve().parent.parent if root is None else root)
    suffixes = tuple(all_suffixes())
    h = hashlib.sha256()
    for rel in files:
        data = (
            read_regular_file(os.path.join(base, rel), _MAX_SOURCE) if _SOURCE_PATH.fullmatch(rel) else None
        )
        if data is None:
            return None
        r = rel.encode()
        h.update(b"f" + len(r).to_bytes(8, "little") + r + hashlib.sha256(data).digest())
    for rel in dirs:
        if not _SOURCE_PATH.fullmatch(rel):
            return None
        try:
            with os.scandir(os.path.join(base, rel)) as it:
                names = sorted(e.name for e in it if _importable(e, suffixes))
        except OSError:
            return None
        listing = "\0".join([rel, *names]).encode()
        h.update(b"d" + len(listing).to_bytes(8, "little") + listing)
    return h.hexdigest()


def cache_key(kind: str, *parts: str | bytes, fingerprint: str | None = None) -> str:
    """The entry name for ``kind`` and the caller's ``parts`` (module doc); ``fingerprint``
    replaces the sources' (path, size, mtime) fingerprint (:func:`content_fingerprint` for
    entries that ship)."""
    from . import __version__

    fp = source_fingerprint() if fingerprint is None else fingerprint
    h = hashlib.sha256(f"{FORMAT}\0{__version__}\0{fp}\0{kind}".encode())
    for p in parts:
        data = p if isinstance(p, bytes) else p.encode()
        h.update(len(data).to_bytes(8, "little") + data)
    return f"{kind}-{h.hexdigest()[:40]}"


def _path(key: str) -> Path:
    return cache_dir() / "forms" / f"{key}.json"


def digest(key: str, body: bytes) -> str:
    """HMAC-SHA256 of an entry's text ``body``, keyed by its cache ``key`` (hex)."""
    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def load(key: str) -> dict[str, Any] | None:
    """The stored entry, or None: missing, not a regular file of at most :data:`MAX_BYTES`, a
    header or digest that does not match this key and text, not a JSON object, or cache off."""
    if not enabled():
        return None
    raw = read_regular_file(_path(key), MAX_BYTES)
    return None if raw is None else parse_entry(key, raw)


def parse_entry(key: str, raw: bytes) -> dict[str, Any] | None:
    """An entry's text ``raw`` (header line and JSON) read back as :func:`load` does: None when
    the header or digest does not match ``key`` and the text, or it is not a JSON object of
    this format."""
    header, sep, body = raw.partition(b"\n")
    if not sep or not hmac.compare_digest(header, b"%s %d %s" % (_MAGIC, FORMAT, digest(key, body).encode())):
        return None
    try:
        data = json.loads(body, parse_constant=_refuse_constant, object_pairs_hook=unique_keys(ValueError))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def entry_bytes(key: str, data: dict[str, Any]) -> bytes:
    """The text :func:`save` stores for ``data`` under ``key``: the header line with the
    digest, then the JSON (raises ValueError or TypeError for data JSON cannot hold)."""
    body = json.dumps({**data, "format": FORMAT}, allow_nan=False).encode()
    return b"%s %d %s\n" % (_MAGIC, FORMAT, digest(key, body).encode()) + body


def save(key: str, data: dict[str, Any]) -> bool:
    """Store ``data`` (JSON-ready) atomically with its digest; False when the cache is off or
    not writable (the entry is then simply not there, never half there)."""
    if not enabled():
        return False
    path = _path(key)
    tmp = None
    try:
        text = entry_bytes(key, data)
        path.parent.mkdir(parents=True, exist_ok=True)
        # a new file of this process only (what tempfile.mkstemp does, without importing it)
        tmp = str(path.parent / f".tmp-{os.getpid()}-{os.urandom(8).hex()}.json")
        flags = (
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        )
        try:
            fd = os.open(tmp, flags, 0o600)
        except OSError:
            tmp = None
            raise
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        os.replace(tmp, path)  # atomic: a reader sees the old entry or the new, never half
    except (OSError, ValueError, TypeError, RecursionError):
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False
    return True
