"""Small graphs of the profiling article's fusion cases, op by op.

* :func:`elementwise_chain`: ``relu(x + y)`` as two kernels (add, then relu);
* :func:`attention_chain`: single- or multi-head attention as the three
  kernels a naive implementation runs, ``S = Q K^T``, ``P = softmax(S)``,
  ``O = P V``, with S and P on the edges, so fusing them into one group is
  FlashAttention's ideal minimum.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from costmodel.keys import Role
from costmodel.symbols import check_dim
from costmodel.tensor import Tensor

from .builder import GraphBuilder

__all__ = ["elementwise_chain", "attention_chain"]


def elementwise_chain(n: Any, dtype: str = "fp32") -> nx.DiGraph:
    """``z = relu(x + y)`` over ``n`` elements as two kernels."""
    n = check_dim(n, "n")
    g = nx.DiGraph(model="add+relu", phase="none")
    b = GraphBuilder(g, phase="none", group="chain")
    x = b.source("x", Tensor("x", (n,), dtype), "input", resident=False)
    y = b.source("y", Tensor("y", (n,), dtype), "input", resident=False)
    s = b.op(
        "add",
        "elementwise",
        Role.RESIDUAL,
        [x, y],
        [Tensor("chain.add", (n,), dtype)],
        n=n,
        inputs=2,
        dtype=dtype,
    )[0]
    b.op(
        "relu",
        "elementwise",
        Role.ACTIVATION,
        [s],
        [Tensor("chain.relu", (n,), dtype)],
        n=n,
        inputs=1,
        dtype=dtype,
    )
    return g


def attention_chain(N: Any, d: Any, *, heads: Any = 1, batch: Any = 1, dtype: str = "bf16") -> nx.DiGraph:
    """Naive attention as three kernels over ``batch * heads`` independent heads::

        S = Q @ K^T    # [N, d] x [d, N] -> [N, N]  batched_gemm
        P = softmax(S) # row softmax, S read once, P written once
        O = P @ V      # [N, N] x [N, d] -> [N, d]  batched_gemm

    The sum of the three costs equals the ``attention`` rule's ``naive``
    variant; the three fused equal its ideal minimum (a test pins both).
    """
    N, d = check_dim(N, "N"), check_dim(d, "d")
    bh = check_dim(batch, "batch") * check_dim(heads, "heads")
    g = nx.DiGraph(model="attention", phase="none")
    b = GraphBuilder(g, phase="none", group="attn")
    q = b.source("q", Tensor("q", (bh * N, d), dtype), "input", resident=False)
    k = b.source("k", Tensor("k", (bh * N, d), dtype), "input", resident=False)
    v = b.source("v", Tensor("v", (bh * N, d), dtype), "input", resident=False)
    s = b.op(
        "qk",
        "batched_gemm",
        Role.ATTENTION,
        [q, k],
        [Tensor("attn.qk", (bh * N, N), dtype)],
        batch=bh,
        M=N,
        N=N,
        K=d,
        dtype=dtype,
    )[0]
    p = b.op(
        "softmax",
        "softmax",
        Role.ATTENTION,
        [s],
        [Tensor("attn.softmax", (bh * N, N), dtype)],
        rows=bh * N,
        cols=N,
        dtype=dtype,
        variant="fused",
    )[0]
    b.op(
        "pv",
        "batched_gemm",
        Role.ATTENTION,
        [p, v],
        [Tensor("attn.pv", (bh * N, d), dtype)],
        batch=bh,
        M=N,
        N=d,
        K=N,
        dtype=dtype,
    )
    return g
