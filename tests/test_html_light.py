"""Pages that weigh little (issue 46): the basic plotly.js bundle, CDFs and timelines drawn from a
bounded number of exact points, and the run table showing what the user typed."""

import gzip

import pytest

pytest.importorskip("plotly")

from costmodel import html as cmhtml
from graphs.cli import main

LIMIT = 1_500_000  # bytes: the budget for a self-contained page


def test_the_shipped_bundle_is_plotly_basic_of_the_installed_version():
    from plotly.offline import get_plotlyjs

    basic = gzip.decompress(cmhtml.BASIC_BUNDLE.read_bytes()).decode()
    assert "plotly.js (basic - minified)" in basic[:200]
    assert cmhtml._bundle_version(basic) == cmhtml._bundle_version(get_plotlyjs())  # CI pins plotly
    assert cmhtml.plotly_js() == basic and len(basic) < 1_250_000


def test_a_version_mismatch_inlines_the_full_bundle_and_says_so(monkeypatch, capsys):
    monkeypatch.setattr(cmhtml, "_bundle_version", lambda head: "9.9.9" if "basic" in head[:200] else "4.1.1")
    monkeypatch.setattr(cmhtml.plotly_js, "_said", False, raising=False)
    js = cmhtml.plotly_js()
    cmhtml.plotly_js()
    assert "basic" not in js[:200]
    assert capsys.readouterr().err.count("pages inline the full bundle") == 1


@pytest.mark.parametrize("requests", [200, 2000])
def test_a_simulate_page_stays_under_budget_and_shows_what_was_typed(tmp_path, capsys, requests):
    page = tmp_path / "sim.html"
    argv = ["simulate", "tiny", "--rate", "50", "--requests", str(requests), "--slo-ttft", "1", "--quiet"]
    assert main([*argv, "--html", str(page)]) == 0
    text = page.read_text()
    assert page.stat().st_size <= LIMIT
    typed = "costmodel " + " ".join(argv)
    assert f"<code>{typed}</code>" in text and "--no-interval" not in text


def test_cdf_points_are_exact_ranks():
    from costmodel.html_figures import cdf_points

    x, f, n = cdf_points([5.0, 1.0, 4.0, 2.0, 3.0], limit=3)
    # ranks 1, 3, 5 of 5 sorted values: (1, 0.2), (3, 0.6), (5, 1.0)
    assert (x.tolist(), f.tolist(), n) == ([1.0, 3.0, 5.0], [0.2, 0.6, 1.0], 5)


def test_the_timeline_keeps_every_count_change_in_fewer_bytes():
    """200 requests at 5/s on Llama-3.1-8B record 10,367 timeline samples. The page drew one in
    ceil(10,367 / 2,000) = 6 on each of its four lines, each line carrying its own copy of the
    times (plotly has no x shared between traces): 4 x 1,728 points x (4 + 4) bytes, 73,728
    bytes before base64, the figure 89 kB of a 1.31 MB page. A line now keeps only the samples
    it needs (a flat run's two ends) and a count is a 1-byte integer: the running and batch lines
    go through every one of the 10,367 samples (each sample's count lies on the line, checked
    against the run's own timeline), the figure in under half the bytes."""
    import json
    import re
    import sys
    from pathlib import Path

    import numpy as np

    from graphs.serving.present.simulation_report import run_simulation
    from graphs.serving.sim.simulation_request import SimulationRequest

    sys.path.insert(0, str(Path(__file__).parent))
    from test_html_review import figures, values

    report = run_simulation(SimulationRequest(rate=5, requests=200), "llama-3.1-8b")
    tl = report.result.timeline
    assert len(tl["t"]) == 10_367
    page = report.to_html("costmodel simulate llama-3.1-8b --rate 5 --requests 200")
    data, _layout = next((d, lay) for d, lay in figures(page) if "timeline" in str(lay.get("title")))
    assert (
        len(json.dumps(data)) < 73_728 * 4 / 3 / 2
    )  # half the old arrays' base64, names and styles included
    lines = {tr["name"]: tr for tr in data}
    t32 = tl["t"].astype("float32")
    for key in ("running", "waiting", "batch"):
        x, y = np.array(values(lines[key]["x"])), np.array(values(lines[key]["y"]))
        assert lines[key]["y"]["dtype"] in ("i1", "u1")
        # the drawn polyline, read at every sample's time, is that sample's count
        for i in range(len(t32)):
            at = np.flatnonzero(x == t32[i])
            on = y[at] if len(at) else np.interp(t32[i], x, y)
            assert tl[key][i] in np.atleast_1d(on), (key, i)
        # it keeps the ends and each sample whose count differs from a neighbour's, by hand
        v = tl[key]
        changed = 2 + int(np.sum((v[1:-1] != v[:-2]) | (v[1:-1] != v[2:])))
        assert len(x) == changed
    assert len(values(lines["running"]["x"])) == 744 and len(values(lines["waiting"]["x"])) == 2
    text = re.sub(r"\s+", " ", page)
    assert "running, waiting, batch through every sample" in text
    assert "KV blocks used % through one sample in 6" in text
