"""Plots (optional extra ``plot``: matplotlib), saved as PNG or SVG, headless.

* :func:`roofline_plot`: each node's intensity and achieved (modelled, and
  measured where known) FLOP/s under the device's roofs, with the ridge line;
* :func:`ledger_plot`: the memory ledger's stacked terms against batch, with
  the capacity line;
* :func:`batch_sweep_plot`: latency and throughput of a batch sweep;
* :func:`frontier_plot`: per-user speed vs per-device throughput, the Pareto
  frontier highlighted;
* :func:`headroom_plot`: speed-up of 2x compute and of 2x bandwidth against
  ``I / I*`` (1 on the wrong side of the ridge, 2 far on the right side).

Each returns the ``Figure`` (for tests) after saving it to ``path``; ``title`` (see
:func:`plot_title`: what, model, device, context, tp) is the figure's title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .cost import as_float
from .errors import CostModelError
from .hardware import Hardware, get_device
from .outfiles import atomic_write
from .results import Result, plain

__all__ = [
    "plot_title",
    "roofline_plot",
    "ledger_plot",
    "batch_sweep_plot",
    "frontier_plot",
    "headroom_plot",
    "latency_cdf_plot",
    "serving_timeline_plot",
    "rate_sweep_plot",
]


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise CostModelError("plots need the optional extra: pip install matplotlib") from exc
    return plt


def plot_title(
    what: str,
    *,
    model: str | None = None,
    device: str | None = None,
    phase: str | None = None,
    batch: int | None = None,
    ctx: int | None = None,
    seq: int | None = None,
    tp: int | None = None,
) -> str:
    """A figure's title naming what it shows and the point it shows it at, e.g.
    ``memory ledger: llama-3.1-8b on h100-sxm, ctx 4096, tp 1`` (parts not given are left out).

    >>> plot_title("memory ledger", model="llama-3.1-8b", device="h100-sxm", ctx=4096, tp=1)
    'memory ledger: llama-3.1-8b on h100-sxm, ctx 4096, tp 1'
    """
    who = " ".join(x for x in (model, phase) if x)
    if device:
        who = f"{who} on {device}" if who else device
    at = [f"{k} {v}" for k, v in (("batch", batch), ("seq", seq), ("ctx", ctx), ("tp", tp)) if v is not None]
    return f"{what}: " + ", ".join(x for x in (who, *at) if x) if (who or at) else what


def _save(fig: Any, path: str | Path, title: str = "") -> Any:
    if title:
        fig.suptitle(_wrap(title, fig, 8), fontsize=8)
    fig.tight_layout()
    fmt = Path(path).suffix[1:].lower() or "png"
    with atomic_write(path, "plot", binary=True) as f:  # no half-written figure on a full disk
        fig.savefig(f, dpi=110, format=fmt)
    # released from pyplot's registry (the figure object stays usable): a long session or test
    # run that draws many plots would otherwise keep every one and warn past 20
    pyplot().close(fig)
    return fig


def _wrap(title: str, fig: Any, fontsize: float) -> str:
    """``title`` broken into lines that fit the figure's width at ``fontsize`` (a glyph taken as
    0.6 em on average), between its comma-separated parts where it can ("tp 1" never loses
    its 1 to the next line), inside a part longer than a line between words.

    >>> from types import SimpleNamespace
    >>> _wrap("what: m on d, batch 8, ctx 4096, tp 1", SimpleNamespace(get_figwidth=lambda: 2.0), 8)
    'what: m on d, batch 8,\\nctx 4096, tp 1'
    """
    import textwrap

    width = max(20, int(fig.get_figwidth() * 72 / (0.6 * fontsize)) - 4)
    parts = title.split(", ")
    lines: list[str] = []
    cur = ""
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        joined = f"{cur} {piece}" if cur else piece
        if len(joined) <= width:
            cur = joined
            continue
        if cur:
            lines.append(cur)
        *full, cur = textwrap.wrap(piece, width) or [""]
        lines += full
    return "\n".join([*lines, cur])


def roofline_plot(
    rows: Sequence[Result | Mapping[str, Any]],
    hw: Hardware | str,
    path: str | Path,
    *,
    precision: str = "bf16",
    title: str = "",
    label_top: int = 8,
) -> Any:
    """Roofline of classified nodes (``classify_graph`` or microbenchmark rows); the
    ``label_top`` nodes that take the most time are labelled."""
    plt = pyplot()
    dev = get_device(hw)
    peak = as_float(dev.require_peak("tensor", precision))
    bw = as_float(dev.bandwidth())
    ridge = peak / bw
    pts = [r for r in map(plain, rows) if r.get("intensity") and r.get("flops")]
    if not pts:
        raise CostModelError("nothing to plot: no row has FLOPs and an intensity")
    xs = np.array([r["intensity"] for r in pts])
    x = np.logspace(np.log10(min(xs.min(), ridge) / 4), np.log10(max(xs.max(), ridge) * 4), 200)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.loglog(x, np.minimum(peak, bw * x), "k-", lw=1.5, label=f"roof: {precision} peak / DRAM")
    ax.axvline(ridge, color="gray", ls="--", lw=1, label=f"ridge I* = {ridge:.0f} FLOP/B")
    model = [r["flops"] / (r.get("time_s") or r.get("predicted_s")) for r in pts]
    ax.scatter(xs, model, marker="o", label="modelled (bound)")
    meas = [(r["intensity"], r["flops"] / r["measured_s"]) for r in pts if r.get("measured_s")]
    if meas:
        ax.scatter(*zip(*meas, strict=True), marker="x", color="red", label="measured")
        # a timing faster than its bound sits above the roof, which no kernel can reach: said
        above = [
            (r["intensity"], r["flops"] / r["measured_s"])
            for r, m in zip(pts, model, strict=True)
            if r.get("measured_s") and r["flops"] / r["measured_s"] > m
        ]
        if above:
            ax.scatter(
                *zip(*above, strict=True),
                s=90,
                facecolors="none",
                edgecolors="red",
                label=f"{len(above)} measured above the roof: the roofs understate this machine",
            )
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title or f"roofline on {dev.name} ({precision})")
    ax.legend(fontsize=7, loc="upper left")  # above the sloped roof: no point sits there
    # label the nodes that take the most time, by their last two name parts ("mlp.down_proj",
    # not a cut-off string); nodes at one point share one label, placed where it overlaps no
    # other label, point, the roof or the legend (_place_labels)
    weight = [r.get("total_time_s") or r.get("time_s") or r.get("measured_s") or 0.0 for r in pts]
    top = sorted(range(len(pts)), key=lambda i: -weight[i])[:label_top]
    groups: dict[tuple[float, float], list[int]] = {}
    for i in top:  # nodes within ~25 % of each other on both axes share a label
        key = (round(float(np.log10(xs[i])), 1), round(float(np.log10(model[i])), 1))
        groups.setdefault(key, []).append(i)
    labels = []
    for members in groups.values():
        names = [".".join(str(pts[i].get("node", pts[i].get("name", ""))).split(".")[-2:]) for i in members]
        text = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
        labels.append((text, (float(xs[members[0]]), float(model[members[0]]))))  # the heaviest's point
    roof_line = (x, np.minimum(peak, bw * x))
    _place_labels(fig, ax, labels, points=[*zip(xs, model, strict=True), *meas], line=roof_line)
    return _save(fig, path)


def _place_labels(
    fig: Any,
    ax: Any,
    labels: Sequence[tuple[str, tuple[float, float]]],
    *,
    points: Sequence[tuple[float, float]] = (),
    line: tuple[Any, Any] | None = None,
) -> list[Any]:
    """Annotate each ``(text, (x, y))`` (data coordinates) with a leader line to its point.

    Each text goes to the nearest free place below its point (under a roof drawn above the
    points), right then left of it, line by line further down, above it last: free where its
    box overlaps no label placed before it, no marker in ``points``, no segment of ``line`` (x
    and y arrays, log-log), no leader line placed before it and no legend, and stays inside the
    axes, and where its own leader crosses no label placed before it (where it can). The layout is fixed first
    (``tight_layout``) so the boxes measured are the ones saved; the labels take no part in it
    afterwards. A label with no free place keeps the first one, overlapping.

    Returns the annotations, in the order of ``labels``.
    """
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    to_px = ax.transData.transform
    pad = 3.0
    blocked = [(px - 4, py - 4, px + 4, py + 4) for px, py in to_px(np.asarray(points, float).reshape(-1, 2))]
    legend = ax.get_legend()
    if legend is not None:
        lb = legend.get_window_extent(renderer)
        blocked.append((lb.x0, lb.y0, lb.x1, lb.y1))
    texts: list[tuple[float, float, float, float]] = []  # boxes of the labels placed
    samples = np.empty((0, 2))  # lines no label may cover: the roof, the leaders placed
    if line is not None:
        lx, ly = (np.log(np.asarray(v, float)) for v in line)
        fine = np.interp(np.linspace(0, len(lx) - 1, 40 * len(lx)), np.arange(len(lx)), lx)
        samples = to_px(np.exp(np.column_stack([fine, np.interp(fine, lx, ly)])))

    def hits(box: tuple[float, float, float, float], pts: Any) -> bool:
        x0, y0, x1, y1 = box
        return bool(((pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)).any())

    def leader(anchor: Any, box: tuple[float, float, float, float]) -> Any:
        """The leader's points: from the anchor to the text box's centre (the part in it is hidden)."""
        centre = np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2])
        t = np.linspace(0.0, 1.0, 60)[:, None]
        return anchor + t * (centre - anchor)

    def annotate(text: str, xy: tuple[float, float], dx: float, dy: float, ha: str) -> Any:
        ann = ax.annotate(
            text,
            xy,
            xytext=(dx, dy),
            textcoords="offset points",
            ha=ha,
            va="top" if dy < 0 else "bottom",
            fontsize=7,
            arrowprops={"arrowstyle": "-", "lw": 0.5, "alpha": 0.5},
        )
        ann.set_in_layout(False)
        return ann

    # nearest first: below right, below left, a line further down each, ...; above last
    offsets = [(dx, -12 - 11 * k, ha) for k in range(8) for dx, ha in ((8, "left"), (-8, "right"))]
    offsets += [(dx, 6 + 11 * k, ha) for k in range(6) for dx, ha in ((8, "left"), (-8, "right"))]
    placed = {}
    for text, xy in sorted(labels, key=lambda lab: lab[1]):
        anchor = to_px(np.array([xy], float))[0]
        # a place whose leader crosses no label if there is one, else one whose text is free
        for (dx, dy, ha), strict in [(o, True) for o in offsets] + [(o, False) for o in offsets]:
            ann = annotate(text, xy, dx, dy, ha)
            b = _text_box(ann, renderer)
            box = (b.x0 - pad, b.y0 - pad, b.x1 + pad, b.y1 + pad)
            inside = frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1
            lead = leader(anchor, box)
            if (
                inside
                and not any(
                    box[0] < c and a < box[2] and box[1] < d and bb < box[3] for a, bb, c, d in blocked
                )
                and not hits(box, samples)
                and not (strict and any(hits(t, lead) for t in texts))
            ):
                break
            ann.remove()
        else:  # nowhere free: the first place, overlapping
            ann = annotate(text, xy, *offsets[0])
            b = _text_box(ann, renderer)
            box = (b.x0, b.y0, b.x1, b.y1)
            lead = leader(anchor, box)
        blocked.append(box)
        texts.append(box)
        samples = np.vstack([samples, lead])
        placed[(text, xy)] = ann
    return [placed[lab] for lab in labels]


def _text_box(ann: Any, renderer: Any) -> Any:
    """The display box of an annotation's text alone (its leader line left out), at the place
    the offset puts it (placed as a draw would place it)."""
    from matplotlib.text import Text

    ann.update_positions(renderer)
    return Text.get_window_extent(ann, renderer)


def ledger_plot(
    terms_by_batch: dict[int, dict[str, float]], capacity_bytes: float, path: str | Path, *, title: str = ""
) -> Any:
    """Stacked ledger terms (GiB) per batch with the capacity line."""
    plt = pyplot()
    batches = sorted(terms_by_batch)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bottom = np.zeros(len(batches))
    for key in ("weights", "kv_cache", "activations", "overhead"):
        vals = np.array([terms_by_batch[b][key] for b in batches]) / 2**30
        ax.bar([str(b) for b in batches], vals, bottom=bottom, label=key)
        bottom += vals
    ax.axhline(capacity_bytes / 2**30, color="k", ls="--", label=f"capacity {capacity_bytes / 2**30:.2f} GiB")
    ax.set_xlabel("batch")
    ax.set_ylabel("memory (GiB)")
    ax.legend(fontsize=7)
    return _save(fig, path, title)


def batch_sweep_plot(rows: list[Any], path: str | Path, *, title: str = "") -> Any:
    """Latency and throughput against batch (the article's figure 3): the bound, and the
    measured latency where rows carry one (``measured_s``).

    A measured latency below its bound is one no kernel can reach: those points are ringed,
    their count in the legend ("faster than the bound": the roofs the bound was taken on
    understate the machine, e.g. a probe's small sizes), as ``probe`` flags them
    (``above_bound``). The axes' ticks are plain numbers (``0.5``, ``20``), not powers of ten.
    """
    plt = pyplot()
    rows = [plain(r) for r in rows]  # BenchRow reports or plain dicts
    b = np.array([r["shape"]["B"] for r in rows])
    pred = np.array([r["predicted_s"] for r in rows]) * 1e3
    measured = all(r.get("measured_s") is not None for r in rows)
    lat = np.array([r["measured_s"] for r in rows]) * 1e3 if measured else pred
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4))
    if measured:
        a1.loglog(b, lat, "o-", label="measured")
        fast = lat < pred
        if fast.any():
            a1.scatter(
                b[fast],
                lat[fast],
                s=110,
                facecolors="none",
                edgecolors="red",
                zorder=3,
                label=f"{int(fast.sum())} of {len(b)} faster than the bound: its roofs understate this machine",
            )
    a1.loglog(b, pred, "k--", label="bound")
    a1.set_xlabel("batch")
    a1.set_ylabel("latency (ms)")
    # under the axes: a noisy measured curve leaves no corner free
    a1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, frameon=False)
    a2.loglog(b, b / lat * 1e3, "o-")
    a2.set_xlabel("batch")
    a2.set_ylabel("throughput (rows/s)" if measured else "throughput (tokens/s, bound)")
    for ax in (a1, a2):
        _plain_ticks(ax)
    return _save(fig, path, title)


def _plain_ticks(ax: Any) -> None:
    """Log axes' tick labels as plain numbers (``%g``: 0.1, 20, 1e+04, not ``2x10^1``); minor
    ticks labelled too where the axis spans under two decades (2 and 5 of each decade; every one
    under one decade), so that a short range still reads."""
    from matplotlib.ticker import FuncFormatter

    def minor(axis: Any) -> Any:
        def label(v: float, _pos: Any) -> str:
            lo, hi = sorted(axis.get_view_interval())
            decades = np.log10(hi / lo) if lo > 0 else np.inf
            mantissa = round(v / 10 ** np.floor(np.log10(v) + 1e-9))
            return f"{v:g}" if decades < 1 or (decades < 2 and mantissa in (2, 5)) else ""

        return FuncFormatter(label)

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            axis.set_minor_formatter(minor(axis))


def frontier_plot(points: list[dict[str, Any]], path: str | Path, *, title: str = "") -> Any:
    """Per-user tokens/s vs per-device tokens/s; each context's points in a colour of its own and
    its Pareto points (the ``pareto`` flag a sweep sets per context)
    joined by a line of that colour."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    fit = [p for p in points if p.get("fits", True)]
    # one colour per context where the points carry one: the same batch at 1024 and 16384
    # tokens were one undistinguished cloud of "configurations"
    by_ctx: dict[Any, list[dict[str, Any]]] = {}
    for p in fit:
        by_ctx.setdefault(p.get("ctx"), []).append(p)
    # each context's own frontier (a sweep marks ``pareto`` per context): one line through the
    # points of every context zigzagged between them and was no frontier
    for n, (ctx, group) in enumerate(sorted(by_ctx.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))):
        colour = f"C{n % 10}"
        ax.scatter(
            [p["tokens_per_s_per_device"] for p in group],
            [p["tokens_per_s_per_user"] for p in group],
            s=14,
            alpha=0.6,
            color=colour,
            label="configurations" if ctx is None else f"ctx {ctx}",
        )
        front = sorted((p for p in group if p.get("pareto")), key=lambda p: p["tokens_per_s_per_device"])
        ax.plot(
            [p["tokens_per_s_per_device"] for p in front],
            [p["tokens_per_s_per_user"] for p in front],
            ".-",
            color=colour,
            label="Pareto frontier" if ctx is None else f"frontier at ctx {ctx}",
        )
    ax.set_xscale("log")
    _plain_ticks(ax)
    ax.set_xlabel("tokens/s per device")
    ax.set_ylabel("tokens/s per user")
    ax.legend(fontsize=7)
    return _save(fig, path, title)


def headroom_plot(
    path: str | Path,
    *,
    rows: list[Any] | None = None,
    hw: Hardware | str | None = None,
    precision: str = "bf16",
    title: str = "",
) -> Any:
    """Speed-up of doubling compute or bandwidth against I/I*, computed by :func:`headroom`;
    with ``rows`` (``classify_graph`` rows) on ``hw``, each node is placed at its own
    ``I / I*`` with ``I* = P_tensor,precision / beta_dram`` of that device.

    A node that moves no bytes (infinite intensity: a view such as a prefill's
    ``head.last_token``) has no place on the axis: it is left off, said once
    (:func:`costmodel.notes.say`), where it once turned every curve into NaN.

    Parameters
    ----------
    path : str or Path
        The PNG or SVG file written.
    rows : list, optional
        ``classify_graph`` rows (each with ``intensity``), placed on the curves.
    hw : Hardware or str, optional
        The device whose ridge ``I*`` the rows are scaled by.
    precision : str
        The tensor roof of the ridge.
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """

    from .cost import Cost
    from .frontier import compile_expr
    from .hardware.spec import Hardware, MemoryLevel, Roof
    from .roofline import headroom
    from .symbols import quantity

    plt = pyplot()
    x = quantity("x")  # I / I* on a device with P = beta = 1
    unit = Hardware("unit", roofs=(Roof("tensor", "bf16", 1),), memory=(MemoryLevel("dram", 1),))
    cost = Cost.compute("tensor", "bf16", x) + Cost.traffic(read=1)
    f_compute = compile_expr(headroom(cost, unit, "compute"), (x,))
    f_bw = compile_expr(headroom(cost, unit, "memory"), (x,))
    r = np.logspace(-2, 2, 400)
    if rows is not None and hw is not None:
        dev = get_device(hw)
        ridge = as_float(dev.require_peak("tensor", precision)) / as_float(dev.bandwidth())
        placed = [
            (str(r_.get("node", r_.get("name", "?"))), r_["intensity"])
            for r_ in map(plain, rows)
            if r_.get("intensity")
        ]
        pts = np.array([float(i) for _, i in placed if np.isfinite(float(i))]) / ridge
        off = [n for n, i in placed if not np.isfinite(float(i))]
        if off:
            from .notes import say

            shown = ", ".join(off[:3]) + (f" +{len(off) - 3}" if len(off) > 3 else "")
            say(
                f"headroom: {len(off)} node(s) moving no bytes (infinite intensity) left off the figure: {shown}"
            )
        if pts.size:
            r = np.logspace(min(-2.0, np.log10(pts.min()) - 0.5), max(2.0, np.log10(pts.max()) + 0.5), 400)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogx(r, f_compute(r), label="2x compute")
    ax.semilogx(r, f_bw(r), label="2x bandwidth")
    if rows is not None and hw is not None and pts.size:
        ax.scatter(pts, f_compute(pts), s=12, marker="o", label="nodes: 2x compute")
        ax.scatter(pts, f_bw(pts), s=12, marker="x", label="nodes: 2x bandwidth")
    ax.axvline(1, color="gray", ls="--", lw=1)
    ax.set_xlabel("I / I*")
    ax.set_ylabel("speed-up")
    ax.legend(fontsize=7)
    return _save(fig, path, title)


def latency_cdf_plot(
    latencies: dict[str, Any], path: str | Path, *, title: str = "", slos: dict[str, float] | None = None
) -> Any:
    """Empirical CDFs of per-request latencies (seconds), one curve per name (TTFT, TPOT, E2E).

    ``slos`` maps a curve's name to its SLO (seconds): drawn as a dashed vertical line in the
    curve's colour, labelled with the SLO and the share of requests within it."""
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, x in latencies.items():
        v = np.sort(np.asarray(x, dtype=float)[np.isfinite(np.asarray(x, dtype=float))])
        if v.size:
            (line,) = ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=name)
            slo = (slos or {}).get(name)
            if slo is not None:
                within = float(np.searchsorted(v, slo, side="right")) / v.size
                ax.axvline(
                    slo,
                    ls="--",
                    lw=0.9,
                    color=line.get_color(),
                    label=f"{name} SLO {slo:g} s ({100 * within:.0f}% within)",
                )
    ax.set_xscale("log")
    ax.set_xlabel("latency (s)")
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path, title)


def serving_timeline_plot(timeline: dict[str, Any], path: str | Path, *, title: str = "") -> Any:
    """Batch size, running and waiting sequences and KV-block utilisation over time."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    t = timeline["t"]
    a1.plot(t, timeline["running"], lw=0.8, label="running")
    a1.plot(t, timeline["waiting"], lw=0.8, label="waiting")
    a1.plot(t, timeline["batch"], lw=0.6, alpha=0.6, label="batch")
    a1.set_ylabel("sequences")
    a1.legend(fontsize=7)
    a2.plot(t, 100 * timeline["kv_used"], lw=0.8, color="tab:red")
    a2.set_ylabel("KV blocks used (%)")
    a2.set_xlabel("time (s)")
    return _save(fig, path, title)


def rate_sweep_plot(
    rows: list[dict[str, Any]],
    path: str | Path,
    slo_ttft: float | None = None,
    slo_tpot: float | None = None,
    *,
    title: str = "",
) -> Any:
    """P99 TTFT and TPOT against the request rate, with the SLOs as dashed lines."""
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    rates = [r["rate"] for r in rows]
    a1.plot(rates, [r["ttft_p99"] for r in rows], "o-")
    a2.plot(rates, [r["tpot_p99"] for r in rows], "o-")
    for ax, slo, name in ((a1, slo_ttft, "P99 TTFT (s)"), (a2, slo_tpot, "P99 TPOT (s)")):
        if slo is not None:
            ax.axhline(slo, ls="--", color="gray")
        ax.set_xlabel("requests/s")
        ax.set_ylabel(name)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    return _save(fig, path, title)
