"""Calibration: interpretable efficiencies fitted from microbenchmarks.

Two terms, each with a meaning a performance engineer can check:

* ``memory_efficiency``: the achieved fraction of the probed bandwidth by
  memory-bound kernels (geometric mean of ``bound / measured``);
* GEMM efficiency as a function of intensity,
  ``e(I) = e_max * I / (I + I_half)``: small, low-intensity GEMMs reach less of
  the peak than large ones. ``e_max`` and ``I_half`` are fitted by least
  squares on ``log(achieved fraction)``, with ``I_half`` held within the measured
  intensities (``0 <= I_half <= max I``): beyond that the curve is a straight line
  through the data and ``e_max`` is a plateau no benchmark reached (two noisy points
  would otherwise fit ``e_max`` of 40). With this bound the largest GEMM measured is
  at least half-way to ``e_max``. With a single GEMM intensity, ``I_half = 0``.

Every op's residual after calibration (``calibrated prediction / measured - 1``)
is reported; the calibrated spec scales the DRAM roof by
``memory_efficiency`` and the matmul roofs by ``e_max``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import CostModelError
from ..hardware import Hardware
from ..keys import Level
from ..results import Result
from .microbench import BenchRow

__all__ = ["Calibration", "Residual", "calibrate"]


@dataclasses.dataclass(frozen=True)
class Residual(Result):
    """A benchmark's calibrated prediction against its measurement: ``calibrated / measured - 1``."""

    name: str
    calibrated_s: float
    measured_s: float
    residual: float


@dataclasses.dataclass(frozen=True)
class Calibration(Result):
    """Two interpretable terms: a memory efficiency ``eta`` (achieved / roof bandwidth) and a GEMM
    efficiency ``e(I) = e_max I / (I + I_half)``; the residual of every benchmark under them."""

    memory_efficiency: float
    gemm_e_max: float
    gemm_i_half: float
    residuals: tuple[Residual, ...] = ()

    def gemm_efficiency(self, intensity: float) -> float:
        return self.gemm_e_max * intensity / (intensity + self.gemm_i_half)

    def apply(self, hw: Hardware) -> Hardware:
        """A copy of ``hw`` with the DRAM roof and the tensor roofs scaled by the fitted efficiencies."""
        roofs = tuple(
            dataclasses.replace(
                r,
                peak_flops_per_s=r.peak_flops_per_s * self.gemm_e_max,
                source=r.source + f"; calibrated x{self.gemm_e_max:.3f}",
            )
            if r.unit == "tensor"
            else r
            for r in hw.roofs
        )
        memory = tuple(
            dataclasses.replace(
                m,
                bandwidth_bytes_per_s=m.bandwidth_bytes_per_s * self.memory_efficiency,
                source=m.source + f"; calibrated x{self.memory_efficiency:.3f}",
            )
            if m.name == "dram" and m.bandwidth_bytes_per_s is not None
            else m
            for m in hw.memory
        )
        return hw.replace(name=hw.name + "-calibrated", roofs=roofs, memory=memory)


def calibrate(rows: list[BenchRow]) -> Calibration:
    """Fit the two terms on microbenchmark rows (:func:`costmodel.measure.microbench.run_benchmarks`)."""
    mem = [r for r in rows if r.kind == Level.DRAM]
    gemm = [r for r in rows if r.family == "gemm" and r.kind != Level.DRAM]
    if not mem or not gemm:
        raise CostModelError("calibration needs at least one memory-bound row and one compute-bound GEMM row")
    eta = math.exp(float(np.mean([math.log(r.achieved_fraction) for r in mem])))
    inten = np.array([r.intensity for r in gemm])
    frac = np.array([r.achieved_fraction for r in gemm])
    best = (float("inf"), 1.0, 0.0)
    grid = [0.0]
    if len(set(inten.tolist())) > 1:  # two parameters need two distinct intensities
        grid += np.minimum(np.logspace(-1, math.log10(float(inten.max())), 400), inten.max()).tolist()
    for i_half in grid:
        shape = inten / (inten + i_half)
        log_e = float(np.mean(np.log(frac) - np.log(shape)))
        err = float(np.sum((np.log(frac) - log_e - np.log(shape)) ** 2))
        if err < best[0]:
            best = (err, math.exp(log_e), float(i_half))
    _, e_max, i_half = best
    cal = Calibration(eta, e_max, i_half)
    residuals = []
    for r in rows:
        if r.kind == Level.DRAM:
            pred = r.predicted_s / eta
        elif r.family == "gemm":
            pred = r.predicted_s / cal.gemm_efficiency(r.intensity)
        else:  # attention and others: the slower of the two calibrated terms
            pred = r.predicted_s / min(eta, e_max)
        residuals.append(Residual(r.name, pred, r.measured_s, pred / r.measured_s - 1))
    return dataclasses.replace(cal, residuals=tuple(residuals))
