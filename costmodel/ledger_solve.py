"""The capacity solve behind :func:`costmodel.ledger.max_batch` and ``max_context``, on plain
numbers: the largest whole batch (or context) whose ledger total fits a capacity.

Light on purpose (no sympy): the command line's cached cards (:mod:`graphs.serving.present.cards`)
solve their stored ledger with the same function the symbolic ledger uses.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidDimensionError

__all__ = ["GIB", "LedgerFit", "affine_root", "check_upper", "solve_capacity"]

#: bytes in a GiB (the unit the ledger prints)
GIB = 1024**3


@dataclass(frozen=True)
class LedgerFit:
    """Result of a capacity solve."""

    value: int  #: the largest batch (or context) that fits; 0 if none
    capacity_bytes: float
    at_value: dict[str, float]  #: the terms at ``value`` (or at 1 when nothing fits)
    at_next: dict[str, float]  #: the terms one step beyond
    overflowing_term: str  #: the term that grows past the capacity first
    shortfall_bytes: float  #: how much is missing at the smallest setting (when nothing fits)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check_upper(upper: object) -> int:
    """``upper`` (a search limit) checked as a whole number >= 1.

    Parameters
    ----------
    upper : int
        The largest batch or context a capacity search tries.

    Returns
    -------
    int
        ``upper`` itself.

    Raises
    ------
    InvalidDimensionError
        When ``upper`` is a bool, not integral, or below 1.

    >>> check_upper(0)
    Traceback (most recent call last):
    ...
    costmodel.errors.InvalidDimensionError: upper must be a whole number >= 1, got 0
    """
    if isinstance(upper, bool) or not isinstance(upper, numbers.Integral) or upper < 1:
        raise InvalidDimensionError(f"upper must be a whole number >= 1, got {upper!r}")
    return int(upper)


def affine_root(total: Any, cap: float, upper: int) -> int | None:
    """The largest whole ``x`` in ``[1, upper]`` with ``total(x) <= cap`` when ``total`` is affine in
    ``x`` (every overhead policy keeps the ledger affine in batch and in context), else None.

    ``x* = floor((cap - T(0)) / (T(1) - T(0)))``, then nudged by whole steps against float rounding
    so that ``T(x*) <= cap < T(x* + 1)`` holds exactly as evaluated.
    """
    t0, t1 = total(0), total(1)
    slope = t1 - t0
    if slope <= 0 or not math.isclose(total(1024), t0 + 1024 * slope, rel_tol=1e-12):
        return None
    x = max(1, min(upper, math.floor((cap - t0) / slope)))
    if not math.isclose(total(x), t0 + x * slope, rel_tol=1e-12):
        return None  # affine on the probes only (a capped cache bends beyond them): search instead
    while x > 1 and total(x) > cap:
        x -= 1
    while x < upper and total(x + 1) <= cap:
        x += 1
    return x


def solve_capacity(capacity: float, at: Callable[[int], dict[str, float]], upper: int) -> LedgerFit:
    """Largest x in ``[1, upper]`` with ``total(x) <= capacity``; ``at(x)`` gives the terms and
    total (bytes) as floats.

    Parameters
    ----------
    capacity : float
        Bytes available: finite and positive.
    at : callable
        ``x -> {"weights", "kv_cache", "activations", "overhead", "total"}`` in bytes, growing with ``x``.
    upper : int
        The largest ``x`` searched, a whole number >= 1.

    Returns
    -------
    LedgerFit
        ``value`` 0 when even ``x = 1`` does not fit.

    Raises
    ------
    InvalidDimensionError
        When ``capacity`` is not a finite positive number or ``upper`` not a whole number >= 1.

    >>> solve_capacity(10.0, lambda x: {"weights": 2.0, "kv_cache": 3.0 * x, "activations": 0.0,
    ...                                 "overhead": 0.0, "total": 2.0 + 3.0 * x}, 100).value  # (10 - 2) // 3
    2
    >>> solve_capacity(float("nan"), lambda x: {}, 100)
    Traceback (most recent call last):
    ...
    costmodel.errors.InvalidDimensionError: capacity must be a finite positive number of bytes, got nan
    """
    cap = capacity
    if not (isinstance(cap, numbers.Real) and math.isfinite(cap) and cap > 0):
        raise InvalidDimensionError(f"capacity must be a finite positive number of bytes, got {cap!r}")
    check_upper(upper)

    def total(v: int) -> float:
        return at(v)["total"]

    first = at(1)
    if first["total"] > cap:
        # nothing fits: blame the weights if they alone exceed the capacity, else the largest other term
        others = {k: first[k] for k in ("kv_cache", "activations", "overhead")}
        culprit = "weights" if first["weights"] >= cap else max(others, key=lambda k: others[k])
        return LedgerFit(0, cap, first, at(2), culprit, first["total"] - cap)
    lo = affine_root(total, cap, upper)
    if lo is None:  # not affine: exponential then binary search (totals grow monotonically)
        hi = 1
        while hi < upper and total(min(2 * hi, upper)) <= cap:
            hi = min(2 * hi, upper)
        if hi >= upper:
            lo = upper
        else:
            lo, hi = hi, min(2 * hi, upper)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if total(mid) <= cap else (lo, mid)
    if lo >= upper:
        t = at(upper)
        return LedgerFit(upper, cap, t, t, "none (search limit reached)", 0.0)
    hi = lo + 1
    here, nxt = at(lo), at(hi)
    grow = {k: nxt[k] - here[k] for k in ("kv_cache", "activations", "overhead")}
    return LedgerFit(lo, cap, here, nxt, max(grow, key=lambda k: grow[k]), 0.0)
