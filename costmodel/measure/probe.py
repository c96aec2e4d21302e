"""Probe this machine: achievable bandwidth and matmul peaks, written as a hardware spec.

Measurements use ``time.perf_counter`` around real kernels, with a warm-up,
``repeats`` timed runs, the best (minimum) kept and the spread reported:

* bandwidth, three access patterns (fp32 arrays larger than the caches):
  ``copy`` (``y[:] = x``: read n, write n), ``add`` (``z = x + y``: read 2n,
  write n, the profiling article's pattern) and a large ``gemv`` (``W @ x``:
  the matrix read once, intensity ~0.5 FLOP/B);
* matmul peak per dtype: a square GEMM, ``2 n^3`` FLOPs;
* with torch installed, the same through torch on the best device it sees
  (CUDA when available, else CPU), in fp32 and bf16.

The spec keeps the best bandwidth as the ``dram`` roof (the ``add`` pattern
by default, as the article does), every matmul peak as a ``tensor`` roof of
its precision (a probed "peak" is an achievable ceiling, not a datasheet
number: sources say so), and records the environment.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..hardware import Hardware, hardware_from_dict
from ..outfiles import atomic_write

__all__ = ["Measurement", "ProbeResult", "time_best", "probe", "environment", "host_memory_bytes"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Measurement:
    """Best time of a kernel and what it moved or computed."""

    name: str
    best_s: float
    spread: float  #: (median - best) / best over the timed repeats
    bytes: float = 0.0
    flops: float = 0.0

    @property
    def bandwidth(self) -> float:
        return self.bytes / self.best_s

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.best_s


def time_best(
    fn: Callable[[], Any], repeats: int = 5, warmup: int = 1, min_time_s: float = 0.0
) -> tuple[float, float]:
    """(best seconds, relative spread) of ``fn`` over at least ``repeats`` runs after ``warmup``.

    Runs continue past ``repeats`` until ``min_time_s`` seconds of timed runs have
    accumulated (capped at 50 runs): on a shared machine a few short runs can all land
    in a busy moment, and a peak taken from them would be too low, which later shows up
    as kernels running "faster than the roof".
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    while len(times) < repeats or (sum(times) < min_time_s and len(times) < 50):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    best = min(times)
    return best, (float(np.median(times)) - best) / best


def environment() -> dict[str, Any]:
    """CPU, BLAS, threads and library versions of this run."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    env: dict[str, Any] = {
        "cpu": cpu,
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "memory_bytes": host_memory_bytes(),
    }
    try:
        from threadpoolctl import threadpool_info

        env["blas"] = [
            {k: i.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for i in threadpool_info()
        ]
    except ImportError:
        env["blas"] = "threadpoolctl not installed"
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        env["torch"] = None
    return env


def host_memory_bytes() -> int | None:
    """The host's physical memory (B): ``SC_PHYS_PAGES x SC_PAGE_SIZE`` from ``os.sysconf`` (the
    kernel's count of physical pages, as ``free`` reports it), or None where the platform has no
    such count (the spec then states no capacity and says so).

    Returns
    -------
    int or None
        Bytes of physical memory.
    """
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return int(pages) * int(size) if pages > 0 and size > 0 else None


@dataclass
class ProbeResult:
    measurements: list[Measurement] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)

    def best(self, prefix: str) -> Measurement | None:
        ms = [m for m in self.measurements if m.name.startswith(prefix)]
        return min(ms, key=lambda m: m.best_s / max(m.bytes + m.flops, 1)) if ms else None

    def spec_dict(self, name: str = "probe", bandwidth_pattern: str = "bw:add") -> dict[str, Any]:
        """The probe as a catalog-layout device table (``--hw-file``)."""
        bw = next((m for m in self.measurements if m.name == bandwidth_pattern), None)
        if bw is None:
            raise ValueError(f"no {bandwidth_pattern} measurement in the probe")
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        src = f"measured by costmodel probe on {self.env.get('cpu')} ({stamp})"
        best: dict[str, Measurement] = {}
        for m in self.measurements:  # per precision, the fastest library wins
            if m.name.startswith("mm:"):
                prec = m.name.split(":")[2]
                if prec not in best or m.flops_per_s > best[prec].flops_per_s:
                    best[prec] = m
        roofs: list[dict[str, Any]] = [
            {
                "unit": "tensor",
                "precision": prec,
                "peak_flops_per_s": m.flops_per_s,
                "source": f"{src}, {m.name}: {m.flops:.3g} FLOP in {m.best_s * 1e3:.2f} ms",
            }
            for prec, m in best.items()
        ]
        # on a CPU the same ALUs run vector work: the fp32 matmul rate is the vector ceiling too
        fp32 = next((r for r in roofs if r["precision"] == "fp32"), None)
        if fp32 is not None:
            roofs.append(
                {**fp32, "unit": "vector", "source": fp32["source"] + " (vector units = matmul units)"}
            )
        return {
            "sources": {},
            "devices": {
                name: {
                    "description": f"probed: {self.env.get('cpu')}",
                    "vendor": "measured",
                    "roofs": roofs,
                    "memory": [self._dram(src, bw)],
                    "notes": json.dumps(
                        {
                            "environment": self.env,
                            "measurements": [
                                {
                                    "name": m.name,
                                    "best_s": m.best_s,
                                    "spread": m.spread,
                                    "bytes": m.bytes,
                                    "flops": m.flops,
                                }
                                for m in self.measurements
                            ],
                        }
                    ),
                }
            },
        }

    def _dram(self, src: str, bw: Measurement) -> dict[str, Any]:
        """The ``dram`` level: the measured bandwidth and, where the platform counts it, the
        host's physical memory as its capacity (the memory the probed arrays live in), so that
        a probed spec answers the commands that check what fits."""
        level: dict[str, Any] = {
            "name": "dram",
            "bandwidth_bytes_per_s": bw.bandwidth,
            "source": f"{src}, {bw.name}: {bw.bytes:.3g} B in {bw.best_s * 1e3:.2f} ms",
        }
        cap = self.env.get("memory_bytes")
        if isinstance(cap, int) and cap > 0:
            level["capacity_bytes"] = cap
            level["source"] += (
                f"; capacity: the host's physical memory, {cap:,} B (os.sysconf pages x page size)"
            )
        return level

    def hardware(self, name: str = "probe") -> Hardware:
        d = self.spec_dict(name)
        return hardware_from_dict(name, d["devices"][name])

    def write(self, path: str | Path, name: str = "probe", flag: str = "--out") -> None:
        """The spec as a JSON hardware file, written atomically (never through a link)."""
        with atomic_write(path, flag, suffixes=(".json",)) as f:
            f.write(json.dumps(self.spec_dict(name), indent=2))


def _say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


def probe(
    *, small: bool = False, repeats: int = 5, use_torch: bool = True, progress: Progress | None = None
) -> ProbeResult:
    """Measure bandwidth (copy, add, gemv) and matmul peaks (module doc).

    ``small`` shrinks the arrays (~64 MB working sets, 1024-2048 GEMMs) so a
    probe takes seconds; the default uses 128 MB arrays and 4096 GEMMs.
    """
    res = ProbeResult(env=environment())
    n = 8_000_000 if small else 32_000_000
    x = np.ones(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    z = np.empty(n, dtype=np.float32)
    _say(progress, f"bandwidth: copy of {n * 4 / 1e6:.0f} MB")
    t, s = time_best(lambda: np.copyto(z, x), repeats, min_time_s=0.2)
    res.measurements.append(Measurement("bw:copy", t, s, bytes=2 * 4 * n))
    _say(progress, "bandwidth: add (read 2n, write n)")
    t, s = time_best(lambda: np.add(x, y, out=z), repeats, min_time_s=0.2)
    res.measurements.append(Measurement("bw:add", t, s, bytes=3 * 4 * n))
    rows = 2048 if small else 4096
    cols = n // rows
    w = np.ones((rows, cols), dtype=np.float32)
    v = np.ones(cols, dtype=np.float32)
    _say(progress, f"bandwidth: gemv {rows}x{cols}")
    t, s = time_best(lambda: w @ v, repeats, min_time_s=0.2)
    res.measurements.append(
        Measurement("bw:gemv", t, s, bytes=4 * (rows * cols + cols + rows), flops=2 * rows * cols)
    )
    size = 1024 if small else 4096
    for dt, prec in ((np.float32, "fp32"), (np.float64, "fp64")):
        a = np.ones((size, size), dtype=dt)
        b = np.ones((size, size), dtype=dt)
        c = np.empty((size, size), dtype=dt)
        _say(progress, f"matmul: numpy {prec} {size}^3")
        t, s = time_best(partial(np.matmul, a, b, out=c), max(2, repeats - 2), min_time_s=0.3)
        res.measurements.append(
            Measurement(f"mm:numpy:{prec}", t, s, flops=2 * size**3, bytes=3 * size * size * a.itemsize)
        )
    if use_torch:
        _probe_torch(res, size, repeats, progress)
    return res


def _probe_torch(res: ProbeResult, size: int, repeats: int, progress: Progress | None) -> None:
    try:
        import torch
    except ImportError:
        return
    dev = "cuda" if torch.cuda.is_available() else "cpu"

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()

    for tdt, prec in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        a = torch.ones((size, size), dtype=tdt, device=dev)
        b = torch.ones((size, size), dtype=tdt, device=dev)
        _say(progress, f"matmul: torch {dev} {prec} {size}^3")

        def run(a: Any = a, b: Any = b) -> None:
            torch.matmul(a, b)
            sync()

        t, s = time_best(run, max(2, repeats - 2))
        res.measurements.append(
            Measurement(
                f"mm:torch-{dev}:{prec}", t, s, flops=2 * size**3, bytes=3 * size * size * a.element_size()
            )
        )
