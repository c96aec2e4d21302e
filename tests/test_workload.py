"""Build once, pass the result: an analysis resolves its model once and builds each graph once."""

from collections import Counter

import graphs.serving.step.workload as workload_mod
from graphs.serving import Workload, as_workload
from graphs.serving.analysis.disagg import disaggregated
from graphs.serving.analysis.phases import decode_report
from graphs.serving.step.compiled import clear_compiled_cache


def _count(monkeypatch):
    builds, lookups = Counter(), Counter()
    real_build, real_get = workload_mod.build_model, workload_mod.get_model

    def build(cfg, phase, **dims):
        builds[(phase, tuple(sorted((k, str(v)) for k, v in dims.items())))] += 1
        return real_build(cfg, phase, **dims)

    def get(name):
        lookups[name] += 1
        return real_get(name)

    monkeypatch.setattr(workload_mod, "build_model", build)
    monkeypatch.setattr(workload_mod, "get_model", get)
    return builds, lookups


def test_disaggregated_builds_each_graph_once(monkeypatch):
    builds, lookups = _count(monkeypatch)
    clear_compiled_cache()
    kw = dict(prompt=2048, output=256, decode_batch=8, link_bandwidth=50e9, rate=1.0)
    disaggregated("llama-2-7b", "b200", "h100", **kw)
    assert lookups == {"llama-2-7b": 1}  # was 3
    assert builds and max(builds.values()) == 1  # the same graph is never built twice (was 5 builds)


def test_a_shared_workload_serves_several_analyses(monkeypatch):
    builds, lookups = _count(monkeypatch)
    clear_compiled_cache()  # compiled steps are cached per process: start from none
    w = as_workload("tiny")
    first = decode_report(w, "h100", batch=4, ctx=128)
    again = decode_report(w, "h100", batch=4, ctx=128)
    # the step's graph and the memory ledger's (the report's fit check; cached per process, so a
    # test before this one in the process may have built it), each built at most once
    assert first == again and max(builds.values()) == 1 and sum(builds.values()) == w.builds <= 2
    assert as_workload(w) is w and isinstance(w, Workload)
    assert lookups == {"tiny": 1}
