"""Does a step's point fit the device memory? The verdict, and the capacity ledger in a card.

:class:`CapacityCheck` is what ``decode``, ``prefill``, ``model analyze`` and ``serve`` print
first when a point does not fit (and why they refuse to print its latency). It is filled by
:func:`check_capacity` from the ledger's terms as plain functions of (batch, tokens), solved
by :func:`costmodel.ledger_solve.solve_capacity` as the symbolic ledger is: the library
(:func:`graphs.serving.step.ledger_fit.capacity_check`) passes the ledger's compiled terms, and
a cached card (:mod:`graphs.serving.present.cards`) the same terms stored as text
(:func:`ledger_card`, :func:`capacity_from_card`).

Light on purpose (no sympy, numpy or networkx at import), like :mod:`graphs.serving.step.reports`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from costmodel.arith import ArithError, compile_numeric
from costmodel.keys import Phase
from costmodel.ledger_solve import LedgerFit, solve_capacity
from costmodel.results import Result

from .card_format import CardError, card_kv_caps

__all__ = [
    "LEDGER_TERMS",
    "CapacityCheck",
    "CapacityReport",
    "check_capacity",
    "capacity_from_card",
    "nothing_fits_line",
    "capacity_report_from_card",
]

_ARGS = {"decode": ("B", "ctx"), "prefill": ("B", "S")}  #: a card's two arguments per kind


#: the capacity ledger's terms (bytes), as :meth:`costmodel.ledger.MemoryLedger.numeric_terms` names them
LEDGER_TERMS = ("weights", "kv_cache", "activations", "overhead")

#: largest batch (and context) a capacity check searches
_BATCH_UPPER, _CONTEXT_UPPER = 1 << 20, 1 << 26


@dataclass(frozen=True)
class CapacityCheck(Result):
    """Whether one step's point fits one device's memory: the capacity ledger (weights, KV cache,
    live activations, overhead per device at ``tp``, the routed experts spread over ``ep``
    expert-parallel ranks) against the device capacity (bytes).

    ``tokens_per_sequence`` is the context of a decode step (the prompt of a prefill one; named
    apart from a step report's ``tokens``, the tokens the step computes); ``max_batch`` and
    ``max_context`` are the largest batch at it and the longest context at ``batch`` that
    fit (0: none). When the point does not fit, ``devices_needed`` is the ledger's lower bound
    ``ceil(total at tp=1 / capacity)`` (at least ``tp + 1``) and ``tp_that_fits`` the smallest
    tensor-parallel degree the model splits over at which it fits (None: none tried did).

    Attributes
    ----------
    device : str
        The device's name.
    tp : int
        Tensor-parallel degree the ledger is per device at.
    phase : Phase
        ``decode`` or ``prefill``.
    batch : int
        Sequences.
    tokens_per_sequence : int
        Decode: context; prefill: prompt (tokens per sequence).
    needed_bytes : float
        The ledger's total per device.
    capacity_bytes : float
        The device's memory.
    max_batch : int
        The largest batch at ``tokens_per_sequence`` that fits (0: none).
    max_context : int
        The longest ``tokens_per_sequence`` at ``batch`` that fits (0: none): a decode step's
        context, a prefill's prompt (the activations grow with it). Not ``ledger --phase
        prefill``'s ``max_context``, the longest cached context beyond a fixed prompt.
    devices_needed : int or None
        When it does not fit: ``max(tp + 1, ceil(total at tp=1 / capacity))``.
    tp_that_fits : int or None
        When it does not fit: the smallest degree tried at which it does (None: none).
    ep : int
        Expert-parallel ranks, each a tensor-parallel group of ``tp`` devices: the point runs on
        ``tp x ep`` devices (1: none).
    """

    device: str
    tp: int
    phase: Phase
    batch: int
    tokens_per_sequence: int
    needed_bytes: float
    capacity_bytes: float
    max_batch: int
    max_context: int
    devices_needed: int | None = None
    tp_that_fits: int | None = None
    ep: int = 1

    @property
    def devices(self) -> int:
        """Devices the point runs on: ``tp x ep``."""
        return self.tp * self.ep

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "fits": self.fits}

    def headline(self, try_flag: str | None = "--tp") -> str:
        """The first line a report prints when the point does not fit, e.g. ``does not fit on
        1×h100-sxm: needs ≥ 11 devices (try --tp 16)``; ``try_flag=None`` where the command has
        no tensor-parallel flag (the hint then names the degree instead of a flag).

        Parameters
        ----------
        try_flag : str or None
            The command's tensor-parallel flag named in the hint (None: name the degree).

        Returns
        -------
        str
        """
        need = f": needs ≥ {self.devices_needed} devices" if self.devices_needed else ""
        hints = []
        if self.tp_that_fits is not None:
            hints.append(
                f"try {try_flag} {self.tp_that_fits}" if try_flag else f"fits at tp {self.tp_that_fits}"
            )
        elif self.devices_needed:
            hints.append("no tensor-parallel degree tried fits this batch")
        if self.max_batch > 0:
            hints.append(
                f"or at most batch {self.max_batch} at tp {self.tp}"
                + (f" ep {self.ep}" if self.ep > 1 else "")
                if hints
                else f"at most batch {self.max_batch} fits"
            )
        hint = f" ({', '.join(hints)})" if hints else ""
        return f"does not fit on {self.devices}×{self.device}{need}{hint}"

    def detail(self) -> str:
        """One line of the ledger behind the verdict (GiB, as ``costmodel ledger`` prints)."""
        gib = 1024**3
        where = "ctx" if self.phase == Phase.DECODE else "seq"
        fits = f"at most batch {self.max_batch} fits" if self.max_batch else "not even batch 1 fits"
        return (
            f"  batch {self.batch} at {where} {self.tokens_per_sequence} needs {self.needed_bytes / gib:.2f} GiB per device; "
            f"the device holds {self.capacity_bytes / gib:.2f} GiB; {fits} (costmodel ledger has the terms)"
        )


def nothing_fits_line(point: str, needed_bytes: float, capacity_bytes: float) -> str:
    """What a grid (``sweep``, ``search``) where no point fits says: the point needing the least
    against its device, in the words of :meth:`CapacityCheck.detail` (GiB, as ``costmodel ledger``
    prints).

    Parameters
    ----------
    point : str
        The point needing the least share of its device's memory, as the command names it
        (``h100-sxm bf16/bf16 tp 1 at batch 1 and ctx 1024``).
    needed_bytes, capacity_bytes : float
        Its memory need per device and the device's capacity.

    Returns
    -------
    str

    >>> nothing_fits_line("h100-sxm tp 1 at batch 1 and ctx 1024", 756.45 * 1024**3, 79.65 * 1024**3)
    'nothing fits in memory: the least need, h100-sxm tp 1 at batch 1 and ctx 1024, is 756.45 GiB per device; the device holds 79.65 GiB (costmodel ledger has the terms)'
    """
    gib = 1024**3
    return (
        f"nothing fits in memory: the least need, {point}, is {needed_bytes / gib:.2f} GiB per device; "
        f"the device holds {capacity_bytes / gib:.2f} GiB (costmodel ledger has the terms)"
    )


def check_capacity(
    terms: Callable[[float, float], Mapping[str, float]],
    *,
    capacity: float,
    device: str,
    tp: int,
    phase: Phase,
    batch: int,
    tokens: int,
    ep: int = 1,
) -> CapacityCheck:
    """A :class:`CapacityCheck` from the ledger's terms as a function of (batch, tokens) in
    bytes (decode: ``tokens`` cached, ``batch`` active; prefill: ``batch * tokens`` active),
    solved with :func:`costmodel.ledger_solve.solve_capacity` as the symbolic ledger is.

    Parameters
    ----------
    terms : callable
        ``terms(batch, tokens)``: the ledger's terms (bytes) by name (:data:`LEDGER_TERMS`).
    capacity : float
        The device's memory (bytes).
    device : str
        The device's name (printed).
    tp : int
        Tensor-parallel degree the terms are per device at.
    phase : Phase
        ``decode`` (``tokens`` cached per sequence) or ``prefill`` (``tokens`` of prompt).
    batch : int
        Sequences in the step.
    tokens : int
        Tokens per sequence (decode: context; prefill: prompt).
    ep : int
        Expert-parallel ranks the terms are per device at (the point runs on ``tp x ep`` devices).

    Returns
    -------
    CapacityCheck
        The verdict, the total need (bytes), and the largest batch and context that fit.
    """

    def at(b: float, t: float) -> dict[str, float]:
        got = terms(b, t)
        v = {k: float(got[k]) for k in LEDGER_TERMS}
        return {**v, "total": sum(v.values())}

    need = at(batch, tokens)["total"]
    fit_b = solve_capacity(capacity, lambda b: at(b, tokens), _BATCH_UPPER)
    fit_c = solve_capacity(capacity, lambda c: at(batch, c), _CONTEXT_UPPER)
    return CapacityCheck(device, tp, phase, batch, tokens, need, capacity, fit_b.value, fit_c.value, ep=ep)


def capacity_from_card(card: dict[str, Any], *, batch: int, tokens: int) -> CapacityCheck:
    """Does ``batch`` at ``tokens`` (decode: context; prefill: prompt) fit, from a card's ledger
    (:func:`graphs.serving.step.reports.check_capacity`, as the library's
    :func:`graphs.serving.step.ledger_fit.capacity_check` solves it, without devices suggested).

    Raises :class:`CardError` when the card has no readable ledger or its text does not
    reproduce its check point.

    Parameters
    ----------
    card : dict
        A decode or prefill card as read from JSON.
    batch : int
        Sequences in the step.
    tokens : int
        Tokens per sequence (decode: context; prefill: prompt).

    Returns
    -------
    CapacityCheck

    Raises
    ------
    CardError
        When the card has no readable ledger or its text does not reproduce its check point.
    """
    try:
        kind = card["phase"] if card["kind"] == "analysis" else card["kind"]
        args = _ARGS[kind]
        led = card["ledger"]
        cap = float(led["capacity"])
        fns = {k: compile_numeric(led["terms"][k], args) for k in LEDGER_TERMS}
        pt = (float(card["check"][args[0]]), float(card["check"][args[1]]))
        got = {k: f(*pt) for k, f in fns.items()}
        ok = (
            math.isfinite(cap)
            and cap > 0
            and all(
                math.isfinite(g)
                and g >= 0
                and math.isclose(g, float(led["check"][k]), rel_tol=1e-9, abs_tol=1e-300)
                for k, g in got.items()
            )
        )
        if not ok:
            raise CardError("the card's ledger does not reproduce its check point")
        device, tp = str(card["device"]), int(card["tp"])
    except CardError:
        raise
    except (ArithError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise CardError(f"unreadable card ledger: {type(exc).__name__}: {exc}") from None
    return check_capacity(
        lambda b, t: {k: f(b, t) for k, f in fns.items()},
        capacity=cap,
        device=device,
        tp=tp,
        phase=Phase(kind),
        batch=batch,
        tokens=tokens,
    )


@dataclass(frozen=True)
class CapacityReport(Result):
    """Ledger terms at a batch and context, and the limits on one device.

    Attributes
    ----------
    model, device : str
        What was run, by name.
    capacity_bytes : float
        The device's memory.
    terms : dict of str to float
        The ledger's terms (bytes): weights, KV cache, activations, overhead, and their total.
    fits : bool
        The total is within the capacity.
    max_batch : LedgerFit
        The largest batch at the context, and what limits it.
    max_context : LedgerFit
        The longest context at the batch, and what limits it.
    kv_split : dict of str to float
        The KV term split: layers keeping every position, capped layers (window, chunk), recurrent
        state (bytes).
    kv_caps : tuple of float
        The positions each capped layer group keeps.
    model_limit : int or None
        The model's context limit (None: not stated).
    """

    model: str
    device: str
    capacity_bytes: float
    terms: dict[str, float]
    fits: bool
    max_batch: LedgerFit
    max_context: LedgerFit
    #: the KV term split: layers keeping every position, capped layers (window, chunk), recurrent state
    kv_split: dict[str, float] = dataclasses.field(default_factory=dict)
    #: the positions each capped layer group keeps
    kv_caps: tuple[float, ...] = ()
    #: the model's context limit (None: not stated)
    model_limit: int | None = None


def capacity_report_from_card(
    card: dict[str, Any], *, batch: int, ctx: int, model_limit: int | None
) -> CapacityReport:
    """``costmodel ledger``'s decode :class:`CapacityReport` from a decode card: the ledger's
    terms at ``batch`` sequences of ``ctx`` cached tokens, the KV split from the card's cache
    layout, and the largest batch at ``ctx`` and longest context at ``batch`` solved with
    :func:`costmodel.ledger_solve.solve_capacity` (as :func:`costmodel.ledger.max_batch` and
    ``max_context`` solve the symbolic ledger, with the same search bounds).

    Raises :class:`CardError` when the card is not a decode card whose ledger reads back.

    Parameters
    ----------
    card : dict
        A decode card as read from JSON.
    batch : int
        Sequences in the step.
    ctx : int
        Cached tokens per sequence.
    model_limit : int or None
        The model's longest context (``max_position_embeddings``), printed beside the limits.

    Returns
    -------
    CapacityReport
        Ledger terms (bytes) at the point, whether it fits, the largest batch and context.

    Raises
    ------
    CardError
        When the card is not a decode card whose ledger reads back.
    """
    if card.get("kind") != "decode":
        raise CardError("only a decode card's ledger serves the decode ledger")
    chk = capacity_from_card(card, batch=batch, tokens=ctx)  # the ledger reads back (CardError if not)
    caps = card_kv_caps(card)
    try:
        led = card["ledger"]
        cap = float(led["capacity"])
        fns = {k: compile_numeric(led["terms"][k], _ARGS["decode"]) for k in LEDGER_TERMS}
        model = str(card["model"])
    except (ArithError, KeyError, TypeError, ValueError) as exc:
        raise CardError(f"unreadable card ledger: {type(exc).__name__}: {exc}") from None

    def at(b: float, c: float) -> dict[str, float]:
        v = {k: float(f(b, c)) for k, f in fns.items()}
        return {**v, "total": sum(v.values())}

    terms = at(batch, ctx)
    split = {
        "full_context": batch * ctx * caps["per_token"],
        "capped": batch * sum(k * min(ctx, w) for k, w in caps["capped"]),
        "state": batch * caps["state"],
    }
    return CapacityReport(
        model,
        chk.device,
        cap,
        terms,
        terms["total"] <= cap,
        solve_capacity(cap, lambda b: at(b, ctx), _BATCH_UPPER),
        solve_capacity(cap, lambda c: at(batch, c), _CONTEXT_UPPER),
        split,
        tuple(float(w) for _k, w in caps["capped"]),
        model_limit,
    )
