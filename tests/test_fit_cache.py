"""The persistent cache of fitted kernel models (costmodel.measured.stored)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import formcache
from costmodel.measured import corpus, stored
from costmodel.measured.efficiency import PARAMS, Fit
from costmodel.measured.residual import ShapeResiduals


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory, both switches on."""
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COSTMODEL_NO_CACHE", raising=False)
    monkeypatch.delenv("COSTMODEL_NO_FIT_CACHE", raising=False)
    return tmp_path


@pytest.fixture
def wheel(monkeypatch):
    """A stand-in for the installed corpus wheel whose version a test can change."""
    info = {"version": "0.12.0"}

    def fake() -> corpus.CorpusInfo:
        return corpus.CorpusInfo("aiconfigurator-core", info["version"], "/nowhere/systems")

    monkeypatch.setattr(corpus, "corpus_info", fake)
    return info


def _fit(t0: float = 5.4e-6, se: float = 1e-7) -> Fit:
    names = [n for n, *_ in PARAMS["roofline"]]
    return Fit(
        family="gemm",
        group="bfloat16@cublas",
        kind="roofline",
        params={n: t0 * (i + 1) for i, n in enumerate(names)},
        stderr={n: se for n in names},
        rows=123,
        rms_log=0.0731,
        devices=["h100-sxm"],
        frameworks=["vllm"],
    )


class Counter:
    """``compute`` for :func:`stored` that counts its calls."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


def _get(compute, parts=("gemm", ["h100-sxm"], "vllm", None)):
    return stored.stored("groups", list(parts), compute, stored.encode_fits, stored.decode_fits)


def test_a_stored_fit_is_read_back_unchanged(cache, wheel):
    fits = {"bfloat16@cublas": _fit()}
    c = Counter(fits)
    assert _get(c) == fits and c.calls == 1  # a miss: fitted and stored
    assert _get(c) == fits and c.calls == 1  # a hit: read back, not fitted
    assert len(list((cache / "forms").glob("fit-groups-*.json"))) == 1


def test_a_non_finite_standard_error_survives(cache, wheel):
    f = _fit(se=math.nan)
    c = Counter({f.group: f})
    _get(c)
    back = _get(c)[f.group]
    assert c.calls == 1 and all(math.isnan(v) for v in back.stderr.values())


def _only_entry(cache):
    (path,) = (cache / "forms").glob("fit-groups-*.json")
    return path


def test_a_tampered_entry_is_refitted(cache, wheel):
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c)
    path = _only_entry(cache)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"rows": 123', b'"rows": 124'))  # edited, digest now wrong
    assert _get(c)["bfloat16@cublas"].rows == 123 and c.calls == 2
    assert path.read_bytes() == raw  # and overwritten with the fresh fit


def test_an_entry_of_the_wrong_shape_is_refitted(cache, wheel):
    """A whole, correctly digested entry whose content is not a fit (a parameter missing) is a miss."""
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c)
    key = stored.fit_key("groups", ["gemm", ["h100-sxm"], "vllm", None])
    entry = formcache.load(key)
    del entry["value"]["bfloat16@cublas"]["params"]["r"]
    entry.pop("format")
    assert formcache.save(key, entry)
    assert _get(c)["bfloat16@cublas"].params["r"] == _fit().params["r"] and c.calls == 2


@pytest.mark.parametrize("junk", [b"", b"costmodel-cache 2 00\n{}", b"\x00" * 64, b"not json at all"])
def test_a_corrupted_entry_is_refitted(cache, wheel, junk):
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c)
    _only_entry(cache).write_bytes(junk)
    assert _get(c) == c.value and c.calls == 2


def test_another_corpus_version_misses(cache, wheel):
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c)
    wheel["version"] = "0.13.0"
    _get(c)
    assert c.calls == 2  # another wheel: fitted again, under its own key
    wheel["version"] = "0.12.0"
    _get(c)
    assert c.calls == 2  # the first wheel's entry is still there


def test_other_parts_miss(cache, wheel):
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c, ("gemm", ["h100-sxm"], "vllm", None))
    _get(c, ("gemm", ["h100-sxm"], "vllm", ["bfloat16"]))
    _get(c, ("gemm", ["h100-sxm"], "sglang", None))
    _get(c, ("gemm", ["h100-sxm", "h200-sxm"], "vllm", None))
    assert c.calls == 4


@pytest.mark.parametrize("switch", ["COSTMODEL_NO_CACHE", "COSTMODEL_NO_FIT_CACHE"])
def test_the_switches_turn_it_off(cache, wheel, monkeypatch, switch):
    monkeypatch.setenv(switch, "1")
    c = Counter({"bfloat16@cublas": _fit()})
    _get(c)
    _get(c)
    assert c.calls == 2 and not (cache / "forms").exists()


def test_residuals_and_arrays_round_trip(cache, wheel):
    rng = np.random.default_rng(1)
    res = {"bfloat16@cublas": [ShapeResiduals(("m", "n", "k"), rng.random((7, 3)), rng.normal(size=7))]}
    back = stored.decode_residuals(json.loads(json.dumps(stored.encode_residuals(res))))
    (s,) = back["bfloat16@cublas"]
    assert s.keys == ("m", "n", "k")
    assert np.array_equal(s.points, res["bfloat16@cublas"][0].points)
    assert np.array_equal(s.residuals, res["bfloat16@cublas"][0].residuals)
    a = np.sort(rng.normal(size=11))
    assert np.array_equal(stored.decode_array(json.loads(json.dumps(stored.encode_array(a)))), a)
    assert stored.decode_array([]).shape == (0,)


@pytest.mark.parametrize(
    "bad",
    [
        {"g": [{"keys": ["m"], "points": [[1.0], [2.0]], "residuals": [0.1]}]},  # two points, one residual
        {"g": [{"keys": ["m"], "points": [[1.0]], "residuals": ["x"]}]},
        {"g": [{"keys": [1], "points": [[1.0]], "residuals": [0.1]}]},
        {"g": "nope"},
    ],
)
def test_malformed_residuals_are_refused(bad):
    with pytest.raises(stored.BadEntry):
        stored.decode_residuals(bad)


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=1e-12, max_value=1e3, allow_nan=False), st.floats(min_value=0, max_value=1e3))
def test_any_fit_reads_back_bit_for_bit(t0, se):
    """JSON writes a double as the shortest text that reads back to it (repr), so no bit is lost."""
    f = _fit(t0, se)
    back = stored.decode_fits(json.loads(json.dumps(stored.encode_fits({f.group: f}))))[f.group]
    assert back == f and np.array_equal(back.theta, f.theta)


def test_a_corpus_fit_stored_and_loaded_predicts_bit_for_bit(cache, monkeypatch):
    """The real thing: fit one family's groups on the corpus, store, read back in a "new process"
    (the in-memory caches cleared), and predict every measured row of that family identically."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured import applied, heldout

    args = ("all_reduce", ["h100-sxm"], "vllm", None)
    fresh = applied._fit_groups(*args)  # no cache involved
    assert fresh
    stored_now = applied.fit_groups(*args)  # a miss: fitted and stored
    assert len(list((cache / "forms").glob("fit-groups-*.json"))) == 1
    calls: list[tuple] = []
    real = heldout.fit_family
    monkeypatch.setattr(applied, "fit_family", lambda *a, **k: calls.append(a) or real(*a, **k))
    loaded = applied.fit_groups(*args)  # a hit: read back
    assert not calls
    _, x = heldout.prepared("all_reduce", "h100-sxm")
    assert loaded.keys() == fresh.keys() == stored_now.keys()
    for g in fresh:
        assert loaded[g] == fresh[g]
        assert np.array_equal(loaded[g].predict(x), fresh[g].predict(x))  # bit for bit


def test_whole_shape_values_are_stored_for_their_points_and_read_back_bit_for_bit():
    """A source's points are log2(1 + v) of whole shape values: the values are stored (key by
    key), the points recomputed from them exactly; points of no whole value stay points."""
    rng = np.random.default_rng(3)
    v = rng.choice([0, 1, 7, 64, 4096, 131072, 2**40], size=(500, 3)).astype(float)
    whole = ShapeResiduals(("m", "n", "k"), np.log2(1.0 + v), rng.normal(size=500))
    odd = ShapeResiduals(
        ("m",), np.array([[0.5], [1.0]]), np.array([0.1, -0.1])
    )  # 2**0.5 - 1: no whole value
    enc = stored.encode_residuals({"g": [whole, odd]})
    assert "values" in enc["g"][0] and "points" not in enc["g"][0] and "points" in enc["g"][1]
    assert np.array_equal(stored.decode_array(enc["g"][0]["values"], 2), v.T)  # 0, 1, 7 ... key by key
    back = stored.decode_residuals(json.loads(json.dumps(enc)))["g"]
    for b, s in zip(back, (whole, odd), strict=True):
        assert b.points.tobytes() == s.points.tobytes() and b.residuals.tobytes() == s.residuals.tobytes()
    for bad in (
        np.array([[0.5, 1.0]]),
        np.array([[-1.0, 1.0]]),
        np.ones((2, 2)),
    ):  # not whole; < 0; 2 keys for 1
        with pytest.raises(stored.BadEntry):
            stored.decode_residuals(
                {
                    "g": [
                        {
                            "keys": ["m"],
                            "values": stored.encode_array(bad),
                            "residuals": stored.encode_array(np.zeros(2)),
                        }
                    ]
                }
            )


def test_arrays_in_the_earlier_layout_are_still_read():
    """An array's doubles one after another (``f8_zlib_b64``, before the byte planes)."""
    import base64
    import zlib

    a = np.array([1 / 3, -0.0, 5e-324])
    old = {"shape": [3], "f8_zlib_b64": base64.b64encode(zlib.compress(a.astype("<f8").tobytes())).decode()}
    assert stored.decode_array(old).tobytes() == a.tobytes()


def test_arrays_are_stored_as_their_bytes_compact_and_exact():
    """A residual table as compressed float64 bytes: bit for bit, and far under JSON's text (an
    unmeasured device's tables were 21-25 MB of JSON, over the form cache's 16 MiB read bound)."""
    rng = np.random.default_rng(2)
    # shape coordinates repeat (log2(1 + m) over a grid of m): they compress
    pts = np.log2(1.0 + rng.choice([1, 2, 4, 8, 16, 64, 128, 4096, 8192], size=(20_000, 3)))
    res = rng.normal(size=20_000) * 0.1
    for a in (pts, res, np.zeros((0, 3)), np.array([np.nextafter(1.0, 2.0), -0.0, 5e-324])):
        enc = stored.encode_array(a)
        back = stored.decode_array(json.loads(json.dumps(enc)), a.ndim)
        assert back.shape == a.shape and back.tobytes() == np.asarray(a, dtype="<f8").tobytes()
    text = len(json.dumps(stored.encode_array(pts))) + len(json.dumps(stored.encode_array(res)))
    as_lists = len(json.dumps(pts.tolist())) + len(json.dumps(res.tolist()))
    # 80,000 doubles are 640,000 bytes raw, 853,333 in base64: the points (60,000 of them, nine
    # values) compress to a few bytes a row, the residuals (random) hardly, where JSON's text
    # takes ~18-20 characters a double (1.5 MB). In byte planes these random draws of nine values
    # compress less than the doubles one after another (448 vs 360 KB); an unmeasured device's real
    # tables more (residuals 13.3 vs 14.4 MB, held-out errors 4.4 vs 5.3, shape values 0.30 vs 0.60)
    assert text < 640_000 and text < as_lists / 3


@pytest.mark.parametrize(
    "bad",
    [
        {"shape": [3], "f8_zlib_b64": "not base64!"},
        {
            "shape": [4],
            "f8_planes_zlib_b64": stored.encode_array(np.ones(3))["f8_planes_zlib_b64"],
        },  # 24 bytes for 4
        {
            "shape": [2],
            "f8_planes_zlib_b64": stored.encode_array(np.ones(3))["f8_planes_zlib_b64"],
        },  # more than 2
        {"shape": [1], "f8_planes_zlib_b64": stored.encode_array(np.array([np.inf]))["f8_planes_zlib_b64"]},
        {"shape": [-1], "f8_zlib_b64": ""},
        {"shape": [True], "f8_zlib_b64": ""},
        {"shape": [2**40], "f8_zlib_b64": ""},  # over MAX_ARRAY_BYTES: refused before inflating
        {
            "shape": [3, 1],
            "f8_planes_zlib_b64": stored.encode_array(np.ones(3))["f8_planes_zlib_b64"],
        },  # 2-D for 1-D
        {"f8_zlib_b64": ""},
    ],
)
def test_malformed_array_bytes_are_refused(bad):
    with pytest.raises(stored.BadEntry):
        stored.decode_array(bad)


def test_unmeasured_devices_share_one_entry(cache, monkeypatch):
    """Every device the corpus does not measure prices from the same rows (every measured
    device's), so its residual table and held-out errors are one entry, keyed by those devices,
    computed once for any number of such devices; a measured device keeps its own, and fused MoE
    (a curve per device) stays keyed by the device."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured import systems_with_data
    from graphs.serving.pricing import kernel_sources as ks

    have = systems_with_data("gemm")
    assert "a100-sxm-40gb" not in have and "h100-pcie" not in have and "h100-sxm" in have
    assert ks.fit_basis("a100-sxm-40gb", "gemm") == ks.fit_basis("h100-pcie", "gemm") == list(have)
    assert ks.fit_basis("h100-sxm", "gemm") == "h100-sxm"
    assert ks.fit_basis("a100-sxm-40gb", "moe") == "a100-sxm-40gb"

    calls: list[str] = []

    def fake(device, framework, family, key, grey_box):
        calls.append(device)
        return np.array([-0.1, 0.2])

    monkeypatch.setattr(ks, "_heldout_log_errors", fake)
    monkeypatch.setattr(ks, "_SHARED", {})
    # the shipped shared tables would answer before the cache is filled (test_shipped_tables.py)
    monkeypatch.setenv("COSTMODEL_NO_SHIPPED_FITS", "1")
    ks.heldout_log_errors.cache_clear()
    try:
        a = ks.heldout_log_errors("a100-sxm-40gb", "vllm", "gemm", "bfloat16", True)
        b = ks.heldout_log_errors("h100-pcie", "vllm", "gemm", "bfloat16", True)
        assert calls == ["a100-sxm-40gb"]  # one computation for both unmeasured devices
        assert a.tolist() == b.tolist() == [-0.1, 0.2]
        # a new process (nothing in memory) reads the one stored entry back for a third device
        monkeypatch.setattr(ks, "_SHARED", {})
        ks.heldout_log_errors.cache_clear()
        assert ks.heldout_log_errors("rtx-4090", "vllm", "gemm", "bfloat16", True).tolist() == [-0.1, 0.2]
        assert calls == ["a100-sxm-40gb"]
        ks.heldout_log_errors("h100-sxm", "vllm", "gemm", "bfloat16", True)  # measured: its own
        assert calls == ["a100-sxm-40gb", "h100-sxm"]
    finally:
        ks.heldout_log_errors.cache_clear()
