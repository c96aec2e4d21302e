"""``model analyze`` as a report object (issue 43 item 3), built without argparse:
:class:`graphs.serving.present.analysis_report.AnalysisReport` renders what ``main`` prints, and
its ``--predict`` line comes from :class:`~graphs.serving.present.step_prediction.StepPrediction`.

Hand derivation used below: Llama-3.1-8B's decode step at batch 1 reads its non-embedding weights
once, (8,030,261,248 - 128,256 x 4,096) parameters x 2 bytes (bf16) = 15.01 GB; at the H100 SXM's
3.35e12 B/s that is 4.4805 ms, a floor under the step's bound (the sum over nodes).
"""

from __future__ import annotations

import contextlib
import io
import json

from costmodel.hardware import get_device
from costmodel.hardware.fallback import roof_notes
from graphs import analyze
from graphs.cli import main
from graphs.serving.present.analysis_report import AnalysisReport
from graphs.serving.present.step_prediction import predict_step_report
from graphs.serving.step.ledger_fit import capacity_check
from models.catalog import get_model

M = "llama-3.1-8b"
WEIGHTS_READ_S = (8_030_261_248 - 128_256 * 4_096) * 2 / 3.35e12  # 4.4805 ms


def _report(prediction=None, top=0) -> AnalysisReport:
    cfg = get_model(M)
    result = analyze(cfg, "h100-sxm", "decode", tp=1, batch=1, seq=1024, ctx=4096)
    fit = capacity_check(cfg, "h100-sxm", phase="decode", batch=1, tokens=4096, tp=1)
    notes = tuple(roof_notes(get_device("h100-sxm")))
    return AnalysisReport(
        result, fit, notes, "decode", 1, 1024, 4096, 1, top=top, prediction=prediction, config=cfg
    )


def _printed(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


def test_the_report_is_what_the_command_prints():
    """The library's text and document are the command's, and the bound is above the weights read."""
    rep = _report(top=5)
    text = rep.to_text()
    assert text.splitlines()[0] == f"{M} decode on h100-sxm: batch 1, ctx 4096, tp=1"
    assert _printed(["model", "analyze", M, "--top", "5"]) == text + "\n"
    doc = rep.to_dict()
    assert json.loads(_printed(["model", "analyze", M, "--top", "5", "--json"])).keys() == doc.keys()
    assert "prediction" not in doc and "capacity" in doc
    assert rep.analysis.totals.sum_of_node_bounds_s >= WEIGHTS_READ_S * (1 - 1e-6)


def test_the_predict_line_comes_from_the_step_prediction():
    """``--predict``: the per-node columns and the one-line prediction are the StepPrediction's,
    priced without an interval (the command never printed one, and its JSON has none), then the
    step as the engine serves it."""
    cfg = get_model(M)
    pred = predict_step_report(
        cfg, "h100-sxm", "decode", batch=1, ctx=4096, tp=1, framework="vllm", interval=False, served=True
    )
    assert pred.served is not None and pred.served.to_text() in pred.brief_text()
    assert pred.interval_s is None and "interval_s" not in pred.to_dict()["prediction"]
    p = pred.prediction
    assert p is not None and p.corrected_s >= p.bound_s * (1 - 1e-9)  # physics is a floor
    rep = _report(prediction=pred, top=4)
    text = rep.to_text()
    assert pred.brief_text() in text and pred.brief_text().startswith("prediction (calibrated; vllm kernels")
    assert "predicted vllm (s)" in text and "+ shape residuals (s)" in text
    assert _printed(["model", "analyze", M, "--top", "4", "--predict", "vllm"]) == text + "\n"
    assert rep.to_dict()["prediction"] == p.to_dict()
