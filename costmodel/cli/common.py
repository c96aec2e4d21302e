"""Helpers every command group shares: JSON output and the ``--json`` flag."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["dump", "emit", "add_json"]


def dump(obj: Any) -> str:
    """JSON text of a command's result (non-JSON values as strings)."""
    return json.dumps(obj, indent=2, default=str)


def emit(args: argparse.Namespace, data: Any, text: str) -> int:
    """Print ``data`` as JSON under ``--json``, else ``text``; exit code 0."""
    print(dump(data) if getattr(args, "json", False) else text)
    return 0


def add_json(sp: argparse.ArgumentParser) -> None:
    """Add the ``--json`` flag to a subcommand."""
    sp.add_argument("--json", action="store_true", help="machine-readable output")
