"""The lecture's topics, each computed through the engine's public API.

    python examples/lecture_topics.py

1. critical batch with mixed precision  2. model ledger and a decode step
3. capacity  4. network roofline of a split matmul  5. latency/throughput/energy
frontier  6. near vs far memory  7. NVFP4 / MXFP4 error  8. the exp/SFU
bottleneck of attention per head dim  9. energy: weight reads vs arithmetic.
"""

from __future__ import annotations

import numpy as np
import sympy

from costmodel import as_float, bound, gemm_crossover, get_device, op_cost
from costmodel.derive import split_matmul_network
from costmodel.energy import energy_ridge, reuse_factor
from costmodel.formats import compare_formats
from graphs import capacity, decode_energy_vs_batch, decode_report, near_far_memory, sweep
from models import get_model, param_counts


def main() -> None:
    h100, b200 = get_device("h100"), get_device("b200")
    print("1. critical batch of a [M,4096] x [4096,14336] GEMM (M* where it turns compute-bound)")
    for label, hw, kw in (
        ("H100 bf16", h100, {}),
        ("H100 bf16 act, int8 weights", h100, {"w_dtype": "int8"}),
        ("H100 fp8 (W8A8)", h100, {"dtype": "fp8"}),
        ("B200 bf16", b200, {}),
        ("B200 NVFP4 (W4A4)", b200, {"dtype": "nvfp4"}),
    ):
        xo = gemm_crossover(N=14336, K=4096, hw=hw, **kw)
        print(f"   {label:28s} M* = {xo.integer:5d}  (ridge {as_float(xo.balance):7.1f} FLOP/B)")
    print("   NVFP4 on B200 gains 4x in compute but saves 3.6x in bytes: M* moves up; fp8 on H100 doubles")
    print("   both and leaves M* about where it was (its bf16 output does not shrink); int8 weights keep")
    print("   the bf16 roof and halve W's bytes: M* halves.")

    cfg = get_model("llama-3.1-8b")
    print("\n2. Llama-3.1-8B: ledger and one decode step on H100 (batch 16, ctx 8192)")
    pc = param_counts(cfg)
    print(f"   params {as_float(pc.total) / 1e9:.2f} B ({as_float(pc.total) * 2 / 1e9:.1f} GB bf16)")
    rep = decode_report(cfg, h100, batch=16, ctx=8192)
    print(
        f"   weight read {rep.weight_read_s * 1e3:.2f} ms, KV read {rep.kv_read_s * 1e3:.2f} ms, "
        f"TPOT {rep.step_s * 1e3:.2f} ms -> {rep.tokens_per_s_per_device:.0f} tok/s per device"
    )
    print("\n3. capacity on H100")
    for ctx in (2048, 8192, 32768):
        print(f"   ctx {ctx:6d}: max batch {capacity(cfg, h100, batch=1, ctx=ctx).max_batch.value}")
    print("\n4. network roofline of a row-parallel matmul over NVLink (H100)")
    for p in (2, 4, 8):
        d = split_matmul_network(p=p, hw=h100)
        print(
            f"   p={p}: I_net = {d.network_intensity}, compute hides the all-reduce when K >= "
            f"{as_float(d.K_star):,.0f}"
        )
    print("\n5. latency / throughput / energy frontier (Llama-3.1-8B decode, H100 vs B200)")
    res = sweep(cfg, devices=["h100", "b200"], batches=[1, 4, 16, 64, 256], ctxs=[4096])
    front = res.frontier()  # Pareto-optimal points: per-user speed vs per-device throughput
    for r in front:
        print(
            f"   {r['device']:9s} B={r['batch']:4d}: {r['tokens_per_s_per_user']:6.1f} tok/s/user, "
            f"{r['tokens_per_s_per_device']:8.0f} tok/s/device, {r['energy_per_token_j']:.3f} J/token"
        )
    on_front = {r["device"] for r in front}
    for dev in sorted({r["device"] for r in res.rows()} - on_front):
        print(
            f"   {dev}: no point on the frontier (each point is dominated: a {', '.join(sorted(on_front))} point is as fast or faster per user and per device)"
        )
    print(
        "\n6. near vs far memory: how often a device can read all of its memory; the per-token bound reads"
        "\n   every weight once, split evenly over the devices holding them, the embedding table included"
        f"\n   (section 2's step gathers it: {rep.read_every_weight_once_s * 1e3:.2f} ms against its "
        f"{rep.weight_read_s * 1e3:.2f} ms weight read on H100)"
    )
    for dev in ("h100", "h200", "b200", "mi300x", "groq-lpu"):
        nf = near_far_memory(cfg, dev)
        print(
            f"   {nf.device:9s} {nf.full_memory_reads_per_s:10.1f} reads/s; Llama-3.1-8B needs "
            f"{nf.devices_to_hold_weights:3d} device(s), per-token bound {nf.per_token_bound_s * 1e3:.3f} ms"
        )
    print("\n7. 4-bit formats on heavy-tailed data (Student-t, 3 degrees of freedom, seed 0)")
    x = np.random.default_rng(0).standard_t(3, size=(256, 1024))
    for r in compare_formats(x):
        print(
            f"   {r.format:10s} {r.bits_per_element:.2f} bits: relative error {r.relative_error:.3f}, "
            f"zeros {100 * r.zero_fraction:.1f}%"
        )
    print("\n8. attention per head dim: is the exp (SFU) or the matmul the bound? (prefill, 8192 tokens)")
    for d in (64, 128, 256):
        a = op_cost("attention", heads=32, q_len=8192, kv_len=8192, head_dim=d, causal=True)
        kinds = {dev: bound(a, get_device(dev)).kind for dev in ("h100", "b200", "b300")}
        print(f"   d_head={d:3d}: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    print("\n9. energy (Horowitz 45 nm): Llama-3.1-8B decode, weight reads vs arithmetic")
    e = decode_energy_vs_batch(cfg)
    print(
        f"   at batch 1 weight reads cost {e.ratio_at_batch_1:.0f}x the arithmetic; arithmetic catches up "
        f"at batch {e.crossover_batch:.0f}"
    )
    print(
        f"   energy ridge (bf16, DRAM) = {as_float(energy_ridge()):.0f} FLOP/B; for 90% of the energy to be "
        f"arithmetic each byte must feed {as_float(reuse_factor(sympy.Rational(9, 10))):.0f} FLOPs"
    )


if __name__ == "__main__":
    main()
