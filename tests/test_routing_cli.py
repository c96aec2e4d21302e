"""``decode`` and ``prefill`` with ``--ep`` and ``--routing``: the busiest EP rank's step, never a
cached card of the default step (graphs.serving.step.expert_routing; graphs.cli.cached)."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs import decode_report, prefill_report
from graphs.cli import main
from graphs.serving.step.expert_routing import parse_routing

M = "mixtral-8x7b"
DECODE = ["decode", M, "--device", "h100", "--batch", "1", "--ctx", "4096", "--ignore-capacity", "--json"]
PREFILL = ["prefill", M, "--device", "h100", "--batch", "1", "--seq", "2048", "--ignore-capacity", "--json"]


def _step(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_decode_routing_is_the_library_step_and_skew_is_slower(capsys):
    """Batch 1 on 2 EP ranks of 4 experts: the busiest rank reads 1 + e_2 sqrt(6/7) = 1.522
    experts' weights per layer under uniform routing (test_routing_max); Zipf 1 puts experts
    1-4 (inclusion 0.736 + 0.368 + 0.245 + 0.184 = 1.532 of the 2 slots) on rank 0: more."""
    default = _step(capsys, DECODE)  # the default step (a card, when the cache is on)
    uniform = _step(capsys, [*DECODE, "--ep", "2"])
    skew = _step(capsys, [*DECODE, "--ep", "2", "--routing", "zipf:1"])
    again = _step(capsys, DECODE)  # the card of the default step still answers the default
    assert again["step_s"] == default["step_s"]
    assert skew["routing"] == "zipf:1" and skew["ep"] == 2 and "routing" not in default
    assert uniform["step_s"] < skew["step_s"]
    for doc, text in ((uniform, "uniform"), (skew, "zipf:1")):
        lib = decode_report(M, "h100", batch=1, ctx=4096, ep=2, routing=parse_routing(text))
        assert doc["step_s"] == pytest.approx(lib.step_s, rel=1e-12)
    assert uniform["limits"] is None  # not solved for a routed step (the text says so)


def test_routing_without_ep_changes_the_experts_read(capsys):
    # one device, Zipf 2: expert 1 takes every token, so fewer distinct experts are read at batch
    # 8 than under uniform routing (8 (1 - (3/4)^8) = 7.20 experts per layer): a faster step
    batch8 = [x if i != DECODE.index("--batch") + 1 else "8" for i, x in enumerate(DECODE)]
    uniform = _step(capsys, batch8)
    skew = _step(capsys, [*batch8, "--routing", "zipf:2"])
    assert skew["step_s"] < uniform["step_s"]
    lib = decode_report(M, "h100", batch=8, ctx=4096, routing=parse_routing("zipf:2"))
    assert skew["step_s"] == pytest.approx(lib.step_s, rel=1e-12)


def test_prefill_routing_is_the_library_step(capsys):
    # 2048 prompt tokens: the busiest rank's rows are the mean to within 1/sqrt(T); Zipf 2 puts
    # inclusion 1 + 0.474 + 0.211 + 0.118 = 1.80 of 2 slots on rank 0 (uniform: 1), so slower
    uniform = _step(capsys, [*PREFILL, "--ep", "2"])
    skew = _step(capsys, [*PREFILL, "--ep", "2", "--routing", "zipf:2"])
    assert uniform["step_s"] < skew["step_s"]
    lib = prefill_report(M, "h100", batch=1, seq=2048, ep=2, routing=parse_routing("zipf:2"))
    assert skew["step_s"] == pytest.approx(lib.step_s, rel=1e-12)


@pytest.mark.parametrize(
    "argv, match",
    [
        ([*DECODE, "--routing", "zipf:x"], "--routing must be"),
        ([*DECODE, "--ep", "0"], "--ep must be in"),
        ([*DECODE, "--ep", "3"], "must divide the 8 experts"),
        ([*PREFILL, "--routing", "zipf:11"], "exponent must be in"),
        ([*PREFILL, "--replicate-hot", "2"], "replicate (2) needs ep >= 2"),
        (["decode", "llama-3.1-8b", "--ep", "2"], "has no experts"),
        (["prefill", "llama-3.1-8b", "--routing", "zipf:1"], "has no experts"),
    ],
)
def test_bad_plans_are_one_line_errors(capsys, argv, match):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err


def test_the_weight_read_printed_is_the_busiest_ranks(capsys):
    """Issue 45: ``--ep 2 --routing zipf:1`` printed ``weight read 7.611 ms`` over ``TPOT bound
    6.205 ms``: the term was the whole graph's (every token's two experts), the bound the busiest
    rank's. Batch 1, uniform, ep 2: the busiest rank reads 1 + sqrt(6/7)/sqrt(pi) = 1.522
    experts' matrices per layer (routing's module doc) instead of 2, so the term drops by
    0.478 x 32 layers x 3 x 4096 x 14336 x 2 bytes over the H100's 3.35 TB/s."""
    one = _step(capsys, DECODE)
    two = _step(capsys, [*DECODE, "--ep", "2"])
    expert = 3 * 4096 * 14336 * 2  # w1, w3, w2 of one expert, bf16
    drop = (2 - (1 + (6 / 7) ** 0.5 / math.pi**0.5)) * 32 * expert / 3.35e12
    assert one["weight_read_s"] - two["weight_read_s"] == pytest.approx(drop, rel=1e-6)
    for doc in (one, two, _step(capsys, [*DECODE, "--ep", "2", "--routing", "zipf:1"])):
        assert doc["step_s"] >= doc["weight_read_s"]
    assert main([*DECODE[:-1], "--ep", "2", "--routing", "zipf:1"]) == 0
    text = capsys.readouterr().out
    read = text.split("weight read ")[1].split(" |")[0]
    assert "on the busiest EP rank are read" in text and f"the graph reads {read} of weights" in text


@settings(max_examples=25, deadline=None)
@given(
    ep=st.sampled_from([1, 2, 4, 8]),
    routing=st.sampled_from(["uniform", "zipf:0.5", "zipf:1", "zipf:2", "hist:8,4,2,1,1,1,1,1"]),
    placement=st.sampled_from(["contiguous", "balanced"]),
    batch=st.integers(1, 512),
    ctx=st.integers(1, 32768),
)
def test_the_bound_is_never_below_a_term_it_prints(ep, routing, placement, batch, ctx):
    """Every term the decode report prints (weight read, KV read, each unit's compute, each
    link) is part of some kernel's roofline, so the per-kernel sum is at least each of them."""
    rep = decode_report(M, "h100", batch=batch, ctx=ctx, ep=ep, routing=parse_routing(routing, placement))
    for term in (rep.weight_read_s, rep.kv_read_s, *rep.terms_s.values()):
        assert rep.step_s >= term * (1 - 1e-12)


def test_huge_histogram_counts_price_like_their_ratios(capsys):
    """hist:1e308,1e308,1,... summed to inf in numpy (every inclusion 0, a TPOT of 4.411 ms
    below the 7.611 ms weight read of hist:1,1,0,...): only the ratios count. Two experts take
    every token (k = 2), both on rank 0 of ep 2, so the step reads, per token, by hand:
    experts 2 x 32 layers x 3 x 4096 x 14336 = 11,274,289,152 params, attention 32 x (2 x 4096^2
    + 2 x 4096 x 1024) = 1,342,177,280, router 32 x 4096 x 8 = 1,048,576, LM head 32000 x 4096 =
    131,072,000, norms 4096 x 65 = 266,240, one embedding row 4096: 12,748,857,344 params x 2 B
    = 25,497,714,688 B over 3.35 TB/s = 7.6113 ms."""
    import warnings

    argv = [*DECODE, "--ep", "2", "--routing"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow RuntimeWarning fails the test
        huge = _step(capsys, [*argv, "hist:1e308,1e308,1,1,1,1,1,1"])
    small = _step(capsys, [*argv, "hist:1,1,0,0,0,0,0,0"])
    assert huge["weight_read_s"] == pytest.approx(25_497_714_688 / 3.35e12, rel=1e-9)
    assert huge["step_s"] == pytest.approx(small["step_s"], rel=1e-12)
    assert huge["step_s"] >= huge["weight_read_s"]
    assert main([*argv, "hist:inf,1,1,1,1,1,1,1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--routing" in err and "inf" in err


def test_an_ep_rank_is_devices_of_its_own_as_serve_plans_counts_them(capsys):
    """``decode --tp 2 --ep 2`` priced a step of 4 devices but counted 2 for energy, device-hours
    and the per-device rate (3.2004 J/token where serve plans gave 6.585 for the same step plus its
    all-to-all). Each EP rank is a tp group of its own (:func:`parallel_plan`: devices = tp pp ep).
    By hand, T = 2.286 ms: energy 4 x 700 W x 2.286 ms / 1 token = 6.40 J/token, device-hours
    4 x 1e6 x 2.286 ms / 3600 s = 2.540 per million tokens, 1 / 2.286 ms / 4 = 109.4 tokens/s per
    device; serve plans' plan is the same step plus its all-to-all (2.352 - 0.066 ms)."""
    from graphs.serving.analysis.parallel import parallel_plan

    argv = ["decode", M, "--device", "h200", "--tp", "2", "--ep", "2"]
    doc = _step(capsys, [*argv, "--json"])
    step = doc["step_s"]
    assert step == pytest.approx(2.286e-3, abs=1e-6) and doc["devices"] == 4
    assert doc["energy_per_token_j"] == pytest.approx(4 * 700 * step, rel=1e-12)  # 6.40 J
    assert doc["device_hours_per_million_tokens"] == pytest.approx(4 * 1e6 * step / 3600, rel=1e-12)  # 2.540
    assert doc["tokens_per_s_per_device"] == pytest.approx(1 / step / 4, rel=1e-12)  # 109.4
    plan = parallel_plan(M, "h200", batch=1, ctx=4096, tp=2, ep=2)
    assert plan.devices == doc["devices"]
    assert plan.step_s - plan.expert_all_to_all_s == pytest.approx(step, rel=1e-9)
    # serve plans' energy and device-hours, less the all-to-all's share of its step
    share = step / plan.step_s
    assert plan.energy_per_token_j(700) * share == pytest.approx(doc["energy_per_token_j"], rel=1e-9)
    assert plan.device_hours_per_million_tokens * share == pytest.approx(
        doc["device_hours_per_million_tokens"], rel=1e-9
    )
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "109.4 tokens/s per device" in text
    assert "energy 6.4008 J/token (TDP x 4 device(s) (tp 2 x ep 2)" in text
    assert "2.540 device-hours per million tokens" in text


def test_the_memory_check_spreads_the_experts_over_the_ep_ranks(capsys):
    """``decode qwen3-30b-a3b --ep 4 --batch 64`` was refused (80.89 GiB per device: every expert
    on each device) where serve plans ran the same plan. Each of the 4 ranks holds a quarter of
    the routed experts, 48 layers x 128 experts x 3 x 2048 x 768 x 2 B = 57,982,058,496 B in all:
    86,853,758,976 B (the ledger at tp 1) - 57,982,058,496 x 3/4 = 43,367,215,104 B (40.39 GiB),
    :func:`plan_memory_bytes`'s figure."""
    from graphs.serving.analysis.parallel import plan_memory_bytes

    argv = [
        "decode",
        "qwen3-30b-a3b",
        "--ep",
        "4",
        "--batch",
        "64",
        "--routing",
        "zipf:1",
        "--placement",
        "balanced",
    ]
    doc = _step(capsys, [*argv, "--json"])
    cap = doc["capacity"]
    assert cap["fits"] and cap["ep"] == 4
    assert cap["needed_bytes"] == pytest.approx(86_853_758_976 - 57_982_058_496 * 3 / 4, rel=1e-12)
    held = plan_memory_bytes("qwen3-30b-a3b", "h100", batch=64, ctx=4096, tp=1, pp=1, ep=4)
    assert cap["needed_bytes"] == pytest.approx(held, rel=1e-12)
    assert main(argv) == 0
    assert "the memory check spreads the routed experts over the 4 EP ranks" in capsys.readouterr().out
