"""``costmodel engines``: the registered serving-engine profiles (:mod:`graphs.serving.engines`),
and for one of them every default with its value and its source, as the engine picks it on a
device (``--device``: vLLM's batch limits by GPU memory).

``costmodel engines`` lists the profiles (as ``simulate --engine list``); ``costmodel engines
vllm@0.11 --device h200`` shows one, ``--json`` the same as plain values.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_json, dump

__all__ = ["add_engines_parser", "cmd_engines", "engine_text"]


#: the data-parallel rules a profile may carry beyond its balancer (each shown with its source)
DP_RULES = ("dp_chunk_split", "dp_conservativeness", "dp_seqs_split")


def engine_text(profile: Any, device: Any = None) -> str:
    """One profile's settings and CPU terms, each with its value and source, in lines.

    Parameters
    ----------
    profile : EngineProfile
        The profile as registered (:func:`graphs.serving.engines.get_engine`).
    device : Hardware, optional
        Show the values the engine picks on this device (:meth:`EngineProfile.for_device`); the
        settings it changes there are named.

    Returns
    -------
    str
        The lines to print.
    """
    shown = profile if device is None else profile.for_device(device)
    where = "" if device is None else f" on {device.name}"
    lines = [f"engine {profile.ref}{where}: {profile.label}; kernels from the {profile.framework} corpus"]
    if profile.releases:
        series = ", ".join(f"{r}.x" for r in (*profile.releases, profile.version))
        lines.append(f"  describes releases {series} ({profile.sources['releases']})")
    if device is not None:
        moved = [k for k, v in shown.defaults().items() if v != profile.defaults()[k]]
        said = ", ".join(f"{k} {profile.defaults()[k]} -> {shown.defaults()[k]}" for k in moved)
        lines.append(f"  picked for {device.name}: {said}" if moved else f"  the same on {device.name}")
    rows: list[tuple[str, Any, str]] = [(k, v, profile.sources[k]) for k, v in shown.defaults().items()]
    sizes = shown.overheads().cudagraph_sizes  # a decode batch is padded to one of these
    rows.append(
        ("cudagraph_sizes", f"<= {sizes[-1]}" if sizes else "none", profile.sources["cudagraph_sizes"])
    )
    rows.append(("small_kernels", f"{len(shown.small_kernels)} roles", profile.sources["small_kernels"]))
    # the fused-MoE kernels it runs where they are not the corpus's fastest, each rule sourced
    rows += [("moe_kernels", f"{r.dtype} on {r.where}: {r.kernel}", r.source) for r in shown.moe_kernels]
    # the attention kernels it runs where the corpus's rows time another (counted as neighbours)
    rows += [
        ("attention_kernels", f"sinks on {r.where}: {r.backend}", r.source) for r in shown.attention_kernels
    ]
    if (per_layer := shown.cudagraph_bytes_per_layer()) > 0:  # taken out of the KV pool, per decoder layer
        rows.append(
            ("cudagraph_memory", f"{per_layer / 2**20:.1f} MiB/layer", profile.sources["cudagraph_memory"])
        )
    # the data-parallel rules: the balancer always, the rest where the engine has them
    rows.append(("dp_load_balance", shown.dp_load_balance, profile.sources["dp_load_balance"]))
    rows += [(k, getattr(shown, k), profile.sources[k]) for k in DP_RULES if k in profile.sources]
    rows += [(k, f"{v:g} s", profile.sources[k]) for k, v in shown.cpu_terms.items()]
    width, vw = max(len(k) for k, _, _ in rows), max(len(str(v)) for _, v, _ in rows)
    lines.append(f"  {'setting':{width}s}  {'value':>{vw}s}  source")
    lines += [f"  {k:{width}s}  {v!s:>{vw}s}  {src}" for k, v, src in rows]
    lines.append(f"  {shown.basis}")
    return "\n".join(lines)


def cmd_engines(args: argparse.Namespace) -> int:
    """``costmodel engines [NAME[@VERSION]] [--device D] [--json]``."""
    from graphs.serving.engines import get_engine

    from .engine_option import engine_list

    device = None
    if args.device is not None:  # resolved first: an unknown name is refused, listing or not
        from costmodel.hardware import get_device

        device = get_device(args.device)
    if args.engine is None:
        print(engine_list(args.json, device))
        return 0
    profile = get_engine(args.engine)
    if args.json:
        shown = profile if device is None else profile.for_device(device)
        print(dump({**shown.to_dict(), "device": None if device is None else device.name}))
        return 0
    print(engine_text(profile, device))
    return 0


def add_engines_parser(sub: Any) -> None:
    sp = sub.add_parser("engines", help="serving-engine profiles: each default's value and source")
    sp.add_argument(
        "engine",
        nargs="?",
        default=None,
        metavar="NAME[@VERSION]",
        help="one profile to show in full (default: list them all)",
    )
    sp.add_argument(
        "--device",
        default=None,
        help="show the defaults the engine picks on this catalog device (default: the profile's own)",
    )
    add_json(sp)
    sp.set_defaults(func=cmd_engines)
