"""The engine overhead defaults, fitted to measured serving runs (what the defaults of
:data:`graphs.serving.pricing.overheads.DEFAULTS` for vLLM and TensorRT-LLM rest on).

The runs: the campaigns of SemiAnalysis InferenceX's database in the aiconfigurator wheel's
``silicon_sample.csv`` (attribution inferred, ``benchmarks/silicon_accuracy.py``'s ``client()``: Llama-3.1-70B FP8, FP8 KV cache,
1k/1k, 1k/8k and 8k/1k, TP 1-8, 4-128 clients), each replayed as its documented client
(``serving_accuracy``'s ``client`` load: ``C`` clients back to back from a burst, ``10 C``
requests, lengths uniform on ``[0.8 L, L]``, every request read) with the engine settings of
InferenceX's scripts, its kernels priced by the engine's own measured kernels.

The fit: :func:`graphs.serving.planning.serving_fit.fit_serving` (what ``costmodel calibrate serving``
runs) of the CPU time per iteration ``a`` (``iteration_s``) and per scheduled sequence ``b``
(``per_seq_s``) of :mod:`graphs.serving.pricing.overheads`, per engine, to the mean TPOT of each fitted
run (``bins=1``: the sample publishes means only), by relative least squares, the terms kept
non-negative. TPOT only: the CPU terms are paid once per iteration, which TPOT measures
directly, while these runs' TTFT mixes them with the prefill kernels' error and the engine's
admission rules (vLLM's H200 TTFT is 14-16 % short at 1k and at 8k prompts alike); a first fit
that also read TTFT moved ``per_seq_s`` to close TTFT gaps and made the held-out TPOT worse. So
the request path ``request_s`` is not fitted here: ``benchmarks/request_path_fit.py`` fits it
to the validation tables' TTFT (tokenisation and prefix-cache hashing are sourced terms).
The fit is Gauss-Newton alone (``design_rounds=0``), the procedure the defaults were fitted
with before ``fit_serving`` gained its design rounds and bootstrap errors (2026-12-07): refitting
with them would move every default, a change to validate on its own, not a regeneration.
The kernel scale stays 1 (a per-device correction is not an engine default), and the terms the
fit's module doc names collinear (per new token, per output token) keep their values. Fitted:
the H200 runs at :data:`FIT_SHAPES`, :data:`FIT_TP` and :data:`FIT_CONCURRENCY` (12 per
engine); held out: every other H200 and H100 run (other lengths, other TP, other loads, another
GPU), each predicted with the fitted terms and with the terms before the fit, side by side.
B200 runs are left out of both: the corpus's small-M GEMM timings there are 3-5x the
weight-read bound (``docs/silicon_accuracy.md``), a kernel error the engine terms would absorb.

    python -m benchmarks.overhead_fit --jobs 2          # Markdown to stdout (about 15 min)
    python -m benchmarks.overhead_fit --jobs 2 --write  # docs/overhead_fit.md
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.replay import predictor, row_workload
from benchmarks.replay.pages import write_page
from benchmarks.replay.silicon import CLIENT, load_sample, silicon_rows
from graphs.serving import simulate
from graphs.serving.planning.bench_results import BenchRun
from graphs.serving.planning.serving_fit import ServingFit, SimulateRun, fit_serving
from graphs.serving.pricing.overheads import TERMS as ALL_TERMS
from graphs.serving.pricing.overheads import EngineOverheads

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "overhead_fit.md"
ENGINES = {"vllm": "vllm", "trtllm": "tensorrt-llm"}  #: framework -> the sample's engine name
TERMS = ("iteration_s", "per_seq_s")
METRICS = ("tpot",)  #: what the fit reads (module doc: TTFT is not fitted)
FIT_DEVICE = "h200-sxm"
FIT_SHAPES = ((1024, 1024), (8192, 1024))
FIT_TP = (2, 8)
FIT_CONCURRENCY = (4, 16, 64)
DEVICES = ("h200-sxm", "h100-sxm")  #: fitted or held out (B200: module doc)
ITERATIONS = 4  #: Gauss-Newton steps (the residuals are near affine in the terms)
#: where the fit starts, and what its ``before`` columns replay: the assumed values these terms
#: had before this fit replaced them (the git history of ``graphs/serving/pricing/overheads.py``)
START = {
    "vllm": {"iteration_s": 3e-4, "per_seq_s": 2e-6},
    "trtllm": {"iteration_s": 2e-4, "per_seq_s": 1e-6},
}


@dataclass(frozen=True)
class Run:
    """One measured run: its TTFT and TPOT rows, and its replay."""

    ttft: dict[str, str]
    tpot: dict[str, str]
    workload: Any  #: serving_accuracy.RowWorkload

    @property
    def fitted(self) -> bool:
        r = self.tpot
        return (
            r["device"] == FIT_DEVICE
            and (int(r["isl"]), int(r["osl"])) in FIT_SHAPES
            and int(r["tp"]) in FIT_TP
            and int(r["concurrency"]) in FIT_CONCURRENCY
        )

    @property
    def label(self) -> str:
        r = self.tpot
        return f"{r['device']} TP{r['tp']} {r['isl']}/{r['osl']} C{r['concurrency']}"

    def bench(self) -> BenchRun:
        """The run as the fit reads it: its requests, each carrying the published means (a run's
        mean TTFT and TPOT are all the sample gives: with ``bins=1`` the fit reads only those)."""
        reqs = self.workload.requests
        prompt = np.array([q.prompt for q in reqs])
        output = np.array([q.output for q in reqs])
        ttft = np.full(len(reqs), float(self.ttft["value"]))
        e2e = ttft + (output - 1) * float(self.tpot["value"])
        return BenchRun(
            self.tpot["id"][: -len("-tpot")],
            None,
            np.zeros(len(reqs)),
            prompt,
            output,
            ttft,
            e2e,
            concurrency=self.workload.concurrency,
        )

    def simulator(self) -> SimulateRun:
        """``simulate_run`` for :func:`fit_serving`: this run's model, GPU, engine and kernels,
        with the terms given and this engine's own CUDA-graph sizes and policy (the row's engine
        profile's, :func:`benchmarks.replay.workload.overheads_profile`, else its framework's)."""
        w = self.workload
        eng = w.engine
        own = EngineOverheads.for_framework(
            w.profile or w.framework,
            max_num_seqs=eng.max_num_seqs,
            max_num_batched_tokens=eng.max_num_batched_tokens,
        )
        pred = predictor(w)

        def run(requests: list[Any], ov: EngineOverheads, concurrency: int | None) -> Any:
            terms = {t: getattr(ov, t) for t in ALL_TERMS}
            return simulate(
                w.config,
                w.device,
                requests,
                topology=w.topology,
                engine=eng,
                predictor=pred,
                overheads=own.with_terms(**terms),
                concurrency=concurrency,
            )

        return run


def runs(framework: str) -> list[Run]:
    """The engine's InferenceX runs on :data:`DEVICES`, in the sample's order."""
    rows, _ = silicon_rows(load_sample())
    by_id: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        if r["source_kind"] == CLIENT and r["engine"] == ENGINES[framework] and r["device"] in DEVICES:
            by_id.setdefault(r["id"].rsplit("-", 1)[0], {})[r["metric"]] = r
    return [Run(m["ttft_mean_s"], m["tpot_mean_s"], row_workload(m["tpot_mean_s"])) for m in by_id.values()]


@dataclass(frozen=True)
class EngineFit:
    framework: str
    fit: ServingFit
    before: list[tuple[float, float]]  #: per run: TTFT and TPOT errors with the terms before the fit
    labels: list[str]
    seconds: float


def fit_engine(framework: str, progress: bool = False) -> EngineFit:
    """Fit :data:`TERMS` of ``framework`` (module doc), and every run's errors before and after."""
    t0 = time.time()
    rs = runs(framework)
    base = EngineOverheads.for_framework(framework).with_terms(**START[framework])
    say = (lambda m: print(f"  {framework}: {m}", file=sys.stderr)) if progress else None
    fit = fit_serving(
        [r.bench() for r in rs],
        [r.simulator() for r in rs],
        base=base,
        held_out=[i for i, r in enumerate(rs) if not r.fitted],
        terms=TERMS,
        iterations=ITERATIONS,
        model="llama-3.1-70b",
        device=FIT_DEVICE,
        predict=framework,
        progress=say,
        bins=1,
        metrics=METRICS,
        # the procedure the DEFAULTS were fitted with (module doc): Gauss-Newton alone, its local
        # standard errors; the design rounds fit_serving runs by default since 2026-12-07 would
        # move the defaults every simulation rests on, a change of its own to validate
        design_rounds=0,
    )
    before = []
    for r in rs:
        res = r.simulator()(r.bench().requests, base, r.workload.concurrency)
        pr = res.per_request
        before.append(
            (
                float(np.mean(pr["ttft_s"])) / float(r.ttft["value"]) - 1,
                float(np.nanmean(pr["tpot_s"])) / float(r.tpot["value"]) - 1,
            )
        )
    return EngineFit(framework, fit, before, [r.label for r in rs], time.time() - t0)


def _rms(xs: list[float]) -> str:
    """Root mean square of relative errors (what the fit minimises), in per cent."""
    return f"{math.sqrt(sum(x * x for x in xs) / len(xs)) * 100:.1f} %" if xs else "-"


def _med(xs: list[float]) -> str:
    return f"{statistics.median(abs(x) for x in xs) * 100:.1f} %" if xs else "-"


def markdown(fits: list[EngineFit]) -> str:
    """The fitted terms with their standard errors, and the errors before and after per group."""
    seconds = sum(f.seconds for f in fits)
    out = [
        "<!-- generated by python -m benchmarks.overhead_fit --write: do not edit by hand -->",
        "# Engine overhead defaults, fitted",
        "",
        f"Generated by `python -m benchmarks.overhead_fit --write` ({seconds:.0f} s of fitting). "
        "What `graphs.serving.pricing.overheads.DEFAULTS` for vLLM and TensorRT-LLM rest on. The method "
        "is the script's module doc: SemiAnalysis InferenceX's Llama-3.1-70B FP8 runs in the "
        "aiconfigurator wheel's `silicon_sample.csv` (attribution to InferenceX inferred: "
        "`docs/silicon_accuracy.md`), replayed as InferenceX's client, kernels priced by the "
        "engine's measured kernels; `iteration_s` and `per_seq_s` fitted per engine by "
        f"`fit_serving` to the mean TPOT (not TTFT: the script's module doc says why) of the H200 runs at ISL/OSL "
        f"{', '.join(f'{a}/{b}' for a, b in FIT_SHAPES)}, TP {', '.join(map(str, FIT_TP))} and "
        f"{', '.join(map(str, FIT_CONCURRENCY))} clients; every other H200 and H100 run held out. "
        "`before`: the same replay with the assumed values the fit started from (those the "
        "defaults had before it); the other terms (request path, per token, per output token) "
        "are the defaults, assumed. Error = model / measured - 1.",
        "",
        "| engine | term | before | fitted | standard error |",
        "|---|---|---|---|---|",
    ]
    for f in fits:
        base = EngineOverheads.for_framework(f.framework).with_terms(**START[f.framework])
        for t in TERMS:
            se = f.fit.stderr.get(t)
            out.append(
                f"| {f.framework} | `{t}` | {getattr(base, t):.3g} s | {getattr(f.fit.overheads, t):.3g} s | "
                + (
                    "none: held at its lower bound, 0 |"
                    if t in f.fit.at_bound
                    else f"{se:.2g} s |"
                    if se is not None
                    else "not determined |"
                )
            )
    out += [
        "",
        "| engine | runs | n | TTFT median before / fitted | TPOT median before / fitted | TPOT RMS before / fitted |",
        "|---|---|---|---|---|---|",
    ]
    for f in fits:
        groups: dict[str, list[int]] = {}
        for i, (e, lab) in enumerate(zip(f.fit.runs, f.labels, strict=True)):
            dev = lab.split()[0]
            key = f"fitted ({FIT_DEVICE})" if e.fitted else f"held out ({dev})"
            groups.setdefault(key, []).append(i)
        for key, idx in sorted(groups.items()):
            out.append(
                f"| {f.framework} | {key} | {len(idx)} | "
                f"{_med([f.before[i][0] for i in idx])} / {_med([f.fit.runs[i].ttft_err for i in idx])} | "
                f"{_med([f.before[i][1] for i in idx])} / {_med([f.fit.runs[i].tpot_err for i in idx])} | "
                f"{_rms([f.before[i][1] for i in idx])} / {_rms([f.fit.runs[i].tpot_err for i in idx])} |"
            )
    out += [
        "",
        "Median |error| per group, and the root mean square of the TPOT errors (what the fit minimises "
        "over the fitted runs). Every run:",
        "",
        "| engine | run | fitted | TTFT before / fitted | TPOT before / fitted |",
        "|---|---|---|---|---|",
    ]
    for f in fits:
        for e, b, lab in zip(f.fit.runs, f.before, f.labels, strict=True):
            out.append(
                f"| {f.framework} | {lab} | {'yes' if e.fitted else 'no'} | {b[0] * 100:+.1f} % / "
                f"{e.ttft_err * 100:+.1f} % | {b[1] * 100:+.1f} % / {e.tpot_err * 100:+.1f} % |"
            )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"write {DOC_PATH.name} in docs/")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one engine each; at most 2)")
    ap.add_argument("--engines", default="vllm,trtllm", help="comma-separated: vllm, trtllm")
    args = ap.parse_args(argv)
    names = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in names if e not in ENGINES]
    if bad or not names:
        ap.error(f"--engines: {bad[0] if bad else '(none)'!r} not allowed; allowed: {', '.join(ENGINES)}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    tty = sys.stderr.isatty()
    if args.jobs == 1:
        fits = [fit_engine(e, tty) for e in names]
    else:
        with ProcessPoolExecutor(min(args.jobs, len(names))) as pool:
            fits = list(pool.map(fit_engine, names, [tty] * len(names)))
    text = markdown(fits)
    if args.write:
        write_page(DOC_PATH, text)
        print(f"wrote {DOC_PATH}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
