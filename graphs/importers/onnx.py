"""Import ONNX models into cost graphs (optional extra ``onnx``).

Shapes come from ONNX shape inference; symbolic dimensions (``dim_param``)
become positive-integer symbols, renamed through ``dims`` (``{"s72": "B"}``).
Initializers are ``weight`` sources, graph inputs ``input`` sources. Ops map
onto the rule registry through the op table shared with the torch importer
(:mod:`graphs.importers.table`):

* ``MatMul`` / ``Gemm`` -> ``gemm`` (batch folded into M when the right
  operand is 2-D) or ``batched_gemm``; ``Attention`` (opset 23) ->
  ``attention``, its inputs taken by position (Q, K, V, ``attn_mask``, ``past_key``,
  ``past_value``): the past keys and values are the cache, read in full (``kv_len`` = past +
  new), the mask moves nothing; 3-D ``[B, S, heads * head_dim]`` inputs are split by the
  ``q_num_heads`` / ``kv_num_heads`` attributes; the ``present_key`` / ``present_value``
  outputs are not priced apart (an engine appends the new keys in place);
* ``Conv`` / ``ConvTranspose`` -> ``conv`` (grouped and depthwise by the weight's shape);
  ``MaxPool``, ``AveragePool``, ``GlobalAveragePool``, ``GlobalMaxPool`` -> ``pool``;
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

An empty tensor (a zero-size dimension) is no edge; a node writing only empty tensors, or
multiplying an empty operand, is priced 0 and counted in ``graph.graph["empty_ops"]``.
Unknown ops are counted by name in ``graph.graph["unknown_ops"]``, and so is a node whose
outputs shape inference could not size (``"Op (no output shape)"``): its cost is not counted,
and the count says so. A model that is not one raises :class:`ONNXModelError` naming the node
or initializer: a tensor whose element type has no costmodel dtype (INT16, UINT16/32/64, STRING,
FLOAT4E2M1 ...; INT4 and UINT4 are ``int4``), a node reading a tensor nothing produced before it (a cycle, or nodes out of
topological order), a node in a domain the model does not import, an initializer whose data
does not hold its dims' elements, a model with no graph nodes (a 0-byte file parses as one),
an argument that is neither a ``ModelProto`` nor a path, or a path that is not a regular file of at most
:data:`MAX_MODEL_BYTES`.

Shape inference is bounded: onnxruntime's symbolic inference carries a tensor's values (shape
arithmetic) only while they are small (:data:`MAX_SHAPE_DATA` elements, sympy expressions of at
most :data:`MAX_SHAPE_EXPR_NODES` nodes, integers within int64) and never builds a large int64
``ConstantOfShape``; a value beyond that is left unknown, and its tensor's size becomes a symbol
named after it, visible in every total.

External data: a model loaded from a path is read without its external data (costs need
shapes, not weights), so no file beside it is opened; a tensor stored outside the model is
never read (shape inference sees it as a graph input of its shape). Needs ``onnx >= 1.16``,
whose external-data loader refuses locations outside the model's folder, should a caller
load one; :func:`from_onnx` checks the version.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.expr import parse_expr
from costmodel.keys import COST, FRONTEND_OP, G_UNKNOWN_OPS, KIND, OUTPUTS, REPEAT, NodeKind
from costmodel.safefile import read_regular_file
from costmodel.symbols import dim
from costmodel.tensor import Tensor

from .table import EMPTY_WHEN_AN_INPUT_IS, G_EMPTY_OPS, OpView, is_empty, lookup, unknown_node, write_node

__all__ = [
    "from_onnx",
    "ONNXModelError",
    "MIN_ONNX",
    "MAX_MODEL_BYTES",
    "MAX_SHAPE_DATA",
    "MAX_SHAPE_EXPR_NODES",
]

MIN_ONNX = (1, 16)  #: external-data path checks (CVE-2024-27318, CVE-2024-5187) start here
MAX_MODEL_BYTES = 2**31  #: protobuf's own limit on one message


class ONNXModelError(CostModelError):
    """An ONNX model the importer cannot read as a model (module doc)."""


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
    14: "complex64",
    15: "complex128",
    21: "int4",  # UINT4: 4 bits an element, as INT4
    22: "int4",
}
#: ONNX element type codes by name, for the refusal of one costmodel has no dtype for
_ONNX_TYPE_NAMES = {
    0: "UNDEFINED",
    4: "UINT16",
    5: "INT16",
    8: "STRING",
    12: "UINT32",
    13: "UINT64",
    18: "FLOAT8E4M3FNUZ",
    20: "FLOAT8E5M2FNUZ",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    25: "UINT2",
    26: "INT2",
    27: "FLOAT6E2M3",
    28: "FLOAT6E3M2",
}


def _shown(text: str) -> str:
    """``text`` quoted for a one-line error, cut to 100 characters (a node's name, op type or
    domain is the file's: a megabyte-long name would make a megabyte-long message)."""
    return repr(text[:100]) + ("..." if len(text) > 100 else "")


def _op(op_type: str) -> str:
    """An op type as written (``MatMul``) when it is a short identifier, else :func:`_shown`."""
    return op_type if op_type.isidentifier() and len(op_type) <= 100 else _shown(op_type)


def _dtype(code: int, what: str) -> str | None:
    """Our dtype of ONNX element type ``code`` (None: UNDEFINED, no type inferred); a type
    costmodel has no dtype for is refused, naming the tensor (as the torch and JAX importers do),
    never dropped: its reads would vanish from every op that takes it."""
    dt = _ONNX_DTYPES.get(code)
    if dt is None and code != 0:
        name = _ONNX_TYPE_NAMES.get(code, f"code {code}")
        raise ONNXModelError(f"ONNX {what} has element type {name}, which has no costmodel dtype")
    return dt


#: bytes per element in ``raw_data`` and the typed field otherwise holding the data, per dtype code
_STORAGE = {
    1: (4, "float_data"),
    10: (2, "int32_data"),
    16: (2, "int32_data"),
    11: (8, "double_data"),
    7: (8, "int64_data"),
    6: (4, "int32_data"),
    3: (1, "int32_data"),
    2: (1, "int32_data"),
    9: (1, "int32_data"),
    17: (1, "int32_data"),
    19: (1, "int32_data"),
}


def _version(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a version string (``1.16.0rc1`` -> ``(1, 16)``; unreadable -> ``(0, 0)``)."""
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise CostModelError("the ONNX importer needs the optional extra: pip install 'onnx>=1.16'") from exc
    found = getattr(onnx, "__version__", "0")
    if _version(found) < MIN_ONNX:
        raise CostModelError(
            f"the ONNX importer needs onnx >= {'.'.join(map(str, MIN_ONNX))} (its external-data path checks); "
            f"found onnx {found}: pip install 'onnx>=1.16'"
        )
    return onnx


def _load(onnx: Any, path: str) -> Any:
    """The model at ``path`` without its external data (module doc)."""
    data = read_regular_file(path, MAX_MODEL_BYTES, follow_links=True)
    if data is None:
        raise ONNXModelError(
            f"ONNX model {path[:200]!r} is not a readable regular file of at most {MAX_MODEL_BYTES:,} bytes"
        )
    try:
        return onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and kin: the file is not a model
        raise ONNXModelError(f"ONNX model {path[:200]!r} does not parse: {type(exc).__name__}") from None


def _external(t: Any) -> bool:
    return t.data_location == 1  # TensorProto.EXTERNAL


def _numel(dims: Any, what: str) -> int:
    n = 1
    for d in dims:
        if d < 0:
            raise ONNXModelError(f"ONNX {what}: dims {list(dims)} hold a negative size")
        n *= d
    return n


def _check_data(t: Any, what: str) -> int:
    """The element count of tensor ``t``'s dims, after checking its data holds that many."""
    n = _numel(t.dims, what)
    if _external(t) or t.data_type not in _STORAGE:
        return n  # not stored here, or a dtype we do not cost
    size, field = _STORAGE[t.data_type]
    if t.raw_data and len(t.raw_data) != n * size:
        raise ONNXModelError(
            f"ONNX {what}: dims {list(t.dims)} need {n * size} bytes of raw data, it holds {len(t.raw_data)}"
        )
    held = len(getattr(t, field))
    if not t.raw_data and held != n:
        raise ONNXModelError(f"ONNX {what}: dims {list(t.dims)} need {n} element(s), its data holds {held}")
    return n


def _check_graph(model: Any) -> None:
    """Nodes in topological order over known tensors, in imported domains; initializers sized."""
    imported = {o.domain or "ai.onnx" for o in model.opset_import}
    for init in model.graph.initializer:
        _check_data(init, f"initializer {_shown(init.name)}")
    known = {""} | {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    for i, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{i}"
        if (node.domain or "ai.onnx") not in imported:
            raise ONNXModelError(
                f"ONNX node {_shown(name)} ({_op(node.op_type)}) is in domain {_shown(node.domain)}, "
                "which the model does not import"
            )
        if any(a.HasField("t") and _external(a.t) for a in node.attribute):
            raise ONNXModelError(
                f"ONNX node {_shown(name)} ({_op(node.op_type)}) keeps an attribute tensor outside the model; "
                "only initializers may be external"
            )
        for x in node.input:
            if x not in known:
                raise ONNXModelError(
                    f"ONNX node {_shown(name)} ({_op(node.op_type)}) reads {_shown(x)}, which no input, initializer or "
                    "earlier node produces: the graph is cyclic or not in topological order"
                )
        known.update(node.output)


def _without_external(onnx: Any, model: Any) -> Any:
    """``model`` for shape inference: external initializers become graph inputs of their shape,
    so inference never opens their files (module doc)."""
    ext = [t for t in model.graph.initializer if _external(t)]
    if not ext:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    names = {t.name for t in ext}
    kept = [t for t in copy.graph.initializer if t.name not in names]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    inputs = {i.name for i in copy.graph.input}
    for t in ext:
        if t.name not in inputs:
            copy.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return copy


#: the most elements a tensor's values may have to be carried through shape inference as data
#: (shape arithmetic: ``Shape`` -> ``Gather`` -> ``Mul`` -> ``Reshape``, a handful of values); a
#: larger one is left as a tensor of unknown values, so inference never allocates it
MAX_SHAPE_DATA = 4096
#: the most sympy nodes one carried value may have; shape arithmetic is a few (``2*s0*s1 + 1``), and
#: a value squared in a loop (``x = x * (x + 1)``) doubles: printing it ran for minutes
MAX_SHAPE_EXPR_NODES = 256
_INT64 = 2**63  #: ONNX shape values are int64: one beyond it is no shape a runtime computes


def _shape_value_ok(value: Any) -> bool:
    """Whether ``value`` (what onnxruntime's symbolic inference carries as a tensor's data: a
    numpy array, a list, an int, a float or a sympy expression) is small enough to carry."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.size > MAX_SHAPE_DATA:
            return False
        if value.dtype != object:
            return True
        value = value.reshape(-1).tolist()
    items = value if isinstance(value, list | tuple) else [value]
    if len(items) > MAX_SHAPE_DATA:
        return False
    for item in items:
        if isinstance(item, list | tuple | np.ndarray):
            if not _shape_value_ok(item):
                return False
            continue
        if isinstance(item, bool | float | np.generic):
            continue
        if isinstance(item, int):
            if abs(item) >= _INT64:
                return False
            continue
        if isinstance(item, sympy.Basic):
            for seen, node in enumerate(sympy.preorder_traversal(item)):
                if seen >= MAX_SHAPE_EXPR_NODES or (node.is_Number and abs(node) >= _INT64):
                    return False
    return True


class _ShapeData(dict[str, Any]):
    """onnxruntime's ``sympy_data_`` (a tensor's values known during inference), holding only
    values :func:`_shape_value_ok` accepts: a larger one is dropped, and its tensor's values
    stay unknown (its shape is then a new symbol, as for any value inference cannot know)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if _shape_value_ok(value):
            super().__setitem__(key, value)
        else:
            self.pop(key, None)

    def __bool__(self) -> bool:  # ``start_sympy_data or {}`` in ``_infer_impl`` keeps this dict
        return True

    def copy(self) -> _ShapeData:
        out = _ShapeData()
        dict.update(out, self)
        return out


_BOUNDED: dict[str, Any] = {}
_BOUNDED_LOCK = threading.Lock()


def _bounded_inference(base: Any) -> Any:
    """A subclass of onnxruntime's ``SymbolicShapeInference`` that carries only small values
    (:class:`_ShapeData`), never reads a large initializer's values, and never materialises an
    int64 ``ConstantOfShape`` of more than :data:`MAX_SHAPE_DATA` elements (its own code builds
    ``np.ones(shape)``: a 100-byte model asked for 2 GB, or for all the memory there is)."""
    if "cls" in _BOUNDED:
        return _BOUNDED["cls"]
    from onnx import TensorProto
    from onnxruntime.tools import symbolic_shape_infer as ssi

    class Bounded(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for table in (self.dispatcher_, getattr(self, "aten_op_dispatcher_", {})):
                for op, handler in table.items():
                    table[op] = self._rechecked(handler)

        def _rechecked(self, handler: Any) -> Any:
            """``handler``, then its node's carried outputs checked again: a handler may grow a
            value after storing it (``_infer_Concat`` stores ``[]``, then extends that list in
            place, so ``Concat(c, c)`` chained doubled it each node: 12 of them held 392 MB)."""

            def run(node: Any) -> Any:
                result = handler(node)
                for name in node.output:
                    value = self.sympy_data_.get(name)
                    if value is not None and not _shape_value_ok(value):
                        self.sympy_data_.pop(name, None)
                return result

            return run

        def _infer_impl(self, start_sympy_data: Any = None) -> Any:
            data = _ShapeData()
            for k, v in (start_sympy_data or {}).items():
                data[k] = v
            return super()._infer_impl(data)

        def _try_get_value(self, node: Any, idx: int) -> Any:
            if idx < len(node.input):
                init = self.initializers_.get(node.input[idx])
                if init is not None and _numel(init.dims, "initializer") > MAX_SHAPE_DATA:
                    return None
            return super()._try_get_value(node, idx)

        def _infer_ConstantOfShape(self, node: Any) -> Any:  # onnxruntime names its handlers so
            shape = self._get_int_or_float_values(node)[0]
            items = shape if isinstance(shape, list) else [shape]
            n = 1
            for d in items:  # every dim its int64 branch reads as a number: int, numpy, sympy
                if n <= MAX_SHAPE_DATA and ssi.is_literal(d):
                    try:
                        n *= abs(int(d))
                    except (TypeError, ValueError, OverflowError):  # oo, nan: no number to build
                        pass
            vi = self.known_vi_.get(node.output[0])
            if shape is None or n <= MAX_SHAPE_DATA or vi is None:
                return super()._infer_ConstantOfShape(node)
            elem = vi.type.tensor_type.elem_type
            vi.type.tensor_type.elem_type = TensorProto.FLOAT  # its int64 branch builds np.ones(shape)
            try:
                return super()._infer_ConstantOfShape(node)
            finally:
                self.known_vi_[node.output[0]].type.tensor_type.elem_type = elem

    _BOUNDED["cls"] = Bounded
    return Bounded


def _symbolic(model: Any) -> Any:
    """onnxruntime's symbolic shape inference, what it could infer (None: not installed).

    The steps of ``SymbolicShapeInference.infer_shapes`` without its last one: on an op it cannot
    infer that saves the model as ``sym_shape_infer_temp.onnx`` (plus external data) in the
    working directory and raises a bare ``Exception``. Here what it inferred is kept, the rest
    is left unsized, and nothing is written. It runs bounded (:func:`_bounded_inference`), and
    the subgraphs of ``If``/``Loop``/``Scan`` too: while it runs, the module's class name is the
    bounded one (the subgraphs' inference constructs it by that name).
    """
    try:
        from onnxruntime.tools import symbolic_shape_infer as ssi
    except ImportError:
        return None
    if (ssi.get_opset(model) or 0) < 7:  # its own floor
        return None
    with _BOUNDED_LOCK:
        base = ssi.SymbolicShapeInference
        bounded = _bounded_inference(base)
        ssi.SymbolicShapeInference = bounded
        try:
            sym = bounded(2**31 - 1, True, False, 0)  # int_max, auto_merge, guess rank, verbose
            sym._preprocess(model)
            while sym.run_:
                sym._infer_impl()
            sym._update_output_from_vi()
            return sym.out_mp_
        finally:
            ssi.SymbolicShapeInference = base


def _infer(onnx: Any, model: Any) -> tuple[Any, bool]:
    """Shapes by onnxruntime's symbolic inference when installed, else (or when it fails) by
    onnx's own; True when symbolic. Outputs neither can size stay unsized."""
    try:
        inferred = _symbolic(model)
    except Exception:  # a third-party inference's own failure (it raises bare Exceptions)
        inferred = None
    if inferred is not None:
        return inferred, True
    try:
        return onnx.shape_inference.infer_shapes(model), False
    except Exception as exc:  # onnx's InferenceError, and what its C++ checks raise
        raise ONNXModelError(f"ONNX shape inference fails: {str(exc)[:300]}") from None


def from_onnx(model: Any, *, dims: Mapping[str, str] | None = None, strict: bool = False) -> nx.DiGraph:
    """Cost graph of an ONNX ``ModelProto`` (or a path to one); see module doc.

    Parameters
    ----------
    model : onnx.ModelProto, str or Path
        The model, or a path to a ``.onnx`` file (at most :data:`MAX_MODEL_BYTES`).
    dims : mapping of str to str, optional
        ``dim_param`` name -> our dimension name (``{"s72": "B"}``); None: the file's names. A key
        that names no ``dim_param`` of the model is refused.
    strict : bool, default False
        Raise on an unmapped op, or a node shape inference could not size, instead of counting it.

    Returns
    -------
    networkx.DiGraph
        The cost graph; ``graph.graph["unknown_ops"]`` counts what was not costed.
    """
    onnx = _onnx()
    what = "ONNX model"
    if isinstance(model, str | os.PathLike):
        what = f"ONNX model {os.fspath(model)[:200]!r}"
        model = _load(onnx, os.fspath(model))
    elif not isinstance(model, onnx.ModelProto):
        raise ONNXModelError(
            f"from_onnx takes an onnx.ModelProto or a path to one, got {type(model).__name__}"
        )
    if not model.HasField("graph") or not model.graph.node:  # a 0-byte file parses as an empty model
        raise ONNXModelError(f"{what} has no graph nodes: nothing to cost (an empty or truncated file?)")
    _check_graph(model)
    source = model  # its initializers, as given (external ones stay unread)
    # the exporter's own value_info keeps symbolic sizes (``s70 + 1``) that re-inference can lose:
    # infer only what is missing and keep the originals. onnxruntime's symbolic shape inference
    # (when installed) carries symbols through Reshape and broadcasts; onnx's own leaves gaps.
    original = {vi.name: vi for vi in model.graph.value_info}
    inferred, symbolic = _infer(onnx, _without_external(onnx, model))
    if symbolic:
        original = {}
    value_info = [original.get(vi.name, vi) for vi in inferred.graph.value_info]
    value_info += [vi for name, vi in original.items() if name not in {v.name for v in value_info}]
    model = inferred
    named = _dim_names([*source.graph.input, *source.graph.value_info, *source.graph.output, *value_info])
    stray = [k for k in (dims or {}) if k not in named]
    if stray:  # a typo would leave the file's names in every cost, unbound by the caller's
        shown = ", ".join(sorted(named)[:20]) or "none"
        raise ONNXModelError(
            f"dims names {stray[0]!r}, but the model's symbolic dimensions (dim_param) are: {shown}"
        )
    rename = {k: dim(v) for k, v in (dims or {}).items()}
    g = nx.DiGraph()
    shapes: dict[str, Tensor] = {}
    producer: dict[str, str] = {}
    unknown: Counter[str] = Counter()
    empty: set[str] = set()  #: tensors with a zero-size dimension: no edge, no bytes
    empty_ops: Counter[str] = Counter()
    consts = _scalar_constants(source)

    partial: dict[str, tuple[list[sympy.Expr | None], str]] = {}

    def dims_of(ttype: Any, name: str) -> tuple[list[sympy.Expr | None], str] | None:
        if not ttype.HasField("tensor_type") or not ttype.tensor_type.HasField("shape"):
            return None
        dt = _dtype(ttype.tensor_type.elem_type, f"tensor {name[:100]!r}")
        if dt is None:
            return None
        out: list[sympy.Expr | None] = []
        for d in ttype.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                out.append(sympy.Integer(d.dim_value))
            elif d.dim_param and not d.dim_param.startswith("unk__"):
                out.append(_dim_expr(d.dim_param, rename))
            else:
                out.append(None)  # unknown: recovered by broadcasting below, or left opaque
        return out, dt

    for vi in [*model.graph.input, *value_info, *model.graph.output]:
        found = dims_of(vi.type, vi.name)
        if found is None:
            continue
        if is_empty(d for d in found[0] if d is not None):
            empty.add(vi.name)
            continue
        if None in found[0]:
            partial[vi.name] = found
        else:
            shapes[vi.name] = Tensor(vi.name, tuple(found[0]) or (sympy.Integer(1),), found[1])
    inits = {i.name for i in source.graph.initializer}
    for init in source.graph.initializer:
        dt = _dtype(init.data_type, f"initializer {init.name[:100]!r}")
        if is_empty(init.dims):
            empty.add(init.name)
            continue
        if dt is None:
            continue
        t = Tensor(init.name, tuple(sympy.Integer(d) for d in init.dims) or (sympy.Integer(1),), dt)
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
            if any(a.name == "value" and a.HasField("t") and is_empty(a.t.dims) for a in node.attribute):
                empty.add(node.output[0])
                continue
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
        written = [o for o in node.output if o]
        if (written and all(o in empty for o in written)) or (
            node.op_type in EMPTY_WHEN_AN_INPUT_IS and any(x in empty for x in node.input)
        ):
            empty.update(written)
            empty_ops[node.op_type] += 1  # no work (graphs.importers.table): priced 0, counted
            continue
        for o in node.output:
            if o in partial and o not in shapes:
                known = [shapes[x] for x in node.input if x in shapes]
                if node.op_type == "MatMul" and len(known) == 2:  # [..., m, k] x [..., k, n] -> [..., m, n]
                    a, b = known
                    dims_, dt = partial[o]
                    # numpy's matmul: a 1-D operand is a vector whose dimension the result drops
                    tail = ([a.shape[-2]] if len(a.shape) > 1 else []) + (
                        [b.shape[-1]] if len(b.shape) > 1 else []
                    )
                    if tail and len(dims_) >= len(tail):
                        dims_[len(dims_) - len(tail) :] = tail
                    known = [
                        Tensor("a", a.shape[:-2] or (1,), a.dtype),
                        Tensor("b", b.shape[:-2] or (1,), b.dtype),
                    ]
                    partial[o] = (dims_, dt)
                shapes[o] = _complete(o, partial[o], known)
        outs = [shapes[o] for o in node.output if o in shapes]
        for o in node.output:
            producer[o] = name
        if not outs:  # not costed: counted, never dropped without a word
            if strict:
                raise CostModelError(
                    f"ONNX node {_shown(name)} ({_op(node.op_type)}): no shape for its output(s)"
                )
            mapped = lookup("onnx", node.op_type) is not None
            unknown[f"{node.op_type} (no output shape)" if mapped else node.op_type] += 1
            continue
        given = [j for j, x in enumerate(node.input) if x in producer and x in shapes]
        ins = [(producer[node.input[j]], shapes[node.input[j]]) for j in given]
        missing = [x for x in node.input if x and x not in shapes and x not in empty]
        if missing and node.op_type in ("MatMul", "Gemm", "Attention"):
            raise CostModelError(
                f"ONNX node {_shown(name)} ({_op(node.op_type)}): no shape for input(s) "
                f"{', '.join(_shown(x) for x in missing[:5])}"
            )
        _add(g, name, node, ins, outs, inits, unknown, strict, consts, tuple(given))
    g.graph[G_UNKNOWN_OPS] = dict(unknown)
    g.graph[G_EMPTY_OPS] = dict(empty_ops)
    return g


def _dim_names(infos: Any) -> set[str]:
    """Every ``dim_param`` of ``infos`` and each name inside one (``s70`` of ``s70 + 1``)."""
    out: set[str] = set()
    for vi in infos:
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                out.add(d.dim_param)
                out.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", d.dim_param))
    return out


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
            dt = _dtype(a.t.data_type, f"Constant {node.output[0][:100]!r}")
            if dt is None:
                return None
            shape = tuple(sympy.Integer(d) for d in a.t.dims) or (sympy.Integer(1),)
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
    slots: tuple[int, ...] = (),
) -> None:
    """Cost one ONNX node through the shared op table and write it; ``slots`` are the node's
    input positions of ``ins`` (an absent optional input, ``""``, has none)."""

    def scalars(index: int | None, key: str | None) -> Any:
        if key is not None:
            for a in node.attribute:
                if a.name == key:
                    if a.type == 7:  # INTS (a pool's kernel_shape)
                        return tuple(a.ints)
                    return a.i if a.type == 2 else (a.f if a.type == 1 else None)
        if index is not None and index < len(node.input):
            return consts.get(node.input[index])
        return None

    v = OpView(
        ins=ins,
        outs=outs,
        scalars=scalars,
        weights=frozenset(i for i, (src, _) in enumerate(ins) if src in inits),
        slots=slots,
    )
    mapper = lookup("onnx", node.op_type)
    if mapper is None:
        if strict:
            raise CostModelError(f"no cost mapping for ONNX op {_op(node.op_type)} (node {_shown(name)})")
        unknown[node.op_type] += 1
        mapper = unknown_node
    write_node(g, name, mapper(v), outs, **{FRONTEND_OP: node.op_type})


def _scalar_constants(model: Any) -> dict[str, float]:
    """One-element initializers and ``Constant`` values (exponents, scales), decoded; no other
    tensor's data is read, and none stored outside the model."""
    from onnx import numpy_helper

    def scalar(t: Any, what: str) -> float | None:
        if _external(t) or _check_data(t, what) != 1:
            return None
        try:
            return float(numpy_helper.to_array(t).reshape(-1)[0])
        except (ValueError, TypeError, OverflowError) as exc:
            raise ONNXModelError(f"ONNX {what} does not decode: {exc}") from None

    out: dict[str, float] = {}
    for init in model.graph.initializer:
        v = scalar(init, f"initializer {_shown(init.name)}")
        if v is not None:
            out[init.name] = v
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and node.output:
                    v = scalar(a.t, f"Constant {node.output[0]!r}")
                    if v is not None:
                        out[node.output[0]] = v
    return out
