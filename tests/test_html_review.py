"""The review of the ``--html`` pages (findings of the twenty-second session): each test runs the
command, reads what its text or ``--json`` says for the same inputs, and checks the page draws the
same thing. Figures are read back from the page: the JSON of each ``Plotly.newPlot`` call."""

import contextlib
import html
import io
import itertools
import json
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")

from graphs.cli import main

#: a --hw-file device's name as a user wrote it: a link, a style, an entity, a hover template
EVIL = (
    'dev<a href="https://example.com/phish">CLICK</a><span style="font-size:60px;color:red">BIG</span>'
    "&amp;%{x}"
)


def run_cli(*argv, code=0):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    assert got == code, err.getvalue()
    return out.getvalue()


def figures(page: str) -> list[tuple[list, dict]]:
    """Each figure's ``(data, layout)`` as the page hands them to plotly.js."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        data, end = dec.raw_decode(page, m.end())
        end = re.compile(r",\s*").match(page, end).end()
        layout, _ = dec.raw_decode(page, end)
        out.append((data, layout))
    return out


def strings(tree):
    if isinstance(tree, str):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from strings(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from strings(v)


def page_of(tmp_path, *argv, name="p.html", code=0):
    path = tmp_path / name
    out = run_cli(*argv, "--html", str(path), code=code)
    return out, path.read_text()


def hostile_device(tmp_path):
    """A ``--hw-file`` whose one device (alias ``evil``) is named :data:`EVIL`: an H100-like box."""
    spec = tmp_path / "evil.toml"
    spec.write_text(
        f"""[sources]
s = "a test"

[devices.'{EVIL}']
aliases = ["evil"]
power_w = 400
power_source = "s"
roofs = [
  {{ unit = "tensor", precision = "bf16", peak_flops_per_s = 400e12, source = "s" }},
  {{ unit = "vector", precision = "fp32", peak_flops_per_s = 50e12, source = "s" }},
  {{ unit = "sfu", precision = "fp32", peak_flops_per_s = 2e12, source = "s" }},
]
memory = [
  {{ name = "dram", bandwidth_bytes_per_s = 2e12, capacity_bytes = "64*1024**3", source = "s" }},
]
links = [
  {{ name = "scale_up", bandwidth_bytes_per_s = 200e9, latency_s = 2e-6, source = "s" }},
]
"""
    )
    return spec


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "llama-3.1-8b", "--device", "evil", "--batch", "8"],
        ["model", "analyze", "llama-3.1-8b", "--device", "evil"],
        ["search", "llama-3.1-8b", "--device", "evil", "--batches", "1..64", "--ctxs", "4096", "--quiet"],
        ["sweep", "llama-3.1-8b", "--device", "evil", "--batches", "1,8", "--ctxs", "1024"],
        ["serve", "plans", "llama-3.1-8b", "--device", "evil", "--plans", "1x1x1x1,2x1x1x1"],
        [
            *("size", "llama-3.1-8b", "--rate", "2", "--slo-ttft", "1", "--slo-tpot", "0.05"),
            *("--device", "evil", "--requests", "50", "--objective", "gpus", "--quiet"),
        ],
    ],
    ids=["decode", "analyze", "search", "sweep", "plans", "size"],
)
def test_a_device_name_is_drawn_as_text_in_every_figure(tmp_path, argv):
    """The review's evil2.toml: a device named with ``<a href>`` and ``<span style>`` put a live
    link and 60 px red text into the roofline's title, the search's winners, the size bars, the
    sweep and plans hovers. plotly renders that markup and decodes ``&amp;``, so every string of
    a figure that holds the name must hold it with ``&``, ``<`` and ``>`` as entities (what the
    standard library's ``html.escape`` writes, quotes aside), and a hover template never holds a
    bare ``%{x}`` of the name."""
    spec = hostile_device(tmp_path)
    _out, page = page_of(tmp_path, "--hw-file", str(spec), *argv)
    shown = html.escape(EVIL, quote=False)
    assert "&lt;a href" in shown and "&amp;amp;" in shown  # the input, as text
    figs = figures(page)
    assert figs
    held = 0
    for data, layout in figs:
        for s in strings([data, layout]):
            assert "<a " not in s and "<span" not in s and "</a>" not in s, s
            held += shown in s or shown.replace("%", "&#37;") in s
        for trace in data:
            template = trace.get("hovertemplate", "")
            assert "CLICK" not in template or "%{x}" not in template, template
    assert held > 0  # the name is drawn somewhere, as itself


def test_the_analyze_page_draws_the_tp_it_was_asked(tmp_path):
    """``model analyze --tp 2``: the text priced one device's share at tp 2 and the page drew tp 1
    (header ``tp 1``, the ledger's largest batch at tp 1, q_proj's weight ``[4096, 4096]`` on hover).
    Each part now comes from the same tp: the ledger's largest batch is ``--json``'s
    ``capacity.max_batch``; q_proj's weight at tp 2 is Llama-3.1-8B's ``[d_model, n_heads d_head
    / 2] = [4096, 2048]``, its FLOPs ``2 x 4096 x 2048 = 16.78 MFLOP`` (the text's row)."""
    argv = ("model", "analyze", "llama-3.1-8b", "--device", "h100", "--tp", "2")
    fit = json.loads(run_cli(*argv, "--json"))["capacity"]
    assert fit["tp"] == 2
    out, page = page_of(tmp_path, *argv)
    bound = re.search(r"-> (\S+) tokens/s over the 2 devices", out)
    assert bound, out
    assert re.search(r"layers\.q_proj +gemm +32 +16\.78 M", out)
    assert f'<td data-key="tokens/s">{bound.group(1)} over the 2 devices</td>' in page
    assert "<th>tp</th><td><code>2</code>" in page
    assert "batch 1, ctx 4096, tp=2</h1>" in page
    assert f"largest batch that fits = {fit['max_batch']}" in page
    hovers = [s for data, _ in figures(page) for s in strings(data) if "<b>layers.q_proj</b>" in s]
    assert len(hovers) == 1 and "weight[4096, 2048] bf16" in hovers[0] and "FLOPs 16.78 MFLOP" in hovers[0]


def _unescaped(page: str) -> str:
    return html.unescape(page)


@pytest.mark.parametrize(
    ("argv", "bound"),
    [
        (
            ["decode", "mixtral-8x7b", "--device", "h100", "--tp", "2", "--ep", "2", "--batch", "16"],
            r"TPOT bound (\S+ \S+)",
        ),
        (
            ["prefill", "mixtral-8x7b", "--device", "h100", "--tp", "2", "--ep", "2", "--seq", "2048"],
            r"TTFT lower bound \(sum of kernel bounds\): (\S+ \S+)",
        ),
        (
            [
                *("decode", "mixtral-8x7b", "--device", "h100", "--tp", "2", "--ep", "4", "--batch", "64"),
                *("--routing", "zipf:1.2", "--placement", "balanced", "--replicate-hot", "2"),
            ],
            r"TPOT bound (\S+ \S+)",
        ),
    ],
    ids=["decode-ep2", "prefill-ep2", "decode-ep4-zipf"],
)
def test_an_ep_page_draws_the_step_its_headline_prices(tmp_path, argv, bound):
    """``decode mixtral-8x7b --tp 2 --ep 2 --batch 16``: the text's TPOT bound is 8.658 ms, the
    page's nodes summed to 15.263 ms (every expert on one rank: the ep 1 step) and its ledger put
    every expert's weights on each device. The node table now sums to the text's bound (the
    step bound is the sum of its kernels' bounds), and the ledger's largest batch is ``--json``'s
    ``capacity.max_batch`` (the routed experts spread over the EP ranks)."""
    out = run_cli(*argv)
    want = re.search(bound, out)
    assert want, out
    fit = json.loads(run_cli(*argv, "--json"))["capacity"]
    assert fit["ep"] > 1
    _out, page = page_of(tmp_path, *argv)
    text = _unescaped(page)
    summed = re.search(r"The \d+ nodes' bounds sum to (\S+ \S+)\.", text)
    assert summed and summed.group(1) == want.group(1)
    assert f"ep={fit['ep']}: the routed experts spread over the {fit['ep']} EP ranks" in text
    assert f"largest batch that fits = {fit['max_batch']}" in text


def _headline(page: str, key: str) -> str | None:
    m = re.search(rf'<td data-key="{re.escape(key)}">([^<]*)</td>', page)
    return html.unescape(m.group(1)) if m else None


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "llama-3.1-70b", "--device", "h100", "--ignore-capacity"],
        ["prefill", "llama-3.1-70b", "--device", "h100", "--seq", "512", "--ignore-capacity"],
        ["model", "analyze", "llama-3.1-70b", "--device", "h100", "--ignore-capacity"],
    ],
    ids=["decode", "prefill", "analyze"],
)
def test_a_page_of_a_point_that_does_not_fit_says_so(tmp_path, argv):
    """Llama-3.1-70B's 141 GB of bf16 weights on one 80 GB H100 (by hand: 70.6e9 params x 2 B):
    the text opens with "does not fit on 1×h100-sxm ... the numbers below are for a point that
    cannot run"; the page showed TPOT and a throughput ceiling as if it ran. Its first headline
    is now the text's first line, word for word."""
    out, page = page_of(tmp_path, *argv)
    first = out.splitlines()[0]
    assert first.startswith("does not fit on 1×h100-sxm") and "cannot run" in first
    assert _headline(page, "does not fit") == first
    assert re.search(r'<td data-key="([^"]+)"', page).group(1) == "does not fit"  # the first headline


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "llama-3.1-8b", "--device", "h100", "--batch", "8"],
        ["decode", "llama-3.1-70b", "--device", "h100", "--ignore-capacity"],
    ],
    ids=["fits", "none-fits"],
)
def test_the_decode_page_caps_the_throughput_ceiling_as_the_text_does(tmp_path, argv):
    """The page showed "throughput ceiling 6,099 tokens/s" for Llama-3.1-8B at batch 8, where
    the text adds "capped by memory: at most batch 129 fits at ctx 4096, where throughput reaches
    5,033 tokens/s" (and for 70B on one H100 "at most batch 0 fits ..., so no batch runs")."""
    out, page = page_of(tmp_path, *argv)
    cap = re.search(r"capped by memory: (at most batch .+)", out)
    assert cap, out
    assert _headline(page, "capped by memory") == cap.group(1)


def values(v):
    """A trace's array as a list: plotly writes numpy arrays as base64 typed arrays."""
    import base64

    import numpy as np

    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v)


@pytest.mark.parametrize(
    ("argv", "who"),
    [
        (["--disagg", "1:2", "--link-bandwidth", "50e9"], ["prefill 0", "decode 0", "decode 1"]),
        (["--replicas", "2"], ["replica 0", "replica 1"]),
    ],
    ids=["disagg", "replicas"],
)
def test_the_timeline_draws_each_replica_as_its_own_line(tmp_path, argv, who):
    """``simulate --disagg 1:2``: the replicas' samples interleave in time, and the page drew them
    as one line per series that jumped between the prefill replica's and the decode replicas'
    values at every sample (a solid comb). Each replica (from the deployment asked for: 1 prefill
    + 2 decode, or 2 replicas) now has its own lines, each running forward in time."""
    base = ["simulate", "llama-3.1-8b", "--device", "h100", "--requests", "100", "--rate", "5", "--quiet"]
    _out, page = page_of(tmp_path, *base, *argv)
    timeline = next(data for data, layout in figures(page) if "timeline" in str(layout.get("title")))
    batch = {tr["name"]: tr for tr in timeline if tr["name"].startswith("batch")}
    assert sorted(batch) == sorted(f"batch, {w}" for w in who)
    for tr in batch.values():
        t = values(tr["x"])
        assert len(t) > 1 and all(b >= a for a, b in itertools.pairwise(t))
    kv = [tr for tr in timeline if tr["name"].startswith("KV blocks used %")]
    assert len(kv) == len(who)


def test_the_roofline_draws_no_collective_against_the_dram_roofs(tmp_path):
    """Llama-3.1-8B at tp 2: the text's node table has 4 nodes bound by ``link:scale_up`` (the
    embedding's, o_proj's and down_proj's all-reduces and the logits' all-gather). The roofline
    drew the all-reduces at 0.125 FLOP per link byte on its "FLOP per DRAM byte" axis, under a
    note saying collectives appear in the table only; they are now left out, and counted."""
    argv = ("model", "analyze", "llama-3.1-8b", "--device", "h100", "--tp", "2")
    out = run_cli(*argv)
    linked = [line.split()[0] for line in out.splitlines() if " link:scale_up " in line]
    assert len(linked) == 4
    _out, page = page_of(tmp_path, *argv)
    data, layout = next((d, lay) for d, lay in figures(page) if "roofline" in str(lay.get("title")))
    assert not [tr["name"] for tr in data if "link" in tr.get("name", "")]
    drawn = " ".join(s for tr in data for s in strings(tr.get("text", [])))
    assert not [n for n in linked if f"<b>{n}</b>" in drawn]
    assert "4 link-bound collective(s)" in layout["title"]["text"]
    assert "layers.q_proj" in drawn


def test_the_search_page_numbers_its_winners_instead_of_overprinting_them(tmp_path):
    """Two contexts' winners: the page wrote each winner's whole label beside its point, and the
    labels of nearby winners overprinted each other and ran off the plot. Each distinct winning
    point (from ``--json``'s ``best_by_ctx``) is now a numbered star, and a table under the plot
    names its objectives and plan; no text annotation is left on the plot."""
    argv = ("search", "llama-3.1-8b", "--batches", "1,8,64", "--ctxs", "1024,4096", "--quiet")
    doc = json.loads(run_cli(*argv, "--json"))
    points = {
        (p["plan"], p["batch"], p["ctx"]) for best in doc["best_by_ctx"].values() for p in best.values()
    }
    assert len(points) >= 2
    _out, page = page_of(tmp_path, *argv)
    data, layout = next((d, lay) for d, lay in figures(page) if "Pareto" in str(lay.get("title")))
    assert not layout.get("annotations")
    stars = [tr for tr in data if tr["name"].startswith("winners")]
    assert len(stars) == 1 and stars[0]["text"] == [str(n) for n in range(1, len(points) + 1)]
    for plan, batch, ctx in points:
        assert any(f": {plan}, batch {batch}, ctx {ctx}" in s for s in stars[0]["customdata"])


def test_the_search_hover_names_its_row_instead_of_repeating_it(tmp_path):
    """A frontier point's hover copied its whole row of the table under the plot (plan, batch,
    context, TTFT, TPOT, both rates, energy: 8 lines, 9.3 kB of hover text for the 27 points of a
    3-device bf16/fp8 search). It now says which point it is (its row number in that table, plan,
    batch, context) and the two rates it is drawn at; each named row (``--json``'s frontier, in
    order) is that point, and its rates are the table's as the trace draws them."""
    argv = ("search", "llama-3.1-8b", "--batches", "1,8,64", "--ctxs", "1024,4096", "--quiet")
    doc = json.loads(run_cli(*argv, "--json"))
    _out, page = page_of(tmp_path, *argv)
    data, _layout = next((d, lay) for d, lay in figures(page) if "Pareto" in str(lay.get("title")))
    drawn = [
        (s, x, y)
        for tr in data
        if tr["name"].startswith("ctx ")
        for s, x, y in zip(tr["text"], tr["x"], tr["y"], strict=True)
    ]
    assert len(drawn) == len(doc["frontier"]) == 6
    for text, x, y in drawn:
        row = int(re.match(r"row (\d+) of the frontier's points: ", text).group(1))
        p = doc["frontier"][row - 1]
        assert text.endswith(f": {p['plan']}, batch {p['batch']}, ctx {p['ctx']}")
        assert (x, y) == (p["tokens_per_s_per_device"], p["tokens_per_s_per_user"])
        assert "TTFT" not in text and "energy" not in text
    template = {tr["hovertemplate"] for tr in data if tr["name"].startswith("ctx ")}
    assert template == {
        "%{text}<br>%{y:,.1f} tokens/s per user, %{x:,.0f} tokens/s per device<extra></extra>"
    }
    # the table's row column numbers the --json frontier's order
    table = page[page.index("<h2>the frontier&#x27;s points</h2>") :]
    for n, p in enumerate(doc["frontier"], 1):
        assert (
            f"<tr><td>{n}</td><td>{html.escape(p['plan'])}</td><td>{p['batch']}</td><td>{p['ctx']}</td>"
            in table
        )


def test_a_search_point_past_the_table_keeps_its_whole_row_on_hover():
    """The frontier's table shows 50 rows (costmodel.html.MAX_TABLE_ROWS) and counts the rest: a
    point past them has only its hover, which keeps the whole row (the --json point's values)."""
    from graphs.serving.present.html_studies import _point_hover

    p = {"plan": "h100-sxm bf16/bf16 tp1 pp1 ep1 m1", "batch": 8, "ctx": 1024, "ttft_s": 0.017}
    p |= {"tpot_s": 0.004831, "tokens_per_s_per_user": 207.0, "tokens_per_s_per_device": 1656.1}
    assert (
        _point_hover(50, p)
        == "row 50 of the frontier's points: h100-sxm bf16/bf16 tp1 pp1 ep1 m1, batch 8, ctx 1024"
    )
    assert _point_hover(51, p).split("<br>") == [
        "row 51 of the frontier's points (the table shows 50)",
        "plan (device dtypes tp pp ep micro-batches): h100-sxm bf16/bf16 tp1 pp1 ep1 m1",
        "batch: 8",
        "context (tokens): 1024",
        "TTFT (s): 0.017",
        "TPOT (ms): 4.83",
        "tokens/s per user: 207.0",
        "tokens/s per device: 1,656",
    ]


def test_the_sweep_hover_tells_its_points_apart_and_shows_their_rates(tmp_path):
    """``sweep --weight-dtypes bf16,fp8``: the bf16 and fp8 points' hovers both read
    ``h100-sxm batch 8 ctx 1024`` and showed no tokens/s. Each now names the text table's
    weights, KV and tp columns and its two rates as the table prints them (``.1f``)."""
    argv = ("sweep", "llama-3.1-8b", "--device", "h100", "--batches", "8,64", "--ctxs", "1024")
    argv += ("--weight-dtypes", "bf16,fp8")
    doc = json.loads(run_cli(*argv, "--json"))
    _out, page = page_of(tmp_path, *argv)
    (data, _layout), *_ = figures(page)
    hovers = [s for tr in data if tr["name"] == "points that fit" for s in tr["text"]]
    assert len(hovers) == len(set(hovers)) == len(doc["points"]) == 4
    for p in doc["points"]:
        want = (
            f"{p['device']} weights {p['weight_dtype']}, KV {p['kv_dtype']}, tp {p['tp']}, batch {p['batch']}, "
            f"ctx {p['ctx']}<br>{p['tokens_per_s_per_user']:.1f} tok/s/user, "
            f"{p['tokens_per_s_per_device']:.1f} tok/s/device"
        )
        assert want in hovers


def _on_segment(p, a, b, eps=1e-9):
    """Whether point ``p`` lies on the segment ``a``-``b`` (2-D)."""
    (px, py), (ax, ay), (bx, by) = p, a, b
    cross = (bx - ax) * (py - ay) - (by - ay) * (px - ax)
    if abs(cross) > eps:
        return False
    return min(ax, bx) - eps <= px <= max(ax, bx) + eps and min(ay, by) - eps <= py <= max(ay, by) + eps


def test_the_fusion_graph_gives_each_edge_its_own_read_and_runs_no_edge_through_a_node(tmp_path):
    """``fusion audit llama-3.1-8b --phase prefill --seq 4096``: the three edges out of attn_norm
    each said "134.22 MB, 40.06 us" (the whole boundary: one write plus three kernels' reads), and
    attn_residual -> mlp_residual ran straight along the row through mlp_norm, gate_proj, act and
    down_proj. By hand each read is 4096 tokens x 4096 x 2 B = 33.55 MB, and the boundary
    (``--json``) is the write and three reads, 4 x 33.55 = 134.22 MB. No node lies on any edge's
    line but its own two ends."""
    argv = ("fusion", "audit", "llama-3.1-8b", "--phase", "prefill", "--seq", "4096", "--device", "h100")
    doc = json.loads(run_cli(*argv, "--json"))
    norm = next(b for b in doc["boundaries"] if b["producer"] == "layer.attn_norm")
    assert norm["bytes"] == 4 * 4096 * 4096 * 2 and len(norm["consumers"]) == 3
    _out, page = page_of(tmp_path, *argv)
    data, _layout = next((d, lay) for d, lay in figures(page) if "the graph" in str(lay.get("title")))
    for proj in ("q_proj", "k_proj", "v_proj"):
        (hover,) = [
            tr["hovertemplate"]
            for tr in data
            if tr.get("hovertemplate", "").startswith(f"boundary layer.attn_norm -> layer.{proj}:")
        ]
        assert "this read 33.55 MB" in hover and "the whole boundary" in hover and "134.22 MB" in hover
    nodes = {
        (x, y)
        for tr in data
        if tr.get("mode") == "markers+text"
        for x, y in zip(values(tr["x"]), values(tr["y"]), strict=True)
    }
    edges = [tr for tr in data if tr.get("mode") == "lines"]
    assert edges
    for tr in edges:
        xs, ys = values(tr["x"]), values(tr["y"])
        lines, run = [], []
        for x, y in zip(xs, ys, strict=True):  # a trace of several edges separates them with None
            if x is None:
                lines.append(run)
                run = []
            else:
                run.append((x, y))
        lines.append(run)
        for line in (r for r in lines if r):
            ends = {line[0], line[-1]}
            for a, b in itertools.pairwise(line):
                hit = [p for p in nodes - ends if _on_segment(p, a, b)]
                assert not hit, (tr.get("hovertemplate"), hit)


def test_a_plot_page_inlines_no_plotly_and_needs_no_plotly(tmp_path, monkeypatch):
    """``plot roofline --html``: the page holds the PNG the command wrote and no plotly figure,
    yet it inlined the 1.19 MB plotly.js bundle (each page 1.23-1.26 MB) and refused to run
    without the html extra. With plotly made unimportable, the page is written; it holds the
    image as written (its base64) and no script at all."""
    import base64

    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "plotly.offline", None)
    png, path = tmp_path / "r.png", tmp_path / "r.html"
    run_cli(
        "plot",
        "roofline",
        "--model",
        "llama-3.1-8b",
        "--device",
        "h100",
        "--out",
        str(png),
        "--html",
        str(path),
    )
    page = path.read_text()
    assert "<script" not in page
    assert base64.b64encode(png.read_bytes()).decode() in page
    assert path.stat().st_size < png.stat().st_size * 4 / 3 + 20_000  # the image and the text around it


def test_both_timeline_panels_keep_their_axis_titles(tmp_path):
    """The timeline's top panel (running, waiting, batch: sequences) lost its y-axis title: the
    page's styling set every first axis title to "" after the panel had been labelled."""
    argv = ("simulate", "llama-3.1-8b", "--device", "h100", "--requests", "50", "--rate", "5", "--quiet")
    _out, page = page_of(tmp_path, *argv)
    layout = next(lay for _d, lay in figures(page) if "timeline" in str(lay.get("title")))
    assert layout["yaxis"]["title"]["text"] == "sequences"
    assert layout["yaxis2"]["title"]["text"] == "KV blocks used (%)"
    assert layout["xaxis2"]["title"]["text"] == "time (s)"


@pytest.mark.parametrize(
    ("argv", "empty", "code"),
    [
        (
            [
                *("size", "llama-3.1-8b", "--rate", "50", "--slo-ttft", "0.01", "--slo-tpot", "0.001"),
                *("--device", "h100", "--tp", "1", "--requests", "50", "--no-disagg", "--quiet"),
            ],
            r"(\d+) candidate\(s\) simulated",
            1,  # none meets the SLOs
        ),
        (
            [
                *("search", "llama-3.1-8b", "--device", "h100", "--batches", "1..8", "--ctxs", "4096"),
                *("--slo-tpot", "0.0001", "--quiet"),
            ],
            r"Pareto frontier \((\d+) points",
            0,
        ),
    ],
    ids=["size", "search"],
)
def test_a_page_with_nothing_to_plot_draws_no_empty_axes(tmp_path, argv, empty, code):
    """A TPOT SLO of 1 ms (size) or 0.1 ms (search) that Llama-3.1-8B's 4.5 ms decode floor on an
    H100 cannot meet: the text says 0 candidates simulated, a frontier of 0 points; the pages
    drew an empty bar chart (its ticks "0" and "-1" overprinted) and empty log-log axes."""
    out, page = page_of(tmp_path, *argv, code=code)
    m = re.search(empty, out)
    assert m and m.group(1) == "0", out
    assert figures(page) == []


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (
            ["decode", "mixtral-8x7b", "--device", "h100", "--tp", "2", "--ep", "2"],
            r"  energy (.+?); \S+ device-hours",
        ),
        (["prefill", "llama-3.1-8b", "--seq", "512"], r"tokens/s, (\S+ mJ/token \(.+\))$"),
    ],
    ids=["decode", "prefill"],
)
def test_a_step_pages_energy_is_the_texts(tmp_path, argv, pattern):
    """Prefill's page said "0.0117 J/token (TDP x 1 device(s) x time)" where its text says
    "11.695 mJ/token": three significant digits hid the value; decode's page said "x time" where
    the text says "x TPOT / batch" and names the tp x ep split. The page's energy is the text's
    clause, word for word."""
    out, page = page_of(tmp_path, *argv)
    m = re.search(pattern, out, re.MULTILINE)
    assert m, out
    assert _headline(page, "energy") == m.group(1)


def test_a_node_with_no_flops_and_no_bytes_has_no_intensity(tmp_path):
    """Prefill's ``head.last_token`` (a view: 0 FLOP, 0 B in the text's table) showed an intensity
    of "inf"; 0 / 0 is undefined, written "-" (a node with FLOPs and no bytes stays "inf")."""
    out, page = page_of(tmp_path, "model", "analyze", "llama-3.1-8b", "--phase", "prefill", "--seq", "512")
    assert re.search(r"head\.last_token +view +1 +0\.00 +0\.00 ", out), out
    row = re.search(
        r"<td>head\.last_token</td><td>view</td><td>1</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>",
        page,
    )
    assert row and row.groups() == ("0.00 FLOP", "0.00 B", "-")


def test_the_max_rate_page_prints_the_rate_as_the_text_does(tmp_path):
    """``simulate --max-rate``: the page said "33.886 requests/s", the text "33.89"."""
    argv = ("simulate", "llama-3.1-8b", "--device", "h100", "--requests", "200", "--max-rate")
    out, page = page_of(tmp_path, *argv, "--slo-ttft", "0.5", "--slo-tpot", "0.02", "--quiet")
    m = re.search(r"max rate (\S+ requests/s = \S+ requests/s per device) ", out)
    assert m, out
    assert _headline(page, "max rate") == m.group(1)


def test_the_search_hover_shows_the_tables_numbers(tmp_path):
    """The search page's hover repeated each frontier point's raw keys at full precision
    (``tpot_s: 0.0017537430230555558``) beside a table column "TPOT (ms) 1.75". The hover now
    names the point's row of that table (the whole row was a copy of it), whose cells are the
    table's headings and formats (TPOT in ms to 3 significant digits, from ``--json``)."""
    argv = ("search", "llama-3.1-8b", "--batches", "1,8", "--ctxs", "1024", "--quiet")
    doc = json.loads(run_cli(*argv, "--json"))
    _out, page = page_of(tmp_path, *argv)
    data, _layout = next((d, lay) for d, lay in figures(page) if "Pareto" in str(lay.get("title")))
    hovers = [s for tr in data if tr["name"].startswith("ctx") for s in tr["text"]]
    assert len(hovers) == len(doc["frontier"])
    table = page[page.index("<h2>the frontier&#x27;s points</h2>") :]
    assert "<th>row</th>" in table and "<th>TPOT (ms)</th>" in table
    for n, p in enumerate(doc["frontier"], 1):
        row = re.search(rf"<tr><td>{n}</td>(.*?)</tr>", table).group(1)
        assert f"<td>{1e3 * p['tpot_s']:.3g}</td>" in row and f"<td>{p['batch']}</td>" in row
    assert not any("tpot_s" in h or "TPOT" in h for h in hovers)


def test_the_compare_pages_slo_lines_are_the_users(tmp_path):
    """``simulate --compare``: the SLO lines were named after one column ("predicted (vllm
    kernels) SLO 0.5 s"), as if the objective were that answer's; they are the SLOs given."""
    pytest.importorskip("aiconfigurator_core", reason="the measured extra is not installed")
    argv = ("simulate", "llama-3.1-8b", "--device", "h100", "--requests", "50", "--rate", "5")
    argv += ("--predict", "vllm", "--compare", "--slo-ttft", "0.5", "--slo-tpot", "0.02", "--quiet")
    _out, page = page_of(tmp_path, *argv)
    names = {tr.get("name") for data, _ in figures(page) for tr in data if "SLO" in str(tr.get("name"))}
    assert names == {"TTFT SLO 0.5 s", "TPOT SLO 0.02 s"}


def test_wide_tables_scroll_and_long_lines_wrap_inside_the_page():
    """The serve plans table (24 columns), the size candidates and the ``<pre>`` report lines ran
    past the 1150 px body (a horizontal scroll of the whole page at 1400 px). A wide table now
    scrolls in its own box and a report line wraps."""
    from costmodel.html import Section, page_html, rows_table

    row = {f"column_{i}": "x" * 20 for i in range(24)}
    page = page_html("t", {}, {}, [Section("s", (rows_table([row]), "<pre>" + "word " * 400 + "</pre>"))])
    css = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert re.search(r"\.cm-wide\{[^}]*overflow-x:auto", css)  # the box every rows table sits in
    assert '<div class="cm-wide"><table class="cm-rows">' in page
    assert re.search(r"pre\{[^}]*white-space:pre-wrap", css)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_wide_page_is_no_wider_than_the_window(tmp_path):
    """The same, measured: the size page (its candidates' table, 14 columns, and its report's
    long lines) laid out by chromium in a 1400 px window is at most 1400 px wide."""
    argv = (
        "size",
        "llama-3.1-8b",
        "--rate",
        "2",
        "--slo-ttft",
        "1",
        "--slo-tpot",
        "0.05",
        "--device",
        "h100",
    )
    _out, page = page_of(tmp_path, *argv, "--requests", "50", "--quiet")
    probe = "<script>document.body.setAttribute('data-w', document.documentElement.scrollWidth)</script>"
    path = tmp_path / "w.html"
    path.write_text(page.replace("</body>", probe + "</body>"))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    cmd += [
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1400,2400",
        "--virtual-time-budget=10000",
    ]
    dom = subprocess.run(
        [*cmd, "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=180
    )
    width = re.search(r'data-w="(\d+)"', dom.stdout)
    assert width, dom.stderr[-2000:]
    assert int(width.group(1)) <= 1400


def _page_tables(page: str) -> list[list[list[str]]]:
    """Each rows table of a page: its rows (the heading first) as lists of unescaped cells."""
    return [
        [
            [html.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", t)
        ]
        for t in re.findall(r'<table class="cm-rows">(.*?)</table>', page)
    ]


def test_the_fusion_plan_table_is_the_texts(tmp_path):
    """``fusion plan``'s page table had headings ``t | saved | tsaved`` and raw floats
    (``3.85876e+08``, ``0.00097238``) where the text prints "bytes, time (s), bytes saved, time
    saved (s)" with its digits; each page row is now the text's row, cell for cell."""
    out, page = page_of(tmp_path, "fusion", "plan", "llama-3.1-8b", "--method", "heuristic")
    lines = out.split("fused kernels, most time saved first:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    heading, rows = lines[0].split(), [line for line in lines[2:] if line.strip()]
    (table,) = [t for t in _page_tables(page) if t[0][0] == "kernel"]
    assert " ".join(table[0]).split() == heading
    assert len(table) - 1 == len(rows) > 0
    for cells, line in zip(table[1:], rows, strict=True):
        assert " ".join(cells).split() == line.split()


def test_the_probe_tables_are_the_texts():
    """``probe``'s page listed ``best_s 0.00172293`` and ``spread 0.190608`` (a fraction) where
    the text prints "best ms 1.723" and "spread % 19.1". By hand, the synthetic run below: bw:add
    best 2 ms (2.000), spread 0.01 (1.0 %), 24e6 B / 2e-3 s = 12.0 GB/s; mm best 10 ms."""
    from costmodel.measure.calibrate import Calibration
    from costmodel.measure.probe import Measurement, ProbeResult
    from costmodel.measure.probe_report import ProbeReport, ProbeRequest

    res = ProbeResult(
        [
            Measurement("bw:add", 2e-3, 0.01, bytes=24e6),
            Measurement("mm:numpy:fp32", 10e-3, 0.02, flops=2 * 1024**3),
        ],
        {"cpu": "synthetic"},
    )
    report = ProbeReport(ProbeRequest(name="box"), res, (), Calibration(0.8, 0.5, 10.0))
    (measured,) = [t for t in _page_tables(report.to_html("probe")) if t[0][0] == "measurement"]
    assert measured[0] == ["measurement", "best ms", "spread %", "GB/s", "GFLOP/s"]
    assert measured[1][:4] == ["bw:add", "2.000", "1.0", "12.0"]
    assert measured[2][:3] == ["mm:numpy:fp32", "10.000", "2.0"]
    text = report.to_text()
    for row in measured[1:]:
        assert re.search(r"\s+".join(map(re.escape, row)), text)


def test_the_fusion_audit_groups_table_says_its_units(tmp_path):
    """The fusion audit's "fused groups" table showed raw keys and floats (``flops 9.62366e+11``,
    ``time_before_s 0.00107755``); it now has headings with units and the headline's us. By hand,
    the gated MLP group at decode batch 1 on an H100 reads gate and up (2 x 4096 x 14336 x 2 B =
    234.88 MB) plus its input, ~70 us at 3.35 TB/s."""
    _out, page = page_of(tmp_path, "fusion", "audit", "llama-3.1-8b")
    (table,) = [t for t in _page_tables(page) if t[0][:2] == ["group", "members"]]
    assert table[0][-2:] == ["as separate kernels (us)", "fused (us)"]
    mlp = next(r for r in table[1:] if r[0] == "gate_proj+up_proj+act")
    assert mlp[1] == "gate_proj + up_proj + act" and mlp[4].startswith("235.") and mlp[4].endswith(" M")
    assert 69 < float(mlp[-1]) < 72


def test_each_roof_is_drawn_from_its_corners(tmp_path):
    """Each of the H100's roofs carried the same 121-point grid (22.7 KB of repeated arrays):
    ``min(P, beta I)`` is two straight pieces on log-log axes, so its two ends and its ridge draw
    it. By hand for the bf16 tensor roof: P = 989.4 TFLOP/s, beta = 3.35 TB/s, ridge I* = P /
    beta = 295.3 FLOP/B, where the roof reaches P."""
    _out, page = page_of(tmp_path, "decode", "llama-3.1-8b", "--device", "h100")
    data, _layout = next((d, lay) for d, lay in figures(page) if "roofline" in str(lay.get("title")))
    roofs = [tr for tr in data if tr.get("name", "").startswith("roof ")]
    assert len(roofs) > 3 and all(len(values(tr["x"])) == 3 for tr in roofs)
    (bf16,) = [tr for tr in roofs if tr["name"].startswith("roof tensor bf16")]
    x, y = values(bf16["x"]), values(bf16["y"])
    assert x[1] == pytest.approx(989.4e12 / 3.35e12, rel=1e-3) and y[1] == pytest.approx(989.4e12, rel=1e-3)
    assert y[0] == pytest.approx(3.35e12 * x[0], rel=1e-3) and y[2] == y[1]


def test_the_compare_page_draws_each_latency_cdf_once(tmp_path):
    """``simulate --compare``: the side-by-side section draws every answer's TTFT and TPOT CDFs
    (the simulated one among them), and the latency section drew that answer's again."""
    pytest.importorskip("aiconfigurator_core", reason="the measured extra is not installed")
    argv = ("simulate", "llama-3.1-8b", "--device", "h100", "--requests", "50", "--rate", "5")
    argv += ("--predict", "vllm", "--compare", "--slo-ttft", "0.5", "--slo-tpot", "0.02", "--quiet")
    _out, page = page_of(tmp_path, *argv)
    titles = [str(lay.get("title", {}).get("text")) for _d, lay in figures(page)]
    assert sum("time to first token" in t for t in titles) == 1
    assert sum("time per output token" in t for t in titles) == 1
    assert "end-to-end latency" in titles


def test_the_size_page_tables_its_candidates_in_the_texts_words(tmp_path):
    """``size --html``'s table of simulated candidates was headed by the fields' names
    (``ttft_at_percentile_s``, ``prefill_replicas``, ``expert_parallel``) with raw values
    (``0.0602458`` s). Its rows are now the text's lines cut into cells: each candidate's shape,
    P99 TTFT in s to 3 decimals, TPOT in ms, their shares of the SLOs and its cost, every cell read
    back off the line ``size`` prints for that candidate."""
    argv = ("size", "llama-3.1-8b", "--device", "h100,h200", "--rate", "5", "--slo-ttft", "0.5")
    argv += ("--slo-tpot", "0.05", "--requests", "60", "--no-disagg")
    out, page = page_of(tmp_path, *argv)
    lines = [
        line.split(": ", 1)[1] for line in out.splitlines() if re.match(r"\s+(winner|runner-up): ", line)
    ]
    table = page[page.index("<h2>simulated candidates</h2>") :]
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert heads[:6] == [
        "deployment",
        "P99 TTFT (s)",
        "TTFT, % of SLO",
        "P99 TPOT (ms)",
        "TPOT, % of SLO",
        "meets the SLOs",
    ]
    assert not [h for h in heads if "_" in h]
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(<td>.*?)</tr>", table)]
    assert len(rows) >= len(lines) >= 2
    for line in lines:  # the winner and runners-up: each a row whose cells the line writes
        row = next(r for r in rows if line.startswith(html.unescape(r[0]) + ": "))
        ttft, ttft_share, tpot, tpot_share, meets, per_h, blended, inp, outp = row[1:]
        assert f"P99 TTFT {ttft} s ({ttft_share} of SLO), P99 TPOT {tpot} ms ({tpot_share} of SLO); " in line
        assert f"{per_h}/h = {blended}/M tokens blended ({inp}/M input or {outp}/M output alone)" in line
        assert meets == "yes"


def test_a_size_candidate_without_a_price_says_why_in_its_cost_cell():
    from graphs.serving.planning.sizing import Deployment

    d = Deployment("h100-sxm", 1, 1, 0, 0, 1, 0.0602458, 0.00653149, True, None)
    cells = d.cells(0.5, 0.05)
    assert cells["P99 TTFT (s)"] == "0.060" and cells["P99 TPOT (ms)"] == "6.5"  # 60.2 ms, 6.53 ms
    assert cells["TTFT, % of SLO"] == "12%" and cells["TPOT, % of SLO"] == "13%"  # 0.0602/0.5, 0.00653/0.05
    assert cells["$/h"] == "no price: pass --price-per-hour" and d.line(0.5, 0.05).endswith(
        "; no price: pass --price-per-hour"
    )
