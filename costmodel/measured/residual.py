"""Shape residuals: the efficiency model corrected by its errors at nearby measured shapes.

The efficiency model (:mod:`.efficiency`) has a handful of physical parameters
per kernel; what it cannot express is a kernel library's discrete choices (a
dispatcher that switches tile shape at ``m = 64, 128, 256``, a wave that tips
over at one ``n``, a head dimension with its own hand-tuned kernel). Those
show up as a log-residual that is smooth between neighbouring shapes and
repeats across devices and frameworks that run the same kernel. A grey-box
prediction keeps the physical model and multiplies in the residual measured
nearby:

.. math::

    \\hat t(x) = t_\\text{model}(x)\\, \\exp\\!\\big(f(\\bar d)\\,\\rho(x)\\big),\\qquad
    \\rho(x) = \\frac{\\sum_{i \\in N_K(x)} w_i r_i}{\\sum_i w_i},\\quad
    w_i = \\frac{1}{d_i + h},\\quad
    r_i = \\log\\frac{t_i}{t_\\text{model}(x_i)}

* ``N_K(x)``: the :data:`K` measured shapes nearest to ``x``, distance ``d`` in
  octaves (Euclidean over ``log2(1 + v)`` of every shape key), so a step from
  ``m = 64`` to ``128`` counts as much as one from ``4096`` to ``8192``;
* inverse-distance weights (Shepard, "A two-dimensional interpolation function
  for irregularly-spaced data", ACM 1968), with ``h`` = :data:`H_OCTAVES` so an
  exact grid hit does not divide by zero and still averages its neighbours;
* ``f(d) = exp(-(d/L)^2)``, ``L`` = :data:`FADE_OCTAVES`, of the weighted mean
  distance: a shape an octave or more from every measurement gets the plain
  physical model, whose parameters are what extrapolate.

Residuals of several sources (the other devices in a leave-one-device-out
prediction, the other frameworks' kernels in a leave-one-framework-out one) are
averaged: each is a kernel's behaviour at that shape, and their mean is the
estimate for a device or framework none of them is.

The correction has no free parameter fitted on held-out data: ``K``, ``h`` and
``L`` are fixed constants, and the held-out splits (:mod:`.heldout`) draw the
residuals from training rows only.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CostModelError

__all__ = ["K", "H_OCTAVES", "FADE_OCTAVES", "ShapeResiduals", "encode", "combined"]

#: neighbours averaged per query
K = 6
#: distance offset of the inverse-distance weights, in octaves
H_OCTAVES = 0.05
#: fade length: the correction falls to 1/e at this mean distance, in octaves
FADE_OCTAVES = 1.0


def encode(df: Any, keys: Sequence[str]) -> np.ndarray:
    """Shape coordinates in octaves: ``log2(1 + v)`` of each key (rows x keys).

    >>> import pandas as pd
    >>> encode(pd.DataFrame({"m": [0, 1, 3]}), ["m"]).ravel().tolist()
    [0.0, 1.0, 2.0]
    """
    missing = [k for k in keys if k not in df]
    if missing:
        raise CostModelError(f"shape residuals need columns {list(keys)}; missing {missing}")
    v = df[list(keys)].to_numpy(dtype=float)
    if not np.isfinite(v).all() or (v < 0).any():
        raise CostModelError(f"shape keys {list(keys)} must be finite and >= 0")
    return np.log2(1.0 + v)


@dataclass(frozen=True)
class ShapeResiduals:
    """Log-residuals of a fit at measured shapes, and their interpolation (module doc)."""

    keys: tuple[str, ...]
    points: np.ndarray
    residuals: np.ndarray

    @classmethod
    def from_rows(cls, df: Any, keys: Sequence[str], predicted_s: np.ndarray) -> ShapeResiduals:
        """Residuals ``log(measured / predicted)`` of the rows of ``df`` (column ``latency_s``)."""
        meas = df["latency_s"].to_numpy(dtype=float)
        pred = np.asarray(predicted_s, dtype=float)
        if len(pred) != len(meas) or not (np.isfinite(pred).all() and (pred > 0).all()):
            raise CostModelError("shape residuals need one finite, positive prediction per measured row")
        return cls(tuple(keys), encode(df, keys), np.log(meas / pred))

    @functools.cached_property
    def _tree(self) -> Any:
        """A k-d tree of :attr:`points`, built on first use and kept with them (they never change)."""
        from scipy.spatial import cKDTree

        return cKDTree(self.points)

    def correction(self, df: Any) -> np.ndarray:
        """``f(d) rho(x)`` per row of ``df``: the log-factor to multiply the model by."""
        q = encode(df, self.keys)
        if not len(self.residuals) or not len(q):
            return np.zeros(len(q))
        k = min(K, len(self.residuals))
        d, j = self._tree.query(q, k=k)
        d, j = d.reshape(len(q), k), j.reshape(len(q), k)
        w = 1.0 / (d + H_OCTAVES)
        rho = (self.residuals[j] * w).sum(axis=1) / w.sum(axis=1)
        dbar = (d * w).sum(axis=1) / w.sum(axis=1)
        return rho * np.exp(-((dbar / FADE_OCTAVES) ** 2))


def combined(sources: Sequence[ShapeResiduals], df: Any) -> np.ndarray:
    """The mean correction of several residual sources (module doc); zero with none."""
    if not sources:
        return np.zeros(len(df))
    return np.mean([s.correction(df) for s in sources], axis=0)
