"""The capacity ledger printed for ``ledger`` and ``decode``: its terms, the limits it gives
(and the refusal of a point that does not fit, the knee capped at what fits),
and what a sequence's cache holds: layers that keep every position, layers capped by a window or a chunk, and the recurrent state of SSM and
linear-attention layers (:func:`graphs.serving.step.ledger_fit.kv_caps`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .common import dump

__all__ = [
    "print_terms",
    "print_fits",
    "print_kv_split",
    "print_cache_caps",
    "refuse_or_warn",
    "print_notes",
    "print_knee",
]


def print_terms(terms: dict[str, float], cap: float) -> None:
    from costmodel.ledger_solve import GIB

    for k in ("weights", "kv_cache", "activations", "overhead", "total"):
        print(f"  {k:12s} {terms[k] / GIB:10.2f} GiB")
    verdict = (
        "fits" if terms["total"] <= cap else f"does NOT fit (short by {(terms['total'] - cap) / GIB:.2f} GiB)"
    )
    print(f"  capacity     {cap / GIB:10.2f} GiB -> {verdict}")


def print_fits(fit: Any, what: str, at: str) -> None:
    from costmodel.ledger_solve import GIB

    if fit.value == 0:
        print(
            f"  max {what} at {at}: nothing fits; even at 1 the ledger is "
            f"{fit.shortfall_bytes / GIB:.2f} GiB over the device ({fit.overflowing_term} is what does not fit)"
        )
    else:
        print(f"  max {what} at {at}: {fit.value} (next step overflows on {fit.overflowing_term})")


def print_kv_split(rep: Any) -> None:
    """What the KV term is made of, when some layers keep fewer positions or a fixed state."""
    from costmodel.ledger_solve import GIB

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
    from costmodel.text import fmt_si

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
    from graphs.serving.step.reports import cache_read_bytes  # light: the cached path imports no engine

    return cache_read_bytes(caps, batch=batch, ctx=ctx)


def refuse_or_warn(args: argparse.Namespace, fit: Any, try_flag: str | None = "--tp") -> int | None:
    """A point that does not fit: exit 1 with the verdict and no latency (``--json``: the
    verdict alone), or with ``--ignore-capacity`` the verdict as the first line and None (go on)."""
    if fit.fits:
        return None
    if getattr(args, "ignore_capacity", False):
        if not getattr(args, "json", False):
            print(
                fit.headline(try_flag)
                + "; --ignore-capacity: the numbers below are for a point that cannot run"
            )
        return None
    if getattr(args, "json", False):
        print(dump({"capacity": fit.to_dict(), "refused": fit.headline(try_flag)}))
        return 1
    print(fit.headline(try_flag))
    print(fit.detail())
    print("  no latency for a point that cannot run (--ignore-capacity prints it anyway)")
    return 1


def print_notes(notes: Any) -> None:
    """The device's roof substitutions (an SFU charged to the vector roof, say), one line each."""
    for note in notes:
        print(f"  note: {note}")


def print_knee(args: argparse.Namespace, lim: Any, fit: Any) -> None:
    """The knee, the throughput ceiling and the context ceiling, capped at what the memory holds."""
    ceiling = lim.throughput_ceiling_tokens_per_s or 0.0
    if lim.knee_batch is not None:
        line = f"  compute-bound beyond batch {lim.knee_batch:.0f} at this ctx; throughput ceiling {ceiling:,.0f} tokens/s"
    else:
        line = (
            f"  no batch is compute-bound at ctx {args.ctx}: throughput creeps to "
            f"{ceiling:,.0f} tokens/s (90% at batch {lim.batch_for_90pct_of_ceiling or 0:.0f})"
        )
    print(line)
    if lim.capped_by_memory:
        reach = lim.throughput_at_max_batch_tokens_per_s
        print(
            f"    capped by memory: at most batch {lim.max_batch_fits} fits at ctx {args.ctx}, "
            + (f"where throughput reaches {reach:,.0f} tokens/s" if reach else "so no batch runs")
        )
    if lim.ctx_ceiling is not None:
        cap = ""
        if lim.ctx_ceiling > fit.max_context:
            held = f"at most ctx {fit.max_context:,} fits" if fit.max_context else "no ctx fits"
            cap = f" (capped by memory: {held} at batch {args.batch})"
        print(
            f"  beyond ctx {lim.ctx_ceiling:,.0f} no batch reaches compute-bound (KV reads outgrow compute){cap}"
        )
