"""The serving phase reports, and the arithmetic that fills them from numbers.

Light on purpose (no sympy, numpy or networkx at import): the library's compiled path
(:mod:`graphs.serving.analysis.phases`, :mod:`graphs.serving.analysis.limits`) and the command line's cached
path (:mod:`graphs.serving.present.cards`) fill the same dataclasses with the same functions, from
values computed by lambdified forms or by forms read back from the persistent cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError
from costmodel.keys import Phase
from costmodel.results import Result

if TYPE_CHECKING:
    import sympy

#: the scalar fields of a step (:class:`graphs.serving.step.compiled.StepForms`) a report reads; the
#: compiled step and the cached cards both carry exactly these, beside the whole-step terms
STEP_FIELDS = ("step_s", "optimistic_step_s", "weight_read_s", "kv_read_s", "flops", "attention_flops")

__all__ = [
    "STEP_FIELDS",
    "BoundBy",
    "bound_by",
    "cache_read_bytes",
    "PhaseReport",
    "PrefillReport",
    "DecodeReport",
    "NearFarMemory",
    "Regime",
    "DecodeLimits",
    "LimitNumbers",
    "phase_fields",
    "decode_from_fields",
    "limits_at",
    "MAX_CHUNKS",
    "chunk_plan",
    "prefill_from_fields",
]


@dataclass(frozen=True)
class BoundBy:
    """What a step's time is bound by: the largest whole-step term and its share of the step.

    ``resource`` is the term's key (``dram``, ``tensor``, ``link:scale_up``...), ``kind`` one of
    ``memory``, ``compute`` or ``communication``, ``what`` names the traffic in people's words
    (``weight read``, ``KV read``, ``activations`` for memory; the unit or link otherwise), and
    ``share = term / step_s`` is the fraction of the step that term alone takes.
    """

    resource: str
    kind: str
    what: str
    share: float
    #: the named part's own share of the step (memory: the weight read, KV read or activations
    #: alone; else the term's ``share``)
    what_share: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        """``bound by: memory (dram, 93% of the step; weight read 77% of the step)``, ``bound by:
        compute (tensor, 88% of the step)``: the share printed first is the whole term's, the
        named part's own beside it."""
        tail = ""
        if self.kind == "memory":
            tail = f"; {self.what} {100 * self.what_share:.0f}% of the step"
        return f"bound by: {self.kind} ({self.resource}, {100 * self.share:.0f}% of the step{tail})"


def bound_by(terms_s: Mapping[str, float], step_s: float, weight_read_s: float, kv_read_s: float) -> BoundBy | None:
    """The binding whole-step term of a step.

    With whole-step terms ``t_r`` (compute time per unit ``FLOPs_u / peak_u``, traffic time per
    memory level ``bytes_l / BW_l``, link time per link; s) the step as one roofline is
    ``max_r t_r`` (DESIGN.md, roofline), so the binding resource is ``argmax_r t_r`` and its share
    of the step is ``t_r / step_s`` (``step_s`` is the sum of each kernel's roofline, so the share is
    at most 1). A memory term is named by the largest of its parts: the weight read
    ``weight_read_s``, the KV read ``kv_read_s`` or the rest (activations), each bytes over the same
    bandwidth. None when the step has no terms or no time.

    Parameters
    ----------
    terms_s : mapping of str to float
        Whole-step terms (s) by resource: compute per unit, traffic per memory level, links.
    step_s : float
        The step time (s), the sum of each kernel's roofline.
    weight_read_s : float
        Weight bytes read over DRAM bandwidth (s).
    kv_read_s : float
        KV-cache bytes read over DRAM bandwidth (s).

    Returns
    -------
    BoundBy or None
        The binding resource, its kind, what dominates it and its share of the step.
    """
    terms = {k: float(v) for k, v in terms_s.items() if v > 0}
    if not terms or step_s <= 0:
        return None
    resource = max(terms, key=lambda k: terms[k])
    t = terms[resource]
    if resource.startswith("link:"):
        kind, what = "communication", f"{resource[5:]} link"
    elif resource in ("tensor", "vector", "sfu"):
        kind, what = "compute", f"{resource} units"
    else:
        parts = {"weight read": weight_read_s, "KV read": kv_read_s}
        parts["activations"] = max(t - weight_read_s - kv_read_s, 0.0) if resource == "dram" else t
        kind, what = "memory", max(parts, key=lambda k: parts[k])
        part = min(parts[what] / step_s, 1.0)
        return BoundBy(resource=resource, kind=kind, what=what, share=min(t / step_s, 1.0), what_share=part)
    return BoundBy(resource=resource, kind=kind, what=what, share=min(t / step_s, 1.0), what_share=min(t / step_s, 1.0))


@dataclass(frozen=True)
class PhaseReport(Result):
    """Timing, traffic and throughput of one step (see module doc).

    Attributes
    ----------
    model, device : str
        What was run, by name.
    phase : Phase
        ``decode`` or ``prefill``.
    batch : int
        Sequences in the step.
    tokens : int
        Tokens the step processes (prefill ``B S``, decode ``B``).
    tp : int
        Tensor-parallel degree (the times are one device's).
    step_s : float
        Sum over kernels of each kernel's roofline (s).
    optimistic_step_s : float
        The whole step as one roofline (s).
    terms_s : dict of str to float
        Whole-step terms: compute per unit, traffic per memory level, links (s).
    weight_read_s : float
        Weight bytes the graph reads, over DRAM bandwidth (s).
    kv_read_s : float
        KV-cache bytes read, over DRAM bandwidth (s).
    attention_flop_share : float
        Attention's share of the step's FLOPs.
    energy_per_token_j : float or None
        ``P x tp x ep x step time / tokens``: every device of the step (each of the ``ep``
        expert-parallel ranks is a tensor-parallel group of ``tp`` devices, as ``serve plans``
        counts them) at its TDP ``P``: an estimate (J; None: no TDP).
    notes : tuple of str
        What the device's roofs substituted, said once.
    ep : int
        Expert-parallel degree: ranks of ``tp`` devices each, the step the busiest rank's (1: none).
    """

    model: str
    device: str
    phase: Phase
    batch: int
    tokens: int
    tp: int
    step_s: float  #: sum over kernels of each kernel's roofline
    optimistic_step_s: float  #: the whole step as one roofline
    terms_s: dict[str, float]  #: whole-step terms: compute per unit, bytes per level, links
    weight_read_s: float  #: weight bytes the graph reads, over DRAM bandwidth
    kv_read_s: float  #: KV-cache bytes read, over DRAM bandwidth
    attention_flop_share: float
    energy_per_token_j: float | None  #: TDP x tp x ep x step time / tokens: an estimate at full power
    #: what the device's roofs substituted (:func:`costmodel.hardware.fallback.roof_notes`)
    notes: tuple[str, ...] = ()
    #: expert-parallel ranks, each a tensor-parallel group of ``tp`` devices (1: none)
    ep: int = 1

    @property
    def devices(self) -> int:
        """Devices the step runs on, ``tp x ep``: each expert-parallel rank is a tensor-parallel
        group of its own (:func:`graphs.serving.analysis.parallel.parallel_plan` counts
        ``tp x pp x ep``; these steps have ``pp = 1``)."""
        return self.tp * self.ep

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s

    @property
    def bound_by(self) -> BoundBy | None:
        """The step's binding resource and its share (:func:`bound_by`)."""
        return bound_by(self.terms_s, self.step_s, self.weight_read_s, self.kv_read_s)

    def to_dict(self) -> dict[str, Any]:
        b = self.bound_by
        return {
            **super().to_dict(),
            "devices": self.devices,
            "tokens_per_s": self.tokens_per_s,
            "bound_by": b.to_dict() if b else None,
        }


@dataclass(frozen=True)
class PrefillReport(PhaseReport):
    """A prefill step; with chunking, ``step_s`` sums the chunks and the rest describes the whole prompt.

    Attributes
    ----------
    chunks : int
        Chunk steps the prompt runs as (1: unchunked).
    chunk : int or None
        Chunk size (tokens).
    unchunked_step_s : float or None
        The prompt as one step, for comparison (s).
    """

    chunks: int = 1
    chunk: int | None = None
    unchunked_step_s: float | None = None  #: the prompt as one step, for comparison


@dataclass(frozen=True)
class DecodeReport(PhaseReport):
    """A decode step (``step_s`` is the TPOT bound).

    ``read_every_weight_once_s`` is the seed script's bound (all parameters,
    embedding included, over the bandwidth); the graph's own weight traffic
    ``weight_read_s`` leaves the input-embedding table out, because the
    gather reads only ``B`` rows (``embedding_table_read_s`` is what it
    would cost to stream it).

    Attributes
    ----------
    read_every_weight_once_s : float
        Every parameter's bytes over the DRAM bandwidth (s).
    embedding_table_read_s : float
        The input embedding table streamed whole (s).
    device_hours_per_million_tokens : float or None
        ``1e6 / (B / T) x tp x ep / 3600``: device-hours per million tokens, power or not
        (None only in a report built without it).
    """

    read_every_weight_once_s: float = 0.0
    embedding_table_read_s: float = 0.0
    device_hours_per_million_tokens: float | None = None

    @property
    def tpot_s(self) -> float:
        return self.step_s

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1 / self.step_s

    @property
    def tokens_per_s_per_device(self) -> float:
        """``B / T / (tp x ep)``: the step's tokens per second over every device it runs on."""
        return self.batch / self.step_s / self.devices

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "tpot_s": self.tpot_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
        }


@dataclass(frozen=True)
class NearFarMemory(Result):
    """A step that reads all weights once runs at most ``bandwidth / capacity`` times per second
    on a full device; splitting the weights over ``n`` devices divides the per-token bound by ``n``.

    Attributes
    ----------
    model, device : str
        What was run, by name.
    weights_bytes : float
        Every parameter's bytes.
    full_memory_reads_per_s : float
        ``bandwidth / capacity``: whole-memory reads per second (1/s).
    devices_to_hold_weights : int
        ``ceil(weights / capacity)``.
    per_token_bound_s : float
        ``weights / (n bandwidth)`` (s).
    """

    model: str
    device: str
    weights_bytes: float
    full_memory_reads_per_s: float
    devices_to_hold_weights: int
    per_token_bound_s: float


class Regime(StrEnum):
    """Whether growing the batch at this context ever turns a decode step compute-bound."""

    COMPUTE_BEYOND_KNEE = "compute-bound beyond the knee"
    MEMORY_AT_EVERY_BATCH = "memory-bound at every batch"


@dataclass(frozen=True)
class DecodeLimits(Result):
    """Where batching stops paying (see :func:`decode_limits`); expressions are in ``B`` and ``ctx``.

    Attributes
    ----------
    weights_time_s : float
        ``a``: the step's DRAM time at batch 0, the traffic no sequence adds (s): a dense model's
        every weight; a MoE model's weights outside the routed experts, which a step reads as its
        batch touches them (at batch 1 only ``top-k`` of them), so not the step's whole weight
        read (the decode report's ``weight_read_s``).
    memory_time_per_sequence : sympy.Expr
        ``b(ctx)`` (s per sequence).
    compute_time_per_sequence : sympy.Expr
        ``c(ctx)`` on the binding unit (s per sequence).
    compute_unit : str
        The binding unit of ``c``.
    ctx_ceiling : float or None
        Beyond this context no batch is compute-bound (tokens; None: never).
    ctx : int or None
        The context the numbers below are at (None: forms only).
    regime : Regime or None
        Compute-bound beyond the knee, or memory-bound at every batch.
    knee_batch : float or None
        ``B* = a / (c - b)`` when compute-bound beyond it.
    throughput_ceiling_tokens_per_s : float or None
        ``1 / c`` (compute-bound) or ``1 / b`` (memory-bound), tokens/s.
    batch_for_90pct_of_ceiling : float or None
        ``9 a / b`` when memory-bound at every batch.
    max_batch_fits : int or None
        The largest batch the device memory holds at this context (None: not checked).
    throughput_at_max_batch_tokens_per_s : float or None
        ``B_max / max(T_mem(B_max), c B_max)``: what the memory lets batching reach (tokens/s).
    """

    weights_time_s: float  #: ``a``: the DRAM time no sequence adds (a MoE model's: without its routed experts)
    memory_time_per_sequence: sympy.Expr  #: ``b(ctx)`` in seconds
    compute_time_per_sequence: sympy.Expr  #: ``c(ctx)`` in seconds, on the binding unit
    compute_unit: str
    ctx_ceiling: float | None  #: beyond this context no batch is compute-bound (None: never)
    ctx: int | None = None
    regime: Regime | None = None
    knee_batch: float | None = None  #: ``B* = a / (c - b)`` when compute-bound beyond it
    throughput_ceiling_tokens_per_s: float | None = None
    batch_for_90pct_of_ceiling: float | None = None  #: ``9a/b`` when memory-bound at every batch
    #: the largest batch the device memory holds at this context (None: not checked)
    max_batch_fits: int | None = None
    #: ``B_max / max(T_mem(B_max), c B_max)`` (tokens/s): what the memory lets batching reach
    throughput_at_max_batch_tokens_per_s: float | None = None

    @property
    def capped_by_memory(self) -> bool:
        """True when the knee (or the 90 % batch) lies beyond the largest batch that fits."""
        if self.max_batch_fits is None:
            return False
        beyond = self.knee_batch if self.knee_batch is not None else self.batch_for_90pct_of_ceiling
        return beyond is not None and beyond > self.max_batch_fits


def _root(f: Callable[[float], float], lo: float, hi: float) -> float | None:
    """The ``x`` in ``[lo, hi]`` where the increasing ``f`` crosses zero (bisection, 200 steps), or None."""
    if f(lo) >= 0:
        return lo
    if f(hi) < 0:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if f(mid) >= 0 else (mid, hi)
    return hi


def phase_fields(
    values: Mapping[str, Any],
    *,
    model: str,
    device: str,
    power_w: float | None,
    phase: Phase,
    batch: int,
    tokens: int,
    tp: int,
    notes: tuple[str, ...] = (),
    ep: int = 1,
) -> dict[str, Any]:
    """A report's fields from a step's values (``step_s``, ``optimistic_step_s``, ``terms_s``,
    ``weight_read_s``, ``kv_read_s``, ``flops``, ``attention_flops``): attention's FLOP share
    and the TDP energy estimate ``P tp ep T / tokens`` (J per token: every device of the step,
    ``ep`` expert-parallel ranks of ``tp`` devices each, at its TDP ``P`` (W) for the step's
    ``T`` seconds, as the device-hours and :meth:`~graphs.serving.analysis.parallel.PlanReport.energy_per_token_j`
    count them) are derived here.

    Parameters
    ----------
    values : mapping of str to object
        The step's values: ``step_s``, ``optimistic_step_s`` (s), ``terms_s`` (s per resource),
        ``weight_read_s``, ``kv_read_s`` (s), ``flops``, ``attention_flops`` (FLOP).
    model : str
        The model's name.
    device : str
        The device's name.
    power_w : float or None
        The device's TDP (W); None: no energy estimate.
    phase : Phase
        ``decode`` or ``prefill``.
    batch : int
        Sequences in the step.
    tokens : int
        Tokens the step processes (prefill ``B S``, decode ``B``).
    tp : int
        Tensor-parallel degree.
    notes : tuple of str
        Assumptions to print once with the report.
    ep : int
        Expert-parallel degree: ranks of ``tp`` devices each (1: none).

    Returns
    -------
    dict
        The report's fields (times in s, energy in J per token).
    """
    flops, step = values["flops"], values["step_s"]
    return {
        "model": model,
        "device": device,
        "phase": phase,
        "batch": batch,
        "tokens": tokens,
        "tp": tp,
        "step_s": step,
        "optimistic_step_s": values["optimistic_step_s"],
        "terms_s": dict(values["terms_s"]),
        "weight_read_s": values["weight_read_s"],
        "kv_read_s": values["kv_read_s"],
        "attention_flop_share": values["attention_flops"] / flops if flops else 0.0,
        "energy_per_token_j": power_w * tp * ep * step / tokens if power_w is not None else None,
        "notes": tuple(notes),
        "ep": ep,
    }


def decode_from_fields(
    fields: Mapping[str, Any],
    *,
    bandwidth: float,
    weights_bytes: float,
    embedding_bytes: float,
    power_known: bool | None = None,
) -> DecodeReport:
    """A :class:`DecodeReport` from :func:`phase_fields` and the step's constants: every weight
    byte and the embedding table's share over the DRAM bandwidth (s), and device-hours per
    million tokens ``1e6 / (B / T) x tp x ep / 3600`` (the ``tp x ep`` devices of the step busy
    for the ``1e6 / (B / T)`` seconds a million tokens take, over 3600 s an hour; no power in
    it: a device without a TDP has device-hours too, as ``serve plans`` gives them).

    Parameters
    ----------
    fields : mapping of str to object
        What :func:`phase_fields` returns for a decode step.
    bandwidth : float
        The device's DRAM bandwidth (bytes/s).
    weights_bytes : float
        Every weight byte one device holds.
    embedding_bytes : float
        The input embedding table's bytes (gathered, not read whole).
    power_known : bool, optional
        Ignored: accepted for callers of the earlier signature, which gave device-hours only
        where the device had a TDP.

    Returns
    -------
    DecodeReport
    """
    step, batch = fields["step_s"], fields["batch"]
    devices = fields["tp"] * fields.get("ep", 1)
    return DecodeReport(
        **fields,
        read_every_weight_once_s=weights_bytes / bandwidth,
        embedding_table_read_s=embedding_bytes / bandwidth,
        device_hours_per_million_tokens=1e6 / (batch / step) * devices / 3600,
    )


@dataclass(frozen=True)
class LimitNumbers:
    """The decode step split as memory ``a(ctx) + b(ctx) B`` (or ``T_mem(B, ctx)`` for MoE) and
    compute ``c_u(ctx) B`` per unit, as functions of plain numbers (seconds).

    ``unit_forms(u)`` gives ``c_u`` as an expression (or its text) and the context ceiling
    where ``b = c_u`` (None: never).
    """

    a: Callable[[float], float]
    b: Callable[[float], float]
    mem: Callable[[float, float], float]
    comp: Mapping[str, Callable[[float, float], float]]
    linear: bool
    b_form: sympy.Expr | str
    unit_forms: Callable[[str], tuple[sympy.Expr | str, float | None]]
    #: the step's collectives over the links (s: its ``link:*`` terms, their own nodes, so in
    #: series with the rest), and the whole step's seconds (the report's TPOT); None: none
    link: Callable[[float, float], float] | None = None
    step: Callable[[float, float], float] | None = None


def limits_at(n: LimitNumbers, ctx: int | None, max_batch: int | None = None) -> DecodeLimits:
    """Where batching stops paying (:func:`graphs.serving.analysis.limits.decode_limits` has the math).

    With ``max_batch`` (the largest batch the memory holds at ``ctx``) the limits also give the
    throughput at that batch, ``B_max / T(B_max)`` with ``T`` the whole step (the report's TPOT,
    ``n.step``; without it ``max(T_mem, c_u B) + L``), the ceiling batching can actually reach
    when the knee or the 90 % batch lies beyond it.

    Parameters
    ----------
    n : LimitNumbers
        The decode step's memory and compute parts as functions of plain numbers (s).
    ctx : int or None
        Cached tokens per sequence (None: the limits that do not depend on it).
    max_batch : int, optional
        The largest batch memory holds at ``ctx``.

    Returns
    -------
    DecodeLimits
        Knee batch, batch at 90 % of the ceiling, ceiling throughput (tokens/s), and the throughput
        at ``max_batch`` when given.
    """
    lim = _limits_at(n, ctx)
    if max_batch is None or ctx is None:
        return lim
    reach = None
    if max_batch > 0:
        if n.step is not None:
            step = n.step(max_batch, ctx)
        else:
            step = max(n.mem(max_batch, ctx), *(f(max_batch, ctx) for f in n.comp.values()))
            step += n.link(max_batch, ctx) if n.link is not None else 0.0
        reach = max_batch / step
    return dataclasses.replace(lim, max_batch_fits=max_batch, throughput_at_max_batch_tokens_per_s=reach)


def _limits_at(n: LimitNumbers, ctx: int | None) -> DecodeLimits:
    at = ctx or 4096
    c_unit = max(n.comp, key=lambda k: n.comp[k](1, at))
    c_form, ceiling = n.unit_forms(c_unit)
    base = DecodeLimits(
        weights_time_s=n.a(1),
        memory_time_per_sequence=n.b_form,
        compute_time_per_sequence=c_form,
        compute_unit=c_unit,
        ctx_ceiling=ceiling,
    )
    if ctx is None:
        return base
    a_n, b_n, c_n = n.a(ctx), n.b(ctx), n.comp[c_unit](1, ctx)
    # the collectives, in series: L(B) = l_a + l_b B (bytes a sequence, plus per-message latency)
    l_b = n.link(2, ctx) - n.link(1, ctx) if n.link is not None else 0.0
    l_a = n.link(1, ctx) - l_b if n.link is not None else 0.0

    def t_mem(bb: float) -> float:
        return n.mem(bb, ctx)

    knee: float | None  # None: the root search found no crossing below 1e12
    b90: float | None
    if c_n > b_n:
        if n.linear:
            knee = a_n / (c_n - b_n)
        else:  # smallest batch whose compute time reaches its memory time
            knee = _root(lambda bb: c_n * bb - t_mem(bb), 1e-9, 1e12)
        return dataclasses.replace(
            base,
            ctx=ctx,
            regime=Regime.COMPUTE_BEYOND_KNEE,
            knee_batch=knee,
            throughput_ceiling_tokens_per_s=1 / (c_n + l_b),
        )
    if n.linear:  # B / (a + l_a + (b + l_b) B) = 0.9 / (b + l_b)
        b90 = 9 * (a_n + l_a) / (b_n + l_b)
    else:  # B / (T_mem(B) + L(B)) reaches 90 % of 1 / (b + l_b)
        b90 = _root(lambda bb: bb / (t_mem(bb) + l_a + l_b * bb) - 0.9 / (b_n + l_b), 1e-9, 1e12)
    return dataclasses.replace(
        base,
        ctx=ctx,
        regime=Regime.MEMORY_AT_EVERY_BATCH,
        throughput_ceiling_tokens_per_s=1 / (b_n + l_b),
        batch_for_90pct_of_ceiling=b90,
    )


#: most chunks a chunked prefill is evaluated over (one compiled call each)
MAX_CHUNKS = 1_000_000


def chunk_plan(seq: int, chunk: int | None) -> tuple[int, int] | None:
    """``(full chunks, leftover tokens)`` of a ``seq``-token prompt in chunks of ``chunk``, or
    None when the prompt runs as one step (no chunk, or a chunk at least as long).

    Parameters
    ----------
    seq : int
        Prompt tokens.
    chunk : int or None
        Chunk size (tokens); None: no chunking.

    Returns
    -------
    tuple of (int, int) or None
        ``(full chunks, leftover tokens)``; None when the prompt runs as one step.

    Raises
    ------
    CostModelError
        When ``chunk`` is not a positive integer.
    """
    if chunk is None or (type(chunk) is int and chunk >= seq):
        return None
    if type(chunk) is not int or chunk <= 0:
        raise CostModelError(f"chunk must be a positive number of tokens, got {chunk!r}")
    if seq // chunk > MAX_CHUNKS:
        raise CostModelError(
            f"{seq} tokens in chunks of {chunk} make {seq // chunk} chunks; at most {MAX_CHUNKS} (use a larger chunk)"
        )
    return divmod(seq, chunk)


def prefill_from_fields(
    fields: Mapping[str, Any],
    *,
    chunk: int | None = None,
    chunks: int = 1,
    chunked_s: float | None = None,
    power_w: float | None = None,
) -> PrefillReport:
    """A :class:`PrefillReport`: the prompt as one step, or (``chunked_s``) the sum of its
    ``chunks`` chunk steps as the time, the rest describing the whole prompt.

    Parameters
    ----------
    fields : mapping of str to object
        What :func:`phase_fields` returns for the whole prompt.
    chunk : int, optional
        Chunk size (tokens), when chunked.
    chunks : int
        How many chunk steps.
    chunked_s : float, optional
        The sum of the chunk steps (s); replaces the one-step time.
    power_w : float, optional
        The device's TDP (W), for the energy of the chunked time, ``P tp ep T / tokens`` (every
        device of the step: ``ep`` ranks of ``tp`` devices each).

    Returns
    -------
    PrefillReport
    """
    if chunked_s is None:
        return PrefillReport(**fields)
    tokens = fields["tokens"]
    devices = fields["tp"] * fields.get("ep", 1)
    energy = power_w * devices * chunked_s / tokens if power_w is not None else None
    return PrefillReport(
        **{**fields, "step_s": chunked_s, "energy_per_token_j": energy},
        chunks=chunks,
        chunk=chunk,
        unchunked_step_s=fields["step_s"],
    )


def cache_read_bytes(caps: dict[str, Any], *, batch: int, ctx: int) -> tuple[float, float]:
    """Cache bytes a decode step of ``batch`` sequences at ``ctx`` holds, and what they would be
    if every layer kept all ``ctx`` positions (the state stays the state).

    Parameters
    ----------
    caps : dict
        One sequence's cache layout per device (:func:`graphs.serving.step.ledger_fit.kv_caps`).
    batch : int
        Sequences.
    ctx : int
        Cached tokens per sequence.

    Returns
    -------
    tuple of (float, float)
        Bytes held, and bytes if every layer kept all ``ctx`` positions.
    """
    capped = caps.get("capped", ())
    held = ctx * caps["per_token"] + sum(k * min(ctx, w) for k, w in capped) + caps["state"]
    full = ctx * (caps["per_token"] + sum(k for k, _w in capped)) + caps["state"]
    return batch * held, batch * full
