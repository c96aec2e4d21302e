"""E2E's composed band (issue 42 item 6): the run's TTFT and TPOT bands added by its simulated
split (graphs.serving.sim.served_errors.compose), looked up, cross-validated and printed."""

import math
from types import SimpleNamespace as NS

import pytest

from benchmarks.interval_selection import cross_validate_composed
from costmodel.errors import CostModelError
from graphs.serving.sim import intervals
from graphs.serving.sim.conformal import Method, Residual
from graphs.serving.sim.served_errors import COMPOSED, ErrorGroup, ServedErrors, compose, parse

#: TTFT band 0.5x-2x, TPOT band 0.9x-1.2x (stated, not fitted); medians |error| 30 % and 10 %
TTFT = ErrorGroup("TTFT", None, None, None, 9, 3, 0.5, 2.0, 0.3, "TTFT, every validated deployment")
TPOT = ErrorGroup("TPOT", None, None, None, 12, 4, 0.9, 1.2, 0.1, "TPOT, every validated deployment")
METHODS = (("E2E", COMPOSED), ("TPOT", "row/metric"), ("TTFT", "row/metric"))
TABLE = ServedErrors((TTFT, TPOT), "t", "t", methods=METHODS)


@pytest.mark.parametrize(
    ("ttft_s", "e2e_s", "low_s", "high_s"),
    [
        # run A: TTFT_hat 1 s of E2E_hat 10 s, decode 9 s: 1 x 0.5 + 9 x 0.9 = 8.6 s;
        # 1 x 2.0 + 9 x 1.2 = 12.8 s (factors 0.86 and 1.28 = 0.1 x 0.5 + 0.9 x 0.9, 0.1 x 2 + 0.9 x 1.2)
        (1.0, 10.0, 8.6, 12.8),
        # run B: TTFT_hat 3 s of E2E_hat 5 s, decode 2 s: 3 x 0.5 + 2 x 0.9 = 3.3 s; 3 x 2 + 2 x 1.2 = 8.4 s
        (3.0, 5.0, 3.3, 8.4),
    ],
)
def test_the_composed_ends_are_the_parts_ends_added_by_hand(ttft_s, e2e_s, low_s, high_s):
    g, like = TABLE.like("E2E", "vllm", "h100-sxm", False, ttft_share=ttft_s / e2e_s)
    assert g.interval(e2e_s) == pytest.approx((low_s, high_s))
    assert like is False  # the stated groups key on no framework and the table states no support
    # expected error a x 30 % + (1 - a) x 10 %: run A 0.1 x 0.3 + 0.9 x 0.1 = 12 %, run B 0.6 x 0.3 + 0.4 x 0.1 = 22 %
    assert g.median_abs == pytest.approx(ttft_s / e2e_s * 0.3 + (1 - ttft_s / e2e_s) * 0.1)
    assert (g.metric, g.n, g.deployments) == ("E2E", 21, 3)  # 9 + 12 rows; the fewer deployments


def test_the_composed_band_needs_the_run_s_split_and_both_parts():
    assert TABLE.covers("E2E") and TABLE.composed("E2E") and not TABLE.conditioned("E2E")
    with pytest.raises(CostModelError, match="TTFT share of E2E is needed"):
        TABLE.like("E2E", "vllm", "h100-sxm", False)
    with pytest.raises(CostModelError, match=r"TTFT share of E2E 1\.5 not allowed"):
        TABLE.like("E2E", "vllm", "h100-sxm", False, ttft_share=1.5)
    with pytest.raises(CostModelError, match="composes a TTFT and a TPOT group"):
        compose(TPOT, TTFT, 0.5)
    with pytest.raises(CostModelError, match="no chain of its own"):
        TABLE.chain("E2E")
    assert not ServedErrors((TTFT,), "t", "t", methods=METHODS).covers("E2E")  # no TPOT group
    line = TABLE.statement("E2E", "vllm", "h100-sxm", False, ttft_share=0.1)
    assert "+-12 %" in line and "E2E composed at the run's simulated TTFT share 0.10" in line
    assert "composed from the run's TTFT band" in TABLE.method_words("E2E")


def test_the_composed_band_takes_each_part_s_regime():
    light = ErrorGroup("TTFT", None, None, None, 9, 3, 0.8, 1.25, 0.1, "TTFT light", "light")
    queued = ErrorGroup("TTFT", None, None, None, 9, 3, 0.5, 4.0, 0.5, "TTFT queued", "queued")
    methods = (("E2E", COMPOSED), ("TPOT", "row/metric"), ("TTFT", "row/metric/regime"))
    table = ServedErrors((light, queued, TPOT), "t", "t", methods=methods)
    assert table.conditioned("E2E")  # the TTFT part needs the run's queue share
    with pytest.raises(CostModelError, match="queue share of TTFT is needed"):
        table.like("E2E", "vllm", "h100-sxm", False, ttft_share=0.5)
    # queued (0.7 >= 0.5): 0.5 x 0.5 + 0.5 x 0.9 = 0.7; 0.5 x 4 + 0.5 x 1.2 = 2.6
    g, _ = table.like("E2E", "vllm", "h100-sxm", False, 0.7, 0.5)
    assert (g.low, g.high) == pytest.approx((0.7, 2.6))
    # light (0.2): 0.5 x 0.8 + 0.5 x 0.9 = 0.85; 0.5 x 1.25 + 0.5 x 1.2 = 1.225
    g, _ = table.like("E2E", "vllm", "h100-sxm", False, 0.2, 0.5)
    assert (g.low, g.high) == pytest.approx((0.85, 1.225))


def test_the_table_reads_composed_for_e2e_only():
    ok = '{"groups": [], "support": [], "methods": {"E2E": "composed", "TTFT": "row/full"}}'
    assert parse(ok).composed("E2E")
    with pytest.raises(CostModelError, match="method 'composed' of 'TTFT' unknown"):
        parse('{"groups": [], "support": [], "methods": {"TTFT": "composed"}}')


def _res(dep: str, metric: str, ratio: float, ttft_share: float | None = None) -> Residual:
    """A row whose measured over simulated value is ``ratio`` (e = 1 / ratio - 1)."""
    return Residual(dep, metric, "vllm", "h100-sxm", False, 1 / ratio - 1, None, ttft_share)


def test_the_composed_candidate_refits_its_parts_without_the_left_out_deployment():
    # ten deployments with one TTFT row (y / y_hat 0.5, 0.6, ..., 1.4) and one TPOT row (0.90, 0.92,
    # ..., 1.08); deployment "e" adds a TTFT row 10x slow, a TPOT row and one E2E row at TTFT share 0.2
    rows = [_res(f"d{i}", "TTFT", 0.5 + i / 10) for i in range(10)]
    rows += [_res(f"d{i}", "TPOT", 0.9 + i / 50) for i in range(10)]
    rows += [_res("e", "TTFT", 10.0), _res("e", "TPOT", 1.0), _res("e", "E2E", 1.0, 0.2)]
    (score,) = cross_validate_composed(rows, Method.named("row/metric"), Method.named("row/metric")).values()
    # with "e" left out, each part has n = 10 rows: ranks (floor(11 x 0.1), ceil(11 x 0.9)) = (1, 10), the
    # smallest and largest: TTFT 0.5-1.4, TPOT 0.90-1.08 ("e"'s 10x TTFT row is not in the fit);
    # E2E band 0.2 x 0.5 + 0.8 x 0.90 = 0.82 to 0.2 x 1.4 + 0.8 x 1.08 = 1.144: width 1.144 / 0.82 - 1
    assert (score.rows, score.deployments, score.unanswered, score.inside) == (1, 1, 0, 1)
    assert score.width == pytest.approx(1.144 / 0.82 - 1)


def test_simulate_predict_prints_the_composed_band_at_the_run_s_split(monkeypatch):
    stat = lambda m: NS(mean=m, p90=1.5 * m)  # noqa: E731

    def run(scale: float) -> NS:
        return NS(
            ttft=stat(0.1 * scale),
            tpot=stat(0.01 * scale),
            e2e=stat(2.0 * scale),
            output_tokens_per_s=1000 / scale,
            requests_per_s=4 / scale,
            coverage=None,
        )

    monkeypatch.setattr(intervals, "served_errors", lambda: TABLE)
    iv = intervals.SimInterval(run(1.0), run(0.95), run(1.05), (0.1, 0.9), ("vllm", "h100-sxm", False))
    assert iv.ttft_share == pytest.approx(0.05)  # 0.1 s of 2.0 s
    # factors 0.05 x 0.5 + 0.95 x 0.9 = 0.88 and 0.05 x 2 + 0.95 x 1.2 = 1.24 on 2.0 s: 1.76-2.48 s,
    # wider than the kernels' 1.9-2.1 s on both ends (the hull)
    assert iv.calibrated["E2E mean s"] == pytest.approx((1.76, 2.48))
    assert "E2E composed at the run's simulated TTFT share 0.05" in iv.basis["E2E mean s"]
    assert any(line.startswith("expected E2E error") for line in iv.expected_errors())
    assert math.isclose(iv.calibrated["TTFT mean s"][1], 0.2)  # TTFT alone: 0.1 s x 2.0
