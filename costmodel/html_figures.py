"""Figures of the HTML reports (optional extra ``html``: plotly), generic over the engine's rows.

* :func:`roofline_figure`: every op node as a point at ``(I, F / T)`` (intensity, FLOP/s of
  its bound), with the device's roofs ``min(P_u, beta * I)`` and the ridge points
  ``I* = P_u / beta`` against DRAM;
* :func:`ledger_figure`: memory-ledger terms as stacked bars against the device's capacity;
* :func:`cdf_figure`: empirical CDFs with labelled SLO lines;
* :func:`hbar_figure`: ranked horizontal bars; :func:`fusion_graph_figure`: an op graph with
  its fused groups and kernel boundaries; :func:`styled`: the pages' one look.

Each builds a ``plotly.graph_objects.Figure`` (it displays itself in a notebook); plotly is
imported only here, on the first figure (:func:`costmodel.html.require_plotly`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .html import plain, require_plotly
from .text import fmt_si, fmt_time

if TYPE_CHECKING:
    import networkx as nx

    from .fusion import FusionPlan
    from .fusion_audit import Boundary
    from .graph import NodeRow
    from .hardware import Hardware

__all__ = [
    "styled",
    "roofline_figure",
    "ledger_figure",
    "hbar_figure",
    "fusion_graph_figure",
    "cdf_figure",
]


def styled(fig: Any, title: str, x_title: str, y_title: str, *, height: int = 460, **kw: Any) -> Any:
    """``fig`` with the pages' one look: title, axis titles (plain text, drawn as written:
    :func:`costmodel.html.plain`), white template, ``height`` px."""
    fig.update_layout(
        title=plain(title),
        xaxis_title=plain(x_title),
        yaxis_title=plain(y_title),
        template="plotly_white",
        height=height,
        **kw,
    )
    return fig


def roofline_figure(
    rows: Sequence[NodeRow],
    hw: Hardware,
    *,
    details: Mapping[str, str] | None = None,
    show_precisions: Sequence[str] = ("bf16", "fp32"),
    title: str = "",
) -> Any:
    """Every op node with FLOPs as a point at intensity ``I = F / D`` (FLOP/B) and attained rate
    ``F / T`` (FLOP/s of its bound ``T``), under the device's roofs.

    .. math::  \\text{roof}_u(I) = \\min(P_u, \\beta_{\\mathrm{DRAM}} I), \\qquad I^*_u = P_u / \\beta_{\\mathrm{DRAM}}

    Hover: node, op, ``details[node]`` (e.g. its shapes), FLOPs, bytes, intensity, bound kind,
    time per instance and over its repeats, share of the step. Roofs whose precision is in
    ``show_precisions`` are drawn (the others one click away in the legend); each drawn roof's
    ridge point is marked. Nodes without FLOPs (gathers) have no point on log axes, and nodes
    bound by a link (collectives: their bytes cross the interconnect, not DRAM) have none
    against the DRAM roofs; the figure's title counts both (the page lists them in the node
    table).
    """
    go = require_plotly()
    from .cost import as_float
    from .roofline import LINK_PREFIX

    details = details or {}
    links = {r.node for r in rows if r.kind.startswith(LINK_PREFIX)}
    pts = [r for r in rows if r.flops > 0 and r.bytes > 0 and r.time_s > 0 and r.node not in links]
    bw = as_float(hw.bandwidth())
    fig = go.Figure()
    by_kind: dict[str, list[NodeRow]] = {}
    for r in pts:
        by_kind.setdefault(r.kind, []).append(r)
    # every trace its own colour: left to plotly's 10-colour cycle (the ridge markers take
    # places in it too) the drawn roofs tensor bf16 and vector fp32 came out the same colour
    node_colours, roof_colours = _ROOFLINE_COLOURS
    for i, (kind, rs) in enumerate(by_kind.items()):
        fig.add_trace(
            go.Scatter(
                x=[r.intensity for r in rs],
                y=[r.flops / r.time_s for r in rs],
                mode="markers",
                name=f"nodes bound by {kind}",
                marker={
                    "size": [6 + 24 * math.sqrt(r.share) for r in rs],
                    "line": {"width": 0.5},
                    "color": node_colours[i % len(node_colours)],
                },
                text=[_node_hover(r, details.get(r.node, "")) for r in rs],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    xs = [r.intensity for r in pts]
    ridges = [as_float(roof.peak_flops_per_s) / bw for roof in hw.roofs]
    lo = min([*xs, *ridges, 1.0]) / 4
    hi = max([*xs, *ridges, 1.0]) * 4
    # the drawn roofs take the palette's first colours, the ones a click away the rest
    drawn_first = sorted(hw.roofs, key=lambda roof: roof.precision not in show_precisions)
    colour = {id(roof): roof_colours[i % len(roof_colours)] for i, roof in enumerate(drawn_first)}
    for roof in hw.roofs:
        peak = as_float(roof.peak_flops_per_s)
        ridge = peak / bw
        # min(peak, beta I) is two straight pieces on log-log axes: its ends and its ridge draw it
        grid = [lo, ridge, hi]
        visible = True if roof.precision in show_precisions else "legendonly"
        label = f"roof {roof.unit} {roof.precision}: {fmt_si(peak, 'FLOP/s')}, ridge {ridge:.0f} FLOP/B"
        fig.add_trace(
            go.Scatter(
                x=grid,
                y=[min(peak, bw * x) for x in grid],
                mode="lines",
                name=plain(label),
                visible=visible,
                line={"width": 1.2, "color": colour[id(roof)]},
                hovertemplate=f"{plain(label, template=True)}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[ridge],
                y=[peak],
                mode="markers",
                marker={"symbol": "diamond-open", "size": 9, "color": "black"},
                name=f"ridge {roof.unit} {roof.precision}",
                visible=visible,
                showlegend=False,
                hovertemplate=plain(
                    f"ridge point I* = {ridge:.1f} FLOP/B ({roof.unit} {roof.precision})", template=True
                )
                + "<extra></extra>",
            )
        )
    skipped = len(rows) - len(pts) - len(links)
    left = [f"{skipped} node(s) without FLOPs"] if skipped else []
    left += [f"{len(links)} link-bound collective(s)"] if links else []
    sub = f" ({' and '.join(left)} not drawn)" if left else ""
    return styled(
        fig,
        (title or f"roofline on {hw.name}") + sub,
        "arithmetic intensity (FLOP per DRAM byte)",
        "FLOP/s of the node's bound",
        xaxis_type="log",
        yaxis_type="log",
    )


#: the roofline's colours: its node groups' (plotly's own first ones) and its roofs' (a
#: 24-colour palette, none of them a node group's), each trace its own
_ROOFLINE_COLOURS = (
    ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A"),
    (
        "#2E91E5",
        "#E15F99",
        "#1CA71C",
        "#222A2A",
        "#B68100",
        "#750D86",
        "#EB663B",
        "#511CFB",
        "#00A08B",
        "#FB00D1",
        "#6C7C32",
        "#778AAE",
        "#862A16",
        "#A777F1",
        "#620042",
        "#1616A7",
        "#DA60CA",
        "#6C4516",
        "#0D2A63",
        "#AF0038",
        "#FB0D0D",
        "#DA16FF",
        "#FC0080",
        "#B2828D",
    ),
)


def _node_hover(r: NodeRow, detail: str) -> str:
    parts = [
        f"<b>{plain(r.node)}</b> ({plain(r.op)})",
        plain(detail) if detail else "",
        f"FLOPs {fmt_si(r.flops, 'FLOP')}, bytes {fmt_si(r.bytes, 'B')}, I = {r.intensity:.3g} FLOP/B",
        f"bound by {plain(r.kind)}: {fmt_time(r.time_s)} x {r.repeat:g} = {fmt_time(r.total_time_s)}",
        f"share of the step {100 * r.share:.2f}%",
    ]
    return "<br>".join(p for p in parts if p)


#: a horizontal-bar figure's margins above (its title) and below (its axis and its title), px,
#: and the height each bar is given
HBAR_TOP, HBAR_BOTTOM, HBAR_PX = 60, 70, 30


def hbar_figure(
    labels: Sequence[str],
    values: Sequence[float],
    texts: Sequence[str],
    *,
    title: str,
    x_title: str,
    hover: str = "%{y}: %{text}",
    left_margin: int = 260,
) -> Any:
    """Horizontal bars, the first label on top; ``texts`` label the bars and fill ``%{text}``.
    ``labels``, ``texts``, ``title`` and ``x_title`` are plain text (:func:`costmodel.html.plain`);
    ``hover`` is a plotly hovertemplate. A bar of length 0 has its text beside it (plotly draws
    no text inside, or "auto", on a bar with no width: prefill's KV-cache bar showed nothing)."""
    go = require_plotly()
    fig = go.Figure(
        go.Bar(
            x=list(values)[::-1],
            y=[plain(s) for s in labels][::-1],
            orientation="h",
            text=[plain(s) for s in texts][::-1],
            textposition=["outside" if v == 0 else "auto" for v in list(values)[::-1]],
            hovertemplate=f"{hover}<extra></extra>",
        )
    )
    fig.update_layout(
        title=plain(title),
        xaxis_title=plain(x_title),
        template="plotly_white",
        # the margins are set, not plotly's (100 px top, 80 bottom): with them a 3-bar figure
        # kept 40 px for its bars and dropped the middle bar's label (serve disagg's "KV transfer")
        height=HBAR_TOP + HBAR_BOTTOM + HBAR_PX * len(labels),
        margin={"l": left_margin, "t": HBAR_TOP, "b": HBAR_BOTTOM},
    )
    return fig


def fusion_graph_figure(
    g: nx.DiGraph, plan: FusionPlan, boundaries: Sequence[Boundary], *, title: str
) -> Any:
    """The op graph laid out by topological generation (left to right), each node coloured by
    its fused group; an edge that crosses groups (a kernel boundary, which touches DRAM) is drawn
    red, thicker the more DRAM time its own read costs; edges inside a group grey. An edge that
    skips a generation is routed around the nodes, in a lane above or below them, so that it
    never runs through a node it does not join.

    A boundary moves one write of its producer's tensor plus one read per consuming kernel
    (:class:`~costmodel.fusion_audit.Boundary`); an edge's hover gives its own read, the edge's
    bytes times the producer's repeat, ``D_e``, at the boundary's DRAM time per byte,
    ``t_e = D_e t_b / D_b``, beside the whole boundary's ``D_b`` and ``t_b``."""
    go = require_plotly()
    import networkx as nx

    from .cost import as_float
    from .expr import to_expr
    from .graph import BYTES, OP, REPEAT, op_nodes

    sub = g.subgraph(list(op_nodes(g)))
    pos = {
        n: (i, -j) for i, gen in enumerate(nx.topological_generations(sub)) for j, n in enumerate(sorted(gen))
    }
    bottom = min((y for _x, y in pos.values()), default=0)
    home = {m: gr.name for gr in plan.groups for m in gr.members}
    cost = {b.producer: b for b in boundaries}
    lanes = 0

    def path(u: str, v: str) -> tuple[list[float], list[float]]:
        """The edge's polyline: straight between neighbouring generations, else out into the gap
        after its producer's column, along a lane above the top row or below the bottom one, and
        down the gap before its consumer's column (no node sits in a lane or a gap)."""
        nonlocal lanes
        (x0, y0), (x1, y1) = pos[u], pos[v]
        if x1 - x0 <= 1:
            return [x0, x1], [y0, y1]
        k, lanes = lanes, lanes + 1
        lane = 0.7 + 0.35 * (k // 2) if k % 2 == 0 else bottom - 0.7 - 0.35 * (k // 2)
        d = 0.05 * (k % 5) - 0.1  # neighbouring edges' corridors apart
        xa, xb = x0 + 0.5 + d, x1 - 0.5 - d
        s = 0.25 if lane > 0 else -0.25  # a slant off the row: not along a neighbour's straight edge
        return [x0, xa, xa, xb, xb, x1], [y0, y0 + s, lane, lane, y1 + s, y1]

    def read(u: str, v: str, b: Boundary) -> tuple[float, float]:
        """The edge's own read (bytes) and its DRAM time at the boundary's time per byte."""
        rep = as_float(to_expr(sub.nodes[u].get(REPEAT, 1), field=f"{u} repeat"))
        nbytes = as_float(to_expr(sub.edges[u, v].get(BYTES, 0), field=f"edge {u}->{v} bytes")) * rep
        return nbytes, (b.time_s * nbytes / b.bytes if b.bytes else 0.0)

    crossing = [(u, v) for u, v in sub.edges if home.get(u, u) != home.get(v, v)]
    reads = {(u, v): read(u, v, cost[u]) for u, v in crossing if u in cost}
    worst = max((t for _b, t in reads.values()), default=0.0) or 1.0
    fig = go.Figure()
    inside_x: list[float | None] = []
    inside_y: list[float | None] = []
    for u, v in sub.edges:
        xs, ys = path(u, v)
        if home.get(u, u) == home.get(v, v):
            inside_x += [*xs, None]
            inside_y += [*ys, None]
            continue
        b = cost.get(u)
        own, t = reads.get((u, v), (0.0, 0.0))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": "crimson", "width": 1 + 7 * t / worst},
                showlegend=False,
                hovertemplate=(
                    f"boundary {plain(u, template=True)} -> {plain(v, template=True)}"
                    + (
                        f": this read {fmt_si(own, 'B')}, {fmt_time(t)} of DRAM time; the whole boundary "
                        f"(one write + reads by {len(b.consumers)} kernel(s)) {fmt_si(b.bytes, 'B')}, "
                        f"{fmt_time(b.time_s)}"
                        if b
                        else ""
                    )
                    + "<extra></extra>"
                ),
            )
        )
    fig.add_trace(
        go.Scatter(
            x=inside_x, y=inside_y, mode="lines", line={"color": "#aaa", "width": 1}, name="inside a group"
        )
    )
    by_group: dict[str, list[str]] = {}
    for n in sub.nodes:
        by_group.setdefault(home.get(n, n), []).append(n)
    for group, nodes in by_group.items():
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in nodes],
                y=[pos[n][1] for n in nodes],
                mode="markers+text",
                marker={"size": 14, **({} if len(nodes) > 1 else {"color": "#999"})},
                text=[plain(n.split(".")[-1]) for n in nodes],
                textposition="top center",
                textfont={"size": 9},
                name=plain(group) if len(nodes) > 1 else "unfused",
                legendgroup=group if len(nodes) > 1 else "unfused",
                showlegend=len(nodes) > 1,
                customdata=[
                    f"{plain(n)} ({plain(sub.nodes[n].get(OP))}), group {plain(group)}" for n in nodes
                ],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return styled(fig, title, "", "", height=520)


#: the ledger's stacked terms, bottom to top
LEDGER_TERMS = ("weights", "kv_cache", "activations", "overhead")


def ledger_figure(bars: Mapping[str, Mapping[str, float]], capacity_bytes: float, *, title: str = "") -> Any:
    """Each bar: one ledger (``weights``, ``kv_cache``, ``activations``, ``overhead``, bytes)
    stacked in GiB (``2**30`` B), against the device capacity drawn as a line."""
    go = require_plotly()
    from .ledger_solve import GIB

    names = [plain(n) for n in bars]
    fig = go.Figure()
    for term in LEDGER_TERMS:
        vals = [bars[n].get(term, 0.0) / GIB for n in bars]
        fig.add_trace(
            go.Bar(x=names, y=vals, name=term, hovertemplate=f"{term} %{{y:.2f}} GiB<extra></extra>")
        )
    fig.add_hline(
        y=capacity_bytes / GIB,
        line_dash="dash",
        annotation_text=f"device memory {capacity_bytes / GIB:.2f} GiB",
        annotation_position="top left",
    )
    return styled(fig, title or "capacity ledger", "", "GiB", barmode="stack")


#: most points a CDF trace draws: beyond it the curve is drawn through evenly spaced ranks (every
#: 1/MAX_CDF_POINTS of the requests), each point still an exact ``(v_(i), i/n)`` of the data
MAX_CDF_POINTS = 1000


def cdf_points(values: Sequence[float], limit: int = MAX_CDF_POINTS) -> tuple[Any, Any, int]:
    """The points of an empirical CDF ``F(x) = #{v <= x} / n`` over the finite positive values:
    ``(x, F, n)`` as numpy arrays, the sorted values at ranks ``i`` and ``F = i / n``; with more than
    ``limit`` values only ``limit`` ranks evenly spread from the first to the last (both kept), so a
    page's size does not grow with the number of requests.

    >>> x, f, n = cdf_points([3.0, 1.0, 2.0, float("nan")])
    >>> x.tolist(), f.tolist(), n
    ([1.0, 2.0, 3.0], [0.3333333333333333, 0.6666666666666666, 1.0], 3)
    >>> x, f, n = cdf_points(range(1, 10001), limit=5)
    >>> x.tolist(), f.tolist()
    ([1.0, 2501.0, 5000.0, 7500.0, 10000.0], [0.0001, 0.2501, 0.5, 0.75, 1.0])
    """
    import numpy as np

    v = np.asarray(list(values), dtype=float)
    v = np.sort(v[np.isfinite(v) & (v > 0)])
    n = v.size
    ranks = np.arange(1, n + 1) if n <= limit else np.unique(np.linspace(1, n, limit).round().astype(int))
    return v[ranks - 1] if n else v, ranks / n if n else v, n


def cdf_figure(
    series: Mapping[str, Sequence[float]],
    slos: Mapping[str, float | None] | None = None,
    *,
    title: str = "",
    x_title: str = "seconds",
) -> Any:
    """Empirical CDFs ``F(x) = #{v <= x} / n`` of each series (finite values only, at most
    :data:`MAX_CDF_POINTS` exact points each: :func:`cdf_points`), log x axis, with a labelled
    vertical line per SLO given (``slos[name]``, same unit)."""
    go = require_plotly()
    fig = go.Figure()
    for name, values in series.items():
        x, y, n = cdf_points(values)
        fig.add_trace(
            go.Scatter(
                x=x.astype("float32"),  # 7 significant digits: typed arrays half the size
                y=y.astype("float32"),
                mode="lines",
                name=plain(f"{name} ({n:,} requests)"),
                hovertemplate=f"{plain(name, template=True)} %{{x:.4g}} s: %{{y:.1%}} of requests<extra></extra>",
            )
        )
    for name, slo in (slos or {}).items():
        if slo is not None:  # a trace, not a shape: shapes on log axes take log10 positions
            label = f"{name} SLO {slo:g} s"
            fig.add_trace(
                go.Scatter(
                    x=[slo, slo],
                    y=[0, 1.04],
                    mode="lines+text",
                    text=["", plain(label)],
                    textposition="top left",
                    line={"dash": "dot", "color": "gray"},
                    name=plain(label),
                    hovertemplate=f"{plain(label, template=True)}<extra></extra>",
                )
            )
    return styled(fig, title or "latency CDFs", x_title, "fraction of requests", xaxis_type="log")
