"""Request workloads for the serving simulator: arrivals, prompt and output lengths, traces.

* Arrivals: ``poisson`` (exponential gaps at ``rate`` requests/s) or ``gamma:CV`` (gamma gaps
  with mean ``1/rate`` and coefficient of variation ``CV``: bursty above 1, regular below), or
  the arrival times of a trace.
* Lengths (tokens): ``fixed:N``, ``uniform:LO,HI`` (integers, both ends included) or
  ``lognormal:MEAN,SIGMA`` (``MEAN`` the mean length, ``SIGMA`` the standard deviation of its
  logarithm, as ShareGPT-like length distributions are usually fitted), clipped to
  ``[1, max]``.
* A trace: CSV with a header ``arrival_s,prompt_tokens,output_tokens`` or JSON lines with those
  keys, arrivals non-decreasing (absolute times such as Unix timestamps are rebased to the
  first arrival, exactly); optional ``prefix_id`` (any text) and ``prefix_tokens`` (its length,
  at most the prompt's) name a prompt prefix that requests share (for prefix caching).

A fixed ``seed`` makes a workload reproducible (numpy's PCG64).

>>> reqs = synthetic(3, rate=2.0, prompt="fixed:128", output="uniform:10,20", seed=1)
>>> [r.prompt for r in reqs], all(10 <= r.output <= 20 for r in reqs)
([128, 128, 128], True)
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import IO

import numpy as np

from costmodel.errors import CostModelError

__all__ = [
    "Request",
    "Trace",
    "synthetic",
    "load_trace",
    "read_trace",
    "sample_lengths",
    "arrival_times",
    "MAX_TOKENS",
    "RATE_RANGE",
]

MAX_TOKENS = 10**7  #: longest prompt or output a request may have
#: request rates accepted (requests/s): one in about 12 days to a billion a second
RATE_RANGE = (1e-6, 1e9)


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
    lo, hi = RATE_RANGE
    if not (isinstance(rate, int | float) and not isinstance(rate, bool) and lo <= rate <= hi):
        raise CostModelError(f"rate must be in [{lo:g}, {hi:g}] requests per second, got {rate!r}")
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


MAX_TRACE_BYTES = 1 << 30  #: largest trace file read (1 GiB)
MAX_TRACE_ROWS = 10**7  #: most requests a trace may hold
MAX_LINE_CHARS = 1 << 20  #: longest line of a trace
#: digits kept when arrivals are rebased: a time up to 1e18 s to 1e-40 s exactly
_EXACT_DIGITS = 60


@dataclass(frozen=True)
class Trace:
    """A trace's requests, arrivals rebased so that the first is at 0 (``origin_s`` its original
    time: absolute timestamps keep their precision, the differences being taken exactly)."""

    requests: list[Request]
    origin_s: float  #: the first row's arrival_s, subtracted from every arrival
    prefixes: int  #: distinct prefix_id values


def _int_field(row: dict[str, object], name: str, where: str, lo: int) -> int:
    v = row[name]
    try:
        if not isinstance(v, str | int | float | Decimal):  # a JSON list, object or null
            raise TypeError
        n = int(v)
        if isinstance(v, bool) or float(v) != n:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise CostModelError(f"{where}: {name} must be a whole number, got {str(v)[:40]!r}") from None
    if not lo <= n <= MAX_TOKENS:
        raise CostModelError(f"{where}: {name} must be in [{lo}, {MAX_TOKENS}], got {n}")
    return n


def _row(row: dict[str, object], where: str) -> tuple[Decimal, int, int, object, int]:
    """(arrival, prompt, output, prefix id or None, prefix tokens) of one row."""
    for name in ("arrival_s", "prompt_tokens", "output_tokens"):
        if row.get(name) is None:
            raise CostModelError(f"{where}: missing field {name!r}")
    try:
        a = Decimal(str(row["arrival_s"]).strip())
    except InvalidOperation:
        raise CostModelError(
            f"{where}: arrival_s must be a number, got {str(row['arrival_s'])[:40]!r}"
        ) from None
    if not a.is_finite() or a < 0 or a > Decimal("1e18"):
        raise CostModelError(f"{where}: arrival_s must be a finite time in [0, 1e18] s, got {a}")
    p = _int_field(row, "prompt_tokens", where, 1)
    o = _int_field(row, "output_tokens", where, 1)
    pid = row.get("prefix_id")
    has_tokens = row.get("prefix_tokens") not in (None, "")
    if pid in (None, ""):
        if has_tokens:
            raise CostModelError(f"{where}: prefix_tokens needs a prefix_id naming the shared prefix")
        return a, p, o, None, 0
    if not has_tokens:
        raise CostModelError(f"{where}: prefix_id needs prefix_tokens (how many prompt tokens are shared)")
    k = _int_field(row, "prefix_tokens", where, 0)
    if k > p:
        raise CostModelError(f"{where}: prefix_tokens {k} is longer than the prompt ({p} tokens)")
    return a, p, o, str(pid), k


def _lines(f: IO[str], where: str) -> Iterator[str]:
    """The file's lines, each at most :data:`MAX_LINE_CHARS` and all at most :data:`MAX_TRACE_BYTES`."""
    total = 0
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        total += len(line)
        if len(line) > MAX_LINE_CHARS:
            raise CostModelError(f"{where}: a line is longer than {MAX_LINE_CHARS:,} characters")
        if total > MAX_TRACE_BYTES:
            raise CostModelError(f"{where}: larger than {MAX_TRACE_BYTES:,} characters (split it)")
        yield line


def _records(f: IO[str], where: str, jsonl: bool) -> Iterator[tuple[int, dict[str, object]]]:
    if jsonl:
        for i, line in enumerate(_lines(f, where), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_float=Decimal)
            except (ValueError, RecursionError):
                raise CostModelError(f"{where} row {i}: not a JSON object") from None
            if not isinstance(obj, dict):
                raise CostModelError(f"{where} row {i}: not a JSON object")
            yield i, obj
        return
    reader = csv.DictReader(_lines(f, where))
    i = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            limit = csv.field_size_limit()
            why = f"a field is longer than {limit:,} characters" if "field limit" in str(exc) else str(exc)
            raise CostModelError(f"{where} row {i + 1}: not a CSV row ({why})") from None
        i += 1
        yield i, row


def read_trace(path: str | Path) -> Trace:
    """A CSV or JSON-lines trace (module doc), its arrivals rebased to the first one; the suffix is
    matched case-insensitively and a UTF-8 byte-order mark is dropped. One-line errors name the
    row and field; reads are bounded (:data:`MAX_TRACE_BYTES`, :data:`MAX_TRACE_ROWS`)."""
    path = Path(path)
    where = f"trace {str(path)[:200]}"
    jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson")
    rows: list[tuple[Decimal, int, int, object, int]] = []
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            for i, row in _records(f, where, jsonl):
                if len(rows) >= MAX_TRACE_ROWS:
                    raise CostModelError(f"{where}: more than {MAX_TRACE_ROWS:,} requests")
                rows.append(_row(row, f"{where} row {i}"))
                if len(rows) > 1 and rows[-1][0] < rows[-2][0]:
                    raise CostModelError(
                        f"{where} row {i}: arrival_s {rows[-1][0]} is before the previous row's "
                        f"{rows[-2][0]} (sort it)"
                    )
    except (OSError, UnicodeDecodeError) as exc:
        raise CostModelError(f"{where}: cannot read it ({type(exc).__name__})") from None
    if not rows:
        raise CostModelError(f"{where}: no requests")
    t0 = rows[0][0]
    ids: dict[object, int] = {}
    with localcontext(Context(prec=_EXACT_DIGITS)):  # the difference of the decimal texts, exact
        out = [
            Request(
                i,
                float(a - t0),  # then rounded once
                p,
                o,
                None if pid is None else ids.setdefault(pid, len(ids)),
                k,
            )
            for i, (a, p, o, pid, k) in enumerate(rows)
        ]
    return Trace(out, float(t0), len(ids))


def load_trace(path: str | Path) -> list[Request]:
    """The requests of :func:`read_trace` (arrivals from the first one at 0)."""
    return read_trace(path).requests
