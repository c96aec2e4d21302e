"""The per-node analysis of one model step (``model analyze``), and the arithmetic that fills it.

Light on purpose (no sympy, numpy or networkx at import), as :mod:`graphs.serving.step.reports` is:
the library's compiled path (:func:`graphs.serving.analysis.classify.analyze`, which lambdifies the node
table once per compiled step) and the command line's cached path (an analysis card read back
from the persistent cache, :func:`graphs.serving.present.cards.analysis_from_card`) evaluate the same
forms and fill the same :class:`ModelAnalysis` with the same two functions below.

The node table's values at a point come in one flat sequence: the whole-step totals
(:data:`TOTALS`), then per op node its ``repeat``, FLOPs, DRAM bytes and roofline terms (one per
label, seconds). A node's time is its largest term (the roofline lower bound), its ``kind`` the
label that attains it and its ``share`` its part of the summed bounds
``sum_k repeat_k max_u t_ku``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.keys import Phase
from costmodel.node_row import NodeRow
from costmodel.results import Result

__all__ = ["TOTALS", "NodeStatics", "StepTotals", "ModelAnalysis", "rows_from_values", "analysis_from_values"]

#: whole-step quantities compiled beside the nodes (analyze's StepTotals)
TOTALS = ("tokens", "tensor_flops", "dram_bytes", "weight_bytes_read", "kv_bytes_per_token")


@dataclass(frozen=True)
class NodeStatics:
    """What does not change with the point: each op node's name, op, group, term labels and the
    terms the device has no roof for (topological order)."""

    names: tuple[str, ...]
    ops: tuple[str, ...]
    groups: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    unbounded: tuple[tuple[str, ...], ...]


def rows_from_values(t: NodeStatics, out: Sequence[float]) -> tuple[list[NodeRow], dict[str, float]]:
    """Every op node's :class:`NodeRow` and the step totals from the node table's flat values
    at one point (module doc).

    Parameters
    ----------
    t : NodeStatics
        The node table's labels and constants.
    out : sequence of float
        Its compiled function's values at one point (flat).

    Returns
    -------
    tuple of (list of NodeRow, dict of str to float)
        The rows and the step totals.

    Raises
    ------
    ValueError
        When the values do not match the labels (a stale table: an internal error).
    """
    vals = [float(v) for v in out]
    totals = dict(zip(TOTALS, vals[: len(TOTALS)], strict=True))
    parts = []
    i = len(TOTALS)
    for labels in t.labels:
        rep, flops, nbytes = vals[i : i + 3]
        terms = vals[i + 3 : i + 3 + len(labels)]
        i += 3 + len(labels)
        lower = max(terms) if terms else 0.0
        parts.append((rep, flops, nbytes, terms, lower))
    if i != len(vals):
        raise ValueError(f"node table gave {len(vals)} values, its labels account for {i}")
    total = sum(p[0] * p[4] for p in parts) or 1.0
    rows = [
        NodeRow(
            node=name,
            op=op,
            group=group,
            repeat=rep,
            flops=flops,
            bytes=nbytes,
            intensity=flops / nbytes if nbytes else float("inf"),
            kind=labels[terms.index(lower)] if terms else "none",
            time_s=lower,
            total_time_s=lower * rep,
            unbounded=unb,
            share=lower * rep / total,
        )
        for name, op, group, labels, unb, (rep, flops, nbytes, terms, lower) in zip(
            t.names, t.ops, t.groups, t.labels, t.unbounded, parts, strict=True
        )
    ]
    return rows, totals


@dataclass(frozen=True)
class StepTotals(Result):
    """Whole-step totals of a model graph on a device.

    Attributes
    ----------
    tokens : float
        Tokens of the step.
    flops, tensor_flops : float
        FLOPs on every unit, and on the matrix units.
    dram_bytes : float
        DRAM bytes moved.
    weight_bytes_read : float
        Bytes read from weights.
    kv_bytes_per_token : float
        KV-cache bytes written per token.
    attention_flop_share : float
        Attention's share of the FLOPs.
    sum_of_node_bounds_s : float
        Sum over kernels of each kernel's roofline (s).
    whole_step_bound_s : float
        The whole step as one roofline (s).
    whole_step_kind : str
        What binds the whole step (compute on a unit, memory at a level, a link).
    tokens_per_s : float
        ``tokens / sum_of_node_bounds_s``.
    """

    tokens: float
    flops: float
    tensor_flops: float
    dram_bytes: float
    weight_bytes_read: float
    kv_bytes_per_token: float
    attention_flop_share: float
    sum_of_node_bounds_s: float  #: sum over kernels of each kernel's roofline
    whole_step_bound_s: float  #: the whole step as one roofline
    whole_step_kind: str
    tokens_per_s: float


@dataclass(frozen=True)
class ModelAnalysis(Result):
    """Per-node roofline of one step of a model on a device, with totals and closed forms.

    ``closed_forms`` are sympy expressions from the library, their printed text when read back
    from a cached card; :meth:`to_dict` gives the printed text either way (and the LaTeX of the
    ``*_bound`` forms), so both paths print and serialise alike.

    Attributes
    ----------
    model, device : str
        What was run, by name.
    phase : Phase
        ``decode`` or ``prefill``.
    batch : int
        Sequences in the step.
    seq : int or None
        Prompt tokens per sequence (prefill).
    ctx : int or None
        Cached tokens per sequence (decode).
    rows : tuple of NodeRow
        One per op node, topological order: FLOPs, bytes, intensity, each term's time (s), the
        bound and its kind.
    totals : StepTotals
        The whole step.
    closed_forms : dict
        The phase's closed forms (:func:`graphs.serving.step.totals.closed_forms`).
    closed_forms_latex : dict of str to str
        LaTeX of the ``*_bound`` forms.
    tp : int
        Tensor-parallel degree (the rows are one device's share).
    """

    model: str
    device: str
    phase: Phase
    batch: int
    seq: int | None
    ctx: int | None
    rows: tuple[NodeRow, ...]
    totals: StepTotals
    closed_forms: dict[str, Any]
    closed_forms_latex: dict[str, str] = dataclasses.field(default_factory=dict)
    tp: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "closed_forms": {k: str(v) for k, v in self.closed_forms.items()}}


def analysis_from_values(
    t: NodeStatics,
    out: Sequence[float],
    step: dict[str, Any],
    *,
    model: str,
    device: str,
    phase: Phase,
    batch: int,
    seq: int,
    ctx: int,
    tp: int,
    closed_forms: dict[str, Any],
    closed_forms_latex: dict[str, str],
) -> ModelAnalysis:
    """The :class:`ModelAnalysis` from the node table's values (:func:`rows_from_values`) and the
    step's fields at the same point (``flops``, ``attention_flops``, ``optimistic_step_s`` and
    ``terms_s``, as :meth:`graphs.serving.step.compiled.CompiledStep.point` gives them).

    Parameters
    ----------
    t : NodeStatics
        The node table's labels and constants.
    out : sequence of float
        Its values at the point.
    step : dict
        The step's fields at the same point (``flops``, ``attention_flops``,
        ``optimistic_step_s``, ``terms_s``).
    model : str
        The model's name.
    device : str
        The device's name.
    phase : Phase
        ``decode`` or ``prefill``.
    batch : int
        Sequences.
    seq : int
        Prompt tokens (prefill).
    ctx : int
        Cached tokens (decode).
    tp : int
        Tensor-parallel degree.
    closed_forms : dict
        The phase's closed forms.
    closed_forms_latex : dict of str to str
        Their LaTeX.

    Returns
    -------
    ModelAnalysis
    """
    rows, tot = rows_from_values(t, out)
    step_s = sum(r.total_time_s for r in rows)
    terms = step["terms_s"]
    flops = float(step["flops"])
    totals = StepTotals(
        tokens=tot["tokens"],
        flops=flops,
        tensor_flops=tot["tensor_flops"],
        dram_bytes=tot["dram_bytes"],
        weight_bytes_read=tot["weight_bytes_read"],
        kv_bytes_per_token=tot["kv_bytes_per_token"],
        attention_flop_share=float(step["attention_flops"]) / flops if flops else 0.0,
        sum_of_node_bounds_s=step_s,
        whole_step_bound_s=float(step["optimistic_step_s"]),
        whole_step_kind=max(terms, key=lambda k: terms[k]) if terms else "none",
        tokens_per_s=tot["tokens"] / step_s if step_s else float("inf"),
    )
    return ModelAnalysis(
        model=model,
        device=device,
        phase=phase,
        batch=batch,
        seq=seq if phase == Phase.PREFILL else None,
        ctx=ctx if phase == Phase.DECODE else None,
        rows=tuple(rows),
        totals=totals,
        closed_forms=closed_forms,
        closed_forms_latex=closed_forms_latex,
        tp=tp,
    )
