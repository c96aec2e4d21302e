"""The serving simulator under metamorphic properties a serving engineer expects, across engine
profiles: each test states the property and pins it to another path's answer or to the input.

* An engine profile's config schedules as the engine does through the library alone: a
  TensorRT-LLM config (``guaranteed_no_evict``) never preempts, with or without the overheads
  the command line passes (both paths give the same requests the same latencies).
* Without chunked prefill TensorRT-LLM needs a prompt, not prompt + output, to fit the token
  budget (its MicroBatchScheduler counts a context's remaining length); vLLM's recompute needs
  prompt + output (a preempted sequence re-prefills what it generated).
* Conservation on random small runs of every policy: each request finishes once, TTFT <= E2E,
  E2E = TTFT + (output - 1) TPOT, the throughput is the output over the duration, the batch
  never exceeds ``max_num_seqs``, and the event-skipping run equals the per-iteration loop.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.engines import get_engine
from graphs.serving.sim.engine import profile_engine
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import simulate

M, D = "llama-3.1-8b", "h100-sxm"


def _tight_run(engine: str):
    """80 requests at 40/s on a 150-block pool: where recompute preempts (test_overheads' shape)."""
    reqs = synthetic(80, rate=40.0, prompt="uniform:100,1500", output="uniform:20,400", seed=3)
    return reqs, profile_engine(get_engine(engine), M, D, num_blocks=150)


def test_a_trtllm_profile_config_schedules_without_eviction_through_the_library():
    reqs, cfg = _tight_run("trtllm")
    assert cfg.scheduler_policy == "guaranteed_no_evict"  # the profile's policy, in its config
    alone = simulate(M, D, reqs, engine=cfg)  # the library: no overheads given
    # the command line's path: the profile's overheads for the bound carry the policy too
    cli = simulate(M, D, reqs, engine=cfg, overheads=get_engine("trtllm").overheads(terms=False))
    assert alone.preemptions == cli.preemptions == 0
    np.testing.assert_array_equal(alone.per_request["ttft_s"], cli.per_request["ttft_s"])
    # the same config under vLLM's recompute does preempt here: the policy is what differs
    recompute = simulate(M, D, reqs, engine=dataclasses.replace(cfg, scheduler_policy="recompute"))
    assert recompute.preemptions > 0


def test_a_recompute_profile_config_leaves_the_policy_to_the_default():
    for name in ("vllm", "vllm@0.6", "sglang"):
        assert profile_engine(get_engine(name), M, D, num_blocks=500).scheduler_policy is None


def test_no_evict_without_chunked_prefill_needs_only_the_prompt_in_the_budget():
    # trtllm@1.0 (trtllm-serve): chunked prefill off, 8,192 tokens per iteration
    cfg = profile_engine(get_engine("trtllm"), M, D)
    assert (cfg.enable_chunked_prefill, cfg.max_num_batched_tokens) == (False, 8192)
    reqs = [Request(0, 0.0, prompt=8000, output=500)]  # 8,000 <= 8,192 < 8,500
    res = simulate(M, D, reqs, engine=cfg)
    assert res.per_request["output"].tolist() == [500]
    with pytest.raises(
        CostModelError,
        match=r"request 0 \(9000 prompt tokens\) is longer than max_num_batched_tokens \(8192\)",
    ):
        simulate(M, D, [Request(0, 0.0, prompt=9000, output=10)], engine=cfg)
    # recompute re-prefills prompt + generated: the whole request must fit
    vllm = dataclasses.replace(profile_engine(get_engine("vllm"), M, D), enable_chunked_prefill=False)
    with pytest.raises(
        CostModelError, match=r"\(8000 \+ 500 tokens\) is longer than max_num_batched_tokens \(8192\)"
    ):
        simulate(M, D, reqs, engine=vllm)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    engine=st.sampled_from(["vllm", "vllm@0.6", "sglang", "trtllm", "trtllm-bench"]),
    blocks=st.integers(30, 300),
    seqs=st.integers(1, 32),
    budget=st.sampled_from([256, 2048, 8192]),
    chunked=st.booleans(),
    caching=st.booleans(),
    n=st.integers(1, 25),
    seed=st.integers(0, 1000),
    rate=st.sampled_from([None, 5.0, 200.0]),
)
def test_conservation_and_skipping_on_random_small_runs(
    engine, blocks, seqs, budget, chunked, caching, n, seed, rate
):
    prof = get_engine(engine)
    reqs = synthetic(
        n, rate=rate, prompt="uniform:1,600", output="uniform:1,200", seed=seed, shared_prefix=64
    )
    cfg = profile_engine(
        prof, M, D, num_blocks=blocks * (16 if prof.block_size == 1 else 1), enable_prefix_caching=caching
    )
    cfg = dataclasses.replace(
        cfg, max_num_seqs=seqs, max_num_batched_tokens=budget, enable_chunked_prefill=chunked
    )
    try:
        res = simulate(M, D, reqs, engine=cfg)
    except CostModelError:  # a request longer than the pool or the budget allows: refused, fine
        return
    pr = res.per_request
    ttft, e2e, tpot, out = pr["ttft_s"], pr["e2e_s"], pr["tpot_s"], pr["output"]
    assert sorted(out.tolist()) == sorted(r.output for r in reqs)  # each finished, once
    assert (ttft <= e2e).all()
    more = out > 1
    np.testing.assert_allclose(ttft[more] + (out[more] - 1) * tpot[more], e2e[more], rtol=1e-9)
    assert res.output_tokens_per_s == pytest.approx(out.sum() / res.duration_s, rel=1e-12)
    assert int(res.timeline["batch"].max()) <= seqs
    if prof.policy == "guaranteed_no_evict":
        assert res.preemptions == 0
    loop = simulate(M, D, reqs, engine=cfg, skip=False)
    np.testing.assert_array_equal(loop.per_request["e2e_s"], e2e)
    assert loop.preemptions == res.preemptions


def test_one_acceptance_rate_holds_for_every_position_as_the_command_reads_it():
    from graphs.serving.sim.specdec_sim import SpecConfig

    cli = SpecConfig.parse("ngram", 3, "0.7")  # --spec-accept 0.7 with --spec-k 3
    assert cli.accept == (0.7, 0.7, 0.7)
    assert SpecConfig("ngram", 3, 0.7).accept == SpecConfig("ngram", 3, (0.7,)).accept == cli.accept
    with pytest.raises(CostModelError, match="must be one rate in \\[0, 1\\] or k of them, got str 'x'"):
        SpecConfig("ngram", 3, "x")  # type: ignore[arg-type]
    with pytest.raises(CostModelError, match="has 2 per-position rate\\(s\\) for k = 3"):
        SpecConfig("ngram", 3, (0.7, 0.6))
