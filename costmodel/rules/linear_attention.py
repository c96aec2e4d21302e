"""Linear attention with the gated delta rule (Gated DeltaNet, Qwen3-Next's linear layers).

Per sequence and value head the state ``S`` is a ``d_k x d_v`` matrix (Yang,
Kautz and Hatamizadeh 2024, "Gated Delta Networks", arXiv:2412.06464). One
token updates and reads it::

    S   = alpha_t * S                        # d_k d_v mul   (gated decay)
    u   = beta_t * (v_t - S^T k_t)           # 2 d_k d_v + 2 d_v
    S   = S + k_t u^T                        # 2 d_k d_v
    o_t = S^T q_t                            # 2 d_k d_v

``7 d_k d_v + 2 d_v`` vector FLOPs per head and token. The gates:
``alpha = exp(-exp(A_log) softplus(a + dt_bias))`` (2 vector, 3 SFU) and
``beta = sigmoid(b)`` (2 vector, 1 SFU) per value head; ``q`` and ``k`` are
L2-normalised per key head (``3 d_k`` vector and one rsqrt each).

Prefill runs the chunkwise form with the WY representation (Yang et al. 2024,
"Parallelizing Linear Transformers with the Delta Rule over Sequence
Length", arXiv:2406.06484) over chunks of ``Q`` tokens. Per chunk and head:
``K K^T`` (``2Q^2 d_k``), ``W = T K`` and ``U = T V`` (``2Q^2 d_k``,
``2Q^2 d_v``), ``U - W S`` and ``Q S`` (``2Q d_k d_v`` each), the masked
``Q K^T`` and its product with the corrected values (``2Q^2 d_k``,
``2Q^2 d_v``), the state update ``K^T U'`` (``2Q d_k d_v``); the triangular
inverse ``T`` costs ``2Q^3/3`` on the vector units. Per token:

.. math::

    F_\\text{tensor} = H_v (Q (6 d_k + 4 d_v) + 6 d_k d_v), \\quad
    F_\\text{vector} \\mathrel{+}= H_v\\,2Q^2/3

Bytes: ``q``, ``k`` (``H_k d_k`` each), ``v`` (``H_v d_v``) and the two gates
(``2 H_v``) read per token, ``o`` written; the state (``B H_v d_k d_v`` at the
state dtype) read and written per decode step, written at the end of a
prefill (read too after a cached prefix).
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["gated_delta_rule"]

_MODES = ("recurrent", "chunked")


@register_rule("gated_delta_rule")
def gated_delta_rule(
    *,
    tokens: object,
    key_heads: object,
    value_heads: object,
    key_dim: object,
    value_dim: object,
    batch: object = 1,
    mode: str = "chunked",
    chunk: object = 64,
    dtype: DTypeLike = "bf16",
    state_dtype: DTypeLike = "fp32",
    read_state: bool = False,
) -> Cost:
    """The gated delta rule over ``tokens`` (module doc).

    .. math::

        F_\\text{recurrent} = T H_v (7 d_k d_v + 2 d_v) + T (4 H_v + 6 H_k d_k) \\;(\\text{vector})
        + T (4 H_v + 2 H_k) \\;(\\text{sfu})

        D = b\\,T (2 H_k d_k + 2 H_v d_v + 2 H_v) + s\\,B H_v d_k d_v (1 + [\\text{read}])

    >>> int(gated_delta_rule(tokens=1, key_heads=1, value_heads=1, key_dim=2, value_dim=2,
    ...                      mode="recurrent").flops)  # 7*4 + 2*2 + 4 + 6*2 vector, 4 + 2 SFU
    54
    """
    if mode not in _MODES:
        raise RuleArgumentError(f"gated_delta_rule: mode {mode!r} not allowed; allowed: {', '.join(_MODES)}")
    t, nb = check_dim(tokens, "tokens"), check_dim(batch, "batch")
    hk, hv = check_dim(key_heads, "key_heads"), check_dim(value_heads, "value_heads")
    dk, dv = check_dim(key_dim, "key_dim"), check_dim(value_dim, "value_dim")
    if hk.is_number and hv.is_number and hv % hk != 0:
        raise RuleArgumentError(
            f"gated_delta_rule: value_heads ({hv}) must be a multiple of key_heads ({hk})"
        )
    b, sb = dtype_bytes(dtype, "dtype"), dtype_bytes(state_dtype, "state_dtype")
    prec = roof_of("fp32")
    # gates (alpha, beta) per value head, L2 norms of q and k per key head
    cost = Cost.compute("vector", prec, t * (4 * hv + 6 * hk * dk)) + Cost.compute(
        "sfu", prec, t * (4 * hv + 2 * hk)
    )
    if mode == "recurrent":
        cost += Cost.compute("vector", prec, t * hv * (7 * dk * dv + 2 * dv))
        state_read = True
    else:
        q = check_dim(chunk, "chunk")
        cost += Cost.compute("tensor", roof_of(dtype), t * hv * (q * (6 * dk + 4 * dv) + 6 * dk * dv))
        cost += Cost.compute("vector", prec, t * hv * 2 * q**2 / 3)
        state_read = read_state
    state = sb * nb * hv * dk * dv
    io = b * t * (2 * hk * dk + hv * dv + 2 * hv)
    return (
        cost
        + Cost.traffic(read=io + (state if state_read else 0), write=b * t * hv * dv + state)
        + Cost.launches(1 if mode == "recurrent" else 4)
    )
