"""``--html``: self-contained interactive pages whose numbers are the command line's, checked
as text and, where Debian's chromium is installed, rendered headless in a real browser."""

import contextlib
import html
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.html import result_table
from costmodel.results import Result
from graphs.cli import main

ROOT = Path(__file__).resolve().parents[1]
MODEL = "llama-3.1-8b"

#: each kind of page: the command, and a pattern of its printed output whose group the page
#: must show verbatim in its headline (``data-key``)
COMMANDS = {
    "decode": (["decode", MODEL], r"TPOT bound (\S+ \S+)", "TPOT bound"),
    "prefill": (
        ["prefill", MODEL, "--seq", "512"],
        r"TTFT lower bound \(sum of kernel bounds\): (\S+ \S+)",
        "TTFT lower bound",
    ),
    "analyze": (["model", "analyze", MODEL], r"bound \(sum over nodes\): (\S+ ms)", "bound (sum over nodes)"),
    "simulate": (
        ["simulate", MODEL, "--rate", "20", "--quiet", "--slo-ttft", "0.5", "--slo-tpot", "0.05"],
        r"TTFT s +\S+ +\S+ +\S+ +(\S+)",
        "TTFT P99",
    ),
    "max_rate": (
        [
            "simulate",
            MODEL,
            "--max-rate",
            "--requests",
            "50",
            "--slo-ttft",
            "0.5",
            "--slo-tpot",
            "0.05",
            "--quiet",
        ],
        r"physical ceiling (\S+ requests/s)",
        "physical ceiling",
    ),
    "search": (
        ["search", MODEL, "--batches", "1,8,64", "--ctxs", "1024,4096", "--quiet"],
        r"ctx 1024: fastest per user: (.+)",
        "ctx 1024: fastest per user",
    ),
    "fusion": (["fusion", "audit", MODEL], r"unfused (\S+ us)", "unfused"),
    "fusion_plan": (
        ["fusion", "plan", MODEL, "--method", "heuristic"],
        r"planner (.+? kernels)",
        "planner",
    ),
    "size": (
        "size tiny --rate 2 --slo-ttft 1 --slo-tpot 0.05 --devices h100 --tp 1 --requests 50 "
        "--max-simulations 3 --quiet".split(),
        r"winner: (.+)",
        "winner",
    ),
}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Every kind of page, written by its command: ``kind -> (path, printed output)``."""
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    folder = tmp_path_factory.mktemp("pages")
    done = {}
    for kind, (argv, _pattern, _key) in COMMANDS.items():
        path = folder / f"{kind}.html"
        code, out, err = run_cli(*argv, "--html", str(path))
        assert code == 0, err
        assert f"interactive report written to {path}" in err
        done[kind] = (path, out)
    return done


def printed(kind, out):
    m = re.search(COMMANDS[kind][1], out)
    assert m, out
    return m.group(1).strip()


# ---------------------------------------------------------------- tables (no plotly)
@dataclass(frozen=True)
class _Inner(Result):
    unit: str
    peak: float


@dataclass(frozen=True)
class _Outer(Result):
    name: str
    batch: int
    inner: _Inner
    sizes: tuple[int, ...]


def test_repr_html_is_a_table_of_the_fields():
    r = _Outer("x<y", 12_345, _Inner("tensor", 9.894e14), (1, 2))
    out = r._repr_html_()
    assert out.startswith("<b>_Outer</b><table")
    assert "<th>name</th><td>x&lt;y</td>" in out  # escaped
    assert "<th>batch</th><td>12,345</td>" in out
    assert "<th>inner</th><td><table" in out and "<td>9.894e+14</td>" in out  # nested report nests
    assert "<th>sizes</th><td>1, 2</td>" in out


@given(st.text(max_size=40))
def test_result_table_escapes_any_text(text):
    out = result_table({"k": text})
    cell = out.split("<td>", 1)[1].rsplit("</td>", 1)[0]
    assert html.unescape(cell) == text
    assert "<" not in cell and ">" not in cell


# ---------------------------------------------------------------- the optional extra
def test_core_imports_and_fails_in_one_line_without_plotly():
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "import costmodel, costmodel.html, costmodel.html_figures, graphs.cli.html_option\n"
        "import graphs.serving.present.html_views, graphs.serving.present.html_studies\n"
        "from costmodel.errors import CostModelError\n"
        "try:\n    costmodel.html.require_plotly()\nexcept CostModelError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert (
        out.stdout.strip()
        == "HTML reports need the optional extra: pip install 'costmodel[html]' (plotly>=5)"
    )


def test_cli_without_plotly_fails_before_the_work(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)  # import raises ImportError
    path = tmp_path / "d.html"
    code, out, err = run_cli("decode", MODEL, "--html", str(path))
    assert code == 2 and out == ""  # nothing computed or printed
    assert err.count("\n") == 1 and "costmodel[html]" in err
    assert not path.exists()


def test_html_path_is_checked_first(tmp_path):
    code, out, err = run_cli("simulate", MODEL, "--rate", "20", "--html", str(tmp_path / "no" / "sim.html"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--html" in err and "does not exist" in err


def test_html_path_needs_a_page_suffix(tmp_path):
    """A page written to a name without .html (the fuzz suite's ``--html llama-3.1-8b``, a model
    name where a path was meant) is refused before the work, and nothing is written."""
    path = tmp_path / "llama-3.1-8b"
    code, out, err = run_cli("fusion", "audit", "tiny", "--whole-model", "--html", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--html" in err and ".html" in err
    assert not path.exists()


def test_write_html_is_atomic(tmp_path, monkeypatch):
    from costmodel.html import write_html

    p = tmp_path / "page.html"
    write_html(p, "old")
    assert p.read_text() == "old" and (p.stat().st_mode & 0o044)  # an ordinary readable file

    def fail(*_a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(CostModelError, match="--html"):
        write_html(p, "new")
    assert p.read_text() == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["page.html"]  # no temporary file left


# ---------------------------------------------------------------- the pages, as text
@pytest.mark.parametrize("kind", list(COMMANDS))
def test_page_shows_the_printed_number(pages, kind):
    path, out = pages[kind]
    page = path.read_text()
    want = html.escape(printed(kind, out))
    key = html.escape(COMMANDS[kind][2])
    assert re.search(f'<td data-key="{re.escape(key)}">{re.escape(want)}[ <]', page)  # the same text
    assert "<th>command</th><td><code>costmodel " in page and "<th>written by</th>" in page


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (["decode", MODEL, "--predict", "vllm"], r"bound \S+ ms +predicted (\S+ ms)"),
        (["model", "analyze", MODEL, "--predict", "vllm"], r"prediction \(calibrated[^)]*\): (\S+ ms)"),
    ],
)
def test_the_pages_calibrated_prediction_is_the_printed_one(tmp_path, argv, pattern):
    """The text prints the fits with their shape residuals as the prediction (6.249 ms for this
    decode) and the fits alone beside it (6.342 ms); the page's headline stated the fits alone
    as "calibrated prediction". It states the printed one."""
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the measured extra is not installed")
    path = tmp_path / "p.html"
    code, out, err = run_cli(*argv, "--html", str(path))
    assert code == 0, err
    m = re.search(pattern, out)
    assert m, out
    assert re.search(f'<td data-key="calibrated prediction">{re.escape(m.group(1))}[ <]', path.read_text())


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_page_is_self_contained(pages, kind):
    page = pages[kind][0].read_text()
    assert re.search(r"<script[^>]*\bsrc=", page) is None  # plotly.js is inlined, nothing fetched
    assert "<link" not in page
    assert page.count("Plotly.newPlot") >= 1


def test_decode_page_holds_the_nodes_and_the_ledger(pages):
    page = pages["decode"][0].read_text()
    # q_proj at batch 1: 2 * d_model * (n_heads * d_head) = 2 * 4096 * 4096 = 33,554,432 FLOPs
    assert "layers.q_proj" in page and "FLOPs 33.55 MFLOP" in page
    assert "attn_norm[1, 4096] bf16" in page  # its input's shape at this point, on hover
    # ledger at ctx 4096: weights 8.03e9 params x 2 B = 16.06e9 B; KV 2 (K, V) x 32 layers x 8 heads
    # x 128 x 2 B = 131,072 B/token = 536.9e6 B per sequence; (85.52e9 (the H100's 81,559 MiB,
    # nvidia-smi) - 16.06e9) / 536.9e6 = 129.4
    assert "largest batch that fits = 129" in page
    assert "batch 130 (overflows on kv_cache)" in page


def test_fusion_page_draws_the_graph(pages):
    page = pages["fusion"][0].read_text()
    assert "the graph: nodes coloured by fused group" in page
    assert "gate_proj+up_proj+act" in page  # the suggested gated-MLP group, in the legend


def test_json_output_stays_json_with_html(tmp_path):
    import json

    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    code, out, err = run_cli("decode", MODEL, "--json", "--html", str(tmp_path / "d.html"))
    assert code == 0 and json.loads(out)["batch"] == 1  # the note goes to stderr
    assert "interactive report written to" in err


def test_simulate_page_labels_the_slos(pages):
    path, out = pages["simulate"]
    page = path.read_text()
    steady = re.search(
        r"steady-state throughput \(first to last arrival, \S+ s\) (\S+ requests/s, \S+ output tokens/s)", out
    )
    assert steady and f'<td data-key="steady-state throughput">{steady.group(1)} ' in page
    assert "TTFT SLO 0.5 s" in page and "TPOT SLO 0.05 s" in page
    assert "timeline: batch, queue and KV use per iteration" in page
    assert "rate sweep" in pages["max_rate"][0].read_text()


# ---------------------------------------------------------------- the pages, in a browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp_path, *flags, url):
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # any network fetch would fail (and log)
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        *flags,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("kind", list(COMMANDS))
def test_page_renders_in_chromium(pages, kind, tmp_path):
    path, out = pages[kind]
    url = path.resolve().as_uri()
    dom = chromium(tmp_path, "--dump-dom", url=url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []  # no script error, no failed fetch, no console message at all
    want = html.escape(printed(kind, out))
    assert want in dom.stdout  # the command's number in the rendered DOM
    figures = pages[kind][0].read_text().count("Plotly.newPlot")
    assert dom.stdout.count('class="main-svg"') >= figures  # plotly drew every figure
    shots = Path(os.environ.get("COSTMODEL_SCREENSHOTS", tmp_path))
    shot = shots / f"{kind}.png"
    r = chromium(tmp_path, "--window-size=1200,2600", f"--screenshot={shot}", url=url)
    assert r.returncode == 0 and shot.stat().st_size > 20_000


def test_the_simulation_timeline_counts_samples_not_iterations(tmp_path, capsys):
    """200 requests at 5/s: the page said "one iteration in 6 of 10,367 drawn" where the text
    says 10,364 iterations: the timeline also records a sample at batch 0 each time the replica
    empties. By hand: 10,367 samples = 10,364 at an iteration's start + 3 at batch 0; the KV line,
    which changes at 4,859 of them, through one in ceil(10,367 / 2,000) = 6."""
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    page = tmp_path / "sim.html"
    argv = ["simulate", MODEL, "--requests", "200", "--rate", "5", "--quiet"]
    assert main([*argv, "--html", str(page)]) == 0
    assert "10,364 iterations" in capsys.readouterr().out
    text = html.unescape(page.read_text())
    assert "one iteration in" not in text
    assert (
        "10,367 samples: 10,364 at an iteration's start (each replica's, or rank's, "
        "own batch) and 3 at batch 0, where one emptied; the run has 10,364 iterations. "
        "Drawn: KV blocks used % through one sample in 6 (every sample would be over 2,000 points)"
    ) in text


def test_the_decode_page_counts_ep_devices_and_shows_the_dram_total(tmp_path):
    """The page said "TDP x 2 device(s)" for a tp 2 x ep 2 step the text prices on 4, and drew the
    weight and KV reads without the activation traffic the "bound by" verdict counts (Llama-3.1-8B
    at batch 600, ctx 128 on an H100: 4.482 + 3.005 + 2.223 = 9.710 ms of DRAM, the text's line)."""
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    path = tmp_path / "ep.html"
    code, out, err = run_cli(
        "decode", "mixtral-8x7b", "--device", "h200", "--tp", "2", "--ep", "2", "--html", str(path)
    )
    assert code == 0, err
    assert "TDP x 4 device(s)" in path.read_text()
    path = tmp_path / "dram.html"
    code, out, err = run_cli("decode", MODEL, "--batch", "600", "--ctx", "128", "--html", str(path))
    assert code == 0, err
    m = re.search(r"activations (\S+ ms) \(DRAM (\S+ ms) in all\)", out)
    assert m, out
    page = path.read_text()
    assert "DRAM in all" in page and m.group(2) in page and m.group(1) in page


def test_a_figures_labels_are_escaped_as_the_text_is():
    """A review drew a model named with a bidirectional override and an escape sequence: the
    page's text escaped them, its figures' legends and axes kept them raw (JSON keeps U+202E as
    it is and decodes \\u001b). Each is now written as its escape, as on the terminal."""
    go = pytest.importorskip("plotly.graph_objects")
    import numpy as np

    from costmodel.html import Section, page_html

    fig = go.Figure(
        go.Bar(x=np.array(["evil\u202etxt.exe", "ok"], dtype=object), y=[1, 2], name="m\x1b]0;x\x07")
    )
    fig.update_layout(title="t\u2066")
    page = page_html("t", {}, {}, [Section("s", (fig,))])
    for raw in ("\u202e", "\u2066", "\\u001b"):
        assert raw not in page
    for shown in ("evil\\\\u202etxt.exe", "m\\\\x1b]0;x\\\\x07", "t\\\\u2066"):
        assert shown in page
    plain = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    assert "cm-fig-0" in page_html("t", {}, {}, [Section("s", (plain,))])
