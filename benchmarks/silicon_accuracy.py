"""Served TTFT, TPOT and E2E against NVIDIA's own measured serving runs (the aiconfigurator silicon sample).

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
* the engine: a wave and a client's run on the profile of the engine the sample names
  (:mod:`graphs.serving.engines`: TensorRT-LLM's admits a request as its prompt's and output's KV
  blocks can be reserved, vLLM's and SGLang's allocate blocks as tokens come, each from its own
  pool rule), with only what InferenceX's scripts set (:func:`engine_settings`, :func:`kv_dtype`);
* block-scaled FP8 (``fp8_block``) GEMMs priced as FP8 with dynamic scales.

    python -m benchmarks.silicon_accuracy                    # every eligible run
    python -m benchmarks.silicon_accuracy --limit 4          # the first 4 deployments (smoke)
    python -m benchmarks.silicon_accuracy --write            # the page's section, its CSV, validation.md's summary
    python -m benchmarks.silicon_accuracy --check --write    # the load check's section and its CSV

The page (``docs/silicon_accuracy.md``) keeps the method and the medians; every row goes to its
CSV appendix (``docs/silicon_accuracy_rows.csv``, ``docs/silicon_load_check.csv``), which
``benchmarks/served_errors.py`` reads. On the terminal the row-by-row tables follow the section.
    python -m benchmarks.silicon_accuracy --write --jobs 2   # two processes side by side
    python -m benchmarks.silicon_accuracy --write --scheduler dask --workers 2   # on Dask
    python -m benchmarks.silicon_accuracy --check --scheduler dask --dask-address tcp://host:8786

Where the replays run: ``--jobs N`` replays the deployments in a pool of N local processes;
``--scheduler dask`` on a local Dask cluster of ``--workers`` worker processes (default 2) or on
the cluster whose scheduler is at ``--dask-address`` (its workers need this repository on their
path and the same install, the aiconfigurator-core wheel included); ``--jobs`` and Dask do not
mix. Either way a task is one deployment's rows (they share its predictor and engine), or with
``--check`` one run's six replays (:mod:`benchmarks.replay.parallel`), and the lines are those of
one process, in its order; the progress lines print as each task's result is taken.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import statistics
import sys
import time
from collections import Counter
from typing import Any

from benchmarks.replay import (
    MODES,
    excluded,
    fmt,
    medians,
    metric_group,
    pct,
    replace_section,
    run_row,
    table,
)
from benchmarks.replay import evaluate as evaluate_rows
from benchmarks.replay.pages import DOCS, strip_home, wrap, write_csv
from benchmarks.replay.parallel import add_options, executor_of, ordered
from benchmarks.replay.results import pct_cell, seconds_cell, write_results
from benchmarks.replay.silicon import (
    AIC_EVAL,
    CLIENT,
    INFERENCEX,
    INFERENCEX_TRT_BATCH_WAIT,
    INFERENCEX_TRT_MAX_TOKENS,
    SOURCE_URL,
    STEADY,
    WAVE,
    campaign,
    deployment_key,
    load_sample,
    silicon_rows,
)

__all__ = [
    "LoadCheck",
    "by_group",
    "check_markdown",
    "e2e_text",
    "evaluate",
    "judge_tpot",
    "judge_ttft",
    "load_check",
    "main",
    "markdown",
    "not_waves",
    "sourced_lines",
    "summary",
    "tpot_not_as_replayed",
]

DOC_PATH = DOCS / "silicon_accuracy.md"
#: the per-row results, the page's CSV appendix (:mod:`benchmarks.replay.results`)
ROWS_PATH = DOCS / "silicon_accuracy_rows.csv"
#: the load check's per-run table, its CSV appendix (:data:`CHECK_FIELDS`)
CHECK_PATH = DOCS / "silicon_load_check.csv"
#: where the summaries go (the README links to it; the README keeps the held-out and published-table ones)
VALIDATION_PATH = DOCS / "validation.md"
SUMMARY_BEGIN, SUMMARY_END = (
    "<!-- silicon-accuracy-summary:begin -->",
    "<!-- silicon-accuracy-summary:end -->",
)
DOC_BEGIN, DOC_END = "<!-- silicon-accuracy:begin -->", "<!-- silicon-accuracy:end -->"
#: --protocol: InferenceX's campaigns as their client, the others as waves or (where their TTFT
#: shows they were not) their client's steady state (:func:`sourced_lines`); or every run one way
PROTOCOLS = ("sourced", "wave", "loop")
CHECK_BEGIN, CHECK_END = "<!-- silicon-load-check:begin -->", "<!-- silicon-load-check:end -->"
CHECK_SUMMARY_BEGIN, CHECK_SUMMARY_END = (
    "<!-- silicon-load-check-summary:begin -->",
    "<!-- silicon-load-check-summary:end -->",
)


def _below_roofline(lines: list[Any], group: str) -> dict[str, tuple[int, int]]:
    """Campaigns in which more than half of the runs' measured ``group`` metric (TTFT or TPOT)
    lies below the ``bound`` replay's (a single run below it can be noise). Per such campaign:
    (runs below the replay's roofline, runs)."""
    seen: dict[str, list[bool]] = {}
    for ln in lines:
        b = ln.values.get("bound")
        if ln.excluded or b is None or metric_group(ln.row["metric"]) != group:
            continue
        seen.setdefault(campaign(ln.row), []).append(ln.measured < b)
    return {k: (sum(v), len(v)) for k, v in seen.items() if 2 * sum(v) > len(v)}


def not_waves(lines: list[Any]) -> dict[str, tuple[int, int]]:
    """Campaigns whose runs cannot have been loaded as they are replayed (one wave each, or the
    benchmark client): in more than half of their runs the measured TTFT lies below the
    ``bound`` replay's (the replay's queue of prefills at the roofline, which no engine beats; a
    single run below it can be noise). Per such campaign: (runs below the replay's roofline
    TTFT, runs)."""
    return _below_roofline(lines, "TTFT")


def tpot_not_as_replayed(lines: list[Any]) -> dict[str, tuple[int, int]]:
    """Campaigns whose TPOT cannot have been measured under the load they are replayed with: in
    more than half of their runs the measured TPOT lies below the ``bound`` replay's, whose every
    iteration carries the work the stated load puts in it (the decodes of the running requests
    and the prefill chunks of the prompts that arrive meanwhile: in a closed loop of ``C`` clients
    about ``(C - 1) x ISL / (OSL - 1)`` prompt tokens per step) with each kernel at its roofline,
    which no engine beats. TTFT's rule (:func:`not_waves`) applied to TPOT. Per such campaign:
    (runs below the replay's roofline TPOT, runs)."""
    return _below_roofline(lines, "TPOT")


def judge_tpot(lines: list[Any], bad: dict[str, tuple[int, int]]) -> list[Any]:
    """TPOT lines of the campaigns ``bad`` (:func:`tpot_not_as_replayed`) names are left out of the
    medians, with the reason: the load the sample states (and the replay runs) does not fit what
    those runs measured, and the sample does not say what else it was (fewer prompt tokens per
    step: a lighter load, or prompts the engine's prefix cache served); TPOT depends on it."""
    out = []
    for ln in lines:
        k = campaign(ln.row)
        if k in bad and not ln.excluded and metric_group(ln.row["metric"]) == "TPOT":
            below, n = bad[k]
            why = (
                f"not loaded as replayed: {below} of its campaign's {n} runs have a measured TPOT below the "
                f"replay's roofline TPOT (this row: roofline {fmt(ln.values.get('bound'), 's')}, replayed "
                f"{fmt(ln.values.get('simulated'), 's')}), whose steps carry the prefills the stated load puts "
                "in each decode window with every kernel at its bound; the runs had less prompt work per step "
                "than stated (a lighter load, or prompts the engine's prefix cache served), which the sample "
                "does not say, and TPOT depends on it"
            )
            ln = dataclasses.replace(ln, excluded=why)
        out.append(ln)
    return out


def judge_ttft(lines: list[Any], bad: dict[str, tuple[int, int]]) -> list[Any]:
    """TTFT lines of the campaigns ``bad`` (:func:`not_waves`) names are left out of the medians,
    with the reason: the sample does not say how those runs were loaded, and TTFT depends on it.
    A campaign replayed as its client's steady state (:func:`sourced_lines`) was judged on one
    wave's roofline, and that replay explains its TPOT, not its TTFT (the load check shows both).
    Their E2E lines go too: a run's E2E is its TTFT plus ``(OSL - 1)`` TPOT
    (:func:`benchmarks.replay.silicon.recovered_e2e_s`), so it holds the TTFT not compared."""
    out = []
    for ln in lines:
        k = campaign(ln.row)
        group = metric_group(ln.row["metric"])
        if k in bad and not ln.excluded and group in ("TTFT", "E2E"):
            below, n = bad[k]
            replayed = fmt(ln.values.get("simulated"), "s")
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
            if group == "E2E":
                why = f"E2E = TTFT + (OSL - 1) TPOT holds this run's TTFT, which is not compared: {why}"
            ln = dataclasses.replace(ln, excluded=why)
        out.append(ln)
    return out


def sourced_lines(
    rows: list[dict[str, str]],
    modes: tuple[str, ...],
    jobs: int = 1,
    progress: Any = None,
    executor: Any = None,
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
    so does that of any InferenceX campaign whose TTFTs undercut its client's roofline.
    ``jobs`` and ``executor``: where the replays run (:func:`evaluate`)."""
    wave_ttft = [r for r in rows if r["source_kind"] == WAVE and metric_group(r["metric"]) == "TTFT"]
    bad = not_waves(evaluate(wave_ttft, ("bound",), jobs, executor=executor)) if wave_ttft else {}
    rows = [
        {**r, "source_kind": STEADY} if r["source_kind"] == WAVE and campaign(r) in bad else r for r in rows
    ]
    lines = evaluate(rows, modes, jobs, progress=progress, executor=executor)
    if "bound" in modes:
        bad = {**not_waves([ln for ln in lines if ln.row["source_kind"] == CLIENT]), **bad}
        lines = judge_tpot(lines, tpot_not_as_replayed(lines))
    return judge_ttft(lines, bad), bad


@dataclasses.dataclass(frozen=True)
class LoadCheck:
    """:func:`load_check`'s result: the Markdown tables, and per client (and ``all``) the run
    count, the medians of |error| (fractions) and the runs below the client's roofline TTFT."""

    table: str  #: one row per run (Markdown, for the terminal)
    summary: str  #: one row per client and one for every run
    #: one row per run (:data:`CHECK_FIELDS`), the page's CSV appendix
    rows: tuple[dict[str, str], ...]
    runs: dict[str, int]
    #: client -> ``tpot_wave``, ``tpot_client``, ``tpot_steady``, ``ttft_wave``, ``ttft_client``,
    #: ``ttft_steady``
    medians: dict[str, dict[str, float]]
    below_roofline: dict[str, int]


def _check_picks(rows: list[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, str]]]:
    """One run per deployment (engine, version, model, GPU, dtype, TP): its TPOT and TTFT rows at
    the deployment's median concurrency (ties: the lower concurrency, then the id); runs the table
    leaves out (:func:`benchmarks.replay.excluded`: no stated load) are not picked."""
    rows = [r for r in rows if not excluded(r)]
    picks = []
    for dep in sorted({deployment_key(r) for r in rows}):
        runs = sorted(
            (r for r in rows if deployment_key(r) == dep and r["metric"] == "tpot_mean_s"),
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
        f"{metric}_{how}": run_row({**row, "source_kind": kind}, "simulated")
        for metric, row in (("tpot", r), ("ttft", t))
        for how, kind in kinds.items()
    }
    roof = run_row({**t, "source_kind": CLIENT}, "bound")
    return vals, roof, time.perf_counter() - start


def load_check(
    rows: list[dict[str, str]], progress: Any = None, jobs: int = 1, executor: Any = None
) -> LoadCheck:
    """How much the load changes TPOT and TTFT, and whether the benchmark client explains the
    misses: one run per deployment (:func:`_check_picks`) replayed (``simulated``) as one wave,
    as the client :func:`client` names (its requests from a burst, every one read) and as that
    client's loop in the steady state (:data:`STEADY`), with the client replay's roofline TTFT
    beside it (a measured TTFT below that is a run the client
    replay cannot be, unless its admission queued requests the engine did not). Medians per
    client and over every run; ``jobs`` processes replay the runs side by side, or ``executor``
    (a Dask client, :mod:`benchmarks.replay.parallel`) does, a task per run, taken in order."""
    picks = _check_picks(rows)
    if executor is None and jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            return load_check(rows, progress, executor=pool)
    results = ordered(executor, _check_one, [(p,) for p in picks])  # progress as each run is taken
    out = [
        "| deployment | ISL/OSL, concurrency | measured TPOT | wave | error | client | error | steady | error "
        "| measured TTFT | wave | error | client | error | steady | error | client roofline TTFT |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    hows = ("wave", "client", "steady")
    keys = tuple(f"{m}_{h}" for m in ("tpot", "ttft") for h in hows)
    errs: dict[str, dict[str, list[float]]] = {}
    csv_rows = []
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
        dep = deployment_key(r)
        cells = [
            f"{' '.join(dep[:2])}, {dep[2]}, {dep[3]}, {dep[4] or 'bf16'}, TP{dep[5]}",
            f"{r['isl']}/{r['osl']}, {r['concurrency']}",
        ]
        for metric, meas in (("tpot", m), ("ttft", mt)):
            cells.append(fmt(meas, "s"))
            for how in hows:
                v = vals[f"{metric}_{how}"]
                cells += [fmt(v, "s"), pct(v / meas - 1)]
        cells.append(fmt(roof, "s") + (ABOVE if mt < roof else ""))
        out.append("| " + " | ".join(cells) + " |")
        csv_rows.append(_check_row(cells))
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
    return LoadCheck("\n".join(out), "\n".join(summ), tuple(csv_rows), runs, medians, dict(below))


ABOVE = " (above the measured)"  #: a client roofline TTFT above the measured one, in the check's table
#: the load check's CSV appendix: per run, each metric's measured value and its three replays
CHECK_FIELDS = (
    "deployment",
    "isl_osl",
    "concurrency",
    *(
        f"{metric}_{col}"
        for metric in ("tpot", "ttft")
        for col in (
            "measured_s",
            *(f"{how}_{c}" for how in ("wave", "client", "steady") for c in ("s", "error_pct")),
        )
    ),
    "client_roofline_ttft_s",
    "roofline_above_measured",
)


def _check_row(cells: list[str]) -> dict[str, str]:
    """A row of the load check's table (its cells) as its CSV row (:data:`CHECK_FIELDS`)."""
    lengths, conc = cells[1].split(", ")
    out = [cells[0], lengths, conc]
    for block in (cells[2:9], cells[9:16]):  # measured, then (value, error) per load
        out.append(seconds_cell(block[0]))
        for value, err in zip(block[1::2], block[2::2], strict=True):
            out += [seconds_cell(value), pct_cell(err)]
    above = cells[16].endswith(ABOVE)
    out += [seconds_cell(cells[16].removesuffix(ABOVE)), "yes" if above else ""]
    return dict(zip(CHECK_FIELDS, out, strict=True))


def by_group(lines: list[Any], key: Any) -> str:
    """Median |error| of ``predicted`` and ``simulated`` per group (``key(row)``) and metric."""
    groups: dict[tuple[str, str], list[Any]] = {}
    for ln in lines:
        if ln.excluded:
            continue
        groups.setdefault((key(ln.row), metric_group(ln.row["metric"])), []).append(ln)
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
        "output's KV blocks can be reserved (GUARANTEED_NO_EVICT); vLLM's client replays allocate blocks as "
        "tokens come, from vLLM's own pool (`gpu_memory_utilization` 0.9 of the memory the driver reports, "
        "16-token blocks), and preempt when they run out; SGLang's from SGLang's (`mem_fraction_static` of that "
        "memory by GPU and TP for weights and KV, 1-token pages), admitting a request only while its prompt and "
        "output fit the pool less a share of the running outputs (`PrefillAdder`'s `new_token_ratio`), and "
        "retracting when it runs out. InferenceX's engines keep an FP8 KV "
        f"cache, and its TensorRT-LLM runs {INFERENCEX_TRT_MAX_TOKENS:,} tokens per iteration with no chunked "
        "prefill and, at 1k/1k below TP 8, holds new prompts back to prefill them together "
        f"(`batch_wait_timeout_iters` {INFERENCEX_TRT_BATCH_WAIT['iters']}, `batch_wait_max_tokens_ratio` "
        f"{INFERENCEX_TRT_BATCH_WAIT['ratio']}), as its scripts set them (`kv_dtype()`, `engine_settings()`). "
        + judged
    )


def _tpot_text(lines: list[Any]) -> str:
    """The document's sentence on the campaigns whose TPOT is not compared (:func:`judge_tpot`)."""
    out = [ln for ln in lines if ln.excluded and metric_group(ln.row["metric"]) == "TPOT"]
    out = [ln for ln in out if ln.excluded.startswith("not loaded as replayed")]
    camps = sorted({campaign(ln.row) for ln in out})
    if not camps:
        return " No campaign has more than half its runs' measured TPOT below its replay's roofline TPOT."
    return (
        f" In {len(camps)} campaign(s) more than half the runs have a measured TPOT below their replay's "
        "roofline TPOT (`tpot_not_as_replayed()`): under the stated load each step carries the prefills of "
        "the prompts that arrive in its decode window, and with every kernel at its roofline those steps "
        "already take longer than measured, so those runs had less prompt work per step than the sample "
        "states (a lighter load, or prompts the engine's prefix cache served: the sample does not say). "
        f"Their TPOT ({len(out)} runs) is not compared: " + "; ".join(f"`{c}`" for c in camps) + "."
    )


def markdown(
    lines: list[Any],
    left: Counter[str],
    protocol: str,
    seconds: float,
    bad: dict[str, tuple[int, int]] | None = None,
    written: bool = False,
) -> str:
    """The generated section: how the rows were run, the medians overall, per engine and per
    deployment, what was left out, and where every row is (:data:`ROWS_PATH`, :func:`rows_pointer`)."""
    n = sum(1 for ln in lines if ln.row["metric"] == "tpot_mean_s")
    bad = bad or {}
    how = "`python -m benchmarks.silicon_accuracy --write`" if written else "`benchmarks/silicon_accuracy.py`"
    return page(
        [
            f"Generated by {how} ({n} measured runs, each a TTFT and a TPOT, {seconds:.0f} s; {_e2e_count(lines)} "
            "of them an E2E). The runs are "
            "NVIDIA's measured serving deployments in the aiconfigurator-core wheel's "
            f"`systems/silicon_sample.csv` ([source]({SOURCE_URL})): the dense aggregated ones whose model, "
            "GPU and GEMM dtype this project has. Error = model / measured - 1. bound: roofline iterations; "
            "predicted: the engine's measured kernels (`Predictor.of(framework)`); simulated: plus the "
            "engine's default overheads (`EngineOverheads.for_framework`): vLLM's and TensorRT-LLM's CPU "
            "time per iteration and per sequence fitted to the TPOT of 12 of InferenceX's H200 runs each "
            "(`docs/overhead_fit.md`: those 24 runs are in this table too, so they are not held out here), "
            "the other terms assumed.",
            f"Load: **{protocol}** (`--protocol`). "
            + _load_text(protocol, lines, bad)
            + _tpot_text(lines)
            + " "
            + e2e_text(lines)
            + " Not stated by the sample and assumed: TTFT/TPOT are means; outside InferenceX's campaigns the "
            "KV cache is FP8 for TensorRT-LLM's FP8/NVFP4 runs (NVIDIA's checkpoints set it) and bf16 otherwise "
            "(the engines' `kv_cache_dtype=auto`); FP8 activation scales static for TensorRT-LLM and NVIDIA's checkpoints, "
            "dynamic otherwise; 8,192 tokens per iteration; `fp8_block` GEMMs priced as FP8.",
            "**Against the issue's targets** (median |error|; rows beyond 25 % counted):",
            medians(lines),
            "**Per engine** (median |error| / median signed error: a negative TPOT error is a replay faster "
            "than the engine):",
            by_group(lines, lambda r: r["engine"]),
            "**Per deployment** (engine and version, model, GPU, GEMM dtype):",
            by_group(
                lines,
                lambda r: (
                    f"{r['engine']} {r['engine_version']}, {r['model']}, {r['device']}, "
                    f"{r['precision_weights'] or 'bf16'}"
                ),
            ),
            "Left out of the sample's rows: "
            + "; ".join(f"{k} ({why})" for why, k in left.most_common())
            + ".",
            rows_pointer(len(lines)),
        ]
    )


def _e2e_count(lines: list[Any]) -> int:
    return sum(1 for ln in lines if metric_group(ln.row["metric"]) == "E2E")


def e2e_text(lines: list[Any]) -> str:
    """The page's paragraph on the E2E rows: where they come from and which are compared.

    Parameters
    ----------
    lines : list of Line
        The replayed rows.

    Returns
    -------
    str
        How a fixed-length run's mean E2E is recovered (:func:`benchmarks.replay.silicon.recovered_e2e_s`),
        why the other runs have none, and how many E2E rows are left out with their TTFT.
    """
    n = _e2e_count(lines)
    out = sum(1 for ln in lines if ln.excluded and metric_group(ln.row["metric"]) == "E2E")
    return (
        f"E2E ({n} runs): the runs whose client sends fixed lengths with ignore_eos ({AIC_EVAL.label}: "
        "genai-perf with token stddev 0, bench_serving with range ratio 1) get an E2E row, their measured mean "
        "E2E recovered, not modelled: every request's TPOT is `(E2E - TTFT) / (OSL - 1)`, so the run's mean "
        "E2E is mean TTFT + `(OSL - 1)` x mean TPOT exactly (`recovered_e2e_s()`; for means only), beside the "
        "replay's own mean E2E. InferenceX's runs draw their lengths on `[0.8 L, L]`, where the mean of a "
        "product is not the product of the means: they get none. An E2E holds its run's TTFT, so it is "
        f"compared only where that TTFT is ({out} left out with it)."
    )


def page(blocks: list[str]) -> str:
    """Generated Markdown from its blocks.

    Parameters
    ----------
    blocks : list of str
        Paragraphs and tables (a block that starts with ``|``), in order.

    Returns
    -------
    str
        The blocks one blank line apart, every paragraph wrapped
        (:func:`benchmarks.replay.pages.wrap`), tables as they are, and no home-directory path
        (:func:`benchmarks.replay.pages.strip_home`).
    """
    return strip_home("\n\n".join(b if b.startswith("|") else wrap(b) for b in blocks))


def rows_pointer(n: int) -> str:
    """The paragraph that points to the per-row results (:data:`ROWS_PATH`) of ``n`` rows."""
    return (
        f"Row by row ({n} rows, a TTFT and a TPOT per run and the fixed-length runs' E2E): [{ROWS_PATH.name}]({ROWS_PATH.name}), written with "
        "this section (`benchmarks.replay.results`): the measured value, each mode's replay in seconds and its "
        "signed error in %, why a row is left out of the medians, and each row's notes (what its replay "
        "assumed, what its predicted kernels rest on, and the stated reason of a row beyond 25 %)."
    )


def check_pointer(n: int) -> str:
    """The paragraph that points to the load check's per-run results (:data:`CHECK_PATH`) of ``n`` runs."""
    return (
        f"Run by run ({_runs(n)}): [{CHECK_PATH.name}]({CHECK_PATH.name}), written with this section: per run "
        "its deployment, lengths and concurrency, and for TPOT and TTFT the measured value and each load's "
        "replay (one wave, the client from a burst, its steady state) in seconds with its signed error in %, "
        "then the client replay's roofline TTFT (`roofline_above_measured`: a run the client replay cannot be)."
    )


def summary(lines: list[Any]) -> str:
    """The summary in docs/validation.md: the medians and a link to the document."""
    return page(
        [
            SUMMARY_TEXT,
            medians(lines),
            by_group(lines, lambda r: r["engine"]),
        ]
    )


#: the summary's paragraph in docs/validation.md (:func:`summary`)
SUMMARY_TEXT = (
    "NVIDIA's measured serving runs in the aiconfigurator wheel (`silicon_sample.csv`: dense aggregated "
    "deployments of TensorRT-LLM, vLLM and SGLang on H100, H200, B200 and GB200) replayed the same way; "
    "the method and the medians in [silicon_accuracy.md](silicon_accuracy.md), row by row in "
    f"[{ROWS_PATH.name}]({ROWS_PATH.name}), generated by "
    "`python -m benchmarks.silicon_accuracy --write`. The sample does not name its load generator: InferenceX's "
    "campaigns (inferred) are replayed as the benchmark client InferenceX documents, the others as one "
    "wave each or, where most of a campaign's measured TTFTs undercut one wave's roofline, as their "
    "client's closed loop in the steady state (TPOT compared, TTFT not); a campaign's TTFT is compared "
    "only where no more than half its runs' measured TTFTs undercut the replay's roofline:"
)


def check_markdown(check: LoadCheck, seconds: float, written: bool = False) -> str:
    """The load check's section of the document (:func:`load_check`)."""
    how = "`python -m benchmarks.silicon_accuracy --check" + (" --write`" if written else "`")
    clients = "; ".join(f"{c.label}: {c.text} ({c.warmup})" for c in (INFERENCEX, AIC_EVAL))
    return page(
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
            "Median |error| / median signed error, per client:",
            check.summary,
            check_pointer(check.runs["all"]),
        ]
    )


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def check_summary(check: LoadCheck) -> str:
    """The summary lines in docs/validation.md for the load check: its per-client medians."""
    return page(
        [
            "Replayed as the benchmark clients their sources suggest (`C` clients, "
            f"`{INFERENCEX.per_client} C` requests from a burst, every one read, or that loop in its steady "
            "state), one run per deployment, `simulated` "
            "([the benchmark client](silicon_accuracy.md#the-benchmark-client)):",
            check.summary,
        ]
    )


def evaluate(
    rows: list[dict[str, str]],
    modes: tuple[str, ...],
    jobs: int = 1,
    progress: Any = None,
    executor: Any = None,
) -> list[Any]:
    """``serving_accuracy.evaluate`` (:func:`benchmarks.replay.evaluate`, no interval) in this
    process, over ``jobs`` local processes or on ``executor`` (a Dask client,
    :mod:`benchmarks.replay.parallel`): a task per deployment (a deployment's runs share its
    predictor and engine, so they stay together), the lines those of one process, in its order."""
    if executor is None and jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            return evaluate(rows, modes, progress=progress, executor=pool)
    return evaluate_rows(
        rows, modes, progress=progress, interval=False, executor=executor, group=deployment_key
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="only the first N deployments (smoke)")
    ap.add_argument(
        "--only",
        default=None,
        help="comma-separated substrings: only the deployments whose rows' ids contain one (a targeted check)",
    )
    ap.add_argument("--modes", default=",".join(MODES))
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
        help="write docs/silicon_accuracy.md's section and its CSV appendix (the rows, or with --check the "
        "load check's runs) and the summary in docs/validation.md",
    )
    add_options(ap, "the deployments' replays (not with --jobs)")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"--limit: {args.limit} deployments not allowed; allowed: a whole number >= 1")
    modes = tuple(m for m in args.modes.split(",") if m)
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: {m!r} not allowed; allowed: {', '.join(MODES)}")
    if not 1 <= args.jobs <= 64:
        raise SystemExit(f"--jobs: {args.jobs} not allowed; allowed: a whole number in [1, 64]")
    if args.write and (
        args.limit is not None or args.only is not None or modes != MODES or args.protocol != "sourced"
    ):
        raise SystemExit("--write writes the full table: drop --limit, --only, --modes and --protocol")
    if args.check and (modes != MODES or args.protocol != "sourced"):
        raise SystemExit(
            "--check replays its own three loads in the simulated mode: drop --modes and --protocol"
        )
    # a local Dask cluster starts while the sample loads
    with executor_of(args, args.jobs) as executor:
        return _run(args, modes, executor)


def _run(args: argparse.Namespace, modes: tuple[str, ...], executor: Any) -> int:
    """:func:`main` once its options are checked: the replays on ``executor`` (None: here)."""
    rows, left = silicon_rows(load_sample())
    if args.protocol != "sourced":
        rows = [{**r, "source_kind": WAVE if args.protocol == "wave" else STEADY} for r in rows]
    if args.limit is not None:
        keep = sorted({deployment_key(r) for r in rows})[: args.limit]
        rows = [r for r in rows if deployment_key(r) in keep]
    if args.only is not None:
        subs = [x for x in args.only.split(",") if x]
        rows = [r for r in rows if any(x in r["id"] for x in subs)]
        if not rows:
            raise SystemExit(f"--only: no replayed row's id contains any of {subs!r}")
    start = time.perf_counter()
    prog = (lambda s: print(s, file=sys.stderr)) if sys.stderr.isatty() else None
    if args.check:
        check = load_check(rows, progress=prog, executor=executor)
        text = check_markdown(check, time.perf_counter() - start, args.write)
        if args.write:
            replace_section(DOC_PATH, CHECK_BEGIN, CHECK_END, text)
            write_csv(CHECK_PATH, CHECK_FIELDS, check.rows)
            replace_section(VALIDATION_PATH, CHECK_SUMMARY_BEGIN, CHECK_SUMMARY_END, check_summary(check))
        print(text + "\n\n" + strip_home(check.table))
        return 0
    bad: dict[str, tuple[int, int]] = {}
    if args.protocol == "sourced":
        lines, bad = sourced_lines(rows, modes, progress=prog, executor=executor)
    else:
        lines = evaluate(rows, modes, progress=prog, executor=executor)
        if "bound" in modes:
            lines = judge_tpot(lines, tpot_not_as_replayed(lines))
        if args.protocol == "wave" and "bound" in modes:
            bad = not_waves(lines)
            lines = judge_ttft(lines, bad)
    text = markdown(lines, left, args.protocol, time.perf_counter() - start, bad, args.write)
    if args.write:
        replace_section(DOC_PATH, DOC_BEGIN, DOC_END, text)
        write_results(ROWS_PATH, lines)
        replace_section(VALIDATION_PATH, SUMMARY_BEGIN, SUMMARY_END, summary(lines))
    print(text + "\n\n" + strip_home(table(lines)))
    return 0


if __name__ == "__main__":
    # run as the importable module, not as __main__: a task's function (``_check_one``) then
    # pickles by its name for Dask's workers, as the other tasks (benchmarks.replay) do
    from benchmarks import silicon_accuracy

    raise SystemExit(silicon_accuracy.main())
