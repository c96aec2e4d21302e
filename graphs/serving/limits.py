"""Where batching stops paying: the decode step split as ``a + b B`` (memory) and ``c B`` (compute).

Read off the compiled decode step's whole-step terms (:mod:`graphs.serving.compiled`): the
split is derived symbolically once per (model, device, tp) and compiled in ``ctx``; each new
context is then a few function calls.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sympy

from costmodel.cost import as_float
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Level, Phase, Unit
from costmodel.results import Result
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import quantity
from models.config import ModelConfig

from .compiled import CompiledStep, compiled_step, positive_int
from .workload import Workload, as_workload

__all__ = ["Regime", "DecodeLimits", "decode_limits"]


class Regime(StrEnum):
    """Whether growing the batch at this context ever turns a decode step compute-bound."""

    COMPUTE_BEYOND_KNEE = "compute-bound beyond the knee"
    MEMORY_AT_EVERY_BATCH = "memory-bound at every batch"


@dataclass(frozen=True)
class DecodeLimits(Result):
    """Where batching stops paying (see :func:`decode_limits`); expressions are in ``B`` and ``ctx``."""

    weights_time_s: float  #: ``a``: the fixed weight traffic per step
    memory_time_per_sequence: sympy.Expr  #: ``b(ctx)`` in seconds
    compute_time_per_sequence: sympy.Expr  #: ``c(ctx)`` in seconds, on the binding unit
    compute_unit: str
    ctx_ceiling: float | None  #: beyond this context no batch is compute-bound (None: never)
    ctx: int | None = None
    regime: Regime | None = None
    knee_batch: float | None = None  #: ``B* = a / (c - b)`` when compute-bound beyond it
    throughput_ceiling_tokens_per_s: float | None = None
    batch_for_90pct_of_ceiling: float | None = None  #: ``9a/b`` when memory-bound at every batch


def _root(f: Any, lo: float, hi: float) -> float | None:
    """The ``x`` in ``[lo, hi]`` where the increasing ``f`` crosses zero (bisection, 200 steps), or None."""
    if f(lo) >= 0:
        return lo
    if f(hi) < 0:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) >= 0 else (mid, hi)
    return hi


def decode_limits(
    config: ModelConfig | str | Workload, device: Hardware | str, *, ctx: int | None = None, tp: int = 1
) -> DecodeLimits:
    """Where batching stops paying, solved from the graph's totals.

    The whole decode step is ``T(B) = max(a + b B, c B)``: ``a`` the fixed
    weight traffic, ``b`` the per-sequence memory time (KV read at ``ctx``,
    activations), ``c`` the per-sequence compute time on the binding unit.
    When ``c > b`` the step turns compute-bound at the knee ``B* = a/(c - b)``
    and throughput saturates at ``1/c``; otherwise no batch is compute-bound
    and throughput creeps towards ``1/b`` (90% of it at ``B = 9a/b``). Both
    ``b`` and ``c`` grow linearly with ``ctx``; the context ceiling solves
    ``b(ctx) = c(ctx)``: beyond it, no batch reaches compute-bound.

    A MoE model reads more experts as the batch grows (``E (1 - (1 - k/E)^B)`` per layer,
    uniform routing), so its memory time is not linear in ``B``: ``b`` is then its slope once
    every expert is read (``lim T_mem / B``), and the knee and the 90 % batch are solved
    numerically on the exact ``T_mem(B)``.
    """
    w = as_workload(config)
    hw = get_device(device)
    tp = positive_int(tp, "tp")
    if ctx is not None:
        ctx = positive_int(ctx, "ctx")
    c = compiled_step(w, hw, Phase.DECODE, tp=tp)
    lf = c.memo("limits", lambda: _LimitForms.of(c))
    at = ctx or 4096
    c_unit = max(lf.comp, key=lambda k: lf.comp_f[k](1, at))
    c_per, ceiling_val = c.memo(f"limits:{c_unit}", lambda: lf.ceiling(c_unit))
    base = DecodeLimits(
        weights_time_s=lf.a_f(1),
        memory_time_per_sequence=lf.b_per,
        compute_time_per_sequence=c_per,
        compute_unit=c_unit,
        ctx_ceiling=ceiling_val,
    )
    if ctx is None:
        return base
    a_n, b_n, c_n = lf.a_f(ctx), lf.b_f(ctx), lf.comp_f[c_unit](1, ctx)

    def t_mem(bb: float) -> float:
        return lf.mem_f(bb, ctx)

    if c_n > b_n:
        if lf.linear:
            knee = a_n / (c_n - b_n)
        else:  # smallest batch whose compute time reaches its memory time
            knee = _root(lambda bb: c_n * bb - t_mem(bb), 1e-9, 1e12)
        return dataclasses.replace(
            base,
            ctx=ctx,
            regime=Regime.COMPUTE_BEYOND_KNEE,
            knee_batch=knee,
            throughput_ceiling_tokens_per_s=1 / c_n,
        )
    if lf.linear:
        b90 = 9 * a_n / b_n
    else:  # B / T_mem(B) reaches 90 % of 1 / b
        b90 = _root(lambda bb: bb / t_mem(bb) - 0.9 / b_n, 1e-9, 1e12)
    return dataclasses.replace(
        base,
        ctx=ctx,
        regime=Regime.MEMORY_AT_EVERY_BATCH,
        throughput_ceiling_tokens_per_s=1 / b_n,
        batch_for_90pct_of_ceiling=b90,
    )


@dataclass(frozen=True)
class _LimitForms:
    """The decode step's memory and compute terms split as ``a + b B`` and ``c B`` (symbolic
    once per compiled step, then compiled in ``ctx``)."""

    mem: sympy.Expr
    b_per: sympy.Expr
    linear: bool
    comp: dict[str, sympy.Expr]
    a_f: Any
    b_f: Any
    mem_f: Any
    comp_f: dict[str, Any]

    @classmethod
    def of(cls, c: CompiledStep) -> _LimitForms:
        terms = c.forms.terms_s
        mem = sympy.expand(sum(v for k, v in terms.items() if k == Level.DRAM))
        comp = {k: sympy.expand(v) for k, v in terms.items() if k in tuple(Unit)}
        a = mem.subs(B_sym, 0)
        b_per = sympy.expand((mem - a) / B_sym)
        linear = B_sym not in b_per.free_symbols
        if not linear:  # MoE: the slope once every expert is read
            b_per = sympy.expand(sympy.limit(mem / B_sym, B_sym, sympy.oo))
        return cls(
            mem=mem,
            b_per=b_per,
            linear=linear,
            comp=comp,
            a_f=sympy.lambdify(ctx_sym, a, "math"),
            b_f=sympy.lambdify(ctx_sym, b_per, "math"),
            mem_f=sympy.lambdify((B_sym, ctx_sym), mem, "math"),
            comp_f={k: sympy.lambdify((B_sym, ctx_sym), v, "math") for k, v in comp.items()},
        )

    def ceiling(self, unit: str) -> tuple[sympy.Expr, float | None]:
        """``c(ctx)`` on ``unit`` and the context where ``b(ctx) = c(ctx)`` (None: never)."""
        c_per = sympy.expand(self.comp[unit] / B_sym)
        x = quantity("x")  # ctx as a real number: the ceiling need not be whole
        roots = sympy.solve(sympy.Eq(self.b_per.subs(ctx_sym, x), c_per.subs(ctx_sym, x)), x)
        vals = [as_float(v) for v in roots if v.is_real and v > 0]
        return c_per, (vals[0] if vals else None)
