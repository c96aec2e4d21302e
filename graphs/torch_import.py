"""Import ``torch.export`` programs and ``torch.fx`` graphs into cost graphs.

Every ATen op maps onto the cost-rule registry (:data:`ATEN_RULES` and the
elementwise table); shapes come from the FakeTensor metadata, so an export
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
from costmodel.graph import BYTES, COST, INPUTS, KIND, OP, OUTPUTS, PARAMS, REPEAT, TENSOR
from costmodel.rules import op_cost
from costmodel.symbols import dim
from costmodel.tensor import Tensor

__all__ = [
    "elementwise_params",
    "from_exported_program",
    "from_graph_module",
    "ELEMENTWISE_OPS",
    "TORCH_DTYPES",
]

#: torch dtype name -> our dtype name
TORCH_DTYPES = {
    "float32": "fp32",
    "float64": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int64": "int64",
    "int32": "int32",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "complex64": "complex64",
    "complex128": "complex128",
}

#: elementwise ops: (vector ops, SFU ops) per output element; see the module doc of rules.elementwise
ELEMENTWISE_OPS: dict[str, tuple[int, int]] = {
    **{
        k: (1, 0)
        for k in (
            "add",
            "sub",
            "mul",
            "div",
            "neg",
            "relu",
            "abs",
            "maximum",
            "minimum",
            "where",
            "clamp",
            "eq",
            "ne",
            "le",
            "lt",
            "ge",
            "gt",
            "logical_not",
            "logical_and",
            "logical_or",
            "bitwise_and",
            "bitwise_or",
            "__and__",
            "__or__",
            "reciprocal",
            "square",
            "cumsum",
            "masked_fill",
            "fill",
            "isnan",
            "rsub",
            "floor_divide",
            "remainder",
            "sign",
            "bitwise_not",
            "clamp_min",
            "clamp_max",
            "diff",
        )
    },
    **{k: (0, 1) for k in ("exp", "log", "rsqrt", "sqrt", "sin", "cos", "tanh", "erf", "exp2", "log2")},
    "sigmoid": (3, 1),  # 1 / (1 + exp(-x)): negate, add, reciprocal + exp
    "silu": (3, 1),  # x / (1 + exp(-x))
    "gelu": (7, 1),  # tanh approximation, as the graph builders count it
}
#: ops that only write (no tensor input read)
_FACTORIES = {
    "arange",
    "full",
    "ones",
    "zeros",
    "empty",
    "scalar_tensor",
    "new_ones",
    "new_zeros",
    "full_like",
    "zeros_like",
    "ones_like",
    "empty_like",
    "new_full",
    "new_empty",
    "rand",
    "randn",
}
#: metadata-only ops
_VIEWS = {
    "view",
    "_unsafe_view",
    "unsqueeze",
    "squeeze",
    "permute",
    "transpose",
    "t",
    "expand",
    "slice",
    "select",
    "alias",
    "detach",
    "as_strided",
    "unflatten",
    "flatten",
    "narrow",
    "split",
    "chunk",
    "split_with_sizes",
    "unbind",
    "dropout",
    "lift_fresh_copy",
    "movedim",
    "expand_as",
    "view_as",
    "unsqueeze_copy",
    "_assert_tensor_metadata",
    "to",
    "type_as",
}
_COPIES = {
    "clone",
    "cat",
    "stack",
    "_to_copy",
    "repeat",
    "pad",
    "constant_pad_nd",
    "flip",
    "roll",
    "tril",
    "triu",
}
_INPLACE_UPDATES = {
    "__setitem__",
    "index_put",
    "index_put_",
    "copy_",
    "slice_scatter",
    "select_scatter",
    "index_copy",
    "index_copy_",
    "scatter",
    "scatter_",
}
_REDUCTIONS = {
    "mean",
    "sum",
    "amax",
    "amin",
    "max",
    "min",
    "any",
    "all",
    "prod",
    "argmax",
    "argmin",
    "var",
    "std",
    "logsumexp",
    "norm",
    "linalg_vector_norm",
}
_SDPA = {
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
}


def _torch() -> Any:
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

    # ------------------------------------------------------------- metadata
    def expr(self, x: Any) -> sympy.Expr:
        torch = _torch()
        if isinstance(x, torch.SymInt):
            e = sympy.sympify(x.node.expr)
            return e.xreplace(self.rename) if self.rename else e
        return sympy.Integer(int(x))

    def tensor(self, name: str, val: Any) -> Tensor | None:
        torch = _torch()
        if not isinstance(val, torch.Tensor):
            return None
        dt = TORCH_DTYPES.get(str(val.dtype).replace("torch.", ""))
        if dt is None:
            raise CostModelError(f"tensor {name!r}: dtype {val.dtype} has no costmodel equivalent")
        shape = tuple(self.expr(s) for s in val.shape) or (sympy.Integer(1),)
        shape = tuple(s if s != 0 else sympy.Integer(1) for s in shape)
        return Tensor(name, shape, dt)

    def learn_symbols(self, name: str, val: Any) -> None:
        torch = _torch()
        if name not in self.dims or not isinstance(val, torch.Tensor):
            return
        for size, label in zip(val.shape, self.dims[name], strict=False):
            if label is not None and isinstance(size, torch.SymInt):
                e = sympy.sympify(size.node.expr)
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
        self.g.add_node(name, **{KIND: kind, COST: cost, OUTPUTS: (t,), REPEAT: 1})

    def refs(self, args: Any) -> list[tuple[str, Tensor]]:
        fx = _torch().fx
        found: list[tuple[str, Tensor]] = []

        def walk(a: Any) -> None:
            if isinstance(a, fx.Node):
                if a.op == "call_function" and getattr(a.target, "__name__", "") == "getitem":
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

    def add_op(
        self,
        node: Any,
        rule: str,
        params: dict[str, Any],
        outs: list[Tensor],
        ins: list[tuple[str, Tensor]],
        edge_bytes: dict[int, Any] | None = None,
        unknown: bool = False,
    ) -> None:
        cost = op_cost(rule, **params)
        name = node.name
        self.g.add_node(
            name,
            **{
                KIND: "op",
                OP: rule,
                PARAMS: params,
                COST: cost,
                INPUTS: tuple(t for _, t in ins),
                OUTPUTS: tuple(outs),
                REPEAT: 1,
                "aten": str(node.target),
                "unknown": unknown,
            },
        )
        for i, (src, t) in enumerate(ins):
            b = (edge_bytes or {}).get(i, t.bytes)
            if self.g.has_edge(src, name):  # two tensors of one producer: one edge, bytes added
                self.g.edges[src, name][BYTES] += sympy.sympify(b)
            else:
                self.g.add_edge(src, name, **{TENSOR: t, BYTES: sympy.sympify(b)})
        node.meta["costmodel"] = {
            "rule": rule,
            "params": params,
            "cost": cost,
            "flops": cost.flops,
            "bytes": cost.bytes,
        }


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", str(target))
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        name = packet.__name__
    return name.split(".")[0]


def _numel(t: Tensor) -> sympy.Expr:
    return t.numel


def _import(
    gm: Any, placeholders: Mapping[str, str], dims: Any, masked_sdpa_is_causal: bool, strict: bool
) -> nx.DiGraph:
    torch = _torch()
    imp = _Importer(dims, masked_sdpa_is_causal, strict)
    nodes = list(gm.graph.nodes)
    for n in nodes:
        if n.op == "placeholder":
            imp.learn_symbols(n.name, n.meta.get("val"))
    for n in nodes:
        if n.op == "placeholder":
            imp.source(n.name, n.meta.get("val"), placeholders.get(n.name, "input"))
        elif n.op == "get_attr":
            imp.source(n.name, getattr(gm, str(n.target), None), "weight")
        elif n.op in ("call_function", "call_method", "call_module"):
            _call(imp, n, torch, gm)
    g = imp.g
    g.graph["unknown_ops"] = dict(imp.unknown)
    g.graph["symbols"] = {str(k): str(v) for k, v in imp.rename.items()}
    return g


_MODULES = {
    "Linear": "linear",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softmax": "softmax",
    "Dropout": "dropout",
    "Identity": "alias",
    "Embedding": "embedding",
    "LayerNorm": "layer_norm",
    "RMSNorm": "rms_norm",
    "Flatten": "flatten",
}
_METHOD_CASTS = {
    "float": "float32",
    "half": "float16",
    "bfloat16": "bfloat16",
    "double": "float64",
    "int": "int32",
    "long": "int64",
    "bool": "bool",
}


def _module_params(imp: _Importer, gm: Any, n: Any, mod: Any) -> list[tuple[str, Tensor]]:
    """Weight sources for a called module's parameters, created on first use."""
    refs = []
    for pname, param in mod.named_parameters(recurse=False):
        key = f"{n.target}.{pname}".replace(".", "_")
        if key not in imp.out:
            imp.source(key, param, "weight")
        t = imp.out[key][0]
        if t is not None:
            refs.append((key, t))
    return refs


def _call(imp: _Importer, n: Any, torch: Any, gm: Any = None) -> None:
    val = n.meta.get("val")
    extra: list[tuple[str, Tensor]] = []
    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        name = _MODULES.get(type(mod).__name__, type(mod).__name__)
        extra = _module_params(imp, gm, n, mod)
    elif n.op == "call_method":
        name = "to" if n.target in _METHOD_CASTS else str(n.target)
    else:
        name = _op_name(n.target)
    if name == "getitem" or (name == "__getitem__" and not isinstance(val, torch.Tensor)):
        return
    vals = val if isinstance(val, (list, tuple)) else [val]
    outs = [imp.tensor(f"{n.name}.{i}" if len(vals) > 1 else n.name, v) for i, v in enumerate(vals)]
    ins = imp.refs((n.args, n.kwargs))
    if name in _INPLACE_UPDATES and all(t is None for t in outs) and ins:
        # `dest[idx] = value` returns nothing: the op's result is the updated slice
        v = ins[-1][1]
        outs = [Tensor(n.name, v.shape, ins[0][1].dtype)]
    imp.out[n.name] = outs
    outs_t = [t for t in outs if t is not None]
    if not outs_t:
        return  # symbolic-int arithmetic, asserts: no tensor, no cost
    if extra:  # a module's parameters: the embedding table comes first, others after the input
        ins = extra + ins if name == "embedding" else ins + extra
    out = outs_t[0]
    n_out = _numel(out)

    def view() -> None:
        imp.add_op(n, "view", {"elements": n_out}, outs_t, ins, {i: 0 for i in range(len(ins))})

    def copy(elements: sympy.Expr, src_dtype: str | None = None) -> None:
        imp.add_op(
            n,
            "copy",
            {"elements": elements, "dtype": src_dtype or out.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins,
        )

    if name in ("linear", "mm", "addmm", "matmul", "bmm", "baddbmm"):
        _matmul(imp, n, name, ins, outs_t)
    elif name in _SDPA:
        _sdpa(imp, n, ins, outs_t)
    elif name in ("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"):
        x = ins[0][1]
        cols = x.shape[-1]
        imp.add_op(
            n,
            "softmax",
            {"rows": _numel(x) / cols, "cols": cols, "dtype": x.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins[:1],
        )
    elif name == "embedding":
        w, idx = ins[0][1], ins[1][1]
        tokens, hidden = _numel(idx), w.shape[-1]
        imp.add_op(
            n,
            "embedding",
            {"tokens": tokens, "hidden": hidden, "dtype": w.dtype.name, "index_dtype": idx.dtype.name},
            outs_t,
            ins[:2],
            {0: tokens * hidden * w.dtype.bytes},
        )
    elif name in ("native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm"):
        x = ins[0][1]
        cols = x.shape[-1]
        rule = "rmsnorm" if "rms" in name else "layernorm"
        params: dict[str, Any] = {"rows": _numel(x) / cols, "cols": cols, "dtype": x.dtype.name}
        if rule == "layernorm":
            params["bias"] = len(ins) >= 3
        imp.add_op(n, rule, params, outs_t, ins)
    elif name in _REDUCTIONS:
        x = ins[0][1]
        imp.add_op(
            n,
            "reduction",
            {
                "rows": n_out,
                "cols": sympy.simplify(_numel(x) / n_out),
                "dtype": x.dtype.name,
                "out_dtype": out.dtype.name,
            },
            outs_t,
            ins[:1],
        )
    elif name == "pow":
        exp = n.args[1] if len(n.args) > 1 else None
        pow_ops: dict[float, tuple[int, int]] = {2.0: (1, 0), 0.5: (0, 1), -1.0: (1, 0), 1.0: (0, 0)}
        ops = pow_ops.get(float(exp), (0, 2)) if isinstance(exp, (int, float)) else (0, 2)
        _elementwise(imp, n, ins, outs_t, ops)
    elif name in ELEMENTWISE_OPS:
        _elementwise(imp, n, ins, outs_t, ELEMENTWISE_OPS[name])
    elif name in _FACTORIES:
        imp.add_op(
            n,
            "elementwise",
            {"n": n_out, "inputs": 0, "vector_ops": 0, "dtype": out.dtype.name},
            outs_t,
            [],
            {},
        )
    elif name in ("reshape", "contiguous"):
        src = ins[0] if ins else None
        src_val = n.args[0].meta.get("val") if n.args and hasattr(n.args[0], "meta") else None
        if src is not None and isinstance(src_val, torch.Tensor) and not src_val.is_contiguous():
            copy(n_out, src[1].dtype.name)
        else:
            view()
    elif name in ("to", "_to_copy", "type", "to_copy") and ins and ins[0][1].dtype != out.dtype:
        copy(n_out, ins[0][1].dtype.name)
    elif name in _VIEWS or name in ("to", "_to_copy", "__getitem__", "size", "dim", "contiguous_view"):
        view()
    elif name in _COPIES:
        copy(n_out, ins[0][1].dtype.name if ins else None)
    elif name in _INPLACE_UPDATES:
        # charge the updated values only: the last tensor argument, not the destination
        values = ins[-1][1] if len(ins) > 1 else out
        imp.add_op(
            n,
            "copy",
            {"elements": _numel(values), "dtype": values.dtype.name, "out_dtype": out.dtype.name},
            outs_t,
            ins,
            {i: 0 for i in range(len(ins) - 1)},
        )
    elif name in ("index", "gather", "index_select", "take_along_dim"):
        # a gather reads the elements it returns and its indices, then writes them
        idx_bytes = sympy.Add(*(t.bytes for _, t in ins[1:]))
        imp.add_op(
            n,
            "elementwise",
            {
                "n": n_out,
                "inputs": len(ins),
                "vector_ops": 0,
                "dtype": out.dtype.name,
                "read_bytes": n_out * out.dtype.bytes + idx_bytes,
            },
            outs_t,
            ins,
            {0: n_out * out.dtype.bytes},
        )
    else:
        if imp.strict:
            raise CostModelError(f"no cost mapping for {n.target} (node {n.name!r})")
        imp.unknown[str(n.target)] += 1
        imp.add_op(n, "view", {"elements": n_out}, outs_t, ins, {i: 0 for i in range(len(ins))}, unknown=True)


def elementwise_params(ins: list[tuple[str, Tensor]], out: Tensor, ops: tuple[int, int]) -> dict[str, Any]:
    """``elementwise`` rule parameters for an op reading ``ins`` and writing ``out`` (broadcasting included:
    each input is read at its own size and dtype)."""
    return {
        "n": out.numel,
        "inputs": len(ins),
        "vector_ops": ops[0],
        "sfu_ops": ops[1],
        "dtype": ins[0][1].dtype.name if ins else out.dtype.name,
        "out_dtype": out.dtype.name,
        "read_bytes": sympy.Add(*(t.bytes for _, t in ins)),
    }


def _elementwise(
    imp: _Importer,
    n: Any,
    ins: list[tuple[str, Tensor]],
    outs: list[Tensor],
    ops: tuple[int, int],
) -> None:
    imp.add_op(n, "elementwise", elementwise_params(ins, outs[0], ops), outs, ins)


def _matmul(imp: _Importer, n: Any, name: str, ins: list[tuple[str, Tensor]], outs: list[Tensor]) -> None:
    out = outs[0]
    if name == "linear":
        x, w = ins[0][1], ins[1][1]
        k, nn = x.shape[-1], w.shape[0]
        params = {
            "M": _numel(x) / k,
            "N": nn,
            "K": k,
            "dtype": x.dtype.name,
            "w_dtype": w.dtype.name,
            "out_dtype": out.dtype.name,
            "bias": len(ins) > 2,
        }
        imp.add_op(n, "gemm", params, outs, ins)
        return
    if name in ("addmm", "baddbmm"):
        bias_ref, a, b = ins[0], ins[1][1], ins[2][1]
        ins = [ins[1], ins[2], bias_ref]
    else:
        a, b = ins[0][1], ins[1][1]
    k = a.shape[-1]
    nn = b.shape[-1]
    m = a.shape[-2] if len(a.shape) >= 2 else sympy.Integer(1)
    batch = sympy.simplify(_numel(out) / (m * nn))
    bias = name in ("addmm", "baddbmm")
    if len(b.shape) <= 2:  # [..., m, k] x [k, n]: one GEMM with the batch folded into M
        imp.add_op(
            n,
            "gemm",
            {
                "M": _numel(a) / k,
                "N": nn,
                "K": k,
                "dtype": a.dtype.name,
                "w_dtype": b.dtype.name,
                "out_dtype": out.dtype.name,
                "bias": bias,
            },
            outs,
            ins,
        )
    else:
        imp.add_op(
            n,
            "batched_gemm",
            {
                "batch": batch,
                "M": m,
                "N": nn,
                "K": k,
                "dtype": a.dtype.name,
                "w_dtype": b.dtype.name,
                "out_dtype": out.dtype.name,
            },
            outs,
            ins,
        )


def _sdpa(imp: _Importer, n: Any, ins: list[tuple[str, Tensor]], outs: list[Tensor]) -> None:
    q, k, v = ins[0][1], ins[1][1], ins[2][1]
    kwargs = dict(n.kwargs)
    is_causal = bool(kwargs.get("is_causal", n.args[5] if len(n.args) > 5 else False))
    has_mask = len(ins) > 3
    causal = is_causal or (has_mask and imp.masked_causal)
    b = sympy.Mul(*q.shape[:-3]) if len(q.shape) > 3 else sympy.Integer(1)
    params = {
        "batch": b,
        "heads": q.shape[-3],
        "kv_heads": k.shape[-3],
        "q_len": q.shape[-2],
        "kv_len": k.shape[-2],
        "head_dim": q.shape[-1],
        "v_head_dim": v.shape[-1],
        "dtype": q.dtype.name,
        "causal": causal,
    }
    edge = {i: 0 for i in range(3, len(ins))}  # the mask: a fused kernel applies it, we do not charge it
    imp.add_op(n, "attention", params, outs[:1], ins, edge)


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
    """
    torch = _torch()
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
    return _import(ep.graph_module, kinds, dims, masked_sdpa_is_causal, strict)


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
    """
    torch = _torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(gm, mode).propagate(*example_inputs)
    for n in gm.graph.nodes:  # parameters as get_attr carry their real tensor
        if n.op == "get_attr" and "val" not in n.meta:
            n.meta["val"] = getattr(gm, str(n.target))
    _ = torch
    return _import(gm, {}, dims, masked_sdpa_is_causal, strict)


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
                self.graph = _import(graph_module, {}, self.dims, False, False)
            return PassResult(graph_module, False)

    return CostAnnotationPassImpl


CostAnnotationPass: Any  # built on first access by the module __getattr__ below


def __getattr__(name: str) -> Any:
    # CostAnnotationPass subclasses torch's PassBase: built on first use so importing
    # this module never needs torch
    if name == "CostAnnotationPass":
        return _pass_base()
    raise AttributeError(name)
