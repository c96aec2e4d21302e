"""``model analyze`` from the persistent cache: the analysis card evaluates the compiled node
table's own forms, so its rows and totals are the library's to float rounding, and a card that
does not read back is a miss (recomputed), never a different answer."""

import json
import math

import pytest

from graphs import analyze
from graphs.serving.present.cards import CardError, analysis_from_card, build_analysis_card


def _close(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300) or (math.isinf(a) and a == b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize(
    ("model", "phase", "point", "tp"),
    [
        ("llama-3.1-8b", "decode", {"batch": 8, "ctx": 3000}, 1),
        ("llama-3.1-8b", "prefill", {"batch": 2, "seq": 1500}, 2),
        ("gpt-oss-20b", "decode", {"batch": 3, "ctx": 9000}, 1),  # windowed layers: Min(W, ctx)
        ("mamba2-2.7b", "prefill", {"batch": 1, "seq": 700}, 1),
    ],
)
def test_card_rows_equal_the_library(model, phase, point, tp):
    card = json.loads(json.dumps(build_analysis_card(model, "h100", phase, tp=tp)))  # as stored
    full = {"batch": 1, "seq": 1024, "ctx": 4096, **point}
    got = analysis_from_card(card, **full).to_dict()
    want = analyze(model, "h100", phase, tp=tp, **full).to_dict()
    assert _close(got, want)
    assert got["tp"] == tp


def test_a_tampered_card_is_refused():
    card = json.loads(json.dumps(build_analysis_card("tiny", "h100", "decode")))
    card["values"][7] = f"({card['values'][7]})*1.5"
    with pytest.raises(CardError, match="do not reproduce"):
        analysis_from_card(card, batch=2, seq=1024, ctx=64)
    card = json.loads(json.dumps(build_analysis_card("tiny", "h100", "decode")))
    card["nodes"]["names"].pop()
    with pytest.raises(CardError):
        analysis_from_card(card, batch=2, seq=1024, ctx=64)


def test_the_cli_serves_analyze_from_the_card_without_sympy(tmp_path):
    import subprocess
    import sys

    env = {
        "COSTMODEL_CACHE_DIR": str(tmp_path),
        "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1]),
    }
    cmd = [
        sys.executable,
        "-m",
        "costmodel",
        "model",
        "analyze",
        "tiny",
        "--batch",
        "3",
        "--ctx",
        "50",
        "--tp",
        "2",
    ]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    probe = (
        "import runpy, sys; sys.argv = " + repr(cmd[2:]) + "\n"
        "try:\n    runpy.run_module('costmodel', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('SYMPY' if 'sympy' in sys.modules else 'NO-SYMPY')"
    )
    again = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert again.stdout == first + "NO-SYMPY\n"  # the same answer, and sympy never imported
    assert "tp=2" in first.splitlines()[0]


@pytest.mark.parametrize(
    ("model", "batch", "ctx", "tp"),
    [
        ("llama-3.1-8b", 64, 8000, 1),  # does not fit: the verdict and both limits
        ("gpt-oss-20b", 30, 20000, 1),  # windowed layers: the capped KV split
        ("mamba2-2.7b", 9, 4096, 1),  # recurrent state
        ("llama-3.1-70b", 40, 4096, 4),
    ],
)
def test_the_decode_ledger_from_a_card_equals_the_library(model, batch, ctx, tp):
    from graphs import capacity
    from graphs.serving.present.cards import build_decode_card
    from graphs.serving.step.fit_check import capacity_report_from_card
    from models import get_model

    card = json.loads(json.dumps(build_decode_card(model, "h100", tp=tp)))
    limit = get_model(model).max_context
    got = capacity_report_from_card(card, batch=batch, ctx=ctx, model_limit=limit).to_dict()
    want = capacity(model, "h100", batch=batch, ctx=ctx, tp=tp).to_dict()
    assert _close(got, want)


def test_a_sweep_from_cards_equals_the_library_sweep():
    import numpy as np

    from graphs import sweep
    from graphs.serving.analysis.sweeps import sweep_forms
    from graphs.serving.present.cards import build_decode_card, decode_forms_from_card
    from models import get_model

    grid = {"batches": [1, 7, 64, 900], "ctxs": [128, 5000, 100000]}
    want = sweep("gpt-oss-20b", devices=["h100", "b200"], kv_dtypes=[None, "fp8"], tp=2, **grid)
    cfg = get_model("gpt-oss-20b")
    forms = [
        decode_forms_from_card(json.loads(json.dumps(build_decode_card(cfg.replace(**kv), dev, tp=2))))
        for dev in ("h100", "b200")
        for kv in ({}, {"kv_dtype": "fp8"})
    ]
    got = sweep_forms(forms[0].model, forms, tp=2, **grid)
    assert got.model == want.model and len(got) == len(want) == 48
    for k, col in want.columns.items():
        if col.dtype == object or col.dtype == bool:
            assert (got.columns[k] == col).all(), k
        else:
            np.testing.assert_allclose(got.columns[k], col, rtol=1e-12, err_msg=k)


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "tiny", "--weight-dtype", "fp8", "--batch", "4"],
        ["prefill", "tiny", "--weight-dtype", "fp8"],
        ["ledger", "tiny", "--weight-dtype", "fp8"],
        ["model", "analyze", "tiny", "--weight-dtype", "fp8"],
    ],
)
def test_a_dtype_assumption_is_said_on_every_run_not_only_the_one_that_built_the_card(
    tmp_path, monkeypatch, capsys, argv
):
    """FP8 weights on an H100 run W8A8 (vLLM's FP8 docs: Hopper supports W8A8), said once: on
    the run that builds the card and on every later run the card answers (a review found the
    note only on a cache miss)."""
    from graphs.cli import main

    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    outs = []
    for _ in range(2):
        assert main(argv) == 0
        cap = capsys.readouterr()
        assert cap.err.count("note: matmuls in fp8_e4m3 (W8A8)") == 1
        outs.append(cap.out)
    assert outs[0] == outs[1]
