"""Calibrated step predictions: the model graph's kernels priced by measured-GPU fits.

Each op node of a compiled step's graph, at a numeric point (batch, context or
sequence), is priced by the efficiency model fitted on the measured corpus
(:mod:`costmodel.measured`) for its family (``gemm``, context or generation
``attention``, ``all_reduce``): the device's datasheet terms through its dtype
group's fits, taking the fastest of the framework's kernels. A layer's routed-expert GEMMs
(gate/up and down, :func:`expert_groups`) are one fused-MoE kernel priced by the corpus's own
measurements of it (family ``moe``, :mod:`costmodel.measured.moe`), its time split over them by
``N K``. The fits use the
device's own rows for the chosen framework when it has them, else every
measured device's (a prediction from the datasheet alone). Other ops (norms, RoPE, activations, embedding, sampling) have no
measured family here and keep their roofline bound. Weights are not L2
resident in a model step (every layer reads new ones), so the L2 speed-up of
the fit is dropped (``cold_l2=True``) unless asked for.

Beside it, the grey-box prediction (``corrected_s``): each kernel's prediction
times the fit's residuals at the nearest measured shapes
(:mod:`costmodel.measured.residual`), from the device's own rows, else the mean
over the measured devices'. It follows the kernel libraries' discrete choices
the physical model cannot express; its held-out accuracy is in the README's
table. It reads the same corpus rows as the measured composition below (the
two interpolate them differently), so their agreement is no test of it.

What a prediction rests on (:attr:`Prediction.coverage`): each node's time comes
from the device's own measured kernels of the chosen framework and dtype, from a
neighbour (other devices, frameworks, or a named dtype substitution) or from its
bound alone (:mod:`graphs.serving.pricing.kernel_sources`).

Sibling projections are one kernel (:func:`projection_groups`): the linear layers that read the
same input with the same shape of it (q, k and v; gate and up; MLA's q_a and kv_a) run as one GEMM of
their summed width in every served engine (vLLM's and SGLang's ``QKVParallelLinear`` and
``MergedColumnParallelLinear``, ``vllm/model_executor/models/llama.py``; TensorRT-LLM's fused
``qkv_proj`` and ``gate_up_proj``, ``tensorrt_llm/_torch/models/modeling_llama.py``), so the group
is priced as that GEMM and its time split over the members by width. Priced apart, each small
projection would pay a whole kernel's fixed cost (10-15 us at decode batches on H100). Only the
projections the engines merge are grouped (the block that builds a projection declares the GEMM
it runs in, :data:`~costmodel.keys.MERGED`; an imported graph's are found by its layer names,
:data:`FUSED_PROJECTIONS`): a linear layer an engine builds on its own (DSA's indexer
``wq_b``/``wk``/``weights_proj``, ``ReplicatedLinear`` each in vLLM's and SGLang's ``Indexer``;
Qwen3-Next's ``shared_expert_gate``; its gated-delta-net ``in_proj_qkvz`` and ``in_proj_ba``, two
layers of the Hugging Face model) stays its own kernel even when it reads the same input.

Small ops the corpus does not measure (norms, activations, RoPE, KV-cache writes, the embedding
gather) are kernels too: each engine kernel costs at least the device's shortest measured kernel
(:func:`costmodel.measured.corpus.small_kernel_s`, 1.4 us on H100), however little it moves, where its
bound would be a few nanoseconds at a decode batch. Which of the graph's small ops run as their
own kernels is the engine's (:data:`SMALL_KERNELS`, :func:`small_kernel_groups`); that time rests on
a neighbour (a measured kernel of another op), said in the coverage.

``measured=True`` also composes the corpus's own measurements for the same
kernels: each GEMM, attention and all-reduce looked up on the measured grid,
interpolated linearly in log-latency over log-shape between grid points
(:func:`measured_latency`); the same unmeasured ops' bounds are added, so the
two totals differ only where the model and the measurements differ.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from costmodel.cost import as_float
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.keys import EXPERT_PLAN, MERGED, OP, ROLE, SCALE_BLOCK, Role
from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS, small_kernel_measured, small_kernel_s
from costmodel.results import Result
from costmodel.roofline import bound
from costmodel.rules.attention import attention
from costmodel.rules.comm import all_reduce
from costmodel.rules.linear import batched_gemm, gemm
from costmodel.rules.moe import grouped_gemm
from costmodel.rules.registry import get_rule
from costmodel.symbols import B as B_sym
from costmodel.symbols import S as S_sym
from costmodel.symbols import ctx as ctx_sym

from ..engines import get_engine
from ..step.compiled import compiled_step
from .kernel_sources import ATTENTION_FAMILIES as _ATTENTION_FAMILIES
from .kernel_sources import (
    SUBSTITUTES,
    WARN_SHARE,
    Coverage,
    calibration,
    calibration_residuals,
    coverage_of,
    kernel_source,
    with_key,
)
from .measured_grid import measured_latency

__all__ = [
    "Coverage",
    "Prediction",
    "attention_backend_curve",
    "attention_kernel_note",
    "calibration_source",
    "dtype_key",
    "FP8_SCALES",
    "FUSED_PROJECTIONS",
    "projection_groups",
    "expert_groups",
    "expert_activations",
    "fused_row",
    "SMALL_KERNELS",
    "UNMEASURED",
    "SMALL_KERNEL",
    "small_kernel_basis",
    "small_kernel_groups",
    "small_kernel_times",
    "small_kernel_floor",
    "kernel_row",
    "predict_step",
    "price_rows",
    "unmeasured_basis",
    "calibration",
    "calibration_residuals",
    "measured_latency",
    "SUBSTITUTES",
    "WARN_SHARE",
]

_CORPUS_DTYPE = {"bf16": "bfloat16", "fp8": "fp8", "fp8_e4m3": "fp8", "fp16": "float16", "nvfp4": "nvfp4"}


def _num(v: Any, point: dict[sympy.Symbol, int]) -> Any:
    if isinstance(v, sympy.Basic):
        return float(v.subs(point))
    return v


@functools.cache  # asked once per kernel and grid point when a search tabulates its kernels
def _measured_rules() -> dict[Any, tuple[str, frozenset[Role]]]:
    """The cost rules whose kernels the corpus measures, each with its family's name and the
    node roles it is measured in: the rule functions themselves (from their modules), so a node
    is matched by its role and by the rule that built its cost, never by an op-name string."""
    return {
        gemm: ("gemm", frozenset({Role.LINEAR, Role.HEAD, Role.ROUTER})),
        grouped_gemm: ("moe", frozenset({Role.EXPERT})),
        attention: ("attention", frozenset({Role.ATTENTION})),
        all_reduce: ("all_reduce", frozenset({Role.COLLECTIVE})),
    }


def _family(d: dict[str, Any]) -> str | None:
    """The measured family of a node (its rule and role, :func:`_measured_rules`), or None."""
    hit = _measured_rules().get(get_rule(str(d.get(OP))).fn)
    return hit[0] if hit is not None and d.get(ROLE) in hit[1] else None


def _row(d: dict[str, Any], p: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The measured family and corpus row of a graph node at numeric params ``p``, or None."""
    fam = _family(d)
    if fam == "gemm":
        a = _CORPUS_DTYPE.get(str(p.get("dtype", "bf16")))
        w = p.get("w_dtype")
        if a is None or (w is not None and _CORPUS_DTYPE.get(str(w)) != a):
            return None
        block = d.get(SCALE_BLOCK)
        # a linear layer's last block of an output width the blocks do not divide is partial
        # (DeepSeek-V3's kv_a_proj_with_mqa: 576 rows, ceil(576 / 128) = 5 scale rows in the
        # checkpoint); its input width must be whole blocks (the activations' 1 x 128 groups)
        if a == "fp8" and block is not None and _block_scaled(block, {"N": block[0], "K": p["K"]}):
            a = "fp8_block"
        return "gemm", {"m": p["M"], "n": p["N"], "k": p["K"], "dtype": a}
    if fam == "attention":
        if p.get("window") is not None or p.get("slots") is not None or p.get("variant", "flash") != "flash":
            return None  # a sliding window, a sparse kernel's slots (DSA): no corpus kernel of either
        a = _CORPUS_DTYPE.get(str(p.get("dtype", "bf16")))
        kv = _CORPUS_DTYPE.get(str(p.get("kv_dtype") or p.get("dtype", "bf16")))
        if a is None or kv is None:
            return None
        q, kvl = p["q_len"], p["kv_len"]
        if p.get("kv_shared") or p.get("v_head_dim", p["head_dim"]) != p["head_dim"]:
            return _mla_row(p, a, kv)
        base = {
            "batch": p.get("batch", 1),
            "heads": p["heads"],
            "kv_heads": p.get("kv_heads") or p["heads"],
            "head_dim": p["head_dim"],
            "window": 0,
            "attn_dtype": a,
            "kv_dtype": kv,
        }
        if q == 1:
            return "generation_attention", {**base, "isl": 1, "step": kvl - 1}
        if q == kvl:
            return "context_attention", {**base, "isl": q, "step": 0}
        return None
    if fam == "all_reduce":
        a = _CORPUS_DTYPE.get(str(p.get("dtype", "bf16")))
        if a is None:
            return None
        return "all_reduce", {"elements": p["elements"], "gpus": p["p"], "dtype": a}
    if fam == "moe":
        return _moe_row(d, p)
    return None


def _mla_row(p: dict[str, Any], a: str, kv: str) -> tuple[str, dict[str, Any]] | None:
    """The corpus's MLA row of a latent-attention node (:mod:`models.mixers.mla`), or None.

    The wheel's ``mla/<framework>/context_mla_perf`` and ``generation_mla_perf`` tables time
    DeepSeek-V3's attention kernel itself (:mod:`costmodel.measured.kernels`: 128 nope + 64 rope
    query/key dims, 128 value dims, a 512 + 64 latent cache; ``num_heads`` the rank's, ``tp_size``
    the split of the model's 128 heads down to them). A decode node (the absorbed form: one query
    per sequence over the shared latent cache, ``head_dim = 576``, ``v_head_dim = 512``) is a
    ``generation_mla`` row at ``step = kv_len - 1``; a prefill node with no cached prefix (keys and
    values decompressed: ``head_dim = 192``, ``v_head_dim = 128``, ``q_len = kv_len``) a
    ``context_mla`` row. Other head dims, or a chunk after a cached prefix, are not measured: a
    step priced node by node here keeps such a chunk at its bound, where the simulator's iteration
    (:meth:`graphs.serving.pricing.predictor.PredictedStep.prefix_chunk_attention`) prices it
    from the ``q = kv`` kernel at its KV length."""
    from costmodel.measured.kernels import MLA_HEADS, MLA_LATENT, MLA_QK, MLA_ROPE, MLA_V

    heads, q, kvl = p["heads"], p["q_len"], p["kv_len"]
    base = {"batch": p.get("batch", 1), "heads": heads, "attn_dtype": a, "kv_dtype": kv}
    base["tp"] = max(1, MLA_HEADS // int(heads))  # the corpus's tp_size for the rank's heads
    if p.get("kv_shared"):
        if (p["head_dim"], p.get("v_head_dim"), q) != (MLA_LATENT + MLA_ROPE, MLA_LATENT, 1):
            return None
        return "generation_mla", {**base, "isl": 1, "step": kvl - 1}
    if (p["head_dim"], p.get("v_head_dim"), p.get("kv_heads") or heads) != (MLA_QK, MLA_V, heads) or q != kvl:
        return None
    return "context_mla", {**base, "isl": q, "step": 0}


#: (activation, expert weight) dtypes -> the corpus's fused-MoE ``moe_dtype``
_MOE_DTYPE = {
    ("bf16", "bf16"): "bfloat16",
    ("fp8_e4m3", "fp8_e4m3"): "fp8",
    ("nvfp4", "nvfp4"): "nvfp4",
    ("bf16", "int4"): "int4_wo",
    ("bf16", "mxfp4"): "w4a16_mxfp4",
}


def _block_scaled(block: Any, p: dict[str, Any]) -> bool:
    """Whether a GEMM (a linear layer's, or a routed expert's) of FP8 weights in ``block`` =
    ``(rows, columns)`` scale blocks runs the corpus's ``fp8_block`` kernels: aiconfigurator
    prices a checkpoint whose ``quantization_config`` is ``fp8`` with a ``weight_block_size`` as
    ``fp8_block`` (``sdk/models/helpers.py``, ``_infer_mixed_precision_quant_modes``), the
    block-scaled kernels TensorRT-LLM, SGLang and vLLM run for DeepSeek-V3's 128 x 128 blocks
    (every linear layer of the checkpoint: DeepSeek-V3 technical report, arXiv:2412.19437 sec.
    3.3.2, "block-wise quantization"; ``config.json`` ``quantization_config.weight_block_size``),
    and refuses a rank's expert width the blocks do not divide (``sdk/models/moe.py``,
    ``_validate_fp8_block_quantized_moe_config``): there the per-tensor ``fp8`` key stays."""
    if block is None:
        return False
    rows, cols = block
    return bool(int(p["N"]) % int(rows) == 0 and int(p["K"]) % int(cols) == 0)


def _moe_row(d: dict[str, Any], p: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """One routed-expert GEMM's part of the fused-MoE row (:func:`fused_row` makes the kernel's):
    its tokens, experts, top-k, ``N x K``, corpus dtype, and the EP plan's ``ep`` and measured
    distribution (:func:`costmodel.measured.moe.distribution_for`; balanced without a plan). None
    where the corpus measures no such kernel (expert capacity buffers, an unmeasured dtype pair, a
    routing histogram, a non-contiguous placement or replicas)."""
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.moe import distribution_for

    a = get_dtype(str(p.get("dtype", "bf16"))).name
    w = get_dtype(str(p.get("w_dtype") or a)).name
    key = _MOE_DTYPE.get((a, w))
    if key is None or p.get("capacity_factor") is not None:
        return None
    if key == "fp8" and _block_scaled(d.get(SCALE_BLOCK), p):
        key = "fp8_block"
    ep, dist = 1, "balanced"
    if EXPERT_PLAN in d:
        ep, kind, exponent, placement, replicate = d[EXPERT_PLAN]
        if kind == "histogram" or placement != "contiguous" or replicate:
            return None
        dist = distribution_for(kind, exponent)
    row = {f: p[f] for f in ("tokens", "experts", "top_k", "N", "K")}
    return "moe", {**row, "dtype": key, "ep": ep, "distribution": dist}


def moe_dtype_key(act: str, weights: str) -> str | None:
    """The corpus's fused-MoE ``moe_dtype`` of experts with ``act`` activations and ``weights``
    weights (catalog dtype names: ``bf16`` x ``mxfp4`` -> ``w4a16_mxfp4``), or None where the
    corpus measures no such kernel.

    Parameters
    ----------
    act, weights : str
        The activations' and the expert weights' dtypes.

    Returns
    -------
    str or None
    """
    return _MOE_DTYPE.get((get_dtype(act).name, get_dtype(weights).name))


def moe_kernel_key(key: str, hw: Hardware, rules: tuple[Any, ...]) -> str:
    """The fused-MoE shape ``key`` (:attr:`costmodel.measured.moe.MoEShape.key`) with the kernel
    an engine runs for its dtype on ``hw``'s architecture (the first of ``rules``, an engine
    profile's :attr:`~graphs.serving.engines.EngineProfile.moe_kernels`, that applies), or ``key``
    when none does (the corpus's fastest prices it).

    Parameters
    ----------
    key : str
        The shape's key.
    hw : Hardware
        The device.
    rules : tuple of MoEKernelRule
        The engine's rules.

    Returns
    -------
    str
    """
    if not rules:
        return key
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.moe import MoEShape

    from ..engines.moe_kernels import moe_kernel_for

    shape = MoEShape.from_key(key)
    rule = moe_kernel_for(rules, shape.dtype, hw.architecture, hw.name)
    if rule is None:
        return key
    return dataclasses.replace(shape, kernel=rule.kernel, pad=rule.pad).key


def attention_kernel_note(
    d: dict[str, Any], hw: Hardware, rules: tuple[Any, ...], framework: str
) -> str | None:
    """The basis of an attention node whose kernel the corpus's rows do not time on ``hw``: the
    first of ``rules`` (an engine profile's
    :attr:`~graphs.serving.engines.EngineProfile.attention_kernels`) that applies to the node
    (its learned ``sinks``) on the device (vLLM's Triton attention for sinks off Hopper), or None.
    The node stays priced from the framework's measured attention rows, counted as a neighbour.

    Parameters
    ----------
    d : dict
        The graph node (its ``params``' ``sinks``).
    hw : Hardware
        The device.
    rules : tuple of AttentionKernelRule
        The engine's rules.
    framework : str
        The corpus framework whose rows price it.

    Returns
    -------
    str or None
    """
    rule = _attention_rule(d, hw, rules)
    return rule.note(framework, hw.name) if rule is not None else None


def _attention_rule(d: dict[str, Any], hw: Hardware, rules: tuple[Any, ...]) -> Any:
    """The first of ``rules`` that picks another attention kernel for node ``d`` (its learned
    ``sinks``) on ``hw``, or None."""
    if not rules:
        return None
    from ..engines.attention_kernels import attention_kernel_for

    sinks = d.get("params", {}).get("sinks", 0)
    return attention_kernel_for(rules, bool(as_float(sinks)), hw.architecture, hw.name)


def attention_backend_curve(
    d: dict[str, Any], hw: Hardware, rules: tuple[Any, ...], framework: str, family: str
) -> tuple[Any, str] | None:
    """The measured ratio (:func:`costmodel.measured.backend_ratio.context_ratio`) that scales a
    prefill attention node the engine runs on another kernel than the rows pricing it (the rule of
    :func:`attention_kernel_note`), with that kernel's name; None where no rule applies, for decode
    attention (the ratio's FP8 cache says nothing of a BF16 one there), or where the corpus has no
    pair of rows to read it from.

    Parameters
    ----------
    d : dict
        The graph node (its ``params``' ``sinks``).
    hw : Hardware
        The device.
    rules : tuple of AttentionKernelRule
        The engine's rules.
    framework : str
        The corpus framework whose rows price it.
    family : str
        The node's measured family (only ``context_attention`` is scaled).

    Returns
    -------
    tuple of (RatioCurve, str) or None
    """
    if family != "context_attention":
        return None
    rule = _attention_rule(d, hw, rules)
    if rule is None:
        return None
    from costmodel.measured.backend_ratio import context_ratio

    curve = context_ratio(framework, rule.backend, as_float(hw.bandwidth()), hw.name)
    return None if curve is None else (curve, rule.backend)


def _unmeasured(d: dict[str, Any], p: dict[str, Any]) -> str:
    """Why a node has no measured kernel (the bound prices it)."""
    fam = _family(d)
    if fam == "gemm":
        a, w = p.get("dtype", "bf16"), p.get("w_dtype") or p.get("dtype", "bf16")
        hint = f" (W8A8/W4A4 kernels are: --matmul-dtype {w})" if w in ("fp8_e4m3", "nvfp4") else ""
        return f"gemm of {a} x {w} weights: not measured{hint}"
    if fam == "attention":
        if p.get("slots") is not None:
            return "sparse attention over selected key slots (DSA's MQA-mode kernel): not measured"
        if p.get("kv_shared") or p.get("v_head_dim", p.get("head_dim")) != p.get("head_dim"):
            return "latent attention (MLA) of another shape than the corpus's DeepSeek-V3 kernel, or after a cached prefix: not measured"
        return "attention of an unmeasured variant or dtype (window, non-flash, chunked prefix)"
    if fam == "all_reduce":
        return f"all_reduce of {p.get('dtype')}: not measured"
    if fam == "moe":
        return "routed-expert GEMMs of an unmeasured kind (dtype pair, capacity buffers, routing histogram or EP placement)"
    role = d.get(ROLE)
    if role == Role.LINEAR and get_rule(str(d.get(OP))).fn is batched_gemm:
        return "batched GEMMs (MLA's absorbed per-head projections): not measured (the corpus's mla_bmm rows are not read)"
    if role in _UNMEASURED_ROLES:
        return _UNMEASURED_ROLES[role]
    return "ops without measured kernels (norms, RoPE, activations, embedding, sampling)"


#: why a node of a role no measured family prices sits at its bound (the coverage line's label:
#: the routed experts of an MoE are never filed under the small ops)
_UNMEASURED_ROLES = {
    Role.EXPERT: "routed-expert GEMMs (grouped / fused MoE): no measured MoE kernels price them",
    Role.ROUTER: "MoE router top-k and normalisation: not measured",
    Role.COMBINE: "MoE combine (the weighted sum of expert outputs): not measured",
    Role.COLLECTIVE: "collectives other than all-reduce (all-to-all, all-gather): not measured",
    Role.SCAN: "recurrent state updates (selective scan, delta rule): not measured",
    Role.CONV: "causal depthwise convolutions: not measured",
    Role.OTHER: "imported ops the importer could not place: not measured",
}


def _dtype_key(family: str, row: dict[str, Any]) -> str:
    if family == "moe":  # one kernel source per shape (:mod:`costmodel.measured.moe`)
        return str(row.get("key", row["dtype"]))
    if family in _ATTENTION_FAMILIES:
        return f"{row['attn_dtype']}/{row['kv_dtype']}"
    return str(row["dtype"])


def _frame(rows: list[dict[str, Any]]) -> Any:
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    import pandas as pd

    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Prediction(Result):
    """A step's roofline bound beside its calibrated prediction (and measured composition).

    ``nodes`` holds each op node's bound and prediction (seconds, times its
    repeat count) and its measured family (None: priced by its bound);
    ``corrected_s`` is the grey-box total (module doc); ``coverage`` and
    ``corrected_coverage`` split ``predicted_s`` and ``corrected_s`` by what they
    rest on; ``calibrated`` is whether any kernel was priced from fits on this
    device's own measurements (never for a device the corpus does not measure).

    Attributes
    ----------
    model, device : str
        What was run, by name.
    phase : str
        ``decode`` or ``prefill``.
    framework : str
        The corpus framework whose kernels price it.
    point : dict of str to int
        The step's dims (``batch`` and ``ctx``, or ``batch`` and ``seq``).
    tp : int
        Tensor-parallel degree.
    bound_s : float
        The roofline bound of the step (s).
    predicted_s : float
        The calibrated prediction (s).
    measured_s : float or None
        The measured grid's composition (s; None unless asked for).
    corrected_s : float
        The grey-box prediction: the fits times their residuals at the nearest shapes (s).
    by_family : dict of str to dict of str to float
        Per kernel family: its ``bound_s``, ``predicted_s``, ``corrected_s`` (s).
    calibrated_from : str
        The measured corpus, ``package version``.
    nodes : dict of str to dict
        Per op node: bound, prediction (s, repeat included), family, source and basis.
    coverage, corrected_coverage : Coverage or None
        ``predicted_s`` and ``corrected_s`` by what they rest on.
    calibrated : bool
        Whether any kernel was priced from fits on this device's own measurements.
    """

    model: str
    device: str
    phase: str
    framework: str
    point: dict[str, int]
    tp: int
    bound_s: float
    predicted_s: float
    measured_s: float | None
    corrected_s: float  # predict_step always composes it
    by_family: dict[str, dict[str, float]] = field(default_factory=dict)
    calibrated_from: str = ""
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    coverage: Coverage | None = None
    corrected_coverage: Coverage | None = None
    calibrated: bool = False

    @property
    def error(self) -> float | None:
        """``predicted / measured - 1`` when the measured composition was asked for."""
        return None if self.measured_s is None else self.predicted_s / self.measured_s - 1

    @property
    def corrected_error(self) -> float | None:
        """``corrected / measured - 1`` (grey-box) when the measured composition was asked for."""
        if self.measured_s is None:
            return None
        return self.corrected_s / self.measured_s - 1


def calibration_source() -> str:
    """The measured corpus the predictions are fitted on: ``package version``.

    Returns
    -------
    str
        ``package version`` of the measured corpus.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured import corpus_info

    info = corpus_info()
    return f"{info.package} {info.version}"


def kernel_row(node: dict[str, Any], params: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The measured family and corpus row of a graph node (its attributes: rule and role) at
    numeric ``params``, or None (the bound prices it); its dtype key is :func:`dtype_key`.

    Parameters
    ----------
    node : dict
        The graph node's attributes (rule, role, dtypes).
    params : dict
        The node's rule parameters at numeric dims.

    Returns
    -------
    tuple of (str, dict) or None
        ``(family, corpus row)``, or None when no measured family prices it.
    """
    return _row(node, params)


def dtype_key(family: str, row: dict[str, Any]) -> str:
    """The dtype key (``bfloat16``, ``fp8/fp8`` for attention) of a :func:`kernel_row` row.

    Parameters
    ----------
    family : str
        The kernel family of the row.
    row : dict
        A :func:`kernel_row` row.

    Returns
    -------
    str
    """
    return _dtype_key(family, row)


#: for imported graphs (whose nodes carry no :data:`~costmodel.keys.MERGED`): the projections the
#: served engines merge into one GEMM, by the last part of the layer's name -> the merged layer
#: (module doc): vLLM's/SGLang's ``QKVParallelLinear`` (Qwen3-Next's gated
#: attention widens its q_proj by the output gate: ``q_gate_proj`` here) and
#: ``MergedColumnParallelLinear`` (gate/up), DeepSeek's ``fused_qkv_a_proj`` (MLA's q_a and kv_a)
FUSED_PROJECTIONS = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "q_gate_proj": "qkv_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
    "q_a_proj": "fused_qkv_a_proj",
    "kv_a_proj": "fused_qkv_a_proj",
}


def projection_groups(nodes: Any) -> dict[str, tuple[str, ...]]:
    """Each linear node that runs fused with its siblings -> the group's member names, in order
    (module doc). ``nodes``: (name, attributes) pairs of a graph's nodes.

    Siblings are GEMM nodes of role ``linear`` that the engines merge into the same GEMM (the
    :data:`~costmodel.keys.MERGED` the block that built them declares; on an imported graph, which
    carries none, :data:`FUSED_PROJECTIONS` by the layer's name) and that read the same tensor
    (their first input) with the same ``M``, ``K``, dtypes, repeat count, layer group and phase; a
    node without siblings is not in the result.

    Parameters
    ----------
    nodes : iterable of (str, dict)
        A graph's nodes with their attributes.

    Returns
    -------
    dict of str to tuple of str
        Member node -> the names of its fused GEMM's members, in order.
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, d in nodes:
        if d.get("kind") != "op" or d.get(ROLE) != Role.LINEAR or _family(d) != "gemm":
            continue
        if MERGED in d:  # declared by the block that built it
            merged = d[MERGED] or None
        else:  # an imported graph: its layer names (Hugging Face's, torch.export's)
            merged = FUSED_PROJECTIONS.get(str(name).rsplit(".", 1)[-1])
        if merged is None:
            continue
        ins = d.get("inputs") or ()
        p = d.get("params") or {}
        if not ins or "N" not in p:
            continue
        key = (
            merged,
            str(getattr(ins[0], "name", ins[0])),
            *(str(p.get(f)) for f in ("M", "K", "dtype", "w_dtype")),
            str(d.get("repeat", 1)),
            str(d.get("group")),
            str(d.get("phase")),
        )
        groups.setdefault(key, []).append(str(name))
    return {n: tuple(ms) for ms in groups.values() if len(ms) > 1 for n in ms}


#: per corpus framework, how its engine runs the graph's small unmeasured ops (module doc): ``each``
#: node is its own kernel; ``layer``: one kernel for all the nodes of that role in a layer; a role
#: not listed is fused into a neighbouring kernel (its time stays its bound). A view of each
#: framework's engine profile (:attr:`graphs.serving.engines.EngineProfile.small_kernels`, where
#: the sources are: vLLM's and SGLang's fused RoPE and KV write, TensorRT-LLM's inside attention).
SMALL_KERNELS: dict[str, dict[Role, str]] = {fw: dict(get_engine(fw).small_kernels) for fw in FRAMEWORKS}
#: the :attr:`Prediction.by_family` entry of the ops no measured family prices: their bound, and
#: (``predicted_s``, ``corrected_s``) the small kernels' time where it exceeds it (module doc)
UNMEASURED = "unmeasured ops"

#: the coverage reason of the time small kernels add over their bounds
SMALL_KERNEL = "small kernels (norms, activations, RoPE, KV writes) at the device's shortest measured kernel"


def small_kernel_basis(device: str) -> str:
    """:data:`SMALL_KERNEL`, naming other devices' measurements when ``device`` has none.

    Parameters
    ----------
    device : str
        The device's catalog name.

    Returns
    -------
    str
        The small-kernel floor's basis, in words.
    """
    if small_kernel_measured(device):
        return SMALL_KERNEL
    return (
        "small kernels (norms, activations, RoPE, KV writes) at the shortest kernel measured on "
        f"other devices' fits (none on {device})"
    )


def small_kernel_groups(nodes: Any, framework: str) -> dict[str, tuple[str, ...]]:
    """Each unmeasured node that ``framework`` runs as (part of) its own kernel -> the kernel's
    member names (:data:`SMALL_KERNELS`): one node for ``each``, the role's nodes of one layer
    group, phase and repeat count for ``layer``. ``nodes``: (name, attributes) pairs.

    Parameters
    ----------
    nodes : iterable of (str, dict)
        A graph's nodes with their attributes.
    framework : str
        The corpus framework whose kernel layout (:data:`SMALL_KERNELS`) groups them.

    Returns
    -------
    dict of str to tuple of str
        Member node -> the names of its kernel's members.
    """
    how = get_engine(framework, what="engine profile for framework").small_kernels
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, d in nodes:
        role = d.get(ROLE)
        if d.get("kind") != "op" or role not in how or _family(d) is not None:
            continue
        key = (
            (str(name),)
            if how[role] == "each"
            else (str(role), str(d.get("group")), str(d.get("phase")), str(d.get("repeat", 1)))
        )
        groups.setdefault(key, []).append(str(name))
    return {n: tuple(ms) for ms in groups.values() for n in ms}


def small_kernel_times(bounds: np.ndarray, reps: np.ndarray, floor: float) -> np.ndarray:
    """The seconds of one small kernel's members: each member's bound, or its share of the kernel's
    floor where that is longer; shares by bound (evenly when the bounds are 0). ``bounds``:
    (members, points) seconds, repeat included; ``reps``: the repeat counts, (points,).

    .. math:: t_i = \\max\\big(b_i,\\ \\tfrac{w_i}{\\sum_j w_j}\\, r f\\big)

    with ``w`` the bounds (or ones), ``r`` the repeat and ``f`` the floor (s per kernel).

    Parameters
    ----------
    bounds : numpy.ndarray
        Members' bounds (s, repeat included), shape ``(members, points)``.
    reps : numpy.ndarray
        The kernel's repeat count per point, shape ``(points,)``.
    floor : float
        The shortest measured kernel on the device (s per kernel).

    Returns
    -------
    numpy.ndarray
        Members' seconds, shape ``(members, points)``.
    """
    b = np.asarray(bounds, dtype=float)
    return np.maximum(b, small_kernel_floor(b, reps, floor))


def small_kernel_floor(bounds: np.ndarray, reps: np.ndarray, floor: float) -> np.ndarray:
    """Each member's share of its kernel's floor, ``w_i / sum_j w_j r f`` (:func:`small_kernel_times`).

    Parameters
    ----------
    bounds : numpy.ndarray
        Members' bounds (s), shape ``(members, points)``.
    reps : numpy.ndarray
        Repeat counts, shape ``(points,)``.
    floor : float
        The floor (s per kernel).

    Returns
    -------
    numpy.ndarray
        Each member's share of the floor (s), shape ``(members, points)``.
    """
    b = np.asarray(bounds, dtype=float)
    tot = b.sum(axis=0)
    w = np.where(tot > 0, b / np.where(tot > 0, tot, 1.0), 1.0 / len(b))
    return w * np.asarray(reps, dtype=float) * floor


def expert_groups(nodes: Any) -> dict[str, tuple[str, ...]]:
    """Each routed-expert GEMM -> the GEMMs of the one fused-MoE kernel it runs in, gate/up first
    and down last (every engine runs a layer's routed experts as one fused call:
    :mod:`costmodel.measured.moe`). ``nodes``: (name, attributes) pairs of a graph's nodes.

    Members are the ``moe`` nodes of role ``expert`` of one layer group, phase and repeat count
    with the same tokens, experts, top-k and dtypes; the down projection is the member whose
    input is written by a node reading another member's output (the activation), found by
    dataflow, never by name. A group without exactly one such member is left out (priced apart).

    Parameters
    ----------
    nodes : iterable of (str, dict)
        A graph's nodes with their attributes.

    Returns
    -------
    dict of str to tuple of str
        Routed-expert GEMM -> the names of its fused-MoE kernel's GEMMs, down projection last.
    """
    pairs = list(nodes)
    groups: dict[tuple[str, ...], list[str]] = {}
    attrs: dict[str, dict[str, Any]] = {}
    for name, d in pairs:
        if d.get("kind") != "op" or d.get(ROLE) != Role.EXPERT or _family(d) != "moe":
            continue
        p = d.get("params") or {}
        key = (
            str(d.get("group")),
            str(d.get("phase")),
            str(d.get("repeat", 1)),
            *(str(p.get(f)) for f in ("tokens", "experts", "top_k", "dtype", "w_dtype")),
        )
        groups.setdefault(key, []).append(str(name))
        attrs[str(name)] = d

    def names(ts: Any) -> set[str]:
        return {str(getattr(t, "name", t)) for t in ts or ()}

    outs = set().union(*(names(d.get("outputs")) for d in attrs.values())) if attrs else set()
    fed = set().union(*(names(d.get("outputs")) for _, d in pairs if names(d.get("inputs")) & outs))
    out: dict[str, tuple[str, ...]] = {}
    for ms in groups.values():
        down = [m for m in ms if (attrs[m].get("inputs") or ()) and names(attrs[m]["inputs"][:1]) <= fed]
        if len(ms) < 2 or len(down) != 1:
            continue
        order = (*(m for m in ms if m not in down), down[0])
        out.update({m: order for m in ms})
    return out


def expert_activations(nodes: Any) -> frozenset[str]:
    """The activation nodes inside a fused-MoE kernel: role ``activation``, reading a routed-expert
    GEMM's output (:func:`expert_groups`). The measured kernel's time holds theirs (vLLM's
    ``fused_experts`` runs ``silu_and_mul`` inside it), so they are not small kernels of their own:
    their bound stands beside it. ``nodes``: (name, attributes) pairs.

    Parameters
    ----------
    nodes : iterable of (str, dict)
        A graph's nodes with their attributes.

    Returns
    -------
    frozenset of str
        The activation nodes timed inside a fused-MoE kernel.
    """
    pairs = list(nodes)
    outs = {
        str(getattr(t, "name", t))
        for _, d in pairs
        if d.get(ROLE) == Role.EXPERT and _family(d) == "moe"
        for t in d.get("outputs") or ()
    }
    return frozenset(
        str(n)
        for n, d in pairs
        if d.get(ROLE) == Role.ACTIVATION
        and {str(getattr(t, "name", t)) for t in d.get("inputs") or ()} & outs
    )


def _moe_fused(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[float]]:
    """The fused-MoE row of one kernel's GEMM rows (gate/up first, down last: :func:`expert_groups`)
    and each GEMM's share of its time, by its ``N K`` (its FLOPs and weight bytes)."""
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.moe import MoEShape

    if len(rows) < 2:
        raise CostModelError(
            "a routed-expert GEMM outside a gate/up/down group cannot be priced as one fused-MoE kernel"
        )
    first = rows[0]
    shape = MoEShape(
        int(first["K"]),
        int(first["N"]),
        int(first["top_k"]),
        int(first["experts"]),
        int(first["ep"]),
        str(first["dtype"]),
        len(rows) > 2,
        str(first["distribution"]),
    )
    work = [float(r["N"]) * float(r["K"]) for r in rows]
    return {"tokens": first["tokens"], "dtype": shape.dtype, "key": shape.key}, [x / sum(work) for x in work]


def fused_row(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[float]]:
    """One GEMM row of sibling rows (:func:`projection_groups`): their summed ``n``, and each
    member's share of it (its ``n`` over the sum); routed-expert rows: :func:`_moe_fused`.

    Parameters
    ----------
    rows : list of dict
        The corpus rows of a fused group's members (GEMM or routed-expert).

    Returns
    -------
    tuple of (dict, list of float)
        The fused kernel's row and each member's share of its time (summing to 1).
    """
    if "top_k" in rows[0]:
        return _moe_fused(rows)
    if len(rows) == 1:
        return rows[0], [1.0]
    total = float(sum(float(r["n"]) for r in rows))
    return {**rows[0], "n": total}, [float(r["n"]) / total for r in rows]


def unmeasured_basis(node: dict[str, Any], params: dict[str, Any]) -> str:
    """Why a node has no measured kernel: the bound-share reason :func:`predict_step` names.

    Parameters
    ----------
    node : dict
        The graph node's attributes.
    params : dict
        Its rule parameters at numeric dims.

    Returns
    -------
    str
        The reason, in words.
    """
    return _unmeasured(node, params)


def price_rows(
    hw: Hardware,
    framework: str,
    family: str,
    src: Any,
    rows: list[dict[str, Any]],
    *,
    cold_l2: bool = True,
    grey_box: bool = True,
    fp8_scales: str = "dynamic",
) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated and grey-box seconds (one kernel each, no repeat) of ``rows`` of one family
    and dtype key, priced by the fits of ``src`` (:func:`kernel_source`, which has fits): the
    fastest of the framework's fitted kernels (:func:`costmodel.measured.applied.fastest`) on
    the rows' features, without the L2 speed-up when ``cold_l2`` (module doc). Without
    ``grey_box`` the residual correction is skipped and the calibrated seconds come twice.

    FP8 GEMMs with ``fp8_scales="static"`` (a checkpoint's calibrated per-tensor input scale:
    ModelOpt and TensorRT-LLM FP8 checkpoints) drop the time the measured kernels spend computing
    the scale each call, the framework's compute_scale table
    (:func:`costmodel.measured.corpus.compute_scale_s`), never below the row's roofline bound:

    .. math:: t_{static}(m, n, k) = \\max\\big(t_{fp8}(m, n, k) - t_{scale}(m, k),\\ t_{bound}\\big)

    Parameters
    ----------
    hw : Hardware
        The device.
    framework : str
        The corpus framework.
    family : str
        The kernel family of ``rows``.
    src : KernelSource
        The fits pricing them (:func:`kernel_source`; must have fits).
    rows : list of dict
        Corpus rows of one dtype key.
    cold_l2 : bool
        Drop the L2 speed-up of repeated measurement (weights are not L2-resident when served).
    grey_box : bool
        Apply the residual correction at the nearest measured shapes.
    fp8_scales : str
        ``"dynamic"`` (scales computed each call, as measured) or ``"static"`` (calibrated
        per-tensor scales: the compute-scale time dropped, never below the bound).

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        Calibrated and grey-box seconds per row (one kernel, no repeat).

    Raises
    ------
    CostModelError
        When ``fp8_scales`` is not one of :data:`FP8_SCALES`.
    """
    # the measured corpus (the [measured] extra: pandas) loads on use: a bound-priced step never needs it
    from costmodel.measured.applied import fastest
    from costmodel.measured.corpus import compute_scale_s
    from costmodel.measured.efficiency import features

    if fp8_scales not in FP8_SCALES:
        raise CostModelError(f"fp8_scales {fp8_scales!r} not allowed; allowed: {', '.join(FP8_SCALES)}")
    if family == "moe":  # the measured curve itself (no fit, no residuals): costmodel.measured.moe
        t = src.fits["moe"].at([float(r["tokens"]) for r in rows])
        return t, t

    rows = [with_key(family, r, src.key) for r in rows]
    if family == "all_reduce":
        rows = [{**r, "backend": framework} for r in rows]
    df = _frame(rows)
    x = features(family, df, hw)
    if cold_l2:
        x = dataclasses.replace(x, l2=np.zeros_like(x.l2))
    cal = fastest(src.fits, src.key, x, df=df, family=family)
    corr = cal
    if grey_box:
        res = calibration_residuals(hw.name, framework, family, (src.key,))
        corr = fastest(src.fits, src.key, x, res, df, family=family)
    if family == "gemm" and src.key == "fp8" and fp8_scales == "static":
        scale = compute_scale_s(
            hw.name, framework, df["m"].to_numpy(dtype=float), df["k"].to_numpy(dtype=float)
        )
        cal = np.maximum(cal - scale, x.bound_s)
        corr = np.maximum(corr - scale, x.bound_s)
    return cal, (corr if grey_box else cal)


def predict_step(
    config: Any,
    device: Hardware | str,
    phase: str,
    *,
    batch: int,
    ctx: int | None = None,
    seq: int | None = None,
    tp: int = 1,
    framework: str = "vllm",
    measured: bool = False,
    cold_l2: bool = True,
    fp8_scales: str = "dynamic",
    fuse_projections: bool = True,
    small_kernels: bool = True,
    moe_kernels: tuple[Any, ...] | None = None,
    attention_kernels: tuple[Any, ...] | None = None,
) -> Prediction:
    """Bound, calibrated prediction and (optionally) measured composition of one step
    (``fp8_scales``: how FP8 activations are scaled, :func:`price_rows`; ``fuse_projections``:
    sibling projections priced as one GEMM; ``small_kernels``: each engine kernel of the small
    unmeasured ops at least the device's shortest measured kernel; the module doc).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch : int
        Sequences in the step.
    ctx : int, optional
        Cached tokens per sequence (decode: required).
    seq : int, optional
        Prompt tokens per sequence (prefill: required).
    tp : int
        Tensor-parallel degree.
    framework : str
        The corpus framework whose kernels price the step.
    measured : bool
        Also compose the measured grid's times (:func:`measured_latency`; the device's own rows).
    cold_l2 : bool
        Drop the L2 speed-up of repeated measurement.
    fp8_scales : str
        ``"dynamic"`` or ``"static"`` FP8 activation scales (:func:`price_rows`).
    fuse_projections : bool
        Price sibling projections as one GEMM.
    small_kernels : bool
        Floor each small unmeasured engine kernel at the device's shortest measured kernel.
    moe_kernels : tuple of MoEKernelRule, optional
        The fused-MoE kernels the engine runs (:func:`moe_kernel_key`); None: those of the
        framework's default engine profile.
    attention_kernels : tuple of AttentionKernelRule, optional
        The attention kernels the engine runs where the corpus's rows time another
        (:func:`attention_kernel_note`); None: those of the framework's default engine profile.

    Returns
    -------
    Prediction
        The bound, calibrated and grey-box step times (s), per node, with their coverage.

    Raises
    ------
    CostModelError
        When decode lacks ``ctx``, prefill lacks ``seq``, or an option is out of range.
    """
    hw = get_device(device)
    cs = compiled_step(config, hw, phase, tp=tp)
    if phase == "decode":
        if ctx is None:
            raise CostModelError("decode prediction needs ctx")
        point = {B_sym: batch, ctx_sym: ctx}
        where = {"batch": batch, "ctx": ctx}
    else:
        if seq is None:
            raise CostModelError("prefill prediction needs seq")
        point = {B_sym: batch, S_sym: seq}
        where = {"batch": batch, "seq": seq}
    # one kernel each: (row, repeat, bound, member names, member shares, member bounds)
    by_key: dict[
        tuple[str, str], list[tuple[dict[str, Any], float, float, tuple[str, ...], list[float], list[float]]]
    ] = {}
    other_bound = 0.0
    total_bound = 0.0
    nodes: dict[str, dict[str, Any]] = {}
    fused = projection_groups(cs.graph.nodes(data=True)) if fuse_projections else {}
    fused = {**fused, **expert_groups(cs.graph.nodes(data=True))}
    small = small_kernel_groups(cs.graph.nodes(data=True), framework) if small_kernels else {}
    inside = expert_activations(cs.graph.nodes(data=True))  # timed within the fused-MoE kernel
    small = {n: ms for n, ms in small.items() if n not in inside}
    small_reps: dict[str, float] = {}
    pending: dict[tuple[str, ...], list[tuple[tuple[str, dict[str, Any]], float, float, str]]] = {}
    for name, d in cs.graph.nodes(data=True):
        if d.get("kind") != "op":
            continue
        rep = float(_num(d.get("repeat", 1), point))
        b = as_float(bound(d["cost"].subs(point), hw).lower, what="node bound") * rep
        total_bound += b
        params = {k: _num(v, point) for k, v in (d.get("params") or {}).items()}
        hit = _row(d, params)
        if hit is None:
            other_bound += b
            nodes[str(name)] = {
                "family": None,
                "bound_s": b,
                "predicted_s": b,
                "corrected_s": b,
                "source": "bound",
                "basis": _unmeasured(d, params),
            }
            if str(name) in small:
                small_reps[str(name)] = rep
            continue
        members = fused.get(str(name))
        if members is None:
            by_key.setdefault((hit[0], _dtype_key(*hit)), []).append(
                (hit[1], rep, b, (str(name),), [1.0], [b])
            )
            continue
        got = pending.setdefault(members, [])
        got.append((hit, rep, b, str(name)))
        if len(got) == len(members):  # the group's last member: one fused kernel
            order = members
            got.sort(key=lambda g: order.index(g[3]))
            row, shares = fused_row([g[0][1] for g in got])
            by_key.setdefault((hit[0], _dtype_key(hit[0], row)), []).append(
                (row, rep, sum(g[2] for g in got), tuple(g[3] for g in got), shares, [g[2] for g in got])
            )
    for members, got in pending.items():  # a group with an unmeasured member: the rest apart
        if len(got) < len(members):
            for hit, rep, b, n in got:
                by_key.setdefault((hit[0], _dtype_key(*hit)), []).append((hit[1], rep, b, (n,), [1.0], [b]))
    extra = 0.0  # what small kernels add over their bounds (module doc)
    if small_reps:
        floor = small_kernel_s(hw.name)
        # in a fixed order, so the sum does not follow the hash seed
        for members in sorted({small[n] for n in small_reps}):
            names = [m for m in members if m in small_reps]
            t = small_kernel_times(
                np.array([[nodes[m]["bound_s"]] for m in names]), np.array([small_reps[names[0]]]), floor
            )[:, 0]
            for m, tm in zip(names, t, strict=True):
                add = float(tm) - nodes[m]["bound_s"]
                if add > 0:
                    extra += add
                    nodes[m].update(
                        predicted_s=float(tm),
                        corrected_s=float(tm),
                        source="neighbour",
                        basis=small_kernel_basis(hw.name),
                    )
    predicted = other_bound + extra
    corrected = other_bound + extra
    own_device = False
    meas_total = other_bound if measured else None
    summary: dict[str, dict[str, float]] = {UNMEASURED: {"bound_s": other_bound}}
    rules = get_engine(framework).moe_kernels if moe_kernels is None else moe_kernels
    attn_rules = get_engine(framework).attention_kernels if attention_kernels is None else attention_kernels
    for (fam, key), items in by_key.items():
        src = kernel_source(hw.name, framework, fam, moe_kernel_key(key, hw, rules) if fam == "moe" else key)
        priced, fits, source, basis = src.key, src.fits, src.source, src.basis
        own_device |= src.own_device
        if not fits:  # nothing measured for this dtype: the bounds stand
            for it in items:
                other_bound += it[2]
                predicted += it[2]
                corrected += it[2]
                if meas_total is not None:  # measured
                    meas_total += it[2]
                for n, b in zip(it[3], it[5], strict=True):
                    nodes[n] = {
                        "family": None,
                        "bound_s": b,
                        "predicted_s": b,
                        "corrected_s": b,
                        "source": source,
                        "basis": basis,
                    }
            summary[UNMEASURED]["bound_s"] = other_bound
            continue
        rows = [with_key(fam, it[0], priced) for it in items]
        if fam == "all_reduce":
            rows = [{**r, "backend": framework} for r in rows]
        reps = np.array([it[1] for it in items])
        pred, corr = price_rows(
            hw, framework, fam, src, [it[0] for it in items], cold_l2=cold_l2, fp8_scales=fp8_scales
        )
        fam_bound = float(sum(it[2] for it in items))
        fam_pred = fam_corr = 0.0
        ratios = np.ones(len(items))  # each item's measured kernel ratio (the measured sum takes it too)
        for i, (it, pr, cr) in enumerate(zip(items, pred * reps, corr * reps, strict=True)):
            for n, share, b in zip(it[3], it[4], it[5], strict=True):
                other = (
                    attention_kernel_note(cs.graph.nodes[n], hw, attn_rules, framework)
                    if fam in ("context_attention", "generation_attention")
                    else None
                )
                k = 1.0
                scaled = attention_backend_curve(cs.graph.nodes[n], hw, attn_rules, framework, fam)
                if scaled is not None:  # the kernel that runs, by its measured ratio to the rows' kernel
                    curve, backend = scaled
                    isl = float(it[0]["isl"])
                    k = ratios[i] = curve.at(isl)
                    other = f"{other}; {curve.basis(backend, isl)}"
                # every kernel (a fused member: its share by width) at least its own bound, as the
                # simulator's tables price it; where the bound priced it, the coverage says so
                p_n, c_n = max(float(pr) * k * share, b), max(float(cr) * k * share, b)
                fam_pred += p_n
                fam_corr += c_n
                clamped = [
                    w for w, v in (("predicted_s", pr), ("corrected_s", cr)) if float(v) * k * share < b
                ]
                nodes[n] = {
                    "family": fam,
                    "bound_s": b,
                    "predicted_s": p_n,
                    "corrected_s": c_n,
                    "source": "neighbour" if other else source,
                    "basis": "; ".join(x for x in (basis, other) if x) if other else basis,
                    **({"fused_with": [m for m in it[3] if m != n]} if len(it[3]) > 1 else {}),
                    **({"clamped": clamped} if clamped else {}),
                }
        predicted += fam_pred
        corrected += fam_corr
        entry = summary.setdefault(fam, {"bound_s": 0.0, "predicted_s": 0.0, "corrected_s": 0.0})
        entry["bound_s"] += fam_bound
        entry["predicted_s"] += fam_pred
        entry["corrected_s"] += fam_corr
        if meas_total is not None:  # measured (the MoE curve is the measurements, interpolated)
            # the measured composition of the kernels that run: a kernel priced by its measured
            # ratio to the rows' kernel (attention_backend_curve) is measured by the same ratio
            meas = float(
                ((pred if fam == "moe" else measured_latency(fam, hw.name, framework, rows)) * ratios) @ reps
            )
            entry["measured_s"] = entry.get("measured_s", 0.0) + meas
            meas_total += meas
    if extra:  # the unmeasured ops' small kernels: their predicted time beside their bound
        summary[UNMEASURED].update(predicted_s=other_bound + extra, corrected_s=other_bound + extra)
    return Prediction(
        model=cs.label.split(" ")[0],
        device=hw.name,
        phase=phase,
        framework=framework,
        point=where,
        tp=tp,
        bound_s=total_bound,
        predicted_s=predicted,
        measured_s=meas_total,
        corrected_s=corrected,
        by_family=summary,
        calibrated_from=calibration_source(),
        nodes=nodes,
        coverage=coverage_of(nodes, "predicted_s"),
        calibrated=own_device,
        corrected_coverage=coverage_of(nodes, "corrected_s"),
    )
