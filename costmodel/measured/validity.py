"""Bound validity: is every measured latency at or above our lower bound?

A kernel measured faster than its roofline bound means our FLOP or byte
counts, our roofs or our memory model are wrong for it. The bound is
:func:`costmodel.roofline.bound` on the rule's cost (see
:mod:`costmodel.measured.kernels`), with one memory-model refinement:

**L2 residency.** The corpus times each shape by repeating the same kernel on
the same buffers, so a working set (bytes read + written) that fits in the
device's L2 stays there between repetitions and never touches DRAM. For such
a row the memory term is ``bytes / beta_L2`` when the catalog has a sourced L2
bandwidth, and absent (compute and links only) when it has only the L2
capacity. A device with no sourced L2 capacity keeps the DRAM term, and any
row that falls below it is reported with its working set, so the reader can
see whether L2 explains it.

A row *violates* when ``measured < bound * (1 - tol)`` (``tol = 3 %``).
Every remaining violation gets a reason computed from its numbers
(:func:`explain`): a measurement whose implied DRAM bandwidth (bytes /
latency) exceeds the datasheet peak cannot have moved the bytes the shape
needs, so the benchmark, not the count, differs from the shape; a working set
that would fit an L2 whose capacity no source gives is named as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..hardware import Hardware, get_device
from ..results import Result
from .corpus import load
from .kernels import KernelTerms, kernel_terms

__all__ = ["Bounds", "Violations", "explain", "l2_resident", "lower_bounds", "violations"]

TOLERANCE = 0.03


def _l2(hw: Hardware) -> tuple[float | None, float | None]:
    """(capacity, bandwidth) of the device's L2, each None where unsourced."""
    for lv in hw.memory:
        if lv.name == "l2":
            cap = float(lv.capacity_bytes) if lv.capacity_bytes is not None else None
            bw = float(lv.bandwidth_bytes_per_s) if lv.bandwidth_bytes_per_s is not None else None
            return cap, bw
    return None, None


def l2_resident(working_set: np.ndarray, hw: Hardware) -> np.ndarray:
    """Rows whose working set fits in the device's (sourced) L2 capacity."""
    cap, _ = _l2(hw)
    if cap is None:
        return np.zeros(len(working_set), dtype=bool)
    return np.asarray(working_set) <= cap


@dataclass(frozen=True)
class Bounds:
    """Lower bounds (seconds) of measured rows, with the level each is charged at."""

    seconds: np.ndarray
    l2: np.ndarray
    terms: KernelTerms


def lower_bounds(family: str, df: Any, hw: Hardware) -> Bounds:
    """Each row's lower bound with the L2 refinement (module doc)."""
    kt = kernel_terms(family, df, hw)
    in_l2 = l2_resident(kt.working_set, hw)
    _, l2_bw = _l2(hw)
    mem = kt.memory_s.copy()
    if in_l2.any():
        if l2_bw is None:
            mem[in_l2] = 0.0
        else:
            mem[in_l2] = kt.working_set[in_l2] / l2_bw
    parts = [kt.compute_s, mem, kt.link_s]
    return Bounds(np.maximum.reduce(parts), in_l2, kt)


@dataclass(frozen=True)
class Violations(Result):
    """Rows measured below the bound, per family and device."""

    family: str
    device: str
    rows: int
    below_dram_only: int
    below: int
    worst_ratio: float
    median_ratio: float
    examples: list[dict[str, Any]] = field(default_factory=list)
    unbounded: list[str] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)

    @property
    def unexplained(self) -> int:
        return self.reasons.get(UNEXPLAINED, 0)


UNEXPLAINED = "unexplained"
OVER_PEAK_BW = (
    "implied DRAM bandwidth above the datasheet peak: the run moved fewer bytes than the shape needs"
)
NO_L2_SOURCE = (
    "working set fits the largest sourced L2 in the catalog, but this device's L2 capacity is unsourced"
)


def _largest_sourced_l2() -> float:
    from ..hardware import catalog

    caps = [c for c in (_l2(hw)[0] for hw in catalog().values()) if c is not None]
    return max(caps, default=0.0)


def explain(bounds: Bounds, measured: np.ndarray, hw: Hardware, bad: np.ndarray) -> list[str]:
    """A reason for each violating row (module doc); ``unexplained`` where none applies."""
    bw = float(hw.bandwidth("dram"))
    cap, _ = _l2(hw)
    largest = _largest_sourced_l2()
    kt = bounds.terms
    out = []
    for i in np.flatnonzero(bad):
        ws, t = kt.working_set[i], measured[i]
        if cap is None and ws <= largest:
            out.append(NO_L2_SOURCE)
        elif not bounds.l2[i] and kt.memory_s[i] >= kt.compute_s[i] and ws / t > bw:
            out.append(OVER_PEAK_BW)
        else:
            out.append(UNEXPLAINED)
    return out


def violations(family: str, device: str, *, tol: float = TOLERANCE, examples: int = 5) -> Violations:
    """Count measured rows below the bound on one device, before and after the L2 model.

    ``below_dram_only`` counts violations of the plain DRAM roofline (every
    byte from DRAM), ``below`` those left with the L2 model; ``worst_ratio`` is
    the smallest ``measured / bound`` after it, ``examples`` the worst rows.
    """
    df = load(family, devices=[device])
    hw = get_device(device)
    b = lower_bounds(family, df, hw)
    t = df["latency_s"].to_numpy()
    plain = np.maximum.reduce([b.terms.compute_s, b.terms.memory_s, b.terms.link_s])
    ratio = t / b.seconds
    bad = ratio < 1 - tol
    reasons: dict[str, int] = {}
    for r in explain(b, t, hw, bad):
        reasons[r] = reasons.get(r, 0) + 1
    order = np.argsort(ratio)[: examples if bad.any() else 0]
    ex = []
    for i in order:
        if not bad[i]:
            break
        row = {k: (v.item() if hasattr(v, "item") else v) for k, v in df.iloc[int(i)].items()}
        row.update(
            bound_s=float(b.seconds[i]),
            ratio=float(ratio[i]),
            working_set_bytes=float(b.terms.working_set[i]),
            l2_resident=bool(b.l2[i]),
        )
        ex.append(row)
    return Violations(
        family=family,
        device=device,
        rows=len(df),
        below_dram_only=int((t / plain < 1 - tol).sum()),
        below=int(bad.sum()),
        worst_ratio=float(ratio.min()),
        median_ratio=float(np.median(ratio)),
        examples=ex,
        unbounded=list(b.terms.unbounded),
        reasons=reasons,
    )
