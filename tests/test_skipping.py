"""The skipping simulator (graphs.serving.sim.skipping) against the per-sequence loop it replaces.

The loop (``simulate(..., skip=False)``, ``Replica(..., skip=False)``) is the reference: every
request's times (queued, scheduled, first token, finish) and every summary field must come out
the same with the steady decodes in closed form, over random workloads, every registered engine
profile, prefix caching on and off, speculative decoding, KV tiers, disaggregated pools, several
replicas and closed loops. The closed form itself is checked by hand on one sequence.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.engines import engine_names, get_engine
from graphs.serving.sim.engine import EngineConfig, Replica, Sequence, profile_engine
from graphs.serving.sim.kv_tiers import KVTierConfig
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.sim.skipping import LazyDecodes
from graphs.serving.sim.specdec_sim import SpecConfig
from graphs.serving.step.mixed import mixed_step

M, HW = "llama-3.1-8b", "h100"


def _same(a, b) -> None:
    """Every request's times to 1e-9 s and every summary field equal."""
    assert a.to_dict() == b.to_dict()
    for key in a.per_request:
        np.testing.assert_allclose(b.per_request[key], a.per_request[key], rtol=0, atol=1e-9, err_msg=key)
    for key in a.timeline:
        np.testing.assert_array_equal(b.timeline[key], a.timeline[key], err_msg=key)


def test_closed_form_of_one_sequence():
    """A sequence joining at iteration 10 with 100 tokens computed, 5 generated, 7 blocks of 16
    (112 tokens) and 9 output tokens: c(j) = 100 + (j - 10); its first new block when c(j) + 1 >
    112, at j = 10 + 112 - 100 = 22 (c = 112), then every 16 iterations; its last token
    (g = 9) in iteration 10 + 9 - 5 - 1 = 13."""
    lz = LazyDecodes(16)
    lz.j = 10
    s = Sequence(Request(0, 0.0, 96, 9), computed=100, generated=5, blocks=7)
    assert lz.join(s, 7)
    assert lz.sum_ctx() == 101  # its KV length in iteration 10, the new token included
    assert lz.outstanding() == 96 + 9 - 100  # remaining = known - computed + output - generated
    for j in range(10, 13):
        assert lz.blocks_needed() == 0 and lz.finish() == []
        assert lz.sum_ctx() == 101 + (j + 1 - 10)
    assert lz.blocks_needed() == 0
    assert lz.finish() == [s]  # iteration 13 emits its 9th token
    assert (s.computed, s.generated, s.blocks) == (104, 9, 7)
    # one that runs past its block boundary: 20 output tokens, block at 22 and 38
    lz = LazyDecodes(16)
    lz.j = 10
    s = Sequence(Request(1, 0.0, 96, 40), computed=100, generated=5, blocks=7)
    assert lz.join(s, 7)
    taken = []
    for _ in range(30):
        taken.append(lz.blocks_needed())
        lz.finish()
    assert [10 + i for i, t in enumerate(taken) if t] == [22, 38]
    lz.materialise()  # 30 iterations: c = 130 (needs ceil(130 / 16) = 9 blocks), g = 35
    assert (s.computed, s.generated, s.blocks) == (130, 35, 9)


@pytest.mark.parametrize(("model", "tp"), [(M, 1), ("deepseek-v3", 8), ("qwen3-30b-a3b", 1)])
def test_decode_times_equal_the_scalar_step_bit_for_bit(model, tp):
    """The vectorised decode-only price of a window equals the scalar step at every element, bit
    for bit: a shared token-wise body (Llama, an MoE) and MLA's separate decode body (DeepSeek)."""
    ms = mixed_step(model, HW, tp=tp)
    for n in (1, 7, 256):
        sums = np.array([n * 10.0, n * 1001.0 + 3, n * 32768.0 + 11], dtype=float)
        got = ms.decode_times(n, sums).tolist()
        assert got == [ms.time_sums(n, x) for x in sums.tolist()]


def test_decode_times_refuses_windows_and_empty_batches():
    """A sliding-window model needs each decode's context (gpt-oss-20b), and no decode is no window."""
    with pytest.raises(CostModelError, match="windowed"):
        mixed_step("gpt-oss-20b", HW).decode_times(4, np.array([400.0]))
    with pytest.raises(CostModelError, match="n_dec=0"):
        mixed_step(M, HW).decode_times(0, np.array([0.0]))


def test_lockstep_with_the_loop_under_preemption():
    """Two replicas fed the same requests, one with the closed form: the same batch times and
    completions iteration after iteration, through preemptions (a small pool) and a closed form
    that holds most of the batch."""
    ms = mixed_step(M, HW)
    cfg = EngineConfig(max_num_seqs=64, num_blocks=700)
    reps = [Replica(ms, 700, cfg, skip=skip) for skip in (False, True)]
    rng = np.random.default_rng(3)
    reqs = [Request(i, 0.0, int(rng.integers(20, 400)), int(rng.integers(1, 300))) for i in range(150)]
    for rep in reps:
        for r in reqs:
            rep.add(Sequence(r))
    now = [0.0, 0.0]
    held = windowed = 0
    while not reps[0].idle:
        # iterations the closed form runs at once (only steady decodes): the loop runs them one by one
        ends = reps[1].decode_window(now[1], math.inf)
        for e in ends:
            batch = reps[0].schedule()
            reps[0].sample(now[0], reps[0].batch_len(batch))  # as the simulator records it
            now[0] += reps[0].iteration_time(batch)
            assert reps[0].finish_iteration(batch, now[0]) == ([], [])
            assert now[0] == e  # bit for bit: the vectorised prices and the loop's running sum
        if ends:
            now[1] = ends[-1]
            windowed += len(ends)
            assert reps[0].samples == reps[1].samples and reps[0].busy_s == reps[1].busy_s
        outs = []
        for k, rep in enumerate(reps):
            batch = rep.schedule()
            size = rep.batch_len(batch)
            rep.sample(now[k], size)
            now[k] += rep.iteration_time(batch)
            done, _ = rep.finish_iteration(batch, now[k])
            outs.append((size, [s.req.rid for s in done], len(rep.waiting), rep.free_blocks, rep.outstanding))
        assert outs[0] == outs[1]
        assert now[0] == now[1]
        held = max(held, reps[1]._lazy.n if reps[1]._lazy is not None else 0)
    assert reps[1].idle and reps[0].preemptions == reps[1].preemptions > 0
    assert held > 40  # most of the 64-sequence batch in closed form at times
    assert windowed > 100  # and many iterations of steady decodes run at once
    assert reps[0].samples == reps[1].samples and reps[0].emitted == reps[1].emitted


def test_overloaded_run_equals_the_loop():
    """Far past saturation (the benchmark's case, smaller): the same results."""
    reqs = synthetic(600, rate=330.0, prompt="lognormal:1000,1.0", output="lognormal:250,1.0", seed=1)
    _same(simulate(M, HW, reqs, rate=330.0, skip=False), simulate(M, HW, reqs, rate=330.0))


ENGINES = engine_names()


def _workload(draw):
    """Requests of one random workload (lengths, rate, sharing, think time) and its seed."""
    n = draw(st.integers(4, 40))
    rate = draw(st.sampled_from([None, 5.0, 40.0, 400.0]))
    prompt = draw(st.sampled_from(["uniform:20,300", "lognormal:200,1.0", "fixed:64"]))
    output = draw(st.sampled_from(["uniform:1,80", "lognormal:40,1.0", "fixed:17"]))
    # one way of sharing at most: a system prompt, a pool of prompts, or conversations
    sharing = draw(st.sampled_from(["none", "prefix", "pool", "turns"]))
    shared = draw(st.sampled_from([48, 200])) if sharing == "prefix" else 0
    pool = 3 if sharing == "pool" else 0
    turns = 3 if sharing == "turns" else 1
    seed = draw(st.integers(0, 10**6))
    reqs = synthetic(
        n,
        rate=rate,
        prompt=prompt,
        output=output,
        seed=seed,
        shared_prefix=shared,
        prompt_pool=pool,
        turns=turns,
        think_s=draw(st.sampled_from([0.0, 0.01])),
    )
    return reqs, rate, seed


@st.composite
def cases(draw, engine):
    caching = draw(st.booleans())
    reqs, rate, seed = _workload(draw)
    longest = max(r.prompt + r.output for r in reqs)
    need = math.ceil(longest / get_engine(engine).block_size) + 1
    blocks = draw(st.sampled_from([None, need, 3 * need, 12 * need]))
    kw = {}
    topo = draw(st.sampled_from(["one", "two", "prefix", "disagg"]))
    if topo == "two":
        kw["topology"] = Topology(
            replicas=2, router=draw(st.sampled_from(["round_robin", "least_outstanding"]))
        )
    elif topo == "prefix":
        kw["topology"] = Topology(replicas=2, router="prefix")
    elif topo == "disagg":
        kw["topology"] = Topology(
            prefill_replicas=1, decode_replicas=1, link_bandwidth=50e9, link_latency=1e-5
        )
    if draw(st.booleans()) and draw(st.booleans()):
        kw["spec"] = SpecConfig.parse("ngram", 3, "0.8,0.6,0.4", seed=seed % 7)
    if caching and draw(st.booleans()):
        # a host tier this large never drops a prefix: with 2e9 B the loop itself fails (an
        # AssertionError in KVTiers.load: Replica._promote's eviction can push out of the tier the
        # very prefix it then loads), with or without the closed form
        kw["kv_tiers"] = KVTierConfig(host_bytes=50e9)
    if draw(st.booleans()) and rate is not None:
        kw["concurrency"] = draw(st.integers(1, 8))
    prof = get_engine(engine)
    eng = profile_engine(prof, M, HW, enable_prefix_caching=caching, num_blocks=blocks)
    kw["overheads"] = prof.overheads(
        terms=draw(st.booleans()),
        max_num_seqs=eng.max_num_seqs,
        max_num_batched_tokens=eng.max_num_batched_tokens,
    )
    return reqs, eng, kw


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_workloads_equal_the_loop(engine, data):
    """Random workloads on every engine profile, with every feature: the closed form changes nothing."""
    reqs, eng, kw = data.draw(cases(engine))
    # a request longer than the token budget without chunked prefill is refused (tested elsewhere)
    assume(eng.enable_chunked_prefill or all(r.prompt + r.output <= eng.max_num_batched_tokens for r in reqs))
    _same(simulate(M, HW, reqs, engine=eng, skip=False, **kw), simulate(M, HW, reqs, engine=eng, **kw))


G = "qwen3-30b-a3b"  #: an MoE model (128 experts, top-8): data-parallel groups need experts


@st.composite
def group_cases(draw, engine):
    """A random workload on data-parallel groups (dp 2 or 4 ranks, one or two groups, experts whole
    or split, either dispatch) under an engine profile, prefix caching, closed loops, a small pool."""
    caching = draw(st.booleans())
    reqs, rate, _ = _workload(draw)
    dp = draw(st.sampled_from([2, 4]))
    topo = Topology(
        replicas=draw(st.sampled_from([1, 2])),
        dp=dp,
        expert_parallel=draw(st.booleans()),
        moe_dispatch=draw(st.sampled_from(["allgather_reducescatter", "all_to_all"])),
        router=draw(st.sampled_from(["round_robin", "least_outstanding"])),
    )
    need = math.ceil(max(r.prompt + r.output for r in reqs) / get_engine(engine).block_size) + 1
    blocks = draw(st.sampled_from([None, need, 3 * need]))
    prof = get_engine(engine)
    eng = profile_engine(prof, G, HW, dp=dp, enable_prefix_caching=caching, num_blocks=blocks)
    kw = {
        "topology": topo,
        "overheads": prof.overheads(
            terms=draw(st.booleans()),
            max_num_seqs=eng.max_num_seqs,
            max_num_batched_tokens=eng.max_num_batched_tokens,
        ),
    }
    if draw(st.booleans()) and rate is not None:
        kw["concurrency"] = draw(st.integers(1, 8))
    return reqs, eng, kw


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_data_parallel_groups_equal_the_loop(engine, data):
    """Inside a data-parallel group every rank keeps its steady decodes in closed form, and the
    group runs a window of iterations at once when every rank with work is in one (the ranks'
    windows' shortest, the stage at the group's constant tokens): every request's times and
    every record equal the loop's."""
    reqs, eng, kw = data.draw(group_cases(engine))
    assume(eng.enable_chunked_prefill or all(r.prompt + r.output <= eng.max_num_batched_tokens for r in reqs))
    _same(simulate(G, HW, reqs, engine=eng, skip=False, **kw), simulate(G, HW, reqs, engine=eng, **kw))


def test_a_saturated_group_runs_windows_and_equals_the_loop():
    """Far past a DP 2 + EP group's capacity: most iterations only decode, the group runs them in
    windows (fewer loop iterations than iterations), and the results are the loop's."""
    from graphs.serving.sim import data_parallel

    reqs = synthetic(300, rate=200.0, prompt="lognormal:300,1.0", output="lognormal:200,1.0", seed=1)
    topo = Topology(dp=2, expert_parallel=True)
    windows: list[int] = []
    original = data_parallel.LockstepGroup.decode_window

    def counted(self, now, horizon):
        ends = original(self, now, horizon)
        windows.append(len(ends))
        return ends

    ref = simulate(G, HW, reqs, topology=topo, rate=200.0, skip=False)
    data_parallel.LockstepGroup.decode_window = counted  # type: ignore[method-assign]
    try:
        got = simulate(G, HW, reqs, topology=topo, rate=200.0)
    finally:
        data_parallel.LockstepGroup.decode_window = original  # type: ignore[method-assign]
    _same(ref, got)
    assert sum(windows) > ref.iterations / 4  # a quarter of the ranks' iterations ran in windows


@pytest.mark.parametrize("predict", ["vllm", "trtllm"])
def test_a_predicted_group_keeps_closed_forms_and_equals_the_loop(predict):
    """With a predictor (no vectorised decode price: no windows) the ranks still keep their steady
    decodes in closed form; the times, and what the seconds rest on, are the loop's."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predictor import Predictor

    reqs = synthetic(60, rate=20.0, prompt="lognormal:300,1.0", output="lognormal:100,1.0", seed=2)
    kw = {"topology": Topology(dp=2, expert_parallel=True), "predictor": Predictor.of(predict), "rate": 20.0}
    ref, got = simulate(G, HW, reqs, skip=False, **kw), simulate(G, HW, reqs, **kw)
    for key in ref.per_request:
        np.testing.assert_allclose(got.per_request[key], ref.per_request[key], rtol=0, atol=1e-9, err_msg=key)
    assert got.coverage is not None and ref.coverage is not None
    assert got.coverage.total_s == pytest.approx(ref.coverage.total_s, rel=1e-12)
