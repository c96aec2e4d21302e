"""One $/Mtoken for every command (issue 45, item 3; graphs.serving.planning.cost).

Before, one deployment printed three different "$ per million tokens": ``simulate --max-rate``
split the device-time between input and output by phase, ``search --cost`` took the whole bill
over the decode point's tokens, and ``size`` priced each candidate over its busy device-seconds
(the drain tail's small batches included), so a winner at a lower $/h printed a higher $/Mtok
than a dearer runner-up serving the same requests. Now every command divides the $/h of the
devices it uses by the tokens per hour served at its operating point; these tests build one
deployment and check that the commands agree and that the figure is that hand computation.
"""

import json

import numpy as np
import pytest

from graphs.cli import main
from graphs.serving.planning.sizing import size_deployment

M = "llama-3.1-8b"
PRICE = 2.0  # USD per H100-hour, given
LOAD = dict(requests=150, prompt="lognormal:800,0.6", output="lognormal:120,0.6", seed=3)
SLO = dict(slo_ttft=0.5, slo_tpot=0.03)


def _json(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _hand(devices, per_request):
    """price x devices / served output tok/s / 3600 x 1e6, the served rate read off the run:
    its output tokens over first arrival to last first token plus one mean gap between the
    arrivals, n requests arriving over n - 1 gaps (graphs.serving.planning.cost)."""
    arrival = per_request["arrival_s"]
    gap = (arrival.max() - arrival.min()) / (len(arrival) - 1)
    seconds = float(np.max(arrival + per_request["ttft_s"]) - np.min(arrival) + gap)
    out_per_s = float(per_request["output"].sum()) / seconds
    in_per_s = float(per_request["prompt"].sum()) / seconds
    return (
        PRICE * devices / out_per_s / 3600 * 1e6,
        PRICE * devices / in_per_s / 3600 * 1e6,
        PRICE * devices / (in_per_s + out_per_s) / 3600 * 1e6,
    )


@pytest.fixture(scope="module")
def sized():
    return size_deployment(
        M,
        rate=8.0,
        devices=["h100"],
        tps=(1,),
        disaggregated=False,
        prices={"h100-sxm": PRICE},
        **SLO,
        **LOAD,
    )


def test_size_and_simulate_print_the_same_cost_for_the_same_deployment(sized, capsys):
    w = sized.winner
    assert w is not None and w.cost is not None and w.sim is not None
    out, inp, blended = _hand(w.devices, w.sim.per_request)
    assert w.cost.usd_per_m_output == pytest.approx(out, rel=1e-12)
    assert w.cost.usd_per_m_input == pytest.approx(inp, rel=1e-12)
    assert w.cost.usd_per_m_tokens == pytest.approx(blended, rel=1e-12)
    assert w.cost.usd_per_hour == pytest.approx(PRICE * w.devices)
    sim = _json(
        capsys,
        [
            "simulate", M, "--device", "h100", "--replicas", str(w.replicas), "--router", "least_outstanding",
            "--rate", "8", "--requests", "150", "--prompt", LOAD["prompt"], "--output", LOAD["output"],
            "--seed", "3", "--price-per-hour", str(PRICE), "--quiet",
        ],
    )  # fmt: skip
    for key in ("usd_per_hour", "usd_per_m_input", "usd_per_m_output", "usd_per_m_tokens"):
        assert sim["cost"][key] == pytest.approx(getattr(w.cost, key), rel=1e-12)


def test_every_candidate_serving_the_same_load_prices_its_tokens_as_its_hours():
    """Issue 45: size printed a winner at $30.15/h as $0.67/Mtok and a runner-up at $36.18/h as
    $0.28/Mtok. Every candidate serves the same requests within the SLOs, so each serves the
    same tokens per hour (to within one TTFT over the arrival span) and $/Mtok / ($/h) is one
    number for all of them (five here: A100 1, 1P:1D and TP2, H100 1, B200 1)."""
    res = size_deployment(M, rate=8.0, devices=["h100", "b200", "a100"], tps=(1, 2), **SLO, **LOAD)
    met = [d for d in res.candidates if d.meets and d.cost is not None]
    assert len(met) >= 4 and len({d.cost.usd_per_hour for d in met}) >= 3
    ratios = [d.cost.usd_per_m_tokens / d.cost.usd_per_hour for d in met]
    assert max(ratios) / min(ratios) < 1.05


def test_max_rate_prints_the_cost_of_a_run_at_that_rate(capsys):
    argv = ["simulate", M, "--device", "h100", "--requests", "150", "--prompt", LOAD["prompt"]]
    argv += ["--output", LOAD["output"], "--seed", "3", "--price-per-hour", str(PRICE), "--quiet"]
    m = _json(capsys, [*argv, "--max-rate", "--slo-ttft", "0.5", "--slo-tpot", "0.015"])
    assert m["max_rate_requests_per_s"] is not None and m["cost"] is not None
    at = _json(capsys, [*argv, "--rate", repr(m["max_rate_requests_per_s"])])
    for key in ("usd_per_m_input", "usd_per_m_output", "usd_per_m_tokens"):
        assert m["cost"][key] == pytest.approx(at["cost"][key], rel=1e-6)
    # the hand computation on the served rates the run reports with its cost
    c = m["cost"]
    assert c["usd_per_m_output"] == pytest.approx(PRICE / c["output_tokens_per_s"] / 3600 * 1e6, rel=1e-12)
    assert c["usd_per_m_tokens"] == pytest.approx(
        PRICE / (c["input_tokens_per_s"] + c["output_tokens_per_s"]) / 3600 * 1e6, rel=1e-12
    )


def test_search_and_serve_plans_agree_at_one_decode_point(capsys):
    """An analytic point, 100 % busy decoding: TP2 on two H100s at batch 64, ctx 4096. The cost
    is 2 x $2/h over 64 / TPOT output tokens/s, with TPOT read from each command's own row."""
    price = ["--price-per-hour", str(PRICE)]
    found = _json(
        capsys,
        ["search", M, "--device", "h100", "--tp", "2", "--batches", "64", "--ctxs", "4096", "--cost", *price,
         "--quiet"],
    )  # fmt: skip
    (row,) = [r for r in found["frontier"] if r["batch"] == 64 and r["ctx"] == 4096]
    plans = _json(
        capsys,
        ["serve", "plans", M, "--device", "h100", "--plans", "2x1x1x1", "--batches", "64", "--ctx", "4096", *price],
    )  # fmt: skip
    (plan,) = [r for r in plans if isinstance(r, dict) and r.get("batch") == 64 and "usd_per_m_output" in r]
    assert row["tpot_s"] == pytest.approx(plan["step_s"], rel=1e-12)
    hand = PRICE * 2 / (64 / row["tpot_s"]) / 3600 * 1e6
    assert row["usd_per_m_output"] == pytest.approx(hand, rel=1e-12)
    assert plan["usd_per_m_output"] == pytest.approx(hand, rel=1e-12)


def test_serve_disagg_prices_every_device_it_sizes(capsys):
    """Issue 45: "1 prefill + 2 decode devices" was priced as "$10.95/h for 2 device(s)". At 2
    requests/s of 8192 + 512 tokens: 1 B200 ($6.03/h) + 2 H100 ($4.916/h) = $15.862/h over
    2 x 512 = 1,024 output tokens/s (and 16,384 input)."""
    argv = ["serve", "disagg", "llama-2-7b", "--prefill-device", "b200", "--decode-device", "h100"]
    argv.append("--allow-long-context")  # 8,192 + 512 tokens past Llama-2's 4,096: the pricing, not the limit
    argv += ["--link-bandwidth", "12.5e9", "--rate", "2", "--decode-batch", "8"]
    doc = _json(capsys, argv)
    assert (doc["prefill_devices"], doc["decode_devices"]) == (1, 2)
    c = doc["cost"]
    assert c["devices"] == 3 and c["usd_per_hour"] == pytest.approx(6.03 + 2 * 4.916)
    assert c["usd_per_m_output"] == pytest.approx(15.862 / 1024 / 3600 * 1e6)  # $4.303
    assert c["usd_per_m_input"] == pytest.approx(15.862 / 16384 / 3600 * 1e6)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 prefill + 2 decode devices" in text and "$15.86/h for 3 device(s)" in text


def test_a_device_priced_twice_is_refused(capsys):
    argv = ["simulate", M, "--rate", "1", "--requests", "2", "--quiet"]
    assert main([*argv, "--price-per-hour", "h100-sxm=1,h100-sxm=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "prices h100-sxm twice" in err and "'h100-sxm=2'" in err


# ------------------------------------------------------------ the same commands' other messages
def test_the_max_rate_workload_line_says_how_the_requests_are_sent(capsys):
    """``simulate --max-rate`` printed "(all sent at once, no --rate)" (its probes send the one
    draw at each probed rate) with the physical ceiling glued on after a semicolon."""
    argv = ["simulate", M, "--requests", "30", "--max-rate", "--slo-ttft", "0.5", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "workload:" in ln]
    assert "all sent at once" not in line and "physical ceiling" not in line
    assert "--arrival poisson (the same draw at every probed rate)" in line
    assert any(ln.startswith("  physical ceiling ") for ln in out.splitlines())


def test_the_simulation_page_shows_the_cost_the_command_prints(tmp_path, capsys):
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    page = tmp_path / "sim.html"
    argv = ["simulate", M, "--rate", "4", "--requests", "20", "--price-per-hour", str(PRICE), "--quiet"]
    assert main([*argv, "--html", str(page)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("cost ")]
    blended = line.split(" = ")[1].split("/M tokens")[0]  # e.g. $0.1234
    assert blended in page.read_text()
