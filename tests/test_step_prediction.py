"""``decode`` / ``prefill`` with ``--predict`` and ``--predict-file`` print a library report
(:class:`graphs.serving.present.step_prediction.StepPrediction`), built without argparse: its
``to_text`` is what ``main`` prints after the step's summary, its ``to_dict`` what ``--json`` adds.

Hand derivation used below (:class:`FittedStep`): a fit with kernel_scale 1.3, 1 ms per
iteration, 20 us per sequence and 100 ns per token, applied to a decode step of batch 8 (8 new
tokens) whose kernels take 10 ms and whose roofline bound is 4 ms:
CPU = 1e-3 + 8 x 20e-6 + 8 x 100e-9 = 1.1608 ms; kernels 1.3 x 10 = 13 ms (above the bound);
step 13 + 1.1608 = 14.1608 ms. With kernel_scale 0.05 the scaled kernels (0.5 ms) fall below
the 4 ms bound, so the bound prices them: step 4 + 1.1608 = 5.1608 ms.
"""

from __future__ import annotations

import json

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.planning.serving_fit import ServingFit, read_fit, write_fit
from graphs.serving.present.step_prediction import FittedStep, StepPrediction, predict_step_report
from graphs.serving.pricing.overheads import EngineOverheads
from models.catalog import get_model

M = "llama-3.1-8b"


def _overheads(scale: float) -> EngineOverheads:
    return EngineOverheads(iteration_s=1e-3, per_seq_s=20e-6, per_token_s=100e-9, kernel_scale=scale)


def test_a_fitted_step_is_the_hand_derivation():
    fit = ServingFit(M, "h100-sxm", 1, "vllm", _overheads(1.3), {})
    d = FittedStep("f.json", fit, "decode", 8, 8, 10e-3, 4e-3, M, "h100-sxm").to_dict()
    assert d["cpu_s"] == pytest.approx(1.1608e-3, rel=1e-12)
    assert d["scaled_kernels_s"] == pytest.approx(13e-3, rel=1e-12)
    assert d["step_s"] == pytest.approx(14.1608e-3, rel=1e-12)
    assert d["floored_at_bound"] is False
    low = ServingFit(M, "h100-sxm", 1, "vllm", _overheads(0.05), {})
    step = FittedStep("f.json", low, "decode", 8, 8, 10e-3, 4e-3, M, "h100-sxm")
    assert step.to_dict()["step_s"] == pytest.approx(5.1608e-3, rel=1e-12)
    text = step.to_text()
    assert "0.05 x 10.000 ms kernels = 0.500 ms, held at the roofline bound 4.000 ms" in text
    assert "= 5.161 ms per step" in text and text.count("physics is a floor") == 1


def _write(tmp_path, predict: str | None, scale: float) -> str:
    path = str(tmp_path / "fit.json")
    write_fit(ServingFit(M, "h100-sxm", 1, predict, _overheads(scale), {}), path)
    return path


def _main(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return str(capsys.readouterr().out)


@pytest.mark.parametrize(
    "phase, point, predict, scale",
    [
        ("decode", {"ctx": 1000}, None, 0.05),  # a fit made on the bound, floored
        ("prefill", {"seq": 512}, None, 1.2),
        ("decode", {"ctx": 1000}, "vllm", 1.3),  # kernels predicted, then the fit's overheads
    ],
)
def test_the_report_is_what_main_prints(tmp_path, capsys, phase, point, predict, scale):
    """main()'s text is the summary's, then ``to_text``; its JSON the summary's plus ``to_dict``."""
    fit_path = _write(tmp_path, predict, scale)
    ((k, x),) = point.items()
    argv = [phase, M, "--device", "h100", "--batch", "8", f"--{k}", str(x)]
    report = predict_step_report(
        get_model(M),
        "h100",
        phase,
        batch=8,
        framework=predict,
        fit=read_fit(fit_path),
        fit_path=fit_path,
        **point,
    )
    assert isinstance(report, StepPrediction) and report.fitted is not None
    assert (report.prediction is None) == (predict is None)
    bare = _main(capsys, argv)
    assert _main(capsys, [*argv, "--predict-file", fit_path]) == bare + report.to_text() + "\n"
    doc = json.loads(_main(capsys, [*argv, "--json"]))
    with_fit = json.loads(_main(capsys, [*argv, "--json", "--predict-file", fit_path]))
    assert with_fit == {**doc, **json.loads(json.dumps(report.to_dict()))}
    assert with_fit["engine_overheads"]["file"] == fit_path


def test_a_prediction_without_kernels_or_a_fit_is_refused():
    with pytest.raises(CostModelError, match="needs a framework's kernels or a fit"):
        predict_step_report(get_model(M), "h100", "decode", batch=1, ctx=10)
    with pytest.raises(CostModelError, match="'decode' or 'prefill'"):
        predict_step_report(get_model(M), "h100", "train", batch=1, ctx=10, framework="vllm")
    with pytest.raises(CostModelError, match="needs seq"):
        predict_step_report(get_model(M), "h100", "prefill", batch=1, ctx=10, framework="vllm")


def test_a_fit_for_another_framework_is_refused():
    fit = ServingFit(M, "h100-sxm", 1, "vllm", _overheads(1.0), {})
    with pytest.raises(CostModelError, match=r"framework trtllm but the fit 'f\.json' was fitted with vllm"):
        predict_step_report(
            get_model(M), "h100", "decode", batch=1, ctx=10, framework="trtllm", fit=fit, fit_path="f.json"
        )


def test_a_refused_routed_point_under_json_prints_one_json_document(capsys):
    """The refusal's note on a routed step's memory check is text: ``--json`` printed it after
    the document, which then did not parse. Batch 4096 at ctx 40,000 of Qwen3-30B-A3B needs far
    more than one H100's 80 GB (its KV alone: 48 layers x 4 KV heads x 128 x 2 (K, V) x 2 B =
    96 KiB per token, x 4096 x 40,000 = 15 TiB)."""
    argv = ["decode", "qwen3-30b-a3b", "--device", "h100", "--batch", "4096", "--ctx", "40000", "--ep", "2"]
    assert main([*argv, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"capacity", "refused"}
    assert main(argv) == 1
    assert (
        "(--ep 2: the memory check spreads the routed experts over the 2 EP ranks" in capsys.readouterr().out
    )


def test_a_refused_point_gets_no_prediction(capsys):
    """A point that cannot run prints "no latency": ``--predict`` adds no prediction to it either,
    in text or in ``--json`` (Llama-3.1-70B's KV at batch 4096, ctx 40,000: 80 layers x 8 KV heads
    x 128 x 2 (K, V) x 2 B = 320 KiB per token, x 4096 x 40,000 = 49 TiB, against one H100's 80 GB)."""
    argv = [
        "decode",
        "llama-3.1-70b",
        "--device",
        "h100",
        "--batch",
        "4096",
        "--ctx",
        "40000",
        "--predict",
        "vllm",
    ]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "no latency for a point that cannot run" in out and "predicted" not in out
    assert main([*argv, "--json"]) == 1
    assert set(json.loads(capsys.readouterr().out)) == {"capacity", "refused"}
