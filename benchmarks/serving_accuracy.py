"""Served numbers against real engines: published serving measurements replayed end to end.

Every row of ``benchmarks/data/published_serving.csv`` (how each source measured:
``benchmarks/data/README.md``) is replayed as the source ran it: the model, device, tensor
parallelism, dtypes, ISL/OSL, request count and load (``offline``: every request at t = 0;
``rate``: Poisson arrivals at the published QPS; ``concurrency``: a closed loop of N clients;
``batch``: one fixed batch; ``client``: a benchmark client's closed loop from a burst, every
request read, for ``benchmarks/silicon_accuracy.py``), through :func:`graphs.serving.simulate`
in three modes:

* ``bound``: every iteration at its per-kernel roofline (the engine's default predictor);
* ``predicted``: every iteration's kernels priced by the source engine's measured kernels
  (``Predictor.of(framework)``: trtllm for TensorRT-LLM, NIM and MLPerf; vllm; sglang; the FP8
  rows' ModelOpt checkpoints with static activation scales, :func:`predictor`);
* ``simulated``: ``predicted`` plus the engine's own overheads (scheduling, request path),
  when :func:`simulate` takes ``overheads=``; until then the same run as ``predicted``, and the
  table says so.

``simulated`` is also run at both ends of the prediction interval (:meth:`Predictor.interval`:
every kernel at the P10 and at the P90 of its held-out error: the interval ``simulate --predict``
prints), and the table says per metric how many measured values fall inside that interval,
below it or above it: whether the interval is one a user can plan with.

Printed side by side with the measured value and the signed error ``model / measured - 1``,
then per-metric medians of ``|error|`` against the issue's targets (throughput and TPOT
<= 10 %, TTFT <= 20 %, no row beyond 25 % without a physical reason). A row whose
configuration the source does not fully publish (dataset length distributions, undefined
parallelism, ambiguous precision) is listed with its reason and left out of the medians.

    python -m benchmarks.serving_accuracy                      # the core subset, Markdown to stdout
    python -m benchmarks.serving_accuracy --rows trt10-llama-3.1-8b-h100 --modes bound
    python -m benchmarks.serving_accuracy --quick --rows nim-  # fewer requests (smoke)
    python -m benchmarks.serving_accuracy --write              # docs/serving_accuracy.md + README summary
    python -m benchmarks.serving_accuracy --write --scheduler dask --workers 2   # the rows on Dask

``--scheduler dask`` replays the rows on a local Dask cluster of ``--workers`` worker processes
(default 2), or on the cluster whose scheduler is at ``--dask-address`` (its workers need this
repository on their path and the same install), a task per row (:mod:`benchmarks.replay.parallel`):
the same lines as one process, in the same order; a row's progress lines print as its result is
taken. ``--budget-s`` then counts from the start on the wall clock, and a row not started by then
is listed as not run, wherever it would have run.

``--rows`` runs the replayable rows its prefixes match and names the others on stderr with why
they are not replayed (:func:`not_replayed`); a prefix that matches no replayable row exits
with one line.

Request counts: offline runs simulate ``WAVES`` full batches (not the published tens of
thousands) and extrapolate the makespan to the published count at the steady completion rate
of the middle waves (the published metric includes ramp-up and drain, so does the
extrapolation); a latency row (TTFT, TPOT) of such a run simulates every published request, its
mean being over all of them; rate-driven runs send the published count.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.replay import (
    INTERVAL_MODE,
    MODES,
    ROW_LIMIT,
    Line,
    evaluate,
    excluded,
    interval_coverage,
    load_rows,
    medians,
    replace_section,
    table,
)
from benchmarks.replay.pages import DOCS, README
from benchmarks.replay.parallel import add_options, executor_of

__all__ = ["main", "markdown", "not_replayed", "select_rows", "summary"]

DOC_PATH = DOCS / "serving_accuracy.md"
README_PATH = README

BEGIN, END = "<!-- serving-accuracy:begin -->", "<!-- serving-accuracy:end -->"
SUMMARY_BEGIN, SUMMARY_END = (
    "<!-- serving-accuracy-summary:begin -->",
    "<!-- serving-accuracy-summary:end -->",
)


def markdown(lines: list[Line], seconds: float) -> str:
    """The generated section: how the rows were run, the medians, then the table."""
    n_ex = sum(1 for ln in lines if ln.excluded and not ln.excluded.startswith("not run"))
    n_skip = sum(1 for ln in lines if ln.excluded and ln.excluded.startswith("not run"))
    sim_note = (
        "`predicted` is the kernels alone (`overheads=EngineOverheads()`); `simulated` adds the framework's "
        "default engine overheads (`EngineOverheads.for_framework`: CPU time per iteration, request path, "
        "streaming, CUDA-graph padding, scheduler policy; vLLM's and TensorRT-LLM's CPU time per iteration "
        "and per sequence fitted to InferenceX's H200 runs, `docs/overhead_fit.md`, none of them rows of this "
        "table; the other terms assumed)."
    )
    loop_note = (
        "Closed loops (NIM) run in their steady state, `simulate_steady_loop(..., concurrency=N)`: the "
        "clients' first sends spread uniformly over one cycle (measured by a first run that starts them "
        "together), where a real loop's jitter spreads them; started together, identical requests stay in step "
        "in a deterministic replay and their prompts queue behind each other."
    )
    return "\n".join(
        [
            f"Generated by `python -m benchmarks.serving_accuracy --write` ({len(lines)} rows, {n_ex} excluded as not "
            f"fully published, {n_skip} not run within the time budget, {seconds:.0f} s). Error = model / measured - 1. Bound: roofline iterations; "
            "predicted: the source engine's measured kernels (`Predictor.of(framework)`: their fits times the shape residuals; "
            "q/k/v and gate/up as one GEMM each, small ops at least the device's shortest measured kernel, FP8 rows' "
            "ModelOpt checkpoints with static activation scales). " + sim_note + " " + loop_note,
            "",
            "**Against the targets** (median |error| over the rows that are fully published; rows beyond "
            f"{ROW_LIMIT:.0f} % counted):",
            "",
            medians(lines),
            "",
            *(
                [
                    "**The prediction interval against the measurements** (the kernels' held-out "
                    "P10 and P90 errors, the kernels' part of the interval `simulate --predict` prints, which is calibrated on whole simulations: the held-out section below; an interval of kernel errors "
                    "alone, so a bias of the serving stack beyond its kernels shows as measured values "
                    "outside it):",
                    "",
                    cov,
                    "",
                ]
                if (cov := interval_coverage(lines))
                else []
            ),
            table(lines),
        ]
    )


def summary(lines: list[Line]) -> str:
    """The README's short section: the medians and a link to the table."""
    return "\n".join(
        [
            "Published real-serving measurements (TensorRT-LLM perf overview, NVIDIA NIM, MLPerf, vLLM CI, "
            "SGLang, and GPUStack's untuned MoE runs, all held out; `benchmarks/data/`) replayed through `simulate` with the source's configuration; "
            "row by row in [docs/serving_accuracy.md](docs/serving_accuracy.md), generated by "
            "`python -m benchmarks.serving_accuracy --write`:",
            "",
            medians(lines),
            *(
                [
                    "",
                    "How often the kernels' P10-P90 interval (the part of `simulate --predict`'s from the kernels' held-out "
                    "errors) holds the measured value:",
                    "",
                    cov,
                ]
                if (cov := interval_coverage(lines))
                else []
            ),
        ]
    )


#: why a row that the sources publish (no :func:`~benchmarks.replay.rows.excluded` reason) is
#: still not replayed: a replay sends fixed prompt and output lengths, and it has none
NO_LENGTHS = "no fixed ISL/OSL in the row: its per-request lengths are not published"


def not_replayed(row: dict[str, str]) -> str | None:
    """Why ``row`` is not replayed, or None when it is.

    Parameters
    ----------
    row : dict
        A row of ``benchmarks/data/published_serving.csv``.

    Returns
    -------
    str or None
        Its :func:`~benchmarks.replay.rows.excluded` reason (a configuration the source does not
        fully publish), else :data:`NO_LENGTHS` when its ``isl`` or ``osl`` is empty or not a
        positive number (a replay sends fixed lengths), else None.
    """
    why = excluded(row)
    if why:
        return why
    for field in ("isl", "osl"):
        try:
            ok = float(row.get(field) or "nan") >= 1
        except ValueError:
            ok = False
        if not ok:
            return NO_LENGTHS
    return None


def select_rows(
    rows: list[dict[str, str]], prefixes: tuple[str, ...] | None, subset: str
) -> tuple[list[dict[str, str]], list[str]]:
    """The rows to evaluate and a line per matched row that is not replayed.

    Without ``prefixes`` (the full table) every row is kept, an excluded one to be listed with its
    reason; a row with no reason that cannot be replayed (:data:`NO_LENGTHS`) is kept as excluded
    for that reason. With ``prefixes`` only the replayable rows whose id starts with one of them
    are kept, and the others that match are said, grouped by reason.

    Parameters
    ----------
    rows : list of dict
        The subset's rows (:func:`~benchmarks.replay.rows.load_rows`).
    prefixes : tuple of str or None
        ``--rows``' id prefixes; None: every row.
    subset : str
        ``--subset``, named in the messages.

    Returns
    -------
    list of dict
        The rows to pass to :func:`~benchmarks.replay.tables.evaluate`.
    list of str
        One line per reason: how many matched rows it holds back, the reason and their ids.

    Raises
    ------
    SystemExit
        With one line when ``prefixes`` match no row, or no replayable row.
    """
    if prefixes is None:
        return [
            r if excluded(r) or not not_replayed(r) else {**r, "excluded_reason": NO_LENGTHS} for r in rows
        ], []
    matched = [r for r in rows if r["id"].startswith(prefixes)]
    shown = ",".join(prefixes)[:80]
    if not matched:
        raise SystemExit(f"--rows: no {subset} row starts with {shown!r}")
    held: dict[str, list[str]] = {}
    for r in matched:
        why = not_replayed(r)
        if why:
            held.setdefault(why, []).append(r["id"])
    notes = [
        f"--rows: {len(ids)} matched row(s) not replayed ({why}): "
        + ", ".join(ids[:5])
        + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        for why, ids in held.items()
    ]
    keep = [r for r in matched if not not_replayed(r)]
    if not keep:
        reasons = "; ".join(f"{len(ids)}: {why}" for why, ids in held.items())
        raise SystemExit(
            f"--rows: none of the {len(matched)} {subset} row(s) starting with {shown!r} is replayed ({reasons})"
        )
    return keep, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default=None, help="comma-separated id prefixes (default: every core row)")
    ap.add_argument("--subset", default="core", choices=("core", "extended", "all"))
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting rows after this many seconds (the rest are listed as not run)",
    )
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument(
        "--quick", action="store_true", help="fewer requests per run (smoke; not the table's numbers)"
    )
    ap.add_argument(
        "--no-interval",
        action="store_true",
        help=f"skip the two runs of {INTERVAL_MODE} at the prediction interval's ends",
    )
    ap.add_argument(
        "--write", action="store_true", help="write docs/serving_accuracy.md and the README summary"
    )
    add_options(ap, "the rows' replays")
    args = ap.parse_args(argv)
    modes = tuple(m for m in args.modes.split(",") if m)
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"--modes: {m!r} not allowed; allowed: {', '.join(MODES)}")
    prefixes = tuple(p for p in args.rows.split(",") if p) if args.rows else None
    rows, notes = select_rows(
        load_rows(subset=None if args.subset == "all" else args.subset), prefixes, args.subset
    )
    for note in notes:
        sys.stderr.write(note + "\n")
    if args.write and (args.quick or args.rows or modes != MODES or args.no_interval):
        raise SystemExit("--write writes the full table: drop --quick, --rows, --modes and --no-interval")
    t = time.perf_counter()
    with executor_of(args) as executor:
        lines = evaluate(
            rows,
            modes,
            quick=args.quick,
            progress=lambda s: sys.stderr.write(s + "\n"),
            budget_s=args.budget_s,
            interval=not args.no_interval,
            executor=executor,
        )
    text = markdown(lines, time.perf_counter() - t)
    if args.write:
        replace_section(DOC_PATH, BEGIN, END, text)
        replace_section(README_PATH, SUMMARY_BEGIN, SUMMARY_END, summary(lines))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
