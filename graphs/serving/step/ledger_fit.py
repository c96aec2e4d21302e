"""Capacity of a model on a device: the memory ledger filled from the graph.

Weights and KV bytes per token come from the model graph (weight-node
residency, cache-write residency per token, split into growing and capped
layers, and recurrent state per sequence: :func:`~graphs.serving.step.totals.cache_terms`),
live activations from a
liveness pass over the graph's ops, so a config change (KV dtype, weight
dtype, tensor parallelism) flows through without a separate formula.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import networkx as nx
import sympy

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.frontier import compile_expr
from costmodel.graph import KIND, OUTPUTS, checked_graph, graph_total
from costmodel.hardware import Hardware, get_device
from costmodel.keys import COST, REPEAT, ROLE, NodeKind, Phase, Role
from costmodel.ledger import MemoryLedger, Overhead, check_overhead, max_batch, max_context
from costmodel.ledger_solve import LedgerFit
from costmodel.memo import BoundedCache
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from costmodel.symbols import dim
from models.config import ModelConfig

if TYPE_CHECKING:
    import numpy as np

import math

from .card_format import CardError, to_text
from .compiled import compiled_step, positive_int
from .fit_check import LEDGER_TERMS, CapacityCheck, CapacityReport, check_capacity
from .totals import cache_terms
from .workload import Workload, as_workload

__all__ = [
    "decode_memory_form",
    "peak_activation_bytes",
    "model_ledger",
    "CapacityReport",
    "capacity",
    "what_if",
    "kv_caps",
    "ledger_terms",
    "capacity_check",
    "memory_note",
    "MAX_TP_TRIED",
    "ledger_card",
    "decode_memory",
    "routed_expert_bytes",
    "ledgers_of",
    "keep_ledgers",
    "engine_pool_note",
]


def engine_pool_note(framework: str) -> str:
    """What "fits in memory" means beside a predictor's prices: the capacity ledger against the
    whole device's memory, not the engine's KV pool, which is smaller (its memory fraction and
    start-up reserves: vLLM's ``gpu_memory_utilization`` 0.9 of the device less CUDA graphs and the
    profile run's peak), so a point near the limit may be one the engine never runs.

    Parameters
    ----------
    framework : str
        The predictor's framework (``vllm``, ``sglang``, ``trtllm``).

    Returns
    -------
    str
    """
    return (
        f"'fit in memory' is the capacity ledger against the whole device's memory; {framework}'s KV pool "
        "takes its memory fraction less its start-up reserves and holds fewer sequences: a point near the "
        f"limit may be one the engine never runs (decode MODEL --batch B --ctx C --predict {framework} "
        "says, per point)"
    )


def peak_activation_bytes(g: nx.DiGraph) -> sympy.Expr:
    """Peak bytes of live activations while the graph's ops run in topological order.

    A tensor becomes live when its producer runs and dies after its last
    consumer ran; weights and caches are not activations. Layers run one
    after another, so one copy of a repeated group is enough. The graph must
    be numeric (sizes are compared). The peak, summed in floats, is returned as
    the exact rational of its shortest decimal, ``Rational(repr(peak))``: byte
    counts are whole or dyadic, so that is the sum itself (``nsimplify``'s search
    for a simple rational, used before, gave the same value on every catalog
    model, phase, tp and dtype checked, and ran mpmath's PSLQ on every call).

    Parameters
    ----------
    g : networkx.DiGraph
        A numeric step graph (tensor sizes on its edges).

    Returns
    -------
    sympy.Expr
        The peak of live activation bytes over the run (bytes, a number).
    """
    checked_graph(g)  # a model name was an AttributeError deep inside
    consumers: dict[str, int] = {}
    for u, _v in g.edges():
        if g.nodes[u].get(KIND) == "op":
            consumers[u] = consumers.get(u, 0) + 1
    live: dict[str, float] = {}
    remaining = dict(consumers)
    peak = 0.0
    for n in nx.topological_sort(g):
        data = g.nodes[n]
        if data.get(KIND) != "op":
            continue
        out = sum(as_float(t.bytes, what=f"{n} output") for t in data.get(OUTPUTS, ()))
        peak = max(peak, sum(live.values()) + out)
        if remaining.get(n, 0):
            live[n] = out
        for u in g.predecessors(n):
            if u in remaining:
                remaining[u] -= 1
                if remaining[u] == 0:
                    live.pop(u, None)
    return sympy.Rational(repr(peak))


def model_ledger(
    config: ModelConfig | str | Workload,
    *,
    phase: str = "decode",
    seq: int = 1024,
    tp: int = 1,
    activation_bytes_per_token: Any = None,
    overhead: Overhead | None = None,
) -> MemoryLedger:
    """A :class:`MemoryLedger` for one device of ``config`` served with ``tp`` devices.

    Activation bytes per token default to the graph's liveness peak divided
    by the tokens of one step (one sequence of ``seq`` tokens in prefill, one
    token in decode).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model: a catalog name, a ``config.json`` path, a config, or a workload built once.
    phase : str
        ``"decode"`` or ``"prefill"``: which graph's liveness gives the activations.
    seq : int
        Prompt tokens of the prefill graph the activations are read from.
    tp : int
        Tensor-parallel degree; the ledger is one device's.
    activation_bytes_per_token : number or sympy.Expr, optional
        Live activation bytes per active token (default: the graph's liveness peak per token).
    overhead : Overhead, optional
        How memory beyond the three terms is reserved (default: none).

    Returns
    -------
    MemoryLedger
        Weights, KV cache per token, activations per token and overhead of one device (bytes).
    """
    overhead = checked_overhead(overhead)  # before any work: 0 or {} is not "no overhead"
    w = as_workload(config)
    g = w.graph(phase, batch=1, seq=seq, ctx=max(seq, 1), tp=tp)
    weights = graph_total(g, kinds=[NodeKind.WEIGHT]).footprint_terms.get("weights", sympy.Integer(0))
    tokens = seq if phase == "prefill" else 1
    cache = cache_terms(g, sympy.Integer(tokens), 1)
    act = activation_bytes_per_token
    if act is None:
        act = peak_activation_bytes(g) / tokens
    return MemoryLedger(
        weights,
        cache.per_token,
        act,
        checked_overhead(overhead),
        capped_kv=cache.capped,
        state_bytes_per_sequence=cache.state,
    )


def checked_overhead(overhead: Any) -> Overhead:
    """``overhead`` as the ledger takes it: an :class:`Overhead`, or None for none (``Overhead()``);
    anything else is refused in one line (``0`` or ``{}`` read as "no overhead" would hide a
    caller's intent, and an unhashable value would fail inside the ledger's memo).

    Parameters
    ----------
    overhead : Overhead or None
        The reserve policy given.

    Returns
    -------
    Overhead

    Raises
    ------
    CostModelError
        When ``overhead`` is neither.
    """
    return Overhead() if overhead is None else check_overhead(overhead)


#: ledgers built so far in this process, per (config, phase, seq, tp, overhead, activations)
_LEDGERS: BoundedCache[MemoryLedger] = BoundedCache("ledger", 256)


def build_ledger(
    w: Workload, phase: str, seq: int, tp: int, overhead: Overhead | None, act: Any
) -> MemoryLedger:
    """:func:`model_ledger`, built once per argument set (its liveness pass walks the whole graph).

    Parameters
    ----------
    w : Workload
        The model's workload (graphs built once).
    phase : str
        ``"decode"`` or ``"prefill"``.
    seq : int
        Prompt tokens of the prefill graph (1 for decode).
    tp : int
        Tensor-parallel degree.
    overhead : Overhead or None
        The reserve policy (None: none).
    act : number, sympy.Expr or None
        Activation bytes per active token (None: the liveness peak per token).

    Returns
    -------
    MemoryLedger
    """
    checked_overhead(overhead)  # before the memo's key (a dict is unhashable); None stays None in it
    key = (
        w.config,
        phase,
        seq,
        tp,
        overhead,
        act if act is None or isinstance(act, int | float) else str(act),
    )
    return _LEDGERS.get_or_build(
        key,
        lambda: model_ledger(
            w, phase=phase, seq=seq, tp=tp, overhead=overhead, activation_bytes_per_token=act
        ),
    )


def ledgers_of(config: ModelConfig) -> dict[tuple[Any, ...], MemoryLedger]:
    """The ledgers :func:`build_ledger` built so far in this process for ``config``, by key: for
    another process to keep (:func:`keep_ledgers`) rather than walk the model's graph again (a
    symbolic liveness pass, about 0.5 CPU s a tensor-parallel degree for an 8B model).

    Parameters
    ----------
    config : ModelConfig
        The model.

    Returns
    -------
    dict
        :func:`build_ledger`'s key to a copy of its ledger: its fields (sympy terms) only, not
        the function :meth:`~costmodel.ledger.MemoryLedger.terms_function` compiled on it (no
        pickle takes a lambdified function; the other process compiles its own when asked).
    """
    out: dict[tuple[Any, ...], MemoryLedger] = {}
    for k in list(_LEDGERS.keys()):
        led = _LEDGERS.get(k)
        if isinstance(k, tuple) and k[0] == config and led is not None:
            out[k] = dataclasses.replace(led)
    return out


def keep_ledgers(built: dict[tuple[Any, ...], MemoryLedger]) -> None:
    """Keep ledgers another process built (:func:`ledgers_of`): :func:`build_ledger` returns them
    for the same key (the same config, phase, tokens, tp, overhead and activations) instead of
    building its own. A key already held keeps its ledger.

    Parameters
    ----------
    built : dict
        :func:`ledgers_of`'s mapping.
    """
    for k, led in built.items():
        _LEDGERS.get_or_build(k, lambda led=led: led)  # type: ignore[misc]


def kv_caps(config: ModelConfig | str | Workload, *, tp: int = 1) -> dict[str, Any]:
    """What one sequence's cache holds per device, as plain numbers: bytes per cached token of the
    layers keeping every position (``per_token``), ``[bytes per token, positions kept]`` of capped
    layers (``capped``) and the recurrent ``state`` bytes.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    tp : int
        Tensor-parallel degree (KV heads split over ``tp`` devices).

    Returns
    -------
    dict
        ``per_token`` (bytes per cached token), ``capped`` (``[bytes per token, positions kept]``
        per capped group) and ``state`` (bytes per sequence), for one device.
    """
    led = build_ledger(as_workload(config), "decode", 1, tp, None, None)
    return {
        "per_token": as_float(led.kv_bytes_per_token),
        "capped": [[as_float(k), as_float(w)] for k, w in led.capped_kv],
        "state": as_float(led.state_bytes_per_sequence),
    }


def ledger_terms(
    config: ModelConfig | str | Workload, *, phase: str, tp: int = 1, seq: int = 1
) -> MemoryLedger:
    """The ledger :func:`capacity` and :func:`capacity_check` solve (default overhead and
    activations; a prefill ledger's activations are those of a ``seq``-token prompt).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    phase : str
        ``"decode"`` or ``"prefill"``.
    tp : int
        Tensor-parallel degree.
    seq : int
        Prompt tokens of the prefill ledger's activations (ignored in decode).

    Returns
    -------
    MemoryLedger
    """
    return build_ledger(as_workload(config), phase, seq if phase == Phase.PREFILL else 1, tp, None, None)


#: most tensor-parallel degrees :func:`capacity_check` builds a ledger for when suggesting one
MAX_TP_TRIED = 64


def capacity_check(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    phase: str,
    batch: int,
    tokens: int,
    tp: int = 1,
    suggest: bool = True,
    ep: int = 1,
) -> CapacityCheck:
    """Does one step's point fit the device (:class:`~graphs.serving.step.fit_check.CapacityCheck`)?

    ``tokens`` is the decode context (the prefill prompt). With ``ep`` expert-parallel ranks
    (each a tensor-parallel group of ``tp`` devices) a device holds ``1/ep`` of its tp-rank's
    routed-expert weights, so the ledger's weights are

    .. math:: W = W_{tp} - E_{tp} (1 - 1/ep)

    (bytes; :math:`E_{tp}` is :func:`routed_expert_bytes`),
    the accounting of :func:`graphs.serving.analysis.parallel.plan_memory_bytes` that ``serve
    plans`` checks a plan with. When it does not fit (and ``suggest``), the check also carries
    the ledger's lower bound on devices, ``max(tp ep + 1, ceil(M_1 / C))`` with ``M_1`` the
    ledger total on one device and ``C`` the capacity (splitting over ``n`` devices divides at
    best every term by ``n``), and the smallest tensor-parallel degree (at the same ``ep``) from
    ``ceil(that / ep)`` up that the model splits over and that fits (at most
    :data:`MAX_TP_TRIED` ledgers are built; None when none of them fits).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device (a catalog name or a spec).
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch : int
        Sequences in the step.
    tokens : int
        Tokens per sequence: the decode context, the prefill prompt.
    tp : int
        Tensor-parallel degree.
    suggest : bool
        When the point does not fit, also find the devices needed and the smallest ``tp`` that fits.
    ep : int
        Expert-parallel degree (ranks of ``tp`` devices; above 1 only for a MoE model).

    Returns
    -------
    CapacityCheck

    Raises
    ------
    CostModelError
        When ``phase`` is unknown or a count is not a positive integer.
    """
    w = as_workload(config)
    hw = get_device(device)
    if phase not in tuple(Phase):
        raise CostModelError(f"phase {phase!r} not allowed; allowed: {', '.join(Phase)}")
    batch, tokens, tp = positive_int(batch, "batch"), positive_int(tokens, "tokens"), positive_int(tp, "tp")
    ep = positive_int(ep, "ep")
    led = ledger_terms(w, phase=phase, tp=tp, seq=tokens)
    cap = as_float(hw.memory_bytes())
    prefill = phase == Phase.PREFILL
    spread = 0.0
    if ep > 1:
        spread = routed_expert_bytes(w, tp) * (1 - 1 / ep)  # E_tp (1 - 1/ep), bytes

    def terms(b: float, t: float) -> dict[str, float]:
        got = led.numeric_terms(b, t, b * t if prefill else b, cap)
        return {**got, "weights": got["weights"] - spread} if spread else got

    chk = check_capacity(
        terms, capacity=cap, device=hw.name, tp=tp, phase=Phase(phase), batch=batch, tokens=tokens, ep=ep
    )
    if chk.fits or not suggest:
        return chk
    one = chk if tp * ep == 1 else capacity_check(w, hw, phase=phase, batch=batch, tokens=tokens, suggest=False)
    need = max(tp * ep + 1, math.ceil(one.needed_bytes / cap))
    found, tried = None, 0
    for n in range(max(tp + 1, math.ceil(need / ep)), 4097):
        try:
            at_n = capacity_check(w, hw, phase=phase, batch=batch, tokens=tokens, tp=n, suggest=False, ep=ep)
        except CostModelError:  # the model does not split over n (heads, vocab not divisible)
            continue
        if at_n.fits:
            found = n
            break
        tried += 1
        if tried >= MAX_TP_TRIED:
            break
    return dataclasses.replace(chk, devices_needed=need, tp_that_fits=found)


def memory_note(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    phase: str,
    batch: int,
    tokens: int,
    tp: int = 1,
    ep: int = 1,
) -> str | None:
    """What a step report says when the device memory does not hold its point: None when it does
    (the ledger at the point alone, no solving: a few microseconds), else
    :func:`capacity_check`'s headline (the devices needed, the degree or batch that fits), the
    verdict with which ``costmodel decode`` and ``prefill`` refuse the point.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch : int
        Sequences in the step.
    tokens : int
        Tokens per sequence: the decode context, the prefill prompt.
    tp, ep : int
        Tensor- and expert-parallel degrees.

    Returns
    -------
    str or None
    """
    w = as_workload(config)
    hw = get_device(device)
    cap = as_float(hw.memory_bytes())
    got = ledger_terms(w, phase=phase, tp=tp, seq=tokens).numeric_terms(
        batch, tokens, batch * tokens if phase == Phase.PREFILL else batch, cap
    )
    spread = routed_expert_bytes(w, tp) * (1 - 1 / ep) if ep > 1 else 0.0  # as capacity_check's
    if sum(got[k] for k in LEDGER_TERMS) - spread <= cap:
        return None
    chk = capacity_check(w, hw, phase=phase, batch=batch, tokens=tokens, tp=tp, ep=ep)
    return None if chk.fits else chk.headline(None) + "; these numbers are for a point that cannot run"


def capacity(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int,
    ctx: int,
    phase: str = "decode",
    seq: int | None = None,
    tp: int = 1,
    overhead: Overhead | None = None,
    activation_bytes_per_token: Any = None,
    ep: int = 1,
) -> CapacityReport:
    """Does ``batch`` x ``ctx`` fit, and how far can batch or context go?

    Decode keeps ``batch`` active tokens; prefill ``batch * seq`` (unchunked,
    ``seq`` defaulting to ``ctx``). A prefill's cache holds at least its prompt, so its longest
    context at ``batch`` is at least ``seq`` or none: when the ledger at ``ctx = seq``,
    ``W + B seq (kv + act) + overhead`` (bytes), already exceeds the capacity, ``max_context`` is
    0 (nothing fits) with the terms at ``ctx = seq`` and their shortfall, not a context shorter
    than the prompt.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    batch : int
        Sequences.
    ctx : int
        Cached tokens per sequence.
    phase : str
        ``"decode"`` (``batch`` active tokens) or ``"prefill"`` (``batch * seq``).
    seq : int, optional
        Prompt tokens of a prefill (default ``ctx``).
    tp : int
        Tensor-parallel degree.
    overhead : Overhead, optional
        The reserve policy (default: none).
    activation_bytes_per_token : number or sympy.Expr, optional
        Live activation bytes per active token (default: the liveness peak).
    ep : int
        Expert-parallel degree (ranks of ``tp`` devices; above 1 only for a MoE model): a device
        holds ``1/ep`` of its tp-rank's routed-expert weights, so the weights are
        ``W_tp - E_tp (1 - 1/ep)`` as in :func:`capacity_check` (before any overhead).

    Returns
    -------
    CapacityReport
        The ledger's terms (bytes) at the point, whether it fits, the largest batch at ``ctx`` and
        longest context at ``batch`` (prefill: at least ``seq``, else 0).

    Raises
    ------
    CostModelError
        When ``phase`` is unknown or a count is not a positive integer.

    Examples
    --------
    ``costmodel ledger llama-3.1-8b --device h100 --batch 16 --ctx 4096``: the H100's 85.52 GB
    (81,559 MiB as the driver reports it) less 16.06 GB of weights holds 129 sequences of 4096
    tokens at 131,072 B of KV each ((85.52 - 16.06) GB / 536.9 MB = 129.4):

    >>> c = capacity("llama-3.1-8b", "h100", batch=16, ctx=4096)
    >>> c.fits, c.max_batch.value
    (True, 129)
    """
    w = as_workload(config)
    hw = get_device(device)
    if phase not in tuple(Phase):
        raise CostModelError(f"phase {phase!r} not allowed; allowed: {', '.join(Phase)}")
    s = seq if seq is not None else ctx
    if phase == "prefill" and isinstance(s, int) and isinstance(ctx, int) and ctx < s:
        raise CostModelError(f"ctx {ctx} is below seq {s}: a prefill's cache holds at least its prompt's tokens")
    active = s if phase == "prefill" else 1
    led = build_ledger(w, phase, s if phase == "prefill" else 1, tp, overhead, activation_bytes_per_token)
    if positive_int(ep, "ep") > 1:  # the routed experts spread over the EP ranks (capacity_check's)
        if not w.config.is_moe:  # was taken: the weights as on one rank, unsaid (decode_report refuses it)
            raise CostModelError(f"{w.config.name} has no experts: expert parallelism needs a MoE model")
        spread = routed_expert_bytes(w, tp) * (1 - 1 / ep)
        led = dataclasses.replace(led, weights_bytes=led.weights_bytes - spread)
    cap = hw.memory_bytes()
    batch, ctx = positive_int(batch, "batch"), positive_int(ctx, "ctx")
    terms = led.numeric_terms(batch, ctx, active * batch, as_float(cap))
    split = {
        "full_context": batch * ctx * as_float(led.kv_bytes_per_token),
        "capped": batch * sum(as_float(k) * min(ctx, as_float(w)) for k, w in led.capped_kv),
        "state": batch * as_float(led.state_bytes_per_sequence),
    }
    longest = max_context(led, cap, batch=batch, active_per_sequence=active)
    if phase == "prefill" and longest.value < s:  # shorter than the prompt (or none): none holds it
        at_s = led.numeric_terms(batch, s, active * batch, as_float(cap))
        others = {k: at_s[k] for k in ("kv_cache", "activations", "overhead")}  # as solve_capacity blames
        culprit = "weights" if at_s["weights"] >= as_float(cap) else max(others, key=lambda k: others[k])
        short = at_s["total"] - as_float(cap)
        longest = LedgerFit(0, as_float(cap), at_s, at_s, culprit, short)
    return CapacityReport(
        w.name,
        hw.name,
        as_float(cap),
        terms,
        terms["total"] <= as_float(cap),
        max_batch(led, cap, ctx=ctx, active_per_sequence=active),
        longest,
        split,
        tuple(as_float(w) for _k, w in led.capped_kv),
        w.config.max_context,
    )


def what_if(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    ctx: int,
    changes: dict[str, dict[str, Any]],
    overhead: Overhead | None = None,
    tp: int = 1,
) -> dict[str, int]:
    """Max decode batch at ``ctx`` under named one-assumption changes.

    ``changes`` maps a label to config fields to replace (``{"fp8 KV":
    {"kv_dtype": "fp8"}}``) or to ``{"overhead": Overhead(...)}``; the
    result includes ``"baseline"``.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    ctx : int
        Cached tokens per sequence.
    changes : dict of str to dict
        Label -> config fields to replace, or ``{"overhead": Overhead(...)}``.
    overhead : Overhead, optional
        The baseline's reserve policy.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    dict of str to int
        The largest decode batch at ``ctx`` per label, ``"baseline"`` included.

    Raises
    ------
    CostModelError
        When ``changes`` is not a mapping of labels to mappings, a change names no field of the
        model's config, or an overhead is not an :class:`Overhead`.
    """
    cfg = as_workload(config).config
    hw = get_device(device)
    if not isinstance(changes, Mapping):
        raise CostModelError(
            f"changes must map a label to the config fields it replaces (for example "
            f"{{'fp8 KV': {{'kv_dtype': 'fp8'}}}}), got {type(changes).__name__} {repr(changes)[:80]}"
        )
    checked_overhead(overhead)
    out = {}
    for label, change in {"baseline": {}, **changes}.items():
        if not isinstance(change, Mapping):
            raise CostModelError(
                f"changes[{label!r}] must map config fields to values, got {type(change).__name__} "
                f"{repr(change)[:80]}"
            )
        fields = dict(change)
        ov = checked_overhead(fields.pop("overhead", overhead))
        known = {name for name, _v in cfg.leaves()}
        unknown = sorted(str(k) for k in fields if k not in known)
        if unknown:
            raise CostModelError(
                f"changes[{label!r}] names {', '.join(repr(k) for k in unknown)}, not a field of the "
                f"model's config; its fields: {', '.join(sorted(known))}, and 'overhead'"
            )
        led = model_ledger(cfg.replace(**fields), tp=tp, overhead=ov)
        out[label] = max_batch(led, hw.memory_bytes(), ctx=ctx).value
    return out


def ledger_card(w: Any, hw: Any, phase: Phase, tp: int, at: dict[str, int]) -> dict[str, Any]:
    """The capacity ledger's terms (bytes) as text in the card's two arguments (decode: ``B``
    sequences holding ``ctx`` tokens, ``B`` active; prefill: ``B`` prompts of ``S``, ``B S``
    active), the capacity, and their values at the card's check point.

    Parameters
    ----------
    w : Workload
        The model's workload.
    hw : Hardware
        The device.
    phase : Phase
        ``decode`` or ``prefill``.
    tp : int
        Tensor-parallel degree.
    at : dict of str to int
        The card's check point, keyed by its two arguments (``B`` and ``ctx``, or ``B`` and ``S``).

    Returns
    -------
    dict
        ``capacity`` (bytes), ``terms`` (text forms, bytes) and ``check`` (their values at ``at``).

    Raises
    ------
    CardError
        When a prefill's activations per token depend on the prompt length (a card cannot hold it).
    """
    b, t = (dim(n) for n in at)  # B and ctx (decode) or S (prefill)
    cap = as_float(hw.memory_bytes())
    if phase == Phase.PREFILL:
        led = ledger_terms(w, phase=phase, tp=tp, seq=at["S"])
        if (
            led.activation_bytes_per_token
            != ledger_terms(w, phase=phase, tp=tp, seq=4096).activation_bytes_per_token
        ):
            raise CardError("this model's prefill activations per token depend on the prompt length")
        terms = led.terms(batch=b, cached_tokens=t, active_tokens=b * t, capacity=cap)
    else:
        terms = ledger_terms(w, phase=phase, tp=tp).terms(
            batch=b, cached_tokens=t, active_tokens=b, capacity=cap
        )
    args = tuple(at)
    exprs = {k: getattr(terms, k) for k in LEDGER_TERMS}
    return {
        "capacity": cap,
        "terms": {k: to_text(v, args) for k, v in exprs.items()},
        "check": {
            k: float(sympy.sympify(v).subs({b: at[args[0]], t: at[args[1]]})) for k, v in exprs.items()
        },
    }


def decode_memory(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    tp: int = 1,
    overhead: Overhead | None = None,
) -> Callable[..., np.ndarray]:
    """Numpy ``memory(B, ctx)``: the decode ledger's total bytes per device (cached with the step).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.
    overhead : Overhead, optional
        The reserve policy.

    Returns
    -------
    callable
        ``memory(B, ctx)`` -> numpy array of total bytes per device.
    """
    w = as_workload(config)
    hw = get_device(device)
    c = compiled_step(w, hw, Phase.DECODE, tp=tp)

    def build() -> Callable[..., np.ndarray]:
        return compile_expr(decode_memory_form(w, hw, tp=tp, overhead=overhead), (B_sym, ctx_sym))

    return c.memo(f"memory:{overhead!r}", build)


def decode_memory_form(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    tp: int = 1,
    overhead: Overhead | None = None,
) -> sympy.Expr:
    """The form :func:`decode_memory` compiles: the decode ledger's total bytes per device in
    ``B`` (sequences, each one active token) and ``ctx`` (cached tokens each),
    :meth:`costmodel.ledger.MemoryLedger.total` of :func:`model_ledger`.

    Parameters
    ----------
    config, device
        The model and the device (names or objects).
    tp
        Tensor-parallel degree (the ledger is one device's share).
    overhead
        The ledger's overhead (None: its default).

    Returns
    -------
    sympy.Expr
        Bytes, in ``B`` and ``ctx``.
    """
    w = as_workload(config)
    hw = get_device(device)

    def build() -> sympy.Expr:
        led = model_ledger(w, tp=tp, overhead=overhead)
        total: sympy.Expr = led.total(
            batch=B_sym, cached_tokens=ctx_sym, active_tokens=B_sym, capacity=hw.memory_bytes()
        )
        return total

    form: sympy.Expr = compiled_step(w, hw, Phase.DECODE, tp=tp).memo(f"memory_form:{overhead!r}", build)
    return form


def routed_expert_bytes(config: ModelConfig | str | Workload, tp: int) -> float:
    """Bytes of routed-expert weights one tp-rank holds: the weight nodes feeding expert nodes.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    float
        Bytes (0 for a dense model).
    """
    graph = as_workload(config).graph(Phase.DECODE, batch=1, ctx=1, tp=tp)
    total = 0.0
    for n, d in graph.nodes(data=True):
        feeds_experts = any(graph.nodes[s].get(ROLE) == Role.EXPERT for s in graph.successors(n))
        if d.get(KIND) == NodeKind.WEIGHT and feeds_experts:
            total += as_float(d[COST].footprint_terms.get("weights", 0) * d.get(REPEAT, 1))
    return total
