"""A review of the figures as drawn: labels that overlap, titles cut mid-phrase, a measured
point below its physical bound drawn without a word, colours shared by two drawn roofs. Each
test pins the figure's data or its label positions to the numbers its input or its command
gives (never an image compared pixel by pixel)."""

from __future__ import annotations

import pytest

from tests.test_html_review import figures  # the pages' plotly figures, parsed once

pytest.importorskip("matplotlib", reason="plot extra not installed")


def _boxes(fig):
    """Each annotation's text box (display units) after a draw, as the saved figure lays it out."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    ax = fig.axes[0]
    return ax, [(t, Text.get_window_extent(t, r)) for t in ax.texts], ax.get_window_extent(r), r


def test_make_figures_fig1_labels_neither_overlap_nor_leave_the_axes(tmp_path):
    """Fig. 1 of examples/make_figures.py drew "gemm 512x4096x4096" over "attention ideal-min
    [N=4096,d=128]" (and softmax naive over softmax fused), some past the right edge: every label
    now sits at its own row's point (intensity, FLOPs / bound time, from ``roofline_rows``), with
    its op's name, inside the axes, overlapping no other label."""
    from costmodel import get_device, plots
    from costmodel.report import roofline_rows, standard_ops

    a100 = get_device("a100")
    rows = roofline_rows(standard_ops(), a100)
    for r in rows:
        r["node"] = r["op"]
    fig = plots.roofline_plot(rows, a100, tmp_path / "fig1.png", title=f"operator ledger on {a100.name}")
    _ax, boxes, frame, _ = _boxes(fig)
    want = {r["op"]: (r["intensity"], r["flops"] / r["time_s"]) for r in rows}
    assert sorted(t.get_text() for t, _ in boxes) == sorted(want)  # 8 ops, 8 labels
    for t, _ in boxes:
        assert t.xy == pytest.approx(want[t.get_text()], rel=1e-12)
    for i, (t, b) in enumerate(boxes):
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1, t.get_text()
        for u, c in boxes[i + 1 :]:
            assert not b.overlaps(c), (t.get_text(), u.get_text())


def test_roofline_rings_a_measured_point_above_the_roof(tmp_path):
    """A timing faster than its bound plots above the roof, where no kernel can be: the figure
    rings it and says how many (here 1 of 2: measured 0.5 s against a 1 s bound)."""
    from costmodel import plots

    rows = [
        {"node": "fast", "intensity": 1.0, "flops": 1e9, "time_s": 1.0, "measured_s": 0.5},
        {"node": "slow", "intensity": 1.0e3, "flops": 1e9, "time_s": 1.0, "measured_s": 2.0},
    ]
    fig = plots.roofline_plot(rows, "h100", tmp_path / "r.png")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "1 measured above the roof: the roofs understate this machine" in labels
    ring = next(c for c in fig.axes[0].collections if c.get_label().startswith("1 measured above"))
    assert ring.get_offsets().tolist() == [[1.0, 1e9 / 0.5]]


def test_batch_sweep_rings_latencies_below_the_bound(tmp_path):
    """examples/make_figures.py fig. 3 drew measured latencies under the bound (a small probe's
    roofs understate the machine) with nothing said: those points are ringed and counted."""
    from costmodel import plots

    rows = [
        {"shape": {"B": b}, "predicted_s": 1e-3, "measured_s": m}
        for b, m in ((1, 0.5e-3), (2, 2e-3), (4, 0.9e-3))
    ]
    fig = plots.batch_sweep_plot(rows, tmp_path / "b.png")
    a1 = fig.axes[0]
    labels = [t.get_text() for t in a1.get_legend().get_texts()]
    assert "2 of 3 faster than the bound: its roofs understate this machine" in labels
    ring = next(c for c in a1.collections if c.get_label().startswith("2 of 3"))
    assert ring.get_offsets().tolist() == [[1, 0.5], [4, 0.9]]  # batch, ms


def test_plot_titles_fit_and_keep_their_parts_whole(tmp_path, monkeypatch, capsys):
    """``plot batch-sweep``'s title was wrapped at 90 characters into "... ctx 4096, tp" / "1": it
    now fits the figure's width on one line, and a title too long for one line breaks between
    its comma-separated parts, each line inside the figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from costmodel import plots
    from graphs.cli import main

    saved = []
    real = plots._save
    monkeypatch.setattr(
        plots, "_save", lambda fig, path, title="": saved.append(fig) or real(fig, path, title)
    )
    assert main(["plot", "batch-sweep", "--out", str(tmp_path / "b.png")]) == 0
    want = plots.plot_title(
        "decode batch sweep (TPOT bound, batches that fit)",
        model="llama-3.1-8b",
        device="h100-sxm",
        ctx=4096,
        tp=1,
    )
    assert saved[0]._suptitle.get_text() == want  # one line, the title the command reports
    long = ", ".join(f"part {i} of a long title" for i in range(12))
    fig = plots.headroom_plot(tmp_path / "h.png", title=long)
    text = fig._suptitle.get_text()
    assert text.replace("\n", " ") == long
    assert all(line.endswith(",") for line in text.split("\n")[:-1])  # broken between parts
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = fig._suptitle.get_window_extent(canvas.get_renderer())
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width


@pytest.mark.slow
def test_make_figures_every_figure_says_what_and_where(tmp_path, monkeypatch, capsys):
    """Figs. 2-4 of examples/make_figures.py had no title; fig. 1 named "A100" of three A100s:
    each now says what it shows and on which device (fig. 3: this machine)."""
    import runpy
    import sys
    from pathlib import Path

    from costmodel import plots

    titles = []
    real = plots._save

    def keep(fig, path, title=""):
        titles.append(" ".join([title, *(ax.get_title() for ax in fig.axes)]).strip())
        return real(fig, path, title)

    monkeypatch.setattr(plots, "_save", keep)
    script = Path(__file__).resolve().parents[1] / "examples" / "make_figures.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--out", str(tmp_path), "--small"])
    runpy.run_path(str(script), run_name="__main__")
    assert len(titles) == 4 and all(titles)
    assert "a100-sxm-40gb" in titles[0] and "this machine" in titles[2] and "78 GiB" in titles[3]


def _run_page(capsys, tmp_path, *argv):
    import json

    from graphs.cli import main

    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    page = tmp_path / "p.html"
    assert main([*argv, "--html", str(page)]) == 0
    capsys.readouterr()
    return doc, page.read_text()


def test_decode_page_roofline_draws_each_roof_in_its_own_colour(capsys, tmp_path):
    """``decode --html``'s roofline left colours to plotly's 10-colour cycle, in which the ridge
    markers take places too: the drawn roofs tensor bf16 and vector fp32 came out one purple.
    Every drawn roof (the device's bf16 and fp32 roofs, as ``hw`` lists them) now has a colour
    of its own, none a node group's."""
    pytest.importorskip("plotly", reason="html extra not installed")
    from costmodel import get_device

    _, page = _run_page(capsys, tmp_path, "decode", "llama-3.1-8b", "--batch", "8", "--ctx", "4096")
    data, _layout = next(f for f in figures(page) if "roofline" in f[1]["title"]["text"])
    roofs = [t for t in data if t["name"].startswith("roof ") and t.get("visible", True) is True]
    dev = get_device("h100-sxm")
    assert len(roofs) == len([r for r in dev.roofs if r.precision in ("bf16", "fp32")])
    colours = [t["line"]["color"] for t in roofs]
    assert len(set(colours)) == len(colours)
    nodes = {t["marker"]["color"] for t in data if t["name"].startswith("nodes bound by")}
    assert nodes and not nodes & set(colours)


def test_disagg_page_gives_each_ttft_term_its_row(capsys, tmp_path):
    """``serve disagg --html`` drew its three TTFT terms in 40 px (plotly's own 180 px of
    margins in a 220 px figure): "KV transfer" lost its label. Each bar now has 30 px, and the
    bars are the terms ``--json`` gives."""
    pytest.importorskip("plotly", reason="html extra not installed")
    doc, page = _run_page(capsys, tmp_path, "serve", "disagg", "llama-3.1-8b")
    ((data, layout),) = figures(page)
    (bar,) = data
    t = doc["ttft"]
    assert dict(zip(bar["y"], bar["x"], strict=True)) == pytest.approx(
        {
            "prefill": 1e3 * t["prefill_s"],
            "KV transfer": 1e3 * t["kv_transfer_s"],
            "first decode": 1e3 * t["first_decode_s"],
        }
    )
    m = layout["margin"]
    assert (layout["height"] - m["t"] - m["b"]) / len(bar["y"]) >= 30


def test_plans_page_names_its_model_and_draws_the_frontier(capsys, tmp_path):
    """``serve plans --html`` was titled "parallel plans" with no model or device, and its
    figure did not show which points are the frontier its headline counts: the title names
    them, and a frontier trace joins the rows ``--json`` marks ``pareto``."""
    pytest.importorskip("plotly", reason="html extra not installed")
    rows, page = _run_page(capsys, tmp_path, "serve", "plans", "llama-3.1-70b", "--device", "h100-sxm")
    assert "<title>parallel plans: llama-3.1-70b on h100-sxm, ctx 4096</title>" in page
    ((data, _),) = figures(page)
    front = next(t for t in data if t["name"] == "frontier")
    want = sorted((r["tokens_per_s_per_device"], r["tokens_per_s_per_user"]) for r in rows if r["pareto"])
    assert front["x"] == pytest.approx([x for x, _ in want]) and front["y"] == pytest.approx(
        [y for _, y in want]
    )
    assert len(want) == 2  # the headline's "2 of 8 points"


def test_frontier_plot_tells_its_contexts_apart(tmp_path):
    """``plot frontier`` drew batches at ctx 1024, 4096 and 16384 as one cloud of
    "configurations": each context is its own series, its points the sweep's rows at it."""
    from costmodel import plots
    from graphs.serving.analysis.sweeps import sweep

    rows = sweep("llama-3.1-8b", devices=["h100-sxm"], batches=[1, 8, 64], ctxs=[1024, 16384]).rows()
    fig = plots.frontier_plot(rows, tmp_path / "f.png")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ctx 1024", "frontier at ctx 1024", "ctx 16384", "frontier at ctx 16384"]
    # each context's frontier line joins that context's pareto rows, and only them (one line
    # through every context's points zigzagged: the review's 195 -> 215 -> 221 -> 173 ...)
    for line in ax.get_lines():
        ctx = int(line.get_label().split()[-1])
        want = sorted(
            (r["tokens_per_s_per_device"], r["tokens_per_s_per_user"])
            for r in rows
            if r["ctx"] == ctx and r["fits"] and r["pareto"]
        )
        assert want and list(line.get_xdata()) == pytest.approx([x for x, _ in want])
        assert list(line.get_ydata()) == pytest.approx([y for _, y in want])
    for c in ax.collections:
        ctx = int(c.get_label().split()[1])
        want = [
            [r["tokens_per_s_per_device"], r["tokens_per_s_per_user"]]
            for r in rows
            if r["ctx"] == ctx and r["fits"]
        ]
        got = c.get_offsets().tolist()
        assert len(got) == len(want) and all(g == pytest.approx(w) for g, w in zip(got, want, strict=True))
