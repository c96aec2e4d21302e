"""Blocks shared by the recurrent mixers (Mamba-2, Mamba-1, the gated delta net): the carried
state, the depthwise causal conv with its conv state, and the ``y * silu(z)`` output gate.

A decode step (or a prefill chunk after a cached prefix) reads the state the previous step
left: a cache-like source node whose residency the op that writes it records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import register_spec
from .base import ConfigSpec, Dim, LayerContext, Ref

__all__ = ["SSMSpec", "recurrent_state", "carries_state", "causal_conv", "silu_gate"]


@register_spec
@dataclass(frozen=True, slots=True)
class SSMSpec(ConfigSpec):
    """The selective state-space fields (``cfg.ssm``) of the ``ssm`` (Mamba-2: heads, head
    dim, groups, chunk) and ``mamba`` (Mamba-1: inner width, step rank, inner norms) layers;
    each mixer ``needs`` its own (its module doc gives the formulas)."""

    slot: ClassVar[str] = "ssm"
    label: ClassVar[str] = "SSM"
    dims: ClassVar[tuple[str, ...]] = (
        "ssm_state_size",
        "ssm_num_heads",
        "ssm_head_dim",
        "ssm_inner_size",
        "ssm_dt_rank",
        "ssm_n_groups",
        "ssm_conv_kernel",
        "ssm_chunk_size",
    )
    symbolic_dims: ClassVar[tuple[str, ...]] = (
        "ssm_state_size",
        "ssm_num_heads",
        "ssm_head_dim",
        "ssm_inner_size",
        "ssm_dt_rank",
    )

    ssm_state_size: Dim = None
    ssm_num_heads: Dim = None  # Mamba-2
    ssm_head_dim: Dim = None  # Mamba-2
    ssm_inner_size: Dim = None  # Mamba-1: the expanded channel count D
    ssm_dt_rank: Dim = None  # Mamba-1: the low rank of the step projection
    ssm_inner_norms: bool = False  # Mamba-1: RMSNorms on delta, B and C (Jamba)
    ssm_n_groups: Dim = 1
    ssm_conv_kernel: Dim = 4
    ssm_chunk_size: Dim = 256


def recurrent_state(layer: LayerContext, local: str, width: Any, dtype: str) -> Ref:
    """The state carried from the previous step (decode, or a chunk after a cached prefix): a
    cache-like source whose residency the op that writes it records."""
    t = Tensor(layer.b.name(local), (layer.dims.batch, width), dtype)
    n, t = layer.b.source(local, t, "kv_cache", resident=False)
    return n, t


def carries_state(layer: LayerContext) -> bool:
    """A decode step, or a prefill chunk after a cached prefix, picks up the previous state."""
    return layer.dims.phase == "decode" or layer.dims.prefix != 0


def causal_conv(layer: LayerContext, src: Ref, channels: Any, width: Any, *, bias: bool = True) -> Ref:
    """The depthwise causal conv (and SiLU) of the recurrent mixers over the first ``channels``
    columns of ``src``, with its per-sequence conv state of ``width - 1`` inputs."""
    T, B = layer.dims.tokens, layer.dims.batch
    ab = get_dtype(layer.act).bytes
    carried = carries_state(layer)
    ins: list[Any] = [
        (*src, T * channels * ab),
        layer.weight("conv1d.weight", (channels, width + (1 if bias else 0))),
    ]
    if carried:
        ins.append(recurrent_state(layer, "conv_state", (width - 1) * channels, layer.act))
    return layer.b.op(
        "conv1d",
        "causal_conv1d",
        Role.CONV,
        ins,
        [Tensor(layer.b.name("conv1d"), (T, channels), layer.act)],
        extra=Cost.resident(state=B * (width - 1) * channels * ab),
        tokens=T,
        channels=channels,
        width=width,
        batch=B,
        dtype=layer.act,
        weight_dtype=layer.wd,
        state="read_write" if carried else "write",
        bias=bias,
    )[0]


def silu_gate(layer: LayerContext, y: Ref, z: Ref, width: Any) -> Ref:
    """``y * silu(z)`` over ``width`` columns, ``z`` a slice of the input projection."""
    T = layer.dims.tokens
    return layer.b.op(
        "gate",
        "elementwise",
        Role.ACTIVATION,
        [y, (*z, T * width * get_dtype(layer.act).bytes)],
        [Tensor(layer.b.name("gate"), (T, width), layer.act)],
        n=T * width,
        inputs=2,
        vector_ops=5,  # silu(z) (4) and the product
        sfu_ops=1,
        dtype=layer.act,
    )[0]
