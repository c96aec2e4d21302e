"""benchmarks/tpot_split.py: the decode step and the decode window's fixed part, by hand."""

from __future__ import annotations

import pytest

from benchmarks import tpot_split as ts
from costmodel.errors import CostModelError


def _points() -> list[tuple[int, float, float]]:
    # By hand: a decode step of 20 ms in both; a window's fixed part of 4.8 s measured and 3.0 s
    # simulated, so TPOT = (0.020 (OSL - 1) + P) / (OSL - 1):
    # measured 7.34/127, 9.90/255, 15.02/511; simulated 5.54/127, 8.10/255, 13.22/511.
    return [
        (128, 7.34 / 127, 5.54 / 127),
        (256, 9.90 / 255, 8.10 / 255),
        (512, 15.02 / 511, 13.22 / 511),
    ]


def test_the_split_recovers_the_step_and_the_windows_fixed_part():
    f = ts.split(_points())
    assert f.step_measured_s == pytest.approx(0.020, rel=1e-9)
    assert f.step_simulated_s == pytest.approx(0.020, rel=1e-9)
    assert f.window_measured_s == pytest.approx(4.8, rel=1e-9)
    assert f.window_simulated_s == pytest.approx(3.0, rel=1e-9)
    assert f.step_error == pytest.approx(0.0, abs=1e-9)
    assert f.window_error == pytest.approx(3.0 / 4.8 - 1, rel=1e-9)  # -37.5 %


def test_the_report_prints_per_other_client_costs():
    fits = {("silicon:x|1|m|d||1|1", 1024, 64): ts.split(_points())}
    text = ts.report(fits)
    # 4.8 s and 3.0 s over the 63 other clients: 76.2 and 47.6 ms
    assert "| 76.2 | 47.6 |" in text
    assert "-37.5 %" in text


@pytest.mark.parametrize(
    ("points", "says"),
    [
        ([(128, 0.05, 0.04), (128, 0.05, 0.04)], "at least two distinct"),
        ([(1, 0.05, 0.04), (128, 0.05, 0.04)], "OSL 1"),
        ([(128, -0.05, 0.04), (256, 0.05, 0.04)], "measured TPOT -0.05"),
        ([(128, 0.05, float("nan")), (256, 0.05, 0.04)], "simulated TPOT nan"),
    ],
)
def test_bad_points_are_refused_by_name(points, says):
    with pytest.raises(CostModelError, match=says):
        ts.split(points)


def test_the_groups_leave_the_held_out_deployments_out():
    pytest.importorskip("aiconfigurator_core")
    from benchmarks import served_errors as se

    held = se.heldout()
    fits = ts.groups("tensorrt-llm|1.0.0rc3")
    keys = {k[0] for k in fits}
    assert keys and not keys & held
    assert "silicon:tensorrt-llm|1.0.0rc3|qwen3-32b|h100-sxm|fp8|1|1" in keys


def test_the_tpot_errors_attribute_the_error_to_the_window():
    # the step is exact here, so making it exact changes nothing and the window part carries all:
    # at OSL 128 simulated 0.020 + 3.0/127 against measured 0.020 + 4.8/127 = 5.54/7.34 - 1
    e = ts.split(_points()).tpot_errors()
    assert e["now"][0] == pytest.approx(5.54 / 7.34 - 1, rel=1e-9)
    assert e["step exact"][0] == pytest.approx(5.54 / 7.34 - 1, rel=1e-9)
    assert e["window exact"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def _step_only(step_meas: float, step_sim: float) -> ts.Split:
    return ts.Split(step_meas, step_sim, 1.0, 1.0, (128, 256))


def test_the_step_gap_is_a_fixed_part_and_one_per_client():
    # by hand: gaps of 1.0 ms + 40 us x C at C = 8 and 128: 1.32 ms and 6.12 ms
    pts = [(8, _step_only(0.010 + 1.32e-3, 0.010)), (128, _step_only(0.020 + 6.12e-3, 0.020))]
    a, b = ts.step_gap(pts)
    assert a == pytest.approx(1.0e-3, rel=1e-9)
    assert b == pytest.approx(40e-6, rel=1e-9)
    with pytest.raises(CostModelError, match="concurrencies"):
        ts.step_gap(pts[:1])
