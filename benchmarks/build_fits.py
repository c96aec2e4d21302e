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
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from multiprocessing import get_context
from typing import Any

os.environ["COSTMODEL_NO_FIT_CACHE"] = "1"  # every fit computed here, none read back

from costmodel.measured.corpus import FAMILIES, FRAMEWORKS, SYSTEMS, systems_with_data

#: the dtype keys built by default: the catalog models' BF16 weights, activations and KV cache
BF16 = ("bfloat16", "bfloat16/bfloat16")


def unmeasured_device() -> str:
    """A catalog device without measurements (its fits read every measured device's rows: the
    same fits for every such device)."""
    from costmodel.hardware import device_names, get_device

    measured = set(SYSTEMS.values())
    return next(n for n in sorted(device_names()) if get_device(n).name not in measured)


def dtype_keys(family: str, devices: list[str]) -> list[str]:
    """The dtype keys the corpus measures for ``family`` on ``devices``."""
    from costmodel.measured.heldout import prepared

    keys: set[str] = set()
    for d in devices:
        keys |= set(prepared(family, d)[0]["dtype_group"].unique())
    return sorted(keys)


def build(job: tuple[str, str, list[str], list[str] | None, bool]) -> tuple[dict[str, Any], float]:
    """Record the fits of one (device, framework) over ``families`` (module doc)."""
    from costmodel.measured import shipped
    from graphs.serving.pricing import kernel_sources as ks

    device, fw, families, only, extend = job
    t = time.process_time()
    with shipped.recording(reuse=extend) as rec:
        for family in families:
            have = systems_with_data(family)
            devs = [device] if device in have else have
            for key in dtype_keys(family, devs):
                if only is not None and key not in only:
                    continue
                ks.kernel_source(device, fw, family, key)
                ks.heldout_log_errors(device, fw, family, key, False)
        out = dict(rec)
    print(
        f"  {device} {fw}: {len(out)} fits, {time.process_time() - t:.0f} CPU s", file=sys.stderr, flush=True
    )
    return out, time.process_time() - t


def main() -> None:
    from costmodel.measured import shipped

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--devices", default=None, help="default: every measured device and one unmeasured")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--dtypes", default=",".join(BF16), help="dtype keys, or all (default: %(default)s)")
    ap.add_argument("--out", default=str(shipped.PATH))
    ap.add_argument(
        "--extend",
        action="store_true",
        help="keep the installed file's fits that apply (read, not refitted) and add these jobs' fits",
    )
    a = ap.parse_args()
    families = a.families.split(",")
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
    for rec, _ in results:
        for k, v in rec.items():
            if recorded.setdefault(k, v) != v:  # one input, one fit: a difference is a bug
                raise SystemExit(f"two fits of the same inputs differ: {k!r}")
    size = shipped.write(a.out, recorded, families)
    cpu = sum(c for _, c in results)
    print(
        f"{len(recorded)} fits of {len(families)} families, {len(jobs)} (device, framework) jobs: "
        f"{size / 1e6:.2f} MB at {a.out}; {time.perf_counter() - t0:.0f} s wall, {cpu:.0f} CPU s in the workers"
    )


if __name__ == "__main__":
    main()
