"""``--predict FRAMEWORK``, ``--fp8-scales`` and ``--predict-file``: the option group every
command that prices with measured kernels shares (decode, prefill, model analyze, simulate,
search, size, serve): its options, their checks and, for decode and prefill, the library report
printed beside the bound (:class:`graphs.serving.present.step_prediction.StepPrediction`: the
prediction, its P10-P90 interval, what it rests on, a fit file's engine overheads).

Its own module so that the commands using it import it, not one another (``calibrate`` once
hosted it and closed a loop of five command modules).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS  # stdlib only: --help stays light
from graphs.serving.present.report_text import (  # their home: reports render them
    coverage_lines,
    predict_file_line,
)

from .common import dump
from .html_option import keep
from .model_option import resolve_config

__all__ = [
    "add_predict_option",
    "coverage_lines",
    "fp8_scales_of",
    "load_predict_file",
    "predict_file_line",
    "predictor_of",
    "with_prediction",
]


def load_predict_file(args: argparse.Namespace) -> Any:
    """``--predict-file``'s fit (None without it), read and reconciled with ``--predict`` and
    ``--fp8-scales`` by :func:`graphs.serving.planning.predict_file.read_predict_file`; the
    framework and scale mode it sets become the namespace's ``--predict`` and ``--fp8-scales``."""
    path = getattr(args, "predict_file", None)
    if not path:
        return None
    from graphs.serving.planning.predict_file import read_predict_file

    got = read_predict_file(path, predict=args.predict, fp8_scales=getattr(args, "fp8_scales", None))
    args.predict = got.predict
    if hasattr(args, "fp8_scales"):
        args.fp8_scales = got.fp8_scales
    return got.fit


def add_predict_option(
    sp: argparse.ArgumentParser, help: str | None = None, *, with_file: bool = True
) -> None:
    sp.add_argument(
        "--predict",
        choices=FRAMEWORKS,
        default=None,
        help=help or "also print the calibrated prediction for this framework's kernels ([measured] extra)",
    )
    sp.add_argument(
        "--fp8-scales",
        choices=FP8_SCALES,
        default=None,
        help="how FP8 activations are scaled, with --predict: computed each call (dynamic: vLLM's online "
        "--quantization fp8) or calibrated in the checkpoint (static: ModelOpt / TensorRT-LLM FP8 "
        "checkpoints); static drops the measured kernels' per-call scale time (default: dynamic)",
    )
    if with_file:
        sp.add_argument(
            "--predict-file",
            default=None,
            metavar="FIT",
            help="a `costmodel calibrate serving` fit file: its predictor framework and engine overheads "
            "(kernel scale, CPU per iteration, request path) price the steps",
        )


def fp8_scales_of(args: argparse.Namespace) -> str:
    """``--fp8-scales`` (default dynamic); refused without a predictor, which it is an option of."""
    scales = getattr(args, "fp8_scales", None)
    if scales and not getattr(args, "predict", None) and not getattr(args, "predict_file", None):
        from costmodel.errors import CostModelError

        raise CostModelError(
            f"--fp8-scales {scales} prices measured FP8 kernels: add --predict FRAMEWORK (the bound has none)"
        )
    return scales or "dynamic"


def predictor_of(args: argparse.Namespace) -> Any:
    """The :class:`~graphs.serving.pricing.predictor.Predictor` of ``--predict`` and ``--fp8-scales``."""
    from graphs.serving.pricing.predictor import Predictor

    return Predictor.of(getattr(args, "predict", None), fp8_scales=fp8_scales_of(args))


def with_prediction(
    build: Callable[[argparse.Namespace], tuple[int, str | None, dict[str, Any] | None]], phase: str
) -> Callable[[argparse.Namespace], int]:
    """The command of ``build`` (its exit code, text and ``--json`` document, unprinted); with
    ``--predict`` or ``--predict-file``, the step's
    :class:`~graphs.serving.present.step_prediction.StepPrediction` printed after its text, or its
    entries added to its document."""

    def run(args: argparse.Namespace) -> int:
        fp8_scales_of(args)  # --fp8-scales without a predictor: refused before any work
        fit = load_predict_file(args)
        rc, text, doc = build(args)
        # a refused point (it cannot run: its text says "no latency") gets no prediction either
        if rc != 0 or (fit is None and not getattr(args, "predict", None)):
            print(dump(doc) if args.json else text)
            return rc
        if not args.json:
            print(text)  # the bound first: the prediction takes a while
        pred = _step_prediction(args, phase, fit)
        keep(args, prediction=pred)
        print(dump({**(doc or {}), **pred.to_dict()}) if args.json else pred.to_text())
        return rc

    return run


def _step_prediction(args: argparse.Namespace, phase: str, fit: Any) -> Any:
    """:func:`graphs.serving.present.step_prediction.predict_step_report` at the command's point."""
    from graphs.serving.present.step_prediction import predict_step_report

    kw = {"ctx": args.ctx} if phase == "decode" else {"seq": args.seq}
    return predict_step_report(
        resolve_config(args),
        args.device,
        phase,
        batch=args.batch,
        tp=args.tp,
        framework=args.predict,
        fp8_scales=fp8_scales_of(args),
        fit=fit,
        fit_path=getattr(args, "predict_file", None) or "",
        served=True,
        **kw,
    )
