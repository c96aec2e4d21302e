"""Package names that load on first use (PEP 562), shared by every package of the project.

A package lists ``name -> submodule`` and gets a module ``__getattr__`` and ``__dir__``: the
first access imports the submodule and caches the value in the package's namespace, so
importing a package (or a light module under it) never builds the whole engine. A lazy name
must not also be a submodule's name (importing the submodule would overwrite it): a test checks.

>>> import types
>>> pkg = types.ModuleType("demo")
>>> getattr_, dir_ = lazy_exports("json", {"dumps": ""}, vars(pkg))
>>> getattr_("dumps")([1])
'[1]'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps each public name to the
    submodule (relative, ``""`` for the package itself) that defines it."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = (
            importlib.import_module(f".{module}", package) if module else importlib.import_module(package)
        )
        value = getattr(target, name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
