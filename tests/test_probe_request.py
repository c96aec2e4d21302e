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


def _bench(name: str, family: str, kind: str, flops: float, nbytes: float, roof: float, measured_s: float):
    """A benchmark row against a roof of ``roof`` FLOP/s (``kind`` tensor) or B/s (``dram``)."""
    from costmodel.measure.microbench import BenchRow

    predicted = (nbytes if kind == "dram" else flops) / roof
    return BenchRow(
        name=name,
        family=family,
        shape={},
        flops=flops,
        bytes=nbytes,
        intensity=flops / nbytes,
        kind=kind,
        predicted_s=predicted,
        measured_s=measured_s,
        achieved_fraction=predicted / measured_s,
        achieved_flops_per_s=flops / measured_s,
        achieved_bytes_per_s=nbytes / measured_s,
    )


#: ``examples/machine_probe.py`` on this 2-core machine while other jobs ran: the probe measured
#: 15.05 GB/s and 47.74 GFLOP/s fp32 (a busy moment), then the fp32 GEMMs ran faster than that
#: peak (times below, from its table), and the calibration printed "GEMM efficiency 2.20 * I /
#: (I + 682.7)": an efficiency ceiling of 2.2, and a calibrated spec with twice the probed peak
BUSY_PEAK, BUSY_BW = 47.74e9, 15.05e9


def _busy_rows() -> list[Any]:
    def gemm(m: int, measured_s: float) -> Any:
        k = 4096
        return _bench(
            f"gemm {m}x{k}x{k}",
            "gemm",
            "tensor",
            2 * m * k * k,
            4 * (m * k + k * k + m * k),
            BUSY_PEAK,
            measured_s,
        )

    add = _bench("add (1 pass)", "memory", "dram", 32e6, 3 * 4 * 32e6, BUSY_BW, 41.13e-3)
    return [add, gemm(512, 864.02e-3), gemm(2048, 1391.98e-3), gemm(4096, 2368.32e-3)]


def test_a_benchmark_faster_than_its_roof_is_said_and_no_efficiency_exceeds_1() -> None:
    from costmodel.measure.calibrate import calibrate

    cal = calibrate(_busy_rows())
    assert cal.gemm_e_max <= 1 and cal.memory_efficiency <= 1
    assert cal.gemm_e_max == 1  # the data asks for more: held at the roof
    # 2 * 4096^3 FLOP in 2.36832 s = 58.03 GFLOP/s against 47.74: 1.2155x; 2 * 2048 * 4096^2 FLOP
    # in 1.39198 s = 49.37 GFLOP/s: 1.034x; the 512-row GEMM (42%) and the add (62%) are not named
    text = "\n".join(cal.notes)
    assert text.count(" ran at ") == 2
    assert "gemm 4096x4096x4096 ran at 58.0 GFLOP/s, 1.22x the probed tensor peak (47.7 GFLOP/s)" in text
    assert "gemm 2048x4096x4096 ran at 49.4 GFLOP/s, 1.03x the probed tensor peak (47.7 GFLOP/s)" in text
    assert "the probed tensor peak is too low (measured in a busy moment?) or this timing is wrong" in text
    assert "GEMM e_max held at 1" in text
    # the report says it, and the calibrated spec never raises the probed roof
    res = ProbeResult(
        [
            Measurement("bw:add", 3 * 4 * 32e6 / BUSY_BW, 0.01, bytes=3 * 4 * 32e6),
            Measurement("mm:numpy:fp32", 2 * 4096**3 / BUSY_PEAK, 0.02, flops=2 * 4096**3),
        ],
        {"cpu": "busy"},
    )
    report = ProbeReport(ProbeRequest(name="box"), res, tuple(_busy_rows()), cal)
    assert "note: gemm 4096x4096x4096 ran at 58.0 GFLOP/s, 1.22x" in report.to_text()
    tensor = next(r for r in report.calibrated_spec()["devices"]["box"]["roofs"] if r["unit"] == "tensor")
    assert tensor["peak_flops_per_s"] == pytest.approx(BUSY_PEAK)
    from graphs.cli.common import dump  # what probe --json prints

    assert json.loads(dump(report.to_dict()))["calibration"]["notes"] == list(cal.notes)


def test_memory_benchmarks_faster_than_the_probed_bandwidth_hold_eta_at_1() -> None:
    from costmodel.measure.calibrate import calibrate

    rows = _busy_rows()
    # the add at 1.25x the probed 15.05 GB/s: 384e6 B in 20.41 ms = 18.81 GB/s
    rows[0] = _bench("add (1 pass)", "memory", "dram", 32e6, 3 * 4 * 32e6, BUSY_BW, 384e6 / BUSY_BW / 1.25)
    cal = calibrate(rows)
    assert cal.memory_efficiency == 1
    assert any(
        n.startswith("add (1 pass) ran at 18.8 GB/s, 1.25x the probed bandwidth (15.1 GB/s)")
        for n in cal.notes
    )
    assert any(
        "memory efficiency held at 1: the memory-bound benchmarks average 1.25x" in n for n in cal.notes
    )


def test_a_calibration_within_the_roofs_says_nothing() -> None:
    from costmodel.measure.calibrate import calibrate

    rows = _busy_rows()[:2]  # the add at 62%, the 512-row GEMM at 42%
    cal = calibrate(rows)
    assert cal.notes == () and cal.gemm_e_max == pytest.approx(rows[1].achieved_fraction)
