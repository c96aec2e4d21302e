"""Command line: a thin layer over the library.

``costmodel`` with no arguments runs the default analysis (``report``): the
profiling article's operator ledger on a catalog device, with headroom, and
the GEMM crossover derivation. Subcommands print derivations, single-op
rooflines and the hardware catalog; ``--json`` gives machine-readable output.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import sympy

from . import __version__
from .cli_fusion import add_fusion_parser
from .cli_hetero import add_hetero_parsers, add_hw_compare_parsers
from .cli_measure import add_measure_parsers
from .cli_model import add_model_parser
from .cli_serve import add_serve_parsers
from .cost import as_float
from .derive import (
    balance_point,
    decode_attention_intensity,
    gemm_crossover,
    latex,
    tile_intensity,
)
from .errors import CostModelError, RuleArgumentError
from .expr import parse_expr
from .hardware import device_names, get_device, load_hardware_file
from .report import fmt_si, format_table, roofline_rows, standard_ops
from .roofline import bound, sensitivities
from .rules import get_rule, op_cost, rule_names

__all__ = ["main", "build_parser"]

_STRING_PARAMS = {"variant", "algorithm", "link"}


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)


def _parse_param(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise RuleArgumentError(f"op parameter {item!r} must look like key=value")
    key, value = item.split("=", 1)
    key = key.strip()
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    if key in _STRING_PARAMS or key == "dtype" or key.endswith("_dtype"):
        return key, value
    return key, parse_expr(value, field=key)


def cmd_report(args: argparse.Namespace) -> int:
    hw = get_device(args.device)
    rows = roofline_rows(standard_ops(args.dtype), hw, ridge_precision=args.dtype)
    xo = gemm_crossover(N=4096, K=4096, hw=hw, dtype=args.dtype)
    sym = gemm_crossover(N=sympy.Symbol("N", positive=True), K=sympy.Symbol("K", positive=True))
    ridge = as_float(hw.balance("tensor", args.dtype))
    if args.json:
        print(
            _dump(
                {
                    "device": hw.name,
                    "ridge_flop_per_byte": ridge,
                    "ops": rows,
                    "gemm_crossover_4096": xo.to_dict(),
                    "gemm_crossover_symbolic": sym.to_dict(),
                }
            )
        )
        return 0
    print(f"Roofline of the standard operator ledger on {hw.name} ({hw.description})")
    print(f"ridge point I* = P_tensor,{args.dtype} / beta_dram = {ridge:.1f} FLOP/B\n")
    print(format_table(rows))
    print("\nGEMM [M,4096] x [4096,4096]: smallest M that is compute-bound")
    print(f"  exact root M* = {as_float(xo.exact):.1f}  -> M = {xo.integer}")
    print(f"  asymptote (M << N,K): M* = I* b / 2 = {as_float(xo.asymptotic):.1f}")
    print(f"  closed form: M* = {sym.exact}   ->  {sym.asymptotic} as N, K -> oo")
    return 0


def cmd_op(args: argparse.Namespace) -> int:
    params = dict(_parse_param(p) for p in args.params)
    cost = op_cost(args.rule, **params)
    hw = get_device(args.device)
    b = bound(cost, hw)
    numeric = cost.is_numeric
    if args.json:
        out: dict[str, Any] = {
            "rule": args.rule,
            "params": {k: str(v) for k, v in params.items()},
            "cost": cost.to_dict(numeric=numeric),
            "bound": b.to_dict(),
        }
        if numeric:
            out["sensitivities"] = {
                k: {kk: as_float(vv) for kk, vv in v.items()} for k, v in sensitivities(cost, hw).items()
            }
        print(_dump(out))
        return 0
    print(f"{args.rule}({', '.join(f'{k}={v}' for k, v in params.items())}) on {hw.name}")
    print(f"  FLOPs      : {cost.flops}")
    for (unit, prec), f in cost.flop_terms.items():
        print(f"    {unit}/{prec}: {f}")
    print(f"  DRAM bytes : {cost.bytes}")
    if numeric:
        print(f"  intensity  : {as_float(cost.intensity):.3f} FLOP/B")
        for label, t in b.terms.items():
            print(f"  t[{label}] = {as_float(t) * 1e6:.3f} us")
        print(f"  bound      : {b.kind} ({b.category}), T >= {as_float(b.lower) * 1e6:.3f} us")
        if b.unbounded:
            print(f"  not bounded (no roof on this device): {', '.join(b.unbounded)}")
    else:
        print(f"  intensity  : {sympy.simplify(cost.intensity)}")
        print(f"  T >= {b.lower}")
        print("  (bind every dimension to classify)")
    return 0


def cmd_crossover(args: argparse.Namespace) -> int:
    hw = get_device(args.device)
    n, k = parse_expr(args.N, field="N"), parse_expr(args.K, field="K")
    xo = gemm_crossover(N=n, K=k, hw=hw, dtype=args.dtype, w_dtype=args.w_dtype)
    sym = gemm_crossover(
        N=sympy.Symbol("N", positive=True),
        K=sympy.Symbol("K", positive=True),
        dtype=sympy.Symbol("b", positive=True),
    )
    if args.json:
        print(
            _dump(
                {
                    "device": hw.name,
                    "N": str(n),
                    "K": str(k),
                    "dtype": args.dtype,
                    "w_dtype": args.w_dtype,
                    "numeric": xo.to_dict(),
                    "symbolic": sym.to_dict(),
                }
            )
        )
        return 0
    print(
        f"GEMM [M,{k}] x [{k},{n}] on {hw.name}, activations {args.dtype}"
        + (f", weights {args.w_dtype}" if args.w_dtype else "")
    )
    print(f"  intensity I(M) = {xo.intensity}")
    print(f"  ridge I*       = {as_float(xo.balance):.2f} FLOP/B")
    if xo.exact is not None:
        print(f"  exact M*       = {as_float(xo.exact):.2f}  (smallest compute-bound M = {xo.integer})")
    else:
        print("  never compute-bound: the intensity ceiling is below the ridge point")
    if xo.asymptotic is not None:
        print(f"  M << N,K       : M* = {as_float(xo.asymptotic):.2f}")
    print(f"  closed form    : M* = {sym.exact}")
    print(f"                   -> {sym.asymptotic} (N, K -> oo)")
    print(f"  LaTeX          : {latex(sym.exact)}")
    return 0


def cmd_balance(args: argparse.Namespace) -> int:
    names = args.devices or list(device_names())
    rows = []
    for name in names:
        hw = get_device(name)
        for prec in hw.precisions("tensor"):
            rows.append(
                {
                    "device": hw.name,
                    "precision": prec,
                    "peak_flops_per_s": as_float(hw.require_peak("tensor", prec)),
                    "bandwidth_bytes_per_s": as_float(hw.bandwidth()),
                    "ridge": as_float(balance_point(hw, "tensor", prec)),
                }
            )
    if args.json:
        print(_dump({"symbolic": str(balance_point()), "rows": rows}))
        return 0
    print(f"ridge point I* = {balance_point()}  (tensor roof over DRAM bandwidth)")
    cols = (
        ("device", "device", "s"),
        ("precision", "precision", "s"),
        ("peak_flops_per_s", "P (FLOP/s)", "si"),
        ("bandwidth_bytes_per_s", "beta (B/s)", "si"),
        ("ridge", "I* (FLOP/B)", ".1f"),
    )
    print(format_table(rows, cols))
    return 0


def cmd_decode_attention(args: argparse.Namespace) -> int:
    i = decode_attention_intensity(
        parse_expr(args.heads, field="heads"), parse_expr(args.kv_heads, field="kv_heads"), args.dtype
    )
    h, hkv, b = sympy.symbols("H H_kv b", positive=True)
    closed = decode_attention_intensity(h, hkv, b)
    if args.json:
        print(_dump({"intensity": str(i), "closed_form": str(closed), "latex": latex(closed)}))
        return 0
    print(f"decode attention intensity (ctx -> oo) = {closed} = {i} FLOP/B")
    return 0


def cmd_tile(args: argparse.Namespace) -> int:
    tm, tn = parse_expr(args.tile_m, field="tile_m"), parse_expr(args.tile_n, field="tile_n")
    i = tile_intensity(tm, tn, args.dtype)
    sym = tile_intensity(
        sympy.Symbol("t_m", positive=True, integer=True),
        sympy.Symbol("t_n", positive=True, integer=True),
        sympy.Symbol("b", positive=True),
    )
    out: dict[str, Any] = {"tile_intensity": str(i), "closed_form": str(sym)}
    if args.device:
        hw = get_device(args.device)
        out["ridge"] = as_float(hw.balance("tensor", args.dtype))
        out["compute_bound"] = bool(as_float(i) >= out["ridge"])
    if args.json:
        print(_dump(out))
        return 0
    print(
        f"blocked-matmul tile intensity = {sym} = {i} FLOP/B"
        + (
            f"; ridge {out['ridge']:.1f} -> {'compute' if out['compute_bound'] else 'memory'}-bound"
            if args.device
            else ""
        )
    )
    return 0


def cmd_hw_list(args: argparse.Namespace) -> int:
    def num(e: Any) -> float | None:
        return as_float(e) if e is not None and not sympy.sympify(e).free_symbols else None

    rows = []
    for name in device_names():
        hw = get_device(name)
        dram = next((m for m in hw.memory if m.name == "dram"), None)
        rows.append(
            {
                "device": name,
                "description": hw.description,
                "bf16": num(hw.peak("tensor", "bf16")),
                "dram_bw": num(dram.bandwidth_bytes_per_s) if dram else None,
                "capacity": num(dram.capacity_bytes) if dram else None,
                "power_w": num(hw.power_w),
            }
        )
    if args.json:
        print(_dump(rows))
        return 0
    shown = []
    for r in rows:  # devices without a number (a probe has no capacity) print "-"
        shown.append(
            {
                k: ("-" if v is None else (fmt_si(float(v)) if k in ("bf16", "dram_bw", "capacity") else v))
                for k, v in r.items()
            }
        )
        shown[-1]["power"] = f"{r['power_w']:.0f} W" if r["power_w"] else "n/a"
    cols = (
        ("device", "device", "s"),
        ("bf16", "bf16 dense (FLOP/s)", "s"),
        ("dram_bw", "DRAM (B/s)", "s"),
        ("capacity", "capacity (B)", "s"),
        ("power", "power", "s"),
        ("description", "description", "s"),
    )
    print(format_table(shown, cols))
    return 0


def cmd_hw_show(args: argparse.Namespace) -> int:
    hw = get_device(args.name)
    d = hw.to_dict()
    if args.json:
        print(_dump(d))
        return 0
    print(f"{hw.name}: {hw.description}")
    for r in d["roofs"]:
        print(
            f"  {r['unit']:6s} {r['precision']:6s} {fmt_si(r['peak_flops_per_s'], 'FLOP/s'):>16s}  [{r['source']}]"
        )
    for m in d["memory"]:
        bw = fmt_si(m["bandwidth_bytes_per_s"], "B/s") if m["bandwidth_bytes_per_s"] else "-"
        cap = fmt_si(m["capacity_bytes"], "B") if m["capacity_bytes"] else "-"
        print(f"  {m['name']:6s} bw {bw:>12s}  capacity {cap:>10s} per {m['per']}  [{m['source']}]")
    for lk in d["links"]:
        print(
            f"  link {lk['name']}: {fmt_si(lk['bandwidth_bytes_per_s'], 'B/s')} per direction, "
            f"latency {lk['latency_s']} s  [{lk['source']}]"
        )
    if d["power_w"]:
        print(f"  power {d['power_w']:.0f} W  [{d['power_source']}]")
    if hw.notes:
        print(f"  note: {hw.notes}")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    out = {
        n: {
            "parameters": list(get_rule(n).parameters),
            "required": list(get_rule(n).required),
            "summary": get_rule(n).doc.splitlines()[0],
        }
        for n in rule_names()
    }
    if args.json:
        print(_dump(out))
        return 0
    for name, info in out.items():
        print(f"{name:18s} {info['summary']}")
        print(f"{'':18s} required: {', '.join(info['required'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="costmodel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"costmodel {__version__}")
    p.add_argument(
        "--hw-file",
        action="append",
        default=[],
        metavar="PATH",
        help="load extra devices from a TOML/JSON file (catalog layout); repeatable",
    )
    sub = p.add_subparsers(dest="command")

    def add_json(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--json", action="store_true", help="machine-readable output")

    r = sub.add_parser("report", help="default analysis: operator ledger roofline + GEMM crossover")
    r.add_argument("--device", default="h100-sxm")
    r.add_argument("--dtype", default="bf16")
    add_json(r)
    r.set_defaults(func=cmd_report)

    o = sub.add_parser("op", help="roofline of one op: costmodel op gemm M=1 N=4096 K=4096")
    o.add_argument("rule", help="rule name (see `costmodel rules`)")
    o.add_argument("params", nargs="*", help="key=value; values are numbers, expressions or dtype names")
    o.add_argument("--device", default="h100-sxm")
    add_json(o)
    o.set_defaults(func=cmd_op)

    d = sub.add_parser("derive", help="closed-form derivations")
    dsub = d.add_subparsers(dest="derivation", required=True)
    c = dsub.add_parser("crossover", help="GEMM crossover M* for [M,K] x [K,N]")
    c.add_argument("--N", default="4096")
    c.add_argument("--K", default="4096")
    c.add_argument("--dtype", default="bf16")
    c.add_argument("--w-dtype", default=None, help="weight dtype (weight-only quantisation)")
    c.add_argument("--device", default="h100-sxm")
    add_json(c)
    c.set_defaults(func=cmd_crossover)
    bal = dsub.add_parser("balance", help="ridge points of catalog devices")
    bal.add_argument("devices", nargs="*")
    add_json(bal)
    bal.set_defaults(func=cmd_balance)
    da = dsub.add_parser("decode-attention", help="decode attention intensity 2H/(H_kv b)")
    da.add_argument("--heads", default="28")
    da.add_argument("--kv-heads", default="4")
    da.add_argument("--dtype", default="bf16")
    add_json(da)
    da.set_defaults(func=cmd_decode_attention)
    t = dsub.add_parser("tile", help="blocked-matmul tile intensity")
    t.add_argument("--tile-m", default="128")
    t.add_argument("--tile-n", default="128")
    t.add_argument("--dtype", default="bf16")
    t.add_argument("--device", default=None)
    add_json(t)
    t.set_defaults(func=cmd_tile)

    hw = sub.add_parser("hw", help="hardware catalog")
    hsub = hw.add_subparsers(dest="hw_command", required=True)
    hl = hsub.add_parser("list", help="list catalog devices")
    add_json(hl)
    hl.set_defaults(func=cmd_hw_list)
    hs = hsub.add_parser("show", help="show one device with sources")
    hs.add_argument("name")
    add_json(hs)
    hs.set_defaults(func=cmd_hw_show)
    add_hw_compare_parsers(hsub)

    add_model_parser(sub)
    add_serve_parsers(sub)
    add_fusion_parser(sub)
    add_hetero_parsers(sub)
    add_measure_parsers(sub)

    ru = sub.add_parser("rules", help="list operator cost rules")
    add_json(ru)
    ru.set_defaults(func=cmd_rules)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for path in args.hw_file:
            load_hardware_file(path)
        if args.command is None:
            args = parser.parse_args([*(f"--hw-file={p}" for p in args.hw_file), "report"])
        return int(args.func(args))
    except CostModelError as exc:
        print(f"costmodel: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
