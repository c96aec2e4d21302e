"""``costmodel ledger | prefill | decode | sweep``: serving questions from the shell.

Thin layers over :mod:`costmodel.ledger` and :mod:`graphs` (capacity,
serving, sweep), imported lazily so the core stays independent.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import dump, progress_bar
from .html_option import add_html_option, keep
from .ledger_view import (
    print_cache_caps,
    print_fits,
    print_knee,
    print_kv_split,
    print_notes,
    print_terms,
    refuse_or_warn,
)
from .model_option import check_context, resolve_config
from .options import add_dtype_options, check_output_path, int_list, number

if TYPE_CHECKING:
    from costmodel.ledger import Overhead

__all__ = ["add_phase_parsers", "request_of"]


def _overhead(args: argparse.Namespace) -> Overhead:
    from costmodel.ledger import Overhead

    return Overhead(args.overhead_policy, number(args.overhead, "--overhead", allow_zero=True))


def cmd_ledger(args: argparse.Namespace) -> int:
    if args.model is None:
        return _ledger_raw(args)
    from .cached import default_overhead, ledger_report

    if not default_overhead(args):
        _overhead(args)  # flag errors first, then the model's limit
    if args.phase == "prefill":
        check_context(args, args.seq or args.ctx, "--seq")
    else:
        check_context(args, args.ctx, "--ctx")
    rep = ledger_report(args, resolve_config) or _library_ledger(args)
    code = 0 if rep.fits else 1  # README: exit 1 is "does not fit"
    if args.json:
        print(dump(rep.to_dict()))
        return code
    print(f"{rep.model} on {rep.device} (tp={args.tp}): batch {args.batch}, ctx {args.ctx}, {args.phase}")
    print_terms(rep.terms, rep.capacity_bytes)
    print_kv_split(rep)
    print_fits(rep.max_batch, "batch", f"ctx {args.ctx}")
    print_fits(rep.max_context, "context", f"batch {args.batch}")
    if rep.model_limit is not None and rep.max_context.value > rep.model_limit:
        print(f"    (memory allows it; the model itself stops at {rep.model_limit} tokens)")
    return code


def _library_ledger(args: argparse.Namespace) -> Any:
    """The ledger report from the library (any phase, overhead and activation assumption)."""
    from costmodel.expr import parse_expr
    from graphs import capacity

    return capacity(
        resolve_config(args),
        args.device,
        batch=args.batch,
        ctx=args.ctx,
        phase=args.phase,
        seq=args.seq,
        tp=args.tp,
        overhead=_overhead(args),
        activation_bytes_per_token=parse_expr(args.act_bytes_per_token) if args.act_bytes_per_token else None,
    )


def _ledger_raw(args: argparse.Namespace) -> int:
    from costmodel.errors import CostModelError
    from costmodel.ledger import GIB, MemoryLedger, max_batch, max_context
    from costmodel.report import format_table

    if args.weights_bytes is None or args.kv_bytes_per_token is None or args.capacity_bytes is None:
        raise CostModelError(
            "without a model, give --weights-bytes, --kv-bytes-per-token and --capacity-bytes"
        )
    led = MemoryLedger(
        number(args.weights_bytes, "--weights-bytes", allow_zero=True),
        number(args.kv_bytes_per_token, "--kv-bytes-per-token", allow_zero=True),
        number(args.act_bytes_per_token or "0", "--act-bytes-per-token", allow_zero=True),
        _overhead(args),
    )
    cap = number(args.capacity_bytes, "--capacity-bytes")
    seq = args.seq if args.seq is not None else args.ctx
    active = seq if args.phase == "prefill" else 1
    rows = []
    for b in int_list(args.batches or str(args.batch), "--batches"):
        t = {
            k: float(v)
            for k, v in led.terms(batch=b, cached_tokens=args.ctx, active_tokens=active * b, capacity=cap)
            .as_dict()
            .items()
        }
        rows.append(
            {"batch": b, **{k: v / GIB for k, v in t.items()}, "fits": "yes" if t["total"] <= cap else "OOM"}
        )
    fit_b = max_batch(led, cap, ctx=args.ctx, active_per_sequence=active)
    fit_c = max_context(led, cap, batch=args.batch, active_per_sequence=active)
    # README: exit 1 is "does not fit": no batch asked for fits (a table that runs into OOM is fine)
    code = 0 if any(r["fits"] == "yes" for r in rows) else 1
    if args.json:
        print(dump({"rows": rows, "max_batch": fit_b.to_dict(), "max_context": fit_c.to_dict()}))
        return code
    cols = (
        ("batch", "batch", "s"),
        ("weights", "weights GiB", ".2f"),
        ("kv_cache", "KV GiB", ".2f"),
        ("activations", "act GiB", ".2f"),
        ("overhead", "overhead GiB", ".2f"),
        ("total", "total GiB", ".2f"),
        ("fits", "fits", "s"),
    )
    print(format_table(rows, cols))
    print_fits(fit_b, "batch", f"ctx {args.ctx}")
    return code


def _expert_plan(args: argparse.Namespace) -> dict[str, Any]:
    """``ep`` and the routing of a routed step, for its JSON (nothing for the default step)."""
    from .routing_option import routed, routing_of

    return {"ep": args.ep, "routing": routing_of(args).label} if routed(args) else {}


def print_expert_plan(args: argparse.Namespace, extra: str = "", refused: bool = False) -> None:
    """What a routed step holds and what it leaves out (nothing for the default step); after a
    refusal, only what the memory check leaves out."""
    plan = _expert_plan(args)
    if plan and refused:
        print(f"  (--ep {plan['ep']}: the memory check counts every expert on each device; {extra})")
    elif plan:
        print(
            f"  ep {plan['ep']}, routing {plan['routing']}: the routed experts are the busiest EP rank's "
            "(expected maximum over ranks of rows and touched experts); the all-to-all between ranks is "
            "not in this step (serve plans adds it); the memory check counts every expert on each device"
            + (f"; {extra}" if extra else "")
        )


def request_of(args: argparse.Namespace, phase: str) -> Any:
    """The options of ``decode`` or ``prefill`` as a
    :class:`~graphs.serving.analysis.phase_request.PhaseRequest`, which checks them (light: no
    engine is imported for the default step)."""
    from graphs.serving.analysis.phase_request import PhaseRequest

    point = {"ctx": args.ctx} if phase == "decode" else {"seq": args.seq, "chunk": args.chunk}
    return PhaseRequest(
        phase,
        device=args.device,
        batch=args.batch,
        tp=args.tp,
        ep=args.ep,
        routing=args.routing,
        placement=args.placement,
        replicate_hot=args.replicate_hot,
        predict=args.predict,
        predict_file=getattr(args, "predict_file", None),
        fp8_scales=getattr(args, "fp8_scales", None),
        **point,
    )


def cmd_prefill(args: argparse.Namespace) -> int:
    from costmodel.text import fmt_time

    from .cached import capacity, prefill_report

    check_context(args, args.seq, "--seq")
    request_of(args, "prefill")  # a bad --chunk or routing is the user's error, before the verdict
    fit = capacity(args, resolve_config, "prefill")
    refused = refuse_or_warn(args, fit)
    if refused is not None:
        print_expert_plan(args, "--ignore-capacity costs the step anyway", refused=True)
        return refused
    rep = prefill_report(args, resolve_config)
    keep(args, report=rep)
    if args.json:
        print(dump({**rep.to_dict(), "capacity": fit.to_dict(), **_expert_plan(args)}))
        return 0
    print(
        f"{rep.model} prefill on {rep.device}: batch {rep.batch} x {args.seq} tokens, tp={rep.tp}"
        + (f", chunks of {args.chunk}" if args.chunk else "")
    )
    print_notes(rep.notes)
    print_expert_plan(args)
    print(
        f"  TTFT lower bound (sum of kernel bounds): {fmt_time(rep.step_s)}"
        f"  [whole prompt as one roofline: {fmt_time(rep.optimistic_step_s)}]"
    )
    for k, v in rep.terms_s.items():
        print(f"    {k:16s} {v * 1e3:10.3f} ms")
    if (b := rep.bound_by) is not None:
        print(f"  {b.line()}")
    print(f"  attention share of FLOPs: {100 * rep.attention_flop_share:.1f}%")
    print(
        f"  throughput {rep.tokens_per_s:,.0f} tokens/s"
        + (f", {rep.energy_per_token_j * 1e3:.3f} mJ/token (TDP x time)" if rep.energy_per_token_j else "")
    )
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    from costmodel.keys import Unit
    from costmodel.text import fmt_time

    from .cached import capacity, decode_reports

    check_context(args, args.ctx, "--ctx")
    request_of(args, "decode")  # a bad routing is the user's error, before the verdict
    fit = capacity(args, resolve_config, "decode")
    refused = refuse_or_warn(args, fit)
    if refused is not None:
        print_expert_plan(args, "--ignore-capacity costs the step anyway", refused=True)
        return refused
    rep, lim, nf = decode_reports(args, resolve_config, max_batch=fit.max_batch)
    keep(args, report=rep, **({"limits": lim} if lim is not None else {}))
    if args.json:
        limits = lim.to_dict() if lim is not None else None
        doc = {**rep.to_dict(), "limits": limits, "near_far_memory": nf.to_dict(), **_expert_plan(args)}
        print(dump({**doc, "capacity": fit.to_dict()}))
        return 0
    compute = max((v for k, v in rep.terms_s.items() if k in tuple(Unit)), default=0.0)
    links = {k: v for k, v in rep.terms_s.items() if k.startswith("link:")}
    print(f"{rep.model} decode on {rep.device}: batch {rep.batch}, ctx {args.ctx}, tp={rep.tp}")
    print_notes(rep.notes)
    print_expert_plan(
        args, "knee batch and ctx ceiling not solved for this plan; per-device rates count the tp group only"
    )
    print(
        f"  weight read {fmt_time(rep.weight_read_s)} | KV read {fmt_time(rep.kv_read_s)} | "
        f"compute {fmt_time(compute)}" + "".join(f" | {k[5:]} {fmt_time(v)}" for k, v in links.items())
    )
    if (b := rep.bound_by) is not None:
        print(f"  {b.line()}")
    print_cache_caps(args, rep, resolve_config)
    print(
        f"  TPOT bound {fmt_time(rep.step_s)} -> {rep.tokens_per_s_per_user:.1f} tokens/s per user, "
        f"{rep.tokens_per_s_per_device:.1f} tokens/s per device"
    )
    print(
        f"  reading every weight once takes {fmt_time(rep.read_every_weight_once_s)}; the graph reads "
        f"{fmt_time(rep.weight_read_s)} of weights because the input-embedding table "
        f"({fmt_time(rep.embedding_table_read_s)} of it) is gathered, not streamed: only the "
        f"{rep.batch} row(s) in use are read"
        + (
            ", and only the experts the batch routes to"
            + (" on the busiest EP rank" if _expert_plan(args) else "")
            + " are read"
            # more missing than the embedding table: a MoE step reads its touched experts only
            if rep.read_every_weight_once_s - rep.weight_read_s > 1.01 * rep.embedding_table_read_s
            else ""
        )
    )
    if rep.energy_per_token_j is not None and rep.device_hours_per_million_tokens is not None:
        print(
            f"  energy {rep.energy_per_token_j:.4f} J/token (TDP x TPOT / batch: an estimate at full power); "
            f"{rep.device_hours_per_million_tokens:.3f} device-hours per million tokens"
        )
    if lim is not None:
        print_knee(args, lim, fit)
    print(
        f"  memory: {nf.full_memory_reads_per_s:.1f} full-memory reads/s; the weights need at least "
        f"{nf.devices_to_hold_weights} device(s), and on exactly that many the weight read alone takes "
        f"{fmt_time(nf.per_token_bound_s)} per token (this step splits it over tp={rep.tp})"
    )
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import itertools

    from costmodel.text import format_table
    from graphs.serving.analysis.sweeps import check_grid, sweep_forms

    from .cached import sweep_forms as cached_forms

    if args.csv:
        check_output_path(args.csv, "--csv")  # before the work, not after it
    weights = [d or None for d in args.weight_dtypes.split(",")] if args.weight_dtypes else [None]
    kvs = [d or None for d in args.kv_dtypes.split(",")] if args.kv_dtypes else [None]
    combos = list(itertools.product(args.device.split(","), weights, kvs))
    batches, ctxs = int_list(args.batches, "--batches"), int_list(args.ctxs, "--ctxs")
    check_grid(len(combos), batches, ctxs)  # a grid too large is refused before any work
    if args.predict:  # priced per kernel: not the cached bound forms
        from graphs import sweep

        from .predict_option import predictor_of

        res = sweep(
            resolve_config(args),
            devices=args.device.split(","),
            batches=batches,
            ctxs=ctxs,
            weight_dtypes=weights,
            kv_dtypes=kvs,
            tp=args.tp,
            progress=progress_bar("sweep", args.quiet),
            predictor=predictor_of(args),
        )
    else:
        forms = cached_forms(args, resolve_config, combos)
        res = sweep_forms(
            forms[0].model,
            forms,
            batches=batches,
            ctxs=ctxs,
            tp=args.tp,
            progress=progress_bar("sweep", args.quiet),
        )
    if args.csv:
        res.to_csv(args.csv, "--csv")
    if args.json:
        print(dump(res.to_dict()))
        return 0
    front = res.frontier()
    print(
        f"{res.model}: {len(res):,} points, {res.fits:,} fit in memory; "
        f"Pareto frontier ({len(front)} points), fastest user first:"
    )
    for note in res.notes:
        print(f"  note: {note}")
    if res.coverage is not None:
        from .predicted import predicted_lines

        print(
            "\n".join(predicted_lines(args.predict, args.device, res.coverage, what="every step's kernels"))
        )
        print("  (coverage of the frontier's steps)")
    cols = (
        ("device", "device", "s"),
        ("weight_dtype", "weights", "s"),
        ("kv_dtype", "KV", "s"),
        ("batch", "batch", "s"),
        ("ctx", "ctx", "s"),
        ("tokens_per_s_per_user", "tok/s/user", ".1f"),
        ("tokens_per_s_per_device", "tok/s/device", ".1f"),
        ("energy_per_token_j", "J/token", ".4f"),
    )
    print(format_table(front[: args.top] if args.top else front, cols))
    if args.csv:
        print(f"all points written to {args.csv}")
    return 0


def add_phase_parsers(sub: Any) -> None:
    from .options import add_ignore_capacity
    from .predict_option import add_predict_option, with_prediction
    from .routing_option import add_expert_options

    def common(sp: argparse.ArgumentParser, model_required: bool = True) -> None:
        if model_required:
            sp.add_argument("model", help="catalog name or path to a config.json")
        sp.add_argument("--device", default="h100-sxm")
        sp.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
        add_dtype_options(sp)
        sp.add_argument("--json", action="store_true")
        sp.add_argument(
            "--allow-long-context",
            action="store_true",
            help="cost a context beyond the model's limit (max_position_embeddings) with a warning",
        )

    lg = sub.add_parser("ledger", help="memory ledger: weights + KV + activations + overhead")
    lg.add_argument(
        "model", nargs="?", default=None, help="catalog model or config.json; omit to give raw terms"
    )
    common(lg, model_required=False)
    lg.add_argument("--batch", type=int, default=1)
    lg.add_argument("--batches", default=None, help="raw mode: list, e.g. 1,8,16,24,32")
    lg.add_argument("--ctx", type=int, default=4096)
    lg.add_argument("--seq", type=int, default=None, help="prefill prompt length (default ctx)")
    lg.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    lg.add_argument(
        "--overhead-policy",
        default="fraction_of_sum",
        choices=("fraction_of_sum", "fraction_of_total", "fraction_of_free"),
        help="how --overhead applies: a fraction of the other terms' sum, of the total, or of what is free",
    )
    lg.add_argument("--overhead", default="0", help="fraction for the policy (e.g. 0.3, or 0.9 utilisation)")
    lg.add_argument(
        "--act-bytes-per-token",
        default=None,
        help="live activation bytes per active token (B; a number or an expression)",
    )
    lg.add_argument(
        "--weights-bytes", default=None, help="weight bytes, without a model (B; a number or an expression)"
    )
    lg.add_argument(
        "--kv-bytes-per-token", default=None, help="KV-cache bytes per cached token, without a model (B)"
    )
    lg.add_argument("--capacity-bytes", default=None, help="raw mode, e.g. 78*1024**3")
    lg.set_defaults(func=cmd_ledger)

    pf = sub.add_parser("prefill", help="TTFT bound, per-unit times, attention share, chunked prefill")
    common(pf)
    pf.add_argument("--batch", type=int, default=1)
    pf.add_argument("--seq", type=int, default=4096)
    pf.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="chunked prefill: tokens per chunk (none: the whole prompt at once)",
    )
    add_expert_options(pf)
    add_predict_option(pf)
    add_ignore_capacity(pf)
    pf.set_defaults(func=with_prediction(cmd_prefill, "prefill"))
    add_html_option(pf, "prefill")

    dc = sub.add_parser("decode", help="TPOT bound, weight/KV/compute times, knee batch, ctx ceiling, energy")
    common(dc)
    dc.add_argument("--batch", type=int, default=1)
    dc.add_argument("--ctx", type=int, default=4096)
    add_expert_options(dc)
    add_predict_option(dc)
    add_ignore_capacity(dc)
    dc.set_defaults(func=with_prediction(cmd_decode, "decode"))
    add_html_option(dc, "decode")

    sw = sub.add_parser("sweep", help="batch x ctx (x devices x dtypes) decode sweep and Pareto frontier")
    common(sw)
    sw.add_argument("--batches", default="1:1024:2", help="list or start:stop:factor")
    sw.add_argument(
        "--ctxs", default="1024,4096,16384,65536", help="comma-separated KV lengths to sweep (tokens)"
    )
    sw.add_argument("--weight-dtypes", default=None, help="comma list, e.g. bf16,int4")
    sw.add_argument("--kv-dtypes", default=None, help="comma list, e.g. bf16,fp8")
    sw.add_argument("--csv", default=None, help="write every point to this CSV file")
    sw.add_argument("--top", type=int, default=0)
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    add_predict_option(
        sw, help="price every step's kernels from this framework's measured kernels ([measured] extra)"
    )
    sw.set_defaults(func=cmd_sweep)
