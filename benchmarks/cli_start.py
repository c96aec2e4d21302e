"""Whole-process wall time of the command line, paired with python itself and with llm-analysis.

Every command runs ROUNDS times, interleaved (one of each per round) so machine noise hits all
alike; the median is printed with ratios. The analysis is Llama-2-7B on an A100-40GB, batch 8,
context / prompt 2048:

* ``costmodel decode`` with the persistent cache off: graph, compiled forms, card, report;
* the same with the card cached (a later run of the same question; any batch or context);
* ``costmodel prefill`` + ``costmodel decode`` cached: the prefill+decode analysis that one
  ``llm-analysis infer`` run (``-n 1``: one generated token) also computes.

    python benchmarks/cli_start.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

from _peers import HOW, llm_analysis_python

CM = [sys.executable, "-m", "costmodel"]
DECODE = [*CM, "decode", "llama-2-7b", "--device", "a100", "--batch", "8", "--ctx", "2048"]
PREFILL = [*CM, "prefill", "llama-2-7b", "--device", "a100", "--batch", "8", "--seq", "2048"]


def wall(cmds: list[list[str]], env: dict[str, str]) -> float:
    t = time.perf_counter()
    for c in cmds:
        subprocess.run(c, env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cache = tempfile.mkdtemp(prefix="costmodel-bench-")
    env = {**os.environ, "COSTMODEL_CACHE_DIR": cache}
    off = {**env, "COSTMODEL_NO_CACHE": "1"}
    wall([DECODE, PREFILL], env)  # fill the cache once
    cases: dict[str, tuple[list[list[str]], dict[str, str]]] = {
        "python -c pass": ([[sys.executable, "-c", "pass"]], env),
        "costmodel --help": ([[*CM, "--help"]], env),
        "costmodel decode --help": ([[*CM, "decode", "--help"]], env),
        "costmodel decode (no cache)": ([DECODE], off),
        "costmodel decode (cached card)": ([DECODE], env),
        "costmodel prefill + decode (cached)": ([PREFILL, DECODE], env),
    }
    peer = llm_analysis_python()
    if peer:
        la = [
            peer,
            "-m",
            "llm_analysis.analysis",
            "infer",
            "-m",
            "NousResearch_Llama-2-7b-hf",
            "-g",
            "a100-sxm-40gb",
            "-b",
            "8",
            "--seq_len",
            "2048",
            "-n",
            "1",
            "--log_level",
            "ERROR",
        ]
        cases["llm-analysis infer (prefill + decode)"] = ([la], env)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(rounds):
        for k, (cmds, e) in cases.items():
            times[k].append(wall(cmds, e))
        print(f"\r  round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    print(f"whole-process wall time, median of {rounds} interleaved rounds (s)")
    for k, v in med.items():
        print(f"  {k:40s} {v:7.3f}   {v / base:5.1f}x python -c pass")
    print(
        f"  decode: no cache / cached card = {med['costmodel decode (no cache)'] / med['costmodel decode (cached card)']:.1f}x"
    )
    if peer:
        ours = med["costmodel prefill + decode (cached)"]
        theirs = med["llm-analysis infer (prefill + decode)"]
        print(f"  llm-analysis / costmodel (prefill + decode, cached) = {theirs / ours:.2f}x")
        print(
            f"  llm-analysis / costmodel decode (no cache)          = {theirs / med['costmodel decode (no cache)']:.2f}x"
        )
    else:
        print(f"  llm-analysis not found: {HOW}")


if __name__ == "__main__":
    main()
