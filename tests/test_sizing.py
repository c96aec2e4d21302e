"""Cost per token and sizing (graphs.serving.planning.cost, graphs.serving.planning.sizing, costmodel size).

* Prices: the catalog's hourly rates are the figures of their cited pages.
* Cost arithmetic against hand derivations: N devices x (price + TDP u e / 1000) per hour, over
  the tokens per hour served at the operating point (one definition for every command).
* Phase attribution in the simulator: a request alone runs one prefill iteration (all input) and
  batch-1 decodes (all output).
* Sizing: the winner equals brute force (every candidate of a small grid simulated).
"""

import functools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs.cli import main
from graphs.serving.planning.cost import (
    NO_PRICE,
    decode_cost,
    device_rates,
    parse_prices,
    sim_cost,
    token_cost,
)
from graphs.serving.planning.sizing import Deployment, _key, _pct, size_deployment
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.step.mixed import mixed_step


@pytest.mark.parametrize(
    "device, usd",
    [
        ("h100", 4.916),  # AWS EC2 Capacity Blocks, p5.48xlarge: $39.33 per instance-hour / 8 GPUs
        ("h200", 5.408),  # p5e.48xlarge: $43.26 / 8
        ("a100", 1.844),  # p4d.24xlarge: $14.75 / 8
        ("b200", 6.03),  # Spheron on-demand B200 SXM, 2026-03-17
    ],
)
def test_catalog_prices_are_their_sources(device, usd):
    hw = get_device(device)
    assert float(hw.price_usd_per_hour) == usd
    assert f"{usd:g}" in hw.price_source.replace("$", "")


def test_a_device_without_a_price_has_none():
    rates = device_rates("mi300x")
    assert rates.price_usd_per_hour is None
    assert token_cost([(rates, 1)], input_tokens_per_s=1, output_tokens_per_s=1, basis="x") is None
    assert NO_PRICE == "no price: pass --price-per-hour"
    assert device_rates("mi300x", price_per_hour=3.0).price_usd_per_hour == 3.0


def test_token_cost_by_hand():
    # 4 devices at $2/h plus 700 W x 0.5 busy at $0.10/kWh = 2 + 0.035 = $2.035 per device-hour,
    # $8.14/h; serving 500 input + 100 output tokens/s = 1.8e6 + 3.6e5 tokens per hour
    rates = device_rates("h100", price_per_hour=2.0, electricity_per_kwh=0.10)
    c = token_cost(
        [(rates, 4)], input_tokens_per_s=500, output_tokens_per_s=100, basis="by hand", utilisation=0.5
    )
    assert c.usd_per_hour == pytest.approx(4 * 2.035)
    assert c.usd_per_m_input == pytest.approx(8.14 / 1.8e6 * 1e6)  # $4.522 per M input alone
    assert c.usd_per_m_output == pytest.approx(8.14 / 3.6e5 * 1e6)  # $22.61 per M output alone
    assert c.usd_per_m_tokens == pytest.approx(8.14 / 2.16e6 * 1e6)  # $3.769 per M, every token once
    assert 1 / c.usd_per_m_tokens == pytest.approx(1 / c.usd_per_m_input + 1 / c.usd_per_m_output)
    assert "$8.14/h for 4 device(s) / 500 input + 100 output tokens/s" in c.line()


def test_pools_of_two_device_kinds_are_all_priced():
    # 1 B200 at $6.03/h and 2 H100 at $4.916/h = $15.862/h over 1,024 output tokens/s
    c = token_cost(
        [(device_rates("b200"), 1), (device_rates("h100"), 2)],
        input_tokens_per_s=16384,
        output_tokens_per_s=1024,
        basis="x",
    )
    assert c.devices == 3 and c.usd_per_hour == pytest.approx(15.862)
    assert c.usd_per_m_output == pytest.approx(15.862 / 3600 / 1024 * 1e6)  # $4.303


def test_decode_cost_by_hand():
    # 8 devices at $3/h = $24/h = $1/150 per s; batch 64 at TPOT 20 ms: 3200 tokens/s, so
    # $1/150 / 3200 per token = $13.89 per M output, 100 % busy, and no input
    rates = device_rates("h100", price_per_hour=3.0)
    c = decode_cost(rates, devices=8, batch=64, tpot_s=0.02)
    assert c.usd_per_m_output == pytest.approx(1e6 / 150 / 3200)
    assert c.usd_per_m_input is None and c.usd_per_m_tokens == c.usd_per_m_output
    assert "100 % busy" in c.line()


def test_electricity_without_a_tdp_is_an_error():
    rates = device_rates("tpu-v5e", price_per_hour=1.0, electricity_per_kwh=0.1)
    with pytest.raises(CostModelError, match="no power figure"):
        token_cost([(rates, 1)], input_tokens_per_s=1, output_tokens_per_s=1, basis="x")


@pytest.mark.parametrize(
    "text, match",
    [
        ("abc", "USD per device-hour"),
        ("0", "must be in"),
        ("h100=nan", "must be in"),
        ("a100=2", "not among"),
        ("h100-sxm=1,h100-sxm=2", "prices h100-sxm twice .'h100-sxm=1' and 'h100-sxm=2'"),
        ("h100=1,b200=2,h100-sxm=3", "prices h100-sxm twice .'h100=1' and 'h100-sxm=3'"),
        ("3,h100=2", "'3' prices every device; give it alone"),
    ],
)
def test_bad_prices_are_one_line_errors(text, match):
    with pytest.raises(CostModelError, match=match):
        parse_prices(text, ["h100", "b200"])


def test_prices_by_device():
    assert parse_prices("h100=4,b200=6.5", ["h100", "b200"]) == {"h100-sxm": 4.0, "b200": 6.5}
    assert parse_prices("3", ["h100", "b200"]) == {"h100-sxm": 3.0, "b200": 3.0}


def test_a_request_alone_splits_into_its_prefill_and_its_decodes():
    """One request, prompt 1000 and 11 output tokens, alone: one prefill iteration (the whole
    prompt fits the 8192-token budget: all input) and 10 batch-1 decodes (all output)."""
    m = "llama-3.1-8b"
    res = simulate(m, "h100", [Request(0, 0.0, 1000, 11)])
    step = mixed_step(m, "h100")
    prefill = step.time(chunks=[(1000, 0)])
    decodes = sum(step.time([1000 + i]) for i in range(1, 11))  # KV length incl. the new token
    assert res.prefill_device_s == pytest.approx(prefill, rel=1e-12)
    assert res.busy_device_s == pytest.approx(prefill + decodes, rel=1e-12)
    c = sim_cost(res, device_rates("h100"))
    # one request, no rate: served over the whole run, 1000 input and 11 output tokens in it
    assert res.duration_s == pytest.approx(prefill + decodes, rel=1e-12)
    assert c.usd_per_m_input == pytest.approx(4.916 / 3600 / (1000 / res.duration_s) * 1e6)
    assert c.usd_per_m_output == pytest.approx(4.916 / 3600 / (11 / res.duration_s) * 1e6)


def test_disaggregated_pools_split_by_pool():
    """Disaggregated, each prefill replica only prefills and each decode replica decodes, but
    for the prompt's last token, which it computes to sample the first (vLLM's P/D flow: the
    simulator's module doc): the prefill device-seconds are the prefill pool's and those."""
    reqs = synthetic(40, rate=5, prompt="fixed:800", output="fixed:20", seed=1)
    topo = Topology(prefill_replicas=1, decode_replicas=1, link_bandwidth=50e9)
    res = simulate("llama-3.1-8b", "h100", reqs, topology=topo)
    step = mixed_step("llama-3.1-8b", "h100")
    # each prompt is one 800-token chunk (prefill iterations may batch several prompts, whose
    # body then shares one weight read: at most 40 single-prompt prefills), and its last token
    # once more on the decode replica (a 1-token chunk at 799 cached: at most 40 of them alone)
    most = 40 * (step.time(chunks=[(800, 0)]) + step.time(chunks=[(1, 799)]))
    assert res.prefill_device_s <= most * (1 + 1e-12)
    assert 0 < res.prefill_device_s < res.busy_device_s


# --------------------------------------------------------------------------- sizing
GRID = dict(
    rate=12.0,
    slo_ttft=0.4,
    slo_tpot=0.03,
    devices=["a100", "h100"],
    tps=(1, 2),
    requests=120,
    prompt="lognormal:800,0.6",
    output="lognormal:120,0.6",
    seed=3,
)


@functools.cache
def _every_candidate(model):
    """Simulate every candidate of the grid: aggregated 1..4 replicas, P:D splits 1..3 each."""
    from graphs.serving.planning.sizing import _Family, _run
    from graphs.serving.sim.engine import EngineConfig

    reqs = synthetic(
        GRID["requests"], rate=GRID["rate"], prompt=GRID["prompt"], output=GRID["output"], seed=GRID["seed"]
    )
    found: list[Deployment] = []
    for dev in GRID["devices"]:
        rates = device_rates(dev)
        for tp in GRID["tps"]:
            shapes = [(False, n, 0) for n in range(1, 5)] + [
                (True, p, d) for p in range(1, 4) for d in range(1, 4)
            ]
            for disagg, a, b in shapes:
                fam = _Family(get_device(dev).name, tp, disagg, rates)
                try:
                    dep = _run(
                        model,
                        fam,
                        a,
                        b,
                        reqs,
                        GRID["rate"],
                        GRID["slo_ttft"],
                        GRID["slo_tpot"],
                        99.0,
                        (EngineConfig(), None),  # size's engine without a profile: no overheads
                        50e9,
                    )
                except CostModelError:  # does not fit this device at this tp
                    continue
                found.append(dep)
    return tuple(found)


def _brute_force(model, objective):
    return min((d for d in _every_candidate(model) if d.meets), key=lambda d: _key(d, objective))


@pytest.mark.slow  # brute force simulates all 52 candidates (about 18 s); test_size_cli runs the search
@pytest.mark.parametrize("objective", ["cost", "gpus"])
def test_sizing_winner_is_the_brute_force_winner(objective):
    model = "llama-3.1-8b"
    res = size_deployment(model, objective=objective, **GRID)
    brute = _brute_force(model, objective)
    assert res.exhausted  # the bound proved it, within the simulation budget
    assert res.winner is not None and res.winner.meets
    assert _key(res.winner, objective) == pytest.approx(_key(brute, objective))
    assert res.simulated < 2 * 2 * 13  # the bounds spared simulations: brute force runs 52
    # margins: the winner's own simulated P99s, within the SLOs
    sim = res.winner.sim
    assert res.winner.ttft_at_percentile_s == _pct(sim.per_request["ttft_s"], 99) <= GRID["slo_ttft"]
    assert res.winner.tpot_at_percentile_s == _pct(sim.per_request["tpot_s"], 99) <= GRID["slo_tpot"]


def test_sizing_prunes_what_cannot_serve():
    # a 1 ms TPOT is below one batch-1 decode step of an 8B model on any of these devices
    res = size_deployment("llama-3.1-8b", **{**GRID, "slo_tpot": 1e-3})
    assert res.winner is None and res.simulated == 0
    assert all("TPOT floor" in p for p in res.pruned)


def test_sizing_needs_a_price_for_the_cost_objective():
    with pytest.raises(CostModelError, match="no price: pass --price-per-hour"):
        size_deployment("llama-3.1-8b", **{**GRID, "devices": ["mi300x"]})
    res = size_deployment("llama-3.1-8b", **{**GRID, "devices": ["mi300x"], "objective": "gpus", "tps": (1,)})
    assert res.winner is not None and res.winner.cost is None


def test_size_cli(capsys):
    args = ["size", "llama-3.1-8b", "--rate", "12", "--slo-ttft", "0.4", "--slo-tpot", "0.03"]
    args += ["--devices", "a100,h100", "--tp", "1,2", "--requests", "120", "--quiet"]
    args += ["--prompt", "lognormal:800,0.6", "--output", "lognormal:120,0.6", "--seed", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "winner:" in out and "/M tokens blended" in out and "runner-up:" in out and "% of SLO" in out


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--electricity-per-kwh", "-1"),
        ("--objective", "speed"),
        ("--max-simulations", "0"),
        ("--rate", "abc"),
    ],
)
def test_size_bad_flags_are_one_line_errors(flag, value, capsys):
    args = ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "1", flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err


def test_size_bad_price_is_one_line(capsys):
    args = ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "1", "--price-per-hour", "x"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--price-per-hour" in err


def test_no_nan_in_cost():
    c = sim_cost(simulate("tiny", "h100", [Request(0, 0.0, 10, 2)]), device_rates("h100"))
    assert all(math.isfinite(v) for v in (c.usd_per_m_input, c.usd_per_m_output, c.usd_per_m_tokens))


# --------------------------------------------------------------------------- every serving report
def test_search_minimises_cost():
    from graphs.serving.planning.design_search import search

    kw = dict(devices=["h100", "h200"], batches=[8, 64], ctxs=[4096], tp=[1, 2])
    res = search("llama-3.1-8b", cost=True, **kw)
    assert "usd_per_m_output" in res.objectives
    for r in res.frontier:  # price / (tokens/s per device x 3600 s/h), per million
        usd = {"h100-sxm": 4.916, "h200-sxm": 5.408}[r["device"]]
        assert r["usd_per_m_output"] == pytest.approx(usd / (r["tokens_per_s_per_device"] * 3600) * 1e6)
    best = res.best["lowest_cost_per_m_output"]
    assert best["usd_per_m_output"] == min(r["usd_per_m_output"] for r in res.frontier)
    # an H200 at a cent an hour is the cheapest point whatever its throughput
    cheap = search("llama-3.1-8b", cost=True, prices={"h200-sxm": 0.01}, **kw)
    assert cheap.best["lowest_cost_per_m_output"]["device"] == "h200-sxm"
    plain = search("llama-3.1-8b", **kw)  # without --cost the objectives and winners are as before
    assert "usd_per_m_output" not in plain.objectives and "lowest_cost_per_m_output" not in plain.best


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "llama-3.1-8b", "--rate", "4", "--requests", "30", "--quiet"],
        ["serve", "disagg", "llama-3.1-8b", "--prefill-device", "h100", "--decode-device", "h200"],
        [
            "search",
            "llama-3.1-8b",
            "--devices",
            "h100",
            "--batches",
            "8",
            "--ctxs",
            "1024",
            "--cost",
            "--quiet",
        ],
        ["serve", "plans", "llama-3.1-8b", "--plans", "1x1x1x1"],
    ],
)
def test_every_serving_report_prints_cost(args, capsys):
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "/M" in out


def test_reports_say_when_there_is_no_price(capsys):
    assert (
        main(["simulate", "llama-3.1-8b", "--device", "mi300x", "--rate", "4", "--requests", "20", "--quiet"])
        == 0
    )
    assert "no price: pass --price-per-hour" in capsys.readouterr().out
    args = ["simulate", "llama-3.1-8b", "--device", "mi300x", "--rate", "4", "--requests", "20", "--quiet"]
    assert main([*args, "--price-per-hour", "2.5"]) == 0
    assert "$2.50/h for 1 device(s)" in capsys.readouterr().out


@settings(max_examples=50, deadline=None)
@given(
    util=st.floats(0, 1),
    r_in=st.floats(0, 1e9),
    r_out=st.floats(1e-3, 1e9),
    devices=st.integers(1, 64),
)
def test_every_figure_is_the_hourly_bill_over_its_tokens(util, r_in, r_out, devices):
    """Each figure alone pays the hourly bill: input (or output) dollars per token x that kind's
    tokens per hour = $/h, and the blend x every token per hour = $/h; 1/blend = 1/in + 1/out."""
    rates = device_rates("h100", electricity_per_kwh=0.2)
    c = token_cost(
        [(rates, devices)], input_tokens_per_s=r_in, output_tokens_per_s=r_out, basis="x", utilisation=util
    )
    hourly = devices * (4.916 + 700 * util / 1000 * 0.2)
    assert c.usd_per_hour == pytest.approx(hourly, rel=1e-12)
    assert c.usd_per_m_output * r_out * 3600 / 1e6 == pytest.approx(hourly, rel=1e-9)
    assert c.usd_per_m_tokens * (r_in + r_out) * 3600 / 1e6 == pytest.approx(hourly, rel=1e-9)
    if r_in > 0:
        assert c.usd_per_m_input * r_in * 3600 / 1e6 == pytest.approx(hourly, rel=1e-9)
        assert 1 / c.usd_per_m_tokens == pytest.approx(1 / c.usd_per_m_input + 1 / c.usd_per_m_output)
    else:
        assert c.usd_per_m_input is None


def test_sizing_prunes_a_rate_no_pool_can_hold():
    # 1e7 requests/s of ~1,000-token requests (GRID) is ~1e10 tokens/s: no H100 replica serves more
    # than ~1e5 tokens/s of an 8B model, so each pool needs > 4096 replicas (the simulator's
    # largest pool). Before, the search pushed those pools and Topology refused them mid-search
    # ("replicas must be a whole number in [1, 4096], got ...": no word of the rate or a prune)
    res = size_deployment("llama-3.1-8b", **{**GRID, "rate": 1e7, "devices": ["h100"], "tps": (1,)})
    assert res.winner is None and res.simulated == 0
    assert len(res.pruned) == 2 and all("more than a pool holds (4096)" in p for p in res.pruned)


def test_a_run_that_does_not_keep_up_pays_for_its_device_time():
    # one closed-loop client serves its requests one after another whatever --rate says; priced
    # over n / R = 20 / 1000 s, its tokens cost ~100x less than the device-time they took.
    # The floor: a run pays at least its busy device-seconds, here the whole closed loop
    # (one device always iterating), so with and without the rate the cost is the same
    reqs = synthetic(20, rate=1000.0, prompt="fixed:200", output="fixed:50", seed=0)
    rates = device_rates("h100", 2.0)
    fast = simulate("llama-3.1-8b", "h100", reqs, concurrency=1, rate=1000.0)
    loop = simulate("llama-3.1-8b", "h100", reqs, concurrency=1)
    assert fast.busy_device_s == pytest.approx(loop.busy_device_s, rel=1e-12)
    a, b = sim_cost(fast, rates), sim_cost(loop, rates)
    assert a.usd_per_m_tokens == pytest.approx(b.usd_per_m_tokens, rel=1e-9)
    # $2/h x busy seconds / 3600 over 20 x 250 tokens, per million: never below the device-time
    floor = 2.0 * fast.busy_device_s / 3600 / (20 * 250) * 1e6
    assert a.usd_per_m_tokens >= floor * (1 - 1e-12)


def test_sizing_refuses_requests_beyond_the_context_limit():
    # Llama-3.1-8B's limit is 131,072 tokens (max_position_embeddings, llama3 rope 8,192 x 16);
    # a 200,000-token prompt was simulated on every candidate (TTFTs of a minute) without a word
    from models.context import ContextLimitError

    kw = {**GRID, "prompt": "fixed:200000", "output": "fixed:10", "requests": 3}
    with pytest.raises(ContextLimitError, match=r"200,010 exceeds the model's context limit of 131,072"):
        size_deployment("llama-3.1-8b", **kw)


def test_the_ttft_floor_never_prunes_a_deployment_that_meets():
    # 30 requests: the interpolated P99 lies between the 29th and 30th smallest TTFTs
    # (0.99 x 29 = 28.71), so only the 29th prompt's prefill bounds it. The floor took the
    # longest prompt (13,906 tokens, 0.27 s alone) while the simulated P99 is 0.21 s: with a
    # 0.25 s SLO the one-H100 deployment that meets it was pruned and nothing was found
    kw = dict(rate=1.0, slo_ttft=0.25, slo_tpot=0.05, devices=["h100"], tps=(1,), disaggregated=False)
    res = size_deployment(
        "llama-3.1-8b", **kw, requests=30, prompt="lognormal:2000,1.5", output="fixed:20", seed=1
    )
    assert not res.pruned
    assert res.winner is not None and res.winner.devices == 1
    assert res.winner.ttft_at_percentile_s <= 0.25


def test_size_refuses_a_link_bandwidth_it_would_ignore(capsys):
    # --no-disagg simulates no P:D transfer: a given --link-bandwidth was silently unused
    args = ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "1", "--no-disagg"]
    assert main([*args, "--link-bandwidth", "1e9"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--link-bandwidth" in err and "--no-disagg" in err


def test_expert_parallelism_inside_the_tp_group_is_sized_as_simulate_runs_it():
    """``size --tp 2 --enable-expert-parallel`` (no ``--dp``) sizes the tp group's own expert
    parallelism (it dropped the EP for dp-1 candidates before, or refused with tps alone): the
    candidate is labelled EP and its P99 TTFT and TPOT are those of ``simulate`` on the same
    requests with ``Topology(tp=2, expert_parallel=True)``; one device has nothing to spread, and
    EP with tp 1 and dp 1 only is refused."""
    cfg = "qwen3-30b-a3b"
    res = size_deployment(
        cfg, rate=5.0, slo_ttft=2.0, slo_tpot=0.1, devices=["h100"], tps=(2,), expert_parallel=True,
        requests=200, disaggregated=False,
    )  # fmt: skip
    dep = res.candidates[0]
    assert dep.expert_parallel and "tp2 EP x" in dep.label
    reqs = synthetic(200, rate=5.0, prompt="lognormal:1000,1.0", output="lognormal:250,1.0", seed=0)
    sim = simulate(cfg, "h100", reqs, topology=Topology(tp=2, expert_parallel=True))
    assert dep.ttft_at_percentile_s == pytest.approx(_pct(sim.per_request["ttft_s"], 99.0), rel=1e-9)
    assert dep.tpot_at_percentile_s == pytest.approx(_pct(sim.per_request["tpot_s"], 99.0), rel=1e-9)
    with pytest.raises(CostModelError, match="needs dps > 1 or tps > 1"):
        size_deployment(
            cfg, rate=5.0, slo_ttft=2.0, slo_tpot=0.1, devices=["h100"], tps=(1,), expert_parallel=True
        )


def test_expert_parallelism_inside_tp_leaves_the_disaggregated_families_as_they_were(monkeypatch):
    """A disaggregated family's pools keep their experts split (EP inside the tp group prices the
    aggregated family only): its floors are the plain tp step's and its starting P:D comes from a
    plain tp replica's ceiling (both were the EP group's), and its simulated candidates are those
    of the same sizing without ``expert_parallel``."""
    import graphs.serving.planning.sizing as sizing

    kw = dict(rate=5.0, slo_ttft=2.0, slo_tpot=0.1, devices=["h100"], tps=(2,), requests=200, runners_up=8)
    plain = size_deployment("qwen3-30b-a3b", **kw)  # type: ignore[arg-type]
    ceilings, floors = [], []
    real_ceiling, real_floors = sizing.ceiling_rate, sizing._floors

    def ceiling(*a, topology, **k):
        ceilings.append(topology.expert_parallel)
        return real_ceiling(*a, topology=topology, **k)

    def floor(*a):
        floors.append(a[-1] is None)
        return real_floors(*a)

    monkeypatch.setattr(sizing, "ceiling_rate", ceiling)
    monkeypatch.setattr(sizing, "_floors", floor)
    ep = size_deployment("qwen3-30b-a3b", expert_parallel=True, **kw)  # type: ignore[arg-type]
    assert ceilings == [True, False] and floors == [False, True]  # the EP group's, then the plain step's

    def disagg(res):
        return [
            (d.label, d.ttft_at_percentile_s, d.tpot_at_percentile_s)
            for d in res.candidates
            if d.prefill_replicas
        ]

    assert disagg(plain) and disagg(ep) == disagg(plain)
    assert any(d.expert_parallel and not d.prefill_replicas for d in ep.candidates)


def test_a_run_that_falls_behind_in_decode_is_priced_at_its_decode_capacity():
    """A review's case: 30 requests at 2/s, every iteration 10 s of CPU. Every prompt is
    prefilled within the first minute, so the window to the last first token priced the 30
    answers over about a minute while they took hours. No steady load draws more output from a
    replica than its largest batch every iteration: ``max_num_seqs`` (the KV pool holds more
    sequences of 1,125 tokens: 1,000 of prompt and half of the 250 of output) over 10 s and the
    kernels (a few ms). The run is priced over its output at that rate, and says so; a run that
    keeps up keeps its window, and a whole-run (all at once) basis is untouched."""
    from graphs.serving.engines import get_engine
    from graphs.serving.planning.cost import ServedTotals, decode_bound_seconds, served_seconds
    from graphs.serving.sim.engine import profile_engine

    reqs = synthetic(30, rate=2.0, prompt="fixed:1000", output="fixed:250", seed=0)
    # 256 sequences (vLLM V1's default below 70 GiB; an H100's 1,024 would be bounded by the pool)
    eng = profile_engine(
        get_engine("vllm").with_overrides(max_num_seqs=256), "llama-3.1-8b", "h100", iteration_overhead_s=10.0
    )
    slow = simulate("llama-3.1-8b", "h100", reqs, engine=eng)
    b = eng.max_num_seqs
    assert b / 10.1 < slow.decode_capacity_tokens_per_s < b / 10.0
    pr = slow.per_request
    window = float((pr["arrival_s"] + pr["ttft_s"]).max() - pr["arrival_s"].min())
    assert window < 100
    assert served_seconds(slow) == decode_bound_seconds(slow) == pytest.approx(
        30 * 250 / slow.decode_capacity_tokens_per_s, rel=1e-12
    )
    totals = ServedTotals.of(slow)
    assert totals.decode_bound and not totals.whole_run
    assert "it falls behind in decode" in sim_cost(slow, device_rates("h100", 2.0)).basis
    # keeping up: the window, as before (its output at capacity takes a small part of it)
    ok = simulate(
        "llama-3.1-8b", "h100", synthetic(200, rate=5.0, prompt="fixed:500", output="fixed:100", seed=1)
    )
    assert decode_bound_seconds(ok) < 0.1 * served_seconds(ok)
    assert not ServedTotals.of(ok).decode_bound
    assert "first arrival to last first token" in sim_cost(ok, device_rates("h100", 2.0)).basis
    burst = simulate("llama-3.1-8b", "h100", [Request(i, 0.0, 1000, 250) for i in range(30)], engine=eng)
    assert served_seconds(burst) == burst.duration_s and not ServedTotals.of(burst).decode_bound


def test_a_shared_prefix_is_held_once_in_the_decode_capacity():
    """An independent review's case: 100 requests at 0.8/s of a 3,000-token shared prefix, 200 of
    their own and 300 out on Llama-3.1-70B FP8 keep up (all done in about 135 s, about 220
    output tokens/s made), yet the capacity counted every sequence's prefix in the pool and was
    141 tokens/s: priced as falling behind over 213 s, longer than the run. With prefix caching
    the prefix's blocks are held once; and no floor exceeds the run's own duration."""
    import dataclasses

    from graphs.serving.engines import get_engine
    from graphs.serving.planning.cost import ServedTotals, decode_bound_seconds, served_seconds
    from graphs.serving.sim.engine import profile_engine
    from models import get_model

    reqs = synthetic(100, rate=0.8, prompt="fixed:200", output="fixed:300", shared_prefix=3000, seed=1)
    cfg = dataclasses.replace(get_model("llama-3.1-70b"), dtype="fp8", kv_dtype="fp8")
    eng = profile_engine(get_engine("vllm"), cfg, "h100")
    res = simulate(cfg, "h100", reqs, engine=eng)
    made = float(res.per_request["output"].sum()) / res.duration_s
    assert res.decode_capacity_tokens_per_s > made  # an upper bound on what it makes
    assert not ServedTotals.of(res).decode_bound and decode_bound_seconds(res) <= res.duration_s
    assert served_seconds(res) < res.duration_s
    # a floor held at the run's duration prices the whole run, and says so
    from graphs.serving.planning.cost import totals_cost

    held = dataclasses.replace(ServedTotals.of(res), served_s=res.duration_s, decode_bound=True)
    assert "the whole run: its output at the decode capacity would take longer" in totals_cost(
        held, device_rates("h100", 2.0)
    ).basis


def test_a_few_requests_at_a_constant_rate_are_priced_at_that_rate():
    """A review's case: 5 requests at 1/s (constant arrivals) printed 'serving 1.245
    requests/s' in the cost line, while they arrived at 1.00/s: n requests over n - 1 gaps. With
    one mean gap added the served rate is the offered one, less the last request's TTFT."""
    from graphs.serving.planning.cost import served_seconds

    reqs = [Request(i, float(i), 1000, 100) for i in range(5)]
    res = simulate("llama-3.1-8b", "h100", reqs)
    ttft_last = float(res.per_request["ttft_s"][-1])
    assert ttft_last < 0.2
    assert served_seconds(res) == pytest.approx(4.0 + ttft_last + 1.0, rel=1e-12)
    assert 5 / served_seconds(res) == pytest.approx(1.0, rel=0.05)
    assert "serving 0.9" in sim_cost(res, device_rates("h100", 2.0)).basis
