"""Block-scaled FP8 experts (DeepSeek-V3's ``quantization_config``: ``fp8`` with
``weight_block_size [128, 128]``) priced by the corpus's ``fp8_block`` fused-MoE kernels, as
aiconfigurator prices such a checkpoint (``sdk/models/helpers.py``: ``fp8`` with a
``weight_block_size`` -> ``fp8_block``), where the blocks divide the rank's expert width."""

from __future__ import annotations

import pytest

from costmodel.keys import PARAMS, ROLE, SCALE_BLOCK, Phase, Role
from graphs.serving.pricing.predict import _moe_row
from graphs.serving.step.compiled import compiled_step
from models.catalog import get_model


def _experts(model: str, tp: int):
    g = compiled_step(get_model(model), "h200", Phase.DECODE, tp=tp).graph
    return [d for _, d in g.nodes(data=True) if d.get(ROLE) == Role.EXPERT]


def test_deepseek_experts_carry_their_scale_blocks_and_take_the_block_key():
    """DeepSeek-V3 at tp 8: each expert 2048 wide, 256 per rank of the 128-row blocks; its gate, up
    and down GEMMs are the corpus's fp8_block kernels. Qwen3-30B-A3B (bf16) has no blocks."""
    nodes = _experts("deepseek-v3", 8)
    assert nodes and all(d[SCALE_BLOCK] == (128, 128) for d in nodes)
    keys = {_moe_row(d, d[PARAMS])[1]["dtype"] for d in nodes}
    assert keys == {"fp8_block"}
    assert all(SCALE_BLOCK not in d for d in _experts("qwen3-30b-a3b", 1))


def test_a_width_the_blocks_do_not_divide_keeps_the_per_tensor_key():
    """MiniMax-M2 (1536-wide experts in 128 x 128 blocks) at tp 8: 192 columns per rank, not a
    whole number of blocks; aiconfigurator refuses fp8_block there, so the fp8 key stays."""
    nodes = _experts("minimax-m2", 8)
    assert nodes and all(d[SCALE_BLOCK] == (128, 128) for d in nodes)
    assert 1536 // 8 == 192 and 192 % 128
    assert {_moe_row(d, d[PARAMS])[1]["dtype"] for d in nodes} == {"fp8"}
    assert {_moe_row(d, d[PARAMS])[1]["dtype"] for d in _experts("minimax-m2", 4)} == {"fp8_block"}  # 384 = 3 x 128


@pytest.mark.slow
def test_deepseek_moe_rests_on_its_own_measured_kernels_at_the_same_seconds():
    """On H200 under TensorRT-LLM the corpus times DeepSeek-V3's expert shape (h 7168, 2048 wide,
    top-8 of 256) only as fp8_block: priced under the per-tensor key it took those very rows as a
    named substitute (a neighbour); under the block key they are the kernel itself (measured). The
    experts' seconds are the same to the last digits: only what they are said to rest on moves
    (the dense projections differ: block-scaled, they take the fp8_block GEMM rows too)."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step

    cfg = get_model("deepseek-v3")
    per_tensor = cfg.replace(weight_scale_block=None)
    pred = Predictor.of("trtllm")
    block = predicted_mixed_step(cfg, "h200", tp=8, predictor=pred)
    plain = predicted_mixed_step(per_tensor, "h200", tp=8, predictor=pred)
    g = compiled_step(cfg, "h200", Phase.DECODE, tp=8).graph
    experts = {n for n, d in g.nodes(data=True) if d.get(ROLE) == Role.EXPERT}
    for step in (block, plain):
        step.reset()
    for n in (1, 64, 512):
        a = dict(zip(block.kernel_names, block.tokens_table(n, n), strict=True))
        b = dict(zip(plain.kernel_names, plain.tokens_table(n, n), strict=True))
        assert experts and experts <= set(a)
        for x in experts:
            assert a[x] == pytest.approx(b[x], rel=1e-12)
        block.time_sums(n, n * 2000.0)
        plain.time_sums(n, n * 2000.0)
    substitute = "moe fp8_block kernels for fp8"
    assert any(substitute in why for why in plain.coverage().neighbours)
    assert not any(substitute in why for why in block.coverage().neighbours)
    assert block.coverage().measured_s > plain.coverage().measured_s
