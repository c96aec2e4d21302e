"""The ATen frontend of the op table (used by :mod:`graphs.importers.torch_export`).

Each FX node is described as an :class:`~graphs.importers.table.OpView`
(inputs, FakeTensor outputs, scalar arguments, contiguity) and costed by the
mapper the shared table holds for its ATen name (:mod:`graphs.importers.ops`).
``call_module`` / ``call_method`` nodes of plain ``torch.fx`` traces, and the Python
``operator`` functions they record for ``x / y``, ``x += y`` ..., are normalised to ATen
names first; an unmapped module is counted by its class name.
"""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.tensor import Tensor

from .ops import inplace_update, reshape
from .table import EMPTY_WHEN_AN_INPUT_IS, OpView, is_empty, lookup, unknown_node

__all__ = ["TORCH_DTYPES", "call_node"]

#: torch dtype name -> our dtype name
TORCH_DTYPES = {
    "float32": "fp32",
    "float64": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int64": "int64",
    "int32": "int32",
    "int8": "int8",
    "uint8": "uint8",
    # unsigned integers wider than a byte, priced as the signed integer of their width (the same
    # bytes): jax.random's uint32 keys and bits, the uint64 seeds of CUDA's flash attention
    "uint32": "int32",
    "uint64": "int64",
    "bool": "bool",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "complex64": "complex64",
    "complex128": "complex128",
}


#: Python's ``operator`` functions a plain ``torch.fx`` trace records for ``x / y``, ``x += y``
#: ..., by the ATen name of the op they run
_PY_OPERATORS = {
    "add": "add",
    "iadd": "add",
    "sub": "sub",
    "isub": "sub",
    "mul": "mul",
    "imul": "mul",
    "truediv": "div",
    "itruediv": "div",
    "floordiv": "floor_divide",
    "ifloordiv": "floor_divide",
    "mod": "remainder",
    "imod": "remainder",
    "pow": "pow",
    "ipow": "pow",
    "neg": "neg",
    "abs": "abs",
    "matmul": "matmul",
    "imatmul": "matmul",
    "and_": "bitwise_and",
    "iand": "bitwise_and",
    "or_": "bitwise_or",
    "ior": "bitwise_or",
    "invert": "bitwise_not",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "eq": "eq",
    "ne": "ne",
}


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    if getattr(target, "__module__", None) in ("_operator", "operator") and name in _PY_OPERATORS:
        return _PY_OPERATORS[name]
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        name = packet.__name__
    return name.split(".")[0]


def _numel(t: Tensor) -> sympy.Expr:
    return t.numel


_MODULES = {
    "Linear": "linear",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softmax": "softmax",
    "Dropout": "dropout",
    "Identity": "alias",
    "Embedding": "embedding",
    "LayerNorm": "layer_norm",
    "RMSNorm": "rms_norm",
    "Flatten": "flatten",
    "Conv1d": "conv1d",
    "Conv2d": "conv2d",
    "Conv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d",
}
_METHOD_CASTS = {
    "float": "float32",
    "half": "float16",
    "bfloat16": "bfloat16",
    "double": "float64",
    "int": "int32",
    "long": "int64",
    "bool": "bool",
}


def _module_params(imp: Any, gm: Any, n: Any, mod: Any) -> list[tuple[str, Tensor]]:
    """Weight sources for a called module's parameters, created on first use."""
    refs = []
    for pname, param in mod.named_parameters(recurse=False):
        key = f"{n.target}.{pname}".replace(".", "_")
        if key not in imp.out:
            imp.source(key, param, "weight")
        t = imp.out[key][0]
        if t is not None:
            refs.append((key, t))
    return refs


def _schema_index(target: Any, name: str | None) -> int | None:
    """The position of argument ``name`` in an ATen op's schema (None: no schema to ask; -1: the
    argument is keyword-only or absent). Overloads place an argument differently: ``is_causal`` is argument 5 of
    ``scaled_dot_product_attention``, 4 of ``_scaled_dot_product_flash_attention_for_cpu``, 6 of
    ``_scaled_dot_product_efficient_attention``."""
    schema = getattr(target, "_schema", None)
    if name is None or schema is None:
        return None
    for i, arg in enumerate(schema.arguments):
        if arg.name == name:
            return -1 if arg.kwarg_only else i
    return -1  # keyword-only, or no such argument: never read a positional stand-in


def _scalars(n: Any) -> Any:
    """``scalar(index, name)`` of an FX node: keyword ``name``, else positional: at ``name``'s
    place in the op's schema when the op has one (an ATen overload), else at ``index`` (a Python
    function of a plain ``torch.fx`` trace); a number or a tuple of whole numbers, else None."""

    def get(index: int | None, name: str | None) -> Any:
        at = _schema_index(n.target, name)
        if at is not None:
            index = at if at >= 0 else None
        v = n.kwargs.get(name) if name is not None and name in n.kwargs else None
        if v is None and index is not None and index < len(n.args):
            v = n.args[index]
        if isinstance(v, (list, tuple)) and v and all(type(x) is int for x in v):
            return tuple(v)  # a size list (a pool's kernel_size)
        return v if isinstance(v, (bool, int, float)) else None

    return get


def _contiguous(imp: Any, n: Any, val: Any, torch: Any) -> bool:
    """Whether ``val`` (a reshape's input) is contiguous. Where its strides hang on a
    data-dependent size (``nonzero``'s row count) torch cannot decide: assumed contiguous,
    and the node is listed in ``graph.graph["assumed_contiguous"]``."""
    if not isinstance(val, torch.Tensor):
        return True
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        return bool(val.is_contiguous())
    except GuardOnDataDependentSymNode:
        imp.assumed_contiguous.append(n.name)
        return True


def _reads_empty(n: Any, torch: Any) -> bool:
    """Whether an FX node reads a tensor with a zero-size dimension."""
    args = [*n.args, *n.kwargs.values()]
    vals = [a.meta.get("val") for a in args if hasattr(a, "meta")]
    return any(isinstance(v, torch.Tensor) and is_empty(v.shape) for v in vals)


def call_node(imp: Any, n: Any, torch: Any, gm: Any = None) -> None:
    """Cost one FX node through ``imp`` (a :mod:`graphs.importers.torch_export` importer) and the op table."""
    val = n.meta.get("val")
    extra: list[tuple[str, Tensor]] = []
    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        name = _MODULES.get(type(mod).__name__, type(mod).__name__)
        extra = _module_params(imp, gm, n, mod)
    elif n.op == "call_method":
        name = "to" if n.target in _METHOD_CASTS else str(n.target)
    else:
        name = _op_name(n.target)
    src = n.args[0].meta.get("val") if n.args and hasattr(n.args[0], "meta") else None
    if name == "getitem" and isinstance(val, torch.Tensor) and isinstance(src, torch.Tensor):
        name = "__getitem__"  # x[..., :k] of a plain fx trace: indexing a tensor, a view
    if name == "getitem" or (name == "__getitem__" and not isinstance(val, torch.Tensor)):
        return
    vals = val if isinstance(val, (list, tuple)) else [val]
    outs = [imp.tensor(f"{n.name}.{i}" if len(vals) > 1 else n.name, v) for i, v in enumerate(vals)]
    ins = imp.refs((n.args, n.kwargs))
    mapper = lookup("aten", name)
    if mapper is None and name.endswith("_") and not name.endswith("__"):
        mapper = lookup("aten", name[:-1])  # an in-place variant (add_, mul_) costs as its op
    if mapper is inplace_update and all(t is None for t in outs) and ins:
        # `dest[idx] = value` returns nothing: the op's result is the updated slice
        outs = [Tensor(n.name, ins[-1][1].shape, ins[0][1].dtype)]
    imp.out[n.name] = outs
    outs_t = [t for t in outs if t is not None]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    if (tensors and not outs_t) or (name in EMPTY_WHEN_AN_INPUT_IS and _reads_empty(n, torch)):
        imp.out[n.name] = [None] * len(outs)
        imp.empty[name] += 1  # no work (graphs.importers.table): priced 0, counted
        return
    if not outs_t:
        return  # symbolic-int arithmetic, asserts: no tensor, no cost
    if extra:  # a module's parameters: the embedding table comes first, others after the input
        ins = extra + ins if name == "embedding" else ins + extra
    src_val = n.args[0].meta.get("val") if n.args and hasattr(n.args[0], "meta") else None
    v = OpView(
        ins=ins,
        outs=outs_t,
        scalars=_scalars(n),
        weights=frozenset(i for i, (src, _) in enumerate(ins) if src in imp.weights),
        contiguous=_contiguous(imp, n, src_val, torch) if mapper is reshape else True,
        masked_causal=imp.masked_causal,
    )
    if mapper is None:
        # a called module is named by its class (Conv1d), not by its attribute path ('c')
        what = name if n.op == "call_module" else str(n.target)
        if imp.strict:
            raise CostModelError(f"no cost mapping for {what} (node {n.name!r})")
        imp.unknown[what] += 1
        mapper = unknown_node
    imp.add_op(n, mapper(v), outs_t)
