"""A search (or a size) in a new process, cold (an empty form cache: every plan compiled) against warm (the
plans' cards read back, :mod:`graphs.serving.planning.plan_cards`): CPU time, paired and
interleaved, and whether the answers are identical.

The search is ``search_speed.py``'s: Llama-3.1-70B over 3 devices x 2 weight dtypes x tp
{1,2,4,8} x pp {1,2,4} x micro-batches {1,2,4} x 512 batches x 128 contexts (14.2 million
points), TPOT <= 100 ms, energy as a third objective. Each run is a child process of its own;
a cold run gets a new empty cache directory, a warm run the directory a cold run filled. Target
(issue 44): warm >= 2x faster than cold.

    python -m benchmarks.search_warm [--rounds 3] [--small] [--size]

``--small``: 1/16 of the batches and 1/8 of the contexts (the compiles weigh more). ``--size``:
``size_dask.py``'s one-process ``costmodel size`` command instead (Llama-3.1-8B at 40 requests/s
on H100/H200/B200, tp 1, 2 and 4, 3,000 requests a candidate; the cards are its mixed steps and
its candidates' runs, :mod:`graphs.serving.planning.run_cards`). Target (issue 44): warm >= 2x
faster than cold for both.
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

_CHILD = """
import json, resource, sys
from graphs.serving.planning.design_search import search
small = sys.argv[1] == "small"
res = search(
    "llama-3.1-70b", devices=["h100", "b200", "a100"], weight_dtypes=["bf16", "fp8"], tp=[1, 2, 4, 8],
    pp=[1, 2, 4], microbatches=[1, 2, 4], batches=range(1, 513, 16 if small else 1),
    ctxs=range(1024, 131073, 8192 if small else 1024), slo_tpot=0.1, energy=True,
)
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "points": res.points,
                  "answer": json.dumps([res.frontier, res.best], default=str, sort_keys=True)}))
"""


def run(cache: Path, small: bool) -> dict:
    """One search in a child process over the cache directory ``cache``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
    env["COSTMODEL_CACHE_DIR"] = str(cache)
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = str(root)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, "small" if small else "full"],
        cwd=root, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def run_size(cache: Path) -> dict:
    """``size_dask.py``'s command in a child process over ``cache``: its CPU seconds and answer."""
    import resource

    from benchmarks.size_dask import ARGV

    env = {k: v for k, v in os.environ.items() if not k.startswith("COSTMODEL_")}
    env["COSTMODEL_CACHE_DIR"] = str(cache)
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = str(root)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-m", "costmodel", *ARGV],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_s": cpu, "points": 0, "answer": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--size", action="store_true")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    cold, warm, same = [], [], True
    with tempfile.TemporaryDirectory(prefix="search-warm-") as tmp:
        for i in range(a.rounds):
            one = (lambda d: run_size(d)) if a.size else (lambda d: run(d, a.small))
            c = one(Path(tmp) / f"cold-{i}")  # an empty cache: compiles, writes the cards
            w = one(Path(tmp) / f"cold-{i}")  # the same directory: every plan from its card
            cold.append(c["cpu_s"])
            warm.append(w["cpu_s"])
            same &= c["answer"] == w["answer"]
    ratios = [c / w for c, w in zip(cold, warm, strict=True)]
    what = "size (size_dask.py's command)" if a.size else f"search of {c['points']:,} points"
    print(f"{what}, one process each, {a.rounds} interleaved pairs")
    for label, xs in (("cold (compiles)", cold), ("warm (cards)", warm), ("cold / warm", ratios)):
        print(
            f"  {label:16s} {min(xs):6.2f} / {statistics.median(xs):6.2f} / {max(xs):6.2f} (min/median/max)"
        )
    print(f"answers identical: {same}; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
