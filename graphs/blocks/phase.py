"""Phases, their token counts and the tensor-parallel split (DESIGN.md, graph semantics)."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from costmodel.errors import CostModelError
from costmodel.keys import LinkName, Phase
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import check_dim
from costmodel.symbols import ctx as ctx_sym

__all__ = ["PHASES", "PhaseDims", "phase_dims"]

PHASES: tuple[Phase, ...] = tuple(Phase)


@dataclass(frozen=True)
class PhaseDims:
    """Token counts of a step.

    ``tokens`` processed this step; per sequence ``q_len`` queries attend to
    ``kv_len`` keys, of which ``prefix`` were cached before the step; ``tp``
    devices share every layer (tensor parallelism), whose collectives cross ``link``
    (``scale_up`` within a scale-up domain, ``scale_out`` for a group wider than it:
    :meth:`costmodel.hardware.Hardware.group_link`). ``sparse_head_tile`` is the query-head
    multiple the device's sparse-attention kernel computes (1: none; a DSA layer's heads are
    padded to it, :func:`models.mixers.dsa.sparse_head_tile`).
    """

    phase: str
    batch: sympy.Expr
    tokens: sympy.Expr
    q_len: sympy.Expr
    kv_len: sympy.Expr
    prefix: sympy.Expr
    tp: sympy.Expr
    link: str = "scale_up"
    sparse_head_tile: int = 1


def phase_dims(
    phase: str,
    batch: object = B_sym,
    seq: object = S_sym,
    ctx: object = ctx_sym,
    *,
    prefix: object = 0,
    tp: object = 1,
    link: str = "scale_up",
    sparse_head_tile: int = 1,
) -> PhaseDims:
    """``prefill``: ``T = B*S`` new tokens after ``prefix`` cached ones (a chunk of a
    longer prompt when ``prefix > 0``), ``kv_len = prefix + S``; ``decode``:
    ``T = B``, one query over ``kv_len = ctx`` keys (the new token included).

    Parameters
    ----------
    phase : str
        ``"prefill"`` or ``"decode"``.
    batch : int or sympy.Expr, default the symbol ``B``
        Sequences in the step.
    seq : int or sympy.Expr, default the symbol ``S``
        New tokens per sequence in a prefill (ignored in decode).
    ctx : int or sympy.Expr, default the symbol ``ctx``
        Keys each decode query attends over, the new token's included (ignored in prefill).
    prefix : int or sympy.Expr, default 0
        Tokens already cached before a prefill chunk; decode refuses a non-zero one.
    tp : int or sympy.Expr, default 1
        Tensor-parallel degree.
    link : str, default "scale_up"
        The link the tensor-parallel collectives cross (``scale_up`` or ``scale_out``).
    sparse_head_tile : int, default 1
        The query-head multiple of the device's sparse-attention kernel.

    Returns
    -------
    PhaseDims
        Tokens ``T``, query length, ``kv_len`` and cached length of one step, in tokens.

    >>> d = phase_dims("prefill", batch=2, seq=128)
    >>> d.tokens, d.kv_len  # T = B*S; kv_len = prefix + S
    (256, 128)
    """
    if phase not in PHASES:
        raise CostModelError(f"phase {phase!r} not allowed; allowed: {', '.join(PHASES)}")
    b = check_dim(batch, "batch")
    p = check_dim(tp, "tp")
    if link not in tuple(LinkName):
        raise CostModelError(f"link {link!r} not allowed; allowed: {', '.join(LinkName)}")
    if isinstance(sparse_head_tile, bool) or not isinstance(sparse_head_tile, int) or sparse_head_tile < 1:
        raise CostModelError(f"sparse_head_tile must be a whole number >= 1, got {sparse_head_tile!r}")
    if phase == "prefill":
        s = check_dim(seq, "seq")
        pre = check_dim(prefix, "prefix", allow_zero=True)
        return PhaseDims(phase, b, b * s, s, pre + s, pre, p, link, sparse_head_tile)
    if prefix != 0:
        raise CostModelError("prefix applies to prefill (chunked prefill); decode attends over ctx")
    c = check_dim(ctx, "ctx")
    return PhaseDims(phase, b, b, sympy.Integer(1), c, c - 1, p, link, sparse_head_tile)
