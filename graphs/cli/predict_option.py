"""``--predict FRAMEWORK``, ``--fp8-scales`` and ``--predict-file``: the option group every
command that prices with measured kernels shares (decode, prefill, model analyze, simulate,
search, size, serve), and what it prints beside the bound (the prediction, its P10-P90 interval,
what it rests on, a fit file's engine overheads).

Its own module so that the commands using it import it, not one another (``calibrate`` once
hosted it and closed a loop of five command modules).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections.abc import Callable
from typing import Any

from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS  # stdlib only: --help stays light
from graphs.serving.present.report_text import (  # their home: reports render them
    coverage_lines,
    predict_file_line,
)

from .common import dump
from .model_option import resolve_config

__all__ = [
    "add_predict_option",
    "coverage_lines",
    "fp8_scales_of",
    "load_predict_file",
    "predict_file_line",
    "prediction_label",
    "predictor_of",
    "step_interval",
    "step_prediction",
    "with_prediction",
]


def load_predict_file(args: argparse.Namespace) -> Any:
    """``--predict-file``'s fit (None without it); its predictor framework becomes ``--predict``
    and its FP8 scale mode ``--fp8-scales`` (each must agree with the flag when both are given:
    the fitted kernel scale corrects kernels priced that way)."""
    path = getattr(args, "predict_file", None)
    if not path:
        return None
    from costmodel.errors import CostModelError
    from graphs.serving.planning.serving_fit import read_fit

    fit = read_fit(path)
    if args.predict and args.predict != fit.predict:
        raise CostModelError(
            f"--predict {args.predict} but --predict-file {path[:200]!r} was fitted with "
            f"{fit.predict or 'the bound'}; drop --predict (the file sets it)"
        )
    args.predict = fit.predict
    scales = getattr(args, "fp8_scales", None)
    if scales and scales != fit.fp8_scales:
        raise CostModelError(
            f"--fp8-scales {scales} but --predict-file {path[:200]!r} was fitted with {fit.fp8_scales} "
            "FP8 activation scales; drop --fp8-scales (the file sets it)"
        )
    if hasattr(args, "fp8_scales"):
        args.fp8_scales = fit.fp8_scales if fit.predict else None
    return fit


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


def step_prediction(args: argparse.Namespace, config: Any, phase: str) -> Any:
    """:func:`graphs.serving.pricing.predict.predict_step` of ``config`` at the command's point
    (``--batch`` and ``--ctx`` for decode, ``--seq`` for prefill) with its ``--predict`` and
    ``--fp8-scales``: the one call decode, prefill, model analyze and their pages print."""
    from graphs.serving.pricing.predict import predict_step

    kw = {"ctx": args.ctx} if phase == "decode" else {"seq": args.seq}
    return predict_step(
        config,
        args.device,
        phase,
        batch=args.batch,
        tp=args.tp,
        framework=args.predict,
        fp8_scales=fp8_scales_of(args),
        **kw,
    )


def _prediction(args: argparse.Namespace, phase: str) -> Any:
    return step_prediction(args, resolve_config(args), phase)


def _interval(args: argparse.Namespace, phase: str) -> tuple[float, float]:
    x = args.ctx if phase == "decode" else args.seq
    return step_interval(
        resolve_config(args),
        args.device,
        phase,
        args.predict,
        tp=args.tp,
        point=(args.batch, x),
        fp8_scales=fp8_scales_of(args),
    )


def prediction_label(p: Any) -> str:
    """``calibrated`` only when kernels were priced from the device's own measurements."""
    if p.calibrated and p.coverage is not None and p.coverage.measured_s == 0:
        return f"calibrated on {p.device}'s measurements of neighbouring kernels only"
    if p.calibrated:
        return "calibrated"
    return f"predicted, not calibrated: no kernel measured on {p.device} prices it"


def with_prediction(
    cmd: Callable[[argparse.Namespace], int], phase: str
) -> Callable[[argparse.Namespace], int]:
    """Run ``cmd``; with ``--predict`` add the calibrated prediction beside its bound."""

    def run(args: argparse.Namespace) -> int:
        fp8_scales_of(args)  # --fp8-scales without a predictor: refused before any work
        fit = load_predict_file(args)
        if fit is not None and not args.predict:
            return _with_fit(cmd, args, phase, fit)
        if not getattr(args, "predict", None):
            return cmd(args)
        if args.json:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = cmd(args)
            doc = json.loads(buf.getvalue())
            pj = _prediction(args, phase)
            doc["prediction"] = pj.to_dict()
            doc["prediction"]["interval_s"] = list(_interval(args, phase))
            if fit is not None:
                doc["engine_overheads"] = _fit_step(args, phase, fit, pj.corrected_s, pj.bound_s)
            print(dump(doc))
            return rc
        rc = cmd(args)
        p = _prediction(args, phase)
        what = "TPOT" if phase == "decode" else "TTFT"
        print(f"\n{what} ({prediction_label(p)}; {p.framework} kernels, {p.calibrated_from}):")
        print(
            f"  bound {p.bound_s * 1e3:.3f} ms   predicted {p.corrected_s * 1e3:.3f} ms   ({p.corrected_s / p.bound_s:.2f}x the bound)"
            f"   the fits alone {p.predicted_s * 1e3:.3f} ms"
        )
        lo, hi = _interval(args, phase)
        print(
            f"  P10-P90 interval [{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms (every kernel at that quantile of its held-out error)"
        )
        for fam, e in p.by_family.items():
            pred = f"   predicted {e['corrected_s'] * 1e3:9.3f} ms" if "corrected_s" in e else ""
            if "predicted_s" in e:
                pred += f"   the fits alone {e['predicted_s'] * 1e3:9.3f} ms"
            print(f"    {fam:24s} bound {e['bound_s'] * 1e3:9.3f} ms{pred}")
        print("\n".join(coverage_lines(p)))
        if fit is not None:
            _print_fit_step(args, phase, fit, p.corrected_s, p.bound_s)
        return rc

    return run


def _fit_step(
    args: argparse.Namespace, phase: str, fit: Any, kernels_s: float, bound_s: float
) -> dict[str, Any]:
    """One step with a fit's engine overheads: ``max(kernel_scale x kernels, bound) + a + b B + c T``
    (:func:`graphs.serving.pricing.overheads.scaled_kernels_s`: never below the step's roofline)."""
    from graphs.serving.pricing.overheads import scaled_kernels_s

    ov = fit.overheads
    tokens = args.batch if phase == "decode" else args.batch * args.seq
    cpu = ov.cpu_s(args.batch, tokens)
    scaled, floored = scaled_kernels_s(ov.kernel_scale, kernels_s, bound_s)
    return {
        "file": args.predict_file,
        "kernels_s": kernels_s,
        "kernel_scale": ov.kernel_scale,
        "bound_s": bound_s,
        "scaled_kernels_s": scaled,
        "floored_at_bound": floored,
        "cpu_s": cpu,
        "step_s": scaled + cpu,
        "request_s": ov.request_s,
        "output_token_s": ov.output_token_s,
    }


def _print_fit_step(args: argparse.Namespace, phase: str, fit: Any, kernels_s: float, bound_s: float) -> None:
    d = _fit_step(args, phase, fit, kernels_s, bound_s)
    what = "TPOT" if phase == "decode" else "TTFT"
    print(f"\n{what} with the engine overheads of --predict-file {args.predict_file[:200]}:")
    from costmodel.hardware import get_device

    print(predict_file_line(args.predict_file, fit, resolve_config(args).name, get_device(args.device).name))
    print(f"  {fit.overheads.summary()}")
    extra = (
        f" + {fit.overheads.output_token_s * 1e3:.4g} ms per output token as the client sees it"
        if phase == "decode"
        else f" + {(fit.overheads.request_s + fit.overheads.output_token_s) * 1e3:.4g} ms request path"
    )
    floor = (
        f" = {d['kernel_scale'] * kernels_s * 1e3:.3f} ms, held at the roofline bound {bound_s * 1e3:.3f} ms"
        if d["floored_at_bound"]
        else ""
    )
    print(
        f"  {d['kernel_scale']:.4g} x {kernels_s * 1e3:.3f} ms kernels{floor} + {d['cpu_s'] * 1e3:.4g} ms CPU = "
        f"{d['step_s'] * 1e3:.3f} ms per step{extra}"
    )
    if d["floored_at_bound"]:
        print(
            f"  note: kernel_scale {d['kernel_scale']:.4g} would price the kernels below their roofline "
            "bound; physics is a floor, so the bound prices them"
        )


def _with_fit(
    cmd: Callable[[argparse.Namespace], int], args: argparse.Namespace, phase: str, fit: Any
) -> int:
    """``--predict-file`` of a fit made on the bound: the bound step with its engine overheads."""
    from graphs.serving.analysis.phases import decode_report, prefill_report

    cfg = resolve_config(args)
    if phase == "decode":
        bound = decode_report(cfg, args.device, batch=args.batch, ctx=args.ctx, tp=args.tp).step_s
    else:
        bound = prefill_report(cfg, args.device, batch=args.batch, seq=args.seq, tp=args.tp).step_s
    bound = float(bound)
    if args.json:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cmd(args)
        doc = json.loads(buf.getvalue())
        doc["engine_overheads"] = _fit_step(args, phase, fit, bound, bound)
        print(dump(doc))
        return rc
    rc = cmd(args)
    _print_fit_step(args, phase, fit, bound, bound)
    return rc


def step_interval(
    config: Any,
    device: str,
    phase: str,
    framework: str,
    *,
    tp: int,
    point: tuple[int, int],
    fp8_scales: str = "dynamic",
) -> tuple[float, float]:
    """One step's time (s) at the optimistic and pessimistic ends of its prediction interval
    (:meth:`graphs.serving.pricing.predictor.Predictor.interval`, each kernel clamped to its bound), at
    ``point`` = (batch, ctx) for decode, (batch, seq) for prefill."""
    from graphs.serving.pricing.predictor import Predictor
    from graphs.serving.pricing.priced import priced_step

    lo, hi = Predictor.of(framework, fp8_scales=fp8_scales).interval()
    return tuple(  # type: ignore[return-value]
        priced_step(config, device, phase, tp=tp, predictor=p).step(*point) for p in (lo, hi)
    )
