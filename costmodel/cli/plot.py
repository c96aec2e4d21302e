"""`costmodel plot`: roofline, ledger, frontier, headroom and batch-sweep figures (plot extra)."""

from __future__ import annotations

import argparse
from typing import Any

from .options import check_output_path

__all__ = ["add_plot_parser"]


def cmd_plot(args: argparse.Namespace) -> int:
    from .. import plots
    from ..hardware import get_device

    check_output_path(args.out, "--out")
    if args.kind == "headroom":
        plots.headroom_plot(args.out)
    elif args.kind in ("roofline", "ledger", "frontier"):
        from graphs import build_model, capacity, sweep
        from models import get_model

        cfg = get_model(args.model)
        hw = get_device(args.device)
        if args.kind == "roofline":
            from ..graph import classify_graph

            rows = classify_graph(
                build_model(cfg, args.phase, batch=args.batch, seq=args.seq, ctx=args.ctx), hw
            )
            where = f"seq {args.seq}" if args.phase == "prefill" else f"ctx {args.ctx}"
            title = f"{cfg.name} {args.phase}, batch {args.batch}, {where} on {hw.name} ({args.precision})"
            plots.roofline_plot(rows, hw, args.out, precision=args.precision, title=title)
        elif args.kind == "ledger":
            terms = {b: capacity(cfg, hw, batch=b, ctx=args.ctx).terms for b in (1, 2, 4, 8, 16, 32, 64, 128)}
            plots.ledger_plot(terms, float(hw.capacity()), args.out)
        else:
            res = sweep(
                cfg,
                devices=[hw.name],
                batches=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                ctxs=[1024, 4096, 16384],
            )
            plots.frontier_plot(res.rows(), args.out)
    else:  # batch sweep measured on this machine
        from ..measure.microbench import batch_sweep
        from ..measure.probe import probe

        hw = probe(small=True, use_torch=False).hardware()
        plots.batch_sweep_plot(batch_sweep(hw, d=2048), args.out)
    print(f"wrote {args.out}")
    return 0


def add_plot_parser(sub: Any) -> None:
    pl = sub.add_parser("plot", help="roofline, ledger, frontier, headroom or batch-sweep plots (PNG/SVG)")
    pl.add_argument(
        "kind",
        choices=("roofline", "ledger", "frontier", "headroom", "batch-sweep"),
        help="which figure to draw",
    )
    pl.add_argument("--model", default="llama-3.1-8b")
    pl.add_argument("--device", default="h100-sxm")
    pl.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    pl.add_argument("--batch", type=int, default=8)
    pl.add_argument("--seq", type=int, default=2048)
    pl.add_argument("--ctx", type=int, default=4096)
    pl.add_argument("--precision", default="bf16")
    pl.add_argument("--out", default="plot.png")
    pl.set_defaults(func=cmd_plot)
