"""Workloads as benchmark clients send them, against hand derivations.

* Constant arrivals: request ``i`` at exactly ``i / rate``.
* Closed loop, one client, a fixed workload: requests run strictly one after another, each E2E
  the prefill bound of the prompt plus the batch-1 decode steps, throughput ``1 / E2E``.
* A pool of one prompt: every request after the first is a whole-prompt cache hit (``n - 1``);
  spaced out, a pool of ``N`` gets ``n - distinct prompts used`` hits.
* Conversations: turn ``k``'s prompt is the previous prompt, its answer and the new message;
  turn ``k`` is sent ``think_s`` after the previous answer and prefills only what the previous
  turn did not leave in full cached blocks.
* A trace's ``prefix_id``/``prefix_tokens`` give the same cache hits as the same draw.
"""

import inspect
import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphs.serving
from costmodel.errors import CostModelError
from graphs import decode_report, prefill_report
from graphs.cli import main
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import arrival_times, load_trace, synthetic
from graphs.serving.sim.simulator import simulate
from graphs.serving.step.compiled import compiled_step

M = "llama-3.1-8b"
CACHED = EngineConfig(enable_prefix_caching=True)  # block_size 16


def test_simulate_takes_concurrency():
    """The benchmark of another helper calls ``graphs.serving.simulate(..., concurrency=N)``."""
    p = inspect.signature(graphs.serving.simulate).parameters["concurrency"]
    assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None


def test_constant_arrivals_are_exactly_spaced():
    t = arrival_times(7, 4.0, "constant", np.random.default_rng(0))
    assert t.tolist() == [i / 4.0 for i in range(7)]  # 0, 0.25, 0.5, ... exactly
    reqs = synthetic(5, rate=3.0, prompt="fixed:64", output="fixed:2", arrival="constant")
    assert [r.arrival_s for r in reqs] == [i / 3.0 for i in range(5)]
    res = simulate("tiny", "h100", reqs)
    assert res.per_request["arrival_s"].tolist() == [i / 3.0 for i in range(5)]
    assert res.offered_requests_per_s == pytest.approx(3.0)  # (5 - 1) / (4 / 3)


def test_no_rate_sends_everything_at_once():
    reqs = synthetic(4, rate=None, prompt="fixed:64", output="fixed:2")
    assert [r.arrival_s for r in reqs] == [0.0] * 4


def test_one_client_sends_strictly_one_request_after_another():
    p, n, count = 1000, 50, 4
    reqs = synthetic(count, rate=None, prompt=f"fixed:{p}", output=f"fixed:{n}")
    res = simulate(M, "h100", reqs, concurrency=1)
    # alone on the replica: TTFT the prefill bound, then decode steps at contexts P+1 ... P+n-1
    e2e = prefill_report(M, "h100", seq=p).step_s + sum(
        decode_report(M, "h100", batch=1, ctx=p + g).step_s for g in range(1, n)
    )
    pr = res.per_request
    assert pr["e2e_s"] == pytest.approx([e2e] * count, rel=1e-9)
    # request i + 1 is sent when request i's last token arrives
    finish = pr["arrival_s"] + pr["e2e_s"]
    assert pr["arrival_s"][1:] == pytest.approx(finish[:-1], rel=1e-12)
    assert res.requests_per_s == pytest.approx(1 / e2e, rel=1e-9)  # count / (count x E2E)
    assert res.mean_batch == pytest.approx(1.0)
    assert res.concurrency == 1 and res.steady_requests_per_s is None
    assert res.offered_requests_per_s is None


def test_think_time_spaces_a_clients_requests():
    reqs = synthetic(3, rate=None, prompt="fixed:64", output="fixed:4", think_s=0.25)
    res = simulate("tiny", "h100", reqs, concurrency=1)
    pr = res.per_request
    finish = pr["arrival_s"] + pr["e2e_s"]
    assert pr["arrival_s"][1:] == pytest.approx(finish[:-1] + 0.25, rel=1e-12)


def test_a_rate_with_a_client_cap_waits_for_a_free_client():
    """vllm bench serve --request-rate R --max-concurrency 1: request i is sent at
    max(i / R, the previous answer), never earlier than scheduled."""
    reqs = synthetic(6, rate=1000.0, prompt="fixed:512", output="fixed:8", arrival="constant")
    res = simulate(M, "h100", reqs, concurrency=1)
    pr = res.per_request
    finish = pr["arrival_s"] + pr["e2e_s"]
    expected = np.maximum([i / 1000.0 for i in range(1, 6)], finish[:-1])
    assert pr["arrival_s"][1:] == pytest.approx(expected, rel=1e-12)


def test_a_pool_of_one_prompt_hits_after_its_first_occurrence():
    n, p = 6, 1000
    reqs = synthetic(n, rate=None, prompt=f"fixed:{p}", output="fixed:5", prompt_pool=1)
    assert {(r.prefix_id, r.prefix) for r in reqs} == {(0, p)}
    res = simulate(M, "h100", reqs, engine=CACHED, concurrency=1)
    assert res.prefix_cache_hits == n - 1
    # 1000 // 16 = 62 full blocks = 992 cached tokens: a hit prefills the last 8 after them
    first = prefill_report(M, "h100", seq=p).step_s
    hit = compiled_step(M, "h100", "prefill", chunked=True).step(1, 8, 992)
    assert res.per_request["ttft_s"] == pytest.approx([first] + [hit] * (n - 1), rel=1e-9)
    off = simulate(M, "h100", reqs, engine=EngineConfig(), concurrency=1)  # caching off
    assert off.prefix_cache_hits == 0


def test_a_pool_repeats_its_prompts():
    """Spaced 100 s apart every request runs alone: each repeat of a pool prompt is a hit, so
    the hits are n minus the distinct prompts used (every cached prompt stays: KV is plentiful)."""
    reqs = synthetic(
        30, rate=0.01, prompt="uniform:100,900", output="fixed:3", arrival="constant", prompt_pool=4, seed=2
    )
    prompts = {r.prefix_id: r.prompt for r in reqs}
    assert len(prompts) <= 4 and all(r.prompt == prompts[r.prefix_id] == r.prefix for r in reqs)
    res = simulate(M, "h100", reqs, engine=CACHED)
    assert res.prefix_cache_hits == 30 - len(prompts)


def test_conversation_turns_extend_the_history():
    reqs = synthetic(2, rate=1.0, prompt="fixed:100", output="fixed:20", turns=3)
    # turn k: previous prompt + its answer + a new 100-token message
    assert [r.prompt for r in reqs] == [100, 220, 340] * 2  # 100; 100+20+100; 220+20+100
    assert [r.prefix for r in reqs] == [0, 120, 240] * 2  # the history before the new message
    assert [r.retain for r in reqs] == [True, True, False] * 2
    assert [(r.session, r.turn) for r in reqs] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    drawn = synthetic(5, rate=1.0, prompt="lognormal:300,1", output="lognormal:80,1", turns=4, seed=3)
    for a, b in itertools.pairwise(drawn):
        if a.session == b.session:
            assert b.prefix == a.prompt + a.output and b.prompt > b.prefix


def test_a_turn_is_sent_think_time_after_the_answer_and_prefills_only_the_new_tokens():
    reqs = synthetic(1, rate=1.0, prompt="fixed:100", output="fixed:20", turns=3, think_s=0.5)
    res = simulate(M, "h100", reqs, engine=CACHED)
    pr = res.per_request
    finish = pr["arrival_s"] + pr["e2e_s"]
    assert pr["arrival_s"][1:] == pytest.approx(finish[:-1] + 0.5, rel=1e-12)
    assert res.prefix_cache_hits == 2
    chunk = compiled_step(M, "h100", "prefill", chunked=True)
    # turn 0 computed 100 + 20 - 1 = 119 tokens (the last answer token never needs KV): 7 full
    # blocks = 112 cached, so turn 1 prefills 220 - 112 = 108; turn 1 computed 220 + 19 = 239:
    # 14 blocks = 224 cached, so turn 2 prefills 340 - 224 = 116
    ttft = [prefill_report(M, "h100", seq=100).step_s, chunk.step(1, 108, 112), chunk.step(1, 116, 224)]
    assert pr["ttft_s"] == pytest.approx(ttft, rel=1e-9)
    assert pr["session"].tolist() == [0, 0, 0] and pr["turn"].tolist() == [0, 1, 2]
    off = simulate(M, "h100", reqs, engine=EngineConfig())  # no caching: every turn prefills its whole prompt
    assert off.prefix_cache_hits == 0
    assert off.per_request["ttft_s"][1] == pytest.approx(prefill_report(M, "h100", seq=220).step_s, rel=1e-9)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 30),
    clients=st.integers(1, 6),
    turns=st.integers(1, 4),
    think=st.sampled_from([0.0, 0.01]),
    blocks=st.integers(30, 300),
    caching=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_a_closed_loop_never_has_more_requests_in_flight_than_clients(
    n, clients, turns, think, blocks, caching, seed
):
    """Whatever the knobs (scarce blocks included: preemption, eviction of retained turns):
    every request finishes once, at most ``clients`` are in flight at any send time, and a
    conversation's turns go one after another's answer."""
    reqs = synthetic(
        n, rate=None, prompt="uniform:1,60", output="uniform:1,12", turns=turns, think_s=think, seed=seed
    )
    eng = EngineConfig(num_blocks=blocks, max_num_batched_tokens=64, enable_prefix_caching=caching)
    res = simulate("tiny", "h100", reqs, engine=eng, concurrency=clients)
    pr = res.per_request
    sent, finish = pr["arrival_s"], pr["arrival_s"] + pr["e2e_s"]
    assert res.requests == n * turns and (pr["output"] == [r.output for r in reqs]).all()
    for t in sent:
        assert np.count_nonzero((sent <= t) & (finish > t)) <= clients
    for k in range(1, turns):  # the same conversation's next turn
        idx = np.flatnonzero(pr["turn"] == k)
        assert (sent[idx] >= finish[idx - 1] + think - 1e-12).all()


def _write_trace(path, reqs):
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n")
        for r in reqs:
            f.write(f"{r.arrival_s!r},{r.prompt},{r.output},system,{r.prefix}\n")


def test_a_traces_prefix_columns_give_the_synthetic_draws_cache_hits(capsys, tmp_path):
    """The issue's case: the trace got 0 hits where the same workload drawn got 39."""
    draw = ["--rate", "5", "--requests", "60", "--prompt", "lognormal:300,0.5", "--output", "fixed:20"]
    draw += ["--shared-prefix", "512", "--seed", "4"]
    path = tmp_path / "t.csv"
    _write_trace(
        path,
        synthetic(60, rate=5.0, prompt="lognormal:300,0.5", output="fixed:20", shared_prefix=512, seed=4),
    )
    runs = []
    for args in (draw, ["--trace", str(path)]):
        assert main(["simulate", M, *args, "--enable-prefix-caching", "--json", "--quiet"]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0]["prefix_cache_hits"] == runs[1]["prefix_cache_hits"] > 0
    assert runs[0]["ttft"] == runs[1]["ttft"]  # the very same requests: the same latencies


def test_a_trace_naming_one_prefix_with_two_lengths_is_refused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,900,5,a,512\n1,900,5,a,256\n"
    )
    with pytest.raises(
        CostModelError, match="row 2: prefix_id 'a' has prefix_tokens 256, but row 1 gave it 512"
    ):
        load_trace(path)


def test_simulate_command_closed_loop(capsys):
    args = [
        "simulate",
        M,
        "--concurrency",
        "2",
        "--requests",
        "6",
        "--prompt",
        "fixed:200",
        "--output",
        "fixed:8",
    ]
    assert main([*args, "--turns", "2", "--think-time", "0.1", "--enable-prefix-caching", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "--requests 6 conversations x --turns 2 = 12 requests" in out and "--think-time 0.1" in out
    assert "closed loop, 2 client(s)" in out and "no drain tail" in out and "prefix cache hits: 6" in out
    assert main([*args, "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["concurrency"] == 2 and data["steady_requests_per_s"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--trace", "t.csv", "--turns", "2"],
            "--trace fixes every request's prompt and arrival; drop --turns",
        ),
        (["--trace", "t.csv", "--rate", "2"], "drop --rate"),
        (["--rate", "2", "--turns", "2", "--prompt-pool", "3"], "--turns and --prompt-pool do not combine"),
        (["--rate", "2", "--prompt-pool", "3", "--shared-prefix", "9"], "--prompt-pool and --shared-prefix"),
        (["--rate", "2", "--think-time", "1"], "--think-time is a client's pause"),
        (["--concurrency", "2", "--arrival", "constant"], "--arrival constant shapes the gaps of --rate"),
        (["--max-rate", "--slo-ttft", "1", "--concurrency", "2"], "--max-rate searches an open-loop rate"),
        (["--concurrency", "0"], "--concurrency must be in [1, 10000000], got 0"),
        (["--turns", "0", "--rate", "1"], "--turns must be in [1, 10000], got 0"),
        (["--prompt-pool", "0", "--rate", "1"], "--prompt-pool must be in [1, 10000000], got 0"),
        (["--think-time", "-1", "--concurrency", "1"], "--think-time must be in [0, 1e+06], got -1"),
        (["--rate", "2", "--arrival", "uniform"], "arrival: 'uniform' is not poisson, constant, gamma:CV"),
        ([], "give --rate (requests/s), --concurrency N (clients), --trace FILE or --max-rate"),
    ],
)
def test_simulate_command_refuses_workloads_that_make_no_sense(capsys, args, message):
    assert main(["simulate", "tiny", *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"turns": 2, "prompt_pool": 3}, "prompt_pool and turns > 1 do not combine"),
        ({"turns": 2, "shared_prefix": 8}, "shared_prefix combines with neither"),
        ({"think_s": -1.0}, "think_s must be in [0, 1e+06] s"),
        ({"think_s": float("nan")}, "think_s must be in"),
        ({"turns": 0}, "turns must be a whole number in [1, 10000]"),
    ],
)
def test_synthetic_refuses(kwargs, message):
    with pytest.raises(CostModelError, match=message.replace("[", r"\[").replace("+", r"\+")):
        synthetic(3, rate=1.0, prompt="fixed:8", output="fixed:2", **kwargs)


def test_simulate_refuses_a_bad_concurrency():
    reqs = synthetic(2, rate=None, prompt="fixed:8", output="fixed:2")
    for bad in (0, True, 2.5):
        with pytest.raises(CostModelError, match="concurrency must be a whole number of clients"):
            simulate("tiny", "h100", reqs, concurrency=bad)


def test_staggered_closed_loop_sends_at_seeded_uniform_times_and_runs_apart():
    """``stagger_s``: the clients' first sends are ``sorted(default_rng(seed).uniform(0, T, N))``;
    spread over 1000 s, two 8-token answers never overlap, so each request sees exactly what it
    would see alone (the one-client loop of the same request)."""
    from graphs.serving.sim.simulator import closed_loop_cycle, simulate_steady_loop

    reqs = synthetic(2, rate=None, prompt="fixed:256", output="fixed:8")
    alone = simulate(M, "h100", reqs[:1], concurrency=1)
    res = simulate(M, "h100", reqs, concurrency=2, stagger_s=1000.0, stagger_seed=3)
    sends = np.sort(np.random.default_rng(3).uniform(0.0, 1000.0, 2))
    assert np.allclose(np.sort(res.per_request["arrival_s"]), sends)
    for key in ("ttft_s", "e2e_s"):
        assert np.allclose(res.per_request[key], alone.per_request[key][0])
    together = simulate(M, "h100", reqs, concurrency=2)
    assert np.allclose(
        simulate(M, "h100", reqs, concurrency=2, stagger_s=0.0).per_request["e2e_s"],
        together.per_request["e2e_s"],
    )
    # the steady loop: one run started together measures the cycle (median send-to-last-token)
    steady = simulate_steady_loop(M, "h100", reqs, concurrency=2)
    again = simulate(
        M, "h100", reqs, concurrency=2, stagger_s=float(np.median(together.per_request["e2e_s"]))
    )
    assert closed_loop_cycle(together) == float(np.median(together.per_request["e2e_s"]))
    assert np.array_equal(steady.per_request["arrival_s"], again.per_request["arrival_s"])


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"stagger_s": 5.0}, "concurrency"),
        ({"stagger_s": -1.0, "concurrency": 2}, "stagger_s"),
        ({"stagger_s": float("nan"), "concurrency": 2}, "stagger_s"),
    ],
)
def test_stagger_refusals(kw, field):
    reqs = synthetic(2, rate=None, prompt="fixed:64", output="fixed:2")
    with pytest.raises(CostModelError, match=field):
        simulate(M, "h100", reqs, **kw)


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (["--rate", "2", "--stagger", "5"], "--concurrency"),
        (["--concurrency", "2", "--stagger", "x"], "cycle"),
        (["--concurrency", "2", "--stagger", "-3"], "--stagger"),
    ],
)
def test_stagger_flag_refusals(capsys, extra, word):
    assert main(["simulate", "tiny", *extra]) == 2
    assert word in capsys.readouterr().err


def test_stagger_cycle_says_the_cycle(capsys):
    argv = ["simulate", "tiny", "--concurrency", "4", "--requests", "12", "--prompt", "fixed:64"]
    assert main([*argv, "--output", "fixed:4", "--stagger", "cycle"]) == 0
    assert "first sends drawn uniformly over" in capsys.readouterr().out
