"""The ``sweep`` request (graphs/serving/analysis/sweep_request.py): built and refused without
argparse, in the command line's words; the library's summary (graphs/serving/present/sweep_summary.py)
prints what the command prints."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.analysis.sweep_request import SweepRequest
from graphs.serving.present.sweep_summary import run_sweep
from models import get_model

REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"devices": ()}, "--device must name at least one device, got ''"),
    ({"tp": 0}, "tp (--tp) must be in [1, 4096], got 0"),
    ({"top": -1}, "top (--top) must be in [0, 1000000], got -1"),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        SweepRequest(**settings)
    assert str(exc.value) == message


def test_a_grid_too_large_is_refused_before_any_work() -> None:
    with pytest.raises(CostModelError, match="points"):
        SweepRequest(batches=tuple(range(1, 10_001)), ctxs=tuple(range(1, 10_001)))


def test_the_configurations() -> None:
    # 2 devices x 2 weight dtypes x 1 KV dtype = 4 configurations, devices outermost
    r = SweepRequest(devices=("h100", "h200"), weight_dtypes=("bf16", "fp8"))
    assert r.combos() == [
        ("h100", "bf16", None),
        ("h100", "fp8", None),
        ("h200", "bf16", None),
        ("h200", "fp8", None),
    ]


def _cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_the_sweep_is_the_commands() -> None:
    """The library's sweep (compiled here) prints what the command (its forms from cards) prints."""
    req = SweepRequest(batches=(1, 8, 64), ctxs=(1024, 8192), top=3)
    s = run_sweep(req, get_model("tiny"))
    argv = ["sweep", "tiny", "--batches", "1,8,64", "--ctxs", "1024,8192", "--top", "3", "--quiet"]
    assert _cli(*argv) == s.to_text() + "\n"
    doc = json.loads(_cli(*argv, "--json"))
    assert doc["model"] == s.to_dict()["model"]
    # 3 batches x 2 contexts x 1 configuration = 6 points
    assert len(s.result) == 6


def test_the_page(tmp_path) -> None:
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    path = tmp_path / "sweep.html"
    _cli("sweep", "tiny", "--batches", "1,8", "--ctxs", "1024", "--quiet", "--html", str(path))
    page = path.read_text()
    assert "Plotly.newPlot" in page and "decode sweep" in page


def test_a_sweep_where_nothing_fits_says_so_with_the_least_need(capsys) -> None:
    """`sweep llama-3.1-405b --device h100` fits nothing and printed an empty table with no word
    of why. It now names the point needing the least against the device, its numbers `ledger`'s
    own (total and capacity at batch 1, ctx 1024), in text and in --json's notes."""
    # ledger exits 1 on a point that does not fit
    assert (
        main(["ledger", "llama-3.1-405b", "--device", "h100", "--batch", "1", "--ctx", "1024", "--json"]) == 1
    )
    led = json.loads(capsys.readouterr().out)
    gib = 1024**3
    said = (
        "nothing fits in memory: the least need, h100-sxm bf16/bf16 tp 1 at batch 1 and ctx 1024, is "
        f"{led['terms']['total'] / gib:.2f} GiB per device; the device holds {led['capacity_bytes'] / gib:.2f} GiB "
        "(costmodel ledger has the terms)"
    )
    argv = ["sweep", "llama-3.1-405b", "--device", "h100", "--batches", "1,8", "--ctxs", "1024,4096"]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"  {said}"
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["frontier"] == [] and doc["notes"] == [said]
