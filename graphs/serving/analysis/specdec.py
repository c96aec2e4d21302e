"""Speculative decoding: a draft proposes ``k`` tokens, the target verifies ``k + 1`` at once.

With acceptance rate ``alpha`` per token (Leviathan et al. 2023), the expected
tokens produced per verification step and the speed-up over plain decoding
are

.. math::

    E(\\alpha, k) = \\frac{1 - \\alpha^{k+1}}{1 - \\alpha},\\qquad
    S = \\frac{E(\\alpha, k)\\, T_\\text{target}}{k\\, T_\\text{draft} + T_\\text{verify}(k+1)}

``T_target`` is one decode step of the target, ``T_draft`` one of the draft
(on its own device), and ``T_verify`` the target scoring ``k + 1`` tokens per
sequence over the cached context: a prefill-like chunk graph
(``build_model(..., "prefill", seq=k+1, prefix=ctx)``), compiled once in ``k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Phase
from costmodel.results import Result
from costmodel.symbols import check_dim, dim, quantity
from models.config import ModelConfig

from ..pricing.predictor import Predictor
from ..pricing.priced import priced_step
from ..step.compiled import positive_int
from ..step.defaults import DEFAULT_SPEC_K_MAX
from ..step.option_checks import real_arg, whole_arg
from ..step.workload import Workload, as_workload

__all__ = [
    "expected_tokens",
    "speedup_closed_form",
    "speculative_decoding",
    "SpecDecReport",
    "SpecDecRow",
    "K_MAX_LIMIT",
]

alpha_s, k_s = quantity("alpha"), dim("gamma")  # acceptance rate, tokens drafted per step (Leviathan et al.)
T_target, T_draft, T_verify = quantity("T_target"), quantity("T_draft"), quantity("T_verify")


def expected_tokens(alpha: Any = alpha_s, k: Any = k_s) -> sympy.Expr:
    """``(1 - alpha^(k+1)) / (1 - alpha)``; ``k + 1`` when ``alpha = 1``.

    Parameters
    ----------
    alpha : float or sympy.Expr
        Per-token acceptance rate, in ``[0, 1]`` (default the symbol ``alpha``).
    k : int or sympy.Expr
        Draft tokens proposed per step (default the symbol ``k``).

    Returns
    -------
    sympy.Expr
        Expected tokens emitted per verify step.

    Raises
    ------
    CostModelError
        When a numeric ``alpha`` is outside ``[0, 1]``.

    >>> expected_tokens(sympy.Rational(1, 2), 3)
    15/8
    """
    a, kk = to_expr(alpha, field="alpha"), check_dim(k, "k")
    if a.is_number and not (0 <= a <= 1):
        raise CostModelError(f"alpha (acceptance rate) must be in [0, 1], got {a}")
    if a == 1:
        return kk + 1
    return (1 - a ** (kk + 1)) / (1 - a)


def speedup_closed_form() -> sympy.Expr:
    """``E(alpha, k) T_target / (k T_draft + T_verify)`` in symbols.

    Returns
    -------
    sympy.Expr
        The speed-up over plain decode, in ``alpha``, ``k``, ``T_target``, ``T_draft``,
        ``T_verify`` (s).

    >>> speedup_closed_form().subs({T_draft: 0, T_verify: T_target}) == expected_tokens()
    True
    """
    return expected_tokens() * T_target / (k_s * T_draft + T_verify)


#: most drafted tokens per step searched; with acceptance below 1 the speed-up peaks long before
K_MAX_LIMIT = 256


@dataclass(frozen=True)
class SpecDecRow(Result):
    """One drafted length ``k``: tokens per verify, time per step, speed-up over plain decode.

    Attributes
    ----------
    k : int
        Tokens drafted per step.
    expected_tokens : float
        ``E(alpha, k)``, tokens emitted per verification.
    verify_s : float
        The target scoring ``k + 1`` tokens per sequence over the cached context (s).
    step_s : float
        ``k T_draft + T_verify`` (s).
    speedup : float
        ``E T_target / step_s`` over plain decoding.
    """

    k: int
    expected_tokens: float
    verify_s: float
    step_s: float
    speedup: float


@dataclass(frozen=True)
class SpecDecReport(Result):
    """Speculative decoding for ``k = 1..k_max`` (module doc); ``closed_form`` is
    :func:`speedup_closed_form` in ``alpha``, ``gamma`` (= k) and the three step times.

    Attributes
    ----------
    alpha : float
        Per-token acceptance rate.
    target_step_s : float
        One plain decode step of the target (s).
    draft_step_s : float
        One decode step of the draft on its device (s).
    rows : tuple of SpecDecRow
        One per ``k = 1..k_max``.
    best_k : int
        The ``k`` of the largest speed-up.
    best_speedup : float
        Its speed-up.
    closed_form : sympy.Expr
        :func:`speedup_closed_form`.
    """

    alpha: float
    target_step_s: float
    draft_step_s: float
    rows: tuple[SpecDecRow, ...]
    best_k: int
    best_speedup: float
    closed_form: sympy.Expr

    @property
    def best_at_k_max(self) -> bool:
        """The best ``k`` is the largest tried (and more than one was): a longer draft may be
        faster still, so ``best_k`` is the range's edge, not the optimum."""
        return len(self.rows) > 1 and self.best_k == self.rows[-1].k

    def best_line(self) -> str:
        """``best k = 4 -> 2.01x``, and where the best is the largest ``k`` tried, that it is.

        Returns
        -------
        str
        """
        line = f"best k = {self.best_k} -> {self.best_speedup:.2f}x"
        if self.best_at_k_max and self.best_k >= K_MAX_LIMIT:  # no longer draft can be asked for
            line += " (the largest k tried, the most --k-max allows: a longer draft may be faster)"
        elif self.best_at_k_max:
            line += (
                f" (the largest k tried: a longer draft may be faster, --k-max above {self.best_k} tries it)"
            )
        return line

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "best_at_k_max": self.best_at_k_max}


def speculative_decoding(
    target: ModelConfig | str | Workload,
    draft: ModelConfig | str | Workload,
    target_device: Hardware | str,
    draft_device: Hardware | str | None = None,
    *,
    alpha: float,
    batch: int = 1,
    ctx: int = 4096,
    k_max: int = DEFAULT_SPEC_K_MAX,
    predictor: Predictor | None = None,
    allow_long_context: bool = False,
) -> SpecDecReport:
    """Speed-up for ``k = 1..k_max`` and the best ``k`` (module doc); ``predictor`` prices the
    target's, the draft's and the verify steps (:func:`graphs.serving.pricing.priced.priced_step`).

    Parameters
    ----------
    target : ModelConfig, str or Workload
        The target model.
    draft : ModelConfig, str or Workload
        The draft model.
    target_device : Hardware or str
        The target's device.
    draft_device : Hardware or str, optional
        The draft's device (default: the target's).
    alpha : float
        Per-token acceptance rate, in ``[0, 1]``.
    batch : int
        Sequences per step.
    ctx : int
        Cached tokens per sequence.
    k_max : int
        The largest draft length tried, in ``[1, K_MAX_LIMIT]`` (default
        :data:`~graphs.serving.step.defaults.DEFAULT_SPEC_K_MAX`, ``serve specdec``'s).
    predictor : Predictor, optional
        Prices the steps (default: the bound).
    allow_long_context : bool, default False
        Cost a ``ctx`` beyond either model's context limit (``serve specdec
        --allow-long-context``); False: refused with :class:`~models.context.ContextLimitError`,
        as the command refuses it.

    Returns
    -------
    SpecDecReport
        Step times (s), speed-up per ``k``, the best ``k`` and the closed form.

    Raises
    ------
    CostModelError
        When ``alpha`` is not a number in ``[0, 1]`` or ``k_max`` a whole number in range, the
        draft's vocabulary is not the target's, or ``ctx`` exceeds a model's context limit without
        ``allow_long_context``.
    """
    alpha = real_arg("alpha", alpha, 0, 1)
    k_max = whole_arg("k_max", k_max, 1, K_MAX_LIMIT)
    tw, dw = as_workload(target), as_workload(draft)
    if dw.config.vocab_size != tw.config.vocab_size:  # as simulate --spec-draft refuses it
        raise CostModelError(
            f"draft {dw.config.name[:60]}: its vocabulary ({dw.config.vocab_size}) is not the target's "
            f"({tw.config.vocab_size}); a draft must share the target's tokenizer"
        )
    thw = get_device(target_device)
    dhw = get_device(draft_device) if draft_device is not None else thw
    batch, ctx = positive_int(batch, "batch"), positive_int(ctx, "ctx")
    if not allow_long_context:  # each model's own limit, as the command checks both
        for w in (tw, dw):
            w.config.check_context(ctx, "ctx")
    t_target = priced_step(tw, thw, Phase.DECODE, predictor=predictor).step(batch, ctx)
    t_draft = priced_step(dw, dhw, Phase.DECODE, predictor=predictor).step(batch, ctx)
    # the target verifies k drafted tokens + 1 in one chunk over the ctx cached ones, logits for all
    verify_step = priced_step(tw, thw, Phase.PREFILL, chunked=True, logits="all", predictor=predictor)

    def verify(tokens: int) -> float:
        return verify_step.step(batch, tokens, ctx)

    rows = []
    for k in range(1, k_max + 1):
        e = k + 1.0 if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)  # expected_tokens, in floats
        t_v = float(verify(k + 1))
        step = k * t_draft + t_v
        rows.append(SpecDecRow(k, e, t_v, step, e * t_target / step))
    best = max(rows, key=lambda r: r.speedup)
    return SpecDecReport(alpha, t_target, t_draft, tuple(rows), best.k, best.speedup, speedup_closed_form())
