"""Attach measured times from a PyTorch profiler trace to cost-graph nodes.

Reads a Chrome trace written by ``torch.profiler.profile(...).export_chrome_trace``
(events with ``name`` such as ``aten::mm`` and ``dur`` in microseconds). The
k-th event of an ATen op is matched to the k-th graph node carrying that op
(``node[FRONTEND_OP]``, set by the torch importer) in topological order; matched
nodes get ``measured_s``. The report gives each matched node's achieved
FLOP/s and bytes/s, and the model FLOPs utilisation

.. math::

    \\text{MFU} = \\frac{F_\\text{model}}{T_\\text{wall}\\;P_\\text{peak}}

with ``F_model`` the graph's tensor-unit (matmul) FLOPs, ``T_wall`` the
trace's span of the matched ops (first start to last end) and ``P_peak`` the
device's dense tensor roof at ``precision`` (the PaLM paper's definition,
Chowdhery et al. 2022, without attention's share when the export does not
count it).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from ..cost import as_float
from ..errors import CostModelError
from ..graph import COST, op_nodes
from ..hardware import Hardware, get_device
from ..keys import FRONTEND_OP, MEASURED_S
from ..results import Result

__all__ = ["load_trace_events", "attach_profile", "ProfileReport", "ProfileRow"]


def load_trace_events(path: str | Path) -> list[dict[str, Any]]:
    """CPU-op and kernel events of a Chrome trace, sorted by start time."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CostModelError(f"trace {str(path)!r} is not a readable Chrome trace: {exc}") from None
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = [
        e for e in events if e.get("ph") == "X" and "dur" in e and str(e.get("name", "")).startswith("aten::")
    ]
    return sorted(out, key=lambda e: e["ts"])


def _aten_name(node_aten: str) -> str:
    # "aten.linear.default" -> "aten::linear"
    parts = node_aten.split(".")
    return f"aten::{parts[1]}" if len(parts) >= 2 and parts[0] == "aten" else node_aten


@dataclass(frozen=True)
class ProfileRow(Result):
    """A graph node matched to a profiler event, with its achieved rates."""

    node: str
    event: str
    measured_s: float
    flops_per_s: float | None
    bytes_per_s: float | None


@dataclass(frozen=True)
class ProfileReport(Result):
    """A trace attached to a graph. ``mfu`` = graph matmul FLOPs / (trace span of the matched
    ops x the dense tensor peak at the precision): model FLOPs utilisation over that span."""

    matched: int
    unmatched_events: int
    rows: tuple[ProfileRow, ...]
    model_flops: float
    wall_s: float
    mfu: float | None


def attach_profile(
    g: nx.DiGraph, events: list[dict[str, Any]], hw: Hardware | str, precision: str = "fp32"
) -> ProfileReport:
    """Match events to nodes (module doc); annotate ``measured_s`` and return the report."""
    dev = get_device(hw)
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_name[e["name"]].append(e)
    used: dict[str, int] = defaultdict(int)
    rows = []
    spans = []
    for n in op_nodes(g):
        d = g.nodes[n]
        aten = d.get(FRONTEND_OP)
        if not aten:
            continue
        name = _aten_name(str(aten))
        k = used[name]
        if k >= len(by_name.get(name, [])):
            continue
        e = by_name[name][k]
        used[name] += 1
        t = e["dur"] * 1e-6
        d[MEASURED_S] = t
        spans.append((e["ts"], e["ts"] + e["dur"]))
        c = d[COST]
        if not c.is_numeric:
            continue
        rows.append(
            ProfileRow(
                node=n,
                event=name,
                measured_s=t,
                flops_per_s=as_float(c.flops) / t if t else None,
                bytes_per_s=as_float(c.bytes) / t if t else None,
            )
        )
    model_flops = sum(
        as_float(g.nodes[n][COST].flops_on("tensor")) for n in op_nodes(g) if g.nodes[n][COST].is_numeric
    )
    wall = (max(b for _, b in spans) - min(a for a, _ in spans)) * 1e-6 if spans else 0.0
    peak = as_float(dev.require_peak("tensor", precision))
    return ProfileReport(
        matched=len(rows),
        unmatched_events=sum(len(v) for v in by_name.values()) - len(rows),
        rows=tuple(rows),
        model_flops=model_flops,
        wall_s=wall,
        mfu=model_flops / (wall * peak) if wall else None,
    )
