"""Plant known serving terms in simulator output and fit them back (``calibrate serving``).

Each case writes what the simulator serves with :data:`PLANTED` (kernel scale 1.25, 0.5 ms per
iteration, 8 ms per request; ``per_seq_s`` where a case fits it) as the user's result files
(the per-request CSV, or a ``vllm bench serve`` summary-only JSON), optionally with multiplicative
noise on the latencies or jitter on the arrivals written, and fits them with
:func:`graphs.serving.present.serving_fit_report.run_serving_fit` (what the command runs). It
prints each fitted term, its stated uncertainty and how far it is from the planted value in
those units, and the simulations the fit took.

    python -m benchmarks.serving_fit_planted                 # every case, seed 0
    python -m benchmarks.serving_fit_planted --seeds 0 1 2   # several seeds

The tests (``tests/test_serving_fit_robust.py``) use :func:`planted_files` and :data:`CASES`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphs.serving.planning.bench_results import vllm_arrivals
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate

__all__ = ["CASES", "Case", "M", "PLANTED", "RATES", "main", "planted_files", "run_case"]

M = "llama-3.1-8b"
PLANTED = EngineOverheads(kernel_scale=1.25, iteration_s=5e-4, request_s=8e-3)
RATES = (3.0, 10.0, 20.0)


@dataclass(frozen=True)
class Case:
    """One planted case: the files' format, the noise and arrival jitter written, the requests per
    run, the runs' rates and the terms planted and fitted."""

    name: str
    form: str = "csv"  #: "csv" (per request) or "summary" (vllm bench serve without --save-detailed)
    noise: float = 0.0  #: relative sd of the multiplicative noise on TTFT and E2E
    jitter_s: float = 0.0  #: sd of the noise on the arrivals written (s)
    n: int = 150
    rates: tuple[float, ...] = RATES
    planted: EngineOverheads = PLANTED
    terms: tuple[str, ...] = ("kernel_scale", "iteration_s", "request_s")


CASES = {
    c.name: c
    for c in (
        Case("csv"),
        Case("csv-noise", noise=0.01),
        Case("csv-jitter", noise=0.01, jitter_s=0.01),
        Case("summary", form="summary"),
        Case(
            "per-seq-low-load",
            rates=(1.0, 2.0, 4.0),
            planted=EngineOverheads(kernel_scale=1.25, iteration_s=5e-4, per_seq_s=0.0, request_s=8e-3),
            terms=("kernel_scale", "iteration_s", "per_seq_s", "request_s"),
        ),
    )
}


def planted_files(case: Case, folder: Path, seed: int) -> tuple[str, ...]:
    """The case's result files in ``folder``, one per rate, drawn with ``seed``.

    Parameters
    ----------
    case : Case
        What to write.
    folder : Path
        Where.
    seed : int
        The draw of lengths, noise and jitter (arrivals: vllm bench serve's Poisson draw, seed 0).

    Returns
    -------
    tuple of str
        The files, in the order of ``case.rates``.
    """
    rng = np.random.default_rng(seed)
    out = []
    n = case.n
    for rate in case.rates:
        arr = vllm_arrivals(n, rate, 1.0, 0)
        if case.form == "summary":
            p, o = np.full(n, 1500), np.full(n, 40)
        else:
            p, o = rng.integers(100, 1200, n), rng.integers(8, 64, n)
        reqs = [Request(i, float(arr[i]), int(p[i]), int(o[i])) for i in range(n)]
        pr = simulate(M, "h100", reqs, overheads=case.planted).per_request
        ttft = pr["ttft_s"] * (1 + case.noise * rng.standard_normal(n))
        e2e = np.maximum(pr["e2e_s"] * (1 + case.noise * rng.standard_normal(n)), 1.001 * ttft)
        path = folder / f"{case.name}-{rate:g}.{'json' if case.form == 'summary' else 'csv'}"
        if case.form == "summary":
            tpot = (e2e - ttft) / (o - 1)
            end = float((arr + e2e).max())
            doc = {
                "backend": "vllm",
                "num_prompts": n,
                "request_rate": rate,
                "burstiness": 1.0,
                "max_concurrency": None,
                "duration": end,
                "completed": n,
                "total_input_tokens": int(p.sum()),
                "total_output_tokens": int(o.sum()),
                "request_throughput": n / end,
                "mean_ttft_ms": float(ttft.mean() * 1e3),
                "median_ttft_ms": float(np.median(ttft) * 1e3),
                "mean_tpot_ms": float(tpot.mean() * 1e3),
                "median_tpot_ms": float(np.median(tpot) * 1e3),
            }
            path.write_text(json.dumps(doc))
        else:
            sent = np.maximum(arr + case.jitter_s * rng.standard_normal(n), 0.0)
            rows = [
                f"{float(sent[i])!r},{p[i]},{o[i]},{float(ttft[i])!r},{float(e2e[i])!r}\n" for i in range(n)
            ]
            path.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n" + "".join(rows))
        out.append(str(path))
    return tuple(out)


def run_case(
    case: Case, folder: Path, seed: int, *, fit_options: dict[str, Any] | None = None, **request: Any
) -> Any:
    """Write the case's files and fit them as ``calibrate serving`` does (the middle rate held out).

    Parameters
    ----------
    case : Case
        The case.
    folder : Path
        Where its files go.
    seed : int
        Its draw.
    fit_options : dict, optional
        Keywords of :func:`~graphs.serving.planning.serving_fit.fit_serving` (``design_rounds`` ...).
    **request
        More fields of the :class:`~graphs.serving.planning.serving_fit_request.ServingFitRequest`.

    Returns
    -------
    ServingFitReport
    """
    from graphs.serving.planning.serving_fit_request import ServingFitRequest
    from graphs.serving.present.serving_fit_report import run_serving_fit
    from models.catalog import get_model

    files = planted_files(case, folder, seed)
    req = ServingFitRequest(files, "h100", terms=case.terms, **request)
    return run_serving_fit(req, get_model(M), **(fit_options or {}))


def partners(fit: Any, term: str) -> str:
    """The terms ``term`` trades off with in ``fit`` (their correlation), or collinear with."""
    out = [f"{b if a == term else a} ({c:+.2f})" for a, b, c in fit.trade_offs if term in (a, b)]
    out += [f"{b if a == term else a} (collinear)" for a, b in fit.collinear if term in (a, b)]
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument(
        "--design-rounds", type=int, default=None, help="fit_serving's design_rounds (0: Gauss-Newton alone)"
    )
    args = ap.parse_args(argv)
    opts = {} if args.design_rounds is None else {"design_rounds": args.design_rounds}
    import tempfile

    print(
        "| case | seed | term | planted | fitted | +- | off by (+-) | rms | simulations | trades off with |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.cases:
        case = CASES[name]
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as d:
                rep = run_case(case, Path(d), seed, fit_options=opts)
            fit = rep.fit
            for t in case.terms:
                want, got = getattr(case.planted, t), getattr(fit.overheads, t)
                se = fit.stderr.get(t)
                off = f"{(got - want) / se:+.1f}" if se else "n/a"
                print(
                    f"| {name} | {seed} | {t} | {want:.4g} | {got:.4g} | {se if se is None else f'{se:.2g}'} "
                    f"| {off} | {fit.rms_residual:.3g} | {fit.simulations} | {partners(fit, t)} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
