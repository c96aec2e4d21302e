"""``fusion audit`` and ``fusion plan`` as library calls: a checked request in, a report that
renders itself out.

:func:`run_audit` audits an :class:`~graphs.serving.analysis.fusion_request.AuditRequest`'s step
(:func:`costmodel.fusion_audit.audit` of the suggested or unfused plan, with
:func:`~costmodel.fusion_audit.suggest_fusions`) into a :class:`FusionAuditReport`; :func:`run_plan`
plans a :class:`~graphs.serving.analysis.fusion_request.PlanRequest`'s step
(:func:`costmodel.fusion_plan.plan_fusions`) into a :class:`FusionPlanReport`. Each report has
``to_text()`` (what the command prints), ``to_dict()`` (its ``--json``) and ``to_html()`` (the
page: :func:`.html_studies.fusion_page`, :func:`.html_studies.report_page`).

What stays with the caller: resolving the model (or reading the Hugging Face ``config.json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from costmodel.fusion import FusionPlan, unfused_plan
from costmodel.fusion_audit import AuditReport, Suggestion, audit, suggest_fusions
from costmodel.fusion_plan import PlanResult, plan_fusions
from costmodel.hardware import Hardware, get_device
from costmodel.report import fmt_si, format_table
from costmodel.text import table_cells
from models.config import ModelConfig

from ..analysis.fusion_request import AuditRequest, FusionStep, PlanRequest

__all__ = ["FusionAuditReport", "FusionPlanReport", "run_audit", "run_plan"]


def _short(node: str) -> str:
    """A node's name without its layer path: ``layers.q_proj`` -> ``q_proj``."""
    return node.split(".")[-1]


#: the fused kernels' table (``fusion plan``'s text and page): (row key, heading, format)
_FUSED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("members", "kernel", "s"),
    ("level", "tiles in", "s"),
    ("bytes", "bytes", "si"),
    ("t", "time (s)", ".3e"),
    ("saved", "bytes saved", "si"),
    ("tsaved", "time saved (s)", ".3e"),
)


@dataclass(frozen=True)
class FusionAuditReport:
    """One ``fusion audit``: the step's graph, the plan audited, the audit and the suggestions.

    Attributes
    ----------
    request : AuditRequest
        The checked step and audit settings.
    config : ModelConfig
        The model.
    hw : Hardware
        The device.
    graph : networkx.DiGraph
        The step's graph.
    plan : FusionPlan
        The plan audited (the suggestion's, or one kernel per op).
    report : AuditReport
        The audit (:func:`costmodel.fusion_audit.audit`).
    suggestions : tuple of Suggestion
        The suggested fusions.
    """

    request: AuditRequest
    config: ModelConfig
    hw: Hardware
    graph: nx.DiGraph
    plan: FusionPlan
    report: AuditReport
    suggestions: tuple[Suggestion, ...]

    def to_dict(self) -> dict[str, Any]:
        """What ``fusion audit --json`` prints: the audit and the suggestions.

        Returns
        -------
        dict
        """
        return {
            **_step(self.config.name, self.request),
            **self.report.to_dict(),
            "suggestions": [s.to_dict() for s in self.suggestions],
        }

    @property
    def plan_words(self) -> str:
        """The plan audited, as the heading names it (``--plan``): ``the suggested plan`` or ``the
        unfused plan (one kernel per op)``."""
        plan = self.request.plan
        return f"the {plan} plan" + (" (one kernel per op)" if plan == "unfused" else "")

    def to_text(self) -> str:
        """What ``costmodel fusion audit`` prints: a heading naming the plan audited (``--plan``),
        the costliest boundaries, the suggestions, the bound before and after.

        Returns
        -------
        str
        """
        req, rep = self.request, self.report
        out = [
            f"fusion audit of {self.plan_words}: {self.config.name} {req.phase} {req.scope} on {self.hw.name}, "
            f"{req.where}",
            "\nkernel boundaries (one write + one read per consuming kernel), most expensive first:",
        ]
        rows = [
            {**b.to_dict(), "consumers": ", ".join(_short(c) for c in b.consumers), "pct": 100 * b.share}
            for b in rep.boundaries[: req.top]
        ]
        columns: Sequence[tuple[str, str, str]] = (
            ("producer", "producer", "s"),
            ("consumers", "read by", "s"),
            ("bytes", "bytes", "si"),
            ("time_s", "time (s)", ".3e"),
            ("pct", "% of layer", ".1f"),
        )
        out += [format_table(rows, columns), "\nsuggested fusions:"]
        srows = [
            {
                "pattern": s.pattern,
                "members": " + ".join(_short(m) for m in s.group.members),
                "saved": s.bytes_saved,
                "t": s.time_saved_s,
                "after": s.kind_after,
            }
            for s in self.suggestions
        ]
        scolumns: Sequence[tuple[str, str, str]] = (
            ("members", "group", "s"),
            ("pattern", "pattern", "s"),
            ("saved", "bytes saved", "si"),
            ("t", "time saved (s)", ".3e"),
            ("after", "bound after", "s"),
        )
        out.append(format_table(srows, scolumns) if srows else "  none")
        un, pl, ideal = rep.unfused, rep.plan, rep.ideal
        out.append(
            f"\n{req.scope} bound: unfused {(un.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us "
            f"({fmt_si(un.dram_bytes, 'B')}, {un.kernels:.0f} kernels)"
            + (
                f" -> plan {(pl.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us ({fmt_si(pl.dram_bytes, 'B')}, "
                f"{pl.kernels:.0f} kernels)"
                if pl is not None
                else ""
            )
            + f"; ideal {ideal.lower_s * 1e6:.2f} us ({fmt_si(ideal.dram_bytes, 'B')})"
        )
        out += [f"  ! {issue}" for issue in rep.issues]
        return "\n".join(out)

    def to_html(self, command: str = "") -> str:
        """The ``fusion audit --html`` page (:func:`graphs.serving.present.html_studies.fusion_page`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from .html_studies import fusion_page

        req = self.request
        return fusion_page(
            self.report,
            self.suggestions,
            self.config,
            command=command,
            scope=f"{req.phase} {req.scope}",
            where=req.where,
            graph=self.graph,
            plan=self.plan,
            plan_name=self.plan_words,
        )


def _step(model: str, request: FusionStep) -> dict[str, Any]:
    """The step a fusion report is of, for its JSON: the model, the phase, the scope (``layer`` or
    ``model``) and the point (batch with its prompt or KV length, tokens)."""
    at = {"seq": request.seq} if request.phase == "prefill" else {"ctx": request.ctx}
    return {"model": model, "phase": request.phase, "scope": request.scope, "batch": request.batch, **at}


def run_audit(request: AuditRequest, config: ModelConfig) -> FusionAuditReport:
    """Audit the kernel boundaries of ``request``'s step of ``config`` (module doc).

    Parameters
    ----------
    request : AuditRequest
        The checked step and audit settings.
    config : ModelConfig
        The model.

    Returns
    -------
    FusionAuditReport
    """
    hw = get_device(request.device)
    g = request.graph(config, hw)
    suggestions, plan = suggest_fusions(g, hw)
    if request.plan == "unfused":
        plan = unfused_plan(g)
    return FusionAuditReport(request, config, hw, g, plan, audit(g, hw, plan), tuple(suggestions))


@dataclass(frozen=True)
class FusionPlanReport:
    """One ``fusion plan``: the step's graph and the planner's plan; the unfused, suggested and
    ideal bounds it is compared with are computed when the text asks for them.

    Attributes
    ----------
    request : PlanRequest
        The checked step and planner settings.
    name : str
        The model's name (a Hugging Face layer's ``_name_or_path``).
    hw : Hardware
        The device.
    graph : networkx.DiGraph
        The step's graph.
    result : PlanResult
        The planner's plan (:func:`costmodel.fusion_plan.plan_fusions`).
    """

    request: PlanRequest
    name: str
    hw: Hardware
    graph: nx.DiGraph
    result: PlanResult

    def to_dict(self) -> dict[str, Any]:
        """What ``fusion plan --json`` prints: the step, the planner's result and what the text
        compares it with: the ``"unfused"`` and ``"suggested"`` plans' totals (None: no
        suggestion) and the ``"ideal"`` (:func:`costmodel.fusion_audit.audit`'s totals, as ``fusion
        audit --json`` gives them).

        Returns
        -------
        dict
        """
        un, sugg, ideal = self._baselines()
        return {
            **_step(self.name, self.request),
            **self.result.to_dict(),
            "unfused": un.to_dict(),
            "suggested": None if sugg is None else sugg.to_dict(),
            "ideal": ideal.to_dict(),
        }

    def _baselines(self) -> tuple[Any, Any, Any]:
        """The unfused plan's, the suggested plan's (None: none) and the ideal's totals."""
        g, hw = self.graph, self.hw
        unfused = audit(g, hw, unfused_plan(g))
        return unfused.unfused, audit(g, hw, suggest_fusions(g, hw)[1]).plan, unfused.ideal

    def _fused(self) -> list[dict[str, Any]]:
        """The fused kernels (groups of more than one op), most time saved first."""
        return [
            {
                "members": " + ".join(_short(m) for m in gr.members),
                "level": gr.level or "-",
                "bytes": gr.bytes,
                "t": gr.time_s,
                "saved": gr.bytes_saved,
                "tsaved": gr.time_saved_s,
            }
            for gr in sorted(self.result.groups, key=lambda r: -r.time_saved_s)
            if len(gr.members) > 1
        ]

    def to_text(self) -> str:
        """What ``costmodel fusion plan`` prints: how it was solved, the fused kernels, the
        layer's (or model's) bytes and bound unfused, suggested, planned and ideal.

        Returns
        -------
        str
        """
        req, res, hw = self.request, self.result, self.hw
        un, sugg, ideal = self._baselines()
        gap = "unknown" if res.gap is None else f"{100 * res.gap:.3g} %"
        cert = (
            f"exact ({'certified optimal' if res.optimal else f'not certified, gap {gap}'}, {res.units} units in "
            f"{res.regions} regions, {res.candidates} candidate groups, {res.solve_s:.2f} s)"
            if res.method == "exact"
            else f"heuristic (DP over a topological order + greedy merges, {res.solve_s:.2f} s)"
        )
        rows, columns = self._fused(), _FUSED_COLUMNS
        out = [
            f"fusion plan: {self.name} {req.phase} {req.scope} on {hw.name}, {req.where}",
            f"backend {res.backend!r}, objective {res.objective}: {cert}",
            "\nfused kernels, most time saved first:",
            format_table(rows, columns) if rows else "  none",
            f"\n{req.scope}: unfused {fmt_si(un.dram_bytes, 'B')}, {(un.sum_of_kernel_bounds_s or 0) * 1e6:.2f} us; "
            + (
                f"suggested {fmt_si(sugg.dram_bytes, 'B')}, {(sugg.sum_of_kernel_bounds_s or 0) * 1e6:.2f} us; "
                if sugg is not None
                else ""
            )
            + f"planner {fmt_si(res.bytes, 'B')}, {res.time_s * 1e6:.2f} us, {res.kernels:.0f} kernels; "
            f"ideal {fmt_si(ideal.dram_bytes, 'B')}",
        ]
        out += [f"  note: {note}" for note in res.notes]
        return "\n".join(out)

    def to_html(self, command: str = "") -> str:
        """A page of the plan (:func:`graphs.serving.present.html_studies.report_page`): the time
        each fused kernel saves, the printed lines, the fused kernels' table.

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from costmodel.html_figures import hbar_figure

        from .html_studies import report_page

        rows, res = self._fused(), self.result
        figure = hbar_figure(
            [r["members"] for r in rows],
            [r["tsaved"] * 1e6 for r in rows],
            [f"{r['tsaved'] * 1e6:.3g} us, {fmt_si(r['saved'], 'B')} saved" for r in rows],
            title="fused kernels: roofline time each saves over its ops unfused",
            x_title="time saved (us)",
        )
        return report_page(
            f"{self.name}: fusion plan ({self.request.phase} {self.request.scope})",
            self.to_text(),
            command=command,
            headline={
                "planner": f"{fmt_si(res.bytes, 'B')}, {res.time_s * 1e6:.2f} us, {res.kernels:.0f} kernels"
            },
            figures=[figure],
            tables=[("fused kernels", table_cells(rows, _FUSED_COLUMNS))],  # as the text prints them
        )


def run_plan(
    request: PlanRequest,
    config: ModelConfig | None = None,
    *,
    hf_config: Mapping[str, Any] | None = None,
    name: str = "",
) -> FusionPlanReport:
    """Plan the fusions of ``request``'s step of ``config`` (module doc).

    Parameters
    ----------
    request : PlanRequest
        The checked step and planner settings.
    config : ModelConfig, optional
        The model (needed unless ``request.hf_layer``).
    hf_config : mapping, optional
        The parsed Hugging Face ``config.json`` (``request.hf_layer`` only).
    name : str
        The Hugging Face model's name when its config has no ``_name_or_path`` (its path).

    Returns
    -------
    FusionPlanReport

    Raises
    ------
    CostModelError
        When the model the request needs is not given.
    """
    from costmodel.errors import CostModelError

    hw = get_device(request.device)
    if request.hf_layer:
        if hf_config is None:
            raise CostModelError("--hf-layer plans a Hugging Face layer: give its config.json (hf_config)")
        name = str(hf_config.get("_name_or_path") or name)
        g = request.hf_graph(hf_config)
    else:
        if config is None:
            raise CostModelError("fusion plan needs a model (config)")
        name, g = config.name, request.graph(config, hw)
    res = plan_fusions(
        g,
        hw,
        backend=request.backend,
        objective=request.objective,
        method=request.method,
        time_limit_s=request.time_limit,
    )
    return FusionPlanReport(request, name, hw, g, res)
