"""Every dtype served, never a silent bf16; and what a prediction rests on (issue 25, items 2 and 3).

The dtype and config tests run everywhere; the prediction tests read the measured corpus
(the ``[measured]`` extra), load it once for the module and are marked slow.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.dtypes import get_dtype, group_quantised
from costmodel.errors import CostModelError
from graphs.cli import main
from models.config import ModelConfigError
from models.hf import config_from_hf_dict


def _hf(name: str) -> dict:
    return json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())


def _quant(name: str, q: dict, **extra) -> object:
    return config_from_hf_dict({**_hf(name), **extra, "quantization_config": q}, name)


# ------------------------------------------------------------------ dtypes with their scales


def test_group_quantised_bits_by_hand():
    # one FP16 scale per 128 weights: 4 + 16/128 = 4.125 bits
    assert get_dtype("int4_g128").bits == sympy.Rational(33, 8)
    # ... and a 4-bit zero point per group: 4 + (16 + 4)/128 = 4.15625
    assert group_quantised(4, 128, asymmetric=True).bits == sympy.Rational(133, 32)
    # 8-bit, groups of 64: 8 + 16/64 = 8.25; 3-bit, groups of 128: 3 + 16/128; 4-bit per channel: 4
    assert get_dtype("int8_g64").bits == sympy.Rational(33, 4)
    assert get_dtype("int3_g128").bits == sympy.Rational(25, 8)
    assert group_quantised(4, -1).bits == 4
    # QLoRA's NF4: FP32 absmax per 64 = 4.5 bits; double-quantised 4 + 8/64 + 32/(64*256) = 4.127
    assert get_dtype("nf4").bits == sympy.Rational(9, 2)
    assert float(get_dtype("nf4_dq").bits) == pytest.approx(4.127, abs=5e-4)


@pytest.mark.parametrize("bad", ["int9_g128", "int4_g0", "int4_asym", "int4_g128_zp", "int3"])
def test_malformed_group_dtypes_are_refused(bad):
    with pytest.raises(CostModelError, match="unknown dtype"):
        get_dtype(bad)


# ------------------------------------------------------------------ torch_dtype


@pytest.mark.parametrize(
    "torch_dtype,want",
    [("float16", "fp16"), ("float64", "fp64"), ("float8_e4m3fn", "fp8_e4m3"), ("torch.float32", "fp32")],
)
def test_torch_dtype_maps_to_its_format(torch_dtype, want):
    cfg = config_from_hf_dict({**_hf("llama-3.1-8b"), "torch_dtype": torch_dtype}, "m")
    assert cfg.dtype == want


def test_float64_activations_stay_float64():
    cfg = config_from_hf_dict({**_hf("llama-3.1-8b"), "torch_dtype": "float64"}, "m")
    assert cfg.activation_dtype == "fp64"


def test_transformers_dtype_field_is_read():
    """transformers >= 4.56 writes ``dtype`` where older versions wrote ``torch_dtype``."""
    d = _hf("llama-3.1-8b")
    d.pop("torch_dtype")
    assert config_from_hf_dict({**d, "dtype": "float16"}, "m").dtype == "fp16"


@pytest.mark.parametrize("bad", ["int8", "float128", "auto", "complex64", 16])
def test_unknown_torch_dtype_is_refused_not_bf16(bad):
    with pytest.raises(ModelConfigError, match=r"torch_dtype .* --weight-dtype"):
        config_from_hf_dict({**_hf("llama-3.1-8b"), "torch_dtype": bad}, "m")


# ------------------------------------------------------------------ quantization_config


def test_gptq_4bit_decode_weight_read_by_hand():
    """Llama-3.1-8B, GPTQ 4-bit, group 128, symmetric, lm_head unquantised (GPTQ's default).

    Parameters (config.json): embedding = lm_head = 128256 * 4096 = 525,336,576; all 8,030,261,248,
    so the decoder layers plus the final norm hold 8,030,261,248 - 2 * 525,336,576 = 6,979,588,096.
    A decode step reads every weight but the embedding table, of which it gathers the batch's
    rows (batch 1: one row of 4096 bf16 values, 8,192 B; the embedding stays bf16):
      bf16:  (6,979,588,096 + 525,336,576) * 2 + 8,192                = 15,009,857,536 B
      GPTQ:  6,979,588,096 * (4 + 16/128)/8 + 525,336,576 * 2 + 8,192 =  3,598,850,112 + 1,050,681,344
                                                                      =  4,649,531,456 B   (0.310)
      GPTQ with ``lm_head: true``: 7,504,924,672 * 4.125/8 + 8,192    =  3,869,734,976 B   (0.258)
    On H100 SXM (3.35 TB/s) the weight reads are 4.4806 and 1.3879 ms.
    """
    from graphs.serving.analysis.phases import decode_report

    base = config_from_hf_dict(_hf("llama-3.1-8b"), "l8")
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}
    q = _quant("llama-3.1-8b", gptq)
    qh = _quant("llama-3.1-8b", {**gptq, "lm_head": True})
    assert (q.dtype, q.lm_head_weight_dtype, q.embedding_weight_dtype) == ("int4_g128", "bf16", "bf16")
    assert qh.lm_head_weight_dtype == "int4_g128"
    bw = 3.35e12
    times = [decode_report(c, "h100-sxm", batch=1, ctx=1024).weight_read_s for c in (base, q, qh)]
    assert times[0] == pytest.approx(15_009_857_536 / bw, rel=1e-12)
    assert times[1] == pytest.approx(4_649_531_456 / bw, rel=1e-12)
    assert times[2] == pytest.approx(3_869_734_976 / bw, rel=1e-12)
    assert times[1] / times[0] == pytest.approx(0.310, abs=1e-3)  # about a quarter, plus a bf16 head


def test_gptq_asymmetric_and_awq_carry_zero_points():
    q = _quant("llama-3.1-8b", {"quant_method": "gptq", "bits": 4, "group_size": 64, "sym": False})
    assert q.dtype == "int4_g64_asym"  # 4 + 20/64 = 4.3125 bits
    a = _quant("llama-3.1-8b", {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    assert a.dtype == "int4_g128_asym" and a.matmul_dtype is None  # W4A16: the matmul runs in bf16
    a2 = _quant("llama-3.1-8b", {"quant_method": "awq", "w_bit": 4, "q_group_size": 32, "version": "gemm"})
    assert a2.dtype == "int4_g32_asym"


def test_fp8_is_w8a8():
    q = _quant("llama-3.1-8b", {"quant_method": "fp8", "activation_scheme": "dynamic"})
    assert (q.dtype, q.matmul_dtype, q.activation_dtype) == ("fp8_e4m3", "fp8_e4m3", "bf16")


def _lm_head(cfg):
    from graphs import build_model

    g = build_model(cfg, "decode", batch=1, ctx=16)
    return g.nodes["head.lm_head"]["params"]


def test_compressed_tensors_fp8_keeps_its_ignored_head_in_bf16():
    q = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True},
                "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True},
            }
        },
        "ignore": ["lm_head"],
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"},
    }
    cfg = _quant("llama-3.1-8b", q)
    assert (cfg.dtype, cfg.matmul_dtype, cfg.cache_dtype) == ("fp8_e4m3", "fp8_e4m3", "fp8_e4m3")
    head = _lm_head(cfg)
    # the unquantised head runs a bf16 GEMM, the other linears FP8
    assert (head["dtype"], head["w_dtype"]) == ("bf16", "bf16")


def test_compressed_tensors_w4a16_and_nvfp4():
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    cfg = _quant(
        "llama-3.1-8b", {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": w4}}}
    )
    assert cfg.dtype == "int4_g128" and cfg.matmul_dtype is None
    fp4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}
    groups = {"g": {"weights": fp4, "input_activations": fp4}}
    cfg = _quant("llama-3.1-8b", {"quant_method": "compressed-tensors", "config_groups": groups})
    assert (cfg.dtype, cfg.matmul_dtype) == ("nvfp4", "nvfp4")


def test_modelopt_and_bitsandbytes():
    cfg = _quant(
        "llama-3.1-8b", {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}
    )
    assert (cfg.dtype, cfg.matmul_dtype, cfg.kv_dtype) == ("nvfp4", "nvfp4", "fp8_e4m3")
    nf4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True}
    assert _quant("llama-3.1-8b", nf4).dtype == "nf4_dq"
    i8 = _quant("llama-3.1-8b", {"quant_method": "bitsandbytes", "load_in_8bit": True})
    assert (i8.dtype, i8.matmul_dtype) == ("int8", "int8")


def test_gpt_oss_mxfp4_quantises_only_its_experts():
    from models.catalog import get_model
    from models.params import param_bytes

    cfg = get_model("gpt-oss-120b")
    assert (cfg.dtype, cfg.expert_weight_dtype, cfg.lm_head_weight_dtype) == ("bf16", "mxfp4", "bf16")
    # the experts at 4.25 bits, the rest (embedding and head too) at 16: the published
    # checkpoint is 60.8 GiB (openai/gpt-oss-120b model card)
    assert float(param_bytes(cfg)) == pytest.approx(60.8 * 2**30, rel=0.005)


def test_gemma3_keeps_a_top_level_quantization_config():
    d = _hf("gemma-3-27b")
    q = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    assert config_from_hf_dict({**d, "quantization_config": q}, "g").dtype == "int4_g128"


@pytest.mark.parametrize(
    "q,match",
    [
        ({"quant_method": "hqq"}, "quant_method 'hqq' is not read.*--weight-dtype"),
        ({"quant_method": "gptq", "bits": 4, "modules_to_not_convert": ["mlp.down_proj"]}, "partial"),
        ({"quant_method": "gptq", "bits": 9}, "bits 9 is not packed by GPTQ; allowed: 2, 3, 4, 8"),
        ({"quant_method": "gptq"}, "missing required field 'bits'"),
        ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "quant_algo"),
        ({"quant_method": "bitsandbytes"}, "neither load_in_4bit"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 6, "type": "float"}}},
            },
            "6-bit",
        ),
        ("gptq", "must be a JSON object"),
    ],
)
def test_unknown_quantisation_is_refused_with_a_pointer(q, match):
    with pytest.raises(ModelConfigError, match=match):
        _quant("llama-3.1-8b", q)


def test_mixed_compressed_tensors_schemes_are_refused():
    fp8 = {"num_bits": 8, "type": "float"}
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}
    groups = {"a": {"weights": fp8}, "b": {"weights": w4}}
    with pytest.raises(ModelConfigError, match=r"mix schemes.*--weight-dtype"):
        _quant("llama-3.1-8b", {"quant_method": "compressed-tensors", "config_groups": groups})


# ------------------------------------------------------------------ dtype flags on serving commands


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "m"],
        ["search", "m"],
        ["serve", "disagg", "m"],
        ["serve", "specdec", "t", "d"],
        ["serve", "split", "m"],
        ["serve", "sram", "m"],
        ["serve", "plans", "m"],
        ["decode", "m"],
        ["prefill", "m"],
        ["model", "analyze", "m"],
    ],
)
def test_every_serving_command_takes_the_dtype_flags(argv):
    from graphs.cli.main import build_parser

    a = build_parser().parse_args(
        [*argv, "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--matmul-dtype", "fp8"]
    )
    assert a.matmul_dtype == "fp8"
    assert (getattr(a, "weight_dtype", None) or a.weight_dtypes) == "fp8"


def test_simulate_with_fp8_weights_and_kv(capsys):
    argv = ["simulate", "llama-3.1-8b", "--device", "h100", "--rate", "20", "--requests", "200", "--quiet"]
    assert main([*argv, "--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert main([*argv, "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--json"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    # half the weight and KV bytes per decode step: a shorter TPOT at the same arrivals
    assert fp8["tpot"]["mean_s"] < 0.75 * bf16["tpot"]["mean_s"]


# ------------------------------------------------------------------ coverage, by hand


def test_coverage_shares_and_warnings_by_hand():
    from graphs.serving.pricing.kernel_sources import WARN_SHARE, coverage_of, substitute

    nodes = {
        "a": {"predicted_s": 6.0, "source": "measured", "basis": ""},
        "b": {"predicted_s": 3.0, "source": "neighbour", "basis": "gemm bfloat16 kernels for float16"},
        "c": {"predicted_s": 0.5, "source": "bound", "basis": "norms"},
        "d": {"predicted_s": 0.5, "source": "bound", "basis": "norms"},
    }
    cov = coverage_of(nodes, "predicted_s")
    # 6 + 3 + 1 = 10 s: 60 % measured, 30 % neighbour, 10 % bound (not above 10 %: no warning)
    assert (cov.share("measured"), cov.share("neighbour"), cov.share("bound")) == (0.6, 0.3, 0.1)
    assert cov.bounds == {"norms": 1.0} and WARN_SHARE == 0.10
    assert cov.flagged == ("neighbour",)
    assert substitute("float16/float16") == "bfloat16/bfloat16" and substitute("fp8") is None


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["measured", "neighbour", "bound"]), st.floats(0, 1e-2), st.sampled_from("xyz")
        ),
        min_size=1,
        max_size=12,
    )
)
def test_coverage_partitions_the_prediction(parts):
    """The three parts add up to the nodes' total, the reasons to their part, the shares to one."""
    from graphs.serving.pricing.kernel_sources import coverage_of

    nodes = {str(i): {"predicted_s": t, "source": src, "basis": why} for i, (src, t, why) in enumerate(parts)}
    cov = coverage_of(nodes, "predicted_s")
    total = sum(t for _, t, _ in parts)
    assert cov.total_s == pytest.approx(total, abs=1e-15)
    assert sum(cov.neighbours.values()) == pytest.approx(cov.neighbour_s, abs=1e-15)
    assert sum(cov.bounds.values()) == pytest.approx(cov.bound_s, abs=1e-15)
    if total > 0:
        assert sum(cov.share(p) for p in ("measured", "neighbour", "bound")) == pytest.approx(1.0)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 8), st.integers(1, 4096), st.booleans())
def test_group_bits_never_below_the_element_and_shrink_with_the_group(bits, group, asym):
    d = group_quantised(bits, group, asymmetric=asym)
    assert bits < d.bits <= bits + sympy.Rational(16 + bits, group)
    assert group_quantised(bits, 2 * group, asymmetric=asym).bits < d.bits


# ------------------------------------------------------------------ predictions on the measured corpus


@pytest.fixture(scope="module")
def corpus():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predict import predict_step

    return predict_step


@pytest.mark.slow
def test_fp16_model_priced_by_named_bf16_kernels(corpus, capsys):
    """Llama-2-7B says float16; the corpus measures bf16 only: its kernels price it, and say so."""
    p = corpus("llama-2-7b", "h100-sxm", "decode", batch=64, ctx=700)
    assert p.predicted_s > 1.2 * p.bound_s  # was 1.00x: every op unmeasured
    assert p.calibrated  # h100's own rows, of the neighbouring dtype
    cov = p.coverage
    assert cov.total_s == pytest.approx(p.predicted_s)
    assert cov.measured_s == 0 and cov.share("neighbour") > 0.9 and "neighbour" in cov.flagged
    assert any("bfloat16 kernels for float16" in why for why in cov.neighbours)
    assert main(["decode", "llama-2-7b", "--batch", "64", "--ctx", "700", "--predict", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "gemm bfloat16 kernels for float16" in out and "warning:" in out


@pytest.mark.slow
def test_bf16_on_a_measured_device_rests_on_its_measurements(corpus):
    p = corpus("llama-3.1-8b", "h100-sxm", "decode", batch=64, ctx=700)
    assert p.calibrated and p.coverage.share("measured") > 0.95 and p.coverage.flagged == ()
    assert sum(p.coverage.bounds.values()) == pytest.approx(p.coverage.bound_s)
    assert p.corrected_coverage.total_s == pytest.approx(p.corrected_s)


@pytest.mark.slow
def test_unmeasured_device_is_never_calibrated(corpus, capsys):
    p = corpus("llama-3.1-8b", "mi300x", "decode", batch=64, ctx=700)
    assert not p.calibrated and p.coverage.measured_s == 0
    assert all("other devices' fits" in why for why in p.coverage.neighbours)
    assert (
        main(
            [
                "decode",
                "llama-3.1-8b",
                "--batch",
                "64",
                "--ctx",
                "700",
                "--device",
                "mi300x",
                "--predict",
                "vllm",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "not calibrated" in out and "(calibrated" not in out


@pytest.mark.slow
def test_gptq_gemms_rest_on_the_bound_and_say_so(corpus):
    cfg = _quant("llama-3.1-8b", {"quant_method": "gptq", "bits": 4, "group_size": 128})
    p = corpus(cfg, "h100-sxm", "decode", batch=8, ctx=1024)
    assert "bound" in p.coverage.flagged
    assert any("bf16 x int4_g128 weights: not measured" in why for why in p.coverage.bounds)


def test_a_weight_dtype_replaces_the_routed_experts_format_too(capsys):
    """``--weight-dtype bf16`` on gpt-oss-120b kept its MXFP4 experts (the ledger's weights 60.77
    GiB, as without the flag) while search labelled the plan bf16. Every weight is now in the
    given format: OpenAI's model card counts 116.83 B parameters, 2 bytes each = 233.7 GB; the
    replacement is said once, in the text and in --json's notes."""
    assert main(["--json", "ledger", "gpt-oss-120b", "--device", "h200", "--weight-dtype", "bf16"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["terms"]["weights"] / 2 == pytest.approx(116.83e9, abs=0.005e9)
    assert doc["notes"] == [
        "note: --weight-dtype: weights in bf16: the routed experts too (the checkpoint's mxfp4)"
    ]
    assert main(["search", "gpt-oss-120b", "--device", "h200", "--weight-dtypes", "bf16", "--tp", "2",
                 "--batches", "1", "--ctxs", "4096", "--quiet", "--json"]) == 0  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert "weights in bf16: the routed experts too (the checkpoint's mxfp4)" in json.dumps(doc)
    # sweep's list replaces them too: the same memory as --weight-dtype's (a review found 65 GB)
    argv = ["sweep", "gpt-oss-120b", "--device", "h200", "--batches", "1", "--ctxs", "1024", "--json"]
    sweeps = []
    for flag in ("--weight-dtypes", "--weight-dtype"):
        assert main([*argv, flag, "bf16"]) == 0
        sweeps.append(json.loads(capsys.readouterr().out)["points"][0]["memory_bytes"])
    assert sweeps[0] == sweeps[1] > 233.6e9  # 116.83 B x 2 B of weights, and a KV cache
    # without the flag the checkpoint's own formats stand: the MXFP4 experts' 60.77 GiB
    assert main(["--json", "ledger", "gpt-oss-120b", "--device", "h200"]) == 0
    assert json.loads(capsys.readouterr().out)["terms"]["weights"] / 2**30 == pytest.approx(60.77, abs=0.005)
