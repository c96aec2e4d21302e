"""The profiling article's make_figures.py: figures 1-4, saved as PNG.

    python examples/make_figures.py --out figures/   # needs the plot extra (matplotlib)

1. the operator ledger on the A100 roofline; 2. the headroom curve of 2x compute
vs 2x bandwidth; 3. a measured batch sweep on this machine; 4. the 7B memory
ledger against batch with its capacity line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from costmodel import MemoryLedger, Overhead, get_device
from costmodel.ledger import GIB
from costmodel.measure.microbench import batch_sweep
from costmodel.measure.probe import probe
from costmodel.plots import batch_sweep_plot, headroom_plot, ledger_plot, roofline_plot
from costmodel.report import roofline_rows, standard_ops


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="figures")
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    a100 = get_device("a100")
    rows = roofline_rows(standard_ops(), a100)
    for r in rows:
        r["node"] = r["op"]
    roofline_plot(rows, a100, out / "fig1_roofline.png", title=f"operator ledger on {a100.name} (bf16)")
    headroom_plot(
        out / "fig2_headroom.png",
        title="headroom: speed-up of 2x compute or 2x bandwidth against I / I* (any device)",
    )
    hw = probe(small=True, use_torch=False).hardware()
    d = 1024 if args.small else 4096
    batch_sweep_plot(
        batch_sweep(hw, d=d, repeats=5),
        out / "fig3_batch_sweep.png",
        title=f"batch sweep: numpy GEMM [B, {d}] x [{d}, {d}] fp32 on this machine, bound on its probe",
    )
    led = MemoryLedger(7e9 * 2, 2 * 32 * 4096 * 2, 128 * 1024, Overhead("fraction_of_sum", 0.3))
    terms = {
        b: {
            k: float(v)
            for k, v in led.terms(batch=b, cached_tokens=4096, active_tokens=4096 * b).as_dict().items()
        }
        for b in (1, 4, 8, 16, 24, 32)
    }
    ledger_plot(
        terms,
        78 * GIB,
        out / "fig4_memory_ledger.png",
        title="memory ledger: a 7B model in bf16, ctx 4096, overhead 30 % of the sum, on 78 GiB",
    )
    print(f"wrote 4 figures to {out}/")


if __name__ == "__main__":
    main()
