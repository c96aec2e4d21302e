"""Where batching stops paying: the decode step split as ``a + b B`` (memory) and ``c B`` (compute).

Read off the compiled decode step's whole-step terms (:mod:`graphs.serving.step.compiled`): the
split is derived symbolically once per (model, device, tp) and compiled in ``ctx``; each new
context is then a few function calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Level, Phase, Unit
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import quantity
from models.config import ModelConfig

from ..step.compiled import CompiledStep, compiled_step, positive_int
from ..step.reports import DecodeLimits, LimitNumbers, Regime, limits_at
from ..step.workload import Workload, as_workload

__all__ = ["Regime", "DecodeLimits", "decode_limits", "LimitForms"]


def decode_limits(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    ctx: int | None = None,
    tp: int = 1,
    max_batch: int | None = None,
) -> DecodeLimits:
    """Where batching stops paying, solved from the graph's totals.

    The whole decode step is ``T(B) = max(a + b B, c B) + l_a + l_b B``: ``a`` the fixed
    weight traffic, ``b`` the per-sequence memory time (KV read at ``ctx``,
    activations), ``c`` the per-sequence compute time on the binding unit, and the
    tensor-parallel collectives over the links in series with them (their own nodes: ``l_a``
    their latency, ``l_b`` a sequence's bytes; 0 at ``tp = 1``).
    When ``c > b`` the step turns compute-bound at the knee ``B* = a/(c - b)``
    and throughput saturates at ``1/(c + l_b)``; otherwise no batch is compute-bound
    and throughput creeps towards ``1/(b + l_b)`` (90% of it at ``B = 9 (a + l_a)/(b + l_b)``). Both
    ``b`` and ``c`` grow linearly with ``ctx``; the context ceiling solves
    ``b(ctx) = c(ctx)``: beyond it, no batch reaches compute-bound.

    A MoE model reads more experts as the batch grows (``E (1 - (1 - k/E)^B)`` per layer,
    uniform routing), so its memory time is not linear in ``B``: ``b`` is then its slope once
    every expert is read (``lim T_mem / B``), and the knee and the 90 % batch are solved
    numerically on the exact ``T_mem(B)``.

    With ``max_batch`` (the largest batch the memory holds at ``ctx``,
    :func:`graphs.serving.step.ledger_fit.capacity_check`) the limits also carry the throughput at
    that batch, ``B_max / T(B_max)`` with ``T`` the whole step (the report's TPOT): what
    batching reaches when the knee lies beyond it.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    ctx : int, optional
        Cached tokens per sequence (None: the limits that do not depend on it, and the ceiling).
    tp : int
        Tensor-parallel degree.
    max_batch : int, optional
        The largest batch memory holds at ``ctx`` (a whole number >= 0, 0: none fits; needs
        ``ctx``).

    Returns
    -------
    DecodeLimits
        Knee batch ``B*``, 90 % batch, saturated throughput (tokens/s), context ceiling (tokens).

    Raises
    ------
    CostModelError
        When ``tp``, ``ctx`` or ``max_batch`` is not a whole number in range, or ``max_batch``
        is given without ``ctx``.
    """
    w = as_workload(config)
    hw = get_device(device)
    tp = positive_int(tp, "tp")
    if ctx is not None:
        ctx = positive_int(ctx, "ctx")
    if max_batch is not None:
        max_batch = positive_int(max_batch, "max_batch", allow_zero=True)
        if ctx is None:
            raise CostModelError(f"max_batch ({max_batch}) is the batch memory holds at ctx: give ctx")
    c = compiled_step(w, hw, Phase.DECODE, tp=tp)
    lf = c.memo("limit_forms", lambda: LimitForms.of(c))
    return limits_at(c.memo("limits", lambda: lf.numbers(c)), ctx, max_batch)


@dataclass(frozen=True)
class LimitForms:
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
    link_f: Any = None

    @classmethod
    def of(cls, c: CompiledStep) -> LimitForms:
        """The decode step's memory and compute parts read off a compiled step's whole-step terms.

        Parameters
        ----------
        c : CompiledStep
            A compiled decode step.

        Returns
        -------
        LimitForms
        """
        terms = c.forms.terms_s
        mem = sympy.expand(sum(v for k, v in terms.items() if k == Level.DRAM))
        comp = {k: sympy.expand(v) for k, v in terms.items() if k in tuple(Unit)}
        links = [v for k, v in terms.items() if str(k).startswith("link:")]
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
            link_f=sympy.lambdify((B_sym, ctx_sym), sympy.Add(*links), "math") if links else None,
        )

    def numbers(self, c: CompiledStep) -> LimitNumbers:
        """The forms as plain functions (each unit's ceiling solved once, when first asked).

        Parameters
        ----------
        c : CompiledStep
            The compiled step the forms came from.

        Returns
        -------
        LimitNumbers
        """
        return LimitNumbers(
            a=self.a_f,
            b=self.b_f,
            mem=self.mem_f,
            comp=self.comp_f,
            linear=self.linear,
            b_form=self.b_per,
            unit_forms=lambda u: c.memo(f"limits:{u}", lambda: self.ceiling(u)),
            link=self.link_f,
            step=c.step,
        )

    def ceiling(self, unit: str) -> tuple[sympy.Expr, float | None]:
        """``c(ctx)`` on ``unit`` and the context where ``b(ctx) = c(ctx)`` (None: never).

        Parameters
        ----------
        unit : str
            An execution unit (``tensor``, ``vector``, ``sfu``).

        Returns
        -------
        tuple of (sympy.Expr, float or None)
            ``c(ctx)`` (s per sequence) and the context ceiling (tokens).
        """
        c_per = sympy.expand(self.comp[unit] / B_sym)
        x = quantity("x")  # ctx as a real number: the ceiling need not be whole
        diff = self.b_per.subs(ctx_sym, x) - c_per.subs(ctx_sym, x)
        if diff.has(sympy.Min, sympy.Max, sympy.floor, sympy.ceiling):
            # windowed or chunked layers make the terms piecewise: solve numerically
            return c_per, _first_root(sympy.lambdify(x, diff, "math"))
        roots = sympy.solve(sympy.Eq(self.b_per.subs(ctx_sym, x), c_per.subs(ctx_sym, x)), x)
        vals = [as_float(v) for v in roots if v.is_real and v > 0]
        return c_per, (vals[0] if vals else None)


def _first_root(f: Any, lo: float = 1.0, hi: float = 2.0**30) -> float | None:
    """The smallest ``x`` in ``[lo, hi]`` where ``f`` changes sign (a log grid of 4 points per
    octave, then bisection); None when it never does. ``f`` is piecewise smooth in ``x``."""
    xs = [lo * 2 ** (i / 4) for i in range(int(4 * math.log2(hi / lo)) + 1)]
    prev_x, prev = xs[0], f(xs[0])
    if prev == 0:
        return prev_x
    for xv in xs[1:]:
        cur = f(xv)
        if cur == 0 or (cur > 0) != (prev > 0):
            a, b, fa = prev_x, xv, prev
            for _ in range(100):
                m = 0.5 * (a + b)
                fm = f(m)
                if (fm > 0) == (fa > 0):
                    a, fa = m, fm
                else:
                    b = m
            return b
        prev_x, prev = xv, cur
    return None
