"""``costmodel size`` in one process against the same command on a local Dask cluster of two
worker processes (``--scheduler dask --workers 2``), interleaved, whole commands as a user runs
them: wall time (the parallel gain), the parent's CPU time, and whether the answers are equal.

The sized deployment (Llama-3.1-8B at 40 requests/s on H100/H200/B200, tp 1, 2 and 4, 3,000
requests per candidate) simulates its candidates; the Dask run pays its cluster's start-up (a few
seconds) out of the same wall clock. Target (issue 44): >= 1.6x on this 2-core machine, so run
it with the machine otherwise idle (the load average is printed).

    python -m benchmarks.size_dask [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ARGV = [
    "size", "llama-3.1-8b", "--rate", "40", "--slo-ttft", "1", "--slo-tpot", "0.05",
    "--devices", "h100,h200,b200", "--tp", "1,2,4", "--requests", "3000", "--quiet", "--json",
]  # fmt: skip


def run(extra: list[str]) -> tuple[float, float, str]:
    """Wall seconds, the child's CPU seconds (user + system) and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "costmodel", *ARGV, *extra], capture_output=True, text=True, check=True
    ).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    run([])  # caches warm (cards, compiled forms) for both
    one, two, same = [], [], True
    for _ in range(args.rounds):
        a = run([])
        b = run(["--scheduler", "dask", "--workers", "2"])
        one.append(a)
        two.append(b)
        same &= a[2] == b[2]
    w1, w2 = statistics.median(x[0] for x in one), statistics.median(x[0] for x in two)
    print(f"one process:   wall {min(x[0] for x in one):.1f} / {w1:.1f} / {max(x[0] for x in one):.1f} s (min/median/max)")
    print(f"dask, 2 workers: wall {min(x[0] for x in two):.1f} / {w2:.1f} / {max(x[0] for x in two):.1f} s")
    print(f"speed-up (median wall): {w1 / w2:.2f}x; answers identical: {same}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
