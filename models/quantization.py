"""A Hugging Face ``config.json``'s ``torch_dtype`` and ``quantization_config``, read into dtypes.

:func:`float_dtype` maps ``torch_dtype`` (or ``dtype``, its name since transformers
4.56) onto a float format: ``float32``, ``float16``, ``bfloat16``, ``float64``,
``float8_e4m3fn``, ``float8_e5m2``; anything else is refused (never a silent bf16).

:func:`quantized_fields` maps a ``quantization_config`` onto the config's dtype
fields. The weights it names are the linear layers of the decoder blocks; the
input embedding (an ``nn.Embedding``, which none of these methods converts) and
the lm_head stay at the float dtype unless the config says otherwise (GPTQ's
``lm_head: true``), as do the norms' weight vectors and the activations:

=====================  ==========================================================================
``gptq``               ``bits``, ``group_size`` (-1: per channel), ``sym``: ``int<b>_g<G>``, plus
                       a ``b``-bit zero per group when ``sym`` is false (:mod:`costmodel.dtypes`);
                       ``lm_head: true`` quantises the head too
``awq``                ``bits``/``w_bit``, ``group_size``/``q_group_size``, ``zero_point``
                       (default true: asymmetric, ``int4_g128_asym`` = 4.15625 bits)
``fp8``, ``fbgemm_fp8``  FP8 E4M3 weights, W8A8 (dynamic FP8 activations: the matmul runs on the
                       FP8 roof); a ``weight_block_size`` [128, 128] adds one FP32 scale per
                       16384 weights (0.002 bits, ignored)
``compressed-tensors`` ``config_groups``' ``weights`` (``num_bits``, ``type`` int/float,
                       ``strategy``, ``group_size``, ``symmetric``) and ``input_activations``
                       (W8A8 FP8 or INT8, NVFP4 W4A4); ``kv_cache_scheme`` FP8 sets the KV
                       dtype; ``ignore`` lists the unconverted modules (``lm_head``)
``modelopt``           ``quant_algo`` ``FP8`` (W8A8) or ``NVFP4`` (W4A4); ``kv_cache_quant_algo``
``mxfp4``              MXFP4 (4.25 bits); on a MoE model only the routed experts (gpt-oss:
                       attention, router, embedding and head in ``modules_to_not_convert``)
``bitsandbytes``       ``load_in_4bit``: NF4/FP4 in blocks of 64 with an FP32 absmax, 4.5 bits,
                       4.127 with ``bnb_4bit_use_double_quant``; ``load_in_8bit``: LLM.int8()
                       int8 weights and int8 matmuls (one FP32 scale per row, O(1/K), ignored)
=====================  ==========================================================================

``modules_to_not_convert`` (and bitsandbytes' ``llm_int8_skip_modules``) may name
the head, the embedding, MoE routers and vision towers (none of them decoder
linears); a list that leaves other decoder linears unconverted (partial
quantisation) cannot be expressed and is refused, as is any other
``quant_method``: both point to ``--weight-dtype``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

from costmodel.dtypes import get_dtype, group_quantised
from costmodel.errors import CostModelError
from costmodel.notes import ASSUMED_FLOAT

from .config import ModelConfig, ModelConfigError
from .fields import INT_MAX, bool_field, first_field, int_field
from .layers import layer_groups
from .mixers import get_mixer, get_mlp

__all__ = [
    "ASSUMED_FLOAT",
    "assumed_float_note",
    "float_dtype",
    "quantized_fields",
    "check_group_size",
    "GPTQ_BITS",
    "AWQ_BITS",
    "native_matmul",
    "weights_in",
    "weight_format_notes",
    "NATIVE_MATMUL_FORMATS",
    "QUANT_METHODS",
    "FLOAT_TORCH_DTYPES",
]

#: ``torch_dtype`` names of the float formats a checkpoint's unquantised weights take
FLOAT_TORCH_DTYPES = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
}

QUANT_METHODS = (
    "gptq",
    "awq",
    "fp8",
    "fbgemm_fp8",
    "compressed-tensors",
    "modelopt",
    "mxfp4",
    "bitsandbytes",
)

_POINTER = (
    "remove quantization_config from the file and give the weights' dtype with --weight-dtype "
    "(e.g. int4_g128, fp8, nvfp4; --matmul-dtype for W8A8)"
)

#: module-name parts that are not decoder linears: head, embedding, MoE routers (``mlp.gate``)
_NOT_DECODER = {"lm_head", "gate", "router", "wte", "wpe", "shared_expert_gate"}
#: ... and what contains these: embeddings, vision towers and their projectors
_NOT_DECODER_IN = ("embed", "vision", "visual", "projector")
#: module-name parts of the attention block (kept unconverted in gpt-oss: only its experts are MXFP4)
_ATTENTION = ("self_attn", "attn", "attention")


def assumed_float_note(data: Mapping[str, Any], name: str) -> str | None:
    """The note a parsed config gets when it states no float dtype, or None when it states one.

    A ``config.json`` states it in ``torch_dtype`` (or ``dtype``), at the top or in a multimodal
    ``text_config``; a layer file (``layer_types`` and no ``model_type``) in ``dtype``. Neither
    given (or null), its unquantised weights and activations are read as bf16
    (:func:`float_dtype`), which the loader (:func:`models.hf.config_from_hf_dict`,
    :func:`models.layer_file.config_from_layer_file`) says once the config is built
    (:func:`costmodel.notes.say`, topic :data:`ASSUMED_FLOAT`): a file it refuses gets its
    one-line error alone.

    Parameters
    ----------
    data : Mapping
        The parsed JSON object.
    name : str
        The model's name, as the loader gives it (the note starts with it).

    Returns
    -------
    str or None
        One line, or None when a dtype is stated.

    >>> assumed_float_note({"model_type": "llama"}, "m")
    'm: the file states no torch_dtype: its unquantised weights and activations are taken as bf16 (give --weight-dtype, or ModelConfig.replace(dtype=...), for another)'
    >>> assumed_float_note({"model_type": "llama", "torch_dtype": "float16"}, "m") is None
    True
    """
    inner = data.get("text_config")
    for d in (data, inner if isinstance(inner, Mapping) else {}):
        if d.get("torch_dtype") is not None or d.get("dtype") is not None:
            return None
    field = "dtype" if "layer_types" in data and "model_type" not in data else "torch_dtype"
    return (
        f"{name}: the file states no {field}: its unquantised weights and activations are taken as "
        "bf16 (give --weight-dtype, or ModelConfig.replace(dtype=...), for another)"
    )


def float_dtype(cfg: Mapping[str, Any], name: str) -> str:
    """The unquantised weights' dtype: ``torch_dtype`` (or ``dtype``), bf16 when neither is given
    (which the loader says once the config is built: :func:`assumed_float_note`).

    Parameters
    ----------
    cfg : Mapping
        A parsed ``config.json`` (a multimodal one's ``text_config`` already merged).
    name : str
        The model's name, for the note and the errors.

    Returns
    -------
    str
        A float format's name: ``fp32``, ``fp16``, ``bf16``, ``fp64``, ``fp8_e4m3``, ``fp8_e5m2``.

    Raises
    ------
    ModelConfigError
        When ``torch_dtype`` and ``dtype`` disagree, or name a format this engine does not know.
    """
    raw = cfg.get("torch_dtype", cfg.get("dtype"))
    both = (cfg.get("torch_dtype"), cfg.get("dtype"))
    if None not in both and str(both[0]).removeprefix("torch.") != str(both[1]).removeprefix("torch."):
        raise ModelConfigError(
            f"{name}: torch_dtype {str(both[0])[:40]!r} and dtype {str(both[1])[:40]!r} disagree (dtype is "
            "torch_dtype's name since transformers 4.56): keep the one the checkpoint was saved in"
        )
    if raw is None:
        return "bf16"  # said by the loader once the config is built (assumed_float_note)
    text = str(raw).removeprefix("torch.")
    if text not in FLOAT_TORCH_DTYPES:
        raise ModelConfigError(
            f"{name}: torch_dtype {str(raw)[:60]!r} is not a float format this engine knows; "
            f"allowed: {', '.join(FLOAT_TORCH_DTYPES)}; write one of them in the file (the "
            "activations' dtype) and give the weights' with --weight-dtype"
        )
    return FLOAT_TORCH_DTYPES[text]


#: GPTQ's packed bit widths: AutoGPTQ's and GPTQModel's ``QuantLinear`` refuse others ("Only 2,3,4,8
#: bits are supported."), as does vLLM's GPTQConfig ("only 2/3/4/8-bit weight quantization is supported")
GPTQ_BITS = (2, 3, 4, 8)
#: AWQ's: AutoAWQ's ``WQLinear_GEMM`` (awq/modules/linear/gemm.py) packs 4 bits only ("Only 4-bit are
#: supported for now."), as vLLM's AWQConfig ("only 4-bit weight quantization is supported for AWQ")
AWQ_BITS = (4,)


def _int(q: Mapping[str, Any], keys: tuple[str, ...], name: str, default: Any = ..., *, lo: int = 0) -> Any:
    """The first of ``keys`` ``q`` states, an integer >= ``lo`` (errors name the quantization_config)."""
    return first_field(q, partial(int_field, lo=lo), f"{name}: quantization_config", keys, default)


def _bool(q: Mapping[str, Any], key: str, name: str, default: bool) -> bool:
    """``q[key]``, a JSON boolean (errors name the quantization_config)."""
    return bool(bool_field(q, key, f"{name}: quantization_config", default))


def _bits(
    q: Mapping[str, Any],
    keys: tuple[str, ...],
    name: str,
    method: str,
    allowed: tuple[int, ...],
    default: Any = ...,
) -> int:
    """The weights' bit width, one of what the method's packers support (``allowed``)."""
    bits = _int(q, keys, name, default)
    if bits not in allowed:
        packers = "AutoGPTQ / GPTQModel" if method == "gptq" else "AutoAWQ"
        raise ModelConfigError(
            f"{name}: quantization_config.{keys[0]} {bits} is not packed by {method.upper()}; allowed: "
            f"{', '.join(map(str, allowed))} bits (what {packers} pack); {_POINTER}"
        )
    return int(bits)


def _group_size(q: Mapping[str, Any], keys: tuple[str, ...], name: str, default: Any = ...) -> int:
    """``group_size``: -1 (one scale per output channel) or a positive group; whether it divides
    every quantised layer's input width is :func:`check_group_size`'s."""
    group = _int(q, keys, name, default, lo=-1)
    if group == 0:
        raise ModelConfigError(
            f"{name}: quantization_config.{keys[0]} 0 is not a group size; allowed: -1 (per channel) "
            "or a divisor of every quantised layer's input width"
        )
    return int(group)


def _fp8_blocks(q: Mapping[str, Any], name: str) -> tuple[int, int] | None:
    """``weight_block_size`` (absent: per-tensor or per-channel scales, None): two positive whole
    numbers, the ``[rows, columns]`` each FP32 scale covers (DeepSeek-V3: ``[128, 128]``), returned
    for the report to name; and ``activation_scheme`` ``dynamic`` or ``static`` (both run the
    matmul on the FP8 roof)."""
    blocks = q.get("weight_block_size")
    if blocks is not None and not (
        isinstance(blocks, list)
        and len(blocks) == 2
        and all(type(b) is int and 1 <= b <= INT_MAX for b in blocks)
    ):
        raise ModelConfigError(
            f"{name}: quantization_config.weight_block_size must be two positive whole numbers "
            f"[rows, columns], got {blocks!r:.60}"
        )
    scheme = q.get("activation_scheme")
    if scheme is not None and scheme not in ("dynamic", "static"):
        raise ModelConfigError(
            f"{name}: quantization_config.activation_scheme {scheme!r:.40} is not read; allowed: dynamic, static"
        )
    return None if blocks is None else (int(blocks[0]), int(blocks[1]))


def _grouped(bits: int, group: int, asym: bool, name: str) -> str:
    try:
        return group_quantised(bits, group, asymmetric=asym).name
    except CostModelError as exc:
        raise ModelConfigError(f"{name}: quantization_config: {exc}; {_POINTER}") from None


def _skipped(q: Mapping[str, Any], keys: tuple[str, ...], name: str) -> list[str]:
    out: list[str] = []
    for k in keys:
        v = q.get(k)
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(m, str) for m in v):
            raise ModelConfigError(f"{name}: quantization_config.{k} must be a list of module names")
        out += v
    return out


def _parts(module: str) -> list[str]:
    return [p for p in module.replace("re:", "").replace("*", ".").split(".") if p]


def _experts_only(skipped: list[str], is_moe: bool, name: str, method: str) -> bool:
    """Whether the unconverted modules leave only the routed experts quantised (refused if partial)."""
    attention = False
    for m in skipped:
        parts = _parts(m)
        if any(p in _NOT_DECODER or any(t in p for t in _NOT_DECODER_IN) for p in parts):
            continue
        if any(p in _ATTENTION for p in parts) and is_moe:
            attention = True
            continue
        raise ModelConfigError(
            f"{name}: quantization_config ({method}) leaves module {m[:80]!r} unconverted: partial "
            f"quantisation of the decoder layers is not modelled; {_POINTER}"
        )
    return attention


def _compressed_tensors(q: Mapping[str, Any], name: str) -> tuple[str, str | None, str | None]:
    """(weight dtype, matmul dtype, KV dtype) of a compressed-tensors config (one scheme for all groups)."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise ModelConfigError(f"{name}: compressed-tensors quantization_config needs config_groups")
    schemes = set()
    for g in groups.values():
        w = g.get("weights") if isinstance(g, Mapping) else None
        a = g.get("input_activations") if isinstance(g, Mapping) else None
        if not isinstance(w, Mapping):
            raise ModelConfigError(f"{name}: compressed-tensors config group without 'weights': {g!r:.120}")
        bits, kind = _int(w, ("num_bits",), name), str(w.get("type", "int"))
        strategy, group = w.get("strategy", "tensor"), w.get("group_size")
        if kind == "float" and bits == 8:
            wd = "fp8_e4m3"
        elif kind == "float" and bits == 4 and group == 16:
            wd = "nvfp4"  # E2M1 with one FP8 scale per 16 (NVFP4)
        elif kind == "int":
            size = _group_size(w, ("group_size",), name) if strategy == "group" else -1  # else per channel
            wd = _grouped(bits, size, not _bool(w, "symmetric", name, True), name)
        else:
            raise ModelConfigError(
                f"{name}: compressed-tensors weights of {bits}-bit {kind!r} (group {group}) are not read; "
                f"{_POINTER}"
            )
        md = None
        if isinstance(a, Mapping):
            ab, ak = _int(a, ("num_bits",), name), str(a.get("type", "int"))
            md = {("float", 8): "fp8_e4m3", ("int", 8): "int8", ("float", 4): "nvfp4"}.get((ak, ab))
            if md is None:
                raise ModelConfigError(
                    f"{name}: compressed-tensors activations of {ab}-bit {ak!r} are not read; {_POINTER}"
                )
        schemes.add((wd, md))
    if len(schemes) != 1:
        raise ModelConfigError(
            f"{name}: compressed-tensors config_groups mix schemes {sorted(map(str, schemes))}: "
            f"per-layer dtypes are not modelled; {_POINTER}"
        )
    kv = q.get("kv_cache_scheme")
    kvd = None
    if isinstance(kv, Mapping):
        if (kv.get("type"), kv.get("num_bits")) != ("float", 8):
            raise ModelConfigError(
                f"{name}: compressed-tensors kv_cache_scheme {dict(kv)!r:.120} is not read"
            )
        kvd = "fp8_e4m3"
    wd, md = schemes.pop()
    return wd, md, kvd


def quantized_fields(
    cfg: Mapping[str, Any], name: str, base: str, *, is_moe: bool, tied: bool
) -> dict[str, Any]:
    """ModelConfig dtype fields from ``quantization_config`` (module doc); ``{}`` without one.

    ``base`` is the float dtype (:func:`float_dtype`): the activations', the
    embedding's and, unless quantised too, the lm_head's.
    """
    q = cfg.get("quantization_config")
    if q is None:
        return {}
    if not isinstance(q, Mapping):
        raise ModelConfigError(f"{name}: quantization_config must be a JSON object")
    method = q.get("quant_method")
    kv: str | None = None
    matmul: str | None = None
    block: tuple[int, int] | None = None
    head_quantised = False
    skipped = _skipped(q, ("modules_to_not_convert", "llm_int8_skip_modules", "ignore"), name)
    if method == "gptq":
        bits = _bits(q, ("bits",), name, "gptq", GPTQ_BITS)
        group = _group_size(q, ("group_size",), name, 128)
        weight = _grouped(bits, group, not _bool(q, "sym", name, True), name)
        head_quantised = _bool(q, "lm_head", name, False)
    elif method == "awq":
        bits = _bits(q, ("bits", "w_bit"), name, "awq", AWQ_BITS, 4)
        group = _group_size(q, ("group_size", "q_group_size"), name, 128)
        weight = _grouped(bits, group, _bool(q, "zero_point", name, True), name)
    elif method in ("fp8", "fbgemm_fp8"):
        fmt = q.get("fmt", "e4m3")
        if fmt not in ("e4m3", "float8_e4m3fn"):
            raise ModelConfigError(
                f"{name}: fp8 quantization_config fmt {fmt!r:.40} is not read; allowed: e4m3; {_POINTER}"
            )
        block = _fp8_blocks(q, name)
        weight, matmul = "fp8_e4m3", "fp8_e4m3"
    elif method == "compressed-tensors":
        weight, matmul, kv = _compressed_tensors(q, name)
    elif method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo not in ("FP8", "NVFP4"):
            raise ModelConfigError(
                f"{name}: modelopt quant_algo {algo!r} is not read; allowed FP8, NVFP4; {_POINTER}"
            )
        weight = matmul = "fp8_e4m3" if algo == "FP8" else "nvfp4"
        if str(q.get("kv_cache_quant_algo") or "").upper() == "FP8":
            kv = "fp8_e4m3"
    elif method == "mxfp4":
        weight = "mxfp4"
    elif method == "bitsandbytes":
        four, eight = _bool(q, "load_in_4bit", name, False), _bool(q, "load_in_8bit", name, False)
        if four and eight:  # transformers' BitsAndBytesConfig refuses both too
            raise ModelConfigError(
                f"{name}: bitsandbytes quantization_config sets both load_in_4bit and load_in_8bit; one only"
            )
        if four:
            double = _bool(q, "bnb_4bit_use_double_quant", name, False)
            weight = "nf4_dq" if double else "nf4"  # FP4 is blocked the same way
        elif eight:
            weight = matmul = "int8"
        else:
            raise ModelConfigError(
                f"{name}: bitsandbytes quantization_config sets neither load_in_4bit nor load_in_8bit"
            )
    else:
        raise ModelConfigError(
            f"{name}: quantization_config.quant_method {str(method)[:60]!r} is not read; "
            f"known: {', '.join(QUANT_METHODS)}; {_POINTER}"
        )
    experts_only = _experts_only(skipped, is_moe, name, str(method)) or (method == "mxfp4" and is_moe)
    head_quantised = head_quantised and not any("lm_head" in m for m in skipped)
    out: dict[str, Any] = {
        "act_dtype": base if get_dtype(base).bits >= 16 else "bf16",
        "embedding_dtype": base,
    }
    if experts_only:
        out.update(dtype=base, expert_dtype=weight)  # the experts' matmuls keep the activation dtype
    else:
        out.update(dtype=weight, lm_head_dtype=weight if (head_quantised and not tied) else base)
        if matmul is not None:
            out["matmul_dtype"] = matmul
    if kv is not None:
        out["kv_dtype"] = kv
    if block is not None:
        out["weight_scale_block"] = block
    return out


def _grouped_size(dtype: str) -> int | None:
    """G of an ``int<b>_g<G>`` dtype (integer weights with one scale per G inputs), else None."""
    d = get_dtype(dtype)
    return d.block_size if d.name.startswith("int") and "_g" in d.name else None


def check_group_size(cfg: ModelConfig) -> None:
    """Refuse integer weights in groups of ``G`` (GPTQ, AWQ, compressed-tensors' ``group``
    strategy: ``int<b>_g<G>``) when ``G`` does not divide the input width ``K`` of every
    quantised linear: a group is ``G`` consecutive inputs of one output channel, and the
    packers store whole groups, ``K / G`` scales per channel. AutoAWQ's ``WQLinear_GEMM``
    asserts ``in_features % group_size == 0``; vLLM's GPTQ and AWQ layers refuse a width that
    is not a multiple ("The input size is not aligned with the quantized weight shape").
    ``group_size: -1`` (one scale per channel) fits every width.

    The widths are each layer plug-in's :meth:`~models.mixers.LayerPlugin.linear_inputs` over the
    config's layer kinds (only the routed experts' when only they are quantised) and the
    lm_head's ``d`` when it is quantised too. Symbolic widths are not checked.

    Parameters
    ----------
    cfg : the model, as read from its config.json

    Raises
    ------
    ModelConfigError
        naming the group size, the first linear it does not divide and what is allowed.
    """
    whole = _grouped_size(cfg.dtype)
    group = whole if whole is not None else _grouped_size(cfg.expert_weight_dtype)
    if group is None:
        return
    widths: dict[str, Any] = {}
    for g in layer_groups(cfg):
        for plugin in (get_mixer(g.spec.mixer), get_mlp(g.spec.mlp)):
            for module, k in plugin.linear_inputs(cfg).items():
                if whole is not None or module.startswith("experts."):
                    widths.setdefault(module, k)
    if not cfg.tie_word_embeddings and _grouped_size(cfg.lm_head_weight_dtype) is not None:
        widths["lm_head"] = cfg.hidden_size
    numbers = {m: int(k) for m, k in widths.items() if k is not None and getattr(k, "is_number", True)}
    bad = [(m, k) for m, k in numbers.items() if k % group]
    if bad:
        m, k = bad[0]
        common = math.gcd(*numbers.values())
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ModelConfigError(
            f"{cfg.name}: quantization_config group_size {group} does not divide {m}'s input width {k}{more}; "
            f"allowed: -1 (per channel) or a divisor of every quantised layer's input width (here of {common}): "
            "the GPTQ and AWQ packers store whole groups along the input (AutoGPTQ / GPTQModel, AutoAWQ)"
        )


#: weight formats whose checkpoints the serving engines run with activations in the same format
#: when the device has tensor cores for it (W8A8 FP8, W4A4 NVFP4; module doc of
#: :func:`native_matmul`)
NATIVE_MATMUL_FORMATS = ("fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4")


def weights_in(cfg: Any, dtype: str) -> tuple[Any, str | None]:
    """``cfg`` with every linear's weights in ``dtype`` (``--weight-dtype``, a search's
    ``--weight-dtypes``), the routed experts' included, and the note that says so where the
    checkpoint stored those in another format (gpt-oss's MXFP4 experts: its ``expert_dtype``,
    kept before, so a "bf16" gpt-oss-120b weighed its MXFP4 60.8 GiB instead of 116.8 G
    parameters x 2 B = 217.6 GiB), and where the activations (and a KV cache of no ``kv_dtype``
    of its own) change with them: they follow a float weight dtype
    (:attr:`models.config.ModelConfig.activation_dtype`), so fp32 weights double the KV read, said
    rather than silent; None where nothing else changed.

    Parameters
    ----------
    cfg : ModelConfig
        The model.
    dtype : str
        The weights' format, a model format's canonical name (:func:`models.config.model_dtype_name`).

    Returns
    -------
    tuple of (ModelConfig, str or None)
        The config, and the note (None: no expert format replaced).
    """
    parts = []
    if cfg.expert_dtype not in (None, dtype):
        parts.append(f"the routed experts too (the checkpoint's {cfg.expert_dtype})")
    out = cfg.replace(dtype=dtype, expert_dtype=None)
    if out.activation_dtype != cfg.activation_dtype:
        follow = f"activations in {out.activation_dtype} too (they follow a float weight dtype; were {cfg.activation_dtype})"
        if out.cache_dtype != cfg.cache_dtype:
            follow += f", and so the KV cache (was {cfg.cache_dtype}; --kv-dtype {cfg.cache_dtype} keeps it)"
        parts.append(follow)
    return out, (f"weights in {dtype}: " + "; ".join(parts)) if parts else None


def native_matmul(cfg: Any, devices: list[Any]) -> tuple[Any, str | None]:
    """``cfg`` with its linears' matmuls in their weights' format where the serving engines
    run them so, and the note that says it (None: ``cfg`` unchanged, nothing to say).

    A config whose weights are FP8 (E4M3/E5M2, MXFP8) or NVFP4 and that names no
    ``matmul_dtype`` is priced W8A8 / W4A4 on devices whose tensor cores have that format's
    roof: "Ada Lovelace, Hopper, and Blackwell GPUs are supported for W8A8. Turing/Ampere
    GPUs are supported for W8A16 (weight-only FP8) utilizing Marlin kernels"
    (https://docs.vllm.ai/en/v0.32.0/features/quantization/llm_compressor/fp8/; TensorRT-LLM
    and SGLang run FP8 checkpoints the same way). On a device without the roof the weights
    stay weight-only (W8A16 / W4A16), also said. ``devices``: the :class:`Hardware` the
    command prices on; when some have the roof and some do not, the choice differs per
    device and is refused (give ``--matmul-dtype``)."""
    if cfg.matmul_dtype is not None or not devices:
        return cfg, None
    w = get_dtype(cfg.dtype)
    if w.name not in NATIVE_MATMUL_FORMATS:
        return cfg, None
    has = [hw.peak("tensor", w.roof) is not None for hw in devices]
    names = ", ".join(hw.name for hw in devices)
    if all(has):
        a = "W8A8" if w.roof == "fp8" else "W4A4"
        block = ""
        if w.name.startswith("fp8") and cfg.weight_scale_block is None:
            # the corpus prices per-tensor and 128 x 128 block-scaled FP8 with different kernels
            # (vLLM's MoE: up to 2x apart at prefill shapes); only a checkpoint's config says which
            block = (
                "; per-tensor scales: a block-scaled FP8 checkpoint (DeepSeek's, Qwen's FP8 releases) "
                "is priced with its own kernels from its config.json"
            )
        return cfg.replace(matmul_dtype=w.name), (
            f"matmuls in {w.name} ({a}), as serving engines run {w.name} weights on {names} "
            f"(tensor cores with a {w.roof} roof); --matmul-dtype bf16 prices them weight-only{block}"
        )
    if not any(has):
        return cfg, (
            f"{w.name} weights are weight-only on {names} (no {w.roof} tensor roof): "
            f"the matmuls run in {cfg.activation_dtype}"
        )
    mixed = ", ".join(f"{hw.name} {'has' if h else 'lacks'} it" for hw, h in zip(devices, has, strict=True))
    raise CostModelError(
        f"{w.name} weights run W8A8/W4A4 only where the tensor cores have a {w.roof} roof ({mixed}): "
        "give --matmul-dtype (the weights' dtype, or bf16 for weight-only) to compare these devices"
    )


_FLOATS = ("fp32", "bf16", "fp16")


def weight_format_notes(cfg: ModelConfig) -> tuple[str, ...]:
    """One line naming how ``cfg``'s weights are stored and multiplied when any part is not the
    float dtype (a quantised checkpoint's ``quantization_config``, or ``--weight-dtype``), so that
    an answer says which format it priced; ``()`` for an all-float model.

    >>> from models.resolver import resolve_model
    >>> weight_format_notes(resolve_model("llama-3.1-8b"))
    ()
    >>> weight_format_notes(resolve_model("deepseek-v3"))
    ('deepseek-v3: weights priced as stored: linears fp8_e4m3 in 128x128 blocks (one FP32 scale each) (matmuls fp8_e4m3); embedding bf16; lm_head bf16',)
    """
    block = cfg.weight_scale_block
    parts = [
        f"linears {cfg.dtype}"
        + (f" in {block[0]}x{block[1]} blocks (one FP32 scale each)" if block else "")
        + (f" (matmuls {cfg.matmul_dtype})" if cfg.matmul_dtype else " (matmuls in the activations' dtype)")
    ]
    if cfg.expert_dtype and cfg.expert_dtype != cfg.dtype:
        parts.append(f"routed experts {cfg.expert_dtype}")
    parts.append(f"embedding {cfg.embedding_weight_dtype}")
    parts.append(f"lm_head {cfg.lm_head_weight_dtype}")
    quantised = (
        cfg.dtype not in _FLOATS
        or cfg.expert_weight_dtype not in _FLOATS
        or cfg.matmul_dtype not in (None, *_FLOATS)
    )
    if not quantised:
        return ()
    return (f"{cfg.name}: weights priced as stored: " + "; ".join(parts),)
