"""Apply a fusion plan inside Inductor: fuse the planner's groups where its scheduler can, say why not.

:func:`apply_plan` compiles a model with Inductor (through
:func:`graphs.importers.torch_compile.torch_backend`, like the audit) and, in Inductor's
post-fusion hook (``torch._inductor.config._post_fusion_custom_pass``, the private interface the
audit reads; :func:`graphs.importers.inductor_audit.check_torch_version`), takes the planner's
groups (ATen node names, e.g. ``PlanResult.plan``): each scheduler kernel belongs to the group
holding the ATen node that produced its buffer (``origin_node``; else the group most of its
``origins`` fall in). For every group Inductor split over several kernels, pairs of its kernels
are fused, producers before consumers, wherever Inductor's own ``Scheduler.can_fuse`` allows it
and no cycle of kernels results (``will_fusion_create_cycle``), through ``fuse_two_nodes``: the
code Inductor generates is then its own, for the plan's grouping. A pair Inductor refuses is
reported with the reason its scheduler gives (``WhyNoFuse``: an extern library call, no shared
buffer, a node in between ...), and a kernel Inductor built across several planned groups is
reported too (fusions are only added, never undone).

The result holds Inductor's kernels after the pass with Inductor's own byte counts (as the audit
reads them), so the bytes the applied plan's generated kernels move are counted from the
generated code's buffers, and whether the compiled model's outputs equal eager's.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.results import Result

from .inductor_audit import check_torch_version, describe_kernels
from .torch_compile import torch_backend
from .torch_export import require_torch

__all__ = ["AppliedPlan", "Unrealised", "apply_plan"]


@dataclass(frozen=True)
class Unrealised(Result):
    """A planned group Inductor's kernels do not realise as one kernel, and why."""

    group: str
    kernels: tuple[str, ...]  #: Inductor's kernels holding the group's ops after the pass
    reasons: tuple[str, ...]  #: Inductor's refusals (``WhyNoFuse``) for the pairs tried


@dataclass(frozen=True)
class AppliedPlan(Result):
    """Inductor's kernels with the plan applied, what was fused, what could not be, the outputs."""

    kernels: tuple[dict[str, Any], ...]  #: as :func:`graphs.importers.inductor_audit.describe_kernels`
    fusions: int  #: pairs of kernels fused by the pass
    unrealised: tuple[Unrealised, ...]
    spanning: tuple[str, ...]  #: Inductor kernels that hold ops of several planned groups
    bytes: float  #: Inductor's count of the bytes the kernels read and write
    allclose: bool  #: the compiled model's outputs equal eager's (torch.allclose)


def _home(node: Any, home: dict[str, str]) -> str | None:
    """The planned group of a scheduler node: its buffers' producing ATen node's, else the one
    most of its origins fall in."""
    for sub in node.get_nodes():
        origin = getattr(getattr(sub, "node", None), "origin_node", None)
        if origin is not None and str(origin.name) in home:
            return home[str(origin.name)]
    votes: Counter[str] = Counter()
    for sub in node.get_nodes():
        for o in getattr(getattr(sub, "node", None), "origins", ()) or ():
            if str(o.name) in home:
                votes[home[str(o.name)]] += 1
    return votes.most_common(1)[0][0] if votes else None


def _first(t: Any) -> Any:
    """A module's main output (transformers' layers return tuples)."""
    return t[0] if isinstance(t, tuple) else t


def apply_plan(
    model: Any,
    example_inputs: Sequence[Any],
    groups: Sequence[Sequence[str]],
    device: Any = "h100",
    *,
    before: bool = True,
    atol: float = 1e-5,
) -> AppliedPlan:
    """Compile ``model`` with Inductor fusing ``groups`` (ATen node names) where it can (module doc).

    Parameters
    ----------
    model, example_inputs
        The module and the inputs it is compiled and run on (CPU tensors).
    groups
        The plan's groups, as ATen node names of the graph Inductor lowers
        (``[gr.members for gr in result.plan.groups]``).
    device
        The device the backend costs the graph on (the compile itself is for the inputs').
    before
        Fuse the groups before Inductor's own fusion (its pre-fusion hook: the plan's fusions
        first, Inductor's greedy ones after, reported in ``spanning`` where they join planned
        groups), else after it (the post-fusion hook: only what Inductor left split is added).
    atol
        Absolute tolerance of the ``torch.allclose`` check against eager.

    Returns
    -------
    AppliedPlan
    """
    torch = require_torch()
    check_torch_version(torch.__version__)
    import torch._inductor.config as inductor_config
    from torch._inductor import scheduler as sched_mod
    from torch._inductor.virtualized import V

    home = {m: f"group {k}" for k, gr in enumerate(groups) for m in gr}
    if not home:
        raise CostModelError("apply_plan: the plan has no groups")
    state: dict[str, Any] = {"fusions": 0, "why": [], "refusals": {}, "kernels": None}

    def by_group(nodes: list[Any]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for n in nodes:
            h = _home(n, home)
            if h is not None:
                out.setdefault(h, []).append(n)
        return out

    def apply_groups(nodes: list[Any]) -> list[Any]:
        sched = V.graph.scheduler
        if not hasattr(sched, "_multi_stream_nodes"):  # before fusion: the stream state can_fuse reads
            sched.node_to_stream, sched.buff_to_stream, sched.stream_idx_to_user_obj_idx = {}, {}, {}
            sched._multi_stream_nodes = False
            sched._populate_stream_assignments()
        fused = sched_mod.OrderedSet(nodes)
        tried: set[tuple[str, str]] = set()
        while True:
            pair = None
            for h, ns in by_group(sched.topological_sort_schedule(list(fused))).items():
                for i, x in enumerate(ns):  # producers first: a topological order
                    for y in ns[i + 1 :]:
                        if (x.get_name(), y.get_name()) in tried:
                            continue
                        tried.add((x.get_name(), y.get_name()))
                        start = len(state["why"])
                        if sched.can_fuse(x, y) and not sched.will_fusion_create_cycle(x, y):
                            pair = (x, y)
                            break
                        state["refusals"].setdefault(h, []).extend(
                            state["why"][start:] or ["the fusion would make a cycle of kernels"]
                        )
                    if pair:
                        break
                if pair:
                    break
            if pair is None:
                return list(sched.topological_sort_schedule(list(fused)))
            sched.fuse_two_nodes(pair[0], pair[1], fused)
            state["fusions"] += 1

    def report(nodes: list[Any]) -> list[Any]:
        state["kernels"] = describe_kernels(nodes)
        state["unrealised"] = [
            Unrealised(h, tuple(n.get_name() for n in ns), tuple(dict.fromkeys(state["refusals"].get(h, []))))
            for h, ns in by_group(nodes).items()
            if len(ns) > 1
        ]
        state["spanning"] = [
            n.get_name()
            for n in nodes
            if len(
                {
                    home[str(o.name)]
                    for sub in n.get_nodes()
                    for o in [getattr(getattr(sub, "node", None), "origin_node", None)]
                    if o is not None and str(o.name) in home
                }
            )
            > 1
        ]
        return nodes

    class Why(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if isinstance(record.msg, sched_mod.WhyNoFuse):
                state["why"].append(record.msg.reason % record.msg.args)

    handler, log = Why(), sched_mod.fusion_log
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    torch._dynamo.reset()
    if before:
        patch = {"_pre_fusion_custom_pass": apply_groups, "_post_fusion_custom_pass": report}
    else:
        patch = {"_post_fusion_custom_pass": lambda nodes: report(apply_groups(nodes))}
    try:
        with inductor_config.patch({**patch, "fx_graph_cache": False}), torch.no_grad():
            out = torch.compile(model, backend=torch_backend(device, inductor=True), dynamic=False)(
                *example_inputs
            )
            ref = model(*example_inputs)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate
    if state["kernels"] is None:
        raise CostModelError("apply_plan: Inductor ran no scheduler (nothing compiled)")
    same = bool(torch.allclose(_first(out), _first(ref), atol=atol))
    kernels = tuple(state["kernels"])
    return AppliedPlan(
        kernels=kernels,
        fusions=state["fusions"],
        unrealised=tuple(state["unrealised"]),
        spanning=tuple(state["spanning"]),
        bytes=sum(k["reads"] + k["writes"] for k in kernels),
        allclose=same,
    )
