"""The prefill/decode roofline script (chapter 18), through the engine.

    python examples/prefill_decode_roofline.py
    python examples/prefill_decode_roofline.py --json

The seed's device is "H100 SXM5 public spec, rounded": 1000 TFLOP/s fp16 and
3.0 TB/s, built here as a Hardware spec (the catalog's H100 is 989.4 TFLOP/s
and 3.35 TB/s). Differences from the seed:
* parameter counts here include the q/k/v biases and the norm weights that the
  seed's shape formula leaves out (333,312 parameters): 7.6156B total (seed
  7.6153B), 6.5256B non-embedding (seed 6.5253B); both round to the model
  card's 7.61B / 6.53B;
* the weight-read bound is shown both as the seed computes it (every weight
  once, 5.08 ms) and as the decode graph reads weights (the input embedding is
  a gather of B rows, 4.71 ms).
"""

from __future__ import annotations

import argparse
import json

from costmodel import (
    Hardware,
    MemoryLevel,
    Roof,
    as_float,
    bound,
    decode_attention_intensity,
    gemm_crossover,
    get_device,
    op_cost,
)
from graphs import decode_report
from models import get_model, param_counts

SEED_H100 = Hardware(
    "h100-seed",
    roofs=(
        Roof("tensor", "bf16", 1000e12, "seed: H100_TFLOPS_FP16 = 1000"),
        Roof("vector", "fp32", 67e12, "H100 whitepaper FP32 (rounded)"),
    ),
    memory=(MemoryLevel("dram", 3.0e12, 80e9, "seed: H100_BW_BYTES_PER_S = 3.0e12"),),
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cfg = get_model("qwen2.5-7b")
    balance = as_float(SEED_H100.balance())
    pc = param_counts(cfg)
    d, i = 3584, 18944
    # (label, N, K) for [M,K] x [K,N]: a projection [in -> out] has K = in, N = out. The seed
    # lists (I, d) for the down-projection, i.e. N and K the other way round; with one dtype the
    # bytes a(MK + KN + MN) are symmetric in N and K, so M* is the same either way.
    shapes = [
        ("MLP down-proj [I -> d]", d, i),
        ("MLP gate/up [d -> I]", i, d),
        ("QKV projection [d -> d + 2*Hkv*Hd]", d + 2 * 4 * 128, d),
        ("square GEMM (reference)", 4096, 4096),
    ]
    rep = decode_report(cfg, SEED_H100, batch=1, ctx=1)
    if args.json:
        print(
            json.dumps(
                {
                    "balance_flop_per_byte": balance,
                    "params": {
                        "non_embedding_params": as_float(pc.non_embedding),
                        "total_params": as_float(pc.total),
                        "embedding_params": as_float(pc.embedding + pc.lm_head),
                        "total_bytes": as_float(pc.total) * 2,
                    },
                    "decode_weight_lower_bound_ms": rep.read_every_weight_once_s * 1e3,
                    "decode_graph_weight_traffic_ms": rep.weight_read_s * 1e3,
                    "gemm_crossover": {
                        "mlp_down": gemm_crossover(N=d, K=i, hw=SEED_H100).integer,
                        "square_4096": gemm_crossover(N=4096, K=4096, hw=SEED_H100).integer,
                    },
                },
                indent=2,
            )
        )
        return
    print(f"balance (H100 SXM5 public spec, fp16): {balance:.1f} FLOP/B")
    cat = get_device("h100")
    print(
        f"  differs from the catalog's H100 ({as_float(cat.balance()):.1f} FLOP/B) because the seed rounds "
        f"the roofs: {as_float(SEED_H100.require_peak('tensor', 'bf16')) / 1e12:.0f} vs "
        f"{as_float(cat.require_peak('tensor', 'bf16')) / 1e12:.1f} TFLOP/s dense bf16, "
        f"{as_float(SEED_H100.bandwidth()) / 1e12:.2f} vs {as_float(cat.bandwidth()) / 1e12:.2f} TB/s\n"
    )
    # the seed's shape formula: q, o (d*d each), k, v (d*Hkv*Hd each), gate, up, down; no biases or norms
    seed_layer = 2 * d * d + 2 * d * (4 * 128) + 3 * d * i
    seed_non_emb = seed_layer * 28
    print(f"non-embedding params: {as_float(pc.non_embedding) / 1e9:.4f} B (card: 6.53 B)")
    print(
        f"total params:         {as_float(pc.total) / 1e9:.4f} B (card: 7.61 B), "
        f"rel. error {abs(as_float(pc.total) / 7.61e9 - 1):.4%}"
    )
    print(
        f"  differs from the seed's {seed_non_emb / 1e9:.4f} B non-embedding by "
        f"{as_float(pc.non_embedding) - seed_non_emb:,.0f}: the q/k/v biases and the norm weights its "
        "shape formula leaves out"
    )
    for name, n, k in shapes:
        print(f"\n{name}: [M,{k}] x [{k},{n}]")
        print(f"{'M':>6} | {'FLOP':>12} | {'bytes':>14} | {'AI (F/B)':>10} | verdict")
        for m in (1, 8, 64, 512, 2048, 8192, 32768):
            c = op_cost("gemm", M=m, N=n, K=k)
            kind = "compute-bound" if bound(c, SEED_H100).kind == "tensor" else "memory-bound"
            print(
                f"{m:>6} | {as_float(c.flops):>12.3e} | {as_float(c.bytes):>14.3e} | "
                f"{as_float(c.intensity):>10.1f} | {kind}"
            )
        xo = gemm_crossover(N=n, K=k, hw=SEED_H100)
        print(
            f"  -> crossover M* = {xo.integer} (exact {as_float(xo.exact):.1f}); M << N,K: balance*b/2 = "
            f"{as_float(xo.asymptotic):.0f}"
        )
    print("\ndecode attention: AI = 2*H_q/(H_kv*b), independent of context")
    for label, hkv in (("MHA", 28), ("GQA", 4), ("MQA", 1)):
        print(f"  {label} (H_kv={hkv:2d}, b=2): {as_float(decode_attention_intensity(28, hkv)):8.1f} FLOP/B")
    print(f"  balance: {balance:.1f} FLOP/B")
    ms = rep.read_every_weight_once_s * 1e3
    print(
        f"\ndecode step weight floor: {as_float(pc.total) * 2 / 1e9:.2f} GB at 3.0 TB/s -> {ms:.2f} ms "
        f"({1000 / ms:.1f} tok/s per request)"
    )
    print(
        f"  the graph reads {rep.weight_read_s * 1e3:.2f} ms of weights: the input-embedding table "
        f"({rep.embedding_table_read_s * 1e3:.2f} ms of it) is gathered, one row per token, not streamed"
    )
    for batch in (1, 2, 8, 32, 128):
        print(
            f"  batch {batch:4d}: weights per request {as_float(pc.total) * 2 / batch / 1e6:10.2f} MB, "
            f"ideal {1000 / ms * batch:10.1f} tok/s"
        )


if __name__ == "__main__":
    main()
