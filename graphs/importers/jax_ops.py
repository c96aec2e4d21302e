"""Op-table mappers that only JAX's primitives need (XLA's own ops and conventions).

The elementwise, reduction, view and cast primitives share the ATen mappers in
:mod:`graphs.importers.ops` (their ``jax=`` names); these are the ones with no ATen twin.
"""

from __future__ import annotations

import sympy

from costmodel.errors import CostModelError
from costmodel.keys import Role

from .ops import elementwise_mapped, numel
from .table import Mapped, OpView, register_import

__all__ = [
    "logistic",
    "integer_pow",
    "dot_general",
    "dynamic_update_slice",
    "conv_general_dilated",
    "reduce_window",
]


@register_import(jax="logistic")
def logistic(v: OpView) -> Mapped:
    """XLA's ``logistic`` is one op: one transcendental per element (ATen's sigmoid we count as
    its decomposition, 1 / (1 + exp(-x)))."""
    return elementwise_mapped((0, 1), v)


@register_import(jax="integer_pow")
def integer_pow(v: OpView) -> Mapped:
    """``x ** y`` for a whole ``y``: multiplications by repeated squaring, ``floor(log2 |y|) +
    popcount(|y|) - 1`` per element (what XLA lowers it to), plus a division when ``y < 0``."""
    y = int(v.scalar(None, "y", 2))
    n = abs(y)
    muls = max(n.bit_length() - 1 + bin(n).count("1") - 1, 0) if n else 0
    return elementwise_mapped((muls + (1 if y < 0 else 0), 0), v)


@register_import(jax="dot_general")
def dot_general(v: OpView) -> Mapped:
    """``dot_general``: contracting dims give ``K``, batch dims the batch, the rest ``M`` and ``N``."""
    (lc, _rc), (lb, _rb) = v.scalar(None, "dimension_numbers")
    a, b = v.ins[0][1], v.ins[1][1]
    k = sympy.Mul(*(a.shape[i] for i in lc))
    batch = sympy.Mul(*(a.shape[i] for i in lb))
    m = sympy.simplify(numel(a) / (k * batch))
    n = sympy.simplify(numel(b) / (k * batch))
    dtypes = {"dtype": a.dtype.name, "w_dtype": b.dtype.name, "out_dtype": v.out.dtype.name}
    if batch == 1:
        return Mapped("gemm", {"M": m, "N": n, "K": k, **dtypes, "bias": False}, v.ins, role=Role.LINEAR)
    return Mapped("batched_gemm", {"batch": batch, "M": m, "N": n, "K": k, **dtypes}, v.ins)


@register_import(jax="dynamic_update_slice")
def dynamic_update_slice(v: OpView) -> Mapped:
    """``operand.at[idx].set(update)``: charges the update (read and written), not the operand
    it lands in (updated in place) nor the scalar start indices, as ATen's in-place updates."""
    operand, update = v.ins[0][1], v.ins[1][1]
    params = {"elements": numel(update), "dtype": update.dtype.name, "out_dtype": operand.dtype.name}
    free = {i: 0 for i in range(len(v.ins)) if i != 1}
    return Mapped("copy", params, v.ins, free, role=Role.VIEW)


@register_import(jax="conv_general_dilated")
def conv_general_dilated(v: OpView) -> Mapped:
    """XLA's convolution -> ``conv``, its axes read from ``dimension_numbers`` (``lhs_spec``: batch,
    feature, spatial; ``rhs_spec``: out feature, in feature, spatial; ``out_spec`` as lhs), the
    groups from ``feature_group_count``. An input dilated by ``lhs_dilation`` (``conv_transpose``'s
    lowering) is priced as a transposed convolution, each input scattered into ``C_out/g * k``
    outputs (the zeros between inputs are not multiplied), as torch's and ONNX's transposes are."""
    dn = v.scalar(None, "dimension_numbers")
    if int(v.scalar(None, "batch_group_count", 1)) != 1:
        raise CostModelError(
            f"conv_general_dilated with batch_group_count {v.scalar(None, 'batch_group_count')} (a gradient's "
            "convolution) has no cost mapping; allowed: 1"
        )
    x, w, out = v.ins[0][1], v.ins[1][1], v.out
    lhs, rhs, osp = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    params = {
        "batch": x.shape[lhs[0]],
        "in_channels": x.shape[lhs[1]],
        "out_channels": out.shape[osp[1]],
        "in_size": sympy.Mul(*(x.shape[i] for i in lhs[2:])),
        "out_size": sympy.Mul(*(out.shape[i] for i in osp[2:])),
        "kernel_size": sympy.Mul(*(w.shape[i] for i in rhs[2:])),
        "groups": int(v.scalar(None, "feature_group_count", 1)),
        "transposed": any(int(d) > 1 for d in (v.scalar(None, "lhs_dilation") or ())),
        "dtype": x.dtype.name,
        "w_dtype": w.dtype.name,
        "out_dtype": out.dtype.name,
    }
    return Mapped("conv", params, v.ins, role=Role.LINEAR)


@register_import(jax=("reduce_window_max", "reduce_window_min", "reduce_window_sum"))
def reduce_window(v: OpView) -> Mapped:
    """``lax.reduce_window`` (flax's pools): each output combines ``prod(window_dimensions)`` inputs."""
    x, out = v.ins[0][1], v.out
    window = sympy.Mul(*(int(d) for d in v.scalar(None, "window_dimensions")))
    params = {"outputs": numel(out), "combines": numel(out) * window, "inputs": numel(x), "dtype": x.dtype.name,
              "out_dtype": out.dtype.name}  # fmt: skip
    return Mapped("pool", params, v.ins[:1])
