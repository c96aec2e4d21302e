"""Tile and wave quantisation of measured kernels on a device's SMs.

A GPU runs a kernel's independent work units (output tiles, query blocks,
(sequence, KV head) pairs) in waves over its SMs; the last wave is padded, and a
tile larger than the problem's edge computes padding too. These factors feed the
efficiency model (:mod:`costmodel.measured.efficiency`), never the lower bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..hardware import Hardware

__all__ = ["TILE", "GEMM_TILES", "SPLIT_K", "wave_factor", "quant_factor", "work_waves", "query_head_waves"]

#: Output tile (rows x columns) one SM computes at a time, for wave quantisation:
#: 128 x 128 is CUTLASS's default threadblock/CTA tile for bf16/fp8 tensor-core
#: GEMMs on Ampere and Hopper (CUTLASS "Efficient GEMM in CUDA" doc) and
#: FlashAttention-2/3's query block (Dao 2023, Shah et al. 2024: B_r = 128).
TILE = 128

#: Tile shapes and split-K factors a tuned GEMM library chooses among (CUTLASS's
#: Hopper/Ampere tensor-core configurations include 64x128, 128x128 and 128x256
#: CTA tiles; split-K divides K across CTAs when the output has too few tiles).
#: The quantisation factor is the best over them: the autotuner's choice.
GEMM_TILES = ((64, 128), (128, 128), (128, 256))
SPLIT_K = (1, 2, 4, 8)


def wave_factor(work_tiles: np.ndarray, sms: int) -> np.ndarray:
    """Wave quantisation: tiles run in waves of ``sms``; the last wave is padded.

    .. math:: Q = \\frac{\\lceil T / S \\rceil\\, S}{T} \\ge 1

    ``T`` tiles on ``S`` SMs (a tile-granular GPU scheduler, as in CUTLASS's
    and FlashAttention's persistent or one-CTA-per-tile launches).

    >>> float(wave_factor(np.array([133.0]), 132)[0])  # two waves for 133 tiles
    1.9849624060150375
    """
    t = np.maximum(np.asarray(work_tiles, dtype=float), 1.0)
    return np.ceil(t / sms) * sms / t


def quant_factor(family: str, df: Any, hw: Hardware) -> np.ndarray:
    """Padded work over useful work, ``Q >= 1``: the best tile and split-K for a GEMM
    (:data:`GEMM_TILES`, :data:`SPLIT_K`), query blocks of :data:`TILE` for context
    attention, 1 where no tiling applies."""
    sms = hw.sm_count
    if not sms or family in ("all_reduce", "generation_attention", "moe", "generation_mla", "context_mla"):
        return np.ones(len(df))
    if family == "gemm":
        m, n = df["m"].to_numpy(dtype=float), df["n"].to_numpy(dtype=float)
        k = df["k"].to_numpy(dtype=float)
        best = np.full(len(df), np.inf)
        for bm, bn in GEMM_TILES:
            tm, tn = np.ceil(m / bm), np.ceil(n / bn)
            pad = tm * tn * bm * bn / (m * n)
            for split in SPLIT_K:
                ok = (k / split >= 256) | (split == 1)
                q = wave_factor(tm * tn * split, sms) * pad
                best = np.where(ok, np.minimum(best, q), best)
        return best
    s = df["isl"].to_numpy(dtype=float)
    blocks = np.ceil(s / TILE)
    tiles = df["batch"].to_numpy(dtype=float) * df["heads"].to_numpy(dtype=float) * blocks
    return wave_factor(tiles, sms) * blocks * TILE / s


def work_waves(family: str, df: Any, hw: Hardware) -> np.ndarray:
    """Rounds of independent work units over the SMs, ``ceil(U / S)``.

    Units: GEMM output tiles (128 x 128), context attention query blocks
    (``batch x heads x ceil(isl/128)``), generation attention (sequence, KV head)
    pairs (one CTA each, as in FlashInfer's and TensorRT-LLM's decode kernels),
    one for a collective. Each unit pays a setup cost (the efficiency model's
    ``t_unit``) on its SM.
    """
    sms = hw.sm_count or 1
    f = lambda c: df[c].to_numpy(dtype=float)  # noqa: E731
    if family == "gemm":
        u = np.ceil(f("m") / TILE) * np.ceil(f("n") / TILE)
    elif family == "context_attention":
        u = f("batch") * f("heads") * np.ceil(f("isl") / TILE)
    elif family == "generation_attention":
        u = f("batch") * f("kv_heads")
    elif family == "context_mla":
        u = f("batch") * f("heads") * np.ceil(f("isl") / TILE)
    elif family == "generation_mla":
        u = f("batch") * np.ceil(f("heads") / 64)
    elif family == "moe":
        # per touched expert, row tiles of its tokens x column tiles of its gate/up shard
        rows = np.maximum(f("tokens") * f("topk") / f("ep"), 1.0)
        touched = np.minimum(f("experts") / f("ep"), rows)
        u = touched * np.ceil(rows / touched / TILE) * np.ceil(2 * f("inter") / f("tp") / TILE)
    else:
        u = np.ones(len(df))
    return np.ceil(u / sms)


def query_head_waves(family: str, df: Any, hw: Hardware) -> np.ndarray:
    """Rounds of (sequence, *query* head) units over the SMs, ``ceil(B H / S)``; zero off decode attention.

    A decode kernel either shares each KV head's loads among its ``H/H_kv``
    query heads (one CTA per (sequence, KV head): TensorRT-LLM's XQA,
    FlashInfer, FlashAttention-3's decode, counted by :func:`work_waves`) or
    runs one CTA per query head (TensorRT-LLM's masked multi-head attention on
    A100: 256 sequences of Llama-3-405B-like 128 heads over 1 KV head and two
    cached tokens take 514 us there, 303 waves of 32,768 units on 108 SMs at
    1.7 us each). The efficiency model gives each design its own setup cost
    and the fit finds which one a kernel pays.
    """
    if family != "generation_attention":
        return np.zeros(len(df))
    sms = hw.sm_count or 1
    return np.ceil(df["batch"].to_numpy(dtype=float) * df["heads"].to_numpy(dtype=float) / sms)
