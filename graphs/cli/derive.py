"""`costmodel derive`: closed forms (crossover, balance, decode attention, tile intensity)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_json, dump

__all__ = ["add_derive_parser"]


def _check_dtypes(args: argparse.Namespace) -> None:
    """``--dtype`` and ``--w-dtype`` as every command checks a dtype option
    (:func:`graphs.cli.options.check_dtype_option`): a tensor format, not ``bool`` or ``int32``
    (read as 1 and 4 bytes a value), one line naming the option otherwise. The names stay as
    given (the output repeats them)."""
    from .options import check_dtype_option

    for dest in ("dtype", "w_dtype"):
        value = getattr(args, dest, None)
        if value is not None:
            check_dtype_option("--" + dest.replace("_", "-"), value)


#: what each symbol of the crossover's printed closed form stands for (:func:`gemm_crossover_form`)
_FORM_NAMES = {
    "b": "bytes per element",
    "a": "activation bytes per element",
    "w": "weight bytes per element",
    "o": "output bytes per element",
    "P": "the tensor roof (FLOP/s)",
    "beta": "the DRAM bandwidth (B/s)",
    "N": "the GEMM's output width",
    "K": "the GEMM's reduction width",
    "M": "the GEMM's rows, the crossover's unknown",
    "M_real": "the solver's own name for M",
    "t_m": "the tile's rows",
    "t_n": "the tile's columns",
}


def _check_shape_names(option: str, text: str, value: Any, form_names: list[str], own: str = "") -> None:
    """``--N`` / ``--K`` may be symbolic (M* is then printed in their symbols), but not in a name
    the printed closed form already uses for something else (``b``, ``P``, ``beta`` ...): its
    "evaluated at" line would bind one name to two things. Refused before any output."""
    from costmodel.errors import CostModelError

    for s in sorted(value.free_symbols, key=str):
        if s.name in form_names and not (s.name == own and value == s):  # ``--N N``: N kept symbolic
            raise CostModelError(
                f"{option} {text!r}: the name {s.name} is {_FORM_NAMES[s.name]} in the closed form "
                f"printed (its names: {', '.join(form_names)}); give a number, or an "
                "expression in other names (e.g. x)"
            )


def cmd_crossover(args: argparse.Namespace) -> int:
    _check_dtypes(args)
    import sympy

    from costmodel.cost import as_float
    from costmodel.derive import gemm_crossover, gemm_crossover_form, latex
    from costmodel.expr import parse_expr
    from costmodel.hardware import get_device
    from costmodel.pretty import tidy_signs
    from costmodel.text import fmt_num

    hw = get_device(args.device)
    # the closed form of these dtypes, and what substituting it takes: its byte symbols, the
    # device's roofs (P = I* beta is the tensor roof the numeric root used) and N, K. Built before
    # N and K are read, so a name of its own in them reads as its symbol and is refused below.
    sym, widths = gemm_crossover_form(dtype=args.dtype, w_dtype=args.w_dtype)
    n, k = parse_expr(args.N, field="N"), parse_expr(args.K, field="K")
    form_names = [*(str(s) for s in widths), "P", "beta", "N", "K", "M", "M_real"]
    _check_shape_names("--N", args.N, n, form_names, own="N")
    _check_shape_names("--K", args.K, k, form_names, own="K")
    xo = gemm_crossover(N=n, K=k, hw=hw, dtype=args.dtype, w_dtype=args.w_dtype)
    notes = _device_notes(hw, args.dtype)
    beta = as_float(hw.bandwidth())
    # the roofs and byte widths are numbers; N and K stay as given (symbols print as text)
    at: dict[str, float | str] = {
        **{str(s): float(v) for s, v in widths.items()},
        "P": as_float(xo.balance) * beta,
        "beta": beta,
    }
    at.update({"N": str(n), "K": str(k)})
    if args.json:
        print(
            dump(
                {
                    "device": hw.name,
                    "N": str(n),
                    "K": str(k),
                    "dtype": args.dtype,
                    "w_dtype": args.w_dtype,
                    "numeric": xo.to_dict(),
                    "symbolic": sym.to_dict(),
                    "symbolic_at": at,
                    "notes": list(notes),
                }
            )
        )
        return 0
    # every line is worked out before the first is printed: a shape the text cannot show is
    # refused whole, never after half a report
    lines = [
        f"GEMM [M,{k}] x [{k},{n}] on {hw.name}, activations {args.dtype}"
        + (f", weights {args.w_dtype}" if args.w_dtype else ""),
        *(f"  note: {note}" for note in notes),
        f"  intensity I(M) = {xo.intensity}",
        f"  ridge I*       = {fmt_num(as_float(xo.balance), '.2f')} FLOP/B",
    ]
    shape_symbols = ", ".join(sorted(str(s) for s in (n.free_symbols | k.free_symbols) if s != xo.variable))
    # the intensity's ceiling (M -> oo), worked out only where a line shows it
    top = sympy.limit(xo.intensity, xo.variable, sympy.oo) if xo.integer is None else sympy.nan
    if xo.exact is not None and xo.integer is not None:
        lines.append(
            f"  exact M*       = {fmt_num(as_float(xo.exact), '.2f')}  (smallest compute-bound M = {xo.integer})"
        )
    elif xo.exact is not None:  # N or K symbolic: M* in their symbols, and the shapes it exists for
        lines.append(f"  exact M*       = {tidy_signs(xo.exact)}")
        if xo.condition is not None and xo.condition is not sympy.true:
            lines.append(
                f"                   where {_condition_text(xo.condition)}; no M is compute-bound for "
                f"other {shape_symbols} (the intensity's ceiling, M -> oo, {top} FLOP/B, is at most the ridge)"
            )
    elif top.free_symbols:
        lines.append(
            f"  never compute-bound, whatever {shape_symbols}: the intensity's ceiling (M -> oo) {top} FLOP/B "
            "is below the ridge point"
        )
    else:
        lines.append(
            f"  never compute-bound: the intensity's ceiling (M -> oo) {fmt_num(as_float(top), '.2f')} FLOP/B "
            "is below the ridge point"
        )
    if xo.asymptotic is not None:
        # the limit of large N and K: a shape that never turns compute-bound is not in it
        limit = "" if xo.exact is not None else "  (the limit N, K -> oo, not this shape's)"
        lines.append(f"  M << N,K       : M* = {fmt_num(as_float(xo.asymptotic), '.2f')}{limit}")
    lines += [
        f"  closed form    : M* = {tidy_signs(sym.exact)}",
        f"                   -> {sym.asymptotic} (N, K -> oo)",
        "  evaluated at   : " + ", ".join(f"{name} = {_num(v)}" for name, v in at.items()),
        f"  LaTeX          : {latex(sym.exact)}",
    ]
    print("\n".join(lines))
    return 0


def _device_notes(hw: Any, dtype: str) -> tuple[str, ...]:
    """What the device makes a ridge at ``dtype``'s tensor roof assume, said once as ``op`` and
    ``report`` say it: preliminary figures, a roof standing in for a bf16 rate the device does not
    publish (:func:`costmodel.hardware.fallback.roof_notes`)."""
    from costmodel.dtypes import roof_of
    from costmodel.hardware.fallback import roof_notes

    return roof_notes(hw, used={("tensor", roof_of(dtype))})


def _condition_text(cond: Any) -> str:
    """A condition as printed: a bound that is a fraction to two decimals (``x > 318.29``,
    ``x*y/(x + y) >= 295.34``), anything else as sympy writes it (``67*x*y - 19788*x > 0``)."""
    import sympy

    from costmodel.cost import as_float
    from costmodel.text import fmt_num

    if (
        isinstance(cond, sympy.core.relational.Relational)
        and not cond.rhs.free_symbols
        and not cond.rhs.is_Integer
    ):
        bound = as_float(cond.rhs)
        shown = fmt_num(bound, ".2f") if abs(bound) >= 1 else f"{bound:.4g}"  # 0.003142, not 0.00
        return f"{cond.lhs} {cond.rel_op} {shown}"
    return str(cond)


def _num(v: float | str) -> str:
    """A substitution value as printed: whole numbers plain, others to 12 significant digits."""
    if isinstance(v, str):
        return v
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e6 else f"{v:.12g}"


def cmd_balance(args: argparse.Namespace) -> int:
    from costmodel.cost import as_float
    from costmodel.derive import (
        balance_point,
    )
    from costmodel.hardware import device_names, distinct_devices
    from costmodel.hardware.fallback import roof_notes
    from costmodel.report import format_table

    # an alias is its device: its rows twice are refused (as hw compare does)
    hws = distinct_devices(args.devices or list(device_names()))
    # a device's own notes (preliminary figures), once each; the rows are its published roofs
    notes = [note for hw in hws for note in roof_notes(hw, used=())]
    rows = []
    for hw in hws:
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
        print(dump({"symbolic": str(balance_point()), "rows": rows, "notes": notes}))
        return 0
    print(f"ridge point I* = {balance_point()}  (tensor roof over DRAM bandwidth)")
    for note in notes:
        print(f"  note: {note}")
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
    _check_dtypes(args)
    from costmodel.derive import (
        decode_attention_intensity,
        latex,
    )
    from costmodel.expr import parse_expr
    from costmodel.symbols import dim, display, quantity

    i = decode_attention_intensity(
        parse_expr(args.heads, field="heads"), parse_expr(args.kv_heads, field="kv_heads"), args.dtype
    )
    closed = display(decode_attention_intensity(dim("H"), dim("H_kv"), quantity("b")))
    if args.json:
        print(dump({"intensity": str(i), "closed_form": str(closed), "latex": latex(closed)}))
        return 0
    print(f"decode attention intensity (ctx -> oo) = {closed} = {i} FLOP/B")
    return 0


def cmd_tile(args: argparse.Namespace) -> int:
    _check_dtypes(args)
    import sympy

    from costmodel.cost import as_float
    from costmodel.derive import tile_compute_bound, tile_intensity
    from costmodel.dtypes import get_dtype
    from costmodel.expr import parse_expr
    from costmodel.hardware import get_device
    from costmodel.symbols import dim, quantity
    from costmodel.text import fmt_num

    tm, tn = parse_expr(args.tile_m, field="tile_m"), parse_expr(args.tile_n, field="tile_n")
    _check_shape_names("--tile-m", args.tile_m, tm, ["b", "t_m", "t_n"])
    _check_shape_names("--tile-n", args.tile_n, tn, ["b", "t_m", "t_n"])
    i = tile_intensity(tm, tn, args.dtype)
    sym = tile_intensity(
        dim("t_m"),
        dim("t_n"),
        quantity("b"),
    )
    out: dict[str, Any] = {"tile_intensity": str(i), "closed_form": str(sym)}
    verdict = ""
    notes: tuple[str, ...] = ()
    if args.device:
        hw = get_device(args.device)
        notes = _device_notes(hw, args.dtype)
        out["notes"] = list(notes)
        ridge = hw.balance("tensor", get_dtype(args.dtype).roof)  # fp8_e4m3 computes on the fp8 roof
        out["ridge"] = as_float(ridge)
        # a symbolic tile (--tile-m x) is compute-bound where its intensity reaches the ridge and
        # its sides are widths: that condition, or a plain yes or no (tile_compute_bound)
        cond = tile_compute_bound(tm, tn, hw, args.dtype)
        if cond in (sympy.true, sympy.false):
            out["compute_bound"] = bool(cond)
            verdict = f"{'compute' if out['compute_bound'] else 'memory'}-bound"
        else:
            out["compute_bound"] = None
            out["compute_bound_when"] = str(cond)
            verdict = f"compute-bound where {_condition_text(cond)}, memory-bound elsewhere"
        if i.free_symbols and cond in (sympy.true, sympy.false):
            names = ", ".join(sorted(str(s) for s in i.free_symbols))
            verdict += f" whatever {names}"
    if args.json:
        print(dump(out))
        return 0
    print(
        f"blocked-matmul tile intensity = {sym} = {i} FLOP/B"
        + (f"; ridge {fmt_num(out['ridge'], '.1f')} -> {verdict}" if args.device else "")
    )
    for note in notes:
        print(f"  note: {note}")
    return 0


def add_derive_parser(sub: Any) -> None:
    d = sub.add_parser("derive", help="closed-form derivations")
    dsub = d.add_subparsers(dest="derivation", required=True)
    c = dsub.add_parser("crossover", help="GEMM crossover M* for [M,K] x [K,N]")
    c.add_argument("--N", default="4096", help="GEMM columns N of [M,K] x [K,N] (a number or an expression)")
    c.add_argument("--K", default="4096", help="GEMM reduction length K (a number or an expression)")
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
    da.add_argument("--heads", default="28", help="query heads H")
    da.add_argument("--kv-heads", default="4", help="key/value heads H_kv")
    da.add_argument("--dtype", default="bf16")
    add_json(da)
    da.set_defaults(func=cmd_decode_attention)
    t = dsub.add_parser("tile", help="blocked-matmul tile intensity")
    t.add_argument("--tile-m", default="128", help="tile rows t_m (elements)")
    t.add_argument("--tile-n", default="128", help="tile columns t_n (elements)")
    t.add_argument("--dtype", default="bf16")
    t.add_argument("--device", default=None)
    add_json(t)
    t.set_defaults(func=cmd_tile)
