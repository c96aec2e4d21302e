"""Llama-3.1-8B on an H100: P99 TTFT and TPOT against the request rate, the highest rate within
TTFT <= 1 s and TPOT <= 50 ms (P99), and 1 prefill : 2 decode GPUs against 3 aggregated ones.

Prompts and outputs are ShareGPT-like: lognormal with means of 1000 and 250 tokens and a log
standard deviation of 1.0; arrivals are Poisson; the engine is the default profile, vLLM V1
(``vllm@1``: 8192-token budget, 1024 sequences, 16-token blocks, 90 % of memory, chunked prefill,
prefix caching; each default sourced in graphs/serving/engines/, listed by ``costmodel simulate
--engine list``). Every iteration costs the roofline bound of its exact batch, so these are the
latencies of a perfect engine on this hardware; a per-iteration overhead (``--overhead-s`` on the
command line) adds the CPU side.

    python examples/serving_simulation.py [--small] [--plot out/sim]
"""

from __future__ import annotations

import sys

from graphs.serving import Topology, max_rate, simulate, synthetic

MODEL, DEVICE = "llama-3.1-8b", "h100"
PROMPT, OUTPUT = "lognormal:1000,1.0", "lognormal:250,1.0"
SLO_TTFT, SLO_TPOT = 1.0, 0.05


def main() -> None:
    small = "--small" in sys.argv
    n = 300 if small else 2000
    rates = (10, 30) if small else (5, 10, 20, 30, 35, 40, 45)
    rows = []
    print(f"{MODEL} on {DEVICE}, {n} requests per rate, prompts {PROMPT}, outputs {OUTPUT}")
    print(
        f"  {'req/s':>6s} {'P50 TTFT':>9s} {'P99 TTFT':>9s} {'P50 TPOT':>9s} {'P99 TPOT':>9s} {'tok/s':>7s} {'batch':>6s}"
    )
    for rate in rates:
        r = simulate(MODEL, DEVICE, synthetic(n, rate=rate, prompt=PROMPT, output=OUTPUT, seed=7), rate=rate)
        rows.append({"rate": rate, "ttft_p99": r.ttft.p99, "tpot_p99": r.tpot.p99})
        print(
            f"  {rate:6.0f} {r.ttft.p50:9.3f} {r.ttft.p99:9.3f} {r.tpot.p50 * 1e3:7.1f}ms {r.tpot.p99 * 1e3:7.1f}ms "
            f"{r.output_tokens_per_s:7.0f} {r.mean_batch:6.1f}"
        )
    m = max_rate(
        MODEL,
        DEVICE,
        slo_ttft=SLO_TTFT,
        slo_tpot=SLO_TPOT,
        requests=300 if small else 1000,
        prompt=PROMPT,
        output=OUTPUT,
        seed=7,
    )
    found = (
        f"{m.rate:.1f} requests/s per H100"
        if m.rate is not None
        else f"not determined (every probe up to the {m.ceiling_rate:.1f} requests/s ceiling meets; too few requests)"
    )
    print(
        f"max rate with P99 TTFT <= {SLO_TTFT} s and P99 TPOT <= {SLO_TPOT * 1e3:.0f} ms: "
        f"{found} ({len(m.probes)} simulations)"
    )
    rate = 60.0 if not small else 40.0
    reqs = synthetic(n, rate=rate, prompt=PROMPT, output=OUTPUT, seed=8)
    agg = simulate(MODEL, DEVICE, reqs, topology=Topology(replicas=3), rate=rate)
    dis = simulate(
        MODEL,
        DEVICE,
        reqs,
        topology=Topology(prefill_replicas=1, decode_replicas=2, link_bandwidth=50e9),
        rate=rate,
    )
    print(
        f"3 GPUs at {rate:.0f} requests/s: aggregated (3 replicas) vs disaggregated (1 prefill : 2 decode, 50 GB/s)"
    )
    for name, r in (("aggregated", agg), ("disaggregated", dis)):
        print(
            f"  {name:14s} P99 TTFT {r.ttft.p99:7.3f} s  P50 TPOT {r.tpot.p50 * 1e3:5.1f} ms  "
            f"P99 TPOT {r.tpot.p99 * 1e3:5.1f} ms  {r.output_tokens_per_s_per_device:6.0f} tok/s/GPU"
        )
    if "--plot" in sys.argv:
        from costmodel.plots import latency_cdf_plot, rate_sweep_plot

        out = sys.argv[sys.argv.index("--plot") + 1]
        rate_sweep_plot(rows, f"{out}-rates.png", SLO_TTFT, SLO_TPOT)
        latency_cdf_plot(
            {
                "aggregated TTFT": agg.per_request["ttft_s"],
                "disaggregated TTFT": dis.per_request["ttft_s"],
                "aggregated TPOT": agg.per_request["tpot_s"],
                "disaggregated TPOT": dis.per_request["tpot_s"],
            },
            f"{out}-cdf.png",
        )
        print(f"figures: {out}-rates.png, {out}-cdf.png")


if __name__ == "__main__":
    main()
