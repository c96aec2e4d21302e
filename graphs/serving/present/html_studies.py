"""Interactive HTML pages of whole runs (optional extra ``html``: plotly), from their reports.

* :func:`simulation_page` (``simulate``): TTFT/TPOT/E2E CDFs with the SLOs, the timeline of
  batch, queue and KV use, and the rate probes of ``--max-rate``;
* :func:`search_page` (``search``): the Pareto frontier per context, winners named, each
  point's plan on hover;
* :func:`fusion_page` (``fusion audit``): kernel boundaries ranked by DRAM time, the graph with
  its fused groups, the groups before and after, the suggestions;
* :func:`report_page` (every other report: ``size``, ``fusion plan``, ``serve disagg`` ...): the
  lines the command prints and its tables, no figure.

Like :mod:`graphs.serving.present.html_views`, every number on a page is a field of the report the
command printed.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from costmodel.html import MAX_TABLE_ROWS, Section, page_html, plain, require_plotly, rows_table
from costmodel.html_figures import cdf_figure, fusion_graph_figure, hbar_figure, styled
from costmodel.text import fmt_si, fmt_time, table_cells

from .comparison import METRICS
from .html_views import run_header

__all__ = ["simulation_page", "search_page", "fusion_page", "comparison_section", "report_page", "with_notes"]

#: most points a timeline line draws (a longer one is strided; the note says so); the arrays go
#: into the page as typed arrays (plotly's: base64, 4 bytes a time or KV value, 1 or 2 a count)
MAX_TIMELINE_POINTS = 2000


def _stride(n: int) -> int:
    return max(1, math.ceil(n / MAX_TIMELINE_POINTS))


def _run_ends(y: Any) -> Any:
    """Which of ``y``'s points a line drawn through them needs: all but those inside a run of
    equal values (one equal to both neighbours lies on the flat segment between them), so the
    line drawn is the same, point for point of the samples it keeps.

    Parameters
    ----------
    y : numpy.ndarray
        A series' values, in time order.

    Returns
    -------
    numpy.ndarray
        A boolean mask over ``y``.
    """
    import numpy as np

    keep = np.ones(len(y), dtype=bool)
    if len(y) > 2:
        keep[1:-1] = (y[1:-1] != y[:-2]) | (y[1:-1] != y[2:])
    return keep


def _line_points(y: Any) -> tuple[Any, int]:
    """The sample indices one timeline line draws and the stride: every sample's value when its
    flat runs, drawn by their ends (:func:`_run_ends`), leave at most :data:`MAX_TIMELINE_POINTS`
    points, else one sample in ``stride`` (then the runs of those). A run at 5/s of 200 requests on
    Llama-3.1-8B records 10,367 samples: its counts change at 744 of them, its KV use at 4,859.

    Parameters
    ----------
    y : numpy.ndarray
        A series' values over one replica's samples, in time order.

    Returns
    -------
    tuple of (numpy.ndarray, int)
        Indices into ``y`` and the stride (1: every sample).
    """
    import numpy as np

    keep = _run_ends(y)
    k = 1 if int(keep.sum()) <= MAX_TIMELINE_POINTS else _stride(len(y))
    if k > 1:
        keep = _run_ends(y[::k])
    return np.flatnonzero(keep) * k, k


def _timeline_note(samples: int, busy: int, iterations: int, strides: Mapping[str, Sequence[int]]) -> str:
    """What the timeline draws, in the words of its samples: a replica records one at each
    iteration's start (each data-parallel rank its own) and one at batch 0 when it empties
    (:meth:`graphs.serving.sim.engine.Replica.sample`), so the samples are not the run's
    iterations (simulate's text and ``--json``): 200 requests at 5/s on Llama-3.1-8B draw 10,367
    samples, the 10,364 iterations and 3 at batch 0.

    Parameters
    ----------
    samples : int
        Timeline samples recorded.
    busy : int
        Of them, those at an iteration's start (batch above 0).
    iterations : int
        The run's iterations, over the replicas.
    strides : mapping of str to sequence of int
        Each series' strides, one per replica (:func:`_line_points`; 1: every sample).

    Returns
    -------
    str
    """
    head = (
        f"{samples:,} samples: {busy:,} at an iteration's start (each replica's, or rank's, own batch) "
        f"and {samples - busy:,} at batch 0, where one emptied; the run has {iterations:,} iterations. "
    )
    strided = {name: (min(ks), max(ks)) for name, ks in strides.items() if max(ks) > 1}
    every = [name for name in strides if name not in strided]
    flat = " (a flat stretch is drawn by its two ends: the same line)"
    if not strided:
        return f"{head}Each line goes through every sample{flat}"
    parts = "; ".join(
        f"{name} through one sample in {hi}"
        if lo == hi
        else f"{name} through one sample in up to {hi} (by replica)"
        for name, (lo, hi) in strided.items()
    )
    others = f"; {', '.join(every)} through every sample" if every else ""
    return f"{head}Drawn: {parts} (every sample would be over {MAX_TIMELINE_POINTS:,} points){others}{flat}"


#: the timeline's line colours (plotly's default cycle): one per replica, or one per series
_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")


#: the running line: a wide pale band under the batch's thin line, so that where the two counts
#: are equal (every sample of most runs) both stay visible, the one inside the other
_BAND = {"width": 6}
_BAND_OPACITY = 0.35


def _running_vs_batch(running: Any, batch: Any) -> str:
    """Where the timeline's running and batch counts agree, in words: a replica's running
    sequences are those its scheduler holds, its batch those the iteration runs (fewer where a
    token budget or a prefill leaves some out), so their lines lie on each other at every sample
    of most runs.

    Parameters
    ----------
    running : numpy.ndarray
        Running sequences per sample.
    batch : numpy.ndarray
        Sequences in the iteration per sample (0 where a replica emptied).

    Returns
    -------
    str
    """
    differ = int((running != batch).sum())
    if not differ:
        return (
            f"Running and batch are equal at all {len(batch):,} samples: the batch's thin line runs "
            "inside the running band."
        )
    return (
        f"Running and batch differ at {differ:,} of {len(batch):,} samples (running sequences left "
        "out of an iteration): the batch's thin line leaves the running band there."
    )


def _replica_names(topo: Any, tl: Mapping[str, Any]) -> dict[int, str]:
    """Each replica index in the timeline and how its lines are labelled: nothing for a run on
    one replica; ``, prefill 0`` / ``, decode 1`` disaggregated (the prefill replicas are indexed
    first), ``, replica 1 rank 0`` with data-parallel ranks, else ``, replica 2``."""
    import numpy as np

    ids = sorted(int(i) for i in np.unique(tl["replica"])) if "replica" in tl else [0]
    if len(ids) <= 1:
        return {i: "" for i in ids}
    pre, dp = getattr(topo, "prefill_replicas", 0), max(1, getattr(topo, "dp", 1))
    if pre:
        return {i: f", prefill {i}" if i < pre else f", decode {i - pre}" for i in ids}
    if dp > 1:
        return {i: f", replica {i // dp} rank {i % dp}" if topo.replicas > 1 else f", rank {i}" for i in ids}
    return {i: f", replica {i}" for i in ids}


def _simulation_sections(
    res: Any, slo_ttft: float | None, slo_tpot: float | None, *, compared: bool = False
) -> list[Section]:
    go = require_plotly()
    # plotly (the optional [html] extra) loads only when a page is drawn
    import numpy as np
    from plotly.subplots import make_subplots

    pr = res.per_request
    cdfs = (
        # with --compare its side-by-side section has drawn these two, every answer's (this one too)
        *(
            ()
            if compared
            else (
                cdf_figure({"TTFT": pr["ttft_s"]}, {"TTFT": slo_ttft}, title="time to first token"),
                cdf_figure({"TPOT": pr["tpot_s"]}, {"TPOT": slo_tpot}, title="time per output token"),
            )
        ),
        cdf_figure({"end to end": pr["e2e_s"]}, title="end-to-end latency"),
    )
    summary = rows_table(
        [
            {
                "": name,
                # no samples (Summary.of's NaN): every request ended at its first token
                **{
                    k: "none" if v != v else f"{v:.4f}"
                    for k, v in (("mean", s.mean), ("P50", s.p50), ("P90", s.p90), ("P99", s.p99))
                },
            }
            for name, s in (("TTFT s", res.ttft), ("TPOT s", res.tpot), ("E2E s", res.e2e))
        ]
    )
    tl = res.timeline
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    names = _replica_names(res.topology, tl)
    series = (  # (key, label, line style, default colour, panel row); counts are whole numbers
        ("running", "running", _BAND, 4, 1),
        ("waiting", "waiting", {"dash": "dot", "width": 1.5}, 1, 1),
        ("batch", "batch", {"width": 1}, 0, 1),
        ("kv_used", "KV blocks used %", {"width": 1}, 3, 2),
    )
    strides: dict[str, list[int]] = {label: [] for _k, label, *_ in series}
    for n, (rid, who) in enumerate(names.items()):
        # each replica's (rank's) own samples: they interleave in time, one line would zig-zag
        mine = np.flatnonzero(tl["replica"] == rid) if "replica" in tl else np.arange(len(tl["t"]))
        color = _COLORS[n % len(_COLORS)] if len(names) > 1 else None
        for key, label, style, default, row in series:
            # plotly has no x shared by traces: each line carries its own times, so each keeps
            # only the samples its line needs (a flat run's ends), in compact typed arrays
            y = tl[key][mine]
            idx, k = _line_points(y)
            strides[label].append(k)
            ys = (100 * y[idx]).astype("float32") if key == "kv_used" else y[idx].astype(np.int64)
            fig.add_trace(
                go.Scatter(
                    x=tl["t"][mine][idx].astype("float32"),
                    y=ys,
                    mode="lines",
                    name=f"{label}{who}",
                    legendgroup=who or ("kv" if key == "kv_used" else key),
                    line={**style, "color": color or _COLORS[default]},
                    opacity=_BAND_OPACITY if style is _BAND else 1.0,
                ),
                row=row,
                col=1,
            )
    styled(fig, "timeline: batch, queue and KV use per iteration", "", "", height=560)
    # after styled, whose empty axis titles would otherwise blank the top panel's
    fig.update_yaxes(title_text="sequences", row=1, col=1)
    fig.update_yaxes(title_text="KV blocks used (%)", row=2, col=1)
    fig.update_xaxes(title_text="time (s)", row=2, col=1)
    note = _timeline_note(len(tl["t"]), int((tl["batch"] > 0).sum()), res.iterations, strides)
    note += ". " + _running_vs_batch(tl["running"], tl["batch"])
    return [
        Section("latency distributions", (summary, *cdfs)),
        Section("timeline", (fig,), note),
    ]


def comparison_section(comp: Any, slo_ttft: float | None = None, slo_tpot: float | None = None) -> Section:
    """``--compare`` as a page section: the table (each value with its P10-P90 where it has one),
    every column's metrics as a ratio to the reference (the measured run, else the last column)
    with the interval as error bars, and the TTFT and TPOT CDFs of every column that has
    per-request times, the SLOs drawn.

    Parameters
    ----------
    comp : Comparison
        The runs compared (:func:`graphs.serving.present.comparison.compare`).
    slo_ttft, slo_tpot : float, optional
        The TTFT and TPOT objectives (s), drawn on the CDFs.

    Returns
    -------
    Section
    """
    go = require_plotly()
    ref = next((c for c in comp.columns if c.name == comp.measured), comp.columns[-1])
    table = []
    for label, _, unit in METRICS:
        row = {"metric": f"{label} ({unit})" if unit == "s" else label}
        for c in comp.columns:
            v = c.values.get(label)
            iv = c.interval.get(label)
            row[c.name] = "" if v is None else f"{v:.4g}" + (f" [{iv[0]:.4g}, {iv[1]:.4g}]" if iv else "")
        table.append(row)
    fig = go.Figure()
    labels = [label for label, _, _ in METRICS if ref.values.get(label)]
    for c in comp.columns:
        xs = [x for x in labels if x in c.values]
        ys = [c.values[x] / ref.values[x] for x in xs]
        hi = [(c.interval[x][1] - c.values[x]) / ref.values[x] if x in c.interval else 0.0 for x in xs]
        lo = [(c.values[x] - c.interval[x][0]) / ref.values[x] if x in c.interval else 0.0 for x in xs]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=plain(c.name),
                marker={"size": 11},
                error_y={"type": "data", "array": hi, "arrayminus": lo, "visible": any(hi) or any(lo)},
                hovertemplate=(
                    f"{plain(c.name, template=True)}: %{{y:.3f}} x {plain(ref.name, template=True)}<extra></extra>"
                ),
            )
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="gray")
    styled(fig, f"each answer over {ref.name} (bars: P10-P90)", "", f"ratio to {ref.name}", height=420)
    cdfs = tuple(
        cdf_figure(
            {c.name: c.per_request[key] for c in comp.columns if key in c.per_request},
            {key: slo},  # the user's SLO, not any one column's
            title=f"{what}: every answer",
        )
        for key, what, slo in (
            ("TTFT", "time to first token", slo_ttft),
            ("TPOT", "time per output token", slo_tpot),
        )
    )
    errs = comp.errors()
    note = "; ".join(
        f"{name} against the measured run: " + ", ".join(f"{k} {100 * e:+.1f} %" for k, e in es.items())
        for name, es in errs.items()
    )
    return Section(
        "side by side: the bound, the prediction and what was measured", (rows_table(table), fig, *cdfs), note
    )


def simulation_page(
    result: Any,
    config: Any,
    *,
    command: str,
    slo_ttft: float | None = None,
    slo_tpot: float | None = None,
    cost: Any = None,
    comparison: Any = None,
) -> str:
    """A ``simulate`` page from a :class:`SimResult`, or from a :class:`MaxRate` (its probes
    and the simulation at the rate found); ``cost``: the run's
    :class:`graphs.serving.planning.cost.TokenCost` (:func:`graphs.serving.planning.cost.sim_cost`), its line as
    the command prints it; ``comparison``: ``--compare``'s
    :class:`~graphs.serving.present.comparison.Comparison`, drawn first (:func:`comparison_section`).

    Parameters
    ----------
    result : SimResult or MaxRate
        The simulated run, or a rate search.
    config : ModelConfig
        The model simulated.
    command : str
        The command line that ran it (shown in the header).
    slo_ttft, slo_tpot : float, optional
        The TTFT and TPOT objectives (s).
    cost : TokenCost, optional
        The run's cost per million tokens.
    comparison : Comparison, optional
        ``--compare``'s runs, drawn first.

    Returns
    -------
    str
        A self-contained HTML page.
    """
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
        ceiling = getattr(result, "ceiling_rate", None)
        if result.rate is not None:
            from ..planning.capacity_search import rate_text  # the rate as simulated, as the text prints it

            headline["max rate"] = (
                f"{rate_text(result.rate)} requests/s = {result.rate_per_device:.4g} requests/s per device"
            )
        elif getattr(result, "saturated", True):
            headline["max rate"] = "no probed rate meets the SLOs"
        else:
            headline["max rate"] = (
                f"not determined: every probe up to the physical ceiling meets the SLOs; "
                f"{result.requests:,} requests are too few to load the deployment (raise --requests)"
            )
        if ceiling is not None:
            headline["physical ceiling"] = f"{ceiling:,.3f} requests/s"
        sections.append(Section("rate sweep", (fig,)))
        slo_ttft, slo_tpot = result.slo_ttft, result.slo_tpot
    if sim is not None:
        headline.update(
            {
                "requests": f"{sim.requests:,} over {sim.duration_s:.1f} s",
                "TTFT P99": f"{sim.ttft.p99:.4f} s",
                "TPOT P99": f"{sim.tpot.p99:.4f} s",
                "E2E P99": f"{sim.e2e.p99:.4f} s",
                "overall throughput (drain tail included)": (
                    f"{sim.requests_per_s:.2f} requests/s, {sim.output_tokens_per_s:,.0f} output tokens/s"
                ),
                "mean batch": f"{sim.mean_batch:.1f}",
                "KV blocks used on average": f"{100 * sim.mean_kv_utilisation:.0f}%",
            }
        )
        steady = getattr(sim, "steady_requests_per_s", None)
        if steady is not None:  # as the command prints it: first to last arrival
            headline["steady-state throughput"] = (
                f"{steady:.2f} requests/s, {sim.steady_output_tokens_per_s:,.0f} output tokens/s "
                f"(first to last arrival, {sim.steady_window_s:.1f} s)"
            )
        if sim.goodput_requests_per_s is not None:
            headline["goodput"] = (
                f"{sim.goodput_requests_per_s:.2f} requests/s ({100 * (sim.slo_attainment or 0):.1f}% meet the SLOs)"
            )
        if cost is not None:
            headline["cost"] = cost.line().removeprefix("cost ")
        if comparison is not None:
            sections.append(comparison_section(comparison, slo_ttft, slo_tpot))
        sections.extend(_simulation_sections(sim, slo_ttft, slo_tpot, compared=comparison is not None))
        topo = {k: v for k, v in sim.topology.to_dict().items() if v not in (None, 0, False)}
        sections.append(Section("the deployment", (rows_table([topo]),)))
    device = sim.device if sim is not None else "-"
    tp = sim.topology.tp if sim is not None else None
    rate = f" at {sim.rate:.4g} requests/s" if sim is not None and sim.rate else ""
    title = f"{config.name} serving simulation on {device}{rate}"
    return page_html(title, run_header(command, config, device, tp), headline, sections)


#: the frontier table's columns (a point's hover names its row, plan, batch and context)
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


#: each frontier column's heading in people's words and how its value is written (the number
#: is the search's own: seconds, tokens/s, joules, USD)
_POINT_HEADINGS: dict[str, tuple[str, str]] = {
    "plan": ("plan (device dtypes tp pp ep micro-batches)", ""),
    "batch": ("batch", ""),
    "ctx": ("context (tokens)", ""),
    "ttft_s": ("TTFT (s)", ".3g"),
    "tpot_s": ("TPOT (ms)", "ms"),
    "tokens_per_s_per_user": ("tokens/s per user", ",.1f"),
    "tokens_per_s_per_device": ("tokens/s per device", ",.0f"),
    "energy_per_token_j": ("energy (J/token)", ".3g"),
    "usd_per_m_output": ("$/M output", ".3g"),
}


def _point_row(p: dict[str, Any]) -> dict[str, Any]:
    """A frontier point as the page shows it: numbers rounded to what they mean (TPOT in ms); a
    metric its device has no figure for (no TDP: no energy; no price: no cost) in the text table's
    words (:data:`graphs.serving.planning.cost.MISSING_CELLS`), never ``None`` or ``nan``."""
    from ..planning.cost import MISSING_CELLS

    out: dict[str, Any] = {}
    for k, v in p.items():
        how = _POINT_HEADINGS.get(k, ("", ""))[1]
        if k in MISSING_CELLS and (v is None or (isinstance(v, float) and math.isnan(v))):
            out[k] = MISSING_CELLS[k]
        elif not how or not isinstance(v, int | float) or isinstance(v, bool):
            out[k] = v
        elif how == "ms":
            out[k] = f"{1e3 * v:.3g}"
        else:
            out[k] = format(v, how)
    return out


def _point_hover(row: int, p: dict[str, Any]) -> str:
    """A frontier point's hover: which point it is (its row in the frontier's table, its plan,
    batch and context), not the row again: the two numbers it is drawn at come from the trace's
    own x and y (:data:`_POINT_AXES`), every other column is in the table. A point past the rows
    the table shows (:data:`costmodel.html.MAX_TABLE_ROWS`) has only its hover: there it is the
    whole row, in the table's headings.

    Parameters
    ----------
    row : int
        The point's row in the frontier's table (from 1).
    p : dict
        The frontier point (a ``SearchResult.frontier`` row).

    Returns
    -------
    str
    """
    name = f"row {row} of the frontier's points"
    if row > MAX_TABLE_ROWS:
        shown = _point_row(p)
        cells = (f"{_POINT_HEADINGS[k][0]}: {shown[k]}" for k in _POINT_KEYS if k in p)
        return "<br>".join(plain(s) for s in (f"{name} (the table shows {MAX_TABLE_ROWS})", *cells))
    return plain(f"{name}: {p['plan']}, batch {p['batch']}, ctx {p['ctx']}")


#: the hovertemplate of a frontier point: its :func:`_point_hover` and where it is drawn, the
#: axes' numbers written as the table writes them
_POINT_AXES = "%{text}<br>%{y:,.1f} tokens/s per user, %{x:,.0f} tokens/s per device<extra></extra>"


#: where each numbered star's number goes, in turn (the winners of one context are numbered together)
_CORNERS = ("top right", "bottom left", "top left", "bottom right")


def _key(p: Mapping[str, Any]) -> tuple[Any, ...]:
    """A search point's identity: its plan, batch and context."""
    return (p["plan"], p["batch"], p["ctx"])


def _winners(result: Any) -> dict[Any, dict[str, dict[str, Any]]]:
    """Each context's winners per objective (one frontier per context)."""
    by_ctx = getattr(result, "best_by_ctx", None)
    if by_ctx:
        return dict(by_ctx)
    ctxs = {p["ctx"] for p in result.best.values()}
    return {ctxs.pop() if len(ctxs) == 1 else "all": result.best} if result.best else {}


#: the contexts whose winners the search page's headline names, as the text does (``--top``)
HEADLINE_CONTEXTS = 3


def search_page(result: Any, *, command: str, text: str = "") -> str:
    """A ``search`` page from a :class:`SearchResult`: its frontier per context, winners named,
    and the lines the command printed (its notes, and why a frontier is empty).

    Parameters
    ----------
    result : SearchResult
        The design search's points and frontier.
    command : str
        The command line that ran it.
    text : str
        What the command printed (:meth:`SearchReport.to_text`), shown as it reads on the
        terminal; empty: no such section.

    Returns
    -------
    str
        A self-contained HTML page.
    """
    from ..planning.design_search import winner_words

    go = require_plotly()
    fig = go.Figure()
    by_ctx: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for i, r in enumerate(result.frontier):
        by_ctx.setdefault(r["ctx"], []).append((i + 1, r))
    for ctx, pts in sorted(by_ctx.items()):
        fig.add_trace(
            go.Scatter(
                x=[p["tokens_per_s_per_device"] for _, p in pts],
                y=[p["tokens_per_s_per_user"] for _, p in pts],
                mode="markers",
                name=f"ctx {ctx}",
                text=[_point_hover(n, p) for n, p in pts],
                hovertemplate=_POINT_AXES,
            )
        )
    by_context = _winners(result)
    winners: dict[tuple[Any, ...], list[str]] = {}  # one label per point, naming every objective it wins
    points: dict[tuple[Any, ...], dict[str, Any]] = {}
    for best in by_context.values():
        for name, p in best.items():
            key = _key(p)
            winners.setdefault(key, []).append(winner_words(name))
            points[key] = p
    # each winner a numbered star (its objectives and plan in the table below and on hover): the
    # whole label beside each point overprinted its neighbours' and ran off the plot
    labelled = [(i + 1, names, points[key]) for i, (key, names) in enumerate(winners.items())]
    rows = {_key(p): i + 1 for i, p in enumerate(result.frontier)}
    if labelled:
        fig.add_trace(
            go.Scatter(
                x=[p["tokens_per_s_per_device"] for _, _, p in labelled],
                y=[p["tokens_per_s_per_user"] for _, _, p in labelled],
                mode="markers+text",
                name="winners (numbered as in the table below)",
                text=[str(n) for n, _, _ in labelled],
                # four corners in turn: the fastest-per-user winners of two contexts sit almost on
                # one point (batch 1), and both their numbers went top right, one over the other
                textposition=[_CORNERS[(n - 1) % 4] for n, _, _ in labelled],
                textfont={"size": 13},
                marker={"symbol": "star", "size": 14, "color": "black"},
                customdata=[
                    plain(f"{n}. {' and '.join(names)}: {p['plan']}, batch {p['batch']}, ctx {p['ctx']}")
                    + (f"<br>row {rows[key]} of the frontier's points" if (key := _key(p)) in rows else "")
                    for n, names, p in labelled
                ],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    shown_keys = (*_POINT_KEYS, "usd_per_m_output")  # the winners' table has the frontier's columns
    won = [
        {"#": n, "wins": " and ".join(names), **_point_row({k: p[k] for k in shown_keys if k in p})}
        for n, names, p in labelled
    ]
    styled(
        fig,
        f"Pareto frontier ({' vs '.join(_POINT_HEADINGS.get(o, (o,))[0] for o in result.objectives)})",
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
    # as the command prints them: the first contexts' winners (a 128-context search's 256 lines
    # filled the page's first 6,000 px), the others in the winners' table and on the stars' hover
    for ctx, best in list(by_context.items())[:HEADLINE_CONTEXTS]:
        head = f"ctx {ctx}: " if len(by_context) > 1 else ""
        for name, p in best.items():
            headline[f"{head}{winner_words(name)}"] = f"{p['plan']}, batch {p['batch']}"
    if len(by_context) > HEADLINE_CONTEXTS:
        headline["winners"] = (
            f"shown here for {HEADLINE_CONTEXTS} of {len(by_context)} contexts; the others are the "
            "numbered stars on the plot (--json has them all)"
        )
    cols = [(k, _POINT_HEADINGS[k][0]) for k in _POINT_KEYS]
    if "usd_per_m_output" in result.objectives:  # as the command labels it (graphs.serving.planning.cost)
        cols.append(("usd_per_m_output", "$/M output, 100 % busy decoding"))
    shown = [{"row": i + 1, **_point_row(p)} for i, p in enumerate(result.frontier)]
    won_cols = [("#", "#"), ("wins", "wins"), *cols]
    if not result.frontier:  # no point meets the SLOs: no empty axes
        parts: tuple[Any, ...] = ("<p>(no point on the frontier)</p>",)
    else:
        parts = (fig, rows_table(won, won_cols)) if won else (fig,)
    sections = [
        Section("Pareto frontier", parts, "the numbered stars: each objective's winner" if won else ""),
        Section("the frontier's points", (rows_table(shown, [("row", "row"), *cols]),)),
    ]
    if text:  # the notes, what priced the steps and why a frontier is empty, as the text says them
        sections.append(Section("report", (f"<pre>{html.escape(text)}</pre>",)))
    if result.beyond_domain:
        sections.append(
            Section(
                "left out",
                (rows_table([{"plan": p} for p in result.beyond_domain]),),
                "wider than the device's scale-up domain",
            )
        )
    return page_html(f"{result.model}: design-space search", run_header(command), headline, sections)


#: the fused groups' table of a fusion audit page: (row key, heading, format), with units
_GROUP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("group", "group", "s"),
    ("members", "members", "s"),
    ("repeat", "x", ".0f"),
    ("flops", "FLOPs", "si"),
    ("bytes_before", "bytes as separate kernels", "si"),
    ("bytes_after", "bytes fused", "si"),
    ("kind", "bound fused", "s"),
    ("before_us", "as separate kernels (us)", ".3f"),
    ("after_us", "fused (us)", ".3f"),
)


def _group_rows(groups: Sequence[Any]) -> list[dict[str, Any]]:
    """The fused groups' rows for :data:`_GROUP_COLUMNS`: members by their short names, times in us."""
    return [
        {
            **g.to_dict(),
            "members": " + ".join(m.split(".")[-1] for m in g.members),
            "before_us": g.time_before_s * 1e6,
            "after_us": g.time_after_s * 1e6,
        }
        for g in groups
    ]


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
    plan_name: str = "",
) -> str:
    """A ``fusion audit`` page from an :class:`AuditReport` and its suggestions (with the audited
    ``graph`` and ``plan``, the graph drawn with its groups and boundaries).

    Parameters
    ----------
    report : AuditReport
        The fusion audit.
    suggestions : sequence of Suggestion
        The suggested fusions.
    config : ModelConfig
        The model audited.
    command : str
        The command line that ran it.
    scope : str
        What was audited, in words (phase, layer or model).
    where : str
        The point audited, in words (batch, context or prompt).
    graph : networkx.DiGraph, optional
        The audited graph, drawn with its groups.
    plan : FusionPlan, optional
        The plan whose groups and boundaries are drawn.
    plan_name : str
        The plan audited, in words, named in the title (``the suggested plan``).

    Returns
    -------
    str
        A self-contained HTML page.
    """
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
                x=[plain(g.group) for g in groups],
                y=[getattr(g, key) * 1e6 for g in groups],
                name=label,
                text=[plain(" + ".join(m.split(".")[-1] for m in g.members)) for g in groups],
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
        Section("fused groups", (gfig, rows_table(table_cells(_group_rows(groups), _GROUP_COLUMNS)))),
        Section("suggested fusions", (rows_table(srows),)),
    ]
    if report.issues:
        sections.append(Section("plan issues", (rows_table([{"issue": str(i)} for i in report.issues]),)))
    of = f" of {plan_name}" if plan_name else ""
    title = f"fusion audit{of}: {config.name} {scope} on {report.device}, {where}"
    return page_html(title, run_header(command, config, report.device), headline, sections)


def with_notes(text: str) -> str:
    """``text`` headed by the notes this run said on stderr that it does not hold, as the terminal
    showed them (``costmodel: note: ...``): what a command assumed (a matmul dtype, a tp group
    priced on the network) is said once there and kept for ``--json``
    (:func:`costmodel.notes.said`), and a page drawn from the text alone lost it.

    Parameters
    ----------
    text : str
        The report's text (what the command printed on stdout).

    Returns
    -------
    str
    """
    from costmodel.notes import said

    spoken = [f"costmodel: {n}" for n in said() if n.split(": ", 1)[-1] not in text]
    return "\n".join([*spoken, text])


def report_page(
    title: str,
    text: str,
    *,
    command: str,
    headline: Mapping[str, str] | None = None,
    figures: Sequence[Any] = (),
    tables: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] = (),
) -> str:
    """A page of a report without a page of its own: its figures, the lines the command printed
    (escaped, as they read on the terminal) and its tables, one section each.

    Parameters
    ----------
    title : str
        The page's title.
    text : str
        The report's ``to_text()``: what the command printed.
    command : str
        The command line that ran it.
    headline : mapping of str to str, optional
        The run's key numbers, as the command prints them.
    figures : sequence of plotly figures
        Drawn first, in order.
    tables : sequence of (str, rows)
        Each table's title and rows (mappings; :func:`costmodel.html.rows_table`).

    Returns
    -------
    str
        A self-contained HTML page (needs the ``html`` extra: plotly).
    """
    sections = [Section("figures", tuple(figures))] if figures else []
    sections.append(Section("report", (f"<pre>{html.escape(text)}</pre>",)))
    sections += [Section(name, (rows_table(rows),)) for name, rows in tables]
    return page_html(title, run_header(command), dict(headline or {}), sections)
