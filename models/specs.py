"""Plug-in config specs: the :class:`ConfigSpec` base, the registry that fills
:class:`~models.config.ModelConfig`'s spec mapping, and that mapping (:class:`SpecMap`).

A layer plug-in (a mixer or an MLP kind, :mod:`models.mixers`) whose layers read fields of their
own declares them as a frozen :class:`ConfigSpec` dataclass in its module and registers it with
``@register_spec``. A ModelConfig then holds one spec per registered slot it uses
(``cfg.specs["moe"]``, typed: ``cfg.spec(MoESpec)`` / ``cfg.need(MoESpec)``), takes the spec's
fields flat as keywords (``ModelConfig(..., num_experts=8)``) and binds them as dimension symbols,
so a new plug-in with new fields is its own module and nothing else learns its name.

This module sits at the bottom of :mod:`models`: it imports neither the config nor the plug-ins.
The plug-in packages (:data:`PLUGIN_PACKAGES`) load on the first registry lookup
(:func:`load_plugins`, by module name), so a plug-in cannot be forgotten and no import circle
runs through the registry.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeAlias, TypeVar

from costmodel.errors import CostModelError

if TYPE_CHECKING:
    import sympy

__all__ = [
    "Dim",
    "ConfigSpec",
    "SpecMap",
    "PLUGIN_PACKAGES",
    "int_at_least_zero",
    "register_spec",
    "spec_classes",
    "spec_class",
    "flat_fields",
    "load_plugins",
]

#: a dimension: given as a positive integer or a sympy expression, stored as a sympy expression
#: (``ConfigSpec.normalised`` and ``ModelConfig.__post_init__`` convert). The alias names the stored
#: type; sympy ships no type stubs, so mypy reads ``sympy.Expr`` as ``Any`` and an int (or a None
#: default, for a field a spec checks itself) type-checks too.
Dim: TypeAlias = "sympy.Expr"

#: the packages whose every module is imported on the first registry lookup: the layer plug-ins
#: and the Hugging Face family readers (each registers itself where it is defined)
PLUGIN_PACKAGES = ("models.mixers",)


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """A plug-in's typed config: a frozen dataclass of its fields, held by
    :class:`~models.config.ModelConfig` under :attr:`slot` (``cfg.spec(MoESpec)``, ``cfg.moe``).

    Field names are the Hugging Face / flat ``ModelConfig`` keyword names (``num_experts``,
    ``kv_lora_rank``), so a dimension symbol's name still matches the field it binds to, and a
    field name belongs to one spec only (a second one is refused at registration).
    :meth:`normalised` checks a spec and turns its dimensions into sympy expressions; a
    subclass adds its own conditions in :meth:`check`.

    Besides its fields, a spec class states (class variables) how a config without a per-layer
    pattern (``layer_types`` None) is laid out when it holds the spec: :attr:`uniform_mixer`
    (MLA: every layer ``mla``), :attr:`uniform_mlp` (MoE: every layer ``moe``) and
    :attr:`leading_dense_field` (MoE: that many leading layers keep a dense MLP).
    """

    #: the ModelConfig slot that holds this spec (``cfg.specs[slot]``)
    slot: ClassVar[str]
    #: what the spec is, for errors (``MoE config is missing ...``)
    label: ClassVar[str]
    #: fields that are dimensions (positive integers or sympy expressions; None: not set)
    dims: ClassVar[tuple[str, ...]] = ()
    #: dimensions that may be 0
    zero_dims: ClassVar[tuple[str, ...]] = ()
    #: fields the spec cannot do without (declared with a None default, refused when None)
    required: ClassVar[tuple[str, ...]] = ()
    #: dimensions :meth:`ModelConfig.symbolic` replaces by their symbol when set (not None, not 0)
    symbolic_dims: ClassVar[tuple[str, ...]] = ()
    #: every config carries this spec, at its defaults unless given (the softmax-attention options)
    always: ClassVar[bool] = False
    #: the mixer of every layer of a config without ``layer_types`` that holds this spec (None: gqa)
    uniform_mixer: ClassVar[str | None] = None
    #: the MLP kind of those layers (None: dense)
    uniform_mlp: ClassVar[str | None] = None
    #: the integer field counting the leading layers that keep a dense MLP (None: none do)
    leading_dense_field: ClassVar[str | None] = None

    def normalised(self, model: str) -> Self:
        """This spec checked (errors name ``model`` and the field) with its dimensions as sympy
        expressions."""
        from costmodel.symbols import check_dim

        missing = [f for f in self.required if getattr(self, f) is None]
        if missing:
            raise CostModelError(f"{model}: {self.label} config is missing {', '.join(missing)}")
        changes: dict[str, Any] = {}
        for f in self.dims:
            v = getattr(self, f)
            if v is not None:
                try:
                    changes[f] = check_dim(v, f, allow_zero=f in self.zero_dims)
                except CostModelError as exc:
                    raise CostModelError(f"{model}.{exc}") from None
        out = dataclasses.replace(self, **changes)
        out.check(model)
        return out

    def check(self, model: str) -> None:
        """Refuse a spec whose fields contradict each other (a CostModelError naming ``model``,
        the field, the value and what is allowed); called by :meth:`normalised`."""
        return None

    def leading_dense(self) -> int:
        """The leading layers that keep a dense MLP (:attr:`leading_dense_field`; 0 without one)."""
        f = self.leading_dense_field
        n = getattr(self, f) if f is not None else 0
        return n if isinstance(n, int) else 0


def int_at_least_zero(model: str, field: str, value: Any) -> None:
    """Refuse ``value`` unless it is an ``int`` >= 0 (``bool`` refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CostModelError(f"{model}: {field} must be an integer >= 0, got {value!r}")


S = TypeVar("S", bound=type[ConfigSpec])

#: slot -> spec class, in registration order
_SPECS: dict[str, type[ConfigSpec]] = {}
#: flat field name -> slot
_FLAT: dict[str, str] = {}
_LOADED = False  # every plug-in module imported
_STARTED = False  # the import of the plug-in modules has begun (this thread holds _LOCK)
_LOCK = threading.RLock()


def register_spec(cls: S) -> S:
    """Class decorator: register spec ``cls`` under ``cls.slot``. A second class for a slot, or
    a field another spec (or a ModelConfig field) already names, is refused.

    Parameters
    ----------
    cls : type
        A frozen dataclass subclassing :class:`ConfigSpec` with a ``slot`` name.

    Returns
    -------
    type
        ``cls`` itself, registered.
    """
    slot = getattr(cls, "slot", None)
    if not isinstance(slot, str) or not slot.isidentifier():
        raise CostModelError(f"spec class {cls.__name__} must set `slot` to an identifier, got {slot!r}")
    if slot in _SPECS:
        raise CostModelError(f"spec slot {slot!r} is already registered by {_SPECS[slot].__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    taken = [n for n in names if n in _FLAT]
    if taken:
        raise CostModelError(
            f"spec {cls.__name__}: field {taken[0]!r} is already a field of {_SPECS[_FLAT[taken[0]]].__name__}"
        )
    _SPECS[slot] = cls
    _FLAT.update(dict.fromkeys(names, slot))
    return cls


def load_plugins() -> None:
    """Import every module of :data:`PLUGIN_PACKAGES` once (each registers what it defines).

    Another thread asking meanwhile waits for the whole set; a plug-in module that looks the
    registry up while it is being imported (the same thread) gets what is registered so far."""
    global _LOADED, _STARTED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED or _STARTED:
            return
        _STARTED = True
        try:
            for name in PLUGIN_PACKAGES:
                pkg = importlib.import_module(name)
                for mod in pkgutil.iter_modules(pkg.__path__):
                    importlib.import_module(f"{name}.{mod.name}")
        finally:
            _LOADED = True


def spec_classes() -> dict[str, type[ConfigSpec]]:
    """Every registered spec class by slot, in registration order (a copy).

    Returns
    -------
    dict of str to type
        Slot -> spec class.
    """
    load_plugins()
    return dict(_SPECS)


def spec_class(slot: str) -> type[ConfigSpec]:
    """The spec class registered for ``slot`` (a one-line error naming the slots otherwise)."""
    load_plugins()
    try:
        return _SPECS[slot]
    except KeyError:
        raise CostModelError(f"spec slot {slot!r} not allowed; allowed: {tuple(sorted(_SPECS))}") from None


def flat_fields() -> dict[str, str]:
    """Every registered spec field (flat keyword) -> the slot of the spec that holds it (a copy)."""
    load_plugins()
    return dict(_FLAT)


class SpecMap(Mapping[str, ConfigSpec]):
    """An immutable, hashable mapping slot -> spec, in slot-name order (a config's specs).

    Two maps with the same entries are equal, hash alike and print alike whatever order they
    were given in (and whichever plug-in module happened to load first).
    """

    __slots__ = ("_d", "_hash")

    def __init__(self, specs: Mapping[str, ConfigSpec] | None = None) -> None:
        given = dict(specs or {})
        known = spec_classes()
        unknown = [k for k in given if k not in known]
        if unknown:
            raise CostModelError(f"spec slot {unknown[0]!r} not allowed; allowed: {tuple(sorted(known))}")
        self._d: dict[str, ConfigSpec] = {k: given[k] for k in sorted(given)}
        self._hash: int | None = None

    def __getitem__(self, slot: str) -> ConfigSpec:
        return self._d[slot]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._d.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpecMap):
            return self._d == other._d
        return NotImplemented

    def __repr__(self) -> str:
        return f"SpecMap({self._d!r})"

    def __getstate__(self) -> dict[str, ConfigSpec]:
        """The entries (the cached hash is left out: string hashes differ between processes)."""
        return self._d

    def __setstate__(self, state: dict[str, ConfigSpec]) -> None:
        self._d = state
        self._hash = None
