"""The profiling article's memory_ledger.py: the 7B ledger and a measured batch sweep.

    python examples/memory_ledger.py           # ledger + batch sweep (d=4096)
    python examples/memory_ledger.py --small   # batch sweep with d=1024

Part 1 reproduces the article's table exactly (7e9 fp16 parameters, 32 layers,
d_kv 4096, prompts of 4096 unchunked, 128 KiB activations per token, 30% then
4% overhead, a 78 GiB budget). Part 2 measures a fixed fp32 weight times B rows
on this machine against its bound on a probed spec; timings are this machine's,
not the article's laptop.
"""

from __future__ import annotations

import argparse

from costmodel import MemoryLedger, Overhead, max_batch
from costmodel.ledger import GIB
from costmodel.measure.microbench import batch_sweep
from costmodel.measure.probe import probe


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args(argv)
    weights, kv, act, seq, budget = 7e9 * 2, 2 * 32 * 4096 * 2, 128 * 1024, 4096, 78 * GIB
    print("1. memory ledger: how many sequences fit a 78 GiB budget")
    print(
        f"   7B fp16 weights = {weights / GIB:.1f} GiB; KV per token = {kv / 1024:.0f} KiB "
        f"(a {seq}-token sequence = {kv * seq / GIB:.2f} GiB)"
    )
    for rho in (0.30, 0.04):
        led = MemoryLedger(weights, kv, act, Overhead("fraction_of_sum", rho))
        print(f"\n   overhead {rho:.0%} of the other terms")
        print(f"   {'batch':>5} {'weights':>8} {'KV':>8} {'act':>8} {'overhead':>9} {'total':>8}")
        for b in (1, 4, 8, 16, 24, 32):
            t = {
                k: float(v) / GIB
                for k, v in led.terms(batch=b, cached_tokens=seq, active_tokens=b * seq).as_dict().items()
            }
            fits = "fits" if t["total"] * GIB <= budget else "OOM"
            print(
                f"   {b:>5} {t['weights']:>7.1f}G {t['kv_cache']:>7.2f}G {t['activations']:>7.2f}G "
                f"{t['overhead']:>8.2f}G {t['total']:>7.2f}G  {fits}"
            )
        print(f"   max batch: {max_batch(led, budget, ctx=seq, active_per_sequence=seq).value}")
    print("\n2. batch sweep of a fixed weight on this machine")
    hw = probe(small=True, use_torch=False).hardware()
    d = 1024 if args.small else 4096
    rows = batch_sweep(hw, d=d, repeats=5 if args.small else 15)
    ridge = float(hw.balance("tensor", "fp32"))
    print(f"   W [{d},{d}] fp32; probed ridge I* = {ridge:.1f} FLOP/B")
    print(f"   {'B':>5} {'I':>8} {'bound':>7} {'latency ms':>11} {'bound ms':>9} {'achieved':>9}  flags")
    for r in rows:
        print(
            f"   {r.shape['B']:>5} {r.intensity:>8.2f} {r.kind:>7} {r.measured_s * 1e3:>11.3f} "
            f"{r.predicted_s * 1e3:>9.3f} {100 * r.achieved_fraction:>8.0f}%  {','.join(r.flags)}"
        )
    if any("above_bound" in r.flags for r in rows):
        print(
            "   above_bound: faster than the bound on the probed spec (over 110%): no kernel beats its roof,\n"
            "   so the probe's peak (measured small, maybe in a busy moment) is too low or the timing is wrong"
        )
    if any("slower_than_smaller_batch" in r.flags for r in rows):
        print(
            "   slower_than_smaller_batch: over 1.5x the latency of a larger batch (a library code-path change or a busy moment)"
        )
    print(
        f"\ndifferences from the seed: part 1 uses the article's inputs and matches its table; part 2's "
        f"timings are this machine's ({float(hw.bandwidth()) / 1e9:.1f} GB/s probed), not the article's laptop "
        "(71.8 GB/s), so where a batch turns compute-bound moves with this machine's ridge"
    )


if __name__ == "__main__":
    main()
