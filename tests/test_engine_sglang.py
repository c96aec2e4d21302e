"""SGLang's own KV pool and admission (graphs/serving/engines/sglang.py, sglang04.py, sglang051.py), pinned to
hand derivations from SGLang's formulas (server_args.py ``_handle_gpu_memory_settings``,
``profile_max_num_token``, ``PrefillAdder``)."""

from __future__ import annotations

import math

import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs.serving.engines import EngineConfig, get_engine
from graphs.serving.engines.sglang import sglang_capture_sizes, sglang_memory_defaults
from graphs.serving.engines.sglang04 import sglang04_device_defaults
from graphs.serving.engines.sglang051 import sglang051_capture_sizes, sglang051_memory_defaults
from graphs.serving.sim.engine import kv_pool, pool_memory, pool_memory_note, profile_engine
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate

H100_MIB = 81_559  # nvidia-smi's memory.total on an H100 SXM (catalog source nvidia-smi-h100)


@pytest.mark.parametrize(
    ("mib", "tp", "expect"),
    [
        # R = 512 + 1.5 x 8192 + 2 x 256 + 1024 x 1 / 8 = 13,440; (81,559 - 13,440) / 81,559 = 0.83521
        (H100_MIB, 1, (8192, 256, 0.835)),
        # TP 4: cuda_graph_max_bs 512; R = 512 + 12,288 + 1,024 + 512 = 14,336; 67,223 / 81,559 = 0.82422
        (H100_MIB, 4, (8192, 512, 0.824)),
        # RTX 4090 (24,564 MiB, 20-35 GiB): 2,048 and 24; R = 512 + 3,072 + 48 + 128 = 3,760
        # (no 10 GiB floor below 60 GiB); 20,804 / 24,564 = 0.84693
        (24_564, 1, (2048, 24, 0.847)),
        # B200 (183,359 MiB, above 160 GiB): 16,384 and 512; R = 512 + 24,576 + 1,024 + 1,024 = 27,136
        (183_359, 8, (16384, 512, 0.852)),
        # a 40 GB-class GPU (40,960 MiB): 4,096 and 32; R = 512 + 6,144 + 64 + 128 = 6,848; 34,112 / 40,960
        (40_960, 1, (4096, 32, 0.833)),
    ],
)
def test_mem_fraction_static_by_hand(mib, tp, expect):
    assert sglang_memory_defaults(mib, tp) == expect


def test_the_10_gib_floor_above_60_gib():
    # 61 GiB = 62,464 MiB at TP 1: R = 512 + 12,288 + 512 + 128 = 13,440 > 10,240, so the floor
    # does not bind; it binds only when R < 10,240, which the 60-160 GiB bucket never gives
    chunk, graphs, frac = sglang_memory_defaults(62_464, 1)
    assert (chunk, graphs) == (8192, 256) and frac == round((62_464 - 13_440) / 62_464, 3)


def test_qwen3_32b_pool_on_h100_by_hand():
    """The silicon sample's SGLang rows: Qwen3-32B bf16, TP 1, one H100 SXM."""
    pool = kv_pool("qwen3-32b", "h100-sxm", 1)
    assert pool.capacity_bytes == H100_MIB * 2**20 == 85_520_809_984
    assert pool.kv_bytes_per_token == 64 * 8 * 128 * 2 * 2  # layers x KV heads x head dim x (K, V) x bf16
    prof = get_engine("sglang").for_device(get_device("h100-sxm"), 1)
    assert (prof.kv_fraction, prof.max_num_batched_tokens, prof.block_size) == (0.835, 8192, 1)
    # floor((s C - W) / k): activations live outside the static fraction
    n = math.floor((0.835 * 85_520_809_984 - pool.weights_bytes) / 262_144)
    assert prof.kv_blocks(pool) == n == 22_451  # (71,409,876,337 - 65,524,246,528) / 262,144
    eng = profile_engine(get_engine("sglang"), "qwen3-32b", "h100-sxm", tp=1)
    assert eng.num_blocks == 22_451 and eng.block_size == 1
    assert eng.new_token_ratio == pytest.approx((0.7, 0.098, 0.602 / 600))


def test_a_given_chunk_is_what_the_fraction_reserves_for():
    """SGLang 0.5's ``_handle_gpu_memory_settings`` reserves ``1.5 max(P, 2048)`` MiB for the
    chunked-prefill size in force, a given one too: on an H100 (81,559 MiB) a given 16,384 makes
    R = 512 + 24,576 + 2 x 256 + 128 = 25,728 MiB, s = 55,831 / 81,559 = 0.685 (by memory alone
    8,192 and 0.835); a given 2,048 makes R = 10,240 (the floor), s = 0.874. The profile set up
    on the device keeps the given budget and takes that fraction."""
    assert sglang_memory_defaults(H100_MIB, chunk=16384) == (16384, 256, 0.685)
    assert sglang_memory_defaults(H100_MIB, chunk=2048)[2] == 0.874
    h100 = get_device("h100")
    given = get_engine("sglang").with_overrides(max_num_batched_tokens=16384).for_device(h100)
    assert (given.max_num_batched_tokens, given.kv_fraction) == (16384, 0.685)
    assert get_engine("sglang").for_device(h100).kv_fraction == 0.835


def test_version_04_fraction_by_tp():
    assert sglang04_device_defaults(H100_MIB * 2**20, "h100-sxm", 1)["kv_fraction"] == 0.88
    assert sglang04_device_defaults(H100_MIB * 2**20, "h100-sxm", 8)["kv_fraction"] == 0.81
    # --tp-size 8 --dp-size 8: the whole group's TP reads the fraction, as 0.5's rule
    assert sglang04_device_defaults(H100_MIB * 2**20, "h100-sxm", 1, 8)["kv_fraction"] == 0.81
    old = get_engine("sglang@0.4").for_device(get_device("h100-sxm"), 1)
    pool = kv_pool("qwen3-32b", "h100-sxm", 1)
    # 0.88 x 85,520,809,984 - 65,524,246,528 = 9,734,066,258 B: 37,132 tokens
    assert old.kv_blocks(pool) == math.floor((0.88 * 85_520_809_984 - pool.weights_bytes) / 262_144) == 37_132


@pytest.mark.parametrize(
    ("mib", "tp", "expect"),
    [
        # PR 7054's rule (sglang 0.5.1): 35-90 GiB, R = (9.5 + 1 / 2) x 1024 = 10,240;
        # (81,559 - 10,240) / 81,559 = 0.874447
        (H100_MIB, 1, (8192, 0.874)),
        # TP 2: R = (9.5 + 2 / 2) x 1024 = 10,752; 70,807 / 81,559 = 0.868169
        (H100_MIB, 2, (8192, 0.868)),
        # H200 (143,771 MiB, 90-160 GiB) at TP 8: R = (12 + 8 / 2) x 1024 = 16,384; 127,387 / 143,771 = 0.886041
        (143_771, 8, (8192, 0.886)),
        # RTX 4090 (24,564 MiB, below 35 GiB): R = (2.8 + 1 / 10) x 1024 = 2,969.6; 21,594.4 / 24,564 = 0.879108
        (24_564, 1, (2048, 0.879)),
        # B200 (183,359 MiB, 160 GiB and above): R = 32 x 1024 = 32,768; 150,591 / 183,359 = 0.821290
        (183_359, 8, (16384, 0.821)),
    ],
)
def test_version_051_fraction_by_hand(mib, tp, expect):
    assert sglang051_memory_defaults(mib, tp) == expect


def test_version_051_pool_on_h100_by_hand():
    """The silicon sample's SGLang 0.5.1.post1 Qwen3-32B rows at TP 2 on H100 SXM: 0.868 of the
    81,559 MiB the driver reports (0.834 under 0.5.8's rule) for the weights and the pool."""
    pool = kv_pool("qwen3-32b", "h100-sxm", 2)
    assert pool.kv_bytes_per_token == 64 * 4 * 128 * 2 * 2  # 4 of the 8 KV heads per device
    # the decode ledger's weights per device (twice them exceeds TP 1's 65,524,246,528 B by the
    # 1,353,728 B every device holds whole)
    assert pool.weights_bytes == 32_762_800_128
    prof = get_engine("sglang@0.5.1").for_device(get_device("h100-sxm"), 2)
    assert (prof.kv_fraction, prof.max_num_batched_tokens, prof.block_size) == (0.868, 8192, 1)
    # 0.868 x 85,520,809,984 = 74,232,063,066; less 32,762,800,128 = 41,469,262,938 B / 131,072 B = 316,385.4
    assert prof.kv_blocks(pool) == 316_385
    new = get_engine("sglang").for_device(get_device("h100-sxm"), 2)
    # 0.834 x 85,520,809,984 = 71,324,355,527; less the weights = 38,561,555,399 B / 131,072 B = 294,201.3
    assert new.kv_fraction == 0.834 and new.kv_blocks(pool) == 294_201
    # TP 1: 0.874 x 85,520,809,984 - 65,524,246,528 = 9,220,941,398 B / 262,144 B = 35,175.1 (22,451 at 0.835)
    one = get_engine("sglang@0.5.1").for_device(get_device("h100-sxm"), 1)
    assert one.kv_blocks(kv_pool("qwen3-32b", "h100-sxm", 1)) == 35_175


def test_version_051_capture_sizes():
    sizes = sglang051_capture_sizes()
    assert sizes[:5] == (1, 2, 4, 8, 16) and sizes[-1] == 160 and len(sizes) == 4 + 19
    assert sglang051_capture_sizes(10) == (1, 2, 4, 8)


def test_capture_sizes():
    sizes = sglang_capture_sizes()
    assert sizes[:6] == (1, 2, 4, 8, 12, 16) and sizes[-1] == 256 and len(sizes) == 5 + 31
    assert sglang_capture_sizes(20) == (1, 2, 4, 8, 12, 16)


def test_admission_keeps_room_for_the_outputs():
    """A wave of twelve 1,000 + 1,000-token requests on a pool of 8,000 one-token pages. The first
    iteration admits the first arrival alone (the others arrive as it starts). In the second,
    the free pages are 8,000 - 1,001 = 6,999 and the running one keeps 0.699 x 999 = 698.3 of them
    (the ratio 0.7 after one decay of 0.001003) for its output, so the room is 6,300.7, and
    PrefillAdder admits while prompt + output + 1 page = 2,001 < the room left: 6,300.7, 4,299.7,
    2,298.7 admit three, 297.7 stops the fourth: 4 run. Without the estimate the prompts' pages
    alone admit six more (6 x 1,000 <= 6,999): 7 run, and preempt as their outputs grow."""
    prof = get_engine("sglang")
    reqs = tuple(Request(i, 0.0, 1000, 1000) for i in range(12))
    eng = profile_engine(prof, "llama-3.1-8b", "h100-sxm", num_blocks=8000)
    res = simulate("llama-3.1-8b", "h100-sxm", reqs, engine=eng, overheads=prof.overheads(terms=False))
    plain = EngineConfig(max_num_seqs=2048, block_size=1, num_blocks=8000, max_num_batched_tokens=8192)
    res2 = simulate("llama-3.1-8b", "h100-sxm", reqs, engine=plain, overheads=prof.overheads(terms=False))
    assert res.timeline["running"][:2].tolist() == [1, 4]
    assert res2.timeline["running"][:2].tolist() == [1, 7]
    assert res.preemptions < res2.preemptions


def test_bad_ratio_refused():
    with pytest.raises(CostModelError, match="new_token_ratio"):
        EngineConfig(new_token_ratio=(0.1, 0.7, 0.001))


def test_reported_memory_and_the_note_when_unsourced():
    assert pool_memory("h100-sxm") == 81_559 * 2**20
    assert pool_memory_note("h100-sxm") == ""
    assert pool_memory("h200-sxm") == 143_771 * 2**20
    # nvidia-smi on an A100 SXM 80GB: 81,920 MiB (github.com/allenai/PeerRead/issues/40)
    assert pool_memory("a100-sxm-80gb") == 81_920 * 2**20
    note = pool_memory_note("a100-pcie-80gb")  # no sourced nvidia-smi figure in the catalog
    assert "NOT SOURCED" in note and "80 GB" in note
    assert pool_memory("a100-pcie-80gb") == 80e9
