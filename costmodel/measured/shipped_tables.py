"""The tables an unmeasured device shares, shipped with the package: read, never derived, on a first run.

A device the corpus does not measure is priced from every measured device's rows
(:func:`graphs.serving.pricing.kernel_sources.fit_basis`): its fits, the residual tables of those
fits and the held-out errors behind its intervals are one set per framework, family and dtype,
shared by every such device. :mod:`.shipped` holds the fits, but a fit is found by the digest of
the rows it fits, so a first run still read and costed every measured device's rows to name
them, and derived the residual tables and held-out errors from them (about 12 of 15 CPU s and
most of the 460 MiB peak of a first ``decode --predict vllm`` on A100-SXM-40GB). These shared
entries therefore ship too, as the fit cache (:mod:`.stored`) keeps them, so a first run reads
them back as a later run reads its cache.

Key
    Each entry is stored under :func:`table_key`: the kind (``groups``, ``residuals``,
    ``heldout``), the caller's parts (the measured devices, framework, family, dtypes), the
    corpus wheel's package and version, the family and :func:`.shipped.corpus_digest` of its table
    files (SHA-256 of their bytes: about 0.03 s a family, no row parsed or costed). Another
    wheel or an edited table is another key: a miss.
Verified at load
    The file is a :mod:`costmodel.formstore` store, listing the package sources the build read
    (every module it imported, the device catalog it opened: the corpus loader, the cost rules,
    the hardware catalog, the fitting, residual and held-out code) and keyed by their contents;
    an edit of any of them sets the whole file aside (:func:`costmodel.formstore.open_store`), as
    it does the shipped cards. Each entry carries its own digest, keyed by its key and the
    sources, and is decoded by the same checks as a cache entry (:mod:`.stored`): a miss, never a
    stale or damaged answer. What is not there, or set aside, is derived from the rows as before
    (and kept in the fit cache).
Exact
    An entry is the encoding the fit cache stores (:func:`.stored.encode_residuals`,
    :func:`.stored.encode_array`, :func:`.stored.encode_fits`): the same doubles bit for bit as
    the build derived (another CPU's libm may round a fresh table's last bits differently, as
    two machines' fresh tables always could).
Off
    ``COSTMODEL_NO_SHIPPED_FITS=1`` sets this file aside with the shipped fits.

Built by ``benchmarks/build_fits.py`` (its unmeasured device's jobs, :func:`recording`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PATH", "table_key", "read", "recording", "recording_now", "note", "write"]

T = TypeVar("T")

#: where the shared tables are installed (package data, ``pyproject.toml``)
PATH = Path(__file__).with_name("shipped_tables.bin")

#: the entries being recorded by :func:`recording`: key -> (kind, parts, family, encoded value)
_recorded: dict[str, dict[str, Any]] | None = None


def table_key(kind: str, parts: Sequence[Any], family: str) -> str:
    """The key of the entry of ``kind`` for the caller's ``parts`` (JSON-ready: names, lists of
    names, None) computed from ``family``'s corpus tables (module doc).

    Parameters
    ----------
    kind : str
        What the entry is (``groups``, ``residuals``, ``heldout``).
    parts : sequence
        The caller's parts, as :func:`.stored.stored` takes them.
    family : str
        The corpus family whose tables the entry is computed from.

    Returns
    -------
    str
        :func:`costmodel.formcache.cache_key` of those, with no fingerprint of the sources (the
        store checks them as a whole).
    """
    from ..formcache import cache_key
    from .corpus import corpus_info
    from .shipped import corpus_digest

    info = corpus_info()
    return cache_key(
        f"fit-{kind}",
        info.package,
        info.version,
        family,
        corpus_digest(family),
        json.dumps(list(parts)),
        fingerprint="",
    )


def read(kind: str, parts: Sequence[Any], family: str, decode: Callable[[Any], T]) -> T | None:
    """The shipped entry of ``kind`` and ``parts`` decoded by ``decode``, or None: the shipped
    fits switched off or being recorded (:func:`.shipped.enabled`), no valid store for these
    sources, no such entry, or one ``decode`` refuses (:class:`.stored.BadEntry`).

    Parameters
    ----------
    kind : str
        What the entry is (``groups``, ``residuals``, ``heldout``).
    parts : sequence
        The caller's parts.
    family : str
        The corpus family whose tables the entry is computed from.
    decode : callable
        The fit cache's decoder of the entry's value (it raises :class:`.stored.BadEntry`).

    Returns
    -------
    object or None
        The decoded value (never None itself), or None for a miss.
    """
    from ..formstore import open_store
    from .shipped import enabled
    from .stored import BadEntry

    if not enabled() or _recorded is not None:
        return None
    store = open_store(PATH)
    if store is None:
        return None
    try:
        entry = store.get(table_key(kind, parts, family))
    except (OSError, ValueError):  # the family's tables unreadable: no key to look up
        return None
    if entry is None or entry.get("kind") != kind:
        return None
    try:
        return decode(entry.get("value"))
    except BadEntry:
        return None


@contextmanager
def recording() -> Iterator[dict[str, dict[str, Any]]]:
    """Within it, every shared table :func:`.stored.stored` computes (none read from this file)
    is noted (:func:`note`) in the dict yielded, by :func:`table_key`: what
    ``benchmarks/build_fits.py`` writes (:func:`write`).

    Yields
    ------
    dict
        Key -> ``{"kind", "value"}`` (the entry stored).
    """
    global _recorded
    prev, _recorded = _recorded, {}
    try:
        yield _recorded
    finally:
        _recorded = prev


def note(kind: str, parts: Sequence[Any], family: str, encoded: Any) -> None:
    """Record an entry computed within :func:`recording` (nothing otherwise).

    Parameters
    ----------
    kind : str
        What the entry is.
    parts : sequence
        The caller's parts.
    family : str
        The corpus family whose tables it is computed from.
    encoded : object
        Its value as the fit cache stores it (JSON-ready).
    """
    if _recorded is not None:
        _recorded.setdefault(table_key(kind, parts, family), {"kind": kind, "value": encoded})


def recording_now() -> bool:
    """Whether :func:`recording` is on (a computed entry must be encoded for :func:`note`)."""
    return _recorded is not None


def write(path: str | Path, recorded: dict[str, dict[str, Any]], sources: tuple[list[str], list[str]]) -> int:
    """Write the store of ``recorded`` entries (:func:`recording`), keyed by the ``sources`` the
    build read (:func:`costmodel.formstore.recorded_sources`); returns its size in bytes.

    Deterministic: one set of entries and sources gives one file byte for byte.

    Parameters
    ----------
    path : str or Path
        The file written (replaced atomically).
    recorded : dict
        Key -> entry, as :func:`recording` yields them.
    sources : (files, dirs)
        The package sources the entries were computed from.

    Returns
    -------
    int
        The bytes written.
    """
    from ..formstore import write_store

    return write_store(path, {"tables": (b"", recorded)}, {}, sources)
