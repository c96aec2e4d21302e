"""vllm@0.11: V1 with the device-dependent batch limits of vLLM 0.11, pinned to its source
(``vllm/engine/arg_utils.py`` ``EngineArgs._set_default_args``; graphs/serving/engines/vllm011.py)."""

from __future__ import annotations

import json

import pytest

from costmodel.hardware import get_device
from graphs.cli.main import main
from graphs.serving.engines import get_engine


@pytest.mark.parametrize(
    ("device", "tokens", "seqs"),
    [
        # H100 SXM: 80e9 B >= 70 GiB = 75,161,927,680 B, not an A100: 8192 tokens, min(1024, 8192) seqs
        ("h100-sxm", 8192, 1024),
        ("h200", 8192, 1024),
        # A100 80 GB: the name check sends it to the small branch (vLLM PR 17885's regression)
        ("a100-sxm-80gb", 2048, 256),
        # RTX 4090: 24e9 B < 70 GiB: 2048 tokens, min(256, 2048) seqs
        ("rtx-4090", 2048, 256),
    ],
)
def test_batch_limits_follow_the_device(device: str, tokens: int, seqs: int) -> None:
    p = get_engine("vllm@0.11").for_device(get_device(device))
    assert (p.max_num_batched_tokens, p.max_num_seqs) == (tokens, seqs)


def test_other_defaults_are_its_sources() -> None:
    p = get_engine("vllm@0.11")
    # CacheConfig block 16 and 0.9 of the device; V1 chunks prefills, caches prefixes, recomputes
    assert (p.block_size, p.kv_rule, p.kv_fraction, p.policy) == (16, "device", 0.9, "recompute")
    assert p.enable_chunked_prefill and p.enable_prefix_caching
    # before vllm PR 37307 (full-prompt admission) and PR 44594 (watermark)
    assert (p.reserve_full_prompt, p.kv_watermark) == (False, 0.0)
    # capture sizes: M = min(2 x 1024, 512, 8192) = 512 -> ... 480, 496, 512
    assert p.overheads().cudagraph_sizes[-3:] == (480, 496, 512)
    assert p.fitted == () and "vllm@0.11 defaults (assumed, not fitted" in p.basis
    assert get_engine("vllm").version == "1"  # V1's profile stays the default vllm
    # a limit the user gives is kept on every device
    assert (
        get_engine("vllm@0.11").with_overrides(max_num_seqs=64).for_device(get_device("h100")).max_num_seqs
        == 64
    )


def _mean_batch(engine: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, float]:
    argv = ["simulate", "tiny", "--device", "h100-sxm", "--engine", engine, "--concurrency", "400"]
    argv += ["--requests", "400", "--prompt", "fixed:16", "--output", "fixed:32", "--quiet", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc["engine"]["settings"]["max_num_seqs"], doc["mean_batch"]


def test_listed_and_runs_more_than_256_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--engine", "list"]) == 0
    assert "vllm@0.11: vLLM 0.11 (V1)" in capsys.readouterr().out
    # 400 clients of 16 + 32 tokens: 400 x 16 = 6,400 prompt tokens fit one 8,192-token iteration;
    # on an H100 (>= 70 GiB) 0.11's 1,024 sequences let all 400 run together, and V1's too (its
    # get_batch_defaults: 1,024; the profile kept 256 until 2026-12-07); a 256 limit caps them
    seqs, mean = _mean_batch("vllm@0.11", capsys)
    assert seqs == 1024 and mean > 256
    seqs, mean = _mean_batch("vllm@1", capsys)
    assert seqs == 1024 and mean > 256
    argv = ["simulate", "tiny", "--device", "h100-sxm", "--engine", "vllm@1", "--max-num-seqs", "256"]
    argv += ["--concurrency", "400", "--requests", "400", "--prompt", "fixed:16", "--output", "fixed:32"]
    assert main([*argv, "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_batch"] <= 256


def test_capture_sizes_source_flags_0110() -> None:
    # vLLM 0.11.0's gpt-oss override says raising the capture limit from 512 to 992 takes the
    # graphs "from 67 to 81" (quoted in SemiAnalysisAI/InferenceX issue 117): 67 is 3 + 512 / 8,
    # the step-8 rule, not the two-step rule vllm PR 26016 brought (51 sizes at 512, 0.11.1 on)
    from graphs.serving.engines.vllm010 import v010_capture_sizes

    assert len(v010_capture_sizes(1024, 8192)) == 3 + 512 // 8 == 67
    assert 3 + 256 // 8 + (992 - 256) // 16 == 81  # the override's 81: step 8 to 256, 16 to 992
    p = get_engine("vllm@0.11")
    assert len(p.overheads().cudagraph_sizes) == 51  # unchanged: the replayed tables hold it
    src = p.sources["cudagraph_sizes"]
    assert "likely WRONG for 0.11.0" in src and "67 sizes" in src and "PR 26016" in src
    assert "WRONG" not in get_engine("vllm@0.12").sources["cudagraph_sizes"]
