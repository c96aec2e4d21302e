"""The burst diagnostic's measured ratios (``benchmarks/burst_ttft.py``), pinned to GPUStack's
pages as ``benchmarks/data/published_serving.csv`` transcribes them (source 7 of its README)."""

from __future__ import annotations

import pytest

from benchmarks import burst_ttft


def _by_id() -> dict[str, burst_ttft.Burst]:
    return {b.id: b for b in burst_ttft.bursts()}


def test_a_run_reads_its_mean_ttft_and_the_duration_its_page_prints() -> None:
    """DeepSeek-R1 on vLLM 0.11, 1,000 prompts of 128 tokens: the page's 'Mean TTFT (ms): 19392.11'
    of a 'Benchmark duration (s): 22.07' run: 0.879 of the run, at most 22.07 ms a request."""
    b = _by_id()["gpustack-deepseek-v3-h200-sxm-tp8-base-128-4-ttft"]
    assert b.ttft_s == pytest.approx(19.39211) and (b.duration_s, b.requests) == (22.07, 1000)
    assert b.ratio == pytest.approx(19.39211 / 22.07)
    assert b.per_request_ms == pytest.approx(22.07)


def test_every_prefill_bound_run_hands_out_first_tokens_evenly_and_short_bursts_do_not() -> None:
    """On the long-prompt runs with few outputs the first tokens come evenly (a ratio within 0.075
    of one half, measured); among the 128-token bursts some vLLM runs sit far above it."""
    rows = burst_ttft.bursts()
    long = [
        b
        for b in rows
        if b.prompt >= burst_ttft.PREFILL_BOUND * b.output and b.prompt > burst_ttft.SHORT_PROMPT
    ]
    short = [b for b in rows if b.prompt <= burst_ttft.SHORT_PROMPT]
    assert len(long) >= 50 and len(short) >= 15
    assert all(abs(b.ratio - 0.5) <= 0.075 for b in long)
    assert max(b.ratio for b in short if b.engine == "vllm") > 0.85


def test_write_needs_the_simulated_column() -> None:
    with pytest.raises(SystemExit):
        burst_ttft.main(["--write"])
