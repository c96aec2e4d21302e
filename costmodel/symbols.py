"""Canonical dimension symbols.

One place defines every named dimension. Each is a sympy ``Symbol`` with
``integer=True, positive=True`` so simplification knows sizes are positive
whole numbers. Where Hugging Face ``config.json`` has a field for the
dimension, the symbol carries that field's name (``hidden_size``,
``num_key_value_heads`` ...), so binding a config is a plain substitution.

>>> from costmodel.symbols import dim, B, hidden_size
>>> dim("batch") is B
True
>>> (2 * hidden_size).is_positive
True
"""

from __future__ import annotations

import numbers

import sympy

from .errors import InvalidDimensionError

__all__ = [
    "dim",
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

_CACHE: dict[str, sympy.Symbol] = {}


def dim(name: str) -> sympy.Symbol:
    """Return the positive-integer symbol for a dimension name.

    Canonical names and their aliases map to one shared symbol; any other
    valid identifier gets its own positive-integer symbol, so users can name
    dimensions the catalog does not know.

    >>> dim("d_model")
    hidden_size
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidDimensionError(
            f"dimension name {name!r} is not a valid identifier; use letters, digits and _"
        )
    canonical = DIM_ALIASES.get(name, name)
    sym = _CACHE.get(canonical)
    if sym is None:
        sym = sympy.Symbol(canonical, integer=True, positive=True)
        _CACHE[canonical] = sym
    return sym


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
