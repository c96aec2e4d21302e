"""``--json`` as a program reads it: strict JSON, the notes and warnings the text prints kept in
it, one unit per key, the numbers the text prints (a review of every command's machine-readable
output). Each test compares the JSON with the same command's text, another command's answer or a
hand computation."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from graphs.cli.main import main

GIB = 2**30


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"non-JSON constant {name} in --json output")


def _run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    """stdout and stderr of ``costmodel ARGV``, which must exit with ``code``."""
    capsys.readouterr()
    assert main(list(argv)) == code
    captured = capsys.readouterr()
    return captured.out, captured.err


def _json(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> dict[str, Any]:
    """``costmodel ARGV --json`` parsed strictly (no NaN or Infinity)."""
    out, _ = _run(capsys, *argv, "--json", code=code)
    doc = json.loads(out, parse_constant=_refuse_constant)
    assert isinstance(doc, dict)
    return doc


def _text_notes(text: str) -> list[str]:
    """The ``note: ...`` lines a report prints on stdout, without the prefix."""
    return [ln.strip().removeprefix("note: ") for ln in text.splitlines() if ln.strip().startswith("note: ")]


def _own(notes: list[str]) -> list[str]:
    """A JSON document's own notes: not those said on stderr (``note: ``/``warning: `` prefixed)."""
    return [n for n in notes if not n.startswith(("note: ", "warning: "))]


# a preliminary device with no bf16, vector or sfu roof: four roof notes, and the engine's KV pool
# sized from a vendor capacity: notes of the engine and of the device alike
VR200 = ("tiny", "--device", "vr200", "--weight-dtype", "bf16")


def test_simulate_json_carries_every_note_the_text_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --json`` had the engine's kernel notes only: the KV pool, memory reserve and
    roof notes the text prints (vr200's four, a preliminary device) were lost to a program."""
    argv = ("simulate", *VR200, "--rate", "5", "--requests", "20", "--quiet")
    text, _ = _run(capsys, *argv)
    said = _text_notes(text)
    assert len(said) == 6 and any("preliminary" in n for n in said) and any("KV pool" in n for n in said)
    assert _own(_json(capsys, *argv)["notes"]) == said
    # --rates prints the head once; each rate's run carries it
    rates = ("simulate", *VR200, "--rates", "5,10", "--requests", "20", "--quiet")
    text, _ = _run(capsys, *rates)
    doc = _json(capsys, *rates)
    assert [_own(r["notes"]) for r in doc["rates"]] == [_text_notes(text)] * 2


def test_max_rate_json_says_why_it_found_no_rate(capsys: pytest.CaptureFixture[str]) -> None:
    """``rate: null`` stood for both "nothing met the SLOs" and "everything met them, too few
    requests": the text's verdict is now in the JSON's notes, word for word."""
    tight = ("simulate", "tiny", "--max-rate", "--slo-ttft", "1e-6", "--slo-tpot", "0.05", "--requests", "50")
    text, _ = _run(capsys, *tight, "--quiet", code=1)
    doc = _json(capsys, *tight, "--quiet", code=1)
    assert doc["max_rate_requests_per_s"] is None and doc["saturated"] is True
    # the head's notes (as one run says them: the next test), then the verdict
    assert doc["notes"][-2:] == [ln.strip() for ln in text.splitlines()[-2:]]
    assert doc["notes"][-2] == "no probed rate meets the SLOs"
    t, p = (
        doc["alone"]["ttft_at_percentile_s"],
        doc["alone"]["tpot_at_percentile_s"],
    )  # the text's numbers, to its four digits
    assert f"P99 TTFT {t:.4g} s, TPOT {p:.4g} s" in doc["notes"][-1]
    loose = ("simulate", "tiny", "--max-rate", "--slo-ttft", "1", "--slo-tpot", "0.05", "--requests", "50")
    text, _ = _run(capsys, *loose, "--quiet")
    doc = _json(capsys, *loose, "--quiet")
    assert doc["max_rate_requests_per_s"] is None and doc["saturated"] is False
    assert doc["notes"] == [*_text_notes(text), text.splitlines()[-1].strip()]
    assert doc["notes"][-1].startswith("not determined: every probe up to the physical ceiling")
    assert f"({doc['ceiling_requests_per_s']:,.3f} requests/s" in doc["notes"][-1]


def test_max_rate_says_the_notes_one_run_says(capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --max-rate`` printed none of the notes a single ``simulate`` of the same engine,
    model and device prints (vr200's KV pool sized from its vendor capacity, the engine's memory
    reserve, its preliminary figures and missing roofs), in text or JSON; every probe runs that
    engine on that device, so it now says them all, pinned to the single run's own notes."""
    one, _ = _run(capsys, "simulate", *VR200, "--rate", "5", "--requests", "20", "--quiet")
    said = _text_notes(one)
    assert len(said) == 6 and any("preliminary" in n for n in said) and any("KV pool" in n for n in said)
    argv = ("simulate", *VR200, "--max-rate", "--slo-ttft", "0.5", "--requests", "20", "--quiet")
    text, _ = _run(capsys, *argv)
    assert _text_notes(text) == said
    assert _own(_json(capsys, *argv)["notes"])[: len(said)] == said


def test_model_analyze_json_carries_the_roof_notes(capsys: pytest.CaptureFixture[str]) -> None:
    """``model analyze --json`` printed no notes: vr200's roof substitutions (its bf16 matmuls on
    the fp8 roof: an optimistic bound) were in the text only."""
    argv = ("model", "analyze", *VR200)
    text, _ = _run(capsys, *argv)
    said = _text_notes(text)
    assert len(said) == 4 and "bounded by the fp8 roof" in said[1]
    assert _own(_json(capsys, *argv)["notes"]) == said
    # the same notes as decode's JSON gives for the same point
    assert _own(_json(capsys, "decode", *VR200)["notes"]) == said


def _first_line_verdict(text: str) -> str:
    """The text's first line of a point costed under --ignore-capacity, as the JSON words it."""
    head = text.splitlines()[0]
    assert head.endswith("; --ignore-capacity: the numbers below are for a point that cannot run")
    return "warning: " + head.replace("the numbers below are", "the numbers are")


def test_a_point_that_does_not_fit_says_so_in_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``serve specdec --ignore-capacity --json`` gave the speed-ups of a 70B target on one H100
    (141 GB of weights, 85.5 GB of memory) with nothing saying the point cannot run; every
    command that goes on under --ignore-capacity now keeps the text's first line as a warning."""
    spec = ("serve", "specdec", "llama-3.1-70b", "llama-3.1-8b", "--device", "h100", "--ignore-capacity")
    text, _ = _run(capsys, *spec)
    doc = _json(capsys, *spec)
    assert doc["capacity"]["target"]["fits"] is False and doc["capacity"]["draft"]["fits"] is True
    assert doc["capacity"]["target"]["needed_bytes"] > doc["capacity"]["target"]["capacity_bytes"]
    assert doc["notes"] == [_first_line_verdict(text)]
    assert doc["best_k"] == int(text.split("best k = ")[1].split()[0])
    for argv in (
        ("decode", "llama-3.1-70b", "--device", "h100", "--ignore-capacity"),
        ("prefill", "llama-3.1-70b", "--device", "h100", "--ignore-capacity"),
    ):
        text, _ = _run(capsys, *argv)
        doc = _json(capsys, *argv)
        assert doc["capacity"]["fits"] is False and doc["notes"] == [_first_line_verdict(text)]
    # a point that fits says nothing of the kind
    assert "notes" not in _json(
        capsys, "serve", "specdec", "llama-3.1-8b", "llama-3.1-8b", "--device", "h100"
    )


def test_a_raw_ledger_table_gives_bytes_as_every_ledger_does(capsys: pytest.CaptureFixture[str]) -> None:
    """``ledger --batches`` without a model gave GiB under the keys (``weights``, ``kv_cache``
    ...) that a model's ledger gives bytes under, and ``fits`` as "yes"/"OOM"; the profiling
    article's 7B ledger by hand: 14e9 B of weights, 2*32*4096*2 = 524,288 B of KV a token, 128 KiB
    of activations a token, prompts of 4,096 tokens, 30 % overhead on a 78 GiB device."""
    argv = (
        "ledger",
        *("--weights-bytes", "14e9", "--kv-bytes-per-token", "2*32*4096*2"),
        *("--act-bytes-per-token", "128*1024", "--overhead", "0.3", "--capacity-bytes", "78*1024**3"),
        *("--ctx", "4096", "--phase", "prefill", "--batches", "1,24"),
    )
    text, _ = _run(capsys, *argv)
    doc = _json(capsys, *argv)
    one, many = doc["rows"]
    assert doc["capacity_bytes"] == 78 * GIB
    assert (
        one["weights"] == 14e9
        and one["kv_cache"] == 524288 * 4096
        and one["activations"] == 128 * 1024 * 4096
    )
    assert many["kv_cache"] == 24 * 524288 * 4096 and one["fits"] is True and many["fits"] is False
    for row, line in zip(doc["rows"], text.splitlines()[2:4], strict=True):
        cells = line.split()
        assert cells[1:6] == [
            f"{row[k] / GIB:.2f}" for k in ("weights", "kv_cache", "activations", "overhead", "total")
        ]
        assert cells[6] == ("yes" if row["fits"] else "OOM")
    # a model's ledger names the same terms in the same unit
    model = _json(capsys, "ledger", "tiny", "--phase", "prefill", "--seq", "64")
    assert set(one) - {"batch", "fits"} == set(model["terms"])


def test_fusion_plan_json_holds_the_comparison_the_text_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """``fusion plan --json`` gave the planner's plan alone: the unfused, suggested and ideal
    bytes and times of the text's last line, and the model and step, were not in it."""
    from costmodel.text import fmt_si

    argv = ("fusion", "plan", "tiny", "--phase", "prefill", "--seq", "64")
    text, _ = _run(capsys, *argv)
    doc = _json(capsys, *argv)
    assert (doc["model"], doc["phase"], doc["scope"], doc["batch"], doc["seq"]) == (
        "tiny",
        "prefill",
        "layer",
        1,
        64,
    )
    # the totals line (without the fusion extra a note on the heuristic plan follows it)
    last = next(line for line in text.splitlines() if line.startswith("layer: unfused "))
    for name in ("unfused", "suggested"):
        t = doc[name]
        assert f"{name} {fmt_si(t['dram_bytes'], 'B')}, {t['sum_of_kernel_bounds_s'] * 1e6:.2f} us" in last
    assert last.endswith(f"ideal {fmt_si(doc['ideal']['dram_bytes'], 'B')}")
    # the unfused plan and the ideal as `fusion audit` gives them for the same step
    audit = _json(capsys, "fusion", "audit", "tiny", "--phase", "prefill", "--seq", "64")
    assert doc["unfused"] == audit["unfused"] and doc["ideal"] == audit["ideal"]
    assert (audit["model"], audit["phase"], audit["seq"]) == ("tiny", "prefill", 64)


def test_the_simulate_csv_leaves_a_tpot_it_has_none_of_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One output token a request: no TPOT. The per-request CSV wrote 'nan' where sweep's and
    search's CSV leave the cell empty and --json gives null."""
    out = tmp_path / "r.csv"
    argv = ("simulate", "tiny", "--rate", "5", "--requests", "10", "--output", "fixed:1", "--quiet")
    _run(capsys, *argv, "--csv", str(out))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 10 and all(r["tpot_s"] == "" and r["output"] == "1" for r in rows)
    assert "nan" not in out.read_text() and all(float(r["ttft_s"]) > 0 for r in rows)
    assert _json(capsys, *argv)["tpot"]["p50_s"] is None


def test_serve_plans_json_says_its_notes_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """``serve plans --json`` is a list of rows (docs/serving.md: it stays one), so the notes its
    text prints beside the table (a skewed routing's meaning, a tp group across scale-up domains,
    a device without a price) had nowhere to go and were lost to a program. They are now said on
    stderr, word for word the text's (the skipped plans are the list's ``error`` rows)."""
    argv = ("serve", "plans", "mixtral-8x7b", "--device", "h100,l4", "--plans", "16x1x1x1,1x1x2x1")
    argv += ("--batches", "1", "--routing", "zipf:1.2")
    text, _ = _run(capsys, *argv)
    beside = [
        ln.strip().removeprefix("note: ")
        for ln in text.splitlines()
        if ln.startswith("  ") and not ln.startswith("  skipped ")
    ]
    assert len(beside) == 3 and beside[0].startswith("routing zipf:1.2: step of the busiest EP rank")
    assert "spans 2 scale-up domains of 8" in beside[1] and beside[2].startswith("$/M out for l4: no price")
    out, err = _run(capsys, *argv, "--json")
    rows = json.loads(out, parse_constant=_refuse_constant)
    assert isinstance(rows, list) and any("error" in r for r in rows)
    from costmodel.hardware import get_device
    from costmodel.hardware.fallback import roof_notes

    device = [*roof_notes(get_device("h100")), *roof_notes(get_device("l4"))]  # said first, before any work
    said = [ln.removeprefix("costmodel: note: ") for ln in err.splitlines()]
    assert said == [*device, *beside] and device  # l4's sfu roof stand-in (tests/test_device_notes.py)


def test_hw_compare_json_says_a_vendor_memory_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """``hw compare --json`` is a list of rows: the text's note that vr200's memory is its vendor's
    figure (no driver-reported one in the catalog) was lost under --json; it is said on stderr,
    the text's words, and the row's memory is that vendor figure (288 GB, catalog)."""
    text, _ = _run(capsys, "hw", "compare", "h100", "vr200")
    note = text.splitlines()[-1]
    assert note.endswith("the vendor's for vr200 (no driver figure in the catalog)")
    out, err = _run(capsys, "hw", "compare", "h100", "vr200", "--json")
    # vr200's preliminary figures said first, as by every command (tests/test_device_notes.py)
    assert err.splitlines()[0].startswith("costmodel: note: vr200 figures are preliminary")
    assert err.splitlines()[1:] == [f"costmodel: note: {note}"]
    assert json.loads(out)[1]["capacity_bytes"] == 288e9
    _, err = _run(capsys, "hw", "compare", "h100", "--json")
    assert err == ""  # a driver figure: nothing to say


def test_sweep_json_keeps_the_notes_its_text_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """``sweep --predict vllm`` prints the engine's KV-pool note and the coverage lines; its JSON
    had neither (only an empty frontier's line reached "notes"). Both now: the note's words as the
    text prints them, and the coverage's seconds as one object."""
    argv = (
        "sweep",
        "llama-3.1-8b",
        "--device",
        "h100",
        "--batches",
        "1",
        "--ctxs",
        "1024",
        "--predict",
        "vllm",
    )
    text, _ = _run(capsys, *argv)
    doc = _json(capsys, "--json", *argv)
    pool = next(line.strip()[len("note: ") :] for line in text.splitlines() if "KV pool" in line)
    assert pool in doc["notes"]
    cov = doc["coverage"]
    assert cov["measured_s"] > 0 and set(cov) >= {"measured_s", "neighbour_s", "bound_s"}


def test_a_search_result_explains_itself_with_the_slos_it_ran_with() -> None:
    """``SearchResult.verdict()`` called without SLOs (the library's natural call) joined an empty
    list ('of the 2 points that fit, , none both'): the result keeps the SLOs it was searched with.
    By hand, Llama-3.1-8B's decode on an H100 at batch 1 reads 16.06 GB at 3.35 TB/s, about 4.8 ms,
    far above a 0.1 ms TPOT SLO."""
    from graphs.serving.planning.design_search import search

    r = search("llama-3.1-8b", devices=["h100"], batches=[1, 8], ctxs=[1024], slo_tpot=0.0001)
    assert r.slo_tpot == 0.0001 and r.slo_ttft is None
    (line,) = r.verdict()
    assert line.startswith("no point meets the SLOs: of the 2 points that fit, the lowest TPOT is 0.0045")
    assert line.endswith("> 0.0001 s (--slo-tpot)")
    # no SLO given: nothing to explain beyond an empty frontier's other causes
    assert search("llama-3.1-8b", devices=["h100"], batches=[1], ctxs=[1024]).verdict() == []


def test_no_valid_data_parallel_plan_names_dp(capsys: pytest.CaptureFixture[str]) -> None:
    """``search --dp 4 --batches 1,2``: no batch divides over 4 ranks, and the line blamed only
    micro-batches (1 here) and stage links (no pipeline here)."""
    text, _ = _run(
        capsys,
        "search",
        "mixtral-8x7b",
        "--devices",
        "h100",
        "--dp",
        "4",
        "--batches",
        "1,2",
        "--ctxs",
        "1024",
    )
    assert "no batch is divisible by its micro-batches or, for a data-parallel plan, by its dp" in text


def test_simulate_json_keys_name_their_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --json`` gave latencies as ``{"mean", "p50", "p90", "p99"}`` (seconds, unsaid),
    ``rate``, ``slo_attainment`` and ``mean_batch``; every key now names its unit. The P99 TTFT
    is the per-request CSV's own percentile, the rate and SLOs the flags given."""
    import numpy as np

    out = tmp_path / "r.csv"
    argv = (
        "simulate",
        "tiny",
        "--rate",
        "5",
        "--requests",
        "20",
        "--slo-ttft",
        "1",
        "--slo-tpot",
        "0.05",
        "--quiet",
    )
    _run(capsys, *argv, "--csv", str(out))
    doc = _json(capsys, *argv)
    ttft = np.array([float(r["ttft_s"]) for r in csv.DictReader(out.open())])
    assert doc["ttft"]["p99_s"] == float(np.percentile(ttft, 99))
    assert set(doc["ttft"]) == set(doc["tpot"]) == set(doc["e2e"]) == {"mean_s", "p50_s", "p90_s", "p99_s"}
    assert (doc["rate_requests_per_s"], doc["slo_ttft_s"], doc["slo_tpot_s"]) == (5.0, 1.0, 0.05)
    assert 0 <= doc["slo_attainment_fraction"] <= 1 and doc["mean_batch_sequences"] > 0
    assert not {"rate", "slo_attainment", "mean_batch", "mean_in_system"} & set(doc)
    rates = _json(capsys, "simulate", "tiny", "--rates", "2,5", "--requests", "10", "--quiet")
    assert [r["rate_requests_per_s"] for r in rates["rates"]] == [2.0, 5.0]
    assert all("rate" not in r for r in rates["rates"])
