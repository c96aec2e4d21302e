"""The served-error calibration (graphs.serving.sim.served_errors): split conformal ranks and
coverage as the theorem states them, the groups' fall-back, the shipped table read strictly,
and the held-out split kept out of it."""

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from costmodel.errors import CostModelError
from graphs.serving.sim.conformal import Method, Residual, fit_groups
from graphs.serving.sim.served_errors import (
    ALPHA,
    MIN_DEPLOYMENTS,
    ErrorGroup,
    ServedErrors,
    conformal_ranks,
    parse,
    served_errors,
)

ROOT = Path(__file__).resolve().parents[1]


def test_ranks_are_the_split_conformal_order_statistics():
    # Lei et al. (2018), split conformal: upper rank ceil((n+1)(1-a/2)), lower floor((n+1)a/2)
    assert conformal_ranks(19) == (2, 18)  # (20 x 0.1, 20 x 0.9)
    assert conformal_ranks(9) == (1, 9)  # 10 x 0.9 = 9 <= 9
    assert conformal_ranks(8) is None  # 9 x 0.9 = 8.1 -> 9 > 8: no finite upper end


def _fit(errors, deployments=3, metric="TPOT"):
    """The one plain row-weighted group of ``errors`` (e = y_hat / y - 1), its rows dealt over
    ``deployments`` deployments in turn."""
    rows = [
        Residual(f"d{i % deployments}", metric, "vllm", "h100-sxm", False, e) for i, e in enumerate(errors)
    ]
    groups = fit_groups(rows, Method("row", "metric", False))
    return groups[0] if groups else None


def test_a_group_of_nine_spans_its_extremes():
    # errors e = y_hat / y - 1; with ranks (1, 9) the ends are the extreme ratios y / y_hat:
    # the row simulated 2x too high gives y / y_hat = 1/2, the one simulated half as high gives 2
    errors = [1.0, 0.5, 0.2, 0.1, 0.0, -0.1, -0.2, -0.3, -0.5]
    g = _fit(errors)
    assert g is not None
    assert math.isclose(g.low, 0.5) and math.isclose(g.high, 2.0)
    assert math.isclose(g.median_abs, 0.2)  # |e| sorted: 0, .1, .1, .2, .2, .3, .5, .5, 1
    assert g.interval(10.0) == pytest.approx((5.0, 20.0))
    assert _fit(errors[:8]) is None  # ceil(9 x 0.9) = 9 > 8 rows: no upper end
    with pytest.raises(CostModelError, match="finite"):
        _fit([*errors, float("nan")])


def test_coverage_holds_on_exchangeable_residuals():
    """For exchangeable rows the split-conformal interval covers a new one with probability in
    [1 - a, 1 - a + 2/(n+1)] (Lei et al. 2018, Theorem 2.2, continuous residuals): checked by
    drawing 4,000 calibration sets of 40 lognormal errors and one new row each."""
    rng = np.random.default_rng(7)
    n, trials = 40, 4000
    hits = 0
    for _ in range(trials):
        y_hat_over_y = np.exp(rng.normal(0.1, 0.2, n + 1))  # a biased, noisy simulator
        g = _fit(list(y_hat_over_y[:n] - 1), deployments=5, metric="TTFT")
        assert g is not None
        ratio = 1 / y_hat_over_y[n]  # the new row's y / y_hat
        hits += g.low <= ratio <= g.high
    cover = hits / trials
    se = math.sqrt(0.8 * 0.2 / trials)
    assert 1 - ALPHA - 3 * se <= cover <= 1 - ALPHA + 2 / (n + 1) + 3 * se


def _group(**kw):
    base = dict(
        metric="TTFT",
        framework=None,
        device=None,
        moe=None,
        n=20,
        deployments=5,
        low=0.8,
        high=1.5,
        median_abs=0.1,
        label="TTFT, every validated deployment",
    )
    return ErrorGroup(**{**base, **kw})


def test_lookup_falls_back_and_says_when_unlike():
    table = ServedErrors(
        (
            _group(),
            _group(framework="vllm", moe=False, label="TTFT vllm dense", low=0.9, high=1.2),
            # a device group of too few deployments is never used for the next one
            _group(
                framework="vllm",
                device="h100-sxm",
                moe=False,
                deployments=MIN_DEPLOYMENTS - 1,
                label="TTFT vllm h100-sxm dense",
            ),
            _group(moe=True, label="TTFT MoE", n=5),  # too few rows: skipped
        ),
        "test",
        "test",
    )
    g, like = table.like("TTFT", "vllm", "h100-sxm", False)
    assert (g.label, like) == ("TTFT vllm dense", True)
    g, like = table.like("TTFT", "sglang", "b200", True)
    assert (g.label, like) == ("TTFT, every validated deployment", False)
    assert "unlike what was validated" in table.statement("TTFT", "sglang", "b200", True)
    assert "+-10 %" in table.statement("TTFT", "vllm", "h100-sxm", False)
    assert not table.covers("E2E")
    with pytest.raises(CostModelError, match="E2E is not calibrated"):
        table.like("E2E", "vllm", "h100-sxm", False)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"groups": [{"metric": "TTFT"}]}',
        '{"groups": [{"metric": "TTFT", "framework": null, "device": null, "moe": null, "n": 9, '
        '"deployments": 3, "low": NaN, "high": 1.2, "median_abs": 0.1, "label": "x"}]}',
        '{"groups": [{"metric": "latency", "framework": null, "device": null, "moe": null, "n": 9, '
        '"deployments": 3, "low": 0.9, "high": 1.2, "median_abs": 0.1, "label": "x"}]}',
        '{"groups": [{"metric": "TTFT", "framework": null, "device": null, "moe": null, "n": 9, '
        '"deployments": 3, "low": 1.5, "high": 1.2, "median_abs": 0.1, "label": "x"}]}',
    ],
)
def test_a_damaged_table_is_refused(text):
    with pytest.raises(CostModelError, match=r"served_errors\.json"):
        parse(text)


def test_the_shipped_table_leaves_the_held_out_split_out():
    table = served_errors()
    assert all(table.covers(m) for m in ("throughput", "TPOT", "TTFT"))
    held = tomllib.loads((ROOT / "benchmarks" / "data" / "heldout.toml").read_text())["deployments"]
    assert len(held) == len(set(held)) > 0
    assert f"{len(held)} deployments" in table.heldout
    # the overhead defaults were fitted to InferenceX's Llama-3.1-70B FP8 H200 runs
    # (docs/overhead_fit.md): none of those deployments may be held out
    assert not [k for k in held if "llama-3.1-70b|h200-sxm|fp8" in k]
    doc = json.loads((ROOT / "graphs" / "serving" / "sim" / "data" / "served_errors.json").read_text())
    assert doc["alpha"] == ALPHA


def test_the_shipped_table_is_what_the_script_computes():
    """Regenerated from the two generated pages and the split, the table is the shipped one."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from benchmarks import served_errors as script
    rows = script.residual_rows()
    cal = [r for r in rows if r["deployment"] not in script.heldout()]
    got = sorted((g.to_dict() for g in script.calibrate(cal)), key=lambda d: d["label"])
    shipped = sorted((g.to_dict() for g in served_errors().groups), key=lambda d: d["label"])
    assert got == shipped
    # each metric by the method the grouped cross-validation chose (interval_selection.py --write)
    choice = json.loads((ROOT / "benchmarks" / "data" / "interval_choice.json").read_text())
    assert dict(served_errors().methods) == choice["methods"]
    assert sorted(served_errors().support) == sorted(script.support(cal))


def test_neighbour_priced_kernels_state_the_left_out_devices_errors():
    from costmodel.hardware import get_device
    from graphs.serving.sim.served_errors import DeviceError

    devs = (
        DeviceError("gemm", "h100-sxm", "HBM", 100, 5.4),
        DeviceError("gemm", "h200-sxm", "HBM", 100, 5.0),
        DeviceError("gemm", "a100-sxm-80gb", "HBM", 100, 14.1),
        DeviceError("gemm", "l40s", "GDDR", 100, 26.3),
        DeviceError("gemm", "rtx-pro-6000", "GDDR", 100, 21.3),
    )
    table = ServedErrors((), "t", "t", devs)
    # MI300X (HBM3): the three HBM devices' medians 5.0, 5.4, 14.1 -> median 5.4, worst 14.1
    line = table.neighbour("gemm", get_device("mi300x"))
    assert "+-5 %" in line and "3 measured HBM devices" in line and "worst 14 % on a100-sxm-80gb" in line
    assert "no AMD device is measured" in line
    # L4 (GDDR6): the two GDDR parts' 21.3 and 26.3 -> median 23.8
    line = table.neighbour("gemm", get_device("l4"))
    assert "+-24 %" in line and "2 measured GDDR devices" in line and "AMD" not in line
    assert table.neighbour("moe", get_device("l4")) is None  # no device left out for that family


def test_the_shipped_device_errors_are_the_accuracy_page_s():
    # docs/accuracy.md, held-out error, device split, "calibrated + shape residuals" of gemm on
    # l40s: "39.7 / 26.3 / 94.5" (MAPE / median / P90): the median is what is shipped
    table = served_errors()
    (l40s,) = [d for d in table.devices if (d.family, d.device) == ("gemm", "l40s")]
    assert (l40s.kind, l40s.median_pct) == ("GDDR", 26.3)
    assert {d.kind for d in table.devices if d.device == "gb200"} == {"HBM"}


def test_bound_predictor_refuses_a_quantile():
    """The bound has no held-out errors: a quantile asked of it is refused, not dropped."""
    from costmodel.errors import CostModelError
    from graphs.serving.pricing.predictor import Predictor

    with pytest.raises(CostModelError, match="needs a framework"):
        Predictor.of(None, quantile=0.9)
    assert Predictor.of(None).framework is None
