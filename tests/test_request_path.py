"""The request path and the first token (graphs.serving.engines.knobs.EngineOverheads.request_path_s,
graphs.serving.sim.simulator), against hand derivations from the profiles' terms.

A lone request (arrivals 100 s apart: they never overlap) of ``P`` prompt tokens reaches an idle
replica, so it waits for no iteration: its TTFT is the request path, one prefill iteration of
``P`` tokens with its CPU terms, and the first token's streaming:

    TTFT = (r + p P + [prefix caching] h P) + s T_prefill + a + b + c P + d
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.engines import CPU_TERMS, REQUEST_PATH_TERMS, TERMS, engines, get_engine
from graphs.serving.engines.profile import SOURCED
from graphs.serving.pricing.overheads import EngineOverheads
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate
from graphs.serving.step.workload import as_workload

M = "llama-3.1-8b"
P, N = 1500, 8
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def w():
    return as_workload(M)


def _lone(w, ov, caching):
    reqs = [Request(i, 100.0 * i, P, N) for i in range(2)]
    return simulate(w, "h100", reqs, overheads=ov, engine=EngineConfig(enable_prefix_caching=caching))


@pytest.mark.parametrize("caching", [False, True])
def test_light_load_ttft_is_request_path_plus_prefill(w, caching):
    ov = get_engine("vllm").overheads()
    # vLLM V1's profile: r = 27 ms, p = 2 us/prompt token, h = 0.15 us/prompt token (caching on),
    # d = 20 us, a = 0, b = 3.4 us, c = 20 ns/token, kernel scale 1
    assert (ov.request_s, ov.per_prompt_token_s, ov.prefix_lookup_per_token_s) == (27e-3, 2e-6, 1.5e-7)
    assert (ov.iteration_s, ov.per_seq_s, ov.per_token_s, ov.output_token_s) == (0.0, 3.4e-6, 2e-8, 2e-5)
    # request path: 27 ms + 2 us x 1500 (= 3 ms) [+ 0.15 us x 1500 (= 0.225 ms)] = 30 or 30.225 ms
    path = 0.030225 if caching else 0.030
    assert ov.request_path_s(P, caching) == pytest.approx(path, rel=1e-12)
    # the prefill alone: the same lone request with no engine terms (kernels at their bound)
    t_prefill = _lone(w, EngineOverheads(), caching).per_request["ttft_s"]
    res = _lone(w, ov, caching)
    # + one iteration's CPU: a + b x 1 sequence + c x 1500 tokens = 0 + 3.4 us + 30 us; + d = 20 us
    cpu = 0.0 + 3.4e-6 + 2e-8 * 1500
    assert res.per_request["ttft_s"] == pytest.approx(path + t_prefill + cpu + 2e-5, rel=1e-9)
    # it reached the queue after the path and was scheduled at once (an idle replica)
    pr = res.per_request
    assert pr["queued_s"] - pr["arrival_s"] == pytest.approx(path, rel=1e-9)
    assert (pr["scheduled_s"] == pr["queued_s"]).all()
    # said once, with every request-path term
    assert (
        res.overheads.count("request path 27 ms + 2 us/prompt token (tokenisation) + 0.15 us/prompt token")
        == 1
    )
    assert "admitted at the next iteration boundary" in res.overheads


@pytest.mark.parametrize("engine", ["vllm", "trtllm"])
def test_light_load_ttft_from_the_profile_and_the_priced_prefill_step(w, engine):
    """At light load (a lone request on an idle replica) TTFT is the request path plus one
    prefill iteration and the first token's streaming, each term from the profile and the
    prefill step priced by the step model itself (``time(chunks=[(P, 0)])``, not a simulation):

        TTFT = (r + p P) + T_step(P) + (a + b x 1 + c P) + d

    vLLM V1: r = 27 ms (fitted on 195 calibration rows), p = 2 us, a = 0, b = 3.4 us,
    c = 20 ns, d = 20 us; TensorRT-LLM trtllm-serve: r = 22 ms (183 rows), p = 2 us, a = 0,
    b = 3.1 us, c = 10 ns, d = 20 us. Prefix caching off (no hashing term)."""
    from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step

    prof = get_engine(engine)
    ov = prof.overheads()
    terms = {"vllm": (27e-3, 3.4e-6, 2e-8), "trtllm": (22e-3, 3.1e-6, 1e-8)}[engine]
    assert (ov.request_s, ov.per_seq_s, ov.per_token_s) == terms
    assert (ov.per_prompt_token_s, ov.iteration_s, ov.output_token_s, ov.kernel_scale) == (
        2e-6,
        0.0,
        2e-5,
        1.0,
    )
    r, b, c = terms
    t_step = predicted_mixed_step(w, "h100", tp=1, predictor=Predictor()).time(chunks=[(P, 0)])
    # e.g. vLLM: 27 ms + 3 ms + T_step + (0 + 3.4 us + 30 us) + 20 us
    want = (r + 2e-6 * P) + t_step + (0.0 + b * 1 + c * P) + 2e-5
    res = _lone(w, ov, False)
    assert res.per_request["ttft_s"] == pytest.approx([want, want], rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.integers(16, 800), st.integers(1, 40)), min_size=1, max_size=10
    ),
    st.floats(0.0, 0.05),
    st.floats(0.0, 1e-5),
)
def test_first_scheduling_is_the_next_iteration_boundary(w, reqs, r, p):
    """A request is first scheduled at an iteration boundary at or after it reached the queue:
    at once on an idle replica, else when the running iteration ends (the scheduler has room:
    at most 10 requests, 256 sequences allowed; their prompts of at most 800 tokens, 8,000 and 10
    decode tokens within one iteration's 8,192-token budget, so no prompt waits for the budget:
    prompts of up to 3,000 tokens filled it, 2,192 + 3,000 + 3,000 = 8,192, and a fourth sent
    1 ms later rightly waited for a later iteration; and the pool)."""
    # distinct send times: requests reaching the queue at the very same instant are taken one
    # event at a time, so the first starts an iteration the others then wait for (a tie the
    # simulator does not batch; a real engine's would usually not coincide to the nanosecond)
    requests = [Request(i, t + 1e-3 * i, s, o) for i, (t, s, o) in enumerate(sorted(reqs))]
    res = simulate(w, "h100", requests, overheads=EngineOverheads(request_s=r, per_prompt_token_s=p))
    pr, tl = res.per_request, res.timeline
    starts = np.unique(tl["t"][tl["batch"] > 0])  # every iteration's start (one replica)
    path = pr["queued_s"] - pr["arrival_s"]
    assert path == pytest.approx(r + p * pr["prompt"], rel=1e-9, abs=1e-12)
    if len(np.unique(pr["queued_s"])) < len(pr["queued_s"]):
        return  # p S evened out two sends' gaps: the tie above
    for q, s in zip(pr["queued_s"], pr["scheduled_s"], strict=True):
        assert s >= q  # never before it reached the queue
        assert s in starts  # an iteration boundary
        later = starts[starts >= q]
        assert s == later[0]  # the first one: the running iteration's end, or at once if idle


def test_terms_are_registered_for_calibration():
    """calibrate serving fits TERMS; the request path's are among them, each with a range."""
    from graphs.serving.engines import TERM_RANGES

    assert set(REQUEST_PATH_TERMS) <= set(TERMS) and set(REQUEST_PATH_TERMS) <= set(CPU_TERMS)
    assert set(TERM_RANGES) == set(TERMS)
    ov = EngineOverheads().with_terms(per_prompt_token_s=1e-6, prefix_lookup_per_token_s=1e-7)
    assert EngineOverheads.from_dict(ov.to_dict()) == ov
    old = {
        k: v for k, v in ov.to_dict().items() if k not in ("per_prompt_token_s", "prefix_lookup_per_token_s")
    }
    assert EngineOverheads.from_dict(old).per_prompt_token_s == 0  # a file from before the terms
    with pytest.raises(CostModelError, match="per_prompt_token_s must be in"):
        EngineOverheads(per_prompt_token_s=-1e-6)
    with pytest.raises(CostModelError, match="prefix_lookup_per_token_s must be in"):
        EngineOverheads(prefix_lookup_per_token_s=math.inf)


def test_every_profile_term_has_a_source_or_says_fitted():
    for prof in engines():
        for term in CPU_TERMS:
            src = prof.sources[term]
            assert term in SOURCED and src, (prof.ref, term)
            if term in prof.fitted:
                assert src.startswith("fitted:"), (prof.ref, term, src)
            else:  # a published source, or said to be assumed / a stand-in
                assert src.startswith("ASSUMED") or re.search(r"[a-z]+[./][a-z]", src), (prof.ref, term, src)


def test_fitted_request_path_is_the_generated_fit():
    """The profiles' fitted request_s is what benchmarks/request_path_fit.py --write wrote."""
    doc = (ROOT / "docs" / "request_path.md").read_text()
    rows = dict(re.findall(r"^\| (\w+) \| `request_s` \| [^|]+ \| ([0-9.]+) s \|", doc, flags=re.M))
    for fw in ("vllm", "trtllm"):
        prof = get_engine(fw)
        assert "request_s" in prof.fitted
        assert prof.cpu_terms["request_s"] == pytest.approx(float(rows[fw]), abs=5e-4), fw
        assert "docs/request_path.md" in prof.basis


def test_calibrate_serving_recovers_a_planted_request_path(tmp_path, w):
    """`calibrate serving --terms request_s,per_prompt_token_s` on per-request CSVs generated
    with a planted fixed path of 12 ms and 4 us per prompt token (prompts of 100-3,000 tokens
    tell the two apart): both are fitted and come back near the planted values."""
    from graphs.cli import main
    from graphs.serving.planning.serving_fit import read_fit

    planted = EngineOverheads(request_s=12e-3, per_prompt_token_s=4e-6)
    rng = np.random.default_rng(7)
    files = []
    for k, rate in enumerate((1.0, 3.0, 6.0)):
        n = 80
        arr = np.cumsum(rng.exponential(1 / rate, n))
        reqs = [
            Request(i, float(arr[i]), int(rng.integers(100, 3000)), int(rng.integers(4, 16)))
            for i in range(n)
        ]
        pr = simulate(w, "h100", reqs, overheads=planted).per_request
        f = tmp_path / f"run{k}.csv"
        lines = ["arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s"]
        lines += [
            f"{float(a)!r},{int(p)},{int(o)},{float(t)!r},{float(e)!r}"
            for a, p, o, t, e in zip(
                pr["arrival_s"], pr["prompt"], pr["output"], pr["ttft_s"], pr["e2e_s"], strict=True
            )
        ]
        f.write_text("\n".join(lines) + "\n")
        files.append(str(f))
    out = tmp_path / "fit.json"
    argv = ["calibrate", "serving", *files, "--model", M, "--device", "h100", "-o", str(out), "--quiet"]
    assert main([*argv, "--terms", "request_s,per_prompt_token_s"]) == 0
    fit = read_fit(str(out))
    # both identified (a standard error each) and near the planted values; the two trade off
    # along their collinear direction (12.6 ms and 3.5 us came back: +5 % and -11 %, the fit's
    # own standard errors, 0.4 % and 0.8 %, are tighter than that)
    for t, tol in (("request_s", 0.10), ("per_prompt_token_s", 0.15)):
        got, want, se = getattr(fit.overheads, t), getattr(planted, t), fit.stderr[t]
        assert se is not None and t not in fit.at_bound, t
        assert got == pytest.approx(want, rel=tol), (t, got, want, se)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_a_result_stating_burstiness_is_replayed_with_it(tmp_path, burstiness):
    """`vllm bench serve --burstiness b` draws gamma gaps of shape b and scale 1 / (rate b)
    (vllm/benchmarks/serve.py, get_request: ``theta = 1.0 / (current_request_rate * burstiness)``,
    ``np.random.gamma(shape=burstiness, scale=theta)``): mean 1 / rate and coefficient of
    variation 1 / sqrt(b) (2 at b = 0.25, 1 for Poisson, 0.5 at b = 4). A result file stating
    b and no send times is replayed with such gaps."""
    import json

    from graphs.serving.planning.bench_results import read_results

    n, rate = 4000, 10.0
    doc = {
        "request_rate": rate,
        "burstiness": burstiness,
        "max_concurrency": None,
        "input_lens": [100] * n,
        "output_lens": [2] * n,
        "ttfts": [0.05] * n,
        "itls": [[0.01]] * n,
        "errors": [""] * n,
    }
    f = tmp_path / "run.json"
    f.write_text(json.dumps(doc))
    (run,) = read_results(str(f), seed=3)
    assert run.drawn
    gaps = np.diff(np.sort(run.arrival_s))
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.08)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_offered_load_of_a_run():
    """The light-load check's offered load (benchmarks/request_path_fit.offered_rps): a stated
    finite rate as it is; C clients by Little's law, C / E2E."""
    from benchmarks.request_path_fit import offered_rps

    base = {"request_rate": "", "concurrency": "8", "isl": "1000", "osl": "101", "value": "0.2"}
    ttft = {**base, "id": "x-ttft"}
    # a recovered E2E row: 8 clients / 2.2 s = 3.6364 req/s
    assert offered_rps(ttft, {"x-e2e": {"value": "2.2"}}) == pytest.approx(8 / 2.2, rel=1e-12)
    # fixed lengths, TPOT only: E2E = 0.2 + (101 - 1) x 0.02 = 2.2 s
    assert offered_rps(ttft, {"x-itl": {"value": "0.02"}}) == pytest.approx(8 / 2.2, rel=1e-12)
    # lengths on [int(0.8 x 101), 101] = [80, 101]: mean OSL 90.5, E2E = 0.2 + 89.5 x 0.02 = 1.99 s
    varied = {**ttft, "length_range_ratio": "0.8"}
    assert offered_rps(varied, {"x-tpot": {"value": "0.02"}}) == pytest.approx(8 / 1.99, rel=1e-12)
    rate = {**ttft, "request_rate": "4", "concurrency": ""}
    assert offered_rps(rate, {}) == 4.0
    assert offered_rps({**rate, "request_rate": "inf"}, {}) is None  # everything at once
    assert offered_rps(ttft, {}) is None  # no TPOT to read


def test_triton_rows_keep_their_own_request_path():
    """Triton's rows are priced by its sourced request path (0.77 ms), not TensorRT-LLM's fitted
    one: they neither enter the fit nor move; trtllm-bench's rows share trtllm's fitted term."""
    from benchmarks.request_path_fit import own_path

    row = {"source_kind": "trtllm_perf_overview", "engine_profile": ""}
    assert not own_path({**row, "engine": "tensorrt-llm (Triton tensorrtllm_backend)"}, "trtllm")
    assert own_path({**row, "engine": "tensorrt-llm"}, "trtllm")  # trtllm-bench
    assert own_path({**row, "engine": "nvidia-nim"}, "trtllm")
    assert own_path({"source_kind": "aiconfigurator_silicon", "engine": "vllm"}, "vllm")
