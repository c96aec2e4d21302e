"""Where speculative decoding stops paying as the batch grows: Llama-3.1-70B on four H100s
(tp 4) drafted by Llama-3.2-1B (k = 4 tokens per step, acceptance 0.7 per position, expected-value
mode), served by the simulator with and without the draft at each closed-loop batch B (B
clients, 3 B requests of 1,024 prompt and 256 output tokens). Prints mean TPOT, output tokens/s,
the TPOT speed-up, tokens per verification, the draft's share of the forward time, and the first
batch where the speed-up falls below 1.

Why it stops (graphs.serving.sim.specdec_batch.speedup_by_batch): each speculating sequence sends
k + 1 = 5 tokens through the token-wise kernels, which turn compute-bound near B ~ 300 / 5, so the
verify then costs ~5x a plain step's weight-bound work for E(0.7, 4) = 2.77 tokens.

    python -m benchmarks.specdec_batch [--alpha 0.7] [--k 4] [--device h100] [--tp 4]
"""

from __future__ import annotations

import argparse

from graphs.serving.sim.specdec_batch import speedup_by_batch
from graphs.serving.sim.specdec_sim import SpecConfig

BATCHES = (1, 8, 32, 64, 96, 128, 160, 192, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", default="0.7", help="acceptance per drafted position (or k rates a1,..,ak)")
    ap.add_argument("--k", type=int, default=4, help="tokens drafted per step")
    ap.add_argument("--device", default="h100")
    ap.add_argument("--tp", type=int, default=4)
    ap.add_argument("--draft", default="llama-3.2-1b")
    args = ap.parse_args()
    spec = SpecConfig.parse(args.draft, args.k, args.alpha, expected=True)
    rows = speedup_by_batch("llama-3.1-70b", args.device, spec, BATCHES, tp=args.tp)
    print(
        f"llama-3.1-70b on {args.device} x{args.tp}, draft {args.draft}, k = {args.k}, acceptance {args.alpha} "
        f"(E = {spec.expected_tokens():.2f} tokens per verification)"
    )
    print(
        f"{'batch':>6s} {'TPOT ms':>9s} {'spec ms':>9s} {'speed-up':>9s} {'tok/s':>8s} {'spec tok/s':>10s} {'draft':>6s}"
    )
    for r in rows:
        print(
            f"{r.batch:6d} {r.plain_tpot_s * 1e3:9.2f} {r.spec_tpot_s * 1e3:9.2f} {r.speedup:9.2f} "
            f"{r.plain_tokens_per_s:8.0f} {r.spec_tokens_per_s:10.0f} {100 * r.draft_share:5.1f}%"
        )
    stop = next((r.batch for r in rows if r.speedup < 1), None)
    print(
        f"speculation stops paying at batch {stop}"
        if stop
        else f"speculation still pays at batch {rows[-1].batch} (the largest tried)"
    )


if __name__ == "__main__":
    main()
