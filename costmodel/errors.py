"""Errors raised by the engine.

Every error names the field at fault, the value it got and what is allowed,
so a user never has to read a traceback from deep inside sympy.
"""

from __future__ import annotations

__all__ = [
    "CostModelError",
    "InvalidDimensionError",
    "UnknownDTypeError",
    "UnknownDeviceError",
    "UnknownRuleError",
    "RuleArgumentError",
    "HardwareSpecError",
    "MissingRoofError",
    "UnboundSymbolError",
    "ExpressionSyntaxError",
    "SymbolicComparisonError",
]


class CostModelError(ValueError):
    """Base class of every error the engine raises on bad input."""


class InvalidDimensionError(CostModelError):
    """A dimension (size, count, degree) is not a positive quantity."""


class UnknownDTypeError(CostModelError):
    """A dtype name is not in the dtype table."""


class UnknownDeviceError(CostModelError):
    """A device name is not in the hardware catalog."""


class UnknownRuleError(CostModelError):
    """An operator name has no cost rule registered."""


class RuleArgumentError(CostModelError):
    """A cost rule was called with a missing, unknown or invalid argument."""


class HardwareSpecError(CostModelError):
    """A hardware spec (Python or file) has a missing or invalid field."""


class MissingRoofError(CostModelError):
    """A cost needs a roof (unit/precision or memory level) the device lacks."""


class UnboundSymbolError(CostModelError):
    """A numeric result was asked for while symbols are still unbound."""


class ExpressionSyntaxError(CostModelError):
    """A user-supplied expression string is not in the allowed grammar."""


class SymbolicComparisonError(CostModelError):
    """A comparison was asked of expressions that are still symbolic."""
