"""`costmodel op` and `costmodel rules`: one operator's roofline, the rule registry."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_json, dump

__all__ = ["add_op_parsers"]

_STRING_PARAMS = {"variant", "algorithm", "link"}


def _parse_param(item: str) -> tuple[str, Any]:
    from costmodel.errors import RuleArgumentError
    from costmodel.expr import parse_expr

    if "=" not in item:
        raise RuleArgumentError(f"op parameter {item!r} must look like key=value")
    key, value = item.split("=", 1)
    key = key.strip()
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    if key in _STRING_PARAMS or key == "dtype" or key.endswith("_dtype"):
        return key, value
    return key, parse_expr(value, field=key)


#: the matmul rules whose output a narrow GEMM writes in bf16 (:func:`costmodel.dtypes.gemm_out_dtype`)
_MATMULS = ("gemm", "batched_gemm", "per_sample_matmul", "grouped_gemm")


def _gemm_output(rule: str, params: dict[str, Any]) -> str | None:
    """Set a matmul's ``out_dtype`` as ``derive`` and the model graphs price it when the operands
    are narrower than 16 bits and none is given (an FP8 GEMM writes bf16), and say so; None when
    nothing was set."""
    from costmodel.dtypes import gemm_out_dtype

    dtype = params.get("dtype")
    if rule not in _MATMULS or params.get("out_dtype") is not None or not isinstance(dtype, str):
        return None
    try:
        out = gemm_out_dtype(dtype)
    except Exception:  # an unknown dtype: the rule's own one-line error names it
        return None
    if out is None:
        return None
    params["out_dtype"] = out
    return (
        f"out_dtype={out} assumed: a {dtype} GEMM accumulates in fp32 and writes a 16-bit output, as derive "
        f"and the model graphs price it (give out_dtype={dtype} for a {dtype} output)"
    )


def cmd_op(args: argparse.Namespace) -> int:
    import sympy

    from costmodel.cost import as_float
    from costmodel.hardware import get_device
    from costmodel.roofline import bound, sensitivities
    from costmodel.rules import op_cost
    from costmodel.text import fmt_num

    params = dict(_parse_param(p) for p in args.params)
    note = _gemm_output(args.rule, params)
    cost = op_cost(args.rule, **params)
    hw = get_device(args.device)
    b = bound(cost, hw)
    numeric = cost.is_numeric
    if args.json:
        out: dict[str, Any] = {
            "rule": args.rule,
            "params": {k: str(v) for k, v in params.items()},
            "cost": cost.to_dict(numeric=numeric),
            "bound": b.to_dict(),
        }
        if numeric:
            out["sensitivities"] = {
                k: {kk: as_float(vv) for kk, vv in v.items()} for k, v in sensitivities(cost, hw).items()
            }
        if note:
            out["note"] = note
        print(dump(out))
        return 0
    print(f"{args.rule}({', '.join(f'{k}={v}' for k, v in params.items())}) on {hw.name}")
    if note:
        print(f"  note: {note}")
    print(f"  FLOPs      : {cost.flops}")
    for (unit, prec), f in cost.flop_terms.items():
        print(f"    {unit}/{prec}: {f}")
    print(f"  DRAM bytes : {cost.bytes}")
    if numeric:
        print(f"  intensity  : {as_float(cost.intensity):.3f} FLOP/B")
        for label, t in b.terms.items():
            print(f"  t[{label}] = {fmt_num(as_float(t) * 1e6)} us")
        print(f"  bound      : {b.kind} ({b.category}), T >= {fmt_num(as_float(b.lower) * 1e6)} us")
        if b.unbounded:
            print(f"  not bounded (no roof on this device): {', '.join(b.unbounded)}")
    else:
        print(f"  intensity  : {sympy.simplify(cost.intensity)}")
        from costmodel.pretty import time_expr

        print(f"  T >= {time_expr(b.lower)}")
        print("  (bind every dimension to classify)")
    return 0


def cmd_rules(args: argparse.Namespace) -> int:
    from costmodel.rules import get_rule, rule_names

    out = {
        n: {
            "parameters": list(get_rule(n).parameters),
            "required": list(get_rule(n).required),
            "summary": get_rule(n).doc.splitlines()[0],
        }
        for n in rule_names()
    }
    if args.json:
        print(dump(out))
        return 0
    for name, info in out.items():
        print(f"{name:18s} {info['summary']}")
        print(f"{'':18s} required: {', '.join(info['required'])}")
    return 0


def add_op_parsers(sub: Any) -> None:
    o = sub.add_parser("op", help="roofline of one op: costmodel op gemm M=1 N=4096 K=4096")
    o.add_argument("rule", help="rule name (see `costmodel rules`)")
    o.add_argument("params", nargs="*", help="key=value; values are numbers, expressions or dtype names")
    o.add_argument("--device", default="h100-sxm")
    add_json(o)
    o.set_defaults(func=cmd_op)
    ru = sub.add_parser("rules", help="list operator cost rules")
    add_json(ru)
    ru.set_defaults(func=cmd_rules)
