"""vllm@0.12: V1 scheduling synchronously (async scheduling became vLLM's default only in
v0.14.0, https://github.com/vllm-project/vllm/releases/tag/v0.14.0), its CPU terms fitted to the
silicon sample's vLLM 0.12.0 runs (graphs/serving/engines/vllm012.py, benchmarks/sync_overhead_fit.py)."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.replay import silicon
from benchmarks.replay.workload import overheads_profile, stated_settings
from graphs.serving.engines import get_engine


def test_scheduler_is_vllm_011s_and_only_the_cpu_terms_differ() -> None:
    new, old, v1 = get_engine("vllm@0.12"), get_engine("vllm@0.11"), get_engine("vllm@1")
    fields = {f.name for f in dataclasses.fields(new)} - {
        "version",
        "label",
        "cpu_terms",
        "fitted",
        "sources",
        "cpu_fit",
    }
    for name in fields:
        assert getattr(new, name) == getattr(old, name), name
    changed = {t for t in new.cpu_terms if new.cpu_terms[t] != old.cpu_terms[t]}
    assert changed <= {"iteration_s", "per_seq_s"}
    # the request path is vllm@1's fitted one, from the same source (request_path_fit keeps its rows)
    assert new.cpu_terms["request_s"] == v1.cpu_terms["request_s"]
    assert new.sources["request_s"] == v1.sources["request_s"]
    assert set(new.fitted) == {"iteration_s", "per_seq_s", "request_s"}


def test_synchronous_cpu_time_is_not_hidden() -> None:
    # CPU time a + b n per iteration: under synchronous scheduling at least what async leaves exposed
    new, v1 = get_engine("vllm@0.12").cpu_terms, get_engine("vllm@1").cpu_terms
    for n in (1, 8, 64, 256):
        assert new["iteration_s"] + new["per_seq_s"] * n > v1["iteration_s"] + v1["per_seq_s"] * n
    p = get_engine("vllm@0.12")
    assert "vLLM 0.12.0 runs" in p.basis and "docs/sync_overhead_fit.md" in p.basis
    assert "sync_overhead_fit" in p.sources["iteration_s"]


def test_silicon_runs_of_vllm_0_12_name_the_synchronous_profile() -> None:
    row = {"backend": "vllm", "backend_version": "0.12.0", "silicon_data_source": "gap-analysis"}
    assert silicon.engine_settings(row) == {"engine_profile": "vllm@0.12"}
    # another vLLM version states nothing: the framework's profile
    assert silicon.engine_settings({**row, "backend_version": "0.11.2"}) == {}
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
    docs/sync_overhead_fit.md (to the digits typed)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "sync_overhead_fit.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([0-9.e+-]+) s \|", doc, flags=re.M))
    assert set(rows) == {"iteration_s", "per_seq_s"}
    terms = get_engine("vllm@0.12").cpu_terms
    for term, v in rows.items():
        assert terms[term] == pytest.approx(float(v), rel=0.02), term
