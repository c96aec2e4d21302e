"""Normalisation rules: ``layernorm`` and ``rmsnorm``, fused or multi-pass.

Fused kernels read ``x`` once, read the weight (and bias) vectors, and write
``y`` once. Multi-pass implementations (numpy, eager PyTorch) run one kernel
per line and move every intermediate through DRAM; their pass counts follow
the profiling article's ``layernorm_buffered`` line by line.
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["layernorm", "rmsnorm"]

_VARIANTS = ("fused", "multi_pass")


def _check_variant(rule: str, variant: str) -> None:
    if variant not in _VARIANTS:
        raise RuleArgumentError(f"{rule}: variant {variant!r} not allowed; allowed: {', '.join(_VARIANTS)}")


@register_rule("layernorm")
def layernorm(
    *,
    rows: object,
    cols: object,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    weight_dtype: DTypeLike | None = None,
    bias: bool = True,
    variant: str = "fused",
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """LayerNorm over the last axis of ``x[rows, cols]``.

    Per element: sum for the mean, subtract, square, sum for the variance,
    scale by ``1/sigma``, multiply by ``gamma`` (6 vector FLOPs), plus 1 for
    ``beta`` when ``bias``. Per row: 3 vector FLOPs (two ``1/n`` scales and
    ``+eps``) and one ``rsqrt`` on the SFU.

    .. math::

        F = (6 + [\\beta])\\,nc + 3n \\;(\\text{vector}) + n \\;(\\text{sfu})

    Fused: :math:`D = b\\,nc + w\\,c\\,(1 + [\\beta]) + o\\,nc`.

    Multi-pass, one kernel per line (profiling article ``layernorm_buffered``)::

        mu  = mean(x)          # read x                      1 pass
        xc  = x - mu           # read x, write xc            2
        xc2 = xc * xc          # read xc, write xc2          2
        var = mean(xc2)        # read xc2                    1
        sd  = sqrt(var + eps)  # O(rows)
        xc  = xc / sd          # read xc, write xc           2
        y   = xc * gamma       # read xc, write y            2
        y   = y + beta         # read y, write y (if bias)   2

    i.e. ``10`` passes of ``n*c`` elements without bias (the article's count).

    >>> from costmodel.symbols import dim
    >>> n, c = dim("n"), dim("c")
    >>> layernorm(rows=n, cols=c, bias=False).flops
    6*c*n + 4*n
    """
    _check_variant("layernorm", variant)
    n, c = check_dim(rows, "rows"), check_dim(cols, "cols")
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    w = dtype_bytes(weight_dtype if weight_dtype is not None else dtype, "weight_dtype")
    prec = roof_of(compute_dtype)
    nb = 1 if bias else 0
    flops = Cost.compute("vector", prec, (6 + nb) * n * c + 3 * n) + Cost.compute("sfu", prec, n)
    params = w * c * (1 + nb)
    if variant == "fused":
        return flops + Cost.traffic(read=b * n * c + params, write=o * n * c) + Cost.launches(1)
    # multi-pass: intermediates stored in the input dtype; per-row stats in b too
    reads = (6 + 1 * nb) * b * n * c + 3 * b * n + params  # x, x, xc, xc2, xc, xc (+ y); mu, sd, var
    writes = (4 + nb) * b * n * c + 3 * b * n  # xc, xc2, xc, y (+ y); mu, var, sd
    return flops + Cost.traffic(read=reads, write=writes) + Cost.launches(7 + nb)


@register_rule("rmsnorm")
def rmsnorm(
    *,
    rows: object,
    cols: object,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    weight_dtype: DTypeLike | None = None,
    variant: str = "fused",
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """RMSNorm ``y = x / sqrt(mean(x^2) + eps) * gamma`` (Zhang & Sennrich 2019).

    Per element: square, sum, scale, multiply by ``gamma`` (4 vector FLOPs);
    per row: ``1/n`` and ``+eps`` (2 vector) and one ``rsqrt`` (SFU).

    .. math::

        F = 4nc + 2n \\;(\\text{vector}) + n \\;(\\text{sfu}),\\qquad
        D_\\text{fused} = b\\,nc + w\\,c + o\\,nc

    Multi-pass (eager Hugging Face ``LlamaRMSNorm``, one kernel per line)::

        x2  = x * x            # read x, write x2            2 passes
        var = mean(x2)         # read x2                     1
        r   = rsqrt(var + eps) # O(rows)
        y   = x * r            # read x, write y             2
        y   = gamma * y        # read y, write y             2

    >>> from costmodel.symbols import dim
    >>> n, c = dim("n"), dim("c")
    >>> rmsnorm(rows=n, cols=c, dtype="bf16").bytes
    4*c*n + 2*c
    """
    _check_variant("rmsnorm", variant)
    n, c = check_dim(rows, "rows"), check_dim(cols, "cols")
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    w = dtype_bytes(weight_dtype if weight_dtype is not None else dtype, "weight_dtype")
    prec = roof_of(compute_dtype)
    flops = Cost.compute("vector", prec, 4 * n * c + 2 * n) + Cost.compute("sfu", prec, n)
    if variant == "fused":
        return flops + Cost.traffic(read=b * n * c + w * c, write=o * n * c) + Cost.launches(1)
    reads = 4 * b * n * c + 2 * b * n + w * c  # x, x2, x, y; var, r
    writes = 3 * b * n * c + 2 * b * n  # x2, y, y; var, r
    return flops + Cost.traffic(read=reads, write=writes) + Cost.launches(5)
