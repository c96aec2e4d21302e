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

Group-quantised integer weights (GPTQ, AWQ, compressed-tensors ``pack-quantized``),
named ``int<b>_g<G>`` (symmetric) and ``int<b>_g<G>_asym`` (with zero points), ``b``
in 2..8 and ``G`` the ``group_size``:

.. math::

    \\text{bits} = b + (16 + z) / G, \\qquad z = b \\text{ (asymmetric) or } 0

* one FP16 scale per group of ``G`` input channels: the checkpoints' ``scales``
  tensor of shape ``[K/G, N]`` (AutoGPTQ / GPTQModel, AutoAWQ, compressed-tensors);
* asymmetric formats add one ``b``-bit zero point per group, packed ``32/b`` to an
  int32 (``qzeros`` ``[K/G, N*b/32]``); a symmetric GPTQ checkpoint also stores
  ``qzeros``, but its zero is the constant ``2**(b-1)`` and the serving kernels
  (vLLM's Marlin ``uint4b8``) do not read it, so it is not counted:
  ``int4_g128 = 4 + 16/128 = 4.125`` and ``int4_g128_asym = 4 + 20/128 = 4.15625`` bits.
* ``group_size = -1`` (one scale per output channel) is the plain ``int4`` or ``int8``:
  its ``16/K`` bits are O(1/K) and ignored, as NVFP4's per-tensor scale is (other
  widths per channel have no dtype here).

bitsandbytes 4-bit (QLoRA, Dettmers et al. 2023, section 3): NF4 or FP4 values in
blocks of 64 with one FP32 absmax each, ``nf4 = 4 + 32/64 = 4.5`` bits; with double
quantisation the absmax are FP8 with one FP32 scale per 256 of them,
``nf4_dq = 4 + 8/64 + 32/(64*256) = 4.127`` bits (the paper's 0.127 bits per parameter).

Bytes per element are exact rationals (``bytes_per_element(NVFP4) = 9/16``).

>>> get_dtype("bf16").bytes
2
>>> get_dtype("nvfp4").bytes
9/16
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

import sympy

from .errors import UnknownDTypeError

__all__ = [
    "DType",
    "DTYPES",
    "ROOF_PRECISIONS",
    "get_dtype",
    "dtype_bytes",
    "roof_of",
    "precision_of",
    "gemm_out_dtype",
    "DTypeLike",
    "group_quantised",
]


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
        _block("nf4", "int4", 4, 64, 32),  # bitsandbytes NF4: one FP32 absmax per 64 (module doc)
        # double-quantised NF4: FP8 absmax per 64, one FP32 scale per 256 absmax (module doc)
        DType(
            "nf4_dq",
            sympy.Integer(4) + sympy.Rational(8, 64) + sympy.Rational(32, 64 * 256),
            "int4",
            4,
            64,
            8,
        ),
    )
}

_GROUPED = re.compile(r"int([2-8])_g([1-9][0-9]{0,5})(_asym)?")

#: Every precision key a compute roof can serve: the roof of each dtype (``fp8`` for both FP8
#: encodings, ``fp4`` for NVFP4 and MXFP4), ``int2`` to ``int8`` for the group-quantised
#: integers, and ``*``, the wildcard of a symbolic roof. A device's roof keyed otherwise
#: (``bf17``, ``bfloat16``) would never be asked for, so device files are refused with one.
ROOF_PRECISIONS: frozenset[str] = frozenset(
    {d.roof for d in DTYPES.values()} | {f"int{b}" for b in range(2, 9)} | {"*"}
)


def group_quantised(bits: int, group_size: int, *, asymmetric: bool = False) -> DType:
    """The dtype of ``bits``-bit integer weights with one FP16 scale per ``group_size``
    values (and a ``bits``-bit zero point when ``asymmetric``): ``bits + (16 + z)/G``
    (module doc); ``group_size = -1`` is per-channel, the plain ``int<bits>``.

    >>> group_quantised(4, 128).bits
    33/8
    >>> group_quantised(4, 128, asymmetric=True).name
    'int4_g128_asym'
    """
    if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 8:
        raise UnknownDTypeError(f"quantised weight bits must be a whole number in 2..8, got {bits!r}")
    if group_size == -1:  # per channel: int4 and int8 (other widths need a group size)
        return get_dtype(f"int{bits}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or not 1 <= group_size <= 10**6:
        raise UnknownDTypeError(f"group_size must be -1 (per channel) or in 1..1000000, got {group_size!r}")
    return get_dtype(f"int{bits}_g{group_size}" + ("_asym" if asymmetric else ""))


def _parse_grouped(key: str) -> DType | None:
    """``int<b>_g<G>[_asym]`` built on demand (module doc), or None."""
    m = _GROUPED.fullmatch(key)
    if m is None:
        return None
    b, g = int(m.group(1)), m.group(2)
    zero = b if m.group(3) else 0
    # one FP16 scale (and a b-bit zero point when asymmetric) per group of G values
    return DType(key, sympy.Integer(b) + sympy.Rational(16 + zero, int(g)), f"int{b}", b, int(g), 16 + zero)


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
    """Look up a dtype by name or alias (``"bfloat16"`` -> ``bf16``; ``int4_g128`` built on demand).

    Parameters
    ----------
    name : str or DType
        A canonical name (``bf16``, ``fp8_e4m3``, ``nvfp4``), an alias (``bfloat16``, ``fp8``), a
        group-quantised ``int<b>_g<G>[_asym]``, case-insensitive; a :class:`DType` is returned as is.

    Returns
    -------
    DType
        Its name, bits per element (block scales included) and the roof it computes on.

    Raises
    ------
    UnknownDTypeError
        When ``name`` is not a str or DType, or names no dtype (the allowed ones listed).

    >>> get_dtype("bfloat16").bits
    16
    """
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise UnknownDTypeError(f"dtype must be a name such as 'bf16', got {type(name).__name__}")
    key = _ALIASES.get(name.lower(), name.lower())
    found = DTYPES.get(key) or _parse_grouped(key)
    if found is None:
        allowed = ", ".join(sorted(DTYPES))
        raise UnknownDTypeError(
            f"unknown dtype {name[:80]!r}; allowed: {allowed}, "
            "or group-quantised int<b>_g<G>[_asym] (e.g. int4_g128)"
        )
    return found


def dtype_bytes(dtype: DTypeLike, field: str = "dtype") -> sympy.Expr:
    """Bytes per element of a dtype, or the expression itself if symbolic.

    Parameters
    ----------
    dtype : str, DType or sympy.Expr
        A dtype (:func:`get_dtype`), or bytes per element as an expression (a symbol ``b`` for a
        closed form), positive.
    field : str, default "dtype"
        The parameter's name, for the error.

    Returns
    -------
    sympy.Expr
        Bytes per element, an exact rational for a named dtype (NVFP4: 9/16).

    Raises
    ------
    UnknownDTypeError
        When ``dtype`` is unknown or a non-positive expression.

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


def precision_of(name: str, field: str = "--precision") -> str:
    """The roof precision a command line's ``--precision`` names, spelled as ``dtype=`` and
    ``--dtype`` are: a dtype's name or alias in any case (``FP8``, ``fp8_e4m3``, ``bfloat16``: the
    roof it computes on, :func:`roof_of`), else a roof's own name in lower case (``FP4``:
    ``fp4``). Whether a device has that roof is the caller's check.

    Parameters
    ----------
    name : str
        The spelling given.
    field : str, default "--precision"
        The option's name, for the error.

    Returns
    -------
    str
        The roof's precision key.

    Raises
    ------
    UnknownDTypeError
        When ``name`` is not a string.

    >>> precision_of("FP8"), precision_of("fp8_e4m3"), precision_of("bfloat16"), precision_of("FP4")
    ('fp8', 'fp8', 'bf16', 'fp4')
    """
    if not isinstance(name, str):
        raise UnknownDTypeError(f"{field} must name a precision such as 'bf16', got {type(name).__name__}")
    try:
        return get_dtype(name.strip()).roof
    except UnknownDTypeError:
        return name.strip().lower()


def gemm_out_dtype(dtype: DTypeLike, out_dtype: DTypeLike | None = None) -> DTypeLike | None:
    """What a GEMM of ``dtype`` operands writes when ``out_dtype`` is not given: bf16 for
    operands narrower than 16 bits (FP8, NVFP4 and MXFP4 GEMMs accumulate in fp32 and write bf16:
    cuBLASLt's and CUTLASS's block-scaled GEMMs emit a 16-bit D), else None (the operand dtype).
    ``out_dtype`` given (or a symbolic ``dtype``): returned as it is.

    >>> gemm_out_dtype("fp8"), gemm_out_dtype("bf16"), gemm_out_dtype("fp8", "fp8")
    ('bf16', None, 'fp8')
    """
    if out_dtype is None and not isinstance(dtype, sympy.Basic) and get_dtype(dtype).bits < 16:
        return "bf16"
    return out_dtype
