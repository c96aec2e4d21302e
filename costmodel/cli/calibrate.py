"""``costmodel calibrate gpu | report`` and ``--predict`` on decode/prefill.

Thin layers over :mod:`costmodel.measured` (the measured corpus, optional
extra ``[measured]``) and :func:`graphs.serving.predict.predict_step`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Callable
from typing import Any

from ..measured.corpus import FRAMEWORKS  # stdlib only: --help stays light
from .common import dump
from .options import check_output_path

__all__ = [
    "add_calibrate_parser",
    "add_predict_option",
    "with_prediction",
    "prediction_label",
    "coverage_lines",
    "measured_devices",
]


def _say(quiet: bool) -> Callable[[str], None]:
    def say(msg: str) -> None:
        if not quiet:
            sys.stderr.write(f"  {msg}\n")
            sys.stderr.flush()

    return say


def cmd_calibrate_gpu(args: argparse.Namespace) -> int:
    from ..hardware import get_device
    from ..measured.report import calibrated_spec

    check_output_path(args.out, "--out")
    hw = get_device(args.device)
    spec = calibrated_spec(hw.name, args.framework, name=args.name)
    with open(args.out, "w") as f:
        json.dump(spec, f, indent=2)
    name = next(iter(spec["devices"]))
    if args.json:
        print(dump({"file": args.out, "device": name, "spec": spec}))
        return 0
    print(f"calibrated spec of {hw.name} for {args.framework} written to {args.out} as {name!r}")
    print(f"use it anywhere with: costmodel --hw-file {args.out} decode llama-3.1-8b --device {name}")
    return 0


def measured_devices(names: str, field: str = "--devices") -> list[str]:
    """The catalog names of a comma list of devices (aliases resolve through the catalog:
    ``h100`` is ``h100-sxm``), each one the measured corpus covers; a one-line error otherwise."""
    from ..errors import CostModelError
    from ..hardware import get_device
    from ..measured.corpus import SYSTEMS  # a table of names: the corpus itself is not read

    measured = sorted(set(SYSTEMS.values()))
    out: list[str] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            raise CostModelError(f"{field} {names!r} has an empty device name")
        canonical = get_device(name).name
        if canonical not in measured:
            raise CostModelError(
                f"{field}: device {name!r} ({canonical}) has no measured data; measured: {', '.join(measured)}"
            )
        if canonical not in out:
            out.append(canonical)
    return out


def cmd_calibrate_report(args: argparse.Namespace) -> int:
    devs = measured_devices(args.devices) if args.devices else None  # before the corpus loads

    from ..hardware import get_device
    from ..measured import FAMILIES
    from ..measured.report import build_report, params_markdown, scatter_plot, to_markdown

    fams = tuple(args.families.split(",")) if args.families else FAMILIES
    splits = tuple(args.splits.split(","))
    rep = build_report(fams, devs, splits, progress=_say(args.quiet))
    if args.plot_dir:
        import os

        os.makedirs(args.plot_dir, exist_ok=True)
        for fam in fams:
            for v in rep["violations"]:
                if v.family == fam:
                    scatter_plot(fam, v.device, os.path.join(args.plot_dir, f"{fam}-{v.device}.png"))
    if args.json:
        print(dump(rep))
        return 0
    print(to_markdown(rep))
    if args.params:
        dev, fw = args.params.split(":") if ":" in args.params else (args.params, "vllm")
        print()
        print(params_markdown(get_device(dev).name, fw, fams))
    return 0


def add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="fit efficiencies on measured GPU kernels ([measured] extra)")
    cs = p.add_subparsers(dest="calibrate_cmd", required=True, metavar="{gpu,report}")
    g = cs.add_parser("gpu", help="write a device's calibrated spec as a hardware file (--hw-file)")
    g.add_argument("--device", default="h100-sxm", help="catalog device with measured data")
    g.add_argument("--framework", choices=FRAMEWORKS, default="vllm", help="whose kernels to fit")
    g.add_argument("--out", default="calibrated.json", help="hardware file to write")
    g.add_argument(
        "--name", default=None, help="device name in the file (default <device>-<framework>-calibrated)"
    )
    g.add_argument("--json", action="store_true", help="machine-readable output")
    g.set_defaults(func=cmd_calibrate_gpu)
    r = cs.add_parser("report", help="bound violations and held-out errors per family and device")
    r.add_argument("--families", default=None, help="comma list (default: every measured family)")
    r.add_argument("--devices", default=None, help="comma list of catalog devices (default: all measured)")
    r.add_argument("--splits", default="shapes,device,framework", help="held-out splits to run")
    r.add_argument("--plot-dir", default=None, help="write predicted-vs-measured scatter plots here")
    r.add_argument(
        "--params",
        default=None,
        metavar="DEVICE[:FRAMEWORK]",
        help="also print that device's fitted parameters",
    )
    r.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(func=cmd_calibrate_report)


def add_predict_option(sp: argparse.ArgumentParser, help: str | None = None) -> None:
    sp.add_argument(
        "--predict",
        choices=FRAMEWORKS,
        default=None,
        help=help or "also print the calibrated prediction for this framework's kernels ([measured] extra)",
    )


def _prediction(args: argparse.Namespace, phase: str) -> Any:
    from graphs.serving.predict import predict_step

    from .phases import resolve_config

    kw = {"ctx": args.ctx} if phase == "decode" else {"seq": args.seq}
    return predict_step(
        resolve_config(args), args.device, phase, batch=args.batch, tp=args.tp, framework=args.predict, **kw
    )


def _interval(args: argparse.Namespace, phase: str) -> tuple[float, float]:
    from .phases import resolve_config
    from .predicted import step_interval

    x = args.ctx if phase == "decode" else args.seq
    return step_interval(
        resolve_config(args), args.device, phase, args.predict, tp=args.tp, point=(args.batch, x)
    )


def prediction_label(p: Any) -> str:
    """``calibrated`` only when kernels were priced from the device's own measurements."""
    if p.calibrated and p.coverage is not None and p.coverage.measured_s == 0:
        return f"calibrated on {p.device}'s measurements of neighbouring kernels only"
    if p.calibrated:
        return "calibrated"
    return f"predicted, not calibrated: no kernel measured on {p.device} prices it"


def coverage_lines(p: Any) -> list[str]:
    """What ``p.predicted_s`` rests on, each neighbour and bound reason, and the warnings (item 3)."""
    from graphs.serving.predict import WARN_SHARE

    cov = p.coverage
    if cov is None or cov.total_s <= 0:
        return []
    pct = lambda t: f"{100 * t / cov.total_s:.1f}%"  # noqa: E731
    out = [
        f"  rests on: {pct(cov.measured_s)} measured {p.device} {p.framework} kernels, "
        f"{pct(cov.neighbour_s)} neighbours, {pct(cov.bound_s)} the bound alone"
    ]
    for kind, parts in (("neighbour", cov.neighbours), ("bound", cov.bounds)):
        for why, t in sorted(parts.items(), key=lambda kv: -kv[1]):
            out.append(f"  note: {pct(t)} from {kind}: {why}")
    for part in cov.flagged:
        what = (
            "neighbours (other devices, frameworks or dtypes)" if part == "neighbour" else "the bound alone"
        )
        out.append(
            f"  warning: {pct(getattr(cov, f'{part}_s'))} of the prediction rests on {what} "
            f"(more than {100 * WARN_SHARE:.0f}%)"
        )
    return out


def with_prediction(
    cmd: Callable[[argparse.Namespace], int], phase: str
) -> Callable[[argparse.Namespace], int]:
    """Run ``cmd``; with ``--predict`` add the calibrated prediction beside its bound."""

    def run(args: argparse.Namespace) -> int:
        if not getattr(args, "predict", None):
            return cmd(args)
        if phase == "prefill" and getattr(args, "chunk", None):
            from ..errors import CostModelError

            raise CostModelError(
                f"--chunk {args.chunk} with --predict: the calibrated prediction prices whole-prompt "
                "prefill only; drop --chunk (or --predict)"
            )
        if args.json:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = cmd(args)
            doc = json.loads(buf.getvalue())
            doc["prediction"] = _prediction(args, phase).to_dict()
            doc["prediction"]["interval_s"] = list(_interval(args, phase))
            print(dump(doc))
            return rc
        rc = cmd(args)
        p = _prediction(args, phase)
        what = "TPOT" if phase == "decode" else "TTFT"
        print(f"\n{what} ({prediction_label(p)}; {p.framework} kernels, {p.calibrated_from}):")
        print(
            f"  bound {p.bound_s * 1e3:.3f} ms   predicted {p.predicted_s * 1e3:.3f} ms   ({p.predicted_s / p.bound_s:.2f}x the bound)"
            f"   with shape residuals {p.corrected_s * 1e3:.3f} ms"
        )
        lo, hi = _interval(args, phase)
        print(
            f"  P10-P90 interval [{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms (every kernel at that quantile of its held-out error)"
        )
        for fam, e in p.by_family.items():
            pred = f"   predicted {e['predicted_s'] * 1e3:9.3f} ms" if "predicted_s" in e else ""
            if "corrected_s" in e:
                pred += f"   with shape residuals {e['corrected_s'] * 1e3:9.3f} ms"
            print(f"    {fam:24s} bound {e['bound_s'] * 1e3:9.3f} ms{pred}")
        print("\n".join(coverage_lines(p)))
        return rc

    return run
