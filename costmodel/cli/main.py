"""Command line: a thin layer over the library.

``costmodel`` with no arguments runs the default analysis (``report``): the
profiling article's operator ledger on a catalog device, with headroom, and
the GEMM crossover derivation. Subcommands print derivations, single-op
rooflines and the hardware catalog; ``--json`` gives machine-readable output.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .common import add_json, dump
from .options import Parser, finish

__all__ = ["main", "build_parser"]


def cmd_report(args: argparse.Namespace) -> int:
    from ..cost import as_float
    from ..derive import (
        gemm_crossover,
    )
    from ..hardware import get_device
    from ..report import format_table, roofline_rows, standard_ops
    from ..symbols import dim

    hw = get_device(args.device)
    rows = roofline_rows(standard_ops(args.dtype), hw, ridge_precision=args.dtype)
    xo = gemm_crossover(N=4096, K=4096, hw=hw, dtype=args.dtype)
    sym = gemm_crossover(N=dim("N"), K=dim("K"))
    ridge = as_float(hw.balance("tensor", args.dtype))
    if args.json:
        print(
            dump(
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


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from .calibrate import add_calibrate_parser
    from .derive import add_derive_parser
    from .fusion import add_fusion_parser
    from .hw import add_hw_parser
    from .measure import add_measure_parsers
    from .model import add_model_parser
    from .op import add_op_parsers
    from .phases import add_phase_parsers
    from .plot import add_plot_parser
    from .search import add_search_parser
    from .serve import add_serve_parser
    from .simulate import add_simulate_parser

    p = Parser(prog="costmodel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"costmodel {__version__}")
    p.add_argument(
        "--hw-file",
        action="append",
        default=[],
        metavar="PATH",
        help="load extra devices from a TOML/JSON file (catalog layout); repeatable. A device named "
        "like a catalog device is an error unless --hw-override",
    )
    p.add_argument(
        "--hw-override",
        action="store_true",
        help="let --hw-file devices replace catalog devices of the same name (a note names each one)",
    )
    sub = p.add_subparsers(dest="command", parser_class=Parser)

    r = sub.add_parser("report", help="default analysis: operator ledger roofline + GEMM crossover")
    r.add_argument("--device", default="h100-sxm")
    r.add_argument("--dtype", default="bf16")
    add_json(r)
    r.set_defaults(func=cmd_report)
    add_op_parsers(sub)
    add_derive_parser(sub)
    add_hw_parser(sub)
    add_model_parser(sub)
    add_phase_parsers(sub)
    add_fusion_parser(sub)
    add_serve_parser(sub)
    add_search_parser(sub)
    add_simulate_parser(sub)
    add_measure_parsers(sub)
    add_calibrate_parser(sub)
    add_plot_parser(sub)
    return finish(p)


def _hoist_global_options(argv: Sequence[str]) -> list[str]:
    """``--hw-file PATH`` and ``--hw-override`` given after the subcommand, moved before it
    (argparse reads a top-level option only there); nothing after ``--`` moves."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        if a == "--hw-override" or a.startswith("--hw-file="):
            front.append(a)
        elif a == "--hw-file" and i + 1 < len(argv):
            front.extend(argv[i : i + 2])
            i += 1
        else:
            rest.append(a)
        i += 1
    return front + rest


def _load_hw_files(paths: Sequence[str], override: bool) -> None:
    """Register each ``--hw-file``'s devices; with ``--hw-override`` one may replace a catalog
    device, and stderr names every device replaced (without it that is an error)."""
    from ..hardware import device_names, load_hardware_file

    for path in paths:
        if override:
            known = set(n.lower() for n in device_names())
            for hw in load_hardware_file(path, register=False):
                if hw.name.lower() in known:
                    print(f"costmodel: note: {path} replaces catalog device {hw.name!r}", file=sys.stderr)
        load_hardware_file(path, replace=override)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (see :data:`options.EXIT_CODES`)."""
    from ..errors import CostModelError  # light: the engine loads when a command runs

    parser = build_parser()
    try:
        args = parser.parse_args(_hoist_global_options(sys.argv[1:] if argv is None else list(argv)))
        if args.hw_file:
            _load_hw_files(args.hw_file, args.hw_override)
        if args.command is None:
            args = parser.parse_args(
                [
                    *(f"--hw-file={p}" for p in args.hw_file),
                    *(["--hw-override"] if args.hw_override else []),
                    "report",
                ]
            )
        return int(args.func(args))
    except SystemExit as exc:  # argparse: --help, --version, or a one-line usage error
        if isinstance(exc.code, int):
            return exc.code
        if exc.code is not None:  # ``SystemExit("message")``: the message is the one line
            print(str(exc.code), file=sys.stderr)
            return 2
        return 0
    except CostModelError as exc:
        print(f"costmodel: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        try:  # further writes (the interpreter's flush at exit) go nowhere instead of failing
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):
            pass
        return 141
    except (RecursionError, MemoryError, OverflowError) as exc:
        print(
            f"costmodel: error: input too large or too deeply nested ({type(exc).__name__})", file=sys.stderr
        )
        return 2
    except Exception as exc:  # a bug: still one line, and an exit code the tests treat as failure
        print(f"costmodel: internal error: {type(exc).__name__}: {exc} (please report)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
