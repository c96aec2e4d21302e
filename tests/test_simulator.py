"""The serving simulator against hand derivations and queueing theory.

* A mixed iteration of D decodes at one context is the compiled decode step; one chunk is the
  compiled chunked-prefill step.
* At a rate so low that requests never overlap, TTFT is the prefill bound of the prompt and TPOT
  the mean of the batch-1 decode steps the request runs (contexts P+1 ... P+n-1).
* Little's law: the replicas' own queue records average to rate x mean latency within 2 %.
* M/D/1: one sequence at a time, fixed lengths, Poisson arrivals: the mean wait is
  rho S / (2 (1 - rho)) (Pollaczek-Khinchine with deterministic service S) within 5 %.
* Scarce KV blocks force preemptions, and every request still finishes exactly once.
"""

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs import decode_report, prefill_report
from graphs.cli import main
from graphs.serving.planning.capacity_search import max_rate
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request, load_trace, synthetic
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.mixed import mixed_step

M = "llama-3.1-8b"


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3"])
def test_mixed_step_reduces_to_the_compiled_steps(model):
    hw = get_device("h100")
    ms = mixed_step(model, hw)
    dec = compiled_step(model, hw, "decode")
    chunk = compiled_step(model, hw, "prefill", chunked=True)
    for d, ctx in ((1, 100), (37, 4096), (256, 32768)):
        assert math.isclose(ms.time([ctx] * d), dec.step(d, ctx), rel_tol=1e-9)
    for c, p in ((512, 0), (2048, 4096), (1, 7)):
        assert math.isclose(ms.time(chunks=[(c, p)]), chunk.step(1, c, p), rel_tol=1e-9)
    # contexts enter decode attention linearly: a spread of contexts costs what their mean does
    assert math.isclose(ms.time([1000, 3000]), ms.time([2000, 2000]), rel_tol=1e-12)


@pytest.mark.parametrize("model", ["gemma-3-27b", "gpt-oss-20b"])
def test_sliding_window_mixed_step_reduces_to_the_compiled_steps(model):
    """A sliding-window layer's decode attention reads min(W, ctx) cached keys (gemma-3: W = 1024
    on five layers in six; gpt-oss: W = 128 on every other layer, with learned sinks read once
    per kernel): the mixed step equals the compiled decode step on both sides of the window;
    contexts below the window cost what their mean does, and across it less (min(W, 100) +
    min(W, 8000) < 2 min(W, 4050) for W = 128 and W = 1024)."""
    hw = get_device("h200")
    ms = mixed_step(model, hw)
    assert ms.windowed
    dec = compiled_step(model, hw, "decode")
    for d, ctx in ((1, 100), (8, 1000), (37, 4096), (16, 32768)):
        assert math.isclose(ms.time([ctx] * d), dec.step(d, ctx), rel_tol=1e-9)
    # below the window the windowed layers read every key: linear, a spread equals its mean
    assert math.isclose(ms.time([40, 80]), ms.time([60, 60]), rel_tol=1e-12)
    # across it the windowed layers read at most W of the long one's keys: cheaper than the mean
    assert ms.time([100, 8000]) < ms.time([4050, 4050])


def test_lone_requests_see_the_bounds():
    p, n = 1500, 40
    reqs = [Request(i, 100.0 * i, p, n) for i in range(3)]
    res = simulate(M, "h100", reqs)
    ttft = prefill_report(M, "h100", seq=p).step_s
    tpot = sum(decode_report(M, "h100", batch=1, ctx=p + g).step_s for g in range(1, n)) / (n - 1)
    assert res.per_request["ttft_s"] == pytest.approx([ttft] * 3, rel=1e-9)
    assert res.per_request["tpot_s"] == pytest.approx([tpot] * 3, rel=1e-9)
    assert res.preemptions == 0 and res.requests == 3


@pytest.mark.slow
def test_littles_law():
    reqs = synthetic(3000, rate=25.0, prompt="lognormal:800,0.8", output="lognormal:200,0.8", seed=3)
    res = simulate(M, "h100", reqs)
    rate = res.requests / res.duration_s
    assert res.mean_in_system == pytest.approx(rate * res.e2e.mean, rel=0.02)


@pytest.mark.slow
def test_md1_queueing_delay():
    p, n = 256, 4
    service = prefill_report(M, "h100", seq=p).step_s + sum(
        decode_report(M, "h100", batch=1, ctx=p + g).step_s for g in range(1, n)
    )
    rho = 0.6
    reqs = synthetic(20000, rate=rho / service, prompt=f"fixed:{p}", output=f"fixed:{n}", seed=11)
    eng = EngineConfig(max_num_seqs=1, enable_chunked_prefill=False)
    res = simulate(M, "h100", reqs, engine=eng)
    wait = res.per_request["ttft_s"] - prefill_report(M, "h100", seq=p).step_s
    assert wait.mean() == pytest.approx(rho * service / (2 * (1 - rho)), rel=0.05)
    assert res.mean_batch == pytest.approx(1.0)


def test_scarce_blocks_preempt_and_every_request_finishes_once():
    reqs = synthetic(300, rate=200.0, prompt="uniform:200,600", output="uniform:50,300", seed=5)
    res = simulate(M, "h100", reqs, engine=EngineConfig(num_blocks=400))
    assert res.preemptions > 0
    assert res.requests == 300 and int(res.per_request["preemptions"].sum()) == res.preemptions
    assert (res.per_request["e2e_s"] >= res.per_request["ttft_s"]).all()
    assert (res.per_request["output"] == [r.output for r in reqs]).all()


def test_disaggregated_lone_request():
    """vLLM's P/D flow (the simulator's module doc): the prefill instance's token is discarded;
    after the KV transfer (prompt x KV bytes per token / link + layers x latency) the decode
    instance computes the prompt's last token, a decode step at ctx P, and streams the first
    token; then one decode step per further token at ctx P+1 .. P+n-1. TTFT is serve disagg's
    prefill + transfer + first decode."""
    from graphs.serving.analysis.disagg import disaggregated

    p, n, bw, lat = 2000, 3, 25e9, 1e-5
    topo = Topology(prefill_replicas=1, decode_replicas=2, link_bandwidth=bw, link_latency=lat)
    res = simulate(M, "h100", [Request(0, 0.0, p, n)], topology=topo)
    kv = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, bf16
    t_pf = prefill_report(M, "h100", seq=p).step_s
    t_kv = p * kv / bw + 32 * lat
    first = decode_report(M, "h100", batch=1, ctx=p).step_s
    steps = sum(decode_report(M, "h100", batch=1, ctx=p + g).step_s for g in range(1, n))
    assert res.per_request["ttft_s"][0] == pytest.approx(t_pf + t_kv + first, rel=1e-9)
    assert res.per_request["e2e_s"][0] == pytest.approx(t_pf + t_kv + first + steps, rel=1e-9)
    assert res.topology.devices == 3 and res.per_request["output"][0] == n
    rep = disaggregated(
        M, "h100", "h100", prompt=p, output=n, decode_batch=1, link_bandwidth=bw, link_latency=lat, overlap="after"
    )
    assert rep.ttft.ttft_s == pytest.approx(res.per_request["ttft_s"][0], rel=1e-9)


def test_serve_disagg_and_simulate_disagg_default_to_one_link_latency():
    # `serve disagg` defaulted to 5 us per layer and `simulate --disagg` / `size` to 0: with the
    # same link bandwidth the lone request's TTFT differed by 32 x 5 us. Each command's own
    # default answer, through its typed request (size's through the simulator's Topology), must
    # now be the other's.
    from graphs.serving.analysis.serve_requests import DisaggRequest
    from graphs.serving.planning.cost import device_rates
    from graphs.serving.present.serve_summaries import run_disagg
    from graphs.serving.sim.simulation_request import SimulationRequest
    from models import get_model

    p, bw = 2000, 50e9
    served = run_disagg(
        DisaggRequest(prefill_device="h100", decode_device="h100", prompt=p, output=3, decode_batch=1),
        get_model(M),
        rates={"h100": device_rates("h100")},
    )
    sim_default = {f.name: f.default for f in dataclasses.fields(SimulationRequest)}["link_latency"]
    assert DisaggRequest().link_bandwidth == bw and sim_default == DisaggRequest().link_latency == 0.0
    topo = Topology(prefill_replicas=1, decode_replicas=1, link_bandwidth=bw)  # size's candidates
    res = simulate(M, "h100", [Request(0, 0.0, p, 3)], topology=topo)
    assert served.result.ttft.ttft_s == pytest.approx(res.per_request["ttft_s"][0], rel=1e-9)


def test_replicas_share_the_load():
    reqs = synthetic(400, rate=60.0, prompt="fixed:500", output="fixed:100", seed=2)
    one = simulate(M, "h100", reqs)
    two = simulate(M, "h100", reqs, topology=Topology(replicas=2, router="round_robin"))
    assert two.ttft.p99 < one.ttft.p99 and two.topology.devices == 2


@pytest.mark.slow
def test_max_rate_brackets_the_slo():
    m = max_rate(M, "h100", slo_ttft=0.5, slo_tpot=0.03, requests=200, rel_tol=0.05)
    assert m.rate is not None and m.at_rate is not None
    met = [r for r, ok, *_ in m.probes if ok]
    missed = [r for r, ok, *_ in m.probes if not ok]
    assert m.rate == max(met) and min(missed) > m.rate
    assert min(missed) / m.rate <= 1.05 + 1e-9


def test_traces(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n')
    assert [r.prompt for r in load_trace(csv)] == [100, 200] and load_trace(jl)[0].output == 10
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n1,100,10\n0.5,200,20\n")
    with pytest.raises(CostModelError, match=r"row 2: arrival_s 0\.5 is before"):
        load_trace(bad)
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0,abc,10\n")
    with pytest.raises(CostModelError, match="row 1: prompt_tokens must be a whole number, got 'abc'"):
        load_trace(bad)
    bad.write_text("arrival_s,prompt_tokens\n0,10\n")
    with pytest.raises(CostModelError, match="missing field 'output_tokens'"):
        load_trace(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "-1"], "--rate must be in"),
        (["--rate", "2", "--output", "fixed:0"], "output: fixed length"),
        (["--rate", "2", "--max-num-batched-tokens", "8"], "smaller than one KV block"),
        (["--rate", "2", "--prompt", "weibull:3"], "prompt: 'weibull:3' is not"),
        (["--rate", "2", "--disagg", "1:2"], "--disagg needs --link-bandwidth"),
        (
            ["--rate", "2", "--no-chunked-prefill", "--max-num-batched-tokens", "64"],
            "without chunked prefill",
        ),
        ([], "give --rate"),
    ],
)
def test_simulate_command_errors(capsys, args, message):
    assert main(["simulate", "tiny", *args, "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_simulate_command(capsys, tmp_path):
    f = tmp_path / "req.csv"
    args = [
        "simulate",
        M,
        "--rate",
        "10",
        "--requests",
        "200",
        "--slo-ttft",
        "1",
        "--slo-tpot",
        "0.05",
        "--quiet",
    ]
    assert main([*args, "--csv", str(f)]) == 0
    out = capsys.readouterr().out
    assert "TTFT s" in out and "goodput" in out and len(f.read_text().splitlines()) == 201
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["requests"] == 200 and data["ttft"]["p99_s"] >= data["ttft"]["p50_s"]


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 60),
    rate=st.floats(0.5, 500.0),
    blocks=st.integers(20, 400),
    budget=st.sampled_from([16, 64, 512]),
    seqs=st.integers(1, 32),
    chunked=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_every_request_is_served_exactly_once(n, rate, blocks, budget, seqs, chunked, seed):
    """Whatever the knobs: each request finishes once with all its tokens, in causal order."""
    hi = budget // 2 if not chunked else 120
    reqs = synthetic(n, rate=rate, prompt=f"uniform:1,{max(1, hi - 8)}", output="uniform:1,8", seed=seed)
    eng = EngineConfig(
        max_num_batched_tokens=budget, max_num_seqs=seqs, num_blocks=blocks, enable_chunked_prefill=chunked
    )
    res = simulate("tiny", "h100", reqs, engine=eng)
    pr = res.per_request
    assert res.requests == n and (pr["output"] == [r.output for r in reqs]).all()
    assert (pr["ttft_s"] > 0).all() and (pr["e2e_s"] >= pr["ttft_s"]).all()
    assert int(pr["preemptions"].sum()) == res.preemptions


def test_a_cached_prefix_is_not_recomputed():
    """Two lone requests sharing a 2048-token system prompt: the first prefills all 2048 + 500
    tokens; the second only its 500 own tokens, attending over the 2048 cached ones."""
    reqs = [Request(i, 100.0 * i, 2048 + 500, 20, prefix_id=7, prefix=2048) for i in range(2)]
    res = simulate(M, "h100", reqs, engine=EngineConfig(enable_prefix_caching=True))
    first = prefill_report(M, "h100", seq=2548).step_s
    second = compiled_step(M, "h100", "prefill", chunked=True).step(1, 500, 2048)
    assert res.per_request["ttft_s"] == pytest.approx([first, second], rel=1e-9)
    assert res.prefix_cache_hits == 1
    off = simulate(M, "h100", reqs, engine=EngineConfig())  # caching off (vLLM V1's default is on)
    assert off.per_request["ttft_s"] == pytest.approx([first, first], rel=1e-9)


def test_the_iteration_log_keeps_every_record_in_order_across_its_folds():
    """A replica's per-iteration records, folded into float64 blocks as they accumulate, read
    back as the tuples appended, in order (here folded every 3 records)."""
    from graphs.serving.sim.engine import IterationLog

    class Small(IterationLog):
        CHUNK = 3

    log, tuples = Small(), []
    assert len(log) == 0 and log.last() is None and log.array().shape == (0, 5)
    for i in range(4):
        rec = (0.5 * i, i + 1, 2, i, 0.25)
        log.append(rec)
        tuples.append(rec)
    more = [(2.0 + i, 7, 0, 7, 0.75) for i in range(5)]
    log.extend(more)
    tuples.extend(more)
    assert len(log) == 9 and log.last() == (6.0, 7, 0, 7, 0.75)
    np.testing.assert_array_equal(log.array(), np.array(tuples, dtype=float))
    log.append((6.5, 0, 0, 0, 0.0))
    log.fold()  # everything in blocks: the last record read from the last one
    assert log.last() == (6.5, 0.0, 0.0, 0.0, 0.0) and len(log) == 10
    flat = IterationLog()
    flat.extend([*tuples, (6.5, 0, 0, 0, 0.0)])
    assert flat == log and flat != Small()


def test_a_run_is_the_same_whatever_its_records_fold_at(monkeypatch):
    """The timeline and the means built from it do not depend on when the records were folded:
    a run whose replicas fold every 5 records equals one that never folds."""
    from graphs.serving.sim import engine as eng

    reqs = synthetic(400, rate=30000.0, prompt="uniform:20,400", output="uniform:2,60", seed=3)
    topo = Topology(replicas=2)
    one = simulate("tiny", "h100", reqs, topology=topo)
    monkeypatch.setattr(eng.IterationLog, "CHUNK", 5)
    other = simulate("tiny", "h100", reqs, topology=topo)
    assert one.iterations > 50 and len(one.timeline["t"]) > 50
    for k, v in one.timeline.items():
        np.testing.assert_array_equal(other.timeline[k], v)
    assert (other.mean_batch, other.mean_kv_utilisation, other.mean_in_system) == (
        one.mean_batch,
        one.mean_kv_utilisation,
        one.mean_in_system,
    )
    assert np.all(np.diff(one.timeline["t"]) >= 0)  # in time order across the two replicas


def test_a_pure_state_space_model_is_simulated_its_state_bounding_the_batch():
    """A review found `simulate mamba2-2.7b` refused with "no room for a KV block ... leaves
    nothing" on an H100 with some 70 GB free: the model caches nothing per token, so the token
    pool was empty. Its sequences' recurrent state fills the memory instead: by hand, 0.9 x 20e9
    B - 10e9 B of weights = 8e9 B free holds 8 states of 1e9 B, and tokens never bind."""
    from types import SimpleNamespace

    from graphs.serving.sim.engine import UNBOUND_BLOCKS, EngineConfig, kv_blocks, state_sequences

    led = SimpleNamespace(
        weights_bytes=10e9, kv_bytes_per_token=0.0, activation_bytes_per_token=0.0, state_bytes_per_sequence=1e9
    )
    cfg = EngineConfig(gpu_memory_utilization=0.9)
    assert kv_blocks(led, 20e9, cfg) == UNBOUND_BLOCKS
    assert state_sequences(led, 20e9, cfg) == 8
    with pytest.raises(CostModelError, match="no room for one sequence's recurrent state"):
        state_sequences(SimpleNamespace(**{**vars(led), "state_bytes_per_sequence": 9e9}), 20e9, cfg)
    res = simulate("mamba2-2.7b", "h100", synthetic(20, rate=5.0, prompt="fixed:500", output="fixed:50", seed=0))
    assert res.requests == 20 and np.isfinite(res.per_request["e2e_s"]).all()
    # on a 24 GB L4 the state caps the batch below max_num_seqs 256, and the run says so
    small = simulate("mamba2-2.7b", "l4", synthetic(300, rate=50.0, prompt="fixed:100", output="fixed:20", seed=0))
    assert small.state_capped is not None and small.state_capped[0] < 256
    assert small.timeline["running"].max() <= small.state_capped[0]


def test_a_burst_starts_with_its_first_request_alone():
    """A review sent four 2,048-token prompts at t = 0 and read the first scheduled alone (TTFT
    34 ms), the others an iteration later (136 ms), where `prefill --batch 4` prices one step of
    all four. The simulator's choice (module doc): an idle engine starts on the first arrival, as a
    server's loop does with a burst its front end hands over one by one. The first's TTFT is the
    one-prompt step; the other three's its end plus the next step (their three prompts and the
    first's decode)."""
    reqs = [Request(i, 0.0, 2048, 2) for i in range(4)]
    res = simulate(M, "h100", reqs)
    step = mixed_step(M, "h100")
    alone = step.time(chunks=[(2048, 0)])
    rest = step.time([2049], chunks=[(2048, 0)] * 3)
    assert res.per_request["ttft_s"] == pytest.approx([alone] + [alone + rest] * 3, rel=1e-12)
