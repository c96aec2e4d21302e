"""The one policy for the engine's in-process caches: bounded, least recently used dropped first.

Everything the engine derives once and then reuses in a process (compiled step forms, the mixed
serving step, the predicted step, capacity ledgers) lives in a :class:`BoundedCache`: a mapping
from a hashable key (the frozen config, the device, the plan) to the built object, holding at
most ``maxsize`` entries and dropping the least recently used one when a new one comes in. A
long-running process (a notebook sweeping hundreds of configurations, a search service) holds
at most ``maxsize`` objects per cache, never an unbounded pile.

Two kinds of memo stay outside it, on purpose: the interning of dimension symbols
(:mod:`costmodel.symbols`: one sympy symbol per name, which must stay the same object for as
long as expressions built with it live) and the loaders of the measured corpus (one entry per
framework and device file of a fixed wheel: ``functools.cache`` over a finite set).

>>> c = BoundedCache("demo", maxsize=2)
>>> c.get_or_build("a", lambda: 1), c.get_or_build("b", lambda: 2), c.get_or_build("a", lambda: 9)
(1, 2, 1)
>>> c.get_or_build("c", lambda: 3)  # "b" is now the least recently used: dropped
3
>>> sorted(c.keys()), c.info()
(['a', 'c'], {'hits': 1, 'misses': 3, 'size': 2, 'maxsize': 2})
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from .errors import CostModelError

__all__ = ["BoundedCache", "DEFAULT_SIZE", "all_caches", "clear_all"]

V = TypeVar("V")

#: entries per cache unless a cache says otherwise
DEFAULT_SIZE = 256

_REGISTRY: dict[str, BoundedCache[object]] = {}


class BoundedCache(Generic[V]):
    """A least-recently-used cache of at most ``maxsize`` built objects (module doc)."""

    def __init__(self, name: str, maxsize: int = DEFAULT_SIZE) -> None:
        if type(maxsize) is not int or maxsize < 1:
            raise CostModelError(f"cache {name!r}: maxsize must be a positive integer, got {maxsize!r}")
        self.name = name
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self.hits = 0
        self.misses = 0
        _REGISTRY[name] = self  # type: ignore[assignment]

    def get_or_build(self, key: Hashable, build: Callable[[], V]) -> V:
        """The object under ``key``, built by ``build()`` (and kept) when absent."""
        try:
            value = self._data[key]
        except KeyError:
            self.misses += 1
            value = build()
            self._data[key] = value
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value
        self.hits += 1
        self._data.move_to_end(key)
        return value

    def get(self, key: Hashable) -> V | None:
        """The object under ``key`` or None (counts as neither a hit nor a miss)."""
        return self._data.get(key)

    def keys(self) -> Iterator[Hashable]:
        return iter(self._data.keys())

    def values(self) -> Iterator[V]:
        return iter(self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()
        self.hits = self.misses = 0

    def info(self) -> dict[str, int]:
        """Hits, misses, current size and bound."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._data), "maxsize": self.maxsize}


def all_caches() -> dict[str, dict[str, int]]:
    """Every bounded cache of this process by name, with its :meth:`BoundedCache.info`."""
    return {name: c.info() for name, c in sorted(_REGISTRY.items())}


def clear_all() -> None:
    """Empty every bounded cache (tests; an edited catalog or config already changes the keys)."""
    for c in _REGISTRY.values():
        c.clear()
