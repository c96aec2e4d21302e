"""Readers of serving benchmark results: what each request of a real run saw, one load point per
:class:`BenchRun`, for :mod:`graphs.serving.serving_fit`.

Three formats:

* ``vllm bench serve --save-result --save-detailed`` (JSON; keys as written by
  ``vllm/benchmarks/serve.py``, https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/serve.py):
  ``request_rate`` (requests/s, or ``"inf"``), ``burstiness`` (the gamma shape of the gaps;
  1 is Poisson), ``max_concurrency``, and per request ``input_lens``, ``output_lens``,
  ``ttfts`` (s), ``itls`` (a list of inter-token gaps, s) and ``errors`` (empty when it
  succeeded). The end-to-end latency of a request is ``ttft + sum(itls)``. The file holds no
  send times: the arrivals are redrawn as the benchmark draws them (gaps gamma-distributed with
  shape ``burstiness`` and mean ``1 / request_rate``, the first at 0; ``"inf"``: all at 0),
  from a stated seed, in the order of the lists (the benchmark's dispatch order). A newer
  file's ``start_times`` (s), when present, are used instead. A ``max_concurrency`` below the
  request count makes it a closed loop: a request is sent at its drawn time or when one of
  that many clients is free, whichever is later (the benchmark's semaphore; the simulator's
  ``concurrency``).
* GuideLLM's report (``guidellm benchmark --output-path report.json``;
  ``GenerativeBenchmarksReport`` in https://github.com/vllm-project/guidellm,
  ``src/guidellm/benchmark/benchmark.py``): ``benchmarks[]``, each with
  ``requests.successful[]`` of ``prompt_tokens``, ``output_tokens``, ``start_time``,
  ``first_token_time`` and ``end_time`` (s, wall clock); each benchmark is one run, its rate
  the strategy's ``rate`` where it has one, else the arrivals' own ``(n - 1) / span``.
* a plain per-request CSV with the header ``arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s``
  (one run; its rate ``(n - 1) / span`` of the arrivals).

Bounds: a result file is read to at most :data:`MAX_BYTES`, and a JSON file's objects and values
are counted (``{`` and ``,`` bytes, an upper bound of what a parse builds) before it is parsed:
:data:`MAX_JSON_OBJECTS` and :data:`MAX_JSON_VALUES` keep the parse's memory near a few hundred MB
(a ``vllm bench serve`` file of 100,000 requests of 100 tokens holds 10 M values). Every latency
is at least :data:`MIN_LATENCY_S` and every rate in ``[1e-6, 1e9]`` requests/s. A run of more
than ``max_requests`` requests is cut to its first ``max_requests`` by arrival
(:meth:`BenchRun.first`), which the fit states.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.safefile import read_user_file, unique_keys

from .requests import Request, arrival_times

__all__ = [
    "BenchRun",
    "CSV_COLUMNS",
    "MAX_BYTES",
    "MAX_JSON_OBJECTS",
    "MAX_JSON_VALUES",
    "MIN_LATENCY_S",
    "read_results",
    "vllm_arrivals",
]

#: the header of a plain per-request CSV
CSV_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")
MAX_BYTES = 256 * 2**20  #: the largest result file read
#: the most JSON objects and values (module doc) a result file may hold: a parse builds each as
#: a Python object (tens of bytes apiece), so these bound its memory, checked before it runs
MAX_JSON_OBJECTS = 2_000_000
MAX_JSON_VALUES = 16_000_000
MAX_TOKENS = 10**7
#: the shortest TTFT or end-to-end latency accepted (s): one kernel launch takes several us,
#: a served token many; anything shorter is a unit error (ms or ns read as s)
MIN_LATENCY_S = 1e-6
RATE_RANGE = (1e-6, 1e9)  #: accepted request rates (requests/s)


@dataclass(frozen=True)
class BenchRun:
    """One measured load point: per request, its arrival (s, from 0), prompt and output tokens,
    TTFT and E2E (s) as the client saw them."""

    source: str
    rate: float | None  #: requests/s (None: all at once)
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    drawn: bool = False  #: the arrivals were redrawn (a vllm file holds none)
    concurrency: int | None = None  #: closed-loop clients (vllm's --max-concurrency), None: open loop
    in_file: int = 0  #: the successful requests the file holds (more than here when cut: :meth:`first`)

    def first(self, n: int) -> BenchRun:
        """The run's first ``n`` requests by arrival (itself when it holds no more): a contiguous
        window keeps the load and queue the requests saw, but for the last few, whose later
        neighbours are gone (a drain's worth of a run much longer than it)."""
        if len(self.prompt) <= n:
            return self
        keep = np.sort(np.argsort(self.arrival_s, kind="stable")[:n])
        return dataclasses.replace(
            self,
            arrival_s=self.arrival_s[keep],
            prompt=self.prompt[keep],
            output=self.output[keep],
            ttft_s=self.ttft_s[keep],
            e2e_s=self.e2e_s[keep],
            in_file=self.in_file or len(self.prompt),
        )

    @property
    def requests(self) -> list[Request]:
        return [
            Request(i, float(t), int(p), int(o))
            for i, (t, p, o) in enumerate(zip(self.arrival_s, self.prompt, self.output, strict=True))
        ]

    @property
    def tpot_s(self) -> np.ndarray:
        """(E2E - TTFT) / (output - 1); NaN for single-token requests."""
        multi = self.output > 1
        return np.where(multi, (self.e2e_s - self.ttft_s) / np.maximum(self.output - 1, 1), np.nan)

    @property
    def label(self) -> str:
        rate = "all at once" if self.rate is None else f"{self.rate:.4g} req/s"
        return f"{self.source} ({rate}, {len(self.prompt)} requests)"


def vllm_arrivals(n: int, rate: float | None, burstiness: float, seed: int) -> np.ndarray:
    """Arrivals as ``vllm bench serve`` draws them (module doc): gamma gaps of shape
    ``burstiness`` and mean ``1 / rate`` (Poisson at 1), the first at 0; all at 0 for ``inf``."""
    if rate is None:
        return np.zeros(n)
    process = "poisson" if burstiness == 1 else f"gamma:{1 / math.sqrt(burstiness)!r}"
    return arrival_times(n, rate, process, np.random.default_rng(seed))


def _load_json(path: str) -> Any:
    data = read_user_file(path, what="result file", max_bytes=MAX_BYTES)
    for what, n, cap in (
        ("objects", data.count(b"{"), MAX_JSON_OBJECTS),
        ("values", data.count(b","), MAX_JSON_VALUES),
    ):
        if n > cap:  # counted before the parse builds them (module doc)
            raise CostModelError(
                f"result file {path[:200]!r} holds more than {cap:,} JSON {what} ({n:,} found): more than "
                "a serving benchmark's results need; give a file of fewer requests"
            )
    try:
        return json.loads(data, object_pairs_hook=unique_keys())
    except (ValueError, RecursionError) as exc:
        raise CostModelError(f"result file {path[:200]!r} is not valid JSON: {str(exc)[:200]}") from None


def _num(x: Any, where: str, lo: float = 0.0, hi: float = 1e7) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and lo <= x <= hi):
        raise CostModelError(f"{where} must be a number in [{lo:g}, {hi:g}], got {str(x)[:40]!r}")
    return float(x)


def _latency(x: Any, where: str) -> float:
    """A TTFT or end-to-end latency (s): at least :data:`MIN_LATENCY_S`."""
    return _num(x, f"{where} (s)", MIN_LATENCY_S)


def _tokens(x: Any, where: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_TOKENS:
        raise CostModelError(
            f"{where} must be a whole number of tokens in [0, {MAX_TOKENS}], got {str(x)[:40]!r}"
        )
    return x


def _whole(x: float, where: str) -> int:
    return _tokens(int(x) if x.is_integer() else x, where)


def _run(
    source: str, rate: float | None, rows: list[tuple[float, int, int, float, float]], drawn: bool
) -> BenchRun:
    """A run from ``(arrival, prompt, output, ttft, e2e)`` rows of successful requests."""
    rows = [r for r in rows if r[1] >= 1 and r[2] >= 1]
    if not rows:
        raise CostModelError(f"{source}: no successful request with prompt and output tokens")
    a, p, o, t, e = (np.array(c) for c in zip(*rows, strict=True))
    bad = np.flatnonzero(e < t)
    if bad.size:
        raise CostModelError(
            f"{source}: request {int(bad[0])} ends ({e[bad[0]]!r} s) before its first token ({t[bad[0]]!r} s)"
        )
    a = a - a.min()
    return BenchRun(source, rate, a, p.astype(int), o.astype(int), t, e, drawn)


def _vllm(doc: dict[str, Any], source: str, seed: int) -> BenchRun:
    missing = [k for k in ("input_lens", "output_lens", "ttfts", "itls") if k not in doc]
    if missing:
        raise CostModelError(
            f"{source}: a vllm bench serve result needs the per-request keys (run it with --save-detailed); "
            f"missing {missing[0]!r}"
        )
    if not isinstance(doc["input_lens"], list):
        raise CostModelError(f"{source}: input_lens must be a list of token counts")
    n = len(doc["input_lens"])
    for k in ("output_lens", "ttfts", "itls"):
        if not isinstance(doc[k], list) or len(doc[k]) != n:
            raise CostModelError(f"{source}: {k} must be a list as long as input_lens ({n})")
    rr = doc.get("request_rate", "inf")
    rate = None if rr in ("inf", None) or rr == math.inf else _num(rr, f"{source}: request_rate", *RATE_RANGE)
    burst = _num(doc.get("burstiness", 1.0), f"{source}: burstiness", 1e-4, 1e4)
    mc = doc.get("max_concurrency")
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or not 1 <= mc <= 10**7):
        raise CostModelError(
            f"{source}: max_concurrency must be null or a whole number in [1, 1e7], got {str(mc)[:20]!r}"
        )
    errors = doc.get("errors") or [""] * n
    starts = doc.get("start_times")
    drawn = starts is None
    arrivals: Any = vllm_arrivals(n, rate, burst, seed) if starts is None else starts
    if (
        not isinstance(errors, list)
        or not isinstance(arrivals, list | np.ndarray)
        or len(arrivals) != n
        or len(errors) != n
    ):
        raise CostModelError(f"{source}: start_times and errors must be lists as long as input_lens ({n})")
    rows = []
    for i in range(n):
        if errors[i]:
            continue
        itl = doc["itls"][i]
        if not isinstance(itl, list):
            raise CostModelError(f"{source}: itls[{i}] must be a list of seconds")
        ttft = _latency(doc["ttfts"][i], f"{source}: ttfts[{i}]")
        gaps = sum(_num(g, f"{source}: itls[{i}]") for g in itl)
        arr = _num(arrivals[i], f"{source}: start_times[{i}]", 0.0, 1e12)
        p, o = (
            _tokens(doc["input_lens"][i], f"{source}: input_lens[{i}]"),
            _tokens(doc["output_lens"][i], f"{source}: output_lens[{i}]"),
        )
        rows.append((arr, p, o, ttft, ttft + gaps))
    run = _run(source, rate, rows, drawn)
    if mc is None or mc >= len(run.prompt):
        return run
    return dataclasses.replace(run, concurrency=mc)


def _guidellm(doc: dict[str, Any], source: str) -> list[BenchRun]:
    benches = doc.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise CostModelError(f"{source}: a GuideLLM report needs a non-empty 'benchmarks' list")
    runs = []
    for j, b in enumerate(benches):
        where = f"{source} benchmarks[{j}]"
        if not isinstance(b, dict):
            raise CostModelError(f"{where} must be an object, got {type(b).__name__}")
        held = b.get("requests")
        if not isinstance(held, dict):
            raise CostModelError(
                f"{where}.requests must be an object with 'successful', a list of requests; got {type(held).__name__}"
            )
        reqs = held.get("successful")
        if not isinstance(reqs, list):
            raise CostModelError(f"{where}: needs requests.successful, a list of requests")
        rows = []
        for i, r in enumerate(reqs):
            w = f"{where}.requests.successful[{i}]"
            if not isinstance(r, dict):
                raise CostModelError(f"{w} must be an object")
            for k in ("prompt_tokens", "output_tokens", "start_time", "first_token_time", "end_time"):
                if k not in r:
                    raise CostModelError(f"{w}: missing {k!r}")
            t0 = _num(r["start_time"], f"{w}.start_time", 0.0, 1e12)
            ft = _num(r["first_token_time"], f"{w}.first_token_time", t0, 1e12)
            end = _num(r["end_time"], f"{w}.end_time", t0, 1e12)
            p, o = (
                _tokens(r["prompt_tokens"], f"{w}.prompt_tokens"),
                _tokens(r["output_tokens"], f"{w}.output_tokens"),
            )
            rows.append((t0, p, o, _latency(ft - t0, f"{w}: first_token_time - start_time"), end - t0))
        args = b.get("args")
        strategy = args.get("strategy") if isinstance(args, dict) else None
        rate = strategy.get("rate") if isinstance(strategy, dict) else None
        given = None if rate is None else _num(rate, f"{where}.args.strategy.rate (requests/s)", *RATE_RANGE)
        runs.append(_with_rate(_run(f"{source}#{j}", None, rows, False), given))
    return runs


def _with_rate(run: BenchRun, rate: float | None) -> BenchRun:
    """``rate``, else the arrivals' own ``(n - 1) / span`` (None when they all arrive at once)."""
    if rate is None:
        span = float(run.arrival_s.max())
        rate = (len(run.arrival_s) - 1) / span if span > 0 else None
    return BenchRun(run.source, rate, run.arrival_s, run.prompt, run.output, run.ttft_s, run.e2e_s, run.drawn)


def _csv(path: str) -> BenchRun:
    text = read_user_file(path, what="result file", max_bytes=MAX_BYTES).decode("utf-8", errors="replace")
    reader = csv.DictReader(io.StringIO(text))
    if not set(CSV_COLUMNS) <= set(reader.fieldnames or ()):
        raise CostModelError(f"result CSV {path[:200]!r} needs the columns {','.join(CSV_COLUMNS)}")
    rows = []
    try:
        for i, row in enumerate(reader, start=2):
            w = f"{path[:200]} line {i}"
            try:
                vals = [float(row[k]) for k in CSV_COLUMNS]
            except (TypeError, ValueError):
                raise CostModelError(f"{w}: every column must be a number") from None
            a, p, o, t, e = vals
            _num(a, f"{w}: arrival_s", 0.0, 1e12)
            _latency(t, f"{w}: ttft_s")
            _latency(e, f"{w}: e2e_s")
            rows.append((a, _whole(p, f"{w}: prompt_tokens"), _whole(o, f"{w}: output_tokens"), t, e))
    except csv.Error as exc:
        raise CostModelError(f"result CSV {path[:200]!r}: {exc}") from None
    return _with_rate(_run(Path(path).name, None, rows, False), None)


def read_results(path: str, *, seed: int = 0, max_requests: int | None = None) -> list[BenchRun]:
    """The runs in one result file: a ``.csv`` is a per-request CSV; a JSON object with
    ``benchmarks`` is a GuideLLM report, one with ``ttfts`` a ``vllm bench serve`` result
    (module doc; ``seed`` draws a vllm file's arrivals); each run cut to its first
    ``max_requests`` by arrival (:meth:`BenchRun.first`; None: whole)."""
    if max_requests is not None and (
        isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1
    ):
        raise CostModelError(f"max_requests must be a whole number >= 1, got {str(max_requests)[:40]!r}")
    return [r if max_requests is None else r.first(max_requests) for r in _read(path, seed)]


def _read(path: str, seed: int) -> list[BenchRun]:
    if path.lower().endswith(".csv"):
        return [_csv(path)]
    doc = _load_json(path)
    name = Path(path).name
    if isinstance(doc, dict) and "benchmarks" in doc:
        return _guidellm(doc, name)
    if isinstance(doc, dict) and ("ttfts" in doc or "input_lens" in doc or "mean_ttft_ms" in doc):
        return [_vllm(doc, name, seed)]
    raise CostModelError(
        f"result file {path[:200]!r} is neither a vllm bench serve result (ttfts, itls ...), a GuideLLM "
        f"report (benchmarks) nor a CSV with {','.join(CSV_COLUMNS)}"
    )
