"""Which measured fits price a kernel of a model step, and what a prediction rests on.

:func:`calibration` fits one family's dtype groups for a device and framework on
the measured corpus (:mod:`costmodel.measured`): the device's own rows when it has
measurements, else every measured device's; the framework's rows, else every
framework's. :func:`kernel_source` picks, per family and dtype key, the fits that
price it and names what they rest on:

* ``measured``: the device's own rows of the framework's kernels of that dtype;
* ``neighbour``: other devices' fits on this device's datasheet (it has no
  measurements), other frameworks' kernels, or another dtype's kernels: only the
  substitutions of :data:`SUBSTITUTES` (FP16 by BF16), each named, never a silent
  fallback to whichever dtype was fitted;
* ``bound``: no fits; the roofline bound prices it.

:class:`Coverage` sums a prediction's seconds by these three, each neighbour and
bound share with its reason (:func:`coverage_of`); :data:`WARN_SHARE` is the share
above which the command line warns. :mod:`graphs.serving.pricing.predict` composes them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from costmodel.results import Result

__all__ = [
    "ATTENTION_FAMILIES",
    "OTHER_DEVICES",
    "unmeasured_device_families",
    "SUBSTITUTES",
    "WARN_SHARE",
    "Coverage",
    "KernelSource",
    "fit_basis",
    "calibration",
    "calibration_residuals",
    "CLAMPED",
    "coverage_of",
    "heldout_log_errors",
    "heldout_log_quantile",
    "kernel_source",
    "moe_source",
    "substitute",
    "with_key",
]

#: a corpus dtype with no measurements -> the measured one whose kernels price it. FP16 by
#: BF16: the same tensor-core rate on every measured device (dense FP16 = BF16 Tensor Core
#: FLOP/s in each datasheet: A100 312 T, H100 SXM 989 T, B200 2.25 P), the same 2 bytes per
#: element, and the same kernel templates instantiated for either type (cuBLAS, CUTLASS,
#: FlashAttention); the corpus measures BF16 only.
SUBSTITUTES = {"float16": "bfloat16"}

#: the families keyed by their attention and KV-cache dtypes (``attn/kv``): flash attention and
#: DeepSeek's latent attention (MLA), context and generation
ATTENTION_FAMILIES = ("context_attention", "generation_attention", "context_mla", "generation_mla")

#: a share of a prediction above this, from neighbours or from the bound, is worth a warning
WARN_SHARE = 0.10


@functools.cache
def calibration(
    device: str, framework: str, family: str, dtypes: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Fits of one family's dtype groups for ``device`` and ``framework`` (module doc).

    The device's own rows when it has measurements, else every measured device's
    (its datasheet and the fitted fractions); the framework's rows, else every
    framework's.

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework (``vllm``, ``sglang``, ``trtllm``).
    family : str
        The kernel family (``gemm``, ``context_attention``, ``generation_attention``, ``moe`` ...).
    dtypes : tuple of str, optional
        Only these dtype groups (default: every group measured).

    Returns
    -------
    dict
        The fits by dtype group.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured import systems_with_data
    from costmodel.measured.applied import fit_groups

    have = systems_with_data(family)
    devs = [device] if device in have else have
    return fit_groups(family, devs, framework, dtypes) or fit_groups(family, devs, None, dtypes)


@functools.cache
def calibration_residuals(
    device: str, framework: str, family: str, dtypes: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """Per fitted group of :func:`calibration`, its residuals on the same devices' rows of that group.

    Kept across processes (:mod:`costmodel.measured.stored`), as :func:`calibration`'s fits are.

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    family : str
        The kernel family.
    dtypes : tuple of str, optional
        Only these dtype groups.

    Returns
    -------
    dict
        Per fitted group, its residuals (log of measured over fitted time) and the rows' shapes.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured import systems_with_data
    from costmodel.measured.applied import group_residuals
    from costmodel.measured.stored import decode_residuals, encode_residuals, stored

    have = systems_with_data(family)
    devs = [device] if device in have else have
    basis = fit_basis(device, family)
    return _shared(
        ("residuals", basis, framework, family, dtypes),
        lambda: stored(
            "residuals",
            [basis, framework, family, None if dtypes is None else list(dtypes)],
            lambda: group_residuals(family, calibration(device, framework, family, dtypes), devs, framework),
            encode_residuals,
            decode_residuals,
            family=family,
        ),
    )


def fit_basis(device: str, family: str) -> str | list[str]:
    """What ``device``'s fits, residuals and held-out errors of ``family`` are computed from: the
    device itself when the corpus measures it, else the list of every measured device (the same
    for every unmeasured device: none of its own rows, and its datasheet enters only where a
    prediction is priced, never the tables). Fused MoE is its curve per device
    (:func:`moe_source`), so always the device.

    The stored entries (:mod:`costmodel.measured.stored`, whose key adds the corpus wheel and the
    engine's fingerprint) and this process's tables are keyed by it, so every unmeasured device
    shares one residual table and one held-out array per framework, family and dtype.

    Parameters
    ----------
    device : str
        The device's catalog name.
    family : str
        The kernel family.

    Returns
    -------
    str or list of str
        ``device``, or the measured devices' names.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured import systems_with_data

    have = systems_with_data(family)
    return device if family == "moe" or device in have else list(have)


#: this process's residual tables and held-out arrays by (kind, :func:`fit_basis`, the rest of
#: the call): one per basis, whichever device asked first
_SHARED: dict[str, Any] = {}


def _shared(parts: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
    """``compute()``, once per ``parts`` in this process (:data:`_SHARED`)."""
    import json

    key = json.dumps(parts)
    if key not in _SHARED:
        _SHARED[key] = compute()
    return _SHARED[key]


#: the held-out share of each (framework, kernel group)'s rows, and its seed (the ``shapes``
#: split of :mod:`costmodel.measured.heldout`, as ``benchmarks/measured_accuracy.py`` scores it)
HELDOUT_FRACTION, HELDOUT_SEED = 0.2, 0


@functools.cache
def heldout_log_errors(device: str, framework: str, family: str, key: str, grey_box: bool = False) -> Any:
    """Held-out log errors ``log(measured / predicted)`` of the kernels pricing ``family`` rows
    of dtype ``key`` (the fits :func:`kernel_source` picks), as a sorted array.

    The rows are those the fits read (:func:`calibration`'s devices, the framework's rows when
    it has any): per (framework, kernel group), :data:`HELDOUT_FRACTION` of them drawn at random
    (seed :data:`HELDOUT_SEED`) are held out of a fit on the rest, exactly the ``shapes`` split of
    :mod:`costmodel.measured.heldout`; ``grey_box`` scores the fit times its residuals at the
    nearest training shapes (:mod:`costmodel.measured.residual`). Empty when nothing is fitted.
    Kept across processes (:mod:`costmodel.measured.stored`), as :func:`calibration`'s fits are.

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    family : str
        The kernel family.
    key : str
        The dtype key (``bfloat16``; attention: ``attn/kv``).
    grey_box : bool
        Score the fit corrected by its residuals at the nearest training shapes.

    Returns
    -------
    numpy.ndarray
        Sorted ``log(measured / predicted)`` (dimensionless); empty when nothing is fitted.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.stored import decode_array, encode_array, stored

    basis = fit_basis(device, family)
    return _shared(
        ("heldout", basis, framework, family, key, grey_box),
        lambda: stored(
            "heldout",
            [basis, framework, family, key, grey_box],
            lambda: _heldout_log_errors(device, framework, family, key, grey_box),
            encode_array,
            decode_array,
            family=family,
        ),
    )


def _heldout_log_errors(device: str, framework: str, family: str, key: str, grey_box: bool) -> Any:
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    import numpy as np

    from costmodel.measured import systems_with_data
    from costmodel.measured.heldout import (
        fit_family,
        framework_offset,
        prepared_framework,
        prepared_where,
        shape_residuals,
    )
    from costmodel.measured.residual import combined

    src = kernel_source(device, framework, family, key)
    if not src.fits:
        return np.zeros(0)
    have = systems_with_data(family)
    out = []
    for dev in [device] if device in have else have:
        # the framework's rows alone when it has rows of the key (heldout.prepared_framework): the
        # same rows, and the same draws, as at their place in every framework's rows
        own = prepared_framework(family, dev, framework)
        if own is not None and (own[0]["dtype_group"] == src.key).any():
            df, x = own
            sel = (df["dtype_group"] == src.key).to_numpy()
            start = framework_offset(family, dev, framework)
            draws = np.random.default_rng(HELDOUT_SEED).random(start + len(df))[start:]
        else:
            # the framework has no rows of the key: every framework's, read one at a time and only
            # the key's rows kept (heldout.prepared_where), each row's draw at its place among all
            got = prepared_where(family, dev, lambda d: (d["dtype_group"] == src.key).to_numpy())
            if got is None:
                continue
            df, x, pos = got
            sel = np.ones(len(df), dtype=bool)
            if (df["framework"] == framework).any():
                sel = (df["framework"] == framework).to_numpy()
            draws = np.random.default_rng(HELDOUT_SEED).random(int(pos[-1]) + 1)[pos]
        test = draws < HELDOUT_FRACTION
        y = df["latency_s"].to_numpy()
        for idx in df[sel].groupby(["framework", "group"]).indices.values():
            idx = np.flatnonzero(sel)[idx]
            tr, te = idx[~test[idx]], idx[test[idx]]
            f = fit_family(family, "", x.take(tr), y[tr]) if len(te) else None
            if f is None:
                continue
            p = f.predict(x.take(te))
            if grey_box:
                p = p * np.exp(combined([shape_residuals(family, df, x, tr, f)], df.iloc[te]))
            out.append(np.log(y[te] / p))
    return np.sort(np.concatenate(out)) if out else np.zeros(0)


def heldout_log_quantile(
    device: str, framework: str, family: str, key: str, q: float, grey_box: bool = False
) -> float:
    """The ``q`` quantile of :func:`heldout_log_errors` (linear between order statistics), so
    that ``t * exp(quantile)`` is a kernel's time at that quantile of its held-out error; 0
    (the point prediction) when no row was held out.

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    family : str
        The kernel family.
    key : str
        The dtype key.
    q : float
        The quantile, in ``[0, 1]``.
    grey_box : bool
        Score the residual-corrected fit.

    Returns
    -------
    float
        The log error at ``q`` (0 when nothing was held out).
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    import numpy as np

    e = heldout_log_errors(device, framework, family, key, grey_box)
    return float(np.quantile(e, q)) if len(e) else 0.0


def substitute(key: str) -> str | None:
    """The measured dtype key that prices ``key`` (:data:`SUBSTITUTES`), or None.

    Parameters
    ----------
    key : str
        A corpus dtype key.

    Returns
    -------
    str or None
        The measured key that prices it, or None when it is priced by itself.
    """
    parts = key.split("/")
    sub = "/".join(SUBSTITUTES.get(x, x) for x in parts)
    return sub if sub != key else None


def with_key(family: str, row: dict[str, Any], key: str) -> dict[str, Any]:
    """Row ``row`` of ``family`` with its dtype fields set from ``key``.

    Parameters
    ----------
    family : str
        The kernel family (``moe`` rows carry their key in their shape).
    row : dict
        A kernel row (shape and dtypes).
    key : str
        The dtype key: ``dtype`` for GEMMs, ``attn/kv`` for attention families.

    Returns
    -------
    dict
        A copy of ``row`` with the key's fields (``row`` itself for ``moe``).
    """
    if family == "moe":  # its key is its shape (:func:`moe_source`), already in the row
        return row
    if family in ATTENTION_FAMILIES:
        a, kv = key.split("/")
        return {**row, "attn_dtype": a, "kv_dtype": kv}
    return {**row, "dtype": key}


class KernelSource(NamedTuple):
    """The fits pricing one family's rows of one dtype key, and what they rest on (:func:`kernel_source`)."""

    key: str  #: the dtype key priced (a substitute's, :data:`SUBSTITUTES`)
    fits: dict[str, Any]
    source: str  #: measured, neighbour or bound
    basis: str  #: why, for a neighbour or the bound
    own_device: bool  #: the fits read the device's own rows


@functools.cache
def kernel_source(device: str, framework: str, family: str, key: str) -> KernelSource:
    """The fits pricing ``family`` rows of dtype ``key``: ``measured`` (the device's own
    rows of the framework's kernels of that dtype), ``neighbour`` (the basis says which:
    other devices, other frameworks, another dtype) or ``bound`` (no fits: why).

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    family : str
        The kernel family.
    key : str
        The dtype key of the rows.

    Returns
    -------
    KernelSource
        The fits and whether they are ``measured``, ``neighbour`` or ``bound`` (with why).
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured import systems_with_data
    from costmodel.measured.corpus import ABSORBED_CONTEXT_MLA, frameworks_with_data

    if family == "moe":
        return moe_source(device, framework, key)
    have = systems_with_data(family)
    for k in (key, substitute(key)):
        if k is None:
            continue
        fits = calibration(device, framework, family, (k,))
        if not fits:
            continue
        basis = []
        if k != key:
            basis.append(f"{family} {k} kernels for {key}")
        if device not in have:
            basis.append(f"{family}: {OTHER_DEVICES} ({len(have)} measured) on {device}'s datasheet")
        fws = sorted({fw for f in fits.values() for fw in f.frameworks})
        if fws != [framework]:
            why = f"no {framework} {k} measured"
            if (
                family == "context_mla"
                and any(fw == framework for fw, _ in ABSORBED_CONTEXT_MLA)
                and framework in frameworks_with_data(family, device)
            ):  # its rows here were the absorbed form's, left out
                why += f"; {framework}'s rows here time the absorbed form, left out: it runs a fresh prefill decompressed"
            basis.append(f"{family}: {'/'.join(fws)} kernels ({why})")
        return KernelSource(k, fits, "neighbour" if basis else "measured", "; ".join(basis), device in have)
    return KernelSource(key, {}, "bound", f"no {family} {key} kernels measured", False)


#: the words a neighbour basis uses for a family priced from other devices' fits
#: (:func:`kernel_source`; read back by :func:`unmeasured_device_families`)
OTHER_DEVICES = "other devices' fits"


def unmeasured_device_families(cov: Coverage) -> list[str]:
    """The families of a coverage's neighbour seconds priced from other devices' fits (the
    device's own rows are not in the corpus), in order of first mention.

    Parameters
    ----------
    cov : Coverage
        A prediction's seconds by source.

    Returns
    -------
    list of str
        Kernel families priced from other devices' fits.
    """
    out: list[str] = []
    for basis in cov.neighbours:
        for part in basis.split("; "):
            family, _, rest = part.partition(": ")
            if rest.startswith(OTHER_DEVICES) and family not in out:
                out.append(family)
    return out


def moe_source(device: str, framework: str, key: str) -> KernelSource:
    """The measured fused-MoE curve pricing the shape ``key`` (:attr:`MoEShape.key`): its
    ``fits`` are ``{"moe": curve}`` (:func:`costmodel.measured.moe.moe_curve`: measured, or a
    neighbour with its basis), or none (the bound prices it) when the corpus has no fused-MoE
    rows of its dtype, gating and ``ep``.

    Parameters
    ----------
    device : str
        The device's catalog name.
    framework : str
        The corpus framework.
    key : str
        The fused-MoE shape key (:attr:`MoEShape.key`: dtype, gating, ``ep`` ...).

    Returns
    -------
    KernelSource
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.moe import MoEShape, moe_curve

    shape = MoEShape.from_key(key)
    curve = moe_curve(device, framework, shape)
    if curve is None:
        basis = f"no fused-MoE {shape.dtype} kernels measured ({'gated' if shape.gated else 'non-gated'}, ep {shape.ep})"
        return KernelSource(key, {}, "bound", basis, False)
    return KernelSource(key, {"moe": curve}, curve.source, curve.basis, curve.own_device)


#: the bound-share reason of kernel seconds where a prediction fell below the roofline
CLAMPED = "predictions below the kernel's roofline bound, clamped to it"


def coverage_of(nodes: dict[str, dict[str, Any]], what: str) -> Coverage:
    """The seconds ``what`` (``predicted_s`` or ``corrected_s``) of per-node predictions by what
    they rest on: each node's ``source`` and ``basis``, except that a node whose ``clamped``
    names ``what`` (its prediction fell below its bound, which priced it) counts as the bound,
    :data:`CLAMPED`.

    Parameters
    ----------
    nodes : dict of str to dict
        Per-node predictions, each with ``source``, ``basis``, ``clamped`` and the seconds ``what``.
    what : str
        ``"predicted_s"`` or ``"corrected_s"``.

    Returns
    -------
    Coverage
        The seconds (s) resting on measured, neighbour and bound pricing, with reasons.
    """
    parts = {"measured": 0.0, "neighbour": 0.0, "bound": 0.0}
    why: dict[str, dict[str, float]] = {"neighbour": {}, "bound": {}}
    for nd in nodes.values():
        t = float(nd[what])
        src, basis = ("bound", CLAMPED) if what in nd.get("clamped", ()) else (nd["source"], nd["basis"])
        parts[src] += t
        if src in why:
            why[src][basis] = why[src].get(basis, 0.0) + t
    return Coverage(parts["measured"], parts["neighbour"], parts["bound"], why["neighbour"], why["bound"])


@dataclass(frozen=True)
class Coverage(Result):
    """Seconds of a predicted time by what they rest on (module doc).

    ``measured_s``: the device's own measured kernels of the framework and dtype;
    ``neighbour_s``: other devices', frameworks' or dtypes' kernels, per reason in
    ``neighbours``; ``bound_s``: roofline bounds alone, per reason in ``bounds``.
    """

    measured_s: float
    neighbour_s: float
    bound_s: float
    neighbours: dict[str, float] = field(default_factory=dict)
    bounds: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.measured_s + self.neighbour_s + self.bound_s

    def __add__(self, other: Coverage) -> Coverage:
        """Two predictions' seconds together (each reason's seconds summed)."""

        def merged(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
            return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in {**a, **b}}

        return Coverage(
            self.measured_s + other.measured_s,
            self.neighbour_s + other.neighbour_s,
            self.bound_s + other.bound_s,
            merged(self.neighbours, other.neighbours),
            merged(self.bounds, other.bounds),
        )

    def minus(self, other: Coverage) -> Coverage:
        """This prediction's seconds less ``other``'s, reason by reason, none below zero: what a
        step adds over another priced by the same kernels (MTP's full step less the plain one).

        Parameters
        ----------
        other : Coverage
            The seconds to take off.

        Returns
        -------
        Coverage
        """

        def less(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
            return {k: v for k in a if (v := max(a[k] - b.get(k, 0.0), 0.0)) > 0}

        nb, bd = less(self.neighbours, other.neighbours), less(self.bounds, other.bounds)
        return Coverage(
            max(self.measured_s - other.measured_s, 0.0), sum(nb.values()), sum(bd.values()), nb, bd
        )

    def share(self, part: str) -> float:
        """``part`` (``measured``, ``neighbour`` or ``bound``) over the total.

        Parameters
        ----------
        part : str
            ``"measured"``, ``"neighbour"`` or ``"bound"``.

        Returns
        -------
        float
            The share, in ``[0, 1]`` (0 when the total is 0).
        """
        return float(getattr(self, f"{part}_s")) / self.total_s if self.total_s > 0 else 0.0

    @property
    def flagged(self) -> tuple[str, ...]:
        """The parts (``neighbour``, ``bound``) above :data:`WARN_SHARE` of the total."""
        return tuple(p for p in ("neighbour", "bound") if self.share(p) > WARN_SHARE)

    @property
    def warnings(self) -> list[str]:
        """One sentence per :attr:`flagged` part: what share rests on neighbours or the bound."""
        what = {"neighbour": "neighbours (other devices, frameworks or dtypes)", "bound": "the bound alone"}
        return [
            f"{100 * self.share(p):.1f}% of the prediction rests on {what[p]} (more than {100 * WARN_SHARE:.0f}%)"
            for p in self.flagged
        ]

    def to_dict(self) -> dict[str, Any]:
        """Every field, and the :attr:`warnings` (so that ``--json`` carries them too)."""
        return {**super().to_dict(), "warnings": self.warnings}
