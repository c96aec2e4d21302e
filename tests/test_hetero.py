"""Heterogeneous and disaggregated serving, speculative decoding, parallel plans."""

import math

import pytest
import sympy

from costmodel import as_float, get_device
from costmodel.compare import compare_devices, decompose_claim
from costmodel.errors import CostModelError
from graphs import build_model, step_time
from graphs.serving.disagg import disaggregated, kv_transfer_crossover
from graphs.serving.parallel import bubble_fraction, parallel_plan, plan_frontier
from graphs.serving.specdec import (
    T_draft,
    T_target,
    T_verify,
    alpha_s,
    expected_tokens,
    k_s,
    speculative_decoding,
    speedup_closed_form,
)
from graphs.serving.split import attention_ffn_split, sram_residency
from models import get_model, param_counts


def test_compare_devices_same_precision_dense():
    rows = {r["device"]: r for r in compare_devices(["h100", "b200", "groq-lpu"], "bf16")}
    assert rows["h100-sxm"]["ridge_flop_per_byte"] == pytest.approx(989.4e12 / 3.35e12)
    assert rows["h100-sxm"]["full_memory_reads_per_s"] == pytest.approx(3.35e12 / 80e9)
    assert rows["groq-lpu"]["peak_flops_per_s"] is None  # no bf16 roof: not guessed


def test_claim_decomposition():
    r = decompose_claim("h100", "fp8", "b300", "fp4", old_count=8, new_count=72)
    assert r["format_factor"] == pytest.approx(15e15 / 5e15)  # B300 fp4 vs its own fp8
    assert r["architecture_factor"] == pytest.approx(5e15 / 1978.9e12)  # fp8 vs fp8, per chip
    assert r["system_size_factor"] == 9
    assert r["claimed_speedup"] == pytest.approx(15e15 * 72 / (1978.9e12 * 8))


def test_speculative_closed_form_reduces_to_expected_tokens():
    s = speedup_closed_form()
    assert sympy.simplify(s.subs({T_draft: 0, T_verify: T_target}) - expected_tokens()) == 0
    assert expected_tokens(sympy.Rational(1, 2), 3) == sympy.Rational(15, 8)  # 1 + 1/2 + 1/4 + 1/8
    assert sympy.limit(expected_tokens(alpha_s, 4), alpha_s, 1) == 5
    assert expected_tokens(1, k_s) == k_s + 1


@pytest.mark.parametrize("alpha", [0.6, 0.9])
def test_speculative_best_k_found_by_the_engine(alpha):
    r = speculative_decoding("llama-3.1-70b", "llama-3.1-8b", "b200", alpha=alpha, ctx=2048, k_max=12)
    speed = {row["k"]: row["speedup"] for row in r["rows"]}
    best = r["best_k"]
    assert speed[best] == max(speed.values())
    # recompute one row by hand from the reported step times
    row = r["rows"][best - 1]
    e = (1 - alpha ** (best + 1)) / (1 - alpha)
    assert row["speedup"] == pytest.approx(
        e * r["target_step_s"] / (best * r["draft_step_s"] + row["verify_s"])
    )
    # verifying k+1 tokens costs about one target step when memory-bound
    assert row["verify_s"] == pytest.approx(r["target_step_s"], rel=0.2)


def test_higher_acceptance_picks_longer_drafts():
    lo = speculative_decoding("llama-3.1-70b", "llama-3.1-8b", "b200", alpha=0.6, k_max=12)
    hi = speculative_decoding("llama-3.1-70b", "llama-3.1-8b", "b200", alpha=0.9, k_max=12)
    assert hi["best_k"] > lo["best_k"] and hi["best_speedup"] > lo["best_speedup"]


def test_disaggregated_terms_and_pools():
    r = disaggregated(
        "llama-2-7b",
        "b200",
        "h100",
        prompt=4096,
        output=512,
        decode_batch=16,
        link_bandwidth=12.5e9,
        link_latency=5e-6,
        rate=2.0,
    )
    kv_tok = 2 * 32 * 32 * 128 * 2  # MHA: 2 * L * H_kv * d_head * b = 512 KiB
    assert r["kv_bytes"] == 4096 * kv_tok
    assert r["kv_transfer_s"] == pytest.approx(4096 * kv_tok / 12.5e9 + 32 * 5e-6)
    assert r["ttft_s"] == pytest.approx(r["prefill_s"] + r["kv_transfer_s"] + r["first_decode_s"])
    assert r["prefill_devices"] == math.ceil(2.0 * r["prefill_s"])
    assert r["decode_devices"] == math.ceil(2.0 * 512 / (16 / r["tpot_s"]))
    assert r["energy_per_token_j"] == pytest.approx((1000 + 700) / (2.0 * 512))
    assert r["colocated"]["tpot_s"] > r["tpot_s"]  # prefills stall the colocated decode batch
    lw = disaggregated(
        "llama-2-7b",
        "b200",
        "h100",
        prompt=4096,
        output=512,
        decode_batch=16,
        link_bandwidth=12.5e9,
        overlap="layerwise",
    )
    assert lw["ttft_s"] < r["ttft_s"]


def test_kv_transfer_becomes_the_largest_ttft_term_past_a_computed_prompt():
    kw = dict(link_bandwidth=12.5e9, link_latency=5e-6)
    s = kv_transfer_crossover("llama-2-7b", "b200", "h100", **kw)
    assert s is not None

    def terms(p):
        return disaggregated("llama-2-7b", "b200", "h100", prompt=p, output=16, decode_batch=1, **kw)

    at, before = terms(s), terms(s - 1)
    assert at["kv_transfer_s"] >= max(at["prefill_s"], at["first_decode_s"])
    assert before["kv_transfer_s"] < max(before["prefill_s"], before["first_decode_s"])
    # a fast link never lets the transfer dominate this GQA model within 1M tokens
    assert kv_transfer_crossover("llama-3.1-8b", "b200", "h100", link_bandwidth=900e9) is None


def test_attention_ffn_split():
    cfg = get_model("llama-3.1-8b")
    r = attention_ffn_split(cfg, "h200", "b200", batch=8, ctx=4096, link_bandwidth=450e9, hop_latency=2e-6)
    assert r["transfers"] == 64  # 2 per layer
    assert r["transfers_s"] == pytest.approx(64 * (8 * 4096 * 2 / 450e9 + 2e-6))
    assert r["step_s"] == pytest.approx(r["attention_s"] + r["ffn_s"] + r["transfers_s"])
    # gate, up, down and the mlp_norm weight of each layer, in bf16
    assert r["ffn_weight_bytes"] == 32 * (3 * 4096 * 14336 + 4096) * 2
    whole = as_float(step_time(build_model(cfg, "decode", batch=8, ctx=4096), get_device("h200")))
    assert r["attention_s"] < whole


def test_sram_residency_and_hop_floor():
    r = sram_residency("llama-3.1-70b", "groq-lpu", hop_latency=1e-6)
    weights = as_float(param_counts(get_model("llama-3.1-70b")).total) * 2
    assert r["devices"] == math.ceil(weights / 230e6) == 614
    assert r["hop_latency_floor_s"] == pytest.approx(613e-6)
    assert r["layer_hops_floor_s"] == pytest.approx(80e-6)  # 80 layers x 1 us


def test_pipeline_bubble_and_expert_parallelism():
    assert bubble_fraction(4, 12) == sympy.Rational(1, 5)  # (p-1)/(m+p-1)
    one = parallel_plan("llama-3.1-70b", "h100", batch=32, ctx=2048, tp=8)
    assert one["bubble_fraction"] == 0 and one["devices"] == 8
    pp = parallel_plan("llama-3.1-70b", "h100", batch=32, ctx=2048, tp=4, pp=2, microbatches=4)
    assert pp["bubble_fraction"] == pytest.approx(1 / 5)
    assert pp["stage_hop_s"] > 0
    ep1 = parallel_plan("mixtral-8x7b", "h100", batch=64, ctx=2048)
    ep4 = parallel_plan("mixtral-8x7b", "h100", batch=64, ctx=2048, ep=4)
    assert ep4["expert_all_to_all_s"] > 0 and ep4["stage_s"] < ep1["stage_s"]
    with pytest.raises(Exception, match="needs a MoE model"):
        parallel_plan("llama-3.1-8b", "h100", batch=8, ctx=128, ep=2)
    with pytest.raises(Exception, match="must divide"):
        parallel_plan("llama-3.1-8b", "h100", batch=8, ctx=128, pp=3)


def test_plan_frontier_marks_non_dominated():
    rows = plan_frontier(
        "llama-3.1-70b",
        ["h100", "h200"],
        batches=[8, 64],
        ctx=2048,
        plans=[(8, 1, 1, 1), (4, 2, 1, 1), (4, 2, 1, 4)],
    )
    ok = [r for r in rows if "error" not in r]
    front = [r for r in ok if r["pareto"]]
    assert front
    for f in front:
        assert not any(
            o["tokens_per_s_per_user"] > f["tokens_per_s_per_user"]
            and o["tokens_per_s_per_device"] > f["tokens_per_s_per_device"]
            for o in ok
        )
    assert all("energy_per_token_j" in r and "device_hours_per_million_tokens" in r for r in ok)


def test_closed_forms_reject_bad_values_by_name():
    """User values are validated, never handed to ``sympify``."""
    assert bubble_fraction(4, 12) == sympy.Rational(3, 15)  # (p-1)/(m+p-1), hand
    with pytest.raises(CostModelError, match="microbatches"):
        bubble_fraction(4, "__import__('os')")
    with pytest.raises(CostModelError, match="alpha"):
        expected_tokens("__import__('os')", 3)
    with pytest.raises(CostModelError, match=r"alpha .* \[0, 1\]"):
        expected_tokens(sympy.Rational(3, 2), 3)
