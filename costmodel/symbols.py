"""The one symbol factory: dimensions, continuous quantities and counts.

Every sympy symbol of the engine comes from here, so one name is one symbol
everywhere (sympy treats ``Symbol("P", positive=True)`` and
``Symbol("P", positive=True, integer=True)`` as different symbols, and
``P/beta - P/beta`` written with both would not cancel).

* :func:`dim` - sizes: positive integers. Where Hugging Face ``config.json``
  has a field for the dimension, the symbol carries that field's name
  (``hidden_size``, ``num_key_value_heads`` ...), so binding a config is a
  plain substitution.
* :func:`quantity` - continuous positive quantities: hardware roofs (``P``,
  ``beta``, ``C`` ...), bytes per element ``b``, rates, times.
* :func:`count` - whole numbers that may be zero (a cached prefix).
* :func:`symbol` - the symbol a name in a user expression means: a known
  quantity or count by its name, anything else a dimension.

A name keeps the kind it was first made with; asking for it as another kind
raises :class:`~costmodel.errors.InvalidDimensionError`.

>>> from costmodel.symbols import dim, B, hidden_size
>>> dim("batch") is B
True
>>> (2 * hidden_size).is_positive
True
>>> symbol("P") is quantity("P"), quantity("P").is_integer
(True, None)
"""

from __future__ import annotations

import numbers

import sympy

from .errors import InvalidDimensionError

__all__ = [
    "dim",
    "quantity",
    "count",
    "symbol",
    "QUANTITIES",
    "COUNTS",
    "DISPLAY_NAMES",
    "display",
    "CANONICAL_DIMS",
    "DIM_ALIASES",
    "check_dim",
    "B",
    "T",
    "S",
    "ctx",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "num_hidden_layers",
    "num_experts",
    "num_experts_per_tok",
    "p",
    "M",
    "N",
    "K",
]

#: Canonical dimension names and what they mean.
CANONICAL_DIMS: dict[str, str] = {
    "B": "batch: sequences processed together",
    "T": "tokens per step (prefill T = B*S, decode T = B)",
    "S": "prompt length in tokens",
    "ctx": "KV length: tokens already in the cache",
    "hidden_size": "model width d_model",
    "num_attention_heads": "query heads H",
    "num_key_value_heads": "key/value heads H_kv",
    "head_dim": "per-head dimension d_head",
    "intermediate_size": "MLP inner width d_ff",
    "vocab_size": "vocabulary size",
    "num_hidden_layers": "number of layers L",
    "num_experts": "routed experts E",
    "num_experts_per_tok": "experts per token k (top-k)",
    "p": "parallel degree (devices)",
    "M": "GEMM rows",
    "N": "GEMM columns",
    "K": "GEMM reduction length",
    "gamma": "speculative decoding: tokens drafted per step (Leviathan et al. 2023)",
}

#: Short names accepted wherever a dimension is named by the user.
DIM_ALIASES: dict[str, str] = {
    "batch": "B",
    "tokens": "T",
    "seq": "S",
    "prompt": "S",
    "kv_len": "ctx",
    "d_model": "hidden_size",
    "n_heads": "num_attention_heads",
    "H": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "H_kv": "num_key_value_heads",
    "d_head": "head_dim",
    "d_ff": "intermediate_size",
    "vocab": "vocab_size",
    "n_layers": "num_hidden_layers",
    "L": "num_hidden_layers",
    "E": "num_experts",
    "k": "num_experts_per_tok",
    "top_k": "num_experts_per_tok",
}

#: Continuous positive quantities (real, not integer) and what they mean.
QUANTITIES: dict[str, str] = {
    "P": "peak FLOP/s of the tensor roof",
    "P_vector": "peak FLOP/s of the vector roof",
    "P_sfu": "peak op/s of the transcendental (SFU) roof",
    "beta": "DRAM bandwidth, bytes/s",
    "C": "memory capacity, bytes",
    "beta_link": "link bandwidth per direction, bytes/s",
    "alpha_link": "link latency per message, s",
    "b": "bytes per element",
    "alpha": "speculative decoding: probability a drafted token is accepted",
    "T_target": "target model step time, s",
    "T_draft": "draft model step time, s",
    "T_verify": "target model verification step time, s",
    "x": "a positive real unknown (solving, plotting)",
}
#: Whole numbers that may be zero.
COUNTS: dict[str, str] = {
    "prefix": "tokens already cached before a prefill chunk",
}

_KINDS: dict[str, str] = {}  # name -> "dimension" | "quantity" | "count"
_CACHE: dict[str, sympy.Symbol] = {}
_ASSUMPTIONS: dict[str, dict[str, bool]] = {
    "dimension": {"integer": True, "positive": True},
    "quantity": {"positive": True},
    "count": {"integer": True, "nonnegative": True},
}


#: the longest symbol name taken (a dimension named by a user, a file or an importer); longer
#: names are refused, so an error or a closed form never quotes a name of thousands of characters
MAX_NAME = 200


def _shown(name: object) -> str:
    """``name`` as an error quotes it: its repr, cut to 100 characters with its length said."""
    if isinstance(name, str) and len(name) > 100:
        return f"{name[:100]!r}... ({len(name):,} characters)"
    return repr(name)


def _make(name: str, kind: str) -> sympy.Symbol:
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidDimensionError(
            f"symbol name {_shown(name)} is not a valid identifier; use letters, digits and _"
        )
    if len(name) > MAX_NAME:
        raise InvalidDimensionError(f"symbol name {_shown(name)} is too long: at most {MAX_NAME} characters")
    sym = _CACHE.get(name)
    if sym is None:
        sym = sympy.Symbol(name, **_ASSUMPTIONS[kind])
        _CACHE[name] = sym
        _KINDS[name] = kind
    elif _KINDS[name] != kind:
        raise InvalidDimensionError(f"symbol {name!r} is a {_KINDS[name]}, it cannot also be a {kind}")
    return sym


def dim(name: str) -> sympy.Symbol:
    """Return the positive-integer symbol for a dimension name.

    Canonical names and their aliases map to one shared symbol; any other
    valid identifier gets its own positive-integer symbol, so users can name
    dimensions the catalog does not know.

    Parameters
    ----------
    name : str
        A Python identifier: a canonical name (``B``, ``ctx``, ``hidden_size``), one of its aliases
        (``d_model``) or a new name.

    Returns
    -------
    sympy.Symbol
        The shared ``integer=True, positive=True`` symbol.

    Raises
    ------
    InvalidDimensionError
        When ``name`` is not an identifier, or names a quantity or count (:func:`quantity`).

    >>> dim("d_model")
    hidden_size
    """
    if isinstance(name, str) and (name in QUANTITIES or name in COUNTS):
        kind = "quantity" if name in QUANTITIES else "count"
        raise InvalidDimensionError(f"{name!r} names a {kind}, not a dimension; use symbols.{kind}({name!r})")
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidDimensionError(
            f"dimension name {_shown(name)} is not a valid identifier; use letters, digits and _"
        )
    return _make(DIM_ALIASES.get(name, name), "dimension")


def quantity(name: str) -> sympy.Symbol:
    """The positive real symbol for a continuous quantity (``P``, ``beta``, ``b`` ...).

    >>> quantity("P") / quantity("beta") - quantity("P") / quantity("beta")
    0
    """
    return _make(name, "quantity")


def count(name: str) -> sympy.Symbol:
    """The non-negative integer symbol for a count that may be zero (``prefix``)."""
    return _make(name, "count")


def symbol(name: str) -> sympy.Symbol:
    """The symbol a name in an expression means: a quantity or count by its name, else a dimension.

    >>> symbol("beta") is quantity("beta"), symbol("d_model") is dim("hidden_size")
    (True, True)
    """
    if isinstance(name, str) and name in _KINDS:
        return _CACHE[name]
    if isinstance(name, str) and name in QUANTITIES:
        return quantity(name)
    if isinstance(name, str) and name in COUNTS:
        return count(name)
    return dim(name)


#: short names for printing closed forms the way papers write them
DISPLAY_NAMES: dict[str, str] = {
    "num_attention_heads": "H",
    "num_key_value_heads": "H_kv",
    "hidden_size": "d_model",
    "head_dim": "d_head",
    "intermediate_size": "d_ff",
    "num_hidden_layers": "L",
    "vocab_size": "V",
    "num_experts": "E",
    "num_experts_per_tok": "top_k",
}


def display(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with canonical dimension names shortened for printing (``H``, ``H_kv``, ``L`` ...).

    The result is for display only: its symbols are plain names, not the engine's.

    >>> display(2 * dim("H") / (dim("H_kv") * quantity("b")))
    2*H/(H_kv*b)
    """
    sub = {_CACHE[k]: sympy.Symbol(v, positive=True) for k, v in DISPLAY_NAMES.items() if k in _CACHE}
    return expr.xreplace(sub)


B = dim("B")
T = dim("T")
S = dim("S")
ctx = dim("ctx")
hidden_size = dim("hidden_size")
num_attention_heads = dim("num_attention_heads")
num_key_value_heads = dim("num_key_value_heads")
head_dim = dim("head_dim")
intermediate_size = dim("intermediate_size")
vocab_size = dim("vocab_size")
num_hidden_layers = dim("num_hidden_layers")
num_experts = dim("num_experts")
num_experts_per_tok = dim("num_experts_per_tok")
p = dim("p")
M = dim("M")
N = dim("N")
K = dim("K")


def check_dim(value: object, field: str, *, allow_zero: bool = False) -> sympy.Expr:
    """Validate a dimension and return it as a sympy expression.

    Accepts a positive integer, a sympy expression that is not known to be
    non-positive (e.g. ``B*S``), or ``0`` when ``allow_zero``. Anything else
    raises :class:`InvalidDimensionError` naming ``field``.

    >>> check_dim(4096, "N")
    4096
    >>> check_dim(-1, "N")
    Traceback (most recent call last):
    ...
    costmodel.errors.InvalidDimensionError: N must be a positive integer or a positive symbolic expression, got -1
    """
    allowed = "a positive integer or a positive symbolic expression"
    if isinstance(value, bool):
        raise InvalidDimensionError(f"{field} must be {allowed}, got {value!r}")
    if isinstance(value, numbers.Integral):
        expr: sympy.Expr = sympy.Integer(int(value))
    elif isinstance(value, float):
        if not value.is_integer():
            raise InvalidDimensionError(f"{field} must be {allowed}, got {value!r}")
        expr = sympy.Integer(int(value))
    elif isinstance(value, sympy.Expr):
        expr = value
    else:
        raise InvalidDimensionError(f"{field} must be {allowed}, got {type(value).__name__} {value!r}")
    if expr.is_number:
        if expr.is_integer is not True:
            raise InvalidDimensionError(f"{field} must be {allowed}, got {expr}")
        if expr == 0 and allow_zero:
            return expr
        if not expr.is_positive:
            raise InvalidDimensionError(f"{field} must be {allowed}, got {expr}")
    elif expr.is_positive is False or (expr.is_nonnegative is False):
        raise InvalidDimensionError(f"{field} must be {allowed}, got {expr}")
    return expr
