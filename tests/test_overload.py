"""Memory-bound overload as vLLM V1 runs it: the KV pool, admission, preemption and recompute.

The case: Llama-3.1-8B in BF16 on one 24 GB RTX 4090, ``vllm serve`` defaults, ShareGPT-like
lengths (prompt and output uniform over 150..300 tokens), Poisson arrivals at 20 requests/s
(about twice what the card serves). Its pool, by hand (vLLM's rule, ``kv_blocks``):

* ``max_num_batched_tokens`` is 2,048 on a GPU below 70 GiB (``get_batch_defaults``), not 8,192;
* weights ``W`` = 8,030,261,248 parameters x 2 B = 16,060,522,496 B;
* KV per token ``k`` = 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B;
* ``n = floor((0.9 x (C - d) - W - a x 2048 - R) / (16 k))`` with ``C`` the memory the driver
  reports (nvidia-smi 24,564 MiB = 25,757,220,864 B, not the vendor's 24 GB), ``d`` = 458,982,687 B
  what CUDA's ``mem_get_info`` total is below it (vLLM's ``gpu_memory_utilization`` is a fraction of
  that total; the H100's 0.43 GiB, :mod:`graphs.serving.engines.vllm`), ``a`` the ledger's
  activation bytes per token (264,704 B: 0.54 GB at 2,048 tokens), ``R`` = 171,798,692 B
  (0.16 GiB) of non-torch memory and ``G`` = 650,379,424 B (0.61 GiB) of vLLM's CUDA-graph
  estimate (32 layers, :func:`graphs.serving.engines.vllm.v1_cudagraph_memory`) =
  floor(5,343,599,955.3 / 2,097,152) = 2,548 blocks (2,858 without ``G``).

A sequence holds at most ceil((300 + 300) / 16) = 38 blocks and at least ceil(150 / 16) = 10:

* with ``max_num_seqs`` S, 67 x 38 = 2,546 <= 2,548: at S <= 67 no allocation can fail, so no
  sequence is ever preempted;
* at any S the running sequences hold at most n blocks: at most floor(2548 / 10) = 254 run at once.

The direction, from vLLM's scheduler (``vllm/v1/core/sched/scheduler.py``): while S sequences
fit the pool, a larger S is a larger batch on a weight-read-bound card, more throughput and, the
load being above capacity, less queueing: E2E falls. Once S admits more than the pool holds as
outputs grow, the newest running request is preempted each time one runs out of blocks and is
prefilled again on resumption (with prefix caching on, only its evicted tail): preemptions
climb. Whether E2E then rises again depends on the pool: with the 2,548 blocks of CUDA's total
less the non-torch memory and the CUDA graphs, S = 256 still beats S = 67 (the larger batch gains
more than the recompute costs: 11.9 s against 15.4 s mean E2E, 435 preemptions); with the 2,382
of the vendor's 24 GB (no non-torch memory or graphs then) it did not. vLLM's own measurement of the second regime
(https://github.com/vllm-project/vllm/pull/44594: a watermark that stops over-admission cut
preemptions 1,065 -> 187 and raised throughput 5 %) is reproduced by the slow test below.
"""

from __future__ import annotations

import functools
import math

import pytest

from costmodel.hardware import get_device
from graphs.serving.engines import get_engine
from graphs.serving.sim.engine import kv_pool, profile_engine
from graphs.serving.sim.requests import synthetic
from graphs.serving.sim.simulator import simulate

MODEL, DEVICE = "llama-3.1-8b", "rtx-4090"
REQS = synthetic(1000, rate=20.0, prompt="uniform:150,300", output="uniform:150,300", seed=0)


def _run(**overrides):
    """One run of the case with some ``vllm`` defaults replaced (the bound: no CPU terms)."""
    return _cached(tuple(sorted(overrides.items())))


@functools.cache
def _cached(items):
    overrides = dict(items)
    caching = overrides.pop("enable_prefix_caching", None)
    prof = get_engine("vllm").with_overrides(**overrides) if overrides else get_engine("vllm")
    eng = profile_engine(prof, MODEL, DEVICE, enable_prefix_caching=caching)
    return simulate(MODEL, DEVICE, REQS, engine=eng, overheads=prof.overheads(terms=False), rate=20.0)


def test_pool_by_hand():
    pool = kv_pool(MODEL, DEVICE)
    assert pool.weights_bytes == 8_030_261_248 * 2
    assert pool.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 131,072
    prof = get_engine("vllm").for_device(get_device(DEVICE))
    assert prof.max_num_batched_tokens == 2048  # below 70 GiB: get_batch_defaults' else branch
    a = pool.activation_bytes_per_token
    assert pool.capacity_bytes == 24_564 * 2**20  # nvidia-smi's total, the figure vLLM's fraction is of
    cuda = 24_564 * 2**20 - 458_982_687  # less the H100's 0.43 GiB (vllm PR 10511): mem_get_info's total
    # less vLLM's CUDA-graph estimate (>= 0.21.0): 32 layers x (12,794,261 + 89,644 x 84) = 650,379,424 B
    # (tests/test_vllm_memory.py; 2,858 blocks without it)
    n = math.floor((0.9 * cuda - 16_060_522_496 - a * 2048 - 171_798_692 - 650_379_424) / (16 * 131_072))
    assert prof.kv_blocks(pool) == n == 2548
    # the >= 70 GiB branch (8,192 tokens, 1,024 sequences: every capture size a FULL graph too,
    # 32 x (12,794,261 + 89,644 x 100) = 696,277,152 B) would have left a third fewer blocks
    assert get_engine("vllm").kv_blocks(pool) == math.floor(
        (0.9 * cuda - 16_060_522_496 - a * 8192 - 171_798_692 - 696_277_152) / 2_097_152
    )


def test_no_preemption_while_every_sequence_fits_the_pool():
    res = _run(max_num_seqs=67)  # 67 x 38 = 2,546 <= 2,548 blocks: no allocation can fail
    assert res.preemptions == 0


def test_running_sequences_never_exceed_the_pool():
    res = _run()  # max_num_seqs 256: the pool, not the limit, bounds the batch
    running = res.timeline["running"]
    assert running.max() <= 2548 // 10  # each running sequence holds >= ceil(150 / 16) = 10 blocks
    assert res.timeline["kv_used"].max() <= 1.0
    assert res.preemptions > 0


def test_max_num_seqs_direction():
    """E2E falls while the sequences fit the pool; preemptions start once admission outruns it
    (module doc: at this pool the larger batch still gains more than the recompute costs)."""
    fit_small, fit_large, over = _run(max_num_seqs=32), _run(max_num_seqs=67), _run(max_num_seqs=256)
    assert fit_small.preemptions == fit_large.preemptions == 0
    assert fit_large.e2e.mean < fit_small.e2e.mean  # a larger batch, less queueing
    assert over.preemptions > 100  # the newest running request preempted, again and again


def test_pool_size_direction():
    small, large = _run(kv_fraction=0.85), _run(kv_fraction=0.95)
    assert large.preemptions < small.preemptions
    assert large.e2e.mean < small.e2e.mean
    assert large.steady_output_tokens_per_s > small.steady_output_tokens_per_s


def test_watermark_stops_over_admission():
    base, marked = _run(), _run(kv_watermark=0.05)
    assert marked.preemptions < base.preemptions / 10
    assert marked.e2e.mean < base.e2e.mean


def test_prefix_cache_resumes_a_preempted_request_after_its_cached_blocks():
    """vLLM V1 (prefix caching on by default) frees a preempted request's blocks with their
    hashes: it resumes after those not yet evicted, so less is prefilled again."""
    on, off = _run(), _run(enable_prefix_caching=False)
    assert on.preemptions > 0 and off.preemptions > 0
    assert on.prefill_device_s < off.prefill_device_s
    assert on.e2e.mean < off.e2e.mean


def test_full_prompt_admission_waits_for_the_whole_prompt():
    """``reserve_full_prompt`` (vLLM's ``scheduler_reserve_full_isl``): a 6,000-token prompt on a
    budget of 2,048 is admitted only when all its 375 blocks are free; without it its first
    chunk's 128 blocks suffice and it is preempted mid-prefill when the pool runs out."""
    from graphs.serving.sim.engine import EngineConfig, Replica, Sequence
    from graphs.serving.sim.requests import Request

    def replica(full: bool) -> Replica:
        cfg = EngineConfig(max_num_batched_tokens=2048, reserve_full_prompt=full, num_blocks=400)
        return Replica(_Step(), 400, cfg)

    for full, admitted in ((True, False), (False, True)):
        rep = replica(full)
        rep.free_blocks = 200  # 200 blocks held by others
        rep.add(Sequence(Request(rid=0, arrival_s=0.0, prompt=6000, output=10)))
        rep.running.append(
            Sequence(Request(rid=1, arrival_s=0.0, prompt=16, output=10), computed=16, generated=1, blocks=1)
        )
        batch = rep.schedule()
        assert (len(batch) == 2) == admitted, full


def test_watermark_bounds():
    from costmodel.errors import CostModelError

    with pytest.raises(CostModelError, match=r"kv_watermark must be in \[0, 1\)"):
        get_engine("vllm").with_overrides(kv_watermark=1.0)


class _Step:
    """An iteration step that costs nothing (the scheduler alone is under test)."""

    windowed = False

    def time_sums(self, *args: object) -> float:
        return 0.0


@pytest.mark.slow
def test_watermark_reproduces_vllm_pr_44594():
    """https://github.com/vllm-project/vllm/pull/44594 (merged 2026-06): Qwen2.5-7B-Instruct, TP 1,
    one GB200, 16 GiB of KV = 299,584 tokens (18,724 blocks of 16), max-num-seqs 256, chunked
    prefill, prefix caching off, random input ~1,000 and output ~5,000 tokens (range ratio 0.2:
    uniform 800..1,200 and 4,000..6,000, --ignore-eos), 450 prompts at --max-concurrency 128.
    Measured: watermark off 1,065 preemptions, 11,582 output tok/s, E2E P50 51.6 s; watermark
    0.02: 400, 12,134 (+4.8 %), 48.4 s (-6.2 %). The bound runs faster than the GB200 did, so
    the counts and the ratios are compared, not the seconds."""
    reqs = synthetic(450, rate=None, prompt="uniform:800,1200", output="uniform:4000,6000", seed=0)

    def run(w: float):
        prof = get_engine("vllm").with_overrides(max_num_seqs=256, kv_watermark=w)
        eng = profile_engine(prof, "qwen2.5-7b", "gb200", enable_prefix_caching=False, num_blocks=18724)
        return simulate("qwen2.5-7b", "gb200", reqs, engine=eng, concurrency=128)

    off, marked = run(0.0), run(0.02)
    assert off.preemptions == pytest.approx(1065, rel=0.15)
    assert marked.preemptions == pytest.approx(400, rel=0.15)
    gain = marked.output_tokens_per_s / off.output_tokens_per_s - 1
    assert gain == pytest.approx(0.048, abs=0.02)
    faster = marked.e2e.p50 / off.e2e.p50 - 1
    assert faster == pytest.approx(-0.062, abs=0.03)


def test_simulate_takes_the_admission_flags(capsys):
    """``simulate`` passes ``--kv-watermark``, ``--no-reserve-full-prompt`` and
    ``--no-enable-prefix-caching`` to the profile, and prints what it ran."""
    import json

    from graphs.cli import main

    base = ["simulate", MODEL, "--device", "l4", "--rate", "2", "--requests", "4", "--json"]
    flags = ["--kv-watermark", "0.05", "--no-reserve-full-prompt", "--no-enable-prefix-caching"]
    assert main([*base, *flags]) == 0
    eng = json.loads(capsys.readouterr().out)["engine"]
    assert eng["settings"]["kv_watermark"] == 0.05
    assert eng["settings"]["reserve_full_prompt"] is False
    assert eng["settings"]["enable_prefix_caching"] is False
    assert eng["settings"]["max_num_batched_tokens"] == 2048  # a 24 GB L4: get_batch_defaults' else branch
    assert main([*base, "--kv-watermark", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--kv-watermark must be in [0, 1), got 1.0" in err[0]


def test_every_kv_watermark_option_checks_the_engines_range():
    """The option refuses what the engine refuses, with the engine's range ([0, 1): a watermark of
    1 keeps every block free, test_watermark_bounds), before any work: 1 is refused by every
    command that takes ``--kv-watermark``, 0.99 and 0 pass."""
    import argparse

    from graphs.cli import build_parser
    from graphs.cli.options import all_actions

    found = [(prog, a) for prog, a in all_actions(build_parser()) if "--kv-watermark" in a.option_strings]
    assert found
    for prog, action in found:
        assert callable(action.type) and action.type("0.99") == 0.99 and action.type("0") == 0.0, prog
        with pytest.raises(
            argparse.ArgumentTypeError, match=r"^--kv-watermark must be in \[0, 1\), got 1\.0$"
        ):
            action.type("1")
