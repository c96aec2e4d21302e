"""Roofs that stand in for a unit a device publishes no roof for, and the notes that say so.

:func:`roof_notes` is also the one place a report learns what to say about the device
itself: a device whose figures are preliminary (announced, not yet a datasheet's:
``Hardware.preliminary``) gets one line saying so, first, in every report that names it.

Where no transcendental (SFU) rate is published, ``exp``/``rsqrt`` are charged to the
vector ALUs at one FLOP per call (:data:`ROOF_FALLBACK`): an optimistic bound, since a
software exp takes several vector instructions, but never the silent zero a missing roof
would give. :func:`costmodel.roofline.bound` looks every unit's peak up through
:func:`fallback_peak`; reports print :func:`roof_notes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..cost import UNITS
from ..errors import MissingRoofError

if TYPE_CHECKING:
    import sympy

    from .spec import Hardware

__all__ = [
    "ROOF_FALLBACK",
    "PRECISION_FALLBACK",
    "roof_unit",
    "roof_precision",
    "fallback_peak",
    "roof_notes",
]

#: a unit without a roof of its own, and the unit whose roof serves it instead
ROOF_FALLBACK: dict[str, str] = {"sfu": "vector"}

#: a tensor precision a device may publish no rate for, and the formats whose roof, the first
#: one published, bounds it instead. A BF16 matmul runs no faster than an FP16 one (every part
#: in the catalog that publishes both gives them one rate) nor an FP8 one (H100 989 vs 1,979
#: TFLOPS, Gaudi 3 1,835 vs 1,835, Trainium3 671 vs 2,517), so the substitute is an optimistic
#: bound, never a slower one: announced parts (AMD's MI455X: FP16; NVIDIA's Rubin: FP8 and
#: FP4) publish no BF16 rate.
PRECISION_FALLBACK: dict[str, tuple[str, ...]] = {"bf16": ("fp16", "fp8", "fp4")}


def roof_unit(hw: Hardware, unit: str) -> str | None:
    """The unit whose roofs bound ``unit``'s FLOPs on ``hw``: ``unit`` itself when the device
    has a roof for it, else its :data:`ROOF_FALLBACK` when that one has roofs, else None."""
    if hw.precisions(unit):
        return unit
    sub = ROOF_FALLBACK.get(unit)
    return sub if sub is not None and hw.precisions(sub) else None


def roof_precision(hw: Hardware, unit: str, precision: str) -> str:
    """The precision whose ``unit`` roof bounds ``precision`` on ``hw``: ``precision`` itself
    when the device has that roof (or none stands in), else the first
    :data:`PRECISION_FALLBACK` format it publishes a tensor roof for."""
    if unit != "tensor" or hw.peak(unit, precision) is not None:
        return precision
    return next((p for p in PRECISION_FALLBACK.get(precision, ()) if hw.peak(unit, p) is not None), precision)


def fallback_peak(hw: Hardware, unit: str, precision: str) -> sympy.Expr:
    """Peak FLOP/s serving ``unit`` at ``precision``: the unit's own roof, or its substitute's
    at that precision (else the substitute's fp32 roof, the precision transcendentals keep);
    a tensor precision the device publishes no rate for is bounded by a narrower format's roof
    (:func:`roof_precision`). :class:`MissingRoofError` when none exists."""
    target = roof_unit(hw, unit)
    if target is None:
        raise MissingRoofError(f"device {hw.name!r} has no {unit} roof and no roof to substitute")
    if target != unit and hw.peak(target, precision) is None and hw.peak(target, "fp32") is not None:
        precision = "fp32"
    return hw.require_peak(target, roof_precision(hw, target, precision))


def roof_notes(hw: Hardware, used: Iterable[tuple[str, str]] | None = None) -> tuple[str, ...]:
    """The device's notes for a report: one line when its figures are preliminary (the source
    and date it names), one per tensor precision a narrower format's roof bounds
    (:func:`roof_precision`), then one per unit whose FLOPs another unit's roof bounds on
    ``hw``, or none does.

    Parameters
    ----------
    hw : Hardware
        The device.
    used : iterable of (unit, precision), optional
        The FLOP terms a report prices (``Cost.flop_terms``' keys, as ``costmodel op`` has them):
        only the notes about those units and tensor precisions are kept, with the device's own
        (a series, preliminary figures). None (the default) keeps every note, as a model's
        report has them.

    >>> from costmodel.hardware import get_device
    >>> roof_notes(get_device("gb200"))[0]
    'gb200 publishes no sfu roof: its sfu FLOPs (exp, rsqrt) are charged to the vector roof, one FLOP per call'
    """
    notes = (
        [f"{hw.resolved_from!r} names a series: its one catalog part, {hw.name}, is priced"]
        if hw.resolved_from
        else []
    )
    notes += [f"{hw.name} figures are preliminary: {hw.preliminary}"] if hw.preliminary else []
    keys = None if used is None else {(str(u), str(p)) for u, p in used}
    for prec in PRECISION_FALLBACK:
        sub = roof_precision(hw, "tensor", prec)
        if sub != prec and (keys is None or ("tensor", prec) in keys):
            notes.append(
                f"{hw.name} publishes no tensor {prec} rate: its {prec} matmuls are bounded by the {sub} "
                f"roof, which no {prec} matmul outruns (an optimistic bound)"
            )
    for unit in UNITS:
        target = roof_unit(hw, unit)
        if target == unit or unit == "tensor" or (keys is not None and unit not in {u for u, _ in keys}):
            continue
        if target is not None:
            notes.append(
                f"{hw.name} publishes no {unit} roof: its {unit} FLOPs (exp, rsqrt) are charged to "
                f"the {target} roof, one FLOP per call"
            )
        else:
            notes.append(f"{hw.name} publishes no {unit} roof: its {unit} FLOPs take no time in the bound")
    return tuple(notes)
