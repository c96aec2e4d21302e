"""Every step type satisfies its level's protocol (graphs.serving.pricing.protocols), so that the simulator,
search and the speculator price any of them alike; the predictor's steps also meter their
seconds, the bound's do not."""

import pytest

from graphs.serving.pricing.protocols import IterationStep, MeteredIterationStep, MeteredPointStep, PointStep
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.mixed import mixed_step


def test_bound_steps_satisfy_the_protocols_and_meter_nothing():
    it = mixed_step("tiny", "h100")
    pt = compiled_step("tiny", "h100", "decode")
    assert isinstance(it, IterationStep) and not isinstance(it, MeteredIterationStep)
    assert isinstance(pt, PointStep) and not isinstance(pt, MeteredPointStep)


def test_predicted_steps_satisfy_the_metered_protocols():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step
    from graphs.serving.pricing.priced import priced_step

    pred = Predictor.of("vllm")
    it = predicted_mixed_step("llama-3.1-8b", "h100", predictor=pred)
    pt = priced_step("llama-3.1-8b", "h100", "decode", predictor=pred)
    assert isinstance(it, MeteredIterationStep) and isinstance(pt, MeteredPointStep)
    # both levels price the same decode: 8 sequences at KV length 1000, never below the bound
    bound = mixed_step("llama-3.1-8b", "h100").time_sums(8, 8 * 1000.0)
    assert it.time_sums(8, 8 * 1000.0) >= bound
    assert pt.step(8, 999) >= compiled_step("llama-3.1-8b", "h100", "decode").step(8, 999)


def test_no_step_union_needs_an_ignore():
    """The callers that priced either step type alike used ``type: ignore[union-attr]``."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    hits = [
        f"{p.relative_to(root)}:{i}"
        for p in (root / "graphs").rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "ignore[union-attr]" in line
    ]
    assert not hits, hits
