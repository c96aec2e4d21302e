"""What the first ``--predict`` on a machine costs, against a second run: CPU time and peak memory.

Runs ``costmodel decode llama-3.1-8b --device h100 --predict vllm --batch 8 --ctx 1000`` twice
in child processes over an empty cache directory (``COSTMODEL_CACHE_DIR``, a temporary one of
this run's): the first finds no fit cache (the shipped fits, :mod:`costmodel.measured.shipped`,
and whatever they do not hold fitted, the residuals and held-out errors derived from the corpus),
the second reads everything back from the cache. Prints each run's CPU seconds (user + system)
and peak resident memory, and the ratio first / second; the two outputs must be identical.

    python -m benchmarks.first_predict [--repo PATH] [--no-shipped] [--search] [--device NAME]

``--repo`` runs another checkout's engine (``/work/main``: the code before the fits shipped);
``--no-shipped`` sets the shipped fits aside (``COSTMODEL_NO_SHIPPED_FITS=1``): what a first run
costs where they do not apply. ``--search`` times a modest ``search --predict vllm`` instead
(Llama-3.1-8B on H100 and H200, tp 1 and 2, 128 batches, 2 contexts). ``--device`` prices on
another device (a comma-separated list for ``--search``): ``a100`` (A100-SXM-40GB), which the
corpus does not measure, is priced from every measured device's rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DECODE = ["decode", "llama-3.1-8b", "--device", "h100", "--predict", "vllm", "--batch", "8", "--ctx", "1000"]
SEARCH = [
    "search", "llama-3.1-8b", "--device", "h100-sxm,h200-sxm", "--tp", "1,2", "--predict", "vllm",
    "--batches", "1:256:2", "--ctxs", "1024,4096", "--top", "3",
]  # fmt: skip

#: run the command line in this process, then report its own resource use on a file
_CHILD = """
import json, os, resource, runpy, sys
sys.argv = ["costmodel", *sys.argv[1:]]
try:
    runpy.run_module("costmodel", run_name="__main__")
finally:
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["FIRST_PREDICT_USAGE"], "w") as f:
        json.dump({"cpu_s": r.ru_utime + r.ru_stime, "peak_mib": r.ru_maxrss / 1024}, f)
"""


def run(repo: str, args: list[str], env: dict[str, str], usage: Path) -> tuple[str, dict[str, float]]:
    """One child process of the command line: its stdout and its CPU seconds and peak MiB."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        cwd=repo,
        env={**env, "PYTHONPATH": repo, "FIRST_PREDICT_USAGE": str(usage)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out, json.loads(usage.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--no-shipped", action="store_true")
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--device", default=None, help="the device(s) priced (default: the command's own)")
    a = ap.parse_args()
    args = list(SEARCH if a.search else DECODE)
    if a.device is not None:
        args[args.index("--device") + 1] = a.device
    with tempfile.TemporaryDirectory(prefix="first-predict-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
        env["COSTMODEL_CACHE_DIR"] = str(Path(tmp) / "cache")
        if a.no_shipped:
            env["COSTMODEL_NO_SHIPPED_FITS"] = "1"
        first_out, first = run(a.repo, args, env, Path(tmp) / "first.json")
        second_out, second = run(a.repo, args, env, Path(tmp) / "second.json")
    print(f"costmodel {' '.join(args)}  ({a.repo}{', shipped fits set aside' if a.no_shipped else ''})")
    for label, u in (("first run (empty cache)", first), ("second run (cache filled)", second)):
        print(f"  {label:26s} {u['cpu_s']:6.1f} CPU s  {u['peak_mib']:6.0f} MiB peak")
    print(
        f"  first / second: {first['cpu_s'] / second['cpu_s']:.1f}x CPU, {first['peak_mib'] / second['peak_mib']:.1f}x memory; "
        f"outputs {'identical' if first_out == second_out else 'DIFFER'}"
    )


if __name__ == "__main__":
    main()
