r"""StreamingLLM attention (``streaming``): causal softmax attention whose KV cache keeps the first
``sink_token_length`` positions (the attention sinks) and the ``streaming_window`` most recent
ones, so a model trained on a finite window generates past it (Xiao et al. 2024, "Efficient
Streaming Language Models with Attention Sinks", ICLR, arXiv:2309.17453: four initial tokens as
sinks suffice; TensorRT-LLM runs it with ``sink_token_length`` beside its attention window).

With ``S`` sinks and a window of ``W``, the query at position ``i`` attends the ``S`` sinks and the
last ``W`` positions, ``min(i + 1, S + W)`` keys, and the cache holds ``min(ctx, S + W)`` positions
per sequence: the cost of a sliding window of ``S + W`` positions (the ``sliding`` mixer's
block with ``window = S + W``), whose decode step reads

.. math::

    D_{KV} = 2\,B\,\min(ctx, S + W)\,H_{kv}\,h\,b_{kv}

The weights are softmax attention's (:func:`~models.mixers.softmax.attention_params`). Rope uses
positions within the cache (the paper's section 3.2); TensorRT-LLM rotates the cached keys inside
its attention kernel, a few vector FLOPs per key read that are not charged, as rope inside a
fused attention kernel is nowhere else. The file describing such a model names the mixer and its
two fields (:mod:`models.layer_file`): ``{"layer_types": ["streaming", ...],
"sink_token_length": 4, "streaming_window": 1020, ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..specs import register_spec
from .base import ConfigSpec, Dim, LayerContext, Ref, register_mixer
from .softmax import SoftmaxAttention, softmax_attention

__all__ = ["StreamingSpec", "Streaming"]


@register_spec
@dataclass(frozen=True, slots=True)
class StreamingSpec(ConfigSpec):
    """The attention-sink cache (``cfg.spec(StreamingSpec)``): ``sink_token_length`` initial
    positions kept for good beside the ``streaming_window`` most recent ones (both or neither)."""

    slot: ClassVar[str] = "streaming"
    label: ClassVar[str] = "StreamingLLM"
    dims: ClassVar[tuple[str, ...]] = ("sink_token_length", "streaming_window")
    required: ClassVar[tuple[str, ...]] = dims
    symbolic_dims: ClassVar[tuple[str, ...]] = dims

    sink_token_length: Dim = None  # S: the attention sinks (the paper's 4)
    streaming_window: Dim = None  # W: recent positions kept besides the sinks

    @property
    def cache_positions(self) -> Dim:
        """``S + W``: the positions a sequence's cache keeps, and the keys a query reads at most."""
        return self.sink_token_length + self.streaming_window


@register_mixer
class Streaming(SoftmaxAttention):
    """Softmax attention over the sinks and a recent window (module doc)."""

    name = "streaming"
    spec_slot = "streaming"
    needs = ("sink_token_length", "streaming_window")

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Sliding-window attention over ``S + W`` positions (module doc)."""
        return softmax_attention(layer, h, window=layer.cfg.need(StreamingSpec).cache_positions)
