"""The ``serve disagg`` and ``serve plans`` requests (graphs/serving/analysis/serve_requests.py):
built and refused without argparse, in the command line's words; the library's summaries
(graphs/serving/present/serve_summaries.py) print what the command prints."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.cli import options as cli_options
from graphs.serving.analysis.serve_requests import (
    FLOAT_RANGES,
    INT_RANGES,
    DisaggRequest,
    PlansRequest,
    parse_plans,
)
from graphs.serving.planning.cost import device_rates
from graphs.serving.present.serve_summaries import run_disagg, run_plans
from models import get_model

REFUSALS: list[tuple[type, dict[str, Any], str]] = [
    (DisaggRequest, {"prompt": 0}, "prompt (--prompt) must be in [1, 100000000], got 0"),
    (DisaggRequest, {"decode_batch": 1.5}, "decode_batch (--decode-batch) must be a whole number, got 1.5"),
    (
        DisaggRequest,
        {"link_bandwidth": 1e3},
        "link_bandwidth (--link-bandwidth) must be in [1e+06, 1e+15], got 1000",
    ),
    (DisaggRequest, {"link_latency": -1e-6}, "link_latency (--link-latency) must be in [0, 1], got -1e-06"),
    (DisaggRequest, {"rate": float("inf")}, "rate (--rate) must be a finite number, got inf"),
    (
        DisaggRequest,
        {"overlap": "before"},
        "overlap (--overlap) must be one of after, layerwise, got 'before'",
    ),
    (DisaggRequest, {"decode_device": ""}, "--decode-device must name at least one device, got ''"),
    (PlansRequest, {"devices": ()}, "--device must name at least one device, got ''"),
    (
        PlansRequest,
        {"batches": (0,)},
        "batches (--batches) must list 1 to 10000 whole numbers in [1, 100000000], got (0,)",
    ),
    (PlansRequest, {"ctx": 0}, "ctx (--ctx) must be in [1, 100000000], got 0"),
    (PlansRequest, {"plans": ()}, "--plans must list 1 to 256 plans, got ()"),
    (
        PlansRequest,
        {"plans": ((4, 0, 1, 1),)},
        "--plans: (4, 0, 1, 1) is not four whole numbers in [1, 4096] (tp, pp, ep, micro-batches)",
    ),
]


@pytest.mark.parametrize(("kind", "settings", "message"), REFUSALS, ids=[m[:40] for *_, m in REFUSALS])
def test_each_refusal_without_argparse(kind: type, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        kind(**settings)
    assert str(exc.value) == message


def test_the_ranges_are_the_command_lines() -> None:
    assert {k: cli_options.INT_RANGES[k] for k in INT_RANGES} == INT_RANGES
    assert {k: cli_options.FLOAT_RANGES[k] for k in FLOAT_RANGES} == FLOAT_RANGES


def test_plans_words() -> None:
    assert parse_plans("8x1x1x1, 4x2x1x4") == ((8, 1, 1, 1), (4, 2, 1, 4))
    with pytest.raises(CostModelError, match=r"'4x2' is not TPxPPxEPxMICROBATCHES"):
        parse_plans("4x2")


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def _rates(*devices: str) -> dict[str, Any]:
    return {d: device_rates(d, None, 0.0) for d in devices}


def test_disagg_is_the_commands() -> None:
    req = DisaggRequest(prompt=2048, output=128, decode_batch=8, rate=2.0)
    s = run_disagg(req, get_model("tiny"), rates=_rates("b200", "h200"))
    argv = [
        "serve",
        "disagg",
        "tiny",
        "--prompt",
        "2048",
        "--output",
        "128",
        "--decode-batch",
        "8",
        "--rate",
        "2",
    ]
    assert _cli(*argv) == s.to_text() + "\n"
    doc = json.loads(_cli(*argv, "--json"))
    t = s.result.ttft
    assert doc["ttft"]["ttft_s"] == pytest.approx(t.ttft_s)
    # transfer after the whole prefill: TTFT is the sum of its three terms
    assert t.ttft_s == pytest.approx(t.prefill_s + t.kv_transfer_s + t.first_decode_s)


def test_plans_are_the_commands() -> None:
    req = PlansRequest(batches=(8,), plans=((1, 1, 1, 1), (2, 1, 1, 1)))
    s = run_plans(req, get_model("tiny"), rates=_rates("h100-sxm"))
    argv = ["serve", "plans", "tiny", "--batches", "8", "--plans", "1x1x1x1,2x1x1x1"]
    assert _cli(*argv) == s.to_text() + "\n"
    doc = json.loads(_cli(*argv, "--json"))
    assert [r["plan"] for r in doc] == [r["plan"] for r in s.to_dict()]
    # one device per replica at tp 1, two at tp 2: the rows' device counts
    assert [r["devices"] for r in s.rows] == [1, 2]


def test_pages_draw_the_reports(tmp_path) -> None:
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    for argv in (
        ["serve", "disagg", "tiny", "--prompt", "2048"],
        ["serve", "plans", "tiny", "--batches", "8", "--plans", "1x1x1x1,2x1x1x1"],
    ):
        path = tmp_path / "page.html"
        text = _cli(*argv, "--html", str(path))
        page = path.read_text()
        assert "Plotly.newPlot" in page and "<pre>" in page
        first = text.splitlines()[0].replace("'", "&#x27;")
        assert first in page  # the printed lines, escaped
