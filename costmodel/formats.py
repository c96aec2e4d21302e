"""Block-scaled 4-bit formats as real numpy quantisers, to compare on your own data.

All three encode elements as FP4 E2M1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
their negatives) and differ in how scales are shared:

* ``fp4_tensor``: one FP32 scale for the whole tensor, ``amax / 6``;
* ``mxfp4`` (OCP Microscaling spec v1.0): one E8M0 (power-of-two) scale per
  32 values, ``2^(floor(log2 amax) - 2)`` (2 = the E2M1 element's largest
  exponent), elements clamped to +-6;
* ``nvfp4`` (NVIDIA): one FP8 E4M3 scale per 16 values, ``amax_block / 6``
  rounded to E4M3, under a per-tensor FP32 scale ``amax / (6 * 448)`` that
  keeps block scales in E4M3's range.

Bits per element including scales: 4 + 32/N_tensor ~ 4, 4 + 8/32 = 4.25,
4 + 8/16 = 4.5: the same numbers :mod:`costmodel.dtypes` charges in byte costs.
Metrics: relative error ``||x - q(x)|| / ||x||`` and the fraction of non-zero
inputs that quantise to zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import get_dtype
from .errors import CostModelError
from .results import Result

__all__ = [
    "E2M1_VALUES",
    "round_e2m1",
    "round_e4m3",
    "quantize",
    "format_error",
    "FormatError",
    "compare_formats",
    "FORMATS",
]

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
FORMATS = ("fp4_tensor", "mxfp4", "nvfp4")


def round_e2m1(x: np.ndarray) -> np.ndarray:
    """Round to the nearest FP4 E2M1 value (saturating at +-6)."""
    a = np.abs(x)
    idx = np.abs(a[..., None] - E2M1_VALUES).argmin(axis=-1)
    return np.sign(x) * E2M1_VALUES[idx]


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to the nearest FP8 E4M3 value (max 448, subnormals below 2^-6)."""
    a = np.minimum(np.abs(x), 448.0)
    e = np.floor(np.log2(np.maximum(a, 2.0**-9)))
    e = np.clip(e, -6, 8)
    step = 2.0 ** (e - 3)  # 3 mantissa bits
    return np.sign(x) * np.round(a / step) * step


def _blocks(x: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    flat = x.reshape(-1)
    pad = (-flat.size) % size
    if pad:
        flat = np.concatenate([flat, np.zeros(pad, dtype=flat.dtype)])
    return flat.reshape(-1, size), pad


def quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    """Quantise and dequantise ``x`` in ``fmt`` (one of :data:`FORMATS`)."""
    x = np.asarray(x, dtype=np.float64)
    if fmt not in FORMATS:
        raise CostModelError(f"format {fmt!r} not allowed; allowed: {FORMATS}")
    if fmt == "fp4_tensor":
        s = np.max(np.abs(x)) / 6.0
        return x if s == 0 else round_e2m1(x / s) * s
    if fmt == "mxfp4":
        blk, pad = _blocks(x, 32)
        amax = np.max(np.abs(blk), axis=1, keepdims=True)
        expo = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2
        scale = 2.0**expo
        q = round_e2m1(np.clip(blk / scale, -6, 6)) * scale
    else:
        blk, pad = _blocks(x, 16)
        t_scale = np.max(np.abs(x)) / (6.0 * 448.0)
        if t_scale == 0:
            return x
        amax = np.max(np.abs(blk), axis=1, keepdims=True)
        b_scale = round_e4m3(amax / 6.0 / t_scale)
        scale = np.where(b_scale > 0, b_scale, 1.0) * t_scale
        q = round_e2m1(blk / scale) * scale
    flat = q.reshape(-1)
    return (flat[: flat.size - pad] if pad else flat).reshape(x.shape)


@dataclass(frozen=True)
class FormatError(Result):
    """How a 4-bit format represents ``x``: ``||x - q(x)|| / ||x||``, the fraction of non-zeros
    flushed to zero, and the storage bits per element (block scales included)."""

    format: str
    relative_error: float
    zero_fraction: float
    bits_per_element: float


def format_error(x: np.ndarray, fmt: str) -> FormatError:
    """Relative error, zero fraction and bits per element of ``fmt`` on ``x``."""
    x = np.asarray(x, dtype=np.float64)
    q = quantize(x, fmt)
    nz = x != 0
    bits = {
        "fp4_tensor": 4 + 32 / max(x.size, 1),
        "mxfp4": float(get_dtype("mxfp4").bits),
        "nvfp4": float(get_dtype("nvfp4").bits),
    }[fmt]
    norm = float(np.linalg.norm(x))
    return FormatError(
        format=fmt,
        relative_error=float(np.linalg.norm(x - q)) / norm if norm else 0.0,
        zero_fraction=float(np.mean(q[nz] == 0)) if nz.any() else 0.0,
        bits_per_element=bits,
    )


def compare_formats(x: np.ndarray) -> list[FormatError]:
    """:func:`format_error` for every format on the same data."""
    return [format_error(x, f) for f in FORMATS]
