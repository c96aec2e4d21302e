"""The benchmarks' shared replay package (:mod:`benchmarks.replay`): imported as a package, writing
only ``docs/`` and the README, and the silicon page kept a method and a summary with its rows in a
CSV appendix that reads back the values the table showed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import replay
from benchmarks.replay import pages, results
from benchmarks.replay.tables import Line
from costmodel.errors import CostModelError

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "benchmarks").rglob("*.py"))
SILICON_PAGE = ROOT / "docs" / "silicon_accuracy.md"
SILICON_ROWS = ROOT / "docs" / "silicon_accuracy_rows.csv"
LOAD_CHECK = ROOT / "docs" / "silicon_load_check.csv"


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: str(p.relative_to(ROOT / "benchmarks")))
def test_no_benchmark_reaches_another_through_sys_path(path: Path) -> None:
    """The shared code is a package (``python -m benchmarks.<script>``), never a path insert."""
    code = path.read_text(encoding="utf-8")
    assert not re.search(r"sys\.path\.(insert|append)|^import (serving|silicon)_accuracy", code, re.M)


def _row(rid: str, metric: str = "tpot_mean_s") -> dict[str, str]:
    return {"id": rid, "metric": metric, "unit": "s", "source_url": "https://example.org/s.csv"}


def test_a_table_line_reads_back_as_the_csv_row() -> None:
    """The CSV holds what the table shows: 0.012345 s prints as ``12.3 ms`` (3 significant digits)
    and is stored as 0.0123 s; 0.0135 / 0.0120 - 1 = +12.5 %; a row beyond 25 % keeps its reason
    without the table's bold."""
    ln = Line(_row("a-tpot"), {"bound": 0.006, "predicted": 0.012345, "simulated": 0.0135}, ("one wave",))
    ln.row["value"] = "0.012"
    (row,) = results.result_rows([ln])
    assert row["measured_s"] == "0.012" and row["predicted_s"] == "0.0123" and row["simulated_s"] == "0.0135"
    assert row["simulated_error_pct"] == "+12.5"  # 0.0135 / 0.012 - 1
    assert row["bound_error_pct"] == "-50.0"  # 0.006 / 0.012 - 1
    assert row["excluded"] == "" and row["notes"] == "one wave"
    far = Line({**_row("b-ttft", "ttft_mean_s"), "value": "2.0"}, {"simulated": 3.0}, ())
    (row,) = results.result_rows([far])
    assert row["simulated_s"] == "3" and row["simulated_error_pct"] == "+50.0"  # 3 / 2 - 1
    assert (
        row["bound_s"] == ""
        and row["notes"].startswith("beyond 25 % (simulated): ")
        and "**" not in row["notes"]
    )


def test_an_excluded_row_keeps_its_reason_and_no_notes() -> None:
    cells = ["[x-ttft](u)", "ttft_mean_s", "1.23 s", "-", "-", "900 ms", "-26.8 %", "-", "-"]
    row = results.from_cells([*cells, "excluded: not one wave"], ["bound", "predicted", "simulated"])
    assert row["id"] == "x-ttft" and row["measured_s"] == "1.23" and row["predicted_s"] == "0.9"
    assert row["excluded"] == "not one wave" and row["notes"] == ""


def test_cells_are_refused_in_one_line() -> None:
    with pytest.raises(CostModelError, match="time cell '12 tok/s' not allowed"):
        results.seconds_cell("12 tok/s")
    with pytest.raises(CostModelError, match="a table row of 3 cells"):
        results.from_cells(["a", "b", "c"], ["bound"])
    tok = Line(
        {**_row("t-out", "output_throughput_tok_s"), "unit": "tok/s", "value": "100"}, {"bound": 90.0}, ()
    )
    with pytest.raises(CostModelError, match="unit 'tok/s' not allowed in a results CSV"):
        results.result_rows([tok])


def test_a_results_file_is_checked_when_read(tmp_path: Path) -> None:
    bad = tmp_path / "r.csv"
    bad.write_text("id,metric\nx,y\n", encoding="utf-8")
    with pytest.raises(CostModelError, match=r"header .* not allowed"):
        results.read_results(bad)
    head = ",".join(results.FIELDS)
    bad.write_text(f"{head}\nx,tpot_mean_s,0.01,,,,,0.011,ten,,\n", encoding="utf-8")
    with pytest.raises(CostModelError, match="simulated_error_pct 'ten'"):
        results.read_results(bad)
    with pytest.raises(CostModelError, match="no results file"):
        results.read_results(tmp_path / "none.csv")


def test_simulated_errors_leave_out_excluded_and_unrun_rows(tmp_path: Path) -> None:
    # a file written before the queue share column still reads, every queue share empty
    head = ",".join(results.LEGACY_FIELDS)
    body = [
        "a,tpot_mean_s,0.01,,,,,0.011,+10.0,,",  # 0.011 / 0.01 - 1 = +10 %
        "b,ttft_mean_s,1,,,,,2,+100.0,not loaded as replayed,",
        "c,ttft_mean_s,1,,,,,,,,",
    ]
    path = tmp_path / "r.csv"
    path.write_text("\n".join([head, *body]) + "\n", encoding="utf-8")
    assert results.simulated_errors(path) == {"a": pytest.approx(0.10)}
    assert results.simulated_queue_shares(path) == {}


def test_the_queue_share_column_is_written_and_read_back(tmp_path: Path) -> None:
    ln = Line({**_row("a-ttft", "ttft_mean_s"), "value": "0.2"}, {"simulated": 0.25}, (), queue_share=0.734)
    off = Line({**_row("b-ttft", "ttft_mean_s"), "value": "0.2"}, {"simulated": 0.21}, (), queue_share=0.05)
    rows = results.result_rows([ln, off])
    assert [r["simulated_queue_share"] for r in rows] == ["0.73", "0.05"]  # 2 decimals
    path = tmp_path / "r.csv"
    path.write_text(
        ",".join(results.FIELDS)
        + "\n"
        + "\n".join(",".join(r[f] for f in results.FIELDS) for r in rows)
        + "\n",
        encoding="utf-8",
    )
    assert results.simulated_queue_shares(path) == {"a-ttft": 0.73, "b-ttft": 0.05}
    bad = path.read_text(encoding="utf-8").replace(",0.73,", ",73 %,")
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(CostModelError, match="simulated_queue_share '73 %'"):
        results.read_results(path)


def test_pages_are_written_only_in_docs_and_the_readme(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("a <!-- b --> old <!-- e --> z", encoding="utf-8")
    with pytest.raises(CostModelError, match="writes only docs/ and the README"):
        pages.replace_section(page, "<!-- b -->", "<!-- e -->", "new")
    with pytest.raises(CostModelError, match="writes only docs/"):
        pages.write_csv(tmp_path / "r.csv", ("id",), [])
    assert page.read_text(encoding="utf-8") == "a <!-- b --> old <!-- e --> z"


def test_home_paths_are_stripped_and_prose_wrapped() -> None:
    text = "source_file=/Users/someone/projects/gap/data/x.csv; /home/ci/run/y.csv"
    assert pages.strip_home(text) == "source_file=projects/gap/data/x.csv; run/y.csv"
    para = pages.wrap(" ".join(["word"] * 100))  # 499 characters
    assert max(map(len, para.splitlines())) <= pages.WIDTH and para.replace("\n", " ") == " ".join(
        ["word"] * 100
    )


def test_the_silicon_page_is_a_method_and_a_summary() -> None:
    """docs/silicon_accuracy.md: a short page (no per-row table), every line under 200 characters,
    no home-directory path; its rows in the CSV appendices, which read back. (The method grew by
    the recovered E2E rows, the TPOT-below-roofline rule and the runs without a stated load: 258
    lines where the per-row table made it 2,303.)"""
    text = SILICON_PAGE.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 270
    assert max(map(len, lines)) <= 200
    assert not re.search(r"/Users/|/home/", text)
    assert "silicon_accuracy_rows.csv" in text and "silicon_load_check.csv" in text
    rows = results.read_results(SILICON_ROWS)
    assert len(rows) > 1000 and all(r["id"].startswith("aicsil-") for r in rows)
    assert {r["metric"] for r in rows} == {
        "ttft_mean_s",
        "tpot_mean_s",
        "e2e_mean_s",
    }  # E2E: fixed-length clients' runs
    for path in (SILICON_ROWS, LOAD_CHECK):
        assert not re.search(r"/Users/|/home/", path.read_text(encoding="utf-8"))


def test_the_silicon_rows_are_the_samples() -> None:
    """Every row of the CSV is a row :func:`benchmarks.replay.silicon.silicon_rows` replays, with
    the measured value the sample gives (to the CSV's 3 significant digits)."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from benchmarks.replay.silicon import load_sample, silicon_rows

    sample = {r["id"]: r for r in silicon_rows(load_sample())[0]}
    for r in results.read_results(SILICON_ROWS):
        assert r["id"] in sample
        assert float(r["measured_s"]) == pytest.approx(float(sample[r["id"]]["value"]), rel=5e-3)


def test_the_package_re_exports_the_replay() -> None:
    for name in ("load_rows", "row_workload", "run_row", "simulate_row", "table", "medians", "FRAMEWORK"):
        assert name in replay.__all__ and hasattr(replay, name)


def test_the_row_table_carries_the_queue_share_and_it_reads_back(tmp_path: Path) -> None:
    from benchmarks.replay.tables import table
    from benchmarks.served_errors import missing_queue_shares, table_errors, table_queue_shares

    modes = {"bound": 0.1, "predicted": 0.2}
    a = Line(
        {**_row("a-ttft", "ttft_mean_s"), "value": "0.2"}, {**modes, "simulated": 0.25}, (), queue_share=0.734
    )
    b = Line({**_row("b-ttft", "ttft_mean_s"), "value": "0.2"}, {**modes, "simulated": 0.21}, ())
    text = table([a, b])
    assert text.splitlines()[0].endswith("| simulated | error | simulated queue share | notes |")
    doc = tmp_path / "page.md"
    doc.write_text(text + "\n", encoding="utf-8")
    assert table_queue_shares(doc) == {"a-ttft": 0.73}  # b was not run in that mode: "-"
    # the error column did not move: 0.25 / 0.2 - 1 = +25 %, 0.21 / 0.2 - 1 = +5 %
    assert table_errors(doc) == {"a-ttft": pytest.approx(0.25), "b-ttft": pytest.approx(0.05)}
    rows = [
        {"set": "published", "id": "a-ttft", "queue_share": 0.73},
        {"set": "silicon", "id": "s", "queue_share": None},
    ]
    why = missing_queue_shares(rows)
    assert why is not None and why.startswith("1 of 2 compared rows (silicon; first: s)")
    assert "python -m benchmarks.silicon_accuracy --write" in why and missing_queue_shares(rows[:1]) is None


def test_every_sharegpt_sample_without_lengths_is_left_out_by_its_workload() -> None:
    """A row that samples ShareGPT and states no prompt length (the vLLM CI builds 9513, 9523 and
    9555's throughput and serving tests: "200 prompts sampled with fixed seed", isl empty in the
    CSV) cannot be replayed request by request, whatever its id; a fixed-length latency test
    of the same build (isl 32, osl 128 in the CSV) is kept."""
    from benchmarks.replay import rows

    by_id = {r["id"]: r for r in rows.load_rows(subset=None)}
    for rid in (
        "vllmci9513-throughput-llama-3.1-8b-tp1",
        "vllmci9523-throughput-mixtral-8x7b-tp2",
        "vllmci9555-serving-llama-3.1-70b-tp4-qps1-ttft",
    ):
        assert rows.excluded(by_id[rid]) == rows.SAMPLED_LENGTHS
    latency = by_id["vllmci9555-latency-llama-3.1-8b-tp1"]
    assert (latency["isl"], latency["osl"]) == ("32", "128") and rows.excluded(latency) is None
    made_up = {"id": "x-throughput", "workload": "ShareGPT v3, 500 prompts", "isl": ""}
    assert rows.excluded(made_up) == rows.SAMPLED_LENGTHS
    assert rows.excluded({**made_up, "isl": "1024"}) is None


def test_a_bursts_latency_row_simulates_every_request() -> None:
    """An offline run's throughput is extrapolated from five full batches; its TTFT and TPOT are
    means over every request, each at its place in the queue, so their rows simulate all of them:
    GPUStack's TensorRT-LLM Qwen3-32B run on an A100 at 4000/200 (500 prompts, the page's block)."""
    pytest.importorskip("aiconfigurator_core", reason="the replay prices the kernels")
    from benchmarks.replay.rows import load_rows
    from benchmarks.replay.workload import row_workload

    rows = {r["id"]: r for r in load_rows()}
    rid = "gpustack-qwen3-32b-a100-80gb-tp1-opt-4000-200"
    tput = row_workload(rows[f"{rid}-tput"])
    assert len(tput.requests) < 500 and tput.published_requests == 500  # five batches, extrapolated
    for metric in ("ttft", "tpot"):
        assert len(row_workload(rows[f"{rid}-{metric}"]).requests) == 500
