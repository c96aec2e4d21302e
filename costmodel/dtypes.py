"""Data types and their storage cost.

A :class:`DType` has a name, the bits one element occupies *including*
block-scale overhead, and the roof class it computes on (``"fp8"`` covers
both FP8 encodings; ``"fp4"`` covers NVFP4 and MXFP4).

Block-scaled formats (OCP Microscaling spec v1.0; NVIDIA NVFP4):

.. math::

    \\text{bits} = b_\\text{elem} + b_\\text{scale} / n_\\text{block}

* NVFP4: 4-bit E2M1 values, one FP8 (E4M3) scale per 16 values:
  ``4 + 8/16 = 4.5`` bits (the per-tensor FP32 scale is O(1) and ignored).
* MXFP4: 4-bit E2M1 values, one E8M0 scale per 32 values: ``4 + 8/32 = 4.25``.

Bytes per element are exact rationals (``bytes_per_element(NVFP4) = 9/16``).

>>> get_dtype("bf16").bytes
2
>>> get_dtype("nvfp4").bytes
9/16
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import sympy

from .errors import UnknownDTypeError

__all__ = ["DType", "DTYPES", "get_dtype", "dtype_bytes", "roof_of", "DTypeLike"]


@dataclass(frozen=True, slots=True)
class DType:
    """A storage/compute format.

    Attributes
    ----------
    name: canonical name (``"bf16"``).
    bits: bits per element including shared-scale overhead (exact rational).
    roof: the precision key of the compute roof it runs on (``"fp8"``).
    element_bits: bits of the element itself, without scales.
    block_size: values sharing one scale (``None`` when not block-scaled).
    scale_bits: bits of each shared scale.
    """

    name: str
    bits: sympy.Rational
    roof: str
    element_bits: int
    block_size: int | None = None
    scale_bits: int = 0

    @property
    def bytes(self) -> sympy.Rational:
        """Bytes per element, exact: ``bits / 8``."""
        return sympy.Rational(self.bits) / 8

    def __str__(self) -> str:
        return self.name


def _block(name: str, roof: str, element_bits: int, block: int, scale_bits: int) -> DType:
    bits = sympy.Integer(element_bits) + sympy.Rational(scale_bits, block)
    return DType(name, bits, roof, element_bits, block, scale_bits)


def _plain(name: str, bits: int, roof: str | None = None) -> DType:
    return DType(name, sympy.Integer(bits), roof or name, bits)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _plain("fp64", 64),
        _plain("fp32", 32),
        _plain("tf32", 32),  # stored as fp32; computes on the tf32 tensor roof
        _plain("bf16", 16),
        _plain("fp16", 16),
        _plain("fp8_e4m3", 8, "fp8"),
        _plain("fp8_e5m2", 8, "fp8"),
        _plain("int64", 64),
        _plain("int32", 32),
        _plain("uint8", 8),
        _plain("complex64", 64),
        _plain("complex128", 128),
        _plain("bool", 8),
        _plain("int8", 8),
        _plain("int4", 4),
        _block("nvfp4", "fp4", 4, 16, 8),
        _block("mxfp4", "fp4", 4, 32, 8),
        _block("mxfp8", "fp8", 8, 32, 8),
    )
}

_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
    "uint4": "int4",
}

#: What rule arguments accept for a dtype: a DType, its name, or a symbolic
#: bytes-per-element expression (for derivations that keep ``b`` abstract).
DTypeLike: TypeAlias = DType | str | sympy.Expr


def get_dtype(name: DType | str) -> DType:
    """Look up a dtype by name or alias (``"bfloat16"`` -> ``bf16``)."""
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise UnknownDTypeError(f"dtype must be a name such as 'bf16', got {type(name).__name__}")
    key = _ALIASES.get(name.lower(), name.lower())
    try:
        return DTYPES[key]
    except KeyError:
        allowed = ", ".join(sorted(DTYPES))
        raise UnknownDTypeError(f"unknown dtype {name!r}; allowed: {allowed}") from None


def dtype_bytes(dtype: DTypeLike, field: str = "dtype") -> sympy.Expr:
    """Bytes per element of a dtype, or the expression itself if symbolic.

    >>> from costmodel.symbols import quantity
    >>> b = quantity("b")
    >>> dtype_bytes(b)
    b
    >>> dtype_bytes("int4")
    1/2
    """
    if isinstance(dtype, sympy.Expr):
        if dtype.is_positive is False or (dtype.is_number and not dtype.is_positive):
            raise UnknownDTypeError(f"{field}: bytes per element must be positive, got {dtype}")
        return dtype
    try:
        return get_dtype(dtype).bytes
    except UnknownDTypeError as exc:
        raise UnknownDTypeError(f"{field}: {exc}") from None


def roof_of(dtype: DTypeLike) -> str:
    """Precision key of the roof a dtype computes on; ``"*"`` when symbolic."""
    if isinstance(dtype, sympy.Expr):
        return "*"
    return get_dtype(dtype).roof
