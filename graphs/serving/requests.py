"""Request workloads for the serving simulator: arrivals, prompt and output lengths, traces.

* Arrivals: ``poisson`` (exponential gaps at ``rate`` requests/s) or ``gamma:CV`` (gamma gaps
  with mean ``1/rate`` and coefficient of variation ``CV``: bursty above 1, regular below), or
  the arrival times of a trace.
* Lengths (tokens): ``fixed:N``, ``uniform:LO,HI`` (integers, both ends included) or
  ``lognormal:MEAN,SIGMA`` (``MEAN`` the mean length, ``SIGMA`` the standard deviation of its
  logarithm, as ShareGPT-like length distributions are usually fitted), clipped to
  ``[1, max]``.
* A trace: CSV with a header ``arrival_s,prompt_tokens,output_tokens`` or JSON lines with those
  keys, arrivals non-decreasing; optional ``prefix_id`` and ``prefix_tokens`` name a prompt prefix
  that requests share (for prefix caching).

A fixed ``seed`` makes a workload reproducible (numpy's PCG64).

>>> reqs = synthetic(3, rate=2.0, prompt="fixed:128", output="uniform:10,20", seed=1)
>>> [r.prompt for r in reqs], all(10 <= r.output <= 20 for r in reqs)
([128, 128, 128], True)
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from costmodel.errors import CostModelError

__all__ = ["Request", "synthetic", "load_trace", "sample_lengths", "arrival_times", "MAX_TOKENS"]

MAX_TOKENS = 10**7  #: longest prompt or output a request may have


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (s), its prompt and output lengths (tokens)."""

    rid: int
    arrival_s: float
    prompt: int
    output: int
    prefix_id: int | None = None  #: requests with the same id share their first ``prefix`` prompt tokens
    prefix: int = 0


def _numbers(spec: str, field: str, n: int) -> list[float]:
    kind, _, args = spec.partition(":")
    try:
        values = [float(x) for x in args.split(",")] if args else []
    except ValueError:
        raise CostModelError(f"{field}: {spec!r} has a number that does not parse") from None
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise CostModelError(f"{field}: {kind} takes {n} finite number(s), got {spec!r}")
    return values


def sample_lengths(
    spec: str, n: int, rng: np.random.Generator, field: str = "length", hi: int = MAX_TOKENS
) -> np.ndarray:
    """``n`` lengths (tokens, ints in ``[1, hi]``) drawn from ``spec`` (module doc)."""
    kind = spec.partition(":")[0]
    if kind == "fixed":
        (v,) = _numbers(spec, field, 1)
        if v < 1 or v != int(v) or v > hi:
            raise CostModelError(f"{field}: fixed length must be a whole number in [1, {hi}], got {spec!r}")
        return np.full(n, int(v), dtype=np.int64)
    if kind == "uniform":
        lo, up = _numbers(spec, field, 2)
        if lo < 1 or up < lo or up > hi or lo != int(lo) or up != int(up):
            raise CostModelError(f"{field}: uniform needs whole numbers 1 <= LO <= HI <= {hi}, got {spec!r}")
        return rng.integers(int(lo), int(up) + 1, n)
    if kind == "lognormal":
        mean, sigma = _numbers(spec, field, 2)
        if mean < 1 or mean > hi or not 0 <= sigma <= 5:
            raise CostModelError(
                f"{field}: lognormal needs 1 <= MEAN <= {hi} and 0 <= SIGMA <= 5, got {spec!r}"
            )
        mu = math.log(mean) - sigma**2 / 2  # so that the mean of the lengths is MEAN
        return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, hi).astype(np.int64)
    raise CostModelError(f"{field}: {spec!r} is not fixed:N, uniform:LO,HI or lognormal:MEAN,SIGMA")


def arrival_times(n: int, rate: float, process: str, rng: np.random.Generator) -> np.ndarray:
    """``n`` arrival times (s) from 0 at ``rate`` requests/s (``poisson`` or ``gamma:CV``)."""
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise CostModelError(f"rate must be a positive number of requests per second, got {rate!r}")
    if process == "poisson":
        gaps = rng.exponential(1 / rate, n)
    elif process.startswith("gamma"):
        (cv,) = _numbers(process, "arrival", 1)
        if not 0 < cv <= 100:
            raise CostModelError(f"arrival: gamma needs 0 < CV <= 100, got {process!r}")
        shape = 1 / cv**2
        gaps = rng.gamma(shape, 1 / (rate * shape), n)
    else:
        raise CostModelError(f"arrival: {process!r} is not poisson or gamma:CV")
    return np.cumsum(gaps) - gaps[0]  # the first request arrives at t = 0


def synthetic(
    n: int,
    *,
    rate: float,
    prompt: str,
    output: str,
    arrival: str = "poisson",
    seed: int = 0,
    shared_prefix: int = 0,
) -> list[Request]:
    """``n`` requests with the given arrival process and length distributions (module doc);
    with ``shared_prefix``, every prompt starts with the same ``shared_prefix`` tokens (a system
    prompt) before its drawn length."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10**7:
        raise CostModelError(f"requests must be a whole number in [1, 10000000], got {n!r}")
    if not isinstance(shared_prefix, int) or not 0 <= shared_prefix <= MAX_TOKENS:
        raise CostModelError(
            f"shared_prefix must be a whole number of tokens in [0, {MAX_TOKENS}], got {shared_prefix!r}"
        )
    rng = np.random.default_rng(seed)
    t = arrival_times(n, rate, arrival, rng)
    p = sample_lengths(prompt, n, rng, "prompt")
    o = sample_lengths(output, n, rng, "output")
    pid = 0 if shared_prefix else None
    return [
        Request(i, float(t[i]), shared_prefix + int(p[i]), int(o[i]), pid, shared_prefix) for i in range(n)
    ]


def _row(i: int, row: dict[str, object], where: str) -> tuple[float, int, int]:
    try:
        a = float(row["arrival_s"])  # type: ignore[arg-type]
        p, o = row["prompt_tokens"], row["output_tokens"]
        p_i, o_i = int(p), int(o)  # type: ignore[call-overload]
        if float(p) != p_i or float(o) != o_i:  # type: ignore[arg-type]
            raise ValueError
    except KeyError as exc:
        raise CostModelError(f"{where} row {i}: missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError):
        raise CostModelError(
            f"{where} row {i}: arrival_s, prompt_tokens and output_tokens must be numbers"
        ) from None
    if not math.isfinite(a) or a < 0:
        raise CostModelError(f"{where} row {i}: arrival_s must be a finite time >= 0, got {a}")
    for name, v in (("prompt_tokens", p_i), ("output_tokens", o_i)):
        if not 1 <= v <= MAX_TOKENS:
            raise CostModelError(f"{where} row {i}: {name} must be in [1, {MAX_TOKENS}], got {v}")
    return a, p_i, o_i


def load_trace(path: str | Path) -> list[Request]:
    """Requests from a CSV or JSON-lines trace (module doc); one-line errors name the row and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CostModelError(f"trace {path}: cannot read it ({type(exc).__name__})") from None
    rows: list[dict[str, object]] = []
    if path.suffix in (".jsonl", ".json"):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                raise CostModelError(f"trace {path} row {i}: not a JSON object") from None
            if not isinstance(obj, dict):
                raise CostModelError(f"trace {path} row {i}: not a JSON object")
            rows.append(obj)
    else:
        rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise CostModelError(f"trace {path}: no requests")
    if len(rows) > 10**7:
        raise CostModelError(f"trace {path}: more than 10,000,000 requests")
    out, last = [], 0.0
    for i, row in enumerate(rows, 1):
        a, p, o = _row(i, row, f"trace {path}")
        if a < last:
            raise CostModelError(
                f"trace {path} row {i}: arrival_s {a} is before the previous row's {last} (sort it)"
            )
        last = a
        out.append(Request(i - 1, a, p, o))
    return out
