"""``costmodel fusion audit | plan | tiling``: kernel boundaries, suggested fusions, the planner's
plan, tiled IO."""

from __future__ import annotations

import argparse
from typing import Any

from .common import dump
from .html_option import add_html_option, keep
from .options import add_assume_family

__all__ = ["add_fusion_parser"]


def cmd_audit(args: argparse.Namespace) -> int:
    from costmodel.fusion import unfused_plan
    from costmodel.fusion_audit import audit, suggest_fusions
    from costmodel.hardware import get_device
    from costmodel.report import fmt_si, format_table
    from graphs import build_layer, build_model

    from .model_option import resolve_model

    cfg = resolve_model(args.model, args)
    hw = get_device(args.device)
    build = build_model if args.whole_model else build_layer
    g = build(cfg, args.phase, batch=args.batch, seq=args.seq, ctx=args.ctx)
    sugg, plan = suggest_fusions(g, hw)
    if args.plan == "unfused":
        plan = unfused_plan(g)
    rep = audit(g, hw, plan)
    keep(args, report=rep, suggestions=sugg, config=cfg, graph=g, plan=plan)
    if args.json:
        print(dump({**rep.to_dict(), "suggestions": [s.to_dict() for s in sugg]}))
        return 0
    scope = "model" if args.whole_model else "layer"
    where = f"seq {args.seq}" if args.phase == "prefill" else f"ctx {args.ctx}"
    print(f"fusion audit: {cfg.name} {args.phase} {scope} on {hw.name}, batch {args.batch}, {where}")
    print("\nkernel boundaries (one write + one read per consuming kernel), most expensive first:")
    rows = [
        {**b.to_dict(), "consumers": ", ".join(c.split(".")[-1] for c in b.consumers), "pct": 100 * b.share}
        for b in rep.boundaries[: args.top]
    ]
    print(
        format_table(
            rows,
            (
                ("producer", "producer", "s"),
                ("consumers", "read by", "s"),
                ("bytes", "bytes", "si"),
                ("time_s", "time (s)", ".3e"),
                ("pct", "% of layer", ".1f"),
            ),
        )
    )
    print("\nsuggested fusions:")
    srows = [
        {
            "pattern": s.pattern,
            "members": " + ".join(m.split(".")[-1] for m in s.group.members),
            "saved": s.bytes_saved,
            "t": s.time_saved_s,
            "after": s.kind_after,
        }
        for s in sugg
    ]
    print(
        format_table(
            srows,
            (
                ("members", "group", "s"),
                ("pattern", "pattern", "s"),
                ("saved", "bytes saved", "si"),
                ("t", "time saved (s)", ".3e"),
                ("after", "bound after", "s"),
            ),
        )
        if srows
        else "  none"
    )
    un, pl, ideal = rep.unfused, rep.plan, rep.ideal
    print(
        f"\n{scope} bound: unfused {(un.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us "
        f"({fmt_si(un.dram_bytes, 'B')}, {un.kernels:.0f} kernels)"
        + (
            f" -> plan {(pl.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us ({fmt_si(pl.dram_bytes, 'B')}, "
            f"{pl.kernels:.0f} kernels)"
            if pl is not None
            else ""
        )
        + f"; ideal {ideal.lower_s * 1e6:.2f} us ({fmt_si(ideal.dram_bytes, 'B')})"
    )
    for issue in rep.issues:
        print(f"  ! {issue}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from costmodel.fusion import ideal_cost, unfused_plan
    from costmodel.fusion_audit import audit, suggest_fusions
    from costmodel.fusion_plan import plan_fusions
    from costmodel.hardware import get_device
    from costmodel.report import fmt_si, format_table
    from graphs import build_layer, build_model

    from .model_option import resolve_model

    hw = get_device(args.device)
    if args.hf_layer:
        from costmodel.errors import CostModelError
        from graphs.importers.hf_layer import hf_layer_graph
        from models.resolver import config_data

        if args.whole_model:
            raise CostModelError("--hf-layer exports one decoder layer: drop --whole-model")
        raw = config_data(args.model)
        name = str(raw.get("_name_or_path") or args.model)
        g = hf_layer_graph(raw, args.phase, batch=args.batch, seq=args.seq, ctx=args.ctx)
    else:
        cfg = resolve_model(args.model, args)
        name = cfg.name
        build = build_model if args.whole_model else build_layer
        g = build(cfg, args.phase, batch=args.batch, seq=args.seq, ctx=args.ctx)
    res = plan_fusions(
        g,
        hw,
        backend=args.backend,
        objective=args.objective,
        method=args.method,
        time_limit_s=args.time_limit,
    )
    if args.json:
        print(dump(res.to_dict()))
        return 0
    sugg = audit(g, hw, suggest_fusions(g, hw)[1]).plan
    un = audit(g, hw, unfused_plan(g)).unfused
    ideal = ideal_cost(g)
    scope = (
        "Hugging Face layer (ATen, meta device)"
        if args.hf_layer
        else "model"
        if args.whole_model
        else "layer"
    )
    where = f"seq {args.seq}" if args.phase == "prefill" else f"ctx {args.ctx}"
    print(f"fusion plan: {name} {args.phase} {scope} on {hw.name}, batch {args.batch}, {where}")
    gap = "unknown" if res.gap is None else f"{100 * res.gap:.3g} %"
    cert = (
        f"exact ({'certified optimal' if res.optimal else f'not certified, gap {gap}'}, {res.units} units in "
        f"{res.regions} regions, {res.candidates} candidate groups, {res.solve_s:.2f} s)"
        if res.method == "exact"
        else f"heuristic (DP over a topological order + greedy merges, {res.solve_s:.2f} s)"
    )
    print(f"backend {res.backend!r}, objective {res.objective}: {cert}")
    rows = [
        {
            "members": " + ".join(m.split(".")[-1] for m in gr.members),
            "level": gr.level or "-",
            "bytes": gr.bytes,
            "t": gr.time_s,
            "saved": gr.bytes_saved,
            "tsaved": gr.time_saved_s,
        }
        for gr in sorted(res.groups, key=lambda r: -r.time_saved_s)
        if len(gr.members) > 1
    ]
    print("\nfused kernels, most time saved first:")
    print(
        format_table(
            rows,
            (
                ("members", "kernel", "s"),
                ("level", "tiles in", "s"),
                ("bytes", "bytes", "si"),
                ("t", "time (s)", ".3e"),
                ("saved", "bytes saved", "si"),
                ("tsaved", "time saved (s)", ".3e"),
            ),
        )
        if rows
        else "  none"
    )
    print(
        f"\n{scope}: unfused {fmt_si(un.dram_bytes, 'B')}, {(un.sum_of_kernel_bounds_s or 0) * 1e6:.2f} us; "
        + (
            f"suggested {fmt_si(sugg.dram_bytes, 'B')}, {(sugg.sum_of_kernel_bounds_s or 0) * 1e6:.2f} us; "
            if sugg is not None
            else ""
        )
        + f"planner {fmt_si(res.bytes, 'B')}, {res.time_s * 1e6:.2f} us, {res.kernels:.0f} kernels; "
        f"ideal {fmt_si(float(ideal.bytes), 'B')}"
    )
    for note in res.notes:
        print(f"  note: {note}")
    return 0


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
    a.add_argument("--seq", type=int, default=2048)
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
    a.set_defaults(func=cmd_audit)
    add_html_option(a, "fusion")
    p = fsub.add_parser(
        "plan", help="the planner's fusion plan: kernels, bytes, time, what each fusion saves"
    )
    p.add_argument("model", help="catalog name or path to a config.json")
    add_assume_family(p)
    p.add_argument("--device", default="h100-sxm", help="catalog device name or alias")
    p.add_argument("--phase", choices=("prefill", "decode"), default="decode", help="the step to plan")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=2048)
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
    p.set_defaults(func=cmd_plan)
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
    t.set_defaults(func=cmd_tiling)
