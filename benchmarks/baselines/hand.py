"""A fair hand-written baseline: the decode step's per-kernel sum, written out by a person from
the graph's coefficients, with the obvious care a person would take (terms another term bounds
above coefficient by coefficient dropped, monomials computed once)."""

from __future__ import annotations

import numpy as np
import sympy

from costmodel import as_float, bound
from costmodel.graph import COST, REPEAT, op_nodes
from costmodel.symbols import B, ctx

MONOMIALS = ((0, 0), (1, 0), (0, 1), (1, 1))


def kernels(g, hw) -> list[tuple[float, list[dict[tuple[int, int], float]]]]:
    """[(repeat, [{(i, j): coefficient of B^i ctx^j}, ...])] per kernel, dominated terms dropped."""
    out = []
    for n in op_nodes(g):
        terms = bound(g.nodes[n][COST], hw).terms
        if not terms:
            continue
        polys = [
            {m: as_float(c) for m, c in sympy.Poly(sympy.expand(t), B, ctx).as_dict().items()}
            for t in terms.values()
        ]
        assert all(set(p) <= set(MONOMIALS) for p in polys), "decode terms are bilinear in B and ctx"
        kept = [
            p
            for j, p in enumerate(polys)
            if not any(
                i != j and all(q.get(m, 0.0) >= c for m, c in p.items()) and (q != p or i < j)
                for i, q in enumerate(polys)
            )
        ]
        out.append((as_float(g.nodes[n].get(REPEAT, 1)), kept))
    return out


def scalar(ks):
    """``T(b, x)`` in plain Python floats."""
    flat = [(rep, [[(MONOMIALS.index(m), c) for m, c in p.items()] for p in polys]) for rep, polys in ks]

    def step(b: float, x: float) -> float:
        mono = (1.0, b, x, b * x)
        total = 0.0
        for rep, polys in flat:
            total += rep * max(sum(c * mono[k] for k, c in poly) for poly in polys)
        return total

    return step


def vector(ks):
    """``T(b, x)`` over numpy arrays."""

    def step(b: np.ndarray, x: np.ndarray) -> np.ndarray:
        mono = {(0, 0): 1.0, (1, 0): b, (0, 1): x, (1, 1): b * x}
        total = np.zeros_like(b)
        for rep, polys in ks:
            worst = None
            for poly in polys:
                v = sum(c * mono[m] for m, c in poly.items())
                worst = v if worst is None else np.maximum(worst, v)
            total += rep * worst
        return total

    return step
