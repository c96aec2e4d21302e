"""Audit Inductor's real fusion decisions against the engine's fusion plans.

``inductor_audit(model, inputs, device)`` compiles ``model`` with Inductor through
:func:`graphs.importers.torch_compile.torch_backend` (so the ATen graph Inductor lowers is also
costed, node for node) and reads Inductor's scheduler after fusion through
``torch._inductor.config._pre_fusion_custom_pass`` and ``_post_fusion_custom_pass``: how many
scheduler nodes there were before fusion, and for each generated kernel the nodes it merged, the ATen nodes it
came from (``origins``), the buffers it reads and writes with Inductor's own byte counts
(``numbytes_hint``), and the intermediates it keeps on chip (written and consumed inside the
kernel only). Each kernel is then priced on the device from its ops' FLOPs and its bytes.

The kernels become a :class:`costmodel.fusion.FusionPlan` on the costed graph, so Inductor's plan,
the engine's suggested plan (:func:`costmodel.fusion_audit.suggest_fusions`) and the ideal (only
the graph's inputs, weights and outputs cross DRAM) are priced by the same accounting; every
tensor Inductor writes out between two of its kernels is listed with the DRAM time it costs,
most first, and whether the engine's plan keeps it on chip.

The post-fusion hook is a private, prototype interface of Inductor: this module is tested with
torch 2.13 and refuses other versions with a clear message (``check_torch_version``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.cost import Cost, as_float
from costmodel.errors import CostModelError
from costmodel.fusion import Group, group_cost, ideal_cost, plan_cost, plan_from_groups
from costmodel.fusion_audit import boundaries, suggest_fusions
from costmodel.fusion_legality import claim_level, get_legality, group_violation
from costmodel.fusion_plan import PlanResult, kernel_time, plan_fusions, unit_groups
from costmodel.graph import COST, OUTPUTS, op_nodes
from costmodel.hardware import get_device
from costmodel.keys import G_SYMBOLS
from costmodel.passes import bind_dims
from costmodel.results import Result
from costmodel.roofline import bound, category_of
from costmodel.symbols import dim

from .torch_compile import torch_backend
from .torch_export import require_torch

__all__ = [
    "InductorKernel",
    "InductorAudit",
    "Difference",
    "Removed",
    "inductor_audit",
    "inductor_capture",
    "audit_capture",
    "InductorCapture",
    "TESTED_TORCH",
    "check_torch_version",
    "describe_kernels",
]

#: torch releases whose Inductor scheduler this audit reads (major.minor)
TESTED_TORCH = ("2.13",)


def check_torch_version(version: str) -> None:
    """Refuse a torch whose private scheduler interface this audit was not tested with."""
    mm = ".".join(version.split("+")[0].split(".")[:2])
    if mm not in TESTED_TORCH:
        raise CostModelError(
            f"the Inductor audit reads a private scheduler hook tested with torch {', '.join(TESTED_TORCH)}; "
            f"this is torch {version} (pin torch=={TESTED_TORCH[-1]}.*)"
        )


@dataclass(frozen=True)
class InductorKernel(Result):
    """One kernel Inductor generated (or an extern call such as a GEMM library kernel)."""

    name: str
    kind: str  #: "generated" (Triton / C++) or "extern" (a library call)
    members: tuple[str, ...]  #: Inductor's scheduler nodes before fusion that it merged
    ops: tuple[str, ...]  #: ATen nodes of the costed graph it covers
    reads_bytes: float  #: Inductor's count of the bytes it reads from memory (at the example's sizes)
    writes_bytes: float  #: ... and writes
    reads: sympy.Expr  #: the bytes read as Inductor's symbolic size, in the audit's dims
    writes: sympy.Expr
    on_chip: tuple[str, ...]  #: buffers written and consumed inside this kernel only
    flops: float
    time_s: float  #: the roofline lower bound of its ops' FLOPs and Inductor's bytes on the device
    bound: str  #: "compute", "memory" (or "communication")


@dataclass(frozen=True)
class Difference(Result):
    """A tensor Inductor writes out and reads back between two of its kernels: what it costs in
    DRAM traffic, and whether the engine's suggested plan keeps it on chip instead."""

    producer: str
    consumer_kernels: tuple[str, ...]
    bytes: float
    time_s: float
    engine_fuses: bool
    planner_fuses: bool = False  #: the planner (default rules) keeps it on chip


@dataclass(frozen=True)
class Removed(Result):
    """A boundary Inductor keeps and the planner removes: the tensor, what it costs, the planner's
    kernel that holds it on chip, and the rule or capacity limit Inductor would have to change."""

    producer: str
    tensor: str
    bytes: float
    time_s: float
    planner_group: str
    rule: str


@dataclass(frozen=True)
class InductorAudit(Result):
    """Inductor's kernels, and the same graph under Inductor's, the engine's and the ideal plan."""

    device: str
    pre_fusion_nodes: int  #: Inductor's scheduler nodes before fusion
    kernels: tuple[InductorKernel, ...]
    inductor_bytes: float  #: sum of Inductor's own read + write counts
    inductor_plan_bytes: float  #: Inductor's grouping priced by the engine's accounting
    engine_plan_bytes: float  #: the engine's suggested plan
    ideal_bytes: float
    differences: tuple[Difference, ...]  #: Inductor's kernel boundaries, most DRAM time first
    inductor_plan_time_s: float = 0.0  #: Inductor's grouping: sum of its kernels' roofline bounds
    ideal_time_s: float = 0.0
    planner_same_rules: PlanResult | None = None  #: the planner under Inductor's own rules
    planner: PlanResult | None = None  #: the planner under the default rules
    removed: tuple[Removed, ...] = ()  #: boundaries Inductor keeps and ``planner`` removes
    #: the dims compiled dynamic and their sizes at the example: every number above is evaluated
    #: there (the planner chooses its plan at those sizes); empty: a static compile
    evaluated_at: dict[str, int] = dataclasses.field(default_factory=dict)
    #: DRAM bytes of Inductor's grouping and of the planner's plan (default rules) as closed forms in
    #: those dims: the same groups priced on the symbolic graph (the plan is chosen at the example)
    inductor_bytes_expr: sympy.Expr = sympy.S.Zero
    planner_bytes_expr: sympy.Expr = sympy.S.Zero

    @property
    def shapes(self) -> str:
        """Which the numbers are: symbolic closed forms, or a static compile's."""
        if not self.evaluated_at:
            return "static shapes: every number is the example's"
        at = ", ".join(f"{k} = {v}" for k, v in self.evaluated_at.items())
        return (
            f"dynamic {', '.join(self.evaluated_at)}: kernels' bytes and both plans' bytes are closed "
            f"forms in them; plans chosen and numbers evaluated at {at}"
        )

    @property
    def engine_saves_bytes(self) -> float:
        return self.inductor_plan_bytes - self.engine_plan_bytes


def _is_view(g: Any, n: str) -> bool:
    c = g.nodes[n][COST]
    return c.flops == 0 and c.bytes == 0


def _dep_expr(dep: Any) -> sympy.Expr:
    """A dependency's bytes as Inductor's symbolic size: elements x the buffer's dtype size."""
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    try:
        return sympy.sympify(dep.get_numel()) * get_dtype_size(V.graph.get_dtype(dep.name))
    except Exception:  # no layout (a NoneLayout buffer), or a size Inductor cannot express
        return sympy.Integer(0)


def _named(expr: sympy.Expr, rename: dict[str, sympy.Expr]) -> sympy.Expr:
    """Inductor's size symbols (``s0``, ``s1`` ...) renamed to the audit's dims."""
    return expr.xreplace({s: rename[str(s)] for s in expr.free_symbols if str(s) in rename})


def _engine_fuses(b: Any, ind_plan: Any, eng_home: dict[str, str]) -> bool:
    """Whether the engine's plan puts the producer and every consumer of an Inductor boundary in
    one group (its consumers named by Inductor's kernels: map them back to members)."""
    members = {gr.name: gr.members for gr in ind_plan.groups}
    consumers = [m for k in b.consumers for m in members.get(k, ())]
    home = eng_home.get(b.producer)
    return home is not None and bool(consumers) and any(eng_home.get(c) == home for c in consumers)


def _dep_bytes(dep: Any) -> float:
    try:
        return float(dep.numbytes_hint())
    except Exception:  # a dependency whose size Inductor cannot hint (symbolic, unbacked)
        return 0.0


@dataclass(frozen=True)
class InductorCapture:
    """What one Inductor compile yields (plain data, picklable: compile once, audit many times):
    the costed ATen graph (symbolic in the audit's dims), the example's sizes for those dims,
    Inductor's scheduler node count before fusion and its kernels after (:func:`describe_kernels`)."""

    graph: Any  #: the cost graph of the ATen graph Inductor lowered, symbolic in ``point``'s dims
    point: dict[Any, int]  #: the audit's dims at the example inputs' sizes
    rename: dict[str, Any]  #: Inductor's size symbols -> the audit's dims
    pre_fusion_nodes: int
    kernels: tuple[dict[str, Any], ...]
    torch_version: str


def _named_dims(
    model: Any, example_inputs: Sequence[Any], dims: Any, torch: Any
) -> tuple[dict[str, tuple[str | None, ...]], dict[Any, int], list[tuple[Any, int]]]:
    """``dims`` as torch_backend's mapping, the example's sizes of the named dims, and the
    (tensor, axis) pairs to mark dynamic. ``dims``: names for the first tensor input's dimensions,
    or a mapping from ``forward``'s parameter names to such names (a decode step's new tokens and
    its cache)."""
    import inspect

    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if not isinstance(dims, Mapping):
        if not tensors:
            raise CostModelError("dims names the dimensions of the first tensor input, but there is none")
        bound_in = {"": tensors[0]}
        dims = {"": tuple(dims)}
    else:
        try:
            bound_in = dict(inspect.signature(model.forward).bind(*example_inputs).arguments)
        except TypeError as e:
            raise CostModelError(f"dims: cannot bind the example inputs to the model's forward ({e})") from e
    point: dict[Any, int] = {}
    marks: list[tuple[Any, int]] = []
    for key, names in dims.items():
        x = bound_in.get(key)
        if not isinstance(x, torch.Tensor):
            raise CostModelError(
                f"dims names input {key!r}; tensor inputs of forward: {sorted(k for k, v in bound_in.items() if isinstance(v, torch.Tensor))}"
            )
        if len(names) != x.dim():
            raise CostModelError(
                f"dims[{key!r}] has {len(names)} names for a {x.dim()}-d input: give one name (or None) per dimension"
            )
        for axis, (n, size) in enumerate(zip(names, x.shape, strict=True)):
            if n is None:
                continue
            if dim(n) in point and point[dim(n)] != int(size):
                raise CostModelError(
                    f"dims: {n!r} is {point[dim(n)]} in one input and {int(size)} in {key!r}"
                )
            point[dim(n)] = int(size)
            marks.append((x, axis))
    return {k: tuple(v) for k, v in dims.items()}, point, marks


def inductor_capture(
    model: Any,
    example_inputs: Sequence[Any],
    device: Any = "h100",
    *,
    dims: Sequence[str | None] | Mapping[str, Sequence[str | None]] | None = None,
) -> InductorCapture:
    """Compile ``model`` with Inductor on ``example_inputs`` and read its kernels (module doc).

    With ``dims`` (names for the dimensions of the first tensor input, e.g. ``("B", "S", None)``,
    or a mapping from ``forward``'s parameter names to such names) exactly the named dimensions
    are compiled dynamic (``torch._dynamo.mark_dynamic``; every other size stays a number), so
    each kernel's bytes come as Inductor's symbolic sizes in those names."""
    torch = require_torch()
    check_torch_version(torch.__version__)
    import torch._inductor.config as inductor_config

    hw = get_device(device)
    captured: list[list[Any]] = []
    before: list[int] = []

    def pre_fusion(nodes: list[Any]) -> list[Any]:
        before.append(len(nodes))
        return nodes

    def post_fusion(nodes: list[Any]) -> list[Any]:
        captured.append(describe_kernels(nodes))
        return nodes

    backend_dims, point, marks = (
        (None, {}, []) if dims is None else _named_dims(model, example_inputs, dims, torch)
    )
    backend = torch_backend(hw, inductor=True, dims=backend_dims)
    torch._dynamo.reset()
    for x, axis in marks:
        torch._dynamo.mark_dynamic(x, axis)
    patch = {
        "_pre_fusion_custom_pass": pre_fusion,
        "_post_fusion_custom_pass": post_fusion,
        "fx_graph_cache": False,
    }
    try:
        with inductor_config.patch(patch), torch.no_grad():
            torch.compile(model, backend=backend, dynamic=None if marks else False)(*example_inputs)
    finally:  # the marks live on the caller's tensors: take them off again
        for x, _ in marks:
            if hasattr(x, "_dynamo_dynamic_indices"):
                del x._dynamo_dynamic_indices
    if len(backend.report.graphs) != 1 or len(captured) != 1:
        raise CostModelError(
            f"the audit needs one captured graph; Dynamo captured {len(backend.report.graphs)} "
            "(see costmodel.graph_breaks)"
        )
    symbolic = backend.report.graphs[0].graph
    rename = {k: dim(v) for k, v in symbolic.graph.get(G_SYMBOLS, {}).items()}
    return InductorCapture(
        symbolic,
        point,
        rename,
        before[0] if before else len(captured[0]),
        tuple(captured[0]),
        torch.__version__,
    )


def inductor_audit(
    model: Any,
    example_inputs: Sequence[Any],
    device: Any = "h100",
    *,
    dims: Sequence[str | None] | Mapping[str, Sequence[str | None]] | None = None,
    max_units: int = 32,
) -> InductorAudit:
    """Compile ``model`` with Inductor on ``example_inputs`` and audit its fusion (module doc):
    :func:`inductor_capture` then :func:`audit_capture`.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    example_inputs : sequence
        Its inputs.
    device : Hardware or str, default "h100"
        The device the kernels are priced on.
    dims : sequence or mapping, optional
        Names for the inputs' dynamic dimensions (per input, or by input name).
    max_units : int, default 32
        The largest group the fusion planner forms (ops).

    Returns
    -------
    InductorAudit
        Inductor's kernels (bytes, time bound on the device) against the planner's fusion.
    """
    cap = inductor_capture(model, example_inputs, device, dims=dims)
    return audit_capture(cap, device, max_units=max_units)


def audit_capture(cap: InductorCapture, device: Any = "h100", *, max_units: int = 32) -> InductorAudit:
    """The three-way audit of a capture (module doc). The numbers are evaluated at the example's
    sizes (``cap.point``); each kernel's ``reads`` / ``writes`` keep Inductor's symbolic sizes.
    ``max_units`` bounds the planner's groups (the planner says when a larger group might exist)."""
    hw = get_device(device)
    symbolic, point, rename = cap.graph, cap.point, cap.rename
    g = bind_dims(point)(symbolic) if point else symbolic  # numbers at the example, for the rankings
    ops = set(op_nodes(g))
    # an ATen node a library call holds (a convolution, with the layout copies Inductor makes of
    # its input and weight, each listing it as an origin) does its FLOPs once, in that call (each
    # copy was priced with the whole convolution's FLOPs); a node in several generated kernels'
    # origins is recomputed in each (Inductor inlines a cheap pointwise op into every consumer),
    # so each of them counts its FLOPs
    owner: dict[str, str] = {}
    for k in cap.kernels:
        if k["kind"] == "extern":
            for o in k["origins"]:
                owner.setdefault(o, k["name"])
    kernels, groups = [], []
    for k in cap.kernels:
        members = tuple(o for o in k["origins"] if o in ops)
        # the kernel's ops' FLOPs (per unit and precision, from the rules) with the bytes Inductor
        # says it moves, bounded by the device's roofline like any other cost
        work = sum(
            (
                Cost(flop_terms=g.nodes[m][COST].flop_terms)
                for m in members
                if owner.get(m, k["name"]) == k["name"]
            ),
            Cost.zero(),
        )
        reads, writes = (_named(k[f"{x}_expr"], rename) for x in ("reads", "writes"))
        priced = bound(work + Cost.traffic(read=k["reads"], write=k["writes"]), hw)
        flops = as_float(work.flops)
        t = as_float(priced.lower) if priced.terms else 0.0
        kind = category_of(priced.kind) if priced.terms else "none"
        kernels.append(
            InductorKernel(
                k["name"],
                k["kind"],
                tuple(k["members"]),
                members,
                k["reads"],
                k["writes"],
                reads,
                writes,
                tuple(k["on_chip"]),
                flops,
                t,
                kind,
            )
        )
        if members:
            groups.append(Group(k["name"], members))
    taken: set[str] = set()
    unique = []
    for gr in groups:  # an ATen node Inductor duplicated into two kernels counts in the first
        mem = tuple(m for m in gr.members if m not in taken)
        taken.update(mem)
        if mem:
            unique.append(Group(gr.name, mem))
    # Inductor's kernels as whole planning units (each with the views of its ops' outputs): a
    # valid, convex plan priced as the planner prices its own (a kernel listing a view that
    # another kernel also reads would otherwise make it non-convex)
    unique = _whole_units(g, unique)
    ind_plan = plan_from_groups(g, unique)
    eng_plan = suggest_fusions(g, hw)[1]
    eng_home = {m: gr.name for gr in eng_plan.groups for m in gr.members}
    # the planner: under Inductor's own rules (its kernels offered too, so never worse than them),
    # and under the default rules; both minimise traffic (ties broken by time), as the audit compares it
    offered = [gr.members for gr in unique]
    same = plan_fusions(
        g, hw, backend="inductor", objective="bytes", extra_groups=offered, max_units=max_units
    )
    # the same-rules plan is offered too: the default table allows every group it holds, so the
    # default-rules plan never moves more, even where a solve stops before its certificate
    best = plan_fusions(
        g,
        hw,
        backend="default",
        objective="bytes",
        extra_groups=[*offered, *(gr.members for gr in same.plan.groups)],
        max_units=max_units,
    )
    best_home = {m: gr.name for gr in best.plan.groups for m in gr.members}
    kept = [b for b in boundaries(g, ind_plan, hw) if not _is_view(g, b.producer)]
    diffs = tuple(
        Difference(
            b.producer,
            b.consumers,
            b.bytes,
            b.time_s,
            _engine_fuses(b, ind_plan, eng_home),
            _engine_fuses(b, ind_plan, best_home),
        )
        for b in kept  # a view of a weight: the read it feeds, not a kernel boundary
    )
    removed = tuple(_removed(g, hw, b, best) for b, d in zip(kept, diffs, strict=True) if d.planner_fuses)

    return InductorAudit(
        device=hw.name,
        pre_fusion_nodes=cap.pre_fusion_nodes,
        kernels=tuple(kernels),
        inductor_bytes=sum(k.reads_bytes + k.writes_bytes for k in kernels),
        inductor_plan_bytes=as_float(plan_cost(g, ind_plan, check=False).bytes),
        engine_plan_bytes=as_float(plan_cost(g, eng_plan, check=False).bytes),
        ideal_bytes=as_float(ideal_cost(g).bytes),
        differences=diffs,
        inductor_plan_time_s=sum(kernel_time(group_cost(g, ind_plan, gr), hw) for gr in ind_plan.groups),
        ideal_time_s=as_float(bound(ideal_cost(g), hw).lower),
        planner_same_rules=same,
        planner=best,
        removed=removed,
        evaluated_at={str(k): v for k, v in point.items()},
        inductor_bytes_expr=plan_cost(symbolic, ind_plan, check=False).bytes if point else sympy.Integer(0),
        planner_bytes_expr=plan_cost(symbolic, best.plan, check=False).bytes if point else sympy.Integer(0),
    )


def _whole_units(g: Any, groups: list[Group]) -> list[Group]:
    """Each group's members as whole planning units (:func:`costmodel.fusion_plan.unit_groups`);
    a group of views only keeps those no op's unit holds."""
    units = unit_groups(g, [gr.members for gr in groups])
    placed = {m for u in units for m in u}
    out = []
    for gr, mem in zip(groups, units, strict=True):
        mem = mem or tuple(m for m in gr.members if m not in placed)
        if mem:
            out.append(Group(gr.name, mem))
    return out


def _removed(g: Any, hw: Any, b: Any, best: PlanResult) -> Removed:
    """What Inductor would have to change to keep boundary ``b`` on chip as the planner does: the
    first Inductor rule the planner's kernel breaks, else the capacity it needs, else nothing."""
    home = next(gr for gr in best.plan.groups if b.producer in gr.members)
    ind = get_legality("inductor")
    rule = group_violation(g, home.members, ind)
    if rule is None:
        claim = claim_level(g, home.members, hw, ind)
        rule = (
            f"capacity: {claim.footprint_bytes:.0f} B of tiles > {claim.capacity_bytes:.0f} B"
            if claim.checked and claim.level is None
            else "none: legal under Inductor's rules, its scheduler did not take it"
        )
    out = g.nodes[b.producer].get(OUTPUTS, ())
    return Removed(b.producer, out[0].name if out else b.producer, b.bytes, b.time_s, home.name, rule)


def describe_kernels(nodes: list[Any]) -> list[dict[str, Any]]:
    """Each scheduler node of ``nodes`` (Inductor's, inside one of its fusion hooks) as plain data:
    its origins, external bytes, on-chip buffers.

    Parameters
    ----------
    nodes
        Inductor's scheduler nodes, as its ``_pre_fusion_custom_pass`` or
        ``_post_fusion_custom_pass`` receives them.

    Returns
    -------
    list of dict
        Per node: ``name``, ``kind`` (``generated`` or ``extern``), ``members``, ``origins`` (ATen
        node names), ``reads`` / ``writes`` (bytes, Inductor's hints) and their symbolic sizes
        ``reads_expr`` / ``writes_expr``, and ``on_chip`` (buffers written and read inside it only).
    """
    from torch._inductor.virtualized import V

    outputs = set(getattr(V.graph, "get_output_names", lambda: [])())
    readers: dict[str, set[str]] = {}
    for n in nodes:
        for d in n.read_writes.reads:
            readers.setdefault(d.name, set()).add(n.get_name())
    out = []
    for n in nodes:
        name = n.get_name()
        writes = {d.name: d for d in n.read_writes.writes}
        on_chip = sorted(
            b
            for b in writes
            if b not in outputs and readers.get(b, set()) <= {name} and len(n.get_nodes()) > 1
        )
        reads = sum(_dep_bytes(d) for d in n.read_writes.reads if d.name not in writes)
        wbytes = sum(_dep_bytes(d) for b, d in writes.items() if b not in on_chip)
        reads_expr = sympy.Add(*(_dep_expr(d) for d in n.read_writes.reads if d.name not in writes))
        writes_expr = sympy.Add(*(_dep_expr(d) for b, d in writes.items() if b not in on_chip))
        origins: set[str] = set()
        extern = type(n).__name__ == "ExternKernelSchedulerNode"
        for sub in n.get_nodes():
            node = getattr(sub, "node", None)
            origin = getattr(node, "origin_node", None)
            if extern and origin is not None:  # a library call: its own op (its origins list its inputs' too)
                origins.add(str(origin.name))
            else:
                origins.update(str(o.name) for o in getattr(node, "origins", ()) or ())
        out.append(
            {
                "name": name,
                "kind": "extern" if extern else "generated",
                "members": [sub.get_name() for sub in n.get_nodes()],
                "origins": sorted(origins),
                "reads": reads,
                "writes": wbytes,
                "reads_expr": reads_expr,
                "writes_expr": writes_expr,
                "on_chip": on_chip,
            }
        )
    return out
