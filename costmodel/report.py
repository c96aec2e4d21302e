"""Per-op roofline tables: rows as plain data, then text or JSON.

:func:`roofline_rows` turns named costs into rows (FLOPs, bytes, intensity,
``I/I*``, the bound kind, each time term, headroom of 2x compute and 2x
bandwidth); :func:`format_table` renders any list of rows. The command line
and users' scripts share these functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .cost import Cost, as_float
from .dtypes import gemm_out_dtype
from .errors import CostModelError, UnknownDTypeError
from .hardware.catalog import get_device
from .hardware.spec import Hardware
from .keys import Unit
from .results import Result
from .roofline import Bound, bound, headroom, sensitivities
from .rules import op_cost
from .text import fmt_si, fmt_time
from .text import format_table as _format_table

__all__ = [
    "roofline_rows",
    "format_table",
    "fmt_si",
    "standard_ops",
    "COLUMNS",
    "fmt_time",
    "OpRoofline",
    "op_roofline",
    "MATMULS",
    "OperatorReport",
    "operator_report",
]

#: Default columns of a roofline table: (key, header, format).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("op", "op", "s"),
    ("flops", "F (FLOP)", "si"),
    ("bytes", "D (B)", "si"),
    ("intensity", "I (FLOP/B)", ".2f"),
    ("i_over_ridge", "I/I*", ".3f"),
    ("kind", "bound", "s"),
    ("time_s", "T bound", "time"),
    ("speedup_2x_compute", "2x compute", ".2fx"),
    ("speedup_2x_bandwidth", "2x bandwidth", ".2fx"),
)


def roofline_rows(
    ops: Iterable[tuple[str, Cost]],
    hw: Hardware,
    *,
    ridge_unit: str = "tensor",
    ridge_precision: str = "bf16",
) -> list[dict[str, Any]]:
    """One row per ``(name, cost)`` on ``hw``; costs must be numeric.

    ``I/I*`` divides the op's intensity (all FLOPs over DRAM bytes) by the
    ridge point of ``ridge_unit`` at ``ridge_precision``, the profiling
    article's convention. The bound kind and times use every roof.
    """
    ridge = as_float(hw.balance(ridge_unit, ridge_precision), what="ridge point")
    rows = []
    for name, cost in ops:
        b = bound(cost, hw)
        flops = as_float(cost.flops, what=f"{name} flops")
        nbytes = as_float(cost.bytes, what=f"{name} bytes")
        intensity = flops / nbytes if nbytes else float("inf")
        row: dict[str, Any] = {
            "op": name,
            "flops": flops,
            "bytes": nbytes,
            "intensity": intensity,
            "i_over_ridge": intensity / ridge,
            "kind": b.kind,
            "category": b.category,
            "time_s": as_float(b.time, what=f"{name} time"),
            "lower_s": as_float(b.lower, what=f"{name} lower bound"),
            "upper_s": as_float(b.upper, what=f"{name} upper bound"),
            "terms_s": {k: as_float(v) for k, v in b.terms.items()},
            "unbounded": list(b.unbounded),
            "speedup_2x_compute": as_float(headroom(cost, hw, "compute", 2)),
            "speedup_2x_bandwidth": as_float(headroom(cost, hw, "memory", 2)),
        }
        rows.append(row)
    return rows


def format_table(
    rows: Sequence[Any], columns: Sequence[tuple[str, str, str]] = COLUMNS, *, left: Iterable[str] = ()
) -> str:
    """Render rows as an aligned text table (:func:`costmodel.text.format_table`; roofline columns
    by default).

    Parameters
    ----------
    rows : sequence of dict or Result
        The rows.
    columns : sequence of (key, heading, format)
        The columns (default: the roofline table's).
    left : iterable of str
        Keys of columns after the first aligned left (text).

    Returns
    -------
    str
    """
    return _format_table(rows, columns, left=left)


def standard_ops(dtype: str = "bf16") -> list[tuple[str, Cost]]:
    """The profiling article's operator ledger, built from the cost rules.

    Elementwise add over 16M elements, LayerNorm [4096, 3072] without beta,
    softmax [4096, 4096] fused and naive, GEMMs 512 and 4096 x 4096 x 4096 (writing bf16 when
    the operands are narrower: :func:`costmodel.dtypes.gemm_out_dtype`),
    single-head attention N=4096, d=128 naive and ideal-minimum.
    """
    n, d = 4096, 128
    out = gemm_out_dtype(dtype)  # a narrow GEMM writes bf16, as gemm_crossover prices it
    return [
        ("elementwise add [16M]", op_cost("elementwise", n=16_000_000, inputs=2, dtype=dtype)),
        ("layernorm [4096,3072]", op_cost("layernorm", rows=4096, cols=3072, bias=False, dtype=dtype)),
        ("softmax fused [4096,4096]", op_cost("softmax", rows=4096, cols=4096, variant="fused", dtype=dtype)),
        ("softmax naive [4096,4096]", op_cost("softmax", rows=4096, cols=4096, variant="naive", dtype=dtype)),
        ("gemm 512x4096x4096", op_cost("gemm", M=512, N=4096, K=4096, dtype=dtype, out_dtype=out)),
        ("gemm 4096x4096x4096", op_cost("gemm", M=4096, N=4096, K=4096, dtype=dtype, out_dtype=out)),
        (
            f"attention naive [N={n},d={d}]",
            op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, variant="naive", dtype=dtype),
        ),
        (
            f"attention ideal-min [N={n},d={d}]",
            op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, variant="flash", dtype=dtype),
        ),
    ]


#: the matmul rules whose output a narrow GEMM writes in bf16 (:func:`costmodel.dtypes.gemm_out_dtype`)
MATMULS = ("gemm", "batched_gemm", "per_sample_matmul", "grouped_gemm")


@dataclass(frozen=True)
class OpRoofline(Result):
    """One operator's cost and roofline on a device, as ``costmodel op`` prints it
    (:func:`op_roofline`)."""

    rule: str  #: the rule's name
    params: dict[str, Any]  #: the parameters as priced (an ``out_dtype`` assumed included)
    cost: Cost  #: FLOPs per unit and bytes per level
    bound: Bound  #: the roofline bound on the device
    notes: tuple[str, ...]  #: what was assumed (an ``out_dtype``) and what the device makes it assume

    def to_dict(self) -> dict[str, Any]:
        """``costmodel op --json``: the rule, its parameters as text, the cost and bound, the
        sensitivities (numeric costs: seconds per unit of each resource and the elasticity), the notes."""
        numeric = self.cost.is_numeric
        out: dict[str, Any] = {
            "rule": self.rule,
            "params": {k: str(v) for k, v in self.params.items()},
            "cost": self.cost.to_dict(numeric=numeric),
            "bound": self.bound.to_dict(),
        }
        if numeric:
            # dT/dR's unit is the resource's: seconds per FLOP/s of a unit's roof, per byte/s of a
            # memory level's or a link's
            units = {u.value for u in Unit}
            out["sensitivities"] = {
                k: {
                    "dT_dresource_s_per_resource_unit": as_float(v["dT_dresource"]),
                    "resource_unit": "FLOP/s" if k in units else "bytes/s",
                    "elasticity": as_float(v["elasticity"]),
                }
                for k, v in sensitivities(self.cost, self.bound.hardware).items()
            }
        out["notes"] = list(self.notes)
        return out


def _gemm_output(rule: str, params: dict[str, Any]) -> str | None:
    """Set a matmul's ``out_dtype`` (in place) as ``derive`` and the model graphs price it when the
    operands are narrower than 16 bits and none is given (an FP8 GEMM writes bf16); the note that
    says so, or None when nothing was set."""
    dtype = params.get("dtype")
    if rule not in MATMULS or params.get("out_dtype") is not None or not isinstance(dtype, str):
        return None
    try:
        out = gemm_out_dtype(dtype)
    except UnknownDTypeError:  # the rule's own one-line error names it
        return None
    if out is None:
        return None
    params["out_dtype"] = out
    return (
        f"out_dtype={out} assumed: a {dtype} GEMM accumulates in fp32 and writes a 16-bit output, as derive "
        f"and the model graphs price it (give out_dtype={dtype} for a {dtype} output)"
    )


def _check_finite(rule: str, params: dict[str, Any], cost: Cost, b: Bound) -> None:
    """Refuse a numeric result beyond a float's range (``gemm M=N=K=10**300`` printed
    ``t[tensor] = inf us``, and ``null`` FLOPs in JSON)."""
    import sympy

    checked: list[tuple[str, Any]] = [
        *((f"FLOPs on {u}/{p}", e) for (u, p), e in cost.flop_terms.items()),
        *((f"bytes read at {lvl}", e) for lvl, e in cost.read_terms.items()),
        *((f"bytes written at {lvl}", e) for lvl, e in cost.write_terms.items()),
        *((f"time t[{label}]", sympy.sympify(t)) for label, t in b.terms.items()),
    ]

    def short(v: Any) -> str:  # a 301-digit size as 1.00E+300
        text = str(v)
        if len(text) <= 20:
            return text
        number = isinstance(v, int | sympy.Expr) and not isinstance(v, bool) and sympy.sympify(v).is_number
        return str(sympy.Float(v, 3)) if number else text[:20] + "..."

    given = " ".join(f"{k}={short(v)}" for k, v in params.items())
    for what, e in checked:
        if not math.isfinite(float(e)):
            raise CostModelError(
                f"op {rule} {given}: {what} = {sympy.Float(e, 3)} is beyond a float's range (1.8e308); "
                "give smaller sizes"
            )


def op_roofline(rule: str, device: Hardware | str = "h100-sxm", **params: Any) -> OpRoofline:
    """One operator's cost and roofline on ``device``: what ``costmodel op RULE key=value ...
    --device DEVICE`` prints, number for number.

    Beyond :func:`~costmodel.rules.op_cost` and :func:`~costmodel.roofline.bound`, it prices a
    matmul (``gemm``, ``batched_gemm``, ``per_sample_matmul``, ``grouped_gemm``) whose operands are
    narrower than 16 bits and whose ``out_dtype`` is not given with a bf16 output, as GEMM kernels
    write it and ``derive`` and the model graphs price it (``op_cost`` itself writes the operands'
    format), and says so among the notes; a numeric result beyond a float's range is refused.

    Parameters
    ----------
    rule : str
        The rule's name (:func:`~costmodel.rules.rule_names`).
    device : Hardware or str, default "h100-sxm"
        The device, or a catalog name or alias (the command's ``--device`` default).
    **params
        The rule's parameters (``M=1, N=4096, K=4096, dtype="fp8_e4m3"``): numbers, sympy
        expressions, dtype names.

    Returns
    -------
    OpRoofline
        The parameters as priced, the cost, the bound and the notes; ``to_dict()`` is the
        command's ``--json``.

    Raises
    ------
    CostModelError
        When the rule is unknown (:class:`~costmodel.errors.UnknownRuleError`), a parameter is
        missing, unknown or invalid, the device is unknown, or a numeric result is beyond a
        float's range.

    >>> r = op_roofline("gemm", "h100", M=16, N=4096, K=4096, dtype="fp8_e4m3")
    >>> r.params["out_dtype"], int(r.cost.write_terms["dram"])  # 16 x 4096 bf16 outputs
    ('bf16', 131072)
    """
    params = dict(params)
    note = _gemm_output(rule, params)
    cost = op_cost(rule, **params)
    hw = get_device(device)
    b = bound(cost, hw)
    if cost.is_numeric:
        _check_finite(rule, params, cost, b)
    from .hardware.fallback import roof_notes

    notes = ([note] if note else []) + list(roof_notes(hw, used=cost.flop_terms))
    return OpRoofline(rule, params, cost, b, tuple(notes))


@dataclass(frozen=True)
class OperatorReport(Result):
    """The profiling article's operator ledger on a device with the GEMM crossover: what
    ``costmodel report`` prints (:func:`operator_report`)."""

    device: str  #: the device's catalog name
    description: str  #: the device's description
    dtype: str  #: the operands' format
    roof: str  #: the tensor roof the dtype computes on (fp8_e4m3 on fp8)
    roof_shown: str  #: the roof that bounds it on the device (fp16 where no bf16 rate is published)
    notes: tuple[str, ...]  #: what the device makes the bounds assume
    ridge_flop_per_byte: float  #: ``I* = P_tensor / beta_dram``
    rows: tuple[dict[str, Any], ...]  #: one roofline row per op (:func:`roofline_rows`)
    crossover: Any  #: the [M,4096] x [4096,4096] GEMM's crossover on the device (a ``Crossover``)
    closed_form: Any  #: the crossover in ``N``, ``K``, ``P`` and ``beta`` (a ``Crossover``)

    def to_dict(self) -> dict[str, Any]:
        """``costmodel report --json``."""
        return {
            "device": self.device,
            "dtype": self.dtype,
            "notes": list(self.notes),
            "ridge_flop_per_byte": self.ridge_flop_per_byte,
            "ops": list(self.rows),
            "gemm_crossover_4096": self.crossover.to_dict(),
            "gemm_crossover_symbolic": self.closed_form.to_dict(),
        }

    def to_text(self) -> str:
        """``costmodel report``'s text.

        Returns
        -------
        str
        """
        import sympy

        from .pretty import tidy_signs
        from .text import fmt_num

        xo, sym = self.crossover, self.closed_form
        lines = [f"Roofline of the standard operator ledger on {self.device} ({self.description})"]
        lines += [f"  note: {note}" for note in self.notes]
        lines += [
            f"ridge point I* = P_tensor,{self.roof_shown} / beta_dram = {self.ridge_flop_per_byte:.1f} FLOP/B\n",
            format_table(list(self.rows)),
            "\nGEMM [M,4096] x [4096,4096]: smallest M that is compute-bound",
        ]
        if xo.exact is not None:
            lines.append(f"  exact root M* = {fmt_num(as_float(xo.exact), '.1f')}  -> M = {xo.integer}")
            lines.append(f"  asymptote (M << N,K): M* = I* b / 2 = {fmt_num(as_float(xo.asymptotic), '.1f')}")
        else:  # a ridge above the shape's ceiling (derive crossover says the same)
            top = as_float(sympy.limit(xo.intensity, xo.variable, sympy.oo))
            lines.append(
                f"  never compute-bound: the intensity's ceiling (M -> oo) {fmt_num(top, '.2f')} FLOP/B is below "
                "the ridge point"
            )
            lines.append(
                f"  asymptote (M << N,K): M* = I* b / 2 = {fmt_num(as_float(xo.asymptotic), '.1f')}  (the limit "
                "N, K -> oo, not this shape's)"
            )
        lines.append(f"  closed form: M* = {tidy_signs(sym.exact)}   ->  {sym.asymptotic} as N, K -> oo")
        return "\n".join(lines)


def operator_report(device: Hardware | str = "h100-sxm", dtype: str = "bf16") -> OperatorReport:
    """The profiling article's operator ledger (:func:`standard_ops`) as roofline rows on
    ``device``, its ridge point, and the GEMM ``[M,4096] x [4096,4096]`` crossover numeric and in
    closed form: what ``costmodel report`` (``costmodel`` with no arguments) prints.

    Parameters
    ----------
    device : Hardware or str, default "h100-sxm"
        The device, or a catalog name or alias.
    dtype : str, default "bf16"
        The operands' format; it computes on its tensor roof (``fp8_e4m3`` on ``fp8``).

    Returns
    -------
    OperatorReport
        The rows, the ridge (FLOP/B), the crossovers and the device's notes; ``to_dict()`` is
        ``costmodel report --json``.

    Raises
    ------
    CostModelError
        When the device or the dtype is unknown, or the device has no tensor roof for it.

    >>> r = operator_report("h100")
    >>> round(r.ridge_flop_per_byte, 1), r.crossover.integer  # 989.4 TFLOP/s / 3.35 TB/s; M* = 346
    (295.3, 346)
    """
    from .derive import gemm_crossover
    from .dtypes import roof_of
    from .hardware.fallback import roof_notes, roof_precision
    from .symbols import dim

    hw = get_device(device)
    roof = roof_of(dtype)  # the roof a dtype computes on: fp8_e4m3 on the fp8 one
    ops = standard_ops(dtype)
    rows = roofline_rows(ops, hw, ridge_precision=roof)
    xo = gemm_crossover(N=4096, K=4096, hw=hw, dtype=dtype)
    # the closed form of the page's own dtypes, their byte widths substituted (a narrow GEMM
    # writes bf16, as the table's GEMM rows and the numeric root price it): free in P, beta, N, K
    sym = gemm_crossover(N=dim("N"), K=dim("K"), dtype=dtype)
    ridge = as_float(hw.balance("tensor", roof))
    # what the device makes the bound assume, said once as `op` says it: the units the table prices
    used = {key for _, cost in ops for key in cost.flop_terms}
    return OperatorReport(
        hw.name,
        hw.description,
        dtype,
        roof,
        roof_precision(hw, "tensor", roof),
        tuple(roof_notes(hw, used=used)),
        ridge,
        tuple(rows),
        xo,
        sym,
    )
