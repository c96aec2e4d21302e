"""The fits users apply: per dtype group over chosen devices, the fastest kernel, their residuals.

:func:`fit_groups` fits the efficiency model (:mod:`.efficiency`) per group
(dtype and kernel) on the prepared rows (:func:`.heldout.prepared`) of some
devices, one framework or all; :func:`fastest` prices rows with the fastest
kernel fitted for their dtype (the dispatcher's choice), optionally corrected
by :func:`group_residuals` (the grey-box prediction, :mod:`.residual`).
:mod:`graphs.serving.pricing.predict` and the calibrated hardware file read these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .corpus import MeasuredDataError
from .efficiency import Features, Fit
from .heldout import (
    VARIANT_SEP,
    fit_family,
    kernel_variant,
    prepared,
    prepared_framework,
    prepared_where,
    select_rows,
    shape_residuals,
)
from .residual import ShapeResiduals, combined

__all__ = ["fit_groups", "fastest", "group_residuals"]


def fit_groups(
    family: str, devices: list[str], framework: str | None = None, dtypes: tuple[str, ...] | None = None
) -> dict[str, Fit]:
    """Fits per group of one family over ``devices`` (one framework, or all; some dtypes, or all).

    Kept across processes (:mod:`.stored`): a later process with the same corpus and engine
    reads the fits back instead of fitting again.
    """
    from .stored import decode_fits, encode_fits, stored

    return stored(
        "groups",
        [family, list(devices), framework, None if dtypes is None else list(dtypes)],
        lambda: _fit_groups(family, devices, framework, dtypes),
        encode_fits,
        decode_fits,
        family=family,
    )


def _fit_groups(
    family: str, devices: list[str], framework: str | None, dtypes: tuple[str, ...] | None
) -> dict[str, Fit]:
    fits = {}
    # one framework's fits read its rows alone (the same rows, in the same order, as its share of
    # every framework's: heldout.prepared_framework), so the other frameworks' are never loaded
    parts = (
        [prepared(family, d) for d in devices]
        if framework is None
        else [p for d in devices if (p := prepared_framework(family, d, framework)) is not None]
    )
    groups = sorted(
        {
            g
            for df, _ in parts
            for g in (df["group"] if dtypes is None else df["group"][df["dtype_group"].isin(dtypes)]).unique()
        }
    )
    for grp in groups:
        xs, ys, fws = [], [], set()
        for df, x in parts:
            sel = (df["group"] == grp).to_numpy().copy()
            if framework is not None:
                sel &= (df["framework"] == framework).to_numpy()
            if sel.any():
                xs.append(x.take(np.flatnonzero(sel)))
                ys.append(df["latency_s"].to_numpy()[sel])
                fws |= set(df["framework"][sel].unique())
        if xs:
            f = fit_family(
                family, grp, Features.concat(xs), np.concatenate(ys), devices=devices, frameworks=sorted(fws)
            )
            if f is not None:
                fits[grp] = f
    return fits


def fastest(
    fits: dict[str, Fit],
    dtype: str,
    x: Features,
    residuals: dict[str, list[ShapeResiduals]] | None = None,
    df: Any = None,
    *,
    family: str | None = None,
) -> np.ndarray:
    """Predicted seconds of the fastest kernel fitted for ``dtype`` (the dispatcher's choice).

    With ``residuals`` (per group, :func:`group_residuals`) and the rows ``df``,
    each kernel's prediction is first corrected by its residuals at the nearest
    measured shapes (the grey-box prediction, :mod:`.residual`). A group that is one
    variant of a kernel (:func:`.heldout.kernel_variant`) prices only the rows of ``df``
    (of ``family``) that its dispatcher sends to that variant.
    """
    cands = [g for g in fits if g.split("@")[0].split(":")[-1] == dtype]
    if not cands:  # another dtype's kernels would price it silently: the caller substitutes, and says so
        raise MeasuredDataError(f"no kernel fitted for dtype {dtype!r}; fitted: {', '.join(sorted(fits))}")
    preds = []
    for g in cands:
        p = fits[g].predict(x)
        if residuals is not None:
            p = p * np.exp(combined(residuals.get(g, []), df))
        if VARIANT_SEP in g:
            if df is None or family is None:
                raise MeasuredDataError(
                    f"kernel group {g!r} is one variant: pricing it needs the rows and family"
                )
            source, variant = g.split("@", 1)[1].split(VARIANT_SEP, 1)
            runs = kernel_variant(family, df.assign(kernel_source=source)) == variant
            p = np.where(runs, p, np.inf)
        preds.append(p)
    best = np.minimum.reduce(preds)
    if not np.isfinite(best).all():
        raise MeasuredDataError(f"no fitted {dtype!r} kernel variant runs some of these {family} rows")
    return best


def group_residuals(
    family: str, fits: dict[str, Fit], devices: list[str], framework: str | None = None
) -> dict[str, list[ShapeResiduals]]:
    """Each fitted group's residuals on each device's rows of that group (the framework's, if it has any).

    One source per device (:func:`costmodel.measured.residual.combined` averages them).
    """
    out: dict[str, list[ShapeResiduals]] = {}
    for d in devices:
        # the framework's rows of a group from its rows alone (heldout.prepared_framework); every
        # framework's rows of the groups it does not run, read a framework at a time and only
        # those groups kept (heldout.prepared_where), let go once their residuals are taken
        own = prepared_framework(family, d, framework) if framework is not None else None
        mine = {grp for grp in fits if own is not None and len(select_rows(own[0], None, "group", grp))}
        others = [grp for grp in fits if grp not in mine]
        rest = prepared_where(family, d, _in_groups(others)) if others else None
        for grp, f in fits.items():
            part = own if grp in mine else (rest[:2] if rest is not None else None)
            if part is None:
                continue
            df, x = part
            sel = select_rows(df, None if grp in mine else framework, "group", grp)
            if not len(sel):
                sel = select_rows(df, None, "group", grp)
            if len(sel):
                out.setdefault(grp, []).append(shape_residuals(family, df, x, sel, f))
        del rest
    return out


def _in_groups(groups: list[str]) -> Callable[[Any], np.ndarray]:
    """A row mask: the rows of a prepared frame whose kernel group is one of ``groups``."""
    return lambda df: df["group"].isin(groups).to_numpy()
