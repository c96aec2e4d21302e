"""Data movement without arithmetic: ``view`` (free) and ``copy``.

Views, reshapes, transposes that only change strides and slices cost
nothing: no kernel, no bytes. A reshape that must materialise (non-contiguous
input), a dtype cast, a concatenation or a KV-cache write is a ``copy``: it
reads every element once and writes it once.
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["view", "copy"]


@register_rule("view")
def view(*, elements: object) -> Cost:
    """A metadata-only view/reshape/slice of ``elements`` values.

    .. math::

        F = 0,\\qquad D = 0,\\qquad \\text{kernels} = 0

    >>> view(elements=1024) == Cost.zero()
    True
    """
    check_dim(elements, "elements")
    return Cost.zero()


@register_rule("copy")
def copy(*, elements: object, dtype: DTypeLike = "bf16", out_dtype: DTypeLike | None = None) -> Cost:
    """Materialise ``elements`` values, casting to ``out_dtype`` if given.

    .. math::

        F = 0,\\qquad D = n\\,(b_\\text{in} + b_\\text{out})

    A KV-cache write in decode is a copy of the new tokens' slice only
    (``B * H_kv * d_head`` per layer for K, the same for V), cast to the
    cache's dtype; it never rewrites the cache.

    >>> from costmodel.symbols import dim
    >>> copy(elements=dim("n"), dtype="bf16", out_dtype="fp8").bytes
    3*n
    """
    n = check_dim(elements, "elements")
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    return Cost.traffic(read=b * n, write=o * n) + Cost.launches(1)
