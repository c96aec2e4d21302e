"""Scaled dot-product attention: naive (materialised) and FlashAttention.

Shapes: ``batch`` sequences, ``heads`` query heads sharing ``kv_heads``
key/value heads (MHA ``kv_heads = heads``, GQA fewer, MQA one), ``q_len``
queries attending to ``kv_len`` keys, head dim ``head_dim`` (``v_head_dim``
for V and O, default the same).

FLOPs per (batch, head) over the scored pairs ``P``::

    S = Q @ K^T     # [q_len, d] x [d, kv_len]  -> 2*d  FLOPs per pair
    O = P @ V       # [q_len, kv_len] x [kv_len, dv] -> 2*dv FLOPs per pair
    softmax(S)      # vector_ops + sfu_ops per pair (see softmax rule)

so ``F = 4*N*N_kv*d + 5*N*N_kv`` per head with the defaults (the profiling
article's ``4N^2 D + 5N^2``). The ``1/sqrt(d)`` scale is folded into Q or the
exp argument and not counted.

Causal masking, queries being the last ``q_len`` of ``kv_len`` positions,
scores ``P = q_len*kv_len - q_len*(q_len-1)/2`` pairs (``N(N+1)/2`` for
self-attention, ``kv_len`` for one decode query). FlashAttention skips the
masked tiles, so its work follows ``P``; the naive kernel computes the full
matrix and masks it, so it pays for all ``q_len*kv_len`` pairs.

A sliding window of ``W`` keys (Mistral, Gemma, gpt-oss local layers) caps
what each query sees at ``W``; see :func:`window_pairs`. Only the last
``min(kv_len, q_len + W - 1)`` keys are read.

Bytes:

* ``naive`` materialises S and P: writes S, the (fused) softmax reads S and
  writes P, the second matmul reads P: ``4*N*N_kv`` score elements, plus
  Q, K, V read and O written once (K/V once per KV head: grouped query heads
  share one operand read). Three kernels.
* ``flash`` with ``q_block=None``: the ideal minimum, Q, K, V read once and O
  written once; one kernel (Dao et al. 2022, the IO lower bound the article
  calls ``D_flash,min``).
* ``flash`` with ``q_block=Br``: K and V are re-read once per query block,
  ``ceil(q_len/Br)`` times (causal: only the blocks up to the diagonal).

K and V are charged ``kv_dtype`` bytes (an fp8 or int8 KV cache under bf16
queries). ``kv_shared=True`` says V is a slice of K, as in DeepSeek's
absorbed MLA decode where keys are ``[c_kv; k_rope]`` (576 wide) and values
are ``c_kv`` (512): the cache is read once, ``max(d, dv)`` per token.
"""

from __future__ import annotations

import sympy

from ..cost import Cost
from ..dtypes import DTypeLike, dtype_bytes, roof_of
from ..errors import RuleArgumentError
from ..symbols import check_dim
from .registry import register_rule

__all__ = ["attention", "causal_pairs", "window_pairs", "chunk_pairs", "chunk_keys"]

_VARIANTS = ("naive", "flash")


def causal_pairs(q_len: sympy.Expr, kv_len: sympy.Expr) -> sympy.Expr:
    """Scored (query, key) pairs under a causal mask.

    Queries are the last ``q_len`` of ``kv_len`` positions; query ``i`` (0
    based) sees ``kv_len - q_len + i + 1`` keys:

    .. math::

        P = \\sum_{i=0}^{N-1} (N_{kv} - N + i + 1) = N N_{kv} - \\frac{N(N-1)}{2}

    >>> from costmodel.symbols import dim
    >>> n = dim("n")
    >>> sympy.factor(causal_pairs(n, n))
    n*(n + 1)/2
    """
    return q_len * kv_len - q_len * (q_len - 1) / 2


def window_pairs(q_len: sympy.Expr, kv_len: sympy.Expr, window: sympy.Expr) -> sympy.Expr:
    """Scored pairs under a causal mask and a sliding window of ``W`` keys.

    Query ``i`` sees ``k_i = N_kv - N + i + 1`` keys, capped at ``W``; with
    ``S(x) = \\sum_{k=1}^{x} \\min(k, W)`` the pairs are ``S(N_kv) - S(N_kv - N)``:

    .. math::

        S(x) = \\frac{m(m+1)}{2} + W \\max(x - W, 0), \\quad m = \\min(x, W)

    (Beltagy et al., Longformer, 2020: ``O(nW)`` windowed attention; the sum
    is a hand derivation). A window at least ``kv_len`` is plain causal.

    >>> int(window_pairs(8, 8, 3))  # 1 + 2 + 3*6
    21
    >>> int(window_pairs(1, 100, 3))  # one decode query sees W keys
    3
    """

    if q_len == 1:  # one query (decode) sees the last min(N_kv, W) keys: the closed form directly
        return sympy.Min(kv_len, window)

    def s(x: sympy.Expr) -> sympy.Expr:
        m = sympy.Min(x, window)
        return m * (m + 1) / 2 + window * sympy.Max(x - window, 0)

    return s(kv_len) - s(kv_len - q_len)


def _sink_bytes(sinks: sympy.Expr, heads: sympy.Expr, nbytes: sympy.Expr) -> sympy.Expr:
    """Bytes of the learned sink logits: ``H s`` values."""
    return sinks * heads * nbytes


def _chunk_sum(x: sympy.Expr, chunk: sympy.Expr) -> sympy.Expr:
    """``sum_{p=0}^{x-1} ((p mod C) + 1)``: whole chunks give ``C(C+1)/2``, the rest ``r(r+1)/2``."""
    r = x - chunk * sympy.floor(x / chunk)
    return sympy.floor(x / chunk) * chunk * (chunk + 1) / 2 + r * (r + 1) / 2


def chunk_pairs(q_len: sympy.Expr, kv_len: sympy.Expr, chunk: sympy.Expr) -> sympy.Expr:
    """Scored pairs of causal attention inside fixed chunks of ``C`` positions.

    Position ``p`` (0 based) sees the ``(p mod C) + 1`` keys of its chunk up to
    itself (Llama 4's local layers, ``attention_chunk_size``); the queries are
    positions ``N_kv - N .. N_kv - 1``, so the pairs are ``S(N_kv) - S(N_kv - N)``
    with ``S(x) = floor(x/C) C(C+1)/2 + r(r+1)/2``, ``r = x mod C`` (a hand
    derivation: whole chunks and the partial last one).

    >>> int(chunk_pairs(8, 8, 3))  # chunks (0,1,2) (3,4,5) (6,7): 6 + 6 + 3
    15
    >>> int(chunk_pairs(1, 10, 4))  # position 9 is the 2nd of its chunk
    2
    """
    return _chunk_sum(kv_len, chunk) - _chunk_sum(kv_len - q_len, chunk)


def chunk_keys(q_len: sympy.Expr, kv_len: sympy.Expr, chunk: sympy.Expr) -> sympy.Expr:
    """Keys read by chunked attention: from the start of the first query's chunk to the end.

    ``N_kv - C floor((N_kv - N)/C)``; one decode query reads ``((N_kv - 1) mod C) + 1``.

    >>> int(chunk_keys(1, 10, 4)), int(chunk_keys(8, 8, 3))
    (2, 8)
    """
    return kv_len - chunk * sympy.floor((kv_len - q_len) / chunk)


@register_rule("attention")
def attention(
    *,
    heads: object,
    q_len: object,
    kv_len: object,
    head_dim: object,
    batch: object = 1,
    kv_heads: object | None = None,
    v_head_dim: object | None = None,
    dtype: DTypeLike = "bf16",
    kv_dtype: DTypeLike | None = None,
    out_dtype: DTypeLike | None = None,
    score_dtype: DTypeLike | None = None,
    kv_shared: bool = False,
    variant: str = "flash",
    causal: bool = False,
    q_block: object | None = None,
    softmax_vector_ops: object = 4,
    softmax_sfu_ops: object = 1,
    compute_dtype: DTypeLike | None = None,
    softmax_dtype: DTypeLike = "fp32",
    window: object | None = None,
    chunk: object | None = None,
    sinks: object = 0,
    slots: object | None = None,
) -> Cost:
    """Attention of ``heads`` query heads over ``kv_heads`` KV heads (module doc).

    .. math::

        F_\\text{tensor} = 2\\,B H P\\,(d + d_v),\\quad
        F_\\text{vector} = 4\\,B H P,\\quad F_\\text{sfu} = B H P

        D_\\text{min} = b\\,B\\,(H N d + H_{kv} N_{kv} (d + d_v)) + o\\,B H N d_v,\\qquad
        D_\\text{naive} = D_\\text{min} + 4\\,s\\,B H N N_{kv}

    Decode (``q_len = 1``): :math:`I_\\text{tensor} \\to 2 H/(H_{kv} b)` as
    ``kv_len`` grows, independent of context and batch.

    ``window=W`` (causal flash only): pairs from :func:`window_pairs`, and K/V
    are read for the last ``min(N_kv, N + W - 1)`` positions only. ``chunk=C``
    (causal flash only): attention inside chunks of ``C`` positions
    (:func:`chunk_pairs`, :func:`chunk_keys`). ``sinks=s``: ``s`` learned sink
    logits per head join every query's softmax (gpt-oss; Xiao et al. 2023 keep
    sink *tokens*, which a window policy retains as ordinary keys): ``s``
    more exponentials and adds per query row, and the ``H s`` logits read.
    ``slots=k`` (causal flash only, no ``q_block``, window or chunk): a sparse
    kernel that scores each query
    against ``k`` selected key slots, computing every slot whether a key fills it
    or not, :math:`P = N k` pairs, and reading the K/V of the valid ones, the
    last ``min(N_kv, N + k - 1)`` positions as ``window=k`` does (a lower bound
    when the selected keys spread wider). FlashMLA's sparse prefill kernel, which
    runs DeepSeek Sparse Attention in vLLM 0.13.0, loops over
    ``topk / 64`` blocks of every query and masks the invalid slots to
    :math:`-\\infty` after :math:`QK^T` (``csrc/sm90/prefill/sparse/fwd.cu``:
    ``num_topk_blocks = params.topk / B_TOPK``); their loads are predicated off.

    >>> from costmodel.symbols import dim
    >>> n, d = dim("n"), dim("d")
    >>> attention(heads=1, q_len=n, kv_len=n, head_dim=d, variant="naive").flops
    4*d*n**2 + 5*n**2
    """
    if variant not in _VARIANTS:
        raise RuleArgumentError(
            f"attention: variant {variant!r} not allowed; allowed: {', '.join(_VARIANTS)}"
        )
    if q_block is not None and variant != "flash":
        raise RuleArgumentError("attention: q_block applies to variant='flash' only")
    nb = check_dim(batch, "batch")
    h = check_dim(heads, "heads")
    hkv = check_dim(kv_heads if kv_heads is not None else heads, "kv_heads")
    if h.is_number and hkv.is_number and (h % hkv != 0):
        raise RuleArgumentError(
            f"attention: heads ({h}) must be a multiple of kv_heads ({hkv}) for grouped queries"
        )
    n, nkv = check_dim(q_len, "q_len"), check_dim(kv_len, "kv_len")
    if causal and n.is_number and nkv.is_number and n > nkv:
        raise RuleArgumentError(
            f"attention: causal needs q_len <= kv_len (queries are the last positions), "
            f"got q_len={n}, kv_len={nkv}"
        )
    d = check_dim(head_dim, "head_dim")
    dv = check_dim(v_head_dim if v_head_dim is not None else head_dim, "v_head_dim")
    b = dtype_bytes(dtype, "dtype")
    kvb = dtype_bytes(kv_dtype if kv_dtype is not None else dtype, "kv_dtype")
    o = dtype_bytes(out_dtype if out_dtype is not None else dtype, "out_dtype")
    s = dtype_bytes(score_dtype if score_dtype is not None else dtype, "score_dtype")
    vops = check_dim(softmax_vector_ops, "softmax_vector_ops", allow_zero=True)
    sops = check_dim(softmax_sfu_ops, "softmax_sfu_ops", allow_zero=True)
    prec = roof_of(compute_dtype if compute_dtype is not None else dtype)
    sprec = roof_of(softmax_dtype)

    full = n * nkv
    pairs = causal_pairs(n, nkv) if (causal and variant == "flash") else full
    kv_read = nkv
    if window is not None:
        if not (causal and variant == "flash" and q_block is None):
            raise RuleArgumentError("attention: window applies to causal=True, variant='flash', no q_block")
        w = check_dim(window, "window")
        pairs = window_pairs(n, nkv, w)
        kv_read = sympy.Min(nkv, n + w - 1)
    if chunk is not None:
        if window is not None or not (causal and variant == "flash" and q_block is None):
            raise RuleArgumentError(
                "attention: chunk applies to causal=True, variant='flash', no q_block and no window"
            )
        c = check_dim(chunk, "chunk")
        pairs = chunk_pairs(n, nkv, c)
        kv_read = chunk_keys(n, nkv, c)
    if slots is not None:
        if window is not None or chunk is not None or not (causal and variant == "flash" and q_block is None):
            raise RuleArgumentError(
                "attention: slots applies to causal=True, variant='flash', no q_block, no window and no chunk"
            )
        k = check_dim(slots, "slots")
        pairs = n * k
        kv_read = sympy.Min(nkv, n + k - 1)
    ns = check_dim(sinks, "sinks", allow_zero=True)
    flops = (
        Cost.compute("tensor", prec, nb * h * pairs * (2 * d + 2 * dv))  # QK^T and PV per pair
        + Cost.compute("vector", sprec, vops * nb * h * (pairs + ns * n))
        + Cost.compute("sfu", sprec, sops * nb * h * (pairs + ns * n))
    )
    q_bytes = b * nb * h * n * d + _sink_bytes(ns, h, b)
    # K and V per cached token; with kv_shared V is a slice of K (MLA's latent): one read
    kv_width = sympy.Max(d, dv) if kv_shared else d + dv
    kv_bytes = kvb * nb * hkv * kv_read * kv_width
    o_bytes = o * nb * h * n * dv
    if variant == "naive":
        # S written, softmax reads S and writes P, PV reads P: 2 reads + 2 writes of N*N_kv
        score = s * nb * h * full
        return (
            flops
            + Cost.traffic(read=q_bytes + kv_bytes + 2 * score, write=o_bytes + 2 * score)
            + Cost.launches(3)
        )
    if q_block is None:
        kv_total = kv_bytes
    else:
        br = check_dim(q_block, "q_block")
        blocks = sympy.ceiling(n / br)
        if causal:
            # block j sees the prefix (kv_len - q_len) plus (j+1)*Br of the new keys
            rows = blocks * (nkv - n) + br * blocks * (blocks + 1) / 2
            kv_total = kvb * nb * hkv * rows * kv_width
        else:
            kv_total = kv_bytes * blocks
    return flops + Cost.traffic(read=q_bytes + kv_total, write=o_bytes) + Cost.launches(1)
