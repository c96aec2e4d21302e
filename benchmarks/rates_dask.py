"""``costmodel simulate --max-rate`` and ``simulate --rates`` in one process against the same
commands on a local Dask cluster of two worker processes (``--scheduler dask --workers 2``),
interleaved, whole commands as a user runs them: wall time (the parallel gain), CPU time (the
command and every process it reaped: its Dask workers), and the answers (``--rates``: identical;
``--max-rate``: the same rate to the search's 2 %, :mod:`graphs.serving.planning.capacity_search`).

The jobs: Llama-3.1-8B on an H100 within P99 TTFT <= 1 s and TPOT <= 50 ms, ``--requests`` drawn
requests a simulation; ``--max-rate`` probes three rates a round on the two workers (a k-section,
k = 3: a round narrows the bracket 3x where a bisection narrows it 2x), ``--rates 5,10,20,40``
runs its four rates at once. Every run starts from the same cache (the mixed steps' cards filled
by a first run), so each run simulates every probe and rate.

    python -m benchmarks.rates_dask [--rounds 2] [--requests 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.size_dask import _line, run

#: the two jobs (without ``--requests``)
JOBS = {
    "max-rate": ["simulate", "llama-3.1-8b", "--device", "h100", "--max-rate"],
    "rates": ["simulate", "llama-3.1-8b", "--device", "h100", "--rates", "5,10,20,40"],
}
_SLOS = ["--slo-ttft", "1", "--slo-tpot", "0.05", "--quiet", "--json"]
_DASK = ["--scheduler", "dask", "--workers", "2"]


def _answer(job: str, out: str) -> object:
    doc = json.loads(out)
    return doc["max_rate_requests_per_s"] if job == "max-rate" else doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=3000, help="requests each simulation draws")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="rates-dask-") as tmp:
        base = Path(tmp) / "base"
        for job, argv in JOBS.items():
            argv = [*argv, *_SLOS, "--requests", str(args.requests)]
            run(argv, base)  # fills the mixed steps' cards
            one, two = [], []
            for i in range(args.rounds):
                one.append(run(argv, Path(shutil.copytree(base, Path(tmp) / f"{job}-one-{i}"))))
                two.append(run([*argv, *_DASK], Path(shutil.copytree(base, Path(tmp) / f"{job}-two-{i}"))))
            a1, a2 = _answer(job, one[0][2]), [_answer(job, x[2]) for x in two]
            print(
                f"simulate --{job}, {args.requests:,} requests a simulation, {args.rounds} interleaved pairs"
            )
            print(_line("one process, wall", [x[0] for x in one], "s"))
            print(_line("dask x 2, wall", [x[0] for x in two], "s"))
            print(_line("one process, CPU", [x[1] for x in one], "s"))
            print(_line("dask x 2, CPU", [x[1] for x in two], "s"))
            print(_line("speed-up (wall)", [a[0] / b[0] for a, b in zip(one, two, strict=True)], "x"))
            print(_line("CPU dask / one", [b[1] / a[1] for a, b in zip(one, two, strict=True)], "x"))
            if job == "max-rate":
                assert isinstance(a1, float)
                rel = [abs(float(x) / a1 - 1) for x in a2]  # type: ignore[arg-type]
                print(f"  rate one process {a1:.4g} req/s; dask's within {max(rel):.2%} (tolerance 2 %)")
                n1, n2 = (len(json.loads(x[2])["probes"]) for x in (one[0], two[0]))
                print(f"  probes: {n1} one after another, {n2} two a round")
            else:
                print(f"  runs identical: {all(x == a1 for x in a2)}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
