"""A sizing's candidate runs kept as cards (graphs.serving.planning.run_cards): a warm sizing
answers what a cold one does, digit for digit, and a card that is not whole, not these requests'
or of another question is simulated again (issue 44 item 3)."""

import json

import pytest

from costmodel import formcache
from costmodel.hardware import get_device
from graphs.cli import main
from graphs.serving.planning.cost import ServedTotals, device_rates, sim_cost, totals_cost
from graphs.serving.planning.run_cards import (
    RunOutcome,
    load_outcome,
    requests_digest,
    run_key,
    save_outcome,
)
from graphs.serving.planning.sizing import size_deployment
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import simulate
from models.catalog import get_model

KW = dict(
    rate=12.0,
    slo_ttft=0.4,
    slo_tpot=0.03,
    devices=["a100", "h100"],
    tps=(1, 2),
    requests=60,
    prompt="lognormal:800,0.6",
    output="lognormal:120,0.6",
    seed=1,
)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty form cache of the test's own (the session's may hold these runs already)."""
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    return tmp_path


def _runs(cache):
    return sorted((cache / "forms").glob("size-run-*.json"))


def test_a_warm_sizing_answers_what_a_cold_one_does(cache):
    plain = size_deployment("llama-3.1-8b", **KW)  # no cards: every candidate simulated
    assert _runs(cache) == []
    cold = size_deployment("llama-3.1-8b", **KW, run_cards=True)
    assert len(_runs(cache)) == cold.simulated >= 2  # one card per candidate simulated
    assert all(d.sim is not None for d in cold.candidates)
    warm = size_deployment("llama-3.1-8b", **KW, run_cards=True)
    assert all(d.sim is None for d in warm.candidates)  # every run read from its card
    # the same deployments, latencies and costs, digit for digit (JSON text compared)
    assert json.dumps(warm.to_dict()) == json.dumps(cold.to_dict()) == json.dumps(plain.to_dict())


def test_a_new_price_reuses_the_runs(cache):
    cold = size_deployment("llama-3.1-8b", **KW, run_cards=True)
    cards = _runs(cache)
    # every price x 10: the same order of candidates (cost = devices x price, no power term)
    prices = {get_device(d).name: 10 * float(get_device(d).price_usd_per_hour) for d in KW["devices"]}
    dear = size_deployment("llama-3.1-8b", **KW, run_cards=True, prices=prices)
    assert _runs(cache) == cards  # the price is not in a run's key: nothing simulated again ...
    assert all(d.sim is None for d in dear.candidates)
    assert dear.winner is not None and cold.winner is not None
    assert dear.winner.label == cold.winner.label
    assert dear.winner.cost.usd_per_hour == pytest.approx(10 * cold.winner.cost.usd_per_hour)  # ... repriced


def test_another_question_is_another_run(cache):
    size_deployment("llama-3.1-8b", **KW, run_cards=True)
    n = len(_runs(cache))
    other = size_deployment("llama-3.1-8b", **{**KW, "seed": 2}, run_cards=True)  # other requests
    assert all(d.sim is not None for d in other.candidates)
    assert len(_runs(cache)) == n + other.simulated


def _one_run():
    reqs = synthetic(30, rate=5.0, prompt="fixed:200", output="fixed:20", seed=0)
    res = simulate("llama-3.1-8b", "h100", reqs, slo_ttft=1.0, slo_tpot=0.1, rate=5.0)
    key = run_key(
        get_model("llama-3.1-8b"), get_device("h100"), res.topology, EngineConfig(), None,
        requests_digest(reqs), slo_ttft=1.0, slo_tpot=0.1, rate=5.0, percentile=99.0,
    )  # fmt: skip
    return reqs, res, key


def test_a_card_reads_back_what_was_kept(cache):
    reqs, res, key = _one_run()
    out = RunOutcome(0.25, 0.0125, ServedTotals.of(res))
    assert save_outcome(key, out)
    assert load_outcome(key, reqs) == out
    # 30 requests of 200 prompt and 20 output tokens: 6,000 and 600 tokens, as the requests say
    assert out.totals.input_tokens == 30 * 200 and out.totals.output_tokens == 30 * 20
    rates = device_rates("h100")
    assert totals_cost(out.totals, rates) == sim_cost(res, rates)


def test_a_card_that_is_not_these_requests_or_not_whole_is_a_miss(cache):
    reqs, res, key = _one_run()
    out = RunOutcome(0.25, 0.0125, ServedTotals.of(res))
    save_outcome(key, out)
    fewer = reqs[:-1]
    assert load_outcome(key, fewer) is None  # 29 requests: not the run the card holds
    longer = [Request(r.rid, r.arrival_s, r.prompt + 1, r.output) for r in reqs]
    assert load_outcome(key, longer) is None  # other token totals
    path = cache / "forms" / f"{key}.json"
    path.write_bytes(path.read_bytes().replace(b'"ttft_s": 0.25', b'"ttft_s": 0.15'))
    assert load_outcome(key, reqs) is None  # edited: the digest no longer matches
    for bad in ({"ttft_s": float("inf")}, {"ttft_s": -1.0}, {"tpot_s": 1}, {"version": 0}):
        card = {
            "kind": "size-run",
            "version": 1,
            "ttft_s": 0.25,
            "tpot_s": 0.0125,
            "totals": {f: getattr(out.totals, f) for f in ServedTotals.__dataclass_fields__},
            **bad,
        }
        formcache.save(key, card)  # a whole entry (its digest right) holding a bad value
        assert load_outcome(key, reqs) is None, bad


def test_size_cli_warm_prints_what_cold_does(cache, capsys):
    argv = ["size", "llama-3.1-8b", "--rate", "12", "--slo-ttft", "0.4", "--slo-tpot", "0.03"]
    argv += ["--devices", "a100,h100", "--tp", "1,2", "--requests", "60", "--quiet", "--json"]
    assert main(argv) == 0
    cold = capsys.readouterr().out
    assert _runs(cache)
    assert main(argv) == 0
    assert capsys.readouterr().out == cold
