"""The capacity solve behind :func:`costmodel.ledger.max_batch` and ``max_context``, on plain
numbers: the largest whole batch (or context) whose ledger total fits a capacity.

Light on purpose (no sympy): the command line's cached cards (:mod:`graphs.serving.present.cards`)
solve their stored ledger with the same function the symbolic ledger uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import InvalidDimensionError

__all__ = ["GIB", "LedgerFit", "affine_root", "solve_capacity"]

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
    """Largest x with ``total(x) <= capacity``; ``at(x)`` gives the terms and total (bytes) as floats."""
    cap = capacity
    if cap <= 0:
        raise InvalidDimensionError(f"capacity must be positive, got {cap}")

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
