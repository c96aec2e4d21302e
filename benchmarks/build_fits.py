"""Build the kernel fits that ship with the package (``costmodel/measured/shipped_fits.json.gz``).

Every fit a ``--predict`` asks for is fitted afresh (the shipped file and the fit cache both set
aside) and recorded by the digest of its inputs (:mod:`costmodel.measured.shipped`): per
framework, per device (each measured device's own rows, and one unmeasured device, whose fits
read every measured device's rows), per family and per dtype key the corpus measures, the fits
:func:`graphs.serving.pricing.kernel_sources.kernel_source` prices with (the framework's kernels, else
every framework's) and the held-out refits behind the intervals
(:func:`graphs.serving.pricing.kernel_sources.heldout_log_errors`). The file is written for the
installed ``aiconfigurator-core`` wheel; rerun this after changing the wheel or the fitting code
(``tests/test_shipped_fits.py`` says when the file no longer matches the code).

    python -m benchmarks.build_fits [--jobs 2] [--families gemm,...] [--devices ...] [--frameworks ...]

By default the BF16 dtype keys (``bfloat16`` GEMMs, MoE and all-reduces,
``bfloat16/bfloat16`` attention and MLA: the catalog models' own dtypes) of every measured
device, the unmeasured one and every framework; ``--dtypes all`` every key the corpus measures
(about an hour of CPU), or a list (``fp8,bfloat16/fp8``). What the file does not hold is
fitted on first use as before (and kept in the fit cache). ``--extend`` keeps the installed
file's fits that still apply and adds the new ones, so a build can grow in steps.

The unmeasured device's jobs also record the tables every unmeasured device shares
(:mod:`costmodel.measured.shipped_tables`: its fit groups, the residual tables of the kernels it
prices and the held-out errors, plain and grey-box, all read from every measured device's rows)
and write them to ``costmodel/measured/shipped_tables.bin`` (``--tables-out``), keyed by the
package sources those jobs read (:func:`costmodel.formstore.recorded_sources`): the store holds
this run's entries alone, so build it with every family and framework (the default). It is
set aside, and the tables derived from the rows as before, after an edit of any source it lists:
rerun this then (``tests/test_shipped_tables.py`` says so).

The fused-MoE family is priced by its measured curves (:func:`graphs.serving.pricing.kernel_sources.moe_source`:
no fit, no residuals, no held-out errors; its keys are shapes, not dtypes): nothing of it is
built, and asking for it says so.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from multiprocessing import get_context
from typing import Any

#: the dtype keys built by default: the catalog models' BF16 weights, activations and KV cache
BF16 = ("bfloat16", "bfloat16/bfloat16")

#: families priced without fits: fused MoE by its measured curves (module doc)
NO_FITS = ("moe",)


def fit_families(asked: list[str]) -> list[str]:
    """``asked`` less the families priced without fits (:data:`NO_FITS`), saying so for each."""
    for family in asked:
        if family in NO_FITS:
            print(
                f"  {family}: priced by its measured curves (no fit, no residuals, no held-out errors): "
                "nothing to build",
                file=sys.stderr,
            )
    return [f for f in asked if f not in NO_FITS]


def unmeasured_device() -> str:
    """A catalog device without measurements (its fits read every measured device's rows: the
    same fits for every such device)."""
    from costmodel.hardware import device_names, get_device
    from costmodel.measured.corpus import SYSTEMS

    measured = set(SYSTEMS.values())
    return next(n for n in sorted(device_names()) if get_device(n).name not in measured)


def dtype_keys(family: str, devices: list[str]) -> list[str]:
    """The dtype keys the corpus measures for ``family`` on ``devices``."""
    from costmodel.measured.heldout import prepared

    keys: set[str] = set()
    for d in devices:
        keys |= set(prepared(family, d)[0]["dtype_group"].unique())
    return sorted(keys)


#: one job: device, framework, families, dtype keys (None: all), whether to reuse the installed fits
Job = tuple[str, str, list[str], list[str] | None, bool]
#: what a job gives: its fits, CPU seconds, shared tables and the sources it read (tables only)
Built = tuple[dict[str, Any], float, dict[str, Any], tuple[list[str], list[str]]]


def build(job: Job) -> Built:
    """Record the fits of one (device, framework) over ``families`` (module doc); for an
    unmeasured device also the shared tables a first ``--predict`` reads
    (:mod:`costmodel.measured.shipped_tables`) and the package sources they were computed from."""
    from costmodel.formstore import recorded_sources
    from costmodel.hardware import get_device
    from costmodel.measured import shipped, shipped_tables
    from costmodel.measured.corpus import SYSTEMS, systems_with_data
    from graphs.serving.pricing import kernel_sources as ks

    device, fw, families, only, extend = job
    shared = get_device(device).name not in set(SYSTEMS.values())
    t = time.process_time()
    with shipped.recording(reuse=extend) as rec, shipped_tables.recording() as tables:
        for family in fit_families(families):
            have = systems_with_data(family)
            devs = [device] if device in have else have
            for key in dtype_keys(family, devs):
                if only is not None and key not in only:
                    continue
                src = ks.kernel_source(device, fw, family, key)
                ks.heldout_log_errors(device, fw, family, key, False)
                if shared:  # what a grey-box --predict reads besides: residuals, grey-box errors
                    if src.fits:
                        ks.calibration_residuals(device, fw, family, (src.key,))
                    ks.heldout_log_errors(device, fw, family, key, True)
        out, shared_out = dict(rec), dict(tables) if shared else {}
    # never the files this build writes (the shipped fits read with --extend among them)
    sources = recorded_sources(exclude=[shipped.PATH, shipped_tables.PATH]) if shared else ([], [])
    print(
        f"  {device} {fw}: {len(out)} fits{f', {len(shared_out)} shared tables' if shared else ''}, "
        f"{time.process_time() - t:.0f} CPU s",
        file=sys.stderr,
        flush=True,
    )
    return out, time.process_time() - t, shared_out, sources


def main() -> None:
    from costmodel.formstore import record_sources

    os.environ["COSTMODEL_NO_FIT_CACHE"] = "1"  # every fit computed here, none read back
    # the package sources the shared tables are computed from are noted from here on, before the
    # packages are imported (the forked jobs inherit the hook and what it noted)
    record_sources()
    from costmodel.measured import shipped, shipped_tables
    from costmodel.measured.corpus import FAMILIES, FRAMEWORKS, SYSTEMS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--families", default=",".join(f for f in FAMILIES if f not in NO_FITS))
    ap.add_argument("--devices", default=None, help="default: every measured device and one unmeasured")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--dtypes", default=",".join(BF16), help="dtype keys, or all (default: %(default)s)")
    ap.add_argument("--out", default=str(shipped.PATH))
    ap.add_argument(
        "--tables-out",
        default=str(shipped_tables.PATH),
        help="the unmeasured device's shared tables (written when it is among the devices)",
    )
    ap.add_argument(
        "--extend",
        action="store_true",
        help="keep the installed file's fits that apply (read, not refitted) and add these jobs' fits",
    )
    a = ap.parse_args()
    families = fit_families(a.families.split(","))
    if not families:
        raise SystemExit(f"no family with fits among {a.families!r}: nothing written")
    # the unmeasured device first: its jobs read every device's rows, the longest ones
    devices = a.devices.split(",") if a.devices else [unmeasured_device(), *SYSTEMS.values()]
    only = None if a.dtypes == "all" else a.dtypes.split(",")
    jobs = [(d, fw, families, only, a.extend) for d in devices for fw in a.frameworks.split(",")]
    t0 = time.perf_counter()
    with get_context("fork").Pool(a.jobs, maxtasksperchild=1) as pool:
        results = pool.map(build, jobs, chunksize=1)
    recorded: dict[str, Any] = shipped.shipped_fits() if a.extend else {}
    if a.extend:
        families = sorted({*families, *(k.split("\0")[0] for k in recorded)})
    tables: dict[str, Any] = {}
    files: set[str] = set()
    dirs: set[str] = set()
    for rec, _, shared, (fs, ds) in results:
        for k, v in rec.items():
            if recorded.setdefault(k, v) != v:  # one input, one fit: a difference is a bug
                raise SystemExit(f"two fits of the same inputs differ: {k!r}")
        for k, v in shared.items():
            if tables.setdefault(k, v) != v:
                raise SystemExit(f"two shared tables of the same inputs differ: {k!r}")
        files |= set(fs)
        dirs |= set(ds)
    size = shipped.write(a.out, recorded, families)
    cpu = sum(r[1] for r in results)
    print(
        f"{len(recorded)} fits of {len(families)} families, {len(jobs)} (device, framework) jobs: "
        f"{size / 1e6:.2f} MB at {a.out}; {time.perf_counter() - t0:.0f} s wall, {cpu:.0f} CPU s in the workers"
    )
    if tables:
        size = shipped_tables.write(a.tables_out, tables, (sorted(files), sorted(dirs)))
        print(
            f"{len(tables)} shared tables from {len(files)} source files: {size / 1e6:.2f} MB at {a.tables_out}"
        )


if __name__ == "__main__":
    main()
