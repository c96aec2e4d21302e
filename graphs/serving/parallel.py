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

from typing import Any

import sympy

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.graph import COST, OP
from costmodel.hardware import Hardware, get_device
from costmodel.roofline import bound
from costmodel.rules import op_cost
from costmodel.symbols import check_dim
from models.catalog import get_model
from models.config import ModelConfig

from ..blocks.transformer import build_model
from .phases import step_time

__all__ = ["bubble_fraction", "parallel_plan", "plan_frontier"]


def bubble_fraction(stages: Any, microbatches: Any) -> sympy.Expr:
    """Idle fraction of a pipeline: ``(p - 1) / (m + p - 1)``.

    >>> bubble_fraction(4, 12)
    1/5
    """
    p, m = check_dim(stages, "stages"), check_dim(microbatches, "microbatches")
    return (p - 1) / (m + p - 1)


def parallel_plan(
    config: ModelConfig | str,
    device: Hardware | str,
    *,
    batch: int,
    ctx: int,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    microbatches: int = 1,
    link: str = "scale_up",
) -> dict[str, Any]:
    """Decode step of ``batch`` sequences on ``tp * pp * ep`` devices (module doc)."""
    cfg = get_model(config) if isinstance(config, str) else config
    hw = get_device(device)
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep), ("microbatches", microbatches), ("batch", batch)):
        if v < 1:
            raise CostModelError(f"{name} must be >= 1, got {v}")
    layers = int(as_float(cfg.num_hidden_layers))
    if layers % pp:
        raise CostModelError(f"pp ({pp}) must divide the {layers} layers")
    if batch % microbatches:
        raise CostModelError(f"microbatches ({microbatches}) must divide the batch ({batch})")
    if ep > 1 and not cfg.is_moe:
        raise CostModelError(f"{cfg.name} has no experts: expert parallelism needs a MoE model")
    mb = batch // microbatches
    g = build_model(cfg, "decode", batch=mb, ctx=ctx, tp=tp)
    if ep > 1:  # each device runs only its 1/ep share of the routed experts (work and weights)
        for _, d in g.nodes(data=True):
            if d.get(OP) == "grouped_gemm":
                d[COST] = d[COST] * sympy.Rational(1, ep)
    t_model = as_float(step_time(g, hw))  # all layers, one micro-batch, tp-way split (all-reduces included)
    t_stage = t_model / pp
    act = as_float(op_cost("copy", elements=mb * cfg.hidden_size, dtype=cfg.activation_dtype).bytes) / 2
    lk = hw.link(link)
    lat = as_float(lk.latency_s) if lk.latency_s is not None else 0.0
    t_hop = act / as_float(lk.bandwidth_bytes_per_s) + lat if pp > 1 else 0.0
    slots = microbatches + pp - 1
    t_pipe = slots * (t_stage + t_hop)
    t_ep = 0.0
    if ep > 1:
        k = int(as_float(cfg.num_experts_per_tok))
        a2a = op_cost(
            "all_to_all", elements=mb * k * cfg.hidden_size, p=ep, dtype=cfg.activation_dtype, link=link
        )
        per = as_float(bound(a2a, hw).lower)
        t_ep = 2 * per * as_float(cfg.n_moe_layers) * microbatches  # dispatch + combine, every MoE layer
    step = t_pipe + t_ep
    devices = tp * pp * ep
    power = as_float(hw.power_w) if hw.power_w is not None else float("nan")
    return {
        "model": cfg.name,
        "device": hw.name,
        "devices": devices,
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "microbatches": microbatches,
        "batch": batch,
        "ctx": ctx,
        "stage_s": t_stage,
        "stage_hop_s": t_hop,
        "bubble_fraction": as_float(bubble_fraction(pp, microbatches)),
        "expert_all_to_all_s": t_ep,
        "step_s": step,
        "tokens_per_s": batch / step,
        "tokens_per_s_per_device": batch / step / devices,
        "energy_per_token_j": power * devices * step / batch,
        "device_hours_per_million_tokens": devices * step / batch * 1e6 / 3600,
    }


def plan_frontier(
    config: ModelConfig | str,
    devices: list[str],
    *,
    batches: list[int],
    ctx: int,
    plans: list[tuple[int, int, int, int]],
) -> list[dict[str, Any]]:
    """Evaluate ``(tp, pp, ep, microbatches)`` plans x devices x batches; mark the Pareto frontier.

    Objectives: tokens/s per user (``1 / step``), tokens/s per device (maximise
    both) and energy per token (minimise, where power is known).
    """
    import numpy as np

    from costmodel.frontier import pareto_mask

    rows = []
    for dev in devices:
        for b in batches:
            for tp, pp, ep, m in plans:
                try:
                    r = parallel_plan(config, dev, batch=b, ctx=ctx, tp=tp, pp=pp, ep=ep, microbatches=m)
                except CostModelError as exc:
                    rows.append(
                        {"device": dev, "batch": b, "plan": f"tp{tp} pp{pp} ep{ep} m{m}", "error": str(exc)}
                    )
                    continue
                r["plan"] = f"tp{tp} pp{pp} ep{ep} m{m}"
                r["tokens_per_s_per_user"] = 1 / r["step_s"]
                rows.append(r)
    ok = [r for r in rows if "error" not in r]
    if ok:
        pts = np.array([[r["tokens_per_s_per_user"], r["tokens_per_s_per_device"]] for r in ok])
        for r, keep in zip(ok, pareto_mask(pts, (True, True)), strict=True):
            r["pareto"] = bool(keep)
    return rows
