"""The ``search`` request (graphs/serving/planning/search_request.py): built and refused without
argparse, the same words as the command line, and the same frontier as the command."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import build_parser, main
from graphs.cli import search as cli_search
from graphs.serving.planning.search_request import SearchRequest
from models import get_model

AXES = {"batches": (1, 8), "ctxs": (1024,)}

REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"rank_by": "pessimistic"},
        "--rank-by pessimistic needs --predict FRAMEWORK (the bound has no interval)",
    ),
    ({"rank_by": "median"}, "rank_by (--rank-by) must be one of point, pessimistic, got 'median'"),
    (
        {"price_per_hour": "2.5"},
        "--price-per-hour/--electricity-per-kwh price the --cost objective: add --cost",
    ),
    ({"electricity_per_kwh": 0.1}, "--price-per-hour/--electricity-per-kwh price the --cost objective"),
    ({"cost": True, "price_per_hour": "b200=3"}, "--price-per-hour"),  # a device not searched
    ({"cost": True, "price_per_hour": "lots"}, "--price-per-hour: 'lots' must be USD per device-hour"),
    ({"spec_k": 2}, "--spec-k/--spec-accept/--spec-expected need --spec-draft"),
    ({"spec_draft": "ngram"}, "--spec-draft ngram needs --spec-accept"),
    ({"tp": (0,)}, "tp (--tp) must list 1 to 10000 whole numbers in [1, 4096], got (0,)"),
    ({"batches": ()}, "batches (--batches) must list 1 to 100000 whole numbers in [1, 10000000], got ()"),
    (
        {"ctxs": (1024.0,)},
        "ctxs (--ctxs) must list 1 to 100000 whole numbers in [1, 100000000], got (1024.0,)",
    ),
    ({"prompt": 0}, "prompt (--prompt) must be in [1, 100000000], got 0"),
    ({"slo_tpot": -1.0}, "slo_tpot (--slo-tpot) must be in [1e-06, 1e+06], got -1"),
    ({"devices": ()}, "--device must name at least one device, got ''"),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        SearchRequest(**{**AXES, **settings})
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rank-by", "pessimistic"], REFUSALS[0][1]),
        (["--price-per-hour", "2.5"], REFUSALS[2][1]),
        (["--spec-k", "2"], REFUSALS[6][1]),
    ],
)
def test_the_command_refuses_with_the_same_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "tiny", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("costmodel: error: ") and message in err and err.count("\n") == 1


def test_the_command_builds_the_request_and_finds_its_frontier(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["search", "tiny", "--tp", "1,2", "--batches", "1:8:2", "--ctxs", "1024,4096", "--quiet"]
    req = cli_search.request_of(build_parser().parse_args(argv))
    # 1:8:2 is the geometric range 1, 2, 4, 8
    assert req == SearchRequest(tp=(1, 2), batches=(1, 2, 4, 8), ctxs=(1024, 4096))
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    res = req.run(get_model("tiny"))
    # 2 tp x 4 batches x 2 contexts = 16 points of one device and dtype
    assert doc["points"] == res.points == 16
    assert doc["frontier"] == json.loads(json.dumps(res.to_dict()["frontier"]))


def test_the_report_text_by_hand() -> None:
    from graphs.serving.planning.design_search import SearchResult

    def row(batch: int, tpot: float, usd: float | None) -> dict[str, Any]:
        # 1 / TPOT tokens/s per user; batch / TPOT per device (tp1)
        return dict(
            plan="h100-sxm bf16/bf16 tp1 pp1 ep1 m1",
            device="h100-sxm",
            batch=batch,
            ctx=1024,
            ttft_s=0.01,
            tpot_s=tpot,
            tokens_per_s_per_user=1 / tpot,
            tokens_per_s_per_device=batch / tpot,
            energy_per_token_j=None,
            usd_per_m_output=usd,
        )

    rows = (row(1, 0.004, 0.5), row(8, 0.005, None))
    res = SearchResult(
        model="tiny",
        points=2,
        valid=2,
        fits=2,
        meets_slo=2,
        objectives=("tokens_per_s_per_user", "tokens_per_s_per_device", "usd_per_m_output"),
        frontier=rows,
        best={},
        best_by_ctx={1024: {"fastest_user": rows[0]}},
        contexts=1,
    )
    text = res.to_text(top=1)
    lines = text.splitlines()
    assert lines[0].startswith(
        "tiny: 2 points; 2 valid plans, 2 fit in memory, 2 meet the SLOs; Pareto frontier (2 points"
    )
    assert lines[1] == "  showing 1 of 2 frontier points (--top 0 for all, --csv or --json)"
    # the first row: 1 / 0.004 s = 250.0 tokens/s per user and per device; no TDP; $0.5/M
    assert "250.0" in lines[4] and "no TDP" in lines[4] and lines[4].rstrip().endswith("0.5")
    assert "h100-sxm: no price: pass --price-per-hour" in text  # the second row's device has none
    assert lines[-1] == "  fastest user: h100-sxm bf16/bf16 tp1 pp1 ep1 m1, batch 1"
    all_rows = res.to_text(top=0).splitlines()
    assert len(all_rows) == len(lines) and "showing" not in res.to_text(top=0)  # one row more, no "showing"


def test_an_empty_device_list_names_the_option_as_typed(capsys):
    """search's option is documented as --device (--devices is its other spelling,
    graphs.cli.options.SPELLINGS): `search --device ,,` said '--devices must name ...'."""
    assert main(["search", "llama-3.1-8b", "--device", ",,"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--device must name at least one device, got ''") and len(err.splitlines()) == 1
