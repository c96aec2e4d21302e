"""Safe parsing of user-supplied expressions.

Command-line arguments and hardware files may hold expressions such as
``"B*S"`` or ``"2*hidden_size + 1"``. They are parsed with Python's ``ast``
into a whitelist of nodes (numbers, names, ``+ - * / **`` and parentheses)
and built into sympy directly: no ``eval`` and no ``sympify`` on the text.
Names become dimension symbols (see :func:`costmodel.symbols.dim`) unless the
caller passes its own symbol table.

>>> parse_expr("B*S + 1")
B*S + 1
>>> parse_expr("__import__('os')")
Traceback (most recent call last):
...
costmodel.errors.ExpressionSyntaxError: expression "__import__('os')": function calls are not allowed; use numbers, names, + - * / ** and parentheses
"""

from __future__ import annotations

import ast
import math
import numbers
from collections.abc import Callable, Mapping
from fractions import Fraction

import sympy

from .errors import ExpressionSyntaxError
from .symbols import symbol

__all__ = ["parse_expr", "to_expr"]

_BINOPS: dict[type, Callable[[sympy.Expr, sympy.Expr], sympy.Expr]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_MAX_LEN = 500
_GRAMMAR = "use numbers, names, + - * / ** and parentheses"


#: names that read as a non-finite number (Python's, NumPy's and sympy's spellings): refused as
#: symbols, whose results read like NaN or infinity ("T >= 4.776 ps*oo")
_NOT_FINITE_NAMES = frozenset({"nan", "inf", "infinity", "oo", "zoo"})


def parse_expr(
    text: str, symbols: Mapping[str, sympy.Expr] | None = None, *, field: str = "expression"
) -> sympy.Expr:
    """Parse ``text`` into a sympy expression using a fixed safe grammar.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"4096"``, ``"1.555e12"``, ``"B*S"``.
    symbols : mapping of str to sympy.Expr, optional
        Table of names to expressions; names not in it become
        positive-integer dimension symbols.
    field : str, default "expression"
        Name used in error messages.

    Returns
    -------
    sympy.Expr
        The expression. Decimal literals become exact rationals (``1.5e12`` ->
        ``1500000000000``).

    Raises
    ------
    ExpressionSyntaxError
        Outside the grammar; a number not finite, not real or beyond +-1e300; an exponent
        beyond +-1024; a degree in its names above :data:`MAX_DEGREE` or more than
        :data:`MAX_TERMS` terms once expanded (``(x + 1)**1000``).

    >>> parse_expr("2*B*S + 1.5e3")  # B and S are the batch and prompt dimensions
    2*B*S + 1500
    """
    if not isinstance(text, str):
        raise ExpressionSyntaxError(f"{field} must be a string, got {type(text).__name__}")
    if len(text) > _MAX_LEN:
        raise ExpressionSyntaxError(f"{field} is longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionSyntaxError(f"{field} {text!r} is not a valid expression: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionSyntaxError(f"{field} {text!r} is nested too deeply to parse") from None
    return _check_size(_build(tree.body, text, symbols or {}, field), text, field)


#: highest degree accepted: the sum of the exponents of a product's names (``B*S*ctx`` is 3,
#: ``(x + 1)**8`` is 8). A dimension or roof is never of a higher one, and sympy's simplification
#: and solving grow with it: ``(x + 1)**1000`` passed every other check and spun for minutes.
MAX_DEGREE = 8
#: most terms an expression may expand to (``(a + b + c)**8`` expands to 45)
MAX_TERMS = 64


def _degree(value: sympy.Expr) -> float:
    """The expression's degree in its names, counted without expanding it (a quotient's
    denominator adds its degree; a name in an exponent counts as one factor)."""
    if value.is_number:
        return 0.0
    if value.is_Symbol:
        return 1.0
    if value.is_Add:
        return max(_degree(a) for a in value.args)
    if value.is_Pow:
        base, exp = value.args
        if exp.is_number:
            return _degree(base) * abs(float(exp))
        return _degree(base) + _degree(exp)
    return sum(_degree(a) for a in value.args)


def _terms(value: sympy.Expr) -> int:
    """How many terms the expression expands to, at most, counted without expanding it (call
    only once :func:`_degree` is bounded: the exponents on names are then small)."""
    if value.is_number or value.is_Symbol:
        return 1
    if value.is_Add:
        return sum(_terms(a) for a in value.args)
    if value.is_Mul:
        return math.prod(_terms(a) for a in value.args)
    if value.is_Pow:
        base, exp = value.args
        if exp.is_number:
            n, e = _terms(base), int(abs(float(exp)))
            return math.comb(n + e - 1, e) if e else 1
        return 1
    return 1


def _check_size(value: sympy.Expr, text: str, field: str) -> sympy.Expr:
    """Refuse an expression of a degree above :data:`MAX_DEGREE` or more than :data:`MAX_TERMS`
    terms once expanded: no shape is one, and the symbolic work on it would run for minutes."""
    if value.is_number:
        return value
    degree = _degree(value)
    if degree > MAX_DEGREE:
        raise ExpressionSyntaxError(
            f'{field} "{text}": degree {degree:g} is too high (at most {MAX_DEGREE} in its names)'
        )
    terms = _terms(value)
    if terms > MAX_TERMS:
        raise ExpressionSyntaxError(
            f'{field} "{text}": expands to {terms} terms, too many (at most {MAX_TERMS})'
        )
    return value


#: deepest nesting of operators accepted
_MAX_DEPTH = 40
#: largest exponent accepted (``x**e`` with ``|e| <= 1024``)
_MAX_EXPONENT = 1024
#: numbers beyond this magnitude cannot become floats (double precision tops out at 1.8e308)
_MAX_BITS = 1000  # 2**1000 = 1.07e301


def _check_number(value: sympy.Expr, text: str, field: str) -> sympy.Expr:
    """Refuse numbers that are not finite reals, or too large to ever become a float."""
    if not value.is_number:
        return value
    if value.is_real is False:
        raise ExpressionSyntaxError(f'{field} "{text}": not a real number ({value})')
    if value.is_finite is False or value.has(sympy.nan, sympy.zoo):
        raise ExpressionSyntaxError(f'{field} "{text}": not a finite number')
    if isinstance(value, sympy.Rational) and max(abs(value.p).bit_length(), value.q.bit_length()) > _MAX_BITS:
        raise ExpressionSyntaxError(f'{field} "{text}": a number beyond +-1e300 is out of range')
    return value


def _pow(base: sympy.Expr, exp: sympy.Expr, text: str, field: str) -> sympy.Expr:
    if exp.is_number:
        if abs(exp) > _MAX_EXPONENT:
            raise ExpressionSyntaxError(
                f'{field} "{text}": exponent {exp} is out of range (|e| <= {_MAX_EXPONENT})'
            )
        if base.is_number and base != 0 and isinstance(base, sympy.Rational):
            # |result| ~ 2**(e * log2|base|): refuse before computing a huge integer
            bits = max(abs(base.p).bit_length(), base.q.bit_length())
            if abs(exp) * bits > 2 * _MAX_BITS:
                raise ExpressionSyntaxError(f'{field} "{text}": {base}**{exp} is out of range (|x| <= 1e300)')
    return base**exp


def _build(
    node: ast.AST, text: str, symbols: Mapping[str, sympy.Expr], field: str, depth: int = 0
) -> sympy.Expr:
    if depth > _MAX_DEPTH:
        raise ExpressionSyntaxError(f'{field} "{text}": nested more than {_MAX_DEPTH} levels deep')
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionSyntaxError(f'{field} "{text}": only numeric literals are allowed')
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise ExpressionSyntaxError(f'{field} "{text}": {node.value} is not a finite number')
        if isinstance(node.value, int):
            if node.value.bit_length() > _MAX_BITS:
                raise ExpressionSyntaxError(f'{field} "{text}": a number beyond +-1e300 is out of range')
            return sympy.Integer(node.value)
        return _check_number(sympy.Rational(repr(node.value)), text, field)
    if isinstance(node, ast.Name):
        if node.id in symbols:
            return symbols[node.id]
        if node.id.lower() in _NOT_FINITE_NAMES:  # read as a symbol it printed as a result ("32*nan")
            raise ExpressionSyntaxError(
                f'{field} "{text}": {node.id} is not a finite number (a name that reads as one is not a dimension)'
            )
        return symbol(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _build(node.left, text, symbols, field, depth + 1)
        right = _build(node.right, text, symbols, field, depth + 1)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ExpressionSyntaxError(f'{field} "{text}": division by zero')
        if isinstance(node.op, ast.Pow):
            return _check_number(_pow(left, right, text, field), text, field)
        return _check_number(_BINOPS[type(node.op)](left, right), text, field)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _build(node.operand, text, symbols, field, depth + 1)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise ExpressionSyntaxError(f'{field} "{text}": ^ is not a power here; write ** (2**3 is 8)')
    if isinstance(node, ast.Call):
        raise ExpressionSyntaxError(f'{field} "{text}": function calls are not allowed; {_GRAMMAR}')
    raise ExpressionSyntaxError(f'{field} "{text}": {type(node).__name__} is not allowed; {_GRAMMAR}')


def to_expr(value: object, *, field: str = "value") -> sympy.Expr:
    """Convert a number, sympy expression or safe expression string to sympy.

    Floats become exact rationals of their shortest decimal form, so
    ``1555e9`` stays the integer ``1555000000000``; numpy scalars are taken as the Python
    number they hold (``np.float64(2.0)`` is 2, ``np.int64(8)`` is 8).

    Parameters
    ----------
    value : int, float, sympy.Expr or str
        The value (a numpy integer or floating scalar too); a string is parsed by
        :func:`parse_expr`.
    field : str, default "value"
        The parameter's name, for the error.

    Returns
    -------
    sympy.Expr
        The value as an exact sympy expression.

    Raises
    ------
    ExpressionSyntaxError
        When ``value`` is a bool, NaN or infinite, of another type, or text outside the grammar.

    >>> to_expr(1555e9)
    1555000000000
    """
    if isinstance(value, bool):
        raise ExpressionSyntaxError(f"{field} must be a number or expression, got {value!r}")
    if isinstance(value, sympy.Basic):
        if not isinstance(value, sympy.Expr):
            raise ExpressionSyntaxError(f"{field} must be an expression, got {value!r}")
        return value
    if isinstance(value, numbers.Integral):  # int, and numpy's integer scalars
        return sympy.Integer(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, Fraction):  # float, numpy's floats
        f = float(value)
        if not math.isfinite(f):
            raise ExpressionSyntaxError(f"{field} must be finite, got {value!r}")
        return sympy.Rational(repr(f))
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    if isinstance(value, str):
        return parse_expr(value, field=field)
    raise ExpressionSyntaxError(
        f"{field} must be a number, a sympy expression or an expression string, got {type(value).__name__}"
    )
