"""One analysis in process, side by side with llm-analysis (PyPI) on the same model and device.

Llama-2-7B on an A100-SXM-40GB, bf16, batch 8, prompt 2048, one generated token: llm-analysis's
``LLMAnalysis.inference`` (efficiencies set to 1.0, so both tools give roofline-style bounds)
against our ``prefill_report`` + ``decode_report``. Each tool runs in its own fresh interpreter;
printed are the import time, the first analysis (ours compiles its steps here), and the mean of
200 further analyses at batch sizes 1-16 (llm-analysis refuses batches that do not fit), plus both tools' TTFT and TPOT so a reader sees
the two compute the same quantities (their models differ in detail: see the closing note).

    python -m benchmarks.vs_llm_analysis
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.baselines.peers import HOW, llm_analysis_python

OURS = r"""
import json, time
t0 = time.perf_counter()
from graphs import decode_report, prefill_report
t1 = time.perf_counter()
pf = prefill_report("llama-2-7b", "a100", batch=8, seq=2048)
dc = decode_report("llama-2-7b", "a100", batch=8, ctx=2049)
t2 = time.perf_counter()
for i in range(200):
    prefill_report("llama-2-7b", "a100", batch=1 + i % 16, seq=2048)
    decode_report("llama-2-7b", "a100", batch=1 + i % 16, ctx=2049)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "each": (t3 - t2) / 200,
                  "ttft": pf.step_s, "tpot": dc.step_s}))
"""

THEIRS = r"""
import json, logging, time
t0 = time.perf_counter()
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import (ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name,
                                 get_model_config_by_name)
t1 = time.perf_counter()
logging.disable(logging.WARNING)
def run(b):
    a = LLMAnalysis(get_model_config_by_name("NousResearch_Llama-2-7b-hf"), get_gpu_config_by_name("a100-sxm-40gb"),
                    get_dtype_config_by_name("w16a16e16"), ParallelismConfig(tp_size=1),
                    hbm_memory_efficiency=1.0, flops_efficiency=1.0)
    return a.inference(batch_size_per_gpu=b, seq_len=2048, num_tokens_to_generate=1)
r = run(8)
t2 = time.perf_counter()
for i in range(200):
    run(1 + i % 16)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "each": (t3 - t2) / 200,
                  "ttft": r["prefill_latency"], "tpot": r["decode_latency"]}))
"""


def run(python: str, code: str) -> dict:
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ours = run(sys.executable, OURS)
    peer = llm_analysis_python()
    theirs = run(peer, THEIRS) if peer else None
    print("llama-2-7b on a100-40gb, bf16, batch 8, prompt 2048: one prefill + decode analysis")
    print(f"  {'':28s} {'costmodel':>12s} {'llm-analysis':>14s}  ratio (them / us)")
    for key, label, scale, unit in (
        ("import", "import", 1, "s"),
        ("first", "first analysis", 1e3, "ms"),
        ("each", "each further analysis", 1e6, "us"),
        ("ttft", "TTFT bound", 1e3, "ms"),
        ("tpot", "TPOT bound", 1e3, "ms"),
    ):
        a = ours[key] * scale
        if theirs:
            b = theirs[key] * scale
            print(f"  {label + ' (' + unit + ')':28s} {a:12.3f} {b:14.3f}  {b / a:8.2f}x")
        else:
            print(f"  {label + ' (' + unit + ')':28s} {a:12.3f}")
    if not theirs:
        print(f"  llm-analysis not found: {HOW}")


if __name__ == "__main__":
    main()
