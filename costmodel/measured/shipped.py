"""Kernel fits that ship with the package: the corpus fitted once, read back on every machine.

Fitting the measured corpus is what a first ``--predict`` spends most of its time on (a bounded
least-squares fit per kernel group, :func:`costmodel.measured.efficiency.fit`, and the held-out
refits behind the intervals). The fits of the corpus version the ``[measured]`` extra pins are
therefore built once (``benchmarks/build_fits.py``) and installed as package data,
:data:`PATH` (gzip-compressed JSON), and :func:`fitted` reads a fit back instead of computing it.

Content-addressed
    Each fit is stored under :func:`input_digest`: SHA-256 of everything the fit reads, the
    family, the row cap and every row's model features and measured latency (the arrays
    :func:`~costmodel.measured.efficiency.fit` is called with, before its seeded subset). A fit
    is read back only for exactly the rows it was fitted on: an edited row, another wheel's
    tables or an engine whose cost rules or hardware specs give other features is a miss,
    never a stale fit. What ships is each fit's parameters and standard errors as JSON numbers
    (``repr``: the shortest text that reads back to the same double), so a shipped fit predicts
    bit for bit what the fresh one does on the machine that built it (another CPU's BLAS may
    round a fresh fit's last bits differently, as two machines' fresh fits always could).
Verified at load
    The file's header names the wheel (package and version) and, per family, the SHA-256 of
    the corpus table files its fits read (:func:`corpus_digest`, over
    :func:`costmodel.measured.corpus.table_files`), and the SHA-256 of the fitting code
    (``efficiency.py``, :func:`code_digest`). Another installed version, another family's
    tables or another fitting code sets the file aside for that family (every fit computed as
    before, and kept in the fit cache, :mod:`.stored`), and says why once on stderr. A file
    that is missing, larger than :data:`MAX_BYTES` (compressed or not), not a regular file, not
    strict JSON or not of the expected shape is set aside the same way.
Misses
    A fit the file does not hold is computed as before; on a terminal a progress line names it
    (a few seconds each). ``COSTMODEL_NO_SHIPPED_FITS=1`` sets the file aside (every fit
    computed; ``benchmarks/build_fits.py`` builds it so).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..notes import say
from ..safefile import read_regular_file, unique_keys
from .efficiency import MAX_ROWS, PARAMS, Features, Fit, fit, kind_of

__all__ = [
    "FORMAT",
    "PATH",
    "MAX_BYTES",
    "enabled",
    "input_digest",
    "code_digest",
    "corpus_digest",
    "header",
    "fitted",
    "recording",
    "shipped_fits",
    "encode_fit",
    "write",
]

FORMAT = 1  #: bumped when the file's layout or the digests' definition changes
#: where the shipped fits are installed (package data, ``pyproject.toml``)
PATH = Path(__file__).with_name("shipped_fits.json.gz")
#: the largest file read, compressed and uncompressed (the shipped file is well under 1 MB)
MAX_BYTES = 32 * 2**20

#: the fits being recorded by :func:`recording` (None: not recording)
_recorded: dict[str, list[Any]] | None = None
#: whether :func:`recording` reads the shipped fits that apply (``reuse``) rather than refitting
_reuse = False


def enabled() -> bool:
    """``COSTMODEL_NO_SHIPPED_FITS`` is unset, ``""`` or ``0``, and nothing is being recorded."""
    return _recorded is None and os.environ.get("COSTMODEL_NO_SHIPPED_FITS", "") in ("", "0")


def input_digest(family: str, x: Features, measured_s: np.ndarray, max_rows: int = MAX_ROWS) -> str:
    """SHA-256 (hex, 32 digits) of what a fit of ``family`` reads: the family, the row cap, and each
    feature array and the measured seconds (name, dtype, shape and bytes of each)."""
    h = hashlib.sha256(f"{FORMAT}\0{family}\0{max_rows}\0".encode())
    arrays = [(name, getattr(x, name)) for name in Features.__dataclass_fields__]
    for name, a in [*arrays, ("measured_s", measured_s)]:
        a = np.ascontiguousarray(a)
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


@functools.cache
def code_digest() -> str:
    """SHA-256 (hex) of the fitting code, ``costmodel/measured/efficiency.py``."""
    return hashlib.sha256(Path(__file__).with_name("efficiency.py").read_bytes()).hexdigest()


@functools.cache
def corpus_digest(family: str) -> str:
    """SHA-256 (hex) over the relative path, size and bytes of each corpus table file ``family``'s
    fits read (:func:`costmodel.measured.corpus.table_files`)."""
    from .corpus import corpus_info, table_files

    root = corpus_info().root
    h = hashlib.sha256()
    for rel in table_files(family):
        data = Path(root, rel).read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def _say(why: str) -> None:
    """``why`` on stderr once per command run, kept for ``--json`` (:func:`costmodel.notes.say`)."""
    say(why)


def _inflate(raw: bytes) -> bytes | None:
    """The gzip member ``raw`` decompressed to at most :data:`MAX_BYTES`, else None."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(raw, MAX_BYTES + 1)
    except zlib.error:
        return None
    return out if len(out) <= MAX_BYTES and d.eof and not d.unconsumed_tail else None


def _refuse(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _valid(doc: Any) -> bool:
    """The file's shape: a header with string fields and digests, fits as lists of numbers."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return False
    if not all(isinstance(doc.get(k), str) for k in ("package", "version", "code")):
        return False
    corpus, fits = doc.get("corpus"), doc.get("fits")
    if not isinstance(corpus, dict) or not all(isinstance(v, str) for v in corpus.values()):
        return False
    return isinstance(fits, dict) and all(isinstance(v, dict) for v in fits.values())


@functools.cache
def _file() -> dict[str, Any] | None:
    """The shipped file, parsed and shape-checked, or None (module doc)."""
    raw = read_regular_file(PATH, MAX_BYTES)
    text = _inflate(raw) if raw is not None else None
    if text is None:
        return None
    try:
        doc = json.loads(text, parse_constant=_refuse, object_pairs_hook=unique_keys(ValueError))
    except (ValueError, RecursionError):
        return None
    return doc if _valid(doc) else None


def header() -> dict[str, Any] | None:
    """The shipped file's header (``format``, ``package``, ``version``, ``code``, ``corpus``
    digests per family, ``built_with``) and ``fits`` counts per family; None without a file."""
    doc = _file()
    if doc is None:
        return None
    return {
        **{k: v for k, v in doc.items() if k != "fits"},
        "fits": {f: len(v) for f, v in doc["fits"].items()},
    }


def _table(family: str) -> dict[str, Any]:
    """The shipped fits of ``family`` when the file applies to the installed corpus and code,
    else ``{}`` after saying why (module doc; said in each command run that asks)."""
    table, why = _table_or_why(family)
    if why:
        _say(why)
    return table


@functools.cache
def _table_or_why(family: str) -> tuple[dict[str, Any], str]:
    """:func:`_table`'s answer, read once per process: the fits, or ``{}`` and why not."""
    from .corpus import corpus_info

    doc = _file()
    if doc is None:
        return (
            {},
            f"no valid shipped kernel fits at {PATH}: fitting the measured corpus (kept in the fit cache)",
        )
    info = corpus_info()
    built = f"{doc['package']} {doc['version']}"
    if (doc["package"], doc["version"]) != (info.package, info.version):
        return {}, (
            f"the shipped kernel fits are for {built}, {info.package} {info.version} is installed: "
            "fitting the measured corpus (kept in the fit cache)"
        )
    if doc["code"] != code_digest():
        return {}, (
            "the fitting code (costmodel/measured/efficiency.py) differs from the shipped kernel fits': "
            "fitting the measured corpus (kept in the fit cache)"
        )
    try:
        same = doc["corpus"].get(family) == corpus_digest(family)
    except (OSError, ValueError):
        same = False
    if not same:
        return {}, (
            f"the installed {family} tables differ from those the shipped kernel fits were built from "
            f"({built}): fitting them (kept in the fit cache)"
        )
    table = doc["fits"].get(family, {})
    return (table if isinstance(table, dict) else {}), ""


def encode_fit(f: Fit) -> list[Any]:
    """A fit as ``[params, stderr, rows, rms_log]`` in its kind's parameter order (a non-finite
    standard error as None): what the shipped file stores per input digest."""
    names = [n for n, *_ in PARAMS[f.kind]]
    return [
        [f.params[n] for n in names],
        [f.stderr[n] if math.isfinite(f.stderr[n]) else None for n in names],
        f.rows,
        f.rms_log,
    ]


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _decode(
    value: Any, family: str, group: str, devices: list[str] | None, frameworks: list[str] | None
) -> Fit | None:
    """The fit :func:`encode_fit` stored, for this call's names; None unless it has its shape."""
    kind = kind_of(family)
    names = [n for n, *_ in PARAMS[kind]]
    if not isinstance(value, list) or len(value) != 4:
        return None
    params, stderr, rows, rms = value
    if not (
        isinstance(params, list) and isinstance(stderr, list) and len(params) == len(stderr) == len(names)
    ):
        return None
    if not (all(map(_finite, params)) and all(s is None or _finite(s) for s in stderr)):
        return None
    if isinstance(rows, bool) or not isinstance(rows, int) or not _finite(rms):
        return None
    return Fit(
        family=family,
        group=group,
        kind=kind,
        params={n: float(v) for n, v in zip(names, params, strict=True)},
        stderr={n: math.nan if s is None else float(s) for n, s in zip(names, stderr, strict=True)},
        rows=rows,
        rms_log=float(rms),
        devices=sorted(devices or []),
        frameworks=sorted(frameworks or []),
    )


def fitted(
    family: str,
    group: str,
    x: Features,
    measured_s: np.ndarray,
    *,
    devices: list[str] | None = None,
    frameworks: list[str] | None = None,
    max_rows: int = MAX_ROWS,
) -> Fit:
    """:func:`costmodel.measured.efficiency.fit` of these rows: the shipped fit of exactly these
    inputs (:func:`input_digest`) when the file applies, else computed (module doc)."""
    measured_s = np.asarray(measured_s, dtype=float)
    key = input_digest(family, x, measured_s, max_rows)
    if enabled() or (_recorded is not None and _reuse):
        hit = _decode(_table(family).get(key), family, group, devices, frameworks)
        if hit is not None:
            if _recorded is not None:
                _recorded.setdefault(f"{family}\0{key}", encode_fit(hit))
            return hit
    tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    if tty:
        sys.stderr.write(f"\rfitting {family} {group or 'kernels'} ({len(measured_s):,} rows)...")
        sys.stderr.flush()
    f = fit(family, group, x, measured_s, devices=devices, frameworks=frameworks, max_rows=max_rows)
    if tty:
        sys.stderr.write("\r\033[K")
    if _recorded is not None:
        _recorded.setdefault(f"{family}\0{key}", encode_fit(f))
    return f


@contextmanager
def recording(reuse: bool = False) -> Iterator[dict[str, list[Any]]]:
    """Within it, every :func:`fitted` call computes its fit (the file set aside; with ``reuse``,
    a fit the file holds and that applies is read from it) and records it by family and input
    digest in the dict yielded (``"family\\0digest"`` keys): what ``benchmarks/build_fits.py``
    writes."""
    global _recorded, _reuse
    prev, _recorded, prev_reuse, _reuse = _recorded, {}, _reuse, reuse
    try:
        yield _recorded
    finally:
        _recorded, _reuse = prev, prev_reuse


def shipped_fits() -> dict[str, list[Any]]:
    """Every fit of the shipped file that applies to the installed corpus and code, keyed as
    :func:`recording` keys them (what ``benchmarks/build_fits.py --extend`` keeps)."""
    doc = _file()
    if doc is None:
        return {}
    return {f"{fam}\0{k}": v for fam in doc["fits"] for k, v in _table(fam).items()}


def write(path: str | Path, recorded: dict[str, list[Any]], families: list[str]) -> int:
    """Write the shipped file of ``recorded`` fits (:func:`recording`) for the installed corpus,
    its header digests over ``families`` (those the fits read); returns its size in bytes.

    Deterministic: sorted keys, no timestamp in the gzip header, so one corpus and code give one
    file byte for byte."""
    import scipy

    from .corpus import corpus_info

    info = corpus_info()
    fits: dict[str, dict[str, Any]] = {f: {} for f in sorted(families)}
    for k, v in recorded.items():
        fam, key = k.split("\0")
        fits[fam][key] = v
    doc = {
        "format": FORMAT,
        "package": info.package,
        "version": info.version,
        "code": code_digest(),
        "corpus": {f: corpus_digest(f) for f in sorted(families)},
        "built_with": {"numpy": np.__version__, "scipy": scipy.__version__},
        "fits": fits,
    }
    body = json.dumps(doc, sort_keys=True, allow_nan=False, separators=(",", ":")).encode()
    data = gzip.compress(body, compresslevel=9, mtime=0)
    from ..outfiles import atomic_write

    with atomic_write(path, "--out", binary=True) as f:
        f.write(data)
    return len(data)
