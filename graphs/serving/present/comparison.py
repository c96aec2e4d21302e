"""The bound, the prediction with its interval, a calibrated fit and a measured run, side by side.

One served deployment answered four ways on the same requests: the **bound** (every kernel at its
roofline, no engine time: what no engine can beat), the **predicted** run (measured kernels and
the engine profile's terms, with its calibrated P10-P90 when it has one,
:class:`~graphs.serving.sim.intervals.SimInterval`), a **calibrated** run (a ``calibrate serving``
fit applied) and the **measured** run the requests came from (a user's ``vllm bench serve``,
GuideLLM or CSV result, :class:`~graphs.serving.planning.bench_results.BenchRun`). Each column holds the
same metrics, defined as a client measures them:

* TTFT mean and P90 and E2E mean (s): over the requests, from each send;
* TPOT mean (s): per request ``(E2E - TTFT) / (output - 1)`` over requests of two or more output
  tokens, then the mean (``vllm bench serve``'s per-request TPOT);
* requests/s and output tokens/s: completed requests and their output tokens over the span from
  the first send to the last completion (the drain included, as
  :attr:`~graphs.serving.sim.simulator.SimResult.requests_per_s` counts it); for a result whose
  send times the replay drew (a ``vllm bench serve`` file holds none), the replayed requests
  over the run's own ``duration`` as the file states it (its ``completed`` also counts the
  requests of no prompt or output tokens the replay leaves out), and not measured without one.

A summary-only result fills only what it states. Each column's error against the measured one is
``value / measured - 1`` (signed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.results import Result

__all__ = ["METRICS", "Column", "Comparison", "sim_column", "measured_column", "compare", "json_key"]

#: (label, SimResult attribute path, unit) of each compared metric
METRICS = (
    ("TTFT mean", "ttft.mean", "s"),
    ("TTFT P90", "ttft.p90", "s"),
    ("TPOT mean", "tpot.mean", "s"),
    ("E2E mean", "e2e.mean", "s"),
    ("requests/s", "requests_per_s", "1/s"),
    ("output tokens/s", "output_tokens_per_s", "1/s"),
)
#: why a metric a run has no value of prints ``n/a`` (a NaN in the run's summary: the JSON's null)
UNDEFINED = {
    "TPOT mean": "no request generated two or more tokens (TPOT = (E2E - TTFT) / (output tokens - 1))",
}
#: the interval labels of :data:`graphs.serving.sim.intervals.METRICS` each metric takes its P10-P90 from
_INTERVAL = {
    "TTFT mean": "TTFT mean s",
    "TTFT P90": "TTFT P90 s",
    "TPOT mean": "TPOT mean s",
    "E2E mean": "E2E mean s",
    "requests/s": "requests/s",
    "output tokens/s": "output tokens/s",
}


@dataclass(frozen=True)
class Column(Result):
    """One way of answering: its metrics (:data:`METRICS` labels; a metric not known is absent),
    its P10-P90 where it has one, and per-request latencies (s) for the CDFs."""

    name: str
    values: dict[str, float]
    interval: dict[str, tuple[float, float]] = field(default_factory=dict)
    per_request: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The column as plain values, each metric under a key that names its unit (``TTFT mean
        s``, as the run's ``interval`` names it; ``requests/s`` and ``output tokens/s`` say theirs).

        Returns
        -------
        dict
        """
        return {
            "name": self.name,
            "values": {json_key(k): v for k, v in self.values.items()},
            "interval": {json_key(k): list(v) for k, v in self.interval.items()},
        }


def json_key(label: str) -> str:
    """A :data:`METRICS` label as ``--json`` keys it: with its unit where the label has none
    (``TTFT mean`` -> ``TTFT mean s``, the label of the same metric in the run's ``interval``).

    Parameters
    ----------
    label : str
        A label of :data:`METRICS`.

    Returns
    -------
    str
    """
    return _INTERVAL.get(label, label)


def _get(obj: Any, path: str) -> float:
    for part in path.split("."):
        obj = getattr(obj, part)
    return float(obj)


def sim_column(name: str, res: Any, interval: Mapping[str, tuple[float, float]] | None = None) -> Column:
    """A simulated run (:class:`~graphs.serving.sim.simulator.SimResult`) as a column; ``interval``:
    a :attr:`SimInterval.calibrated <graphs.serving.sim.intervals.SimInterval.calibrated>` mapping.

    Parameters
    ----------
    name : str
        The column's heading.
    res : SimResult
        A simulated run.
    interval : mapping of str to (float, float), optional
        Calibrated ``(low, high)`` per metric (same units as the metric).

    Returns
    -------
    Column
        TTFT, TPOT, E2E (s), throughput (requests/s, tokens/s) and their intervals.
    """
    values = {label: _get(res, path) for label, path, _ in METRICS}
    iv = {label: tuple(interval[k]) for label, k in _INTERVAL.items() if interval and k in interval}
    pr = res.per_request
    return Column(
        name,
        values,
        iv,  # type: ignore[arg-type]
        {"TTFT": np.asarray(pr["ttft_s"]), "TPOT": np.asarray(pr["tpot_s"]), "E2E": np.asarray(pr["e2e_s"])},
    )


def measured_column(name: str, run: Any) -> Column:
    """A measured run (:class:`~graphs.serving.planning.bench_results.BenchRun`) as a column, each metric as
    a client measures it (module doc); a summary-only run fills what it states.

    Parameters
    ----------
    name : str
        The column's heading.
    run : BenchRun
        A measured run (per request, or summary only).

    Returns
    -------
    Column

    Raises
    ------
    CostModelError
        When the run's requests span no time.
    """
    if run.summary is not None:
        s = run.summary
        stated = {
            "TTFT mean": s.ttft_mean_s,
            "TPOT mean": s.tpot_mean_s,
            "E2E mean": s.e2e_mean_s,
            "requests/s": s.throughput_rps,
        }
        return Column(name, {k: float(v) for k, v in stated.items() if v is not None})
    ttft, e2e = np.asarray(run.ttft_s, dtype=float), np.asarray(run.e2e_s, dtype=float)
    out = np.asarray(run.output, dtype=float)
    many = out > 1
    tpot = (e2e[many] - ttft[many]) / (out[many] - 1)
    values = {
        "TTFT mean": float(ttft.mean()),
        "TTFT P90": float(np.percentile(ttft, 90)),
        "E2E mean": float(e2e.mean()),
    }
    if run.drawn:  # the arrivals are this replay's draw, not the run's: its span is the file's duration
        span = run.duration_s
    else:
        arrival = np.asarray(run.arrival_s, dtype=float)
        span = float(np.max(arrival + e2e) - np.min(arrival))
        if not span > 0:
            raise CostModelError(f"{name}: the run's requests span no time (first send to last completion)")
    if span is not None:
        values["requests/s"] = len(ttft) / span
        values["output tokens/s"] = float(out.sum()) / span
    if tpot.size:
        values["TPOT mean"] = float(tpot.mean())
    return Column(name, values, {}, {"TTFT": ttft, "TPOT": tpot, "E2E": e2e})


@dataclass(frozen=True)
class Comparison(Result):
    """The columns of one deployment, in the order given (bound first), and the measured one's
    name when a measured column is present (:meth:`errors` against it)."""

    model: str
    device: str
    columns: tuple[Column, ...]
    measured: str | None = None

    def errors(self) -> dict[str, dict[str, float]]:
        """Per column but the measured one, per metric both know: ``value / measured - 1``."""
        ref = next((c for c in self.columns if c.name == self.measured), None)
        if ref is None:
            return {}
        return {
            c.name: {
                k: v / ref.values[k] - 1
                for k, v in c.values.items()
                if ref.values.get(k) and math.isfinite(v) and math.isfinite(ref.values[k])
            }
            for c in self.columns
            if c is not ref
        }

    def lines(self) -> list[str]:
        """The table as the command prints it: one row per metric, a column per answer, the
        interval beside a value that has one, then each column's signed error against the
        measured run."""
        rows, undefined = [], []
        for label, _, unit in METRICS:
            cells = []
            for c in self.columns:
                v = c.values.get(label)
                if v is not None and not math.isfinite(v):
                    cells.append("n/a")
                    undefined.append(label)
                    continue
                text = "" if v is None else _fmt(v, unit)
                if v is not None and label in c.interval:
                    lo, hi = c.interval[label]
                    text += f" [{_fmt(lo, unit)}, {_fmt(hi, unit)}]"
                cells.append(text)
            rows.append((f"{label} (s)" if unit == "s" else label, cells))
        widths = [max(len(c.name), *(len(r[1][i]) for r in rows)) + 2 for i, c in enumerate(self.columns)]
        out = [
            "  " + f"{'':16s}" + "".join(f"{c.name:>{w}s}" for c, w in zip(self.columns, widths, strict=True))
        ]
        for label, cells in rows:
            out.append(f"  {label:16s}" + "".join(f"{t:>{w}s}" for t, w in zip(cells, widths, strict=True)))
        for label in dict.fromkeys(undefined):
            why = UNDEFINED.get(label, "not defined for this run")
            out.append(f"  {label} n/a: {why}")
        for name, errs in self.errors().items():
            parts = ", ".join(f"{k} {100 * e:+.1f} %" for k, e in errs.items())
            out.append(f"  {name} against measured: {parts}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "columns": [c.to_dict() for c in self.columns],
            "measured": self.measured,
            "errors": self.errors(),
        }


def _fmt(v: float, unit: str) -> str:
    return f"{v:.4g}" if unit == "s" else f"{v:,.4g}"


def compare(model: str, device: str, columns: Sequence[Column], *, measured: str | None = None) -> Comparison:
    """The :class:`Comparison` of ``columns`` (names unique; ``measured`` one of them or None).

    Parameters
    ----------
    model : str
        The model's name.
    device : str
        The device's name.
    columns : sequence of Column
        The runs, each with a distinct name.
    measured : str, optional
        The name of the measured column the others are compared with.

    Returns
    -------
    Comparison

    Raises
    ------
    CostModelError
        When names repeat or ``measured`` is not one of them.
    """
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise CostModelError(f"comparison columns must have distinct names, got {names}")
    if measured is not None and measured not in names:
        raise CostModelError(f"measured column {measured!r} is not among {names}")
    return Comparison(model, device, tuple(columns), measured)
