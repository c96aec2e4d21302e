"""Hardware specs with several roofs.

A :class:`Hardware` is data: dense peak FLOP/s per (unit, precision), a
bandwidth and capacity per memory level, links (bandwidth per direction and
latency), power, and two execution parameters that are explicit rather than
buried in code:

* ``launch_overhead_s`` (default ``0``): fixed time added per kernel launch.
  The default gives the pure roofline; set it from a measurement (a few
  microseconds on current GPUs without CUDA graphs) to model small kernels.
* ``overlap`` (default ``1``): how far compute, memory and link time overlap.
  ``1`` is the roofline lower bound ``max(terms)``, ``0`` the no-overlap
  upper bound ``sum(terms)``; in between ``T = overlap*max + (1-overlap)*sum``.

Values are sympy expressions: numbers for a real device or symbols (``P``,
``beta``) to keep derivations abstract. Units are in the field names and
SI inside: FLOP/s, bytes/s (decimal, 1 GB/s = 1e9), bytes, seconds, watts.
Sparse ("with sparsity") peaks are kept apart in ``sparse_roofs`` and never
used as dense. A device whose figures are announced rather than a datasheet's
names their source and date in ``preliminary``; reports print it once.
"""

from __future__ import annotations

import contextvars
import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sympy

from ..cost import UNITS, as_float
from ..dtypes import ROOF_PRECISIONS
from ..errors import HardwareSpecError, MissingRoofError
from ..expr import to_expr
from ..keys import Level, LinkName, memory_kind
from ..symbols import quantity

__all__ = [
    "Roof",
    "MemoryLevel",
    "Link",
    "Hardware",
    "WILDCARD",
    "RANGES",
    "MAX_COUNT",
    "MEMORY_LEVELS",
    "LINK_NAMES",
    "memory_kind",
]

#: Precision key of a roof that serves every precision (symbolic specs).
WILDCARD = "*"


#: The physical range of each kind of numeric field (low, high, unit): a value outside it is
#: refused naming the field and the range. A rate below 1 per second (or a subnormal, which
#: prints as 0) makes derived times overflow a float; one above 1e21 per second (a zetta-FLOP/s
#: or zetta-byte/s device, a million times any catalog part) and a capacity above 1e18 B (an
#: exabyte) are no device; a latency or launch overhead is 0 or a picosecond to 10 s; power and
#: price span a milliwatt (or a millionth of a dollar an hour) to 1e7 W (or $1e6 an hour).
#: Symbolic values (a bare name such as ``P``) are not checked: they have no value yet.
RANGES: dict[str, tuple[float, float, str]] = {
    "peak_flops_per_s": (1.0, 1e21, "FLOP/s"),
    "bandwidth_bytes_per_s": (1.0, 1e21, "B/s"),
    "capacity_bytes": (1.0, 1e18, "B"),
    "reported_memory_bytes": (1.0, 1e18, "B"),
    "latency_s": (1e-12, 10.0, "s"),
    "launch_overhead_s": (1e-12, 10.0, "s"),
    "power_w": (1e-3, 1e7, "W"),
    "price_usd_per_hour": (1e-6, 1e6, "USD per hour"),
    "overlap": (0.0, 1.0, ""),
}


#: the most devices a link domain joins, and the most SMs (compute units) a device has: ten
#: million, past any machine built (a GB300 NVL72 domain joins 72, a TPU pod 9,216; a wafer-scale
#: part has under a million cores); a count beyond it prints as a number of hundreds of digits
MAX_COUNT = 10**7


def _count(value: object, field_name: str, low: int) -> None:
    """Refuse a count (an integer) outside ``[low, MAX_COUNT]``, naming the field and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        shown = f"{value!r:.24}" + ("..." if len(repr(value)) > 24 else "")
        raise HardwareSpecError(f"{field_name} must be an integer in [{low}, {MAX_COUNT}], got {shown}")


#: the smallest normal double: a non-zero value below it is subnormal (``5e-324``), no measurement
_TINY = sys.float_info.min


def _allowed(kind: str, allow_zero: bool) -> str:
    """The range of a field kind as the errors say it: ``in [1, 1e+21] B/s``."""
    low, high, unit = RANGES[kind]
    zero = "0 or " if allow_zero and low > 0 else ""
    return f"{zero}in [{low:g}, {high:g}] {unit}".rstrip()


#: True while :meth:`Hardware.scaled` builds a what-if copy: its values are a checked device's
#: times the factors asked (a 2x headroom of a 6e20 FLOP/s device is 1.2e21), never a user's input,
#: so the ranges of :data:`RANGES` (which bound what a file or a caller gives) are not applied
_DERIVED: contextvars.ContextVar[bool] = contextvars.ContextVar("hardware_derived", default=False)


def _positive(value: object, field_name: str, kind: str, *, allow_zero: bool = False) -> sympy.Expr:
    """``value`` as an expression: a positive (or, with ``allow_zero``, non-negative) number in
    the physical range of its field kind (``kind``, a key of :data:`RANGES`), never subnormal,
    or an expression in symbols (checked when a number is substituted, not here)."""
    try:
        expr = to_expr(value, field=field_name)
    except Exception as exc:  # ExpressionSyntaxError or type errors: say which field
        text = str(exc) if str(exc).startswith(field_name) else f"{field_name}: {exc}"
        raise HardwareSpecError(f"{text} (allowed: {_allowed(kind, allow_zero)})") from None
    if expr.is_number:
        if expr.is_real is not True or expr.is_negative or (expr == 0 and not allow_zero):
            what = "non-negative" if allow_zero else "positive"
            raise HardwareSpecError(f"{field_name} must be a {what} number, got {expr}")
        low, high, _ = RANGES[kind]
        if (
            expr != 0
            and not _DERIVED.get()
            and not (max(sympy.Float(low), sympy.Float(_TINY)) <= expr <= sympy.Float(high))
        ):
            given = str(value) if isinstance(value, int | float | str) else ""
            shown = given if 0 < len(given) <= 24 else str(sympy.N(expr, 4))
            tiny = " (a subnormal: no physical value)" if expr < _TINY else ""
            raise HardwareSpecError(f"{field_name} must be {_allowed(kind, allow_zero)}, got {shown}{tiny}")
    return expr


#: the memory levels a cost charges bytes to; a level named otherwise would never be read
MEMORY_LEVELS: tuple[str, ...] = tuple(Level)
#: the links: the two a collective is priced on, and ``host``, the device's link to its CPU
#: (PCIe), which ``hw show`` prints and no cost reads; a link named otherwise would never be read
LINK_NAMES: tuple[str, ...] = (*LinkName, "host")


@dataclass(frozen=True, slots=True)
class Roof:
    """Peak FLOP/s of one unit at one precision."""

    unit: str
    precision: str
    peak_flops_per_s: sympy.Expr
    source: str = ""
    dense: bool = True

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise HardwareSpecError(
                f"roof unit {str(self.unit)[:40]!r} not allowed; allowed: {', '.join(str(u) for u in UNITS)}"
            )
        if not isinstance(self.precision, str) or self.precision not in ROOF_PRECISIONS:
            raise HardwareSpecError(
                f"roof {self.unit}/{str(self.precision)[:40]!r}: precision is not one the engine knows; "
                f"known: {', '.join(sorted(ROOF_PRECISIONS))}"
            )
        object.__setattr__(
            self,
            "peak_flops_per_s",
            _positive(
                self.peak_flops_per_s,
                f"roof {self.unit}/{self.precision} peak_flops_per_s",
                "peak_flops_per_s",
            ),
        )


@dataclass(frozen=True, slots=True)
class MemoryLevel:
    """A memory level: bandwidth (bytes/s) and capacity (bytes), either optional.

    ``per`` says what the capacity counts: the whole ``device`` or one ``sm``
    (shared memory per streaming multiprocessor / compute unit).
    """

    name: str
    bandwidth_bytes_per_s: sympy.Expr | None = None
    capacity_bytes: sympy.Expr | None = None
    source: str = ""
    per: str = "device"

    def __post_init__(self) -> None:
        if self.name not in MEMORY_LEVELS:
            raise HardwareSpecError(
                f"memory level {str(self.name)[:40]!r} is not one the engine reads; known: {', '.join(MEMORY_LEVELS)}"
            )
        if self.per not in ("device", "sm"):
            raise HardwareSpecError(f"memory {self.name}: per must be 'device' or 'sm', got {self.per!r}")
        if self.bandwidth_bytes_per_s is not None:
            object.__setattr__(
                self,
                "bandwidth_bytes_per_s",
                _positive(
                    self.bandwidth_bytes_per_s,
                    f"memory {self.name} bandwidth_bytes_per_s",
                    "bandwidth_bytes_per_s",
                ),
            )
        if self.capacity_bytes is not None:
            object.__setattr__(
                self,
                "capacity_bytes",
                _positive(self.capacity_bytes, f"memory {self.name} capacity_bytes", "capacity_bytes"),
            )


@dataclass(frozen=True, slots=True)
class Link:
    """A device's link class: bandwidth per direction (bytes/s) and latency (s)."""

    name: str
    bandwidth_bytes_per_s: sympy.Expr
    latency_s: sympy.Expr | None = None
    source: str = ""
    #: devices one such link domain joins at this bandwidth (an NVL72 rack: 72; None: not stated)
    domain: int | None = None

    def __post_init__(self) -> None:
        if self.name not in LINK_NAMES:
            raise HardwareSpecError(
                f"link {str(self.name)[:40]!r} is not one the engine reads; known: {', '.join(LINK_NAMES)}"
            )
        d = self.domain
        if d is not None:
            _count(d, f"link {self.name} domain", 2)
        object.__setattr__(
            self,
            "bandwidth_bytes_per_s",
            _positive(
                self.bandwidth_bytes_per_s, f"link {self.name} bandwidth_bytes_per_s", "bandwidth_bytes_per_s"
            ),
        )
        if self.latency_s is not None:
            object.__setattr__(
                self,
                "latency_s",
                _positive(self.latency_s, f"link {self.name} latency_s", "latency_s", allow_zero=True),
            )


@dataclass(frozen=True, slots=True)
class Hardware:
    """A device with several roofs (see module doc)."""

    name: str
    roofs: tuple[Roof, ...]
    memory: tuple[MemoryLevel, ...]
    links: tuple[Link, ...] = ()
    description: str = ""
    vendor: str = ""
    #: the vendor's name of the device's architecture generation (``Hopper``, ``CDNA 3``; ``""``:
    #: not given), and the source naming it; :attr:`generation` keys the leave-one-generation-out
    #: held-out errors (:mod:`costmodel.measured.heldout`)
    architecture: str = ""
    architecture_source: str = ""
    sparse_roofs: tuple[Roof, ...] = ()
    power_w: sympy.Expr | None = None
    power_source: str = ""
    #: an hourly price per device (USD per device-hour: a cloud on-demand rate or a list price),
    #: None when no sourced price is known
    price_usd_per_hour: sympy.Expr | None = None
    price_source: str = ""
    #: the memory the driver reports for the device (bytes; nvidia-smi's ``memory.total``, the
    #: figure serving engines size their pools from), None when no sourced figure is known:
    #: :meth:`reported_memory` then says the vendor capacity stands in
    reported_memory_bytes: sympy.Expr | None = None
    reported_memory_source: str = ""
    sm_count: int | None = None
    launch_overhead_s: sympy.Expr | int = 0
    overlap: sympy.Expr | int = 1
    notes: str = ""
    #: where the figures are not yet a datasheet's: the source and its date (``""``: final figures);
    #: every report on the device prints it once (:func:`costmodel.hardware.fallback.roof_notes`)
    preliminary: str = ""
    #: the series name a lookup resolved to this, its one catalog part (``""``: asked by its own
    #: name); said once in every report (:func:`costmodel.hardware.fallback.roof_notes`), and
    #: left out of equality, so the part's cached steps serve it
    resolved_from: str = dataclasses.field(default="", compare=False)
    _hash: int | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """Hash of the spec, computed once (devices key the compiled-step cache on every call)."""
        h = self._hash
        if h is None:
            fields = (f.name for f in dataclasses.fields(self) if f.compare)
            h = hash(tuple(getattr(self, n) for n in fields))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> list[Any]:
        """Fields for pickling, without the cached hash (string hashes differ between processes)."""
        return [None if f.name == "_hash" else getattr(self, f.name) for f in dataclasses.fields(self)]

    def __setstate__(self, state: list[Any]) -> None:
        for f, value in zip(dataclasses.fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    def __post_init__(self) -> None:
        if not self.name:
            raise HardwareSpecError("hardware name must be a non-empty string")
        seen: set[tuple[str, str]] = set()
        for r in self.roofs:
            if not r.dense:
                raise HardwareSpecError(
                    f"{self.name}: roof {r.unit}/{r.precision} is marked sparse; sparse peaks go in "
                    "sparse_roofs and are never used as dense"
                )
            if (r.unit, r.precision) in seen:
                raise HardwareSpecError(f"{self.name}: duplicate roof {r.unit}/{r.precision}")
            seen.add((r.unit, r.precision))
        names = [m.name for m in self.memory]
        if len(set(names)) != len(names):
            raise HardwareSpecError(f"{self.name}: duplicate memory level in {names}")
        if self.power_w is not None:
            object.__setattr__(self, "power_w", _positive(self.power_w, f"{self.name} power_w", "power_w"))
        if self.price_usd_per_hour is not None:
            object.__setattr__(
                self,
                "price_usd_per_hour",
                _positive(self.price_usd_per_hour, f"{self.name} price_usd_per_hour", "price_usd_per_hour"),
            )
        if self.reported_memory_bytes is not None:
            object.__setattr__(
                self,
                "reported_memory_bytes",
                _positive(
                    self.reported_memory_bytes, f"{self.name} reported_memory_bytes", "reported_memory_bytes"
                ),
            )
        object.__setattr__(
            self,
            "launch_overhead_s",
            _positive(
                self.launch_overhead_s, f"{self.name} launch_overhead_s", "launch_overhead_s", allow_zero=True
            ),
        )
        object.__setattr__(
            self, "overlap", _positive(self.overlap, f"{self.name} overlap", "overlap", allow_zero=True)
        )
        if not isinstance(self.preliminary, str):
            raise HardwareSpecError(
                f"{self.name} preliminary must be text naming the source and its date, got {self.preliminary!r}"
            )
        if self.sm_count is not None:
            _count(self.sm_count, f"{self.name} sm_count", 1)

    @property
    def generation(self) -> str:
        """The architecture generation, vendor and :attr:`architecture` (``NVIDIA Hopper``,
        ``AMD CDNA 3``), or ``""`` when the architecture is not given."""
        return f"{self.vendor} {self.architecture}".strip() if self.architecture else ""

    @property
    def memory_kind(self) -> str:
        """The device's memory kind from its description (:func:`memory_kind`): ``HBM``,
        ``GDDR``, ``SRAM`` or ``other``."""
        return memory_kind(self.description)

    # ---------------------------------------------------------------- lookups
    def peak(self, unit: str, precision: str) -> sympy.Expr | None:
        """Dense peak FLOP/s of ``unit`` at ``precision``, or ``None``.

        A roof with precision ``"*"`` serves any precision; a cost with
        precision ``"*"`` (symbolic dtype) takes the unit's only roof.
        """
        exact = wildcard = None
        for r in self.roofs:
            if r.unit != unit:
                continue
            if r.precision == precision:
                exact = r.peak_flops_per_s
            elif r.precision == WILDCARD:
                wildcard = r.peak_flops_per_s
        if exact is not None:
            return exact
        if wildcard is not None:
            return wildcard
        if precision == WILDCARD:
            unit_roofs = [r for r in self.roofs if r.unit == unit]
            if len(unit_roofs) == 1:
                return unit_roofs[0].peak_flops_per_s
        return None

    def require_peak(self, unit: str, precision: str) -> sympy.Expr:
        """Like :meth:`peak` but raise :class:`MissingRoofError` naming what exists."""
        value = self.peak(unit, precision)
        if value is None:
            have = ", ".join(self.precisions(unit)) or "none"
            raise MissingRoofError(
                f"device {self.name!r} has no dense {unit} roof for precision {precision!r}; "
                f"{unit} precisions available: {have}"
            )
        return value

    def precisions(self, unit: str) -> tuple[str, ...]:
        return tuple(r.precision for r in self.roofs if r.unit == unit)

    def level(self, name: str) -> MemoryLevel:
        for m in self.memory:
            if m.name == name:
                return m
        have = ", ".join(m.name for m in self.memory)
        raise MissingRoofError(f"device {self.name!r} has no memory level {str(name)!r}; levels: {have}")

    def bandwidth(self, level: str = "dram") -> sympy.Expr:
        bw = self.level(level).bandwidth_bytes_per_s
        if bw is None:
            raise MissingRoofError(f"device {self.name!r}: memory level {str(level)!r} has no bandwidth")
        return bw

    def capacity(self, level: str = "dram") -> sympy.Expr:
        cap = self.level(level).capacity_bytes
        if cap is None:
            raise MissingRoofError(f"device {self.name!r}: memory level {str(level)!r} has no capacity")
        return cap

    def memory_bytes(self) -> sympy.Expr:
        """The bytes the device holds, what every capacity check (the ledger, ``decode``'s and
        ``search``'s fits, the engines' KV pools) divides: the driver's report where the catalog
        sources one (:meth:`reported_memory`: nvidia-smi's 81,559 MiB = 85.52e9 B on an H100
        SXM), else the vendor capacity (:meth:`capacity`). One figure, so that no command says a
        point does not fit where another runs it.

        Returns
        -------
        sympy.Expr
            Bytes.
        """
        return self.reported_memory()[0]

    def reported_memory(self) -> tuple[sympy.Expr, str]:
        """The memory the driver reports for the device (bytes), which serving engines size their
        KV pools from (SGLang's ``mem_fraction_static`` and vLLM's ``gpu_memory_utilization`` are
        fractions of it), and where that figure comes from.

        Vendors quote memory in decimal GB ("80 GB" = 80e9 B), while the driver reports the
        whole HBM, e.g. nvidia-smi's 81,559 MiB = 81559 x 2^20 = 85.52e9 B on an H100 SXM. Where
        the catalog has no sourced ``reported_memory_bytes`` the vendor capacity stands in, and
        the returned source says so (for the output to print once).

        Returns
        -------
        tuple of (sympy.Expr, str)
            Bytes, and the figure's source (``"NOT SOURCED: ..."`` when the vendor capacity
            stands in).
        """
        if self.reported_memory_bytes is not None:
            return self.reported_memory_bytes, self.reported_memory_source
        cap = self.capacity()
        return cap, (
            f"NOT SOURCED: no driver-reported memory for {self.name} in the catalog; its vendor capacity "
            f"{float(cap) / 1e9:g} GB stands in (engines see more: nvidia-smi 81,559 MiB = 85.5 GB on an 80 GB H100)"
        )

    def link(self, name: str) -> Link:
        for lk in self.links:
            if lk.name == name:
                return lk
        have = ", ".join(lk.name for lk in self.links) or "none"
        raise MissingRoofError(f"device {self.name!r} has no link {str(name)!r}; links: {have}")

    def _domain(self) -> int | None:
        """Devices the ``scale_up`` link joins (None: no such link, or its domain not stated)."""
        return next((lk.domain for lk in self.links if lk.name == "scale_up"), None)

    def group_link(self, devices: object) -> str:
        """The link a collective over ``devices`` of these devices is priced on: ``scale_up``
        within the scale-up domain (or when no domain is stated, or ``devices`` is symbolic);
        past it ``scale_out``, the network between domains. A group of ``p > D`` devices on
        ``D``-device domains is priced as one flat ring over all ``p`` at the network's
        bandwidth and latency: a ring's time is set by its slowest hop, and NCCL's rings that
        leave a node cross the network (one NIC per GPU on DGX/HGX boards), so

        .. math:: T_{all\\_reduce} = \\frac{2(p-1)}{p}\\frac{n b}{\\beta_{out}} + 2(p-1)\\,\\alpha_{out}

        (a hierarchical all-reduce, reduce-scatter in the domain then across, would move less
        over the network: this is the upper, flat-ring figure). A device without a scale-out
        link raises :class:`HardwareSpecError` naming the domain.

        >>> from costmodel.hardware import get_device
        >>> get_device("h100").group_link(8), get_device("h100").group_link(16)
        ('scale_up', 'scale_out')
        """
        d = self._domain()
        n = to_expr(devices, field="devices")
        if d is None or not n.is_number or n <= d:
            return "scale_up"
        if any(lk.name == "scale_out" for lk in self.links):
            return "scale_out"
        raise HardwareSpecError(
            f"{self.name}: a group of {n} devices spans more than one scale-up domain ({d} devices) and "
            f"the catalog has no scale_out link to price it over; use at most {d} devices per group "
            "(--tp), or give a scale_out link (--hw-file)"
        )

    def group_notes(self, devices: object) -> tuple[str, ...]:
        """One line when a group of ``devices`` spans scale-up domains (:meth:`group_link`)."""
        if self.group_link(devices) != "scale_out":
            return ()
        d, n = self._domain(), int(to_expr(devices, field="devices"))
        assert d is not None
        out = self.link("scale_out")
        return (
            f"a group of {n} {self.name} devices spans {-(-n // d)} scale-up domains of {d}: its "
            f"collectives are priced on the scale_out link ({as_float(out.bandwidth_bytes_per_s) / 1e9:g} GB/s "
            "per direction), not the scale-up link",
        )

    def balance(self, unit: str = "tensor", precision: str = "bf16", level: str = "dram") -> sympy.Expr:
        """Ridge point ``I* = P / beta`` in FLOP per byte.

        ``P`` is the roof :func:`costmodel.roofline.bound` prices ``unit``'s FLOPs at ``precision``
        on (:func:`costmodel.hardware.fallback.fallback_peak`): a tensor precision the device
        publishes no rate for is bounded by a narrower format's roof (Groq's, MI455X's and Rubin's
        bf16), a unit with no roof by its stand-in's (transcendentals on the vector roof where no
        SFU rate is published), so a ridge and the bound it is compared with never disagree;
        reports say so (:func:`costmodel.hardware.fallback.roof_notes`).

        >>> Hardware.symbolic().balance(precision="*")
        P/beta
        """
        from .fallback import fallback_peak

        return fallback_peak(self, unit, precision) / self.bandwidth(level)

    # ------------------------------------------------------------- variants
    def scaled(self, factors: Mapping[str, object]) -> Hardware:
        """A copy with resources multiplied: keys are units (``tensor``...),
        ``compute`` (every unit), memory levels (``dram``...), link names, or
        ``memory`` (every level's bandwidth)."""
        known = (
            set(UNITS)
            | {"compute", "memory"}
            | {m.name for m in self.memory}
            | {lk.name for lk in self.links}
        )
        for key in factors:
            if key not in known:
                raise HardwareSpecError(
                    f"cannot scale {key!r} on {self.name!r}; scalable: {', '.join(sorted(known))}"
                )
        f = {k: to_expr(v, field=f"scale factor {k}") for k, v in factors.items()}
        for key, value in f.items():  # named here, not as the roof or level it would zero
            if value.is_positive is False or value.is_zero:
                raise HardwareSpecError(
                    f"scale factor {key} must be positive (the resource's multiple, e.g. 2), got {value}"
                )
        token = _DERIVED.set(True)  # a what-if copy: positive values, outside RANGES if asked
        try:
            return self._scaled(f)
        finally:
            _DERIVED.reset(token)

    def _scaled(self, f: Mapping[str, sympy.Expr]) -> Hardware:
        """:meth:`scaled` with its factors parsed."""

        def unit_factor(unit: str) -> sympy.Expr:
            return f.get(unit, sympy.Integer(1)) * f.get("compute", sympy.Integer(1))

        roofs = tuple(
            dataclasses.replace(r, peak_flops_per_s=r.peak_flops_per_s * unit_factor(r.unit))
            for r in self.roofs
        )
        memory = tuple(
            m
            if m.bandwidth_bytes_per_s is None
            else dataclasses.replace(
                m,
                bandwidth_bytes_per_s=m.bandwidth_bytes_per_s
                * f.get(m.name, sympy.Integer(1))
                * f.get("memory", sympy.Integer(1)),
            )
            for m in self.memory
        )
        links = tuple(
            dataclasses.replace(lk, bandwidth_bytes_per_s=lk.bandwidth_bytes_per_s * f.get(lk.name, 1))
            for lk in self.links
        )
        return dataclasses.replace(self, roofs=roofs, memory=memory, links=links)

    def replace(self, **changes: Any) -> Hardware:
        """A copy with fields replaced (``hw.replace(overlap=0)``)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def symbolic(cls, name: str = "symbolic") -> Hardware:
        """A device whose roofs are symbols: ``P`` (tensor), ``P_vector``,
        ``P_sfu`` FLOP/s, ``beta`` bytes/s of DRAM, ``C`` bytes of capacity,
        ``beta_link``/``alpha_link`` for the ``scale_up`` link."""

        def pos(s: str) -> sympy.Symbol:
            return quantity(s)

        return cls(
            name=name,
            description="symbolic device",
            roofs=(
                Roof("tensor", WILDCARD, pos("P")),
                Roof("vector", WILDCARD, pos("P_vector")),
                Roof("sfu", WILDCARD, pos("P_sfu")),
            ),
            memory=(MemoryLevel("dram", pos("beta"), pos("C")),),
            links=(Link("scale_up", pos("beta_link"), pos("alpha_link")),),
        )

    # ---------------------------------------------------------------- output
    def to_dict(self) -> dict[str, Any]:
        """Plain data (floats where numeric, strings where symbolic)."""

        def v(e: sympy.Expr | None) -> Any:
            if e is None:
                return None
            return as_float(e) if not to_expr(e).free_symbols else str(e)

        return {
            "name": self.name,
            "description": self.description,
            "vendor": self.vendor,
            "architecture": self.architecture,
            "architecture_source": self.architecture_source,
            "roofs": [
                {
                    "unit": r.unit,
                    "precision": r.precision,
                    "peak_flops_per_s": v(r.peak_flops_per_s),
                    "source": r.source,
                }
                for r in self.roofs
            ],
            "sparse_roofs": [
                {
                    "unit": r.unit,
                    "precision": r.precision,
                    "peak_flops_per_s": v(r.peak_flops_per_s),
                    "source": r.source,
                }
                for r in self.sparse_roofs
            ],
            "memory": [
                {
                    "name": m.name,
                    "bandwidth_bytes_per_s": v(m.bandwidth_bytes_per_s),
                    "capacity_bytes": v(m.capacity_bytes),
                    "per": m.per,
                    "source": m.source,
                }
                for m in self.memory
            ],
            "links": [
                {
                    "name": lk.name,
                    "bandwidth_bytes_per_s": v(lk.bandwidth_bytes_per_s),
                    "latency_s": v(lk.latency_s),
                    "source": lk.source,
                    "domain": lk.domain,
                }
                for lk in self.links
            ],
            "power_w": v(self.power_w),
            "power_source": self.power_source,
            "price_usd_per_hour": v(self.price_usd_per_hour),
            "price_source": self.price_source,
            "reported_memory_bytes": v(self.reported_memory_bytes),
            "reported_memory_source": self.reported_memory_source,
            "sm_count": self.sm_count,
            "launch_overhead_s": v(self.launch_overhead_s),
            "overlap": v(self.overlap),
            "notes": self.notes,
            "preliminary": self.preliminary,
        }
