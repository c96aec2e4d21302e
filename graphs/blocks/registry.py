"""The MLP block registry, by name (the token mixers are plug-in classes: :mod:`models.mixers`).

A layer is ``norm -> mixer -> residual -> norm -> MLP -> residual``; the MLP is
looked up here by name, so a new MLP kind is one module with a registered function::

    @register_mlp("dense")
    def dense(layer: LayerBase, h: Ref) -> Ref: ...

A block function receives the :class:`~graphs.blocks.layer_base.LayerBase`
being built (its config, phase dims, graph builder and helpers) and the
block's input ``(node, tensor)``, adds its nodes, and returns its output.
Every module of ``graphs.blocks`` is imported on the first lookup
(``pkgutil``), so a registered block cannot be forgotten.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from costmodel.errors import CostModelError
from costmodel.tensor import Tensor

if TYPE_CHECKING:
    from .layer_base import LayerBase

__all__ = ["Ref", "Block", "register_mlp", "mlp_block", "mlp_names"]

Ref = tuple[str, Tensor]
Block = Callable[["LayerBase", Ref], Ref]

_MLPS: dict[str, Block] = {}
_LOADED = False


def _register(table: dict[str, Block], what: str, name: str) -> Callable[[Block], Block]:
    def deco(fn: Block) -> Block:
        if name in table:
            raise CostModelError(f"{what} {name!r} is already registered by {table[name].__name__}")
        table[name] = fn
        return fn

    return deco


def register_mlp(name: str) -> Callable[[Block], Block]:
    """Register an MLP block (the feed-forward slot of a layer) under ``name``."""
    return _register(_MLPS, "MLP block", name)


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    from . import __path__ as here

    for mod in pkgutil.iter_modules(here):
        importlib.import_module(f"{__package__}.{mod.name}")
    _LOADED = True


def _get(table: dict[str, Block], what: str, name: str) -> Block:
    _load()
    try:
        return table[name]
    except KeyError:
        raise CostModelError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}") from None


def mlp_block(name: str) -> Block:
    """The MLP block registered as ``name``."""
    return _get(_MLPS, "MLP block", name)


def mlp_names() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_MLPS))
