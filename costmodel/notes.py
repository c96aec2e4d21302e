"""What the engine assumed or substituted, said once on stderr and kept for ``--json``.

A note (``note: the model states no torch_dtype: read as bf16``) tells a person what the
answer rests on. It goes to stderr, so a table or a JSON document on stdout stays clean; and a
program reading ``--json`` must not lose it, so every note said is also kept here, and the
command line's JSON output carries the notes of its run under ``"notes"``
(``graphs.cli.common.dump``). Each text is said once: once per command run on the command line
(:func:`clear` starts a run), once per process for a program using the library.

>>> import contextlib, io
>>> clear()
>>> err = io.StringIO()
>>> with contextlib.redirect_stderr(err):
...     say("weights read as bf16")
...     say("weights read as bf16")
>>> err.getvalue()
'costmodel: note: weights read as bf16\\n'
>>> said()
('note: weights read as bf16',)
"""

from __future__ import annotations

import sys

__all__ = ["ASSUMED_FLOAT", "clear", "mute", "said", "say"]

#: the topic of the note a model config that states no float dtype gets, read as bf16
#: (:func:`models.quantization.assumed_float_note`); here so that a caller which gives the format
#: mutes it without importing the loader (the command line's cached answers stay sympy-free)
ASSUMED_FLOAT = "assumed float dtype"

_said: dict[str, None] = {}  # insertion-ordered: the order they were said
_muted: set[str] = set()  # topics not said until the next clear()
#: the most notes kept between two :func:`clear` calls (a long-running program's memory stays
#: bounded; past it a note is still said, and may be said again)
MAX_KEPT = 1000


def say(text: str | None, kind: str = "note", *, topic: str | None = None) -> None:
    """Write ``costmodel: {kind}: {text}`` on stderr once and keep ``{kind}: {text}``.

    Parameters
    ----------
    text : str or None
        What was assumed or substituted, one line; ``None`` or ``""`` says nothing (callers pass
        an optional note straight through).
    kind : str
        ``"note"`` (an assumption or substitution) or ``"warning"`` (a result outside what the
        engine checks, costed because the user asked).
    topic : str or None
        What the note is about, for :func:`mute`; None: it is always said (once).
    """
    if not text or (topic is not None and topic in _muted):
        return
    kept = f"{kind}: {text}"
    if kept in _said:
        return
    if len(_said) < MAX_KEPT:
        _said[kept] = None
    print(f"costmodel: {kept}", file=sys.stderr)


def said() -> tuple[str, ...]:
    """Every note said since the last :func:`clear`, in order, each ``"{kind}: {text}"``."""
    return tuple(_said)


def mute(topic: str) -> None:
    """Say no note of ``topic`` until :func:`clear`: the caller has settled what such a note would
    say was assumed (the command line's ``--weight-dtype`` gives the format a config that states
    no ``torch_dtype`` is otherwise read in).

    Parameters
    ----------
    topic : str
        The ``topic`` its notes are said with.

    >>> clear(); mute("x")
    >>> say("x assumed", topic="x"); said()
    ()
    >>> clear(); say("x assumed", topic="x"); said()
    ('note: x assumed',)
    """
    _muted.add(topic)


def clear() -> None:
    """Forget what was said and muted (the command line calls it as each command starts)."""
    _said.clear()
    _muted.clear()
