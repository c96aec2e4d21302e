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
    assert silicon.engine_settings({**base, **run, "backend": "vllm", "silicon_data_source": ix}) == {}
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


def test_a_campaign_below_the_wave_roofline_is_not_a_wave() -> None:
    """More than half of a campaign's runs faster than a wave's roofline TTFT: its TTFT lines
    are left out, its TPOT lines kept."""

    def line(camp: str, metric: str, measured: float, bound: float) -> replay.Line:
        row = {
            "id": f"x-{camp}-{metric}-{measured}",
            "metric": metric,
            "value": str(measured),
            "campaign": camp,
        }
        return replay.Line(row, {"bound": bound, "simulated": bound}, ())

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
    rows = list(converted.values())
    picks = si._check_picks(rows)
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
        rows: list[dict[str, str]], modes: tuple[str, ...], jobs: int = 1, progress: object = None
    ) -> list:
        calls.append((modes, {r["source_kind"] for r in rows}))
        out = []
        for r in rows:
            m = float(r["value"])
            low = silicon.campaign(r) in trt  # the TensorRT-LLM campaign's TTFTs undercut the wave roofline
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
