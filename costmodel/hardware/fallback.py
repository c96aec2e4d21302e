"""Roofs that stand in for a unit a device publishes no roof for, and the notes that say so.

Where no transcendental (SFU) rate is published, ``exp``/``rsqrt`` are charged to the
vector ALUs at one FLOP per call (:data:`ROOF_FALLBACK`): an optimistic bound, since a
software exp takes several vector instructions, but never the silent zero a missing roof
would give. :func:`costmodel.roofline.bound` looks every unit's peak up through
:func:`fallback_peak`; reports print :func:`roof_notes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..cost import UNITS
from ..errors import MissingRoofError

if TYPE_CHECKING:
    import sympy

    from .spec import Hardware

__all__ = ["ROOF_FALLBACK", "roof_unit", "fallback_peak", "roof_notes"]

#: a unit without a roof of its own, and the unit whose roof serves it instead
ROOF_FALLBACK: dict[str, str] = {"sfu": "vector"}


def roof_unit(hw: Hardware, unit: str) -> str | None:
    """The unit whose roofs bound ``unit``'s FLOPs on ``hw``: ``unit`` itself when the device
    has a roof for it, else its :data:`ROOF_FALLBACK` when that one has roofs, else None."""
    if hw.precisions(unit):
        return unit
    sub = ROOF_FALLBACK.get(unit)
    return sub if sub is not None and hw.precisions(sub) else None


def fallback_peak(hw: Hardware, unit: str, precision: str) -> sympy.Expr:
    """Peak FLOP/s serving ``unit`` at ``precision``: the unit's own roof, or its substitute's
    at that precision (else the substitute's fp32 roof, the precision transcendentals keep).
    :class:`MissingRoofError` when neither exists."""
    target = roof_unit(hw, unit)
    if target is None:
        raise MissingRoofError(f"device {hw.name!r} has no {unit} roof and no roof to substitute")
    if target != unit and hw.peak(target, precision) is None and hw.peak(target, "fp32") is not None:
        precision = "fp32"
    return hw.require_peak(target, precision)


def roof_notes(hw: Hardware) -> tuple[str, ...]:
    """One line per unit whose FLOPs another unit's roof bounds on ``hw``, or none does.

    >>> from costmodel.hardware import get_device
    >>> roof_notes(get_device("gb200"))[0]
    'gb200 publishes no sfu roof: its sfu FLOPs (exp, rsqrt) are charged to the vector roof, one FLOP per call'
    """
    notes = []
    for unit in UNITS:
        target = roof_unit(hw, unit)
        if target == unit or unit == "tensor":
            continue
        if target is not None:
            notes.append(
                f"{hw.name} publishes no {unit} roof: its {unit} FLOPs (exp, rsqrt) are charged to "
                f"the {target} roof, one FLOP per call"
            )
        else:
            notes.append(f"{hw.name} publishes no {unit} roof: its {unit} FLOPs take no time in the bound")
    return tuple(notes)
