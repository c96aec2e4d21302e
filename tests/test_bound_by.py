"""The "bound by" line of decode and prefill: the binding whole-step term, checked by hand."""

import json

import pytest

from graphs.cli import main
from graphs.serving.step.reports import bound_by


def test_memory_term_is_named_by_its_largest_part():
    # dram 10 ms = weights 7 + KV 2 + activations 1; step 12 ms (links serial): 10/12
    b = bound_by({"tensor": 0.001, "dram": 0.010, "link:scale_up": 0.002}, 0.012, 0.007, 0.002)
    assert (b.resource, b.kind, b.what) == ("dram", "memory", "weight read")
    assert b.share == pytest.approx(10 / 12)
    # the whole DRAM term's share, then the weight read's own (7/12): a review found "weight read
    # (memory: dram, 100% of the step)" where the weight read was 77 % of it
    assert b.line() == "bound by: memory (dram, 83% of the step; weight read 58% of the step)"
    kv = bound_by({"dram": 0.010}, 0.010, 0.003, 0.006)
    assert kv.what == "KV read" and kv.share == 1.0


def test_compute_and_links():
    c = bound_by({"tensor": 0.0293, "dram": 0.0118}, 0.0334, 0.001, 0.0)
    assert (c.kind, c.resource) == ("compute", "tensor") and c.line().endswith("(tensor, 88% of the step)")
    link = bound_by({"tensor": 0.01, "link:scale_up": 0.02}, 0.04, 0.0, 0.0)
    assert (link.kind, link.what, link.share) == ("communication", "scale_up link", 0.5)
    assert bound_by({}, 1.0, 0.0, 0.0) is None and bound_by({"dram": 1.0}, 0.0, 0.0, 0.0) is None


def test_decode_of_a_small_batch_is_bound_by_the_weight_read(capsys):
    # batch 8, ctx 1000 on H100: 16 GB of bf16 weights vs 8x1000 tokens of KV (131 kB/token):
    # 1 GB, and 2*8e9*8 = 1.3e11 FLOPs against 989 TFLOP/s: the weight read binds
    assert (
        main(["decode", "llama-3.1-8b", "--device", "h100", "--batch", "8", "--ctx", "1000", "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["bound_by"]["what"] == "weight read" and doc["bound_by"]["share"] > 0.9
    assert main(["decode", "llama-3.1-8b", "--device", "h100", "--batch", "8", "--ctx", "1000"]) == 0
    assert "bound by: memory (dram, " in capsys.readouterr().out


def test_a_long_prefill_is_compute_bound(capsys):
    assert main(["prefill", "llama-3.1-8b", "--device", "h100", "--seq", "2000"]) == 0
    assert "bound by: compute (tensor, " in capsys.readouterr().out


def test_symbolic_bounds_print_times_with_units(capsys):
    # gemm M=B*S, N=K=4096 on H100: 2*4096^2 FLOPs per row over 989.4 TFLOP/s = 33.91 ns per row;
    # bytes 2*4096*2 per row over 3.35 TB/s = 4.891 ns per row, the 32 MiB weight read 10.02 us
    assert main(["op", "gemm", "M=B*S", "N=4096", "K=4096"]) == 0
    out = capsys.readouterr().out
    assert f"T >= max({2 * 4096**2 / 989.4e12 * 1e9:.2f} ns*B*S, 4.891 ns*B*S + 10.02 us)" in out
    assert "241552734375" not in out


def test_top_level_help_has_no_markup(capsys):
    """Issue 46: the top-level --help showed the module's reST (``report``)."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and "'report'" in out


def test_plot_names_each_file_it_wrote_and_how_it_priced(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sim.png"
    assert main(["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet", "--plot", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {out} (latency CDFs) and {tmp_path / 'sim-timeline.png'} (timeline)" in err
    assert out.exists() and (tmp_path / "sim-timeline.png").exists()


def test_titles_say_how_the_iterations_were_priced():
    from graphs.serving import SimulationRequest
    from graphs.serving.present.simulation_report import _priced_by

    assert _priced_by(SimulationRequest(rate=1.0)).startswith("bound")
    assert _priced_by(SimulationRequest(rate=1.0, predict="vllm")) == "predicted (vllm kernels)"
    assert _priced_by(SimulationRequest(rate=1.0, predict_file="/x/fit.json")) == "calibrated (fit.json)"


def test_the_decode_line_shows_the_dram_traffic_its_verdict_counts(capsys):
    """Llama-3.1-8B, batch 600, ctx 128 on an H100 printed "weight read 4.482 ms | KV read 3.005 ms
    | compute 9.143 ms" then "bound by: memory (dram, 73% of the step ...)": 73% of the 13.345 ms
    step is 9.710 ms of DRAM traffic, more than the two reads shown and the compute. The rest is
    activations between unfused kernels. By hand: KV 32 layers x 8 heads x 128 x 2 (K, V) x 2 B =
    131,072 B per token x 600 x 128 = 10.07 GB over 3.35 TB/s = 3.005 ms; weight read 4.482 ms;
    activations 9.710 - 4.482 - 3.005 = 2.223 ms."""
    argv = ["decode", "llama-3.1-8b", "--batch", "600", "--ctx", "128"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    dram, weights, kv = doc["terms_s"]["dram"], doc["weight_read_s"], doc["kv_read_s"]
    assert kv == pytest.approx(131_072 * 600 * 128 / 3.35e12, rel=1e-9)  # 3.005 ms
    assert dram == pytest.approx(9.710e-3, abs=5e-7) and weights == pytest.approx(4.482e-3, abs=5e-7)
    assert dram / doc["step_s"] == pytest.approx(doc["bound_by"]["share"])  # the 73%
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert (
        "weight read 4.482 ms | KV read 3.005 ms | activations 2.223 ms (DRAM 9.710 ms in all) | compute"
        in text
    )
    assert "bound by: memory (dram, 73% of the step; weight read 34% of the step)" in text
