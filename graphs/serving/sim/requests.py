"""Request workloads for the serving simulator: arrivals, prompt and output lengths, prompt
pools, conversations, traces.

* Arrivals: ``poisson`` (exponential gaps at ``rate`` requests/s), ``constant`` (exactly
  ``1/rate`` apart: request ``i`` at ``i / rate``, AIPerf's ``--arrival-pattern constant``) or
  ``gamma:CV`` (gamma gaps with mean ``1/rate`` and coefficient of variation ``CV``: bursty above
  1, regular below), or the arrival times of a trace; ``rate=None`` sends every request at
  ``t = 0`` (``vllm bench serve --request-rate inf``, what a closed loop of clients starts from).
* Lengths (tokens): ``fixed:N``, ``uniform:LO,HI`` (integers, both ends included) or
  ``lognormal:MEAN,SIGMA`` (``MEAN`` the mean length, ``SIGMA`` the standard deviation of its
  logarithm, as ShareGPT-like length distributions are usually fitted), clipped to
  ``[1, max]``.
* A trace: CSV with a header ``arrival_s,prompt_tokens,output_tokens`` or JSON lines with those
  keys, arrivals non-decreasing (absolute times such as Unix timestamps are rebased to the
  first arrival, exactly); optional ``prefix_id`` (any text) and ``prefix_tokens`` (its length,
  at most the prompt's) name a prompt prefix that requests share (for prefix caching); one
  prefix_id has one prefix_tokens on every row.
* A prompt pool (``prompt_pool=N``): ``N`` distinct prompts drawn once, each request one of
  them chosen uniformly, the whole prompt its prefix (``prefix_id`` the pool index): with prefix
  caching every repeat after the first occurrence starts after the cached full blocks, as a
  benchmark that cycles through a finite dataset sees.
* Conversations (``turns=T``): ``n`` sessions of ``T`` turns. Turn ``k`` sends the
  conversation so far plus a new user message of ``m_k`` tokens:
  ``prompt_k = sum_{j<k} (m_j + o_j) + m_k`` with ``o_j`` the answers' lengths, its prefix the
  history ``sum_{j<k} (m_j + o_j)`` (``prefix_id`` the session); every turn but the last keeps its
  KV cached when it finishes (``retain``), for the next turn to start after. A later turn is
  sent ``think_s`` seconds after the previous answer's last token, so its arrival is decided by
  the simulation (:func:`graphs.serving.sim.simulator.simulate` releases it), ``arrival_s`` being
  only the session's start. AIPerf's multi-turn conversations send the same way.

A fixed ``seed`` makes a workload reproducible (numpy's PCG64).

>>> reqs = synthetic(3, rate=2.0, prompt="fixed:128", output="uniform:10,20", seed=1)
>>> [r.prompt for r in reqs], all(10 <= r.output <= 20 for r in reqs)
([128, 128, 128], True)
"""

from __future__ import annotations

import csv
import json
import math
import numbers
import os
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation, localcontext
from pathlib import Path
from typing import IO

import numpy as np

from costmodel.errors import CostModelError
from costmodel.safefile import bounded_lines, bounded_text, open_user_file, unique_keys

__all__ = [
    "ARRIVALS",
    "Request",
    "Trace",
    "synthetic",
    "load_trace",
    "read_trace",
    "sample_lengths",
    "arrival_times",
    "MAX_TOKENS",
    "RATE_RANGE",
    "ALL_AT_ONCE",
    "MAX_TURNS",
    "THINK_RANGE",
]

MAX_TOKENS = 10**7  #: longest prompt or output a request may have
#: request rates accepted (requests/s): one in about 12 days to a billion a second
RATE_RANGE = (1e-6, 1e9)
#: what an infinite rate asks for, and how to ask for it: every request at ``t = 0`` is a closed
#: loop of as many clients as requests (no client waits), as ``vllm bench serve``'s default
#: ``--request-rate inf`` sends them (``simulate(..., concurrency=N)``)
ALL_AT_ONCE = (
    "every request at once (vllm bench serve's default --request-rate inf) is a closed loop of as many "
    "clients as requests: give --concurrency N with N = --requests instead"
)
MAX_TURNS = 10_000  #: most turns one conversation may have
#: think times accepted (s): none to about 12 days
THINK_RANGE = (0.0, 1e6)
#: arrival processes of :func:`arrival_times` (``gamma`` takes ``:CV``)
ARRIVALS = ("poisson", "constant", "gamma:CV")


@dataclass(frozen=True, slots=True)  # slots: a million-request run keeps a million of them
class Request:
    """One request: when it arrives (s), its prompt and output lengths (tokens); for a
    conversation's turn, its session and the client's think time before sending it.

    Parameters
    ----------
    rid : int
        Its id, unique in a run (results and errors name requests by it).
    arrival_s : float
        When it is sent, in seconds from the run's start; a later turn, or a client's next
        request, is not sent before it.
    prompt : int
        Prompt tokens, a whole number >= 1 (prefix included).
    output : int
        Output tokens to generate, a whole number >= 1.
    prefix_id : int, optional
        Requests with the same id share their first ``prefix`` prompt tokens (a system prompt,
        a document); None: it shares nothing.
    prefix : int, default 0
        Tokens at the start of its prompt shared with the others of ``prefix_id``; with prefix
        caching their full blocks stay cached once a first request computed them, and a later
        one starts its prefill after them (``graphs.serving.sim.engine``).
    session : int, optional
        The conversation it is a turn of (turns are sent in order); None: a single request.
    turn : int, default 0
        Its place in the conversation, from 0.
    think_s : float, default 0.0
        The client's pause between its previous answer and sending this, in seconds.
    retain : bool, default False
        With prefix caching, the full blocks of its prompt and answer stay cached when it
        finishes, as its prefix's entry (the next turn's).

    >>> Request(0, 0.0, prompt=512, output=128).prompt
    512
    """

    rid: int
    arrival_s: float  #: when it is sent; a later turn or a client's next request: not before this
    prompt: int
    output: int
    prefix_id: int | None = None  #: requests with the same id share their first ``prefix`` prompt tokens
    prefix: int = 0
    session: int | None = None  #: the conversation it is a turn of (turns are sent in order)
    turn: int = 0  #: its place in the conversation, from 0
    think_s: float = 0.0  #: the client's pause between its previous answer and sending this (s)
    retain: bool = False  #: with prefix caching, its prompt and answer stay cached when it finishes


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
    """``n`` lengths (tokens, ints in ``[1, hi]``) drawn from ``spec`` (module doc).

    Parameters
    ----------
    spec : str
        ``fixed:N``, ``uniform:LO,HI`` or ``lognormal:MEAN,SIGMA`` (tokens).
    n : int
        How many lengths.
    rng : numpy.random.Generator
        The random source.
    field : str
        The option's name, printed in the error.
    hi : int
        The largest length (tokens).

    Returns
    -------
    numpy.ndarray
        ``n`` int64 lengths in ``[1, hi]``.

    Raises
    ------
    CostModelError
        When ``spec`` is malformed or out of range.
    """
    if not isinstance(spec, str):
        raise CostModelError(
            f"{field} must be a length distribution: fixed:N, uniform:LO,HI or lognormal:MEAN,SIGMA "
            f"(tokens), got {type(spec).__name__} {repr(spec)[:40]}"
        )
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
    """``n`` arrival times (s) from 0 at ``rate`` requests/s (``poisson``, ``constant``: exactly
    ``i / rate``, or ``gamma:CV``).

    Parameters
    ----------
    n : int
        How many requests.
    rate : float
        Requests per second.
    process : str
        ``poisson``, ``constant`` or ``gamma:CV``.
    rng : numpy.random.Generator
        The random source.

    Returns
    -------
    numpy.ndarray
        ``n`` arrival times (s), the first at 0.

    Raises
    ------
    CostModelError
        When ``rate`` or ``process`` is out of range.
    """
    lo, hi = RATE_RANGE
    if not (isinstance(rate, int | float) and not isinstance(rate, bool) and lo <= rate <= hi):
        raise CostModelError(f"rate must be in [{lo:g}, {hi:g}] requests per second, got {rate!r}")
    if not isinstance(process, str):
        raise CostModelError(
            f"arrival must be one of {', '.join(ARRIVALS)}, got {type(process).__name__} {repr(process)[:40]}"
        )
    if process == "constant":
        return np.arange(n) / rate  # each i / rate rounded once, no running sum
    if process == "poisson":
        gaps = rng.exponential(1 / rate, n)
    elif process.startswith("gamma"):
        (cv,) = _numbers(process, "arrival", 1)
        if not 0 < cv <= 100:
            raise CostModelError(f"arrival: gamma needs 0 < CV <= 100, got {process!r}")
        shape = 1 / cv**2
        gaps = rng.gamma(shape, 1 / (rate * shape), n)
    else:
        raise CostModelError(f"arrival: {process!r} is not {', '.join(ARRIVALS)}")
    if not n:  # no requests: no arrivals (and no first gap to rebase on)
        return gaps
    return np.cumsum(gaps) - gaps[0]  # the first request arrives at t = 0


def _whole(v: object, name: str, lo: int, hi: int, what: str = "") -> int:
    # a numpy integer is a whole number (np.int64(5) requests was refused as not one)
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not lo <= int(v) <= hi:
        raise CostModelError(f"{name} must be a whole number{what} in [{lo}, {hi}], got {v!r}")
    return int(v)


def synthetic(
    n: int,
    *,
    rate: float | None,
    prompt: str,
    output: str,
    arrival: str = "poisson",
    seed: int = 0,
    shared_prefix: int = 0,
    prompt_pool: int = 0,
    turns: int = 1,
    think_s: float = 0.0,
) -> list[Request]:
    """``n`` requests with the given arrival process and length distributions (module doc);
    ``rate=None`` sends them all at ``t = 0``.

    * ``shared_prefix``: every prompt starts with the same ``shared_prefix`` tokens (a system
      prompt) before its drawn length;
    * ``prompt_pool``: the prompts are ``prompt_pool`` distinct ones drawn once, each request
      one of them (uniformly), the whole prompt its cacheable prefix;
    * ``turns``: ``n`` conversations of ``turns`` turns (``n x turns`` requests, module doc),
      ``--prompt`` drawing each new user message and ``--output`` each answer; ``rate`` is the
      sessions' start rate and ``think_s`` the pause before each later turn;
    * ``think_s`` is also each request's pause after its client's previous answer when a closed
      loop of clients sends them (``simulate(..., concurrency=N)``).

    The engine caches one prefix per request, so ``shared_prefix`` combines with neither a pool
    nor conversations.

    Parameters
    ----------
    n : int
        Requests (or conversations when ``turns > 1``).
    rate : float or None
        Arrival rate (requests/s, or sessions/s); None: all at ``t = 0``.
    prompt, output : str
        Length distributions (:func:`sample_lengths`), tokens.
    arrival : str
        The arrival process (:func:`arrival_times`).
    seed : int
        The random seed (a whole number in ``[0, 2**32 - 1]``).
    shared_prefix : int
        Tokens of a prefix every prompt shares.
    prompt_pool : int
        Distinct prompts to draw requests from (0: every prompt distinct).
    turns : int
        Turns per conversation.
    think_s : float
        The client's pause before a later turn (s).

    Returns
    -------
    list of Request

    Raises
    ------
    CostModelError
        When a count, length, rate or pause is out of range, or options that cannot combine are
        combined.
    """
    n = _whole(n, "requests", 1, 10**7)
    shared_prefix = _whole(shared_prefix, "shared_prefix", 0, MAX_TOKENS, " of tokens")
    prompt_pool = _whole(prompt_pool, "prompt_pool", 0, 10**7, " of prompts")
    turns = _whole(turns, "turns", 1, MAX_TURNS)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed <= 2**32 - 1:
        # as SimulationRequest and SizeRequest take it (numpy refused it in its own words)
        raise CostModelError(f"seed must be a whole number in [0, {2**32 - 1}], got {seed!r}")
    if n * turns > 10**7:
        raise CostModelError(f"{n} conversations x {turns} turns is more than 10000000 requests")
    lo, hi = THINK_RANGE
    if not (isinstance(think_s, int | float) and not isinstance(think_s, bool) and lo <= think_s <= hi):
        raise CostModelError(f"think_s must be in [{lo:g}, {hi:g}] s, got {think_s!r}")
    if shared_prefix and (prompt_pool or turns > 1):
        raise CostModelError(
            "shared_prefix combines with neither prompt_pool nor turns: the engine caches one prefix per "
            "request (a pool's whole prompt, a conversation's history)"
        )
    if prompt_pool and turns > 1:
        raise CostModelError(
            "prompt_pool and turns > 1 do not combine: a conversation draws its own messages"
        )
    rng = np.random.default_rng(seed)
    t = np.zeros(n) if rate is None else arrival_times(n, rate, arrival, rng)
    if turns > 1:
        return _conversations(t, rng, prompt, output, turns, float(think_s))
    think = float(think_s)
    if prompt_pool:
        pool = sample_lengths(prompt, prompt_pool, rng, "prompt")
        pick = rng.integers(0, prompt_pool, n)
        o = sample_lengths(output, n, rng, "output")
        return [
            Request(i, float(t[i]), int(pool[k]), int(o[i]), int(k), int(pool[k]), think_s=think)
            for i, k in enumerate(pick)
        ]
    p = sample_lengths(prompt, n, rng, "prompt")
    o = sample_lengths(output, n, rng, "output")
    pid = 0 if shared_prefix else None
    return [
        Request(i, float(t[i]), shared_prefix + int(p[i]), int(o[i]), pid, shared_prefix, think_s=think)
        for i in range(n)
    ]


def _conversations(
    starts: np.ndarray, rng: np.random.Generator, message: str, answer: str, turns: int, think_s: float
) -> list[Request]:
    """Each session's turns (module doc): turn ``k``'s prompt is the history
    ``sum_{j<k} (m_j + o_j)`` plus its message ``m_k``; the history is its prefix."""
    n = len(starts)
    m = sample_lengths(message, n * turns, rng, "prompt").reshape(n, turns)
    o = sample_lengths(answer, n * turns, rng, "output").reshape(n, turns)
    out = []
    for c in range(n):
        history = 0
        for k in range(turns):
            p = history + int(m[c, k])
            if p > MAX_TOKENS:
                raise CostModelError(
                    f"conversation {c} turn {k}: a prompt of {p:,} tokens is longer than {MAX_TOKENS:,} "
                    "(fewer turns or shorter messages)"
                )
            out.append(
                Request(
                    c * turns + k,
                    float(starts[c]),
                    p,
                    int(o[c, k]),
                    prefix_id=c,
                    prefix=history,
                    session=c,
                    turn=k,
                    think_s=think_s,
                    retain=k < turns - 1,
                )
            )
            history = p + int(o[c, k])
    return out


#: the largest trace file read (64 MiB): about 3.7 M requests of 18-byte CSV rows. It is read a
#: row at a time (its lines at most :data:`MAX_LINE_CHARS`, its bytes counted as they are read),
#: each row becoming its :class:`Request` at once, so memory follows the requests the simulator
#: takes, one object a row, not the text: 658 MiB peak for a 64 MiB file of 3.72 M requests, 612
#: MiB of it the requests themselves (172 bytes each: the object, its index and its arrival, the
#: token counts shared), 447 MiB for one of 2.53 M with prefix columns (measured: maximum resident
#: set of a ``read_trace`` call less that of the same script without it, CPython 3.11, Linux
#: x86-64; 1.55 GiB and 1.21 GiB when every row was kept as Decimals and tuples before the
#: requests were made). A regular file's size is checked before it is read
MAX_TRACE_BYTES = 64 << 20
MAX_TRACE_ROWS = 10**7  #: most requests a trace may hold
MAX_LINE_CHARS = 1 << 20  #: longest line of a trace
#: digits kept when arrivals are rebased: a time up to 1e18 s to 1e-40 s exactly
_EXACT_DIGITS = 60
#: distinct token counts whose int objects the requests of a trace share (a request refers to the
#: first int read of its value instead of holding its own 32 bytes); past them each keeps its own
_SHARED_INTS = 1 << 16
_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens", "prefix_id", "prefix_tokens")
_LATEST = Decimal("1e18")


@dataclass(frozen=True)
class Trace:
    """A trace's requests, arrivals rebased so that the first is at 0 (``origin_s`` its original
    time: absolute timestamps keep their precision, the differences being taken exactly)."""

    requests: list[Request]
    origin_s: float  #: the first row's arrival_s, subtracted from every arrival
    prefixes: int  #: distinct prefix_id values


def _int_field(v: object, name: str, where: str, lo: int) -> int:
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


def _row(values: tuple[object, ...], where: str) -> tuple[Decimal, int, int, str | None, int]:
    """(arrival, prompt, output, prefix id or None, prefix tokens) of one row's :data:`_FIELDS`
    (None where a field is absent)."""
    arrival, prompt, output, pid, tokens = values
    for name, v in zip(_FIELDS[:3], values, strict=False):
        if v is None:
            raise CostModelError(f"{where}: missing field {name!r}")
    try:
        a = Decimal(str(arrival).strip())
    except InvalidOperation:
        raise CostModelError(f"{where}: arrival_s must be a number, got {str(arrival)[:40]!r}") from None
    if not a.is_finite() or a < 0 or a > _LATEST:
        raise CostModelError(f"{where}: arrival_s must be a finite time in [0, 1e18] s, got {a}")
    p = _int_field(prompt, "prompt_tokens", where, 1)
    o = _int_field(output, "output_tokens", where, 1)
    has_tokens = tokens not in (None, "")
    if pid in (None, ""):
        if has_tokens:
            raise CostModelError(f"{where}: prefix_tokens needs a prefix_id naming the shared prefix")
        return a, p, o, None, 0
    if not has_tokens:
        raise CostModelError(f"{where}: prefix_id needs prefix_tokens (how many prompt tokens are shared)")
    k = _int_field(tokens, "prefix_tokens", where, 0)
    if k > p:
        raise CostModelError(f"{where}: prefix_tokens {k} is longer than the prompt ({p} tokens)")
    return a, p, o, str(pid), k


def _records(f: IO[str], where: str, jsonl: bool) -> Iterator[tuple[int, tuple[object, ...]]]:
    """Each record's number and its :data:`_FIELDS` (None where absent), a line at a time: a
    JSON line's number counts blank lines, a CSV row's does not (as ``csv.DictReader`` skips
    them)."""
    lines = bounded_lines(f, MAX_LINE_CHARS, where)
    if jsonl:
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_float=Decimal, object_pairs_hook=unique_keys())
            except CostModelError as exc:  # a key given twice: which value is meant is not known
                raise CostModelError(f"{where} row {i}: {exc}") from None
            except (ValueError, RecursionError) as exc:
                raise CostModelError(f"{where} row {i}: not valid JSON ({str(exc)[:120]})") from None
            if not isinstance(obj, dict):
                raise CostModelError(f"{where} row {i}: not a JSON object")
            yield i, tuple(obj.get(name) for name in _FIELDS)
        return
    reader = csv.reader(lines)
    try:
        header = next(reader, [])  # an empty file: no header, and no rows follow
    except csv.Error as exc:
        raise _not_csv(exc, f"{where} row 1") from None
    at = [header.index(name) if name in header else -1 for name in _FIELDS]
    i = 0
    while True:
        try:
            row = next(reader)
            while not row:  # a blank line: no request
                row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _not_csv(exc, f"{where} row {i + 1}") from None
        if i == 0:
            for name in _FIELDS:
                if header.count(name) > 1:  # a dict of the row would keep the last one silently
                    raise CostModelError(
                        f"{where}: column {name!r} appears {header.count(name)} times in the header; "
                        "give each column once"
                    )
        i += 1
        n = len(row)
        yield i, tuple(row[j] if 0 <= j < n else None for j in at)


def _not_csv(exc: csv.Error, where: str) -> CostModelError:
    limit = csv.field_size_limit()
    why = f"a field is longer than {limit:,} characters" if "field limit" in str(exc) else str(exc)
    return CostModelError(f"{where}: not a CSV row ({why})")


def read_trace(path: str | Path) -> Trace:
    """A CSV or JSON-lines trace (module doc), its arrivals rebased to the first one; the suffix is
    matched case-insensitively and a UTF-8 byte-order mark is dropped. One-line errors name the
    row and field; reads are bounded (:data:`MAX_TRACE_BYTES`, :data:`MAX_TRACE_ROWS`), a row at a
    time.

    Parameters
    ----------
    path : str or Path
        A ``.csv`` or ``.jsonl`` file.

    Returns
    -------
    Trace
        The requests, the first arrival's original time (s) and the distinct prefix ids.

    Raises
    ------
    CostModelError
        When the file cannot be read, is too large, is empty, or a row's field is invalid.
    """
    if not isinstance(path, str | os.PathLike):  # None was a bare TypeError from Path()
        raise CostModelError(f"trace path must be a str or Path, got {type(path).__name__} {path!r:.40}")
    path = Path(path)
    where = f"trace {str(path)[:200]}"
    jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson")
    out: list[Request] = []
    ids: dict[str, tuple[int, int, int]] = {}  # prefix_id -> (its number, its prefix_tokens, first row)
    seen: dict[int, int] = {}  # token counts read: the first int object of each value

    def shared(n: int) -> int:
        return seen.setdefault(n, n) if len(seen) < _SHARED_INTS else seen.get(n, n)

    t0 = prev = Decimal(0)
    t = 0.0
    # a regular file, never a FIFO or device (opened non-blocking, checked on the descriptor), of
    # at most MAX_TRACE_BYTES before a byte is read; bytes counted as they are read (bounded_text)
    raw = open_user_file(path, what="trace", max_bytes=MAX_TRACE_BYTES)
    grown = f"{where}: larger than {MAX_TRACE_BYTES:,} bytes (split it)"
    try:
        with bounded_text(raw, MAX_TRACE_BYTES, grown) as f, localcontext(Context(prec=_EXACT_DIGITS)):
            for i, values in _records(f, where, jsonl):
                if len(out) >= MAX_TRACE_ROWS:
                    raise CostModelError(f"{where}: more than {MAX_TRACE_ROWS:,} requests")
                a, p, o, pid, k = _row(values, f"{where} row {i}")
                number = None
                if pid is not None:
                    number, k0, first = ids.setdefault(pid, (len(ids), k, i))
                    if k0 != k:
                        raise CostModelError(
                            f"{where} row {i}: prefix_id {pid[:40]!r} has prefix_tokens {k}, but row "
                            f"{first} gave it {k0} (one prefix_id names one shared prefix)"
                        )
                if not out:
                    t0 = a
                    t = float(a - t0)
                elif a < prev:
                    raise CostModelError(
                        f"{where} row {i}: arrival_s {a} is before the previous row's {prev} (sort it)"
                    )
                elif a.compare_total(prev):  # not the previous text's very number: its own float
                    t = float(a - t0)  # the difference of the decimal texts, exact; then rounded once
                prev = a
                out.append(Request(len(out), t, shared(p), shared(o), number, shared(k)))
    except (OSError, UnicodeDecodeError) as exc:
        raise CostModelError(f"{where}: cannot read it ({type(exc).__name__})") from None
    finally:
        raw.close()
    if not out:
        raise CostModelError(f"{where}: no requests")
    return Trace(out, float(t0), len(ids))


def load_trace(path: str | Path) -> list[Request]:
    """The requests of :func:`read_trace` (arrivals from the first one at 0).

    Parameters
    ----------
    path : str or Path
        A ``.csv`` or ``.jsonl`` file.

    Returns
    -------
    list of Request

    Raises
    ------
    CostModelError
        As :func:`read_trace`.
    """
    return read_trace(path).requests
