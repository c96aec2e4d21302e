"""ATen ops mapped onto the cost-rule registry (used by :mod:`graphs.importers.torch_export`).

Each FX node becomes one rule call with parameters read off its FakeTensor
shapes: matmuls (``linear``, ``mm``, ``addmm``, ``bmm``, ``matmul``), SDPA
variants, softmax, norms, reductions, elementwise arithmetic and activations
(with their vector/SFU op counts), views (free), copies and casts, in-place
updates (the updated slice only), gathers, and ``call_module`` /
``call_method`` nodes of plain ``torch.fx`` traces.
"""

from __future__ import annotations

from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.tensor import Tensor

__all__ = ["TORCH_DTYPES", "ELEMENTWISE_OPS", "elementwise_params", "call_node"]

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
    "bool": "bool",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "complex64": "complex64",
    "complex128": "complex128",
}

#: elementwise ops: (vector ops, SFU ops) per output element; see the module doc of rules.elementwise
ELEMENTWISE_OPS: dict[str, tuple[int, int]] = {
    **{
        k: (1, 0)
        for k in (
            "add",
            "sub",
            "mul",
            "div",
            "neg",
            "relu",
            "abs",
            "maximum",
            "minimum",
            "where",
            "clamp",
            "eq",
            "ne",
            "le",
            "lt",
            "ge",
            "gt",
            "logical_not",
            "logical_and",
            "logical_or",
            "bitwise_and",
            "bitwise_or",
            "__and__",
            "__or__",
            "reciprocal",
            "square",
            "cumsum",
            "masked_fill",
            "fill",
            "isnan",
            "rsub",
            "floor_divide",
            "remainder",
            "sign",
            "bitwise_not",
            "clamp_min",
            "clamp_max",
            "diff",
        )
    },
    **{k: (0, 1) for k in ("exp", "log", "rsqrt", "sqrt", "sin", "cos", "tanh", "erf", "exp2", "log2")},
    "sigmoid": (3, 1),  # 1 / (1 + exp(-x)): negate, add, reciprocal + exp
    "silu": (3, 1),  # x / (1 + exp(-x))
    "gelu": (7, 1),  # tanh approximation, as the graph builders count it
}
#: ops that only write (no tensor input read)
_FACTORIES = {
    "arange",
    "full",
    "ones",
    "zeros",
    "empty",
    "scalar_tensor",
    "new_ones",
    "new_zeros",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
    "new_full",
    "new_empty",
    "rand",
    "randn",
}
#: metadata-only ops
_VIEWS = {
    "view",
    "_unsafe_view",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "slice",
    "select",
    "alias",
    "detach",
    "as_strided",
    "unflatten",
    "flatten",
    "narrow",
    "split",
    "chunk",
    "split_with_sizes",
    "unbind",
    "dropout",
    "lift_fresh_copy",
    "movedim",
    "expand_as",
    "view_as",
    "unsqueeze_copy",
    "_assert_tensor_metadata",
    "to",
    "type_as",
}
_COPIES = {
    "clone",
    "cat",
    "stack",
    "_to_copy",
    "repeat",
    "pad",
    "constant_pad_nd",
    "flip",
    "roll",
    "tril",
    "triu",
}
_INPLACE_UPDATES = {
    "__setitem__",
    "index_put",
    "index_put_",
    "copy_",
    "slice_scatter",
    "select_scatter",
    "index_copy",
    "index_copy_",
    "scatter",
    "scatter_",
}
_REDUCTIONS = {
    "mean",
    "sum",
    "amax",
    "amin",
    "max",
    "min",
    "any",
    "all",
    "prod",
    "argmax",
    "argmin",
    "var",
    "std",
    "logsumexp",
    "norm",
    "linalg_vector_norm",
}
_SDPA = {
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
}


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
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


def call_node(imp: Any, n: Any, torch: Any, gm: Any = None) -> None:
    """Cost one FX node through ``imp`` (a :class:`graphs.importers.torch_export` importer)."""
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
    if name == "getitem" or (name == "__getitem__" and not isinstance(val, torch.Tensor)):
        return
    vals = val if isinstance(val, (list, tuple)) else [val]
    outs = [imp.tensor(f"{n.name}.{i}" if len(vals) > 1 else n.name, v) for i, v in enumerate(vals)]
    ins = imp.refs((n.args, n.kwargs))
    if name in _INPLACE_UPDATES and all(t is None for t in outs) and ins:
        # `dest[idx] = value` returns nothing: the op's result is the updated slice
        v = ins[-1][1]
        outs = [Tensor(n.name, v.shape, ins[0][1].dtype)]
    imp.out[n.name] = outs
    outs_t = [t for t in outs if t is not None]
    if not outs_t:
        return  # symbolic-int arithmetic, asserts: no tensor, no cost
    if extra:  # a module's parameters: the embedding table comes first, others after the input
        ins = extra + ins if name == "embedding" else ins + extra
    out = outs_t[0]
    n_out = _numel(out)

    def view() -> None:
        imp.add_op(n, "view", {"elements": n_out}, outs_t, ins, {i: 0 for i in range(len(ins))})

    def copy(elements: sympy.Expr, src_dtype: str | None = None) -> None:
        imp.add_op(
            n,
            "copy",
            {"elements": elements, "dtype": src_dtype or out.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins,
        )

    if name in ("linear", "mm", "addmm", "matmul", "bmm", "baddbmm"):
        _matmul(imp, n, name, ins, outs_t)
    elif name in _SDPA:
        _sdpa(imp, n, ins, outs_t)
    elif name in ("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"):
        x = ins[0][1]
        cols = x.shape[-1]
        imp.add_op(
            n,
            "softmax",
            {"rows": _numel(x) / cols, "cols": cols, "dtype": x.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins[:1],
        )
    elif name == "embedding":
        w, idx = ins[0][1], ins[1][1]
        tokens, hidden = _numel(idx), w.shape[-1]
        imp.add_op(
            n,
            "embedding",
            {"tokens": tokens, "hidden": hidden, "dtype": w.dtype.name, "index_dtype": idx.dtype.name},
            outs_t,
            ins[:2],
            {0: tokens * hidden * w.dtype.bytes},
        )
    elif name in ("native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm"):
        x = ins[0][1]
        cols = x.shape[-1]
        rule = "rmsnorm" if "rms" in name else "layernorm"
        params: dict[str, Any] = {"rows": _numel(x) / cols, "cols": cols, "dtype": x.dtype.name}
        if rule == "layernorm":
            params["bias"] = len(ins) >= 3
        imp.add_op(n, rule, params, outs_t, ins)
    elif name in _REDUCTIONS:
        x = ins[0][1]
        imp.add_op(
            n,
            "reduction",
            {
                "rows": n_out,
                "cols": sympy.simplify(_numel(x) / n_out),
                "dtype": x.dtype.name,
                "out_dtype": out.dtype.name,
            },
            outs_t,
            ins[:1],
        )
    elif name == "pow":
        exp = n.args[1] if len(n.args) > 1 else None
        pow_ops: dict[float, tuple[int, int]] = {2.0: (1, 0), 0.5: (0, 1), -1.0: (1, 0), 1.0: (0, 0)}
        ops = pow_ops.get(float(exp), (0, 2)) if isinstance(exp, (int, float)) else (0, 2)
        _elementwise(imp, n, ins, outs_t, ops)
    elif name in ELEMENTWISE_OPS:
        _elementwise(imp, n, ins, outs_t, ELEMENTWISE_OPS[name])
    elif name in _FACTORIES:
        imp.add_op(
            n,
            "elementwise",
            {"n": n_out, "inputs": 0, "vector_ops": 0, "dtype": out.dtype.name},
            outs_t,
            [],
            {},
        )
    elif name in ("reshape", "contiguous"):
        src = ins[0] if ins else None
        src_val = n.args[0].meta.get("val") if n.args and hasattr(n.args[0], "meta") else None
        if src is not None and isinstance(src_val, torch.Tensor) and not src_val.is_contiguous():
            copy(n_out, src[1].dtype.name)
        else:
            view()
    elif name in ("to", "_to_copy", "type", "to_copy") and ins and ins[0][1].dtype != out.dtype:
        copy(n_out, ins[0][1].dtype.name)
    elif name in _VIEWS or name in ("to", "_to_copy", "__getitem__", "size", "dim", "contiguous_view"):
        view()
    elif name in _COPIES:
        copy(n_out, ins[0][1].dtype.name if ins else None)
    elif name in _INPLACE_UPDATES:
        # charge the updated values only: the last tensor argument, not the destination
        values = ins[-1][1] if len(ins) > 1 else out
        imp.add_op(
            n,
            "copy",
            {"elements": _numel(values), "dtype": values.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins,
            {i: 0 for i in range(len(ins) - 1)},
        )
    elif name in ("index", "gather", "index_select", "take_along_dim"):
        # a gather reads the elements it returns and its indices, then writes them
        idx_bytes = sympy.Add(*(t.bytes for _, t in ins[1:]))
        imp.add_op(
            n,
            "elementwise",
            {
                "n": n_out,
                "inputs": len(ins),
                "vector_ops": 0,
                "dtype": out.dtype.name,
                "read_bytes": n_out * out.dtype.bytes + idx_bytes,
            },
            outs_t,
            ins,
            {0: n_out * out.dtype.bytes},
        )
    else:
        if imp.strict:
            raise CostModelError(f"no cost mapping for {n.target} (node {n.name!r})")
        imp.unknown[str(n.target)] += 1
        imp.add_op(n, "view", {"elements": n_out}, outs_t, ins, {i: 0 for i in range(len(ins))}, unknown=True)


def elementwise_params(ins: list[tuple[str, Tensor]], out: Tensor, ops: tuple[int, int]) -> dict[str, Any]:
    """``elementwise`` rule parameters for an op reading ``ins`` and writing ``out`` (broadcasting included:
    each input is read at its own size and dtype)."""
    return {
        "n": out.numel,
        "inputs": len(ins),
        "vector_ops": ops[0],
        "sfu_ops": ops[1],
        "dtype": ins[0][1].dtype.name if ins else out.dtype.name,
        "out_dtype": out.dtype.name,
        "read_bytes": sympy.Add(*(t.bytes for _, t in ins)),
    }


def _elementwise(
    imp: Any,
    n: Any,
    ins: list[tuple[str, Tensor]],
    outs: list[Tensor],
    ops: tuple[int, int],
) -> None:
    imp.add_op(n, "elementwise", elementwise_params(ins, outs[0], ops), outs, ins)


def _matmul(imp: Any, n: Any, name: str, ins: list[tuple[str, Tensor]], outs: list[Tensor]) -> None:
    out = outs[0]
    if name == "linear":
        x, w = ins[0][1], ins[1][1]
        k, nn = x.shape[-1], w.shape[0]
        params = {
            "M": _numel(x) / k,
            "N": nn,
            "K": k,
            "dtype": x.dtype.name,
            "w_dtype": w.dtype.name,
            "out_dtype": out.dtype.name,
            "bias": len(ins) > 2,
        }
        imp.add_op(n, "gemm", params, outs, ins)
        return
    if name in ("addmm", "baddbmm"):
        bias_ref, a, b = ins[0], ins[1][1], ins[2][1]
        ins = [ins[1], ins[2], bias_ref]
    else:
        a, b = ins[0][1], ins[1][1]
    k = a.shape[-1]
    nn = b.shape[-1]
    m = a.shape[-2] if len(a.shape) >= 2 else sympy.Integer(1)
    batch = sympy.simplify(_numel(out) / (m * nn))
    bias = name in ("addmm", "baddbmm")
    if len(b.shape) <= 2:  # [..., m, k] x [k, n]: one GEMM with the batch folded into M
        imp.add_op(
            n,
            "gemm",
            {
                "M": _numel(a) / k,
                "N": nn,
                "K": k,
                "dtype": a.dtype.name,
                "w_dtype": b.dtype.name,
                "out_dtype": out.dtype.name,
                "bias": bias,
            },
            outs,
            ins,
        )
    else:
        imp.add_op(
            n,
            "batched_gemm",
            {
                "batch": batch,
                "M": m,
                "N": nn,
                "K": k,
                "dtype": a.dtype.name,
                "w_dtype": b.dtype.name,
                "out_dtype": out.dtype.name,
            },
            outs,
            ins,
        )


def _sdpa(imp: Any, n: Any, ins: list[tuple[str, Tensor]], outs: list[Tensor]) -> None:
    q, k, v = ins[0][1], ins[1][1], ins[2][1]
    kwargs = dict(n.kwargs)
    is_causal = bool(kwargs.get("is_causal", n.args[5] if len(n.args) > 5 else False))
    has_mask = len(ins) > 3
    causal = is_causal or (has_mask and imp.masked_causal)
    b = sympy.Mul(*q.shape[:-3]) if len(q.shape) > 3 else sympy.Integer(1)
    params = {
        "batch": b,
        "heads": q.shape[-3],
        "kv_heads": k.shape[-3],
        "q_len": q.shape[-2],
        "kv_len": k.shape[-2],
        "head_dim": q.shape[-1],
        "v_head_dim": v.shape[-1],
        "dtype": q.dtype.name,
        "causal": causal,
    }
    edge = {i: 0 for i in range(3, len(ins))}  # the mask: a fused kernel applies it, we do not charge it
    imp.add_op(n, "attention", params, outs[:1], ins, edge)
