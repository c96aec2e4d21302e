"""Split the silicon table's TPOT error into the decode step and the decode window's fixed part.

The gap-analysis campaigns of the silicon sample (``docs/silicon_accuracy.md``) run each
deployment at every ISL and concurrency ``C`` with several output lengths (128, 256 and 512, or
128, 512 and 1024), fixed,
sent with ``ignore_eos`` by a closed loop of ``C`` clients. Every request's TPOT is then
``(E2E - TTFT) / (OSL - 1)`` and its decode window, ``(OSL - 1) x TPOT``, holds its own
``OSL - 1`` decode steps and the prefills of the requests the other clients send meanwhile
(about ``C - 1`` in the steady state, one per client and cycle, whatever the OSL). So at one
ISL and ``C``, across the output lengths,

.. math::

    (\\mathrm{OSL} - 1)\\,\\mathrm{TPOT} \\approx D\\,(\\mathrm{OSL} - 1) + P

with ``D`` (s) the time of a decode step (the mean over the window: its context grows with the
OSL, little next to a long ISL, by half at 1024/1024, which biases ``D`` and ``P`` there) and ``P`` (s) what a window holds whatever its length: the other clients' prefills, each
as it lengthens the step it runs in. :func:`split` fits ``D`` and ``P`` by least squares, for
the measured TPOTs and for the table's ``simulated`` column alike; comparing the two says which
part of a deployment's TPOT error is the step (kernels, collectives, CPU per iteration) and
which is the prefills inside the window (their pricing, how many land there). ``P / (C - 1)``
is printed as the window's cost per other client (a prefill's cost where every window holds
``C - 1``; in the simulation a few fewer do: clients that send in the same iteration finish and
send again together). Per deployment the report gives the median TPOT error of the fitted lines
as they are, with the measured step in place of the simulated one and with the measured window
part (which of the two carries the error), and the step's gap fitted across concurrencies as
``a + b C`` (:func:`step_gap`: a gap fixed per step, as a collective's latency, against one per
scheduled sequence, as CPU time per request that no overlap hides).

Only the calibration deployments are read: the held-out ones
(``benchmarks/data/heldout.toml``) are left out before any number of theirs is looked at.

    python -m benchmarks.tpot_split                        # every calibration deployment
    python -m benchmarks.tpot_split --only tensorrt-llm    # deployments whose key holds it
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

from benchmarks import served_errors as se
from benchmarks.replay.results import read_results
from costmodel.errors import CostModelError

__all__ = ["Split", "groups", "main", "report", "split", "step_gap"]


@dataclasses.dataclass(frozen=True)
class Split:
    """One (deployment, ISL, concurrency) group's fit (:func:`split`), seconds."""

    step_measured_s: float  #: ``D`` of the measured TPOTs
    step_simulated_s: float  #: ``D`` of the simulated ones
    window_measured_s: float  #: ``P`` of the measured TPOTs
    window_simulated_s: float  #: ``P`` of the simulated ones
    osls: tuple[int, ...] = ()  #: the runs' output lengths

    def tpot_errors(self) -> dict[str, list[float]]:
        """Per run of the fit (at its OSL), the TPOT error (simulated over measured, less 1) of the
        fitted lines as they are (``now``), with the measured step in place of the simulated
        (``step exact``: what the window part leaves) and with the measured window part
        (``window exact``: what the step leaves)."""
        out: dict[str, list[float]] = {"now": [], "step exact": [], "window exact": []}
        for osl in self.osls:
            n = osl - 1
            meas = self.step_measured_s + self.window_measured_s / n
            out["now"].append((self.step_simulated_s + self.window_simulated_s / n) / meas - 1)
            out["step exact"].append((self.step_measured_s + self.window_simulated_s / n) / meas - 1)
            out["window exact"].append((self.step_simulated_s + self.window_measured_s / n) / meas - 1)
        return out

    @property
    def step_error(self) -> float:
        """Simulated step over measured, less 1."""
        return self.step_simulated_s / self.step_measured_s - 1

    @property
    def window_error(self) -> float:
        """Simulated fixed part of the window over measured, less 1; NaN where the measured part is
        not positive or is under 1 % of the measured window (the ratio would be noise)."""
        n = sum(self.osls) / len(self.osls) - 1 if self.osls else 0.0
        whole = self.step_measured_s * n + self.window_measured_s  # the measured window at the mean OSL
        if self.window_measured_s <= 0.01 * max(whole, 0.0) or self.window_measured_s <= 0:
            return math.nan
        return self.window_simulated_s / self.window_measured_s - 1


def split(points: Sequence[tuple[int, float, float]]) -> Split:
    """Fit ``(OSL - 1) TPOT = D (OSL - 1) + P`` (module doc) to a group's measured and simulated TPOTs.

    Parameters
    ----------
    points : sequence of (int, float, float)
        Per run: its output length (tokens, at least 2), measured TPOT and simulated TPOT (s,
        finite and positive); at least two distinct output lengths.

    Returns
    -------
    Split
        ``D`` and ``P`` of each, by least squares over the runs.
    """
    if len({p[0] for p in points}) < 2:
        raise CostModelError(
            f"points: output lengths {sorted({p[0] for p in points})!r}; at least two distinct ones are needed"
        )
    for osl, meas, sim in points:
        if not isinstance(osl, int) or osl < 2:
            raise CostModelError(f"points: OSL {osl!r} not allowed; allowed: an integer >= 2")
        for name, v in (("measured", meas), ("simulated", sim)):
            if not (math.isfinite(v) and v > 0):
                raise CostModelError(
                    f"points: {name} TPOT {v!r} s at OSL {osl} not allowed; allowed: finite, > 0"
                )
    steps = np.array([p[0] - 1 for p in points], dtype=float)
    a = np.vstack([steps, np.ones_like(steps)]).T
    fits = []
    for col in (1, 2):
        y = np.array([p[col] for p in points], dtype=float) * steps
        (d, w), *_ = np.linalg.lstsq(a, y, rcond=None)
        fits.append((float(d), float(w)))
    return Split(fits[0][0], fits[1][0], fits[0][1], fits[1][1], tuple(p[0] for p in points))


def step_gap(points: Sequence[tuple[int, Split]]) -> tuple[float, float]:
    """The measured step less the simulated, fitted across concurrencies as ``a + b C``.

    Parameters
    ----------
    points : sequence of (int, Split)
        One deployment's groups: their concurrency ``C`` and fit; at least two distinct ``C``.

    Returns
    -------
    tuple of float
        ``a`` (s per step) and ``b`` (s per step per client), by least squares: a gap fixed per
        step (a collective's or a launch's latency) against one that grows with the batch (CPU
        time per scheduled sequence, a batch-sized transfer).
    """
    if len({c for c, _ in points}) < 2:
        raise CostModelError(
            f"points: concurrencies {sorted({c for c, _ in points})!r}; at least two distinct ones are needed"
        )
    c = np.array([p[0] for p in points], dtype=float)
    gap = np.array([f.step_measured_s - f.step_simulated_s for _, f in points])
    (a, b), *_ = np.linalg.lstsq(np.vstack([np.ones_like(c), c]).T, gap, rcond=None)
    return float(a), float(b)


def groups(only: str = "") -> dict[tuple[str, int, int], Split]:
    """Every calibration group of the silicon table's compared TPOT rows of fixed lengths (the
    gap-analysis campaigns' client, range ratio 1) with two or more output lengths:
    ``(deployment key, ISL, concurrency) -> Split``.

    Parameters
    ----------
    only : str
        Keep the deployments whose key (``silicon:engine|version|model|device|dtype|tp|gpus``)
        holds this text (empty: all).

    Returns
    -------
    dict
        The fits; held-out deployments are never read.
    """
    held = se.heldout()
    sim = {r["id"]: r["simulated_s"] for r in read_results(se.SILICON_ROWS)}
    runs: dict[tuple[str, int, int], list[tuple[int, float, float]]] = collections.defaultdict(list)
    for r in se.silicon_row_dicts():
        key = f"silicon:{se.deployment(r)}"
        if key in held or only not in key or r["metric"] != "tpot_mean_s" or not r.get("concurrency"):
            continue
        if float(r.get("length_range_ratio") or "nan") != 1.0:
            continue  # lengths drawn (InferenceX's client): OSL - 1 is not every request's step count
        s = sim.get(r["id"], "")
        if not s:
            continue  # not compared (its TPOT is left out of the table)
        runs[(key, int(r["isl"]), int(r["concurrency"]))].append((int(r["osl"]), float(r["value"]), float(s)))
    return {k: split(v) for k, v in sorted(runs.items()) if len({p[0] for p in v}) >= 2}


def report(fits: dict[tuple[str, int, int], Split]) -> str:
    """The fits as Markdown: one row per group, then each deployment's medians.

    Parameters
    ----------
    fits : dict
        :func:`groups`.

    Returns
    -------
    str
        The tables (ms; errors are simulated over measured, less 1).
    """
    lines = [
        "| deployment | ISL | C | step measured | simulated | error | window part measured | simulated | error "
        "| per other client measured | simulated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    per: dict[str, list[tuple[int, Split]]] = collections.defaultdict(list)
    for (key, isl, c), f in fits.items():
        per[key].append((c, f))
        others = max(c - 1, 1)
        lines.append(
            f"| {key} | {isl} | {c} | {1e3 * f.step_measured_s:.2f} | {1e3 * f.step_simulated_s:.2f} "
            f"| {100 * f.step_error:+.1f} % | {1e3 * f.window_measured_s:.0f} | {1e3 * f.window_simulated_s:.0f} "
            f"| {100 * f.window_error:+.1f} % | {1e3 * f.window_measured_s / others:.1f} "
            f"| {1e3 * f.window_simulated_s / others:.1f} |"
        )
    lines += [
        "",
        "| deployment | groups | step error (median) | window part error (median) | TPOT error: now "
        "| step exact | window exact | step gap (measured - simulated) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, cf in per.items():
        fs = [f for _, f in cf]
        win = [f.window_error for f in fs if math.isfinite(f.window_error)]
        errs: dict[str, list[float]] = collections.defaultdict(list)
        for f in fs:
            for k, v in f.tpot_errors().items():
                errs[k] += v
        cells = " | ".join(
            f"{100 * statistics.median(errs[k]):+.1f} %" for k in ("now", "step exact", "window exact")
        )
        if len({c for c, _ in cf}) >= 2:
            a, b = step_gap(cf)
            gap = f"{1e3 * a:.2f} ms + {1e6 * b:.1f} us x C"
        else:
            gap = "n/a"
        lines.append(
            f"| {key} | {len(fs)} | {100 * statistics.median(f.step_error for f in fs):+.1f} % "
            f"| {f'{100 * statistics.median(win):+.1f} %' if win else 'n/a'} | {cells} | {gap} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print :func:`report` of :func:`groups`.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status (0).
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="keep the deployments whose key holds this text")
    args = ap.parse_args(argv)
    print(report(groups(args.only)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
