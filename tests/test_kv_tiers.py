"""KV-cache tiers (graphs.serving.sim.kv_tiers): evicted prefixes move to host memory and SSD, and a
hit there costs its transfer, overlapped with the iteration's compute; hand-derived cases.

Llama-3.1-8B keeps 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token.
A 4,000-token prompt that is all shared prefix caches 4000 / 16 = 250 full blocks
(4,000 x 131,072 = 524,288,000 bytes); its request (10 output tokens) needs 251 blocks.
"""

import pytest

from costmodel.errors import CostModelError
from graphs import prefill_report
from graphs.cli import main
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.kv_tiers import KVTierConfig
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate
from graphs.serving.step.compiled import compiled_step

M, HW, P = "llama-3.1-8b", "h100", 4000
PREFIX_BYTES = P * 131_072  # 524,288,000


def _run(order: str, blocks: int, tiers: KVTierConfig | None):
    reqs = [Request(i, 10.0 * i, P, 10, prefix_id=ord(c), prefix=P) for i, c in enumerate(order)]
    eng = EngineConfig(enable_prefix_caching=True, num_blocks=blocks)
    return simulate(M, HW, reqs, engine=eng, kv_tiers=tiers)


def test_a_host_hit_lands_between_a_gpu_hit_and_a_miss():
    """600 GPU blocks hold two cached prefixes (500) and not a third request's 251: A, B, C, A.
    C evicts A (least recently used). Without tiers A is dropped and its return is a miss: the
    whole 4,000-token prefill. With host memory A moved there; its return loads 250 blocks over
    the H100's PCIe Gen5 x16 host link (64 GB/s per direction, the catalog's):
    524,288,000 / 64e9 = 8.192 ms, overlapped with its one-token chunk after 3,999 cached
    (the last prompt token is always computed): TTFT = max(compute, load). With 5,000 GPU blocks
    nothing is evicted: a GPU hit, TTFT = compute."""
    load = PREFIX_BYTES / 64e9
    assert load == pytest.approx(8.192e-3)
    compute = compiled_step(M, HW, "prefill", chunked=True).step(1, 1, P - 1)
    miss = prefill_report(M, HW, seq=P).step_s
    gpu = _run("ABCA", 5000, None).per_request["ttft_s"][3]
    dropped = _run("ABCA", 600, None).per_request["ttft_s"][3]
    res = _run("ABCA", 600, KVTierConfig(host_bytes=100e9))
    host = res.per_request["ttft_s"][3]
    assert gpu == pytest.approx(compute, rel=1e-9) and dropped == pytest.approx(miss, rel=1e-9)
    assert host == pytest.approx(max(compute, load), rel=1e-9)
    assert gpu < host < dropped
    st = res.kv_tiers
    assert st.host_hits == 1 and st.ssd_hits == 0 and res.prefix_cache_hits == 1
    assert st.load_s == pytest.approx(load) and st.exposed_s == pytest.approx(load - compute)


# Recomputing A's 4,000 tokens as one prefill chunk on an H100 (the roofline bound): at least
# its matmul FLOPs over the bf16 tensor peak, 2 x 6.98e9 (non-embedding, non-lm_head
# parameters) x 4,000 tokens + causal attention 2 x 4,000^2 x 4,096 x 32 layers = 55.8e12 +
# 4.2e12 = 60.0e12 FLOP / 989.4e12 FLOP/s = 60.7 ms; the memory-bound kernels between the GEMMs
# bring the bound to 68.6 ms (the graph's prefill report, an independent path).
RECOMPUTE_FLOOR = (2 * 6.98e9 * P + 2 * P**2 * 4096 * 32) / 989.4e12  # 60.7 ms


def test_an_ssd_hit_slower_than_recomputing_is_recomputed():
    """Host memory for one prefix (6e8 bytes: floor(6e8 / (16 x 131,072)) = 286 blocks >= 250,
    not 500), SSD at 7 GB/s: A B C D A. C evicts A to host; D evicts B to host, which pushes
    A to SSD. A's return would load from SSD at min(7e9, 64e9): 524,288,000 / 7e9 = 74.9 ms,
    more than recomputing its 4,000 tokens (68.6 ms, >= 60.7 ms by hand): the engine
    recomputes, TTFT = the miss's prefill, and nothing is loaded."""
    load = PREFIX_BYTES / 7e9
    assert load == pytest.approx(74.898e-3, rel=1e-4)
    miss = prefill_report(M, HW, seq=P).step_s
    assert RECOMPUTE_FLOOR <= miss < load and miss == pytest.approx(RECOMPUTE_FLOOR, rel=0.15)
    tiers = KVTierConfig(host_bytes=6e8, ssd_bytes=1e12, ssd_bandwidth=7e9)
    res = _run("ABCDA", 600, tiers)
    st = res.kv_tiers
    assert (st.ssd_hits, st.ssd_recomputed, st.host_hits, st.host_recomputed) == (0, 1, 0, 0)
    assert res.prefix_cache_hits == 0 and st.load_s == 0.0
    assert res.per_request["ttft_s"][4] == pytest.approx(miss, rel=1e-9)


def test_an_ssd_hit_faster_than_recomputing_is_loaded():
    """The same run with a 14 GB/s SSD (a PCIe Gen5 NVMe drive): the load takes
    524,288,000 / 14e9 = 37.4 ms, below the 60.7 ms floor of recomputing: A is loaded from SSD,
    overlapped with its one-token chunk (4.6 ms): TTFT = the load."""
    load = PREFIX_BYTES / 14e9
    assert load == pytest.approx(37.449e-3, rel=1e-4) and load < RECOMPUTE_FLOOR
    res = _run("ABCDA", 600, KVTierConfig(host_bytes=6e8, ssd_bytes=1e12, ssd_bandwidth=14e9))
    st = res.kv_tiers
    assert (st.ssd_hits, st.ssd_recomputed, st.host_hits, st.host_recomputed) == (1, 0, 0, 0)
    assert st.load_s == pytest.approx(load)
    assert res.per_request["ttft_s"][4] == pytest.approx(load, rel=1e-9)


def test_the_cli_counts_loaded_and_recomputed_per_tier(capsys):
    """The report line names both counts per tier."""
    args = "--rate 1 --requests 4 --prompt fixed:64 --output fixed:4 --enable-prefix-caching --host-kv-bytes 1e10"
    rc = main(["simulate", M, *args.split()])
    assert rc in (0, None)
    out = capsys.readouterr().out
    assert "loaded +" in out and "recomputed instead" in out


def test_a_prefix_loaded_back_stays_below():
    """Copies are kept: after A returns from host (A B C A), B is evicted to host too, and a
    later B is a host hit as well: A B C A B gives 2 host hits."""
    res = _run("ABCAB", 600, KVTierConfig(host_bytes=100e9))
    assert res.kv_tiers.host_hits == 2


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"host_bytes": -1.0}, "host_bytes must be in"),
        ({"host_bytes": 1e9, "host_bandwidth": 0.5}, "host_bandwidth must be in"),
        ({"host_bytes": 1e9, "ssd_bytes": 1e9}, "needs ssd_bandwidth"),
        ({"ssd_bytes": 1e9, "ssd_bandwidth": 1e9}, "needs a host tier"),
    ],
)
def test_bad_tier_configs_are_refused(kw, needle):
    with pytest.raises(CostModelError, match=needle):
        KVTierConfig(**kw)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host-kv-bytes", "1e10", "--no-enable-prefix-caching"], "give --enable-prefix-caching"),
        (["--ssd-kv-bytes", "1e10"], "needs a host-memory tier"),
        (["--host-kv-bytes", "1e10", "--enable-prefix-caching", "--device", "l4"], "--host-link-bandwidth"),
        (["--host-link-bandwidth", "0"], "--host-link-bandwidth must be in"),
    ],
)
def test_cli_refuses_bad_tier_flags_in_one_line(args, needle, capsys):
    try:
        rc = main(["simulate", M, "--rate", "1", "--requests", "2", "--quiet", *args])
    except SystemExit as e:
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


@pytest.mark.parametrize(
    ("device", "per_direction"),
    [
        ("h100-sxm", 64e9),  # H100 datasheet: PCIe Gen5 128 GB/s both directions together
        ("h200-sxm", 64e9),  # H200 datasheet: the same PCIe Gen5 x16
        ("gb200", 450e9),  # NVLink-C2C 900 GB/s bidirectional
    ],
)
def test_catalog_host_links(device, per_direction):
    from costmodel.cost import as_float
    from costmodel.hardware import get_device

    lk = get_device(device).link("host")
    assert as_float(lk.bandwidth_bytes_per_s) == per_direction and lk.source


@pytest.mark.parametrize("skip", [False, True])
def test_promoting_a_prefix_never_evicts_it_from_its_own_tier(skip):
    """Promoting a host-tier prefix frees GPU blocks by moving other prefixes down into that tier;
    a small tier then evicts its least recent entries, which once included the prefix being
    promoted (an AssertionError in KVTiers.load). Conversations over a tiny host tier (0.2 MB)
    and a GPU pool that holds one conversation: every request finishes, every block returns."""
    import math

    from graphs.serving.engines import get_engine
    from graphs.serving.sim.engine import profile_engine
    from graphs.serving.sim.requests import synthetic

    reqs = synthetic(40, rate=50.0, prompt="uniform:20,400", output="uniform:1,80", seed=2, turns=3, think_s=0.01)
    need = math.ceil(max(r.prompt + r.output for r in reqs) / 16) + 1
    eng = profile_engine(get_engine("vllm"), "tiny", "h100", enable_prefix_caching=True, num_blocks=need)
    res = simulate("tiny", "h100", reqs, engine=eng, kv_tiers=KVTierConfig(host_bytes=2e5), skip=skip)
    assert res.requests == 120 and res.kv_tiers is not None  # 40 conversations of 3 turns
