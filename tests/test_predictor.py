"""The predictor of every analysis (graphs.serving.pricing.predictor) and the predicted simulator.

The bound predictor's tests run everywhere. The prediction tests read the measured corpus
(the [measured] extra, tens of seconds to load and fit): one module-scoped fixture builds
the predicted step once, and they are marked slow. The independent reference is
:func:`graphs.serving.pricing.predict.predict_step`, which prices one step's nodes straight from the
fits at the exact point (no table, no interpolation).
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step, token_grid
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import simulate
from graphs.serving.step.mixed import mixed_step

MODEL, DEVICE = "llama-3.1-8b", "h100"
#: the node field the default predictor prices with (the grey-box: ``corrected_s``)
FIELD = Predictor.of("vllm").field

#: between grid points (token counts above 8192: the grid steps by 2^(1/8); decode batch
#: above 256 and any context: 2^(1/2)) the log-log interpolation of a kernel's prediction stays
#: within this of predict_step's exact value (the largest deviation seen at the midpoints
#: below was 0.5 %; the GEMMs' tile staircase is < 1 % of their time there)
TOL_BETWEEN = 0.01
#: a whole prompt's attention above the dense 8192 tokens (unchunked or a larger budget): its
#: fits switch kernels between grid points, up to 4.1 % off seen at 40,000 tokens
TOL_CHUNK_BETWEEN = 0.05


# ------------------------------------------------------------------ everywhere: the bound predictor


def test_bound_predictor_is_the_mixed_step_itself():
    """The identity on today's numbers: the bound's step is the very MixedStep object."""
    assert predicted_mixed_step("tiny", "h100") is mixed_step("tiny", "h100")
    assert predicted_mixed_step("tiny", "h100", predictor=Predictor()) is mixed_step("tiny", "h100")


def test_bound_simulation_unchanged_by_the_predictor_argument():
    reqs = [Request(i, 0.01 * i, 40 + 7 * i, 5 + i) for i in range(6)]
    a = simulate("tiny", "h100", reqs)
    b = simulate("tiny", "h100", reqs, predictor=Predictor())
    assert a.e2e == b.e2e and a.ttft == b.ttft and a.iterations == b.iterations
    assert b.coverage is None and b.predictor == "roofline bound"


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"kind": "exact"}, "kind"),
        ({"kind": "calibrated", "framework": "tgi"}, "framework"),
        ({"kind": "calibrated"}, "framework"),
        ({"kind": "bound", "framework": "vllm"}, "framework"),
    ],
)
def test_bad_predictor_is_a_one_line_error(kw, field):
    with pytest.raises(CostModelError, match=field):
        Predictor(**kw)


def test_predictor_of_the_command_line():
    assert Predictor.of(None).is_bound
    # the default is the grey-box (the fits times their shape residuals: docs/accuracy.md's
    # held-out tables halve the fits' error with them); grey_box=False the fits alone
    assert Predictor.of("vllm") == Predictor("grey-box", "vllm")
    assert Predictor.of("trtllm").field == "corrected_s"
    assert Predictor.of("vllm", grey_box=False) == Predictor("calibrated", "vllm")


def test_token_grid_is_whole_then_geometric():
    g = token_grid()
    assert list(g[:8192]) == list(range(1, 8193)) and g[-1] == 2**17
    # beyond the dense part: round(2^(j/8)), j = 105 .. 136 (2^(105/8) = 8933.2 -> 8933)
    assert g[8192] == round(2 ** (105 / 8)) == 8933
    assert all(x == int(x) for x in g)
    assert all(b / a <= 2 ** (1 / 8) * (1 + 1 / a) for a, b in itertools.pairwise(g[8192:]))


# ------------------------------------------------------------------ on the measured corpus


@pytest.fixture(scope="module")
def step():
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    return predicted_mixed_step(MODEL, DEVICE, predictor=Predictor.of("vllm"))


def _exact(phase: str, **kw):
    from graphs.serving.pricing.predict import predict_step

    return predict_step(MODEL, DEVICE, phase, framework="vllm", **kw)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 8, 131, 700, 4099, 8933, 2**17])
def test_token_kernels_equal_predict_step_at_grid_points(step, n):
    """At a grid point the table holds predict_step's own node prediction (same rows, same fits);
    a small kernel's holds its share of the kernel floor, which the step takes where it exceeds the
    node's bound (predict_step's node time then)."""
    assert n in step.token_grid
    p = _exact("decode", batch=n, ctx=128)
    tab = dict(zip(step.kernel_names, step.tokens_table(n, n), strict=True))
    assert tab  # the GEMMs (projections, MLP, lm_head) are measured
    for name, t in tab.items():
        _same_kernel(t, p.nodes[name], 1e-9, name)


def _same_kernel(t, node, rel, what):
    """A table value against predict_step's node: equal for a measured kernel and for a small
    kernel whose floor binds; where a small kernel's bound binds, the floor share is below it."""
    if node["family"] is not None or node["source"] == "neighbour":
        assert t == pytest.approx(node[FIELD], rel=rel), what
    else:
        assert t <= node[FIELD] * (1 + rel), what


@pytest.mark.slow
@pytest.mark.parametrize(("batch", "ctx"), [(1, 2), (8, 1024), (77, 4096), (256, 32768), (362, 181)])
def test_decode_attention_equals_predict_step_at_grid_points(step, batch, ctx):
    dg, cg = step.decode_grid
    assert batch in dg and ctx in cg
    p = _exact("decode", batch=batch, ctx=ctx)
    for k, name in enumerate(step.attention_names):
        assert step.decode_attention(k, batch, ctx) == pytest.approx(p.nodes[name][FIELD], rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("c", [16, 1500, 8192, 2**15])
def test_chunk_attention_equals_predict_step_prefill_at_grid_points(step, c):
    p = _exact("prefill", batch=1, seq=c)
    for k, name in enumerate(step.attention_names):
        assert step.chunk_attention(k, c) == pytest.approx(p.nodes[name][FIELD], rel=1e-9)


@pytest.mark.slow
def test_between_grid_points_within_tolerance(step):
    """Geometric midpoints of grid segments (the farthest from both ends): each kernel's
    interpolated prediction is within TOL_BETWEEN of predict_step's at that exact point."""
    g = step.token_grid
    mids = [round(math.sqrt(a * b)) for a, b in itertools.pairwise(g[8192:])]
    for n in mids[::6]:
        p = _exact("decode", batch=n, ctx=128)
        for name, t in zip(step.kernel_names, step.tokens_table(n, n), strict=True):
            _same_kernel(t, p.nodes[name], TOL_BETWEEN, (n, name))
    for batch, ctx in ((3, 300), (12, 700), (45, 2900), (181, 5000), (300, 12000)):
        p = _exact("decode", batch=batch, ctx=ctx)
        got = step.decode_attention(0, batch, ctx)
        assert got == pytest.approx(p.nodes[step.attention_names[0]][FIELD], rel=TOL_BETWEEN)
    for c in (9000, 12000, 40000):
        p = _exact("prefill", batch=1, seq=c)
        got = step.chunk_attention(0, c)
        assert got == pytest.approx(p.nodes[step.attention_names[0]][FIELD], rel=TOL_CHUNK_BETWEEN)


def _clamped_total(p) -> float:
    """A predict_step total with each node at ``max(prediction, bound)`` (the simulator's rule)."""
    return sum(max(nd[FIELD], nd["bound_s"]) for nd in p.nodes.values())


@pytest.mark.slow
def test_single_request_is_prefill_plus_decode_steps_by_hand(step):
    """One request of P = 512 prompt tokens and O = 5 outputs, arriving at 0, alone:

    * iteration 1 prefills the whole prompt (one chunk, no cached prefix; 512 <= the 8192-token
      budget) and samples the first token: TTFT = predict_step(prefill, batch 1, seq 512);
    * iterations 2..O decode one token each at KV lengths P+1 .. P+O-1 (the token being
      processed included): E2E = TTFT + sum_i predict_step(decode, batch 1, ctx P+i).

    512 tokens and batch 1 are grid points; the decode contexts 513..516 lie between the
    context grid's 512 and 724, so the attention node is interpolated: the total agrees to 1e-3
    (attention is ~1 % of a batch-1 decode step at this context)."""
    P, n_out = 512, 5
    from graphs.serving.pricing.overheads import EngineOverheads

    # the kernels alone: no engine overheads (a predicted run otherwise takes vLLM's defaults)
    one = [Request(0, 0.0, P, n_out)]
    res = simulate(MODEL, DEVICE, one, predictor=Predictor.of("vllm"), overheads=EngineOverheads())
    ttft = _clamped_total(_exact("prefill", batch=1, seq=P))
    e2e = ttft + sum(_clamped_total(_exact("decode", batch=1, ctx=P + i)) for i in range(1, n_out))
    assert res.ttft.mean == pytest.approx(ttft, rel=1e-9)
    assert res.e2e.mean == pytest.approx(e2e, rel=1e-3)
    assert res.iterations == n_out
    # every second of the run is accounted for by what it rests on
    assert res.coverage is not None and res.coverage.total_s == pytest.approx(res.e2e.mean, rel=1e-12)
    assert res.coverage.share("measured") > 0.9  # bf16 GEMMs and attention of H100 vLLM: measured


_chunks = st.lists(st.tuples(st.integers(1, 8192), st.sampled_from([0, 0, 16, 1000, 30000])), max_size=3)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n_dec=st.integers(0, 512),
    mean_ctx=st.floats(2, 200_000),
    chunks=_chunks,
)
def test_bound_never_slower_than_predicted_iteration(step, n_dec, mean_ctx, chunks):
    """Any mixed iteration: predicted >= bound (each kernel is clamped to its own roofline)."""
    ch = [(float(c), float(p)) for c, p in chunks]
    bound = step.bound.time_sums(n_dec, n_dec * mean_ctx, ch)
    assert step.time_sums(n_dec, n_dec * mean_ctx, ch) >= bound * (1 - 1e-12)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=st.integers(1, 20_000),
    output=st.integers(1, 40),
    budget=st.sampled_from([512, 2048, 8192]),
)
def test_bound_never_slower_than_predicted_request(step, prompt, output, budget):
    """A lone request, chunked or not: its bound TTFT and E2E are never above the predicted ones
    (every iteration is the same batch in both modes, each at least its bound when predicted)."""
    from graphs.serving.sim.engine import EngineConfig

    eng = EngineConfig(max_num_batched_tokens=budget)
    reqs = [Request(0, 0.0, prompt, output)]
    b = simulate(MODEL, DEVICE, reqs, engine=eng)
    p = simulate(MODEL, DEVICE, reqs, engine=eng, predictor=Predictor.of("vllm"))
    assert b.iterations == p.iterations
    assert b.ttft.mean <= p.ttft.mean * (1 + 1e-12)
    assert b.e2e.mean <= p.e2e.mean * (1 + 1e-12)


@pytest.mark.slow
def test_simulate_predict_prints_the_coverage_line(step, capsys):
    from graphs.cli.main import main

    rc = main(
        [
            "simulate", MODEL, "--device", DEVICE, "--rate", "20", "--requests", "60",
            "--predict", "vllm", "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--quiet",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "predicted, not bound" in out
    assert "rests on:" in out and "measured h100-sxm vllm kernels" in out
    assert "clamped:" in out
