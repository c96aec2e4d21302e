"""An accuracy benchmark in one process against the same command on a local Dask cluster of two
worker processes (``--scheduler dask --workers 2``), interleaved, whole commands as a user runs
them: wall time (the parallel gain), CPU time (the command and every process it reaped: its Dask
workers), and whether the outputs are equal (the generated text with its ``N s`` timing masked).

The default job is ``silicon_accuracy --check --limit 6``: six deployments' load-check runs, each
run's six replays one task. Any other selection of ``serving_accuracy`` or ``silicon_accuracy``
is given after ``--``. Every run shares one cache directory, filled by a first run of the job, so
no run pays for the fits the others read. A measurement, not a test: run it with the machine
otherwise idle (the load average is printed before and after).

    python -m benchmarks.replay_dask [--rounds 2]
    python -m benchmarks.replay_dask -- serving_accuracy --quick --rows nim-,vllmci
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
from pathlib import Path

from benchmarks import size_dask

#: the default job: a script of benchmarks/ and its options
JOB = ["silicon_accuracy", "--check", "--limit", "6"]
#: a generated section's own timing ("... 3 runs, 31 s)", "... a TPOT, 2 s; ..."): masked before the outputs are compared
_SECONDS = re.compile(r"\b\d+ s(?=[;)])")


def run(job: list[str], cache: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of the command and every process it reaped) and
    stdout (its own timing masked) of ``python -m benchmarks.<job>`` over the cache ``cache``
    (:func:`benchmarks.size_dask.run`)."""
    wall, cpu, out = size_dask.run(job[1:], cache, module=f"benchmarks.{job[0]}")
    return wall, cpu, _SECONDS.sub("N s", out)


def _line(label: str, xs: list[float], unit: str) -> str:
    return f"  {label:18s} {min(xs):7.2f} / {statistics.median(xs):7.2f} / {max(xs):7.2f} {unit} (min/median/max)"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("job", nargs="*", help="after --: the script and its options (default: %(default)s)")
    args = ap.parse_args(argv)
    job = args.job or JOB
    print(f"job: {' '.join(job)}; load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    one: list[tuple[float, float, str]] = []
    two: list[tuple[float, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="replay-dask-") as tmp:
        cache = Path(tmp)
        run(job, cache)  # fills the fits' cache every run below reads
        for _ in range(args.rounds):
            one.append(run(job, cache))
            two.append(run([*job, "--scheduler", "dask", "--workers", "2"], cache))
    same = all(b[2] == one[0][2] for b in one + two)
    print(f"{args.rounds} interleaved pairs")
    print(_line("one process, wall", [x[0] for x in one], "s"))
    print(_line("dask x 2, wall", [x[0] for x in two], "s"))
    print(_line("one process, CPU", [x[1] for x in one], "s"))
    print(_line("dask x 2, CPU", [x[1] for x in two], "s"))
    print(_line("speed-up (wall)", [a[0] / b[0] for a, b in zip(one, two, strict=True)], "x"))
    print(f"outputs identical: {same}; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
