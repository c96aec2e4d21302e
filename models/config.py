"""``ModelConfig``: the shape of a decoder-only Transformer.

Fields use Hugging Face names and may be numbers or sympy symbols (or a
mix), so one config type serves catalog models, user configs and fully
symbolic derivations. Covered families:

* dense decoders with MHA / GQA / MQA attention, a SwiGLU (gated) or GELU
  MLP, RMSNorm or LayerNorm, tied or untied embeddings, optional q/k/v bias,
  optional per-head q/k norms (Qwen3), RoPE;
* Mixture-of-Experts: routed experts with top-k, shared experts, dense-first
  layers (``first_k_dense_replace``), a router bias;
* DeepSeek-style Multi-head Latent Attention (MLA): ``q_lora_rank``,
  ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``.

``head_dim`` is a field of its own: it is *not* always ``hidden/heads``
(Qwen3-32B: 5120/64 = 80 but head_dim 128).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

import sympy

from costmodel.cost import bind
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.symbols import check_dim, dim

from .layers import SYMBOLIC_FIELDS, LayerSpec, check_layers, layer_groups

__all__ = ["ModelConfig", "ModelConfigError", "MLPKind", "NormKind", "Dim"]


class ModelConfigError(CostModelError):
    """A model configuration has a missing, invalid or inconsistent field."""


#: the MLP kinds: gated SiLU (``down(silu(gate x) * up x)``), gated GELU (GeGLU, Gemma), or a
#: plain MLP with GELU or squared ReLU (``relu(x)**2``, Nemotron-H)
MLPKind = Literal["swiglu", "geglu", "gelu", "relu2"]
#: the norm kinds
NormKind = Literal["rmsnorm", "layernorm"]
#: a dimension: given as a positive integer or a sympy expression, stored as a sympy expression
#: (``__post_init__`` converts). The alias names the stored type; sympy ships no type stubs, so mypy
#: reads ``sympy.Expr`` as ``Any`` and an int given to the constructor type-checks too.
Dim: TypeAlias = sympy.Expr
_MLPS: tuple[str, ...] = get_args(MLPKind)
_NORMS: tuple[str, ...] = get_args(NormKind)
_MOE_FIELDS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
_MLA_FIELDS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_DIM_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only Transformer's shape (see module doc)."""

    name: str
    hidden_size: Dim
    num_hidden_layers: Dim
    num_attention_heads: Dim
    intermediate_size: Dim
    vocab_size: Dim
    num_key_value_heads: Dim | None = None
    head_dim: Dim | None = None
    mlp: MLPKind = "swiglu"
    norm: NormKind = "rmsnorm"
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False  # a bias on the attention output projection (gpt-oss)
    # attention and MLP read one shared norm of the layer input and add to the residual together
    # (GPT-J's parallel block: Phi-1/2, Falcon-7B, Cohere); a layer then has one norm, not two
    parallel_block: bool = False
    # the q/k norms span all heads, H*h and H_kv*h weights (OLMo 2, Cohere, MiniMax-M2), not one
    # head_dim-wide norm shared by every head (Qwen3, Gemma 3)
    qk_norm_all_heads: bool = False
    lm_head_bias: bool = False  # a bias on the lm_head (Phi-1/2)
    sandwich_norm: bool = False  # norms on the mixer's and the MLP's outputs too (Gemma 2/3)
    shared_expert_gate: bool = False  # a sigmoid gate (d -> 1) on the shared expert (Qwen2-MoE, Qwen3-Next)
    mlp_bias: bool = False  # biases on the MLP / expert projections (gpt-oss experts)
    qk_norm: bool = False
    rope: bool = True
    nope_full_attention: bool = False  # full-context layers take no rope (Llama 4's NoPE layers)
    # Mixture-of-Experts
    num_experts: Dim | None = None
    num_experts_per_tok: Dim | None = None
    moe_intermediate_size: Dim | None = None
    num_shared_experts: Dim = 0
    moe_capacity_factor: float | None = None  # expert buffers of c*T*k/E rows (Switch); None: dropless
    first_k_dense_replace: int = 0
    router_bias: bool = False
    # Multi-head Latent Attention
    q_lora_rank: Dim | None = None
    kv_lora_rank: Dim | None = None
    qk_nope_head_dim: Dim | None = None
    qk_rope_head_dim: Dim | None = None
    v_head_dim: Dim | None = None
    # the per-layer pattern and the other mixers' shapes (models.layers): layer_types None is
    # uniform (gqa or mla everywhere); mixer names or LayerSpecs otherwise
    layer_types: tuple[LayerSpec, ...] | None = None
    sliding_window: Dim | None = None
    attention_sinks: int = 0  # learned sink logits per head (gpt-oss: 1)
    attention_chunk_size: Dim | None = None
    attn_output_gate: bool = False  # q_proj also yields a sigmoid gate on the output (Qwen3-Next)
    ssm_state_size: Dim | None = None
    ssm_num_heads: Dim | None = None
    ssm_head_dim: Dim | None = None
    ssm_inner_size: Dim | None = None  # Mamba-1: the expanded channel count D
    ssm_dt_rank: Dim | None = None  # Mamba-1: the low rank of the step projection
    ssm_inner_norms: bool = False  # Mamba-1: RMSNorms on delta, B and C (Jamba)
    ssm_n_groups: Dim = 1
    ssm_conv_kernel: Dim = 4
    ssm_chunk_size: Dim = 256
    linear_num_key_heads: Dim | None = None
    linear_num_value_heads: Dim | None = None
    linear_key_head_dim: Dim | None = None
    linear_value_head_dim: Dim | None = None
    linear_conv_kernel: Dim = 4
    linear_chunk_size: Dim = 64
    shared_expert_intermediate_size: Dim | None = None  # default num_shared_experts * moe width
    # multi-token-prediction layers kept with the model (DeepSeek-V3's MTP module)
    mtp_layers: int = 0
    # dtypes: weights, KV cache, activations between ops, and the matmul operands/roof
    # (None: the activation dtype; "fp8" for W8A8, "nvfp4" for W4A4 on Blackwell)
    dtype: str = "bf16"
    kv_dtype: str | None = None
    act_dtype: str | None = None
    matmul_dtype: str | None = None
    expert_dtype: str | None = None  # routed experts' weights (gpt-oss: mxfp4); None: dtype
    # the input-embedding table and the lm_head: quantised checkpoints (GPTQ, AWQ, compressed-tensors,
    # bitsandbytes) keep both at the model's float dtype (models.quantization); None: dtype
    embedding_dtype: str | None = None
    lm_head_dtype: str | None = None  # None: the embedding's when tied, else dtype
    state_dtype: str | None = None  # SSM / linear-attention state; None: fp32
    source: str = ""
    # the longest sequence the model supports (max_position_embeddings with rope
    # scaling applied, models.context); None: not stated
    max_context: int | None = None

    def __hash__(self) -> int:
        """Hash of the fields, computed once (configs key the compiled-step cache on every call)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        """Fields for pickling, without the cached hash (string hashes differ between processes)."""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.name, str) or not self.name:
            raise ModelConfigError("name must be a non-empty string")
        mc = self.max_context
        if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or mc <= 0):
            raise ModelConfigError(f"{self.name}: max_context must be a positive integer, got {mc!r}")
        if self.num_key_value_heads is None:
            set_("num_key_value_heads", self.num_attention_heads)
        if self.head_dim is None:
            h = self._dim(self.num_attention_heads, "num_attention_heads")
            d = self._dim(self.hidden_size, "hidden_size")
            if h.is_number and d.is_number and d % h != 0:
                raise ModelConfigError(
                    f"{self.name}: head_dim is not given and hidden_size ({d}) is not a multiple of "
                    f"num_attention_heads ({h}); set head_dim"
                )
            set_("head_dim", d / h)
        dims = {f: self._dim(getattr(self, f), f) for f in _DIM_FIELDS}
        for f, v in dims.items():
            set_(f, v)
        h, hkv = dims["num_attention_heads"], dims["num_key_value_heads"]
        if h.is_number and hkv.is_number and h % hkv != 0:
            raise ModelConfigError(
                f"{self.name}: num_attention_heads ({h}) must be a multiple of num_key_value_heads ({hkv})"
            )
        if self.qk_norm_all_heads and not self.qk_norm:
            raise ModelConfigError(f"{self.name}: qk_norm_all_heads needs qk_norm=True")
        if self.mlp not in _MLPS:
            raise ModelConfigError(f"{self.name}: mlp {self.mlp!r} not allowed; allowed: {_MLPS}")
        if self.norm not in _NORMS:
            raise ModelConfigError(f"{self.name}: norm {self.norm!r} not allowed; allowed: {_NORMS}")
        for f in (
            "dtype",
            "kv_dtype",
            "act_dtype",
            "matmul_dtype",
            "expert_dtype",
            "state_dtype",
            "embedding_dtype",
            "lm_head_dtype",
        ):
            v = getattr(self, f)
            if v is not None:
                try:
                    set_(f, get_dtype(v).name)
                except CostModelError as exc:
                    raise ModelConfigError(f"{self.name}.{f}: {exc}") from None
        moe = [getattr(self, f) is not None for f in _MOE_FIELDS]
        if any(moe) and not all(moe):
            missing = [f for f, ok in zip(_MOE_FIELDS, moe, strict=True) if not ok]
            raise ModelConfigError(f"{self.name}: MoE config is missing {', '.join(missing)}")
        if all(moe):
            moe_dims = {f: self._dim(getattr(self, f), f) for f in _MOE_FIELDS}
            for f, v in moe_dims.items():
                set_(f, v)
            e, k = moe_dims["num_experts"], moe_dims["num_experts_per_tok"]
            if e.is_number and k.is_number and k > e:
                raise ModelConfigError(f"{self.name}: num_experts_per_tok ({k}) exceeds num_experts ({e})")
            set_("num_shared_experts", self._dim(self.num_shared_experts, "num_shared_experts", zero=True))
        elif self.num_shared_experts not in (0, None) or self.first_k_dense_replace:
            raise ModelConfigError(f"{self.name}: shared experts / dense-first layers need a MoE config")
        fk = self.first_k_dense_replace
        if not isinstance(fk, int) or isinstance(fk, bool) or fk < 0:
            raise ModelConfigError(f"{self.name}: first_k_dense_replace must be an integer >= 0, got {fk!r}")
        if self.num_hidden_layers.is_number and fk > self.num_hidden_layers:
            raise ModelConfigError(
                f"{self.name}: first_k_dense_replace ({fk}) exceeds num_hidden_layers ({self.num_hidden_layers})"
            )
        mla = [getattr(self, f) is not None for f in _MLA_FIELDS]
        if any(mla) and not all(mla):
            missing = [f for f, ok in zip(_MLA_FIELDS, mla, strict=True) if not ok]
            raise ModelConfigError(f"{self.name}: MLA config is missing {', '.join(missing)}")
        if all(mla):
            for f in (*_MLA_FIELDS, "q_lora_rank"):
                if getattr(self, f) is not None:
                    set_(f, self._dim(getattr(self, f), f))
        try:
            check_layers(self, set_)
        except ModelConfigError:
            raise
        except CostModelError as exc:
            raise ModelConfigError(str(exc)) from None

    def check_context(self, tokens: int, field: str = "ctx", *, allow: bool = False) -> None:
        """Raise when ``tokens`` exceeds :attr:`max_context` (warn instead with ``allow``)."""
        from .context import check_context

        check_context(self.name, self.max_context, tokens, field, allow=allow)

    def _dim(self, value: Any, field: str, zero: bool = False) -> sympy.Expr:
        try:
            return check_dim(value, field, allow_zero=zero)
        except CostModelError as exc:
            raise ModelConfigError(f"{self.name}.{exc}") from None

    # --------------------------------------------------------------- queries
    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def gated_mlp(self) -> bool:
        """The MLP has a gate projection beside its up projection (SwiGLU, GeGLU)."""
        return self.mlp in ("swiglu", "geglu")

    @property
    def weight_dtype(self) -> str:
        return self.dtype

    @property
    def activation_dtype(self) -> str:
        """Storage dtype of activations between ops: ``act_dtype``, else the weight
        dtype when it is a float format, else bf16 (quantised weights do not make
        quantised activations; set ``matmul_dtype`` for W8A8 or W4A4)."""
        if self.act_dtype:
            return self.act_dtype
        return self.dtype if self.dtype in ("fp32", "bf16", "fp16") else "bf16"

    @property
    def cache_dtype(self) -> str:
        """KV-cache dtype: ``kv_dtype``, else the activation dtype."""
        return self.kv_dtype or self.activation_dtype

    @property
    def n_dense_layers(self) -> sympy.Expr:
        """Layers with a dense MLP (all of them unless MoE)."""
        return sympy.Add(*(g.count for g in layer_groups(self) if g.spec.mlp == "dense"))

    @property
    def n_moe_layers(self) -> sympy.Expr:
        return sympy.Add(*(g.count for g in layer_groups(self) if g.spec.mlp == "moe"))

    @property
    def expert_weight_dtype(self) -> str:
        """Storage dtype of the routed experts' weights."""
        return self.expert_dtype or self.dtype

    @property
    def embedding_weight_dtype(self) -> str:
        """Storage dtype of the input-embedding table (``embedding_dtype``, else ``dtype``)."""
        return self.embedding_dtype or self.dtype

    @property
    def lm_head_weight_dtype(self) -> str:
        """Storage dtype of the lm_head: the embedding table's when tied, else ``lm_head_dtype``
        or ``dtype``."""
        if self.tie_word_embeddings:
            return self.embedding_weight_dtype
        return self.lm_head_dtype or self.dtype

    @property
    def lm_head_matmul_dtype(self) -> str:
        """The lm_head's matmul dtype: the other linears' (``matmul_dtype``, else the activation
        dtype) when its weights are stored like theirs; the activation dtype when the
        checkpoint kept it unquantised (a W8A8 model with a bf16 lm_head runs it in bf16)."""
        if self.lm_head_weight_dtype != self.dtype:
            return self.activation_dtype
        return self.matmul_dtype or self.activation_dtype

    @property
    def recurrent_state_dtype(self) -> str:
        """Dtype of SSM and linear-attention states (fp32 by default, as the reference kernels keep them)."""
        return self.state_dtype or "fp32"

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with fields changed (``cfg.replace(kv_dtype="fp8")``)."""
        return dataclasses.replace(self, **changes)

    def bindings(self, symbolic: ModelConfig) -> dict[sympy.Symbol, sympy.Expr]:
        """Map each symbol used by ``symbolic``'s fields to this config's value."""
        out: dict[sympy.Symbol, sympy.Expr] = {}
        for f in dataclasses.fields(self):
            sv, v = getattr(symbolic, f.name), getattr(self, f.name)
            if isinstance(sv, sympy.Symbol) and v is not None:
                out[sv] = v  # dimension fields hold sympy expressions after __post_init__
        return bind(out)

    @classmethod
    def symbolic(cls, name: str = "symbolic", *, like: ModelConfig | None = None) -> ModelConfig:
        """A config whose dimensions are the canonical symbols.

        With ``like``, keep its structure (MoE, MLA, MLP kind, tying, bias,
        dense-first count) and replace every dimension by its symbol.
        """
        base = like or cls("x", 1, 1, 1, 1, 1)
        dims = {f: dim(f) for f in _DIM_FIELDS}
        if base.is_moe:
            dims.update({f: dim(f) for f in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")})
            if base.num_shared_experts != 0:
                dims["num_shared_experts"] = dim("num_shared_experts")
        if base.is_mla:
            dims.update({f: dim(f) for f in _MLA_FIELDS})
            if base.q_lora_rank is not None:
                dims["q_lora_rank"] = dim("q_lora_rank")
        for f in SYMBOLIC_FIELDS:
            if getattr(base, f) is not None:
                dims[f] = dim(f)
        if base.layer_types is not None:
            dims["num_hidden_layers"] = len(base.layer_types)
        return dataclasses.replace(base, name=name, source="symbolic", **dims)
