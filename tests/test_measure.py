"""Probe, microbenchmarks, calibration, profiles and plots.

No test here times this machine (STYLE.md convention 14): the kernels run for real, but every
assertion is arithmetic on recorded timings (``time_best`` replaced by one that runs the kernel
once and reports a fixed time) or on synthetic rows. How close the kernels come to their bounds
on a real machine is a measurement: ``python -m benchmarks.probe_vs_bench``.
"""

import importlib
import json
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from costmodel import get_device, load_hardware_file
from costmodel.graph import classify_graph
from costmodel.keys import MEASURED_S
from costmodel.measure.calibrate import calibrate
from costmodel.measure.microbench import BenchRow, flag_batch_anomalies, run_benchmarks
from costmodel.measure.probe import Measurement, ProbeResult, probe, time_best
from graphs import build_model
from models import get_model

# `costmodel.measure.probe` the attribute is the function; the modules whose time_best is replaced
PROBE_MOD = importlib.import_module("costmodel.measure.probe")
BENCH_MOD = importlib.import_module("costmodel.measure.microbench")

RECORDED_S = 0.01  # every kernel "took" 10 ms, so each number below follows by hand
N_SMALL = 8_000_000  # fp32 elements of the small probe's and benchmarks' arrays
GEMM_SMALL = 1024  # the small probe's square GEMM


@pytest.fixture
def recorded(monkeypatch):
    """``time_best`` runs each kernel once (it still executes) and reports RECORDED_S, no spread."""

    def fake(fn, repeats=5, warmup=1, min_time_s=0.0):
        fn()
        return RECORDED_S, 0.0

    monkeypatch.setattr(PROBE_MOD, "time_best", fake)
    monkeypatch.setattr(BENCH_MOD, "time_best", fake)


@pytest.fixture
def probed(recorded):
    return probe(small=True, repeats=1, use_torch=False)


def test_time_best_takes_the_minimum_and_the_median_spread(monkeypatch):
    # a clock whose runs take 3, 1, 2 s: best 1 s, median 2 s, spread (2 - 1) / 1 = 1
    ticks = iter([0, 3, 10, 11, 20, 22])
    monkeypatch.setattr(PROBE_MOD, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    calls = []
    assert time_best(lambda: calls.append(1), repeats=3, warmup=1) == (1, 1.0)
    assert len(calls) == 4  # one warm-up, three timed
    # runs of 1 s continue until min_time_s = 5 s have accumulated: five runs, not the two asked
    clock = iter(range(100))
    monkeypatch.setattr(PROBE_MOD, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    calls.clear()
    assert time_best(lambda: calls.append(1), repeats=2, warmup=0, min_time_s=5) == (1, 0.0)
    assert len(calls) == 5


def test_probe_writes_a_valid_spec(probed, tmp_path):
    path = tmp_path / "probe.json"
    probed.write(path, name="probe-test")
    (hw,) = load_hardware_file(path)
    assert hw.name == "probe-test"
    # the add reads x and y and writes z: 3 x 4 B x 8e6 = 96 MB in 10 ms = 9.6e9 B/s
    assert float(hw.bandwidth()) == pytest.approx(3 * 4 * N_SMALL / RECORDED_S)
    # a 1024^3 GEMM is 2 x 1024^3 = 2.147e9 FLOP in 10 ms = 2.147e11 FLOP/s, the vector roof too
    assert float(hw.require_peak("tensor", "fp32")) == pytest.approx(2 * GEMM_SMALL**3 / RECORDED_S)
    assert float(hw.require_peak("vector", "fp32")) == float(hw.require_peak("tensor", "fp32"))
    assert float(hw.require_peak("tensor", "fp64")) == pytest.approx(2 * GEMM_SMALL**3 / RECORDED_S)
    notes = json.loads(hw.notes)
    assert notes["environment"]["numpy"]
    moved = {m["name"]: m["bytes"] for m in notes["measurements"]}
    assert moved["bw:copy"] == 2 * 4 * N_SMALL  # read x, write z
    assert moved["bw:add"] == 3 * 4 * N_SMALL
    # gemv: a 2048 x (8e6 // 2048 = 3906) fp32 matrix, the vector in and the result out
    assert moved["bw:gemv"] == 4 * (2048 * 3906 + 3906 + 2048)
    assert get_device("probe-test") is hw


def test_spec_keeps_the_fastest_library_per_precision():
    # two fp32 matmuls of 1e9 FLOP: 4 ms (2.5e11 FLOP/s) beats 5 ms; bandwidth from bw:add only
    res = ProbeResult(
        measurements=[
            Measurement("bw:copy", 0.001, 0.0, bytes=8e9),
            Measurement("bw:add", 0.002, 0.0, bytes=6e6),  # 3e9 B/s
            Measurement("mm:numpy:fp32", 0.005, 0.0, flops=1e9),
            Measurement("mm:torch-cpu:fp32", 0.004, 0.0, flops=1e9),
        ]
    )
    hw = res.hardware("synthetic")
    assert float(hw.bandwidth()) == pytest.approx(3e9)
    assert float(hw.require_peak("tensor", "fp32")) == pytest.approx(2.5e11)


def test_add_and_large_gemm_sit_on_the_probe_roofs(probed):
    """The add benchmark is the probe's own access pattern and the 1024^3 GEMM its own kernel,
    so a benchmark that takes as long as the probe did sits exactly on its bound (fraction 1);
    the smaller GEMM, a quarter of the FLOPs in the same time, reaches a quarter of the roof."""
    rows = {r.name: r for r in run_benchmarks(probed.hardware("probe"), small=True, repeats=1)}
    add, gemm = rows["add (1 pass)"], rows[f"gemm {GEMM_SMALL}x{GEMM_SMALL}x{GEMM_SMALL}"]
    assert add.kind == "dram" and add.achieved_fraction == pytest.approx(1)
    assert gemm.kind == "tensor" and gemm.achieved_fraction == pytest.approx(1)
    # 2 x 256 x 1024 x 1024 FLOP = 1/4 of the 1024^3 GEMM; its bytes (6.3 MB) take 0.66 ms < 2.5 ms
    assert rows["gemm 256x1024x1024"].achieved_fraction == pytest.approx(0.25)
    # add+relu: two passes, 3n + 2n fp32 = 20 n B where the probe moved 12 n B in the same time
    assert rows["add+relu (2 passes)"].achieved_fraction == pytest.approx(20 / 12)
    for r in rows.values():  # fraction = bound / measured; rates = work / measured
        assert r.measured_s == RECORDED_S and r.achieved_fraction == pytest.approx(r.predicted_s / RECORDED_S)
        assert r.achieved_bytes_per_s == pytest.approx(r.bytes / RECORDED_S)
        assert ("above_bound" in r.flags) == (r.achieved_fraction > 1.1)


def test_calibration_terms_and_residuals(probed):
    hw = probed.hardware("probe")
    rows = run_benchmarks(hw, small=True, repeats=1)
    cal = calibrate(rows)
    assert len(cal.residuals) == len(rows)
    # the fitted memory efficiency is the geometric mean of bound/measured over the DRAM-bound
    # rows (a least-squares fit in log space), so the calibrated spec predicts those rows with
    # log-residuals that average to zero: recomputed here from the recorded times
    mem = [r for r in rows if r.kind == "dram"]
    eta = math.exp(sum(math.log(r.predicted_s / r.measured_s) for r in mem) / len(mem))
    if eta > 1:  # faster than the probed bandwidth (a busy probe): held at 1 and said
        assert cal.memory_efficiency == 1 and any("memory efficiency held at 1" in n for n in cal.notes)
        eta = 1.0
    else:
        assert cal.memory_efficiency == pytest.approx(eta, rel=1e-9)
        assert sum(
            math.log1p(res.residual) for res in cal.residuals if res.name in {r.name for r in mem}
        ) == pytest.approx(0, abs=1e-9)
    # the ceiling is at most twice the best GEMM fraction (1, the 1024^3 GEMM on the probe's roof)
    best_gemm = max(r.achieved_fraction for r in rows if r.name.startswith("gemm"))
    assert best_gemm == pytest.approx(1) and 0 < cal.gemm_e_max <= 2 * best_gemm + 1e-9
    scaled = cal.apply(hw)
    for r in mem:  # the calibrated DRAM roof: predicted time scales by 1 / eta
        assert r.predicted_s * float(hw.bandwidth()) / float(scaled.bandwidth()) == pytest.approx(
            r.predicted_s / eta, rel=1e-9
        )


def test_batch_anomaly_flags():
    common = dict(family="gemm", shape={}, flops=1.0, bytes=1.0, intensity=1.0, kind="dram", predicted_s=1.0)
    rows = [
        BenchRow(
            f"batch {b}",
            measured_s=t,
            achieved_fraction=1 / t,
            achieved_flops_per_s=1 / t,
            achieved_bytes_per_s=1 / t,
            **common,
        )
        for b, t in zip((1, 2, 4, 8), (1.0, 8.0, 4.0, 4.1), strict=True)
    ]  # the article's B=2 spike: 8 s at B=2, 4 s at B=4 and 8
    flagged = flag_batch_anomalies(rows)
    assert "slower_than_smaller_batch" in flagged[1].flags and not flagged[0].flags


def test_profile_trace_attaches_to_nodes(tmp_path):
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from costmodel.measure.profile import attach_profile, load_trace_events
    from graphs.importers.torch_export import from_exported_program

    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
    x = torch.randn(64, 256)
    ep = torch.export.export(m, (x,))
    g = from_exported_program(ep)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        m(x)
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    rep = attach_profile(g, load_trace_events(trace), "h100", precision="bf16")
    assert rep.matched >= 2
    assert rep.model_flops == 2 * 64 * 256 * 512 * 2  # two linears
    assert rep.mfu is not None and 0 < rep.mfu < 1
    assert any(MEASURED_S in d for _, d in g.nodes(data=True))


def _png_ok(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plots_headless(tmp_path, probed):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    from costmodel import plots
    from graphs import capacity, sweep

    hw = get_device("h100")
    rows = classify_graph(build_model(get_model("llama-3.1-8b"), "decode", batch=8, ctx=4096), hw)
    fig = plots.roofline_plot(rows, hw, tmp_path / "r.png")
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("arithmetic intensity") and ax.get_ylabel() == "FLOP/s"
    plotted = sum(len(c.get_offsets()) for c in ax.collections)
    assert plotted == len([r for r in rows if r.intensity and r.flops])  # a point per node
    _png_ok(tmp_path / "r.png")
    terms = {b: capacity("llama-3.1-8b", hw, batch=b, ctx=4096).terms for b in (1, 8, 32)}
    fig = plots.ledger_plot(terms, float(hw.capacity()), tmp_path / "l.png")
    assert fig.axes[0].get_ylabel() == "memory (GiB)"
    _png_ok(tmp_path / "l.png")
    res = sweep("llama-3.1-8b", devices=["h100"], batches=[1, 8, 64], ctxs=[1024, 4096])
    fig = plots.frontier_plot(res.rows(), tmp_path / "f.svg")
    assert fig.axes[0].get_xlabel() == "tokens/s per device"
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")
    fig = plots.headroom_plot(tmp_path / "h.png")
    lines = fig.axes[0].lines
    assert max(lines[0].get_ydata()) == pytest.approx(2) and min(lines[0].get_ydata()) == pytest.approx(1)
    _png_ok(tmp_path / "h.png")
    from costmodel.measure.microbench import batch_sweep

    b = batch_sweep(probed.hardware("probe"), d=512, batches=(1, 4, 16), repeats=3)
    fig = plots.batch_sweep_plot(b, tmp_path / "b.png")
    assert fig.axes[0].get_ylabel() == "latency (ms)"
    _png_ok(tmp_path / "b.png")


def _row(name, family, kind, intensity, fraction):
    """A synthetic benchmark row whose bound is 1 s and whose measurement is 1/fraction s."""
    return BenchRow(
        name=name,
        family=family,
        shape={},
        flops=intensity,
        bytes=1.0,
        intensity=intensity,
        kind=kind,
        predicted_s=1.0,
        measured_s=1 / fraction,
        achieved_fraction=fraction,
        achieved_flops_per_s=intensity * fraction,
        achieved_bytes_per_s=fraction,
    )


def _rows(points, mem_fraction=0.8):
    return [_row("add", "memory", "dram", 1 / 12, mem_fraction)] + [
        _row(f"gemm I={i}", "gemm", "tensor", i, f) for i, f in points
    ]


def test_calibration_recovers_a_known_curve():
    # synthetic rows on e(I) = 0.8 I / (I + 50): the fit gives the curve back (grid step ~1.3%)
    pts = [(i, 0.8 * i / (i + 50)) for i in (10, 30, 100, 300, 1000)]
    cal = calibrate(_rows(pts))
    assert cal.memory_efficiency == pytest.approx(0.8)
    assert cal.gemm_e_max == pytest.approx(0.8, rel=0.02) and cal.gemm_i_half == pytest.approx(50, rel=0.03)
    assert all(abs(r.residual) < 0.01 for r in cal.residuals)


def test_calibration_keeps_the_plateau_within_the_data():
    # two points on a straight line (fraction proportional to I): unbounded, the fit would push
    # I_half to infinity and e_max far above anything measured; held to I_half <= max I it stays
    # within 2x the best fraction seen. One GEMM intensity fits e_max alone (I_half = 0).
    cal = calibrate(_rows([(100, 0.3), (400, 1.2)]))
    assert cal.gemm_i_half <= 400 and cal.gemm_e_max == 1  # never above the roof (test_probe_request)
    one = calibrate(_rows([(256, 0.9), (256, 0.9)]))
    assert one.gemm_i_half == 0 and one.gemm_e_max == pytest.approx(0.9)


def test_probed_spec_states_the_host_memory_as_its_capacity(tmp_path):
    """A probe records the host's physical memory (os.sysconf pages x page size) as the dram
    level's capacity, so the commands that check what fits answer on a probed device, as
    docs/commands.md shows (``--hw-file out/probe.json model analyze tiny --device probe``)."""
    from costmodel.measure.probe import host_memory_bytes

    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    assert host_memory_bytes() == pages * size
    res = ProbeResult(
        measurements=[
            Measurement("bw:add", 0.002, 0.0, bytes=6e6),  # 3e9 B/s
            Measurement("mm:numpy:fp32", 0.005, 0.0, flops=1e9),
        ],
        env={"cpu": "test cpu", "memory_bytes": 64 * 2**30},
    )
    assert float(res.hardware("probe-cap").capacity()) == 64 * 2**30
    path = tmp_path / "probe.json"
    res.write(path)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "costmodel",
            "--hw-file",
            str(path),
            "model",
            "analyze",
            "tiny",
            "--device",
            "probe",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    # no count of the host's memory: the level states no capacity, as before
    bare = ProbeResult(measurements=res.measurements, env={"cpu": "test cpu", "memory_bytes": None})
    assert "capacity_bytes" not in bare.spec_dict("p")["devices"]["p"]["memory"][0]
