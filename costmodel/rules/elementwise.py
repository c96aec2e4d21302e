"""Elementwise and reduction rules.

Convention (DESIGN.md): an elementwise op with ``r`` inputs and one output
over ``n`` elements does ``ops*n`` FLOPs and moves ``(r+1)*b*n`` bytes per
pass. Vector work is charged to the ``vector`` unit at ``compute_dtype``
(fp32 by default: kernels upcast 16-bit storage before arithmetic);
transcendentals (exp, rsqrt, tanh ...) to the ``sfu`` unit.
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import InvalidDimensionError, RuleArgumentError
from ..expr import to_expr
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["elementwise", "reduction"]


@register_rule("elementwise")
def elementwise(
    *,
    n: object,
    inputs: object = 1,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    vector_ops: object = 1,
    sfu_ops: object = 0,
    passes: object = 1,
    compute_dtype: DTypeLike = "fp32",
    read_bytes: object | None = None,
) -> Cost:
    """``y = f(x_1, ..., x_r)`` over ``n`` elements, repeated ``passes`` times.

    .. math::

        F_\\text{vector} = \\text{vector\\_ops}\\cdot n\\cdot\\text{passes},\\quad
        F_\\text{sfu} = \\text{sfu\\_ops}\\cdot n\\cdot\\text{passes},\\quad
        D = (r\\,b + o)\\,n\\cdot\\text{passes}

    Each pass is its own kernel that reads its ``r`` inputs and writes one
    output (an unfused chain of ``passes`` ops). ``I = ops/((r+1)b)`` does not
    depend on ``n``: a bigger tensor never crosses the ridge.

    ``read_bytes`` replaces ``r b n`` per pass when inputs differ in size or
    dtype (broadcasting a bias, a mask of booleans): the bytes one pass reads.

    Source: profiling article section 3.3 (``F = n``, ``D = 3bn`` for a binary
    add) and its ``roofline_model.elementwise(n, n_pass, n_read)``.

    >>> from costmodel.symbols import dim
    >>> n = dim("n")
    >>> elementwise(n=n, inputs=2).bytes
    6*n
    """
    count = check_dim(n, "n")
    try:  # a count: a Python, numpy or sympy integer (``costmodel op`` passes sympy's), or a symbol
        r = check_dim(inputs, "inputs", allow_zero=True)
    except InvalidDimensionError:
        raise RuleArgumentError(
            f"elementwise: inputs must be a whole number >= 0 (or a symbolic count), got {inputs!r}"
        ) from None
    rep = check_dim(passes, "passes")
    vops = check_dim(vector_ops, "vector_ops", allow_zero=True)
    sops = check_dim(sfu_ops, "sfu_ops", allow_zero=True)
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    prec = roof_of(compute_dtype)
    if read_bytes is None:
        reads = r * b * count
    else:
        reads = to_expr(read_bytes, field="read_bytes")
        if reads.is_number and reads.is_negative:
            raise RuleArgumentError(f"elementwise: read_bytes must be >= 0, got {reads}")
    return (
        Cost.compute("vector", prec, vops * count * rep)
        + Cost.compute("sfu", prec, sops * count * rep)
        + Cost.traffic(read=reads * rep, write=o * count * rep)
        + Cost.launches(rep)
    )


@register_rule("reduction")
def reduction(
    *,
    rows: object,
    cols: object,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """Reduce ``x[rows, cols]`` along its last axis (sum, max, mean ...).

    .. math::

        F_\\text{vector} = \\text{rows}\\cdot\\text{cols},\\qquad
        D = b\\,\\text{rows}\\cdot\\text{cols} + o\\,\\text{rows}

    One combine per input element (``cols - 1`` adds and the final scale of a
    mean are counted as ``cols``).

    >>> from costmodel.symbols import dim
    >>> reduction(rows=dim("r"), cols=dim("c")).bytes
    2*c*r + 2*r
    """
    r, c = check_dim(rows, "rows"), check_dim(cols, "cols")
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    return (
        Cost.compute("vector", roof_of(compute_dtype), r * c)
        + Cost.traffic(read=b * r * c, write=o * r)
        + Cost.launches(1)
    )
