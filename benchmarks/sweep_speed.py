"""A 1,000,000-point decode sweep: compiled symbolic totals vs hand-written numpy vs sympy.

The formula is Llama-3.1-8B's whole decode step as one roofline on an H100,
T(B, ctx) = max(F_tensor/P_tensor, F_vector/P_vector, F_sfu/P_sfu, D/beta),
taken from the graph's totals and compiled once with lambdify. The
hand-written version types the same closed form with numpy; the per-point
version substitutes into the sympy expression. Prints the time of each and
the ratios (target: compiled within 1.5x of hand-written numpy).

    python benchmarks/sweep_speed.py
"""

from __future__ import annotations

import time

import numpy as np
import sympy

from costmodel import as_float, bound, get_device
from costmodel.frontier import compile_expr
from costmodel.symbols import B, ctx
from graphs import build_model, op_total
from models import get_model

N_POINTS = 1_000_000
N_SYMPY = 200  # per-point substitution is extrapolated from this many points


def main() -> None:
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    terms = bound(op_total(build_model(cfg, "decode")), hw).terms
    expr = sympy.Max(*terms.values())
    f = compile_expr(expr, (B, ctx))

    # the same closed form, typed by hand from the graph's coefficients
    coeff = {k: sympy.Poly(sympy.expand(v), B, ctx).as_dict() for k, v in terms.items()}

    def c(k: str, mono: tuple[int, int]) -> float:
        return as_float(coeff[k].get(mono, 0))

    t_b, t_bc, t_0 = c("tensor", (1, 0)), c("tensor", (1, 1)), c("tensor", (0, 0))
    v_b, v_bc = c("vector", (1, 0)), c("vector", (1, 1))
    s_b, s_bc = c("sfu", (1, 0)), c("sfu", (1, 1))
    d_0, d_b, d_bc = c("dram", (0, 0)), c("dram", (1, 0)), c("dram", (1, 1))

    def hand(b: np.ndarray, x: np.ndarray) -> np.ndarray:
        bc = b * x
        return np.maximum(
            np.maximum(t_0 + t_b * b + t_bc * bc, v_b * b + v_bc * bc),
            np.maximum(s_b * b + s_bc * bc, d_0 + d_b * b + d_bc * bc),
        )

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
    assert np.allclose(f(b, x), hand(b, x), rtol=1e-12), "hand-written formula disagrees"
    t0 = time.perf_counter()
    for i in range(N_SYMPY):
        float(expr.subs({B: int(b[i]), ctx: int(x[i])}))
    t_sym = (time.perf_counter() - t0) / N_SYMPY * N_POINTS
    print(f"{N_POINTS:,} points of T(B, ctx) for llama-3.1-8b decode on h100")
    print(f"  compiled (lambdify)   {t_comp * 1e3:9.1f} ms")
    print(f"  hand-written numpy    {t_hand * 1e3:9.1f} ms")
    print(f"  per-point sympy subs  {t_sym:9.1f} s (extrapolated from {N_SYMPY} points)")
    print(f"  compiled / hand-written = {t_comp / t_hand:.2f}x (target <= 1.5x)")
    print(f"  sympy / compiled        = {t_sym / t_comp:,.0f}x")


if __name__ == "__main__":
    main()
