"""``costmodel hw compare|claim`` and ``costmodel serve disagg|specdec|split|sram|plans``.

Every ``serve`` command takes ``--weight-dtype/--kv-dtype/--matmul-dtype``
(:func:`graphs.cli.options.add_dtype_options`); ``specdec`` applies them to
the target and the draft alike.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .common import emit
from .cost_option import add_cost_options
from .options import add_dtype_options, apply_dtypes, int_list
from .predict_option import add_predict_option
from .routing_option import add_routing_options, routing_of

__all__ = ["add_serve_parser"]

_PREDICT_HELP = "price every step's kernels from this framework's measured kernels ([measured] extra)"


def cmd_disagg(args: argparse.Namespace) -> int:
    from costmodel.report import fmt_time
    from graphs.serving.analysis.disagg import disaggregated, kv_transfer_range

    from .model_option import resolve_model

    cfg = apply_dtypes(resolve_model(args.model, args), args)
    r = disaggregated(
        cfg,
        args.prefill_device,
        args.decode_device,
        prompt=args.prompt,
        output=args.output,
        decode_batch=args.decode_batch,
        link_bandwidth=args.link_bandwidth,
        link_latency=args.link_latency,
        rate=args.rate,
        overlap=args.overlap,
        predictor=_predictor(args),
    )
    refused = _refuse(args, {"decode": r.decode_capacity, "prefill": r.prefill_capacity})
    if refused is not None:
        return refused
    span = kv_transfer_range(
        cfg,
        args.prefill_device,
        args.decode_device,
        link_bandwidth=args.link_bandwidth,
        link_latency=args.link_latency,
        decode_batch=args.decode_batch,
        overlap=args.overlap,
        predictor=_predictor(args),
    )
    t = r.ttft
    lines = [
        f"{r.model}: prefill on {r.prefill_device}, decode on {r.decode_device} "
        f"(prompt {r.prompt}, output {r.output}, decode batch {r.decode_batch})",
        f"  TTFT {fmt_time(t.ttft_s)} = prefill {t.prefill_s * 1e3:.2f} + KV transfer "
        f"{t.kv_transfer_s * 1e3:.2f} ({100 * t.kv_share_of_ttft:.1f}%) + first decode "
        f"{t.first_decode_s * 1e3:.2f} (transfer {r.overlap.value})",
        f"  TPOT {fmt_time(r.tpot_s)}; decode fits: {r.decode_fits} (max batch {r.decode_max_batch})",
        _kv_sentence(span),
    ]
    c = r.colocated
    if r.rate is not None and c is not None:
        lines.append(
            f"  at {r.rate} req/s: {r.prefill_devices} prefill + {r.decode_devices} decode devices, "
            + (
                f"{r.energy_per_token_j:.3f} J/output token, "
                if r.energy_per_token_j is not None
                else "energy not priced (a device without a TDP figure), "
            )
            + f"{r.device_hours_per_million_tokens:.3f} "
            "device-h per M output tokens"
        )
        lines.append(
            f"  colocated on {c.devices} {r.decode_device}: TPOT {fmt_time(c.tpot_s)} "
            f"(prefill takes {100 * c.prefill_share:.0f}% of each device), TTFT {fmt_time(c.ttft_s)}"
        )
    from graphs.serving.planning.cost import decode_cost, disagg_cost, prefill_cost

    from .cost_option import cost_text, rates_of

    rates = rates_of(args, [args.prefill_device, args.decode_device])
    pf_rates, dec_rates = rates[args.prefill_device], rates[args.decode_device]
    cost: Any = None
    if r.rate is not None:  # every device of both pools, over the tokens the rate brings
        cost = disagg_cost(r, pf_rates, dec_rates)
        lines.append(f"  {cost_text(cost)}")
    else:  # no pools sized: each device alone, 100 % busy
        cost = {
            "prefill": prefill_cost(pf_rates, devices=1, prompt=r.prompt, prefill_s=t.prefill_s),
            "decode": decode_cost(dec_rates, devices=1, batch=r.decode_batch, tpot_s=r.tpot_s),
        }
        lines += [f"  {pool} device: {cost_text(c)}" for pool, c in cost.items()]
        lines.append("  (--rate sizes both pools and prices every device of them)")
    lines += _predicted(args, cfg, args.decode_device, r.decode_batch, r.prompt + r.output // 2 + 1)
    data = {
        **r.to_dict(),
        "kv_transfer_dominates_from_prompt": span[0] if span else None,
        "kv_transfer_dominates_to_prompt": span[1] if span else None,
        "cost": cost,
    }
    return emit(args, data, "\n".join(lines))


def _kv_sentence(span: tuple[int, int] | None) -> str:
    """Where the KV transfer is the largest TTFT term, as :func:`kv_transfer_range` found it."""
    checked = 1 << 20  # kv_transfer_range's max_prompt
    if span is None:
        return f"  the KV transfer is never the largest TTFT term (prompts up to {checked:,} tokens checked)"
    first, last = span
    upto = "the longest checked" if last >= checked else "past that, the prefill is larger"
    return f"  the KV transfer is the largest TTFT term for prompts of {first:,} to {last:,} tokens ({upto})"


def _predictor(args: argparse.Namespace) -> Any:
    from .predict_option import predictor_of

    return predictor_of(args)


def _predicted(args: argparse.Namespace, cfg: Any, device: str, batch: int, ctx: int) -> list[str]:
    """With ``--predict``: what priced the steps, and what the decode step at ``(batch, ctx)``
    rests on (the coverage line simulate prints)."""
    if not getattr(args, "predict", None):
        return []
    from graphs.serving.pricing.priced import priced_step
    from graphs.serving.pricing.protocols import MeteredPointStep

    from .predicted import predicted_lines

    step = priced_step(cfg, device, "decode", predictor=_predictor(args))
    assert isinstance(step, MeteredPointStep)  # a predictor that is not the bound meters its seconds
    cov = step.coverage_array(batch, ctx)
    return predicted_lines(
        args.predict, device, cov, what=f"every step's kernels (coverage: decode at batch {batch}, ctx {ctx})"
    )


def _refuse(args: argparse.Namespace, checks: dict[str, Any]) -> int | None:
    """Points that do not fit their device's memory: exit 1 naming each (``--json``: the
    verdicts), or with ``--ignore-capacity`` the verdicts as first lines and None (go on)."""
    from .common import dump

    bad = {k: c for k, c in checks.items() if c is not None and not c.fits}
    if not bad:
        return None
    heads = [f"{k}: {c.headline(None)}" for k, c in bad.items()]
    if args.ignore_capacity:
        if not args.json:
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

    from .model_option import resolve_model

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
    text += f"\nbest k = {r.best_k} -> {r.best_speedup:.2f}x; S = {r.closed_form}  (gamma = k)"
    text += "".join("\n" + x for x in _predicted(args, target, args.device, args.batch, args.ctx))
    return emit(args, r.to_dict(), text)


def cmd_split(args: argparse.Namespace) -> int:
    from costmodel.report import fmt_time
    from graphs.serving.analysis.split import attention_ffn_split

    from .model_option import resolve_model

    r = attention_ffn_split(
        apply_dtypes(resolve_model(args.model, args), args),
        args.attention_device,
        args.ffn_device,
        batch=args.batch,
        ctx=args.ctx,
        link_bandwidth=args.link_bandwidth,
        hop_latency=args.hop_latency,
    )
    text = (
        f"{r.model}: attention on {r.attention_device} {fmt_time(r.attention_s)}, FFN on "
        f"{r.ffn_device} {fmt_time(r.ffn_s)}, {r.transfers} transfers {fmt_time(r.transfers_s)} "
        f"-> step {fmt_time(r.step_s)}; FFN weights need {r.ffn_devices_to_hold_weights} device(s)"
    )
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
    from costmodel.errors import CostModelError
    from costmodel.report import format_table
    from graphs.serving.analysis.parallel import plan_frontier

    from .model_option import resolve_model

    plans: list[tuple[int, int, int, int]] = []
    for p in args.plans.split(","):
        parts = p.split("x")
        if len(parts) != 4 or not all(x.strip().isdigit() for x in parts):
            raise CostModelError(f"--plans: {p!r} is not TPxPPxEPxMICROBATCHES, e.g. 4x2x1x4")
        plans.append((int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    routing = routing_of(args)
    grid: dict[str, Any] = dict(batches=int_list(args.batches, "--batches"), ctx=args.ctx, plans=plans)
    cfg = apply_dtypes(resolve_model(args.model, args), args)
    points = plan_frontier(cfg, args.device.split(","), routing=routing, predictor=_predictor(args), **grid)
    balanced: dict[tuple[str, str, int], float] = {}
    if routing.kind != "uniform" or not routing.is_default:  # the same plans, uniform: what skew costs
        for pt in plan_frontier(cfg, args.device.split(","), predictor=_predictor(args), **grid):
            if pt.report is not None:
                balanced[(pt.device, pt.plan, pt.batch)] = pt.report.step_s
    from graphs.serving.planning.cost import decode_cost

    from .cost_option import rates_of

    rates = rates_of(args, sorted({pt.device for pt in points}))

    def usd_out(rep: Any) -> float:
        """USD per million output tokens, the plan 100 % busy decoding at its batch
        (:func:`graphs.serving.planning.cost.decode_cost`; nan without a price: JSON null, and a note below)."""
        c = decode_cost(rates[rep.device], devices=rep.devices, batch=rep.batch, tpot_s=rep.step_s)
        return c.usd_per_m_output if c is not None and c.usd_per_m_output is not None else float("nan")

    rows = [
        {
            **pt.report.to_dict(),
            "usd_per_m_output": usd_out(pt.report),
            **(
                {"x_balanced": pt.report.step_s / balanced[(pt.device, pt.plan, pt.batch)]}
                if balanced
                else {}
            ),
            # nan without a TDP (JSON null, and a note below), as the cost without a price
            "energy_per_token_j": float("nan") if pt.energy_per_token_j is None else pt.energy_per_token_j,
            "pareto": pt.pareto,
            "front": "*" if pt.pareto else "",
        }
        for pt in points
        if pt.report is not None
    ]
    text = format_table(
        rows,
        (
            ("device", "device", "s"),
            ("plan", "plan", "s"),
            ("batch", "batch", "s"),
            ("devices", "devices", "s"),
            ("tokens_per_s_per_user", "tok/s/user", ".1f"),
            ("tokens_per_s_per_device", "tok/s/device", ".1f"),
            ("energy_per_token_j", "J/token", ".3f"),
            ("device_hours_per_million_tokens", "dev-h/M tok", ".3f"),
            ("usd_per_m_output", "$/M out 100% busy", ".4g"),
            *((("x_balanced", "x balanced", ".3f"),) if balanced else ()),
            ("front", "frontier", "s"),
        ),
    )
    if balanced:
        text += (
            f"\n  routing {routing.label}: step of the busiest EP rank; 'x balanced' is the step over the same "
            "plan with uniform routing (its busiest rank too: above the mean at a finite batch)"
            + ("; replicas' extra weights are not in the memory check" if routing.replicate else "")
        )
    from graphs.serving.planning.cost import NO_PRICE

    for dev in sorted({r.device for r in rates.values() if r.price_usd_per_hour is None}):
        text += f"\n  $/M out for {dev}: {NO_PRICE}"
    for dev in sorted({r["device"] for r in rows if math.isnan(r["energy_per_token_j"])}):
        text += f"\n  J/token for {dev}: no power figure (TDP) in the catalog"
    errors = [pt for pt in points if pt.error is not None]
    for pt in errors:
        text += f"\n  skipped {pt.device} {pt.plan} batch {pt.batch}: {pt.error}"
    if args.predict:
        from .predicted import predicted_lines

        text += "\n" + "\n".join(
            predicted_lines(args.predict, args.device, None, what="every plan's decode kernels")
        )
    data = rows + [
        {"device": pt.device, "plan": pt.plan, "batch": pt.batch, "error": pt.error} for pt in errors
    ]
    return emit(args, data, text)


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
    d.add_argument("--link-latency", type=float, default=5e-6, help="seconds per message")
    d.add_argument("--rate", type=float, default=None, help="requests per second, for pool sizing")
    d.add_argument(
        "--overlap",
        choices=("after", "layerwise"),
        default="after",
        help="KV transfer after the whole prefill, or layer by layer during it",
    )
    add_predict_option(d, help=_PREDICT_HELP)
    d.add_argument("--json", action="store_true")
    add_ignore_capacity(d)
    add_cost_options(d)
    d.set_defaults(func=cmd_disagg)
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
    sp.add_argument("--k-max", type=int, default=12, help="largest number of drafted tokens per step to try")
    add_predict_option(sp, help=_PREDICT_HELP)
    sp.add_argument("--json", action="store_true")
    add_ignore_capacity(sp)
    sp.set_defaults(func=cmd_specdec)
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
    sl.set_defaults(func=cmd_split)
    sr = ssub.add_parser("sram", help="a model held in on-chip SRAM devices: count and hop-latency floor")
    sr.add_argument("model")
    add_dtype_options(sr)
    sr.add_argument("--device", default="groq-lpu")
    sr.add_argument("--hop-latency", type=float, default=1e-6, help="latency per hop between devices (s)")
    sr.add_argument("--json", action="store_true")
    sr.set_defaults(func=cmd_sram)
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
    add_cost_options(pl)
    add_routing_options(pl)
    pl.set_defaults(func=cmd_plans)
