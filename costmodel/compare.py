"""Compare devices honestly: same precision, dense roofs, and claims decomposed.

:func:`compare_devices` lines devices up per roof at one precision (dense
only) with their ridge points, bandwidth, capacity, full-memory reads per
second and power. :func:`decompose_claim` splits a vendor speed-up into

.. math::

    \\frac{n_\\text{new} P_\\text{new}(f_\\text{new})}{n_\\text{old} P_\\text{old}(f_\\text{old})}
    = \\underbrace{\\frac{P_\\text{new}(f_\\text{new})}{P_\\text{new}(f_\\text{old})}}_{\\text{format}}
      \\times \\underbrace{\\frac{P_\\text{new}(f_\\text{old})}{P_\\text{old}(f_\\text{old})}}_{\\text{architecture}}
      \\times \\underbrace{\\frac{n_\\text{new}}{n_\\text{old}}}_{\\text{system size}}

so "Blackwell Ultra FP4 vs Hopper FP8, rack vs node" shows how much is the
new 4-bit format and the larger system rather than the chip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cost import as_float
from .errors import MissingRoofError
from .hardware import Hardware, get_device
from .keys import Unit
from .results import Result

__all__ = ["compare_devices", "decompose_claim", "DeviceRow", "ClaimDecomposition"]


@dataclass(frozen=True)
class DeviceRow(Result):
    """One device at one precision (tensor roof); a missing roof is ``None``, never guessed."""

    device: str
    precision: str
    peak_flops_per_s: float | None
    bandwidth_bytes_per_s: float
    capacity_bytes: float
    ridge_flop_per_byte: float | None  #: peak / DRAM bandwidth
    full_memory_reads_per_s: float  #: bandwidth / capacity
    power_w: float | None
    flops_per_joule: float | None  #: peak / TDP
    vector_fp32_flops_per_s: float | None
    sfu_per_s: float | None


def _opt(e: Any) -> float | None:
    return as_float(e) if e is not None else None


def compare_devices(devices: list[str | Hardware], precision: str = "bf16") -> list[DeviceRow]:
    """One row per device at ``precision`` (tensor roof); missing roofs are ``None``, not guessed.
    A precision no device of the catalog or of ``devices`` has a tensor roof for (``int3``, a
    typo) is refused naming those that exist, where it once printed a table of dashes.

    Parameters
    ----------
    devices : list of str or Hardware
        Catalog names, aliases or device specs.
    precision : str
        A tensor roof's precision (``bf16``, ``fp8``, ``fp4`` ...) or a dtype computing on it, in
        any case (``FP8``, ``fp8_e4m3``: :func:`costmodel.dtypes.precision_of`).

    Returns
    -------
    list of DeviceRow
    """
    from .dtypes import precision_of
    from .errors import CostModelError
    from .hardware.catalog import device_names, distinct_devices

    hws = distinct_devices(devices)  # an alias is its device: the same row twice is refused
    tensor = [
        r.precision
        for hw in [*hws, *(get_device(n) for n in device_names())]
        for r in hw.roofs
        if r.unit == "tensor"
    ]
    wildcard = any(
        r.precision == "*" and r.unit == "tensor" for hw in hws for r in hw.roofs
    )  # serves any precision
    known = set(tensor) - {"*"}
    given, precision = precision, precision_of(precision)  # FP8, fp8_e4m3: the fp8 roof, as --dtype
    if precision not in known and not wildcard:
        raise CostModelError(
            f"--precision {str(given)[:40]!r} is no tensor roof's precision; the devices' are: "
            + ", ".join(sorted(known))
        )
    rows = []
    for hw in hws:
        p = _opt(hw.peak(Unit.TENSOR, precision))
        bw, cap = as_float(hw.bandwidth()), as_float(hw.memory_bytes())
        power = _opt(hw.power_w)
        rows.append(
            DeviceRow(
                device=hw.name,
                precision=precision,
                peak_flops_per_s=p,
                bandwidth_bytes_per_s=bw,
                capacity_bytes=cap,
                ridge_flop_per_byte=p / bw if p else None,
                full_memory_reads_per_s=bw / cap,
                power_w=power,
                flops_per_joule=p / power if p and power else None,
                vector_fp32_flops_per_s=_opt(hw.peak(Unit.VECTOR, "fp32")),
                sfu_per_s=_opt(hw.peak(Unit.SFU, "fp32")),
            )
        )
    return rows


@dataclass(frozen=True)
class ClaimDecomposition(Result):
    """A peak speed-up claim as ``format x architecture x system size`` (each a ratio of peaks)."""

    claimed_speedup: float
    format_factor: float  #: new device, new precision over its own old precision
    architecture_factor: float  #: same precision, new chip over old chip
    system_size_factor: float  #: chips in the new system over chips in the old
    old: str
    new: str

    @property
    def like_for_like_per_chip(self) -> float:
        """The part of the claim a buyer of one chip at one precision sees."""
        return self.architecture_factor

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "like_for_like_per_chip": self.like_for_like_per_chip}


def decompose_claim(
    old: str | Hardware,
    old_precision: str,
    new: str | Hardware,
    new_precision: str,
    *,
    old_count: int = 1,
    new_count: int = 1,
) -> ClaimDecomposition:
    """Split a peak-FLOP/s speed-up claim into format x architecture x system size."""
    o, n = get_device(old), get_device(new)
    p_old = o.require_peak(Unit.TENSOR, old_precision)
    p_new = n.require_peak(Unit.TENSOR, new_precision)
    p_new_same = n.peak(Unit.TENSOR, old_precision)
    if p_new_same is None:
        raise MissingRoofError(
            f"{n.name} has no {old_precision} roof: the format and architecture factors cannot be separated"
        )
    fmt = as_float(p_new / p_new_same)
    arch = as_float(p_new_same / p_old)
    size = new_count / old_count
    return ClaimDecomposition(
        claimed_speedup=fmt * arch * size,
        format_factor=fmt,
        architecture_factor=arch,
        system_size_factor=size,
        old=f"{old_count} x {o.name} @ {old_precision}",
        new=f"{new_count} x {n.name} @ {new_precision}",
    )
