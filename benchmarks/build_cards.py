"""Build the cards that ship with the package (``graphs/serving/present/shipped_cards.bin``).

For every catalog model on every catalog device at the default plan (tp 1, the model's own
dtypes) the cards ``decode``, ``prefill`` and ``model analyze`` (decode and prefill) read,
each built exactly as the command builds it on a cache miss
(:func:`graphs.cli.cached.shipped_entries`), stored with the device names and aliases the
command line accepts (:mod:`costmodel.formstore`). The store lists the sources the build read
(:func:`costmodel.formstore.recorded_sources`: every package module it imported, every package
file it opened, the catalog and the model configs among them, and their folders) and is keyed by
their contents: an edit of any of them sets the whole store aside, and the commands derive their
answers as before until this is run again; an edit of a module the build never imported does not.

    python -m benchmarks.build_cards [--jobs 2] [--models a,b] [--devices x,y] [--out PATH]

About 5 CPU minutes for the 33 x 29 grid; prints the store's size.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tomllib
from importlib import resources
from multiprocessing import get_context
from typing import Any

#: the models whose cards make the preset dictionaries (a dense and a mixture-of-experts one)
SAMPLES = ("llama-3.1-8b", "deepseek-v3")


def build(
    job: tuple[str, list[str], str],
) -> tuple[str, dict[str, dict[str, Any]], float, tuple[list[str], list[str]]]:
    """Every device's cards of one model (one process, so the model's graph is built once), and
    the sources the process read (:func:`costmodel.formstore.recorded_sources`)."""
    from costmodel.formstore import record_sources, recorded_sources
    from graphs.cli.cached import shipped_entries

    model, devices, out_path = job
    record_sources(clear=True)  # this process's reads only (the parent's are listed by it)
    t = time.process_time()
    out: dict[str, dict[str, Any]] = {}
    for d in devices:
        out.update(shipped_entries(model, d))
    return model, out, time.process_time() - t, recorded_sources(exclude=[out_path])


def device_names_table() -> dict[str, str]:
    """Every catalog name and alias of a device, lower case -> its catalog name (series names,
    which resolve to a part with a note, are left to the library)."""
    from costmodel.hardware import get_device

    data = tomllib.loads(resources.files("costmodel").joinpath("hardware", "catalog.toml").read_text())
    out: dict[str, str] = {}
    for name, entry in data["devices"].items():
        for spelling in (name, *entry.get("aliases", [])):
            hw = get_device(spelling)
            assert not hw.resolved_from and hw.name == name, spelling
            out[spelling.lower()] = hw.name
    return out


def zdict_of(cards: list[dict[str, Any]]) -> bytes:
    """A preset dictionary for zlib (:mod:`costmodel.formstore`): the last 32 KiB of a few cards'
    texts of one kind, whose field names and forms its other cards repeat."""
    import json

    return b"".join(json.dumps(c).encode() for c in cards)[-32768:]


def main() -> None:
    from costmodel.formstore import record_sources

    record_sources()  # before the packages are imported: the build's reads are noted from here
    from costmodel.formcache import content_fingerprint
    from costmodel.formstore import recorded_sources, write_store
    from costmodel.hardware import device_names
    from graphs.serving.present.cards import SHIPPED_CARDS
    from models.catalog import model_names

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--models", help="comma list (default: the catalog's)")
    p.add_argument("--devices", help="comma list of catalog names (default: the catalog's)")
    p.add_argument("--out", default=str(SHIPPED_CARDS))
    a = p.parse_args()
    models = a.models.split(",") if a.models else list(model_names())
    devices = a.devices.split(",") if a.devices else list(device_names())
    t = time.time()
    entries: dict[str, dict[str, Any]] = {}
    cpu = 0.0
    names = device_names_table()
    files, dirs = (set(x) for x in recorded_sources(exclude=[a.out]))
    before = content_fingerprint()  # every package file (read after the list): none may change
    with get_context("fork").Pool(a.jobs, maxtasksperchild=1) as pool:
        for i, (model, got, spent, (f, d)) in enumerate(
            pool.imap_unordered(build, [(m, devices, a.out) for m in models])
        ):
            entries.update(got)
            files.update(f)
            dirs.update(d)
            cpu += spent
            print(f"  {i + 1}/{len(models)} {model}: {len(got)} cards, {spent:.1f} CPU s", file=sys.stderr)
    groups: dict[str, tuple[bytes, dict[str, dict[str, Any]]]] = {}
    for kind in {c["kind"] for c in entries.values()}:
        cards = {k: c for k, c in entries.items() if c["kind"] == kind}
        # a dense and a mixture-of-experts model's cards on one device
        samples = [c for c in cards.values() if c["model"] in SAMPLES and c["device"] == devices[0]]
        groups[kind] = (zdict_of(samples), cards)
    if before != content_fingerprint(refresh=True):
        sys.exit("the sources changed while the cards were built: run it again")
    size = write_store(a.out, groups, names, (sorted(files), sorted(dirs)))
    print(
        f"{len(entries)} cards ({len(models)} models x {len(devices)} devices) in {a.out}: "
        f"{size / 1e6:.2f} MB; {len(files)} source files in {len(dirs)} folders; "
        f"{cpu:.0f} CPU s, {time.time() - t:.0f} s wall"
    )


if __name__ == "__main__":
    main()
