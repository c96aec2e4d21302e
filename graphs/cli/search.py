"""``costmodel search``: the Pareto frontier of a serving design space (:func:`graphs.serving.search.search`)."""

from __future__ import annotations

import argparse
import csv
from typing import Any

from .common import dump, progress_bar
from .cost_option import add_cost_options
from .dask_option import add_dask_options, dask_client
from .html_option import add_html_option, keep
from .options import add_dtype_options, apply_dtypes, check_output_path, int_list
from .predict_option import add_predict_option
from .spec_options import add_spec_options

__all__ = ["add_search_parser", "cmd_search", "request_of"]


def _dtypes(text: str | None) -> list[str | None]:
    return [d.strip() or None for d in text.split(",")] if text else [None]


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
        weight_dtypes=tuple(_dtypes(args.weight_dtypes)),
        kv_dtypes=tuple(_dtypes(args.kv_dtypes)),
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
    )


def cmd_search(args: argparse.Namespace) -> int:
    """``costmodel search``: the options as a checked request, its search, the frontier printed."""
    from costmodel.report import format_table

    from .model_option import resolve_model
    from .predict_option import predictor_of

    if args.csv:
        check_output_path(args.csv, "--csv")

    req = request_of(args)
    predictor = predictor_of(args)
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    with dask_client(args) as client:
        res = req.run(cfg, predictor=predictor, client=client, progress=progress_bar("search", args.quiet))
    keep(args, result=res)
    if args.csv:
        from costmodel.outfiles import atomic_write

        with atomic_write(args.csv, "--csv") as f:
            if res.frontier:
                w = csv.DictWriter(f, fieldnames=list(res.frontier[0]))
                w.writeheader()
                w.writerows(res.frontier)
    if args.json:
        print(dump(res))
        return 0
    per = f" over {res.contexts} contexts, one frontier each" if res.contexts > 1 else ""
    print(
        f"{res.model}: {res.points:,} points; {res.valid:,} valid plans, {res.fits:,} fit in memory, "
        f"{res.meets_slo:,} meet the SLOs; Pareto frontier ({len(res.frontier)} points{per}, "
        f"{' vs '.join(res.objectives)}), by context, fastest user first:"
    )
    if res.coverage is not None:
        from .predicted import predicted_lines

        what = "every step's kernels" + (
            ", each at the pessimistic end (P90) of its held-out error"
            if args.rank_by == "pessimistic"
            else ""
        )
        print("\n".join(predicted_lines(args.predict, ",".join(req.devices), res.coverage, what=what)))
        print("  (coverage of the frontier's decode steps)")
    s = req.spec()
    if s is not None:
        print(
            f"  speculative decoding: {s.draft} drafts k = {s.k}, {s.expected_tokens():.2f} expected tokens per "
            "verification; TPOT is the verify and draft steps over them"
        )
    for note in res.dtype_notes:
        print(f"  note: {note}")
    if res.duplicates:
        print(f"  searched once, given twice: {', '.join(res.duplicates)}")
    if res.beyond_domain:
        print(f"  left out, wider than the device's scale-up domain: {', '.join(res.beyond_domain)}")
    cols = (
        ("plan", "plan", "s"),
        ("batch", "batch", "s"),
        ("ctx", "ctx", "s"),
        ("ttft_s", "TTFT s", ".4g"),
        ("tpot_s", "TPOT s", ".4g"),
        ("tokens_per_s_per_user", "tok/s/user", ".1f"),
        ("tokens_per_s_per_device", "tok/s/device", ".1f"),
        ("energy_per_token_j", "J/token", ".4g"),
    ) + ((("usd_per_m_output", "$/M out 100% busy", ".4g"),) if args.cost else ())
    rows = list(res.frontier)
    if args.top and len(rows) > args.top:  # keep the ends and an even spread between them
        step = (len(rows) - 1) / (args.top - 1) if args.top > 1 else len(rows)
        rows = [rows[round(i * step)] for i in range(args.top)] if args.top > 1 else rows[:1]
    if len(rows) < len(res.frontier):
        print(
            f"  showing {len(rows)} of {len(res.frontier)} frontier points (--top 0 for all, --csv or --json)"
        )
    print(format_table(*_shown(rows, cols)))
    unpriced = sorted({r["device"] for r in res.frontier if args.cost and r["usd_per_m_output"] is None})
    if unpriced:
        print(
            f"  {', '.join(unpriced)}: no price: pass --price-per-hour (the cost objective ranks them last)"
        )
    winners = list(res.best_by_ctx.items())
    most = len(winners) if not args.top else 3  # winners of the first contexts; --top 0: all
    for ctx, best in winners[:most]:
        head = f"  ctx {ctx}: " if len(winners) > 1 else "  "
        for name, row in best.items():
            print(f"{head}{name.replace('_', ' ')}: {row['plan']}, batch {row['batch']}")
    if len(winners) > most:
        print(f"  winners shown for {most} of {len(winners)} contexts (--top 0 or --json for all)")
    if args.csv:
        print(f"frontier written to {args.csv}")
    return 0


#: what a table cell says for a metric the device has no figure for (None in the rows)
_MISSING = {"energy_per_token_j": "no TDP", "usd_per_m_output": "no price"}


def _shown(
    rows: list[Any], cols: tuple[tuple[str, str, str], ...]
) -> tuple[list[dict[str, Any]], tuple[tuple[str, str, str], ...]]:
    """The rows and columns with the optional metrics formatted here: a device without a TDP
    (energy) or a price (cost) has None there, which the table prints as :data:`_MISSING` says."""
    fmts = {k: f for k, _, f in cols if k in _MISSING}
    out = []
    for r in rows:
        d = dict(r)
        for k, f in fmts.items():
            d[k] = _MISSING[k] if d[k] is None else format(float(d[k]), f)
        out.append(d)
    for i, (k, h, _) in enumerate(cols):
        if k in _MISSING:
            cols = (*cols[:i], (k, h, "s"), *cols[i + 1 :])
    return out, cols


def add_search_parser(sub: Any) -> None:
    sp = sub.add_parser(
        "search",
        help="design-space search: devices x dtypes x tp/pp/ep x batch x ctx, Pareto frontier under SLOs",
    )
    sp.add_argument("model", help="catalog name or path to a config.json")
    sp.add_argument("--devices", default="h100-sxm", help="comma list of catalog devices")
    sp.add_argument("--tp", default="1", help="tensor-parallel degrees: list or range (1:8:2)")
    sp.add_argument("--pp", default="1", help="pipeline stages: list or range")
    sp.add_argument("--ep", default="1", help="expert-parallel degrees (MoE models): list or range")
    sp.add_argument("--microbatches", default="1", help="pipeline micro-batches: list or range")
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
    sp.set_defaults(func=cmd_search)
    add_html_option(sp, "search")
