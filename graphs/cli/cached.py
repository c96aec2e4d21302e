"""Reports from the persistent cache of compiled forms (:mod:`costmodel.formcache`).

A repeated ``costmodel decode`` with the same model, device, plan and dtypes reads its card
(:mod:`graphs.serving.present.cards`) back as text and evaluates it without importing sympy, numpy or
networkx: about 0.1 s end to end instead of about 1 s (``costmodel prefill`` likewise). The first run builds the card from the
compiled step and stores it; any edit to the engine, the config or the catalog changes the key.
A card that fails its digest or any of its checks (:mod:`graphs.serving.present.cards`) is a miss: the
answer is recomputed and the card overwritten, so a cache can cost time but never an answer.

A first run on a new machine reads the card from the cards that ship with the package
(:func:`shipped_card`: every catalog model on every catalog device at the default plan, built by
``benchmarks/build_cards.py`` and checked against the contents of the sources its build read),
so it too skips sympy, numpy and networkx; it stores the card in the cache as if it had built it.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .routing_option import routed, routing_of

T = TypeVar("T")

__all__ = [
    "served",
    "card_key",
    "card_parts",
    "shipped_card",
    "shipped_key",
    "stored_card",
    "shipped_entries",
    "SHIPPED_COMMANDS",
    "decode_reports",
    "kv_caps",
    "prefill_report",
    "capacity",
    "analysis",
    "ledger_report",
    "default_overhead",
    "sweep_forms",
]


#: the command checked the context (``--allow-long-context``) and the capacity (its verdict, or
#: ``--ignore-capacity``'s headline) before a step report is built: the library says neither again
_CHECKED = {"allow_long_context": True, "check_memory": False}


def card_key(args: argparse.Namespace, kind: str) -> str | None:
    """The persistent-cache key of this command's card, or None when it cannot be cached (a
    ``--hw-file`` changes the catalog; a name or path that does not resolve goes the long way,
    where the loader says why). The config's bytes come from :mod:`models.resolver`, which
    reads the file once for the whole command."""
    from costmodel.formcache import cache_key, enabled

    parts = None if not enabled() else card_parts(args)
    return None if parts is None else cache_key(kind, *parts)


def card_parts(args: argparse.Namespace, device: str | None = None) -> tuple[bytes | str, ...] | None:
    """What a card's key is made of: the model config's text, the device catalog's text, the
    config's name and the plan (the device as given, or ``device``; tp; the dtypes); None when
    the command cannot be answered from a card (``--hw-file``, a model that does not resolve)."""
    import os

    import costmodel
    from costmodel.errors import CostModelError
    from models.resolver import config_identity

    if getattr(args, "hw_file", None):
        return None
    try:
        name, model_text = config_identity(args.model)
        # beside the package's own files (as costmodel.formcache reads them), not through
        # importlib.resources, whose import is a tenth of a first decode's own time
        with open(os.path.join(os.path.dirname(costmodel.__file__), "hardware", "catalog.toml"), "rb") as f:
            catalog = f.read()
    except (CostModelError, OSError, ValueError):
        return None
    keys = ("device", "tp", "weight_dtype", "kv_dtype", "matmul_dtype", "assume_family")
    plan = [str(getattr(args, k, None)) for k in keys]
    if getattr(args, "tp", None) is None:  # unset (ledger's, until its model fills it in): tp 1
        plan[1] = "1"
    if device is not None:
        plan[0] = device
    return (model_text, catalog, name, *plan)


#: shipped cards already read in this process, by key
_shipped: dict[str, dict[str, Any] | None] = {}


def shipped_card(args: argparse.Namespace, kind: str) -> dict[str, Any] | None:
    """This command's card from the cards that ship with the package
    (:data:`graphs.serving.present.cards.SHIPPED_CARDS`, built by ``benchmarks/build_cards.py``
    for every catalog model on every catalog device at the default plan), or None: not in the
    store, a store built from other sources (an edit of a file the build read: the engine, a
    config, the catalog), or ``COSTMODEL_NO_SHIPPED_CARDS`` set. Keyed by :func:`shipped_key`
    of :func:`card_parts` with the catalog's name of the device (:mod:`costmodel.formstore`)."""
    import os

    if os.environ.get("COSTMODEL_NO_SHIPPED_CARDS", "") not in ("", "0"):
        return None
    from costmodel.formstore import open_store
    from graphs.serving.present.cards import SHIPPED_CARDS

    store = open_store(SHIPPED_CARDS)
    device = None if store is None else store.names.get(str(getattr(args, "device", None)).lower())
    parts = None if device is None else card_parts(args, device)
    if store is None or parts is None:
        return None
    key = shipped_key(kind, parts)
    if key not in _shipped:
        _shipped[key] = store.get(key)
    return _shipped[key]


def shipped_key(kind: str, parts: tuple[bytes | str, ...]) -> str:
    """A shipped card's key: :func:`costmodel.formcache.cache_key` of its kind and
    :func:`card_parts` with no fingerprint of the sources (the store checks the sources its
    build read as a whole, :mod:`costmodel.formstore`, and binds each entry to them)."""
    from costmodel.formcache import cache_key

    return cache_key(kind, *parts, fingerprint="")


def stored_card(args: argparse.Namespace, kind: str) -> dict[str, Any] | None:
    """This command's card from the persistent cache, else from the shipped cards, else None."""
    from costmodel.formcache import load

    key = card_key(args, kind)
    card = load(key) if key else None
    return card if card is not None else shipped_card(args, kind)


def served(
    key: str | None,
    read: Callable[[dict[str, Any]], T],
    build: Callable[[], dict[str, Any]],
    library: Callable[[], T],
    shipped: Callable[[], dict[str, Any] | None] | None = None,
) -> T:
    """The one evaluation path of the cached commands: ``read`` the card stored under ``key``
    (the compiled step's forms as text, evaluated without sympy), else the ``shipped`` one
    (:func:`shipped_card`; stored under ``key`` once it reads back); on a miss, or a card that
    fails its digest or any check (:class:`~graphs.serving.step.card_format.CardError`), ``build`` the
    card from the compiled forms now, ``read`` it and store it; when the forms cannot be held
    as a card, ask the ``library`` (the same compiled forms, evaluated in process)."""
    from costmodel.formcache import load, save
    from graphs.serving.present.cards import CardError

    card = load(key) if key else None
    if card is not None:
        try:
            return read(card)
        except CardError:
            pass  # stale or tampered: rebuild
    card = shipped() if shipped is not None else None
    if card is not None:
        try:
            out = read(card)
        except CardError:
            pass  # does not read back: built as if it were not there
        else:
            if key:
                save(key, card)
            return out
    try:
        card = build()
        out = read(card)
    except CardError:
        return library()
    if key:
        save(key, card)
    return out


def _say_dtype_notes(args: argparse.Namespace, cfg: Callable[[], Any]) -> None:
    """With a dtype option given, the model as the options make it (``cfg()``, cached by the
    caller), so the assumptions :func:`graphs.cli.options.apply_dtypes` says (W8A8 where the
    device's tensor cores have the roof, weight-only where not) are said on a card's answer as
    on a miss: said once on every run, not only on the one that built the card (a review found
    them only on a cache miss). Without one, nothing is built (the sympy-free path)."""
    from .options import DTYPE_OPTIONS

    if any(getattr(args, d, None) for d in DTYPE_OPTIONS):
        cfg()


def decode_reports(
    args: argparse.Namespace, config: Callable[[argparse.Namespace], Any], max_batch: int | None = None
) -> tuple[Any, Any, Any]:
    """Report, limits and near/far memory: from the cached card when there is one (no sympy,
    no graph), else from a card built now (and stored), else from the library directly."""
    from graphs.serving.present.cards import build_decode_card, decode_from_card

    cfg = functools.cache(lambda: config(args))
    _say_dtype_notes(args, cfg)
    if routed(args):  # not the step a card holds: the library's, knee and ctx ceiling not solved
        from graphs import decode_report, near_far_memory

        plan = {"ep": args.ep, "routing": routing_of(args)}
        rep = decode_report(
            cfg(), args.device, batch=args.batch, ctx=args.ctx, tp=args.tp, **plan, **_CHECKED
        )
        return rep, None, near_far_memory(cfg(), args.device)

    def library() -> tuple[Any, Any, Any]:
        from graphs import decode_limits, decode_report, near_far_memory

        return (
            decode_report(cfg(), args.device, batch=args.batch, ctx=args.ctx, tp=args.tp, **_CHECKED),
            decode_limits(cfg(), args.device, ctx=args.ctx, tp=args.tp, max_batch=max_batch),
            near_far_memory(cfg(), args.device),
        )

    return served(
        card_key(args, "decode"),
        lambda card: decode_from_card(card, batch=args.batch, ctx=args.ctx, max_batch=max_batch),
        lambda: build_decode_card(cfg(), args.device, tp=args.tp),
        library,
        functools.partial(shipped_card, args, "decode"),
    )


def kv_caps(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> dict[str, Any]:
    """The decode card's cache layout (:func:`graphs.serving.step.ledger_fit.kv_caps`): from the
    cached card when there is one and it checks out, else from the library."""
    from graphs.serving.present.cards import CardError, card_kv_caps

    card = stored_card(args, "decode")
    if card is not None:
        try:
            return card_kv_caps(card)
        except CardError:
            pass  # tampered or malformed: the library's own numbers
    from graphs.serving.step.ledger_fit import kv_caps as library_caps

    return library_caps(config(args), tp=args.tp)


def prefill_report(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any:
    """The prefill report, from the cached card when there is one, else built (and stored)."""
    from graphs.serving.present.cards import build_prefill_card, prefill_from_card

    cfg = functools.cache(lambda: config(args))
    _say_dtype_notes(args, cfg)

    def library() -> Any:
        from graphs import prefill_report as library_prefill

        plan = {"ep": args.ep, "routing": routing_of(args)} if routed(args) else {}
        return library_prefill(
            cfg(),
            args.device,
            batch=args.batch,
            seq=args.seq,
            chunk=args.chunk,
            tp=args.tp,
            **plan,
            **_CHECKED,
        )

    if routed(args):  # not the step a card holds
        return library()
    return served(
        card_key(args, "prefill"),
        lambda card: prefill_from_card(card, batch=args.batch, seq=args.seq, chunk=args.chunk),
        lambda: build_prefill_card(cfg(), args.device, tp=args.tp),
        library,
        functools.partial(shipped_card, args, "prefill"),
    )


def capacity(
    args: argparse.Namespace, config: Callable[[argparse.Namespace], Any], kind: str, card: Any = None
) -> Any:
    """Does this command's point fit (:class:`graphs.serving.step.fit_check.CapacityCheck`)? From the
    cached card's ledger when there is one, else from the library; a point that does not fit
    is checked again by the library, which also says how many devices it needs. ``card``: a
    card already read (``model analyze``'s analysis card holds the ledger too). With ``--ep``
    above 1 the library's check alone: a card's ledger holds every expert on each device, the
    check spreads the routed experts over the ranks."""
    from graphs.serving.present.cards import CardError
    from graphs.serving.step.fit_check import capacity_from_card

    tokens = args.ctx if kind == "decode" else args.seq
    ep = getattr(args, "ep", 1) or 1
    if card is None and ep == 1:
        card = stored_card(args, kind)
    if isinstance(card, dict) and ep == 1:  # a card's ledger holds every expert on each device
        try:
            chk = capacity_from_card(card, batch=args.batch, tokens=tokens)
            if chk.fits:
                return chk
        except CardError:
            pass  # no readable ledger: the library's
    from graphs.serving.step.ledger_fit import capacity_check

    return capacity_check(
        config(args), args.device, phase=kind, batch=args.batch, tokens=tokens, tp=args.tp, ep=ep
    )


def analysis(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any:
    """``model analyze``'s :class:`~graphs.serving.analysis.node_analysis.ModelAnalysis`: from the cached
    analysis card when there is one, else from a card built now (and stored), else from the
    library directly; the roof notes of the device; and the card (None without one)."""
    from graphs.serving.present.cards import analysis_from_card, build_analysis_card, card_notes

    cfg = functools.cache(lambda: config(args))
    _say_dtype_notes(args, cfg)
    point = {"batch": args.batch, "seq": args.seq, "ctx": args.ctx}

    def library() -> Any:
        from costmodel.hardware import get_device
        from costmodel.hardware.fallback import roof_notes
        from graphs import analyze

        return (
            analyze(cfg(), args.device, args.phase, tp=args.tp, **point),
            roof_notes(get_device(args.device)),
            None,
        )

    return served(
        card_key(args, f"analysis-{args.phase}"),
        lambda card: (analysis_from_card(card, **point), card_notes(card), card),
        lambda: build_analysis_card(cfg(), args.device, args.phase, tp=args.tp),
        library,
        functools.partial(shipped_card, args, f"analysis-{args.phase}"),
    )


def default_overhead(args: argparse.Namespace) -> bool:
    """``--overhead-policy``/``--overhead`` as their defaults (no overhead): the ledger a card holds."""
    return bool(args.overhead_policy == "fraction_of_sum" and str(args.overhead).strip() in ("0", "0.0"))


def ledger_report(args: argparse.Namespace, config: Callable[[argparse.Namespace], Any]) -> Any | None:
    """``costmodel ledger``'s decode report from the decode card (cached, or built now and
    stored, as ``decode`` does), or None where a card cannot answer it: a prefill ledger, a
    non-default overhead or activation assumption (the card holds the default ledger), or a
    card that does not read back. The caller then asks the library."""
    from costmodel.errors import CostModelError
    from graphs.serving.present.cards import build_decode_card
    from graphs.serving.step.fit_check import capacity_report_from_card
    from models.context import context_limit
    from models.resolver import config_data

    if args.phase != "decode" or not default_overhead(args) or args.act_bytes_per_token is not None:
        return None
    if not (type(args.batch) is int and args.batch >= 1 and type(args.ctx) is int and args.ctx >= 1):
        return None  # the library says what is wrong with them
    try:
        lim = context_limit(config_data(args.model), str(args.model)[:200])
    except (CostModelError, OSError, ValueError):
        return None
    limit = lim.tokens if lim is not None else None
    cfg = functools.cache(lambda: config(args))
    _say_dtype_notes(args, cfg)

    def from_card(card: dict[str, Any]) -> Any:
        from costmodel.notes import say
        from graphs.serving.present.cards import card_device_notes

        for note in card_device_notes(card):  # the device's own notes, said once as every command says them
            say(note)
        return capacity_report_from_card(card, batch=args.batch, ctx=args.ctx, model_limit=limit)

    return served(
        card_key(args, "decode"),
        from_card,
        lambda: build_decode_card(cfg(), args.device, tp=args.tp),
        lambda: None,
        functools.partial(shipped_card, args, "decode"),
    )


def sweep_forms(
    args: argparse.Namespace,
    config: Callable[[argparse.Namespace], Any],
    combos: list[tuple[str, str | None, str | None]],
) -> list[Any]:
    """Each (device, weight dtype, KV dtype) configuration's decode forms for ``sweep``: from
    its cached decode card when there is one (no sympy), else compiled now (the card stored).
    The configuration is the library's (:func:`graphs.serving.analysis.sweeps.sweep`: the model with the
    sweep's dtypes replaced); its card key names the sweep dtypes, so it never answers for a
    ``decode`` of another configuration."""
    base = functools.cache(lambda: config(args))
    return [_sweep_one(args, base, dev, wd, kvd) for dev, wd, kvd in combos]


def _sweep_one(
    args: argparse.Namespace, base: Callable[[], Any], dev: str, wd: str | None, kvd: str | None
) -> Any:
    from costmodel.hardware import get_device
    from graphs.serving.present.cards import build_decode_card, decode_forms_from_card
    from models.quantization import native_matmul, weights_in

    from .options import note_once

    for across in get_device(dev).group_notes(args.tp):  # a tp group priced on the network, as the library says
        note_once(args, across)
    # as the library sweeps it: every weight in wd, the routed experts' own format too, and
    # fp8/nvfp4 weights run W8A8/W4A4 where the tensor cores can
    plain = base() if kvd is None else base().replace(kv_dtype=kvd)
    if wd is not None:
        plain, said = weights_in(plain, wd)
        note_once(args, said)
    native, note = native_matmul(plain, [get_device(dev)]) if wd is not None else (plain, None)
    note_once(args, note)
    cfg = functools.cache(lambda: native)

    def library() -> Any:
        from graphs.serving.analysis.sweeps import decode_forms

        return decode_forms(cfg(), dev, args.tp)

    one = argparse.Namespace(**{**vars(args), "device": dev})
    return served(
        card_key(one, f"decode-sweep:{wd}:{kvd}"),
        decode_forms_from_card,
        lambda: build_decode_card(cfg(), dev, tp=args.tp),
        library,
    )


#: the commands whose cards ship, each a (kind, arguments after the model) pair; ``{device}``
#: is the device's catalog name (``benchmarks/build_cards.py``)
SHIPPED_COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decode", ("decode", "{model}", "--device", "{device}")),
    ("prefill", ("prefill", "{model}", "--device", "{device}")),
    ("analysis-decode", ("model", "analyze", "{model}", "--device", "{device}", "--phase", "decode")),
    ("analysis-prefill", ("model", "analyze", "{model}", "--device", "{device}", "--phase", "prefill")),
)


def shipped_entries(model: str, device: str) -> dict[str, dict[str, Any]]:
    """The cards :data:`SHIPPED_COMMANDS` read for catalog ``model`` on catalog ``device`` (its
    catalog name) at the default plan, each built as the command builds it on a miss, keyed as
    :func:`shipped_card` looks it up (:func:`shipped_key`). A card the arithmetic cannot hold
    (:class:`~graphs.serving.step.card_format.CardError`) is left out: the command asks the
    library for it, as it does now; so is one the engine refuses (a
    :class:`~costmodel.errors.CostModelError`, e.g. a device with no roof for the model's
    dtypes): the command derives it and says why.

    Parameters
    ----------
    model, device : str
        A catalog model name and a catalog device name.

    Returns
    -------
    dict
        Shipped key -> card (JSON-ready).
    """
    from costmodel.errors import CostModelError
    from graphs.serving.present.cards import (
        CardError,
        build_analysis_card,
        build_decode_card,
        build_prefill_card,
    )

    from .main import build_parser
    from .model_option import resolve_config

    out: dict[str, dict[str, Any]] = {}
    for kind, argv in SHIPPED_COMMANDS:
        words = [w.format(model=model, device=device) for w in argv]
        args = build_parser([words[0]]).parse_args(words)
        parts = card_parts(args, device)
        if parts is None:
            continue
        try:
            cfg = resolve_config(args)
            if kind == "decode":
                card = build_decode_card(cfg, args.device, tp=args.tp)
            elif kind == "prefill":
                card = build_prefill_card(cfg, args.device, tp=args.tp)
            else:
                card = build_analysis_card(cfg, args.device, args.phase, tp=args.tp)
        except (CardError, CostModelError):
            continue
        out[shipped_key(kind, parts)] = card
    return out
