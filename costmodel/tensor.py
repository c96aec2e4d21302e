"""Tensors: the edges of a dataflow graph.

A :class:`Tensor` has a name, a shape (a tuple of sympy expressions) and a
dtype; its size in bytes is ``prod(shape) * bits / 8``, exact.

>>> from costmodel.symbols import B, hidden_size
>>> Tensor("x", (B, hidden_size), "bf16").bytes
2*B*hidden_size
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .dtypes import DType, get_dtype
from .errors import InvalidDimensionError
from .symbols import check_dim

__all__ = ["Tensor"]


@dataclass(frozen=True, slots=True)
class Tensor:
    """A named tensor with a symbolic shape and a dtype."""

    name: str
    shape: tuple[sympy.Expr, ...]
    dtype: DType

    def __init__(self, name: str, shape: tuple[object, ...] | list[object], dtype: DType | str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidDimensionError(f"tensor name must be a non-empty string, got {name!r}")
        if not isinstance(shape, (tuple, list)):
            raise InvalidDimensionError(f"tensor {name!r}: shape must be a tuple, got {shape!r}")
        dims = tuple(check_dim(s, f"tensor {name!r} shape[{i}]") for i, s in enumerate(shape))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", get_dtype(dtype))

    @property
    def numel(self) -> sympy.Expr:
        """Number of elements, ``prod(shape)``."""
        return sympy.Mul(*self.shape)

    @property
    def bytes(self) -> sympy.Expr:
        """``numel * bits / 8`` (block-scale overhead included)."""
        return self.numel * self.dtype.bytes

    def __str__(self) -> str:
        return f"{self.name}[{', '.join(map(str, self.shape))}]:{self.dtype.name}"
