"""Predictions through every analysis (graphs.serving.pricing.priced, intervals, the search, sweep, plans).

Most tests here run everywhere: the corpus pricing (``_tabulate_point``) and the held-out error
quantiles are replaced by synthetic ones (each measured kernel at a fixed multiple of its own
roofline, some below it), so what is tested is the composition: the clamp, the sums, the
interpolation, the quantile factors and the analyses' plumbing. The independent reference is
:func:`costmodel.roofline.bound` of each node's cost at the point (the way
:func:`graphs.serving.pricing.predict.predict_step` prices a node's bound), never the compiled forms
under test. The corpus-backed checks are marked slow.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.graph import op_nodes
from costmodel.keys import Role
from costmodel.memo import BoundedCache
from costmodel.roofline import bound
from graphs.serving.pricing import predictor as predictor_mod
from graphs.serving.pricing.predict import kernel_row, unmeasured_basis
from graphs.serving.pricing.predictor import INTERVAL, Predictor, _Table
from graphs.serving.pricing.priced import PricedStep, mesh_axis, priced_step
from graphs.serving.step.compiled import compiled_step

#: the synthetic prediction of a measured kernel: this multiple of its own roofline time, by node
#: name (0.5: below the roofline, so the clamp must act; the rest above it)
FACTORS = (0.5, 1.3, 2.0, 1.1)
#: the synthetic held-out log-error quantiles: P10 -> x0.8, P90 -> x1.25, other q -> x1
Q_FACTOR = {0.1: 0.8, 0.9: 1.25}


def _factor(name: str) -> float:
    return FACTORS[zlib.crc32(name.encode()) % len(FACTORS)]


def _fake_tabulate(hw, pred, forms, points):
    """Every node whose rule and role the corpus measures (kernel_row) at FACTORS x its roofline."""
    from graphs.serving.step.mixed import node_time_expr

    out = []
    for n, nf in forms:
        d, syms = nf.node, nf.syms
        sub = {s: int(points[0, i]) for i, s in enumerate(syms)}
        p0 = {k: (float(v.subs(sub)) if isinstance(v, sympy.Basic) else v) for k, v in d["params"].items()}
        row = kernel_row(d, p0)
        if row is None:
            out.append(_Table(n, "bound", unmeasured_basis(d, p0), None))
            continue
        f = sympy.lambdify(syms, node_time_expr(d, hw), "numpy")
        roof = np.broadcast_to(np.asarray(f(*points.T), dtype=float), (len(points),))
        out.append(_Table(n, "measured", "", roof * _factor(n), row[0], "bfloat16"))
    return out


def _fake(mp: pytest.MonkeyPatch) -> None:
    """The corpus pricing and its held-out quantiles, synthetic (module doc), with every cache
    of priced tables and steps private to the test."""
    from graphs.serving.planning import design_search
    from graphs.serving.pricing import priced

    mp.setattr(predictor_mod, "_tabulate_point", _fake_tabulate)
    mp.setattr(predictor_mod, "_TABLES", BoundedCache("test_predictor_tables"))
    mp.setattr(
        Predictor,
        "log_factor",
        lambda self, device, family, key: 0.0 if self.quantile is None else math.log(Q_FACTOR[self.quantile]),
    )
    mp.setattr(priced, "_CACHE", BoundedCache("test_priced_step"))
    mp.setattr(design_search, "_COMPILED", BoundedCache("test_search_plan"))
    mp.setattr(predictor_mod, "_CACHE", BoundedCache("test_predicted_step"))


@pytest.fixture
def fake_corpus(monkeypatch):
    _fake(monkeypatch)


PRED = Predictor("calibrated", "vllm")


def _reference(model, device, phase, point, tp=1, q=None):
    """Sum over the graph's op nodes of max(factor x bound, bound), each node's bound from
    costmodel.roofline.bound of its cost at the point (times its repeat)."""
    cs = compiled_step(model, device, phase, tp=tp)
    g = cs.graph
    sub = {s: int(v) for s, v in zip(cs.forms.symbols, point, strict=True)}
    total = 0.0
    for n in op_nodes(g):
        d = g.nodes[n]
        repeat = d.get("repeat", 1)  # a whole number or the graph's own expression (no text parsed)
        rep = float(repeat.subs(sub)) if isinstance(repeat, sympy.Basic) else float(repeat)
        b = float(bound(d["cost"].subs(sub), cs.hardware).lower) * rep
        p = {k: (float(v.subs(sub)) if isinstance(v, sympy.Basic) else v) for k, v in d["params"].items()}
        f = _factor(str(n)) * (Q_FACTOR[q] if q else 1.0) if kernel_row(d, p) is not None else 1.0
        total += max(f * b, b)
    return total


# ------------------------------------------------------------------ the predictor's knobs


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        ({"kind": "calibrated", "framework": "vllm", "quantile": 1.0}, "quantile"),
        ({"kind": "calibrated", "framework": "vllm", "quantile": 0}, "quantile"),
        ({"kind": "calibrated", "framework": "vllm", "quantile": "p90"}, "quantile"),
        ({"kind": "bound", "quantile": 0.9}, "quantile"),
    ],
)
def test_quantile_refused_outside_the_open_unit_interval(kw, word):
    with pytest.raises(CostModelError, match=word):
        Predictor(**kw)


def test_interval_ends_and_labels():
    lo, hi = PRED.interval()
    assert (lo.quantile, hi.quantile) == INTERVAL == (0.1, 0.9)
    assert lo.point == PRED and hi.at(None) == PRED
    assert "P90 of their held-out errors" in hi.label
    assert Predictor().interval() == (Predictor(), Predictor())


def test_mesh_axis_spans_its_ends():
    a = mesh_axis(3, 1000)
    assert a[0] == 3 and a[-1] == 1000 and np.all(np.diff(a) > 0)
    assert set(range(4, 17)) <= set(a.tolist())  # every whole number up to 16


# ------------------------------------------------------------------ node roles, not op names


def test_measured_kernels_are_selected_by_role_and_rule():
    g = compiled_step("llama-3.1-8b", "h100", "decode", tp=2).graph
    at = {"B": 4, "ctx": 100}
    fams = {}
    for n in op_nodes(g):
        d = g.nodes[n]
        sub = {
            s: at[str(s)]
            for s in set().union(
                *(v.free_symbols for v in d["params"].values() if isinstance(v, sympy.Basic))
            )
        }
        p = {k: (float(v.subs(sub)) if isinstance(v, sympy.Basic) else v) for k, v in d["params"].items()}
        r = kernel_row(d, p)
        fams[str(d["role"])] = fams.get(str(d["role"]), set()) | {None if r is None else r[0]}
    assert fams[Role.LINEAR] == {"gemm"} and fams[Role.HEAD] == {"gemm"}
    assert fams[Role.ATTENTION] == {"generation_attention"}
    # the all-reduce is measured, the logits' all-gather (also a collective) is not
    assert fams[Role.COLLECTIVE] == {"all_reduce", None}
    assert fams[Role.NORM] == {None}


def test_a_gemm_in_another_role_is_not_a_measured_kernel():
    d = {"op": "gemm", "role": Role.NORM}
    p = {"M": 4.0, "N": 8.0, "K": 8.0, "dtype": "bf16"}
    assert kernel_row(d, p) is None
    assert kernel_row({**d, "role": Role.LINEAR}, p) == (
        "gemm",
        {"m": 4.0, "n": 8.0, "k": 8.0, "dtype": "bfloat16"},
    )


def test_mla_attention_of_another_shape_is_bound_with_its_reason():
    """DeepSeek-V3's latent attention (512 + 64 latent, 128 heads) is the corpus's MLA kernel
    (``generation_mla``); a latent of another width is not measured: bound, said."""
    g = compiled_step("deepseek-v3", "h100", "decode").graph
    (n,) = [n for n in op_nodes(g) if g.nodes[n]["role"] == Role.ATTENTION][:1]
    d = g.nodes[n]
    p = {
        k: (float(v.subs({s: 8 for s in v.free_symbols})) if isinstance(v, sympy.Basic) else v)
        for k, v in d["params"].items()
    }
    assert kernel_row(d, p)[0] == "generation_mla"
    other = {**p, "head_dim": 256 + 64, "v_head_dim": 256}  # a 256-wide latent
    assert kernel_row(d, other) is None
    assert "MLA" in unmeasured_basis(d, other)


# ------------------------------------------------------------------ the priced step


@pytest.mark.parametrize(
    ("phase", "point"),
    [("decode", (1, 128)), ("decode", (37, 5000)), ("prefill", (1, 300)), ("prefill", (2, 64))],
)
def test_priced_step_is_the_clamped_sum_of_its_nodes(fake_corpus, phase, point):
    ps = priced_step("llama-3.1-8b", "h100", phase, predictor=PRED)
    assert isinstance(ps, PricedStep)
    ref = _reference("llama-3.1-8b", "h100", phase, point)
    assert ps.step(*point) == pytest.approx(ref, rel=1e-9)


def test_priced_step_interpolates_two_varying_dims_within_a_percent(fake_corpus):
    """Decode attention over (batch, ctx) varies in both: priced on a mesh, log-bilinear between."""
    ps = priced_step("llama-3.1-8b", "h100", "decode", predictor=PRED)
    b = np.array([1, 3, 50, 200, 333])
    c = np.array([100, 777, 4096, 20000, 90000])
    got = ps.step_array(b, c)
    for i in range(len(b)):
        assert got[i] == pytest.approx(_reference("llama-3.1-8b", "h100", "decode", (b[i], c[i])), rel=0.01)


def test_quantile_ends_scale_the_measured_kernels(fake_corpus):
    lo, hi = PRED.interval()
    pt = (16, 2048)
    vals = [priced_step("llama-3.1-8b", "h100", "decode", predictor=p).step(*pt) for p in (lo, PRED, hi)]
    assert vals[0] <= vals[1] <= vals[2]
    assert vals[2] == pytest.approx(_reference("llama-3.1-8b", "h100", "decode", pt, q=0.9), rel=1e-9)
    assert vals[0] == pytest.approx(_reference("llama-3.1-8b", "h100", "decode", pt, q=0.1), rel=1e-9)


def test_coverage_splits_the_priced_seconds(fake_corpus):
    ps = priced_step("llama-3.1-8b", "h100", "decode", predictor=PRED)
    b, c = np.array([1, 8, 64]), np.array([512, 4096, 4096])
    cov = ps.coverage_array(b, c)
    assert cov.total_s == pytest.approx(float(ps.step_array(b, c).sum()), rel=1e-12)
    assert cov.measured_s > 0 and cov.bound_s > 0
    assert predictor_mod.CLAMPED in cov.bounds  # the 0.5x kernels were clamped to their bound


def test_vectorised_predicted_search_equals_its_points_one_at_a_time(fake_corpus):
    """The whole grid priced at once (kernels of one varying dim priced at each distinct value,
    decode attention on a mesh) against every point as its own block of one (each kernel priced
    at that point alone): the same frontier, every column within 1e-12. Batches per micro-batch
    and contexts are powers of two, nodes of the attention mesh, where its interpolation is exact."""
    from graphs.serving.planning.design_search import METRICS, search

    kw = dict(
        devices=["h100"],
        tp=[2],
        pp=[1, 2],
        microbatches=[1, 2],
        batches=[1, 4, 16, 64],
        ctxs=[1024, 16384],
        energy=True,
        predictor=PRED,
    )
    whole, one = search("llama-3.1-8b", **kw), search("llama-3.1-8b", block=1, **kw)
    assert (whole.points, whole.valid, whole.fits) == (one.points, one.valid, one.fits) == (32, 28, 28)
    key = ("plan", "batch", "ctx")
    a = {tuple(r[k] for k in key): r for r in whole.frontier}
    b = {tuple(r[k] for k in key): r for r in one.frontier}
    assert a.keys() == b.keys() and len(a) > 3
    for k, r in a.items():
        for m in METRICS:
            assert r[m] == pytest.approx(b[k][m], rel=1e-12, abs=0), (k, m)


# ------------------------------------------------------------------ bound <= predicted, everywhere

_MODELS = st.sampled_from(["llama-3.1-8b", "qwen2.5-7b", "mistral-7b"])
_DEVICES = st.sampled_from(["h100", "a100", "b200", "h200"])


_CONFIGS = dict(
    model=_MODELS,
    device=_DEVICES,
    batch=st.integers(1, 512),
    ctx=st.integers(1, 32768),
    tp=st.sampled_from([1, 2]),
    q=st.sampled_from([None, 0.1, 0.9]),
)


@settings(max_examples=4)
@given(**_CONFIGS)
def test_bound_is_never_slower_than_a_prediction(model, device, batch, ctx, tp, q):
    """Step, TTFT, TPOT and throughput: the bound's are never worse than a prediction's, at any
    quantile (the optimistic end included: each kernel is clamped to its roofline). Four
    configurations here; the slow twin below draws twenty more."""
    _bound_never_slower(model, device, batch, ctx, tp, q)


@pytest.mark.slow
@settings(max_examples=20)
@given(**_CONFIGS)
def test_bound_is_never_slower_than_a_prediction_more_configurations(model, device, batch, ctx, tp, q):
    """The same property at twenty more configurations (about a second each)."""
    _bound_never_slower(model, device, batch, ctx, tp, q)


def _bound_never_slower(model, device, batch, ctx, tp, q):
    mp = pytest.MonkeyPatch()
    try:
        _fake(mp)
        pred = PRED.at(q)
        for phase, pt in (("decode", (batch, ctx)), ("prefill", (1, ctx))):
            b = compiled_step(model, device, phase, tp=tp).step(*pt)
            p = priced_step(model, device, phase, tp=tp, predictor=pred).step(*pt)
            assert p >= b * (1 - 1e-12)
        from graphs.serving.planning.design_search import search

        kw = dict(devices=[device], batches=[batch, max(1, batch // 2)], ctxs=[ctx], tp=[tp])
        rb = search(model, **kw)
        rp = search(model, predictor=pred, **kw)
        fb = {(r["plan"], r["batch"]): r for r in rb.frontier}
        for r in rp.frontier:  # every predicted frontier point against the bound at the same point
            o = fb.get((r["plan"], r["batch"]))
            if o is not None:
                assert r["tpot_s"] >= o["tpot_s"] * (1 - 1e-12) and r["ttft_s"] >= o["ttft_s"] * (1 - 1e-12)
                assert r["tokens_per_s_per_device"] <= o["tokens_per_s_per_device"] * (1 + 1e-12)
        from graphs.serving.analysis.sweeps import sweep

        sk = dict(devices=[device], batches=[batch, max(1, batch // 2)], ctxs=[ctx, max(1, ctx // 3)], tp=tp)
        sb, sp = sweep(model, **sk), sweep(model, predictor=pred, **sk)  # every point, not only frontiers
        assert np.all(sp.columns["tpot_s"] >= sb.columns["tpot_s"] * (1 - 1e-12))
        assert np.all(
            sp.columns["tokens_per_s_per_device"] <= sb.columns["tokens_per_s_per_device"] * (1 + 1e-12)
        )
        # the simulator's mixed iteration: decodes at ctx and one prefill chunk
        from graphs.serving.pricing.predictor import predicted_mixed_step
        from graphs.serving.step.mixed import mixed_step

        it = (batch, float(batch * ctx), [(float(min(ctx, 2048)), 0.0)])
        t_b = mixed_step(model, device, tp=tp).time_sums(*it)
        t_p = predicted_mixed_step(model, device, tp=tp, predictor=pred).time_sums(*it)
        assert t_p >= t_b * (1 - 1e-12)
    finally:
        mp.undo()


def test_sweep_and_disagg_predicted_never_faster(fake_corpus):
    from graphs.serving.analysis.disagg import disaggregated
    from graphs.serving.analysis.specdec import speculative_decoding
    from graphs.serving.analysis.sweeps import sweep

    kw = dict(devices=["h100"], batches=[1, 7, 64], ctxs=[100, 4096])
    b, p = sweep("llama-3.1-8b", **kw), sweep("llama-3.1-8b", predictor=PRED, **kw)
    assert np.all(p.columns["tpot_s"] >= b.columns["tpot_s"] * (1 - 1e-12))
    assert p.coverage is not None and b.coverage is None
    dk = dict(prompt=2048, output=128, decode_batch=8, link_bandwidth=50e9)
    db = disaggregated("llama-3.1-8b", "h100", "h100", **dk)
    dp = disaggregated("llama-3.1-8b", "h100", "h100", predictor=PRED, **dk)
    assert dp.ttft.ttft_s >= db.ttft.ttft_s and dp.tpot_s >= db.tpot_s
    sb = speculative_decoding("llama-3.1-8b", "llama-3.2-1b", "h100", alpha=0.7, k_max=4)
    sp = speculative_decoding("llama-3.1-8b", "llama-3.2-1b", "h100", alpha=0.7, k_max=4, predictor=PRED)
    assert all(a.step_s >= c.step_s for a, c in zip(sp.rows, sb.rows, strict=True))


def test_search_rank_by_pessimistic_prices_the_p90_end(fake_corpus):
    from graphs.serving.planning.design_search import search

    kw = dict(devices=["h100"], batches=[4, 32], ctxs=[2048])
    pt = search("llama-3.1-8b", predictor=PRED, **kw)
    pe = search("llama-3.1-8b", predictor=PRED, rank_by="pessimistic", **kw)
    assert "P90" in pe.predictor and pt.coverage is not None
    import json

    from graphs.cli.common import dump

    doc = json.loads(dump(pe))  # what search --json prints: the coverage included
    assert doc["coverage"]["measured_s"] == pytest.approx(pe.coverage.measured_s)
    by = {(r["plan"], r["batch"]): r["tpot_s"] for r in pt.frontier}
    for r in pe.frontier:
        if (r["plan"], r["batch"]) in by:
            assert r["tpot_s"] >= by[(r["plan"], r["batch"])]
    with pytest.raises(CostModelError, match="rank_by"):
        search("llama-3.1-8b", rank_by="best", **kw)
    with pytest.raises(CostModelError, match="predictor"):
        search("llama-3.1-8b", rank_by="pessimistic", **kw)


def test_simulated_interval_brackets_the_point(fake_corpus):
    from graphs.serving.sim.intervals import simulate_interval
    from graphs.serving.sim.requests import synthetic

    reqs = synthetic(60, rate=5.0, prompt="fixed:300", output="fixed:40", seed=1)
    iv = simulate_interval("llama-3.1-8b", "h100", reqs, predictor=PRED)
    for label, (lo, hi) in iv.ranges.items():
        v = iv.value(label)
        assert lo <= v * (1 + 1e-9) and v <= hi * (1 + 1e-9), label
    assert iv.high.tpot.mean > iv.low.tpot.mean  # x1.25 against x0.8 on every measured kernel
    # the interval to plan with holds the kernels' one and the shipped table's conformal band
    # (graphs.serving.sim.served_errors) around the point, for the metrics the tables calibrate
    from graphs.serving.sim.served_errors import served_errors

    assert iv.deployment == ("vllm", "h100-sxm", False)
    table = served_errors()  # a regime-conditioned method takes the run's own queue share
    share = iv.point.queue_share if table.conditioned("TPOT") else None
    band, _ = table.like("TPOT", "vllm", "h100-sxm", False, share)
    lo, hi = iv.calibrated["TPOT mean s"]
    k_lo, k_hi = iv.ranges["TPOT mean s"]
    p = iv.value("TPOT mean s")
    assert lo == pytest.approx(min(k_lo, band.low * p)) and hi == pytest.approx(max(k_hi, band.high * p))
    assert iv.calibrated["TTFT P90 s"] == iv.ranges["TTFT P90 s"]  # not calibrated: the kernels' alone
    assert "kernels' held-out errors alone" in iv.basis["TTFT P90 s"]
    assert any(
        line.startswith("expected TPOT error on deployments like this") for line in iv.expected_errors()
    )
    with pytest.raises(CostModelError, match="predictor"):
        simulate_interval("llama-3.1-8b", "h100", reqs, predictor=Predictor())


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["search", "tiny", "--rank-by", "pessimistic"], "--predict"),
        (["simulate", "tiny", "--rate", "1", "--interval"], "--predict"),
    ],
)
def test_interval_flags_need_a_predictor(capsys, argv, word):
    from graphs.cli.main import main

    assert main(argv) == 2
    assert word in capsys.readouterr().err


# ------------------------------------------------------------------ the corpus itself (slow)


@pytest.mark.slow
def test_heldout_quantiles_bracket_the_median():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.kernel_sources import heldout_log_errors, heldout_log_quantile

    e = heldout_log_errors("h100-sxm", "vllm", "gemm", "bfloat16")
    assert len(e) > 100 and np.all(np.diff(e) >= 0)
    lo, hi = (heldout_log_quantile("h100-sxm", "vllm", "gemm", "bfloat16", q) for q in INTERVAL)
    assert lo < float(np.median(e)) < hi


# ------------------------------------------------------------------ MLA (deepseek-v3) predicted


@pytest.mark.parametrize(
    "it",
    [
        (8, 8 * 3000.0, []),  # decodes only
        (0, 0.0, [(512.0, 0.0)]),  # one chunk, no prefix
        (5, 5 * 700.0, [(256.0, 0.0), (64.0, 1024.0)]),  # mixed, one chunk after a cached prefix
    ],
)
def test_mla_predicted_iteration_is_the_bound_at_unit_factors(fake_corpus, monkeypatch, it):
    """deepseek-v3's prefill tokens run their own token-wise kernels (K/V decompressed): with
    every measured kernel predicted at exactly its roofline, the predicted iteration is the
    bound's (MixedStep's split: the kernels both paths share over all tokens, each path's own over
    its tokens), and at FACTORS it is
    never below it. Its decode attention is the corpus's MLA kernel (``generation_mla``), tabulated
    on the (D, ctx) mesh: between mesh points the log-bilinear value of its roofline sits within
    1e-4 of the roofline itself (the attention's bound is near-affine in ctx over a mesh step)."""
    from graphs.serving.pricing.predictor import predicted_mixed_step
    from graphs.serving.step.mixed import mixed_step

    bound_t = mixed_step("deepseek-v3", "h100").time_sums(*it)
    monkeypatch.setattr(__import__(__name__, fromlist=["FACTORS"]), "FACTORS", (1.0,))
    s = predicted_mixed_step("deepseek-v3", "h100", predictor=PRED)
    assert not s.shared_body
    assert s.time_sums(*it) == pytest.approx(bound_t, rel=1e-4)
    cov = s.coverage()
    assert cov.measured_s > 0  # its GEMMs and MLA attention are priced from the (synthetic) corpus
    if any(p for _, p in it[2]):  # a chunk after a cached prefix: its K/V decompression bound, said
        assert any("MLA K/V decompression" in why for why in cov.bounds)


def test_simulate_prints_the_interval_unless_told_not_to(fake_corpus, capsys):
    """Every predicted simulation carries its P10-P90 interval (issue 25, item 7); --no-interval
    skips the two extra runs."""
    from graphs.cli.main import main

    argv = ["simulate", "llama-3.1-8b", "--rate", "5", "--requests", "40", "--predict", "vllm"]
    argv += ["--prompt", "fixed:300", "--output", "fixed:40"]
    assert main(argv) == 0
    assert "P10-P90 prediction interval" in capsys.readouterr().out
    assert main([*argv, "--no-interval"]) == 0
    assert "prediction interval" not in capsys.readouterr().out
    assert main(argv[:4]) == 0  # the bound: no interval, and none asked for
    assert "prediction interval" not in capsys.readouterr().out


def test_the_interval_block_fits_100_columns_and_says_each_basis_once(fake_corpus, capsys):
    """The interval's metrics carry a short tag, ``(a)``, ``(b)``..., one per distinct basis; each
    basis is said once below them, wrapped, every line of the block within 100 columns; the bases
    read back (unwrapped) are the ``--json`` document's ``interval_basis``, tag for tag."""
    import json
    import re

    from graphs.cli.main import main

    argv = ["simulate", "llama-3.1-8b", "--rate", "5", "--requests", "40", "--predict", "vllm"]
    argv += ["--prompt", "fixed:300", "--output", "fixed:40"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert main([*argv, "--json"]) == 0
    basis = json.loads(capsys.readouterr().out)["interval_basis"]
    start = next(i for i, ln in enumerate(lines) if "prediction interval" in ln)
    end = max(i for i, ln in enumerate(lines) if ln.startswith("  expected ") or ln.startswith("    "))
    block = lines[start : end + 1]
    assert all(len(ln) <= 100 for ln in block), max(block, key=len)
    tag_of = {}
    for ln in block:
        m = re.match(r"^    (\S.*?) +[-\d,.]+  \[[^]]+\]  \(([a-z])\)$", ln)
        if m:
            tag_of[m.group(1)] = m.group(2)
    assert set(tag_of) == set(basis)  # every metric of the interval, tagged
    # the notes: "    (a) text" then lines of 8 spaces, each tag said once
    notes: dict[str, str] = {}
    i = block.index("  what each interval rests on:") + 1
    while i < len(block) and block[i].startswith("    ("):
        tag, text = block[i][5], block[i][8:]
        i += 1
        while i < len(block) and block[i].startswith(" " * 8):
            text += " " + block[i].strip()
            i += 1
        assert tag not in notes
        notes[tag] = text
    assert {label: notes[t] for label, t in tag_of.items()} == basis
    assert len(notes) == len(set(basis.values()))  # one tag per distinct basis, none repeated


def test_speculative_simulation_is_priced_by_the_predictor(fake_corpus):
    """Target and draft forwards both run on predicted steps (issue 25, item 1): each kernel at
    ``max(factor x bound, bound)``, so the run is never faster than the bound's, and what it rests
    on counts exactly the forward seconds the run recorded (target plus draft), once."""
    from graphs.serving.pricing.overheads import EngineOverheads
    from graphs.serving.sim.requests import synthetic
    from graphs.serving.sim.simulator import simulate
    from graphs.serving.sim.specdec_sim import SpecConfig

    reqs = synthetic(30, rate=4.0, prompt="fixed:300", output="fixed:30", seed=2)
    spec = SpecConfig(draft="llama-3.2-1b", k=3, accept=(0.7, 0.6, 0.5), expected=True)
    kw = dict(spec=spec, overheads=EngineOverheads())
    pred = simulate("llama-3.1-8b", "h100", reqs, predictor=PRED, **kw)
    bound = simulate("llama-3.1-8b", "h100", reqs, **kw)
    assert pred.tpot.mean >= bound.tpot.mean and pred.ttft.mean >= bound.ttft.mean
    cov = pred.coverage
    total = cov.measured_s + cov.neighbour_s + cov.bound_s
    assert math.isclose(total, pred.spec.iteration_s, rel_tol=1e-9)
    assert pred.spec.draft_s > 0


@pytest.mark.slow  # DeepSeek-V3's predicted steps: seconds each
def test_mtp_speculation_is_priced_by_the_predictor(fake_corpus):
    """DeepSeek-V3's MTP module under load (was refused): its forward is the full step minus the
    plain one, both predicted kernel by kernel, so it costs at least its bound's module and the
    coverage counts the target's and the module's seconds once (the plain step's share of the
    full step taken off, pair by pair of what they rest on)."""
    from graphs.serving.pricing.overheads import EngineOverheads
    from graphs.serving.sim.requests import synthetic
    from graphs.serving.sim.simulator import Topology, simulate
    from graphs.serving.sim.specdec_sim import SpecConfig

    reqs = synthetic(12, rate=2.0, prompt="fixed:200", output="fixed:12", seed=3)
    kw = dict(
        spec=SpecConfig(draft="mtp", k=1, accept=(0.8,), expected=True),
        overheads=EngineOverheads(),
        topology=Topology(tp=8),
    )
    from models.resolver import resolve_model

    cfg = resolve_model("deepseek-v3-mtp").replace(dtype="fp8")  # its FP8 checkpoint: 86 GB a device
    pred = simulate(cfg, "h200", reqs, predictor=PRED, **kw)
    bound = simulate(cfg, "h200", reqs, **kw)
    assert pred.spec.draft_s >= bound.spec.draft_s * (1 - 1e-9) > 0
    assert pred.tpot.mean >= bound.tpot.mean
    cov = pred.coverage
    total = cov.measured_s + cov.neighbour_s + cov.bound_s
    assert math.isclose(total, pred.spec.iteration_s, rel_tol=1e-9)


@pytest.mark.slow  # DeepSeek-V3's predicted steps: seconds each
def test_speculative_search_is_priced_by_the_predictor(fake_corpus):
    """search(spec=, predictor=) (was refused): every frontier point's TPOT is the verify and
    draft steps on priced steps over the expected tokens (SpecForms), never faster than the
    bound's at the same point, MTP's module included (the full step minus the plain one)."""
    from graphs.serving.planning.design_search import search
    from graphs.serving.pricing.priced import priced_step
    from graphs.serving.sim.specdec_sim import SpecConfig

    spec = SpecConfig(draft="llama-3.2-1b", k=3, accept=(0.7, 0.6, 0.5), expected=True)
    kw = dict(devices=["h100"], batches=[4, 16], ctxs=[2048], spec=spec)
    rb, rp = search("llama-3.1-8b", **kw), search("llama-3.1-8b", predictor=PRED, **kw)
    fb = {r["batch"]: r for r in rb.frontier}
    assert rp.frontier and fb
    verify = priced_step("llama-3.1-8b", "h100", "prefill", predictor=PRED, chunked=True, logits="all")
    draft = priced_step("llama-3.2-1b", "h100", "decode", predictor=PRED)
    steps = 0.0
    for r in rp.frontier:
        b = r["batch"]
        t = verify.step(b, 4, 2047) + sum(draft.step(b, 2048 + j) for j in range(3))
        assert r["tpot_s"] == pytest.approx(t / spec.expected_tokens(), rel=1e-9)
        if b in fb:
            assert r["tpot_s"] >= fb[b]["tpot_s"] * (1 - 1e-12)
        steps += t
    # what the frontier rests on: the verify and draft steps it is priced from, not the plain decode
    assert rp.coverage.total_s == pytest.approx(steps, rel=1e-9)
    mk = dict(
        devices=["h200"],
        batches=[4, 16],
        ctxs=[1024],
        tp=[8],
        weight_dtypes=["fp8"],  # DeepSeek-V3's FP8 checkpoint: 86 GB a device
        spec=SpecConfig(draft="mtp", k=1, accept=(0.8,)),
    )
    mb, mp = search("deepseek-v3-mtp", **mk), search("deepseek-v3-mtp", predictor=PRED, **mk)
    fm = {r["batch"]: r for r in mb.frontier}
    assert mp.frontier
    for r in mp.frontier:
        if r["batch"] in fm:
            assert r["tpot_s"] >= fm[r["batch"]]["tpot_s"] * (1 - 1e-12)


def test_the_max_rates_band_is_the_search_with_the_tpot_bands_kernel_scales(fake_corpus):
    """``max_rate(..., interval=True)``: its kernel scales are the shipped table's TPOT band at the
    rate found over that run's mean TPOT (read here from the table, not from the search), and each
    end is the plain search from the rate found with every kernel that many times slower."""
    from dataclasses import replace

    from graphs.serving.planning.capacity_search import max_rate
    from graphs.serving.pricing.overheads import EngineOverheads
    from graphs.serving.sim.served_errors import served_errors

    kw = dict(slo_ttft=2.0, slo_tpot=0.012, requests=60, prompt="fixed:300", output="fixed:40", seed=1)
    m = max_rate("llama-3.1-8b", "h100", **kw, predictor=PRED, interval=True)
    assert m.rate is not None and m.rate_band is not None and m.band_scales is not None
    run = m.at_rate
    table = served_errors()
    share = run.queue_share if table.conditioned("TPOT") else None
    band, _ = table.like("TPOT", "vllm", "h100-sxm", False, share)
    assert m.band_scales == pytest.approx((band.low, band.high), rel=1e-12)  # the band's ends over the point
    ov = EngineOverheads.default("vllm")
    for k, end in zip((band.high, band.low), m.rate_band, strict=True):
        alone = max_rate("llama-3.1-8b", "h100", **kw, predictor=PRED, start=m.rate,
                         overheads=replace(ov, kernel_scale=k))  # fmt: skip
        assert alone.rate == end
    lo, hi = m.rate_band
    assert lo is not None and hi is not None and lo <= m.rate <= hi  # slower kernels serve less
    assert {p[0] for p in m.band_probes} == set(m.band_scales)
    bound = max_rate("llama-3.1-8b", "h100", **kw, interval=True)  # the bound: no band
    assert bound.rate_band is None and bound.band_probes == ()
    # an end that is not a rate prints why, not a number
    from graphs.serving.planning.capacity_search import NOT_DETERMINED
    from graphs.serving.present.simulation_report import _rate_band_lines

    odd = replace(m, rate_band=(None, None), band_notes=("missed at every rate", NOT_DETERMINED))
    text = " ".join(" ".join(_rate_band_lines(odd)).split())  # unwrapped
    assert "[missed at every rate, not determined: met at every rate up to the physical ceiling" in text


def test_a_predicted_sweep_and_rate_search_print_their_bands_and_expected_errors(fake_corpus, capsys):
    """Issue 42 items 6 and 7 on the commands that run many simulations: ``--rates --predict``
    prints each rate's calibrated band of its means (the shipped table's, at the run's own regime)
    and the expected errors, within 100 columns, and ``--json`` carries them per rate;
    ``--max-rate --predict`` prints the max rate's P10-P90 and the expected errors at the rate."""
    import json

    from graphs.cli.main import main
    from graphs.serving.sim.served_errors import served_errors

    base = ["simulate", "llama-3.1-8b", "--requests", "40", "--prompt", "fixed:300", "--output", "fixed:40"]
    argv = [*base, "--rates", "2,8", "--predict", "vllm"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    block = text[text.index("P10-P90 of each rate's means") :].splitlines()
    assert all(len(ln) <= 100 for ln in block), max(block, key=len)
    assert "expected TPOT error on deployments like this" in text
    assert main([*argv, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["rates"]
    table = served_errors()
    for run in runs:
        tpot = run["tpot"]["mean_s"]
        share = run["queue_share"] if table.conditioned("TPOT") else None
        band, _ = table.like("TPOT", "vllm", "h100-sxm", False, share)
        assert run["interval"]["TPOT mean s"] == pytest.approx([band.low * tpot, band.high * tpot], rel=1e-9)
        assert any(e.startswith("expected TTFT error") for e in run["expected_error"])
    assert main([*base, "--rates", "2,8"]) == 0  # the bound: no band
    assert "P10-P90" not in capsys.readouterr().out
    assert main([*argv, "--no-interval"]) == 0  # told not to
    assert "P10-P90" not in capsys.readouterr().out
    mr = [*base, "--max-rate", "--slo-tpot", "0.012", "--predict", "vllm"]
    assert main(mr) == 0
    text = capsys.readouterr().out
    assert "P10-P90 of the max rate: [" in text and "at that rate, expected TPOT error" in text
    assert main([*mr, "--no-interval"]) == 0
    assert "P10-P90 of the max rate" not in capsys.readouterr().out


def test_a_chunk_after_a_cached_prefix_is_the_q_eq_kv_kernel_at_its_kv_length_scaled(fake_corpus):
    """With every measured kernel at FACTORS x its roofline, the q = kv kernel at p + c tokens
    scaled by the bound ratio bound(c | p) / bound(p + c | 0) is that factor x bound(c | p): the
    chunk keeps its q = kv kernel's efficiency (p + c on the whole-count token grid, so no
    interpolation), is never below its bound, and is counted as a neighbour that says so."""
    from graphs.serving.pricing.predictor import _CHUNK_PREFIX_SCALED, predicted_mixed_step

    s = predicted_mixed_step("llama-3.1-8b", "h100", predictor=PRED)
    c, pre = 512.0, 3584.0
    for k, name in enumerate(s.attention_names):
        kern = s._attn[k][0]
        own = kern.time(0, 0.0, ((c, pre),))
        assert s.prefix_chunk_attention(k, c, pre) == pytest.approx(_factor(name) * own, rel=1e-9)
    s.reset()
    bound_t = s.bound.time_sums(0, 0.0, [(c, pre)])
    assert s.time_sums(0, 0.0, [(c, pre)]) >= bound_t
    cov = s.coverage()
    if any(_factor(n) >= 1 for n in s.attention_names):
        assert _CHUNK_PREFIX_SCALED in cov.neighbours
    assert not any("not measured (q < kv)" in why for why in cov.bounds)
    # the prefix is priced, not dropped: the same chunk after 3,584 cached tokens costs more
    with_prefix = s.time_sums(0, 0.0, [(c, pre)])
    assert with_prefix > s.time_sums(0, 0.0, [(c, 0.0)])


def test_a_prefix_chunk_on_the_corpus_contains_its_parts_and_is_contained_by_the_whole():
    """On the corpus's own kernels (vLLM, H100, Llama-3.1-8B): a chunk of c after p cached tokens
    costs at least the q = kv kernel at c (the same query tiles with shorter KV loops) and one
    decode at p + c (the same KV read), at most the q = kv kernel at p + c (all of its tiles,
    the chunk's among them), and grows with p (to within the q = kv tables' staircase)."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predictor import predicted_mixed_step

    s = predicted_mixed_step("llama-3.1-8b", "h100", predictor=PRED)
    (k,) = range(len(s.attention_names))
    for c in (2, 16, 128, 512, 2048):
        prev = 0.0
        for p in (1, 16, 128, 1024, 4096, 16384, 100000):
            t = s.prefix_chunk_attention(k, c, p)
            assert t >= s.chunk_attention(k, c) and t >= s.decode_attention(k, 1, p + c)
            assert t <= s.chunk_attention(k, c + p) * (1 + 1e-12)
            assert t >= 0.95 * prev, (c, p)
            prev = t


def test_a_few_token_mla_chunk_after_a_long_prefix_costs_at_most_its_decodes(fake_corpus):
    """With every measured kernel at its factor x its roofline (the fake corpus), DeepSeek-V3's
    chunk of c <= 4 tokens after 4,096 cached ones: the q = kv kernel scaled down keeps the
    chunk's own bound, the decompressed K/V of p + c tokens for every head, while c absorbed
    decodes at p + c read the shared latent c times, less: the chunk is priced at those decodes
    (the decode path), still at least one decode and the q = kv kernel at c (the uncapped price
    was the factor x the decompressed bound)."""
    from graphs.serving.pricing.predictor import predicted_mixed_step

    s = predicted_mixed_step("deepseek-v3", "h100", predictor=PRED)
    assert not s.shared_body  # MLA
    p = 4096.0
    for k, name in enumerate(s.attention_names):
        f, kern = _factor(name), s._attn[k][0]
        for c in (1.0, 2.0, 4.0):
            chunk_b = kern.time(0, 0.0, ((c, p),))  # the decompressed form's bound
            dec_b = kern.time(int(c), c * (p + c), ())  # c absorbed decodes at p + c
            assert dec_b < chunk_b, (name, c)
            floors = [f * kern.time(1, p + c, ())] + ([f * kern.time(0, 0.0, ((c, 0.0),))] if c >= 2 else [])
            want = max(f * dec_b, *floors)
            assert s.prefix_chunk_attention(k, c, p) == pytest.approx(want, rel=1e-3), (name, c)
