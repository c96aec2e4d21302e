"""Roofline terms of measured kernels, from the rule registry.

Each family's rows are costed by the same rules the graphs use (``gemm``,
``attention`` with the causal mask and sliding window, ``all_reduce``), built
once per dtype group with symbolic shapes, bounded on a device with
:func:`costmodel.roofline.bound`, and compiled to numpy
(:func:`costmodel.frontier.compile_expr`): one vectorised call per group.

Dtype names of the corpus map to ours: ``bfloat16`` -> bf16, ``fp8`` and
``fp8_block`` -> fp8 (e4m3; block scales are 1/128 of the operand and not
counted, which keeps the bound a lower bound), ``nvfp4`` -> nvfp4 weights and
activations, ``int8_wo``/``int4_wo`` -> bf16 activations with int8/int4
weights, ``sq`` (SmoothQuant W8A8) -> int8. GEMM outputs are bf16.

Attention rows: context attention is causal self-attention over ``isl``
tokens (``window > 0`` caps each query at ``window`` keys); generation
attention is one query per sequence over ``kv_len = step + isl`` cached
tokens. MLA rows are DeepSeek-V3's latent attention (the corpus's only MLA
shape: 128 nope + 64 rope query/key dims, 128 value dims, a 512 + 64 latent
cache) with the table's ``num_heads`` on the rank (reading them as the model's
heads, divided by ``tp_size``, gives bounds 16x looser on the median row and no
tighter anywhere; as the rank's, no row falls below its bound): context as causal attention over the
up-projected keys and values (192 and 128 wide), generation as the absorbed form
over the shared 576-wide latent cache (``kv_shared``, values its first 512). MoE rows are one rank's routed experts: two ``grouped_gemm`` calls (up
``[h, I/tp]``: a row does not say whether its experts are gated, and some are
not, e.g. TensorRT-LLM's "nongated" kernels, so the bound counts the non-gated
minimum; and down ``[I/tp, h]``) over the
rank's ``T k / ep`` token-expert rows and ``E / ep`` experts, weights read for
the fewest experts any routing touches, ``min(E/ep, max(1, k/ep))``: the corpus
does not state how its "balanced" routing spreads tokens over experts, and
measured rows read far fewer experts' weights than uniform routing would. Attention computes at the lower of the query and KV precisions: with
an fp8 KV cache, TensorRT-LLM's and FlashInfer's kernels may quantise Q and
run the matmuls in fp8, and a lower bound must allow the faster roof. All-reduce rows are bounded with ``algorithm="in_network"``, the least
traffic any algorithm can move (each GPU sends and receives its vector once).

Besides the bound terms, each row gets the quantities the efficiency model
needs: the working set (DRAM bytes read + written) and the wave-quantisation
factor ``Q >= 1`` of its tiles on the device's SMs (:func:`wave_factor`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from ..cost import Cost
from ..dtypes import get_dtype
from ..errors import CostModelError
from ..frontier import compile_expr
from ..hardware import Hardware
from ..roofline import bound
from ..rules import op_cost
from ..symbols import dim
from .quantisation import GEMM_TILES, SPLIT_K, TILE, quant_factor, wave_factor, work_waves

__all__ = [
    "GEMM_DTYPES",
    "MLA_HEADS",
    "MLA_LATENT",
    "MLA_QK",
    "MLA_ROPE",
    "MLA_V",
    "TILE",
    "GEMM_TILES",
    "SPLIT_K",
    "KernelTerms",
    "kernel_terms",
    "wave_factor",
    "work_waves",
    "quant_factor",
]

#: corpus GEMM dtype -> (activation, weight, compute) dtypes of the gemm rule
GEMM_DTYPES: dict[str, tuple[str, str, str]] = {
    "bfloat16": ("bf16", "bf16", "bf16"),
    "fp8": ("fp8", "fp8", "fp8"),
    "fp8_block": ("fp8", "fp8", "fp8"),
    "nvfp4": ("nvfp4", "nvfp4", "nvfp4"),
    "int8_wo": ("bf16", "int8", "bf16"),
    "int4_wo": ("bf16", "int4", "bf16"),
    "sq": ("int8", "int8", "int8"),
}


#: DeepSeek-V3's MLA dims (config.json: qk_nope_head_dim 128, qk_rope_head_dim 64,
#: v_head_dim 128, kv_lora_rank 512), the only MLA shape the corpus measures
MLA_QK, MLA_V, MLA_LATENT, MLA_ROPE = 128 + 64, 128, 512, 64
#: DeepSeek-V3's attention heads (config.json ``num_attention_heads``): the corpus's MLA rows
#: split them ``tp_size`` ways (``num_heads = 128 / tp_size``; 64 heads also at ``tp_size`` 1)
MLA_HEADS = 128

#: corpus MoE dtype -> (activation, weight, compute) dtypes of the grouped_gemm rule
MOE_DTYPES: dict[str, tuple[str, str, str]] = {
    "bfloat16": ("bf16", "bf16", "bf16"),
    "fp8": ("fp8", "fp8", "fp8"),
    "fp8_block": ("fp8", "fp8", "fp8"),
    "int4_wo": ("bf16", "int4", "bf16"),
    "w4a16_mxfp4": ("bf16", "mxfp4", "bf16"),
    "nvfp4": ("nvfp4", "nvfp4", "nvfp4"),
    "w4a8_mxfp4_mxfp8": ("mxfp8", "mxfp4", "mxfp8"),
}


@dataclass(frozen=True)
class KernelTerms:
    """Per-row terms of measured kernels on one device (arrays aligned with the rows).

    ``terms`` are the roofline terms in seconds keyed as in
    :class:`costmodel.roofline.Bound` (``tensor``, ``vector``, ``sfu``,
    ``dram``, ``link:scale_up``); ``working_set`` the DRAM bytes read and
    written; ``quant`` the tile/wave quantisation factor (1 where none applies);
    ``waves`` how many rounds of work units (:func:`work_waves`) the SMs run;
    ``prologue_s`` the DRAM time of a separate pass before the kernel (the
    activation quantisation of a low-precision GEMM, :func:`prologue_cost`);
    ``ring_s`` an all-reduce's ring traffic ``2(p-1)/p n b`` over the link
    bandwidth (NCCL's bus-bandwidth convention), the efficiency model's input;
    ``model_memory_s`` the DRAM term the efficiency model reads where it differs
    from the bound's (MoE: the experts a balanced routing touches,
    ``min(E/ep, T k/ep)``, where the bound may only assume ``k/ep``).
    """

    terms: dict[str, np.ndarray]
    working_set: np.ndarray
    quant: np.ndarray
    unbounded: tuple[str, ...]
    waves: np.ndarray | None = None
    prologue_s: np.ndarray | None = None
    ring_s: np.ndarray | None = None
    model_memory_s: np.ndarray | None = None

    @property
    def compute_s(self) -> np.ndarray:
        """The slowest compute unit's term: ``max(tensor, vector, sfu)``."""
        parts = [self.terms[k] for k in ("tensor", "vector", "sfu") if k in self.terms]
        return np.maximum.reduce(parts) if parts else np.zeros_like(self.working_set)

    @property
    def memory_s(self) -> np.ndarray:
        """The DRAM term ``bytes / beta_dram``."""
        return self.terms.get("dram", np.zeros_like(self.working_set))

    @property
    def link_s(self) -> np.ndarray:
        """The link term (collectives), zero for on-chip kernels."""
        return self.terms.get("link:scale_up", np.zeros_like(self.working_set))


_M, _N, _K = dim("m"), dim("n"), dim("k")
_B, _S, _H, _HKV, _D, _W, _KV = (
    dim("batch"),
    dim("isl"),
    dim("heads"),
    dim("kv_heads"),
    dim("head_dim"),
    dim("window"),
    dim("kv_len"),
)
_E, _P = dim("elements"), dim("gpus")
_T, _HID, _INTER, _TOPK, _NE, _TP, _EP = (
    dim("tokens"),
    dim("hidden"),
    dim("inter"),
    dim("topk"),
    dim("experts"),
    dim("tp"),
    dim("ep"),
)


@functools.cache
def _group_cost(
    family: str, key: tuple[Any, ...], fp8_ok: bool = True
) -> tuple[Cost, tuple[sympy.Symbol, ...]]:
    if family == "gemm":
        a, w, c = GEMM_DTYPES[key[0]]
        cost = op_cost("gemm", M=_M, N=_N, K=_K, dtype=a, w_dtype=w, out_dtype="bf16", compute_dtype=c)
        return cost, (_M, _N, _K)
    if family in ("context_attention", "generation_attention"):
        attn, kv, windowed = key
        q_len, kv_len = (_S, _S) if family == "context_attention" else (1, _KV)
        cost = op_cost(
            "attention",
            batch=_B,
            heads=_H,
            kv_heads=_HKV,
            q_len=q_len,
            kv_len=kv_len,
            head_dim=_D,
            dtype=get_dtype(attn).name,
            kv_dtype=get_dtype(kv).name,
            out_dtype="bf16",
            compute_dtype="fp8" if fp8_ok and "fp8" in (attn, kv) else get_dtype(attn).name,
            causal=True,
            window=_W if windowed else None,
        )
        return cost, (_B, _S, _H, _HKV, _D, _W, _KV)
    if family in ("context_mla", "generation_mla"):
        attn, kv = key
        heads = _H  # the table's num_heads are the rank's (tp_size already applied; see module doc)
        common = {
            "batch": _B,
            "heads": heads,
            "dtype": get_dtype(attn).name,
            "kv_dtype": get_dtype(kv).name,
            "out_dtype": "bf16",
            "compute_dtype": "fp8" if fp8_ok and "fp8" in (attn, kv) else get_dtype(attn).name,
            "causal": True,
        }
        if family == "context_mla":
            cost = op_cost(
                "attention", kv_heads=heads, q_len=_S, kv_len=_S, head_dim=MLA_QK, v_head_dim=MLA_V, **common
            )
        else:
            cost = op_cost(
                "attention",
                kv_heads=1,
                q_len=1,
                kv_len=_KV,
                head_dim=MLA_LATENT + MLA_ROPE,
                v_head_dim=MLA_LATENT,
                kv_shared=True,
                **common,
            )
        return cost, (_B, _S, _H, _TP, _KV)
    if family == "all_reduce":
        cost = op_cost("all_reduce", elements=_E, p=_P, dtype=key[0], algorithm="in_network")
        return cost, (_E, _P)
    if family == "moe":
        a, w, c = MOE_DTYPES[key[0]]
        rows, experts, inter = _T * _TOPK / _EP, _NE / _EP, _INTER / _TP
        # the fewest experts any routing touches on this rank: a token's k experts are
        # distinct, spread over ep ranks; the corpus does not say how its "balanced"
        # routing spreads tokens over experts, so the bound cannot assume more
        fewest = sympy.Min(experts, sympy.Max(1, _TOPK / _EP))
        kw = {"dtype": a, "w_dtype": w, "out_dtype": "bf16", "compute_dtype": c, "experts_read": fewest}
        cost = op_cost(
            "grouped_gemm", tokens=rows, experts=experts, top_k=1, N=inter, K=_HID, **kw
        ) + op_cost("grouped_gemm", tokens=rows, experts=experts, top_k=1, N=_HID, K=inter, **kw)
        return cost, (_T, _HID, _INTER, _TOPK, _NE, _TP, _EP)
    raise CostModelError(f"no kernel terms for family {family!r}")


def prologue_cost(dtype: str) -> Cost | None:
    """The pass a framework's low-precision linear layer runs before its GEMM, or None.

    fp8 and NVFP4 linear layers (TensorRT-LLM, vLLM, SGLang) quantise the bf16
    activations on the fly (per-token or per-block scales): one elementwise
    pass over ``A[m, k]`` reading bf16 and writing the low-precision copy. It is
    its own kernel, so the efficiency model adds its time; the lower bound
    leaves it out (a bound of the GEMM alone stays a lower bound).
    """
    a = GEMM_DTYPES[dtype][0]
    if a == "bf16" or a == "int8":
        return None
    return op_cost("elementwise", n=_M * _K, dtype="bf16", out_dtype=a)


@functools.cache
def _prologue(dtype: str, hw: Hardware) -> Any:
    cost = prologue_cost(dtype)
    if cost is None:
        return None
    return compile_expr(cost.bytes_at("dram") / hw.bandwidth("dram"), (_M, _N, _K))


@functools.cache
def _moe_memory(dtype: str, hw: Hardware) -> Any:
    """DRAM seconds of a MoE rank with balanced routing: every token-expert row on its own expert."""
    a, w, c = MOE_DTYPES[dtype]
    rows, experts, inter = _T * _TOPK / _EP, _NE / _EP, _INTER / _TP
    kw = {"dtype": a, "w_dtype": w, "out_dtype": "bf16", "compute_dtype": c}
    kw["experts_read"] = sympy.Min(experts, sympy.Max(1, rows))
    cost = op_cost("grouped_gemm", tokens=rows, experts=experts, top_k=1, N=inter, K=_HID, **kw) + op_cost(
        "grouped_gemm", tokens=rows, experts=experts, top_k=1, N=_HID, K=inter, **kw
    )
    return compile_expr(
        cost.bytes_at("dram") / hw.bandwidth("dram"), (_T, _HID, _INTER, _TOPK, _NE, _TP, _EP)
    )


@functools.cache
def _moe_prologue(dtype: str, hw: Hardware) -> Any:
    """The activation quantisation of a low-precision MoE: ``T x h`` bf16 elements to ``a``."""
    a = MOE_DTYPES[dtype][0]
    if a == "bf16":
        return None
    cost = op_cost("elementwise", n=_T * _HID, dtype="bf16", out_dtype=a)
    return compile_expr(
        cost.bytes_at("dram") / hw.bandwidth("dram"), (_T, _HID, _INTER, _TOPK, _NE, _TP, _EP)
    )


@functools.cache
def _ring(dtype: str, hw: Hardware) -> Any:
    cost = op_cost("all_reduce", elements=_E, p=_P, dtype=dtype, algorithm="ring")
    return compile_expr(cost.comm_terms["scale_up"] / hw.link("scale_up").bandwidth_bytes_per_s, (_E, _P))


@functools.cache
def _compiled(family: str, key: tuple[Any, ...], hw: Hardware) -> tuple[dict[str, Any], Any, tuple[str, ...]]:
    # a device without fp8 tensor cores (A100) cannot compute an fp8 KV cache in fp8
    cost, syms = _group_cost(family, key, hw.peak("tensor", "fp8") is not None)
    b = bound(cost, hw)
    terms = {label: compile_expr(t, syms) for label, t in b.terms.items()}
    ws = compile_expr(cost.bytes_at("dram"), syms)
    return terms, ws, tuple(b.unbounded)


def _groups(family: str, df: Any) -> tuple[list[tuple[Any, ...]], np.ndarray]:
    """Each row's group key (the dtype combination) and the group index per row."""
    import pandas as pd

    cols: list[Any]  # one dtype, two (attention, KV) or those and the window flag
    if family in ("gemm", "moe", "all_reduce"):
        cols = [df["dtype"]]
    elif family in ("context_mla", "generation_mla"):
        cols = [df["attn_dtype"], df["kv_dtype"]]
    else:
        cols = [df["attn_dtype"], df["kv_dtype"], df["window"] > 0]
    # each column's values numbered (columnwise), the rows' combinations as one mixed-radix
    # number, each distinct one spelt out once as a tuple of the columns' Python values
    code = np.zeros(len(df), dtype=np.int64)
    values, radix = [], []
    for c in cols:
        k, u = pd.factorize(c, use_na_sentinel=False)
        code = code * len(u) + k
        values.append(u.tolist())
        radix.append(len(u))
    combos, codes = np.unique(code, return_inverse=True)
    found = []
    for v in combos.tolist():
        digits = []
        for n in reversed(radix):
            v, d = divmod(v, n)
            digits.append(d)
        found.append(tuple(vals[d] for vals, d in zip(values, reversed(digits), strict=True)))
    if family == "all_reduce":  # the corpus's dtype names to ours (two names may be one dtype)
        found = [(get_dtype(c[0]).name,) for c in found]
    uniq = sorted(set(found), key=str)
    index = {k: i for i, k in enumerate(uniq)}
    return uniq, np.array([index[k] for k in found], dtype=int)[codes]


def _args(family: str, df: Any) -> list[np.ndarray]:
    f = lambda c: df[c].to_numpy(dtype=float)  # noqa: E731
    if family == "gemm":
        return [f("m"), f("n"), f("k")]
    if family == "all_reduce":
        return [f("elements"), f("gpus")]
    if family == "moe":
        return [f(c) for c in ("tokens", "hidden", "inter", "topk", "experts", "tp", "ep")]
    if family in ("context_mla", "generation_mla"):
        return [f("batch"), f("isl"), f("heads"), f("tp"), f("step") + f("isl")]
    one = np.ones(len(df))
    kv_len = f("step") + f("isl") if family == "generation_attention" else one
    window = np.where(f("window") > 0, f("window"), 1.0)
    return [f("batch"), f("isl"), f("heads"), f("kv_heads"), f("head_dim"), window, kv_len]


def kernel_terms(family: str, df: Any, hw: Hardware) -> KernelTerms:
    """Roofline terms of every row of ``df`` (a :func:`costmodel.measured.load` frame) on ``hw``."""
    keys, gi = _groups(family, df)
    args = _args(family, df)
    n = len(df)
    labels: set[str] = set()
    per_group = []
    unbounded: set[str] = set()
    for key in keys:
        if family == "gemm" and key[0] not in GEMM_DTYPES:
            raise CostModelError(f"gemm dtype {key[0]!r} not mapped; known: {', '.join(GEMM_DTYPES)}")
        if family == "moe" and key[0] not in MOE_DTYPES:
            raise CostModelError(f"moe dtype {key[0]!r} not mapped; known: {', '.join(MOE_DTYPES)}")
        terms, ws, unb = _compiled(family, key, hw)
        labels |= set(terms)
        unbounded |= set(unb)
        per_group.append((terms, ws))
    out = {label: np.zeros(n) for label in labels}
    working = np.zeros(n)
    prologue = np.zeros(n)
    ring = np.zeros(n)
    model_mem = np.zeros(n) if family == "moe" else None
    for g, (terms, ws) in enumerate(per_group):
        sel = gi == g
        if not sel.any():
            continue
        sub = [a[sel] for a in args]
        for label, fn in terms.items():
            out[label][sel] = fn(*sub)
        working[sel] = ws(*sub)
        pro = (
            _prologue(keys[g][0], hw)
            if family == "gemm"
            else _moe_prologue(keys[g][0], hw)
            if family == "moe"
            else None
        )
        if pro is not None:
            prologue[sel] = pro(*sub)
        if family == "all_reduce":
            ring[sel] = _ring(keys[g][0], hw)(*sub)
        if model_mem is not None:
            model_mem[sel] = _moe_memory(keys[g][0], hw)(*sub)
    return KernelTerms(
        out,
        working,
        quant_factor(family, df, hw),
        tuple(sorted(unbounded)),
        work_waves(family, df, hw),
        prologue,
        ring,
        model_mem,
    )
