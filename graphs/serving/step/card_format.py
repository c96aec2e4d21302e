"""The report cards' format: engine-built forms as arithmetic text, and what every card reader
checks a stored number against.

A card (:mod:`graphs.serving.present.cards`, the mixed-step card of
:class:`graphs.serving.step.mixed.MixedStep`, the capacity ledger of
:mod:`graphs.serving.step.fit_check`) stores sympy forms as text that
:func:`costmodel.arith.compile_numeric` reads back without ``eval``: :func:`to_text` writes it.
A card that cannot hold a form, or does not read back, raises :class:`CardError`; the caller
answers by building the forms again (a card can cost time, never change an answer).

Light on purpose (no sympy, numpy or networkx at import): the command line's cached fast path
reads cards through it.
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.errors import CostModelError

__all__ = ["CARD_VERSION", "CardError", "to_text", "lambdified_text", "card_number", "card_kv_caps"]

#: the layout of the decode, prefill and analysis cards (a card of another version is rebuilt)
CARD_VERSION = 3
_ARGS = ("B", "ctx")


class CardError(CostModelError):
    """A form the card's arithmetic cannot hold, or a card that does not read back."""


_FUNCS = {
    "Max": "Max",
    "Min": "Min",
    "ceiling": "ceiling",
    "floor": "floor",
    "Abs": "Abs",
    "exp": "exp",
    "log": "log",
}


def to_text(expr: Any, args: tuple[str, ...] = _ARGS) -> str:
    """``expr`` (a sympy expression in ``args``) as text :func:`compile_numeric` reads:
    floats with ``repr``, rationals as ``(p/q)``, every sum, product and power parenthesised.

    Parameters
    ----------
    expr : sympy expression or number
        The form to store, in ``args`` only (a number stands for itself).
    args : tuple of str
        The symbol names the form may use (default ``("B", "ctx")``, the decode card's dims).

    Returns
    -------
    str
        Arithmetic text :func:`costmodel.arith.compile_numeric` reads back.

    Raises
    ------
    CardError
        When the form holds a non-finite number, a symbol outside ``args`` or a function the
        card's arithmetic does not know.
    """
    # sympy loads only when a card is written: reading one (the cached path) stays light
    import sympy

    def sub(x: Any) -> str:
        return to_text(x, args)

    e = sympy.sympify(expr)  # engine-built expressions and numbers only, never user text
    try:
        if e.is_Integer:
            return repr(float(int(e)))
        if e.is_Rational:
            return f"({float(e.p)!r}/{float(e.q)!r})"
    except OverflowError:
        raise CardError(f"a card cannot hold the number {str(e)[:40]}") from None
    if e.is_Float:
        v = float(e)
        if not math.isfinite(v):
            raise CardError(f"a card cannot hold the non-finite number {e}")
        return repr(v)
    if e.is_Symbol:
        if e.name not in args:
            raise CardError(f"a card's forms may only depend on {', '.join(args)}, not {e.name}")
        return e.name
    if e.is_Add:
        return "(" + " + ".join(sub(a) for a in e.args) + ")"
    if e.is_Mul:
        return "(" + "*".join(sub(a) for a in e.args) + ")"
    if e.is_Pow:
        return f"({sub(e.base)})**({sub(e.exp)})"
    name = type(e).__name__
    if name in _FUNCS:
        return f"{_FUNCS[name]}(" + ", ".join(sub(a) for a in e.args) + ")"
    raise CardError(f"a card cannot hold {name} ({str(e)[:60]})")


#: calls in ``lambdify``'s output (numpy's or math's printer, modules not spelt out) -> the
#: whitelist's names (:data:`costmodel.arith.FUNCTIONS`); numpy's Max and Min are reductions
_CALLS = {
    "ceil": "ceiling",
    "floor": "floor",
    "sqrt": "sqrt",
    "exp": "exp",
    "log": "log",
    "absolute": "Abs",
    "abs": "Abs",
    "max": "Max",
    "min": "Min",
}
_REDUCERS = {"maximum": "Max", "minimum": "Min"}
#: the largest integer literal kept: Python divides two integers exactly before rounding, the
#: reader divides their doubles, and the two agree while both are exact doubles
_EXACT_INT = 2**53


def lambdified_text(expr: Any, symbols: tuple[Any, ...], module: str = "numpy") -> str:
    """The arithmetic ``sympy.lambdify(symbols, expr, module)`` evaluates, as text the whitelisting
    reader (:func:`costmodel.arith.compile_numeric`, :func:`~costmodel.arith.compile_array`) reads:
    the generated function's body, its calls renamed (``reduce(maximum, [a, b])`` and
    ``max(a, b)`` are ``Max(a, b)``, ``ceil`` is ``ceiling``). The reader parses it into the tree
    Python does and evaluates the same operations in the same order, so it gives the compiled
    form's values bit for bit (where :func:`to_text`'s canonical order may differ in the last
    place). :class:`CardError` for what the reader does not have (numpy's ``select`` of a
    piecewise form, a named constant) or an integer literal beyond :data:`_EXACT_INT`.

    Parameters
    ----------
    expr
        An engine-built sympy expression in ``symbols``.
    symbols
        Its arguments, in order (their names are the reader's argument names).
    module
        ``"numpy"`` or ``"math"``: the module the compiled form was lambdified for.

    Returns
    -------
    str
        One arithmetic expression.

    Raises
    ------
    CardError
        For a module other than numpy or math, a form lambdify writes as more than one
        statement, a call the reader does not have, or an integer beyond a double's exact range.
    """
    import ast
    import inspect

    import sympy

    if module not in ("numpy", "math"):
        raise CardError(f"module {module!r} not allowed; allowed: numpy, math")
    fn = sympy.lambdify(symbols, expr, modules=module)
    tree = ast.parse(inspect.getsource(fn))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else []
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise CardError("a form lambdify writes as more than one expression")

    class Rename(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            f = node.func
            if not isinstance(f, ast.Name) or node.keywords:
                raise CardError("a form with a call the card's arithmetic does not have")
            if f.id == "reduce" and len(node.args) == 2:
                op, items = node.args
                if isinstance(op, ast.Name) and op.id in _REDUCERS and isinstance(items, ast.List):
                    return ast.Call(ast.Name(_REDUCERS[op.id], ast.Load()), list(items.elts), [])
            if f.id in _CALLS:
                return ast.Call(ast.Name(_CALLS[f.id], ast.Load()), node.args, [])
            raise CardError(f"a form calls {f.id}, which the card's arithmetic does not have")

        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            if isinstance(node.value, int) and abs(node.value) > _EXACT_INT:
                raise CardError("a form with an integer beyond a double's exact range")
            return node

    return ast.unparse(Rename().visit(body[0].value))


def card_number(x: Any, name: str, *, positive: bool = False, whole: bool = False) -> float:
    """A constant read from a card: a finite real number, never negative (above zero when
    ``positive``, an integer value when ``whole``); else :class:`CardError` naming it.

    Parameters
    ----------
    x : object
        The value read from the card.
    name : str
        The card field's name, printed in the error.
    positive : bool
        Require ``x > 0`` (default: ``x >= 0``).
    whole : bool
        Require an integer value.

    Returns
    -------
    float
        ``x`` as a float.

    Raises
    ------
    CardError
        When ``x`` is not a number, not finite, negative, zero when ``positive``, or fractional
        when ``whole``.
    """
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise CardError(f"card field {name} is {type(x).__name__}, not a number")
    v = float(x)
    if not math.isfinite(v) or v < 0 or (positive and v == 0) or (whole and not v.is_integer()):
        kind = ("positive" if positive else "non-negative") + (" whole" if whole else "")
        raise CardError(f"card field {name} = {x!r} is not a finite {kind} number")
    return v


def _kv_caps(d: Any) -> dict[str, Any]:
    """The stored cache layout (:func:`graphs.serving.step.ledger_fit.kv_caps`), range-checked."""
    capped = d["capped"]
    if not isinstance(capped, list) or not all(isinstance(p, list) and len(p) == 2 for p in capped):
        raise CardError("card field kv_caps.capped is not a list of [bytes per token, positions] pairs")
    return {
        "per_token": card_number(d["per_token"], "kv_caps.per_token"),
        "capped": [
            [
                card_number(k, "kv_caps.capped bytes"),
                card_number(w, "kv_caps.capped positions", positive=True, whole=True),
            ]
            for k, w in capped
        ],
        "state": card_number(d["state"], "kv_caps.state"),
    }


def card_kv_caps(card: dict[str, Any]) -> dict[str, Any]:
    """A decode card's cache layout, range-checked; :class:`CardError` when it is not one.

    Parameters
    ----------
    card : dict
        A decode card as read from JSON.

    Returns
    -------
    dict
        Its ``kv_caps`` entry, checked: ``per_token`` (bytes per cached token), ``capped``
        (``[bytes per token, positions kept]`` pairs) and ``state`` (bytes per sequence).

    Raises
    ------
    CardError
        When ``card`` is not a decode card of this version or its layout is out of range.
    """
    try:
        if card.get("kind") != "decode" or card.get("version") != CARD_VERSION:
            raise CardError("not a decode card of this version")
        return _kv_caps(card["kv_caps"])
    except CardError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable decode card: {type(exc).__name__}: {exc}") from None
