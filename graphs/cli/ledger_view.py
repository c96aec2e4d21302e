"""The capacity ledger printed for ``ledger`` and ``decode``: its terms, the limits it gives
(and the refusal of a point that does not fit, the knee capped at what fits),
and what a sequence's cache holds: layers that keep every position, layers capped by a window or a chunk, and the recurrent state of SSM and
linear-attention layers (:func:`graphs.serving.step.ledger_fit.kv_caps`)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import dump

__all__ = [
    "print_terms",
    "print_fits",
    "print_kv_split",
    "capacity_verdict",
    "refuse_or_warn",
    "print_notes",
    "IGNORED_JSON",
    "json_warning",
]

#: what ``--json`` says, as a warning in its ``"notes"``, after the verdict of a point that does not
#: fit and is costed under ``--ignore-capacity`` (the text's first line says it of "the numbers below")
IGNORED_JSON = "; --ignore-capacity: the numbers are for a point that cannot run"


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


def refuse_or_warn(args: argparse.Namespace, fit: Any, try_flag: str | None = "--tp") -> int | None:
    """A point that does not fit: exit 1 with the verdict and no latency (``--json``: the
    verdict alone), or with ``--ignore-capacity`` the verdict as the first line and None (go on)."""
    rc, text, doc = capacity_verdict(args, fit, try_flag)
    if doc is not None:
        print(dump(doc))
    elif text is not None:
        print(text)
    return rc


def json_warning(args: argparse.Namespace, verdicts: list[str]) -> None:
    """Under ``--json``, each verdict of a point that does not fit and is costed under
    ``--ignore-capacity`` (the text's first lines), said as a warning: on stderr and in the
    document's ``"notes"`` (:func:`graphs.cli.common.dump`). Called as the document is printed,
    after the work (a later error is the one line said). Nothing for the text, which prints them.

    Parameters
    ----------
    args : argparse.Namespace
        The command's options (``json``, ``ignore_capacity``).
    verdicts : list of str
        The headlines of the points that do not fit (``CapacityFit.headline``).
    """
    if not (getattr(args, "json", False) and getattr(args, "ignore_capacity", False)):
        return
    from costmodel.notes import say

    for verdict in verdicts:
        say(verdict + IGNORED_JSON, kind="warning")


def capacity_verdict(
    args: argparse.Namespace, fit: Any, try_flag: str | None = "--tp"
) -> tuple[int | None, str | None, dict[str, Any] | None]:
    """What :func:`refuse_or_warn` prints, unprinted: (exit code or None to go on, text, ``--json``
    document); (None, None, None) for a point that fits."""
    if fit.fits:
        return None, None, None
    if getattr(args, "ignore_capacity", False):
        from graphs.serving.present.phase_summary import IGNORED_CAPACITY  # the page's words too

        if getattr(args, "json", False):  # said as the document is printed: json_warning
            return None, None, None
        return (
            None,
            fit.headline(try_flag) + IGNORED_CAPACITY,
            None,
        )
    if getattr(args, "json", False):
        return 1, None, {"capacity": fit.to_dict(), "refused": fit.headline(try_flag)}
    text = "\n".join(
        [
            fit.headline(try_flag),
            fit.detail(),
            "  no latency for a point that cannot run (--ignore-capacity prints it anyway)",
        ]
    )
    return 1, text, None


def print_notes(notes: Any) -> None:
    """The device's roof substitutions (an SFU charged to the vector roof, say), one line each."""
    for note in notes:
        print(f"  note: {note}")
