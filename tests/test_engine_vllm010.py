"""vllm@0.10: V1 as InferenceX ran its Llama-3.1-70B vLLM campaigns (image vllm/vllm-openai:v0.10.2),
pinned to its sources (graphs/serving/engines/vllm010.py) and hand computations."""

from __future__ import annotations

import pytest

from benchmarks.replay import silicon
from benchmarks.request_path_fit import own_path
from costmodel.hardware import get_device
from graphs.serving.engines import get_engine

GIB = 2**30


def test_admission_and_limits_are_the_releases() -> None:
    p = get_engine("vllm@0.10")
    # before vllm PR 37307 (whole-prompt admission) and PR 44594 (the watermark); vllm@1 has the first
    assert (p.reserve_full_prompt, p.kv_watermark) == (False, 0.0)
    assert get_engine("vllm@1").reserve_full_prompt is True
    # V1's block 16, 0.9 of the device, chunked prefill, prefix caching on by default, recompute
    assert (p.block_size, p.kv_rule, p.kv_fraction, p.policy) == (16, "device", 0.9, "recompute")
    assert p.enable_chunked_prefill and p.enable_prefix_caching
    # _set_default_args on a >= 70 GiB GPU not an A100: 8192 tokens, min(1024, 8192) sequences
    h100 = p.for_device(get_device("h100-sxm"))
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    a100 = p.for_device(get_device("a100-sxm-80gb"))
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert get_engine("vllm").version == "1"  # the default vllm profile is unchanged


def test_capture_sizes_step_eight_to_the_top() -> None:
    from graphs.serving.engines.vllm010 import v010_capture_sizes

    # cuda_graph_sizes = [min(2 x 1024, 512)] = [512]: [1, 2, 4] + 8, 16, ..., 512 (64 sizes): 67
    sizes = get_engine("vllm@0.10").overheads().cudagraph_sizes
    assert len(sizes) == 67 and sizes[:5] == (1, 2, 4, 8, 16) and sizes[-3:] == (496, 504, 512)
    # vllm@1's rule steps 16 above 256: ... 480, 496, 512
    assert get_engine("vllm@1").overheads().cudagraph_sizes[-3:] == (480, 496, 512)
    # InferenceX's --max-num-seqs 64: M = min(128, 512) = 128: [1, 2, 4] + 8..128 (16 sizes)
    assert v010_capture_sizes(64) == (1, 2, 4, *range(8, 129, 8)) and len(v010_capture_sizes(64)) == 19
    # sizes above the token budget are dropped: 8, 16, 24 <= 24
    assert v010_capture_sizes(1024, 24) == (1, 2, 4, 8, 16, 24)


def test_memory_reserve_counts_nccl_above_tp_one() -> None:
    from graphs.serving.engines.vllm010 import NCCL_BYTES, v010_memory_reserve

    # V0's log (vllm PR 10511): 1.79 GiB at tp 1, 3.58 GiB at tp 2: 3,843,995,730 - 1,921,997,865
    assert NCCL_BYTES == round(3.58 * GIB) - round(1.79 * GIB) == 1_921_997_865
    # d = 81,559 MiB - 79.22 GiB = 458,982,687 B; R = 0.16 GiB = 171,798,692 B at tp 1
    assert v010_memory_reserve(1) == (458_982_687.0, 171_798_692.0)
    # tp >= 2: 171,798,692 + 1,921,997,865 = 2,093,796,557 B (1.95 GiB), held above tp 2
    assert v010_memory_reserve(2) == v010_memory_reserve(8) == (458_982_687.0, 2_093_796_557.0)
    assert get_engine("vllm@1").reserved_memory(8) == (458_982_687.0, 171_798_692.0)


def test_pool_shrinks_by_the_nccl_blocks() -> None:
    """Llama-3.1-70B BF16 on 4 H100s: k = 2 (K, V) x 80 layers x 2 KV heads per GPU x 128 x 2 B =
    81,920 B per token, a block of 16 tokens 1,310,720 B; 1,921,997,865 B / 1,310,720 B = 1,466.4:
    vllm@0.10's pool is 1,466 or 1,467 blocks below vllm@0.20's (the floor of each side): vllm@1's
    rules without the CUDA-graph estimate, which neither release takes."""
    from graphs.serving.sim.engine import kv_blocks, kv_pool, profile_engine

    pool = kv_pool("llama-3.1-70b", "h100-sxm", 4)
    assert pool.kv_bytes_per_token == 81_920
    old = profile_engine(get_engine("vllm@0.10"), "llama-3.1-70b", "h100-sxm", tp=4)
    new = profile_engine(get_engine("vllm@0.20"), "llama-3.1-70b", "h100-sxm", tp=4)
    drop = kv_blocks(pool, pool.capacity_bytes, new) - kv_blocks(pool, pool.capacity_bytes, old)
    assert drop in (1466, 1467)
    same = profile_engine(get_engine("vllm@0.10"), "llama-3.1-70b", "h100-sxm", tp=1)
    assert same.non_torch_bytes == 171_798_692.0  # tp 1: no NCCL


def test_cpu_terms_are_vllm1s_fit_to_these_runs() -> None:
    p, v1 = get_engine("vllm@0.10"), get_engine("vllm@1")
    # InferenceX's scripts set async-scheduling: true, as the runs vllm@1's terms were fitted to
    assert p.cpu_terms == v1.cpu_terms and p.fitted == v1.fitted and p.cpu_fit == v1.cpu_fit
    for term in ("iteration_s", "per_seq_s", "request_s"):
        assert p.sources[term] == v1.sources[term]
    # the request path fit keeps these rows (same request_s and source string as vllm@1)
    row = {"engine_profile": "vllm@0.10", "engine": "vllm", "source_kind": "aiconfigurator_silicon_client"}
    assert own_path(row, "vllm")


@pytest.mark.parametrize(
    ("model", "version", "profile"),
    [
        ("meta-llama/Llama-3.1-70B", "", "vllm@0.10"),  # the 70B campaign: image v0.10.2
        ("openai/gpt-oss-120b", "", None),  # another campaign, another image
        ("meta-llama/Llama-3.1-70B", "0.18.0", "vllm@0.20"),  # a stated release: its own profile
    ],
)
def test_inferencex_llama_runs_name_the_profile(model: str, version: str, profile: str | None) -> None:
    ix = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=64; wip=False"
    row = {"backend": "vllm", "backend_version": version, "model_path": model, "silicon_data_source": ix}
    row |= {"isl": "1024", "osl": "8192", "tp_size": "2", "gemm_quant_mode": "fp8"}
    got = silicon.engine_settings(row)
    assert got.get("engine_profile") == profile
    # no-enable-prefix-caching: true in every InferenceX vLLM script, a stated release's too
    assert got["engine_prefix_caching"] == "false"
