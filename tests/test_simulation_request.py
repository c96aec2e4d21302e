"""The ``simulate`` request (graphs/serving/sim/simulation_request.py): built and refused without
argparse, the same words as the command line, the typed pieces it builds, a thin command."""

from __future__ import annotations

import ast
import inspect
import math
from pathlib import Path
from typing import Any

import pytest

from costmodel.errors import CostModelError
from graphs.cli import build_parser, main
from graphs.cli import options as cli_options
from graphs.cli import simulate as cli_simulate
from graphs.serving.engines import get_engine
from graphs.serving.sim.data_parallel import DISPATCHES
from graphs.serving.sim.simulation_request import (
    DISPATCH_CHOICES,
    DRAWN_DEFAULTS,
    FLOAT_RANGES,
    INT_RANGES,
    ROUTER_CHOICES,
    SimulationRequest,
)
from graphs.serving.sim.simulator import ROUTERS

#: (settings, the one line refusing them): every dependency between options the command checks
REFUSALS: list[tuple[dict[str, Any], str]] = [
    (
        {"rate": 1, "prefix_eps": 0.2},
        "--prefix-eps bounds --router prefix; the router here is least_outstanding",
    ),
    (
        {"rate": 1, "router": "prefix", "enable_prefix_caching": False},
        "--router prefix sends a request where its prefix is cached: give --enable-prefix-caching",
    ),
    (
        {"workload_from": "run.json", "requests": 5, "rate": 2.0},
        "--workload-from replays the run's own requests, arrivals and clients; drop --requests/--rate",
    ),
    (
        {"rate": 1, "workload_run": 1},
        "--workload-run picks a run of --workload-from RESULT: give --workload-from",
    ),
    (
        {"trace": "t.csv", "seed": 4},
        "--trace fixes every request's prompt, output and arrival; drop --seed",
    ),
    ({"trace": "t.csv", "rate": 3.0}, "--trace fixes every request's prompt and arrival; drop --rate"),
    (
        {"max_rate": True, "concurrency": 8, "turns": 2},
        "--max-rate searches an open-loop rate of single requests; drop --concurrency/--turns",
    ),
    (
        {"rate": 1, "turns": 2, "shared_prefix": 64},
        "--turns and --shared-prefix do not combine: the engine caches one prefix per request",
    ),
    ({}, "give --rate (requests/s), --concurrency N (clients), --trace FILE or --max-rate"),
    ({"concurrency": 4, "arrival": "constant"}, "--arrival constant shapes the gaps of --rate; give --rate"),
    ({"rate": 1, "stagger": "2"}, "--stagger spreads a closed loop's first sends: give --concurrency N"),
    ({"concurrency": 4, "stagger": "-1"}, "--stagger must be seconds in [0, 1e6] or 'cycle', got '-1'"),
    ({"concurrency": 4, "stagger": "nan"}, "--stagger must be seconds in [0, 1e6] or 'cycle', got 'nan'"),
    (
        {"rate": 1, "think_time": 2.0},
        "--think-time is a client's pause between an answer and its next request",
    ),
    ({"rate": 1, "disagg": "1-2"}, "--disagg must be PREFILL:DECODE replica counts, e.g. 1:2, got '1-2'"),
    (
        {"rate": 1, "disagg": "0:2"},
        "--disagg needs PREFILL and DECODE replica counts in [1, 4096], got '0:2'",
    ),
    ({"rate": 1, "disagg": "1:2"}, "--disagg needs --link-bandwidth (bytes/s of the KV transfer link)"),
    (
        {"rate": 1, "disagg": "1:1", "link_bandwidth": 1e10, "dp": 2},
        "data-parallel attention (dp > 1) runs aggregated",
    ),
    ({"rate": 1, "spec_k": 4}, "--spec-k/--spec-accept/--spec-expected need --spec-draft"),
    ({"rate": 1, "spec_draft": "ngram"}, "--spec-draft ngram needs --spec-accept"),
    (
        {"max_rate": True, "spec_draft": "ngram", "spec_accept": "0.5"},
        "--max-rate searches plain decoding only so far; drop --spec-draft (or give --rate)",
    ),
    ({"rate": 1, "ssd_bandwidth": 1e9}, "--ssd-bandwidth needs a host-memory tier: give --host-kv-bytes"),
    (
        {"rate": 1, "host_link_bandwidth": 1e9, "ssd_kv_bytes": 1e9},
        "--host-link-bandwidth/--ssd-kv-bytes need a host-memory tier: give --host-kv-bytes",
    ),
    (
        {"rate": 1, "host_kv_bytes": 1e9, "enable_prefix_caching": False},
        "--host-kv-bytes keeps evicted prefixes: give --enable-prefix-caching",
    ),
    (
        {"rate": 1, "host_kv_bytes": 1e9, "ssd_kv_bytes": 1e9},
        "--ssd-kv-bytes needs --ssd-bandwidth (bytes/s of the drive)",
    ),
    ({"rate": 1, "interval": True}, "--interval needs --predict FRAMEWORK (the bound has no interval)"),
    ({"max_rate": True, "compare": True}, "--compare compares one run: drop --max-rate (or --compare)"),
    ({"rate": 1, "compare": True}, "--compare sets the bound beside a prediction or a measured run"),
    ({"max_rate": True, "trace": "t.csv"}, "--max-rate draws its own requests; it does not take --trace"),
    ({"max_rate": True, "csv": "o.csv"}, "--max-rate writes no per-request files; drop --csv/--plot"),
    # ranges and choices, for a caller that never met the parser
    ({"rate": 0.0}, "rate (--rate) must be in [1e-06, 1e+09], got 0"),
    ({"rate": math.inf}, "rate (--rate) must be a finite number, got inf"),
    ({"rate": 1, "tp": 0}, "tp (--tp) must be in [1, 4096], got 0"),
    ({"rate": 1, "tp": "2"}, "tp (--tp) must be a whole number, got '2'"),
    ({"rate": 1, "percentile": 0.0}, "percentile (--percentile) must be in (0, 100], got 0"),
    # only the rate search reads the percentile: a run prints P50 and P99 (found ignored, 2026-12-07)
    ({"rate": 1, "percentile": 90.0}, "--percentile 90 is the percentile --max-rate holds the SLOs at"),
    ({"rates": "1,2", "percentile": 95.0}, "without --max-rate nothing reads it"),
    (
        {"rate": 1, "router": "random"},
        "router (--router) must be one of round_robin, least_outstanding, prefix, got 'random'",
    ),
    ({"rate": 1, "predict": "tgi"}, "predict (--predict) must be one of vllm, sglang, trtllm, got 'tgi'"),
    (
        {"rate": 1, "scheduler_policy": "fifo"},
        "scheduler_policy (--scheduler-policy) must be one of recompute, guaranteed_no_evict",
    ),
]


@pytest.mark.parametrize(("settings", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_each_refusal_without_argparse(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(CostModelError) as exc:
        SimulationRequest(**settings)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def _argv(settings: dict[str, Any]) -> list[str]:
    """The command line of ``settings`` (each field is the option of its name)."""
    argv = ["simulate", "tiny", "--quiet"]
    for name, value in settings.items():
        f = "--" + name.replace("_", "-")
        if value is True:
            argv.append(f)
        elif value is False:
            argv.append("--no-" + f[2:])
        else:
            argv += [f, str(value)]
    return argv


#: refusals the parser also makes (its ranges, choices), or whose files the command reads first
_PARSER_FIRST = ("must be in", "must be a", "must be one of", "--workload-from", "--trace")


@pytest.mark.parametrize(
    ("settings", "message"),
    [r for r in REFUSALS if not any(t in r[1] for t in _PARSER_FIRST)],
)
def test_the_command_refuses_with_the_same_line(
    settings: dict[str, Any], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(settings)) == 2
    err = capsys.readouterr().err
    assert err.startswith("costmodel: error: ") and message in err and err.count("\n") == 1


def test_the_tables_are_the_command_lines() -> None:
    """The request's ranges and choices are the parser's for the same options (each parses at the
    boundary too: a usage error before any work)."""
    assert {k: cli_options.INT_RANGES[k] for k in INT_RANGES} == INT_RANGES
    assert {k: cli_options.FLOAT_RANGES[k] for k in FLOAT_RANGES} == FLOAT_RANGES
    assert ROUTER_CHOICES == ROUTERS and DISPATCH_CHOICES == DISPATCHES
    sim = next(a for a in build_parser()._actions if a.dest == "command").choices["simulate"]
    defaults = {a.dest: a.default for a in sim._actions}
    assert {k: defaults[k] for k in DRAWN_DEFAULTS} == DRAWN_DEFAULTS
    for name in SimulationRequest.settings():  # every setting is an option of the same name
        assert name == "profile" or name in defaults, name


def test_the_command_builds_the_same_request() -> None:
    args = build_parser().parse_args(
        ["simulate", "tiny", "--rate", "4", "--predict", "vllm", "--router", "prefix", "--replicas", "2"]
    )
    built = cli_simulate.request_of(args)
    direct = SimulationRequest(rate=4.0, predict="vllm", router="prefix", replicas=2)
    assert built == direct
    assert direct.engine is get_engine("vllm") and direct.interval is True  # on with --predict


def test_defaults_settled_and_pieces_built() -> None:
    r = SimulationRequest(max_rate=True, predict="trtllm", slo_ttft=1.0, slo_tpot=0.1)
    assert r.interval is True and r.engine is get_engine("trtllm")  # --max-rate's band, on with --predict
    assert SimulationRequest(rate=1.0).interval is False  # the bound has none
    # --disagg 1:2 over tp 4: (1 + 2) replicas x 4 devices = 12
    t = SimulationRequest(rate=1.0, tp=4, disagg="1:2", link_bandwidth=5e10).topology()
    assert (t.prefill_replicas, t.decode_replicas, t.devices, t.link_bandwidth) == (1, 2, 12, 5e10)
    assert SimulationRequest(rate=1.0, router="prefix").topology().prefix_eps == 0.5  # the router's default
    s = SimulationRequest(rate=1.0, spec_draft="ngram", spec_accept="0.6").spec()
    assert (s.k, s.accept) == (3, (0.6, 0.6, 0.6))  # k defaults to 3, one rate for every position
    kv = SimulationRequest(rate=1.0, host_kv_bytes=1e11).kv_tiers()
    assert (kv.host_bytes, kv.host_bandwidth, kv.ssd_bytes) == (1e11, None, 0.0)  # vllm caches prefixes
    off = SimulationRequest(rate=1.0, enable_prefix_caching=False)
    assert off.prefix_caching is False and off.engine.overridden == ("enable_prefix_caching",)
    given = get_engine("vllm").with_overrides(max_num_seqs=64)
    assert SimulationRequest(rate=1.0, profile=given).engine.max_num_seqs == 64


def test_cmd_simulate_is_a_thin_command() -> None:
    """parse -> request -> run -> report: the command itself stays under 60 lines."""
    source = inspect.getsource(cli_simulate)
    fn = next(
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "cmd_simulate"
    )
    assert fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 < 60
    assert Path(cli_simulate.__file__).name == "simulate.py"


def test_the_workload_in_the_command_lines_words() -> None:
    # 10 conversations x 3 turns = 30 requests, each turn's message fixed:64, each answer fixed:16
    r = SimulationRequest(rate=2.0, turns=3, requests=10, prompt="fixed:64", output="fixed:16")
    assert r.workload_text() == (
        "workload: --requests 10 conversations x --turns 3 = 30 requests --seed 0 --prompt fixed:64 "
        "--output fixed:16 --arrival poisson"
    )
    c = SimulationRequest(concurrency=4, stagger="0.5", requests=30, think_time=0.1)
    assert c.workload_text() == (
        "workload: --requests 30 --seed 0 --prompt lognormal:1000,1.0 --output lognormal:250,1.0 "
        "--think-time 0.1, --concurrency 4 clients --stagger 0.5"
    )
    m = SimulationRequest(max_rate=True, slo_ttft=1.0, slo_tpot=0.1, arrival="constant")
    assert m.workload_text().endswith("--arrival constant (the same draw at every probed rate)")


def test_an_infinite_rate_is_told_how_to_send_everything_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """``vllm bench serve``'s default ``--request-rate inf`` sends every request at t = 0; the
    refusal of ``--rate inf`` names the closed loop that does (the library's and the parser's
    line alike; ``size``, which takes no clients, is not told to give them)."""
    from graphs.serving.sim.requests import ALL_AT_ONCE

    with pytest.raises(CostModelError) as exc:
        SimulationRequest(rate=math.inf)
    assert str(exc.value) == f"rate (--rate) must be a finite number, got inf; {ALL_AT_ONCE}"
    assert main(["simulate", "tiny", "--rate", "inf"]) == 2
    assert ALL_AT_ONCE in capsys.readouterr().err
    assert main(["size", "tiny", "--rate", "inf"]) == 2
    err = capsys.readouterr().err
    assert "--rate must be a finite number" in err and "--concurrency" not in err


def test_as_many_clients_as_requests_is_every_request_at_once() -> None:
    """What the hint above promises: a closed loop of N clients over N requests (none waits for
    a client) simulates the same requests, to the second, as the open loop that sends all N at
    t = 0 (:func:`~graphs.serving.sim.requests.synthetic` with ``rate=None``)."""
    from graphs.serving.sim.requests import synthetic
    from graphs.serving.sim.simulator import simulate

    reqs = synthetic(40, rate=None, prompt="uniform:100,900", output="uniform:5,60", seed=3)
    opened = simulate("tiny", "h100-sxm", reqs)
    closed = simulate("tiny", "h100-sxm", reqs, concurrency=len(reqs))
    for key in ("arrival_s", "ttft_s", "e2e_s", "prompt", "output"):
        a, b = opened.per_request[key], closed.per_request[key]
        assert a.shape == b.shape == (len(reqs),) and float(abs(a - b).max()) <= 1e-9, key
    assert opened.duration_s == pytest.approx(closed.duration_s, abs=1e-9)


def test_the_rate_search_holds_p99_unless_told() -> None:
    assert SimulationRequest(max_rate=True, slo_ttft=1.0).slo_percentile == 99.0
    assert SimulationRequest(max_rate=True, slo_ttft=1.0, percentile=90.0).slo_percentile == 90.0
    assert SimulationRequest(rate=1.0).percentile is None  # nothing reads it
