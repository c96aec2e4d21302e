"""Where vLLM's simulated TTFT misses InferenceX's Llama-3.1-70B silicon runs, by device, TP and
prompt length (issue 42 items 2 and 6): a diagnostic, it fits and writes nothing.

Two tables, calibration rows only (the deployments of ``benchmarks/data/heldout.toml`` are
dropped before any number is read):

* the TTFT residuals of the vLLM rows of ``docs/silicon_accuracy_rows.csv``: per deployment
  (device, GEMM dtype, TP) and prompt length, the median over the rows of ``measured -
  predicted`` (what the kernels and the simulated queue leave: the request path and any miss)
  and of ``measured - simulated`` (what the profile's overheads still leave), in ms, at light
  load (at most 8 clients) and over every concurrency;
* the prefill step's prediction by kernel family
  (:func:`graphs.serving.pricing.predict.predict_step`, the ``vllm`` corpus, one sequence of the
  prompt length, dynamic FP8 scales as the replay prices these rows), in ms.

    python -m benchmarks.vllm_ttft_residual
    python -m benchmarks.vllm_ttft_residual --no-steps     # the residuals alone (seconds)

What it showed on the tables of b2b77de (the report of branch ``vllmttft``): at light load the
measured TTFT of a 1,024-token prompt tracks the predicted one on H100 and H200 (measured -
predicted +1 to +34 ms, and the simulated TTFT is longer than measured at TP >= 2), but on B200 it
stops falling with TP and dtype near 90 ms (FP4 TP 1, 4, 8: 92, 88, 92 ms measured against 69,
41, 35 ms predicted; FP8 TP 1, 2, 8: 142, 110, 106 against 100, 71, 43), while B200's 8,192-token
prompts, whose prefill steps are far longer than that, stay within -3 to -9 % of measured at TP 8.
The miss is a floor of B200's and not one term of every TP: no device-independent request-path
term removes it (the H100 and H200 TP 8 rows would move the other way).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from pathlib import Path

from benchmarks import served_errors as se

__all__ = ["LIGHT", "MODEL", "PROMPTS", "residual_table", "residuals", "step_table", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: the model of InferenceX's vLLM line-up (the only one whose rows it reads)
MODEL = "llama-3.1-70b"
ROWS = ROOT / "docs" / "silicon_accuracy_rows.csv"
#: the prompt lengths of InferenceX's Llama-3.1-70B line-up (1k/1k, 1k/8k, 8k/1k)
PROMPTS = (1024, 8192)
#: the light-load cut (clients), as benchmarks/request_path_fit.py's
LIGHT = 8


Row = tuple[int, float, float, float, float]


def residuals() -> dict[tuple[str, str, int, int], list[Row]]:
    """``{(device, dtype, tp, isl): [(clients, measured - predicted, measured - simulated,
    measured, predicted)]}`` (ms) of the compared vLLM TTFT rows of the silicon table outside the
    held-out split."""
    held = se.heldout()
    table = {r["id"]: r for r in csv.DictReader(ROWS.open(encoding="utf-8"))}
    out: dict[tuple[str, str, int, int], list[Row]] = defaultdict(list)
    for r in se.silicon_row_dicts():
        if r["engine"] != "vllm" or r["metric"] != "ttft_mean_s" or f"silicon:{se.deployment(r)}" in held:
            continue
        if r["model"] != MODEL or not r["concurrency"].strip():
            continue  # the step table prices Llama-3.1-70B; a rate-only row has no client count
        t = table.get(r["id"])
        if t is None or t["excluded"] or not t["simulated_s"]:
            continue
        meas, pred, sim = (float(t[k]) for k in ("measured_s", "predicted_s", "simulated_s"))
        key = (r["device"], r["precision_weights"] or "bf16", int(r["tp"]), int(r["isl"]))
        out[key].append(
            (int(r["concurrency"]), (meas - pred) * 1e3, (meas - sim) * 1e3, meas * 1e3, pred * 1e3)
        )
    return dict(out)


def residual_table(res: dict[tuple[str, str, int, int], list[Row]]) -> str:
    """The residuals as a markdown table (medians, ms; ``n``: rows; at light load also the
    measured and the predicted TTFT themselves)."""
    lines = [
        "| device | dtype | TP | ISL | n (<= 8 clients) | measured | predicted | meas - pred | meas - sim "
        "| n (all) | meas - pred | meas - sim |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(res):
        rows = res[key]
        light = [x for x in rows if x[0] <= LIGHT]

        def med(xs: list[Row], i: int, sign: str = "+") -> str:
            return f"{statistics.median(x[i] for x in xs):{sign}.0f}" if xs else "-"

        dev, dt, tp, isl = key
        lines.append(
            f"| {dev} | {dt} | {tp} | {isl} | {len(light)} | {med(light, 3, '')} | {med(light, 4, '')} "
            f"| {med(light, 1)} | {med(light, 2)} "
            f"| {len(rows)} | {med(rows, 1)} | {med(rows, 2)} |"
        )
    return "\n".join(lines)


def step_table(keys: list[tuple[str, str, int]]) -> str:
    """The predicted prefill step of one prompt per (device, dtype, TP), by kernel family (ms)."""
    from benchmarks.replay.workload import apply_dtypes, resolve_model
    from graphs.serving.pricing.predict import predict_step

    lines = ["| device | dtype | TP | ISL | step (ms) | by family (ms) |", "|---|---|---|---|---|---|"]
    for dev, dt, tp in keys:
        mm = {"fp8": "fp8", "fp4": "nvfp4"}.get(dt)
        cfg = apply_dtypes(
            resolve_model(MODEL),
            argparse.Namespace(weight_dtype=mm, matmul_dtype=mm, kv_dtype="fp8"),
        )
        for isl in PROMPTS:
            p = predict_step(cfg, dev, "prefill", batch=1, seq=isl, tp=tp, fp8_scales="dynamic")
            fams = sorted(p.by_family.items(), key=lambda kv: -kv[1]["predicted_s"])
            parts = ", ".join(f"{f} {v['predicted_s'] * 1e3:.1f}" for f, v in fams)
            lines.append(f"| {dev} | {dt} | {tp} | {isl} | {p.predicted_s * 1e3:.1f} | {parts} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the residual table and (unless ``--no-steps``) the prefill steps' decomposition."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-steps", action="store_true", help="the residuals alone, no step prediction")
    args = ap.parse_args(argv)
    res = residuals()
    print("TTFT residuals of the vLLM calibration rows (ms, medians):\n")
    print(residual_table(res))
    if not args.no_steps:
        keys = sorted({(d, t, tp) for d, t, tp, _ in res})
        print("\nPredicted prefill step of one prompt (ms):\n")
        print(step_table(keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
