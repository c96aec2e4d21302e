"""Collective communication over ``p`` devices with an alpha-beta link model.

Each device sends ``bytes`` over a link class (``scale_up``: NVLink, xGMI,
ICI; ``scale_out``: the network) in ``steps`` latency-bound rounds; the
roofline charges ``bytes / link_bandwidth + steps * link_latency``
(Hockney's alpha-beta model). Bytes per device (Thakur, Rabenseifner & Gropp,
IJHPCA 2005; NCCL's ``busbw`` factors):

==============  =================  ==========  ===========
collective      bytes per device   ring steps  direct steps
==============  =================  ==========  ===========
all_reduce      2 (p-1)/p * n b    2 (p-1)     2 (two-shot)
all_gather      (p-1)/p * n b      p-1         1
reduce_scatter  (p-1)/p * n b      p-1         1
==============  =================  ==========  ===========

``all_reduce`` also takes ``algorithm="in_network"``: the switch reduces
(NVLink SHARP / NVLS, InfiniBand SHARP; Graham et al., "Scalable Hierarchical
Aggregation Protocol", COMHPC 2016), so each device sends its vector once and
receives the result once: ``n b`` bytes per direction in one round. No
all-reduce moves less (each device must receive ``n`` reduced elements), so
this is also the algorithm-independent lower bound.

``n`` is the full tensor's element count (the all-reduce input, the
all-gather output, the reduce-scatter input). Reductions add ``(p-1)/p * n``
vector FLOPs per device. DRAM traffic is the ideal in-place figure: the
input read once and the output written once.
"""

from __future__ import annotations

import sympy

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]

_ALGOS = ("ring", "direct", "in_network")


def _common(rule: str, elements: object, p: object, algorithm: str) -> tuple[sympy.Expr, sympy.Expr]:
    allowed = _ALGOS if rule == "all_reduce" else _ALGOS[:2]
    if algorithm not in allowed:
        raise RuleArgumentError(f"{rule}: algorithm {algorithm!r} not allowed; allowed: {', '.join(allowed)}")
    return check_dim(elements, "elements"), check_dim(p, "p")


@register_rule("all_reduce")
def all_reduce(
    *,
    elements: object,
    p: object,
    dtype: DTypeLike = "bf16",
    algorithm: str = "ring",
    link: str = "scale_up",
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """Sum a tensor of ``n`` elements across ``p`` devices (table in module doc).

    .. math::

        T_\\text{link} = \\frac{2(p-1)}{p}\\frac{n b}{\\beta_\\text{link}}
                        + 2(p-1)\\,\\alpha \\quad\\text{(ring)}

    ``p = 1`` costs nothing.

    >>> from costmodel.symbols import dim, p
    >>> n = dim("n")
    >>> all_reduce(elements=n, p=p).comm_terms["scale_up"]
    4*n*(p - 1)/p
    """
    n, pp = _common("all_reduce", elements, p, algorithm)
    if pp == 1:
        return Cost.zero()
    b = dtype_bytes(dtype, "dtype")
    if algorithm == "in_network":
        sent, steps = b * n, sympy.Integer(1)
    else:
        sent = b * n * 2 * (pp - 1) / pp
        steps = 2 * (pp - 1) if algorithm == "ring" else sympy.Integer(2)
    return (
        Cost.comm(link, sent, steps)
        + Cost.compute("vector", roof_of(compute_dtype), n * (pp - 1) / pp)
        + Cost.traffic(read=b * n, write=b * n)
        + Cost.launches(1)
    )


@register_rule("all_gather")
def all_gather(
    *,
    elements: object,
    p: object,
    dtype: DTypeLike = "bf16",
    algorithm: str = "ring",
    link: str = "scale_up",
) -> Cost:
    """Gather ``p`` shards into the full ``n``-element tensor on every device.

    .. math::

        T_\\text{link} = \\frac{p-1}{p}\\frac{n b}{\\beta_\\text{link}} + (p-1)\\,\\alpha
        \\quad\\text{(ring)}

    >>> from costmodel.symbols import dim
    >>> all_gather(elements=dim("n"), p=4).comm_step_terms["scale_up"]
    3
    """
    n, pp = _common("all_gather", elements, p, algorithm)
    if pp == 1:
        return Cost.zero()
    b = dtype_bytes(dtype, "dtype")
    steps = pp - 1 if algorithm == "ring" else sympy.Integer(1)
    return (
        Cost.comm(link, b * n * (pp - 1) / pp, steps)
        + Cost.traffic(read=b * n / pp, write=b * n)
        + Cost.launches(1)
    )


@register_rule("reduce_scatter")
def reduce_scatter(
    *,
    elements: object,
    p: object,
    dtype: DTypeLike = "bf16",
    algorithm: str = "ring",
    link: str = "scale_up",
    compute_dtype: DTypeLike = "fp32",
) -> Cost:
    """Sum an ``n``-element tensor across ``p`` devices, each keeping ``n/p``.

    .. math::

        T_\\text{link} = \\frac{p-1}{p}\\frac{n b}{\\beta_\\text{link}} + (p-1)\\,\\alpha
        \\quad\\text{(ring)}

    >>> from costmodel.symbols import dim
    >>> reduce_scatter(elements=dim("n"), p=2).comm_terms["scale_up"]
    n
    """
    n, pp = _common("reduce_scatter", elements, p, algorithm)
    if pp == 1:
        return Cost.zero()
    b = dtype_bytes(dtype, "dtype")
    steps = pp - 1 if algorithm == "ring" else sympy.Integer(1)
    return (
        Cost.comm(link, b * n * (pp - 1) / pp, steps)
        + Cost.compute("vector", roof_of(compute_dtype), n * (pp - 1) / pp)
        + Cost.traffic(read=b * n, write=b * n / pp)
        + Cost.launches(1)
    )


@register_rule("all_to_all")
def all_to_all(
    *,
    elements: object,
    p: object,
    dtype: DTypeLike = "bf16",
    algorithm: str = "direct",
    link: str = "scale_up",
) -> Cost:
    """Every device sends a distinct ``n/p`` slice of its ``n`` elements to each other device.

    .. math::

        T_\\text{link} = \\frac{p-1}{p}\\frac{n b}{\\beta_\\text{link}} + s\\,\\alpha,\\qquad
        s = 1 \\;(\\text{direct}),\\; p-1 \\;(\\text{ring/pairwise})

    Expert parallelism dispatches each token's hidden state to the devices
    holding its experts and combines the results the same way: two
    all-to-alls per MoE layer.

    >>> from costmodel.symbols import dim
    >>> all_to_all(elements=dim("n"), p=4).comm_terms["scale_up"]
    3*n/2
    """
    n, pp = _common("all_to_all", elements, p, algorithm)
    if pp == 1:
        return Cost.zero()
    b = dtype_bytes(dtype, "dtype")
    steps = sympy.Integer(1) if algorithm == "direct" else pp - 1
    return (
        Cost.comm(link, b * n * (pp - 1) / pp, steps)
        + Cost.traffic(read=b * n, write=b * n)
        + Cost.launches(1)
    )
