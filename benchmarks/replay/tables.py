"""The replay of many rows as table lines, and the Markdown tables the validation pages print:
row by row (measured, each mode and its error, the interval, notes), the medians per metric group
against the targets, and how often the prediction interval holds the measured value.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from .parallel import ordered
from .reasons import ROW_LIMIT, reason
from .rows import error, excluded, metric_group
from .run import MODES, run_row, simulate_row
from .workload import RowWorkload, predictor, row_workload

__all__ = [
    "INTERVAL_MODE",
    "ORDER",
    "SHARE_COLUMN",
    "TARGETS",
    "Line",
    "cells",
    "deployment",
    "evaluate",
    "fmt",
    "interval_coverage",
    "medians",
    "modes_of",
    "pct",
    "rank",
    "share_cell",
    "table",
]

#: metric group -> the issue's target for the median |error| (%)
TARGETS = {"throughput": 10.0, "TPOT": 10.0, "TTFT": 20.0}


@dataclass
class Line:
    """One table row: the published value, each mode's value (None: not run) and the notes."""

    row: dict[str, str]
    values: dict[str, float | None]
    notes: tuple[str, ...]
    excluded: str | None = None
    #: ``simulated`` at the interval's two ends (:data:`INTERVAL_MODE`), None when not run
    interval: tuple[float, float] | None = None
    #: the :data:`INTERVAL_MODE` run's simulated queue share of TTFT
    #: (:attr:`~graphs.serving.sim.simulator.SimResult.queue_share`: which regime the served-error
    #: calibration judges it by), None when that mode was not run
    queue_share: float | None = None

    @property
    def measured(self) -> float:
        return float(self.row["value"])

    def err(self, mode: str) -> float | None:
        v = self.values.get(mode)
        return None if v is None else error(v, self.measured)


#: the order rows are run in (id prefixes; the rest after, in file order): every source first,
#: so that a --budget-s run that stops early still covers them all
ORDER = ("nim-", "trt014srv-", "vllmci", "trt014-", "trtL-", "trt10-llama-3.1-70b", "trt10-")


def rank(row: dict[str, str]) -> int:
    return next((i for i, p in enumerate(ORDER) if row["id"].startswith(p)), len(ORDER))


#: the columns that name a row's deployment: its rows share the predictor's tables and the engine
#: profile, built once per process (:func:`evaluate` on an executor runs them in one task)
DEPLOYMENT = (
    "engine",
    "engine_version",
    "model",
    "precision_weights",
    "precision_kv",
    "device",
    "tp",
    "ep",
    "num_gpus",
)


def deployment(row: dict[str, str]) -> tuple[str, ...]:
    """The row's deployment (:data:`DEPLOYMENT`).

    Parameters
    ----------
    row : dict
        A published or silicon row.

    Returns
    -------
    tuple of str
        Its engine and version, model, dtypes, device and parallelism, as the row states them.
    """
    return tuple(row.get(k, "") for k in DEPLOYMENT)


#: the mode whose prediction interval is run (its ends: :meth:`Predictor.interval`)
INTERVAL_MODE = "simulated"
#: the row-by-row table's header of :attr:`Line.queue_share`
SHARE_COLUMN = f"{INTERVAL_MODE} queue share"


def evaluate(
    rows: list[dict[str, str]],
    modes: tuple[str, ...],
    *,
    quick: bool = False,
    progress: Any = None,
    budget_s: float | None = None,
    interval: bool = True,
    executor: Any = None,
    group: Callable[[dict[str, str]], Hashable] = deployment,
) -> list[Line]:
    """Every row replayed in every mode (excluded rows listed, not run), in :data:`ORDER`; past
    ``budget_s`` seconds the remaining rows are listed as not run. ``interval`` (with
    :data:`INTERVAL_MODE` among ``modes``): that mode also at the interval's two ends.

    Parameters
    ----------
    rows : list of dict
        The rows (:func:`~benchmarks.replay.rows.load_rows`, or the silicon sample's).
    modes : tuple of str
        Of :data:`~benchmarks.replay.run.MODES`.
    quick : bool
        Fewer requests per run (smoke; not the tables' numbers).
    progress : callable, optional
        ``progress(line)``: a line per row and mode (on an executor, a row's lines as its task's
        result is taken).
    budget_s : float, optional
        No row starts after this many seconds (wall clock, from the call).
    interval : bool
        Run :data:`INTERVAL_MODE` at the interval's ends too.
    executor : Any, optional
        A Dask client or ``concurrent.futures`` executor (:func:`benchmarks.replay.parallel.executor_of`):
        the rows' replays run there, a task per ``group``, taken in the order of their first
        rows: the lines those of one process, in the same order. None: this process.
    group : callable
        ``group(row)``: on an executor rows with the same key run in one task, in :data:`ORDER`
        (default :func:`deployment`: a deployment's rows share the predictor's tables, which a
        worker builds once, as one process does; a task per row built them on every worker).

    Returns
    -------
    list of Line
        One per row, in :data:`ORDER`.
    """
    rows = sorted(rows, key=rank)
    budget = None if budget_s is None else (time.time() + budget_s, budget_s)
    job = _Job(len(rows), modes, quick, interval, budget)
    if executor is None:
        return [job.line(i, row, progress) for i, row in enumerate(rows)]
    lines: list[Line | None] = [None] * len(rows)
    tasks: dict[Hashable, list[tuple[int, dict[str, str]]]] = {}
    for i, row in enumerate(rows):
        if excluded(row):  # listed here: nothing to run
            lines[i] = job.line(i, row, None)
        else:
            tasks.setdefault(group(row), []).append((i, row))
    for done in ordered(executor, _run_task, [(job, items) for items in tasks.values()]):
        for i, ln, said in done:
            lines[i] = ln
            for s in said if progress else ():
                progress(s)
    assert all(ln is not None for ln in lines)
    return [ln for ln in lines if ln is not None]


@dataclass(frozen=True)
class _Job:
    """What :func:`evaluate` replays each row with (picklable: a task carries it)."""

    n: int  #: rows in the whole evaluation (for the progress lines' ``[i/n]``)
    modes: tuple[str, ...]
    quick: bool
    interval: bool
    #: (the wall-clock time after which no row starts, the budget in seconds), or None
    budget: tuple[float, float] | None

    def line(self, i: int, row: dict[str, str], progress: Any) -> Line:
        """Row ``i``'s line: excluded, not run (past the budget), or replayed in every mode."""
        why = excluded(row)
        if why:
            return Line(row, {}, (), why)
        if self.budget is not None and time.time() > self.budget[0]:
            return Line(
                row, {}, (), f"not run in this generation (the {self.budget[1]:.0f} s budget ran out)"
            )
        modes, quick = self.modes, self.quick
        w = row_workload(row, quick=quick)
        vals: dict[str, float | None] = {}
        for mode in modes:
            t = time.perf_counter()
            vals[mode] = v = run_row(row, mode, quick=quick)
            if progress:
                progress(
                    f"[{i + 1}/{self.n}] {row['id']} {mode}: {v:.6g} (measured {row['value']}, "
                    f"{100 * error(v, float(row['value'])):+.1f} %) {time.perf_counter() - t:.1f} s"
                )
        ends = None
        # the same cached run run_row read (simulate_row's key: workload, mode, quantile)
        share = simulate_row(w, INTERVAL_MODE, None).res.queue_share if INTERVAL_MODE in modes else None
        if self.interval and INTERVAL_MODE in modes:
            lo, hi = (q.quantile for q in predictor(w).interval())
            a, b = (run_row(row, INTERVAL_MODE, quick=quick, quantile=q) for q in (lo, hi))
            ends = (min(a, b), max(a, b))
        # how the measured value was obtained, where the row says (a recovered silicon E2E)
        stated = (row["value_note"],) if row.get("value_note") else ()
        return Line(row, vals, stated + w.notes + _coverage(w, modes), interval=ends, queue_share=share)


def _run_task(job: _Job, items: list[tuple[int, dict[str, str]]]) -> list[tuple[int, Line, list[str]]]:
    """A task of :func:`evaluate` on an executor: its rows' lines, each with its progress lines."""
    out = []
    for i, row in items:
        said: list[str] = []
        out.append((i, job.line(i, row, said.append), said))
    return out


def _coverage(w: RowWorkload, modes: tuple[str, ...]) -> tuple[str, ...]:
    """What the predicted run's kernel seconds rest on (measured / neighbour / bound shares),
    with the largest neighbour and bound reasons."""
    if "predicted" not in modes:
        return ()
    cov = simulate_row(w, "predicted", None).res.coverage  # run_row's cache key: no second run
    if cov is None or cov.total_s <= 0:
        return ()
    text = (
        f"predicted rests on {100 * cov.share('measured'):.0f} % measured, "
        f"{100 * cov.share('neighbour'):.0f} % neighbour, {100 * cov.share('bound'):.0f} % bound"
    )
    for label, parts in (("neighbour", cov.neighbours), ("bound", cov.bounds)):
        if parts and getattr(cov, f"{label}_s") / cov.total_s > 0.05:
            top = max(parts, key=parts.__getitem__)
            text += f" ({label} mostly: {top})"
    return (text,)


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return f"{v:.3g} s" if v >= 1 else f"{v * 1e3:.3g} ms"
    return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"


def pct(e: float | None) -> str:
    return "-" if e is None else f"{100 * e:+.1f} %"


def modes_of(lines: list[Line]) -> list[str]:
    """The table's mode columns.

    Parameters
    ----------
    lines : list of Line
        Replayed rows.

    Returns
    -------
    list of str
        The modes any of ``lines`` ran, in :data:`MODES` order.
    """
    return [m for m in MODES if any(m in ln.values for ln in lines)]


def share_cell(q: float | None) -> str:
    """A queue share as the tables print it: a fraction to 2 decimals, ``-`` when not run.

    Parameters
    ----------
    q : float or None
        The simulated queue share of TTFT (:attr:`Line.queue_share`).

    Returns
    -------
    str
    """
    return "-" if q is None else f"{q:.2f}"


def cells(ln: Line, modes: list[str], ends: bool = False, share: bool = False) -> list[str]:
    """One line's cells in the row-by-row table.

    Parameters
    ----------
    ln : Line
        The replayed row.
    modes : list of str
        The table's mode columns (:func:`modes_of`).
    ends : bool
        Whether the table has the interval column.
    share : bool
        Whether the table has the simulated queue share column (:attr:`Line.queue_share`).

    Returns
    -------
    list of str
        The row (linked to its source), the metric, the measured value, each mode's value and
        error, with ``ends`` the interval, with ``share`` the queue share, then the notes (an excluded row's reason instead; a
        row beyond :data:`ROW_LIMIT` with its stated reason).
    """
    r = ln.row
    out = [f"[{r['id']}]({r['source_url']})", r["metric"], fmt(ln.measured, r["unit"])]
    for m in modes:
        out += [fmt(ln.values.get(m), r["unit"]), pct(ln.err(m))]
    if ends:
        iv = ln.interval
        out.append("-" if iv is None else f"{fmt(iv[0], r['unit'])} - {fmt(iv[1], r['unit'])}")
    if share:
        out.append(share_cell(ln.queue_share))
    note = f"excluded: {ln.excluded}" if ln.excluded else "; ".join(ln.notes)
    best = ln.err(modes[-1]) if modes and not ln.excluded else None
    if best is not None and abs(best) > ROW_LIMIT / 100:
        why = reason(r, best) or "no physical reason stated (a model miss)"
        note = (note + "; " if note else "") + f"**beyond {ROW_LIMIT:.0f} %** ({modes[-1]}): {why}"
    out.append(note)
    return out


def table(lines: list[Line]) -> str:
    """The row-by-row table: measured, each mode with its error, the interval and the simulated
    queue share where run, source and notes (:func:`cells`)."""
    modes = modes_of(lines)
    ends = any(ln.interval for ln in lines)
    share = any(ln.queue_share is not None for ln in lines)
    head = "| row | metric | measured | " + " | ".join(f"{m} | error" for m in modes)
    head += f" | {INTERVAL_MODE} P10-P90" if ends else ""
    head += f" | {SHARE_COLUMN}" if share else ""
    head += " | notes |"
    out = [head, "|" + "---|" * (3 + 2 * len(modes) + ends + share + 1)]
    out += ["| " + " | ".join(cells(ln, modes, ends, share)) + " |" for ln in lines]
    return "\n".join(out)


def medians(lines: list[Line]) -> str:
    """Per metric group and mode: median |error|, rows, rows beyond ROW_LIMIT, against the target."""
    modes = modes_of(lines)
    out = [
        "| metric | target (median abs. error) | rows | "
        + " | ".join(f"{m}: median / beyond {ROW_LIMIT:.0f} %" for m in modes)
        + " |",
        "|" + "---|" * (3 + len(modes)),
    ]
    for group in ("throughput", "TPOT", "TTFT", "E2E"):
        used = [ln for ln in lines if not ln.excluded and metric_group(ln.row["metric"]) == group]
        if not used:
            continue
        goal = TARGETS.get(group)
        cells = [group, f"<= {goal:.0f} %" if goal else "(no target)", str(len(used))]
        for m in modes:
            errs = [abs(e) for ln in used if (e := ln.err(m)) is not None]
            if not errs:
                cells.append("-")
                continue
            med = 100 * statistics.median(errs)
            far = sum(e > ROW_LIMIT / 100 for e in errs)
            verdict = "" if goal is None else (" (meets)" if med <= goal else " (misses)")
            cells.append(f"{med:.1f} %{verdict} / {far}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def interval_coverage(lines: list[Line]) -> str:
    """Per metric group: how many measured values lie inside the :data:`INTERVAL_MODE` run's
    P10-P90 interval, below it and above it (empty when no interval was run)."""
    out = [
        f"| metric | rows | inside {INTERVAL_MODE}'s P10-P90 | measured below it | measured above it "
        "| median width (P90 end / P10 end - 1) |",
        "|---|---|---|---|---|---|",
    ]
    for group in ("throughput", "TPOT", "TTFT", "E2E"):
        used = [
            ln for ln in lines if not ln.excluded and ln.interval and metric_group(ln.row["metric"]) == group
        ]
        if not used:
            continue
        ivs = [(ln.measured, *ln.interval) for ln in used if ln.interval]
        inside = sum(lo <= m <= hi for m, lo, hi in ivs)
        below = sum(m < lo for m, lo, _ in ivs)
        width = statistics.median(hi / lo - 1 for _, lo, hi in ivs if lo > 0)
        out.append(
            f"| {group} | {len(ivs)} | {inside} ({100 * inside / len(ivs):.0f} %) | {below} "
            f"| {len(ivs) - inside - below} | {100 * width:.1f} % |"
        )
    return "\n".join(out) if len(out) > 2 else ""
