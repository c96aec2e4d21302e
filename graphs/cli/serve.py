"""``costmodel hw compare|claim`` and ``costmodel serve disagg|specdec|split|sram|plans``.

Every ``serve`` command takes ``--weight-dtype/--kv-dtype/--matmul-dtype``
(:func:`graphs.cli.options.add_dtype_options`); ``specdec`` applies them to
the target and the draft alike.
"""

from __future__ import annotations

import argparse
from typing import Any

from graphs.serving.step.defaults import DEFAULT_SPEC_K_MAX

from .common import emit
from .cost_option import add_cost_options
from .html_option import add_html_option, keep
from .ledger_view import json_warning
from .options import add_dtype_options, apply_dtypes, int_list
from .predict_option import add_predict_option
from .routing_option import add_routing_options, routing_of

__all__ = ["add_serve_parser"]

_PREDICT_HELP = "price every step's kernels from this framework's measured kernels ([measured] extra)"


def cmd_disagg(args: argparse.Namespace) -> int:
    """``costmodel serve disagg``: the options as a checked request, its answer
    (:func:`graphs.serving.present.serve_summaries.run_disagg`), the summary printed (a point that
    does not fit: refused, exit 1)."""
    from graphs.serving.analysis.serve_requests import DisaggRequest
    from graphs.serving.present.serve_summaries import run_disagg

    from .cost_option import rates_of
    from .model_option import check_context, resolve_model

    settings = ("prefill_device", "decode_device", "prompt", "output", "decode_batch", "link_bandwidth")
    req = DisaggRequest(
        **{k: getattr(args, k) for k in settings},
        link_latency=args.link_latency,
        rate=args.rate,
        overlap=args.overlap,
        ignore_capacity=args.ignore_capacity,
        predict=args.predict,
        allow_long_context=args.allow_long_context,
    )
    check_context(args, args.prompt + args.output, "--prompt + --output")
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    rates = rates_of(args, [args.prefill_device, args.decode_device])
    report = run_disagg(req, cfg, rates=rates, predictor=_predictor(args))
    refused = _refuse(args, report.capacity)
    if refused is not None:
        return refused
    keep(args, report=report)
    json_warning(args, _verdicts(report.capacity))
    return emit(args, report.to_dict(), report.to_text())


def _verdicts(checks: dict[str, Any]) -> list[str]:
    """The headline of each point of ``checks`` that does not fit, named by its role."""
    return [f"{k}: {c.headline(None)}" for k, c in checks.items() if c is not None and not c.fits]


def _predictor(args: argparse.Namespace) -> Any:
    from .predict_option import predictor_of

    return predictor_of(args)


def _predicted(
    args: argparse.Namespace, cfg: Any, device: str, batch: int, ctx: int, unlike: str | None = None
) -> list[str]:
    """With ``--predict``: what priced the steps, what the decode step at ``(batch, ctx)`` rests
    on and the served expected errors (:func:`graphs.serving.present.serve_summaries.decode_coverage_lines`;
    ``unlike``: what no validated deployment was)."""
    if not getattr(args, "predict", None):
        return []
    from graphs.serving.present.serve_summaries import decode_coverage_lines

    return decode_coverage_lines(args.predict, cfg, device, batch, ctx, _predictor(args), unlike)


def _refuse(args: argparse.Namespace, checks: dict[str, Any]) -> int | None:
    """Points that do not fit their device's memory: exit 1 naming each (``--json``: the
    verdicts), or with ``--ignore-capacity`` the verdicts as first lines and None (go on)."""
    from .common import dump

    bad = {k: c for k, c in checks.items() if c is not None and not c.fits}
    if not bad:
        return None
    heads = _verdicts(checks)
    if args.ignore_capacity:
        if not args.json:  # --json: said as the document is printed (ledger_view.json_warning)
            for h in heads:
                print(h + "; --ignore-capacity: the numbers below are for a point that cannot run")
        return None
    if args.json:
        print(dump({"capacity": {k: c.to_dict() for k, c in bad.items()}, "refused": heads}))
        return 1
    for h, c in zip(heads, bad.values(), strict=True):
        print(h)
        print(c.detail())
    print("  no latency for a point that cannot run (--ignore-capacity prints it anyway)")
    return 1


def cmd_specdec(args: argparse.Namespace) -> int:
    from costmodel.report import format_table
    from graphs.serving.analysis.specdec import speculative_decoding
    from graphs.serving.step.ledger_fit import capacity_check

    from .model_option import check_context, resolve_model

    for m in (args.target, args.draft):  # each model's own context limit, before any work
        check_context(argparse.Namespace(**{**vars(args), "model": m}), args.ctx, "--ctx")
    target, draft = (apply_dtypes(resolve_model(m, args), args) for m in (args.target, args.draft))
    checks = {
        "target": capacity_check(target, args.device, phase="decode", batch=args.batch, tokens=args.ctx),
        "draft": capacity_check(
            draft, args.draft_device or args.device, phase="decode", batch=args.batch, tokens=args.ctx
        ),
    }
    refused = _refuse(args, checks)
    if refused is not None:
        return refused
    r = speculative_decoding(
        target,
        draft,
        args.device,
        args.draft_device,
        alpha=args.alpha,
        batch=args.batch,
        ctx=args.ctx,
        k_max=args.k_max,
        predictor=_predictor(args),
        allow_long_context=args.allow_long_context,
    )
    text = format_table(
        [row.to_dict() for row in r.rows],
        (
            ("k", "k", "s"),
            ("expected_tokens", "E[tokens]", ".2f"),
            ("step_s", "step (s)", ".3e"),
            ("speedup", "speed-up", ".2f"),
        ),
    )
    text += f"\n{r.best_line()}; S = {r.closed_form}  (gamma = k)"
    text += "".join(
        "\n" + x for x in _predicted(args, target, args.device, args.batch, args.ctx, unlike="speculating")
    )
    # each model's verdict beside the numbers (a point that does not fit: costed under --ignore-capacity)
    json_warning(args, _verdicts(checks))
    return emit(args, {**r.to_dict(), "capacity": {k: c.to_dict() for k, c in checks.items()}}, text)


def cmd_split(args: argparse.Namespace) -> int:
    from costmodel.report import fmt_time
    from graphs.serving.analysis.split import attention_ffn_split

    from .model_option import check_context, resolve_model

    check_context(args, args.ctx, "--ctx")
    r = attention_ffn_split(
        apply_dtypes(resolve_model(args.model, args), args),
        args.attention_device,
        args.ffn_device,
        batch=args.batch,
        ctx=args.ctx,
        link_bandwidth=args.link_bandwidth,
        hop_latency=args.hop_latency,
        allow_long_context=args.allow_long_context,
    )
    held = (
        f"the attention side holds {r.attention_bytes / 2**30:.2f} GiB (its weights, the KV cache of "
        f"{r.batch} x {r.ctx} tokens, activations): {r.attention_devices_to_hold} {r.attention_device}"
    )
    if r.attention_devices_to_hold > 1 and not args.ignore_capacity:
        # as every other command: no latency for a point that cannot run
        if args.json:
            from .common import dump

            # what the point holds, not the latencies of a point that cannot run
            latency = ("attention_s", "ffn_s", "transfers_s", "step_s")
            print(
                dump(
                    {
                        "refused": held + " needed",
                        **{k: v for k, v in r.to_dict().items() if k not in latency},
                    }
                )
            )
        else:
            print(
                f"{r.model}: {held} needed; no latency for a point that cannot run (--ignore-capacity prints it anyway)"
            )
        return 1
    text = (
        f"{r.model}: attention on {r.attention_device} {fmt_time(r.attention_s)}, FFN on "
        f"{r.ffn_device} {fmt_time(r.ffn_s)}, {r.transfers} transfers {fmt_time(r.transfers_s)} "
        f"-> step {fmt_time(r.step_s)}; FFN weights need {r.ffn_devices_to_hold_weights} device(s); "
        f"{held} needed"
    )
    if r.attention_devices_to_hold > 1:
        text = f"--ignore-capacity: the numbers below are for a point that cannot run\n{text}"
        json_warning(args, [f"{r.model}: {held} needed"])
    return emit(args, r.to_dict(), text)


def cmd_sram(args: argparse.Namespace) -> int:
    from graphs.serving.analysis.split import sram_residency

    from .model_option import resolve_model

    r = sram_residency(
        apply_dtypes(resolve_model(args.model, args), args), args.device, hop_latency=args.hop_latency
    )
    text = (
        f"{r.model} on {r.device}: {r.devices} devices hold {r.weights_bytes / 1e9:.1f} GB; a token "
        f"crosses {r.hops_per_step} hops: >= {r.hop_latency_floor_s * 1e6:.1f} us per step "
        f"(one hop per layer: {r.layer_hops_floor_s * 1e6:.1f} us); weight-read bound "
        f"{r.weight_read_bound_s * 1e6:.2f} us"
    )
    return emit(args, r.to_dict(), text)


def cmd_plans(args: argparse.Namespace) -> int:
    """``costmodel serve plans``: the options as a checked request, the plans compared
    (:func:`graphs.serving.present.serve_summaries.run_plans`), the table printed."""
    from graphs.serving.analysis.serve_requests import PlansRequest, parse_plans
    from graphs.serving.present.serve_summaries import run_plans

    from .cost_option import rates_of
    from .model_option import check_context, resolve_model

    check_context(args, args.ctx, "--ctx")
    req = PlansRequest(
        devices=tuple(args.device.split(",")),
        batches=tuple(int_list(args.batches, "--batches")),
        ctx=args.ctx,
        plans=parse_plans(args.plans),
        routing=routing_of(args),
        predict=args.predict,
    )
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    rates = rates_of(args, req.devices)
    report = run_plans(req, cfg, rates=rates, predictor=_predictor(args))
    keep(args, report=report)
    if args.json:  # the JSON is a list of rows: no place for the notes the text prints, said on stderr
        from costmodel.notes import say

        for note in report.notes():
            say(note)
    return emit(args, report.to_dict(), report.to_text())


def _add_long_context(p: argparse.ArgumentParser) -> None:
    """``--allow-long-context``: a context beyond the model's limit is refused unless this is given."""
    p.add_argument(
        "--allow-long-context",
        action="store_true",
        help="cost a context beyond the model's limit (max_position_embeddings) with a warning",
    )


def add_serve_parser(sub: Any) -> None:
    from .options import add_ignore_capacity

    s = sub.add_parser("serve", help="disaggregated, speculative, split and parallel serving plans")
    ssub = s.add_subparsers(dest="serve_command", required=True)
    d = ssub.add_parser("disagg", help="prefill on one device, decode on another, KV over a link")
    d.add_argument("model")
    add_dtype_options(d)
    d.add_argument("--prefill-device", default="b200", help="device type running prefill")
    d.add_argument("--decode-device", default="h200", help="device type running decode")
    d.add_argument("--prompt", type=int, default=8192, help="prompt length (tokens)")
    d.add_argument("--output", type=int, default=512, help="generated tokens per request")
    d.add_argument("--decode-batch", type=int, default=32, help="sequences per decode step")
    d.add_argument(
        "--link-bandwidth",
        type=float,
        default=50e9,
        help="KV link bandwidth per direction, bytes/s (50e9: a 400 Gb/s network)",
    )
    d.add_argument(
        "--link-latency",
        type=float,
        default=0.0,
        help="KV transfer latency per layer (s; default 0, as simulate --disagg and size take it)",
    )
    d.add_argument("--rate", type=float, default=None, help="requests per second, for pool sizing")
    d.add_argument(
        "--overlap",
        choices=("after", "layerwise"),
        default="after",
        help="KV transfer after the whole prefill, or layer by layer during it",
    )
    add_predict_option(d, help=_PREDICT_HELP)
    d.add_argument("--json", action="store_true")
    _add_long_context(d)
    add_ignore_capacity(d)
    add_cost_options(d)
    d.set_defaults(func=cmd_disagg, device_notes="model")
    add_html_option(d, "report")
    sp = ssub.add_parser("specdec", help="speculative decoding speed-up and best k")
    sp.add_argument("target", help="target model (catalog name or config.json)")
    sp.add_argument("draft", help="draft model (catalog name or config.json)")
    add_dtype_options(sp)
    sp.add_argument("--device", default="h100-sxm")
    sp.add_argument("--draft-device", default=None, help="device running the draft (none: the --device)")
    sp.add_argument(
        "--alpha", type=float, default=0.8, help="probability a drafted token is accepted, in [0, 1]"
    )
    sp.add_argument("--batch", type=int, default=1)
    sp.add_argument("--ctx", type=int, default=4096)
    sp.add_argument(
        "--k-max",
        type=int,
        default=DEFAULT_SPEC_K_MAX,
        help="largest number of drafted tokens per step to try",
    )
    add_predict_option(sp, help=_PREDICT_HELP)
    sp.add_argument("--json", action="store_true")
    _add_long_context(sp)
    add_ignore_capacity(sp)
    sp.set_defaults(func=cmd_specdec, device_notes="model")
    sl = ssub.add_parser("split", help="attention on one device type, FFN on another")
    sl.add_argument("model")
    add_dtype_options(sl)
    sl.add_argument("--attention-device", default="h200", help="device type running attention")
    sl.add_argument("--ffn-device", default="b200", help="device type running the FFN")
    sl.add_argument("--batch", type=int, default=32)
    sl.add_argument("--ctx", type=int, default=8192)
    sl.add_argument(
        "--link-bandwidth", type=float, default=450e9, help="link bandwidth per direction (bytes/s)"
    )
    sl.add_argument("--hop-latency", type=float, default=2e-6, help="latency per hop between devices (s)")
    sl.add_argument("--json", action="store_true")
    _add_long_context(sl)
    add_ignore_capacity(sl)
    sl.set_defaults(func=cmd_split, device_notes="model")
    sr = ssub.add_parser("sram", help="a model held in on-chip SRAM devices: count and hop-latency floor")
    sr.add_argument("model")
    add_dtype_options(sr)
    sr.add_argument("--device", default="groq-lpu")
    sr.add_argument("--hop-latency", type=float, default=1e-6, help="latency per hop between devices (s)")
    sr.add_argument("--json", action="store_true")
    sr.set_defaults(func=cmd_sram, device_notes="model")
    pl = ssub.add_parser("plans", help="tp x pp x ep x micro-batch plans and their frontier")
    pl.add_argument("model")
    add_dtype_options(pl)
    pl.add_argument("--device", default="h100-sxm", help="comma list")
    pl.add_argument("--batches", default="16,64", help="comma-separated batch sizes")
    pl.add_argument("--ctx", type=int, default=4096)
    pl.add_argument(
        "--plans",
        default="8x1x1x1,4x2x1x1,4x2x1x4,2x4x1x8",
        help="comma-separated TPxPPxEPxMICROBATCHES plans, e.g. 4x2x1x4",
    )
    add_predict_option(pl, help=_PREDICT_HELP)
    pl.add_argument("--json", action="store_true")
    _add_long_context(pl)
    add_cost_options(pl)
    add_routing_options(pl)
    pl.set_defaults(func=cmd_plans, device_notes="model")
    add_html_option(pl, "report")
