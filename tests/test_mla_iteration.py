"""An MLA model's iteration with several prefill chunks, or decodes beside a chunk, reads the
weights both token paths share once (issue 42: a burst of 1,000 short prompts on DeepSeek-R1 was
priced with every chunk re-reading the experts: each 8,192-token iteration 1.35 s on 8 H200s,
where the compiled prefill step of the same 64 prompts is 0.16 s at its bound)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.hardware import get_device
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.mixed import mixed_step

MLA = "deepseek-v3"


@pytest.mark.parametrize("model", [MLA, "llama-3.1-8b"])
@pytest.mark.parametrize(("k", "c"), [(64, 128), (8, 1024), (3, 7)])
def test_k_chunks_cost_the_compiled_prefill_of_k_prompts(model: str, k: int, c: int) -> None:
    """``k`` chunks of ``c`` new tokens in one iteration are the chunked-prefill step of a batch of
    ``k`` prompts of ``c`` tokens (``(B, S) = (k, c)``): token-wise kernels over ``k c`` tokens,
    the head over ``k`` rows, attention per prompt."""
    hw = get_device("h200")
    ms = mixed_step(model, hw, tp=8)
    want = compiled_step(model, hw, "prefill", tp=8, chunked=True).step(k, c, 0)
    assert math.isclose(ms.time(chunks=[(c, 0)] * k), want, rel_tol=1e-9)


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 512), ctx=st.integers(16, 32768), c=st.integers(1, 8192))
def test_decodes_beside_a_chunk_read_the_shared_weights_once(d: int, ctx: int, c: int) -> None:
    """A mixed MLA iteration costs less than its decodes and its chunk run apart (the weights both
    paths share, the experts among them, are read once) and no less than either."""
    ms = mixed_step(MLA, get_device("h200"), tp=8)
    mixed = ms.time([ctx] * d, [(c, 0)])
    apart = ms.time([ctx] * d), ms.time(chunks=[(c, 0)])
    assert max(apart) <= mixed * (1 + 1e-12)
    assert mixed < sum(apart)


def test_predicted_chunks_read_the_experts_once() -> None:
    """With vLLM's measured kernels, 64 prompts of 128 tokens in one iteration cost about what one
    8,192-token chunk does (the same weights and tokens; only attention is per prompt): within
    20 %, not 64 expert reads."""
    pytest.importorskip("aiconfigurator_core")
    from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step

    step = predicted_mixed_step(MLA, "h200", tp=8, predictor=Predictor.of("vllm"))
    many = step.time_sums(0, 0.0, [(128.0, 0.0)] * 64)
    one = step.time_sums(0, 0.0, [(8192.0, 0.0)])
    assert 0.8 < many / one < 1.2
    mixed = step.time_sums(64, 64 * 2000.0, [(512.0, 0.0)])
    assert mixed < step.time_sums(64, 64 * 2000.0) + step.time_sums(0, 0.0, [(512.0, 0.0)])


def test_predicted_chunk_after_a_cached_prefix_keeps_its_measured_kernels() -> None:
    """A chunk after a cached prefix runs the same shared kernels as one without (measured), and
    only its K/V decompression of the prefix and its attention more: never cheaper."""
    pytest.importorskip("aiconfigurator_core")
    from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step

    step = predicted_mixed_step(MLA, "h200", tp=8, predictor=Predictor.of("vllm"))
    assert step.time_sums(0, 0.0, [(512.0, 3000.0)]) >= step.time_sums(0, 0.0, [(512.0, 0.0)])
    assert step.time_sums(0, 0.0, [(100.0, 50.0)]) <= step.time_sums(0, 0.0, [(100.0, 50.0), (30.0, 0.0)])
