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

from typing import Any

from .cost import as_float
from .errors import MissingRoofError
from .hardware import Hardware, get_device

__all__ = ["compare_devices", "decompose_claim"]


def compare_devices(devices: list[str | Hardware], precision: str = "bf16") -> list[dict[str, Any]]:
    """One row per device at ``precision`` (tensor roof); missing roofs are ``None``, not guessed."""
    rows = []
    for d in devices:
        hw = get_device(d)
        peak = hw.peak("tensor", precision)
        bw, cap = as_float(hw.bandwidth()), as_float(hw.capacity())
        p = as_float(peak) if peak is not None else None
        power = as_float(hw.power_w) if hw.power_w is not None else None
        rows.append(
            {
                "device": hw.name,
                "precision": precision,
                "peak_flops_per_s": p,
                "bandwidth_bytes_per_s": bw,
                "capacity_bytes": cap,
                "ridge_flop_per_byte": p / bw if p else None,
                "full_memory_reads_per_s": bw / cap,
                "power_w": power,
                "flops_per_joule": p / power if p and power else None,
                "vector_fp32_flops_per_s": as_float(hw.peak("vector", "fp32"))
                if hw.peak("vector", "fp32")
                else None,
                "sfu_per_s": as_float(hw.peak("sfu", "fp32")) if hw.peak("sfu", "fp32") else None,
            }
        )
    return rows


def decompose_claim(
    old: str | Hardware,
    old_precision: str,
    new: str | Hardware,
    new_precision: str,
    *,
    old_count: int = 1,
    new_count: int = 1,
) -> dict[str, Any]:
    """Split a peak-FLOP/s speed-up claim into format x architecture x system size."""
    o, n = get_device(old), get_device(new)
    p_old = o.require_peak("tensor", old_precision)
    p_new = n.require_peak("tensor", new_precision)
    p_new_same = n.peak("tensor", old_precision)
    if p_new_same is None:
        raise MissingRoofError(
            f"{n.name} has no {old_precision} roof: the format and architecture factors cannot be separated"
        )
    fmt = as_float(p_new / p_new_same)
    arch = as_float(p_new_same / p_old)
    size = new_count / old_count
    return {
        "claimed_speedup": fmt * arch * size,
        "format_factor": fmt,
        "architecture_factor": arch,
        "system_size_factor": size,
        "like_for_like_per_chip": arch,
        "old": f"{old_count} x {o.name} @ {old_precision}",
        "new": f"{new_count} x {n.name} @ {new_precision}",
    }
