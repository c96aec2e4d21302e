"""A tensor-parallel all-reduce over PCIe (no NVLink) at its bound, against aiconfigurator's
measured all-reduce rows on the two PCIe servers of the measured corpus.

The catalog's PCIe links with peer-to-peer access carry a step latency of 1.5 us (source ``pcie-allreduce-latency``):
the fastest measured all-reduce of p GPUs over its ring's 2(p-1) steps, minimised over p and
rounded down. So the bound of the smallest all-reduce stays below every measurement and, at two
GPUs, within a factor of two of it (the published figures, any library and message size):

========================  ========  =========  =========
device (PCIe)             2 GPUs    4 GPUs     8 GPUs
========================  ========  =========  =========
RTX PRO 6000 Server (G5)  4.14 us   12.52 us   23.6 us
L40S (Gen4)               5.21 us   11.77 us   21.69 us
========================  ========  =========  =========
"""

from __future__ import annotations

import pytest

from costmodel.cost import as_float
from costmodel.hardware import get_device
from costmodel.roofline import bound
from costmodel.rules.comm import all_reduce

MEASURED_MIN_S = {
    "rtx-pro-6000": {2: 4.14e-6, 4: 12.52e-6, 8: 23.6e-6},
    "l40s": {2: 5.21e-6, 4: 11.77e-6, 8: 21.69e-6},
}
LINK_BYTES_PER_S = {"rtx-pro-6000": 64e9, "l40s": 32e9}  # PCIe Gen5 / Gen4 x16, per direction


@pytest.mark.parametrize("device", sorted(MEASURED_MIN_S))
@pytest.mark.parametrize("p", [2, 4, 8])
def test_pcie_all_reduce_bound_below_the_measured(device, p):
    n = 256  # bf16 elements: the smallest message measured
    t = as_float(bound(all_reduce(elements=n, p=p, dtype="bf16"), get_device(device)).time)
    # ring: 2(p-1) steps of 1.5 us + 2(p-1)/p x 512 B over the link
    assert t == pytest.approx(2 * (p - 1) * 1.5e-6 + 2 * (p - 1) / p * n * 2 / LINK_BYTES_PER_S[device])
    assert t <= MEASURED_MIN_S[device][p]
    if p == 2:
        assert t >= MEASURED_MIN_S[device][p] / 2


def test_every_pcie_link_has_the_step_latency():
    """The catalog's PCIe-only cards with P2P (no NVLink) all carry it, sourced."""
    for name in ("l40s", "l4", "rtx-pro-6000"):
        link = get_device(name).link("scale_up")
        assert link.latency_s is not None and as_float(link.latency_s) == 1.5e-6
        assert "pcie-allreduce-latency" in link.source


#: NCCL with P2P disabled on 2 x RTX 4090, alltoall_perf -g 2, 8-64 B messages: 11.27-11.92 us
#: (tinygrad/open-gpu-kernel-modules issue 17; catalog source geforce-no-p2p): one host-staged
#: exchange between the two cards
HOST_STAGED_EXCHANGE_S = 11.27e-6


@pytest.mark.parametrize("device", ["rtx-4090", "rtx-5090"])
def test_geforce_collectives_are_staged_through_host_memory(device):
    """GeForce cards have no P2P (NVIDIA's statement): a ring step is one host-staged exchange,
    at least the measured 11.27 us, not the 1.5 us of the P2P servers."""
    hw = get_device(device)
    link = hw.link("scale_up")
    assert "geforce-no-p2p" in link.source
    step = as_float(link.latency_s)
    assert HOST_STAGED_EXCHANGE_S * 0.95 <= step <= HOST_STAGED_EXCHANGE_S  # a floor, within 5 %
    # a 2-GPU all-reduce of a decode step's activations (8 rows x 5,120 bf16): two exchanges
    n = 8 * 5120
    t = as_float(bound(all_reduce(elements=n, p=2, dtype="bf16"), hw).time)
    bw = as_float(link.bandwidth_bytes_per_s)
    assert t == pytest.approx(2 * step + n * 2 / bw)  # 2(p-1) = 2 steps, 2(p-1)/p = 1 of the bytes
    assert t >= 2 * HOST_STAGED_EXCHANGE_S * 0.95
