"""Parallel plans: tensor x pipeline x expert parallelism for a decode step.

* Tensor parallelism (degree ``tp``) is in the graph itself (two all-reduces
  per layer, :func:`graphs.build_model` with ``tp``).
* Pipeline parallelism (``pp`` stages, ``m`` micro-batches): each stage holds
  ``L/pp`` layers; a micro-batch's hidden state ``[B/m, d]`` crosses ``pp - 1``
  stage boundaries. With the stages busy in turn (GPipe/1F1B schedule), a
  step takes ``(m + pp - 1)`` stage slots, and the bubble (idle) fraction is
  ``(pp - 1) / (m + pp - 1)`` (Huang et al. 2019).
* Expert parallelism (``ep``): the routed experts of each MoE layer spread
  over ``ep`` devices; each token's hidden state goes to its ``k`` experts and
  comes back: two all-to-alls of ``T k d b`` per MoE layer (the
  ``all_to_all`` rule, ``(ep-1)/ep`` of it leaving each device).

The plan's step time adds the communication terms to the graph's compute
and memory bound; every term is reported so a user sees what dominates.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.frontier import pareto_mask
from costmodel.hardware import Hardware, get_device
from costmodel.keys import LinkName, Phase
from costmodel.results import Result
from costmodel.roofline import bound
from costmodel.rules import op_cost
from costmodel.symbols import check_dim, dim
from models.config import ModelConfig, MoESpec

from ..pricing.predictor import Predictor
from ..pricing.priced import priced_step
from ..step.compiled import positive_int
from ..step.expert_routing import Routing, busiest_rank
from ..step.ledger_fit import decode_memory, routed_expert_bytes
from ..step.workload import Workload, as_workload

__all__ = [
    "comm_forms",
    "bubble_fraction",
    "parallel_plan",
    "plan_frontier",
    "plan_memory_bytes",
    "dp_weights_saved",
    "routed_expert_bytes",
    "PlanReport",
    "PlanPoint",
]


def bubble_fraction(stages: Any, microbatches: Any) -> sympy.Expr:
    """Idle fraction of a pipeline: ``(p - 1) / (m + p - 1)``.

    Parameters
    ----------
    stages : int or sympy.Expr
        Pipeline stages ``p``.
    microbatches : int or sympy.Expr
        Micro-batches ``m`` per step.

    Returns
    -------
    sympy.Expr
        The idle fraction, in ``[0, 1)``.

    >>> bubble_fraction(4, 12)
    1/5
    """
    p, m = check_dim(stages, "stages"), check_dim(microbatches, "microbatches")
    return (p - 1) / (m + p - 1)


@dataclass(frozen=True)
class PlanReport(Result):
    """One decode step of ``batch`` sequences on ``tp * pp * ep`` devices (module doc).

    Attributes
    ----------
    model, device : str
        What was run, by name.
    devices : int
        ``tp * pp * ep``.
    tp, pp, ep : int
        Tensor-parallel, pipeline and expert-parallel degrees.
    microbatches : int
        Micro-batches ``m`` the batch is split into.
    batch : int
        Sequences in the decode step.
    ctx : int
        Cached tokens per sequence.
    stage_s : float
        One pipeline stage on one micro-batch: the model's step over ``pp`` (s).
    stage_hop_s : float
        Activations of one micro-batch to the next stage over the link (s; 0 without ``pp``).
    bubble_fraction : float
        ``(pp - 1) / (m + pp - 1)``.
    expert_all_to_all_s : float
        Dispatch and combine of every MoE layer and micro-batch (s; 0 without ``ep``).
    step_s : float
        ``(m + pp - 1) (stage_s + stage_hop_s) + expert_all_to_all_s`` (s).
    """

    model: str
    device: str
    devices: int
    tp: int
    pp: int
    ep: int
    microbatches: int
    batch: int
    ctx: int
    stage_s: float  #: one pipeline stage, one micro-batch
    stage_hop_s: float  #: activations to the next stage over the link
    bubble_fraction: float
    expert_all_to_all_s: float  #: dispatch + combine in every MoE layer
    step_s: float

    @property
    def plan(self) -> str:
        return f"tp{self.tp} pp{self.pp} ep{self.ep} m{self.microbatches}"

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.step_s

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1 / self.step_s

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.batch / self.step_s / self.devices

    def energy_per_token_j(self, power_w: float) -> float:
        """``P x devices x step / batch`` at a power of ``power_w`` per device.

        Parameters
        ----------
        power_w : float
            Power per device (W).

        Returns
        -------
        float
            Joules per output token.
        """
        return power_w * self.devices * self.step_s / self.batch

    @property
    def device_hours_per_million_tokens(self) -> float:
        return self.devices * self.step_s / self.batch * 1e6 / 3600

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "plan": self.plan,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "device_hours_per_million_tokens": self.device_hours_per_million_tokens,
        }


def parallel_plan(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int,
    ctx: int,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    microbatches: int = 1,
    link: str = LinkName.SCALE_UP,
    routing: Routing | None = None,
    predictor: Predictor | None = None,
) -> PlanReport:
    """Decode step of ``batch`` sequences on ``tp * pp * ep`` devices (module doc); ``routing``
    (:mod:`graphs.serving.step.expert_routing`): the busiest EP rank sets the experts' step and receives
    ``E max_r X_r / (T k / ep)`` times the mean all-to-all volume (uniform routing too: its
    busiest rank in a step of ``T`` tokens, :func:`~graphs.serving.step.expert_routing.busiest_rank`); ``predictor`` prices the step's kernels
    (:func:`graphs.serving.pricing.priced.priced_step`; default the bound).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device of every rank.
    batch : int
        Sequences in the decode step.
    ctx : int
        Cached tokens per sequence.
    tp : int
        Tensor-parallel degree.
    pp : int
        Pipeline stages (must divide the layers).
    ep : int
        Expert-parallel degree (a MoE model only).
    microbatches : int
        Micro-batches the batch is split into (must divide it).
    link : str
        The link the stage hop and all-to-all cross: ``"scale_up"`` or ``"scale_out"``.
    routing : Routing, optional
        A routing distribution and placement (MoE only; default uniform).
    predictor : Predictor, optional
        Prices the step's kernels (default: the bound).

    Returns
    -------
    PlanReport
        Step time (s), bubble, communication terms, tokens/s per user and per device, memory.

    Raises
    ------
    CostModelError
        When a degree is below 1, ``pp`` does not divide the layers, ``microbatches`` the batch,
        or ``ep``/``routing`` is asked of a model without experts.
    """
    w = as_workload(config)
    cfg = w.config
    hw = get_device(device)
    # whole numbers of any type (np.int64, 4.0) as every entry point takes them; '2' or None was a
    # bare TypeError from the comparison
    tp, pp, ep = positive_int(tp, "tp"), positive_int(pp, "pp"), positive_int(ep, "ep")
    microbatches, batch = positive_int(microbatches, "microbatches"), positive_int(batch, "batch")
    ctx = positive_int(ctx, "ctx")
    if link not in (LinkName.SCALE_UP, LinkName.SCALE_OUT):  # 'x' was taken, unused at pp 1 and ep 1
        raise CostModelError(f"link {link!r:.40} not allowed; allowed: scale_up, scale_out")
    layers = int(as_float(cfg.num_hidden_layers))
    if layers % pp:
        raise CostModelError(f"pp ({pp}) must divide the {layers} layers")
    if batch % microbatches:
        raise CostModelError(f"microbatches ({microbatches}) must divide the batch ({batch})")
    if ep > 1 and not cfg.is_moe:
        raise CostModelError(f"{cfg.name} has no experts: expert parallelism needs a MoE model")
    if routing is not None and not routing.is_default and not cfg.is_moe:
        raise CostModelError(f"{cfg.name} has no experts: a routing distribution needs a MoE model")
    mb = batch // microbatches
    # all layers, one micro-batch, tp-way split (all-reduces included); with ep, each device
    # runs the busiest EP rank's share of the routed experts (work and weights)
    c = priced_step(w, hw, Phase.DECODE, tp=tp, ep=ep, routing=routing, predictor=predictor)
    t_model = c.step(mb, ctx)
    t_stage = t_model / pp
    hop, a2a = c.memo(f"plan_comm:{link}:{tp}", lambda: _comm_scalar(cfg, hw, link, ep, tp * ep))
    t_hop = hop(mb) if pp > 1 else 0.0
    if not math.isfinite(t_hop):
        raise CostModelError(
            f"{hw.name} has no {link} link to pass activations between pipeline stages (pp {pp}); links: "
            + (", ".join(lk.name for lk in hw.links) or "none")
        )
    slots = microbatches + pp - 1
    t_pipe = slots * (t_stage + t_hop)
    t_ep = 2 * a2a(mb) * as_float(cfg.n_moe_layers) * microbatches if ep > 1 else 0.0  # dispatch + combine
    if routing is not None and not routing.is_default and ep > 1:  # the busiest rank's volume
        moe = cfg.need(MoESpec)
        e, k = int(as_float(moe.num_experts)), int(as_float(moe.num_experts_per_tok))
        skew, uniform = (float(busiest_rank(r, e, k, ep, mb).rows) for r in (routing, Routing()))
        t_ep *= skew / uniform
    return PlanReport(
        model=cfg.name,
        device=hw.name,
        devices=tp * pp * ep,
        tp=tp,
        pp=pp,
        ep=ep,
        microbatches=microbatches,
        batch=batch,
        ctx=ctx,
        stage_s=t_stage,
        stage_hop_s=t_hop,
        bubble_fraction=as_float(bubble_fraction(pp, microbatches)),
        expert_all_to_all_s=t_ep,
        step_s=t_pipe + t_ep,
    )


#: the micro-batch (sequences per pipeline slot) that the communication forms are written in
MICROBATCH = dim("microbatch")


def comm_forms(
    cfg: ModelConfig, hw: Hardware, link: str, ep: int, span: int | None = None
) -> tuple[sympy.Expr, sympy.Expr]:
    """In the micro-batch ``b`` (:data:`MICROBATCH`), seconds: the stage hop (activations ``[b, d]``
    over the link, plus its latency) and one expert all-to-all (``b k d`` elements over ``ep``
    devices in the mean, ``ep d E max_r X_r`` for the busiest rank under uniform routing, which
    the step waits for: :func:`~graphs.serving.step.expert_routing.busiest_rank`; 0 without expert
    parallelism). The all-to-all's ranks span ``span`` devices (default ``ep``; ``tp x ep`` when
    each expert shard is tp-wide): on the scale-up link within the domain, on the scale-out link
    past it (:meth:`costmodel.hardware.Hardware.group_link`).

    Parameters
    ----------
    cfg : ModelConfig
        The model.
    hw : Hardware
        The device.
    link : str
        ``"scale_up"`` or ``"scale_out"``: the stage hop's link.
    ep : int
        Expert-parallel degree.
    span : int, optional
        Devices the all-to-all's ranks span (default ``ep``).

    Returns
    -------
    tuple of (sympy.Expr, sympy.Expr)
        The stage hop and one all-to-all (s), in the micro-batch ``b``.
    """
    b = MICROBATCH
    act = op_cost("copy", elements=b * cfg.hidden_size, dtype=cfg.activation_dtype).bytes / 2
    if ep <= 1 and not any(lk.name == link for lk in hw.links):  # a pp 1 plan never crosses it
        return sympy.oo, sympy.Integer(0)  # a pipelined plan's hop: infinite, refused where used
    lk = hw.link(link)  # an all-to-all needs it: without it, the one-line error names the device's links
    lat = lk.latency_s if lk.latency_s is not None else 0
    hop = act / lk.bandwidth_bytes_per_s + lat
    if ep <= 1:
        return hop, sympy.Integer(0)
    moe = cfg.need(MoESpec)
    if link == LinkName.SCALE_UP:
        link = hw.group_link(span or ep)
    rows = busiest_rank(
        Routing(), int(as_float(moe.num_experts)), int(as_float(moe.num_experts_per_tok)), ep, b
    )
    a2a = op_cost(
        "all_to_all", elements=rows.rows * ep * cfg.hidden_size, p=ep, dtype=cfg.activation_dtype, link=link
    )
    return hop, bound(a2a, hw).lower


def _comm_scalar(cfg: ModelConfig, hw: Hardware, link: str, ep: int, span: int) -> tuple[Any, Any]:
    hop, a2a = comm_forms(cfg, hw, link, ep, span)
    return sympy.lambdify(MICROBATCH, hop, "math"), sympy.lambdify(MICROBATCH, a2a, "math")


@dataclass(frozen=True)
class PlanPoint(Result):
    """A plan evaluated on a device at a batch: its report (or why it is invalid), its energy
    per token where the device's power is known, and whether it is on the Pareto frontier.

    Attributes
    ----------
    device : str
        The device's name.
    batch : int
        Sequences in the decode step.
    plan : str
        ``tp{tp} pp{pp} ep{ep} m{microbatches}``.
    report : PlanReport or None
        The evaluated plan (None: invalid or does not fit).
    error : str or None
        Why it is invalid or does not fit.
    energy_per_token_j : float or None
        Joules per output token at the device's TDP (None: no TDP).
    pareto : bool
        On the frontier of tokens/s per user against tokens/s per device.
    """

    device: str
    batch: int
    plan: str
    report: PlanReport | None
    error: str | None = None
    energy_per_token_j: float | None = None
    pareto: bool = False


def dp_weights_saved(w: ModelConfig | str | Workload, tp: int, dp: int) -> float:
    """Bytes of routed-expert weights a device of the group does not hold that a ``tp``-rank
    alone would: ``E_t (1 - 1/D)`` with ``E_t`` the expert bytes one ``tp``-rank holds
    (:func:`routed_expert_bytes`; data-parallel attention, :mod:`graphs.serving.sim.data_parallel`); the experts are spread over ``D t``
    devices whether split by width or expert by expert.

    Parameters
    ----------
    w : ModelConfig, str or Workload
        The model.
    tp : int
        Tensor-parallel degree of a rank.
    dp : int
        Data-parallel ranks ``D`` sharing the experts.

    Returns
    -------
    float
        Bytes per device.
    """
    return routed_expert_bytes(w, tp) * (1.0 - 1.0 / dp)


def plan_memory_bytes(
    config: ModelConfig | str | Workload,
    device: Hardware | str,
    *,
    batch: int,
    ctx: int,
    tp: int,
    pp: int,
    ep: int,
) -> float:
    """Bytes one device holds under a ``(tp, pp, ep)`` plan at ``batch`` sequences of ``ctx`` tokens.

    .. math:: M = \\frac{L_{tp}(B, ctx) - E_{tp} (1 - 1/ep)}{pp}

    with :math:`L_{tp}` the decode capacity ledger of one tp-rank (weights, KV cache, activations,
    overhead: :func:`graphs.serving.step.ledger_fit.decode_memory`) and :math:`E_{tp}` its routed-expert
    weights, which expert parallelism spreads ``ep`` ways; pipeline stages hold ``1/pp`` of the
    layers. The design search prunes by the same accounting.

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
    tp, pp, ep : int
        Tensor-parallel, pipeline and expert-parallel degrees.

    Returns
    -------
    float
        Bytes per device.
    """
    w = as_workload(config)
    routed = routed_expert_bytes(w, tp) if ep > 1 else 0.0
    mem = float(decode_memory(w, device, tp=tp)(batch, ctx))
    return (mem - routed * (1 - 1 / ep)) / pp


def plan_frontier(
    config: ModelConfig | str | Workload,
    devices: list[str],
    *,
    batches: list[int],
    ctx: int,
    plans: list[tuple[int, int, int, int]],
    routing: Routing | None = None,
    predictor: Predictor | None = None,
) -> tuple[PlanPoint, ...]:
    """Evaluate ``(tp, pp, ep, microbatches)`` plans x devices x batches; mark the Pareto frontier.

    Objectives: tokens/s per user (``1 / step``) and tokens/s per device, both maximised.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    devices : list of str
        Device catalog names.
    batches : list of int
        Decode batches (sequences).
    ctx : int
        Cached tokens per sequence.
    plans : list of (int, int, int, int)
        ``(tp, pp, ep, microbatches)`` plans.
    routing : Routing, optional
        A routing distribution (MoE only).
    predictor : Predictor, optional
        Prices the steps (default: the bound).

    Returns
    -------
    tuple of PlanPoint
        Every evaluated point (one that does not fit or is invalid says why), the frontier marked.

    Raises
    ------
    CostModelError
        When ``devices`` or ``batches`` is a bare value rather than a list, or a plan is not
        four whole numbers (a point that is invalid on its own is a point with its error).
    """
    for name, values in (("devices", devices), ("batches", batches), ("plans", plans)):
        if isinstance(values, str | bytes) or not isinstance(values, list | tuple):
            # a str was read letter by letter: "unknown device 'h'" for devices="h100"
            raise CostModelError(f"{name} must be a list, got {type(values).__name__} {values!r:.40}")
    for plan in plans:
        if not isinstance(plan, list | tuple) or len(plan) != 4:
            raise CostModelError(
                f"each plan must be (tp, pp, ep, microbatches), four whole numbers, got {plan!r:.60}"
            )
    w = as_workload(config)
    points: list[PlanPoint] = []
    for dev in devices:
        hw = get_device(dev)
        power = as_float(hw.power_w) if hw.power_w is not None else None
        for b in batches:
            for tp, pp, ep, m in plans:
                label = f"tp{tp} pp{pp} ep{ep} m{m}"
                try:
                    held = plan_memory_bytes(w, hw, batch=b, ctx=ctx, tp=tp, pp=pp, ep=ep)
                    if held > as_float(hw.memory_bytes()):
                        gib = 2**30
                        raise CostModelError(
                            f"does not fit: {held / gib:.2f} GiB per device, the device holds "
                            f"{as_float(hw.memory_bytes()) / gib:.2f} GiB"
                        )
                    r = parallel_plan(
                        w,
                        hw,
                        batch=b,
                        ctx=ctx,
                        tp=tp,
                        pp=pp,
                        ep=ep,
                        microbatches=m,
                        routing=routing,
                        predictor=predictor,
                    )
                except CostModelError as exc:
                    points.append(PlanPoint(dev, b, label, None, error=str(exc)))
                    continue
                energy = r.energy_per_token_j(power) if power is not None else None
                points.append(PlanPoint(dev, b, label, r, energy_per_token_j=energy))
    ok = [(i, p.report) for i, p in enumerate(points) if p.report is not None]
    if ok:
        pts = np.array([[r.tokens_per_s_per_user, r.tokens_per_s_per_device] for _, r in ok])
        for (i, _), keep in zip(ok, pareto_mask(pts, (True, True)), strict=True):
            points[i] = dataclasses.replace(points[i], pareto=bool(keep))
    return tuple(points)
