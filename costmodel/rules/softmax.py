"""Softmax over the last axis, in its three IO variants.

=========  =====  ======  =======  ======================================
variant    reads  writes  kernels  per-element work (vector + exp on SFU)
=========  =====  ======  =======  ======================================
naive      3      2       3        4 + 1: max, subtract, exp, sum, divide
online     2      1       2        7 + 3: Milakov & Gimelshein 2018, Alg. 3
fused      1      1       1        4 + 1: row held on chip
=========  =====  ======  =======  ======================================

The op counts are parameters. The default 4 vector + 1 exp = 5 per element is
the profiling article's text figure (``~5nd``; its script uses 6): max
compare, subtract, exp, accumulate, divide. The online normaliser's literal
algorithm rescales the running sum at every element
(``d_j = d_{j-1} e^{m_{j-1}-m_j} + e^{x_j-m_j}``) and recomputes the exp in
its second pass: 7 vector ops and 3 exps per element; blocked
implementations rescale per block, so pass smaller counts for them.
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["softmax", "SOFTMAX_VARIANTS"]

#: variant -> (reads, writes, kernels, default vector ops, default sfu ops)
SOFTMAX_VARIANTS: dict[str, tuple[int, int, int, int, int]] = {
    "naive": (3, 2, 3, 4, 1),
    "online": (2, 1, 2, 7, 3),
    "fused": (1, 1, 1, 4, 1),
}


@register_rule("softmax")
def softmax(
    *,
    rows: object,
    cols: object,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    variant: str = "fused",
    vector_ops: object | None = None,
    sfu_ops: object | None = None,
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """Row softmax of ``x[rows, cols]``; IO and op counts per the module table.

    .. math::

        F = (v + s)\\,nc,\\qquad D = (r_\\text{passes}\\,b + w_\\text{passes}\\,o)\\,nc

    (``v`` vector ops and ``s`` exps per element; ``r``/``w`` read and write
    passes of the variant; the article's naive case is ``D = 5bnd``).

    >>> from costmodel.symbols import dim
    >>> n, d = dim("n"), dim("d")
    >>> softmax(rows=n, cols=d, variant="naive").bytes
    10*d*n
    """
    if variant not in SOFTMAX_VARIANTS:
        raise RuleArgumentError(
            f"softmax: variant {variant!r} not allowed; allowed: {', '.join(SOFTMAX_VARIANTS)}"
        )
    reads, writes, kernels, v_default, s_default = SOFTMAX_VARIANTS[variant]
    n, c = check_dim(rows, "rows"), check_dim(cols, "cols")
    v = check_dim(v_default if vector_ops is None else vector_ops, "vector_ops", allow_zero=True)
    s = check_dim(s_default if sfu_ops is None else sfu_ops, "sfu_ops", allow_zero=True)
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    prec = roof_of(compute_dtype)
    return (
        Cost.compute("vector", prec, v * n * c)
        + Cost.compute("sfu", prec, s * n * c)
        + Cost.traffic(read=reads * b * n * c, write=(writes - 1) * b * n * c + o * n * c)
        + Cost.launches(kernels)
    )
