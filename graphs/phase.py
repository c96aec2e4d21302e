"""Phases and their token counts (DESIGN.md, graph semantics)."""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from costmodel.errors import CostModelError
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import check_dim
from costmodel.symbols import ctx as ctx_sym

__all__ = ["PHASES", "PhaseDims", "phase_dims"]

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class PhaseDims:
    """Token counts of a phase: ``tokens`` per step, ``q_len``/``kv_len`` per sequence."""

    phase: str
    batch: sympy.Expr
    tokens: sympy.Expr
    q_len: sympy.Expr
    kv_len: sympy.Expr


def phase_dims(phase: str, batch: object = B_sym, seq: object = S_sym, ctx: object = ctx_sym) -> PhaseDims:
    """``prefill``: ``T = B*S``, ``q_len = kv_len = S``; ``decode``: ``T = B``, ``q_len = 1``, ``kv_len = ctx``."""
    if phase not in PHASES:
        raise CostModelError(f"phase {phase!r} not allowed; allowed: {PHASES}")
    b = check_dim(batch, "batch")
    if phase == "prefill":
        s = check_dim(seq, "seq")
        return PhaseDims(phase, b, b * s, s, s)
    c = check_dim(ctx, "ctx")
    return PhaseDims(phase, b, b, sympy.Integer(1), c)
