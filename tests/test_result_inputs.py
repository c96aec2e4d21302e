"""Result files that contradict themselves or the format are refused with one line naming the
field, the value and what is allowed (a review of ``calibrate serving`` and ``simulate
--workload-from`` inputs: each test one of its reproducers, pinned to the input itself or to a
hand computation given with it)."""

from __future__ import annotations

import json

import pytest

from costmodel.errors import CostModelError
from graphs.serving.planning.bench_results import read_results


def _vllm(n: int = 4, rate: object = 4.0, **extra: object) -> dict:
    """A ``vllm bench serve --save-detailed`` result of ``n`` requests: 100-token prompts, 3-token
    outputs, TTFT 20 ms and two 10 ms gaps (E2E 40 ms each)."""
    doc: dict = {
        "request_rate": rate,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 2.0,
        "completed": n,
        "input_lens": [100] * n,
        "output_lens": [3] * n,
        "ttfts": [0.02] * n,
        "itls": [[0.01, 0.01] for _ in range(n)],
        "errors": [""] * n,
    }
    doc.update(extra)
    return doc


def _write(tmp_path, doc: object, name: str = "r.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_a_vllm_result_of_no_requests_at_a_finite_rate_says_so(tmp_path):
    # H1: no request to draw arrivals for: said as at rate inf, never an IndexError
    doc = _vllm(0)
    for rate in (4.0, "inf"):
        with pytest.raises(CostModelError, match=r"r\.json: no successful request"):
            read_results(_write(tmp_path, {**doc, "request_rate": rate}))


def _guidellm_summary(n: int, rate: float = 1.0) -> dict:
    """A GuideLLM benchmark without per-request rows: ``n`` requests at a constant ``rate`` over
    ``(n - 1) / rate`` s, TTFT 31 ms, ITL 8 ms, 1,100-token prompts and 60-token outputs."""
    return {
        "args": {"strategy": {"type_": "constant", "rate": rate}},
        "start_time": 1_700_000_000.0,
        "end_time": 1_700_000_000.0 + (n - 1) / rate + 0.5,
        "requests": {"successful": []},
        "total_count": {"successful": n},
        "metrics": {
            "time_to_first_token_ms": {"successful": {"mean": 31.0, "median": 30.0}},
            "inter_token_latency_ms": {"successful": {"mean": 8.0}},
            "prompt_token_count": {"successful": {"mean": 1100.0}},
            "output_token_count": {"successful": {"mean": 60.0}},
            "request_latency": {"successful": {"mean": 0.5}},
        },
    }


def test_summaries_state_at_most_as_many_requests_as_a_per_request_file_holds(tmp_path):
    # H3: a few bytes stating 10,000,000 requests per benchmark were replayed as arrays of that
    # many requests for every benchmark (GBs); the summaries of a file state at most 2,000,000
    # together (bench_results.MAX_SUMMARY_REQUESTS = MAX_JSON_OBJECTS)
    one = _write(tmp_path, {"benchmarks": [_guidellm_summary(10_000_000)]}, "big.json")
    with pytest.raises(
        CostModelError,
        match=r"benchmarks\[0\]: total_count\.successful states 10,000,000 requests: .* at most 2,000,000",
    ):
        read_results(one, max_requests=5000)
    # 1,500,000 twice: each under the bound, together over it, the second named with the first's
    two = _write(tmp_path, {"benchmarks": [_guidellm_summary(1_500_000)] * 2}, "two.json")
    with pytest.raises(
        CostModelError, match=r"benchmarks\[1\]: .* 1,500,000 requests: .*earlier benchmarks state 1,500,000"
    ):
        read_results(two, max_requests=5000)
    vllm = {
        "request_rate": 4.0,
        "completed": 2_000_001,
        "total_input_tokens": 2_000_001 * 100,
        "total_output_tokens": 2_000_001 * 10,
        "mean_ttft_ms": 30.0,
    }
    with pytest.raises(CostModelError, match=r"completed states 2,000,001 requests"):
        read_results(_write(tmp_path, vllm, "vs.json"))
    # at the bound: read, each run cut to its first requests as it is built
    runs = read_results(_write(tmp_path, {"benchmarks": [_guidellm_summary(1_000_000)] * 2}), max_requests=50)
    assert [len(r.prompt) for r in runs] == [50, 50] and [r.in_file for r in runs] == [1_000_000] * 2


def _at_most(message: str) -> float:
    return float(message.split("at most ")[1].split(" s")[0])


def test_a_duration_its_requests_contradict_is_refused_with_the_bound(tmp_path):
    # H4: each request of _vllm's takes 0.02 + 2 x 0.01 = 0.04 s, so its run lasts at least that
    with pytest.raises(
        CostModelError, match=r"duration 0\.01 s is shorter than request 0's end-to-end latency.*\(0\.04 s\)"
    ):
        read_results(_write(tmp_path, _vllm(duration=0.01)))
    # at most 10 x (last Poisson arrival + longest request): 4 arrivals at 4 req/s are 3 gaps,
    # gamma of shape 3 and mean 0.75 s, past c x 0.75 s with odds (c e^(1 - c))^3 < 1e-9 for
    # c >= 10.233 (3 (c - 1 - ln c) = ln 1e9 = 20.723); 10 x (10.233 x 0.75 + 0.04) = 77.15 s
    with pytest.raises(CostModelError, match=r"duration 1000 s is longer than the run can span") as err:
        read_results(_write(tmp_path, _vllm(duration=1000.0)))
    assert _at_most(str(err.value)) == pytest.approx(10 * (10.233 * 0.75 + 0.04), rel=1e-4)
    assert read_results(_write(tmp_path, _vllm(duration=77.0)))[0].duration_s == 77.0
    # a failed request's time is not recorded: the run is not bounded above
    failed = _vllm(duration=1000.0, errors=["", "", "", "timeout"])
    assert len(read_results(_write(tmp_path, failed))[0].prompt) == 3
    # all sent at once to 2 clients: two waves, 0.08 s of serving at least (4 x 0.04 s / 2)
    with pytest.raises(CostModelError, match=r"latencies summed / its 2 clients \(0\.08 s\)"):
        read_results(_write(tmp_path, _vllm(rate="inf", duration=0.05, max_concurrency=2)))


def test_a_summary_duration_its_means_contradict_is_refused(tmp_path):
    # H4: vs_good's summary, 60 requests at 4 req/s of mean E2E 0.52 s
    doc = _vllm_summary()
    assert read_results(_write(tmp_path, doc))[0].summary.throughput_rps == 4.0  # 60 / 15 s
    with pytest.raises(
        CostModelError, match=r"duration 0\.001 s is shorter than its mean_e2el_ms \(0\.52 s\)"
    ):
        read_results(_write(tmp_path, {**doc, "duration": 0.001}))
    # 59 Poisson gaps at 4 req/s (c = 2.0869) and 60 x 0.52 s one after another:
    # 10 x (2.0869 x 59 / 4 + 31.2) = 619.8 s
    with pytest.raises(CostModelError, match=r"duration 1e\+06 s is longer than the run can span") as err:
        read_results(_write(tmp_path, {**doc, "duration": 1e6}))
    assert _at_most(str(err.value)) == pytest.approx(10 * (2.0869 * 59 / 4 + 31.2), rel=1e-4)
    # one client sends one request at a time: 60 x 0.52 s = 31.2 s at least
    with pytest.raises(CostModelError, match=r"60 x its mean_e2el_ms / 1 clients.*\(31\.2 s\)"):
        read_results(_write(tmp_path, {**doc, "max_concurrency": 1}))


def test_a_vllm_result_without_its_request_rate_is_refused_and_a_missing_burstiness_said(tmp_path):
    # H5: vllm bench serve always writes request_rate ("inf" for all at once): none is not "inf"
    doc = _vllm()
    del doc["request_rate"]
    with pytest.raises(CostModelError, match=r"r\.json: request_rate is missing: vllm bench serve writes"):
        read_results(_write(tmp_path, doc))
    with pytest.raises(CostModelError, match=r"r\.json: request_rate is null"):
        read_results(_write(tmp_path, _vllm(rate=None)))
    # a release before --burstiness wrote none and drew Poisson arrivals: read so, and said once
    old = _vllm()
    del old["burstiness"]
    run = read_results(_write(tmp_path, old))[0]
    assert run.burstiness == 1.0 and len(run.notes) == 1 and run.notes[0].startswith("Poisson arrivals")
    assert read_results(_write(tmp_path, _vllm()))[0].notes == ()
    assert (
        read_results(_write(tmp_path, {**old, "request_rate": "inf", "duration": 0.3}))[0].notes == ()
    )  # none drawn


def _csv(
    tmp_path, rows, name: str = "r.csv", header: str = "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"
) -> str:
    path = tmp_path / name
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def _calibrate(tmp_path, capsys, *files: str, model: str = "llama-3.1-8b", extra: tuple[str, ...] = ()):
    from graphs.cli import main

    out = tmp_path / "fit.json"
    rc = main(
        [
            "calibrate",
            "serving",
            *files,
            "--model",
            model,
            "--device",
            "h100",
            "-o",
            str(out),
            "--quiet",
            *extra,
        ]
    )
    return rc, capsys.readouterr().err.strip(), out


#: Llama-3.1-8B's matmuls of a prefill of 2,000 tokens (its 8,030,261,248 parameters less the
#: input embedding and the lm_head, 128,256 x 4,096 each, which a prefill applies to one row)
#: at the H100 SXM's 989.4 BF16 TFLOPS: 2 x 6,979,588,096 x 2,000 / 989.4e12 = 28.22 ms
PREFILL_2000_S = 2 * (8_030_261_248 - 2 * 128_256 * 4_096) * 2000 / 989.4e12


def test_a_ttft_faster_than_its_prefill_roofline_is_refused_per_request(tmp_path, capsys):
    # H6: 25 ms for a 2,000-token prompt is below the matmuls alone (28.22 ms): refused, naming the
    # line, its TTFT and the bound; before, only the mean TPOT was checked and a fit was written
    rows = [(0.5 * i, 2000, 40, 0.2, 0.2 + 0.01 * 39) for i in range(60)]
    rows[5] = (2.5, 2000, 40, 0.025, 0.025 + 0.01 * 39)
    rc, err, out = _calibrate(tmp_path, capsys, _csv(tmp_path, rows))
    assert rc == 2 and not out.exists() and len(err.splitlines()) == 1
    assert (
        "r.csv: line 7: TTFT 25 ms is faster than the roofline allows: a prefill of its 2,000 prompt" in err
    )
    bound_s = float(err.split("takes at least ")[1].split(" ms")[0]) / 1e3
    assert PREFILL_2000_S <= bound_s <= 1.25 * PREFILL_2000_S  # the matmuls, and attention's few ms


def test_a_request_whose_own_tpot_beats_the_decode_roofline_is_refused(tmp_path, capsys):
    # H6: the run's mean TPOT, (59 x 10 + 1) / 60 = 9.85 ms, is above the 4.48 ms decode bound of
    # the 8B's weights read once (tests/test_fit_floor.py), but line 9's 1 ms is not
    rows = [(0.5 * i, 500, 40, 0.2, 0.2 + 0.01 * 39) for i in range(60)]
    rows[7] = (3.5, 500, 40, 0.2, 0.2 + 0.001 * 39)
    rc, err, out = _calibrate(tmp_path, capsys, _csv(tmp_path, rows))
    assert rc == 2 and not out.exists()
    assert (
        "r.csv: line 9: TPOT 1 ms ((e2e - ttft) / 39 tokens after the first) is faster than the roofline"
        in err
    )


def test_a_summary_mean_ttft_faster_than_its_mean_prompt_prefill_is_refused(tmp_path, capsys):
    # H6: 60 prompts of 2,000 tokens on average at a mean TTFT of 10 ms (< 28.22 ms)
    doc = {
        "request_rate": 4.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 15.0,
        "completed": 60,
        "total_input_tokens": 120000,
        "total_output_tokens": 3600,
        "mean_ttft_ms": 10.0,
        "median_ttft_ms": 10.0,
        "mean_tpot_ms": 8.0,
        "median_tpot_ms": 8.0,
        "mean_e2el_ms": 520.0,
    }
    rc, err, out = _calibrate(tmp_path, capsys, _write(tmp_path, doc))
    assert rc == 2 and not out.exists()
    assert (
        "r.json: mean TTFT 10 ms is faster than the roofline allows: a prefill of its mean prompt of 2,000"
        in err
    )


def test_a_result_csv_of_bytes_that_are_not_utf8_is_refused_naming_the_line(tmp_path):
    # M2: prefix ids b"p\xff" and b"p\xfe" were both read as "p\ufffd", one shared prefix
    head = b"arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,prefix_id,prefix_tokens\n"
    rows = b"0,500,20,0.1,0.3,p\xff,100\n1,500,20,0.1,0.3,p\xfe,100\n"
    path = tmp_path / "r.csv"
    path.write_bytes(head + rows)
    with pytest.raises(CostModelError, match=r"line 2 is not UTF-8 text \(byte 0xff at character 19\)"):
        read_results(str(path))
    path.write_bytes("\ufeff".encode() + head + "0,500,20,0.1,0.3,pé,100\n1,500,20,0.1,0.3,pè,100\n".encode())
    assert read_results(str(path))[0].prefixes == 2  # UTF-8 (and its byte-order mark) read as written


@pytest.mark.parametrize(
    "errors, message",
    [
        ({}, r"errors must be a list of 4 strings, one a request as input_lens .*got dict '\{\}'"),
        (0, r"errors must be a list of 4 strings.*got int '0'"),
        (["", ""], r"errors must be a list of 4 strings.*got a list of 2"),
        (["", "", {"x": 1}, ""], r"errors\[2\] must be a string .*got dict"),
        (["", 0, "", ""], r"errors\[1\] must be a string .*got int '0'"),
    ],
)
def test_a_vllm_errors_field_of_the_wrong_type_is_refused(tmp_path, errors, message):
    # M3: {} and 0 were read as "no errors", a 0 among strings as a success
    with pytest.raises(CostModelError, match=message):
        read_results(_write(tmp_path, _vllm(errors=errors)))


def test_a_vllm_result_without_errors_reads_every_request_as_successful_and_says_so(tmp_path):
    doc = _vllm()
    del doc["errors"]
    (run,) = read_results(_write(tmp_path, doc))
    assert len(run.prompt) == 4 and run.notes[0].startswith(
        "every request succeeded: the file holds no errors"
    )
    assert len(read_results(_write(tmp_path, _vllm(errors=["", "oops", "", ""])))[0].prompt) == 3


def test_a_result_file_given_twice_is_refused_naming_both(tmp_path):
    # M4: good.csv good.csv link.csv was fitted three times, two copies "held out"
    from graphs.serving.planning.serving_fit_request import ServingFitRequest

    rows = [(0.5 * i, 500, 20, 0.1, 0.3) for i in range(30)]
    a = _csv(tmp_path, rows, "a.csv")
    (tmp_path / "link.csv").symlink_to(a)
    (tmp_path / "copy.csv").write_bytes((tmp_path / "a.csv").read_bytes())
    b = _csv(tmp_path, rows[:29], "b.csv")
    for second, how in (
        (a, "are one file"),
        (str(tmp_path / "link.csv"), "are one file"),
        (str(tmp_path / "copy.csv"), "hold the same bytes"),
    ):
        with pytest.raises(CostModelError, match=rf"RESULT files '{a}' and '{second}' {how}"):
            ServingFitRequest(results=(a, b, second), device="h100").read_runs()
    assert len(ServingFitRequest(results=(a, b), device="h100").read_runs()) == 2


def _vllm_summary(**extra: object) -> dict:
    """vs_good: a vllm summary of 60 requests at 4 req/s over 15 s, 1,000-token prompts and
    60-token outputs, TTFT 35 ms, TPOT 8 ms, E2E 520 ms."""
    doc = {
        "request_rate": 4.0,
        "burstiness": 1.0,
        "max_concurrency": None,
        "duration": 15.0,
        "completed": 60,
        "total_input_tokens": 60000,
        "total_output_tokens": 3600,
        "mean_ttft_ms": 35.0,
        "median_ttft_ms": 33.0,
        "mean_tpot_ms": 8.0,
        "median_tpot_ms": 8.0,
        "mean_e2el_ms": 520.0,
    }
    doc.update(extra)
    return doc


def test_a_stated_tpot_of_one_token_outputs_is_refused(tmp_path):
    # M6: 60 outputs of 60 tokens in all: 1 a request, no token after the first, so no TPOT;
    # it ended in "the relative residuals overflow ... check units"
    with pytest.raises(
        CostModelError,
        match=r"states a TPOT, but its total_output_tokens / completed is 1 tokens",
    ):
        read_results(_write(tmp_path, _vllm_summary(total_output_tokens=60)))
    g = _guidellm_summary(40)
    g["metrics"]["output_token_count"]["successful"]["mean"] = 1.2
    with pytest.raises(
        CostModelError, match=r"#0: states a TPOT, but its metrics\.output_token_count mean is 1\.2 tokens"
    ):
        read_results(_write(tmp_path, {"benchmarks": [g]}))
    # vllm writes a TPOT of 0 when no request had two tokens: not stated, so read
    run = read_results(
        _write(tmp_path, _vllm_summary(total_output_tokens=60, mean_tpot_ms=0, median_tpot_ms=0))
    )[0]
    assert run.summary.tpot_mean_s is None and int(run.output[0]) == 1


def test_a_summary_whose_means_contradict_each_other_is_refused(tmp_path):
    # M7: a mean E2E (1 ms) below the mean TTFT (35 ms) it includes was accepted
    with pytest.raises(CostModelError, match=r"r\.json: mean E2E 1 ms is below its mean TTFT 35 ms"):
        read_results(_write(tmp_path, _vllm_summary(mean_e2el_ms=1.0)))
    # 1 prompt token for 60 requests was replayed as 60 one-token prompts
    with pytest.raises(
        CostModelError, match=r"total_input_tokens / completed is 0\.01667 tokens a request \(60 requests\)"
    ):
        read_results(_write(tmp_path, _vllm_summary(total_input_tokens=1)))
    g = _guidellm_summary(40)
    g["metrics"]["prompt_token_count"]["successful"]["mean"] = 0.2
    with pytest.raises(CostModelError, match=r"metrics\.prompt_token_count mean is 0\.2 tokens a request"):
        read_results(_write(tmp_path, {"benchmarks": [g]}))


def test_a_guidellm_summary_ending_before_it_starts_is_refused(tmp_path):
    # M8: end_time 35.85 s before start_time silently lost the run's throughput
    g = _guidellm_summary(40)
    g["start_time"], g["end_time"] = g["end_time"], g["start_time"]
    with pytest.raises(
        CostModelError,
        match=r"benchmarks\[0\]: end_time 1700000000\.0 - start_time 1700000039\.5 = -39\.5 s, but the benchmark lasts at least its mean request_latency \(0\.5 s\)",
    ):
        read_results(_write(tmp_path, {"benchmarks": [g]}))
    (run,) = read_results(_write(tmp_path, {"benchmarks": [_guidellm_summary(40)]}))
    assert run.summary.throughput_rps == pytest.approx(40 / 39.5)  # 40 requests over 39 / 1 + 0.5 s


def test_a_constant_guidellm_summary_says_its_arrivals_are_generated(tmp_path):
    # M9: a summary holds no send times, yet its replay said "the file's own arrivals"
    from graphs.serving.planning.bench_results import replay_text

    (run,) = read_results(_write(tmp_path, {"benchmarks": [_guidellm_summary(40, rate=2.0)]}))
    said = replay_text(run)
    assert "arrivals generated at 2 req/s, evenly spaced" in said and "own arrivals" not in said
    assert float(run.arrival_s[-1]) == pytest.approx(39 / 2.0)  # i / rate


def _guidellm_rows(n: int, gap: float, rate: float) -> dict:
    """A GuideLLM benchmark of ``n`` per-request rows sent ``gap`` s apart, its strategy's ``rate``."""
    req = [
        {
            "prompt_tokens": 500,
            "output_tokens": 20,
            "start_time": 1e9 + gap * i,
            "first_token_time": 1e9 + gap * i + 0.05,
            "end_time": 1e9 + gap * i + 0.3,
        }
        for i in range(n)
    ]
    return {"args": {"strategy": {"type_": "constant", "rate": rate}}, "requests": {"successful": req}}


def test_a_guidellm_rate_its_own_arrivals_contradict_is_refused(tmp_path):
    # M10: 40 arrivals 0.5 s apart span 19.5 s. Poisson at rate r spans 39 gaps of mean 1 / r, below
    # 0.28858 or above 2.4117 times 39 / r but once in 1e9 (39 (x - 1 - ln x) = ln 1e9), the upper
    # end x 10 (a slow server): 0.1 req/s puts the span at least 0.28858 x 390 = 112.5 s, and
    # 100 req/s at most 10 x 2.4117 x 0.39 = 9.406 s: both refused; 1 and 10 req/s agree
    for rate, bound in (
        (0.1, r"112\.5 to 9406 s"),
        (100.0, r"0\.1125 to 9\.406 s"),
        (1e-6, r"1\.125e\+07 to"),
    ):
        with pytest.raises(
            CostModelError,
            match=rf"#0: benchmarks\[0\]\.args\.strategy\.rate {rate:g} req/s, but its 40 arrivals span 19\.5 s.*would span {bound}",
        ):
            read_results(_write(tmp_path, {"benchmarks": [_guidellm_rows(40, 0.5, rate)]}))
    for rate in (1.0, 10.0):
        assert read_results(_write(tmp_path, {"benchmarks": [_guidellm_rows(40, 0.5, rate)]}))[0].rate == rate


def test_a_guidellm_end_before_its_first_token_names_the_bound_with_every_digit(tmp_path):
    # L1: "end_time must be a number in [1.7e+09, 1e+12], got '1700000000.585761'" looked in range
    g = _guidellm_rows(3, 0.5, 2.0)
    g["requests"]["successful"][0]["end_time"] = 1e9 + 0.04  # before its first token at 1e9 + 0.05
    with pytest.raises(
        CostModelError,
        match=r"successful\[0\]\.end_time \(not before first_token_time\) must be a number in \[1000000000\.05, 1e\+12\], got '1000000000\.04'",
    ):
        read_results(_write(tmp_path, {"benchmarks": [g]}))


@pytest.mark.parametrize("rate", ["nan", "inf", "-1", "0", "4,-inf"])
def test_a_holdout_rate_must_be_finite_and_positive(rate):
    # L9: --holdout nan said "no run at nan req/s" after reading every run
    from graphs.serving.planning.serving_fit_request import ServingFitRequest

    bad = rate.split(",")[-1]
    with pytest.raises(
        CostModelError, match=rf"--holdout: a rate must be a finite positive rate \(req/s\), got '{bad}'"
    ):
        ServingFitRequest(results=("r.csv",), device="h100", holdout=rate)


def test_a_guidellm_summary_ttft_of_zero_is_refused_not_read_as_unstated(tmp_path):
    # L8: a TTFT mean and median of 0 were read as "not stated" and the run fitted on its TPOT
    g = _guidellm_summary(40)
    g["metrics"]["time_to_first_token_ms"]["successful"] = {"mean": 0.0, "median": 0.0}
    with pytest.raises(
        CostModelError,
        match=r"metrics\.time_to_first_token_ms\.successful\.mean \(s\) must be a number in \[1e-06",
    ):
        read_results(_write(tmp_path, {"benchmarks": [g]}))
    g = _guidellm_summary(40)
    g["metrics"]["inter_token_latency_ms"]["successful"]["mean"] = 0.0  # no second token: not measured
    assert read_results(_write(tmp_path, {"benchmarks": [g]}))[0].summary.tpot_mean_s is None


def test_a_csv_number_with_an_underscore_or_a_row_longer_than_its_header_is_refused(tmp_path):
    # L7: float("1_00") is 100, and a row's extra values were dropped silently
    rows = [(0.5 * i, 500, 20, 0.1, 0.3) for i in range(3)]
    rows[1] = (0.5, "1_00", 20, 0.1, 0.3)
    with pytest.raises(CostModelError, match=r"r\.csv line 3: prompt_tokens must be a number, got '1_00'"):
        read_results(_csv(tmp_path, rows))
    head = "arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s,prefix_id,prefix_tokens"
    with pytest.raises(
        CostModelError, match=r"line 2: prefix_id needs prefix_tokens, a whole number of tokens, got '1_0'"
    ):
        read_results(_csv(tmp_path, [(0, 500, 20, 0.1, 0.3, "a", "1_0")], header=head))
    with pytest.raises(CostModelError, match=r"r\.csv line 2: 7 values for the header's 5 columns"):
        read_results(_csv(tmp_path, [(0, 500, 20, 0.1, 0.3, "a", 100)]))
    # a trailing comma on the data rows (an empty sixth value) is nothing: read as the row
    (run,) = read_results(_csv(tmp_path, [(0.5 * i, 500, 20, 0.1, 0.3, "") for i in range(3)]))
    assert list(run.prompt) == [500, 500, 500]


def test_a_csv_under_another_name_is_told_its_name(tmp_path):
    """A result file not named .csv is read as JSON: a per-request CSV named .txt was refused with
    JSON's "Expecting value" alone; now with what the reader takes. A broken JSON object gets no
    such hint."""
    path = tmp_path / "run.txt"
    path.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s\n0,10,10,0.1,0.5\n")
    with pytest.raises(
        CostModelError, match=r"is not valid JSON: .*; a per-request CSV must be named \*\.csv"
    ):
        read_results(str(path))
    path = tmp_path / "run.json"
    path.write_text('{"a": 1, "b": 2, "c": }')
    with pytest.raises(CostModelError, match=r"is not valid JSON") as err:
        read_results(str(path))
    assert "*.csv" not in str(err.value)


def test_calibrate_serving_takes_the_formats_the_runs_were_served_in(tmp_path, capsys):
    """The roofline floors' refusal points at --weight-dtype / --matmul-dtype, which calibrate
    serving did not take: a BF16 checkpoint served in FP8 is floored at its FP8 prefill. Llama-3.1-
    70B (70.55 B parameters), 4,000 prompt tokens at tp 4 on H100s: the linears alone are 2 x 4000 x
    70.55e9 / 4 FLOP a device, at least 142.6 ms at the BF16 roof of 989.4 TFLOP/s, 71.3 ms at
    FP8's 1,978.9 (the H100 SXM datasheet)."""
    import re

    from graphs.cli import main

    path = tmp_path / "runs.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"] + [
        f"{i / 2},4000,64,0.05,1.0" for i in range(40)
    ]
    path.write_text("\n".join(rows) + "\n")
    floors = []
    for extra in ([], ["--weight-dtype", "fp8"]):
        argv = [
            "calibrate",
            "serving",
            str(path),
            "--model",
            "llama-3.1-70b",
            "--device",
            "h100",
            "--tp",
            "4",
        ]
        assert main([*argv, "-o", str(tmp_path / "fit.json"), "--quiet", *extra]) == 2
        err = capsys.readouterr().err
        assert "give --weight-dtype / --matmul-dtype as served" in err
        floors.append(float(re.search(r"takes at least ([\d.]+) ms", err).group(1)))
    bf16, fp8 = floors
    assert bf16 >= 2 * 4000 * 70.55e9 / 4 / 989.4e12 * 1e3 and fp8 >= 2 * 4000 * 70.55e9 / 4 / 1978.9e12 * 1e3
    assert fp8 < bf16


def test_a_guidellm_sample_of_requests_is_replayed_from_its_summary(tmp_path):
    """GuideLLM can keep a random sample of a run's requests: 20 of 1,000 sent at a constant 10
    req/s span about the run's 99.9 s, which the rate check refused ("its 20 arrivals span ...").
    Such a file is replayed from its summary (its 1,000 requests), and says so."""
    g = _guidellm_summary(1000, rate=10.0)
    g["requests"]["successful"] = [
        {"prompt_tokens": 1100, "output_tokens": 60, "start_time": 1e9 + 5.0 * i,
         "first_token_time": 1e9 + 5.0 * i + 0.031, "end_time": 1e9 + 5.0 * i + 0.5}
        for i in range(20)
    ]  # fmt: skip
    (run,) = read_results(_write(tmp_path, {"benchmarks": [g]}))
    assert len(run.prompt) == 1000
    assert any("20 of its 1000 successful requests are in the file" in n for n in run.notes)
    del g["metrics"]
    with pytest.raises(CostModelError, match="holds 20 of the run's 1000 successful requests"):
        read_results(_write(tmp_path, {"benchmarks": [g]}, "nometrics.json"))


def test_a_vllm_ramp_up_run_is_refused_by_name(tmp_path):
    """``vllm bench serve --ramp-up-strategy linear`` writes request_rate inf and the ramp beside
    it; read as all at once, its duration was then refused as too long for the run."""
    doc = _vllm(rate="inf", ramp_up_strategy="linear", ramp_up_start_rps=1, ramp_up_end_rps=10)
    with pytest.raises(
        CostModelError,
        match=r"ramp_up_strategy 'linear': the request rate changed over the run \(from 1 to 10 req/s\)",
    ):
        read_results(_write(tmp_path, doc))
