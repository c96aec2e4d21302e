"""Import ONNX models into cost graphs (optional extra ``onnx``).

Shapes come from ONNX shape inference; symbolic dimensions (``dim_param``)
become positive-integer symbols, renamed through ``dims`` (``{"s72": "B"}``).
Initializers are ``weight`` sources, graph inputs ``input`` sources. Ops map
onto the same rule registry as the torch importer:

* ``MatMul`` / ``Gemm`` -> ``gemm`` (batch folded into M when the right
  operand is 2-D) or ``batched_gemm``; ``Attention`` (opset 23) ->
  ``attention``;
* arithmetic, comparisons, activations -> ``elementwise`` with the same
  per-op vector/SFU counts as :data:`graphs.importers.torch_export.ELEMENTWISE_OPS`;
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
from costmodel.graph import BYTES, COST, INPUTS, KIND, OP, OUTPUTS, PARAMS, REPEAT, TENSOR
from costmodel.rules import op_cost
from costmodel.symbols import dim
from costmodel.tensor import Tensor

from .aten import ELEMENTWISE_OPS, elementwise_params

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
_ELEMENTWISE = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Neg": "neg",
    "Relu": "relu",
    "Abs": "abs",
    "Max": "maximum",
    "Min": "minimum",
    "Where": "where",
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
    "And": "logical_and",
    "Or": "logical_or",
    "Not": "logical_not",
    "Reciprocal": "reciprocal",
    "Sqrt": "sqrt",
    "Exp": "exp",
    "Log": "log",
    "Sin": "sin",
    "Cos": "cos",
    "Tanh": "tanh",
    "Erf": "erf",
    "Sigmoid": "sigmoid",
    "IsNaN": "isnan",
    "CumSum": "cumsum",
    "Clip": "clamp",
    "Gelu": "gelu",
    "Mod": "remainder",
    "BitwiseAnd": "bitwise_and",
}
_VIEWS = {
    "Reshape",
    "Transpose",
    "Unsqueeze",
    "Squeeze",
    "Slice",
    "Expand",
    "Identity",
    "Flatten",
    "Split",
    "Dropout",
}
_SHAPE_OPS = {"Shape", "Range", "ConstantOfShape", "Constant", "Size"}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"}


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
            init.name, **{KIND: "weight", COST: Cost.resident(weights=t.bytes), OUTPUTS: (t,), REPEAT: 1}
        )
        producer[init.name] = init.name
    for inp in model.graph.input:
        if inp.name in inits or inp.name not in shapes:
            continue
        t = shapes[inp.name]
        g.add_node(inp.name, **{KIND: "input", COST: Cost.zero(), OUTPUTS: (t,), REPEAT: 1})
        producer[inp.name] = inp.name

    for i, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{i}"
        if node.op_type == "Constant":  # a constant tensor: a (small) weight source
            ct = _constant_tensor(node)
            if ct is not None:
                shapes[node.output[0]] = ct
                g.add_node(
                    name, **{KIND: "weight", COST: Cost.resident(weights=ct.bytes), OUTPUTS: (ct,), REPEAT: 1}
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
    g.graph["unknown_ops"] = dict(unknown)
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


def _attr(node: Any, key: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == key:
            return a.i if a.type == 2 else (a.f if a.type == 1 else default)
    return default


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
    op = node.op_type
    out = outs[0]
    n_out = out.numel
    edges: dict[int, Any] = {}

    def put(
        rule: str, params: dict[str, Any], refs: list[tuple[str, Tensor]], mark_unknown: bool = False
    ) -> None:
        cost = op_cost(rule, **params)
        g.add_node(
            name,
            **{
                KIND: "op",
                OP: rule,
                PARAMS: params,
                COST: cost,
                INPUTS: tuple(t for _, t in refs),
                OUTPUTS: tuple(outs),
                REPEAT: 1,
                "onnx": op,
                "unknown": mark_unknown,
            },
        )
        for j, (src, t) in enumerate(refs):
            b = sympy.sympify(edges.get(j, t.bytes))
            if g.has_edge(src, name):
                g.edges[src, name][BYTES] += b
            else:
                g.add_edge(src, name, **{TENSOR: t, BYTES: b})

    if op in ("MatMul", "Gemm"):
        a, b = ins[0][1], ins[1][1]
        trans_b = op == "Gemm" and _attr(node, "transB", 0) == 1
        k = a.shape[-1]
        nn = b.shape[-2] if trans_b else b.shape[-1]
        bias = op == "Gemm" and len(ins) > 2
        if len(b.shape) <= 2:
            put(
                "gemm",
                {
                    "M": a.numel / k,
                    "N": nn,
                    "K": k,
                    "dtype": a.dtype.name,
                    "w_dtype": b.dtype.name,
                    "out_dtype": out.dtype.name,
                    "bias": bias,
                },
                ins,
            )
        else:
            m = a.shape[-2]
            put(
                "batched_gemm",
                {
                    "batch": sympy.simplify(n_out / (m * nn)),
                    "M": m,
                    "N": nn,
                    "K": k,
                    "dtype": a.dtype.name,
                    "w_dtype": b.dtype.name,
                    "out_dtype": out.dtype.name,
                },
                ins,
            )
    elif op == "Attention":
        q, k, v = ins[0][1], ins[1][1], ins[2][1]
        put(
            "attention",
            {
                "batch": q.shape[0],
                "heads": q.shape[-3],
                "kv_heads": k.shape[-3],
                "q_len": q.shape[-2],
                "kv_len": k.shape[-2],
                "head_dim": q.shape[-1],
                "v_head_dim": v.shape[-1],
                "dtype": q.dtype.name,
                "causal": bool(_attr(node, "is_causal", 0)),
            },
            ins[:3],
        )
    elif op == "Softmax":
        x = ins[0][1]
        put("softmax", {"rows": x.numel / x.shape[-1], "cols": x.shape[-1], "dtype": x.dtype.name}, ins[:1])
    elif op in _REDUCE:
        x = ins[0][1]
        put(
            "reduction",
            {
                "rows": n_out,
                "cols": sympy.simplify(x.numel / n_out),
                "dtype": x.dtype.name,
                "out_dtype": out.dtype.name,
            },
            ins[:1],
        )
    elif op in ("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"):
        x = ins[0][1]
        rule = "layernorm" if op == "LayerNormalization" else "rmsnorm"
        params: dict[str, Any] = {"rows": x.numel / x.shape[-1], "cols": x.shape[-1], "dtype": x.dtype.name}
        if rule == "layernorm":
            params["bias"] = len(ins) > 2
        put(rule, params, ins)
    elif op == "Pow":
        exponent = _pow_exponent(node, consts)
        pow_ops: dict[float, tuple[int, int]] = {2.0: (1, 0), 0.5: (0, 1), -1.0: (1, 0)}
        ops = pow_ops.get(exponent, (0, 2)) if exponent is not None else (0, 2)
        _ew(put, ins, out, ops)
    elif op in _ELEMENTWISE:
        _ew(put, ins, out, ELEMENTWISE_OPS[_ELEMENTWISE[op]])
    elif op == "Gather" and ins and ins[0][0] in inits:
        w = ins[0][1]
        idx = ins[1][1] if len(ins) > 1 else out
        hidden = sympy.simplify(n_out / idx.numel)
        edges[0] = idx.numel * hidden * w.dtype.bytes
        put(
            "embedding",
            {"tokens": idx.numel, "hidden": hidden, "dtype": w.dtype.name, "index_dtype": idx.dtype.name},
            ins[:2],
        )
    elif op in ("Gather", "GatherND", "GatherElements"):
        # a gather reads the elements it returns and its indices, then writes them
        idx_bytes = sympy.Add(*(t.bytes for _, t in ins[1:]))
        edges[0] = n_out * ins[0][1].dtype.bytes if ins else 0
        put(
            "elementwise",
            {
                "n": n_out,
                "inputs": len(ins),
                "vector_ops": 0,
                "dtype": out.dtype.name,
                "read_bytes": n_out * out.dtype.bytes + idx_bytes,
            },
            ins,
        )
    elif op == "Cast" and ins and ins[0][1].dtype != out.dtype:
        put("copy", {"elements": n_out, "dtype": ins[0][1].dtype.name, "out_dtype": out.dtype.name}, ins[:1])
    elif op == "Concat":
        put("copy", {"elements": n_out, "dtype": out.dtype.name}, ins)
    elif op in _VIEWS or op == "Cast":
        edges.update({j: 0 for j in range(len(ins))})
        put("view", {"elements": n_out}, ins)
    elif op in _SHAPE_OPS:
        edges.update({j: 0 for j in range(len(ins))})
        put("elementwise", {"n": n_out, "inputs": 0, "vector_ops": 0, "dtype": out.dtype.name}, ins)
    else:
        if strict:
            raise CostModelError(f"no cost mapping for ONNX op {op} (node {name!r})")
        unknown[op] += 1
        edges.update({j: 0 for j in range(len(ins))})
        put("view", {"elements": n_out}, ins, mark_unknown=True)


def _ew(put: Any, ins: list[tuple[str, Tensor]], out: Tensor, ops: tuple[int, int]) -> None:
    put("elementwise", elementwise_params(ins, out, ops), ins)


def _pow_exponent(node: Any, consts: Mapping[str, float]) -> float | None:
    """The exponent of a ``Pow`` when it is a known scalar constant, else ``None`` (exp/log)."""
    return consts.get(node.input[1]) if len(node.input) > 1 else None


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
