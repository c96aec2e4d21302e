"""vLLM's KV pool as vLLM measures memory (graphs/serving/engines/vllm.py, vllm011.py, vllm06.py):
``gpu_memory_utilization`` of CUDA's ``mem_get_info`` total, less weights, the activation peak and
the non-torch memory, pinned to hand computations from the sourced numbers and to a vLLM log."""

from __future__ import annotations

import dataclasses
import math
import re

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
    # with vLLM >= 0.21's CUDA-graph estimate at an H100's default 1,024 sequences (every one of the
    # 51 capture sizes also a FULL graph), 32 layers x (12,794,261 + 89,644 x 100) B = 696,277,152 B
    # (0.648 GiB; test_cudagraph_estimate_by_hand): floor((58,154,868,211.3 - 696,277,152) / 2,097,152)
    #       = floor(57,458,591,059.3 / 2,097,152) = floor(27,398.4...) = 27,398
    graphs = math.floor(
        (0.9 * (85_520_809_984 - 458_982_687) - 16_060_522_496 - act - 171_798_692 - 696_277_152) / block
    )
    assert graphs == 27_398
    eng = profile_engine(get_engine("vllm"), "llama-3.1-8b", "h100-sxm", tp=1)
    assert (eng.driver_reserved_bytes, eng.non_torch_bytes) == (458_982_687.0, 171_798_692.0)
    assert kv_blocks(pool, pool.capacity_bytes, eng) == graphs
    no_graphs = dataclasses.replace(eng, cudagraph_bytes_per_layer=0.0)
    assert kv_blocks(pool, pool.capacity_bytes, no_graphs) == after  # 310 blocks (1.1 %) fewer with it
    plain = dataclasses.replace(no_graphs, driver_reserved_bytes=0.0, non_torch_bytes=0.0)
    assert kv_blocks(pool, pool.capacity_bytes, plain) == before  # 279 blocks (1.0 %) fewer with those
    # vllm@0.11 predates the estimate (vllm PR 30515; on by default from v0.21.0): unchanged
    old = profile_engine(get_engine("vllm@0.11"), "llama-3.1-8b", "h100-sxm", tp=1)
    assert old.cudagraph_bytes_per_layer == 0.0


def test_cudagraph_estimate_by_hand():
    """V1's CUDA-graph estimate per decoder layer from two start-up logs of Qwen2.5-7B (28 layers):
    0.35 GiB at PIECEWISE=5, FULL=4 (4 + 3 = 7 graphs extrapolated), 0.53 GiB at PIECEWISE=51,
    FULL=35 (50 + 34 = 84). 28 g = 0.18 GiB / 77 = 2,510,045.8 B, g = 89,644.5 B; 28 f = 0.35 GiB -
    7 x 2,510,045.8 B = 358,239,317.6 B, f = 12,794,261.3 B."""
    from graphs.serving.engines.vllm import (
        V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER,
        V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER,
        v1_cudagraph_memory,
        vllm_capture_sizes,
    )

    assert V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER == 89_644
    assert V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER == 12_794_261
    # the defaults: 51 capture sizes (1, 2, 4, 8 ... 248, 256 ... 512), 35 of them <= 256 sequences
    sizes = vllm_capture_sizes(256, 8192)
    assert len(sizes) == 51 and sum(1 for s in sizes if s <= 256) == 35
    # the logs it is fitted to: 28 x (12,794,261 + 89,644 x 84) = 569,081,996 B = 0.530 GiB;
    # 28 x (12,794,261 + 89,644 x 7) = 375,809,532 B = 0.350 GiB (max_num_seqs 8: sizes 1, 2, 4, 8, 16)
    assert v1_cudagraph_memory(28) == 569_081_996
    assert v1_cudagraph_memory(28, max_num_seqs=8) == 375_809_532
    assert round(569_081_996 / GIB, 2) == 0.53 and round(375_809_532 / GIB, 2) == 0.35
    # Llama-3.1-8B (32 layers) 650,379,424 B = 0.606 GiB; Llama-3.1-70B (80) 1,625,948,560 B = 1.514 GiB
    assert v1_cudagraph_memory(32) == 650_379_424
    assert v1_cudagraph_memory(80) == 1_625_948_560
    # per layer in the profile: the same law at one layer, at its own 1,024 sequences (all 51 sizes
    # FULL too: 50 + 50 graphs past the first); at 256 sequences 50 + 34 = 84
    assert get_engine("vllm").cudagraph_bytes_per_layer() == 12_794_261 + 89_644 * 100
    assert v1_cudagraph_memory(1, max_num_seqs=256) == 12_794_261 + 89_644 * 84
    assert get_engine("vllm@0.11").cudagraph_bytes_per_layer() == 0.0
    assert get_engine("vllm@0.6").cudagraph_bytes_per_layer() == 0.0
    assert get_engine("sglang").cudagraph_bytes_per_layer() == 0.0


def test_cudagraph_log_reproduced():
    """A third dense model's log, not fitted: google/gemma-4-E4B-it (42 layers: NVIDIA NeMo's Gemma 4
    E4B recipe, gemma.cpp PR 919), vLLM 0.22.1 at tp 1 on a 24 GB GPU, "Profiling CUDA graph memory:
    PIECEWISE=51 (largest=512), FULL=35 (largest=256)", "Estimated CUDA graph memory: 0.79 GiB
    total". Modelled 42 x (12,794,261 + 89,644 x 84) = 853,622,994 B = 0.795 GiB: within 2 %
    (+0.6 %)."""
    from graphs.serving.engines.vllm import v1_cudagraph_memory

    g = v1_cudagraph_memory(42)
    assert g == 853_622_994
    assert abs(g / GIB - 0.79) / 0.79 < 0.02


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
    assert "20.8 MiB a layer of CUDA graphs (an ESTIMATE" in note  # 12,794,261 + 89,644 x 100 = 21,758,661 B (20.75 MiB)
    assert "0.65 GiB for 32 layers of CUDA graphs" in prof.memory_note(1, 32)  # 696,277,152 B = 0.648 GiB
    assert note.count("ESTIMATE") == 1
    assert "CUDA graphs" not in get_engine("vllm@0.11").memory_note(2)
    assert get_engine("sglang").memory_note(2) == ""
    assert get_engine("vllm@0.6").memory_note(2).count("3.58 GiB") == 2  # the value and its source


def test_report_prints_the_note(capsys):
    from graphs.cli.main import main

    argv = ["simulate", "tiny", "--rate", "5", "--requests", "10", "--device", "h100-sxm"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("non-torch memory at tp 1") == 1
    assert out.count("of CUDA graphs (an ESTIMATE") == 1


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
    with pytest.raises(CostModelError, match="cudagraph_bytes_per_layer must be a finite number of bytes >= 0"):
        EngineConfig(cudagraph_bytes_per_layer=-5)
    with pytest.raises(CostModelError, match="layers must be a whole number >= 1"):
        from graphs.serving.engines.vllm import v1_cudagraph_memory

        v1_cudagraph_memory(0)
    with pytest.raises(CostModelError, match="per decoder layer: layers must be a whole number >= 1, got 0"):
        from graphs.serving.engines.profile import KVPool
        from graphs.serving.sim.engine import kv_blocks

        bare = KVPool(capacity_bytes=85.5e9, weights_bytes=16e9, activation_bytes_per_token=0.0, kv_bytes_per_token=131072)
        kv_blocks(bare, bare.capacity_bytes, EngineConfig(cudagraph_bytes_per_layer=2e7))
    with pytest.raises(CostModelError, match="CUDA graphs"):
        from graphs.serving.sim.engine import kv_pool

        pool = kv_pool("llama-3.1-8b", "h100-sxm", 1)
        kv_blocks(pool, 19.5e9, EngineConfig(cudagraph_bytes_per_layer=2e7))


def test_sampler_peak_by_hand():
    """vLLM's sampler profile run (graphs/serving/engines/sampler_memory.py, SAMPLERS["torch"]):
    2 (BF16 logits) + 4 (float32 copy) + 4 + 8 (sort values, int64 indices) + 8 + 4 + 8 (sort
    scratch: reverse indices, CUB's alternate keys and values) = 38 B a logit, over min(N, R) rows."""
    from graphs.serving.engines.knobs import profile_peak_bytes
    from graphs.serving.engines.sampler_memory import SAMPLERS

    assert SAMPLERS["torch"] == 2 + 4 + 4 + 8 + 8 + 4 + 8 == 38
    # gpt-oss-120b's 201,088-token vocabulary at 1,024 sequences: 7,824,736,256 B (7.29 GiB)
    assert profile_peak_bytes(407_936, 8192, 38, 1024, 201_088) == 38 * 1024 * 201_088 == 7_824_736_256
    # rows are min(N, R): a 512-token budget samples 512 dummy requests
    assert profile_peak_bytes(0, 512, 38, 1024, 201_088) == 38 * 512 * 201_088
    # the forward pass sets the peak when it is larger, and nothing is counted without the rule
    assert profile_peak_bytes(10**6, 8192, 38, 256, 32_000) == 10**6 * 8192
    assert profile_peak_bytes(407_936, 8192, 0, 1024, 201_088) == 407_936 * 8192
    assert get_engine("vllm@0.11").sampler_bytes_per_logit == get_engine("vllm@0.12").sampler_bytes_per_logit == 38
    for ref in ("vllm", "vllm@0.10", "vllm@0.20", "sglang", "trtllm"):
        assert get_engine(ref).sampler_bytes_per_logit == 0
    # FlashInfer's top_k_top_p_sampling_from_logits: BF16 and float32 logits, masked logits, softmax
    assert SAMPLERS == {"torch": 38.0, "flashinfer": 2 + 4 + 4 + 4}


def test_sampler_override_checked():
    prof = get_engine("vllm@0.11")
    fi = prof.with_overrides(sampler="flashinfer")
    assert fi.sampler_bytes_per_logit == 14 and "sampler" in fi.overridden
    assert "sampler torch" in prof.summary() and "sampler" not in get_engine("vllm").summary()
    with pytest.raises(CostModelError, match="sampler 'fast' not allowed; allowed: torch, flashinfer"):
        prof.with_overrides(sampler="fast")
    with pytest.raises(CostModelError, match="does not count the sampler's profile run"):
        get_engine("vllm").with_overrides(sampler="torch")


def test_cli_sampler_flag(capsys):
    from graphs.cli import main

    args = ["simulate", "gpt-oss-120b", "--device", "h100", "--engine", "vllm@0.11", "--requests", "4", "--rate", "1"]
    assert main(args) != 0
    assert "the sampler's profile run" in capsys.readouterr().err
    assert main([*args, "--sampler", "flashinfer", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"sampler": "flashinfer"' in out


def _gpt_oss_h100(**overrides):
    from costmodel.hardware import get_device
    from graphs.serving.sim.engine import kv_pool, moe_kernel_padding

    prof = get_engine("vllm@0.11").for_device(get_device("h100-sxm"))
    if overrides:
        prof = prof.with_overrides(**overrides)
    pool = kv_pool("gpt-oss-120b", "h100-sxm", 1)
    pad = moe_kernel_padding(prof, "gpt-oss-120b", "h100-sxm")[1]
    return prof, dataclasses.replace(pool, weights_bytes=pool.weights_bytes + pad)


def test_gpt_oss_120b_logs_on_one_h100_reproduced():
    """Two vLLM logs of gpt-oss-120b (Marlin MXFP4 experts) on one H100 80 GB, not fitted:
    vllm issue 23278 (0.10.1, the defaults): "Model loading took 65.9651 GiB", "Available KV
    cache memory: -2.14 GiB" (the engine does not start); vllm issue 27508 (0.11.0,
    ``--gpu-memory-utilization 0.95 --max-num-batched-tokens 1024``): "Available KV cache memory:
    1.71 GiB". The model: weights 65.90 GiB with Marlin's padding (the log's 65.97), the sampler's
    profile run 38 x 1,024 x 201,088 B = 7.29 GiB; 0.9 x 79.22 - 65.90 - 7.29 - 0.16 = -2.05 GiB
    (no room), 0.95 x 79.22 - 65.90 - 7.29 - 0.16 = 1.91 GiB (+0.20 GiB). Without the sampler's
    run (the forward pass: 3.11 GiB at 8,192 tokens, 0.39 at 1,024) the pools were 2.13 GiB (it
    would start) and 8.8 GiB."""
    prof, pool = _gpt_oss_h100()
    assert (prof.max_num_seqs, prof.max_num_batched_tokens) == (1024, 8192)
    assert abs(pool.weights_bytes / GIB - 65.9651) < 0.1
    with pytest.raises(CostModelError, match=r"activations \(7\.82 GB: the sampler's profile run\)") as err:
        prof.kv_blocks(pool, 1)
    # the shortfall the log states, -2.14 GiB (the model's -2.05 GiB = 2.20 GB), is said
    short = re.search(r"leaves nothing \((\d+\.\d+) GB short\)", str(err.value))
    assert short is not None and abs(float(short[1]) * 1e9 / GIB - 2.14) < 0.1
    prof, pool = _gpt_oss_h100(kv_fraction=0.95, max_num_batched_tokens=1024)
    kv = prof.kv_blocks(pool, 1) * prof.block_size * pool.kv_bytes_per_token
    assert abs(kv / GIB - 1.71) < 0.25
    before = dataclasses.replace(prof, sampler="")
    kv_before = before.kv_blocks(pool, 1) * prof.block_size * pool.kv_bytes_per_token
    assert 8.5 < kv_before / GIB < 9  # 8.81 GiB: the forward pass alone at 1,024 tokens is 0.39 GiB


def test_simulator_pool_counts_the_sampler():
    """The simulator sizes its own pool by the same rule (graphs.serving.sim.engine.kv_blocks)."""
    from graphs.serving.sim.engine import kv_blocks

    prof, pool = _gpt_oss_h100(kv_fraction=0.95, max_num_batched_tokens=1024)
    cfg = prof.engine_config(None, tp=1)
    assert cfg.sampler_bytes_per_logit == 38
    assert kv_blocks(pool, pool.capacity_bytes, cfg) == prof.kv_blocks(pool, 1)
    assert "sampler's profile run over 1,024 rows of the vocabulary (7.29 GiB" in prof.memory_note(1, 36, 201_088)
    # a given sampler is said given, not the default's source
    note = prof.with_overrides(sampler="flashinfer").memory_note(1, 36, 201_088)
    assert "(2.68 GiB: 14 B a logit" in note and note.endswith("; given)") and "PyPI" not in note


def test_sampler_rows_are_the_configured_limit():
    """A pool sized after guaranteed_no_evict lowers max_num_seqs to what fits still samples over
    the limit the engine was started with (both pool paths agree)."""
    from graphs.serving.sim.engine import kv_blocks

    prof, pool = _gpt_oss_h100(kv_fraction=0.95, max_num_batched_tokens=1024, policy="guaranteed_no_evict")
    cfg = prof.engine_config(pool, tp=1, request_tokens=4096)
    assert cfg.max_num_seqs < 1024 and cfg.sampler_rows == 1024
    assert kv_blocks(pool, pool.capacity_bytes, cfg) == prof.kv_blocks(pool, 1)
