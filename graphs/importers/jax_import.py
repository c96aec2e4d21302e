"""Import JAX programs (jaxprs) into cost graphs, and compare with XLA's own cost analysis.

``from_jax(fn, *args)`` traces ``fn`` with ``jax.make_jaxpr`` and maps every equation through
the op table shared with the torch.export and ONNX importers (:mod:`graphs.importers.table`,
the ``jax=`` names): ``dot_general`` becomes a GEMM (contracting dims ``K``, batch dims a
batched GEMM), elementwise primitives the elementwise rule (``exp``, ``log``, ``tanh``,
``rsqrt``, ``logistic`` on the SFU), reductions the reduction rule, layout changes and
broadcasts free views (XLA fuses them). Calls with an inner jaxpr (``pjit``, ``custom_jvp_call``,
``custom_vjp_call``, ``closed_call``) are inlined; anything else, a custom call included, is
kept by name as an unknown op (``graph.graph["unknown_ops"]``). Arguments listed in ``weights``
become weight sources. An empty array (a zero-size dimension) is no edge; an equation writing
only empty arrays, or contracting an empty operand, is priced 0 and counted in
``graph.graph["empty_ops"]`` (the rule of every frontend). Symbolic shapes from ``jax.export.symbolic_shape`` come through as
sympy expressions of their names.

Loops: a ``scan`` body is inlined once with every node's repeat multiplied by the scan's
``length`` (nested scans multiply; a symbolic length gives a symbolic repeat); ``fori_loop`` with static bounds traces to such a scan. A
``while`` is scaled the same way when its trip count is static: a counter ``i`` that starts at
a literal, is compared ``i < n`` with ``n`` a literal (or a carry passed through unchanged from
a literal) and is advanced by ``i + 1`` in the body, i.e. ``max(0, n - i0)`` trips, its
condition counted once more. Any other ``while`` (a ``fori_loop`` with traced bounds, a data
dependent loop) is kept as the unknown op ``while``: its body is not counted, and the unknown
count says so. ``graph.graph["loops"]`` lists each scaled loop's primitive and trip count.

:func:`compare_with_xla` sets our counts beside ``jax.jit(fn).lower(*args).cost_analysis()``
(the unoptimised module, before XLA's fusion rewrites it). Conventions, one per difference:
XLA counts a transcendental (``exp``, ``tanh`` ...) apart from its flops, as we count SFU
FLOPs apart; a reduction of ``n`` inputs to ``m`` outputs as ``n - m`` flops (the reducer's
applications) where our rule counts one operation per input element (``n``); and XLA's cost
analysis counts a loop body *once*, whatever its trip count (plus up to two scalar flops of
its own loop counter), where we count it once per trip. So XLA agreeing with a one-pass count
of a loop is no check of the trip count: ``explained_flops`` counts each loop body once to
compare, and the tests pin the scaled counts to hand counts instead.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.graph import graph_total
from costmodel.keys import COST, FRONTEND_OP, G_UNKNOWN_OPS, KIND, OUTPUTS, REPEAT, NodeKind
from costmodel.tensor import Tensor

from .aten import TORCH_DTYPES
from .table import EMPTY_WHEN_AN_INPUT_IS, G_EMPTY_OPS, OpView, is_empty, lookup, unknown_node, write_node

__all__ = ["from_jax", "from_jaxpr", "compare_with_xla", "XLA_CONVENTIONS", "G_LOOPS"]

_INNER = ("jaxpr", "call_jaxpr", "fun_jaxpr")
G_LOOPS = "loops"  #: graph attribute: ``[(primitive, trip count), ...]`` of the loops scaled


def _param(params: Mapping[str, Any], index: int | None, name: str | None) -> Any:
    """An equation's scalar by parameter name (a jaxpr has no positional scalars)."""
    return params.get(name) if name else None


def _is_var(v: Any) -> bool:
    """A jaxpr variable (a ``Literal`` carries its ``val`` and is no graph edge)."""
    return not hasattr(v, "val")


def _literal_int(v: Any) -> int | None:
    """The value of an integer scalar literal, else None."""
    val = getattr(v, "val", None)
    if val is None or isinstance(val, bool) or getattr(val, "shape", ()) != ():
        return None
    try:
        i = int(val)  # a Python int or a numpy/jax integer scalar
    except (TypeError, ValueError):
        return None
    return i if i == val else None


def _counted_while(eqn: Any) -> int | None:
    """The static trip count of a ``while`` that is a counted loop (module doc), else None."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    init = eqn.invars[nc + nb :]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt" or cond.outvars != cond.eqns[0].outvars:
        return None
    lhs, rhs = cond.eqns[0].invars
    carry_c, carry_b = cond.invars[nc:], body.invars[nb:]
    if not _is_var(lhs) or lhs not in carry_c:
        return None
    i = carry_c.index(lhs)
    if _is_var(rhs):  # the bound: a carry the body passes through unchanged
        if rhs not in carry_c:
            return None
        j = carry_c.index(rhs)
        if body.outvars[j] is not carry_b[j]:
            return None
        upper = _literal_int(init[j])
    else:
        upper = _literal_int(rhs)
    lower = _literal_int(init[i])
    step = next((e for e in body.eqns if body.outvars[i] in e.outvars), None)
    if upper is None or lower is None or step is None or step.primitive.name != "add":
        return None
    a, b = step.invars
    one = b if a is carry_b[i] else (a if b is carry_b[i] else None)
    if one is None or _literal_int(one) != 1:
        return None
    return max(0, upper - lower)


def _jax() -> Any:
    try:
        import jax
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise CostModelError("the JAX importer needs jax: pip install 'jax[cpu]'") from exc
    return jax


def _dim(d: Any) -> sympy.Expr:
    if isinstance(d, int):
        return sympy.Integer(d)
    return to_expr(
        str(d).replace(" ", ""), field="jax dimension"
    )  # a symbolic shape: its text, parsed safely


def _tensor(name: str, aval: Any) -> Tensor:
    dtype = TORCH_DTYPES.get(str(aval.dtype))  # numpy's dtype names, which torch and jax share
    shape = tuple(aval.shape)
    key_shape = getattr(getattr(aval.dtype, "_impl", None), "key_shape", None)
    if dtype is None and key_shape is not None:  # a typed PRNG key (key<fry>): its uint32 words
        dtype, shape = TORCH_DTYPES["uint32"], (*shape, *key_shape)
    if dtype is None:
        raise CostModelError(f"jax dtype {aval.dtype} of {name} has no costmodel dtype")
    return Tensor(name, tuple(_dim(d) for d in shape) or (sympy.Integer(1),), dtype)


class _Importer:
    def __init__(self) -> None:
        self.g = nx.DiGraph()
        self.unknown: Counter[str] = Counter()
        self.empty: Counter[str] = Counter()  #: ops priced 0: they write only empty tensors
        self.env: dict[Any, tuple[str, Tensor]] = {}
        self.count = 0
        self.repeat: Any = 1  #: trips of the loops around the equations being read (an int or a sympy expr)
        self.loops: list[tuple[str, Any]] = []

    def source(self, var: Any, name: str, kind: str) -> None:
        if is_empty(var.aval.shape):  # holds nothing: no node, no edge (graphs.importers.table)
            return
        t = _tensor(name, var.aval)
        # a source's cost is its residency, as in the other importers: weights are held, inputs not
        cost = Cost.resident(weights=t.bytes) if kind == NodeKind.WEIGHT else Cost.zero()
        self.g.add_node(name, **{KIND: kind, COST: cost, OUTPUTS: (t,), REPEAT: 1})
        self.env[var] = (name, t)

    def bind(self, outers: Sequence[Any], inners: Sequence[Any]) -> None:
        """Each inner variable stands for its outer one: the same producer, the inner shape
        (a scan's body sees one slice of a stacked input, the caller the stacked output)."""
        for outer, v in zip(outers, inners, strict=False):
            if _is_var(outer) and _is_var(v) and outer in self.env and not is_empty(v.aval.shape):
                src, t = self.env[outer]
                self.env[v] = (src, _tensor(t.name, v.aval))

    def inline(self, inner: Any, ins: Sequence[Any], outs: Sequence[Any], trips: Any = 1) -> None:
        """Read the jaxpr ``inner`` fed by the outer ``ins`` and giving the outer ``outs``, each
        of its nodes repeated ``trips`` times more."""
        inner = getattr(inner, "jaxpr", inner)
        self.bind(ins, inner.invars)
        outer_repeat = self.repeat
        self.repeat = outer_repeat * trips
        try:
            self.run(inner)
        finally:
            self.repeat = outer_repeat
        for outer, v in zip(outs, inner.outvars, strict=False):
            if _is_var(v) and v in self.env and not is_empty(outer.aval.shape):
                src, t = self.env[v]
                self.env[outer] = (src, _tensor(t.name, outer.aval))

    def loop(self, eqn: Any) -> bool:
        """Read a ``scan``, or a ``while`` with a static trip count (module doc); False for a
        ``while`` whose trips are not known (it stays an unknown op)."""
        p = eqn.params
        if eqn.primitive.name == "scan":
            # a symbolic length (jax.export.symbolic_shape) repeats the body symbolically
            length = p["length"]
            trips: Any = int(length) if isinstance(length, int) else _dim(length)
            self.loops.append(("scan", trips))
            self.inline(p["jaxpr"], eqn.invars, eqn.outvars, trips)
            return True
        counted = _counted_while(eqn)
        if counted is None:
            return False
        trips = counted
        self.loops.append(("while", trips))
        nc = p["cond_nconsts"]
        carry = eqn.invars[nc + p["body_nconsts"] :]
        self.inline(p["cond_jaxpr"], [*eqn.invars[:nc], *carry], (), trips + 1)  # feeds nothing
        self.inline(p["body_jaxpr"], eqn.invars[nc:], eqn.outvars, trips)
        return True

    def run(self, jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("scan", "while") and self.loop(eqn):
                continue
            inner = next((eqn.params[k] for k in _INNER if k in eqn.params), None)
            if inner is not None:  # inline the called jaxpr
                self.inline(inner, eqn.invars, eqn.outvars)
                continue
            self.count += 1
            name = f"{eqn.primitive.name}_{self.count}"
            written = [v for v in eqn.outvars if not is_empty(v.aval.shape)]
            if not written or (
                eqn.primitive.name in EMPTY_WHEN_AN_INPUT_IS
                and any(_is_var(v) and is_empty(v.aval.shape) for v in eqn.invars)
            ):
                self.empty[eqn.primitive.name] += 1  # no work: priced 0, counted
                continue
            ins = [self.env[v] for v in eqn.invars if _is_var(v) and v in self.env]
            outs = [_tensor(f"{name}.{i}", v.aval) for i, v in enumerate(written)]
            view = OpView(ins=ins, outs=outs, scalars=functools.partial(_param, eqn.params))
            mapper = lookup("jax", eqn.primitive.name)
            if mapper is None:
                self.unknown[eqn.primitive.name] += 1
                mapped = unknown_node(view)
            else:
                try:
                    mapped = mapper(view)
                except CostModelError:
                    raise
                except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise CostModelError(
                        f"jax equation {name} ({eqn.primitive.name}) cannot be costed: {type(exc).__name__}: {exc}"
                    ) from None
            write_node(self.g, name, mapped, outs, **{FRONTEND_OP: eqn.primitive.name, REPEAT: self.repeat})
            for i, v in enumerate(written):
                self.env[v] = (name, outs[i])


def from_jaxpr(closed: Any, *, weights: Sequence[int] = ()) -> nx.DiGraph:
    """Cost graph of a ``ClosedJaxpr`` (module doc); ``weights``: indices of weight arguments
    (arrays the function closes over, the jaxpr's constants, are weights ``const0``, ...)."""
    jaxpr = getattr(closed, "jaxpr", closed)
    imp = _Importer()
    for i, v in enumerate(jaxpr.constvars):  # arrays the function closed over: weights
        imp.source(v, f"const{i}", NodeKind.WEIGHT)
    for i, v in enumerate(jaxpr.invars):
        imp.source(v, f"arg{i}", NodeKind.WEIGHT if i in set(weights) else NodeKind.INPUT)
    imp.run(jaxpr)
    imp.g.graph[G_UNKNOWN_OPS] = dict(imp.unknown)
    imp.g.graph[G_EMPTY_OPS] = dict(imp.empty)
    imp.g.graph[G_LOOPS] = list(imp.loops)
    return imp.g


def from_jax(fn: Callable[..., Any], *args: Any, weights: Sequence[int] = ()) -> nx.DiGraph:
    """Trace ``fn`` on ``args`` (arrays or ``jax.ShapeDtypeStruct`` s) and import its jaxpr.

    Parameters
    ----------
    fn : callable
        The JAX function.
    *args
        Its arguments: arrays or ``jax.ShapeDtypeStruct`` s (symbolic shapes allowed).
    weights : sequence of int, default ()
        Indices of the arguments that are weights (their sources are ``weight`` nodes).

    Returns
    -------
    networkx.DiGraph
        The cost graph; ``graph.graph["unknown_ops"]`` counts the primitives not costed.
    """
    return from_jaxpr(_jax().make_jaxpr(fn)(*args), weights=weights)


#: how our counts and XLA's differ by convention, per op family (module doc)
XLA_CONVENTIONS = {
    "transcendentals": "XLA counts exp/log/tanh/rsqrt/logistic apart from flops: our SFU FLOPs",
    "reduction": "XLA counts n - m flops for n inputs reduced to m outputs; our rule n",
    "loops": "XLA counts a loop body once whatever its trip count (plus its counter's add and "
    "compare); we count it once per trip",
}


def compare_with_xla(fn: Callable[..., Any], *args: Any) -> dict[str, float]:
    """Our FLOPs per family and XLA's totals for ``fn`` on ``args``; ``explained_flops`` is ours
    adjusted by :data:`XLA_CONVENTIONS` (equal to ``xla_flops`` when every difference is one,
    give or take two scalar flops of each loop's counter, ``loops`` of them)."""
    jax = _jax()
    g = from_jax(fn, *args)
    total = graph_total(g, kinds=[NodeKind.OP])
    matmul = float(total.flops_on("tensor"))
    vector = float(total.flops_on("vector"))
    sfu = float(total.flops_on("sfu"))
    reduction_adjust = 0.0
    loop_adjust = 0.0  # ours counts each trip, XLA each loop body once
    for _, d in g.nodes(data=True):
        if d.get(KIND) != NodeKind.OP:
            continue
        extra = float(d.get(REPEAT, 1)) - 1
        if extra:
            loop_adjust += extra * float(d[COST].flops_on("tensor") + d[COST].flops_on("vector"))
        if d.get("op") == "reduction":
            p = d["params"]
            reduction_adjust += float(p["rows"])  # ours n, XLA n - m: m = rows outputs
    xla = jax.jit(fn).lower(*args).cost_analysis()
    xla = xla if isinstance(xla, dict) else xla[0]
    return {
        "matmul_flops": matmul,
        "vector_flops": vector,
        "sfu_flops": sfu,
        "explained_flops": matmul + vector - reduction_adjust - loop_adjust,
        "xla_flops": float(xla.get("flops", 0.0)),
        "xla_transcendentals": float(xla.get("transcendentals", 0.0)),
        "unknown_ops": float(sum(g.graph[G_UNKNOWN_OPS].values())),
        "loops": float(len(g.graph[G_LOOPS])),
    }
