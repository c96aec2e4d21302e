"""The base of every report the engine returns: a frozen dataclass with typed fields.

A report is data, not prose: fields are numbers, sympy expressions, enums,
nested reports or tuples of them; sentences about them belong to the command
line. :meth:`Result.to_dict` gives plain JSON-ready data (numeric expressions
as floats, symbolic ones as strings, enums as their values).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Knee(Result):
...     batch: float
...     unit: str
>>> Knee(12.5, "tensor").to_dict()
{'batch': 12.5, 'unit': 'tensor'}
"""

from __future__ import annotations

import dataclasses
import enum
import math
import sys
from typing import Any, ClassVar

__all__ = ["Result", "plain"]


def plain(value: Any) -> Any:
    """``value`` as plain data: reports as dicts, numeric expressions as floats, symbols as strings."""
    if isinstance(value, Result) or callable(getattr(value, "to_dict", None)):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value
    sympy = sys.modules.get("sympy")  # not imported yet: then no value can be a sympy object
    if sympy is not None and isinstance(value, sympy.Basic):
        if isinstance(value, sympy.Expr) and not value.free_symbols:
            if value.is_Integer:
                return int(value)
            f = float(value)
            return f if math.isfinite(f) else str(value)
        return str(value)
    if isinstance(value, dict):
        return {str(plain(k)) if not isinstance(k, str) else k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


class Result:
    """Mixin for frozen report dataclasses: :meth:`to_dict` exports every field as plain data."""

    # set by @dataclass on every subclass (declared, not assigned: the mixin itself is no dataclass)
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def _repr_html_(self) -> str:
        """The report as an HTML table: Jupyter's rich display (:func:`costmodel.html.result_table`,
        no plotting library needed)."""
        from .html import result_table

        return f"<b>{type(self).__name__}</b>" + result_table(self)
