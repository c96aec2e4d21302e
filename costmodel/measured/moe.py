"""Fused-MoE kernels priced from the corpus's own measurements (no fitted model).

The ``aiconfigurator-core`` wheel times one rank's routed-expert MLP as one call of each
framework's fused-MoE entry point (``moe/<framework>/<version>/moe_perf.parquet``, read with
:mod:`.corpus`'s file discovery and version choice): vLLM's ``fused_experts`` (gate/up GEMM,
``silu_and_mul``, down GEMM and the top-k weighted sum, routing excluded:
``collector/vllm/collect_moe.py`` of ai-dynamo/aiconfigurator), SGLang's fused Triton MoE and
TensorRT-LLM's ``moe_torch_flow`` kernels, over ``num_tokens`` 1 .. 16384 for the MoE shapes of
published models, each at ``moe_tp_size`` / ``moe_ep_size`` and three per-expert loads
(``distribution``: ``balanced``, ``power_law_1.01``, ``power_law_1.2``).

A kernel of shape :class:`MoEShape` (hidden ``h``, the rank's expert width ``I/tp``, top-``k``,
``E`` experts, ``ep`` ranks, dtype, gated or not) at ``T`` tokens is priced by
:func:`moe_curve` in this order:

1. the device's own rows of the framework, the dtype and the shape (``measured``);
2. the same shape from another framework on the device, then from another device, those of the
   device's architecture generation and memory kind first, the nearest DRAM bandwidth first
   within each (``neighbour``), the latter scaled by the ratio of the two devices' roofline
   bounds of the shape (:func:`moe_bound_s`: the graphs' own expert bound);
3. the nearest measured shape (the least ``sum |log(x / x')|`` over ``h, I/tp, k, E``; ``ep``
   must match), scaled at each measured token count by the ratio of the two shapes' roofline
   bounds (``neighbour``, the shape named):

.. math:: \\hat t(T) = t_{meas}(T)\\,\\frac{t^{roof}_{shape}(T)}{t^{roof}_{meas\\,shape}(T)}.

At each step a dtype the corpus lacks may be priced by a named substitute (``fp8`` by
``fp8_block`` kernels, ``float16`` by ``bfloat16``). Rows of a shape with the same per-rank width are one kernel (``I = 14336, tp = 2`` runs what
``I = 7168, tp = 1`` runs); where several kernels or splits time the same tokens the fastest
is taken (the dispatcher's choice, as for GEMMs). Kernels named ``nongated`` (TensorRT-LLM's
for non-gated MLPs) price only non-gated experts, the others only gated ones. Between measured
token counts the latency is linear in ``log T``; below the smallest it is that point's; beyond
the largest it grows in proportion to ``T`` (compute-bound: the work is ``2 T k`` rows of the
two GEMMs). The caller clamps every price to its roofline bound.

What the measured span holds beyond the expert GEMMs: vLLM's ``fused_experts`` also runs the
activation and the weighted top-k sum. The model step keeps those graph nodes at their roofline
bounds beside the kernel (:func:`graphs.serving.pricing.predict.expert_activations`: the activation is
no small kernel of its own), a few nanoseconds each at decode batches: a lower bound counted
twice, not a launch.

The kernel the engine runs: a shape may name one (``kernel``, a word of the corpus's
``kernel_source``, with the padding ``pad`` = (hidden multiple, expert-width multiple) it runs
the weights at), where the engine's own choice is not the corpus's fastest: vLLM 0.10-0.11 ran
gpt-oss's MXFP4 experts on Hopper with Marlin, not OpenAI's Triton kernel the corpus measures
for H100 (the engine profiles' :attr:`~graphs.serving.engines.EngineProfile.moe_kernels` say
when, with sources). Its rows are taken before any other kernel's, the device's own first (its
measured shape, else the nearest, scaled), then the other devices (those of its architecture
generation and memory kind first, the nearest DRAM bandwidth first within each; each its own
shape first): a kernel's efficiency is a property of the device it runs on, which
the bound ratio of two shapes keeps and that of two devices does not. A padded kernel computes
on its padded matrices, so the bound ratios that scale its rows are of the padded shapes
(:meth:`MoEShape.padded`). Where the corpus has no rows of the kernel for the shape's dtype,
the search above prices it, and the basis says so.

The *bridge* between two devices: the ratio of two devices' bounds carries a kernel's time
only where both sit in the same regime. Near its ridge a kernel loses efficiency that the
bound (a ``max`` of compute and memory) does not show, and two devices' ridges sit at
different per-expert loads. So another device's rows of a named kernel are also scaled by the
factor the corpus measures for a kernel of that name on both devices (:func:`device_bridge`:
the measured time ratio over the bound ratio at the nearest shape both measure, as a function
of the rows per expert ``T k / E``). SGLang's Marlin MoE (``int4_wo``) is measured on the
A100 and on the RTX PRO 6000: at 16-64 rows per expert (the A100's ridge for 4-bit weights is
near 38, the RTX PRO 6000's near 70) the A100 takes 1.3-1.7x the bound ratio's share, about
1.0 below 10 and above 128; vLLM's MXFP4 Marlin rows, measured on the RTX PRO 6000 only, price
gpt-oss's experts on the A100 with it. Without such rows the bound ratio stands alone, said.
The unnamed search above keeps the bound ratio: its curve is the fastest kernel at each token
count, no one kernel a bridge could name.

How a harness's ``ep`` > 1 rows are read: a row is one rank's share of the routed work, ``T k /
ep`` token-expert rows on ``E / ep`` experts, except where the collector's own code says it times
something else. SGLang 0.5.10's (:data:`~.corpus.RANK0_CLAMPED`; ``collector/sglang/collect_moe.py``
of ai-dynamo/aiconfigurator at 006afd78: ``build_rank0_workloads``, from PR 753; the A100 data from
PR 963) keeps the tokens that route to any of rank 0's experts, sets their other picks to expert
``-1`` with weight 0 and clamps ``-1`` to expert 0 ("the zero weight ensures no contribution"), so
each kept token still runs all ``k`` of its rows. Under its balanced routing (``balanced_logits``:
token ``t``'s ``i``-th pick is ``(t + i s) mod E``, ``s = ceil(E / k)``) a rank holding ``E/ep >= s``
experts keeps every token and computes ``T k`` rows, ``ep`` times one rank's share, while it reads
the weights of about one rank's share of experts: the rows are a rank's share where the kernel is
memory-bound and ``ep`` times it where it is compute-bound, and A100's rows show both (h 7168, I
2048, top-8 of 256: 155 / 150 / 149 / 149 ms at ep 1 / 2 / 4 / 8 and 16,384 tokens; 12.6 / 6.5 /
3.5 / 2.0 ms at 32 tokens). No one token count reads them right at every ``T``, so the harness's
``ep`` > 1 rows are left out and its ``ep = 1`` rows of the shape price the rank at ``1/ep`` of
their time, the bound ratio of the two (:func:`moe_bound_s` divides by ``ep`` alone): the same
per-expert loads on ``1/ep`` of the experts (the basis says so). That agrees with the clamped rows
where they can be read: 3.15 against 3.5 ms at 32 tokens and ep 4 (rank 0 also reads expert 0,
where the remote picks land), while at 4,096-16,384 tokens the clamped rows take 0.91-0.97 of ep
1's time at the same ``T``: the same rows on ``1/ep`` of the weights.

Later harnesses' ``ep`` rows mostly fall as shares do, but not all, and no column says which
path timed a table. So every expert shape of SGLang's harness (kernel, dtype, full width) is also
read by what a share must do (:func:`~.corpus.rank0_clamped`, :data:`~.corpus.NOT_A_SHARE`): at
``ep = 2`` a rank computes half the token-expert rows on half the experts, the same rows per
expert, so where the kernel computes (``T >= 4096``) a share takes about half of ``ep 1``'s time.
At ``moe_tp = 1`` the corpus's groups have two modes (0.45-0.6 and 0.95-1.05, 13 of 1,154
between 0.75 and 0.85); a shape whose ``ep 2`` rows there take 0.85 of ``ep 1``'s time or more,
and whose rows show one of the two sourced paths below (every ``ep`` at least 0.85 of what the
clamp keeps, :func:`~.corpus.clamp_kept`; or ``ep 2`` at ``ep 1``'s time at 64 tokens or fewer
too), is read, at every ``moe_tp``, as the clamped harness is: its ``ep 1`` rows at ``1/ep`` (the
basis gives the ratio and the path). Two sourced paths of SGLang's collector make such rows: the rank-0 clamp, kept
for the raw Triton path in 0.5.14 (ai-dynamo/aiconfigurator PR 1342, ``run_moe_torch``: the
framework's own ``FusedMoE`` layer for quantised types, non-softmax routing and other backends,
``build_rank0_workloads`` otherwise; Mixtral's, Gemma-4's and Nemotron-3-Super's shapes), and
DeepSeek's grouped top-k (8 groups, top 4) over the strided balanced logits, whose tied group
scores put every pick on experts 0-127, all of them rank 0's at ``ep = 2`` (DeepSeek-V3
``fp8_block`` on H100 and H200: ``ep 2`` takes ``ep 1``'s time at every ``T``, ``ep 8`` 0.64 of
it, priced at 14x its bound before this reading). At a few tokens the DeepSeek shape's ``ep 1``
rows read only those 128 experts' weights, so ``1/ep`` of them can fall under a rank's bound,
where the caller's clamp holds it. Other harnesses' rows in the second cluster (TensorRT-LLM's
min-latency NVFP4 and some cutlass rows on B200 and GB200, vLLM 0.24's DeepSeek FlashInfer rows)
have no source saying why and are read as measured (NOT RESOLVED); a shape measured without
``ep = 2`` rows at ``moe_tp = 1`` is read as measured.

Per-expert load: :func:`distribution_for` maps the engine's routing model to the nearest
measured ``distribution`` (uniform: ``balanced``; Zipf with exponent ``s > 0``: the power law
of the nearest exponent, 1.01 or 1.2). A shape measured without that distribution takes the
balanced rows (a neighbour, said).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CostModelError
from .corpus import SYSTEMS, MeasuredDataError, rank0_clamped, table_frame

__all__ = [
    "DISTRIBUTIONS",
    "Bridge",
    "MoEShape",
    "MoECurve",
    "device_bridge",
    "distribution_for",
    "moe_curve",
    "moe_bound_s",
]

#: the per-expert loads the corpus measures (the ``distribution`` column)
DISTRIBUTIONS = ("balanced", "power_law_1.01", "power_law_1.2")

#: a dtype the corpus may not measure for a shape -> the one whose kernels price it (named)
_SUBSTITUTES = {"fp8": "fp8_block", "float16": "bfloat16"}

#: a kernel's name: a word of the corpus's ``kernel_source`` (``marlin``)
_KERNEL_WORD = re.compile(r"[a-z0-9_]{1,40}")


def distribution_for(kind: str = "uniform", exponent: float = 0.0) -> str:
    """The measured ``distribution`` nearest a routing model (module doc): ``uniform`` (or Zipf
    with ``s = 0``) -> ``balanced``; ``zipf`` with ``s > 0`` -> ``power_law_a`` with ``a`` the
    measured exponent nearest ``s``; a ``histogram`` has no measured counterpart: refused."""
    if kind == "uniform" or (kind == "zipf" and exponent == 0):
        return "balanced"
    if kind == "zipf":
        alphas = [float(d.rsplit("_", 1)[1]) for d in DISTRIBUTIONS if d != "balanced"]
        best = min(alphas, key=lambda a: abs(a - exponent))
        return f"power_law_{best:g}"
    raise CostModelError(f"routing {kind!r} has no measured MoE distribution; measured: uniform, zipf:S")


@dataclass(frozen=True)
class MoEShape:
    """One rank's routed experts: ``hidden`` (model width), ``inter`` (one expert's width on the
    rank, ``I/tp``), ``topk``, ``experts`` (all of them), ``ep`` ranks, the corpus ``dtype``
    (``bfloat16``, ``fp8`` ...), ``gated`` (gate and up projections) and the ``distribution``."""

    hidden: int
    inter: int
    topk: int
    experts: int
    ep: int = 1
    dtype: str = "bfloat16"
    gated: bool = True
    distribution: str = "balanced"
    kernel: str = ""
    pad: tuple[int, int] = (1, 1)

    def __post_init__(self) -> None:
        for f in ("hidden", "inter", "topk", "experts", "ep"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise CostModelError(f"MoE shape {f} must be a whole number >= 1, got {v!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise CostModelError(
                f"MoE distribution {self.distribution!r} not measured; measured: {', '.join(DISTRIBUTIONS)}"
            )
        if self.kernel and not _KERNEL_WORD.fullmatch(self.kernel):
            raise CostModelError(
                f"MoE kernel {self.kernel[:40]!r} must be a word of a kernel_source (lower-case letters, "
                "digits, '_')"
            )
        if (
            not isinstance(self.pad, tuple)
            or len(self.pad) != 2
            or not all(isinstance(m, int) and not isinstance(m, bool) and 1 <= m <= 4096 for m in self.pad)
        ):
            raise CostModelError(f"MoE pad must be two whole multiples in [1, 4096], got {self.pad!r}")
        if self.pad != (1, 1) and not self.kernel:
            raise CostModelError(
                f"MoE pad {self.pad} without a kernel: pad is the padding a named kernel runs its weights at"
            )

    @property
    def key(self) -> str:
        """This shape as one string (a kernel source's key: :meth:`from_key` reads it back); a
        named kernel adds ``kernel=K,pad=HxI`` at the end."""
        gated = "gated" if self.gated else "nongated"
        key = (
            f"{self.dtype} h{self.hidden} i{self.inter} k{self.topk} e{self.experts} ep{self.ep} "
            f"{gated} {self.distribution}"
        )
        if self.kernel:
            key += f" kernel={self.kernel},pad={self.pad[0]}x{self.pad[1]}"
        return key

    @classmethod
    def from_key(cls, key: str) -> MoEShape:
        """The shape of a :attr:`key`."""
        parts = key.split(" ")
        if len(parts) not in (8, 9):
            raise CostModelError(
                f"MoE kernel key {key[:80]!r} is not 'dtype hH iI kK eE epP gated dist [kernel=K,pad=HxI]'"
            )
        dtype, h, i, k, e, ep, gated, dist = parts[:8]
        kernel, pad = "", (1, 1)
        try:
            hid, inter, topk, experts, ranks = (int(x.lstrip("hikep")) for x in (h, i, k, e, ep))
            if len(parts) == 9:
                got = dict(kv.split("=", 1) for kv in parts[8].split(","))
                kernel = got["kernel"]
                ph, _, pi = got["pad"].partition("x")
                pad = (int(ph), int(pi))
        except (ValueError, KeyError) as exc:
            raise CostModelError(
                f"MoE kernel key {key[:80]!r} has a non-integer dim or a malformed kernel"
            ) from exc
        return cls(hid, inter, topk, experts, ranks, dtype, gated == "gated", dist, kernel, pad)

    def padded(self) -> MoEShape:
        """The shape the named kernel computes on: ``hidden`` and ``inter`` rounded up to the
        multiples of :attr:`pad` (vLLM's Marlin MXFP4 MoE pads its weights to ``n % 256 == 0``,
        ``k % 128 == 0``: ``hidden`` to 256, the rank's expert width to 128), the kernel dropped.

        >>> MoEShape(2880, 1440, 4, 128, dtype="w4a16_mxfp4", kernel="marlin", pad=(256, 128)).padded().label
        'h 3072, I/tp 1536, top-4 of 128, ep 1'
        """
        up = [-(-v // m) * m for v, m in zip((self.hidden, self.inter), self.pad, strict=True)]
        return dataclasses.replace(self, hidden=up[0], inter=up[1], kernel="", pad=(1, 1))

    @property
    def label(self) -> str:
        return f"h {self.hidden}, I/tp {self.inter}, top-{self.topk} of {self.experts}, ep {self.ep}"


@dataclass(frozen=True)
class MoECurve:
    """Measured seconds of one kernel over token counts (scaled for a neighbour) and what they
    rest on: ``source`` measured or neighbour, ``basis`` why a neighbour, ``own_device``."""

    tokens: np.ndarray
    seconds: np.ndarray
    source: str
    basis: str
    own_device: bool

    def at(self, tokens: Any) -> np.ndarray:
        """Seconds at ``tokens`` (module doc: linear in ``log T`` between measured counts, the
        first point's below them, in proportion to ``T`` beyond them)."""
        t = np.asarray(tokens, dtype=float)
        if np.any(~np.isfinite(t)) or np.any(t <= 0):
            raise CostModelError("MoE kernel tokens must be positive numbers")
        lx = np.log(self.tokens)
        inside = np.interp(np.log(t), lx, self.seconds)
        beyond = self.seconds[-1] * t / self.tokens[-1]
        return np.where(t > self.tokens[-1], beyond, inside)


_COLUMNS = (
    "framework",
    "kernel_source",
    "dtype",
    "distribution",
    "gated",
    "tokens",
    "hidden",
    "inter_rank",
    "topk",
    "experts",
    "ep",
    "latency_s",
    "ep_note",
)


@functools.cache
def _table(system: str) -> Any:
    """The MoE rows of ``system`` (every framework, kernel and distribution), seconds, with the
    rank's expert width ``inter_rank = inter_size / moe_tp_size``; None without a table."""
    df = table_frame(system, "moe")
    if df is None:
        return None
    out = df.rename(
        columns={
            "num_tokens": "tokens",
            "hidden_size": "hidden",
            "num_experts": "experts",
            "moe_ep_size": "ep",
            "moe_dtype": "dtype",
        }
    )
    out = out[out["latency"].astype(float) > 0].copy()
    out["inter_rank"] = out["inter_size"].to_numpy(dtype=float) / out["moe_tp_size"].to_numpy(dtype=float)
    out["latency_s"] = out["latency"].astype(float) * 1e-3
    out["gated"] = ~out["kernel_source"].astype(str).str.contains("nongated")
    for c in ("dtype", "distribution", "framework", "kernel_source"):
        out[c] = out[c].astype(str)
    out = _rank0_read(out)
    return out[list(_COLUMNS)].reset_index(drop=True)


def _rank0_read(df: Any) -> Any:
    """``df`` (one system's rows, with ``version``) with the :data:`~.corpus.RANK0_CLAMPED`
    harnesses' ``ep`` > 1 rows replaced (module doc): for each balanced shape they measured at an
    ``ep``, the harness's ``ep = 1`` rows of the shape at ``1/ep`` of their time, ``ep_note``
    naming the harness; their power-law ``ep`` > 1 rows are left out."""
    import pandas as pd

    label = rank0_clamped(df)
    harness = label != ""
    out = df.assign(ep_note="")
    clamped = harness & (df["ep"].to_numpy() > 1)
    if not clamped.any():
        return out
    keys = ["framework", "version", "kernel_source", "dtype", "distribution", "hidden", "inter_rank", "topk", "experts"]
    wanted = df[clamped & (df["distribution"] == "balanced").to_numpy()][[*keys, "ep"]].drop_duplicates()
    first = harness & (df["ep"].to_numpy() == 1)
    one = out[first].assign(ep_note=label[first])
    made = one.drop(columns="ep").merge(wanted, on=keys)
    made["latency_s"] = made["latency_s"] / made["ep"]
    return pd.concat([out[~clamped], made[out.columns]], ignore_index=True)


def _systems(device: str) -> list[str]:
    return [s for s, d in SYSTEMS.items() if d == device]


def _others(device: str) -> list[str]:
    """The other measured systems: those of ``device``'s architecture generation and memory kind
    first (an H100 PCIe's are the H100 SXM's and H200's, Hopper HBM, not the A100's nearer
    bandwidth: a kernel's efficiency goes with the SMs that run it), then the rest; in each, the
    nearest DRAM bandwidth to ``device``'s first."""
    from ..hardware import get_device

    hw = get_device(device)
    bw = float(hw.bandwidth("dram"))
    family = (hw.generation, hw.memory_kind)

    def order(s: str) -> tuple[bool, float]:
        other = get_device(SYSTEMS[s])
        kin = bool(hw.generation) and (other.generation, other.memory_kind) == family
        return (not kin, abs(math.log(float(other.bandwidth("dram")) / bw)))

    return sorted((s for s in SYSTEMS if SYSTEMS[s] != device), key=order)


def _pool(system: str, framework: str | None, exclude: str | None, shape: MoEShape) -> Any:
    """Rows of ``system`` (one framework, or every other than ``exclude``) of the shape's gating,
    ``ep`` and named kernel (its word in ``kernel_source``), or None."""
    df = _table(system)
    if df is None:
        return None
    if framework is not None:
        df = df[df["framework"] == framework]
    if exclude is not None:
        df = df[df["framework"] != exclude]
    df = df[(df["gated"] == shape.gated) & (df["ep"] == shape.ep)]
    if shape.kernel:  # the kernel's name as whole '_'-separated words of the kernel_source
        df = df[df["kernel_source"].str.contains(rf"(?:^|_){re.escape(shape.kernel)}(?:_|$)", regex=True)]
    return df if len(df) else None


def _curve(df: Any) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, seconds) of the fastest measurement per token count."""
    best = df.groupby("tokens")["latency_s"].min().sort_index()
    return best.index.to_numpy(dtype=float), best.to_numpy(dtype=float)


def _shape_rows(df: Any, shape: MoEShape) -> Any:
    sel = (
        (df["hidden"] == shape.hidden)
        & (df["inter_rank"] == shape.inter)
        & (df["topk"] == shape.topk)
        & (df["experts"] == shape.experts)
    )
    return df[sel]


def _distribution_rows(df: Any, want: str) -> tuple[Any, str]:
    """The rows of ``want``, else the balanced ones (the basis says so), else none."""
    hit = df[df["distribution"] == want]
    if len(hit) or want == "balanced":
        return hit, ""
    return df[df["distribution"] == "balanced"], f"balanced rows for {want} routing"


def moe_bound_s(device: str, shape: MoEShape, tokens: Any) -> np.ndarray:
    """Roofline bound (s) of one rank's routed experts of ``shape`` on ``device`` at each of
    ``tokens``, as the model graphs cost them: the ``grouped_gemm`` rule's gate/up
    (``[h, 2 I/tp]``, ``[h, I/tp]`` when not gated) and down (``[I/tp, h]``) over ``T k`` rows, the
    weights of the experts uniform routing touches (:func:`costmodel.rules.experts_touched`),
    one ``1/ep`` share of it:

    .. math:: t^{roof}(T) = \\max\\Big(\\max_u \\frac{F_u(T)}{ep\\,P_u},\\ \\frac{D(T)}{ep\\,\\beta}\\Big).

    The ratio of two of these scales a neighbour's measurements (module doc)."""
    from ..cost import as_float
    from ..hardware import get_device
    from ..roofline import bound
    from ..rules import op_cost
    from .kernels import MOE_DTYPES

    if shape.dtype not in MOE_DTYPES:
        raise MeasuredDataError(f"moe dtype {shape.dtype!r} has no bound; known: {', '.join(MOE_DTYPES)}")
    a, w, c = MOE_DTYPES[shape.dtype]
    hw = get_device(device)
    kw = {"experts": shape.experts, "top_k": shape.topk, "dtype": a, "w_dtype": w, "compute_dtype": c}
    up = shape.inter * (2 if shape.gated else 1)
    out = []
    for t in np.atleast_1d(np.asarray(tokens, dtype=float)):
        n = round(float(t))
        cost = op_cost("grouped_gemm", tokens=n, N=up, K=shape.hidden, out_dtype="bf16", **kw) + op_cost(
            "grouped_gemm", tokens=n, N=shape.hidden, K=shape.inter, out_dtype="bf16", **kw
        )
        out.append(as_float(bound(cost, hw).lower, what="moe bound") / shape.ep)
    return np.array(out)


def _distance(df: Any, shape: MoEShape) -> np.ndarray:
    """``sum |log(x / x')|`` over hidden, rank width, top-k and experts of each row to ``shape``."""
    d = np.zeros(len(df))
    for col, v in (("hidden", shape.hidden), ("inter_rank", shape.inter), ("topk", shape.topk)):
        d += np.abs(np.log(df[col].to_numpy(dtype=float) / v))
    return d + np.abs(np.log(df["experts"].to_numpy(dtype=float) / shape.experts))


@functools.cache
def moe_curve(device: str, framework: str, shape: MoEShape) -> MoECurve | None:
    """The measured curve pricing ``shape`` for ``framework`` on ``device`` (module doc: own
    rows, another framework's, another device's, then the nearest shape; a named kernel's rows
    first, the device's own at any shape before another device's), or None when the corpus
    has no fused-MoE rows of the shape's dtype (or its substitute), gating and ``ep`` at all."""
    if shape.kernel:
        got = _kernel_curve(device, framework, shape)
        if got is not None:
            return got
        plain = moe_curve(device, framework, dataclasses.replace(shape, kernel="", pad=(1, 1)))
        if plain is None:
            return None
        lack = f"moe: no {shape.kernel} {shape.dtype} kernels measured (the engine runs them): the search prices it"
        return dataclasses.replace(
            plain, source="neighbour", basis="; ".join(b for b in (lack, plain.basis) if b)
        )
    own = _systems(device)
    pools: list[tuple[str, str | None, str | None, list[str]]] = []
    for s in own:
        pools.append((s, framework, None, []))
        pools.append(
            (s, None, framework, [f"moe: other frameworks' kernels (no {framework} rows of the shape)"])
        )
    for s in _others(device):
        pools.append(
            (s, framework, None, [f"moe: {SYSTEMS[s]}'s {framework} kernels scaled by the bound ratio"])
        )
        pools.append(
            (
                s,
                None,
                framework,
                [f"moe: {SYSTEMS[s]}'s kernels of other frameworks, scaled by the bound ratio"],
            )
        )
    dtypes = [shape.dtype] + ([_SUBSTITUTES[shape.dtype]] if shape.dtype in _SUBSTITUTES else [])
    for exact in (True, False):
        for system, fw, exclude, why in pools:
            base = _pool(system, fw, exclude, shape)
            if base is None:
                continue
            for dt in dtypes:
                rows = base[base["dtype"] == dt]
                if not len(rows):
                    continue
                basis = list(why) + ([f"moe {dt} kernels for {shape.dtype}"] if dt != shape.dtype else [])
                got = _priced(device, SYSTEMS[system], shape, dt, rows, exact, basis)
                if got is not None:
                    return got
    return None


def _kernel_curve(device: str, framework: str, shape: MoEShape) -> MoECurve | None:
    """The curve of the shape's named kernel (module doc): each system's rows in turn, the
    device's own first, then the others in :func:`_others`' order (its generation and memory
    kind first, the nearest DRAM bandwidth first within each); in each, the framework's
    rows before other frameworks', the shape's own before the nearest one's. The dtype is the
    shape's own (a substitute would be another kernel). Another device's rows are scaled by the
    bound ratio and, where the kernel is measured on both devices at a common shape, by the
    bridge between them (:func:`device_bridge`)."""
    said = f"moe: {shape.kernel} kernels (the engine's)"
    for system in [*_systems(device), *_others(device)]:
        where = "" if SYSTEMS[system] == device else f"; moe: {SYSTEMS[system]}'s, scaled by the bound ratio"
        for fw, exclude in ((framework, None), (None, framework)):
            base = _pool(system, fw, exclude, shape)
            if base is None:
                continue
            rows = base[base["dtype"] == shape.dtype]
            if not len(rows):
                continue
            other = "" if fw else f"; moe: other frameworks' {shape.kernel} kernels"
            for exact in (True, False):
                # the device's own rows of the framework's kernel at the shape: measured
                basis = [said + where + other] if where or other or not exact else []
                got = _priced(device, SYSTEMS[system], shape, shape.dtype, rows, exact, basis)
                if got is not None:
                    if SYSTEMS[system] != device:
                        got = _bridged(got, device, SYSTEMS[system], shape)
                    return got
    return None


@dataclass(frozen=True)
class Bridge:
    """How a kernel's efficiency moves from one device to another, as the corpus measures it
    (:func:`device_bridge`): at per-expert loads ``load`` (token-expert rows per expert, ``T k /
    E``), the factor ``factor`` on the bound ratio; ``shape`` (with its ``distribution``) and
    ``kernel_source`` name the rows it rests on, ``via`` the measured device of the same compute
    whose rows stand in for a device without its own (empty: the device's own rows)."""

    load: np.ndarray
    factor: np.ndarray
    kernel_source: str
    shape: MoEShape
    via: str = ""

    def at(self, load: Any) -> np.ndarray:
        """The factor at each per-expert ``load`` (linear in ``log`` load between measured
        loads, the end values beyond them)."""
        return np.interp(np.log(np.asarray(load, dtype=float)), np.log(self.load), self.factor)


def _kernel_rows(device: str, shape: MoEShape) -> Any:
    """Every row of ``device``'s systems of the shape's named kernel, gating and ``ep`` (any
    framework, dtype and shape), or None."""
    import pandas as pd

    got = [p for p in (_pool(s, None, None, shape) for s in _systems(device)) if p is not None]
    return pd.concat(got, ignore_index=True) if got else None


def _same_compute(device: str) -> str | None:
    """The measured device (one with corpus rows) of ``device``'s architecture and dense tensor
    peaks (every precision both list, within 0.1 %) nearest it in DRAM bandwidth, ``device`` itself
    where it is measured, else None: the same SMs at the same clock (an A100 40 GB or PCIe for
    the A100 SXM 80 GB; a GB200 is not a B300, whose FP4 peak is 1.5x), which differ only in
    memory, which the bound ratio carries."""
    from ..hardware import get_device

    if _systems(device):
        return device
    from ..cost import as_float

    def tensor(name: str) -> dict[str, float]:
        """The device's dense tensor peaks by precision (FLOP/s; numeric ones)."""
        out = {}
        for r in get_device(name).roofs:
            if r.unit == "tensor" and r.peak_flops_per_s.is_number:
                out[r.precision] = as_float(r.peak_flops_per_s, what="tensor peak")
        return out

    def same_peaks(a: dict[str, float], b: dict[str, float]) -> bool:
        # the precisions both list (catalog entries list different sets: the A100 PCIe no FP64)
        shared = a.keys() & b.keys()
        return "bf16" in shared and all(math.isclose(a[k], b[k], rel_tol=1e-3) for k in shared)

    hw = get_device(device)
    peaks = tensor(device)
    if "bf16" not in peaks or not hw.architecture:
        return None
    bw = as_float(hw.bandwidth("dram"), what="dram bandwidth")
    same = [
        d
        for d in sorted(set(SYSTEMS.values()))
        if get_device(d).architecture == hw.architecture and same_peaks(tensor(d), peaks)
    ]
    if not same:
        return None
    return min(same, key=lambda d: abs(math.log(as_float(get_device(d).bandwidth("dram"), what="dram bandwidth") / bw)))


def _width(dtype: str) -> tuple[int, str]:
    """A corpus MoE dtype's weight element width (bits) and compute roof."""
    from ..dtypes import get_dtype
    from .kernels import MOE_DTYPES

    _, w, c = MOE_DTYPES[dtype]
    return get_dtype(w).element_bits, get_dtype(c).roof


@functools.cache
def device_bridge(device: str, measured_on: str, shape: MoEShape) -> Bridge | str:
    """The factor that carries the shape's named kernel from ``measured_on`` to ``device``
    beyond the ratio of the two devices' bounds, from a kernel of that name the corpus measures
    on both (module doc's *bridge*), or the reason there is none (a string).

    A device without rows of its own takes the bridge of the measured device of the same
    compute (:func:`_same_compute`), ``via`` naming it. Among the shapes (kernel sources and
    dtypes of the shape's weight element width and compute roof, ``ep = 1``, the shape's
    per-expert distribution, else the balanced one) measured on both devices, the nearest to
    ``shape`` (:func:`_distance`) gives, at each token count ``T'`` both measure,

    .. math:: q(m') = \\frac{t_{dev}(T') / t_{meas}(T')}{t^{roof}_{dev}(T') / t^{roof}_{meas}(T')},
       \\qquad m' = T' k' / E',

    the measured time ratio over the bound ratio, as a function of the per-expert load ``m'``:
    two devices whose ridges sit at different loads cross from memory- to compute-bound at
    different ``m``, where a kernel loses efficiency near its ridge that the bound (a ``max``)
    does not show (A100's and the RTX PRO 6000's ridges for 4-bit weights sit near 38 and 70
    rows per expert: SGLang's Marlin MoE on the A100 takes 1.3-1.7x the bound ratio's share at
    16-64 rows per expert, about 1.0 elsewhere). The shape is priced at ``q`` of its own load
    ``m = T k / E``, the same at every ``ep`` (a rank's ``T k / ep`` rows on ``E / ep``
    experts; the ``ep = 1`` rows are read because harnesses time ``ep`` > 1 in different ways:
    module doc). ASSUMED: the factor is a function of the load alone for a kernel of the same
    name and weight width, and of the same compute's."""
    import pandas as pd

    if not shape.kernel:
        return "no kernel named"
    proxy = _same_compute(device)
    if proxy is None:
        return f"no measured device of {device}'s architecture and tensor peaks"
    if proxy == measured_on:
        return f"{measured_on}'s rows stand in for {device} (the same architecture and tensor peaks): no bridge"
    one_rank = dataclasses.replace(shape, ep=1)
    here, there = _kernel_rows(proxy, one_rank), _kernel_rows(measured_on, one_rank)
    if here is None or there is None:
        return f"no {shape.kernel} rows measured on both {measured_on} and {proxy}"
    keys = ["kernel_source", "dtype", "distribution", "hidden", "inter_rank", "topk", "experts", "tokens"]
    both = pd.merge(
        here.groupby(keys, as_index=False)["latency_s"].min(),
        there.groupby(keys, as_index=False)["latency_s"].min(),
        on=keys,
        suffixes=("_dev", "_meas"),
    )
    want = _width(shape.dtype)
    both = both[both["dtype"].map(lambda d: d in _bound_dtypes() and _width(d) == want).astype(bool)]
    if not len(both):
        return (
            f"no {shape.kernel} rows of {want[0]}-bit weights on the {want[1]} roof measured on both "
            f"{measured_on} and {proxy}"
        )
    hit, _ = _distribution_rows(both, shape.distribution)
    if not len(hit):
        return f"no {shape.kernel} rows of the {shape.distribution} or balanced routing on both devices"
    near = hit.iloc[int(np.argmin(_distance(hit, shape)))]
    ref = MoEShape(
        int(near["hidden"]),
        int(near["inter_rank"]),
        int(near["topk"]),
        int(near["experts"]),
        1,
        str(near["dtype"]),
        shape.gated,
        str(near["distribution"]),
    )
    same = (
        (hit["kernel_source"] == near["kernel_source"])
        & (hit["dtype"] == near["dtype"])
        & (hit["distribution"] == near["distribution"])
    )
    one = _shape_rows(hit[same], ref).sort_values("tokens")
    if len(one) < 2:
        return f"one token count of {ref.label} measured on both devices"
    tokens = one["tokens"].to_numpy(dtype=float)
    ratio = one["latency_s_dev"].to_numpy(dtype=float) / one["latency_s_meas"].to_numpy(dtype=float)
    factor = ratio / (moe_bound_s(proxy, ref, tuple(tokens)) / moe_bound_s(measured_on, ref, tuple(tokens)))
    if not np.all(np.isfinite(factor) & (factor > 0)):
        return f"a factor of {ref.label} not finite and positive"
    return Bridge(
        tokens * ref.topk / ref.experts, factor, str(near["kernel_source"]), ref, "" if proxy == device else proxy
    )


def _bound_dtypes() -> tuple[str, ...]:
    from .kernels import MOE_DTYPES

    return tuple(MOE_DTYPES)


def _bridged(curve: MoECurve, device: str, measured_on: str, shape: MoEShape) -> MoECurve:
    """``curve`` (another device's rows of the named kernel, scaled by the bound ratio) times
    the bridge's factor at each point's per-expert load (:func:`device_bridge`), the basis
    saying so (and which rows, routing and loads it rests on); unchanged where the corpus has no
    bridge, the basis giving the reason."""
    bridge = device_bridge(device, measured_on, shape)
    if isinstance(bridge, str):
        note = f"moe: {bridge}: the bound ratio alone"
        return dataclasses.replace(curve, basis="; ".join(b for b in (curve.basis, note) if b))
    load = curve.tokens * shape.topk / shape.experts
    q = bridge.at(load)
    ref = bridge.shape
    said = [
        f"moe: times the {measured_on}-to-{bridge.via or device} factor {float(q.min()):.2f}-{float(q.max()):.2f} "
        f"over the bound ratio that {bridge.kernel_source} {ref.dtype} ({ref.label}, {ref.distribution}) measures "
        "on both at the same rows per expert"
    ]
    if bridge.via:
        said.append(f"{bridge.via}'s factor for {device} (the same architecture and tensor peaks)")
    if ref.distribution != shape.distribution:
        said.append(f"{ref.distribution} rows' factor for {shape.distribution} routing")
    lo, hi = float(bridge.load[0]), float(bridge.load[-1])
    if float(load.min()) < lo or float(load.max()) > hi:
        said.append(f"held at its end values beyond {lo:.3g}-{hi:.3g} rows per expert")
    return dataclasses.replace(
        curve, seconds=curve.seconds * q, basis="; ".join(b for b in (curve.basis, ", ".join(said)) if b)
    )


def _priced(
    device: str, measured_on: str, shape: MoEShape, dt: str, rows: Any, exact: bool, basis: list[str]
) -> MoECurve | None:
    """The curve of ``rows`` (measured on ``measured_on``) for ``shape``: its own rows
    (``exact``) or the nearest shape's, scaled by the bound ratio where the shape or the device
    differs (module doc: a named kernel's ratio is of the padded shapes it computes on)."""
    target = MoEShape(shape.hidden, shape.inter, shape.topk, shape.experts, shape.ep, dt, shape.gated)
    measured = target
    if not exact:
        near = rows.iloc[int(np.argmin(_distance(rows, shape)))]
        measured = MoEShape(
            int(near["hidden"]),
            int(near["inter_rank"]),
            int(near["topk"]),
            int(near["experts"]),
            shape.ep,
            dt,
            shape.gated,
        )
        basis = [
            *basis,
            f"moe: nearest measured shape ({measured.label}) for {shape.label}, scaled by the bound ratio",
        ]
    hit = _shape_rows(rows, measured)
    hit, why = _distribution_rows(hit, shape.distribution)
    if not len(hit):
        return None
    if why:
        basis = [*basis, f"moe: {why}"]
    for note in sorted(set(hit["ep_note"]) - {""}):
        basis = [*basis, f"moe: {note}"]
    tokens, seconds = _curve(hit)
    if measured != target or measured_on != device:
        # t(T) bound(target on device, T) / bound(measured shape on its device, T), a named
        # kernel's at the padded shapes it runs
        num, den = target, measured
        if shape.kernel:
            pad = dataclasses.replace(target, kernel=shape.kernel, pad=shape.pad)
            num = pad.padded()
            den = dataclasses.replace(measured, kernel=shape.kernel, pad=shape.pad).padded()
        seconds = seconds * moe_bound_s(device, num, tokens) / moe_bound_s(measured_on, den, tokens)
    if not (np.all(np.isfinite(seconds)) and np.all(seconds > 0)):
        return None
    return MoECurve(
        tokens, seconds, "neighbour" if basis else "measured", "; ".join(basis), measured_on == device
    )
