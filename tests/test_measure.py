"""Probe, microbenchmarks, calibration, profiles and plots on this machine."""

import json
import math
import statistics
import time

import pytest

from costmodel import get_device, load_hardware_file
from costmodel.graph import classify_graph
from costmodel.keys import MEASURED_S
from costmodel.measure.calibrate import calibrate
from costmodel.measure.microbench import BenchRow, flag_batch_anomalies, run_benchmarks
from costmodel.measure.probe import probe
from graphs import build_model
from models import get_model


@pytest.fixture(scope="module")
def probed():
    t0 = time.perf_counter()
    res = probe(small=True, repeats=5, use_torch=False)
    return res, time.perf_counter() - t0


def test_probe_is_quick_and_writes_a_valid_spec(probed, tmp_path):
    res, seconds = probed
    assert seconds < 60
    path = tmp_path / "probe.json"
    res.write(path, name="probe-test")
    (hw,) = load_hardware_file(path)
    assert (
        hw.name == "probe-test"
        and float(hw.bandwidth()) > 1e9
        and float(hw.require_peak("tensor", "fp32")) > 1e9
    )
    notes = json.loads(hw.notes)
    assert notes["environment"]["numpy"] and {m["name"] for m in notes["measurements"]} >= {
        "bw:copy",
        "bw:add",
        "bw:gemv",
    }
    assert get_device("probe-test") is hw


def test_add_and_large_gemm_meet_their_bounds():
    """The add uses the probe's own access pattern and the GEMM the probe's own kernel, so each
    lands near its bound: the median over five back-to-back rounds (probe, then benchmark, a
    short pause between rounds) must lie in [0.7, 1.3]. A busy moment on a shared machine
    disturbs one round (a roof probed too low, or a slow benchmark: single rounds were seen at
    0.69x-2.47x under load); the median of five needs three disturbed rounds to leave the band.
    """
    keys = ("add (1 pass)", "gemm 1024x1024x1024")
    fractions: dict[str, list[float]] = {k: [] for k in keys}
    for attempt in range(5):
        if attempt:
            time.sleep(0.2 * attempt)  # back off: let a burst of load pass
        res = probe(small=True, repeats=3, use_torch=False)
        rows = {r.name: r for r in run_benchmarks(res.hardware("probe"), small=True, repeats=3)}
        for k in keys:
            fractions[k].append(rows[k].achieved_fraction)
    for k in keys:
        assert 0.7 <= statistics.median(fractions[k]) <= 1.3, (k, fractions[k])


def test_calibration_terms_and_residuals(probed):
    res, _ = probed
    hw = res.hardware("probe")
    rows = run_benchmarks(hw, small=True, repeats=3)
    cal = calibrate(rows)
    # The memory rows run the probe's own access patterns on the machine the probe measured, so
    # their efficiency is near 1 (observed 0.72-1.1 on a 2-core machine); the GEMM ceiling is
    # held within 2x the best observed fraction, which is near 1 for a 1024^3 GEMM. A value
    # outside these bands means the probe and the benchmarks disagree about this machine.
    assert 0.5 <= cal.memory_efficiency <= 2.0, cal.memory_efficiency
    # (the ceiling is at most twice the best GEMM fraction observed; that fraction itself can
    # exceed 1 when the probe caught the machine in a slower moment than the benchmark)
    best_gemm = max(r.achieved_fraction for r in rows if r.name.startswith("gemm"))
    assert 0.25 <= cal.gemm_e_max <= 2 * best_gemm + 1e-9, (cal.gemm_e_max, best_gemm)
    assert len(cal.residuals) == len(rows)
    # the fitted memory efficiency is the geometric mean of bound/measured over the DRAM-bound
    # rows (a least-squares fit in log space), so the calibrated spec predicts those rows with
    # log-residuals that average to zero: recomputed here from the raw times
    mem = [r for r in rows if r.kind == "dram"]
    eta = math.exp(sum(math.log(r.predicted_s / r.measured_s) for r in mem) / len(mem))
    assert cal.memory_efficiency == pytest.approx(eta, rel=1e-9)
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

    b = batch_sweep(probed[0].hardware("probe"), d=512, batches=(1, 4, 16), repeats=3)
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
    assert cal.gemm_i_half <= 400 and cal.gemm_e_max <= 2 * 1.2 + 1e-9
    one = calibrate(_rows([(256, 0.9), (256, 0.9)]))
    assert one.gemm_i_half == 0 and one.gemm_e_max == pytest.approx(0.9)
