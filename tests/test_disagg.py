import pytest

from graphs import prefill_report
from graphs.serving.analysis.disagg import disaggregated


def test_disagg_without_a_tdp_prices_no_energy():
    """A device whose catalog entry has no TDP (TPU v6e: Google states none) gets no energy per
    token, None rather than a NaN, while its device-hours are still priced."""
    import math

    from graphs.serving.analysis.disagg import disaggregated

    r = disaggregated(
        "llama-3.1-8b",
        "tpu-v6e",
        "tpu-v6e",
        prompt=1000,
        output=200,
        decode_batch=8,
        link_bandwidth=50e9,
        rate=2.0,
    )
    assert r.energy_per_token_j is None and r.colocated is not None
    assert r.colocated.energy_per_token_j is None
    assert r.device_hours_per_million_tokens is not None and math.isfinite(r.device_hours_per_million_tokens)


def test_a_sized_deployments_energy_is_its_busy_time_at_tdp():
    """docs/conventions.md: energy per token is TDP x step time / tokens, busy time. A review
    found ``serve disagg --rate 1`` at 3.320 J/output token and ``--rate 2`` at 1.660: the
    provisioned devices at TDP all the time over the rate's tokens. Per output token it is a
    request's prefill on A at A's TDP (B200 1000 W) over its outputs, plus one decode step on B at
    B's TDP (H100 700 W) over the batch: the same at every rate."""
    kw = dict(prompt=1024, output=128, decode_batch=8, link_bandwidth=12.5e9)
    one = disaggregated("llama-3.1-8b", "b200", "h100", rate=1.0, **kw)
    two = disaggregated("llama-3.1-8b", "b200", "h100", rate=2.0, **kw)
    want = one.ttft.prefill_s * 1000 / 128 + one.tpot_s * 700 / 8
    assert one.energy_per_token_j == pytest.approx(want, rel=1e-12)
    assert two.energy_per_token_j == pytest.approx(one.energy_per_token_j, rel=1e-12)
    t_pf_b = prefill_report("llama-3.1-8b", "h100", seq=1024).step_s
    assert one.colocated.energy_per_token_j == pytest.approx(t_pf_b * 700 / 128 + one.tpot_s * 700 / 8, rel=1e-9)
