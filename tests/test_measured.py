"""Predictions against measured GPUs (issue: aiconfigurator-core's published kernel latencies).

The corpus tests need the ``[measured]`` extra and skip with a reason without it;
the rule additions they rely on (sliding window, in-network all-reduce) are
checked by hand derivations that run everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import sympy

from costmodel.rules import op_cost
from costmodel.rules.attention import window_pairs
from costmodel.symbols import dim


def test_window_pairs_hand_counts():
    # query i of a length-8 prompt sees min(i+1, 3) keys: 1+2+3+3+3+3+3+3 = 21
    assert window_pairs(8, 8, 3) == 21
    # a window at least the prompt is plain causal: 8*9/2
    assert window_pairs(8, 8, 100) == 36
    # 4 new queries after 10 cached tokens, window 5: each sees 5 keys
    assert window_pairs(4, 14, 5) == 20
    # decode: one query sees min(ctx, W)
    n = dim("kv_len")
    for ctx in (1, 100, 4096, 100000):
        assert window_pairs(1, n, 4096).subs(n, ctx) == min(ctx, 4096)


def test_windowed_decode_reads_at_most_w_keys():
    c = op_cost(
        "attention", heads=8, kv_heads=8, q_len=1, kv_len=100000, head_dim=128, causal=True, window=4096
    )
    # K and V, 8 heads, 4096 positions, 128 wide, 2 bytes; plus Q and O (8*128*2 each)
    assert c.bytes == 2 * 8 * 4096 * 128 * 2 + 2 * 8 * 128 * 2


def test_in_network_all_reduce_moves_the_vector_once():
    c = op_cost("all_reduce", elements=1 << 20, p=8, dtype="bf16", algorithm="in_network")
    assert c.comm_terms["scale_up"] == 2 * (1 << 20)
    ring = op_cost("all_reduce", elements=1 << 20, p=8, dtype="bf16")
    assert ring.comm_terms["scale_up"] == sympy.Rational(2 * 7, 8) * 2 * (1 << 20)
    with pytest.raises(Exception, match="allowed"):
        op_cost("all_gather", elements=4, p=2, algorithm="in_network")


def test_missing_extra_is_one_clear_error(monkeypatch):
    from importlib import metadata

    from costmodel.measured import corpus

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    corpus.corpus_info.cache_clear()
    monkeypatch.setattr(metadata, "version", missing)  # corpus imports it where it is needed
    with pytest.raises(corpus.MeasuredDataError, match=r"costmodel\[measured\]"):
        corpus.corpus_info()
    corpus.corpus_info.cache_clear()


def test_wave_factor_hand():
    from costmodel.measured.kernels import wave_factor

    # 132 tiles on 132 SMs: one full wave; 133: two waves, 264/133
    assert wave_factor(np.array([132.0, 133.0]), 132).tolist() == [1.0, 264 / 133]


def test_fit_recovers_known_parameters():
    """Synthetic latencies from known physical parameters: the log fit finds them again."""
    pytest.importorskip("scipy")
    from costmodel.measured.efficiency import Features, fit

    rng = np.random.default_rng(1)
    n = 400
    comp = 10 ** rng.uniform(-6, -2, n)
    mem = 10 ** rng.uniform(-6, -2, n)
    z = np.zeros(n)
    x = Features(comp, mem, np.ones(n), np.zeros(n, bool), z, z, np.ones(n), z, z, z, z)
    t0, tu, ec, em, r = 4e-6, 1e-7, 0.8, 0.9, 3.0
    hi, lo = np.maximum(comp / ec, mem / em), np.minimum(comp / ec, mem / em)
    t = t0 + tu + hi * (1 + (lo / hi) ** r) ** (1 / r)
    f = fit("gemm", "synthetic", x, t * np.exp(rng.normal(0, 0.01, n)))
    assert f.params["e_c"] == pytest.approx(ec, rel=0.03)
    assert f.params["e_m"] == pytest.approx(em, rel=0.03)
    assert f.params["r"] == pytest.approx(r, rel=0.15)
    assert all(np.isfinite(v) and v >= 0 for v in f.stderr.values())


def test_collective_fit_recovers_one_shot_and_ring():
    """Synthetic all-reduce latencies from the two-branch model: the fit finds both branches again."""
    pytest.importorskip("scipy")
    from costmodel.measured.efficiency import Features, fit

    p = np.repeat([2.0, 4.0, 8.0], 24)
    n = np.tile(2.0 ** np.arange(8, 32), 3)  # elements, 256 .. 2^31
    beta = 450e9
    ring = 2 * (p - 1) / p * n * 2 / beta  # bf16, bus-bandwidth convention
    z = np.zeros(len(p))
    x = Features(z, z, np.ones(len(p)), np.zeros(len(p), bool), z, p - 1, np.ones(len(p)), z, ring, z, z)
    # one-shot: 3 us, no hop cost, (p-1) n b read at 40 % of the link; ring: 20 us + 2 us/hop at 80 %
    one = 3e-6 + (p - 1) * n * 2 / (0.4 * beta)
    big = 20e-6 + 2e-6 * (p - 1) + ring / 0.8
    f = fit("all_reduce", "synthetic", x, np.minimum(one, big))
    assert f.params["e_l"] == pytest.approx(0.4, rel=0.02)
    assert f.params["e_big"] == pytest.approx(0.8, rel=0.02)
    assert f.params["t0_s"] == pytest.approx(3e-6, rel=0.05)
    assert f.params["t_hop_big_s"] == pytest.approx(2e-6, rel=0.1)
    assert f.rms_log < 1e-3


# ---- the corpus (needs the [measured] extra) ----


@pytest.fixture(scope="module")
def corpus():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel import measured

    return measured


def test_corpus_records_its_version(corpus):
    info = corpus.corpus_info()
    assert info.package == "aiconfigurator-core" and info.version.count(".") >= 1
    df = corpus.load("gemm", devices=["h100-sxm"], frameworks=["trtllm"])
    assert {"m", "n", "k", "dtype", "latency_s", "version"} <= set(df.columns)
    assert (df["latency_s"] > 0).all() and df["latency_s"].max() < 1.0  # ms in the files, seconds here
    with pytest.raises(corpus.MeasuredDataError, match="no measured data"):
        corpus.load("gemm", devices=["tpu-v5e"])
    with pytest.raises(corpus.MeasuredDataError, match="allowed"):
        corpus.load("conv2d")


def test_gemm_bound_by_hand(corpus):
    """One H100 bf16 row: 2mnk / 989.4e12 against (mk + kn + mn) * 2 / 3.35e12."""
    import pandas as pd

    from costmodel.hardware import get_device
    from costmodel.measured import lower_bounds

    df = pd.DataFrame({"m": [8192, 16], "n": [8192, 4096], "k": [8192, 4096], "dtype": ["bfloat16"] * 2})
    b = lower_bounds("gemm", df, get_device("h100-sxm"))
    assert b.seconds[0] == pytest.approx(2 * 8192**3 / 989.4e12)
    # DRAM term of the small one: (mk + kn + mn) * 2 bytes at 3.35 TB/s ...
    assert b.terms.memory_s[1] == pytest.approx((16 * 4096 + 4096 * 4096 + 16 * 4096) * 2 / 3.35e12)
    # ... but its 33.7 MB fit the 50 MiB L2, whose bandwidth no source gives: compute only
    assert b.l2.tolist() == [False, True]
    assert b.seconds[1] == pytest.approx(2 * 16 * 4096 * 4096 / 989.4e12)


@pytest.mark.slow
def test_no_unexplained_bound_violations(corpus):
    from costmodel.measured.validity import NO_L2_SOURCE, OVER_PEAK_BW

    rows = [corpus.violations(f, d) for f in corpus.FAMILIES for d in corpus.systems_with_data(f)]
    assert {v.device for v in rows} >= {"a100-sxm-80gb", "h100-sxm", "b200", "gb200", "l40s", "rtx-pro-6000"}
    assert sum(v.rows for v in rows) > 5_500_000  # 5,705,477 rows in aiconfigurator-core 0.12.0
    assert sum(v.unexplained for v in rows) == 0
    # the L2 model removes every GEMM violation on the HBM devices with a sourced L2 ...
    for v in rows:
        if v.family == "gemm" and v.device not in ("b300", "l40s", "rtx-pro-6000"):
            assert v.below == 0, v
    # ... what is left is the devices without a sourced L2 capacity (B300, L40S) and runs that
    # imply more than the memory's peak (RTX PRO 6000's GDDR7, A100's old TRT-LLM decode rows)
    left = {r for v in rows for r in v.reasons}
    assert left <= {NO_L2_SOURCE, OVER_PEAK_BW}
    sourced = sum(v.reasons.get(OVER_PEAK_BW, 0) for v in rows)
    assert sourced <= 5000  # reached 4,638 of 5.7 M rows
    assert sum(v.below_dram_only for v in rows) >= sum(v.below for v in rows)


@pytest.mark.slow
def test_heldout_errors_beat_the_bound(corpus):
    from costmodel.measured.heldout import evaluate

    fams = ("gemm", "context_attention", "generation_attention", "all_reduce")
    rows = {(r.family, r.split): r for r in evaluate(fams, ["h100-sxm"], ("shapes",))}
    # MAPE on 20 % of shapes held out; the targets: GEMM 10, attention 15, all-reduce 15
    calibrated = {  # the physical model alone; reached 12.8, 15.7, 20.8, 10.4
        "gemm": 14.0,
        "context_attention": 17.5,
        "generation_attention": 23.0,
        "all_reduce": 12.5,
    }
    corrected = {  # with residuals at the nearest training shapes; reached 6.3, 7.1, 12.2, 10.0
        "gemm": 8.0,
        "context_attention": 9.0,
        "generation_attention": 14.0,
        "all_reduce": 12.5,
    }
    for fam in fams:
        r = rows[(fam, "shapes")]
        assert r.calibrated["mape"] <= calibrated[fam], r
        assert r.corrected["mape"] <= corrected[fam], r
        assert r.corrected["mape"] <= r.calibrated["mape"] < r.bound["mape"]


@pytest.mark.slow
def test_unseen_device_from_its_datasheet(corpus):
    from costmodel.measured.heldout import evaluate

    (r,) = evaluate(("gemm",), ["b200"], ("device",))
    assert r.calibrated["mape"] <= 19.0  # reached 16.8 with no B200 row in the fit (target 20)
    assert r.calibrated["mape"] < r.aic_empirical["mape"] < r.bound["mape"]
    # GB200's and B300's residuals at the same shapes (the sm_100f family): reached 13.2
    assert r.corrected["mape"] <= 15.0


def test_kernel_binary_families(corpus):
    """From the wheel's sm_version: 9.0 alone, 10.0 and 10.3 one family, Ada apart from Ampere."""
    from costmodel.measured.heldout import arch_family

    assert arch_family("h100-sxm") == arch_family("h200-sxm") == 90
    assert arch_family("b200") == arch_family("b300") == arch_family("gb200") == 100
    assert len({arch_family("a100-sxm-80gb"), arch_family("l40s"), arch_family("rtx-pro-6000")}) == 3
    with pytest.raises(corpus.MeasuredDataError, match="no measurements; measured: a100"):
        arch_family("mi300x")


@pytest.mark.slow
def test_model_level_prediction_against_measured_kernels(corpus):
    from graphs.serving.pricing.predict import predict_step

    d = predict_step("llama-3.1-8b", "h100-sxm", "decode", batch=64, ctx=4096, measured=True)
    p = predict_step("llama-3.1-8b", "h100-sxm", "prefill", batch=1, seq=4096, measured=True)
    assert d.bound_s < d.measured_s and p.bound_s < p.measured_s
    assert abs(d.error) <= 0.05  # reached +1.0 % (README table)
    assert abs(p.error) <= 0.05  # reached +1.1 %
    # the grey-box reads the corpus rows the measured composition interpolates (no held-out
    # test: that is the held-out table); it stays as close. Reached -0.5 % and +3.4 %
    for s in (d, p):
        assert abs(s.corrected_error) <= 0.05


@pytest.mark.slow
def test_calibrated_spec_is_a_hardware_file(corpus, tmp_path):
    from costmodel.hardware import get_device, load_hardware_file

    out = tmp_path / "h100-vllm.json"
    subprocess.run(
        [sys.executable, "-m", "costmodel", "calibrate", "gpu", "--device", "h100", "--out", str(out)],
        check=True,
    )
    (hw,) = load_hardware_file(out, register=False)
    base = get_device("h100-sxm")
    assert 0.3 < float(hw.peak("tensor", "bf16") / base.peak("tensor", "bf16")) <= 1.0
    assert 0.3 < float(hw.bandwidth("dram") / base.bandwidth("dram")) <= 1.0
    assert "aiconfigurator-core" in hw.notes


@pytest.mark.slow
def test_cli_predict_json(corpus):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "costmodel",
            "decode",
            "llama-3.1-8b",
            "--batch",
            "8",
            "--predict",
            "vllm",
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    doc = json.loads(out)
    assert doc["prediction"]["predicted_s"] > doc["prediction"]["bound_s"]


@pytest.mark.slow
def test_prediction_nodes_add_up(corpus):
    from graphs.serving.pricing.predict import predict_step

    p = predict_step("llama-3.1-8b", "h100-sxm", "decode", batch=8, ctx=1024)
    assert sum(n["predicted_s"] for n in p.nodes.values()) == pytest.approx(p.predicted_s)
    assert sum(n["corrected_s"] for n in p.nodes.values()) == pytest.approx(p.corrected_s)
    assert sum(n["bound_s"] for n in p.nodes.values()) == pytest.approx(p.bound_s)
    fams = {n["family"] for n in p.nodes.values()}
    assert {"gemm", "generation_attention", None} <= fams
    # a calibrated kernel is slower than its bound (10 % slack for the fit at its edges)
    assert all(n["predicted_s"] >= 0.9 * n["bound_s"] for n in p.nodes.values())


def test_moe_bound_by_hand(corpus):
    """One rank, T=1 token to k=2 of 8 experts (h 4096, I 14336, bf16): the bound reads the two
    experts' up and down matrices (the non-gated minimum) and moves the token through them."""
    import pandas as pd

    from costmodel.hardware import get_device
    from costmodel.measured import lower_bounds

    row = {"tokens": 1, "hidden": 4096, "inter": 14336, "topk": 2, "experts": 8, "tp": 1, "ep": 1}
    b = lower_bounds("moe", pd.DataFrame([{**row, "dtype": "bfloat16"}]), get_device("h100-sxm"))
    weights = 2 * (4096 * 14336 + 14336 * 4096) * 2  # two experts, two matrices, 2 bytes
    acts = 2 * (2 * 4096 + 2 * 14336) * 2  # 2 rows in and out of each matrix, 2 bytes
    assert b.seconds[0] == pytest.approx((weights + acts) / 3.35e12)


def test_mla_generation_bound_by_hand(corpus):
    """Absorbed MLA decode, one sequence, 128 heads over 4,096 cached tokens (bf16): the 576-wide
    latent cache is read once for all heads (values are its first 512), plus Q and O."""
    import pandas as pd

    from costmodel.hardware import get_device
    from costmodel.measured import lower_bounds

    row = {
        "batch": 1,
        "isl": 1,
        "heads": 128,
        "tp": 1,
        "step": 4095,
        "attn_dtype": "bfloat16",
        "kv_dtype": "bfloat16",
    }
    b = lower_bounds("generation_mla", pd.DataFrame([row]), get_device("h100-sxm"))
    bytes_ = 4096 * 576 * 2 + 128 * 576 * 2 + 128 * 512 * 2
    assert b.terms.memory_s[0] == pytest.approx(bytes_ / 3.35e12)
    # 5 MB fit the 50 MiB L2 (bandwidth unsourced): the bound is the matmuls, 2 (576 + 512) per pair
    assert b.l2[0]
    assert b.seconds[0] == pytest.approx(128 * 4096 * 2 * (576 + 512) / 989.4e12)


def test_bad_requests_name_what_is_allowed():
    from costmodel.measured import MeasuredDataError
    from costmodel.measured.heldout import evaluate
    from costmodel.measured.report import build_report, params_markdown

    with pytest.raises(MeasuredDataError, match=r"family 'conv2d' not measured; allowed: gemm"):
        evaluate(("conv2d",))
    with pytest.raises(
        MeasuredDataError, match=r"split 'random' not known; allowed: shapes, device, framework"
    ):
        build_report(("gemm",), splits=("random",))
    with pytest.raises(
        MeasuredDataError, match=r"framework 'tgi' not measured; allowed: vllm, sglang, trtllm"
    ):
        params_markdown("h100-sxm", "tgi")
