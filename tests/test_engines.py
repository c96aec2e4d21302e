"""Engine profiles (graphs/serving/engines): sourced defaults, the registry, overrides, the KV-pool
rules, the CLI's engine against the accuracy page's, and no engine constant back in a benchmark."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.measured.corpus import FRAMEWORKS
from graphs.serving.engines import EngineProfile, KVPool, engine_names, engines, get_engine, register_engine
from graphs.serving.engines.vllm import vllm_capture_sizes

ROOT = Path(__file__).resolve().parent.parent


def test_trtllm_defaults_are_its_sources():
    t = get_engine("trtllm")
    # LLM API BaseLlmArgs: max_num_tokens 8192, max_batch_size 2048; KvCacheConfig tokens_per_block 32,
    # free_gpu_memory_fraction 0.90 (perf overview); GUARANTEED_NO_EVICT; trtllm-serve: no chunked prefill
    assert (t.max_num_batched_tokens, t.max_num_seqs, t.block_size) == (8192, 2048, 32)
    assert (t.kv_rule, t.kv_fraction, t.policy) == ("free", 0.90, "guaranteed_no_evict")
    assert t.enable_chunked_prefill is False and t.cudagraph_sizes is None  # enable_padding False
    assert (t.batch_wait_timeout_iters, t.batch_wait_max_tokens_ratio) == (0, 0.0)  # "all zeros"
    b = get_engine("trtllm-bench")  # throughput.py: --enable_chunked_context default True
    assert b.enable_chunked_prefill is True and b.framework == "trtllm"
    assert (
        dataclasses.replace(
            b,
            name="trtllm",
            enable_chunked_prefill=False,
            enable_prefix_caching=True,  # trtllm-serve's block reuse, on by default (below)
            label=t.label,
            sources=t.sources,
        )
        == t
    )
    # RoPE and the KV append run inside thop.attention: only norms, activations, the gather
    assert set(t.small_kernels) == {Role.NORM, Role.ACTIVATION, Role.EMBEDDING}


def test_trtllm_serve_prefix_caching_is_the_engine_default():
    # TensorRT-LLM's llm_args.py: KvCacheConfig.enable_block_reuse = Field(default=True); serve.py's
    # get_llm_args builds KvCacheConfig(free_gpu_memory_fraction=...) only, so trtllm-serve reuses
    # blocks by default, and the profile does
    t = get_engine("trtllm")
    src = t.sources["enable_prefix_caching"]
    assert t.enable_prefix_caching is True
    assert "enable_block_reuse default True" in src and "reuses KV blocks by default" in src
    # trtllm-bench and Triton's backend keep their own (off, assumed), not trtllm-serve's
    for ref in ("trtllm-bench", "triton-trtllm"):
        assert get_engine(ref).enable_prefix_caching is False, ref
        assert "trtllm-serve" not in get_engine(ref).sources["enable_prefix_caching"], ref
    # llm_args.py of the 1.x releases: CudaGraphConfig.enable_padding = Field(default=False)
    assert (
        t.cudagraph_sizes is None and "CudaGraphConfig.enable_padding False" in t.sources["cudagraph_sizes"]
    )


def test_vllm_and_sglang_defaults_are_their_sources():
    v = get_engine("vllm")
    # get_batch_defaults: 8192 tokens and 1024 sequences (OPENAI_API_SERVER, >= 70 GiB, not A100);
    # CacheConfig: block 16, gpu_memory_utilization 0.9 of the device; V1 chunks prefills, recomputes
    assert (v.max_num_batched_tokens, v.max_num_seqs, v.block_size) == (8192, 1024, 16)
    assert (v.kv_rule, v.kv_fraction, v.policy, v.enable_chunked_prefill) == (
        "device",
        0.9,
        "recompute",
        True,
    )
    ov = v.overheads(max_num_seqs=8)
    assert ov.cudagraph_sizes == (1, 2, 4, 8, 16)  # M = min(2 x 8, 512) = 16
    assert v.overheads().cudagraph_sizes[-3:] == (480, 496, 512)  # M = min(2 x 256, 512)
    assert v.small_kernels[Role.ROPE] == "layer" and v.small_kernels[Role.CACHE_WRITE] == "layer"
    s = get_engine("sglang")
    assert s.fitted == () and "assumed, not fitted" in s.basis
    # SGLang's own pool and scheduler (tests/test_engine_sglang.py): nothing stands in for them now
    assert (s.ref, s.kv_rule, s.block_size) == ("sglang@0.5", "static", 1)
    assert not any(
        src.startswith("ASSUMED")
        for k, src in s.sources.items()
        if k in ("block_size", "kv_rule", "kv_fraction")
    )


def test_every_profile_is_priced_and_sourced():
    from graphs.serving.pricing.predict import SMALL_KERNELS

    assert {p.framework for p in engines()} <= set(FRAMEWORKS)
    for p in engines():
        assert p.small_kernels, p.ref  # a missing fusion table would price nothing as a kernel
        assert all(p.sources.values())
    for fw in FRAMEWORKS:  # every corpus framework has a profile of its name: its kernels' engine
        assert SMALL_KERNELS[fw] == dict(get_engine(fw).small_kernels)


def test_registry_names_versions_and_refusals():
    assert {"vllm@1", "trtllm@1.0", "trtllm-bench@1.0", "sglang@0.4"} <= set(engine_names())
    assert get_engine("trtllm@1.0") is get_engine("trtllm")
    with pytest.raises(CostModelError, match=r"no engine profile 'tgi'; known: .*trtllm@1\.0.*vllm@1"):
        get_engine("tgi")
    with pytest.raises(CostModelError, match=r"no engine profile 'vllm@9'; vllm has: vllm@1"):
        get_engine("vllm@9")
    with pytest.raises(CostModelError, match="already registered"):
        register_engine(get_engine("vllm"))
    with pytest.raises(CostModelError, match="already defaults to version 1"):
        register_engine(dataclasses.replace(get_engine("vllm"), version="9"))
    with pytest.raises(CostModelError, match="framework 'tgi' is not in the measured corpus"):
        register_engine(dataclasses.replace(get_engine("vllm"), name="tgi", framework="tgi"))
    with pytest.raises(CostModelError, match="default 'block_size' has no source"):
        p = get_engine("vllm")
        dataclasses.replace(p, sources={k: v for k, v in p.sources.items() if k != "block_size"})
    # a release series is one profile's: a copy of vllm@0.20 keeps its releases, and is refused
    with pytest.raises(CostModelError, match=r"release series '0\.14' is already vllm@0\.20's"):
        register_engine(dataclasses.replace(get_engine("vllm@0.20"), version="0.99"))
    with pytest.raises(CostModelError, match="releases must be a tuple of release words"):
        dataclasses.replace(get_engine("vllm@0.20"), releases=("0 14",))
    with pytest.raises(CostModelError, match="'releases' has no source"):
        dataclasses.replace(get_engine("vllm"), releases=("0.99",))
    with pytest.raises(CostModelError, match="default 'cudagraph_memory' has no source"):
        dataclasses.replace(get_engine("vllm@0.20"), cudagraph_memory=get_engine("vllm").cudagraph_memory)
    from graphs.serving.engines import release_profile

    with pytest.raises(CostModelError, match="a release must be text"):
        release_profile("vllm", None)  # type: ignore[arg-type]


def test_overrides_are_checked():
    t = get_engine("trtllm").with_overrides(max_num_batched_tokens=16384)
    assert t.max_num_batched_tokens == 16384 and t.overridden == ("max_num_batched_tokens",)
    assert "given: max_num_batched_tokens 16384" in t.summary()
    with pytest.raises(
        CostModelError, match="engine setting 'max_tokens' not known; allowed: max_num_batched_tokens"
    ):
        get_engine("vllm").with_overrides(max_tokens=1)
    with pytest.raises(CostModelError, match=r"kv_fraction must be in \(0, 1\], got 1.5"):
        get_engine("vllm").with_overrides(kv_fraction=1.5)
    with pytest.raises(CostModelError, match=r"max_num_seqs must be a whole number in \[1, 1e\+06\], got 0"):
        get_engine("vllm").with_overrides(max_num_seqs=0)
    with pytest.raises(CostModelError, match="smaller than one KV block"):
        get_engine("trtllm").with_overrides(max_num_batched_tokens=16)
    with pytest.raises(CostModelError, match="batch waiting needs both"):
        get_engine("trtllm").with_overrides(batch_wait_timeout_iters=20)
    with pytest.raises(CostModelError, match="policy 'fifo' not allowed"):
        get_engine("vllm").with_overrides(policy="fifo")


def test_kv_pool_rules_by_hand():
    pool = KVPool(
        capacity_bytes=80e9,
        weights_bytes=16e9,
        activation_bytes_per_token=1000.0,
        kv_bytes_per_token=131072.0,
    )
    # free rule: floor(0.9 x (80e9 - 16e9 - 1000 x 8192) / (32 x 131072))
    #          = floor(57,592,627,200 / 4,194,304) = floor(13,731.15...) = 13,731
    assert get_engine("trtllm").kv_blocks(pool) == 13731
    # device rule, vLLM V1 (tests/test_vllm_memory.py): u of CUDA's total, d = 81,559 MiB - 79.22 GiB
    # = 85,520,809,984 - 85,061,827,297 = 458,982,687 B below the capacity, less R = 0.16 GiB =
    # 171,798,692 B: floor((0.9 x (80e9 - 458,982,687) - 16e9 - 1000 x 8192 - 171,798,692) / (16 x 131072))
    #            = floor(55,406,924,889.7 / 2,097,152) = floor(26,420.08...) = 26,420
    assert get_engine("vllm@0.11").kv_blocks(pool) == 26420
    # vLLM >= 0.21 also takes its CUDA graphs' estimate (tests/test_vllm_memory.py): at 1,024
    # sequences every one of the 51 capture sizes has a FULL graph too, 12,794,261 + 89,644 x (50 +
    # 50) = 21,758,661 B a layer; 32 layers = 696,277,152 B:
    # floor((55,406,924,889.7 - 696,277,152) / 2,097,152) = floor(26,088.07...) = 26,088
    assert get_engine("vllm").kv_blocks(dataclasses.replace(pool, layers=32)) == 26088
    cfg = get_engine("trtllm").engine_config(pool, request_tokens=2000)
    # guaranteed_no_evict: floor(13,731 / ceil(2000 / 32) = 63) = 217 requests reserved at once
    assert (cfg.num_blocks, cfg.max_num_seqs, cfg.block_size, cfg.enable_chunked_prefill) == (
        13731,
        217,
        32,
        False,
    )
    assert get_engine("trtllm").engine_config(pool, request_tokens=2000, max_running=100).max_num_seqs == 100
    assert get_engine("vllm").engine_config(None).num_blocks is None  # the simulator sizes it, same rule
    with pytest.raises(CostModelError, match="no room for a KV block"):
        get_engine("trtllm").kv_blocks(dataclasses.replace(pool, weights_bytes=80e9))
    with pytest.raises(CostModelError, match="does not fit"):
        get_engine("trtllm").engine_config(pool, request_tokens=10**9)


def test_capture_sizes_are_vllms():
    assert vllm_capture_sizes(8)[:5] == (1, 2, 4, 8, 16)
    assert len(vllm_capture_sizes()) == 3 + 31 + 17  # 1, 2, 4; 8..248 by 8; 256..512 by 16


def test_simulate_engine_is_the_accuracy_pages():
    """``simulate --engine trtllm-bench`` builds the EngineConfig the accuracy page replays a
    TensorRT-LLM v0.14 perf-overview row with (same model, device and lengths)."""
    from benchmarks import replay as sa
    from graphs.cli.engine_option import profile_of
    from graphs.cli.main import build_parser
    from graphs.cli.options import apply_dtypes
    from graphs.cli.simulate import request_of
    from graphs.serving.present.simulation_report import engine_config
    from models.resolver import resolve_model

    row = next(
        r for r in sa.load_rows(subset=None) if r["id"] == "trt014-llama-3.1-8b-h100-sxm-tp1-fp8-1000-1000"
    )
    page = sa.row_workload(row, quick=True).engine
    argv = ["simulate", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "trtllm-bench", "--rate", "1"]
    argv += ["--weight-dtype", "fp8", "--matmul-dtype", "fp8", "--kv-dtype", "fp8"]
    args = build_parser().parse_args([*argv, "--prompt", "fixed:1000", "--output", "fixed:1000"])
    cfg = apply_dtypes(resolve_model(args.model), args)
    req = request_of(args)
    assert engine_config(req, cfg, req.engine) == page
    assert page.block_size == 32 and page.num_blocks is not None and page.enable_chunked_prefill
    # InferenceX's trtllm-serve rows: the trtllm profile with only their scripts' --max_num_tokens
    args = build_parser().parse_args([*argv[:4], "--engine", "trtllm", "--max-num-batched-tokens", "16384"])
    prof = profile_of(args)
    assert prof.max_num_batched_tokens == 16384 and prof.enable_chunked_prefill is False
    assert prof.overridden == ("max_num_batched_tokens",)
    # no --engine: --predict's framework's profile, so --predict trtllm runs TensorRT-LLM's scheduler
    args = build_parser().parse_args(["simulate", "tiny", "--predict", "trtllm", "--rate", "1"])
    assert profile_of(args).ref == "trtllm@1.0"
    args = build_parser().parse_args(["simulate", "tiny", "--rate", "1"])
    assert profile_of(args).ref == "vllm@1" and not profile_of(args).overridden


def test_simulate_json_names_the_engine(capsys):
    import json

    from graphs.cli.main import main

    assert (
        main(
            ["simulate", "tiny", "--rate", "5", "--requests", "20", "--quiet", "--json", "--engine", "trtllm"]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"]["engine"] == "trtllm@1.0" and doc["engine"]["settings"]["block_size"] == 32
    assert "guaranteed_no_evict" in doc["overheads"]
    assert main(["simulate", "--engine", "list"]) == 0
    assert "trtllm-bench@1.0" in capsys.readouterr().out


#: engine facts that belong in a profile: a TensorRT-LLM constant by name, a KV fraction or block
#: size assigned as a default, or an EngineConfig built from literal numbers
_ENGINE_CONSTANT = re.compile(
    r"\bTRT_[A-Z_]+\s*=|\b(?:KV_FRACTION|MEM_FRACTION|GPU_MEMORY_UTILIZATION)\w*\s*=\s*0\.\d"
    r"|\b(?:block_size|BLOCK|tokens_per_block)\s*=\s*(?:16|32|64)\b|EngineConfig\([^)]*=\s*\d"
    r"|kv_cache_free_gpu_mem_fraction\s*=\s*0\.\d|gpu_memory_utilization\s*=\s*0\.\d"
)


_BENCHMARKS = sorted((ROOT / "benchmarks").rglob("*.py"))


@pytest.mark.parametrize("path", _BENCHMARKS, ids=lambda p: str(p.relative_to(ROOT / "benchmarks")))
def test_no_engine_constant_in_the_benchmarks(path):
    """A benchmark states only what its source states: an engine default lives in a profile (every
    module of benchmarks/, the shared replay included)."""
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if _ENGINE_CONSTANT.search(line)
    ]
    assert not hits, hits


def test_the_constant_check_catches_them():
    for line in ("TRT_BLOCK = 32", "KV_FRACTION = 0.9", "block_size=32", "EngineConfig(max_num_seqs=256)"):
        assert _ENGINE_CONSTANT.search(line), line
    assert not _ENGINE_CONSTANT.search('prof = get_engine("trtllm-bench")')


def test_profile_fields_are_checked():
    p = get_engine("vllm")
    with pytest.raises(CostModelError, match="kv_rule 'half' not allowed"):
        dataclasses.replace(p, kv_rule="half")
    with pytest.raises(CostModelError, match="small_kernels"):
        dataclasses.replace(p, small_kernels={Role.NORM: "fused"})
    with pytest.raises(CostModelError, match="request_s must be in"):
        dataclasses.replace(p, cpu_terms={**p.cpu_terms, "request_s": math.inf})
    assert isinstance(p, EngineProfile)


def test_calibrate_serving_takes_the_engine(tmp_path, capsys):
    """``calibrate serving --engine trtllm`` fits on TensorRT-LLM's scheduler (its policy kept in
    the fit, the profile named in the output)."""
    import json

    from graphs.cli.main import main

    rows = ["arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"]
    # near tiny's roofline (its prefill of 310 tokens takes 2.6 us, a decode step 0.14 us)
    rows += [f"{0.5 * i},{200 + 10 * i},{20},{3e-6},{2.1e-5}" for i in range(12)]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    argv = ["calibrate", "serving", str(tmp_path / "runs.csv"), "--model", "tiny", "--device", "h100"]
    argv += ["--engine", "trtllm", "--terms", "kernel_scale", "--holdout", "none", "--quiet", "--json"]
    assert main([*argv, "-o", str(tmp_path / "fit.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"]["engine"] == "trtllm@1.0"
    assert doc["overheads"]["policy"] == "guaranteed_no_evict"


def test_size_takes_the_engine(capsys):
    """``size --engine trtllm``: every (device, tp) runs TensorRT-LLM's scheduler, its pool sized
    for that pair; an engine config and a profile together are refused."""
    import json

    from graphs.cli.main import main
    from graphs.serving.planning.sizing import size_deployment
    from graphs.serving.sim.engine import EngineConfig

    argv = ["size", "tiny", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "1", "--devices", "h100"]
    argv += ["--tp", "1", "--no-disagg", "--requests", "20", "--quiet", "--json", "--engine", "trtllm"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"]["engine"] == "trtllm@1.0" and doc["winner"] is not None
    with pytest.raises(CostModelError, match="not both"):
        size_deployment(
            "tiny",
            rate=1,
            slo_ttft=1,
            slo_tpot=1,
            devices=["h100"],
            engine=EngineConfig(),
            profile=get_engine("trtllm"),
        )


def test_a_token_budget_below_one_block_is_refused_naming_both_flags(capsys):
    """``simulate --max-num-batched-tokens 3`` named the setting as the library spells it only;
    the refusal names the flag, the block it falls below and what to give (vLLM's block: 16)."""
    from graphs.cli import main

    assert main(["simulate", "tiny", "--max-num-batched-tokens", "3", "--requests", "5"]) == 2
    err = capsys.readouterr().err
    assert (
        "max_num_batched_tokens (--max-num-batched-tokens) 3 is smaller than one KV block "
        "(block_size, --block-size: 16 tokens): give at least 16" in err
    )
