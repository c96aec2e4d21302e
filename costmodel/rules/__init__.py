"""Operator cost rules, registered by name (see :mod:`.registry`).

Every module of this package is imported on first import (``pkgutil``), so a
new rule is one module with ``@register_rule`` functions: no list to update.
"""

import importlib
import pkgutil

from .attention import attention as attention_rule
from .attention import causal_pairs
from .moe import experts_touched
from .registry import Rule, get_rule, op_cost, register_rule, rule_names
from .softmax import SOFTMAX_VARIANTS

for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")  # importing registers the module's rules

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
