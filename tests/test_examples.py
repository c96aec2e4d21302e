"""Every example script runs and prints the seed's key numbers (small sizes where it measures)."""

import json
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(capsys, name, *argv, monkeypatch=None):
    import sys

    old = sys.argv
    sys.argv = [name, *argv]
    try:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    finally:
        sys.argv = old
    return capsys.readouterr().out


def test_roofline_model(capsys):
    out = run(capsys, "roofline_model.py", "--no-probe")
    assert "200.6" in out and "295.3" in out  # A100 and H100 bf16 ridge points
    assert "138.41 MB -> 4.19 MB" in out and "0.089 ms -> 0.028 ms" in out
    assert "crossing: M in (128, 256]" in out
    for ratio in ("0.001", "0.007", "0.002", "2.041", "0.312", "10.307"):  # the headroom table
        assert ratio in out


def test_prefill_decode_roofline(capsys):
    out = run(capsys, "prefill_decode_roofline.py")
    assert "333.3 FLOP/B" in out and "crossover M* = 375" in out
    assert "7.0 FLOP/B" in out and "5.08 ms" in out and "4.71 ms" in out
    data = json.loads(run(capsys, "prefill_decode_roofline.py", "--json"))
    assert data["gemm_crossover"] == {"mlp_down": 375, "square_4096": 399}
    assert round(data["decode_weight_lower_bound_ms"], 2) == 5.08


def test_memory_ledger(capsys):
    out = run(capsys, "memory_ledger.py", "--small")
    assert "68.95G  fits" in out and "94.95G  OOM" in out and "75.96G  fits" in out
    assert "512 KiB" in out and "13.0 GiB" in out


def test_machine_probe(capsys):
    out = run(capsys, "machine_probe.py", "--small")
    assert "GFLOP/s" in out and "layernorm multi-pass" in out and "calibrated" in out


@pytest.mark.slow
def test_make_figures(capsys, tmp_path):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    run(capsys, "make_figures.py", "--out", str(tmp_path), "--small")
    assert len(list(tmp_path.glob("fig*.png"))) == 4


def test_lecture_topics(capsys):
    out = run(capsys, "lecture_topics.py")
    assert "H100 bf16 act, int8 weights  M* =   163" in out
    assert "d_head= 64: h100 tensor, b200 sfu, b300 tensor" in out
    assert "nvfp4      4.50 bits" in out and "weight reads cost 209x" in out


@pytest.mark.slow
def test_serving_simulation(capsys):
    out = run(capsys, "serving_simulation.py", "--small")
    assert "max rate with P99 TTFT <= 1.0 s" in out and "disaggregated" in out
