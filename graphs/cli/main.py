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
from collections.abc import Collection, Sequence
from typing import Any

from .options import Parser, finish

__all__ = ["main", "build_parser", "COMMANDS", "GLOBAL_FLAGS", "DESCRIPTION"]

#: the top-level --help text: plain words, no reST markup (the module doc is for Sphinx)
DESCRIPTION = """\
A symbolic cost model for ML inference: roofline bounds, measured-kernel predictions and
serving simulations of a model on a device.

'costmodel' with no arguments runs the default analysis ('report'): the profiling article's
operator ledger on a catalog device, with headroom, and the GEMM crossover derivation. Each
command's --help gives its options, their units and defaults; --json gives machine-readable
output."""


def cmd_report(args: argparse.Namespace) -> int:
    """``costmodel report``: :func:`costmodel.report.operator_report`, printed (``--json``: its
    ``to_dict()``)."""
    from costmodel.report import operator_report

    from .common import dump

    rep = operator_report(args.device, args.dtype)
    print(dump(rep.to_dict()) if args.json else rep.to_text())
    return 0


#: each module of :mod:`graphs.cli` that builds commands -> its parser function and the
#: commands it adds, with the one-line help ``costmodel --help`` lists (it must equal the
#: module's own: ``tests/test_cli_lazy.py``). ``report`` is built here.
_MODULES: dict[str, tuple[str, dict[str, str]]] = {
    "main": ("", {"report": "default analysis: operator ledger roofline + GEMM crossover"}),
    "op": (
        "add_op_parsers",
        {
            "op": "roofline of one op: costmodel op gemm M=1 N=4096 K=4096",
            "rules": "list operator cost rules",
        },
    ),
    "derive": ("add_derive_parser", {"derive": "closed-form derivations"}),
    "hw": ("add_hw_parser", {"hw": "hardware catalog"}),
    "model": ("add_model_parser", {"model": "catalog models, per-node analysis and closed forms"}),
    "phases": (
        "add_phase_parsers",
        {
            "ledger": "memory ledger: weights + KV + activations + overhead",
            "prefill": "TTFT bound, per-unit times, attention share, chunked prefill",
            "decode": "TPOT bound, weight/KV/compute times, knee batch, ctx ceiling, energy",
            "sweep": "batch x ctx (x devices x dtypes) decode sweep and Pareto frontier",
        },
    ),
    "fusion": ("add_fusion_parser", {"fusion": "fusion audit, the fusion planner and tiled IO models"}),
    "serve": ("add_serve_parser", {"serve": "disaggregated, speculative, split and parallel serving plans"}),
    "search": (
        "add_search_parser",
        {
            "search": "design-space search: devices x dtypes x tp/pp/ep/dp x batch x ctx, Pareto frontier under SLOs"
        },
    ),
    "simulate": (
        "add_simulate_parser",
        {"simulate": "request-level serving simulation: TTFT/TPOT percentiles under a rate"},
    ),
    "size": (
        "add_size_parser",
        {
            "size": "sizing: cheapest deployment (device x tp x replicas, aggregated or P:D) within TTFT/TPOT SLOs at the --percentile (default 99)"
        },
    ),
    "measure": (
        "add_measure_parsers",
        {"probe": "measure this machine: bandwidth, matmul peaks, microbenchmarks, calibration"},
    ),
    "calibrate": (
        "add_calibrate_parser",
        {"calibrate": "fit efficiencies on measured GPU kernels ([measured] extra)"},
    ),
    "plot": (
        "add_plot_parser",
        {"plot": "roofline, ledger, frontier, headroom or batch-sweep plots (PNG/SVG)"},
    ),
    "engines": (
        "add_engines_parser",
        {"engines": "serving-engine profiles: each default's value and source"},
    ),
}

#: every subcommand, in ``--help`` order -> (its module, the module's parser function, its help).
#: A module is imported only when one of its commands runs or its ``--help`` is asked.
COMMANDS: dict[str, tuple[str, str, str]] = {
    name: (module, adder, text) for module, (adder, helps) in _MODULES.items() for name, text in helps.items()
}

#: options every command accepts before or after the subcommand's name
GLOBAL_FLAGS = ("--hw-file", "--hw-override", "--json")


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command-line parser. ``load=None``: complete, every command's options built (tests,
    the fuzz suite, docs). Otherwise only the modules of the commands named in ``load`` are
    imported and built; every other command is listed by its name and help alone (what
    ``costmodel --help`` needs), so the CLI starts without importing what it does not run."""
    import importlib

    from costmodel import __version__

    p = Parser(
        prog="costmodel", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"costmodel {__version__}")
    p.add_argument(
        "--hw-file",
        action="append",
        default=[],
        metavar="PATH",
        help="load extra devices from a TOML/JSON file (catalog layout); repeatable, before or after the "
        "command. A device named like a catalog device is an error unless --hw-override",
    )
    p.add_argument(
        "--hw-override",
        action="store_true",
        help="let --hw-file devices replace catalog devices of the same name (a note names each one); "
        "only with --hw-file",
    )
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (the command's --json, given before it)"
    )
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    wanted = set(COMMANDS) if load is None else {c for c in load if c in COMMANDS}
    built: set[str] = set()
    for name, (module, adder, help_text) in COMMANDS.items():
        if module in built:
            continue
        if name == "report" and name in wanted:
            from .common import add_json

            r = sub.add_parser("report", help=help_text)
            r.add_argument("--device", default="h100-sxm")
            r.add_argument("--dtype", default="bf16")
            add_json(r)
            r.set_defaults(func=cmd_report)
        elif name != "report" and any(COMMANDS[c][0] == module for c in wanted):
            getattr(importlib.import_module(f"{__package__}.{module}"), adder)(sub)
            built.add(module)
        else:  # listed, not built: main() builds it when it is the command
            stub = sub.add_parser(name, help=help_text, add_help=False)
            stub.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
            stub.set_defaults(unbuilt=name)
    return finish(p)


def _command(argv: Sequence[str]) -> int | None:
    """Where the subcommand's name is in ``argv`` (global options already moved before it), or None."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return None
        if not a.startswith("-"):
            return i
        i += 2 if a == "--hw-file" else 1  # the one global option that takes a value
    return None


def _json_after_command(argv: list[str]) -> list[str]:
    """``--json`` given before the subcommand, moved after it (the subcommand owns the option)."""
    at = _command(argv)
    if at is None or "--json" not in argv[:at]:
        return argv
    rest = [a for a in argv[:at] if a != "--json"] + argv[at:]
    end = rest.index("--") if "--" in rest else len(rest)
    return [*rest[:end], "--json", *rest[end:]]


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


#: each symbol a ``--hw-file`` device keeps (a bare name in a value keeps it symbolic) -> where:
#: the file, the device and the field, for the error of a command that needs a number there
SYMBOL_ORIGINS: dict[str, str] = {}
#: each such device's name (lower case) -> where its first symbol is
SYMBOLIC_DEVICES: dict[str, str] = {}


def _load_hw_files(paths: Sequence[str], override: bool) -> None:
    """Register each ``--hw-file``'s devices; with ``--hw-override`` one may replace a catalog
    device, and stderr names every device replaced (without it that is an error). Each symbol
    a device keeps is recorded with its file, device and field (:data:`SYMBOL_ORIGINS`)."""
    from costmodel.hardware import active_catalog, load_hardware_file
    from costmodel.notes import say

    for path in paths:
        if override:
            cat = active_catalog()
            for hw in load_hardware_file(path, register=False):
                if hw.name in cat:  # the catalog's, or another file's: said which
                    known = cat.describe(hw.name).removeprefix("the ")
                    if cat.is_alias(hw.name):  # only the name moves: the device keeps its own
                        say(
                            f"{path} takes the name {hw.name!r} over from {known}, whose alias it was; that "
                            "device stays under its own name"
                        )
                    else:
                        say(f"{path} replaces {known}")
        for hw in load_hardware_file(path, replace=override):
            _record_symbols(path, hw)


def _record_symbols(path: str, hw: Any) -> None:
    fields: list[tuple[str, Any]] = [
        (f"roofs {r.unit} {r.precision}.peak_flops_per_s", r.peak_flops_per_s) for r in hw.roofs
    ]
    for m in hw.memory:
        fields += [(f"memory {m.name}.bandwidth_bytes_per_s", m.bandwidth_bytes_per_s)]
        fields += [(f"memory {m.name}.capacity_bytes", m.capacity_bytes)]
    for lk in hw.links:
        fields += [(f"links {lk.name}.bandwidth_bytes_per_s", lk.bandwidth_bytes_per_s)]
        fields += [(f"links {lk.name}.latency_s", lk.latency_s)]
    fields += [("power_w", hw.power_w), ("price_usd_per_hour", hw.price_usd_per_hour)]
    for where, v in fields:
        for sym in getattr(v, "free_symbols", ()):
            origin = f"{path}: device {hw.name!r} {where} = {v}"
            SYMBOL_ORIGINS.setdefault(str(sym), origin)
            SYMBOLIC_DEVICES.setdefault(hw.name.lower(), origin)


#: the commands that take a symbolic device as it is (``op`` prints its cost's bound with the
#: symbols; ``hw`` shows and lists it); every other needs its numbers
SYMBOLIC_OK = frozenset({"op", "hw"})
#: the options that name devices (a comma list where the command takes several)
DEVICE_OPTIONS = (
    "device",
    "devices",
    "prefill_device",
    "decode_device",
    "attention_device",
    "ffn_device",
    "draft_device",
)


def _refuse_symbolic_devices(args: argparse.Namespace) -> None:
    """A numeric command on a device a ``--hw-file`` kept symbolic (a bare name in a value) is
    refused before any work, naming the file, device and field, where it once failed deep in a
    compiled form (``prefill``: a ``NameError``) or with another command's words."""
    if not SYMBOLIC_DEVICES or getattr(args, "command", None) in SYMBOLIC_OK:
        return
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device

    for opt in DEVICE_OPTIONS:
        value = getattr(args, opt, None)
        for name in value.split(",") if isinstance(value, str) else ():
            try:
                hw = get_device(name.strip())
            except CostModelError:
                continue  # the command says what is wrong with the name
            why = SYMBOLIC_DEVICES.get(hw.name.lower())
            if why:
                raise CostModelError(
                    f"--{opt.replace('_', '-')} {hw.name}: {why[:300]}: a bare name keeps the device "
                    f"symbolic, which `costmodel op` and `hw` take as such; {args.command} needs numbers"
                )


def _say_device_notes(args: argparse.Namespace) -> None:
    """Say, once, what a command's devices make its answer assume (a series resolved to its one
    part, preliminary figures, a roof standing in for one the device does not publish:
    :func:`costmodel.hardware.fallback.roof_notes`), for the commands that opt in with
    ``set_defaults(device_notes=...)``: those whose reports do not print the notes themselves
    (``decode``, ``prefill``, ``model analyze``, ``simulate``, ``op``, ``report`` and ``derive``
    do). ``"model"``: every note, as a model's report has them; ``"device"``: the device's own
    (series, preliminary), for a command pricing no FLOPs or comparing published roofs.
    ``hw compare``'s positional devices and ``hw claim``'s ``DEVICE:PRECISION`` specs are read
    too. A name that does not resolve is left to the command, which says what is wrong with it."""
    kind = getattr(args, "device_notes", None)
    if kind is None:
        return
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device
    from costmodel.hardware.fallback import roof_notes
    from costmodel.notes import say

    names: list[str] = []
    for opt in DEVICE_OPTIONS:
        value = getattr(args, opt, None)
        names += [n.strip() for n in value.split(",")] if isinstance(value, str) else []
    listed = getattr(args, "devices", None)
    names += [str(n).strip() for n in listed] if isinstance(listed, list) else []
    for opt in ("old", "new"):  # hw claim's DEVICE:PRECISION[:COUNT]
        value = getattr(args, opt, None)
        names += [value.split(":")[0].strip()] if isinstance(value, str) else []
    for name in dict.fromkeys(n for n in names if n):
        try:
            hw = get_device(name)
        except CostModelError:
            continue  # the command refuses the name in its own words
        for note in roof_notes(hw, used=None if kind == "model" else ()):
            say(note)


def _symbol_origins(message: str) -> str:
    """Where the unbound symbols an error names come from, when a ``--hw-file`` gave them."""
    import re

    m = re.search(r"unbound symbols: ([^;]+);", message)
    if m is None:
        return ""
    found = [SYMBOL_ORIGINS[n.strip()] for n in m.group(1).split(",") if n.strip() in SYMBOL_ORIGINS]
    if not found:
        return ""
    return (
        f" ({'; '.join(found)[:400]}: a bare name keeps the device symbolic; give a number for a numeric "
        "answer)"
    )


#: the Arrow allocator a command's process reads the measured corpus with (unless the user's
#: environment names one): the C library's ``malloc``, not Arrow's bundled mimalloc
ARROW_POOL = "system"


def _arrow_allocator() -> None:
    """Have Arrow (the corpus's parquet reads, pandas' text columns) allocate from the C library's
    heap: set ``ARROW_DEFAULT_MEMORY_POOL`` to :data:`ARROW_POOL` unless the environment sets it
    (Arrow reads it when its default pool is first used: here, before any table is read).

    mimalloc keeps the pages of a freed table mapped for reuse; glibc's heap hands them back
    (:func:`costmodel.measured.corpus.release_unused` trims it between tables), so a first
    ``--predict``, which reads and lets go of a dozen corpus tables, peaks about 30 MiB lower
    (``benchmarks/first_predict.py``). The child processes of a command (Dask's workers) inherit
    it. Only the command line sets it: a program using the library keeps its own allocator."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (see :data:`options.EXIT_CODES`). What it prints
    on stdout and stderr has its control characters escaped (:class:`costmodel.text.EscapedStream`:
    a device description or a file name from the user never drives the terminal)."""
    from costmodel.notes import clear as clear_notes
    from costmodel.text import EscapedStream

    from .options import reset_outputs

    _arrow_allocator()
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = EscapedStream(out), EscapedStream(err)
    reset_outputs()  # the output paths this command claims (options.check_output_path)
    clear_notes()  # the notes this command says (kept for its --json output)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


#: the options that name files a command reads, and those that name files it writes
_INPUT_OPTIONS = ("model", "target", "draft", "trace", "workload_from", "results", "hw_file", "predict_file")
_OUTPUT_OPTIONS = ("csv", "out", "html", "plot")


def _refuse_outputs_over_inputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output option naming a file the command reads (``sweep m.json
    --csv m.json`` replaced the model's config with its CSV; ``simulate --trace t.csv --csv t.csv``
    its trace): the same file, by ``os.path.samefile``, not by spelling."""
    from costmodel.errors import CostModelError

    def paths(names: tuple[str, ...]) -> list[tuple[str, str]]:
        out = []
        for name in names:
            v = getattr(args, name, None)
            for item in v if isinstance(v, list | tuple) else [v]:
                if isinstance(item, str) and item and os.path.isfile(item):
                    out.append((name, item))
        return out

    inputs = paths(_INPUT_OPTIONS)
    for oname, opath in paths(_OUTPUT_OPTIONS):
        for iname, ipath in inputs:
            try:
                same = os.path.samefile(opath, ipath)
            except OSError:
                continue
            if same:
                flag = "the model" if iname == "model" else "--" + iname.replace("_", "-")
                raise CostModelError(
                    f"--{oname.replace('_', '-')} {opath[:200]!r} is the file {flag} reads: writing it would "
                    "replace the input; give the output another path"
                )


def _main(argv: Sequence[str] | None) -> int:
    from costmodel.errors import CostModelError  # light: the engine loads when a command runs

    try:
        argv = _json_after_command(_hoist_global_options(sys.argv[1:] if argv is None else list(argv)))
        at = _command(argv)
        parser = build_parser(() if at is None else (argv[at],))
        args = parser.parse_args(argv)
        if getattr(args, "unbuilt", None):  # the command was not where _command looked: build it
            parser = build_parser((args.unbuilt,))
            args = parser.parse_args(argv)
        args._typed_argv = list(argv)  # html_option.ARGV: the page shows what was typed
        SYMBOL_ORIGINS.clear()  # this run's files' symbols only
        SYMBOLIC_DEVICES.clear()
        if args.hw_override and not args.hw_file:  # it lets a file's devices replace: no file, no effect
            raise CostModelError(
                "--hw-override lets --hw-file devices replace catalog ones, and no --hw-file was given: "
                "add --hw-file PATH or drop --hw-override"
            )
        if args.hw_file:
            _load_hw_files(args.hw_file, args.hw_override)
        if args.command is None:
            parser = build_parser(("report",))
            args = parser.parse_args(
                [
                    *(f"--hw-file={p}" for p in args.hw_file),
                    *(["--hw-override"] if args.hw_override else []),
                    "report",
                    *(["--json"] if args.json else []),
                ]
            )
        from .options import assumed_family, dtype_assumption

        _refuse_outputs_over_inputs(args)  # before any note or work
        precheck = getattr(args, "precheck", None)
        if precheck is not None:  # a command's own refusal of its inputs, before any note
            precheck(args)
        assumed_family(args)  # --assume-family: checked, and said once, before any work
        dtype_assumption(args)  # a config.json of no torch_dtype: bf16, said once
        _refuse_symbolic_devices(args)
        _say_device_notes(args)  # a preliminary device, a stand-in roof: said once, before any work
        return int(args.func(args))
    except SystemExit as exc:  # argparse: --help, --version, or a one-line usage error
        if isinstance(exc.code, int):
            return exc.code
        if exc.code is not None:  # ``SystemExit("message")``: the message is the one line
            print(str(exc.code), file=sys.stderr)
            return 2
        return 0
    except CostModelError as exc:
        print(f"costmodel: error: {exc}{_symbol_origins(str(exc))}", file=sys.stderr)
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
