"""``calibrate serving`` as a library call (issue 43 item 3): the typed request checks its settings
without argparse, picks the runs held out, and :func:`run_serving_fit` returns a report that
renders itself; ``--predict-file`` is read from typed values (:func:`read_predict_file`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel.errors import CostModelError
from graphs.serving.engines import get_engine
from graphs.serving.planning.bench_results import BenchRun, vllm_arrivals
from graphs.serving.planning.predict_file import read_predict_file
from graphs.serving.planning.serving_fit import ServingFit, write_fit
from graphs.serving.planning.serving_fit_request import HOLDOUT_WHY, ServingFitRequest
from graphs.serving.present.serving_fit_report import run_serving_fit
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate
from models.catalog import get_model

M = "llama-3.1-8b"
# Llama-3.1-8B's non-embedding weights (8,030,261,248 parameters less the 128,256 x 4,096 input
# embedding) read once in bf16 (2 bytes) at the H100 SXM's 3.35e12 B/s: 4.4805 ms per token
WEIGHTS_READ_S = (8_030_261_248 - 128_256 * 4_096) * 2 / 3.35e12


def _req(**kw):
    return ServingFitRequest(**{"results": ("runs.csv",), "device": "h100", **kw})


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"tp": 0}, "tp (--tp) must be in [1, 4096], got 0"),
        ({"seed": -1}, "seed (--seed) must be in [0, 4294967295], got -1"),
        ({"max_requests": 0}, "max_requests (--max-requests) must be in [1, 10000000], got 0"),
        ({"num_blocks": 2.5}, "num_blocks (--num-blocks) must be a whole number, got 2.5"),
        ({"shared_prefix": -3}, "shared_prefix (--shared-prefix) must be in [0, 10000000], got -3"),
        ({"predict": "tgi"}, "--predict"),
        ({"fp8_scales": "static"}, "--fp8-scales static prices measured FP8 kernels: add --predict"),
        ({"predict": "vllm", "fp8_scales": "sometimes"}, "--fp8-scales"),
        ({"terms": ("kernel_scale", "bogus")}, "--terms: 'bogus' is not a term; terms: kernel_scale,"),
        ({"terms": ()}, "--terms must name at least one term"),
        # a term given twice was fitted as two columns: one copy ended at the bound (kernel_scale
        # 1.4853 printed "held at its bound 1"); an empty name (--terms "") fitted the defaults
        (
            {"terms": ("kernel_scale", "kernel_scale")},
            "--terms names 'kernel_scale' 2 times; give each term once",
        ),
        ({"terms": ("",)}, "--terms '' has an empty term name"),
        (
            {"terms": ("kernel_scale", "", "request_s")},
            "--terms 'kernel_scale,,request_s' has an empty term name",
        ),
        ({"holdout": "3,fast"}, "--holdout must be 'none' or a comma list of rates (req/s), got 'fast'"),
        ({"results": ()}, "at least one RESULT file"),
        ({"results": ["a.csv"]}, "at least one RESULT file"),
    ],
)
def test_the_request_refuses_each_bad_setting_in_one_line(kw, words):
    """Ranges, choices and the dependencies between settings, refused when the request is built
    (no argparse, no file read), in the command line's words."""
    with pytest.raises(CostModelError) as err:
        _req(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("terms", ["", "kernel_scale,kernel_scale", " , "])
def test_the_command_line_refuses_empty_or_repeated_terms(tmp_path, capsys, terms):
    """``--terms ""`` was taken as no option at all (the default terms fitted, silently), and
    ``--terms kernel_scale,kernel_scale`` fitted one term as two columns: refused, rc 2, one line,
    before any result file is read (this one does not exist) or the fit file written."""
    from graphs.cli import main

    out = tmp_path / "fit.json"
    argv = ["calibrate", "serving", str(tmp_path / "none.csv"), "--model", M, "--device", "h100"]
    assert main([*argv, "-o", str(out), "--terms", terms]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--terms" in err and ("empty term name" in err or "give each term once" in err)
    assert not out.exists()


def test_fit_serving_refuses_a_term_named_twice():
    """The library call too: two Jacobian columns of one term leave one copy at its bound."""
    from graphs.serving.planning.serving_fit import fit_serving

    with pytest.raises(CostModelError, match="name 'iteration_s' 2 times"):
        fit_serving([], lambda *a: None, base=EngineOverheads(), terms=("iteration_s", "iteration_s"))


def test_the_output_file_is_checked_when_built(tmp_path):
    """``out`` is checked before any work (costmodel.outfiles.check_output): a folder that does not
    exist, or a folder given as the file, is refused naming ``-o``."""
    with pytest.raises(CostModelError, match=r"^-o .*: folder .* does not exist"):
        _req(out=str(tmp_path / "nowhere" / "fit.json"))
    with pytest.raises(CostModelError, match=r"^-o .* is a folder; give a file path"):
        _req(out=str(tmp_path))
    assert _req(out=str(tmp_path / "new.json")).out.endswith("new.json")


def test_the_engine_defaults_to_the_predictors_and_the_terms_to_the_fit_defaults():
    """No profile: the engine ``predict`` implies (its kernels and scheduler go together), else vLLM's."""
    assert _req().engine is get_engine("vllm")
    assert _req(predict="trtllm").engine is get_engine("trtllm")
    assert _req().terms == ("kernel_scale", "iteration_s", "request_s")
    assert _req().scales == "dynamic" and _req(predict="vllm", fp8_scales="static").scales == "static"
    assert _req().cap == 5_000 and _req(max_requests=40).cap == 40


def _run(source: str, rate: float | None) -> BenchRun:
    one = np.ones(1)
    return BenchRun(source, rate, np.zeros(1), one, one, 0.1 * one, 0.2 * one)


def test_held_out_runs_by_rate():
    """Four runs at 4, 1, 3, 2 req/s: by rate they are the 2nd, 4th, 3rd and 1st, so the default
    holds out the second and fourth by rate (2 and 4 req/s: indices 3 and 0); listed rates match to
    0.1 %; ``none`` holds none; fewer than three runs hold none by default."""
    runs = [_run("a", 4.0), _run("b", 1.0), _run("c", 3.0), _run("d", 2.0)]
    assert _req().held_out(runs) == ([0, 3], HOLDOUT_WHY)
    assert _req(holdout="3.002,1").held_out(runs) == ([1, 2], "--holdout 3.002,1")
    assert _req(holdout="None").held_out(runs) == ([], "--holdout none")
    assert _req().held_out(runs[:2]) == ([], "")
    with pytest.raises(CostModelError, match=r"--holdout: no run at 7 req/s; the runs' rates: 4, 1, 3, 2"):
        _req(holdout="7").held_out(runs)


def _served(path, rate: float, rng, planted: EngineOverheads, n: int = 40) -> str:
    """A per-request CSV of what the engine with ``planted`` terms served at ``rate`` (vllm bench
    serve's Poisson draw, seed 0), 1 % noise on the latencies."""
    arr = vllm_arrivals(n, rate, 1.0, 0)
    p, o = rng.integers(100, 2000, n), rng.integers(8, 48, n)
    reqs = [Request(i, float(arr[i]), int(p[i]), int(o[i])) for i in range(n)]
    pr = simulate(M, "h100", reqs, overheads=planted).per_request
    ttft = pr["ttft_s"] * (1 + 0.01 * rng.standard_normal(n))
    e2e = np.maximum(pr["e2e_s"] * (1 + 0.01 * rng.standard_normal(n)), 1.01 * ttft)
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n")
        f.writelines(
            f"{float(arr[i])!r},{p[i]},{o[i]},{float(ttft[i])!r},{float(e2e[i])!r}\n" for i in range(n)
        )
    return str(path)


def test_run_serving_fit_recovers_planted_terms_and_renders_its_report(tmp_path):
    """The library path end to end, no argparse: runs served with a planted kernel scale of 1.25,
    5e-4 s per iteration and 8e-3 s per request come back from the fit, the file is written, and the
    report's text, document and page say the same fit."""
    planted = EngineOverheads(kernel_scale=1.25, iteration_s=5e-4, request_s=8e-3)
    rng = np.random.default_rng(5)
    files = tuple(_served(tmp_path / f"run-{r:g}.csv", r, rng, planted) for r in (3.0, 10.0, 20.0))
    out = tmp_path / "fit.json"
    said: list[str] = []
    req = ServingFitRequest(files, "h100", out=str(out), max_requests=30)
    report = run_serving_fit(req, get_model(M), say=said.append)
    ov = report.fit.overheads
    assert ov.kernel_scale == pytest.approx(1.25, rel=0.05)
    assert ov.request_s == pytest.approx(8e-3, rel=0.2)
    assert said and all("holds 40 requests: the fit replays its first 30 by arrival" in s for s in said)
    assert json.loads(out.read_text())["overheads"]["kernel_scale"] == ov.kernel_scale
    assert report.held == (1,)  # three runs: the second by rate held out
    doc, text = report.to_dict(), report.to_text()
    assert doc["file"] == str(out) and doc["held_out"][0]["source"] == "run-10.csv"
    assert text.splitlines()[0].endswith("2 run(s) fitted, 1 held out")
    assert f"fit written to {out}; use it with --predict-file {out} on simulate" in text
    pytest.importorskip("plotly")  # the page needs the html extra
    page = report.to_html("costmodel calibrate serving ...")
    assert "serving fit of llama-3.1-8b" in page and "run-10.csv" in page


def test_runs_faster_than_the_roofline_are_refused_by_the_library(tmp_path):
    """Physics is a floor, from Python too: runs of 0.6 ms per token, below the weights read once
    (4.48 ms on one H100), are refused naming the run and the bound; nothing is written."""
    f = tmp_path / "fast.csv"
    f.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
        + "".join(f"{0.5 * i},500,40,0.02,{0.02 + 0.0006 * 39}\n" for i in range(60))
    )
    out = tmp_path / "fit.json"
    with pytest.raises(CostModelError) as err:
        run_serving_fit(ServingFitRequest((str(f),), "h100", out=str(out)), get_model(M))
    msg = str(err.value)
    assert "fast.csv: mean TPOT 0.6 ms" in msg
    assert float(msg.split("takes at least ")[1].split(" ms")[0]) == pytest.approx(
        WEIGHTS_READ_S * 1e3, rel=0.01
    )
    assert not out.exists()


def test_read_predict_file_takes_typed_values(tmp_path):
    """``--predict-file`` from Python: the fit sets the framework and scale mode; one given beside
    it that differs is refused; a fit made on the bound sets no scale mode."""
    f = tmp_path / "fit.json"
    write_fit(ServingFit("m", "h100-sxm", 1, "trtllm", EngineOverheads(), {}, fp8_scales="static"), str(f))
    got = read_predict_file(str(f))
    assert (got.predict, got.fp8_scales, got.path) == ("trtllm", "static", str(f))
    assert read_predict_file(str(f), predict="trtllm", fp8_scales="static").fit == got.fit
    with pytest.raises(CostModelError, match=r"--predict vllm but --predict-file .* fitted with trtllm"):
        read_predict_file(str(f), predict="vllm")
    with pytest.raises(CostModelError, match=r"--fp8-scales dynamic but --predict-file .* static"):
        read_predict_file(str(f), fp8_scales="dynamic")
    write_fit(ServingFit("m", "h100-sxm", 1, None, EngineOverheads(), {}), str(f))
    bound = read_predict_file(str(f))
    assert (bound.predict, bound.fp8_scales) == (None, None)
    with pytest.raises(CostModelError, match="fitted with the bound"):
        read_predict_file(str(f), predict="sglang")


def _report_of(fit: ServingFit, held: tuple[int, ...] = ()):
    """A report of ``fit`` over two hand-made runs (no simulation): what it prints is rendered
    from the fit alone."""
    from graphs.serving.present.serving_fit_report import ServingFitReport
    from graphs.serving.sim.engine import EngineConfig

    runs = tuple(
        BenchRun(
            f"run-{k}.csv",
            float(k),
            np.array([0.0, 1.0]),
            np.array([100, 100]),
            np.array([1, 1]),  # one output token each: no TPOT
            np.array([0.05, 0.05]),
            np.array([0.05, 0.05]),
        )
        for k in (2, 4)
    )
    req = ServingFitRequest(
        ("run-2.csv", "run-4.csv"), "h100", terms=("kernel_scale", "iteration_s", "per_seq_s")
    )
    return ServingFitReport(req, get_model(M), fit, runs, held, "", EngineConfig())


def test_json_carries_every_note_the_text_prints_beside_a_term():
    """``--json`` lost what the text says beside a term with no standard error (held at the
    roofline bound, not told apart from another) and the line that every error is in-sample:
    ``term_notes`` and ``in_sample`` hold the text's own words."""
    from graphs.serving.planning.serving_fit import RunError

    nan = float("nan")
    fit = ServingFit(
        model=M,
        device="h100-sxm",
        tp=1,
        predict=None,
        overheads=EngineOverheads(kernel_scale=1.0, iteration_s=1e-3, per_seq_s=2e-5),
        stderr={"kernel_scale": None, "iteration_s": None, "per_seq_s": None},
        runs=[
            RunError("run-2.csv", 2.0, True, 0.01, nan, 0.02),
            RunError("run-4.csv", 4.0, True, -0.01, nan, 0.0),
        ],
        at_bound=("kernel_scale",),
        collinear=(("iteration_s", "per_seq_s"),),
    )
    report = _report_of(fit)
    text, doc = report.to_text(), report.to_dict()
    said = doc["term_notes"]
    assert set(said) == {"kernel_scale", "iteration_s", "per_seq_s"}
    assert (
        said["kernel_scale"]
        == "held at its bound 1: the roofline (a smaller scale would price kernels below it)"
    )
    assert said["iteration_s"].startswith("not told apart from per_seq_s by these runs: every run sits at")
    for words in said.values():
        assert words in text
    assert doc["in_sample"] and f"  {doc['in_sample']}" in text.splitlines()
    assert "the error above is in-sample" in doc["in_sample"]
    assert "TPOT     n/a  E2E   +2.0%  (run-2.csv)" in text  # every output one token: no TPOT
    pytest.importorskip("plotly")
    page = report.to_html()  # the page's table said "+nan" where the text says n/a
    assert "+nan" not in page and "n/a" in page


def test_json_says_nothing_is_in_sample_when_a_run_was_held_out():
    fit = ServingFit(
        model=M,
        device="h100-sxm",
        tp=1,
        predict=None,
        overheads=EngineOverheads(kernel_scale=1.2, iteration_s=1e-3, per_seq_s=2e-5),
        stderr={"kernel_scale": 0.01, "iteration_s": 1e-4, "per_seq_s": 1e-6},
    )
    doc = _report_of(fit, held=(1,)).to_dict()
    assert doc["in_sample"] is None and doc["term_notes"] == {}
