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

Both efficiencies are at most 1: a kernel cannot beat its roof, so a benchmark measured
faster than its bound on the probed spec says the spec is wrong (a peak or a bandwidth probed
in a busy moment, too low) or the measurement is, never that an efficiency exceeds 1. Such a
benchmark is named in :attr:`Calibration.notes`, and a fit that would exceed 1 (``eta`` as the
mean of fractions above 1, or ``e_max`` as a plateau above every measured GEMM) is held at 1
and said there too; the calibrated spec then never raises a probed roof.
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
    #: each benchmark measured faster than its roof, and each efficiency held at 1, in words (module doc)
    notes: tuple[str, ...] = ()

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


def _beyond_roof(r: BenchRow) -> str:
    """A benchmark measured faster than its bound, said plainly: the roof or the timing is wrong."""
    if r.kind == Level.DRAM:
        got, roof, what = r.achieved_bytes_per_s, r.bytes / r.predicted_s, "bandwidth"
        unit = "GB/s"
    else:
        got, roof, what = r.achieved_flops_per_s, r.flops / r.predicted_s, f"{r.kind} peak"
        unit = "GFLOP/s"
    return (
        f"{r.name} ran at {got / 1e9:.1f} {unit}, {r.achieved_fraction:.2f}x the probed {what} "
        f"({roof / 1e9:.1f} {unit}): faster than the roof allows, so the probed {what} is too low "
        "(measured in a busy moment?) or this timing is wrong; re-probe on an idle machine or with "
        "more --repeats"
    )


def calibrate(rows: list[BenchRow]) -> Calibration:
    """Fit the two terms on microbenchmark rows (:func:`costmodel.measure.microbench.run_benchmarks`),
    each at most 1 (module doc).

    Parameters
    ----------
    rows : list of BenchRow
        Timed benchmarks against their bounds on one spec: at least one memory-bound row and one
        compute-bound GEMM row.

    Returns
    -------
    Calibration
        The efficiencies, every row's residual under them, and :attr:`Calibration.notes`.

    Raises
    ------
    CostModelError
        When the rows lack a memory-bound or a compute-bound GEMM row.
    """
    mem = [r for r in rows if r.kind == Level.DRAM]
    gemm = [r for r in rows if r.family == "gemm" and r.kind != Level.DRAM]
    if not mem or not gemm:
        raise CostModelError("calibration needs at least one memory-bound row and one compute-bound GEMM row")
    notes = [_beyond_roof(r) for r in rows if r.achieved_fraction > 1]
    eta_fit = math.exp(float(np.mean([math.log(r.achieved_fraction) for r in mem])))
    eta = min(eta_fit, 1.0)
    if eta_fit > 1:
        notes.append(
            f"memory efficiency held at 1: the memory-bound benchmarks average {eta_fit:.2f}x their "
            "bound, faster than the probed bandwidth allows"
        )
    inten = np.array([r.intensity for r in gemm])
    frac = np.array([r.achieved_fraction for r in gemm])
    best = (float("inf"), 1.0, 0.0)
    free_best = (float("inf"), 1.0)  # the fit without the ceiling, to say what was held
    grid = [0.0]
    if len(set(inten.tolist())) > 1:  # two parameters need two distinct intensities
        grid += np.minimum(np.logspace(-1, math.log10(float(inten.max())), 400), inten.max()).tolist()
    for i_half in grid:
        shape = inten / (inten + i_half)
        free = float(np.mean(np.log(frac) - np.log(shape)))
        log_e = min(free, 0.0)  # the least-squares optimum for this I_half with e_max <= 1
        err = float(np.sum((np.log(frac) - log_e - np.log(shape)) ** 2))
        if err < best[0]:
            best = (err, math.exp(log_e), float(i_half))
        free_err = float(np.sum((np.log(frac) - free - np.log(shape)) ** 2))
        if free_err < free_best[0]:
            free_best = (free_err, math.exp(free))
    _, e_max, i_half = best
    if free_best[1] > 1:
        notes.append(
            f"GEMM e_max held at 1: fitted freely it is {free_best[1]:.2f}, a ceiling above the probed "
            "peak, which no kernel can reach"
        )
    cal = Calibration(eta, e_max, i_half, notes=tuple(notes))
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
