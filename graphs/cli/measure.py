"""``costmodel probe`` and ``costmodel plot``: measure this machine, draw what matters."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import dump
from .html_option import add_html_option, keep
from .options import check_device_name, check_output_path

__all__ = ["add_measure_parsers"]


def _progress(quiet: bool) -> Any:
    def say(msg: str) -> None:
        if not quiet:
            print(f"  .. {msg}", file=sys.stderr, flush=True)

    return say


def cmd_probe(args: argparse.Namespace) -> int:
    """``costmodel probe``: every output path checked, the options as a checked request, this
    machine probed and the spec files written (:func:`costmodel.measure.probe_report.run_probe`),
    the report printed."""
    from costmodel.measure.probe_report import SPEC_SUFFIXES, ProbeRequest, run_probe

    check_output_path(args.out, "--out", suffixes=SPEC_SUFFIXES)  # before measuring, not after
    check_device_name(args.name)  # the spec file must load under the name it is written with
    if args.calibrated_out:
        check_output_path(args.calibrated_out, "--calibrated-out", suffixes=SPEC_SUFFIXES)
    settings = ("out", "calibrated_out", "name", "small", "repeats")
    req = ProbeRequest(**{k: getattr(args, k) for k in settings}, use_torch=not args.no_torch)
    report = run_probe(req, progress=_progress(args.quiet))
    keep(args, report=report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 0


def add_measure_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "probe", help="measure this machine: bandwidth, matmul peaks, microbenchmarks, calibration"
    )
    p.add_argument("--small", action="store_true", help="small sizes: seconds instead of a minute")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (the best counts)")
    p.add_argument(
        "--no-torch", action="store_true", help="measure numpy kernels only, even when torch is installed"
    )
    p.add_argument("--out", default="probe.json", help="hardware spec file to write")
    p.add_argument("--calibrated-out", default=None, help="also write a calibrated spec here")
    p.add_argument("--name", default="probe", help="device name written into the spec file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_probe)
    add_html_option(p, "report")
