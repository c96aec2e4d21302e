"""A compiled step priced by a predictor, vectorised over arrays: what sweeps and searches evaluate.

:func:`priced_step` gives, for a :class:`~graphs.serving.pricing.predictor.Predictor`, an object with
the :class:`~graphs.serving.step.compiled.CompiledStep` calls every analysis uses (``step``,
``step_array``): the compiled step itself for the bound, else a :class:`PricedStep` whose
step time is the sum over the graph's op nodes of

.. math:: t_k(x) = \\max\\big(\\hat t_k(x),\\; t^{roof}_k(x)\\big)

with ``t^roof_k`` the node's compiled roofline term (the bound's step is exactly
``sum_k t^roof_k``, :func:`graphs.serving.step.compiled.compile_step_time`), so a priced step is
never faster than its bound, and ``hat t_k`` the predictor's price of the node's measured
kernel (:func:`graphs.serving.pricing.predictor.tabulate`, the corpus pricing of
:func:`graphs.serving.pricing.predict.predict_step`). A node the corpus does not measure keeps its
bound. Per call, a node's prediction depends on the dims its parameters read that vary in the
call (the others are fixed at their one value):

* one varying dim (a GEMM's rows, a prefill's prompt): priced exactly at each distinct value
  (a kernel's time is a staircase in its rows, which no interpolation follows), memoised;
* two (decode attention over batch and context): priced on a geometric mesh of
  ``round(2^{j/4})`` (every whole number up to 16) spanning the call's values, and interpolated
  bilinearly in ``(log x, log y, log t)`` (attention's time is smooth in both);
* more: the bound prices it (said in the coverage).

:meth:`PricedStep.coverage_array` splits the priced seconds at given points by what they rest on
(measured, neighbour, bound; :mod:`graphs.serving.pricing.kernel_sources`), as the simulator's coverage
line does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import sympy

from costmodel.frontier import compile_expr
from costmodel.graph import REPEAT, op_nodes
from costmodel.hardware import Hardware, get_device
from costmodel.memo import BoundedCache

from ..step.compiled import CompiledStep, compiled_step
from ..step.mixed import node_time_expr
from .kernel_sources import Coverage
from .predictor import CLAMPED, Predictor, tabulate, token_grid
from .protocols import PointStep

__all__ = ["PricedStep", "priced_step", "mesh_axis"]

#: the bound-share reason of a node whose parameters vary in three or more dims of one call
_MANY_DIMS = "kernels varying in three or more dims of one evaluation: not tabulated"
#: most distinct values of one dim priced exactly in one call (beyond: the token grid, interpolated)
_EXACT_MAX = 16384


def mesh_axis(lo: float, hi: float, per_octave: int = 4, dense: int = 16) -> np.ndarray:
    """Whole numbers ``lo .. hi`` (inclusive ends): every one up to ``dense``, then
    ``round(2^{j/per_octave})``.

    Parameters
    ----------
    lo, hi : float
        The ends (whole numbers, both included).
    per_octave : int
        Geometric points per doubling beyond ``dense``.
    dense : int
        Every whole number up to this one is on the axis.

    Returns
    -------
    numpy.ndarray
        The axis (float), ascending and unique.
    """
    g = token_grid(dense, math.ceil(max(2.0, hi) * 2 ** (1 / per_octave)), per_octave)
    g = g[(g > lo) & (g < hi)]
    return np.unique(np.concatenate([[float(lo), float(hi)], g]))


def _interp1(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Piecewise linear in ``(log x, log y)``, extended linearly beyond the ends."""
    lx, ly = np.log(xs), np.log(ys)
    if len(xs) == 1:
        return np.full_like(x, ys[0], dtype=float)
    q = np.log(x)
    i = np.clip(np.searchsorted(lx, q, side="right") - 1, 0, len(lx) - 2)
    w = (q - lx[i]) / (lx[i + 1] - lx[i])
    return np.exp(ly[i] + (ly[i + 1] - ly[i]) * w)


def _interp2(ax: np.ndarray, ay: np.ndarray, table: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear in the logs on the mesh ``ax x ay`` (``table[i, j]`` seconds)."""

    def seg(a: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        la = np.log(a)
        if len(a) == 1:
            return np.zeros(q.shape, dtype=int), np.zeros(q.shape)
        lq = np.log(q)
        i = np.clip(np.searchsorted(la, lq, side="right") - 1, 0, len(la) - 2)
        return i, (lq - la[i]) / (la[i + 1] - la[i])

    lt = np.log(table)
    if lt.shape[0] == 1:
        lt = np.vstack([lt, lt])
        ax = np.array([ax[0], ax[0] * 2])
    if lt.shape[1] == 1:
        lt = np.hstack([lt, lt])
        ay = np.array([ay[0], ay[0] * 2])
    i, w = seg(ax, x)
    j, v = seg(ay, y)
    lo = lt[i, j] * (1 - v) + lt[i, j + 1] * v
    hi = lt[i + 1, j] * (1 - v) + lt[i + 1, j + 1] * v
    return np.exp(lo * (1 - w) + hi * w)


class _Node:
    """One op node: its roofline time over the step's dims, and which dims its prices read."""

    def __init__(self, name: str, d: dict[str, Any], hw: Hardware, syms: tuple[sympy.Symbol, ...]) -> None:
        self.name = name
        self.roof = compile_expr(node_time_expr(d, hw), syms)
        free: set[sympy.Symbol] = set()
        for v in [*(d.get("params") or {}).values(), d.get(REPEAT, 1)]:
            if isinstance(v, sympy.Basic):
                free |= v.free_symbols
        self.deps = tuple(i for i, s in enumerate(syms) if s in free)


class PricedStep:
    """A compiled step with its measured kernels priced by a predictor (module doc)."""

    def __init__(self, cs: CompiledStep, predictor: Predictor) -> None:
        if predictor.is_bound:
            raise ValueError("the bound predictor is the compiled step itself (priced_step)")
        assert cs.graph is not None
        self.compiled = cs
        self.predictor = predictor
        self.hardware = cs.hardware
        self.dims = cs.dims
        self.label = cs.label
        self.syms = tuple(cs.forms.symbols)
        g = cs.graph
        self._nodes = [_Node(str(n), g.nodes[n], cs.hardware, self.syms) for n in op_nodes(g)]
        self._names = {nd.name: n for nd, n in zip(self._nodes, op_nodes(g), strict=True)}

    # --------------------------------------------------------------- one node's prediction
    def _plan(self, nd: _Node, call: _Call) -> tuple[Any, np.ndarray | None, Any]:
        """Where node ``nd`` is priced for the (flat) arrays of ``call`` (module doc): a key
        shared by every node priced on the same points, those points (None: not tabulated), and
        how to map the priced values back onto the arrays."""
        arrays, base = call.arrays, call.base
        vary = tuple(i for i in nd.deps if call.varies[i])
        if not vary:
            return ("const",), base[None, :], ("const",)
        if len(vary) == 1:
            (i,) = vary
            u, inv = call.unique(i)
            if len(u) > _EXACT_MAX:
                grid = mesh_axis(float(u[0]), float(u[-1]), 8, 8192)
                pts = np.tile(base, (len(grid), 1))
                pts[:, i] = grid
                return (i, "grid"), pts, ("interp1", grid, i)
            pts = np.tile(base, (len(u), 1))
            pts[:, i] = u
            return (i, "exact"), pts, ("exact", inv)
        if len(vary) == 2:
            i, j = vary
            ax = mesh_axis(float(arrays[i].min()), float(arrays[i].max()))
            ay = mesh_axis(float(arrays[j].min()), float(arrays[j].max()))
            pts = np.tile(base, (len(ax) * len(ay), 1))
            mx, my = np.meshgrid(ax, ay, indexing="ij")
            pts[:, i], pts[:, j] = mx.ravel(), my.ravel()
            return (i, j), pts, ("interp2", ax, ay, i, j)
        return None, None, None

    @staticmethod
    def _back(how: Any, vals: np.ndarray, arrays: list[np.ndarray]) -> np.ndarray:
        n = arrays[0].size
        if how[0] == "const":
            return np.full(n, vals[0])
        if how[0] == "exact":
            return vals[how[1]]
        if how[0] == "interp1":
            return _interp1(how[1], vals, arrays[how[2]])
        _, ax, ay, i, j = how
        return _interp2(ax, ay, vals.reshape(len(ax), len(ay)), arrays[i], arrays[j])

    def _predictions(self, arrays: list[np.ndarray]) -> list[tuple[np.ndarray | None, str, str, str]]:
        """Every node's prediction at the (flat) ``arrays``: the nodes priced on the same points
        in one corpus call (one per measured family and dtype), with what it rests on and where
        its clamped seconds go."""
        assert self.compiled.graph is not None
        out: list[tuple[np.ndarray | None, str, str, str]] = [(None, "bound", _MANY_DIMS, CLAMPED)] * len(
            self._nodes
        )
        groups: dict[Any, tuple[np.ndarray, list[tuple[int, Any]]]] = {}
        call = _Call(arrays)
        for k, nd in enumerate(self._nodes):
            key, pts, how = self._plan(nd, call)
            if pts is not None:
                groups.setdefault(key, (pts, []))[1].append((k, how))
        for pts, members in groups.values():
            names = [self._names[self._nodes[k].name] for k, _ in members]
            tabs = tabulate(self.hardware, self.predictor, self.compiled.graph, self.syms, names, pts)
            for (k, how), t in zip(members, tabs, strict=True):
                vals = None if t.values is None else self._back(how, t.values, arrays)
                out[k] = (vals, t.source, t.basis, t.below_bound)
        return out

    def _parts(self, flat: list[np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray | None, str, str, str]]:
        """Per node over the flat arrays: its priced seconds, the mask where the clamp acted
        (None: nowhere), what the unclamped seconds rest on, and the bound reason of the clamped."""
        for nd, (pred, src, basis, below_basis) in zip(self._nodes, self._predictions(flat), strict=True):
            roof = nd.roof(*flat)
            if pred is None:
                yield roof, None, "bound", basis, below_basis
                continue
            below = pred < roof
            yield np.maximum(pred, roof), (below if below.any() else None), src, basis, below_basis

    @staticmethod
    def _flat(arrays: tuple[Any, ...]) -> tuple[tuple[int, ...], list[np.ndarray]]:
        b = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in arrays))
        return b[0].shape, [x.ravel() for x in b]

    # --------------------------------------------------------------- CompiledStep's calls
    def step_array(self, *arrays: Any) -> np.ndarray:
        """The priced step time (s) over arrays (broadcast), vectorised.

        Parameters
        ----------
        *arrays : numpy.ndarray
            The step's dims as arrays (broadcast).

        Returns
        -------
        numpy.ndarray
            Seconds per point.
        """
        shape, flat = self._flat(arrays)
        total = np.zeros(flat[0].size)
        for t, *_ in self._parts(flat):
            total += t
        return total.reshape(shape)

    def step(self, *values: float) -> float:
        """The priced step time (s) at one point.

        Parameters
        ----------
        *values : float
            The step's dims, in order.

        Returns
        -------
        float
            Seconds.
        """
        return float(self.step_array(*values))

    def coverage_array(self, *arrays: Any) -> Coverage:
        """The priced seconds summed over the points of ``arrays``, by what they rest on.

        Parameters
        ----------
        *arrays : numpy.ndarray
            The points' dims as arrays (broadcast).

        Returns
        -------
        Coverage
        """
        acc = {"measured": 0.0, "neighbour": 0.0, "bound": 0.0}
        why: dict[str, dict[str, float]] = {"neighbour": {}, "bound": {}}

        def add(src: str, basis: str, s: float) -> None:
            acc[src] += s
            if src in why and s > 0:
                why[src][basis] = why[src].get(basis, 0.0) + s

        for t, below, src, basis, below_basis in self._parts(self._flat(arrays)[1]):
            clamped = float(t[below].sum()) if below is not None else 0.0
            add("bound", below_basis, clamped)
            add(src, basis, float(t.sum()) - clamped)
        return Coverage(acc["measured"], acc["neighbour"], acc["bound"], why["neighbour"], why["bound"])

    def memo(self, key: str, build: Any) -> Any:
        """The compiled step's memo (derived quantities do not depend on the pricing).

        Parameters
        ----------
        key : str
            The quantity's name.
        build : callable
            ``build()`` makes it (once per compiled step and key).

        Returns
        -------
        object
        """
        return self.compiled.memo(key, build)


def _varies(a: np.ndarray) -> bool:
    return bool(a.size) and bool(np.any(a != a.flat[0]))


class _Call:
    """The (flat) arrays of one evaluation, with what every node's plan asks of them computed
    once: each array's first value, whether it varies, and its distinct values (sorted, with
    the inverse), the last only when asked (a sort of the whole array)."""

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.arrays = arrays
        self.base = np.array([float(a.flat[0]) if a.size else 1.0 for a in arrays])
        self.varies = [_varies(a) for a in arrays]
        self._unique: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def unique(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if i not in self._unique:
            self._unique[i] = np.unique(self.arrays[i], return_inverse=True)
        return self._unique[i]


_CACHE: BoundedCache[PricedStep] = BoundedCache("priced_step", 256)


def priced_step(
    config: Any,
    device: Hardware | str,
    phase: str,
    *,
    predictor: Predictor | None = None,
    **kw: Any,
) -> PointStep:
    """:func:`graphs.serving.step.compiled.compiled_step` priced by ``predictor``: the compiled step
    itself for the bound (the identity on its numbers), else its :class:`PricedStep` (built once
    per compiled step and predictor in this process).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    predictor : Predictor, optional
        The kernel predictor (default: the bound).
    **kw
        The rest of :func:`compiled_step`'s keywords (``tp``, ``ep``, ``chunked``, ``logits``,
        ``routing``).

    Returns
    -------
    PointStep
        The compiled step, or its :class:`PricedStep` (s per step at any point).
    """
    cs = compiled_step(config, get_device(device), phase, **kw)
    pred = predictor or Predictor()
    if pred.is_bound:
        return cs
    # keyed by the compiled step itself (steps hash by identity): an entry never outlives its step
    return _CACHE.get_or_build((cs, pred), lambda: PricedStep(cs, pred))
