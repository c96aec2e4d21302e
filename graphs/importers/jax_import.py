"""Import JAX programs (jaxprs) into cost graphs, and compare with XLA's own cost analysis.

``from_jax(fn, *args)`` traces ``fn`` with ``jax.make_jaxpr`` and maps every equation through
the op table shared with the torch.export and ONNX importers (:mod:`graphs.importers.table`,
the ``jax=`` names): ``dot_general`` becomes a GEMM (contracting dims ``K``, batch dims a
batched GEMM), elementwise primitives the elementwise rule (``exp``, ``log``, ``tanh``,
``rsqrt``, ``logistic`` on the SFU), reductions the reduction rule, layout changes and
broadcasts free views (XLA fuses them). Calls with an inner jaxpr (``pjit``, ``custom_jvp_call``,
``custom_vjp_call``, ``closed_call``) are inlined; anything else, a custom call included, is
kept by name as an unknown op (``graph.graph["unknown_ops"]``). Arguments listed in ``weights``
become weight sources. Symbolic shapes from ``jax.export.symbolic_shape`` come through as
sympy expressions of their names.

:func:`compare_with_xla` sets our counts beside ``jax.jit(fn).lower(*args).cost_analysis()``
(the unoptimised module, before XLA's fusion rewrites it). Conventions, one per difference:
XLA counts a transcendental (``exp``, ``tanh`` ...) apart from its flops, as we count SFU
FLOPs apart; a reduction of ``n`` inputs to ``m`` outputs as ``n - m`` flops (the reducer's
applications) where our rule counts one operation per input element (``n``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import sympy

from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.graph import graph_total
from costmodel.keys import FRONTEND_OP, G_UNKNOWN_OPS, KIND, OUTPUTS, REPEAT, NodeKind
from costmodel.tensor import Tensor

from .aten import TORCH_DTYPES
from .table import OpView, lookup, unknown_node, write_node

__all__ = ["from_jax", "from_jaxpr", "compare_with_xla", "XLA_CONVENTIONS"]

_INNER = ("jaxpr", "call_jaxpr", "fun_jaxpr")


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
    if dtype is None:
        raise CostModelError(f"jax dtype {aval.dtype} of {name} has no costmodel dtype")
    return Tensor(name, tuple(_dim(d) for d in aval.shape), dtype)


class _Importer:
    def __init__(self) -> None:
        self.g = nx.DiGraph()
        self.unknown: Counter[str] = Counter()
        self.env: dict[Any, tuple[str, Tensor]] = {}
        self.count = 0

    def source(self, var: Any, name: str, kind: str) -> None:
        t = _tensor(name, var.aval)
        self.g.add_node(name, **{KIND: kind, OUTPUTS: (t,), REPEAT: 1})
        self.env[var] = (name, t)

    def run(self, jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            inner = next((eqn.params[k] for k in _INNER if k in eqn.params), None)
            if inner is not None:  # inline the called jaxpr
                inner = getattr(inner, "jaxpr", inner)
                for outer, v in zip(eqn.invars, inner.invars, strict=False):
                    if outer in self.env:
                        self.env[v] = self.env[outer]
                self.run(inner)
                for outer, v in zip(eqn.outvars, inner.outvars, strict=False):
                    if v in self.env:
                        self.env[outer] = self.env[v]
                continue
            self.count += 1
            name = f"{eqn.primitive.name}_{self.count}"
            ins = [self.env[v] for v in eqn.invars if not hasattr(v, "val") and v in self.env]
            outs = [_tensor(f"{name}.{i}", v.aval) for i, v in enumerate(eqn.outvars)]
            params = eqn.params
            view = OpView(ins=ins, outs=outs, scalars=lambda i, n, p=params: p.get(n) if n else None)
            mapper = lookup("jax", eqn.primitive.name)
            if mapper is None:
                self.unknown[eqn.primitive.name] += 1
                mapped = unknown_node(view)
            else:
                mapped = mapper(view)
            write_node(self.g, name, mapped, outs, **{FRONTEND_OP: eqn.primitive.name})
            for i, v in enumerate(eqn.outvars):
                self.env[v] = (name, outs[i])


def from_jaxpr(closed: Any, *, weights: Sequence[int] = ()) -> nx.DiGraph:
    """Cost graph of a ``ClosedJaxpr`` (module doc); ``weights``: indices of weight arguments."""
    jaxpr = getattr(closed, "jaxpr", closed)
    imp = _Importer()
    for i, v in enumerate(jaxpr.invars):
        imp.source(v, f"arg{i}", NodeKind.WEIGHT if i in set(weights) else NodeKind.INPUT)
    imp.run(jaxpr)
    imp.g.graph[G_UNKNOWN_OPS] = dict(imp.unknown)
    return imp.g


def from_jax(fn: Callable[..., Any], *args: Any, weights: Sequence[int] = ()) -> nx.DiGraph:
    """Trace ``fn`` on ``args`` (arrays or ``jax.ShapeDtypeStruct`` s) and import its jaxpr."""
    return from_jaxpr(_jax().make_jaxpr(fn)(*args), weights=weights)


#: how our counts and XLA's differ by convention, per op family (module doc)
XLA_CONVENTIONS = {
    "transcendentals": "XLA counts exp/log/tanh/rsqrt/logistic apart from flops: our SFU FLOPs",
    "reduction": "XLA counts n - m flops for n inputs reduced to m outputs; our rule n",
}


def compare_with_xla(fn: Callable[..., Any], *args: Any) -> dict[str, float]:
    """Our FLOPs per family and XLA's totals for ``fn`` on ``args``; ``explained_flops`` is ours
    adjusted by :data:`XLA_CONVENTIONS` (equal to ``xla_flops`` when every difference is one)."""
    jax = _jax()
    g = from_jax(fn, *args)
    total = graph_total(g, kinds=[NodeKind.OP])
    matmul = float(total.flops_on("tensor"))
    vector = float(total.flops_on("vector"))
    sfu = float(total.flops_on("sfu"))
    reduction_adjust = 0.0
    for _, d in g.nodes(data=True):
        if d.get("op") == "reduction":
            p = d["params"]
            reduction_adjust += float(p["rows"])  # ours n, XLA n - m: m = rows outputs
    xla = jax.jit(fn).lower(*args).cost_analysis()
    xla = xla if isinstance(xla, dict) else xla[0]
    return {
        "matmul_flops": matmul,
        "vector_flops": vector,
        "sfu_flops": sfu,
        "explained_flops": matmul + vector - reduction_adjust,
        "xla_flops": float(xla.get("flops", 0.0)),
        "xla_transcendentals": float(xla.get("transcendentals", 0.0)),
        "unknown_ops": float(sum(g.graph[G_UNKNOWN_OPS].values())),
    }
