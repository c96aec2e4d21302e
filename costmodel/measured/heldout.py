"""Held-out evaluation of the efficiency model (the fits users apply are in :mod:`.applied`).

Rows are the corpus's measurements with, per framework and shape, the fastest
kernel the framework offers (what its autotuner or dispatcher would run); rows
that imply more DRAM bandwidth than the datasheet peak (see
:mod:`costmodel.measured.validity`) are left out.
Groups are the family's dtype combination and kernel (:func:`group_of`). Three splits, each reported per
family and device as MAPE, median and P90 absolute percentage error:

* ``shapes``: 20 % of the rows of each (device, framework, group), drawn at
  random (seeded), held out of a fit on the other 80 %;
* ``device``: every row of one device predicted by a fit on the *other*
  devices only (same framework and group): the fitted fractions plus the
  left-out device's datasheet;
* ``framework``: one framework's rows on a device predicted from a fit on the
  device's other frameworks;
* ``generation``: every row of one device predicted by a fit on the devices of
  *other* architecture generations only (:func:`generation_of`: the catalog's
  vendor and architecture, ``NVIDIA Hopper``), so no sibling of the same
  generation (H200 beside H100, B300 beside B200) is in the fit: what a device of
  a generation nobody measured (Rubin, CDNA 5) can expect, where the ``device``
  split, its siblings in the fit, is optimistic. :func:`generation_heldout`
  pools the rows of several devices of one generation.

Beside the calibrated prediction, the same held-out rows are scored for the
grey-box prediction (the calibrated model times its residuals at the nearest
*training* shapes, :mod:`.residual`: the fit's own training rows for
``shapes``, the other devices' rows of the same kernel for ``device``, the
other frameworks' rows for ``framework``), for our
plain lower bound and for the speed-of-light-with-empirical-factors formula
whose factors aiconfigurator's system files state (``max(F/P, D/(f beta)) +
c`` with its ``mem_bw_empirical_scaling_factor`` f and
``mem_empirical_constant_latency`` c). aiconfigurator's own interpolating
query reads every installed row, the held-out ones included, so it cannot be
scored on held-out points and is not.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hardware import get_device
from ..results import Result
from .corpus import FAMILIES, SYSTEMS, MeasuredDataError, corpus_info, load, release_unused, systems_with_data
from .efficiency import Features, Fit, features
from .residual import ShapeResiduals, combined
from .validity import OVER_PEAK_BW, TOLERANCE, explain, lower_bounds

__all__ = [
    "SHAPE_KEYS",
    "HeldOut",
    "GenerationHeldOut",
    "generation_of",
    "generation_heldout",
    "prepared",
    "prepared_framework",
    "prepared_where",
    "framework_offset",
    "evaluate",
    "ape_stats",
    "dtype_group",
    "group_of",
    "kernel_variant",
    "VARIANT_SEP",
]

SHAPE_KEYS: dict[str, list[str]] = {
    "gemm": ["m", "n", "k"],
    "context_attention": ["batch", "isl", "heads", "kv_heads", "head_dim", "window"],
    "generation_attention": ["batch", "isl", "heads", "kv_heads", "head_dim", "window", "step"],
    "all_reduce": ["gpus", "elements"],
    "moe": ["tokens", "hidden", "inter", "topk", "experts", "tp", "ep"],
    "context_mla": ["batch", "isl", "heads", "tp"],
    "generation_mla": ["batch", "isl", "heads", "tp", "step"],
}


def dtype_group(family: str, df: Any) -> Any:
    """The dtype combination of each row (``bfloat16``, ``bfloat16/fp8``)."""
    if family in ("context_attention", "generation_attention", "context_mla", "generation_mla"):
        return df["attn_dtype"].astype(str) + "/" + df["kv_dtype"].astype(str)
    return df["dtype"].astype(str)


#: separates a kernel group from the dispatcher's variant of it (``bfloat16/fp8@torch_flow#g<=32``)
VARIANT_SEP = "#"

#: TensorRT-LLM's decode attention (kernel source ``torch_flow``) dispatches by the number of
#: query heads per KV head ``g = H / H_kv``: masked multi-head attention for MHA and XQA
#: kernels for MQA/GQA (TensorRT-LLM attention docs, "Masked MHA ... for generation; XQA
#: kernels for MQA/GQA models"). The corpus shows the switch as a step in one fit's
#: log-residual ``log(t_meas / t_fit)`` by ``g`` (H100 SXM, fp8 KV, one fit over every ``g``):
#: +0.18 at ``g = 1``, -0.18 over ``2 <= g <= 32``, +1.08 over ``g > 32`` (bf16 KV: -0.13,
#: -0.08, +0.74), where FlashAttention-3 (vLLM, SGLang) stays within 0.05 of zero in every
#: class. Each class is fitted as its own kernel; the other sources keep one fit.
_DECODE_VARIANTS = {"torch_flow": ((1, "g=1"), (32, "g<=32"), (None, "g>32"))}


def kernel_variant(family: str, df: Any) -> np.ndarray:
    """Per row, the dispatcher's variant of its kernel ('' where the kernel has one form).

    Decode attention of a source in :data:`_DECODE_VARIANTS`: the class of its query heads
    per KV head ``g`` (the first upper limit ``>= g``; None: no limit).
    """
    out = np.full(len(df), "", dtype=object)
    if family != "generation_attention" or "kernel_source" not in df:
        return out
    src = df["kernel_source"].astype(str).to_numpy()
    g = df["heads"].to_numpy(dtype=float) / df["kv_heads"].to_numpy(dtype=float)
    for source, classes in _DECODE_VARIANTS.items():
        todo = src == source
        for limit, name in classes:
            hit = todo & (True if limit is None else g <= limit)
            out[hit] = name
            todo &= ~hit
    return out


def group_of(family: str, df: Any) -> Any:
    """The fit group: dtype combination and the kernel (``bfloat16@fa3``; all-reduce: ``vllm:bfloat16``),
    and the dispatcher's variant where a kernel has several (:func:`kernel_variant`:
    ``bfloat16/fp8@torch_flow#g<=32``).

    A framework ships several kernels per family (FlashAttention-3 and a Triton
    fallback, CUTLASS and DeepGEMM block-scaled GEMMs); each gets its own
    fractions, and a prediction takes the fastest kernel the framework has that
    the dispatcher would run for the row's shape (its variant).
    """
    base = dtype_group(family, df)
    if family == "all_reduce":
        return df["backend"].astype(str).str.replace("_graph", "", regex=False) + ":" + base
    if "kernel_source" not in df:
        return base
    group = base + "@" + df["kernel_source"].astype(str)
    var = kernel_variant(family, df)
    tagged = var != ""
    if tagged.any():
        group = group.where(~tagged, group + VARIANT_SEP + var)
    return group


@functools.cache
def prepared(family: str, device: str) -> tuple[Any, Features]:
    """The device's rows (fastest kernel per framework and shape) and their model features."""
    return _prepare(family, device, None)


@functools.cache
def prepared_framework(family: str, device: str, framework: str) -> tuple[Any, Features] | None:
    """The rows of :func:`prepared` of one ``framework``, in their order there, and their
    features, reading and costing no other framework's rows (None: the framework has none).

    :func:`prepared` keeps the fastest kernel per (framework, dtype group, shape) and drops rows
    one by one, so a framework's rows are the same whichever others are beside them; its rows
    come grouped by framework in sorted order, starting at :func:`framework_offset`. What a
    command asks of one framework (its fits, residuals and held-out errors) needs only these: a
    third of the device's rows in memory, or less. Its text columns are categorical (the same
    values, in the same sorted order; :func:`_kept`).
    """
    out = _prepare_or_none(family, device, framework, compact=True)
    return out if out is not None and len(out[0]) else None


@functools.cache
def framework_offset(family: str, device: str, framework: str) -> int:
    """The position in :func:`prepared` of ``framework``'s first row: the number of rows of the
    frameworks that sort before it (each counted in turn and let go, never all held at once)."""
    from .corpus import frameworks_with_data

    return sum(
        _kept_rows(family, device, fw) for fw in frameworks_with_data(family, device) if fw < framework
    )


#: the number of :func:`prepared` rows of each (family, device, framework) counted in this
#: process: :func:`prepared_where` notes those it reads, so :func:`framework_offset` reads a
#: framework's table once where both ask (an unmeasured device's residuals and held-out errors)
_KEPT_ROWS: dict[tuple[str, str, str], int] = {}


def _kept_rows(family: str, device: str, framework: str) -> int:
    """The number of :func:`prepared` rows of one framework (0 without a table of it)."""
    at = (family, device, framework)
    if at not in _KEPT_ROWS:
        try:
            _KEPT_ROWS[at] = int(_kept(family, device, [framework], compact=True)[1].sum())
        except MeasuredDataError:  # no table of this framework on the device
            _KEPT_ROWS[at] = 0
    return _KEPT_ROWS[at]


def prepared_where(
    family: str, device: str, select: Callable[[Any], np.ndarray]
) -> tuple[Any, Features, np.ndarray] | None:
    """The rows of :func:`prepared` that ``select`` keeps, their features and their positions
    there, read one framework at a time and let go (never every framework's rows at once, and
    none kept for the process).

    :func:`prepared`'s rows are each framework's in sorted order (:func:`prepared_framework`), so
    concatenating what ``select`` keeps of each gives the same rows, features and order as
    selecting from :func:`prepared`; a position is the row's index there (a seeded draw per row,
    :func:`framework_offset`, needs it). What reads a few groups of every framework's rows (an
    unmeasured device's residuals where the asked framework does not run a kernel) holds those
    alone.

    Parameters
    ----------
    family : str
        A measured family.
    device : str
        A measured device.
    select : callable
        A boolean mask of the rows to keep, from one framework's prepared rows (a DataFrame).

    Returns
    -------
    tuple of (DataFrame, Features, numpy.ndarray), or None
        The kept rows (index 0..n-1), their features and their positions in :func:`prepared`;
        None when no row is kept.
    """
    import pandas as pd

    from .corpus import frameworks_with_data

    frames, xs, pos, start = [], [], [], 0
    for fw in frameworks_with_data(family, device):
        try:
            df = _grouped(family, device, [fw], compact=False)
        except MeasuredDataError:  # no table of this framework on the device
            continue
        _KEPT_ROWS[(family, device, fw)] = len(df)
        keep = np.flatnonzero(np.asarray(select(df), dtype=bool))
        if len(keep):
            # the features of the kept rows alone: they are computed row by row (_prepare)
            frames.append(df.iloc[keep])
            xs.append(_features(family, frames[-1].reset_index(drop=True), device))
            pos.append(start + keep)
        start += len(df)
        del df
        release_unused()
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True), Features.concat(xs), np.concatenate(pos)


def _prepare_or_none(
    family: str, device: str, framework: str, *, compact: bool = False
) -> tuple[Any, Features] | None:
    """:func:`_prepare` of one framework's rows; None when it has no table on the device."""
    try:
        return _prepare(family, device, [framework], compact=compact)
    except MeasuredDataError:
        return None


#: rows costed at a time: the bounds and features are computed row by row, and a chunk's
#: intermediate arrays (a few dozen floats a row) are let go before the next
CHUNK_ROWS = 1 << 15


def _prepare(
    family: str, device: str, frameworks: list[str] | None, *, compact: bool = False
) -> tuple[Any, Features]:
    """:func:`prepared`'s rows of ``frameworks`` (None: every one) and their features;
    ``compact``: text columns as categories (:func:`_kept`)."""
    df = _grouped(family, device, frameworks, compact=compact)
    return df, _features(family, df, device)


def _grouped(family: str, device: str, frameworks: list[str] | None, *, compact: bool) -> Any:
    """:func:`_kept`'s rows that are kept, with their kernel group (column ``group``)."""
    df, keep = _kept(family, device, frameworks, compact=compact)
    if not keep.all():
        df = df[keep].reset_index(drop=True)
    group = group_of(family, df)  # row by row: the kept rows' groups
    df["group"] = group.astype("category") if compact else group
    return df


def _features(family: str, df: Any, device: str) -> Features:
    """The model features of ``df``'s rows on ``device``, :data:`CHUNK_ROWS` rows at a time (row
    by row: a row's features do not depend on the rows beside it)."""
    hw = get_device(device)
    starts = range(0, len(df), CHUNK_ROWS)
    if len(starts) < 2:
        return features(family, df, hw)
    return Features.concat([features(family, df.iloc[i : i + CHUNK_ROWS], hw) for i in starts])


def _kept(
    family: str, device: str, frameworks: list[str] | None, *, compact: bool = False
) -> tuple[Any, np.ndarray]:
    """The device's rows (fastest kernel per framework, dtype group and shape) and which of them
    to keep (every one but those the datasheet's bandwidth rules out).

    ``compact``: the text columns as categories as soon as they are read. One framework's hold a
    handful of names (one device, one framework, a few kernels and dtypes): a byte a row where
    the strings take tens; the same values, and categories sort as their strings do.
    """
    df = load(family, devices=[device], frameworks=frameworks)
    if compact:
        for c in df.columns:
            if df[c].dtype == "str":
                df[c] = df[c].astype("category")
    group = dtype_group(family, df)
    df["dtype_group"] = group.astype("category") if compact else group
    keys = ["framework", "dtype_group", *SHAPE_KEYS[family]]
    df = df.loc[df.groupby(keys)["latency_s"].idxmin()].reset_index(drop=True)
    hw = get_device(device)
    # rows that imply more DRAM bandwidth than the datasheet's peak did not move the
    # shape's bytes (validity.explain): they calibrate nothing and are left out
    t = df["latency_s"].to_numpy()
    keep = np.ones(len(df), dtype=bool)
    for i in range(0, len(df), CHUNK_ROWS):
        b = lower_bounds(family, df.iloc[i : i + CHUNK_ROWS], hw)
        ti = t[i : i + CHUNK_ROWS]
        bad = ti < b.seconds * (1 - TOLERANCE)
        if bad.any():
            why = np.array(explain(b, ti, hw, bad))
            keep[i + np.flatnonzero(bad)[why == OVER_PEAK_BW]] = False
    release_unused()  # the text columns' temporaries (the dtype groups, the groupby)
    return df, keep


def ape_stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """MAPE, median and P90 of ``|pred - meas| / meas`` in percent."""
    ape = np.abs(pred - meas) / meas * 100
    return {"mape": float(ape.mean()), "median": float(np.median(ape)), "p90": float(np.quantile(ape, 0.9))}


@functools.cache
def _system_gpu(device: str) -> dict[str, Any]:
    """The ``gpu`` section of the wheel's system file for one of our measured devices."""
    import yaml

    system = next((s for s, d in SYSTEMS.items() if d == device), None)
    if system is None:
        raise MeasuredDataError(
            f"device {device!r} has no measurements; measured: {', '.join(SYSTEMS.values())}"
        )
    with open(os.path.join(corpus_info().root, f"{system}.yaml")) as f:
        return dict((yaml.safe_load(f) or {}).get("gpu") or {})


def _aic_factors(device: str) -> tuple[float, float]:
    gpu = _system_gpu(device)
    return float(gpu.get("mem_bw_empirical_scaling_factor", 1.0)), float(
        gpu.get("mem_empirical_constant_latency", 0.0)
    )


def arch_family(device: str) -> int | None:
    """The device's kernel-binary family: its compute capability (the system file's
    ``sm_version``), with every 10.x and 12.x in one family (CUDA's family-specific
    targets, ``sm_100f``/``sm_120f``, run one binary on all of them: B200 and B300 run the
    same kernels); None when the file does not say.

    Kernel libraries pick tiles and code paths per target, so a kernel's residuals
    transfer within a family and not across (Ada's and Ampere's are both 8.x).
    """
    sm = _system_gpu(device).get("sm_version")
    if not isinstance(sm, int):
        return None
    return sm - sm % 10 if sm >= 100 else sm


def _aic_empirical(family: str, device: str, x: Features) -> np.ndarray | None:
    if family == "all_reduce":
        return None
    f, c = _aic_factors(device)
    return np.maximum(x.compute_s, x.memory_s / f) + c


@dataclass(frozen=True)
class HeldOut(Result):
    """Held-out errors (percent) of one family on one device under one split."""

    family: str
    device: str
    split: str
    rows: int
    calibrated: dict[str, float]
    bound: dict[str, float]
    corrected: dict[str, float] | None
    aic_empirical: dict[str, float] | None
    package: str


def fit_family(family: str, group: str, x: Features, y: np.ndarray, **kw: Any) -> Fit | None:
    """The efficiency fit of these corpus rows (None under 12 rows): the shipped fit of exactly
    these inputs when there is one (:mod:`.shipped`), else fitted (:func:`.efficiency.fit`)."""
    if len(y) < 12:
        return None
    from .shipped import fitted

    return fitted(family, group, x, y, **kw)


#: one group's held-out rows: calibrated prediction, measured, features, grey-box prediction
_Scored = tuple[np.ndarray, np.ndarray, Features, np.ndarray]


def shape_residuals(family: str, df: Any, x: Features, rows: np.ndarray, f: Fit) -> ShapeResiduals:
    """The fit's residuals on ``rows`` of a prepared frame (:mod:`.residual`)."""
    return ShapeResiduals.from_rows(df.iloc[rows], SHAPE_KEYS[family], f.predict(x.take(rows)))


def _score(
    family: str, f: Fit, df: Any, x: Features, rows: np.ndarray, sources: list[ShapeResiduals]
) -> _Scored:
    xt = x.take(rows)
    p = f.predict(xt)
    return p, df["latency_s"].to_numpy()[rows], xt, p * np.exp(combined(sources, df.iloc[rows]))


def _collect(family: str, device: str, split: str, preds: list[_Scored]) -> HeldOut | None:
    if not preds:
        return None
    p = np.concatenate([a[0] for a in preds])
    m = np.concatenate([a[1] for a in preds])
    x = Features.concat([a[2] for a in preds])
    c = np.concatenate([a[3] for a in preds])
    bound = x.bound_s
    emp = _aic_empirical(family, device, x)
    return HeldOut(
        family=family,
        device=device,
        split=split,
        rows=len(m),
        calibrated=ape_stats(p, m),
        bound=ape_stats(bound, m),
        corrected=ape_stats(c, m),
        aic_empirical=ape_stats(emp, m) if emp is not None else None,
        package=f"{corpus_info().package} {corpus_info().version}",
    )


def _split_shapes(family: str, device: str, frac: float, seed: int) -> HeldOut | None:
    df, x = prepared(family, device)
    rng = np.random.default_rng(seed)
    test = rng.random(len(df)) < frac
    y = df["latency_s"].to_numpy()
    preds = []
    for _, idx in df.groupby(["framework", "group"]).indices.items():
        tr, te = idx[~test[idx]], idx[test[idx]]
        f = fit_family(family, "", x.take(tr), y[tr]) if len(te) else None
        if f is not None:
            preds.append(_score(family, f, df, x, te, [shape_residuals(family, df, x, tr, f)]))
    return _collect(family, device, "shapes", preds)


def select_rows(odf: Any, fw: str | None, col: str, value: str) -> np.ndarray:
    sel = (odf[col] == value).to_numpy().copy()
    if fw is not None:
        sel &= (odf["framework"] == fw).to_numpy()
    return np.flatnonzero(sel)


def _rows_like(
    others: list[tuple[Any, Features]], fw: str | None, col: str, value: str
) -> tuple[Features, np.ndarray] | None:
    parts = []
    for odf, ox in others:
        sel = select_rows(odf, fw, col, value)
        if len(sel):
            parts.append((ox.take(sel), odf["latency_s"].to_numpy()[sel]))
    if not parts:
        return None
    return Features.concat([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _split_device(family: str, device: str, devices: list[str]) -> HeldOut | None:
    """Fit on the other devices: the same framework's same kernel, else its same dtype group.

    The grey-box residuals are each other device's of the same kernel-binary family
    (:func:`arch_family`), else every other device's, on the rows the fit used.
    """
    names = [d for d in devices if d != device]
    return _collect(family, device, "device", _from_others(family, device, names))


def _from_others(
    family: str, device: str, names: list[str], fits: dict[tuple[str, str, str], Fit | None] | None = None
) -> list[_Scored]:
    """``device``'s rows scored by fits on the devices ``names`` (:func:`_split_device`);
    ``fits`` memoises the fits by (framework, column, value) for callers that score several
    devices against one training set."""
    df, x = prepared(family, device)
    others = [prepared(family, d) for d in names]
    # residuals from the same kernel-binary family when one has the rows, else from every device
    kin = [o for d, o in zip(names, others, strict=True) if arch_family(d) == arch_family(device)]
    memo = {} if fits is None else fits
    preds = []
    for (fw, grp, dgrp), idx in df.groupby(["framework", "group", "dtype_group"]).indices.items():
        col, value = ("group", grp) if _rows_like(others, fw, "group", grp) else ("dtype_group", dgrp)
        if (fw, col, value) not in memo:
            train = _rows_like(others, fw, col, value)
            memo[fw, col, value] = fit_family(family, grp, *train) if train else None
        f = memo[fw, col, value]
        if f is not None:
            sources = [
                shape_residuals(family, odf, ox, sel, f)
                for odf, ox in kin
                if len(sel := select_rows(odf, fw, col, value))
            ] or [
                shape_residuals(family, odf, ox, sel, f)
                for odf, ox in others
                if len(sel := select_rows(odf, fw, col, value))
            ]
            preds.append(_score(family, f, df, x, idx, sources))
    return preds


def generation_of(device: str) -> str:
    """A measured device's architecture generation: the catalog's vendor and architecture
    (:attr:`costmodel.hardware.Hardware.generation`, ``NVIDIA Hopper``).

    Parameters
    ----------
    device : str
        A catalog device name.

    Returns
    -------
    str
    """
    gen = get_device(device).generation
    if not gen:
        raise MeasuredDataError(
            f"device {device!r} has no architecture in the hardware catalog: the generation split needs one"
        )
    return gen


def _split_generation(family: str, device: str, devices: list[str]) -> HeldOut | None:
    """Fit on the devices of the other generations (module doc), as :func:`_split_device` does."""
    gen = generation_of(device)
    names = [d for d in devices if generation_of(d) != gen]
    return _collect(family, device, "generation", _from_others(family, device, names))


@dataclass(frozen=True)
class GenerationHeldOut(Result):
    """Held-out errors (percent) of one family over ``devices`` of one architecture generation,
    their rows pooled, each predicted from fits on the devices of ``trained_on`` (the other
    generations): ``calibrated`` the fits alone, ``corrected`` with the other devices' shape
    residuals (what ``--predict`` prints for a device it has no rows of)."""

    family: str
    generation: str
    devices: tuple[str, ...]
    trained_on: tuple[str, ...]
    rows: int
    calibrated: dict[str, float]
    corrected: dict[str, float]


def generation_heldout(
    family: str, devices: list[str], every: list[str] | None = None
) -> GenerationHeldOut | None:
    """Leave one generation out: ``devices`` (all of one generation, or a part of it, such as its
    HBM parts) predicted from fits on every measured device of another generation (the same
    framework's same kernel, else its dtype group: :func:`_split_device`), their rows pooled.

    Parameters
    ----------
    family : str
        A measured family (:data:`costmodel.measured.corpus.FAMILIES`).
    devices : list of str
        Measured devices of one generation (:func:`generation_of`).
    every : list of str, optional
        The measured devices to train on and take the generation's from (default: every device
        the corpus measures for ``family``).

    Returns
    -------
    GenerationHeldOut or None
        None when no device of another generation has rows to fit (nothing held out).
    """
    check_request((family,), ())
    every = systems_with_data(family) if every is None else every
    missing = [d for d in devices if d not in every]
    if not devices or missing:
        raise MeasuredDataError(
            f"{family}: no measured rows for {', '.join(missing) or 'an empty device list'}; "
            f"measured: {', '.join(every)}"
        )
    gens = {generation_of(d) for d in devices}
    if len(gens) != 1:
        raise MeasuredDataError(f"devices {', '.join(devices)} span generations {', '.join(sorted(gens))}")
    (gen,) = gens
    names = [d for d in every if generation_of(d) != gen]
    fits: dict[tuple[str, str, str], Fit | None] = {}
    preds = [p for d in devices for p in _from_others(family, d, names, fits)]
    if not preds:
        return None
    p = np.concatenate([a[0] for a in preds])
    m = np.concatenate([a[1] for a in preds])
    c = np.concatenate([a[3] for a in preds])
    return GenerationHeldOut(
        family=family,
        generation=gen,
        devices=tuple(devices),
        trained_on=tuple(sorted({generation_of(d) for d in names})),
        rows=len(m),
        calibrated=ape_stats(p, m),
        corrected=ape_stats(c, m),
    )


def _split_framework(family: str, device: str) -> HeldOut | None:
    """Fit on the device's other frameworks (their kernels of the same dtype group).

    The grey-box residuals are each other framework's, on the rows the fit used.
    """
    df, x = prepared(family, device)
    y = df["latency_s"].to_numpy()
    fws = df["framework"].to_numpy()
    same = df["dtype_group"].to_numpy()
    preds = []
    for (fw, dgrp), idx in df.groupby(["framework", "dtype_group"]).indices.items():
        train = np.flatnonzero((fws != fw) & (same == dgrp))
        f = fit_family(family, dgrp, x.take(train), y[train]) if len(train) else None
        if f is not None:
            sources = [
                shape_residuals(family, df, x, train[fws[train] == other], f)
                for other in sorted(set(fws[train]))
            ]
            preds.append(_score(family, f, df, x, idx, sources))
    return _collect(family, device, "framework", preds)


SPLITS = ("shapes", "device", "framework", "generation")


def check_request(families: tuple[str, ...], splits: tuple[str, ...] = SPLITS) -> None:
    """A clear error for a family or split that does not exist."""
    for f in families:
        if f not in FAMILIES:
            raise MeasuredDataError(f"family {f!r} not measured; allowed: {', '.join(FAMILIES)}")
    for sp in splits:
        if sp not in SPLITS:
            raise MeasuredDataError(f"split {sp!r} not known; allowed: {', '.join(SPLITS)}")


def evaluate(
    families: tuple[str, ...] = FAMILIES,
    devices: list[str] | None = None,
    splits: tuple[str, ...] = ("shapes", "device", "framework"),
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> list[HeldOut]:
    """Held-out errors per family, device and split (module doc)."""
    check_request(families, splits)
    out = []
    for fam in families:
        devs = [d for d in systems_with_data(fam) if devices is None or d in devices]
        every = systems_with_data(fam)
        for dev in devs:
            if progress:
                progress(f"{fam} on {dev}")
            for split in splits:
                if split == "shapes":
                    r = _split_shapes(fam, dev, test_fraction, seed)
                elif split == "device":
                    r = _split_device(fam, dev, every)
                elif split == "generation":
                    r = _split_generation(fam, dev, every)
                else:
                    r = _split_framework(fam, dev)
                if r is not None:
                    out.append(r)
    return out
