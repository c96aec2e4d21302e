"""Where a fit enters, physics is a floor; the files a fit reads and the outputs it writes are
bounded and safe (project issue 45, items 1, 4, 5 and 6: each test is one of its reproducers).

Hand derivation used below: Llama-3.1-8B holds 8,030,261,248 parameters, its input embedding
128,256 x 4,096 = 525,336,576 of them; a decode step reads every other weight once (the
embedding is a gather of one row per token), in BF16 (2 bytes), over the H100 SXM's 3.35 TB/s
HBM3 (NVIDIA H100 datasheet): 7,504,924,672 x 2 / 3.35e12 = 4.4805 ms at batch 1, the KV of a
one-token context adding microseconds.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.planning import bench_results
from graphs.serving.planning.bench_results import BenchRun, read_results
from graphs.serving.planning.serving_fit import ServingFit, fit_serving, read_fit, write_fit
from graphs.serving.pricing.overheads import EngineOverheads, scaled_kernels_s
from graphs.serving.sim.requests import Request

M = "llama-3.1-8b"
WEIGHTS_READ_S = (8_030_261_248 - 128_256 * 4_096) * 2 / 3.35e12  # 4.4805 ms (module doc)


def _fit_file(path, kernel_scale: float) -> str:
    doc = {
        "format": "costmodel-serving-fit",
        "version": 3,
        "model": M,
        "device": "h100-sxm",
        "tp": 1,
        "predict": None,
        "fp8_scales": "dynamic",
        "overheads": {
            "iteration_s": 0,
            "per_seq_s": 0,
            "per_token_s": 0,
            "request_s": 0,
            "output_token_s": 0,
            "kernel_scale": kernel_scale,
            "cudagraph_sizes": [],
            "policy": None,
            "basis": "a hand-made fit",
        },
        "stderr": {},
        "runs": [],
        "sources": [],
        "rms_residual": 0,
    }
    path.write_text(json.dumps(doc))
    return str(path)


# -- the floor -------------------------------------------------------------------------


@pytest.mark.parametrize("phase, point", [("decode", ["--ctx", "1000"]), ("prefill", ["--seq", "512"])])
def test_a_given_kernel_scale_never_prices_a_step_below_its_roofline(tmp_path, capsys, phase, point):
    """The reproducer: kernel_scale 0.05 printed 0.241 ms per decode step, 20x faster than
    reading the weights once. The step is now the bound, and the output says so once."""
    fit = _fit_file(tmp_path / "fit.json", 0.05)
    argv = [phase, M, "--device", "h100", "--batch", "8", *point, "--predict-file", fit]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["engine_overheads"]
    assert d["floored_at_bound"] is True
    assert d["step_s"] == d["bound_s"] == d["kernels_s"]  # the bound prices the kernels, CPU 0
    assert 0.05 * d["kernels_s"] < d["bound_s"]
    if phase == "decode":  # at least the weights read once (module doc)
        assert d["step_s"] >= WEIGHTS_READ_S
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("held at the roofline bound") == 1 and text.count("physics is a floor") == 1


def test_a_kernel_scale_above_one_is_applied_as_given(tmp_path, capsys):
    fit = _fit_file(tmp_path / "fit.json", 1.25)
    assert (
        main(
            [
                "decode",
                M,
                "--device",
                "h100",
                "--batch",
                "8",
                "--ctx",
                "1000",
                "--predict-file",
                fit,
                "--json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)["engine_overheads"]
    assert d["floored_at_bound"] is False and d["step_s"] == pytest.approx(1.25 * d["bound_s"])


@given(
    scale=st.floats(0.05, 20),
    bound=st.floats(1e-7, 10),
    above=st.floats(1, 100),
)
def test_scaled_kernels_never_fall_below_the_bound(scale, bound, above):
    """max(s t, t_bound): never below the bound, and exactly s t where that is above it."""
    t = bound * above  # a predictor's kernels are never below their bound
    got, floored = scaled_kernels_s(scale, t, bound)
    assert got >= bound
    assert floored == (scale * t < bound)
    if not floored:
        assert got == scale * t


def test_the_simulator_floors_every_iteration_at_its_roofline():
    """On the bound, kernel_scale 0.05 can only be floored to the bound itself: every latency is
    the unscaled simulation's, and the result says the floor bound it."""
    reqs = [Request(i, 0.2 * i, 300 + 7 * i, 20) for i in range(30)]
    from graphs.serving.sim.simulator import simulate

    low = simulate(M, "h100", reqs, overheads=EngineOverheads(kernel_scale=0.05, basis="given"))
    one = simulate(M, "h100", reqs, overheads=EngineOverheads(kernel_scale=1.0, basis="given"))
    for k in ("ttft_s", "tpot_s", "e2e_s"):
        np.testing.assert_allclose(low.per_request[k], one.per_request[k], rtol=1e-12)
    assert low.overheads is not None and "the roofline floor bound the scaled kernels" in low.overheads
    assert one.overheads is None  # no term at all: nothing to say


# -- calibrate serving: runs the roofline forbids, terms at a bound -------------------------


def _csv(path, rows) -> str:
    with open(path, "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n")
        for r in rows:
            f.write(",".join(repr(v) for v in r) + "\n")
    return str(path)


def test_runs_faster_than_the_roofline_are_refused_naming_run_and_bound(tmp_path, capsys):
    """The reproducer: runs of 0.6 ms per token, impossible for Llama-3.1-8B on one H100, were
    fitted (kernel_scale 0.21 +- 2.5) and written. Now refused before any fit."""
    rows = [(0.5 * i, 500, 40, 0.02, 0.02 + 0.0006 * 39) for i in range(60)]
    f = _csv(tmp_path / "fast.csv", rows)
    out = tmp_path / "fit.json"
    assert main(["calibrate", "serving", f, "--model", M, "--device", "h100", "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fast.csv: mean TPOT 0.6 ms" in err and "roofline" in err
    bound_ms = float(err.split("takes at least ")[1].split(" ms")[0])
    assert bound_ms == pytest.approx(WEIGHTS_READ_S * 1e3, rel=0.01)  # the weights read once
    assert not out.exists()


def test_an_ordinary_run_held_at_a_bound_is_written_and_read_back(tmp_path, capsys):
    """The reproducer: an ordinary single-run CSV clamped kernel_scale to 0.05 and rounding then
    took it to 0.04999999999999999, which the fit's own reader refused. On the bound the scale is
    held at 1 (the roofline), said as held at its bound, and the file reads back."""
    rng = np.random.default_rng(1)
    for ttft, tpot in [(0.02, 0.006), (0.01, 0.0049), (0.2, 0.005)]:  # the third is the reproducer
        rows, t = [], 0.0
        for _ in range(100):
            t += rng.exponential(0.5)
            p, o = int(rng.integers(100, 1000)), int(rng.integers(10, 100))
            a = ttft * (1 + 0.1 * rng.standard_normal())
            rows.append((t, p, o, a, a + tpot * (o - 1)))
    f = _csv(tmp_path / "one.csv", rows)
    out = tmp_path / "fit.json"
    assert main(["calibrate", "serving", f, "--model", M, "--device", "h100", "-o", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("kernel_scale"))
    assert "held at its bound" in line and "+-" not in line
    fit = read_fit(str(out))
    assert fit.overheads.kernel_scale == 1.0
    assert json.loads(out.read_text())["stderr"]["kernel_scale"] is None


def test_a_term_at_the_top_of_its_range_is_said_so(tmp_path, capsys):
    """Latencies in milliseconds written as seconds (a 30 s TTFT for a 500-token prompt that an
    H100 prefills in about 30 ms): the fit takes kernel_scale to the top of its range (20,
    graphs.serving.pricing.overheads.TERM_RANGES) and says so, with the likely cause, where it
    once named the roofline's bound of 1 (a review found it)."""
    f = _csv(tmp_path / "slow.csv", [(0.0, 500, 100, 30.0, 650.0), (0.5, 800, 120, 40.0, 800.0)])
    out = tmp_path / "fit.json"
    args = ["calibrate", "serving", f, "--model", M, "--device", "h100", "--terms", "kernel_scale"]
    assert main([*args, "-o", str(out), "--quiet"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("kernel_scale"))
    assert "held at the top of its range, 20" in line and "time units" in line and "roofline" not in line
    assert read_fit(str(out)).overheads.kernel_scale == 20.0


def _linear_runs():
    """Two synthetic runs and a simulator linear in the terms: TTFT = s a + r, TPOT = s b."""
    runs = []
    for k in range(2):
        n = 40
        prompt = np.arange(100, 100 + 10 * n, 10)
        out = np.full(n, 11)
        a, b = 1e-5 * prompt, np.full(n, 4e-3 + k * 1e-3)
        ttft = 0.01 * a + 0.003  # planted: s = 0.01, below every accepted scale
        e2e = ttft + 0.01 * b * (out - 1)
        runs.append(BenchRun(f"r{k}", 1.0, np.arange(n) * 1.0, prompt, out, ttft, e2e))

    class Res:
        def __init__(self, run, ov):
            a, b = 1e-5 * run.prompt, np.full(len(run.prompt), 4e-3 + int(run.source[1]) * 1e-3)
            ttft = ov.kernel_scale * a + ov.request_s
            self.per_request = {
                "ttft_s": ttft,
                "tpot_s": ov.kernel_scale * b,
                "e2e_s": ttft + ov.kernel_scale * b * (run.output - 1),
            }

    sims = [lambda reqs, ov, c, run=run: Res(run, ov) for run in runs]
    return runs, sims


def test_a_term_clamped_at_its_bound_is_stored_exactly_and_reads_back(tmp_path):
    """A predictor's fit (lower bound 0.05) whose data want 0.01: the scale is held at exactly
    0.05 (never 0.0499...), reported held at its bound with no standard error, and the written
    file is read back by the same code to the same value."""
    runs, sims = _linear_runs()
    fit = fit_serving(
        runs,
        sims,
        base=EngineOverheads(kernel_scale=1.0),
        terms=("kernel_scale", "request_s"),
        predict="vllm",
        bins=2,
    )
    assert fit.overheads.kernel_scale == 0.05
    assert "kernel_scale" in fit.at_bound and fit.stderr["kernel_scale"] is None
    path = tmp_path / "fit.json"
    write_fit(fit, str(path))
    back: ServingFit = read_fit(str(path))
    assert back.overheads == fit.overheads
    # on the bound (predict None) the same data hold the scale at 1, the roofline itself; the
    # TPOTs at s = 1 are then 100x the measured ones whatever the request path, and the TTFT groups'
    # relative residuals (a_g + r - y_g) / y_g are least at r = -sum((a_g - y_g) / y_g^2) / sum(1 / y_g^2)
    # over the two prompt groups (by hand below): 0.086 ms, which Gauss-Newton alone left at 0 (its
    # step, under a twentieth of the 2 ms scale, was not taken)
    on_bound = fit_serving(runs, sims, base=EngineOverheads(), terms=("kernel_scale", "request_s"), bins=2)
    a = 1e-5 * runs[0].prompt
    ga, gy = [a[:20].mean(), a[20:].mean()], [0.01 * a[:20].mean() + 0.003, 0.01 * a[20:].mean() + 0.003]
    r = -sum((x - y) / y**2 for x, y in zip(ga, gy, strict=True)) / sum(1 / y**2 for y in gy)
    assert on_bound.overheads.kernel_scale == 1.0 and on_bound.overheads.request_s == pytest.approx(
        r, rel=1e-6
    )
    assert on_bound.at_bound == ("kernel_scale",)


# -- result files: one-line errors, bounded reads and work -----------------------------------


def _req(i):
    return {
        "prompt_tokens": 100,
        "output_tokens": 10,
        "start_time": 0.5 * i,
        "first_token_time": 0.5 * i + 0.05,
        "end_time": 0.5 * i + 0.2,
    }


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"benchmarks": [{"requests": [1, 2]}]}, r"benchmarks\[0\]\.requests must be an object"),
        ({"benchmarks": [{"requests": "abc"}]}, r"benchmarks\[0\]\.requests must be an object.*got str"),
        ({"benchmarks": [3]}, r"benchmarks\[0\] must be an object"),
        (
            {
                "benchmarks": [
                    {
                        "args": {"strategy": {"rate": 1e300}},
                        "requests": {"successful": [_req(i) for i in range(5)]},
                    }
                ]
            },
            r"benchmarks\[0\]\.args\.strategy\.rate \(requests/s\) must be a number in \[1e-06, 1e\+09\]",
        ),
        (
            {"benchmarks": [{"args": {"strategy": {"rate": "fast"}}, "requests": {"successful": [_req(0)]}}]},
            r"strategy\.rate",
        ),
        (
            {
                "request_rate": "inf",
                "input_lens": [10, 10],
                "output_lens": [5, 5],
                "ttfts": [1e-300, 0.1],
                "itls": [[0.01], [0.01]],
            },
            r"ttfts\[0\] \(s\) must be a number in \[1e-06",
        ),
    ],
)
def test_hostile_result_files_get_one_line_errors(tmp_path, capsys, doc, message):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(CostModelError, match=message):
        read_results(str(f))
    rc = main(
        ["calibrate", "serving", str(f), "--model", M, "--device", "h100", "-o", str(tmp_path / "o.json")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "internal error" not in err


def test_a_number_too_long_to_read_is_named_in_the_users_words(tmp_path, capsys):
    """A 5,000-digit integer in a result or fit file was refused with Python's own advice, "use
    sys.set_int_max_str_digits() to increase the limit", which no command line takes; it says the
    number's length (the file's own 5,000 digits)."""
    from graphs.serving.planning.serving_fit import read_fit

    f = tmp_path / "r.json"
    f.write_text('{"ttfts": [' + "9" * 5000 + "]}")
    fit = tmp_path / "fit.json"
    fit.write_text('{"format": "costmodel-serving-fit", "tp": ' + "9" * 5000 + "}")
    said = "is not valid JSON: a number of 5,000 digits (no count, length or time has so many)"
    for read, path in ((read_results, f), (read_fit, fit)):
        with pytest.raises(CostModelError) as err:
            read(str(path))
        assert said in str(err.value) and "sys." not in str(err.value)
    assert (
        main(
            ["calibrate", "serving", str(f), "--model", M, "--device", "h100", "-o", str(tmp_path / "o.json")]
        )
        == 2
    )
    assert capsys.readouterr().err.strip() == f"costmodel: error: result file {str(f)!r} {said}"


def test_a_csv_of_tiny_times_is_refused_before_any_overflow(tmp_path, capsys):
    """The reproducer: times of 1e-300 s printed NumPy overflow warnings, then an internal error."""
    rows = [(i * 1e-300, 100, 10, 1e-300, 2e-300) for i in range(31)]
    f = _csv(tmp_path / "tiny.csv", rows)
    rc = main(["calibrate", "serving", f, "--model", M, "--device", "h100", "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "line 2: ttft_s (s) must be a number in [1e-06" in err
    assert "Warning" not in err


def test_a_json_of_many_objects_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    """The reproducer: 180 MB of ``{"ttfts":[{},{},...]}`` built 60 M objects (4.67 GB) before
    the missing-key error. The objects are counted first; here against a lowered cap."""
    monkeypatch.setattr(bench_results, "MAX_JSON_OBJECTS", 1000)
    f = tmp_path / "r.json"
    f.write_text('{"ttfts":[' + ",".join(["{}"] * 5000) + "]}")

    def no_parse(*a, **k):
        raise AssertionError("parsed before the structure was counted")

    monkeypatch.setattr(bench_results.json, "loads", no_parse)
    with pytest.raises(CostModelError, match=r"more than 1,000 JSON objects \(5,001 found\)"):
        read_results(str(f))
    monkeypatch.setattr(bench_results, "MAX_JSON_OBJECTS", 10**6)
    monkeypatch.setattr(bench_results, "MAX_JSON_VALUES", 100)
    with pytest.raises(CostModelError, match=r"more than 100 JSON values"):
        read_results(str(f))


def test_the_json_object_bound_is_the_whole_files_and_says_so(tmp_path, monkeypatch):
    """The bound on a result file's JSON objects (2,000,000: about as many per-request rows) is
    counted over the whole file, since the file is parsed whole: a GuideLLM report of several
    benchmarks holds that many rows over all of them, not each. The refusal said "more than a
    serving benchmark's results need", as if of one run; it now says the count is the whole
    file's, every run together, and how to split it. By hand, against a lowered bound of 40: a
    benchmark of 30 rows is 1 (report) + 1 (benchmark) + 1 (requests) + 30 = 33 objects, read
    alone; two are 1 + 2 x 32 = 65, refused though each run is under 40."""
    monkeypatch.setattr(bench_results, "MAX_JSON_OBJECTS", 40)
    rows = [
        {
            "prompt_tokens": 100,
            "output_tokens": 10,
            "start_time": 10.0 + i,
            "first_token_time": 10.05 + i,
            "end_time": 10.2 + i,
        }
        for i in range(30)
    ]
    bench = {"requests": {"successful": rows}}
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text(json.dumps({"benchmarks": [bench]}))
    two.write_text(json.dumps({"benchmarks": [bench, bench]}))
    (run,) = read_results(str(one))
    assert len(run.prompt) == 30
    with pytest.raises(CostModelError) as info:
        read_results(str(two), max_requests=5)  # cutting each run does not lift a bound of the file
    assert (
        "holds more than 40 JSON objects (65 found), counted over the whole file, every run in it together"
        in str(info.value)
    )
    assert "one run (one GuideLLM benchmark) a file" in str(info.value)


def test_a_long_run_is_cut_to_its_first_requests_and_said(tmp_path, capsys):
    rows = [(float(300 - i), 200, 12, 0.03, 0.03 + 0.006 * 11) for i in range(300)]  # arrivals descending
    f = _csv(tmp_path / "long.csv", rows)
    (run,) = read_results(f, max_requests=50)
    assert len(run.prompt) == 50 and run.in_file == 300
    assert float(run.arrival_s.max()) == 49.0  # the first 50 by arrival: 1 .. 50 s, from 0
    (whole,) = read_results(f)
    assert whole.first(1000) is whole
    out = tmp_path / "fit.json"
    argv = ["calibrate", "serving", f, "--model", "tiny", "--device", "h100", "-o", str(out)]
    assert main([*argv, "--max-requests", "50"]) == 0
    captured = capsys.readouterr()
    assert "note: long.csv holds 300 requests: the fit replays its first 50 by arrival" in captured.out
    assert "fit step" in captured.err  # progress, on stderr (a bar on a terminal)
    with pytest.raises(CostModelError, match="max_requests must be a whole number >= 1"):
        read_results(f, max_requests=0)


def test_json_and_quiet_keep_every_note_of_the_replay(tmp_path, capsys):
    """`calibrate serving --json` left out two notes its text prints, that a run was cut to its
    first requests and that a vllm result's arrivals were redrawn; `--quiet` hid the first on
    stderr too, though it hides progress only. The input: a vllm result (no send times) of 40
    requests cut to 10 by --max-requests."""
    n = 40
    doc = {
        "request_rate": 4.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 10.0,
        "completed": n,
        "input_lens": [100 + 10 * (i % 4) for i in range(n)],
        "output_lens": [3 + i % 3 for i in range(n)],
        "ttfts": [0.02] * n,
        "itls": [[0.01] * (2 + i % 3) for i in range(n)],
        "errors": [""] * n,
    }
    f = tmp_path / "v.json"
    f.write_text(json.dumps(doc))
    argv = [
        "calibrate",
        "serving",
        str(f),
        "--model",
        "tiny",
        "--device",
        "h100",
        "-o",
        str(tmp_path / "fit.json"),
    ]
    argv += ["--max-requests", "10", "--terms", "kernel_scale", "--seed", "3"]
    cut = "v.json holds 40 requests: the fit replays its first 10 by arrival (--max-requests)"
    drawn = "1 run(s) hold no send times (vllm bench serve): arrivals redrawn at their rate, --seed 3"
    assert main([*argv, "--quiet"]) == 0
    text = capsys.readouterr()
    assert f"  note: {cut}" in text.out and f"  note: {drawn}" in text.out
    assert f"note: {cut}" in text.err and "fit step" not in text.err  # the note said, no progress
    assert main([*argv, "--quiet", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["notes"] == [cut, drawn]
    assert f"note: {cut}" in out.err


# -- outputs: written the one safe way ------------------------------------------------------


def test_calibrate_gpu_replaces_a_link_never_writes_through_it(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pandas")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim.txt").write_text("victim\n")
    os.symlink("victim.txt", tmp_path / "out.json")
    assert main(["calibrate", "gpu", "--device", "h100", "--out", "out.json"]) == 0
    capsys.readouterr()
    assert (tmp_path / "victim.txt").read_text() == "victim\n"
    assert not (tmp_path / "out.json").is_symlink()
    assert "devices" in json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize(
    "out, message",
    [
        ("/dev/full", "--out '/dev/full': cannot write it (No space left on device)"),
        ("", "--out: give a file path, got an empty one"),
        ("spec.toml", "--out 'spec.toml': the file name must end in one of .json"),
    ],
)
def test_calibrate_gpu_bad_outputs_are_one_line_errors(tmp_path, capsys, monkeypatch, out, message):
    if out == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "gpu", "--device", "h100", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"costmodel: error: {message}"]


@pytest.mark.parametrize(
    "device, message",
    [
        # docs/validation.md: "A device without measurements (--device mi300x) is never labelled
        # calibrated"; the file was written as "Calibrated from mi300x", every NVIDIA GPU's GEMM
        # fits pooled and its FP8 roof scaled by their e_c 0.765
        ("mi300x", "--device: device 'mi300x' (mi300x) has no measured data; measured: a100-sxm-80gb,"),
        ("h100,h200", "--device takes one device, got 'h100,h200'"),
    ],
)
def test_calibrate_gpu_refuses_a_device_it_has_no_measurements_of(
    tmp_path, capsys, monkeypatch, device, message
):
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "gpu", "--device", device, "--out", "spec.json"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[0].startswith(f"costmodel: error: {message}")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "spec.json").exists()


def test_calibrated_spec_refuses_a_device_without_gemm_rows():
    """The library, too: no pooled fits of other devices under this one's name."""
    pytest.importorskip("pandas")
    from costmodel.measured.corpus import MeasuredDataError
    from costmodel.measured.report import calibrated_spec

    with pytest.raises(MeasuredDataError, match="'mi300x' has no measured GEMM kernels to calibrate it"):
        calibrated_spec("mi300x", "vllm")


@pytest.mark.parametrize(
    "option, message",
    [
        ("--families=", "family '' not measured"),
        ("--devices=", "--devices '' has an empty device name"),
        ("--params=", "--params must be DEVICE or DEVICE:FRAMEWORK, got ''"),
        ("--plot-dir=", "--plot-dir '' cannot be made a folder"),
    ],
)
def test_calibrate_report_refuses_an_empty_option(capsys, option, message):
    """An empty option was read as not given: every family, every device, no plots, no
    parameters, each silently (--families "" ran the whole report)."""
    assert main(["calibrate", "report", option, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_two_outputs_to_one_path_are_refused_before_the_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "tiny", "--rate", "2", "--requests", "5", "--quiet"]
    # no suffix: a CSV and a PNG may both be named so (a CSV named x.png is refused by its suffix)
    assert main([*argv, "--csv", "x", "--plot", "x"]) == 2
    err = capsys.readouterr().err
    assert "--plot 'x' is also --csv's output: give each output its own file" in err
    assert not (tmp_path / "x").exists()
    (tmp_path / "sub").mkdir()  # another spelling of the same file
    assert main([*argv, "--csv", "sub/../y", "--plot", "y"]) == 2
    assert "is also --csv's output" in capsys.readouterr().err
    # a device takes several outputs; distinct files are fine
    assert main([*argv, "--csv", "/dev/null", "--json", "--plot", "/dev/null"]) in (0, 2)
    err = capsys.readouterr().err
    assert "is also" not in err
    assert main([*argv, "--plot", "x.xyz"]) == 2
    err = capsys.readouterr().err
    assert "--plot 'x.xyz': the file name must end in one of .png, .svg" in err
    # a bare name is a PNG: said in words, not listed as an extension 'none' (plot --out said it)
    assert err.rstrip().endswith(".webp, or have no suffix") and "none" not in err


# -- terminal output --------------------------------------------------------------------------


def test_control_characters_from_a_hardware_file_are_escaped_on_the_terminal(tmp_path, capsys):
    """The reproducer: a --hw-file description of ``esc ESC]0;PWNED BEL ESC[2J`` reached the
    terminal raw through ``hw show`` and ``hw list``. Since 2026-12-07 such a description is
    refused when the file is read (names are printable text); the refusal shows it escaped."""
    evil = "esc\u001b]0;PWNED\u0007\u001b[2J\u202e"
    f = tmp_path / "hw.toml"
    f.write_text(
        "[sources]\ns = 'a sheet'\n[devices.evil]\n"
        f"description = {json.dumps(evil)}\nvendor = 'x'\n"
        "roofs = [{ unit = 'tensor', precision = 'bf16', peak_flops_per_s = 1e15, source = 's' }]\n"
        "memory = [{ name = 'dram', bandwidth_bytes_per_s = 3e12, capacity_bytes = 8e10, source = 's' }]\n"
    )
    for cmd in (["hw", "show", "evil"], ["hw", "list"]):
        assert main(["--hw-file", str(f), *cmd]) == 2
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\x07" not in out + err and "\u202e" not in out + err
        assert "description must be text of printable characters" in err
        assert "esc\\x1b]0;PWNED\\x07\\x1b[2J\\u202e" in err


def test_an_error_names_a_missing_link_by_its_value():
    """The reproducer: ``has no link <LinkName.SCALE_UP: 'scale_up'>``."""
    from dataclasses import replace

    from costmodel.hardware import get_device
    from costmodel.hardware.spec import Hardware
    from costmodel.keys import LinkName

    bare: Hardware = replace(get_device("h100"), links=(), name="bare")
    with pytest.raises(CostModelError, match=r"device 'bare' has no link 'scale_up'; links: none$"):
        bare.link(LinkName.SCALE_UP)


def test_a_probe_spec_replaces_a_link_and_checks_its_suffix(tmp_path):
    """``probe --out`` wrote with ``Path.write_text``, through a link at the path."""
    from costmodel.measure.probe import Measurement, ProbeResult

    res = ProbeResult(
        [Measurement("bw:add", 1e-3, 0.0, bytes=3e9), Measurement("mm:numpy:fp32", 1e-3, 0.0, flops=1e9)],
        {"cpu": "test"},
    )
    (tmp_path / "victim.txt").write_text("victim\n")
    os.symlink("victim.txt", tmp_path / "probe.json")
    res.write(tmp_path / "probe.json")
    assert (tmp_path / "victim.txt").read_text() == "victim\n"
    assert "devices" in json.loads((tmp_path / "probe.json").read_text())
    with pytest.raises(CostModelError, match=r"--out '.*probe.toml': the file name must end in one of .json"):
        res.write(tmp_path / "probe.toml")


def test_too_few_measurements_say_why_for_the_runs_given(tmp_path, capsys):
    """One run of 50-120-token outputs gives two group means (its TTFT and TPOT) for three
    terms: the refusal counts the runs and asks for more or fewer terms; it once blamed
    one-token outputs, which this run has none of (a review found it)."""
    rows = [
        (0.0, 500, 50, 0.05, 0.4),
        (0.5, 800, 120, 0.07, 0.9),
        (1.0, 300, 80, 0.04, 0.6),
        (1.5, 600, 100, 0.06, 0.8),
    ]
    f = _csv(tmp_path / "four.csv", rows)
    assert (
        main(["calibrate", "serving", f, "--model", M, "--device", "h100", "-o", str(tmp_path / "f.json")])
        == 2
    )
    err = capsys.readouterr().err
    assert "2 measured group mean(s) from 1 fitted run(s), for 3 term(s): nothing to fit" in err
    assert "one-token" not in err and "--terms" in err


def test_a_fit_files_term_out_of_range_names_the_file_and_key(tmp_path):
    """A hand-edited kernel_scale of 0 said only "kernel_scale must be in [0.05, 20], got 0";
    every other fit-file error names the file and key: this one does too."""
    import json

    runs, sims = _linear_runs()
    fit = fit_serving(runs, sims, base=EngineOverheads(kernel_scale=1.0), terms=("request_s",), bins=2)
    path = tmp_path / "fit.json"
    write_fit(fit, str(path))
    doc = json.loads(path.read_text())
    doc["overheads"]["kernel_scale"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(
        CostModelError,
        match=r"fit file '.*fit\.json': overheads: kernel_scale must be in \[0\.05, 20\], got 0",
    ):
        read_fit(str(path))


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("runs", "garbage", "runs must be a list of objects"),
        ("rms_residual", "x", "rms_residual must be a finite number or null"),
        ("sources", {"a": 1}, "sources must be a list of file names"),
        ("version", 3.0, "version 3.0 not supported"),
    ],
)
def test_a_fit_files_record_keeps_its_written_types(tmp_path, key, value, fragment):
    """A hand-edited fit's runs, residual, sources and version were taken whatever their type
    (a version 3.0 read as 3); each is refused naming the key."""
    import json

    runs, sims = _linear_runs()
    fit = fit_serving(runs, sims, base=EngineOverheads(kernel_scale=1.0), terms=("request_s",), bins=2)
    path = tmp_path / "fit.json"
    write_fit(fit, str(path))
    doc = json.loads(path.read_text())
    doc[key] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(CostModelError, match=re.escape(fragment)):
        read_fit(str(path))
