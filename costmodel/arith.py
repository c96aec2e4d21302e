"""Arithmetic text to a Python function, safely and without sympy.

The persistent cache of compiled forms (:mod:`costmodel.formcache`) stores closed forms as
the text sympy prints (``2*B*ctx + Max(3.1e-5, 1.2e-9*B)``) and reads them back here in a
process that never imports sympy. The text is parsed with :mod:`ast` and checked against a
whitelist before anything runs: numbers, the named arguments, ``+ - * / **``, unary minus
and calls of ``Max``, ``Min``, ``Abs``, ``ceiling``, ``floor``, ``sqrt``, ``exp``, ``log``.
Anything else (attributes, subscripts, other names, keywords, lambdas, strings) is refused
with :class:`ArithError`, so a tampered cache file cannot run code. Integer literals become
floats, so no big-integer power can run away; the text is bounded in length and nesting. A
literal that is not finite (``1e999``) is refused, and so is a value that is not a finite real
number (an overflow, a division by zero, a complex power, a domain error): the function raises
:class:`ArithError`, never returns ``inf`` or ``nan``.

>>> f = compile_numeric("2*B*ctx + Max(3, B**2/4)", ("B", "ctx"))
>>> f(4, 10)
84.0
>>> compile_numeric("__import__('os')", ("B",))
Traceback (most recent call last):
...
costmodel.arith.ArithError: cached expression calls __import__, which is not allowed; allowed: Abs, Max, Min, ceiling, exp, floor, log, sqrt
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from typing import Any

from .errors import CostModelError

__all__ = ["ArithError", "compile_numeric", "compile_array", "FUNCTIONS"]


class ArithError(CostModelError):
    """Text that is not plain arithmetic over the allowed names."""


#: the functions a cached form may call, by the name sympy prints
FUNCTIONS: dict[str, Callable[..., float]] = {
    "Max": max,
    "Min": min,
    "Abs": abs,
    "ceiling": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
}

MAX_LENGTH = 1_000_000  #: characters of one expression
MAX_DEPTH = 200  #: nesting of the parsed tree

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_UNARY = (ast.USub, ast.UAdd)


def _check(node: ast.expr, names: frozenset[str], depth: int = 0) -> ast.expr:
    """Validate ``node`` (recursively) and return it with integer literals made floats."""
    if depth > MAX_DEPTH:
        raise ArithError(f"cached expression nests deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ArithError(f"cached expression has a constant {node.value!r}; only numbers are allowed")
        try:
            value = float(node.value)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise ArithError(
                f"cached expression has the constant {str(node.value)[:40]}; only finite numbers"
            )
        return ast.copy_location(ast.Constant(value), node)
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ArithError(f"cached expression uses {node.id!r}; allowed names: {', '.join(sorted(names))}")
        return node
    if isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
        node.left = _check(node.left, names, depth + 1)
        node.right = _check(node.right, names, depth + 1)
        return node
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, _UNARY):
        node.operand = _check(node.operand, names, depth + 1)
        return node
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise ArithError("cached expression calls something other than a named function")
        fn = node.func.id
        if fn not in FUNCTIONS:
            raise ArithError(
                f"cached expression calls {fn}, which is not allowed; allowed: {', '.join(sorted(FUNCTIONS))}"
            )
        if node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
            raise ArithError(f"cached expression calls {fn} with keywords, no or starred arguments")
        node.args = [_check(a, names, depth + 1) for a in node.args]
        return node
    raise ArithError(f"cached expression contains {type(node).__name__}, which is not arithmetic")


def _closure(
    node: ast.expr, index: dict[str, int], fns: dict[str, Callable[..., Any]] = FUNCTIONS
) -> Callable[[Sequence[Any]], Any]:
    """A validated node as a closure over the argument vector (no ``eval``, no ``exec``), the
    named functions taken from ``fns`` (plain floats by default; elementwise for arrays)."""
    if isinstance(node, ast.Constant):
        value = node.value
        assert isinstance(value, float)  # _check made every constant a finite float
        return lambda v: value
    if isinstance(node, ast.Name):
        i = index[node.id]
        return lambda v: v[i]
    if isinstance(node, ast.UnaryOp):
        inner = _closure(node.operand, index, fns)
        return (lambda v: -inner(v)) if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _closure(node.left, index, fns), _closure(node.right, index, fns)
        op = node.op
        if isinstance(op, ast.Add):
            return lambda v: left(v) + right(v)
        if isinstance(op, ast.Sub):
            return lambda v: left(v) - right(v)
        if isinstance(op, ast.Mult):
            return lambda v: left(v) * right(v)
        if isinstance(op, ast.Div):
            return lambda v: left(v) / right(v)
        return lambda v: left(v) ** right(v)
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # _check allowed nothing else
    fn = fns[node.func.id]
    parts = [_closure(a, index, fns) for a in node.args]
    return lambda v: fn(*(p(v) for p in parts))


def compile_numeric(text: str, args: Sequence[str]) -> Callable[..., float]:
    """``text`` (arithmetic over ``args``, as sympy prints it) as a function of floats.

    Raises :class:`ArithError` for anything but the whitelisted arithmetic (module doc). The
    checked tree becomes nested closures: nothing is ``eval``-ed or ``exec``-ed.
    """
    if not isinstance(text, str):
        raise ArithError(f"cached expression must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ArithError(f"cached expression is {len(text):,} characters long; at most {MAX_LENGTH:,}")
    for a in args:
        if not a.isidentifier() or a in FUNCTIONS:
            raise ArithError(f"argument name {a!r} is not allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ArithError(f"cached expression does not parse: {type(exc).__name__}") from None
    # depth 1: the Expression wrapper counts as the first level
    expr = _check(tree.body, frozenset(args) | frozenset(FUNCTIONS), depth=1)
    body = _closure(expr, {a: i for i, a in enumerate(args)})
    n = len(args)

    def evaluate(*values: float) -> float:
        if len(values) != n:
            raise ArithError(
                f"cached expression takes {n} argument(s) ({', '.join(args)}), got {len(values)}"
            )
        try:
            out = body(values)
            value = float(out) if not isinstance(out, complex) else math.nan
        except (ArithmeticError, ValueError, TypeError) as exc:  # overflow, x/0, sqrt(-1), log(0)
            raise ArithError(f"cached expression fails at {values}: {type(exc).__name__}") from None
        if not math.isfinite(value):
            raise ArithError(f"cached expression is not a finite real number at {values}")
        return value

    return evaluate


def _array_functions() -> dict[str, Callable[..., Any]]:
    """:data:`FUNCTIONS` over numpy arrays (elementwise, broadcasting), by the same names."""
    import functools

    import numpy as np

    return {
        "Max": lambda *a: functools.reduce(np.maximum, a),
        "Min": lambda *a: functools.reduce(np.minimum, a),
        "Abs": np.abs,
        "ceiling": np.ceil,
        "floor": np.floor,
        "sqrt": np.sqrt,
        "exp": np.exp,
        "log": np.log,
    }


def compile_array(text: str, args: Sequence[str]) -> Callable[..., object]:
    """``text`` as :func:`compile_numeric` reads it, evaluated elementwise over numpy arrays
    (broadcast): the same whitelist, and every value must be a finite real number, else
    :class:`ArithError`.

    >>> import numpy as np
    >>> compile_array("2*B*ctx + Max(3, B**2/4)", ("B", "ctx"))(np.array([4.0, 1.0]), np.array([10.0, 10.0]))
    array([84., 23.])
    """
    import numpy as np

    compile_numeric(text, args)  # the same checks (length, names, depth) first
    tree = ast.parse(text, mode="eval")
    expr = _check(tree.body, frozenset(args) | frozenset(FUNCTIONS), depth=1)
    body = _closure(expr, {a: i for i, a in enumerate(args)}, _array_functions())
    n = len(args)

    def evaluate(*values: object) -> object:
        if len(values) != n:
            raise ArithError(
                f"cached expression takes {n} argument(s) ({', '.join(args)}), got {len(values)}"
            )
        arrays = [np.asarray(v, dtype=float) for v in values]
        with np.errstate(all="ignore"):
            out = np.broadcast_to(np.asarray(body(arrays), dtype=float), np.broadcast(*arrays).shape)
        if not np.isfinite(out).all():
            raise ArithError("cached expression is not a finite real number everywhere on the grid")
        return out

    return evaluate
