"""Per-row results as a CSV appendix: one line per row of the row-by-row table, holding exactly
what the table shows (:func:`benchmarks.replay.tables.cells`: times to 3 significant digits, signed
errors in % to one decimal), so a page can stay a method and a summary while every row stays
readable and diffable, and a table that was Markdown converts to the same lines.

Columns (:data:`FIELDS`): ``id``, ``metric``, ``measured_s``, then per mode ``<mode>_s`` and
``<mode>_error_pct`` (empty: not run), ``simulated_queue_share`` (the simulated run's queue share
of TTFT, :attr:`~graphs.serving.sim.simulator.SimResult.queue_share`, to 2 decimals; empty: not
run), ``excluded`` (why a row stays out of the medians; empty: compared) and ``notes`` (none on an
excluded row, as the table shows none). A file written before the queue share column
(:data:`LEGACY_FIELDS`) still reads, its queue shares empty.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

from costmodel.errors import CostModelError

from .pages import write_csv
from .run import MODES
from .tables import Line, cells, modes_of

__all__ = [
    "FIELDS",
    "LEGACY_FIELDS",
    "from_cells",
    "pct_cell",
    "read_results",
    "result_rows",
    "seconds_cell",
    "simulated_errors",
    "simulated_queue_shares",
    "simulated_ttft_shares",
    "write_results",
]

FIELDS = (
    "id",
    "metric",
    "measured_s",
    *(f"{m}_{c}" for m in MODES for c in ("s", "error_pct")),
    "simulated_queue_share",
    "excluded",
    "notes",
)
#: the columns before ``simulated_queue_share`` was added (read, never written)
LEGACY_FIELDS = tuple(f for f in FIELDS if f != "simulated_queue_share")
_SHARE = re.compile(r"^(0\.\d\d|1\.00)$")
_MAX_BYTES = 64 << 20  #: a results file larger than this is refused (the silicon table is ~1 MB)
_PCT = re.compile(r"^[+-]\d+\.\d$")
_LINK = re.compile(r"^\[(?P<id>[^\]]+)\]\([^)]*\)$")


def seconds_cell(cell: str) -> str:
    """A table's time cell as a CSV cell.

    Parameters
    ----------
    cell : str
        As :func:`benchmarks.replay.tables.fmt` prints a time: ``12.3 ms``, ``1.23 s`` or ``-``.

    Returns
    -------
    str
        Seconds to 3 significant digits (``12.3 ms`` -> ``0.0123``), empty for ``-`` (not run).
    """
    if cell == "-":
        return ""
    value, _, unit = cell.partition(" ")
    if unit not in ("s", "ms"):
        raise CostModelError(f"time cell {cell[:40]!r} not allowed; allowed: '<number> s' or '<number> ms'")
    return f"{float(value) * (1e-3 if unit == 'ms' else 1.0):.3g}"


def pct_cell(cell: str) -> str:
    """A table's signed error cell as a CSV cell.

    Parameters
    ----------
    cell : str
        As :func:`benchmarks.replay.tables.pct` prints it: ``+4.5 %`` or ``-``.

    Returns
    -------
    str
        The signed percentage (``+4.5``), empty for ``-`` (not run).
    """
    return "" if cell == "-" else cell.removesuffix(" %")


def from_cells(row: Sequence[str], modes: Sequence[str], share: bool = False) -> dict[str, str]:
    """A row of the row-by-row table as a CSV row.

    Parameters
    ----------
    row : sequence of str
        Its cells (:func:`benchmarks.replay.tables.cells`, no interval column): the linked id, the
        metric, the measured time, a (time, error) pair per mode, the notes.
    modes : sequence of str
        The table's mode columns, in order.
    share : bool
        Whether the row has the queue share cell (:func:`~benchmarks.replay.tables.cells`),
        before the notes.

    Returns
    -------
    dict
        :data:`FIELDS` to cells; a mode not among ``modes`` is empty, an excluded row's reason
        goes to ``excluded``, the notes lose their Markdown emphasis.
    """
    want = 4 + 2 * len(modes) + share
    if len(row) != want:
        raise CostModelError(f"a table row of {len(row)} cells; {want} allowed for {list(modes)}")
    link = _LINK.match(row[0])
    out = {"id": link["id"] if link else row[0], "metric": row[1], "measured_s": seconds_cell(row[2])}
    for m in MODES:
        i = 3 + 2 * modes.index(m) if m in modes else None
        out[f"{m}_s"] = "" if i is None else seconds_cell(row[i])
        out[f"{m}_error_pct"] = "" if i is None else pct_cell(row[i + 1])
    out["simulated_queue_share"] = "" if not share or row[-2] == "-" else row[-2]
    note = row[-1]
    excluded = note.removeprefix("excluded: ") if note.startswith("excluded: ") else ""
    return out | {"excluded": excluded, "notes": "" if excluded else note.replace("**", "")}


def result_rows(lines: list[Line]) -> list[dict[str, str]]:
    """Table lines as CSV rows.

    Parameters
    ----------
    lines : list of Line
        Replayed rows, every one in seconds (another unit: ``CostModelError``).

    Returns
    -------
    list of dict
        The table's cells (:func:`~benchmarks.replay.tables.cells`) read back by :func:`from_cells`,
        so a converted Markdown table and a fresh run give the same lines.
    """
    modes = modes_of(lines)
    share = any(ln.queue_share is not None for ln in lines)
    for ln in lines:
        if ln.row["unit"] != "s":
            raise CostModelError(
                f"row {ln.row['id']}: unit {ln.row['unit']!r} not allowed in a results CSV; allowed: s"
            )
    return [from_cells(cells(ln, modes, share=share), modes, share) for ln in lines]


def write_results(path: Path, lines: list[Line]) -> None:
    """Write table lines as a CSV appendix.

    Parameters
    ----------
    path : Path
        A file in ``docs/``.
    lines : list of Line
        Replayed rows (:func:`result_rows`).
    """
    write_csv(path, FIELDS, result_rows(lines))


def read_results(path: Path) -> list[dict[str, str]]:
    """Read a results CSV, checked.

    Parameters
    ----------
    path : Path
        A file :func:`write_results` wrote (at most 64 MiB).

    Returns
    -------
    list of dict
        Its rows; the header must be :data:`FIELDS` (or :data:`LEGACY_FIELDS`: every
        ``simulated_queue_share`` then empty), every error cell empty or a signed percentage with
        one decimal and every queue share empty or a fraction with two, else ``CostModelError``
        naming the line.
    """
    if not path.is_file():
        raise CostModelError(f"no results file at {path}: run the benchmark that writes it with --write")
    size = path.stat().st_size
    if size > _MAX_BYTES:
        raise CostModelError(f"{path}: {size} bytes; at most {_MAX_BYTES} allowed")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        head = tuple(reader.fieldnames or ())
        if head not in (FIELDS, LEGACY_FIELDS):
            raise CostModelError(f"{path}: header {reader.fieldnames!r} not allowed; allowed: {list(FIELDS)}")
        rows = [r if head == FIELDS else r | {"simulated_queue_share": ""} for r in reader]
    for i, r in enumerate(rows, 2):
        q = r["simulated_queue_share"]
        if q and not _SHARE.match(q):
            raise CostModelError(
                f"{path}:{i}: simulated_queue_share {q[:40]!r}; allowed: empty or a fraction like 0.42"
            )
        for m in MODES:
            cell = r[f"{m}_error_pct"]
            if cell and not _PCT.match(cell):
                raise CostModelError(f"{path}:{i}: {m}_error_pct {cell[:40]!r}; allowed: empty or like +4.5")
    return rows


def simulated_errors(path: Path) -> dict[str, float]:
    """The simulated errors of a results CSV's compared rows.

    Parameters
    ----------
    path : Path
        A results CSV (:func:`read_results`).

    Returns
    -------
    dict
        Row id to ``model / measured - 1`` of the ``simulated`` mode, as the CSV rounds it (0.1 %);
        an excluded row, or one without a ``simulated`` value, is left out.
    """
    return {
        r["id"]: float(r["simulated_error_pct"]) / 100
        for r in read_results(path)
        if not r["excluded"] and r["simulated_error_pct"]
    }


def simulated_queue_shares(path: Path) -> dict[str, float]:
    """The simulated queue shares of TTFT of a results CSV's rows.

    Parameters
    ----------
    path : Path
        A results CSV (:func:`read_results`).

    Returns
    -------
    dict
        Row id to its ``simulated`` run's queue share (a fraction, as the CSV rounds it: 0.01);
        a row without one (not run, or a file written before the column) is left out.
    """
    return {
        r["id"]: float(r["simulated_queue_share"]) for r in read_results(path) if r["simulated_queue_share"]
    }


def simulated_ttft_shares(path: Path) -> dict[str, float]:
    """The simulated TTFT share of E2E of a results CSV's E2E rows: the simulated mean TTFT of the
    same run (the row whose id ends ``-ttft`` where the E2E row's ends ``-e2e``) over the E2E
    row's simulated mean E2E.

    Parameters
    ----------
    path : Path
        A results CSV (:func:`read_results`).

    Returns
    -------
    dict
        E2E row id to ``TTFT_hat / E2E_hat`` (from the CSV's rounded seconds); a row whose run
        lacks either simulated value is left out.
    """
    rows = read_results(path)
    sim = {r["id"]: r["simulated_s"] for r in rows}
    out = {}
    for r in rows:
        if r["metric"] != "e2e_mean_s" or not r["id"].endswith("-e2e") or not r["simulated_s"]:
            continue
        ttft = sim.get(r["id"].removesuffix("-e2e") + "-ttft")
        e2e = float(r["simulated_s"])
        if ttft and e2e > 0:
            out[r["id"]] = float(ttft) / e2e
    return out
