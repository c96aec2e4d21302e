"""One point at a time and a million at once: the compiled step cost against a fair hand-written
evaluation of the same quantity, and against the symbolic path it replaced.

The quantity is Llama-3.1-8B's decode step on an H100 at batch ``B`` and context ``ctx``, as the
sum over kernels of each kernel's roofline (``T = sum_k r_k max_u t_ku(B, ctx)``):

* scalar: ``compiled_step(...).step(B, ctx)`` and the whole ``decode_report(...)`` (every field
  of the report) per call, against plain Python (``math``) over the same per-kernel term
  polynomials, hand-written from the graph's coefficients (:mod:`_hand`), and against the symbolic path the
  engine used before (build the numeric graph at the point, bound each node with sympy);
* vectorised: ``step_array`` over 1e6 random points, against numpy over the same polynomials.

Targets (issue 14): scalar <= 50 us per point, vectorised <= 100 ns per point, within 1.5x of
the hand-written baseline of the same quantity.

    python -m benchmarks.point_eval
"""

from __future__ import annotations

import math
import time

import numpy as np

from benchmarks.baselines.hand import kernels, scalar, vector
from costmodel import as_float, get_device
from graphs import build_model, decode_report, step_time
from graphs.serving.step.compiled import compiled_step
from models import get_model


def best(fn, reps: int = 5) -> float:
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main() -> None:
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    g = build_model(cfg, "decode")
    ks = kernels(g, hw)
    c = compiled_step(cfg, hw, "decode")
    hand_scalar, hand_numpy = scalar(ks), vector(ks)

    rng = np.random.default_rng(0)
    pts = [
        (int(b), int(x))
        for b, x in zip(rng.integers(1, 512, 2000), rng.integers(1, 131072, 2000), strict=True)
    ]
    for b, x in pts[:50]:
        assert math.isclose(c.step(b, x), hand_scalar(b, x), rel_tol=1e-12)
    decode_report(cfg, hw, batch=1, ctx=1)  # compile outside the timing

    def per_point(fn) -> float:
        return best(lambda: [fn(b, x) for b, x in pts], 3) / len(pts)

    t_step = per_point(c.step)
    t_hand = per_point(hand_scalar)
    t_report = per_point(lambda b, x: decode_report(cfg, hw, batch=b, ctx=x))
    t0 = time.perf_counter()
    for b, x in pts[:20]:
        as_float(step_time(build_model(cfg, "decode", batch=b, ctx=x), hw))
    t_symbolic = (time.perf_counter() - t0) / 20

    n = 1_000_000
    bv = rng.integers(1, 512, n).astype(float)
    xv = rng.integers(1, 131072, n).astype(float)
    assert np.allclose(c.step_array(bv[:1000], xv[:1000]), hand_numpy(bv[:1000], xv[:1000]), rtol=1e-12)
    t_vec = best(lambda: c.step_array(bv, xv)) / n
    t_hvec = best(lambda: hand_numpy(bv, xv)) / n

    print(f"llama-3.1-8b decode step on h100 ({len(ks)} kernels), per point")
    print(f"  scalar  compiled_step.step      {t_step * 1e6:9.2f} us")
    print(
        f"          hand-written math       {t_hand * 1e6:9.2f} us   compiled / hand = {t_step / t_hand:.2f}x"
    )
    print(f"          decode_report (all)     {t_report * 1e6:9.2f} us   (target <= 50 us)")
    print(
        f"          symbolic path (before)  {t_symbolic * 1e3:9.2f} ms   {t_symbolic / t_report:,.0f}x decode_report"
    )
    print(f"  vector  compiled step_array     {t_vec * 1e9:9.1f} ns   (target <= 100 ns)")
    print(
        f"          hand-written numpy      {t_hvec * 1e9:9.1f} ns   compiled / hand = {t_vec / t_hvec:.2f}x"
    )


if __name__ == "__main__":
    main()
