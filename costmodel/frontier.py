"""Vectorised evaluation of symbolic totals and Pareto frontiers.

Sweeps compile a sympy expression once with ``lambdify`` to numpy and
evaluate it on a whole grid (no per-point substitution), then keep the
non-dominated points.

>>> import numpy as np, sympy
>>> from costmodel.symbols import dim
>>> x, y = dim("x_1"), dim("y_1")
>>> f = compile_expr(sympy.Max(x, 2 * y), (x, y))
>>> f(np.array([1.0, 3.0]), np.array([1.0, 1.0])).tolist()
[2.0, 3.0]
>>> pareto_mask(np.array([[1, 5], [2, 4], [1, 3], [3, 1]]), maximize=(True, True)).tolist()
[True, True, False, True]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .errors import CostModelError

if TYPE_CHECKING:  # sympy is imported where a form is compiled: the Pareto filter stays light
    import sympy

__all__ = ["compile_expr", "pareto_mask"]


def compile_expr(expr: sympy.Expr | str, symbols: Sequence[sympy.Symbol]) -> Callable[..., np.ndarray]:
    """``lambdify`` ``expr`` over ``symbols`` to a numpy function.

    Every free symbol must be among ``symbols``; results broadcast to the
    inputs' shape (a constant expression gives a filled array). A string goes
    through the safe expression parser (:func:`costmodel.expr.to_expr`), never ``sympify``.

    Parameters
    ----------
    expr : sympy.Expr or str
        The closed form (a str is parsed safely).
    symbols : sequence of sympy.Symbol
        The function's arguments, in order; every free symbol of ``expr`` among them.

    Returns
    -------
    callable
        ``f(*arrays) -> numpy.ndarray`` of floats, broadcast over the arguments.

    Raises
    ------
    CostModelError
        When ``expr`` depends on a symbol not in ``symbols`` (named).

    >>> from costmodel.symbols import dim
    >>> f = compile_expr("2*B + 1", [dim("B")])
    >>> f([1, 2, 3]).tolist()
    [3.0, 5.0, 7.0]
    """
    import sympy

    from .expr import to_expr

    expr = to_expr(expr, field="expr")
    if isinstance(symbols, str) or not all(isinstance(x, sympy.Symbol) for x in symbols):
        # compile_expr("M*2", "M") read the text as its letters and said "M is not among them"
        raise CostModelError(
            f"symbols must be a sequence of sympy Symbols (dim('M')), got {type(symbols).__name__} {symbols!r:.40}"
        )
    extra = expr.free_symbols - set(symbols)
    if extra:
        names = ", ".join(sorted(str(s) for s in extra))
        raise CostModelError(f"expression depends on {names}, not among the sweep variables; bind them first")
    fn = sympy.lambdify(tuple(symbols), expr, modules="numpy")

    def call(*args: np.ndarray) -> np.ndarray:
        arrays = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in args))
        out = np.asarray(fn(*arrays), dtype=float)
        return np.broadcast_to(out, arrays[0].shape).copy() if arrays else out

    return call


def _pareto_2d(p: np.ndarray) -> np.ndarray:
    """Non-dominated rows of an n x 2 array (both maximised), vectorised: sort by the first
    objective (then the second) descending; a row is kept when its second beats every row
    before it, or when it equals a kept row exactly (an identical point is not dominated)."""
    n = len(p)
    if n > 65536:  # drop in O(n) what a point in a higher band of the first objective dominates
        keep = _prefilter_2d(p)
        mask = np.zeros(n, dtype=bool)
        idx = np.flatnonzero(keep)
        mask[idx] = _pareto_2d(p[idx]) if len(idx) < n else _sort_2d(p)
        return mask
    return _sort_2d(p)


def _prefilter_2d(p: np.ndarray, bands: int = 1024) -> np.ndarray:
    """Rows not dominated by any row in a strictly higher band of the first objective.

    Band edges are quantiles of the first objective; a row in a higher band has a strictly
    larger first objective, so if it also has a second objective at least as large it
    dominates. Keeps every frontier row; drops most others.
    """
    edges = np.unique(np.quantile(p[:, 0], np.linspace(0, 1, bands + 1)[1:-1]))
    band = np.searchsorted(edges, p[:, 0], side="right")
    best = np.full(len(edges) + 2, -np.inf)
    np.maximum.at(best, band, p[:, 1])
    above = np.maximum.accumulate(best[::-1])[::-1]  # best second objective in bands >= k
    return p[:, 1] > above[band + 1]


def _sort_2d(p: np.ndarray) -> np.ndarray:
    n = len(p)
    order = np.lexsort((-p[:, 1], -p[:, 0]))
    q = p[order]
    prev_best = np.concatenate(([-np.inf], np.maximum.accumulate(q[:-1, 1])))
    kept = q[:, 1] > prev_best
    same = np.zeros(n, dtype=bool)
    same[1:] = np.all(q[1:] == q[:-1], axis=1)  # duplicates sit next to each other after the sort
    group = np.cumsum(~same) - 1  # index of each run of identical rows
    first_kept = kept[np.flatnonzero(~same)]
    mask = np.empty(n, dtype=bool)
    mask[order] = first_kept[group]
    return mask


def pareto_mask(points: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``points`` (n x k).

    A point is dominated when another is at least as good in every
    objective and strictly better in one. ``maximize[j]`` says the sense of
    objective ``j``. O(n log n) and vectorised for two objectives, O(n * front) otherwise.

    Parameters
    ----------
    points : array_like
        ``n x k`` objective values, one row per candidate.
    maximize : sequence of bool
        ``k`` senses: True maximises objective ``j``, False minimises it.

    Returns
    -------
    numpy.ndarray
        ``n`` booleans: True for the non-dominated rows.

    Raises
    ------
    CostModelError
        When ``points`` is not ``n x len(maximize)``.

    >>> pareto_mask([[1, 1], [2, 0], [0, 0]], [True, True]).tolist()
    [True, True, False]
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != len(maximize):
        raise CostModelError(f"points must be n x {len(maximize)}, got shape {pts.shape}")
    signs = np.array([1.0 if m else -1.0 for m in maximize])
    p = pts * signs  # now maximise everything
    n = len(p)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    if p.shape[1] == 2:
        return _pareto_2d(p)
    order = np.argsort(-p.sum(axis=1))
    mask[order[_sequential_front(p[order])]] = True
    return mask


def _sequential_front(q: np.ndarray, chunk: int = 512) -> np.ndarray:
    """Rows of ``q`` (maximised, in the order they are tried) dominated by no row before them.

    That is the front a one-at-a-time filter keeps (a row joins when no row kept so far
    dominates it): a row dominated by an earlier row that was itself dropped is dominated by
    the earlier kept row that dropped it (dominance is transitive). So a chunk of rows is
    tested at once against the rows kept before it, and the chunk's survivors against their
    own earlier survivors: numpy over ``chunk x front`` blocks instead of a Python loop per pair.
    """
    n = len(q)
    keep = np.zeros(n, dtype=bool)
    front = q[:0]
    for lo in range(0, n, chunk):
        idx = np.arange(lo, min(n, lo + chunk))
        idx = idx[~_dominated_by(front, q[idx]).any(axis=0)]
        c = q[idx]
        inner = np.triu(_dominated_by(c, c), k=1)  # [j, i] with j < i: an earlier survivor dominates
        idx = idx[~inner.any(axis=0)]
        keep[idx] = True
        front = np.concatenate([front, q[idx]])
    return keep


def _dominated_by(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``out[j, i]``: row ``a[j]`` dominates row ``b[i]`` (all >=, one >: maximised)."""
    ge = np.ones((len(a), len(b)), dtype=bool)
    gt = np.zeros((len(a), len(b)), dtype=bool)
    for u in range(a.shape[1]):
        x, y = a[:, u, None], b[None, :, u]
        ge &= x >= y
        gt |= x > y
    return ge & gt
