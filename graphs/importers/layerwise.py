"""Import a big Hugging Face decoder without exporting every layer: export one, repeat it.

``torch.export`` of a whole model spends most of its time in symbolic-shape tracing, once per
layer: about 50 s for Llama-3.1-8B's 32 layers on the meta device. A decoder's layers are
identical, so :func:`from_hf_layerwise` exports a copy of the model cut to its first layer
(``num_hidden_layers = 1``: embedding, one layer, final norm, lm_head), imports it with the same
op table, and marks the layer's op nodes and weights with ``repeat = L``, the representation the
graph builders use. Every total (FLOPs per unit, bytes, weight bytes) then equals the full
export's, at the cost of one layer's trace.

Which path when:

* a model in the catalog or any config the builders support: :func:`graphs.build_model` (no
  torch at all, milliseconds);
* your own ``nn.Module``, or to check what the real code does, small enough to export whole:
  :func:`graphs.importers.from_exported_program`;
* a large Hugging Face decoder whose layers are all alike: this module;
* a model with heterogeneous layers (hybrid, alternating attention, dense and MoE layers):
  the whole export; :func:`from_hf_layerwise` refuses one, naming the first layer unlike
  layer 0 (its submodules' classes, parameter shapes and dtypes, per-layer attention
  attributes, and ``config.layer_types`` are compared).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from costmodel.errors import CostModelError
from costmodel.keys import KIND, REPEAT, NodeKind

from .torch_export import from_exported_program, require_torch

__all__ = ["from_hf_layerwise"]


def _layer_list(model: Any) -> tuple[Any, str, Any]:
    """The decoder's layer list, its attribute name and its owner (``model.model.layers`` for the
    causal-LM classes of transformers)."""
    for owner in (getattr(model, "model", None), model):
        if owner is not None and hasattr(owner, "layers"):
            return owner, "layers", owner.layers
    raise CostModelError("the model has no .model.layers or .layers list of decoder layers")


#: per-layer attributes that change what a layer computes without changing its modules
#: (transformers' sliding/full attention, layers without rotary positions)
_LAYER_ATTRS = ("attention_type", "layer_type", "is_sliding", "sliding_window", "use_rope", "is_causal")


def _structure(layer: Any) -> list[tuple[str, str, str]]:
    """What a layer is: each submodule's class, each parameter's shape and dtype, and the
    attributes of :data:`_LAYER_ATTRS`, as ``(path, what, value)`` rows."""
    rows = []
    for path, mod in layer.named_modules():
        where = path or "(layer)"
        rows.append((where, "class", type(mod).__name__))
        for attr in _LAYER_ATTRS:
            val = getattr(mod, attr, None)
            if isinstance(val, (bool, int, float, str)):
                rows.append((where, attr, repr(val)))
        for pname, p in mod.named_parameters(recurse=False):
            rows.append((f"{where}.{pname}", "parameter", f"{tuple(p.shape)} {p.dtype}"))
    return rows


def _first_difference(layers: Any, config: Any) -> str | None:
    """Where the first layer unlike layer 0 differs from it (None: all alike)."""
    types = getattr(config, "layer_types", None)
    if isinstance(types, (list, tuple)):
        for i, t in enumerate(types[: len(layers)]):
            if t != types[0]:
                return f"layer {i} is {t!r} in config.layer_types, layer 0 {types[0]!r}"
    first = _structure(layers[0])
    for i in range(1, len(layers)):
        rows = _structure(layers[i])
        if rows == first:
            continue
        for a, b in zip(first, rows, strict=False):
            if a != b:
                if a[:2] == b[:2]:
                    return f"layer {i}'s {a[0]} {a[1]} is {b[2]}, layer 0's {a[2]}"
                return f"layer {i} has {b[0]} ({b[1]} {b[2]}) where layer 0 has {a[0]} ({a[1]} {a[2]})"
        longer, other = (
            (rows, "layer 0 has none") if len(rows) > len(first) else (first, f"layer {i} has none")
        )
        extra = longer[min(len(first), len(rows))]
        return f"{extra[0]} ({extra[1]} {extra[2]}): {other}"
    return None


def _in_first_layer(name: str, meta: Mapping[str, Any]) -> bool:
    stack = meta.get("nn_module_stack") or {}
    paths = [str(v[0]) for v in stack.values()] if isinstance(stack, dict) else []
    return any(p.endswith(("layers.0", "layers[0]")) or ".layers.0." in p or "layers[0]." in p for p in paths)


def from_hf_layerwise(
    model: Any,
    input_ids: Any,
    *,
    dims: Mapping[str, Sequence[str | None]] | None = None,
    dynamic: bool = True,
) -> nx.DiGraph:
    """Cost graph of ``model`` (a transformers causal LM) from an export of its first layer only.

    ``input_ids`` is an example input (any small shape; meta tensors work); with ``dynamic`` its
    two dimensions are exported as symbols, renamed by ``dims`` (default ``("B", "S")``).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    input_ids : torch.Tensor
        An example input, ``[batch, sequence]``.
    dims : mapping of str to sequence of str or None, optional
        Input name -> a name per dimension; None: ``("B", "S")``.
    dynamic : bool, default True
        Export the two dimensions as symbols; False: the example's sizes.

    Returns
    -------
    networkx.DiGraph
        The whole model's cost graph, its layer repeated.
    """
    torch = require_torch()
    owner, attr, layers = _layer_list(model)
    n_layers = len(layers)
    config = getattr(model, "config", None)
    old_n = getattr(config, "num_hidden_layers", None)
    differs = _first_difference(layers, config)
    if differs is not None:  # repeating layer 0 would price every layer as it
        raise CostModelError(
            f"the layers are not alike ({differs}): from_hf_layerwise repeats layer 0; export the whole model"
        )
    setattr(owner, attr, torch.nn.ModuleList([layers[0]]))
    try:
        if config is not None and old_n is not None:
            config.num_hidden_layers = 1
        shapes: dict[str, Any] | None = None  # torch.export's dynamic_shapes, by input name
        if dynamic:
            from torch.export import Dim

            shapes = {"input_ids": {0: Dim("batch", min=1, max=4096), 1: Dim("seq", min=2, max=1 << 20)}}
            shapes["use_cache"] = None
        ep = torch.export.export(
            model,
            (),
            kwargs={"input_ids": input_ids, "use_cache": False},
            dynamic_shapes=shapes,
            strict=False,
        )
    finally:
        setattr(owner, attr, layers)
        if config is not None and old_n is not None:
            config.num_hidden_layers = old_n
    g = from_exported_program(
        ep, dims=dims if dims is not None else {"input_ids": ("B", "S")} if dynamic else None
    )
    fx = {n.name: n.meta for n in ep.graph_module.graph.nodes}
    marked = 0
    for name, data in g.nodes(data=True):
        first = _in_first_layer(name, fx.get(name, {}))
        if not first and data.get(KIND) == NodeKind.WEIGHT:
            first = "layers_0_" in name  # a lifted parameter of the first layer
        if first:
            data[REPEAT] = n_layers
            marked += data.get(KIND) == NodeKind.OP
    if not marked:
        raise CostModelError("no op of the exported graph belongs to the first layer: cannot repeat it")
    g.graph["layerwise"] = {"layers": n_layers, "repeated_ops": marked}
    return g
