"""Mamba-1's selective scan (S6; Gu & Dao 2023, "Mamba", arXiv:2312.00752, Algorithm 2).

Every one of the ``D`` inner channels keeps a state of ``N`` values per
sequence; a token updates and reads them with its own step ``delta``::

    delta = softplus(delta_raw + bias)         # per channel: add, exp, log1p
    dA    = exp(delta * A)                     # per (channel, state): mul, exp
    h     = dA * h + (delta * x) * B           # 1 mul per channel, then mul, mul, add
    y     = sum_n C_n h_n + D x                # 2N, and 2 per channel

``6N + 3`` vector FLOPs and ``N + 2`` exponentials/logs per channel and token;
``B`` and ``C`` (``N`` each) are shared by the channels. The prefill kernel runs
the same recurrence as a parallel scan over the sequence, in on-chip memory:
the work per element is the same and no tensor cores are used.

Bytes: ``x``, ``delta`` (``D`` each), ``B``, ``C`` (``N`` each) read and ``y``
written per token; the state (``B_s D N`` at the state dtype) read and written
every decode step, written at the end of a prefill (read after a cached prefix).
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["selective_scan_s6"]


@register_rule("selective_scan_s6")
def selective_scan_s6(
    *,
    tokens: object,
    channels: object,
    state_size: object,
    batch: object = 1,
    dtype: DTypeLike = "bf16",
    state_dtype: DTypeLike = "fp32",
    read_state: bool = True,
) -> Cost:
    """Mamba-1's scan over ``tokens`` tokens of ``channels`` inner channels (module doc).

    .. math::

        F = T D (6N + 4) \\;(\\text{vector}) + T D (N + 2) \\;(\\text{sfu}),\\quad
        D_\\text{bytes} = b\\,T (3D + 2N) + s\\,B D N (1 + [\\text{read}])

    >>> c = selective_scan_s6(tokens=1, channels=2, state_size=3)
    >>> int(c.flops_on("vector")), int(c.flops_on("sfu"))  # 2*(6*3 + 4), 2*(3 + 2)
    (44, 10)
    """
    t, d, n = (
        check_dim(tokens, "tokens"),
        check_dim(channels, "channels"),
        check_dim(state_size, "state_size"),
    )
    nb = check_dim(batch, "batch")
    b, sb = dtype_bytes(dtype, "dtype"), dtype_bytes(state_dtype, "state_dtype")
    prec = roof_of("fp32")
    # per channel: softplus's add (1) and delta * x (1) and D x (2); per (channel, state): 6
    flops = Cost.compute("vector", prec, t * d * (6 * n + 4)) + Cost.compute("sfu", prec, t * d * (n + 2))
    state = sb * nb * d * n
    io = b * t * (2 * d + 2 * n)
    return (
        flops
        + Cost.traffic(read=io + (state if read_state else 0), write=b * t * d + state)
        + Cost.launches(1)
    )
