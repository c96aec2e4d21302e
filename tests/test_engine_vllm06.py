"""vllm@0.6: V0's long-context defaults, pinned to its sources (graphs/serving/engines/vllm06.py)."""

from __future__ import annotations

import json

from graphs.cli.main import main
from graphs.serving.engines import get_engine
from graphs.serving.engines.vllm06 import v0_capture_sizes


def test_v0_defaults_are_its_sources():
    p = get_engine("vllm@0.6")
    # create_engine_config: chunked prefill on for max_model_len > 32K; SchedulerConfig: then 512 tokens
    assert (p.enable_chunked_prefill, p.max_num_batched_tokens) == (True, 512)
    # EngineArgs: 256 sequences, 16-token blocks, 0.9 of the device; recompute preemption
    assert (p.max_num_seqs, p.block_size, p.kv_rule, p.kv_fraction, p.policy) == (
        256,
        16,
        "device",
        0.9,
        "recompute",
    )
    assert p.fitted == () and "vllm@0.6 defaults (assumed, not fitted" in p.basis
    assert get_engine("vllm").version == "1"  # V1 stays the default vllm


def test_v0_capture_sizes():
    # [1, 2, 4] + [8, 16, ..., 256]: 3 + 32 sizes, up to max_num_seqs padded to a multiple of 8
    assert len(v0_capture_sizes(256)) == 35 and v0_capture_sizes(256)[-1] == 256
    assert v0_capture_sizes(20)[-1] == 24  # 20 -> 24
    assert get_engine("vllm@0.6").overheads().padded(13) == 16


def test_listed_and_simulated(capsys):
    assert main(["simulate", "--engine", "list"]) == 0
    assert "vllm@0.6: vLLM 0.6 (V0)" in capsys.readouterr().out
    assert (
        main(
            [
                "simulate",
                "tiny",
                "--engine",
                "vllm@0.6",
                "--rate",
                "5",
                "--requests",
                "20",
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["engine"]["engine"] == "vllm@0.6" and doc["engine"]["settings"]["max_num_batched_tokens"] == 512
    )


def test_v0_token_budget_source_names_its_releases():
    # vLLM v0.6.0's SchedulerConfig took 512 with chunked prefill; vllm PR 10544 ("Update default
    # max_num_batch_tokens for chunked prefill to 2048", merged 2024-11-21) made it 2048 from v0.6.5
    p = get_engine("vllm@0.6")
    src = p.sources["max_num_batched_tokens"]
    assert p.max_num_batched_tokens == 512
    assert "v0.6.0-v0.6.4" in src and "2048 from v0.6.5" in src and "PR 10544" in src
