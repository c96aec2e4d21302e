"""The operator cost-rule registry.

A rule is a small pure function with keyword-only, typed parameters that
returns a :class:`~costmodel.cost.Cost`. ``@register_rule("gemm")`` adds it;
registering a name twice is an error. :func:`op_cost` calls a rule by name
and turns a wrong call into a :class:`RuleArgumentError` that lists the
parameters the rule accepts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cost import Cost
from ..errors import CostModelError, RuleArgumentError, UnknownRuleError

__all__ = ["Rule", "register_rule", "get_rule", "rule_names", "op_cost"]


@dataclass(frozen=True, slots=True)
class Rule:
    """A registered cost rule."""

    name: str
    fn: Callable[..., Cost]
    signature: inspect.Signature

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(self.signature.parameters)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(n for n, p in self.signature.parameters.items() if p.default is inspect.Parameter.empty)

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.fn) or ""

    def __call__(self, **params: Any) -> Cost:
        return op_cost(self.name, **params)


_REGISTRY: dict[str, Rule] = {}


def register_rule(name: str) -> Callable[[Callable[..., Cost]], Callable[..., Cost]]:
    """Register ``fn`` as the cost rule for op ``name``.

    The function must take keyword-only parameters (no ``*args``/``**kwargs``,
    which would swallow wrong calls) and have a docstring with its formula.

    Parameters
    ----------
    name : str
        The op's name (``gemm``, ``softmax`` ...); a name registered already is refused.

    Returns
    -------
    callable
        A decorator that registers the rule function and returns it unchanged.

    Raises
    ------
    CostModelError
        When ``name`` is taken, a parameter is not keyword-only, or the function has no docstring.
    """

    def deco(fn: Callable[..., Cost]) -> Callable[..., Cost]:
        if name in _REGISTRY:
            raise CostModelError(f"cost rule {name!r} is already registered")
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.kind is not inspect.Parameter.KEYWORD_ONLY:
                raise CostModelError(
                    f"rule {name!r}: parameter {p.name!r} must be keyword-only (put it after *)"
                )
        if not inspect.getdoc(fn):
            raise CostModelError(f"rule {name!r} needs a docstring stating its formula")
        _REGISTRY[name] = Rule(name, fn, sig)
        return fn

    return deco


def get_rule(name: str) -> Rule:
    """The rule registered under ``name``.

    Parameters
    ----------
    name : str
        A registered rule's name (:func:`rule_names`).

    Returns
    -------
    Rule
        Its function and signature.

    Raises
    ------
    UnknownRuleError
        When none is registered under ``name`` (the known ones listed).

    >>> get_rule("gemm").name
    'gemm'
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownRuleError(
            f"no cost rule named {name!r}; known rules: {', '.join(sorted(_REGISTRY))}"
        ) from None


def rule_names() -> tuple[str, ...]:
    """Names of every registered rule, sorted.

    Returns
    -------
    tuple of str
        Every rule :func:`op_cost` takes.
    """
    return tuple(sorted(_REGISTRY))


def op_cost(name: str, **params: Any) -> Cost:
    """Cost of op ``name`` with ``params``; bad calls name what is allowed.

    Parameters
    ----------
    name : str
        The rule (:func:`rule_names`: ``gemm``, ``attention``, ``softmax`` ...).
    **params
        The rule's keyword arguments: shapes in elements (ints or sympy expressions), dtypes by
        name, variant options (each rule's docstring states its formula and defaults).

    Returns
    -------
    Cost
        FLOPs per unit and precision, bytes per memory level (bytes), footprint and link traffic.

    Raises
    ------
    UnknownRuleError
        When no rule is named ``name``; :class:`RuleArgumentError` for an unknown or missing
        parameter.

    >>> op_cost("gemm", M=2, N=3, K=4, dtype="fp32").flops
    48
    >>> op_cost("gemm", M=2, N=3)
    Traceback (most recent call last):
    ...
    costmodel.errors.RuleArgumentError: rule 'gemm': missing required parameter(s) K; parameters: M, N, K, dtype, w_dtype, out_dtype, compute_dtype, bias, tile_m, tile_n
    """
    rule = get_rule(name)
    unknown = [k for k in params if k not in rule.signature.parameters]
    if unknown:
        raise RuleArgumentError(
            f"rule {name!r}: unknown parameter(s) {', '.join(unknown)}; "
            f"parameters: {', '.join(rule.parameters)}"
        )
    missing = [k for k in rule.required if k not in params]
    if missing:
        raise RuleArgumentError(
            f"rule {name!r}: missing required parameter(s) {', '.join(missing)}; "
            f"parameters: {', '.join(rule.parameters)}"
        )
    return rule.fn(**params)
