"""Shape residuals (costmodel.measured.residual): inverse-distance weights by hand, the fade, properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pd = pytest.importorskip("pandas", reason="the [measured] extra is not installed")
pytest.importorskip("scipy", reason="the [measured] extra is not installed")

from costmodel.errors import CostModelError  # noqa: E402
from costmodel.measured.residual import ShapeResiduals, combined  # noqa: E402


def _two_points() -> ShapeResiduals:
    # m = 1 and m = 3 sit at 1 and 2 octaves (log2(1 + m)); measured 1.2x and 1.5x the model
    rows = pd.DataFrame({"m": [1, 3], "latency_s": [1.2e-6, 1.5e-6]})
    return ShapeResiduals.from_rows(rows, ["m"], np.array([1e-6, 1e-6]))


def test_inverse_distance_weights_by_hand():
    res = _two_points()
    # query m = 1: distances 0 and 1 octave; weights 1/(0 + 0.05) = 20 and 1/(1 + 0.05)
    w = np.array([20.0, 1 / 1.05])
    r = np.log([1.2, 1.5])
    rho = (w @ r) / w.sum()
    dbar = (w @ [0.0, 1.0]) / w.sum()
    want = rho * math.exp(-(dbar**2))  # fade length 1 octave
    got = res.correction(pd.DataFrame({"m": [1]}))
    assert got[0] == pytest.approx(want, rel=1e-12)
    # the grid hit dominates: the corrected model is within 1 % of the 1.2x measured there
    assert math.exp(got[0]) == pytest.approx(1.2, rel=0.01)


def test_far_shapes_fall_back_to_the_physical_model():
    res = _two_points()
    # m = 1023 is 10 octaves out: the correction fades to nothing
    assert abs(res.correction(pd.DataFrame({"m": [1023]}))[0]) < 1e-20


def test_sources_average_and_none_is_no_correction():
    a, b = _two_points(), ShapeResiduals.from_rows(pd.DataFrame({"m": [1], "latency_s": [0.8]}), ["m"], [1.0])
    q = pd.DataFrame({"m": [1]})
    assert combined([a, b], q)[0] == pytest.approx((a.correction(q)[0] + b.correction(q)[0]) / 2)
    assert combined([], q).tolist() == [0.0]


def test_bad_input_is_a_clear_error():
    res = _two_points()
    with pytest.raises(CostModelError, match="missing"):
        res.correction(pd.DataFrame({"n": [1]}))
    with pytest.raises(CostModelError, match="finite"):
        res.correction(pd.DataFrame({"m": [float("nan")]}))
    with pytest.raises(CostModelError, match="positive prediction"):
        ShapeResiduals.from_rows(pd.DataFrame({"m": [1], "latency_s": [1.0]}), ["m"], [0.0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-2, 2), min_size=1, max_size=12),
    st.integers(0, 4096),
)
def test_correction_stays_within_the_residuals(rs, q):
    """A weighted mean, faded towards zero: never outside [min(0, r), max(0, r)]."""
    m = np.arange(len(rs)) * 37
    rows = pd.DataFrame({"m": m, "latency_s": np.exp(rs)})
    c = ShapeResiduals.from_rows(rows, ["m"], np.ones(len(rs))).correction(pd.DataFrame({"m": [q]}))[0]
    assert min(0.0, min(rs)) - 1e-12 <= c <= max(0.0, max(rs)) + 1e-12
