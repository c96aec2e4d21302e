"""`costmodel plot`: roofline, ledger, frontier, headroom and batch-sweep figures (plot extra).

Every figure is of the ``--model`` on the ``--device`` (``batch-sweep --measure`` times this
machine instead) and its title names them, with the context and the tensor-parallel degree.
"""

from __future__ import annotations

import argparse
from typing import Any

from .options import add_assume_family, check_output_path

__all__ = ["add_plot_parser"]

_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def cmd_plot(args: argparse.Namespace) -> int:
    from costmodel import plots
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device
    from costmodel.outfiles import PLOT_SUFFIXES

    check_output_path(args.out, "--out", suffixes=PLOT_SUFFIXES)
    if args.kind == "batch-sweep" and args.measure:
        if args.device is not None or args.model is not None:
            raise CostModelError(
                "batch-sweep --measure times a numpy GEMM on this machine; drop --device/--model"
            )
        from costmodel.measure.microbench import batch_sweep
        from costmodel.measure.probe import probe

        hw = probe(small=True, use_torch=False).hardware()
        name = f"batch sweep: numpy GEMM [B, 2048] x [2048, 2048] fp32 measured on this machine ({hw.name})"
        plots.batch_sweep_plot(batch_sweep(hw, d=2048), args.out, title=name)
        print(f"wrote {args.out}")
        return 0
    if args.measure:
        raise CostModelError(f"--measure applies to batch-sweep only, not {args.kind}")

    from graphs import build_model, capacity, sweep

    from .model_option import resolve_model

    cfg = resolve_model(args.model or "llama-3.1-8b", args)
    hw = get_device(args.device or "h100-sxm")
    seq = args.seq if args.phase == "prefill" else None
    ctx = args.ctx if args.phase == "decode" or args.kind != "roofline" else None

    def title(what: str, **at: Any) -> str:
        return plots.plot_title(what, model=cfg.name, device=hw.name, tp=args.tp, **at)

    if args.kind in ("roofline", "headroom"):
        from costmodel.graph import classify_graph

        link = hw.group_link(args.tp)  # a tp group wider than the scale-up domain crosses the network
        g = build_model(cfg, args.phase, batch=args.batch, seq=args.seq, ctx=args.ctx, tp=args.tp, link=link)
        rows = classify_graph(g, hw)
        where = {"phase": args.phase, "batch": args.batch, "seq": seq, "ctx": ctx}
        if args.kind == "roofline":
            what = f"roofline ({args.precision})"
            plots.roofline_plot(rows, hw, args.out, precision=args.precision, title=title(what, **where))
        else:
            what = f"headroom ({args.precision})"
            plots.headroom_plot(
                args.out, rows=rows, hw=hw, precision=args.precision, title=title(what, **where)
            )
    elif args.kind == "ledger":
        terms = {
            b: capacity(cfg, hw, batch=b, ctx=args.ctx, tp=args.tp).terms
            for b in (1, 2, 4, 8, 16, 32, 64, 128)
        }
        plots.ledger_plot(terms, float(hw.capacity()), args.out, title=title("memory ledger", ctx=args.ctx))
    elif args.kind == "frontier":
        res = sweep(cfg, devices=[hw.name], batches=list(_BATCHES[:-1]), ctxs=[1024, 4096, 16384], tp=args.tp)
        plots.frontier_plot(res.rows(), args.out, title=title("decode frontier, ctx 1024, 4096, 16384"))
    else:  # the model's decode step against batch, at the batches that fit
        res = sweep(cfg, devices=[hw.name], batches=list(_BATCHES), ctxs=[args.ctx], tp=args.tp)
        points = [{"shape": {"B": r["batch"]}, "predicted_s": r["tpot_s"]} for r in res.rows() if r["fits"]]
        if not points:
            raise CostModelError(
                f"{cfg.name} at ctx {args.ctx} does not fit one {hw.name} at tp {args.tp} at any batch"
            )
        what = "decode batch sweep (TPOT bound, batches that fit)"
        plots.batch_sweep_plot(points, args.out, title=title(what, ctx=args.ctx))
    print(f"wrote {args.out}")
    return 0


def add_plot_parser(sub: Any) -> None:
    pl = sub.add_parser("plot", help="roofline, ledger, frontier, headroom or batch-sweep plots (PNG/SVG)")
    pl.add_argument(
        "kind",
        choices=("roofline", "ledger", "frontier", "headroom", "batch-sweep"),
        help="which figure to draw",
    )
    pl.add_argument("--model", default=None, help="catalog model or config.json (default: llama-3.1-8b)")
    add_assume_family(pl)
    pl.add_argument("--device", default=None, help="catalog device or alias (default: h100-sxm)")
    pl.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    pl.add_argument("--batch", type=int, default=8)
    pl.add_argument("--seq", type=int, default=2048)
    pl.add_argument("--ctx", type=int, default=4096)
    pl.add_argument("--tp", type=int, default=1)
    pl.add_argument("--precision", default="bf16")
    pl.add_argument(
        "--measure",
        action="store_true",
        help="batch-sweep: time a numpy GEMM on this machine against its probed roofline "
        "instead of the model's decode bound",
    )
    pl.add_argument("--out", default="plot.png")
    pl.set_defaults(func=cmd_plot)
