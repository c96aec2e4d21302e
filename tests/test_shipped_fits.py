"""The kernel fits that ship with the package (costmodel.measured.shipped)."""

from __future__ import annotations

import gzip
import json
import math
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy", reason="the [measured] extra is not installed")

from costmodel import notes
from costmodel.measured import corpus, efficiency, shipped
from costmodel.measured.efficiency import Features

ROOT = Path(__file__).resolve().parent.parent


def _rows(n: int = 40, seed: int = 1) -> tuple[Features, np.ndarray]:
    """Synthetic GEMM-like rows: compute and memory terms, and latencies of a known model
    (t0 = 4 us, e_c = 0.6, e_m = 0.8, r = 3) with 2 % multiplicative noise."""
    rng = np.random.default_rng(seed)
    z = np.zeros(n)
    c = rng.uniform(1e-6, 1e-4, n)
    m = rng.uniform(1e-6, 1e-4, n)
    x = Features(c, m, np.ones(n), np.zeros(n, dtype=bool), z, z, np.ones(n), z, z, np.maximum(c, m), z)
    tc, tm = c / 0.6, m / 0.8
    t = 4e-6 + (tc**3 + tm**3) ** (1 / 3)
    return x, t * np.exp(rng.normal(0, 0.02, n))


@pytest.fixture
def ship(tmp_path, monkeypatch):
    """A shipped file of the caller's fits at a temporary path, for a stand-in wheel
    (``aiconfigurator-core 0.12.0``) whose gemm tables digest to ``"d"``; returns a writer."""
    path = tmp_path / "fits.json.gz"
    monkeypatch.setattr(shipped, "PATH", path)
    monkeypatch.setattr(
        corpus, "corpus_info", lambda: corpus.CorpusInfo("aiconfigurator-core", "0.12.0", "/nowhere")
    )
    monkeypatch.setattr(shipped, "corpus_digest", lambda family: "d")
    monkeypatch.delenv("COSTMODEL_NO_SHIPPED_FITS", raising=False)
    notes.clear()  # what earlier tests said: this test counts its own notes
    shipped._file.cache_clear()
    shipped._table_or_why.cache_clear()

    def write(fits: dict[str, list], **header) -> Path:
        doc = {
            "format": shipped.FORMAT,
            "package": "aiconfigurator-core",
            "version": "0.12.0",
            "code": shipped.code_digest(),
            "corpus": {"gemm": "d"},
            "built_with": {},
            "fits": {"gemm": fits},
            **header,
        }
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        shipped._file.cache_clear()
        shipped._table_or_why.cache_clear()
        return path

    yield write
    shipped._file.cache_clear()
    shipped._table_or_why.cache_clear()


def _counting(monkeypatch) -> list[int]:
    """Count the fits computed (:func:`costmodel.measured.efficiency.fit` calls of :func:`fitted`)."""
    calls: list[int] = []
    real = efficiency.fit

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(shipped, "fit", counted)
    return calls


def _no_fit(monkeypatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("fitted although the shipped file holds these rows")

    monkeypatch.setattr(shipped, "fit", refuse)


def test_a_recorded_fit_is_read_back_bit_for_bit(ship, monkeypatch):
    x, y = _rows()
    with shipped.recording() as rec:
        fresh = shipped.fitted("gemm", "bfloat16@x", x, y, devices=["h100-sxm"], frameworks=["vllm"])
    assert len(rec) == 1
    # the model's truth (e_c 0.6, e_m 0.8) is recovered to within the 2 % noise's reach
    assert fresh.params["e_c"] == pytest.approx(0.6, rel=0.1) and fresh.params["e_m"] == pytest.approx(
        0.8, rel=0.1
    )
    ship({k.split("\0")[1]: v for k, v in rec.items()})
    _no_fit(monkeypatch)
    back = shipped.fitted(
        "gemm", "bfloat16@x", x.take(np.arange(len(y))), y.copy(), devices=["h100-sxm"], frameworks=["vllm"]
    )
    assert back == fresh  # every parameter, standard error, row count and name equal, not close
    assert np.array_equal(back.predict(x), fresh.predict(x))


def test_other_rows_are_a_miss(ship, monkeypatch):
    x, y = _rows()
    with shipped.recording() as rec:
        shipped.fitted("gemm", "g", x, y)
    ship({k.split("\0")[1]: v for k, v in rec.items()})
    calls = _counting(monkeypatch)
    y2 = y.copy()
    y2[7] = np.nextafter(y2[7], 1.0)  # one latency one ulp away: other rows, another fit
    shipped.fitted("gemm", "g", x, y2)
    x2 = x.take(np.arange(len(y)))
    x2.memory_s[3] *= 1.5  # one feature changed (an edited cost rule or datasheet)
    shipped.fitted("gemm", "g", x2, y)
    shipped.fitted("gemm", "g", x, y, max_rows=30)  # another row cap
    assert len(calls) == 3


def test_input_digest_reads_every_array():
    x, y = _rows()
    base = shipped.input_digest("gemm", x, y)
    assert shipped.input_digest("gemm", x.take(np.arange(len(y))), y.copy()) == base
    assert shipped.input_digest("moe", x, y) != base
    for name in Features.__dataclass_fields__:
        a = getattr(x, name).copy()
        a[0] = not a[0] if a.dtype == bool else a[0] + 1.0
        assert shipped.input_digest("gemm", Features(**{**x.__dict__, name: a}), y) != base, name


@pytest.mark.parametrize(
    "header, why",
    [
        (
            {"version": "0.11.0"},
            "are for aiconfigurator-core 0.11.0, aiconfigurator-core 0.12.0 is installed",
        ),
        ({"code": "0" * 64}, "fitting code (costmodel/measured/efficiency.py) differs"),
        ({"corpus": {"gemm": "e"}}, "installed gemm tables differ"),
    ],
)
def test_a_file_for_another_corpus_or_code_is_set_aside_once_with_why(ship, monkeypatch, capsys, header, why):
    x, y = _rows()
    with shipped.recording() as rec:
        fresh = shipped.fitted("gemm", "g", x, y)
    ship({k.split("\0")[1]: v for k, v in rec.items()}, **header)
    calls = _counting(monkeypatch)
    assert shipped.fitted("gemm", "g", x, y) == fresh  # refitted: the same fit, computed
    shipped.fitted("gemm", "g", x, y)
    assert len(calls) == 2
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and why in err  # said once, with the reason


@pytest.mark.parametrize(
    "content",
    [
        b"not gzip",
        # mtime=0: the bytes, and so the test ids, are the same in every
        # xdist worker (a timestamp made gw0 and gw1 collect different ids)
        gzip.compress(b"{not json", mtime=0),
        gzip.compress(b'{"format": 1, "package": "aiconfigurator-core", "version": NaN}', mtime=0),
        gzip.compress(b"[1, 2]", mtime=0),
        gzip.compress(b'{"a": 1, "a": 2}', mtime=0),
    ],
    ids=["not gzip", "not json", "NaN", "not an object", "duplicate key"],
)
def test_a_damaged_file_is_set_aside(ship, monkeypatch, capsys, content):
    x, y = _rows()
    ship({})
    shipped.PATH.write_bytes(content)
    shipped._file.cache_clear()
    assert shipped.header() is None
    f = shipped.fitted("gemm", "g", x, y)
    assert f.rows == len(y)
    assert "no valid shipped kernel fits" in capsys.readouterr().err


def test_an_entry_of_the_wrong_shape_is_a_miss(ship, monkeypatch):
    x, y = _rows()
    key = shipped.input_digest("gemm", x, y)
    names = len(efficiency.PARAMS["roofline"])
    for bad in (
        [[1.0] * names, [None] * names, 40],
        [[1.0] * (names - 1), [None] * names, 40, 0.1],
        [[math.inf] * names, [None] * names, 40, 0.1],
        [[1.0] * names, [None] * names, True, 0.1],
    ):
        ship({key: json.loads(json.dumps(bad, allow_nan=True).replace("Infinity", "1e999"))})
        assert shipped.fitted("gemm", "g", x, y).rows == len(y)


def test_the_switch_sets_the_file_aside(ship, monkeypatch):
    x, y = _rows()
    with shipped.recording() as rec:
        shipped.fitted("gemm", "g", x, y)
    ship({k.split("\0")[1]: v for k, v in rec.items()})
    monkeypatch.setenv("COSTMODEL_NO_SHIPPED_FITS", "1")
    calls = _counting(monkeypatch)
    shipped.fitted("gemm", "g", x, y)
    assert calls == [1]


def test_the_shipped_file_is_small_installed_and_current():
    """The file exists, is package data, is a few MB at most, and was built by this fitting code
    for the installed wheel (else: ``python -m benchmarks.build_fits``)."""
    assert shipped.PATH.is_file(), "no shipped fits: python -m benchmarks.build_fits --jobs 2"
    size = shipped.PATH.stat().st_size
    assert size < 4 * 2**20, f"{size:,} bytes"
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    rel = shipped.PATH.relative_to(ROOT / "costmodel").as_posix()
    assert any(fnmatch(rel, pat) for pat in data["costmodel"]), data["costmodel"]
    h = shipped.header()
    assert h is not None
    assert h["code"] == shipped.code_digest(), (
        "efficiency.py changed: python -m benchmarks.build_fits --jobs 2"
    )
    assert h["package"] == corpus.PACKAGE
    try:
        info = corpus.corpus_info()
    except corpus.MeasuredDataError:
        pytest.skip("the [measured] extra is not installed")
    assert h["version"] == info.version
    # every family priced by fits (fused MoE is priced by its measured curves: build_fits.NO_FITS)
    assert set(corpus.FAMILIES) - {"moe"} <= set(h["fits"]) and all(n > 0 for n in h["fits"].values())


#: how closely a refit reproduces a shipped fit on another CPU (its BLAS's summation order): a
#: millionth, where this machine's (AMD EPYC, OpenBLAS Haswell kernels) GEMM refit moved 1.5e-10
REFIT_RTOL = 1e-6


@pytest.mark.slow
def test_the_shipped_fits_are_what_a_fresh_fit_gives(monkeypatch):
    """One device and framework refitted from the corpus with the file set aside: the shipped fits
    (all-reduce: every backend; GEMM: BF16) equal the fresh ones to :data:`REFIT_RTOL` (exactly
    on the machine that built them; on this CI machine, another CPU whose BLAS sums in another
    order, the GEMM fit's t0_s by 1.5e-10)."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured.applied import _fit_groups

    notes.clear()  # what earlier tests said: this test counts its own notes
    for family, dtypes in (("all_reduce", None), ("gemm", ("bfloat16",))):
        monkeypatch.delenv("COSTMODEL_NO_SHIPPED_FITS", raising=False)
        calls = _counting(monkeypatch)
        read = _fit_groups(family, ["h100-sxm"], "vllm", dtypes)
        assert read and not calls  # every fit read from the file
        monkeypatch.setenv("COSTMODEL_NO_SHIPPED_FITS", "1")
        fresh = _fit_groups(family, ["h100-sxm"], "vllm", dtypes)
        assert len(calls) == len(fresh) == len(read)
        for grp, f in fresh.items():
            g = read[grp]
            assert (g.rows, g.devices, g.frameworks) == (f.rows, f.devices, f.frameworks)
            for n, v in f.params.items():
                assert g.params[n] == pytest.approx(v, rel=REFIT_RTOL, abs=0), (grp, n)
            assert g.rms_log == pytest.approx(f.rms_log, rel=REFIT_RTOL)


def test_the_build_skips_the_families_priced_without_fits(capsys):
    """``benchmarks/build_fits.py`` stopped on fused MoE (``MoEShape.from_key('bfloat16')``: its
    kernel keys are shapes, not the default dtype keys): MoE is priced by its measured curves, with
    no fit, residuals or held-out errors to build, so a job skips it and says so."""
    from benchmarks import build_fits

    assert build_fits.fit_families(["gemm", "moe", "all_reduce"]) == ["gemm", "all_reduce"]
    assert "moe: priced by its measured curves" in capsys.readouterr().err
    fits, _, tables, sources = build_fits.build(("h100-sxm", "vllm", ["moe"], list(build_fits.BF16), False))
    assert fits == {} and tables == {} and sources == ([], [])
