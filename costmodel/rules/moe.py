"""Mixture-of-Experts expert GEMMs as one grouped GEMM.

``T`` tokens each routed to ``k`` of ``E`` experts; every expert applies its
own ``[K, N]`` matrix to the tokens it received.
"""

from __future__ import annotations

import sympy

from ..cost import Cost
from ..dtypes import DTypeLike
from ..errors import RuleArgumentError
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
) -> Cost:
    """Routed expert matmuls: ``T*k`` token-expert rows through ``[K, N]`` matrices.

    .. math::

        F = 2\\,T k\\,NK,\\qquad
        D = a\\,T k K + w\\,E_\\text{touched} K N + o\\,T k N

    with :func:`experts_touched` for the weights actually read (``experts_read``
    overrides it, e.g. with the fewest experts any routing can touch). Compute
    follows the *active* parameters, weight traffic the touched experts, and
    memory residency (elsewhere) all ``E`` experts.

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
    return (
        Cost.compute("tensor", prec, 2 * t * k * n * kk)  # one MAC per (row, n, k) for T*k rows
        + Cost.traffic(read=a * t * k * kk + w * touched * kk * n, write=o * t * k * n)
        + Cost.launches(1)
    )
