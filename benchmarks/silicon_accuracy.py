"""Served TTFT and TPOT against NVIDIA's own measured serving runs (the aiconfigurator silicon sample).

The ``aiconfigurator-core`` wheel that supplies the measured kernel corpus also ships
``aiconfigurator_core/systems/silicon_sample.csv``: 5,221 end-to-end serving measurements (a
TTFT and a TPOT per run, in ms) that NVIDIA's AIConfigurator team took on real deployments and
keeps, with their provenance (data dump or source file, workflow run, container image), as the
accuracy anchors of its own estimator (``tools/accuracy_tracking`` in ai-dynamo/aiconfigurator).
Each row is one deployment at one load: model, GPU, engine and version, GEMM quantisation,
tensor parallelism, fixed ISL/OSL and ``batch_size`` concurrent requests.

None of these numbers is in the kernel corpus the predictor is fitted on (that holds isolated
kernel timings), so they are an independent test of the whole served prediction: the
simulator's iterations, its scheduler and the engine overheads on top of measured kernels.

This script replays the dense-model aggregated rows whose model, GPU and dtype this project
has (:func:`eligible` says why each other row is left out) with the same machinery as
``benchmarks/serving_accuracy.py``, in the modes ``bound``, ``predicted`` (the engine's
measured kernels alone) and ``simulated`` (plus the engine's default overheads).

What the sample does not state, and what the replay assumes (said again in the output):

* the load. The sample does not say; the campaigns' sources suggest a benchmark client
  (:func:`client`: ``C`` clients sending back to back, ``10 C`` requests from a burst, every one
  read). ``--protocol sourced`` (default) replays InferenceX's campaigns as InferenceX's
  documented client and the others as one wave of ``batch_size`` requests sent together, every
  one read, except the campaigns whose TTFTs mostly undercut one wave's roofline: those replay
  as their client's closed loop in the steady state (:func:`sourced_lines` says why), TPOT
  compared, TTFT not. ``--protocol wave`` replays every run as one wave, ``--protocol loop`` as
  its client's steady state. A campaign in which most runs' measured TTFT lies below the
  replay's roofline TTFT was not loaded as replayed (:func:`not_waves`): its TTFT is not
  compared, its TPOT is. ``--check`` replays one run per deployment as one wave, as its client
  from a burst and as that client's steady state (:func:`load_check`);
* whether TTFT and TPOT are means (read as means, AIPerf's default statistic);
* the KV-cache dtype (:func:`kv_dtype`) and the FP8 activation scales (:func:`fp8_scales`);
* the engine: a wave runs on the ``trtllm-bench`` profile for every engine (its requests admitted
  as their prompt's and output's KV blocks can be reserved); a client's run on its engine's
  profile (:mod:`graphs.serving.engines`: vLLM's and SGLang's allocate blocks as tokens come), with
  only what InferenceX's scripts set (:func:`engine_settings`, :func:`kv_dtype`);
* block-scaled FP8 (``fp8_block``) GEMMs priced as FP8 with dynamic scales.

    python benchmarks/silicon_accuracy.py                    # every eligible run
    python benchmarks/silicon_accuracy.py --limit 4          # the first 4 deployments (smoke)
    python benchmarks/silicon_accuracy.py --write            # docs/silicon_accuracy.md + the summary in docs/validation.md
    python benchmarks/silicon_accuracy.py --check --write    # the load check's section
    python benchmarks/silicon_accuracy.py --write --jobs 2   # two processes side by side
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import dataclasses
import statistics
import sys
import time
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_accuracy as sa

from costmodel.errors import CostModelError

__all__ = [
    "SOURCE_URL",
    "eligible",
    "kv_dtype",
    "fp8_scales",
    "silicon_rows",
    "load_sample",
    "not_waves",
    "judge_ttft",
    "sourced_lines",
    "client",
    "load_check",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "silicon_accuracy.md"
#: where the summaries go (the README links to it; the README keeps the held-out and published-table ones)
VALIDATION_PATH = ROOT / "docs" / "validation.md"
#: the same file in the wheel's source repository, at the commit the project's search tools hold
SOURCE_URL = (
    "https://github.com/ai-dynamo/aiconfigurator/blob/ed133e9d1e9713a259ea70bf11d7e60627e4e652/"
    "src/aiconfigurator/systems/silicon_sample.csv"
)
#: the sample's model_path -> this project's catalog model (identical architectures)
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
}
#: the sample's system -> the catalog device
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "gb200": "gb200"}
#: the sample's backend -> serving_accuracy's engine column (which measured kernels price it)
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
#: gemm_quant_mode -> serving_accuracy's precision_weights ('' = the checkpoint's bf16)
PRECISION = {"": "", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
SUMMARY_BEGIN, SUMMARY_END = (
    "<!-- silicon-accuracy-summary:begin -->",
    "<!-- silicon-accuracy-summary:end -->",
)
DOC_BEGIN, DOC_END = "<!-- silicon-accuracy:begin -->", "<!-- silicon-accuracy:end -->"
#: serving_accuracy's source kinds for the replays: one wave, the benchmark client from a burst,
#: that client's loop in its steady state
WAVE, CLIENT, STEADY = (
    "aiconfigurator_silicon",
    "aiconfigurator_silicon_client",
    "aiconfigurator_silicon_steady",
)
#: --protocol: InferenceX's campaigns as their client, the others as waves or (where their TTFT
#: shows they were not) their client's steady state (:func:`sourced_lines`); or every run one way
PROTOCOLS = ("sourced", "wave", "loop")
CHECK_BEGIN, CHECK_END = "<!-- silicon-load-check:begin -->", "<!-- silicon-load-check:end -->"
CHECK_SUMMARY_BEGIN, CHECK_SUMMARY_END = (
    "<!-- silicon-load-check-summary:begin -->",
    "<!-- silicon-load-check-summary:end -->",
)


def load_sample(path: Path | None = None) -> list[dict[str, str]]:
    """The wheel's ``silicon_sample.csv`` (or ``path``), as the file has it."""
    if path is None:
        try:
            path = Path(str(resources.files("aiconfigurator_core") / "systems" / "silicon_sample.csv"))
        except ModuleNotFoundError as exc:
            raise CostModelError(
                "the silicon sample ships in the aiconfigurator-core wheel: pip install -e '.[measured]'"
            ) from exc
    if not path.is_file():
        raise CostModelError(f"no silicon sample at {path}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _source_field(row: dict[str, str], key: str) -> str | None:
    """``key=value`` from the row's ``silicon_data_source`` (None: not there)."""
    for part in row["silicon_data_source"].split(";"):
        k, _, v = part.strip().partition("=")
        if k == key:
            return v.strip()
    return None


def eligible(row: dict[str, str]) -> str | None:
    """Why a sample row is not replayed (None: it is)."""
    if row["mode"] != "agg":
        return "disaggregated serving (prefill and decode workers): not replayed here"
    if row["model_path"] not in MODELS:
        return "a model this script does not map (MoE and hybrid models: expert and attention-DP layouts)"
    if row["system"] not in SYSTEMS:
        return f"system {row['system']} not mapped"
    if row["gemm_quant_mode"] not in PRECISION:
        return f"GEMM quantisation {row['gemm_quant_mode']!r} not mapped"
    if (row["pp_size"] or "1") != "1" or (row["attention_dp_size"] or "1") not in ("0", "1"):
        return "pipeline or attention-data parallelism"
    conc = _source_field(row, "silicon_concurrency")
    if conc is not None and conc != row["batch_size"]:
        return "batch_size differs from the run's silicon_concurrency (the workers per deployment are not stated)"
    return None


def kv_dtype(row: dict[str, str]) -> str:
    """The KV-cache dtype a run most likely had, as ``precision_kv``: TensorRT-LLM's
    ``kv_cache_dtype=auto`` follows the checkpoint's quantisation config, and NVIDIA's FP8 and
    NVFP4 checkpoints set ``kv_cache_quant_algo: FP8`` (the wheel's own
    ``model_configs/nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json`` and
    ``Qwen--Qwen3-32B-FP8-Static-PerTensor_hf_quant_config.json``): ``fp8``. vLLM's and SGLang's
    ``auto`` is the model's dtype: ``auto``. InferenceX's campaigns (:func:`client`) set an FP8
    cache in every engine: its Llama-3.1-70B scripts pass ``kv-cache-dtype: fp8`` to vLLM and
    ``kv_cache_config: dtype: fp8`` to TensorRT-LLM (SemiAnalysisAI/InferenceX,
    ``benchmarks/70b_fp8_h100_slurm.sh``, ``70b_fp8_h200_slurm.sh``, ``70b_fp8_b200_docker.sh``,
    ``70b_fp4_b200_docker.sh``, ``70b_fp8_h200_trt_slurm.sh``, ``70b_fp8_b200_trt_slurm.sh``,
    ``70b_fp4_b200_trt_slurm.sh``): ``fp8``."""
    if client(row) is INFERENCEX:
        return "fp8"
    quantised = row["gemm_quant_mode"] in ("fp8", "nvfp4")
    return "fp8" if row["backend"] == "trtllm" and quantised else "auto"


#: InferenceX's trtllm-serve settings for its Llama-3.1-70B runs (:func:`engine_settings`)
INFERENCEX_TRT_MAX_TOKENS = 16384
#: InferenceX's TensorRT-LLM batch waiting at ISL/OSL 1024/1024 below TP 8 (:func:`engine_settings`)
INFERENCEX_TRT_BATCH_WAIT = {"iters": 20, "ratio": 0.9}


def engine_settings(row: dict[str, str]) -> dict[str, str]:
    """The engine a run's campaign states and the settings it overrides, as row fields for
    ``serving_accuracy`` (``engine_profile``, ``engine_max_tokens``, ``engine_batch_wait_iters``,
    ``engine_batch_wait_ratio``; absent: the engine column's profile and its defaults,
    :mod:`graphs.serving.engines`). InferenceX's Llama-3.1-70B TensorRT-LLM scripts
    (``benchmarks/70b_fp8_h200_trt_slurm.sh``, ``70b_fp8_b200_trt_slurm.sh``,
    ``70b_fp4_b200_trt_slurm.sh``; SemiAnalysisAI/InferenceX at a267b4bd and 73ef9225) launch
    ``trtllm-serve`` (the ``trtllm`` profile: chunked prefill off, its default) with
    ``--max_num_tokens 16384`` (the versions at 73ef9225 pass ``$MAX_MODEL_LEN`` instead, 2,048
    or 9,216), and for ISL = OSL = 1024 below TP 8 write ``batch_wait_max_tokens_ratio: 0.9`` and
    ``batch_wait_timeout_iters: 20`` into the engine's options (their comment: "will improve the
    performance, by default they are all zeros"): new prompts wait up to 20 iterations to be
    prefilled together (:class:`graphs.serving.sim.engine.EngineConfig`). Its vLLM scripts pass
    ``max-num-batched-tokens: 8192`` with chunked prefill, the ``vllm`` profile's defaults."""
    if client(row) is not INFERENCEX or row["backend"] != "trtllm":
        return {}
    out = {"engine_profile": "trtllm", "engine_max_tokens": str(INFERENCEX_TRT_MAX_TOKENS)}
    if row["isl"] == row["osl"] == "1024" and int(row["tp_size"]) < 8:
        w = INFERENCEX_TRT_BATCH_WAIT
        out |= {"engine_batch_wait_iters": str(w["iters"]), "engine_batch_wait_ratio": repr(w["ratio"])}
    return out


def fp8_scales(row: dict[str, str]) -> str:
    """How a run's FP8 GEMMs scale their activations: ``static`` (calibrated per-tensor scales)
    for TensorRT-LLM's and NVIDIA's ModelOpt checkpoints; ``dynamic`` for block-scaled FP8
    (``fp8_block``) and for vLLM's and SGLang's on-line FP8 quantisation of a bf16 checkpoint."""
    static = row["gemm_quant_mode"] == "fp8" and (
        row["backend"] == "trtllm" or row["model_path"].startswith("nvidia/")
    )
    return "static" if static else "dynamic"


@dataclasses.dataclass(frozen=True)
class Client:
    """A benchmark client as its source documents it: ``C`` clients (the run's ``batch_size``)
    sending back to back, ``per_client x C`` requests from a burst, every one read, each length
    uniform on ``[int(range_ratio L), L]`` (1: fixed)."""

    label: str  #: its short name in the tables
    command: str  #: how the source runs it (``{per}`` and ``{ratio}`` filled in)
    per_client: int
    range_ratio: float
    warmup: str  #: what runs before the read requests

    @property
    def text(self) -> str:
        """The source's command with this client's numbers."""
        return self.command.format(per=self.per_client, ratio=f"{self.range_ratio:g}")


#: SemiAnalysis InferenceX's client (https://github.com/SemiAnalysisAI/InferenceX,
#: ``benchmarks/benchmark_lib.sh``'s ``run_benchmark_serving``; :func:`client`)
INFERENCEX = Client(
    "InferenceX (its database's campaigns, inferred)",
    "InferenceX's benchmark_serving.py --max-concurrency C --num-prompts {per}C --request-rate inf "
    "--random-range-ratio {ratio} --ignore-eos",
    10,
    0.8,
    "2C warm-up requests, not read",
)
#: NVIDIA's own serving runners in aiconfigurator (``src/aiconfigurator/eval/benchmarks/``)
AIC_EVAL = Client(
    "aiconfigurator's runners (the gap-analysis campaigns, inferred)",
    "aiconfigurator's eval runners: genai-perf --concurrency C --request-count {per}C, token stddev 0, "
    "ignore_eos (bench_serving: --num-prompts {per}C --random-range-ratio {ratio})",
    10,
    1.0,
    "genai-perf: 2C warm-up requests, not read; bench_serving: none by default",
)
#: the sample's data sources with InferenceX's database layout (``measured=`` and ``wip=``
#: fields, InferenceX's 1k/1k, 1k/8k and 8k/1k line-up) besides its ``db-dump/...`` rows
INFERENCEX_FILES = ("source_file=2026-03-25.csv", "source_file=2026-04-06.csv")


def client(row: dict[str, str]) -> Client:
    """The benchmark client a run was most likely measured with (:class:`Client`).

    * Campaigns from InferenceX's database (``db-dump/...`` rows, whose ``config_id``,
      ``workflow_run_id`` and ``image`` fields are that database's columns, and
      :data:`INFERENCEX_FILES`, whose rows have its layout and its line-up: Llama-3.1-70B FP8 and
      NVFP4 at 1k/1k, 1k/8k and 8k/1k on H100, H200 and B200 in vLLM and TensorRT-LLM, DeepSeek-R1
      FP4 SGLang 8k/1k; inferred, a row does not name InferenceX):
      ``benchmarks/benchmark_lib.sh``'s ``run_benchmark_serving`` runs vLLM's
      ``benchmark_serving.py --request-rate inf --max-concurrency C --ignore-eos --num-warmups 2C
      --random-range-ratio $RANDOM_RANGE_RATIO``, the model scripts pass ``--num-prompts $((CONC *
      10))`` and the workflow sets the ratio to 0.8 (as read today: the value when a campaign ran
      is not checked), so each length is uniform on ``[int(0.8 L), L]``. TPOT there is per request
      ``(E2E - TTFT) / (output - 1)``, averaged.
    * The others (the AIConfigurator team's gap-analysis campaigns): the eval runners in
      ``src/aiconfigurator/eval/benchmarks/`` of ai-dynamo/aiconfigurator, ``genai_perf_runner.py``
      (``--concurrency C --request-count 10C --warmup-request-count 2C``, input and output tokens
      with stddev 0, ``ignore_eos``) and ``bench_serving_runner.py`` (``--num-prompts 10C
      --random-range-ratio 1``, no warm-up by default): fixed lengths. That these runners took
      those campaigns is inferred; the sample does not say."""
    first = row["silicon_data_source"].split(";")[0].strip()
    return INFERENCEX if first.startswith("db-dump/") or first in INFERENCEX_FILES else AIC_EVAL


def silicon_rows(sample: list[dict[str, str]]) -> tuple[list[dict[str, str]], Counter[str]]:
    """Every eligible sample row as two ``published_serving.csv``-shaped rows (its TTFT and its
    TPOT, in seconds), and the count of rows left out by reason."""
    out: list[dict[str, str]] = []
    left: Counter[str] = Counter()
    for r in sample:
        why = eligible(r)
        if why:
            left[why] += 1
            continue
        version = r["backend_version"] or "not stated"
        note = (
            f"silicon sample row {r['id']} ({r['silicon_data_source']}): {r['backend']} {version}, "
            f"{r['model_path']}, GEMM {r['gemm_quant_mode'] or 'bf16'}, TP{r['tp_size']}, "
            f"{r['isl']}/{r['osl']}, concurrency {r['batch_size']}"
        )
        base = {
            "source_kind": WAVE,
            "source_url": SOURCE_URL,
            "source_title": "aiconfigurator silicon_sample.csv (aiconfigurator-core 0.12.0 wheel)",
            "retrieved": "2026-12-02",
            "engine": ENGINES[r["backend"]],
            "engine_version": version,
            "model": MODELS[r["model_path"]],
            "precision_weights": PRECISION[r["gemm_quant_mode"]],
            "precision_kv": kv_dtype(r),
            "fp8_scales": fp8_scales(r),
            "device": SYSTEMS[r["system"]],
            "num_gpus": r["tp_size"],
            "tp": r["tp_size"],
            "pp": "1",
            "ep": "",
            "workload": "batch_size concurrent requests, fixed ISL/OSL",
            "campaign": f"{r['silicon_data_source'].split(';')[0].strip()} ({r['backend']})",
            "isl": r["isl"],
            "osl": r["osl"],
            "concurrency": r["batch_size"],
            "request_rate": "",
            "num_requests": "",
            "unit": "s",
            "notes": note,
            "subset": "silicon",
        }
        cl = client(r)
        base["client"] = cl.text
        base["requests_per_client"], base["length_range_ratio"] = str(cl.per_client), repr(cl.range_ratio)
        base.update(engine_settings(r))
        if cl is INFERENCEX:  # replayed as its documented client (the others as waves: load_check)
            base["source_kind"] = CLIENT
            base["workload"] = (
                f"batch_size clients sending back to back, lengths drawn on [{cl.range_ratio:g} L, L]"
            )
        for metric, col in (("ttft_mean_s", "silicon_ttft_ms"), ("tpot_mean_s", "silicon_tpot_ms")):
            out.append(
                {
                    **base,
                    "id": f"aicsil-{r['id']}-{metric.split('_')[0]}",
                    "metric": metric,
                    "value": repr(float(r[col]) / 1e3),
                }
            )
    return out, left


def _config(row: dict[str, str]) -> tuple[str, ...]:
    """A deployment: engine, version, model, GPU, dtype and TP (its runs differ in ISL/OSL and load)."""
    return tuple(row[k] for k in ("engine", "engine_version", "model", "device", "precision_weights", "tp"))


def campaign(row: dict[str, str]) -> str:
    """The measurement campaign a run came from: the first field of its ``silicon_data_source``
    (a data dump or a source file) and its engine; a campaign is taken to have run one load
    generator."""
    return row["campaign"]


def not_waves(lines: list[Any]) -> dict[str, tuple[int, int]]:
    """Campaigns whose runs cannot have been loaded as they are replayed (one wave each, or the
    benchmark client): in more than half of their runs the measured TTFT lies below the
    ``bound`` replay's (the replay's queue of prefills at the roofline, which no engine beats; a
    single run below it can be noise). Per such campaign: (runs below the replay's roofline
    TTFT, runs)."""
    seen: dict[str, list[bool]] = {}
    for ln in lines:
        b = ln.values.get("bound")
        if ln.excluded or b is None or sa.metric_group(ln.row["metric"]) != "TTFT":
            continue
        seen.setdefault(campaign(ln.row), []).append(ln.measured < b)
    return {k: (sum(v), len(v)) for k, v in seen.items() if 2 * sum(v) > len(v)}


def judge_ttft(lines: list[Any], bad: dict[str, tuple[int, int]]) -> list[Any]:
    """TTFT lines of the campaigns ``bad`` (:func:`not_waves`) names are left out of the medians,
    with the reason: the sample does not say how those runs were loaded, and TTFT depends on it.
    A campaign replayed as its client's steady state (:func:`sourced_lines`) was judged on one
    wave's roofline, and that replay explains its TPOT, not its TTFT (the load check shows both)."""
    out = []
    for ln in lines:
        k = campaign(ln.row)
        if k in bad and not ln.excluded and sa.metric_group(ln.row["metric"]) == "TTFT":
            below, n = bad[k]
            replayed = sa._fmt(ln.values.get("simulated"), "s")
            if ln.row.get("source_kind") == STEADY:
                why = (
                    f"not one wave: {below} of its campaign's {n} runs have a measured TTFT below one wave's "
                    f"roofline TTFT; replayed as its client's loop in the steady state (this row: {replayed}), "
                    "which gives its TPOT (kept) but not its TTFT: how the clients' sends lined up is not "
                    "stated, and TTFT depends on it"
                )
            else:
                why = (
                    f"not loaded as replayed: {below} of its campaign's {n} runs have a measured TTFT "
                    f"below the replay's roofline TTFT (this row: replayed {replayed}); "
                    "the sample does not say how they were loaded, and TTFT depends on it (TPOT is kept)"
                )
            ln = dataclasses.replace(ln, excluded=why)
        out.append(ln)
    return out


def sourced_lines(
    rows: list[dict[str, str]], modes: tuple[str, ...], jobs: int = 1, progress: Any = None
) -> tuple[list[Any], dict[str, tuple[int, int]]]:
    """``--protocol sourced``: the lines, and the campaigns whose TTFT is not compared.

    InferenceX's campaigns replay as their documented client (:data:`INFERENCEX`). The others
    (the gap-analysis campaigns, :data:`AIC_EVAL`'s runners, inferred) first replay their TTFT
    as one wave at the roofline: a campaign in which most measured TTFTs undercut that
    (:func:`not_waves`) was not one wave per run, and replays as its client's closed loop in the
    steady state (:data:`STEADY`: the first sends spread over one cycle, the first and last round
    not read; the unread first round stands in for genai-perf's ``--warmup-request-count`` 2C
    requests, sent before its 10C read ones, and genai-perf does read its drain). In
    that state each request's decode window holds about ``C - 1`` other requests' prefills
    (every other client sends once per cycle), where one wave's holds those still queued behind
    it, about ``C / 2``: the TPOT such runs measure grows as ``C x ISL / OSL`` above one wave's,
    the signature of the steady state. Their TTFT stays out of the medians (:func:`judge_ttft`);
    so does that of any InferenceX campaign whose TTFTs undercut its client's roofline."""
    wave_ttft = [r for r in rows if r["source_kind"] == WAVE and sa.metric_group(r["metric"]) == "TTFT"]
    bad = not_waves(evaluate(wave_ttft, ("bound",), jobs)) if wave_ttft else {}
    rows = [
        {**r, "source_kind": STEADY} if r["source_kind"] == WAVE and campaign(r) in bad else r for r in rows
    ]
    lines = evaluate(rows, modes, jobs, progress=progress)
    if "bound" in modes:
        bad = {**not_waves([ln for ln in lines if ln.row["source_kind"] == CLIENT]), **bad}
    return judge_ttft(lines, bad), bad


@dataclasses.dataclass(frozen=True)
class LoadCheck:
    """:func:`load_check`'s result: the Markdown tables, and per client (and ``all``) the run
    count, the medians of |error| (fractions) and the runs below the client's roofline TTFT."""

    table: str  #: one row per run
    summary: str  #: one row per client and one for every run
    runs: dict[str, int]
    #: client -> ``tpot_wave``, ``tpot_client``, ``tpot_steady``, ``ttft_wave``, ``ttft_client``,
    #: ``ttft_steady``
    medians: dict[str, dict[str, float]]
    below_roofline: dict[str, int]


def _check_picks(rows: list[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, str]]]:
    """One run per deployment (engine, version, model, GPU, dtype, TP): its TPOT and TTFT rows at
    the deployment's median concurrency (ties: the lower concurrency, then the id)."""
    picks = []
    for dep in sorted({_config(r) for r in rows}):
        runs = sorted(
            (r for r in rows if _config(r) == dep and r["metric"] == "tpot_mean_s"),
            key=lambda r: (int(r["concurrency"]), r["id"]),
        )
        r = runs[(len(runs) - 1) // 2]
        t = next(x for x in rows if x["id"] == r["id"][: -len("tpot")] + "ttft")
        picks.append((r, t))
    return picks


def _label(row: dict[str, str]) -> str:
    """The short name of the row's client (:class:`Client`)."""
    return next(c.label for c in (INFERENCEX, AIC_EVAL) if c.text == row["client"])


def _check_one(pick: tuple[dict[str, str], dict[str, str]]) -> tuple[dict[str, float], float, float]:
    """One run of the load check: its six ``simulated`` replays (one wave, the client from a
    burst, the client's steady state), the client replay's roofline TTFT and the seconds it took."""
    r, t = pick
    start = time.perf_counter()
    kinds = {"wave": WAVE, "client": CLIENT, "steady": STEADY}
    vals = {
        f"{metric}_{how}": sa.run_row({**row, "source_kind": kind}, "simulated")
        for metric, row in (("tpot", r), ("ttft", t))
        for how, kind in kinds.items()
    }
    roof = sa.run_row({**t, "source_kind": CLIENT}, "bound")
    return vals, roof, time.perf_counter() - start


def load_check(rows: list[dict[str, str]], progress: Any = None, jobs: int = 1) -> LoadCheck:
    """How much the load changes TPOT and TTFT, and whether the benchmark client explains the
    misses: one run per deployment (:func:`_check_picks`) replayed (``simulated``) as one wave,
    as the client :func:`client` names (its requests from a burst, every one read) and as that
    client's loop in the steady state (:data:`STEADY`), with the client replay's roofline TTFT
    beside it (a measured TTFT below that is a run the client
    replay cannot be, unless its admission queued requests the engine did not). Medians per
    client and over every run; ``jobs`` processes replay the runs side by side."""
    picks = _check_picks(rows)
    results: Any
    if jobs == 1:
        results = map(_check_one, picks)  # lazily: progress as each run ends
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_check_one, picks))
    out = [
        "| deployment | ISL/OSL, concurrency | measured TPOT | wave | error | client | error | steady | error "
        "| measured TTFT | wave | error | client | error | steady | error | client roofline TTFT |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    hows = ("wave", "client", "steady")
    keys = tuple(f"{m}_{h}" for m in ("tpot", "ttft") for h in hows)
    errs: dict[str, dict[str, list[float]]] = {}
    below: Counter[str] = Counter()
    for i, ((r, t), (vals, roof, took)) in enumerate(zip(picks, results, strict=True)):
        m, mt = float(r["value"]), float(t["value"])
        for group in (_label(r), "all"):
            below[group] += mt < roof
            e = errs.setdefault(group, {k: [] for k in keys})
            for k, v in vals.items():
                e[k].append(v / (m if k.startswith("tpot") else mt) - 1)
        if progress:
            progress(f"[{i + 1}/{len(picks)}] {r['id']}: {took:.1f} s")
        dep = _config(r)
        cells = [
            f"{' '.join(dep[:2])}, {dep[2]}, {dep[3]}, {dep[4] or 'bf16'}, TP{dep[5]}",
            f"{r['isl']}/{r['osl']}, {r['concurrency']}",
        ]
        for metric, meas in (("tpot", m), ("ttft", mt)):
            cells.append(sa._fmt(meas, "s"))
            for how in hows:
                v = vals[f"{metric}_{how}"]
                cells += [sa._fmt(v, "s"), sa._pct(v / meas - 1)]
        cells.append(sa._fmt(roof, "s") + (" (above the measured)" if mt < roof else ""))
        out.append("| " + " | ".join(cells) + " |")
    summ = [
        "| client | runs | TPOT: one wave | TPOT: the client | TPOT: steady state | TTFT: one wave "
        "| TTFT: the client | TTFT: steady state | measured TTFT below the client's roofline |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    medians: dict[str, dict[str, float]] = {}
    runs: dict[str, int] = {}
    for group in sorted(errs, key=lambda g: (g == "all", g)):
        e = errs[group]
        medians[group] = {k: statistics.median(abs(x) for x in e[k]) for k in keys}
        runs[group] = len(e["tpot_wave"])
        cells = ["every run" if group == "all" else group, str(runs[group])]
        cells += [f"{100 * medians[group][k]:.1f} % / {100 * statistics.median(e[k]):+.1f} %" for k in keys]
        cells.append(f"{below[group]} of {runs[group]}")
        summ.append("| " + " | ".join(cells) + " |")
    return LoadCheck("\n".join(out), "\n".join(summ), runs, medians, dict(below))


def by_group(lines: list[Any], key: Any) -> str:
    """Median |error| of ``predicted`` and ``simulated`` per group (``key(row)``) and metric."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for ln in lines:
        if ln.excluded:
            continue
        groups.setdefault((key(ln.row), sa.metric_group(ln.row["metric"])), []).append(ln)
    out = [
        "| group | metric | rows | predicted: median / signed median | simulated: median / signed median |",
        "|---|---|---|---|---|",
    ]
    for (g, m), used in sorted(groups.items()):
        cells = [g, m, str(len(used))]
        for mode in ("predicted", "simulated"):
            errs = [e for ln in used if (e := ln.err(mode)) is not None]
            if not errs:
                cells.append("-")
                continue
            cells.append(
                f"{100 * statistics.median(abs(e) for e in errs):.1f} % / {100 * statistics.median(errs):+.1f} %"
            )
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _load_text(protocol: str, lines: list[Any], bad: dict[str, tuple[int, int]]) -> str:
    """The document's paragraph on how the runs were loaded and which TTFTs are compared."""
    n = sum(1 for ln in lines if ln.row["metric"] == "tpot_mean_s")
    camps = {campaign(ln.row) for ln in lines}
    n_out = sum(1 for ln in lines if ln.excluded and ln.row["metric"] == "ttft_mean_s")
    judged = (
        f"In {len(bad)} of the {len(camps)} campaigns (a data dump or source file, per engine) more than half "
        "the runs have a measured TTFT below their replay's roofline TTFT, which no engine beats, so those runs "
        "were loaded otherwise (or the replay's admission queued requests the engine did not): their TTFT "
        f"({n_out} of {n} runs) is not compared, their TPOT is. The campaigns "
        "whose TTFT is compared: " + "; ".join(f"`{c}`" for c in sorted(camps - set(bad))) + "."
    )
    if protocol == "loop":
        return (
            "Every run as its client's closed loop in the steady state: `batch_size` clients, "
            f"{AIC_EVAL.per_client} requests each (InferenceX's campaigns: {INFERENCEX.per_client}), the first "
            "sends spread over one cycle, the first and last round not read."
        )
    if protocol == "wave":
        return "Each run's `batch_size` requests are sent together and every one is read. " + judged
    clients = Counter(_label(ln.row) for ln in lines if ln.row["metric"] == "tpot_mean_s")
    kinds = Counter(ln.row["source_kind"] for ln in lines if ln.row["metric"] == "tpot_mean_s")
    steady = sorted({campaign(ln.row) for ln in lines if ln.row["source_kind"] == STEADY})
    st_ttft = [ln for ln in lines if ln.row["source_kind"] == STEADY and ln.row["metric"] == "ttft_mean_s"]
    n_steady = sum(1 for ln in st_ttft if ln.excluded)
    st_err = [e for ln in st_ttft if (e := ln.err("simulated")) is not None]
    st_med = f"median {100 * statistics.median(st_err):+.1f} %" if st_err else "not run"
    judged = (
        f"The gap-analysis campaigns were first replayed as one wave at the roofline: in {len(steady)} of them "
        "more than half the runs have a measured TTFT below that replay's, which no engine beats, so their "
        f"runs were not one wave each. Those campaigns ({kinds[STEADY]} runs) are replayed as their client's "
        f"closed loop in the steady state (`simulate_steady_loop`: `C` clients, {AIC_EVAL.per_client} requests each, the first "
        "sends spread over one cycle, the first and last round not read, as genai-perf leaves its warm-up "
        "requests unread): there each request's decode window holds about `C - 1` other requests' "
        "prefills, where one wave's holds about `C / 2`, and these runs' TPOT exceeds one wave's by a "
        "term that grows as `C x ISL / OSL`, that steady state's signature (the load check below shows "
        f"it per deployment). That replay gives their TPOT, not their TTFT (`simulated` TTFT {st_med} "
        f"against the measured): their TTFT ({n_steady} runs) is not compared. Those campaigns: "
        + "; ".join(f"`{c}`" for c in steady)
        + ". "
    )
    other = set(bad) - set(steady)
    n_other = sum(
        1 for ln in lines if ln.excluded and ln.row["metric"] == "ttft_mean_s" and campaign(ln.row) in other
    )
    judged += (
        f"Of the other campaigns, {len(other)} have more than half their runs' measured TTFT below their "
        f"replay's roofline TTFT (their TTFT, {n_other} runs, not compared). The campaigns whose TTFT is "
        "compared: " + "; ".join(f"`{c}`" for c in sorted(camps - set(bad))) + "."
    )
    ix = INFERENCEX
    return (
        "The sample does not name its load generator. The runs of InferenceX's database (inferred from their "
        f"data source's layout and line-up: `client()`; {clients[ix.label]} runs) are replayed as the benchmark "
        f"client InferenceX documents: {ix.text} ({ix.warmup}), that is `C` clients (the run's `batch_size`) "
        f"sending back to back, `{ix.per_client} C` requests from a burst, each length uniform on "
        f"`[int({ix.range_ratio:g} L), L]`, every request read. The others ({clients[AIC_EVAL.label]} runs, "
        f"the AIConfigurator team's gap-analysis campaigns) are replayed as one wave of `batch_size` requests "
        f"sent together, every one read ({kinds[WAVE]} runs), or as their client's steady state (below). "
        "A TensorRT-LLM replay admits a request only when its prompt's and its "
        "output's KV blocks can be reserved (GUARANTEED_NO_EVICT); vLLM's and SGLang's client replays "
        "allocate blocks as tokens come, from vLLM's own pool (`gpu_memory_utilization` 0.9 of the device, "
        "16-token blocks), and preempt when they run out. InferenceX's engines keep an FP8 KV "
        f"cache, and its TensorRT-LLM runs {INFERENCEX_TRT_MAX_TOKENS:,} tokens per iteration with no chunked "
        "prefill and, at 1k/1k below TP 8, holds new prompts back to prefill them together "
        f"(`batch_wait_timeout_iters` {INFERENCEX_TRT_BATCH_WAIT['iters']}, `batch_wait_max_tokens_ratio` "
        f"{INFERENCEX_TRT_BATCH_WAIT['ratio']}), as its scripts set them (`kv_dtype()`, `engine_settings()`). "
        + judged
    )


def markdown(
    lines: list[Any],
    left: Counter[str],
    protocol: str,
    seconds: float,
    bad: dict[str, tuple[int, int]] | None = None,
    written: bool = False,
) -> str:
    """The generated document: how the rows were run, the medians overall, per engine and per
    deployment, what was left out, then every row."""
    n = sum(1 for ln in lines if ln.row["metric"] == "tpot_mean_s")
    bad = bad or {}
    how = "`benchmarks/silicon_accuracy.py --write`" if written else "`benchmarks/silicon_accuracy.py`"
    return "\n".join(
        [
            f"Generated by {how} ({n} measured runs, each a TTFT and a TPOT, {seconds:.0f} s). The runs are "
            "NVIDIA's measured serving deployments in the aiconfigurator-core wheel's "
            f"`systems/silicon_sample.csv` ([source]({SOURCE_URL})): the dense aggregated ones whose model, "
            "GPU and GEMM dtype this project has. Error = model / measured - 1. bound: roofline iterations; "
            "predicted: the engine's measured kernels (`Predictor.of(framework)`); simulated: plus the "
            "engine's default overheads (`EngineOverheads.for_framework`): vLLM's and TensorRT-LLM's CPU "
            "time per iteration and per sequence fitted to the TPOT of 12 of InferenceX's H200 runs each "
            "(`docs/overhead_fit.md`: those 24 runs are in this table too, so they are not held out here), "
            "the other terms assumed.",
            "",
            f"Load: **{protocol}** (`--protocol`). "
            + _load_text(protocol, lines, bad)
            + " Not stated by the sample and assumed: TTFT/TPOT are means; outside InferenceX's campaigns the "
            "KV cache is FP8 for TensorRT-LLM's FP8/NVFP4 runs (NVIDIA's checkpoints set it) and bf16 otherwise "
            "(the engines' `kv_cache_dtype=auto`); FP8 activation scales static for TensorRT-LLM and NVIDIA's checkpoints, "
            "dynamic otherwise; 8,192 tokens per iteration; `fp8_block` GEMMs priced as FP8.",
            "",
            "**Against the issue's targets** (median |error|; rows beyond 25 % counted):",
            "",
            sa.medians(lines),
            "",
            "**Per engine** (median |error| / median signed error: a negative TPOT error is a replay faster "
            "than the engine):",
            "",
            by_group(lines, lambda r: r["engine"]),
            "",
            "**Per deployment** (engine and version, model, GPU, GEMM dtype):",
            "",
            by_group(
                lines,
                lambda r: (
                    f"{r['engine']} {r['engine_version']}, {r['model']}, {r['device']}, "
                    f"{r['precision_weights'] or 'bf16'}"
                ),
            ),
            "",
            "Left out of the sample's rows: "
            + "; ".join(f"{k} ({why})" for why, k in left.most_common())
            + ".",
            "",
            sa.table(lines),
        ]
    )


def summary(lines: list[Any]) -> str:
    """The summary in docs/validation.md: the medians and a link to the document."""
    return "\n".join(
        [
            "NVIDIA's measured serving runs in the aiconfigurator wheel (`silicon_sample.csv`: dense aggregated "
            "deployments of TensorRT-LLM, vLLM and SGLang on H100, H200, B200 and GB200) replayed the same way; "
            "row by row in [silicon_accuracy.md](silicon_accuracy.md), generated by "
            "`benchmarks/silicon_accuracy.py --write`. The sample does not name its load generator: InferenceX's "
            "campaigns (inferred) are replayed as the benchmark client InferenceX documents, the others as one "
            "wave each or, where most of a campaign's measured TTFTs undercut one wave's roofline, as their "
            "client's closed loop in the steady state (TPOT compared, TTFT not); a campaign's TTFT is compared "
            "only where no more than half its runs' measured TTFTs undercut the replay's roofline:",
            "",
            sa.medians(lines),
            "",
            by_group(lines, lambda r: r["engine"]),
        ]
    )


def check_markdown(check: LoadCheck, seconds: float, written: bool = False) -> str:
    """The load check's section of the document (:func:`load_check`)."""
    how = "`benchmarks/silicon_accuracy.py --check" + (" --write`" if written else "`")
    clients = "; ".join(f"{c.label}: {c.text} ({c.warmup})" for c in (INFERENCEX, AIC_EVAL))
    return "\n".join(
        [
            f"Generated by {how} ({_runs(check.runs['all'])}, {seconds:.0f} s). The sample does not name its "
            "load generator; the benchmark clients its campaigns' sources suggest (`client()` in the script, "
            f"with the sources) are: {clients}. Each runs `C` clients (the run's `batch_size`) sending back to "
            f"back, `{INFERENCEX.per_client} C` requests from a burst, every one read. The table replays the "
            "InferenceX campaigns that way and the others as one wave or, where their TTFTs show they were "
            "not, as their client's loop in the steady state (the first sends spread over one cycle, the "
            "first and last round not read); this check replays one run per deployment (engine, version, "
            "model, GPU, dtype, TP) at its median concurrency, `simulated`, all three ways, whichever the "
            "table uses. A measured TTFT below the client replay's roofline TTFT is a run that was not "
            "loaded as that client from a burst, unless the replay's admission rule (above) queues requests "
            "the engine did not.",
            "",
            "Median |error| / median signed error, per client:",
            "",
            check.summary,
            "",
            check.table,
        ]
    )


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def check_summary(check: LoadCheck) -> str:
    """The summary lines in docs/validation.md for the load check: its per-client medians."""
    return "\n".join(
        [
            "Replayed as the benchmark clients their sources suggest (`C` clients, "
            f"`{INFERENCEX.per_client} C` requests from a burst, every one read, or that loop in its steady "
            "state), one run per deployment, `simulated` "
            "([the benchmark client](silicon_accuracy.md#the-benchmark-client)):",
            "",
            check.summary,
        ]
    )


def _evaluate_part(part: tuple[list[dict[str, str]], tuple[str, ...], bool]) -> list[Any]:
    rows, modes, show = part
    prog = (lambda s: print(s, file=sys.stderr)) if show else None
    return sa.evaluate(rows, modes, progress=prog, interval=False)


def evaluate(
    rows: list[dict[str, str]], modes: tuple[str, ...], jobs: int = 1, progress: Any = None
) -> list[Any]:
    """``serving_accuracy.evaluate`` over ``jobs`` processes, each a share of the deployments
    (a deployment's runs share its predictor and engine, so they stay together), the lines in
    the order one process gives them."""
    if jobs == 1:
        return sa.evaluate(rows, modes, progress=progress, interval=False)
    share = {d: i % jobs for i, d in enumerate(sorted({_config(r) for r in rows}))}
    parts = [([r for r in rows if share[_config(r)] == i], modes, progress is not None) for i in range(jobs)]
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        lines = [ln for part in pool.map(_evaluate_part, parts) for ln in part]
    order = {id(r): i for i, r in enumerate(sorted(rows, key=sa._rank))}
    pos = {r["id"]: order[id(r)] for r in rows}
    return sorted(lines, key=lambda ln: pos[ln.row["id"]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="only the first N deployments (smoke)")
    ap.add_argument("--modes", default=",".join(sa.MODES))
    ap.add_argument(
        "--protocol", choices=PROTOCOLS, default="sourced", help="the load (module doc; default %(default)s)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="processes replaying deployments side by side")
    ap.add_argument(
        "--check",
        action="store_true",
        help="only the load check: one run per deployment as one wave, as its benchmark client from a burst "
        "and as that client's steady state",
    )
    ap.add_argument(
        "--write",
        action="store_true",
        help="write docs/silicon_accuracy.md's section (the table, or with --check the load check) and "
        "the summary in docs/validation.md",
    )
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"--limit: {args.limit} deployments not allowed; allowed: a whole number >= 1")
    modes = tuple(m for m in args.modes.split(",") if m)
    for m in modes:
        if m not in sa.MODES:
            raise SystemExit(f"--modes: {m!r} not allowed; allowed: {', '.join(sa.MODES)}")
    if not 1 <= args.jobs <= 64:
        raise SystemExit(f"--jobs: {args.jobs} not allowed; allowed: a whole number in [1, 64]")
    if args.write and (args.limit is not None or modes != sa.MODES or args.protocol != "sourced"):
        raise SystemExit("--write writes the full table: drop --limit, --modes and --protocol")
    if args.check and (modes != sa.MODES or args.protocol != "sourced"):
        raise SystemExit(
            "--check replays its own three loads in the simulated mode: drop --modes and --protocol"
        )
    rows, left = silicon_rows(load_sample())
    if args.protocol != "sourced":
        rows = [{**r, "source_kind": WAVE if args.protocol == "wave" else STEADY} for r in rows]
    if args.limit is not None:
        keep = sorted({_config(r) for r in rows})[: args.limit]
        rows = [r for r in rows if _config(r) in keep]
    start = time.perf_counter()
    prog = (lambda s: print(s, file=sys.stderr)) if sys.stderr.isatty() else None
    if args.check:
        check = load_check(rows, progress=prog, jobs=args.jobs)
        text = check_markdown(check, time.perf_counter() - start, args.write)
        if args.write:
            sa.replace_section(DOC_PATH, CHECK_BEGIN, CHECK_END, text)
            sa.replace_section(VALIDATION_PATH, CHECK_SUMMARY_BEGIN, CHECK_SUMMARY_END, check_summary(check))
        print(text)
        return 0
    bad: dict[str, tuple[int, int]] = {}
    if args.protocol == "sourced":
        lines, bad = sourced_lines(rows, modes, args.jobs, progress=prog)
    else:
        lines = evaluate(rows, modes, args.jobs, progress=prog)
        if args.protocol == "wave" and "bound" in modes:
            bad = not_waves(lines)
            lines = judge_ttft(lines, bad)
    text = markdown(lines, left, args.protocol, time.perf_counter() - start, bad, args.write)
    if args.write:
        sa.replace_section(DOC_PATH, DOC_BEGIN, DOC_END, text)
        sa.replace_section(VALIDATION_PATH, SUMMARY_BEGIN, SUMMARY_END, summary(lines))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
