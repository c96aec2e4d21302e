"""``costmodel calibrate gpu | report | serving`` and ``--predict``/``--predict-file`` on
decode/prefill (and simulate).

Thin layers over :mod:`costmodel.measured` (the measured corpus, optional
extra ``[measured]``), :func:`graphs.serving.pricing.predict.predict_step` and
:func:`graphs.serving.planning.serving_fit.fit_serving`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from costmodel.measured.corpus import FRAMEWORKS  # stdlib only: --help stays light

from .common import dump, progress_bar
from .dask_option import add_dask_options, dask_client
from .engine_option import add_engine_options
from .html_option import add_html_option, keep
from .options import add_dtype_options, check_device_name, check_output_path
from .predict_option import add_predict_option

__all__ = ["add_calibrate_parser", "measured_devices", "request_of"]

#: what a local Dask worker imports while it starts: the fit's simulations
_WORKER_MODULES = ("graphs.serving.planning.serving_fit",)


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
    if args.name is not None:  # before the fit: the file must load under the name it prints
        check_device_name(args.name)
    if "," in args.device:
        from costmodel.errors import CostModelError

        raise CostModelError(f"--device takes one device, got {args.device[:80]!r}")
    (device,) = measured_devices(args.device, "--device")  # before the corpus loads: measured data only
    hw = get_device(device)
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


def _params_of(text: str) -> tuple[str, str]:
    """``--params DEVICE[:FRAMEWORK]`` checked before the report's work: a catalog device with
    measured data and a framework of the corpus (default vllm); a one-line error otherwise."""
    from costmodel.errors import CostModelError

    parts = text.split(":")
    if len(parts) > 2 or not all(parts):
        raise CostModelError(f"--params must be DEVICE or DEVICE:FRAMEWORK, got {text[:80]!r}")
    dev, fw = (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "vllm")
    if fw not in FRAMEWORKS:
        raise CostModelError(f"--params framework {fw[:40]!r} not allowed; allowed: {', '.join(FRAMEWORKS)}")
    (name,) = measured_devices(dev, "--params")
    return name, fw


def cmd_calibrate_report(args: argparse.Namespace) -> int:
    # each option given, even empty, is checked ("" was read as not given: every family, every
    # device, no plots, no parameters, each silently)
    devs = measured_devices(args.devices) if args.devices is not None else None  # before the corpus loads
    params = _params_of(args.params) if args.params is not None else None  # before the work, not after it
    if args.plot_dir is not None:  # before the report's work: the folder, and a file in it, can be written
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

    fams = tuple(f.strip() for f in args.families.split(",")) if args.families is not None else FAMILIES
    splits = tuple(args.splits.split(","))
    rep = build_report(fams, devs, splits, progress=_say(args.quiet))
    if args.plot_dir is not None:
        import os

        for fam in fams:
            for v in rep["violations"]:
                if v.family == fam:
                    scatter_plot(fam, v.device, os.path.join(args.plot_dir, f"{fam}-{v.device}.png"))
    if args.json:
        print(dump(rep))
        return 0
    print(to_markdown(rep))
    if params is not None:
        dev, fw = params
        print()
        print(params_markdown(get_device(dev).name, fw, fams))
    return 0


def request_of(args: argparse.Namespace) -> Any:
    """``calibrate serving``'s options as a
    :class:`~graphs.serving.planning.serving_fit_request.ServingFitRequest`, which checks them; the
    engine profile is ``--engine``'s (or ``--predict``'s framework's, else vLLM's) with the
    scheduler flags over it."""
    from graphs.serving.planning.serving_fit_request import ServingFitRequest

    from .engine_option import profile_of

    return ServingFitRequest(
        results=tuple(args.results),
        device=args.device,
        out=args.out,
        tp=args.tp,
        predict=args.predict,
        fp8_scales=args.fp8_scales,
        holdout=args.holdout,
        # given, even empty: "" is refused by the request, never read as the default terms
        **({"terms": tuple(t.strip() for t in args.terms.split(","))} if args.terms is not None else {}),
        seed=args.seed,
        max_requests=args.max_requests,
        profile=profile_of(args),
        enable_prefix_caching=bool(args.enable_prefix_caching),
        shared_prefix=args.shared_prefix,
        num_blocks=args.num_blocks,
        engine_named=bool(args.engine),
        allow_long_context=bool(args.allow_long_context),
    )


def cmd_calibrate_serving(args: argparse.Namespace) -> int:
    """``costmodel calibrate serving``: the options as a checked request, the library's fit
    (:func:`graphs.serving.present.serving_fit_report.run_serving_fit`, which writes ``-o``) and
    its report printed."""
    from graphs.serving.present.serving_fit_report import run_serving_fit

    from .model_option import resolve_config

    check_output_path(args.out, "-o")
    req = request_of(args)
    bar = sys.stderr.isatty() and not args.quiet  # a terminal: one bar, else the step lines
    with dask_client(args, preload=_WORKER_MODULES, background=True) as client:
        report = run_serving_fit(
            req,
            resolve_config(args),
            say=_say(False),  # a note, said under --quiet too: --quiet hides progress only
            progress=_say(args.quiet or bar),
            ticks=progress_bar("fit", args.quiet, unit="simulations (at most)") if bar else None,
            executor=client,
        )
    keep(args, report=report)
    print(dump(report.to_dict()) if args.json else report.to_text())
    return 0


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
    sv.add_argument(
        "--allow-long-context",
        action="store_true",
        help="replay requests whose prompt + output exceed the model's context limit, with a warning",
    )
    sv.add_argument("--quiet", action="store_true", help="no progress lines on stderr (notes are still said)")
    sv.add_argument("--json", action="store_true", help="machine-readable output")
    add_dask_options(sv, "the fit's simulations (every run at one parameter vector at once)")
    # the formats the runs were served in (a BF16 checkpoint served quantised beats its own
    # format's roofline floors: serving_fit._check_physical names these options)
    add_dtype_options(sv)
    sv.set_defaults(func=cmd_calibrate_serving)
    add_html_option(sv, "calibrate")
