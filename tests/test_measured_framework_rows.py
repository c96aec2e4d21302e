"""One framework's corpus rows read alone are its share of every framework's, bit for bit.

A command asks the corpus about one framework (its fits, residuals and held-out errors), so
:func:`costmodel.measured.heldout.prepared_framework` reads that framework's tables alone and
keeps their text columns as categories. The reference is :func:`~costmodel.measured.heldout.prepared`
over every framework, the frame the fits were shipped from: the same rows, in the same order,
at :func:`~costmodel.measured.heldout.framework_offset`, with bit-identical features; the
held-out errors drawn from the rows alone equal those drawn from every framework's.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def heldout():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured import heldout

    return heldout


def _as_text(df):
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == "category":
            out[c] = out[c].astype("str")
    return out


# A100's attention tables: `window_size` in TensorRT-LLM's file only (every other framework's
# rows have a missing window among all of them); H100's all-reduce: NCCL's table beside the
# frameworks' own, TensorRT-LLM's without a backend column; MLA: two frameworks
CASES = [
    ("generation_attention", "a100-sxm-80gb"),
    ("all_reduce", "h100-sxm"),
    ("context_mla", "h100-sxm"),
    pytest.param("generation_attention", "h100-sxm", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("family", "device"), CASES)
def test_framework_rows_are_their_share_of_every_frameworks(heldout, family, device):
    import pandas as pd

    from costmodel.measured.corpus import frameworks_with_data

    every, x_every = heldout.prepared(family, device)
    seen = 0
    for fw in frameworks_with_data(family, device):
        at = np.flatnonzero((every["framework"] == fw).to_numpy())
        part = heldout.prepared_framework(family, device, fw)
        if part is None:
            assert not len(at), fw
            continue
        df, x = part
        # its rows sit together in `every`, after those of the frameworks sorting before it
        assert heldout.framework_offset(family, device, fw) == (at[0] if len(at) else 0)
        assert (at == np.arange(at[0], at[0] + len(df))).all()
        pd.testing.assert_frame_equal(_as_text(df), every.iloc[at].reset_index(drop=True), check_dtype=True)
        for f in x.__dataclass_fields__:
            a, b = getattr(x, f), getattr(x_every, f)[at]
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (fw, f)
        seen += len(df)
    assert seen == len(every)  # every row belongs to one framework's share


def test_chunked_costing_equals_one_pass(heldout, monkeypatch):
    # bounds and features are row by row: costed 1,000 rows at a time or all at once, the same
    monkeypatch.setattr(heldout, "CHUNK_ROWS", 10**9)
    df1, x1 = heldout._prepare("generation_attention", "a100-sxm-80gb", None)
    monkeypatch.setattr(heldout, "CHUNK_ROWS", 1000)
    df2, x2 = heldout._prepare("generation_attention", "a100-sxm-80gb", None)
    assert len(df1) > 3000  # several chunks
    assert df1.equals(df2)
    for f in x1.__dataclass_fields__:
        assert np.array_equal(getattr(x1, f), getattr(x2, f), equal_nan=True), f


@pytest.mark.parametrize("grey_box", [False, True])
def test_heldout_draws_from_one_frameworks_rows(heldout, monkeypatch, grey_box):
    # vLLM's all-reduce rows come after NCCL's, SGLang's and TensorRT-LLM's: the held-out draws
    # taken at their offset equal those taken over every framework's rows
    from graphs.serving.pricing import kernel_sources as ks

    monkeypatch.setenv("COSTMODEL_NO_CACHE", "1")
    assert heldout.framework_offset("all_reduce", "h100-sxm", "vllm") > 0
    alone = ks._heldout_log_errors("h100-sxm", "vllm", "all_reduce", "bfloat16", grey_box)
    monkeypatch.setattr(heldout, "prepared_framework", lambda *a: None)  # every framework's rows
    every = ks._heldout_log_errors("h100-sxm", "vllm", "all_reduce", "bfloat16", grey_box)
    assert len(alone) > 0
    assert np.array_equal(alone, every)


@pytest.mark.parametrize("family", ["context_attention", "generation_attention"])
@pytest.mark.parametrize("framework", ["vllm", "sglang"])
def test_a_table_without_window_size_keeps_its_rows(heldout, family, framework):
    # A100's vLLM and SGLang attention tables have no `window_size` column: their rows measure
    # full attention, so each distinct (dtype pair, shape) of the file is one kept row (its
    # fastest kernel), counted here straight from the parquet file with pyarrow and a set
    import pyarrow.parquet as pq

    from costmodel.measured.corpus import _table_paths

    (path,) = [p for fw, _, p in _table_paths("a100_sxm", family) if fw == framework]
    assert "window_size" not in pq.read_schema(path).names  # the case this test is about
    raw = pq.read_table(path).to_pydict()
    cols = [
        "attn_dtype",
        "kv_cache_dtype",
        "batch_size",
        "isl",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
    ]
    if family == "generation_attention":
        cols.append("step")
    shapes = set(zip(*(raw[c] for c in cols), strict=True))
    df, _ = heldout._kept(family, "a100-sxm-80gb", [framework])
    assert len(df) == len(shapes) > 1000  # none dropped by a missing window key
    assert (df["window"] == 0).all()


@pytest.mark.parametrize(("family", "device"), CASES)
def test_rows_selected_a_framework_at_a_time_are_those_of_every_frameworks(heldout, family, device):
    # prepared_where reads one framework's rows at a time and keeps what the mask selects: the
    # same rows, order, features and positions as the mask applied to every framework's rows
    # (here every other row of the most common dtype group, so each framework keeps some and
    # drops some)
    import pandas as pd

    every, x_every = heldout.prepared(family, device)
    top = every["dtype_group"].value_counts().index[0]

    def select(df):
        return (df["dtype_group"] == top).to_numpy() & (np.arange(len(df)) % 2 == 0)

    starts = every.groupby("framework").indices  # each framework's rows, to recount the parity
    want = np.zeros(len(every), dtype=bool)
    for idx in starts.values():
        want[idx] = (every["dtype_group"].to_numpy()[idx] == top) & (np.arange(len(idx)) % 2 == 0)
    at = np.flatnonzero(want)
    df, x, pos = heldout.prepared_where(family, device, select)
    assert len(at) and (pos == at).all()
    pd.testing.assert_frame_equal(df, every.iloc[at].reset_index(drop=True), check_dtype=True)
    for f in x.__dataclass_fields__:
        a, b = getattr(x, f), getattr(x_every, f)[at]
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), f
    assert heldout.prepared_where(family, device, lambda d: np.zeros(len(d), dtype=bool)) is None


def test_residuals_of_groups_the_framework_does_not_run_equal_every_frameworks(heldout, monkeypatch):
    # H100's all-reduce fits of NCCL's groups priced for vLLM: vLLM runs none of them, so their
    # residuals come from the other frameworks' rows (prepared_where), equal to those taken
    # from every framework's rows at once
    from costmodel.measured import applied

    monkeypatch.setenv("COSTMODEL_NO_CACHE", "1")
    fits = applied.fit_groups("all_reduce", ["h100-sxm"], None)
    alone = applied.group_residuals("all_reduce", fits, ["h100-sxm"], "vllm")
    own = heldout.prepared_framework("all_reduce", "h100-sxm", "vllm")
    assert own is not None and set(fits) - set(own[0]["group"])  # groups vLLM does not run

    def every_frameworks(family, device, select):
        df, x = heldout.prepared(family, device)
        at = np.flatnonzero(np.asarray(select(df), dtype=bool))
        return df.iloc[at].reset_index(drop=True), x.take(at), at

    monkeypatch.setattr(applied, "prepared_where", every_frameworks)
    every = applied.group_residuals("all_reduce", fits, ["h100-sxm"], "vllm")
    assert sorted(alone) == sorted(every) == sorted(fits)
    for grp in fits:
        for a, b in zip(alone[grp], every[grp], strict=True):
            assert a.keys == b.keys
            assert np.array_equal(a.points, b.points) and np.array_equal(a.residuals, b.residuals)
