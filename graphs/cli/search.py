"""``costmodel search``: the Pareto frontier of a serving design space (:func:`graphs.serving.search.search`)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from typing import Any

from .common import dump, progress_bar
from .cost_option import add_cost_options
from .dask_option import add_dask_options, dask_client
from .group_options import add_group_options
from .html_option import add_html_option, keep
from .options import CSV_SUFFIXES, add_dtype_options, apply_dtypes, check_output_path, dtype_list, int_list
from .predict_option import add_predict_option
from .spec_options import add_spec_options

__all__ = ["add_search_parser", "cmd_search", "request_of"]


def request_of(args: argparse.Namespace) -> Any:
    """The command line's options as a :class:`~graphs.serving.planning.search_request.SearchRequest`
    (which checks them): each list option parsed (``1:1024:2``, ``1..512``, ``a,b``)."""
    from graphs.serving.planning.search_request import SearchRequest

    return SearchRequest(
        devices=tuple(d.strip() for d in args.devices.split(",") if d.strip()),
        tp=tuple(int_list(args.tp, "--tp", hi=4096)),
        pp=tuple(int_list(args.pp, "--pp", hi=4096)),
        ep=tuple(int_list(args.ep, "--ep", hi=4096)),
        microbatches=tuple(int_list(args.microbatches, "--microbatches", hi=4096)),
        batches=tuple(int_list(args.batches, "--batches", hi=10**7, most=100_000)),
        ctxs=tuple(int_list(args.ctxs, "--ctxs", hi=10**8, most=100_000)),
        weight_dtypes=tuple(dtype_list(args.weight_dtypes, "--weight-dtypes")),
        kv_dtypes=tuple(dtype_list(args.kv_dtypes, "--kv-dtypes")),
        prompt=args.prompt,
        slo_ttft=args.slo_ttft,
        slo_tpot=args.slo_tpot,
        energy=args.energy,
        cost=args.cost,
        price_per_hour=args.price_per_hour,
        electricity_per_kwh=args.electricity_per_kwh,
        predict=args.predict,
        rank_by=args.rank_by,
        spec_draft=args.spec_draft,
        spec_k=args.spec_k,
        spec_accept=args.spec_accept,
        dp=tuple(int_list(args.dp, "--dp", hi=4096, most=64)),
        expert_parallel=args.enable_expert_parallel,
        moe_dispatch=args.moe_dispatch,
    )


def cmd_search(args: argparse.Namespace) -> int:
    """``costmodel search``: the options as a checked request, its search
    (:func:`graphs.serving.present.planning_reports.run_search`), the frontier printed."""
    from graphs.serving.present.planning_reports import run_search

    from .model_option import check_context, resolve_model
    from .predict_option import predictor_of

    if args.csv:
        check_output_path(args.csv, "--csv", suffixes=CSV_SUFFIXES)

    req = request_of(args)
    check_context(args, max(max(req.ctxs), req.prompt or 0), "--ctxs/--prompt")  # before any work
    predictor = predictor_of(args)
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    with dask_client(args) as client:
        progress = progress_bar("search", args.quiet)
        report = run_search(req, cfg, predictor=predictor, client=client, progress=progress, top=args.top)
    keep(args, report=report)
    if args.csv:
        _write_frontier(args.csv, report.result.frontier)
    print(dump(report.to_dict()) if args.json else report.to_text())
    if args.csv and not args.json:
        print(f"frontier written to {args.csv}")
    return 0


def _write_frontier(path: str, frontier: Sequence[dict[str, Any]]) -> None:
    """``--csv``: the frontier's points, one row each."""
    from costmodel.outfiles import atomic_write
    from graphs.serving.planning.design_search import FRONTIER_COLUMNS

    with atomic_write(path, "--csv") as f:  # the header also for an empty frontier (it wrote 0 bytes)
        w = csv.DictWriter(f, fieldnames=list(FRONTIER_COLUMNS))
        w.writeheader()
        w.writerows(frontier)


def add_search_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "search",
        help="design-space search: devices x dtypes x tp/pp/ep/dp x batch x ctx, Pareto frontier under SLOs",
    )
    sp.add_argument("model", help="catalog name or path to a config.json")
    sp.add_argument(
        "--allow-long-context",
        action="store_true",
        help="search contexts beyond the model's limit (max_position_embeddings) with a warning",
    )
    sp.add_argument("--devices", default="h100-sxm", help="comma list of catalog devices")
    sp.add_argument("--tp", default="1", help="tensor-parallel degrees: list or range (1:8:2)")
    sp.add_argument("--pp", default="1", help="pipeline stages: list or range")
    sp.add_argument("--ep", default="1", help="expert-parallel degrees (MoE models): list or range")
    sp.add_argument("--microbatches", default="1", help="pipeline micro-batches: list or range")
    add_group_options(sp, many=True)
    sp.add_argument("--batches", default="1:1024:2", help="batch sizes: list, 1:1024:2 or 1..512[/step]")
    sp.add_argument("--ctxs", default="1024,4096,16384", help="contexts (tokens): list or range")
    # the singular flags of every serving command are one-element lists here
    sp.add_argument("--weight-dtypes", "--weight-dtype", default=None, help="comma list, e.g. bf16,fp8")
    sp.add_argument("--kv-dtypes", "--kv-dtype", default=None, help="comma list, e.g. bf16,fp8")
    add_dtype_options(sp, skip=("weight_dtype", "kv_dtype"))
    sp.add_argument(
        "--prompt", type=int, default=None, help="prompt tokens for TTFT (default: each point's ctx)"
    )
    sp.add_argument("--slo-ttft", type=float, default=None, help="drop points whose TTFT exceeds this (s)")
    sp.add_argument("--slo-tpot", type=float, default=None, help="drop points whose TPOT exceeds this (s)")
    sp.add_argument("--energy", action="store_true", help="energy per token as a third objective")
    add_predict_option(
        sp, help="price every step's kernels from this framework's measured kernels ([measured] extra)"
    )
    sp.add_argument(
        "--rank-by",
        choices=("point", "pessimistic"),
        default="point",
        help="with --predict: evaluate and rank every point at its prediction, or at the pessimistic "
        "(P90) end of its prediction interval",
    )
    sp.add_argument(
        "--cost",
        action="store_true",
        help="USD per million output tokens as an objective (minimised): the plan's $/h over its "
        "batch / TPOT, the devices 100%% busy decoding (graphs.serving.planning.cost)",
    )
    add_cost_options(sp)
    add_spec_options(sp, draws=False)
    add_dask_options(sp, "blocks")
    sp.add_argument("--csv", default=None, help="write the frontier to this CSV file")
    sp.add_argument("--top", type=int, default=20, help="frontier rows to print (0: all)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_search, device_notes="model")
    add_html_option(sp, "report")
