"""Why a published row may lie beyond :data:`ROW_LIMIT`: physical reasons stated per row (id
prefix), each following from the row's configuration, not from the error it explains.
"""

from __future__ import annotations

from functools import cache

from .rows import load_rows, metric_group

__all__ = [
    "CPU_STEP",
    "QUEUED",
    "REASONS",
    "REQUEST_PATH",
    "ROW_LIMIT",
    "SATURATION",
    "held_at_once",
    "reason",
]

ROW_LIMIT = 25.0  #: % beyond which a row needs a stated physical reason

REQUEST_PATH = (
    "the request path (HTTP/gRPC server, the ensemble's tokenisation, first-token streaming) is part of the "
    "measured TTFT; the replay adds the triton-trtllm profile's (Triton's documented server-side time per "
    "ensemble model and the tokenizer's rate), no published measure of the whole ensemble's path"
)
CPU_STEP = (
    "at a small batch a step is a few ms of kernels, and the engine's per-iteration CPU work "
    "(scheduling, sampling, launch gaps, detokenisation) is a large share of it; the replay adds "
    "the defaults fitted to larger models' steps (`overheads.DEFAULTS`: Llama-3.1-70B on H200, "
    "`docs/overhead_fit.md`), which a small model's CPU work may exceed"
)
#: physical reasons a row can lie beyond ROW_LIMIT, by id prefix (the first match; shown only
#: on rows that do). Each follows from the configuration, not from the error it explains.
REASONS: dict[str, str] = {
    "trt014-llama-3.1-70b-h100-sxm-tp1": "memory-starved: 70.6 GB of FP8 weights on an 80 GB H100 leave about 7 GB, "
    "so the KV pool holds 18 running sequences here; every GB the engine keeps for its CUDA context, "
    "workspace and activation buffers (not published) is about 14 % fewer sequences and as much less throughput",
    "trt014-llama-3.1-70b-h100-sxm-": "not a kernel effect: the v0.14 page reports 8-19 % less throughput than the "
    "v0.10 page on the same configurations (70B FP8 TP2 on H100: 128/128 5195 vs 6378, 128/2048 5869 vs 6651, "
    "2048/128 697 vs 762 tok/s), which this replay meets within 4 % there; the engine settings behind v0.14's "
    "numbers (max batch size, max tokens per iteration) are not on the page",
    "nim-llama33-70b-h100x2-fp8-5000-500-c100-ttft": "queue-dominated: 100 clients over a KV pool of about 80 "
    "running 5500-token sequences; the wait is the queue length over the completion rate, so a few % "
    "change of the pool (NIM's KV fraction, not published) moves it several-fold",
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-ttft": REQUEST_PATH,
    "nim-llama33-70b-h100x2-fp8-5000-500-c5-ttft": REQUEST_PATH,
    "nim-llama33-70b-h100x2-fp8-5000-500-c25-ttft": REQUEST_PATH,
    "nim-llama33-70b-h100x2-fp8-5000-500-c50-ttft": REQUEST_PATH,
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-": CPU_STEP,
    "nim-llama33-70b-h100x2-fp8-5000-500-c5-": CPU_STEP,
    "vllmci9513-latency": CPU_STEP,
    "vllmci9523-latency": CPU_STEP,
    "vllmci9555-latency": CPU_STEP,
    "trtL-deepseek-v3-h200-sxm-dep8-fp8-": "attention-DP x EP8 of DeepSeek's 128 x 128 block-scaled FP8 "
    "checkpoint on Hopper, resting 87-98 % on the corpus's own H200 rows of its kernels (the fused-MoE and "
    "dense GEMMs on fp8_block rows, MLA attention on the MLA rows, the dispatch and combine on NCCL's "
    "all-gather / reduce-scatter rows); the page does not publish the batch or token limits its "
    "trtllm-bench runs used, nor what its attention-DP balancing (attention_dp_config enable_balance) "
    "holds back",
}


_SGLANG_TP1 = (
    "memory-starved beyond SGLang's defaults: Qwen3-32B's bf16 weights (65.5 GB) fill most of one H100, and "
    "SGLang 0.5's own rule (graphs/serving/engines/sglang.py: mem_fraction_static 0.835 of the 85.5 GB the "
    "driver reports, the KV pool what the weights leave of it) gives 22,451 tokens, which its PrefillAdder "
    "admission (prompt + max_new_tokens within the pool less 0.7-0.098 of the running outputs) fills with "
    "8 (2048x512) to 19 (1024x128) of these requests at once; the measured counts fit a pool of about 6,000 "
    "tokens (mem_fraction_static near 0.785, or a max_running_requests or memory the launch kept that the "
    "sample does not state), and the replay's one wave (SGLang's own profile: its pool and admission) runs "
    "them as its pool allows"
)
_POOL = (
    "the engine's KV pool (its memory reserve and launch limits, not stated) held fewer than the replay's; "
    "a few % of the pool move the wait several-fold"
)
#: silicon-sample runs (id prefixes, TTFT) whose measured TTFT and TPOT show a queue for a free slot
#: (:func:`held_at_once`), and what set the slots; the reason's numbers come from the run's own
#: measured values (shown only on rows beyond :data:`ROW_LIMIT`)
QUEUED: dict[str, str] = {
    **{
        f"aicsil-qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_{lengths}_c16_tp1_": _SGLANG_TP1
        for lengths in ("1024x128", "1024x256", "1024x512", "2048x128", "2048x256", "2048x512")
    },
    "aicsil-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_1024x8192_c64_tp2_": _POOL,
    "aicsil-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c64_tp2_": _POOL,
    "aicsil-2026_04_06_llama_3_1_70b_h100_sxm_vllm_fp8_agg_8192x1024_c32_tp2_": _POOL,
    "aicsil-2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_8192x1024_c64_tp1_": _POOL,
}


def held_at_once(ttft_s: float, tpot_s: float, osl: float, clients: int) -> float:
    """Requests a closed loop of ``clients`` held in decode at once, by Little's law, from its
    measured mean TTFT and TPOT.

    Each client's cycle is its request's TTFT plus its decode, ``S = (OSL - 1) TPOT``; the loop
    completes ``C / (TTFT + S)`` requests per second, each in decode for ``S``:

    .. math::

        N = \\frac{C S}{\\mathrm{TTFT} + S}

    Parameters
    ----------
    ttft_s, tpot_s : float
        Measured mean TTFT and TPOT (s).
    osl : float
        Output tokens per request (their mean where they vary).
    clients : int
        Concurrent clients ``C``.

    Returns
    -------
    float
        ``N`` (requests); ``C - N`` waited, on average, for a free slot or a prefill.
    """
    s = (osl - 1) * tpot_s
    return clients * s / (ttft_s + s)


def _queued(row: dict[str, str]) -> str:
    """A :data:`QUEUED` run's reason: how many requests its own measurements put in decode at once
    (:func:`held_at_once`) and what held the others back; empty for other rows."""
    why = next((v for k, v in QUEUED.items() if row["id"].startswith(k)), "")
    if not why or metric_group(row["metric"]) != "TTFT" or not row.get("run_tpot_s"):
        return ""
    c, longest = int(row["concurrency"]), int(row["osl"])
    # a client drawing lengths on [int(r L), L] (benchmark_serving.py --random-range-ratio) sends
    # outputs of (int(r L) + L) / 2 tokens on average
    osl = (int(float(row.get("length_range_ratio") or 1) * longest) + longest) / 2
    ttft, tpot = float(row["value"]), float(row["run_tpot_s"])
    n = held_at_once(ttft, tpot, osl, c)
    return (
        f"queue-dominated: the run's measured TTFT ({ttft:.3g} s) and TPOT ({1e3 * tpot:.3g} ms) put about "
        f"{n:.1f} of its {c} requests in decode at once (Little's law over the closed loop: C S / (TTFT + S), "
        f"S = (OSL - 1) TPOT = {(osl - 1) * tpot:.3g} s), the others waiting for a finish; {why}"
    )


#: offered output tokens over the page's own unlimited-rate throughput from which a rate row is
#: near saturation (:func:`_near_saturation`)
SATURATION = 0.75


@cache
def _published_peaks() -> dict[str, float]:
    """Every ``-qpsinf-out`` row's measured throughput (tok/s) by id: the pages' unlimited-rate
    capacity of each configuration (:func:`_near_saturation`)."""
    return {r["id"]: float(r["value"]) for r in load_rows(subset=None) if r["id"].endswith("-qpsinf-out")}


def _near_saturation(row: dict[str, str]) -> str:
    """A rate row of a page that also measured the same configuration at an unlimited rate (its
    ``-qpsinf-out`` row): when the offered output tokens, ``rate x OSL``, reach
    :data:`SATURATION` of that throughput (and stay below it), the reason the queue amplifies a
    per-step time the replay leaves out; empty otherwise. By Little's law the running batch is
    ``N = rate x OSL x ITL``, and a step's time grows with ``N``: a per-step excess ``d`` lengthens ITL, which
    grows the batch, which lengthens ITL again, ``ITL = (t0 + d) / (1 - b rate OSL)`` for a
    step ``t0 + b N``, so the error grows without bound as the load nears capacity."""
    rid, rate = row["id"], row["request_rate"].strip()
    if "-qps" not in rid or not rate or rate == "inf" or metric_group(row["metric"]) == "throughput":
        return ""  # a latency's amplification; a throughput below capacity is the offered load
    peak = _published_peaks().get(rid.rsplit("-qps", 1)[0] + "-qpsinf-out")
    if peak is None:
        return ""
    offered = float(rate) * float(row["osl"])
    share = offered / peak
    if not SATURATION <= share < 1:  # beyond capacity the queue grows without bound: another regime
        return ""
    return (
        f"near saturation: {float(rate):g} req/s x {row['osl']} output tokens offer {offered:,.0f} tok/s, "
        f"{100 * share:.0f} % of the {peak:,.0f} the same page measures at an unlimited rate; "
        "the running batch grows with the step time (Little's law: N = rate x OSL x ITL), so a per-step time "
        "the replay leaves out (the engine's per-iteration CPU work, as at the lower rates) is multiplied by "
        "the queue, ITL = (t0 + d) / (1 - b x rate x OSL) for a step of t0 + b N"
    )


def reason(row: dict[str, str], err: float) -> str:
    """The physical reason a row with signed error ``err`` may lie beyond :data:`ROW_LIMIT`
    (empty: none stated). Every reason but the queue's is time the replay leaves out (or memory
    it leaves in), so it explains only a replay faster than the engine: a latency below, a
    throughput above the measured one."""
    rid = row["id"]
    faster = err > 0 if metric_group(row["metric"]) == "throughput" else err < 0
    if rid.startswith("trt014srv-"):
        if metric_group(row["metric"]) == "TTFT":
            text = REQUEST_PATH
        else:
            light = CPU_STEP if row["request_rate"] in ("2", "4", "8", "16") else ""
            text = _near_saturation(row) or light  # a rate near capacity is the queue's, small or not
    else:
        text = _queued(row) or next((v for k, v in REASONS.items() if rid.startswith(k)), "")
    return text if faster or text.startswith("queue-dominated") else ""
