"""Attention an engine runs on a kernel the corpus does not time (graphs/serving/engines/attention_kernels.py):
vLLM 0.11.0's ``CudaPlatform.get_attn_backend_cls`` (read in the 0.11.0 wheel) runs its Triton
kernel for attention with learned sinks on every SM 8.0+ GPU but SM 9.0 and (with FlashInfer)
SM 10.0 exactly; the corpus's vLLM rows at gpt-oss's shape are another backend's. The coverage
stops calling such attention measured, and its prefill attention takes the two kernels' measured
ratio (costmodel/measured/backend_ratio.py)."""

from __future__ import annotations

import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs.serving.engines import get_engine
from graphs.serving.engines.attention_kernels import (
    VLLM_SINKS_TRITON,
    VLLM_SINKS_TRITON_010,
    VLLM_SINKS_TRITON_012,
    AttentionKernelRule,
    attention_kernel_for,
)
from graphs.serving.pricing.predictor import Predictor


@pytest.mark.parametrize(
    "device, triton",
    [
        ("a100-sxm-80gb", True),  # SM 8.0
        ("l40s", True),  # SM 8.9
        ("rtx-4090", True),
        ("rtx-pro-6000", True),  # SM 12.0: not 10.0 exactly
        ("rtx-5090", True),
        ("b300", True),  # SM 10.3: is_device_capability(100) tests equality
        ("gb300", True),
        ("h100", False),  # SM 9.0: FlashAttention 3 with sinks
        ("h200", False),
        ("b200", False),  # SM 10.0: FlashInfer
        ("gb200", False),
    ],
)
def test_the_rule_follows_vllm_0_11_s_backend_choice(device, triton):
    hw = get_device(device)
    assert VLLM_SINKS_TRITON.applies(True, hw.architecture, hw.name) is triton
    assert not VLLM_SINKS_TRITON.applies(False, hw.architecture, hw.name)  # no sinks: FlashAttention


def test_profiles_that_carry_it():
    assert get_engine("vllm@0.11").attention_kernels == (VLLM_SINKS_TRITON,)
    assert get_engine("vllm@0.10").attention_kernels == (VLLM_SINKS_TRITON_010,)
    assert get_engine("vllm@0.12").attention_kernels == (VLLM_SINKS_TRITON_012,)
    assert VLLM_SINKS_TRITON_010.source.startswith("ASSUMED") and VLLM_SINKS_TRITON_012.source.startswith(
        "ASSUMED"
    )
    for ref in ("vllm@0.20", "vllm@1"):  # their backend choice not read: no rule
        assert get_engine(ref).attention_kernels == ()
    for ref in ("vllm@0.6", "sglang", "trtllm"):
        assert get_engine(ref).attention_kernels == ()
    doc = get_engine("vllm@0.11").to_dict()["attention_kernels"]
    assert doc[0]["backend"] == "TRITON_ATTN" and "has_sink" in doc[0]["source"]
    a100 = get_device("a100-sxm-80gb")
    assert (
        attention_kernel_for(get_engine("vllm@0.11").attention_kernels, True, a100.architecture) is not None
    )


def test_bad_rules_and_predictors_are_refused():
    with pytest.raises(CostModelError, match="backend"):
        AttentionKernelRule("TRITON ATTN", ("Ampere",), "a source")
    with pytest.raises(CostModelError, match="no source"):
        AttentionKernelRule("TRITON_ATTN", ("Ampere",), " ")
    with pytest.raises(CostModelError, match="architectures or devices"):
        AttentionKernelRule("TRITON_ATTN", (), "a source")
    with pytest.raises(CostModelError, match="tuple of names"):
        AttentionKernelRule("TRITON_ATTN", "Ampere", "a source")  # type: ignore[arg-type]
    with pytest.raises(CostModelError, match="attention_kernels"):
        Predictor("calibrated", "vllm", attention_kernels=("triton",))
    with pytest.raises(CostModelError, match="attention_kernels"):
        Predictor(attention_kernels=(VLLM_SINKS_TRITON,))  # the bound prices no measured kernel
    p = Predictor.of("vllm").for_engine(get_engine("vllm@0.11"))
    assert p.attention_kernels == (VLLM_SINKS_TRITON,)
    assert Predictor().for_engine(get_engine("vllm@0.11")).attention_kernels == ()


# ------------------------------------------------------------------ on the measured corpus


def _attention_basis(model: str, device: str, ref: str) -> list[str]:
    """The neighbour bases of a mixed iteration's kernels."""
    from graphs.serving.pricing.predictor import predicted_mixed_step

    pred = Predictor("calibrated", "vllm").for_engine(get_engine(ref))
    s = predicted_mixed_step(model, device, predictor=pred)
    s.reset()
    s.time_sums(16, 16 * 2000.0, [(512.0, 0.0)], [2000.0] * 16)
    cov = s.coverage()
    return list(cov.neighbours)


def test_gpt_oss_attention_on_an_a100_is_a_neighbour_that_names_the_kernel():
    """gpt-oss-20b (learned sinks) under vllm@0.11: on an A100 its attention is counted as a
    neighbour naming TRITON_ATTN, at the same price as before; on an H100 it stays measured; a
    model without sinks (Llama-3.1-8B) on the A100 stays measured."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predict import predict_step

    bases = _attention_basis("gpt-oss-20b", "a100-sxm-80gb", "vllm@0.11")
    said = [b for b in bases if "TRITON_ATTN" in b]
    assert said and "a100-sxm-80gb" in said[0] and "vllm's measured attention rows" in said[0]
    bases = _attention_basis("gpt-oss-20b", "h100", "vllm@0.11")
    assert not any("TRITON_ATTN" in b for b in bases)
    bases = _attention_basis("llama-3.1-8b", "a100-sxm-80gb", "vllm@0.11")
    assert not any("TRITON_ATTN" in b for b in bases)
    # the node-by-node step says the same, at the same seconds as without the rule
    rules = get_engine("vllm@0.11").attention_kernels
    with_rule = predict_step(
        "gpt-oss-20b", "a100-sxm-80gb", "decode", batch=8, ctx=2000, attention_kernels=rules
    )
    without = predict_step("gpt-oss-20b", "a100-sxm-80gb", "decode", batch=8, ctx=2000, attention_kernels=())
    att = [n for n, v in with_rule.nodes.items() if v.get("family") == "generation_attention"]
    assert att
    for n in att:
        assert with_rule.nodes[n]["source"] == "neighbour" and "TRITON_ATTN" in with_rule.nodes[n]["basis"]
        assert without.nodes[n]["source"] == "measured"
        assert with_rule.nodes[n]["predicted_s"] == without.nodes[n]["predicted_s"]


def test_sglang_context_mla_rows_of_the_absorbed_form_are_left_out():
    """aiconfigurator's SGLang collector times DeepSeek's absorbed form (576 / 512 dims) on FA3
    (Hopper); TensorRT-LLM's collector the decompressed MHA form (192 / 128) SGLang runs for a
    fresh prefill. Read straight from the H200 parquet files: at 16,384 tokens and 16 heads the
    SGLang row takes the FLOP ratio of the two forms, (576 + 512) / (192 + 128) = 3.4, times
    TensorRT-LLM's (within 10 %); on B200 (SGLang's trtllm_mla, MHA) about the same time. The
    family leaves the absorbed rows out, and SGLang's context MLA on H200 is priced from the
    device's MHA rows, a neighbour that says why; on B200 it stays SGLang's own."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import pandas as pd

    from costmodel.measured.corpus import ABSORBED_CONTEXT_MLA, corpus_info, load, table_files
    from graphs.serving.pricing.kernel_sources import kernel_source

    def row(system: str, fw: str) -> tuple[str, float]:
        (rel,) = [p for p in table_files("context_mla") if f"/{system}/mla/{fw}/" in f"/{p}"]
        df = pd.read_parquet(f"{corpus_info().root}/{rel}")
        sel = (df["isl"] == 16384) & (df["batch_size"] == 1) & (df["num_heads"] == 16)
        sel &= (df["mla_dtype"] == "bfloat16") & (df["kv_cache_dtype"] == "bfloat16")
        got = df[sel]
        return str(got["kernel_source"].iloc[0]), float(got["latency"].min())

    src, sg = row("h200_sxm", "sglang")
    _, trt = row("h200_sxm", "trtllm")
    assert ("sglang", src) in ABSORBED_CONTEXT_MLA
    assert sg / trt == pytest.approx((576 + 512) / (192 + 128), rel=0.1)
    src_b, sg_b = row("b200_sxm", "sglang")
    _, trt_b = row("b200_sxm", "trtllm")
    assert ("sglang", src_b) not in ABSORBED_CONTEXT_MLA and sg_b / trt_b == pytest.approx(1.0, abs=0.1)
    h200 = load("context_mla", devices=["h200-sxm"])
    assert "sglang" not in set(h200["framework"])
    got = kernel_source("h200-sxm", "sglang", "context_mla", "bfloat16/bfloat16")
    assert got.source == "neighbour" and "absorbed form, left out" in got.basis and "trtllm" in got.basis
    a100 = kernel_source("a100-sxm-80gb", "sglang", "context_mla", "bfloat16/bfloat16")
    assert "absorbed" not in a100.basis  # no SGLang rows there at all: nothing was left out
    assert kernel_source("b200", "sglang", "context_mla", "bfloat16/bfloat16").source == "measured"


def test_the_triton_over_fa2_ratio_is_read_from_rows_timing_both():
    """The corpus's only Triton attention rows (head dim 192, FP8 cache) beside FlashAttention 2's
    at the same shapes (BF16 cache), vLLM 0.24.0: read here straight from the parquet file, the
    median ratio at 1,024 and 16,384 tokens on the RTX PRO 6000, the device nearest an A100 in
    DRAM bandwidth (1.79 against 2.04 TB/s; the L40S's 0.86), and on the L40S itself for an L40S."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import pandas as pd

    from costmodel.cost import as_float
    from costmodel.measured.backend_ratio import RatioCurve, context_ratio
    from costmodel.measured.corpus import corpus_info

    def by_hand(system: str, isl: int) -> float:
        df = pd.read_parquet(
            f"{corpus_info().root}/data/{system}/attention/vllm/0.24.0/context_attention_perf.parquet"
        )
        df = df[(df["window_size"] == 0) & (df["isl"] == isl)]
        keys = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"]
        t = df[df["kernel_source"] == "vllm_triton_attn"][[*keys, "latency"]]
        f = df[df["kernel_source"] == "vllm_flash_attn_fa2"][[*keys, "latency"]]
        m = t.merge(f, on=keys)
        return float((m["latency_x"] / m["latency_y"]).median())

    a100 = get_device("a100-sxm-80gb")
    c = context_ratio("vllm", "TRITON_ATTN", as_float(a100.bandwidth()), a100.name)
    assert isinstance(c, RatioCurve) and c.device == "rtx-pro-6000" and c.head_dims == (192,)
    for isl in (1024, 16384):
        assert c.at(isl) == pytest.approx(by_hand("rtx_pro_6000_server", isl), rel=1e-12)
    assert 2.0 < c.at(1024) < c.at(16384) < 3.0
    l40s = context_ratio("vllm", "TRITON_ATTN", 1e15, "l40s")  # its own rows before the nearest
    assert l40s is not None and l40s.device == "l40s"
    assert l40s.at(4096) == pytest.approx(by_hand("l40s", 4096), rel=1e-12)
    assert context_ratio("sglang", "TRITON_ATTN", 2e12) is None  # no pair known


def test_gpt_oss_prefill_attention_on_an_a100_takes_the_ratio_decode_does_not():
    """gpt-oss-20b under vllm@0.11 on an A100 (TRITON_ATTN): each prefill attention node is the
    rule-free price times the measured ratio at its prompt length (the basis says it, ASSUMED);
    its decode attention keeps the rows' price; on an H100 (FlashAttention 3 with sinks) nothing
    is scaled."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.cost import as_float
    from costmodel.measured.backend_ratio import context_ratio
    from graphs.serving.pricing.predict import predict_step

    rules = get_engine("vllm@0.11").attention_kernels
    a100 = get_device("a100-sxm-80gb")
    k = context_ratio("vllm", "TRITON_ATTN", as_float(a100.bandwidth()), a100.name).at(4096)
    args = ("gpt-oss-20b", "a100-sxm-80gb", "prefill")
    on = predict_step(*args, batch=1, seq=4096, attention_kernels=rules)
    off = predict_step(*args, batch=1, seq=4096, attention_kernels=())
    att = [n for n, v in on.nodes.items() if v.get("family") == "context_attention"]
    assert att
    for n in att:
        assert on.nodes[n]["predicted_s"] == pytest.approx(off.nodes[n]["predicted_s"] * k, rel=1e-12)
        assert (
            f"x{k:.2f} at 4,096 tokens: TRITON_ATTN's time over vllm_flash_attn_fa2's" in on.nodes[n]["basis"]
        )
        assert "ASSUMED" in on.nodes[n]["basis"]
    h100 = predict_step("gpt-oss-20b", "h100", "prefill", batch=1, seq=4096, attention_kernels=rules)
    h100_off = predict_step("gpt-oss-20b", "h100", "prefill", batch=1, seq=4096, attention_kernels=())
    assert h100.corrected_s == h100_off.corrected_s
    # the simulator's tables scale the same prefill attention by the same ratio
    from graphs.serving.pricing.predictor import predicted_mixed_step

    pred = Predictor("calibrated", "vllm")
    tabled = [
        predicted_mixed_step("gpt-oss-20b", "a100-sxm-80gb", predictor=pred.for_engine(get_engine(ref)))
        for ref in ("vllm@0.11", "vllm@1")
    ]
    t11, t1 = (s.time_sums(0, 4096.0, [(4096.0, 0.0)], None) for s in tabled)
    assert t11 > t1  # the Triton prefill, slower


def test_the_measured_composition_takes_the_same_ratio():
    """predict_step(measured=True) sums the corpus's rows for the kernels that run: where the ratio
    prices Triton's prefill attention, the measured sum takes it too (review: 22.75 ms predicted
    against 10.70 measured on an L40S, two different kernels compared)."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.cost import as_float
    from costmodel.measured.backend_ratio import context_ratio
    from graphs.serving.pricing.predict import predict_step

    l40s = get_device("l40s")
    k = context_ratio("vllm", "TRITON_ATTN", as_float(l40s.bandwidth()), l40s.name).at(4096)
    args = ("gpt-oss-20b", "l40s", "prefill")
    on = predict_step(*args, batch=1, seq=4096, measured=True, attention_kernels=(VLLM_SINKS_TRITON,))
    off = predict_step(*args, batch=1, seq=4096, measured=True, attention_kernels=())
    a, b = on.by_family["context_attention"], off.by_family["context_attention"]
    assert a["measured_s"] == pytest.approx(b["measured_s"] * k, rel=1e-12)
    assert a["predicted_s"] == pytest.approx(b["predicted_s"] * k, rel=1e-9)  # no node at its bound
