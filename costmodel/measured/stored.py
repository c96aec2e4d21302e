"""Fitted kernel models kept across processes: the persistent cache of :mod:`costmodel.formcache`.

Fitting the measured corpus is what a cold ``--predict`` command spends its time on: per
family, device, framework and dtype group a bounded least-squares fit
(:func:`costmodel.measured.efficiency.fit`, about 2.6 s each on a busy two-core machine), the
held-out refits behind the prediction intervals, and the corpus tables read and costed
(:func:`costmodel.measured.heldout.prepared`). :func:`stored` keeps each such result as an entry
of the form cache (same directory, same digest-checked text, same switch), so a later process
reads numbers back instead of fitting again. Beneath it, the fits themselves ship with the
package (:mod:`.shipped`: read back by the digest of the rows they fit, verified against the
installed wheel), so even a first process fits only what the shipped file does not hold; what
it still derives from the corpus (the residual tables and held-out errors of those fits) is
kept here. The entries every unmeasured device shares ship too (:mod:`.shipped_tables`): a miss
here is answered from them before anything is derived.

What is stored is plain data, never pickle: a :class:`~costmodel.measured.efficiency.Fit` as its
parameter and standard-error floats (:func:`encode_fits`: JSON writes a float as the shortest
text that reads back to the same double, ``repr``), shape residuals and sorted error arrays as
their float64 bytes in byte planes, compressed (:func:`encode_array`; a residual table's shape
coordinates as the whole shape values they are computed from, :func:`encode_residuals`), so a
loaded fit predicts bit for bit what the fresh one does.

Key
    :func:`costmodel.formcache.cache_key` over ``kind`` (what is stored), the corpus wheel's
    package, version and location (:func:`costmodel.measured.corpus.corpus_info`) and the
    caller's parts (family, devices, framework, dtypes). That key already carries the engine's
    version and the fingerprint of its source files (every ``.py``, ``.toml`` and ``.json`` under
    ``costmodel``, ``graphs`` and ``models``: the fitting code, the cost rules and the hardware
    catalog the features come from), so another corpus or an edited engine is a miss, never a
    stale fit.
Misses
    A missing, corrupted, tampered or mismatched entry (digest, :data:`costmodel.formcache.MAX_BYTES`,
    JSON, or the shape checks of the decoders here) is refitted and overwritten, silently: a
    cache can cost time, never an answer.
Off
    ``COSTMODEL_NO_CACHE=1`` (every persistent cache) or ``COSTMODEL_NO_FIT_CACHE=1`` (this one
    alone): nothing read or written, every fit computed in the process.
"""

from __future__ import annotations

import base64
import json
import math
import os
import zlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from .efficiency import PARAMS, Fit
from .residual import ShapeResiduals

__all__ = [
    "enabled",
    "fit_key",
    "stored",
    "encode_fits",
    "decode_fits",
    "encode_residuals",
    "decode_residuals",
    "encode_array",
    "decode_array",
    "MAX_ARRAY_BYTES",
    "BadEntry",
]

T = TypeVar("T")


class BadEntry(ValueError):
    """A stored entry whose content does not have the shape its decoder expects (a miss)."""


def enabled() -> bool:
    """The form cache is on and ``COSTMODEL_NO_FIT_CACHE`` is unset, ``""`` or ``0``."""
    from ..formcache import enabled as forms_enabled

    return forms_enabled() and os.environ.get("COSTMODEL_NO_FIT_CACHE", "") in ("", "0")


def fit_key(kind: str, parts: Sequence[Any]) -> str:
    """The entry name of ``kind`` for the caller's ``parts`` (JSON-ready: names, lists of names,
    None) and the installed corpus (module doc)."""
    from ..formcache import cache_key
    from .corpus import corpus_info

    info = corpus_info()
    return cache_key(f"fit-{kind}", info.package, info.version, info.root, json.dumps(list(parts)))


def stored(
    kind: str,
    parts: Sequence[Any],
    compute: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    *,
    family: str | None = None,
) -> T:
    """``compute()``'s value, read back from the entry of ``kind`` and ``parts`` when a valid one
    exists, else (with ``family``) from the package's shipped entry of them (:mod:`.shipped_tables`),
    else computed and stored (module doc).

    Parameters
    ----------
    kind : str
        What is stored (``groups``, ``residuals``, ``heldout``).
    parts : sequence
        The caller's parts (JSON-ready: names, lists of names, None).
    compute : callable
        Computes the value on a miss.
    encode, decode : callable
        The value to plain data and back (``decode`` raises :class:`BadEntry` on a mismatch).
    family : str, optional
        The corpus family the value is computed from: a shipped entry may answer a miss (and a
        computed value is noted while :func:`.shipped_tables.recording`).

    Returns
    -------
    object
        The value, computed or read back (the same either way).
    """
    from ..formcache import load, save
    from . import shipped_tables

    key = fit_key(kind, parts) if enabled() else None
    if key is not None:
        entry = load(key)
        if entry is not None and entry.get("kind") == kind:
            try:
                return decode(entry.get("value"))
            except BadEntry:
                pass  # a mismatched entry: refit and overwrite
    if family is not None:
        shipped_value = shipped_tables.read(kind, parts, family, decode)
        if shipped_value is not None:
            return shipped_value  # the package's: read again next time, never copied to the cache
    value = compute()
    noting = family is not None and shipped_tables.recording_now()
    if key is not None or noting:
        encoded = encode(value)
        if key is not None:
            save(key, {"kind": kind, "value": encoded})
        if noting:
            shipped_tables.note(kind, parts, str(family), encoded)
    return value


def _finite(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise BadEntry(f"{what}: {v!r} is no finite number")
    return float(v)


def _strings(v: Any, what: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise BadEntry(f"{what}: not a list of strings")
    return list(v)


def encode_fits(fits: dict[str, Fit]) -> dict[str, Any]:
    """Each group's fit as plain numbers and names (a non-finite standard error as None)."""
    return {
        grp: {
            "family": f.family,
            "group": f.group,
            "kind": f.kind,
            "params": f.params,
            "stderr": {n: (v if math.isfinite(v) else None) for n, v in f.stderr.items()},
            "rows": f.rows,
            "rms_log": f.rms_log,
            "devices": f.devices,
            "frameworks": f.frameworks,
        }
        for grp, f in fits.items()
    }


def decode_fits(value: Any) -> dict[str, Fit]:
    """The fits of :func:`encode_fits`; :class:`BadEntry` unless every field has its type and
    every parameter of the fit's kind (:data:`~costmodel.measured.efficiency.PARAMS`) is there."""
    if not isinstance(value, dict):
        raise BadEntry("fits: not an object")
    out = {}
    for grp, d in value.items():
        if not isinstance(d, dict) or d.get("kind") not in PARAMS or d.get("group") != grp:
            raise BadEntry(f"fit {grp!r}: no kind or group")
        names = [n for n, *_ in PARAMS[d["kind"]]]
        params, stderr = d.get("params"), d.get("stderr")
        if not isinstance(params, dict) or sorted(params) != sorted(names):
            raise BadEntry(f"fit {grp!r}: parameters")
        if not isinstance(stderr, dict) or sorted(stderr) != sorted(names):
            raise BadEntry(f"fit {grp!r}: standard errors")
        rows = d.get("rows")
        if not isinstance(d.get("family"), str) or isinstance(rows, bool) or not isinstance(rows, int):
            raise BadEntry(f"fit {grp!r}: family or rows")
        out[grp] = Fit(
            family=d["family"],
            group=grp,
            kind=d["kind"],
            params={n: _finite(params[n], n) for n in names},
            stderr={n: math.nan if stderr[n] is None else _finite(stderr[n], n) for n in names},
            rows=rows,
            rms_log=_finite(d.get("rms_log"), "rms_log"),
            devices=_strings(d.get("devices"), "devices"),
            frameworks=_strings(d.get("frameworks"), "frameworks"),
        )
    return out


#: the largest array :func:`decode_array` inflates, in bytes (as :data:`costmodel.formcache.MAX_BYTES`
#: bounds an entry's text: a few times the largest residual table, every measured device's rows)
MAX_ARRAY_BYTES = 256 * 2**20


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """A float array as its shape and its little-endian float64 bytes, split into byte planes,
    zlib-compressed and in base64 (``{"shape": [...], "f8_planes_zlib_b64": "..."}``): the same
    doubles bit for bit.

    JSON's text takes about 20 characters a double and Python's parser a float object each: an
    unmeasured device's residual table (every measured device's rows of a kernel group, 1.7
    million doubles) was 25 MB of text, over the form cache's read bound
    (:data:`costmodel.formcache.MAX_BYTES`), so it was written and never read back; as bytes it
    is 3 MB (its shape coordinates repeat, and compress 6-7x). The planes (the first byte of
    every double, then the second ...: the shuffle filter of HDF5 and Blosc) put the sign and
    exponent bytes, which neighbouring values share, side by side: 8 % smaller for residuals,
    17 % for sorted held-out errors, than the doubles one after another (``f8_zlib_b64``, still
    read)."""
    b = np.ascontiguousarray(a, dtype="<f8")
    planes = b.reshape(-1).view(np.uint8).reshape(-1, 8).T.tobytes()
    return {"shape": list(b.shape), "f8_planes_zlib_b64": base64.b64encode(zlib.compress(planes, 6)).decode()}


def _inflate(text: Any, shape: tuple[int, ...], planes: bool) -> np.ndarray:
    """The doubles of :func:`encode_array`'s text, exactly ``prod(shape)`` of them (``planes``: in
    byte planes)."""
    count = math.prod(shape)
    n = count * 8
    if not isinstance(text, str) or n > MAX_ARRAY_BYTES:
        raise BadEntry("array: no byte text, or too large")
    d = zlib.decompressobj()
    try:
        raw = d.decompress(base64.b64decode(text, validate=True), n + 1)
    except (ValueError, zlib.error) as exc:  # binascii.Error is a ValueError
        raise BadEntry(f"array: {exc}") from None
    if len(raw) != n or not d.eof or d.unconsumed_tail:
        raise BadEntry(f"array: {len(raw)} bytes for shape {list(shape)}")
    if planes:
        raw = np.frombuffer(raw, dtype=np.uint8).reshape(8, count).T.tobytes()
    return np.frombuffer(raw, dtype="<f8").reshape(shape).astype(float)


def decode_array(value: Any, ndim: int = 1) -> np.ndarray:
    """The float array of :func:`encode_array` (or a plain nested list of numbers), of ``ndim``
    dimensions, every entry finite."""
    if isinstance(value, dict):
        shape = value.get("shape")
        if not (
            isinstance(shape, list)
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)
        ):
            raise BadEntry("array: no shape")
        planes = "f8_planes_zlib_b64" in value
        a = _inflate(value.get("f8_planes_zlib_b64" if planes else "f8_zlib_b64"), tuple(shape), planes)
    else:
        try:
            a = np.array(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise BadEntry(f"array: {exc}") from None
    if (a.ndim != ndim and a.size) or not np.isfinite(a).all():
        raise BadEntry("array: wrong shape or non-finite entries")
    return a


#: the largest shape value stored as a whole number (:func:`encode_residuals`): every integer up to
#: it is a double
_MAX_WHOLE = 2.0**53


def _shape_values(points: np.ndarray) -> np.ndarray | None:
    """The whole shape values ``v`` (keys x rows) whose ``log2(1 + v)`` are ``points`` (rows x
    keys, :func:`costmodel.measured.residual.encode`) bit for bit here, or None when a point is
    not one."""
    if not points.size:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.round(np.exp2(points) - 1.0)
    if not (np.isfinite(v).all() and (v >= 0).all() and (v <= _MAX_WHOLE).all()):
        return None
    if _log_points(v.T).tobytes() != np.ascontiguousarray(points, dtype=float).tobytes():
        return None
    return np.ascontiguousarray(v.T)


def _log_points(values: np.ndarray) -> np.ndarray:
    """Shape coordinates of whole shape values (keys x rows): ``log2(1 + v)`` (rows x keys), the
    expression :func:`costmodel.measured.residual.encode` evaluates, on a C-ordered array."""
    return np.log2(1.0 + np.ascontiguousarray(values.T, dtype=float))


def encode_residuals(res: dict[str, list[ShapeResiduals]]) -> dict[str, Any]:
    """Per group, each source's shape keys, points and residuals (:func:`encode_array`).

    A source's points are ``log2(1 + v)`` of its rows' whole shape values (``m``, ``heads`` ...):
    where each is, the values are stored instead, key by key (``values``, keys x rows), and read
    back through the same expression (12x smaller: a grid of a few hundred sizes per key); else
    the points themselves."""

    def one(s: ShapeResiduals) -> dict[str, Any]:
        whole = _shape_values(s.points)
        where = {"points": encode_array(s.points)} if whole is None else {"values": encode_array(whole)}
        return {"keys": list(s.keys), **where, "residuals": encode_array(s.residuals)}

    return {grp: [one(s) for s in srcs] for grp, srcs in res.items()}


def decode_residuals(value: Any) -> dict[str, list[ShapeResiduals]]:
    """The residuals of :func:`encode_residuals` (one point of ``len(keys)`` per residual)."""
    if not isinstance(value, dict):
        raise BadEntry("residuals: not an object")
    out: dict[str, list[ShapeResiduals]] = {}
    for grp, srcs in value.items():
        if not isinstance(srcs, list):
            raise BadEntry(f"residuals {grp!r}: not a list")
        out[grp] = []
        for s in srcs:
            if not isinstance(s, dict):
                raise BadEntry(f"residuals {grp!r}: not an object")
            keys = _strings(s.get("keys"), "keys")
            r = decode_array(s.get("residuals"))
            if "values" in s:
                v = decode_array(s.get("values"), 2)
                if v.ndim != 2 or v.shape[0] != len(keys):
                    raise BadEntry(f"residuals {grp!r}: shape values of {v.shape[0]} keys for {len(keys)}")
                if (v < 0).any() or (v > _MAX_WHOLE).any() or (v != np.round(v)).any():
                    raise BadEntry(f"residuals {grp!r}: shape values not whole numbers >= 0")
                p = _log_points(v)
            else:
                p = decode_array(s.get("points"), 2)
            if p.size != len(r) * len(keys):
                raise BadEntry(f"residuals {grp!r}: {p.size} coordinates for {len(r)} points of {len(keys)}")
            p = p.reshape(len(r), len(keys))
            out[grp].append(ShapeResiduals(tuple(keys), p, r))
    return out
