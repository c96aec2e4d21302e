"""One digest line per command over every catalog model: decode, prefill, ledger and model
analyze (``--json``), on several devices and plans, with each command's exit status and a
digest of what it wrote to stdout and stderr. Run it on two trees and ``diff`` the outputs: a
change that must not move any number (a faster path, shipped cards, a refactor) gives none.

    COSTMODEL_NO_CACHE=1 python -m benchmarks.catalog_outputs > before.txt   # on the old tree
    COSTMODEL_NO_CACHE=1 python -m benchmarks.catalog_outputs > after.txt    # on the new one
    diff before.txt after.txt

``COSTMODEL_NO_SHIPPED_CARDS=1`` derives every answer (the shipped cards set aside); without it
the catalog plans the cards hold are answered from them, so the diff checks them too. The
commands run in one process (about 6 CPU minutes derived, 1 with the shipped cards).
"""

from __future__ import annotations

import contextlib
import hashlib
import io

from graphs.cli import main
from models.catalog import model_names

#: each command's words after the model (``model analyze`` puts the model after ``analyze``)
COMMANDS = (
    ("decode", "--device", "h100", "--batch", "8", "--ctx", "2048"),
    ("decode", "--device", "a100", "--batch", "1", "--ctx", "1024", "--ignore-capacity"),
    ("decode", "--device", "h200", "--tp", "8", "--batch", "32", "--ctx", "8192"),
    ("prefill", "--device", "h100", "--batch", "1", "--seq", "2048", "--ignore-capacity"),
    ("prefill", "--device", "b200", "--batch", "4", "--seq", "8192", "--chunk", "2048", "--ignore-capacity"),
    ("ledger", "--device", "h100", "--batch", "8", "--ctx", "4096"),
    ("model", "analyze", "--device", "mi300x", "--phase", "decode", "--batch", "8"),
)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run() -> None:
    """Print ``argv exit-status stdout-digest stderr-digest`` for every model and command."""
    for model in model_names():
        for c in COMMANDS:
            argv = [c[0], c[1], model, *c[2:]] if c[0] == "model" else [c[0], model, *c[1:]]
            argv.append("--json")
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as e:  # argparse's own exits
                    code = e.code
            print(" ".join(argv), code, _digest(out.getvalue()), _digest(err.getvalue()), flush=True)


if __name__ == "__main__":
    run()
