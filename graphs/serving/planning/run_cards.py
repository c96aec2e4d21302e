"""A sizing's candidate simulations kept across processes as cards (:mod:`costmodel.formcache`).

``size`` (:func:`graphs.serving.planning.sizing.size_deployment`) confirms its candidates by
simulating each on the same drawn requests; what it reads of a run is the ``q``-th percentile of
the requests' TTFT and TPOT and the run's :class:`~graphs.serving.planning.cost.ServedTotals`
(its cost, priced per device when read, so a new price reuses the run). Warm, the mixed steps
come from their cards (:mod:`graphs.serving.step.mixed`) and the simulations are most of the
command; a card keeps those few numbers, so the same question asked again (or a sizing whose
search reaches a candidate an earlier one simulated: another SLO, price or objective) simulates
only what it has not seen.

Key
    :func:`costmodel.formcache.cache_key` over :data:`CARD_VERSION`, the model config, the
    device, the topology, the engine config and overheads, the SLOs, the offered rate, the
    percentile and a digest of every request (:func:`requests_digest`); the engine's sources
    are in every key, so an edit of the simulator, the steps or the catalog is a miss.
Trust
    The cache's own: the entry's digest (an edited, truncated or renamed card is a miss) and
    every number range-checked when read; the card's request count and token totals must also
    equal the requests' own (computed from them, not read). A card that fails is ignored and the
    candidate simulated again (and its card rewritten): a card can cost time, never an answer
    the simulator would not give. What it does not detect is an adversary who rewrites a card
    and recomputes its digest (:mod:`costmodel.formcache`'s trust).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from costmodel import formcache
from costmodel.hardware import Hardware

from ..sim.requests import Request
from .cost import ServedTotals

__all__ = ["CARD_VERSION", "RunOutcome", "requests_digest", "run_key", "load_outcome", "save_outcome"]

#: the layout of a run card (a card of another is simulated again)
CARD_VERSION = 2
#: the totals' numeric fields (the rest are ``devices``, ``requests``: whole, ``whole_run`` and
#: ``decode_bound``: bool)
_FLOATS = ("served_s", "busy_device_s", "duration_s", "input_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What a sizing reads of one candidate's simulation.

    Attributes
    ----------
    ttft_s, tpot_s : float
        The percentile (the key's) of the requests' TTFT and TPOT (s; finite values only,
        0 when none is finite).
    totals : ServedTotals
        What the run's cost rests on.
    """

    ttft_s: float
    tpot_s: float
    totals: ServedTotals


def requests_digest(reqs: Sequence[Request]) -> str:
    """SHA-256 over every field of every request, in order (hex): the requests' part of a key.

    Parameters
    ----------
    reqs : sequence of Request
        The requests a sizing's candidates all serve.

    Returns
    -------
    str
        64 hex digits.
    """
    names = [f.name for f in fields(Request)]
    h = hashlib.sha256(",".join(names).encode())
    for r in reqs:
        h.update(repr(tuple(getattr(r, n) for n in names)).encode())
    return h.hexdigest()


def run_key(
    config: Any,
    hw: Hardware,
    topology: Any,
    engine: Any,
    overheads: Any,
    reqs_digest: str,
    *,
    slo_ttft: float,
    slo_tpot: float,
    rate: float,
    percentile: float,
) -> str:
    """The cache key of one candidate's run (module doc).

    Parameters
    ----------
    config : ModelConfig
        The model (dtypes applied).
    hw : Hardware
        The device.
    topology : Topology
        Replicas, tp, pools.
    engine : EngineConfig
        The scheduler's knobs and pool.
    overheads : EngineOverheads or None
        The engine's terms (None: none).
    reqs_digest : str
        :func:`requests_digest` of the requests.
    slo_ttft, slo_tpot : float
        The SLOs (s).
    rate : float
        The offered rate (requests/s).
    percentile : float
        The percentile read.

    Returns
    -------
    str
        The key.
    """
    return formcache.cache_key(
        "size-run",
        str(CARD_VERSION),
        repr(config),
        repr(hw),
        repr(topology),
        repr(engine),
        repr(overheads),
        reqs_digest,
        repr((float(slo_ttft), float(slo_tpot), float(rate), float(percentile))),
    )


def _finite(v: Any) -> bool:
    return type(v) is float and math.isfinite(v) and v >= 0


def load_outcome(key: str, reqs: Sequence[Request]) -> RunOutcome | None:
    """The outcome the card under ``key`` holds when it is whole and agrees with ``reqs``
    (module doc), else None.

    Parameters
    ----------
    key : str
        :func:`run_key`.
    reqs : sequence of Request
        The requests the run served: the card's count and token totals must be theirs.

    Returns
    -------
    RunOutcome or None
        None: no card, or one that fails a check.
    """
    card = formcache.load(key)
    if card is None or card.get("kind") != "size-run" or card.get("version") != CARD_VERSION:
        return None
    t = card.get("totals")
    if not isinstance(t, dict) or set(t) != {f.name for f in fields(ServedTotals)}:
        return None
    if not (
        all(_finite(t[n]) for n in _FLOATS)
        and _finite(card.get("ttft_s"))
        and _finite(card.get("tpot_s"))
        and type(t["devices"]) is int
        and 1 <= t["devices"] <= 2**31
        and type(t["whole_run"]) is bool
        and type(t["decode_bound"]) is bool
        and type(t["requests"]) is int
        and t["served_s"] > 0
    ):
        return None
    if (
        t["requests"] != len(reqs)
        or t["input_tokens"] != float(sum(r.prompt for r in reqs))
        or t["output_tokens"] != float(sum(r.output for r in reqs))
    ):
        return None  # not these requests' run
    return RunOutcome(card["ttft_s"], card["tpot_s"], ServedTotals(**t))


def save_outcome(key: str, outcome: RunOutcome) -> bool:
    """Keep ``outcome`` under ``key`` (:func:`costmodel.formcache.save`: atomic, with its digest).

    Parameters
    ----------
    key : str
        :func:`run_key`.
    outcome : RunOutcome
        What the sizing read of the run.

    Returns
    -------
    bool
        False when the cache is off or not writable.
    """
    totals = {f.name: getattr(outcome.totals, f.name) for f in fields(ServedTotals)}
    card = {
        "kind": "size-run",
        "version": CARD_VERSION,
        "ttft_s": float(outcome.ttft_s),
        "tpot_s": float(outcome.tpot_s),
        "totals": totals,
    }
    return formcache.save(key, card)
