"""Scale-up domains (the catalog's ``domain`` of the ``scale_up`` link) and groups wider than
one: their collectives are priced on the ``scale_out`` link (Hardware.group_link), or refused
where the device has none; hand-derived for Llama-3.1-70B decode at tp16 on H100s.

An HGX/DGX H100 board joins 8 GPUs over NVSwitch (NVIDIA DGX BasePOD reference architecture),
each GPU with its own 400 Gb/s ConnectX-7 NIC: 50 GB/s per direction, 1 us (the catalog's).
One decode token of Llama-3.1-70B (d = 8,192, bf16) all-reduces n b = 8,192 x 2 = 16,384 bytes
after each row-parallel matmul. A ring over p = 16 devices runs at its slowest hop, the network:
  sends 2 (p-1)/p n b = 2 x 15/16 x 16,384 = 30,720 bytes -> 30,720 / 50e9 = 0.6144 us
  in 2 (p-1) = 30 steps of 1 us                                          = 30 us
  one all-reduce                                                          = 30.6144 us
and the logits all-gather of V = 128,256 bf16 values: 15/16 x 128,256 x 2 = 240,480 bytes
  / 50e9 = 4.8096 us + (p-1) = 15 steps x 1 us                           = 19.8096 us.
With 2 all-reduces in each of the 80 layers and one after the vocab-parallel embedding:
  161 x 30.6144 + 19.8096 = 4,948.728 us of scale-out link time per step.
Within one domain (tp8, NVLink 450 GB/s, 1 us): 2 x 7/8 x 16,384 = 28,672 bytes / 450e9
= 0.0637 us + 14 steps x 1 us = 14.0637 us per all-reduce.
"""

import pytest

from costmodel.cost import as_float
from costmodel.errors import CostModelError, HardwareSpecError
from costmodel.hardware import get_device
from costmodel.keys import COST
from costmodel.roofline import bound
from costmodel.symbols import B, dim
from graphs import decode_report
from graphs.cli import main
from graphs.serving.analysis.parallel import comm_forms
from graphs.serving.step.compiled import compiled_step
from models import get_model

M = "llama-3.1-70b"
ALL_REDUCE_16 = 30_720 / 50e9 + 30 * 1e-6  # 30.6144 us (module doc)
ALL_GATHER_16 = 240_480 / 50e9 + 15 * 1e-6  # 19.8096 us
ALL_REDUCE_8 = 28_672 / 450e9 + 14 * 1e-6  # 14.0637 us


@pytest.mark.parametrize(
    ("device", "domain", "needle"),
    [
        ("h100", 8, "hgx-h100-blog"),
        ("h200", 8, "dgx-basepod"),
        ("b200", 8, "dgx-b200-guide"),
        ("a100", 8, "hgx-a100-blog"),
        ("mi300x", 8, "mi300x-platform"),
        ("tpu-v5e", 256, "256 chips per pod"),
        ("tpu-v6e", 256, "256 chips per pod"),
        ("tpu-v5p", 8960, "8,960 chips per pod"),
        ("tpu7x", 9216, "9,216 chips per pod"),
    ],
)
def test_published_scale_up_domains_are_in_the_catalog(device, domain, needle):
    lk = get_device(device).link("scale_up")
    assert lk.domain == domain and needle in lk.source


@pytest.mark.parametrize("device", ["h100", "h200", "b200"])
def test_dgx_boards_scale_out_over_one_400g_nic_per_gpu(device):
    """400 Gb/s = 50 GB/s per direction (DGX BasePOD / DGX B200 user guide)."""
    lk = get_device(device).link("scale_out")
    assert as_float(lk.bandwidth_bytes_per_s) == 50e9 and "ConnectX-7" in lk.source


def test_the_link_a_group_crosses():
    h100 = get_device("h100")
    assert h100.group_link(8) == "scale_up" and h100.group_link(16) == "scale_out"
    assert get_device("gb200").group_link(64) == "scale_up"  # one NVL72 domain
    assert get_device("l40s").group_link(16) == "scale_up"  # no domain stated: as before
    assert h100.group_link(dim("tp")) == "scale_up"  # symbolic: no comparison to make
    with pytest.raises(HardwareSpecError, match=r"spans more than one scale-up domain \(8 devices\)"):
        get_device("a100").group_link(16)  # no scale-out link in the catalog


def _collectives(tp: int) -> dict[str, tuple[int, dict[str, float]]]:
    c = compiled_step(M, "h100", "decode", tp=tp)
    hw = get_device("h100")
    out = {}
    for n, d in c.graph.nodes(data=True):
        if d.get("op") in ("all_reduce", "all_gather"):
            terms = bound(d[COST].subs({B: 1}), hw).terms
            out[n] = (d.get("repeat", 1), {k: as_float(v) for k, v in terms.items() if k.startswith("link:")})
    return out


def test_tp16_on_h100_is_priced_over_the_network_by_hand():
    """Module doc: 30.6144 us per all-reduce, 19.8096 us for the logits all-gather, 4,948.728 us
    per step over the scale-out link; tp8 stays on NVLink at 14.0637 us per all-reduce."""
    wide = _collectives(16)
    for name, (_rep, terms) in wide.items():
        assert list(terms) == ["link:scale_out"]
        want = ALL_GATHER_16 if "all_gather" in name else ALL_REDUCE_16
        assert terms["link:scale_out"] == pytest.approx(want, rel=1e-12)
    total = sum(rep * t["link:scale_out"] for rep, t in wide.values())
    assert sum(rep for rep, _ in wide.values()) == 162  # 80 x 2 + embed + logits
    assert total == pytest.approx(161 * ALL_REDUCE_16 + ALL_GATHER_16, rel=1e-12)
    assert total == pytest.approx(4948.728e-6, rel=1e-9)
    terms = compiled_step(M, "h100", "decode", tp=16).point(1, 4096)["terms_s"]
    assert terms["link:scale_out"] == pytest.approx(total, rel=1e-9) and "link:scale_up" not in terms
    narrow = _collectives(8)
    ar = [t for n, (_, t) in narrow.items() if "all_reduce" in n]
    assert all(t == {"link:scale_up": pytest.approx(ALL_REDUCE_8, rel=1e-12)} for t in ar)


def test_reports_say_when_a_group_spans_domains():
    note = "a group of 16 h100-sxm devices spans 2 scale-up domains of 8"
    assert any(note in n for n in decode_report(M, "h100", ctx=4096, tp=16).notes)
    assert not any("spans" in n for n in decode_report(M, "h100", ctx=4096, tp=8).notes)


def test_the_cli_refuses_a_group_wider_than_a_domain_without_a_network(capsys):
    try:
        rc = main(["decode", M, "--device", "a100", "--tp", "16", "--ignore-capacity"])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "scale-up domain (8 devices)" in err and "\n" not in err


def test_an_expert_all_to_all_across_domains_takes_the_network():
    """Mixtral-8x7B at tp4 x ep4 spans 16 H100s: its all-to-all is priced as on scale_out;
    within 8 devices (tp2 x ep4) on scale_up."""
    cfg, hw = get_model("mixtral-8x7b"), get_device("h100")
    assert comm_forms(cfg, hw, "scale_up", 4, 16)[1] == comm_forms(cfg, hw, "scale_out", 4)[1]
    assert comm_forms(cfg, hw, "scale_up", 4, 8)[1] == comm_forms(cfg, hw, "scale_up", 4)[1]
    assert comm_forms(cfg, hw, "scale_up", 4, 16)[1] != comm_forms(cfg, hw, "scale_up", 4, 8)[1]


def test_search_serve_plans_and_size_price_a_group_across_domains_as_decode_does(capsys):
    """A review found `search --tp 16` on H100s refused ("every plan spans more devices than its
    scale-up domain joins"), `size` prune it, and `serve plans` price it silently, where `decode`
    prices it on the scale-out link with a note. Each now prices it as decode does, and says so;
    where the device has no scale-out link (an A100 PCIe pair's NVLink bridge) it stays left out."""
    from graphs.serving import search

    note = "a group of 16 h100-sxm devices spans 2 scale-up domains of 8"
    want = float(decode_report(M, "h100", batch=1, ctx=4096, tp=16).step_s)
    res = search(M, devices=["h100"], batches=[1], ctxs=[4096], tp=[16])
    assert not res.beyond_domain and any(note in n for n in res.dtype_notes)
    (row,) = [r for r in res.frontier if r["tp"] == 16]
    assert row["tpot_s"] == pytest.approx(want, rel=1e-9)
    assert main(["serve", "plans", M, "--device", "h100", "--plans", "16x1x1x1", "--batches", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count(note) == 1 and "tp16 pp1 ep1 m1" in out
    with pytest.raises(CostModelError, match="no scale_out link"):
        search(M, devices=["a100-pcie-80gb"], batches=[1], ctxs=[4096], tp=[4])


def test_size_simulates_a_group_across_domains_and_says_so(capsys):
    """`size` pruned H100 tp16 as "wider than its scale-up domain" though `simulate --tp 16` runs
    it (priced on the scale-out link). It is a candidate now, noted once."""
    argv = ["size", M, "--rate", "1", "--devices", "h100", "--tp", "16", "--requests", "50"]
    assert main([*argv, "--slo-ttft", "5", "--slo-tpot", "0.5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "pruned by the bounds: h100-sxm tp16" not in out and "winner: h100-sxm tp16" in out
    assert out.count("h100-sxm tp16: a group of 16 h100-sxm devices spans 2 scale-up domains of 8") == 1
