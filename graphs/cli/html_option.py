"""``--html PATH``: one self-contained interactive page per run (optional extra ``html``).

A command takes the flag with one call, :func:`add_html_option`, after its ``set_defaults``;
its body hands the reports it computed to the page with one :func:`keep` call. The path (and
plotly) are checked before any work; the page is drawn from the kept objects after the command
printed its output (:mod:`graphs.serving.present.html_views`), so its numbers are the printed ones,
and written atomically (:func:`costmodel.html.write_html`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from typing import Any

from .options import check_output_path

__all__ = ["add_html_option", "keep", "command_line", "with_said_notes"]

#: where :func:`keep` stores a run's objects on the namespace
_KEPT = "_html_objects"


#: the attribute :func:`graphs.cli.main.main` stores the typed words under (no option has this dest)
ARGV = "_typed_argv"


def keep(args: argparse.Namespace, **objects: Any) -> None:
    """Hand a command's report objects to its ``--html`` page (nothing without ``--html``)."""
    if getattr(args, "html", None):
        vars(args).setdefault(_KEPT, {}).update(objects)


def command_line(sp: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command as it was run: what the user typed (``costmodel`` and its words, as
    :func:`graphs.cli.main.main` recorded them, ``--html`` and its path left out), so the page shows
    no option the user did not give; without that record (a parser driven from Python), the
    positionals and every option whose value differs from its default."""
    typed = getattr(args, ARGV, None)
    if typed is not None:
        words, skip = ["costmodel"], False
        for w in typed:
            if skip:
                skip = False
            elif w == "--html":
                skip = True
            elif not w.startswith("--html="):
                words.append(w)
        return shlex.join(words)
    words = ["costmodel", *sp.prog.split()[1:]]
    for a in sp._actions:
        if a.dest in ("help", "html") or a.dest not in vars(args):
            continue
        v = getattr(args, a.dest)
        if not a.option_strings:
            words.append(str(v))
        elif v != a.default:
            if isinstance(a, argparse.BooleanOptionalAction):  # --x or --no-x by the value
                words.append(a.option_strings[0] if v else a.option_strings[-1])
            else:
                words.extend([a.option_strings[-1]] if a.nargs == 0 else [a.option_strings[-1], str(v)])
    return shlex.join(words)


def _phase(args: argparse.Namespace, kept: dict[str, Any], command: str, phase: str) -> str:
    from .model_option import resolve_config

    # the StepPrediction --predict printed beside the bound (none without --predict or --predict-file)
    return str(
        kept["summary"].to_html(resolve_config(args), command=command, prediction=kept.get("prediction"))
    )


def _report(args: argparse.Namespace, kept: dict[str, Any], command: str) -> str:
    """The page of a kept report that draws itself: its ``to_html(command)``."""
    return str(kept["report"].to_html(command))


_PAGES: dict[str, Callable[[argparse.Namespace, dict[str, Any], str], str]] = {
    "decode": lambda a, k, c: _phase(a, k, c, "decode"),
    "prefill": lambda a, k, c: _phase(a, k, c, "prefill"),
    "analyze": _report,
    "calibrate": _report,
    "simulate": _report,
    "report": _report,
}


def add_html_option(sp: argparse.ArgumentParser, kind: str, *, plotly: bool = True) -> None:
    """Add ``--html PATH`` to ``sp`` and wrap its command (call after its ``set_defaults``);
    ``plotly=False`` for a command whose page draws no plotly figure (it needs no html extra)."""
    sp.add_argument(
        "--html",
        default=None,
        metavar="PATH",
        help=(
            "also write a self-contained interactive HTML report here (html extra: plotly)"
            if plotly
            else "also write a self-contained HTML page holding the figure here"
        ),
    )
    sp.set_defaults(func=_with_html(sp.get_default("func"), sp, _PAGES[kind], plotly=plotly))


def with_said_notes(doc: str) -> str:
    """``doc`` (a whole page) with the notes this run said on stderr that the page does not hold
    (:func:`costmodel.notes.said`: a matmul dtype assumed, a device's preliminary figures, a tp
    group priced on the network), as the terminal showed them, in a block after the page's
    headline (or first in its body): a page drawn from a command's report objects held only the
    notes its report prints, so what the run assumed on stderr was lost to it.

    Parameters
    ----------
    doc : str
        The page's HTML.

    Returns
    -------
    str
        The page, with a ``<pre class="cm-said">`` block when a note was missing from it.

    >>> from costmodel.notes import clear, say
    >>> import contextlib, io
    >>> clear()
    >>> with contextlib.redirect_stderr(io.StringIO()):
    ...     say("weights read as bf16")
    >>> with_said_notes("<html><body><p>report</p></body></html>")
    '<html><body><pre class="cm-said">costmodel: note: weights read as bf16</pre><p>report</p></body></html>'
    >>> with_said_notes("<html><body><p>note: weights read as bf16</p></body></html>").count("cm-said")
    0
    """
    import html

    from costmodel.notes import said

    missing = [
        n
        for n in said()
        if html.escape(n.split(": ", 1)[-1], quote=False) not in doc
        and html.escape(n.split(": ", 1)[-1]) not in doc
    ]
    if not missing:
        return doc
    block = (
        '<pre class="cm-said">'
        + "\n".join(html.escape(f"costmodel: {n}", quote=False) for n in missing)
        + "</pre>"
    )
    head = doc.find('<table class="cm-headline">')
    at = doc.find("</table>", head) + len("</table>") if head >= 0 else -1
    if at < len("</table>"):
        body = doc.find("<body>")
        at = body + len("<body>") if body >= 0 else 0
    return doc[:at] + block + doc[at:]


def _with_html(
    cmd: Callable[[argparse.Namespace], int],
    sp: argparse.ArgumentParser,
    page: Callable[[argparse.Namespace, dict[str, Any], str], str],
    *,
    plotly: bool = True,
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        path = getattr(args, "html", None)
        if path is None:  # an empty --html '' is refused below, not taken as no page
            return cmd(args)
        from costmodel.errors import CostModelError
        from costmodel.html import require_plotly, write_html

        check_output_path(path, "--html", suffixes=(".html", ".htm"))  # before the work, not after it
        if plotly:
            require_plotly()
        rc = cmd(args)
        kept = vars(args).get(_KEPT)
        if kept is None:
            raise CostModelError(f"--html {path!r}: this run produced no report to draw")
        write_html(path, with_said_notes(page(args, kept, command_line(sp, args))))
        sys.stderr.write(f"interactive report written to {path}\n")
        return rc

    return run
