"""What the benchmarks write: the generated sections of ``docs/`` pages and of the README (between
marker comments), and generated CSV appendices in ``docs/``; nothing else.

Every write goes through :func:`costmodel.outfiles.atomic_write` (a link is replaced, never
written through). Generated prose is wrapped to lines of at most :data:`WIDTH` characters, and a
home-directory path copied from a data source (``/Users/<name>/``, ``/home/<name>/``) loses its
home part (:func:`strip_home`): a page shows where a file sits in its project, not on whose disk.
"""

from __future__ import annotations

import csv
import io
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.outfiles import atomic_write

__all__ = [
    "DOCS",
    "README",
    "ROOT",
    "WIDTH",
    "replace_section",
    "strip_home",
    "wrap",
    "write_csv",
    "write_page",
]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
WIDTH = 120  #: characters per line of generated prose (a table row is one line, however long)

_HOME = re.compile(r"(?:/Users|/home)/[^/\s]+/")


def _writable(page: Path) -> Path:
    """``page`` when it is the README or lies in ``docs/``; else a one-line refusal."""
    p = Path(page).absolute()
    if p != README and DOCS not in p.parents:
        raise CostModelError(f"{page}: a benchmark writes only docs/ and the README's generated sections")
    return p


def strip_home(text: str) -> str:
    """``text`` with every home-directory prefix removed.

    Parameters
    ----------
    text : str
        Any generated text (a paragraph, a CSV cell).

    Returns
    -------
    str
        ``text`` with each ``/Users/<name>/`` and ``/home/<name>/`` dropped:
        ``/Users/a/projects/x.csv`` reads ``projects/x.csv``.
    """
    return _HOME.sub("", text)


def wrap(text: str) -> str:
    """A Markdown paragraph on lines of at most :data:`WIDTH` characters.

    Parameters
    ----------
    text : str
        One paragraph (no blank line inside).

    Returns
    -------
    str
        The paragraph, words kept whole (a word longer than :data:`WIDTH` stays on its own line);
        a line break inside a paragraph renders as a space.
    """
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def replace_section(page: Path, begin: str, end: str, text: str) -> None:
    """Replace a generated section of a page, the rest of the page typed and kept.

    Parameters
    ----------
    page : Path
        The README or a page in ``docs/`` (any other path: ``CostModelError``).
    begin, end : str
        The marker comments around the section; the page must hold the pair exactly once.
    text : str
        The new section, written between the markers.
    """
    p = _writable(page)
    body = p.read_text(encoding="utf-8")
    new = f"{begin}\n{text}\n{end}"
    body, n = re.subn(re.escape(begin) + ".*?" + re.escape(end), lambda _: new, body, flags=re.S)
    if n != 1:
        raise CostModelError(f"{page} has no {begin} ... {end} section markers")
    with atomic_write(p, "generated page") as f:
        f.write(body)


def write_page(page: Path, text: str) -> None:
    """Write a whole generated page (one no person edits).

    Parameters
    ----------
    page : Path
        A page in ``docs/`` (any other path: ``CostModelError``).
    text : str
        The page, written as it is.
    """
    with atomic_write(_writable(page), "generated page") as f:
        f.write(text)


def write_csv(path: Path, fields: Sequence[str], rows: Iterable[Mapping[str, str]]) -> None:
    """Write a generated CSV appendix.

    Parameters
    ----------
    path : Path
        A file in ``docs/`` (any other path: ``CostModelError``).
    fields : sequence of str
        The header, in column order.
    rows : iterable of mapping
        One mapping of ``fields`` to cells per line; every cell loses its home-directory paths
        (:func:`strip_home`). Lines end in ``\\n``.
    """
    p = _writable(path)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: strip_home(v) for k, v in row.items()})
    with atomic_write(p, "generated CSV") as f:
        f.write(buf.getvalue())
