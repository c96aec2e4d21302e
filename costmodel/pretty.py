"""Symbolic output as a person writes it: times with units instead of raw rationals, and fractions
without double negatives.

>>> import sympy
>>> from costmodel.symbols import dim, quantity
>>> B, S = dim("B"), dim("S")
>>> time_expr(sympy.Max(8192*B*S/241552734375, 16*B*S/3271484375 + sympy.Rational(32768, 3271484375)))
'max(33.91 ns*B*S, 4.891 ns*B*S + 10.02 us)'
>>> K, N, P, b, beta = dim("K"), dim("N"), quantity("P"), quantity("b"), quantity("beta")
>>> tidy_signs(-K*N*P*b/(-2*K*N*beta + K*P*b + N*P*b))
'K*N*P*b/(2*K*N*beta - K*P*b - N*P*b)'
"""

from __future__ import annotations

import math

import sympy

__all__ = ["time_expr", "tidy_signs", "seconds"]

_PREFIXES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps"), (1e-15, "fs"))


def seconds(t: float) -> str:
    """A time in seconds with the prefix that puts it in [1, 1000), four significant digits
    (``1.002e-8 -> '10.02 ns'``); zero is ``0 s``."""
    if t == 0 or not math.isfinite(t):
        return f"{t:g} s"
    for scale, unit in _PREFIXES:
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-15:.4g} fs"


def _sum_of_times(expr: sympy.Expr) -> str:
    """``c1*m1 + c2*m2 + ...`` (seconds) with each numeric coefficient written as a time:
    ``'4.891 ns*B*S + 10.02 us'`` (the terms in symbols first); a coefficient that is not a number keeps its symbols."""
    parts = []
    terms = sympy.Add.make_args(sympy.expand(expr))
    for term in sorted(terms, key=lambda t: t.is_number):
        coeff, rest = term.as_coeff_Mul()
        text = seconds(float(coeff))
        parts.append(text if rest == 1 else f"{text}*{sympy.sstr(rest)}")
    return " + ".join(parts).replace("+ -", "- ")


def _expr(expr: sympy.Expr | float) -> sympy.Expr:
    """An engine-built expression as it is, a number as a sympy Float; text is refused (this
    module prints forms, it never parses them)."""
    if isinstance(expr, sympy.Basic):
        return expr
    if isinstance(expr, int | float) and not isinstance(expr, bool):
        return sympy.Float(expr)
    raise TypeError(f"expected a sympy expression or a number, got {type(expr).__name__}")


def time_expr(expr: sympy.Expr) -> str:
    """A symbolic time in seconds as a person writes it: ``Max``/``Min`` as ``max(...)``/``min(...)``
    of their arguments, each a sum whose numeric coefficients carry their unit (s, ms, us, ns, ps)
    instead of a raw rational, e.g. ``8192*B*S/241552734375`` -> ``33.91 ns*B*S``."""
    expr = _expr(expr)
    if isinstance(expr, (sympy.Max, sympy.Min)):
        name = "max" if isinstance(expr, sympy.Max) else "min"
        return f"{name}({', '.join(time_expr(a) for a in expr.args)})"
    if expr.is_number:
        return seconds(float(expr))
    if expr.has(sympy.Max, sympy.Min, sympy.ceiling, sympy.floor):
        return sympy.sstr(expr.evalf(4))  # a nested form: decimals, no units per coefficient
    return _sum_of_times(expr)


def tidy_signs(expr: sympy.Expr) -> str:
    """A fraction ``-n / d`` whose numerator carries the sign written as ``n / -d`` expanded, so no
    double negative is left (``-K*N/(-2*K + N)`` -> ``K*N/(2*K - N)``; a sum numerator in brackets,
    ``(19788*x - 1978800)/(962912 - 9827*x)``); the value is unchanged.

    >>> from costmodel.symbols import quantity
    >>> x = quantity("x")
    >>> tidy_signs(-(19788 * x - 1978800) / (9827 * x - 962912))
    '(19788*x - 1978800)/(962912 - 9827*x)'
    """
    expr = _expr(expr)
    n, d = sympy.fraction(expr)
    if d == 1 or not n.could_extract_minus_sign():
        return sympy.sstr(expr)
    n, d = -n, sympy.expand(-d)
    den = sympy.sstr(d)
    num = f"({sympy.sstr(n)})" if isinstance(n, sympy.Add) else sympy.sstr(n)
    return f"{num}/({den})" if isinstance(d, (sympy.Add, sympy.Mul)) else f"{num}/{den}"
