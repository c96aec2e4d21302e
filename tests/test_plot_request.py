"""The ``plot`` request (graphs/serving/analysis/plot_request.py): built and refused without
argparse, in the command line's words; the library draws the figure the command draws
(graphs/serving/present/plot_report.py)."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.analysis.plot_request import PlotRequest
from graphs.serving.present.plot_report import run_plot
from models import get_model

REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"kind": "pie"},
        "kind (--kind) must be one of roofline, ledger, frontier, headroom, batch-sweep, got 'pie'",
    ),
    ({"kind": "ledger", "phase": "train"}, "phase (--phase) must be one of decode, prefill, got 'train'"),
    ({"kind": "ledger", "tp": 0}, "tp (--tp) must be in [1, 4096], got 0"),
    ({"kind": "ledger", "measure": True}, "--measure applies to batch-sweep only, not ledger"),
    (
        {"kind": "batch-sweep", "measure": True, "device": "h100"},
        "batch-sweep --measure times a numpy GEMM on this machine; drop --device/--model",
    ),
    # a review found --precision bogus accepted and ignored by the figures that draw no roof
    *(
        (
            {"kind": kind, "precision": "bogus"},
            f"--precision applies to roofline and headroom only (the roofs drawn), not {kind}",
        )
        for kind in ("ledger", "frontier", "batch-sweep")
    ),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        PlotRequest(**settings)
    assert str(exc.value) == message


def test_the_defaults() -> None:
    r = PlotRequest("roofline")
    assert (r.model_name, r.device_name) == ("llama-3.1-8b", "h100-sxm")


def test_the_figure_is_the_commands(tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    lib = tmp_path / "lib.svg"
    report = run_plot(PlotRequest("ledger", model="tiny", ctx=1024), get_model("tiny"), str(lib))
    assert report.to_text() == f"wrote {lib}"
    assert "memory ledger" in report.title and "tiny" in report.title
    cli = tmp_path / "cli.svg"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plot", "ledger", "--model", "tiny", "--ctx", "1024", "--out", str(cli)]) == 0
    assert out.getvalue() == f"wrote {cli}\n"
    assert report.title in cli.read_text()  # the same title drawn


def test_a_batch_sweep_that_fits_nowhere(tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    req = PlotRequest("batch-sweep", model="llama-3.1-70b", device="h100", ctx=100_000)
    with pytest.raises(CostModelError, match="does not fit one"):
        run_plot(req, get_model("llama-3.1-70b"), str(tmp_path / "b.svg"))


@pytest.mark.parametrize("kind", ["roofline", "headroom"])
def test_a_roof_the_device_lacks_is_refused_naming_the_option(kind: str, tmp_path) -> None:
    assert PlotRequest(kind).precision_name == "bf16"
    with pytest.raises(CostModelError) as exc:
        run_plot(
            PlotRequest(kind, model="tiny", precision="bogus"), get_model("tiny"), str(tmp_path / "x.png")
        )
    assert str(exc.value) == (
        "--precision 'bogus': h100-sxm has no tensor roof of that precision; "
        "allowed: fp8, bf16, fp16, tf32, int8, fp64"
    )
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("argv", "given"),
    [
        (["roofline", "--phase", "prefill", "--seq", "10000000"], "--seq 10,000,000"),
        (["headroom", "--phase", "prefill", "--seq", "10000000"], "--seq 10,000,000"),
        (["roofline", "--ctx", "10000000"], "--ctx 10,000,000"),
        (["ledger", "--ctx", "10000000"], "--ctx 10,000,000"),
        (["batch-sweep", "--ctx", "10000000"], "--ctx 10,000,000"),
    ],
)
def test_a_context_past_the_models_limit_is_refused_as_prefill_refuses_it(
    argv: list[str], given: str, tmp_path, capsys
) -> None:
    """A review found ``plot headroom --phase prefill --seq 10000000`` drawn with nothing said,
    where ``prefill`` refuses that prompt without --allow-long-context."""
    out = tmp_path / "x.png"
    assert main(["plot", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costmodel: error: llama-3.1-8b: {given} exceeds the model's context limit")
    assert "pass --allow-long-context" in err and not out.exists()


def test_allow_long_context_draws_the_figure_with_a_warning(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    out = tmp_path / "x.svg"
    argv = ["plot", "roofline", "--phase", "prefill", "--seq", "200000", "--allow-long-context"]
    assert main([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("costmodel: warning: llama-3.1-8b: --seq 200,000 exceeds the model's context limit") == 1
    assert out.exists()


@pytest.mark.parametrize("kind", ["roofline", "headroom"])
def test_a_prefill_title_names_the_prompt_not_ctx(kind: str, tmp_path) -> None:
    """A prefill step is ``B*S`` prompt tokens attending to the prompt itself
    (graphs/blocks/phase.py: ``kv_len`` is the prefix plus ``S``; ``--ctx`` is a decode's KV
    length), so the roofline and headroom titles of ``--phase prefill`` name ``seq`` alone; a
    decode's name ``ctx`` alone. Expected titles written out from plot_title's layout."""
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    cfg = get_model("tiny")
    pre = run_plot(PlotRequest(kind, model="tiny", phase="prefill", seq=512), cfg, str(tmp_path / "p.svg"))
    assert pre.title == f"{kind} (bf16): tiny prefill on h100-sxm, batch 8, seq 512, tp 1"
    dec = run_plot(PlotRequest(kind, model="tiny", phase="decode", ctx=1024), cfg, str(tmp_path / "d.svg"))
    assert dec.title == f"{kind} (bf16): tiny decode on h100-sxm, batch 8, ctx 1024, tp 1"
