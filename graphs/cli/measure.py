"""``costmodel probe`` and ``costmodel plot``: measure this machine, draw what matters."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import dump
from .options import check_output_path

__all__ = ["add_measure_parsers"]


def _progress(quiet: bool) -> Any:
    def say(msg: str) -> None:
        if not quiet:
            print(f"  .. {msg}", file=sys.stderr, flush=True)

    return say


def cmd_probe(args: argparse.Namespace) -> int:
    from costmodel.measure.calibrate import calibrate
    from costmodel.measure.microbench import run_benchmarks
    from costmodel.measure.probe import probe
    from costmodel.outfiles import atomic_write
    from costmodel.report import format_table

    from .calibrate import HW_FILE_SUFFIXES

    check_output_path(args.out, "--out", suffixes=HW_FILE_SUFFIXES)  # before measuring, not after
    if args.calibrated_out:
        check_output_path(args.calibrated_out, "--calibrated-out", suffixes=HW_FILE_SUFFIXES)
    say = _progress(args.quiet)
    res = probe(small=args.small, repeats=args.repeats, use_torch=not args.no_torch, progress=say)
    res.write(args.out, name=args.name)
    hw = res.hardware(args.name)
    rows = run_benchmarks(hw, small=args.small, repeats=args.repeats, progress=say)
    cal = calibrate(rows)
    if args.calibrated_out:
        spec = res.spec_dict(args.name)
        dev = spec["devices"][args.name]
        for r in dev["roofs"]:
            if r["unit"] == "tensor":
                r["peak_flops_per_s"] *= cal.gemm_e_max
        dev["memory"][0]["bandwidth_bytes_per_s"] *= cal.memory_efficiency
        with atomic_write(args.calibrated_out, "--calibrated-out", suffixes=HW_FILE_SUFFIXES) as f:
            json.dump(spec, f, indent=2)
    if args.json:
        print(
            dump(
                {
                    "spec_file": args.out,
                    "environment": res.env,
                    "measurements": [m.__dict__ for m in res.measurements],
                    "microbenchmarks": rows,
                    "calibration": cal,
                }
            )
        )
        return 0
    print(f"probe of {res.env.get('cpu')} written to {args.out} (use --hw-file {args.out})")
    mrows = [
        {
            "name": m.name,
            "ms": m.best_s * 1e3,
            "spread": 100 * m.spread,
            "gbs": m.bandwidth / 1e9 if (m.bytes and not m.flops) or m.name.startswith("bw") else 0.0,
            "gfs": m.flops_per_s / 1e9,
        }
        for m in res.measurements
    ]
    print(
        format_table(
            mrows,
            (
                ("name", "measurement", "s"),
                ("ms", "best ms", ".3f"),
                ("spread", "spread %", ".1f"),
                ("gbs", "GB/s", ".1f"),
                ("gfs", "GFLOP/s", ".1f"),
            ),
        )
    )
    print("\nmicrobenchmarks against their bound on the probed spec:")
    table = [{**r.to_dict(), "pct": 100 * r.achieved_fraction, "flag": ",".join(r.flags)} for r in rows]
    print(
        format_table(
            table,
            (
                ("name", "op", "s"),
                ("intensity", "I", ".2f"),
                ("kind", "bound", "s"),
                ("predicted_s", "bound s", ".3e"),
                ("measured_s", "measured s", ".3e"),
                ("pct", "achieved %", ".0f"),
                ("flag", "flags", "s"),
            ),
        )
    )
    print(
        f"\ncalibration: memory efficiency {cal.memory_efficiency:.2f}, GEMM e(I) = {cal.gemm_e_max:.2f} "
        f"I/(I + {cal.gemm_i_half:.1f})"
    )
    for r in cal.residuals:
        print(f"  {r.name:34s} residual {100 * r.residual:+.0f}%")
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
