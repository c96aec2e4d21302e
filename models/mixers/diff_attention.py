r"""Differential attention (``diff_attention``; Ye et al. 2024, "Differential Transformer",
arXiv:2410.05258), as ``transformers``' ``DiffLlamaAttention`` (``model_type: diffllama``) runs it::

    q, k, v = q_proj(h), k_proj(h), v_proj(h)          # [T, H h], [T, H_kv h], [T, H_kv h]
    q, k    = rope(q), rope(k)
    v1, v2  = the two halves of v's heads, each repeated to H_kv heads
    o1      = attention(q, k, v1)                       # two standard (GQA) attention calls
    o2      = attention(q, k, v2)                       # sharing Q and K
    a, b    = the first and second H/2 heads of cat(o1, o2)   # [T, H/2, 2h] each
    lam     = exp(lq1 . lk1) - exp(lq2 . lk2) + lam_init       # the re-parameterised lambda
    o       = (1 - lam_init) * groupnorm(a - lam * b)          # RMSNorm over 2h, no weights
    out     = o_proj(o)

so the scores ``softmax(Q_1 K_1^T) - \lambda\,softmax(Q_2 K_2^T)`` act on ``[V_1; V_2]``
head pair by head pair. Costs follow that structure: each call is an ``attention`` op of ``H``
query heads over ``H_kv`` KV heads of width ``h`` reading the K cache and a ``H_kv``-head V
operand (its half repeated), so Q·K^T is computed twice and K read twice (the price of the
two-call form, which transformers prefers because Flash kernels need ``h_v = h_q``). The
combination reads both outputs, writes ``T H h`` values (a multiply and a subtract each) and
reads the four ``lambda`` vectors (``4h`` products and sums, two exponentials, per layer);
the group norm is the ``rmsnorm`` rule over ``T H / 2`` rows of ``2h`` with the constant
``1 - lambda_init`` as its gain (no weight node: the norm has none).

Per-layer weights: softmax attention's (:func:`models.mixers.softmax.attention_params`) plus
the four ``lambda`` vectors,

.. math::

    N = d H h + 2 d H_{kv} h + H h d \;[+ H h + 2 H_{kv} h + d \text{ with attention\_bias}] + 4 h

(``attention_bias`` puts a bias on q, k, v and o: the reader sets ``qkv_bias`` and ``o_bias``).
The cache is a GQA cache (``2 H_kv h`` per token); ``H_kv`` must be even, as transformers
requires. Under tensor parallelism the heads split ``tp`` ways with each pair kept on one
device (a permutation of the projections' columns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import sympy

from costmodel.cost import Cost
from costmodel.dtypes import get_dtype, roof_of
from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..fields import bool_field, pattern_layers
from .base import ConfigView, HFReader, LayerContext, Mixer, Ref, register_mixer
from .softmax import AttentionSpec, attention_params, attention_shape, kv_operands, project_qkv, write_kv

__all__ = ["DiffAttention", "read_diffllama"]


def read_diffllama(
    cfg: Mapping[str, Any], common: dict[str, Any], get: Callable[..., Any], name: str
) -> None:
    """``model_type: diffllama``: a Llama whose every layer is differential attention;
    ``attention_bias`` biases q, k, v and o (``DiffLlamaAttention``). The per-layer pattern is
    refused above :data:`models.fields.MAX_PATTERN_LAYERS` layers before it is built."""
    common["layer_types"] = ("diff_attention",) * pattern_layers(common, name)
    common["o_bias"] = bool_field(cfg, "attention_bias", name, False)


@register_mixer
class DiffAttention(Mixer):
    """Differential attention: two softmax maps subtracted, a learned lambda, a group norm."""

    name = "diff_attention"
    hf_families: ClassVar[Mapping[str, HFReader]] = {"diffllama": read_diffllama}

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """q/k/v read ``d``; o_proj reads the ``H*h`` heads (``DiffLlamaAttention``)."""
        assert cfg.head_dim is not None  # ModelConfig.__post_init__ fills it in
        return {
            "q_proj": cfg.hidden_size,
            "k_proj": cfg.hidden_size,
            "v_proj": cfg.hidden_size,
            "o_proj": cfg.num_attention_heads * cfg.head_dim,
        }

    def check(self, cfg: ConfigView) -> None:
        """``H_kv`` even (the value heads split in two halves); no sinks or output gate."""
        hkv = cfg.num_key_value_heads
        assert hkv is not None  # ModelConfig.__post_init__ fills it in
        if hkv.is_number and hkv % 2 != 0:
            raise CostModelError(
                f"{cfg.name}: diff_attention layers split the value heads in two halves: "
                f"num_key_value_heads must be even, got {hkv}"
            )
        for field in ("attention_sinks", "attn_output_gate"):
            if getattr(cfg.need(AttentionSpec), field):
                raise CostModelError(
                    f"{cfg.name}: diff_attention layers take no {field} (got {getattr(cfg.need(AttentionSpec), field)!r}); "
                    "allowed: 0 / False"
                )

    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Softmax attention's weights plus ``lambda_q1, lambda_k1, lambda_q2, lambda_k2`` (module doc)."""
        assert cfg.head_dim is not None  # ModelConfig.__post_init__ fills it in
        return attention_params(cfg) + 4 * cfg.head_dim

    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """The two attention calls, the lambda combination, the group norm, ``o_proj`` (module doc)."""
        cfg, T, hd = layer.cfg, layer.dims.tokens, layer.cfg.head_dim
        assert hd is not None  # ModelConfig.__post_init__ fills it in
        H = layer.split(cfg.num_attention_heads, "num_attention_heads")
        _, q, k, v = project_qkv(layer, h)
        kw, vw = write_kv(layer, k, v)
        kv, kv_dtype = kv_operands(layer, k, v, kw, vw)
        shape = attention_shape(layer)
        o1, o2 = (
            layer.b.op(
                f"attention_{i}",
                "attention",
                Role.ATTENTION,
                [q, *kv],
                [Tensor(layer.b.name(f"attention_{i}"), (T, H * hd), layer.act)],
                kv_dtype=kv_dtype,
                **shape,
            )[0]
            for i in (1, 2)
        )
        lam = layer.weight("lambda", (4 * hd,))  # lambda_q1, lambda_k1, lambda_q2, lambda_k2
        n, ab = T * H * hd, get_dtype(layer.act).bytes
        fp32 = roof_of("fp32")
        combined = layer.b.op(
            "diff_combine",
            "elementwise",
            Role.ACTIVATION,
            [o1, o2, lam],
            [Tensor(layer.b.name("diff_combine"), (T, H * hd), layer.act)],
            # lambda: two h-long dot products (2h FLOPs each), two exps, a subtract and an add
            extra=Cost.compute("vector", fp32, 4 * hd + 2) + Cost.compute("sfu", fp32, 2),
            n=n,
            inputs=2,
            vector_ops=2,  # a - lambda * b
            read_bytes=2 * n * ab + lam[1].bytes,
            dtype=layer.act,
        )[0]
        normed = layer.b.op(
            "group_norm",
            "rmsnorm",
            Role.NORM,
            [combined],
            [Tensor(layer.b.name("group_norm"), (T, H * hd), layer.act)],
            rows=T * H / 2,
            cols=2 * hd,
            dtype=layer.act,
        )[0]
        return layer.linear(
            "o_proj", normed, cfg.hidden_size, reduce=True, bias=cfg.need(AttentionSpec).o_bias
        )
