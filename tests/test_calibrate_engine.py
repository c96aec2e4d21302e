"""`calibrate serving` sees the engine (issue 42 item 5): prefix caching and the KV pool replayed,
per-request prefix columns, summary-only results, held-out runs named, terms it cannot identify
flagged, and `simulate --workload-from` replaying a user's own run.

The measured runs are written in the documented formats (vllm/benchmarks/serve.py's result keys,
GuideLLM's report, the result CSV), their latencies made by the simulator with planted terms and
1 % multiplicative noise: the fit must find the planted terms again.
"""

import contextlib
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.engines import get_engine
from graphs.serving.engines.knobs import FIT_DEFAULT_TERMS, TERMS
from graphs.serving.planning.bench_results import read_results, vllm_arrivals
from graphs.serving.planning.serving_fit import (
    DEFAULT_TERMS,
    fit_serving,
    read_fit,
    roofline_ttft_s,
    simulate_with,
)
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.sim.engine import profile_engine
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate
from models.catalog import get_model

M = "llama-3.1-8b"
PLANTED = EngineOverheads(kernel_scale=1.25, iteration_s=5e-4, request_s=8e-3)
RATES = (3.0, 10.0, 20.0)
N = 150
PREFIX = 1000  #: tokens every prompt starts with (vllm bench serve --random-prefix-len 1000)


def _engine(caching: bool):
    """The engine `calibrate serving` replays with (the vLLM profile on an H100)."""
    return profile_engine(get_engine("vllm"), get_model(M), "h100-sxm", enable_prefix_caching=caching)


def _served(rate, rng, *, prefix=PREFIX, caching=True, fixed=False):
    """Requests as vllm bench serve sends them at ``rate`` (its Poisson draw, seed 0), every prompt
    ``prefix`` shared tokens plus its own, and what the engine with the planted terms served."""
    arr = vllm_arrivals(N, rate, 1.0, 0)
    own = np.full(N, 1500) if fixed else rng.integers(100, 3000, N)
    out = np.full(N, 40) if fixed else rng.integers(8, 64, N)
    pid = 0 if prefix else None
    reqs = [Request(i, float(arr[i]), prefix + int(own[i]), int(out[i]), pid, prefix) for i in range(N)]
    res = simulate(M, "h100", reqs, overheads=PLANTED, engine=_engine(caching))
    pr = res.per_request
    noise = lambda: 1 + 0.01 * rng.standard_normal(N)  # noqa: E731
    return arr, prefix + own, out, pr["ttft_s"] * noise(), pr["tpot_s"] * noise(), res


def _detailed(rate, rng):
    """`vllm bench serve --save-result --save-detailed`'s keys (vllm/benchmarks/serve.py)."""
    _, p, o, ttft, tpot, _ = _served(rate, rng)
    return {
        "backend": "vllm",
        "num_prompts": N,
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "completed": N,
        "input_lens": p.tolist(),
        "output_lens": o.tolist(),
        "ttfts": ttft.tolist(),
        "itls": [[float(tpot[i])] * int(o[i] - 1) for i in range(N)],  # the gaps, evenly
        "errors": [""] * N,
    }


def _fit(tmp_path, files, *extra):
    out = tmp_path / "fit.json"
    argv = ["calibrate", "serving", *files, "--model", M, "--device", "h100", "-o", str(out), "--quiet"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([*argv, *extra])
    assert rc == 0
    return read_fit(str(out)), buf.getvalue(), out


def test_prefix_caching_replayed_recovers_the_planted_terms(tmp_path, capsys):
    """The must-show: runs served with prefix caching on (every prompt a 1,000-token shared prefix,
    --random-prefix-len), fitted with caching replayed, give the planted terms back; replayed
    uncached, the same runs are refused: their first tokens come faster than an uncached prefill
    of their prompts allows (the roofline is a floor), which names the cure."""
    rng = np.random.default_rng(7)
    files = []
    for rate in RATES:
        f = tmp_path / f"vllm-{rate:g}qps.json"
        f.write_text(json.dumps(_detailed(rate, rng)))
        files.append(str(f))
    fit, text, out = _fit(tmp_path, files, "--enable-prefix-caching", "--shared-prefix", str(PREFIX))
    rms = json.loads(out.read_text())["rms_residual"]
    ov = fit.overheads
    assert ov.kernel_scale == pytest.approx(1.25, rel=0.02)
    assert ov.iteration_s == pytest.approx(5e-4, rel=0.25)
    assert ov.request_s == pytest.approx(8e-3, rel=0.1)
    assert "replayed with prefix caching on" in text and "prefix caching replayed: 3 shared prefix" in text
    assert "(and --enable-prefix-caching on simulate, as the runs were replayed)" in text
    # the held-out run is named, with why
    assert "held out: vllm-10qps.json (10 req/s, 150 requests); the default with three or more runs" in text
    held = json.loads((tmp_path / "fit.json").read_text())["runs"][1]
    assert held["fitted"] is False and abs(held["ttft_err"]) < 0.03 and abs(held["tpot_err"]) < 0.03
    argv = ["calibrate", "serving", *files, "--model", M, "--device", "h100", "-o", str(out), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is faster than the roofline allows: a prefill of its" in err and "--enable-prefix-caching" in err
    assert rms < 0.05


def test_per_request_prefix_columns_are_read_and_replayed(tmp_path):
    """A result CSV's prefix_id,prefix_tokens (as simulate --trace reads them): two prefixes,
    one request without; each replayed request carries its own."""
    c = tmp_path / "runs.csv"
    c.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,prefix_id,prefix_tokens\n"
        "0,500,10,0.05,0.1,sys-a,400\n1,600,10,0.05,0.1,sys-b,300\n2,450,10,0.05,0.1,sys-a,400\n"
        "3,100,10,0.05,0.1,,\n"
    )
    (run,) = read_results(str(c))
    reqs = run.requests
    assert [(r.prefix_id, r.prefix) for r in reqs] == [(0, 400), (1, 300), (0, 400), (None, 0)]
    assert run.prefixes == 2
    assert run.with_shared_prefix(50) is run  # a run naming its own prefixes keeps them


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,100,10,0.05,0.1,a,200\n", "prefix_tokens 200 is longer than the prompt"),
        ("0,500,10,0.05,0.1,a,200\n1,500,10,0.05,0.1,a,300\n", "prefix_id 'a' has prefix_tokens 300"),
        ("0,500,10,0.05,0.1,,200\n", "prefix_tokens needs a prefix_id"),
        ("0,500,10,0.05,0.1,a,\n", "prefix_id needs prefix_tokens"),
        ("0,500,10,0.05,0.1,a,1.5\n", "prefix_tokens must be a whole number"),
    ],
)
def test_bad_prefix_columns_get_one_line_errors(tmp_path, rows, message):
    c = tmp_path / "runs.csv"
    c.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,prefix_id,prefix_tokens\n" + rows)
    with pytest.raises(CostModelError, match=message):
        read_results(str(c))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5000), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 5000)),
        min_size=1,
        max_size=30,
    )
)
def test_prefix_columns_round_trip(tmp_path_factory, rows):
    """Any consistent prefix columns read back as written: a request's prefix never longer than its
    prompt, one length per prefix id, and requests sharing an id share it in the replay."""
    length: dict[int, int] = {}
    lines = []
    for i, (prompt, pid, k) in enumerate(rows):
        if pid is None:
            lines.append(f"{i},{prompt},5,0.05,0.1,,")
            continue
        k = length.setdefault(pid, min(k, prompt))
        if k > prompt:  # a later, shorter prompt than its prefix: the file would be refused
            lines.append(f"{i},{prompt},5,0.05,0.1,,")
            continue
        lines.append(f"{i},{prompt},5,0.05,0.1,p{pid},{k}")
    f = tmp_path_factory.mktemp("csv") / "r.csv"
    f.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,prefix_id,prefix_tokens\n" + "\n".join(lines)
    )
    (run,) = read_results(str(f))
    seen: dict[int, int] = {}
    for r, line in zip(run.requests, lines, strict=True):
        assert r.prefix <= r.prompt
        if line.endswith(",,"):
            assert r.prefix_id is None and r.prefix == 0
        else:
            assert seen.setdefault(r.prefix_id, r.prefix) == r.prefix == int(line.rsplit(",", 1)[1])


def _summary(rate, rng, **extra):
    """`vllm bench serve --save-result` without --save-detailed: the totals and the ms metrics
    it keeps (vllm/benchmarks/serve.py drops input_lens ... errors)."""
    arr, p, o, ttft, tpot, res = _served(rate, rng, prefix=0, caching=False, fixed=True)
    end = float((arr + res.per_request["e2e_s"]).max())
    return {
        "backend": "vllm",
        "num_prompts": N,
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": end,
        "completed": N,
        "total_input_tokens": int(p.sum()),
        "total_output_tokens": int(o.sum()),
        "request_throughput": N / end,
        "mean_ttft_ms": float(ttft.mean() * 1e3),
        "median_ttft_ms": float(np.median(ttft) * 1e3),
        "mean_tpot_ms": float(np.nanmean(tpot) * 1e3),
        "median_tpot_ms": float(np.nanmedian(tpot) * 1e3),
        **extra,
    }


@pytest.mark.slow  # 6-9 s: a fit with its design rounds (the README's test command stays under 5 min)
def test_a_summary_only_vllm_result_is_fitted_on_its_aggregates(tmp_path):
    """The must-show: summary-only JSONs (no per-request arrays) are accepted; the replay of their
    stated workload (1,500-token prompts, 40-token outputs at the stated rate) with the fitted terms
    matches the stated means, and the planted terms come back; the assumption is said."""
    rng = np.random.default_rng(3)
    files = []
    for rate in RATES:
        f = tmp_path / f"sum-{rate:g}.json"
        f.write_text(json.dumps(_summary(rate, rng)))
        files.append(str(f))
    (run,) = read_results(files[0])
    assert run.summary is not None and run.prompt.tolist() == [1500] * N and run.output.tolist() == [40] * N
    fit, text, _ = _fit(tmp_path, files, "--holdout", "none")
    assert (
        "assumed for sum-3.json (a summary without per-request rows): every prompt 1500 and every output 40"
        in text
    )
    assert fit.overheads.kernel_scale == pytest.approx(1.25, rel=0.03)
    assert fit.overheads.request_s == pytest.approx(8e-3, rel=0.15)
    assert all(abs(r.ttft_err) < 0.03 and abs(r.tpot_err) < 0.03 for r in fit.runs)


def test_a_summary_faster_than_the_roofline_is_refused_with_the_reason(tmp_path, capsys):
    """The must-show: a physically impossible run (a mean TPOT of 0.5 ms for an 8B model on one
    H100, whose weights alone take ~4.8 ms to read once) is refused, naming the run and the bound."""
    doc = _summary(3.0, np.random.default_rng(0), mean_tpot_ms=0.5, median_tpot_ms=0.5)
    f = tmp_path / "fast.json"
    f.write_text(json.dumps(doc))
    rc = main(
        ["calibrate", "serving", str(f), "--model", M, "--device", "h100", "-o", str(tmp_path / "o.json")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "fast.json: mean TPOT 0.5 ms is faster than the roofline allows" in err
    assert not (tmp_path / "o.json").exists()


def test_summary_readers():
    """The GuideLLM report without per-request rows (benchmark.py: metrics.*.successful, the
    token-weighted ITL, total_count, start/end time, the strategy) and vllm's summary."""
    from graphs.serving.planning.bench_results import _guidellm

    def dist(mean, median=None):
        return {"successful": {"mean": mean, "median": median if median is not None else mean}}

    bench = {
        "args": {"strategy": {"type_": "concurrent", "streams": 4}},
        "total_count": {"successful": 20, "errored": 0, "incomplete": 0},
        "start_time": 100.0,
        "end_time": 110.0,
        "metrics": {
            "prompt_token_count": dist(512.4),
            "output_token_count": dist(63.6),
            "time_to_first_token_ms": dist(40.0, 38.0),
            "inter_token_latency_ms": dist(8.0),
            "request_latency": dist(0.55),
        },
        "requests": {"successful": [], "errored": [], "incomplete": []},
    }
    (run,) = _guidellm({"benchmarks": [bench]}, "g.json")
    s = run.summary
    assert s is not None and s.token_weighted and run.concurrency == 4 and run.rate is None
    assert (s.ttft_mean_s, s.ttft_median_s, s.tpot_mean_s, s.e2e_mean_s) == pytest.approx(
        (0.04, 0.038, 0.008, 0.55)
    )
    assert s.throughput_rps == pytest.approx(2.0)  # 20 requests over 110 - 100 s
    assert run.prompt[0] == 512 and run.output[0] == 64  # round(512.4), round(63.6)
    bench["args"] = {"strategy": {"type_": "sweep"}}
    with pytest.raises(CostModelError, match=r"strategy\.type_ must be synchronous, concurrent"):
        _guidellm({"benchmarks": [bench]}, "g.json")
    # a summary of many requests sent all at once is not cut (its means are of the whole queue)
    doc = {
        "request_rate": "inf",
        "completed": 9000,
        "total_input_tokens": 9000 * 100,
        "total_output_tokens": 9000 * 10,
        "mean_ttft_ms": 500,
    }
    with pytest.raises(CostModelError, match="sent all at once"):
        from graphs.serving.planning.bench_results import _vllm_summary

        _vllm_summary(doc, "v.json", 0).first(5000)
    with pytest.raises(CostModelError, match="states no mean or median TTFT or TPOT"):
        _vllm_summary({**doc, "mean_ttft_ms": None}, "v.json", 0)
    with pytest.raises(CostModelError, match="needs completed, total_input_tokens, total_output_tokens"):
        _vllm_summary({"mean_ttft_ms": 5.0}, "v.json", 0)


@pytest.mark.slow  # 6-9 s: a fit with its design rounds (the README's test command stays under 5 min)
def test_a_guidellm_summary_is_accepted_by_calibrate(tmp_path):
    """Two GuideLLM benchmarks with no per-request rows (constant rates) fit and write a fit: the
    two terms planted (kernel scale, request path) come back from four stated means."""
    planted = EngineOverheads(kernel_scale=1.25, request_s=8e-3)
    benches = []
    for rate in (2.0, 6.0):
        arr = np.arange(60) / rate
        reqs = [Request(i, float(arr[i]), 800, 30) for i in range(60)]
        pr = simulate(M, "h100", reqs, overheads=planted, engine=_engine(False)).per_request
        o = 30
        benches.append(
            {
                "args": {"strategy": {"type_": "constant", "rate": rate}},
                "total_count": {"successful": 60},
                "metrics": {
                    "prompt_token_count": {"successful": {"mean": 800}},
                    "output_token_count": {"successful": {"mean": o}},
                    "time_to_first_token_ms": {"successful": {"mean": float(pr["ttft_s"].mean() * 1e3)}},
                    "inter_token_latency_ms": {"successful": {"mean": float(np.nanmean(pr["tpot_s"]) * 1e3)}},
                },
            }
        )
    f = tmp_path / "guidellm.json"
    f.write_text(json.dumps({"benchmarks": benches}))
    fit, text, _ = _fit(tmp_path, [str(f)], "--terms", "kernel_scale,request_s")
    with contextlib.redirect_stdout(io.StringIO()) as buf:
        argv = ["calibrate", "serving", str(f), "--model", M, "--device", "h100", "--quiet", "--json"]
        assert main([*argv, "-o", str(tmp_path / "j.json"), "--terms", "kernel_scale,request_s"]) == 0
    doc = json.loads(buf.getvalue())
    assert doc["held_out"] == [] and doc["collinear"] == []
    assert doc["assumed"]["guidellm.json#0"][0].startswith("every prompt 800 and every output 30 tokens")
    assert fit.overheads.kernel_scale == pytest.approx(1.25, rel=0.03)
    assert fit.overheads.request_s == pytest.approx(8e-3, rel=0.1)
    assert "2 run(s) fitted, 0 held out" in text and "no run held out (fewer than three runs" in text


def test_terms_at_one_batch_size_are_flagged_collinear():
    """A closed loop of 8 clients with equal requests, fitted on its decode cadence (TPOT): each
    decode step holds 8 sequences, so per_seq_s adds exactly 8x what iteration_s adds to every
    TPOT; the fit says they cannot be told apart and gives neither a standard error."""
    from graphs.serving.planning.bench_results import BenchRun

    reqs = [Request(i, 0.0, 300, 60) for i in range(48)]
    sim = simulate_with(get_model(M), "h100-sxm", engine=_engine(False))
    planted = EngineOverheads(iteration_s=1e-3, per_seq_s=5e-5)
    pr = sim(reqs, planted, 8).per_request
    run = BenchRun(
        "loop",
        None,
        np.zeros(48),
        np.full(48, 300),
        np.full(48, 60),
        pr["ttft_s"],
        pr["e2e_s"],
        concurrency=8,
    )
    fit = fit_serving(
        [run], sim, base=EngineOverheads(), terms=("iteration_s", "per_seq_s"), metrics=("tpot",)
    )
    assert fit.collinear == (("iteration_s", "per_seq_s"),)
    assert fit.stderr == {"iteration_s": None, "per_seq_s": None}


def test_at_bound_and_fp8_lines_and_the_terms_help(tmp_path, capsys):
    """A term at its bound prints its bound's value (not '0.05 +- 0.106'); an FP16 model's fit does
    not mention FP8 activation scales; --terms's help lists the code's defaults."""
    assert DEFAULT_TERMS == FIT_DEFAULT_TERMS
    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()) as buf:
        main(["calibrate", "serving", "--help"])
    help_text = " ".join(buf.getvalue().split())
    assert f"(default: {','.join(FIT_DEFAULT_TERMS)};" in help_text and ", ".join(TERMS) in help_text
    c = tmp_path / "runs.csv"
    # first tokens at the roofline's prefill of their prompts (one chunk, the weights read once),
    # so the request path is held at its bound, zero
    prompts = np.array([200 + 10 * i for i in range(40)])
    floors = roofline_ttft_s(M, "h100", prompts)
    rows = "".join(
        f"{i},{p},12,{float(t)!r},{float(t) + 0.006 * 11!r}\n"
        for i, (p, t) in enumerate(zip(prompts, floors, strict=True))
    )
    c.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n" + rows)
    _, text, _ = _fit(tmp_path, [str(c)], "--terms", "kernel_scale,iteration_s,request_s")
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("request_s"))
    assert "held at its bound 0 ms" in line and "+-" not in line
    assert "FP8" not in text


def test_simulate_replays_the_workload_of_a_result_file(tmp_path, capsys):
    """`simulate --workload-from` takes a run's lengths, (redrawn) arrivals and prefixes, and says
    what it took; the replay of the planted run with the planted terms matches it."""
    rng = np.random.default_rng(11)
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_detailed(10.0, rng)))
    fitted = tmp_path / "planted.json"
    # a fit file to price with (the run's prompts share a cached prefix: replayed so)
    _fit(tmp_path, [str(f)], "--terms", "kernel_scale", "--enable-prefix-caching", "--shared-prefix", "1000")
    doc = json.loads((tmp_path / "fit.json").read_text())
    doc["overheads"].update(kernel_scale=1.25, iteration_s=5e-4, request_s=8e-3)
    fitted.write_text(json.dumps(doc))
    argv = ["simulate", M, "--device", "h100", "--workload-from", str(f), "--quiet", "--json"]
    assert (
        main([*argv, "--predict-file", str(fitted), "--enable-prefix-caching", "--shared-prefix", "1000"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    said = out["settings"]
    assert said.startswith(f"workload from {f} (run.json): 150 requests; prompts ")
    assert "arrivals redrawn at 10 req/s (Poisson, --seed 0" in said and "1 shared prefix(es)" in said
    (run,) = read_results(str(f))
    assert out["ttft"]["mean_s"] == pytest.approx(float(run.ttft_s.mean()), rel=0.03)
    for bad, message in (
        (
            ["--rate", "3"],
            "--workload-from replays the run's own requests, arrivals and clients; drop --rate",
        ),
        (["--workload-run", "2"], "--workload-run 2: "),
    ):
        assert main([*argv, *bad]) == 2
        assert message in capsys.readouterr().err
    assert main(["simulate", M, "--rate", "1", "--workload-run", "0"]) == 2
    assert "--workload-run picks a run of --workload-from RESULT" in capsys.readouterr().err


def test_a_fit_never_prices_kernels_below_their_roofline(tmp_path, capsys):
    """A run whose first tokens come faster than the roofline's prefill allows (80 % of the bound's
    TTFT, its decode as the bound's) is refused by calibrate serving, naming a request and its
    bound; fitted without that check (fit_serving given no floor), the scale is held at 1, the
    roofline, never below."""
    rng = np.random.default_rng(5)
    arr = vllm_arrivals(N, 5.0, 1.0, 0)
    reqs = [
        Request(i, float(arr[i]), int(rng.integers(100, 2000)), int(rng.integers(8, 64))) for i in range(N)
    ]
    pr = simulate(M, "h100", reqs, overheads=EngineOverheads(kernel_scale=1.0)).per_request
    rows = "".join(
        f"{r.arrival_s},{r.prompt},{r.output},{0.8 * t},{e - 0.2 * t}\n"
        for r, t, e in zip(reqs, pr["ttft_s"], pr["e2e_s"], strict=True)
    )
    c = tmp_path / "fast.csv"
    c.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n" + rows)
    argv = ["calibrate", "serving", str(c), "--model", M, "--device", "h100", "-o", str(tmp_path / "f.json")]
    assert main([*argv, "--quiet", "--terms", "kernel_scale,request_s"]) == 2
    assert "fast.csv: line 2: TTFT" in capsys.readouterr().err
    (run,) = read_results(str(c))
    fit = fit_serving(
        [run], simulate_with(M, "h100-sxm"), base=EngineOverheads(), terms=("kernel_scale", "request_s")
    )
    assert fit.overheads.kernel_scale == 1.0 and "kernel_scale" in fit.at_bound
    assert math.isfinite(fit.rms_residual)


def test_a_shared_prefix_longer_than_a_prompt_is_refused(tmp_path, capsys):
    """``--workload-from`` a run of 200- to 229-token prompts with ``--shared-prefix 5000``: each
    request's prefix was silently cut to its whole prompt (``min(prefix, prompt)``), so every
    prompt was served from the cache and nothing said it. A prompt cannot start with a longer
    prefix: refused in one line naming the shortest prompt (200, the file's own), and a prefix
    of 200 is taken as given, every request's 200 tokens."""
    c = tmp_path / "run.csv"
    c.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n"
        + "".join(f"{0.2 * i},{200 + i},12,0.05,0.2\n" for i in range(30))
    )
    (run,) = read_results(str(c))
    with pytest.raises(CostModelError) as info:
        run.with_shared_prefix(201)
    assert str(info.value) == (
        "shared prefix (--shared-prefix) 201 tokens is longer than 1 of run.csv's 30 prompts (the shortest "
        "200 tokens): every prompt starts with the shared prefix; give at most 200"
    )
    assert [(r.prefix_id, r.prefix) for r in run.with_shared_prefix(200).requests] == [(0, 200)] * 30
    argv = [
        "simulate",
        M,
        "--device",
        "h100",
        "--workload-from",
        str(c),
        "--shared-prefix",
        "5000",
        "--quiet",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        "costmodel: error: shared prefix (--shared-prefix) 5,000 tokens is longer than 30 of run.csv's 30 "
        "prompts (the shortest 200 tokens): every prompt starts with the shared prefix; give at most 200"
    ]


def test_a_summary_cut_to_its_first_requests_is_not_fitted_on_the_whole_runs_throughput(tmp_path):
    """A summary states the whole run's throughput (``request_throughput``, completed / duration);
    cut to its first requests (``--max-requests``) the replay of a window ends in a drain the run
    did not have, so its throughput was fitted against the whole run's (a run at 12 req/s cut to
    its first 10: 8.7 replayed against 12 stated, -27 %, absorbed by the terms). Its means and
    medians are still fitted, the throughput not, and the note says so."""
    from graphs.serving.planning.serving_fit import _observed
    from graphs.serving.present.serving_fit_report import _cut_note

    f = tmp_path / "sum.json"
    doc = _summary(RATES[-1], np.random.default_rng(3))
    f.write_text(json.dumps(doc))
    (whole,) = read_results(str(f))
    (cut,) = read_results(str(f), max_requests=10)
    stated = [doc[k] / 1e3 for k in ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "median_tpot_ms")]
    assert _observed(whole).tolist() == pytest.approx([*stated, doc["request_throughput"]])
    assert _observed(cut).tolist() == pytest.approx(stated)  # the file's own means, no throughput
    assert _cut_note(cut) == (
        f"sum.json holds {N:,} requests: the fit replays its first 10 by arrival (--max-requests); its stated "
        "means are of all of them, and its stated throughput (the whole run's) is not fitted"
    )
