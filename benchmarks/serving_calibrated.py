"""Calibrated from a published benchmark: the engine overheads fitted on some load points of a
published serving table, the others predicted and compared (held out).

What a user does with ``costmodel calibrate serving`` on their own ``vllm bench serve`` files,
done here on published tables whose configuration is fully stated (TensorRT-LLM v0.14's
"Online Serving Measurements": Llama-3.1-8B on one H100 and Llama-3.1-70B on four, 467 prompt
and 256 output tokens, Poisson arrivals at 2-32 requests/s; rows of
``benchmarks/data/published_serving.csv``). Each load point becomes a
:class:`graphs.serving.planning.bench_results.BenchRun`: the requests the accuracy table replays for that
row (:func:`serving_accuracy.row_workload`: the published count, Poisson arrivals, seed 0), each
with the published mean TTFT and ``E2E = TTFT + (OSL - 1) ITL``. The fit
(:func:`graphs.serving.planning.serving_fit.fit_serving`) reads group means only, and with fixed lengths a
run is one group, so those per-request values carry exactly the published means and nothing else.

The terms fitted are the defaults of ``calibrate serving`` (kernel scale, CPU time per
iteration, request path), starting from the defaults of the engine profile the rows' engine
column names (``triton-trtllm`` for these tables, as the accuracy table's replay of the same rows;
CPU terms fitted to other runs, `docs/overhead_fit.md`; the rest sourced or assumed, each said
in its profile), on the load points
:data:`FIT_RATES`; the points :data:`HELD_OUT_RATES` are predicted with the fitted terms. Printed
side by side: measured, uncalibrated (the profile's defaults) and calibrated TTFT and TPOT,
and the medians of the held-out errors.

    python -m benchmarks.serving_calibrated            # Markdown to stdout
    python -m benchmarks.serving_calibrated --write    # the section in docs/serving_accuracy.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.replay import load_rows, predictor, replace_section, row_workload
from benchmarks.replay.run import overheads_for
from benchmarks.serving_accuracy import DOC_PATH
from costmodel.errors import CostModelError
from graphs.serving import simulate
from graphs.serving.planning.bench_results import BenchRun
from graphs.serving.planning.serving_fit import DEFAULT_TERMS, ServingFit, fit_serving
from graphs.serving.pricing.overheads import EngineOverheads

__all__ = ["GROUPS", "FIT_RATES", "HELD_OUT_RATES", "bench_run", "calibrate_group", "main"]

#: published tables calibrated (id prefixes of the CSV; each has TTFT and ITL rows per rate)
GROUPS = (
    "trt014srv-llama-3.1-8b-h100-sxm-tp1-467-256",
    "trt014srv-llama-3.1-70b-h100-sxm-tp4-467-256",
)
FIT_RATES = ("2", "8", "32")  #: the load points fitted (requests/s)
HELD_OUT_RATES = ("4", "16")  #: the load points predicted with the fitted terms
BEGIN, END = "<!-- serving-calibrated:begin -->", "<!-- serving-calibrated:end -->"


def _row(rows: dict[str, dict[str, str]], rid: str) -> dict[str, str]:
    if rid not in rows:
        raise CostModelError(f"published_serving.csv has no row {rid!r}")
    return rows[rid]


def bench_run(rows: dict[str, dict[str, str]], prefix: str, rate: str) -> tuple[BenchRun, Any]:
    """The load point ``rate`` of the table ``prefix`` as a measured run (module doc), with its
    replayed workload."""
    ttft_row = _row(rows, f"{prefix}-qps{rate}-ttft")
    itl = float(_row(rows, f"{prefix}-qps{rate}-itl")["value"])
    ttft = float(ttft_row["value"])
    w = row_workload(ttft_row)
    reqs = list(w.requests)
    n = len(reqs)
    out = np.array([r.output for r in reqs], dtype=float)
    run = BenchRun(
        source=f"{prefix}-qps{rate}",
        rate=w.rate,
        arrival_s=np.array([r.arrival_s for r in reqs], dtype=float),
        prompt=np.array([r.prompt for r in reqs]),
        output=out.astype(int),
        ttft_s=np.full(n, ttft),
        e2e_s=ttft + (out - 1) * itl,
    )
    return run, w


@dataclass
class GroupResult:
    prefix: str
    source: str  #: the published table's title (the CSV's source_title)
    rates: tuple[str, ...]
    measured: list[tuple[float, float]]  #: (TTFT, TPOT) per rate, s
    default: list[tuple[float, float]]  #: uncalibrated (the row's engine profile's defaults)
    fit: ServingFit


def _means(res: Any) -> tuple[float, float]:
    pr = res.per_request
    return float(np.mean(pr["ttft_s"])), float(np.nanmean(pr["tpot_s"]))


def calibrate_group(prefix: str, progress: Any = None) -> GroupResult:
    """Fit the group's :data:`FIT_RATES`, predict its :data:`HELD_OUT_RATES` (module doc)."""
    rows = {r["id"]: r for r in load_rows(subset=None)}
    rates = FIT_RATES + HELD_OUT_RATES
    pairs = [bench_run(rows, prefix, q) for q in rates]
    runs = [p[0] for p in pairs]
    w = pairs[0][1]
    pred = predictor(w)
    # the terms of the profile the row's engine column names (Triton's ensemble for these tables:
    # its request path and CPU terms), exactly as the accuracy table's simulated replay prices
    # the same rows
    base = overheads_for(w, "simulated")

    def sim(requests: list[Any], ov: EngineOverheads, concurrency: int | None = None) -> Any:
        return simulate(
            w.config,
            w.device,
            requests,
            topology=w.topology,
            engine=w.engine,
            predictor=pred,
            overheads=ov,
            concurrency=concurrency,
        )

    fit = fit_serving(
        runs,
        sim,
        base=base,
        held_out=tuple(range(len(FIT_RATES), len(rates))),
        model=w.config.name,
        device=w.device,
        tp=w.topology.tp,
        predict=w.framework,
        progress=progress,
    )
    measured = [(float(r.ttft_s.mean()), float(np.nanmean(r.tpot_s))) for r in runs]
    default = [_means(sim(r.requests, base)) for r in runs]
    source = rows[f"{prefix}-qps{rates[0]}-ttft"]["source_title"]
    return GroupResult(prefix, source, rates, measured, default, fit)


def _pct(model: float, measured: float) -> str:
    return f"{100 * (model / measured - 1):+.1f} %"


def _stderr_text(fit: Any, term: str) -> str:
    """`` ± s``, or why a fitted term has no standard error."""
    if term in fit.at_bound:
        return " (held at its lower bound)"
    se = fit.stderr.get(term)
    return f" ± {se:.2g}" if se is not None else " (not determined)"


def markdown(results: list[GroupResult], seconds: float) -> str:
    out = [
        f"Generated by `python -m benchmarks.serving_calibrated --write` ({seconds:.0f} s). Engine overheads "
        f"(`{', '.join(DEFAULT_TERMS)}`) fitted by "
        "`graphs.serving.planning.serving_fit.fit_serving` (what `costmodel calibrate serving` runs) on the "
        f"load points {', '.join(q + ' req/s' for q in FIT_RATES)} of each published table, and the "
        f"points {', '.join(q + ' req/s' for q in HELD_OUT_RATES)} predicted with them (held out). "
        "`default`: the same simulation with the defaults of the profile the rows' engine column names "
        "(as the accuracy table's replay; CPU terms fitted to other runs, `docs/overhead_fit.md`; the rest "
        "sourced or assumed in the profile). Error = model / measured - 1.",
        "",
    ]
    held: dict[str, list[float]] = {
        "default TTFT": [],
        "default TPOT": [],
        "fitted TTFT": [],
        "fitted TPOT": [],
    }
    for g in results:
        ov = g.fit.overheads
        terms = ", ".join(f"{t} = {getattr(ov, t):.4g}{_stderr_text(g.fit, t)}" for t in DEFAULT_TERMS)
        out += [f"**{g.prefix}** ({g.source}): fitted {terms}.", ""]
        out += [
            "| req/s | fitted? | measured TTFT | default | error | calibrated | error "
            "| measured TPOT | default | error | calibrated | error |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for q, (mt, mp), (dt, dp), re in zip(g.rates, g.measured, g.default, g.fit.runs, strict=True):
            ct, cp = mt * (1 + re.ttft_err), mp * (1 + re.tpot_err)
            out.append(
                f"| {q} | {'fit' if re.fitted else 'held out'} | {mt * 1e3:.1f} ms | {dt * 1e3:.1f} ms | "
                f"{_pct(dt, mt)} | {ct * 1e3:.1f} ms | {_pct(ct, mt)} | {mp * 1e3:.2f} ms | {dp * 1e3:.2f} ms | "
                f"{_pct(dp, mp)} | {cp * 1e3:.2f} ms | {_pct(cp, mp)} |"
            )
            if not re.fitted:
                held["default TTFT"].append(abs(dt / mt - 1))
                held["default TPOT"].append(abs(dp / mp - 1))
                held["fitted TTFT"].append(abs(re.ttft_err))
                held["fitted TPOT"].append(abs(re.tpot_err))
        out.append("")
    med = {k: 100 * statistics.median(v) for k, v in held.items() if v}
    out.append(
        f"Held-out load points ({len(held['fitted TTFT'])}): median |error| TTFT {med['default TTFT']:.1f} % "
        f"with the defaults, {med['fitted TTFT']:.1f} % calibrated; TPOT {med['default TPOT']:.1f} % "
        f"with the defaults, {med['fitted TPOT']:.1f} % calibrated."
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write the section of docs/serving_accuracy.md")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    say = (lambda s: sys.stderr.write(s + "\n")) if sys.stderr.isatty() else None
    results = [calibrate_group(p, say) for p in GROUPS]
    text = markdown(results, time.perf_counter() - t)
    if args.write:
        replace_section(DOC_PATH, BEGIN, END, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
