"""An interpretable efficiency model, fitted on log-latency.

For GEMM and attention a kernel takes

.. math::

    t = t_0 + t_u \\lceil U/S \\rceil + \\left(T_c^{\\,r} + T_m^{\\,r}\\right)^{1/r},\\qquad
    T_c = \\frac{Q\\,F/P}{e_c},\\qquad
    T_m = \\frac{D/\\beta_\\text{dram}}{e_m\\, g^{[\\text{L2}]}}

* ``t0`` (seconds): fixed latency, launch and pipeline fill/drain;
* ``t_u`` (seconds): setup of one work unit on an SM, paid once per wave of
  ``U`` units over ``S`` SMs (:func:`costmodel.measured.kernels.work_waves`);
* ``e_c``: achieved fraction of the roof's peak on tile-quantised work
  (``Q``, :func:`costmodel.measured.kernels.wave_factor` over the device's SMs
  and the 128 x 128 tile, so a 133-tile GEMM on 132 SMs pays two waves);
* ``e_m``: achieved fraction of the DRAM bandwidth;
* ``r``: how sharply compute and memory overlap (``r -> oo`` is the roofline
  ``max``, ``r = 1`` no overlap at all);
* ``g``: the speed-up of a working set that fits the L2 and stays there between
  repetitions (1 for devices without a sourced L2 capacity, and to be set to 1
  when predicting cold weights in a model step).

For all-reduce (Hockney's alpha-beta form):
``t = t0 + t_hop (p - 1) + T_link / e_l`` with ``T_link`` the in-network bound.

Every parameter is dimensionless or in seconds, so fractions fitted on some
devices predict another from its datasheet alone (``P``, ``beta``, SM count).

The fit minimises the squared log error ``sum (log t_pred - log t_meas)^2``
(``scipy.optimize.least_squares``, trust-region reflective within physical
bounds); the standard errors come from the Jacobian,
``cov = s^2 (J^T J)^{-1}`` with ``s^2`` the residual variance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CostModelError
from ..hardware import Hardware
from ..results import Result
from .kernels import kernel_terms
from .validity import l2_resident

__all__ = ["Features", "Fit", "features", "fit", "predict", "PARAMS"]

#: parameter names, initial values and bounds per model kind
PARAMS: dict[str, tuple[tuple[str, float, float, float], ...]] = {
    "roofline": (
        ("t0_s", 5e-6, 1e-7, 1e-3),
        ("t_unit_s", 1e-7, 1e-10, 1e-4),
        ("e_c", 0.7, 0.02, 1.0),
        ("e_m", 0.7, 0.02, 1.0),
        ("r", 3.0, 1.0, 16.0),
        ("g_l2", 1.5, 1.0, 20.0),
    ),
    "collective": (
        ("t0_s", 5e-6, 1e-7, 1e-3),
        ("t_hop_s", 1e-6, 1e-9, 1e-4),
        ("e_l", 0.7, 0.05, 2.0),
    ),
}


def kind_of(family: str) -> str:
    return "collective" if family == "all_reduce" else "roofline"


@dataclass(frozen=True)
class Features:
    """What the model reads per row: compute and memory terms, quantisation, L2 flag."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    quant: np.ndarray
    l2: np.ndarray
    link_s: np.ndarray
    hops: np.ndarray
    waves: np.ndarray

    def take(self, idx: np.ndarray) -> Features:
        return Features(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    @classmethod
    def concat(cls, parts: list[Features]) -> Features:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls.__dataclass_fields__))


def features(family: str, df: Any, hw: Hardware) -> Features:
    """The model's inputs for every row of ``df`` on ``hw`` (bound terms from the rules)."""
    kt = kernel_terms(family, df, hw)
    hops = df["gpus"].to_numpy(dtype=float) - 1 if family == "all_reduce" else np.zeros(len(df))
    waves = kt.waves if kt.waves is not None else np.ones(len(df))
    return Features(
        kt.compute_s, kt.memory_s, kt.quant, l2_resident(kt.working_set, hw), kt.link_s, hops, waves
    )


def _model(kind: str, theta: np.ndarray, x: Features) -> np.ndarray:
    if kind == "collective":
        t0, thop, el = theta
        return t0 + thop * x.hops + x.link_s / el
    t0, tu, ec, em, r, g = theta
    tc = x.quant * x.compute_s / ec
    tm = x.memory_s / (em * np.where(x.l2, g, 1.0))
    hi = np.maximum(tc, tm)
    # (tc^r + tm^r)^(1/r) written to stay finite for large r
    lo = np.minimum(tc, tm)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return t0 + tu * x.waves + hi * (1 + ratio**r) ** (1 / r)


@dataclass(frozen=True)
class Fit(Result):
    """Fitted parameters (with standard errors) of one family/dtype group."""

    family: str
    group: str
    kind: str
    params: dict[str, float]
    stderr: dict[str, float]
    rows: int
    rms_log: float
    devices: list[str] = field(default_factory=list)
    frameworks: list[str] = field(default_factory=list)

    @property
    def theta(self) -> np.ndarray:
        return np.array([self.params[n] for n, *_ in PARAMS[self.kind]])

    def predict(self, x: Features) -> np.ndarray:
        return _model(self.kind, self.theta, x)


def fit(
    family: str,
    group: str,
    x: Features,
    measured_s: np.ndarray,
    *,
    devices: list[str] | None = None,
    frameworks: list[str] | None = None,
) -> Fit:
    """Fit the family's model to measured latencies on log scale (module doc)."""
    from scipy.optimize import least_squares

    kind = kind_of(family)
    spec = PARAMS[kind]
    y = np.log(np.asarray(measured_s, dtype=float))
    if len(y) < len(spec) + 1:
        raise CostModelError(f"{family}/{group}: {len(y)} rows cannot fit {len(spec)} parameters")
    x0 = np.array([s[1] for s in spec])
    lo = np.array([s[2] for s in spec])
    hi = np.array([s[3] for s in spec])
    if kind == "roofline" and not x.l2.any():
        hi[5] = lo[5] + 1e-9  # no L2-resident rows: g is not identified
        x0[5] = lo[5]
    # log-parametrise the seconds so their scales match the fractions'
    logs = np.array(["_s" in s[0] for s in spec])

    def unpack(z: np.ndarray) -> np.ndarray:
        return np.where(logs, np.exp(z), z)

    def resid(z: np.ndarray) -> np.ndarray:
        return np.log(_model(kind, unpack(z), x)) - y

    z0 = np.where(logs, np.log(x0), x0)
    zlo, zhi = np.where(logs, np.log(lo), lo), np.where(logs, np.log(hi), hi)
    sol = least_squares(resid, z0, bounds=(zlo, zhi), method="trf", x_scale="jac", max_nfev=400)
    theta = unpack(sol.x)
    dof = max(len(y) - len(spec), 1)
    s2 = float(sol.fun @ sol.fun) / dof
    # standard errors in the natural units (delta method through exp for the seconds)
    try:
        cov = np.linalg.pinv(sol.jac.T @ sol.jac) * s2
        se_z = np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:  # pragma: no cover
        se_z = np.full(len(spec), np.nan)
    se = np.where(logs, theta * se_z, se_z)
    names = [s[0] for s in spec]
    return Fit(
        family=family,
        group=group,
        kind=kind,
        params={n: float(v) for n, v in zip(names, theta, strict=True)},
        stderr={n: float(v) for n, v in zip(names, se, strict=True)},
        rows=len(y),
        rms_log=float(np.sqrt(np.mean(sol.fun**2))),
        devices=sorted(devices or []),
        frameworks=sorted(frameworks or []),
    )


def predict(fit_: Fit, x: Features, *, cold_l2: bool = False) -> np.ndarray:
    """Predicted seconds; ``cold_l2=True`` drops the L2-residency speed-up (weights of a model step)."""
    if cold_l2 and fit_.kind == "roofline":
        x = Features(x.compute_s, x.memory_s, x.quant, np.zeros_like(x.l2), x.link_s, x.hops, x.waves)
    return fit_.predict(x)
