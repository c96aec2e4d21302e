"""``costmodel model ...``: catalog models, per-node analysis, closed forms.

A thin layer over :mod:`models` and :mod:`graphs` (imported here, never by
the engine core).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphs.serving.step.defaults import DEFAULT_SEQ

from .common import dump
from .html_option import add_html_option, keep
from .model_option import resolve_model
from .options import add_assume_family, add_dtype_options, apply_dtypes

__all__ = ["add_model_parser", "resolve_model"]


def cmd_model_list(args: argparse.Namespace) -> int:
    from costmodel.cost import as_float
    from costmodel.report import fmt_si, format_table
    from models import MODELS, get_model, param_counts

    rows = []
    for name, entry in MODELS.items():
        pc = param_counts(get_model(name))
        rows.append(
            {
                "model": name,
                "total": as_float(pc.total),
                "non_embedding": as_float(pc.non_embedding),
                "active": as_float(pc.active),
                "published_total": entry.published_total,
                "source": entry.source,
            }
        )
    if args.json:
        print(dump(rows))
        return 0
    for r in rows:
        r["published"] = fmt_si(float(str(r["published_total"]))) if r["published_total"] else "-"
    cols = (
        ("model", "model", "s"),
        ("total", "params", "si"),
        ("non_embedding", "non-embedding", "si"),
        ("active", "active/token", "si"),
        ("published", "published", "s"),
        ("source", "config source", "s"),
    )
    print(format_table(rows, cols))
    print(ACTIVE_NOTE)
    return 0


#: what ``model list``'s active column counts, said under the table
ACTIVE_NOTE = (
    "active/token: the parameters one token's forward touches, the input-embedding table counted "
    "whole, as Mistral (Mixtral-8x7B 12.9 B), Qwen (Qwen3-30B-A3B 3.3 B) and Meta (Llama-4-Scout 17 B) "
    "publish theirs; OpenAI's gpt-oss figures leave it out (5.1 B and 3.6 B: the column less its "
    "vocab x hidden), and a decode step reads only the rows in use"
)


def _config(args: argparse.Namespace) -> Any:
    return apply_dtypes(resolve_model(args.model, args), args)


#: ``model analyze``'s prompt length (prefill: every command's, DEFAULT_SEQ) and KV length (decode)
#: when not given
_ANALYZE_SEQ, _ANALYZE_CTX = DEFAULT_SEQ, 4096


def _analyze_point(args: argparse.Namespace) -> None:
    """Resolve ``model analyze``'s ``--seq`` and ``--ctx`` (in place): the phase's own one defaults
    (:data:`_ANALYZE_SEQ`, :data:`_ANALYZE_CTX`); the other phase's, when given, is refused by name
    (a review found ``--phase decode --seq 77777`` answered at the default context, the option
    ignored).

    Parameters
    ----------
    args : the command's parsed options (``phase``, ``seq``, ``ctx``; None: not given)

    Raises
    ------
    CostModelError
        When ``--seq`` is given with ``--phase decode`` or ``--ctx`` with ``--phase prefill``.
    """
    from costmodel.errors import CostModelError

    if args.phase == "decode" and args.seq is not None:
        raise CostModelError(
            f"--seq {args.seq} is a prefill's prompt length (--phase prefill); a decode step attends --ctx tokens"
        )
    if args.phase == "prefill" and args.ctx is not None:
        raise CostModelError(
            f"--ctx {args.ctx} is a decode's KV length (--phase decode); a prefill step reads a --seq-token prompt"
        )
    args.seq = _ANALYZE_SEQ if args.seq is None else args.seq
    args.ctx = _ANALYZE_CTX if args.ctx is None else args.ctx


def cmd_model_analyze(args: argparse.Namespace) -> int:
    """``costmodel model analyze``: one step's per-node roofline as a
    :class:`~graphs.serving.present.analysis_report.AnalysisReport` (from the cached analysis card
    when there is one; from the library with ``--predict`` or ``--html``), printed."""
    from graphs.serving.present.analysis_report import AnalysisReport
    from graphs.serving.present.step_prediction import predict_step_report

    from .cached import analysis, capacity
    from .ledger_view import json_warning, refuse_or_warn
    from .model_option import check_context
    from .predict_option import fp8_scales_of

    scales = fp8_scales_of(args)  # --fp8-scales without --predict: refused before any work
    _analyze_point(args)
    check_context(args, *((args.ctx, "--ctx") if args.phase == "decode" else (args.seq, "--seq")))
    point = {"batch": args.batch, "seq": args.seq, "ctx": args.ctx}
    cfg: Any = None
    card = None
    if args.predict or args.html:  # the page and the prediction need the config: the library's path
        from costmodel.hardware import get_device
        from costmodel.hardware.fallback import roof_notes
        from graphs import analyze

        cfg = _config(args)
        result = analyze(cfg, args.device, args.phase, tp=args.tp, **point)
        notes = roof_notes(get_device(args.device))
    else:  # the persistent cache's analysis card (no sympy when it is there)
        result, notes, card = analysis(args, _config)
    fit = capacity(args, _config, args.phase, card)
    refused = refuse_or_warn(args, fit)
    if refused is not None:
        return refused
    pred = None
    if args.predict:  # the step's prediction without its interval (the command never printed one)
        pred = predict_step_report(
            cfg,
            args.device,
            args.phase,
            tp=args.tp,
            framework=args.predict,
            fp8_scales=scales,
            interval=False,
            served=True,
            **point,
        )
    report = AnalysisReport(
        result, fit, tuple(notes), args.phase, **point, tp=args.tp, top=args.top, prediction=pred, config=cfg
    )
    keep(args, report=report)
    json_warning(args, [] if fit.fits else [fit.headline("--tp")])
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 0


def cmd_model_forms(args: argparse.Namespace) -> int:
    import sympy

    from graphs import closed_forms

    forms = closed_forms(resolve_model(args.model, args), args.phase)
    if args.json:
        print(dump({k: {"expr": str(v), "latex": sympy.latex(v)} for k, v in forms.items()}))
        return 0
    for k, v in forms.items():
        print(f"{k}:\n  {sympy.latex(v) if args.latex else v}")
    return 0


def cmd_model_check(args: argparse.Namespace) -> int:
    """``costmodel model check CONFIG``: :func:`graphs.serving.analysis.model_check.check_model`,
    printed as its :meth:`~graphs.serving.analysis.model_check.ModelCheck.to_text` (or ``--json``)."""
    from graphs.serving.analysis.model_check import check_model

    frameworks = tuple(args.framework) if args.framework else None
    r = check_model(args.model, assume_family=args.assume_family, device=args.device, frameworks=frameworks)
    print(dump(r.to_dict()) if args.json else r.to_text())
    if r.family is None:  # the report says why; the exit code and stderr say it is refused
        print(f"costmodel: error: refused: {r.refused or r.why}", file=sys.stderr)
        return 2
    return 0


def add_model_parser(sub: Any) -> None:
    from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS

    from .options import add_ignore_capacity

    m = sub.add_parser("model", help="catalog models, per-node analysis and closed forms")
    msub = m.add_subparsers(dest="model_command", required=True)
    ml = msub.add_parser("list", help="catalog models with parameter counts")
    ml.add_argument("--json", action="store_true")
    ml.set_defaults(func=cmd_model_list)
    ma = msub.add_parser("analyze", help="per-node roofline of one step of a model on a device")
    ma.add_argument("model", help="catalog name or path to a config.json")
    ma.add_argument("--device", default="h100-sxm")
    ma.add_argument(
        "--tp", type=int, default=1, help="tensor-parallel degree (rows are one device's share; default 1)"
    )
    ma.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    ma.add_argument("--batch", type=int, default=1)
    # None: not given (the other phase's option is refused; _analyze_point fills the defaults)
    ma.add_argument(
        "--seq", type=int, default=None, help=f"prompt length (--phase prefill only; default: {_ANALYZE_SEQ})"
    )
    ma.add_argument(
        "--ctx",
        type=int,
        default=None,
        help=f"KV length attended (--phase decode only; default: {_ANALYZE_CTX})",
    )
    add_dtype_options(ma)
    ma.add_argument("--top", type=int, default=0, help="show the N most expensive nodes only")
    ma.add_argument(
        "--allow-long-context",
        action="store_true",
        help="cost a context beyond the model's limit (max_position_embeddings) with a warning",
    )
    ma.add_argument(
        "--predict",
        choices=FRAMEWORKS,
        default=None,
        help="add each node's calibrated prediction for this framework's kernels ([measured] extra)",
    )
    ma.add_argument(
        "--fp8-scales",
        choices=FP8_SCALES,
        default=None,
        help="how FP8 activations are scaled, with --predict (see `costmodel decode --help`; default: dynamic)",
    )
    ma.add_argument("--json", action="store_true")
    add_ignore_capacity(ma)
    ma.set_defaults(func=cmd_model_analyze)
    add_html_option(ma, "analyze")
    mc = msub.add_parser(
        "check",
        help="what a config.json maps to: family, fields read and ignored, exact and approximated parts, "
        "--predict kernels",
        description="Which family reads CONFIG and why, every field read and ignored (recorded from the "
        "loader), what is exact and what approximated, which --predict kernels are measured, and for an "
        "unknown model_type the nearest family: the one reading the largest share of the config's "
        "structural fields (fields some family reads, with a value that is not null/false/0), as the "
        "Jaccard similarity of the field names (models.check). Exit code 0 when a family (or the "
        "layer file as given) reads the config; 2 when it is refused, --assume-family's family "
        "included: the report is printed all the same (with --json too) and the reason is one "
        "line on stderr.",
    )
    mc.add_argument("model", help="catalog name or path to a config.json")
    add_assume_family(mc)
    mc.add_argument("--device", default="h100-sxm", help="device the --predict kernel coverage is priced on")
    mc.add_argument(
        "--framework",
        action="append",
        choices=FRAMEWORKS,
        default=None,
        help="corpus framework whose kernels to check (repeatable; default: all)",
    )
    mc.add_argument("--json", action="store_true")
    mc.set_defaults(func=cmd_model_check, says_assumption=True)  # its why line says it; a misfit reported
    mf = msub.add_parser("forms", help="closed forms of a phase from the symbolic graph")
    mf.add_argument("model")
    add_assume_family(mf)
    mf.add_argument("--phase", choices=("prefill", "decode"), default="decode")
    mf.add_argument("--latex", action="store_true", help="print the closed forms as LaTeX")
    mf.add_argument("--json", action="store_true")
    mf.set_defaults(func=cmd_model_forms)
