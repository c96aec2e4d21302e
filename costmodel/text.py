"""Numbers as text: SI prefixes, times, aligned tables; user text made safe for a terminal.
Light (no sympy): the command line's fast paths format with it.

>>> fmt_time(0.0042), fmt_si(1.5e9, "B")
('4.200 ms', '1.50 GB')
>>> fmt_time(1.5009857536e10), fmt_si(3e30, "FLOP/s")
('1.501e+10 s', '3.000e+30 FLOP/s')
>>> escape_controls("esc\\x1b]0;PWNED\\x07 ok\\n")
'esc\\\\x1b]0;PWNED\\\\x07 ok\\n'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .results import plain

__all__ = [
    "fmt_si",
    "fmt_time",
    "fmt_num",
    "FIXED_LIMIT",
    "format_table",
    "display_width",
    "table_cells",
    "escape_controls",
    "has_controls",
    "EscapedStream",
]

#: what a terminal acts on rather than shows: C0 controls but newline and tab (escape sequences,
#: bell, carriage return, backspace), DEL, C1 controls, and the bidirectional overrides that
#: reorder what is shown (Unicode TR9's embeddings, overrides and isolates, and the marks)
_BEYOND_C0 = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")


#: what a name (a model's, a device's, a description) may not hold: every control above, and the
#: newline and tab a multi-line text may (a name printed in a line or a title would break it)
_NAME_CONTROLS = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")


def has_controls(text: str) -> bool:
    """Whether ``text`` holds a character a name may not: a control (newline and tab included)
    or a bidirectional override (:data:`_NAME_CONTROLS`). Readers of user files refuse such a
    name, naming its field, rather than print a line it could forge.

    >>> has_controls("llama-3.1-8b"), has_controls("a\\nb"), has_controls("x\\u202ey")
    (False, True, True)
    """
    return _NAME_CONTROLS.search(text) is not None


def escape_controls(text: str) -> str:
    """``text`` with each control character (:data:`_CONTROLS`) written as its Python escape
    (``\\x1b``, ``\\u202e``), so a user's string (a device description, a file name) prints
    as itself and never drives the terminal; newline and tab pass."""
    return _CONTROLS.sub(lambda m: ascii(m.group())[1:-1], text)


class EscapedStream:
    """A text stream whose writes pass through :func:`escape_controls`: the command line wraps
    ``sys.stdout`` and ``sys.stderr`` in it for the run of a command, so every command's output
    is escaped at the one boundary. ``unescaped`` is the stream below, for the command line's
    own control characters (a progress bar's carriage return); anything else is delegated."""

    def __init__(self, stream: Any) -> None:
        self.unescaped = stream

    def write(self, text: str) -> int:
        self.unescaped.write(escape_controls(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)


#: a number printed in fixed point at or beyond this magnitude (in the unit it is printed in)
#: prints in scientific notation with four significant digits instead: fixed point writes as many
#: digits as the number is large (a 1 B/s device's weight read of 1.5e10 s, a 1e200 s time). A
#: billion: ordinary values keep fixed point (a 4.5 s op printed in us, 75 M tokens/s of a sweep)
FIXED_LIMIT = 1e9
#: an SI-prefixed number (:func:`fmt_si`) beyond a million of its largest prefix (1e21 of P)
SI_LIMIT = 1e6
#: the same for a spec that groups thousands (``,.0f``: a count or a rate the eye reads in
#: groups, ``1,234,567 tokens/s``): fixed point up to a quadrillion, at most 19 characters
GROUPED_LIMIT = 1e15

#: a fixed-point format spec: its fill, alignment, sign and width, then the grouping and precision
_FIXED = re.compile(r"(?P<head>(?:.?[<>=^])?[+\- ]?\d*)[,_]?(?:\.\d+)?f")


def fmt_num(x: float, spec: str = ".3f") -> str:
    """``x`` in the fixed-point ``spec`` (``.3f``, ``10.3f``, ``,.0f``) while it is below
    :data:`FIXED_LIMIT` in magnitude (:data:`GROUPED_LIMIT` for a spec grouping thousands), else
    in scientific notation with four significant digits and the spec's width, so that no value
    prints more than 14 characters (a grouped one, 19); NaN and infinities print as ``nan``
    and ``inf``.

    >>> fmt_num(1234.5678), fmt_num(1.5e10), fmt_num(-2.5e200, "10.1f"), fmt_num(5e6, ",.0f")
    ('1234.568', '1.500e+10', '-2.500e+200', '5,000,000')
    >>> fmt_num(5e15, ",.0f")
    '5.000e+15'
    """
    m = _FIXED.fullmatch(spec)
    limit = GROUPED_LIMIT if ("," in spec or "_" in spec) else FIXED_LIMIT
    if m is not None and math.isfinite(x) and abs(x) >= limit:
        return format(x, m.group("head") + ".3e")
    return format(x, spec)


def fmt_si(x: float, unit: str = "") -> str:
    """``1.5e9 -> '1.50 G'`` with an optional unit; beyond a million P (1e21) in scientific
    notation (:func:`fmt_num`)."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            if abs(x / scale) >= SI_LIMIT:
                return f"{fmt_num(x)} {unit}".rstrip()
            return f"{x / scale:.2f} {prefix}{unit}"
    return f"{x:.2f} {unit}".rstrip()


def fmt_time(t: float) -> str:
    """Seconds with a readable prefix: ``0.0042 -> '4.200 ms'``, ``3e-7 -> '0.30 us'``; from
    :data:`FIXED_LIMIT` seconds (31.7 years) on, scientific: ``1.5e10 -> '1.500e+10 s'``."""
    if t >= 1:
        return f"{fmt_num(t)} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


def _cell(value: Any, fmt: str) -> str:
    """One cell of a text table: ``fmt`` is ``s`` (as is), ``si``, ``time``, a format spec, or a
    spec ending in ``x`` (a ratio)."""
    if fmt == "s":
        return str(value)
    if fmt == "si":
        return fmt_si(float(value))
    if fmt == "time":
        return fmt_time(float(value))
    if fmt.endswith("x"):
        return fmt_num(float(value), fmt[:-1]) + "x"
    return fmt_num(float(value), fmt)


def table_cells(rows: Sequence[Any], columns: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    """The cells of :func:`format_table`'s table, each row as ``{heading: cell}`` (a page's table of
    the same rows shows the same headings, units and digits as the text).

    >>> table_cells([{"t": 0.00097238, "b": 3.85876e8}], [("b", "bytes", "si"), ("t", "time (s)", ".3e")])
    [{'bytes': '385.88 M', 'time (s)': '9.724e-04'}]
    """
    data = [plain(r) for r in rows]  # reports (dataclasses) or plain dicts
    return [{h: _cell(r[k], f) for k, h, f in columns} for r in data]


def display_width(text: str) -> int:
    """Terminal cells ``text`` takes: a wide (East Asian ``W``/``F``) character two, a combining
    mark none, every other character one (``len`` counts characters, so a table padded by it
    shifts every column after a wide name).

    >>> display_width("h100"), display_width("\u6d4b\u8bd5"), display_width("e\u0301")
    (4, 4, 1)
    """
    import unicodedata

    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text
    )


def _pad(text: str, width: int, left: bool) -> str:
    fill = " " * max(0, width - display_width(text))
    return text + fill if left else fill + text


def format_table(
    rows: Sequence[Any], columns: Sequence[tuple[str, str, str]], *, left: Iterable[str] = ()
) -> str:
    """Render rows as an aligned text table: the first column and those whose keys are in
    ``left`` (text: names, descriptions) aligned left, the rest (numbers) right; widths in
    terminal cells (:func:`display_width`); a left-aligned last column is not padded.

    Parameters
    ----------
    rows : sequence of dict or Result
        The rows, each holding every column's key.
    columns : sequence of (key, heading, format)
        Each column: the row key, its heading and its cell format (:func:`table_cells`).
    left : iterable of str
        Keys of further columns aligned left.

    Returns
    -------
    str
        The heading, a rule and one line per row.
    """
    lefts = set(left)
    aligned = [i == 0 or k in lefts for i, (k, _, _) in enumerate(columns)]
    table = [[h for _, h, _ in columns]] + [list(c.values()) for c in table_cells(rows, columns)]
    widths = [max(display_width(row[i]) for row in table) for i in range(len(columns))]
    lines = []
    for j, row in enumerate(table):
        parts = [_pad(c, w, a) for c, w, a in zip(row, widths, aligned, strict=True)]
        if aligned[-1] and len(parts) > 1:  # a left-aligned last column: no blanks after its text
            parts[-1] = row[-1]
        lines.append("  ".join(parts))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
