"""The op mappers: each compiler op, under its ATen and ONNX names, onto a cost rule.

One function per op family, registered once for every frontend (see
:mod:`graphs.importers.table`). Conventions (the same for every frontend):

* matmuls (``mm``/``matmul``/``bmm``/``linear``/``addmm``, ONNX
  ``MatMul``/``Gemm``) -> ``gemm`` with the batch folded into ``M`` when the
  right operand is 2-D, else ``batched_gemm``; each operand at its own dtype;
* convolutions (``conv1d``/``conv2d``/``conv3d``, their transposes, ``convolution``, the
  ``ConvNd`` modules of a plain fx trace, ONNX ``Conv``/``ConvTranspose``) -> ``conv``, the
  groups read from the weight's shape; max, average and adaptive pools -> ``pool``;
* SDPA and ONNX ``Attention`` -> ``attention``; ``is_causal`` counts the
  causal pairs, an explicit mask counts the full score matrix (the kernel
  computes it) unless the importer is told masks are causal; the mask's edge
  moves nothing (a fused kernel applies it);
* elementwise arithmetic and activations -> ``elementwise`` with the vector
  and SFU op counts of :data:`ELEMENTWISE_OPS`, each input read at its own
  (broadcast) size and dtype;
* softmax, norms, reductions -> their rules; an ``embedding`` (or ONNX
  ``Gather`` of a weight) reads the rows it returns; other gathers read the
  elements they return and their indices;
* views, contiguous reshapes and same-dtype casts are free; copies, casts to
  another dtype and non-contiguous reshapes are ``copy``; in-place updates
  charge the updated values only; factories and shape arithmetic only write.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

from .table import Mapped, OpView, register_import

__all__ = ["ELEMENTWISE_OPS", "POW_OPS", "elementwise_params"]

#: elementwise ops: ATen name -> ((vector ops, SFU ops) per output element, ONNX name or None).
#: Transcendentals are one SFU op; composites count their steps.
_ELEMENTWISE: dict[str, tuple[tuple[int, int], str | None]] = {
    "add": ((1, 0), "Add"),
    "sub": ((1, 0), "Sub"),
    "mul": ((1, 0), "Mul"),
    "div": ((1, 0), "Div"),
    "neg": ((1, 0), "Neg"),
    "relu": ((1, 0), "Relu"),
    "abs": ((1, 0), "Abs"),
    "maximum": ((1, 0), "Max"),
    "minimum": ((1, 0), "Min"),
    "where": ((1, 0), "Where"),
    "clamp": ((1, 0), "Clip"),
    "eq": ((1, 0), "Equal"),
    "ne": ((1, 0), None),
    "le": ((1, 0), "LessOrEqual"),
    "lt": ((1, 0), "Less"),
    "ge": ((1, 0), "GreaterOrEqual"),
    "gt": ((1, 0), "Greater"),
    "logical_not": ((1, 0), "Not"),
    "logical_and": ((1, 0), "And"),
    "logical_or": ((1, 0), "Or"),
    "bitwise_and": ((1, 0), "BitwiseAnd"),
    "bitwise_or": ((1, 0), "BitwiseOr"),
    "bitwise_not": ((1, 0), "BitwiseNot"),
    "__and__": ((1, 0), None),
    "__or__": ((1, 0), None),
    "reciprocal": ((1, 0), "Reciprocal"),
    "square": ((1, 0), None),
    "cumsum": ((1, 0), "CumSum"),
    "masked_fill": ((1, 0), None),
    "fill": ((1, 0), None),
    "isnan": ((1, 0), "IsNaN"),
    "rsub": ((1, 0), None),
    "floor_divide": ((1, 0), None),
    "remainder": ((1, 0), "Mod"),
    "sign": ((1, 0), "Sign"),
    "clamp_min": ((1, 0), None),
    "clamp_max": ((1, 0), None),
    "diff": ((1, 0), None),
    "exp": ((0, 1), "Exp"),
    "log": ((0, 1), "Log"),
    "rsqrt": ((0, 1), None),
    "sqrt": ((0, 1), "Sqrt"),
    "sin": ((0, 1), "Sin"),
    "cos": ((0, 1), "Cos"),
    "tanh": ((0, 1), "Tanh"),
    "erf": ((0, 1), "Erf"),
    "exp2": ((0, 1), None),
    "expm1": ((0, 1), None),
    "log1p": ((0, 1), None),
    "erfc": ((0, 1), None),
    "log2": ((0, 1), None),
    "sigmoid": ((3, 1), "Sigmoid"),  # 1 / (1 + exp(-x)): negate, add, reciprocal + exp
    "silu": ((3, 1), None),  # x / (1 + exp(-x))
    "gelu": ((7, 1), "Gelu"),  # tanh approximation, as the graph builders count it
}
#: (vector ops, SFU ops) per element, by ATen name
ELEMENTWISE_OPS: dict[str, tuple[int, int]] = {k: ops for k, (ops, _) in _ELEMENTWISE.items()}
#: ``x ** e`` for the exponents kernels special-case; any other is exp(e*log x): 2 SFU ops
POW_OPS: dict[float, tuple[int, int]] = {2.0: (1, 0), 0.5: (0, 1), -1.0: (1, 0), 1.0: (0, 0)}
_POW_GENERAL = (0, 2)


def numel(t: Tensor) -> sympy.Expr:
    return t.numel


def _free(v: OpView) -> dict[int, int]:
    return {i: 0 for i in range(len(v.ins))}


def elementwise_params(ins: list[tuple[str, Tensor]], out: Tensor, ops: tuple[int, int]) -> dict[str, Any]:
    """``elementwise`` rule parameters for an op reading ``ins`` and writing ``out`` (broadcasting
    included: each input is read at its own size and dtype)."""
    return {
        "n": out.numel,
        "inputs": len(ins),
        "vector_ops": ops[0],
        "sfu_ops": ops[1],
        "dtype": ins[0][1].dtype.name if ins else out.dtype.name,
        "out_dtype": out.dtype.name,
        "read_bytes": sympy.Add(*(t.bytes for _, t in ins)),
    }


def elementwise_mapped(ops: tuple[int, int], v: OpView) -> Mapped:
    return Mapped("elementwise", elementwise_params(v.ins, v.out, ops), v.ins, role=Role.ACTIVATION)


#: jaxpr primitive -> the ATen name whose per-element counts it shares (XLA counts one flop per
#: element for each of these, and one transcendental for exp, log, tanh, rsqrt, sqrt, sin, cos)
_JAX_ELEMENTWISE: dict[str, str] = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "div": "div",
    "neg": "neg",
    "max": "maximum",
    "min": "minimum",
    "abs": "abs",
    "sign": "sign",
    "select_n": "where",
    "eq": "eq",
    "ne": "ne",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "and": "logical_and",
    "or": "logical_or",
    "not": "logical_not",
    "exp": "exp",
    "log": "log",
    "tanh": "tanh",
    "rsqrt": "rsqrt",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "erf": "erf",
    "erfc": "erfc",  # jax.nn.gelu(approximate=False)
    "expm1": "expm1",
    "log1p": "log1p",
}
_JAX_BY_ATEN = {a: j for j, a in _JAX_ELEMENTWISE.items()}

for _aten, (_ops, _onnx) in _ELEMENTWISE.items():
    register_import(aten=_aten, onnx=_onnx or (), jax=_JAX_BY_ATEN.get(_aten, ()))(
        partial(elementwise_mapped, _ops)
    )


@register_import(aten="pow", onnx="Pow", jax="pow")
def pow_(v: OpView) -> Mapped:
    e = v.scalar(1, "exponent")
    ops = POW_OPS.get(float(e), _POW_GENERAL) if isinstance(e, (int, float)) else _POW_GENERAL
    return elementwise_mapped(ops, v)


# ------------------------------------------------------------------ matmuls
def _matmul(
    v: OpView, refs: list[tuple[str, Tensor]], *, trans_b: bool, bias: bool, trans_a: bool = False
) -> Mapped:
    """``[..., M, K] x [K, N]`` (``[N, K]`` when ``trans_b``) -> ``gemm``; a batched right operand
    -> ``batched_gemm`` over the output's leading dims. A 1-D operand is a vector, as numpy's and
    torch's ``matmul`` read it: a 1-D right operand has ``N = 1``, a 1-D left one ``M = 1``.
    ``trans_a`` (ONNX ``Gemm``'s ``transA``): the left operand is ``[K, M]``."""
    a, b = refs[0][1], refs[1][1]
    k = a.shape[-2] if trans_a and len(a.shape) == 2 else a.shape[-1]
    if len(b.shape) == 1:  # matrix x vector: [..., M, K] x [K] -> [..., M]
        n: sympy.Expr = sympy.Integer(1)
    else:
        n = b.shape[-2] if trans_b else b.shape[-1]
    dtypes = {"dtype": a.dtype.name, "w_dtype": b.dtype.name, "out_dtype": v.out.dtype.name}
    if len(b.shape) <= 2:  # one GEMM with the batch folded into M
        return Mapped(
            "gemm", {"M": numel(a) / k, "N": n, "K": k, **dtypes, "bias": bias}, refs, role=Role.LINEAR
        )
    m = a.shape[-2] if len(a.shape) >= 2 else sympy.Integer(1)
    batch = sympy.simplify(numel(v.out) / (m * n))
    return Mapped("batched_gemm", {"batch": batch, "M": m, "N": n, "K": k, **dtypes}, refs)


@register_import(aten=("mm", "matmul", "bmm"), onnx="MatMul")
def matmul(v: OpView) -> Mapped:
    return _matmul(v, v.ins, trans_b=False, bias=False)


@register_import(aten="linear")
def linear(v: OpView) -> Mapped:  # y = x W^T (+ b), W is [N, K]
    return _matmul(v, v.ins, trans_b=True, bias=len(v.ins) > 2)


@register_import(aten=("addmm", "baddbmm"))
def addmm(v: OpView) -> Mapped:  # bias + a @ b: the bias comes first in ATen
    bias, a, b = v.ins[0], v.ins[1], v.ins[2]
    return _matmul(v, [a, b, bias], trans_b=False, bias=True)


@register_import(onnx="Gemm")
def gemm(v: OpView) -> Mapped:  # alpha * A' @ B' + beta * C
    return _matmul(
        v,
        v.ins,
        trans_b=v.scalar(None, "transB", 0) == 1,
        bias=len(v.ins) > 2,
        trans_a=v.scalar(None, "transA", 0) == 1,
    )


# ---------------------------------------------------------------- convolution
def _conv(v: OpView, transposed: bool) -> Mapped:
    """``x [N, C_in, *in]`` (or unbatched ``[C_in, *in]``), ``W [C_out, C_in/g, *k]`` (transposed:
    ``[C_in, C_out/g, *k]``), optional bias -> ``conv``; the groups follow from the weight."""
    x, w, out = v.ins[0][1], v.ins[1][1], v.out
    spatial = len(w.shape) - 2
    if spatial < 1 or len(x.shape) not in (spatial + 1, spatial + 2) or len(out.shape) != len(x.shape):
        raise CostModelError(
            f"convolution: input {list(x.shape)}, weight {list(w.shape)} and output {list(out.shape)} "
            "are not [N, C, *spatial], [C_out, C_in/groups, *kernel] and [N, C_out, *spatial]"
        )
    ch = len(x.shape) - spatial - 1  # 0: unbatched
    cin, cout = x.shape[ch], out.shape[ch]
    groups = sympy.simplify((cout if transposed else cin) / w.shape[1])
    params = {
        "batch": sympy.Mul(*x.shape[:ch]),
        "in_channels": cin,
        "out_channels": cout,
        "in_size": sympy.Mul(*x.shape[ch + 1 :]),
        "out_size": sympy.Mul(*out.shape[ch + 1 :]),
        "kernel_size": sympy.Mul(*w.shape[2:]),
        "groups": groups,
        "transposed": transposed,
        "dtype": x.dtype.name,
        "w_dtype": w.dtype.name,
        "out_dtype": out.dtype.name,
        "bias": len(v.ins) > 2,
    }
    return Mapped("conv", params, v.ins, role=Role.LINEAR)


@register_import(aten=("conv1d", "conv2d", "conv3d"), onnx="Conv")
def convolution(v: OpView) -> Mapped:
    return _conv(v, transposed=False)


@register_import(aten=("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"), onnx="ConvTranspose")
def conv_transpose(v: OpView) -> Mapped:
    return _conv(v, transposed=True)


@register_import(aten="convolution")
def aten_convolution(v: OpView) -> Mapped:
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _conv(v, transposed=bool(v.scalar(6, "transposed", False)))


def _pool(v: OpView, window: Any) -> Mapped:
    """``pool`` of ``v``'s input; ``window``: the inputs each output combines (on average)."""
    x, out = v.ins[0][1], v.outs[0]
    params = {
        "outputs": numel(out),
        "combines": sympy.simplify(numel(out) * window),
        "inputs": numel(x),
        "dtype": x.dtype.name,
        "out_dtype": out.dtype.name,
        "index_dtype": v.outs[1].dtype.name if len(v.outs) > 1 else None,
    }
    return Mapped("pool", params, v.ins[:1])


def _kernel(v: OpView, index: int | None, name: str, spatial: int) -> Any:
    """The window's size from a pool's ``kernel_size`` / ``kernel_shape`` (one int: every spatial
    dimension); an op that does not state it as constants is refused, naming it."""
    k = v.scalar(index, name)
    if isinstance(k, int) and not isinstance(k, bool):
        k = (k,) * spatial
    if not isinstance(k, tuple) or not k or any(d < 1 for d in k):
        raise CostModelError(f"pooling: {name} must be whole numbers >= 1, got {k!r}")
    return sympy.Mul(*k)


def window_pool(spatial: int | None, v: OpView) -> Mapped:
    """A pool of a stated kernel: each output combines ``prod(kernel)`` inputs. ``spatial``: the
    dimensions the window spans, from the op's name (``max_pool2d``: 2; one int ``kernel_size``
    covers each), so an unbatched ``[C, H, W]`` input pools as a batched one; None (ONNX, whose
    ``kernel_shape`` lists every dimension): the output's rank less batch and channels."""
    if spatial is None:
        spatial = len(v.out.shape) - 2
    return _pool(v, _kernel(v, 1, "kernel_size", spatial) if v.scalar(None, "kernel_shape") is None
                 else _kernel(v, None, "kernel_shape", spatial))  # fmt: skip


register_import(aten=("max_pool1d", "avg_pool1d"))(partial(window_pool, 1))
register_import(aten=("max_pool2d", "max_pool2d_with_indices", "avg_pool2d"))(partial(window_pool, 2))
register_import(aten=("max_pool3d", "max_pool3d_with_indices", "avg_pool3d"))(partial(window_pool, 3))
register_import(onnx=("MaxPool", "AveragePool"))(partial(window_pool, None))


def _adaptive_window(x: Tensor, out: Tensor) -> Any:
    """Inputs per output of an adaptive (or global) pool over the trailing dims ``out`` resizes:
    output ``i`` of ``n`` over ``m`` inputs spans ``floor(i*m/n)`` to ``ceil((i+1)*m/n)``, summed
    exactly when the sizes are numbers; ``m/n`` per dimension otherwise (exact when ``n`` divides ``m``)."""
    total: Any = sympy.Integer(1)
    for m, n in zip(x.shape[::-1], out.shape[::-1], strict=False):
        if m == n:
            continue
        if m.is_Integer and n.is_Integer:
            mi, ni = int(m), int(n)
            spans = sum(-(-(i + 1) * mi // ni) - (i * mi // ni) for i in range(ni))
            total *= sympy.Rational(spans, ni)
        else:
            total *= m / n
    return total


@register_import(
    aten=("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
          "_adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d"),
    onnx=("GlobalAveragePool", "GlobalMaxPool"),
)  # fmt: skip
def adaptive_pool(v: OpView) -> Mapped:
    """A pool to a stated output size: the windows cover the input (:func:`_adaptive_window`)."""
    return _pool(v, _adaptive_window(v.ins[0][1], v.out))


# ---------------------------------------------------------------- attention
@register_import(
    aten=(
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    ),
)
def attention(v: OpView) -> Mapped:
    q, k, val = v.ins[0][1], v.ins[1][1], v.ins[2][1]
    has_mask = len(v.ins) > 3
    causal = bool(v.scalar(5, "is_causal", False)) or (has_mask and v.masked_causal)
    params = {
        "batch": sympy.Mul(*q.shape[:-3]) if len(q.shape) > 3 else sympy.Integer(1),
        "heads": q.shape[-3],
        "kv_heads": k.shape[-3],
        "q_len": q.shape[-2],
        "kv_len": k.shape[-2],
        "head_dim": q.shape[-1],
        "v_head_dim": val.shape[-1],
        "dtype": q.dtype.name,
        "causal": causal,
    }
    return Mapped("attention", params, v.ins, {i: 0 for i in range(3, len(v.ins))}, role=Role.ATTENTION)


def _heads(v: OpView, attr: str) -> int:
    n = v.scalar(None, attr)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise CostModelError(
            f"ONNX Attention with 3-D inputs [batch, seq, heads * head_dim] needs a positive {attr} "
            f"attribute, got {n!r}"
        )
    return n


@register_import(onnx="Attention")
def onnx_attention(v: OpView) -> Mapped:
    """ONNX ``Attention`` (opset 23): inputs by position, Q, K, V, ``attn_mask``, ``past_key``,
    ``past_value``. The past keys and values are the KV cache: ``kv_len`` is past + new and their
    edges carry their bytes; the mask's edge moves nothing (as SDPA's). Q, K, V are
    ``[B, heads, S, head_dim]``, or ``[B, S, heads * head_dim]`` with ``q_num_heads`` and
    ``kv_num_heads`` attributes; the past is always 4-D."""
    at = v.by_slot()
    q, k, val = (v.ins[at[s]][1] for s in (0, 1, 2))
    past = v.ins[at[4]][1].shape[-2] if 4 in at else sympy.Integer(0)
    has_mask = 3 in at
    causal = bool(v.scalar(None, "is_causal", 0)) or (has_mask and v.masked_causal)
    if len(q.shape) == 3:  # [B, S, heads * head_dim]
        hq, hkv = _heads(v, "q_num_heads"), _heads(v, "kv_num_heads")
        shape = {
            "batch": q.shape[0],
            "heads": sympy.Integer(hq),
            "kv_heads": sympy.Integer(hkv),
            "q_len": q.shape[1],
            "kv_len": past + k.shape[1],
            "head_dim": q.shape[2] / hq,
            "v_head_dim": val.shape[2] / hkv,
        }
    else:
        shape = {
            "batch": sympy.Mul(*q.shape[:-3]) if len(q.shape) > 3 else sympy.Integer(1),
            "heads": q.shape[-3],
            "kv_heads": k.shape[-3],
            "q_len": q.shape[-2],
            "kv_len": past + k.shape[-2],
            "head_dim": q.shape[-1],
            "v_head_dim": val.shape[-1],
        }
    params = {**shape, "dtype": q.dtype.name, "causal": causal}
    free = {at[3]: 0} if has_mask else {}
    return Mapped("attention", params, v.ins, free, role=Role.ATTENTION)


# ------------------------------------------------------- rows: softmax, norms, reductions
@register_import(aten=("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"), onnx="Softmax")
def softmax(v: OpView) -> Mapped:
    x = v.ins[0][1]
    cols = x.shape[-1]
    params = {"rows": numel(x) / cols, "cols": cols, "dtype": x.dtype.name, "out_dtype": v.out.dtype.name}
    return Mapped("softmax", params, v.ins[:1])


def _norm(rule: str, v: OpView) -> Mapped:
    x = v.ins[0][1]
    cols = x.shape[-1]
    params: dict[str, Any] = {"rows": numel(x) / cols, "cols": cols, "dtype": x.dtype.name}
    if rule == "layernorm":
        params["bias"] = len(v.ins) >= 3
    return Mapped(rule, params, v.ins, role=Role.NORM)


register_import(aten=("native_layer_norm", "layer_norm"), onnx="LayerNormalization")(
    partial(_norm, "layernorm")
)
register_import(
    aten=("rms_norm", "_fused_rms_norm"), onnx=("RMSNormalization", "SimplifiedLayerNormalization")
)(partial(_norm, "rmsnorm"))


@register_import(
    aten=(
        "mean sum amax amin max min any all prod argmax argmin var std var_mean std_mean logsumexp norm"
        " linalg_vector_norm"
    ).split(),
    onnx=("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"),
    jax=("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"),
)
def reduction(v: OpView) -> Mapped:
    x, n_out = v.ins[0][1], numel(v.out)
    params = {
        "rows": n_out,
        "cols": sympy.simplify(numel(x) / n_out),
        "dtype": x.dtype.name,
        "out_dtype": v.out.dtype.name,
    }
    return Mapped("reduction", params, v.ins[:1])


# ------------------------------------------------------------------ gathers
@register_import(aten="embedding")
def embedding(v: OpView) -> Mapped:
    """Reads the ``tokens`` rows it returns (not the table): ``tokens * hidden * bytes``."""
    w, idx = v.ins[0][1], v.ins[1][1]
    tokens, hidden = numel(idx), w.shape[-1]
    params = {"tokens": tokens, "hidden": hidden, "dtype": w.dtype.name, "index_dtype": idx.dtype.name}
    return Mapped("embedding", params, v.ins[:2], {0: tokens * hidden * w.dtype.bytes}, role=Role.EMBEDDING)


@register_import(
    aten=("index", "gather", "index_select", "take_along_dim"), onnx=("GatherND", "GatherElements")
)
def gather(v: OpView) -> Mapped:
    """Reads the elements it returns and its indices, then writes them."""
    n_out, out = numel(v.out), v.out
    idx_bytes = sympy.Add(*(t.bytes for _, t in v.ins[1:]))
    params = {
        "n": n_out,
        "inputs": len(v.ins),
        "vector_ops": 0,
        "dtype": out.dtype.name,
        "read_bytes": n_out * out.dtype.bytes + idx_bytes,
    }
    return Mapped("elementwise", params, v.ins, {0: n_out * out.dtype.bytes})


@register_import(onnx="Gather")
def gather_or_embedding(v: OpView) -> Mapped:  # ONNX has one Gather: a weight table is an embedding
    return embedding(v) if 0 in v.weights and len(v.ins) > 1 else gather(v)


# ------------------------------------------------------- layout, copies, casts, factories
@register_import(
    aten=(
        "view _unsafe_view unsqueeze squeeze permute transpose t expand slice select alias detach "
        "as_strided unflatten flatten narrow split chunk split_with_sizes unbind dropout "
        "lift_fresh_copy movedim expand_as view_as unsqueeze_copy _assert_tensor_metadata type_as "
        "__getitem__ size dim contiguous_view"
    ).split(),
    onnx=("Transpose", "Unsqueeze", "Squeeze", "Slice", "Expand", "Identity", "Flatten", "Split", "Dropout"),
    # XLA fuses these into their consumers (layout changes, broadcasts): no flops, no bytes of their own
    jax=(
        "broadcast_in_dim",
        "reshape",
        "squeeze",
        "expand_dims",
        "transpose",
        "stop_gradient",
        "copy",
        "slice",
    ),
)
def view(v: OpView) -> Mapped:
    """Metadata only: no bytes move."""
    return Mapped("view", {"elements": numel(v.out)}, v.ins, _free(v), role=Role.VIEW)


def _copy(v: OpView, elements: sympy.Expr, src_dtype: str) -> Mapped:
    params = {"elements": elements, "dtype": src_dtype, "out_dtype": v.out.dtype.name}
    return Mapped("copy", params, v.ins, role=Role.VIEW)


@register_import(
    aten=("clone", "cat", "stack", "repeat", "pad", "constant_pad_nd", "flip", "roll", "tril", "triu"),
    onnx="Concat",
    jax=("concatenate", "pad", "rev"),
)
def copy(v: OpView) -> Mapped:
    return _copy(v, numel(v.out), v.ins[0][1].dtype.name if v.ins else v.out.dtype.name)


@register_import(aten=("reshape", "contiguous"), onnx="Reshape")
def reshape(v: OpView) -> Mapped:
    """A view of a contiguous tensor, a copy of a non-contiguous one."""
    return view(v) if v.contiguous or not v.ins else copy(v)


@register_import(
    aten=("to", "_to_copy", "type", "to_copy", "convert_element_type"),
    onnx="Cast",
    jax="convert_element_type",
)
def cast(v: OpView) -> Mapped:
    """A copy when the dtype changes, else free."""
    if v.ins and v.ins[0][1].dtype != v.out.dtype:
        return _copy(v, numel(v.out), v.ins[0][1].dtype.name)
    return view(v)


@register_import(
    aten=(
        "__setitem__ index_put index_put_ copy_ slice_scatter select_scatter index_copy "
        "index_copy_ scatter scatter_"
    ).split()
)
def inplace_update(v: OpView) -> Mapped:
    """Charges the updated values (the last tensor argument), not the destination."""
    values = v.ins[-1][1] if len(v.ins) > 1 else v.out
    params = {"elements": numel(values), "dtype": values.dtype.name, "out_dtype": v.out.dtype.name}
    return Mapped("copy", params, v.ins, {i: 0 for i in range(len(v.ins) - 1)}, role=Role.VIEW)


@register_import(
    aten=(
        "arange full ones zeros empty scalar_tensor new_ones new_zeros full_like zeros_like "
        "ones_like empty_like new_full new_empty rand randn"
    ).split(),
    onnx=("Shape", "Range", "ConstantOfShape", "Constant", "Size"),
)
def factory(v: OpView) -> Mapped:
    """Writes its result and reads nothing (shapes are metadata)."""
    params = {"n": numel(v.out), "inputs": 0, "vector_ops": 0, "dtype": v.out.dtype.name}
    return Mapped("elementwise", params, v.ins, _free(v))
