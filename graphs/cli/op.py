"""`costmodel op` and `costmodel rules`: one operator's roofline, the rule registry."""

from __future__ import annotations

import argparse
import ast
import inspect
from typing import TYPE_CHECKING, Any

from .common import add_json, dump

if TYPE_CHECKING:
    from costmodel.rules import Rule

__all__ = ["add_op_parsers"]

#: string parameters no rule annotates ``str`` (the rules' own ``str`` parameters, ``mode``,
#: ``state`` ..., are read from their signatures: :func:`_param_kinds`)
_STRING_PARAMS = {"variant", "algorithm", "link"}
#: the words a boolean parameter takes
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def _annotation(param: inspect.Parameter) -> str:
    ann = param.annotation
    return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))


def _param_kinds(rule: Rule) -> tuple[frozenset[str], frozenset[str]]:
    """The rule's boolean and string parameters, read from its signature.

    Parameters
    ----------
    rule : Rule
        The registered rule (:func:`costmodel.rules.get_rule`).

    Returns
    -------
    (frozenset of str, frozenset of str)
        The parameters annotated ``bool`` (or with a boolean default), and those annotated
        ``str`` with :data:`_STRING_PARAMS`.
    """
    bools, strings = set(), set(_STRING_PARAMS)
    for name, param in rule.signature.parameters.items():
        ann = _annotation(param)
        if ann == "bool" or isinstance(param.default, bool):
            bools.add(name)
        elif ann == "str":
            strings.add(name)
    return frozenset(bools), frozenset(strings - bools)


def _check_names(rule: Rule, key: str, text: str) -> None:
    """Refuse a name in ``key``'s value that would not mean what it says: an alias the engine
    renames (``E`` is ``num_experts``, ``k`` is ``num_experts_per_tok``: ``M=E`` printed as
    ``num_experts``), or another parameter of the rule (``M=N N=4096``: the symbol N is not the
    4096 given), as ``derive`` refuses a name its closed form uses for something else.

    Parameters
    ----------
    rule : Rule
        The rule the value is for.
    key : str
        The parameter.
    text : str
        The value as given, already parsed by :func:`costmodel.expr.parse_expr` (so in its grammar).
    """
    from costmodel.errors import RuleArgumentError
    from costmodel.symbols import DIM_ALIASES

    names = sorted({n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)})
    for name in names:
        if name in DIM_ALIASES:
            canon = DIM_ALIASES[name]
            raise RuleArgumentError(
                f"op {rule.name}: {key}={text}: the name {name} is the engine's alias of {canon} "
                f"(it would print as {canon}); write {canon}, or a name of your own (e.g. x)"
            )
        if name in rule.signature.parameters and name != key:
            raise RuleArgumentError(
                f"op {rule.name}: {key}={text}: {name} is also a parameter of {rule.name}, and a name "
                f"in a value is a symbol of its own, not {name}'s value; give a number, or another "
                "name (e.g. x)"
            )


def _parse_param(item: str, rule: Rule) -> tuple[str, Any]:
    """One ``key=value`` of ``costmodel op``, read as the rule's signature types the parameter.

    Parameters
    ----------
    item : str
        The argument as given.
    rule : Rule
        The rule it is for: its ``bool`` parameters take true/false (or 1/0), its ``str`` and
        dtype parameters the text as given, the others a safe expression
        (:func:`costmodel.expr.parse_expr`). An unknown parameter is left as text for
        :func:`costmodel.rules.op_cost` to refuse, naming the parameters there are.

    Returns
    -------
    (str, object)
        The parameter and its value.
    """
    from costmodel.errors import RuleArgumentError
    from costmodel.expr import parse_expr

    if "=" not in item:
        raise RuleArgumentError(f"op parameter {item!r} must look like key=value")
    key, value = item.split("=", 1)
    key = key.strip()
    if not key:  # '=3' was refused as "unknown parameter(s) ;", an empty name in the list
        raise RuleArgumentError(
            f"op parameter {item!r} has no name before '='; {rule.name} takes "
            + ", ".join(rule.signature.parameters)
        )
    if key not in rule.signature.parameters:
        return key, value
    bools, strings = _param_kinds(rule)
    word = value.strip().lower()
    if key in bools:
        if word in _TRUE + _FALSE:
            return key, word in _TRUE
        raise RuleArgumentError(
            f"op {rule.name}: {key}={value!r} is not a boolean; {key} takes true or false (or 1 or 0)"
        )
    if key in strings or key == "dtype" or key.endswith("_dtype"):
        return key, value
    if word in ("true", "false"):
        raise RuleArgumentError(
            f"op {rule.name}: {key}={value!r}: {key} is a number or an expression, not a boolean"
        )
    expr = parse_expr(value, field=key)
    _check_names(rule, key, value)
    return key, expr


def _parse_params(items: list[str], rule: Rule) -> dict[str, Any]:
    """Every ``key=value`` of ``costmodel op``, refusing a parameter given twice (the last one
    was used silently).

    Parameters
    ----------
    items : list of str
        The arguments as given.
    rule : Rule
        The rule they are for (:func:`_parse_param`).

    Returns
    -------
    dict
        Parameter to value, in the order given.
    """
    from costmodel.errors import RuleArgumentError

    given: dict[str, str] = {}
    for item in items:
        key = item.split("=", 1)[0].strip()
        if key in given and "=" in item:
            raise RuleArgumentError(
                f"op {rule.name}: parameter {key} given twice ({given[key]} and {item}); give it once"
            )
        given[key] = item
    return dict(_parse_param(item, rule) for item in items)


def cmd_op(args: argparse.Namespace) -> int:
    """``costmodel op``: the ``key=value`` words read as the rule types them, then
    :func:`costmodel.report.op_roofline` (the out_dtype a narrow GEMM writes, the device's notes,
    the float-range check), printed."""
    import sympy

    from costmodel.cost import as_float
    from costmodel.report import op_roofline
    from costmodel.rules import get_rule
    from costmodel.text import fmt_num

    r = op_roofline(args.rule, args.device, **_parse_params(args.params, get_rule(args.rule)))
    cost, b, hw, params, notes = r.cost, r.bound, r.bound.hardware, r.params, r.notes
    numeric = cost.is_numeric
    moves_bytes = cost.bytes != 0  # the intensity is FLOPs per DRAM byte: undefined without one
    if args.json:
        print(dump(r.to_dict()))
        return 0
    print(f"{args.rule}({', '.join(f'{k}={v}' for k, v in params.items())}) on {hw.name}")
    for n in notes:
        print(f"  note: {n}")
    print(f"  FLOPs      : {cost.flops}")
    for (unit, prec), f in cost.flop_terms.items():
        print(f"    {unit}/{prec}: {f}")
    print(f"  DRAM bytes : {cost.bytes}")
    if not moves_bytes:
        print("  intensity  : undefined (no DRAM bytes)")
    if numeric:
        if moves_bytes:
            print(f"  intensity  : {as_float(cost.intensity):.3f} FLOP/B")
        for label, t in b.terms.items():
            print(f"  t[{label}] = {fmt_num(as_float(t) * 1e6)} us")
        if b.kind == "none":
            print(
                f"  bound      : none (no FLOPs and no bytes to bound), T >= {fmt_num(as_float(b.lower) * 1e6)} us"
            )
        else:
            print(f"  bound      : {b.kind} ({b.category}), T >= {fmt_num(as_float(b.lower) * 1e6)} us")
        if b.unbounded:
            print(f"  not bounded (no roof on this device): {', '.join(b.unbounded)}")
    else:
        if moves_bytes:
            print(f"  intensity  : {sympy.simplify(cost.intensity)}")
        from costmodel.pretty import time_expr

        print(f"  T >= {time_expr(b.lower)}")
        print("  (bind every dimension to classify)")
    return 0


def _default_text(value: Any) -> str:
    """A rule parameter's default as ``op`` takes it on the command line (``bf16``, ``1``,
    ``false``), or ``(derived)`` for ``None``: the rule derives it from the other parameters, and
    ``op`` takes no ``None`` (``w_dtype=None`` is refused as an unknown dtype)."""
    if value is None:
        return "(derived)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def cmd_rules(args: argparse.Namespace) -> int:
    """``costmodel rules``: every rule's summary, its required parameters and its optional ones
    with their defaults (``--json``: the same, ``parameters`` listing both in the rule's order)."""
    import textwrap

    from costmodel.rules import get_rule, rule_names

    out: dict[str, dict[str, Any]] = {}
    for n in rule_names():
        rule = get_rule(n)
        out[n] = {
            "parameters": list(rule.parameters),
            "required": list(rule.required),
            "optional": {
                k: p.default for k, p in rule.signature.parameters.items() if k not in rule.required
            },
            "summary": rule.doc.splitlines()[0],
        }
    if args.json:
        print(dump(out))
        return 0
    pad = " " * 19
    for name, info in out.items():
        print(f"{name:18s} {info['summary']}")
        print(f"{pad}required: {', '.join(info['required']) or 'none'}")
        if info["optional"]:
            given = ", ".join(f"{k}={_default_text(v)}" for k, v in info["optional"].items())
            print(textwrap.fill(f"optional: {given}", 100, initial_indent=pad, subsequent_indent=pad + "  "))
    return 0


def add_op_parsers(sub: Any) -> None:
    o = sub.add_parser("op", help="roofline of one op: costmodel op gemm M=1 N=4096 K=4096")
    o.add_argument("rule", help="rule name (see `costmodel rules`)")
    o.add_argument(
        "params",
        nargs="*",
        help="key=value; values are numbers or expressions, true/false (or 1/0) for a boolean, "
        "words for dtype/mode/state/variant parameters; each parameter once",
    )
    o.add_argument("--device", default="h100-sxm")
    add_json(o)
    o.set_defaults(func=cmd_op)
    ru = sub.add_parser("rules", help="list operator cost rules")
    add_json(ru)
    ru.set_defaults(func=cmd_rules)
