"""The card cache never changes an answer: a card is signed over its whole text, every constant
it holds is range-checked when read, and a path that is not a small regular file is a miss.

Every test points ``COSTMODEL_CACHE_DIR`` at a temporary folder: nothing here touches the real
cache. Tampered cards are written back *re-signed* (a valid digest over the edited text) where
the test is about the range checks, so the checks are exercised on their own, not only the
digest; unsigned edits test the digest.
"""

import io
import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager, redirect_stdout

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import costmodel.formcache as formcache
from costmodel.arith import ArithError, compile_numeric
from costmodel.errors import CostModelError
from graphs import decode_limits, decode_report, near_far_memory, prefill_report
from graphs.cli import main
from graphs.serving.present.cards import CardError, build_decode_card, decode_from_card, prefill_from_card

from .test_formcache import _close  # report dicts equal to 1e-12

ARGS = ("decode", "tiny", "--device", "h100", "--batch", "2", "--ctx", "64")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    return tmp_path / "cache" / "forms"


@contextmanager
def no_hang(seconds=5):
    """Fail (instead of blocking the suite) when the body takes longer than ``seconds``."""

    def alarm(signum, frame):
        raise AssertionError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run(*args):
    out = io.StringIO()
    with redirect_stdout(out), no_hang(60):
        code = main(list(args))
    assert code == 0
    return out.getvalue()


def _read(path):
    header, _, body = path.read_bytes().partition(b"\n")
    return header, json.loads(body)


def _write(path, card, *, key=None, sign=True):
    """Write ``card`` as the cache does; signed (a digest over the edited text) unless not ``sign``."""
    body = json.dumps(card).encode()
    digest = formcache.digest(key or path.stem, body) if sign else "0" * 64
    path.write_bytes(b"costmodel-cache %d %s\n" % (formcache.FORMAT, digest.encode()) + body)


@pytest.fixture
def honest(cache):
    """The answer without any cache, and the path of the card a first cached run wrote."""
    os.environ["COSTMODEL_NO_CACHE"] = "1"
    try:
        want = _run(*ARGS)
    finally:
        del os.environ["COSTMODEL_NO_CACHE"]
    assert _run(*ARGS) == want
    (path,) = cache.glob("decode-*.json")
    return want, path


def _edit(card, dotted, value):
    *head, last = dotted.split(".")
    d = card
    for k in head:
        d = d[k]
    d[last] = value(d[last]) if callable(value) else value


# each edit, re-signed, would have been served before the range checks (the list first)
SIGNED_EDITS = {
    "negative weight read": ("weights_bytes", -5.0e5),
    "negative energy": ("power_w", -700.0),
    "context ceiling of -5": ("limits.units.vector.ceiling", -5.0),
    "zero bandwidth": ("bandwidth", 0.0),
    "tp zero": ("tp", 0),
    "tp as text": ("tp", "1"),
    "tp as bool": ("tp", True),
    "fractional device count": ("near_far.devices_to_hold_weights", 1.5),
    "near/far bound off its bandwidth": ("near_far.per_token_bound_s", lambda v: 2 * v),
    "negative kv bytes": ("kv_caps.per_token", -512.0),
    "fractional kept positions": ("kv_caps.capped", [[512.0, 127.5]]),
    "escape codes in a name": ("model", "tiny\x1b[2J"),
    "embedding larger than the weights": ("embedding_bytes", 1e15),
    "check point at batch 0": ("check.B", 0),
    "printed b form off its value": ("limits.b_per_sequence", "2*ctx/6542968750 + 6273/837500000000"),
    "linear as a string": ("limits.linear", "yes"),
    "a number as text": ("weights_bytes", "500992.0"),
}


@pytest.mark.parametrize("edit", sorted(SIGNED_EDITS))
def test_signed_card_with_a_bad_constant_is_a_miss(honest, edit):
    want, path = honest
    dotted, value = SIGNED_EDITS[edit]
    _, card = _read(path)
    _edit(card, dotted, value)
    with pytest.raises(CardError):
        decode_from_card(card, batch=2, ctx=64)
    _write(path, card)
    assert _run(*ARGS) == want
    _, rewritten = _read(path)  # recomputed and overwritten
    decode_from_card(rewritten, batch=2, ctx=64)


def test_doubled_step_unsigned_is_a_miss(honest):
    """Doubling a form *and* its check point is self-consistent: only the digest catches it."""
    want, path = honest
    _, card = _read(path)
    card["fields"]["step_s"] = f"(2.0*{card['fields']['step_s']})"
    card["check"]["fields"]["step_s"] *= 2
    decode_from_card(card, batch=2, ctx=64)  # consistent with itself ...
    _write(path, card, sign=False)
    assert _run(*ARGS) == want  # ... and refused by the digest over the whole text


@pytest.mark.parametrize(
    "damage",
    ["digest line removed", "one constant edited", "truncated", "empty", "another key's card", "format 1"],
)
def test_damaged_card_is_a_miss(honest, damage):
    want, path = honest
    raw = path.read_bytes()
    header, _, body = raw.partition(b"\n")
    key = path.stem
    if damage == "digest line removed":
        path.write_bytes(body)
    elif damage == "one constant edited":
        path.write_bytes(raw.replace(b'"power_w": 700.0', b'"power_w": 7000.0'))
    elif damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "another key's card":  # a valid card, signed for another key
        _write(path, json.loads(body), key=key.replace("decode-", "decode-0"))
    else:  # the layout before digests: bare JSON
        path.write_bytes(body.replace(b'"format": 2', b'"format": 1'))
    assert raw != path.read_bytes()
    assert formcache.load(key) is None
    assert _run(*ARGS) == want
    assert path.read_bytes().startswith(header[:20]) and formcache.load(key) is not None


def _resign(path, text):
    digest = formcache.digest(path.stem, text).encode()
    path.write_bytes(b"costmodel-cache %d %s\n" % (formcache.FORMAT, digest) + text)


def test_non_finite_numbers_and_repeated_keys_are_refused_even_signed(honest):
    want, path = honest
    body = path.read_bytes().split(b"\n", 1)[1]
    for bad in (b'"power_w": NaN', b'"power_w": Infinity', b'"power_w": 700.0, "power_w": -1.0'):
        _resign(path, body.replace(b'"power_w": 700.0', bad))
        assert formcache.load(path.stem) is None
    _resign(path, body.replace(b'"power_w": 700.0', b'"power_w": 1e999'))  # JSON reads it as inf
    with pytest.raises(CardError, match="power_w"):
        decode_from_card(formcache.load(path.stem), batch=2, ctx=64)
    assert _run(*ARGS) == want


@pytest.mark.parametrize(
    "kind", ["fifo", "symlink to /dev/zero", "symlink to a card", "directory", "oversized"]
)
def test_not_a_small_regular_file_is_a_miss(honest, kind, tmp_path, monkeypatch):
    want, path = honest
    key = path.stem
    good = path.read_bytes()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "symlink to a card":  # even a valid one: links are not followed
        other = tmp_path / "elsewhere.json"
        other.write_bytes(good)
        path.symlink_to(other)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(good)
        monkeypatch.setattr(formcache, "MAX_BYTES", len(good) - 1)
    with no_hang(5):
        assert formcache.load(key) is None
        assert _run(*ARGS) == want  # recomputed
    if kind == "directory":
        assert path.is_dir()  # cannot be replaced: the answer is still right, nothing stored
    elif kind == "oversized":
        monkeypatch.setattr(formcache, "MAX_BYTES", len(good))  # one byte more is allowed
        assert formcache.load(key) is not None
    else:  # the link or FIFO was replaced by a regular card
        assert path.is_file() and not path.is_symlink() and formcache.load(key) is not None


def test_model_file_that_blocks_is_not_read_for_the_key(cache, tmp_path):
    """``decode model.json`` hashes the file for its key: a FIFO there must not block."""
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    with no_hang(10):
        code = main(["decode", str(fifo), "--device", "h100"])
    assert code == 2


_HAMMER = """
import json, sys
import costmodel.formcache as fc
card = json.loads(open(sys.argv[2]).read())
for _ in range(150):
    assert fc.save(sys.argv[1], card)
"""


def test_two_writers_leave_one_whole_card(cache, tmp_path):
    """Two processes storing the same entry while a reader reads: every read is a miss (not
    yet there) or the whole card, never half of one."""
    card = json.loads(json.dumps(build_decode_card("tiny", "h100")))
    key = formcache.cache_key("race-test", "tiny")
    src = tmp_path / "card.json"
    src.write_text(json.dumps(card))
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(cache.parent)}
    procs = [subprocess.Popen([sys.executable, "-c", _HAMMER, key, str(src)], env=env) for _ in range(2)]
    while any(p.poll() is None for p in procs):
        got = formcache.load(key)
        if got is not None:
            assert {k: v for k, v in got.items() if k != "format"} == card
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert formcache.load(key) is not None
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp-")]  # no temporary left behind


def test_two_commands_racing_on_an_empty_cache(cache):
    env = {**os.environ, "COSTMODEL_CACHE_DIR": str(cache.parent)}
    cmd = [sys.executable, "-m", "costmodel", *ARGS]
    want = subprocess.run(
        cmd, env={**env, "COSTMODEL_NO_CACHE": "1"}, capture_output=True, text=True, check=True
    )
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [want.stdout, want.stdout]
    (path,) = cache.glob("decode-*.json")
    assert formcache.load(path.stem) is not None


@pytest.fixture(scope="module")
def stored_cards(tmp_path_factory):
    """tiny's and a windowed model's cards, stored and loaded back through the cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("COSTMODEL_CACHE_DIR", str(tmp_path_factory.mktemp("cards")))
    mp.delenv("COSTMODEL_NO_CACHE", raising=False)
    from graphs.serving.present.cards import build_prefill_card

    out = {}
    try:
        for model in ("tiny", "gpt-oss-20b"):
            for kind, build in (("decode", build_decode_card), ("prefill", build_prefill_card)):
                key = formcache.cache_key(kind, model)
                assert formcache.save(key, build(model, "h100"))
                out[kind, model] = formcache.load(key)
    finally:
        mp.undo()
    return out


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(["tiny", "gpt-oss-20b"]), st.integers(1, 4096), st.integers(1, 131072))
def test_cached_decode_equals_the_library(stored_cards, model, batch, ctx):
    """A cache must never change an answer: the stored card's decode report, limits and
    near/far memory equal the library's (lambdified, no card) at any batch and context."""
    rep, lim, nf = decode_from_card(stored_cards["decode", model], batch=batch, ctx=ctx)
    # the step at any point, as the card prices it once the command has checked the point
    lib = decode_report(model, "h100", batch=batch, ctx=ctx, allow_long_context=True, check_memory=False)
    assert _close(rep.to_dict(), lib.to_dict())
    assert _close(lim.to_dict(), decode_limits(model, "h100", ctx=ctx).to_dict())
    assert _close(nf.to_dict(), near_far_memory(model, "h100").to_dict())


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.sampled_from(["tiny", "gpt-oss-20b"]),
    st.integers(1, 64),
    st.integers(1, 32768),
    st.one_of(st.none(), st.integers(256, 8192)),
)
def test_cached_prefill_equals_the_library(stored_cards, model, batch, seq, chunk):
    got = prefill_from_card(stored_cards["prefill", model], batch=batch, seq=seq, chunk=chunk)
    # the step at any point, as the card prices it once the command has checked the point
    want = prefill_report(
        model, "h100", batch=batch, seq=seq, chunk=chunk, allow_long_context=True, check_memory=False
    )
    assert _close(got.to_dict(), want.to_dict())


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.integers(1, 4096), st.integers(1, 131072))
def test_cached_command_prints_the_uncached_answer(cache, batch, ctx):
    args = ["decode", "tiny", "--device", "h100", "--batch", str(batch), "--ctx", str(ctx)]

    def run() -> tuple[int, str]:  # a point that does not fit exits 1 with its verdict: compared too
        out = io.StringIO()
        with redirect_stdout(out), no_hang(60):
            code = main(list(args))
        return code, out.getvalue()

    os.environ["COSTMODEL_NO_CACHE"] = "1"
    try:
        want = run()
    finally:
        del os.environ["COSTMODEL_NO_CACHE"]
    run()  # stores the card (or reads it)
    assert run() == want


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1e999", ()),
        ("B**0.5", (-4.0,)),
        ("1/B", (0.0,)),
        ("10.0**B", (400.0,)),
        ("log(B)", (0.0,)),
        ("9" * 400, ()),
    ],
)
def test_arith_serves_only_finite_reals(text, values):
    """Infinite literals, overflows, complex powers and domain errors are refused, not served."""
    with pytest.raises(ArithError):
        compile_numeric(text, ("B",) if values else ())(*values)


# -- the ONNX importer on models that are not what they claim ------------------------------------


@pytest.fixture
def onnx_mk():
    onnx = pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    def mk(nodes, inits=(), out_shape=(4, 8), domains=()):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape) if out_shape else None)
        g = helper.make_graph(nodes, "g", [x], [y], initializer=list(inits))
        opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
        return helper.make_model(g, opset_imports=opsets)

    return onnx, helper, TensorProto, mk


def test_onnx_unknown_ops_are_counted_not_raised(onnx_mk, tmp_path, monkeypatch):
    from graphs.importers.onnx import from_onnx

    _, helper, _, mk = onnx_mk
    monkeypatch.chdir(tmp_path)  # onnxruntime's inference used to save a model here when it gave up
    g = from_onnx(mk([helper.make_node("FooBar", ["x"], ["y"])]))
    assert g.graph["unknown_ops"] == {"FooBar": 1}
    chain = mk(
        [helper.make_node("FooBar", ["x"], ["z"]), helper.make_node("Relu", ["z"], ["y"])], out_shape=None
    )
    assert from_onnx(chain).graph["unknown_ops"] == {"FooBar": 1, "Relu (no output shape)": 1}
    custom = mk([helper.make_node("FooBar", ["x"], ["y"], domain="my.ops")], domains=["my.ops"])
    assert from_onnx(custom).graph["unknown_ops"] == {"FooBar": 1}
    assert list(tmp_path.iterdir()) == []  # no sym_shape_infer_temp.onnx
    with pytest.raises(CostModelError, match="FooBar"):
        from_onnx(mk([helper.make_node("FooBar", ["x"], ["y"])]), strict=True)


@pytest.mark.parametrize(
    "case",
    [
        "cycle",
        "out of order",
        "domain not imported",
        "mis-sized",
        "raw mis-sized",
        "negative dim",
        "external Constant",
    ],
)
def test_onnx_malformed_models_raise_one_line_naming_the_node(onnx_mk, case):
    from graphs.importers.onnx import ONNXModelError, from_onnx

    _, helper, TP, mk = onnx_mk
    relu, add = (
        helper.make_node("Relu", ["z"], ["y"], name="r"),
        helper.make_node("Add", ["x", "w"], ["y"], name="a"),
    )
    w = helper.make_tensor("w", TP.FLOAT, [2], [1.0, 2.0])
    if case == "cycle":
        m, match = mk([relu, helper.make_node("Relu", ["y"], ["z"], name="s")]), "'r' .*reads 'z'.*cyclic"
    elif case == "out of order":
        m, match = mk([relu, helper.make_node("Relu", ["x"], ["z"], name="s")]), "'r' .*topological"
    elif case == "domain not imported":
        m, match = mk([helper.make_node("FooBar", ["x"], ["y"], domain="my.ops", name="f")]), "'f' .*my.ops"
    elif case == "mis-sized":  # dims 4 x 8 = 32 elements, data 2
        w.dims[:] = [4, 8]
        m, match = mk([add], [w]), "initializer 'w'.*32 element"
    elif case == "raw mis-sized":  # one float is 4 bytes of raw data, not 3
        w = helper.make_tensor("w", TP.FLOAT, [1], [1.0])
        w.ClearField("float_data")
        w.raw_data = b"123"
        m, match = mk([add], [w]), "initializer 'w'.*4 bytes"
    elif case == "negative dim":
        w.dims[:] = [-2]
        m, match = mk([add], [w]), "initializer 'w'.*negative"
    else:  # a Constant whose value lives in a file: inference would read it from the working directory
        const = helper.make_node("Constant", [], ["w"], name="c", value=w)
        t = const.attribute[0].t
        t.ClearField("float_data")
        t.data_location = TP.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "w.bin"
        m, match = mk([const, add]), "'c' .*outside the model"
    with pytest.raises(ONNXModelError, match=match):
        from_onnx(m)


def _matmul_model(onnx_mk, tmp_path, location):
    """x[4, 8] @ w[8, 16] with w stored outside the model at ``location``: 2*4*16*8 = 1024 FLOPs."""
    _, helper, TP, mk = onnx_mk
    w = helper.make_tensor("w", TP.FLOAT, [8, 16], [0.0] * 128)
    m = mk([helper.make_node("MatMul", ["x", "w"], ["y"])], [w], out_shape=(4, 16))
    w = m.graph.initializer[0]
    w.ClearField("float_data")
    w.data_location = TP.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", location
    path = tmp_path / "model.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.mark.parametrize("location", ["missing.bin", "../../etc/passwd", "/dev/zero", "fifo.bin"])
def test_onnx_external_data_is_never_opened(onnx_mk, tmp_path, location):
    from costmodel.graph import graph_total
    from graphs.importers.onnx import from_onnx

    if location == "fifo.bin":
        os.mkfifo(tmp_path / "fifo.bin")  # opening it to read would block
    path = _matmul_model(onnx_mk, tmp_path, location)
    with no_hang(30):
        g = from_onnx(str(path))
    assert graph_total(g, kinds=["op"]).flops_on("tensor") == 2 * 4 * 16 * 8
    assert g.nodes["w"]["kind"] == "weight"


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "directory", "not a model"])
def test_onnx_model_path_that_is_not_a_model_file(onnx_mk, tmp_path, kind):
    from graphs.importers.onnx import ONNXModelError, from_onnx

    path = tmp_path / "m.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\xff" * 64)
    with no_hang(10), pytest.raises(ONNXModelError, match=r"m\.onnx"):
        from_onnx(str(path))


def test_onnx_older_than_1_16_is_refused(onnx_mk, monkeypatch):
    from graphs.importers.onnx import from_onnx

    onnx, helper, _, mk = onnx_mk
    monkeypatch.setattr(onnx, "__version__", "1.15.0")
    with pytest.raises(CostModelError, match=r"onnx >= 1\.16.*found onnx 1\.15\.0"):
        from_onnx(mk([helper.make_node("Relu", ["x"], ["y"])]))
