"""A model's context limit, read from its ``config.json`` (light: json only, no sympy).

``max_position_embeddings`` is the longest sequence the model was trained or
extended for. Hugging Face configs state RoPE extensions in ``rope_scaling``:

* ``llama3`` (Llama-3.1, 3.2, 4): ``max_position_embeddings`` is the limit. The
  factor rescales the frequencies of the ``original_max_position_embeddings``
  model (transformers' ``_compute_llama3_parameters``) and leaves the field as the
  served length (vLLM does not scale ``llama3`` either): Llama-3.2-1B states
  131,072, not its 8,192 x 32 = 262,144; Llama-4-Scout 10,485,760, more than
  8,192 x 16;
* with ``original_max_position_embeddings`` otherwise (DeepSeek's ``yarn``),
  ``max_position_embeddings`` is already the extended length, and
  ``factor x original`` is taken when it is larger;
* without it (Qwen's optional ``yarn`` block, ``linear``, ``dynamic``), the
  extension multiplies ``max_position_embeddings`` by ``factor`` (the Qwen2.5
  model cards: 32,768 x 4 = 131,072 tokens with YaRN enabled), except for
  families whose field is already the extended length (Gemma 3: 131,072 with
  a linear factor of 8, the card's 128K).

Multimodal configs (Gemma 3, Llama 4) state these fields under ``text_config``.

Asking for more tokens than the limit is an error naming the limit; the command
line's ``--allow-long-context`` (``allow=True``) costs it anyway with a warning,
since a bound past the trained length says nothing about quality.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.notes import say

from .fields import ModelConfigError, float_field, int_field

__all__ = ["ContextLimit", "ContextLimitError", "context_limit", "check_context", "MAX_ROPE_FACTOR"]


class ContextLimitError(CostModelError):
    """A context or prompt length exceeds the model's limit."""


@dataclass(frozen=True)
class ContextLimit:
    """The longest sequence a model supports and where the number comes from."""

    tokens: int
    why: str


#: families whose max_position_embeddings already states the rope-extended length (Gemma 3:
#: 131,072 with linear factor 8 on its global layers; the model card's 128K context)
_EXTENDED = ("gemma3", "gemma3_text")


#: the largest rope-scaling factor read (the catalog's largest is 64; a factor is a multiplier of the
#: trained length, so a value past this is a typo, not an extension)
MAX_ROPE_FACTOR = 1e6


def context_limit(cfg: Mapping[str, Any], name: str = "config.json") -> ContextLimit | None:
    """The limit a parsed ``config.json`` states (module doc), or None when it states none.

    ``max_position_embeddings`` and ``original_max_position_embeddings`` are whole numbers >= 1,
    ``rope_scaling`` an object (or null) whose ``factor`` is a finite number in
    ``[1, MAX_ROPE_FACTOR]``; anything else is refused naming the field (``name`` first), where it
    was once read as "no limit" (:mod:`models.fields`).

    Parameters
    ----------
    cfg : Mapping
        A parsed ``config.json`` (or layer file).
    name : str, default "config.json"
        What the errors name first.

    Returns
    -------
    ContextLimit or None
        The limit in tokens and why; None when none is stated.

    >>> context_limit({"max_position_embeddings": 4096}).tokens
    4096
    >>> context_limit({"max_position_embeddings": 32768,
    ...                "rope_scaling": {"type": "yarn", "factor": 4.0}}).tokens
    131072
    >>> context_limit({"max_position_embeddings": 131072, "rope_scaling":
    ...     {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}).tokens
    131072
    """
    if not isinstance(cfg, Mapping):  # a list was an AttributeError ('list' object has no attribute 'get')
        raise ModelConfigError(f"{name}: config must be a JSON object, got {type(cfg).__name__} {cfg!r:.40}")
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and "max_position_embeddings" not in cfg:
        cfg = {**text, "model_type": cfg.get("model_type")}  # multimodal: Gemma 3, Llama 4
    base = int_field(cfg, "max_position_embeddings", name, None, lo=1)
    if base is None:
        return None
    if cfg.get("model_type") in _EXTENDED:
        return ContextLimit(base, f"max_position_embeddings {base:,} (already the extended length)")
    rs = cfg.get("rope_scaling")
    if rs is None:
        return ContextLimit(base, f"max_position_embeddings {base:,}")
    if not isinstance(rs, Mapping):
        raise ModelConfigError(
            f"{name}: config field 'rope_scaling' must be an object or null, got {rs!r:.60}"
        )
    where = f"{name}: rope_scaling"
    factor = float_field(rs, "factor", where, None, lo=1, hi=MAX_ROPE_FACTOR)
    orig = int_field(rs, "original_max_position_embeddings", where, None, lo=1)
    if factor is None:
        return ContextLimit(base, f"max_position_embeddings {base:,}")
    kind = rs.get("rope_type") or rs.get("type") or "rope"
    if kind == "llama3":  # the factor rescales the original's frequencies, not the limit (module doc)
        return ContextLimit(base, f"max_position_embeddings {base:,} (llama3 rope scaling)")
    if orig is not None:
        ext = int(orig * factor)
        if ext > base:
            return ContextLimit(ext, f"{kind} rope scaling: {orig:,} x {factor:g}")
        return ContextLimit(base, f"max_position_embeddings {base:,} ({kind} rope scaling)")
    ext = int(base * factor)
    return ContextLimit(ext, f"max_position_embeddings {base:,} x {kind} rope scaling {factor:g}")


def check_context(
    name: str, limit: int | None, tokens: int, field: str = "ctx", *, allow: bool = False, why: str = ""
) -> None:
    """Raise :class:`ContextLimitError` when ``tokens`` exceeds ``limit`` (warn instead with ``allow``).

    Parameters
    ----------
    name : str
        The model's name, for the message.
    limit : int or None
        The model's context limit in tokens; None: nothing is checked.
    tokens : int
        The context asked for, in tokens.
    field : str, default "ctx"
        The parameter that asked for it, for the message (``ctx``, ``--seq`` ...).
    allow : bool, default False
        Say a warning (:func:`costmodel.notes.say`) instead of raising.
    why : str, default ""
        Where the limit comes from (``max_position_embeddings 131,072``), added to the message.

    Raises
    ------
    ContextLimitError
        When ``tokens > limit`` and not ``allow``.
    """
    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Integral):  # '20' was a bare TypeError
        raise CostModelError(
            f"{field} must be a whole number of tokens, got {type(tokens).__name__} {tokens!r:.40}"
        )
    if limit is None or tokens <= limit:
        return
    src = f" ({why})" if why else ""
    msg = f"{name}: {field} {tokens:,} exceeds the model's context limit of {limit:,} tokens{src}"
    if not allow:
        raise ContextLimitError(
            f"{msg}; pass --allow-long-context (allow_long_context=True) to cost it anyway"
        )
    say(f"{msg}; costed anyway (--allow-long-context)", kind="warning")
