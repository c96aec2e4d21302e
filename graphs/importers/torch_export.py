"""Import ``torch.export`` programs and ``torch.fx`` graphs into cost graphs.

Every ATen op maps onto the cost-rule registry through the op table shared
with the ONNX importer (:mod:`graphs.importers.table`); shapes come from the FakeTensor metadata, so an export
with dynamic dimensions yields costs in sympy symbols. Torch's own symbols
(``s0``, ``s72`` ...) are renamed to ours through ``dims``, e.g.
``dims={"input_ids": ("B", "S")}``.

* counted at one level: import the graph before or after
  ``run_decompositions()``; a composite op (``linear``,
  ``scaled_dot_product_attention``) is costed as one node, its decomposition
  as the nodes it becomes, never both;
* views, reshapes of contiguous tensors, expands, slices cost nothing; a
  reshape of a non-contiguous tensor, ``clone``, ``cat`` and dtype casts are
  copies (so casts inside norms add their bytes);
* in-place updates (``index_put_``, ``copy_``, ``slice_scatter``) charge the
  updated values only;
* ``scaled_dot_product_attention`` with ``is_causal=True`` counts the causal
  pairs; with an explicit mask it counts what the kernel computes, the full
  score matrix (pass ``masked_sdpa_is_causal=True`` to treat masks as causal);
* an empty tensor (a zero-size dimension) is no edge; an op writing only empty tensors, or
  multiplying an empty operand, is priced 0 and counted in ``graph.graph["empty_ops"]``;
* a reshape whose input's layout hangs on a data-dependent size (after ``nonzero``) is
  assumed contiguous (a free view) and listed in ``graph.graph["assumed_contiguous"]``;
* unknown ops are never dropped silently: they become zero-cost nodes marked
  ``unknown`` and are counted by name in ``graph.graph["unknown_ops"]``
  (``strict=True`` raises instead).

The importer also writes ``node.meta["costmodel"]`` on the FX graph, and
:class:`CostAnnotationPass` does so inside a torch pass manager.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import sympy

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.keys import COST, FRONTEND_OP, G_SYMBOLS, G_UNKNOWN_OPS, KIND, OUTPUTS, REPEAT, NodeKind
from costmodel.symbols import dim
from costmodel.tensor import Tensor

from .aten import TORCH_DTYPES, call_node
from .ops import ELEMENTWISE_OPS, elementwise_params
from .table import G_EMPTY_OPS, Mapped, is_empty, write_node

__all__ = [
    "elementwise_params",
    "from_exported_program",
    "from_graph_module",
    "ELEMENTWISE_OPS",
    "TORCH_DTYPES",
]


def require_torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise CostModelError("the torch importer needs the optional extra: pip install torch") from exc
    return torch


class _Importer:
    def __init__(
        self, dims: Mapping[str, Sequence[str | None]] | None, masked_sdpa_is_causal: bool, strict: bool
    ) -> None:
        self.dims = dict(dims or {})
        self.masked_causal = masked_sdpa_is_causal
        self.strict = strict
        self.rename: dict[sympy.Symbol, sympy.Expr] = {}
        self.g = nx.DiGraph()
        self.out: dict[str, list[Tensor | None]] = {}
        self.unknown: Counter[str] = Counter()
        self.empty: Counter[str] = Counter()  #: ops priced 0: they write only empty tensors
        self.assumed_contiguous: list[str] = []  #: nodes whose input's layout torch could not decide
        self.weights: set[str] = set()  #: source nodes that hold weights

    # ------------------------------------------------------------- metadata
    def expr(self, x: Any) -> sympy.Expr:
        torch = require_torch()
        if isinstance(x, torch.SymInt):
            e = x.node.expr  # torch's symbolic sizes are sympy expressions already
            return e.xreplace(self.rename) if self.rename else e
        return sympy.Integer(int(x))

    def tensor(self, name: str, val: Any) -> Tensor | None:
        torch = require_torch()
        if not isinstance(val, torch.Tensor):
            return None
        dt = TORCH_DTYPES.get(str(val.dtype).replace("torch.", ""))
        if dt is None:
            raise CostModelError(f"tensor {name!r}: dtype {val.dtype} has no costmodel equivalent")
        shape = tuple(self.expr(s) for s in val.shape) or (sympy.Integer(1),)
        if is_empty(shape):  # holds nothing: no edge, no bytes (graphs.importers.table)
            return None
        return Tensor(name, shape, dt)

    def learn_symbols(self, name: str, val: Any) -> None:
        torch = require_torch()
        if name not in self.dims or not isinstance(val, torch.Tensor):
            return
        for size, label in zip(val.shape, self.dims[name], strict=False):
            if label is not None and isinstance(size, torch.SymInt):
                e = size.node.expr
                if isinstance(e, sympy.Symbol):
                    self.rename[e] = dim(label)

    # ----------------------------------------------------------------- graph
    def source(self, name: str, val: Any, kind: str) -> None:
        t = self.tensor(name, val)
        self.out[name] = [t]
        if t is None:
            return
        cat = {"weight": "weights", "input": "activations"}[kind]
        cost = Cost.resident(**{cat: t.bytes}) if kind == "weight" else Cost.zero()
        if kind == NodeKind.WEIGHT:
            self.weights.add(name)
        self.g.add_node(name, **{KIND: NodeKind(kind), COST: cost, OUTPUTS: (t,), REPEAT: 1})

    def refs(self, args: Any) -> list[tuple[str, Tensor]]:
        fx = require_torch().fx
        found: list[tuple[str, Tensor]] = []

        def walk(a: Any) -> None:
            if isinstance(a, fx.Node):
                tuple_item = a.name not in self.out  # a tensor's x[i] is costed as a view, with an output
                if tuple_item and a.op == "call_function" and getattr(a.target, "__name__", "") == "getitem":
                    src, idx = a.args
                    ts = self.out.get(src.name, [])
                    picked = ts[idx] if isinstance(idx, int) and idx < len(ts) else None
                    if picked is not None:
                        found.append((src.name, picked))
                    return
                for t in self.out.get(a.name, []):
                    if t is not None:
                        found.append((a.name, t))
            elif isinstance(a, (list, tuple)):
                for x in a:
                    walk(x)
            elif isinstance(a, dict):
                for x in a.values():
                    walk(x)

        walk(args)
        return found

    def add_op(self, node: Any, mapped: Mapped, outs: list[Tensor]) -> None:
        node.meta["costmodel"] = write_node(
            self.g, node.name, mapped, outs, **{FRONTEND_OP: str(node.target)}
        )


def import_graph_module(
    gm: Any, placeholders: Mapping[str, str], dims: Any, masked_sdpa_is_causal: bool, strict: bool
) -> nx.DiGraph:
    torch = require_torch()
    imp = _Importer(dims, masked_sdpa_is_causal, strict)
    nodes = list(gm.graph.nodes)
    inputs = [n.name for n in nodes if n.op == "placeholder"]
    stray = [k for k in imp.dims if k not in inputs]
    if stray:  # a typo would leave torch's own symbols in every cost, unbound by the caller's names
        shown = ", ".join(n for n in inputs if placeholders.get(n, "input") == "input") or "none"
        raise CostModelError(f"dims names {stray[0]!r}, but the program's tensor inputs are: {shown}")
    for n in nodes:
        if n.op == "placeholder":
            imp.learn_symbols(n.name, n.meta.get("val"))
    for n in nodes:
        if n.op == "placeholder":
            imp.source(n.name, n.meta.get("val"), placeholders.get(n.name, "input"))
        elif n.op == "get_attr":
            imp.source(n.name, getattr(gm, str(n.target), None), "weight")
        elif n.op in ("call_function", "call_method", "call_module"):
            call_node(imp, n, torch, gm)
    g = imp.g
    g.graph[G_UNKNOWN_OPS] = dict(imp.unknown)
    g.graph[G_EMPTY_OPS] = dict(imp.empty)
    g.graph["assumed_contiguous"] = list(imp.assumed_contiguous)
    if imp.assumed_contiguous:  # an assumption: said once, as every substitution is
        from costmodel.notes import say

        first = ", ".join(imp.assumed_contiguous[:3])
        say(
            f"{len(imp.assumed_contiguous)} reshape(s) of a data-dependent size ({first}) taken as "
            "contiguous views (torch could not decide their layout): a copy, if one runs, is not priced"
        )
    g.graph[G_SYMBOLS] = {str(k): str(v) for k, v in imp.rename.items()}
    return g


def from_exported_program(
    ep: Any,
    *,
    dims: Mapping[str, Sequence[str | None]] | None = None,
    masked_sdpa_is_causal: bool = False,
    strict: bool = False,
) -> nx.DiGraph:
    """Cost graph of a ``torch.export.ExportedProgram`` (see module doc).

    Parameters, buffers and constants become ``weight`` sources; user inputs
    ``input`` sources. ``dims`` names the dynamic dimensions of user inputs.

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        The program (before or after ``run_decompositions()``).
    dims : mapping of str to sequence of str or None, optional
        User input name -> a name per dimension (``{"input_ids": ("B", "S")}``); None keeps
        torch's symbol for that dimension. A key that names no input is refused.
    masked_sdpa_is_causal : bool, default False
        Count an SDPA with an explicit mask as causal (half the score work).
    strict : bool, default False
        Raise on an op the table does not map, instead of a zero-cost ``unknown`` node.

    Returns
    -------
    networkx.DiGraph
        The cost graph; ``graph.graph["unknown_ops"]`` counts the unmapped ops by name.
    """
    torch = require_torch()
    if not isinstance(ep, torch.export.ExportedProgram):
        raise CostModelError(
            f"from_exported_program takes a torch.export.ExportedProgram, got {type(ep).__name__}"
        )
    kinds: dict[str, str] = {}
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind
        arg = getattr(spec.arg, "name", None)
        if arg is None:
            continue
        is_param = kind in (
            torch.export.graph_signature.InputKind.PARAMETER,
            torch.export.graph_signature.InputKind.BUFFER,
            torch.export.graph_signature.InputKind.CONSTANT_TENSOR,
        )
        kinds[arg] = "weight" if is_param else "input"
    return import_graph_module(ep.graph_module, kinds, dims, masked_sdpa_is_causal, strict)


def from_graph_module(
    gm: Any,
    example_inputs: Sequence[Any],
    *,
    dims: Mapping[str, Sequence[str | None]] | None = None,
    masked_sdpa_is_causal: bool = False,
    strict: bool = False,
) -> nx.DiGraph:
    """Cost graph of a plain ``torch.fx.GraphModule``, shapes propagated from ``example_inputs``.

    Parameters reached through ``get_attr`` become ``weight`` sources.

    Parameters
    ----------
    gm : torch.fx.GraphModule
        The module.
    example_inputs : sequence
        Tensors (or fake tensors) its placeholders take, in order.
    dims : mapping of str to sequence of str or None, optional
        Placeholder name -> a name per dimension; a key that names no placeholder is refused.
    masked_sdpa_is_causal : bool, default False
        Count an SDPA with an explicit mask as causal.
    strict : bool, default False
        Raise on an unmapped op instead of a zero-cost ``unknown`` node.

    Returns
    -------
    networkx.DiGraph
        The cost graph.
    """
    torch = require_torch()
    if not isinstance(gm, torch.fx.GraphModule):
        raise CostModelError(f"from_graph_module takes a torch.fx.GraphModule, got {type(gm).__name__}")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(gm, mode).propagate(*example_inputs)
    for n in gm.graph.nodes:  # parameters as get_attr carry their real tensor
        if n.op == "get_attr" and "val" not in n.meta:
            n.meta["val"] = getattr(gm, str(n.target))
    _ = torch
    return import_graph_module(gm, {}, dims, masked_sdpa_is_causal, strict)


def _pass_base() -> Any:
    from torch.fx.passes.infra.pass_base import PassBase, PassResult

    class CostAnnotationPassImpl(PassBase):
        """Annotate ``node.meta["costmodel"]`` of an FX graph (inside a torch ``PassManager``)."""

        def __init__(self, example_inputs: Sequence[Any] | None = None, dims: Any = None) -> None:
            super().__init__()
            self.example_inputs = example_inputs
            self.dims = dims
            self.graph: nx.DiGraph | None = None

        def call(self, graph_module: Any) -> Any:
            if self.example_inputs is not None:
                self.graph = from_graph_module(graph_module, self.example_inputs, dims=self.dims)
            else:
                self.graph = import_graph_module(graph_module, {}, self.dims, False, False)
            return PassResult(graph_module, False)

    return CostAnnotationPassImpl


CostAnnotationPass: Any  # built on first access by the module __getattr__ below


def __getattr__(name: str) -> Any:
    # CostAnnotationPass subclasses torch's PassBase: built on first use so importing
    # this module never needs torch
    if name == "CostAnnotationPass":
        return _pass_base()
    raise AttributeError(name)
