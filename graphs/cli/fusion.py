"""``costmodel fusion audit | plan | tiling``: kernel boundaries, suggested fusions, the planner's
plan, tiled IO."""

from __future__ import annotations

import argparse
from typing import Any

from graphs.serving.step.defaults import DEFAULT_SEQ

from .common import dump
from .html_option import add_html_option, keep
from .options import add_assume_family

__all__ = ["add_fusion_parser"]


def cmd_audit(args: argparse.Namespace) -> int:
    """``costmodel fusion audit``: the options as a checked request, its audit
    (:func:`graphs.serving.present.fusion_report.run_audit`), the report printed."""
    from graphs.serving.analysis.fusion_request import AuditRequest
    from graphs.serving.present.fusion_report import run_audit

    from .model_option import resolve_model

    settings = ("device", "phase", "batch", "seq", "ctx", "whole_model", "plan", "top")
    req = AuditRequest(**{k: getattr(args, k) for k in settings})
    report = run_audit(req, resolve_model(args.model, args))
    keep(args, report=report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """``costmodel fusion plan``: the options as a checked request, the planner's plan
    (:func:`graphs.serving.present.fusion_report.run_plan`), the report printed."""
    from graphs.serving.analysis.fusion_request import PlanRequest
    from graphs.serving.present.fusion_report import run_plan

    from .model_option import resolve_model

    settings = ("device", "phase", "batch", "seq", "ctx", "whole_model", "backend", "objective", "method")
    req = PlanRequest(
        **{k: getattr(args, k) for k in settings}, time_limit=args.time_limit, hf_layer=args.hf_layer
    )
    if req.hf_layer:
        from models.resolver import config_data

        _refuse_a_layer_file(args)  # main ran it before any note; again for a direct call
        report = run_plan(req, hf_config=config_data(args.model), name=args.model)
    else:
        report = run_plan(req, resolve_model(args.model, args))
    keep(args, report=report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 0


def _refuse_a_layer_file(args: argparse.Namespace) -> None:
    """``--hf-layer`` on a layer file, refused: transformers builds from a ``model_type``, which a
    layer file has not. ``fusion plan``'s ``precheck``: :func:`graphs.cli.main.main` runs it before
    any note, so the refusal is the one line said (no dtype note about a file the command refuses)."""
    if not args.hf_layer:
        return
    from costmodel.errors import CostModelError
    from models.layer_file import is_layer_file
    from models.resolver import config_data

    if is_layer_file(config_data(args.model)):
        raise CostModelError(
            f"--hf-layer builds a layer from a Hugging Face config.json (its model_type); {args.model[:200]} "
            "is a layer file (layer_types, no model_type): drop --hf-layer to plan its layers"
        )


def cmd_tiling(args: argparse.Namespace) -> int:
    from costmodel.cost import as_float
    from costmodel.hardware import get_device
    from costmodel.report import fmt_si
    from costmodel.tiling import flash_attention_io, largest_gemm_tile

    hw = get_device(args.device)
    smem = next((m for m in hw.memory if m.name == "smem"), None)
    cap = args.sram_bytes or (as_float(smem.capacity_bytes) if smem and smem.capacity_bytes else None)
    if cap is None:
        from costmodel.errors import CostModelError

        raise CostModelError(f"device {hw.name!r} has no smem capacity; pass --sram-bytes")
    gt = largest_gemm_tile(cap, hw)
    fa = flash_attention_io(N=args.N, d=args.d, sram_bytes=cap)
    if args.json:
        print(dump({"sram_bytes": cap, "gemm": gt.to_dict(), "flash_attention": fa.to_dict()}))
        return 0
    print(f"{hw.name}: {cap / 1024:.0f} KiB on chip per SM")
    print(
        f"  largest square GEMM tile: {gt.tile}x{gt.tile} ({gt.bytes / 1024:.0f} KiB), intensity "
        f"{gt.intensity:.1f} vs ridge {gt.ridge or 0:.1f} -> "
        f"{'compute' if gt.compute_bound else 'memory'}-bound from DRAM without L2 reuse"
    )
    print(
        f"  FlashAttention N={args.N}, d={args.d}: blocks {fa.block_q}x{fa.block_kv}, "
        f"{fa.query_blocks} K/V passes, {fmt_si(fa.tiled_bytes, 'B')} "
        f"(ideal {fmt_si(fa.ideal_bytes, 'B')}, naive {fmt_si(fa.naive_bytes, 'B')})"
    )
    return 0


def _positive_seconds(text: str) -> float:
    """``--time-limit``: a positive, finite number of seconds."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (0 < v < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return v


def add_fusion_parser(sub: Any) -> None:
    f = sub.add_parser("fusion", help="fusion audit, the fusion planner and tiled IO models")
    fsub = f.add_subparsers(dest="fusion_command", required=True)
    a = fsub.add_parser("audit", help="boundaries, suggested fusions, bound before/after")
    a.add_argument("model")
    add_assume_family(a)
    a.add_argument("--device", default="h100-sxm")
    a.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    a.add_argument("--batch", type=int, default=1)
    a.add_argument("--seq", type=int, default=DEFAULT_SEQ)
    a.add_argument("--ctx", type=int, default=4096)
    a.add_argument(
        "--plan",
        choices=("suggested", "unfused"),
        default="suggested",
        help="the fusion plan to audit: the engine's suggestion or one kernel per op",
    )
    a.add_argument("--whole-model", action="store_true", help="audit the whole model, not one layer")
    a.add_argument("--top", type=int, default=10)
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_audit, device_notes="model")
    add_html_option(a, "report")
    p = fsub.add_parser(
        "plan", help="the planner's fusion plan: kernels, bytes, time, what each fusion saves"
    )
    p.add_argument("model", help="catalog name or path to a config.json")
    add_assume_family(p)
    p.add_argument("--device", default="h100-sxm", help="catalog device name or alias")
    p.add_argument("--phase", choices=("prefill", "decode"), default="decode", help="the step to plan")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=DEFAULT_SEQ)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--backend", default="default", help="legality table: default, inductor, cublaslt")
    p.add_argument(
        "--objective", choices=("time", "bytes"), default="time", help="minimise roofline time or DRAM bytes"
    )
    p.add_argument(
        "--method",
        choices=("auto", "exact", "heuristic"),
        default="auto",
        help="exact (HiGHS, the fusion extra), heuristic, or exact when the extra is installed",
    )
    p.add_argument("--whole-model", action="store_true", help="plan the whole model, not one layer")
    p.add_argument(
        "--hf-layer",
        action="store_true",
        help="plan the ATen graph of one Hugging Face decoder layer built from the config on the meta "
        "device (needs torch and transformers), not the engine's layer",
    )
    p.add_argument(
        "--time-limit",
        type=_positive_seconds,
        default=10.0,
        help="seconds per region for the exact solve's enumeration, and again for its solves together",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan, precheck=_refuse_a_layer_file, device_notes="model")
    add_html_option(p, "report")
    t = fsub.add_parser("tiling", help="largest GEMM tile and FlashAttention IO for the on-chip memory")
    t.add_argument("--device", default="h100-sxm")
    t.add_argument(
        "--sram-bytes",
        type=float,
        default=None,
        help="on-chip memory per SM in bytes (none: the device's smem capacity)",
    )
    t.add_argument("--N", type=int, default=4096, help="attention sequence length N (tokens)")
    t.add_argument("--d", type=int, default=128, help="attention head dimension d (elements)")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_tiling, device_notes="model")
