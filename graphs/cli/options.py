"""Every command-line option's help (with its unit) and its valid range, in one table.

:func:`finish` walks a built parser: an option without its own help text gets
the table's, every numeric option gets a validating type (a bad value is a
one-line error naming the flag, exit code 2, before any work starts), and
every help line shows its default. ``tests/test_cli_surface.py`` fails when
an option has no help.

Exit codes: 0 success; 1 "does not fit" (``ledger``, and a point a report refuses because
the device memory cannot hold it); 2 bad input; 141 the
reader of the output went away (``| head``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import sympy

__all__ = [
    "HELP",
    "INT_RANGES",
    "FLOAT_RANGES",
    "FLOAT_OPEN_ABOVE",
    "EXIT_CODES",
    "Parser",
    "finish",
    "number",
    "int_list",
    "check_output_path",
    "reset_outputs",
    "all_actions",
    "add_dtype_options",
    "assumed_family",
    "add_assume_family",
    "apply_dtypes",
    "add_ignore_capacity",
    "SPELLINGS",
]

#: 1: a point refused for memory (``ledger``, ``--ignore-capacity``) or a search nothing meets
EXIT_CODES = (
    "exit codes: 0 ok, 1 does not fit (memory) or nothing meets the SLOs (size, simulate --max-rate), "
    "2 bad input, 141 output pipe closed"
)

#: help for options many commands share, by destination name
HELP: dict[str, str] = {
    "device": "catalog device name or alias (see `costmodel hw list`), or one from --hw-file",
    "devices": "catalog device names or aliases",
    "model": "catalog model name (see `costmodel model list`) or a path to a Hugging Face config.json",
    "batch": "sequences processed together (B)",
    "ctx": "KV length in tokens: tokens already cached, the new one included",
    "seq": "prompt length in tokens (S)",
    "tp": "tensor-parallel degree: devices one layer is split over",
    "phase": "inference phase: prefill (B*S tokens) or decode (B tokens over ctx)",
    "dtype": "data type name (bf16, fp16, fp8, int8, int4, nvfp4, mxfp4, fp32 ...)",
    "weight_dtype": "weight data type, replacing the model's (e.g. fp8, int4, nvfp4); activations, and a KV "
    "cache without --kv-dtype, follow a float one (fp32, bf16, fp16), said in a note",
    "kv_dtype": "KV-cache data type, replacing the model's (e.g. fp8)",
    "matmul_dtype": "matmul operand/roof data type, replacing the model's (fp8: W8A8; nvfp4: W4A4)",
    "precision": "the tensor-roof precision to compare at (bf16, fp8, fp4 ...)",
    "json": "print machine-readable JSON instead of text",
    "top": "rows to print, largest first (0: all)",
    "out": "output file path (its folder must exist)",
    "assume_family": "read a config.json of a model_type the loader does not know as this family "
    "(llama, qwen3_moe ...) when its fields fit it; refused otherwise, said in every output "
    "(see `costmodel model check`)",
}

#: integer options: (smallest, largest) accepted
INT_RANGES: dict[str, tuple[int, int]] = {
    "batch": (1, 10**7),
    "ctx": (1, 10**8),
    "seq": (1, 10**8),
    "tp": (1, 4096),
    "ep": (1, 4096),
    "top": (0, 10**6),
    "repeats": (1, 1000),
    "prompt": (1, 10**8),
    "output": (1, 10**8),
    "decode_batch": (1, 10**7),
    "chunk": (1, 10**8),
    "k_max": (1, 256),
    "workers": (1, 1024),
    "requests": (1, 10**7),
    "max_requests": (1, 10**7),
    "seed": (0, 2**32 - 1),
    "max_num_batched_tokens": (1, 10**7),
    "max_num_seqs": (1, 10**6),
    "block_size": (1, 4096),
    "num_blocks": (1, 10**9),
    "replicas": (1, 4096),
    "dp": (1, 4096),  # data-parallel attention ranks (graphs.serving.sim.data_parallel)
    "batch_wait_iters": (0, 10_000),  # graphs.serving.sim.engine.EngineConfig
    "shared_prefix": (0, 10**7),
    "workload_run": (0, 10**6),  # a run of simulate --workload-from
    "max_simulations": (1, 10_000),
    "replicate_hot": (0, 4096),
    "prompt_pool": (1, 10**7),
    "turns": (1, 10**4),  # graphs.serving.sim.requests.MAX_TURNS
    "concurrency": (1, 10**7),  # graphs.serving.sim.simulator.MAX_CONCURRENCY
    "spec_k": (1, 256),  # graphs.serving.analysis.specdec.K_MAX_LIMIT
    "N": (1, 10**7),
    "d": (1, 65536),
}

#: float options: (low, high, low inclusive) accepted; every float must be finite
FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "alpha": (0.0, 1.0, True),
    "rate": (1e-6, 1e9, True),  # graphs.serving.sim.requests.RATE_RANGE
    "link_bandwidth": (1e6, 1e15, True),  # 1 MB/s to 1 PB/s (graphs.serving.sim.simulator)
    "link_latency": (0.0, 1.0, True),
    "hop_latency": (0.0, 1.0, True),
    "sram_bytes": (0.0, 1e12, False),
    "slo_ttft": (1e-6, 1e6, True),
    "slo_tpot": (1e-6, 1e6, True),
    "gpu_memory_utilization": (0.0, 1.0, False),
    "batch_wait_ratio": (0.0, 1.0, True),
    "kv_watermark": (0.0, 1.0, True),  # high end excluded: FLOAT_OPEN_ABOVE
    "overhead_s": (0.0, 10.0, True),
    "think_time": (0.0, 1e6, True),  # graphs.serving.sim.requests.THINK_RANGE
    "percentile": (0.0, 100.0, False),
    "prefix_eps": (0.0, 1e3, True),  # graphs.serving.sim.replica_routing.EPS_RANGE
    "host_kv_bytes": (0.0, 1e15, True),  # graphs.serving.sim.kv_tiers.BYTES_RANGE
    "ssd_kv_bytes": (0.0, 1e15, True),
    "host_link_bandwidth": (1e6, 1e13, True),  # graphs.serving.sim.kv_tiers.BANDWIDTH_RANGE
    "ssd_bandwidth": (1e6, 1e13, True),
    "electricity_per_kwh": (0.0, 10.0, True),  # USD per kWh (graphs.serving.planning.cost.ELECTRICITY_RANGE)
}

#: float options whose high end is excluded, as the library's own check excludes it: the engine's
#: ``kv_watermark`` is in [0, 1) (``graphs.serving.engines`` ``OVERRIDES`` and ``EngineConfig``: a
#: watermark of 1 would keep every KV block free, so nothing is ever admitted)
FLOAT_OPEN_ABOVE: frozenset[str] = frozenset({"kv_watermark"})


#: one spelling per concept: another spelling -> the one documented first. Wherever a command has
#: either, it accepts both; help lists both where the option takes a comma list (``sweep``,
#: ``search``, ``size``: ``--device DEVICES, --devices DEVICES``), the first alone where it takes
#: one device (``decode --device``)
SPELLINGS: dict[str, str] = {"--devices": "--device"}


def _one_spelling(p: argparse.ArgumentParser) -> None:
    """Give ``p`` the spellings of :data:`SPELLINGS` that it lacks, each on the action it has; an
    option whose help says it takes a "comma list" shows both (an alias in no help was a hidden
    flag the docs used: ``search --devices h100,b200``)."""
    known = p._option_string_actions
    for other, shown in SPELLINGS.items():
        action = known.get(shown) or known.get(other)
        if action is None or (shown in known and other in known and known[shown] is not known[other]):
            continue
        listed = "comma list" in str(action.help if action.help is not None else HELP.get(action.dest, ""))
        rest = [o for o in action.option_strings if o not in (shown, other)]
        action.option_strings = [shown, *([other] if listed else []), *rest]
        known.setdefault(shown, action)
        known.setdefault(other, action)


def _flag(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def _digits_hint(text: str) -> str:
    """`` (write it in digits: 1000)`` for a whole number written otherwise (``1e3``), else ``""``:
    such a value is a whole number, only not in digits, and the refusal says so rather than that
    it is not one."""
    try:
        as_float = float(text)
    except ValueError:
        return ""
    if math.isfinite(as_float) and as_float.is_integer() and abs(as_float) < 1e30:
        return f" (write it in digits: {int(as_float)})"
    return ""


def _int_type(flag: str, lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be a whole number in digits, got {text!r}{_digits_hint(text)}"
            ) from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{flag} must be in [{lo}, {hi}], got {value}")
        return value

    return parse


def _float_type(
    flag: str,
    lo: float,
    hi: float,
    lo_inclusive: bool,
    *,
    hi_inclusive: bool = True,
    closed_loop: bool = False,
) -> Callable[[str], float]:
    """A float option's parser: finite and in range; ``closed_loop``: the command takes
    ``--concurrency``, so an infinite ``--rate`` is told how to send every request at once."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number, got {text!r}") from None
        if not math.isfinite(value):
            hint = ""
            if closed_loop and flag == "--rate" and value > 0:
                from graphs.serving.sim.requests import ALL_AT_ONCE

                hint = f"; {ALL_AT_ONCE}"
            raise argparse.ArgumentTypeError(f"{flag} must be a finite number, got {text!r}{hint}")
        if (
            value > hi
            or value < lo
            or (value == lo and not lo_inclusive)
            or (value == hi and not hi_inclusive)
        ):
            left, right = "[" if lo_inclusive else "(", "]" if hi_inclusive else ")"
            raise argparse.ArgumentTypeError(f"{flag} must be in {left}{lo:g}, {hi:g}{right}, got {value!r}")
        return value

    return parse


class DefaultsOnce(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, but a help text that already states its default (or an
    option whose default is None: "not given") is left as written, never "(default x)
    (default: x)" or "(default: None)"."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text.lower():
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows every default once and whose errors are one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsOnce)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _walk(sub)
    return found


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Fill in shared help, validating numeric types and the exit-code epilog, everywhere."""
    for p in _walk(parser):
        p.epilog = EXIT_CODES
        _one_spelling(p)
        for action in p._actions:
            if isinstance(
                action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
            ):
                continue
            if action.help is None and action.dest in HELP:
                action.help = HELP[action.dest]
            if action.type is int and action.dest in INT_RANGES:
                action.type = _int_type(_flag(action), *INT_RANGES[action.dest])
            elif action.type is float and action.dest in FLOAT_RANGES:
                action.type = _float_type(
                    _flag(action),
                    *FLOAT_RANGES[action.dest],
                    hi_inclusive=action.dest not in FLOAT_OPEN_ABOVE,
                    closed_loop="--concurrency" in p._option_string_actions,
                )
    return parser


def add_ignore_capacity(p: argparse.ArgumentParser) -> None:
    """``--ignore-capacity``: a point that does not fit the device memory is refused (exit 1)
    unless this is given; then its numbers are printed after the verdict."""
    p.add_argument(
        "--ignore-capacity",
        action="store_true",
        help="print latencies even for a point that does not fit the device memory "
        "(the first line still says it does not fit); without it such a point exits 1",
    )


def all_actions(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action]]:
    """``(command path, action)`` for every option of every subcommand (for tests and docs)."""
    out = []
    for p in _walk(parser):
        for action in p._actions:
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                out.append((p.prog, action))
    return out


def number(text: str, flag: str, *, allow_zero: bool = False) -> sympy.Expr:
    """``text`` parsed safely as a finite positive number (or zero with ``allow_zero``); a symbol,
    ``nan`` or a complex value is a one-line error naming ``flag``."""
    from costmodel.errors import CostModelError
    from costmodel.expr import parse_expr

    value = parse_expr(text, field=flag)
    if not value.is_number:
        raise CostModelError(
            f"{flag} needs a number, got {text!r} (free symbols: {sorted(map(str, value.free_symbols))})"
        )
    ok = value.is_nonnegative if allow_zero else value.is_positive
    if not ok:
        allowed = "a number >= 0" if allow_zero else "a number > 0"
        raise CostModelError(f"{flag} must be {allowed}, got {text!r}")
    return value


def int_list(text: str, flag: str, *, hi: int = 10**8, most: int = 10_000) -> list[int]:
    """Comma-separated whole numbers, geometric ranges ``start:stop:factor`` (``1:512:2``) or
    linear ranges ``start..stop`` / ``start..stop/step`` (``1..512``, ``1024..131072/1024``)."""
    from costmodel.errors import CostModelError

    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if ".." in part:
            out.extend(_linear(part, flag, hi, most - len(out)))
            continue
        pieces = part.split(":")
        if len(pieces) not in (1, 3):
            raise CostModelError(f"{flag}: range {part!r} must be START:STOP:FACTOR, e.g. 1:512:2")
        try:
            values = [int(x) for x in pieces]
        except ValueError:
            hint = _digits_hint(part) if len(pieces) == 1 else ""
            if hint:
                raise CostModelError(f"{flag}: {part!r} is a whole number not in digits{hint}") from None
            raise CostModelError(f"{flag}: {part!r} is not a whole number or START:STOP:FACTOR") from None
        if len(values) == 1:
            out.append(values[0])
        else:
            start, stop, factor = values
            if factor < 2 or start < 1 or stop < start:
                raise CostModelError(f"{flag}: range {part!r} needs 1 <= START <= STOP and FACTOR >= 2")
            v = start
            while v <= min(stop, hi):  # grows by FACTOR >= 2: at most log2(hi) steps
                out.append(v)
                v *= factor
        if len(out) > most:
            raise CostModelError(f"{flag}: more than {most} values")
    if not out or min(out) < 1 or max(out) > hi:
        raise CostModelError(f"{flag} must list whole numbers in [1, {hi}], got {text[:200]!r}")
    _refuse_repeats(out, flag)
    return out


def _refuse_repeats(values: Sequence[Any], flag: str) -> None:
    """A one-line error when a list option gives a value twice (``--batches 1,1``: the same point
    computed and shown twice, both on the frontier), naming the value."""
    from costmodel.errors import CostModelError

    seen: set[Any] = set()
    for v in values:
        if v in seen:
            shown = "the model's own (an empty entry)" if v is None else str(v)
            raise CostModelError(f"{flag} gives {shown} twice: list each value once")
        seen.add(v)


def _linear(part: str, flag: str, hi: int, room: int) -> list[int]:
    """``start..stop[/step]``: every ``step``-th whole number from start to stop."""
    from costmodel.errors import CostModelError

    span, _, step_text = part.partition("/")
    lo_text, _, hi_text = span.partition("..")
    try:
        start, stop, step = int(lo_text), int(hi_text), int(step_text or 1)
    except ValueError:
        raise CostModelError(
            f"{flag}: {part!r} must be START..STOP or START..STOP/STEP, e.g. 1..512"
        ) from None
    if start < 1 or stop < start or stop > hi or step < 1:
        raise CostModelError(f"{flag}: range {part!r} needs 1 <= START <= STOP <= {hi} and STEP >= 1")
    if (stop - start) // step + 1 > room:
        raise CostModelError(f"{flag}: {part!r} makes the list longer than its limit; use a larger STEP")
    return list(range(start, stop + 1, step))


#: the files this command's outputs claimed so far (:func:`check_output_path`): path -> flag
_CLAIMED: dict[str, str] = {}


def reset_outputs() -> None:
    """Forget the outputs claimed: a new command starts (:func:`graphs.cli.main.main`)."""
    _CLAIMED.clear()


#: a device name a written spec file may give: what the catalog's names are made of, so the
#: printed ``--device NAME`` works as typed
_DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_device_name(name: str, flag: str = "--name") -> str:
    """``name`` for a device a command writes into a hardware file (``calibrate gpu --name``,
    ``probe --name``), checked before any work: letters, digits, ``.``, ``_`` and ``-`` (no
    space, no control character: the file's loader and a command line take it as typed), and not
    a catalog device's name or alias (the file would need ``--hw-override`` to load).

    Parameters
    ----------
    name : str
        The name given.
    flag : str
        The option, named in the error.

    Returns
    -------
    str
    """
    from costmodel.errors import CostModelError, UnknownDeviceError
    from costmodel.hardware import get_device

    if not isinstance(name, str) or not _DEVICE_NAME.fullmatch(name):
        raise CostModelError(
            f"{flag} {str(name)[:64]!r}: a device name is 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    try:
        taken = get_device(name).name
    except UnknownDeviceError:
        return name
    raise CostModelError(
        f"{flag} {name!r} is the catalog device {taken!r} (or its alias): give the written device "
        "another name (the file would load only with --hw-override)"
    )


#: what a ``--csv`` file may be named: a CSV, a text file, or no suffix (a device or pipe has none)
CSV_SUFFIXES = (".csv", ".txt", ".tsv", "")


def check_output_path(path: str | Path, flag: str, *, suffixes: Sequence[str] = ()) -> Path:
    """``path`` as a Path that can be written, checked before any work
    (:func:`costmodel.outfiles.check_output`, ``suffixes`` its), and claimed for ``flag``: a file
    another output of the same command already claimed is refused (two outputs to one path: the
    second would replace the first). An existing device or pipe (``/dev/null``) can take several."""
    from costmodel.errors import CostModelError
    from costmodel.outfiles import check_output

    p = check_output(path, flag, suffixes=suffixes)
    try:
        if p.exists() and not p.is_file():
            return p
        key = os.path.join(os.path.realpath(p.parent if str(p.parent) else "."), p.name)
    except (OSError, ValueError):
        return p
    other = _CLAIMED.setdefault(key, flag)
    if other != flag:
        raise CostModelError(
            f"{flag} {str(path)[:200]!r} is also {other}'s output: give each output its own file"
        )
    return p


#: the dtype options of every serving command -> the ModelConfig field each replaces
DTYPE_OPTIONS = {"weight_dtype": "dtype", "kv_dtype": "kv_dtype", "matmul_dtype": "matmul_dtype"}


def add_dtype_options(sp: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """The options of how a command reads its model: ``--weight-dtype``, ``--kv-dtype`` and
    ``--matmul-dtype`` (help from :data:`HELP`), but ``skip``, and ``--assume-family``
    (:func:`assumed_family`)."""
    for dest in DTYPE_OPTIONS:
        if dest not in skip:
            sp.add_argument("--" + dest.replace("_", "-"), default=None)
    add_assume_family(sp)


def add_assume_family(sp: argparse.ArgumentParser) -> None:
    """``--assume-family FAMILY`` (help from :data:`HELP`; :func:`assumed_family`)."""
    sp.add_argument("--assume-family", default=None, metavar="FAMILY")


def assumed_family(args: argparse.Namespace) -> None:
    """With ``--assume-family``: the command's configs (``model``, or ``target`` and ``draft``) read
    as that family before any work (the loader refuses, one line, a config that does not fit it or
    a known ``model_type`` of another family), and the assumption said once on stderr for each
    config it applies to, whichever path (cached or not) answers the command."""
    family = getattr(args, "assume_family", None)
    if family is None or getattr(args, "says_assumption", False):
        return
    from models.check import assumed_family_note
    from models.resolver import config_data, resolve_model

    names = [n for n in (getattr(args, k, None) for k in ("model", "target", "draft")) if isinstance(n, str)]
    if not names:
        from costmodel.errors import CostModelError

        raise CostModelError("--assume-family needs a model (a config.json path)")
    for name in names:
        resolve_model(name, assume_family=family)  # refused here when it does not fit
        mt = config_data(name).get("model_type")
        if mt != family:
            note_once(args, assumed_family_note(mt, family))


def dtype_assumption(args: argparse.Namespace) -> None:
    """A ``config.json`` that states no ``torch_dtype`` (nor ``dtype``; a layer file no
    ``dtype``) is read as BF16, which the loader says (:func:`models.quantization.float_dtype`,
    the note :func:`models.quantization.assumed_float_note`): here it is said on every run, once,
    before the command's answer, also on a run whose answer comes from a card and in a process
    that read the file before; and muted when ``--weight-dtype`` gives the weights' format (a
    review found it said by ``model check`` only). Said only of a file that resolves (one the
    loader refuses gets its one-line error alone); a catalog name is never read (every catalog
    config states it)."""
    from costmodel.notes import ASSUMED_FLOAT, mute, say

    plural = getattr(args, "weight_dtypes", None)
    if getattr(args, "weight_dtype", None) or (plural and all(d.strip() for d in plural.split(","))):
        # the weights' format given (every one of a list: an empty entry is the model's own)
        mute(ASSUMED_FLOAT)
        return
    from costmodel.errors import CostModelError
    from models.sources import is_catalog_name

    for name in (getattr(args, k, None) for k in ("model", "target", "draft")):
        if not isinstance(name, str) or is_catalog_name(name):
            continue  # light: a catalog name imports nothing more (the cold path stays sympy-free)
        from models.quantization import assumed_float_note
        from models.resolver import config_data, resolve_model

        try:
            data = config_data(name)
            cfg = resolve_model(name, assume_family=getattr(args, "assume_family", None))
        except (CostModelError, OSError, ValueError):
            continue  # the command's own resolution says what is wrong with it
        say(assumed_float_note(data, cfg.name), topic=ASSUMED_FLOAT)


def check_dtype_option(flag: str, value: str) -> str:
    """``value`` of a dtype option (``--weight-dtype``, ``--kv-dtypes`` ...) as a model format's
    canonical name (:func:`models.config.model_dtype_name`), or one line naming the option."""
    from models.config import ModelConfigError, model_dtype_name

    try:
        return model_dtype_name(value)
    except ModelConfigError as exc:
        raise ModelConfigError(f"{flag} {str(value)[:40]!r}: {exc}") from None


def dtype_list(text: str | None, flag: str) -> list[str | None]:
    """A comma list of dtypes (``--weight-dtypes``, ``--kv-dtypes``); an empty entry or none given:
    the model's own (None); each other checked as a model format (:func:`check_dtype_option`),
    the error naming ``flag``."""
    if not text:
        return [None]
    out = [check_dtype_option(flag, d.strip()) if d.strip() else None for d in text.split(",")]
    _refuse_repeats(out, flag)
    return out


def apply_dtypes(cfg: Any, args: argparse.Namespace) -> Any:
    """``cfg`` with the dtypes the options of :func:`add_dtype_options` give (a bad name: one-line error)."""
    changes = {f: getattr(args, d) for d, f in DTYPE_OPTIONS.items() if getattr(args, d, None)}
    if not changes:
        return _checkpoint_matmul(cfg, args)
    for d, f in DTYPE_OPTIONS.items():  # each flag checked alone, so its error names the flag
        if f in changes:
            check_dtype_option("--" + d.replace("_", "-"), changes[f])
    if "dtype" in changes:  # every weight, the routed experts' own format (gpt-oss's) too
        from models.quantization import weights_in

        weights = changes.pop("dtype")
        if changes:  # --kv-dtype first: the note says what follows the weights (activations, KV)
            cfg = cfg.replace(**changes)
        cfg, note = weights_in(cfg, weights)
        note_once(args, note and f"--weight-dtype: {note}")
        changes["dtype"] = cfg.dtype  # for the checks below
    cfg = cfg.replace(**changes)
    if "dtype" in changes and "matmul_dtype" not in changes:
        cfg = _native_matmul(cfg, args)
    return cfg


def _checkpoint_matmul(cfg: Any, args: argparse.Namespace) -> Any:
    """A checkpoint that states W8A8/W4A4 matmuls (an FP8 or NVFP4 ``quantization_config``) on
    devices none of which has that format's tensor roof: weight-only there, as the engines run
    it (:func:`models.quantization.native_matmul`, said once), where it used to be refused for a
    missing roof. Unchanged where the roof exists."""
    from costmodel.dtypes import get_dtype

    if cfg.matmul_dtype is None or cfg.matmul_dtype != cfg.dtype:
        return cfg
    devices = _devices_of(args)
    roof = get_dtype(cfg.matmul_dtype).roof
    if not devices or any(hw.peak("tensor", roof) is not None for hw in devices):
        return cfg
    return _native_matmul(cfg.replace(matmul_dtype=None), args)


def _devices_of(args: argparse.Namespace) -> list[Any]:
    """The command's devices (``--device`` or ``--devices``, a comma list), resolved."""
    from costmodel.hardware import get_device

    names = getattr(args, "device", None) or getattr(args, "devices", None)
    if not isinstance(names, str):
        return []
    return [get_device(n.strip()) for n in names.split(",") if n.strip()]


def _native_matmul(cfg: Any, args: argparse.Namespace) -> Any:
    """``--weight-dtype`` fp8/nvfp4 without ``--matmul-dtype``: W8A8/W4A4 where the command's
    devices have the roof (:func:`models.quantization.native_matmul`), said on stderr."""

    from models.quantization import native_matmul

    devices = _devices_of(args)
    if not devices:
        return cfg
    cfg, note = native_matmul(cfg, devices)
    note_once(args, note)
    return cfg


def note_once(args: argparse.Namespace, note: str | None) -> None:
    """Print ``note`` on stderr as ``costmodel: note: ...``, once per command run, and keep it for
    ``--json`` (:func:`costmodel.notes.say`; ``args`` is the command's, kept for its callers)."""
    from costmodel.notes import say

    say(note)
