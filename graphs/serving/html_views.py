"""Interactive HTML pages of the serving analyses (optional extra ``html``: plotly).

Each page function takes the report objects a command already computed and returns one
self-contained page (:func:`costmodel.html.page_html`); no number is computed a second way:

* :func:`phase_page` (``decode``, ``prefill``): the headline as the command prints it, the
  step-time breakdown (weights, KV, compute per unit, collectives; the calibrated prediction
  beside the bound when there is one), the roofline of every node (:func:`node_rows` of the
  same compiled step the report comes from) and the capacity ledger at this batch and at the
  largest batch that fits (:func:`capacity`);
* :func:`analysis_page` (``model analyze``): the same from a :class:`ModelAnalysis`;
* :func:`simulation_page` (``simulate``): TTFT/TPOT/E2E CDFs with the SLOs, the timeline of
  batch, queue and KV use, and the rate probes of ``--max-rate``;
* :func:`search_page` (``search``): the Pareto frontier per context, winners named, each
  point's plan on hover;
* :func:`fusion_page` (``fusion audit``): kernel boundaries ranked by DRAM time, fused groups
  before and after, the suggestions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from costmodel.cost import UNITS
from costmodel.html import (
    Section,
    cdf_figure,
    fusion_graph_figure,
    hbar_figure,
    ledger_figure,
    page_html,
    require_plotly,
    roofline_figure,
    rows_table,
    styled,
)
from costmodel.keys import Phase
from costmodel.roofline import LINK_PREFIX
from costmodel.text import fmt_si, fmt_time

__all__ = [
    "run_header",
    "node_details",
    "phase_page",
    "analysis_page",
    "simulation_page",
    "search_page",
    "fusion_page",
]

#: most points a timeline trace draws (a longer run is strided; the note says so)
MAX_TIMELINE_POINTS = 4000


def run_header(
    command: str, config: Any = None, device: str | None = None, tp: int | None = None
) -> dict[str, str]:
    """What was run: the command line, model, device, tp, dtypes, engine version."""
    from costmodel import __version__

    head = {"command": command}
    if config is not None:
        head["model"] = config.name
        head["dtypes"] = f"weights {config.weight_dtype}, KV {config.cache_dtype}, matmul {_matmul(config)}"
    if device is not None:
        head["device"] = device
    if tp is not None:
        head["tp"] = str(tp)
    head["engine"] = f"costmodel {__version__}"
    return head


def node_details(compiled: Any, point: Sequence[float]) -> dict[str, str]:
    """Each op node's input tensors with their shapes at ``point`` (the compiled step's dims)."""
    import sympy

    from costmodel.graph import TENSOR, op_nodes

    g = compiled.graph
    subs = dict(zip(compiled.forms.symbols, point, strict=True))
    out = {}
    for n in op_nodes(g):
        shapes = []
        for u in g.predecessors(n):
            t = g.edges[u, n].get(TENSOR)
            if t is not None:
                dims = ", ".join(str(sympy.sympify(d).subs(subs)) for d in t.shape)
                shapes.append(f"{u.split('.')[-1]}[{dims}] {t.dtype.name}")
        out[n] = "inputs: " + "; ".join(shapes) if shapes else ""
    return out


def _roofline_section(rows: Sequence[Any], hw: Any, details: Mapping[str, str], precision: str) -> Section:
    top = sorted(rows, key=lambda r: -r.total_time_s)
    table = [
        {
            "node": r.node,
            "op": r.op,
            "x": r.repeat,
            "FLOPs": fmt_si(r.flops, "FLOP"),
            "bytes": fmt_si(r.bytes, "B"),
            "I (FLOP/B)": round(r.intensity, 3) if math.isfinite(r.intensity) else "inf",
            "bound": r.kind,
            "T x repeat": fmt_time(r.total_time_s),
            "share %": round(100 * r.share, 2),
        }
        for r in top
    ]
    return Section(
        "roofline of every node",
        (roofline_figure(rows, hw, details=details, show_precisions=(precision, "fp32")), rows_table(table)),
        f"The {len(rows)} nodes' bounds sum to {fmt_time(sum(r.total_time_s for r in rows))}. Point size "
        "grows with the node's share of the step; hover a point for its op, shapes, FLOPs, bytes, bound "
        "and time. Nodes without FLOPs (gathers, collectives) appear in the table only.",
    )


def _breakdown_section(report: Any, prediction: Any = None) -> Section:
    go = require_plotly()
    bars: dict[str, float] = {
        "weights (DRAM read)": report.weight_read_s,
        "KV cache (DRAM read)": report.kv_read_s,
    }
    for k, v in report.terms_s.items():
        if k in UNITS:
            bars[f"compute: {k}"] = v
        elif k.startswith(LINK_PREFIX):
            bars[f"collectives: {k[len(LINK_PREFIX) :]}"] = v
    bars["whole step as one roofline"] = report.optimistic_step_s
    bars["step bound (sum of kernel bounds)"] = report.step_s
    if prediction is not None:
        bars[f"calibrated prediction ({prediction.framework})"] = prediction.predicted_s
        if prediction.corrected_s is not None:
            bars["prediction with shape residuals"] = prediction.corrected_s
    fig = hbar_figure(
        list(bars),
        [v * 1e3 for v in bars.values()],
        [fmt_time(v) for v in bars.values()],
        title="step time: what it moves, computes and bounds",
        x_title="ms",
    )
    parts: list[Any] = [fig]
    note = (
        "Weights, KV and compute are whole-step terms (each alone over its roof); the step bound sums "
        "each kernel's roofline, the whole-step roofline assumes perfect overlap across kernels."
    )
    if prediction is not None:
        fams = list(prediction.by_family)
        fam_fig = go.Figure()
        for key, label in (
            ("bound_s", "bound"),
            ("predicted_s", "predicted"),
            ("corrected_s", "with shape residuals"),
        ):
            fam_fig.add_trace(
                go.Bar(
                    x=fams,
                    y=[prediction.by_family[f].get(key, math.nan) * 1e3 for f in fams],
                    name=label,
                    hovertemplate=f"%{{x}} {label} %{{y:.4g}} ms<extra></extra>",
                )
            )
        styled(
            fam_fig,
            f"bound vs calibrated prediction per kernel family ({prediction.calibrated_from})",
            "",
            "ms",
            barmode="group",
        )
        parts.append(fam_fig)
        uncovered = prediction.by_family.get("unmeasured ops (bound)", {}).get("bound_s", 0.0)
        covered = 1 - uncovered / prediction.bound_s if prediction.bound_s else 0.0
        note += (
            f" The prediction covers {100 * covered:.1f}% of the bound with measured kernel families; "
            "the rest (unmeasured ops) keeps its bound."
        )
    return Section("step-time breakdown", tuple(parts), note)


def _ledger_section(
    config: Any, device: str, *, batch: int, ctx: int, phase: str, seq: int | None, tp: int
) -> Section:
    from .ledger_fit import capacity

    cap = capacity(config, device, batch=batch, ctx=ctx, phase=phase, seq=seq, tp=tp)
    bars = {f"batch {batch} (this run)": cap.terms}
    fit = cap.max_batch
    if fit.value > 0:
        bars[f"batch {fit.value} (largest that fits)"] = fit.at_value
        bars[f"batch {fit.value + 1} (overflows on {fit.overflowing_term})"] = fit.at_next
    where = f"ctx {ctx}" if phase == Phase.DECODE else f"seq {seq}"
    title = f"capacity ledger at {where} on {cap.device} (tp={tp}): largest batch that fits = {fit.value}"
    return Section(
        "capacity ledger",
        (ledger_figure(bars, cap.capacity_bytes, title=title),),
        "Weights, KV cache, live activations and overhead (none by default; see costmodel ledger "
        "--overhead) stacked against the device's memory, as costmodel ledger computes them.",
    )


def phase_page(
    report: Any,
    config: Any,
    *,
    command: str,
    ctx: int | None = None,
    seq: int | None = None,
    limits: Any = None,
    prediction: Any = None,
) -> str:
    """A ``decode`` (``ctx``) or ``prefill`` (``seq``) page from its :class:`PhaseReport`."""
    from costmodel.hardware import get_device

    from .classify import node_rows
    from .compiled import compiled_step

    hw = get_device(report.device)
    decode = report.phase == Phase.DECODE
    dim = ctx if decode else seq
    if dim is None:
        from costmodel.errors import CostModelError

        raise CostModelError(f"a {report.phase} page needs {'ctx' if decode else 'seq'}, got None")
    point = (report.batch, dim)
    c = compiled_step(config, hw, report.phase, tp=report.tp)
    rows, _totals = node_rows(c, *point)
    compute = max((v for k, v in report.terms_s.items() if k in UNITS), default=0.0)
    if decode:
        title = f"{report.model} decode on {report.device}: batch {report.batch}, ctx {ctx}, tp={report.tp}"
        headline = {
            "TPOT bound": fmt_time(report.step_s),
            "tokens/s per user": f"{report.tokens_per_s_per_user:.1f}",
            "tokens/s per device": f"{report.tokens_per_s_per_device:.1f}",
            "weight read": fmt_time(report.weight_read_s),
            "KV read": fmt_time(report.kv_read_s),
            "compute": fmt_time(compute),
        }
        if limits is not None:
            headline["throughput ceiling"] = f"{limits.throughput_ceiling_tokens_per_s or 0.0:,.0f} tokens/s"
    else:
        title = (
            f"{report.model} prefill on {report.device}: batch {report.batch} x {seq} tokens, tp={report.tp}"
        )
        headline = {
            "TTFT lower bound": fmt_time(report.step_s),
            "whole prompt as one roofline": fmt_time(report.optimistic_step_s),
            "throughput": f"{report.tokens_per_s:,.0f} tokens/s",
            "attention share of FLOPs": f"{100 * report.attention_flop_share:.1f}%",
        }
        if getattr(report, "chunk", None):
            headline["chunks"] = f"{report.chunks} of {report.chunk} tokens (the nodes show the whole prompt)"
    if report.energy_per_token_j is not None:
        headline["energy"] = f"{report.energy_per_token_j:.4f} J/token (TDP x time)"
    if prediction is not None:
        headline["calibrated prediction"] = (
            f"{prediction.predicted_s * 1e3:.3f} ms ({prediction.predicted_s / prediction.bound_s:.2f}x the bound)"
        )
    sections = [
        _breakdown_section(report, prediction),
        *_step_sections(rows, hw, node_details(c, point), config, report.phase, report.batch, dim, report.tp),
    ]
    return page_html(title, run_header(command, config, report.device, report.tp), headline, sections)


def _step_sections(
    rows: Sequence[Any],
    hw: Any,
    details: Mapping[str, str],
    config: Any,
    phase: str,
    batch: int,
    dim: int,
    tp: int,
) -> list[Section]:
    """The roofline of the step's nodes and the ledger at its point (``dim``: ctx or seq)."""
    seq = dim if phase == Phase.PREFILL else None
    return [
        _roofline_section(rows, hw, details, _roof_precision(_matmul(config))),
        _ledger_section(config, hw.name, batch=batch, ctx=dim, phase=phase, seq=seq, tp=tp),
    ]


def _matmul(config: Any) -> str:
    """The matmul operand dtype: ``matmul_dtype``, else the activations' (the tensor roof used)."""
    return config.matmul_dtype or config.activation_dtype


def _roof_precision(dtype: str) -> str:
    from costmodel.dtypes import get_dtype

    return get_dtype(dtype).roof


def analysis_page(analysis: Any, config: Any, *, command: str, prediction: Any = None) -> str:
    """A ``model analyze`` page from its :class:`ModelAnalysis` (and per-node predictions)."""
    from costmodel.hardware import get_device

    from .compiled import compiled_step

    hw = get_device(analysis.device)
    decode = analysis.phase == Phase.DECODE
    dim = analysis.ctx if decode else analysis.seq
    assert dim is not None, "analyze sets ctx for decode and seq for prefill"
    point = (analysis.batch, dim)
    details = node_details(compiled_step(config, hw, analysis.phase), point)
    if prediction is not None:
        for n, p in prediction.nodes.items():
            if n in details:
                details[n] += f"; predicted {fmt_time(p['predicted_s'])} ({prediction.framework})"
    t = analysis.totals
    where = f"ctx {analysis.ctx}" if decode else f"seq {analysis.seq}"
    headline = {
        "bound (sum over nodes)": f"{t.sum_of_node_bounds_s * 1e3:.3f} ms",
        "tokens/s": f"{t.tokens_per_s:.1f}",
        "whole step as one roofline": f"{t.whole_step_bound_s * 1e3:.3f} ms ({t.whole_step_kind})",
        "step traffic": f"{fmt_si(t.flops, 'FLOP')}, {fmt_si(t.dram_bytes, 'B')} DRAM",
        "attention share of FLOPs": f"{100 * t.attention_flop_share:.1f}%",
    }
    if prediction is not None:
        headline["calibrated prediction"] = f"{prediction.predicted_s * 1e3:.3f} ms"
    forms = rows_table(
        [
            {"quantity": k[:-6], "closed form": str(v)}
            for k, v in analysis.closed_forms.items()
            if k.endswith("_bound")
        ]
    )
    sections = [
        *_step_sections(analysis.rows, hw, details, config, analysis.phase, analysis.batch, dim, 1),
        Section("closed forms (B, S, ctx free)", (forms,)),
    ]
    title = f"{analysis.model} {analysis.phase} on {analysis.device}: batch {analysis.batch}, {where}"
    return page_html(title, run_header(command, config, analysis.device, 1), headline, sections)


def _stride(n: int) -> int:
    return max(1, math.ceil(n / MAX_TIMELINE_POINTS))


def _simulation_sections(res: Any, slo_ttft: float | None, slo_tpot: float | None) -> list[Section]:
    go = require_plotly()
    from plotly.subplots import make_subplots

    pr = res.per_request
    cdfs = (
        cdf_figure({"TTFT": pr["ttft_s"]}, {"TTFT": slo_ttft}, title="time to first token"),
        cdf_figure({"TPOT": pr["tpot_s"]}, {"TPOT": slo_tpot}, title="time per output token"),
        cdf_figure({"end to end": pr["e2e_s"]}, title="end-to-end latency"),
    )
    summary = rows_table(
        [
            {
                "": name,
                "mean": f"{s.mean:.4f}",
                "P50": f"{s.p50:.4f}",
                "P90": f"{s.p90:.4f}",
                "P99": f"{s.p99:.4f}",
            }
            for name, s in (("TTFT s", res.ttft), ("TPOT s", res.tpot), ("E2E s", res.e2e))
        ]
    )
    tl = res.timeline
    k = _stride(len(tl["t"]))
    t = tl["t"][::k].tolist()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for key in ("running", "waiting", "batch"):
        fig.add_trace(
            go.Scatter(x=t, y=tl[key][::k].tolist(), mode="lines", name=key, line={"width": 1}), row=1, col=1
        )
    fig.add_trace(
        go.Scatter(
            x=t,
            y=(100 * tl["kv_used"][::k]).tolist(),
            mode="lines",
            name="KV blocks used %",
            line={"width": 1},
        ),
        row=2,
        col=1,
    )
    fig.update_yaxes(title_text="sequences", row=1, col=1)
    fig.update_yaxes(title_text="KV blocks used (%)", row=2, col=1)
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    styled(fig, "timeline: batch, queue and KV use per iteration", "", "", height=560)
    note = f"one iteration in {k} of {len(tl['t']):,} drawn" if k > 1 else f"{len(tl['t']):,} iterations"
    return [
        Section("latency distributions", (summary, *cdfs)),
        Section("timeline", (fig,), note),
    ]


def simulation_page(
    result: Any, config: Any, *, command: str, slo_ttft: float | None = None, slo_tpot: float | None = None
) -> str:
    """A ``simulate`` page from a :class:`SimResult`, or from a :class:`MaxRate` (its probes
    and the simulation at the rate found)."""
    go = require_plotly()
    sections: list[Section] = []
    headline: dict[str, str] = {}
    sim = result
    if hasattr(result, "probes"):  # --max-rate
        sim = result.at_rate
        pct = result.percentile
        probes = sorted(result.probes)
        fig = go.Figure()
        for i, (name, slo) in enumerate(
            ((f"P{pct:g} TTFT", result.slo_ttft), (f"P{pct:g} TPOT", result.slo_tpot))
        ):
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in probes],
                    y=[p[2 + i] for p in probes],
                    mode="lines+markers",
                    name=name,
                    marker={"symbol": ["circle" if p[1] else "x" for p in probes], "size": 9},
                    text=["meets" if p[1] else "misses" for p in probes],
                    hovertemplate=f"%{{x:.3f}} req/s: {name} %{{y:.4g}} s (%{{text}})<extra></extra>",
                )
            )
            if slo is not None:  # a trace, not a shape: shapes on log axes take log10 positions
                label = f"{name.split()[-1]} SLO {slo:g} s"
                fig.add_trace(
                    go.Scatter(
                        x=[probes[0][0], probes[-1][0]],
                        y=[slo, slo],
                        mode="lines+text",
                        text=[label, ""],
                        textposition="top right",
                        line={"dash": "dot", "color": "gray"},
                        name=label,
                    )
                )
        styled(
            fig,
            "rate sweep: probes of --max-rate (circles meet the SLOs, crosses miss)",
            "requests/s",
            "seconds",
            yaxis_type="log",
        )
        headline["max rate"] = (
            f"{result.rate:.3f} requests/s = {result.rate_per_device:.3f} requests/s per device"
            if result.rate is not None
            else "no probed rate meets the SLOs"
        )
        sections.append(Section("rate sweep", (fig,)))
        slo_ttft, slo_tpot = result.slo_ttft, result.slo_tpot
    if sim is not None:
        headline.update(
            {
                "requests": f"{sim.requests:,} over {sim.duration_s:.1f} s",
                "TTFT P99": f"{sim.ttft.p99:.4f} s",
                "TPOT P99": f"{sim.tpot.p99:.4f} s",
                "E2E P99": f"{sim.e2e.p99:.4f} s",
                "throughput": f"{sim.requests_per_s:.2f} requests/s, {sim.output_tokens_per_s:,.0f} output tokens/s",
                "mean batch": f"{sim.mean_batch:.1f}",
                "KV blocks used on average": f"{100 * sim.mean_kv_utilisation:.0f}%",
            }
        )
        if sim.goodput_requests_per_s is not None:
            headline["goodput"] = (
                f"{sim.goodput_requests_per_s:.2f} requests/s ({100 * (sim.slo_attainment or 0):.1f}% meet the SLOs)"
            )
        sections.extend(_simulation_sections(sim, slo_ttft, slo_tpot))
        sections.append(Section("the run", (rows_table([sim.topology.to_dict()]),)))
    device = sim.device if sim is not None else "-"
    tp = sim.topology.tp if sim is not None else None
    rate = f" at {sim.rate:.4g} requests/s" if sim is not None and sim.rate else ""
    title = f"{config.name} serving simulation on {device}{rate}"
    return page_html(title, run_header(command, config, device, tp), headline, sections)


#: frontier columns shown on hover
_POINT_KEYS = (
    "plan",
    "batch",
    "ctx",
    "ttft_s",
    "tpot_s",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "energy_per_token_j",
)


def search_page(result: Any, *, command: str) -> str:
    """A ``search`` page from a :class:`SearchResult`: its frontier per context, winners named."""
    go = require_plotly()
    fig = go.Figure()
    by_ctx: dict[Any, list[dict[str, Any]]] = {}
    for r in result.frontier:
        by_ctx.setdefault(r["ctx"], []).append(r)
    for ctx, pts in sorted(by_ctx.items()):
        fig.add_trace(
            go.Scatter(
                x=[p["tokens_per_s_per_device"] for p in pts],
                y=[p["tokens_per_s_per_user"] for p in pts],
                mode="markers",
                name=f"ctx {ctx}",
                text=["<br>".join(f"{k}: {p.get(k)}" for k in _POINT_KEYS if k in p) for p in pts],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    winners: dict[tuple[Any, ...], list[str]] = {}  # one label per point, naming every objective it wins
    for name, p in result.best.items():
        winners.setdefault((p["plan"], p["batch"], p["ctx"]), []).append(name.replace("_", " "))
    points = {(p["plan"], p["batch"], p["ctx"]): p for p in result.best.values()}
    for i, (key, names) in enumerate(winners.items()):
        p = points[key]
        fig.add_annotation(
            x=math.log10(p["tokens_per_s_per_device"]),
            y=math.log10(p["tokens_per_s_per_user"]),
            text=f"{' and '.join(names)}: {p['plan']}, batch {p['batch']}, ctx {p['ctx']}",
            showarrow=True,
            arrowhead=2,
            ay=-30 - 25 * (i % 2),
            font={"size": 10},
        )
    styled(
        fig,
        f"Pareto frontier ({' vs '.join(result.objectives)})",
        "tokens/s per device",
        "tokens/s per user",
        height=520,
        xaxis_type="log",
        yaxis_type="log",
    )
    headline = {
        "points": f"{result.points:,}; {result.valid:,} valid, {result.fits:,} fit, {result.meets_slo:,} meet the SLOs",
        "frontier": f"{len(result.frontier)} points",
    }
    for name, p in result.best.items():
        headline[name.replace("_", " ")] = f"{p['plan']}, batch {p['batch']}, ctx {p['ctx']}"
    cols = [(k, k) for k in _POINT_KEYS]
    sections = [Section("Pareto frontier", (fig, rows_table(list(result.frontier), cols)))]
    if result.beyond_domain:
        sections.append(
            Section(
                "left out",
                (rows_table([{"plan": p} for p in result.beyond_domain]),),
                "wider than the device's scale-up domain",
            )
        )
    return page_html(f"{result.model}: design-space search", run_header(command), headline, sections)


def fusion_page(
    report: Any,
    suggestions: Sequence[Any],
    config: Any,
    *,
    command: str,
    scope: str,
    where: str,
    graph: Any = None,
    plan: Any = None,
) -> str:
    """A ``fusion audit`` page from an :class:`AuditReport` and its suggestions (with the audited
    ``graph`` and ``plan``, the graph drawn with its groups and boundaries)."""
    go = require_plotly()
    bs = list(report.boundaries)[:30]
    bfig = hbar_figure(
        [f"{b.producer} -> {', '.join(c.split('.')[-1] for c in b.consumers)}" for b in bs],
        [b.time_s * 1e6 for b in bs],
        [f"{fmt_si(b.bytes, 'B')}, {100 * b.share:.3g}% of the unfused bound" for b in bs],
        title="kernel boundaries ranked by DRAM time (one write + one read per consuming kernel)",
        x_title="us",
        hover="%{y}<br>%{x:.3f} us of DRAM time, %{text}",
        left_margin=330,
    )
    groups = [g for g in report.groups if len(g.members) > 1] or list(report.groups)
    gfig = go.Figure()
    for key, label in (("time_before_s", "as separate kernels"), ("time_after_s", "fused")):
        gfig.add_trace(
            go.Bar(
                x=[g.group for g in groups],
                y=[getattr(g, key) * 1e6 for g in groups],
                name=label,
                text=[" + ".join(m.split(".")[-1] for m in g.members) for g in groups],
                textposition="none",
                hovertemplate=f"%{{x}} {label}: %{{y:.3f}} us<br>%{{text}}<extra></extra>",
            )
        )
    styled(gfig, "fused groups: bound before and after", "", "us", barmode="group")
    srows = [
        {
            "group": " + ".join(m.split(".")[-1] for m in s.group.members),
            "pattern": s.pattern,
            "bytes saved": fmt_si(s.bytes_saved, "B"),
            "time saved": fmt_time(s.time_saved_s),
            "bound after": s.kind_after,
        }
        for s in suggestions
    ]
    un, pl, ideal = report.unfused, report.plan, report.ideal
    headline = {
        "unfused": f"{(un.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us ({fmt_si(un.dram_bytes, 'B')}, {un.kernels:.0f} kernels)",
        "ideal": f"{ideal.lower_s * 1e6:.2f} us ({fmt_si(ideal.dram_bytes, 'B')})",
    }
    if pl is not None:
        headline["plan"] = (
            f"{(pl.sum_of_kernel_bounds_s or 0.0) * 1e6:.2f} us ({fmt_si(pl.dram_bytes, 'B')}, {pl.kernels:.0f} kernels)"
        )
    sections = [Section("boundaries", (bfig,))]
    if graph is not None and plan is not None:
        title = "the graph: nodes coloured by fused group, kernel boundaries in red (thicker: more DRAM time)"
        sections.append(Section("graph", (fusion_graph_figure(graph, plan, report.boundaries, title=title),)))
    sections += [
        Section("fused groups", (gfig, rows_table([g.to_dict() for g in groups]))),
        Section("suggested fusions", (rows_table(srows),)),
    ]
    if report.issues:
        sections.append(Section("plan issues", (rows_table([{"issue": str(i)} for i in report.issues]),)))
    title = f"fusion audit: {config.name} {scope} on {report.device}, {where}"
    return page_html(title, run_header(command, config, report.device), headline, sections)
