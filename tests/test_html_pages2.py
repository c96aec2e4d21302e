"""The second review of the ``--html`` pages' figures (five visual findings): each test runs the
command, reads its own ``--json`` or text for the same inputs, and checks what the page draws
(the JSON each ``Plotly.newPlot`` call is handed) and how it is laid out (positions, ranges,
styles, CSS), never pixels."""

import contextlib
import html
import io
import itertools
import json
import re
import shutil
import subprocess

import pytest

pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")

from graphs.cli import main


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    assert got == 0, err.getvalue()
    return out.getvalue()


def page_of(tmp_path, *argv):
    path = tmp_path / "p.html"
    out = run_cli(*argv, "--html", str(path))
    return out, path.read_text()


def figures(page):
    """Each figure's ``(data, layout)`` as the page hands them to plotly.js."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        data, end = dec.raw_decode(page, m.end())
        end = re.compile(r",\s*").match(page, end).end()
        layout, _ = dec.raw_decode(page, end)
        out.append((data, layout))
    return out


def figure(page, title_part):
    (found,) = [(d, lay) for d, lay in figures(page) if title_part in str(lay.get("title"))]
    return found


def values(v):
    """A trace's array as a list: plotly writes numpy arrays as base64 typed arrays."""
    import base64

    import numpy as np

    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v)


def _segments(data):
    """Every straight piece of every line trace, as ``((x0, y0), (x1, y1))``."""
    for tr in data:
        if tr.get("mode") != "lines":
            continue
        run = []
        for x, y in [*zip(values(tr["x"]), values(tr["y"]), strict=True), (None, None)]:
            if x is None:
                yield from itertools.pairwise(run)
                run = []
            else:
                run.append((x, y))


def _crosses_box(a, b, box):
    """Whether the segment ``a``-``b`` (axis-parallel or not) meets the open box
    ``(x_lo, x_hi, y_lo, y_hi)``: sampled finely along its length."""
    x_lo, x_hi, y_lo, y_hi = box
    for i in range(201):
        t = i / 200
        x, y = a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])
        if x_lo < x < x_hi and y_lo < y < y_hi:
            return True
    return False


# ------------------------------------------------------------------ 1. the fusion graph's labels
@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-next-80b-a3b"])
def test_the_fusion_graphs_labels_are_clear_of_every_edge(tmp_path, model):
    """``fusion audit llama-3.1-8b --html``: the graph was laid out left to right with labels above
    the nodes, and edges ran through mlp_residual, attention, q_proj, v_proj and up_proj's labels.
    It is drawn top to bottom now, one row per topological generation, each label to its node's
    right. Pinned: every member of every group ``--json`` lists is drawn, labelled with its name's
    last part; no edge enters any label's box (its node's row, +-GRAPH_LABEL_BAND, from the node
    to GRAPH_LABEL_ROOM of the way to the next node); at the page's own width (its CSS max-width
    less the figure's margins) each label fits its room and its row's band holds the font."""
    from costmodel import html_figures as hf

    doc = json.loads(run_cli("fusion", "audit", model, "--json"))
    members = {m for gr in doc["groups"] for m in gr["members"]}
    _out, page = page_of(tmp_path, "fusion", "audit", model)
    data, layout = figure(page, "the graph")
    nodes = {}
    for tr in (t for t in data if t.get("mode") == "markers+text"):
        assert tr["textposition"] == "middle right"
        assert tr["textfont"]["size"] == hf.GRAPH_FONT_PX
        for x, y, label, hover in zip(
            values(tr["x"]), values(tr["y"]), tr["text"], tr["customdata"], strict=True
        ):
            nodes[hover.split(" (")[0]] = (x, y, html.unescape(label))
    assert members <= set(nodes)
    for name, (_x, _y, label) in nodes.items():
        short = name.split(".")[-1]
        assert label == short or (label.endswith("\u2026") and short.startswith(label[:-1]))
    # a label's room ends before the next node in its row
    for (_n, (x, y, _l)), (_m, (x2, y2, _l2)) in itertools.permutations(nodes.items(), 2):
        if y == y2 and x2 > x:
            assert x2 - x >= 1
    segments = list(_segments(data))
    assert segments
    for name, (x, y, _label) in nodes.items():
        box = (x + 1e-9, x + hf.GRAPH_LABEL_ROOM, y - hf.GRAPH_LABEL_BAND, y + hf.GRAPH_LABEL_BAND)
        hit = [(a, b) for a, b in segments if _crosses_box(a, b, box)]
        assert not hit, (name, hit[:3])
    # the geometry at the page's width: the CSS body width less the figure's side margins
    body = int(re.search(r"body\{[^}]*max-width:(\d+)px", page).group(1))
    margin = layout["margin"]
    plot_px = body - margin["l"] - margin["r"]
    assert hf.GRAPH_PLOT_PX <= plot_px
    x_lo, x_hi = layout["xaxis"]["range"]
    unit_px = plot_px / (x_hi - x_lo)
    widest = max(len(label) for _x, _y, label in nodes.values())
    assert widest * hf.GRAPH_CHAR_PX + 10 <= hf.GRAPH_LABEL_ROOM * unit_px
    y_lo, y_hi = layout["yaxis"]["range"]
    row_px = (layout["height"] - margin["t"] - margin["b"]) / (y_hi - y_lo)
    assert hf.GRAPH_LABEL_BAND * row_px >= hf.GRAPH_FONT_PX / 2
    # and every node inside the drawn range
    assert all(x_lo < x < x_hi and y_lo < y < y_hi for x, y, _l in nodes.values())


def test_a_long_node_name_is_cut_with_its_whole_name_in_the_hover():
    """A label longer than its room is cut with an ellipsis (the hover keeps the whole name)."""
    from costmodel.html_figures import graph_label

    assert graph_label("layer.mlp.up_proj", 12) == "up_proj"
    assert graph_label("layer.shared_expert_gate_proj", 8) == "shared_\u2026"
    assert len(graph_label("layer.shared_expert_gate_proj", 8)) == 8


# ------------------------------------------------------------------ 2. wide tables scroll in a box
def test_the_plans_table_scrolls_in_its_own_box_one_line_a_row(tmp_path):
    """``serve plans llama-3.1-8b --device h100 --html``: the 24-column plans table ran past the
    1150 px body; then it scrolled but was squeezed to the body's width, which broke "tp8 pp1 ep1
    m1" over four lines and "llama-3.1-8b" over two. Every rows table now sits in a
    ``div.cm-wide`` box whose CSS scrolls sideways, the table as wide as its cells on one line
    (each at most 32em: a long sentence still wraps); the table's rows are ``--json``'s plans,
    plan for plan."""
    plans = json.loads(run_cli("serve", "plans", "llama-3.1-8b", "--device", "h100", "--json"))
    _out, page = page_of(tmp_path, "serve", "plans", "llama-3.1-8b", "--device", "h100")
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert re.search(r"\.cm-wide\{[^}]*overflow-x:auto", css)
    assert re.search(r"table\.cm-rows\{[^}]*width:max-content", css)
    assert re.search(r"table\.cm-rows td\{[^}]*max-width:32em", css)
    assert page.count('<table class="cm-rows">') == page.count('<div class="cm-wide"><table class="cm-rows">')
    (table,) = [t for t in re.findall(r'<table class="cm-rows">(.*?)</table>', page) if "<th>plan</th>" in t]
    rows = re.findall(r"<tr>(.*?)</tr>", table)
    head = [html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", rows[0])]
    cells = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in rows[1:]]
    assert len(cells) == len(plans)
    for row, plan in zip(cells, plans, strict=True):
        assert row[head.index("plan")] == plan["plan"] and row[head.index("model")] == plan["model"]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: run in the page: each line count of the plans table's cells, the page's and the box's widths
_LAYOUT_PROBE = """<script>(function(){
var box=[...document.querySelectorAll('div.cm-wide')].find(d=>[...d.querySelectorAll('th')]
  .some(t=>t.textContent=='plan'));
var lines=[...box.querySelectorAll('td')].map(c=>{var r=document.createRange();r.selectNodeContents(c);
  return new Set([...r.getClientRects()].map(q=>Math.round(q.top))).size});
var long=document.getElementById('long');var r=document.createRange();r.selectNodeContents(long);
document.body.setAttribute('data-r',JSON.stringify({w:document.documentElement.scrollWidth,
  sw:box.scrollWidth,cw:box.clientWidth,lines:Math.max(...lines),
  long:new Set([...r.getClientRects()].map(q=>Math.round(q.top))).size}))})()</script>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_plans_page_laid_out_at_1400_px(tmp_path):
    """The same, laid out by chromium in a 1400 px window: the page is no wider than the window,
    the plans table is wider than its box (so the box scrolls), every cell of it is one line, and a
    rows table's 400-character sentence (added to the page) wraps over several."""
    from costmodel.html import rows_table

    _out, page = page_of(tmp_path, "serve", "plans", "llama-3.1-8b", "--device", "h100")
    sentence = rows_table([{"issue": "word " * 80}]).replace("<td>", '<td id="long">', 1)
    path = tmp_path / "w.html"
    path.write_text(page.replace("</body>", sentence + _LAYOUT_PROBE + "</body>"))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    cmd += [
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1400,2400",
        "--virtual-time-budget=10000",
    ]
    dom = subprocess.run(
        [*cmd, "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=180
    )
    m = re.search(r'data-r="([^"]+)"', dom.stdout)
    assert m, dom.stderr[-2000:]
    got = json.loads(html.unescape(m.group(1)))
    assert got["w"] <= 1400
    assert got["sw"] > got["cw"]
    assert got["lines"] == 1
    assert got["long"] > 1


# ------------------------------------------------------------------ 3. probe: notes and the 100 % line
def test_the_probe_page_lists_its_notes_and_draws_the_bound():
    """``probe --html``: the notes were joined with "; " into the bold headline cell (one block
    of 100 words), and the "achieved %" bars had no line at 100 %. By hand, a synthetic run: add
    measured in 1.6 ms against a 2 ms bound (125 %), a GEMM in 4 ms against 2 ms (50 %). Each note
    the text prints (``note: ...``) is one item of a normal-weight list; the figure has a line at
    x = 100 over the bars, and its x range holds both 100 and 125."""
    from costmodel.measure.calibrate import Calibration
    from costmodel.measure.microbench import BenchRow
    from costmodel.measure.probe import Measurement, ProbeResult
    from costmodel.measure.probe_report import ProbeReport, ProbeRequest

    def row(name, kind, pred, meas):
        return BenchRow(
            name, "memory", {}, 1e9, 1e7, 100.0, kind, pred, meas, pred / meas, 1e9 / meas, 1e7 / meas
        )

    rows = (row("add (1 pass)", "dram", 2e-3, 1.6e-3), row("gemm 64", "tensor", 2e-3, 4e-3))
    notes = ("add (1 pass) ran faster than its roof <too fast>", "GEMM e_max held at 1")
    res = ProbeResult([Measurement("bw:add", 2e-3, 0.01, bytes=24e6)], {"cpu": "synthetic"})
    report = ProbeReport(ProbeRequest(name="box"), res, rows, Calibration(0.8, 0.5, 10.0, notes=notes))
    page = report.to_html("probe")
    printed = [line[len("note: ") :] for line in report.to_text().splitlines() if line.startswith("note: ")]
    (ul,) = re.findall(r'<ul class="cm-notes">(.*?)</ul>', page)
    assert [html.unescape(li) for li in re.findall(r"<li>(.*?)</li>", ul)] == printed == list(notes)
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert re.search(r"ul\.cm-notes\{[^}]*font-weight:normal", css)
    assert 'data-key="notes"' not in page  # no longer in the bold headline
    data, layout = figure(page, "microbenchmarks")
    assert sorted(values(data[0]["x"])) == pytest.approx([50.0, 125.0])
    (line,) = [s for s in layout["shapes"] if s["type"] == "line"]
    assert line["x0"] == line["x1"] == 100 and line["layer"] == "above"
    lo, hi = layout["xaxis"]["range"]
    assert lo == 0 and hi >= 125
    assert data[0]["insidetextanchor"] == "start"  # the bars' labels start at 0, clear of the line
    assert any("100%" in a["text"] for a in layout["annotations"])


# ------------------------------------------------------------------ 4. prefill: every bar labelled
def test_the_prefill_breakdown_labels_every_bar_with_the_json_numbers(tmp_path):
    """``prefill llama-3.1-8b --html``: the "KV cache (DRAM read)" bar was 0 and had no label
    (plotly draws no text on a bar of no width). Each bar is now ``prefill --json``'s number (ms)
    and carries a text; the zero KV bar's text, drawn beside it, says it is 0 and why."""
    doc = json.loads(run_cli("prefill", "llama-3.1-8b", "--json"))
    assert doc["kv_read_s"] == 0  # a prefill reads no cached context before its prompt
    _out, page = page_of(tmp_path, "prefill", "llama-3.1-8b")
    (bar, *_), _layout = figure(page, "step time: what it moves")
    drawn = dict(zip(bar["y"], values(bar["x"]), strict=True))
    texts = dict(zip(bar["y"], bar["text"], strict=True))
    where = dict(zip(bar["y"], bar["textposition"], strict=True))
    want = {
        "weights (DRAM read)": doc["weight_read_s"],
        "KV cache (DRAM read)": doc["kv_read_s"],
        "DRAM in all (weights + KV + activations)": doc["terms_s"]["dram"],
        "compute: tensor": doc["terms_s"]["tensor"],
        "whole step as one roofline": doc["optimistic_step_s"],
        "step bound (sum of kernel bounds)": doc["step_s"],
    }
    for label, seconds in want.items():
        assert drawn[label] == pytest.approx(seconds * 1e3), label
    assert all(t.strip() for t in texts.values())
    kv = "KV cache (DRAM read)"
    assert texts[kv].startswith("0: no cached context before the prompt")
    assert where[kv] == "outside"
    assert all(p == "auto" for label, p in where.items() if drawn[label] != 0)


# ------------------------------------------------------------------ 5. simulate: running and batch
def test_the_timeline_draws_running_and_batch_apart(tmp_path):
    """``simulate llama-3.1-8b --device h100 --rate 10 --html``: "running" (solid, blue) and
    "batch" (dashed, green) lay on each other, equal at every sample, and read as one teal line.
    Running is now a wide pale band and batch a thin line of another colour drawn over it, and
    the note says where the two counts agree: the drawn arrays decide it."""
    argv = ("simulate", "llama-3.1-8b", "--device", "h100", "--rate", "10", "--requests", "200")
    doc = json.loads(run_cli(*argv, "--json"))
    _out, page = page_of(tmp_path, *argv)
    data, _layout = figure(page, "timeline")
    names = [t["name"] for t in data]
    running, batch = data[names.index("running")], data[names.index("batch")]
    assert names.index("batch") > names.index("running")  # drawn on top
    assert running["line"]["color"] != batch["line"]["color"]
    assert running["line"]["width"] >= 4 * batch["line"]["width"]
    assert running.get("opacity", 1) < 1 <= batch.get("opacity", 1)
    same = values(running["x"]) == values(batch["x"]) and values(running["y"]) == values(batch["y"])
    note = re.search(r'<p class="cm-note">([^<]*samples[^<]*)</p>', page).group(1)
    assert f"the run has {doc['iterations']:,} iterations" in note
    assert ("Running and batch are equal at all" in note) == same
    assert same  # this run holds every running sequence in its batch


def test_the_running_vs_batch_note_counts_the_samples_that_differ():
    """The note's count, by hand: running 3, 4, 4 against batch 3, 2, 4 differ at 1 of 3."""
    import numpy as np

    from graphs.serving.present.html_studies import _running_vs_batch

    assert _running_vs_batch(np.array([3, 4, 4]), np.array([3, 2, 4])).startswith(
        "Running and batch differ at 1 of 3 samples"
    )
    assert _running_vs_batch(np.array([1, 2]), np.array([1, 2])).startswith(
        "Running and batch are equal at all 2 samples"
    )
