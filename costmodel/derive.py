"""Closed-form derivations, returned as sympy expressions (and LaTeX).

Every derivation is computed from the cost rules, not typed in: the GEMM
crossover solves ``I(M) = I*`` on the ``gemm`` rule's own intensity, the
decode-attention intensity is the limit of the ``attention`` rule as the
context grows, and so on. Hardware may be numeric or symbolic
(:meth:`Hardware.symbolic`: ``P``, ``beta``).

>>> from costmodel.symbols import M, N, K, quantity
>>> b = quantity("b")  # bytes per element
>>> gemm_crossover(N=N, K=K, dtype=b).asymptotic
P*b/(2*beta)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import sympy

from .cost import Cost, as_float
from .dtypes import DType, DTypeLike, gemm_out_dtype, get_dtype
from .errors import CostModelError, UnknownDTypeError
from .expr import to_expr
from .hardware.catalog import get_device
from .hardware.spec import WILDCARD, Hardware
from .results import Result
from .rules import op_cost
from .symbols import M as M_sym
from .symbols import check_dim, ctx, dim, quantity

__all__ = [
    "balance_point",
    "checked_dtype",
    "op_intensity",
    "Crossover",
    "crossover",
    "gemm_crossover",
    "gemm_crossover_form",
    "decode_attention_intensity",
    "tile_intensity",
    "tile_compute_bound",
    "solved_condition",
    "latex",
    "split_matmul_network",
    "NetworkSplit",
]


def _device(hw: object, *, symbolic: bool = True) -> Hardware:
    """``hw`` as a :class:`Hardware`: itself, a catalog name or alias resolved
    (:func:`~costmodel.hardware.get_device`, as :func:`~costmodel.roofline.bound` takes it), or,
    where ``symbolic``, None for :meth:`Hardware.symbolic` (``P``, ``beta``); a one-line
    :class:`~costmodel.errors.UnknownDeviceError` naming the value otherwise."""
    if hw is None and symbolic:
        return Hardware.symbolic()
    return get_device(hw)  # type: ignore[arg-type]  # get_device names a wrong type itself


def _checked_cost(cost: object) -> Cost:
    """``cost`` checked as a :class:`Cost` (a one-line error naming the value otherwise)."""
    if not isinstance(cost, Cost):
        raise CostModelError(
            f"cost must be a Cost (op_cost(...), a graph's total), got {type(cost).__name__} {cost!r:.40}"
        )
    return cost


def latex(expr: sympy.Basic) -> str:
    """LaTeX of an expression (``sympy.latex``).

    Parameters
    ----------
    expr : sympy.Basic
        A closed form (a crossover, an intensity ...).

    Returns
    -------
    str
        Its LaTeX, without math delimiters.

    >>> print(latex(gemm_crossover(N=dim("N"), K=dim("K"), dtype=quantity("b")).asymptotic))
    \\frac{P b}{2 \\beta}

    Raises
    ------
    CostModelError
        When ``expr`` is neither a sympy expression nor a number (None printed ``\\text{None}``).
    """
    if isinstance(expr, bool) or not isinstance(expr, sympy.Basic | int | float):
        raise CostModelError(
            f"expr must be a sympy expression or a number, got {type(expr).__name__} {expr!r:.40}"
        )
    return sympy.latex(expr)


def checked_dtype(value: object, field: str = "dtype") -> DTypeLike:
    """A derivation's dtype argument: a name (``"bf16"``), a :class:`DType`, or a *symbolic*
    bytes per element (``quantity("b")``) for a closed form that keeps it abstract. A number
    of bytes, plain (``2``) or sympy (``sympy.Integer(2)``), is refused alike: it names no
    precision, so no roof (bf16 and fp16 are both 2 bytes).

    Parameters
    ----------
    value : str, DType or sympy.Expr
        What the caller gave.
    field : str, default "dtype"
        The parameter's name, for the error.

    Returns
    -------
    str, DType or sympy.Expr
        ``value`` itself.

    Raises
    ------
    UnknownDTypeError
        When ``value`` is a number, or none of the three.

    >>> checked_dtype(2)
    Traceback (most recent call last):
    ...
    costmodel.errors.UnknownDTypeError: dtype must be a dtype name such as 'bf16', a DType, or a symbolic bytes per element such as quantity('b'), got int 2 (a number of bytes names no precision)
    """
    if isinstance(value, str | DType) or (isinstance(value, sympy.Expr) and value.free_symbols):
        return value
    raise UnknownDTypeError(
        f"{field} must be a dtype name such as 'bf16', a DType, or a symbolic bytes per element such as "
        f"quantity('b'), got {type(value).__name__} {value!r:.40} (a number of bytes names no precision)"
    )


def balance_point(
    hw: Hardware | str | None = None, unit: str = "tensor", precision: str = "bf16", level: str = "dram"
) -> sympy.Expr:
    """Ridge point ``I* = P_{unit,precision} / beta_level`` (FLOP/byte).

    Parameters
    ----------
    hw : Hardware or str, optional
        The device, or a catalog name or alias; None: :meth:`Hardware.symbolic` (``P``, ``beta``).
    unit : str, default "tensor"
        The compute unit: ``tensor``, ``vector`` or ``sfu``.
    precision : str, default "bf16"
        The roof's precision (a roof key such as ``bf16``, ``fp8``); a device with no roof for
        it but a wildcard one (a symbolic device) uses the wildcard, and one that publishes no
        bf16 rate the roof that bounds its bf16 matmuls (:meth:`Hardware.balance`).
    level : str, default "dram"
        The memory level whose bandwidth divides.

    Returns
    -------
    sympy.Expr
        ``I*`` in FLOP per byte.

    >>> balance_point()
    P/beta
    """
    hw = _device(hw)
    if hw.peak(unit, precision) is None and hw.peak(unit, WILDCARD) is not None:
        precision = WILDCARD  # a symbolic device's one roof
    return hw.balance(unit, precision, level)


def op_intensity(cost: Cost, unit: str | None = None, level: str = "dram") -> sympy.Expr:
    """``F / D`` of a cost, optionally counting one unit's FLOPs only.

    Parameters
    ----------
    cost : Cost
        The work.
    unit : str, optional
        Count only this unit's FLOPs (``tensor``, ``vector``, ``sfu``); None: every unit's.
    level : str, default "dram"
        The memory level whose bytes (read plus written) divide.

    Returns
    -------
    sympy.Expr
        FLOP per byte.

    >>> from costmodel.symbols import M, N, K
    >>> op_intensity(op_cost("gemm", M=M, N=N, K=K))  # one MAC = 2 FLOP; bf16 = 2 B
    2*K*M*N/(2*K*M + 2*K*N + 2*M*N)
    """
    return _checked_cost(cost).intensity_at(level, unit)


def _cost_precision(cost: Cost, unit: str) -> str:
    precs = {p for (u, p) in cost.flop_terms if u == unit}
    if len(precs) != 1:
        raise CostModelError(
            f"cost has {unit} FLOPs at {sorted(precs) or 'no'} precision(s); pass precision explicitly"
        )
    return precs.pop()


@dataclass(frozen=True)
class Crossover:
    """Where an op turns compute-bound along one dimension.

    ``exact`` solves ``I(x) = I*`` exactly; ``integer`` is the smallest whole
    ``x`` with ``I(x) >= I*`` (numeric cases only); ``asymptotic`` solves the
    limit form with the ``large`` dimensions sent to infinity; ``intensity``
    and ``balance`` are the two sides of the equation. ``condition``, where
    ``exact`` still holds symbols (a symbolic shape or device), is when it is a
    crossover at all: the root positive, i.e. the op turns compute-bound
    somewhere (e.g. ``x > 20262912/63661`` for ``[M,4096] x [4096,x]`` in bf16
    on an H100); None where ``exact`` is a number or None.
    """

    variable: sympy.Symbol
    intensity: sympy.Expr
    balance: sympy.Expr
    exact: sympy.Expr | None
    asymptotic: sympy.Expr | None
    integer: int | None
    condition: sympy.Basic | None = None

    def to_dict(self) -> dict[str, Any]:
        def v(e: sympy.Expr | None) -> Any:
            if e is None:
                return None
            e = to_expr(e)
            return as_float(e) if not e.free_symbols else str(e)

        return {
            "variable": str(self.variable),
            "intensity": str(self.intensity),
            "balance": v(self.balance),
            "exact": v(self.exact),
            "asymptotic": v(self.asymptotic),
            "integer": self.integer,
            "condition": None if self.condition is None else str(self.condition),
            "exact_latex": latex(self.exact) if self.exact is not None else None,
            "asymptotic_latex": latex(self.asymptotic) if self.asymptotic is not None else None,
        }


def _positive_root(eq: sympy.Expr, x: sympy.Symbol) -> sympy.Expr | None:
    # solve over a real positive helper so sympy can discard negative branches
    y = quantity(f"{x.name}_real")
    sols = [s for s in sympy.solve(sympy.Eq(eq.subs(x, y), 0), y) if s.is_positive is not False]
    if not sols:
        return None
    sols = [_tidy(sympy.simplify(s)) for s in sols]
    return sols[0] if len(sols) == 1 else sympy.Min(*sols)


def _root_condition(root: sympy.Expr) -> sympy.Basic | None:
    """When a symbolic root is positive (None for a number): ``root > 0`` stated on the
    denominator where the numerator's sign is known (``63661*x + 63661*y - 20262912 > 0``), and
    solved for the symbol where there is one (``x > 20262912/63661``)."""
    syms = to_expr(root).free_symbols
    if not syms:
        return None
    num, den = sympy.fraction(sympy.together(root))
    if num.is_positive:
        cond: sympy.Basic = sympy.expand(den) > 0
    elif num.is_negative:
        cond = sympy.expand(-den) > 0
    else:
        cond = root > 0
    return solved_condition(cond)


def solved_condition(cond: sympy.Basic) -> sympy.Basic:
    """A condition on one symbol (a relation, or ``&``, ``|``, ``~`` of relations) solved for it
    over the symbol's domain (the positive reals for a dimension, from 0 for a count), the
    symbol on the left (``20262912*x/(63661*x - 20262912) > 0`` -> ``x >
    20262912/63661``; ``128*x/(x + 128) >= 295`` -> ``False``; ``(x > 1000 | x < 681.7) & (1000
    - x > 0)`` -> ``x < 681.7``): ``True`` or ``False`` where it holds for every value or none;
    one on several symbols, or one sympy cannot solve, as given.

    >>> x = quantity("x")
    >>> solved_condition(2 * x - 6 > 0)
    x > 3
    """
    syms = cond.free_symbols
    logic = (sympy.core.relational.Relational, sympy.And, sympy.Or, sympy.Not)
    if len(syms) == 1 and isinstance(cond, logic):
        (s,) = syms
        if s.is_positive:
            domain: sympy.Set = sympy.Interval.open(0, sympy.oo)
        elif s.is_nonnegative:
            domain = sympy.Interval(0, sympy.oo)
        else:
            domain = sympy.S.Reals
        try:
            where = cond.as_set().intersect(domain)
        except (NotImplementedError, ValueError, TypeError, AttributeError):
            where = None  # kept as stated
        if where is not None:
            if where == sympy.S.EmptySet:
                return sympy.false
            if where == domain:
                return sympy.true
            cond = where.as_relational(s)
    if (
        isinstance(cond, sympy.core.relational.Relational)
        and cond.rhs.free_symbols
        and not cond.lhs.free_symbols
    ):
        cond = cond.reversed  # ``20262912/63661 < x`` -> ``x > 20262912/63661``
    return cond


def _tidy(expr: sympy.Expr) -> sympy.Expr:
    """``-a/(-b + c)`` -> ``a/(b - c)``: the same value, written to be read."""
    num, den = sympy.fraction(expr)
    if num.could_extract_minus_sign() and den.could_extract_minus_sign():
        return sympy.expand(-num) / sympy.expand(-den)
    return expr


def crossover(
    cost: Cost,
    variable: sympy.Symbol,
    hw: Hardware | str | None = None,
    *,
    unit: str = "tensor",
    precision: str | None = None,
    level: str = "dram",
    large: Sequence[sympy.Symbol] = (),
) -> Crossover:
    """Solve ``I_unit(variable) = P_unit / beta_level`` for ``variable``.

    The intensity counts ``unit``'s FLOPs only, since that roof is the one
    compared. ``large`` lists dimensions taken to infinity (in order) for the
    asymptotic form, e.g. ``(N, K)`` for a GEMM with ``M << N, K``.

    Parameters
    ----------
    cost : Cost
        The op, with ``variable`` among its symbols.
    variable : sympy.Symbol
        The dimension solved for (``M``: tokens).
    hw : Hardware or str, optional
        The device, or a catalog name or alias; None: :meth:`Hardware.symbolic` (``P``, ``beta``).
    unit : str, default "tensor"
        The compute unit whose roof is compared.
    precision : str, optional
        The roof's precision; None: the one precision ``cost`` has FLOPs at on ``unit``.
    level : str, default "dram"
        The memory level.
    large : sequence of sympy.Symbol, default ()
        Dimensions sent to infinity, in order, for :attr:`Crossover.asymptotic`.

    Returns
    -------
    Crossover
        The exact root (a number of elements of ``variable``), its smallest whole value, the
        asymptote, and the condition for a root where it is symbolic.

    Raises
    ------
    CostModelError
        When ``cost`` is not a :class:`Cost`, ``variable`` not one of its symbols, or ``precision``
        is None and the cost has FLOPs at several (or no) precisions on ``unit``.
    UnknownDeviceError
        When ``hw`` is neither a :class:`Hardware`, a catalog name nor None.

    >>> from costmodel.symbols import M
    >>> crossover(op_cost("gemm", M=M, N=4096, K=4096), M, "h100").integer  # as gemm_crossover
    346
    """
    cost = _checked_cost(cost)
    if not isinstance(variable, sympy.Symbol):
        raise CostModelError(
            f"variable must be a sympy Symbol of the cost (dim('M'), costmodel.symbols.M), got "
            f"{type(variable).__name__} {variable!r:.40}"
        )
    if variable not in cost.free_symbols:  # no root for want of the variable, not of a crossover
        have = ", ".join(sorted(map(str, cost.free_symbols))) or "none: the cost is numeric"
        raise CostModelError(f"variable {variable} is not a symbol of the cost (its symbols: {have})")
    hw = _device(hw)
    prec = precision or _cost_precision(cost, unit)
    if hw.peak(unit, prec) is None and hw.peak(unit, WILDCARD) is not None:
        prec = WILDCARD
    balance = hw.balance(unit, prec, level)
    inten = sympy.simplify(cost.intensity_at(level, unit))
    exact = _positive_root(sympy.together(inten - balance).as_numer_denom()[0], variable)
    asym = None
    if large:
        lim = inten
        for s in large:
            lim = sympy.limit(lim, s, sympy.oo)
        asym = _positive_root(sympy.together(lim - balance).as_numer_denom()[0], variable)
    integer = None
    if exact is not None and not to_expr(exact).free_symbols:
        cand = max(1, math.ceil(as_float(exact)))
        f = sympy.lambdify(variable, inten - balance, "sympy")
        while cand > 1 and f(cand - 1) >= 0:  # guard against rounding of the float root
            cand -= 1
        while f(cand) < 0:
            cand += 1
        integer = cand
    cond = _root_condition(exact) if exact is not None else None
    return Crossover(variable, inten, balance, exact, asym, integer, cond)


def gemm_crossover(
    *,
    N: object,
    K: object,
    hw: Hardware | str | None = None,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike | None = None,
) -> Crossover:
    """The batch/token count ``M*`` at which ``[M,K] x [K,N]`` turns compute-bound.

    Solving ``2MNK / (a MK + w KN + o MN) = I*`` (one dtype ``b``) gives

    .. math::

        M^* = \\frac{I^* b / 2}{1 - \\frac{I^* b}{2}\\left(\\frac1N + \\frac1K\\right)}
        \\;\\xrightarrow{N,K\\to\\infty}\\; \\frac{I^* b}{2}

    and for weight-only quantised weights (``w`` bytes, e.g. int8 under bf16
    activations) the asymptote is ``I* w / 2``: half the bf16 value.

    ``out_dtype`` defaults to what GEMM kernels write: the operand dtype for 16- and 32-bit
    formats, bf16 for 8-bit and narrower ones (FP8, NVFP4 and MXFP4 GEMMs accumulate in fp32 and
    write bf16: cuBLASLt's and CUTLASS's block-scaled GEMMs emit a 16-bit D). Pass it to model a
    kernel that writes the narrow format.

    ``N`` and ``K`` may be symbolic: ``exact`` is then ``M*`` in their symbols and ``condition``
    the shapes for which it exists (``[M,4096] x [4096,x]`` in bf16 on an H100:
    ``M* = 20262912 x / (63661 x - 20262912)`` for ``x > 20262912/63661 = 318.29``). ``asymptotic``
    is the limit ``N, K -> oo`` for every shape, numeric or not.

    Parameters
    ----------
    N, K : int or sympy.Expr
        The weight's output and contraction widths (elements), positive.
    hw : Hardware or str, optional
        The device or a catalog name (its tensor roof at the compute precision, FLOP/s, and DRAM
        bandwidth, B/s); None: :meth:`Hardware.symbolic` (``P``, ``beta``).
    dtype : str, DType or sympy.Expr, default "bf16"
        The activations' format: a name, or a symbolic bytes per element (``quantity("b")``) for
        the closed form; a number of bytes (``2`` or ``sympy.Integer(2)``) is refused, as it names
        no roof (:func:`checked_dtype`).
    w_dtype : str, DType or sympy.Expr, optional
        The weights' format (weight-only quantisation: ``int8``); None: ``dtype``.
    out_dtype : str, DType or sympy.Expr, optional
        The output's format; None: what GEMM kernels write (above).
    compute_dtype : str, DType or sympy.Expr, optional
        The precision the matmul runs at (its roof); None: the gemm rule's default for the operands.

    Returns
    -------
    Crossover
        ``M*`` in tokens: ``exact``, ``integer`` (numeric shapes), ``asymptotic`` and ``condition``.

    Raises
    ------
    UnknownDTypeError
        When a dtype is a number or an unknown name.

    >>> from costmodel.hardware import get_device
    >>> gemm_crossover(N=4096, K=4096, hw=get_device("h100")).integer  # 295.3 / (1 - 295.3 * 2/4096)
    346
    """
    dtype = checked_dtype(dtype)
    for value, field in ((w_dtype, "w_dtype"), (out_dtype, "out_dtype"), (compute_dtype, "compute_dtype")):
        if value is not None:
            checked_dtype(value, field)
    out_dtype = gemm_out_dtype(dtype, out_dtype)
    cost = op_cost(
        "gemm",
        M=M_sym,
        N=N,
        K=K,
        dtype=dtype,
        w_dtype=w_dtype,
        out_dtype=out_dtype,
        compute_dtype=compute_dtype,
    )
    n_sym, k_sym = dim("N"), dim("K")
    if check_dim(N, "N") == n_sym and check_dim(K, "K") == k_sym:
        return crossover(cost, M_sym, hw, large=(n_sym, k_sym))
    # the asymptote is the limit N, K -> oo whatever the shape (a symbol among N and K included):
    # the M << N, K crossover, the same for every shape on this device and these dtypes
    sym_cost = op_cost(
        "gemm",
        M=M_sym,
        N=n_sym,
        K=k_sym,
        dtype=dtype,
        w_dtype=w_dtype,
        out_dtype=out_dtype,
        compute_dtype=compute_dtype,
    )
    asym = crossover(sym_cost, M_sym, hw, large=(n_sym, k_sym)).asymptotic
    out = replace(crossover(cost, M_sym, hw), asymptotic=asym)
    if out.condition is None:
        return out
    # a shape is one whose N and K are positive (``--N 100-x`` holds only for x < 100): the
    # root's condition joined with theirs, and no crossover where none of the shapes has one
    dims = [to_expr(v) for v in (N, K)]
    cond = solved_condition(sympy.And(out.condition, *(e > 0 for e in dims if e.free_symbols)))
    if cond is sympy.false:
        return replace(out, exact=None, condition=None)
    return replace(out, condition=cond)


def gemm_crossover_form(
    *,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
) -> tuple[Crossover, dict[sympy.Symbol, sympy.Expr]]:
    """The closed form of :func:`gemm_crossover` for these dtypes, and the bytes per element
    each of its byte symbols stands for.

    One symbol ``b`` when activations, weights and output share a width, giving
    ``M* = K N P b / (2 K N beta - K P b - N P b)``; otherwise ``a``, ``w`` and ``o``
    (activation, weight and output bytes per element, B):

    .. math::

        M^* = \frac{K N P w}{2 K N \beta - K P a - N P o}

    Substituting the returned bytes, the device's ``P`` (tensor roof at the compute
    precision, FLOP/s) and ``beta`` (DRAM, B/s) and ``N``, ``K`` gives the numeric ``M*``.

    >>> form, at = gemm_crossover_form(w_dtype="int8")
    >>> form.asymptotic, sorted((str(k), v) for k, v in at.items())
    (P*w/(2*beta), [('a', 2), ('o', 2), ('w', 1)])
    """
    out = gemm_out_dtype(dtype, out_dtype)
    widths = {
        "a": get_dtype(dtype).bytes,
        "w": get_dtype(w_dtype if w_dtype is not None else dtype).bytes,
        "o": get_dtype(out if out is not None else dtype).bytes,
    }
    if len(set(widths.values())) == 1:
        b = quantity("b")
        form = gemm_crossover(N=dim("N"), K=dim("K"), dtype=b)
        return form, {b: widths["a"]}
    syms = {k: quantity(k) for k in widths}
    form = gemm_crossover(N=dim("N"), K=dim("K"), dtype=syms["a"], w_dtype=syms["w"], out_dtype=syms["o"])
    return form, {syms[k]: v for k, v in widths.items()}


def decode_attention_intensity(
    heads: object, kv_heads: object, dtype: DTypeLike = "bf16", head_dim: object = 128
) -> sympy.Expr:
    """Tensor-unit intensity of one decode step's attention, ``ctx -> oo``.

    One query per head over ``ctx`` cached keys: ``F = 4 H ctx d`` matmul
    FLOPs against ``2 H_kv ctx d b`` bytes of K and V, so

    .. math::

        I = \\lim_{ctx\\to\\infty} \\frac{F_\\text{tensor}}{D} = \\frac{2 H}{H_{kv}\\, b}

    independent of context, batch and head dim: the GQA reuse factor
    ``H/H_kv`` is the only lever (seeds/prefill_decode_roofline.py).

    Parameters
    ----------
    heads : int or sympy.Expr
        Query heads ``H``.
    kv_heads : int or sympy.Expr
        Key/value heads ``H_kv`` (GQA: fewer than ``heads``).
    dtype : str, DType or sympy.Expr, default "bf16"
        The KV cache's format, or a symbolic bytes per element ``b`` (:func:`checked_dtype`).
    head_dim : int or sympy.Expr, default 128
        Elements per head (it cancels in the limit).

    Returns
    -------
    sympy.Expr
        Tensor FLOP per DRAM byte.

    >>> decode_attention_intensity(28, 4)
    7
    """
    dtype = checked_dtype(dtype)
    c = op_cost(
        "attention",
        batch=1,
        heads=heads,
        kv_heads=kv_heads,
        q_len=1,
        kv_len=ctx,
        head_dim=head_dim,
        dtype=dtype,
    )
    return sympy.simplify(sympy.limit(c.intensity_at("dram", "tensor"), ctx, sympy.oo))


def tile_intensity(tile_m: object, tile_n: object, dtype: DTypeLike = "bf16") -> sympy.Expr:
    """Intensity of one output tile of a blocked matmul, per DRAM byte.

    A ``tile_m x tile_n`` tile streams ``tile_m x K`` of A and ``K x tile_n``
    of W and writes its outputs once; as ``K`` grows the write vanishes:

    .. math::

        I_\\text{tile} = \\lim_{K\\to\\infty}\\frac{2\\,t_m t_n K}{b\\,(t_m K + K t_n + t_m t_n)}
        = \\frac{2\\,t_m t_n}{b\\,(t_m + t_n)}

    Parameters
    ----------
    tile_m, tile_n : int or sympy.Expr
        The tile's rows and columns (elements), positive.
    dtype : str, DType or sympy.Expr, default "bf16"
        The operands' format, or a symbolic bytes per element ``b`` (:func:`checked_dtype`).

    Returns
    -------
    sympy.Expr
        FLOP per DRAM byte.

    >>> tm, tn = dim("t_m"), dim("t_n")
    >>> tile_intensity(tm, tn)
    t_m*t_n/(t_m + t_n)
    """
    dtype = checked_dtype(dtype)
    k = dim("K_tile")
    tm, tn = check_dim(tile_m, "tile_m"), check_dim(tile_n, "tile_n")
    c = op_cost("gemm", M=tm, N=tn, K=k, dtype=dtype)
    return sympy.simplify(sympy.limit(c.intensity_at("dram", "tensor"), k, sympy.oo))


def tile_compute_bound(
    tile_m: object, tile_n: object, hw: Hardware | str, dtype: DTypeLike = "bf16"
) -> sympy.Basic:
    """Whether a ``tile_m x tile_n`` tile of a blocked matmul is compute-bound on ``hw``: its
    :func:`tile_intensity` at least the device's ridge ``I* = P / beta`` for ``dtype`` (FLOP/B),

    .. math:: \\frac{2\\,t_m t_n}{b\\,(t_m + t_n)} \\ge I^*,

    ``sympy.true`` or ``sympy.false`` for a numeric tile, or for a symbolic one where the answer
    is the same for every positive side; else the condition, solved for the symbol where it is
    one (:func:`solved_condition`), joined with the sides being positive (a side ``100 - x`` is
    a width only for ``x < 100``).

    Parameters
    ----------
    tile_m, tile_n : int or sympy expression
        The tile's rows and columns (elements; positive).
    hw : Hardware or str
        The device, or a catalog name or alias: its tensor roof for ``dtype`` and its DRAM
        bandwidth.
    dtype : str or DType
        The operands' data type (default ``bf16``).

    Returns
    -------
    sympy.Basic
        ``true``, ``false`` or the condition.

    >>> from costmodel.hardware import get_device
    >>> x = quantity("x")
    >>> tile_compute_bound(x, x, get_device("h100"))  # x / 2 >= 19788/67
    x >= 39576/67
    >>> tile_compute_bound(128, 128, get_device("h100"))  # 64 FLOP/B
    False
    """
    tm, tn = check_dim(tile_m, "tile_m"), check_dim(tile_n, "tile_n")
    i = tile_intensity(tm, tn, dtype)
    hw = _device(hw, symbolic=False)
    ridge = hw.balance("tensor", get_dtype(dtype).roof)
    if not i.free_symbols:
        return sympy.true if bool(i >= ridge) else sympy.false
    sides = [e > 0 for e in (to_expr(tm), to_expr(tn)) if e.free_symbols]
    return solved_condition(sympy.And(sympy.Ge(i, ridge), *sides))


@dataclass(frozen=True)
class NetworkSplit(Result):
    """Network roofline of a row-parallel matmul (see :func:`split_matmul_network`)."""

    network_intensity: sympy.Expr  #: tensor FLOPs per byte on the link, ``K / ((p-1) b)``
    network_ridge: sympy.Expr  #: ``P / beta_link``
    K_star: sympy.Expr | None  #: contraction length at which the link and the math take equally long


def split_matmul_network(
    *,
    K: object = None,
    p: object = None,
    dtype: DTypeLike = "bf16",
    hw: Hardware | str | None = None,
    link: str = "scale_up",
    precision: str | None = None,
) -> NetworkSplit:
    """Network roofline of a row-parallel matmul split over ``p`` devices.

    Each device multiplies ``[M, K/p] x [K/p, N]`` and the partial sums are
    all-reduced (ring): ``F = 2MNK/p`` per device against
    ``2 (p-1)/p * M N b`` bytes on the link, so the *network intensity* and
    the contraction length that keeps the link busy no longer than the math:

    .. math::

        I_\\text{net} = \\frac{K}{(p-1)\\,b}, \\qquad
        I^*_\\text{net} = \\frac{P}{\\beta_\\text{link}}, \\qquad
        K^* = (p-1)\\,b\\,\\frac{P}{\\beta_\\text{link}}

    Both come from the ``gemm`` and ``all_reduce`` rules. Latency (the
    ``2(p-1)`` ring steps) is left out of the ridge; the bound includes it.

    Parameters
    ----------
    K : int or sympy.Expr, optional
        The contraction length (elements); None: the symbol ``K``.
    p : int or sympy.Expr, optional
        Devices the contraction is split over (at least 2 to communicate); None: the symbol ``p``.
    dtype : str, DType or sympy.Expr, default "bf16"
        The operands' and partial sums' format, or a symbolic bytes per element
        (:func:`checked_dtype`).
    hw : Hardware or str, optional
        The device, or a catalog name or alias; None: :meth:`Hardware.symbolic` (``P``, link
        bandwidth ``beta_scale_up``).
    link : str, default "scale_up"
        The link the all-reduce crosses.
    precision : str, optional
        The tensor roof's precision; None: the matmul's.

    Returns
    -------
    NetworkSplit
        The network intensity (FLOP per link byte), the link ridge ``P / beta_link`` and ``K*``
        (elements), None where no positive root exists.

    Raises
    ------
    CostModelError
        When ``p`` is 1 (nothing is communicated).

    >>> split_matmul_network().network_intensity
    K/(2*(p - 1))
    """
    dtype = checked_dtype(dtype)
    m, n = dim("M"), dim("N")
    k = dim("K") if K is None else check_dim(K, "K")
    pp = dim("p") if p is None else check_dim(p, "p")
    hw = _device(hw)
    mm = op_cost("gemm", M=m, N=n, K=k / pp, dtype=dtype)  # this device's slice of the contraction
    ar = op_cost("all_reduce", elements=m * n, p=pp, dtype=dtype, link=link)
    if not ar.comm_terms:
        raise CostModelError("p = 1: nothing is communicated")
    intensity = sympy.simplify(mm.flops_on("tensor") / ar.comm_terms[link])
    prec = precision or _cost_precision(mm, "tensor")
    if hw.peak("tensor", prec) is None and hw.peak("tensor", WILDCARD) is not None:
        prec = WILDCARD
    ridge = hw.require_peak("tensor", prec) / hw.link(link).bandwidth_bytes_per_s
    kk = quantity("K_")
    k_star = sympy.solve(sympy.Eq(intensity.subs(k, kk) if k.free_symbols else intensity, ridge), kk)
    return NetworkSplit(intensity, ridge, k_star[0] if k_star else None)
