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
    "graph_layout",
    "graph_label",
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


#: the fusion graph's geometry: the page's plot width it is laid out for (the 1150 px body less
#: the figure's margins), px per generation (row), the label font (px) and the widest a character
#: of it is drawn (px: DejaVu Sans, the widest sans-serif the pages fall back to, averages 0.6 em)
GRAPH_PLOT_PX, GRAPH_ROW_PX, GRAPH_FONT_PX, GRAPH_CHAR_PX = 1110, 56, 10, 6.2
#: a label's room to its node's right, as a share of the distance to the next node in its row
GRAPH_LABEL_ROOM = 0.85
#: how far a stub runs from its node into the gap between rows (a share of the row pitch); a label
#: (``GRAPH_FONT_PX`` tall) stays within ``GRAPH_LABEL_BAND`` of its row
GRAPH_STUB, GRAPH_LABEL_BAND = 0.3, 0.15
#: the distance between neighbouring lanes (x units: one is the distance between nodes in a row)
GRAPH_LANE_PITCH = 0.22


def graph_layout(sub: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Each node's place: its topological generation is its row (the first at the top, ``y =
    -generation``), and within a row the nodes sit one unit apart, centred on 0, in the order of
    their predecessors' mean place (then by name), which keeps edges short and uncrossed.

    Parameters
    ----------
    sub : networkx.DiGraph
        The graph of op nodes (acyclic).

    Returns
    -------
    dict of str to (float, float)
        Node -> ``(x, y)``.
    """
    import networkx as nx

    pos: dict[str, tuple[float, float]] = {}
    for i, gen in enumerate(nx.topological_generations(sub)):

        def key(n: str) -> tuple[float, str]:
            xs = [pos[u][0] for u in sub.predecessors(n) if u in pos]
            return (sum(xs) / len(xs) if xs else 0.0, n)

        row = sorted(gen, key=key)
        for j, n in enumerate(row):
            pos[n] = (j - (len(row) - 1) / 2, float(-i))
    return pos


def graph_label(name: str, max_chars: int) -> str:
    """A node's label: the last part of its name (``layer.mlp.up_proj``: ``up_proj``), cut to
    ``max_chars`` with an ellipsis where longer (its hover gives the whole name).

    Parameters
    ----------
    name : str
        The node's name.
    max_chars : int
        The most characters the label's room holds.

    Returns
    -------
    str

    >>> graph_label("layer.mlp.up_proj", 12)
    'up_proj'
    >>> graph_label("layer.shared_expert_gate_proj", 12)
    'shared_expe…'
    """
    short = name.split(".")[-1]
    return short if len(short) <= max_chars else short[: max(1, max_chars - 1)] + "\u2026"


def fusion_graph_figure(
    g: nx.DiGraph, plan: FusionPlan, boundaries: Sequence[Boundary], *, title: str
) -> Any:
    """The op graph laid out top to bottom, one row per topological generation
    (:func:`graph_layout`), each node coloured by its fused group and labelled to its right; an
    edge that crosses groups (a kernel boundary, which touches DRAM) is drawn red, thicker the
    more DRAM time its own read costs; edges inside a group grey. An edge leaves its node straight
    down and enters its consumer straight from above, crossing between rows only in the gap
    between them, and one that skips a row runs down a lane left of every node: no edge runs
    through a node it does not join, or through a label (each within ``GRAPH_LABEL_BAND`` of its
    row, right of its node, and cut to the room before the next node: :func:`graph_label`).

    A boundary moves one write of its producer's tensor plus one read per consuming kernel
    (:class:`~costmodel.fusion_audit.Boundary`); an edge's hover gives its own read, the edge's
    bytes times the producer's repeat, ``D_e``, at the boundary's DRAM time per byte,
    ``t_e = D_e t_b / D_b``, beside the whole boundary's ``D_b`` and ``t_b``.

    Parameters
    ----------
    g : networkx.DiGraph
        The audited graph (its op nodes are drawn).
    plan : FusionPlan
        The plan whose groups colour the nodes.
    boundaries : sequence of Boundary
        The audit's kernel boundaries (each edge's hover and width).
    title : str
        The figure's title (plain text).

    Returns
    -------
    plotly.graph_objects.Figure
    """
    go = require_plotly()

    from .cost import as_float
    from .expr import to_expr
    from .graph import BYTES, OP, REPEAT, op_nodes

    sub = g.subgraph(list(op_nodes(g)))
    pos = graph_layout(sub)
    left = min((x for x, _y in pos.values()), default=0.0)
    right = max((x for x, _y in pos.values()), default=0.0)
    rows = 1 - min((y for _x, y in pos.values()), default=0.0)
    home = {m: gr.name for gr in plan.groups for m in gr.members}
    cost = {b.producer: b for b in boundaries}
    # each side's lanes, the lowest y each has in use (a lane is reused below it): left of every
    # node, or right of every label (the last column's labels take the unit right of it)
    lanes: dict[int, list[float]] = {-1: [], 1: []}

    def lane_x(side: int, k: int) -> float:
        return left - 0.7 - GRAPH_LANE_PITCH * k if side < 0 else right + 1.0 + GRAPH_LANE_PITCH * k

    def lane_for(side: int, top: float, bottom: float) -> float:
        """The x of the first lane on ``side`` free from ``top`` down to ``bottom``."""
        used = lanes[side]
        for k, low in enumerate(used):
            if low > top:
                used[k] = bottom
                return lane_x(side, k)
        used.append(bottom)
        return lane_x(side, len(used) - 1)

    def path(u: str, v: str) -> tuple[list[float], list[float]]:
        """The edge's polyline: down a stub out of ``u``, across the gap below its row, and down
        a stub into ``v``; an edge that skips rows crosses to a lane on its own side (of the
        middle) and runs down it."""
        (x0, y0), (x1, y1) = pos[u], pos[v]
        if y0 - y1 <= 1:
            if x0 == x1:
                return [x0, x1], [y0, y1]
            return [x0, x0, x1, x1], [y0, y0 - GRAPH_STUB, y1 + GRAPH_STUB, y1]
        ya, yb = y0 - 1 + GRAPH_STUB, y1 + 1 - GRAPH_STUB  # the lane's ends, in the gaps
        lane = lane_for(1 if x0 + x1 > 0 else -1, ya, yb)
        return (
            [x0, x0, lane, lane, x1, x1],
            [y0, y0 - GRAPH_STUB, ya, yb, y1 + GRAPH_STUB, y1],
        )

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
    for u, v in sorted(sub.edges, key=lambda e: (-pos[e[0]][1], pos[e[0]][0], -pos[e[1]][1], pos[e[1]][0])):
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
    x_lo = lane_x(-1, len(lanes[-1]) - 1) - 0.3 if lanes[-1] else left - 0.5
    x_hi = lane_x(1, len(lanes[1]) - 1) + 0.3 if lanes[1] else right + 1.0  # the last column's labels
    unit_px = GRAPH_PLOT_PX / (x_hi - x_lo)
    max_chars = max(4, int((GRAPH_LABEL_ROOM * unit_px - 10) // GRAPH_CHAR_PX))  # 10: the marker's half
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
                text=[plain(graph_label(n, max_chars)) for n in nodes],
                textposition="middle right",
                textfont={"size": GRAPH_FONT_PX},
                name=plain(group) if len(nodes) > 1 else "unfused",
                legendgroup=group if len(nodes) > 1 else "unfused",
                showlegend=len(nodes) > 1,
                customdata=[
                    f"{plain(n)} ({plain(sub.nodes[n].get(OP))}), group {plain(group)}" for n in nodes
                ],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    fig.update_xaxes(visible=False, range=[x_lo, x_hi])
    fig.update_yaxes(visible=False, range=[-(rows - 1) - 0.5, 0.5])
    top, bottom = 70, 20
    return styled(
        fig,
        title,
        "",
        "",
        height=top + bottom + round(GRAPH_ROW_PX * rows),
        margin={"l": 20, "r": 20, "t": top, "b": bottom},
        legend={"orientation": "h", "yanchor": "top", "y": -0.01, "x": 0},
    )


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
