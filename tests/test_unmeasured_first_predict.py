"""An unmeasured device's first ``--predict``: what it reads less of changes no number.

Issue 44's target is a first ``--predict`` within twice a cached one. An unmeasured device's
fits, residual tables and held-out errors read every measured device's rows
(:func:`graphs.serving.pricing.kernel_sources.fit_basis`); the first run now

* reads those fits from the shipped file (:mod:`costmodel.measured.shipped`): none is fitted;
* costs (bounds aside, the model features) only the rows that
  :func:`costmodel.measured.heldout.prepared_where` keeps of the frameworks the asked one does
  not run, not all of them;
* counts each framework's rows once for :func:`~costmodel.measured.heldout.framework_offset`
  (where :func:`~costmodel.measured.heldout.prepared_where` has read them).

The reference is the path before: ``prepared_where`` costing every row of a framework before
selecting, ``framework_offset`` reading each table again; the predicted seconds of every node
of a decode step and the held-out error quantiles equal it to 1e-12 (in fact exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodel.hardware import get_device
from costmodel.measured.corpus import MeasuredDataError

FAMILIES = ("gemm", "generation_attention")


@pytest.fixture(scope="module")
def corpus() -> None:
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")


def _forget(monkeypatch) -> None:
    """No persistent cache, no shipped shared tables (they would answer both paths alike:
    tests/test_shipped_tables.py pins them to these), and every in-process table computed afresh."""
    from costmodel.measured import heldout, shipped_tables
    from graphs.serving.pricing import kernel_sources as ks

    monkeypatch.setenv("COSTMODEL_NO_CACHE", "1")
    monkeypatch.setattr(shipped_tables, "read", lambda *a, **k: None)
    for f in (ks.calibration, ks.calibration_residuals, ks.heldout_log_errors, ks.kernel_source):
        f.cache_clear()
    for f in (heldout.prepared, heldout.prepared_framework, heldout.framework_offset):
        f.cache_clear()
    monkeypatch.setattr(ks, "_SHARED", {})
    monkeypatch.setattr(heldout, "_KEPT_ROWS", {})


def _before(monkeypatch) -> None:
    """The path before: every row of a framework costed before selecting, each table read again
    to count its rows."""
    from costmodel.measured import applied, heldout
    from costmodel.measured.corpus import frameworks_with_data, release_unused
    from costmodel.measured.efficiency import Features

    def prepared_where(family, device, select):
        import pandas as pd

        frames, xs, pos, start = [], [], [], 0
        for fw in frameworks_with_data(family, device):
            got = heldout._prepare_or_none(family, device, fw)
            if got is None:
                continue
            df, x = got
            keep = np.flatnonzero(np.asarray(select(df), dtype=bool))
            if len(keep):
                frames.append(df.iloc[keep])
                xs.append(x.take(keep))
                pos.append(start + keep)
            start += len(df)
            release_unused()
        if not frames:
            return None
        return pd.concat(frames, ignore_index=True), Features.concat(xs), np.concatenate(pos)

    def framework_offset(family, device, framework):
        total = 0
        for fw in frameworks_with_data(family, device):
            if fw < framework:
                try:
                    total += int(heldout._kept(family, device, [fw], compact=True)[1].sum())
                except MeasuredDataError:
                    pass
        return total

    monkeypatch.setattr(heldout, "prepared_where", prepared_where)
    monkeypatch.setattr(applied, "prepared_where", prepared_where)
    monkeypatch.setattr(heldout, "framework_offset", framework_offset)


def _prices(device: str) -> dict[str, float]:
    """Every node's calibrated and grey-box seconds of a decode step, and the P10 and P90
    held-out log errors of each family's BF16 kernels (plain and grey-box)."""
    from graphs.serving.pricing import kernel_sources as ks
    from graphs.serving.pricing.predict import predict_step
    from models.resolver import resolve_model

    p = predict_step(resolve_model("llama-3.1-8b"), get_device(device), "decode", batch=8, ctx=1000)
    out = {f"{n} {k}": float(nd[k]) for n, nd in p.nodes.items() for k in ("predicted_s", "corrected_s")}
    name = get_device(device).name
    for family in FAMILIES:
        key = "bfloat16" if family == "gemm" else "bfloat16/bfloat16"
        for grey in (False, True):
            for q in (0.1, 0.9):
                out[f"{family} {grey} {q}"] = ks.heldout_log_quantile(name, "vllm", family, key, q, grey)
    return out


def _same(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys() and len(a) > 10
    for k, v in a.items():
        assert b[k] == pytest.approx(v, rel=1e-12, abs=0), k


@pytest.mark.parametrize(
    "device",
    [
        # measured: its own rows; A100-SXM-40GB: every measured device's rows (minutes: slow)
        pytest.param("h100", marks=pytest.mark.slow),
        pytest.param("a100", marks=pytest.mark.slow),
    ],
)
def test_predictions_equal_the_path_before(corpus, monkeypatch, device):
    _forget(monkeypatch)
    now = _prices(device)
    with monkeypatch.context() as m:
        _forget(m)
        _before(m)
        before = _prices(device)
    _same(now, before)


@pytest.mark.slow
def test_an_unmeasured_devices_fits_are_shipped(corpus, monkeypatch):
    # what a first --predict vllm on an unmeasured device fits: every measured device's vLLM
    # rows of the BF16 GEMM and decode attention kernels; the shipped file holds all of them
    # (a fit of those rows computed here means the file is stale: python -m benchmarks.build_fits
    # --extend --devices <an unmeasured device>)
    from costmodel.measured import shipped
    from costmodel.measured.applied import _fit_groups
    from costmodel.measured.corpus import systems_with_data

    monkeypatch.delenv("COSTMODEL_NO_SHIPPED_FITS", raising=False)
    calls = []
    fit = shipped.fit
    monkeypatch.setattr(shipped, "fit", lambda *a, **k: calls.append(a[:2]) or fit(*a, **k))
    for family, key in (("gemm", "bfloat16"), ("generation_attention", "bfloat16/bfloat16")):
        fits = _fit_groups(family, list(systems_with_data(family)), "vllm", (key,))
        assert fits, family
    assert calls == []
