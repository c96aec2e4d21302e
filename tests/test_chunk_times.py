"""Lone-chunk iteration times over arrays (``MixedStep.chunk_times``), the TTFT floors of a
calibration (``roofline_ttft_s``): the same values as the scalar step, element for element."""

import numpy as np
import pytest

from costmodel.hardware import get_device
from graphs.serving.planning.serving_fit import roofline_ttft_s
from graphs.serving.step.mixed import MixedStep, mixed_step
from graphs.serving.step.workload import as_workload


def _loop(step, new, cached):
    """What roofline_ttft_s computed, one (new, cached) pair at a time (before it was vectorised)."""
    ctxs = [] if step.windowed else None
    return np.array(
        [step.time_sums(0, 0.0, [(float(c), float(k))], ctxs) for c, k in zip(new, cached, strict=True)]
    )


@pytest.mark.parametrize(
    ("model", "vectorised"),
    [
        ("llama-3.1-8b", True),  # one body for decode and prefill tokens, one attention kernel
        ("mamba2-2.7b", True),  # the prefill's own body, no attention kernel
        ("gemma-3-27b", True),  # sliding-window and global attention: two kernels
        ("qwen3-30b-a3b", False),  # its experts hit, 1 - (1 - k/E)**S: a power, the scalar path
    ],
)
def test_chunk_times_equal_the_scalar_step_bit_for_bit(model, vectorised):
    rng = np.random.default_rng(7)
    new = rng.integers(1, 40_000, 400).astype(float)
    cached = rng.integers(0, 30_000, 400).astype(float)
    hw = get_device("h100")
    built = MixedStep(as_workload(model), hw, 1)
    read = MixedStep.from_card(built.to_card(), hw, 1)  # the form cache's step: its text compiled
    for step in (built, MixedStep(as_workload(model), hw, 1), read):
        got = step.chunk_times(new, cached)
        assert (step._chunk_arrays is not None) == vectorised
        want = _loop(step, new, cached)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()  # equal, not close


def test_the_ttft_floors_are_the_loops():
    rng = np.random.default_rng(3)
    prompt = rng.integers(1, 20_000, 1000)
    cached = rng.integers(0, 25_000, 1000)  # some above their prompt: one token is still computed
    got = roofline_ttft_s("llama-3.1-8b", "h100", prompt, cached)
    step = mixed_step("llama-3.1-8b", "h100")
    new = np.maximum(prompt - cached, 1)
    assert got.tolist() == _loop(step, new, prompt - new).tolist()
    assert step._chunk_arrays is not None
