"""The ``Cost`` algebra: what one op, a fused group or a whole graph needs.

A :class:`Cost` holds sympy expressions for

* FLOPs per execution unit and precision, ``(unit, precision) -> F``; units
  are ``tensor`` (matrix engines), ``vector`` (ordinary ALUs) and ``sfu``
  (transcendentals: exp, rsqrt ...). One multiply-accumulate is 2 FLOPs.
* bytes read and bytes written per memory level (``dram`` by default;
  ``l2``, ``smem`` for hierarchical rooflines);
* resident bytes by category (``weights``, ``kv_cache``, ``activations``);
* bytes each device sends per link class and the latency-bound steps;
* kernel launches.

Costs add with ``+``, scale with ``*`` by a (symbolic) count, substitute
symbols late and evaluate to exact numbers.

>>> from costmodel.symbols import M, N, K
>>> c = Cost.compute("tensor", "bf16", 2*M*N*K) + Cost.traffic(read=2*(M*K + K*N), write=2*M*N)
>>> c.flops
2*K*M*N
>>> c.evaluate({M: 1, N: 4096, K: 4096}).intensity
2048/2049
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import sympy

from .errors import CostModelError, InvalidDimensionError, UnboundSymbolError
from .expr import to_expr
from .keys import Level, Unit

__all__ = ["Cost", "UNITS", "DEFAULT_LEVEL", "Bindings", "bind", "as_float"]

#: Execution units with their own compute roof (the members of :class:`~costmodel.keys.Unit`).
UNITS: tuple[Unit, ...] = tuple(Unit)
#: The memory level bytes are charged to unless a rule says otherwise.
DEFAULT_LEVEL = Level.DRAM

Bindings = Mapping[sympy.Symbol | str, Any]


def _freeze(terms: Mapping[Any, Any] | None, what: str) -> Mapping[Any, sympy.Expr]:
    out: dict[Any, sympy.Expr] = {}
    for key, value in (terms or {}).items():
        expr = sympy.sympify(value) if isinstance(value, sympy.Basic) else to_expr(value, field=what)
        if expr.is_number and expr.is_negative:
            raise InvalidDimensionError(f"{what}[{key!r}] must be non-negative, got {expr}")
        if expr != 0:
            out[key] = out.get(key, sympy.Integer(0)) + expr
    return MappingProxyType(dict(sorted(out.items(), key=lambda kv: str(kv[0]))))


_TERM_FIELDS = ("flop_terms", "read_terms", "write_terms", "footprint_terms", "comm_terms", "comm_step_terms")


def _merge(a: Mapping[Any, sympy.Expr], b: Mapping[Any, sympy.Expr]) -> dict[Any, sympy.Expr]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, sympy.Integer(0)) + value
    return out


def bind(bindings: Bindings | None) -> dict[sympy.Symbol, sympy.Expr]:
    """Normalise a binding table: keys may be symbols or dimension names.

    Parameters
    ----------
    bindings : mapping or None
        Symbol, or a dimension's name (``"B"``, ``"hidden_size"`` or an alias), -> value: a
        number, a sympy expression or an expression string; None: empty.

    Returns
    -------
    dict
        Symbol -> sympy expression.

    Raises
    ------
    CostModelError
        When ``bindings`` is not a mapping, or a key is neither a symbol nor a dimension name.
    ExpressionSyntaxError
        When a value is not a finite number, an expression or an expression string.

    >>> bind({"B": 8})
    {B: 8}
    """
    from .symbols import dim

    if bindings is not None and not isinstance(bindings, Mapping):  # a list of pairs was an AttributeError
        raise CostModelError(
            f"bindings must be a mapping of symbol or dimension name to value (e.g. {{'B': 8}}), got "
            f"{type(bindings).__name__} {bindings!r:.40}"
        )
    out: dict[sympy.Symbol, sympy.Expr] = {}
    for key, value in (bindings or {}).items():
        sym = dim(key) if isinstance(key, str) else key
        if not isinstance(sym, sympy.Symbol):
            raise CostModelError(f"binding key {key!r} must be a symbol or a dimension name")
        out[sym] = to_expr(value, field=str(sym))
    return out


def unbound_error(symbols: Iterable[Any], what: str = "value") -> UnboundSymbolError:
    """The one error of a value that still depends on ``symbols`` (named, sorted): its wording
    is what the command line reads to say where a ``--hw-file`` symbol came from."""
    names = ", ".join(sorted(str(s) for s in symbols))
    return UnboundSymbolError(f"{what} still depends on unbound symbols: {names}; bind them first")


def as_float(expr: sympy.Expr, *, what: str = "value") -> float:
    """Convert a numeric expression to float, naming unbound symbols if any.

    Parameters
    ----------
    expr : sympy.Expr, number or str
        A numeric expression.
    what : str, default "value"
        What it is, for the error.

    Returns
    -------
    float
        Its value.

    Raises
    ------
    UnboundSymbolError
        While it has free symbols (named); :class:`CostModelError` when it evaluates to NaN.

    >>> as_float("3/4")
    0.75
    """
    expr = to_expr(expr, field=what)
    if expr.free_symbols:
        raise unbound_error(expr.free_symbols, what)
    value = float(expr)
    if value != value:
        raise CostModelError(f"{what} evaluated to NaN ({expr})")
    return value


@dataclass(frozen=True, slots=True)
class Cost:
    """Symbolic resource needs of an op, group or graph (see module doc)."""

    flop_terms: Mapping[tuple[str, str], sympy.Expr] = field(default_factory=dict)
    read_terms: Mapping[str, sympy.Expr] = field(default_factory=dict)
    write_terms: Mapping[str, sympy.Expr] = field(default_factory=dict)
    footprint_terms: Mapping[str, sympy.Expr] = field(default_factory=dict)
    comm_terms: Mapping[str, sympy.Expr] = field(default_factory=dict)
    comm_step_terms: Mapping[str, sympy.Expr] = field(default_factory=dict)
    kernels: sympy.Expr | int = 0

    def __post_init__(self) -> None:
        for key in self.flop_terms:
            if not (isinstance(key, tuple) and len(key) == 2 and key[0] in UNITS):
                raise CostModelError(f"flop_terms key {key!r} must be (unit, precision) with unit in {UNITS}")
        object.__setattr__(self, "flop_terms", _freeze(self.flop_terms, "flops"))
        object.__setattr__(self, "read_terms", _freeze(self.read_terms, "bytes_read"))
        object.__setattr__(self, "write_terms", _freeze(self.write_terms, "bytes_written"))
        object.__setattr__(self, "footprint_terms", _freeze(self.footprint_terms, "footprint"))
        object.__setattr__(self, "comm_terms", _freeze(self.comm_terms, "comm_bytes"))
        object.__setattr__(self, "comm_step_terms", _freeze(self.comm_step_terms, "comm_steps"))
        kernels = to_expr(self.kernels, field="kernels")
        if kernels.is_number and kernels.is_negative:
            raise InvalidDimensionError(f"kernels must be non-negative, got {kernels}")
        object.__setattr__(self, "kernels", kernels)

    # ----------------------------------------------------------- constructors
    @classmethod
    def zero(cls) -> Cost:
        """The additive identity."""
        return cls()

    @classmethod
    def compute(cls, unit: str, precision: str, flops: object) -> Cost:
        """FLOPs on one unit at one precision."""
        if unit not in UNITS:
            raise CostModelError(f"unit {unit!r} is not one of {', '.join(UNITS)}")
        return cls(flop_terms={(unit, precision): flops})

    @classmethod
    def traffic(cls, read: object = 0, write: object = 0, level: str = DEFAULT_LEVEL) -> Cost:
        """Bytes read and written at one memory level."""
        return cls(read_terms={level: read}, write_terms={level: write})

    @classmethod
    def resident(cls, **categories: object) -> Cost:
        """Resident bytes by category, e.g. ``Cost.resident(weights=...)``."""
        return cls(footprint_terms=categories)

    @classmethod
    def comm(cls, link: str, bytes_sent: object, steps: object) -> Cost:
        """Bytes each device sends over ``link`` and the latency-bound steps."""
        return cls(comm_terms={link: bytes_sent}, comm_step_terms={link: steps})

    @classmethod
    def launches(cls, n: object = 1) -> Cost:
        """Kernel launches."""
        return cls(kernels=n)

    # ------------------------------------------------------------- algebra
    def __add__(self, other: object) -> Cost:
        if isinstance(other, int) and other == 0:
            return self
        if not isinstance(other, Cost):
            return NotImplemented
        merged = {f: _merge(getattr(self, f), getattr(other, f)) for f in _TERM_FIELDS}
        return Cost(**merged, kernels=self.kernels + other.kernels)

    __radd__ = __add__

    @classmethod
    def sum(cls, costs: Iterable[Cost]) -> Cost:
        """The sum of many costs in one pass: each term's parts are added by one ``sympy.Add``
        (repeated ``+`` re-canonicalises the running sum at every step: quadratic in the count)."""
        parts: dict[str, dict[Any, list[sympy.Expr]]] = {f: {} for f in _TERM_FIELDS}
        kernels: list[sympy.Expr] = []
        for c in costs:
            for f in _TERM_FIELDS:
                acc = parts[f]
                for key, value in getattr(c, f).items():
                    acc.setdefault(key, []).append(value)
            kernels.append(c.kernels)
        return cls(
            **{f: {k: sympy.Add(*v) for k, v in parts[f].items()} for f in _TERM_FIELDS},
            kernels=sympy.Add(*kernels),
        )

    def __mul__(self, factor: object) -> Cost:
        k = to_expr(factor, field="repeat count")
        if k.is_number and k.is_negative:
            raise InvalidDimensionError(f"repeat count must be non-negative, got {k}")
        return self.map(lambda e: e * k)

    __rmul__ = __mul__

    def map(self, fn: Any) -> Cost:
        """Apply ``fn`` to every expression (used by subs/simplify/scale)."""

        mapped = {f: {k: fn(v) for k, v in getattr(self, f).items()} for f in _TERM_FIELDS}
        return Cost(**mapped, kernels=fn(self.kernels))

    def subs(self, bindings: Bindings) -> Cost:
        """Substitute symbols (or dimension names) by values or expressions."""
        table = bind(bindings)
        return self.map(lambda e: sympy.sympify(e).subs(table))

    def simplify(self) -> Cost:
        """Simplify every term (only on request: it can be slow)."""
        return self.map(sympy.simplify)

    def evaluate(self, bindings: Bindings | None = None) -> Cost:
        """Substitute and check that nothing symbolic is left.

        Raises :class:`UnboundSymbolError` naming the symbols still free.
        """
        c = self.subs(bindings or {})
        free = c.free_symbols
        if free:
            raise unbound_error(free, "cost")
        return c

    # ------------------------------------------------------------ queries
    def _all_exprs(self) -> Iterable[sympy.Expr]:
        for f in _TERM_FIELDS:
            yield from getattr(self, f).values()
        yield self.kernels

    @property
    def free_symbols(self) -> set[sympy.Symbol]:
        """Symbols any term still depends on."""
        out: set[sympy.Symbol] = set()
        for e in self._all_exprs():
            out |= sympy.sympify(e).free_symbols
        return out

    @property
    def is_numeric(self) -> bool:
        return not self.free_symbols

    @property
    def flops(self) -> sympy.Expr:
        """Total FLOPs over every unit and precision."""
        return sympy.Add(*self.flop_terms.values())

    def flops_on(self, unit: str, precision: str | None = None) -> sympy.Expr:
        """FLOPs on one unit (optionally one precision)."""
        if unit not in UNITS:
            raise CostModelError(f"unit {unit!r} is not one of {', '.join(UNITS)}")
        return sympy.Add(
            *(v for (u, prec), v in self.flop_terms.items() if u == unit and precision in (None, prec))
        )

    def bytes_read(self, level: str = DEFAULT_LEVEL) -> sympy.Expr:
        return self.read_terms.get(level, sympy.Integer(0))

    def bytes_written(self, level: str = DEFAULT_LEVEL) -> sympy.Expr:
        return self.write_terms.get(level, sympy.Integer(0))

    def bytes_at(self, level: str = DEFAULT_LEVEL) -> sympy.Expr:
        """Bytes read plus written at ``level``."""
        return self.bytes_read(level) + self.bytes_written(level)

    @property
    def bytes(self) -> sympy.Expr:
        """DRAM bytes moved (read + written)."""
        return self.bytes_at(DEFAULT_LEVEL)

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.read_terms) | set(self.write_terms)))

    @property
    def footprint(self) -> sympy.Expr:
        """Total resident bytes over all categories."""
        return sympy.Add(*self.footprint_terms.values())

    def intensity_at(self, level: str = DEFAULT_LEVEL, unit: str | None = None) -> sympy.Expr:
        """Arithmetic intensity ``I = F / D`` in FLOP per byte.

        ``unit`` restricts the numerator to one unit (e.g. ``"tensor"`` to
        compare with the tensor roof's ridge point).
        """
        f = self.flops if unit is None else self.flops_on(unit)
        d = self.bytes_at(level)
        if d == 0:
            raise CostModelError(
                f"intensity undefined: the cost moves no bytes at level {getattr(level, 'value', level)}"
            )
        return f / d

    @property
    def intensity(self) -> sympy.Expr:
        """``flops / bytes`` at DRAM."""
        return self.intensity_at(DEFAULT_LEVEL)

    def to_dict(self, numeric: bool = False) -> dict[str, Any]:
        """Plain data for JSON: strings of expressions, or floats if ``numeric``; each key names
        its unit (``flops``, ``bytes_read``, ``bytes_written``, ``footprint_bytes``,
        ``comm_bytes``), or is a count (``comm_steps``, ``kernels``)."""

        def v(e: sympy.Expr) -> Any:
            return as_float(e) if numeric else str(e)

        return {
            "flops": {f"{u}:{p}": v(e) for (u, p), e in self.flop_terms.items()},
            "bytes_read": {k: v(e) for k, e in self.read_terms.items()},
            "bytes_written": {k: v(e) for k, e in self.write_terms.items()},
            "footprint_bytes": {k: v(e) for k, e in self.footprint_terms.items()},
            "comm_bytes": {k: v(e) for k, e in self.comm_terms.items()},
            "comm_steps": {k: v(e) for k, e in self.comm_step_terms.items()},
            "kernels": v(self.kernels),
        }

    # immutable: copies are the object itself; pickling rebuilds from plain dicts
    def __copy__(self) -> Cost:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Cost:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Cost,
            (
                dict(self.flop_terms),
                dict(self.read_terms),
                dict(self.write_terms),
                dict(self.footprint_terms),
                dict(self.comm_terms),
                dict(self.comm_step_terms),
                self.kernels,
            ),
        )

    def __hash__(self) -> int:
        return hash(
            (
                tuple(self.flop_terms.items()),
                tuple(self.read_terms.items()),
                tuple(self.write_terms.items()),
                tuple(self.footprint_terms.items()),
                tuple(self.comm_terms.items()),
                tuple(self.comm_step_terms.items()),
                self.kernels,
            )
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cost):
            return NotImplemented
        return (
            all(
                dict(getattr(self, f)) == dict(getattr(other, f))
                for f in (
                    "flop_terms",
                    "read_terms",
                    "write_terms",
                    "footprint_terms",
                    "comm_terms",
                    "comm_step_terms",
                )
            )
            and self.kernels == other.kernels
        )

    def equals(self, other: Cost) -> bool:
        """Mathematical equality term by term (``simplify(a - b) == 0``)."""
        fields = (
            "flop_terms",
            "read_terms",
            "write_terms",
            "footprint_terms",
            "comm_terms",
            "comm_step_terms",
        )
        for f in fields:
            a, b = dict(getattr(self, f)), dict(getattr(other, f))
            for key in set(a) | set(b):
                if sympy.simplify(a.get(key, 0) - b.get(key, 0)) != 0:
                    return False
        return sympy.simplify(self.kernels - other.kernels) == 0

    def __repr__(self) -> str:
        parts = [f"flops={dict(self.flop_terms)}"]
        if self.read_terms:
            parts.append(f"read={dict(self.read_terms)}")
        if self.write_terms:
            parts.append(f"write={dict(self.write_terms)}")
        if self.footprint_terms:
            parts.append(f"footprint={dict(self.footprint_terms)}")
        if self.comm_terms:
            parts.append(f"comm={dict(self.comm_terms)}, steps={dict(self.comm_step_terms)}")
        parts.append(f"kernels={self.kernels}")
        return "Cost(" + ", ".join(parts) + ")"
