"""Smoke test of the replay behind ``benchmarks/serving_accuracy.py`` (:mod:`benchmarks.replay`):
a few published rows replayed quickly.

The measured values are pinned to their published sources (not to this engine's output):

* TensorRT-LLM perf overview, v1.0 edition, table "Llama 3.1 8B", column "H100 TP1 (FP8)",
  row 5000/500: 3,459 output tokens/s
  (https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/docs/source/performance/perf-overview.md);
* NVIDIA NIM benchmarking guide 1.0.0, Llama-3.3-70b-instruct 1.8.0, 2 x H100 80G, fp8 TP2,
  5000/500, concurrency 1: ITL 18.58 ms (https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md);
* vLLM CI build 9513 (H200), latency_llama8B_tp1: mean latency 834.059 ms
  (https://buildkite.com/vllm/performance-benchmark/builds/9513).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from benchmarks import replay
from benchmarks.replay.reasons import CPU_STEP
from costmodel.errors import CostModelError

#: id -> (published value, unit, source URL), read in the sources above
PINNED = {
    "trt10-llama-3.1-8b-h100-sxm-tp1-fp8-5000-500": (
        3459.0,
        "tok/s",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/00f37686aa854010d68bcbd0f4ab000221541ca6/docs/source/performance/perf-overview.md",
    ),
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-itl": (
        0.01858,  # 18.58 ms / 1000
        "s",
        "https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md",
    ),
    "vllmci9513-latency-llama-3.1-8b-tp1": (
        0.834059,  # 834.059 ms / 1000
        "s",
        "https://buildkite.com/vllm/performance-benchmark/builds/9513",
    ),
}


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in replay.load_rows(subset=None)}


@pytest.mark.parametrize("rid", sorted(PINNED))
def test_row_pinned_to_its_source(rows: dict[str, dict[str, str]], rid: str) -> None:
    value, unit, url = PINNED[rid]
    row = rows[rid]
    assert float(row["value"]) == pytest.approx(value, rel=1e-9)
    assert row["unit"] == unit
    assert row["source_url"] == url
    assert row["subset"] == "core"


@pytest.mark.parametrize("rid", sorted(PINNED))
def test_bound_replay_is_never_slower_than_the_real_engine(rows: dict[str, dict[str, str]], rid: str) -> None:
    """A roofline replay of the published configuration: a throughput at least, a latency at
    most the measured one (a real engine adds kernel inefficiency and overheads to the bound)."""
    row = rows[rid]
    bound = replay.run_row(row, "bound", quick=True)
    assert math.isfinite(bound) and bound > 0
    if replay.metric_group(row["metric"]) == "throughput":
        assert bound >= float(row["value"])
    else:
        assert bound <= float(row["value"])


def test_trt_replay_admits_without_eviction(rows: dict[str, dict[str, str]]) -> None:
    """GUARANTEED_NO_EVICT: the running cap times one request's whole KV (prompt + output, in
    32-token blocks) fits the pool, so the replay never preempts."""
    row = rows["trt10-llama-3.1-8b-h100-sxm-tp1-fp8-5000-500"]
    w = replay.row_workload(row, quick=True)
    per_request = -(-(5000 + 500) // 32)  # 172 blocks
    assert w.engine.num_blocks is not None
    assert w.engine.max_num_seqs * per_request <= w.engine.num_blocks
    assert (w.engine.max_num_seqs + 1) * per_request > w.engine.num_blocks  # and uses the pool
    assert (w.config.dtype, w.config.kv_dtype, w.config.matmul_dtype) == ("fp8_e4m3",) * 3
    assert replay.simulate_row(w, "bound").res.preemptions == 0


def test_closed_loop_sends_after_a_completion(rows: dict[str, dict[str, str]]) -> None:
    """At concurrency 1 each request is sent when the previous one finishes: its TTFT is its own
    prefill, not the queue behind the others (4 requests, all alike)."""
    row = rows["nim-llama33-70b-h100x2-fp8-5000-500-c1-ttft"]
    w = replay.row_workload(row, quick=True)
    run = replay.simulate_row(w, "bound")
    assert len(run.ttft) == 2  # the middle rounds of 4
    assert max(run.ttft) == pytest.approx(min(run.ttft), rel=1e-6)


@pytest.mark.parametrize(
    ("rid", "tp", "dp", "ep", "chunk"),
    [
        # SGLang --tp-size 4 --ep-size 4: expert parallelism inside the tp group, no data parallelism
        ("gpustack-glm-4.5-air-a100-sxm-80gb-tp4-opt-4000-200-tput", 4, 1, True, None),
        # SGLang --tp-size 8 --dp-size 8 --enable-dp-attention: 8 ranks of one device, the MoE layers
        # tensor-parallel over the 8, each rank 8192 // 8 tokens a chunk (server_args.py)
        ("gpustack-deepseek-v3.2-h200-sxm-tp8-opt-4000-200-tput", 1, 8, False, 1024),
        # SGLang --tp 8 --enable-dp-attention with no --dp-size: DP attention off, plain TP 8
        ("gpustack-deepseek-v3-h200-sxm-tp8-opt-4000-200-tput", 8, 1, False, None),
    ],
)
def test_a_row_states_its_parallelism_as_its_launch_command_does(rows, rid, tp, dp, ep, chunk) -> None:
    """GPUStack's SGLang launch commands (the rows' notes) replayed as the engine runs them."""
    w = replay.row_workload(rows[rid], quick=True)
    topo = w.topology
    assert (topo.tp, topo.dp, topo.expert_parallel, topo.devices) == (
        tp,
        dp,
        ep,
        8 if dp == 8 or tp == 8 else 4,
    )
    if chunk is not None:
        assert w.engine.max_num_batched_tokens == chunk and w.engine.dp_load_balance == "round_robin"


@pytest.mark.parametrize(
    ("tp", "ep", "adp", "why"),
    [
        ("4", "4", "", None),  # EP over the whole tp group
        ("", "8", "", None),  # DEP: EP with no TP stated
        ("8", "", "8", None),  # attention DP 8 of TP 8, the MoE tensor-parallel
        ("8", "8", "8", None),  # ... with EP over the whole group
        ("4", "2", "", "EP 2 inside TP 4"),
        ("8", "", "3", "attention DP 3 beside TP 8"),
        ("8", "4", "2", "attention DP 2 with EP 4 inside TP 8"),
    ],
)
def test_a_parallel_layout_the_replay_does_not_run_is_excluded(tp, ep, adp, why) -> None:
    row = {"id": "x", "tp": tp, "ep": ep, "attention_dp": adp, "workload": "random", "isl": "1000"}
    reason = replay.excluded(row)
    assert reason is None if why is None else (reason is not None and reason.startswith(why))


def test_unpublished_row_is_refused_with_its_reason(rows: dict[str, dict[str, str]]) -> None:
    row = rows["mlperf41-llama2-70b-h200x8-offline-tok"]
    assert replay.excluded(row) is not None
    with pytest.raises(CostModelError, match="length distribution"):
        replay.row_workload(row)


def _line(metric: str, measured: float, lo: float, hi: float) -> replay.Line:
    row = {"id": f"x-{metric}-{measured}", "metric": metric, "value": str(measured), "unit": "s"}
    return replay.Line(row, {}, (), interval=(lo, hi))


def test_interval_coverage_counts_inside_below_and_above() -> None:
    """Three TPOT rows by hand: 10 ms inside [9, 11], 8 ms below [9, 12], 20 ms above [9, 13];
    widths 11/9 - 1 = 22.2 %, 12/9 - 1 = 33.3 %, 13/9 - 1 = 44.4 %, median 33.3 %. An excluded
    row is not counted."""
    lines = [
        _line("itl_mean_s", 0.010, 0.009, 0.011),
        _line("itl_mean_s", 0.008, 0.009, 0.012),
        _line("itl_mean_s", 0.020, 0.009, 0.013),
        dataclasses.replace(_line("itl_mean_s", 0.5, 0.1, 0.2), excluded="not published"),
    ]
    text = replay.interval_coverage(lines)
    assert "| TPOT | 3 | 1 (33 %) | 1 | 1 | 33.3 % |" in text.splitlines()
    assert replay.interval_coverage([replay.Line(lines[0].row, {}, ())]) == ""  # no interval run


def test_the_bound_has_no_interval(rows: dict[str, dict[str, str]]) -> None:
    row = rows["nim-llama33-70b-h100x2-fp8-5000-500-c1-itl"]
    with pytest.raises(CostModelError, match="no prediction interval"):
        replay.run_row(row, "bound", quick=True, quantile=0.9)


def test_a_rate_near_the_pages_own_capacity_is_queue_amplified(rows: dict[str, dict[str, str]]) -> None:
    """TensorRT-LLM v0.14's page: Llama-3.1-8B on H100, 467/256, 32 req/s offer 32 x 256 = 8,192
    output tok/s, 8192 / 9420 = 87 % of the 9,420 tok/s the page measures at an unlimited rate:
    near saturation, where a per-step time the replay leaves out is amplified by the queue. At
    16 req/s (43 %) the small batch's CPU work is the reason; at 32 req/s on 70B TP4 the page's
    4,103 tok/s are exceeded twice over (another regime): no such reason."""
    near = replay.reason(rows["trt014srv-llama-3.1-8b-h100-sxm-tp1-467-256-qps32-itl"], -0.36)
    assert near.startswith("near saturation") and "8,192 tok/s, 87 % of the 9,420" in near
    assert replay.reason(rows["trt014srv-llama-3.1-8b-h100-sxm-tp1-467-256-qps16-itl"], -0.3) == CPU_STEP
    assert replay.reason(rows["trt014srv-llama-3.1-70b-h100-sxm-tp4-467-256-qps32-itl"], -0.3) == ""
    assert replay.reason(rows["trt014srv-llama-3.1-8b-h100-sxm-tp1-467-256-qps32-itl"], +0.3) == ""  # slower


def test_a_low_rate_at_capacity_is_the_queues_too(rows: dict[str, dict[str, str]]) -> None:
    """Llama-3.1-70B TP4 on H100, 467/256: 16 req/s x 256 = 4,096 tok/s, 99.8 % of the page's
    4,103 at an unlimited rate: the queue's reason, not the small batch's CPU work; a throughput
    row never takes it (below capacity it is the offered load)."""
    r = rows["trt014srv-llama-3.1-70b-h100-sxm-tp4-467-256-qps16-itl"]
    assert "4,096 tok/s, 100 % of the 4,103" in replay.reason(r, -0.3)
    assert not replay.reason(rows["trt014srv-llama-3.1-70b-h100-sxm-tp4-467-256-qps16-out"], +0.3).startswith(
        "near"
    )


def _csv_ids(prefix: str, subset: str) -> list[str]:
    """The ids of the CSV's ``subset`` rows that start with ``prefix``, read with the csv module."""
    import csv

    with open(replay.CSV_PATH, newline="") as f:
        return [r["id"] for r in csv.DictReader(f) if r["subset"] == subset and r["id"].startswith(prefix)]


@pytest.mark.parametrize(
    ("prefix", "reason"),
    [("mlperf", "the cited logs give no length distribution"), ("sglang060", "ShareGPT prompts")],
)
def test_rows_matching_only_unpublished_rows_exit_in_one_line(prefix: str, reason: str) -> None:
    """``--rows mlperf`` / ``--rows sglang060``: every matched core row is excluded, so nothing is
    replayed; one line says how many matched and why (it crashed in the replay's assert)."""
    from benchmarks.serving_accuracy import main

    n = len(_csv_ids(prefix, "core"))
    assert n >= 1
    with pytest.raises(SystemExit) as exc:
        main(["--rows", prefix, "--modes", "bound", "--quick"])
    msg = str(exc.value.code)
    assert "\n" not in msg and reason in msg
    assert msg.startswith(f"--rows: none of the {n} core row(s) starting with {prefix!r} is replayed ({n}: ")


def test_rows_keep_the_replayable_and_name_the_others() -> None:
    """vLLM CI build 9555's extended rows: the throughput and serving rows give no ISL/OSL (a ShareGPT
    sample), so they are named as not replayed, with the reason every such sample gets
    (``rows.SAMPLED_LENGTHS``); the rest of the prefix is kept."""
    import csv

    from benchmarks.replay.rows import SAMPLED_LENGTHS
    from benchmarks.serving_accuracy import NO_LENGTHS, not_replayed, select_rows

    rows = replay.load_rows(subset="extended")
    ids = _csv_ids("vllmci9555", "extended")
    with open(replay.CSV_PATH, newline="") as f:
        no_len = [r["id"] for r in csv.DictReader(f) if r["id"] in ids and not (r["isl"] and r["osl"])]
    assert len(no_len) >= 1
    keep, notes = select_rows(rows, ("vllmci9555",), "extended")
    assert sorted(r["id"] for r in keep) == sorted(set(ids) - set(no_len))
    assert all(not_replayed(r) is None for r in keep)
    assert len(notes) == 1 and f"{len(no_len)} matched row(s) not replayed ({SAMPLED_LENGTHS})" in notes[0]
    # the full table keeps every row: the unreplayable one listed as excluded for that reason
    full, none = select_rows(rows, None, "extended")
    assert none == [] and len(full) == len(rows)
    assert {r["id"] for r in full if replay.excluded(r) == SAMPLED_LENGTHS} >= set(no_len)
    # a synthetic row: lengths "0" or text are not fixed lengths either
    for isl in ("", "0", "sharegpt"):
        assert not_replayed({"id": "x", "isl": isl, "osl": "128"}) == NO_LENGTHS
    assert not_replayed({"id": "x", "isl": "128", "osl": "128"}) is None


def test_a_block_scaled_fp8_row_is_priced_with_its_checkpoints_block(rows) -> None:
    """Qwen3-235B-A22B-Instruct-2507-FP8 is fine-grained FP8 with 128 x 128 weight blocks (its model
    card): the row's ``weight_block`` column gives the model config that block, as a config.json
    with that ``quantization_config`` does; a per-channel FP8 checkpoint's row (GLM-4.6-FP8) has
    none; a block on a row that is not FP8, or not ``RxC``, is refused in one line."""
    qwen = rows["gpustack-qwen3-235b-a22b-h100-tp4-opt-2000-100-tput"]
    assert replay.row_workload(qwen, quick=True).config.weight_scale_block == (128, 128)
    glm = rows["gpustack-glm-4.5-h200-sxm-tp4-opt-2000-100-tput"]
    assert replay.row_workload(glm, quick=True).config.weight_scale_block is None
    with pytest.raises(CostModelError, match="is not RxC"):
        replay.row_workload({**qwen, "weight_block": "128"}, quick=True)
    with pytest.raises(CostModelError, match="needs precision_weights fp8, got 'bf16'"):
        replay.row_workload({**qwen, "precision_weights": "bf16"}, quick=True)
