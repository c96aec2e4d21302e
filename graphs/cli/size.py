"""``costmodel size``: the cheapest (or fewest-device) deployment within TTFT/TPOT SLOs at a percentile
(:func:`graphs.serving.planning.sizing.size_deployment`)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import dump, progress_bar
from .cost_option import add_cost_options
from .dask_option import add_dask_options, dask_client, prestart_workers
from .engine_option import add_engine_options
from .group_options import add_group_options
from .html_option import add_html_option, keep
from .options import add_dtype_options, apply_dtypes, int_list

__all__ = ["add_size_parser", "cmd_size", "request_of"]

#: what a Dask worker of ``size`` imports as it starts: the module its tasks run
_WORKER_MODULES = ("graphs.serving.planning.sizing",)

HELP = "sizing: cheapest deployment (device x tp x replicas, aggregated or P:D) within TTFT/TPOT SLOs at the --percentile (default 99)"


def _add_workload_options(p: argparse.ArgumentParser, *, requests: int, requests_help: str) -> None:
    """The drawn workload every candidate simulates (as ``simulate`` draws it): ``--requests``, ``--arrival``, ``--prompt``,
    ``--output``, ``--seed`` (:func:`graphs.serving.sim.requests.synthetic`)."""
    p.add_argument("--requests", type=int, default=requests, help=requests_help)
    p.add_argument(
        "--arrival",
        default="poisson",
        help="gaps between requests: poisson, constant (exactly 1/rate apart) or gamma:CV",
    )
    p.add_argument(
        "--prompt",
        default="lognormal:1000,1.0",
        help="prompt tokens: fixed:N, uniform:LO,HI, lognormal:MEAN,SIGMA",
    )
    p.add_argument("--output", default="lognormal:250,1.0", help="output tokens, same forms as --prompt")
    p.add_argument("--seed", type=int, default=0, help="random seed of the drawn arrivals and lengths")


def request_of(args: argparse.Namespace) -> Any:
    """The command line's options as a :class:`~graphs.serving.planning.size_request.SizeRequest`
    (which checks them); the engine is ``--engine``'s (vLLM's when not given) with the scheduler
    flags over it: each (device, tp) sizes its own pool."""
    from graphs.serving.planning.size_request import SizeRequest

    from .engine_option import profile_of

    return SizeRequest(
        rate=args.rate,
        slo_ttft=args.slo_ttft,
        slo_tpot=args.slo_tpot,
        devices=tuple(d.strip() for d in args.devices.split(",") if d.strip()),
        tps=tuple(int_list(args.tp, "--tp", hi=4096, most=64)),
        objective=args.objective,
        disaggregated=not args.no_disagg,
        price_per_hour=args.price_per_hour,
        electricity_per_kwh=args.electricity_per_kwh,
        link_bandwidth=args.link_bandwidth,
        **{k: getattr(args, k) for k in ("requests", "prompt", "output", "arrival", "seed")},
        percentile=args.percentile,
        profile=profile_of(args),
        max_simulations=args.max_simulations,
        allow_long_context=args.allow_long_context,
        dps=tuple(int_list(args.dp, "--dp", hi=4096, most=64)),
        expert_parallel=args.enable_expert_parallel,
        moe_dispatch=args.moe_dispatch,
    )


def cmd_size(args: argparse.Namespace) -> int:
    """``costmodel size``: the options as a checked request, its sizing
    (:func:`graphs.serving.present.planning_reports.run_size`), the winner printed.

    With ``--scheduler dask`` the local cluster starts while the model resolves and the bounds
    prune (its workers importing the sizing as they start), and the candidates simulate on it."""
    prestart_workers(args, _WORKER_MODULES)
    from graphs.serving.present.planning_reports import run_size

    from .model_option import resolve_model

    with dask_client(args, preload=_WORKER_MODULES, background=True) as client:
        cfg = apply_dtypes(resolve_model(args.model, args), args)
        req = request_of(args)
        progress = progress_bar("size", args.quiet, "simulations")
        # a task a worker thread (the awaited one and the threads less one ahead): a task submitted
        # beyond them would wait on a busy worker (sizing's module doc); a scheduler at
        # --dask-address says how many threads its workers have, a local cluster has --workers
        threads = sum(client.nthreads().values()) if args.dask_address else args.workers
        report = run_size(req, cfg, executor=client, lookahead=max(1, threads - 1), progress=progress)
    keep(args, report=report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 1 if report.result.winner is None else 0  # none meets the SLOs: options.EXIT_CODES


def add_size_parser(sub: Any) -> None:
    sp = sub.add_parser("size", help=HELP)
    sp.add_argument("model", help="catalog name or path to a config.json")
    sp.add_argument("--rate", type=float, required=True, help="offered load (requests/s)")
    sp.add_argument(
        "--slo-ttft", type=float, required=True, help="TTFT SLO (s) at the --percentile (default 99)"
    )
    sp.add_argument(
        "--slo-tpot", type=float, required=True, help="TPOT SLO (s) at the --percentile (default 99)"
    )
    sp.add_argument(
        "--devices", default="h100,h200,b200", help="comma list of catalog devices to choose from"
    )
    sp.add_argument("--tp", default="1,2,4,8", help="tensor-parallel degrees to try: list or range (1:8:2)")
    sp.add_argument("--objective", choices=("cost", "gpus"), default="cost", help="minimise USD/h or devices")
    sp.add_argument("--no-disagg", action="store_true", help="aggregated replicas only (no P:D splits)")
    add_group_options(sp, many=True)
    add_cost_options(sp)
    sp.add_argument(
        "--link-bandwidth",
        type=float,
        default=None,
        help="KV transfer between P and D pools (bytes/s per direction; 50e9 when not given: one "
        "400 Gb/s NIC per GPU)",
    )
    _add_workload_options(sp, requests=500, requests_help="requests each candidate simulates")
    sp.add_argument(
        "--percentile",
        type=float,
        default=99.0,
        help="the percentile the SLOs hold at, and the latencies printed (default 99)",
    )
    add_engine_options(sp)
    sp.add_argument("--max-simulations", type=int, default=60, help="most candidates simulated")
    add_dask_options(sp, "the candidate simulations")
    sp.add_argument(
        "--allow-long-context",
        action="store_true",
        help="simulate requests beyond the model's context limit (max_position_embeddings) with a warning",
    )
    add_dtype_options(sp)
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_size, device_notes="model")
    add_html_option(sp, "report")
