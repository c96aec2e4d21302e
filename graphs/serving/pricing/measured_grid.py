"""The measured composition of a model step: the corpus's own latencies for its kernels.

:func:`measured_latency` looks each GEMM, attention and all-reduce up on the
measured grid (the fastest kernel per shape, :func:`costmodel.measured.heldout.prepared`),
interpolating linearly in log-latency over log-shape between grid points;
:func:`graphs.serving.pricing.predict.predict_step` adds it beside its prediction with
``measured=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costmodel.errors import CostModelError

__all__ = ["measured_latency"]


def measured_latency(family: str, device: str, framework: str, rows: list[dict[str, Any]]) -> np.ndarray:
    """Measured seconds of ``rows`` from the corpus grid (fastest kernel per shape).

    Exact grid points are read as measured; a GEMM off the grid is interpolated
    linearly in ``log t`` over ``log m``, then ``log n``, then ``log k`` between the
    neighbouring measured points (the grid may be incomplete); a GEMM larger
    than the grid in ``m`` or ``n`` is the sum of its blocks; an attention or
    all-reduce row must lie on the grid.

    Parameters
    ----------
    family : str
        The kernel family (``gemm``, ``context_attention``, ``generation_attention``,
        ``all_reduce`` ...).
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    rows : list of dict
        The kernel shapes to read (the family's shape fields).

    Returns
    -------
    numpy.ndarray
        Seconds per row.

    Raises
    ------
    CostModelError
        When an attention or all-reduce row is off the measured grid.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.heldout import SHAPE_KEYS, prepared

    df, _ = prepared(family, device)
    df = df[df["framework"] == framework]
    out = np.empty(len(rows))
    if family == "gemm":
        for i, r in enumerate(rows):
            sub = df[df["dtype_group"] == r["dtype"]]
            table: dict[tuple[int, ...], float] = {  # (m, n, k) -> seconds
                (int(m), int(n), int(k)): t
                for m, n, k, t in zip(sub["m"], sub["n"], sub["k"], sub["latency_s"], strict=True)
            }
            mmax = max(key[0] for key in table)
            nmax = max(key[1] for key in table)
            total = 0.0
            # a GEMM wider or taller than the grid is measured as its column/row blocks
            for mm in _chunks(r["m"], mmax):
                for nn in _chunks(r["n"], nmax):
                    total += _nested_interp(table, (mm, nn, r["k"]), family, device, framework)
            out[i] = total
        return out
    keys = SHAPE_KEYS[family]
    for i, r in enumerate(rows):
        sel = np.ones(len(df), dtype=bool)
        for k in keys:
            sel &= df[k].to_numpy(dtype=float) == float(r[k])
        if family != "all_reduce":
            sel &= (df["dtype_group"] == f"{r['attn_dtype']}/{r['kv_dtype']}").to_numpy()
        hit = df["latency_s"].to_numpy()[sel]
        if not len(hit):
            raise CostModelError(f"{family} shape {r} is not on the measured grid of {device}/{framework}")
        out[i] = float(hit.min())
    return out


def _chunks(x: float, top: int) -> list[float]:
    full, rest = divmod(float(x), top)
    return [float(top)] * int(full) + ([rest] if rest else [])


def _bracket(values: list[int], x: float) -> tuple[int, int]:
    vs = sorted(set(values))
    if x < vs[0] or x > vs[-1]:
        raise CostModelError(f"{x:g} lies outside the measured range {vs[0]}..{vs[-1]}")
    lo = max(v for v in vs if v <= x)
    hi = min(v for v in vs if v >= x)
    return lo, hi


def _lerp_log(x: float, lo: int, hi: int, tlo: float, thi: float) -> float:
    if lo == hi:
        return tlo
    w = (np.log(x) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return float(np.exp((1 - w) * np.log(tlo) + w * np.log(thi)))


def _nested_interp(table: dict[tuple[int, ...], float], q: tuple[float, ...], *where: str) -> float:
    """Log-log interpolation axis by axis over a possibly incomplete grid (m, then n, then k)."""

    def rec(prefix: tuple[int, ...], axis: int) -> float:
        if axis == len(q):
            return table[prefix]
        vals = [key[axis] for key in table if key[:axis] == prefix]
        if not vals:
            raise CostModelError(f"no measured point under {prefix} on {'/'.join(where)}")
        lo, hi = _bracket(vals, q[axis])
        return _lerp_log(q[axis], lo, hi, rec((*prefix, lo), axis + 1), rec((*prefix, hi), axis + 1))

    return rec((), 0)
