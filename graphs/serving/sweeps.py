"""Batch x context (x devices x dtypes) sweeps of decode, compiled once.

For each (device, weight dtype, KV dtype) the compiled decode step
(:func:`graphs.serving.compiled.compiled_step`: the graph built once with symbolic ``B``
and ``ctx``, its per-kernel step time compiled to numpy) and its compiled memory
ledger are evaluated on the whole grid: no per-point substitution. Each point
gets time per output token, tokens/s per user and per device, energy per
token, and whether it fits in memory; the Pareto frontier of per-user speed
against per-device throughput is marked among the points that fit.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.frontier import pareto_mask
from costmodel.hardware import get_device
from costmodel.ledger import Overhead
from costmodel.outfiles import atomic_write
from models.catalog import get_model
from models.config import ModelConfig

from .compiled import decode_memory
from .kernel_sources import Coverage
from .predictor import Predictor
from .priced import PricedStep, priced_step

__all__ = ["SweepResult", "sweep", "compile_decode"]

COLUMNS = (
    "device",
    "weight_dtype",
    "kv_dtype",
    "batch",
    "ctx",
    "tpot_s",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "energy_per_token_j",
    "memory_bytes",
    "fits",
    "pareto",
)


@dataclass
class SweepResult:
    """Sweep points as columns (numpy arrays) plus their labels."""

    model: str
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    predictor: str = "roofline bound"  #: what priced the steps (:attr:`Predictor.label`)
    #: a predicted sweep's frontier steps (summed) by what they rest on (None: the bound)
    coverage: Coverage | None = None

    def __len__(self) -> int:
        return len(self.columns.get("batch", ()))

    @property
    def fits(self) -> int:
        """Points whose memory fits the device (counted in numpy, no rows built)."""
        return int(np.count_nonzero(self.columns["fits"])) if len(self) else 0

    def rows(self, indices: Any = None) -> list[dict[str, Any]]:
        """Points as dicts: all of them, or those at ``indices`` (build few: 1e6 dicts cost seconds)."""
        keys = list(self.columns)
        picked = range(len(self)) if indices is None else indices
        return [{k: _py(self.columns[k][i]) for k in keys} for i in picked]

    def frontier(self) -> list[dict[str, Any]]:
        """Pareto-optimal points (per-user speed vs per-device throughput), fastest user first;
        rows are built for the frontier points only."""
        if not len(self):
            return []
        idx = np.flatnonzero(self.columns["pareto"])
        idx = idx[np.argsort(-self.columns["tokens_per_s_per_user"][idx], kind="stable")]
        return self.rows(idx.tolist())

    def to_csv(self, path: str | Path, flag: str = "csv") -> None:
        """Every point, one CSV row each, written from the columns (no dict per point), atomically."""
        keys = list(self.columns)
        with atomic_write(path, flag) as f:
            w = csv.writer(f)
            w.writerow(keys)
            w.writerows(zip(*(self.columns[k].tolist() for k in keys), strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "points": self.rows(), "frontier": self.frontier()}


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def compile_decode(
    cfg: ModelConfig,
    device: str,
    tp: int = 1,
    overhead: Overhead | None = None,
    predictor: Predictor | None = None,
) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    """Numpy functions ``tpot(B, ctx)`` (priced by ``predictor``, default the bound:
    :func:`graphs.serving.priced.priced_step`) and ``memory(B, ctx)`` for one configuration."""
    c = priced_step(cfg, device, "decode", tp=tp, predictor=predictor)
    return c.step_array, decode_memory(cfg, device, tp=tp, overhead=overhead)


#: most points one sweep evaluates (about 1 GiB of result columns)
MAX_POINTS = 10_000_000


def sweep(
    config: ModelConfig | str,
    *,
    devices: Sequence[str],
    batches: Sequence[int],
    ctxs: Sequence[int],
    weight_dtypes: Sequence[str | None] = (None,),
    kv_dtypes: Sequence[str | None] = (None,),
    tp: int = 1,
    overhead: Overhead | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 65536,
    predictor: Predictor | None = None,
) -> SweepResult:
    """Evaluate decode over every combination (module doc); ``progress(done, total)``
    is called as chunks of points complete; ``predictor`` prices the steps (default the bound;
    a predicted sweep prices each configuration in one call, so its kernels are tabulated once)."""
    pred = predictor or Predictor()
    if not pred.is_bound:
        chunk = max(chunk, 10**9)
    cfg = get_model(config) if isinstance(config, str) else config
    bs = np.asarray(list(batches), dtype=float)
    cs = np.asarray(list(ctxs), dtype=float)
    if bs.size == 0 or cs.size == 0:
        raise CostModelError("sweep needs at least one batch and one ctx")
    if (bs < 1).any() or (bs != np.floor(bs)).any():
        raise CostModelError(f"batches must be positive integers, got {sorted(set(bs.tolist()))[:5]}")
    if (cs < 1).any() or (cs != np.floor(cs)).any():
        raise CostModelError(f"ctx values must be positive integers, got {sorted(set(cs.tolist()))[:5]}")
    combos = list(itertools.product(devices, weight_dtypes, kv_dtypes))
    total = len(combos) * bs.size * cs.size
    if total > MAX_POINTS:
        raise CostModelError(
            f"the sweep has {total:,} points ({len(combos)} configurations x {bs.size} batches x {cs.size} "
            f"contexts); at most {MAX_POINTS:,} fit in memory here"
        )
    bg, cg = (a.ravel() for a in np.meshgrid(bs, cs, indexing="ij"))
    n = bg.size
    # every column allocated once at its full size and filled per configuration (no concatenation)
    out: dict[str, np.ndarray] = {
        k: np.empty(total, dtype=object) for k in ("device", "weight_dtype", "kv_dtype")
    }
    out.update(batch=np.tile(bg.astype(np.int64), len(combos)), ctx=np.tile(cg.astype(np.int64), len(combos)))
    for k in (
        "tpot_s",
        "tokens_per_s_per_user",
        "tokens_per_s_per_device",
        "energy_per_token_j",
        "memory_bytes",
    ):
        out[k] = np.empty(total)
    out["fits"] = np.empty(total, dtype=bool)
    out["pareto"] = np.zeros(total, dtype=bool)
    done = 0
    for i, (dev, wd, kvd) in enumerate(combos):
        hw = get_device(dev)
        changes = {k: v for k, v in (("dtype", wd), ("kv_dtype", kvd)) if v is not None}
        c = cfg.replace(**changes)
        tpot_f, mem_f = compile_decode(c, dev, tp, overhead, pred)
        base = i * n
        tpot = out["tpot_s"][base : base + n]
        mem = out["memory_bytes"][base : base + n]
        for lo in range(0, n, chunk):
            sl = slice(lo, lo + chunk)
            tpot[sl] = tpot_f(bg[sl], cg[sl])
            mem[sl] = mem_f(bg[sl], cg[sl])
            done += tpot[sl].size
            if progress:
                progress(done, total)
        power = as_float(hw.power_w) if hw.power_w is not None else np.nan
        part = slice(base, base + n)
        out["device"][part] = hw.name
        out["weight_dtype"][part] = c.weight_dtype
        out["kv_dtype"][part] = c.cache_dtype
        np.divide(1.0, tpot, out=out["tokens_per_s_per_user"][part])
        np.divide(bg / tp, tpot, out=out["tokens_per_s_per_device"][part])
        np.divide(power * tpot, bg, out=out["energy_per_token_j"][part])
        np.less_equal(mem, as_float(hw.capacity()), out=out["fits"][part])
    fits = out["fits"]
    if fits.any():
        pts = np.column_stack([out["tokens_per_s_per_user"][fits], out["tokens_per_s_per_device"][fits]])
        idx = np.flatnonzero(fits)[pareto_mask(pts, (True, True))]
        out["pareto"][idx] = True
    if pred.is_bound:
        return SweepResult(cfg.name, out)
    cov: Coverage | None = None
    front = np.flatnonzero(out["pareto"])
    for i, (dev, wd, kvd) in enumerate(combos):  # the frontier's steps, by what they rest on
        sel = front[(front >= i * n) & (front < (i + 1) * n)]
        if len(sel):
            changes = {k: v for k, v in (("dtype", wd), ("kv_dtype", kvd)) if v is not None}
            step = priced_step(cfg.replace(**changes), dev, "decode", tp=tp, predictor=pred)
            assert isinstance(step, PricedStep)
            piece = step.coverage_array(out["batch"][sel], out["ctx"][sel])
            cov = piece if cov is None else cov + piece
    return SweepResult(cfg.name, out, pred.label, cov)
