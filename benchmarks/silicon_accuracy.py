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

* the load: ``--protocol wave`` (default) sends each run's ``batch_size`` requests together
  and reads every one; ``--protocol loop`` runs a steady closed loop of ``batch_size``
  clients, 4 requests each, its middle rounds read. The sample does not say which. The SGLang
  Qwen3-32B campaign's TTFT grows with concurrency x ISL (about 9 s at 128 x 4,096 tokens on
  4 H100s) as a wave's queue of prefills does, which a steady loop's TTFT (one prefill and a
  chunk's wait) cannot. A campaign in which most runs' measured TTFT lies below a wave's
  roofline TTFT was not loaded as waves (:func:`not_waves`): its TTFT is not compared, its
  TPOT is, and :func:`sensitivity` shows how much a steady loop would change that TPOT;
* whether TTFT and TPOT are means (read as means, AIPerf's default statistic);
* the KV-cache dtype (:func:`kv_dtype`) and the FP8 activation scales (:func:`fp8_scales`);
* the engine's batch limits (TensorRT-LLM's defaults for every engine: 8,192 tokens per
  iteration; the wave's requests admitted as their KV blocks fit);
* block-scaled FP8 (``fp8_block``) GEMMs priced as FP8 with dynamic scales.

    python benchmarks/silicon_accuracy.py                    # every eligible run (~40 min)
    python benchmarks/silicon_accuracy.py --limit 4          # the first 4 deployments (smoke)
    python benchmarks/silicon_accuracy.py --write            # docs/silicon_accuracy.md + README summary
"""

from __future__ import annotations

import argparse
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
    "sensitivity",
    "main",
]

ROOT = Path(__file__).resolve().parent.parent
DOC_PATH = ROOT / "docs" / "silicon_accuracy.md"
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
    ``auto`` is the model's dtype: ``auto``."""
    quantised = row["gemm_quant_mode"] in ("fp8", "nvfp4")
    return "fp8" if row["backend"] == "trtllm" and quantised else "auto"


def fp8_scales(row: dict[str, str]) -> str:
    """How a run's FP8 GEMMs scale their activations: ``static`` (calibrated per-tensor scales)
    for TensorRT-LLM's and NVIDIA's ModelOpt checkpoints; ``dynamic`` for block-scaled FP8
    (``fp8_block``) and for vLLM's and SGLang's on-line FP8 quantisation of a bf16 checkpoint."""
    static = row["gemm_quant_mode"] == "fp8" and (
        row["backend"] == "trtllm" or row["model_path"].startswith("nvidia/")
    )
    return "static" if static else "dynamic"


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
            "source_kind": "aiconfigurator_silicon",
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
    """Campaigns whose runs cannot have been one wave each: in more than half of their runs the
    measured TTFT lies below the ``bound`` replay's (a wave's queue of prefills at the roofline,
    which no engine beats; a single run below it can be noise). Per such campaign: (runs below
    the wave's roofline TTFT, runs)."""
    seen: dict[str, list[bool]] = {}
    for ln in lines:
        b = ln.values.get("bound")
        if ln.excluded or b is None or sa.metric_group(ln.row["metric"]) != "TTFT":
            continue
        seen.setdefault(campaign(ln.row), []).append(ln.measured < b)
    return {k: (sum(v), len(v)) for k, v in seen.items() if 2 * sum(v) > len(v)}


def judge_ttft(lines: list[Any], bad: dict[str, tuple[int, int]]) -> list[Any]:
    """TTFT lines of the campaigns ``bad`` (:func:`not_waves`) names are left out of the medians,
    with the reason: the sample does not say how those runs were loaded, and TTFT depends on it."""
    out = []
    for ln in lines:
        k = campaign(ln.row)
        if k in bad and not ln.excluded and sa.metric_group(ln.row["metric"]) == "TTFT":
            below, n = bad[k]
            ln = dataclasses.replace(
                ln,
                excluded=f"not one wave: {below} of its campaign's {n} runs have a measured TTFT below a "
                f"wave's roofline TTFT (this row: replayed {sa._fmt(ln.values.get('simulated'), 's')}); the "
                "sample does not say how they were loaded, and TTFT depends on it (TPOT is kept)",
            )
        out.append(ln)
    return out


def sensitivity(rows: list[dict[str, str]], bad: dict[str, tuple[int, int]]) -> str:
    """How much TPOT depends on the load the sample does not state: one deployment per family
    (engine, version, model, GPU, dtype) of the campaigns ``bad`` (:func:`not_waves`) names,
    the family's TPs taken in turn, its run at the median concurrency replayed (``simulated``)
    as one wave and as a steady closed loop (TTFT beside it: the loop's against the measured)."""
    deps = sorted({_config(r) for r in rows if campaign(r) in bad})
    families: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for d in deps:
        families.setdefault(d[:5], []).append(d)
    picks = [ds[i % len(ds)] for i, ds in enumerate(families.values())]
    if not picks:
        return ""
    out = [
        "| deployment | ISL/OSL, concurrency | measured TPOT | one wave | error | steady loop | error "
        "| measured TTFT | steady loop | error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    errs: dict[str, list[float]] = {"wave": [], "loop": [], "ttft": []}
    for dep in picks:
        runs = sorted(
            (r for r in rows if _config(r) == dep and r["metric"] == "tpot_mean_s"),
            key=lambda r: (int(r["concurrency"]), r["id"]),
        )
        r = runs[len(runs) // 2]
        t = next(x for x in rows if x["id"] == r["id"][: -len("tpot")] + "ttft")
        loop_kind = {"source_kind": "aiconfigurator_silicon_loop"}
        m, mt = float(r["value"]), float(t["value"])
        wave = sa.run_row(r, "simulated")
        loop = sa.run_row({**r, **loop_kind}, "simulated")
        loop_t = sa.run_row({**t, **loop_kind}, "simulated")
        errs["wave"].append(abs(wave / m - 1))
        errs["loop"].append(abs(loop / m - 1))
        errs["ttft"].append(abs(loop_t / mt - 1))
        out.append(
            f"| {' '.join(dep[:2])}, {dep[2]}, {dep[3]}, {dep[4] or 'bf16'}, TP{dep[5]} | {r['isl']}/{r['osl']}, "
            f"{r['concurrency']} | {sa._fmt(m, 's')} | {sa._fmt(wave, 's')} | {sa._pct(wave / m - 1)} "
            f"| {sa._fmt(loop, 's')} | {sa._pct(loop / m - 1)} | {sa._fmt(mt, 's')} | {sa._fmt(loop_t, 's')} "
            f"| {sa._pct(loop_t / mt - 1)} |"
        )
    out.append(
        f"| median abs. error ({len(picks)} runs) | | | | {100 * statistics.median(errs['wave']):.1f} % | "
        f"| {100 * statistics.median(errs['loop']):.1f} % | | | {100 * statistics.median(errs['ttft']):.1f} % |"
    )
    return "\n".join(out)


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


def markdown(
    lines: list[Any],
    left: Counter[str],
    protocol: str,
    seconds: float,
    sens: str = "",
    bad: dict[str, tuple[int, int]] | None = None,
    written: bool = False,
) -> str:
    """The generated document: how the rows were run, the medians overall, per engine and per
    deployment, what was left out, then every row."""
    n = sum(1 for ln in lines if ln.row["metric"] == "tpot_mean_s")
    camps = {campaign(ln.row) for ln in lines}
    bad = bad or {}
    n_out = sum(1 for ln in lines if ln.excluded and ln.row["metric"] == "ttft_mean_s")
    how = "`benchmarks/silicon_accuracy.py --write`" if written else "`benchmarks/silicon_accuracy.py`"
    return "\n".join(
        [
            f"Generated by {how} ({n} measured runs, each a TTFT and a TPOT, {seconds:.0f} s). The runs are "
            "NVIDIA's measured serving deployments in the aiconfigurator-core wheel's "
            f"`systems/silicon_sample.csv` ([source]({SOURCE_URL})): the dense aggregated ones whose model, "
            "GPU and GEMM dtype this project has. Error = model / measured - 1. bound: roofline iterations; "
            "predicted: the engine's measured kernels (`Predictor.of(framework)`); simulated: plus the "
            "engine's default overheads (`EngineOverheads.for_framework`, assumed).",
            "",
            f"Load: **{protocol}** (`--protocol`). "
            + (
                "Each run's `batch_size` requests are sent together and every one is read. The sample does not "
                f"state its load generator. In {len(bad)} of the {len(camps)} campaigns (a data dump or source "
                "file, per engine) more than half the runs have a measured TTFT below a wave's roofline TTFT, "
                f"which no engine beats, so those runs were loaded otherwise: their TTFT ({n_out} of {n} runs) "
                "is not compared. TTFT depends on the load far more than TPOT does; their TPOT is kept, replayed "
                "as a wave, and the check below shows how much a steady loop would change it. The campaigns "
                "consistent with one wave: " + "; ".join(f"`{c}`" for c in sorted(camps - set(bad))) + "."
                if protocol == "wave"
                else "A steady closed loop of `batch_size` clients, 4 requests each, its middle rounds read."
            )
            + " Not stated by the sample and assumed: TTFT/TPOT are means; the KV cache is FP8 for "
            "TensorRT-LLM's FP8/NVFP4 runs (NVIDIA's checkpoints set it) and bf16 otherwise (the engines' "
            "`kv_cache_dtype=auto`); FP8 activation scales static for TensorRT-LLM and NVIDIA's checkpoints, "
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
            *(
                [
                    "**How much TPOT depends on the unstated load** (one deployment per family of the campaigns "
                    "that were not one wave, its TPs in turn, at its median concurrency; `simulated`, replayed "
                    "both ways, and the steady loop's TTFT against the measured one):",
                    "",
                    sens,
                    "",
                ]
                if sens
                else []
            ),
            "Left out of the sample's rows: "
            + "; ".join(f"{k} ({why})" for why, k in left.most_common())
            + ".",
            "",
            sa.table(lines),
        ]
    )


def summary(lines: list[Any]) -> str:
    """The README's short section: the medians and a link to the document."""
    return "\n".join(
        [
            "NVIDIA's measured serving runs in the aiconfigurator wheel (`silicon_sample.csv`: dense aggregated "
            "deployments of TensorRT-LLM, vLLM and SGLang on H100, H200, B200 and GB200) replayed the same way; "
            "row by row in [docs/silicon_accuracy.md](docs/silicon_accuracy.md), generated by "
            "`benchmarks/silicon_accuracy.py --write`. Their load generator is not published: TPOT is the "
            "comparison they support best, and TTFT is compared only where the runs were one wave each:",
            "",
            sa.medians(lines),
            "",
            by_group(lines, lambda r: r["engine"]),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="only the first N deployments (smoke)")
    ap.add_argument("--modes", default=",".join(sa.MODES))
    ap.add_argument("--protocol", choices=("wave", "loop"), default="wave", help="the load (module doc)")
    ap.add_argument("--no-sensitivity", action="store_true", help="skip the wave-vs-loop check")
    ap.add_argument(
        "--write", action="store_true", help="write docs/silicon_accuracy.md and the README summary"
    )
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"--limit: {args.limit} deployments not allowed; allowed: a whole number >= 1")
    modes = tuple(m for m in args.modes.split(",") if m)
    for m in modes:
        if m not in sa.MODES:
            raise SystemExit(f"--modes: {m!r} not allowed; allowed: {', '.join(sa.MODES)}")
    if args.write and (
        args.limit is not None or modes != sa.MODES or args.protocol != "wave" or args.no_sensitivity
    ):
        raise SystemExit(
            "--write writes the full table: drop --limit, --modes, --protocol and --no-sensitivity"
        )
    rows, left = silicon_rows(load_sample())
    if args.protocol == "loop":  # serving_accuracy replays other source kinds with a concurrency as loops
        rows = [{**r, "source_kind": "aiconfigurator_silicon_loop"} for r in rows]
    if args.limit is not None:
        keep = sorted({_config(r) for r in rows})[: args.limit]
        rows = [r for r in rows if _config(r) in keep]
    start = time.perf_counter()
    prog = (lambda s: print(s, file=sys.stderr)) if sys.stderr.isatty() else None
    lines = sa.evaluate(rows, modes, progress=prog, interval=False)
    sens = ""
    bad: dict[str, tuple[int, int]] = {}
    if args.protocol == "wave" and "bound" in modes:
        bad = not_waves(lines)
        lines = judge_ttft(lines, bad)
        if "simulated" in modes and not args.no_sensitivity:
            sens = sensitivity(rows, bad)
    text = markdown(lines, left, args.protocol, time.perf_counter() - start, sens, bad, args.write)
    if args.write:
        sa.replace_section(DOC_PATH, DOC_BEGIN, DOC_END, text)
        sa.replace_section(sa.README_PATH, SUMMARY_BEGIN, SUMMARY_END, summary(lines))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
