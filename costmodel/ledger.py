"""The capacity ledger: weights + KV cache + live activations + overhead.

.. math::

    M = W + \\underbrace{B\\,C\\,k}_{\\text{KV cache}} + \\underbrace{A\\,a}_{\\text{activations}}
        + \\text{overhead}

with ``W`` the weight bytes (every parameter, embedding included), ``k`` KV
bytes per cached token (``2 L H_kv d_head b_kv`` for GQA), ``B`` sequences
each holding ``C`` cached tokens, ``A`` active tokens (prefill: ``B*S`` or a
chunk; decode: ``B``) and ``a`` live activation bytes per active token.

Layers whose cache stops growing generalise the KV term per sequence to

.. math::

    C\\,k + \\sum_j \\min(C, W_j)\\,k_j + s

with ``k_j`` the bytes per token of the layers keeping at most ``W_j``
positions (a sliding window, an attention chunk: ``capped_kv``) and ``s`` the
per-sequence state of recurrent layers (SSM, linear attention:
``state_bytes_per_sequence``), which does not depend on the context at all.

Serving engines account for overhead differently; each is a named policy:

``fraction_of_sum``
    overhead = ``rho * (W + KV + act)`` (the profiling article's ledger).
``fraction_of_total``
    only ``utilization * capacity`` may be used (vLLM's
    ``gpu_memory_utilization``); the rest is reserved.
``fraction_of_free``
    the KV cache may take ``fraction`` of what is left after weights and
    activations (TensorRT-LLM's ``kv_cache_free_gpu_memory_fraction``).

Everything is symbolic first; :func:`max_batch` and :func:`max_context`
solve the ledger against a capacity.

>>> from costmodel.symbols import B
>>> led = MemoryLedger(weights_bytes=14 * 10**9, kv_bytes_per_token=524288, activation_bytes_per_token=131072)
>>> led.total(batch=B, cached_tokens=4096, active_tokens=4096 * B)
2684354560*B + 14000000000
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from .cost import as_float
from .errors import CostModelError, InvalidDimensionError
from .expr import to_expr
from .ledger_solve import GIB, LedgerFit, solve_capacity
from .symbols import check_dim, dim, quantity

__all__ = [
    "MemoryLedger",
    "Overhead",
    "LedgerTerms",
    "max_batch",
    "max_context",
    "LedgerFit",
    "GIB",
    "check_overhead",
]


_POLICIES = ("fraction_of_sum", "fraction_of_total", "fraction_of_free")


@dataclass(frozen=True)
class Overhead:
    """How the ledger reserves memory beyond the three terms (module doc)."""

    policy: str = "fraction_of_sum"
    fraction: Any = 0

    def __post_init__(self) -> None:
        if self.policy not in _POLICIES:
            raise CostModelError(
                f"overhead policy {self.policy!r} not allowed; allowed: {', '.join(_POLICIES)}"
            )
        f = to_expr(self.fraction, field="overhead fraction")
        if f.is_number:
            if self.policy == "fraction_of_sum" and not (0 <= f < 1):
                raise InvalidDimensionError(f"overhead fraction must be in [0, 1), got {f}")
            if self.policy != "fraction_of_sum" and not (0 < f <= 1):
                raise InvalidDimensionError(f"{self.policy} fraction must be in (0, 1], got {f}")
        object.__setattr__(self, "fraction", f)


@dataclass(frozen=True)
class LedgerTerms:
    """The four terms (bytes) and the capacity they are checked against."""

    weights: sympy.Expr
    kv_cache: sympy.Expr
    activations: sympy.Expr
    overhead: sympy.Expr

    @property
    def total(self) -> sympy.Expr:
        return self.weights + self.kv_cache + self.activations + self.overhead

    def as_dict(self) -> dict[str, sympy.Expr]:
        return {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "activations": self.activations,
            "overhead": self.overhead,
            "total": self.total,
        }


def check_overhead(overhead: Any) -> Overhead:
    """``overhead`` if it is an :class:`Overhead`, else a one-line refusal naming its type and value
    (the ledger's one check, also run before a caller keys a memo by it).

    Parameters
    ----------
    overhead : Overhead
        The reserve policy given.

    Returns
    -------
    Overhead

    Raises
    ------
    CostModelError
        When it is anything else (``0``, ``0.1``, a dict).
    """
    if not isinstance(overhead, Overhead):
        raise CostModelError(
            "overhead must be an Overhead (e.g. Overhead('fraction_of_sum', 0.1)), got "
            f"{type(overhead).__name__} {overhead!r:.40}"
        )
    return overhead


@dataclass(frozen=True)
class MemoryLedger:
    """Per-device memory needs of a model being served (module doc)."""

    weights_bytes: Any
    kv_bytes_per_token: Any
    activation_bytes_per_token: Any = 0
    overhead: Overhead = Overhead()
    #: (bytes per token, positions kept) of layers whose cache is capped (window, chunk)
    capped_kv: tuple[tuple[Any, Any], ...] = ()
    state_bytes_per_sequence: Any = 0

    def __post_init__(self) -> None:
        check_overhead(self.overhead)
        for f in (
            "weights_bytes",
            "kv_bytes_per_token",
            "activation_bytes_per_token",
            "state_bytes_per_sequence",
        ):
            v = to_expr(getattr(self, f), field=f)
            if v.is_number and v.is_negative:
                raise InvalidDimensionError(f"{f} must be >= 0, got {v}")
            object.__setattr__(self, f, v)
        capped = []
        for i, pair in enumerate(self.capped_kv):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise CostModelError(
                    f"capped_kv[{i}] must be a (bytes_per_token, positions) pair, got {pair!r}"
                )
            k = to_expr(pair[0], field=f"capped_kv[{i}] bytes_per_token")
            if k.is_number and k.is_negative:
                raise InvalidDimensionError(f"capped_kv[{i}] bytes_per_token must be >= 0, got {k}")
            capped.append((k, check_dim(pair[1], f"capped_kv[{i}] positions")))
        object.__setattr__(self, "capped_kv", tuple(capped))

    def kv_bytes_per_sequence(self, cached_tokens: Any) -> sympy.Expr:
        """KV cache and recurrent state of one sequence holding ``cached_tokens`` (module doc).

        >>> led = MemoryLedger(0, 100, capped_kv=((10, 128),), state_bytes_per_sequence=7)
        >>> led.kv_bytes_per_sequence(1000)  # 1000*100 + 128*10 + 7
        101287
        """
        c = check_dim(cached_tokens, "ctx", allow_zero=True)
        capped = sympy.Add(*(k * sympy.Min(c, w) for k, w in self.capped_kv))
        return c * self.kv_bytes_per_token + capped + self.state_bytes_per_sequence

    def terms(
        self, *, batch: Any, cached_tokens: Any, active_tokens: Any, capacity: Any = None
    ) -> LedgerTerms:
        """The four terms for ``batch`` sequences of ``cached_tokens`` each.

        ``capacity`` (bytes) is needed by the ``fraction_of_total`` policy,
        whose overhead is the reserved ``(1 - utilization) * capacity``.
        """
        b = check_dim(batch, "batch")
        c = check_dim(cached_tokens, "ctx", allow_zero=True)
        a = check_dim(active_tokens, "active_tokens", allow_zero=True)
        w = self.weights_bytes
        kv = b * self.kv_bytes_per_sequence(c)
        act = a * self.activation_bytes_per_token
        pol, f = self.overhead.policy, self.overhead.fraction
        if pol == "fraction_of_sum":
            over = f * (w + kv + act)
        elif pol == "fraction_of_total":
            if capacity is None:
                raise CostModelError("the fraction_of_total policy needs the device capacity")
            over = (1 - f) * to_expr(capacity, field="capacity")
        else:
            # the KV pool is fraction f of the free memory: the other (1 - f) of the free part is
            # reserved. Expressed as overhead so totals compare with the capacity directly.
            if capacity is None:
                raise CostModelError("the fraction_of_free policy needs the device capacity")
            free = to_expr(capacity, field="capacity") - w - act
            over = (1 - f) * free
        return LedgerTerms(w, kv, act, over)

    def terms_function(self) -> Any:
        """``(weights, kv_cache, activations, overhead)`` in bytes as a plain function of
        ``(batch, cached_tokens, active_tokens, capacity)``, compiled once per ledger (capacity
        searches probe it dozens of times)."""
        fn = self.__dict__.get("_terms_fn")
        if fn is None:
            args = (dim("x_batch"), dim("x_cached"), dim("x_active"), quantity("x_capacity"))
            t = self.terms(batch=args[0], cached_tokens=args[1], active_tokens=args[2], capacity=args[3])
            exprs = [sympy.expand(e) for e in (t.weights, t.kv_cache, t.activations, t.overhead)]
            extra = set().union(*(e.free_symbols for e in exprs)) - set(args)
            if extra:
                names = ", ".join(sorted(str(x) for x in extra))
                raise CostModelError(
                    f"the ledger depends on {names}; bind them before solving for a capacity"
                )
            fn = sympy.lambdify(args, exprs, "math")
            object.__setattr__(self, "_terms_fn", fn)
        return fn

    def numeric_terms(
        self, batch: float, cached_tokens: float, active_tokens: float, capacity: float
    ) -> dict[str, float]:
        """The four terms and their total (bytes) at plain numbers, from :meth:`terms_function`."""
        w, kv, act, over = (
            float(v) for v in self.terms_function()(batch, cached_tokens, active_tokens, capacity)
        )
        return {
            "weights": w,
            "kv_cache": kv,
            "activations": act,
            "overhead": over,
            "total": w + kv + act + over,
        }

    def total(
        self, *, batch: Any, cached_tokens: Any, active_tokens: Any, capacity: Any = None
    ) -> sympy.Expr:
        return sympy.expand(
            self.terms(
                batch=batch, cached_tokens=cached_tokens, active_tokens=active_tokens, capacity=capacity
            ).total
        )


def max_batch(
    ledger: MemoryLedger, capacity: Any, *, ctx: Any, active_per_sequence: Any = 1, upper: int = 1 << 20
) -> LedgerFit:
    """Largest batch whose ledger fits ``capacity`` with ``ctx`` cached tokens each.

    The largest whole ``B`` in ``[1, upper]`` with
    ``weights + B * kv(ctx) + B * active_per_sequence * act + overhead <= capacity``.

    Parameters
    ----------
    ledger : MemoryLedger
        The model's terms (weights, KV per token, activations per token, overhead policy); every
        symbol bound.
    capacity : float or sympy.Expr
        Device memory in bytes (decimal, as vendors state it): a finite positive number.
    ctx : int
        Cached tokens per sequence, a positive whole number.
    active_per_sequence : int, default 1
        Tokens each sequence has in flight: 1 for decode, the prompt (or chunk) length for prefill.
    upper : int, default 2**20
        The largest batch searched, a whole number >= 1; ``value == upper`` means the search
        limit was reached, not the memory.

    Returns
    -------
    LedgerFit
        ``value`` is the batch; when even batch 1 does not fit it is 0 and ``shortfall_bytes``
        says by how much.

    Raises
    ------
    InvalidDimensionError
        When ``ctx``, ``active_per_sequence``, ``capacity`` or ``upper`` is out of range.

    >>> led = MemoryLedger(weights_bytes=16e9, kv_bytes_per_token=131072)
    >>> max_batch(led, 80e9, ctx=4096).value  # (80e9 - 16e9) // (131072 * 4096)
    119
    >>> max_batch(led, 80e9, ctx=4096, upper=0)
    Traceback (most recent call last):
    ...
    costmodel.errors.InvalidDimensionError: upper must be a whole number >= 1, got 0
    """
    if not isinstance(ledger, MemoryLedger):  # None was an AttributeError
        raise CostModelError(f"ledger must be a MemoryLedger, got {type(ledger).__name__} {ledger!r:.40}")
    cn, an = _dim_value(ctx, "ctx"), _dim_value(active_per_sequence, "active_per_sequence")
    cap = _number(capacity, "capacity")
    return solve_capacity(cap, lambda b: ledger.numeric_terms(b, cn, an * b, cap), upper)


def max_context(
    ledger: MemoryLedger, capacity: Any, *, batch: Any, active_per_sequence: Any = 1, upper: int = 1 << 26
) -> LedgerFit:
    """Longest context per sequence that fits ``capacity`` at ``batch``.

    The largest whole ``ctx`` in ``[1, upper]`` with ``batch`` sequences of ``ctx`` cached tokens
    within ``capacity``.

    Parameters
    ----------
    ledger : MemoryLedger
        The model's terms; every symbol bound.
    capacity : float or sympy.Expr
        Device memory in bytes: a finite positive number.
    batch : int
        Sequences held at once, a positive whole number.
    active_per_sequence : int, default 1
        Tokens each sequence has in flight: 1 for decode, the prompt (or chunk) length for prefill.
    upper : int, default 2**26
        The longest context searched (tokens), a whole number >= 1.

    Returns
    -------
    LedgerFit
        ``value`` is the context in tokens; 0 when not even one token fits.

    Raises
    ------
    InvalidDimensionError
        When ``batch``, ``active_per_sequence``, ``capacity`` or ``upper`` is out of range.

    >>> led = MemoryLedger(weights_bytes=10e9, kv_bytes_per_token=1e6)
    >>> max_context(led, 80e9, batch=4).value  # (80e9 - 10e9) / (4 * 1e6)
    17500
    """
    if not isinstance(ledger, MemoryLedger):  # None was an AttributeError
        raise CostModelError(f"ledger must be a MemoryLedger, got {type(ledger).__name__} {ledger!r:.40}")
    bn, an = _dim_value(batch, "batch"), _dim_value(active_per_sequence, "active_per_sequence")
    cap = _number(capacity, "capacity")
    return solve_capacity(cap, lambda c: ledger.numeric_terms(bn, c, an * bn, cap), upper)


def _number(v: Any, what: str) -> float:
    """``v`` as a float for the compiled search; a clear error when it is still symbolic."""
    if type(v) in (int, float):
        return float(v)
    return as_float(to_expr(v, field=what), what=what)


def _dim_value(v: Any, what: str) -> float:
    """A dimension checked as :func:`check_dim` does (a plain positive int passes at once), as a float."""
    if type(v) is int and v >= 1:
        return float(v)
    return _number(check_dim(v, what), what)
