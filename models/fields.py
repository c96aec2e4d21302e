"""Typed readers of ``config.json`` fields: the one place a Hugging Face config's values become Python
booleans, integers and floats (light: no sympy).

JSON has ``true``/``false``, numbers and strings; Python's truthiness would read ``"false"``,
``[]``, ``1.5`` or ``{}`` as a boolean and a config that says ``"sym": "no"`` would be costed
as symmetric. Every field the loaders read goes through one of these, which refuse any other
type naming the field, the value and what is allowed:

* :func:`bool_field`: JSON ``true`` or ``false`` only (not ``0``/``1``, not strings);
* :func:`int_field`: a JSON integer (not a boolean, not ``4096.0``) within ``[lo, hi]``,
  by default ``[0, 2**31 - 1]``: every width, count, layer index and offset a config states is a
  non-negative 32-bit integer (PyTorch's ``nn.Linear``/``nn.Embedding`` shapes are ``int64``,
  transformers' configs ``int``); a field with a negative sentinel (GPTQ's ``group_size: -1``)
  passes its own ``lo``;
* :func:`float_field`: a JSON number (not a boolean), finite, within ``[lo, hi]``.

``null`` reads as absent (the default) for all three, as transformers' config classes do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from costmodel.errors import CostModelError

__all__ = [
    "GELU_NAMES",
    "MAX_PATTERN_LAYERS",
    "pattern_layers",
    "ModelConfigError",
    "bool_field",
    "int_field",
    "float_field",
    "choice_field",
    "first_field",
    "INT_MAX",
]

#: GELU's spellings in transformers' ``ACT2FN`` (activations.py), which config files name
GELU_NAMES = (
    "gelu",
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_fast",
    "gelu_python",
    "gelu_accurate",
    "gelu_10",
    "quick_gelu",
)

#: the largest integer a config field may state (a signed 32-bit int: module doc)
INT_MAX = 2**31 - 1


class ModelConfigError(CostModelError):
    """A model configuration has a missing, invalid or inconsistent field."""


class UnknownFieldError(ModelConfigError, TypeError):
    """A keyword :class:`~models.config.ModelConfig` has no field for (a misspelt one): the
    project's error type, and a ``TypeError`` as Python's for an unexpected keyword argument."""


def _given(cfg: Mapping[str, Any], key: str, name: str, default: Any) -> tuple[bool, Any]:
    """(True, value) when ``cfg`` states ``key`` (not null); else (False, default), or refused when
    the field is required (``default`` is ``...``)."""
    if key in cfg and cfg[key] is not None:
        return True, cfg[key]
    if default is ...:
        raise ModelConfigError(f"{name}: config.json is missing required field {key!r}")
    return False, default


def _shown(value: Any) -> str:
    return f"{value!r:.60}"


def bool_field(cfg: Mapping[str, Any], key: str, name: str, default: Any = ...) -> Any:
    """``cfg[key]`` as a boolean: JSON ``true``/``false`` only; ``default`` when absent or null.

    Parameters
    ----------
    cfg : the parsed config (or a nested object such as ``quantization_config``)
    key : the field's name
    name : what the error names first (the model, and the object the field sits in)
    default : the value when absent or null; ``...`` makes the field required

    Returns
    -------
    The field's boolean, or ``default``.

    >>> bool_field({"sym": True}, "sym", "m")
    True
    >>> bool_field({"sym": "no"}, "sym", "m")
    Traceback (most recent call last):
    ...
    models.fields.ModelConfigError: m: config field 'sym' must be true or false (a JSON boolean), got 'no'
    """
    stated, value = _given(cfg, key, name, default)
    if stated and not isinstance(value, bool):
        raise ModelConfigError(
            f"{name}: config field {key!r} must be true or false (a JSON boolean), got {_shown(value)}"
        )
    return value


def int_field(
    cfg: Mapping[str, Any], key: str, name: str, default: Any = ..., *, lo: int = 0, hi: int = INT_MAX
) -> Any:
    """``cfg[key]`` as an integer in ``[lo, hi]`` (module doc); ``default`` when absent or null.

    Parameters
    ----------
    cfg, key, name, default : as :func:`bool_field`
    lo, hi : the allowed range, inclusive (default ``[0, 2**31 - 1]``)

    Returns
    -------
    The field's integer, or ``default``.

    >>> int_field({"hidden_size": 4096}, "hidden_size", "m")
    4096
    >>> int_field({"hidden_size": 40.5}, "hidden_size", "m")
    Traceback (most recent call last):
    ...
    models.fields.ModelConfigError: m: config field 'hidden_size' must be an integer in [0, 2147483647], got 40.5
    """
    stated, value = _given(cfg, key, name, default)
    if stated and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
        raise ModelConfigError(
            f"{name}: config field {key!r} must be an integer in [{lo}, {hi}], got {_shown(value)}"
        )
    return value


def float_field(
    cfg: Mapping[str, Any], key: str, name: str, default: Any = ..., *, lo: float, hi: float
) -> Any:
    """``cfg[key]`` as a finite number in ``[lo, hi]`` (an integer is a number too); ``default``
    when absent or null.

    Parameters
    ----------
    cfg, key, name, default : as :func:`bool_field`
    lo, hi : the allowed range, inclusive

    Returns
    -------
    The field's value as a float, or ``default``.

    >>> float_field({"factor": 8}, "factor", "m", lo=1, hi=1e6)
    8.0
    >>> float_field({"factor": float("nan")}, "factor", "m", lo=1, hi=1e6)
    Traceback (most recent call last):
    ...
    models.fields.ModelConfigError: m: config field 'factor' must be a finite number in [1, 1e+06], got nan
    """
    stated, value = _given(cfg, key, name, default)
    if not stated:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        ok = False
    else:
        ok = lo <= value <= hi
    if not ok:
        raise ModelConfigError(
            f"{name}: config field {key!r} must be a finite number in [{lo:g}, {hi:g}], got {_shown(value)}"
        )
    return float(value)


def choice_field(
    cfg: Mapping[str, Any], key: str, name: str, allowed: tuple[str, ...], default: Any = ...
) -> Any:
    """``cfg[key]`` as one of the strings ``allowed``; ``default`` when absent or null.

    Parameters
    ----------
    cfg, key, name, default : as :func:`bool_field`
    allowed : the strings the field may hold (exact spelling)

    Returns
    -------
    The field's string, or ``default``.

    >>> choice_field({"topk_method": "noaux_tc"}, "topk_method", "m", ("greedy", "noaux_tc"))
    'noaux_tc'
    >>> choice_field({"topk_method": 5}, "topk_method", "m", ("greedy", "noaux_tc"))
    Traceback (most recent call last):
    ...
    models.fields.ModelConfigError: m: config field 'topk_method' must be one of greedy, noaux_tc, got 5
    """
    stated, value = _given(cfg, key, name, default)
    if stated and (not isinstance(value, str) or value not in allowed):
        raise ModelConfigError(
            f"{name}: config field {key!r} must be one of {', '.join(allowed)}, got {_shown(value)}"
        )
    return value


def first_field(
    cfg: Mapping[str, Any], get: Callable[..., Any], name: str, keys: tuple[str, ...], default: Any = ...
) -> Any:
    """The first of ``keys`` the config states (families rename fields between releases), read by
    ``get`` (one of the readers above)."""
    for k in keys:
        if cfg.get(k) is not None:
            return get(cfg, k, name)
    return get(cfg, keys[0], name, default)


#: the most layers a per-layer pattern may list (the deepest catalog model has 126)
MAX_PATTERN_LAYERS = 4096


def pattern_layers(common: dict[str, Any], name: str) -> int:
    """``num_hidden_layers``, refused above :data:`MAX_PATTERN_LAYERS` before any per-layer list is built."""
    n = common["num_hidden_layers"]
    if n < 1 or n > MAX_PATTERN_LAYERS:
        raise ModelConfigError(
            f"{name}: num_hidden_layers must be between 1 and {MAX_PATTERN_LAYERS} for a per-layer pattern, got {n}"
        )
    return n
