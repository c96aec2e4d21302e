"""Reports from the persistent cache of compiled forms (:mod:`costmodel.formcache`).

A repeated ``costmodel decode`` with the same model, device, plan and dtypes reads its card
(:mod:`graphs.serving.cards`) back as text and evaluates it without importing sympy, numpy or
networkx: about 0.1 s end to end instead of about 1 s (``costmodel prefill`` likewise). The first run builds the card from the
compiled step and stores it; any edit to the engine, the config or the catalog changes the key.
A card that fails its digest or any of its checks (:mod:`graphs.serving.cards`) is a miss: the
answer is recomputed and the card overwritten, so a cache can cost time but never an answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = [
    "card_key",
    "decode_reports",
    "kv_caps",
    "prefill_report",
    "capacity",
    "analysis",
    "ledger_report",
    "default_overhead",
    "sweep_forms",
]


def card_key(args: argparse.Namespace, kind: str) -> str | None:
    """The persistent-cache key of this command's card, or None when it cannot be cached (a
    ``--hw-file`` changes the catalog; a name or path that does not resolve goes the long way,
    where the loader says why). The config's bytes come from :mod:`models.resolver`, which
    reads the file once for the whole command."""
    from pathlib import Path

    from models.resolver import config_identity

    from ..errors import CostModelError
    from ..formcache import cache_key, enabled

    if not enabled() or getattr(args, "hw_file", None):
        return None
    try:
        name, model_text = config_identity(args.model)
        catalog = (Path(__file__).resolve().parents[1] / "hardware" / "catalog.toml").read_bytes()
    except (CostModelError, OSError, ValueError):
        return None
    plan = [str(getattr(args, k, None)) for k in ("device", "tp", "weight_dtype", "kv_dtype", "matmul_dtype")]
    return cache_key(kind, model_text, catalog, name, *plan)


def decode_reports(
    args: argparse.Namespace, config: Callable[[argparse.Namespace], Any], max_batch: int | None = None
) -> tuple[Any, Any, Any]:
    """Report, limits and near/far memory: from the cached card when there is one (no sympy,
    no graph), else from a card built now (and stored), else from the library directly."""
    from graphs.serving.cards import CardError, build_decode_card, decode_from_card

    from ..formcache import load, save

    key = card_key(args, "decode")
    card = load(key) if key else None
    if card is not None:
        try:
            return decode_from_card(card, batch=args.batch, ctx=args.ctx, max_batch=max_batch)
        except CardError:
            pass  # stale or tampered: rebuild
    cfg = config(args)
    try:
        card = build_decode_card(cfg, args.device, tp=args.tp)
        reports = decode_from_card(card, batch=args.batch, ctx=args.ctx, max_batch=max_batch)
    except CardError:  # a form the card cannot hold: the library's compiled path
        from graphs import decode_limits, decode_report, near_far_memory

        return (
            decode_report(cfg, args.device, batch=args.batch, ctx=args.ctx, tp=args.tp),
            decode_limits(cfg, args.device, ctx=args.ctx, tp=args.tp, max_batch=max_batch),
            near_far_memory(cfg, args.device),
        )
    if key:
        save(key, card)
    return reports


def kv_caps(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> dict[str, Any]:
    """The decode card's cache layout (:func:`graphs.serving.ledger_fit.kv_caps`): from the
    cached card when there is one and it checks out, else from the library."""
    from graphs.serving.cards import CardError, card_kv_caps

    from ..formcache import load

    key = card_key(args, "decode")
    card = load(key) if key else None
    if card is not None:
        try:
            return card_kv_caps(card)
        except CardError:
            pass  # tampered or malformed: the library's own numbers
    from graphs.serving.ledger_fit import kv_caps as library_caps

    return library_caps(config(args), tp=args.tp)


def prefill_report(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any:
    """The prefill report, from the cached card when there is one, else built (and stored)."""
    from graphs.serving.cards import CardError, build_prefill_card, prefill_from_card

    from ..formcache import load, save

    key = card_key(args, "prefill")
    card = load(key) if key else None
    if card is not None:
        try:
            return prefill_from_card(card, batch=args.batch, seq=args.seq, chunk=args.chunk)
        except CardError:
            pass  # stale or tampered: rebuild
    cfg = config(args)
    try:
        card = build_prefill_card(cfg, args.device, tp=args.tp)
        rep = prefill_from_card(card, batch=args.batch, seq=args.seq, chunk=args.chunk)
    except CardError:
        from graphs import prefill_report as library_prefill

        return library_prefill(cfg, args.device, batch=args.batch, seq=args.seq, chunk=args.chunk, tp=args.tp)
    if key:
        save(key, card)
    return rep


def capacity(
    args: argparse.Namespace, config: Callable[[argparse.Namespace], Any], kind: str, card: Any = None
) -> Any:
    """Does this command's point fit (:class:`graphs.serving.fit_check.CapacityCheck`)? From the
    cached card's ledger when there is one, else from the library; a point that does not fit
    is checked again by the library, which also says how many devices it needs. ``card``: a
    card already read (``model analyze``'s analysis card holds the ledger too)."""
    from graphs.serving.cards import CardError
    from graphs.serving.fit_check import capacity_from_card

    from ..formcache import load

    tokens = args.ctx if kind == "decode" else args.seq
    if card is None:
        key = card_key(args, kind)
        card = load(key) if key else None
    if isinstance(card, dict):
        try:
            chk = capacity_from_card(card, batch=args.batch, tokens=tokens)
            if chk.fits:
                return chk
        except CardError:
            pass  # no readable ledger: the library's
    from graphs.serving.ledger_fit import capacity_check

    return capacity_check(config(args), args.device, phase=kind, batch=args.batch, tokens=tokens, tp=args.tp)


def analysis(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any:
    """``model analyze``'s :class:`~graphs.serving.analysis.ModelAnalysis`: from the cached
    analysis card when there is one, else from a card built now (and stored), else from the
    library directly; the roof notes of the device; and the card (None without one)."""
    from graphs.serving.cards import CardError, analysis_from_card, build_analysis_card, card_notes

    from ..formcache import load, save

    key = card_key(args, f"analysis-{args.phase}")
    card = load(key) if key else None
    point = {"batch": args.batch, "seq": args.seq, "ctx": args.ctx}
    if card is not None:
        try:
            return analysis_from_card(card, **point), card_notes(card), card
        except CardError:
            pass  # stale or tampered: rebuild
    cfg = config(args)
    try:
        card = build_analysis_card(cfg, args.device, args.phase, tp=args.tp)
        result = analysis_from_card(card, **point), card_notes(card), card
    except CardError:  # a form the card cannot hold: the library's compiled path
        from graphs import analyze

        from ..hardware import get_device
        from ..hardware.fallback import roof_notes

        rep = analyze(cfg, args.device, args.phase, tp=args.tp, **point)
        return rep, roof_notes(get_device(args.device)), None
    if key:
        save(key, card)
    return result


def default_overhead(args: argparse.Namespace) -> bool:
    """``--overhead-policy``/``--overhead`` as their defaults (no overhead): the ledger a card holds."""
    return bool(args.overhead_policy == "fraction_of_sum" and str(args.overhead).strip() in ("0", "0.0"))


def ledger_report(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any | None:
    """``costmodel ledger``'s decode report from the decode card (cached, or built now and
    stored, as ``decode`` does), or None where a card cannot answer it: a prefill ledger, a
    non-default overhead or activation assumption (the card holds the default ledger), or a
    card that does not read back. The caller then asks the library."""
    from graphs.serving.cards import CardError, build_decode_card
    from graphs.serving.fit_check import capacity_report_from_card
    from models.context import context_limit
    from models.resolver import config_data

    from ..errors import CostModelError
    from ..formcache import load, save

    if args.phase != "decode" or not default_overhead(args) or args.act_bytes_per_token is not None:
        return None
    if not (type(args.batch) is int and args.batch >= 1 and type(args.ctx) is int and args.ctx >= 1):
        return None  # the library says what is wrong with them
    try:
        lim = context_limit(config_data(args.model))
    except (CostModelError, OSError, ValueError):
        return None
    limit = lim.tokens if lim is not None else None
    key = card_key(args, "decode")
    card = load(key) if key else None
    if card is not None:
        try:
            return capacity_report_from_card(card, batch=args.batch, ctx=args.ctx, model_limit=limit)
        except CardError:
            pass  # stale or tampered: rebuild
    try:
        card = build_decode_card(config(args), args.device, tp=args.tp)
        rep = capacity_report_from_card(card, batch=args.batch, ctx=args.ctx, model_limit=limit)
    except CardError:
        return None
    if key:
        save(key, card)
    return rep


def sweep_forms(
    args: argparse.Namespace,
    config: Callable[[argparse.Namespace], Any],
    combos: list[tuple[str, str | None, str | None]],
) -> list[Any]:
    """Each (device, weight dtype, KV dtype) configuration's decode forms for ``sweep``: from
    its cached decode card when there is one (no sympy), else compiled now (the card stored).
    The configuration is the library's (:func:`graphs.serving.sweeps.sweep`: the model with the
    sweep's dtypes replaced); its card key names the sweep dtypes, so it never answers for a
    ``decode`` of another configuration."""
    from graphs.serving.cards import CardError, build_decode_card, decode_forms_from_card

    from ..formcache import load, save

    out = []
    cfg = None
    for dev, wd, kvd in combos:
        one = argparse.Namespace(**{**vars(args), "device": dev})
        key = card_key(one, f"decode-sweep:{wd}:{kvd}")
        card = load(key) if key else None
        if card is not None:
            try:
                out.append(decode_forms_from_card(card))
                continue
            except CardError:
                pass  # stale or tampered: rebuild
        if cfg is None:
            cfg = config(args)
        changes = {k: v for k, v in (("dtype", wd), ("kv_dtype", kvd)) if v is not None}
        c = cfg.replace(**changes)
        try:
            card = build_decode_card(c, dev, tp=args.tp)
            out.append(decode_forms_from_card(card))
        except CardError:  # a form the card cannot hold: the library's compiled forms
            from graphs.serving.sweeps import decode_forms

            out.append(decode_forms(c, dev, args.tp))
            continue
        if key:
            save(key, card)
    return out
