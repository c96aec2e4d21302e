"""The served-error calibration methods (graphs.serving.sim.conformal): weighted conformal ends
by hand, coverage of new deployments when deployments (not rows) are exchangeable, the
normalised form, the grouped folds, and the table's methods read strictly."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from graphs.serving.sim.conformal import (
    CANDIDATES,
    Method,
    Residual,
    fit_groups,
    grouped_folds,
    weighted_ends,
)
from graphs.serving.sim.served_errors import ALPHA, ServedErrors, parse

ROOT = Path(__file__).resolve().parents[1]


def _rows(deps: dict[str, list[float]], metric: str = "TPOT", framework: str = "vllm") -> list[Residual]:
    """Residual rows from ``{deployment: [s, ...]}`` (s = ln(y / y_hat), so e = exp(-s) - 1)."""
    return [
        Residual(d, metric, framework, "h100-sxm", False, math.expm1(-s))
        for d, ss in deps.items()
        for s in ss
    ]


def test_equal_weights_give_the_split_conformal_order_statistics():
    # n = 19: ranks (floor(20 x 0.1), ceil(20 x 0.9)) = (2, 18): the 2nd and 18th smallest
    s = [float(x) for x in range(19, 0, -1)]
    assert weighted_ends(s, [1 / 19] * 19, 19) == (2.0, 18.0)
    assert weighted_ends(s[:8], [1 / 8] * 8, 8) is None  # ceil(9 x 0.9) = 9 > 8: no upper end
    with pytest.raises(CostModelError, match="weights"):
        weighted_ends([1.0, 2.0], [0.5, 0.4], 9)


def test_deployment_weighting_counts_a_deployment_once_however_many_rows():
    # nine deployments; "a" has three rows at the bottom (s = -3, -2, -1), the eight others one
    # row each (s = 0 .. 7). Row-weighted: n = 11, ranks (floor(12 x 0.1), ceil(12 x 0.9)) =
    # (1, 11): the ends are s_(1) = -3 and s_(11) = 7. Deployment-weighted: K = 9, ranks (1, 9),
    # levels 1/9 and 9/9; "a"'s rows weigh 1/27 each, so the CDF first reaches 1/9 at its third
    # row, s = -1; the upper end is the largest, 7.
    deps = {"a": [-3.0, -2.0, -1.0], **{f"d{i}": [float(i)] for i in range(8)}}
    rows = _rows(deps)
    (row,) = fit_groups(rows, Method("row", "metric", False))
    (dep,) = fit_groups(rows, Method("deployment", "metric", False))
    assert (math.log(row.low), math.log(row.high)) == pytest.approx((-3.0, 7.0))
    assert (math.log(dep.low), math.log(dep.high)) == pytest.approx((-1.0, 7.0))
    assert (dep.n, dep.deployments) == (11, 9)
    # expected error, median |e| with e = exp(-s) - 1: by row the 6th of 11 sorted |e| (0, 1 - e^-1,
    # ..., 1 - e^-7, then "a"'s e^1 - 1, e^2 - 1, e^3 - 1) is 1 - e^-5; by deployment "a"'s three
    # rows weigh 1/27 each and lie above all the others, so the CDF reaches 1/2 at the 5th single
    # row (5/9): 1 - e^-4
    assert row.median_abs == pytest.approx(1 - math.exp(-5))
    assert dep.median_abs == pytest.approx(1 - math.exp(-4))
    # eight deployments are too few for the upper rank (ceil(9 x 0.9) = 9 > 8): no group
    del deps["d7"]
    assert fit_groups(_rows(deps), Method("deployment", "metric", False)) == []


def test_sqrt_weighting_lies_between_row_and_deployment():
    # nine deployments: "a" has four rows at the bottom (s = -4, -3, -2, -1), the eight others one
    # row each (s = 0 .. 7). sqrt: "a" weighs sqrt(4) = 2, each other 1, of 10: "a"'s rows 2/10/4 =
    # 0.05 each, the others 0.1 each; K = 9 units, ranks (floor(10 x 0.1), ceil(10 x 0.9)) = (1, 9),
    # levels 1/9 and 1. The CDF is 0.05, 0.10, 0.15 at s = -4, -3, -2: the lower end is -2 (first
    # >= 0.111); the upper end the largest, 7. Row-weighted (n = 12, ranks (1, 12)): -4 and 7.
    # Deployment-weighted: "a"'s rows 1/36 each, the CDF reaches 4/36 = 1/9 at s = -1.
    deps = {"a": [-4.0, -3.0, -2.0, -1.0], **{f"d{i}": [float(i)] for i in range(8)}}
    rows = _rows(deps)
    (row,) = fit_groups(rows, Method("row", "metric", False))
    (sq,) = fit_groups(rows, Method("sqrt", "metric", False))
    (dep,) = fit_groups(rows, Method("deployment", "metric", False))
    assert (math.log(row.low), math.log(row.high)) == pytest.approx((-4.0, 7.0))
    assert (math.log(sq.low), math.log(sq.high)) == pytest.approx((-2.0, 7.0))
    assert (math.log(dep.low), math.log(dep.high)) == pytest.approx((-1.0, 7.0))
    assert (sq.n, sq.deployments) == (12, 9)
    # expected error, median |e| (e = exp(-s) - 1): the singles' |e| = 1 - e^-s (s = 0 .. 7) lie
    # below "a"'s e^|s| - 1 >= e - 1; weighing 0.1 each, the CDF reaches 1/2 at the 5th, s = 4
    assert sq.median_abs == pytest.approx(1 - math.exp(-4))
    # eight deployments are too few for the upper rank, however many rows: no group
    del deps["d7"]
    assert fit_groups(_rows(deps), Method("sqrt", "metric", False)) == []


def test_sqrt_weighting_equals_deployment_weighting_when_deployments_are_equal_in_size():
    # n_j all 3: sqrt(3) / (12 sqrt(3)) = 1/12 per deployment, as 1/K: the same bands, plain and normalised
    rng = np.random.default_rng(11)
    rows = _rows({f"d{j}": list(rng.normal(0.1 * j, 0.2, size=3)) for j in range(12)})
    for norm in (False, True):
        (sq,) = fit_groups(rows, Method("sqrt", "metric", norm))
        (dep,) = fit_groups(rows, Method("deployment", "metric", norm))
        assert (sq.low, sq.high, sq.median_abs) == pytest.approx((dep.low, dep.high, dep.median_abs))


def test_the_iqr_scale_is_half_the_interquartile_range():
    # vllm: ten single-row deployments s = 0.01 i (i = -4 .. 5); trtllm: s = 1 + (-0.04, -0.03,
    # -0.02, -0.01, 0, 0.01, 0.1, 0.2, 0.3, 0.4), skewed up. Row weighting, 1/10 per row within a
    # group: the 0.25 and 0.75 quantiles are the 3rd and 8th smallest, the median the 5th.
    # vllm: m = 0, (0.03 - (-0.02)) / 2 = 0.025; trtllm: m = 1, (0.2 - (-0.02)) / 2 = 0.11 (its MAD,
    # the 5th smallest |s - m|, would be 0.03). Scores: vllm 0.4 i (-1.6 .. 2.0); trtllm (s - 1) / 0.11.
    # Pooled over 20 rows, ranks (2, 19): the 2nd smallest is vllm's -1.2, the 19th trtllm's
    # 0.3 / 0.11. Bands: vllm 0.025 x (-1.2, 0.3 / 0.11); trtllm 1 + 0.11 x (-1.2, 0.3 / 0.11).
    vllm = _rows({f"v{i}": [0.01 * i] for i in range(-4, 6)}, framework="vllm")
    up = (-0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.1, 0.2, 0.3, 0.4)
    trt = _rows({f"t{i}": [1 + x] for i, x in enumerate(up)}, framework="trtllm")
    method = Method("row", "engine", True, scale="iqr")
    assert method.name == "row/engine/normalised-iqr"
    groups = {g.label: g for g in fit_groups(vllm + trt, method)}
    v, t = groups["TPOT vllm dense"], groups["TPOT trtllm dense"]
    assert (math.log(v.low), math.log(v.high)) == pytest.approx((-0.03, 0.025 * 0.3 / 0.11))
    assert (math.log(t.low), math.log(t.high)) == pytest.approx((1 - 0.132, 1.3))


def test_the_shifted_normalisation_moves_the_pooled_residuals_to_each_group_s_median():
    # vllm s = 0.01 i, trtllm s = 1 + 0.02 i (i = -4 .. 5); medians (5th smallest) 0 and 1, so the
    # scores s - m are vllm 0.01 i and trtllm 0.02 i. Pooled over 20 rows, ranks (2, 19): the 2nd
    # smallest is -0.06, the 19th (2nd largest) 0.08. Bands: vllm (-0.06, 0.08), trtllm 1 + that.
    vllm = _rows({f"v{i}": [0.01 * i] for i in range(-4, 6)}, framework="vllm")
    trt = _rows({f"t{i}": [1 + 0.02 * i] for i in range(-4, 6)}, framework="trtllm")
    method = Method.named("row/engine/shifted")
    assert (method.normalised, method.scale) == (True, "none")
    groups = {g.label: g for g in fit_groups(vllm + trt, method)}
    v, t = groups["TPOT vllm dense"], groups["TPOT trtllm dense"]
    assert (math.log(v.low), math.log(v.high)) == pytest.approx((-0.06, 0.08))
    assert (math.log(t.low), math.log(t.high)) == pytest.approx((0.94, 1.08))


def test_a_scale_is_named_and_checked():
    assert Method.named("sqrt/full/normalised-iqr/regime") == Method("sqrt", "full", True, True, "iqr")
    assert Method.named("row/full/shifted").name == "row/full/shifted"
    with pytest.raises(CostModelError, match="a plain method has no scale"):
        Method("row", "full", False, scale="iqr")
    with pytest.raises(CostModelError, match="scale 'sd' unknown"):
        Method("row", "full", True, scale="sd")
    with pytest.raises(CostModelError, match="expected weighting"):
        Method.named("row/full/shifted/normalised")
    table = parse(_table('{"TTFT": "deployment/engine/shifted/regime"}'))
    assert table.method_words("TTFT").startswith(
        "conformal, each deployment weighing alike, shifted by its group's median, within the run's regime"
    )
    words = parse(_table('{"TTFT": "row/engine/normalised-iqr"}')).method_words("TTFT")
    assert words == "conformal, each row weighing alike, normalised by its group's interquartile range"
    with pytest.raises(CostModelError, match=r"served_errors\.json"):
        parse(_table('{"TTFT": "row/engine/normalised-sd"}'))


def test_a_sqrt_weighted_table_parses_and_says_its_weighting():
    table = parse(_table('{"TTFT": "sqrt/engine/normalised"}', '[["TTFT", "vllm", false, 3]]'))
    assert table.like("TTFT", "vllm", "h100-sxm", False)[0].label == "TTFT vllm dense"
    assert table.method_words("TTFT") == (
        "conformal, each deployment weighing by the square root of its rows, normalised by its group's spread"
    )
    assert "weighing by the square root of its rows" in table.statement("TTFT", "vllm", "h100-sxm", False)


def _coverage(
    rng: np.random.Generator, k: int, tau: float, sigma: float, weighting: str, trials: int
) -> float:
    """How often the band fitted on ``k`` synthetic deployments holds a random row of a new one:
    deployment effects u_j ~ N(0, tau), rows s = u_j + N(0, sigma), 1 to 30 rows each."""
    hits = 0
    for _ in range(trials):
        n = rng.integers(1, 31, size=k + 1)
        u = rng.normal(0, tau, size=k + 1)
        s = [list(u[j] + rng.normal(0, sigma, size=n[j])) for j in range(k + 1)]
        cal = [x for j in range(k) for x in s[j]]
        if weighting == "row":
            w = [1 / len(cal)] * len(cal)
            units = len(cal)
        else:
            w = [1 / (k * n[j]) for j in range(k) for _ in s[j]]
            units = k
        ends = weighted_ends(cal, w, units)
        assert ends is not None
        new = s[k][rng.integers(0, n[k])]
        hits += ends[0] <= new <= ends[1]
    return hits / trials


@settings(max_examples=8, deadline=None)
@given(
    k=st.integers(9, 40),
    tau=st.floats(0.05, 1.0),
    sigma=st.floats(0.01, 0.5),
    seed=st.integers(0, 2**32 - 1),
)
def test_deployment_weighted_band_covers_new_deployments(k, tau, sigma, seed):
    """Deployments exchangeable (rows within one share its effect u_j): the deployment-weighted
    band holds a random row of a new deployment with probability >= 1 - alpha (Dunn, Wasserman &
    Ramdas 2022: the pooled CDF is the average over one-row-per-deployment subsamples, each an
    exchangeable split-conformal set of k units). 600 trials: 3 standard errors of a binomial
    at 0.8 are 3 x sqrt(0.16 / 600) = 0.049."""
    cover = _coverage(np.random.default_rng(seed), k, tau, sigma, "deployment", 600)
    assert cover >= 1 - ALPHA - 0.049


def test_row_weighting_undercovers_when_deployments_share_their_errors():
    """The same draws weighted by row: a deployment of 30 rows counts 30 times, so with strong
    deployment effects (tau 1, sigma 0.01) and few deployments (k 9) the band is the spread of a
    few deployments' effects and misses a new deployment's more often than alpha allows."""
    rng = np.random.default_rng(3)
    assert _coverage(rng, 9, 1.0, 0.01, "row", 2000) < 1 - ALPHA - 0.03


def test_normalised_with_one_group_is_the_plain_band():
    # one group: z = (s - m) / sigma is increasing in s, so its ends map back to the plain ends
    rng = np.random.default_rng(5)
    rows = _rows({f"d{j}": list(rng.normal(0.2 * j, 0.1, size=j + 1)) for j in range(12)})
    for w in ("row", "deployment", "sqrt"):
        (plain,) = fit_groups(rows, Method(w, "metric", False))
        for scale in ("mad", "iqr", "none"):
            (norm,) = fit_groups(rows, Method(w, "metric", True, scale=scale))
            assert (norm.low, norm.high) == pytest.approx((plain.low, plain.high))


def test_normalised_groups_carry_their_own_location_and_scale():
    # two engines of ten single-row deployments each: vllm s = 0.01 i (i = -4 .. 5), trtllm the
    # same shifted by +1 and spread x2. Each engine's weighted median m is its 5th smallest
    # (vllm 0.00, trtllm 1.00) and its MAD the 5th smallest |s - m| (vllm 0.02, trtllm 0.04), so
    # every z is the same set i' in {-2, -1.5, ..., 2.5}; pooled over 20 rows (row weighting,
    # ranks (2, 19)) the ends are z = -2 and z = 2.5 (the 2nd smallest and 19th of 20 values,
    # each twice). Bands: vllm exp(0 + 0.02 z), trtllm exp(1 + 0.04 z).
    vllm = _rows({f"v{i}": [0.01 * i] for i in range(-4, 6)}, framework="vllm")
    trt = _rows({f"t{i}": [1 + 0.02 * i] for i in range(-4, 6)}, framework="trtllm")
    groups = {g.label: g for g in fit_groups(vllm + trt, Method("row", "engine", True))}
    v, t = groups["TPOT vllm dense"], groups["TPOT trtllm dense"]
    assert (math.log(v.low), math.log(v.high)) == pytest.approx((-0.04, 0.05))
    assert (math.log(t.low), math.log(t.high)) == pytest.approx((1 - 0.08, 1 + 0.10))


def test_grouped_folds_leave_whole_deployments_out():
    rows = _rows({"a": [0.1, 0.2], "b": [0.3], "c": [0.4, 0.5, 0.6]})
    folds = list(grouped_folds(rows))
    assert [d for d, _, _ in folds] == ["a", "b", "c"]
    for dep, train, test in folds:
        assert {r.deployment for r in test} == {dep}
        assert dep not in {r.deployment for r in train}
        assert len(train) + len(test) == len(rows)
    # a: its 2 rows out, b and c's 4 in; b: 1 out, 5 in; c: 3 out, 3 in
    assert [(len(tr), len(te)) for _, tr, te in folds] == [(4, 2), (5, 1), (3, 3)]


def test_candidates_are_named_and_parsed_back():
    # the 10 fixed before the first run, then each split by regime, then the 10 sqrt-weighted, then
    # the 24 normalised of the other scales (2 scales x 2 regime x 3 weightings x 2 chains) last
    assert len({m.name for m in CANDIDATES}) == len(CANDIDATES) == 54
    assert all(m.normalised and m.scale != "mad" for m in CANDIDATES[30:])
    assert all(Method.named(m.name) == m for m in CANDIDATES)
    assert [m.weighting for m in CANDIDATES[:20]].count("sqrt") == 0
    assert all(m.weighting == "sqrt" for m in CANDIDATES[20:30])
    assert CANDIDATES[0].name == "row/full" and CANDIDATES[20].name == "sqrt/full"
    with pytest.raises(CostModelError, match="weighting"):
        Method("cluster", "full", False)
    with pytest.raises(CostModelError, match="expected weighting"):
        Method.named("row/full/scaled")


def _table(methods: str, support: str = "[]") -> str:
    return (
        '{"groups": [{"metric": "TTFT", "framework": "vllm", "device": null, "moe": false, "n": 20, '
        '"deployments": 5, "low": 0.8, "high": 1.5, "median_abs": 0.1, "label": "TTFT vllm dense"}, '
        '{"metric": "TTFT", "framework": null, "device": null, "moe": null, "n": 40, '
        '"deployments": 9, "low": 0.7, "high": 2.0, "median_abs": 0.2, "label": "TTFT, every validated deployment"}], '
        f'"methods": {methods}, "support": {support}}}'
    )


def test_the_table_s_method_sets_the_lookup_chain():
    engine = parse(_table('{"TTFT": "row/engine"}'))
    metric = parse(_table('{"TTFT": "deployment/metric"}'))
    assert engine.like("TTFT", "vllm", "h100-sxm", False)[0].label == "TTFT vllm dense"
    assert metric.like("TTFT", "vllm", "h100-sxm", False)[0].label == "TTFT, every validated deployment"
    assert metric.method_words("TTFT") == "conformal, each deployment weighing alike"
    # like-ness from the support counts: 3 validated vllm dense deployments is enough
    table = parse(_table('{"TTFT": "deployment/metric"}', '[["TTFT", "vllm", false, 3]]'))
    assert table.like("TTFT", "vllm", "h100-sxm", False)[1] is True
    assert table.like("TTFT", "sglang", "h100-sxm", False)[1] is False


@pytest.mark.parametrize(
    ("methods", "support"),
    [
        ("null", "[]"),
        ('{"TTFT": "row/everything"}', "[]"),
        ('{"TTFT": "bayes/full"}', "[]"),
        ('{"latency": "row/full"}', "[]"),
        ('{"TTFT": "row/full"}', '[["TTFT", "vllm", false]]'),
        ('{"TTFT": "row/full"}', '[["TTFT", "vllm", false, 0]]'),
    ],
)
def test_a_table_with_a_bad_method_or_support_is_refused(methods, support):
    with pytest.raises(CostModelError, match=r"served_errors\.json"):
        parse(_table(methods, support))


def test_the_criterion_takes_the_narrowest_that_holds():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from interval_selection import Score, choose
    finally:
        sys.path.pop(0)

    def score(inside, width, unanswered=0, per_deployment=None):
        dep = inside / 100 if per_deployment is None else per_deployment
        return {"TPOT": Score(100, 10, unanswered, inside, 100 - inside - unanswered, 0, dep, width)}

    names = [m.name for m in CANDIDATES]
    scores = {n: score(70, 0.1) for n in names}
    scores[names[3]] = score(85, 0.9)
    scores[names[5]] = score(81, 0.5)  # holds >= 80 % and narrower than names[3]
    scores[names[1]] = score(90, 0.2, unanswered=5)  # leaves rows unanswered: never qualifies
    assert choose(scores, "TPOT") == (names[5], True)
    # 81 % of the rows but 79 % of a left-out deployment's on average: does not qualify
    scores[names[4]] = score(81, 0.3, per_deployment=0.79)
    assert choose(scores, "TPOT") == (names[5], True)
    scores = {n: score(70, 0.1) for n in names}
    scores[names[2]] = score(75, 0.3)  # none holds 80 %: the highest coverage
    assert choose(scores, "TPOT") == (names[2], False)


def test_an_empty_table_answers_like_the_full_chain():
    # a table that names no method looks up along the full chain (the calibration before the selection)
    assert ServedErrors((), "t", "t").method("TTFT") == "row/full"


def _regime_rows() -> list[Residual]:
    """Nine light deployments whose residuals lie within +-0.04 and nine queued ones spread over
    +-0.8 (one TTFT row each; s = ln(y / y_hat), so e = exp(-s) - 1)."""
    light = [
        Residual(f"l{i}", "TTFT", "vllm", "h100-sxm", False, math.expm1(-s), 0.1)
        for i, s in enumerate([-0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04])
    ]
    queued = [
        Residual(f"q{i}", "TTFT", "vllm", "h100-sxm", False, math.expm1(-s), 0.9)
        for i, s in enumerate([-0.8, -0.6, -0.4, -0.2, 0.0, 0.2, 0.4, 0.6, 0.8])
    ]
    return light + queued


def test_the_regime_bucket_is_fixed_a_priori():
    from graphs.serving.sim.served_errors import QUEUE_SHARE_THRESHOLD, regime

    assert QUEUE_SHARE_THRESHOLD == 0.5  # waiting is at least half of the first token
    assert (regime(0.0), regime(0.49), regime(0.5), regime(1.0)) == ("light", "light", "queued", "queued")
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(CostModelError, match="queue share"):
            regime(bad)


def test_a_regime_conditioned_band_is_narrower_where_the_simulation_is_easy_and_still_covers():
    rows = _regime_rows()
    # unconditioned, row-weighted, one group: n = 18, ranks (floor(19 x 0.1), ceil(19 x 0.9)) =
    # (1, 18): the ends are the smallest and largest s, -0.8 and 0.8, for every run: width
    # e^1.6 - 1 = 395 %
    (plain,) = fit_groups(rows, Method("row", "metric", False))
    assert (math.log(plain.low), math.log(plain.high)) == pytest.approx((-0.8, 0.8))
    # by regime: each bucket n = 9, ranks (1, 9): light (-0.04, 0.04), width e^0.08 - 1 = 8.3 %;
    # queued (-0.8, 0.8) as before; the metric's group of every regime stays as the fallback
    groups = {g.regime: g for g in fit_groups(rows, Method("row", "metric", False, True))}
    assert set(groups) == {"light", "queued", None}
    light, queued = groups["light"], groups["queued"]
    assert (math.log(light.low), math.log(light.high)) == pytest.approx((-0.04, 0.04))
    assert light.high / light.low - 1 == pytest.approx(math.expm1(0.08))
    assert (math.log(queued.low), math.log(queued.high)) == pytest.approx((-0.8, 0.8))
    assert "light runs (simulated queue share of TTFT < 0.5)" in light.label
    # every row lies inside its own bucket's band (conformal ends are its extreme order statistics)
    for r in rows:
        g = groups[r.regime]
        assert g.low <= 1 / (1 + r.error) <= g.high
    # judged through the table as simulate --predict judges its run: by its own queue share
    table = ServedErrors(tuple(groups.values()), "t", "t", methods=(("TTFT", "row/metric/regime"),))
    assert table.like("TTFT", "vllm", "h100-sxm", False, 0.2)[0] is light
    assert table.like("TTFT", "vllm", "h100-sxm", False, 0.7)[0] is queued
    assert table.conditioned("TTFT") and "within the run's regime" in table.method_words("TTFT")
    with pytest.raises(CostModelError, match="queue share of TTFT is needed"):
        table.like("TTFT", "vllm", "h100-sxm", False)


def test_a_regime_too_thin_falls_back_to_the_metric_s_group_of_every_regime():
    # eight queued deployments are one short of the upper rank (ceil(9 x 0.9) = 9 > 8): no queued
    # group; a queued run is judged by the metric's group over both regimes (n = 17, ranks (1, 17))
    rows = _regime_rows()[:-1]
    groups = {g.regime: g for g in fit_groups(rows, Method("row", "metric", False, True))}
    assert set(groups) == {"light", None}
    table = ServedErrors(tuple(groups.values()), "t", "t", methods=(("TTFT", "row/metric/regime"),))
    g, _ = table.like("TTFT", "vllm", "h100-sxm", False, 0.9)
    assert g.regime is None and (math.log(g.low), math.log(g.high)) == pytest.approx((-0.8, 0.6))


def test_normalised_regime_groups_pool_their_scores_per_regime():
    # each bucket is one group: location = median s = 0, scale = median |s| = 0.02 (light) and 0.4
    # (queued); the scores z = s / scale are -2..2 in both buckets, ranks (1, 9): z ends (-2, 2),
    # so the bands are exactly the plain ones, (-0.04, 0.04) and (-0.8, 0.8)
    groups = {g.regime: g for g in fit_groups(_regime_rows(), Method("row", "metric", True, True))}
    assert (math.log(groups["light"].low), math.log(groups["light"].high)) == pytest.approx((-0.04, 0.04))
    assert (math.log(groups["queued"].low), math.log(groups["queued"].high)) == pytest.approx((-0.8, 0.8))


def test_a_regime_method_refuses_rows_without_a_queue_share():
    rows = [Residual(f"d{i}", "TTFT", "vllm", "h100-sxm", False, 0.1) for i in range(9)]
    with pytest.raises(CostModelError, match="no simulated queue share"):
        fit_groups(rows, Method("deployment", "full", False, True))
    assert fit_groups(rows, Method("row", "metric", False))  # the unconditioned ones need none


def test_a_table_with_regime_groups_parses_and_a_bad_regime_is_refused():
    group = (
        '{"metric": "TTFT", "framework": null, "device": null, "moe": null, "n": 9, "deployments": 9, '
        '"low": 0.9, "high": 1.1, "median_abs": 0.02, "label": "x", "regime": "%s"}'
    )
    ok = parse(
        '{"groups": [%s], "methods": {"TTFT": "deployment/full/normalised/regime"}, "support": []}'
        % (group % "light")
    )
    assert ok.groups[0].regime == "light" and ok.conditioned("TTFT")
    with pytest.raises(CostModelError, match="out of range"):
        parse('{"groups": [%s], "methods": {}, "support": []}' % (group % "busy"))
    assert Method.named("row/engine/regime") == Method("row", "engine", False, True)
    with pytest.raises(CostModelError, match="expected weighting"):
        Method.named("row/engine/regime/normalised")


def test_the_selection_refuses_rows_without_a_queue_share(monkeypatch):
    """Until the tables are regenerated with the column, the cross-validation refuses, naming why."""
    from benchmarks import interval_selection, served_errors

    row = {"set": "silicon", "id": "x-ttft", "deployment": "silicon:a", "metric": "TTFT", "framework": "vllm"}
    row |= {"device": "h100-sxm", "moe": False, "error": 0.1, "queue_share": None}
    monkeypatch.setattr(served_errors, "residual_rows", lambda: [row])
    monkeypatch.setattr(served_errors, "heldout", lambda: frozenset())
    with pytest.raises(
        SystemExit, match=r"1 of 1 compared rows \(silicon; first: x-ttft\) carry no simulated queue share"
    ):
        interval_selection.calibration_residuals()
    monkeypatch.setattr(served_errors, "residual_rows", lambda: [row | {"queue_share": 0.62}])
    (res,) = interval_selection.calibration_residuals()
    assert res.regime == "queued"  # 0.62 >= 0.5
