"""What ``costmodel model analyze`` prints: one step's per-node roofline as a report object.

:class:`AnalysisReport` holds a :class:`~graphs.serving.analysis.node_analysis.ModelAnalysis`
(from the library, or read back from a cached analysis card), the capacity ledger at the same
point, the device's roof notes and, with ``--predict``, the step priced with measured kernels
(:class:`~graphs.serving.present.step_prediction.StepPrediction`, its per-node seconds beside the
bound); it renders ``to_text()`` (the command's table, totals, prediction and closed forms),
``to_dict()`` (its ``--json``) and ``to_html()`` (:func:`graphs.serving.present.html_views.analysis_page`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from costmodel.text import fmt_num, fmt_si, format_table

from .step_prediction import StepPrediction

__all__ = ["AnalysisReport"]


#: what the closed forms count, at any tp: the model's whole step (tp 1 terms, no collectives)
_WHOLE = "the whole model, not divided by tp"

#: the node table's cell for a node the predictor did not price (it has no kernel of its own)
UNPRICED = "not priced"


@dataclass(frozen=True)
class AnalysisReport:
    """One step of a model on a device, node by node, and everything ``model analyze`` prints.

    Attributes
    ----------
    analysis : ModelAnalysis
        The per-node roofline, totals and closed forms.
    capacity : CapacityFit
        The memory ledger at the point (:func:`graphs.serving.step.ledger_fit.capacity`).
    notes : tuple of str
        The device's roof substitutions (:func:`costmodel.hardware.fallback.roof_notes`), one line each.
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch, seq, ctx, tp : int
        The point: sequences, prompt tokens (prefill), KV length (decode), tensor-parallel degree.
    top : int
        Rows printed, the most expensive first (0: all, in graph order).
    prediction : StepPrediction, optional
        The step priced with a framework's measured kernels (``--predict``).
    config : ModelConfig, optional
        The model (the page's header and ledger need it; the text does not).
    """

    analysis: Any
    capacity: Any
    notes: tuple[str, ...]
    phase: str
    batch: int
    seq: int
    ctx: int
    tp: int
    top: int = 0
    prediction: StepPrediction | None = None
    config: Any = None

    def to_dict(self) -> dict[str, Any]:
        """What ``model analyze --json`` prints: the analysis, its ``"capacity"``, with a
        prediction its ``"prediction"``, and the ``"notes"`` the text prints under its first line.

        Returns
        -------
        dict
        """
        pred = {} if self.prediction is None else self.prediction.to_dict()
        scope = {"nodes_and_totals": self._per_device(), "closed_forms": _WHOLE}
        doc = {**self.analysis.to_dict(), "capacity": self.capacity.to_dict(), **pred, "scope": scope}
        return {**doc, "notes": [*doc.get("notes", ()), *self.notes]}

    def _per_device(self) -> str:
        """What the node table and the step's totals count: one device's share at ``tp``."""
        return "one device" if self.tp == 1 else f"one device's share at tp {self.tp}"

    def to_text(self) -> str:
        """What ``model analyze`` prints: the point, the notes, the node table (with each node's
        predicted seconds under ``--predict``), the step's totals, the prediction and the closed forms.

        Returns
        -------
        str
        """
        result, t = self.analysis, self.analysis.totals
        where = f"seq {self.seq}" if self.phase == "prefill" else f"ctx {self.ctx}"
        out = [f"{result.model} {self.phase} on {result.device}: batch {self.batch}, {where}, tp={self.tp}"]
        out += [f"  note: {note}" for note in self.notes]
        out.append(format_table(*self._table()))
        out += [
            f"\nstep ({self._per_device()}, as the table): {fmt_si(t.flops, 'FLOP')}, {fmt_si(t.dram_bytes, 'B')} DRAM, "
            f"weights read {fmt_si(t.weight_bytes_read, 'B')}, KV {t.kv_bytes_per_token:.0f} B/token",
            f"bound (sum over nodes): {fmt_num(t.sum_of_node_bounds_s * 1e3)} ms -> "
            f"{t.tokens_per_s:.1f} tokens/s"
            + (f" over the {self.tp} devices" if self.tp > 1 else "")
            + "; whole step as one roofline: "
            f"{fmt_num(t.whole_step_bound_s * 1e3)} ms ({t.whole_step_kind})",
            f"attention share of FLOPs: {100 * t.attention_flop_share:.1f}%",
        ]
        if self.prediction is not None and self.prediction.prediction is not None:
            out.append(self.prediction.brief_text())
        out.append(f"\nclosed forms ({_WHOLE}; this model's numbers bound; B, S, ctx free):")
        out += [f"  {k[:-6]:28s} = {v}" for k, v in result.closed_forms.items() if k.endswith("_bound")]
        return "\n".join(out)

    def _table(self) -> tuple[list[dict[str, Any]], tuple[tuple[str, str, str], ...]]:
        """The node table's rows and its (row key, header, format) columns."""
        result = self.analysis
        picked = sorted(result.rows, key=lambda r: -r.total_time_s)[: self.top] if self.top else result.rows
        rows = [{**r.to_dict(), "share_pct": 100 * r.share, "t_total": r.total_time_s} for r in picked]
        cols: tuple[tuple[str, str, str], ...] = (
            ("node", "node", "s"),
            ("op", "op", "s"),
            ("repeat", "x", ".0f"),
            ("flops", "F (FLOP)", "si"),
            ("bytes", "D (B)", "si"),
            ("intensity", "I (FLOP/B)", ".2f"),
            ("kind", "bound", "s"),
            ("t_total", "T x repeat (s)", ".3e"),
            ("share_pct", "share %", ".1f"),
        )
        pred = self.prediction.prediction if self.prediction is not None else None
        if pred is None:
            return rows, cols
        for row in rows:  # a node the predictor did not price says so (never a NaN)
            nd = pred.nodes.get(row["node"])
            row["t_pred"] = f"{nd['predicted_s']:.3e}" if nd else UNPRICED
            row["t_corr"] = f"{nd['corrected_s']:.3e}" if nd else UNPRICED
        return rows, (
            *cols,
            ("t_pred", f"predicted {pred.framework} (s)", "s"),
            ("t_corr", "+ shape residuals (s)", "s"),
        )

    def to_html(self, command: str = "") -> str:
        """The ``--html`` page (:func:`graphs.serving.present.html_views.analysis_page`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from .html_views import analysis_page
        from .phase_summary import IGNORED_CAPACITY

        pred = self.prediction.prediction if self.prediction is not None else None
        fit = self.capacity  # --ignore-capacity's verdict, as the text's first line
        verdict = None if fit.fits else fit.headline() + IGNORED_CAPACITY
        return analysis_page(self.analysis, self.config, command=command, prediction=pred, verdict=verdict)
