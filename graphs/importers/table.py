"""One op table for every frontend, and one writer that adds its nodes.

A frontend (torch.export / torch.fx, ONNX, JAX jaxprs) describes each node of
its IR as an :class:`OpView`: the tensor inputs with the node that produced
each, the outputs, and the few scalars an op needs (an exponent, a causal
flag, ``transB``). :func:`lookup` finds the mapper registered for the
frontend's op name; the mapper returns a :class:`Mapped` (the rule, its
parameters, the inputs that become edges and the bytes each edge moves) and
:func:`write_node` adds it to the cost graph. Mappers are small functions
registered with :func:`register_import` under every frontend's name at once::

    @register_import(aten=("mm", "matmul", "bmm"), onnx="MatMul")
    def matmul(v: OpView) -> Mapped: ...

so the two frontends cannot drift apart. A name with no mapper is reported
by name and count (``graph.graph["unknown_ops"]``), never dropped.

Empty tensors, one rule for every frontend: a tensor with a zero-size dimension holds nothing,
so it is no edge and moves no bytes; an op that writes only empty tensors, or multiplies an
empty operand (:data:`EMPTY_WHEN_AN_INPUT_IS`), does no work: it is priced 0 (no node) and
counted by name in ``graph.graph["empty_ops"]`` (:data:`G_EMPTY_OPS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx
import sympy

from costmodel.errors import CostModelError
from costmodel.keys import (
    BYTES,
    COST,
    INPUTS,
    KIND,
    OP,
    OUTPUTS,
    PARAMS,
    REPEAT,
    ROLE,
    TENSOR,
    UNKNOWN,
    NodeKind,
    Role,
)
from costmodel.rules import op_cost
from costmodel.tensor import Tensor

__all__ = [
    "EMPTY_WHEN_AN_INPUT_IS",
    "G_EMPTY_OPS",
    "is_empty",
    "Frontend",
    "FRONTENDS",
    "OpView",
    "Mapped",
    "Mapper",
    "register_import",
    "lookup",
    "import_names",
    "write_node",
    "unknown_node",
]

#: graph attribute: ops priced 0 because they write only empty tensors, name -> count (module doc)
G_EMPTY_OPS = "empty_ops"
#: ops that do no work when any operand is empty (a zero-size contraction or key set), by frontend name
EMPTY_WHEN_AN_INPUT_IS = frozenset(
    {
        "mm",
        "matmul",
        "bmm",
        "linear",
        "addmm",
        "baddbmm",
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "MatMul",
        "Gemm",
        "Attention",
        "dot_general",
    }
)


def is_empty(shape: Iterable[Any]) -> bool:
    """Whether a shape has a zero-size dimension (an int or a sympy number equal to 0)."""
    return any(isinstance(d, (int, sympy.Integer)) and not isinstance(d, bool) and d == 0 for d in shape)


Frontend = Literal["aten", "onnx", "jax"]
#: frontends the table knows; a new frontend adds its name here and a keyword to register_import
FRONTENDS: tuple[Frontend, ...] = ("aten", "onnx", "jax")

Ref = tuple[str, Tensor]


@dataclass(frozen=True)
class OpView:
    """One IR node as the table sees it, whatever the frontend.

    ``ins`` are ``(producer node, tensor)`` pairs in the op's argument order;
    ``weights`` the indices of ``ins`` that come from weight sources;
    ``scalar(index, name)`` the value of a scalar argument (positional
    ``index`` among the op's inputs, or attribute/keyword ``name``) when the
    frontend knows it as a constant, else ``None``; ``slots`` the op's input position of
    each entry of ``ins``, where the frontend skips absent optional inputs (ONNX's ``""``):
    empty means ``ins`` are the op's inputs in order.
    """

    ins: list[Ref]
    outs: list[Tensor]
    scalars: Callable[[int | None, str | None], Any] = field(default=lambda i, n: None)
    weights: frozenset[int] = frozenset()
    contiguous: bool = True
    masked_causal: bool = False
    slots: tuple[int, ...] = ()

    @property
    def out(self) -> Tensor:
        return self.outs[0]

    def by_slot(self) -> dict[int, int]:
        """The op's input position -> the index in ``ins`` of the tensor given there."""
        return {s: i for i, s in enumerate(self.slots or range(len(self.ins)))}

    def scalar(self, index: int | None, name: str | None = None, default: Any = None) -> Any:
        v = self.scalars(index, name)
        return default if v is None else v


@dataclass(frozen=True)
class Mapped:
    """A rule call: ``op_cost(rule, **params)``, fed by ``refs``; ``edge_bytes[i]``
    overrides the bytes the ``i``-th ref moves (default: the whole tensor)."""

    rule: str
    params: dict[str, Any]
    refs: list[Ref]
    edge_bytes: Mapping[int, Any] = field(default_factory=dict)
    unknown: bool = False
    #: what the node is for (:class:`costmodel.keys.Role`), set by the mapper that knows the op;
    #: a foreign op whose purpose the mapper cannot tell (a batched matmul, a softmax) is OTHER
    role: Role = Role.OTHER


Mapper = Callable[[OpView], Mapped]

_TABLE: dict[Frontend, dict[str, Mapper]] = {f: {} for f in FRONTENDS}


def _names(x: str | Iterable[str]) -> tuple[str, ...]:
    return (x,) if isinstance(x, str) else tuple(x)


def register_import(
    *, aten: str | Iterable[str] = (), onnx: str | Iterable[str] = (), jax: str | Iterable[str] = ()
) -> Callable[[Mapper], Mapper]:
    """Register a mapper under each frontend's op names; a name registered twice raises."""

    def deco(fn: Mapper) -> Mapper:
        given: tuple[tuple[Frontend, str | Iterable[str]], ...] = (
            ("aten", aten),
            ("onnx", onnx),
            ("jax", jax),
        )
        for frontend, names in given:
            table = _TABLE[frontend]
            for name in _names(names):
                if name in table:
                    raise CostModelError(
                        f"{frontend} op {name!r} is already mapped by {table[name].__name__}; "
                        f"cannot map it again with {fn.__name__}"
                    )
                table[name] = fn
        return fn

    return deco


def lookup(frontend: Frontend, name: str) -> Mapper | None:
    """The mapper for ``frontend``'s op ``name``, or ``None`` when the table has none."""
    from . import jax_ops, ops  # noqa: F401 - the mappers register themselves on import

    return _TABLE[frontend].get(name)


def import_names(frontend: Frontend) -> frozenset[str]:
    """Every op name ``frontend`` can map."""
    from . import jax_ops, ops  # noqa: F401

    return frozenset(_TABLE[frontend])


def unknown_node(v: OpView) -> Mapped:
    """A zero-cost stand-in for an op with no mapper, marked ``unknown``; its edges move nothing."""
    return Mapped("view", {"elements": v.out.numel}, v.ins, {i: 0 for i in range(len(v.ins))}, unknown=True)


def write_node(g: nx.DiGraph, name: str, m: Mapped, outs: list[Tensor], **attrs: Any) -> dict[str, Any]:
    """Add node ``name`` for ``m`` to ``g`` with its cost, and one edge per producer.

    Two tensors from one producer share an edge whose bytes add. Extra node
    attributes (the frontend's own op name) come in ``attrs``. Returns the
    annotation a frontend may attach to its own IR node.
    """
    cost = op_cost(m.rule, **m.params)
    g.add_node(
        name,
        **{
            KIND: NodeKind.OP,
            OP: m.rule,
            PARAMS: m.params,
            COST: cost,
            INPUTS: tuple(t for _, t in m.refs),
            OUTPUTS: tuple(outs),
            REPEAT: 1,
            UNKNOWN: m.unknown,
            ROLE: m.role,
            **attrs,
        },
    )
    for i, (src, t) in enumerate(m.refs):
        raw = m.edge_bytes.get(i, t.bytes)
        b = raw if isinstance(raw, sympy.Expr) else sympy.Integer(raw)  # mappers give ints or Exprs
        if g.has_edge(src, name):
            g.edges[src, name][BYTES] += b
        else:
            g.add_edge(src, name, **{TENSOR: t, BYTES: b})
    return {"rule": m.rule, "params": m.params, "cost": cost, "flops": cost.flops, "bytes": cost.bytes}
