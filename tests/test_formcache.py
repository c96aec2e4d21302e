"""The persistent cache of compiled forms: a cached decode report equals the library's, reads
back without sympy, and a tampered, stale or unwritable cache never changes an answer."""

import json
import math
import os
import subprocess
import sys

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import costmodel.formcache as formcache
import graphs.serving.present.cards as cards
from costmodel.arith import ArithError, compile_numeric
from graphs import decode_limits, decode_report, near_far_memory
from graphs.cli import main
from graphs.serving.present.cards import CardError, build_decode_card, decode_from_card, to_text


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    return tmp_path / "forms"


def _run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0
    return out


def _close(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return a == b


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("mixtral-8x7b", 2), ("deepseek-v3", 8)])
def test_card_reports_equal_the_library(model, tp):
    """The card's text, evaluated without sympy, against the lambdified library path."""
    card = json.loads(json.dumps(build_decode_card(model, "h100", tp=tp)))  # as stored
    for batch, ctx in ((1, 128), (37, 8191), (512, 131072)):
        rep, lim, nf = decode_from_card(card, batch=batch, ctx=ctx)
        # the step at any point, as the card prices it once the command has checked the point
        lib = decode_report(
            model, "h100", batch=batch, ctx=ctx, tp=tp, allow_long_context=True, check_memory=False
        )
        assert _close(rep.to_dict(), lib.to_dict())
        assert _close(lim.to_dict(), decode_limits(model, "h100", ctx=ctx, tp=tp).to_dict())
        assert _close(nf.to_dict(), near_far_memory(model, "h100").to_dict())


def test_second_run_reads_the_card(cache, capsys, monkeypatch):
    args = ("decode", "mixtral-8x7b", "--device", "h200", "--batch", "16", "--ctx", "8192")
    first = _run(capsys, *args)
    assert len(list(cache.glob("decode-*.json"))) == 1

    def no_build(*a, **k):
        raise AssertionError("the cached card should have been used")

    monkeypatch.setattr(cards, "build_decode_card", no_build)
    assert _run(capsys, *args) == first
    assert json.loads(_run(capsys, *args, "--json"))["tpot_s"] > 0


@pytest.mark.parametrize(
    ("args", "printed"),
    [
        # the README's figure, from the card
        (
            ["decode", "llama-2-7b", "--device", "a100", "--batch", "8", "--ctx", "2048"],
            "TPOT bound 14.087 ms",
        ),
        # a windowed model's cache line comes from the card too
        (
            ["decode", "gpt-oss-20b", "--device", "h100", "--batch", "8", "--ctx", "4096"],
            "capped at 128 positions",
        ),
    ],
)
def test_cached_run_imports_no_engine(cache, args, printed):
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(cache.parent)}
    subprocess.run([sys.executable, "-m", "costmodel", *args], env=env, check=True, capture_output=True)
    code = (
        f"import sys; from graphs.cli import main; main({args!r}); "
        "print(sorted(m for m in ('sympy', 'numpy', 'networkx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip().endswith("[]"), out.stdout[-200:]
    assert printed in out.stdout


def _body(path):
    return json.loads(path.read_bytes().partition(b"\n")[2])


def _signed(path, card):
    """``card`` written as the cache writes it: a digest line over the (edited) text, so what
    refuses it below are the card's own checks, not the digest (tests/test_trust_cache.py)."""
    body = json.dumps(card).encode()
    digest = formcache.digest(path.stem, body).encode()
    path.write_bytes(b"costmodel-cache %d %s\n" % (formcache.FORMAT, digest) + body)


def test_tampered_card_is_refused_and_rebuilt(cache, capsys, tmp_path):
    args = ("decode", "tiny", "--device", "h100", "--batch", "2", "--ctx", "64")
    honest = _run(capsys, *args)
    (path,) = cache.glob("decode-*.json")
    marker = tmp_path / "pwned"
    card = _body(path)
    card["fields"]["step_s"] = f"__import__('os').system('touch {marker}')"
    _signed(path, card)
    assert _run(capsys, *args) == honest and not marker.exists()
    card = _body(path)
    card["fields"]["step_s"] = "(" + card["fields"]["step_s"] + ")*2"  # parses, but wrong
    _signed(path, card)
    assert _run(capsys, *args) == honest
    path.write_text("{not json")
    assert _run(capsys, *args) == honest
    card = _body(path)
    card["near_far"]["full_memory_reads_per_s"] = "many"  # a value of the wrong type
    card["terms"] = {k: "(" + t + ")*1.5" for k, t in card["terms"].items()}  # and terms off
    _signed(path, card)
    assert _run(capsys, *args) == honest


def test_engine_edit_invalidates(cache, capsys, monkeypatch):
    args = ("decode", "tiny", "--device", "h100", "--batch", "2", "--ctx", "64")
    _run(capsys, *args)
    monkeypatch.setattr(formcache, "_fingerprint", "an edited engine")
    _run(capsys, *args)
    assert len(list(cache.glob("decode-*.json"))) == 2


def test_cache_off_or_unwritable(cache, capsys, monkeypatch, tmp_path):
    args = ("decode", "tiny", "--device", "h100", "--batch", "2", "--ctx", "64")
    monkeypatch.setenv("COSTMODEL_NO_CACHE", "1")
    off = _run(capsys, *args)
    assert not cache.exists()
    monkeypatch.delenv("COSTMODEL_NO_CACHE")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    assert _run(capsys, *args) == off


@pytest.mark.parametrize(
    "text",
    [
        "B.__class__",
        "B[0]",
        "(lambda: 1)()",
        "Max(*B)",
        "Max(B, key=1)",
        "open('x')",
        "'a'",
        "True",
        "x",
        "B if B else ctx",
        "[B]",
        "(" * 500 + "B" + ")" * 500,
    ],
)
def test_arith_refuses_anything_but_arithmetic(text):
    with pytest.raises(ArithError):
        compile_numeric(text, ("B", "ctx"))


_B, _C = sympy.Symbol("B", positive=True), sympy.Symbol("ctx", positive=True)
_leaf = st.one_of(
    st.sampled_from([_B, _C]),
    st.integers(1, 10**6).map(sympy.Integer),
    st.fractions(min_value=-100, max_value=100, max_denominator=1000).map(sympy.Rational),
    st.floats(1e-12, 1e12).map(sympy.Float),
)
_expr = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: t[0] + t[1]),
        st.tuples(inner, inner).map(lambda t: t[0] * t[1]),
        st.tuples(inner, inner).map(lambda t: sympy.Max(t[0], t[1])),
        st.tuples(inner, st.integers(1, 3)).map(lambda t: t[0] ** t[1]),
        inner.map(sympy.ceiling),
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_expr, st.integers(1, 4096), st.integers(1, 131072))
def test_card_text_evaluates_like_lambdify(expr, b, c):
    """Any engine-shaped expression, written by to_text and read back by compile_numeric (no
    sympy), equals sympy's own lambdified value."""
    try:
        want = float(sympy.lambdify((_B, _C), expr, "math")(b, c))
    except (OverflowError, ZeroDivisionError):
        return
    if not math.isfinite(want):
        return
    got = compile_numeric(to_text(expr), ("B", "ctx"))(b, c)
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-300)


def test_to_text_refuses_what_it_cannot_hold():
    with pytest.raises(CardError, match="Piecewise"):
        to_text(sympy.Piecewise((_B, _B > 3), (_C, True)))
    with pytest.raises(CardError, match="may only depend on"):
        to_text(sympy.Symbol("prefix") + _B)


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 1), ("mixtral-8x7b", 2)])
def test_prefill_card_equals_the_library(model, tp):
    from graphs import prefill_report
    from graphs.serving.present.cards import build_prefill_card, prefill_from_card

    card = json.loads(json.dumps(build_prefill_card(model, "h100", tp=tp)))
    for batch, seq, chunk in ((1, 1, None), (4, 3000, None), (1, 8192, 2048), (2, 5000, 1024)):
        got = prefill_from_card(card, batch=batch, seq=seq, chunk=chunk)
        want = prefill_report(model, "h100", batch=batch, seq=seq, chunk=chunk, tp=tp)
        assert _close(got.to_dict(), want.to_dict())


def test_prefill_command_reads_its_card(cache, capsys, monkeypatch):
    args = ("prefill", "llama-3.1-8b", "--device", "h100", "--seq", "8192", "--chunk", "2048")
    first = _run(capsys, *args)
    monkeypatch.setattr(cards, "build_prefill_card", lambda *a, **k: pytest.fail("card not reused"))
    assert _run(capsys, *args) == first and "TTFT lower bound" in first
    assert main(["prefill", "tiny", "--seq", "64", "--chunk", "0"]) == 2  # still the user's error
