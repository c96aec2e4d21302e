"""Mixture-of-Experts expert GEMMs as one grouped GEMM.

``T`` tokens each routed to ``k`` of ``E`` experts; every expert applies its
own ``[K, N]`` matrix to the tokens it received.
"""

from __future__ import annotations

import sympy

from ..cost import Cost
from ..dtypes import DTypeLike
from ..errors import RuleArgumentError
from ..expr import to_expr
from ..symbols import check_dim
from .linear import operand_bytes
from .registry import register_rule

__all__ = ["grouped_gemm", "experts_touched"]


def experts_touched(tokens: sympy.Expr, experts: sympy.Expr, top_k: sympy.Expr) -> sympy.Expr:
    """Expected number of distinct experts hit by ``tokens`` tokens.

    With uniform, independent routing each token misses a given expert with
    probability ``1 - k/E``, so

    .. math::

        E_\\text{touched} = E\\left(1 - \\left(1 - \\frac{k}{E}\\right)^{T}\\right)

    ``k`` at ``T = 1`` and ``E`` as ``T`` grows: decode at small batch reads a
    few experts' weights, prefill reads them all. Real routers are skewed;
    this is the uniform baseline.

    >>> experts_touched(1, 8, 2)
    2
    """
    t, e, k = (check_dim(x, name) for x, name in ((tokens, "tokens"), (experts, "experts"), (top_k, "top_k")))
    return e * (1 - (1 - k / e) ** t)


@register_rule("grouped_gemm")
def grouped_gemm(
    *,
    tokens: object,
    experts: object,
    top_k: object,
    N: object,
    K: object,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike | None = None,
    experts_read: object | None = None,
    capacity_factor: object | None = None,
) -> Cost:
    """Routed expert matmuls: ``T*k`` token-expert rows through ``[K, N]`` matrices.

    .. math::

        F = 2\\,T k\\,NK,\\qquad
        D = a\\,T k K + w\\,E_\\text{touched} K N + o\\,T k N

    with :func:`experts_touched` for the weights actually read (``experts_read``
    overrides it, e.g. with the fewest experts any routing can touch; at most ``E`` and at most
    ``T*k``, the distinct experts the tokens can read). Compute
    follows the *active* parameters, weight traffic the touched experts, and
    memory residency (elsewhere) all ``E`` experts.

    ``capacity_factor=c`` (Switch Transformer, Fedus et al. 2021: expert capacity
    = tokens per expert x c) gives every expert a buffer of
    ``C = ceil(c T k / E)`` rows that the kernel computes whole, padding
    included: ``E C`` rows replace ``T k`` in every term (tokens beyond a full
    buffer are dropped, which the padded work already covers).

    >>> from costmodel.symbols import T
    >>> grouped_gemm(tokens=T, experts=8, top_k=2, N=14336, K=4096).flops
    234881024*T
    """
    t = check_dim(tokens, "tokens")
    e, k = check_dim(experts, "experts"), check_dim(top_k, "top_k")
    if e.is_number and k.is_number and k > e:
        raise RuleArgumentError(f"grouped_gemm: top_k ({k}) cannot exceed experts ({e})")
    n, kk = check_dim(N, "N"), check_dim(K, "K")
    a, w, o, prec = operand_bytes(dtype, w_dtype, out_dtype, compute_dtype)
    touched = experts_touched(t, e, k) if experts_read is None else check_dim(experts_read, "experts_read")
    if experts_read is not None and touched.is_number and e.is_number and touched > e:
        raise RuleArgumentError(
            f"grouped_gemm: experts_read must be at most experts, got experts_read={touched}, experts={e}"
        )
    if experts_read is not None and touched.is_number and (t * k).is_number and touched > t * k:
        raise RuleArgumentError(  # each token reads its top_k experts: at most T*k distinct ones in all
            f"grouped_gemm: experts_read must be at most tokens*top_k (the distinct experts the tokens can "
            f"read), got experts_read={touched}, tokens={t}, top_k={k}"
        )
    rows = t * k
    if capacity_factor is not None:
        cf = to_expr(capacity_factor, field="capacity_factor")
        if cf.is_number and not cf > 0:
            raise RuleArgumentError(f"grouped_gemm: capacity_factor must be > 0, got {cf}")
        rows = e * sympy.ceiling(cf * t * k / e)
        touched = e  # every expert's buffer is computed, padded or not
    return (
        Cost.compute("tensor", prec, 2 * rows * n * kk)  # one MAC per (row, n, k)
        + Cost.traffic(read=a * rows * kk + w * touched * kk * n, write=o * rows * n)
        + Cost.launches(1)
    )
