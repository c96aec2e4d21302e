"""One Hugging Face decoder layer, built from its ``config.json`` on the meta device, as a cost graph.

:func:`hf_layer_graph` builds the model's causal-LM class from the config with one hidden layer
on the meta device (nothing is downloaded or allocated), takes its first decoder layer and the
rotary embedding, and exports, with ``torch.export``, the step a serving engine runs:

* ``prefill``: ``batch x seq`` tokens from an empty cache (causal SDPA, no mask);
* ``decode``: one new token for each of ``batch`` sequences against a ``ctx``-token cache, which
  the layer extends by ``cat`` as transformers' ``DynamicCache`` does.

Attention runs through ``scaled_dot_product_attention`` (transformers' ``sdpa``) with no mask.
A sliding-window layer (the exported layer's attention has a ``sliding_window``: Gemma-2's
4,096, Gemma-3's 1,024 or 512, Mistral v0.1's 4,096) is priced with its window, not as full
attention: in decode its cache holds ``min(ctx, window - 1)`` tokens (what transformers'
sliding cache keeps), so each query attends to ``min(ctx + 1, window)`` keys; in prefill the
attention node is priced with ``window`` (each query scores at most ``window`` keys; the rule's
``window_pairs``). ``g.graph["hf_layer"]`` says the window and the cached tokens. A dynamic
decode export of a sliding layer is refused (its cache length is capped, not a symbol).
Mixture-of-experts layers run their experts through
transformers' ``batched_mm`` implementation (each token's top-k experts' weights gathered, then
batched matmuls: one graph, no data-dependent loop). Shapes are static: the graph is numeric,
ready for :func:`costmodel.fusion_plan.plan_fusions`; with ``dynamic=True`` the batch and the
token or cache length are dynamic export dimensions (named ``B``, ``S``, ``ctx``), bound to the stated sizes for planning.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx

from costmodel.errors import CostModelError

from .torch_export import TORCH_DTYPES, from_exported_program, require_torch

__all__ = ["hf_layer_graph", "PHASES", "SUPPORTED"]

PHASES = ("prefill", "decode")
#: what an export handles, said in every refusal of an architecture
SUPPORTED = (
    "one decoder layer of softmax attention through SDPA with a per-head key/value cache "
    "(Llama, Mistral, Qwen2/3, Mixtral, Qwen3-MoE, Gemma-3, GPT-2 and the like)"
)
_DROP = ("architectures", "auto_map", "model_type", "torch_dtype", "dtype", "quantization_config")


def _text_config(config: Mapping[str, Any]) -> Any:
    """The transformers config of ``config`` (a parsed ``config.json``), its text part for a
    multimodal model, cut to one hidden layer and SDPA attention."""
    import transformers

    kind = config.get("model_type")
    if not isinstance(kind, str):
        raise CostModelError("config.json: model_type missing or not a string (e.g. 'llama')")
    try:
        cfg = transformers.AutoConfig.for_model(kind, **{k: v for k, v in config.items() if k not in _DROP})
    except Exception as e:  # transformers' own validation: ValueError, KeyError, its strict-dataclass errors
        raise CostModelError(
            f"config.json: transformers cannot build model_type {str(kind)[:80]!r} ({_first_line(e)})"
        ) from e
    text = getattr(cfg, "text_config", None) or cfg
    if getattr(text, "kv_lora_rank", None):  # DeepSeek's MLA: a latent cache, not per-head k and v
        raise _unsupported(
            kind, "multi-head latent attention caches a latent vector, not per-head keys and values"
        )
    text.num_hidden_layers = 1
    if hasattr(text, "layer_types") and text.layer_types:
        try:
            text.layer_types = list(text.layer_types[:1])
        except AttributeError:  # a pattern derived from other fields: Mamba-2's, Jamba's
            raise _unsupported(
                kind, "its layer pattern is derived (state-space or hybrid layers, not softmax attention)"
            ) from None
    text._attn_implementation = "sdpa"
    if hasattr(text, "_experts_implementation"):
        text._experts_implementation = "batched_mm"
    return text


def _first_line(e: BaseException) -> str:
    """``Type: message`` in one line of at most 300 characters: a third-party error's lines
    joined (a strict-dataclass error says which validator on its first, why on its second)."""
    text = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
    return f"{type(e).__name__}: {text[:300]}"


def _unsupported(kind: Any, why: str) -> CostModelError:
    """The one-line refusal of an architecture the export does not handle (:data:`SUPPORTED`)."""
    return CostModelError(
        f"model_type {str(kind)[:80]!r}: the Hugging Face layer export builds {SUPPORTED}; {why}"
    )


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """torch's loggers silenced (``torch._subclasses.fake_tensor`` logs a failing export's
    traceback on stderr before the exception the caller turns into one line)."""
    log = logging.getLogger("torch")
    level, disabled = log.level, log.disabled
    log.disabled = True
    children = [
        (lg, lg.disabled)
        for name, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and name.startswith("torch.")
    ]
    for lg, _ in children:
        lg.disabled = True
    try:
        yield
    finally:
        log.setLevel(level)
        log.disabled = disabled
        for lg, was in children:
            lg.disabled = was


def _layer_and_rope(model: Any) -> tuple[Any, Any]:
    """The first decoder layer and the rotary embedding (None: absolute positions, GPT-2)."""
    for owner in (getattr(model, "model", None), getattr(model, "transformer", None), model):
        if owner is None:
            continue
        layers = getattr(owner, "layers", None) or getattr(owner, "h", None)
        if layers is not None:
            return layers[0], getattr(owner, "rotary_emb", None)
    raise CostModelError(f"{type(model).__name__}: no .layers or .h list of decoder layers")


def _window(layer: Any, text: Any) -> int | None:
    """The exported layer's sliding window (None: full attention). The attention module's own
    ``sliding_window`` (Gemma, Qwen2: None on full layers), else the config's for a model whose
    attention reads it there (Mistral)."""
    attn = getattr(layer, "self_attn", None) or getattr(layer, "attn", None)
    if attn is not None and hasattr(attn, "sliding_window"):
        w = attn.sliding_window
    else:
        w = getattr(text, "sliding_window", None) if attn is not None and _reads_config_window(attn) else None
    return int(w) if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None


def _reads_config_window(attn: Any) -> bool:
    """Whether an attention module's forward passes ``config.sliding_window`` to its kernel
    (Mistral's and Mixtral's do, Llama's does not)."""
    try:
        return "sliding_window" in inspect.getsource(type(attn).forward)
    except (OSError, TypeError):
        return False


def hf_layer_graph(
    config: Mapping[str, Any],
    phase: str,
    *,
    batch: int = 1,
    seq: int = 2048,
    ctx: int = 4096,
    dtype: str = "bf16",
    dynamic: bool = False,
) -> nx.DiGraph:
    """Cost graph of one decoder layer of ``config`` (a parsed Hugging Face ``config.json``) for
    one ``phase`` step (module doc).

    Parameters
    ----------
    config
        The parsed ``config.json`` (:func:`models.resolver.config_data` reads a catalog name or a
        path).
    phase
        ``prefill`` (``batch x seq`` tokens) or ``decode`` (``batch`` tokens, ``ctx`` cached).
    batch, seq, ctx
        Sequences, prompt tokens, cached tokens (positive integers).
    dtype
        Weights' and activations' dtype (``bf16``, ``fp16``, ``fp32``).
    dynamic
        Export with dynamic dimensions (``torch.export.Dim.AUTO``): the batch ``B`` and the prompt ``S``
        (prefill) or the cache length ``ctx`` (decode) stay symbols in the graph, the rest
        numbers; ``g.graph["hf_layer"]["point"]`` holds the stated sizes to bind them to
        (:func:`costmodel.passes.bind_dims`) before planning. Export traces at sizes of at least
        2 (it specialises a dynamic dimension it sees at 0 or 1); the graph is the same
        symbolic program at any size its guards allow, 1 included, since every cost rule is a
        formula in the shapes.

    Returns
    -------
    networkx.DiGraph
        The layer's ATen graph through the shared op table: numeric, or symbolic in ``B`` and
        ``S``/``ctx`` with ``dynamic``.
    """
    torch = require_torch()
    import transformers

    if phase not in PHASES:
        raise CostModelError(f"phase must be one of {PHASES}, got {phase!r}")
    for field, v in (("batch", batch), ("seq", seq), ("ctx", ctx)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise CostModelError(f"{field} must be a positive integer, got {v!r}")
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}.get(dtype)
    if tdt is None:
        raise CostModelError(f"dtype must be one of bf16, fp16, fp32, got {dtype!r}")
    assert TORCH_DTYPES  # the importer maps these dtypes
    text = _text_config(config)
    try:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(text)
    except ValueError as e:  # gpt-oss: "... does not support an attention implementation through sdpa"
        raise _unsupported(
            config.get("model_type"), f"transformers refuses it ({str(e).split('. ')[0][:200]})"
        ) from e
    except Exception as e:  # a config transformers accepts but cannot build (a negative size)
        raise CostModelError(
            f"config.json: transformers cannot build a {str(config.get('model_type'))[:80]!r} layer from it "
            f"({_first_line(e)})"
        ) from e
    layer, rope = _layer_and_rope(model)
    kind = getattr(layer, "attention_type", None) or (getattr(text, "layer_types", None) or [None])[0]
    rope_kind = rope is not None and "layer_type" in inspect.signature(rope.forward).parameters

    class Cat:
        """A cache that extends by ``cat`` (what ``DynamicCache.update`` computes)."""

        def __init__(self, k: Any, v: Any) -> None:
            self.k, self.v = k, v

        def update(self, k: Any, v: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            return torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)

    class Step(torch.nn.Module):  # type: ignore[name-defined]  # torch is an optional import
        def __init__(self) -> None:
            super().__init__()
            self.layer, self.rope = layer, rope

        def forward(self, x: Any, past_k: Any = None, past_v: Any = None) -> Any:
            start = 0 if past_k is None else past_k.shape[2]
            pos = torch.arange(start, start + x.shape[1], device=x.device).unsqueeze(0)
            pe = None
            if self.rope is not None:
                pe = self.rope(x, pos, kind) if rope_kind else self.rope(x, pos)
            cache = None if past_k is None else Cat(past_k, past_v)
            out = self.layer(x, position_embeddings=pe, position_ids=pos, cache=cache, attention_mask=None)
            return out[0] if isinstance(out, tuple) else out

    window = _window(layer, text)
    cached = ctx  # what the layer's cache holds in decode
    if window is not None and phase == "decode":
        if dynamic:
            raise CostModelError(
                f"{type(layer).__name__}: a sliding-window layer (window {window}) caches min(ctx, "
                f"{window - 1}) tokens, not a symbolic ctx; export it static (dynamic=False)"
            )
        cached = min(ctx, window - 1)
    step = Step().eval().to(tdt)
    hidden = int(text.hidden_size)
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    meta = {"device": "meta", "dtype": tdt}
    # a dynamic export traces at sizes of at least 2 (torch.export specialises 0 and 1)
    tb, ts, tc = (max(batch, 2), max(seq, 2), max(ctx, 2)) if dynamic else (batch, seq, cached)
    if phase == "prefill":
        args: tuple[Any, ...] = (torch.empty(tb, ts, hidden, **meta),)
    else:
        kv = torch.empty(tb, kv_heads, tc, head_dim, **meta)
        args = (torch.empty(tb, 1, hidden, **meta), kv, torch.empty_like(kv))
    shapes, dims, point = _dynamic(torch, phase, batch, seq, ctx) if dynamic else (None, None, {})
    try:
        with torch.no_grad(), _quiet_torch():
            ep = torch.export.export(step, args, dynamic_shapes=shapes, strict=False)
    except Exception as e:  # an architecture whose layer does not export: say which
        raise CostModelError(
            f"{type(layer).__name__}: torch.export of one {phase} step failed ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from e
    g = from_exported_program(ep, dims=dims)
    if window is not None and phase == "prefill" and (dynamic or seq > window):
        _apply_window(g, window, type(layer).__name__)
    g.graph["hf_layer"] = {
        "layer": type(layer).__name__,
        "phase": phase,
        "batch": batch,
        "seq": seq if phase == "prefill" else 1,
        "ctx": ctx if phase == "decode" else 0,
        "window": window,
        "cached": cached if phase == "decode" else 0,
    }
    if dynamic:
        from costmodel.graph import COST, op_nodes

        free = {str(x) for n in op_nodes(g) for x in g.nodes[n][COST].bytes.free_symbols}
        lost = sorted(set(point) - free)
        if lost:  # export specialised a dimension: say so rather than price a fixed size as symbolic
            raise CostModelError(
                f"{type(layer).__name__}: torch.export specialised {', '.join(lost)} to a constant; "
                "export it static (dynamic=False)"
            )
        g.graph["hf_layer"]["point"] = point
    return g


def _apply_window(g: nx.DiGraph, window: int, layer: str) -> None:
    """Price the prefill's attention with the layer's sliding window (the export ran it unmasked)."""
    from costmodel.keys import COST, OP, PARAMS
    from costmodel.rules import op_cost

    for _, data in g.nodes(data=True):
        if data.get(OP) != "attention":
            continue
        if not data[PARAMS].get("causal"):
            raise CostModelError(
                f"{layer}: a sliding-window prefill whose attention is not causal; not priced"
            )
        data[PARAMS] = {**data[PARAMS], "window": window}
        data[COST] = op_cost("attention", **data[PARAMS])


def _dynamic(
    torch: Any, phase: str, batch: int, seq: int, ctx: int
) -> tuple[dict[str, Any], dict[str, tuple[str | None, ...]], dict[str, int]]:
    """``torch.export``'s ``dynamic_shapes`` for one step, the importer's names for those
    dimensions, and the stated sizes of each name."""
    # AUTO, not named Dims: the layer's guards on the cache length (SDPA's stride arithmetic,
    # e.g. min(128 (ctx + 1), 512 (ctx + 1)) == 128 (ctx + 1)) hold for every size, but export's
    # solver cannot prove them over a named Dim's range and refuses; the caller checks that
    # every dimension stayed symbolic
    b = c = torch.export.Dim.AUTO
    if phase == "prefill":
        shapes: dict[str, Any] = {"x": {0: b, 1: b}}
        return shapes, {"x": ("B", "S", None)}, {"B": batch, "S": seq}
    cache = ("B", None, "ctx", None)
    shapes = {"x": {0: b}, "past_k": {0: b, 2: c}, "past_v": {0: b, 2: c}}
    return shapes, {"x": ("B", None, None), "past_k": cache, "past_v": cache}, {"B": batch, "ctx": ctx}
