"""How close to real GPUs: bound validity, held-out errors and model-level checks.

Regenerates the tables of ``docs/accuracy.md`` (the README's "How close to real GPUs"
section links them) from the measured
corpus (``pip install -e '.[measured]'``): bound violations per family and
device, held-out MAPE / median / P90 for the three splits (random 20 % of
shapes, a device left out, a framework left out) side by side with our plain
bound and the speed-of-light-with-aiconfigurator's-factors formula, the
calibrated model's grey-box variant (times its residuals at the nearest training
shapes, ``costmodel.measured.residual``), and the
model-level TPOT/TTFT of Llama-3.1-8B (TP1) and Llama-3.1-70B (TP4) on H100
and B200 against the composition of the measured kernels for the same shapes.
Takes about 15 minutes on 2 cores; progress on stderr.

    python -m benchmarks.measured_accuracy                 # print the Markdown
    python -m benchmarks.measured_accuracy --write         # replace the section in docs/accuracy.md
    python -m benchmarks.measured_accuracy --plots out/    # predicted-vs-measured scatter plots
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.replay.pages import replace_section
from costmodel.measured.report import build_report, params_markdown, scatter_plot, to_markdown
from graphs.serving.pricing.predict import predict_step

BEGIN, END = "<!-- measured:begin -->", "<!-- measured:end -->"
CASES = [("llama-3.1-8b", 1), ("llama-3.1-70b", 4)]
DEVICES = ["h100-sxm", "b200"]


#: the issue's held-out targets (MAPE %): (family, split) -> target
TARGETS = {
    ("gemm", "shapes"): 10.0,
    ("context_attention", "shapes"): 15.0,
    ("generation_attention", "shapes"): 15.0,
    ("all_reduce", "shapes"): 15.0,
    ("gemm", "device"): 20.0,
    ("context_attention", "device"): 25.0,
    ("generation_attention", "device"): 25.0,
}


def targets(held: list) -> str:
    """Per target: the range over devices of the physical and the grey-box MAPE, and who misses."""
    lines = [
        "",
        "**Against the targets** (held-out MAPE %, range over devices; misses name the device):",
        "",
        "| family | split | target | calibrated | misses | calibrated + shape residuals | misses |",
        "|---|---|---:|---|---|---|---|",
    ]
    for (fam, split), goal in TARGETS.items():
        rows = [h for h in held if h.family == fam and h.split == split]
        if not rows:
            continue
        cells = []
        for key in ("calibrated", "corrected"):
            v = [getattr(h, key)["mape"] for h in rows]
            miss = [
                f"{h.device} {getattr(h, key)['mape']:.1f}" for h in rows if getattr(h, key)["mape"] > goal
            ]
            cells += [f"{min(v):.1f}-{max(v):.1f}", ", ".join(miss) or "none"]
        lines.append(f"| {fam} | {split} | {goal:.0f} | {' | '.join(cells)} |")
    return "\n".join(lines)


def model_level() -> str:
    lines = [
        "",
        "**Model level** (vLLM kernels; decode batch 64 at ctx 4096, prefill one 4096-token prompt; "
        "measured = the corpus's kernels for the same shapes, interpolated on its grid, plus the same "
        "bounds for the ops it does not measure; the grey-box column, with shape residuals, reads the "
        "same corpus rows as the measured column (the two interpolate them differently), so their "
        "agreement is no held-out test: that is the table above):",
        "",
        "| model | device | TP | TPOT bound | TPOT predicted | TPOT measured | error | with shape residuals | "
        "TTFT bound | TTFT predicted | TTFT measured | error | with shape residuals |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model, tp in CASES:
        for dev in DEVICES:
            sys.stderr.write(f"  model level: {model} tp{tp} on {dev}\n")
            d = predict_step(model, dev, "decode", batch=64, ctx=4096, tp=tp, measured=True)
            p = predict_step(model, dev, "prefill", batch=1, seq=4096, tp=tp, measured=True)
            lines.append(
                f"| {model} | {dev} | {tp} | {d.bound_s * 1e3:.2f} ms | {d.predicted_s * 1e3:.2f} ms | "
                f"{d.measured_s * 1e3:.2f} ms | {100 * d.error:+.1f} % | "
                f"{d.corrected_s * 1e3:.2f} ms ({100 * d.corrected_error:+.1f} %) | "
                f"{p.bound_s * 1e3:.1f} ms | {p.predicted_s * 1e3:.1f} ms | "
                f"{p.measured_s * 1e3:.1f} ms | {100 * p.error:+.1f} % | "
                f"{p.corrected_s * 1e3:.1f} ms ({100 * p.corrected_error:+.1f} %) |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--write",
        "--write-readme",
        dest="write",
        action="store_true",
        help="replace the generated section of docs/accuracy.md (between the markers)",
    )
    ap.add_argument("--plots", default=None, help="directory for predicted-vs-measured scatter plots")
    args = ap.parse_args()
    rep = build_report(progress=lambda s: sys.stderr.write(f"  {s}\n"))
    text = (
        to_markdown(rep)
        + "\n"
        + targets(rep["heldout"])
        + "\n"
        + model_level()
        + "\n\n"
        + params_markdown("h100-sxm", "vllm")
    )
    if args.plots:
        Path(args.plots).mkdir(parents=True, exist_ok=True)
        for fam in ("gemm", "context_attention", "generation_attention", "all_reduce"):
            scatter_plot(fam, "h100-sxm", str(Path(args.plots) / f"{fam}-h100-sxm.png"))
    if args.write:
        replace_section(Path(__file__).resolve().parent.parent / "docs" / "accuracy.md", BEGIN, END, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
