"""NVIDIA's measured serving runs (the aiconfigurator silicon sample) as replayable rows.

The ``aiconfigurator-core`` wheel that supplies the measured kernel corpus also ships
``aiconfigurator_core/systems/silicon_sample.csv``: end-to-end serving measurements (a TTFT and a
TPOT per run, in ms) that NVIDIA's AIConfigurator team took on real deployments, with their
provenance (data dump or source file, workflow run, container image). :func:`silicon_rows` turns
each eligible run into rows of the published table's shape (its TTFT and its TPOT, and where its
client sends fixed lengths its mean E2E, recovered exactly from the two: :func:`recovered_e2e_s`), stating
only what the sample and its campaigns' sources state: the benchmark client (:func:`client`), the
KV-cache dtype (:func:`kv_dtype`), the FP8 activation scales (:func:`fp8_scales`) and the engine
settings InferenceX's scripts set (:func:`engine_settings`); every other engine fact comes from the
profile the engine column names (:mod:`benchmarks.replay.rows`).
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections import Counter
from importlib import resources
from pathlib import Path

from costmodel.errors import CostModelError
from graphs.serving.engines import release_profile

__all__ = [
    "AIC_EVAL",
    "CLIENT",
    "ENGINES",
    "INFERENCEX",
    "INFERENCEX_FILES",
    "INFERENCEX_TRT_BATCH_WAIT",
    "INFERENCEX_TRT_MAX_TOKENS",
    "INFERENCEX_VLLM_PROFILE",
    "MODELS",
    "NO_LOAD",
    "PRECISION",
    "VLLM_SYNC_PROFILE",
    "SOURCE_URL",
    "STEADY",
    "SYSTEMS",
    "WAVE",
    "Client",
    "E2E_NOTE",
    "campaign",
    "client",
    "deployment_key",
    "eligible",
    "engine_settings",
    "fp8_scales",
    "kv_dtype",
    "load_sample",
    "recovered_e2e_s",
    "silicon_rows",
    "unstated_load",
]

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
#: the sample's backend -> the published table's engine column (which measured kernels price it)
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
#: gemm_quant_mode -> the published table's precision_weights ('' = the checkpoint's bf16)
PRECISION = {"": "", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
#: the published table's source kinds for the replays: one wave, the benchmark client from a burst,
#: that client's loop in its steady state
WAVE, CLIENT, STEADY = (
    "aiconfigurator_silicon",
    "aiconfigurator_silicon_client",
    "aiconfigurator_silicon_steady",
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


def unstated_load(row: dict[str, str]) -> str | None:
    """Why a run's load is not stated (None: it is), its rows listed but left out of the
    medians (the ``excluded_reason`` field, :func:`benchmarks.replay.rows.excluded`).

    A run's load is its ``silicon_concurrency`` where its source states one; elsewhere its
    ``batch_size``, except in the Dynamo deployments (a ``dynamo_version`` in the source): there
    a run states its concurrency apart from its ``batch_size`` (the engine's batch limit), and the
    two differ in 29 of the sample's 31 aggregated Dynamo runs that state it (a TP2 Qwen3-32B
    GB200 run: ``batch_size`` 144, 288 clients). A Dynamo run that states none (an empty ``c``
    field in its id) has no stated load (:data:`NO_LOAD`)."""
    if _source_field(row, "silicon_concurrency") is None and _source_field(row, "dynamo_version") is not None:
        return NO_LOAD
    return None


#: :func:`unstated_load`'s reason for a Dynamo deployment that states no concurrency
NO_LOAD = (
    "a Dynamo deployment that states no concurrency (no silicon_concurrency, an empty c field in its id): "
    "the sample's Dynamo runs that state one mostly differ from their batch_size, so batch_size is not its load"
)


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
#: the profile of the sample's vLLM 0.12.0 runs (synchronous scheduling: :func:`engine_settings`)
VLLM_SYNC_PROFILE = "vllm@0.12"
#: the profile of InferenceX's Llama-3.1-70B vLLM runs, whose version the sample does not state: its
#: workflow runs them in ``vllm/vllm-openai:v0.10.2`` (:func:`engine_settings`)
INFERENCEX_VLLM_PROFILE = "vllm@0.10"
#: InferenceX's TensorRT-LLM batch waiting at ISL/OSL 1024/1024 below TP 8 (:func:`engine_settings`)
INFERENCEX_TRT_BATCH_WAIT = {"iters": 20, "ratio": 0.9}


def engine_settings(row: dict[str, str]) -> dict[str, str]:
    """The engine a run's campaign states and the settings it overrides, as row fields for
    ``serving_accuracy`` (``engine_profile``, ``engine_max_tokens``, ``engine_batch_wait_iters``,
    ``engine_batch_wait_ratio``, ``engine_prefix_caching``; absent: the engine column's profile and its defaults,
    :mod:`graphs.serving.engines`). InferenceX's Llama-3.1-70B TensorRT-LLM scripts
    (``benchmarks/70b_fp8_h200_trt_slurm.sh``, ``70b_fp8_b200_trt_slurm.sh``,
    ``70b_fp4_b200_trt_slurm.sh``; SemiAnalysisAI/InferenceX at a267b4bd and 73ef9225) launch
    ``trtllm-serve`` (the ``trtllm`` profile: chunked prefill off, its default) with
    ``--max_num_tokens 16384`` (the versions at 73ef9225 pass ``$MAX_MODEL_LEN`` instead, 2,048
    or 9,216), and for ISL = OSL = 1024 below TP 8 write ``batch_wait_max_tokens_ratio: 0.9`` and
    ``batch_wait_timeout_iters: 20`` into the engine's options (their comment: "will improve the
    performance, by default they are all zeros"): new prompts wait up to 20 iterations to be
    prefilled together (:class:`graphs.serving.sim.engine.EngineConfig`). Its vLLM scripts pass
    ``max-num-batched-tokens: 8192`` with chunked prefill, the ``vllm`` profile's defaults,
    ``async-scheduling: true`` (``70b_fp8_h200_slurm.sh``), which ``vllm@1``'s fitted CPU terms
    assume, and ``no-enable-prefix-caching: true`` (every one of its vLLM scripts: the
    ``engine_prefix_caching`` override; V1 caches prefixes by default). Its Llama-3.1-70B vLLM
    runs (no version in the sample) name ``vllm@0.10`` (:data:`INFERENCEX_VLLM_PROFILE`): the
    workflow's image for them is ``vllm/vllm-openai:v0.10.2`` (``.github/configs/master.yaml`` at
    78f6b8d2, ``.github/workflows/70b-tmpl.yml`` at 07e6e8a2), whose admission (first chunk) and
    memory rule (NCCL inside the profiled non-torch memory) predate ``vllm@1``'s; its CPU terms are
    ``vllm@1``'s, fitted to these runs. The sample's vLLM 0.12.0
    runs (launch arguments not stated; INFERRED without ``--async-scheduling``, off by default
    before v0.14.0, which aiconfigurator's own vLLM 0.12.0 launch template, its generator's
    ``backend_templates/vllm/cli_args.0.12.0.j2``, does not pass) name ``vllm@0.12``
    (:data:`VLLM_SYNC_PROFILE`), whose CPU time is not hidden behind the GPU's step. A vLLM or
    SGLang run whose stated release a non-default profile describes
    (:func:`graphs.serving.engines.release_profile`: ``vllm@0.11``, ``vllm@0.12``, ``vllm@0.20``
    for 0.14 to 0.20, before the KV pool left room for CUDA graphs, SGLang 0.5.1's
    ``mem_fraction_static`` rule in ``sglang@0.5.1``) names that profile, an InferenceX run's
    prefix caching off as well; any other keeps the default one."""
    ver = row.get("backend_version") or ""
    out: dict[str, str] = {}
    if row["backend"] in ("vllm", "sglang"):  # the sample's names are the profiles' names
        prof = release_profile(row["backend"], ver)
        if prof is not None and not prof.default_version:
            out["engine_profile"] = prof.ref
    if client(row) is INFERENCEX and row["backend"] == "vllm":
        out["engine_prefix_caching"] = "false"
        if not ver and row.get("model_path") == "meta-llama/Llama-3.1-70B":
            out["engine_profile"] = INFERENCEX_VLLM_PROFILE
        return out
    if row["backend"] in ("vllm", "sglang"):
        return out
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


#: why a fixed-length run's E2E row is a measured mean (:func:`recovered_e2e_s`), beside the row
E2E_NOTE = (
    "E2E recovered from the measured means, not modelled: the client sends fixed lengths with ignore_eos "
    "(genai-perf token stddev 0 / bench_serving range ratio 1), so every request's TPOT is "
    "(E2E - TTFT) / (OSL - 1) and mean E2E = mean TTFT + (OSL - 1) mean TPOT exactly"
)


def recovered_e2e_s(ttft_ms: float, tpot_ms: float, osl: int) -> float:
    r"""A fixed-length run's mean E2E (s) from its mean TTFT and mean TPOT (ms).

    The clients that send fixed lengths with ``ignore_eos`` (:data:`AIC_EVAL`) give every request
    ``OSL`` output tokens and report, per request, ``TPOT_i = (E2E_i - TTFT_i) / (OSL - 1)``
    (genai-perf's inter-token latency, bench_serving's TPOT). So ``E2E_i = TTFT_i + (OSL - 1)
    TPOT_i`` for every request, and averaging over the run's ``n`` requests (a linear identity,
    exact because ``OSL`` is the same for all):

    .. math::

        \overline{E2E} = \overline{TTFT} + (OSL - 1)\, \overline{TPOT}

    A measured mean, recovered; it holds for means only (not medians or percentiles), and not
    for clients whose lengths vary (InferenceX's ``--random-range-ratio 0.8``: the mean of a
    product is not the product of the means).

    Parameters
    ----------
    ttft_ms : float
        The run's mean TTFT (ms), > 0.
    tpot_ms : float
        The run's mean TPOT (ms), >= 0.
    osl : int
        Output tokens per request, >= 1 (with 1 there is no TPOT term).

    Returns
    -------
    float
        The mean E2E in seconds.

    >>> round(recovered_e2e_s(100.0, 10.0, 11), 9)  # 100 ms + 10 x 10 ms = 0.2 s
    0.2
    """
    ok = math.isfinite(ttft_ms) and math.isfinite(tpot_ms) and ttft_ms > 0 and tpot_ms >= 0
    if not ok or osl < 1:
        raise CostModelError(
            f"recovered E2E: TTFT {ttft_ms!r} ms, TPOT {tpot_ms!r} ms, OSL {osl!r} not allowed; "
            "allowed: TTFT > 0, TPOT >= 0 (finite) and OSL >= 1"
        )
    return (ttft_ms + (osl - 1) * tpot_ms) / 1e3


def silicon_rows(sample: list[dict[str, str]]) -> tuple[list[dict[str, str]], Counter[str]]:
    """Every eligible sample row as ``published_serving.csv``-shaped rows (its TTFT and its TPOT,
    in seconds, and for a client that sends fixed lengths its mean E2E, :func:`recovered_e2e_s`,
    with :data:`E2E_NOTE` in the row's ``notes`` and ``value_note``), and the count of rows left
    out by reason."""
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
            "attention_dp": "",
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
            # the run's measured TPOT beside either metric (a queue's reason reads it with the TTFT)
            "run_tpot_s": repr(float(r["silicon_tpot_ms"]) / 1e3),
            # listed, left out of the medians (benchmarks.replay.rows.excluded)
            "excluded_reason": unstated_load(r) or "",
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
        if cl.range_ratio == 1.0:  # fixed lengths: the mean E2E follows exactly (recovered_e2e_s)
            e2e = recovered_e2e_s(float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"]), int(r["osl"]))
            out.append(
                {
                    **base,
                    "id": f"aicsil-{r['id']}-e2e",
                    "metric": "e2e_mean_s",
                    "value": repr(e2e),
                    "notes": f"{note}; {E2E_NOTE}",
                    "value_note": E2E_NOTE,
                }
            )
    return out, left


def deployment_key(row: dict[str, str]) -> tuple[str, ...]:
    """A deployment: engine, version, model, GPU, dtype and TP (its runs differ in ISL/OSL and load)."""
    return tuple(row[k] for k in ("engine", "engine_version", "model", "device", "precision_weights", "tp"))


def campaign(row: dict[str, str]) -> str:
    """The measurement campaign a run came from: the first field of its ``silicon_data_source``
    (a data dump or a source file) and its engine; a campaign is taken to have run one load
    generator."""
    return row["campaign"]
