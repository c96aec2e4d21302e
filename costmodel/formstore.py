"""Cache entries that ship with the package: a read-only store beneath :mod:`costmodel.formcache`.

The persistent cache answers a repeated question without sympy; a first question on a new
machine still derives its closed forms (importing sympy and networkx, building the graph). A
store holds entries derived ahead of time by a build script (for the command line: every
catalog model's cards on every catalog device, ``benchmarks/build_cards.py``), each under the
caller's key for its question (:func:`costmodel.formcache.cache_key` of the same parts the cache
uses, with no fingerprint of the sources: the store checks its sources as a whole).

Sources
    A build records the files it depends on (:func:`record_sources`, :func:`recorded_sources`):
    every module of the packages it imported, every package file it opened (the device
    catalog, the model configs, data tables), and the folders of both. The store lists them
    and is keyed by :func:`costmodel.formcache.sources_fingerprint` of them: the contents of
    each file and the importable names in each folder. So an edit of any file the build read
    (an engine rule, a config, the catalog) or a module added where a build imported from sets
    the whole store aside, and the caller derives the answer as before (silently: the answer
    is the same); an edit of a module the build never imported (a command it did not run, a
    benchmark, an importer) leaves it in use.
Layout
    A header line ``costmodel-formstore <FORMAT> <digest>``; a JSON line (the meta: the
    sources, their fingerprint, ``names``, a table of spellings the caller maps to the names
    its keys use (device aliases), the entry count, the SHA-256 of the index and each preset
    dictionary's length and SHA-256); the index, one 32-byte record per entry sorted by its
    first field (16 bytes of HMAC-SHA256 of the key under the fingerprint; the entry's offset,
    length and preset dictionary), found by bisection; the preset dictionaries; then each
    entry's text (:func:`costmodel.formcache.entry_bytes` under the key bound to the
    fingerprint) compressed with zlib against its group's preset dictionary (text the group's
    entries share, so each entry stays readable alone yet compresses about as well as the group
    together). The digest is HMAC-SHA256 of the JSON line keyed by the fingerprint.
Trust
    A store is served only when the fingerprint of the sources it lists, read now, is the one
    it was built under, and the digest of its meta matches; the index must match its SHA-256,
    a preset dictionary its own when first used, and every entry is read back through
    :func:`costmodel.formcache.parse_entry` (its own digest keyed by its key and the
    fingerprint), so a corrupted or edited store, or an entry moved from another store, is a
    miss, never an answer. The file is opened without following a link or blocking and must be
    a regular file of at most :data:`MAX_BYTES`; the meta and index are read whole (about
    120 KB for 3,700 entries) and each entry when asked for.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import struct
import sys
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from .formcache import entry_bytes, parse_entry, sources_fingerprint
from .safefile import open_regular_file, unique_keys

__all__ = [
    "FormStore",
    "open_store",
    "write_store",
    "record_sources",
    "recorded_sources",
    "FORMAT",
    "MAX_BYTES",
]

FORMAT = 2  #: bumped when the layout changes (2: the sources listed, a binary index)
MAX_BYTES = 64 * 2**20  #: the largest store read
_MAGIC = b"costmodel-formstore"
_MAX_META = 4 * 2**20  #: the largest meta line read
_MAX_ENTRY = 16 * 2**20  #: the largest entry decompressed (as :data:`costmodel.formcache.MAX_BYTES`)
_RECORD = struct.Struct("<16sQII")  #: key id, offset (from the first entry), length, preset dictionary
_PACKAGES = ("costmodel", "graphs", "models")
_stores: dict[tuple[str, str], FormStore | None] = {}


class FormStore:
    """An opened store whose sources matched (:func:`open_store`); entries are read from the
    file when asked for, the meta and index alone held in memory."""

    __slots__ = ("_base", "_file", "_index", "_size", "_zdicts", "_zspans", "fingerprint", "names")

    def __init__(
        self,
        fingerprint: str,
        names: dict[str, str],
        index: bytes,
        zspans: list[tuple[int, int, str]],
        file: BinaryIO,
        base: int,
        size: int,
    ) -> None:
        self.fingerprint = fingerprint
        self.names = names
        self._index = index
        self._zspans = zspans
        self._zdicts: dict[int, bytes | None] = {}
        self._file, self._base, self._size = file, base, size

    def __len__(self) -> int:
        return len(self._index) // _RECORD.size

    def _find(self, key: str) -> tuple[int, int, int] | None:
        """The index record of ``key`` (bisection over the sorted key ids), or None."""
        kid = _key_id(self.fingerprint, key)
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            at = mid * _RECORD.size
            probe = self._index[at : at + 16]
            if probe < kid:
                lo = mid + 1
            elif probe > kid:
                hi = mid
            else:
                _, start, length, z = _RECORD.unpack_from(self._index, at)
                return start, length, z
        return None

    def _zdict(self, z: int) -> bytes | None:
        """Preset dictionary ``z``, read and checked against its SHA-256 once."""
        if z not in self._zdicts:
            start, length, sha = self._zspans[z]
            self._file.seek(start)
            data = self._file.read(length)
            ok = len(data) == length and hmac.compare_digest(hashlib.sha256(data).hexdigest(), sha)
            self._zdicts[z] = data if ok else None
        return self._zdicts[z]

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key`` (checked as the cache checks its own), or None."""
        where = self._find(key)
        if where is None:
            return None
        start, length, z = where
        if self._base + start + length > self._size or not 0 <= z < len(self._zspans):
            return None
        try:
            zdict = self._zdict(z)
            if zdict is None:
                return None
            self._file.seek(self._base + start)
            blob = self._file.read(length)
            d = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
            raw = d.decompress(blob, _MAX_ENTRY)
        except (OSError, ValueError, zlib.error):
            return None
        if len(blob) != length or d.unconsumed_tail or not d.eof:
            return None  # cut short, or larger than an entry may be
        return parse_entry(_bound(self.fingerprint, key), raw)


def _bound(fingerprint: str, key: str) -> str:
    """The key an entry's own digest is made under: the caller's key and the sources'."""
    return f"{key}@{fingerprint}"


def _key_id(fingerprint: str, key: str) -> bytes:
    """An index record's first field: 16 bytes of HMAC-SHA256 of ``key`` under ``fingerprint``."""
    return hmac.new(fingerprint.encode(), key.encode(), hashlib.sha256).digest()[:16]


def _meta_digest(fingerprint: str, text: bytes) -> bytes:
    return hmac.new(fingerprint.encode(), text, hashlib.sha256).hexdigest().encode()


def open_store(path: str | Path, *, root: str | Path | None = None) -> FormStore | None:
    """The store at ``path`` when the sources it lists are the ones it was built from (module
    doc), else None: missing, not a regular file, a meta, digest or index that does not match,
    or a listed source edited, added to or gone. Opened once per process and path.

    Parameters
    ----------
    path : str or Path
        The store's file.
    root : str or Path, optional
        The folder holding the packages whose sources are checked; by default this
        installation's.

    Returns
    -------
    FormStore or None
    """
    key = (str(path), str(root))
    if key not in _stores:
        _stores[key] = _open(path, root)
    return _stores[key]


def _open(path: str | Path, root: str | Path | None) -> FormStore | None:
    opened = open_regular_file(path, MAX_BYTES)
    if opened is None:
        return None
    f, size = opened
    store = None
    try:
        store = _read_meta(f, size, root)
    except (OSError, ValueError):
        pass
    finally:
        if store is None:
            f.close()
    return store


def _read_meta(f: BinaryIO, size: int, root: str | Path | None) -> FormStore | None:
    first = f.readline(200)
    parts = first.rstrip(b"\n").split(b" ")
    if not (first.endswith(b"\n") and len(parts) == 3 and parts[0] == _MAGIC and parts[1] == b"%d" % FORMAT):
        return None
    text = f.readline(_MAX_META)
    if not text.endswith(b"\n"):
        return None
    text = text[:-1]
    try:
        meta = json.loads(text, object_pairs_hook=unique_keys(ValueError))
        files, dirs, names = meta["files"], meta["dirs"], meta["names"]
        count, index_sha, zdicts = meta["count"], meta["index_sha256"], meta["zdicts"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if not (
        _strings(files)
        and _strings(dirs)
        and isinstance(names, dict)
        and _strings(list(names.values()))
        and type(count) is int
        and 0 <= count <= size // _RECORD.size
        and isinstance(index_sha, str)
        and isinstance(zdicts, list)
        and all(
            isinstance(z, list) and len(z) == 2 and type(z[0]) is int and z[0] >= 0 and isinstance(z[1], str)
            for z in zdicts
        )
    ):
        return None
    fp = sources_fingerprint(files, dirs, root=root)
    if (
        fp is None
        or meta.get("fingerprint") != fp
        or not hmac.compare_digest(parts[2], _meta_digest(fp, text))
    ):
        return None  # other sources (or an edited meta): nothing here answers for these
    index = f.read(count * _RECORD.size)
    if len(index) != count * _RECORD.size or not hmac.compare_digest(
        hashlib.sha256(index).hexdigest(), index_sha
    ):
        return None
    at = f.tell()
    zspans = []
    for length, sha in zdicts:
        zspans.append((at, length, sha))
        at += length
    if at > size:
        return None
    return FormStore(fp, names, index, zspans, f, at, size)


def _strings(xs: object) -> bool:
    return isinstance(xs, list) and all(isinstance(x, str) for x in xs)


def write_store(
    path: str | Path,
    groups: Mapping[str, tuple[bytes, Mapping[str, dict[str, Any]]]],
    names: Mapping[str, str],
    sources: tuple[Sequence[str], Sequence[str]],
    *,
    root: str | Path | None = None,
) -> int:
    """Write a store (module doc) to ``path``, replaced atomically
    (:func:`costmodel.outfiles.atomic_write`).

    Parameters
    ----------
    path : str or Path
        The store's file.
    groups : mapping
        Group name -> (preset dictionary: at most 32 KiB of text typical of the group's entries,
        or ``b""``; the entries: key -> JSON-ready data).
    names : mapping
        The spellings table the caller reads back (:attr:`FormStore.names`).
    sources : (files, dirs)
        The sources the entries were built from (:func:`recorded_sources`): paths relative to
        ``root``.
    root : str or Path, optional
        The folder holding the packages; by default this installation's.

    Returns
    -------
    int
        The bytes written.

    Raises
    ------
    ValueError
        When a listed source cannot be read (:func:`costmodel.formcache.sources_fingerprint`).
    """
    from .outfiles import atomic_write

    files, dirs = sorted(set(sources[0])), sorted(set(sources[1]))
    fp = sources_fingerprint(files, dirs, root=root)
    if fp is None:
        raise ValueError("a listed source is missing, unreadable or outside the packages")
    blobs: list[bytes] = []
    records: list[bytes] = []
    zdicts: list[bytes] = []
    at = 0
    for z, (zdict, entries) in enumerate(groups[g] for g in sorted(groups)):
        zdicts.append(zdict)
        for key in sorted(entries):
            c = zlib.compressobj(9, zdict=zdict) if zdict else zlib.compressobj(9)
            blob = c.compress(entry_bytes(_bound(fp, key), entries[key])) + c.flush()
            records.append(_RECORD.pack(_key_id(fp, key), at, len(blob), z))
            blobs.append(blob)
            at += len(blob)
    records.sort(key=lambda r: r[:16])
    if any(a[:16] == b[:16] for a, b in itertools.pairwise(records)):
        raise ValueError("two keys share an index id (or a key is in two groups)")
    index = b"".join(records)
    meta = {
        "format": FORMAT,
        "fingerprint": fp,
        "files": files,
        "dirs": dirs,
        "names": dict(sorted(names.items())),
        "count": len(records),
        "index_sha256": hashlib.sha256(index).hexdigest(),
        "zdicts": [[len(z), hashlib.sha256(z).hexdigest()] for z in zdicts],
    }
    text = json.dumps(meta, separators=(",", ":")).encode()
    data = b"".join(
        [b"%s %d %s\n" % (_MAGIC, FORMAT, _meta_digest(fp, text)), text, b"\n", index, *zdicts, *blobs]
    )
    with atomic_write(path, "store", binary=True) as f:
        f.write(data)
    for k in [k for k in _stores if k[0] == str(path)]:
        del _stores[k]
    return len(data)


#: what this process read, once :func:`record_sources` started recording: files opened, folders listed
_recorded: tuple[set[str], set[str]] | None = None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook of :func:`record_sources`: note each path opened for reading or listed."""
    if _recorded is None or event not in ("open", "os.listdir", "os.scandir"):
        return
    path = args[0] if args else None
    if not isinstance(path, str | bytes):
        return  # a descriptor, or the current folder
    if event == "open":
        mode, flags = args[1], args[2]
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        if mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
            return
        _recorded[0].add(os.fsdecode(path))
    else:
        _recorded[1].add(os.fsdecode(path))


def record_sources(*, clear: bool = False) -> None:
    """Start noting every file this process opens and every folder it lists (an audit hook:
    once per process; children forked later inherit it and what was noted), for
    :func:`recorded_sources`. Call it before the build imports anything of the packages.
    ``clear``: forget what was noted so far (a forked child noting its own reads)."""
    global _recorded
    if _recorded is None:
        _recorded = (set(), set())
        sys.addaudithook(_hook)
    elif clear:
        _recorded[0].clear()
        _recorded[1].clear()


def recorded_sources(
    *, root: str | Path | None = None, exclude: Sequence[str | Path] = ()
) -> tuple[list[str], list[str]]:
    """The sources a build in this process depended on, for :func:`write_store`: every module
    of the packages it has imported, every package file it opened while recording
    (:func:`record_sources`; byte code and ``exclude``, e.g. the store being replaced, left
    out), and the folders of both and those it listed.

    Parameters
    ----------
    root : str or Path, optional
        The folder holding the packages; by default this installation's.
    exclude : sequence of paths
        Files never listed.

    Returns
    -------
    (files, dirs)
        Sorted paths relative to ``root``, ``/``-separated.
    """
    base = os.path.realpath(Path(__file__).resolve().parent.parent if root is None else root)
    skip = {os.path.realpath(p) for p in exclude}

    def rel(path: str) -> str | None:
        real = os.path.realpath(path)
        r = os.path.relpath(real, base).replace(os.sep, "/")
        top = r.split("/", 1)[0]
        return r if top in _PACKAGES and real not in skip else None

    files: set[str] = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        r = rel(f) if isinstance(f, str) else None
        if r is not None:
            files.add(r)
    opened, listed = _recorded if _recorded is not None else (set(), set())
    for p in list(opened):
        r = rel(p)
        if r is not None and "__pycache__" not in r.split("/") and os.path.isfile(p):
            files.add(r)
    dirs = {f.rsplit("/", 1)[0] for f in files if "/" in f}
    for p in list(listed):
        r = rel(p)
        if r is not None and "__pycache__" not in r.split("/") and os.path.isdir(p):
            dirs.add(r)
    return sorted(files), sorted(dirs)
