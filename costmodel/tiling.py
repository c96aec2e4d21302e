"""Tiled IO models: blocked GEMM and FlashAttention against on-chip capacity.

Blocked GEMM (Hong & Kung 1981; the ``gemm`` rule's ``tile_m``/``tile_n``):
with ``t_m x t_n`` output tiles, A is streamed ``ceil(N/t_n)`` times and W
``ceil(M/t_m)`` times. A tile's working set with a ``t_k``-deep slab,
``stages`` buffers of the inputs and an fp32 accumulator is

.. math::

    \\text{bytes}(t_m, t_n) = \\text{stages}\\,(t_m + t_n)\\,t_k\\,b + t_m t_n\\,b_\\text{acc}

and its intensity ``2 t_m t_n / (b (t_m + t_n))`` (:func:`costmodel.derive.tile_intensity`).

FlashAttention (Dao et al. 2022, Algorithm 1): with ``M`` elements of SRAM,
key blocks of ``B_c = ceil(M / 4d)`` and query blocks of ``B_r = min(B_c, d)``;
K and V are re-read once per query block, so HBM traffic falls from the
naive materialised S/P towards the ideal minimum as SRAM grows.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .cost import as_float
from .derive import tile_intensity
from .dtypes import DTypeLike, dtype_bytes
from .errors import CostModelError
from .hardware.spec import Hardware
from .results import Result
from .rules import op_cost

__all__ = ["gemm_tile_bytes", "largest_gemm_tile", "flash_attention_io", "GemmTile", "FlashAttentionIO"]


def gemm_tile_bytes(
    tile_m: int,
    tile_n: int,
    *,
    tile_k: int = 64,
    dtype: DTypeLike = "bf16",
    acc_dtype: DTypeLike = "fp32",
    stages: int = 2,
) -> float:
    """On-chip bytes of one GEMM tile's working set (module doc)."""
    b, acc = as_float(dtype_bytes(dtype)), as_float(dtype_bytes(acc_dtype, "acc_dtype"))
    return stages * (tile_m + tile_n) * tile_k * b + tile_m * tile_n * acc


def largest_gemm_tile(
    capacity_bytes: float,
    hw: Hardware | None = None,
    *,
    tile_k: int = 64,
    dtype: DTypeLike = "bf16",
    acc_dtype: DTypeLike = "fp32",
    stages: int = 2,
    multiple: int = 16,
    precision: str = "bf16",
) -> GemmTile:
    """The largest square tile (a multiple of ``multiple``) whose working set fits.

    Returns the tile, its bytes, its DRAM intensity and, with ``hw``, the
    ridge point it is compared with (a tile below the ridge keeps even a huge
    GEMM memory-bound on that chip).
    """
    if not math.isfinite(capacity_bytes) or capacity_bytes <= 0:
        raise CostModelError(f"capacity_bytes must be a positive finite number, got {capacity_bytes}")

    def fits(tile: int) -> bool:
        b = gemm_tile_bytes(tile, tile, tile_k=tile_k, dtype=dtype, acc_dtype=acc_dtype, stages=stages)
        return bool(b <= capacity_bytes)

    # the working set grows with the tile, so the largest fitting multiple is found by doubling
    # then bisection: O(log) evaluations whatever the capacity
    if not fits(multiple):
        raise CostModelError(f"no {multiple}x{multiple} tile fits in {capacity_bytes:.0f} bytes")
    lo, hi = 1, 2  # in units of `multiple`: lo fits, hi is tried next
    while fits(hi * multiple):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid * multiple) else (lo, mid)
    t = lo * multiple
    tile = GemmTile(
        tile=t,
        bytes=as_float(gemm_tile_bytes(t, t, tile_k=tile_k, dtype=dtype, acc_dtype=acc_dtype, stages=stages)),
        intensity=as_float(tile_intensity(t, t, dtype)),
    )
    if hw is None:
        return tile
    ridge = as_float(hw.balance("tensor", precision))
    return dataclasses.replace(tile, ridge=ridge, compute_bound=tile.intensity >= ridge)


@dataclass(frozen=True)
class GemmTile(Result):
    """The largest square GEMM tile that fits, its working set and its DRAM intensity; with a
    device, the ridge it is compared with (a tile below it keeps even a huge GEMM memory-bound)."""

    tile: int
    bytes: float
    intensity: float
    ridge: float | None = None
    compute_bound: bool | None = None


@dataclass(frozen=True)
class FlashAttentionIO(Result):
    """Tiled FlashAttention traffic and the two bounds it lies between (bytes)."""

    block_q: int
    block_kv: int
    query_blocks: int
    tiled_bytes: float
    ideal_bytes: float  #: Q, K, V read once, O written once
    naive_bytes: float  #: S and P materialised


def flash_attention_io(
    *,
    N: int,
    d: int,
    sram_bytes: float,
    heads: int = 1,
    batch: int = 1,
    kv_len: int | None = None,
    dtype: DTypeLike = "bf16",
    causal: bool = False,
) -> FlashAttentionIO:
    """HBM bytes of tiled FlashAttention with ``sram_bytes`` of on-chip memory.

    Returns the block sizes, the tiled traffic, and the two bounds it lies
    between: the ideal minimum (Q, K, V read once, O written once) and the
    naive kernels that materialise S and P.
    """
    b = as_float(dtype_bytes(dtype))
    m = int(sram_bytes // b)  # SRAM size in elements
    if m < 4 * d:
        raise CostModelError(
            f"sram_bytes {sram_bytes:.0f} cannot hold one block row (needs >= {4 * d * b:.0f})"
        )
    bc = math.ceil(m / (4 * d))
    br = min(bc, d)
    nkv = kv_len or N
    common = dict(batch=batch, heads=heads, q_len=N, kv_len=nkv, head_dim=d, dtype=dtype, causal=causal)
    tiled = op_cost("attention", variant="flash", q_block=br, **common)
    ideal = op_cost("attention", variant="flash", **common)
    naive = op_cost("attention", variant="naive", **common)
    return FlashAttentionIO(
        block_q=br,
        block_kv=bc,
        query_blocks=math.ceil(N / br),
        tiled_bytes=as_float(tiled.bytes),
        ideal_bytes=as_float(ideal.bytes),
        naive_bytes=as_float(naive.bytes),
    )
