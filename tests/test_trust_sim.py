"""Issue 26, the simulator, search and output files: every reproducer gives the right answer or a
one-line error naming the field (small workloads, so that the file stays fast)."""

from __future__ import annotations

import io
import math
import os
import random
import re
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.outfiles import atomic_write, check_output, sibling
from graphs.cli.common import progress_bar
from graphs.cli.main import build_parser, main
from graphs.cli.options import FLOAT_RANGES, INT_RANGES, all_actions
from graphs.serving.planning.capacity_search import max_rate
from graphs.serving.planning.design_search import search
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request, arrival_times, load_trace, read_trace, synthetic
from graphs.serving.sim.simulator import Topology, simulate

M = "llama-3.1-8b"
ROOT = Path(__file__).resolve().parents[1]


def _write_trace(path: Path, reqs: list[Request], offset: str = "0", prefixes: bool = False) -> Path:
    """``reqs`` as a CSV trace, each arrival written exactly as ``offset + arrival`` in decimal."""
    head = "arrival_s,prompt_tokens,output_tokens" + (",prefix_id,prefix_tokens" if prefixes else "")
    lines = [head]
    for r in reqs:
        with localcontext(Context(prec=60)):
            a = Decimal(offset) + Decimal(repr(r.arrival_s))
        row = f"{a},{r.prompt},{r.output}"
        if prefixes:
            row += f",{'' if r.prefix_id is None else f'sys{r.prefix_id}'},{r.prefix if r.prefix_id is not None else ''}"
        lines.append(row)
    path.write_text("\n".join(lines) + "\n")
    return path


def _one_line_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "internal error" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# ---------------------------------------------------------------- 1. absolute timestamps
@pytest.mark.parametrize("offset", ["1e15", "1733011200123.456"])  # 1e15 s; a Unix time in ms
def test_absolute_timestamps_are_rebased_exactly(tmp_path, offset):
    reqs = synthetic(40, rate=8.0, prompt="uniform:100,400", output="uniform:5,30", seed=3)
    want = simulate(M, "h100", reqs)
    tr = read_trace(_write_trace(tmp_path / "abs.csv", reqs, offset))
    assert tr.origin_s == float(Decimal(offset))
    # the decimal texts minus the first one, exactly: the very arrivals drawn
    assert [r.arrival_s for r in tr.requests] == [r.arrival_s for r in reqs]
    got = simulate(M, "h100", tr.requests)
    assert got.ttft.mean > 0 and got.tpot.mean > 0
    np.testing.assert_array_equal(got.per_request["ttft_s"], want.per_request["ttft_s"])
    np.testing.assert_array_equal(got.per_request["tpot_s"], want.per_request["tpot_s"])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(st.floats(0, 1e6).map(lambda x: round(x, 9)), min_size=1, max_size=20).map(sorted),  # to 1 ns
    st.sampled_from(["0", "1e9", "1733011200.123456789", "1e15", "123456789012345678"]),
)
def test_rebasing_a_trace_recovers_its_gaps_exactly(tmp_path_factory, arrivals, offset):
    """Whatever the offset, the rebased arrivals are the relative times written (decimal
    arithmetic on the trace's text; no rounding at the offset's magnitude)."""
    start = arrivals[0]
    reqs = [Request(i, a - start, 10, 2) for i, a in enumerate(arrivals)]
    path = _write_trace(tmp_path_factory.mktemp("t") / "t.csv", reqs, offset)
    assert [r.arrival_s for r in load_trace(path)] == [r.arrival_s for r in reqs]


def test_the_simulator_runs_relative_to_the_first_arrival():
    """A lone request at t = 1e15 s sees the same TTFT as at t = 0 (the clock's spacing there is
    0.125 s, longer than the whole request, so absolute time arithmetic would give 0)."""
    at0 = simulate(M, "h100", [Request(0, 0.0, 512, 16)])
    late = simulate(M, "h100", [Request(0, 1e15, 512, 16)])
    assert math.ulp(1e15) == 0.125 and at0.ttft.mean > 0
    assert late.ttft == at0.ttft and late.tpot == at0.tpot and late.time_origin_s == 1e15


def test_the_command_says_it_rebased(capsys, tmp_path):
    reqs = synthetic(20, rate=5.0, prompt="fixed:200", output="fixed:10", seed=1)
    path = _write_trace(tmp_path / "abs.csv", reqs, "1e15")
    assert main(["simulate", M, "--trace", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "arrivals rebased to the first one (t = 1000000000000000.0 s taken as 0)" in out
    ttft_mean = float(re.search(r"TTFT s\s+([0-9.]+)", out).group(1))
    assert ttft_mean > 0


# ---------------------------------------------------------------- 2. the max-rate ceiling
def test_max_rate_never_answers_beyond_the_physical_ceiling():
    """50 fixed requests never queue: every rate meets a 1 s TTFT. The search stops at the
    ceiling and says the rate is not determined, instead of doubling to 536,870,912 requests/s.

    Hand bound: every token of a request (500 prompt + 49 decoded) passes Llama-3.1-8B's
    non-embedding weights, 2 x 6.98e9 FLOP per token (8.03e9 parameters less the two
    128256 x 4096 embedding tables); at the H100's 989.4 TFLOP/s dense bf16 that is at most
    989.4e12 / 13.96e9 = 70,900 tokens/s, 129 requests/s: no probe may go above it.
    """
    m = max_rate(M, "h100", slo_ttft=1.0, slo_tpot=None, requests=50, prompt="fixed:500", output="fixed:50")
    n_nonemb = 8.03e9 - 2 * 128256 * 4096
    peak = 989.4e12
    hand_ceiling = peak / (2 * n_nonemb) / (500 + 49)
    assert 120 < hand_ceiling < 135
    assert m.rate is None and not m.saturated and m.at_rate is None
    # the highest probe is the ceiling to four significant digits, rounded down (every probe
    # runs at a rate printed exactly: simulate --max-rate's probes)
    top = max(r for r, *_ in m.probes)
    assert top == float(f"{top:.4g}") and m.ceiling_rate * (1 - 1e-3) <= top <= m.ceiling_rate <= hand_ceiling
    assert m.ceiling_rate > 0.75 * hand_ceiling  # the token-wise kernels are compute-bound here
    assert all(ok for _, ok, *_ in m.probes)


def test_max_rate_command_says_not_determined(capsys, tmp_path):
    argv = ["simulate", M, "--requests", "50", "--prompt", "fixed:500", "--output", "fixed:50"]
    csv = str(tmp_path / "r.csv")
    _one_line_error(capsys, [*argv, "--max-rate", "--slo-ttft", "1", "--csv", csv], "--max-rate writes no")
    assert main([*argv, "--max-rate", "--slo-ttft", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "not determined" in out and "raise --requests" in out and "max rate" not in out
    assert "536,870,912" not in out and "--requests 50 --seed 0 --prompt fixed:500" in out


# ---------------------------------------------------------------- 3. numeric ranges
def _numeric_flags(command: str) -> list[tuple[str, str]]:
    out = []
    for prog, a in all_actions(build_parser()):
        name = prog.split(" ", 1)[1] if " " in prog else prog
        if name.startswith(command) and a.option_strings and (a.dest in INT_RANGES or a.dest in FLOAT_RANGES):
            if isinstance(a.type, type(lambda: 0)):  # a validating type from options.finish
                out.append((name, a.option_strings[-1]))
    return out


def test_every_numeric_simulate_and_serve_flag_is_ranged():
    parser = build_parser()
    for prog, a in all_actions(parser):
        name = prog.split(" ", 1)[1] if " " in prog else ""
        if name.startswith(("simulate", "serve")) and a.option_strings:
            assert a.type not in (int, float), f"{prog} {a.option_strings[-1]} has no range"
    assert len(_numeric_flags("simulate")) >= 15 and len(_numeric_flags("serve")) >= 10


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e400", "1e-320"])
@pytest.mark.parametrize("command", ["simulate", "serve"])
def test_out_of_range_values_are_one_line_errors(capsys, command, value):
    """Every numeric flag refuses non-finite, negative and absurd values with its allowed range
    (``1e-320`` is allowed only where the range starts at 0 inclusive)."""
    for name, flag in _numeric_flags(command):
        words = name.split()
        dest = flag.lstrip("-").replace("-", "_")
        lo_ok = (INT_RANGES.get(dest, (1,))[0] == 0) if dest in INT_RANGES else FLOAT_RANGES[dest][0] == 0
        if value == "1e-320" and (lo_ok or dest in INT_RANGES):
            continue
        argv = [*words, *(["tiny"] if words[0] == "simulate" else []), f"{flag}={value}"]
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and flag in err and "must be" in err, (argv, err)


def test_absurd_rates_and_links_are_refused_by_the_library():
    rng = np.random.default_rng(0)
    for rate in (1e-320, 1e-300, math.nan, math.inf, 2e9):
        with pytest.raises(CostModelError, match=r"rate must be in \[1e-06, 1e\+09\]"):
            arrival_times(3, rate, "poisson", rng)
    for bw in (1e-300, 0.0, math.nan, 1e20):
        with pytest.raises(CostModelError, match="link_bandwidth must be in"):
            Topology(prefill_replicas=1, decode_replicas=2, link_bandwidth=bw)


def test_the_rate_and_link_errors_on_the_command_line(capsys):
    _one_line_error(capsys, ["simulate", "tiny", "--rate", "1e-320"], "--rate must be in [1e-06, 1e+09]")
    _one_line_error(capsys, ["simulate", "tiny", "--rate", "1e-300"], "--rate")
    _one_line_error(
        capsys,
        ["simulate", "tiny", "--rate", "1", "--disagg", "1:1", "--link-bandwidth", "1e-300"],
        "--link-bandwidth must be in [1e+06, 1e+15]",
    )


# ---------------------------------------------------------------- 4. steady state vs the drain tail
def test_steady_state_throughput_excludes_the_drain_tail():
    """Unsaturated at 20 requests/s: what completes while requests still arrive tracks the
    offered rate (n - 1 arrivals after the first over the arrival window), while the overall
    figure, diluted by the drain after the last arrival, falls below it."""
    reqs = synthetic(300, rate=20.0, prompt="lognormal:1000,1.0", output="lognormal:250,1.0", seed=0)
    res = simulate(M, "h100", reqs)
    a = res.per_request["arrival_s"]
    finish = a + res.per_request["e2e_s"]
    window = a.max() - a.min()
    assert res.steady_window_s == pytest.approx(window) and res.drain_s == pytest.approx(
        finish.max() - a.max()
    )
    offered = (len(a) - 1) / window
    assert res.offered_requests_per_s == pytest.approx(offered)
    # Little: about rate x mean E2E requests are still in flight at the last arrival
    in_flight = offered * res.e2e.mean
    assert res.steady_requests_per_s == pytest.approx((len(a) - in_flight) / window, rel=0.1)
    assert res.requests_per_s == pytest.approx(len(a) / (window + res.drain_s))
    assert res.requests_per_s < res.steady_requests_per_s
    assert res.steady_output_tokens_per_s == pytest.approx(
        res.steady_requests_per_s * float(np.mean(res.per_request["output"])), rel=0.25
    )


def test_steady_state_is_undefined_when_everything_arrives_at_once():
    res = simulate(M, "h100", [Request(i, 0.0, 100, 10) for i in range(4)])
    assert res.steady_requests_per_s is None and res.steady_window_s == 0


def test_simulate_echoes_the_settings_it_used(capsys):
    assert main(["simulate", "tiny", "--rate", "20", "--requests", "50", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert (
        "workload: --requests 50 --seed 0 --prompt lognormal:1000,1.0 --output lognormal:250,1.0 --arrival poisson"
        in out
    )
    assert "steady-state throughput (first to last arrival" in out and "drain tail" in out


def test_the_readme_max_rate_command_is_the_examples_workload():
    """The README's ``--max-rate`` line repeats the example's draw (1000 requests, seed 7): the
    max rate the README prints is the one the command gives."""
    readme = (ROOT / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("costmodel simulate") and "--max-rate" in ln]
    example = (ROOT / "examples" / "serving_simulation.py").read_text()
    assert "--seed 7" in line and "seed=7," in example
    assert "requests=300 if small else 1000" in example and "--requests" not in line  # 1000: the default


# ---------------------------------------------------------------- 5. search: contexts and duplicates
def test_each_context_gets_its_own_frontier():
    kw = dict(devices=["h100"], tp=[1, 2], batches=[1, 8, 64, 256])
    both = search(M, ctxs=[1024, 16384], **kw)
    alone = {c: search(M, ctxs=[c], **kw) for c in (1024, 16384)}
    assert {r["ctx"] for r in both.frontier} == {1024, 16384} and both.contexts == 2
    for c, res in alone.items():
        assert [r for r in both.frontier if r["ctx"] == c] == list(res.frontier)
        assert both.best_by_ctx[c] == res.best
    assert both.best == {}


#: the catalog's [devices.h100-sxm] has aliases = ["h100"] (costmodel/hardware/catalog.toml)
_ALIAS_TWICE = "gives h100-sxm twice (as h100 and h100-sxm): list each device once"


def test_devices_named_twice_or_by_alias_are_refused_by_the_library(capsys):
    """One answer for a repeated device: search() and size_deployment() refuse it, naming it, as
    sweep and every list option do (they once searched it once and said so); so are dtypes given
    twice, in the words the devices' refusal uses (search searched them once, sweep twice)."""
    from graphs.serving.analysis.sweeps import sweep
    from graphs.serving.planning.sizing import size_deployment

    assert get_device("h100").name == "h100-sxm"
    kw = dict(batches=[1, 16, 128], ctxs=[4096])
    with pytest.raises(CostModelError) as info:
        search(M, devices=["h100", "h100-sxm"], **kw)
    assert str(info.value) == f"devices {_ALIAS_TWICE}"  # the library's parameter
    with pytest.raises(CostModelError) as info:
        search(M, devices=["h100", "h100"], **kw)
    assert str(info.value) == "devices gives h100-sxm twice (as h100 and h100): list each device once"
    with pytest.raises(CostModelError) as info:
        size_deployment(
            "tiny", rate=1.0, slo_ttft=1.0, slo_tpot=0.05, devices=["h100", "h100-sxm"], tps=[1], requests=10
        )
    assert str(info.value) == f"devices {_ALIAS_TWICE}"
    with pytest.raises(CostModelError) as info:
        search(M, devices=["h100"], weight_dtypes=["fp8", "fp8"], **kw)
    assert str(info.value) == "weight_dtypes gives fp8_e4m3 twice (as fp8 and fp8): list each dtype once"
    with pytest.raises(CostModelError) as info:
        search(M, devices=["h100"], kv_dtypes=["fp8_e4m3", "fp8"], **kw)
    assert str(info.value) == "kv_dtypes gives fp8_e4m3 twice (as fp8_e4m3 and fp8): list each dtype once"
    with pytest.raises(CostModelError) as info:
        sweep(M, devices=["h100"], weight_dtypes=["fp8", "fp8"], **kw)
    assert str(info.value) == "weight_dtypes gives fp8_e4m3 twice (as fp8 and fp8): list each dtype once"
    with pytest.raises(CostModelError) as info:
        sweep(M, devices=["h100", "h100-sxm"], **kw)
    assert str(info.value) == f"devices {_ALIAS_TWICE}"
    # the command line refuses the same list in its option's name, and the library's words match it
    said = _one_line_error(
        capsys, ["search", M, "--device", "h100", "--weight-dtypes", "fp8,fp8", "--batches", "1"]
    )
    assert said == "costmodel: error: --weight-dtypes gives fp8_e4m3 twice: list each value once"
    once = search(M, devices=["h100"], weight_dtypes=["fp8"], **kw)
    assert once.duplicates == ()


@pytest.mark.parametrize("command", ["search", "size", "sweep"])
def test_every_device_list_refuses_an_alias_twice(capsys, command):
    """search and size answer a repeated device as sweep does: one line naming it, exit 2."""
    argv = {
        "search": ["search", "tiny", "--ctxs", "16", "--batches", "1"],
        "size": ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "0.05", "--requests", "10"],
        "sweep": ["sweep", "tiny", "--ctxs", "16", "--batches", "1"],
    }[command]
    flag = "--device" if command == "sweep" else "--devices"  # the option each command documents
    assert (
        _one_line_error(capsys, [*argv, "--devices", "h100,h100-sxm"])
        == f"costmodel: error: {flag} {_ALIAS_TWICE}"
    )


def test_search_says_how_much_of_the_frontier_it_shows(capsys):
    argv = ["search", M, "--batches", "1:256:2", "--ctxs", "1024..8192/1024", "--quiet"]
    assert main([*argv, "--top", "5"]) == 0
    out = capsys.readouterr().out
    total = int(re.search(r"Pareto frontier \((\d+) points over 8 contexts", out).group(1))
    assert f"showing 5 of {total} frontier points" in out and total > 5


# ---------------------------------------------------------------- 6. output files
def test_companion_names_come_from_the_file_name_only():
    assert sibling("/x/d.v2/plot", "timeline", default_suffix=".png") == Path("/x/d.v2/plot-timeline.png")
    assert sibling("/x/d.v2/sim.SVG", "timeline") == Path("/x/d.v2/sim-timeline.SVG")
    assert sibling("sim", "timeline") == Path("sim-timeline")


def test_output_paths_are_checked_before_any_work(capsys, tmp_path):
    base = ["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet"]
    _one_line_error(capsys, [*base, "--csv", str(tmp_path / "nope" / "r.csv")], "--csv", "does not exist")
    _one_line_error(capsys, [*base, "--csv", str(tmp_path)], "is a folder")
    (tmp_path / "f").write_text("x")
    _one_line_error(capsys, [*base, "--csv", str(tmp_path / "f" / "r.csv")], "is not a folder")
    d = tmp_path / "d.v2"
    d.mkdir()
    (d / "plot-timeline.png").mkdir()  # the timeline's name is taken by a folder: refused up front
    _one_line_error(capsys, [*base, "--plot", str(d / "plot")], "--plot (its timeline)", "is a folder")
    assert not (d / "plot").exists()


def test_a_pipe_no_process_reads_is_refused_before_the_work(capsys, tmp_path):
    """A review wrote a fit to a named pipe with no reader: the fit ran, then the write failed
    (the pipe is opened without blocking: ENXIO). Now refused up front; with a reader it is written."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    from costmodel.outfiles import atomic_write, check_output

    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    base = ["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet"]
    _one_line_error(capsys, [*base, "--csv", str(fifo)], "--csv", "is a named pipe no process reads")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader: the same path is taken
    try:
        assert check_output(fifo, "--csv") == fifo
        with atomic_write(fifo, "--csv") as f:
            f.write("a,b\n")
        assert os.read(reader, 100) == b"a,b\n"
    finally:
        os.close(reader)


def test_a_full_disk_is_a_one_line_error(capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    base = ["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet"]
    _one_line_error(capsys, [*base, "--csv", "/dev/full"], "--csv '/dev/full': cannot write it")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "r.csv"
    target.write_text("old\n")
    with pytest.raises(CostModelError, match=r"--csv .*cannot write it \(No space left on device\)"):
        with atomic_write(target, "--csv") as f:
            f.write("half a row,")
            raise OSError(28, "No space left on device")
    assert target.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["r.csv"]
    with atomic_write(target, "--csv") as f:
        f.write("new\n")
    assert target.read_text() == "new\n" and sorted(os.listdir(tmp_path)) == ["r.csv"]
    with pytest.raises(CostModelError, match="is a folder"):
        check_output(tmp_path, "--csv")


def test_plot_names_and_csv_files(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="plot extra not installed")
    d = tmp_path / "d.v2"
    d.mkdir()
    stray = tmp_path / "d-timeline.v2"
    stray.write_text("someone's file")
    csv = d / "r.csv"
    argv = ["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet"]
    assert main([*argv, "--plot", str(d / "plot"), "--csv", str(csv)]) == 0
    capsys.readouterr()
    assert (d / "plot").read_bytes()[:4] == b"\x89PNG" and (d / "plot-timeline.png").read_bytes()[
        :4
    ] == b"\x89PNG"
    assert stray.read_text() == "someone's file"
    assert csv.read_text().startswith("arrival_s,ttft_s,") and len(csv.read_text().splitlines()) == 21
    assert sorted(p.name for p in d.iterdir()) == ["plot", "plot-timeline.png", "r.csv"]


def test_search_and_sweep_csv_use_the_checked_writer(capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    _one_line_error(
        capsys, ["search", M, "--batches", "1", "--ctxs", "1024", "--csv", "/dev/full", "--quiet"], "--csv"
    )
    _one_line_error(
        capsys, ["sweep", M, "--batches", "1", "--ctxs", "1024", "--csv", "/dev/full", "--quiet"], "--csv"
    )


# ---------------------------------------------------------------- 7. disaggregated pool sizes
@pytest.mark.parametrize("spec", ["100000000:1", "1000000000:1", "1:1000000", "4097:1"])
def test_disaggregated_pools_are_bounded(capsys, spec):
    argv = ["simulate", "tiny", "--rate", "1", "--disagg", spec, "--link-bandwidth", "1e9", "--quiet"]
    _one_line_error(capsys, argv, "--disagg", "[1, 4096]")
    with pytest.raises(CostModelError, match=r"in \[0, 4096\]"):
        p, d = (int(x) for x in spec.split(":"))
        Topology(prefill_replicas=p, decode_replicas=d, link_bandwidth=1e9)


# ---------------------------------------------------------------- 8. internal errors no more
def test_an_oversized_csv_field_names_the_row(capsys, tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0,1" + "0" * 140_000 + ",5\n")
    _one_line_error(
        capsys, ["simulate", "tiny", "--trace", str(path), "--quiet"], "row 2", "131,072 characters"
    )


def test_an_unreachable_dask_scheduler_is_a_one_line_error(capsys, monkeypatch):
    pytest.importorskip("distributed", reason="dask extra not installed")
    import graphs.cli.dask_option as dask_option

    monkeypatch.setattr(dask_option, "DASK_CONNECT_TIMEOUT_S", 1)  # a closed loopback port fails fast
    argv = ["search", "tiny", "--scheduler", "dask", "--dask-address", "tcp://127.0.0.1:1"]
    _one_line_error(
        capsys, [*argv, "--batches", "1", "--ctxs", "128", "--quiet"], "--dask-address", "within 1 s"
    )


# ---------------------------------------------------------------- 9. suffixes, BOM, bounded reads
def test_trace_suffix_is_case_insensitive_and_a_bom_is_dropped(tmp_path):
    up = tmp_path / "t.JSONL"
    up.write_text(
        '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n{"arrival_s": 1.5, "prompt_tokens": 20, "output_tokens": 6}\n'
    )
    assert [(r.arrival_s, r.prompt, r.output) for r in load_trace(up)] == [(0.0, 10, 5), (1.5, 20, 6)]
    bom = tmp_path / "bom.csv"
    bom.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n", encoding="utf-8-sig")
    assert bom.read_bytes()[:3] == b"\xef\xbb\xbf"
    assert [(r.prompt, r.output) for r in load_trace(bom)] == [(10, 5)]


def test_trace_reads_are_bounded(tmp_path, monkeypatch, capsys):
    import graphs.serving.sim.requests as rq

    path = _write_trace(tmp_path / "t.csv", [Request(i, float(i), 10, 2) for i in range(6)])
    monkeypatch.setattr(rq, "MAX_TRACE_ROWS", 5)
    with pytest.raises(CostModelError, match="more than 5 requests"):
        load_trace(path)
    monkeypatch.setattr(rq, "MAX_TRACE_BYTES", 40)
    with pytest.raises(
        CostModelError, match=rf"is {path.stat().st_size:,} bytes \(0.0 MiB\), larger than the 40 bytes"
    ):
        load_trace(path)
    monkeypatch.setattr(rq, "MAX_TRACE_BYTES", 64 << 20)
    # a regular file of one endless line: stops at one line's limit, not at the memory's
    line = tmp_path / "line.csv"
    line.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n" + b"1" * (2 << 20))
    _one_line_error(capsys, ["simulate", "tiny", "--trace", str(line), "--quiet"], "line 2 is longer than")
    if os.path.exists("/dev/zero"):  # endless input: a device is refused before a byte is read
        _one_line_error(
            capsys, ["simulate", "tiny", "--trace", "/dev/zero", "--quiet"], "is not a regular file"
        )
    if hasattr(os, "mkfifo"):  # a FIFO nobody writes: refused, never waited on (it blocked open())
        fifo = tmp_path / "t.fifo.csv"
        os.mkfifo(fifo)
        with pytest.raises(CostModelError, match="is not a regular file"):
            load_trace(fifo)


def test_a_trace_grown_past_its_cap_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its bytes are counted as they are read: a file that grows past MAX_TRACE_BYTES after its size
    was checked stops there (as if the size check had let it through)."""
    import graphs.serving.sim.requests as rq

    path = _write_trace(tmp_path / "grows.csv", [Request(i, float(i), 10, 2) for i in range(20)])
    assert len(load_trace(path)) == 20
    monkeypatch.setattr(rq, "MAX_TRACE_BYTES", 100)
    monkeypatch.setattr(rq, "open_user_file", lambda path, **kw: open(path, "rb"))
    with pytest.raises(CostModelError, match=r"grows.csv: larger than 100 bytes \(split it\)"):
        load_trace(path)


def test_a_trace_gives_the_requests_its_rows_write(tmp_path: Path) -> None:
    """20,000 rows (Unix-time arrivals to the microsecond, repeated ones and an equal one written
    longer, token counts from 1 to 10^7, four prefix ids, one of them quoted with a comma, the
    columns in another order with an extra one, CRLF, blank lines, a byte-order mark), as CSV and
    as JSON lines: the requests, worked out here from the rows written (arrivals the exact rational
    difference from the first, rounded once), are the trace's, field by field."""
    rng = random.Random(11)
    prefixes = {"sys": 50, "0": 0, "a b": 300, "x,y": 8}  # each id's prefix_tokens
    us = 1_733_011_200_000_000  # the first arrival, in microseconds
    rows = []
    for _ in range(20_000):
        gap = rng.choice([0, 0, 1, 17, 1000, 123_456])
        us += gap
        text = f"{us // 10**6}.{us % 10**6:06d}" + ("0" if gap == 0 and rng.random() < 0.5 else "")
        p = rng.choice([rng.randint(1, 256), rng.randint(257, 70_000), rng.randint(70_000, 10**7)])
        o = rng.choice([rng.randint(1, 256), rng.randint(257, 4096), 10**7])
        pid = rng.choice(["", "", *prefixes])
        k = prefixes.get(pid, 0)
        rows.append((text, max(p, k), o, pid, k))
    ids: dict[str, int] = {}
    first = Fraction(rows[0][0])
    want = [
        Request(
            i,
            float(Fraction(text) - first),
            p,
            o,
            ids.setdefault(pid, len(ids)) if pid else None,
            k if pid else 0,
        )
        for i, (text, p, o, pid, k) in enumerate(rows)
    ]
    repeated = sum(a.arrival_s == b.arrival_s for a, b in pairwise(want))
    assert len(ids) == 4 and repeated > 5000 and want[-1].arrival_s > 100
    assert min(r.prompt for r in want) <= 256 < 70_000 <= max(r.prompt for r in want)
    lines = ["prefix_tokens,arrival_s,note,prompt_tokens,output_tokens,prefix_id"]
    for j, (text, p, o, pid, k) in enumerate(rows):
        quoted = f'"{pid}"' if "," in pid else pid
        lines.append(f"{k if pid else ''},{text},n{j},{p},{o},{quoted}")
        if j % 5000 == 4999:
            lines.append("")
    csv_path = tmp_path / "t.csv"
    csv_path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode())
    jsonl_path = tmp_path / "t.jsonl"
    jsonl_path.write_text(
        "".join(
            f'{{"arrival_s": {text}, "prompt_tokens": {p}, "output_tokens": {o}'
            + (f', "prefix_id": "{pid}", "prefix_tokens": {k}}}\n' if pid else "}\n")
            for text, p, o, pid, k in rows
        )
    )
    for path in (csv_path, jsonl_path):
        tr = read_trace(path)
        assert tr.origin_s == float(first) and tr.prefixes == 4
        assert tr.requests == want
        assert [r.arrival_s.hex() for r in tr.requests] == [r.arrival_s.hex() for r in want]


# ---------------------------------------------------------------- 10. prefix columns
def test_trace_prefix_columns_feed_prefix_caching(tmp_path):
    """A trace equal to a synthetic workload with a shared system prompt gets the same cache hits
    and the same latencies."""
    eng = EngineConfig(enable_prefix_caching=True)
    reqs = synthetic(
        120, rate=20.0, prompt="uniform:50,300", output="uniform:5,40", seed=2, shared_prefix=1024
    )
    want = simulate(M, "h100", reqs, engine=eng)
    tr = read_trace(_write_trace(tmp_path / "p.csv", reqs, prefixes=True))
    assert tr.prefixes == 1 and {(r.prefix_id, r.prefix) for r in tr.requests} == {(0, 1024)}
    got = simulate(M, "h100", tr.requests, engine=eng)
    assert want.prefix_cache_hits > 0 and got.prefix_cache_hits == want.prefix_cache_hits
    np.testing.assert_array_equal(got.per_request["ttft_s"], want.per_request["ttft_s"])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("0,100,5,a,200", "prefix_tokens 200 is longer than the prompt"),
        ("0,100,5,a,", "prefix_id needs prefix_tokens"),
        ("0,100,5,,50", "prefix_tokens needs a prefix_id"),
        ("0,100,5,a,-1", "prefix_tokens must be in [0,"),
    ],
)
def test_trace_prefix_errors_name_the_field(tmp_path, row, message):
    path = tmp_path / "p.csv"
    path.write_text(f"arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n{row}\n")
    with pytest.raises(CostModelError, match=re.escape(f"row 1: {message}")):
        load_trace(path)


# ---------------------------------------------------------------- 11. progress bars
class _Err(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [False, True])
def test_progress_only_on_a_terminal_and_throttled(monkeypatch, tty):
    err = _Err(tty)
    monkeypatch.setattr("sys.stderr", err)
    bar = progress_bar("simulate", unit="requests")
    for i in range(1, 2001):
        bar(i, 2000)
    text = err.getvalue()
    if not tty:
        assert text == ""
    else:  # one redraw per percent (0 % to 100 %), not one per request
        assert text.count("\r") == 101 and text.endswith("2,000/2,000 requests\n")


# ---------------------------------------------------------------- fuzz: hostile traces
_FIELD = st.one_of(
    st.sampled_from(
        ["0", "1", "1e15", "1e400", "-1", "nan", "inf", "", "abc", "2.5", "1e18", "10000001", "true"]
    ),
    st.integers(-5, 10**7).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    rows=st.lists(st.lists(_FIELD, min_size=3, max_size=5), max_size=6),
    header=st.sampled_from(
        [
            "arrival_s,prompt_tokens,output_tokens",
            "arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens",
            "prompt_tokens,arrival_s",
        ]
    ),
    suffix=st.sampled_from([".csv", ".CSV", ".jsonl", ".JSONL", ".Json", ""]),
    bom=st.booleans(),
    encoding=st.sampled_from(["utf-8", "latin-1", "utf-16"]),
)
def test_hostile_traces_load_or_give_one_line_errors(tmp_path_factory, rows, header, suffix, bom, encoding):
    """Any trace text loads into valid requests or raises one CostModelError line; nothing else."""
    names = header.split(",")
    if suffix.lower() in (".jsonl", ".json"):
        lines = [
            "{" + ", ".join(f'"{k}": {v or 0}' for k, v in zip(names, r, strict=False)) + "}" for r in rows
        ]
    else:
        lines = [header, *(",".join(r) for r in rows)]
    text = ("\ufeff" if bom else "") + "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("fuzz") / f"t{suffix}"
    path.write_bytes(text.encode(encoding, errors="replace"))
    try:
        reqs = load_trace(path)
    except CostModelError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("trace ")
        return
    arr = [r.arrival_s for r in reqs]
    assert arr[0] == 0 and arr == sorted(arr) and all(math.isfinite(a) for a in arr)
    assert all(1 <= r.prompt <= 10**7 and 1 <= r.output <= 10**7 and 0 <= r.prefix <= r.prompt for r in reqs)


def test_simulate_names_a_roof_substitution_and_titles_its_figures(tmp_path, monkeypatch, capsys):
    """gb200 publishes no SFU rate: simulate says its exp/rsqrt FLOPs are priced on the vector roof
    (as decode and prefill do), and both figures are titled with the model, device and tp."""
    import costmodel.plots as plots
    from graphs.cli import main

    titles = []
    monkeypatch.setattr(
        plots, "latency_cdf_plot", lambda lat, path, *, title="", slos=None: titles.append(title)
    )
    monkeypatch.setattr(plots, "serving_timeline_plot", lambda tl, path, *, title="": titles.append(title))
    argv = ["simulate", "tiny", "--device", "gb200", "--rate", "5", "--requests", "20", "--quiet"]
    assert main([*argv, "--plot", str(tmp_path / "s.png")]) == 0
    out = capsys.readouterr().out
    assert "note: gb200 publishes no sfu roof" in out
    assert len(titles) == 2 and all("tiny on gb200" in t and "tp 1" in t for t in titles), titles


def test_trace_refuses_a_repeated_column(tmp_path):
    # csv.DictReader keeps the last of two equal header names: prompt_tokens 99, not 10
    path = tmp_path / "dup.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,prompt_tokens\n0,10,5,99\n")
    with pytest.raises(CostModelError, match="column 'prompt_tokens' appears 2 times"):
        load_trace(path)


def test_an_oversized_trace_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """simulate --trace read up to 1 GiB (a 100 MB CSV took 1.5 GB of memory); the cap is now
    64 MiB = 67,108,864 bytes, checked on the file's size: a sparse file one byte over it is
    refused without reading its 64 MiB of zeros (open is never asked for a line)."""
    import graphs.serving.sim.requests as rq

    assert rq.MAX_TRACE_BYTES == 64 * 1024 * 1024
    path = tmp_path / "big.csv"
    with open(path, "wb") as f:
        f.truncate(67_108_865)
    monkeypatch.setattr(rq, "_records", None)  # reading a row would fail with a TypeError
    with pytest.raises(
        CostModelError, match=r"big.csv' is 67,108,865 bytes \(64.0 MiB\), larger than the 67,108,864"
    ):
        load_trace(path)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        # a key twice: the last won silently (prompt 9000), as no result or fit file allows
        (
            '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 50, "prompt_tokens": 9000}',
            "row 1: key 'prompt_tokens' appears twice in one object",
        ),
        # a syntax error was reported as "not a JSON object"
        ('{"arrival_s": 0,}', "row 1: not valid JSON (Expecting property name"),
    ],
)
def test_a_jsonl_trace_row_is_one_object_of_distinct_keys(tmp_path, line, fragment):
    path = tmp_path / "t.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(CostModelError, match=re.escape(fragment)):
        read_trace(path)


def test_a_sweep_csv_leaves_a_number_it_has_none_of_empty(tmp_path, capsys):
    """A review swept a TPU v5e (no TDP in the catalog): the CSV's energy column read 'nan', where
    search's CSV leaves the cell empty and --json gives null."""
    import csv

    out = tmp_path / "s.csv"
    argv = ["sweep", "llama-3.2-1b", "--device", "tpu-v5e", "--quiet", "--ctxs", "1024", "--batches", "1,8"]
    assert main([*argv, "--csv", str(out)]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2 and all(r["energy_per_token_j"] == "" for r in rows)
    assert "nan" not in out.read_text() and all(float(r["tpot_s"]) > 0 for r in rows)


def test_an_output_that_is_an_input_is_refused_before_the_work(capsys, tmp_path):
    """A review ran `sweep m.json --csv m.json` (the model's config replaced by the CSV) and
    `simulate --trace t.csv --csv t.csv` (the trace replaced); `--csv s.png` was taken too."""
    cfg = tmp_path / "m.json"
    cfg.write_text((Path(__file__).resolve().parents[1] / "examples" / "hybrid-layers.json").read_text())
    before = cfg.read_text()
    _one_line_error(
        capsys,
        ["sweep", str(cfg), "--batches", "1", "--ctxs", "16", "--csv", str(cfg)],
        "--csv",
        "is the file the model reads",
    )
    assert cfg.read_text() == before
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n")
    _one_line_error(
        capsys,
        ["simulate", "tiny", "--trace", str(trace), "--csv", str(trace)],
        "--csv",
        "is the file --trace reads",
    )
    assert trace.read_text().startswith("arrival_s,prompt_tokens")
    _one_line_error(
        capsys,
        ["sweep", "tiny", "--batches", "1", "--ctxs", "16", "--csv", str(tmp_path / "s.png")],
        "--csv",
        "must end in one of .csv",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep", "tiny", "--ctxs", "16", "--batches", "1,1,1"], "--batches gives 1 twice"),
        (["sweep", "tiny", "--ctxs", "16,16", "--batches", "1"], "--ctxs gives 16 twice"),
        (
            ["sweep", "tiny", "--ctxs", "16", "--batches", "1", "--weight-dtypes", "bf16,bf16"],
            "--weight-dtypes gives bf16 twice",
        ),
        (
            ["sweep", "tiny", "--ctxs", "16", "--batches", "1", "--weight-dtypes", ","],
            "the model's own (an empty entry) twice",
        ),
        (
            ["sweep", "tiny", "--ctxs", "16", "--batches", "1", "--device", "h100,h100-sxm"],
            "--device gives h100-sxm twice",
        ),
        (["search", "tiny", "--ctxs", "16", "--batches", "1", "--tp", "1,1,2"], "--tp gives 1 twice"),
        (["simulate", "tiny", "--rates", "5,5", "--requests", "10"], "--rates gives 5 twice"),
        (["serve", "plans", "mixtral-8x7b", "--plans", "8x1x1x1,8x1x1x1"], "--plans gives '8x1x1x1' twice"),
        (["hw", "compare", "h100", "h100-sxm"], "devices gives h100-sxm twice (as h100 and h100-sxm)"),
    ],
)
def test_a_value_given_twice_is_refused(capsys, argv, message):
    """A review's repeated list entries ran and printed the same point, rate or plan twice (both
    on the frontier); search alone said "searched once, given twice" of its devices."""
    _one_line_error(capsys, argv, message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # a draft of another tokenizer: as simulate --spec-draft refuses it
        (
            ["serve", "specdec", "llama-3.1-8b", "qwen3-8b", "--alpha", "0.8"],
            "its vocabulary (151936) is not the target's (128256)",
        ),
        # the value as given, not rounded to the bound it exceeds
        (["serve", "specdec", "llama-3.1-70b", "llama-3.1-8b", "--alpha", "1.0000001"], "got 1.0000001"),
        # SGLang's reserve (512 + 1.5 x 2,048 + 16 + 128 = 3,728 MiB) beyond a 219 MiB device
        (["engines", "sglang", "--device", "groq-lpu"], "its start-up reserve (3,728 MiB"),
        # names a written hardware file could not be loaded under, refused before the work
        (
            ["calibrate", "gpu", "--device", "h100", "--out", "c.json", "--name", "H100"],
            "is the catalog device 'h100-sxm'",
        ),
        (
            ["calibrate", "gpu", "--device", "h100", "--out", "c.json", "--name", "a b"],
            "a device name is 1 to 64 letters",
        ),
        (
            ["calibrate", "gpu", "--device", "h100", "--out", "c.json", "--name", ""],
            "a device name is 1 to 64 letters",
        ),
        (["probe", "--small", "--out", "p.json", "--name", "x\x1b[31m"], "a device name is 1 to 64 letters"),
    ],
)
def test_review_inputs_are_refused_with_their_reason(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    _one_line_error(capsys, argv, message)
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("slo", [[], ["--slo-ttft", "1"]])
def test_a_rate_sweeps_legend_explains_only_its_columns(capsys, slo):
    """A review: `simulate --rates` without SLOs prints no goodput column, but its legend
    explained one. The legend names goodput exactly when the table has the column."""
    assert main(["simulate", "tiny", "--rates", "5,10", "--requests", "10", *slo]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "req/s" in line and "TTFT P50 s" in line)
    legend = next(line for line in out.splitlines() if line.startswith("  out tok/s: steady state"))
    assert ("goodput" in header) == bool(slo) == ("goodput" in legend)


def test_a_config_the_loader_refuses_is_refused_alone(capsys, tmp_path):
    """A config.json with no model_type (and no max_position_embeddings) was noted as "states
    no max_position_embeddings" before the loader refused it: the refusal comes first, alone."""
    path = tmp_path / "nomt.json"
    path.write_text('{"hidden_size": 64, "num_hidden_layers": 2}')
    _one_line_error(capsys, ["decode", str(path), "--device", "h100"], "the field model_type is missing")


def test_a_what_if_copy_beside_its_original_is_named_apart_not_called_a_repeat():
    """Hardware.scaled() keeps the original's name, so sweep([h100, h100 with 2x DRAM]) was refused
    as 'devices gives h100-sxm twice': two different specs, results keyed by one name. The refusal
    says what it is and how to name the copy; renamed, the copy sweeps beside the original at half
    the decode time (a memory-bound tiny decode: twice the bandwidth)."""
    import dataclasses

    from graphs.serving.analysis.sweeps import sweep

    h = get_device("h100")
    copy = h.scaled({"dram": 2})
    with pytest.raises(CostModelError, match="two different specs named h100-sxm") as info:
        sweep("tiny", devices=[h, copy], batches=[1], ctxs=[128])
    assert "dataclasses.replace(copy, name='h100-sxm-whatif')" in str(info.value)
    with pytest.raises(CostModelError, match="gives h100-sxm twice"):  # the same spec twice is a repeat
        sweep("tiny", devices=[h, get_device("h100-sxm")], batches=[1], ctxs=[128])
    renamed = dataclasses.replace(copy, name="h100-2xdram")
    res = sweep("tiny", devices=[h, renamed], batches=[1], ctxs=[128])
    tpot = {r["device"]: r["tpot_s"] for r in res.rows()}
    assert tpot["h100-2xdram"] == pytest.approx(tpot["h100-sxm"] / 2)
