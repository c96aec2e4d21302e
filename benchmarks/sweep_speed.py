"""A 1,000,000-point decode sweep: the compiled step cost vs a fair hand-written numpy vs sympy.

The quantity is what ``costmodel sweep`` computes: Llama-3.1-8B's decode step on an H100 as
the sum over kernels of each kernel's roofline,

    T(B, ctx) = sum_k repeat_k * max_u(term_{k,u}(B, ctx)),

with each term (tensor, vector, SFU FLOPs over their peaks, DRAM bytes over bandwidth) a
polynomial in ``B`` and ``ctx`` read off the graph. The compiled version is the one ``sweep``,
``search`` and the reports share: ``compiled_step(model, device, "decode").step_array``. The hand-written version evaluates the *same* sum with
plain numpy, kernel by kernel and term by term, from the same coefficients (:mod:`_hand`); the two must agree
to 1e-12. The per-point version substitutes into the sympy expression. Prints each time and the
ratios (target: compiled within 1.5x of the hand-written numpy).

    python -m benchmarks.sweep_speed
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.baselines.hand import kernels as hand_kernels
from benchmarks.baselines.hand import vector
from costmodel import get_device
from costmodel.symbols import B, ctx
from graphs import build_model, step_time
from graphs.serving.step.compiled import compiled_step
from models import get_model

N_POINTS = 1_000_000
N_SYMPY = 200  # per-point substitution is extrapolated from this many points


def main() -> None:
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    g = build_model(cfg, "decode")
    expr = step_time(g, hw)
    f = compiled_step(cfg, hw, "decode").step_array

    kernels = hand_kernels(g, hw)
    hand = vector(kernels)

    rng = np.random.default_rng(0)
    b = rng.integers(1, 512, N_POINTS).astype(float)
    x = rng.integers(1, 131072, N_POINTS).astype(float)
    f(b[:10], x[:10])
    hand(b[:10], x[:10])

    def best(fn, reps: int = 5) -> float:
        t = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            t = min(t, time.perf_counter() - t0)
        return t

    t_comp = best(lambda: f(b, x))
    t_hand = best(lambda: hand(b, x))
    assert np.allclose(f(b, x), hand(b, x), rtol=1e-12), "the two implementations disagree"
    t0 = time.perf_counter()
    for i in range(N_SYMPY):
        float(expr.subs({B: int(b[i]), ctx: int(x[i])}))
    t_sym = (time.perf_counter() - t0) / N_SYMPY * N_POINTS
    print(f"{N_POINTS:,} points of the per-kernel step T(B, ctx), llama-3.1-8b decode on h100")
    print(f"  ({len(kernels)} kernels, {sum(len(p) for _, p in kernels)} roofline terms)")
    print(f"  compiled_step         {t_comp * 1e3:9.1f} ms")
    print(f"  hand-written numpy    {t_hand * 1e3:9.1f} ms")
    print(f"  per-point sympy subs  {t_sym:9.1f} s (extrapolated from {N_SYMPY} points)")
    print(f"  compiled / hand-written = {t_comp / t_hand:.2f}x (target <= 1.5x)")
    print(f"  sympy / compiled        = {t_sym / t_comp:,.0f}x")


if __name__ == "__main__":
    main()
