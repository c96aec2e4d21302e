"""vllm@0.12: V1 scheduling synchronously (async scheduling became vLLM's default only in
v0.14.0, https://github.com/vllm-project/vllm/releases/tag/v0.14.0), its CPU terms fitted to the
silicon sample's vLLM 0.12.0 runs (graphs/serving/engines/vllm012.py, benchmarks/sync_overhead_fit.py)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.replay import silicon
from benchmarks.replay.workload import overheads_profile, stated_settings
from graphs.serving.engines import get_engine


def test_scheduler_is_vllm_011s_and_the_cpu_terms_are_fitted() -> None:
    new, old = get_engine("vllm@0.12"), get_engine("vllm@0.11")
    fields = {f.name for f in dataclasses.fields(new)} - {"version", "label", "fitted", "sources", "cpu_fit"}
    # the same scheduler, pool rule, fused kernels and terms; the attention rule is read in 0.11.0's
    # source only (graphs/serving/engines/attention_kernels.py); the capture sizes are vllm PR 26016's
    # two-step rule, 0.11.1's on (vllm@0.11.1), not 0.11.0's 8 apart to the top
    for name in fields - {"moe_kernels", "attention_kernels", "cudagraph_sizes"}:
        assert getattr(new, name) == getattr(old, name), name
    assert new.cudagraph_sizes is get_engine("vllm@0.11.1").cudagraph_sizes is not old.cudagraph_sizes
    # the sampler's profile run (graphs/serving/engines/sampler_memory.py): PyTorch's in both,
    # FlashInfer's opt-in in 0.12.0
    assert (new.sampler, new.sampler_bytes_per_logit) == ("torch", 38.0)
    assert "VLLM_USE_FLASHINFER_SAMPLER" in new.sources["sampler"]
    # but not the same MoE kernel on Hopper: 0.12 vendored triton_kernels (vllm PR 28788), 0.11 ran Marlin
    assert (
        old.moe_kernel("w4a16_mxfp4", "Hopper") is not None
        and new.moe_kernel("w4a16_mxfp4", "Hopper") is None
    )
    # 0.12 states its synchronous terms as fitted; 0.11 (synchronous by default too) borrows them, ASSUMED
    assert new.fitted == ("iteration_s", "per_seq_s") and old.fitted == ()
    assert old.sources["iteration_s"].startswith("ASSUMED: vllm@0.12's")
    assert "sync_overhead_fit" in new.sources["iteration_s"]
    # request_s: vllm@1's value, as vllm@0.11 takes it (no 0.12.0 TTFT row entered its fit)
    assert new.cpu_terms["request_s"] == get_engine("vllm@1").cpu_terms["request_s"]
    assert new.sources["request_s"] == old.sources["request_s"]


def test_synchronous_cpu_time_per_iteration_by_hand() -> None:
    # docs/sync_overhead_fit.md: a = 1.36 ms, b = 46 us; per_token_s 20 ns (vllm@1's, assumed)
    ov = get_engine("vllm@0.12").overheads()
    assert ov.cpu_s(64, 64) == pytest.approx(1.36e-3 + 64 * 4.6e-5 + 64 * 2e-8, rel=1e-12)
    # vllm@1 (async, fitted to InferenceX's runs): 0 + 64 x 3.4 us + 64 x 20 ns
    assert get_engine("vllm@1").overheads().cpu_s(64, 64) == pytest.approx(64 * 3.4e-6 + 64 * 2e-8, rel=1e-12)
    p = get_engine("vllm@0.12")
    assert "vLLM 0.12.0 runs" in p.basis and "docs/sync_overhead_fit.md" in p.basis


def test_silicon_runs_of_vllm_0_11_and_0_12_name_their_profile() -> None:
    row = {"backend": "vllm", "backend_version": "0.12.0", "silicon_data_source": "gap-analysis"}
    assert silicon.engine_settings(row) == {"engine_profile": "vllm@0.12"}
    assert silicon.engine_settings({**row, "backend_version": "0.12.1"}) == {"engine_profile": "vllm@0.12"}
    assert silicon.engine_settings({**row, "backend_version": "0.11.2"}) == {"engine_profile": "vllm@0.11.1"}
    assert silicon.engine_settings({**row, "backend_version": "0.11.0"}) == {"engine_profile": "vllm@0.11"}
    # 0.14 to 0.20: vllm@1 without the CUDA-graph estimate (vllm@0.20, one of its releases)
    for ver in ("0.14.0", "0.19.0"):
        assert silicon.engine_settings({**row, "backend_version": ver}) == {"engine_profile": "vllm@0.20"}, (
            ver
        )
    # another (or no) version states nothing: the default profile; 0.1 is not 0.12's prefix
    for ver in ("0.21.0", "0.1", "0.120", "", "not stated"):
        assert silicon.engine_settings({**row, "backend_version": ver}) == {}, ver
    # an InferenceX run's prefix caching is off (its scripts), beside its release's profile
    ix = "source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=8; wip=False"
    assert silicon.engine_settings({**row, "backend_version": "", "silicon_data_source": ix}) == {
        "engine_prefix_caching": "false"
    }
    assert silicon.engine_settings({**row, "backend_version": "0.11.2", "silicon_data_source": ix}) == {
        "engine_profile": "vllm@0.11.1",
        "engine_prefix_caching": "false",
    }
    # the row's profile prices its CPU terms too (one engine per row)
    assert (
        overheads_profile({"source_kind": "aiconfigurator_silicon", "engine_profile": "vllm@0.12"})
        == "vllm@0.12"
    )
    assert overheads_profile({"source_kind": "aiconfigurator_silicon", "engine": "vllm"}) is None


@pytest.mark.parametrize("ref", ["vllm@0.12"])
def test_listed_by_the_engines_command(ref: str, capsys: pytest.CaptureFixture[str]) -> None:
    from graphs.cli.main import main

    assert main(["engines", ref]) == 0
    out = capsys.readouterr().out
    assert "vllm@0.12" in out and "async" in out.lower()


def test_a_stated_prefix_cache_setting_overrides_the_profile() -> None:
    assert stated_settings({"engine_prefix_caching": "false"}) == {"enable_prefix_caching": False}
    assert stated_settings({"engine_prefix_caching": "true"}) == {"enable_prefix_caching": True}
    assert stated_settings({}) == {}


def test_fitted_terms_are_the_generated_fit() -> None:
    """The profile's fitted CPU terms are what ``benchmarks/sync_overhead_fit.py --write`` wrote in
    docs/sync_overhead_fit.md, within 2 % (stored to two and three digits: per_seq_s 46 us against the
    page's latest refit, 45.9 us)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "sync_overhead_fit.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([0-9.e+-]+) s \|", doc, flags=re.M))
    assert set(rows) == {"iteration_s", "per_seq_s"}
    terms = get_engine("vllm@0.12").cpu_terms
    for term, v in rows.items():
        assert terms[term] == pytest.approx(float(v), rel=0.02), term


def test_a_release_names_the_profile_that_describes_it() -> None:
    from graphs.serving.engines import release_profile

    # the longest registered version that is a release prefix (0.5.1 before 0.5; 0.12 not 0.120)
    assert release_profile("vllm", "0.12.0").ref == "vllm@0.12"
    assert release_profile("vllm", "0.11.2").ref == "vllm@0.11.1"  # its releases (vllm PR 26016)
    assert release_profile("vllm", "0.11.0").ref == "vllm@0.11"
    assert release_profile("sglang", "0.5.1.post1").ref == "sglang@0.5.1"
    assert release_profile("sglang", "0.5.1-rc0.pre1").ref == "sglang@0.5.1"
    assert release_profile("sglang", "0.5.10.post1").ref == "sglang@0.5"
    assert release_profile("vllm", "0.10.2").ref == "vllm@0.10"
    # a profile's other release series: vllm@0.20 describes 0.14 to 0.20, not 0.21 (vllm@1's)
    assert release_profile("vllm", "0.14.0").ref == release_profile("vllm", "0.20.1").ref == "vllm@0.20"
    for name, release in (
        ("vllm", "0.120"),
        ("vllm", "0.140"),
        ("vllm", "0.21.0"),
        ("vllm", "0.9.2"),
        ("vllm", ""),
        ("nope", "1.0"),
        ("sglang", "nightly-dev"),
    ):
        assert release_profile(name, release) is None, (name, release)


def test_sglang_051_refuses_a_gpu_smaller_than_its_reserve() -> None:
    from costmodel.errors import CostModelError
    from graphs.serving.engines.sglang051 import sglang051_memory_defaults

    # below 35 GiB SGLang 0.5.1 reserves (2.8 + tp / 10) GiB: 2,969.6 MiB at tp 1
    assert sglang051_memory_defaults(3000)[1] == round((3000 - 2969.6) / 3000, 3)
    for mib, tp in ((2969.6, 1), (0, 1), (-5, 1), (float("nan"), 1), (81559, 0)):
        with pytest.raises(CostModelError, match=r"sglang@0\.5\.1 memory defaults"):
            sglang051_memory_defaults(mib, tp)
