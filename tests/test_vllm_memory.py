"""vLLM's KV pool as vLLM measures memory (graphs/serving/engines/vllm.py, vllm011.py, vllm06.py):
``gpu_memory_utilization`` of CUDA's ``mem_get_info`` total, less weights, the activation peak and
the non-torch memory, pinned to hand computations from the sourced numbers and to a vLLM log."""

from __future__ import annotations

import dataclasses
import math

import pytest

from costmodel.errors import CostModelError
from graphs.serving.engines import EngineConfig, get_engine

GIB = 2**30
#: nvidia-smi's H100 SXM total (the catalog's): 81,559 MiB
H100_SMI = 81_559 * 2**20
#: vLLM's log of mem_get_info's total on an H100 80 GB (vllm PR 10511, PR 12126): 79.22 GiB
H100_CUDA = 79.22 * GIB


def test_sourced_terms_by_hand():
    from graphs.serving.engines.vllm import DRIVER_RESERVED_BYTES, V1_NON_TORCH_BYTES, v1_memory_reserve
    from graphs.serving.engines.vllm06 import v0_memory_reserve

    # 85,520,809,984 - 85,061,827,297 = 458,982,687 B (0.43 GiB)
    assert DRIVER_RESERVED_BYTES == 458_982_687
    assert abs(DRIVER_RESERVED_BYTES - (H100_SMI - H100_CUDA)) < 1
    assert V1_NON_TORCH_BYTES == 171_798_692  # 0.16 x 2^30, rounded
    # V1: NCCL is set up before the start-up snapshot (vllm PR 25359): the same at every tp
    assert v1_memory_reserve(1) == v1_memory_reserve(8) == (458_982_687.0, 171_798_692.0)
    # V0: the log's 1.79 GiB at tp 1 and 3.58 GiB at tp 2 (vllm PR 10511), held above tp 2
    assert v0_memory_reserve(1)[1] == round(1.79 * GIB) == 1_921_997_865  # 1,921,997,864.96
    assert (
        v0_memory_reserve(2)[1] == v0_memory_reserve(8)[1] == round(3.58 * GIB) == 3_843_995_730
    )  # 3,843,995,729.92
    # every vLLM profile carries its rule; SGLang's and TensorRT-LLM's pools take nothing more
    for ref in ("vllm", "vllm@0.11", "vllm@0.6"):
        assert get_engine(ref).reserved_memory(1)[0] == 458_982_687.0
    for ref in ("sglang", "trtllm"):
        assert get_engine(ref).reserved_memory(4) == (0.0, 0.0)


def test_llama_8b_on_one_h100_blocks_before_and_after():
    """Llama-3.1-8B BF16 on one H100 SXM under vllm@1: C = 81,559 MiB = 85,520,809,984 B (nvidia-smi),
    W = 2 B x 8,030,261,248 parameters = 16,060,522,496 B, k = 2 (K, V) x 32 layers x 8 KV heads x
    128 x 2 B = 131,072 B per token, b = 16, N = 8,192 tokens; a is the ledger's 264,704 B per token
    (its activation model, not under test here)."""
    from graphs.serving.sim.engine import kv_blocks, kv_pool, profile_engine

    pool = kv_pool("llama-3.1-8b", "h100-sxm", 1)
    assert pool.capacity_bytes == 85_520_809_984
    assert pool.weights_bytes == 16_060_522_496
    assert pool.kv_bytes_per_token == 131_072
    a = pool.activation_bytes_per_token
    assert a == 264_704  # the input the hand numbers below use
    block = 16 * 131_072  # 2,097,152 B
    act = 264_704 * 8_192  # 2,168,455,168 B
    # before: floor((0.9 x 85,520,809,984 - 16,060,522,496 - 2,168,455,168) / 2,097,152)
    #       = floor(58,739,751,321.6 / 2,097,152) = floor(28,009.3...) = 28,009
    before = math.floor((0.9 * 85_520_809_984 - 16_060_522_496 - act) / block)
    assert before == 28_009
    # after: floor((0.9 x (85,520,809,984 - 458,982,687) - 16,060,522,496 - 2,168,455,168 - 171,798,692)
    #              / 2,097,152) = floor(58,154,868,211.3 / 2,097,152) = floor(27,730.4...) = 27,730
    after = math.floor((0.9 * (85_520_809_984 - 458_982_687) - 16_060_522_496 - act - 171_798_692) / block)
    assert after == 27_730
    eng = profile_engine(get_engine("vllm"), "llama-3.1-8b", "h100-sxm", tp=1)
    assert (eng.driver_reserved_bytes, eng.non_torch_bytes) == (458_982_687.0, 171_798_692.0)
    assert kv_blocks(pool, pool.capacity_bytes, eng) == after
    plain = dataclasses.replace(eng, driver_reserved_bytes=0.0, non_torch_bytes=0.0)
    assert kv_blocks(pool, pool.capacity_bytes, plain) == before  # 279 blocks (1.0 %) fewer now


def test_vllm_log_kv_size_reproduced():
    """vllm PR 10511's log, ``vllm serve meta-llama/Meta-Llama-3-8B`` (V0) on an H100 at tp 1:
    total_gpu_memory 79.22 GiB x 0.90 = 71.29 GiB; weights 14.96 GiB; non_torch_memory 1.79 GiB;
    activation peak 1.26 GiB; available_kv_cache_memory 53.29 GiB. V0 ran an 8K-context model
    without chunked prefill at max_num_batched_tokens = max(8192, 2048) = 8,192. Reproduced within
    2 % (the model's activation peak, 2.02 GiB at 8,192 tokens, is 0.76 GiB above the log's; the
    rest of the sum is the log's own)."""
    from graphs.serving.sim.engine import kv_pool

    prof = get_engine("vllm@0.6").with_overrides(enable_chunked_prefill=False, max_num_batched_tokens=8192)
    pool = kv_pool("llama-3.1-8b", "h100-sxm", 1)  # Llama-3-8B's shapes (the 3.1 differs in RoPE scaling)
    assert abs(pool.weights_bytes / GIB - 14.96) < 0.005  # the log's weights
    kv = prof.kv_blocks(pool, 1) * prof.block_size * pool.kv_bytes_per_token
    assert abs(kv / GIB - 53.29) / 53.29 < 0.02
    # the driver's total instead of CUDA's, no non-torch memory (before this change): +2.6 %, outside
    old = math.floor(
        (0.9 * pool.capacity_bytes - pool.weights_bytes - pool.activation_bytes_per_token * 8192)
        / (16 * pool.kv_bytes_per_token)
    )
    assert abs(old * 16 * pool.kv_bytes_per_token / GIB - 53.29) / 53.29 > 0.02


def test_report_states_the_deduction_once():
    prof = get_engine("vllm")
    note = prof.memory_note(2)
    assert "0.43 GiB" in note and "0.16 GiB of non-torch memory at tp 2" in note and "vllm PR 10511" in note
    assert get_engine("sglang").memory_note(2) == ""
    assert get_engine("vllm@0.6").memory_note(2).count("3.58 GiB") == 2  # the value and its source


def test_report_prints_the_note(capsys):
    from graphs.cli.main import main

    argv = ["simulate", "tiny", "--rate", "5", "--requests", "10", "--device", "h100-sxm"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("non-torch memory at tp 1") == 1


def test_bad_memory_terms_are_refused():
    with pytest.raises(CostModelError, match="non_torch_bytes must be a finite number of bytes >= 0, got -1"):
        EngineConfig(non_torch_bytes=-1)
    with pytest.raises(CostModelError, match="driver_reserved_bytes must be a finite number of bytes >= 0"):
        EngineConfig(driver_reserved_bytes=float("nan"))
    with pytest.raises(CostModelError, match="tp must be a whole number >= 1, got 0"):
        get_engine("vllm").reserved_memory(0)
    with pytest.raises(CostModelError, match="non-torch memory"):
        from graphs.serving.sim.engine import kv_blocks, kv_pool

        pool = kv_pool("llama-3.1-8b", "h100-sxm", 1)
        kv_blocks(pool, 18.5e9, EngineConfig(non_torch_bytes=2e9))
