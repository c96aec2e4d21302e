"""Convolution and pooling: ``conv`` (1-D, 2-D, 3-D, grouped, depthwise, transposed), ``pool``.

Convention (DESIGN.md): a multiply-accumulate is 2 FLOPs on the tensor unit (an implicit GEMM);
each operand is read once and the output written once (the ideal: no halo re-reads).
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .linear import operand_bytes
from .registry import register_rule

__all__ = ["conv", "pool"]


@register_rule("conv")
def conv(
    *,
    batch: object,
    in_channels: object,
    out_channels: object,
    in_size: object,
    out_size: object,
    kernel_size: object,
    groups: object = 1,
    transposed: bool = False,
    dtype: DTypeLike = "bf16",
    w_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    compute_dtype: DTypeLike | None = None,
    bias: bool = False,
) -> Cost:
    """``y = conv(x, W)`` (+ bias): ``x`` is ``[batch, in_channels, *in]``, ``y`` is
    ``[batch, out_channels, *out]``; ``in_size``, ``out_size`` and ``kernel_size`` are the
    products of the spatial sizes (``H*W`` ...). ``W`` holds
    ``in_channels * out_channels / groups * kernel_size`` values.

    .. math::

        F = 2\\,\\text{batch}\\,\\frac{C_\\text{in} C_\\text{out}}{g}\\,k\\cdot
            \\begin{cases}\\text{out\\_size} & \\text{a convolution}\\\\
            \\text{in\\_size} & \\text{transposed}\\end{cases}, \\qquad
        D = a\\,\\text{batch}\\,C_\\text{in}\\,\\text{in\\_size}
            + w\\,\\frac{C_\\text{in} C_\\text{out}}{g}\\,k
            + o\\,\\text{batch}\\,C_\\text{out}\\,\\text{out\\_size}

    Each output position of a convolution sums ``C_in/g * k`` products; a transposed one
    scatters each input position into ``C_out/g * k`` outputs (its FLOPs follow the input).
    ``bias=True`` reads ``C_out`` values and adds one vector FLOP per output element.

    >>> int(conv(batch=2, in_channels=3, out_channels=16, in_size=32 * 32, out_size=32 * 32,
    ...          kernel_size=9, dtype="fp32").flops)
    1769472
    """
    b, cin, cout = (
        check_dim(batch, "batch"),
        check_dim(in_channels, "in_channels"),
        check_dim(out_channels, "out_channels"),
    )
    n_in, n_out, k = (
        check_dim(in_size, "in_size"),
        check_dim(out_size, "out_size"),
        check_dim(kernel_size, "kernel_size"),
    )
    g = check_dim(groups, "groups")
    for name, c in (("in_channels", cin), ("out_channels", cout)):
        q = c / g
        if q.is_number and not q.is_integer:
            raise RuleArgumentError(f"conv: {name} {c} is not a multiple of groups {g}")
    a_b, w_b, o_b, prec = operand_bytes(dtype, w_dtype, out_dtype, compute_dtype)
    filters = cin * cout / g * k  # the weight's elements
    positions = n_in if transposed else n_out
    cost = (
        Cost.compute("tensor", prec, 2 * b * filters * positions)
        + Cost.traffic(read=a_b * b * cin * n_in + w_b * filters, write=o_b * b * cout * n_out)
        + Cost.launches(1)
    )
    if bias:
        cost += Cost.compute("vector", "fp32", b * cout * n_out) + Cost.traffic(read=o_b * cout)
    return cost


@register_rule("pool")
def pool(
    *,
    outputs: object,
    combines: object,
    inputs: object,
    dtype: DTypeLike = "bf16",
    out_dtype: DTypeLike | None = None,
    index_dtype: DTypeLike | None = None,
) -> Cost:
    """A windowed reduction (max or average pooling, global or adaptive) writing ``outputs``
    elements: ``combines`` input elements in all under the windows (``outputs * prod(kernel)``
    for a fixed kernel); the input is read once.

    .. math::

        F_\\text{vector} = \\text{combines}, \\qquad
        D = b\\,\\text{inputs} + o\\,\\text{outputs} \\;(+\\; i\\,\\text{outputs})

    ``index_dtype``: a max pool that also returns each maximum's index writes one of those per
    output. A window over padding counts its padded positions (the usual convention).

    >>> int(pool(outputs=2 * 16 * 16 * 16, combines=4 * 2 * 16 * 16 * 16, inputs=2 * 16 * 32 * 32,
    ...          dtype="fp32").bytes)
    163840
    """
    n_out, n_in = check_dim(outputs, "outputs"), check_dim(inputs, "inputs")
    work = check_dim(combines, "combines")
    b = dtype_bytes(dtype, "dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    written = o * n_out + (dtype_bytes(index_dtype, "index_dtype") * n_out if index_dtype is not None else 0)
    return (
        Cost.compute("vector", "fp32", work) + Cost.traffic(read=b * n_in, write=written) + Cost.launches(1)
    )
