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
from collections.abc import Callable, Mapping

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


def parse_expr(
    text: str, symbols: Mapping[str, sympy.Expr] | None = None, *, field: str = "expression"
) -> sympy.Expr:
    """Parse ``text`` into a sympy expression using a fixed safe grammar.

    Parameters
    ----------
    text:
        The expression, e.g. ``"4096"``, ``"1.555e12"``, ``"B*S"``.
    symbols:
        Optional table of names to expressions; names not in it become
        positive-integer dimension symbols.
    field:
        Name used in error messages.

    Decimal literals become exact rationals (``1.5e12`` -> ``1500000000000``).
    """
    if not isinstance(text, str):
        raise ExpressionSyntaxError(f"{field} must be a string, got {type(text).__name__}")
    if len(text) > _MAX_LEN:
        raise ExpressionSyntaxError(f"{field} is longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionSyntaxError(f"{field} {text!r} is not a valid expression: {exc.msg}") from None
    return _build(tree.body, text, symbols or {}, field)


def _build(node: ast.AST, text: str, symbols: Mapping[str, sympy.Expr], field: str) -> sympy.Expr:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionSyntaxError(f'{field} "{text}": only numeric literals are allowed')
        if isinstance(node.value, int):
            return sympy.Integer(node.value)
        return sympy.Rational(repr(node.value))
    if isinstance(node, ast.Name):
        if node.id in symbols:
            return symbols[node.id]
        return symbol(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left = _build(node.left, text, symbols, field)
        right = _build(node.right, text, symbols, field)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ExpressionSyntaxError(f'{field} "{text}": division by zero')
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _build(node.operand, text, symbols, field)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call):
        raise ExpressionSyntaxError(f'{field} "{text}": function calls are not allowed; {_GRAMMAR}')
    raise ExpressionSyntaxError(f'{field} "{text}": {type(node).__name__} is not allowed; {_GRAMMAR}')


def to_expr(value: object, *, field: str = "value") -> sympy.Expr:
    """Convert a number, sympy expression or safe expression string to sympy.

    Floats become exact rationals of their shortest decimal form, so
    ``1555e9`` stays the integer ``1555000000000``.
    """
    if isinstance(value, bool):
        raise ExpressionSyntaxError(f"{field} must be a number or expression, got {value!r}")
    if isinstance(value, sympy.Basic):
        if not isinstance(value, sympy.Expr):
            raise ExpressionSyntaxError(f"{field} must be an expression, got {value!r}")
        return value
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ExpressionSyntaxError(f"{field} must be finite, got {value!r}")
        return sympy.Rational(repr(value))
    if isinstance(value, str):
        return parse_expr(value, field=field)
    raise ExpressionSyntaxError(
        f"{field} must be a number, a sympy expression or an expression string, got {type(value).__name__}"
    )
