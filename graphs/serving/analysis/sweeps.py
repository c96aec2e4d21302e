"""Batch x context (x devices x dtypes) sweeps of decode, compiled once.

For each (device, weight dtype, KV dtype) the compiled decode step
(:func:`graphs.serving.step.compiled.compiled_step`: the graph built once with symbolic ``B``
and ``ctx``, its per-kernel step time compiled to numpy) and its compiled memory
ledger (:class:`DecodeForms`) are evaluated on the whole grid: no per-point substitution.
The command line's cached path gives :func:`sweep_forms` the same forms read back from the
persistent cache (:func:`graphs.serving.present.cards.decode_forms_from_card`); this module imports
neither sympy nor the engine unless :func:`sweep` compiles them. Each point
gets time per output token, tokens/s per user and per device, energy per
token, and whether it fits in memory; the Pareto frontier of per-user speed
against per-device throughput is marked among the points that fit, one per context.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.frontier import pareto_mask
from costmodel.outfiles import atomic_write

if TYPE_CHECKING:
    from costmodel.ledger import Overhead
    from models.config import ModelConfig

    from ..pricing.kernel_sources import Coverage
    from ..pricing.predictor import Predictor

__all__ = [
    "SweepResult",
    "DecodeForms",
    "sweep",
    "sweep_forms",
    "decode_forms",
    "compile_decode",
    "check_grid",
]

COLUMNS = (
    "device",
    "weight_dtype",
    "kv_dtype",
    "tp",
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
    #: the matmul dtype each swept weight dtype runs with, per device (:func:`models.quantization.native_matmul`)
    notes: tuple[str, ...] = ()
    #: when no point fits: the one needing the least share of its device's memory (``device``,
    #: ``weight_dtype``, ``kv_dtype``, ``tp``, ``batch``, ``ctx``, ``needed_bytes`` per device,
    #: ``capacity_bytes``); None when one fits
    least_need: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.columns.get("batch", ()))

    @property
    def fits(self) -> int:
        """Points whose memory fits the device (counted in numpy, no rows built)."""
        return int(np.count_nonzero(self.columns["fits"])) if len(self) else 0

    def rows(self, indices: Any = None) -> list[dict[str, Any]]:
        """Points as dicts: all of them, or those at ``indices`` (build few: 1e6 dicts cost seconds).

        Parameters
        ----------
        indices : array-like of int, optional
            The points to build (default: all).

        Returns
        -------
        list of dict
        """
        keys = list(self.columns)
        picked = range(len(self)) if indices is None else indices
        return [{k: _py(self.columns[k][i]) for k in keys} for i in picked]

    def frontier_index(self) -> np.ndarray:
        """The frontier's points (:meth:`frontier`) as indices into the columns, in its order: a
        caller showing a few of them builds only their rows.

        Returns
        -------
        numpy.ndarray
        """
        if not len(self):
            return np.zeros(0, dtype=np.int64)
        idx = np.flatnonzero(self.columns["pareto"])
        return idx[np.lexsort((-self.columns["tokens_per_s_per_user"][idx], self.columns["ctx"][idx]))]

    def frontier(self) -> list[dict[str, Any]]:
        """Pareto-optimal points (per-user speed vs per-device throughput), one frontier per
        context: by context, fastest user first; rows are built for the frontier points only."""
        return self.rows(self.frontier_index().tolist())

    @property
    def contexts(self) -> int:
        """Contexts with a frontier (each has its own)."""
        return len(np.unique(self.columns["ctx"][self.columns["pareto"]])) if len(self) else 0

    def to_csv(self, path: str | Path, flag: str = "csv") -> None:
        """Every point, one CSV row each, written from the columns (no dict per point), atomically.

        Parameters
        ----------
        path : str or Path
            The CSV file (replaced atomically, never written through a link).
        flag : str
            The option that named it, printed in an error.
        """
        keys = list(self.columns)

        def cells(k: str) -> list[Any]:
            # a number a point has none of (no TDP: no energy) is an empty cell, as search's CSV
            # writes it, never 'nan'
            return [None if isinstance(v, float) and math.isnan(v) else v for v in self.columns[k].tolist()]

        with atomic_write(path, flag) as f:
            w = csv.writer(f)
            w.writerow(keys)
            w.writerows(zip(*(cells(k) for k in keys), strict=True))

    def verdict(self) -> list[str]:
        """Why the frontier is empty, in lines (none when a point fits): nothing fits, and the
        point needing the least against its device (:func:`~graphs.serving.step.fit_check.nothing_fits_line`).

        Returns
        -------
        list of str
        """
        from ..step.fit_check import nothing_fits_line

        n = self.least_need
        if n is None or self.fits:
            return []
        point = f"{n['device']} {n['weight_dtype']}/{n['kv_dtype']} tp {n['tp']} at batch {n['batch']} and ctx {n['ctx']}"
        return [nothing_fits_line(point, n["needed_bytes"], n["capacity_bytes"])]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "points": self.rows(), "frontier": self.frontier()}


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True)
class DecodeForms:
    """One configuration's decode step over arrays: ``tpot(B, ctx)`` (s, the per-kernel sum of
    rooflines) and ``memory(B, ctx)`` (the decode ledger's total bytes per device), with the
    names and device numbers a sweep point carries."""

    model: str
    device: str
    weight_dtype: str
    kv_dtype: str
    power_w: float | None
    capacity_bytes: float
    tpot: Callable[..., Any]
    memory: Callable[..., Any]


def compile_decode(
    cfg: ModelConfig,
    device: str,
    tp: int = 1,
    overhead: Overhead | None = None,
    predictor: Predictor | None = None,
) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    """Numpy functions ``tpot(B, ctx)`` (priced by ``predictor``, default the bound:
    :func:`graphs.serving.pricing.priced.priced_step`) and ``memory(B, ctx)`` for one configuration.

    Parameters
    ----------
    cfg : ModelConfig
        The model.
    device : str
        The device's catalog name.
    tp : int
        Tensor-parallel degree.
    overhead : Overhead, optional
        The ledger's reserve policy.
    predictor : Predictor, optional
        Prices the step (default: the bound).

    Returns
    -------
    tuple of (callable, callable)
        ``tpot(B, ctx)`` (s) and ``memory(B, ctx)`` (bytes per device), numpy-vectorised.
    """
    # loaded on use: the cached sweep imports this module for DecodeForms alone, without pricing
    from ..pricing.priced import priced_step
    from ..step.ledger_fit import decode_memory

    c = priced_step(cfg, device, "decode", tp=tp, predictor=predictor)
    return c.step_array, decode_memory(cfg, device, tp=tp, overhead=overhead)


def decode_forms(
    cfg: ModelConfig,
    device: str,
    tp: int = 1,
    overhead: Overhead | None = None,
    predictor: Predictor | None = None,
) -> DecodeForms:
    """The compiled :class:`DecodeForms` of one configuration (its ``tpot`` priced by ``predictor``).

    Parameters
    ----------
    cfg : ModelConfig
        The model.
    device : str
        The device's catalog name.
    tp : int
        Tensor-parallel degree.
    overhead : Overhead, optional
        The ledger's reserve policy.
    predictor : Predictor, optional
        Prices the step (default: the bound).

    Returns
    -------
    DecodeForms
    """
    # loaded on use: the cached sweep imports this module for DecodeForms alone, without pricing
    from costmodel.cost import as_float
    from costmodel.hardware import get_device

    hw = get_device(device)
    tpot, mem = compile_decode(cfg, device, tp, overhead, predictor)
    power = as_float(hw.power_w) if hw.power_w is not None else None
    return DecodeForms(
        cfg.name, hw.name, cfg.weight_dtype, cfg.cache_dtype, power, as_float(hw.memory_bytes()), tpot, mem
    )


#: most points one sweep evaluates (about 1 GiB of result columns)
MAX_POINTS = 10_000_000


def check_grid(
    configurations: int, batches: Sequence[int], ctxs: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The batch and context axes as float arrays, refused (before any work) when empty, not
    positive integers, or more than :data:`MAX_POINTS` points over ``configurations``.

    Parameters
    ----------
    configurations : int
        Configurations the grid is evaluated for.
    batches : sequence of int
        Decode batches (sequences).
    ctxs : sequence of int
        Contexts (tokens).

    Returns
    -------
    tuple of (numpy.ndarray, numpy.ndarray)
        The batch and context axes.

    Raises
    ------
    CostModelError
        When an axis is empty or not positive integers, or the grid exceeds :data:`MAX_POINTS`.
    """
    bs = np.asarray(list(batches), dtype=float)
    cs = np.asarray(list(ctxs), dtype=float)
    if bs.size == 0 or cs.size == 0:
        raise CostModelError("sweep needs at least one batch and one ctx")
    if (bs < 1).any() or (bs != np.floor(bs)).any():
        raise CostModelError(f"batches must be positive integers, got {sorted(set(bs.tolist()))[:5]}")
    if (cs < 1).any() or (cs != np.floor(cs)).any():
        raise CostModelError(f"ctx values must be positive integers, got {sorted(set(cs.tolist()))[:5]}")
    total = configurations * bs.size * cs.size
    if total > MAX_POINTS:
        raise CostModelError(
            f"the sweep has {total:,} points ({configurations} configurations x {bs.size} batches x {cs.size} "
            f"contexts); at most {MAX_POINTS:,} fit in memory here"
        )
    return bs, cs


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
    a predicted sweep prices each configuration in one call, so its kernels are tabulated once,
    and reports the coverage of its frontier's steps).

    Parameters
    ----------
    config : ModelConfig or str
        The model.
    devices : sequence of str
        Device catalog names.
    batches : sequence of int
        Decode batches (sequences).
    ctxs : sequence of int
        Contexts (tokens per sequence).
    weight_dtypes, kv_dtypes : sequence of str or None
        Weight and KV-cache dtypes to try (None: the config's); a repeat (also by an alias, as
        ``fp8`` and ``fp8_e4m3``) is refused, as one of ``devices`` is.
    tp : int
        Tensor-parallel degree.
    overhead : Overhead, optional
        The ledger's reserve policy.
    progress : callable, optional
        ``progress(done, total)`` in points.
    chunk : int
        Points evaluated per numpy call.
    predictor : Predictor, optional
        Prices the steps (default: the bound).

    Returns
    -------
    SweepResult
        Per configuration and point: TPOT (s), tokens/s per user and per device, J/token, memory,
        the Pareto frontier.

    Raises
    ------
    CostModelError
        When the grid is invalid (:func:`check_grid`), a name is unknown, a device or dtype is
        given twice, ``devices`` or a dtype axis is a bare string, or ``chunk`` is below 1.
    """
    # loaded on use: the cached sweep imports this module for DecodeForms alone, without pricing
    from costmodel.hardware import get_device
    from models.catalog import get_model
    from models.quantization import native_matmul, weights_in

    from ..pricing.predictor import BOUND
    from ..pricing.priced import PricedStep

    for name, values in (("devices", devices), ("weight_dtypes", weight_dtypes), ("kv_dtypes", kv_dtypes)):
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            # devices="h100" was swept letter by letter: "unknown device 'h'"
            raise CostModelError(f"{name} must be a list, got {type(values).__name__} {values!r:.40}")
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1:
        # 0 was a ValueError from range() once the grid was built
        raise CostModelError(f"chunk must be a whole number of points >= 1, got {chunk!r:.40}")
    pred = predictor or BOUND
    if not pred.is_bound:
        chunk = max(chunk, 10**9)

    from ..step.option_checks import check_device_repeats, check_dtype_repeats

    # a repeat (also by an alias) refused in the parameter's name, as search refuses it and the
    # command line its options: it was swept twice, both copies on the frontier
    check_device_repeats(devices, "devices")
    check_dtype_repeats(weight_dtypes, "weight_dtypes")
    check_dtype_repeats(kv_dtypes, "kv_dtypes")
    cfg = get_model(config) if isinstance(config, str) else config
    combos = list(itertools.product(devices, weight_dtypes, kv_dtypes))
    check_grid(len(combos), batches, ctxs)
    forms = []
    notes: dict[str, None] = {}
    for dev, wd, kvd in combos:
        # a tp group wider than the device's scale-up domain is priced on its network: said, as
        # decode, search and size say it
        for across in get_device(dev).group_notes(tp):
            notes.setdefault(across)
        c = cfg if kvd is None else cfg.replace(kv_dtype=kvd)
        if wd is not None:  # every weight, the routed experts' own format too (as --weight-dtype)
            c, note = weights_in(c, wd)
            if note:
                notes.setdefault(note)
            # fp8/nvfp4 weights run W8A8/W4A4 where the tensor cores can
            c, note = native_matmul(c, [get_device(dev)])
            if note:
                notes.setdefault(note)
        forms.append(decode_forms(c, dev, tp, overhead, pred))
    res = sweep_forms(cfg.name, forms, batches=batches, ctxs=ctxs, tp=tp, progress=progress, chunk=chunk)
    res = dataclasses.replace(res, notes=tuple(notes))
    if pred.is_bound:
        return res
    cov: Coverage | None = None
    n = len(res) // len(forms)
    front = np.flatnonzero(res.columns["pareto"])
    for i, f in enumerate(forms):  # the frontier's steps, by what they rest on
        sel = front[(front >= i * n) & (front < (i + 1) * n)]
        step = getattr(f.tpot, "__self__", None)
        if len(sel) and isinstance(step, PricedStep):
            piece = step.coverage_array(res.columns["batch"][sel], res.columns["ctx"][sel])
            cov = piece if cov is None else cov + piece
    return dataclasses.replace(res, predictor=pred.label, coverage=cov)


def sweep_forms(
    model: str,
    forms: Sequence[DecodeForms],
    *,
    batches: Sequence[int],
    ctxs: Sequence[int],
    tp: int = 1,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 65536,
) -> SweepResult:
    """Evaluate each configuration's :class:`DecodeForms` on the batch x context grid: time
    per output token ``T``, ``1/T`` tokens/s per user, ``B/(tp T)`` per device, ``P tp T / B``
    joules per token at the device's power ``P``, every device of the group (NaN without one),
    memory against capacity, and the Pareto frontier among the points that fit.

    Parameters
    ----------
    model : str
        The model's name.
    forms : sequence of DecodeForms
        One per configuration.
    batches : sequence of int
        Decode batches.
    ctxs : sequence of int
        Contexts (tokens).
    tp : int
        Tensor-parallel degree (devices per replica).
    progress : callable, optional
        ``progress(done, total)`` in points.
    chunk : int
        Points evaluated per numpy call.

    Returns
    -------
    SweepResult

    Raises
    ------
    CostModelError
        When the grid is invalid (:func:`check_grid`).
    """
    bs, cs = check_grid(len(forms), batches, ctxs)
    total = len(forms) * bs.size * cs.size
    bg, cg = (a.ravel() for a in np.meshgrid(bs, cs, indexing="ij"))
    n = bg.size
    # every column allocated once at its full size and filled per configuration (no concatenation)
    out: dict[str, np.ndarray] = {
        k: np.empty(total, dtype=object) for k in ("device", "weight_dtype", "kv_dtype")
    }
    # the tensor-parallel degree every point runs at: its per-device memory and throughput depend on it
    out["tp"] = np.full(total, tp, dtype=np.int64)
    out.update(batch=np.tile(bg.astype(np.int64), len(forms)), ctx=np.tile(cg.astype(np.int64), len(forms)))
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
    capacity = np.empty(total)  # each point's device's, for what a sweep where nothing fits says
    done = 0
    for i, f in enumerate(forms):
        base = i * n
        tpot = out["tpot_s"][base : base + n]
        mem = out["memory_bytes"][base : base + n]
        for lo in range(0, n, chunk):
            sl = slice(lo, lo + chunk)
            tpot[sl] = f.tpot(bg[sl], cg[sl])
            mem[sl] = f.memory(bg[sl], cg[sl])
            done += tpot[sl].size
            if progress:
                progress(done, total)
        power = f.power_w if f.power_w is not None else np.nan
        part = slice(base, base + n)
        out["device"][part] = f.device
        out["weight_dtype"][part] = f.weight_dtype
        out["kv_dtype"][part] = f.kv_dtype
        np.divide(1.0, tpot, out=out["tokens_per_s_per_user"][part])
        np.divide(bg / tp, tpot, out=out["tokens_per_s_per_device"][part])
        np.divide(power * tp * tpot, bg, out=out["energy_per_token_j"][part])  # every device of the tp group
        np.less_equal(mem, f.capacity_bytes, out=out["fits"][part])
        capacity[part] = f.capacity_bytes
    fits = out["fits"]
    least: dict[str, Any] | None = None
    if fits.any():
        # one frontier per context, as search draws them: a context is the workload, not a choice,
        # and a shorter one is faster on both axes (one frontier over 1024 and 65536 tokens held
        # only 1024's points); the points that fit grouped by context once (sorted), not masked
        # per context (1,000 contexts of 1e6 points: 1e9 comparisons)
        fit = np.flatnonzero(fits)
        order = fit[np.argsort(out["ctx"][fit], kind="stable")]
        c = out["ctx"][order]
        starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(order)], strict=True):
            sel = order[a:b]
            pts = np.column_stack([out["tokens_per_s_per_user"][sel], out["tokens_per_s_per_device"][sel]])
            out["pareto"][sel[pareto_mask(pts, (True, True))]] = True
    elif total:  # nothing fits: the point needing the least share of its device, said
        with np.errstate(divide="ignore", invalid="ignore"):
            j = int(np.nanargmin(np.where(capacity > 0, out["memory_bytes"] / capacity, np.inf)))
        least = {k: _py(out[k][j]) for k in ("device", "weight_dtype", "kv_dtype", "tp", "batch", "ctx")}
        least.update(needed_bytes=float(out["memory_bytes"][j]), capacity_bytes=float(capacity[j]))
    return SweepResult(model, out, least_need=least)
