"""``decode`` and ``prefill`` as report objects (issue 43 item 3): a summary built from the
library's own calls, with no argparse, renders what the command prints and its ``--json``."""

from __future__ import annotations

import json

import pytest

from graphs import decode_limits, decode_report, near_far_memory, prefill_report
from graphs.cli import main
from graphs.cli.common import dump
from graphs.serving.analysis.phase_request import PhaseRequest
from graphs.serving.present.phase_summary import DecodeSummary, PrefillSummary, expert_plan_line
from graphs.serving.step.ledger_fit import capacity_check, kv_caps
from models.catalog import get_model


def _same_json(doc, text):
    """``doc`` is the command's ``--json`` up to the last bits of a float: the command reads the
    step from its cached card (forms evaluated from text), the test from the library's forms."""
    got, want = json.loads(dump(doc)), json.loads(text)
    assert list(got) == list(want)  # the same keys in the same order
    assert _nested(got, want)


def _nested(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_nested(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_nested(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-12)
    return a == b


def _command(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return out[:-1]


def _decode(model, device, batch, ctx, tp=1):
    cfg = get_model(model)
    req = PhaseRequest("decode", device=device, batch=batch, ctx=ctx, tp=tp)
    fit = capacity_check(cfg, device, phase="decode", batch=batch, tokens=ctx, tp=tp)
    return DecodeSummary(
        req,
        decode_report(cfg, device, batch=batch, ctx=ctx, tp=tp),
        fit,
        near_far_memory(cfg, device),
        decode_limits(cfg, device, ctx=ctx, tp=tp, max_batch=fit.max_batch),
        kv_caps(cfg, tp=tp),
    )


@pytest.mark.parametrize(
    "model, batch, ctx",
    [("tiny", 1, 4096), ("llama-3.1-8b", 8, 8192), ("gemma-3-27b", 4, 32768)],  # gemma: windowed layers
)
def test_decode_summary_prints_what_decode_prints(model, batch, ctx, capsys):
    s = _decode(model, "h100-sxm", batch, ctx)
    argv = ["decode", model, "--batch", str(batch), "--ctx", str(ctx)]
    assert s.to_text() == _command(capsys, argv)
    _same_json(s.to_dict(), _command(capsys, [*argv, "--json"]))


def test_decode_summary_numbers_are_the_reports():
    s = _decode("llama-3.1-8b", "h100-sxm", 8, 8192)
    text = s.to_text()
    # TPOT bound -> 1 / step_s tokens/s per user; batch / step_s / tp per device
    assert f"{1 / s.report.step_s:.1f} tokens/s per user" in text
    assert f"{8 / s.report.step_s:.1f} tokens/s per device" in text
    assert text.startswith("llama-3.1-8b decode on h100-sxm: batch 8, ctx 8192, tp=1")


@pytest.mark.parametrize("seq, chunk", [(4096, None), (32768, 8192)])
def test_prefill_summary_prints_what_prefill_prints(seq, chunk, capsys):
    cfg = get_model("llama-3.1-8b")
    req = PhaseRequest("prefill", device="h100-sxm", seq=seq, chunk=chunk)
    fit = capacity_check(cfg, "h100-sxm", phase="prefill", batch=1, tokens=seq, tp=1)
    s = PrefillSummary(req, prefill_report(cfg, "h100-sxm", batch=1, seq=seq, chunk=chunk, tp=1), fit)
    argv = ["prefill", "llama-3.1-8b", "--seq", str(seq)] + (["--chunk", str(chunk)] if chunk else [])
    assert s.to_text() == _command(capsys, argv)
    _same_json(s.to_dict(), _command(capsys, [*argv, "--json"]))
    # the whole prompt's tokens over the summed kernel bounds
    assert f"throughput {seq / s.report.step_s:,.0f} tokens/s" in s.to_text()


def test_the_default_step_has_no_expert_plan_line():
    assert expert_plan_line({}) is None
    line = expert_plan_line({"ep": 2, "routing": "uniform"}, "x", refused=True)
    assert line == "  (--ep 2: the memory check spreads the routed experts over the 2 EP ranks; x)"


def test_the_pages_are_the_ones_html_writes(tmp_path, capsys):
    pytest.importorskip("plotly")
    page = tmp_path / "d.html"
    argv = ["decode", "llama-3.1-8b", "--batch", "8", "--ctx", "8192"]
    assert main([*argv, "--html", str(page)]) == 0
    s = _decode("llama-3.1-8b", "h100-sxm", 8, 8192)
    assert s.to_html(get_model("llama-3.1-8b"), command="costmodel " + " ".join(argv)) == page.read_text()


def test_a_chunked_prefill_says_its_terms_are_the_one_steps(capsys):
    """A review read the chunked prefill's terms (the whole prompt as one step) as the chunks':
    the TTFT sums 4 chunk steps of 8,192 tokens, each reading the weights again, while the terms
    are byte-identical to the unchunked run's. The output says which is which."""
    from graphs.cli import main

    assert main(["prefill", "llama-3.1-8b", "--seq", "32768", "--chunk", "8192"]) == 0
    out = capsys.readouterr().out
    assert "the whole prompt as one step (the TTFT above sums 4 chunk steps" in out
    assert main(["prefill", "llama-3.1-8b", "--seq", "32768"]) == 0
    assert "the whole prompt as one step" not in capsys.readouterr().out
