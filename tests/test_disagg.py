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
