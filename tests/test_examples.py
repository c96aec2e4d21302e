"""Every example script runs and prints the seed's key numbers (small sizes where it measures)."""

import json
import math
import re
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
    # by hand: (1 + rho) * (14e9 B + B * (2 GiB KV + 0.5 GiB activations)) <= 78 GiB
    gib = 2**30
    for rho in (0.30, 0.04):
        hand = math.floor((78 * gib / (1 + rho) - 14e9) / (2.5 * gib))
        assert f"overhead {rho:.0%} of the other terms" in out
        assert f"   max batch: {hand}\n" in out.split(f"overhead {rho:.0%}")[1]
    assert hand == 24
    for flag in ("above_bound", "slower_than_smaller_batch"):  # a flag shown is explained
        rows = out.split("flags\n")[1].split("\n\n")[0]
        assert (flag in rows) == (f"   {flag}: " in out)


def test_machine_probe(capsys):
    out = run(capsys, "machine_probe.py", "--small")
    assert "GFLOP/s" in out and "layernorm multi-pass" in out and "calibrated" in out
    # no kernel beats its roof: each efficiency is at most 1, a faster benchmark is a note (it
    # printed "GEMM efficiency 2.20 * I / (I + 682.7)" on a busy machine)
    m = re.search(r"bandwidth efficiency ([0-9.]+); GEMM efficiency ([0-9.]+) \* I", out)
    assert m is not None and float(m[1]) <= 1 and float(m[2]) <= 1
    faster = [ln for ln in out.splitlines() if re.search(r"\s(10[1-9]|1[1-9][0-9]|[2-9][0-9]{2})%\s", ln)]
    assert not faster or "note: " in out  # a row above 100% is said


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
    # the frontier asked for H100 vs B200 showed B200 rows only, without a word on the H100
    assert "   h100-sxm: no point on the frontier (each point is dominated" in out


def test_lecture_topics_agrees_with_the_decode_command(capsys):
    """Sections 2, 3 and 6 answer what ``costmodel decode llama-3.1-8b --device h100 --batch 16
    --ctx 8192`` answers: the same step, the same max batch, the same per-token weight bound."""
    from graphs.cli import main

    out = run(capsys, "lecture_topics.py")
    assert (
        main(["decode", "llama-3.1-8b", "--device", "h100", "--batch", "16", "--ctx", "8192", "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert (
        f"   weight read {doc['weight_read_s'] * 1e3:.2f} ms, KV read {doc['kv_read_s'] * 1e3:.2f} ms, "
        f"TPOT {doc['step_s'] * 1e3:.2f} ms -> {doc['tokens_per_s_per_device']:.0f} tok/s per device"
    ) in out
    assert f"   ctx   8192: max batch {doc['limits']['max_batch_fits']}\n" in out
    nf = doc["near_far_memory"]
    assert f"{nf['full_memory_reads_per_s']:10.1f} reads/s" in out
    assert f"per-token bound {nf['per_token_bound_s'] * 1e3:.3f} ms" in out
    assert (
        f"{doc['read_every_weight_once_s'] * 1e3:.2f} ms against its {doc['weight_read_s'] * 1e3:.2f} ms"
        in out
    )


def test_roofline_model_ledger_is_the_report_command(capsys):
    """Section 2's table is ``costmodel report --device a100-sxm-40gb``'s, line for line, and its
    exact crossover root the same."""
    from graphs.cli import main

    out = run(capsys, "roofline_model.py", "--no-probe")
    assert main(["report", "--device", "a100-sxm-40gb"]) == 0
    cli = capsys.readouterr().out
    table = cli.split("\n\n")[1]
    assert table.startswith("op ") and table in out
    root = re.search(r"exact root M\* = ([0-9.]+)", cli)
    assert root is not None and f"exact root M* = {root[1]}" in out
    assert "FLOPs 8.67 G -> 8.67 G (x1.000)" in out  # flash computes what naive does


def test_prefill_decode_weight_bounds_are_the_decode_command_on_the_seed_device(capsys, tmp_path):
    """The seed's rounded H100 (1000 TFLOP/s, 3.0 TB/s) as a --hw-file: ``costmodel decode``'s
    weight read and read-every-weight-once equal the script's, and by hand the latter is
    Qwen2.5-7B's 7,615,616,512 bf16 parameters / 3.0e12 B/s = 5.077 ms."""
    from graphs.cli import main

    data = json.loads(run(capsys, "prefill_decode_roofline.py", "--json"))
    f = tmp_path / "seed.toml"
    f.write_text(
        "[sources]\nseed = 'prefill_decode_roofline.py: H100_TFLOPS_FP16 = 1000, H100_BW_BYTES_PER_S = 3.0e12'\n"
        "[devices.h100-seed]\ndescription = 'the seed H100'\nvendor = 'seed'\n"
        "roofs = [{ unit = 'tensor', precision = 'bf16', peak_flops_per_s = 1000e12, source = 'seed' },"
        " { unit = 'vector', precision = 'fp32', peak_flops_per_s = 67e12, source = 'seed' }]\n"
        "memory = [{ name = 'dram', bandwidth_bytes_per_s = 3.0e12, capacity_bytes = 80e9, source = 'seed' }]\n"
    )
    argv = [
        "--hw-file",
        str(f),
        "decode",
        "qwen2.5-7b",
        "--device",
        "h100-seed",
        "--batch",
        "1",
        "--ctx",
        "1",
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert data["decode_weight_lower_bound_ms"] == pytest.approx(
        doc["read_every_weight_once_s"] * 1e3, rel=1e-12
    )
    assert data["decode_graph_weight_traffic_ms"] == pytest.approx(doc["weight_read_s"] * 1e3, rel=1e-12)
    assert data["decode_weight_lower_bound_ms"] == pytest.approx(7_615_616_512 * 2 / 3.0e12 * 1e3, rel=1e-12)
    assert data["params"]["total_params"] == 7_615_616_512


@pytest.mark.slow
def test_export_report(capsys):
    """The nn.Module through torch.export: closed forms by hand for LayerNorm(1024) -> Linear(1024,
    4096) -> GELU -> Linear(4096, 1024) + residual in bf16, per token of B*S: the two matmuls
    2 * 2 * 1024 * 4096 = 16,777,216 FLOPs; DRAM bytes 2 * (2*1024 norm + (1024 + 4096) up +
    2*4096 gelu + (4096 + 1024) down + 3*1024 add) = 47,104 = 23 * 2048, and the weights once:
    2 * (2 * 1024 * 4096 + 4096 + 1024 + 2 * 1024) = 16,791,552 = 8199 * 2048."""
    pytest.importorskip("torch", reason="the torch extra is not installed")
    out = run(capsys, "export_report.py")
    assert "tensor part = 16777216*B*S" in out
    assert "DRAM bytes  = 2048*(23*B*S + 8199)" in out
    assert "per node on h100-sxm at B=8, S=2048:" in out and "linear_1" in out
    after = out.split("suggested fusions:\n")[1]
    # both epilogues, each saving its GEMM's output written and read back, by hand in bf16:
    # 2 * 8 * 2048 * 4096 * 2 B = 268.4 MB and 2 * 8 * 2048 * 1024 * 2 B = 67.1 MB
    assert after.split("\n")[0] == "  linear + gelu: saves 268.4 MB (matmul epilogue: elementwise fused into the producer)"
    assert after.split("\n")[1].startswith("  linear_1 + add: saves 67.1 MB")


@pytest.mark.slow
def test_serving_simulation(capsys):
    out = run(capsys, "serving_simulation.py", "--small")
    assert "max rate with P99 TTFT <= 1.0 s" in out and "disaggregated" in out
