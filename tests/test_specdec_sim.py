"""Speculative decoding in the simulator (graphs.serving.sim.specdec_sim) against hand derivations.

A lone request (prompt P, output n, nothing else in flight) runs one prefill iteration and then
one iteration per verification; with k drafted tokens and r = n - g tokens still to produce
after g generated, the iteration drafts p = min(k, r - 1), the target scores p + 1 positions
after the c = P + g - 1 cached ones, and the draft decodes p tokens at contexts c + 1 .. c + p.
Each piece is read off the compiled steps (the same graphs `serve specdec` prices), not the
simulator's own mixed step.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs import decode_report, prefill_report
from graphs.cli import main
from graphs.serving.analysis.specdec import expected_tokens
from graphs.serving.sim.engine import EngineConfig, kv_blocks
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import simulate
from graphs.serving.sim.specdec_batch import speedup_by_batch
from graphs.serving.sim.specdec_sim import SpecConfig, Speculator
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.ledger_fit import build_ledger
from graphs.serving.step.mixed import mixed_step
from graphs.serving.step.workload import as_workload

T, D, HW = "llama-3.1-8b", "llama-3.2-1b", "h100"


def test_a_verification_is_a_chunk_with_all_its_logits():
    """The mixed step's verify (a (k+1)-token chunk after ctx cached, k more lm_head rows) is
    serve specdec's verify: the chunked-prefill graph with logits for every position."""
    ms = mixed_step(T, HW)
    verify = compiled_step(T, HW, "prefill", chunked=True, logits="all")
    for k, c in ((1, 100), (4, 2000), (7, 30000)):
        assert math.isclose(
            ms.time_sums(0, 0.0, [(k + 1, c)], logit_rows=k), verify.step(1, k + 1, c), rel_tol=1e-9
        )


def _lone(n_out: int, prompt: int, k: int, accept: str, draft: str = D):
    reqs = [Request(0, 0.0, prompt, n_out)]
    return simulate(T, HW, reqs), simulate(T, HW, reqs, spec=SpecConfig.parse(draft, k, accept))


def test_acceptance_zero_costs_the_plain_run_plus_the_draft():
    """alpha = 0: every verification emits one token, so the request runs the plain run's n - 1
    decode iterations, each now the (p+1)-position verify plus p draft decodes:
    TPOT_spec = TPOT_plain + mean_g [verify(p+1, c) - decode(c+1) + sum_j draft(c+1+j)]."""
    p_len, n, k = 700, 12, 4
    plain, spec = _lone(n, p_len, k, "0")
    verify = compiled_step(T, HW, "prefill", chunked=True, logits="all")
    draft = compiled_step(D, HW, "decode")
    extra = 0.0
    for g in range(1, n):
        c = p_len + g - 1
        p = min(k, n - g - 1)
        dec = decode_report(T, HW, batch=1, ctx=c + 1).step_s
        ver = verify.step(1, p + 1, c) if p else dec
        extra += ver - dec + sum(draft.step(1, c + 1 + j) for j in range(p))
    assert spec.tpot.mean == pytest.approx(plain.tpot.mean + extra / (n - 1), rel=1e-9)
    # the prompt's prefill also runs through the draft, so that it holds the prompt's KV
    ttft = prefill_report(T, HW, seq=p_len).step_s + prefill_report(D, HW, seq=p_len).step_s
    assert spec.ttft.mean == pytest.approx(ttft, rel=1e-9)
    st = spec.spec
    assert st.accepted == 0 and st.tokens_per_verification == 1.0
    # drafted p = min(4, 11 - g) for g = 1..11: 4 for g <= 7 (7 x 4 = 28), then 3, 2, 1 and 0 (the
    # last is a plain decode): 34 over 10 verifications
    assert st.drafted == 7 * 4 + 3 + 2 + 1 and st.verifications == n - 2


def test_acceptance_one_with_a_free_draft_emits_k_plus_one():
    """alpha = 1, prompt lookup (ngram: no GPU cost): every verification emits k + 1 tokens; with
    n = 1 + 5 (k + 1) outputs the request takes 1 + 5 iterations, and TPOT is the mean verify."""
    p_len, k, m = 300, 3, 5
    n = 1 + m * (k + 1)
    _, spec = _lone(n, p_len, k, "1", draft="ngram")
    st = spec.spec
    assert st.tokens_per_verification == k + 1 and st.verifications == m
    assert st.draft_s == 0 and st.acceptance == 1.0
    assert spec.iterations == 1 + m
    verify = compiled_step(T, HW, "prefill", chunked=True, logits="all")
    # the i-th verification starts after c = P + i (k + 1) cached tokens; its end emits k + 1 tokens
    e2e_decode = sum(verify.step(1, k + 1, p_len + i * (k + 1)) for i in range(m))
    assert spec.tpot.mean == pytest.approx(e2e_decode / (n - 1), rel=1e-9)


def test_expected_mode_emits_the_expected_tokens():
    """Expected-value mode accrues E[a] = E - 1 per verification (E = (1 - a^(k+1)) / (1 - a)):
    over V verifications the accepted count is floor(V (E - 1)) to within one per sequence."""
    k, a = 3, 0.5
    e = float(expected_tokens(0.5, k))  # (1 - 1/16) / (1/2) = 1.875
    assert e == 1.875
    reqs = [Request(0, 0.0, 200, 2000)]
    res = simulate(T, HW, reqs, spec=SpecConfig.parse("ngram", k, str(a), expected=True))
    st = res.spec
    full = st.verifications - 1  # the last verification may draft fewer than k
    assert abs(st.accepted - full * (e - 1)) <= 2


def test_seeded_draws_average_to_the_closed_form():
    """Draws: position j accepted with probability a_j given 1..j-1; the mean tokens per
    verification of many converges to 1 + a1 + a1 a2 + a1 a2 a3 (a profile 0.9, 0.7, 0.5:
    1 + 0.9 + 0.63 + 0.315 = 2.845)."""
    reqs = synthetic(60, rate=50.0, prompt="fixed:100", output="fixed:400", seed=2)
    res = simulate(T, HW, reqs, spec=SpecConfig.parse("ngram", 3, "0.9,0.7,0.5", seed=5))
    st = res.spec
    assert SpecConfig.parse("ngram", 3, "0.9,0.7,0.5").expected_tokens() == pytest.approx(2.845)
    # ~ 8,000 verifications: the standard error of the mean is ~ 0.01; near the end fewer are drafted
    assert st.tokens_per_verification == pytest.approx(2.845, abs=0.05)
    # the same seed draws the same run
    again = simulate(T, HW, reqs, spec=SpecConfig.parse("ngram", 3, "0.9,0.7,0.5", seed=5))
    assert again.spec == st


def test_a_draft_model_shares_the_device_memory():
    """KV blocks with a draft: floor((u C - W - W_d - a N) / (b (kv + kv_d))), fewer than alone."""
    hw = get_device(HW)
    cfg = EngineConfig()
    sp = Speculator(SpecConfig.parse(D, 3, "0.7"), as_workload(T), hw)
    t, d = (
        build_ledger(as_workload(T), "decode", 1, 1, None, None),
        build_ledger(as_workload(D), "decode", 1, 1, None, None),
    )
    u_c = 0.9 * float(hw.capacity())
    w = float(t.weights_bytes) + float(d.weights_bytes)
    a = (
        max(float(t.activation_bytes_per_token), float(d.activation_bytes_per_token))
        * cfg.max_num_batched_tokens
    )
    kv = float(t.kv_bytes_per_token) + float(d.kv_bytes_per_token)
    assert kv_blocks(sp.ledger, float(hw.capacity()), cfg) == math.floor((u_c - w - a) / (16 * kv))
    assert kv_blocks(sp.ledger, float(hw.capacity()), cfg) < kv_blocks(t, float(hw.capacity()), cfg)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--spec-draft", "llama-3.2-1b"], "needs --spec-accept"),
        (["--spec-accept", "0.5"], "need --spec-draft"),
        (["--spec-k", "5"], "need --spec-draft"),  # was silently ignored: a plain run
        (["--spec-draft", "ngram", "--spec-accept", "1.5"], "must be in [0, 1]"),
        (["--spec-draft", "ngram", "--spec-accept", "0.9,x"], "--spec-accept must be"),
        (["--spec-draft", "ngram", "--spec-k", "2", "--spec-accept", "0.9,0.8,0.7"], "3 per-position"),
        (["--spec-draft", "ngram", "--spec-k", "0", "--spec-accept", "1"], "--spec-k must be in [1, 256]"),
        (["--spec-draft", "mtp", "--spec-accept", "0.8"], "no multi-token-prediction module"),
        (["--spec-draft", "qwen3-8b", "--spec-accept", "0.8"], "tokenizer"),
    ],
)
def test_cli_refuses_bad_spec_flags_in_one_line(args, needle, capsys):
    try:  # argparse's range checks exit, the library's errors return 2
        rc = main(["simulate", T, "--device", HW, "--rate", "1", "--requests", "3", "--quiet", *args])
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_cli_prints_the_speculation_line(capsys):
    main(
        [
            "simulate",
            T,
            "--device",
            HW,
            "--rate",
            "2",
            "--requests",
            "6",
            "--quiet",
            "--prompt",
            "fixed:200",
            "--output",
            "fixed:41",
            "--spec-draft",
            "ngram",
            "--spec-k",
            "4",
            "--spec-accept",
            "1",
        ]
    )
    out = capsys.readouterr().out
    # 40 tokens after the first in 8 verifications of 5 each
    assert "ngram drafts k = 4): 5.00 tokens per verification, 100.0% of" in out


def test_mtp_needs_the_module():
    with pytest.raises(CostModelError, match="mtp_layers = 0"):
        Speculator(SpecConfig.parse("mtp", 1, "0.8"), as_workload(T), get_device(HW))


def test_speedup_by_batch_falls_with_the_batch():
    """A free draft accepted always (k = 1): at batch 1 the 2-token verify costs about one
    weight-bound decode, so the speed-up is near E = 2; by batch 256 the token-wise kernels of
    Llama-3.1-8B on an H100 are compute-bound for 512 tokens, and it falls well below that."""
    rows = speedup_by_batch(T, HW, SpecConfig.parse("ngram", 1, "1"), [1, 256], output=64, waves=1)
    assert 1.8 < rows[0].speedup < 2.0 and rows[0].tokens_per_verification == 2.0
    assert rows[1].speedup < 0.8 * rows[0].speedup


def test_mtp_drafts_with_the_module_and_mla_verifies_on_the_decode_path():
    """DeepSeek-V3 with its MTP module: the target is the model without it (as a plain run
    builds deepseek-v3-mtp: the module is loaded and run only when speculating), and a verify of
    p + 1 = 3 positions after c = 1000 cached runs as 3 decodes at 1001..1003 (MLA's absorbed
    decode path, not a chunk that decompresses its 1,000-token prefix); each of the 2 drafted
    tokens is one MTP forward: the step with the module minus the one without, at 1001 and 1002."""
    import dataclasses

    from models import get_model

    hw = get_device("h200")
    plain = get_model("deepseek-v3-mtp")
    full = dataclasses.replace(plain, mtp_active=True)
    base = dataclasses.replace(plain, mtp_layers=0)
    sp = Speculator(SpecConfig.parse("mtp", 2, "0.8"), as_workload(plain), hw, tp=8)
    ms_full, ms_base = mixed_step(full, hw, tp=8), mixed_step(base, hw, tp=8)
    t = sp.iteration_time(0, 0.0, [], None, [(3.0, 1000.0)])
    draft = sum(ms_full.time([c]) - ms_base.time([c]) for c in (1001, 1002))
    assert t == pytest.approx(ms_base.time([1001, 1002, 1003]) + draft, rel=1e-9)
    assert sp.draft_s == pytest.approx(draft, rel=1e-9) and 0 < draft < 0.2 * t


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(1, 6),
    rates=st.lists(st.floats(0, 1), min_size=6, max_size=6),
    seed=st.integers(0, 2**16),
    expected=st.booleans(),
)
def test_every_request_gets_exactly_its_tokens(k, rates, seed, expected):
    """Invariants whatever the profile: every request finishes with exactly its output tokens
    (the simulator checks the emitted count), never more than k + 1 per verification, never more
    accepted than drafted."""
    reqs = synthetic(20, rate=200.0, prompt="uniform:10,300", output="uniform:1,60", seed=seed % 97)
    sp = SpecConfig("ngram", k, tuple(rates[:k]), expected, seed)
    res = simulate("tiny", HW, reqs, spec=sp)
    st_ = res.spec
    assert res.requests == 20 and st_.accepted <= st_.drafted
    if st_.verifications:
        assert 1.0 <= st_.tokens_per_verification <= k + 1


def test_search_prices_speculation_with_the_simulators_step():
    """search(spec=...) prices each point as the simulator's speculating iteration does: b
    sequences verifying k + 1 = 5 positions after ctx - 1 = 2047 cached, plus the draft's 4
    decodes, over E = (1 - 0.7^5) / 0.3 = 2.7731 tokens; the draft's prefill adds to TTFT."""
    from graphs.serving.planning.design_search import search

    sp = SpecConfig.parse(D, 4, "0.7")
    assert sp.expected_tokens() == pytest.approx((1 - 0.7**5) / 0.3)
    res = search(T, devices=[HW], batches=[1, 64], ctxs=[2048], spec=sp)
    plain = search(T, devices=[HW], batches=[1, 64], ctxs=[2048])
    sim = Speculator(sp, as_workload(T), get_device(HW))
    for row, base in zip(res.frontier, plain.frontier, strict=True):
        b = row["batch"]
        step = sim.iteration_time(0, 0.0, [], None, [(5.0, 2047.0)] * b, record=False)
        assert row["tpot_s"] == pytest.approx(step / sp.expected_tokens(), rel=1e-9)
        assert row["ttft_s"] == pytest.approx(
            base["ttft_s"] + prefill_report(D, HW, seq=2048).step_s, rel=1e-9
        )
        assert row["memory_bytes"] > base["memory_bytes"]  # the draft's weights and KV


def test_search_refuses_speculation_on_pipelines():
    from graphs.serving.planning.design_search import search

    with pytest.raises(CostModelError, match="tensor-parallel plans only"):
        search(T, devices=[HW], batches=[1], ctxs=[1024], pp=[1, 2], spec=SpecConfig.parse("ngram", 2, "0.5"))
