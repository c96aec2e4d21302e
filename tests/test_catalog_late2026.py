"""The accelerators of late 2026 (issue 47, item 1): GB300 in its NVL72 rack, NVIDIA's Rubin (VR200) and
AMD's MI455X (both preliminary), AWS Trainium2 and Trainium3, Intel Gaudi 3.

Every number is pinned to its source's figure, with the arithmetic that turns a rack, UltraServer or
port figure into a per-device one written next to it; the traps are pinned apart (Blackwell Ultra's
INT8 is its own figure, never scaled from FP8; a vendor figure above the dense rate stays out of the
roofs); the preliminary line is printed once wherever the device is used; and each device answers a
Llama-3.1-70B decode step whose bound is the weight and KV read over HBM bandwidth (batch 1 is
memory-bound) plus at most a quarter for the collectives and the rest.
"""

import json
import re
import tomllib
from importlib import resources

import pytest

from costmodel import HardwareSpecError, as_float, get_device, load_hardware_file
from costmodel.hardware import shipped_devices
from costmodel.hardware.fallback import fallback_peak, roof_notes
from graphs.cli import main

GB, GIB = 1e9, 2**30

#: (device, what) -> the source's figure, derived by hand
FIGURES = {
    # GB300: Verda's per-GPU table, GB300 column, figures without sparsity (gb300-verda)
    ("gb300", "tensor/fp4"): 15e15,
    ("gb300", "tensor/fp8"): 5e15,
    ("gb300", "tensor/int8"): 0.165e15,  # its own figure: FP8 / INT8 = 5 / 0.165 = 30.3
    ("gb300", "tensor/bf16"): 2.5e15,
    ("gb300", "tensor/fp16"): 2.5e15,
    ("gb300", "tensor/tf32"): 1.25e15,
    ("gb300", "vector/fp32"): 0.080e15,
    ("gb300", "sfu/fp32"): 10.7e12,  # SFU EX2 10.7 TeraExponentials/s
    ("gb300", "dram/bw"): 8e12,
    ("gb300", "dram/cap"): 279 * GB,  # the rack's 20 TB / 72 = 278 GB, the table's 279 GB
    ("gb300", "scale_up"): 1.8e12 / 2,  # 1.8 TB/s total = 900 GB/s per direction; 130 TB/s / 72 = 1.8
    ("gb300", "scale_out"): 800e9 / 8,  # one ConnectX-8 per GPU, 800 Gb/s = 100 GB/s per direction
    ("gb300", "power"): 1400,
    # Rubin: CES 2026 per GPU, GTC 2025 per NVL144 rack (72 packages)
    ("vr200", "tensor/fp4"): 35e15,  # NVFP4 training, 3.5 x Blackwell's 10 PFLOPS dense; 2.5 EF / 72 = 34.7
    ("vr200", "tensor/fp8"): 1.2e18 / 72,  # 1.2 EFLOPS FP8 training over 72 packages = 16.7 PFLOPS
    ("vr200", "sparse/fp4"): 50e15,  # NVFP4 inference: 3.6 EF / 72 = 50, above the dense rate
    ("vr200", "dram/bw"): 22e12,
    ("vr200", "dram/cap"): 288 * GB,  # 20.7 TB / 72 = 287.5
    ("vr200", "scale_up"): 3.6e12 / 2,  # NVLink 6 3.6 TB/s both ways (260 TB/s / 72 = 3.61)
    ("vr200", "host"): 1.8e12 / 2,  # Vera's NVLink-C2C 1.8 TB/s both ways
    # MI455X: AMD's per-GPU figures and the Helios rack's over 72
    ("mi455x", "tensor/fp4"): 40e15,  # 2.9 EFLOPS / 72 = 40.3
    ("mi455x", "tensor/fp8"): 20e15,  # 1.4 EFLOPS / 72 = 19.4
    ("mi455x", "tensor/fp16"): 10e15,
    ("mi455x", "dram/bw"): 19.6e12,  # 1.4 PB/s / 72 = 19.4
    ("mi455x", "dram/cap"): 432 * GB,  # 31 TB / 72 = 431
    ("mi455x", "scale_up"): 3.6e12 / 2,  # 260 TB/s / 72 = 3.6 TB/s both ways
    ("mi455x", "scale_out"): 300e9,  # 43 TB/s / 72 = 597 GB/s both ways = 300 per direction
    # Trainium2: AWS Neuron 'Trainium2 Architecture'
    ("trainium2", "tensor/fp8"): 1299e12,
    ("trainium2", "tensor/bf16"): 667e12,
    ("trainium2", "tensor/fp16"): 667e12,
    ("trainium2", "tensor/tf32"): 667e12,
    ("trainium2", "tensor/fp32"): 181e12,
    ("trainium2", "sparse/fp8"): 2563e12,
    ("trainium2", "sparse/bf16"): 2563e12,
    ("trainium2", "dram/bw"): 2.9e12,
    ("trainium2", "dram/cap"): 96 * GIB,
    ("trainium2", "scale_up"): 1280e9,  # 1.28 TB/s per chip, taken per direction (not stated)
    # Trainium3: AWS Neuron 'Trainium3 Architecture' and the Trn3 Gen2 UltraServer table over 144
    ("trainium3", "tensor/fp8"): 362_448e12 / 144,  # 362,448 MXFP8 TFLOPS / 144 = 2,517
    ("trainium3", "tensor/fp4"): 2517e12,  # MXFP4 at the MXFP8 rate
    ("trainium3", "tensor/bf16"): 96_624e12 / 144,  # 96,624 / 144 = 671
    ("trainium3", "tensor/fp16"): 671e12,
    ("trainium3", "tensor/tf32"): 671e12,
    ("trainium3", "tensor/fp32"): 26_352e12 / 144,  # 26,352 / 144 = 183
    ("trainium3", "sparse/bf16"): 2517e12,
    ("trainium3", "dram/bw"): 705.6e12 / 144,  # 705.6 TB/s / 144 = 4.9
    ("trainium3", "dram/cap"): 20_736 * GIB / 144,  # 20,736 GiB / 144 = 144 GiB
    ("trainium3", "scale_up"): 2.56e12,  # per device, taken per direction (not stated)
    ("trainium3", "scale_out"): 28_800e9 / 8 / 144,  # 28,800 Gbps EFA / 144 = 200 Gbps = 25 GB/s
    # Gaudi 3: Intel's Hot Chips 2024 table and the Gaudi network guide
    ("gaudi3", "tensor/bf16"): 1835e12,
    ("gaudi3", "tensor/fp8"): 1835e12,
    ("gaudi3", "dram/bw"): 3.67e12,
    ("gaudi3", "dram/cap"): 128 * GB,
    ("gaudi3", "l2/bw"): 12.8e12,
    ("gaudi3", "l2/cap"): 96 * 2**20,
    ("gaudi3", "scale_up"): 21 * 200e9 / 8,  # 21 ports x 200 Gb/s = 525 GB/s per direction
    ("gaudi3", "scale_out"): 3 * 200e9 / 8,  # 3 ports x 200 Gb/s = 75 GB/s per direction
    ("gaudi3", "host"): 128e9 / 2,  # PCIe Gen5 x16, 128 GB/s both ways
    ("gaudi3", "power"): 900,
}

NEW = ["gb300", "vr200", "mi455x", "trainium2", "trainium3", "gaudi3"]
PRELIMINARY = {"vr200", "mi455x"}
#: a tensor-parallel degree whose bf16 weights (141 GB) and 4K-token KV cache fit
TP = {"gb300": 2, "vr200": 2, "mi455x": 1, "trainium2": 2, "trainium3": 2, "gaudi3": 2}


def _value(name: str, what: str) -> float | None:
    hw = get_device(name)
    kind, _, key = what.partition("/")
    if kind in ("tensor", "vector", "sfu"):
        return as_float(hw.require_peak(kind, key))
    if kind == "sparse":
        return next(as_float(r.peak_flops_per_s) for r in hw.sparse_roofs if r.precision == key)
    if kind == "power":
        return as_float(hw.power_w)
    if key in ("bw", "cap"):
        level = hw.level(kind)
        return as_float(level.bandwidth_bytes_per_s if key == "bw" else level.capacity_bytes)
    return as_float(hw.link(kind).bandwidth_bytes_per_s)


@pytest.mark.parametrize(("name", "what"), sorted(FIGURES))
def test_each_number_is_its_sources_figure(name, what):
    assert _value(name, what) == pytest.approx(FIGURES[(name, what)], rel=1e-3)


def test_every_roof_of_the_new_devices_is_pinned():
    """No roof, memory level or link of a new device escapes the table above."""
    for name in NEW:
        hw = get_device(name)
        have = {f"{r.unit}/{r.precision}" for r in hw.roofs} | {
            f"sparse/{r.precision}" for r in hw.sparse_roofs
        }
        have |= {
            f"{m.name}/{k}"
            for m in hw.memory
            for k, v in (("bw", m.bandwidth_bytes_per_s), ("cap", m.capacity_bytes))
            if v is not None
        }
        have |= {lk.name for lk in hw.links} | ({"power"} if hw.power_w is not None else set())
        assert have == {what for n, what in FIGURES if n == name}, name


def test_blackwell_ultra_int8_is_its_own_figure_never_scaled_from_fp8():
    """B300/GB300 cut dense INT8 to about 0.15 POPS while FP8 grew: GB300's INT8 roof is the table's
    0.165 POPS (a thirtieth of FP8, where Hopper's INT8 equals its FP8), and b300, whose source gives no
    INT8 figure, has no INT8 roof at all rather than one scaled from FP8."""
    gb300, h100 = get_device("gb300"), get_device("h100")
    assert as_float(
        gb300.require_peak("tensor", "int8") / gb300.require_peak("tensor", "fp8")
    ) == pytest.approx(0.165 / 5)
    assert h100.require_peak("tensor", "int8") == h100.require_peak("tensor", "fp8")
    assert get_device("b300").peak("tensor", "int8") is None


def test_vendor_figures_above_the_dense_rate_stay_out_of_the_roofs():
    """Rubin's 50 PFLOPS NVFP4 inference figure sits in sparse_roofs; its dense FP4 roof is the 35 PFLOPS
    training rate (2.5 EFLOPS / 72 GPUs), so 50 PFLOPS appears in no dense roof."""
    vr200 = get_device("vr200")
    assert [as_float(r.peak_flops_per_s) for r in vr200.sparse_roofs] == [50e15]
    assert 50e15 not in {as_float(r.peak_flops_per_s) for r in vr200.roofs}
    assert 2.5e18 / 72 == pytest.approx(as_float(vr200.require_peak("tensor", "fp4")), rel=0.01)


@pytest.mark.parametrize(
    ("name", "domain"), [("gb300", 72), ("vr200", 72), ("mi455x", 72), ("trainium3", 144)]
)
def test_scale_up_domains_and_what_lies_past_them(name, domain):
    """The NVL72 / Helios racks and the Trn3 UltraServer are one scale-up domain each; a tp group past
    it runs on the scale-out link, or is refused where none is sourced (Rubin's)."""
    hw = get_device(name)
    assert hw.link("scale_up").domain == domain
    assert hw.group_link(domain) == "scale_up"
    if name == "vr200":
        with pytest.raises(HardwareSpecError, match="spans more than one scale-up domain"):
            hw.group_link(2 * domain)
    else:
        assert hw.group_link(2 * domain) == "scale_out"


def test_gb300_is_its_own_device_and_b300_keeps_its_numbers():
    """``gb300`` now names the GB300 NVL72 GPU (279 GB, a scale-out NIC per GPU), no longer an alias
    of ``b300``, whose numbers stay as they were (288 GB, NVIDIA's Blackwell Ultra blog)."""
    assert get_device("gb300").name == "gb300"
    assert get_device("gb300-nvl72").name == "gb300"
    assert as_float(get_device("b300").capacity()) == 288e9
    assert as_float(get_device("b300").require_peak("tensor", "fp4")) == 15e15


@pytest.mark.parametrize(("name", "stand_in"), [("vr200", "fp8"), ("mi455x", "fp16")])
def test_bf16_without_a_published_rate_is_bounded_by_a_faster_format(name, stand_in):
    """Neither NVIDIA (Rubin) nor AMD (MI455X) publishes a BF16 rate: a bf16 matmul is bounded by the
    first of the FP16, FP8, FP4 roofs the part publishes, none of which a bf16 matmul outruns on any
    catalog part that publishes both, and a note says so once."""
    hw = get_device(name)
    assert hw.peak("tensor", "bf16") is None
    assert fallback_peak(hw, "tensor", "bf16") == hw.require_peak("tensor", stand_in)
    notes = [n for n in roof_notes(hw) if "publishes no tensor bf16 rate" in n]
    assert len(notes) == 1 and f"bounded by the {stand_in} roof" in notes[0]
    for other in shipped_devices().values():  # the premise, on every part that publishes both
        bf16 = other.peak("tensor", "bf16")
        for faster in ("fp16", "fp8"):
            if bf16 is not None and other.peak("tensor", faster) is not None:
                assert bf16 <= other.peak("tensor", faster), (other.name, faster)


def test_preliminary_names_its_sources_and_dates():
    """Each preliminary device says where its figures come from (a [sources] key) and when (a date)."""
    keys = set(
        tomllib.loads(resources.files("costmodel.hardware").joinpath("catalog.toml").read_text())["sources"]
    )
    for name in NEW:
        text = get_device(name).preliminary
        assert bool(text) == (name in PRELIMINARY), name
        if text:
            assert re.search(r"\b20\d\d-\d\d-\d\d\b", text), text
            assert set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)+", text)) & keys, text


def _once(out: str, name: str) -> int:
    return out.count(f"{name} figures are preliminary") + out.count("preliminary figures:")


@pytest.mark.parametrize("name", NEW)
def test_preliminary_line_printed_once_in_every_report(capsys, name):
    """hw show, decode and prefill print the preliminary line exactly once for a preliminary device, and
    never for the others; the JSON carries it too."""
    want = 1 if name in PRELIMINARY else 0
    for argv in (
        ["hw", "show", name],
        ["decode", "llama-3.1-8b", "--device", name],
        ["prefill", "llama-3.1-8b", "--device", name, "--seq", "1024"],
    ):
        assert main(argv) == 0
        assert _once(capsys.readouterr().out, name) == want, argv
    assert main(["hw", "show", name, "--json"]) == 0
    assert bool(json.loads(capsys.readouterr().out)["preliminary"]) == bool(want)


@pytest.mark.parametrize("name", NEW)
def test_decode_llama_70b_bound_by_hand(capsys, name):
    """Llama-3.1-70B decoding one sequence at 4K context in bf16: each of ``tp`` devices reads its share
    of 2 * (70,553,706,496 - 128,256 * 8,192 + 8,192) = 139,006,083,072 weight bytes (the embedding table
    is gathered, the lm_head read whole) and of 80 layers * 2 * 8 KV heads * 128 * 2 B * 4,096 tokens =
    1,342,177,280 KV bytes over its HBM bandwidth; batch 1 is memory-bound, so the step is at least that
    and at most a quarter more (the all-reduces on the scale-up link, norms, activations)."""
    tp = TP[name]
    assert main(["decode", "llama-3.1-70b", "--device", name, "--tp", str(tp), "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["step_s"]
    hand = (139_006_083_072 + 80 * 2 * 8 * 128 * 2 * 4096) / tp / as_float(get_device(name).bandwidth())
    assert hand <= step <= 1.25 * hand


def test_a_hardware_file_may_mark_its_figures_preliminary(tmp_path, fresh_catalog):
    """The field loads from a user's file like the catalog's, and anything but text is refused in one line."""
    body = """
[devices.next-chip]
preliminary = "vendor keynote (2027-03-01)"
roofs = [{ unit = "tensor", precision = "bf16", peak_flops_per_s = 1e15, source = "vendor keynote" }]
memory = [{ name = "dram", bandwidth_bytes_per_s = 1e13, capacity_bytes = 1e11, source = "vendor keynote" }]
"""
    path = tmp_path / "hw.toml"
    path.write_text(body)
    (hw,) = load_hardware_file(path)
    assert roof_notes(hw)[0] == "next-chip figures are preliminary: vendor keynote (2027-03-01)"
    path.write_text(body.replace('"vendor keynote (2027-03-01)"', "2027"))
    with pytest.raises(HardwareSpecError, match="preliminary must be text"):
        load_hardware_file(path)


def test_a_series_name_answers_with_its_one_part_and_says_so(capsys):
    """Issue 47's `--device mi400`: MI400 is a series (MI430X, MI450X, MI455X); the catalog holds
    only the MI455X, described as "MI400 series". The series name prices that part and every
    report says so, once; a series of several catalog parts is refused listing them."""
    from costmodel.errors import UnknownDeviceError
    from costmodel.hardware import get_device, register_device
    from costmodel.hardware.catalog import active_catalog, use_catalog
    from graphs.cli import main

    assert main(["decode", "llama-3.1-70b", "--device", "mi400", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    assert out.count("'mi400' names a series: its one catalog part, mi455x, is priced") == 1
    assert main(["decode", "llama-3.1-70b", "--device", "mi455x", "--tp", "8", "--json"]) == 0
    assert get_device("mi400") == get_device("mi455x")  # the same part: its cached steps serve it
    two = active_catalog().copy()
    with use_catalog(two):
        import dataclasses

        twin = dataclasses.replace(
            get_device("mi455x"), name="mi450x", description="AMD Instinct MI450X (MI400 series)"
        )
        register_device(twin)
        with pytest.raises(UnknownDeviceError, match=r"names a series, not a part.*mi455x, mi450x"):
            get_device("mi400")


def test_a_plain_word_of_a_description_is_no_device(capsys):
    """`hw show box` printed Gaudi 3 ("... in an 8-accelerator HLS-3 box"): any word of a
    description resolved as a one-part series. Only a word with a digit, as a part number's series
    has (mi400), resolves now; another is refused naming whose description holds it. A link whose
    latency the catalog does not state prints so, not "latency None s"."""
    from costmodel.errors import UnknownDeviceError
    from costmodel.hardware import get_device
    from graphs.cli import main

    with pytest.raises(
        UnknownDeviceError, match=r"unknown device 'box': only a word of gaudi3's description"
    ):
        get_device("box")
    with pytest.raises(UnknownDeviceError, match=r"only a word of the descriptions of .*gaudi3"):
        get_device("cooled")
    assert get_device("mi400").name == "mi455x"  # a series with its digits still resolves
    assert main(["hw", "show", "h100"]) == 0
    out = capsys.readouterr().out
    assert "latency None" not in out and "link host: 64.00 GB/s per direction, latency not stated" in out
