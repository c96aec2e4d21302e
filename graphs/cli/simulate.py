"""``costmodel simulate``: request-level serving simulation, parsed into a
:class:`~graphs.serving.sim.simulation_request.SimulationRequest`, run and rendered by
:func:`graphs.serving.present.simulation_report.run_simulation`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphs.serving.sim.simulation_request import DRAWN_DEFAULTS

from .common import dump, progress_bar
from .cost_option import add_cost_options
from .dask_option import add_dask_options, dask_client
from .engine_option import LIST, add_engine_options, engine_list, profile_of
from .group_options import add_group_options
from .html_option import add_html_option, keep
from .options import CSV_SUFFIXES, add_dtype_options, apply_dtypes, check_output_path
from .predict_option import add_predict_option
from .spec_options import add_spec_options

#: the timeline figure beside ``--plot``'s latency CDFs
_TIMELINE = "timeline"
#: what a local Dask worker imports while it starts: the probes' simulations
_WORKER_MODULES = ("graphs.serving.planning.capacity_search",)

__all__ = ["add_simulate_parser", "cmd_simulate", "request_of"]


def request_of(args: argparse.Namespace) -> Any:
    """The command line's options as a :class:`~graphs.serving.sim.simulation_request.SimulationRequest`,
    which checks them (ranges, and every dependency between them); the engine profile is
    ``--engine``'s (or ``--predict``'s framework's) with the scheduler flags over it."""
    from graphs.serving.sim.simulation_request import SimulationRequest

    given = {name: getattr(args, name) for name in SimulationRequest.settings() if name != "profile"}
    return SimulationRequest(**given, profile=profile_of(args))


def cmd_simulate(args: argparse.Namespace) -> int:
    """``costmodel simulate``: the options as a checked request and every output path checked, then
    the library's run (:func:`graphs.serving.present.simulation_report.run_simulation`), its files
    written and its report printed."""
    from costmodel.errors import CostModelError
    from graphs.serving.present.simulation_report import run_simulation

    from .cost_option import rates_of
    from .model_option import check_context, resolve_model
    from .predict_option import load_predict_file, predictor_of

    if args.engine == LIST:
        print(engine_list(args.json))
        return 0
    if args.model is None:
        raise CostModelError("simulate needs a MODEL (catalog name or config.json path)")
    fit = load_predict_file(args)  # sets args.predict from the file
    _check_outputs(args)
    req = request_of(args)
    if args.scheduler == "dask" and not (req.max_rate or req.rates):
        raise CostModelError(
            "--scheduler dask runs --max-rate's probes or --rates' runs: one simulation has nothing to "
            "spread (add --max-rate or --rates)"
        )
    if req.rates and args.html:
        raise CostModelError("--html draws one run's page: give --rate (--rates prints one line a rate)")
    bar = (
        ("max-rate", "probes")
        if req.max_rate
        else ("rates", "runs")
        if req.rates
        else ("simulate", "requests")
    )
    with dask_client(args, preload=_WORKER_MODULES, background=True) as client:
        cfg = apply_dtypes(resolve_model(args.model, args), args)
        report = run_simulation(
            req,
            cfg,
            predictor=predictor_of(args),
            fit=fit,
            rates=rates_of(args, [args.device])[args.device],
            check_context=lambda tokens, field: check_context(args, tokens, field),
            progress=progress_bar(bar[0], args.quiet, bar[1]),
            executor=client,
            at_once=max(1, args.workers),
        )
    keep(args, report=report)
    if not (req.max_rate or req.rates):
        _write_files(args, report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    if args.csv and not args.json:
        print(f"per-request rows written to {args.csv}")
    search = getattr(report, "search", None)  # --max-rate's: no probed rate met the SLOs
    return 1 if search is not None and search.rate is None and search.saturated else 0


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output path (``--csv``, ``--plot`` and its timeline) checked before any work."""
    from costmodel.outfiles import PLOT_SUFFIXES, sibling

    if args.csv:
        check_output_path(args.csv, "--csv", suffixes=CSV_SUFFIXES)
    if args.plot:
        check_output_path(args.plot, "--plot", suffixes=PLOT_SUFFIXES)
        check_output_path(sibling(args.plot, _TIMELINE, default_suffix=".png"), "--plot (its timeline)")


def _write_files(args: argparse.Namespace, report: Any) -> None:
    """``--csv``'s per-request rows and ``--plot``'s CDFs and timeline, each path said."""
    from costmodel.outfiles import sibling

    res = report.result
    if args.csv:
        res.requests_csv(args.csv, "--csv")
    if not args.plot:
        return
    from costmodel.plots import latency_cdf_plot, plot_title, serving_timeline_plot

    point = {"model": res.model, "device": res.device, "tp": args.tp}
    priced = report.priced_by
    latency_cdf_plot(
        {
            "TTFT": res.per_request["ttft_s"],
            "TPOT": res.per_request["tpot_s"],
            "end to end": res.per_request["e2e_s"],
        },
        args.plot,
        title=plot_title(f"latency CDFs {report.load}, {priced}", **point),
        slos={k: v for k, v in (("TTFT", args.slo_ttft), ("TPOT", args.slo_tpot)) if v is not None},
    )
    timeline = sibling(args.plot, _TIMELINE, default_suffix=".png")
    serving_timeline_plot(
        res.timeline, timeline, title=plot_title(f"batch, queue and KV use over time, {priced}", **point)
    )
    print(f"wrote {args.plot} (latency CDFs) and {timeline} (timeline)", file=sys.stderr)


def add_simulate_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "simulate", help="request-level serving simulation: TTFT/TPOT percentiles under a rate"
    )
    sp.add_argument("model", nargs="?", default=None, help="catalog name or path to a config.json")
    sp.add_argument("--device", default="h100-sxm")
    sp.add_argument("--tp", type=int, default=1, help="tensor-parallel degree of each replica")
    add_dtype_options(sp)
    add_predict_option(
        sp,
        help="price every iteration's kernels from this framework's measured kernels instead of the "
        "roofline bound ([measured] extra)",
    )
    sp.add_argument(
        "--compare",
        action="store_true",
        help="print (and with --html draw) the bound, this prediction with its interval and, with "
        "--workload-from, the measured run side by side on the same requests",
    )
    sp.add_argument(
        "--interval",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run the optimistic and pessimistic ends (P10, P90 of the kernels' held-out errors) "
        "and print each metric's interval; with --max-rate, the max rate's P10 and P90 ends (the "
        "search again with every iteration's kernels at the calibrated TPOT band's ends: up to twice "
        "the probes again); with --rates, each rate's calibrated bands (no extra runs) "
        "(default: on with --predict)",
    )
    sp.add_argument(
        "--rate",
        type=float,
        default=None,
        help="requests per second (with --turns: conversations started per second)",
    )
    sp.add_argument(
        "--rates",
        default=None,
        help="a rate sweep: comma list of requests/s, the same drawn workload simulated at each, one "
        "line a rate (independent runs: with --scheduler dask one a worker at a time, the lowest "
        "rate first)",
    )
    sp.add_argument(
        "--requests",
        type=int,
        default=DRAWN_DEFAULTS["requests"],
        help="requests to simulate (with --turns: conversations)",
    )
    sp.add_argument(
        "--arrival",
        default="poisson",
        help="gaps of --rate: poisson, constant (exactly 1/rate apart) or gamma:CV",
    )
    sp.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="closed loop: N clients, each sending its next request when its answer has arrived "
        "(with --rate: a request waits for a free client, as vllm bench serve --max-concurrency)",
    )
    sp.add_argument(
        "--stagger",
        default=None,
        help="with --concurrency: spread the clients' first sends uniformly over S seconds (seeded by "
        "--seed), or 'cycle': over one request's cycle, measured by a first run that starts them "
        "together (the loop's steady state; started together, identical requests stay in step)",
    )
    sp.add_argument(
        "--prompt-pool",
        type=int,
        default=None,
        help="N distinct prompts drawn once; each request repeats one (whole-prompt prefix-cache hits)",
    )
    sp.add_argument(
        "--turns",
        type=int,
        default=1,
        help="turns per conversation: each prompt is the history (cached) plus a new --prompt message",
    )
    sp.add_argument(
        "--think-time",
        type=float,
        default=0.0,
        help="seconds a client waits after an answer before its next turn or request (--turns, --concurrency)",
    )
    sp.add_argument(
        "--prompt",
        default=DRAWN_DEFAULTS["prompt"],
        help="prompt tokens: fixed:N, uniform:LO,HI, lognormal:MEAN,SIGMA",
    )
    sp.add_argument(
        "--output", default=DRAWN_DEFAULTS["output"], help="output tokens, same forms as --prompt"
    )
    sp.add_argument("--trace", default=None, help="CSV or JSONL: arrival_s, prompt_tokens, output_tokens")
    sp.add_argument(
        "--workload-from",
        default=None,
        metavar="RESULT",
        help="replay the requests of your own benchmark run: its prompt and output lengths, arrivals "
        "(or rate) and clients, read as `calibrate serving` reads it (vllm bench serve JSON, GuideLLM "
        "report, result CSV); what it took is printed",
    )
    sp.add_argument(
        "--workload-run",
        type=int,
        default=None,
        metavar="INDEX",
        help="which run of a --workload-from file holding several (a GuideLLM report's benchmarks, from 0)",
    )
    sp.add_argument(
        "--seed",
        type=int,
        default=DRAWN_DEFAULTS["seed"],
        help="random seed of the drawn arrivals and lengths",
    )
    sp.add_argument(
        "--allow-long-context",
        action="store_true",
        help="simulate requests whose prompt + output exceed the model's context limit, with a warning",
    )
    add_engine_options(sp)
    sp.add_argument(
        "--num-blocks", type=int, default=None, help="KV blocks per replica (default: the engine's pool rule)"
    )
    sp.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep full KV blocks cached for reuse (a shared prompt prefix; a preempted request's own), "
        "or (--no-enable-prefix-caching) not (default: the engine's: on for vLLM V1 and trtllm-serve)",
    )
    sp.add_argument(
        "--shared-prefix", type=int, default=0, help="tokens every drawn prompt starts with (a system prompt)"
    )
    sp.add_argument("--overhead-s", type=float, default=0.0, help="CPU/scheduling time per iteration (s)")
    sp.add_argument("--replicas", type=int, default=1, help="replicas behind the router")
    sp.add_argument(
        "--router",
        choices=("round_robin", "least_outstanding", "prefix"),
        default="least_outstanding",
        help="how requests pick a replica: in turn, the fewest tokens still to process, or prefix: "
        "where the request's prefix (or conversation) is cached, within --prefix-eps",
    )
    sp.add_argument(
        "--prefix-eps",
        type=float,
        default=None,
        help="--router prefix load bound: a replica holding more than (1 + eps) x the mean outstanding "
        "tokens is passed over for the least-outstanding one (dimensionless; default 0.5)",
    )
    add_group_options(sp, many=False)
    sp.add_argument("--disagg", default=None, help="PREFILL:DECODE replicas, e.g. 1:2 (disaggregated)")
    sp.add_argument("--link-bandwidth", type=float, default=None, help="KV transfer link (bytes/s), --disagg")
    sp.add_argument(
        "--link-latency", type=float, default=0.0, help="per-layer transfer latency (s), --disagg"
    )
    add_spec_options(sp)
    sp.add_argument(
        "--host-kv-bytes",
        type=float,
        default=0.0,
        help="host memory for evicted prefix KV per replica (bytes; 0: none; with --enable-prefix-caching)",
    )
    sp.add_argument(
        "--host-link-bandwidth",
        type=float,
        default=None,
        help="device-host link per direction per device (bytes/s; default the catalog's host link: PCIe "
        "Gen5 64e9 on H100/H200, NVLink-C2C 450e9 on GB200)",
    )
    sp.add_argument(
        "--ssd-kv-bytes",
        type=float,
        default=0.0,
        help="local SSD below host memory per replica (bytes; 0: none)",
    )
    sp.add_argument(
        "--ssd-bandwidth", type=float, default=None, help="SSD read bandwidth per device (bytes/s)"
    )
    sp.add_argument("--slo-ttft", type=float, default=None, help="TTFT SLO (s)")
    sp.add_argument("--slo-tpot", type=float, default=None, help="TPOT SLO (s)")
    sp.add_argument("--max-rate", action="store_true", help="search the highest rate within the SLOs")
    add_cost_options(sp)
    sp.add_argument(
        "--percentile",
        type=float,
        default=None,
        help="the SLO percentile for --max-rate (default 99; only --max-rate)",
    )
    sp.add_argument("--csv", default=None, help="write one row per request")
    sp.add_argument("--plot", default=None, help="latency CDFs (PNG/SVG) and a -timeline figure (plot extra)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_simulate)
    add_html_option(sp, "simulate")
    add_dask_options(
        sp, "--max-rate's probes (--workers at once: a k-section of the bracket) or --rates' runs"
    )
