"""``costmodel ledger | prefill | decode | sweep``: serving questions from the shell.

Thin layers over :mod:`costmodel.ledger` and :mod:`graphs` (capacity,
serving, sweep), imported lazily so the core stays independent.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from graphs.serving.step.defaults import DEFAULT_SEQ

from .common import dump, progress_bar
from .html_option import add_html_option, keep
from .ledger_view import capacity_verdict, json_warning, print_fits, print_kv_split, print_terms
from .model_option import check_context, resolve_config
from .options import CSV_SUFFIXES, HELP, add_dtype_options, check_output_path, dtype_list, int_list, number

if TYPE_CHECKING:
    from costmodel.ledger import Overhead

__all__ = ["add_phase_parsers", "decode_result", "prefill_result", "request_of"]


#: what ``--overhead`` is under each ``--overhead-policy``, and the range it takes
_OVERHEAD_MEANS = {
    "fraction_of_sum": ("[0, 1)", "the overhead as a share of weights + KV + activations, e.g. 0.3"),
    "fraction_of_total": ("(0, 1]", "the share of the device the engine may use (vLLM's gpu_memory_utilization, e.g. 0.9)"),
    "fraction_of_free": (
        "(0, 1]",
        "the share of the memory left after weights and activations the KV cache may take "
        "(TensorRT-LLM's kv_cache_free_gpu_memory_fraction, e.g. 0.9)",
    ),
}


def _overhead(args: argparse.Namespace) -> Overhead:
    """``--overhead-policy`` with ``--overhead``; a fraction out of the policy's range is refused in
    the command's words (``--overhead`` defaults to 0, which only ``fraction_of_sum`` takes).

    Parameters
    ----------
    args : the ledger's parsed options

    Returns
    -------
    Overhead
    """
    from costmodel.errors import CostModelError, InvalidDimensionError
    from costmodel.ledger import Overhead

    f = number(args.overhead, "--overhead", allow_zero=True)
    try:
        return Overhead(args.overhead_policy, f)
    except InvalidDimensionError:
        allowed, means = _OVERHEAD_MEANS[args.overhead_policy]
        zero = " (--overhead defaults to 0, which only fraction_of_sum takes)" if f == 0 else ""
        raise CostModelError(
            f"--overhead-policy {args.overhead_policy} needs --overhead F in {allowed}, {means}; "
            f"got --overhead {args.overhead}{zero}"
        ) from None


#: what ``ledger`` reads of a model, which a ledger without one (raw mode) has no use for
_MODEL_ONLY = (
    ("--weight-dtype", "weight_dtype", None),
    ("--kv-dtype", "kv_dtype", None),
    ("--matmul-dtype", "matmul_dtype", None),
    ("--device", "device", None),
    ("--tp", "tp", None),
    ("--allow-long-context", "allow_long_context", False),
)
_LEDGER_DEVICE, _LEDGER_TP = "h100-sxm", 1


def _refuse_model_options(args: argparse.Namespace) -> None:
    """Raw mode (no model): an option that only a model's ledger reads is refused, naming it, as a
    raw flag beside a model is (a review found ``--weight-dtype int4`` accepted and ignored)."""
    from costmodel.errors import CostModelError

    for flag, dest, unset in _MODEL_ONLY:
        if getattr(args, dest, unset) != unset:
            raise CostModelError(
                f"{flag} is for a ledger of a model; without one (raw mode) the terms are --weights-bytes, "
                "--kv-bytes-per-token and --capacity-bytes as given (per device)"
            )


def cmd_ledger(args: argparse.Namespace) -> int:
    if args.model is None:
        _refuse_model_options(args)
        _ledger_point(args)
        return _ledger_raw(args)
    args.device = _LEDGER_DEVICE if args.device is None else args.device
    args.tp = _LEDGER_TP if args.tp is None else args.tp
    raw = [
        f
        for f, v in (
            ("--weights-bytes", args.weights_bytes),
            ("--kv-bytes-per-token", args.kv_bytes_per_token),
            ("--capacity-bytes", args.capacity_bytes),
            ("--batches", args.batches),
        )
        if v is not None
    ]
    if raw:
        from costmodel.errors import CostModelError

        raise CostModelError(f"{raw[0]} is for a ledger without a model (raw mode); the model gives its own")
    from .cached import default_overhead, ledger_report

    if not default_overhead(args):
        _overhead(args)  # flag errors first, then the model's limit
    _ledger_point(args)
    if args.phase == "prefill":
        check_context(args, args.ctx, "--ctx")
    else:
        check_context(args, args.ctx, "--ctx")
    rep = ledger_report(args, resolve_config)  # the decode card says the device's own notes
    if rep is None:
        from costmodel.hardware import get_device
        from costmodel.hardware.fallback import roof_notes
        from costmodel.notes import say

        for note in roof_notes(get_device(args.device), used=()):  # a series, preliminary figures
            say(note)
        rep = _library_ledger(args)
    code = 0 if rep.fits else 1  # README: exit 1 is "does not fit"
    if args.json:
        print(dump(rep.to_dict()))
        return code
    prompt = f", a {args.seq:,}-token prompt" if args.phase == "prefill" else ""
    print(
        f"{rep.model} on {rep.device} (tp={args.tp}): batch {args.batch}, ctx {args.ctx}{prompt}, {args.phase}"
    )
    print_terms(rep.terms, rep.capacity_bytes)
    print_kv_split(rep)
    print_fits(rep.max_batch, "batch", f"ctx {args.ctx}")
    # prefill: the cache grows beside a prompt of --seq tokens (prefill's own max context grows the prompt)
    if prompt and rep.max_context.value == 0:
        _prompt_does_not_fit(args, rep)
    else:
        print_fits(rep.max_context, "context" if not prompt else "cached context", f"batch {args.batch}{prompt}")
    if rep.model_limit is not None and rep.max_context.value > rep.model_limit:
        print(f"    (memory allows it; the model itself stops at {rep.model_limit} tokens)")
    return code


def _prompt_does_not_fit(args: argparse.Namespace, rep: Any) -> None:
    """A prefill whose prompt alone does not fit at ``--batch``: no cached context does (the cache
    holds at least the prompt; :func:`graphs.serving.step.ledger_fit.capacity` gives 0 and the
    terms at ``ctx = seq``), and what fits instead: the max batch printed above, or none."""
    from costmodel.ledger_solve import GIB

    fit, most = rep.max_context, rep.max_batch.value
    if most:
        instead = f"at most batch {most} fits at ctx {args.ctx}"
    elif fit.overflowing_term == "weights":
        instead = "no batch fits it: the weights alone need more devices (--tp)"
    else:
        instead = "no batch fits it: a shorter prompt or more devices"
    print(
        f"  max cached context at batch {args.batch}, a {args.seq:,}-token prompt: none: the cache holds at "
        f"least the prompt, and at ctx {args.seq:,} the ledger is {fit.shortfall_bytes / GIB:.2f} GiB over the "
        f"device ({fit.overflowing_term} is what does not fit); {instead}"
    )


def _ledger_point(args: argparse.Namespace) -> None:
    """Resolve ``ledger``'s ``--ctx`` and ``--seq`` (in place): decode holds ``--ctx`` (default
    4096) cached tokens a sequence and takes no ``--seq``; prefill's prompt is ``--seq`` (default
    ``--ctx``, else :data:`~graphs.serving.step.defaults.DEFAULT_SEQ`) and its cache holds at least the prompt (``--ctx`` defaults to it)."""
    from costmodel.errors import CostModelError

    if args.phase == "decode":
        if args.seq is not None:
            raise CostModelError("--seq is a prefill's prompt (--phase prefill); a decode's cache is --ctx")
        args.ctx = 4096 if args.ctx is None else args.ctx
        return
    args.seq = args.seq if args.seq is not None else (args.ctx if args.ctx is not None else DEFAULT_SEQ)
    args.ctx = args.seq if args.ctx is None else args.ctx
    if type(args.seq) is int and type(args.ctx) is int and args.ctx < args.seq:
        raise CostModelError(
            f"--ctx {args.ctx} is below --seq {args.seq}: a prefill's cache holds at least its prompt's tokens"
        )


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
    rows: list[dict[str, Any]] = []
    for b in int_list(args.batches or str(args.batch), "--batches"):
        t = {
            k: float(v)
            for k, v in led.terms(batch=b, cached_tokens=args.ctx, active_tokens=active * b, capacity=cap)
            .as_dict()
            .items()
        }
        # bytes under the keys of a model ledger's "terms", as every ledger's JSON gives them
        rows.append({"batch": b, **t, "fits": bool(t["total"] <= cap)})
    fit_b = max_batch(led, cap, ctx=args.ctx, active_per_sequence=active)
    fit_c = max_context(led, cap, batch=args.batch, active_per_sequence=active)
    # README: exit 1 is "does not fit": no batch asked for fits (a table that runs into OOM is fine)
    code = 0 if any(r["fits"] for r in rows) else 1
    if args.json:
        limits = {"max_batch": fit_b.to_dict(), "max_context": fit_c.to_dict()}
        print(dump({"capacity_bytes": float(cap), "rows": rows, **limits}))
        return code
    table = [
        {**{k: v / GIB if k in t else v for k, v in r.items()}, "fits": "yes" if r["fits"] else "OOM"}
        for r in rows
    ]
    cols = (
        ("batch", "batch", "s"),
        ("weights", "weights GiB", ".2f"),
        ("kv_cache", "KV GiB", ".2f"),
        ("activations", "act GiB", ".2f"),
        ("overhead", "overhead GiB", ".2f"),
        ("total", "total GiB", ".2f"),
        ("fits", "fits", "s"),
    )
    print(format_table(table, cols))
    print_fits(fit_b, "batch", f"ctx {args.ctx}")
    return code


def _expert_plan(args: argparse.Namespace) -> dict[str, Any]:
    """``ep`` and the routing of a routed step, for its JSON (nothing for the default step)."""
    from .routing_option import routed, routing_of

    return {"ep": args.ep, "routing": routing_of(args).label} if routed(args) else {}


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


def prefill_result(args: argparse.Namespace) -> tuple[int, str | None, dict[str, Any] | None]:
    """``prefill``'s exit code, text and ``--json`` document, unprinted (the summary is kept for
    ``--html``): the step's :class:`~graphs.serving.present.phase_summary.PrefillSummary`, or the
    capacity verdict of a point that does not fit."""
    from graphs.serving.present.phase_summary import PrefillSummary

    from .cached import capacity, prefill_report

    check_context(args, args.seq, "--seq")
    req = request_of(args, "prefill")  # a bad --chunk or routing is the user's error, before the verdict
    fit = capacity(args, resolve_config, "prefill")
    refused, head, doc = capacity_verdict(args, fit)
    if refused is not None:
        return refused, _refused_text(args, head), doc
    summary = PrefillSummary(req, prefill_report(args, resolve_config), fit, _expert_plan(args))
    keep(args, summary=summary)
    json_warning(args, [] if fit.fits else [fit.headline("--tp")])
    return 0, _headed(head, summary.to_text()), summary.to_dict()


def decode_result(args: argparse.Namespace) -> tuple[int, str | None, dict[str, Any] | None]:
    """``decode``'s exit code, text and ``--json`` document, unprinted (the summary is kept for
    ``--html``): the step's :class:`~graphs.serving.present.phase_summary.DecodeSummary`, or the
    capacity verdict of a point that does not fit."""
    from graphs.serving.present.phase_summary import DecodeSummary

    from .cached import capacity, decode_reports, kv_caps

    check_context(args, args.ctx, "--ctx")
    req = request_of(args, "decode")  # a bad routing is the user's error, before the verdict
    fit = capacity(args, resolve_config, "decode")
    refused, head, doc = capacity_verdict(args, fit)
    if refused is not None:
        return refused, _refused_text(args, head), doc
    rep, lim, nf = decode_reports(args, resolve_config, max_batch=fit.max_batch)
    caps = {} if args.json else kv_caps(args, resolve_config)  # the text's cache line reads them
    summary = DecodeSummary(req, rep, fit, nf, lim, caps, _expert_plan(args))
    keep(args, summary=summary)
    json_warning(args, [] if fit.fits else [fit.headline("--tp")])
    return 0, _headed(head, summary.to_text()), summary.to_dict()


def _headed(head: str | None, text: str) -> str:
    """``--ignore-capacity``'s verdict line, when the point does not fit, above the step's text."""
    return text if head is None else f"{head}\n{text}"


def _refused_text(args: argparse.Namespace, verdict: str | None) -> str | None:
    """A refused point's verdict and what the memory check leaves out of a routed step (the
    ``--json`` document holds the verdict alone)."""
    from graphs.serving.present.phase_summary import expert_plan_line

    if verdict is None:
        return None
    line = expert_plan_line(_expert_plan(args), "--ignore-capacity costs the step anyway", refused=True)
    return verdict if line is None else f"{verdict}\n{line}"


def _print_result(result: tuple[int, str | None, dict[str, Any] | None], args: argparse.Namespace) -> int:
    rc, text, doc = result
    print(dump(doc) if args.json else text)
    return rc


def cmd_prefill(args: argparse.Namespace) -> int:
    return _print_result(prefill_result(args), args)


def cmd_decode(args: argparse.Namespace) -> int:
    return _print_result(decode_result(args), args)


def cmd_sweep(args: argparse.Namespace) -> int:
    """``costmodel sweep``: the options as a checked request, its grid evaluated
    (:func:`graphs.serving.present.sweep_summary.run_sweep`: with ``--predict`` priced per kernel,
    else over the cached decode forms), the frontier printed."""
    from graphs.serving.analysis.sweep_request import SweepRequest
    from graphs.serving.present.sweep_summary import run_sweep

    from .cached import sweep_forms as cached_forms

    _refuse_both_dtypes(args)
    if args.csv:
        check_output_path(args.csv, "--csv", suffixes=CSV_SUFFIXES)  # before the work, not after it
    check_context(args, max(int_list(args.ctxs, "--ctxs")), "--ctxs")  # the longest, before any work
    req = SweepRequest(
        devices=tuple(args.device.split(",")),
        batches=tuple(int_list(args.batches, "--batches")),
        ctxs=tuple(int_list(args.ctxs, "--ctxs")),
        weight_dtypes=tuple(dtype_list(args.weight_dtypes, "--weight-dtypes")),
        kv_dtypes=tuple(dtype_list(args.kv_dtypes, "--kv-dtypes")),
        tp=args.tp,
        top=args.top,
        predict=args.predict,
    )  # a grid too large is refused here, before any work
    progress = progress_bar("sweep", args.quiet)
    if args.predict:  # priced per kernel: not the cached bound forms
        from .predict_option import predictor_of

        report = run_sweep(req, resolve_config(args), predictor=predictor_of(args), progress=progress)
    else:
        report = run_sweep(req, forms=cached_forms(args, resolve_config, req.combos()), progress=progress)
    keep(args, report=report)
    if args.csv:
        report.result.to_csv(args.csv, "--csv")
    print(dump(report.to_dict()) if args.json else report.to_text())
    if args.csv and not args.json:
        print(f"all points written to {args.csv}")
    return 0


def _refuse_both_dtypes(args: argparse.Namespace) -> None:
    """``sweep`` takes the model's dtype (``--weight-dtype``, ``--kv-dtype``) and the lists it
    sweeps (``--weight-dtypes``, ``--kv-dtypes``); each list replaces the model's dtype at every
    point, so a singular flag given beside its list was dropped without a word
    (``--weight-dtypes bf16,fp8 --weight-dtype int4`` swept no int4 point): refused, one line."""
    from costmodel.errors import CostModelError

    for one, many in (("weight_dtype", "weight_dtypes"), ("kv_dtype", "kv_dtypes")):
        a, b = getattr(args, one, None), getattr(args, many, None)
        if a and b:
            flag, flags = "--" + one.replace("_", "-"), "--" + many.replace("_", "-")
            raise CostModelError(
                f"{flag} {a[:100]!r} and {flags} {b[:200]!r} both given: {flags} replaces the model's "
                f"dtype at every point, so {flag} would be ignored; give one (a one-element {flags})"
            )


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
    # unset (None) until a model's ledger fills them in: raw mode refuses them when given
    for action in lg._actions:
        if action.dest in ("device", "tp"):
            shown = _LEDGER_DEVICE if action.dest == "device" else _LEDGER_TP
            action.default = None
            action.help = f"{action.help or HELP[action.dest]} (default: {shown}; a model's ledger only)"
    lg.add_argument("--batch", type=int, default=1)
    lg.add_argument("--batches", default=None, help="raw mode: list, e.g. 1,8,16,24,32")
    lg.add_argument(
        "--ctx", type=int, default=None, help="cached tokens a sequence (prefill: at least --seq, its default) (default: 4096)"
    )
    lg.add_argument(
        "--seq",
        type=int,
        default=None,
        help=f"prefill prompt length (--phase prefill; default: --ctx, else {DEFAULT_SEQ})",
    )
    lg.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    lg.add_argument(
        "--overhead-policy",
        default="fraction_of_sum",
        choices=("fraction_of_sum", "fraction_of_total", "fraction_of_free"),
        help="what --overhead is: "
        + "; ".join(f"{policy} {allowed}: {means}" for policy, (allowed, means) in _OVERHEAD_MEANS.items())
        + " (default: fraction_of_sum)",
    )
    lg.add_argument(
        "--overhead",
        default="0",
        help="the policy's fraction (see --overhead-policy; default: 0, which only fraction_of_sum takes)",
    )
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
    pf.add_argument("--seq", type=int, default=DEFAULT_SEQ)
    pf.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="chunked prefill: tokens per chunk (none: the whole prompt at once)",
    )
    add_expert_options(pf)
    add_predict_option(pf)
    add_ignore_capacity(pf)
    pf.set_defaults(func=with_prediction(prefill_result, "prefill"))
    add_html_option(pf, "prefill")

    dc = sub.add_parser("decode", help="TPOT bound, weight/KV/compute times, knee batch, ctx ceiling, energy")
    common(dc)
    dc.add_argument("--batch", type=int, default=1)
    dc.add_argument("--ctx", type=int, default=4096)
    add_expert_options(dc)
    add_predict_option(dc)
    add_ignore_capacity(dc)
    dc.set_defaults(func=with_prediction(decode_result, "decode"))
    add_html_option(dc, "decode")

    sw = sub.add_parser("sweep", help="batch x ctx (x devices x dtypes) decode sweep and Pareto frontier")
    common(sw)
    # sweep's --device is a list, as its points are (the other phases take one device)
    sw._option_string_actions["--device"].help = (
        "comma list of catalog devices or aliases (see `costmodel hw list`), or ones from --hw-file"
    )
    sw.add_argument("--batches", default="1:1024:2", help="list or start:stop:factor")
    sw.add_argument(
        "--ctxs", default="1024,4096,16384,65536", help="comma-separated KV lengths to sweep (tokens)"
    )
    sw.add_argument("--weight-dtypes", default=None, help="comma list, e.g. bf16,int4")
    sw.add_argument("--kv-dtypes", default=None, help="comma list, e.g. bf16,fp8")
    sw.add_argument("--csv", default=None, help="write every point to this CSV file")
    sw.add_argument(
        "--top",
        type=int,
        default=20,  # as search's: one frontier per context can hold thousands of points
        help="frontier rows to print (0: all): the two ends and an even spread between them",
    )
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    add_predict_option(
        sw, help="price every step's kernels from this framework's measured kernels ([measured] extra)"
    )
    sw.set_defaults(func=cmd_sweep, device_notes="model")
    add_html_option(sw, "report")
