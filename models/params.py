"""Parameter counts derived from a :class:`ModelConfig`, symbolic or numeric.

Per layer, summed over the layer groups (:func:`models.layers.layer_groups`):

* the mixer's weights, from its registered formula (:mod:`models.mixers`:
  attention ``d*H*h + 2*d*H_kv*h + H*h*d`` and its variants, MLA, Mamba-2,
  gated delta net);
* MLP: ``3*d*I`` gated (SwiGLU, GeGLU), ``2*d*I`` plain (GELU), plus biases with
  ``mlp_bias`` (gpt-oss's experts: ``2*I + d`` each);
* MoE: ``E*3*d*I_e`` routed, ``3*d*I_s`` shared (``I_s`` =
  ``shared_expert_intermediate_size``, else ``n_shared*I_e``; ``+ d`` for its
  gate), ``E*d`` router (+ ``E`` router bias);
* norms: ``d`` (RMSNorm) or ``2d`` (LayerNorm with bias) before the mixer and
  before the MLP, where the layer has them, and after them too with
  ``sandwich_norm`` (Gemma); one norm for both with ``parallel_block`` (Phi-2,
  Falcon-7B); ``d`` or ``2d`` final.

Embedding ``V*d``; lm_head ``V*d`` unless tied (``+ V`` with ``lm_head_bias``). ``mtp_layers`` multi-token
prediction modules (DeepSeek-V3, arXiv:2412.19437 sec. 2.2) each add one MoE
layer, two norms, the ``2d x d`` projection and a final norm, and, as the
published checkpoint stores them, their own embedding and head.
*Non-embedding* excludes embedding and head (the convention of the Qwen2.5
card's 6.53B); *active* counts ``k`` of the ``E`` routed experts per MoE layer
(compute per token), while memory holds *total*.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from costmodel.dtypes import get_dtype
from costmodel.expr import to_expr

from .config import ModelConfig
from .layers import LayerSpec, layer_groups, mixer_params
from .mixers import get_mlp
from .mixers.mlp_dense import mlp_params
from .mixers.mlp_moe import moe_params

__all__ = [
    "ParamCounts",
    "param_counts",
    "param_bytes",
    "attention_params",
    "mlp_params",
    "moe_params",
    "layer_params",
]


def _config(cfg: object) -> ModelConfig:
    """``cfg`` itself, or what :func:`models.catalog.get_model` resolves it to (a catalog name, a
    config.json path or a parsed one), one line naming the value otherwise (a name was an
    AttributeError: 'str' object has no attribute 'vocab_size')."""
    if isinstance(cfg, ModelConfig):
        return cfg
    from .catalog import get_model

    return get_model(cfg)  # type: ignore[arg-type]  # get_model names a wrong type itself


def attention_params(cfg: ModelConfig | str) -> sympy.Expr:
    """Attention weights of one layer of the config's uniform kind (MLA or GQA).

    Parameters
    ----------
    cfg : ModelConfig or str
        The model (its uniform mixer: MLA or GQA/MQA/MHA), or a catalog name or config.json path.

    Returns
    -------
    sympy.Expr
        Parameters of one layer's attention mixer (:func:`models.layers.mixer_params`).
    """
    cfg = _config(cfg)
    return mixer_params(cfg, "mla" if cfg.is_mla else "gqa")


def _norm(cfg: ModelConfig) -> sympy.Expr:
    return cfg.hidden_size * (1 if cfg.norm == "rmsnorm" else 2)


def layer_params(cfg: ModelConfig, spec: LayerSpec, *, active: bool = False) -> sympy.Expr:
    """Weights of one layer of ``spec`` (``active``: only the routed experts a token uses)."""
    norms = 2 if cfg.sandwich_norm else 1  # a norm before each sublayer (and after it, sandwiched)
    p = mixer_params(cfg, spec.mixer) + (norms * _norm(cfg) if spec.mixer != "none" else 0)
    # a parallel block's MLP reads the mixer's norm (one norm per layer)
    mlp_norms = 0 if (cfg.parallel_block and spec.mixer != "none") else norms * _norm(cfg)
    if spec.mlp != "none":
        p += get_mlp(spec.mlp).params(cfg, active=active) + mlp_norms
    return p


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (numbers of values, not bytes)."""

    embedding: sympy.Expr
    lm_head: sympy.Expr
    per_dense_layer: sympy.Expr
    per_moe_layer: sympy.Expr
    final_norm: sympy.Expr
    total: sympy.Expr
    non_embedding: sympy.Expr
    active: sympy.Expr
    mtp: sympy.Expr = sympy.S.Zero  #: multi-token-prediction modules (in ``total``)

    def bytes(self, bits_per_param: object = 16) -> sympy.Expr:
        """Weight bytes at ``bits_per_param`` (use the dtype's bits)."""
        return self.total * to_expr(bits_per_param, field="bits_per_param") / 8


def param_bytes(cfg: ModelConfig | str) -> sympy.Expr:
    """Bytes of every weight at its storage dtype: the routed experts at ``expert_dtype``
    (block-scaled formats with their scales: MXFP4 4.25 bits), the embedding table and the
    lm_head at theirs (quantised checkpoints keep them at the float dtype: ``quantization_config``
    converts the decoder linears, :mod:`models.quantization`; a loaded MTP module's own embedding and
    head likewise), the rest at ``dtype``.

    The experts' biases (``mlp_bias``) are not quantised: the checkpoint's ``quantization_config``
    converts the expert matrices (gpt-oss: ``*_blocks`` and ``*_scales`` tensors beside bf16
    ``*_bias`` ones), so they count at ``dtype`` with the rest, as the graph holds them.

    gpt-oss-120b: 114.7B expert weights at 4.25 bits and 2.1B others at 16 bits are
    65.25 GB (60.77 GiB; the published checkpoint is 60.8 GiB). Multi-token-prediction modules
    count only when loaded (``cfg.mtp_active``: speculative decoding drafting with them).

    Parameters
    ----------
    cfg : ModelConfig or str
        The model, or a catalog name or config.json path.

    Returns
    -------
    sympy.Expr
        Bytes (exact; decimal GB when divided by 1e9).
    """
    cfg = _config(cfg)
    pc = param_counts(cfg)
    routed = sympy.Integer(0)
    if cfg.moe is not None:  # the expert matrices alone (mlp_params less its biases)
        width = cfg.moe.moe_intermediate_size
        routed = (
            cfg.n_moe_layers * cfg.moe.num_experts * (3 if cfg.gated_mlp else 2) * cfg.hidden_size * width
        )
    # each loaded MTP module stores its own embedding and head (param_counts), at their dtypes too
    copies = 1 + (cfg.mtp_layers if cfg.mtp_active else 0)
    rest = pc.total - routed - copies * (pc.embedding + pc.lm_head)  # tables at their own dtypes
    if not cfg.mtp_active:  # MTP modules a plain run does not load (ModelConfig.mtp_active)
        rest -= pc.mtp
    return sympy.expand(
        rest * get_dtype(cfg.weight_dtype).bytes
        + routed * get_dtype(cfg.expert_weight_dtype).bytes
        + copies * pc.embedding * get_dtype(cfg.embedding_weight_dtype).bytes
        + copies * pc.lm_head * get_dtype(cfg.lm_head_weight_dtype).bytes
    )


def param_counts(cfg: ModelConfig | str) -> ParamCounts:
    """Total, non-embedding and active parameter counts of ``cfg``.

    Parameters
    ----------
    cfg : ModelConfig or str
        The model (numeric or symbolic dimensions), or a catalog name or config.json path.

    Returns
    -------
    ParamCounts
        Parameter counts (parameters, not bytes): total, non-embedding and active per token.

    >>> from models import get_model
    >>> round(float(param_counts(get_model("qwen2.5-7b")).non_embedding) / 1e9, 2)  # seeds: 6.53B
    6.53
    >>> param_counts("qwen2.5-7b") == param_counts(get_model("qwen2.5-7b"))  # a name resolves
    True
    """
    cfg = _config(cfg)
    emb = cfg.vocab_size * cfg.hidden_size
    head = sympy.Integer(0) if cfg.tie_word_embeddings else emb
    if cfg.lm_head_bias:
        head += cfg.vocab_size
    final = _norm(cfg)
    groups = layer_groups(cfg)
    body = sympy.Add(*(g.count * layer_params(cfg, g.spec) for g in groups)) + final
    act_body = sympy.Add(*(g.count * layer_params(cfg, g.spec, active=True) for g in groups)) + final
    mixer = "mla" if cfg.is_mla else "gqa"
    dense = layer_params(cfg, LayerSpec(mixer, "dense"))
    moe = layer_params(cfg, LayerSpec(mixer, "moe")) if cfg.is_moe else sympy.Integer(0)
    mtp = sympy.Integer(0)
    if cfg.mtp_layers:
        d = cfg.hidden_size
        per = (
            layer_params(cfg, LayerSpec(mixer, "moe" if cfg.is_moe else "dense")) + 2 * d * d + 3 * _norm(cfg)
        )
        mtp = cfg.mtp_layers * (per + emb + head)
    return ParamCounts(
        embedding=emb,
        lm_head=head,
        per_dense_layer=dense,
        per_moe_layer=moe,
        final_norm=final,
        total=sympy.expand(emb + head + body + mtp),
        non_embedding=sympy.expand(body),
        active=sympy.expand(emb + head + act_body),
        mtp=sympy.expand(mtp),
    )
