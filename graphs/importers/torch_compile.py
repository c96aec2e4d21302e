"""A ``torch.compile`` backend that costs what Dynamo captures, then lets the model run.

``torch.compile(model, backend=torch_backend("h100"))`` hands every graph Dynamo captures (one
per region between graph breaks) to AOTAutograd, which lowers it to ATen with the same shapes
(FakeTensors, symbolic under ``dynamic=True``); the ATen graph goes through the same op table
as the ``torch.export`` importer (:mod:`graphs.importers.torch_export`) and becomes a cost graph,
and the graph module itself is returned to run eagerly (or through Inductor with
``inductor=True``), so outputs are the model's own. Parameters and buffers (Dynamo names their
inputs ``..._parameters_...`` / ``..._buffers_...``) become weight sources; the rest inputs.
Dynamo's size symbols (``s0``, ``s1`` ...) are renamed by ``dims``: ``{"input_ids": ("B",
"S")}`` names the dimensions of the input whose Dynamo name contains ``input_ids`` (or of the
only tensor input, when the model takes one positionally; the empty key ``""`` names the first).

The backend's :class:`CompileReport` collects one :class:`CapturedGraph` per compilation, with
its totals (FLOPs per unit, DRAM bytes), its roofline step on the device when its sizes are
numbers, and the ops no rule covers; :func:`graph_breaks` lists where and why Dynamo split the
model (``torch._dynamo.explain``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.graph import graph_total, step_time
from costmodel.hardware import Hardware, get_device
from costmodel.keys import G_UNKNOWN_OPS, NodeKind

from .torch_export import import_graph_module, require_torch

__all__ = ["CapturedGraph", "CompileReport", "torch_backend", "graph_breaks"]


@dataclass
class CapturedGraph:
    """One graph Dynamo captured: its cost graph and what it adds up to."""

    index: int
    graph: nx.DiGraph
    inputs: tuple[str, ...]  #: Dynamo's names of the graph's inputs
    unknown_ops: dict[str, int]

    @property
    def totals(self) -> Any:
        return graph_total(self.graph, kinds=[NodeKind.OP])

    def matmul_flops(self) -> Any:
        """FLOPs on the tensor cores (matmuls, attention's products): sympy, symbolic if shapes are."""
        return self.totals.flops_on("tensor")


@dataclass
class CompileReport:
    """What one ``torch_backend`` saw: every captured graph, costed on ``device``."""

    device: Hardware
    graphs: list[CapturedGraph] = field(default_factory=list)

    def matmul_flops(self) -> Any:
        """Tensor-core FLOPs over every captured graph."""
        return sum((g.matmul_flops() for g in self.graphs), 0)

    def step_time(self) -> float:
        """The per-kernel sum of rooflines over every captured graph on the device (s; numeric shapes)."""
        return sum(as_float(step_time(g.graph, self.device), what="step time") for g in self.graphs)

    def unknown_ops(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.graphs:
            for k, v in g.unknown_ops.items():
                out[k] = out.get(k, 0) + v
        return out


def _weight_names(names: Sequence[str]) -> list[bool]:
    return [("_parameters_" in n) or ("_buffers_" in n) for n in names]


def torch_backend(
    device: Hardware | str = "h100",
    *,
    dims: Mapping[str, Sequence[str | None]] | None = None,
    inductor: bool = False,
    report: CompileReport | None = None,
    masked_sdpa_is_causal: bool = False,
) -> Any:
    """A ``torch.compile`` backend (module doc); its report is the returned callable's ``.report``."""
    torch = require_torch()
    from torch._dynamo.backends.common import aot_autograd

    rep = report or CompileReport(get_device(device))

    def backend(gm: Any, example_inputs: Sequence[Any]) -> Any:
        names = [str(n.name) for n in gm.graph.nodes if n.op == "placeholder"]
        is_weight = _weight_names(names)

        def record(fw_gm: Any) -> None:
            ph = [str(n.name) for n in fw_gm.graph.nodes if n.op == "placeholder"]
            kinds = {
                p: ("weight" if i < len(is_weight) and is_weight[i] else "input") for i, p in enumerate(ph)
            }
            fw_dims = None
            if dims:
                tensors = [  # the model's own tensor inputs (not lifted scalars or size symbols)
                    i
                    for i, x in enumerate(example_inputs)
                    if not is_weight[i] and isinstance(x, torch.Tensor) and x.dim() > 0
                ]
                fw_dims = {}
                for key, value in dims.items():
                    hits = [i for i in tensors if key in names[i]] or (tensors if len(tensors) == 1 else [])
                    if not hits:
                        shown = ", ".join(names[i] for i in tensors)
                        raise CostModelError(
                            f"dims names {key!r}, but the captured tensor inputs are: {shown}"
                        )
                    fw_dims[ph[hits[0]]] = value
            g = import_graph_module(fw_gm, kinds, fw_dims, masked_sdpa_is_causal, False)
            rep.graphs.append(
                CapturedGraph(len(rep.graphs), g, tuple(names), dict(g.graph.get(G_UNKNOWN_OPS, {})))
            )

        if inductor:  # Inductor lowers with its own decompositions; cost the graph it then compiles
            from torch._inductor.compile_fx import compile_fx, compile_fx_inner

            def inner(fw_gm: Any, fw_inputs: Sequence[Any], **kw: Any) -> Any:
                if not kw.get("is_backward", False):
                    record(fw_gm)
                return compile_fx_inner(fw_gm, fw_inputs, **kw)

            return compile_fx(gm, example_inputs, inner_compile=inner)

        def forward(fw_gm: Any, fw_inputs: Sequence[Any]) -> Any:
            record(fw_gm)
            return fw_gm

        return aot_autograd(fw_compiler=forward)(gm, example_inputs)

    backend.report = rep  # type: ignore[attr-defined]  # the backend is a function carrying its report
    _ = torch
    return backend


def graph_breaks(model: Any, *args: Any, **kwargs: Any) -> list[str]:
    """Where and why Dynamo breaks ``model``'s graph for these inputs (``torch._dynamo.explain``)."""
    torch = require_torch()
    explanation = torch._dynamo.explain(model)(*args, **kwargs)
    return [f"{getattr(b, 'reason', b)}" for b in explanation.break_reasons]
