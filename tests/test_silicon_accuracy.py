"""``benchmarks/silicon_accuracy.py`` and :mod:`benchmarks.replay.silicon`: NVIDIA's measured serving runs turned into replayable rows.

The measured values are pinned to the aiconfigurator-core 0.12.0 wheel's
``aiconfigurator_core/systems/silicon_sample.csv``, line 917, read by hand: SGLang 0.5.1.post1,
Qwen/Qwen3-32B on H100 SXM, TP2, ISL/OSL 1024/128, concurrency 16: silicon_ttft_ms
840.8064807531249, silicon_tpot_ms 16.538571871875 (the same file in ai-dynamo/aiconfigurator:
``src/aiconfigurator/systems/silicon_sample.csv``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("aiconfigurator_core")

from benchmarks import replay
from benchmarks import silicon_accuracy as si
from benchmarks.replay import silicon
from costmodel.errors import CostModelError

RID = "qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp2_epnone_1"


@pytest.fixture(scope="module")
def sample() -> list[dict[str, str]]:
    return silicon.load_sample()


@pytest.fixture(scope="module")
def converted(sample: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    rows, _ = silicon.silicon_rows(sample)
    return {r["id"]: r for r in rows}


def test_row_pinned_to_the_sample(converted: dict[str, dict[str, str]]) -> None:
    ttft, tpot = converted[f"aicsil-{RID}-ttft"], converted[f"aicsil-{RID}-tpot"]
    assert float(ttft["value"]) == pytest.approx(0.8408064807531249, rel=1e-12)
    assert float(tpot["value"]) == pytest.approx(0.016538571871875, rel=1e-12)
    assert (ttft["metric"], tpot["metric"]) == ("ttft_mean_s", "tpot_mean_s")
    for r in (ttft, tpot):
        assert (r["engine"], r["model"], r["device"], r["tp"], r["isl"], r["osl"], r["concurrency"]) == (
            "sglang",
            "qwen3-32b",
            "h100-sxm",
            "2",
            "1024",
            "128",
            "16",
        )
        assert r["precision_weights"] == "" and r["precision_kv"] == "auto"


def test_a_wave_sends_every_request_at_once(converted: dict[str, dict[str, str]]) -> None:
    w = replay.row_workload(converted[f"aicsil-{RID}-tpot"])
    assert w.load == "batch" and len(w.requests) == 16
    assert {(r.arrival_s, r.prompt, r.output) for r in w.requests} == {(0.0, 1024, 128)}
    assert w.topology.tp == 2 and w.framework == "sglang"
    assert w.config.kv_dtype in (None, w.config.dtype)  # the checkpoint's KV dtype: bf16


def test_bound_replay_is_never_slower_than_the_engine(converted: dict[str, dict[str, str]]) -> None:
    """A roofline replay of the measured deployment: its TTFT and TPOT are at most the measured."""
    for metric in ("ttft", "tpot"):
        row = converted[f"aicsil-{RID}-{metric}"]
        assert 0 < replay.run_row(row, "bound") <= float(row["value"])


def test_rows_left_out_say_why(sample: list[dict[str, str]]) -> None:
    reasons = {silicon.eligible(r) for r in sample}
    assert None in reasons
    disagg = next(r for r in sample if r["mode"] == "disagg")
    assert "disaggregated" in (silicon.eligible(disagg) or "")
    moe = next(r for r in sample if r["model_path"] == "deepseek-ai/DeepSeek-R1" and r["mode"] == "agg")
    assert "does not map" in (silicon.eligible(moe) or "")
    rows, left = silicon.silicon_rows(sample)
    runs = sum(r["metric"] == "tpot_mean_s" for r in rows)  # a TTFT and a TPOT per run (and an E2E)
    assert sum(left.values()) + runs == len(sample)


def test_kv_dtype_and_fp8_scales_follow_the_checkpoint() -> None:
    """TensorRT-LLM's FP8/NVFP4 runs read NVIDIA's checkpoints (kv_cache_quant_algo FP8, static
    activation scales); vLLM quantises a bf16 checkpoint on line (dynamic scales, bf16 KV)."""
    gap = "source_file=/Users/x/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/q.csv; silicon_concurrency=8"
    base = {"gemm_quant_mode": "fp8", "model_path": "meta-llama/Llama-3.1-70B", "silicon_data_source": gap}
    assert silicon.kv_dtype({**base, "backend": "trtllm"}) == "fp8"
    assert silicon.fp8_scales({**base, "backend": "trtllm"}) == "static"
    assert silicon.kv_dtype({**base, "backend": "vllm"}) == "auto"
    assert silicon.fp8_scales({**base, "backend": "vllm"}) == "dynamic"
    # InferenceX's scripts set an FP8 cache in vLLM too (kv-cache-dtype: fp8)
    ix = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=8; wip=False"
    assert silicon.kv_dtype({**base, "backend": "vllm", "silicon_data_source": ix}) == "fp8"
    run = {"isl": "8192", "osl": "1024", "tp_size": "2"}
    # trtllm-serve (its profile: chunked prefill off by default) with the scripts' --max_num_tokens
    assert silicon.engine_settings({**base, **run, "backend": "trtllm", "silicon_data_source": ix}) == {
        "engine_profile": "trtllm",
        "engine_max_tokens": "16384",
    }
    # its vLLM scripts: no-enable-prefix-caching: true (V1 caches prefixes by default), in the
    # workflow's image vllm/vllm-openai:v0.10.2 for Llama-3.1-70B: vllm@0.10
    assert silicon.engine_settings({**base, **run, "backend": "vllm", "silicon_data_source": ix}) == {
        "engine_prefix_caching": "false",
        "engine_profile": "vllm@0.10",
    }
    nv = {
        "gemm_quant_mode": "fp8",
        "model_path": "nvidia/Llama-3.1-8B-Instruct-FP8",
        "backend": "vllm",
        "silicon_data_source": gap,
    }
    assert silicon.fp8_scales(nv) == "static"
    block = {
        "gemm_quant_mode": "fp8_block",
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "backend": "sglang",
        "silicon_data_source": gap,
    }
    assert silicon.fp8_scales(block) == "dynamic" and silicon.kv_dtype(block) == "auto"


def test_a_run_whose_concurrency_disagrees_is_left_out(sample: list[dict[str, str]]) -> None:
    row = next(
        r
        for r in sample
        if r["id"] == "qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_2000x500_c288_tp2_epnone_1"
    )
    assert row["batch_size"] == "144"  # the sample's own two numbers disagree
    assert "silicon_concurrency" in (silicon.eligible(row) or "")


def _line(camp: str, metric: str, measured: float, bound: float) -> replay.Line:
    """A replayed line of campaign ``camp`` whose ``bound`` (and ``simulated``) replay is ``bound``."""
    row = {"id": f"x-{camp}-{metric}-{measured}", "metric": metric, "value": str(measured), "campaign": camp}
    return replay.Line(row, {"bound": bound, "simulated": bound}, ())


def test_a_campaign_below_the_wave_roofline_is_not_a_wave() -> None:
    """More than half of a campaign's runs faster than a wave's roofline TTFT: its TTFT lines
    are left out, its TPOT lines kept."""
    line = _line
    lines = [
        line("a", "ttft_mean_s", 0.5, 1.0),
        line("a", "ttft_mean_s", 0.6, 1.0),
        line("a", "ttft_mean_s", 1.5, 1.0),
        line("a", "tpot_mean_s", 0.01, 0.008),
        line("b", "ttft_mean_s", 0.9, 1.0),  # one run of three below: noise, still a wave
        line("b", "ttft_mean_s", 1.2, 1.0),
        line("b", "ttft_mean_s", 1.3, 1.0),
    ]
    bad = si.not_waves(lines)
    assert bad == {"a": (2, 3)}
    judged = si.judge_ttft(lines, bad)
    assert [bool(ln.excluded) for ln in judged] == [True, True, True, False, False, False, False]


def test_a_campaign_below_the_tpot_roofline_is_not_compared() -> None:
    """More than half of a campaign's runs faster than their replay's roofline TPOT: its TPOT
    lines are left out with the reason, its TTFT lines kept; one run of three below is noise."""
    line = _line
    lines = [
        line("a", "tpot_mean_s", 0.009, 0.015),
        line("a", "tpot_mean_s", 0.010, 0.014),
        line("a", "tpot_mean_s", 0.030, 0.020),
        line("a", "ttft_mean_s", 0.5, 0.1),
        line("b", "tpot_mean_s", 0.009, 0.010),  # one run of three below: noise, compared
        line("b", "tpot_mean_s", 0.020, 0.010),
        line("b", "tpot_mean_s", 0.030, 0.010),
    ]
    bad = si.tpot_not_as_replayed(lines)
    assert bad == {"a": (2, 3)}
    judged = si.judge_tpot(lines, bad)
    assert [bool(ln.excluded) for ln in judged] == [True, True, True, False, False, False, False]
    assert judged[0].excluded.startswith("not loaded as replayed: 2 of its campaign's 3 runs")


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(SystemExit, match="--limit: 0 deployments not allowed"):
        si.main(["--limit", "0"])


def test_the_benchmark_client_follows_the_campaign_source(sample: list[dict[str, str]]) -> None:
    """InferenceX's database campaign (``source_file=2026-04-06.csv``: its DeepSeek-R1 FP4 SGLang
    8k/1k runs are InferenceX's line-up) draws lengths with ``--random-range-ratio 0.8``; the
    AIConfigurator team's own campaigns run fixed lengths. Both send 10 requests per client."""
    by_id = {r["id"]: r for r in sample}
    ix = by_id["2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_8192x1024_c128_tp8_ep1_2"]
    assert silicon.client(ix) is silicon.INFERENCEX and (
        silicon.INFERENCEX.per_client,
        silicon.INFERENCEX.range_ratio,
    ) == (
        10,
        0.8,
    )
    assert (
        "--num-prompts 10C" in silicon.INFERENCEX.text
        and "--random-range-ratio 0.8" in silicon.INFERENCEX.text
    )
    assert silicon.client(by_id[RID]) is silicon.AIC_EVAL and (
        silicon.AIC_EVAL.per_client,
        silicon.AIC_EVAL.range_ratio,
    ) == (
        10,
        1.0,
    )
    assert "--request-count 10C" in silicon.AIC_EVAL.text
    # the older dump of the same database has its layout (measured=, wip=) and is InferenceX's too
    older = next(r for r in sample if r["silicon_data_source"].startswith("source_file=2026-03-25.csv"))
    assert "wip=" in older["silicon_data_source"] and silicon.client(older) is silicon.INFERENCEX


def _client(row: dict[str, str]) -> dict[str, str]:
    return {**row, "source_kind": "aiconfigurator_silicon_client"}


def test_a_client_replay_sends_ten_requests_per_client(converted: dict[str, dict[str, str]]) -> None:
    w = replay.row_workload(_client(converted[f"aicsil-{RID}-tpot"]))
    assert w.load == "client" and w.concurrency == 16 and len(w.requests) == 160
    assert {(r.arrival_s, r.prompt, r.output) for r in w.requests} == {(0.0, 1024, 128)}
    ix = next(
        r
        for r in converted.values()
        if r["length_range_ratio"] == "0.8" and r["metric"] == "tpot_mean_s" and r["isl"] == "1024"
    )
    w = replay.row_workload(_client(ix))
    c = int(ix["concurrency"])
    assert len(w.requests) == 10 * c
    prompts, outputs = {r.prompt for r in w.requests}, {r.output for r in w.requests}
    # benchmark_serving.py: randint(int(0.8 L), L + 1): nothing outside, many values inside
    assert min(prompts) >= 819 and max(prompts) <= 1024 and len(prompts) > 50
    assert min(outputs) >= int(0.8 * int(ix["osl"])) and max(outputs) <= int(ix["osl"])


def test_one_client_replays_as_a_wave_of_one(converted: dict[str, dict[str, str]]) -> None:
    """One client sends its next request only after the last answer: each of its ten requests
    runs alone on the engine, exactly as a wave of one request does, from a burst or in the
    loop's steady state (three code paths, one answer)."""
    rid = "qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_2000x500_c1_tp2_epnone_2"
    for metric in ("ttft", "tpot"):
        row = converted[f"aicsil-{rid}-{metric}"]
        assert row["concurrency"] == "1"
        wave = replay.run_row(row, "bound")
        assert replay.run_row(_client(row), "bound") == pytest.approx(wave, rel=1e-9)
        assert replay.run_row({**row, "source_kind": silicon.STEADY}, "bound") == pytest.approx(
            wave, rel=1e-9
        )


def test_the_load_check_takes_one_run_per_deployment(converted: dict[str, dict[str, str]]) -> None:
    rows = [r for r in converted.values() if not replay.excluded(r)]  # runs with a stated load
    picks = si._check_picks(list(converted.values()))
    deployments = {silicon.deployment_key(r) for r in rows}
    assert len(picks) == len(deployments) and {silicon.deployment_key(r) for r, _ in picks} == deployments
    for tpot, ttft in picks:
        assert (tpot["metric"], ttft["metric"]) == ("tpot_mean_s", "ttft_mean_s")
        assert tpot["id"][: -len("tpot")] == ttft["id"][: -len("ttft")]
        concs = sorted(
            int(r["concurrency"])
            for r in rows
            if silicon.deployment_key(r) == silicon.deployment_key(tpot) and r["metric"] == "tpot_mean_s"
        )
        assert int(tpot["concurrency"]) == concs[(len(concs) - 1) // 2]


def test_the_check_refuses_other_modes() -> None:
    with pytest.raises(SystemExit, match="--check replays its own three loads"):
        si.main(["--check", "--modes", "bound"])


def test_inferencex_runs_replay_as_their_client_the_others_as_waves(
    converted: dict[str, dict[str, str]],
) -> None:
    kinds = {(r["client"], r["source_kind"]) for r in converted.values()}
    assert kinds == {(silicon.INFERENCEX.text, silicon.CLIENT), (silicon.AIC_EVAL.text, silicon.WAVE)}
    ix = next(r for r in converted.values() if r["source_kind"] == silicon.CLIENT)
    assert "2026-04-06.csv" in ix["campaign"] and replay.row_workload(ix).load == "client"


@pytest.mark.slow
def test_two_processes_give_the_lines_of_one(converted: dict[str, dict[str, str]]) -> None:
    rows = [
        r
        for r in converted.values()
        if r["engine_version"] in ("1.3.0rc1", "0.5.8.post1") and r["engine"] in ("tensorrt-llm", "sglang")
    ]
    one = si.evaluate(rows, ("bound",), jobs=1)
    two = si.evaluate(rows, ("bound",), jobs=2)
    assert len({silicon.deployment_key(r) for r in rows}) == 2
    assert [(ln.row["id"], ln.values) for ln in two] == [(ln.row["id"], ln.values) for ln in one]


def test_bad_jobs_are_refused() -> None:
    with pytest.raises(SystemExit, match="--jobs: 0 not allowed"):
        si.main(["--jobs", "0"])


def test_a_wave_runs_on_the_engine_the_sample_names(converted: dict[str, dict[str, str]]) -> None:
    """An SGLang run's wave replays under SGLang's own profile (1-token pages: its token pool,
    server_args.py page_size 1), not TensorRT-LLM's 32-token blocks; an InferenceX TensorRT-LLM
    run replayed as a wave (the load check) keeps what its scripts set (--max_num_tokens 16384,
    no chunked prefill), so its 8,192-token prompts fit one iteration."""
    w = replay.row_workload(converted[f"aicsil-{RID}-ttft"])
    assert w.engine.block_size == 1 and w.framework == "sglang"
    trt = next(
        r for r in converted.values()
        if r["source_kind"] == silicon.CLIENT and r["engine"] == "tensorrt-llm" and r["isl"] == "8192"
    )
    w = replay.row_workload({**trt, "source_kind": silicon.WAVE})
    assert w.load == "batch"
    assert (w.engine.max_num_batched_tokens, w.engine.enable_chunked_prefill) == (16384, False)
    assert w.engine.block_size == 32


def test_inferencex_trtllm_runs_with_its_scripts_settings(converted: dict[str, dict[str, str]]) -> None:
    """trtllm-serve --max_num_tokens 16384 without chunked prefill, an FP8 KV cache (InferenceX's
    70b_*_trt_slurm.sh); its vLLM runs keep 8,192 tokens per iteration, chunked."""
    trt = next(
        r for r in converted.values() if r["source_kind"] == silicon.CLIENT and r["engine"] == "tensorrt-llm"
    )
    w = replay.row_workload(trt)
    assert (w.engine.max_num_batched_tokens, w.engine.enable_chunked_prefill) == (16384, False)
    assert w.config.kv_dtype == "fp8_e4m3"
    vl = next(r for r in converted.values() if r["source_kind"] == silicon.CLIENT and r["engine"] == "vllm")
    w = replay.row_workload(vl)
    assert (w.engine.max_num_batched_tokens, w.engine.enable_chunked_prefill) == (8192, True)
    assert w.config.kv_dtype == "fp8_e4m3"
    # vLLM's own pool: gpu_memory_utilization 0.9 of the whole device in 16-token blocks, sized
    # by the simulator's ledger (vllm/config/cache.py defaults), not TensorRT-LLM's reservation
    assert (w.engine.num_blocks, w.engine.block_size, w.engine.gpu_memory_utilization) == (None, 16, 0.9)


def test_inferencex_trtllm_batch_waiting_where_its_scripts_set_it(
    converted: dict[str, dict[str, str]],
) -> None:
    """70b_*_trt_slurm.sh: ``batch_wait_max_tokens_ratio: 0.9``, ``batch_wait_timeout_iters: 20``
    only if ISL = OSL = 1024 and TP < 8; no batch waiting otherwise."""
    trt = [
        r for r in converted.values() if r["source_kind"] == silicon.CLIENT and r["engine"] == "tensorrt-llm"
    ]
    seen = set()
    for r in trt:
        e = replay.row_workload(r).engine
        on = r["isl"] == r["osl"] == "1024" and int(r["tp"]) < 8
        assert (e.batch_wait_timeout_iters, e.batch_wait_max_tokens_ratio) == ((20, 0.9) if on else (0, 0.0))
        seen.add(on)
        if len(seen) == 2 and r["isl"] != "1024":
            break
    assert seen == {True, False}


TRT8B = "meta_llama_llama_3_1_8b_instruct_meta_llama_llama_3_1_8b_instruct_h100_sxm_trtllm_agg_{}_c16_tp1_epnone_{}"


def _steady(row: dict[str, str]) -> dict[str, str]:
    return {**row, "source_kind": silicon.STEADY}


def test_a_steady_replay_is_its_client_in_the_loops_steady_state(
    converted: dict[str, dict[str, str]],
) -> None:
    """The client's ten requests per client, its engine rules, read over the middle rounds: the
    first C (the loop's start, genai-perf's warm-up) and the last C (the drain) are not read."""
    row = converted[f"aicsil-{RID}-tpot"]
    w = replay.row_workload(_steady(row))
    assert w.load == "steady" and w.concurrency == 16 and len(w.requests) == 160
    assert w.engine == replay.row_workload(_client(row)).engine
    run = replay.simulate_row(w, "bound")
    assert len(run.tpot) == 160 - 2 * 16
    assert "steady state" in " ".join(w.notes)


def test_the_steady_state_adds_the_other_clients_prefills_to_each_decode_window(
    converted: dict[str, dict[str, str]],
) -> None:
    """In the loop's steady state every other client sends once per cycle, so each request's
    decode window holds about ``C - 1`` prefills, one wave's about ``C / 2`` (those queued behind
    it): the steady state's TPOT exceeds one wave's, and the excess per request, ``(TPOT_steady -
    TPOT_wave) x (OSL - 1)``, is about ``C / 2 - 1`` prefills whatever the OSL (TensorRT-LLM
    1.0.0rc3, Llama-3.1-8B, H100, TP1, 16 clients, ISL 2048, OSL 128 and 512; the roofline, so no
    kernel fit is in it). One prefill by hand: ``2 x 8.03e9 x 2048`` FLOPs (Llama-3.1-8B's
    parameters, the model card) at H100 SXM's 989 TFLOP/s dense BF16 (the datasheet) = 33.3 ms,
    the causal attention's ``2 x 32 x 2048^2 x 4096`` FLOPs adding 1.1 ms."""
    prefill = (2 * 8.03e9 * 2048 + 2 * 32 * 2048**2 * 4096) / 989e12
    excess = {}
    for osl, idx in ((128, 13), (512, 15)):
        rid = "aicsil-" + TRT8B.format(f"2048x{osl}", idx) + "-tpot"
        row = converted[rid]
        assert (row["isl"], row["osl"], row["concurrency"]) == ("2048", str(osl), "16")
        wave, steady = replay.run_row(row, "bound"), replay.run_row(_steady(row), "bound")
        assert steady > wave
        excess[osl] = (steady - wave) * (osl - 1)
        assert 16 / 2 - 3 <= excess[osl] / prefill <= 16 / 2 + 1
    assert excess[512] == pytest.approx(excess[128], rel=0.3)


def test_campaigns_that_were_not_waves_replay_in_the_steady_state(
    converted: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gap-analysis campaign whose TTFTs mostly undercut one wave's roofline replays as its
    client's steady state, its TTFT left out with the reason; another stays one wave, compared."""
    rows = [r for r in converted.values() if r["engine_version"] in ("1.3.0rc1", "0.5.8.post1")]
    trt = {silicon.campaign(r) for r in rows if r["engine"] == "tensorrt-llm"}
    assert len(trt) == 1 and len({silicon.campaign(r) for r in rows}) == 2
    calls = []

    def fake(
        rows: list[dict[str, str]],
        modes: tuple[str, ...],
        jobs: int = 1,
        progress: object = None,
        executor: object = None,
    ) -> list:
        calls.append((modes, {r["source_kind"] for r in rows}))
        out = []
        for r in rows:
            m = float(r["value"])
            # the TensorRT-LLM campaign's TTFTs undercut the wave roofline (its TPOTs do not:
            # judge_tpot would leave those out)
            low = silicon.campaign(r) in trt and r["metric"] == "ttft_mean_s"
            out.append(replay.Line(r, {mode: m * (2.0 if low else 0.5) for mode in modes}, ()))
        return out

    monkeypatch.setattr(si, "evaluate", fake)
    lines, bad = si.sourced_lines(rows, replay.MODES)
    assert calls[0] == (("bound",), {silicon.WAVE}) and set(bad) == trt
    assert calls[1] == (
        replay.MODES,
        {silicon.WAVE, silicon.STEADY},
    )  # then every mode, the campaign relabelled
    for ln in lines:
        steady = silicon.campaign(ln.row) in trt
        assert ln.row["source_kind"] == (silicon.STEADY if steady else silicon.WAVE)
        assert bool(ln.excluded) == (steady and ln.row["metric"] in ("ttft_mean_s", "e2e_mean_s"))
        if ln.excluded:
            assert "steady state" in ln.excluded and "TPOT (kept)" in ln.excluded


FP8_8B = "aicsil-nvidia_llama_3_1_8b_instruct_fp8_nvidia_llama_3_1_8b_instruct_fp8_h200_sxm_vllm_agg_{}"


def test_the_vllm_fp8_runs_are_faster_than_their_stated_load_allows(
    converted: dict[str, dict[str, str]],
) -> None:
    """vLLM 0.12.0, nvidia/Llama-3.1-8B-Instruct-FP8 on H200, TP1, 64 clients, ISL 2000, OSL 100
    (the sample: silicon_ttft_ms 121.73, silicon_tpot_ms 9.74). In a closed loop each client
    sends once per cycle ``E2E = TTFT + 99 TPOT = 1.086 s``, so the engine takes in
    ``64 x 2000 / 1.086 s`` prompt tokens and each step of 9.74 ms carries
    ``n = 64 x 2000 x 0.00974 / 1.086 = 1148`` of them. Their linear layers alone, by hand:
    ``2 x 6.979e9`` FLOPs a token (Llama-3.1-8B's config.json: per layer q and o ``4096^2`` each,
    k and v ``4096 x 1024`` each, gate, up and down ``4096 x 14336`` each; 32 layers) at H200's
    1,979 TFLOP/s dense FP8 (the datasheet) = 8.10 ms; the 64 running sequences' KV reads, at
    least 2,000 tokens each of ``32 x 2 x 8 x 128 x 2`` B (bf16, vLLM 0.12's ``auto``) at
    4.8 TB/s = 3.50 ms (1.75 ms in FP8). One after the other, as the engine's forward runs them,
    11.6 ms (9.85 ms with an FP8 cache): above the 9.74 ms measured, so the runs had less prompt
    work per step than the sample states, and the replay's roofline TPOT lies above the measured
    too, the premise of :func:`benchmarks.silicon_accuracy.tpot_not_as_replayed`."""
    row = converted[FP8_8B.format("2000x100_c64_tp1_epnone_2") + "-tpot"]
    assert (row["isl"], row["osl"], row["concurrency"], row["tp"]) == ("2000", "100", "64", "1")
    ttft, tpot = 0.12173, float(row["value"])
    assert tpot == 0.00974
    n = 64 * 2000 * tpot / (ttft + 99 * tpot)
    assert n == pytest.approx(1148, abs=1)
    linears = 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert linears == 6_979_321_856
    gemm = n * 2 * linears / 1979e12
    kv_bf16 = 64 * 2000 * (32 * 2 * 8 * 128 * 2) / 4.8e12
    assert gemm == pytest.approx(8.10e-3, rel=0.01) and kv_bf16 == pytest.approx(3.50e-3, rel=0.01)
    assert gemm + kv_bf16 / 2 > tpot  # even with an FP8 cache
    assert replay.run_row(_steady(row), "bound") > gemm + kv_bf16 > tpot


def test_a_client_of_drawn_lengths_reserves_each_requests_own_blocks(
    converted: dict[str, dict[str, str]],
) -> None:
    """GUARANTEED_NO_EVICT reserves a request's own prompt + output blocks when it admits it.
    InferenceX's lengths are drawn on [0.8 L, L]: capping the running requests at the pool over
    the longest request (ISL + OSL = 1024 + 8192 = 9216 tokens, ceil(9216 / 32) = 288 blocks)
    held 10 of 128 clients back for a whole 8k-token decode (TTFT +2,460 % on this run, measured
    0.656 s); the replay leaves the admission to the simulator's per-request reservation (the
    profile's max_batch_size 2048 the only cap). Fixed lengths keep the cap (one length, the
    same rule). The pool is TensorRT-LLM's ``free`` rule over the vendor's 141 GB
    (:attr:`~graphs.serving.engines.KVPool.vendor_bytes`), about 118 fixed-length requests."""
    rid = "aicsil-2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x8192_c128_tp2_ep1_325-ttft"
    row = converted[rid]
    assert (row["isl"], row["osl"], row["concurrency"], row["length_range_ratio"]) == (
        "1024",
        "8192",
        "128",
        "0.8",
    )
    drawn = replay.row_workload(row)
    fixed = replay.row_workload({**row, "length_range_ratio": "1.0"})
    assert drawn.engine.num_blocks == fixed.engine.num_blocks and drawn.engine.block_size == 32
    assert fixed.engine.max_num_seqs == fixed.engine.num_blocks // 288 < 128  # floor(blocks / 288)
    assert drawn.engine.max_num_seqs == 2048  # tensorrt_llm BaseLlmArgs.max_batch_size
    # the mean request reserves about 0.9 x 9216 / 32 blocks: about 130 of them fit, all 128 clients
    assert not any("requests' blocks at once" in n for n in drawn.notes)


def test_a_queued_runs_reason_counts_its_held_requests_by_littles_law(
    converted: dict[str, dict[str, str]],
) -> None:
    """SGLang 0.5.8.post1, Qwen3-32B, H100 TP1, 1024/128, 16 clients (the sample, by hand):
    TTFT 6775.538 ms, TPOT 25.476 ms. S = 127 x 0.025476 = 3.2355 s; N = 16 x 3.2355 / (6.7755 +
    3.2355) = 5.17 requests in decode at once: the others waited for a finish, which the replay's
    one wave of 16 does not."""
    from benchmarks.replay import reasons

    rid = "aicsil-qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_sglang_agg_1024x128_c16_tp1_epnone_1-ttft"
    row = converted[rid]
    assert float(row["value"]) == pytest.approx(6.77553813289375, rel=1e-12)
    assert float(row["run_tpot_s"]) == pytest.approx(0.02547610364375, rel=1e-12)
    s = 127 * 0.02547610364375
    assert reasons.held_at_once(6.77553813289375, 0.02547610364375, 128, 16) == pytest.approx(
        16 * s / (6.77553813289375 + s), rel=1e-12
    )
    assert 16 * s / (6.77553813289375 + s) == pytest.approx(5.171, abs=1e-3)
    text = reasons.reason(row, -0.81)
    assert text.startswith("queue-dominated") and "about 5.2 of its 16 requests" in text
    assert reasons.reason(row, +0.81) == text  # a queue's reason holds either way
    # the TP2 runs of the 0.5.1 campaign (no queue) and the TPOT rows get none
    tp2 = converted[rid.replace("_tp1_", "_tp2_")]
    assert tp2["engine_version"] == "0.5.1.post1" and reasons.reason(tp2, -0.5) == ""
    assert reasons.reason(converted[rid[: -len("ttft")] + "tpot"], -0.5) == ""


def test_held_at_once_is_every_client_without_a_wait() -> None:
    from benchmarks.replay import reasons

    assert reasons.held_at_once(0.0, 0.02, 101, 64) == 64  # TTFT 0: every client in decode
    assert reasons.held_at_once(2.0, 0.02, 101, 64) == pytest.approx(32)  # S = 2 s = TTFT: half


def test_a_dynamo_run_without_a_stated_concurrency_is_left_out(sample: list[dict[str, str]]) -> None:
    """The sample's aggregated Dynamo runs (a dynamo_version in the source) that state a
    silicon_concurrency: 31, of which 29 differ from their batch_size (e.g. Qwen3-32B GB200 TP2,
    2000/500: batch_size 144, silicon_concurrency 288). Those that state none have an empty
    concurrency field in their id (``..._4000x1000_c_tp2_...``) and are not replayed: batch_size is
    not their load."""

    def field(r: dict[str, str], key: str) -> str | None:
        return next(
            (p.split("=", 1)[1] for p in r["silicon_data_source"].split("; ") if p.startswith(f"{key}=")),
            None,
        )

    dyn = [r for r in sample if r["mode"] == "agg" and field(r, "dynamo_version") is not None]
    stated = [r for r in dyn if field(r, "silicon_concurrency") is not None]
    assert len(stated) == 31
    assert sum(field(r, "silicon_concurrency") != r["batch_size"] for r in stated) == 29
    ex = next(
        r
        for r in stated
        if r["id"].startswith("qwen_qwen3_32b_qwen_qwen3_32b_gb200_trtllm_agg_2000x500_c288")
    )
    assert (ex["batch_size"], field(ex, "silicon_concurrency")) == ("144", "288")
    silent = [r for r in dyn if field(r, "silicon_concurrency") is None]
    dense = [r for r in silent if r["model_path"] in silicon.MODELS]
    assert len(dense) == 10 and all("_c_tp" in r["id"] for r in dense)
    assert {silicon.unstated_load(r) for r in dense} == {silicon.NO_LOAD}
    assert silicon.unstated_load(ex) is None and {silicon.eligible(r) for r in dense} == {None}
    rows, _ = silicon.silicon_rows(sample)
    listed = [r for r in rows if "_c_tp" in r["id"]]
    # listed (a TTFT, a TPOT and, their client sending fixed lengths, a recovered E2E per run),
    # left out of the medians
    assert len(listed) == 3 * 10
    assert {replay.excluded(r) for r in listed} == {silicon.NO_LOAD}
    assert {replay.evaluate(listed[:1], ("bound",), interval=False)[0].excluded} == {silicon.NO_LOAD}


def test_a_fixed_length_run_has_its_measured_mean_e2e(converted: dict[str, dict[str, str]]) -> None:
    """The pinned run (module doc; genai-perf or bench_serving with fixed lengths): mean E2E =
    840.8064807531249 ms + (128 - 1) x 16.538571871875 ms = 840.8064807531249 + 2100.398627728125
    = 2941.2051084812499 ms, recovered from the two means, with the reason beside it."""
    e2e = converted[f"aicsil-{RID}-e2e"]
    assert e2e["metric"] == "e2e_mean_s" and e2e["length_range_ratio"] == "1.0"
    assert float(e2e["value"]) == pytest.approx(2.9412051084812499, rel=1e-12)
    assert e2e["value_note"] == silicon.E2E_NOTE and silicon.E2E_NOTE in e2e["notes"]
    # the same deployment, lengths and load as its TTFT and TPOT rows: one shared replay
    base = converted[f"aicsil-{RID}-tpot"]
    assert replay.row_workload(e2e) == replay.row_workload(base)


def test_runs_with_varying_lengths_get_no_e2e(
    sample: list[dict[str, str]], converted: dict[str, dict[str, str]]
) -> None:
    """InferenceX's client draws lengths on [0.8 L, L]: the mean of (OSL_i - 1) TPOT_i is not
    (mean OSL - 1) x mean TPOT, so its runs have a TTFT and a TPOT row and no E2E row; every
    fixed-length client's run has all three."""
    ids = {k.rsplit("-", 1)[0] for k in converted}
    for rid in ids:
        row = converted[f"{rid}-tpot"]
        has = f"{rid}-e2e" in converted
        assert has == (row["length_range_ratio"] == "1.0"), rid
        if not has:
            assert row["client"] == silicon.INFERENCEX.text
    assert any(f"{rid}-e2e" in converted for rid in ids)
    assert any(f"{rid}-e2e" not in converted for rid in ids)


def test_recovered_e2e_refuses_what_is_not_a_run() -> None:
    # 100 ms + (11 - 1) x 10 ms = 200 ms; one output token: no TPOT term
    assert silicon.recovered_e2e_s(100.0, 10.0, 11) == pytest.approx(0.2, rel=1e-15)
    assert silicon.recovered_e2e_s(100.0, 10.0, 1) == pytest.approx(0.1, rel=1e-15)
    for bad in ((0.0, 10.0, 11), (100.0, -1.0, 11), (100.0, float("nan"), 11), (100.0, 10.0, 0)):
        with pytest.raises(CostModelError, match="recovered E2E"):
            silicon.recovered_e2e_s(*bad)


@pytest.mark.parametrize("kind", [silicon.WAVE, silicon.STEADY])
def test_the_replays_e2e_is_its_ttft_plus_the_decode(converted: dict[str, dict[str, str]], kind: str) -> None:
    """The replay's mean E2E obeys the identity the measured one is recovered by: fixed lengths,
    so mean E2E = mean TTFT + (OSL - 1) mean TPOT over the same read requests (to rounding)."""
    rows = {m: {**converted[f"aicsil-{RID}-{m}"], "source_kind": kind} for m in ("ttft", "tpot", "e2e")}
    got = {m: replay.run_row(r, "bound") for m, r in rows.items()}
    assert got["e2e"] == pytest.approx(got["ttft"] + 127 * got["tpot"], rel=1e-12)


def test_an_e2e_goes_with_its_runs_ttft() -> None:
    """A campaign whose TTFT is not compared loses its E2E lines too (E2E holds the TTFT)."""

    def line(metric: str, measured: float) -> replay.Line:
        row = {"id": f"x-{metric}", "metric": metric, "value": str(measured), "campaign": "a"}
        return replay.Line(row, {"bound": 1.0, "simulated": 1.0}, ())

    lines = [line("ttft_mean_s", 0.5), line("tpot_mean_s", 0.01), line("e2e_mean_s", 2.0)]
    judged = si.judge_ttft(lines, {"a": (1, 1)})
    assert [bool(ln.excluded) for ln in judged] == [True, False, True]
    assert judged[2].excluded.startswith("E2E = TTFT + (OSL - 1) TPOT holds this run's TTFT")


def test_sglang_runs_name_their_version_profile() -> None:
    """SGLang 0.5.1 predates PR 10975's mem_fraction_static rule: its runs replay on
    ``sglang@0.5.1``; 0.5.5 and later (and 0.5.10, which starts with "0.5.1") on the default."""
    gap = "source_file=/Users/x/aic-auto-gap-analysis/data/h100_sxm/sglang/0.5.1.post1/q.csv; silicon_concurrency=16"
    base = {"backend": "sglang", "silicon_data_source": gap, "isl": "1024", "osl": "128", "tp_size": "2"}
    for ver in ("0.5.1.post1", "0.5.1-rc0.pre1", "0.5.1"):
        assert silicon.engine_settings({**base, "backend_version": ver}) == {"engine_profile": "sglang@0.5.1"}
    for ver in ("0.5.8.post1", "0.5.10.post1", "0.5.5.post2", "nightly-dev", ""):
        assert silicon.engine_settings({**base, "backend_version": ver}) == {}
