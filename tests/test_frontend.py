"""The shared front end (:mod:`graphs.serving.engines.knobs`, module doc): one server that
detokenises and streams every output token of every running request, in tandem after the engine
loop. Pinned to the two-server pipeline's hand derivation."""

from __future__ import annotations

import pytest

from costmodel.errors import CostModelError
from graphs.serving.engines.knobs import EngineConfig, EngineOverheads, frontend_end_s
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate

MODEL, DEVICE = "llama-3.1-8b", "h100-sxm"
G, HW = "qwen3-30b-a3b", "h100"  #: an MoE model: data-parallel groups need experts


def _loop(clients: int, output: int = 200, prompt: int = 16) -> list[Request]:
    return [Request(rid=i, arrival_s=0.0, prompt=prompt, output=output) for i in range(4 * clients)]


def test_an_iteration_is_handed_over_once_the_front_end_has_drained_the_one_before() -> None:
    # E_{k+1} = max(S_{k+1} + g_{k+1}, F_k)
    assert frontend_end_s(1.0, 0.02, 0.5) == pytest.approx(1.02)  # engine-bound: 1 + 0.02
    assert frontend_end_s(1.0, 0.02, 1.05) == 1.05  # front-end-bound: F_k
    # two iterations of g = 10 ms each emitting n = 100 tokens at f = 0.2 ms (h = 20 ms):
    # E_1 = 0 + 10 ms (nothing pending), F_1 = E_1 + 20 ms = 30 ms, E_2 = max(E_1 + 10, F_1) = 30 ms
    e1 = frontend_end_s(0.0, 0.010, 0.0)
    e2 = frontend_end_s(e1, 0.010, e1 + 100 * 2e-4)
    assert (e1, e2) == (pytest.approx(0.010), pytest.approx(0.030))


@pytest.mark.parametrize("servers", [1, 2])
def test_a_front_end_bound_closed_loop_decodes_at_the_front_ends_rate(servers: int) -> None:
    # 64 clients decoding (16-token prompts: one short prefill each), f = 1 ms per token: the
    # front end takes n f / m = 64 x 1 ms / m per iteration, far above the 8B step on an H100
    # (~5 ms), so the period and the TPOT are 64 ms with one front end and 32 ms with two
    c, f = 64, 1e-3
    res = simulate(
        MODEL, DEVICE, _loop(c), concurrency=c, overheads=EngineOverheads(frontend_token_s=f),
        engine=EngineConfig(api_server_count=servers),
    )  # fmt: skip
    assert res.tpot.mean == pytest.approx(c * f / servers, rel=0.01)
    # the client's tokens/s is the front end's m / f (the prefills' iterations aside)
    assert res.output_tokens_per_s == pytest.approx(servers / f, rel=0.05)


def test_an_engine_bound_run_keeps_its_period() -> None:
    # 64 x 1 us = 64 us per iteration on the front end, far under the ~5 ms step: the period is
    # the step's (TPOT within the stamps' sub-microsecond shifts)
    c = 64
    base = simulate(MODEL, DEVICE, _loop(c), concurrency=c, overheads=EngineOverheads())
    fe = simulate(MODEL, DEVICE, _loop(c), concurrency=c, overheads=EngineOverheads(frontend_token_s=1e-6))
    assert fe.tpot.mean == pytest.approx(base.tpot.mean, rel=1e-3)


def test_a_lone_request_sees_its_tokens_one_front_end_token_later() -> None:
    # one request: every iteration emits n = 1 token, streamed (n + 1) / 2 x f = f after the
    # hand-over; the next iteration's g (~ms) exceeds the drain (f = 0.5 ms), so the period holds:
    # TTFT and E2E move by f, TPOT not at all
    f = 5e-4
    req = [Request(rid=0, arrival_s=0.0, prompt=64, output=20)]
    base = simulate(MODEL, DEVICE, req, overheads=EngineOverheads())
    fe = simulate(MODEL, DEVICE, req, overheads=EngineOverheads(frontend_token_s=f))
    assert fe.ttft.mean - base.ttft.mean == pytest.approx(f, rel=1e-6)
    assert fe.e2e.mean - base.e2e.mean == pytest.approx(f, rel=1e-6)
    assert fe.tpot.mean == pytest.approx(base.tpot.mean, rel=1e-9)


def test_the_decode_window_runs_the_front_end_as_the_loop_does() -> None:
    # the closed-form window (skip) and the per-iteration loop give the same times, front end bound
    c, ov = 32, EngineOverheads(frontend_token_s=4e-4)  # 32 x 0.4 ms = 12.8 ms > the step
    a = simulate(MODEL, DEVICE, _loop(c, output=300), concurrency=c, overheads=ov, skip=True)
    b = simulate(MODEL, DEVICE, _loop(c, output=300), concurrency=c, overheads=ov, skip=False)
    assert (a.ttft.mean, a.tpot.mean, a.e2e.mean) == pytest.approx(
        (b.ttft.mean, b.tpot.mean, b.e2e.mean), rel=1e-9
    )


def test_bad_front_end_knobs_are_refused() -> None:
    with pytest.raises(CostModelError, match="api_server_count"):
        EngineConfig(api_server_count=0)
    with pytest.raises(CostModelError, match="frontend_token_s"):
        EngineOverheads(frontend_token_s=-1e-6)
    # a fit file written before the term existed had no front end: 0
    d = EngineOverheads(request_s=0.02).to_dict()
    del d["frontend_token_s"]
    assert EngineOverheads.from_dict(d).frontend_token_s == 0.0


def test_a_data_parallel_group_runs_its_front_end_as_the_loop_does() -> None:
    # a DP 2 + EP group past capacity, one front end for the group (n = both ranks' tokens) at
    # 0.2 ms per token: the group's windows and the loop agree
    from graphs.serving.sim.requests import synthetic
    from graphs.serving.sim.simulator import Topology

    reqs = synthetic(200, rate=200.0, prompt="lognormal:300,1.0", output="lognormal:200,1.0", seed=1)
    kw = {"topology": Topology(dp=2, expert_parallel=True), "rate": 200.0}
    ov = EngineOverheads(frontend_token_s=2e-4)
    a = simulate(G, HW, reqs, overheads=ov, skip=True, **kw)
    b = simulate(G, HW, reqs, overheads=ov, skip=False, **kw)
    base = simulate(G, HW, reqs, skip=True, **kw)
    assert (a.ttft.mean, a.tpot.mean) == pytest.approx((b.ttft.mean, b.tpot.mean), rel=1e-9)
    assert a.tpot.mean > base.tpot.mean  # the front end binds
