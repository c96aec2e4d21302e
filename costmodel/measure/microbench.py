"""Microbenchmarks of real numpy kernels against the bounds our rules predict.

Each benchmark is a numpy implementation whose passes are costed by the
rule registry op by op (the article's ``machine_probe.py`` ledger: a
multi-pass LayerNorm moves 10 passes of ``n*d``; the naive attention
materialises S and walks it 10 times), timed with warm-up and best-of, and
compared with its bound on a (probed) device: achieved fraction
``bound / measured`` and anomaly flags (``above_bound`` when > 1.1,
``slower_than_smaller_batch`` when a larger batch of the sweep runs faster).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..cost import Cost, as_float
from ..hardware import Hardware
from ..results import Result
from ..roofline import bound
from ..rules import op_cost
from .probe import time_best

__all__ = ["Bench", "BenchRow", "benchmarks", "run_benchmarks", "batch_sweep", "flag_batch_anomalies"]


@dataclass
class Bench:
    name: str
    family: str  #: "memory" (elementwise, norms) or "gemm" or "attention"
    cost: Cost
    fn: Callable[[], Any]
    shape: dict[str, int]


def benchmarks(small: bool = False) -> list[Bench]:
    """The article's microbenchmarks, costed by the rules (fp32 numpy)."""
    rng = np.random.default_rng(0)
    f32 = "fp32"
    out: list[Bench] = []
    n = 8_000_000 if small else 32_000_000
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    o = np.empty(n, dtype=np.float32)
    tmp = np.empty(n, dtype=np.float32)
    out.append(
        Bench(
            "add (1 pass)",
            "memory",
            op_cost("elementwise", n=n, inputs=2, dtype=f32),
            lambda: np.add(a, b, out=o),
            {"n": n},
        )
    )

    def add_relu() -> None:
        np.add(a, b, out=tmp)
        np.maximum(tmp, 0, out=o)

    out.append(
        Bench(
            "add+relu (2 passes)",
            "memory",
            op_cost("elementwise", n=n, inputs=2, dtype=f32) + op_cost("elementwise", n=n, dtype=f32),
            add_relu,
            {"n": n},
        )
    )
    rows, cols = (2048, 4096) if small else (8192, 4096)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    g = rng.standard_normal(cols, dtype=np.float32)
    mu, var = np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)
    xc, xc2 = np.empty_like(x), np.empty_like(x)

    def layernorm() -> None:
        np.mean(x, axis=-1, keepdims=True, out=mu)
        np.subtract(x, mu, out=xc)
        np.multiply(xc, xc, out=xc2)
        np.mean(xc2, axis=-1, keepdims=True, out=var)
        np.sqrt(var + 1e-5, out=var)
        np.divide(xc, var, out=xc)
        np.multiply(xc, g, out=xc)

    out.append(
        Bench(
            f"layernorm multi-pass [{rows},{cols}]",
            "memory",
            op_cost("layernorm", rows=rows, cols=cols, bias=False, variant="multi_pass", dtype=f32),
            layernorm,
            {"rows": rows, "cols": cols},
        )
    )
    N, d = (1024, 128) if small else (2048, 128)
    q = rng.standard_normal((N, d), dtype=np.float32)
    kt = np.ascontiguousarray(rng.standard_normal((N, d), dtype=np.float32).T)
    v = rng.standard_normal((N, d), dtype=np.float32)
    S = np.empty((N, N), np.float32)
    out_o = np.empty((N, d), np.float32)
    rmax, rsum = np.empty((N, 1), np.float32), np.empty((N, 1), np.float32)

    def attention() -> None:
        np.matmul(q, kt, out=S)  # write S                    1 pass of N^2
        np.max(S, axis=-1, keepdims=True, out=rmax)  # read S   2
        np.subtract(S, rmax, out=S)  # read, write S           4
        np.exp(S, out=S)  # read, write S                      6
        np.sum(S, axis=-1, keepdims=True, out=rsum)  # read S   7
        np.divide(S, rsum, out=S)  # read, write S             9
        np.matmul(S, v, out=out_o)  # read S, write O         10

    att = (
        op_cost("gemm", M=N, N=N, K=d, dtype=f32)
        + op_cost("reduction", rows=N, cols=N, dtype=f32)
        + op_cost("elementwise", n=N * N, inputs=1, dtype=f32)
        + op_cost("elementwise", n=N * N, inputs=1, vector_ops=0, sfu_ops=1, dtype=f32)
        + op_cost("reduction", rows=N, cols=N, dtype=f32)
        + op_cost("elementwise", n=N * N, inputs=1, dtype=f32)
        + op_cost("gemm", M=N, N=d, K=N, dtype=f32)
    )
    out.append(Bench(f"attention naive [N={N},d={d}]", "attention", att, attention, {"N": N, "d": d}))
    for m in (256, 1024) if small else (512, 2048, 4096):
        k = nn = 1024 if small else 4096
        ma = rng.standard_normal((m, k), dtype=np.float32)
        mb = rng.standard_normal((k, nn), dtype=np.float32)
        mc = np.empty((m, nn), np.float32)
        out.append(
            Bench(
                f"gemm {m}x{k}x{nn}",
                "gemm",
                op_cost("gemm", M=m, N=nn, K=k, dtype=f32),
                partial(np.matmul, ma, mb, out=mc),
                {"M": m, "N": nn, "K": k},
            )
        )
    return out


@dataclass(frozen=True)
class BenchRow(Result):
    """One timed kernel against its rule-derived bound on a spec: ``achieved_fraction =
    predicted / measured``; flags ``above_bound`` (faster than the bound by over 10 %) and
    ``slower_than_smaller_batch`` (in a batch sweep, latency fell as the batch grew)."""

    name: str
    family: str  #: "memory", "gemm" or "attention"
    shape: dict[str, int]
    flops: float
    bytes: float
    intensity: float
    kind: str  #: the bound's binding unit or level
    predicted_s: float
    measured_s: float
    achieved_fraction: float
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    flags: tuple[str, ...] = ()


def _row(
    name: str, family: str, cost: Cost, hw: Hardware, measured: float, shape: dict[str, int]
) -> BenchRow:
    b = bound(cost, hw)
    pred = as_float(b.lower)
    flops, nbytes = as_float(cost.flops), as_float(cost.bytes)
    frac = pred / measured
    return BenchRow(
        name=name,
        family=family,
        shape=shape,
        flops=flops,
        bytes=nbytes,
        intensity=flops / nbytes,
        kind=b.kind,
        predicted_s=pred,
        measured_s=measured,
        achieved_fraction=frac,
        achieved_flops_per_s=flops / measured,
        achieved_bytes_per_s=nbytes / measured,
        flags=("above_bound",) if frac > 1.1 else (),
    )


def run_benchmarks(
    hw: Hardware, *, small: bool = False, repeats: int = 5, progress: Callable[[str], None] | None = None
) -> list[BenchRow]:
    """Time every benchmark and compare it with its bound on ``hw``."""
    rows = []
    for bench in benchmarks(small):
        if progress:
            progress(f"microbenchmark: {bench.name}")
        t, _ = time_best(bench.fn, repeats, min_time_s=0.1)  # as the probe does: see time_best
        rows.append(_row(bench.name, bench.family, bench.cost, hw, t, bench.shape))
    return rows


def batch_sweep(
    hw: Hardware,
    *,
    d: int = 4096,
    batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    repeats: int = 10,
) -> list[BenchRow]:
    """A fixed [d, d] fp32 weight times [B, d] activations: the article's batch sweep.

    Flags ``slower_than_smaller_batch`` where latency at ``B`` exceeds 1.5x the
    latency at a larger batch (a library code-path change the roofline cannot see).
    """
    rng = np.random.default_rng(0)
    w = rng.standard_normal((d, d), dtype=np.float32)
    rows = []
    for b in batches:
        x = rng.standard_normal((b, d), dtype=np.float32)
        y = np.empty((b, d), np.float32)
        t, _ = time_best(partial(np.matmul, x, w, out=y), repeats)
        rows.append(_row(f"batch {b}", "gemm", op_cost("gemm", M=b, N=d, K=d, dtype="fp32"), hw, t, {"B": b}))
    return flag_batch_anomalies(rows)


def flag_batch_anomalies(rows: list[BenchRow], factor: float = 1.5) -> list[BenchRow]:
    """Flag ``slower_than_smaller_batch`` on rows (ordered by batch) that take more than
    ``factor`` x the time of a larger batch after them: latency fell as batch grew."""
    return [
        dataclasses.replace(r, flags=(*r.flags, "slower_than_smaller_batch"))
        if any(r.measured_s > factor * later.measured_s for later in rows[i + 1 :])
        else r
        for i, r in enumerate(rows)
    ]
