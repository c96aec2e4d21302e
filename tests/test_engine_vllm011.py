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
    # 0.11.0's capture sizes: M = min(2 x 1024, 512) = 512, 8 apart to the top -> ... 496, 504, 512
    assert p.overheads().cudagraph_sizes[-3:] == (496, 504, 512)
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
    return doc["engine"]["settings"]["max_num_seqs"], doc["mean_batch_sequences"]


def test_listed_and_runs_more_than_256_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--engine", "list"]) == 0
    out = capsys.readouterr().out
    assert "vllm@0.11: vLLM 0.11.0 (V1)" in out and "vllm@0.11.1: vLLM 0.11.1-0.11.2 (V1)" in out
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
    assert json.loads(capsys.readouterr().out)["mean_batch_sequences"] <= 256


def test_capture_sizes_are_0110s_and_0111_on_take_the_two_step_rule() -> None:
    # vLLM 0.11.0's gpt-oss override says raising the capture limit from 512 to 992 takes the
    # graphs "from 67 to 81" (quoted in SemiAnalysisAI/InferenceX issue 117): 67 is 3 + 512 / 8,
    # the step-8 rule; 81 is the two-step rule vllm PR 26016 brought (0.11.1 on) at 992
    from graphs.serving.engines import release_profile

    # the override's 81 is the two-step rule's count at 992 (3 + 31 + 47), not the step-8 one's
    assert len([1, 2, 4, *range(8, 256, 8), *range(256, 992 + 1, 16)]) == 81
    assert len([1, 2, 4, *range(8, 992 + 1, 8)]) == 127
    old = get_engine("vllm@0.11").overheads().cudagraph_sizes  # 1,024 sequences, 8,192 tokens
    assert len(old) == 3 + 512 // 8 == 67 and old[-4:] == (488, 496, 504, 512)
    assert "67 sizes at M = 512" in get_engine("vllm@0.11").sources["cudagraph_sizes"]
    # 0.11.1 and 0.11.2 (and 0.12.0): [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16) = 3 + 31 + 17
    for ref in ("vllm@0.11.1", "vllm@0.12"):
        new = get_engine(ref).overheads().cudagraph_sizes
        assert len(new) == 3 + 31 + 17 == 51 and new[-3:] == (480, 496, 512), ref
        assert "PR 26016, from 0.11.1" in get_engine(ref).sources["cudagraph_sizes"], ref
    # a decode batch of at most 256 pads the same under both
    assert [s for s in old if s <= 256] == [s for s in new if s <= 256]
    # a stated release names its rule: 0.11.0 the step-8 one, 0.11.1 and 0.11.2 the two-step one
    assert release_profile("vllm", "0.11.0").ref == "vllm@0.11"
    assert release_profile("vllm", "0.11.1").ref == release_profile("vllm", "0.11.2").ref == "vllm@0.11.1"
    # every other default is 0.11.0's
    a, b = get_engine("vllm@0.11").to_dict()["settings"], get_engine("vllm@0.11.1").to_dict()["settings"]
    assert a == b
