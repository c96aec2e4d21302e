"""Catalog devices pinned to their datasheets; spec and file-loading errors."""

import json
import re
import tomllib

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import (
    Hardware,
    HardwareSpecError,
    MemoryLevel,
    MissingRoofError,
    Roof,
    UnknownDeviceError,
    as_float,
    device_names,
    get_device,
    load_hardware_file,
    register_device,
)
from costmodel.hardware import Link, shipped_devices
from costmodel.symbols import quantity

# device -> (dense bf16 FLOP/s, DRAM B/s, capacity B, power W, ridge bf16 FLOP/B by hand)
PINNED = {
    "a100-sxm-40gb": (312e12, 1555e9, 40e9, 400, 200.64),  # 312e12 / 1555e9
    "a100-sxm-80gb": (312e12, 2039e9, 80e9, 400, 153.02),  # 312e12 / 2039e9
    "h100-sxm": (989.4e12, 3.35e12, 80e9, 700, 295.34),  # 989.4e12 / 3.35e12
    "h200-sxm": (989.4e12, 4.8e12, 141e9, 700, 206.13),  # 989.4e12 / 4.8e12
    "b200": (2.25e15, 7.7e12, 180e9, 1000, 292.21),  # 2.25e15 / 7.7e12
    "b300": (2.5e15, 8e12, 288e9, 1400, 312.50),  # 2.5e15 / 8e12
    "l40s": (362.05e12, 864e9, 48e9, 350, 419.04),  # 362.05e12 / 864e9 (NVIDIA L40S datasheet)
    "mi300x": (1307.4e12, 5.3e12, 192e9, 750, 246.68),  # 1307.4e12 / 5.3e12
    "tpu-v5e": (197e12, 819e9, 16e9, None, 240.54),  # 197e12 / 819e9
    "tpu-v6e": (918e12, 1638e9, 32e9, None, 560.44),  # 918e12 / 1638e9
    "groq-lpu": (188e12, 80e12, 230e6, None, 2.35),  # fp16 (no bf16 roof): 188e12 / 80e12
    "h100-pcie": (756.5e12, 2000e9, 80e9, 350, 378.25),  # 1,513 sparse / 2 = 756.5; / 2e12
    "a100-pcie-80gb": (312e12, 1935e9, 80e9, 300, 161.24),  # 312e12 / 1935e9
    "h20": (148e12, 4.0e12, 96e9, 400, 37.0),  # 148e12 / 4e12: the lowest ridge of any GPU here
    "gb200": (2.5e15, 8e12, 13.4e12 / 72, 1200, 312.5),  # NVL72: 13.4 TB over 72 GPUs
    "l4": (121e12, 300e9, 24e9, 72, 403.33),  # 121e12 / 300e9
    "rtx-4090": (165.2e12, 1008e9, 24e9, 450, 163.89),  # 165.2e12 / 1008e9 (FP32 accumulate)
    "rtx-5090": (209.5e12, 1792e9, 32e9, 575, 116.91),  # 838 sparse FP16-acc / 2 / 2 = 209.5
    "rtx-pro-6000": (500e12, 1792e9, 96e9, 600, 279.02),  # 4,000 FP4 sparse / 2 / 4 = 500
    "mi325x": (1307.4e12, 6e12, 256e9, 1000, 217.9),  # 1307.4e12 / 6e12
    "mi355x": (256 * 4096 * 2.4e9, 8e12, 288e9, 1400, 314.57),  # 256 CUs x 4096 x 2.4 GHz / 8e12
    "tpu-v5p": (459e12, 2765e9, 95 * 2**30, None, 166.0),  # 459e12 / 2765e9; 95 GiB
    "tpu7x": (2307e12, 7380e9, 192 * 2**30, None, 312.6),  # 2307e12 / 7380e9; 192 GiB
    # late-2026 devices: every figure derived in tests/test_catalog_late2026.py
    "gb300": (2.5e15, 8e12, 279e9, 1400, 312.5),  # 2.5e15 / 8e12
    "vr200": (1.2e18 / 72, 22e12, 288e9, None, 757.58),  # no bf16 rate: fp8, 1.2 EF / 72 / 22e12
    "mi455x": (10e15, 19.6e12, 432e9, None, 510.2),  # no bf16 rate: fp16, 10e15 / 19.6e12
    "trainium2": (667e12, 2.9e12, 96 * 2**30, None, 230.0),  # 667e12 / 2.9e12; 96 GiB
    "trainium3": (671e12, 4.9e12, 144 * 2**30, None, 136.94),  # 671e12 / 4.9e12; 144 GiB
    "gaudi3": (1835e12, 3.67e12, 128e9, 900, 500.0),  # 1835e12 / 3.67e12
}

#: the scale-up domains the catalog states: NVL72 racks, NVLink bridges, 8-GPU boards
DOMAINS = {
    "gb200": 72,
    "b300": 72,
    "h100-pcie": 2,
    "a100-pcie-80gb": 2,
    "h20": 8,
    "mi325x": 8,
    "gb300": 72,
    "vr200": 72,
    "mi455x": 72,
    "trainium2": 64,
    "trainium3": 144,
    "gaudi3": 8,
}


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_scale_up_domains(name):
    assert get_device(name).link("scale_up").domain == DOMAINS[name]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_catalog_numbers(name):
    peak, bw, cap, power, ridge = PINNED[name]
    hw = get_device(name)
    # the first 16-bit rate published; announced parts with none (Rubin, MI455X) pin fp8
    prec = next(p for p in ("bf16", "fp16", "fp8") if hw.peak("tensor", p) is not None)
    assert as_float(hw.require_peak("tensor", prec)) == peak
    assert as_float(hw.bandwidth()) == bw
    assert as_float(hw.capacity()) == cap
    assert (as_float(hw.power_w) if hw.power_w is not None else None) == power
    assert as_float(hw.balance("tensor", prec)) == pytest.approx(ridge, abs=0.01)


# a citation key of the catalog's [sources] table: kebab-case, e.g. "h100-datasheet", "nvlink-latency"
_SOURCE_KEY = re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])")


def test_every_number_has_a_source():
    """Every source resolves: it is a [sources] entry, or literal text whose citation keys are all
    defined (a misspelled key would otherwise be printed as if it were the citation), or literal
    text naming a document; and every [sources] entry is cited by some device."""
    from importlib import resources

    catalog = tomllib.loads(resources.files("costmodel.hardware").joinpath("catalog.toml").read_text())
    keys, texts = catalog["sources"], set(catalog["sources"].values())
    cited: set[str] = set()
    for hw in shipped_devices().values():
        sources = [(f"roof {r.unit}/{r.precision}", r.source) for r in hw.roofs + hw.sparse_roofs]
        sources += [(f"memory {m.name}", m.source) for m in hw.memory]
        sources += [(f"link {lk.name}", lk.source) for lk in hw.links]
        sources += [("power_w", hw.power_source)] if hw.power_w is not None else []
        sources += [("price_usd_per_hour", hw.price_source)] if hw.price_usd_per_hour is not None else []
        sources += [("architecture", hw.architecture_source)] if hw.architecture else []
        sources += (
            [("reported_memory_bytes", hw.reported_memory_source)]
            if hw.reported_memory_bytes is not None
            else []
        )
        for what, src in sources:
            assert src, f"{hw.name} {what}: no source"
            if src in texts:  # the loader resolved a key to its entry
                cited |= {k for k, v in keys.items() if v == src}
                continue
            refs = set(_SOURCE_KEY.findall(src))
            assert refs <= set(keys), (
                f"{hw.name} {what}: undefined source keys {sorted(refs - set(keys))} in {src!r}"
            )
            # literal text citing no key names its document: a publisher or title and what it states
            assert refs or ("," in src or "(" in src), f"{hw.name} {what}: {src!r} names no document"
            cited |= refs
        cited |= set(_SOURCE_KEY.findall(hw.notes or "")) & set(keys)
    assert set(keys) <= cited, f"[sources] entries no device cites: {sorted(set(keys) - cited)}"


def test_dense_is_never_the_sparse_figure():
    # the trap peer tables fall into: H100 bf16 "1979 TFLOPS" is the 2:4 sparse number
    h100 = get_device("h100")
    assert as_float(h100.require_peak("tensor", "bf16")) == 989.4e12
    sparse = {(r.unit, r.precision): r.peak_flops_per_s for r in h100.sparse_roofs}
    # 1978.9 vs 2 x 989.4: the whitepaper rounds each figure to 0.1 TFLOPS
    assert as_float(sparse[("tensor", "bf16")] / h100.require_peak("tensor", "bf16")) == pytest.approx(
        2, rel=1e-3
    )
    for hw in shipped_devices().values():
        for s in hw.sparse_roofs:
            assert s.peak_flops_per_s > hw.require_peak(s.unit, s.precision)
    with pytest.raises(HardwareSpecError, match="sparse"):
        Hardware("x", roofs=(Roof("tensor", "bf16", 1, dense=False),), memory=(MemoryLevel("dram", 1),))


def test_sfu_roofs():
    # A100: 108 SMs x 16 exp/clk x 1.41 GHz = 2.43648e12 /s (CUDA guide throughput table)
    assert get_device("a100").peak("sfu", "fp32") == 108 * 16 * 1410 * 10**6
    # H100 3.9e12 (FlashAttention-3 paper), B300 doubles B200's 5e12 to 10.7e12
    assert as_float(get_device("h100").peak("sfu", "fp32")) == 3.9e12
    assert as_float(get_device("b300").peak("sfu", "fp32")) == pytest.approx(2.14 * 5e12)


def test_aliases_and_unknown_device():
    assert get_device("A100") is get_device("a100-sxm-40gb")
    assert get_device("trillium").name == "tpu-v6e"
    with pytest.raises(UnknownDeviceError, match="known devices: a100-sxm-40gb"):
        get_device("h900")


def test_missing_roof_names_what_exists():
    with pytest.raises(MissingRoofError, match="precisions available: bf16, int8"):
        get_device("tpu-v5e").require_peak("tensor", "fp8")


def test_user_device_from_toml_and_json(tmp_path):
    toml = tmp_path / "mine.toml"
    toml.write_text(
        """
[sources]
probe = "measured on my laptop"
[devices.laptop]
description = "numpy fp32"
roofs = [{ unit = "tensor", precision = "fp32", peak_flops_per_s = 1635.04e9, source = "probe" }]
memory = [{ name = "dram", bandwidth_bytes_per_s = 71.78e9, capacity_bytes = "16*1024**3", source = "probe" }]
"""
    )
    (hw,) = load_hardware_file(toml)
    assert hw.roofs[0].source == "measured on my laptop"
    assert get_device("laptop").capacity() == 16 * 1024**3
    # the article's probe: I* = 1635.04 / 71.78 = 22.8 FLOP/B
    assert round(as_float(hw.balance("tensor", "fp32")), 1) == 22.8
    js = tmp_path / "sym.json"
    js.write_text(
        json.dumps(
            {
                "devices": {
                    "abstract": {
                        "roofs": [{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": "P"}],
                        "memory": [{"name": "dram", "bandwidth_bytes_per_s": "beta"}],
                    }
                }
            }
        )
    )
    (sym,) = load_hardware_file(js)
    # one symbol factory: a file's "P" and "beta" are the symbolic device's P and beta,
    # so the two balances cancel exactly (they did not when a file made integer symbols)
    assert sym.balance() - Hardware.symbolic().balance("tensor", "*") == 0
    assert sym.balance() == sympy.Symbol("P", positive=True) / sympy.Symbol("beta", positive=True)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = [1] }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            r"peak_flops_per_s must be a number or an expression string, got list",
        ),
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = "fast" }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            None,
        ),
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = -5 }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            "must be a positive number",
        ),
        (
            'roofs = [{ unit = "gpu", precision = "bf16", peak_flops_per_s = 5 }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            "roof unit 'gpu' not allowed",
        ),
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = "__import__(1)" }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            "function calls are not allowed",
        ),
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 5, speed = 1 }]\n'
            'memory = [{ name = "dram", bandwidth_bytes_per_s = 1, source = "a sheet" }]',
            "unknown field",
        ),
        (
            'roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 5 }]',
            "at least one memory level",
        ),
    ],
)
def test_bad_hardware_files(tmp_path, body, message):
    f = tmp_path / "bad.toml"
    f.write_text("[devices.bad]\n" + body + "\n")
    if message is None:  # a bare word is a symbol: allowed, the spec stays symbolic
        (hw,) = load_hardware_file(f, register=False)
        assert hw.require_peak("tensor", "bf16").free_symbols
        return
    with pytest.raises(HardwareSpecError, match=message):
        load_hardware_file(f, register=False)


def test_not_toml(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text("devices = [")
    with pytest.raises(HardwareSpecError, match="not valid TOML/JSON"):
        load_hardware_file(f)


def test_scaled_and_symbolic():
    a100 = get_device("a100")
    faster = a100.scaled({"compute": 2})
    assert faster.require_peak("tensor", "bf16") == 2 * a100.require_peak("tensor", "bf16")
    assert faster.bandwidth() == a100.bandwidth()
    with pytest.raises(HardwareSpecError, match="cannot scale 'hbm'"):
        a100.scaled({"hbm": 2})
    sym = Hardware.symbolic()
    assert sym.balance(precision="fp8") - quantity("P") / quantity("beta") == 0


def test_catalog_fixture_isolates_registrations(fresh_catalog):
    """Each test gets a fresh copy of the shipped catalog; use_catalog restores the previous one."""
    from costmodel.hardware import Catalog, use_catalog

    assert set(fresh_catalog.names()) == set(shipped_devices())
    inner = Catalog.shipped()
    with use_catalog(inner):
        register_device(get_device("h100").replace(name="scratch-device"))
        assert "scratch-device" in device_names()
    assert "scratch-device" in inner and "scratch-device" not in fresh_catalog
    assert "scratch-device" not in device_names()


def test_the_example_device_file_loads():
    """examples/mybox.toml, the layout the README documents: 400e12 / 2e12 = 200 FLOP/B bf16."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "mybox.toml"
    (hw,) = load_hardware_file(path)
    assert float(hw.balance("tensor", "bf16")) == 200.0
    assert float(hw.capacity()) == 64 * 1024**3
    assert get_device("box") is hw  # its alias


@pytest.mark.parametrize("precision", ["int3", "inf", "FP8x", ""])
def test_compare_refuses_a_precision_no_device_has(precision):
    """``hw compare --precision int3`` printed a table of dashes (a review found it): a name no
    catalog device has a tensor roof for is refused naming those that exist; one that exists
    but a device lacks (FP4 on an H100, whose datasheet lists none) is that device's dash."""
    from costmodel.compare import compare_devices
    from costmodel.errors import CostModelError

    with pytest.raises(CostModelError, match="is no tensor roof's precision; the devices' are: bf16"):
        compare_devices(["h100", "a100"], precision)
    h100, b200 = compare_devices(["h100", "b200"], "fp4")
    assert h100.peak_flops_per_s is None and b200.peak_flops_per_s == 9e15


def test_compare_takes_any_precision_a_wildcard_roof_serves():
    """A device's ``precision = "*"`` tensor roof serves every precision (costmodel.hardware.spec):
    ``hw compare`` with such a device takes a precision no catalog device has, and '*' is never
    listed as a precision (an independent review found both)."""
    from costmodel.compare import compare_devices
    from costmodel.errors import CostModelError
    from costmodel.hardware import Hardware, MemoryLevel, Roof

    wild = Hardware("wildbox", (Roof("tensor", "*", 4e14),), (MemoryLevel("dram", 2e12, 64e9),))
    box, h100 = compare_devices([wild, "h100"], "fp6")
    assert box.peak_flops_per_s == 4e14 and h100.peak_flops_per_s is None
    with pytest.raises(CostModelError) as exc:
        compare_devices(["h100"], "fp6")
    assert "*" not in str(exc.value)


# -- hostile --hw-file inputs: names, sources, ranges, clashes, printing ---------------------------

_SHEET = '[sources]\ns1 = "my data sheet, rev. 1"\n'
_ROOF = '{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e14, source = "s1" }'
_DRAM = '{ name = "dram", bandwidth_bytes_per_s = 1e12, capacity_bytes = 8e10, source = "s1" }'
_DRAM_UNSOURCED = '{ name = "dram", bandwidth_bytes_per_s = 1e12, capacity_bytes = 8e10 }'


def _box(tmp_path, body, *, sheet=_SHEET, name="box.toml"):
    """A file of one device ``box``: the [sources] ``sheet``, then ``body`` (its fields)."""
    f = tmp_path / name
    f.write_text(f"{sheet}[devices.box]\n{body}\n")
    return f


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (  # a precision no cost asks for: the roof was never used, and the error came later
            f"roofs = [{_ROOF.replace('bf16', 'bf17')}]\nmemory = [{_DRAM}]",
            "device 'box'.roofs[0].precision 'bf17' is not a roof precision the engine knows; known: *, bf16, "
            "bool, complex128, complex64, fp16, fp32, fp4, fp64, fp8, int2, int3, int32, int4, int5, int6, "
            "int64, int7, int8, tf32, uint8",
        ),
        (  # a dtype's name where its roof key is meant says which key
            f"roofs = [{_ROOF.replace('bf16', 'bfloat16')}]\nmemory = [{_DRAM}]",
            "(the dtype bfloat16 computes on the bf16 roof: write 'bf16')",
        ),
        (
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}, {_DRAM.replace('dram', 'hbm9')}]",
            "device 'box'.memory[1].name 'hbm9' is not a memory level the engine knows; known: dram, l2, smem",
        ),
        (
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]\n"
            'links = [{ name = "nvlonk", bandwidth_bytes_per_s = 1e11, source = "s1" }]',
            "device 'box'.links[0].name 'nvlonk' is not a link the engine knows; known: host, scale_out, scale_up",
        ),
    ],
)
def test_a_name_the_engine_never_reads_is_refused_listing_the_known_ones(tmp_path, body, message):
    f = _box(tmp_path, body)
    with pytest.raises(HardwareSpecError) as err:
        load_hardware_file(f, register=False)
    assert str(err.value).startswith(f"hardware file {str(f)!r}: device 'box'.")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("sheet", "body", "message"),
    [
        (  # a misspelled key printed as if it were the citation
            _SHEET,
            f"roofs = [{_ROOF.replace('s1', 's2')}]\nmemory = [{_DRAM}]",
            "device 'box'.roofs[0].source cites source 's2', which [sources] does not define (defined: s1)",
        ),
        (
            "",
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]",
            "device 'box'.memory[0].source cites source 's1', which [sources] does not define "
            "(defined: none (the file has no [sources] table))",
        ),
        (  # a number with no source at all
            _SHEET,
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM_UNSOURCED}]",
            "device 'box'.memory[0].bandwidth_bytes_per_s = 1e+12 has no source",
        ),
        (
            _SHEET,
            f"power_w = 300\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]",
            "device 'box'.power_w = 300 has no source: give power_source = a key of [sources]",
        ),
        (
            _SHEET,
            f'price_usd_per_hour = 2.5\nprice_source = "s3"\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]',
            "device 'box'.price_source cites source 's3', which [sources] does not define (defined: s1)",
        ),
        (
            "[sources]\ns1 = 5\n",
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]",
            "[sources] 's1' must be text naming the document, got int",
        ),
    ],
)
def test_a_dangling_or_missing_source_is_refused(tmp_path, sheet, body, message):
    f = _box(tmp_path, body, sheet=sheet)
    with pytest.raises(HardwareSpecError) as err:
        load_hardware_file(f, register=False)
    assert str(err.value).startswith(f"hardware file {str(f)!r}: ")
    assert message in str(err.value)


def test_a_source_is_a_key_or_text_and_a_symbol_needs_none(tmp_path):
    """A defined key resolves to its text; a sentence or a URL is the source itself; a symbolic
    value (``beta``) claims no number and needs no source."""
    f = _box(
        tmp_path,
        f"roofs = [{_ROOF}]\n"
        'memory = [{ name = "dram", bandwidth_bytes_per_s = "beta", capacity_bytes = 8e10, '
        'source = "https://example.org/box-sheet.pdf" }, '
        '{ name = "l2", capacity_bytes = "50*1024*1024", source = "the vendor whitepaper, table 2" }]',
    )
    (hw,) = load_hardware_file(f, register=False)
    assert hw.roofs[0].source == "my data sheet, rev. 1"
    assert [m.source for m in hw.memory] == [
        "https://example.org/box-sheet.pdf",
        "the vendor whitepaper, table 2",
    ]
    g = _box(
        tmp_path,
        'roofs = [{ unit = "tensor", precision = "*", peak_flops_per_s = "P" }]\n'
        'memory = [{ name = "dram", bandwidth_bytes_per_s = "beta" }]',
        name="sym.toml",
    )
    (sym,) = load_hardware_file(g, register=False)
    assert sym.balance(precision="bf16") == quantity("P") / quantity("beta")


def test_the_shipped_catalog_passes_the_user_file_rules():
    """catalog.toml read as a user's --hw-file: every precision, level, link and source passes
    (29 devices), so no rule above refuses a layout the catalog itself uses."""
    from importlib import resources

    path = resources.files("costmodel.hardware").joinpath("catalog.toml")
    loaded = load_hardware_file(str(path), register=False)
    assert [hw.name for hw in loaded] == list(shipped_devices())
    assert len(loaded) == 29


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (  # the reproducer: a subnormal bandwidth overflowed later as "input too large", no field
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM.replace('1e12', '5e-324')}]",
            "device 'box'.memory[0]: memory dram bandwidth_bytes_per_s must be in [1, 1e+21] B/s, "
            "got 5e-324 (a subnormal: no physical value)",
        ),
        (
            f"roofs = [{_ROOF.replace('1e14', '1e30')}]\nmemory = [{_DRAM}]",
            "device 'box'.roofs[0]: roof tensor/bf16 peak_flops_per_s must be in [1, 1e+21] FLOP/s, got 1e+30",
        ),
        (
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM.replace('8e10', '1e19')}]",
            "memory dram capacity_bytes must be in [1, 1e+18] B, got 1e+19",
        ),
        (
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]\n"
            'links = [{ name = "scale_up", bandwidth_bytes_per_s = 1e11, latency_s = 5e-324, source = "s1" }]',
            "link scale_up latency_s must be 0 or in [1e-12, 10] s, got 5e-324 (a subnormal: no physical value)",
        ),
        (
            f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]\n"
            'links = [{ name = "scale_up", bandwidth_bytes_per_s = 1e11, domain = 100000000, source = "s1" }]',
            "link scale_up domain must be an integer in [2, 10000000], got 100000000",
        ),
        (
            f'power_w = 1e9\npower_source = "s1"\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]',
            "box power_w must be in [0.001, 1e+07] W, got 1000000000.0",
        ),
        (
            f"overlap = 5e-324\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]",
            "box overlap must be in [0, 1], got 5e-324 (a subnormal: no physical value)",
        ),
        (
            f'launch_overhead_s = "10**400"\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]',
            "a number beyond +-1e300 is out of range (allowed: 0 or in [1e-12, 10] s)",
        ),
    ],
)
def test_a_value_outside_its_physical_range_is_refused_naming_field_and_range(tmp_path, body, message):
    f = _box(tmp_path, body)
    with pytest.raises(HardwareSpecError) as err:
        load_hardware_file(f, register=False)
    assert str(err.value).startswith(f"hardware file {str(f)!r}: ")
    assert message in str(err.value)


@given(bw=st.floats(min_value=0, max_value=1e300, exclude_min=True, allow_subnormal=True))
@settings(max_examples=80)
def test_a_bandwidth_loads_iff_in_range_and_then_every_time_is_finite(bw):
    """Invariant: a DRAM bandwidth loads exactly when it lies in [1, 1e21] B/s (RANGES), and then
    a GEMM's bound is a finite positive time; outside it the error names the field and range."""
    from costmodel import bound, op_cost
    from costmodel.hardware import hardware_from_dict

    entry = {
        "roofs": [{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": 1e14, "source": "a sheet"}],
        "memory": [{"name": "dram", "bandwidth_bytes_per_s": bw, "source": "a sheet"}],
    }
    if 1 <= bw <= 1e21:
        hw = hardware_from_dict("box", entry)
        t = as_float(bound(op_cost("gemm", M=4096, N=4096, K=4096), hw).lower)
        assert 0 < t < float("inf")  # at most 2*4096**3 / 1e14 s or 3 * 2 * 4096**2 / 1 s
    else:
        with pytest.raises(
            HardwareSpecError, match=re.escape("bandwidth_bytes_per_s must be in [1, 1e+21] B/s")
        ):
            hardware_from_dict("box", entry)


def test_two_files_defining_one_device_name_both(tmp_path, capsys):
    """The reproducer: a device in two --hw-file said "already the catalog device" of the first
    file's. Now the clash names both files; a catalog device is still called one, a device given
    twice in one file (names are case-insensitive) is refused, and --hw-override says whose
    device it replaces."""
    from graphs.cli import main

    body = f"roofs = [{_ROOF}]\nmemory = [{_DRAM}]"
    a = _box(tmp_path, body.replace("box", "twin"), name="a.toml")
    a.write_text(a.read_text().replace("[devices.box]", "[devices.twin]"))
    b = tmp_path / "b.toml"
    b.write_text(a.read_text().replace("1e14", "2e14"))
    load_hardware_file(a)
    with pytest.raises(HardwareSpecError) as err:
        load_hardware_file(b)
    assert str(err.value).startswith(
        f"hardware file {str(b)!r}: device 'twin' is already device 'twin' of hardware file {str(a)!r}; "
        "give it another name"
    )
    load_hardware_file(a)  # the same device again is no clash
    h100 = tmp_path / "h100.toml"
    h100.write_text(a.read_text().replace("[devices.twin]", '[devices.mine]\naliases = ["h100"]'))
    with pytest.raises(HardwareSpecError, match="alias 'h100' is already the catalog device 'h100-sxm'"):
        load_hardware_file(h100)
    register_device(get_device("h100").replace(name="py-dev"))
    py = tmp_path / "py.toml"
    py.write_text(a.read_text().replace("[devices.twin]", "[devices.py-dev]"))
    with pytest.raises(
        HardwareSpecError, match="device 'py-dev' is already device 'py-dev' registered in Python"
    ):
        load_hardware_file(py)
    twice = tmp_path / "twice.toml"
    twice.write_text(
        a.read_text() + a.read_text().split("\n", 2)[2].replace("[devices.twin]", "[devices.TWIN]")
    )
    with pytest.raises(
        HardwareSpecError, match=r"device 'TWIN' names the same device as device 'twin' \(names are"
    ):
        load_hardware_file(twice, register=False)
    # on the command line: one line naming both files; replacing on purpose says whose it was
    assert main(["--hw-file", str(a), "--hw-file", str(b), "hw", "show", "twin"]) == 2
    err_line = capsys.readouterr().err
    assert err_line.count("\n") == 1 and f"is already device 'twin' of hardware file {str(a)!r}" in err_line
    assert main(["--hw-file", str(a), "--hw-file", str(b), "--hw-override", "hw", "show", "twin"]) == 0
    out, err_text = capsys.readouterr()
    assert f"{b} replaces device 'twin' of hardware file {str(a)!r}" in err_text and "200.00 TFLOP/s" in out


def test_huge_values_print_in_a_bounded_form():
    """The shared number formatting: below 1e9 in its unit a value prints as before; from there
    in scientific notation with four significant digits, never a number of hundreds of digits."""
    from costmodel.text import fmt_num, fmt_si, fmt_time

    assert fmt_time(3600) == "3600.000 s"  # an hour, as before
    assert fmt_time(1.5009857536e10) == "1.501e+10 s"  # was 15009857536.000 s
    assert fmt_time(1e200) == "1.000e+200 s"  # was 201 digits
    assert fmt_si(3.35e12, "B/s") == "3.35 TB/s" and fmt_si(1e200, "B/s") == "1.000e+200 B/s"
    assert fmt_num(6.157e16, "10.3f") == " 6.157e+16" and fmt_num(1234.5, ".1f") == "1234.5"
    # an ordinary large value keeps fixed point: a 4.55 s op in us, a sweep's 75 M tokens/s
    assert fmt_num(4551849.229) == "4551849.229" and fmt_num(75274693.6, ".1f") == "75274693.6"


@given(x=st.floats(min_value=-1e300, max_value=1e300))
def test_every_time_and_rate_prints_in_at_most_a_dozen_characters(x):
    """Invariant: whatever the value, fmt_time prints at most 13 characters before the unit and
    fmt_si 12, and the text reads back to the value within its four significant digits."""
    from costmodel.text import fmt_num, fmt_si, fmt_time

    assert len(fmt_time(abs(x))) <= 13 + len(" s") and len(fmt_si(x)) <= 12
    text = fmt_num(x)
    assert len(text) <= 14 if abs(x) < 1e9 else len(text) <= 11
    assert float(text) == pytest.approx(x, rel=5e-4, abs=5e-4)


def test_a_one_byte_per_second_device_prints_bounded_times(tmp_path, capsys):
    """The reproducer: a 1 B/s device printed its times in full (15009857536.000 s, 6.157e16 ms
    written out). Llama-3.1-8B's 8,030,261,248 bf16 weights are 16,060,522,496 B: 1.606e10 s at
    1 B/s."""
    from graphs.cli import main

    f = _box(tmp_path, f"roofs = [{_ROOF}]\nmemory = [{_DRAM.replace('1e12', '1')}]")
    assert main(["--hw-file", str(f), "decode", "llama-3.1-8b", "--device", "box", "--ignore-capacity"]) == 0
    out = capsys.readouterr().out
    assert "reading every weight once takes 1.606e+10 s" in out
    assert not re.search(r"\d{10}", out), out  # no number of ten digits or more
    assert main(["--hw-file", str(f), "hw", "show", "box"]) == 0
    assert "dram   bw     1.00 B/s" in capsys.readouterr().out


def test_what_if_copies_of_a_device_may_leave_the_ranges_a_file_is_held_to(tmp_path, capsys):
    """A device of 6e20 FLOP/s (inside [1, 1e21]) loads; `report` prices its 2x headroom, a copy
    of 1.2e21 the engine builds itself (Hardware.scaled), which the ranges refused (review)."""
    from costmodel.hardware import load_hardware_file
    from graphs.cli import main

    f = _box(tmp_path, f"roofs = [{_ROOF.replace('1e14', '6e20')}]\nmemory = [{_DRAM}]")
    (hw,) = load_hardware_file(str(f), register=False)
    assert float(hw.scaled({"compute": 2}).roofs[0].peak_flops_per_s) == 1.2e21
    assert main(["--hw-file", str(f), "report", "--device", "box"]) == 0
    # its 4096 x 4096 GEMM never turns compute-bound (ridge 6e8 FLOP/B): said, not an error
    assert "never compute-bound: the intensity's ceiling (M -> oo) 2048.00 FLOP/B" in capsys.readouterr().out
    with pytest.raises(HardwareSpecError, match=r"must be in \[1, 1e\+21\]"):  # a file is still held to them
        load_hardware_file(
            str(
                _box(
                    tmp_path, f"roofs = [{_ROOF.replace('1e14', '2e21')}]\nmemory = [{_DRAM}]", name="b.toml"
                )
            ),
            register=False,
        )


def test_a_file_that_takes_over_an_alias_says_only_the_name_moves(tmp_path, capsys):
    """A file's device named 'h100' (the catalog's alias of h100-sxm) under --hw-override: the note
    said it replaced h100-sxm, which stays listed under its own name (review)."""
    from graphs.cli import main

    f = tmp_path / "h100.toml"
    f.write_text(f"{_SHEET}[devices.h100]\nroofs = [{_ROOF}]\nmemory = [{_DRAM}]\n")
    assert main(["--hw-file", str(f), "--hw-override", "hw", "list"]) == 0
    out, err = capsys.readouterr()
    assert f"{f} takes the name 'h100' over from catalog device 'h100-sxm', whose alias it was" in err
    assert "replaces" not in err and "\nh100-sxm " in out


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Roof("tensor", "bf17", 1e15), "roof tensor/'bf17': precision is not one the engine knows"),
        (
            lambda: MemoryLevel("hbm", 3e12, 80e9),
            "memory level 'hbm' is not one the engine reads; known: dram, l2, smem",
        ),
        (
            lambda: Link("nvlink", 450e9),
            "link 'nvlink' is not one the engine reads; known: scale_up, scale_out, host",
        ),
        (
            lambda: Roof("tensor", ["bf16"], 1e15),
            "roof tensor/\"['bf16']\": precision is not one the engine knows",
        ),
    ],
)
def test_a_device_built_in_python_names_only_what_the_engine_reads(build, fragment):
    """A hardware file's unknown precision, level or link was refused on read, a device built in
    Python was not: a roof at 'bf17' or a level 'hbm' was kept and never read (every bf16 cost
    then had no roof, every DRAM byte no bandwidth). The constructors refuse them alike."""
    with pytest.raises(HardwareSpecError, match=re.escape(fragment)):
        build()


def test_memory_kind_is_the_catalogs_description():
    # the catalog's descriptions: the L40S "GDDR6", the H100 SXM "HBM3"
    assert get_device("l40s").memory_kind == "GDDR" and get_device("h100-sxm").memory_kind == "HBM"


def test_every_catalog_device_names_its_memory_kind():
    """The MoE bridge groups stand-in devices by generation and memory kind; a description that
    names no memory type read as "other" (the GB300's did until its 279 GB HBM3E, gb300-verda,
    was written in)."""
    unnamed = {
        n: get_device(n).description for n in shipped_devices() if get_device(n).memory_kind == "other"
    }
    assert unnamed == {}
    assert get_device("gb300").memory_kind == "HBM"


@pytest.mark.parametrize("typed", [" h100", "h100 ", "\tH100\n"])
def test_a_device_name_with_stray_spaces_is_the_name(typed):
    # " h100" was refused as naming a series (h100-sxm, h100-pcie) though "h100" is an alias of
    # the SXM part (review finding 13)
    assert get_device(typed).name == "h100-sxm"


def test_a_device_that_is_not_a_name_is_refused_naming_its_type():
    with pytest.raises(UnknownDeviceError, match=r"^device must be a name or a Hardware, got float 1\.5$"):
        get_device(1.5)


@pytest.mark.parametrize("spelling", ["FP8", "Fp8", "fp8_e4m3", "FP8_E4M3", "float8_e4m3fn"])
def test_compare_spells_a_precision_as_dtype_does(spelling, capsys):
    """``hw compare --precision FP8`` was refused while ``op ... dtype=FP8`` and ``report --dtype
    FP8`` are taken: every spelling of a dtype names the roof it computes on (fp8_e4m3: fp8), so
    the row is the ``fp8`` row, number for number, and the header names the roof."""
    from costmodel.compare import compare_devices
    from graphs.cli import main

    assert compare_devices(["h100", "b200"], spelling) == compare_devices(["h100", "b200"], "fp8")
    assert main(["hw", "compare", "h100", "--precision", spelling]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[1:3] == ["fp8", "dense"]
    assert main(["hw", "compare", "h100", "--precision", "FP4"]) == 0  # a roof's own name, any case
    assert "fp4 dense peak" in capsys.readouterr().out


def test_plot_spells_a_precision_as_dtype_does():
    """``plot roofline --precision FP8`` drew nothing: 'h100-sxm has no tensor roof of that
    precision' (its roofs are fp8, bf16 ...); the request now names the fp8 roof, as ``--dtype``
    would, and a roof the device lacks is still refused in the spelling given."""
    from graphs.serving.analysis.plot_request import PlotRequest

    assert PlotRequest("roofline", precision="FP8").precision_name == "fp8"
    assert PlotRequest("roofline", precision="bfloat16").precision_name == "bf16"
    assert PlotRequest("roofline").precision_name == "bf16"


@pytest.mark.parametrize(
    "argv",
    [["--hw-override", "hw", "show", "h100"], ["hw", "show", "h100", "--hw-override"], ["--hw-override"]],
)
def test_hw_override_without_a_hw_file_is_refused(argv, capsys):
    """``--hw-override`` lets ``--hw-file`` devices replace catalog ones; given alone it did
    nothing and was accepted without a word (``hw show h100 --hw-override`` printed the catalog's
    H100, rc 0). It is now refused in one line naming both options."""
    from graphs.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "costmodel: error: --hw-override lets --hw-file devices replace catalog ones, and no --hw-file "
        "was given: add --hw-file PATH or drop --hw-override"
    )
