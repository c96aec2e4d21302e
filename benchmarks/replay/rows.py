"""The published rows: loading them, which are compared, which engine profile replays each, and
which metric group (and target) a metric belongs to.

A row is one published measurement of ``benchmarks/data/published_serving.csv`` (how each source
measured: ``benchmarks/data/README.md``), or a row of the same shape built from another sample
(:mod:`benchmarks.replay.silicon`). Every engine fact (scheduler, KV pool, capture sizes, CPU and
request-path terms, the corpus framework whose kernels price it) comes from the profile a row's
engine column names (:data:`ENGINE`, :mod:`graphs.serving.engines`); a row states only what its
source states.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from graphs.serving.engines import get_engine

__all__ = [
    "CSV_PATH",
    "ENGINE",
    "FRAMEWORK",
    "SAMPLED_LENGTHS",
    "UNPUBLISHED",
    "error",
    "excluded",
    "load_rows",
    "metric_group",
]

ROOT = Path(__file__).resolve().parents[2]
CSV_PATH = ROOT / "benchmarks" / "data" / "published_serving.csv"

#: the serving engine column -> the engine profile whose scheduler and KV pool replay it
#: (:mod:`graphs.serving.engines`, every default sourced there). The TensorRT-LLM perf-overview
#: pages ran trtllm-bench; Triton's rows run the backend's ensemble (its profile, triton-trtllm);
#: NIM's and MLPerf's launch settings are not published, and trtllm-bench's stand in for them
#: (ASSUMED)
ENGINE = {
    "tensorrt-llm": "trtllm-bench",
    "tensorrt-llm (Triton tensorrtllm_backend)": "triton-trtllm",
    "tensorrt-llm (NVIDIA MLPerf harness)": "trtllm-bench",
    "tensorrt-llm (MLPerf harness)": "trtllm-bench",
    "tensorrt-llm (trtllm-serve)": "trtllm",
    "nvidia-nim": "trtllm-bench",
    "vllm": "vllm",
    "sglang": "sglang",
}
#: the serving engine column -> the corpus framework whose measured kernels price its iterations:
#: the framework of the profile :data:`ENGINE` names (:attr:`EngineProfile.framework`; NIM's backend
#: is not stated, its LLM profiles run TensorRT-LLM, so trtllm-bench's stands in)
FRAMEWORK: Mapping[str, str] = MappingProxyType(
    {col: get_engine(name).framework for col, name in ENGINE.items()}
)

#: why a row whose prompts are sampled from ShareGPT, with no length published, is left out: a
#: replay needs each request's prompt and output lengths, and a "200 prompts sampled with a fixed
#: seed" names a draw, not the lengths (the vLLM CI builds' throughput and serving tests, SGLang's
#: bench_serving runs)
SAMPLED_LENGTHS = "ShareGPT prompts: the per-request lengths are not published with the result"

#: rows the sources do not fully specify: id prefix -> reason (left out of the medians); besides
#: these, every row whose workload samples ShareGPT and states no input length (:func:`excluded`)
UNPUBLISHED = {
    "mlperf": "per-request ISL/OSL come from the MLPerf dataset; the cited logs give no length distribution",
    "trtL-gpt-oss-120b": "the page's 'FP8' column for a model released with MXFP4 experts: which weights ran is not stated",
}


def load_rows(path: Path = CSV_PATH, subset: str | None = "core") -> list[dict[str, str]]:
    """The CSV's rows (``subset`` ``core``, ``extended`` or None for all), as the file has them."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if subset is None or r["subset"] == subset]


def whole(text: str) -> int | None:
    """A column's whole number (``"8"``, ``"8.0"``), or None when the cell is empty."""
    return int(float(text)) if text.strip() else None


def excluded(row: dict[str, str]) -> str | None:
    """Why a row is left out of the medians (its configuration is not fully published: its id's
    :data:`UNPUBLISHED` prefix, a ShareGPT sample with no lengths stated (:data:`SAMPLED_LENGTHS`),
    the reason its own ``excluded_reason`` field gives, or a parallel layout the replay does not
    run: an attention-DP degree that does not divide the TP one, or an EP degree other than the
    whole tp group's), or None."""
    if row.get("excluded_reason"):
        return row["excluded_reason"]
    ep, tp, adp = (whole(row.get(k, "")) or 0 for k in ("ep", "tp", "attention_dp"))
    if adp > 1 and (not tp or tp % adp):
        return f"attention DP {adp} beside TP {tp or '(none)'}: the ranks' TP degree is not a whole number"
    if adp > 1 and ep > 1 and ep != tp:
        return f"attention DP {adp} with EP {ep} inside TP {tp}: the experts span the whole group or none"
    if adp <= 1 and tp and ep > 1 and ep != tp:
        return f"EP {ep} inside TP {tp}: the replay runs an EP degree as the whole tp group's or as attention DP"
    if "sharegpt" in row.get("workload", "").lower() and not row.get("isl", "").strip():
        return SAMPLED_LENGTHS
    for prefix, reason in UNPUBLISHED.items():
        if row["id"].startswith(prefix):
            return reason
    return None


def metric_group(metric: str) -> str:
    """``throughput``, ``TPOT``, ``TTFT`` or ``E2E``: which target a metric is judged against."""
    if metric.startswith("ttft"):
        return "TTFT"
    if metric.startswith(("itl", "tpot")):
        return "TPOT"
    if metric.startswith("e2e"):
        return "E2E"
    return "throughput"


def error(model: float, measured: float) -> float:
    """Signed relative error ``model / measured - 1``."""
    return model / measured - 1.0
