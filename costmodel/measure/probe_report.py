"""``probe`` as a library call: a checked request in, the spec files written, a report out
(issue 43 item 3).

:class:`ProbeRequest` holds what ``costmodel probe`` measures and writes (sizes, repeats, torch or
numpy, the spec files and the device's name), checked when built with each refusal one line naming
the option as the command line spells it. :func:`run_probe` measures this machine
(:func:`costmodel.measure.probe.probe`), writes the spec file, times the microbenchmarks against
the probed spec (:func:`~costmodel.measure.microbench.run_benchmarks`), fits the two efficiencies
(:func:`~costmodel.measure.calibrate.calibrate`) and, when asked, writes the calibrated spec: the
tensor roofs times ``e_max`` and the DRAM bandwidth times the memory efficiency ``eta``, each at
most 1 (a benchmark faster than its probed roof is said in the report, never fitted as an
efficiency above 1: :mod:`costmodel.measure.calibrate`). The
:class:`ProbeReport` has ``to_text()``, ``to_dict()`` and ``to_html()``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import CostModelError
from ..outfiles import atomic_write
from ..report import format_table
from ..text import has_controls
from .calibrate import Calibration, calibrate
from .microbench import BenchRow, run_benchmarks
from .probe import ProbeResult, Progress, probe

#: a text table's columns: (row key, heading, format) (:func:`costmodel.text.format_table`)
Columns = tuple[tuple[str, str, str], ...]

__all__ = ["ProbeRequest", "ProbeReport", "run_probe", "REPEATS_RANGE", "SPEC_SUFFIXES"]

#: timed runs per measurement: (fewest, most)
REPEATS_RANGE = (1, 1000)
#: a spec file's suffixes (a JSON hardware file, ``--hw-file``)
SPEC_SUFFIXES = (".json",)


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """One probe of this machine, checked when built (module doc).

    Parameters
    ----------
    out : str
        The hardware spec file written (JSON).
    calibrated_out : str, optional
        Also a calibrated spec here.
    name : str
        The device's name in the spec files.
    small : bool
        Small sizes: seconds instead of a minute.
    repeats : int
        Timed runs per measurement (the best counts).
    use_torch : bool
        Measure torch kernels too when torch is installed.
    """

    out: str = "probe.json"
    calibrated_out: str | None = None
    name: str = "probe"
    small: bool = False
    repeats: int = 5
    use_torch: bool = True

    def __post_init__(self) -> None:
        r = self.repeats
        if isinstance(r, bool) or not isinstance(r, int) or not REPEATS_RANGE[0] <= r <= REPEATS_RANGE[1]:
            raise CostModelError(
                f"--repeats must be a whole number in [{REPEATS_RANGE[0]}, {REPEATS_RANGE[1]}], got {r!r}"
            )
        if not isinstance(self.name, str) or not self.name.strip() or has_controls(self.name):
            raise CostModelError(
                f"--name must name the device in printable characters (no newline, tab or control), got {self.name!r:.60}"
            )
        if self.calibrated_out is not None and self.calibrated_out == self.out:
            raise CostModelError(f"--calibrated-out {self.out!r} is --out's file: give another path")


def _rate(per_s: float | None) -> str:
    """A measured rate in G per second to one decimal, or "-" where the measurement has none."""
    return "-" if per_s is None else f"{per_s / 1e9:.1f}"


@dataclass(frozen=True)
class ProbeReport:
    """One probe: the measurements, the microbenchmarks against the probed spec, the fit.

    Attributes
    ----------
    request : ProbeRequest
        What was measured and written.
    result : ProbeResult
        The measurements and the environment.
    rows : tuple of BenchRow
        The microbenchmarks, each against its bound on the probed spec.
    calibration : Calibration
        The memory and GEMM efficiencies and each benchmark's residual.
    """

    request: ProbeRequest
    result: ProbeResult
    rows: tuple[BenchRow, ...]
    calibration: Calibration

    def calibrated_spec(self) -> dict[str, Any]:
        """The probed spec with the tensor roofs times ``e_max`` and the DRAM bandwidth times
        ``eta`` (module doc).

        Returns
        -------
        dict
            A catalog-layout device table (``--hw-file``).
        """
        cal, name = self.calibration, self.request.name
        spec = self.result.spec_dict(name)
        dev = spec["devices"][name]
        # each scaled figure's source says so: its text names the measurement, whose rate alone
        # is not the number written (the file read 101.7 GFLOP/s "measured: 2.15e9 FLOP in
        # 41.73 ms", that is 51.5)
        for r in dev["roofs"]:
            if r["unit"] == "tensor":
                r["peak_flops_per_s"] *= cal.gemm_e_max
                r["source"] += (
                    f"; calibrated: x {cal.gemm_e_max:.4g}, the GEMM efficiency ceiling e_max "
                    "fitted to the probe's microbenchmarks"
                )
        dram = dev["memory"][0]
        dram["bandwidth_bytes_per_s"] *= cal.memory_efficiency
        dram["source"] += (
            f"; bandwidth calibrated: x {cal.memory_efficiency:.4g}, the memory efficiency fitted to "
            "the probe's memory-bound microbenchmarks"
        )
        return spec

    def to_dict(self) -> dict[str, Any]:
        """What ``probe --json`` prints.

        Returns
        -------
        dict
        """
        return {
            "spec_file": self.request.out,
            "environment": self.result.env,
            "measurements": [m.__dict__ for m in self.result.measurements],
            "microbenchmarks": list(self.rows),
            "calibration": self.calibration,
        }

    def to_text(self) -> str:
        """What ``costmodel probe`` prints: the measurements, the microbenchmarks, the fit.

        Returns
        -------
        str
        """
        cal, out = self.calibration, self.request.out
        (mrows, measured), (table, benched) = self._tables()
        lines = [
            f"probe of {self.result.env.get('cpu')} written to {out} (use --hw-file {out})",
            format_table(mrows, measured),
            "\nmicrobenchmarks against their bound on the probed spec:",
            format_table(table, benched),
            f"\ncalibration: memory efficiency {cal.memory_efficiency:.2f}, GEMM e(I) = {cal.gemm_e_max:.2f} "
            f"I/(I + {cal.gemm_i_half:.1f})",
        ]
        lines += [f"  {r.name:34s} residual {100 * r.residual:+.0f}%" for r in cal.residuals]
        lines += [
            f"note: {n}" for n in cal.notes
        ]  # a benchmark beat its roof: the spec or the timing is wrong
        return "\n".join(lines)

    def _tables(self) -> tuple[tuple[list[dict[str, Any]], Columns], tuple[list[dict[str, Any]], Columns]]:
        """The measurements' and the microbenchmarks' rows and columns, as the text prints them
        (the page's tables are the same cells: :func:`costmodel.text.table_cells`)."""
        res = self.result
        mrows = [
            {
                "name": m.name,
                "ms": m.best_s * 1e3,
                "spread": 100 * m.spread,
                # a rate the measurement does not time is "-", not a measured 0.0: a matmul's
                # bytes are not its bandwidth, a copy does no FLOPs
                "gbs": _rate(m.bandwidth if (m.bytes and not m.flops) or m.name.startswith("bw") else None),
                "gfs": _rate(m.flops_per_s if m.flops else None),
            }
            for m in res.measurements
        ]
        measured = (
            ("name", "measurement", "s"),
            ("ms", "best ms", ".3f"),
            ("spread", "spread %", ".1f"),
            ("gbs", "GB/s", "s"),
            ("gfs", "GFLOP/s", "s"),
        )
        table = [
            {**r.to_dict(), "pct": 100 * r.achieved_fraction, "flag": ",".join(r.flags)} for r in self.rows
        ]
        benched = (
            ("name", "op", "s"),
            ("intensity", "I", ".2f"),
            ("kind", "bound", "s"),
            ("predicted_s", "bound s", ".3e"),
            ("measured_s", "measured s", ".3e"),
            ("pct", "achieved %", ".0f"),
            ("flag", "flags", "s"),
        )
        return (mrows, measured), (table, benched)

    def to_html(self, command: str = "") -> str:
        """A page: each microbenchmark's achieved share of its bound, the measurements and the
        benchmarks as tables (:func:`costmodel.html.page_html`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from ..html import Section, notes_list, page_html, rows_table
        from ..html_figures import hbar_figure
        from ..text import table_cells

        cal = self.calibration
        figure = hbar_figure(
            [r.name for r in self.rows],
            [100 * r.achieved_fraction for r in self.rows],
            [f"{100 * r.achieved_fraction:.0f}% of its {r.kind} bound" for r in self.rows],
            title="microbenchmarks: measured against their bound on the probed spec",
            x_title="achieved (% of the bound)",
        )
        # the bound itself, over the bars: one past it ran faster than the probed spec allows; the
        # bars' labels start at 0, clear of the line
        figure.update_traces(insidetextanchor="start")
        figure.add_vline(
            x=100,
            line={"color": "#222", "dash": "dash", "width": 1.5},
            layer="above",
            annotation={"text": "100%: the bound", "font": {"size": 10}},
            annotation_position="top",
        )
        top = max((100 * r.achieved_fraction for r in self.rows), default=0.0)
        figure.update_xaxes(range=[0, 1.1 * max(100.0, top)])
        (mrows, mcols), (brows, bcols) = self._tables()
        measured = rows_table(table_cells(mrows, mcols))  # as the text prints them: ms, %
        benched = rows_table(table_cells(brows, bcols))
        fit = f"memory efficiency {cal.memory_efficiency:.2f}, GEMM e_max {cal.gemm_e_max:.2f}, I_half {cal.gemm_i_half:.1f}"
        # the notes as a list of their own, as the text prints them one a line: joined into the
        # headline's bold cell they read as one block
        notes = [Section("notes", (notes_list(cal.notes),))] if cal.notes else []
        return page_html(
            f"probe of {self.result.env.get('cpu')}",
            {"command": command, "spec file": self.request.out},
            {"calibration": fit},
            [*notes, Section("microbenchmarks", (figure, benched)), Section("measurements", (measured,))],
        )


def run_probe(request: ProbeRequest, progress: Progress | None = None) -> ProbeReport:
    """Probe this machine and write ``request``'s spec files (module doc).

    Parameters
    ----------
    request : ProbeRequest
        What to measure and where to write.
    progress : callable, optional
        ``progress(message)`` as each measurement starts.

    Returns
    -------
    ProbeReport
    """
    req = request
    res = probe(small=req.small, repeats=req.repeats, use_torch=req.use_torch, progress=progress)
    res.write(req.out, name=req.name)
    rows = run_benchmarks(res.hardware(req.name), small=req.small, repeats=req.repeats, progress=progress)
    report = ProbeReport(req, res, tuple(rows), calibrate(rows))
    if req.calibrated_out:
        with atomic_write(req.calibrated_out, "--calibrated-out", suffixes=SPEC_SUFFIXES) as f:
            json.dump(report.calibrated_spec(), f, indent=2)
    return report
