"""An interpretable efficiency model, fitted on log-latency.

For GEMM and attention a kernel takes

.. math::

    t = t_0 + t_u \\lceil U/S \\rceil + t_q \\lceil U_q/S \\rceil + T_p
      + \\left(T_c^{\\,r} + T_m^{\\,r}\\right)^{1/r},\\qquad
    T_c = \\frac{Q\\,F/P}{e_c},\\qquad
    T_m = \\frac{D/\\beta_\\text{dram}}{e_m\\, g^{[\\text{L2}]}}

* ``t0`` (seconds): fixed latency, launch and pipeline fill/drain;
* ``t_u`` (seconds): setup of one work unit on an SM, paid once per wave of
  ``U`` units over ``S`` SMs (:func:`costmodel.measured.kernels.work_waves`);
* ``t_unit_q`` (seconds): the same for a decode attention kernel that runs one
  unit per (sequence, query head) instead of per KV head, ``U_q = B H``
  (:func:`costmodel.measured.quantisation.query_head_waves`); the fit finds
  which design a kernel is (the other term goes to zero); zero elsewhere;
* ``e_c``: achieved fraction of the roof's peak on tile-quantised work
  (``Q``, :func:`costmodel.measured.kernels.wave_factor` over the device's SMs
  and the best of the tuned tile shapes and split-K factors, so a 133-tile GEMM
  on 132 SMs pays two waves unless another tile fits better);
* ``e_m``: achieved fraction of the DRAM bandwidth;
* ``r``: how sharply compute and memory overlap (``r -> oo`` is the roofline
  ``max``, ``r = 1`` no overlap at all);
* ``T_p = D_p/(e_p beta)``, added: a separate pass before the kernel (the
  activation quantisation of an fp8/NVFP4 linear layer,
  :func:`costmodel.measured.kernels.prologue_cost`) at its own achieved
  bandwidth fraction ``e_p``; zero elsewhere;
* ``g``: the speed-up of a working set that fits the L2 and stays there between
  repetitions (1 for devices without a sourced L2 capacity, and to be set to 1
  when predicting cold weights in a model step).

For all-reduce, Hockney's alpha-beta form for two algorithms, of which the
library's tuner runs the faster (NCCL and the frameworks' custom kernels use
a low-latency one-shot or LL protocol for small messages and a bandwidth-optimal
ring, two-shot or NVLS algorithm for large ones):

.. math::

    t = \\min\\Big(t_0 + t_\\text{hop}(p-1) + \\frac{(p-1)\\,n b}{e_l\\,\\beta},\\;
    t_0^\\text{big} + t_\\text{hop}^\\text{big}(p-1) + \\frac{T_\\text{ring}}{e_\\text{big}}\\Big),
    \\qquad T_\\text{ring} = \\frac{2(p-1)}{p}\\frac{n b}{\\beta}

The low-latency branch is a one-shot: every GPU reads each of its ``p - 1``
peers' whole vectors at once (vLLM's and SGLang's custom all-reduce, TensorRT-LLM's
one-shot kernel), so its bytes grow with ``p - 1`` and its hop latency may be
near zero (the reads overlap); NCCL's LL ring pays ``t_hop`` per step. The big
branch is the ring (or two-shot) traffic in NCCL's bus-bandwidth convention, so
``e_big`` compares across ``p``; an in-switch (NVLS) reduction shows as ``e > 1``.

Every parameter is dimensionless or in seconds, so fractions fitted on some
devices predict another from its datasheet alone (``P``, ``beta``, SM count).

The fit minimises the squared log error ``sum (log t_pred - log t_meas)^2``
(``scipy.optimize.least_squares``, trust-region reflective within physical
bounds); the standard errors come from the Jacobian,
``cov = s^2 (J^T J)^{-1}`` with ``s^2`` the residual variance.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CostModelError
from ..hardware import Hardware
from ..results import Result
from .kernels import kernel_terms
from .quantisation import query_head_waves
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
        ("e_p", 0.5, 0.02, 1.0),
        ("t_unit_q_s", 1e-7, 1e-10, 1e-4),
    ),
    "collective": (
        ("t0_s", 5e-6, 1e-7, 1e-3),
        ("t_hop_s", 1e-6, 1e-9, 1e-4),
        ("e_l", 0.5, 0.05, 2.0),
        ("t0_big_s", 3e-5, 1e-7, 1e-2),
        ("t_hop_big_s", 1e-6, 1e-9, 1e-4),
        ("e_big", 0.9, 0.05, 2.0),
    ),
}


#: rows fitted at most (a seeded random subset beyond; see :func:`fit`)
MAX_ROWS = 20_000


def kind_of(family: str) -> str:
    return "collective" if family == "all_reduce" else "roofline"


@dataclass(frozen=True)
class Features:
    """What the model reads per row: compute and memory terms, quantisation, L2 flag.

    ``bound_s`` is the row's plain roofline bound (DRAM, no L2 model), for comparison.
    """

    compute_s: np.ndarray
    memory_s: np.ndarray
    quant: np.ndarray
    l2: np.ndarray
    link_s: np.ndarray
    hops: np.ndarray
    waves: np.ndarray
    prologue_s: np.ndarray
    ring_s: np.ndarray
    bound_s: np.ndarray
    query_waves: np.ndarray

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
    pro = kt.prologue_s if kt.prologue_s is not None else np.zeros(len(df))
    ring = kt.ring_s if kt.ring_s is not None else np.zeros(len(df))
    mem = kt.model_memory_s if kt.model_memory_s is not None else kt.memory_s
    bound = np.maximum.reduce([kt.compute_s, kt.memory_s, kt.link_s])
    return Features(
        kt.compute_s,
        mem,
        kt.quant,
        l2_resident(kt.working_set, hw),
        kt.link_s,
        hops,
        waves,
        pro,
        ring,
        bound,
        query_head_waves(family, df, hw),
    )


def _model(kind: str, theta: np.ndarray, x: Features) -> np.ndarray:
    if kind == "collective":
        t0, thop, el, t0b, thopb, eb = theta
        # one-shot bytes (p-1) n b = T_ring p/2 (module doc)
        oneshot = x.ring_s * (x.hops + 1) / 2
        return np.minimum(t0 + thop * x.hops + oneshot / el, t0b + thopb * x.hops + x.ring_s / eb)
    t0, tu, ec, em, r, g, ep, tq = theta
    tc = x.quant * x.compute_s / ec
    tm = x.memory_s / (em * np.where(x.l2, g, 1.0))
    hi = np.maximum(tc, tm)
    # (tc^r + tm^r)^(1/r) written to stay finite for large r
    lo = np.minimum(tc, tm)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return t0 + tu * x.waves + tq * x.query_waves + x.prologue_s / ep + hi * (1 + ratio**r) ** (1 / r)


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
    max_rows: int = MAX_ROWS,
) -> Fit:
    """Fit the family's model to measured latencies on log scale (module doc).

    Beyond ``max_rows`` rows a seeded random subset of that size is fitted: a
    handful of parameters is pinned long before, and the fit stays fast.
    """
    from scipy.optimize import least_squares

    kind = kind_of(family)
    spec = PARAMS[kind]
    measured_s = np.asarray(measured_s, dtype=float)
    if len(measured_s) > max_rows:
        keep = np.sort(np.random.default_rng(0).choice(len(measured_s), max_rows, replace=False))
        x, measured_s = x.take(keep), measured_s[keep]
    y = np.log(measured_s)
    if len(y) < len(spec) + 1:
        raise CostModelError(f"{family}/{group}: {len(y)} rows cannot fit {len(spec)} parameters")
    x0 = np.array([s[1] for s in spec])
    lo = np.array([s[2] for s in spec])
    hi = np.array([s[3] for s in spec])
    if kind == "roofline" and not x.l2.any():
        hi[5] = lo[5] + 1e-9  # no L2-resident rows: g is not identified
        x0[5] = lo[5]
    if kind == "roofline" and not (x.prologue_s > 0).any():
        lo[6], hi[6], x0[6] = 1.0 - 1e-9, 1.0, 1.0  # no prologue pass: e_p is not identified
    if kind == "roofline" and not x.query_waves.any():
        hi[7] = x0[7] = lo[7] * (1 + 1e-9)  # no per-query-head units: t_unit_q is not identified
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
        x = dataclasses.replace(x, l2=np.zeros_like(x.l2))
    return fit_.predict(x)
