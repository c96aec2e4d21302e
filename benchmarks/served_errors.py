"""The served-error table and the held-out split: what `simulate --predict` says of its own error.

Reads the per-row results the two validation tables generated (``docs/serving_accuracy.md``:
``serving_accuracy.py --write``; ``docs/silicon_accuracy_rows.csv``: ``silicon_accuracy.py --write``):
every compared row's simulated value against its measured one (a row a table excludes, with
its reason, stays out). Each row belongs to a deployment (:func:`deployment`: engine, version,
model, device, dtype, TP and GPUs; its rows differ in lengths and load).

* ``benchmarks/data/heldout.toml`` fixes the held-out deployments. It was chosen once, before
  the calibration below was first fitted (``--choose``: a deployment is held out when the first
  32 bits of the SHA-256 of its key, over 2^32, fall below 0.30; the file then lists them, so a
  later change of rows or rule cannot move them silently). No default, overhead fit or
  calibration of this project is fitted to a held-out row (the overhead fit uses InferenceX's
  Llama-3.1-70B FP8 H200 runs: ``docs/overhead_fit.md``; those deployments are forced into the
  calibration side when the split is chosen).
* The other rows calibrate :mod:`graphs.serving.sim.served_errors`, each metric by the method
  ``benchmarks/interval_selection.py`` chose for it by leave-one-deployment-out cross-validation
  on these rows alone (``benchmarks/data/interval_choice.json``; :mod:`graphs.serving.sim.conformal`);
  ``--write`` writes ``graphs/serving/sim/data/served_errors.json``.
* The kernels' leave-one-generation-out errors (:func:`generation_errors`: every measured
  device of one architecture generation and memory kind predicted from fits on the other
  generations' devices, ``costmodel.measured.heldout.generation_heldout``; refits, minutes of
  CPU) ship in the same table, beside the leave-one-device-out ones read from
  ``docs/accuracy.md`` (:func:`device_errors`).
* The held-out rows then test it: per metric, the median |error| against the targets, and how
  many measured values the calibrated P10-P90 holds (inside / below / above, median width),
  written into ``docs/serving_accuracy.md`` (``--write``).

    python -m benchmarks.served_errors            # the held-out report to stdout
    python -m benchmarks.served_errors --write    # also the shipped table and the docs section
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
import sys
import tomllib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.replay import FRAMEWORK, load_rows, metric_group, replace_section, simulated_errors
from benchmarks.replay.results import simulated_queue_shares, simulated_ttft_shares
from benchmarks.replay.tables import SHARE_COLUMN
from costmodel.errors import CostModelError
from costmodel.outfiles import atomic_write
from graphs.serving.sim.conformal import Method, Residual, fit_groups
from graphs.serving.sim.served_errors import (
    ALPHA,
    COMPOSED,
    DATA_FILE,
    METRIC_GROUPS,
    MIN_ROWS,
    DeviceError,
    ErrorGroup,
    GenerationError,
    ServedErrors,
    memory_kind,
    parse,
    regime,
)
from models.resolver import resolve_model

ROOT = Path(__file__).resolve().parent.parent
HELDOUT_PATH = ROOT / "benchmarks" / "data" / "heldout.toml"
CHOICE_PATH = ROOT / "benchmarks" / "data" / "interval_choice.json"  #: interval_selection.py --write
SERVING_DOC = ROOT / "docs" / "serving_accuracy.md"
SILICON_ROWS = ROOT / "docs" / "silicon_accuracy_rows.csv"  #: its per-row results (benchmarks.replay.results)
KERNEL_DOC = ROOT / "docs" / "accuracy.md"
TABLE_PATH = ROOT / "graphs" / "serving" / "sim" / Path(*DATA_FILE)
BEGIN, END = "<!-- served-errors:begin -->", "<!-- served-errors:end -->"
GEN_BEGIN, GEN_END = "<!-- generation-split:begin -->", "<!-- generation-split:end -->"
README_PATH = ROOT / "README.md"
SUMMARY_BEGIN, SUMMARY_END = "<!-- served-errors-summary:begin -->", "<!-- served-errors-summary:end -->"
#: the held-out split's targets (the served-numbers issue): median |error| per metric (%), the
#: calibrated P10-P90's coverage (at least, %) and median width (at most, %)
TARGETS = {"throughput": 8.0, "TPOT": 8.0, "TTFT": 15.0, "E2E": 8.0}
#: issue 42's target for MoE rows (median abs. error, %): throughput, TPOT and E2E "within 10 %";
#: TTFT has none of its own
MOE_TARGETS = {"throughput": 10.0, "TPOT": 10.0, "E2E": 10.0}
#: fewer held-out MoE deployments than this: the MoE target is not judged (their median is one or
#: two deployments' error, not the model's on MoE deployments)
MIN_MOE_DEPLOYMENTS = 3
COVERAGE_TARGET, WIDTH_TARGET = 80.0, 30.0
HOLD_FRACTION = 0.30  #: the share of deployments --choose holds out (by hash)
#: deployments the overhead defaults were fitted to (docs/overhead_fit.md): never held out
FITTED_TO = (
    ("vllm", "llama-3.1-70b", "h200-sxm", "fp8"),
    ("tensorrt-llm", "llama-3.1-70b", "h200-sxm", "fp8"),
)

#: a per-row table line: | [id](url) | metric | measured | bound | err | predicted | err | simulated | err | ...
_ROW = re.compile(r"^\| \[(?P<id>[^\]]+)\]\([^)]*\) \| (?P<metric>[a-z0-9_]+) \| (?P<cells>.*)$")
_PCT = re.compile(r"^([+-]?\d+(?:\.\d+)?) %$")


#: a held-out error line of docs/accuracy.md: | family | device | split | rows | calibrated |
#: calibrated + shape residuals (MAPE / median / P90) | ...
_KERNEL_ROW = re.compile(
    r"^\| (?P<family>[a-z_]+) \| (?P<device>[a-z0-9-]+) \| device \| (?P<rows>\d+) \| [^|]+ \| "
    r"(?P<mape>[\d.]+) / (?P<median>[\d.]+) / (?P<p90>[\d.]+) \|"
)


def device_errors() -> list[DeviceError]:
    """Each measured device's held-out kernel error when it was left out
    (``docs/accuracy.md``, ``python -m benchmarks.measured_accuracy --write``: the ``device`` split's
    "calibrated + shape residuals" median), with its memory kind from the catalog."""
    from costmodel.hardware import get_device

    out = []
    for line in KERNEL_DOC.read_text(encoding="utf-8").splitlines():
        m = _KERNEL_ROW.match(line)
        if m:
            kind = memory_kind(get_device(m["device"]).description)
            out.append(DeviceError(m["family"], m["device"], kind, int(m["rows"]), float(m["median"])))
    if not out:
        raise SystemExit(f"{KERNEL_DOC}: no device-split held-out rows found")
    return out


def generation_errors(
    families: tuple[str, ...] | None = None, progress: bool = True
) -> list[GenerationError]:
    """Per family, each measured generation's leave-one-generation-out kernel error, one entry per
    (generation, memory kind): its devices' rows, pooled, predicted from fits on the other
    generations' devices (``generation_heldout``), scored as the device split is shipped
    ("calibrated + shape residuals"): median and P90 |error| (%), rounded as docs/accuracy.md
    rounds them."""
    from costmodel.hardware import get_device
    from costmodel.measured.corpus import FAMILIES, systems_with_data
    from costmodel.measured.heldout import generation_heldout, generation_of

    out = []
    for fam in FAMILIES if families is None else families:
        every = systems_with_data(fam)
        parts: dict[tuple[str, str], list[str]] = defaultdict(list)
        for d in every:
            parts[generation_of(d), memory_kind(get_device(d).description)].append(d)
        for (gen, kind), devs in sorted(parts.items()):
            if progress:
                print(
                    f"  generation split: {fam} {gen} {kind} ({', '.join(devs)})", file=sys.stderr, flush=True
                )
            r = generation_heldout(fam, devs, every)
            if r is not None:
                c = r.corrected
                out.append(
                    GenerationError(
                        fam, gen, kind, r.devices, r.rows, round(c["median"], 1), round(c["p90"], 1)
                    )
                )
    return out


def generation_table(table: ServedErrors) -> str:
    """The generated section of ``docs/accuracy.md``: each left-out generation's median and P90
    error beside the median of its devices' own leave-one-device-out medians."""
    lines = [
        "Generated by `python -m benchmarks.served_errors --write` (shipped in "
        "`graphs/serving/sim/data/served_errors.json`).",
        "",
        "| family | generation | memory | devices left out | rows | median | P90 | device split median |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for g in table.generations:
        own = [d.median_pct for d in table.devices if d.family == g.family and d.device in g.devices]
        dev = f"{statistics.median(own):.1f} %" if own else "n/a"
        lines.append(
            f"| {g.family} | {g.generation} | {g.kind} | {', '.join(g.devices)} | {g.rows} "
            f"| {g.median_pct:.1f} % | {g.p90_pct:.1f} % | {dev} |"
        )
    return "\n".join(lines)


def deployment(row: dict[str, str]) -> str:
    """A row's deployment: engine, version, model, device, dtype, TP and GPUs, as one key."""
    return "|".join(
        row.get(k, "")
        for k in ("engine", "engine_version", "model", "device", "precision_weights", "tp", "num_gpus")
    )


def table_errors(doc: Path) -> dict[str, float]:
    """``{row id: simulated error}`` of the compared rows of a generated per-row table (the
    ``simulated`` column's signed error ``model / measured - 1``; rows whose notes say
    ``excluded`` or whose cell is empty are left out)."""
    out: dict[str, float] = {}
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        cells = [c.strip() for c in m["cells"].split(" | ")]
        if len(cells) < 7 or any(c.startswith("excluded") for c in cells[7:]):
            continue
        e = _PCT.match(cells[6])
        if e:
            out[m["id"]] = float(e[1]) / 100
    return out


def table_queue_shares(doc: Path) -> dict[str, float]:
    """``{row id: simulated queue share}`` of a generated per-row table: the cell under its
    :data:`~benchmarks.replay.tables.SHARE_COLUMN` header (``-``: not run, left out); empty when
    the table predates that column."""
    col: int | None = None
    out: dict[str, float] = {}
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("| row | metric |"):
            head = [c.strip() for c in line.strip("|").split("|")]
            col = head.index(SHARE_COLUMN) - 2 if SHARE_COLUMN in head else None
            continue
        m = _ROW.match(line)
        if m and col is not None:
            cells = [c.strip() for c in m["cells"].split(" | ")]
            if len(cells) > col and cells[col] != "-":
                out[m["id"]] = float(cells[col])
    return out


def missing_queue_shares(rows: list[dict[str, Any]]) -> str | None:
    """None when every row carries its simulated queue share, else the one-line reason a
    regime-conditioned calibration cannot run on them (the tables predate the column)."""
    lacking = [r for r in rows if r["queue_share"] is None]
    if not lacking:
        return None
    sets = sorted({r["set"] for r in lacking})
    return (
        f"{len(lacking)} of {len(rows)} compared rows ({', '.join(sets)}; first: {lacking[0]['id']}) carry no "
        f"simulated queue share: the regime-conditioned calibration needs the validation tables regenerated "
        f"with that column (python -m benchmarks.serving_accuracy --write, python -m benchmarks.silicon_accuracy --write)"
    )


def silicon_row_dicts() -> list[dict[str, str]]:
    """The silicon sample's rows as the accuracy table replays them."""
    from benchmarks.replay.silicon import load_sample, silicon_rows

    return silicon_rows(load_sample())[0]


def _moe(model: str, cache: dict[str, bool]) -> bool:
    if model not in cache:
        cache[model] = resolve_model(model).is_moe
    return cache[model]


def published_ttft_shares(rows: list[dict[str, str]], ids: set[str]) -> dict[str, float]:
    """The simulated TTFT share of E2E (``TTFT_hat / E2E_hat``) of the published E2E rows among
    ``ids``: the per-row table carries no TTFT row of their runs (vLLM's latency tests publish E2E
    alone), so each is replayed once in the ``simulated`` mode, as the table replayed it, and
    both means are read from that one run (seconds of CPU per row)."""
    from benchmarks.replay.run import row_workload, simulate_row

    out = {}
    for r in rows:
        if r["id"] in ids and metric_group(r["metric"]) == "E2E":
            run = simulate_row(row_workload(r), "simulated")
            out[r["id"]] = float(statistics.fmean(run.ttft) / statistics.fmean(run.e2e))
    return out


def residual_rows() -> list[dict[str, Any]]:
    """Every compared row of both tables: id, deployment, metric group, framework, device,
    dense/MoE, the simulated error, the simulated run's queue share of TTFT (None where the
    table predates that column) and, on an E2E row, its run's simulated TTFT share of E2E
    (:func:`published_ttft_shares`, :func:`~benchmarks.replay.results.simulated_ttft_shares`;
    None elsewhere)."""
    published, published_errors = load_rows(subset="core"), table_errors(SERVING_DOC)
    sets = (
        (
            "published",
            published,
            published_errors,
            table_queue_shares(SERVING_DOC),
            published_ttft_shares(published, set(published_errors)),
        ),
        (
            "silicon",
            silicon_row_dicts(),
            simulated_errors(SILICON_ROWS),
            simulated_queue_shares(SILICON_ROWS),
            simulated_ttft_shares(SILICON_ROWS),
        ),
    )
    moe: dict[str, bool] = {}
    out = []
    for name, rows, errs, shares, splits in sets:
        for r in rows:
            if r["id"] not in errs:
                continue
            out.append(
                {
                    "set": name,
                    "id": r["id"],
                    "deployment": f"{name}:{deployment(r)}",
                    "metric": metric_group(r["metric"]),
                    "framework": FRAMEWORK[r["engine"]],
                    "device": r["device"],
                    "moe": _moe(r["model"], moe),
                    "error": errs[r["id"]],
                    "queue_share": shares.get(r["id"]),
                    "ttft_share": splits.get(r["id"]),
                    "fitted_to": (r["engine"], r["model"], r["device"], r["precision_weights"]) in FITTED_TO,
                }
            )
    return out


def choose(rows: list[dict[str, Any]]) -> str:
    """The held-out file's text: the deployments whose key hashes below :data:`HOLD_FRACTION`
    (module doc), the overhead fit's own deployments never among them."""
    keys = sorted({r["deployment"] for r in rows if not r["fitted_to"]})
    held = [k for k in keys if int(hashlib.sha256(k.encode()).hexdigest()[:8], 16) / 2**32 < HOLD_FRACTION]
    lines = [
        "# Held-out deployments of the validation tables: fixed before the served-error calibration",
        "# was first fitted (benchmarks/served_errors.py --choose), never used to fit a default, an",
        f"# overhead or the calibration. Rule: first 32 bits of SHA-256(key) / 2^32 < {HOLD_FRACTION:.2f};",
        "# key = set:engine|version|model|device|dtype|tp|gpus.",
        'chosen = "2026-12-04"',
        f'rule = "sha256(key)[:8] / 2^32 < {HOLD_FRACTION:.2f}; the overhead fit\'s deployments excluded"',
        "deployments = [",
        *(f"    {json.dumps(k)}," for k in held),
        "]",
    ]
    return "\n".join(lines) + "\n"


def heldout() -> frozenset[str]:
    """The held-out deployments (``benchmarks/data/heldout.toml``)."""
    if not HELDOUT_PATH.is_file():
        raise CostModelError(f"no held-out split at {HELDOUT_PATH}: run with --choose once")
    d = tomllib.loads(HELDOUT_PATH.read_text(encoding="utf-8"))
    return frozenset(d["deployments"])


def chosen_names() -> dict[str, str]:
    """Each calibrated metric's method name, as ``interval_selection.py`` chose it (its choice
    file): a :class:`~graphs.serving.sim.conformal.Method`'s, or E2E's ``composed``."""
    if not CHOICE_PATH.is_file():
        raise CostModelError(
            f"no interval choice at {CHOICE_PATH}: run python -m benchmarks.interval_selection --write"
        )
    d = json.loads(CHOICE_PATH.read_text(encoding="utf-8"))
    return {str(m): str(name) for m, name in d["methods"].items()}


def chosen_methods() -> dict[str, Method]:
    """The metrics whose own groups are fitted, each with its chosen method (:func:`chosen_names`);
    a ``composed`` metric has none of its own (its band is its TTFT and TPOT groups')."""
    return {m: Method.named(name) for m, name in chosen_names().items() if name != COMPOSED}


def calibrate(rows: list[dict[str, Any]]) -> list[ErrorGroup]:
    """The groups :meth:`ServedErrors.like` looks up, from the calibration rows: each metric's
    rows fitted by its chosen method (:func:`chosen_methods`); a metric without one has none."""
    methods = chosen_methods()
    if any(method.regime for method in methods.values()) and (why := missing_queue_shares(rows)):
        raise CostModelError(why)
    res = [residual(r) for r in rows]
    groups = [
        g for m, method in methods.items() for g in fit_groups([r for r in res if r.metric == m], method)
    ]
    return sorted(groups, key=lambda g: g.label)


def residual(r: dict[str, Any]) -> Residual:
    """A compared row (:func:`residual_rows`) as a conformal residual."""
    return Residual(
        r["deployment"],
        r["metric"],
        r["framework"],
        r["device"],
        r["moe"],
        r["error"],
        r["queue_share"],
        r.get("ttft_share"),
    )


def support(rows: list[dict[str, Any]]) -> list[tuple[str, str, bool, int]]:
    """``(metric, framework, moe, deployments)`` of the calibration rows: how many deployments
    each engine and dense/MoE kind was validated on, per metric."""
    deps: dict[tuple[str, str, bool], set[str]] = defaultdict(set)
    for r in rows:
        deps[(r["metric"], r["framework"], r["moe"])].add(r["deployment"])
    return [(*k, len(v)) for k, v in sorted(deps.items())]


def coverage_rows(table: ServedErrors, held: list[dict[str, Any]]) -> list[str]:
    """One table line per metric: the held-out rows' errors against the targets, and how many
    measured values ``table``'s P10-P90 holds (inside / below / above, median width)."""
    out = []
    methods = dict(table.methods)
    for metric in METRIC_GROUPS:
        rows = [r for r in held if r["metric"] == metric]
        if not rows:
            continue
        n = len(rows)
        med = statistics.median(abs(r["error"]) for r in rows)
        target = TARGETS[metric]
        verdict = f"<= {target:.0f} % ({'meets' if 100 * med <= target else 'misses'})"
        deps = len({r["deployment"] for r in rows})
        if not table.covers(metric):
            out.append(
                f"| {metric} | - | {n} ({deps}) | {100 * med:.1f} % | {verdict} | not calibrated: fewer than "
                f"{MIN_ROWS} calibration rows | | | |"
            )
            continue
        inside = below = 0
        widths = []
        for r in rows:
            g, _ = table.like(
                metric, r["framework"], r["device"], r["moe"], r["queue_share"], r.get("ttft_share")
            )
            ratio = 1 / (1 + r["error"])  # y / y_hat
            if ratio < g.low:
                below += 1
            elif ratio <= g.high:
                inside += 1
            widths.append(g.high / g.low - 1)
        cov, width = 100 * inside / n, 100 * statistics.median(widths)
        out.append(
            f"| {metric} | {methods.get(metric, 'row/full')} | {n} ({deps}) | {100 * med:.1f} % | {verdict} "
            f"| {inside} ({cov:.0f} %: {'meets' if cov >= COVERAGE_TARGET else 'misses'} >= {COVERAGE_TARGET:.0f} %) "
            f"| {below} | {n - inside - below} "
            f"| {width:.1f} % ({'meets' if width <= WIDTH_TARGET else 'misses'} <= {WIDTH_TARGET:.0f} %) |"
        )
    return out


def kind_rows(held: list[dict[str, Any]]) -> list[str]:
    """One table line per metric: the held-out rows' median abs. error, dense and MoE apart, the
    MoE rows against :data:`MOE_TARGETS` (with how many of them are within it), judged only from
    :data:`MIN_MOE_DEPLOYMENTS` deployments.

    >>> rows = [{"metric": "TPOT", "moe": m, "error": e, "deployment": d}
    ...         for m, e, d in ((False, 0.05, "a"), (True, -0.12, "b"), (True, 0.04, "b"), (True, 0.09, "c"),
    ...                         (True, 0.02, "d"))]
    >>> [line for line in kind_rows(rows) if line.startswith("| TPOT")][0]
    '| TPOT | 1 (1) | 5.0 % | 4 (3) | 6.5 % | <= 10 % (meets): 3 of 4 within |'
    >>> [line for line in kind_rows(rows[:3]) if line.startswith("| TPOT")][0]
    '| TPOT | 1 (1) | 5.0 % | 2 (1) | 8.0 % | <= 10 % (1 deployment: too few to judge) |'
    """
    out = []
    for metric in METRIC_GROUPS:
        cells = [metric]
        for moe in (False, True):
            rows = [r for r in held if r["metric"] == metric and r["moe"] is moe]
            if not rows:
                cells += ["0", "-"]
                continue
            med = 100 * statistics.median(abs(r["error"]) for r in rows)
            cells += [f"{len(rows)} ({len({r['deployment'] for r in rows})})", f"{med:.1f} %"]
        target = MOE_TARGETS.get(metric)
        moe_rows = [r for r in held if r["metric"] == metric and r["moe"] is True]
        if target is None:
            verdict = "(no target)"
        elif not moe_rows:
            verdict = f"<= {target:.0f} % (no held-out MoE row)"
        elif (k := len({r["deployment"] for r in moe_rows})) < MIN_MOE_DEPLOYMENTS:
            verdict = f"<= {target:.0f} % ({k} deployment{'s' if k > 1 else ''}: too few to judge)"
        else:
            med = 100 * statistics.median(abs(r["error"]) for r in moe_rows)
            within = sum(100 * abs(r["error"]) <= target for r in moe_rows)
            verdict = f"<= {target:.0f} % ({'meets' if med <= target else 'misses'}): {within} of {len(moe_rows)} within"
        out.append("| " + " | ".join([*cells, verdict]) + " |")
    return out


def narrowest(ratios: list[float], coverage: float = 1 - ALPHA) -> float:
    """The width ``b / a - 1`` of the narrowest band ``[a, b]`` of ratios ``y / y_hat`` holding
    ``ceil(coverage n)`` of the ``n`` given: over the sorted ratios ``r_(1) <= ... <= r_(n)`` and
    ``k = ceil(coverage n)``, ``min_i r_(i+k-1) / r_(i) - 1``. It is fitted to the very rows it
    holds, so no band held to the same coverage on those rows is narrower.

    >>> round(narrowest([0.9, 1.0, 1.0, 1.1, 2.0]), 4)  # k = 4: [0.9, 1.1]
    0.2222
    >>> narrowest([1.25])
    0.0
    """
    r = sorted(ratios)
    k = math.ceil(round(coverage * len(r), 9))
    return min(r[i + k - 1] / r[i] - 1 for i in range(len(r) - k + 1))


#: :func:`floor_rows`' groupings: what a band may know of a row, from none of it to its deployment
FLOOR_KEYS = (
    ("one band a metric", lambda r: ()),
    (
        "one band a group (engine, device, dense/MoE, regime)",
        lambda r: (
            r["framework"],
            r["device"],
            r["moe"],
            r["queue_share"] is not None and regime(r["queue_share"]),
        ),
    ),
    ("one band a deployment", lambda r: (r["deployment"],)),
)


def floor_rows(rows: Sequence[dict[str, Any]], split: str) -> list[str]:
    """One table line per metric: the median width, over ``rows``, of the narrowest band holding
    80 % of each group's rows (:func:`narrowest`, fitted to those rows themselves), for each of
    :data:`FLOOR_KEYS`' groupings: how narrow a band keyed on what a method knows could be.

    >>> rows = [{"metric": "TPOT", "error": e, "deployment": d, "framework": "vllm", "device": "h100",
    ...          "moe": False, "queue_share": 0.1} for e, d in ((0.0, "a"), (0.0, "a"), (-0.5, "b"), (-0.5, "b"))]
    >>> [line for line in floor_rows(rows, "held out") if line.startswith("| TPOT")][0]
    '| TPOT | held out | 4 (2) | 100.0 % | 100.0 % | 0.0 % |'
    """
    out = []
    for metric in METRIC_GROUPS:
        these = [r for r in rows if r["metric"] == metric]
        if not these:
            continue
        cells = [metric, split, f"{len(these)} ({len({r['deployment'] for r in these})})"]
        for _, key in FLOOR_KEYS:
            groups: dict[Any, list[float]] = defaultdict(list)
            for r in these:
                groups[key(r)].append(1 / (1 + r["error"]))  # y / y_hat
            widths = [narrowest(g) for g in groups.values() for _ in g]  # each row its group's band
            cells.append(f"{100 * statistics.median(widths):.1f} %")
        out.append("| " + " | ".join(cells) + " |")
    return out


def _metric_floor_words(held: Sequence[dict[str, Any]], cal: Sequence[dict[str, Any]]) -> str:
    """The sentence saying which metrics no single band could hold to the width target (the first
    grouping of :data:`FLOOR_KEYS`, on both splits).

    >>> rows = [{"metric": "TTFT", "error": e} for e in (0.0, 0.0, -0.5, -0.5)]
    >>> _metric_floor_words(rows, rows)
    'One band a metric is wider than 30 % on both splits for TTFT: a band that knows nothing of the run cannot meet the width target there.'
    """
    wide = []
    for metric in METRIC_GROUPS:
        parts = [[1 / (1 + r["error"]) for r in rows if r["metric"] == metric] for rows in (held, cal)]
        if all(parts) and all(100 * narrowest(p) > WIDTH_TARGET for p in parts):
            wide.append(metric)
    if not wide:
        return f"One band a metric is within {WIDTH_TARGET:.0f} % on one split or both for every metric."
    return (
        f"One band a metric is wider than {WIDTH_TARGET:.0f} % on both splits for {', '.join(wide)}: a band "
        "that knows nothing of the run cannot meet the width target there."
    )


def baseline(cal: list[dict[str, Any]]) -> ServedErrors:
    """The calibration shipped before the selection: row-weighted split conformal along the
    ``full`` chain for every metric (``row/full``), on the same calibration rows."""
    method = Method.named("row/full")
    res = [residual(r) for r in cal]
    return ServedErrors(
        tuple(fit_groups(res, method)), "", "", methods=tuple((m, method.name) for m in METRIC_GROUPS)
    )


def source_of(row: dict[str, Any]) -> str:
    """A held-out row's source: the published CSV's id prefix (``gpustack``, ``trt014srv`` ...),
    or ``silicon`` for the silicon sample's rows.

    >>> source_of({"set": "published", "id": "gpustack-gpt-oss-20b-h100-tp1-base-128-4-tput"})
    'gpustack'
    >>> source_of({"set": "silicon", "id": "aicsil-x"})
    'silicon'
    """
    return "silicon" if row["set"] == "silicon" else str(row["id"]).split("-", 1)[0]


def source_rows(table: ServedErrors, held: list[dict[str, Any]]) -> list[str]:
    """One table line per (source, metric) of the held-out rows: rows (deployments), the median
    abs. error, the median signed error and how many measured values ``table``'s calibrated
    P10-P90 holds (:func:`coverage_rows`' test, source by source)."""
    out = []
    for src in sorted({source_of(r) for r in held}):
        for metric in METRIC_GROUPS:
            rows = [r for r in held if source_of(r) == src and r["metric"] == metric]
            if not rows:
                continue
            med = 100 * statistics.median(abs(r["error"]) for r in rows)
            signed = 100 * statistics.median(r["error"] for r in rows)
            deps = len({r["deployment"] for r in rows})
            held_in = "-"
            if table.covers(metric):
                inside = 0
                for r in rows:
                    g, _ = table.like(
                        metric, r["framework"], r["device"], r["moe"], r["queue_share"], r.get("ttft_share")
                    )
                    inside += g.low <= 1 / (1 + r["error"]) <= g.high
                held_in = f"{inside} ({100 * inside / len(rows):.0f} %)"
            moe = sum(r["moe"] for r in rows)
            out.append(
                f"| {src} | {metric} | {len(rows)} ({deps}) | {moe} | {med:.1f} % | {signed:+.1f} % | {held_in} |"
            )
    return out


def deployment_rows(held: list[dict[str, Any]]) -> list[str]:
    """One table line per held-out deployment: its rows and, per metric, the median signed error
    of its rows (simulated / measured - 1; ``-`` where it has none)."""
    out = []
    for dep in sorted({r["deployment"] for r in held}):
        rows = [r for r in held if r["deployment"] == dep]
        cells = []
        for metric in METRIC_GROUPS:
            errs = [r["error"] for r in rows if r["metric"] == metric]
            cells.append(f"{100 * statistics.median(errs):+.1f} % ({len(errs)})" if errs else "-")
        key = dep.replace(
            "|", "\\|"
        )  # a table cell: GitHub's Markdown reads an escaped bar in a code span as a bar
        out.append(f"| `{key}` | {'MoE' if rows[0]['moe'] else 'dense'} | " + " | ".join(cells) + " |")
    return out


def report(
    table: ServedErrors,
    held: list[dict[str, Any]],
    n_cal: int,
    n_dep: int,
    before: ServedErrors,
    cal: Sequence[dict[str, Any]] = (),
) -> str:
    """The generated section: the held-out rows' errors against the targets and the
    calibrated interval's coverage, then the same for the calibration before the selection, then
    how narrow a band could be on the held-out and calibration (``cal``) rows (:func:`floor_rows`)."""
    header = [
        "| metric | method | held-out rows (deployments) | median abs. error | target | inside calibrated P10-P90 "
        "| measured below it | measured above it | median width (P90 end / P10 end - 1) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    chosen = "; ".join(f"{m} {n}" for m, n in table.methods)
    return "\n".join(
        [
            f"Generated by `python -m benchmarks.served_errors --write` from the per-row results of this page and of "
            f"[silicon_accuracy.md](silicon_accuracy.md). The held-out split "
            f"([`benchmarks/data/heldout.toml`](../benchmarks/data/heldout.toml), {n_dep} deployments, fixed "
            f"before the calibration was fitted) is reported here alone; the other {n_cal} compared rows "
            f"calibrate the P10-P90 interval and the expected error `simulate --predict` prints "
            f"(`graphs.serving.sim.served_errors`: conformal on whole-simulation residuals, alpha {ALPHA}, each "
            f"metric by the method the leave-one-deployment-out cross-validation above chose on the calibration "
            f"rows: {chosen}). Coverage is counted on the conformal band alone (the silicon rows have no kernel "
            f"interval); `simulate --predict` prints the hull of it and the run's kernel interval, never narrower.",
            "",
            *header,
            *coverage_rows(table, held),
            "",
            "The same held-out rows, dense and MoE models apart (issue 42's target for MoE rows: throughput, "
            f"TPOT and E2E within 10 %, judged where {MIN_MOE_DEPLOYMENTS} or more held-out MoE deployments have "
            "rows of the metric):",
            "",
            "| metric | dense rows (deployments) | median abs. error | MoE rows (deployments) | median abs. error "
            "| MoE target |",
            "|---|---|---|---|---|---|",
            *kind_rows(held),
            "",
            "The same held-out rows by source (the published CSV's id prefix; `silicon`: NVIDIA's silicon sample). "
            "`gpustack` is a source added after the calibration, all of it held out: MoE deployments and a dense "
            "one (Qwen3-32B on an A100) nobody tuned the simulator to, mostly at their engines' defaults "
            "(`benchmarks/data/README.md` source 7). Signed error: "
            "simulated / measured - 1 (negative: the simulation is faster or, for throughput, lower).",
            "",
            "| source | metric | held-out rows (deployments) | of them MoE | median abs. error | median signed error "
            "| inside calibrated P10-P90 |",
            "|---|---|---|---|---|---|---|",
            *source_rows(table, held),
            "",
            "Each held-out deployment (its key: set, engine, version, model, device, weights, TP, GPUs), the median "
            "signed error of its rows per metric (rows in brackets):",
            "",
            "| deployment | model | " + " | ".join(METRIC_GROUPS) + " |",
            "|---|---|" + "---|" * len(METRIC_GROUPS),
            *deployment_rows(held),
            "",
            "The calibration before the selection (row-weighted split conformal per metric, framework, device "
            "and dense/MoE for every metric, `row/full`), fitted on the same calibration rows, on the same "
            "held-out rows:",
            "",
            *header,
            *coverage_rows(before, held),
            "",
            "How narrow a band can be: the narrowest band holding at least 80 % of the rows (`narrowest()`: "
            "`ceil(0.8 n)` of `n`, so all of a group of four or fewer), its "
            "median width over the rows, when one band serves every row of a metric, when each group of "
            "the finest keys a method here uses (engine, device, dense/MoE and the simulated run's regime) "
            "has its own, and when each deployment has its own. Each is fitted to the very rows it is "
            "judged on, so it is a floor, not a method: no band held to 80 % on those rows is narrower. "
            "A calibrated band learns a group's band from the group's other deployments, and those err "
            "by different amounts: it must hold their spread, where the floor of a group holds only its "
            f"rows here. {_metric_floor_words(held, cal)}",
            "",
            "| metric | split | rows (deployments) | one band a metric | one band a group | one band a deployment |",
            "|---|---|---|---|---|---|",
            *floor_rows(held, "held out"),
            *floor_rows(cal, "calibration"),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--choose",
        action="store_true",
        help="write benchmarks/data/heldout.toml (once: refused if it exists)",
    )
    ap.add_argument("--write", action="store_true", help="write the shipped table and the docs section")
    args = ap.parse_args(argv)
    rows = residual_rows()
    if args.choose:
        if HELDOUT_PATH.exists():
            raise SystemExit(f"{HELDOUT_PATH} exists: the split is fixed (delete it only to start over)")
        with atomic_write(HELDOUT_PATH, "held-out split") as f:
            f.write(choose(rows))
    out = heldout()
    cal = [r for r in rows if r["deployment"] not in out]
    held = [r for r in rows if r["deployment"] in out]
    leak = [r["id"] for r in held if r["fitted_to"]]
    if leak:
        raise SystemExit(f"the held-out split holds rows the overhead fit used: {leak[:3]}")
    if any(m.regime for m in chosen_methods().values()) and (why := missing_queue_shares(rows)):
        raise SystemExit(why)
    groups = calibrate(cal)
    text = json.dumps(
        {
            "source": f"{len(cal)} compared rows of docs/serving_accuracy.md and docs/silicon_accuracy.md "
            f"({len({r['deployment'] for r in cal})} deployments), the held-out split left out",
            "heldout": f"benchmarks/data/heldout.toml: {len(out)} deployments",
            "alpha": ALPHA,
            "min_rows": MIN_ROWS,
            "methods": chosen_names(),
            "support": [list(s) for s in support(cal)],
            "groups": [g.to_dict() for g in groups],
            "devices": [d.to_dict() for d in device_errors()],
            "generations": [g.to_dict() for g in generation_errors()],
        },
        indent=1,
        sort_keys=True,
    )
    table = parse(text)
    section = report(table, held, len(cal), len({r["deployment"] for r in held}), baseline(cal), cal)
    if args.write:
        TABLE_PATH.parent.mkdir(exist_ok=True)
        with atomic_write(TABLE_PATH, "served-error table") as f:
            f.write(text + "\n")
        replace_section(SERVING_DOC, BEGIN, END, section)
        replace_section(KERNEL_DOC, GEN_BEGIN, GEN_END, generation_table(table))
        first = section.index("| metric")
        table_only = section[first : section.index("\n\n", first)]
        replace_section(
            README_PATH,
            SUMMARY_BEGIN,
            SUMMARY_END,
            "On the **held-out split** (deployments of both validation sets set aside before any "
            "calibration, `benchmarks/data/heldout.toml`; generated by `python -m benchmarks.served_errors "
            "--write`, [docs/serving_accuracy.md](docs/serving_accuracy.md#the-held-out-split-and-the-interval-"
            "calibrated-on-whole-simulations)), the simulated serving metrics and the P10-P90 interval "
            "`simulate --predict` prints, calibrated on the other deployments' whole simulations:\n\n"
            + table_only,
        )
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
