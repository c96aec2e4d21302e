"""Throughput of the design-space search and of the command-line sweep.

* ``search``: Llama-3.1-70B over 3 devices x 2 weight dtypes x tp {1,2,4,8} x pp {1,2,4} x
  micro-batches {1,2,4} x 512 batches x 128 contexts (14.2 million points), TPOT <= 100 ms,
  energy as a third objective; prints the points per second and the frontier it kept.
* ``costmodel sweep`` over 1000 batches x 1000 contexts (1e6 points) in a child process, with
  its wall time and peak resident memory (targets: <= 5 s, <= 500 MiB).
* The same search predicted from vLLM's measured kernels (``--predict vllm``: every step priced
  per kernel through :mod:`graphs.serving.pricing.priced`), side by side with the bound search, three
  times: cold (an empty fit cache: the corpus loaded and fitted, what the very first run pays),
  as a new process would run it (the fits read back from the persistent fit cache,
  :mod:`costmodel.measured.stored`; every in-memory cache cleared) and warm (fits in memory,
  every plan's kernels tabulated and the grid priced afresh: what each further search in one
  process pays); target 1e7 points <= 60 s. ``--no-predict`` skips it. The fit cache is a
  temporary directory of this run's, so "cold" is cold whatever the user's cache holds.
* With ``--dask``: the same search on a local Dask cluster of 2 worker processes (the
  ``[dask]`` extra), to show the blocks and frontier merge spread over processes.

    python -m benchmarks.search_speed [--dask] [--no-predict]
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

from graphs.serving.planning.design_search import search


def bar(done: int, total: int) -> None:
    sys.stderr.write(f"\r  search {done / total:6.1%} of {total:,} points")
    if done >= total:
        sys.stderr.write("\n")


def predicted(kw: dict, bound_s: float) -> None:
    """The predicted search beside the bound one (module doc)."""
    from costmodel.measured import heldout
    from graphs.serving.planning import design_search
    from graphs.serving.pricing import kernel_sources as ks
    from graphs.serving.pricing import predictor, priced
    from graphs.serving.pricing.predictor import Predictor

    pred = Predictor.of("vllm")
    os.environ["COSTMODEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="search-speed-fits-")
    labels = (
        "cold (corpus fitted, fit cache empty)",
        "new process (fits read from the fit cache)",
        "warm (fits in memory, kernels tabulated afresh)",
    )
    for label in labels:
        design_search._COMPILED.clear()
        priced._CACHE.clear()
        predictor._TABLES.clear()
        if label != labels[-1]:  # what a new process has in memory: nothing
            for f in (ks.calibration, ks.calibration_residuals, ks.heldout_log_errors, ks.kernel_source):
                f.cache_clear()
            ks._SHARED.clear()
            heldout.prepared.cache_clear()
        t, c = time.perf_counter(), time.process_time()
        res = search("llama-3.1-70b", predictor=pred, **kw)
        d, cpu = time.perf_counter() - t, time.process_time() - c
        print(
            f"predicted search, {label}: {res.points:,} points in {d:.1f} s ({cpu:.1f} CPU s) = {d / bound_s:.1f}x "
            f"the bound search ({res.points / d / 1e6:.2f} M points/s); target 1e7 points <= 60 s"
        )
    assert res.coverage is not None
    cov = res.coverage
    print(
        f"  frontier {len(res.frontier)} points; its decode steps rest on {100 * cov.share('measured'):.1f}% "
        f"measured, {100 * cov.share('neighbour'):.1f}% neighbour, {100 * cov.share('bound'):.1f}% bound"
    )
    for name, row in res.best.items():
        print(f"  {name}: {row['plan']}, batch {row['batch']}, ctx {row['ctx']}")


def main() -> None:
    kw = dict(
        devices=["h100", "b200", "a100"],
        weight_dtypes=["bf16", "fp8"],
        tp=[1, 2, 4, 8],
        pp=[1, 2, 4],
        microbatches=[1, 2, 4],
        batches=range(1, 513),
        ctxs=range(1024, 131073, 1024),
        slo_tpot=0.1,
        energy=True,
        progress=bar,
    )
    t, c = time.perf_counter(), time.process_time()
    res = search("llama-3.1-70b", **kw)
    dt = search_s = time.perf_counter() - t
    print(
        f"search: {res.points:,} points in {dt:.1f} s ({time.process_time() - c:.1f} CPU s: a shared machine's "
        f"wall time counts the waits for a core) = {res.points / dt / 1e6:.2f} M points/s "
        f"({dt / res.points * 1e9:.0f} ns per point, compiles included); target 1e7 points <= 60 s"
    )
    print(f"  {res.fits:,} fit, {res.meets_slo:,} meet the SLO, frontier {len(res.frontier)} points")
    for name, row in res.best.items():
        print(f"  {name}: {row['plan']}, batch {row['batch']}, ctx {row['ctx']}")
    if "--dask" in sys.argv:
        from distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
            Client(cl) as c,
        ):
            t = time.perf_counter()
            remote = search("llama-3.1-70b", client=c, **kw)
            dt2 = time.perf_counter() - t
        print(f"dask (2 workers): {dt2:.1f} s, {dt / dt2:.2f}x the local run; same frontier: {remote == res}")
    cmd = [
        sys.executable,
        "-m",
        "costmodel",
        "sweep",
        "llama-3.1-8b",
        "--batches",
        "1..1000",
        "--ctxs",
        "1..1000",
        "--quiet",
        "--top",
        "1",
    ]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "COSTMODEL_NO_CACHE": "1"})
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"costmodel sweep, 1e6 points: {dt:.2f} s wall, {peak:.0f} MiB peak (targets <= 5 s, <= 500 MiB)")
    # last: a child's peak RSS counts the parent's pages at fork, and the predicted searches'
    # tables would make the sweep's peak the parent's
    if "--no-predict" not in sys.argv:
        predicted(kw, search_s)


if __name__ == "__main__":
    main()
