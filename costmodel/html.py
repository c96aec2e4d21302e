"""Self-contained interactive HTML reports (optional extra ``html``: plotly) and report tables.

One page per run (:func:`page_html`): a header that says what was run, headline numbers as
text, and sections of plotly figures (:mod:`costmodel.html_figures`) and tables. The page
inlines plotly.js once and every figure's data, so it opens offline (no network fetch);
serving pages are assembled in :mod:`graphs.serving.present.html_views` and
:mod:`graphs.serving.present.html_studies`. :func:`result_table` renders any
:class:`~costmodel.results.Result` as an HTML table (no plotly: Jupyter's ``_repr_html_``
uses it).

plotly is imported only when a figure is built; without it :func:`require_plotly` raises a
one-line :class:`~costmodel.errors.CostModelError` naming the extra.

>>> print(result_table({"step_s": 0.0046, "kind": "dram"}))
<table class="cm-result"><tr><th>step_s</th><td>0.0046</td></tr><tr><th>kind</th><td>dram</td></tr></table>
"""

from __future__ import annotations

import dataclasses
import enum
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CostModelError

__all__ = [
    "EXTRA_HINT",
    "require_plotly",
    "plain",
    "plotly_js",
    "BASIC_BUNDLE",
    "Section",
    "result_table",
    "rows_table",
    "notes_list",
    "page_html",
    "write_html",
]

#: the one-line hint every "plotly is missing" error carries
EXTRA_HINT = "HTML reports need the optional extra: pip install 'costmodel[html]' (plotly>=5)"

#: most rows of a tuple of reports a table shows (the rest are counted)
MAX_TABLE_ROWS = 50


def require_plotly() -> Any:
    """``plotly.graph_objects``, or a one-line :class:`CostModelError` naming the extra."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise CostModelError(EXTRA_HINT) from None
    return go


def plain(text: Any, *, template: bool = False) -> str:
    """``text`` as plotly draws it literally: a title, a legend name, an axis or bar label, an
    annotation or a hover line holding a user's string (a ``--hw-file`` device's name, a model's
    node, a file's name). plotly renders a subset of HTML in every such string (``<a href>``,
    ``<span style>``, ``<b>``, ``<br>``) and decodes ``&amp;``, ``&lt;``, ``&gt;`` and numeric
    entities, so ``&``, ``<`` and ``>`` are written as those entities; a quote is left as it is (plotly
    does not decode ``&quot;``, and outside a tag it is text). With ``template``, for a string put
    into a ``hovertemplate`` or ``texttemplate``, ``%`` is written ``&#37;`` too, so ``%{x}`` in a
    name is not filled in.

    >>> plain('dev<a href="x">CLICK</a> & co')
    'dev&lt;a href="x"&gt;CLICK&lt;/a&gt; &amp; co'
    >>> plain("100%{y}", template=True)
    '100&#37;{y}'
    """
    out = html.escape(str(text), quote=False)
    return out.replace("%", "&#37;") if template else out


#: plotly.js's "basic" partial bundle (scatter, bar, pie: every trace type the pages draw), 1.19 MB
#: minified against the full bundle's 4.8 MB; from npm ``plotly.js-basic-dist-min`` (MIT, licence
#: beside it), stored gzip-compressed (395 KB)
BASIC_BUNDLE = Path(__file__).resolve().parent / "assets" / "plotly-basic.min.js.gz"


def _bundle_version(head: str) -> str | None:
    """``4.1.1`` from a bundle's banner (``* plotly.js (basic - minified) v4.1.1``)."""
    import re

    m = re.search(r"plotly\.js[^\n]*? v(\d+\.\d+\.\d+)", head[:400])
    return m.group(1) if m else None


def plotly_js() -> str:
    """The plotly.js a page inlines: the shipped basic bundle when it is the version the installed
    plotly (Python) was built against, so figures it writes are drawn as it expects; else the
    installed plotly's full bundle, with a note on stderr (once per run) saying why the page
    is larger."""
    import gzip

    from plotly.offline import get_plotlyjs

    from .notes import say

    full = get_plotlyjs()
    basic = gzip.decompress(BASIC_BUNDLE.read_bytes()).decode()
    want, have = _bundle_version(full), _bundle_version(basic)
    if want is not None and want == have:
        return basic
    say(  # once per command run (costmodel.notes), kept for --json
        f"the installed plotly expects plotly.js {want}, the shipped basic bundle is {have}: "
        "pages inline the full bundle (about 4.8 MB)"
    )
    return full


# ------------------------------------------------------------------ tables (no plotly)
def _cell(value: Any) -> str:
    """One value as escaped HTML: numbers compact, reports and mappings as nested tables."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (str, bool)):
        return html.escape(str(value))
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        return html.escape(f"{value:.6g}" if math.isfinite(value) else str(value))
    if isinstance(value, Mapping) or dataclasses.is_dataclass(value):
        return result_table(value)
    if isinstance(value, (list, tuple)) and value and all(dataclasses.is_dataclass(v) for v in value):
        return rows_table([_fields(v) for v in value])
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) >= 1:  # numpy arrays: their size, not their contents
        return html.escape(f"array of {shape[0]:,} values")
    if isinstance(value, (list, tuple)):
        return html.escape(", ".join(str(v) for v in value))
    return html.escape(str(value))


def _fields(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if not f.name.startswith("_")}
    return dict(obj)


def result_table(obj: Any) -> str:
    """A report (dataclass) or mapping as a two-column HTML table; nested reports nest."""
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{_cell(v)}</td></tr>" for k, v in _fields(obj).items()
    )
    return f'<table class="cm-result">{cells}</table>'


def rows_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]] | None = None) -> str:
    """Rows (mappings) as an HTML table with a header, in a box (``div.cm-wide``) that scrolls
    sideways when the table is wider than the page: the table is as wide as its cells' text on one
    line, each cell at most ``32em`` (a longer text wraps there; the page's CSS). ``columns`` are
    ``(key, heading)`` pairs (default: the first row's keys). At most :data:`MAX_TABLE_ROWS` rows;
    the rest are counted.

    Parameters
    ----------
    rows : sequence of mapping
        The rows, one mapping of column key to value each.
    columns : sequence of (str, str), optional
        ``(key, heading)`` per column, in order.

    Returns
    -------
    str
        The HTML (``<p>(none)</p>`` for no rows).
    """
    if not rows:
        return "<p>(none)</p>"
    cols = list(columns) if columns is not None else [(k, k) for k in rows[0]]
    head = "".join(f"<th>{html.escape(h)}</th>" for _k, h in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(r.get(k))}</td>" for k, _h in cols) + "</tr>"
        for r in rows[:MAX_TABLE_ROWS]
    )
    more = (
        f'<tr><td colspan="{len(cols)}">... {len(rows) - MAX_TABLE_ROWS:,} more rows</td></tr>'
        if len(rows) > MAX_TABLE_ROWS
        else ""
    )
    return f'<div class="cm-wide"><table class="cm-rows"><tr>{head}</tr>{body}{more}</table></div>'


def notes_list(notes: Sequence[str]) -> str:
    """Notes as a list in the page's text weight (``ul.cm-notes``), each escaped; none: ``""``.

    Parameters
    ----------
    notes : sequence of str
        Plain-text notes, one an item.

    Returns
    -------
    str
        The HTML.

    >>> notes_list(["a < b", "c"])
    '<ul class="cm-notes"><li>a &lt; b</li><li>c</li></ul>'
    """
    if not notes:
        return ""
    return '<ul class="cm-notes">' + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"


# ------------------------------------------------------------------ the page
@dataclass(frozen=True, slots=True)
class Section:
    """A titled part of a page: plotly figures and HTML fragments (already escaped), in order."""

    title: str
    parts: tuple[Any, ...]
    note: str = ""  #: plain text, escaped on output


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1150px;color:#222}
h1{font-size:1.5em;margin-bottom:.3em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em;margin:.4em 0} th,td{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top} th{background:#f4f4f4} code{font-size:.95em}
.cm-headline{font-size:1.05em} .cm-headline td{font-weight:600} .cm-note{color:#555;font-size:.85em}
.cm-wide{max-width:100%;overflow-x:auto;margin:.4em 0} .cm-wide>table{margin:0}
table.cm-rows{width:max-content} table.cm-rows td{max-width:32em} ul.cm-notes{font-size:.9em;font-weight:normal;margin:.4em 0}
pre{white-space:pre-wrap;overflow-wrap:anywhere}
"""


def _escaped(value: Any) -> tuple[Any, bool]:
    """``value`` (a figure's JSON tree) with every string's control characters written as their
    escapes (:func:`costmodel.text.escape_controls`), and whether any was."""
    from .text import escape_controls

    if isinstance(value, str):
        out = escape_controls(value)
        return out, out != value
    if isinstance(value, Mapping):
        pairs = {k: _escaped(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    if isinstance(value, list | tuple):
        items = [_escaped(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if kind in "UO" and kind and hasattr(value, "tolist"):  # an array of labels
        return _escaped(value.tolist())
    return value, False


def _safe_figure(fig: Any) -> Any:
    """``fig``, or a copy whose labels hold no control character: a user's name (a model's, a
    file's) drawn in a legend, an axis or a hover box shows as itself, as on the terminal and in
    the page's text (JSON keeps a bidirectional override as it is, and decodes ``\u001b``)."""
    tree, changed = _escaped(fig.to_plotly_json())
    if not changed:
        return fig
    import plotly.graph_objects as go

    return go.Figure(tree)


def _part_html(part: Any, index: int) -> str:
    if isinstance(part, str):
        return part
    return _safe_figure(part).to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"cm-fig-{index}",
        config={"displaylogo": False, "responsive": True},
    )


def page_html(
    title: str,
    header: Mapping[str, Any],
    headline: Mapping[str, str],
    sections: Sequence[Section],
) -> str:
    """The whole page: ``header`` (what was run), ``headline`` (the run's key numbers, as the
    command line prints them, each in an element with ``data-key``), then ``sections``. The
    plotly.js bundle (:func:`plotly_js`) is inlined once in the head when a section holds a
    figure (a page of text, tables and images needs neither it nor plotly): the page makes no
    network request."""
    figures = any(not isinstance(p, str) for s in sections for p in s.parts)
    if figures:
        require_plotly()

    head_rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td><code>{html.escape(str(v))}</code></td></tr>"
        for k, v in header.items()
    )
    lines = "".join(
        f'<tr><th>{html.escape(k)}</th><td data-key="{html.escape(k)}">{html.escape(v)}</td></tr>'
        for k, v in headline.items()
    )
    body, index = [], 0
    for s in sections:
        body.append(f"<h2>{html.escape(s.title)}</h2>")
        for p in s.parts:
            body.append(_part_html(p, index))
            index += 0 if isinstance(p, str) else 1
        if s.note:
            body.append(f'<p class="cm-note">{html.escape(s.note)}</p>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
        + (f'<script type="text/javascript">{plotly_js()}</script>' if figures else "")
        + "</head><body>"
        f'<h1>{html.escape(title)}</h1><table class="cm-run">{head_rows}</table>'
        f'<table class="cm-headline">{lines}</table>' + "\n".join(body) + "</body></html>\n"
    )


def write_html(path: str | Path, text: str, flag: str = "--html") -> Path:
    """Write ``text`` to ``path`` atomically (:func:`costmodel.outfiles.atomic_write`): a reader
    never sees half a page; on a failure the old file stays and the error is one line naming
    ``flag``."""
    from .outfiles import atomic_write
    from .text import escape_controls

    with atomic_write(path, flag) as f:
        # no control character reaches a page (a user's name with ESC or BEL), as on the terminal
        f.write(escape_controls(text))
    return Path(path)
