"""Roofline bounds for any :class:`Cost` on any :class:`Hardware`.

For a cost with FLOPs ``F_{u,p}`` on unit ``u`` at precision ``p``, bytes
``D_l`` at memory level ``l`` and ``C_k`` bytes in ``s_k`` steps on link ``k``:

.. math::

    t_u = \\sum_p \\frac{F_{u,p}}{P_{u,p}},\\qquad
    t_l = \\frac{D_l}{\\beta_l},\\qquad
    t_k = \\frac{C_k}{\\beta_k} + s_k\\,\\alpha_k

    T_\\text{lower} = \\max(t_u, t_l, t_k),\\qquad
    T_\\text{upper} = \\sum t_u + \\sum t_l + \\sum t_k

Precisions on one unit share it, so their times add. The bound kind is the
argmax term: compute-bound (which unit), memory-bound (which level) or
communication-bound (which link). The modelled time blends the two bounds by
the device's ``overlap`` and adds ``kernels * launch_overhead_s``.

Everything stays symbolic until numbers arrive: with a symbolic device the
bound is a ``Max`` and the kind is a set of regions (relationals), never a
``bool()`` of a symbolic comparison.

>>> from costmodel.hardware import Hardware
>>> from costmodel.rules import op_cost
>>> from costmodel.symbols import M, N, K
>>> b = bound(op_cost("gemm", M=M, N=N, K=K), Hardware.symbolic())
>>> b.terms["tensor"], b.terms["dram"]
(2*K*M*N/P, (2*K*M + 2*K*N + 2*M*N)/beta)
>>> isinstance(b.lower, sympy.Max)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sympy

from .cost import UNITS, Bindings, Cost, as_float, bind
from .errors import CostModelError, MissingRoofError, SymbolicComparisonError
from .hardware.catalog import get_device
from .hardware.fallback import fallback_peak, roof_unit
from .hardware.spec import Hardware
from .results import Result
from .symbols import quantity

__all__ = [
    "Bound",
    "bound",
    "headroom",
    "sensitivities",
    "achieved",
    "Achieved",
    "category_of",
    "LINK_PREFIX",
]

LINK_PREFIX = "link:"


def _checked(cost: object, hw: object) -> tuple[Cost, Hardware]:
    """``cost`` checked as a :class:`Cost` and ``hw`` resolved to a :class:`Hardware` (a device
    name as every entry point takes it), one line naming the parameter otherwise."""
    if not isinstance(cost, Cost):
        raise CostModelError(
            f"cost must be a Cost (op_cost(...), a graph's total), got {type(cost).__name__} {cost!r:.40}"
        )
    return cost, get_device(hw)  # type: ignore[arg-type]  # get_device names a wrong type itself


def category_of(label: str) -> str:
    """``compute`` for a unit, ``communication`` for a link, else ``memory``."""
    if label in UNITS:
        return "compute"
    if label.startswith(LINK_PREFIX):
        return "communication"
    return "memory"


def _monomials(t: sympy.Expr) -> dict[sympy.Expr, float] | None:
    """``t`` as {positive monomial: non-negative coefficient}, or None when it is not of that form."""
    out: dict[sympy.Expr, float] = {}
    for arg in sympy.Add.make_args(sympy.expand(t)):
        coeff, mono = arg.as_coeff_Mul()
        if not coeff.is_number or coeff < 0 or (mono != 1 and mono.is_positive is not True):
            return None
        out[mono] = out.get(mono, 0.0) + float(coeff)
    return out


def _undominated(terms: list[sympy.Expr]) -> list[sympy.Expr]:
    """``terms`` less those another term bounds above everywhere, by a sufficient check: both are
    sums of positive monomials and the other's coefficient is at least as large on every one."""
    if len(terms) < 2:
        return terms
    polys = [_monomials(t) for t in terms]
    keep = []
    for j, pj in enumerate(polys):
        dominated = pj is not None and any(
            i != j
            and pi is not None
            and all(pi.get(m, 0.0) >= c for m, c in pj.items())
            and (pi != pj or i < j)  # of two equal terms keep the first
            for i, pi in enumerate(polys)
        )
        if not dominated:
            keep.append(terms[j])
    return keep


@dataclass(frozen=True)
class Bound:
    """Time terms of a cost on a device, and the bounds built from them."""

    cost: Cost
    hardware: Hardware
    terms: dict[str, sympy.Expr]
    unbounded: tuple[str, ...] = ()

    @property
    def lower(self) -> sympy.Expr:
        """``max`` of the terms: the roofline lower bound (perfect overlap)."""
        if not self.terms:
            return sympy.Integer(0)
        return sympy.Max(*self.terms.values())

    @property
    def upper(self) -> sympy.Expr:
        """Sum of the terms: no overlap at all."""
        return sympy.Add(*self.terms.values())

    @property
    def launch(self) -> sympy.Expr:
        """``kernels * launch_overhead_s``."""
        return self.cost.kernels * self.hardware.launch_overhead_s

    @property
    def time(self) -> sympy.Expr:
        """``overlap*lower + (1-overlap)*upper + launch`` in seconds."""
        ov = self.hardware.overlap
        return ov * self.lower + (1 - ov) * self.upper + self.launch

    @property
    def compile_time(self) -> sympy.Expr:
        """:attr:`time` with its ``max`` left unevaluated: equal in value, but sympy does not try
        to prove which symbolic terms can never bind (the slow part of building a symbolic
        graph's step time); a term another bounds above coefficient by coefficient (all terms
        sums of positive monomials) is dropped first. For expressions that are compiled to
        numbers, not read."""
        terms = _undominated(list(self.terms.values()))
        if not terms:
            return self.launch
        lower = terms[0] if len(terms) == 1 else sympy.Max(*terms, evaluate=False)
        ov = self.hardware.overlap
        return ov * lower + (1 - ov) * self.upper + self.launch

    def regions(self) -> dict[str, sympy.Basic]:
        """For each term, the condition under which it is the binding one."""
        out: dict[str, sympy.Basic] = {}
        for label, t in self.terms.items():
            conds = [sympy.Ge(t, other) for lab, other in self.terms.items() if lab != label]
            out[label] = sympy.And(*conds) if conds else sympy.true
        return out

    @property
    def kind(self) -> str:
        """The binding term's label (``tensor``, ``dram``, ``link:scale_up``...).

        Raises :class:`SymbolicComparisonError` while terms are symbolic; use
        :meth:`regions` then.
        """
        if not self.terms:
            return "none"
        values = {}
        for label, t in self.terms.items():
            t = sympy.sympify(t)  # terms are numbers or Exprs built by bound(), never text
            if t.free_symbols:
                raise SymbolicComparisonError(
                    "bound kind is undecidable while terms are symbolic "
                    f"({', '.join(sorted(str(s) for s in t.free_symbols))}); "
                    "bind them or use Bound.regions()"
                )
            values[label] = t
        return max(values, key=lambda lab: values[lab])

    @property
    def category(self) -> str:
        """``compute``, ``memory`` or ``communication``."""
        return category_of(self.kind)

    def subs(self, bindings: Bindings) -> Bound:
        table = bind(bindings)
        return Bound(
            self.cost.subs(table),
            self.hardware,
            {k: sympy.sympify(v).subs(table) for k, v in self.terms.items()},
            self.unbounded,
        )

    def seconds(self, what: str = "time") -> float:
        """A bound as a float, in seconds.

        Parameters
        ----------
        what : str, default "time"
            ``time``, ``lower``, ``upper``, ``launch`` or one of :attr:`terms` (``tensor``,
            ``dram``, ``link:scale_up`` ...).

        Returns
        -------
        float
            Seconds.

        Raises
        ------
        CostModelError
            When ``what`` is none of those; :class:`UnboundSymbolError` while it is symbolic.

        >>> from costmodel import get_device, op_cost
        >>> b = bound(op_cost("gemm", M=1, N=1, K=1), get_device("a100"))
        >>> b.seconds("vector")
        Traceback (most recent call last):
        ...
        costmodel.errors.CostModelError: what must be time, lower, upper, launch or a term of this bound (tensor, dram), got 'vector'
        """
        if what in ("time", "lower", "upper", "launch"):
            expr = getattr(self, what)
        elif isinstance(what, str) and what in self.terms:
            expr = self.terms[what]
        else:
            raise CostModelError(
                "what must be time, lower, upper, launch or a term of this bound "
                f"({', '.join(self.terms) or 'none'}), got {what!r:.60}"
            )
        return as_float(expr, what=f"bound {what}")

    def to_dict(self) -> dict[str, Any]:
        numeric = not any(sympy.sympify(t).free_symbols for t in self.terms.values())

        def v(e: sympy.Expr) -> Any:
            return as_float(e) if numeric else str(e)

        out: dict[str, Any] = {
            "device": self.hardware.name,
            "terms_s": {k: v(t) for k, t in self.terms.items()},
            "lower_s": v(self.lower),
            "upper_s": v(self.upper),
            "time_s": v(self.time),
            "unbounded": list(self.unbounded),
        }
        if numeric:
            out["kind"] = self.kind
            out["category"] = self.category
        else:
            out["regions"] = {k: str(c) for k, c in self.regions().items()}
        return out


def bound(cost: Cost, hw: Hardware | str, bindings: Bindings | None = None) -> Bound:
    """Roofline terms of ``cost`` on ``hw`` (see module doc).

    Tensor-unit FLOPs in a precision the matrix engines lack but the vector
    ALUs have (fp32 matmuls on a GPU without TF32) are charged to the vector
    roof. SFU FLOPs on a chip whose transcendental rate is unpublished are charged to
    its vector roof (:func:`~costmodel.hardware.fallback.roof_unit`; ``roof_notes`` names the
    substitution for the output). A unit with no roof and no substitute, or a memory level
    without bandwidth, is listed in ``Bound.unbounded`` instead of being silently dropped. A
    missing precision on a unit that has roofs, or a missing link, raises
    :class:`MissingRoofError`.

    Parameters
    ----------
    cost : Cost
        FLOPs per unit and precision, bytes per memory level, link bytes and steps.
    hw : Hardware or str
        The device, or a catalog name or alias (:func:`~costmodel.hardware.get_device`).
    bindings : mapping, optional
        Symbol (or its name) -> value, substituted into ``cost`` first; None: none.

    Returns
    -------
    Bound
        One time term (seconds) per unit, memory level and link the cost uses.

    Raises
    ------
    CostModelError
        When ``cost`` is not a :class:`Cost` or ``hw`` names no device
        (:class:`UnknownDeviceError`); :class:`MissingRoofError` as above.

    >>> from costmodel import op_cost
    >>> bound(op_cost("gemm", M=512, N=4096, K=4096), "a100").kind
    'tensor'
    """
    cost, hw = _checked(cost, hw)
    if bindings:
        cost = cost.subs(bindings)
    terms: dict[str, sympy.Expr] = {}
    unbounded: list[str] = []
    flop_terms = dict(cost.flop_terms)
    for (u, p), f in cost.flop_terms.items():
        # a matmul in a precision the matrix engines lack (fp32 without TF32 on a GPU)
        # runs on the vector ALUs: charge it there rather than fail
        if u == "tensor" and hw.peak("tensor", p) is None and hw.peak("vector", p) is not None:
            del flop_terms[(u, p)]
            flop_terms[("vector", p)] = flop_terms.get(("vector", p), 0) + f
    for unit in UNITS:
        parts = [(p, f) for (u, p), f in flop_terms.items() if u == unit]
        if not parts:
            continue
        if roof_unit(hw, unit) is None:
            if unit == "tensor":
                raise MissingRoofError(f"device {hw.name!r} has no tensor roof at all")
            unbounded.append(unit)
            continue
        # a unit without a roof of its own runs on its substitute (roof_unit: the SFU's
        # transcendentals on the vector ALUs); the term keeps the unit's name, the output says so
        terms[str(unit)] = sympy.Add(*(f / fallback_peak(hw, unit, p) for p, f in parts))
    for level in cost.levels:
        d = cost.bytes_at(level)
        if d == 0:
            continue
        try:
            bw = hw.bandwidth(level)
        except MissingRoofError:
            if level == "dram":
                raise
            unbounded.append(level)
            continue
        terms[str(level)] = d / bw
    for link_name, nbytes in cost.comm_terms.items():
        lk = hw.link(link_name)
        t = nbytes / lk.bandwidth_bytes_per_s
        steps = cost.comm_step_terms.get(link_name, 0)
        if lk.latency_s is None:
            if steps != 0:
                unbounded.append(f"{LINK_PREFIX}{link_name} latency")
        else:
            t = t + steps * lk.latency_s
        terms[f"{LINK_PREFIX}{link_name}"] = t
    return Bound(cost, hw, terms, tuple(unbounded))


def headroom(cost: Cost, hw: Hardware | str, resource: str, factor: object = 2) -> sympy.Expr:
    """Speedup of the lower bound when one resource is scaled by ``factor``.

    .. math::

        S = \\frac{\\max(F/P,\\ D/\\beta)}{\\max(F/(kP),\\ D/\\beta)}

    for ``resource="compute"`` (1 when memory-bound, up to ``k`` when
    compute-bound, ``I/I*`` in between for ``k = 2``).

    Parameters
    ----------
    cost : Cost
        The work.
    hw : Hardware or str
        The device, or a catalog name or alias.
    resource : str
        What is scaled (:meth:`~costmodel.hardware.Hardware.scaled`): a unit (``tensor``,
        ``vector``, ``sfu``), ``compute`` (every unit), a memory level (``dram`` ...), ``memory``
        (every level) or a link name.
    factor : number or sympy.Expr, default 2
        The scale, dimensionless and positive; a symbol keeps the speedup symbolic.

    Returns
    -------
    sympy.Expr
        The speedup ``S`` (dimensionless): 1 when the resource does not bind.

    >>> from costmodel import op_cost
    >>> headroom(op_cost("gemm", M=4096, N=4096, K=4096), "h100", "compute")  # compute-bound
    2
    """
    cost, hw = _checked(cost, hw)
    base = bound(cost, hw).lower
    scaled = bound(cost, hw.scaled({resource: factor})).lower
    if scaled == 0:
        return sympy.Integer(1)
    return base / scaled


def sensitivities(cost: Cost, hw: Hardware | str) -> dict[str, dict[str, sympy.Expr]]:
    """Derivative of the lower bound with respect to each roof it uses.

    For each term label ``r`` with resource value ``R`` (a peak or a
    bandwidth), returns ``dT/dR`` (seconds per unit of resource) and the
    elasticity ``(dT/dR) * R / T`` (``-1`` for the binding resource, ``0`` for
    the others, ``-1/2`` each at an exact tie). Computed by differentiating
    the ``Max`` with sympy (Heaviside steps), not by finite differences.

    Parameters
    ----------
    cost : Cost
        The work.
    hw : Hardware or str
        The device, or a catalog name or alias.

    Returns
    -------
    dict
        Term label (``tensor``, ``dram``, ``link:...``) -> ``{"dT_dresource": ..., "elasticity":
        ...}``; ``dT_dresource`` in seconds per FLOP/s (a unit) or per byte/s (a level or link),
        NaN where several precisions share a unit.

    >>> from costmodel import op_cost
    >>> sensitivities(op_cost("gemm", M=4096, N=4096, K=4096), "h100")["tensor"]["elasticity"]
    -1
    """
    cost, hw = _checked(cost, hw)
    b = bound(cost, hw)
    scale = {label: quantity(f"s_{label.replace(':', '_')}") for label in b.terms}
    # each term scales as 1/s when its resource is multiplied by s
    t_of_s = sympy.Max(*(t / scale[label] for label, t in b.terms.items())) if b.terms else sympy.Integer(0)
    at_one = {s: 1 for s in scale.values()}
    out: dict[str, dict[str, sympy.Expr]] = {}
    for label, s in scale.items():
        dt_ds = sympy.diff(t_of_s, s).subs(at_one)
        resource = _resource_value(hw, label, cost)
        out[label] = {
            "dT_dresource": sympy.simplify(dt_ds / resource) if resource is not None else sympy.nan,
            "elasticity": sympy.simplify(dt_ds / b.lower) if b.lower != 0 else sympy.Integer(0),
        }
    return out


def _resource_value(hw: Hardware, label: str, cost: Cost) -> sympy.Expr | None:
    if label in UNITS:
        precs = {p for (u, p) in cost.flop_terms if u == label}
        if len(precs) == 1:  # the roof bound() divides by: a substitute where the device has none
            return fallback_peak(hw, label, precs.pop())
        return None  # several precisions share the unit: no single peak
    if label.startswith(LINK_PREFIX):
        return hw.link(label[len(LINK_PREFIX) :]).bandwidth_bytes_per_s
    return hw.bandwidth(label)


@dataclass(frozen=True)
class Achieved(Result):
    """A measured time against its bound: ``fraction_of_bound = lower / measured``; ``above_bound``
    when the fraction exceeds 1.1 (timing noise, caches, or a wrong cost model)."""

    bound_s: float
    measured_s: float
    fraction_of_bound: float
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    kind: str
    above_bound: bool


def achieved(cost: Cost, hw: Hardware | str, measured_s: float) -> Achieved:
    """Compare a measured time with the bound (see :class:`Achieved`).

    Parameters
    ----------
    cost : Cost
        The work that was timed, every symbol bound.
    hw : Hardware or str
        The device it ran on, or its catalog name or alias.
    measured_s : float
        The measured time in seconds, finite and positive.

    Returns
    -------
    Achieved
        The lower bound (s), the fraction of it reached, the achieved FLOP/s and byte/s.

    Raises
    ------
    SymbolicComparisonError
        When ``measured_s`` is not a finite positive number.

    >>> from costmodel import op_cost
    >>> a = achieved(op_cost("gemm", M=4096, N=4096, K=4096), "h100", 0.001)
    >>> a.achieved_flops_per_s  # 2 * 4096**3 FLOP / 1 ms
    137438953472000.0
    """
    cost, hw = _checked(cost, hw)
    if (
        not isinstance(measured_s, (int, float))
        or isinstance(measured_s, bool)
        or not 0 < measured_s < math.inf
    ):
        raise SymbolicComparisonError(f"measured_s must be a positive number of seconds, got {measured_s!r}")
    b = bound(cost, hw)
    lower = as_float(b.lower, what="bound")
    frac = lower / measured_s
    return Achieved(
        bound_s=lower,
        measured_s=float(measured_s),
        fraction_of_bound=frac,
        achieved_flops_per_s=as_float(cost.flops) / measured_s,
        achieved_bytes_per_s=as_float(cost.bytes) / measured_s,
        kind=b.kind,
        above_bound=frac > 1.1,
    )
