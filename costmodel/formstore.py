"""Cache entries that ship with the package: a read-only store beneath :mod:`costmodel.formcache`.

The persistent cache answers a repeated question without sympy; a first question on a new
machine still derives its closed forms (importing sympy and networkx, building the graph). A
store holds entries derived ahead of time by a build script (for the command line: every
catalog model's cards on every catalog device, ``benchmarks/build_cards.py``), under keys made
with :func:`costmodel.formcache.cache_key` from the same parts the cache uses, with the
sources' *content* fingerprint (:func:`costmodel.formcache.content_fingerprint`) in place of
their (path, size, mtime) one, so the same sources give the same keys on every machine.

Layout
    A header line ``costmodel-formstore <FORMAT> <digest>``, a JSON line (the header: the
    content fingerprint the entries were built under, ``names``, a table of spellings the
    caller maps to the names its keys use (device aliases), and ``index``, each key's offset
    length and preset dictionary), then each entry's text
    (:func:`costmodel.formcache.entry_bytes`) compressed with zlib against its group's preset
    dictionary (``zdicts``, base64 in the header: text the group's entries share, so each entry
    stays readable alone yet compresses about as well as the group together). The digest is
    HMAC-SHA256 of the JSON line keyed by its fingerprint.
Trust
    A store is served only when its fingerprint is the running sources' content fingerprint:
    an edit of any engine file, model config or the device catalog (all of them hashed) makes
    the whole store a miss, and the caller derives the answer as before; silently, since the
    answer is the same. The header's digest must match and every entry is read back through
    :func:`costmodel.formcache.parse_entry` (its own digest keyed by its key), so a corrupted
    or edited store is a miss, never an answer. The file is opened without following a link or
    blocking and must be a regular file of at most :data:`MAX_BYTES`; the header is read whole
    and each entry when asked for (a first command reads a few KB of the store, not all of it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from .formcache import content_fingerprint, entry_bytes, parse_entry
from .safefile import open_regular_file, unique_keys

__all__ = ["FormStore", "open_store", "write_store", "FORMAT", "MAX_BYTES"]

FORMAT = 1  #: bumped when the layout changes
MAX_BYTES = 64 * 2**20  #: the largest store read
_MAGIC = b"costmodel-formstore"
_MAX_ENTRY = 16 * 2**20  #: the largest entry decompressed (as :data:`costmodel.formcache.MAX_BYTES`)
_stores: dict[str, FormStore | None] = {}


class FormStore:
    """An opened store whose fingerprint matched (:func:`open_store`); entries are read from the
    file when asked for, the header alone held in memory."""

    __slots__ = ("_base", "_file", "_index", "_size", "_zdicts", "fingerprint", "names")

    def __init__(
        self,
        fingerprint: str,
        names: dict[str, str],
        index: dict[str, Any],
        zdicts: list[bytes],
        file: BinaryIO,
        base: int,
        size: int,
    ) -> None:
        self.fingerprint = fingerprint
        self.names = names
        self._index = index
        self._zdicts = zdicts
        self._file, self._base, self._size = file, base, size

    def __len__(self) -> int:
        return len(self._index)

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry stored under ``key`` (checked as the cache checks its own), or None."""
        where = self._index.get(key)
        if not (isinstance(where, list) and len(where) == 3 and all(type(x) is int for x in where)):
            return None
        start, length, z = where
        if (
            start < 0
            or length < 0
            or self._base + start + length > self._size
            or not 0 <= z < len(self._zdicts)
        ):
            return None
        try:
            self._file.seek(self._base + start)
            blob = self._file.read(length)
            d = zlib.decompressobj(zdict=self._zdicts[z]) if self._zdicts[z] else zlib.decompressobj()
            raw = d.decompress(blob, _MAX_ENTRY)
        except (OSError, ValueError, zlib.error):
            return None
        if len(blob) != length or d.unconsumed_tail or not d.eof:
            return None  # cut short, or larger than an entry may be
        return parse_entry(key, raw)


def _header_digest(fingerprint: str, text: bytes) -> bytes:
    return hmac.new(fingerprint.encode(), text, hashlib.sha256).hexdigest().encode()


def open_store(path: str | Path) -> FormStore | None:
    """The store at ``path`` when it was built under the running sources (module doc), else
    None: missing, not a regular file, a header or digest that does not match, or another
    fingerprint. Opened once per process and path."""
    key = str(path)
    if key not in _stores:
        _stores[key] = _open(path)
    return _stores[key]


def _open(path: str | Path) -> FormStore | None:
    opened = open_regular_file(path, MAX_BYTES)
    if opened is None:
        return None
    f, size = opened
    store = None
    try:
        store = _read_header(f, size)
    except (OSError, ValueError):
        pass
    finally:
        if store is None:
            f.close()
    return store


def _read_header(f: BinaryIO, size: int) -> FormStore | None:
    first = f.readline(200)
    parts = first.rstrip(b"\n").split(b" ")
    if not (first.endswith(b"\n") and len(parts) == 3 and parts[0] == _MAGIC and parts[1] == b"%d" % FORMAT):
        return None
    text = f.readline(MAX_BYTES)
    if not text.endswith(b"\n"):
        return None
    text = text[:-1]
    fp = content_fingerprint()
    if not hmac.compare_digest(parts[2], _header_digest(fp, text)):
        return None  # other sources (or an edited header): nothing here answers for these
    try:
        head = json.loads(text, object_pairs_hook=unique_keys(ValueError))
        names, index = head["names"], head["index"]
        zdicts = [base64.b64decode(z, validate=True) for z in head["zdicts"]]
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        return None
    if head.get("fingerprint") != fp or not isinstance(names, dict) or not isinstance(index, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        return None
    return FormStore(fp, names, index, zdicts, f, f.tell(), size)


def write_store(
    path: str | Path,
    groups: Mapping[str, tuple[bytes, Mapping[str, dict[str, Any]]]],
    names: Mapping[str, str],
    *,
    fingerprint: str | None = None,
) -> int:
    """Write a store (module doc) to ``path``, replaced atomically
    (:func:`costmodel.outfiles.atomic_write`).

    Parameters
    ----------
    path : str or Path
        The store's file.
    groups : mapping
        Group name -> (preset dictionary: at most 32 KiB of text typical of the group's entries,
        or ``b""``; the entries: key -> JSON-ready data, keys made with
        :func:`costmodel.formcache.cache_key` under ``fingerprint``).
    names : mapping
        The spellings table the caller reads back (:attr:`FormStore.names`).
    fingerprint : str, optional
        The content fingerprint the keys were made under; by default the running sources'.

    Returns
    -------
    int
        The bytes written.
    """
    from .outfiles import atomic_write

    fp = content_fingerprint() if fingerprint is None else fingerprint
    blobs: list[bytes] = []
    index: dict[str, list[int]] = {}
    zdicts: list[str] = []
    at = 0
    for z, (zdict, entries) in enumerate(groups[g] for g in sorted(groups)):
        zdicts.append(base64.b64encode(zdict).decode())
        for key in sorted(entries):
            c = zlib.compressobj(9, zdict=zdict) if zdict else zlib.compressobj(9)
            blob = c.compress(entry_bytes(key, entries[key])) + c.flush()
            index[key] = [at, len(blob), z]
            blobs.append(blob)
            at += len(blob)
    head = {
        "format": FORMAT,
        "fingerprint": fp,
        "names": dict(sorted(names.items())),
        "zdicts": zdicts,
        "index": index,
    }
    text = json.dumps(head, separators=(",", ":")).encode()
    data = b"%s %d %s\n" % (_MAGIC, FORMAT, _header_digest(fp, text)) + text + b"\n" + b"".join(blobs)
    with atomic_write(path, "store", binary=True) as f:
        f.write(data)
    _stores.pop(str(path), None)
    return len(data)
