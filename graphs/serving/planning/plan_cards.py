"""The search's per-plan forms kept across processes as cards (:mod:`costmodel.formcache`).

A roofline-bound search (:func:`graphs.serving.planning.design_search.search`) evaluates, per
plan (a device, dtypes, ``tp`` and ``ep``), three closed forms over its grid: the decode step
time ``t_dec(B, ctx)``, the prefill step time ``t_pre(B, S)`` (both the compiled step's
``step_s``, :mod:`graphs.serving.step.compiled`) and the decode ledger's bytes per device
``M(B, ctx)`` (:func:`graphs.serving.step.ledger_fit.decode_memory`), plus the routed experts'
weight bytes. Deriving them (the model graph, its per-kernel roofline terms, the ledger, and
``lambdify``) is most of a cold search; a card keeps them as arithmetic text read back by the
whitelisting :func:`costmodel.arith.compile_array` (no ``eval``, no sympy), so a later process
compiles nothing for a plan it has seen.

The text is the very expression the compiled form evaluates: the body ``lambdify`` generated
(:func:`graphs.serving.step.card_format.lambdified_text`), its numpy calls renamed to the whitelist's (``reduce(maximum, [a, b])``
is ``Max(a, b)``, ``ceil`` is ``ceiling``). The reader parses it into the same tree Python does
and evaluates the same operations in the same order on the same doubles, so a form read from a
card gives the compiled form's values bit for bit (a test over the catalog's plans), and a warm
search answers exactly what a cold one does.

Key
    :func:`costmodel.formcache.cache_key` over :data:`CARD_VERSION`, the model config, the
    device and ``tp``, ``ep`` (the engine's sources are in every key: an edit is a miss).
Trust
    The card holds each form's values at :data:`CHECKS`, computed by the compiled forms that
    wrote it; a card whose forms do not reproduce them bit for bit, or that does not read back
    (a number out of range, text the reader refuses), is rebuilt and rewritten: a card can cost
    time, never an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from costmodel import formcache
from costmodel.arith import ArithError, compile_array
from costmodel.hardware import Hardware
from graphs.serving.step.card_format import CardError, card_number, lambdified_text

__all__ = ["CARD_VERSION", "CHECKS", "CardForm", "PlanForms", "plan_forms"]

#: the layout of a plan card (a card of another is rebuilt)
CARD_VERSION = 1
#: the (batch, context-or-prompt) points a card's forms are checked at when read back: one
#: sequence, a batch across the KV-block and tile sizes, and a long prompt
CHECKS = ((1.0, 1.0), (7.0, 3000.0), (64.0, 4096.0), (512.0, 131072.0))


class CardForm:
    """One form of a plan: a numpy function of arrays (broadcast), as a compiled step's
    ``step_array`` is."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._memo: dict[str, Any] = {}

    def __call__(self, *arrays: Any) -> np.ndarray:
        return self.step_array(*arrays)

    def step_array(self, *arrays: Any) -> np.ndarray:
        """The form over ``arrays`` (broadcast), a new array of their shape.

        Parameters
        ----------
        *arrays
            The form's arguments in order (the step's dims, or the micro-batch).

        Returns
        -------
        numpy.ndarray
            Seconds (or bytes, for the memory form).
        """
        return np.array(self._fn(*arrays), dtype=float)

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """A derived quantity kept with the form (:meth:`CompiledStep.memo`'s contract).

        Parameters
        ----------
        key
            What the quantity is.
        build
            Computes it, the first time ``key`` is asked for.

        Returns
        -------
        Any
            The kept quantity.
        """
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]


class PlanForms:
    """What the search evaluates of one plan: ``decode`` and ``prefill`` (objects with
    ``step_array(B, ctx|S)``), ``memory(B, ctx)`` in bytes per device, the routed experts'
    weight bytes, and in the micro-batch the pipeline stage's ``hop`` and the expert
    all-to-all ``a2a`` (seconds, :func:`graphs.serving.analysis.parallel.comm_forms`)."""

    def __init__(
        self,
        decode: Any,
        prefill: Any,
        memory: Callable[..., Any],
        routed_bytes: float,
        hop: Callable[..., Any],
        a2a: Callable[..., Any],
    ) -> None:
        self.decode = decode
        self.prefill = prefill
        self.memory = memory
        self.routed_bytes = routed_bytes
        self.hop = hop
        self.a2a = a2a


def _checks(forms: PlanForms) -> list[list[float]]:
    b = np.array([p[0] for p in CHECKS])
    x = np.array([p[1] for p in CHECKS])
    return [
        np.asarray(forms.decode.step_array(b, x), dtype=float).tolist(),
        np.asarray(forms.prefill.step_array(b, x), dtype=float).tolist(),
        np.asarray(forms.memory(b, x), dtype=float).tolist(),
        np.asarray(forms.hop(b), dtype=float).tolist(),
        np.asarray(forms.a2a(b), dtype=float).tolist(),
    ]


def _to_card(texts: tuple[str, ...], names: tuple[tuple[str, ...], ...], forms: PlanForms) -> dict[str, Any]:
    return {
        "kind": "search-plan",
        "version": CARD_VERSION,
        "decode_args": list(names[0]),
        "prefill_args": list(names[1]),
        "decode": texts[0],
        "prefill": texts[1],
        "memory": texts[2],
        "comm_arg": names[2][0],
        "hop": texts[3],
        "a2a": texts[4],
        "routed_bytes": forms.routed_bytes,
        "check": _checks(forms),
    }


def _names(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or len(v) != 2 or not all(isinstance(x, str) for x in v):
        raise CardError("a search-plan card's forms take two named arguments")
    return tuple(v)


def _from_card(card: dict[str, Any]) -> PlanForms:
    """The forms a card holds; :class:`CardError` unless it is of this layout, every form reads
    back and reproduces the card's check values exactly."""
    if card.get("kind") != "search-plan" or card.get("version") != CARD_VERSION:
        raise CardError("not a search-plan card of this layout")
    try:
        dargs, pargs = _names(card["decode_args"]), _names(card["prefill_args"])
        dec = compile_array(card["decode"], dargs)
        pre = compile_array(card["prefill"], pargs)
        mem = compile_array(card["memory"], dargs)
        if not isinstance(card["comm_arg"], str):
            raise CardError("a search-plan card's communication forms take one named argument")
        hop = compile_array(card["hop"], (card["comm_arg"],))
        a2a = compile_array(card["a2a"], (card["comm_arg"],))
        routed = card_number(card["routed_bytes"], "routed_bytes")
        forms = PlanForms(CardForm(dec), CardForm(pre), CardForm(mem), routed, CardForm(hop), CardForm(a2a))
        got, want = _checks(forms), card["check"]
    except (ArithError, KeyError, TypeError, ValueError) as exc:
        raise CardError(f"a search-plan card does not read back ({type(exc).__name__})") from None
    if got != want:
        raise CardError("a search-plan card does not reproduce its check values")
    return forms


def plan_forms(config: Any, hw: Hardware, tp: int, ep: int, link: str) -> PlanForms:
    """The roofline-bound forms of the plan (``config`` on ``hw`` at ``tp``, ``ep``, its stages
    joined by ``link``): from its card when the cache holds a good one, else compiled (and their
    text carded for the next process).

    Parameters
    ----------
    config
        The model (a :class:`models.config.ModelConfig`, dtypes applied).
    hw
        The device.
    tp, ep
        Tensor- and expert-parallel degrees.
    link
        The link between pipeline stages (:class:`costmodel.keys.LinkName`).

    Returns
    -------
    PlanForms
        The decode and prefill steps, the decode memory, the routed experts' bytes and the
        communication forms.
    """
    key = formcache.cache_key(
        "search-plan", str(CARD_VERSION), repr(config), repr(hw), str(tp), str(ep), link
    )
    card = formcache.load(key)
    if card is not None:
        try:
            return _from_card(card)
        except CardError:
            pass  # rebuilt and rewritten below
    from costmodel.frontier import compile_expr
    from costmodel.keys import Phase

    from ..analysis.parallel import MICROBATCH, comm_forms, routed_expert_bytes
    from ..step.compiled import compiled_step
    from ..step.ledger_fit import decode_memory, decode_memory_form

    dec = compiled_step(config, hw, Phase.DECODE, tp=tp, ep=ep)
    pre = compiled_step(config, hw, Phase.PREFILL, tp=tp, ep=ep)
    routed = dec.memo("routed_expert_bytes", lambda: routed_expert_bytes(config, tp))
    hop, a2a = comm_forms(config, hw, link, ep, tp * ep)  # ranks across tp x ep devices
    forms = PlanForms(
        dec,
        pre,
        decode_memory(config, hw, tp=tp),
        routed,
        compile_expr(hop, (MICROBATCH,)),
        compile_expr(a2a, (MICROBATCH,)),
    )
    if formcache.enabled():
        try:
            texts = (
                lambdified_text(dec.forms.step_s, dec.forms.symbols),
                lambdified_text(pre.forms.step_s, pre.forms.symbols),
                lambdified_text(decode_memory_form(config, hw, tp=tp), dec.forms.symbols),
                lambdified_text(hop, (MICROBATCH,)),
                lambdified_text(a2a, (MICROBATCH,)),
            )
            names = (
                tuple(str(x) for x in dec.forms.symbols),
                tuple(str(x) for x in pre.forms.symbols),
                (str(MICROBATCH),),
            )
            card = _to_card(texts, names, forms)
            _from_card(card)  # a card that would not reproduce these forms is not written
            formcache.save(key, card)
        except CardError:
            pass  # a form the card's arithmetic cannot hold: compiled in each process, as before
    return forms
