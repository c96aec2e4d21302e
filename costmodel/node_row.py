"""One op node's roofline row: the report :func:`costmodel.graph.classify_graph` and the serving
analyses (:mod:`graphs.serving.analysis.classify`, the cached analysis card) give per node.

Light on purpose (no sympy or networkx): a report read back from the persistent cache builds its
rows without importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from .results import Result

__all__ = ["NodeRow"]


@dataclass(frozen=True)
class NodeRow(Result):
    """One op node's roofline on a device: per instance and over its ``repeat`` copies."""

    node: str
    op: str
    group: str
    repeat: float
    flops: float  #: per instance
    bytes: float  #: DRAM bytes per instance
    intensity: float  #: FLOP per DRAM byte (inf for a node that moves no bytes)
    kind: str  #: the binding unit, memory level or link; "none" for a free node
    time_s: float  #: lower bound per instance
    total_time_s: float  #: ``time_s x repeat``
    unbounded: tuple[str, ...]  #: terms the device has no roof for
    share: float = 0.0  #: fraction of the graph's summed lower bound
