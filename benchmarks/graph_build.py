"""Time building and summing full-size model graphs (issue: well under a second).

Prints, per model and phase, the build time, the summing time and their
ratio to a one-second budget. Not a test: run it by hand,

    python -m benchmarks.graph_build
"""

from __future__ import annotations

import time

from costmodel.graph import expand, graph_total
from graphs import build_model, summarize
from models import ModelConfig, get_model

BUDGET_S = 1.0


def _time(fn, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    print(f"{'model':18s} {'phase':8s} {'dims':10s} {'build ms':>9s} {'sum ms':>8s} {'total/budget':>13s}")
    for name in ("llama-3.1-405b", "deepseek-v3", "mixtral-8x7b"):
        cfg = get_model(name)
        for label, c in (("config", cfg), ("symbolic", ModelConfig.symbolic(like=cfg))):
            for phase in ("decode", "prefill"):
                graph = build_model(c, phase)
                tb = _time(lambda c=c, phase=phase: build_model(c, phase))
                ts = _time(lambda graph=graph: summarize(graph))
                print(
                    f"{name:18s} {phase:8s} {label:10s} {tb * 1e3:9.1f} {ts * 1e3:8.1f} "
                    f"{(tb + ts) / BUDGET_S:13.3f}"
                )
        graph = build_model(cfg, "decode", batch=1, ctx=4096)
        te = _time(lambda graph=graph: graph_total(expand(graph)), repeats=2)
        print(f"{name:18s} {'decode':8s} {'expanded':10s} {'':>9s} {te * 1e3:8.1f} {te / BUDGET_S:13.3f}")


if __name__ == "__main__":
    main()
