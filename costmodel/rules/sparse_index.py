r"""Sparse-attention index ops: DeepSeek's lightning indexer and a top-k selection.

DeepSeek Sparse Attention (DeepSeek-V3.2-Exp report, sec. 2.1; transformers'
``DeepseekV32Indexer``) scores every (query ``t``, earlier key ``s``) pair with a few
small heads and keeps each query's ``k`` best keys for the main attention:

.. math::

    I_{t,s} = \sum_{j=1}^{H_I} w_{t,j}\,\mathrm{ReLU}(q_{t,j} \cdot k_s)

(``H_I`` index heads of width ``d_I``, one shared key per position, ``w`` a per-token
weight per head). :func:`lightning_indexer` prices those logits: ``2 d_I`` tensor FLOPs
per (head, pair) for the dot product and 3 vector FLOPs (ReLU, the weight multiply and the
head sum's add); it reads the queries, the head weights and each key once (the key cache
is FP8 with a per-token FP32 scale in DeepGEMM's ``fp8_mqa_logits`` and vLLM: pass
``key_bytes``) and writes one FP32 logit per pair. Causal pairs are
:func:`~costmodel.rules.attention.causal_pairs`.

:func:`topk` prices the selection: it reads every logit once, spends ``compare_ops``
vector operations on each (default 2: a radix-select histogram pass and the gather of the
winners), and writes ``k`` int32 indices per row (padded with -1 where a row has fewer
candidates, as vLLM's index buffer is).
"""

from __future__ import annotations

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .attention import causal_pairs
from .registry import register_rule

__all__ = ["lightning_indexer", "topk"]

_INDEX_BYTES = 4  # int32 indices, fp32 logits


@register_rule("lightning_indexer")
def lightning_indexer(
    *,
    heads: object,
    q_len: object,
    kv_len: object,
    head_dim: object,
    batch: object = 1,
    causal: bool = True,
    dtype: DTypeLike = "bf16",
    key_bytes: object | None = None,
    weight_dtype: DTypeLike = "fp32",
    compute_dtype: DTypeLike | None = None,
) -> Cost:
    r"""Index logits of ``q_len`` queries over ``kv_len`` keys (module doc).

    .. math::

        F_\text{tensor} = 2\,B H_I P d_I,\quad F_\text{vector} = 3\,B H_I P,\qquad
        D = B\,(N H_I d_I\,q + N H_I\,w + N_{kv}\,k_b) + 4\,B P

    with ``P`` the scored pairs (causal: :math:`N N_{kv} - N(N-1)/2`), ``q`` the query
    dtype's bytes, ``w`` the head weights' and ``k_b`` the bytes of one cached key
    (``key_bytes``; default ``d_I`` values of ``dtype``).

    >>> from costmodel.symbols import dim
    >>> c = lightning_indexer(heads=64, q_len=1, kv_len=dim("ctx"), head_dim=128)
    >>> c.flops_on("tensor"), c.flops_on("vector")
    (16384*ctx, 192*ctx)
    """
    nb, h = check_dim(batch, "batch"), check_dim(heads, "heads")
    n, nkv = check_dim(q_len, "q_len"), check_dim(kv_len, "kv_len")
    if causal and n.is_number and nkv.is_number and n > nkv:  # negative pairs: negative FLOPs
        raise RuleArgumentError(
            f"lightning_indexer: causal needs q_len <= kv_len (queries are the last positions), "
            f"got q_len={n}, kv_len={nkv}"
        )
    d = check_dim(head_dim, "head_dim")
    qb = dtype_bytes(dtype, "dtype")
    kb = d * qb if key_bytes is None else check_dim(key_bytes, "key_bytes")
    wb = dtype_bytes(weight_dtype, "weight_dtype")
    pairs = causal_pairs(n, nkv) if causal else n * nkv
    prec = roof_of(compute_dtype if compute_dtype is not None else dtype)
    return (
        Cost.compute("tensor", prec, 2 * nb * h * pairs * d)  # q_j . k_s per head and pair
        + Cost.compute("vector", roof_of("fp32"), 3 * nb * h * pairs)  # ReLU, * w_j, + over heads
        + Cost.traffic(
            read=nb * (n * h * d * qb + n * h * wb + nkv * kb),
            write=_INDEX_BYTES * nb * pairs,  # one fp32 logit per scored pair
        )
        + Cost.launches(1)
    )


@register_rule("topk")
def topk(
    *,
    rows: object,
    elements: object,
    k: object,
    dtype: DTypeLike = "fp32",
    compare_ops: object = 2,
    pad: bool = False,
) -> Cost:
    r"""Select the ``k`` largest of each row's scores: ``elements`` scores over ``rows`` rows.

    .. math::

        F_\text{vector} = c\,E,\qquad D = s\,E + 4\,R\,k

    (``c = compare_ops``, ``E`` elements of ``s`` bytes read once, ``k`` int32 indices
    written per row). ``k`` is at most a row's ``E/R`` elements unless ``pad``: a kernel that
    writes ``k`` indices a row whatever the row holds, the rest padded (DeepSeek's sparse
    indexer keeps ``k = 2048`` slots over a shorter context).

    >>> from costmodel.symbols import dim
    >>> c = topk(rows=1, elements=dim("ctx"), k=2048)
    >>> c.flops_on("vector"), c.bytes
    (2*ctx, 4*ctx + 8192)
    """
    r, e, kk = check_dim(rows, "rows"), check_dim(elements, "elements"), check_dim(k, "k")
    if not pad and r.is_number and e.is_number and kk.is_number and kk * r > e:
        raise RuleArgumentError(
            f"topk: k={kk} is more than a row's elements (elements/rows = {e}/{r}); give k <= {e / r}, "
            "or pad=true for a kernel that writes k indices a row, the rest padded"
        )
    c = check_dim(compare_ops, "compare_ops", allow_zero=True)
    s = dtype_bytes(dtype, "dtype")
    return (
        Cost.compute("vector", roof_of("fp32"), c * e)
        + Cost.traffic(read=s * e, write=_INDEX_BYTES * r * kk)
        + Cost.launches(1)
    )
