"""`costmodel plot`: roofline, ledger, frontier, headroom and batch-sweep figures (plot extra).

Every figure is of the ``--model`` on the ``--device`` (``batch-sweep --measure`` times this
machine instead) and its title names them, with the context and the tensor-parallel degree.
"""

from __future__ import annotations

import argparse
from typing import Any

from graphs.serving.step.defaults import DEFAULT_SEQ

from .html_option import add_html_option, keep
from .options import add_assume_family, check_output_path

__all__ = ["add_plot_parser"]


def cmd_plot(args: argparse.Namespace) -> int:
    """``costmodel plot``: the options as a checked request, the figure drawn
    (:func:`graphs.serving.present.plot_report.run_plot`), its path printed."""
    from costmodel.outfiles import PLOT_SUFFIXES
    from graphs.serving.analysis.plot_request import PlotRequest
    from graphs.serving.present.plot_report import run_plot

    from .model_option import resolve_model

    check_output_path(args.out, "--out", suffixes=PLOT_SUFFIXES)
    settings = ("kind", "model", "device", "phase", "batch", "seq", "ctx", "tp", "precision", "measure")
    req = PlotRequest(**{k: getattr(args, k) for k in settings})
    _check_context(args, req)
    cfg = None if req.measure else resolve_model(req.model_name, args)
    report = run_plot(req, cfg, args.out)
    keep(args, report=report)
    print(report.to_text())
    return 0


def _check_context(args: argparse.Namespace, req: Any) -> None:
    """The figure's context against the model's limit, as ``decode``/``prefill`` check it (a
    review found ``plot headroom --phase prefill --seq 10000000`` drawn with nothing said, where
    ``prefill`` refuses it): roofline and headroom at the phase's ``--ctx`` or ``--seq``, ledger
    and batch-sweep at ``--ctx`` (frontier draws its own contexts); beyond the limit refused
    unless ``--allow-long-context``, then warned."""
    from .model_option import check_context

    if req.measure or req.kind == "frontier":
        return
    phase, _, seq, ctx, _ = req.step()
    step = req.kind in ("roofline", "headroom") and phase == "prefill"
    at = argparse.Namespace(**{**vars(args), "model": req.model_name})
    check_context(at, *((seq, "--seq") if step else (ctx, "--ctx")))


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
    # None when not given: a figure refuses a setting it does not draw at (PlotRequest.USES)
    pl.add_argument(
        "--phase",
        choices=("prefill", "decode"),
        default=None,
        help="inference phase of the roofline and headroom step: prefill (B*S tokens) or decode "
        "(B tokens over ctx) (default: decode)",
    )
    pl.add_argument(
        "--batch",
        type=int,
        default=None,
        help="sequences processed together (B), roofline and headroom only (default: 8; the "
        "ledger, frontier and batch-sweep draw their own batches)",
    )
    pl.add_argument(
        "--seq",
        type=int,
        default=None,
        help=f"prompt length in tokens (S), roofline and headroom at --phase prefill (default: {DEFAULT_SEQ})",
    )
    pl.add_argument(
        "--ctx",
        type=int,
        default=None,
        help="KV length in tokens (the new one included): roofline and headroom at a decode, "
        "ledger and batch-sweep (default: 4096; the frontier draws 1024, 4096 and 16384)",
    )
    pl.add_argument(
        "--tp",
        type=int,
        default=None,
        help="tensor-parallel degree: devices one layer is split over (default: 1)",
    )
    pl.add_argument(
        "--precision",
        default=None,
        help="the tensor roof drawn, one the device has, by its name or a dtype's in any case, as "
        "--dtype takes it (FP8, fp8_e4m3: the fp8 roof) (roofline and headroom only; default: bf16)",
    )
    pl.add_argument(
        "--allow-long-context",
        action="store_true",
        help="draw a context beyond the model's limit (max_position_embeddings) with a warning",
    )
    pl.add_argument(
        "--measure",
        action="store_true",
        help="batch-sweep: time a numpy GEMM on this machine against its probed roofline "
        "instead of the model's decode bound",
    )
    pl.add_argument("--out", default="plot.png")
    pl.set_defaults(func=cmd_plot)
    add_html_option(pl, "report", plotly=False)  # its page holds the PNG/SVG written, no plotly figure
