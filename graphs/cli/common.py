"""Helpers every command group shares: JSON output and the ``--json`` flag."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from costmodel.results import plain

__all__ = ["dump", "emit", "add_json", "progress_bar"]


def _strict(obj: Any) -> Any:
    """``obj`` with reports as plain data and non-finite floats as ``None`` (JSON has no inf/NaN)."""
    obj = plain(obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    return obj


def dump(obj: Any) -> str:
    """Strict JSON text of a command's result: infinite or undefined numbers become ``null``,
    other non-JSON values their string form. The notes the command said on stderr
    (:func:`costmodel.notes.said`: what it assumed or substituted) are kept in it: after a
    ``"notes"`` list of the result's own, else as one, or as ``"notes_said"`` where the result's
    ``"notes"`` is something else (a device's own notes text), in a result that is an object (a
    list result, ``hw list``'s, has no place for them; they stay on stderr)."""
    from costmodel.notes import said

    data = _strict(obj)
    extra = said()
    if extra and isinstance(data, dict):
        own = data.get("notes")
        if own is None:
            data = {**data, "notes": list(extra)}
        elif isinstance(own, list):
            data = {**data, "notes": own + [n for n in extra if n not in own]}
        else:
            data = {**data, "notes_said": list(extra)}
    return json.dumps(data, indent=2, default=str, allow_nan=False)


def emit(args: argparse.Namespace, data: Any, text: str) -> int:
    """Print ``data`` as JSON under ``--json``, else ``text``; exit code 0."""
    print(dump(data) if getattr(args, "json", False) else text)
    return 0


def add_json(sp: argparse.ArgumentParser) -> None:
    """Add the ``--json`` flag to a subcommand."""
    sp.add_argument("--json", action="store_true", help="machine-readable output")


def progress_bar(label: str, quiet: bool = False, unit: str = "points") -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback drawing a one-line bar on stderr: only when stderr is
    a terminal (a log file gets no ``\\r`` updates), and at most once per percent of progress."""
    tty = sys.stderr.isatty() if hasattr(sys.stderr, "isatty") else False
    last = [-1]

    def progress(done: int, total: int) -> None:
        if quiet or not tty or total <= 0:
            return
        pct = min(100, 100 * done // total)
        if pct == last[0]:
            return
        last[0] = pct
        width = 30
        filled = int(width * done / total)
        err = getattr(sys.stderr, "unescaped", sys.stderr)  # its own carriage return passes
        err.write(f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} {unit}")
        if done >= total:
            err.write("\n")
        err.flush()

    return progress
