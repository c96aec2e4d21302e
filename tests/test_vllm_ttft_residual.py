"""benchmarks/vllm_ttft_residual.py: the residual table's medians, by hand."""

from __future__ import annotations

from benchmarks.vllm_ttft_residual import residual_table


def test_residual_table_medians_by_hand() -> None:
    # rows: (clients, meas - pred, meas - sim, measured, predicted), ms
    res = {
        ("b200", "fp8", 8, 1024): [
            (4, 50.0, 25.0, 90.0, 40.0),
            (8, 60.0, 35.0, 100.0, 40.0),
            (64, 140.0, 120.0, 260.0, 120.0),
        ]
    }
    line = residual_table(res).splitlines()[-1]
    # light load (<= 8 clients): medians of {90, 100} = 95, {40, 40} = 40, {50, 60} = 55, {25, 35} = 30;
    # all rows: median of {50, 60, 140} = 60 and of {25, 35, 120} = 35
    assert line == "| b200 | fp8 | 8 | 1024 | 2 | 95 | 40 | +55 | +30 | 3 | +60 | +35 |"


def test_residual_table_no_light_rows() -> None:
    res = {("h200-sxm", "fp8", 4, 8192): [(32, 10.0, -5.0, 500.0, 490.0)]}
    assert (
        residual_table(res).splitlines()[-1]
        == "| h200-sxm | fp8 | 4 | 8192 | 0 | - | - | - | - | 1 | +10 | -5 |"
    )
