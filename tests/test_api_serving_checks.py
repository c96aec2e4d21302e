"""The serving wing's Python entry points answer what the command answers, and refuse bad input
in one line naming the parameter, the value and what is allowed (the public-API review's
findings on size_deployment, search, simulate, decode_limits and the phase reports).

Expected values come from the input itself (an alias names the same device as its catalog name),
a hand computation (devices x price per hour) or the command's answer.
"""

import pytest

from costmodel.errors import CostModelError
from graphs.serving import search, size_deployment

#: one small sizing: one device kind, tp 1, aggregated, 50 requests (about 2 CPU s)
SIZE = dict(rate=30, slo_ttft=1, slo_tpot=0.05, devices=["h100"], tps=(1,), requests=50, disaggregated=False)


def test_size_prices_by_alias():
    # `costmodel size ... --price-per-hour h100=2` prices the deployment at $2.00 per device-hour:
    # the alias names h100-sxm, so Python's price by the alias is taken, not the catalog's 4.916
    w = size_deployment("llama-3.1-8b", **SIZE, prices={"h100": 2.0}).winner
    assert w.cost.usd_per_hour == pytest.approx(w.devices * 2.0)


@pytest.mark.parametrize(
    "prices, words",
    [
        ({"foo": 1.0}, "prices names 'foo', which is not among the devices (h100-sxm)"),
        ({"b200": 3.0}, "prices names 'b200', which is not among the devices (h100-sxm)"),
        ({"h100": -1}, "prices['h100'] must be in [0.01, 10000] USD per device-hour, got -1"),
        ({"h100": float("nan")}, "prices['h100'] must be in [0.01, 10000] USD per device-hour, got nan"),
        ({"h100": "2"}, "prices['h100'] must be in [0.01, 10000] USD per device-hour, got '2'"),
        ({"h100": 1.0, "h100-sxm": 2.0}, "prices gives h100-sxm twice ('h100' and 'h100-sxm')"),
        ([("h100", 1.0)], "prices must map device names to USD per device-hour, got list"),
    ],
)
def test_size_and_search_refuse_bad_prices(prices, words):
    with pytest.raises(CostModelError) as e:
        size_deployment("llama-3.1-8b", **SIZE, prices=prices)
    assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(CostModelError) as e:
        search("llama-3.1-8b", devices=["h100"], batches=[1], ctxs=[4096], cost=True, prices=prices)
    assert words in str(e.value)


def test_search_prices_by_alias():
    # one device at $2/h serving tokens_per_s_per_device: 2 / (tokens/s x 3600) x 1e6 USD per million
    best = search(
        "llama-3.1-8b", devices=["h100"], batches=[1], ctxs=[4096], cost=True, prices={"h100": 2.0}
    ).best["fastest_per_user"]
    assert best["usd_per_m_output"] == pytest.approx(2.0 / (best["tokens_per_s_per_device"] * 3600) * 1e6)


def test_size_runs_a_what_if_copy_as_given():
    # a spec passed as an object sizes as the same spec registered and named: before, the object's
    # name was looked up again and the catalog's h100 simulated in its place
    from costmodel import get_device, register_device

    scaled = get_device("h100").scaled({"memory": 2, "compute": 2})  # still named h100-sxm
    fast = scaled.replace(name="h100-2x")
    by_object = size_deployment("llama-3.1-8b", **{**SIZE, "devices": [fast]}).winner
    same_name = size_deployment("llama-3.1-8b", **{**SIZE, "devices": [scaled]}).winner
    catalog = size_deployment("llama-3.1-8b", **SIZE).winner
    register_device(fast)  # this test's own catalog (conftest)
    by_name = size_deployment("llama-3.1-8b", **{**SIZE, "devices": ["h100-2x"]}).winner
    assert by_object.device == by_name.device == "h100-2x"
    assert by_object.ttft_at_percentile_s == by_name.ttft_at_percentile_s
    assert by_object.tpot_at_percentile_s == by_name.tpot_at_percentile_s
    assert same_name.tpot_at_percentile_s == by_name.tpot_at_percentile_s
    assert by_object.tpot_at_percentile_s < catalog.tpot_at_percentile_s  # twice the bandwidth


@pytest.mark.parametrize(
    "field, value",
    [
        ("prompt", 0),
        ("prompt", -3),
        ("prompt", 1.5),
        ("prompt", True),
        ("prompt", "10"),
        ("prompt", 10**7 + 1),
        ("output", 0),
        ("output", -1),
        ("output", 2.0),
    ],
)
def test_simulate_refuses_a_request_length_out_of_range(field, value):
    # a request's prompt and output are whole numbers of tokens in [1, 1e7], refused by request
    # and field as a bad arrival or think time is (before: a TTFT for a prompt of -3 tokens, or
    # "internal: 1 request(s) did not finish" for an output of 0)
    from graphs.serving import Request, simulate

    bad = Request(7, 0.0, **{"prompt": 10, "output": 5, field: value})
    with pytest.raises(CostModelError) as e:
        simulate("llama-3.1-8b", "h100", [Request(0, 0.0, 10, 5), bad])
    assert (
        str(e.value) == f"request 7: {field} must be a whole number of tokens in [1, 10000000], got {value!r}"
    )


@pytest.mark.parametrize("rate", [-1, 0, float("nan"), float("inf"), "5", True])
def test_simulate_refuses_a_rate_out_of_range(rate):
    # the rate is reported with the result: checked as synthetic checks it, never copied as given
    from graphs.serving import Request, simulate

    with pytest.raises(CostModelError) as e:
        simulate("llama-3.1-8b", "h100", [Request(0, 0.0, 10, 5)], rate=rate)
    assert str(e.value) == f"rate must be in [1e-06, 1e+09] requests per second, got {rate!r}"


@pytest.mark.parametrize("max_batch", [2.5, -3, float("nan"), True, "64"])
def test_decode_limits_refuses_a_bad_max_batch(max_batch):
    from graphs.serving import decode_limits

    with pytest.raises(CostModelError, match=r"^max_batch must be .*, got "):
        decode_limits("llama-3.1-8b", "h100", ctx=4096, max_batch=max_batch)


def test_decode_limits_max_batch_needs_ctx():
    # the batch memory holds is one at a context: without ctx it was dropped without a word
    from graphs.serving import decode_limits

    with pytest.raises(CostModelError) as e:
        decode_limits("llama-3.1-8b", "h100", max_batch=64)
    assert str(e.value) == "max_batch (64) is the batch memory holds at ctx: give ctx"


def test_decode_limits_throughput_at_max_batch():
    # B / T(B): 64 sequences each decoding a token per TPOT of `costmodel decode --batch 64`;
    # 0 (nothing fits, as the command passes it) carries no throughput
    from graphs.serving import decode_limits, decode_report

    lim = decode_limits("llama-3.1-8b", "h100", ctx=4096, max_batch=64)
    step = decode_report("llama-3.1-8b", "h100", batch=64, ctx=4096).step_s
    assert lim.max_batch_fits == 64
    assert lim.throughput_at_max_batch_tokens_per_s == pytest.approx(64 / step)
    none = decode_limits("llama-3.1-8b", "h100", ctx=4096, max_batch=0)
    assert none.max_batch_fits == 0 and none.throughput_at_max_batch_tokens_per_s is None


def test_phase_reports_refuse_a_context_beyond_the_model_limit():
    # `costmodel decode llama-3.1-8b --ctx 500000` refuses: "--ctx 500,000 exceeds the model's
    # context limit of 131,072 tokens ... pass --allow-long-context"; the library refuses alike
    from graphs.serving import decode_report, prefill_report
    from models.context import ContextLimitError

    with pytest.raises(
        ContextLimitError, match="ctx 500,000 exceeds the model's context limit of 131,072 tokens"
    ):
        decode_report("llama-3.1-8b", "h100", batch=1, ctx=500_000)
    with pytest.raises(
        ContextLimitError, match="seq 500,000 exceeds the model's context limit of 131,072 tokens"
    ):
        prefill_report("llama-3.1-8b", "h100", batch=1, seq=500_000)
    # the command's --allow-long-context: costed (one sequence of 500,000 tokens fits in memory)
    r = decode_report("llama-3.1-8b", "h100", batch=1, ctx=500_000, allow_long_context=True)
    assert r.step_s > 0 and not any("does not fit" in n for n in r.notes)


@pytest.mark.parametrize(
    "phase, point, verdict",
    [
        # `costmodel decode llama-3.1-8b --device h100 --batch 100000 --ctx 4096`'s first line
        (
            "decode",
            dict(batch=100_000, ctx=4096),
            "does not fit on 1×h100-sxm: needs ≥ 629 devices (no tensor-parallel degree tried fits this batch, "
            "or at most batch 129 at tp 1)",
        ),
        # `costmodel prefill llama-3.1-8b --device h100 --batch 1000 --seq 32768`'s first line
        (
            "prefill",
            dict(batch=1000, seq=32768),
            "does not fit on 1×h100-sxm: needs ≥ 87 devices (no tensor-parallel degree tried fits this batch, "
            "or at most batch 9 at tp 1)",
        ),
    ],
)
def test_phase_reports_say_when_memory_does_not_hold_the_point(phase, point, verdict):
    # the command refuses the point (exit 1); the library prices it and says the command's verdict
    from graphs.serving import decode_report, prefill_report

    report = decode_report if phase == "decode" else prefill_report
    notes = report("llama-3.1-8b", "h100", **point).notes
    assert [n for n in notes if n.startswith("does not fit")] == [
        verdict + "; these numbers are for a point that cannot run"
    ]
    assert not any(
        "does not fit" in n for n in report("llama-3.1-8b", "h100", **point, check_memory=False).notes
    )
    fits = {"batch": 1, "ctx": 4096} if phase == "decode" else {"batch": 1, "seq": 4096}
    assert not any("does not fit" in n for n in report("llama-3.1-8b", "h100", **fits).notes)


# --- wrong types at the serving entry points: one line naming the parameter, or the obvious name resolved


def _one_line(e):
    return "\n" not in str(e.value)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"engine": "vllm"}, "engine must be an EngineConfig (an engine profile's on a device: "),
        ({"engine": {}}, "got dict {}"),
        (
            {"topology": {"tp": 2}},
            "topology must be a Topology (Topology(tp=2, replicas=4)), got dict {'tp': 2}",
        ),
        (
            {"predictor": 3},
            "predictor must be a Predictor or a corpus framework's name (Predictor.of), got int 3",
        ),
        ({"requests": [{"arrival": 0}]}, "requests[0] must be a Request (synthetic() draws them), got dict"),
        ({"requests": "abc"}, "requests must be a sequence of Request, got str 'abc'"),
    ],
)
def test_simulate_refuses_wrong_types(kw, words):
    from graphs.serving import Request, simulate

    reqs = kw.pop("requests", [Request(0, 0.0, 100, 10)])
    with pytest.raises(CostModelError) as e:
        simulate("llama-3.1-8b", "h100", reqs, **kw)
    assert words in str(e.value) and _one_line(e)


def test_simulate_takes_a_predictor_by_name():
    # --predict vllm: the name is the framework Predictor.of prices with
    from graphs.serving import Request, simulate
    from graphs.serving.pricing.predictor import Predictor

    reqs = [Request(i, 0.2 * i, 100, 10) for i in range(4)]
    by_name = simulate("llama-3.1-8b", "h100", reqs, predictor="vllm")
    given = simulate("llama-3.1-8b", "h100", reqs, predictor=Predictor.of("vllm"))
    assert by_name.ttft.p50 == given.ttft.p50 and by_name.tpot.p50 == given.tpot.p50


@pytest.mark.parametrize(
    "kw, words",
    [
        (
            {"prompt": None},
            "prompt must be a length distribution: fixed:N, uniform:LO,HI or lognormal:MEAN,SIGMA",
        ),
        ({"prompt": 100}, "got int 100"),
        ({"output": None}, "output must be a length distribution"),
        ({"arrival": None}, "arrival must be one of poisson, constant, gamma:CV, got NoneType None"),
        ({"seed": -1}, "seed must be a whole number in [0, 4294967295], got -1"),
        ({"seed": 1.5}, "seed must be a whole number in [0, 4294967295], got 1.5"),
    ],
)
def test_synthetic_refuses_wrong_types(kw, words):
    from graphs.serving import synthetic

    with pytest.raises(CostModelError) as e:
        synthetic(3, **{"rate": 5, "prompt": "fixed:10", "output": "fixed:10", **kw})
    assert words in str(e.value) and _one_line(e)


def test_run_simulation_takes_a_model_name_and_an_engine_name():
    # the command's answer: `costmodel simulate llama-3.1-8b --device h100 --rate 5 --requests 20
    # --prompt fixed:100 --output fixed:10 --json` gives ttft p50 0.004846952964776108 (the vllm
    # profile, as without --engine)
    from graphs.serving import SimulationRequest, run_simulation

    kw = dict(rate=5, requests=20, prompt="fixed:100", output="fixed:10")
    assert run_simulation(SimulationRequest(**kw), "llama-3.1-8b").result.ttft.p50 == pytest.approx(
        0.004846952964776108, rel=1e-12
    )
    named = run_simulation(SimulationRequest(**kw, profile="vllm"), "llama-3.1-8b")
    assert named.result.ttft.p50 == pytest.approx(0.004846952964776108, rel=1e-12)
    with pytest.raises(CostModelError) as e:
        SimulationRequest(rate=5, profile=3)
    assert "profile must be an EngineProfile or an engine's name (--engine), got int 3" in str(e.value)
    with pytest.raises(CostModelError) as e:
        run_simulation({"rate": 5}, "llama-3.1-8b")
    assert str(e.value) == "request must be a SimulationRequest, got dict {'rate': 5}"


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"tps": ()}, "tps: give at least one tensor-parallel degree"),
        ({"tps": 1}, "tps must be a list of whole numbers, got int 1"),
        ({"devices": "h100"}, "devices must be a list of device names or specs, got str 'h100'"),
        ({"devices": []}, "devices: give at least one device"),
        ({"runners_up": 1.5}, "runners_up must be a whole number >= 0, got 1.5"),
        ({"runners_up": -1}, "runners_up must be a whole number >= 0, got -1"),
        (
            {"engine": "vllm"},
            "engine must be an EngineConfig (an engine by name goes in profile: profile='vllm')",
        ),
        ({"profile": 3}, "profile must be an EngineProfile or an engine's name, got int 3"),
        ({"seed": -1}, "seed must be a whole number in [0, 4294967295], got -1"),
    ],
)
def test_size_refuses_wrong_types(kw, words):
    with pytest.raises(CostModelError) as e:
        size_deployment("llama-3.1-8b", **{**SIZE, **kw})
    assert words in str(e.value) and _one_line(e)


def test_size_takes_an_engine_by_name():
    # profile="vllm" is get_engine("vllm"), the profile `costmodel size --engine vllm` runs
    from graphs.serving.engines import get_engine

    named = size_deployment("llama-3.1-8b", **SIZE, profile="vllm").winner
    given = size_deployment("llama-3.1-8b", **SIZE, profile=get_engine("vllm")).winner
    assert named.tpot_at_percentile_s == given.tpot_at_percentile_s
    assert named.ttft_at_percentile_s == given.ttft_at_percentile_s


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"devices": []}, "devices: give at least one device"),
        ({"devices": "h100"}, "devices must be a list of device names or specs, got str 'h100'"),
        ({"tp": 2}, "tp must be a list of whole numbers, got int 2"),
    ],
)
def test_search_refuses_wrong_types(kw, words):
    with pytest.raises(CostModelError) as e:
        search("llama-3.1-8b", **{"devices": ["h100"], "batches": [1], "ctxs": [4096], **kw})
    assert words in str(e.value) and _one_line(e)
