"""State-space rules: the causal depthwise convolution and Mamba-2's selective scan.

Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", arXiv:2405.21060) keeps, per
sequence and head, a state ``h`` of ``P x N`` (head dim by state size). Each
token updates it and reads it out::

    a_t = exp(dt_t * A)                      # per head: 1 mul, 1 exp
    h_t = a_t * h_{t-1} + (dt_t x_t) B_t^T   # P*N mul, P mul, P*N mul, P*N add
    y_t = h_t C_t + D x_t                    # 2*P*N, 2*P

so the recurrent (decode) step costs ``5 P N + 3 P`` vector FLOPs per head and
token, plus the gates: ``dt = softplus(dt + dt_bias)`` (an add, an exp and a
log1p) and the decay (a mul and an exp), 2 vector and 3 SFU ops per head. ``B`` and ``C`` (``N`` wide) are shared
by the heads of each of ``G`` groups.

Prefill runs the chunked state-space-dual algorithm (the paper's sec. 6 and
``ssd_minimal``) with chunks of ``Q`` tokens, on tensor cores. Per chunk:
``C B^T`` per group (``2 Q^2 N``), the decay-masked scores times ``X`` per head
(``2 Q^2 P``), the chunk's state per head (``2 Q N P``) and the state's
contribution to the outputs per head (``2 Q N P``); between chunks the states
pass on (``2 P N`` vector per head and chunk) and the ``Q x Q`` decay mask is
built per head (``Q^2`` exp, segment sums). Per token:

.. math::

    F_\\text{tensor} = 2 G Q N + H (2 Q P + 4 N P), \\quad
    F_\\text{vector} = H (Q + 2 P N / Q + 3 P), \\quad F_\\text{sfu} = H Q

Bytes: ``x`` (``H P``), ``B``, ``C`` (``G N`` each) and ``dt`` (``H``) read per
token and ``y`` written; the state (``B_s H P N`` at the state dtype) read and
written once per step in decode, written once at the end of a prefill (read
too when a cached prefix precedes it).
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["causal_conv1d", "selective_scan"]

_MODES = ("recurrent", "chunked")


@register_rule("causal_conv1d")
def causal_conv1d(
    *,
    tokens: object,
    channels: object,
    width: object,
    batch: object = 1,
    dtype: DTypeLike = "bf16",
    weight_dtype: DTypeLike | None = None,
    state: str = "write",
    activation: bool = True,
    bias: bool = True,
) -> Cost:
    """Depthwise causal convolution of width ``K`` over ``channels``, then SiLU.

    Per output element ``K`` multiply-adds and a bias add (``2K + 1`` vector
    FLOPs, ``2K`` without ``bias``); SiLU adds 4 vector FLOPs and an exponential.
    The kernel reads the input and the ``K (+1)`` weights per channel and writes
    the output. Each
    sequence keeps the last ``K - 1`` inputs as its conv state: ``state="write"``
    stores it (a prefill), ``"read_write"`` reads and stores it (a decode step
    or a chunk after a cached prefix).

    .. math::

        F = (2K + 1 + 4[\\text{act}])\\,T c, \\quad
        D = b\\,T c\\,2 + w\\,c (K + 1) + b\\,B (K - 1) c\\,(1 + [\\text{read}])

    >>> int(causal_conv1d(tokens=1, channels=8, width=4, activation=False, state="read_write").flops)
    72
    """
    if state not in ("write", "read_write"):
        raise RuleArgumentError(f"causal_conv1d: state {state!r} not allowed; allowed: write, read_write")
    t, c, k = check_dim(tokens, "tokens"), check_dim(channels, "channels"), check_dim(width, "width")
    nb = check_dim(batch, "batch")
    b = dtype_bytes(dtype, "dtype")
    w = dtype_bytes(weight_dtype if weight_dtype is not None else dtype, "weight_dtype")
    prec = roof_of("fp32")
    act = 4 if activation else 0
    nbias = 1 if bias else 0
    flops = Cost.compute("vector", prec, (2 * k + nbias + act) * t * c)
    if activation:
        flops += Cost.compute("sfu", prec, t * c)
    conv_state = b * nb * (k - 1) * c
    read = b * t * c + w * c * (k + nbias) + (conv_state if state == "read_write" else 0)
    return flops + Cost.traffic(read=read, write=b * t * c + conv_state) + Cost.launches(1)


@register_rule("selective_scan")
def selective_scan(
    *,
    tokens: object,
    heads: object,
    head_dim: object,
    state_size: object,
    groups: object = 1,
    batch: object = 1,
    mode: str = "chunked",
    chunk: object = 256,
    dtype: DTypeLike = "bf16",
    state_dtype: DTypeLike = "fp32",
    read_state: bool = False,
) -> Cost:
    """Mamba-2's selective scan over ``tokens`` for ``heads`` heads (module doc).

    ``mode="recurrent"`` is the token-by-token update (decode: one token per
    sequence, the state read and written); ``"chunked"`` the SSD algorithm of
    prefill (``read_state`` when a cached prefix's state is picked up).

    .. math::

        F_\\text{recurrent} = T H (5 P N + 3 P + 2) \\;(\\text{vector}) + 3 T H \\;(\\text{sfu})

        D = b\\,T (2 H P + 2 G N + H) + s\\,B H P N (1 + [\\text{read}])

    >>> from costmodel.symbols import dim
    >>> h, p, n = dim("h"), dim("p_head"), dim("n_state")
    >>> import sympy
    >>> sympy.expand(selective_scan(tokens=1, heads=h, head_dim=p, state_size=n, mode="recurrent").flops)
    5*h*n_state*p_head + 3*h*p_head + 5*h
    """
    if mode not in _MODES:
        raise RuleArgumentError(f"selective_scan: mode {mode!r} not allowed; allowed: {', '.join(_MODES)}")
    t, h, p = check_dim(tokens, "tokens"), check_dim(heads, "heads"), check_dim(head_dim, "head_dim")
    n, g, nb = check_dim(state_size, "state_size"), check_dim(groups, "groups"), check_dim(batch, "batch")
    if h.is_number and g.is_number and h % g != 0:  # each group's B, C serve heads/groups heads
        raise RuleArgumentError(
            f"selective_scan: heads must be a multiple of groups (each group serves heads/groups heads), "
            f"got heads={h}, groups={g}"
        )
    b = dtype_bytes(dtype, "dtype")
    sb = dtype_bytes(state_dtype, "state_dtype")
    prec = roof_of("fp32")
    # softplus(dt + dt_bias): add + exp + log1p; the decay exp(dt*A): mul + exp
    gates = Cost.compute("vector", prec, 2 * t * h) + Cost.compute("sfu", prec, 3 * t * h)
    if mode == "recurrent":
        work = Cost.compute("vector", prec, t * h * (5 * p * n + 3 * p))
        state_read = True
    else:
        q = check_dim(chunk, "chunk")
        work = (
            Cost.compute("tensor", roof_of(dtype), t * (2 * g * q * n + h * (2 * q * p + 4 * n * p)))
            + Cost.compute("vector", prec, t * h * (q + 2 * p * n / q + 3 * p))
            + Cost.compute("sfu", prec, t * h * q)
        )
        state_read = read_state
    state = sb * nb * h * p * n
    io = b * t * (h * p + 2 * g * n + h)
    return (
        gates
        + work
        + Cost.traffic(read=io + (state if state_read else 0), write=b * t * h * p + state)
        + Cost.launches(1 if mode == "recurrent" else 4)
    )
