"""Whole-process wall time of the command line, paired with python itself and with llm-analysis
doing the same work.

Every command runs ROUNDS times, interleaved (one of each per round) so machine noise hits all
alike; the median is printed with ratios. The analysis is Llama-2-7B on an A100-40GB, batch 8,
context / prompt 2048. Each costmodel row is compared with a peer row doing the same work:

* decode alone: ``costmodel decode`` with nothing cached (graph, compiled forms, card, report)
  against one llm-analysis process that builds its analysis (model, GPU and dtype configs) and
  computes one decode step only: ``LLMAnalysis.get_latency_fwd(batch, 1)`` plus its KV-cache
  read, what ``infer`` adds per generated token (this file run with ``--llm-analysis-decode``:
  llm-analysis has no decode-only command);
* prefill + decode: ``costmodel prefill`` + ``costmodel decode`` (two processes, nothing
  cached, then with the cards cached: a later run of the same question) against one
  ``llm-analysis infer -n 1`` (prefill and one generated token, one process);
* start-up alone: ``costmodel --help`` and ``costmodel decode --help`` against ``python -c pass``.

    python -m benchmarks.cli_start [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.baselines.peers import HOW, llm_analysis_python

#: the repository root: every command runs there, so ``-m benchmarks.cli_start`` finds this module
ROOT = Path(__file__).resolve().parents[1]
CM = [sys.executable, "-m", "costmodel"]
DECODE = [*CM, "decode", "llama-2-7b", "--device", "a100", "--batch", "8", "--ctx", "2048"]
PREFILL = [*CM, "prefill", "llama-2-7b", "--device", "a100", "--batch", "8", "--seq", "2048"]
#: the same point in llm-analysis's names
PEER_MODEL, PEER_GPU, BATCH, TOKENS = "NousResearch_Llama-2-7b-hf", "a100-sxm-40gb", 8, 2048


def llm_analysis_decode() -> None:
    """One decode step in llm-analysis, as its ``infer`` computes it per generated token
    (``analysis.py``: ``get_latency_fwd(batch, 1, is_inference=True)`` + ``kv_cache_latency``,
    the KV cache loaded and stored at HBM bandwidth), without its prefill."""
    from llm_analysis.analysis import LLMAnalysis, ParallelismConfig
    from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name

    la = LLMAnalysis(
        get_model_config_by_name(PEER_MODEL),
        get_gpu_config_by_name(PEER_GPU),
        get_dtype_config_by_name("w16a16e16"),
        ParallelismConfig(),
    )
    step, _ = la.get_latency_fwd(BATCH, 1, is_inference=True)
    kv_bytes = (
        la.get_memory_kv_cache_per_layer(BATCH, TOKENS, kv_cache_dtype_bytes=2) * la.model_config.num_layers
    )
    step += 2 * kv_bytes / (la.get_gpu_hbm_bandwidth() * 10**9)
    print(f"decode step {step * 1e3:.3f} ms")


def wall(cmds: list[list[str]], env: dict[str, str]) -> float:
    t = time.perf_counter()
    for c in cmds:
        subprocess.run(c, env=env, cwd=ROOT, check=True, capture_output=True)
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
        "costmodel decode (nothing cached)": ([DECODE], off),
        "costmodel decode (cached card)": ([DECODE], env),
        "costmodel prefill + decode (nothing cached)": ([PREFILL, DECODE], off),
        "costmodel prefill + decode (cached)": ([PREFILL, DECODE], env),
    }
    peer = llm_analysis_python()
    if peer:
        infer = [
            *(peer, "-m", "llm_analysis.analysis", "infer", "-m", PEER_MODEL, "-g", PEER_GPU),
            *("-b", str(BATCH), "--seq_len", str(TOKENS), "-n", "1", "--log_level", "ERROR"),
        ]
        cases["llm-analysis decode step"] = (
            [[peer, "-m", "benchmarks.cli_start", "--llm-analysis-decode"]],
            env,
        )
        cases["llm-analysis infer (prefill + decode)"] = ([infer], env)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(rounds):
        for k, (cmds, e) in cases.items():
            times[k].append(wall(cmds, e))
        if sys.stderr.isatty():
            print(f"\r  round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    print(f"whole-process wall time, median of {rounds} interleaved rounds (s)")
    for k, v in med.items():
        print(f"  {k:45s} {v:7.3f}   {v / base:5.1f}x python -c pass")
    cold, warm = med["costmodel decode (nothing cached)"], med["costmodel decode (cached card)"]
    print(f"  decode: nothing cached / cached card = {cold / warm:.1f}x")
    if not peer:
        print(f"  llm-analysis not found: {HOW}")
        return
    print("same work side by side (llm-analysis time / costmodel time; > 1: costmodel faster)")
    pairs = (
        ("decode, nothing cached", "llm-analysis decode step", "costmodel decode (nothing cached)"),
        ("decode, cached card", "llm-analysis decode step", "costmodel decode (cached card)"),
        (
            "prefill + decode, nothing cached",
            "llm-analysis infer (prefill + decode)",
            "costmodel prefill + decode (nothing cached)",
        ),
        (
            "prefill + decode, cached",
            "llm-analysis infer (prefill + decode)",
            "costmodel prefill + decode (cached)",
        ),
    )
    for label, theirs, ours in pairs:
        print(f"  {label:35s} {med[theirs]:7.3f} / {med[ours]:7.3f} = {med[theirs] / med[ours]:5.2f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--llm-analysis-decode"]:
        llm_analysis_decode()
    else:
        main()
