"""Issue 47 item 2: on a device priced from other devices' fits, the served interval carries the
transfer's error (the leave-one-device-out median, read as a normal error's P90) beside the
whole-simulation residuals; a measured device's interval is unchanged."""

import math
from types import SimpleNamespace as NS

import pytest

from costmodel.hardware import get_device
from graphs.serving.pricing.kernel_sources import OTHER_DEVICES, Coverage
from graphs.serving.sim.intervals import P90_PER_MEDIAN, SimInterval
from graphs.serving.sim.served_errors import served_errors


def _run(scale: float, coverage: Coverage | None) -> NS:
    stat = lambda m: NS(mean=m, p90=1.5 * m)  # noqa: E731
    return NS(
        ttft=stat(0.1 * scale),
        tpot=stat(0.01 * scale),
        e2e=stat(2.0 * scale),
        output_tokens_per_s=1000 / scale,
        requests_per_s=4 / scale,
        coverage=coverage,
        queue_share=0.1,  # a light run (the TTFT band may be conditioned on the regime)
    )


def _interval(device: str, neighbours: dict[str, float]) -> SimInterval:
    cov = Coverage(measured_s=0.0, neighbour_s=1.0, bound_s=0.0, neighbours=neighbours)
    return SimInterval(
        _run(1.0, cov), _run(0.95, None), _run(1.05, None), (0.1, 0.9), ("vllm", device, False)
    )


def test_p90_per_median_of_a_normal_error():
    # Phi^-1(0.90) = 1.2816, Phi^-1(0.75) = 0.6745 (tables): 1.90
    assert P90_PER_MEDIAN == pytest.approx(1.2816 / 0.6745, rel=1e-4)


def test_an_unmeasured_device_is_widened_in_quadrature():
    neighbours = {f"gemm: {OTHER_DEVICES} on mi300x": 1.0}
    iv = _interval("mi300x", neighbours)
    m = served_errors().neighbour_pct("gemm", get_device("mi300x")) / 100
    assert iv.device_error == (pytest.approx(m), "gemm")
    plain = _interval("mi300x", {})  # same runs, no neighbour-priced family: the plain interval
    assert plain.device_error is None
    extra = math.log1p(P90_PER_MEDIAN * m)
    for label, (lo, hi) in iv.calibrated.items():
        p = iv.value(label)
        lo0, hi0 = plain.calibrated[label]
        # by hand: each end's log half-width and the transfer's, added as independent errors
        assert math.log(p / lo) == pytest.approx(math.hypot(math.log(p / lo0), extra))
        assert math.log(hi / p) == pytest.approx(math.hypot(math.log(hi0 / p), extra))
    assert "priced from other devices" in iv.basis["TPOT mean s"] and "gemm" in iv.basis["TPOT mean s"]
