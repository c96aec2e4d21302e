"""Readers of serving benchmark results: what each request of a real run saw, one load point per
:class:`BenchRun`, for :mod:`graphs.serving.planning.serving_fit`.

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
  ``concurrency``). The file names no prefix a request shares (``vllm/benchmarks/serve.py``
  writes none): ``calibrate serving --shared-prefix`` states one. **Summary only** (saved without
  ``--save-detailed``): ``completed``, ``total_input_tokens``, ``total_output_tokens``,
  ``duration`` (s) and the ``mean_``/``median_`` ``ttft_ms`` and ``tpot_ms``; the run is replayed
  as ``completed`` requests of the mean prompt and output lengths (an assumption, said:
  :attr:`Summary.assumed`) at the stated traffic, and a fit matches those aggregates
  (:class:`Summary`).
* GuideLLM's report (``guidellm benchmark --output-path report.json``;
  ``GenerativeBenchmarksReport`` in https://github.com/vllm-project/guidellm,
  ``src/guidellm/benchmark/benchmark.py``): ``benchmarks[]``, each with
  ``requests.successful[]`` of ``prompt_tokens``, ``output_tokens``, ``start_time``,
  ``first_token_time`` and ``end_time`` (s, wall clock); each benchmark is one run, its rate
  the strategy's ``rate`` where it has one, else the arrivals' own ``(n - 1) / span``. **Without
  per-request rows** (``requests.successful`` empty or absent): ``metrics`` holds distributions
  (``successful.mean``/``median``) of ``time_to_first_token_ms``, ``inter_token_latency_ms``
  (weighted by each request's ``output_tokens - 1``: ``sum(last - first) / sum(o - 1)``),
  ``prompt_token_count`` and ``output_token_count``; ``total_count.successful`` the requests,
  ``start_time``/``end_time`` the span; the strategy's ``type_`` the traffic
  (``synchronous``: one client; ``concurrent``: ``streams`` clients; ``throughput``: all at
  once; ``constant``/``poisson``: arrivals at ``rate``). Replayed as above.
* a plain per-request CSV with the header ``arrival_s,prompt_tokens,output_tokens,ttft_s,e2e_s``
  (one run; its rate ``(n - 1) / span`` of the arrivals), and optionally ``prefix_id`` (any
  text) and ``prefix_tokens`` (its length, at most the prompt's) naming a prompt prefix requests
  share, as ``simulate --trace`` reads them (:mod:`graphs.serving.sim.requests`): with prefix caching
  replayed, a request whose prefix is cached starts after its full blocks.

Bounds: a result file is read to at most :data:`MAX_BYTES` (a CSV to :data:`MAX_CSV_BYTES`, a row
at a time into typed columns, its lines at most :data:`MAX_CSV_LINE_CHARS`), and
a JSON file's objects and values are counted (``{`` and ``,`` bytes, an upper bound of what a
parse builds) over the whole file, every run in it together (a GuideLLM report's benchmarks share
the bound: each per-request row is one object), before it is parsed whole:
:data:`MAX_JSON_OBJECTS` and :data:`MAX_JSON_VALUES` bound the parse's memory to about 1 GB (a
``vllm bench serve`` file of 100,000 requests of 100 tokens holds 10 M values; measured: a 198 MB
file of 15.9 M values, nearly all inter-token gaps, read in 1.02 GB more than the interpreter's
own maximum resident set, about 64 bytes a value in all: the file's bytes and its text, and each
value a Python float and its list slot; CPython 3.11, numpy 2.4, Linux x86-64). A summary's stated request count is replayed as that many requests, so the summaries of one file state at
most :data:`MAX_SUMMARY_REQUESTS` together (as many as a per-request file holds), and each run is
cut to ``max_requests`` as it is built, so that one uncut run is held at a time. A stated
``duration`` must agree with the run: no shorter than its longest request (a summary: its mean
E2E), nor than its latencies over its clients in a closed loop, and at most
:data:`DURATION_SLACK` times the latest its last request can be sent plus the time its requests
take served as its client sends them (``max_concurrency`` at a time: waves of its longest request;
no cap: the longest request) (not bounded above where requests failed, whose time the file does not
hold). Every latency
is at least :data:`MIN_LATENCY_S` and every rate in ``[1e-6, 1e9]`` requests/s. A run of more
than ``max_requests`` requests is cut to its first ``max_requests`` by arrival
(:meth:`BenchRun.first`), which the fit states.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.safefile import bounded_lines, bounded_text, open_user_file, read_user_file, unique_keys

from ..sim.requests import Request, arrival_times

__all__ = [
    "BenchRun",
    "CSV_COLUMNS",
    "CSV_PREFIX_COLUMNS",
    "json_error",
    "Summary",
    "MAX_BYTES",
    "MAX_CSV_BYTES",
    "MAX_CSV_LINE_CHARS",
    "MAX_JSON_OBJECTS",
    "MAX_JSON_VALUES",
    "MAX_SUMMARY_REQUESTS",
    "MIN_LATENCY_S",
    "read_results",
    "replay_text",
    "vllm_arrivals",
]

#: the header of a plain per-request CSV
CSV_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2e_s")
MAX_BYTES = 256 * 2**20  #: the largest result file read
#: the largest result CSV read (64 MiB): about 1.8 M requests of 37-byte rows. It is read a row at
#: a time into typed columns (8 bytes a value, six values a request, eight with prefix columns),
#: so memory follows the requests, not the text: 82 MiB peak for a 64 MiB file of 1.70 M
#: requests, 89 MiB for one of 1.40 M with prefix columns (measured: maximum resident set of a
#: ``read_results`` call less that of the same script without it, CPython 3.11, numpy 2.4, Linux
#: x86-64; 1.20 GiB when the whole text was decoded and read with ``csv.DictReader``). Two
#: files cost more, each still bounded by the file's size: one whose every row names a prefix of
#: its own keeps each name once (about 170 bytes a name: some 450 MiB at 64 MiB, extrapolated
#: from a 100,000-row file's 23 MiB), and one record spread over many lines by quoted line breaks
#: is held whole (about 4 bytes a byte of it). A fit
#: replays at most a few thousand requests of a run (``--max-requests``), so a larger CSV is not a
#: run's results. JSON files keep :data:`MAX_BYTES`, their parse bounded by the counts below
MAX_CSV_BYTES = 64 * 2**20
#: the most JSON objects and values (module doc) a result file may hold, the whole file: every
#: run in it together (a GuideLLM report of several benchmarks holds at most about 2 M
#: per-request rows over all of them, each row one object), not each run, since the file is
#: parsed whole: a parse builds each as a Python object (tens of bytes apiece), so these bound
#: its memory (about 1 GB at the bound, measured: module doc), checked before it runs
MAX_JSON_OBJECTS = 2_000_000
MAX_JSON_VALUES = 16_000_000
MAX_TOKENS = 10**7
#: the most requests the summaries of one result file may state, all its runs together: a
#: summary's run is replayed as that many requests (arrays of 32 bytes a request), so a few bytes
#: stating ``10000000`` must not cost gigabytes; as many as a per-request file can hold (a GuideLLM
#: request is one JSON object, :data:`MAX_JSON_OBJECTS`; a CSV's 64 MiB about 1.8 M rows)
MAX_SUMMARY_REQUESTS = MAX_JSON_OBJECTS
#: the shortest TTFT or end-to-end latency accepted (s): one kernel launch takes several us,
#: a served token many; anything shorter is a unit error (ms or ns read as s)
MIN_LATENCY_S = 1e-6
RATE_RANGE = (1e-6, 1e9)  #: accepted request rates (requests/s)
#: a stated ``duration`` more than this many times the longest its run can span is refused
#: (:func:`_check_duration`): the bound is the latest its last request can be sent plus the time
#: its requests take served as the client sends them (module doc); the factor leaves room for a client that sends
#: late (an event loop busy at a high rate) and for what the bound leaves out
DURATION_SLACK = 10.0
#: the odds at which the last of a run's redrawn arrivals is bounded (:func:`_latest_arrival`)
_ARRIVAL_TAIL = 1e-9


@dataclass(frozen=True)
class Summary:
    """What a summary-only result states of its run (s, requests/s; None: not stated), and what
    replaying it assumed (said once with the fit)."""

    ttft_mean_s: float | None = None
    ttft_median_s: float | None = None
    tpot_mean_s: float | None = None
    tpot_median_s: float | None = None
    e2e_mean_s: float | None = None
    #: completed requests / duration (requests/s)
    throughput_rps: float | None = None
    #: the TPOT mean is GuideLLM's token-weighted one, ``sum(e2e - ttft) / sum(o - 1)``
    token_weighted: bool = False
    assumed: tuple[str, ...] = ()

    def stated(self) -> dict[str, float]:
        """The stated aggregates by name (``ttft_mean`` ... ``throughput``), those given."""
        named = {
            "ttft_mean": self.ttft_mean_s,
            "ttft_median": self.ttft_median_s,
            "tpot_mean": self.tpot_mean_s,
            "tpot_median": self.tpot_median_s,
            "e2e_mean": self.e2e_mean_s,
            "throughput": self.throughput_rps,
        }
        return {k: v for k, v in named.items() if v is not None}


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
    #: per request, the shared prefix it names (-1: none) and that prefix's tokens (None: no prefixes)
    prefix_id: np.ndarray | None = None
    prefix: np.ndarray | None = None
    summary: Summary | None = None  #: a summary-only result: its aggregates (the latencies are NaN)
    burstiness: float = 1.0  #: the gamma shape of redrawn gaps (vllm's --burstiness; 1: Poisson)
    #: successful requests of no prompt or no output tokens, left out (said by :func:`replay_text`)
    empty: int = 0
    #: the run's own duration as the file states it (s; vllm's ``duration``), or None
    duration_s: float | None = None
    #: each request's line in a CSV (None: not a CSV), to name a request in an error
    line: np.ndarray | None = None
    #: what reading the file assumed that it does not state, said once where the run is fitted or
    #: replayed (a summary's own assumptions are :attr:`Summary.assumed`)
    notes: tuple[str, ...] = ()

    def first(self, n: int) -> BenchRun:
        """The run's first ``n`` requests by arrival (itself when it holds no more): a contiguous
        window keeps the load and queue the requests saw, but for the last few, whose later
        neighbours are gone (a drain's worth of a run much longer than it).

        Parameters
        ----------
        n : int
            Requests to keep.

        Returns
        -------
        BenchRun

        Raises
        ------
        CostModelError
            For a summary-only run of requests sent at once (its means are of the whole queue).
        """
        if len(self.prompt) <= n:
            return self
        if self.summary is not None and self.rate is None and self.concurrency is None:
            raise CostModelError(
                f"{self.source}: a summary of {len(self.prompt):,} requests sent all at once: its means "
                f"are of the whole queue, and its first {n:,} would see a shorter one; give "
                f"--max-requests {len(self.prompt)} (or a file with per-request rows)"
            )
        keep = np.sort(np.argsort(self.arrival_s, kind="stable")[:n])
        return dataclasses.replace(
            self,
            duration_s=None,  # the file's duration is the whole run's, not these requests'
            arrival_s=self.arrival_s[keep],
            prompt=self.prompt[keep],
            output=self.output[keep],
            ttft_s=self.ttft_s[keep],
            e2e_s=self.e2e_s[keep],
            in_file=self.in_file or len(self.prompt),
            prefix_id=None if self.prefix_id is None else self.prefix_id[keep],
            prefix=None if self.prefix is None else self.prefix[keep],
            line=None if self.line is None else self.line[keep],
        )

    def with_shared_prefix(self, tokens: int) -> BenchRun:
        """Every prompt starting with the same ``tokens`` (a system prompt, ``vllm bench serve
        --random-prefix-len``), for a file that names none (itself when it names its own, or for
        0): one prefix id, ``tokens`` each. A prompt shorter than the prefix cannot start with it:
        refused, naming the shortest (it was taken silently as wholly the prefix's first tokens,
        ``min(tokens, prompt)``, so that every prompt of a run under a too-long prefix was cached).

        Parameters
        ----------
        tokens : int
            Tokens of the shared prefix, in ``[0, MAX_TOKENS]``.

        Returns
        -------
        BenchRun

        Raises
        ------
        CostModelError
            When ``tokens`` is out of range, or longer than one of the run's prompts.
        """
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens <= MAX_TOKENS:
            raise CostModelError(
                f"shared prefix must be a whole number of tokens in [0, {MAX_TOKENS}], got {tokens!r}"
            )
        if tokens == 0 or self.prefix_id is not None:
            return self
        short = int((self.prompt < tokens).sum())
        if short:
            raise CostModelError(
                f"shared prefix (--shared-prefix) {tokens:,} tokens is longer than {short:,} of {self.source}'s "
                f"{len(self.prompt):,} prompts (the shortest {int(self.prompt.min()):,} tokens): every prompt "
                f"starts with the shared prefix; give at most {int(self.prompt.min()):,}"
            )
        return dataclasses.replace(
            self, prefix_id=np.zeros(len(self.prompt), dtype=int), prefix=np.full(len(self.prompt), tokens)
        )

    @property
    def requests(self) -> list[Request]:
        """The run's requests for the simulator: arrival, lengths and shared prefix (if any)."""
        n = len(self.prompt)
        pid = self.prefix_id if self.prefix_id is not None else np.full(n, -1)
        pre = self.prefix if self.prefix is not None else np.zeros(n, dtype=int)
        return [
            Request(i, float(t), int(p), int(o), None if k < 0 else int(k), int(k_tok) if k >= 0 else 0)
            for i, (t, p, o, k, k_tok) in enumerate(
                zip(self.arrival_s, self.prompt, self.output, pid, pre, strict=True)
            )
        ]

    @property
    def prefixes(self) -> int:
        """Distinct shared prefixes the run names (0: none)."""
        return 0 if self.prefix_id is None else len(set(self.prefix_id[self.prefix_id >= 0].tolist()))

    @property
    def tpot_s(self) -> np.ndarray:
        """(E2E - TTFT) / (output - 1); NaN for single-token requests."""
        multi = self.output > 1
        return np.where(multi, (self.e2e_s - self.ttft_s) / np.maximum(self.output - 1, 1), np.nan)

    @property
    def left_out(self) -> str:
        """The successful requests of 0 prompt or 0 output tokens left out, in words (empty: none):
        nothing to replay of them, and said wherever the run is fitted or replayed."""
        if not self.empty:
            return ""
        return (
            f"{self.empty:,} request(s) of 0 prompt or 0 output tokens left out (nothing to replay: "
            f"{len(self.prompt):,} kept)"
        )

    def where(self, i: int) -> str:
        """Request ``i`` of the run in words, as its file places it: ``line 7`` of a CSV, else
        ``request 3`` (of those kept, by arrival).

        Parameters
        ----------
        i : int
            The request's index among the run's kept requests.

        Returns
        -------
        str
        """
        return f"line {int(self.line[i])}" if self.line is not None else f"request {i}"

    @property
    def label(self) -> str:
        rate = "all at once" if self.rate is None else f"{self.rate:.4g} req/s"
        return f"{self.source} ({rate}, {len(self.prompt)} requests)"


def vllm_arrivals(n: int, rate: float | None, burstiness: float, seed: int) -> np.ndarray:
    """Arrivals as ``vllm bench serve`` draws them (module doc): gamma gaps of shape
    ``burstiness`` and mean ``1 / rate`` (Poisson at 1), the first at 0; all at 0 for ``inf``.

    Parameters
    ----------
    n : int
        Requests.
    rate : float or None
        Requests per second (``inf``: all at 0).
    burstiness : float
        The gamma shape (1: Poisson).
    seed : int
        The random seed.

    Returns
    -------
    numpy.ndarray
        ``n`` arrival times (s), the first at 0.
    """
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
        if n > cap:  # counted before the parse builds them (module doc): the whole file's
            raise CostModelError(
                f"result file {path[:200]!r} holds more than {cap:,} JSON {what} ({n:,} found), counted over "
                "the whole file, every run in it together (a per-request row is one object): give a file "
                "of fewer requests, e.g. one run (one GuideLLM benchmark) a file"
            )
    try:
        return json.loads(data, object_pairs_hook=unique_keys())
    except (ValueError, RecursionError) as exc:
        # a file not named .csv is read as JSON: a CSV under another name says what it takes
        first = data[:200].lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
        csv_like = first[:1] not in (b"{", b"[") and first.count(b",") >= 2
        hint = "; a per-request CSV must be named *.csv" if csv_like else ""
        raise CostModelError(f"result file {path[:200]!r} is not valid JSON: {json_error(exc)}{hint}") from None


def json_error(exc: BaseException) -> str:
    """What a failed ``json.loads`` says, in a user's words: Python's own advice for a number of
    more than 4,300 digits ("use sys.set_int_max_str_digits() to increase the limit") is not the
    command line's, so that case names the number's length instead.

    Parameters
    ----------
    exc : BaseException
        The ``ValueError`` or ``RecursionError`` the parse raised.

    Returns
    -------
    str
        One line of at most about 200 characters.
    """
    text = str(exc)
    digits = re.search(r"value has (\d+) digits", text)
    if "integer string conversion" in text and digits:
        return f"a number of {int(digits.group(1)):,} digits (no count, length or time has so many)"
    return text[:200]


def _bound(x: float) -> str:
    """A bound of a range in an error: short (``1e+09``) where that is its value, else every digit
    (a bound that is another field's value, so that a value just past it is not printed inside)."""
    return f"{x:g}" if float(f"{x:g}") == x else repr(float(x))


def _num(x: Any, where: str, lo: float = 0.0, hi: float = 1e7) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not (math.isfinite(x) and lo <= x <= hi):
        raise CostModelError(f"{where} must be a number in [{_bound(lo)}, {_bound(hi)}], got {str(x)[:40]!r}")
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


def _stated_count(n: Any, where: str, room: int = MAX_SUMMARY_REQUESTS) -> int:
    """A summary's stated count of successful requests ``n``: a whole number in ``[1, room]``,
    ``room`` what :data:`MAX_SUMMARY_REQUESTS` leaves after the file's earlier summaries."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CostModelError(f"{where} must be a whole number of requests >= 1, got {str(n)[:40]!r}")
    if n > room:
        earlier = MAX_SUMMARY_REQUESTS - room
        raise CostModelError(
            f"{where} states {n:,} requests: the summaries of one result file may state at most "
            f"{MAX_SUMMARY_REQUESTS:,} together (MAX_SUMMARY_REQUESTS, as many as a per-request file "
            "holds; each is replayed as that many requests)"
            + (f", and its earlier benchmarks state {earlier:,}" if earlier else "")
        )
    return n


def _latest_arrival(n: int, rate: float | None, burstiness: float) -> float:
    """The latest the last of ``n`` arrivals ``vllm bench serve`` draws (gaps gamma of shape
    ``burstiness``, mean ``1 / rate``, the first at 0; all at 0 for ``inf``) falls but with odds
    :data:`_ARRIVAL_TAIL`: the sum of ``n - 1`` gaps is gamma of shape ``a = (n - 1) burstiness``
    and mean ``m = (n - 1) / rate``, and ``P(X >= c m) <= (c e^(1 - c))^a`` (Chernoff), so ``c``
    solves ``a (c - 1 - ln c) = ln(1 / tail)`` (bisection; ``c`` about 2 for 60 Poisson gaps)."""
    a = (n - 1) * burstiness
    if rate is None or a <= 0:
        return 0.0
    return _gamma_tail(a, upper=True) * (n - 1) / rate


def _gamma_tail(a: float, *, upper: bool) -> float:
    """``x``, a multiple of its mean that a gamma variable of shape ``a`` passes (``upper``: above
    ``x``; else below) with odds at most :data:`_ARRIVAL_TAIL`: ``P <= (x e^(1 - x))^a`` either side
    (Chernoff), so ``x`` is the root of ``a (x - 1 - ln x) = ln(1 / tail)`` above 1 (``upper``) or
    below it (bisection)."""
    r = math.log(1 / _ARRIVAL_TAIL) / a
    # x - 1 - ln x is 0 at 1 and grows either way: past r at 2 r + 6 above, at e^(-r - 1) below
    lo, hi = (1.0, 2 * r + 6) if upper else (math.exp(-r - 1), 1.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        short = mid - 1 - math.log(mid) < r  # mid is still inside the interval
        lo, hi = (mid, hi) if short == upper else (lo, mid)
    return hi if upper else lo


def _check_duration(
    dur: float,
    where: str,
    least: tuple[float, str],
    most: tuple[float, float, str] | None,
) -> None:
    """Refuse a stated run ``duration`` (s) shorter than ``least`` ``(seconds, what they are)``, or
    longer than :data:`DURATION_SLACK` times ``most`` ``(latest last send, serving time, what
    they are)`` (None: not bounded, as where requests failed and their time is not recorded)."""
    if dur < least[0]:
        raise CostModelError(
            f"{where}: duration {dur:.6g} s is shorter than {least[1]} ({least[0]:.6g} s): the run "
            "lasts at least that long"
        )
    if most is not None and dur > DURATION_SLACK * (most[0] + most[1]):
        bound = DURATION_SLACK * (most[0] + most[1])
        raise CostModelError(
            f"{where}: duration {dur:.6g} s is longer than the run can span: at most {bound:.6g} s = "
            f"{DURATION_SLACK:g} x ({most[0]:.6g} s + {most[1]:.6g} s), {most[2]}"
        )


def _run(
    source: str,
    rate: float | None,
    rows: list[tuple[float, int, int, float, float]],
    drawn: bool,
    prefixes: list[tuple[int, int]] | None = None,
    where: list[str] | None = None,
) -> BenchRun:
    """A run from ``(arrival, prompt, output, ttft, e2e)`` rows of successful requests (with
    ``prefixes``, each row's ``(prefix id or -1, prefix tokens)``; ``where``, each row's place in
    the file for an error, default ``request i``): :func:`_run_columns` over their columns."""
    if rows:
        a, p, o, t, e = (np.array(c) for c in zip(*rows, strict=True))
    else:
        a, p, o, t, e = (np.zeros(0) for _ in range(5))
    ids = toks = None
    if prefixes is not None:
        ids, toks = (np.array([q[j] for q in prefixes], dtype=int) for j in (0, 1))
    return _run_columns(source, rate, (a, p, o, t, e), drawn, ids, toks, None if where is None else where.__getitem__)


def _run_columns(
    source: str,
    rate: float | None,
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    drawn: bool,
    prefix_id: np.ndarray | None = None,
    prefix: np.ndarray | None = None,
    where: Callable[[int], str] | None = None,
    line: np.ndarray | None = None,
) -> BenchRun:
    """A run from the columns ``(arrival, prompt, output, ttft, e2e)`` of successful requests, one
    entry a request: those of 0 prompt or 0 output tokens left out (counted in
    :attr:`BenchRun.empty`), the arrivals rebased to 0. ``prefix_id`` and ``prefix``: each
    request's shared prefix (-1: none) and its tokens; ``where(i)``: request ``i``'s place in the
    file for an error (default ``request i``); ``line``: each request's line in a CSV. The columns
    become the run's (no copy where every request is kept; the arrivals rebased in place)."""
    p, o = columns[1], columns[2]
    keep = (p >= 1) & (o >= 1)
    n_kept = int(np.count_nonzero(keep))
    if not n_kept:
        dropped = f" (all {len(p):,} of 0 prompt or 0 output tokens, left out)" if len(p) else ""
        raise CostModelError(f"{source}: no successful request with prompt and output tokens{dropped}")
    every = n_kept == len(p)

    def kept(x: np.ndarray) -> np.ndarray:
        return x if every else x[keep]  # no copy of a column when every request is kept

    a, p, o, t, e = (kept(c) for c in columns)
    bad = np.flatnonzero(e < t)
    if bad.size:
        j = int(bad[0])
        i = j if every else int(np.flatnonzero(keep)[j])
        at = f"request {i}" if where is None else where(i)
        raise CostModelError(
            f"{source}: {at} ends ({float(e[j])} s) before its first token ({float(t[j])} s)"
        )
    a -= a.min()
    run = BenchRun(
        source,
        rate,
        a,
        p.astype(int, copy=False),
        o.astype(int, copy=False),
        t,
        e,
        drawn,
        empty=len(keep) - n_kept,
        line=None if line is None else kept(line),
    )
    if prefix_id is None or prefix is None:
        return run
    ids = kept(prefix_id)
    if not (ids >= 0).any():
        return run
    return dataclasses.replace(run, prefix_id=ids, prefix=kept(prefix))


def _traffic(doc: dict[str, Any], source: str) -> tuple[float | None, float, int | None, tuple[str, ...]]:
    """A vllm result's ``request_rate`` (None: ``inf``), ``burstiness`` and ``max_concurrency``,
    and what was assumed of them (a file of a release before ``burstiness`` was written: Poisson,
    the only process those releases drew). ``vllm bench serve`` always writes ``request_rate``
    (``"inf"`` for all at once): a file without it is refused, never read as all at once."""
    ramp = doc.get("ramp_up_strategy")
    if ramp is not None:  # vllm bench serve --ramp-up-strategy: the rate moves over the run
        raise CostModelError(
            f"{source}: ramp_up_strategy {str(ramp)[:20]!r}: the request rate changed over the run "
            f"(from {str(doc.get('ramp_up_start_rps'))[:12]} to {str(doc.get('ramp_up_end_rps'))[:12]} req/s), "
            "which the replay does not draw; give a run at one rate"
        )
    rr = doc.get("request_rate")
    if rr is None:
        raise CostModelError(
            f"{source}: request_rate is {'null' if 'request_rate' in doc else 'missing'}: vllm bench serve "
            'writes the rate it sent at (requests/s, or "inf" for all at once), which the arrivals are '
            "drawn at; give it"
        )
    rate = None if rr == "inf" or rr == math.inf else _num(rr, f"{source}: request_rate", *RATE_RANGE)
    notes: tuple[str, ...] = ()
    if "burstiness" not in doc and rate is not None:
        notes = (
            "Poisson arrivals (burstiness 1): the file states no burstiness, as vllm releases before it "
            "was an option wrote none (they drew Poisson arrivals)",
        )
    burst = _num(doc.get("burstiness", 1.0), f"{source}: burstiness", 1e-4, 1e4)
    mc = doc.get("max_concurrency")
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int) or not 1 <= mc <= 10**7):
        raise CostModelError(
            f"{source}: max_concurrency must be null or a whole number in [1, 1e7], got {str(mc)[:20]!r}"
        )
    return rate, burst, mc, notes


#: the per-request keys of a ``vllm bench serve --save-detailed`` result
_VLLM_DETAILED = ("input_lens", "output_lens", "ttfts", "itls")


def _errors(doc: dict[str, Any], source: str, n: int) -> list[str]:
    """A vllm result's ``errors``: a list of ``n`` strings, empty where the request succeeded
    (every request's when the file has none)."""
    errors = doc.get("errors", [""] * n)
    if not isinstance(errors, list) or len(errors) != n:
        got = f"a list of {len(errors)}" if isinstance(errors, list) else f"{type(errors).__name__} {str(errors)[:40]!r}"
        raise CostModelError(
            f"{source}: errors must be a list of {n} strings, one a request as input_lens (empty where it "
            f"succeeded), got {got}"
        )
    for i, e in enumerate(errors):
        if not isinstance(e, str):
            raise CostModelError(
                f"{source}: errors[{i}] must be a string (empty where the request succeeded), got "
                f"{type(e).__name__} {str(e)[:40]!r}"
            )
    return errors


def _vllm(doc: dict[str, Any], source: str, seed: int) -> BenchRun:
    if not any(k in doc for k in _VLLM_DETAILED):
        return _vllm_summary(doc, source, seed)
    missing = [k for k in _VLLM_DETAILED if k not in doc]
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
    rate, burst, mc, notes = _traffic(doc, source)
    errors = _errors(doc, source, n)
    if "errors" not in doc:
        notes += (
            "every request succeeded: the file holds no errors list (vllm bench serve writes one, an empty "
            "string for each request that succeeded)",
        )
    starts = doc.get("start_times")
    drawn = starts is None
    arrivals: Any = vllm_arrivals(n, rate, burst, seed) if starts is None else starts
    if not isinstance(arrivals, list | np.ndarray) or len(arrivals) != n:
        raise CostModelError(f"{source}: start_times must be a list as long as input_lens ({n})")
    rows, where = [], []
    for i in range(n):
        if errors[i]:
            continue
        where.append(f"request {i}")
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
        if len(itl) > o:
            # a streamed token after the first is one gap: at most o - 1 of them (one more allowed
            # where the output lengths were counted by re-tokenising the text, not the usage)
            raise CostModelError(
                f"{source}: itls[{i}] has {len(itl)} inter-token gaps for output_lens[{i}] = {o} tokens "
                f"(one gap a streamed token after the first: at most {o - 1}, {o} tolerated for re-tokenised "
                "lengths); the file's requests do not match"
            )
        rows.append((arr, p, o, ttft, ttft + gaps))
    dur = doc.get("duration")
    stated = None if dur is None else _num(dur, f"{source}: duration (s)", MIN_LATENCY_S, 1e9)
    if stated is not None and rows:
        sends, e2e = np.array([r[0] for r in rows]), np.array([r[4] for r in rows])
        j = int(np.argmax(e2e))
        clients = mc if mc is not None and mc < n else None
        least = [(float(e2e[j]), f"{where[j]}'s end-to-end latency, ttfts + sum(itls)")]
        if clients is not None:  # each client has one request in flight at a time
            least.append(
                (float(e2e.sum()) / clients, f"the successful requests' latencies summed / its {clients} clients")
            )
        if not drawn:
            least.append((float((sends + e2e).max() - sends.min()), "its last finish after its first send"))
        waves = 1 if clients is None else math.ceil(n / clients)
        said = (
            f"the latest its last of {n} requests at {'inf' if rate is None else f'{rate:g}'} req/s is sent"
            + (f" (burstiness {burst:g}; but once in {1 / _ARRIVAL_TAIL:.0e} draws)" if drawn else "")
            + f", and the longest request{'' if clients is None else f' {waves} times, a wave of its {clients} clients each'}"
            " (DURATION_SLACK)"
        )
        last = _latest_arrival(n, rate, burst) if drawn else float(np.ptp(sends))
        most = (last, min(float(e2e.sum()), waves * float(e2e[j])), said)
        # a failed request's time is not recorded: a run of failures is not bounded above
        _check_duration(stated, source, max(least), None if len(rows) < n else most)
    run = dataclasses.replace(
        _run(source, rate, rows, drawn, where=where), burstiness=burst, duration_s=stated, notes=notes
    )
    if mc is None or mc >= len(run.prompt):
        return run
    return dataclasses.replace(run, concurrency=mc)


def _ms(doc: dict[str, Any], key: str, source: str) -> float | None:
    """A stated latency in ms as seconds (None: not stated, or 0: vllm's value when nothing was
    measured, as a TPOT of one-token outputs)."""
    if doc.get(key) is None:
        return None
    v = _num(doc[key], f"{source}: {key}", 0.0, 1e10)
    if v == 0:
        return None
    return _latency(v / 1e3, f"{source}: {key} / 1000")


def _mean_lengths(
    n: int,
    tin: float,
    tout: float,
    source: str,
    what: str,
    summary: Summary | None = None,
    fields: tuple[str, str] = ("mean prompt", "mean output"),
) -> tuple[int, int, str]:
    """The replayed lengths of a summary: the mean prompt and output (whole tokens, at least 1),
    and the assumption in words. A mean below one token (``fields`` name the two means) is
    refused, and so is a ``summary`` stating a TPOT whose mean output rounds to one token: a
    request of one output token has no TPOT, so none would be replayed."""
    for side, total, field in (("prompt", tin, fields[0]), ("output", tout, fields[1])):
        if total < n:  # a successful request sends at least one prompt token and gets one back
            raise CostModelError(
                f"{source}: {field} is {total / n:.4g} tokens a request ({n:,} requests): every successful "
                f"request has at least one {side} token"
            )
    p, o = max(1, round(tin / n)), max(1, round(tout / n))
    _tokens(p, f"{source}: mean prompt"), _tokens(o, f"{source}: mean output")
    if o == 1 and summary is not None and (summary.tpot_mean_s or summary.tpot_median_s):
        raise CostModelError(
            f"{source}: states a TPOT, but its {fields[1]} is {tout / n:.4g} "
            "tokens a request, replayed as 1: a request of one output token has no TPOT (no token after "
            "the first), so the stated one cannot be matched; give a run of longer outputs"
        )
    return (
        p,
        o,
        f"every prompt {p} and every output {o} tokens ({what}: the file states no lengths per request)",
    )


def _summary_run(
    source: str,
    n: int,
    lengths: tuple[int, int, str],
    traffic: tuple[float | None, np.ndarray, int | None, bool],
    summary: Summary,
    burstiness: float = 1.0,
) -> BenchRun:
    """A summary-only run: ``n`` requests of the mean lengths at the stated traffic ``(rate,
    arrivals, clients, drawn)``, its latencies unknown (NaN) and its aggregates ``summary``."""
    if not summary.stated().keys() - {"throughput"}:
        raise CostModelError(f"{source}: a summary-only result states no mean or median TTFT or TPOT to fit")
    ttft, e2e = summary.ttft_mean_s, summary.e2e_mean_s
    if ttft is not None and e2e is not None and e2e < ttft:
        raise CostModelError(
            f"{source}: mean E2E {e2e * 1e3:.6g} ms is below its mean TTFT {ttft * 1e3:.6g} ms: a request's "
            "end-to-end latency includes its first token"
        )
    p, o, said = lengths
    rate, arrivals, clients, drawn = traffic
    nan = np.full(n, np.nan)
    return BenchRun(
        source,
        rate,
        np.asarray(arrivals, dtype=float),
        np.full(n, p),
        np.full(n, o),
        nan,
        nan,
        drawn,
        None if clients is None or clients >= n else clients,
        summary=dataclasses.replace(summary, assumed=(said, *summary.assumed)),
        burstiness=burstiness,
    )


def _vllm_summary(doc: dict[str, Any], source: str, seed: int) -> BenchRun:
    """A ``vllm bench serve`` result saved without ``--save-detailed`` (module doc)."""
    need = ("completed", "total_input_tokens", "total_output_tokens")
    missing = [k for k in need if k not in doc]
    if missing:
        raise CostModelError(
            f"{source}: a summary-only vllm bench serve result needs {', '.join(need)} (missing "
            f"{missing[0]!r}); or save per-request keys with --save-detailed"
        )
    n = _stated_count(doc["completed"], f"{source}: completed")
    tin = _num(doc["total_input_tokens"], f"{source}: total_input_tokens", 1, 1e14)
    tout = _num(doc["total_output_tokens"], f"{source}: total_output_tokens", 1, 1e14)
    rate, burst, mc, notes = _traffic(doc, source)
    dur = doc.get("duration")
    stated = None if dur is None else _num(dur, f"{source}: duration (s)", MIN_LATENCY_S, 1e9)
    thr = None if stated is None else n / stated
    summary = Summary(
        ttft_mean_s=_ms(doc, "mean_ttft_ms", source),
        ttft_median_s=_ms(doc, "median_ttft_ms", source),
        tpot_mean_s=_ms(doc, "mean_tpot_ms", source),
        tpot_median_s=_ms(doc, "median_tpot_ms", source),
        e2e_mean_s=_ms(doc, "mean_e2el_ms", source),
        throughput_rps=thr,
        assumed=notes,
    )
    if stated is not None:
        _summary_duration(doc, source, stated, n, (rate, burst, mc), summary)
    lengths = _mean_lengths(
        n,
        tin,
        tout,
        source,
        "total_input_tokens and total_output_tokens / completed",
        summary,
        ("total_input_tokens / completed", "total_output_tokens / completed"),
    )
    arrivals = vllm_arrivals(n, rate, burst, seed)
    return _summary_run(source, n, lengths, (rate, arrivals, mc, True), summary, burst)


def _summary_duration(
    doc: dict[str, Any],
    source: str,
    dur: float,
    n: int,
    traffic: tuple[float | None, float, int | None],
    summary: Summary,
) -> None:
    """A vllm summary's ``duration`` against its means (:func:`_check_duration`): at least its
    mean E2E (the mean TTFT where none is stated), or the ``n`` latencies over its clients in a
    closed loop; at most the latest its last request is sent plus every request's latency, one
    after another (``n`` x the mean E2E), unless it states failed requests (whose time it does
    not record: ``failed`` above 0 or ``num_prompts`` above ``completed``)."""
    rate, burst, mc = traffic
    mean, what = (
        (summary.e2e_mean_s, "mean_e2el_ms") if summary.e2e_mean_s is not None else (summary.ttft_mean_s, "mean_ttft_ms")
    )
    if mean is None:
        return
    least = (mean, f"its {what}")
    if mc is not None and mc < n and n * mean / mc > mean:
        least = (n * mean / mc, f"{n} x its {what} / {mc} clients, each sending one request at a time")
    failed, sent = doc.get("failed"), doc.get("num_prompts")
    any_failed = (isinstance(failed, int | float) and failed > 0) or (isinstance(sent, int | float) and sent > n)
    most = None
    if summary.e2e_mean_s is not None and not any_failed:
        said = (
            f"the latest its last of {n} requests at {'inf' if rate is None else f'{rate:g}'} req/s (burstiness "
            f"{burst:g}) is sent but once in {1 / _ARRIVAL_TAIL:.0e} draws, and its {n} requests served one "
            f"after another at mean_e2el_ms (DURATION_SLACK)"
        )
        most = (_latest_arrival(n, rate, burst), n * mean, said)
    _check_duration(dur, source, least, most)


def _dist(m: dict[str, Any], name: str, stat: str, where: str) -> float | None:
    """``metrics[name].successful[stat]`` of a GuideLLM report (None: not there)."""
    d = m.get(name)
    d = d.get("successful") if isinstance(d, dict) else None
    v = d.get(stat) if isinstance(d, dict) else None
    return None if v is None else _num(v, f"{where}.metrics.{name}.successful.{stat}", 0.0, 1e12)


def _guidellm_summary(
    b: dict[str, Any], where: str, source: str, seed: int, room: int = MAX_SUMMARY_REQUESTS
) -> BenchRun:
    """A GuideLLM benchmark without per-request rows (module doc), of at most ``room`` requests
    (:func:`_stated_count`)."""
    m = b.get("metrics")
    if not isinstance(m, dict):
        raise CostModelError(
            f"{where}: no per-request rows (requests.successful) and no 'metrics' object to fit instead"
        )
    count = b.get("total_count")
    n = _stated_count(
        count.get("successful") if isinstance(count, dict) else None, f"{where}: total_count.successful", room
    )
    pm = _dist(m, "prompt_token_count", "mean", where)
    om = _dist(m, "output_token_count", "mean", where)
    if pm is None or om is None:
        raise CostModelError(
            f"{where}: a summary needs metrics.prompt_token_count and output_token_count (successful.mean)"
        )

    def s(name: str, stat: str, unit: float = 1e-3) -> float | None:
        """A stated latency (s; None: not stated). A 0 is refused, but for the inter-token
        latency, which GuideLLM gives as 0 when no request streamed a second token (as vllm's TPOT)."""
        v = _dist(m, name, stat, where)
        if v is None or (v == 0 and name == "inter_token_latency_ms"):
            return None
        return _latency(v * unit, f"{where}.metrics.{name}.successful.{stat}")

    t0, t1 = b.get("start_time"), b.get("end_time")
    span = None
    e2e = s("request_latency", "mean", 1.0)
    if t0 is not None and t1 is not None:
        start, end = _num(t0, f"{where}.start_time", 0.0, 1e12), _num(t1, f"{where}.end_time", 0.0, 1e12)
        span = end - start
        # the benchmark lasts at least as long as its mean request (and is never negative)
        if span < (e2e or MIN_LATENCY_S):
            raise CostModelError(
                f"{where}: end_time {end!r} - start_time {start!r} = {span:.6g} s, but the benchmark lasts "
                + (f"at least its mean request_latency ({e2e:.6g} s)" if e2e else "longer than 0 s")
            )
    summary = Summary(
        ttft_mean_s=s("time_to_first_token_ms", "mean"),
        ttft_median_s=s("time_to_first_token_ms", "median"),
        tpot_mean_s=s("inter_token_latency_ms", "mean"),
        e2e_mean_s=e2e,
        throughput_rps=None if span is None else n / span,
        token_weighted=True,
    )
    args = b.get("args")
    strategy = args.get("strategy") if isinstance(args, dict) else None
    kind = strategy.get("type_") if isinstance(strategy, dict) else None
    zeros = np.zeros(n)
    if kind in ("constant", "poisson"):
        assert isinstance(strategy, dict)
        rate = _num(strategy.get("rate"), f"{where}.args.strategy.rate (requests/s)", *RATE_RANGE)
        arr = arrival_times(n, rate, kind, np.random.default_rng(seed))
        traffic: tuple[float | None, np.ndarray, int | None, bool] = (rate, arr, None, kind == "poisson")
    elif kind == "concurrent":
        assert isinstance(strategy, dict)
        k = strategy.get("streams")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10**7:
            raise CostModelError(
                f"{where}.args.strategy.streams must be a whole number in [1, 1e7], got {str(k)[:20]!r}"
            )
        traffic = (None, zeros, k, False)
    elif kind == "synchronous":
        traffic = (None, zeros, 1, False)
    elif kind == "throughput":
        traffic = (None, zeros, None, False)
    else:
        raise CostModelError(
            f"{where}.args.strategy.type_ must be synchronous, concurrent, throughput, constant or poisson "
            f"for a summary to be replayed, got {str(kind)[:40]!r}"
        )
    lengths = _mean_lengths(
        n,
        pm * n,
        om * n,
        source,
        "the prompt_token_count and output_token_count means",
        summary,
        ("metrics.prompt_token_count mean", "metrics.output_token_count mean"),
    )
    return _summary_run(source, n, lengths, traffic, summary)


def _guidellm(
    doc: dict[str, Any], source: str, seed: int = 0, cut: Callable[[BenchRun], BenchRun] = lambda r: r
) -> list[BenchRun]:
    """A GuideLLM report's runs, each ``cut`` as it is built (so that one uncut run is held at a
    time); its summaries state at most :data:`MAX_SUMMARY_REQUESTS` requests together."""
    benches = doc.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise CostModelError(f"{source}: a GuideLLM report needs a non-empty 'benchmarks' list")
    runs = []
    stated = 0  # requests the summaries read so far state
    for j, b in enumerate(benches):
        where = f"{source} benchmarks[{j}]"
        if not isinstance(b, dict):
            raise CostModelError(f"{where} must be an object, got {type(b).__name__}")
        held = b.get("requests")
        if held is None or (isinstance(held, dict) and held.get("successful") in (None, [])):
            run = _guidellm_summary(b, where, f"{source}#{j}", seed + j, MAX_SUMMARY_REQUESTS - stated)
            stated += len(run.prompt)
            runs.append(cut(run))
            continue
        if not isinstance(held, dict):
            raise CostModelError(
                f"{where}.requests must be an object with 'successful', a list of requests; got {type(held).__name__}"
            )
        reqs = held.get("successful")
        if not isinstance(reqs, list):
            raise CostModelError(f"{where}: needs requests.successful, a list of requests")
        total = _sampled_from(b, len(reqs))
        if total is not None:  # a sample of the run's requests: its rows are not its load
            if not isinstance(b.get("total_count"), dict) or not isinstance(b.get("metrics"), dict):
                raise CostModelError(
                    f"{where}: requests.successful holds {len(reqs)} of the run's {total} successful "
                    "requests (GuideLLM keeps a sample of them), and no total_count and metrics to replay "
                    "the run from instead; write every request (GuideLLM's request sampling off)"
                )
            run = _guidellm_summary(b, where, f"{source}#{j}", seed + j, MAX_SUMMARY_REQUESTS - stated)
            stated += len(run.prompt)
            said = (
                f"{len(reqs)} of its {total} successful requests are in the file (GuideLLM's request "
                "sampling): replayed from its summary (total_count, metrics), not from the sample",
            )
            runs.append(cut(dataclasses.replace(run, notes=(*run.notes, *said))))
            continue
        rows = []
        for i, r in enumerate(reqs):
            w = f"{where}.requests.successful[{i}]"
            if not isinstance(r, dict):
                raise CostModelError(f"{w} must be an object")
            for k in ("prompt_tokens", "output_tokens", "start_time", "first_token_time", "end_time"):
                if k not in r:
                    raise CostModelError(f"{w}: missing {k!r}")
            t0 = _num(r["start_time"], f"{w}.start_time", 0.0, 1e12)
            ft = _num(r["first_token_time"], f"{w}.first_token_time (not before start_time)", t0, 1e12)
            end = _num(r["end_time"], f"{w}.end_time (not before first_token_time)", ft, 1e12)
            p, o = (
                _tokens(r["prompt_tokens"], f"{w}.prompt_tokens"),
                _tokens(r["output_tokens"], f"{w}.output_tokens"),
            )
            rows.append((t0, p, o, _latency(ft - t0, f"{w}: first_token_time - start_time"), end - t0))
        args = b.get("args")
        strategy = args.get("strategy") if isinstance(args, dict) else None
        rate = strategy.get("rate") if isinstance(strategy, dict) else None
        given = None if rate is None else _num(rate, f"{where}.args.strategy.rate (requests/s)", *RATE_RANGE)
        run = _run(f"{source}#{j}", None, rows, False)
        if given is not None:
            _check_rate(run, given, f"benchmarks[{j}].args.strategy.rate")
        runs.append(cut(_with_rate(run, given)))
    return runs


def _sampled_from(b: dict[str, Any], held: int) -> int | None:
    """The successful requests a GuideLLM benchmark ran when its ``requests.successful`` holds
    fewer (``held``): GuideLLM can keep a random sample of them (``request_samples``), stating the
    whole count in ``total_count`` or ``request_totals``; None when the file holds them all."""
    for key in ("total_count", "request_totals"):
        c = b.get(key)
        n = c.get("successful") if isinstance(c, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > held:
            return n
    return None


def _check_rate(run: BenchRun, rate: float, field: str) -> None:
    """Refuse a stated ``rate`` (requests/s) the run's own arrivals contradict: ``n`` Poisson
    arrivals at it span ``n - 1`` gaps, gamma of shape ``n - 1`` and mean ``(n - 1) / rate``,
    outside ``[lo, hi]`` times that mean but with odds :data:`_ARRIVAL_TAIL` (:func:`_gamma_tail`;
    constant arrivals span it exactly); a span shorter is refused, and one longer than
    :data:`DURATION_SLACK` x ``hi`` (a server too slow for the rate can hold a client back)."""
    n = len(run.arrival_s)
    span = float(run.arrival_s.max())
    if n < 2:
        return
    mean = (n - 1) / rate
    lo, hi = _gamma_tail(n - 1, upper=False), DURATION_SLACK * _gamma_tail(n - 1, upper=True)
    if not lo * mean <= span <= hi * mean:
        raise CostModelError(
            f"{run.source}: {field} {rate:g} req/s, but its {n} arrivals span {span:.6g} s, (n - 1) / span = "
            f"{(n - 1) / span if span > 0 else math.inf:.4g} req/s: at {rate:g} req/s they would span "
            f"{lo * mean:.4g} to {hi * mean:.4g} s ({n - 1} Poisson gaps of mean {1 / rate:.4g} s outside "
            f"that but once in {1 / _ARRIVAL_TAIL:.0e}, the upper end x {DURATION_SLACK:g} for a slow "
            "server: DURATION_SLACK)"
        )


def _with_rate(run: BenchRun, rate: float | None) -> BenchRun:
    """``rate``, else the arrivals' own ``(n - 1) / span`` (None when they all arrive at once)."""
    if rate is None:
        span = float(run.arrival_s.max())
        rate = (len(run.arrival_s) - 1) / span if span > 0 else None
    return dataclasses.replace(run, rate=rate)


#: the optional per-request prefix columns of a result CSV (as a ``simulate --trace`` reads them)
CSV_PREFIX_COLUMNS = ("prefix_id", "prefix_tokens")


def _csv_prefix(pid: str, k: str, prompt: int, w: str, ids: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """A row's ``(prefix id, tokens)`` from its ``prefix_id`` and ``prefix_tokens`` texts (``(-1,
    0)``: none); one prefix_id has one length. ``ids`` maps each prefix_id text read to its
    number and length, so a run holds each name once, its requests an int apiece."""
    pid, k = pid.strip(), k.strip()
    if not pid:
        if k:
            raise CostModelError(f"{w}: prefix_tokens needs a prefix_id naming the shared prefix")
        return -1, 0
    try:
        if "_" in k:  # float() reads 1_00 as 100: not a number as written
            raise ValueError
        kv = float(k)
    except ValueError:
        raise CostModelError(
            f"{w}: prefix_id needs prefix_tokens, a whole number of tokens, got {k[:40]!r}"
        ) from None
    tok = _whole(kv, f"{w}: prefix_tokens") if math.isfinite(kv) else _tokens(k, f"{w}: prefix_tokens")
    if tok > prompt:
        raise CostModelError(f"{w}: prefix_tokens {tok} is longer than the prompt ({prompt} tokens)")
    known = ids.setdefault(pid, (len(ids), tok))
    if known[1] != tok:
        raise CostModelError(
            f"{w}: prefix_id {pid[:40]!r} has prefix_tokens {tok}, but an earlier row gave it {known[1]} "
            "(one prefix_id names one shared prefix)"
        )
    return known[0], tok


#: the longest line of a result CSV (characters): a request's row is tens of characters; lines are
#: read one at a time, so a file of one endless line is refused at this length, never held whole
MAX_CSV_LINE_CHARS = 1 << 20


#: a byte that is not UTF-8, as ``surrogateescape`` decoding keeps it (U+DC80 to U+DCFF): valid
#: UTF-8 text never decodes to a lone surrogate
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _utf8_lines(lines: Iterator[str], name: str) -> Iterator[str]:
    """``lines``, each refused (naming its line) where it holds a byte that is not UTF-8: a byte
    replaced by U+FFFD would make two prefix ids one."""
    for number, line in enumerate(lines, 1):
        bad = _NOT_UTF8.search(line)
        if bad:
            raise CostModelError(
                f"result CSV {name!r}: line {number:,} is not UTF-8 text (byte 0x{ord(bad.group()) - 0xDC00:02x} "
                f"at character {bad.start() + 1}); save it as UTF-8"
            )
        yield line


def _csv(path: str) -> BenchRun:
    """A per-request result CSV (module doc), read a row at a time into typed columns: memory in
    proportion to the requests (8 bytes a number), not to the text (:data:`MAX_CSV_BYTES`)."""
    name = path[:200]
    # a regular file, never a FIFO or device (opened non-blocking, checked on the descriptor), of
    # at most MAX_CSV_BYTES before a byte is read; bytes counted as they are read (bounded_text)
    raw = open_user_file(path, what="result CSV", max_bytes=MAX_CSV_BYTES)
    floats = {k: array("d") for k in ("arrival_s", "ttft_s", "e2e_s")}
    ints = {k: array("q") for k in ("prompt_tokens", "output_tokens", "line", "prefix_id", "prefix_tokens")}
    ids: dict[str, tuple[int, int]] = {}
    try:
        # utf-8-sig: a byte-order mark (a spreadsheet's UTF-8 export) is not part of the first column
        grown = f"result CSV {name!r} cannot be read (changed while read, or larger than {MAX_CSV_BYTES} bytes)"
        with bounded_text(raw, MAX_CSV_BYTES, grown, errors="surrogateescape") as f:
            reader = csv.reader(_utf8_lines(bounded_lines(f, MAX_CSV_LINE_CHARS, f"result CSV {name!r}"), name))
            header = next(reader, [])
            fields = set(header)
            for k in (*CSV_COLUMNS, *CSV_PREFIX_COLUMNS):
                if header.count(k) > 1:  # a dict of the row would keep the last one silently
                    raise CostModelError(
                        f"result CSV {name!r}: column {k!r} appears {header.count(k)} times in the header; "
                        "give each column once"
                    )
            if not set(CSV_COLUMNS) <= fields:
                missing = [k for k in CSV_COLUMNS if k not in fields]
                raise CostModelError(
                    f"result CSV {name!r} needs the columns {','.join(CSV_COLUMNS)} (missing {','.join(missing)})"
                )
            with_prefix = "prefix_id" in fields or "prefix_tokens" in fields
            if with_prefix and not set(CSV_PREFIX_COLUMNS) <= fields:
                raise CostModelError(
                    f"result CSV {name!r}: the prefix columns go together: {','.join(CSV_PREFIX_COLUMNS)}"
                )
            at = [header.index(k) for k in CSV_COLUMNS]
            pid_at, tok_at = (header.index(k) for k in CSV_PREFIX_COLUMNS) if with_prefix else (0, 0)
            for row in reader:
                if not row:  # a blank line: no request (as csv.DictReader skips it)
                    continue
                w = f"{name} line {reader.line_num}"
                if len(row) > len(header) and any(v.strip() for v in row[len(header) :]):
                    # a value with no column: a shifted or merged row (empty ones, a trailing
                    # comma some writers leave on data rows, are nothing)
                    raise CostModelError(
                        f"{w}: {len(row)} values for the header's {len(header)} columns (a row longer "
                        "than its header: a comma too many, or a field of a column not named)"
                    )
                vals = []
                for k, j in zip(CSV_COLUMNS, at, strict=True):
                    if j >= len(row):  # the row is shorter than the header
                        raise CostModelError(f"{w}: {k} must be a number, got nothing (the row is short)")
                    try:
                        if "_" in row[j]:  # float() reads 1_00 as 100: not a number as written
                            raise ValueError
                        vals.append(float(row[j]))
                    except ValueError:
                        raise CostModelError(f"{w}: {k} must be a number, got {row[j][:40]!r}") from None
                a, p, o, t, e = vals
                _num(a, f"{w}: arrival_s", 0.0, 1e12)
                _latency(t, f"{w}: ttft_s")
                _latency(e, f"{w}: e2e_s")
                prompt = _whole(p, f"{w}: prompt_tokens")
                ints["output_tokens"].append(_whole(o, f"{w}: output_tokens"))
                ints["prompt_tokens"].append(prompt)
                floats["arrival_s"].append(a)
                floats["ttft_s"].append(t)
                floats["e2e_s"].append(e)
                ints["line"].append(reader.line_num)
                if with_prefix:
                    pid, tok = _csv_prefix(
                        row[pid_at] if pid_at < len(row) else "",
                        row[tok_at] if tok_at < len(row) else "",
                        prompt,
                        w,
                        ids,
                    )
                    ints["prefix_id"].append(pid)
                    ints["prefix_tokens"].append(tok)
    except csv.Error as exc:
        raise CostModelError(f"result CSV {name!r}: {exc}") from None
    except OSError as exc:
        raise CostModelError(f"result CSV {name!r} cannot be read: {exc.strerror or exc}") from None
    finally:
        raw.close()
    # the columns as arrays over the same memory (no copy)
    col = {k: np.frombuffer(v, dtype=np.float64) for k, v in floats.items()}
    col.update({k: np.frombuffer(v, dtype=np.int64) for k, v in ints.items()})
    line = col["line"]
    run = _run_columns(
        Path(path).name,
        None,
        (col["arrival_s"], col["prompt_tokens"], col["output_tokens"], col["ttft_s"], col["e2e_s"]),
        False,
        col["prefix_id"] if with_prefix else None,
        col["prefix_tokens"] if with_prefix else None,
        lambda i: f"the request on line {int(line[i])}",
        line,
    )
    return _with_rate(run, None)


def read_results(path: str, *, seed: int = 0, max_requests: int | None = None) -> list[BenchRun]:
    """The runs in one result file: a ``.csv`` is a per-request CSV; a JSON object with
    ``benchmarks`` is a GuideLLM report, one with ``ttfts`` a ``vllm bench serve`` result
    (module doc; ``seed`` draws a vllm file's arrivals); each run cut to its first
    ``max_requests`` by arrival (:meth:`BenchRun.first`; None: whole).

    Parameters
    ----------
    path : str
        A per-request ``.csv``, a GuideLLM JSON report or a ``vllm bench serve`` JSON result.
    seed : int
        Seed of the arrivals drawn for a ``vllm bench serve`` file (it records none).
    max_requests : int, optional
        Keep each run's first requests by arrival (None: all).

    Returns
    -------
    list of BenchRun

    Raises
    ------
    CostModelError
        When ``max_requests`` is not a whole number >= 1, or the file is unreadable or not one of
        the formats.
    """
    if max_requests is not None and (
        isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1
    ):
        raise CostModelError(f"max_requests must be a whole number >= 1, got {str(max_requests)[:40]!r}")
    return _read(path, seed, lambda r: r if max_requests is None else r.first(max_requests))


def _read(path: str, seed: int, cut: Callable[[BenchRun], BenchRun]) -> list[BenchRun]:
    """The file's runs, each ``cut`` as it is built."""
    if path.lower().endswith(".csv"):
        return [cut(_csv(path))]
    doc = _load_json(path)
    name = Path(path).name
    if isinstance(doc, dict) and "benchmarks" in doc:
        return _guidellm(doc, name, seed, cut)
    if isinstance(doc, dict) and ("ttfts" in doc or "input_lens" in doc or "mean_ttft_ms" in doc):
        return [cut(_vllm(doc, name, seed))]
    raise CostModelError(
        f"result file {path[:200]!r} is neither a vllm bench serve result (ttfts, itls ...), a GuideLLM "
        f"report (benchmarks) nor a CSV with {','.join(CSV_COLUMNS)}"
    )


def replay_text(run: BenchRun, seed: int = 0) -> str:
    """What replaying ``run`` takes from it, in words: requests, lengths, arrivals, clients,
    shared prefixes, the measured means and any assumption (``simulate --workload-from``).

    Parameters
    ----------
    run : BenchRun
        A measured run.
    seed : int
        Seed of the arrivals drawn for it.

    Returns
    -------
    str
        One line.
    """
    n = len(run.prompt)
    def spread(x: np.ndarray) -> str:
        lo, hi = int(x.min()), int(x.max())
        return f"{lo} tokens each" if lo == hi else f"{lo}-{hi} tokens (mean {float(x.mean()):.4g})"

    parts = [f"{n:,} requests", f"prompts {spread(run.prompt)}", f"outputs {spread(run.output)}"]
    if run.empty:
        parts.append(f"{run.empty:,} successful request(s) of no prompt or no output tokens left out")
    if run.rate is None and not run.arrival_s.any():
        parts.append("all sent at once")
    elif run.drawn:
        shape = "Poisson" if run.burstiness == 1 else f"gamma, burstiness {run.burstiness:g}"
        parts.append(
            f"arrivals redrawn at {run.rate:.4g} req/s ({shape}, --seed {seed}: the file holds no send times)"
        )
    elif run.summary is not None and run.rate is not None:  # a summary: generated at its stated rate
        parts.append(
            f"arrivals generated at {run.rate:.4g} req/s, evenly spaced (the summary's constant "
            "strategy; it holds no send times)"
        )
    else:
        parts.append(f"the file's own arrivals over {float(run.arrival_s.max()):.4g} s")
    if run.concurrency is not None:
        parts.append(f"a closed loop of {run.concurrency} clients")
    if run.prefixes:
        parts.append(f"{run.prefixes} shared prefix(es)")
    if run.summary is not None:
        stated = run.summary.stated()
        means = [f"{k.replace('_', ' ')} {v * 1e3:.4g} ms" for k, v in stated.items() if k != "throughput"]
        parts.append("measured " + ", ".join(means))
        parts += [f"assumed {a}" for a in run.summary.assumed]
    else:
        tpot = run.tpot_s
        ok = np.isfinite(tpot)
        parts.append(
            f"measured mean TTFT {float(run.ttft_s.mean()) * 1e3:.4g} ms"
            + (f", mean TPOT {float(tpot[ok].mean()) * 1e3:.4g} ms" if ok.any() else "")
        )
    parts += [f"assumed {a}" for a in run.notes]
    return "; ".join(parts)
