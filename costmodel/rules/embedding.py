"""Token embedding gather and rotary position embedding."""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["embedding", "rope"]


@register_rule("embedding")
def embedding(
    *,
    tokens: object,
    hidden: object,
    dtype: DTypeLike = "bf16",
    index_dtype: DTypeLike = "int32",
) -> Cost:
    """Gather ``tokens`` rows of width ``hidden`` from an embedding table.

    .. math::

        F = 0,\\qquad D = T\\,(i + b\\,h) + b\\,T h

    A gather reads the ``T`` rows it needs and the ``T`` indices, never the
    whole ``vocab x hidden`` table (DESIGN.md, decode step). The table's
    residency is the weight's business, not this op's.

    >>> from costmodel.symbols import T, hidden_size
    >>> embedding(tokens=T, hidden=hidden_size).bytes.expand()
    4*T*hidden_size + 4*T
    """
    t, h = check_dim(tokens, "tokens"), check_dim(hidden, "hidden")
    b = dtype_bytes(dtype, "dtype")
    i = dtype_bytes(index_dtype, "index_dtype")
    return Cost.traffic(read=t * (i + b * h), write=b * t * h) + Cost.launches(1)


@register_rule("rope")
def rope(
    *,
    tokens: object,
    heads: object,
    head_dim: object,
    rotary_dim: object | None = None,
    dtype: DTypeLike = "bf16",
    table_dtype: DTypeLike = "fp32",
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """Rotary embedding (Su et al. 2021) on ``heads`` heads of ``tokens`` tokens.

    ``y = x * cos + rotate_half(x) * sin`` on the first ``r = rotary_dim``
    channels (default ``head_dim``): 2 multiplies and 1 add per element.
    The cos/sin tables (``T x r`` each, precomputed) are read once and shared
    by all heads; pass ``heads = H + H_kv`` to rotate queries and keys in one
    kernel.

    .. math::

        F = 3\\,T H r,\\qquad D = 2 b\\,T H r + 2 t\\,T r

    >>> from costmodel.symbols import T, head_dim
    >>> rope(tokens=T, heads=1, head_dim=head_dim).flops
    3*T*head_dim
    """
    t, h = check_dim(tokens, "tokens"), check_dim(heads, "heads")
    hd = check_dim(head_dim, "head_dim")
    r = check_dim(rotary_dim if rotary_dim is not None else hd, "rotary_dim")
    if r.is_number and hd.is_number and r > hd:
        raise RuleArgumentError(
            f"rope: rotary_dim must be at most head_dim (it rotates a head's first channels), "
            f"got rotary_dim={r}, head_dim={hd}"
        )
    b = dtype_bytes(dtype, "dtype")
    tb = dtype_bytes(table_dtype, "table_dtype")
    elems = t * h * r
    return (
        Cost.compute("vector", roof_of(compute_dtype), 3 * elems)
        + Cost.traffic(read=b * elems + 2 * tb * t * r, write=b * elems)
        + Cost.launches(1)
    )
