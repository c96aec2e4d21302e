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

from typing import Any

import sympy

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.hardware import Hardware, get_device
from costmodel.symbols import check_dim, dim, quantity
from models.catalog import get_model
from models.config import ModelConfig

from ..blocks.transformer import build_model
from .phases import step_time

__all__ = ["expected_tokens", "speedup_closed_form", "speculative_decoding"]

alpha_s, k_s = quantity("alpha"), dim("gamma")  # acceptance rate, tokens drafted per step (Leviathan et al.)
T_target, T_draft, T_verify = quantity("T_target"), quantity("T_draft"), quantity("T_verify")


def expected_tokens(alpha: Any = alpha_s, k: Any = k_s) -> sympy.Expr:
    """``(1 - alpha^(k+1)) / (1 - alpha)``; ``k + 1`` when ``alpha = 1``.

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

    >>> speedup_closed_form().subs({T_draft: 0, T_verify: T_target}) == expected_tokens()
    True
    """
    return expected_tokens() * T_target / (k_s * T_draft + T_verify)


def speculative_decoding(
    target: ModelConfig | str,
    draft: ModelConfig | str,
    target_device: Hardware | str,
    draft_device: Hardware | str | None = None,
    *,
    alpha: float,
    batch: int = 1,
    ctx: int = 4096,
    k_max: int = 16,
) -> dict[str, Any]:
    """Speed-up for ``k = 1..k_max`` and the best ``k`` (module doc)."""
    if not 0 <= alpha <= 1:
        raise CostModelError(f"alpha must be in [0, 1], got {alpha}")
    if k_max < 1:
        raise CostModelError(f"k_max must be >= 1, got {k_max}")
    tcfg = get_model(target) if isinstance(target, str) else target
    dcfg = get_model(draft) if isinstance(draft, str) else draft
    thw = get_device(target_device)
    dhw = get_device(draft_device) if draft_device is not None else thw
    t_target = as_float(step_time(build_model(tcfg, "decode", batch=batch, ctx=ctx), thw))
    t_draft = as_float(step_time(build_model(dcfg, "decode", batch=batch, ctx=ctx), dhw))
    seq = dim("verify_tokens")
    verify = sympy.lambdify(
        seq,
        step_time(build_model(tcfg, "prefill", batch=batch, seq=seq, prefix=ctx, logits="all"), thw),
        "math",
    )
    rows = []
    for k in range(1, k_max + 1):
        e = as_float(expected_tokens(sympy.Rational(str(alpha)), k))
        t_v = float(verify(k + 1))
        step = k * t_draft + t_v
        rows.append(
            {"k": k, "expected_tokens": e, "verify_s": t_v, "step_s": step, "speedup": e * t_target / step}
        )
    best = max(rows, key=lambda r: r["speedup"])
    return {
        "alpha": alpha,
        "target_step_s": t_target,
        "draft_step_s": t_draft,
        "rows": rows,
        "best_k": best["k"],
        "best_speedup": best["speedup"],
        "closed_form": str(speedup_closed_form()),
    }
