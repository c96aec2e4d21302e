"""Per-op roofline tables: rows as plain data, then text or JSON.

:func:`roofline_rows` turns named costs into rows (FLOPs, bytes, intensity,
``I/I*``, the bound kind, each time term, headroom of 2x compute and 2x
bandwidth); :func:`format_table` renders any list of rows. The command line
and users' scripts share these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .cost import Cost, as_float
from .dtypes import gemm_out_dtype
from .hardware.spec import Hardware
from .roofline import bound, headroom
from .rules import op_cost
from .text import fmt_si, fmt_time
from .text import format_table as _format_table

__all__ = ["roofline_rows", "format_table", "fmt_si", "standard_ops", "COLUMNS", "fmt_time"]

#: Default columns of a roofline table: (key, header, format).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("op", "op", "s"),
    ("flops", "F (FLOP)", "si"),
    ("bytes", "D (B)", "si"),
    ("intensity", "I (FLOP/B)", ".2f"),
    ("i_over_ridge", "I/I*", ".3f"),
    ("kind", "bound", "s"),
    ("time_s", "T bound", "time"),
    ("speedup_2x_compute", "2x compute", ".2fx"),
    ("speedup_2x_bandwidth", "2x bandwidth", ".2fx"),
)


def roofline_rows(
    ops: Iterable[tuple[str, Cost]],
    hw: Hardware,
    *,
    ridge_unit: str = "tensor",
    ridge_precision: str = "bf16",
) -> list[dict[str, Any]]:
    """One row per ``(name, cost)`` on ``hw``; costs must be numeric.

    ``I/I*`` divides the op's intensity (all FLOPs over DRAM bytes) by the
    ridge point of ``ridge_unit`` at ``ridge_precision``, the profiling
    article's convention. The bound kind and times use every roof.
    """
    ridge = as_float(hw.balance(ridge_unit, ridge_precision), what="ridge point")
    rows = []
    for name, cost in ops:
        b = bound(cost, hw)
        flops = as_float(cost.flops, what=f"{name} flops")
        nbytes = as_float(cost.bytes, what=f"{name} bytes")
        intensity = flops / nbytes if nbytes else float("inf")
        row: dict[str, Any] = {
            "op": name,
            "flops": flops,
            "bytes": nbytes,
            "intensity": intensity,
            "i_over_ridge": intensity / ridge,
            "kind": b.kind,
            "category": b.category,
            "time_s": as_float(b.time, what=f"{name} time"),
            "lower_s": as_float(b.lower, what=f"{name} lower bound"),
            "upper_s": as_float(b.upper, what=f"{name} upper bound"),
            "terms_s": {k: as_float(v) for k, v in b.terms.items()},
            "unbounded": list(b.unbounded),
            "speedup_2x_compute": as_float(headroom(cost, hw, "compute", 2)),
            "speedup_2x_bandwidth": as_float(headroom(cost, hw, "memory", 2)),
        }
        rows.append(row)
    return rows


def format_table(
    rows: Sequence[Any], columns: Sequence[tuple[str, str, str]] = COLUMNS, *, left: Iterable[str] = ()
) -> str:
    """Render rows as an aligned text table (:func:`costmodel.text.format_table`; roofline columns
    by default).

    Parameters
    ----------
    rows : sequence of dict or Result
        The rows.
    columns : sequence of (key, heading, format)
        The columns (default: the roofline table's).
    left : iterable of str
        Keys of columns after the first aligned left (text).

    Returns
    -------
    str
    """
    return _format_table(rows, columns, left=left)


def standard_ops(dtype: str = "bf16") -> list[tuple[str, Cost]]:
    """The profiling article's operator ledger, built from the cost rules.

    Elementwise add over 16M elements, LayerNorm [4096, 3072] without beta,
    softmax [4096, 4096] fused and naive, GEMMs 512 and 4096 x 4096 x 4096 (writing bf16 when
    the operands are narrower: :func:`costmodel.dtypes.gemm_out_dtype`),
    single-head attention N=4096, d=128 naive and ideal-minimum.
    """
    n, d = 4096, 128
    out = gemm_out_dtype(dtype)  # a narrow GEMM writes bf16, as gemm_crossover prices it
    return [
        ("elementwise add [16M]", op_cost("elementwise", n=16_000_000, inputs=2, dtype=dtype)),
        ("layernorm [4096,3072]", op_cost("layernorm", rows=4096, cols=3072, bias=False, dtype=dtype)),
        ("softmax fused [4096,4096]", op_cost("softmax", rows=4096, cols=4096, variant="fused", dtype=dtype)),
        ("softmax naive [4096,4096]", op_cost("softmax", rows=4096, cols=4096, variant="naive", dtype=dtype)),
        ("gemm 512x4096x4096", op_cost("gemm", M=512, N=4096, K=4096, dtype=dtype, out_dtype=out)),
        ("gemm 4096x4096x4096", op_cost("gemm", M=4096, N=4096, K=4096, dtype=dtype, out_dtype=out)),
        (
            f"attention naive [N={n},d={d}]",
            op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, variant="naive", dtype=dtype),
        ),
        (
            f"attention ideal-min [N={n},d={d}]",
            op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, variant="flash", dtype=dtype),
        ),
    ]
