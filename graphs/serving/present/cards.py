"""Report cards: a decode step's compiled forms as JSON-ready text, and their evaluation.

A card holds what :func:`graphs.serving.analysis.phases.decode_report`,
:func:`graphs.serving.analysis.limits.decode_limits` and :func:`graphs.serving.analysis.phases.near_far_memory`
need to answer for *any* batch and context of one (model, device, tp, dtypes): the step's
fields as arithmetic text in ``B`` and ``ctx`` (the per-kernel sum of rooflines, the whole-step
terms, weight and KV reads, FLOPs), the memory/compute split behind the knee, and the
constants. :func:`build_decode_card` derives it from the compiled step (sympy, once);
:func:`decode_from_card` evaluates it with :func:`costmodel.arith.compile_numeric` and fills
the same report dataclasses through the same functions (:mod:`graphs.serving.step.reports`), in a
process that never imports sympy, numpy or networkx. The command line stores cards in the
persistent cache (:mod:`costmodel.formcache`), so a repeated ``costmodel decode`` skips the
engine entirely.

Floats are written with ``repr`` (17 significant digits) and rationals as ``p/q``: evaluating
the text gives the lambdified values to float rounding (a test checks 1e-12).

A card read back is data from a file: the cache's digest (:func:`costmodel.formcache.load`)
covers its whole text, and this module still trusts nothing it reads. Every form must reproduce
the card's check point (printed forms included); every constant must be a finite number, none
negative, counts whole and positive, bandwidth and the reads per second above zero, names short
printable text; near/far memory must agree with the card's own bandwidth; and every value
served must be finite and non-negative, with the whole-step bound the largest term and at most
the per-kernel sum. A card that fails any of these raises :class:`CardError`, which the command
line answers by recomputing: a card can cost time, never change an answer.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from costmodel.arith import ArithError, compile_numeric
from costmodel.keys import Phase

from ..step.card_format import CARD_VERSION, CardError, card_kv_caps, card_number, to_text
from ..step.reports import (
    STEP_FIELDS,
    DecodeLimits,
    DecodeReport,
    LimitNumbers,
    NearFarMemory,
    chunk_plan,
    decode_from_fields,
    limits_at,
    phase_fields,
    prefill_from_fields,
)

__all__ = [
    "CardError",
    "card_device_notes",
    "build_decode_card",
    "decode_from_card",
    "build_prefill_card",
    "prefill_from_card",
    "to_text",
    "card_kv_caps",
    "CARD_VERSION",
    "build_analysis_card",
    "analysis_from_card",
    "card_notes",
    "decode_forms_from_card",
    "SHIPPED_CARDS",
]

#: every catalog model's cards on every catalog device at the default plan, built ahead by
#: ``benchmarks/build_cards.py`` (:mod:`costmodel.formstore`; :func:`graphs.cli.cached.shipped_card`)
SHIPPED_CARDS = Path(__file__).with_name("shipped_cards.bin")

_ARGS = ("B", "ctx")
_FIELDS = STEP_FIELDS  #: the step fields a card stores


def build_decode_card(config: Any, device: Any, *, tp: int = 1) -> dict[str, Any]:
    """The decode card of ``config`` on ``device`` at ``tp`` (module doc), JSON-ready.

    Raises :class:`CardError` when a form uses a function the card's arithmetic lacks (the
    caller then uses the library functions directly).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    dict
        The card: the step's forms as text in ``B`` and ``ctx`` (s, FLOP, bytes), the ledger,
        the limits' forms, the cache layout and a check point.

    Raises
    ------
    CardError
        When a form cannot be held as card text.
    """
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.cost import as_float

    from ..analysis.limits import LimitForms
    from ..analysis.phases import decode_constants, near_far_memory, report_notes
    from ..step.compiled import compiled_step
    from ..step.ledger_fit import kv_caps, ledger_card
    from ..step.workload import as_workload

    w = as_workload(config)
    c = compiled_step(w, device, Phase.DECODE, tp=tp)
    hw = c.hardware
    f = c.forms
    fields = {k: getattr(f, k) for k in _FIELDS}
    lf = c.memo("limit_forms", lambda: LimitForms.of(c))
    bw, wbytes, emb = c.memo("decode_constants", lambda: decode_constants(w, c, tp))
    units = {}
    for u, form in lf.comp.items():
        c_per, ceiling = c.memo(f"limits:{u}", functools.partial(lf.ceiling, u))
        units[u] = {"comp": to_text(form), "per_sequence": str(c_per), "ceiling": ceiling}
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.symbols import B

    nf = near_far_memory(w, hw)
    return {
        "kind": "decode",
        "version": CARD_VERSION,
        "model": w.name,
        "weight_dtype": w.config.weight_dtype,
        "kv_dtype": w.config.cache_dtype,
        "device": hw.name,
        "tp": tp,
        "power_w": as_float(hw.power_w) if hw.power_w is not None else None,
        "roof_notes": list(report_notes(w.config, hw, tp)),
        "fields": {k: to_text(v) for k, v in fields.items()},
        "terms": {k: to_text(v) for k, v in f.terms_s.items()},
        "bandwidth": bw,
        "weights_bytes": wbytes,
        "embedding_bytes": emb,
        "limits": {
            "a": to_text(lf.mem.subs(B, 0)),
            "b": to_text(lf.b_per),
            "b_per_sequence": str(lf.b_per),
            "mem": to_text(lf.mem),
            "linear": lf.linear,
            "units": units,
        },
        "near_far": nf.to_dict(),
        "check": _check_point(c, lf),
        "kv_caps": kv_caps(w, tp=tp),
        "ledger": ledger_card(w, hw, Phase.DECODE, tp, {"B": 7, "ctx": 1234}),
    }


def _check_point(c: Any, lf: Any) -> dict[str, Any]:
    """Every stored form's value at one point, substituted into the sympy forms: a card whose
    text evaluates differently anywhere there is refused when read (:func:`decode_from_card`)."""
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.symbols import B, ctx

    at = {B: 7, ctx: 1234}
    f = c.forms
    fields = {k: float(getattr(f, k).xreplace(at)) for k in _FIELDS}
    terms = {k: float(v.xreplace(at)) for k, v in f.terms_s.items()}
    comp = {u: float(v.xreplace(at)) for u, v in lf.comp.items()}
    return {
        "B": 7,
        "ctx": 1234,
        "fields": fields,
        "terms": terms,
        "comp": comp,
        "mem": float(lf.mem.xreplace(at)),
        "a": float(lf.mem.subs(B, 0).xreplace(at)),
        "b": float(lf.b_per.xreplace(at)),
    }


def _count(x: Any, name: str) -> int:
    """A count read from a card: a positive ``int`` (not a float, not a bool)."""
    if type(x) is not int or x < 1:
        raise CardError(f"card field {name} = {x!r} is not a positive integer")
    return x


def _name(x: Any, name: str) -> str:
    """A name read from a card (printed as is): printable text of 1 to 200 characters."""
    if not isinstance(x, str) or not 0 < len(x) <= 200 or not x.isprintable():
        raise CardError(f"card field {name} is not a printable name of at most 200 characters")
    return x


def _power(card: dict[str, Any]) -> float | None:
    p = card["power_w"]
    return None if p is None else card_number(p, "power_w", positive=True)


def _reproduces(pairs: list[tuple[float, Any]], what: str) -> None:
    """Each ``(evaluated, stored)`` pair agrees to 1e-9 (a stored value is a checked number)."""
    for i, (got, stored) in enumerate(pairs):
        if not math.isclose(got, card_number(stored, f"check[{i}]"), rel_tol=1e-9, abs_tol=1e-300):
            raise CardError(f"the card's {what} do not reproduce its check point")


def _check_served(values: dict[str, Any], where: str) -> None:
    """Values about to be served: finite and non-negative (:func:`compile_numeric` already
    refuses non-finite ones), the whole-step roofline the largest term, and at most the
    per-kernel sum (:class:`graphs.serving.step.compiled.StepForms` builds them so)."""
    terms = values["terms_s"]
    for k, v in [*((k, v) for k, v in values.items() if k != "terms_s"), *terms.items()]:
        card_number(v, f"{k} {where}")
    opt, step = values["optimistic_step_s"], values["step_s"]
    if not step > 0 or (terms and not math.isclose(opt, max(terms.values()), rel_tol=1e-9, abs_tol=1e-300)):
        raise CardError(f"the card's step {where} is not its largest term")
    if opt > step * (1 + 1e-9):
        raise CardError(f"the card's whole-step bound {where} exceeds its per-kernel sum")


def _verify(
    card: dict[str, Any],
    fields: dict[str, Any],
    terms: dict[str, Any],
    comp: dict[str, Any],
    a: Any,
    b: Any,
    mem: Any,
) -> None:
    chk = card["check"]
    bb, cc = float(_count(chk["B"], "check.B")), float(_count(chk["ctx"], "check.ctx"))
    lim = card["limits"]
    pairs = [(fields[k](bb, cc), chk["fields"][k]) for k in fields]
    pairs += [(terms[k](bb, cc), chk["terms"][k]) for k in terms]
    pairs += [(comp[u](bb, cc), chk["comp"][u]) for u in comp]
    pairs += [(mem(bb, cc), chk["mem"]), (a(cc), chk["a"]), (b(cc), chk["b"])]
    # the printed per-sequence forms are the same functions of ctx as the evaluated ones
    pairs.append((compile_numeric(lim["b_per_sequence"], ("ctx",))(cc), chk["b"]))
    for u, d in lim["units"].items():
        pairs.append((bb * compile_numeric(d["per_sequence"], ("ctx",))(cc), chk["comp"][u]))
    _reproduces(pairs, "forms")
    if set(comp) != set(lim["units"]) or set(chk["comp"]) != set(comp):
        raise CardError("the card's compute units disagree with its check point")


def _near_far(d: dict[str, Any], bandwidth: float) -> NearFarMemory:
    nf = NearFarMemory(
        model=_name(d["model"], "near_far.model"),
        device=_name(d["device"], "near_far.device"),
        weights_bytes=card_number(d["weights_bytes"], "near_far.weights_bytes"),
        full_memory_reads_per_s=card_number(
            d["full_memory_reads_per_s"], "near_far.full_memory_reads_per_s", positive=True
        ),
        devices_to_hold_weights=_count(d["devices_to_hold_weights"], "near_far.devices_to_hold_weights"),
        per_token_bound_s=card_number(d["per_token_bound_s"], "near_far.per_token_bound_s"),
    )
    # per_token_bound = weights / (devices * bandwidth) (graphs.serving.analysis.phases.near_far_memory)
    want = nf.weights_bytes / (nf.devices_to_hold_weights * bandwidth)
    if not math.isclose(nf.per_token_bound_s, want, rel_tol=1e-9, abs_tol=1e-300):
        raise CardError("the card's near/far memory disagrees with its bandwidth")
    return nf


def _check_limits(lim: DecodeLimits, where: str) -> None:
    for k in (
        "weights_time_s",
        "ctx_ceiling",
        "knee_batch",
        "throughput_ceiling_tokens_per_s",
        "batch_for_90pct_of_ceiling",
    ):
        v = getattr(lim, k)
        if v is not None:
            card_number(v, f"{k} {where}")


def _notes(card: dict[str, Any]) -> tuple[str, ...]:
    """The card's roof notes (:func:`costmodel.hardware.fallback.roof_notes`), as text."""
    notes = card["roof_notes"]
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise CardError("the card's roof notes are not a list of text")
    return tuple(notes)


def _fn(text: Any) -> Any:
    return compile_numeric(text, _ARGS)


def decode_from_card(
    card: dict[str, Any], *, batch: int, ctx: int, max_batch: int | None = None
) -> tuple[DecodeReport, DecodeLimits, NearFarMemory]:
    """The decode report, limits and near/far memory at ``batch`` and ``ctx`` from a card
    (with ``max_batch``, the largest batch that fits, the limits say what batching reaches).

    Raises :class:`CardError` when the card is malformed or does not reproduce its check point.

    Parameters
    ----------
    card : dict
        A decode card as read from JSON.
    batch : int
        Sequences in the step.
    ctx : int
        Cached tokens per sequence.
    max_batch : int, optional
        The largest batch that fits at ``ctx``.

    Returns
    -------
    tuple of (DecodeReport, DecodeLimits, NearFarMemory)

    Raises
    ------
    CardError
        When the card is malformed or does not reproduce its check point.
    """
    try:
        if card.get("kind") != "decode" or card.get("version") != CARD_VERSION:
            raise CardError("not a decode card of this version")
        model, device = _name(card["model"], "model"), _name(card["device"], "device")
        tp, power = _count(card["tp"], "tp"), _power(card)
        bandwidth = card_number(card["bandwidth"], "bandwidth", positive=True)
        weights = card_number(card["weights_bytes"], "weights_bytes")
        embedding = card_number(card["embedding_bytes"], "embedding_bytes")
        if embedding > weights:
            raise CardError("card field embedding_bytes exceeds weights_bytes")
        card_kv_caps(card)
        fields = {k: _fn(card["fields"][k]) for k in _FIELDS}
        terms = {str(k): _fn(t) for k, t in card["terms"].items()}
        lim = card["limits"]
        mem = _fn(lim["mem"])
        units = lim["units"]
        comp = {str(u): _fn(d["comp"]) for u, d in units.items()}
        a, b = compile_numeric(lim["a"], ("ctx",)), compile_numeric(lim["b"], ("ctx",))
        if not isinstance(lim["linear"], bool):
            raise CardError("card field limits.linear is not true or false")
        _verify(card, fields, terms, comp, a, b, mem)
        ceilings = {
            str(u): None
            if d["ceiling"] is None
            else card_number(d["ceiling"], f"ceiling of {u}", positive=True)
            for u, d in units.items()
        }
        where = f"at batch {batch}, ctx {ctx}"
        values: dict[str, Any] = {k: f(batch, ctx) for k, f in fields.items()}
        values["terms_s"] = {k: f(batch, ctx) for k, f in terms.items()}
        _check_served(values, where)
        rep = decode_from_fields(
            phase_fields(
                values,
                model=model,
                device=device,
                power_w=power,
                phase=Phase.DECODE,
                batch=batch,
                tokens=batch,
                tp=tp,
                notes=_notes(card),
            ),
            bandwidth=bandwidth,
            weights_bytes=weights,
            embedding_bytes=embedding,
        )
        numbers = LimitNumbers(
            a=a,
            b=b,
            mem=mem,
            comp=comp,
            linear=bool(lim["linear"]),
            b_form=str(lim["b_per_sequence"]),
            unit_forms=lambda u: (str(units[u]["per_sequence"]), ceilings[u]),
            link=_links(terms),
            step=fields["step_s"],
        )
        nf = _near_far(card["near_far"], bandwidth)
        limits = limits_at(numbers, ctx, max_batch)
        _check_limits(limits, where)
        return rep, limits, nf
    except CardError:
        raise
    except (ArithError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable decode card: {type(exc).__name__}: {exc}") from None


def _links(terms: dict[str, Any]) -> Any:
    """The sum of a step's ``link:*`` terms as a function of its point (None: no collective)."""
    links = [f for k, f in terms.items() if k.startswith("link:")]
    if not links:
        return None
    return lambda *at: sum(f(*at) for f in links)


_PREFILL = ("B", "S")
_CHUNK = ("B", "S", "prefix")


def build_prefill_card(config: Any, device: Any, *, tp: int = 1) -> dict[str, Any]:
    """The prefill card: the step's fields in ``B`` and ``S`` and one chunk's step in ``B``,
    ``S`` and the cached ``prefix`` (for chunked prefill), JSON-ready.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    dict

    Raises
    ------
    CardError
        When a form cannot be held as card text.
    """
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.cost import as_float

    from ..analysis.phases import report_notes
    from ..step.compiled import compiled_step
    from ..step.ledger_fit import ledger_card
    from ..step.workload import as_workload

    w = as_workload(config)
    c = compiled_step(w, device, Phase.PREFILL, tp=tp)
    cc = compiled_step(w, device, Phase.PREFILL, tp=tp, chunked=True)
    hw, f = c.hardware, c.forms
    fields = {
        k: getattr(f, k)
        for k in ("step_s", "optimistic_step_s", "weight_read_s", "kv_read_s", "flops", "attention_flops")
    }
    return {
        "kind": "prefill",
        "version": CARD_VERSION,
        "model": w.name,
        "device": hw.name,
        "tp": tp,
        "power_w": as_float(hw.power_w) if hw.power_w is not None else None,
        "roof_notes": list(report_notes(w.config, hw, tp)),
        "fields": {k: to_text(v, _PREFILL) for k, v in fields.items()},
        "terms": {k: to_text(v, _PREFILL) for k, v in f.terms_s.items()},
        "chunk_step": to_text(cc.forms.step_s, _CHUNK),
        "check": _prefill_check(c, cc),
        "ledger": ledger_card(w, hw, Phase.PREFILL, tp, {"B": 3, "S": 777}),
    }


def _prefill_check(c: Any, cc: Any) -> dict[str, Any]:
    """Every stored form's value at one point (substituted into the sympy forms)."""
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.symbols import B, S

    from ..step.compiled import PREFIX

    at = {B: 3, S: 777}
    f = c.forms
    return {
        "B": 3,
        "S": 777,
        "prefix": 4096,
        "fields": {k: float(getattr(f, k).xreplace(at)) for k in _FIELDS},
        "terms": {k: float(v.xreplace(at)) for k, v in f.terms_s.items()},
        "chunk_s": float(cc.forms.step_s.xreplace({**at, PREFIX: 4096})),
    }


def prefill_from_card(card: dict[str, Any], *, batch: int, seq: int, chunk: int | None = None) -> Any:
    """The :class:`~graphs.serving.step.reports.PrefillReport` at ``batch`` x ``seq`` from a card
    (chunked when ``chunk`` is given, as :func:`graphs.serving.analysis.phases.prefill_report`).

    Parameters
    ----------
    card : dict
        A prefill card as read from JSON.
    batch : int
        Prompts in the step.
    seq : int
        Prompt tokens each.
    chunk : int, optional
        Chunk size (tokens) of chunked prefill.

    Returns
    -------
    PrefillReport

    Raises
    ------
    CardError
        When the card is malformed or does not read back.
    """
    try:
        if card.get("kind") != "prefill" or card.get("version") != CARD_VERSION:
            raise CardError("not a prefill card of this version")
        fields = {k: compile_numeric(card["fields"][k], _PREFILL) for k in _FIELDS}
        terms = {str(k): compile_numeric(t, _PREFILL) for k, t in card["terms"].items()}
        step_chunk = compile_numeric(card["chunk_step"], _CHUNK)
        chk = card["check"]
        bb, ss = float(_count(chk["B"], "check.B")), float(_count(chk["S"], "check.S"))
        pp = float(_count(chk["prefix"], "check.prefix"))
        pairs = [(fields[k](bb, ss), chk["fields"][k]) for k in fields]
        pairs += [(terms[k](bb, ss), chk["terms"][k]) for k in terms]
        pairs.append((step_chunk(bb, ss, pp), chk["chunk_s"]))
        _reproduces(pairs, "forms")
        model, device = _name(card["model"], "model"), _name(card["device"], "device")
        power, tp = _power(card), _count(card["tp"], "tp")
        values: dict[str, Any] = {k: fn(batch, seq) for k, fn in fields.items()}
        values["terms_s"] = {k: fn(batch, seq) for k, fn in terms.items()}
        _check_served(values, f"at batch {batch}, seq {seq}")
        base = phase_fields(
            values,
            model=model,
            device=device,
            power_w=power,
            phase=Phase.PREFILL,
            batch=batch,
            tokens=batch * seq,
            tp=tp,
            notes=_notes(card),
        )
    except CardError:
        raise
    except (ArithError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable prefill card: {type(exc).__name__}: {exc}") from None
    plan = chunk_plan(seq, chunk)  # bad chunks are the user's error, not the card's
    if plan is None:
        return prefill_from_fields(base)
    n_full, rest = plan
    assert chunk is not None  # chunk_plan returns a plan only for a chunk
    try:
        total: float = sum(step_chunk(batch, chunk, i * chunk) for i in range(n_full))
        if rest:
            total += step_chunk(batch, rest, n_full * chunk)
        card_number(total, f"chunked prefill time at batch {batch}, seq {seq}, chunk {chunk}", positive=True)
    except ArithError as exc:
        raise CardError(f"unreadable prefill card: {exc}") from None
    return prefill_from_fields(
        base, chunk=chunk, chunks=n_full + (1 if rest else 0), chunked_s=total, power_w=power
    )


def build_analysis_card(config: Any, device: Any, phase: str, *, tp: int = 1) -> dict[str, Any]:
    """The analysis card of ``model analyze``: the compiled node table
    (:func:`graphs.serving.analysis.classify.node_table`) and the step fields it needs as text in ``B``
    and ``ctx`` (decode) or ``S`` (prefill), the closed forms as printed, JSON-ready.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    dict

    Raises
    ------
    CardError
        When a form cannot be held as card text.
    """
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.symbols import dim

    from ..analysis.classify import closed_forms_latex, node_table
    from ..analysis.phases import report_notes
    from ..step.compiled import compiled_step
    from ..step.totals import closed_forms
    from ..step.workload import as_workload

    w = as_workload(config)
    ph = Phase(phase)
    args = _ARGS if ph == Phase.DECODE else _PREFILL
    c = compiled_step(w, device, ph, tp=tp)
    t = node_table(c)
    f = c.forms
    step = {k: getattr(f, k) for k in _ANALYSIS_STEP}
    point = {"B": 7, "ctx": 1234} if ph == Phase.DECODE else {"B": 3, "S": 777}  # the ledger's too
    at = {dim(k): v for k, v in point.items()}
    forms = closed_forms(w.config, ph)
    st = t.statics
    try:  # the capacity check's ledger (absent when the card cannot hold it: the library checks)
        # loaded on use, not at import: a cached report reads its card without the engine (module doc)
        from ..step.ledger_fit import ledger_card

        ledger = {"ledger": ledger_card(w, c.hardware, ph, tp, point)}
    except CardError:
        ledger = {}
    return {
        **ledger,
        "kind": "analysis",
        "version": CARD_VERSION,
        "phase": str(ph),
        "model": w.name,
        "device": c.hardware.name,
        "tp": tp,
        "roof_notes": list(report_notes(w.config, c.hardware, tp)),
        "nodes": {
            "names": list(st.names),
            "ops": list(st.ops),
            "groups": list(st.groups),
            "labels": [list(x) for x in st.labels],
            "unbounded": [list(x) for x in st.unbounded],
        },
        "values": [to_text(e, args) for e in t.exprs],
        "step": {k: to_text(v, args) for k, v in step.items()},
        "terms": {k: to_text(v, args) for k, v in f.terms_s.items()},
        "closed_forms": {k: str(v) for k, v in forms.items()},
        "closed_forms_latex": closed_forms_latex(forms),
        "check": {
            **point,
            "at": list(point.values()),
            "values": [float(_value(e, at)) for e in t.exprs],
            "step": {k: float(_value(v, at)) for k, v in step.items()},
            "terms": {k: float(_value(v, at)) for k, v in f.terms_s.items()},
        },
    }


#: the step fields an analysis card keeps beside its node table
_ANALYSIS_STEP = ("flops", "attention_flops", "optimistic_step_s")


def _value(e: Any, at: dict[Any, int]) -> float:
    """An engine-built expression's value at a point (sympy substitution, the card's check)."""
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    import sympy

    return float(sympy.sympify(e).xreplace(at))


def _printed(x: Any, name: str) -> str:
    """A closed form's printed text read from a card: printable, at most 20,000 characters."""
    if not isinstance(x, str) or len(x) > 20_000 or not x.isprintable():
        raise CardError(f"card closed form {name[:40]} is not printable text of at most 20,000 characters")
    return x


def _texts(x: Any, name: str) -> list[str]:
    if not isinstance(x, list) or not all(isinstance(v, str) and len(v) <= 200 for v in x):
        raise CardError(f"card field {name} is not a list of short text")
    return x


def analysis_from_card(card: dict[str, Any], *, batch: int, seq: int, ctx: int) -> Any:
    """The :class:`~graphs.serving.analysis.node_analysis.ModelAnalysis` at ``batch`` and ``seq`` (prefill)
    or ``ctx`` (decode) from an analysis card: the same rows and totals
    :func:`graphs.serving.analysis.classify.analyze` gives (:func:`~graphs.serving.analysis.node_analysis.analysis_from_values`
    fills both), to float rounding.

    Parameters
    ----------
    card : dict
        An analysis card as read from JSON.
    batch : int
        Sequences in the step.
    seq : int
        Prompt tokens per sequence (prefill).
    ctx : int
        Cached tokens per sequence (decode).

    Returns
    -------
    ModelAnalysis

    Raises
    ------
    CardError
        When the card is malformed or does not read back.
    """
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from ..analysis.node_analysis import NodeStatics, analysis_from_values

    try:
        if card.get("kind") != "analysis" or card.get("version") != CARD_VERSION:
            raise CardError("not an analysis card of this version")
        ph = Phase(card["phase"])
        args = _ARGS if ph == Phase.DECODE else _PREFILL
        nd = card["nodes"]
        labels = [tuple(_texts(x, "nodes.labels")) for x in nd["labels"]]
        statics = NodeStatics(
            tuple(_texts(nd["names"], "nodes.names")),
            tuple(_texts(nd["ops"], "nodes.ops")),
            tuple(_texts(nd["groups"], "nodes.groups")),
            tuple(labels),
            tuple(tuple(_texts(x, "nodes.unbounded")) for x in nd["unbounded"]),
        )
        n = len(statics.names)
        if not (len(statics.ops) == len(statics.groups) == len(labels) == len(statics.unbounded) == n):
            raise CardError("the card's node lists disagree in length")
        values = [compile_numeric(v, args) for v in card["values"]]
        step = {k: compile_numeric(card["step"][k], args) for k in _ANALYSIS_STEP}
        terms = {str(k): compile_numeric(v, args) for k, v in card["terms"].items()}
        chk = card["check"]
        p0 = tuple(float(_count(v, "check.at")) for v in chk["at"])
        pairs = [(fn(*p0), s) for fn, s in zip(values, chk["values"], strict=True)]
        pairs += [(step[k](*p0), chk["step"][k]) for k in step]
        pairs += [(terms[k](*p0), chk["terms"][k]) for k in terms]
        _reproduces(pairs, "node table")
        forms = {_name(k, "closed form"): _printed(v, k) for k, v in card["closed_forms"].items()}
        latex = {_name(k, "closed form"): _printed(v, k) for k, v in card["closed_forms_latex"].items()}
        pt = (float(batch), float(seq if ph == Phase.PREFILL else ctx))
        out = [card_number(fn(*pt), f"node table value {i}") for i, fn in enumerate(values)]
        at = {k: card_number(fn(*pt), k) for k, fn in step.items()}
        return analysis_from_values(
            statics,
            out,
            {**at, "terms_s": {k: card_number(fn(*pt), k) for k, fn in terms.items()}},
            model=_name(card["model"], "model"),
            device=_name(card["device"], "device"),
            phase=ph,
            batch=batch,
            seq=seq,
            ctx=ctx,
            tp=_count(card["tp"], "tp"),
            closed_forms=forms,
            closed_forms_latex=latex,
        )
    except CardError:
        raise
    except (ArithError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable analysis card: {type(exc).__name__}: {exc}") from None


def card_notes(card: dict[str, Any]) -> tuple[str, ...]:
    """A card's roof notes (:func:`costmodel.hardware.fallback.roof_notes`), as text.

    Parameters
    ----------
    card : dict
        Any card as read from JSON.

    Returns
    -------
    tuple of str

    Raises
    ------
    CardError
        When its notes do not read back.
    """
    try:
        return _notes(card)
    except (KeyError, TypeError) as exc:
        raise CardError(f"unreadable card notes: {type(exc).__name__}") from None


#: what marks a card's note as one about the device itself, as
#: :func:`costmodel.hardware.fallback.roof_notes` words it with ``used=()``: a series resolved to
#: its one part, preliminary figures (a test pins the two against it on every catalog device)
DEVICE_NOTE_MARKS = (" names a series: its one catalog part, ", " figures are preliminary: ")


def card_device_notes(card: dict[str, Any]) -> tuple[str, ...]:
    """The card's notes about the device itself (a series, preliminary figures): what a command
    pricing no FLOPs (``ledger``) says of its device, read without the engine.

    Parameters
    ----------
    card : dict
        Any card as read from JSON.

    Returns
    -------
    tuple of str

    Raises
    ------
    CardError
        When its notes do not read back.
    """
    return tuple(n for n in card_notes(card) if any(m in n for m in DEVICE_NOTE_MARKS))


def decode_forms_from_card(card: dict[str, Any]) -> Any:
    """A sweep's :class:`~graphs.serving.analysis.sweeps.DecodeForms` from a decode card: the step time
    and the ledger's total bytes as numpy functions of ``B`` and ``ctx``
    (:func:`costmodel.arith.compile_array`), after the card's forms reproduce its check point.

    Parameters
    ----------
    card : dict
        A decode card as read from JSON.

    Returns
    -------
    DecodeForms
        ``tpot(B, ctx)`` (s) and ``memory(B, ctx)`` (bytes), numpy-vectorised.

    Raises
    ------
    CardError
        When the card is malformed or does not reproduce its check point.
    """
    # loaded on use, not at import: a cached report reads its card without the engine (module doc)
    from costmodel.arith import compile_array

    from ..analysis.sweeps import DecodeForms
    from ..step.fit_check import LEDGER_TERMS, capacity_from_card

    try:
        if card.get("kind") != "decode" or card.get("version") != CARD_VERSION:
            raise CardError("not a decode card of this version")
        step_text = card["fields"]["step_s"]
        chk = card["check"]
        bb, cc = float(_count(chk["B"], "check.B")), float(_count(chk["ctx"], "check.ctx"))
        _reproduces([(_fn(step_text)(bb, cc), chk["fields"]["step_s"])], "step")
        capacity_from_card(card, batch=1, tokens=1)  # the ledger reads back and reproduces its point
        led = card["ledger"]
        terms = [compile_array(led["terms"][k], _ARGS) for k in LEDGER_TERMS]
        step = compile_array(step_text, _ARGS)

        def memory(b: Any, c: Any) -> Any:
            return sum(t(b, c) for t in terms)

        return DecodeForms(
            model=_name(card["model"], "model"),
            device=_name(card["device"], "device"),
            weight_dtype=_name(card["weight_dtype"], "weight_dtype"),
            kv_dtype=_name(card["kv_dtype"], "kv_dtype"),
            power_w=_power(card),
            capacity_bytes=card_number(led["capacity"], "ledger.capacity", positive=True),
            tpot=step,
            memory=memory,
        )
    except CardError:
        raise
    except (ArithError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable decode card: {type(exc).__name__}: {exc}") from None
