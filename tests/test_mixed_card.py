"""The mixed step kept as a card between processes (issue 44 item 3): read back it prices every
iteration as the built step does; a card that does not read back is rebuilt."""

import json

import pytest

from costmodel import formcache
from costmodel.hardware import get_device
from graphs.serving.present.cards import CardError
from graphs.serving.step import mixed
from graphs.serving.step.mixed import MixedStep
from graphs.serving.step.workload import as_workload

ITERATIONS = [
    (3, 3 * 900.0, [], None),
    (0, 0.0, [(700.0, 0.0)], None),
    (12, 12 * 5000.0, [(256.0, 2048.0), (31.0, 0.0)], None),
]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b", "deepseek-v3"])
def test_a_card_prices_as_the_built_step(model):
    hw = get_device("b200")
    built = MixedStep(as_workload(model), hw, 8 if model == "deepseek-v3" else 1)
    card = json.loads(json.dumps(built.to_card()))  # through JSON, as the cache stores it
    back = MixedStep.from_card(card, hw, built.tp)
    assert back.shared_body == built.shared_body and back.windowed == built.windowed
    # the card's text is what the built step's compiled functions evaluate: the same bits
    for n, sc, chunks, _ in ITERATIONS:
        ctxs = [sc / n] * n if n and built.windowed else None
        assert back.time_sums(n, sc, chunks, ctxs) == built.time_sums(n, sc, chunks, ctxs)
    assert back.max_tokens_per_s(8192, 1e-3) == built.max_tokens_per_s(8192, 1e-3)


def test_a_tampered_card_is_refused():
    hw = get_device("h100")
    card = MixedStep(as_workload("tiny"), hw, 1).to_card()
    for bad in (
        {**card, "check": [c * 1.01 for c in card["check"]]},
        {**card, "body": "__import__('os')"},
        {**card, "version": 99},
        {**card, "attention": [{**card["attention"][0], "repeat": -1}]},
    ):
        with pytest.raises(CardError):
            MixedStep.from_card(bad, hw, 1)


def test_the_cache_serves_the_card_and_rebuilds_a_broken_one(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    hw = get_device("h100")
    w = as_workload("tiny")
    first = mixed._carded(w, hw, 1)
    saved = list(tmp_path.rglob("*.json"))
    assert saved, "the step was carded"
    again = mixed._carded(w, hw, 1)  # read back, not built
    assert again.time_sums(4, 400.0) == pytest.approx(first.time_sums(4, 400.0), rel=1e-12)
    built = []
    monkeypatch.setattr(
        mixed.MixedStep, "from_card", classmethod(lambda cls, *a: (_ for _ in ()).throw(CardError("x")))
    )
    orig = mixed.MixedStep.__init__
    monkeypatch.setattr(mixed.MixedStep, "__init__", lambda self, *a: (built.append(1), orig(self, *a))[1])
    mixed._carded(w, hw, 1)
    assert built == [1]
    assert formcache.enabled()
