"""Operator cost rules, registered by name (see :mod:`.registry`)."""

from . import (  # noqa: F401  (importing registers the rules)
    attention,
    comm,
    data_movement,
    elementwise,
    embedding,
    linear,
    moe,
    norms,
    softmax,
)
from .attention import attention as attention_rule
from .attention import causal_pairs
from .moe import experts_touched
from .registry import Rule, get_rule, op_cost, register_rule, rule_names
from .softmax import SOFTMAX_VARIANTS

__all__ = [
    "Rule",
    "register_rule",
    "get_rule",
    "rule_names",
    "op_cost",
    "causal_pairs",
    "attention_rule",
    "SOFTMAX_VARIANTS",
    "experts_touched",
]
