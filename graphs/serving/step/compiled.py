"""Compile once, evaluate in microseconds: a phase's step costs as plain functions of its free dims.

For one ``(model config, phase, device, tp, ep, variant)`` the graph is built once with
symbolic free dimensions (decode: ``B``, ``ctx``; prefill: ``B``, ``S``, and the cached
``prefix`` of a chunk), every quantity a report needs is read off it once as a sympy
expression (:class:`StepForms`), and the expressions are compiled with ``lambdify`` twice:
to the ``math`` module for scalars (one Python function of floats: a few microseconds per
point) and to numpy for arrays (tens of nanoseconds per point). Nothing is substituted per
point. The compiled forms are cached in this process (:func:`compiled_step`), so
``decode_report``, ``prefill_report``, ``parallel_plan``, ``disaggregated``,
``speculative_decoding``, ``sweep`` and ``search`` all evaluate the *same* compiled step cost.

The step time is the engine's usual per-kernel sum (:func:`graphs.serving.analysis.phases.step_time`)

.. math::

    T(B, \\dots) = \\sum_k r_k \\, \\max_u t_{k,u}(B, \\dots) \\quad [\\mathrm{s}]

with ``r_k`` the repeat of kernel ``k`` and ``t_{k,u}`` its compute, memory and link terms
(:mod:`costmodel.roofline`). Values equal the symbolic path's to float rounding (a property
test checks random points).

>>> from costmodel.hardware import get_device
>>> c = compiled_step("tiny", get_device("h100"), "decode")
>>> c.dims
('batch', 'ctx')
>>> c.step(4, 128) == c.point(4, 128)["step_s"]
True
>>> compiled_step("tiny", get_device("h100"), "decode") is c  # cached
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import networkx as nx
import sympy

from costmodel.errors import CostModelError
from costmodel.frontier import compile_expr
from costmodel.graph import COST, KIND, REPEAT, edge_bytes_total, op_nodes, step_time
from costmodel.hardware import Hardware, get_device
from costmodel.keys import NodeKind, Phase
from costmodel.memo import BoundedCache
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import check_dim, count
from costmodel.symbols import ctx as ctx_sym
from models.config import ModelConfig
from models.mixers.dsa import sparse_head_tile

from .expert_routing import Routing, as_routing, skew_experts
from .reports import STEP_FIELDS
from .totals import attention_flops, op_total, weight_bytes_read
from .workload import Workload, as_workload

if TYPE_CHECKING:  # numpy loads with the first vectorised call: a cold report does not need it
    import numpy as np

__all__ = [
    "step_time",
    "StepForms",
    "CompiledStep",
    "compiled_step",
    "clear_compiled_cache",
    "compiled_cache_info",
]

#: the cached prefix of a chunked-prefill step (tokens already in the KV cache)
PREFIX = count("prefix")

#: scalar fields every compiled step evaluates (``terms_s`` comes beside them)
FIELDS = STEP_FIELDS


def _all_bound(exprs: Any, symbols: Any) -> None:
    """Refuse forms that depend on symbols other than the step's dims (a device a ``--hw-file``
    kept symbolic by a bare name), naming them, before they are compiled: a compiled form would
    fail with a ``NameError`` when called (a review found ``prefill`` doing so)."""
    from costmodel.cost import unbound_error

    free: set[Any] = set()
    for e in exprs:
        free |= set(getattr(e, "free_symbols", ()))
    free -= set(symbols)
    if free:
        raise unbound_error(free)


@dataclass(frozen=True)
class StepForms:
    """The symbolic quantities of one step, read off its graph once (seconds, FLOPs, bytes).

    ``step_s`` is the per-kernel sum of rooflines, ``optimistic_step_s`` the whole step as one
    roofline, ``terms_s`` the whole step's compute (per unit), memory (per level) and link
    terms, ``weight_read_s`` / ``kv_read_s`` the bytes leaving weight / KV-cache nodes over
    DRAM bandwidth, ``weights_resident_bytes`` every weight byte held on the device.
    """

    symbols: tuple[sympy.Symbol, ...]
    step_s: sympy.Expr
    optimistic_step_s: sympy.Expr
    terms_s: dict[str, sympy.Expr]
    weight_read_s: sympy.Expr
    kv_read_s: sympy.Expr
    flops: sympy.Expr
    attention_flops: sympy.Expr
    weights_resident_bytes: sympy.Expr = field(default=sympy.Integer(0))

    def exprs(self) -> list[sympy.Expr]:
        """The compiled outputs in order: :data:`FIELDS`, then one per term.

        Returns
        -------
        list of sympy.Expr
        """
        return [getattr(self, f) for f in FIELDS] + list(self.terms_s.values())


def compile_step_time(g: nx.DiGraph, hw: Hardware) -> sympy.Expr:
    """:func:`step_time` with each kernel's ``max`` left unevaluated (:attr:`Bound.compile_time`):
    the same value, several times cheaper to build on a symbolic graph; for compiling.

    Parameters
    ----------
    g : networkx.DiGraph
        A step graph with a :class:`~costmodel.cost.Cost` on each op node (dims may be symbolic).
    hw : Hardware
        The device whose roofs price each kernel.

    Returns
    -------
    sympy.Expr
        The step time (s), :math:`\\sum_k r_k \\max_u t_{k,u}`, with each ``max`` unevaluated.
    """
    return sympy.Add(
        *(g.nodes[n].get(REPEAT, 1) * bound(g.nodes[n][COST], hw).compile_time for n in op_nodes(g))
    )


def _unpruned_max(terms: list[sympy.Expr]) -> sympy.Expr:
    if not terms:
        return sympy.Integer(0)
    return terms[0] if len(terms) == 1 else sympy.Max(*terms, evaluate=False)


def step_forms(g: nx.DiGraph, hw: Hardware, symbols: Sequence[sympy.Symbol]) -> StepForms:
    """Read :class:`StepForms` off a graph with symbolic dims (one ``bound`` per node, once).

    Parameters
    ----------
    g : networkx.DiGraph
        A step graph with symbolic free dims.
    hw : Hardware
        The device whose roofs price each kernel.
    symbols : sequence of sympy.Symbol
        The free dims, in the order the compiled functions take them (e.g. ``B, ctx``).

    Returns
    -------
    StepForms
        The step's seconds, FLOPs and bytes as sympy expressions in ``symbols``.
    """
    bw = hw.bandwidth()
    ops = op_total(g)
    whole = bound(ops, hw)
    resident = sympy.Add(
        *(
            d[COST].footprint_terms.get("weights", 0) * d.get(REPEAT, 1)
            for _, d in g.nodes(data=True)
            if d.get(KIND) == NodeKind.WEIGHT
        )
    )
    return StepForms(
        symbols=tuple(symbols),
        step_s=compile_step_time(g, hw),
        optimistic_step_s=_unpruned_max(list(whole.terms.values())),
        terms_s=dict(whole.terms),
        weight_read_s=weight_bytes_read(g) / bw,
        kv_read_s=edge_bytes_total(g, source_kind=NodeKind.KV_CACHE) / bw,
        flops=ops.flops,
        attention_flops=attention_flops(g),
        weights_resident_bytes=sympy.expand(resident),
    )


def positive_int(value: object, name: str, *, allow_zero: bool = False) -> int:
    """``value`` as a positive int (or 0 when allowed); a clear error naming ``name`` otherwise.

    A plain int passes in nanoseconds; anything else goes through :func:`check_dim`'s checks.

    Parameters
    ----------
    value : object
        The dim to check (an int, or a sympy number).
    name : str
        Its name, printed in the error.
    allow_zero : bool
        Accept 0 as well.

    Returns
    -------
    int
        ``value`` as an int.

    Raises
    ------
    CostModelError
        When ``value`` is symbolic, fractional, non-positive (negative when ``allow_zero``) or not a
        number.
    """
    if type(value) is int and (value >= 1 or (allow_zero and value == 0)):
        return value
    expr = check_dim(value, name, allow_zero=allow_zero)
    if not expr.is_number:
        raise CostModelError(f"{name} must be a number here (this analysis evaluates numbers), got {expr}")
    return int(expr)


class CompiledStep:
    """One step's :class:`StepForms` compiled to ``math`` (scalars) and numpy (arrays).

    Positional arguments follow :attr:`dims` (decode: ``batch, ctx``; prefill: ``batch, seq``;
    chunked prefill: ``batch, seq, prefix``). Scalars must already be validated: the compiled
    functions do no checking (the report functions check their arguments first).
    """

    def __init__(
        self, forms: StepForms, dims: tuple[str, ...], hw: Hardware, label: str, graph: nx.DiGraph
    ) -> None:
        self.forms = forms
        self.dims = dims
        self.hardware = hw
        self.label = label
        self.term_names = tuple(forms.terms_s)
        self._point: Callable[..., Any] | None = None  # compiled on first use (a card needs none)
        self._step: Callable[..., Any] | None = None
        self._step_vec: Callable[..., np.ndarray] | None = None  # numpy, compiled on first use
        self._memo: dict[str, Any] = {}
        self.graph = graph  # the symbolic graph, for per-node analyses (treat as read-only)

    def point(self, *values: float) -> dict[str, Any]:
        """Every field at one point; ``terms_s`` as a dict.

        Parameters
        ----------
        *values : float
            The step's dims, in :attr:`dims` order (decode: ``B``, ``ctx``).

        Returns
        -------
        dict
            Every field of :data:`FIELDS` (s, FLOP, bytes) and ``terms_s``.
        """
        if self._point is None:
            _all_bound(self.forms.exprs(), self.forms.symbols)
            self._point = sympy.lambdify(self.forms.symbols, self.forms.exprs(), "math")
        out = self._point(*values)
        n = len(FIELDS)
        res: dict[str, Any] = {k: float(v) for k, v in zip(FIELDS, out[:n], strict=True)}
        res["terms_s"] = {k: float(v) for k, v in zip(self.term_names, out[n:], strict=True)}
        return res

    def step(self, *values: float) -> float:
        """The step time (s) at one point: the fastest call.

        Parameters
        ----------
        *values : float
            The step's dims, in :attr:`dims` order.

        Returns
        -------
        float
            Seconds.
        """
        if self._step is None:
            _all_bound([self.forms.step_s], self.forms.symbols)
            self._step = sympy.lambdify(self.forms.symbols, self.forms.step_s, "math")
        return float(self._step(*values))

    def step_array(self, *arrays: Any) -> np.ndarray:
        """The step time (s) over arrays (broadcast), vectorised.

        Parameters
        ----------
        *arrays : numpy.ndarray
            The step's dims as arrays (broadcast).

        Returns
        -------
        numpy.ndarray
            Seconds per point.
        """
        if self._step_vec is None:
            self._step_vec = compile_expr(self.forms.step_s, self.forms.symbols)
        return self._step_vec(*arrays)

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """A derived quantity computed once per compiled step (e.g. decode limits, the ledger).

        Parameters
        ----------
        key : str
            The quantity's name.
        build : callable
            ``build()`` makes it (called once per step and key).

        Returns
        -------
        object
            What ``build`` returned, cached.
        """
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def __repr__(self) -> str:
        return f"CompiledStep({self.label}, dims={self.dims})"


#: most compiled steps kept in this process (least recently used dropped first)
CACHE_SIZE = 256
_CACHE: BoundedCache[CompiledStep] = BoundedCache("compiled_step", CACHE_SIZE)


def clear_compiled_cache() -> None:
    """Forget every compiled step (tests; a catalog edit already changes the key)."""
    _CACHE.clear()


def compiled_cache_info() -> dict[str, int]:
    """Hits, misses and current size of the in-process cache.

    Returns
    -------
    dict of str to int
        ``hits``, ``misses`` and ``size`` (entries held) of the compiled-step cache.
    """
    return _CACHE.info()


def _scale_experts(g: nx.DiGraph, ep: int) -> nx.DiGraph:
    """A copy of ``g`` where each device runs the busiest EP rank's share of the routed experts
    under uniform routing: ``E max`` over ranks of rows and touched experts, not the ``1/ep``
    mean (:func:`graphs.serving.step.expert_routing.busiest_rank`; the mean as ``T -> inf``)."""
    return skew_experts(g, ep, Routing())


def compiled_step(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    phase: str,
    *,
    tp: int = 1,
    ep: int = 1,
    chunked: bool = False,
    logits: str = "last",
    routing: Routing | None = None,
) -> CompiledStep:
    """The compiled step of ``config`` on ``device`` (cached per argument set; module doc).

    ``chunked`` (prefill) adds the cached ``prefix`` as a third dim; ``ep`` divides the routed
    experts' work and weights over ``ep`` devices; ``routing`` (skewed, or a placement with
    replicas: :mod:`graphs.serving.step.expert_routing`) makes them the busiest EP rank's instead.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model: a catalog name, a ``config.json`` path, a config, or a workload built once.
    device : Hardware or str
        The device (a catalog name or a spec).
    phase : str
        ``"decode"`` (dims ``B``, ``ctx``) or ``"prefill"`` (dims ``B``, ``S``, and ``prefix`` when
        ``chunked``).
    tp : int
        Tensor-parallel degree: the device holds ``1/tp`` of each sharded weight and head.
    ep : int
        Expert-parallel degree: routed experts' work and weights divided over ``ep`` devices.
    chunked : bool
        Prefill only: a chunk attending over a cached ``prefix`` of tokens.
    logits : str
        Which positions the LM head computes: ``"last"`` (default) or ``"all"`` (prefill).
    routing : Routing or str, optional
        A skewed routing or an expert placement: the busiest EP rank's experts instead of the mean;
        its text (``"zipf:1.2"``) is parsed as ``--routing`` parses it.

    Returns
    -------
    CompiledStep
        The compiled scalar and numpy forms (seconds, FLOPs, bytes), cached per argument set.

    Raises
    ------
    CostModelError
        When ``phase`` is unknown, ``chunked`` is asked of decode, or a degree or name is invalid.
    """
    w = as_workload(config)
    hw = get_device(device)
    ph = Phase(phase) if phase in tuple(Phase) else None
    if ph is None:
        raise CostModelError(f"phase must be one of {', '.join(Phase)}, got {phase!r}")
    if chunked and ph != Phase.PREFILL:
        raise CostModelError("chunked applies to prefill (a chunk attends over a cached prefix)")
    routing = as_routing(routing)  # its text ("zipf:1.2") too, as --routing takes it
    if routing is not None and routing.is_default:
        routing = None  # uniform and contiguous: the default 1/ep scaling, the same cache entry
    key = (w.config, hw, ph, tp, ep, chunked, logits) + ((routing,) if routing is not None else ())
    return _CACHE.get_or_build(key, lambda: _compile(w, hw, ph, tp, ep, chunked, logits, routing))


def device_dims(config: ModelConfig, hw: Hardware, tp: int = 1) -> dict[str, Any]:
    """The graph-build keywords a device decides (:func:`graphs.blocks.transformer.build_model`),
    only those that differ from their defaults (so a graph's cache entry is shared): ``link``,
    ``scale_out`` for a ``tp`` group wider than the scale-up domain
    (:meth:`costmodel.hardware.Hardware.group_link`); ``sparse_head_tile``, the query-head tile of
    the device's sparse-attention kernel for a model with DSA layers
    (:func:`models.mixers.dsa.sparse_head_tile`).

    Parameters
    ----------
    config : ModelConfig
        The model.
    hw : Hardware
        The device.
    tp : int
        The tensor-parallel degree.

    Returns
    -------
    dict
        The keywords.
    """
    out: dict[str, Any] = {}
    link = hw.group_link(tp)  # a tp group wider than the scale-up domain crosses the network
    if link != "scale_up":
        out["link"] = link
    tile = sparse_tile(config, hw)
    if tile != 1:
        out["sparse_head_tile"] = tile
    return out


def sparse_tile(config: ModelConfig, hw: Hardware) -> int:
    """The query-head tile ``config``'s sparse attention runs at on ``hw``: the device's
    (:func:`models.mixers.dsa.sparse_head_tile`) for a model with DSA layers, else 1.

    Parameters
    ----------
    config : ModelConfig
        The model.
    hw : Hardware
        The device.

    Returns
    -------
    int
    """
    return sparse_head_tile(hw.architecture, hw.name) if config.dsa is not None else 1


def _compile(
    w: Workload,
    hw: Hardware,
    ph: Phase,
    tp: int,
    ep: int,
    chunked: bool,
    logits: str,
    routing: Routing | None,
) -> CompiledStep:
    span = device_dims(w.config, hw, tp)
    if ph == Phase.DECODE:
        syms: tuple[sympy.Symbol, ...] = (B_sym, ctx_sym)
        dims: tuple[str, ...] = ("batch", "ctx")
        g = w.graph(ph, batch=B_sym, ctx=ctx_sym, tp=tp, logits=logits, **span)
    else:
        syms, dims = (B_sym, S_sym), ("batch", "seq")
        extra: dict[str, Any] = dict(span)
        if chunked:
            syms, dims, extra = (*syms, PREFIX), (*dims, "prefix"), {**span, "prefix": PREFIX}
        g = w.graph(ph, batch=B_sym, seq=S_sym, tp=tp, logits=logits, **extra)
    if routing is not None:
        g = skew_experts(g, ep, routing)
    elif ep > 1:
        g = _scale_experts(g, ep)
    label = f"{w.name} {ph} on {hw.name} tp{tp} ep{ep}{' chunked' if chunked else ''}"
    label += f" routing {routing.label}" if routing is not None else ""
    return CompiledStep(step_forms(g, hw, syms), dims, hw, label, g)
