"""What the first ``--predict`` on a machine costs, against a second run: CPU time and peak memory.

Runs ``costmodel decode llama-3.1-8b --device h100 --predict vllm --batch 8 --ctx 1000`` twice
in child processes over an empty cache directory (``COSTMODEL_CACHE_DIR``, a temporary one of
this run's): the first finds no fit cache (the shipped fits, :mod:`costmodel.measured.shipped`,
and whatever they do not hold fitted, the residuals and held-out errors derived from the corpus),
the second reads everything back from the cache. Prints each run's CPU seconds (user + system)
and peak resident memory, and the ratio first / second; the two outputs must be identical.

    python -m benchmarks.first_predict [--repo PATH] [--no-shipped] [--search] [--device NAME]
                                       [--unmeasured] [--pairs N]

``--repo`` runs another checkout's engine (``/work/main``: the code before the fits shipped);
``--no-shipped`` sets the shipped fits aside (``COSTMODEL_NO_SHIPPED_FITS=1``): what a first run
costs where they do not apply. ``--search`` times a modest ``search --predict vllm`` instead
(Llama-3.1-8B on H100 and H200, tp 1 and 2, 128 batches, 2 contexts). ``--device`` prices on
another device (a comma-separated list for ``--search``): ``a100`` (A100-SXM-40GB), which the
corpus does not measure, is priced from every measured device's rows. ``--unmeasured`` prices
on :data:`UNMEASURED` (a catalog device the corpus does not measure: its fits, residual tables
and held-out errors are those of every measured device's rows, shared by every such device).
``--pairs N`` runs N (first, second) pairs, each over its own empty cache directory, and prints
the min, median and max of each, and the load average before and after (the machine's other
work moves CPU seconds; the ratio of one pair is what the target is about).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DECODE = ["decode", "llama-3.1-8b", "--device", "h100", "--predict", "vllm", "--batch", "8", "--ctx", "1000"]
SEARCH = [
    "search", "llama-3.1-8b", "--device", "h100-sxm,h200-sxm", "--tp", "1,2", "--predict", "vllm",
    "--batches", "1:256:2", "--ctxs", "1024,4096", "--top", "3",
]  # fmt: skip

#: a catalog device the corpus does not measure (A100-SXM-40GB: the corpus measures the 80 GB A100)
UNMEASURED = "a100"

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


def pair(repo: str, args: list[str], no_shipped: bool) -> tuple[dict[str, float], dict[str, float], bool]:
    """One first run over an empty cache and the second over what it kept: their resource use
    (CPU seconds, peak MiB) and whether their outputs are identical."""
    with tempfile.TemporaryDirectory(prefix="first-predict-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
        env["COSTMODEL_CACHE_DIR"] = str(Path(tmp) / "cache")
        if no_shipped:
            env["COSTMODEL_NO_SHIPPED_FITS"] = "1"
        first_out, first = run(repo, args, env, Path(tmp) / "first.json")
        second_out, second = run(repo, args, env, Path(tmp) / "second.json")
    return first, second, first_out == second_out


def _spread(values: list[float], fmt: str) -> str:
    """``value`` of one, else ``min / median / max`` of several."""
    if len(values) == 1:
        return format(values[0], fmt)
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--no-shipped", action="store_true")
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--device", default=None, help="the device(s) priced (default: the command's own)")
    ap.add_argument("--unmeasured", action="store_true", help=f"price on {UNMEASURED} (no measurements)")
    ap.add_argument("--pairs", type=int, default=1, help="(first, second) pairs run (default 1)")
    a = ap.parse_args()
    if a.pairs < 1:
        ap.error(f"--pairs must be at least 1, got {a.pairs}")
    args = list(SEARCH if a.search else DECODE)
    device = UNMEASURED if a.unmeasured else a.device
    if device is not None:
        args[args.index("--device") + 1] = device
    load_before = os.getloadavg()
    pairs = [pair(a.repo, args, a.no_shipped) for _ in range(a.pairs)]
    load_after = os.getloadavg()
    print(f"costmodel {' '.join(args)}  ({a.repo}{', shipped fits set aside' if a.no_shipped else ''})")
    if a.pairs > 1:
        print(f"  {a.pairs} pairs: min / median / max")
    for label, i in (("first run (empty cache)", 0), ("second run (cache filled)", 1)):
        cpu = _spread([p[i]["cpu_s"] for p in pairs], "6.1f")
        mib = _spread([p[i]["peak_mib"] for p in pairs], "6.0f")
        print(f"  {label:26s} {cpu} CPU s  {mib} MiB peak")
    cpu_x = _spread([p[0]["cpu_s"] / p[1]["cpu_s"] for p in pairs], ".1f")
    mem_x = _spread([p[0]["peak_mib"] / p[1]["peak_mib"] for p in pairs], ".1f")
    same = all(p[2] for p in pairs)
    print(f"  first / second: {cpu_x}x CPU, {mem_x}x memory; outputs {'identical' if same else 'DIFFER'}")
    print(f"  load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after")


if __name__ == "__main__":
    main()
