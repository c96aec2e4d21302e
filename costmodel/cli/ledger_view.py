"""The capacity ledger printed for ``ledger`` and ``decode``: its terms, the limits it gives,
and what a sequence's cache holds: layers that keep every position, layers capped by a window or a chunk, and the recurrent state of SSM and
linear-attention layers (:func:`graphs.serving.ledger_fit.kv_caps`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["print_terms", "print_fits", "print_kv_split", "print_cache_caps"]


def print_terms(terms: dict[str, float], cap: float) -> None:
    from ..ledger import GIB

    for k in ("weights", "kv_cache", "activations", "overhead", "total"):
        print(f"  {k:12s} {terms[k] / GIB:10.2f} GiB")
    verdict = (
        "fits" if terms["total"] <= cap else f"does NOT fit (short by {(terms['total'] - cap) / GIB:.2f} GiB)"
    )
    print(f"  capacity     {cap / GIB:10.2f} GiB -> {verdict}")


def print_fits(fit: Any, what: str, at: str) -> None:
    from ..ledger import GIB

    if fit.value == 0:
        print(
            f"  max {what} at {at}: nothing fits; even at 1 the ledger is "
            f"{fit.shortfall_bytes / GIB:.2f} GiB over the device ({fit.overflowing_term} is what does not fit)"
        )
    else:
        print(f"  max {what} at {at}: {fit.value} (next step overflows on {fit.overflowing_term})")


def print_kv_split(rep: Any) -> None:
    """What the KV term is made of, when some layers keep fewer positions or a fixed state."""
    from ..ledger import GIB

    s = rep.kv_split
    if not (s.get("capped") or s.get("state")):
        return
    parts = [f"full-context layers {s['full_context'] / GIB:.2f} GiB"]
    if s.get("capped"):
        caps = ", ".join(f"{w:.0f}" for w in rep.kv_caps)
        parts.append(f"windowed/chunked layers {s['capped'] / GIB:.2f} GiB (at most {caps} positions each)")
    if s.get("state"):
        parts.append(f"recurrent state {s['state'] / GIB:.2f} GiB (constant in the context)")
    print("    of which: " + "; ".join(parts))


def print_cache_caps(args: argparse.Namespace, rep: Any, config: Callable[[argparse.Namespace], Any]) -> None:
    """One line when windowed/chunked layers or recurrent state shape the KV read."""
    from ..text import fmt_si
    from .cached import kv_caps

    caps = kv_caps(args, config)
    if not (caps.get("capped") or caps.get("state")):
        return
    held, full = _cache_bytes(caps, args.batch, args.ctx)
    parts = []
    if caps.get("capped"):
        kept = ", ".join(f"{w:.0f}" for _k, w in caps["capped"])
        parts.append(
            f"layers capped at {kept} positions; {fmt_si(full, 'B')} if every layer kept all {args.ctx}"
        )
    if caps.get("state"):
        parts.append(f"recurrent state {fmt_si(args.batch * caps['state'], 'B')} of it, constant in ctx")
    print(f"  cache held {fmt_si(held, 'B')} at ctx {args.ctx} (" + "; ".join(parts) + ")")


def _cache_bytes(caps: dict[str, Any], batch: int, ctx: int) -> tuple[float, float]:
    from graphs.serving.reports import cache_read_bytes  # light: the cached path imports no engine

    return cache_read_bytes(caps, batch=batch, ctx=ctx)
