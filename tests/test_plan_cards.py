"""The search's plan cards: forms read back give the compiled forms' values bit for bit.

The reference is the compiled step itself (``lambdify`` of the step's ``step_s`` and of the
decode ledger, :mod:`graphs.serving.step.compiled`), evaluated on a grid the card was not
checked at; a warm search (every plan from its card) answers exactly what a cold one does.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import formcache
from costmodel.hardware import get_device
from costmodel.keys import Phase
from graphs.serving.planning import design_search, plan_cards
from graphs.serving.step.card_format import CardError, lambdified_text
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.ledger_fit import decode_memory
from models.catalog import get_model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    return tmp_path


def _grid() -> tuple[np.ndarray, np.ndarray]:
    b, x = np.meshgrid(np.arange(1.0, 700.0, 37.0), np.array([1.0, 17.0, 1000.0, 4097.0, 60000.0, 250000.0]))
    return b.ravel(), x.ravel()


# dense GQA; MoE split over 4 expert-parallel devices; MLA; sliding window and MoE
@pytest.mark.parametrize(
    ("model", "device", "tp", "ep"),
    [
        ("llama-3.1-70b", "h100", 4, 1),
        ("mixtral-8x7b", "h200", 2, 4),
        ("deepseek-v3", "b200", 8, 1),
        ("gpt-oss-20b", "a100", 1, 1),
    ],
)
def test_card_forms_equal_compiled_forms_bit_for_bit(cache, model, device, tp, ep):
    cfg, hw = get_model(model), get_device(device)
    built = plan_cards.plan_forms(cfg, hw, tp, ep, "scale_up")  # compiled, and carded
    cards = list((cache / "forms").glob("search-plan-*.json"))
    assert len(cards) == 1
    read = plan_cards.plan_forms(cfg, hw, tp, ep, "scale_up")  # from the card
    assert isinstance(read.decode, plan_cards.CardForm)
    dec = compiled_step(cfg, hw, Phase.DECODE, tp=tp, ep=ep)
    pre = compiled_step(cfg, hw, Phase.PREFILL, tp=tp, ep=ep)
    assert built.decode is dec and built.prefill is pre
    b, x = _grid()
    assert np.array_equal(read.decode.step_array(b, x), dec.step_array(b, x))
    assert np.array_equal(read.prefill.step_array(b, x), pre.step_array(b, x))
    assert np.array_equal(read.memory(b, x), decode_memory(cfg, hw, tp=tp)(b, x))
    assert read.routed_bytes == built.routed_bytes
    for a, c in ((read.hop, built.hop), (read.a2a, built.a2a)):  # in the micro-batch
        assert np.array_equal(a(b), c(b))
    assert (read.a2a(b) > 0).all() == (ep > 1)  # an all-to-all only across expert-parallel devices


def test_a_card_that_does_not_reproduce_its_checks_is_rebuilt(cache):
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    plan_cards.plan_forms(cfg, hw, 1, 1, "scale_up")
    key = formcache.cache_key(
        "search-plan", str(plan_cards.CARD_VERSION), repr(cfg), repr(hw), "1", "1", "scale_up"
    )
    card = formcache.load(key)
    assert card is not None
    # a whole, well-formed card (its digest matches) whose decode form is off by 1 ns
    formcache.save(key, {**card, "decode": f"({card['decode']}) + 1e-9"})
    with pytest.raises(CardError, match="check values"):
        plan_cards._from_card(formcache.load(key) or {})
    again = plan_cards.plan_forms(cfg, hw, 1, 1, "scale_up")  # rebuilt from the engine ...
    assert not isinstance(again.decode, plan_cards.CardForm)
    assert formcache.load(key) == card  # ... and the card rewritten


def test_lambdified_text_is_the_compiled_expression():
    import sympy

    from costmodel.arith import compile_array

    B, c = sympy.symbols("B ctx", positive=True)
    e = sympy.Rational(2, 3) * B * c + sympy.Max(B / 7, sympy.Integer(3)) + sympy.ceiling(c / 64)
    text = lambdified_text(e, (B, c))
    assert "Max(" in text and "ceiling(" in text
    f = compile_array(text, ("B", "ctx"))
    b, x = _grid()
    assert np.array_equal(f(b, x), sympy.lambdify((B, c), e, "numpy")(b, x))
    with pytest.raises(CardError):  # a piecewise form is numpy's select: not the card's arithmetic
        lambdified_text(sympy.Piecewise((B, c > 3), (c, True)), (B, c))


def test_warm_search_answers_what_a_cold_one_does(cache):
    kw = dict(
        devices=["h100", "a100"],
        weight_dtypes=["bf16", "fp8"],
        tp=[1, 2],
        pp=[1, 2],
        microbatches=[1, 2],
        batches=range(1, 257, 5),
        ctxs=[1024, 8192, 32768],
        slo_tpot=0.1,
        energy=True,
    )
    design_search._COMPILED.clear()
    cold = design_search.search("llama-3.1-8b", **kw)
    assert len(list((cache / "forms").glob("search-plan-*.json"))) == 8  # 2 devices x 2 dtypes x 2 tp
    design_search._COMPILED.clear()
    warm = design_search.search("llama-3.1-8b", **kw)
    assert warm == cold
