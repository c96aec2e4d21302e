"""One Hugging Face decoder layer, built from its ``config.json`` on the meta device, as a cost graph.

:func:`hf_layer_graph` builds the model's causal-LM class from the config with one hidden layer
on the meta device (nothing is downloaded or allocated), takes its first decoder layer and the
rotary embedding, and exports, with ``torch.export``, the step a serving engine runs:

* ``prefill``: ``batch x seq`` tokens from an empty cache (causal SDPA, no mask);
* ``decode``: one new token for each of ``batch`` sequences against a ``ctx``-token cache, which
  the layer extends by ``cat`` as transformers' ``DynamicCache`` does.

Attention runs through ``scaled_dot_product_attention`` (transformers' ``sdpa``) with no mask: a
sliding window wider than the context (Gemma's 4,096 at ``seq`` or ``ctx`` up to it) and a
causal mask are the same computation. Mixture-of-experts layers run their experts through
transformers' ``batched_mm`` implementation (each token's top-k experts' weights gathered, then
batched matmuls: one graph, no data-dependent loop). Shapes are static: the graph is numeric,
ready for :func:`costmodel.fusion_plan.plan_fusions`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import networkx as nx

from costmodel.errors import CostModelError

from .torch_export import TORCH_DTYPES, from_exported_program, require_torch

__all__ = ["hf_layer_graph", "PHASES"]

PHASES = ("prefill", "decode")
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
    except (ValueError, KeyError) as e:
        raise CostModelError(f"config.json: transformers cannot build model_type {kind!r} ({e})") from e
    text = getattr(cfg, "text_config", None) or cfg
    text.num_hidden_layers = 1
    if hasattr(text, "layer_types") and text.layer_types:
        text.layer_types = list(text.layer_types[:1])
    text._attn_implementation = "sdpa"
    if hasattr(text, "_experts_implementation"):
        text._experts_implementation = "batched_mm"
    return text


def _layer_and_rope(model: Any) -> tuple[Any, Any]:
    """The first decoder layer and the rotary embedding (None: absolute positions, GPT-2)."""
    for owner in (getattr(model, "model", None), getattr(model, "transformer", None), model):
        if owner is None:
            continue
        layers = getattr(owner, "layers", None) or getattr(owner, "h", None)
        if layers is not None:
            return layers[0], getattr(owner, "rotary_emb", None)
    raise CostModelError(f"{type(model).__name__}: no .layers or .h list of decoder layers")


def hf_layer_graph(
    config: Mapping[str, Any],
    phase: str,
    *,
    batch: int = 1,
    seq: int = 2048,
    ctx: int = 4096,
    dtype: str = "bf16",
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

    Returns
    -------
    networkx.DiGraph
        The layer's ATen graph through the shared op table, numeric.
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
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(text)
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

    step = Step().eval().to(tdt)
    hidden = int(text.hidden_size)
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    meta = {"device": "meta", "dtype": tdt}
    if phase == "prefill":
        args: tuple[Any, ...] = (torch.empty(batch, seq, hidden, **meta),)
    else:
        kv = torch.empty(batch, kv_heads, ctx, head_dim, **meta)
        args = (torch.empty(batch, 1, hidden, **meta), kv, torch.empty_like(kv))
    try:
        with torch.no_grad():
            ep = torch.export.export(step, args, strict=False)
    except Exception as e:  # an architecture whose layer does not export: say which
        raise CostModelError(
            f"{type(layer).__name__}: torch.export of one {phase} step failed ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from e
    g = from_exported_program(ep)
    g.graph["hf_layer"] = {
        "layer": type(layer).__name__,
        "phase": phase,
        "batch": batch,
        "seq": seq if phase == "prefill" else 1,
        "ctx": ctx if phase == "decode" else 0,
    }
    return g
