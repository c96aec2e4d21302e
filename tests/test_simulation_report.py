"""``simulate`` as a library call (issue 43 item 3): a :class:`SimulationRequest` built without
argparse, run by :func:`run_simulation`, renders the very text, JSON and page the command prints
and writes (``costmodel simulate`` run through :func:`graphs.cli.main`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.cli.common import dump
from graphs.serving import MaxRateReport, SimulationReport, SimulationRequest, run_simulation
from models.catalog import get_model

TINY = get_model("tiny")


def _run_csv(tmp_path):
    """A measured run (arrival, prompt, output, TTFT, E2E per request) to replay and compare with."""
    path = tmp_path / "run.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"]
    rows += [f"{i * 0.5},{64 + i},16,{0.02 + 0.001 * i},{0.5 + 0.01 * i}" for i in range(20)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _command(capsys, argv, code=0):
    """What ``costmodel simulate ARGV --quiet`` prints on stdout (its last newline: print's);
    ``code`` the exit code it must end with."""
    capsys.readouterr()
    assert main(["simulate", "tiny", *argv, "--quiet"]) == code
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return out[:-1]


CASES = {
    "open loop": (dict(rate=5.0, requests=40), ["--rate", "5", "--requests", "40"]),
    "closed loop, staggered over its cycle": (
        dict(concurrency=4, requests=30, stagger="cycle"),
        ["--concurrency", "4", "--requests", "30", "--stagger", "cycle"],
    ),
    "replicas behind a prefix router, a host KV tier": (
        dict(
            rate=5.0,
            requests=40,
            replicas=2,
            router="prefix",
            enable_prefix_caching=True,
            shared_prefix=32,
            host_kv_bytes=1e9,
        ),
        "--rate 5 --requests 40 --replicas 2 --router prefix --enable-prefix-caching --shared-prefix 32 "
        "--host-kv-bytes 1e9".split(),
    ),
    "speculative decoding, SLOs and a price": (
        dict(rate=5.0, requests=40, spec_draft="ngram", spec_accept="0.7", slo_ttft=0.5, slo_tpot=0.05),
        "--rate 5 --requests 40 --spec-draft ngram --spec-accept 0.7 --slo-ttft 0.5 --slo-tpot 0.05".split(),
    ),
    "rate search": (
        dict(max_rate=True, slo_ttft=1.0, slo_tpot=0.05, requests=50),
        "--max-rate --slo-ttft 1 --slo-tpot 0.05 --requests 50".split(),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_report_prints_what_the_command_prints(name, capsys):
    settings, argv = CASES[name]
    report = run_simulation(SimulationRequest(**settings), TINY)
    assert isinstance(report, MaxRateReport if settings.get("max_rate") else SimulationReport)
    assert report.to_text() == _command(capsys, argv)
    assert dump(report.to_dict()) == _command(capsys, [*argv, "--json"])


def test_a_replayed_run_beside_the_bound(tmp_path, capsys):
    path = _run_csv(tmp_path)
    report = run_simulation(SimulationRequest(workload_from=path, compare=True), TINY)
    assert report.to_text() == _command(capsys, ["--workload-from", path, "--compare"])
    doc = report.to_dict()
    assert [c["name"] for c in doc["comparison"]["columns"]] == ["bound", "measured (run.csv)"]
    # the measured TTFT mean, from the file: 0.02 + 0.001 * mean(0..19) = 0.0295 s
    assert doc["comparison"]["columns"][1]["values"]["TTFT mean s"] == pytest.approx(0.0295)
    # the report's numbers are its run's: 20 requests replayed, one device
    assert report.result.requests == 20 and report.topology.devices == 1
    assert report.to_text().startswith(f"tiny on h100-sxm: 20 requests over {report.result.duration_s:.1f} s")


def test_the_page_is_the_one_html_writes(tmp_path, capsys):
    pytest.importorskip("plotly")
    for settings, argv in (CASES["open loop"], CASES["rate search"]):
        page = tmp_path / "page.html"
        assert main(["simulate", "tiny", *argv, "--quiet", "--html", str(page)]) == 0
        command = "costmodel " + " ".join(["simulate", "tiny", *argv, "--quiet"])
        report = run_simulation(SimulationRequest(**settings), TINY)
        assert report.to_html(command) == page.read_text()


def test_a_fit_of_another_framework_is_refused(tmp_path):
    """A fit file names the predictor it was fitted with; a request pricing otherwise is refused
    in one line, not run with the file's overheads on other kernels."""
    from graphs.serving.engines import EngineOverheads
    from graphs.serving.planning.serving_fit import ServingFit

    fit = ServingFit("tiny", "h100-sxm", 1, "vllm", EngineOverheads(), {})
    with pytest.raises(CostModelError, match=r"fitted with vllm: give predict='vllm'"):
        run_simulation(SimulationRequest(rate=5.0, requests=10, predict_file="fit.json"), TINY, fit=fit)


def test_json_is_plain_values():
    report = run_simulation(SimulationRequest(rate=5.0, requests=20), TINY)
    doc = json.loads(dump(report.to_dict()))
    assert doc["requests"] == 20 and doc["engine"]["engine"] == report.profile.ref


def test_a_prediction_with_its_interval_and_the_bound_beside_it(tmp_path, capsys):
    """``predict`` prices the kernels (the library's default predictor is the command's), the
    interval is on by default, and ``compare`` sets the bound and the measured run beside it."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    path = _run_csv(tmp_path)
    req = SimulationRequest(workload_from=path, compare=True, predict="vllm")
    assert req.interval  # every predicted number carries its interval unless told not to
    report = run_simulation(req, TINY)
    argv = ["--workload-from", path, "--compare", "--predict", "vllm"]
    assert report.to_text() == _command(capsys, argv)
    assert dump(report.to_dict()) == _command(capsys, [*argv, "--json"])
    names = [c.name for c in report.comparison.columns]
    assert names == ["bound", "predicted (vllm kernels)", "measured (run.csv)"]
    # physics is a floor: no predicted mean below the bound's on the same requests
    bound, predicted = report.comparison.columns[0], report.comparison.columns[1]
    assert predicted.values["TTFT mean"] >= bound.values["TTFT mean"]


def test_a_vllm_result_without_send_times_states_its_own_throughput(tmp_path):
    """A ``vllm bench serve`` result holds no send times, so the replay draws them (the seed's);
    the measured column's requests/s is the file's own, ``completed / duration`` (20 / 8.0 s =
    2.5), never one read off the draw (a review found 2.774 / 3.884 / 3.731 at seeds 0, 1, 2);
    and its successful requests of no prompt or no output tokens are said left out."""
    n = 20
    doc = {
        "request_rate": 4.0,
        "duration": 8.0,
        "completed": n,
        "input_lens": [64 + i for i in range(n - 2)] + [0, 70],
        "output_lens": [16] * (n - 1) + [0],
        "ttfts": [0.02] * n,
        "itls": [[0.01] * 15] * (n - 1) + [[]],
    }
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(doc))
    seen = set()
    for seed in (0, 1, 2):
        report = run_simulation(SimulationRequest(workload_from=str(path), compare=True, seed=seed), TINY)
        measured = next(c for c in report.comparison.columns if c.name == report.comparison.measured)
        seen.add(measured.values["requests/s"])
        assert "2 successful request(s) of no prompt or no output tokens left out" in report.settings
    assert seen == {18 / 8.0}  # the 18 replayed requests over the stated 8.0 s


def test_an_interval_always_holds_its_point():
    """A finite run's percentile (TTFT P90) need not move with every kernel's speed, so the
    runs at both kernel ends may both sit on one side of the point: the interval printed beside
    it is the range of the two ends and the point (a review found ``TTFT P90 s 0.0808 [0.0692,
    0.0767]``)."""
    from types import SimpleNamespace as NS

    from graphs.serving.sim.intervals import METRICS, SimInterval

    def run(p90: float):
        s = NS(mean=1.0, p90=p90)
        return NS(ttft=s, tpot=s, e2e=s, output_tokens_per_s=1.0, requests_per_s=1.0)

    iv = SimInterval(point=run(0.0808), low=run(0.0692), high=run(0.0767), quantiles=(0.1, 0.9))
    assert iv.ranges["TTFT P90 s"] == (0.0692, 0.0808)
    assert all(lo <= iv.value(label) <= hi for label, _ in METRICS for lo, hi in [iv.ranges[label]])


def test_a_replayed_run_beyond_the_context_names_the_run_not_flags(tmp_path):
    """A replayed request past the model's limit is refused naming the file's requests, not
    ``--prompt + --output`` (neither given; a review found the wrong names)."""
    doc = {
        "request_rate": 4.0,
        "duration": 3.0,
        "completed": 2,
        "input_lens": [200_000, 150],
        "output_lens": [195, 12],
        "ttfts": [0.03, 0.03],
        "itls": [[0.006] * 194, [0.006] * 11],
    }
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(CostModelError) as exc:
        run_simulation(SimulationRequest(workload_from=str(path)), get_model("llama-2-7b"))
    assert "long.json's prompt + output 200,195 exceeds the model's context limit" in str(exc.value)
    assert "--prompt" not in str(exc.value)


def test_a_max_rate_no_rate_meets_says_what_one_request_alone_takes(capsys):
    """An SLO below what a request alone takes (a 1 us TTFT) once probed rates down to
    micro-requests per second, printed as 0.000 req/s, and ended "no probed rate meets the
    SLOs" (a review found it). The search now says what the same requests take one at a time
    (one client), the floor no rate beats, and that the TTFT SLO is below it; each probe's rate
    prints with its significant digits."""
    args = ["--max-rate", "--slo-ttft", "1e-6", "--slo-tpot", "0.05", "--requests", "50"]
    out = _command(capsys, args, code=1)  # nothing meets the SLOs: exit 1 (options.EXIT_CODES)
    report = run_simulation(SimulationRequest(max_rate=True, slo_ttft=1e-6, slo_tpot=0.05, requests=50), TINY)
    t, p = report.search.alone
    assert t > 1e-6 and p < 0.05
    assert "no probed rate meets the SLOs" in out and "each request alone (one client): P99 TTFT" in out
    assert "an SLO below what one request alone takes, which no rate meets" in out
    assert " 0.000 req/s" not in out


def test_interval_ends_keep_four_significant_digits():
    """A review read 'requests/s 0.2 [0.1, 0.2]' beside '0.15 requests/s' elsewhere in the same
    output (JSON 0.1514 [0.1253, 0.1716]): rates print with four significant digits."""
    from graphs.serving.present.simulation_report import _four_digits

    assert f"{0.1514:{_four_digits(0.1514)}}" == "0.1514"
    assert f"{2071.4:{_four_digits(2071.4)}}" == "2,071"
    assert f"{51.349:{_four_digits(51.349)}}" == "51.35"


def test_the_max_rate_printed_replays_its_run():
    """The max rate printed to four digits (23.37) did not replay the run the search found at
    23.3747: another P99. The line now gives the rate in full, and ``--rate`` of it (the same
    seed: the search scales one draw's gaps) gives the probe's own P99s, exactly."""
    import re

    req = SimulationRequest(max_rate=True, slo_ttft=0.3, slo_tpot=0.02, requests=300, device="h100")
    report = run_simulation(req, get_model("llama-3.1-8b"))
    m = report.search
    assert m.rate is not None
    printed = re.search(
        r"\(--rate (\S+) with the workload above replays the run at it\)", report.to_text()
    ).group(1)
    assert float(printed) == m.rate
    _, ok, ttft, tpot = next(p for p in m.probes if p[0] == m.rate)
    one = run_simulation(
        SimulationRequest(rate=float(printed), requests=300, device="h100"), get_model("llama-3.1-8b")
    )
    run = one.result.per_request
    assert (
        ok
        and float(np.percentile(run["ttft_s"], 99)) == ttft
        and float(np.percentile(run["tpot_s"], 99)) == tpot
    )


def test_a_bound_run_says_its_latencies_are_a_floor(capsys):
    """Without --predict every kernel is at its roofline and the engine has no CPU time: the
    latencies are a lower bound, said once in the head (size's and the max rate's too)."""
    from graphs.serving.present.simulation_report import BOUND_LINE

    out = _command(capsys, ["--rate", "2", "--requests", "10"])
    assert out.count(BOUND_LINE) == 1
    ceiling = _command(capsys, ["--max-rate", "--slo-ttft", "1", "--requests", "20"])
    assert f"{BOUND_LINE} (a rate found is a ceiling)" in ceiling


def test_a_bound_run_with_overhead_says_the_time_it_adds(capsys):
    """--overhead-s adds CPU time per iteration to the bound: the line says so (it said "no
    engine CPU time" under a 5 ms overhead, found by review)."""
    from graphs.serving.present.simulation_report import BOUND_LINE

    out = _command(capsys, ["--rate", "2", "--requests", "10", "--overhead-s", "0.005"])
    assert BOUND_LINE not in out
    assert (
        "kernels: the bound (every kernel at its roofline) plus the 0.005 s per iteration --overhead-s gives"
        in out
    )


def test_the_max_rate_printed_is_a_rate_simulated_that_meets_the_slos(capsys):
    """``simulate --max-rate`` printed "max rate 53.2 requests/s" for a probe at 53.19502 (the
    search's log-space midpoint): 53.2 was never simulated, and a ``--rate`` of the number
    printed is a run of its own, whose P99 may miss the SLO the probe met. Every probe now runs
    at a short rate (four significant digits), so the number printed is the very rate the probe
    that met ran at: the JSON's ``max_rate_requests_per_s`` exactly, labelled "meets the SLOs"
    in the probe list, and a separate ``simulate --rate`` of the printed text meets both P99
    SLOs (its P99s computed here from its per-request CSV)."""
    import csv
    import re
    import tempfile

    slo_ttft, slo_tpot = 0.5, 0.02
    argv = [
        "simulate",
        "llama-3.1-8b",
        "--requests",
        "100",
        "--slo-ttft",
        str(slo_ttft),
        "--slo-tpot",
        str(slo_tpot),
    ]
    assert main([*argv, "--max-rate", "--quiet"]) == 0
    text = capsys.readouterr().out
    printed = re.search(r"max rate (\S+) requests/s", text).group(1)
    assert main([*argv, "--max-rate", "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert float(printed) == doc["max_rate_requests_per_s"]  # was 53.2 printed for 53.19502...
    probe = next(p for p in doc["probes"] if p["rate_requests_per_s"] == float(printed))
    assert probe["meets_slos"] is True
    assert re.search(rf"rate +{re.escape(printed)} req/s .* meets the SLOs", text)
    # the lowest rate that missed is above it, and said so
    missed = min(p["rate_requests_per_s"] for p in doc["probes"] if not p["meets_slos"])
    assert missed > float(printed) and f"the lowest that missed above it: {missed:.4g} requests/s" in text
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/at.csv"
        assert main([*argv, "--rate", printed, "--quiet", "--csv", path]) == 0
        capsys.readouterr()
        rows = list(csv.DictReader(open(path)))
    ttft = np.array([float(r["ttft_s"]) for r in rows])
    tpot = np.array([float(r["tpot_s"]) for r in rows if r["tpot_s"]])
    assert len(rows) == 100
    assert float(np.percentile(ttft, 99)) <= slo_ttft and float(np.percentile(tpot, 99)) <= slo_tpot
    assert float(np.percentile(tpot, 99)) == probe["tpot_at_percentile_s"]  # the probe's own run
