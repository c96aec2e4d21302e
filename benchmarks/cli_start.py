"""Whole-process CPU time of the command line, paired with python itself and with llm-analysis
doing the same work.

Every command runs ROUNDS times, interleaved (one of each per round) so machine noise hits all
alike; each is timed as its process's CPU time (user + system, from ``getrusage`` of the
children), which a loaded machine inflates less than wall time; the median is printed with
ratios. The analysis is Llama-2-7B on an A100-40GB, batch 8, context / prompt 2048. A *first
run* has an empty cache (a fresh ``COSTMODEL_CACHE_DIR`` each time): it reads the card that
ships with the package (``benchmarks/build_cards.py``), or, with ``COSTMODEL_NO_SHIPPED_CARDS=1``
("derived"), builds the graph and compiles the forms as before the cards shipped. Byte code is
written and reused (``PYTHONDONTWRITEBYTECODE`` is dropped), as in an installed package. Each
costmodel row is compared with a peer row doing the same work:

* decode alone: ``costmodel decode`` on a first run against one llm-analysis process that
  builds its analysis (model, GPU and dtype configs) and computes one decode step only:
  ``LLMAnalysis.get_latency_fwd(batch, 1)`` plus its KV-cache read, what ``infer`` adds per
  generated token (this file run with ``--llm-analysis-decode``: llm-analysis has no
  decode-only command);
* prefill + decode: ``costmodel prefill`` + ``costmodel decode`` (two processes, a first run,
  then with the cards cached: a later run of the same question) against one
  ``llm-analysis infer -n 1`` (prefill and one generated token, one process);
* ``model analyze`` (decode) and ``ledger`` on a first run: llm-analysis has neither; each is
  set against the llm-analysis decode step, the least work one of its processes does;
* start-up alone: ``costmodel --help`` and ``costmodel decode --help`` against ``python -c pass``.

    python -m benchmarks.cli_start [ROUNDS]

``LLM_ANALYSIS_PYTHON`` names an interpreter with llm-analysis installed, when it is not this one.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.baselines.peers import HOW, llm_analysis_python

#: the repository root: every command runs there, so ``-m benchmarks.cli_start`` finds this module
ROOT = Path(__file__).resolve().parents[1]

CM = [sys.executable, "-m", "costmodel"]
DECODE = [*CM, "decode", "llama-2-7b", "--device", "a100", "--batch", "8", "--ctx", "2048"]
PREFILL = [*CM, "prefill", "llama-2-7b", "--device", "a100", "--batch", "8", "--seq", "2048"]
ANALYZE = [*CM, "model", "analyze", "llama-2-7b", "--device", "a100", "--phase", "decode", "--batch", "8"]
LEDGER = [*CM, "ledger", "llama-2-7b", "--device", "a100", "--batch", "8", "--ctx", "2048"]
#: the environment value that asks :func:`cpu` for a fresh, empty cache directory per run
FRESH = "<fresh>"
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


def cpu(cmds: list[list[str]], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of running ``cmds`` one after another (a fresh cache
    directory for the lot when ``env`` asks for one)."""
    fresh = env.get("COSTMODEL_CACHE_DIR") == FRESH
    run_env = {**env, "COSTMODEL_CACHE_DIR": tempfile.mkdtemp(prefix="costmodel-first-")} if fresh else env
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for c in cmds:
        subprocess.run(c, env=run_env, cwd=ROOT, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if fresh:
        shutil.rmtree(run_env["COSTMODEL_CACHE_DIR"], ignore_errors=True)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cache = tempfile.mkdtemp(prefix="costmodel-bench-")
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_env.pop("COSTMODEL_NO_SHIPPED_CARDS", None)
    env = {**base_env, "COSTMODEL_CACHE_DIR": cache}
    first = {**base_env, "COSTMODEL_CACHE_DIR": FRESH}
    derived = {**first, "COSTMODEL_NO_SHIPPED_CARDS": "1"}
    cpu([DECODE, PREFILL, ANALYZE, LEDGER], env)  # fill the cache (and write the byte code) once
    cases: dict[str, tuple[list[list[str]], dict[str, str]]] = {
        "python -c pass": ([[sys.executable, "-c", "pass"]], env),
        "costmodel --help": ([[*CM, "--help"]], env),
        "costmodel decode --help": ([[*CM, "decode", "--help"]], env),
        "costmodel decode (first run)": ([DECODE], first),
        "costmodel decode (first run, derived)": ([DECODE], derived),
        "costmodel decode (cached card)": ([DECODE], env),
        "costmodel prefill + decode (first run)": ([PREFILL, DECODE], first),
        "costmodel prefill + decode (first, derived)": ([PREFILL, DECODE], derived),
        "costmodel prefill + decode (cached)": ([PREFILL, DECODE], env),
        "costmodel model analyze (first run)": ([ANALYZE], first),
        "costmodel model analyze (first, derived)": ([ANALYZE], derived),
        "costmodel ledger (first run)": ([LEDGER], first),
        "costmodel ledger (first run, derived)": ([LEDGER], derived),
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
            times[k].append(cpu(cmds, e))
        if sys.stderr.isatty():
            print(f"\r  round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    print(f"whole-process CPU time (user + system), median [min-max] of {rounds} interleaved rounds (s)")
    for k, v in med.items():
        lo, hi = min(times[k]), max(times[k])
        print(f"  {k:45s} {v:7.3f} [{lo:.3f}-{hi:.3f}]  {v / base:5.1f}x python -c pass")
    for what in ("decode", "prefill + decode"):
        cold, warm = (
            med[f"costmodel {what} (first run)"],
            med[f"costmodel {what} ({'cached card' if what == 'decode' else 'cached'})"],
        )
        print(f"  {what}: first run / cached = {cold / warm:.2f}x")
    if not peer:
        print(f"  llm-analysis not found: {HOW}")
        return
    print("same work side by side (llm-analysis time / costmodel time; > 1: costmodel faster)")
    step, infer = "llm-analysis decode step", "llm-analysis infer (prefill + decode)"
    pairs = (
        ("decode, first run", step, "costmodel decode (first run)"),
        ("decode, first run, derived", step, "costmodel decode (first run, derived)"),
        ("decode, cached card", step, "costmodel decode (cached card)"),
        ("prefill + decode, first run", infer, "costmodel prefill + decode (first run)"),
        ("prefill + decode, first, derived", infer, "costmodel prefill + decode (first, derived)"),
        ("prefill + decode, cached", infer, "costmodel prefill + decode (cached)"),
        ("model analyze, first run", step, "costmodel model analyze (first run)"),
        ("ledger, first run", step, "costmodel ledger (first run)"),
    )
    for label, theirs, ours in pairs:
        print(f"  {label:35s} {med[theirs]:7.3f} / {med[ours]:7.3f} = {med[theirs] / med[ours]:5.2f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--llm-analysis-decode"]:
        llm_analysis_decode()
    else:
        main()
