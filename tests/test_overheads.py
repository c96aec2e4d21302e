"""The engine overheads around the kernels (graphs.serving.pricing.overheads), against hand derivations.

A lone request (arrivals 100 s apart: they never overlap) of P prompt and n output tokens runs
one prefill iteration (one sequence, P tokens) and n - 1 decode iterations (one sequence, one
token each), so with per-iteration CPU ``a + b seqs + c tokens``, request path ``r``, per
output token ``d`` and kernel scale ``s``:

    TTFT = r + s T_prefill + a + b + c P + d
    TPOT = s mean(T_decode) + a + b + c + d
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.pricing.overheads import EngineOverheads, vllm_capture_sizes
from graphs.serving.sim.engine import EngineConfig, Replica, Sequence
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import simulate
from graphs.serving.step.mixed import mixed_step

M = "llama-3.1-8b"
P, N = 1500, 40


@pytest.fixture(scope="module")
def lone():
    reqs = [Request(i, 100.0 * i, P, N) for i in range(3)]
    return reqs, simulate(M, "h100", reqs)


def _run(reqs, ov):
    return simulate(M, "h100", reqs, overheads=ov)


def test_the_bound_is_untouched(lone):
    reqs, base = lone
    zero = _run(reqs, EngineOverheads())
    assert base.overheads is None and zero.overheads is None
    assert (zero.per_request["e2e_s"] == base.per_request["e2e_s"]).all()  # bit for bit


def test_request_path_adds_to_ttft_only(lone):
    reqs, base = lone
    r = 0.004
    res = _run(reqs, EngineOverheads(request_s=r))
    # the request reaches the queue r later; nothing else changes
    assert res.per_request["ttft_s"] == pytest.approx(base.per_request["ttft_s"] + r, abs=1e-12)
    assert res.per_request["tpot_s"] == pytest.approx(base.per_request["tpot_s"], abs=1e-12)


def test_per_output_token_adds_to_tpot(lone):
    reqs, base = lone
    d = 2e-5
    res = _run(reqs, EngineOverheads(output_token_s=d))
    # first token +d, last token +N d: TPOT = (last - first) / (N - 1) grows by exactly d
    assert res.per_request["tpot_s"] == pytest.approx(base.per_request["tpot_s"] + d, abs=1e-12)
    assert res.per_request["ttft_s"] == pytest.approx(base.per_request["ttft_s"] + d, abs=1e-12)
    assert res.per_request["e2e_s"] == pytest.approx(base.per_request["e2e_s"] + N * d, abs=1e-12)


def test_cpu_per_iteration_and_kernel_scale(lone):
    reqs, base = lone
    a, b, c, s = 3e-4, 2e-6, 1e-8, 1.5
    res = _run(reqs, EngineOverheads(iteration_s=a, per_seq_s=b, per_token_s=c, kernel_scale=s))
    # prefill: one sequence of P tokens; each decode: one sequence, one token (module doc)
    ttft = s * base.per_request["ttft_s"] + a + b + c * P
    tpot = s * base.per_request["tpot_s"] + a + b + c
    assert res.per_request["ttft_s"] == pytest.approx(ttft, rel=1e-12)
    assert res.per_request["tpot_s"] == pytest.approx(tpot, rel=1e-12)
    assert "per iteration 0.3 ms + 2 us/sequence + 10 ns/token" in res.overheads
    assert "kernels x1.5" in res.overheads


def test_vllm_capture_sizes_and_padding():
    sizes = vllm_capture_sizes(256)
    # [1, 2, 4] + 8..248 step 8 (31 sizes) + 256..512 step 16 (17 sizes) = 51
    assert len(sizes) == 51 and sizes[:5] == (1, 2, 4, 8, 16) and sizes[-1] == 512
    ov = EngineOverheads(cudagraph_sizes=sizes)
    want = {1: 1, 3: 4, 13: 16, 16: 16, 17: 24, 250: 256, 257: 272, 512: 512, 600: 600}  # 600: eager
    assert {n: ov.padded(n) for n in want} == want


def test_padding_prices_13_decodes_at_16_rows():
    ms = mixed_step(M, "h100")
    ov = EngineOverheads(cudagraph_sizes=vllm_capture_sizes())
    rep = Replica(ms, 10_000, EngineConfig(), overheads=ov)
    ctx = 700
    # decoding sequences: one generated token, KV of everything but it (computed = known - 1)
    seqs = [Sequence(Request(i, 0.0, ctx - 1, 50), computed=ctx - 1, generated=1) for i in range(13)]
    batch = [(s, 1) for s in seqs]
    # 13 is not captured; 16 is: the token-wise kernels run 16 rows, attention reads 13 KVs of ctx
    assert rep.iteration_time(batch) == ms.time_sums(16, 13.0 * ctx, [])
    assert ms.time_sums(16, 13.0 * ctx, []) > ms.time_sums(13, 13.0 * ctx, [])
    # a mixed batch (a prefill chunk beside the decodes) is not padded
    mixed = [*batch, (Sequence(Request(99, 0.0, 300, 5)), 300)]
    assert rep.iteration_time(mixed) == ms.time_sums(13, 13.0 * ctx, [(300.0, 0.0)])


def test_no_evict_never_preempts_where_recompute_does():
    reqs = synthetic(300, rate=200.0, prompt="uniform:200,600", output="uniform:50,300", seed=5)
    rec = simulate(M, "h100", reqs, engine=EngineConfig(num_blocks=400))
    tight = EngineConfig(num_blocks=400, scheduler_policy="guaranteed_no_evict")
    nev = simulate(M, "h100", reqs, engine=tight)
    assert rec.preemptions > 0 and rec.overheads is None
    assert nev.preemptions == 0 and nev.requests == 300
    assert "in force: guaranteed_no_evict" in nev.overheads
    # the policy may come with the overheads (TensorRT-LLM's default) too
    trt = simulate(
        M,
        "h100",
        reqs,
        engine=EngineConfig(num_blocks=400),
        overheads=EngineOverheads(policy="guaranteed_no_evict"),
    )
    assert trt.preemptions == 0 and math.isclose(trt.e2e.mean, nev.e2e.mean, rel_tol=1e-12)


def test_waiting_queue_sum_is_kept_exactly():
    """The running sum of the waiting queue (what makes an iteration independent of its length)
    equals the sum over the queue after every iteration, preemptions included."""
    ms = mixed_step(M, "h100")
    rep = Replica(ms, 120, EngineConfig(max_num_batched_tokens=512, max_num_seqs=8))
    for r in synthetic(40, rate=1e3, prompt="uniform:100,400", output="uniform:20,200", seed=9):
        rep.add(Sequence(r))
    now = 0.0
    while not rep.idle:
        batch = rep.schedule()
        now += rep.iteration_time(batch)
        rep.finish_iteration(batch, now)
        brute = sum(s.remaining for s in rep.running) + sum(s.remaining for s in rep.waiting)
        assert rep.outstanding == brute
    assert rep.preemptions > 0


def test_framework_defaults_and_errors():
    v = EngineOverheads.for_framework("vllm")
    assert v.policy == "recompute" and v.padded(13) == 16 and "assumed" in v.basis
    t = EngineOverheads.for_framework("trtllm")
    assert t.policy == "guaranteed_no_evict" and t.padded(13) == 13  # enable_padding off
    assert EngineOverheads.from_dict(v.to_dict()) == v
    with pytest.raises(CostModelError, match="request_s must be in"):
        EngineOverheads(request_s=-1.0)
    with pytest.raises(CostModelError, match="kernel_scale"):
        EngineOverheads(kernel_scale=math.nan)
    with pytest.raises(CostModelError, match="policy 'lifo' not allowed"):
        EngineOverheads(policy="lifo")
    with pytest.raises(CostModelError, match="unknown key 'bogus'"):
        EngineOverheads.from_dict({**v.to_dict(), "bogus": 1})
    with pytest.raises(CostModelError, match="no engine overheads for framework"):
        EngineOverheads.for_framework("tgi")
    with pytest.raises(CostModelError, match="scheduler_policy"):
        EngineConfig(scheduler_policy="fifo")


def test_defaults_by_predictor():
    # the bound takes none; a framework's kernels take its defaults, sized to the engine's limits
    assert EngineOverheads.default(None).is_zero
    assert EngineOverheads.default("vllm", max_num_seqs=8) == EngineOverheads.for_framework(
        "vllm", max_num_seqs=8
    )
    assert EngineOverheads.default("vllm", max_num_seqs=8).cudagraph_sizes == (1, 2, 4, 8, 16)  # M = 2 x 8


@settings(max_examples=12, deadline=None)
@given(
    a=st.floats(0, 2e-3),
    b=st.floats(0, 1e-4),
    c=st.floats(0, 1e-6),
    r=st.floats(0, 0.05),
    d=st.floats(0, 1e-3),
    s=st.floats(1.0, 3.0),
    prompt=st.integers(1, 3000),
    output=st.integers(1, 30),
)
def test_overheads_never_make_a_lone_request_faster(a, b, c, r, d, s, prompt, output):
    """Every term adds time (kernel_scale >= 1): a lone request's TTFT and E2E never drop."""
    reqs = [Request(0, 0.0, prompt, output)]
    base = simulate(M, "h100", reqs)
    ov = EngineOverheads(
        iteration_s=a, per_seq_s=b, per_token_s=c, request_s=r, output_token_s=d, kernel_scale=s
    )
    got = simulate(M, "h100", reqs, overheads=ov)
    assert got.ttft.mean >= base.ttft.mean * (1 - 1e-12)
    assert got.e2e.mean >= base.e2e.mean * (1 - 1e-12)
    assert got.iterations == base.iterations


def test_fitted_defaults_are_the_generated_fit():
    """The terms DEFAULTS calls fitted are the values ``benchmarks/overhead_fit.py --write``
    wrote in docs/overhead_fit.md (to the two digits typed), and the basis says which."""
    import re
    from pathlib import Path

    from graphs.serving.pricing.overheads import DEFAULTS, FITTED

    doc = (Path(__file__).resolve().parent.parent / "docs" / "overhead_fit.md").read_text()
    rows = re.findall(r"^\| (\w+) \| `(\w+)` \| [^|]+ \| ([0-9.e+-]+) s \|", doc, flags=re.M)
    fitted = {(fw, term): float(v) for fw, term, v in rows}
    # request_s is fitted apart, to the validation tables' TTFT (test_request_path.py)
    assert set(fitted) == {(fw, t) for fw, terms in FITTED.items() for t in terms if t != "request_s"}
    for (fw, term), v in fitted.items():
        assert DEFAULTS[fw][term] == pytest.approx(v, rel=0.05, abs=1e-9), (fw, term)
        assert term in EngineOverheads.for_framework(fw).basis
    assert "assumed, not fitted" in EngineOverheads.for_framework("sglang").basis
