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
    """``text`` with every home-directory prefix (``/Users/<name>/``, ``/home/<name>/``) removed,
    so ``/Users/a/projects/x.csv`` reads ``projects/x.csv``."""
    return _HOME.sub("", text)


def wrap(text: str) -> str:
    """A Markdown paragraph on lines of at most :data:`WIDTH` characters (words kept whole; a
    line break inside a paragraph renders as a space)."""
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def replace_section(page: Path, begin: str, end: str, text: str) -> None:
    """Replace what lies between the ``begin`` and ``end`` marker comments of ``page`` (the README
    or a page in ``docs/``) by ``text``: a generated section, the rest of the page typed and kept."""
    p = _writable(page)
    body = p.read_text(encoding="utf-8")
    new = f"{begin}\n{text}\n{end}"
    body, n = re.subn(re.escape(begin) + ".*?" + re.escape(end), lambda _: new, body, flags=re.S)
    if n != 1:
        raise CostModelError(f"{page} has no {begin} ... {end} section markers")
    with atomic_write(p, "generated page") as f:
        f.write(body)


def write_page(page: Path, text: str) -> None:
    """A whole generated page in ``docs/`` (a page no person edits), written as one file."""
    with atomic_write(_writable(page), "generated page") as f:
        f.write(text)


def write_csv(path: Path, fields: Sequence[str], rows: Iterable[Mapping[str, str]]) -> None:
    """A generated CSV appendix in ``docs/``: ``fields`` as its header, one line per row, ``\\n``
    line ends, home-directory paths stripped (:func:`strip_home`)."""
    p = _writable(path)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: strip_home(v) for k, v in row.items()})
    with atomic_write(p, "generated CSV") as f:
        f.write(buf.getvalue())
