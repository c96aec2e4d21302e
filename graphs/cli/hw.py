"""`costmodel hw`: the hardware catalog, devices side by side, vendor claims decomposed."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_json, dump, emit

__all__ = ["add_hw_parser"]


def cmd_hw_list(args: argparse.Namespace) -> int:
    from costmodel.cost import as_float
    from costmodel.expr import to_expr
    from costmodel.hardware import device_names, get_device
    from costmodel.report import fmt_si, format_table

    def num(e: Any) -> float | None:
        return as_float(e) if e is not None and not to_expr(e).free_symbols else None

    rows = []
    for name in device_names():
        hw = get_device(name)
        dram = next((m for m in hw.memory if m.name == "dram"), None)
        rows.append(
            {
                "device": name,
                "description": hw.description,
                "bf16": num(hw.peak("tensor", "bf16")),
                "dram_bw": num(dram.bandwidth_bytes_per_s) if dram else None,
                "capacity": num(dram.capacity_bytes) if dram else None,
                # what every capacity check and KV pool divides (Hardware.memory_bytes): the
                # driver's report where sourced (an H100 SXM's 81,559 MiB = 85.52 GB, not "80 GB")
                "memory_bytes": num(hw.memory_bytes()) if dram else None,
                "power_w": num(hw.power_w),
            }
        )
    if args.json:
        print(dump(rows))
        return 0
    shown = []
    for r in rows:  # devices without a number (a probe has no capacity) print "-"
        shown.append(
            {
                k: (
                    "-"
                    if v is None
                    else (fmt_si(float(v)) if k in ("bf16", "dram_bw", "capacity", "memory_bytes") else v)
                )
                for k, v in r.items()
            }
        )
        shown[-1]["power"] = f"{r['power_w']:.0f} W" if r["power_w"] else "-"
    cols = (
        ("device", "device", "s"),
        ("bf16", "bf16 dense (FLOP/s)", "s"),
        ("dram_bw", "DRAM (B/s)", "s"),
        ("capacity", "capacity (B)", "s"),
        ("memory_bytes", "checks use (B)", "s"),
        ("power", "power", "s"),
        ("description", "description", "s"),
    )
    print(format_table(shown, cols, left=("description",)))  # numbers right, text left
    print(
        "capacity: the vendor's (decimal GB); checks use: what every capacity check and KV pool divides, "
        "the memory the driver reports where the catalog sources it (hw show NAME says which)"
    )
    return 0


def _capacity(level: str, capacity: Any) -> str:
    """A memory level's capacity as printed: DRAM in decimal units (its datasheets' GB), an
    on-chip level (L2, shared memory) in binary ones, as it is built and its whitepapers'
    "50 MB L2" / "228 KB" mean: the catalog stores 50 x 2**20 B, which read decimally is 52.43 MB."""
    from costmodel.report import fmt_si

    if not capacity:
        return "-"
    if isinstance(capacity, str):  # a symbolic value (a bare name in a --hw-file) as written
        return capacity
    if level == "dram":
        return fmt_si(capacity, "B")
    c = float(capacity)
    return f"{c / 2**20:.2f} MiB" if c >= 2**20 else f"{c / 2**10:.2f} KiB"


def cmd_hw_show(args: argparse.Namespace) -> int:
    from costmodel.hardware import get_device
    from costmodel.report import fmt_si

    hw = get_device(args.name)
    d = hw.to_dict()
    if args.json:
        print(dump(d))
        return 0

    def si(v: Any, unit: str) -> str:
        """A number with its SI prefix; a symbolic value (a bare name in a --hw-file) as written."""
        return v if isinstance(v, str) else fmt_si(v, unit)

    print(f"{hw.name}: {hw.description}")
    if hw.preliminary:
        print(f"  preliminary figures: {hw.preliminary}")
    if hw.architecture:
        print(f"  architecture: {hw.generation}  [{hw.architecture_source}]")
    for r in d["roofs"]:
        print(
            f"  {r['unit']:6s} {r['precision']:6s} {si(r['peak_flops_per_s'], 'FLOP/s'):>16s}  [{r['source']}]"
        )
    for m in d["memory"]:
        bw = si(m["bandwidth_bytes_per_s"], "B/s") if m["bandwidth_bytes_per_s"] else "-"
        cap = _capacity(m["name"], m["capacity_bytes"])
        print(f"  {m['name']:6s} bw {bw:>12s}  capacity {cap:>10s} per {m['per']}  [{m['source']}]")
    rep = d.get("reported_memory_bytes")
    if rep is not None:  # what every capacity check divides (Hardware.memory_bytes)
        mib = f" ({rep / 2**20:,.0f} MiB)" if not isinstance(rep, str) else ""
        print(
            f"  memory the driver reports: {si(rep, 'B')}{mib} per device, what the capacity checks "
            f"and KV pools use  [{d['reported_memory_source']}]"
        )
    elif any(m["name"] == "dram" and m["capacity_bytes"] for m in d["memory"]):
        print(
            "  memory the driver reports: not in the catalog; the dram capacity above stands in for the capacity checks"
        )
    for lk in d["links"]:
        print(
            f"  link {lk['name']}: {si(lk['bandwidth_bytes_per_s'], 'B/s')} per direction, "
            + ("latency not stated" if lk["latency_s"] is None else f"latency {lk['latency_s']} s")
            + (f", {lk['domain']} devices per domain" if lk.get("domain") else "")
            + f"  [{lk['source']}]"
        )
    if d["power_w"]:
        p = d["power_w"]
        print(f"  power {p if isinstance(p, str) else format(p, '.0f')} W  [{d['power_source']}]")
    if d.get("price_usd_per_hour") is not None:
        pr = d["price_usd_per_hour"]
        print(
            f"  price {pr if isinstance(pr, str) else format(pr, '.3f')} USD per device-hour  [{d['price_source']}]"
        )
    if hw.notes:
        print(f"  note: {hw.notes}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from costmodel.compare import compare_devices
    from costmodel.report import fmt_si, format_table
    from costmodel.text import fmt_num

    rows = compare_devices(args.devices, args.precision)

    def si(v: float | None, unit: str) -> str:
        return "-" if v is None else fmt_si(v, unit)

    table = [
        {
            "device": r.device,
            "peak": si(r.peak_flops_per_s, "FLOP/s"),
            "ridge": "-" if r.ridge_flop_per_byte is None else fmt_num(r.ridge_flop_per_byte, ".1f"),
            "bw": si(r.bandwidth_bytes_per_s, "B/s"),
            "cap": si(r.capacity_bytes, "B"),
            "reads": f"{r.full_memory_reads_per_s:.1f}",
            "power": "-" if r.power_w is None else f"{r.power_w:.0f}",
        }
        for r in rows
    ]
    cols = (
        ("device", "device", "s"),
        ("peak", f"{rows[0].precision if rows else args.precision} dense peak", "s"),  # the roof's name
        ("ridge", "ridge (FLOP/B)", "s"),
        ("bw", "DRAM bandwidth", "s"),
        ("cap", "memory", "s"),
        ("reads", "full reads/s", "s"),
        ("power", "TDP (W)", "s"),
    )
    from costmodel.hardware import get_device

    vendor = [r.device for r in rows if get_device(r.device).reported_memory_bytes is None]
    note = "memory: what the capacity checks divide, the driver-reported figure" + (
        f"; the vendor's for {', '.join(vendor)} (no driver figure in the catalog)" if vendor else ""
    )
    if (
        args.json and vendor
    ):  # a list has no place for the note: the vendor's figure standing in, said on stderr
        from costmodel.notes import say

        say(note)
    return emit(args, [r.to_dict() for r in rows], format_table(table, cols) + "\n" + note)


def _dev_spec(text: str) -> tuple[str, str, int]:
    from costmodel.errors import CostModelError

    parts = text.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()) or not all(parts[:2]):
        raise CostModelError(f"{text!r}: expected DEVICE:PRECISION[:COUNT], e.g. h100:fp8:8")
    count = int(parts[2]) if len(parts) == 3 else 1
    if count < 1:
        raise CostModelError(f"{text!r}: COUNT must be a positive number of devices, got {count}")
    return parts[0], parts[1], count


def cmd_claim(args: argparse.Namespace) -> int:
    from costmodel.compare import decompose_claim

    od, op, oc = _dev_spec(args.old)
    nd, np_, nc = _dev_spec(args.new)
    r = decompose_claim(od, op, nd, np_, old_count=oc, new_count=nc)
    text = (
        f"{r.new} vs {r.old}: {r.claimed_speedup:.2f}x peak = format {r.format_factor:.2f}x "
        f"x architecture {r.architecture_factor:.2f}x x system size {r.system_size_factor:.2f}x; "
        f"like for like per chip: {r.like_for_like_per_chip:.2f}x"
    )
    return emit(args, r.to_dict(), text)


def add_hw_parser(sub: Any) -> None:
    hw = sub.add_parser("hw", help="hardware catalog")
    hsub = hw.add_subparsers(dest="hw_command", required=True)
    hl = hsub.add_parser("list", help="list catalog devices")
    add_json(hl)
    hl.set_defaults(func=cmd_hw_list)
    hs = hsub.add_parser("show", help="show one device with sources")
    hs.add_argument("name", help="device name or alias")
    add_json(hs)
    hs.set_defaults(func=cmd_hw_show)
    c = hsub.add_parser("compare", help="devices side by side at one precision (dense roofs)")
    c.add_argument("devices", nargs="+")
    c.add_argument(
        "--precision",
        default="bf16",
        help="the tensor roof compared: its name (bf16, fp8, fp4 ...) or a dtype's, in any case, as "
        "--dtype takes it (FP8, fp8_e4m3: the fp8 roof) (default: bf16)",
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_compare, device_notes="device")
    cl = hsub.add_parser("claim", help="decompose a speed-up claim: format x architecture x system size")
    cl.add_argument("--old", required=True, help="DEVICE:PRECISION[:COUNT], e.g. h100:fp8:8")
    cl.add_argument("--new", required=True, help="DEVICE:PRECISION[:COUNT], e.g. b300:fp4:72")
    cl.add_argument("--json", action="store_true")
    cl.set_defaults(func=cmd_claim, device_notes="device")
