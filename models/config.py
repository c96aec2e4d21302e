"""``ModelConfig``: the shape of a decoder-only Transformer, as shared fields plus the layer
plug-ins' typed specs nested in it.

Fields use Hugging Face names and may be numbers or sympy symbols (or a
mix), so one config type serves catalog models, user configs and fully
symbolic derivations. Covered families:

* dense decoders with MHA / GQA / MQA attention, a SwiGLU (gated) or GELU
  MLP, RMSNorm or LayerNorm, tied or untied embeddings, optional q/k/v bias,
  optional per-head q/k norms (Qwen3), RoPE;
* Mixture-of-Experts: routed experts with top-k, shared experts, dense-first
  layers (``first_k_dense_replace``), a router bias;
* DeepSeek-style Multi-head Latent Attention (MLA): ``q_lora_rank``,
  ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``;
* the other mixers of :mod:`models.mixers` (sliding, chunked, Mamba-1/2, the gated delta net ...).

Structure. ModelConfig's own fields are what every layer kind shares: the widths and counts
(``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``,
``head_dim``, ``intermediate_size``, ``vocab_size``), the norm and MLP activation, embedding
tying and head bias, the layer pattern (``layer_types``), MTP layers, the dtypes, the source and
the context limit. What one plug-in alone reads lives in its spec (a frozen
:class:`~models.specs.ConfigSpec` defined and registered in the plug-in's module), held in the
``specs`` mapping (slot -> spec, filled from the registry: :func:`models.specs.spec_classes`)
and read typed with ``cfg.spec(MoESpec)`` (None when absent) or ``cfg.need(MoESpec)``. A new
plug-in's spec needs nothing here: its fields are keywords of the constructor and
:meth:`ModelConfig.replace`, symbols of :meth:`ModelConfig.symbolic`, as soon as it registers.
The built-in specs also keep a typed attribute each:

=====================  ==========================  =============================================
attribute              spec (module)               fields
=====================  ==========================  =============================================
``attention``          AttentionSpec (softmax)     biases, q/k norms, rope, sinks, output gate,
                                                   ``sliding_window``, ``attention_chunk_size``
``mla`` or None        MLASpec (mla)               latent ranks and head dims
``dsa`` or None        DSASpec (dsa)               the sparse-attention indexer's heads, top-k
``moe`` or None        MoESpec (mlp_moe)           experts, top-k, widths, shared experts,
                                                   dense-first layers, router bias, capacity
``ssm`` or None        SSMSpec (recurrent)         Mamba-1 and Mamba-2 state-space fields
``linear_attention``   LinearAttentionSpec         gated delta net heads, dims, conv, chunk
or None                (linear_attention)
=====================  ==========================  =============================================

Spec fields keep their flat (Hugging Face) names, so a dimension symbol still names the field
it binds to (``dim("num_experts")`` binds ``cfg.moe.num_experts``). The constructor and
:meth:`ModelConfig.replace` take every registered spec field flat
(``ModelConfig(..., num_experts=8, ...)``, ``cfg.replace(sliding_window=512)``) and build or
update the spec, a whole spec by its slot (``moe=MoESpec(...)``, ``moe=None`` drops it), or
the mapping (``specs={...}``); readers use the specs (``cfg.moe.num_experts``,
``cfg.need(MoESpec)`` where the layer cannot run without one). No flat read attribute is kept.
``mlp_bias`` and ``mlp`` stay shared because the dense MLP and the experts both read them.

``head_dim`` is a field of its own: it is *not* always ``hidden/heads``
(Qwen3-32B: 5120/64 = 80 but head_dim 128).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

import sympy

from costmodel.cost import bind
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.symbols import check_dim, dim

from .fields import ModelConfigError, UnknownFieldError
from .layers import LayerSpec, check_layers, layer_groups
from .mixers.dsa import DSASpec
from .mixers.linear_attention import LinearAttentionSpec
from .mixers.mla import MLASpec
from .mixers.mlp_moe import MoESpec
from .mixers.recurrent import SSMSpec
from .mixers.softmax import AttentionSpec
from .specs import ConfigSpec, Dim, SpecMap, flat_fields, spec_classes

__all__ = [
    "ModelConfig",
    "ModelConfigError",
    "MLPKind",
    "NormKind",
    "Dim",
    "SpecMap",
    "AttentionSpec",
    "MLASpec",
    "DSASpec",
    "MoESpec",
    "SSMSpec",
    "LinearAttentionSpec",
]


#: the MLP kinds: gated SiLU (``down(silu(gate x) * up x)``), gated GELU (GeGLU, Gemma), or a
#: plain MLP with GELU or squared ReLU (``relu(x)**2``, Nemotron-H)
MLPKind = Literal["swiglu", "geglu", "gelu", "relu2"]
#: the norm kinds
NormKind = Literal["rmsnorm", "layernorm"]
_MLPS: tuple[str, ...] = get_args(MLPKind)
_NORMS: tuple[str, ...] = get_args(NormKind)
#: dtypes the catalog registers for index, mask and complex tensors, none a model's storage or
#: compute format (``--weight-dtype bool`` once priced a 1-byte-per-weight model)
NOT_A_TENSOR_FORMAT = frozenset({"bool", "complex64", "complex128", "int32", "int64", "uint8"})


def model_dtype_name(value: Any) -> str:
    """The canonical name of a dtype a model's tensors may be stored or computed in (``bf16``,
    ``fp8_e4m3``, ``int4_g128`` ...), or a :class:`ModelConfigError` (unprefixed: the caller names
    the field or the option) for an unknown name, listing the formats a model takes, or for an
    index, mask or complex type (:data:`NOT_A_TENSOR_FORMAT`).

    Parameters
    ----------
    value : str or DType
        The dtype's name or alias.

    Returns
    -------
    str
    """
    from costmodel.dtypes import DTYPES

    try:
        name = get_dtype(value).name
    except CostModelError as exc:
        if str(exc).startswith("unknown dtype") and isinstance(value, str):
            allowed = ", ".join(sorted(set(DTYPES) - NOT_A_TENSOR_FORMAT))
            raise ModelConfigError(
                f"unknown dtype {value[:80]!r}; allowed: {allowed}, or group-quantised "
                "int<b>_g<G>[_asym] (e.g. int4_g128)"
            ) from None
        raise ModelConfigError(str(exc)) from None
    if name in NOT_A_TENSOR_FORMAT:  # registered for index and mask tensors
        raise ModelConfigError(
            f"{name} is not a format weights, caches or activations are stored or computed in "
            "(floats, fp8, int8, int4, nvfp4, mxfp4, mxfp8, nf4 or group-quantised int<b>_g<G>)"
        )
    return name


_DIM_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)


_S = TypeVar("_S", bound=ConfigSpec)
#: the built-in plug-ins' slots, in the order their attributes were declared before the mapping
_BUILTIN_SLOTS = ("attention", "mla", "dsa", "moe", "ssm", "linear_attention")


@dataclass(frozen=True, init=False, repr=False)
class ModelConfig:
    """A decoder-only Transformer's shape (see module doc): shared fields and nested plug-in specs."""

    name: str
    hidden_size: Dim
    num_hidden_layers: Dim
    num_attention_heads: Dim
    intermediate_size: Dim
    vocab_size: Dim
    num_key_value_heads: Dim | None = None
    head_dim: Dim | None = None
    mlp: MLPKind = "swiglu"  # the activation of the dense MLP and of the experts
    norm: NormKind = "rmsnorm"
    tie_word_embeddings: bool = False
    # attention and MLP read one shared norm of the layer input and add to the residual together
    # (GPT-J's parallel block: Phi-1/2, Falcon-7B, Cohere); a layer then has one norm, not two
    parallel_block: bool = False
    lm_head_bias: bool = False  # a bias on the lm_head (Phi-1/2)
    sandwich_norm: bool = False  # norms on the mixer's and the MLP's outputs too (Gemma 2/3)
    mlp_bias: bool = False  # biases on the MLP / expert projections (gpt-oss experts)
    # the per-layer pattern (models.layers): None is uniform (gqa or mla everywhere); mixer
    # names or LayerSpecs otherwise
    layer_types: tuple[LayerSpec, ...] | None = None
    # the plug-ins' typed specs by slot (module doc); a slot absent: no layer of that kind
    specs: SpecMap = dataclasses.field(default_factory=SpecMap)
    # multi-token-prediction layers kept with the model (DeepSeek-V3's MTP module)
    mtp_layers: int = 0
    # the MTP modules are loaded and run: speculative decoding that drafts with them sets it; a
    # plain run neither loads nor runs them (vLLM's DeepseekV2ForCausalLM.load_weights skips the
    # "spec decode layers", loaded only by its DeepSeekMTP draft model; SGLang's likewise), so it
    # builds and weighs the model without them while the parameter count keeps the checkpoint's
    mtp_active: bool = False
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
    # FP8 block-quantised weights: the [rows, columns] each FP32 scale covers (DeepSeek-V3's
    # weight_block_size [128, 128]; 0.002 bits per weight, not priced: named in reports); None:
    # per-tensor or per-channel scales, or not FP8
    weight_scale_block: tuple[int, int] | None = None
    source: str = ""
    # the longest sequence the model supports (max_position_embeddings with rope
    # scaling applied, models.context); None: not stated
    max_context: int | None = None

    def __init__(
        self,
        name: str,
        hidden_size: Any,
        num_hidden_layers: Any,
        num_attention_heads: Any,
        intermediate_size: Any,
        vocab_size: Any,
        **fields: Any,
    ) -> None:
        """Shared fields, ``specs`` and specs by slot (``moe=MoESpec(...)``, None drops it) by
        keyword; a spec's fields may also be given flat (``num_experts=8`` builds or updates
        ``moe``), as Hugging Face readers and callers do (in that order: mapping, slots, flat).

        A spec is built from flat keywords only when one of them differs from its default, so a
        dense model given ``num_shared_experts=0`` has no MoE spec.
        """
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        given = dict(
            name=name,
            hidden_size=hidden_size,
            num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            vocab_size=vocab_size,
        )
        classes, flat_names = spec_classes(), flat_fields()
        flat: dict[str, dict[str, Any]] = {}
        slots: dict[str, Any] = {}
        for k, v in fields.items():
            if k in _own():
                given[k] = v
            elif k in classes:
                slots[k] = v
            elif k in flat_names:
                flat.setdefault(flat_names[k], {})[k] = v
            else:
                import difflib

                names = sorted({*_own(), *classes, *flat_names} - {"specs"})
                near = difflib.get_close_matches(str(k), names, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise UnknownFieldError(
                    f"ModelConfig got an unexpected keyword argument {k!r}{hint}; its fields: "
                    + ", ".join(names)
                )
        for f in dataclasses.fields(self):
            if f.name != "specs":
                set_(f.name, given.get(f.name, f.default))
        specs: dict[str, Any] = dict(given.get("specs") or {})
        for slot, spec in slots.items():
            specs[slot] = spec
        for slot, sub in flat.items():
            spec = specs.get(slot)
            if spec is None and classes[slot].always:
                spec = classes[slot]()
            if spec is not None:
                specs[slot] = dataclasses.replace(spec, **sub)
            elif any(v != _spec_defaults(slot)[k] for k, v in sub.items()):
                specs[slot] = classes[slot](**sub)
        for slot, cls in classes.items():
            if cls.always and specs.get(slot) is None:
                specs[slot] = cls()  # every config carries it, at its defaults
        set_("specs", _spec_map(name, {k: v for k, v in specs.items() if v is not None}))
        self.__post_init__()

    def __hash__(self) -> int:
        """Hash of the fields, computed once (configs key the compiled-step cache on every call)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        """The fields as a dataclass prints them, with the specs in their slots: the built-in ones
        in place of ``specs`` (``attention=AttentionSpec(...), mla=None, ...``, as before the
        mapping, so keys built from it, such as the mixed-step card's, do not move), then any other
        registered plug-in's spec the config holds."""
        parts = []
        for f in dataclasses.fields(self):
            if f.name != "specs":
                parts.append(f"{f.name}={getattr(self, f.name)!r}")
                continue
            parts += [f"{slot}={self.specs.get(slot)!r}" for slot in _BUILTIN_SLOTS]
            parts += [f"{slot}={spec!r}" for slot, spec in self.specs.items() if slot not in _BUILTIN_SLOTS]
        return f"ModelConfig({', '.join(parts)})"

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
                    set_(f, model_dtype_name(v))
                except CostModelError as exc:
                    raise ModelConfigError(f"{self.name}.{f}: {exc}") from None
        classes = spec_classes()
        for slot, spec in self.specs.items():
            if not isinstance(spec, classes[slot]):
                raise ModelConfigError(
                    f"{self.name}.{slot} must be a {classes[slot].__name__} or None, got {spec!r}"
                )
        try:
            set_("specs", SpecMap({slot: spec.normalised(self.name) for slot, spec in self.specs.items()}))
        except CostModelError as exc:
            raise ModelConfigError(str(exc)) from None
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
    def spec(self, kind: type[_S]) -> _S | None:
        """The spec of type ``kind`` this config holds (``cfg.spec(MoESpec)``), or None."""
        spec = self.specs.get(kind.slot)
        return spec if isinstance(spec, kind) else None

    def need(self, kind: type[_S]) -> _S:
        """The spec of type ``kind`` (``cfg.need(MoESpec)``), for a layer that cannot run
        without it (a clear error when the config has none)."""
        spec = self.spec(kind)
        if spec is None:
            raise ModelConfigError(f"{self.name}: {kind.label} layers need {kind.slot} (a {kind.__name__})")
        return spec

    # the built-in plug-ins' specs as typed attributes (``cfg.moe``); every plug-in's is
    # ``cfg.spec(Kind)``
    @property
    def attention(self) -> AttentionSpec:
        """The softmax-attention options (:class:`~models.mixers.softmax.AttentionSpec`; always set)."""
        return self.need(AttentionSpec)

    @property
    def mla(self) -> MLASpec | None:
        """The latent-attention ranks (:class:`~models.mixers.mla.MLASpec`), or None."""
        return self.spec(MLASpec)

    @property
    def dsa(self) -> DSASpec | None:
        """The sparse-attention indexer (:class:`~models.mixers.dsa.DSASpec`), or None."""
        return self.spec(DSASpec)

    @property
    def moe(self) -> MoESpec | None:
        """The experts (:class:`~models.mixers.mlp_moe.MoESpec`), or None."""
        return self.spec(MoESpec)

    @property
    def ssm(self) -> SSMSpec | None:
        """The state-space fields (:class:`~models.mixers.recurrent.SSMSpec`), or None."""
        return self.spec(SSMSpec)

    @property
    def linear_attention(self) -> LinearAttentionSpec | None:
        """The gated delta net (:class:`~models.mixers.linear_attention.LinearAttentionSpec`), or None."""
        return self.spec(LinearAttentionSpec)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

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
        """A copy with fields changed (``cfg.replace(kv_dtype="fp8")``); a nested spec's fields
        may be given flat (``cfg.replace(sliding_window=512)`` updates ``attention``)."""
        return dataclasses.replace(self, **changes)

    def leaves(self) -> list[tuple[str, Any]]:
        """``(field, value)`` of every shared field and every field of the nested specs (flat names)."""
        out = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "specs"]
        for v in self.specs.values():
            out.extend((g.name, getattr(v, g.name)) for g in dataclasses.fields(v))
        return out

    def bindings(self, symbolic: ModelConfig) -> dict[sympy.Symbol, sympy.Expr]:
        """Map each symbol used by ``symbolic``'s fields (nested specs included) to this config's value."""
        out: dict[sympy.Symbol, sympy.Expr] = {}
        mine = dict(self.leaves())
        for f, sv in symbolic.leaves():
            v = mine.get(f)
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
        for spec in base.specs.values():
            for f in spec.symbolic_dims:
                v = getattr(spec, f)
                if v is not None and v != 0:
                    dims[f] = dim(f)
        if base.layer_types is not None:
            dims["num_hidden_layers"] = len(base.layer_types)
        return dataclasses.replace(base, name=name, source="symbolic", **dims)


@functools.cache
def _own() -> frozenset[str]:
    """ModelConfig's own fields (``specs`` included), keywords its constructor takes besides slots and flat ones."""
    return frozenset(f.name for f in dataclasses.fields(ModelConfig))


@functools.cache
def _spec_defaults(slot: str) -> dict[str, Any]:
    """A spec's field defaults, to tell a flat keyword that sets something from one that restates a default."""
    return {f.name: f.default for f in dataclasses.fields(spec_classes()[slot])}


def _spec_map(model: str, specs: dict[str, Any]) -> SpecMap:
    """``specs`` as a :class:`SpecMap` (an unknown slot refused as a ModelConfigError)."""
    try:
        return SpecMap(specs)
    except CostModelError as exc:
        raise ModelConfigError(f"{model}: {exc}") from None
