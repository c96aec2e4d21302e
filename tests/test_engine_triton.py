"""triton-trtllm: TensorRT-LLM behind Triton's tensorrtllm_backend, pinned to its sources
(graphs/serving/engines/triton.py)."""

import pytest

from graphs.serving.engines import get_engine


def test_triton_defaults_are_its_sources():
    p, bench = get_engine("triton-trtllm"), get_engine("trtllm-bench")
    # model_config.html: enable_chunked_context default false; guaranteed_no_evict; 0.9 free memory
    assert (p.enable_chunked_prefill, p.policy, p.kv_rule, p.kv_fraction) == (
        False,
        "guaranteed_no_evict",
        "free",
        0.9,
    )
    assert (p.framework, p.max_num_batched_tokens, p.max_num_seqs, p.block_size) == (
        "trtllm",
        bench.max_num_batched_tokens,
        bench.max_num_seqs,
        bench.block_size,
    )
    # perf_analyzer's breakdown: overhead 36 + queue 42 + compute input 164 + compute output 15 us
    # per model, three models in the ensemble; the tokenizer's 2 us per prompt token
    assert p.cpu_terms["request_s"] == pytest.approx(3 * (36 + 42 + 164 + 15) * 1e-6)
    assert p.cpu_terms["per_prompt_token_s"] == 2e-6 and p.cpu_terms["prefix_lookup_per_token_s"] == 0
    assert "request_s" not in p.fitted and "perf_analyzer" in p.sources["request_s"]
    # the CPU terms per iteration and sequence are TensorRT-LLM's (its fits stand in)
    for t in ("iteration_s", "per_seq_s", "per_token_s", "output_token_s"):
        assert p.cpu_terms[t] == bench.cpu_terms[t]


def test_the_accuracy_page_replays_triton_rows_with_its_profile():
    from benchmarks import replay

    assert replay.ENGINE["tensorrt-llm (Triton tensorrtllm_backend)"] == "triton-trtllm"
    row = next(
        r for r in replay.load_rows(subset="core") if r["id"].startswith("trt014srv-") and "qps2-" in r["id"]
    )
    w = replay.row_workload(row, quick=True)
    assert w.profile == "triton-trtllm" and not w.engine.enable_chunked_prefill
