"""Token mixers and MLP kinds as plug-ins: one module per kind, each a registered :class:`Mixer` class
holding its required config fields, Hugging Face families, parameter formula and graph block
(:mod:`models.mixers.base` states the contract).

=====================  ======================================================
mixer (module)         what it is
=====================  ======================================================
``gqa`` (softmax)      full causal attention, MHA/GQA/MQA as cases
``sliding`` (softmax)  causal attention over the last ``sliding_window`` keys
``chunked`` (softmax)  causal attention inside ``attention_chunk_size`` chunks
``mla`` (mla)          DeepSeek's multi-head latent attention
``ssm`` (mamba2)       Mamba-2 selective state space
``mamba`` (mamba)      Mamba-1 selective scan (S6), Jamba's Mamba layers
``linear_attention``   the gated delta rule (Qwen3-Next)
``none`` (none)        no mixer: the layer is its MLP alone
=====================  ======================================================

MLP kinds (:class:`MLP`): ``dense`` (mlp_dense), ``moe`` (mlp_moe), ``none`` (mlp_none).

A plug-in's own config fields are a frozen :class:`ConfigSpec` dataclass in its module,
registered with ``@register_spec`` (:mod:`models.specs`) and held by
:class:`~models.config.ModelConfig` in its ``specs`` mapping (``cfg.need(MoESpec)``; the mixer
class names its ``spec_slot`` and the spec fields it ``needs``). Plug-ins read the config
through :class:`ConfigView` and never import :mod:`models.config`.

A new mixer is a new module here with a ``@register_mixer`` class and, when it reads fields of
its own, a ``@register_spec`` spec (and, when it needs an op no rule costs yet, a rule module in
:mod:`costmodel.rules`); nothing else learns its name.
"""

from .base import (
    MLP,
    BuilderLike,
    ConfigSpec,
    ConfigView,
    Dim,
    EdgeRef,
    HFReader,
    LayerContext,
    LayerPlugin,
    Mixer,
    PhaseLike,
    Ref,
    get_mixer,
    get_mlp,
    hf_families,
    mixer_names,
    mlp_names,
    register_mixer,
    register_mlp,
)

__all__ = [
    "ConfigSpec",
    "ConfigView",
    "Dim",
    "LayerPlugin",
    "Mixer",
    "MLP",
    "register_mlp",
    "get_mlp",
    "mlp_names",
    "LayerContext",
    "BuilderLike",
    "PhaseLike",
    "Ref",
    "EdgeRef",
    "HFReader",
    "register_mixer",
    "get_mixer",
    "mixer_names",
    "hf_families",
]
