"""DeepSeek-V3 attention-DP x EP on H200 priced from the corpus's own rows: MLA attention from the
wheel's ``mla/<framework>/{context,generation}_mla_perf`` tables, the MoE dispatch and combine
(all-gather / reduce-scatter) from its ``comm/nccl/<version>/nccl_perf`` rows, and the dense
projections of a 128 x 128 block-scaled FP8 checkpoint under the ``fp8_block`` GEMM key.

Every pinned number is read here from the wheel's parquet files themselves (pandas, the
``[measured]`` extra), never from the code under test.
"""

from __future__ import annotations

import glob
import math
import os

import pytest

from costmodel.keys import PARAMS, ROLE, SCALE_BLOCK, Phase, Role
from graphs.serving.pricing.predict import kernel_row
from graphs.serving.step.compiled import compiled_step
from models.catalog import get_model


def _nodes(model: str, phase: Phase, role: Role, dims: dict, tp: int = 1, device: str = "h200"):
    g = compiled_step(get_model(model), device, phase, tp=tp).graph
    out = []
    for _, d in g.nodes(data=True):
        if d.get("kind") == "op" and d.get(ROLE) == role:
            p = {k: (float(v.subs(dims)) if hasattr(v, "subs") else v) for k, v in d[PARAMS].items()}
            out.append((d, p))
    return out


def test_mla_decode_and_prefill_nodes_are_the_corpus_mla_rows():
    """DeepSeek-V3 (128 heads, 512 + 64 latent) at tp 1: a decode step's absorbed attention at
    ctx 1024 is the generation_mla row (batch, 128 heads, tp_size 1, step 1023, fp8 KV as the
    model stores it); a prefill of 2048 tokens with no prefix the context_mla row (isl 2048)."""
    from costmodel.symbols import B, S, ctx

    (dec, p), *_ = _nodes("deepseek-v3", Phase.DECODE, Role.ATTENTION, {B: 64, ctx: 1024})
    fam, row = kernel_row(dec, p)
    assert fam == "generation_mla"
    assert (row["batch"], row["heads"], row["tp"], row["isl"], row["step"]) == (64, 128, 1, 1, 1024 - 1)
    (pre, q), *_ = _nodes("deepseek-v3", Phase.PREFILL, Role.ATTENTION, {B: 1, S: 2048})
    fam, row = kernel_row(pre, q)
    assert fam == "context_mla"
    assert (row["batch"], row["heads"], row["tp"], row["isl"], row["step"]) == (1, 128, 1, 2048, 0)
    # tp 8: 128 / 8 = 16 heads on the rank, the corpus's (num_heads 16, tp_size 8) rows
    (dec8, p8), *_ = _nodes("deepseek-v3", Phase.DECODE, Role.ATTENTION, {B: 8, ctx: 64}, tp=8)
    assert kernel_row(dec8, p8)[1]["heads"] == 16 and kernel_row(dec8, p8)[1]["tp"] == 8


def test_dense_projections_of_a_block_scaled_checkpoint_take_the_block_key():
    """DeepSeek-V3's checkpoint is FP8 in 128 x 128 blocks in every linear layer (arXiv:2412.19437
    sec. 3.3.2; config.json weight_block_size [128, 128]): its q_a/kv_a, q_b, o_proj and dense or
    shared-expert MLP GEMMs are the corpus's fp8_block rows; Llama-3.1-8B quantised to per-tensor
    fp8 (no blocks) keeps the fp8 key; DeepSeek's lm_head stays bf16 (not quantised)."""
    from costmodel.symbols import B, ctx

    lin = _nodes("deepseek-v3", Phase.DECODE, Role.LINEAR, {B: 16, ctx: 512})
    gemms = [(d, p) for d, p in lin if kernel_row(d, p) is not None and kernel_row(d, p)[0] == "gemm"]
    assert gemms and all(d[SCALE_BLOCK] == (128, 128) for d, _ in gemms)
    assert {kernel_row(d, p)[1]["dtype"] for d, p in gemms} == {"fp8_block"}
    head = _nodes("deepseek-v3", Phase.DECODE, Role.HEAD, {B: 16, ctx: 512})
    assert head and all(SCALE_BLOCK not in d for d, _ in head)
    cfg = get_model("llama-3.1-8b").replace(dtype="fp8_e4m3", act_dtype="bf16", matmul_dtype="fp8_e4m3")
    g = compiled_step(cfg, "h200", Phase.DECODE, tp=1).graph
    plain = [d for _, d in g.nodes(data=True) if d.get(ROLE) == Role.LINEAR]
    assert plain and all(SCALE_BLOCK not in d for d in plain)


# ---- the corpus's own rows (the [measured] extra)


def _h200(sub: str, name: str):
    pd = pytest.importorskip("pandas")
    core = pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    base = os.path.join(os.path.dirname(core.__file__), "systems", "data", "h200_sxm", sub)
    paths = glob.glob(os.path.join(base, "*", "*", name))
    return pd.concat([pd.read_parquet(p).assign(dir=p) for p in paths], ignore_index=True)


def _nccl_h200(op: str):
    from costmodel.measured.collectives import collective_curve

    curve = collective_curve("h200-sxm", op, 8, 2)
    assert curve is not None
    version = curve.source.split()[1]  # the table the corpus reader chose (the current, else newest)
    df = _h200("comm", "nccl_perf.parquet")
    df = df[df["dir"].str.contains(f"/nccl/{version}/")]
    return curve, df[(df["op_name"] == op) & (df["num_gpus"] == 8) & (df["nccl_dtype"] == "half")]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_collective_curve_reads_the_nccl_rows(op):
    """At a measured size the curve is the row's latency (ms -> s); between two sizes linear in
    (log n, log t), recomputed here from the two rows; beyond the largest proportional to n."""
    curve, rows = _nccl_h200(op)
    by_size = rows.groupby("message_size")["latency"].min().sort_index()
    sizes = by_size.index.to_list()
    n0, n1 = float(sizes[10]), float(sizes[11])
    t0, t1 = by_size.iloc[10] * 1e-3, by_size.iloc[11] * 1e-3
    assert curve.at(n0) == pytest.approx(t0, rel=1e-12)
    mid = math.sqrt(n0 * n1)  # halfway in log n: the geometric mean of the two latencies
    assert curve.at(mid) == pytest.approx(math.sqrt(t0 * t1), rel=1e-9)
    top, t_top = float(sizes[-1]), by_size.iloc[-1] * 1e-3
    assert curve.at(2 * top) == pytest.approx(2 * t_top, rel=1e-12)
    # nccl-tests' size is the whole tensor: 2^26 half elements over 8 GPUs at 7/8 x 134 MB per GPU
    # moves 300-400 GB/s of bus bandwidth, under NVLink 4's 450 GB/s per direction
    busbw = 7 / 8 * 2**26 * 2 / curve.at(2.0**26)
    assert 250e9 < busbw < 450e9


def test_dispatch_and_combine_are_the_nccl_rows_over_every_moe_layer():
    """DeepSeek-V3 at DP 8 with EP on H200 (the all-gather / reduce-scatter dispatch, TensorRT-LLM's
    on Hopper without DeepEP): at T = 1024 group tokens each of the 58 MoE layers gathers and
    scatters the 1024 x 7168 bf16 activations over the 8 ranks, each priced by the NCCL rows
    (interpolated in log-log here by hand) where they exceed the bound; the coverage counts those
    seconds as measured."""
    from costmodel.hardware import get_device
    from graphs.serving.pricing.predictor import Predictor
    from graphs.serving.sim.data_parallel import ExpertStage
    from graphs.serving.step.workload import as_workload

    def interp(rows, n):
        s = rows.groupby("message_size")["latency"].min().sort_index()
        xs, ts = [float(x) for x in s.index], [float(t) * 1e-3 for t in s]
        i = max(j for j, x in enumerate(xs) if x <= n)
        w = math.log(n / xs[i]) / math.log(xs[i + 1] / xs[i])
        return ts[i] * (ts[i + 1] / ts[i]) ** w

    hw = get_device("h200")
    w = as_workload("deepseek-v3")
    stage = ExpertStage(w, hw, 8, 1, True, "allgather_reducescatter", Predictor.of("trtllm"))
    bound_stage = ExpertStage(w, hw, 8, 1, True, "allgather_reducescatter", Predictor())
    n = 1024 * 7168
    hand = 61 - 3  # DeepSeek-V3: 61 layers, the first 3 dense (first_k_dense_replace)
    by_hand = hand * sum(interp(_nccl_h200(op)[1], n) for op in ("all_gather", "reduce_scatter"))
    assert stage.comm_bound_s(1024) == pytest.approx(bound_stage.comm_s(1024), rel=1e-12)
    assert by_hand > stage.comm_bound_s(1024)  # the measured collectives are slower than the link's bound
    assert stage.comm_s(1024) == pytest.approx(by_hand, rel=1e-9)
    stage.reset()
    stage.time(1024, 8)
    cov = stage.coverage()
    assert cov.measured_s >= 8 * by_hand * (1 - 1e-9)  # the experts' measured seconds beside them
    assert not any("dispatch" in k for k in cov.bounds)


def test_the_all_to_all_dispatch_says_it_is_at_its_bound():
    """The engines' all-to-all (DeepEP, pplx, TensorRT-LLM's) is no NCCL alltoall: a predictor's
    stage keeps its bound and names why in the coverage."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.hardware import get_device
    from graphs.serving.pricing.predictor import Predictor
    from graphs.serving.sim.data_parallel import ExpertStage
    from graphs.serving.step.workload import as_workload

    stage = ExpertStage(
        as_workload("deepseek-v3"), get_device("h200"), 8, 1, True, "all_to_all", Predictor.of("trtllm")
    )
    assert stage.comm_s(512) == pytest.approx(stage.comm_bound_s(512), rel=1e-12)
    stage.reset()
    stage.time(512, 8)
    assert any(k.startswith("MoE dispatch and combine by all-to-all") for k in stage.coverage().bounds)


def test_mla_generation_priced_at_the_measured_row():
    """A decode step's MLA attention at a measured shape (batch 256, 1024 cached tokens, 128 heads,
    fp8 KV) is priced by the trtllm generation_mla fits: the grey-box price (the fit times its
    residuals at the nearest measured shapes) is the row's latency within 5 %, the fit alone
    within 25 %, and neither below the kernel's roofline bound."""
    from costmodel.hardware import get_device
    from graphs.serving.pricing.kernel_sources import kernel_source
    from graphs.serving.pricing.predict import price_rows

    df = _h200("mla", "generation_mla_perf.parquet")
    df = df[df["dir"].str.contains("/trtllm/")]
    hit = df[
        (df["batch_size"] == 256)
        & (df["step"] == 1023)
        & (df["num_heads"] == 128)
        & (df["kv_cache_dtype"] == "fp8")
    ]
    measured = float(hit["latency"].min()) * 1e-3
    src = kernel_source("h200-sxm", "trtllm", "generation_mla", "bfloat16/fp8")
    assert src.source == "measured"
    row = {
        "batch": 256,
        "isl": 1,
        "heads": 128,
        "tp": 1,
        "step": 1023,
        "attn_dtype": "bfloat16",
        "kv_dtype": "fp8",
    }
    cal, corr = price_rows(get_device("h200"), "trtllm", "generation_mla", src, [row])
    assert corr[0] == pytest.approx(measured, rel=0.05)
    assert cal[0] == pytest.approx(measured, rel=0.25)
    # the bound: the fp8 latent cache read once, 256 x 1024 x 576 bytes over 4.8 TB/s (31 us)
    assert min(cal[0], corr[0]) > 256 * 1024 * 576 / 4.8e12


def test_mla_absorbed_batched_gemms_are_labelled_as_such():
    """The absorbed per-head projections of an MLA decode (q_nope @ W_UK, o @ W_UV: batched GEMMs
    over the heads) have no measured family here: at their bound, labelled as what they are, never
    filed under the norms and activations."""
    from costmodel.symbols import B, ctx
    from graphs.serving.pricing.predict import unmeasured_basis

    lin = _nodes("deepseek-v3", Phase.DECODE, Role.LINEAR, {B: 16, ctx: 512})
    absorbed = [(d, p) for d, p in lin if kernel_row(d, p) is None]
    assert len(absorbed) == 2 * 2  # q_absorb and v_absorb, in the dense and the MoE layer groups
    assert all(unmeasured_basis(d, p).startswith("batched GEMMs (MLA") for d, p in absorbed)
