"""Matrix-multiply rules: ``gemm``, ``batched_gemm``, ``per_sample_matmul``.

Convention (DESIGN.md): a multiply-accumulate is 2 FLOPs. Each operand is
charged its own bytes per element, so mixed precision and weight-only
quantisation (int4/int8/NVFP4 weights with bf16 activations) are exact.
"""

from __future__ import annotations

import sympy

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["gemm", "batched_gemm", "per_sample_matmul", "operand_bytes"]


def operand_bytes(
    dtype: DTypeLike,
    w_dtype: DTypeLike | None,
    out_dtype: DTypeLike | None,
    compute_dtype: DTypeLike | None,
) -> tuple[sympy.Expr, sympy.Expr, sympy.Expr, str]:
    """Bytes per element of A, W and C, and the roof precision of a matmul.

    W and C default to the activation dtype; the compute precision to the
    activation dtype too (weight-only quantised weights are dequantised on
    chip).
    """
    return (
        dtype_bytes(dtype, "dtype"),
        dtype_bytes(w_dtype if w_dtype is not None else dtype, "w_dtype"),
        dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype"),
        roof_of(compute_dtype if compute_dtype is not None else dtype),
    )


@register_rule("gemm")
def gemm(
    *,
    M: object,
    N: object,
    K: object,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike | None = None,
    bias: bool = False,
    tile_m: object | None = None,
    tile_n: object | None = None,
) -> Cost:
    """``C[M,N] = A[M,K] @ W[K,N]`` (+ bias).

    .. math::

        F = 2MNK \\quad\\text{(tensor unit)}, \\qquad
        D = a\\,MK + w\\,KN + o\\,MN

    with ``a``, ``w``, ``o`` the bytes per element of A (``dtype``), W
    (``w_dtype``, default ``dtype``) and C (``out_dtype``, default
    ``dtype``). The tensor roof used is ``compute_dtype``'s, defaulting to the
    activation dtype: weight-only quantised weights are dequantised on chip
    and multiplied at the activations' precision (the dequantisation work is
    not counted). For W8A8 pass ``dtype="int8", w_dtype="int8"``.

    ``bias=True`` reads ``N`` bias values and adds ``MN`` vector FLOPs.

    Tiled traffic: with output tiles ``tile_m x tile_n`` and no reuse across
    tiles, A is re-read ``ceil(N/tile_n)`` times and W ``ceil(M/tile_m)``
    times (Hong & Kung 1981 blocked-matmul IO; exact when tiles divide).

    Source: seeds/prefill_decode_roofline.py (``2*M*N*K`` FLOP,
    ``b*(MK + KN + MN)`` bytes); DESIGN.md conventions.

    >>> from costmodel.symbols import M, N, K
    >>> gemm(M=M, N=N, K=K).flops
    2*K*M*N
    >>> gemm(M=M, N=N, K=K, w_dtype="int8").bytes
    2*K*M + K*N + 2*M*N
    """
    m, n, k = check_dim(M, "M"), check_dim(N, "N"), check_dim(K, "K")
    a_b, w_b, o_b, prec = operand_bytes(dtype, w_dtype, out_dtype, compute_dtype)
    a_reads = sympy.Integer(1)
    w_reads = sympy.Integer(1)
    if tile_n is not None:
        a_reads = sympy.ceiling(n / check_dim(tile_n, "tile_n"))
    if tile_m is not None:
        w_reads = sympy.ceiling(m / check_dim(tile_m, "tile_m"))
    cost = (
        Cost.compute("tensor", prec, 2 * m * n * k)  # one MAC per (m, n, k)
        + Cost.traffic(read=a_b * m * k * a_reads + w_b * k * n * w_reads, write=o_b * m * n)
        + Cost.launches(1)
    )
    if bias:
        cost += Cost.compute("vector", "fp32", m * n) + Cost.traffic(read=o_b * n)
    return cost


@register_rule("batched_gemm")
def batched_gemm(
    *,
    batch: object,
    M: object,
    N: object,
    K: object,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike | None = None,
    shared_rhs: bool = False,
) -> Cost:
    """``C[b] = A[b] @ W[b]`` for ``b`` in ``batch``, one kernel.

    .. math::

        F = 2\\,\\text{batch}\\,MNK, \\qquad
        D = \\text{batch}\\,(a\\,MK + o\\,MN) + w\\,KN\\cdot
            \\begin{cases}1 & \\text{shared\\_rhs}\\\\ \\text{batch} & \\text{else}\\end{cases}

    ``shared_rhs=True`` means every batch entry multiplies the same W, read
    once (a broadcast, as in ``x @ W`` with a leading batch dim).

    >>> from costmodel.symbols import B, M, N, K
    >>> batched_gemm(batch=B, M=M, N=N, K=K).flops
    2*B*K*M*N
    """
    nb = check_dim(batch, "batch")
    m, n, k = check_dim(M, "M"), check_dim(N, "N"), check_dim(K, "K")
    a_b, w_b, o_b, prec = operand_bytes(dtype, w_dtype, out_dtype, compute_dtype)
    w_copies = 1 if shared_rhs else nb
    return (
        Cost.compute("tensor", prec, 2 * nb * m * n * k)  # batch x (one MAC per (m, n, k))
        + Cost.traffic(read=nb * a_b * m * k + w_copies * w_b * k * n, write=nb * o_b * m * n)
        + Cost.launches(1)
    )


@register_rule("per_sample_matmul")
def per_sample_matmul(
    *,
    batch: object,
    N: object,
    K: object,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
) -> Cost:
    """``y[b] = x[b] @ W[b]``: every sample brings its own matrix.

    A batched GEMM with ``M = 1`` and no shared operand:

    .. math::

        F = 2\\,\\text{batch}\\,NK, \\qquad
        D = \\text{batch}\\,(a K + w KN + o N), \\qquad
        I \\to 2/w \\;(N, K \\to \\infty)

    so the intensity is about 1 FLOP/byte in bf16 *whatever the batch*: batching
    does not amortise anything (per-request LoRA adapters, per-token expert
    weights at top-1 with one token per expert, decode attention per sequence).

    >>> from costmodel.symbols import B, N, K
    >>> import sympy
    >>> sympy.limit(sympy.limit(per_sample_matmul(batch=B, N=N, K=K).intensity, N, sympy.oo), K, sympy.oo)
    1
    """
    # x[b,1,K] @ W[b,K,N] -> y[b,1,N]
    return batched_gemm(batch=batch, M=1, N=N, K=K, dtype=dtype, w_dtype=w_dtype, out_dtype=out_dtype)
