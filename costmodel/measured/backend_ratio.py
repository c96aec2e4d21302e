"""How much longer one attention kernel takes than another, read from rows that time both.

An engine may run an attention kernel the corpus does not time at the model's shape: vLLM runs
its Triton kernel (``TRITON_ATTN``) for gpt-oss's attention with learned sinks off Hopper
(:mod:`graphs.serving.engines.attention_kernels`), and the corpus's Triton rows
(``vllm_triton_attn``) are of head dim 192 with an FP8 KV cache only. Those rows sit beside
FlashAttention 2's (``vllm_flash_attn_fa2``) at the same batch, prompt length, heads, KV heads
and head dim on the L40S and the RTX PRO 6000 (vLLM 0.24.0, the wheel this project pins): the
two kernels measured on one device, at one shape. :func:`context_ratio` reads, per prompt length
``S`` (``isl``), the median over those matched shapes of

.. math:: r(S) = \\operatorname{median}\\;\\frac{t_{\\mathrm{triton}}(B, S, H, H_{kv}, 192)}
          {t_{\\mathrm{FA2}}(B, S, H, H_{kv}, 192)}

on the device that measures both nearest the priced one in DRAM bandwidth (the priced device
itself where it does), and :meth:`RatioCurve.at` interpolates it linearly in ``log S``, held at
the ends beyond them. The prefill (context) attention only: there the kernel computes, and the
FP8 cache of the Triton rows is read once per tile; in decode (``generation_attention``) the
kernel streams the cache, so an FP8 cache halves what it reads (the corpus's matched decode rows
take 0.7x FA2's time) and the ratio says nothing about a BF16 cache, which is not read here.

ASSUMED, stated wherever it prices a kernel: that Triton's time over FlashAttention 2's at head
dim 192 on these devices is its time over the kernel pricing the node (FlashAttention's rows at
the node's shape, the nearest measured) at gpt-oss's head dim 64 on the priced device. Measured
(vLLM 0.24.0, windowless rows): L40S 0.98 at 1 token, 1.15 at 128, 2.01 at 1,024, 2.25 at
4,096, 2.41 at 16,384; RTX PRO 6000 0.99, 1.37, 2.21, 2.57, 2.74.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from .corpus import SYSTEMS, MeasuredDataError, load

__all__ = ["KERNEL_PAIRS", "RatioCurve", "context_ratio"]

#: (framework, backend the engine runs) -> (the corpus's kernel_source of that backend, the
#: kernel_source of the kernel it is compared with at the same shapes)
KERNEL_PAIRS: dict[tuple[str, str], tuple[str, str]] = {
    ("vllm", "TRITON_ATTN"): ("vllm_triton_attn", "vllm_flash_attn_fa2"),
}

#: the shape columns two rows must share to be compared
_SHAPE = ["batch", "isl", "heads", "kv_heads", "head_dim", "window"]


@dataclass(frozen=True)
class RatioCurve:
    """One kernel's time over another's by prompt length, as measured on ``device``.

    Attributes
    ----------
    device : str
        The catalog device whose rows it was read from.
    kernel, baseline : str
        The corpus ``kernel_source`` of the kernel and of the one it is divided by.
    isl : tuple of float
        The prompt lengths measured (tokens), ascending.
    ratio : tuple of float
        The median ratio at each (dimensionless).
    shapes : int
        How many matched (shape, length) pairs it rests on.
    head_dims : tuple of int
        The head dims of those rows.
    """

    device: str
    kernel: str
    baseline: str
    isl: tuple[float, ...]
    ratio: tuple[float, ...]
    shapes: int
    head_dims: tuple[int, ...]

    def at(self, isl: float) -> float:
        """The ratio at ``isl`` tokens: linear in ``log isl`` between measured lengths, the end
        value beyond them.

        Parameters
        ----------
        isl : float
            The prompt (chunk) length (tokens, >= 1).

        Returns
        -------
        float

        >>> c = RatioCurve("l40s", "a", "b", (1.0, 100.0), (1.0, 2.0), 2, (192,))
        >>> c.at(10.0), c.at(0.5), c.at(1e6)
        (1.5, 1.0, 2.0)
        """
        xs, ys = self.isl, self.ratio
        if isl <= xs[0]:
            return ys[0]
        if isl >= xs[-1]:
            return ys[-1]
        lx = math.log(isl)
        for i in range(1, len(xs)):
            if isl <= xs[i]:
                a, b = math.log(xs[i - 1]), math.log(xs[i])
                return ys[i - 1] + (ys[i] - ys[i - 1]) * (lx - a) / (b - a)
        return ys[-1]  # unreachable: isl < xs[-1]

    def basis(self, backend: str, isl: float) -> str:
        """How a node's price was scaled, in words, at ``isl`` tokens.

        Parameters
        ----------
        backend : str
            The engine's name of the kernel (``TRITON_ATTN``).
        isl : float
            The prompt (chunk) length priced (tokens).

        Returns
        -------
        str
        """
        dims = "/".join(str(d) for d in self.head_dims)
        return (
            f"x{self.at(isl):.2f} at {isl:,.0f} tokens: {backend}'s time over {self.baseline}'s as the "
            f"corpus measures both on {self.device} (head dim {dims}, {self.shapes} matched shapes; "
            "ASSUMED to carry to this shape and device)"
        )

    def range_basis(self, backend: str) -> str:
        """How a table of the node's prices over prompt lengths was scaled, in words.

        Parameters
        ----------
        backend : str
            The engine's name of the kernel (``TRITON_ATTN``).

        Returns
        -------
        str
        """
        dims = "/".join(str(d) for d in self.head_dims)
        return (
            f"x{min(self.ratio):.2f}-{max(self.ratio):.2f} by prompt length ({self.isl[0]:,.0f}-{self.isl[-1]:,.0f} "
            f"tokens): {backend}'s time over {self.baseline}'s as the corpus measures both on {self.device} "
            f"(head dim {dims}, {self.shapes} matched shapes; ASSUMED to carry to this shape and device)"
        )


@functools.lru_cache(maxsize=8)
def _pair_rows(framework: str, pair: tuple[str, str]) -> Any:
    """The framework's windowless prefill-attention rows of the two kernels of ``pair``, every
    device's (read once a process: :func:`context_ratio` is keyed by device too), or None."""
    try:
        df = load("context_attention", frameworks=[framework])
    except MeasuredDataError:
        return None
    return df[df["kernel_source"].isin(pair) & (df["window"] == 0)]


@functools.lru_cache(maxsize=32)
def context_ratio(framework: str, backend: str, bandwidth: float, device: str = "") -> RatioCurve | None:
    """The measured ratio curve of ``backend``'s prefill attention over its baseline's (module
    doc), from the device measuring both that is ``device`` or nearest ``bandwidth``; None when
    no pair is known for the framework's backend or no device measures both.

    Parameters
    ----------
    framework : str
        The corpus framework (``vllm``).
    backend : str
        The engine's attention backend (``TRITON_ATTN``).
    bandwidth : float
        The priced device's DRAM bandwidth (bytes/s): the nearest in ``log`` is taken.
    device : str
        The priced device's catalog name: its own rows first, where it measures both.

    Returns
    -------
    RatioCurve or None
    """
    pair = KERNEL_PAIRS.get((framework, backend))
    if pair is None:
        return None
    kernel, baseline = pair
    df = _pair_rows(framework, pair)
    if df is None:
        return None
    both = [
        d
        for d in sorted(set(SYSTEMS.values()))
        if set(df.loc[df["device"] == d, "kernel_source"].unique()) == set(pair)
    ]
    if not both:
        return None
    from costmodel.cost import as_float
    from costmodel.hardware import get_device

    def distance(d: str) -> tuple[int, float, str]:
        return (d != device, abs(math.log(as_float(get_device(d).bandwidth()) / bandwidth)), d)

    dev = min(both, key=distance)
    rows = df[df["device"] == dev]
    k = rows[rows["kernel_source"] == kernel][[*_SHAPE, "latency_s"]]
    b = rows[rows["kernel_source"] == baseline][[*_SHAPE, "latency_s"]]
    m = k.merge(b, on=_SHAPE, suffixes=("_k", "_b"))
    if m.empty:
        return None
    m["ratio"] = m["latency_s_k"] / m["latency_s_b"]
    by = m.groupby("isl")["ratio"].median().sort_index()
    return RatioCurve(
        dev,
        kernel,
        baseline,
        tuple(float(x) for x in by.index),
        tuple(float(x) for x in by.to_numpy()),
        len(m),
        tuple(sorted(int(x) for x in m["head_dim"].unique())),
    )
