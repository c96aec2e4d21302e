"""The profiling article's machine_probe.py: calibrate this machine, then put real ops on its roofline.

    python examples/machine_probe.py --small   # seconds
    python examples/machine_probe.py           # the article's sizes (about a minute)

The article measured an Apple laptop (71.8 GB/s, 1635 GFLOP/s fp32); the numbers
here are this machine's. The kernels and their pass counts are the article's;
their bounds come from the rule registry (costmodel.measure.microbench).
"""

from __future__ import annotations

import argparse

from costmodel.measure.calibrate import calibrate
from costmodel.measure.microbench import run_benchmarks
from costmodel.measure.probe import probe


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args(argv)
    res = probe(small=args.small, use_torch=False)
    hw = res.hardware()
    bw, peak = float(hw.bandwidth()), float(hw.require_peak("tensor", "fp32"))
    print(f"this machine ({res.env['cpu']}, numpy {res.env['numpy']}, fp32)")
    print(f"  beta = {bw / 1e9:8.2f} GB/s   P = {peak / 1e9:8.2f} GFLOP/s   I* = {peak / bw:6.1f} FLOP/B")
    rows = run_benchmarks(hw, small=args.small)
    print(f"\n{'op':<34}{'I':>8}{'bound':>8}{'T bound':>11}{'T meas.':>11}{'achieved':>10}{'GFLOP/s':>10}")
    for r in rows:
        print(
            f"{r.name:<34}{r.intensity:>8.2f}{r.kind:>8}{r.predicted_s * 1e3:>9.2f}ms"
            f"{r.measured_s * 1e3:>9.2f}ms{100 * r.achieved_fraction:>9.0f}%"
            f"{r.achieved_flops_per_s / 1e9:>10.1f}"
        )
    cal = calibrate(rows)  # each efficiency at most 1; a kernel faster than its roof is a note
    print(
        f"\ncalibrated: bandwidth efficiency {cal.memory_efficiency:.2f}; GEMM efficiency "
        f"{cal.gemm_e_max:.2f} * I / (I + {cal.gemm_i_half:.1f})"
    )
    for note in cal.notes:
        print(f"  note: {note}")
    bw, peak = float(hw.bandwidth()), float(hw.require_peak("tensor", "fp32"))
    print(
        f"\ndifferences from the seed: this machine measures {bw / 1e9:.1f} GB/s and {peak / 1e9:.0f} GFLOP/s "
        f"fp32 (ridge {peak / bw:.1f} FLOP/B) where the article's laptop measured 71.8 GB/s and 1635 GFLOP/s "
        f"(ridge {1635e9 / 71.8e9:.1f}); the kernels and their pass counts are the article's"
    )


if __name__ == "__main__":
    main()
