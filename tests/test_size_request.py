"""The ``size`` request (graphs/serving/planning/size_request.py): built and refused without
argparse, the same words as the command line, and the same winner as the command."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import build_parser, main
from graphs.cli import size as cli_size
from graphs.serving.engines import get_engine
from graphs.serving.planning.size_request import SizeRequest
from models import get_model

LOAD = {"rate": 1.0, "slo_ttft": 1.0, "slo_tpot": 0.1}

REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"disaggregated": False, "link_bandwidth": 1e9},
        "--link-bandwidth prices the P:D KV transfer: drop it or --no-disagg",
    ),
    ({"objective": "speed"}, "objective (--objective) must be one of cost, gpus, got 'speed'"),
    ({"rate": 0.0}, "rate (--rate) must be in [1e-06, 1e+09], got 0"),
    ({"slo_tpot": float("nan")}, "slo_tpot (--slo-tpot) must be a finite number, got nan"),
    ({"percentile": 0.0}, "percentile (--percentile) must be in (0, 100], got 0"),
    ({"electricity_per_kwh": -1.0}, "electricity_per_kwh (--electricity-per-kwh) must be in [0, 10], got -1"),
    ({"max_simulations": 0}, "max_simulations (--max-simulations) must be in [1, 10000], got 0"),
    ({"requests": 2.5}, "requests (--requests) must be a whole number, got 2.5"),
    ({"tps": (1, 8192)}, "tp (--tp) must list 1 to 64 whole numbers in [1, 4096], got (1, 8192)"),
    ({"devices": ()}, "--device must name at least one device, got ''"),
    ({"price_per_hour": "-3"}, "--price-per-hour must be in [0.01, 10000] USD per device-hour"),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        SizeRequest(**{**LOAD, **settings})
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_the_command_refuses_with_the_same_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "0.1", "--no-disagg"]
    assert main([*argv, "--link-bandwidth", "1e9"]) == 2
    err = capsys.readouterr().err
    assert err == f"costmodel: error: {REFUSALS[0][1]}\n"


def test_the_command_builds_the_request_and_finds_its_winner(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["size", "tiny", "--rate", "2", "--slo-ttft", "1", "--slo-tpot", "0.1", "--devices", "h100"]
    argv += ["--tp", "1:2:2", "--requests", "40", "--objective", "gpus", "--quiet"]
    req = cli_size.request_of(build_parser().parse_args(argv))
    # 1:2:2 is the geometric range 1, 2; vLLM's profile when no --engine
    direct = SizeRequest(
        rate=2.0, slo_ttft=1.0, slo_tpot=0.1, devices=("h100",), tps=(1, 2), requests=40, objective="gpus"
    )
    assert req == direct and req.engine is get_engine("vllm")
    assert req.link_bps == 50e9  # one 400 Gb/s NIC per GPU: 400e9 / 8 bytes/s
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    res = direct.run(get_model("tiny"))
    assert res.winner is not None and doc["winner"]["label"] == res.winner.label
    assert doc["winner"]["devices"] == res.winner.devices == 1  # the tiny model on one H100 is enough


def test_the_report_text_by_hand() -> None:
    from graphs.serving.planning.cost import NO_PRICE
    from graphs.serving.planning.sizing import Deployment, SizingResult

    shape = dict(device="h100-sxm", tp=1, replicas=2, prefill_replicas=0, decode_replicas=0, devices=2)
    d = Deployment(**shape, ttft_at_percentile_s=0.2, tpot_at_percentile_s=0.015, meets=True, cost=None)
    res = SizingResult(
        model="tiny",
        rate=3.0,
        slo_ttft=0.4,
        slo_tpot=0.03,
        percentile=99.0,
        objective="gpus",
        winner=d,
        runners_up=(),
        simulated=7,
        pruned=("h100-sxm tp8: wider than it needs",),
        exhausted=False,
        requests=40,
        workload="--requests 40",
    )
    lines = res.to_text(max_simulations=7).splitlines()
    assert (
        lines[0]
        == "tiny at 3 requests/s, P99 TTFT <= 0.4 s and TPOT <= 0.03 s: fewest devices, 7 candidate(s) simulated"
    )
    # every candidate ran on the bound: the latencies are a floor, said (found unsaid 2026-12-06)
    assert lines[2].startswith("  latencies: the bound (every kernel at its roofline, no engine CPU time)")
    assert lines[3] == "  pruned by the bounds: h100-sxm tp8: wider than it needs"
    # 0.2 / 0.4 = 50 % of the TTFT SLO; 0.015 s = 15.0 ms, 0.015 / 0.03 = 50 % of the TPOT SLO
    assert lines[4] == (
        "  winner: h100-sxm tp1 x 2 replica(s) = 2 device(s): P99 TTFT 0.200 s (50% of SLO), "
        f"P99 TPOT 15.0 ms (50% of SLO); {NO_PRICE}"
    )
    assert lines[5].startswith("  note: stopped after --max-simulations 7: the best confirmed so far")
    import dataclasses

    none = dataclasses.replace(res, winner=None).to_text(engine=get_engine("vllm")).splitlines()
    assert none[2].startswith("  engine vllm@1 (vLLM V1") and none[-1].endswith("(raise --max-simulations)")


def test_a_size_at_p90_names_p90_in_its_text_and_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """``--percentile 90``: every latency printed or in the JSON is the P90 and says so (none claims
    P99), and the winner's two numbers are numpy's 90th percentiles of its own run's requests."""
    import numpy as np

    from graphs.serving.planning.sizing import size_deployment

    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))  # its run cards, not a shared cache's
    argv = ["size", "tiny", "--rate", "2", "--slo-ttft", "1", "--slo-tpot", "0.1", "--devices", "h100"]
    argv += ["--tp", "1", "--requests", "40", "--objective", "gpus", "--quiet", "--percentile", "90"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "P90 TTFT <= 1 s" in text.splitlines()[0]
    winner = next(line for line in text.splitlines() if line.startswith("  winner: "))
    assert "P90 TTFT " in winner and "P90 TPOT " in winner
    assert "P99" not in text and "p99" not in text
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert "p99" not in out.lower()
    assert doc["percentile"] == doc["winner"]["percentile"] == 90
    assert all(d["percentile"] == 90 for d in doc["candidates"])
    # the same search in the library, its winner's run kept: numpy's (linear) P90 of that run
    res = size_deployment(
        get_model("tiny"), rate=2.0, slo_ttft=1.0, slo_tpot=0.1, devices=("h100",), tps=(1,), requests=40,
        objective="gpus", percentile=90.0,
    )  # fmt: skip
    assert res.winner is not None and res.winner.sim is not None
    per = res.winner.sim.per_request
    ttft = float(np.percentile(per["ttft_s"][np.isfinite(per["ttft_s"])], 90))
    tpot = float(np.percentile(per["tpot_s"][np.isfinite(per["tpot_s"])], 90))
    assert doc["winner"]["ttft_at_percentile_s"] == pytest.approx(ttft, rel=1e-12)
    assert doc["winner"]["tpot_at_percentile_s"] == pytest.approx(tpot, rel=1e-12)
    assert doc["winner"]["label"] == res.winner.label


def test_the_command_exits_1_when_none_meets_the_slos(capsys: pytest.CaptureFixture[str]) -> None:
    # a 1 us TTFT is below the tiny model's P99 prompt alone: pruned, none meets; exit 1 as a
    # point that does not fit does (options.EXIT_CODES; it exited 0, found 2026-12-06)
    argv = ["size", "tiny", "--rate", "1", "--slo-ttft", "1e-6", "--slo-tpot", "1e-6", "--devices", "h100"]
    assert main([*argv, "--tp", "1", "--requests", "20", "--quiet", "--no-disagg"]) == 1
    assert "no simulated deployment meets the SLOs" in capsys.readouterr().out
