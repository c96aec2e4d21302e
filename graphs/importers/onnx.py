"""Import ONNX models into cost graphs (optional extra ``onnx``).

Shapes come from ONNX shape inference; symbolic dimensions (``dim_param``)
become positive-integer symbols, renamed through ``dims`` (``{"s72": "B"}``).
Initializers are ``weight`` sources, graph inputs ``input`` sources. Ops map
onto the rule registry through the op table shared with the torch importer
(:mod:`graphs.importers.table`):

* ``MatMul`` / ``Gemm`` -> ``gemm`` (batch folded into M when the right
  operand is 2-D) or ``batched_gemm``; ``Attention`` (opset 23) ->
  ``attention``;
* arithmetic, comparisons, activations -> ``elementwise`` with the same
  per-op vector/SFU counts as the ATen names (:data:`graphs.importers.ops.ELEMENTWISE_OPS`);
* ``Softmax`` -> ``softmax``; ``Reduce*`` -> ``reduction``;
  ``LayerNormalization`` / ``RMSNormalization`` -> the norms;
* ``Gather`` on an initializer -> ``embedding`` (rows read), ``GatherND`` ->
  a gather of the output's elements;
* layout ops (``Reshape``, ``Transpose``, ``Unsqueeze``, ``Slice``,
  ``Expand`` ...) cost nothing, as torch views do; ``Concat`` and ``Cast`` to
  another type are copies; shape arithmetic (``Shape``, ``Range``,
  ``ConstantOfShape``) only writes its small result.

Unknown ops are counted by name in ``graph.graph["unknown_ops"]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.expr import parse_expr
from costmodel.keys import COST, FRONTEND_OP, G_UNKNOWN_OPS, KIND, OUTPUTS, REPEAT, NodeKind
from costmodel.symbols import dim
from costmodel.tensor import Tensor

from .table import OpView, lookup, unknown_node, write_node

__all__ = ["from_onnx"]

_ONNX_DTYPES = {
    1: "fp32",
    10: "fp16",
    16: "bf16",
    11: "fp64",
    7: "int64",
    6: "int32",
    3: "int8",
    2: "uint8",
    9: "bool",
    17: "fp8_e4m3",
    19: "fp8_e5m2",
}


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise CostModelError("the ONNX importer needs the optional extra: pip install onnx") from exc
    return onnx


def from_onnx(model: Any, *, dims: Mapping[str, str] | None = None, strict: bool = False) -> nx.DiGraph:
    """Cost graph of an ONNX ``ModelProto`` (or a path to one); see module doc."""
    onnx = _onnx()
    if isinstance(model, str):
        model = onnx.load(model)
    # the exporter's own value_info keeps symbolic sizes (``s70 + 1``) that re-inference can lose:
    # infer only what is missing and keep the originals. onnxruntime's symbolic shape inference
    # (when installed) carries symbols through Reshape and broadcasts; onnx's own leaves gaps.
    original = {vi.name: vi for vi in model.graph.value_info}
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
        original = {}
    except ImportError:
        inferred = onnx.shape_inference.infer_shapes(model)
    value_info = [original.get(vi.name, vi) for vi in inferred.graph.value_info]
    value_info += [vi for name, vi in original.items() if name not in {v.name for v in value_info}]
    model = inferred
    rename = {k: dim(v) for k, v in (dims or {}).items()}
    g = nx.DiGraph()
    shapes: dict[str, Tensor] = {}
    producer: dict[str, str] = {}
    unknown: Counter[str] = Counter()
    consts = _scalar_constants(model)

    partial: dict[str, tuple[list[sympy.Expr | None], str]] = {}

    def dims_of(ttype: Any) -> tuple[list[sympy.Expr | None], str] | None:
        if not ttype.HasField("tensor_type") or not ttype.tensor_type.HasField("shape"):
            return None
        dt = _ONNX_DTYPES.get(ttype.tensor_type.elem_type)
        if dt is None:
            return None
        out: list[sympy.Expr | None] = []
        for d in ttype.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                out.append(sympy.Integer(max(d.dim_value, 1)))
            elif d.dim_param and not d.dim_param.startswith("unk__"):
                out.append(_dim_expr(d.dim_param, rename))
            else:
                out.append(None)  # unknown: recovered by broadcasting below, or left opaque
        return out, dt

    for vi in [*model.graph.input, *value_info, *model.graph.output]:
        found = dims_of(vi.type)
        if found is None:
            continue
        if None in found[0]:
            partial[vi.name] = found
        else:
            shapes[vi.name] = Tensor(vi.name, tuple(found[0]) or (sympy.Integer(1),), found[1])
    inits = {i.name for i in model.graph.initializer}
    for init in model.graph.initializer:
        dt = _ONNX_DTYPES.get(init.data_type)
        if dt is None:
            continue
        t = Tensor(init.name, tuple(sympy.Integer(max(d, 1)) for d in init.dims) or (sympy.Integer(1),), dt)
        shapes[init.name] = t
        g.add_node(
            init.name,
            **{KIND: NodeKind.WEIGHT, COST: Cost.resident(weights=t.bytes), OUTPUTS: (t,), REPEAT: 1},
        )
        producer[init.name] = init.name
    for inp in model.graph.input:
        if inp.name in inits or inp.name not in shapes:
            continue
        t = shapes[inp.name]
        g.add_node(inp.name, **{KIND: NodeKind.INPUT, COST: Cost.zero(), OUTPUTS: (t,), REPEAT: 1})
        producer[inp.name] = inp.name

    for i, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{i}"
        if node.op_type == "Constant":  # a constant tensor: a (small) weight source
            ct = _constant_tensor(node)
            if ct is not None:
                shapes[node.output[0]] = ct
                g.add_node(
                    name,
                    **{
                        KIND: NodeKind.WEIGHT,
                        COST: Cost.resident(weights=ct.bytes),
                        OUTPUTS: (ct,),
                        REPEAT: 1,
                    },
                )
                producer[node.output[0]] = name
            continue
        for o in node.output:
            if o in partial and o not in shapes:
                known = [shapes[x] for x in node.input if x in shapes]
                if node.op_type == "MatMul" and len(known) == 2:  # [..., m, k] x [..., k, n] -> [..., m, n]
                    a, b = known
                    dims_, dt = partial[o]
                    dims_[-2:] = [a.shape[-2] if len(a.shape) > 1 else sympy.Integer(1), b.shape[-1]]
                    known = [
                        Tensor("a", a.shape[:-2] or (1,), a.dtype),
                        Tensor("b", b.shape[:-2] or (1,), b.dtype),
                    ]
                    partial[o] = (dims_, dt)
                shapes[o] = _complete(o, partial[o], known)
        outs = [shapes[o] for o in node.output if o in shapes]
        for o in node.output:
            producer[o] = name
        if not outs:
            continue
        ins = [(producer[x], shapes[x]) for x in node.input if x in producer and x in shapes]
        missing = [x for x in node.input if x and x not in shapes]
        if missing and node.op_type in ("MatMul", "Gemm", "Attention"):
            raise CostModelError(f"ONNX node {name!r} ({node.op_type}): no shape for input(s) {missing}")
        _add(g, name, node, ins, outs, inits, unknown, strict, consts)
    g.graph[G_UNKNOWN_OPS] = dict(unknown)
    return g


def _complete(name: str, found: tuple[list[sympy.Expr | None], str], inputs: list[Tensor]) -> Tensor:
    """Fill unknown sizes by numpy broadcasting of the inputs (right-aligned); what stays
    unknown becomes an opaque symbol named after the tensor, visible in every total."""
    dims_, dt = found
    rank = len(dims_)
    for i, d in enumerate(dims_):
        if d is not None:
            continue
        cands = []
        for t in inputs:
            j = len(t.shape) - (rank - i)
            if j >= 0 and t.shape[j] != 1:
                cands.append(t.shape[j])
        dims_[i] = cands[0] if cands else dim(_safe(f"{name}_d{i}"))
    return Tensor(name, tuple(dims_) or (sympy.Integer(1),), dt)


def _constant_tensor(node: Any) -> Tensor | None:
    for a in node.attribute:
        if a.name == "value" and a.HasField("t"):
            dt = _ONNX_DTYPES.get(a.t.data_type)
            if dt is None:
                return None
            shape = tuple(sympy.Integer(max(d, 1)) for d in a.t.dims) or (sympy.Integer(1),)
            return Tensor(node.output[0], shape, dt)
    return None


def _dim_expr(text: str, rename: Mapping[str, sympy.Expr]) -> sympy.Expr:
    """A ``dim_param`` as an expression: a name (``s70``) or arithmetic on names (``s70 + 1``)."""
    if text in rename:
        return rename[text]
    try:
        return parse_expr(text, {k: v for k, v in rename.items()}, field="dim_param")
    except CostModelError:
        return dim(_safe(text))  # an opaque name such as ``unk__12``


def _safe(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and out[0].isalpha() else f"d_{out}"


def _add(
    g: nx.DiGraph,
    name: str,
    node: Any,
    ins: list[tuple[str, Tensor]],
    outs: list[Tensor],
    inits: set[str],
    unknown: Counter[str],
    strict: bool,
    consts: Mapping[str, float],
) -> None:
    """Cost one ONNX node through the shared op table and write it."""

    def scalars(index: int | None, key: str | None) -> Any:
        if key is not None:
            for a in node.attribute:
                if a.name == key:
                    return a.i if a.type == 2 else (a.f if a.type == 1 else None)
        if index is not None and index < len(node.input):
            return consts.get(node.input[index])
        return None

    v = OpView(
        ins=ins,
        outs=outs,
        scalars=scalars,
        weights=frozenset(i for i, (src, _) in enumerate(ins) if src in inits),
    )
    mapper = lookup("onnx", node.op_type)
    if mapper is None:
        if strict:
            raise CostModelError(f"no cost mapping for ONNX op {node.op_type} (node {name!r})")
        unknown[node.op_type] += 1
        mapper = unknown_node
    write_node(g, name, mapper(v), outs, **{FRONTEND_OP: node.op_type})


def _scalar_constants(model: Any) -> dict[str, float]:
    from onnx import numpy_helper

    out: dict[str, float] = {}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.size == 1:
            out[init.name] = float(arr.reshape(-1)[0])
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    arr = numpy_helper.to_array(a.t)
                    if arr.size == 1:
                        out[node.output[0]] = float(arr.reshape(-1)[0])
    return out
