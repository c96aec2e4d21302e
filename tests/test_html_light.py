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
