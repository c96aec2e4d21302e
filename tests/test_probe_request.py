"""The ``probe`` request and report (costmodel/measure/probe_report.py): refused without argparse in
the command line's words; the calibrated spec's arithmetic on synthetic measurements (no timing
of this machine)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from costmodel.measure.calibrate import Calibration
from costmodel.measure.probe import Measurement, ProbeResult
from costmodel.measure.probe_report import ProbeReport, ProbeRequest

REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"repeats": 0}, "--repeats must be a whole number in [1, 1000], got 0"),
    ({"repeats": 2.5}, "--repeats must be a whole number in [1, 1000], got 2.5"),
    (
        {"name": " "},
        "--name must name the device in printable characters (no newline, tab or control), got ' '",
    ),
    ({"calibrated_out": "probe.json"}, "--calibrated-out 'probe.json' is --out's file: give another path"),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        ProbeRequest(**settings)
    assert str(exc.value) == message


def _report() -> ProbeReport:
    # bw:add moves 3 x 8 MB = 24e6 B in 2 ms -> 12e9 B/s; mm:numpy:fp32 does 2 x 1024^3 FLOP in
    # 10 ms -> 2.147e11 FLOP/s
    res = ProbeResult(
        [
            Measurement("bw:add", 2e-3, 0.01, bytes=24e6),
            Measurement("mm:numpy:fp32", 10e-3, 0.02, flops=2 * 1024**3),
        ],
        {"cpu": "synthetic"},
    )
    cal = Calibration(memory_efficiency=0.8, gemm_e_max=0.5, gemm_i_half=10.0)
    return ProbeReport(ProbeRequest(name="box"), res, (), cal)


def test_the_calibrated_spec_scales_the_roofs() -> None:
    spec = _report().calibrated_spec()["devices"]["box"]
    tensor = next(r for r in spec["roofs"] if r["unit"] == "tensor")
    assert tensor["peak_flops_per_s"] == pytest.approx(2 * 1024**3 / 10e-3 * 0.5)  # x e_max
    vector = next(r for r in spec["roofs"] if r["unit"] == "vector")
    assert vector["peak_flops_per_s"] == pytest.approx(2 * 1024**3 / 10e-3)  # vector roofs unscaled
    assert spec["memory"][0]["bandwidth_bytes_per_s"] == pytest.approx(24e6 / 2e-3 * 0.8)  # x eta


def test_the_text_and_json() -> None:
    report = _report()
    text = report.to_text()
    assert text.startswith("probe of synthetic written to probe.json (use --hw-file probe.json)")
    assert "calibration: memory efficiency 0.80, GEMM e(I) = 0.50 I/(I + 10.0)" in text
    doc = json.loads(json.dumps(report.to_dict(), default=str))
    assert doc["spec_file"] == "probe.json" and len(doc["measurements"]) == 2
