"""Serving analysis: capacity from the graph, prefill/decode reports, limits, sweeps."""

import csv

import networkx as nx
import numpy as np
import pytest
import sympy

from costmodel import Hardware, MemoryLevel, Roof, Tensor, as_float, bound, get_device
from costmodel.derive import split_matmul_network
from costmodel.keys import Role
from costmodel.symbols import B, ctx, dim
from graphs import (
    GraphBuilder,
    build_model,
    capacity,
    decode_limits,
    decode_report,
    model_ledger,
    near_far_memory,
    op_total,
    peak_activation_bytes,
    prefill_report,
    step_time,
    summarize,
    sweep,
    what_if,
)
from models import get_model, param_counts

# the prefill/decode seed script's device: 1000 TFLOP/s fp16, 3.0 TB/s (H100 rounded)
SEED = Hardware(
    "seed-h100",
    roofs=(Roof("tensor", "bf16", 1000e12), Roof("vector", "fp32", 67e12)),
    memory=(MemoryLevel("dram", 3e12, 80e9),),
    power_w=700,
)


def test_qwen_decode_weight_bounds_seed_and_graph():
    rep = decode_report("qwen2.5-7b", SEED, batch=1, ctx=1024)
    # seed: total_params * 2 B / 3e12 B/s = 7.6156e9 * 2 / 3e12 = 5.077 ms
    assert round(rep.read_every_weight_once_s * 1e3, 2) == 5.08
    # the graph gathers one embedding row instead of streaming the 152064 x 3584 table:
    # (7.6156e9 - 152064*3584) * 2 / 3e12 = 4.710 ms
    assert round(rep.weight_read_s * 1e3, 2) == 4.71
    # the table itself: 152064 * 3584 * 2 B / 3e12 B/s = 0.3633 ms
    assert rep.embedding_table_read_s == pytest.approx(152064 * 3584 * 2 / 3e12, rel=1e-9)
    assert rep.step_s >= rep.weight_read_s  # TPOT is at least the weight read


def test_decode_times_energy_and_device_hours():
    rep = decode_report("llama-3.1-8b", "h100", batch=32, ctx=4096)
    kv_bytes = 32 * 4096 * 131072  # B * ctx * 2*L*H_kv*d_head*b
    assert rep.kv_read_s == pytest.approx(kv_bytes / 3.35e12)
    # by hand, the step is memory-bound: weights the graph reads, (8,030,261,248 params - the
    # 128256 x 4096 gathered embedding) x 2 B = 15,009,849,344 B, plus the KV 17,179,869,184 B,
    # over 3.35e12 B/s = 9.609 ms; activations add under 2 %
    tpot = (15_009_849_344 + 17_179_869_184) / 3.35e12
    assert rep.step_s == pytest.approx(tpot, rel=0.02)
    assert rep.tokens_per_s_per_user == pytest.approx(1 / tpot, rel=0.02)  # 104 tokens/s
    # energy per token = 700 W x 9.609 ms / 32 tokens = 0.210 J
    assert rep.energy_per_token_j == pytest.approx(700 * tpot / 32, rel=0.02)
    # a million tokens at 32 per 9.609 ms: 300.3 s = 0.0834 device-hours
    assert rep.device_hours_per_million_tokens == pytest.approx(0.0834, rel=0.02)


def test_energy_counts_every_device_of_the_tensor_parallel_group():
    """A TP group draws every device's power for the step (NVIDIA's H100 SXM datasheet: 700 W
    TDP), as its device-hours count every device: J/token = TDP x tp x TPOT / batch, one number
    in ``decode``, ``prefill`` and ``search``'s table (a review found ``decode`` at one device's
    share, 1/tp of ``search``'s)."""
    for tp in (1, 8):
        rep = decode_report("llama-3.1-8b", "h100", batch=8, ctx=4096, tp=tp)
        assert rep.energy_per_token_j == pytest.approx(700 * tp * rep.step_s / 8, rel=1e-12)
        # the device-hours of the same tokens at 700 W: the same energy
        assert rep.energy_per_token_j == pytest.approx(700 * rep.device_hours_per_million_tokens * 3600 / 1e6)
        pre = prefill_report("llama-3.1-8b", "h100", batch=1, seq=4096, tp=tp)
        assert pre.energy_per_token_j == pytest.approx(700 * tp * pre.step_s / 4096, rel=1e-12)
        (row,) = sweep("llama-3.1-8b", devices=["h100"], batches=[8], ctxs=[4096], tp=tp).rows()
        assert row["energy_per_token_j"] == pytest.approx(700 * tp * row["tpot_s"] / 8, rel=1e-12)


def test_knee_batch_and_context_ceiling_are_where_the_bound_flips():
    hw = get_device("h100")
    lim = decode_limits("llama-3.1-8b", hw, ctx=128)
    knee = lim.knee_batch
    g = build_model(get_model("llama-3.1-8b"), "decode", batch=B, ctx=ctx)
    terms = bound(op_total(g), hw).terms

    def kind(b, c):
        vals = {k: as_float(v.subs({B: b, ctx: c})) for k, v in terms.items()}
        return max(vals, key=vals.get)

    assert kind(int(knee) - 5, 128) == "dram" and kind(int(knee) + 5, 128) == "tensor"
    ceiling = lim.ctx_ceiling
    assert kind(10**7, int(ceiling) - 20) == "tensor"  # below the ceiling a huge batch turns compute-bound
    assert kind(10**7, int(ceiling) + 20) == "dram"  # above it no batch does
    high = decode_limits("llama-3.1-8b", hw, ctx=8192)
    assert high.knee_batch is None and high.batch_for_90pct_of_ceiling > 0


def test_decode_limits_count_the_tensor_parallel_collectives():
    """At tp 4 the all-reduces over the link are their own nodes, in series with the rest: the
    memory-bound ceiling is ``1 / (b + l_b)`` with ``b`` the DRAM and ``l_b`` the link seconds a
    sequence adds (read here off the graph's aggregate terms, not the compiled step), and the
    throughput at the largest batch that fits is that batch over the report's own TPOT there (a
    review found 5,282 tokens/s printed, the DRAM term alone, where TPOT gave 4,898)."""
    hw = get_device("h100")
    g = build_model(get_model("llama-3.1-70b"), "decode", batch=B, ctx=ctx, tp=4)
    terms = bound(op_total(g), hw).terms

    def per_sequence(key):
        at = {ctx: 4096}
        return as_float(terms[key].subs({**at, B: 2})) - as_float(terms[key].subs({**at, B: 1}))

    lim = decode_limits("llama-3.1-70b", hw, ctx=4096, tp=4, max_batch=133)
    assert lim.knee_batch is None
    ceiling = 1 / (per_sequence("dram") + per_sequence("link:scale_up"))
    assert lim.throughput_ceiling_tokens_per_s == pytest.approx(ceiling, rel=1e-9)
    assert 1 / per_sequence("dram") > 1.05 * ceiling  # the link's share is not negligible here
    at_max = decode_report("llama-3.1-70b", hw, batch=133, ctx=4096, tp=4)
    assert lim.throughput_at_max_batch_tokens_per_s == pytest.approx(133 / at_max.step_s, rel=1e-12)


def test_prefill_ttft_attention_share_and_chunking():
    short = prefill_report("llama-3.1-8b", "h100", seq=512)
    long = prefill_report("llama-3.1-8b", "h100", seq=32768)
    assert long.attention_flop_share > 0.3 > short.attention_flop_share
    chunked = prefill_report("llama-3.1-8b", "h100", seq=32768, chunk=8192)
    assert chunked.chunks == 4
    # same FLOPs (causal pairs add up), more steps that each reread the KV prefix: never faster
    assert chunked.step_s >= long.step_s
    # chunk sizes that do not divide: 3 full chunks + a remainder
    odd = prefill_report("llama-3.1-8b", "h100", seq=10000, chunk=3000)
    assert odd.chunks == 4


def test_chunk_graph_flops_add_up_to_the_whole_prompt():
    cfg = get_model("tiny")
    whole = summarize(build_model(cfg, "prefill", batch=1, seq=64)).tensor_flops
    parts = sum(
        summarize(build_model(cfg, "prefill", batch=1, seq=16, prefix=p)).tensor_flops
        for p in (0, 16, 32, 48)
    )
    lm_head_extra = 3 * 2 * 64 * 256  # each chunk also runs the lm_head on its last position
    assert parts - whole == lm_head_extra


def test_quantised_weights_and_matmul_roofs():
    base = decode_report("llama-3.1-8b", "h100", batch=1, ctx=1024)
    int4 = decode_report(get_model("llama-3.1-8b").replace(dtype="int4"), "h100", batch=1, ctx=1024)
    assert int4.weight_read_s == pytest.approx(base.weight_read_s / 4, rel=0.02)
    # W8A8 fp8 on H100: the tensor roof doubles (1978.9 vs 989.4 TFLOP/s) in compute-bound prefill
    bf = prefill_report("llama-3.1-8b", "h100", seq=8192)
    f8 = prefill_report(get_model("llama-3.1-8b").replace(dtype="fp8", matmul_dtype="fp8"), "h100", seq=8192)
    mm = lambda r: r.terms_s["tensor"]  # noqa: E731
    assert mm(f8) < mm(bf)
    # NVFP4 weights with NVFP4 matmuls use B200's fp4 roof; H100 has none and says so
    nv = get_model("llama-3.1-8b").replace(dtype="nvfp4", matmul_dtype="nvfp4")
    assert prefill_report(nv, "b200", seq=4096).terms_s["tensor"] > 0
    with pytest.raises(Exception, match="no dense tensor roof for precision 'fp4'"):
        prefill_report(nv, "h100", seq=4096)


def test_tensor_parallel_two_all_reduces_per_layer():
    cfg = get_model("llama-3.1-70b")
    g = build_model(cfg, "decode", batch=8, ctx=2048, tp=8)
    ars = [n for n, d in g.nodes(data=True) if d.get("op") == "all_reduce" and n.startswith("layers.")]
    assert sorted(ars) == ["layers.mlp.down_proj.all_reduce", "layers.o_proj.all_reduce"]
    rep = decode_report(cfg, "h100", batch=8, ctx=2048, tp=8)
    assert rep.terms_s["link:scale_up"] > 0
    # per device: 1/8 of the matmul weights, KV heads 8/8 = 1 per device
    assert summarize(g).kv_bytes_per_token == 2 * 80 * 1 * 128 * 2
    one = decode_report(cfg, "h100", batch=8, ctx=2048)
    assert rep.step_s < one.step_s


def test_network_ridge_of_a_split_matmul():
    d = split_matmul_network()
    K, p = dim("K"), dim("p")
    assert sympy.simplify(d.network_intensity - K / ((p - 1) * 2)) == 0
    h = split_matmul_network(p=8, hw=get_device("h100"))
    # I*_net = 989.4e12 / 450e9 = 2198.7 FLOP per link byte; K* = 7 * 2 * 2198.7 = 30781
    assert as_float(h.network_ridge) == pytest.approx(2198.67, abs=0.01)
    assert as_float(h.K_star) == pytest.approx(30781.3, abs=0.1)


def test_near_and_far_memory():
    nf = near_far_memory("llama-3.1-405b", "h100")
    assert nf.full_memory_reads_per_s == pytest.approx(3.35e12 / (81559 * 2**20))  # 39.2 a second: nvidia-smi's 81,559 MiB
    # Llama-3.1-405B: 405.85e9 parameters (model card) x 2 B = 811.7 GB of bf16 weights
    assert nf.weights_bytes == pytest.approx(811.7e9, rel=1e-3)
    assert nf.devices_to_hold_weights == 10  # ceil(811.7 GB / 85.52 GB)
    # 811.7e9 B over 10 devices at 3.35e12 B/s each: 24.23 ms per token
    assert nf.per_token_bound_s == pytest.approx(24.23e-3, rel=1e-3)


def test_capacity_from_the_graph_and_what_if():
    cfg = get_model("llama-3.1-8b")
    led = model_ledger(cfg)
    assert led.weights_bytes == 2 * param_counts(cfg).total
    assert led.kv_bytes_per_token == 131072
    rep = capacity(cfg, "h100", batch=16, ctx=8192)
    # (85.52e9 (nvidia-smi's 81,559 MiB) - 16.06e9 - activations) / (8192 * 131072 B per sequence)
    # = 64.7 -> 64
    assert rep.fits and rep.max_batch.value == 64
    w = what_if(
        cfg, "h100", ctx=8192, changes={"fp8 KV": {"kv_dtype": "fp8"}, "int4 weights": {"dtype": "int4"}}
    )
    # (85.52e9 - 16.06e9 - activations) / (8192 * 65536 B per sequence in fp8) = 129.4 -> 129
    assert w["fp8 KV"] == 129 and w["baseline"] < w["int4 weights"] < w["fp8 KV"]
    big = capacity("llama-3.1-405b", "h100", batch=1, ctx=1024)
    assert not big.fits and big.max_batch.value == 0 and big.max_batch.overflowing_term == "weights"
    assert big.max_batch.shortfall_bytes > 700e9


def test_peak_activation_liveness_by_hand():
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="decode", group="t")
    x = b.source("x", Tensor("x", (5,), "int8"), "input")
    a = b.op("a", "copy", Role.VIEW, [x], [Tensor("a", (10,), "int8")], elements=10, dtype="int8")[0]
    c = b.op("c", "copy", Role.VIEW, [a], [Tensor("c", (20,), "int8")], elements=20, dtype="int8")[0]
    b.op("d", "elementwise", Role.RESIDUAL, [a, c], [Tensor("d", (5,), "int8")], n=5, inputs=2, dtype="int8")
    # a (10) live; c runs: 10 + 20; d runs while a and c are live: 10 + 20 + 5 = 35
    assert peak_activation_bytes(g) == 35


def test_peak_activation_is_the_exact_rational():
    """Fractional bytes per element (NVFP4: 4.5 bits, 16 values share one FP8 scale) come back
    as the exact rational of the float sum, not a nearby simple fraction."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="decode", group="t")
    x = b.source("x", Tensor("x", (5,), "int8"), "input")
    a = b.op("a", "copy", Role.VIEW, [x], [Tensor("a", (3,), "nvfp4")], elements=3, dtype="nvfp4")[0]
    b.op("c", "copy", Role.VIEW, [a], [Tensor("c", (7,), "nvfp4")], elements=7, dtype="nvfp4")
    # a: 3 * 4.5 / 8 = 27/16; c runs while a is live: (3 + 7) * 4.5 / 8 = 45/8
    peak = peak_activation_bytes(g)
    assert isinstance(peak, sympy.Rational) and peak == sympy.Rational(45, 8)


def test_sweep_compiled_matches_graph_and_frontier(tmp_path):
    res = sweep(
        "llama-3.1-8b",
        devices=["h100", "b200"],
        batches=[1, 4, 16, 64, 256],
        ctxs=[1024, 8192],
        kv_dtypes=[None, "fp8"],
    )
    assert len(res) == 2 * 2 * 5 * 2
    rows = res.rows()
    r = next(
        x
        for x in rows
        if x["device"] == "h100-sxm" and x["batch"] == 16 and x["ctx"] == 8192 and x["kv_dtype"] == "bf16"
    )
    g = build_model(get_model("llama-3.1-8b"), "decode", batch=16, ctx=8192)
    assert r["tpot_s"] == pytest.approx(as_float(step_time(g, get_device("h100"))), rel=1e-12)
    front = [x for x in rows if x["pareto"]]
    assert front and all(x["fits"] for x in front)
    assert {x["ctx"] for x in front} == {1024, 8192}  # one frontier per context
    for f in front:  # nobody that fits at its context dominates a frontier point
        assert not any(
            o["fits"]
            and o["ctx"] == f["ctx"]
            and o["tokens_per_s_per_user"] > f["tokens_per_s_per_user"]
            and o["tokens_per_s_per_device"] > f["tokens_per_s_per_device"]
            for o in rows
        )
    out = tmp_path / "s.csv"
    res.to_csv(out)
    assert len(list(csv.DictReader(open(out)))) == len(res)
    calls = []
    sweep(
        "tiny",
        devices=["h100"],
        batches=list(range(1, 101)),
        ctxs=[64, 128],
        chunk=50,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls[-1] == (200, 200) and len(calls) == 4


def test_sweep_rejects_bad_grids():
    with pytest.raises(Exception, match="batches must be positive integers"):
        sweep("tiny", devices=["h100"], batches=[0, 1], ctxs=[1])
    with pytest.raises(Exception, match="ctx values must be positive integers"):
        sweep("tiny", devices=["h100"], batches=[1], ctxs=[np.float64(1.5)])


def test_compile_expr_parses_strings_safely_and_names_stray_symbols():
    from costmodel import CostModelError, ExpressionSyntaxError
    from costmodel.frontier import compile_expr

    f = compile_expr("2*B*ctx + 1", [B, ctx])  # by hand: 2*4*10 + 1 = 81
    assert np.allclose(f(np.array([4]), np.array([10])), [81])
    with pytest.raises(ExpressionSyntaxError):
        compile_expr("__import__('os').getcwd()", [B])
    with pytest.raises(CostModelError, match="not among the sweep variables"):
        compile_expr("B*d_model", [B])


def test_graph_builder_parses_repeat_safely():
    from costmodel import ExpressionSyntaxError
    from costmodel.symbols import dim
    from graphs import GraphBuilder

    # the alias n_layers resolves to the canonical dimension num_hidden_layers
    g = GraphBuilder(nx.DiGraph(), phase="decode", group="L", repeat="n_layers - 1")
    assert g.repeat == dim("num_hidden_layers") - 1
    with pytest.raises(ExpressionSyntaxError, match="repeat"):
        GraphBuilder(nx.DiGraph(), phase="decode", group="L", repeat="__import__('os')")
