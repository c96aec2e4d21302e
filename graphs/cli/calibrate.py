"""``costmodel calibrate gpu | report | serving`` and ``--predict``/``--predict-file`` on
decode/prefill (and simulate).

Thin layers over :mod:`costmodel.measured` (the measured corpus, optional
extra ``[measured]``), :func:`graphs.serving.pricing.predict.predict_step` and
:func:`graphs.serving.planning.serving_fit.fit_serving`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from costmodel.measured.corpus import FRAMEWORKS  # stdlib only: --help stays light

from .common import dump, progress_bar
from .engine_option import add_engine_options
from .options import check_output_path
from .predict_option import add_predict_option, fp8_scales_of

__all__ = ["add_calibrate_parser", "measured_devices"]


def _say(quiet: bool) -> Callable[[str], None]:
    def say(msg: str) -> None:
        if not quiet:
            sys.stderr.write(f"  {msg}\n")
            sys.stderr.flush()

    return say


def cmd_calibrate_gpu(args: argparse.Namespace) -> int:
    from costmodel.hardware import get_device
    from costmodel.measured.report import calibrated_spec
    from costmodel.outfiles import atomic_write

    check_output_path(args.out, "--out", suffixes=HW_FILE_SUFFIXES)
    hw = get_device(args.device)
    spec = calibrated_spec(hw.name, args.framework, name=args.name)
    with atomic_write(args.out, "--out", suffixes=HW_FILE_SUFFIXES) as f:  # never through a link
        json.dump(spec, f, indent=2)
    name = next(iter(spec["devices"]))
    if args.json:
        print(dump({"file": args.out, "device": name, "spec": spec}))
        return 0
    print(f"calibrated spec of {hw.name} for {args.framework} written to {args.out} as {name!r}")
    print(f"use it anywhere with: costmodel --hw-file {args.out} decode llama-3.1-8b --device {name}")
    return 0


def measured_devices(names: str, field: str = "--devices") -> list[str]:
    """The catalog names of a comma list of devices (aliases resolve through the catalog:
    ``h100`` is ``h100-sxm``), each one the measured corpus covers; a one-line error otherwise."""
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device
    from costmodel.measured.corpus import SYSTEMS  # a table of names: the corpus itself is not read

    measured = sorted(set(SYSTEMS.values()))
    out: list[str] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            raise CostModelError(f"{field} {names!r} has an empty device name")
        canonical = get_device(name).name
        if canonical not in measured:
            raise CostModelError(
                f"{field}: device {name!r} ({canonical}) has no measured data; measured: {', '.join(measured)}"
            )
        if canonical not in out:
            out.append(canonical)
    return out


#: a hardware file written as JSON is read back as JSON only with this suffix (else as TOML)
HW_FILE_SUFFIXES = (".json",)


def cmd_calibrate_report(args: argparse.Namespace) -> int:
    devs = measured_devices(args.devices) if args.devices else None  # before the corpus loads
    if args.plot_dir:  # before the report's work: the folder, and a file in it, can be written
        import os

        from costmodel.errors import CostModelError

        try:
            os.makedirs(args.plot_dir, exist_ok=True)
        except (OSError, ValueError) as exc:
            msg = getattr(exc, "strerror", None) or exc
            raise CostModelError(
                f"--plot-dir {args.plot_dir[:200]!r} cannot be made a folder: {msg}"
            ) from None
        check_output_path(os.path.join(args.plot_dir, "scatter.png"), "--plot-dir")

    from costmodel.hardware import get_device
    from costmodel.measured import FAMILIES
    from costmodel.measured.report import build_report, params_markdown, scatter_plot, to_markdown

    fams = tuple(args.families.split(",")) if args.families else FAMILIES
    splits = tuple(args.splits.split(","))
    rep = build_report(fams, devs, splits, progress=_say(args.quiet))
    if args.plot_dir:
        import os

        for fam in fams:
            for v in rep["violations"]:
                if v.family == fam:
                    scatter_plot(fam, v.device, os.path.join(args.plot_dir, f"{fam}-{v.device}.png"))
    if args.json:
        print(dump(rep))
        return 0
    print(to_markdown(rep))
    if args.params:
        dev, fw = args.params.split(":") if ":" in args.params else (args.params, "vllm")
        print()
        print(params_markdown(get_device(dev).name, fw, fams))
    return 0


#: why the default holds runs out (said with them)
HOLDOUT_WHY = (
    "the default with three or more runs: every second run by rate, so that the fit is checked on loads "
    "it did not see (--holdout none fits every run; --holdout RATES picks them)"
)


def _holdout(text: str | None, runs: list[Any]) -> tuple[list[int], str]:
    """Indices of the runs held out, and why: ``none``; a comma list of rates (req/s, matched to
    0.1 %); default: every second run by rate (the second, fourth ...) when there are three or more."""
    from costmodel.errors import CostModelError

    order = sorted(range(len(runs)), key=lambda i: (runs[i].rate is None, runs[i].rate or 0.0))
    if text is None:
        return (sorted(order[1::2]), HOLDOUT_WHY) if len(runs) >= 3 else ([], "")
    if text.strip().lower() == "none":
        return [], "--holdout none"
    out = []
    for part in text.split(","):
        try:
            rate = float(part)
        except ValueError:
            raise CostModelError(
                f"--holdout must be 'none' or a comma list of rates (req/s), got {part[:40]!r}"
            ) from None
        hit = [
            i for i in order if runs[i].rate is not None and math.isclose(runs[i].rate, rate, rel_tol=1e-3)
        ]
        if not hit:
            have = ", ".join(f"{r.rate:.4g}" for r in runs if r.rate is not None) or "none"
            raise CostModelError(f"--holdout: no run at {rate:g} req/s; the runs' rates: {have}")
        out += hit
    return sorted(set(out)), f"--holdout {text[:200]}"


def cmd_calibrate_serving(args: argparse.Namespace) -> int:
    from costmodel.errors import CostModelError
    from costmodel.hardware import get_device
    from graphs.serving.planning.bench_results import read_results
    from graphs.serving.planning.serving_fit import (
        DEFAULT_TERMS,
        MAX_FIT_REQUESTS,
        fit_serving,
        fp8_matmuls,
        roofline_tpot_s,
        simulate_with,
        write_fit,
    )
    from graphs.serving.pricing.overheads import TERMS
    from graphs.serving.sim.engine import profile_engine

    from .engine_option import profile_of
    from .model_option import resolve_config

    check_output_path(args.out, "-o")
    terms = tuple(t.strip() for t in args.terms.split(",")) if args.terms else DEFAULT_TERMS
    bad = [t for t in terms if t not in TERMS]
    if bad:
        raise CostModelError(f"--terms: {bad[0][:40]!r} is not a term; terms: {', '.join(TERMS)}")
    cap = MAX_FIT_REQUESTS if args.max_requests is None else args.max_requests  # ranged by the parser
    runs = [
        run.with_shared_prefix(args.shared_prefix or 0)
        for path in args.results
        for run in read_results(path, seed=args.seed, max_requests=cap)
    ]
    held, why_held = _holdout(args.holdout, runs)
    cfg = resolve_config(args)
    dev = get_device(args.device).name
    profile = profile_of(args)  # --engine, else --predict's framework's, else vLLM's
    caching = bool(args.enable_prefix_caching)
    eng = profile_engine(
        profile, cfg, dev, tp=args.tp, enable_prefix_caching=caching, num_blocks=args.num_blocks
    )
    # the terms start from the profile's (zero for the bound, which keeps the engine's policy)
    base = profile.overheads(
        max_num_seqs=eng.max_num_seqs,
        max_num_batched_tokens=eng.max_num_batched_tokens,
        terms=bool(args.predict),
    )
    if not args.predict and profile.policy == "recompute":
        base = dataclasses.replace(base, policy=None, basis="none")  # the bound as it always ran
    scales = fp8_scales_of(args)
    cut = [run for run in runs if run.in_file > len(run.prompt)]
    for c in cut if not args.quiet else []:  # said before the work: the fit reads a window of each long run
        sys.stderr.write(
            f"  note: {c.source} holds {c.in_file:,} requests: the fit replays its first "
            f"{len(c.prompt):,} by arrival (--max-requests)\n"
        )
    bar = sys.stderr.isatty() and not args.quiet  # a terminal: one bar, else the step lines
    fit = fit_serving(
        runs,
        simulate_with(cfg, dev, tp=args.tp, predict=args.predict, engine=eng, fp8_scales=scales),
        base=base,
        held_out=held,
        terms=terms,
        model=cfg.name,
        device=dev,
        tp=args.tp,
        predict=args.predict,
        progress=_say(args.quiet or bar),
        fp8_scales=scales,
        min_tpot_s=roofline_tpot_s(cfg, dev, tp=args.tp),
        ticks=progress_bar("fit", args.quiet, unit="simulations (at most)") if bar else None,
    )
    write_fit(fit, args.out)
    prefixes = sum(r.prefixes for r in runs)
    replay = _replay_lines(runs, caching, prefixes, args.num_blocks, eng)
    if args.json:
        held_out = [{"source": runs[i].source, "rate": runs[i].rate, "why": why_held} for i in held]
        extra = {
            "held_out": held_out,
            "at_bound": {t: getattr(fit.overheads, t) for t in fit.at_bound},
            "collinear": [list(p) for p in fit.collinear],
            "replay": replay,
            "assumed": {r.source: list(r.summary.assumed) for r in runs if r.summary is not None},
        }
        print(dump({"file": args.out, "engine": profile.to_dict(), **fit.to_dict(), **extra}))
        return 0
    drawn = sum(r.drawn for r in runs)
    fp8 = bool(args.predict) and fp8_matmuls(cfg)  # the scale mode prices FP8 matmuls only
    print(
        f"serving fit of {fit.model} on {fit.device} (tp {fit.tp}), kernels priced by "
        f"{args.predict or 'the roofline bound'}"
        + (f" (FP8 activation scales {scales})" if fp8 else "")
        + f": {len(runs) - len(held)} run(s) fitted, {len(held)} held out"
    )
    print(f"  {profile.summary()}")
    for line in replay:
        print(f"  {line}")
    if held:
        names = ", ".join(runs[i].label for i in held)
        print(f"  held out: {names}; {why_held}")
    for run in runs:
        for said in run.summary.assumed if run.summary is not None else ():
            print(f"  assumed for {run.source} (a summary without per-request rows): {said}")
    for c in cut:
        print(
            f"  note: {c.source} holds {c.in_file:,} requests; the first {len(c.prompt):,} by arrival were fitted"
        )
    if drawn:
        print(
            f"  note: {drawn} run(s) hold no send times (vllm bench serve): arrivals redrawn at their rate, --seed {args.seed}"
        )
    units = {
        "kernel_scale": (1.0, ""),
        "per_seq_s": (1e6, " us"),
        "per_token_s": (1e9, " ns"),
        "output_token_s": (1e6, " us"),
    }
    for t in terms:
        k, unit = units.get(t, (1e3, " ms"))
        v, se = getattr(fit.overheads, t), fit.stderr[t]
        other = next((a if b == t else b for a, b in fit.collinear if t in (a, b)), None)
        err = (
            (
                "held at its bound 1: the roofline (a smaller scale would price kernels below it)"
                if t == "kernel_scale" and not args.predict
                else f"held at its bound {v * k:.4g}{unit} (no standard error)"
            )
            if t in fit.at_bound
            else f"not told apart from {other} by these runs: {_why_collinear(t, other)}"
            if other is not None
            else "not determined by these runs"
            if se is None
            else f"+- {se * k:.3g}{unit}"
        )
        print(f"  {t:15s} {v * k:12.5g}{unit:3s}  {err}")
    kept = [t for t in TERMS if t not in terms]
    if kept:
        held_at = ", ".join(
            f"{t} {getattr(fit.overheads, t) * units.get(t, (1e3, ' ms'))[0]:.4g}{units.get(t, (1e3, ' ms'))[1]}"
            for t in kept
        )
        print(
            f"  not fitted (kept at {'the ' + args.predict + ' defaults' if args.predict else 'zero, the bound'}'s values): {held_at}"
        )
    print(
        f"  rms relative residual of the group means (TTFT by prompt length, TPOT by output length): {fit.rms_residual:.3g}"
    )
    for r in fit.runs:
        what = "fitted  " if r.fitted else "held out"
        rate = "all at once" if r.rate is None else f"{r.rate:8.4g} req/s"
        print(
            f"  {what} {rate:>14s}  mean TTFT {100 * r.ttft_err:+6.1f}%  TPOT {100 * r.tpot_err:+6.1f}%  "
            f"E2E {100 * r.e2e_err:+6.1f}%  ({r.source})"
        )
    if not held:
        print(
            f"  no run held out ({why_held or 'fewer than three runs'}; give three or more runs, or "
            "--holdout RATES): the error above is in-sample"
        )
    again = f" --engine {profile.ref}" if args.engine else ""
    # the knobs the runs were replayed with, for a simulate of the same deployment
    knobs = (" --enable-prefix-caching" if caching else "") + (
        f" --num-blocks {args.num_blocks}" if args.num_blocks else ""
    )
    print(
        f"fit written to {args.out}; use it with --predict-file {args.out}{again} on simulate, decode or prefill"
        + (f" (and{knobs} on simulate, as the runs were replayed)" if knobs else "")
    )
    return 0


def _why_collinear(a: str, b: str) -> str:
    """Why two fitted terms move the runs' means alike (said with the flag)."""
    pair = {a, b}
    if pair == {"iteration_s", "per_seq_s"}:
        return "every run sits at a similar batch size (add runs at other loads, or fit one of them: --terms)"
    if "per_token_s" in pair and "kernel_scale" in pair:
        return "both grow with the prompt (fit one of them: --terms)"
    if "output_token_s" in pair:
        return "both add to every output token (fit one of them: --terms)"
    return (
        "their effects on the fitted means are proportional (add runs at other loads, or fit fewer --terms)"
    )


def _replay_lines(
    runs: list[Any], caching: bool, prefixes: int, num_blocks: int | None, eng: Any
) -> list[str]:
    """What the replay ran with beyond the profile: prefix caching and the KV pool, said once."""
    pool = f"{num_blocks:,} KV blocks (--num-blocks)" if num_blocks else "the KV pool by the profile's rule"
    lines = [
        f"replayed with prefix caching {'on' if caching else 'off'}, {pool}, max-num-seqs {eng.max_num_seqs}, "
        f"max-num-batched-tokens {eng.max_num_batched_tokens}"
    ]
    if caching and prefixes:
        lines.append(
            f"prefix caching replayed: {prefixes} shared prefix(es) named by the runs; a request whose "
            "prefix is cached computes only the rest of its prompt"
        )
    elif caching:
        lines.append(
            "note: prefix caching is on but no run names a shared prefix (CSV prefix_id,prefix_tokens or "
            "--shared-prefix): nothing is replayed as cached"
        )
    elif prefixes:
        lines.append(
            f"note: the runs name {prefixes} shared prefix(es) but prefix caching is off: every prompt is "
            "replayed whole (--enable-prefix-caching when the engine ran with it, as vLLM V1 does by default)"
        )
    return lines


def add_calibrate_parser(sub: Any) -> None:
    from graphs.serving.engines.knobs import FIT_DEFAULT_TERMS, TERMS  # stdlib only: --help stays light

    p = sub.add_parser("calibrate", help="fit efficiencies on measured GPU kernels ([measured] extra)")
    cs = p.add_subparsers(dest="calibrate_cmd", required=True, metavar="{gpu,report,serving}")
    g = cs.add_parser("gpu", help="write a device's calibrated spec as a hardware file (--hw-file)")
    g.add_argument("--device", default="h100-sxm", help="catalog device with measured data")
    g.add_argument("--framework", choices=FRAMEWORKS, default="vllm", help="whose kernels to fit")
    g.add_argument("--out", default="calibrated.json", help="hardware file to write")
    g.add_argument(
        "--name", default=None, help="device name in the file (default <device>-<framework>-calibrated)"
    )
    g.add_argument("--json", action="store_true", help="machine-readable output")
    g.set_defaults(func=cmd_calibrate_gpu)
    r = cs.add_parser("report", help="bound violations and held-out errors per family and device")
    r.add_argument("--families", default=None, help="comma list (default: every measured family)")
    r.add_argument("--devices", default=None, help="comma list of catalog devices (default: all measured)")
    r.add_argument("--splits", default="shapes,device,framework", help="held-out splits to run")
    r.add_argument("--plot-dir", default=None, help="write predicted-vs-measured scatter plots here")
    r.add_argument(
        "--params",
        default=None,
        metavar="DEVICE[:FRAMEWORK]",
        help="also print that device's fitted parameters",
    )
    r.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(func=cmd_calibrate_report)
    sv = cs.add_parser(
        "serving",
        help="fit the engine overheads and a kernel scale to your own serving benchmark results",
    )
    sv.add_argument(
        "results",
        nargs="+",
        metavar="RESULT",
        help="vllm bench serve JSON (per request with --save-detailed, or its summary), GuideLLM report "
        "JSON (with or without per-request rows), or a CSV of arrival_s,prompt_tokens,output_tokens,"
        "ttft_s,e2e_s and optionally prefix_id,prefix_tokens",
    )
    sv.add_argument("--model", required=True)
    sv.add_argument("--device", required=True)
    sv.add_argument("--tp", type=int, default=1)
    add_predict_option(
        sv,
        help="price the kernels with this framework's measured kernels while fitting "
        "(default: the roofline bound; [measured] extra)",
        with_file=False,
    )
    sv.add_argument("-o", "--out", required=True, help="fit file to write (JSON)")
    sv.add_argument(
        "--holdout",
        default=None,
        help="rates (req/s, comma list) not fitted but predicted and compared, or 'none' "
        "(default: every second run by rate when there are three or more)",
    )
    sv.add_argument(
        "--terms",
        default=None,
        help=f"comma list of the terms to fit, of {', '.join(TERMS)} (default: "
        f"{','.join(FIT_DEFAULT_TERMS)}; the others keep the --predict framework's defaults, zero for "
        "the bound)",
    )
    sv.add_argument("--seed", type=int, default=0, help="seed of the arrivals redrawn for a vllm result")
    sv.add_argument(
        "--max-requests",
        type=int,
        default=None,
        help="requests of each run replayed: a longer run is cut to its first requests by arrival, "
        "and said (default 5,000, serving_fit.MAX_FIT_REQUESTS: each fit step simulates every run "
        "several times)",
    )
    add_engine_options(sv)
    sv.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="replay the runs with prefix caching, as the engine ran them: a request whose shared "
        "prefix (CSV prefix_id,prefix_tokens, or --shared-prefix) is cached computes only the rest "
        "(default: off)",
    )
    sv.add_argument(
        "--shared-prefix",
        type=int,
        default=None,
        metavar="TOKENS",
        help="every prompt of a run that names no prefix starts with the same TOKENS (vllm bench serve "
        "--random-prefix-len, a system prompt; default: none)",
    )
    sv.add_argument(
        "--num-blocks",
        type=int,
        default=None,
        help="KV blocks the engine ran with (default: the profile's pool rule)",
    )
    sv.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    sv.add_argument("--json", action="store_true", help="machine-readable output")
    sv.set_defaults(func=cmd_calibrate_serving)
