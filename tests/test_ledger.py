"""The memory ledger: the profiling article's 7B table and the solvers."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import InvalidDimensionError, MemoryLedger, Overhead, max_batch, max_context
from costmodel.errors import CostModelError
from costmodel.ledger import GIB
from costmodel.symbols import B

# The article's teaching model: 7e9 fp16 parameters, 32 layers, d_kv = 4096, prompts of 4096 tokens
# (unchunked prefill: B*S active tokens), 128 KiB of activations per token, a 78 GiB budget.
W = 7e9 * 2  # 14e9 B = 13.04 GiB
KV = 2 * 32 * 4096 * 2  # K and V, 32 layers, 4096 wide, 2 bytes = 524288 B = 512 KiB per token
ACT = 128 * 1024
CAP = 78 * GIB


def article(rho):
    return MemoryLedger(W, KV, ACT, Overhead("fraction_of_sum", rho))


@pytest.mark.parametrize(
    ("batch", "kv", "act", "over", "total"),
    # article section 4.3 table, GiB to two decimals
    [
        (1, 2.00, 0.50, 4.66, 20.20),
        (8, 16.00, 4.00, 9.91, 42.95),
        (16, 32.00, 8.00, 15.91, 68.95),
        (24, 48.00, 12.00, 21.91, 94.95),
        (32, 64.00, 16.00, 27.91, 120.95),
    ],
)
def test_article_ledger_table(batch, kv, act, over, total):
    t = article(0.3).terms(batch=batch, cached_tokens=4096, active_tokens=4096 * batch)
    assert round(float(t.weights) / GIB, 2) == 13.04  # printed as 13.0 GiB
    assert KV == 512 * 1024
    got = [round(float(x) / GIB, 2) for x in (t.kv_cache, t.activations, t.overhead, t.total)]
    assert got == [kv, act, over, total]


def test_article_fit_and_the_four_percent_what_if():
    fit = max_batch(article(0.3), CAP, ctx=4096, active_per_sequence=4096)
    assert 16 <= fit.value < 24  # batch 16 fits, 24 does not
    assert fit.overflowing_term == "kv_cache"
    led4 = article(0.04)
    total24 = led4.total(batch=24, cached_tokens=4096, active_tokens=24 * 4096)
    assert round(float(total24) / GIB, 2) == 75.96
    assert max_batch(led4, CAP, ctx=4096, active_per_sequence=4096).value >= 24


def test_symbolic_ledger():
    led = MemoryLedger(W, KV, ACT, Overhead("fraction_of_sum", 0))
    # decode: B sequences of 4096 cached tokens, B active tokens
    assert led.total(batch=B, cached_tokens=4096, active_tokens=B) == 14_000_000_000 + B * (4096 * KV + ACT)


def test_policies():
    # vLLM-style: only 90% of 80 GB usable; the overhead term is the reserved 10%
    led = MemoryLedger(16e9, 131072, 0, Overhead("fraction_of_total", 0.9))
    t = led.terms(batch=1, cached_tokens=1, active_tokens=1, capacity=80e9)
    assert float(t.overhead) == pytest.approx(8e9)
    # (72e9 - 16e9) / (131072 * 8192 B per sequence) = 52.15 -> 52
    assert max_batch(led, 80e9, ctx=8192).value == 52
    # TensorRT-LLM-style: KV pool is 90% of what is free after weights and activations
    led = MemoryLedger(16e9, 131072, 0, Overhead("fraction_of_free", 0.9))
    assert max_batch(led, 80e9, ctx=8192).value == int(0.9 * 64e9 / (131072 * 8192))
    with pytest.raises(CostModelError, match="needs the device capacity"):
        led.terms(batch=1, cached_tokens=1, active_tokens=1)


def test_nothing_fits_says_by_how_much():
    led = MemoryLedger(200e9, 1000, 0)
    fit = max_batch(led, 80e9, ctx=10)
    assert fit.value == 0 and fit.overflowing_term == "weights"
    assert fit.shortfall_bytes == pytest.approx(120e9 + 10_000)


def test_max_context():
    led = MemoryLedger(10e9, 1e6, 0)
    # (80e9 - 10e9) / (4 sequences x 1e6 B per token) = 17500 tokens
    assert max_context(led, 80e9, batch=4).value == 17500


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policy": "fraction_of_sum", "fraction": 1}, r"must be in \[0, 1\)"),
        ({"policy": "fraction_of_sum", "fraction": -0.1}, r"must be in \[0, 1\)"),
        ({"policy": "fraction_of_total", "fraction": 0}, r"must be in \(0, 1\]"),
        ({"policy": "lucky", "fraction": 0.1}, "policy 'lucky' not allowed"),
    ],
)
def test_bad_overheads(kwargs, message):
    with pytest.raises(CostModelError, match=message):
        Overhead(**kwargs)


def test_bad_inputs():
    with pytest.raises(InvalidDimensionError, match="batch must be a positive integer"):
        MemoryLedger(1, 1).terms(batch=-1, cached_tokens=1, active_tokens=1)
    with pytest.raises(InvalidDimensionError, match="ctx must be a positive integer"):
        max_batch(MemoryLedger(1, 1), 100, ctx=0)
    with pytest.raises(InvalidDimensionError, match="weights_bytes must be >= 0"):
        MemoryLedger(-5, 1)


@pytest.mark.parametrize("upper", [0, -5, 2.5, 8.0, True, "8"])
def test_a_search_limit_below_one_or_not_whole_is_refused(upper):
    # a limit of 0 would read as "nothing fits" and -5 as a batch of -5 (review finding 5)
    led = MemoryLedger(16e9, 131072)
    with pytest.raises(InvalidDimensionError, match=rf"^upper must be a whole number >= 1, got {upper!r}$"):
        max_batch(led, 80e9, ctx=4096, upper=upper)
    with pytest.raises(InvalidDimensionError, match=r"^upper must be a whole number >= 1"):
        max_context(led, 80e9, batch=1, upper=upper)


def test_a_search_limit_of_one_is_a_whole_answer():
    # 16e9 + 131072 * 4096 B fits in 80e9 at batch 1, so the limit is what stops the search
    assert max_batch(MemoryLedger(16e9, 131072), 80e9, ctx=4096, upper=1).value == 1


@pytest.mark.parametrize("capacity", [float("nan"), float("inf"), -1.0, 0])
def test_a_capacity_that_is_not_a_finite_positive_number_is_refused(capacity):
    # NaN passed `capacity <= 0` and failed later converting NaN to int (review finding 5)
    message = r"^capacity must be a finite positive number of bytes, got "
    with pytest.raises(InvalidDimensionError, match=message):
        max_batch(MemoryLedger(16e9, 131072), capacity, ctx=4096)
    with pytest.raises(InvalidDimensionError, match=message):
        max_context(MemoryLedger(16e9, 131072), capacity, batch=1)


@pytest.mark.parametrize(("overhead", "shown"), [(0.1, "float 0.1"), ({}, "dict {}"), ("none", "str 'none'")])
def test_an_overhead_that_is_not_an_overhead_is_refused_naming_it(overhead, shown):
    # capacity(..., overhead=0.1) died in terms() on 'float' has no attribute 'policy' (review finding 9)
    with pytest.raises(CostModelError, match=rf"^overhead must be an Overhead .*, got {shown}$"):
        MemoryLedger(16e9, 131072, overhead=overhead)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    w=st.integers(10**8, 10**11),
    kv=st.integers(1, 10**6),
    act=st.integers(0, 10**6),
    policy=st.sampled_from(["fraction_of_sum", "fraction_of_total", "fraction_of_free"]),
    frac=st.floats(0.0, 0.5),
    cap=st.integers(10**9, 2 * 10**11),
    ctx=st.integers(1, 10**6),
)
def test_max_batch_is_the_last_that_fits(w, kv, act, policy, frac, cap, ctx):
    """The closed-form solve (the ledger is affine in the batch) lands exactly on the boundary:
    the reported batch fits and one more does not, as the terms evaluate."""
    from costmodel.ledger import MemoryLedger, Overhead, max_batch

    f = frac if policy == "fraction_of_sum" else 1 - frac
    led = MemoryLedger(w, kv, act, Overhead(policy, f))
    fit = max_batch(led, cap, ctx=ctx)
    if fit.value == 0:
        assert fit.at_value["total"] > cap
    elif fit.value < 1 << 20:
        assert fit.at_value["total"] <= cap < fit.at_next["total"]


@pytest.mark.parametrize("bad", [0, 0.1, {}, "none"])
def test_capacity_refuses_an_overhead_that_is_not_one(bad):
    """A review: capacity(overhead={}) died in the ledger's memo (a dict is unhashable) and
    capacity(overhead=0) was read as no overhead; each is now one line naming it."""
    from graphs.serving.step.ledger_fit import capacity

    with pytest.raises(CostModelError, match=rf"^overhead must be an Overhead .*, got {type(bad).__name__} "):
        capacity("tiny", "h100", batch=1, ctx=16, overhead=bad)


def test_what_if_names_the_label_of_a_bad_change():
    """A review: a misspelt field died as "ModelConfig got an unexpected keyword argument" and
    changes=None as "'NoneType' object is not a mapping"; each is one line naming it. A good
    change still answers: fp8 KV halves the KV bytes of a bf16 cache, so at a context where the
    KV dominates the batch about doubles."""
    from graphs.serving.step.ledger_fit import what_if

    with pytest.raises(CostModelError, match=r"^changes\['x'\] names 'kv_dtpye', not a field"):
        what_if("tiny", "h100", ctx=16, changes={"x": {"kv_dtpye": "fp8"}})
    with pytest.raises(CostModelError, match=r"^changes must map a label .* got NoneType None"):
        what_if("tiny", "h100", ctx=16, changes=None)
    with pytest.raises(CostModelError, match=r"^changes\['x'\] must map config fields to values, got int 3"):
        what_if("tiny", "h100", ctx=16, changes={"x": 3})
    got = what_if("llama-3.1-8b", "h100", ctx=4096, changes={"fp8 KV": {"kv_dtype": "fp8"}})
    assert 1.9 < got["fp8 KV"] / got["baseline"] <= 2.0
