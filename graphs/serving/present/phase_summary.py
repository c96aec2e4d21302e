"""What ``costmodel decode`` and ``costmodel prefill`` print, as objects that render themselves.

:class:`DecodeSummary` holds one decode step's report (:class:`~graphs.serving.step.reports.DecodeReport`)
with what the command prints beside it: the limits (knee batch, context ceiling), the memory
figures, the capacity check, the cache layout and the expert plan; :class:`PrefillSummary` the
same for a prefill step. Each has ``to_text()`` (the command's lines), ``to_dict()`` (its
``--json``) and ``to_html()`` (the ``--html`` page, :func:`graphs.serving.present.html_views.phase_page`).

Light on purpose, like the reports it holds: the command line's cached path (a card read back
without sympy, numpy or networkx) renders through it; the page's module loads only in ``to_html``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from costmodel.keys import Unit
from costmodel.text import fmt_num, fmt_si, fmt_time

from ..step.reports import cache_read_bytes

if TYPE_CHECKING:
    from models.config import ModelConfig

    from ..analysis.phase_request import PhaseRequest
    from ..step.fit_check import CapacityCheck
    from ..step.reports import DecodeLimits, DecodeReport, NearFarMemory, PrefillReport
    from .step_prediction import StepPrediction

__all__ = [
    "DecodeSummary",
    "PrefillSummary",
    "run_phase",
    "expert_plan_line",
    "OTHER_DRAM_SHOWN",
    "IGNORED_CAPACITY",
    "memory_cap",
    "energy_words",
]

#: what ``--ignore-capacity`` adds to the verdict of a point that does not fit (the text's first
#: line, the page's first headline)
IGNORED_CAPACITY = "; --ignore-capacity: the numbers below are for a point that cannot run"


def expert_plan_line(plan: Mapping[str, Any], extra: str = "", refused: bool = False) -> str | None:
    """What a routed step holds and what it leaves out (None for the default step); after a
    refusal, only what the memory check leaves out.

    Parameters
    ----------
    plan : mapping
        ``{"ep": EP degree, "routing": the routing's label}``, empty for the default step.
    extra : str
        A clause appended (what this command does not solve for the plan).
    refused : bool
        Whether the point was refused for memory.

    Returns
    -------
    str or None
    """
    if not plan:
        return None
    memory = f"the memory check spreads the routed experts over the {plan['ep']} EP ranks"
    if refused:
        return f"  (--ep {plan['ep']}: {memory}; {extra})"
    return (
        f"  ep {plan['ep']}, routing {plan['routing']}: the routed experts are the busiest EP rank's "
        "(expected maximum over ranks of rows and touched experts); the all-to-all between ranks is "
        f"not in this step (serve plans adds it); {memory}; each EP rank is a tp group of its own, "
        "so the step runs on tp x ep devices" + (f"; {extra}" if extra else "")
    )


#: what decode does not solve for a routed plan (its text's and its JSON's plan note)
_DECODE_PLAN_EXTRA = "knee batch and ctx ceiling not solved for this plan"


def _with_plan_note(doc: dict[str, Any], plan: str | None) -> dict[str, Any]:
    """``doc`` with the routed plan's caveat (:func:`expert_plan_line`) among its ``notes``, as
    the text says it (a review found ``--json`` without it)."""
    if plan is None:
        return doc
    return {**doc, "notes": [*doc.get("notes", ()), plan.strip()]}


def _devices(rep: DecodeReport | PrefillReport) -> str:
    """The devices a step's energy counts: ``2 device(s)``, ``4 device(s) (tp 2 x ep 2)``."""
    return f"{rep.devices} device(s)" + (f" (tp {rep.tp} x ep {rep.ep})" if rep.ep > 1 else "")


def energy_words(rep: DecodeReport | PrefillReport) -> str | None:
    """A step's energy per token as its text says it (None: no TDP): decode ``29.3389 J/token
    (TDP x 1 device(s) x TPOT / batch: an estimate at full power)``, prefill ``11.695 mJ/token
    (TDP x 1 device(s) x time)``.

    Parameters
    ----------
    rep : DecodeReport or PrefillReport
        The step.

    Returns
    -------
    str or None
    """
    e = rep.energy_per_token_j
    if e is None:
        return None
    if rep.phase == "decode":
        return (
            f"{fmt_num(e, '.4f')} J/token (TDP x {_devices(rep)} x TPOT / batch: an estimate at full power)"
        )
    return f"{fmt_num(e * 1e3)} mJ/token (TDP x {_devices(rep)} x time)"


#: the DRAM traffic beside the weight and KV reads that a decode line prints, as a share of the
#: whole DRAM term (below it, weight + KV is the DRAM term to within the verdict's rounding)
OTHER_DRAM_SHOWN = 0.01


def _other_dram(rep: DecodeReport) -> str:
    """``activations 2.223 ms (DRAM 9.710 ms in all) | ``: the rest of the step's DRAM traffic.

    The whole-step DRAM term is ``t_dram = bytes_dram / BW`` (s; every byte the step moves to or
    from DRAM, :func:`~graphs.serving.step.reports.bound_by`), of which the weight read
    ``t_w`` and the KV read ``t_kv`` are parts; the rest, ``t_dram - t_w - t_kv``, is activation
    traffic between kernels that are not fused. ``bound by: memory (dram, N% ...)`` is
    ``t_dram / T``, so the line shows the rest and the total whenever the rest is at least
    :data:`OTHER_DRAM_SHOWN` of ``t_dram`` (else nothing: weight + KV is the DRAM term).
    Llama-3.1-8B at batch 600, ctx 128 on an H100: 4.482 + 3.005 + 2.223 = 9.710 ms.
    """
    dram = rep.terms_s.get("dram", 0.0)
    rest = dram - rep.weight_read_s - rep.kv_read_s
    if dram <= 0 or rest < OTHER_DRAM_SHOWN * dram:
        return ""
    return f"activations {fmt_time(rest)} (DRAM {fmt_time(dram)} in all) | "


def _kernels(prediction: StepPrediction | None) -> Any:
    """The calibrated kernel prediction a page draws (None: none, or a fit made on the bound)."""
    return None if prediction is None else prediction.prediction


def _notes(notes: Any) -> list[str]:
    """The device's roof substitutions (an SFU charged to the vector roof, say), one line each."""
    return [f"  note: {note}" for note in notes]


def _cache_line(caps: Mapping[str, Any], batch: int, ctx: int) -> list[str]:
    """One line when windowed/chunked layers or recurrent state shape the KV read."""
    if not (caps.get("capped") or caps.get("state")):
        return []
    held, full = cache_read_bytes(dict(caps), batch=batch, ctx=ctx)
    parts = []
    if caps.get("capped"):
        kept = ", ".join(f"{w:.0f}" for _k, w in caps["capped"])
        parts.append(f"layers capped at {kept} positions; {fmt_si(full, 'B')} if every layer kept all {ctx}")
    if caps.get("state"):
        parts.append(f"recurrent state {fmt_si(batch * caps['state'], 'B')} of it, constant in ctx")
    return [f"  cache held {fmt_si(held, 'B')} at ctx {ctx} (" + "; ".join(parts) + ")"]


def memory_cap(lim: DecodeLimits, ctx: int, tp: int = 1) -> str | None:
    """What caps the throughput ceiling when the memory holds fewer sequences than reach it:
    ``at most batch 129 fits at ctx 4096, where throughput reaches 5,033 tokens/s`` (None when
    the memory does not cap it).

    Parameters
    ----------
    lim : DecodeLimits
        The batching limits.
    ctx : int
        The decode context.
    tp : int
        Tensor-parallel degree (throughputs are the whole group's).

    Returns
    -------
    str or None
    """
    if not lim.capped_by_memory:
        return None
    unit = "tokens/s" + (f" over the {tp} devices" if tp > 1 else "")
    reach = lim.throughput_at_max_batch_tokens_per_s
    return f"at most batch {lim.max_batch_fits} fits at ctx {ctx}, " + (
        f"where throughput reaches {reach:,.0f} {unit}" if reach else "so no batch runs"
    )


def _knee_lines(lim: DecodeLimits, fit: CapacityCheck, batch: int, ctx: int, tp: int = 1) -> list[str]:
    """The knee, the throughput ceiling and the context ceiling, capped at what the memory holds
    (throughputs of the whole tensor-parallel group, said when it has several devices)."""
    ceiling = lim.throughput_ceiling_tokens_per_s or 0.0
    unit = "tokens/s" + (f" over the {tp} devices" if tp > 1 else "")
    if lim.knee_batch is not None:
        out = [
            f"  compute-bound beyond batch {lim.knee_batch:.0f} at this ctx; throughput ceiling {ceiling:,.0f} {unit} "
            "(the whole step's roofline, every kernel's bytes and FLOPs overlapped: an upper bound the "
            "per-kernel TPOT above does not reach)"
        ]
    else:
        out = [
            f"  no batch is compute-bound at ctx {ctx}: throughput creeps towards the whole step's "
            f"roofline, {ceiling:,.0f} {unit} (90% at batch {lim.batch_for_90pct_of_ceiling or 0:.0f}; "
            "every kernel's bytes and FLOPs overlapped: an upper bound)"
        ]
    if (cap := memory_cap(lim, ctx, tp)) is not None:
        out.append(f"    capped by memory: {cap}")
    if lim.ctx_ceiling is not None:
        cap = ""
        if lim.ctx_ceiling > fit.max_context:
            held = f"at most ctx {fit.max_context:,} fits" if fit.max_context else "no ctx fits"
            cap = f" (capped by memory: {held} at batch {batch})"
        out.append(
            f"  beyond ctx {lim.ctx_ceiling:,.0f} no batch reaches compute-bound (KV reads outgrow compute){cap}"
        )
    return out


class _PhasePage:
    """The ``--html`` page of a phase summary, one method for decode and prefill: each summary
    says which of :func:`~graphs.serving.present.html_views.phase_page`'s settings are its own."""

    report: Any
    request: PhaseRequest
    capacity: CapacityCheck

    def _page_settings(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_html(
        self, config: ModelConfig, *, command: str = "", prediction: StepPrediction | None = None
    ) -> str:
        """The ``decode --html`` or ``prefill --html`` page
        (:func:`graphs.serving.present.html_views.phase_page`).

        Parameters
        ----------
        config : ModelConfig
            The model (the page draws its compiled step's nodes).
        command : str
            The command line shown in the page's header.
        prediction : StepPrediction, optional
            ``--predict``'s prediction (:mod:`graphs.serving.present.step_prediction`), drawn
            beside the bound (a fit made on the bound draws none).

        Returns
        -------
        str
        """
        from .html_views import phase_page  # the page's module loads sympy: only when a page is drawn

        fit = self.capacity
        return phase_page(
            self.report,
            config,
            command=command,
            prediction=_kernels(prediction),
            routing=self.request.plan().get("routing"),  # the step the report priced (--ep, --routing)
            verdict=None if fit.fits else fit.headline() + IGNORED_CAPACITY,  # the text's first line
            **self._page_settings(),
        )


@dataclass(frozen=True)
class DecodeSummary(_PhasePage):
    """One decode step and what ``costmodel decode`` prints beside it.

    Attributes
    ----------
    request : PhaseRequest
        The checked point (``ctx``, ``batch``, ``tp``, the expert plan).
    report : DecodeReport
        The step.
    capacity : CapacityCheck
        Whether the point fits, and the largest batch and context that do.
    near_far : NearFarMemory
        Full-memory reads per second and the devices the weights need.
    limits : DecodeLimits, optional
        The knee batch and the context ceiling (None: not solved for a routed plan).
    caps : mapping
        The cache layout (:func:`graphs.serving.step.ledger_fit.kv_caps`): windowed or chunked
        layers and recurrent state.
    expert_plan : mapping
        ``{"ep", "routing"}`` of a routed step (empty for the default step).
    """

    request: PhaseRequest
    report: DecodeReport
    capacity: CapacityCheck
    near_far: NearFarMemory
    limits: DecodeLimits | None = None
    caps: Mapping[str, Any] = field(default_factory=dict)
    expert_plan: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """What ``decode --json`` prints: the step, its limits, memory figures, the expert plan and
        the capacity check.

        Returns
        -------
        dict
        """
        limits = self.limits.to_dict() if self.limits is not None else None
        doc = {
            **self.report.to_dict(),
            "limits": limits,
            "near_far_memory": self.near_far.to_dict(),
            **self.expert_plan,
        }
        return {
            **_with_plan_note(doc, expert_plan_line(self.expert_plan, _DECODE_PLAN_EXTRA)),
            "capacity": self.capacity.to_dict(),
        }

    def to_text(self) -> str:
        """What ``costmodel decode`` prints (before ``--predict``'s lines).

        Returns
        -------
        str
        """
        rep, nf, ctx = self.report, self.near_far, self.request.ctx
        compute = max((v for k, v in rep.terms_s.items() if k in tuple(Unit)), default=0.0)
        links = {k: v for k, v in rep.terms_s.items() if k.startswith("link:")}
        out = [f"{rep.model} decode on {rep.device}: batch {rep.batch}, ctx {ctx}, tp={rep.tp}"]
        out += _notes(rep.notes)
        plan = expert_plan_line(self.expert_plan, _DECODE_PLAN_EXTRA)
        out += [plan] if plan else []
        out.append(
            f"  weight read {fmt_time(rep.weight_read_s)} | KV read {fmt_time(rep.kv_read_s)} | "
            + _other_dram(rep)
            + f"compute {fmt_time(compute)}"
            + "".join(f" | {k[5:]} {fmt_time(v)}" for k, v in links.items())
        )
        if (b := rep.bound_by) is not None:
            out.append(f"  {b.line()}")
        out += _cache_line(self.caps, self.request.batch, ctx)
        out.append(
            f"  TPOT bound {fmt_time(rep.step_s)} -> {rep.tokens_per_s_per_user:.1f} tokens/s per user, "
            f"{rep.tokens_per_s_per_device:.1f} tokens/s per device"
        )
        if rep.weight_read_s >= rep.read_every_weight_once_s * (1 - 1e-9):  # nothing left unread
            out.append(
                f"  reading every weight once takes {fmt_time(rep.read_every_weight_once_s)}; the graph reads "
                f"{fmt_time(rep.weight_read_s)} of weights: the input-embedding table is tied to the lm_head, "
                f"which streams it whole, and the {rep.batch} row(s) in use are gathered besides"
            )
        else:
            out.append(
                f"  reading every weight once takes {fmt_time(rep.read_every_weight_once_s)}; the graph reads "
                f"{fmt_time(rep.weight_read_s)} of weights because the input-embedding table "
                f"({fmt_time(rep.embedding_table_read_s)} of it) is gathered, not streamed: only the "
                f"{rep.batch} row(s) in use are read"
                + (
                    ", and only the experts the batch routes to"
                    + (" on the busiest EP rank" if self.expert_plan else "")
                    + " are read"
                    # more missing than the embedding table: a MoE step reads its touched experts only
                    if rep.read_every_weight_once_s - rep.weight_read_s > 1.01 * rep.embedding_table_read_s
                    else ""
                )
            )
        # device-hours need no power: a device without a TDP has them, its energy says why not
        words = energy_words(rep)
        energy = f"energy {words}" if words is not None else "energy: no TDP for this device"
        hours = rep.device_hours_per_million_tokens
        out.append(
            f"  {energy}"
            + (f"; {fmt_num(hours)} device-hours per million tokens" if hours is not None else "")
        )
        if self.limits is not None:
            out += _knee_lines(self.limits, self.capacity, self.request.batch, ctx, rep.tp)
        split = f"this step splits it over tp={rep.tp}"
        if rep.tp > 1:  # norms, routers and biases every device of the group keeps a copy of
            split += (
                f", each device reading {fmt_time(rep.read_every_weight_once_s)} of it with the tensors "
                "every device keeps a copy of"
            )
        out.append(
            f"  memory: {nf.full_memory_reads_per_s:.1f} full-memory reads/s; the weights need at least "
            f"{nf.devices_to_hold_weights} device(s), and on exactly that many the weight read alone takes "
            f"{fmt_time(nf.per_token_bound_s)} per token, split evenly ({split})"
        )
        return "\n".join(out)

    def _page_settings(self) -> dict[str, Any]:
        """:func:`~graphs.serving.present.html_views.phase_page`'s settings of a decode step."""
        return {"limits": self.limits, "ctx": self.request.ctx}


@dataclass(frozen=True)
class PrefillSummary(_PhasePage):
    """One prefill step and what ``costmodel prefill`` prints beside it.

    Attributes
    ----------
    request : PhaseRequest
        The checked point (``seq``, ``chunk``, ``batch``, ``tp``, the expert plan).
    report : PrefillReport
        The step.
    capacity : CapacityCheck
        Whether the point fits.
    expert_plan : mapping
        ``{"ep", "routing"}`` of a routed step (empty for the default step).
    """

    request: PhaseRequest
    report: PrefillReport
    capacity: CapacityCheck
    expert_plan: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """What ``prefill --json`` prints: the step, the capacity check and the expert plan.

        Returns
        -------
        dict
        """
        doc = {**self.report.to_dict(), "capacity": self.capacity.to_dict(), **self.expert_plan}
        return _with_plan_note(doc, expert_plan_line(self.expert_plan))

    def to_text(self) -> str:
        """What ``costmodel prefill`` prints (before ``--predict``'s lines).

        Returns
        -------
        str
        """
        rep, req = self.report, self.request
        out = [
            f"{rep.model} prefill on {rep.device}: batch {rep.batch} x {req.seq} tokens, tp={rep.tp}"
            + (f", chunks of {req.chunk}" if req.chunk else "")
        ]
        out += _notes(rep.notes)
        plan = expert_plan_line(self.expert_plan)
        out += [plan] if plan else []
        out.append(
            f"  TTFT lower bound (sum of kernel bounds): {fmt_time(rep.step_s)}"
            f"  [whole prompt as one roofline: {fmt_time(rep.optimistic_step_s)}]"
        )
        if req.chunk and rep.chunks > 1:  # the terms below are the one step's, the time the chunks' sum
            out.append(
                f"  the whole prompt as one step (the TTFT above sums {rep.chunks} chunk steps, each reading "
                "the weights again and the KV of the chunks before it):"
            )
        out += [f"    {k:16s} {fmt_num(v * 1e3, '10.3f')} ms" for k, v in rep.terms_s.items()]
        if (b := rep.bound_by) is not None:
            out.append(f"  {b.line()}")
        out.append(f"  attention share of FLOPs: {100 * rep.attention_flop_share:.1f}%")
        out.append(
            f"  throughput {rep.tokens_per_s:,.0f} tokens/s"
            + (f", {energy_words(rep)}" if rep.energy_per_token_j else "")
        )
        return "\n".join(out)

    def _page_settings(self) -> dict[str, Any]:
        """:func:`~graphs.serving.present.html_views.phase_page`'s settings of a prefill step."""
        return {"seq": self.request.seq}


def run_phase(
    request: PhaseRequest, config: ModelConfig | str, *, check_memory: bool = True
) -> DecodeSummary | PrefillSummary:
    """Answer ``request`` for ``config`` from the library: what ``costmodel decode`` or
    ``costmodel prefill`` prints (before ``--predict``'s lines), ``to_dict()`` its ``--json``.

    The command reads the same numbers from a cached card when it has one (compiled closed forms:
    equal to the library's to rounding); a point the device memory does not hold is answered with
    the capacity check saying so (the command refuses it unless ``--ignore-capacity``).

    Parameters
    ----------
    request : PhaseRequest
        The checked point: ``phase``, ``device``, ``batch``, ``ctx`` (decode) or ``seq`` and
        ``chunk`` (prefill), ``tp`` and the expert plan (``ep``, ``routing``, ``placement``,
        ``replicate_hot``). ``predict`` is not priced here (the command's extra lines).
    config : ModelConfig or str
        The model, or a catalog name or config.json path.
    check_memory : bool, default True
        Say among the report's notes when the memory does not hold the point (the command says it
        in its own first line instead).

    Returns
    -------
    DecodeSummary or PrefillSummary
        The step, the capacity check and (decode) the limits, memory figures and cache layout.

    Raises
    ------
    CostModelError
        When the model or device is unknown, the point is invalid for the model (a ``tp`` that
        does not divide its heads, an expert plan on a dense model), or it exceeds the model's
        context limit (:class:`~models.context.ContextLimitError`).

    >>> from graphs.serving import PhaseRequest
    >>> s = run_phase(PhaseRequest("decode", device="h100", batch=16, ctx=4096), "llama-3.1-8b")
    >>> round(s.report.step_s * 1e3, 2), s.capacity.max_batch  # as decode_report and capacity
    (7.1, 129)
    """
    from ..analysis.limits import decode_limits
    from ..analysis.phases import decode_report, near_far_memory, prefill_report
    from ..step.ledger_fit import capacity_check, kv_caps
    from ..step.workload import as_workload

    w = as_workload(config)
    req = request
    plan = req.plan()
    expert = {"ep": req.ep, "routing": plan["routing"].label} if plan else {}
    decode = req.phase == "decode"
    tokens = req.ctx if decode else req.seq
    fit = capacity_check(w, req.device, phase=req.phase, batch=req.batch, tokens=tokens, tp=req.tp, ep=req.ep)
    point = {"batch": req.batch, "tp": req.tp, "check_memory": check_memory, **plan}
    if not decode:
        rep = prefill_report(w, req.device, seq=req.seq, chunk=req.chunk, **point)
        return PrefillSummary(req, rep, fit, expert)
    drep = decode_report(w, req.device, ctx=req.ctx, **point)
    # the knee and the context ceiling are the default step's (not solved for a routed plan)
    lim = None if plan else decode_limits(w, req.device, ctx=req.ctx, tp=req.tp, max_batch=fit.max_batch)
    return DecodeSummary(req, drep, fit, near_far_memory(w, req.device), lim, kv_caps(w, tp=req.tp), expert)
