"""The review of ``size``, ``search`` and ``sweep`` (their answers, ``--html`` pages and edge
inputs): each test asks the command a question and checks the answer against another source (the
same command's ``--json`` or text, another command, the input itself)."""

import contextlib
import html
import io
import json
import re

import pytest

from graphs.cli import main
from tests.test_html_review import figures  # the pages' plotly figures, parsed once


def run_cli(*argv, code=0):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(argv))
    assert got == code, err.getvalue()
    return out.getvalue(), err.getvalue()


def test_search_names_no_energy_winner_when_energy_is_not_an_objective():
    """``search`` without ``--energy`` named a "lowest energy per token" winner from the frontier
    of the other objectives, which leaves out points that use less: on h100 and a100-sxm-80gb it
    named h100 at batch 129 (0.139 J/token) while the ``--energy`` search of the same grid finds
    an a100 point below every point of that frontier. Energy is named only as an objective."""
    argv = ("search", "llama-3.1-8b", "--devices", "h100,a100-sxm-80gb", "--batches", "1..256")
    argv += ("--ctxs", "4096", "--quiet", "--json")
    plain = json.loads(run_cli(*argv)[0])
    assert set(plain["best"]) == {"fastest_per_user", "highest_throughput_per_device"}
    text = run_cli(*argv[:-1])[0]
    assert "energy per token:" not in text
    with_energy = json.loads(run_cli(*argv, "--energy")[0])
    least = with_energy["best"]["lowest_energy_per_token"]
    # the energy objective's winner uses less than any point the two-objective frontier holds
    assert least["energy_per_token_j"] < min(p["energy_per_token_j"] for p in plain["frontier"])
    assert least["device"] == "a100-sxm-80gb"


def _page(tmp_path, *argv, code=0):
    pytest.importorskip("plotly", reason="the html extra (plotly) is not installed")
    path = tmp_path / "p.html"
    out, _err = run_cli(*argv, "--html", str(path), code=code)
    return out, path.read_text()


def _rows(page: str, section: str) -> list[list[str]]:
    """The cells of the first table after ``<h2>section</h2>``."""
    part = page[page.index(f"<h2>{html.escape(section)}</h2>") :]
    table = part[: part.index("</table>")]
    return [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(<td>.*?)</tr>", table)]


def test_the_search_pages_winners_carry_their_cost_and_missing_figures_read_as_the_text(tmp_path):
    """``search --cost --html``: the winners' table under the plot had a "$/M output" column whose
    every cell read ``None`` (the row was built without it), and a device without a price showed
    ``None`` in the frontier's table where the text prints "no price". The winners' cells are now
    their frontier rows' (``--json``), and a missing price reads as the text's words."""
    argv = ("search", "llama-3.1-8b", "--devices", "h100", "--batches", "1..4", "--ctxs", "4096")
    argv += ("--cost", "--quiet")
    doc = json.loads(run_cli(*argv, "--json")[0])
    _out, page = _page(tmp_path, *argv)
    won = _rows(page, "Pareto frontier")
    assert won and not [r for r in won if "None" in r]
    by_batch = {p["batch"]: p for p in doc["frontier"]}
    for row in won:  # #, wins, plan, batch, ... , $/M output last
        assert row[-1] == f"{by_batch[int(row[3])]['usd_per_m_output']:.3g}"
    argv = ("search", "llama-3.1-8b", "--devices", "l4", "--batches", "1,2", "--ctxs", "4096")
    out, page = _page(tmp_path, *argv, "--cost", "--quiet")
    assert "no price" in out
    for table in ("Pareto frontier", "the frontier's points"):
        cells = [r[-1] for r in _rows(page, table)]
        assert cells and set(cells) == {"no price"}


def test_the_search_page_says_why_its_frontier_is_empty(tmp_path):
    """An empty frontier's page said "(no point on the frontier)" and nothing of why, where the
    text says which SLO no point meets and by how much; the page now carries the printed lines."""
    argv = ("search", "llama-3.1-8b", "--devices", "h100", "--batches", "1..8", "--ctxs", "4096")
    out, page = _page(tmp_path, *argv, "--slo-tpot", "0.001", "--quiet")
    why = [line.strip() for line in out.splitlines() if "no point meets the SLOs" in line]
    assert len(why) == 1 and "> 0.001 s (--slo-tpot)" in why[0]
    assert html.escape(why[0]) in page


@pytest.mark.parametrize(
    ("one", "many"), [("--weight-dtype", "--weight-dtypes"), ("--kv-dtype", "--kv-dtypes")]
)
def test_sweep_refuses_a_dtype_beside_its_list(one, many, capsys):
    """``sweep --weight-dtypes bf16,fp8 --weight-dtype int4`` swept bf16 and fp8 and dropped the
    int4 without a word (each listed dtype replaces the model's at every point); the pair is now
    refused in one line naming both flags and their values, and the one-element list it suggests
    sweeps what the singular flag alone does."""
    base = ("sweep", "llama-3.1-8b", "--batches", "1,64", "--ctxs", "1024", "--quiet")
    assert main([*base, one, "int8", many, "bf16,fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{one} 'int8' and {many} 'bf16,fp8' both given" in err
    alone = json.loads(run_cli(*base, one, "int8", "--json")[0])["points"]
    listed = json.loads(run_cli(*base, many, "int8", "--json")[0])["points"]
    assert [p["tpot_s"] for p in alone] == [p["tpot_s"] for p in listed]
    key = "weight_dtype" if one == "--weight-dtype" else "kv_dtype"
    assert {p[key] for p in listed} == {"int8"}


@pytest.mark.parametrize("flag", ["--html", "--csv"])
def test_an_output_path_ending_in_a_slash_is_refused_before_the_work(tmp_path, flag, capsys):
    """``--html out.html/`` (a folder's spelling) passed the checks, the page went to ``out.html``
    and the command said it wrote ``out.html/``. A path ending in a slash now names a folder: one
    line, rc 2, and no file written."""
    target = tmp_path / ("p.html" if flag == "--html" else "p.csv")
    argv = ["sweep", "llama-3.1-8b", "--batches", "1", "--ctxs", "1024", "--quiet"]
    assert main([*argv, flag, f"{target}/"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"costmodel: error: {flag} '{target}/' ends in a slash, which names a folder; give a file path"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_size_page_marks_the_slo_and_the_candidates_that_miss_it(tmp_path):
    """``size --html`` drew every candidate's bar alike, with no mark at 100 % of the SLO: a
    candidate at 108 % of its TPOT SLO read like the winner. The bars of the candidates
    ``--json`` says miss the SLOs are now red, the others blue, and a line stands at 100 %."""
    argv = ("size", "llama-3.1-8b", "--rate", "40", "--slo-ttft", "0.5", "--slo-tpot", "0.008")
    argv += ("--devices", "h100", "--tp", "1,2", "--no-disagg", "--requests", "60", "--quiet")
    doc = json.loads(run_cli(*argv, "--json")[0])
    meets = {c["label"]: c["meets"] for c in doc["candidates"]}
    assert True in meets.values() and False in meets.values()
    _out, page = _page(tmp_path, *argv)
    ((data, layout),) = figures(page)
    (bars,) = data
    colours = dict(zip(bars["y"], bars["marker"]["color"], strict=True))
    assert colours == {label: "#636efa" if ok else "#ef553b" for label, ok in meets.items()}
    assert [(s["type"], s["x0"], s["x1"]) for s in layout["shapes"]] == [("line", 100, 100)]


def test_sweep_draws_one_frontier_per_context_as_search_does(tmp_path):
    """``sweep``'s default four contexts had one frontier over all of them, and a shorter context
    is faster on both axes: its 11 points were all at ctx 1024, and the sweep said nothing of the
    contexts asked for beside it. Each context now has its own frontier, the one a sweep of that
    context alone finds (as ``search`` keeps one per context), and the page draws each on log
    axes (the rates span 2 to 4 decades)."""
    base = ("sweep", "llama-3.1-8b", "--device", "h100,b200", "--batches", "1,8,64,512", "--quiet")
    both = json.loads(run_cli(*base, "--ctxs", "1024,16384", "--json")[0])
    key = lambda p: (p["device"], p["batch"], p["ctx"])  # noqa: E731
    for c in (1024, 16384):
        alone = json.loads(run_cli(*base, "--ctxs", str(c), "--json")[0])
        assert alone["frontier"] and [key(p) for p in both["frontier"] if p["ctx"] == c] == [
            key(p) for p in alone["frontier"]
        ]
    text = run_cli(*base, "--ctxs", "1024,16384")[0]
    assert f"Pareto frontier ({len(both['frontier'])} points over 2 contexts, one frontier each)" in text
    _out, page = _page(tmp_path, *base, "--ctxs", "1024,16384")
    ((data, layout),) = figures(page)
    lines = {tr["name"]: tr for tr in data if tr["name"].startswith("frontier")}
    assert set(lines) == {"frontier, ctx 1024", "frontier, ctx 16384"}
    for c in (1024, 16384):
        pts = [p for p in both["frontier"] if p["ctx"] == c]
        assert lines[f"frontier, ctx {c}"]["x"] == [p["tokens_per_s_per_device"] for p in pts]
    assert layout["xaxis"]["type"] == layout["yaxis"]["type"] == "log"


def _headline(page: str) -> dict[str, str]:
    part = page[page.index('<table class="cm-headline">') :]
    part = part[: part.index("</table>")]
    return {
        html.unescape(k): html.unescape(v) for k, v in re.findall(r"<th>(.*?)</th><td[^>]*>(.*?)</td>", part)
    }


def test_the_search_pages_headline_names_the_first_contexts_winners_as_the_text_does(tmp_path):
    """A search over 128 contexts wrote its 256 winners into the page's headline (6,000 px before
    the plot). The headline now names those the text names (the first 3 contexts') and says
    how many contexts there are; the text's winner lines are its rows, word for word."""
    argv = ("search", "llama-3.1-8b", "--batches", "1,16", "--ctxs", "1024,2048,4096,8192,16384")
    out, page = _page(tmp_path, *argv, "--quiet")
    # "  ctx 1024: fastest per user: h100-sxm bf16/bf16 tp1 pp1 ep1 m1, batch 1"
    said = dict(line.strip().rsplit(": ", 1) for line in out.splitlines() if line.startswith("  ctx "))
    assert len(said) == 6  # 2 objectives x the first 3 contexts
    head = _headline(page)
    assert {k: v for k, v in head.items() if k.startswith("ctx ")} == said
    assert head["winners"].startswith("shown here for 3 of 5 contexts")


def test_a_cost_line_at_a_trickle_of_tokens_keeps_their_digits():
    """``size --rate 1e-6``: the cost line read "0 input + 0 output tokens/s = $1.452e+06/M tokens
    blended", a price per token of no tokens. The rates keep 3 digits under 10 tokens/s, and the
    blended price is the line's own $/h over them (hand: $/h / ((in + out) x 3600) x 1e6)."""
    argv = ("size", "llama-3.1-8b", "--rate", "1e-6", "--slo-ttft", "1", "--slo-tpot", "0.05")
    argv += ("--devices", "h100", "--tp", "1", "--requests", "20", "--no-disagg", "--quiet")
    out = run_cli(*argv)[0]
    m = re.search(
        r"\$([\d.,]+)/h for 1 device\(s\) / (\S+) input \+ (\S+) output tokens/s = \$(\S+)/M tokens blended",
        out,
    )
    assert m, out
    per_h, tin, tout, blended = (float(g.replace(",", "")) for g in m.groups())
    assert tin > 0 and tout > 0
    assert blended == pytest.approx(per_h / ((tin + tout) * 3600) * 1e6, rel=5e-3)
    cost = json.loads(run_cli(*argv, "--json")[0])["winner"]["cost"]
    assert (m.group(2), m.group(3)) == (
        f"{cost['input_tokens_per_s']:.3g}",
        f"{cost['output_tokens_per_s']:.3g}",
    )


def test_sweep_top_shows_every_contexts_frontier_and_says_so():
    """``sweep --top N`` printed the frontier's first N rows, with no word of the others: with
    one frontier per context those are the first context's alone. It now keeps the two ends and
    an even spread between them, as ``search --top`` does, and says how many it shows."""
    argv = ("sweep", "llama-3.1-8b", "--device", "h100", "--batches", "1,8,64,512")
    argv += ("--ctxs", "1024,16384", "--quiet")
    front = json.loads(run_cli(*argv, "--json")[0])["frontier"]
    assert len(front) == 6 and {p["ctx"] for p in front} == {1024, 16384}
    out = run_cli(*argv, "--top", "3")[0]
    assert "showing 3 of 6 frontier points (--top 0 for all, --csv or --json)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("h100-sxm ")]
    # rows 0, 2.5 -> 2 (round half to even), 5 of the frontier: (batch, ctx) as --json orders them
    assert [(int(r[4]), int(r[5])) for r in rows] == [(front[i]["batch"], front[i]["ctx"]) for i in (0, 2, 5)]


def test_a_sweep_page_where_nothing_fits_draws_no_empty_axes(tmp_path):
    """``sweep llama-3.1-405b --device l4``: nothing fits (the text says the least need, 756 GiB
    against 22 GiB), and the page drew empty axes spanning 0.1 to 1M tokens/s. It now draws no
    figure (so inlines no plotly.js), as ``search`` and ``size`` pages do, and keeps the text."""
    argv = ("sweep", "llama-3.1-405b", "--device", "l4", "--batches", "1,2", "--ctxs", "1024", "--quiet")
    out, page = _page(tmp_path, *argv)
    why = next(line.strip() for line in out.splitlines() if "nothing fits in memory" in line)
    assert html.escape(why) in page
    assert figures(page) == [] and "<h2>figures</h2>" not in page
    assert len(page.encode()) < 10_000  # the text alone, no plotly.js bundle (1.19 MB)


def test_the_search_pages_numbered_stars_of_two_contexts_do_not_share_a_corner(tmp_path):
    """Two contexts' fastest-per-user winners (batch 1: 168.6 and 165.6 tokens/s per user at 21.1
    and 20.7 per device for Llama-3.1-70B at 4k and 16k) sit almost on one point, and the page
    put both numbers top right, the "3" over the "1". Stars 1 and 3 (each context's first
    winner, ``--json``'s ``best_by_ctx`` order) now take different corners."""
    argv = ("search", "llama-3.1-8b", "--batches", "1,64", "--ctxs", "1024,4096", "--quiet")
    doc = json.loads(run_cli(*argv, "--json")[0])
    firsts = [next(iter(best.values())) for best in doc["best_by_ctx"].values()]
    assert [p["batch"] for p in firsts] == [1, 1]  # both contexts' first winner is batch 1
    _out, page = _page(tmp_path, *argv)
    data, _layout = next((d, lay) for d, lay in figures(page) if "Pareto" in str(lay.get("title")))
    (stars,) = [tr for tr in data if tr["name"].startswith("winners")]
    where = dict(zip(stars["text"], stars["textposition"], strict=True))
    assert where["1"] != where["3"]
    assert len(set(stars["textposition"])) == len(stars["textposition"]) == 4


def test_size_says_there_is_no_tpot_where_no_request_generated_a_second_token(tmp_path):
    """``size --output fixed:1``: every request ends at its first token, and ``simulate`` of the
    winner says "TPOT none: no request generated a second token"; ``size`` printed "P99 TPOT
    0.0 ms (0% of SLO)" and ``--json`` 0.0, a TPOT no run measured. It now says none (``--json``
    null), in its text, its page's table and bars."""
    argv = ("size", "llama-3.1-8b", "--rate", "4", "--slo-ttft", "1", "--slo-tpot", "0.05")
    argv += ("--devices", "h100", "--tp", "1", "--requests", "30", "--output", "fixed:1", "--quiet")
    sim = run_cli(
        "simulate",
        "llama-3.1-8b",
        "--device",
        "h100",
        "--rate",
        "4",
        "--requests",
        "30",
        "--output",
        "fixed:1",
    )[0]
    assert "TPOT s     none: no request generated a second token" in sim
    doc = json.loads(run_cli(*argv, "--json")[0])
    assert doc["winner"]["tpot_at_percentile_s"] is None
    assert {c["tpot_at_percentile_s"] for c in doc["candidates"]} == {None}
    out, page = _page(tmp_path, *argv)
    winner = next(line for line in out.splitlines() if "winner: " in line)
    assert "P99 TPOT none (no request generated a second token); " in winner and " ms " not in winner
    table = _rows(page, "simulated candidates")
    assert table and {(r[3], r[4]) for r in table} == {("none", "-")}
    ((data, _layout),) = figures(page)
    assert all(t.endswith("of its SLO, no TPOT") for t in data[0]["text"])


def test_search_refuses_a_prompt_longer_than_a_context():
    """``search --ctxs 1024 --prompt 100000`` answered TTFT 4.25 s (the 100,000-token prompt) and
    TPOT 4.8 ms with memory at 1,024 cached tokens: a request that prefilled 100,000 tokens
    decodes with at least as many cached, so no request has both. Refused in one line naming
    both options; a context as long as the prompt is the first decode step's and is answered,
    its TTFT the one ``prefill --seq`` gives (the prompt prefilled alone)."""
    _out, err = run_cli(
        "search", "llama-3.1-8b", "--batches", "1,8", "--ctxs", "1024,2048,4096", "--prompt", "4000", code=2
    )
    assert err.strip() == (
        "costmodel: error: --prompt 4,000 is longer than --ctxs 1,024, 2,048: a request that prefilled 4,000 "
        "tokens decodes with at least that many cached; give --ctxs of at least 4,000 (or leave --prompt "
        "out: each point's context)"
    )
    doc = json.loads(
        run_cli("search", "llama-3.1-8b", "--batches", "1", "--ctxs", "4000", "--prompt", "4000", "--json")[0]
    )
    prefill = run_cli("prefill", "llama-3.1-8b", "--seq", "4000")[0]
    ms = float(re.search(r"TTFT lower bound \(sum of kernel bounds\): ([\d.]+) ms", prefill).group(1))
    assert doc["frontier"][0]["ttft_s"] * 1e3 == pytest.approx(ms, abs=5e-4)


def test_sweep_says_a_tp_group_is_priced_on_the_network(tmp_path):
    """``sweep --tp 16`` on h100 (8 devices a scale-up domain) priced its all-reduces on the
    scale-out link, as ``decode`` does, and said nothing of it (``decode``, ``search`` and ``size``
    say it once). It now says ``decode``'s note, in ``--json``'s notes and on the page, with
    ``decode``'s numbers."""
    argv = ("sweep", "llama-3.1-70b", "--device", "h100", "--tp", "16", "--batches", "1", "--ctxs", "1024")
    dec = run_cli(
        "decode", "llama-3.1-70b", "--device", "h100", "--tp", "16", "--batch", "1", "--ctx", "1024"
    )[0]
    note = next(line.strip() for line in dec.splitlines() if "scale-up domains" in line)
    assert note.startswith("note: a group of 16 h100-sxm devices spans 2 scale-up domains of 8")
    doc = json.loads(run_cli(*argv, "--quiet", "--json")[0])
    assert note in doc["notes"]
    tpot = float(re.search(r"TPOT bound ([\d.]+) ms", dec).group(1))
    assert doc["points"][0]["tpot_s"] * 1e3 == pytest.approx(tpot, abs=5e-4)
    _out, err = run_cli(*argv, "--quiet")
    assert f"costmodel: {note}" in err
    _out, page = _page(tmp_path, *argv, "--quiet")
    assert html.escape(f"costmodel: {note}") in page


def test_the_size_page_carries_the_notes_the_run_said(tmp_path):
    """``size --weight-dtype fp8`` says on stderr, and keeps in ``--json``'s notes, that the
    matmuls run in fp8 (W8A8); its page, drawn from the text on stdout, left the note out. Every
    note ``--json`` keeps is now on the page, as the terminal showed it."""
    argv = (
        "size",
        "llama-3.1-8b",
        "--rate",
        "4",
        "--slo-ttft",
        "1",
        "--slo-tpot",
        "0.05",
        "--devices",
        "h100",
    )
    argv += ("--tp", "1", "--requests", "30", "--weight-dtype", "fp8", "--no-disagg", "--quiet")
    notes = json.loads(run_cli(*argv, "--json")[0])["notes"]
    assert any("matmuls in fp8_e4m3 (W8A8)" in n for n in notes)
    _out, page = _page(tmp_path, *argv)
    for n in notes:
        assert html.escape(f"costmodel: {n}") in page


def test_the_cost_winner_is_named_in_words(tmp_path):
    """``search --cost`` named its winner "lowest cost per m output" (the key's ``m``, a million,
    read as metres), in the text and on the page. It is now "lowest cost per million output
    tokens", the frontier's least ``usd_per_m_output`` (``--json``)."""
    argv = (
        "search",
        "llama-3.1-8b",
        "--devices",
        "h100",
        "--batches",
        "1,8",
        "--ctxs",
        "4096",
        "--cost",
        "--quiet",
    )
    front = json.loads(run_cli(*argv, "--json")[0])["frontier"]
    least = min(front, key=lambda p: p["usd_per_m_output"])
    out, page = _page(tmp_path, *argv)
    assert f"  lowest cost per million output tokens: {least['plan']}, batch {least['batch']}" in out
    assert "per m output" not in out
    head = _headline(page)
    assert head["lowest cost per million output tokens"] == f"{least['plan']}, batch {least['batch']}"


def test_size_names_the_closest_candidate_when_none_meets_the_slos():
    """``size`` whose candidates all miss said "no simulated deployment meets the SLOs" and
    nothing of how far they were (only the page's table had them). It now names the closest: the
    candidate whose larger latency over its SLO (``--json``'s candidates) is least, in the words
    a winner's line uses."""
    argv = ("size", "llama-3.1-8b", "--rate", "40", "--slo-ttft", "0.5", "--slo-tpot", "0.005")
    argv += ("--devices", "h100", "--tp", "1,2", "--requests", "60", "--max-simulations", "3", "--quiet")
    doc = json.loads(run_cli(*argv, "--json", code=1)[0])
    assert doc["winner"] is None and len(doc["candidates"]) == 3
    near = min(
        doc["candidates"],
        key=lambda c: max(c["ttft_at_percentile_s"] / 0.5, c["tpot_at_percentile_s"] / 0.005),
    )
    out = run_cli(*argv, code=1)[0]
    (line,) = [x for x in out.splitlines() if x.startswith("  closest: ")]
    ms = 1e3 * near["tpot_at_percentile_s"]
    assert line.startswith(f"  closest: {near['label']}: P99 TTFT {near['ttft_at_percentile_s']:.3f} s")
    assert f"P99 TPOT {ms:.1f} ms ({100 * ms / 5:.0f}% of SLO)" in line


def test_search_says_a_device_without_a_tdp_ranks_last_on_energy():
    """``search --energy`` on a device the catalog gives no TDP (TPU v6e) printed "no TDP" in
    every J/token cell and no word of what the objective made of it, where a device without a
    price gets "no price: ... (the cost objective ranks them last)". It now says the same of
    energy; ``--json``'s energy is null for those rows."""
    argv = (
        "search",
        "llama-3.1-8b",
        "--devices",
        "tpu-v6e",
        "--batches",
        "1,8",
        "--ctxs",
        "1024",
        "--energy",
        "--quiet",
    )
    front = json.loads(run_cli(*argv, "--json")[0])["frontier"]
    assert front and {p["energy_per_token_j"] for p in front} == {None}
    out = run_cli(*argv)[0]
    assert "  tpu-v6e: no TDP (power_w), so no energy per token: the energy objective ranks them last" in out
    assert "lowest energy per token:" not in out


def test_sweep_prints_twenty_frontier_rows_by_default_as_search_does():
    """With one frontier per context a sweep of 200 batches over 255 contexts has 4,652 frontier
    points, and ``--top`` defaulted to 0 (all): the text ran to 4,652 rows. It defaults to 20, as
    ``search``'s does, and says how many it shows; ``--json`` keeps them all."""
    argv = (
        "sweep",
        "llama-3.1-8b",
        "--batches",
        "1,2,4,8,16,32,64",
        "--ctxs",
        "1024,2048,4096,8192",
        "--quiet",
    )
    front = json.loads(run_cli(*argv, "--json")[0])["frontier"]
    assert len(front) > 20
    out = run_cli(*argv)[0]
    assert f"  showing 20 of {len(front)} frontier points (--top 0 for all, --csv or --json)" in out
    assert sum(line.startswith("h100-sxm ") for line in out.splitlines()) == 20
    assert sum(line.startswith("h100-sxm ") for line in run_cli(*argv, "--top", "0")[0].splitlines()) == len(
        front
    )


def test_a_large_sweep_page_draws_one_in_k_of_its_points_and_says_so(tmp_path, monkeypatch):
    """A sweep page drew every point that fits with its hover: 153,600 points of which 30,743 fit
    made a 7.8 MB page, and 1e6 points (1,000 batches x 1,000 contexts) 146 MB. Past ``MAX_DRAWN``
    it draws one in ``k`` of the points that fit (each one ``--json`` says fits), and each
    context's frontier through one in ``k`` of its points and its last, and the legend says so."""
    from graphs.serving.present import sweep_summary

    argv = ("sweep", "llama-3.1-8b", "--batches", "1,2,4,8,16,32", "--ctxs", "1024,2048,4096", "--quiet")
    doc = json.loads(run_cli(*argv, "--json")[0])
    fit = [p for p in doc["points"] if p["fits"]]
    assert len(fit) == 18
    monkeypatch.setattr(sweep_summary, "MAX_DRAWN", 5)
    _out, page = _page(tmp_path, *argv)
    ((data, _layout),) = figures(page)
    (grey,) = [tr for tr in data if tr["name"].startswith("points that fit")]
    assert grey["name"] == "points that fit (one in 4 of 18)"  # ceil(18 / 5)
    assert grey["x"] == [p["tokens_per_s_per_device"] for p in fit[::4]]
    lines = {tr["name"]: tr["x"] for tr in data if tr["name"].startswith("frontier")}
    kf = -(-len(doc["frontier"]) // 5)  # ceil(18 / 5) = 4
    for c in (1024, 2048, 4096):
        mine = [p["tokens_per_s_per_device"] for p in doc["frontier"] if p["ctx"] == c]
        keep = sorted({*range(0, len(mine), kf), len(mine) - 1})
        assert lines[f"frontier, ctx {c} (one in {kf})"] == [mine[i] for i in keep]


def test_search_csv_of_an_empty_frontier_keeps_its_header(capsys, tmp_path):
    """`search --csv` of an empty frontier wrote a 0-byte file, no header; it now writes the
    header a non-empty frontier's file has (the same columns, in order), and no row."""
    import csv

    empty, full = tmp_path / "e.csv", tmp_path / "f.csv"
    base = ["search", "llama-3.1-8b", "--devices", "h100", "--ctxs", "1024"]
    assert main([*base, "--slo-tpot", "0.000001", "--csv", str(empty)]) == 0
    assert main([*base, "--csv", str(full)]) == 0
    capsys.readouterr()
    head = next(iter(csv.reader(full.open())))
    assert list(csv.reader(empty.open())) == [head]
    assert head[:3] == ["device", "weight_dtype", "kv_dtype"] and head[-1] == "usd_per_m_output"
