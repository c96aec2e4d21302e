"""``costmodel size`` in one process against the same command on a local Dask cluster of two
worker processes (``--scheduler dask --workers 2``), interleaved, whole commands as a user runs
them: wall time (the parallel gain), CPU time (the command and its workers), and whether the
answers are equal.

The job: Llama-3.1-8B at 40 requests/s within P99 TTFT <= 1 s and TPOT <= 50 ms, on H100, H200
or B200 at tp 1, 2 or 4, aggregated or P:D, **30,000 requests per candidate** (``--requests``):
a sizing whose candidate simulations (eight, about 2 to 4 CPU s each on this machine) outweigh
what a cluster costs to start (two worker processes importing Dask and the sizing: about 3 CPU
s) and the few candidates a best-first search can simulate ahead. With 3,000 requests a
candidate (``search_warm.py --size``'s job) the whole one-process command is about 3 s and no
cluster of new processes can halve it.

Every run starts from the same cache: the mixed steps' cards (:mod:`graphs.serving.step.mixed`)
filled by a first run, its candidates' run cards (:mod:`graphs.serving.planning.run_cards`)
removed, so each run simulates every candidate (a run card would answer it without simulating).
Target (issue 44): >= 1.6x on this 2-core machine, so run it with the machine otherwise idle (the
load average is printed).

``--ceiling`` also starts two copies of the one-process command together each round: twice one
copy's wall over theirs is what this machine's two cores give any split of the job in two (two
processes at once each run slower here than one alone), the yardstick for the Dask ratio.

    python -m benchmarks.size_dask [--rounds 3] [--requests 30000] [--ceiling]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the sizing asked (without ``--requests``)
JOB = [
    "size", "llama-3.1-8b", "--rate", "40", "--slo-ttft", "1", "--slo-tpot", "0.05",
    "--devices", "h100,h200,b200", "--tp", "1,2,4", "--quiet", "--json",
]  # fmt: skip
#: ``search_warm.py --size``'s command: the job at 3,000 requests a candidate
ARGV = [*JOB, "--requests", "3000"]
_ROOT = Path(__file__).resolve().parent.parent


def run(argv: list[str], cache: Path, module: str = "costmodel") -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of the command and every process it reaped: its
    Dask workers) and stdout of ``python -m module argv`` (``costmodel argv``) over the cache
    directory ``cache``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
    env["COSTMODEL_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(_ROOT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", module, *argv],
        cwd=_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def run_two(argv: list[str], caches: tuple[Path, Path]) -> float:
    """Wall seconds of two copies of ``costmodel argv`` started together, each over its own cache
    (the later to end): what this machine's two cores give two independent copies of the
    one-process command. Their ratio to one copy alone bounds any split of the work in two here
    (two processes at once each run slower than one alone on this virtual machine: docs/speed.md)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
    env["PYTHONPATH"] = str(_ROOT)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "costmodel", *argv],
            cwd=_ROOT,
            env={**env, "COSTMODEL_CACHE_DIR": str(c)},
            stdout=subprocess.DEVNULL,
        )
        for c in caches
    ]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a copy failed: exit {p.returncode}")
    return time.perf_counter() - t0


def _fresh(base: Path, to: Path) -> Path:
    """A copy of ``base`` (the mixed steps' cards, no run cards) at ``to``."""
    shutil.copytree(base, to)
    return to


def _line(label: str, xs: list[float], unit: str) -> str:
    return f"  {label:18s} {min(xs):6.2f} / {statistics.median(xs):6.2f} / {max(xs):6.2f} {unit} (min/median/max)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=30_000, help="requests each candidate simulates")
    ap.add_argument(
        "--ceiling",
        action="store_true",
        help="also run two one-process copies at once each round: the machine's own 2-core ceiling",
    )
    args = ap.parse_args()
    argv = [*JOB, "--requests", str(args.requests)]
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    one: list[tuple[float, float, str]] = []
    two: list[tuple[float, float, str]] = []
    copies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="size-dask-") as tmp:
        base = Path(tmp) / "base"
        run(argv, base)  # fills the mixed steps' cards ...
        for card in (base / "forms").glob("size-run-*.json"):
            card.unlink()  # ... and not the runs: every run below simulates its candidates
        for i in range(args.rounds):
            one.append(run(argv, _fresh(base, Path(tmp) / f"one-{i}")))
            two.append(
                run([*argv, "--scheduler", "dask", "--workers", "2"], _fresh(base, Path(tmp) / f"two-{i}"))
            )
            if args.ceiling:
                pair = (_fresh(base, Path(tmp) / f"a-{i}"), _fresh(base, Path(tmp) / f"b-{i}"))
                copies.append(run_two(argv, pair))
    same = all(b[2] == one[0][2] for b in one + two)
    print(f"size, {args.requests:,} requests a candidate, {args.rounds} interleaved pairs")
    print(_line("one process, wall", [x[0] for x in one], "s"))
    print(_line("dask x 2, wall", [x[0] for x in two], "s"))
    print(_line("one process, CPU", [x[1] for x in one], "s"))
    print(_line("dask x 2, CPU", [x[1] for x in two], "s"))
    ratios = [a[0] / b[0] for a, b in zip(one, two, strict=True)]
    print(_line("speed-up (wall)", ratios, "x"))
    if copies:
        # two copies' work in the wall of the slower: the best a split in two reaches on this machine
        ceiling = [2 * a[0] / c for a, c in zip(one, copies, strict=True)]
        print(_line("two copies at once", copies, "s"))
        print(_line("2-core ceiling", ceiling, "x") + "  (2 x one process / two copies at once)")
    print(f"answers identical: {same}; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
