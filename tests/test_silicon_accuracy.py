"""``benchmarks/silicon_accuracy.py``: NVIDIA's measured serving runs turned into replayable rows.

The measured values are pinned to the aiconfigurator-core 0.12.0 wheel's
``aiconfigurator_core/systems/silicon_sample.csv``, line 917, read by hand: SGLang 0.5.1.post1,
Qwen/Qwen3-32B on H100 SXM, TP2, ISL/OSL 1024/128, concurrency 16: silicon_ttft_ms
840.8064807531249, silicon_tpot_ms 16.538571871875 (the same file in ai-dynamo/aiconfigurator:
``src/aiconfigurator/systems/silicon_sample.csv``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("aiconfigurator_core")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import serving_accuracy as sa
import silicon_accuracy as si

RID = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp2_epnone_1"


@pytest.fixture(scope="module")
def sample() -> list[dict[str, str]]:
    return si.load_sample()


@pytest.fixture(scope="module")
def converted(sample: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    rows, _ = si.silicon_rows(sample)
    return {r["id"]: r for r in rows}


def test_row_pinned_to_the_sample(converted: dict[str, dict[str, str]]) -> None:
    ttft, tpot = converted[f"aicsil-{RID}-ttft"], converted[f"aicsil-{RID}-tpot"]
    assert float(ttft["value"]) == pytest.approx(0.8408064807531249, rel=1e-12)
    assert float(tpot["value"]) == pytest.approx(0.016538571871875, rel=1e-12)
    assert (ttft["metric"], tpot["metric"]) == ("ttft_mean_s", "tpot_mean_s")
    for r in (ttft, tpot):
        assert (r["engine"], r["model"], r["device"], r["tp"], r["isl"], r["osl"], r["concurrency"]) == (
            "sglang",
            "qwen3-32b",
            "h100-sxm",
            "2",
            "1024",
            "128",
            "16",
        )
        assert r["precision_weights"] == "" and r["precision_kv"] == "auto"


def test_a_wave_sends_every_request_at_once(converted: dict[str, dict[str, str]]) -> None:
    w = sa.row_workload(converted[f"aicsil-{RID}-tpot"])
    assert w.load == "batch" and len(w.requests) == 16
    assert {(r.arrival_s, r.prompt, r.output) for r in w.requests} == {(0.0, 1024, 128)}
    assert w.topology.tp == 2 and w.framework == "sglang"
    assert w.config.kv_dtype in (None, w.config.dtype)  # the checkpoint's KV dtype: bf16


def test_bound_replay_is_never_slower_than_the_engine(converted: dict[str, dict[str, str]]) -> None:
    """A roofline replay of the measured deployment: its TTFT and TPOT are at most the measured."""
    for metric in ("ttft", "tpot"):
        row = converted[f"aicsil-{RID}-{metric}"]
        assert 0 < sa.run_row(row, "bound") <= float(row["value"])


def test_rows_left_out_say_why(sample: list[dict[str, str]]) -> None:
    reasons = {si.eligible(r) for r in sample}
    assert None in reasons
    disagg = next(r for r in sample if r["mode"] == "disagg")
    assert "disaggregated" in (si.eligible(disagg) or "")
    moe = next(r for r in sample if r["model_path"] == "deepseek-ai/DeepSeek-R1" and r["mode"] == "agg")
    assert "does not map" in (si.eligible(moe) or "")
    rows, left = si.silicon_rows(sample)
    assert sum(left.values()) + len(rows) // 2 == len(sample)  # two rows (TTFT, TPOT) per run


def test_kv_dtype_and_fp8_scales_follow_the_checkpoint() -> None:
    """TensorRT-LLM's FP8/NVFP4 runs read NVIDIA's checkpoints (kv_cache_quant_algo FP8, static
    activation scales); vLLM quantises a bf16 checkpoint on line (dynamic scales, bf16 KV)."""
    base = {"gemm_quant_mode": "fp8", "model_path": "meta-llama/Llama-3.1-70B"}
    assert si.kv_dtype({**base, "backend": "trtllm"}) == "fp8"
    assert si.fp8_scales({**base, "backend": "trtllm"}) == "static"
    assert si.kv_dtype({**base, "backend": "vllm"}) == "auto"
    assert si.fp8_scales({**base, "backend": "vllm"}) == "dynamic"
    nv = {"gemm_quant_mode": "fp8", "model_path": "nvidia/Llama-3.1-8B-Instruct-FP8", "backend": "vllm"}
    assert si.fp8_scales(nv) == "static"
    block = {
        "gemm_quant_mode": "fp8_block",
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "backend": "sglang",
    }
    assert si.fp8_scales(block) == "dynamic" and si.kv_dtype(block) == "auto"


def test_a_run_whose_concurrency_disagrees_is_left_out(sample: list[dict[str, str]]) -> None:
    row = next(
        r
        for r in sample
        if r["id"] == "qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_2000x500_c288_tp2_epnone_1"
    )
    assert row["batch_size"] == "144"  # the sample's own two numbers disagree
    assert "silicon_concurrency" in (si.eligible(row) or "")


def test_a_campaign_below_the_wave_roofline_is_not_a_wave() -> None:
    """More than half of a campaign's runs faster than a wave's roofline TTFT: its TTFT lines
    are left out, its TPOT lines kept."""

    def line(camp: str, metric: str, measured: float, bound: float) -> sa._Line:
        row = {
            "id": f"x-{camp}-{metric}-{measured}",
            "metric": metric,
            "value": str(measured),
            "campaign": camp,
        }
        return sa._Line(row, {"bound": bound, "simulated": bound}, ())

    lines = [
        line("a", "ttft_mean_s", 0.5, 1.0),
        line("a", "ttft_mean_s", 0.6, 1.0),
        line("a", "ttft_mean_s", 1.5, 1.0),
        line("a", "tpot_mean_s", 0.01, 0.008),
        line("b", "ttft_mean_s", 0.9, 1.0),  # one run of three below: noise, still a wave
        line("b", "ttft_mean_s", 1.2, 1.0),
        line("b", "ttft_mean_s", 1.3, 1.0),
    ]
    bad = si.not_waves(lines)
    assert bad == {"a": (2, 3)}
    judged = si.judge_ttft(lines, bad)
    assert [bool(ln.excluded) for ln in judged] == [True, True, True, False, False, False, False]


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(SystemExit, match="--limit: 0 deployments not allowed"):
        si.main(["--limit", "0"])
