"""``benchmarks/serving_calibrated.py``: a published load point becomes a measured run that
carries exactly the published means (what the serving fit reads), with the accuracy table's
own replayed requests.

Pinned to the source: TensorRT-LLM docs, perf overview v0.14.0, "Online Serving Measurements",
Llama-3.1-8B on one H100, input 467 / output 256, QPS 4: 500 requests, mean TTFT 24 ms, mean
ITL 9 ms (https://github.com/arthurrasmusson/TensorRT-LLM/blob/e00d4e6564921307dd264b61fe1d46f116095e0e/docs/source/performance/perf-overview.md).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks import replay
from benchmarks import serving_calibrated as sc
from costmodel.errors import CostModelError
from graphs.serving.planning.serving_fit import BINS

PREFIX = "trt014srv-llama-3.1-8b-h100-sxm-tp1-467-256"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {r["id"]: r for r in replay.load_rows(subset=None)}


def test_a_load_point_carries_the_published_means(rows: dict[str, dict[str, str]]) -> None:
    run, w = sc.bench_run(rows, PREFIX, "4")
    assert len(run.prompt) == 500 and run.rate == 4.0  # the published count and rate
    assert set(run.prompt.tolist()) == {467} and set(run.output.tolist()) == {256}
    assert run.ttft_s.mean() == pytest.approx(0.024)  # 24 ms
    assert np.nanmean(run.tpot_s) == pytest.approx(0.009)  # 9 ms: TPOT = (E2E - TTFT) / (256 - 1)
    # the same requests the accuracy table replays for that row (Poisson, seed 0)
    table_w = replay.row_workload(rows[f"{PREFIX}-qps4-ttft"])
    assert run.arrival_s.tolist() == [r.arrival_s for r in table_w.requests]
    assert w.framework == "trtllm" and w.topology.tp == 1


def test_fixed_lengths_make_every_group_mean_the_published_one(rows: dict[str, dict[str, str]]) -> None:
    # the fit reads BINS group means per run; with fixed lengths each equals the published mean
    from graphs.serving.planning.serving_fit import _observed  # the fit's own reading

    run, _ = sc.bench_run(rows, PREFIX, "16")
    obs = _observed(run)
    assert len(obs) == 2 * BINS
    ttft, itl = float(rows[f"{PREFIX}-qps16-ttft"]["value"]), float(rows[f"{PREFIX}-qps16-itl"]["value"])
    assert obs[:BINS] == pytest.approx([ttft] * BINS) and obs[BINS:] == pytest.approx([itl] * BINS)


def test_a_missing_load_point_is_named(rows: dict[str, dict[str, str]]) -> None:
    with pytest.raises(CostModelError, match=re.escape(f"no row '{PREFIX}-qps3-ttft'")):
        sc.bench_run(rows, PREFIX, "3")


def test_the_defaults_are_the_accuracy_tables_own(rows: dict[str, dict[str, str]]) -> None:
    """The uncalibrated column and the fit's starting point are the overheads the accuracy table's
    ``simulated`` replay prices the same row with: the engine column "tensorrt-llm (Triton
    tensorrtllm_backend)" names the ``triton-trtllm`` profile, whose request path is Triton's, not
    the corpus framework's (trtllm-serve's) terms."""
    from benchmarks.replay.rows import ENGINE
    from benchmarks.replay.run import overheads_for
    from graphs.serving.pricing.overheads import EngineOverheads

    row = rows[f"{PREFIX}-qps4-ttft"]
    assert ENGINE[row["engine"]] == "triton-trtllm"
    _, w = sc.bench_run(rows, PREFIX, "4")
    assert w.profile == "triton-trtllm"
    eng = w.engine
    want = EngineOverheads.for_framework(
        "triton-trtllm", max_num_seqs=eng.max_num_seqs, max_num_batched_tokens=eng.max_num_batched_tokens
    )
    assert overheads_for(w, "simulated") == want
    framework = EngineOverheads.for_framework(
        "trtllm", max_num_seqs=eng.max_num_seqs, max_num_batched_tokens=eng.max_num_batched_tokens
    )
    assert want != framework  # the two differ: the page priced these rows with the wrong one before
