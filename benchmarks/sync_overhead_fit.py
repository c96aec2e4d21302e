"""vLLM's CPU terms under synchronous scheduling (``vllm@0.12``), fitted to the silicon sample's
vLLM 0.12.0 runs outside the held-out split.

vLLM hides an iteration's CPU work behind the GPU's step only under async scheduling, opt-in
before v0.14.0 (:mod:`graphs.serving.engines.vllm012`). ``vllm@1``'s CPU terms were fitted
(``benchmarks/overhead_fit.py``) to InferenceX's runs, whose scripts pass ``async-scheduling:
true``; the aiconfigurator silicon sample's vLLM 0.12.0 runs state no launch arguments and,
INFERRED, ran without the flag (off unless passed; aiconfigurator's own vLLM 0.12.0 launch
template, its generator's ``backend_templates/vllm/cli_args.0.12.0.j2``, passes none): they
schedule synchronously. This script fits that
profile's ``iteration_s`` ``a`` and ``per_seq_s`` ``b`` (CPU time ``a + b n`` added to an
iteration of ``n`` sequences) to the runs' mean TPOT, as the silicon table replays them
(:func:`benchmarks.replay.run.simulate_row`, mode ``simulated``, every other term the
profile's): Gauss-Newton on the relative residuals ``TPOT_sim(a, b) / TPOT_measured - 1``
(near affine in ``a`` and ``b``: each iteration adds ``a + b n``), the terms kept non-negative,
standard errors from ``s^2 (J^T J)^-1`` at the last iterate's Jacobian (they treat the runs,
all of one deployment, as independent: they understate). At one TP, ``a`` cannot be told from
a fixed per-step latency on the GPU side that varies with TP (``graphs/serving/engines/vllm012.py``).

The runs: every vLLM 0.12.0 TPOT row the silicon table compares
(``docs/silicon_accuracy_rows.csv``; rows it lists but leaves out are not fitted), replayed as the
table replays them (a campaign that was not one wave per run as its client's loop in the steady
state, which that table's ``excluded`` column of the TTFT row says), whose deployment is not in
``benchmarks/data/heldout.toml``: a held-out deployment's rows are dropped before anything of
them is replayed or compared, never fitted.

    python -m benchmarks.sync_overhead_fit            # Markdown to stdout (minutes)
    python -m benchmarks.sync_overhead_fit --write    # docs/sync_overhead_fit.md
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import served_errors as se
from benchmarks.replay import row_workload
from benchmarks.replay.pages import write_page
from benchmarks.replay.rows import excluded
from benchmarks.replay.run import simulate_row
from benchmarks.replay.silicon import STEADY, VLLM_SYNC_PROFILE, WAVE, load_sample, silicon_rows
from costmodel.errors import CostModelError
from graphs.serving.engines import get_engine
from graphs.serving.pricing.overheads import EngineOverheads

__all__ = ["DOC_PATH", "TERMS", "VERSION", "SyncFit", "fit", "markdown", "runs", "main"]

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "sync_overhead_fit.md"
TERMS = ("iteration_s", "per_seq_s")
VERSION = "0.12.0"  #: the sample's ``backend_version`` of the runs fitted
STEPS = (1e-3, 2e-5)  #: finite-difference steps of ``a`` and ``b`` (s)
ITERATIONS = 3
NOT_A_WAVE = "not one wave"  #: how the table's TTFT row says its campaign replays as a steady loop


@dataclasses.dataclass(frozen=True)
class SyncFit:
    """The fit: the terms, their standard errors, and per run (label, measured TPOT, simulated
    TPOT with the start terms and with the fitted ones)."""

    terms: dict[str, float]
    stderr: dict[str, float | None]
    at_bound: tuple[str, ...]
    start: dict[str, float]
    runs: list[tuple[str, float, float, float]]
    seconds: float


def runs() -> list[tuple[str, Any, float]]:
    """The fitted runs (module doc), in the sample's order.

    Returns
    -------
    list of (str, RowWorkload, float)
        Each run's label, its replay's workload (:func:`benchmarks.replay.row_workload`, as the
        silicon table replays it) and its measured mean TPOT (s).
    """
    rows, _ = silicon_rows(load_sample())
    held = se.heldout()
    rows = [
        r
        for r in rows
        if r["engine"] == "vllm"
        and r["engine_version"] == VERSION
        and r["metric"] == "tpot_mean_s"
        and f"silicon:{se.deployment(r)}" not in held
        and not excluded(r)
    ]
    wanted = {r["id"] for r in rows} | {r["id"][: -len("-tpot")] + "-ttft" for r in rows}
    table: dict[str, dict[str, str]] = {}
    with se.SILICON_ROWS.open(newline="") as fh:
        for t in csv.DictReader(fh):
            if t["id"] in wanted:
                table[t["id"]] = t
    out = []
    for r in rows:
        got = table.get(r["id"])
        if got is None or got["excluded"] or not got["simulated_error_pct"]:
            continue  # listed but not compared (or not in the table)
        ttft = table.get(r["id"][: -len("-tpot")] + "-ttft", {})
        if r["source_kind"] == WAVE and ttft.get("excluded", "").startswith(NOT_A_WAVE):
            r = {**r, "source_kind": STEADY}
        label = f"{r['model']} {r['device']} TP{r['tp']} {r['isl']}/{r['osl']} C{r['concurrency']}"
        out.append((label, row_workload(r), float(r["value"])))
    return out


def _tpot(w: Any, terms: dict[str, float]) -> float:
    ov = EngineOverheads.for_framework(
        VLLM_SYNC_PROFILE,
        max_num_seqs=w.engine.max_num_seqs,
        max_num_batched_tokens=w.engine.max_num_batched_tokens,
    ).with_terms(**terms)
    return float(np.nanmean(simulate_row(w, "simulated", overheads=ov).tpot))


def fit(progress: bool = False) -> SyncFit:
    """Fit :data:`TERMS` (module doc) from ``vllm@1``'s values.

    Parameters
    ----------
    progress : bool
        Print each iteration's terms, root mean square error and step on stderr.

    Returns
    -------
    SyncFit

    Raises
    ------
    CostModelError
        When fewer runs than terms are left to fit.
    """
    t0 = time.time()
    rs = runs()
    if len(rs) <= len(TERMS):
        raise SystemExit(
            f"{len(rs)} vLLM {VERSION} runs outside the held-out split: too few to fit {len(TERMS)} terms"
        )
    meas = np.array([m for _, _, m in rs])
    start = {t: get_engine("vllm").cpu_terms[t] for t in TERMS}

    def resid(x: np.ndarray) -> np.ndarray:
        terms = dict(zip(TERMS, (float(v) for v in x), strict=True))
        return np.array([_tpot(w, terms) for _, w, _ in rs]) / meas - 1

    x = np.array([start[t] for t in TERMS])
    r0 = r = resid(x)
    jac = np.zeros((len(rs), len(TERMS)))
    for it in range(ITERATIONS):
        for j, h in enumerate(STEPS):
            xh = x.copy()
            xh[j] += h
            jac[:, j] = (resid(xh) - r) / h
        step = np.linalg.lstsq(jac, -r, rcond=None)[0]
        x = np.maximum(x + step, 0.0)
        r = resid(x)
        if progress:
            print(
                f"  {VLLM_SYNC_PROFILE}: iteration {it + 1}: a = {x[0]:.3g} s, b = {x[1]:.3g} s, "
                f"RMS {math.sqrt(float(np.mean(r * r))) * 100:.1f} %, step {np.abs(step).tolist()}",
                file=sys.stderr,
            )
    at_bound = tuple(t for t, v in zip(TERMS, x, strict=True) if v == 0.0)
    free = [j for j, t in enumerate(TERMS) if t not in at_bound]
    s2 = float(r @ r) / max(len(rs) - len(free), 1)
    cov = np.linalg.pinv(jac[:, free].T @ jac[:, free]) * s2 if free else np.zeros((0, 0))
    stderr: dict[str, float | None] = {t: None for t in TERMS}
    for k, j in enumerate(free):
        stderr[TERMS[j]] = math.sqrt(max(float(cov[k, k]), 0.0))
    per = [(lab, m, m * (1 + b), m * (1 + a)) for (lab, _, m), b, a in zip(rs, r0, r, strict=True)]
    return SyncFit(
        dict(zip(TERMS, map(float, x), strict=True)), stderr, at_bound, start, per, time.time() - t0
    )


def _med(xs: list[float]) -> str:
    return f"{float(np.median(np.abs(xs))) * 100:.1f} %"


def _rms(xs: list[float]) -> str:
    return f"{math.sqrt(float(np.mean(np.square(xs)))) * 100:.1f} %"


def markdown(f: SyncFit) -> str:
    """The page: the fitted terms with their standard errors, and every fitted run's TPOT with the
    start terms and the fitted ones.

    Parameters
    ----------
    f : SyncFit
        :func:`fit`'s result.

    Returns
    -------
    str
        Markdown.
    """
    before = [b / m - 1 for _, m, b, _ in f.runs]
    after = [a / m - 1 for _, m, _, a in f.runs]
    out = [
        "<!-- generated by python -m benchmarks.sync_overhead_fit --write: do not edit by hand -->",
        "# vLLM's CPU terms under synchronous scheduling, fitted",
        "",
        f"Generated by `python -m benchmarks.sync_overhead_fit --write` ({f.seconds:.0f} s). What `vllm@0.12`'s "
        "`iteration_s` and `per_seq_s` (`graphs/serving/engines/vllm012.py`) rest on. The method is the "
        f"script's module doc: the aiconfigurator silicon sample's vLLM {VERSION} runs that the silicon "
        "table compares, outside the held-out split (`benchmarks/data/heldout.toml`: its runs are neither "
        "fitted nor read), replayed as that table replays them, kernels priced by the vLLM corpus; the "
        "two terms fitted to the runs' mean TPOT, starting from `vllm@1`'s (fitted to InferenceX's runs, "
        "which pass `async-scheduling: true`). Error = model / measured - 1. The errors below are in "
        "sample: the runs are one deployment at one TP, so `iteration_s` may hold a per-step latency that "
        "varies with TP, and the standard errors, which treat the runs as independent, understate; the "
        "held-out deployments' errors are in `docs/serving_accuracy.md`'s held-out table.",
        "",
        "| term | start (`vllm@1`) | fitted | standard error |",
        "|---|---|---|---|",
    ]
    for t in TERMS:
        s = f.stderr[t]
        out.append(
            f"| `{t}` | {f.start[t]:.3g} s | {f.terms[t]:.3g} s | "
            + (
                "none: held at its lower bound, 0 |"
                if t in f.at_bound
                else f"{s:.2g} s |"
                if s is not None
                else "not determined |"
            )
        )
    out += [
        "",
        f"{len(f.runs)} runs: TPOT median |error| {_med(before)} -> {_med(after)}, RMS {_rms(before)} -> {_rms(after)}.",
        "",
        "| run | measured TPOT | start | fitted |",
        "|---|---|---|---|",
    ]
    for (lab, m, b, a), eb, ea in zip(f.runs, before, after, strict=True):
        out.append(
            f"| {lab} | {m * 1e3:.2f} ms | {b * 1e3:.2f} ms ({eb * 100:+.1f} %) | {a * 1e3:.2f} ms ({ea * 100:+.1f} %) |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The command line (module doc): the page to stdout, or ``--write`` it.

    Parameters
    ----------
    argv : list of str, optional
        Arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 when too few runs are left to fit (the reason on stderr).
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"write {DOC_PATH.name} in docs/")
    args = ap.parse_args(argv)
    try:
        text = markdown(fit(progress=True))
    except CostModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write:
        write_page(DOC_PATH, text)
        print(f"wrote {DOC_PATH}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
