"""The layer plug-in contract: a token mixer (and an MLP kind) is one class in one module of
:mod:`models.mixers`.

A layer is ``norm -> mixer -> residual [-> norm -> MLP -> residual]``. A mixer class holds
everything the engine needs to know about its kind of layer, and nothing else names it:

* ``name`` (the :class:`~models.layers.LayerSpec` mixer name); its typed config, a frozen
  :class:`ConfigSpec` dataclass nested in :class:`~models.config.ModelConfig` under
  ``spec_slot`` (``cfg.mla``, ``cfg.moe`` ...), and ``needs``, the fields of that spec a layer
  of it cannot do without; :meth:`Mixer.check` for any other condition it puts on a config;
* ``hf_families``: the Hugging Face ``model_type`` values it brings, each a reader that adds
  its fields to the common ones (:mod:`models.hf`);
* :meth:`Mixer.params`, its per-layer parameter formula;
* :meth:`LayerPlugin.linear_inputs`, the input width of each of its linears (the default: none),
  which a group-quantised checkpoint's group size must divide (:mod:`models.quantization`);
* :meth:`Mixer.build`, its graph block: it adds op nodes through the layer it is handed (a
  :class:`LayerContext`, which :class:`graphs.blocks.layer_base.LayerBase` satisfies), each
  with the :class:`~costmodel.keys.Role` analyses select it by.

An MLP kind (:class:`MLP`: ``dense``, ``moe``, ``none``) is the same with ``params(cfg,
active=...)`` and ``build(layer, x)`` for the feed-forward slot, registered with ``@register_mlp``.

``@register_mixer`` on the class registers it, refusing a second class of the same name;
every module of the package is imported on the first lookup (``pkgutil``), so a plug-in
cannot be forgotten. The block builder lives here, below ``graphs`` in the layer contracts,
because it reaches the graph only through :class:`LayerContext`: the graphs package calls
``get_mixer(spec.mixer).build(layer, h)`` and never learns a mixer's name.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeAlias, TypeVar

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

if TYPE_CHECKING:
    import sympy

    from ..config import ModelConfig

__all__ = [
    "Dim",
    "ConfigSpec",
    "int_at_least_zero",
    "Ref",
    "EdgeRef",
    "HFReader",
    "PhaseLike",
    "BuilderLike",
    "LayerContext",
    "LayerPlugin",
    "Mixer",
    "MLP",
    "register_mixer",
    "register_mlp",
    "get_mixer",
    "get_mlp",
    "mixer_names",
    "mlp_names",
    "hf_families",
]

#: a dimension: given as a positive integer or a sympy expression, stored as a sympy expression
#: (``ConfigSpec.normalised`` and ``ModelConfig.__post_init__`` convert). The alias names the stored
#: type; sympy ships no type stubs, so mypy reads ``sympy.Expr`` as ``Any`` and an int (or a None
#: default, for a field a spec checks itself) type-checks too.
Dim: TypeAlias = "sympy.Expr"
#: a block's input or output: (node, tensor)
Ref = tuple[str, Tensor]
#: an op input: (node, tensor), or (node, tensor, bytes the op reads of it)
EdgeRef = tuple[str, Tensor] | tuple[str, Tensor, Any]
#: ``reader(hf_config, common_fields, int_getter, model_name)``: adds a family's fields to ``common``
HFReader = Callable[[Mapping[str, Any], dict[str, Any], Callable[..., Any], str], None]


class PhaseLike(Protocol):
    """The phase dimensions a block sees (:class:`graphs.blocks.phase.PhaseDims`)."""

    @property
    def phase(self) -> str: ...
    @property
    def batch(self) -> Any: ...
    @property
    def tokens(self) -> Any: ...
    @property
    def q_len(self) -> Any: ...
    @property
    def kv_len(self) -> Any: ...
    @property
    def prefix(self) -> Any: ...
    @property
    def tp(self) -> Any: ...


class BuilderLike(Protocol):
    """The graph builder a block adds nodes with (:class:`graphs.blocks.builder.GraphBuilder`)."""

    def name(self, local: str) -> str: ...

    def source(
        self, local: str, tensor: Tensor, kind: str, *, resident: bool = True
    ) -> tuple[str, Tensor]: ...

    def op(
        self,
        local: str,
        rule: str,
        role: Role,
        ins: Sequence[EdgeRef],
        outs: Sequence[Tensor],
        /,
        *,
        extra: Cost | None = None,
        **params: Any,
    ) -> list[tuple[str, Tensor]]: ...


class LayerContext(Protocol):
    """What a mixer's block may use of the layer being built (``LayerBase`` provides it):
    the config, the phase dimensions, the builder, the layer's dtypes and the shared helpers."""

    @property
    def cfg(self) -> ModelConfig: ...
    @property
    def dims(self) -> PhaseLike: ...
    @property
    def b(self) -> BuilderLike: ...
    @property
    def act(self) -> str: ...
    @property
    def wd(self) -> str: ...
    @property
    def kvd(self) -> str: ...
    @property
    def mmd(self) -> str: ...
    @property
    def tp(self) -> Any: ...

    def split(self, n: Any, what: str) -> Any: ...
    def kv_heads_local(self) -> Any: ...
    def weight(
        self, local: str, shape: tuple[Any, ...], *, dtype: str | None = None
    ) -> tuple[str, Tensor]: ...

    def linear(
        self,
        local: str,
        x: tuple[str, Tensor],
        n_out: Any,
        *,
        bias: bool = False,
        rows: Any = None,
        reduce: bool = False,
        role: Role = Role.LINEAR,
        merged: str = "",
    ) -> tuple[str, Tensor]: ...

    def all_reduce(self, local: str, x: tuple[str, Tensor]) -> tuple[str, Tensor]: ...
    def norm(self, local: str, x: tuple[str, Tensor], rows: Any, cols: Any) -> tuple[str, Tensor]: ...
    def add(self, local: str, a: tuple[str, Tensor], c: tuple[str, Tensor]) -> tuple[str, Tensor]: ...

    def cache_write(
        self, local: str, srcs: list[tuple[str, Tensor]], width: Any, *, cap: Any = None
    ) -> tuple[str, Tensor]: ...

    def cache(self, local: str, width: Any, tokens: Any) -> tuple[str, Tensor, Any]: ...


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """A plug-in's typed config: a frozen dataclass of its fields, nested in
    :class:`~models.config.ModelConfig` under :attr:`slot` (``cfg.moe``, ``cfg.mla`` ...).

    Field names are the Hugging Face / flat ``ModelConfig`` keyword names (``num_experts``,
    ``kv_lora_rank``), so a dimension symbol's name still matches the field it binds to.
    :meth:`normalised` checks a spec and turns its dimensions into sympy expressions; a
    subclass adds its own conditions in :meth:`check`.
    """

    #: the ModelConfig attribute that holds this spec
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


def int_at_least_zero(model: str, field: str, value: Any) -> None:
    """Refuse ``value`` unless it is an ``int`` >= 0 (``bool`` refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CostModelError(f"{model}: {field} must be an integer >= 0, got {value!r}")


class LayerPlugin(ABC):
    """What a mixer and an MLP kind share: a name, the config fields they need, the Hugging Face
    families they bring, and a check of the config (module doc)."""

    #: the LayerSpec name (``LayerSpec.mixer`` or ``LayerSpec.mlp``)
    name: ClassVar[str]
    #: the ModelConfig attribute holding this kind's :class:`ConfigSpec` (None: it has none)
    spec_slot: ClassVar[str | None] = None
    #: fields of that spec a layer of this kind needs (refused when the spec or the field is None)
    needs: ClassVar[tuple[str, ...]] = ()
    #: Hugging Face model_type -> reader of that family's fields
    hf_families: ClassVar[Mapping[str, HFReader]] = {}

    def missing(self, cfg: ModelConfig) -> list[str]:
        """The :attr:`needs` fields ``cfg`` lacks (its :attr:`spec_slot` spec unset, or the field None)."""
        own = getattr(cfg, self.spec_slot) if self.spec_slot else None
        return [f for f in self.needs if own is None or getattr(own, f) is None]

    def check(self, cfg: ModelConfig) -> None:
        """Refuse (a :class:`~costmodel.errors.CostModelError` naming the field, the value and
        what is allowed) a config a layer of this kind cannot run; called for every mixer and
        MLP kind a config uses, after its ``needs`` are checked. The default accepts every config."""
        return None

    def linear_inputs(self, cfg: ModelConfig) -> dict[str, Any]:
        """The input width ``K`` of each linear a layer of this kind holds (its module name ->
        ``K``): the widths a group-quantised checkpoint's ``group_size`` must divide
        (:func:`models.quantization.check_group_size`). The default: no linears."""
        return {}


class Mixer(LayerPlugin):
    """A token mixer plug-in (module doc). Subclasses set ``name`` and implement both methods."""

    @abstractmethod
    def params(self, cfg: ModelConfig) -> sympy.Expr:
        """Weights of one layer's mixer (a count of values, symbolic or numeric)."""

    @abstractmethod
    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Add the mixer's nodes to ``layer``'s graph, fed by ``h`` (the normed ``[T, d]``
        input); return the output ``[T, d]`` edge (before the residual add)."""


class MLP(LayerPlugin):
    """An MLP kind plug-in (the feed-forward slot of a layer: ``dense``, ``moe``, ``none``)."""

    @abstractmethod
    def params(self, cfg: ModelConfig, *, active: bool = False) -> sympy.Expr:
        """Weights of one layer's MLP; ``active``: only those one token uses (``k`` routed experts)."""

    @abstractmethod
    def build(self, layer: LayerContext, x: Ref) -> Ref:
        """Add the MLP's nodes fed by ``x`` (the normed ``[T, d]`` input); return its ``[T, d]`` output."""


P = TypeVar("P", bound=LayerPlugin)
_LOADED = False


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from . import __path__ as here

    for mod in pkgutil.iter_modules(here):
        importlib.import_module(f"{__package__}.{mod.name}")


class _Registry(Generic[P]):
    """Plug-in instances by name; ``what`` names the slot in errors (``mixer``, ``mlp``)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.table: dict[str, P] = {}

    def register(self, cls: type[P]) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise CostModelError(f"{self.what} class {cls.__name__} must set a non-empty string `name`")
        if name in self.table:
            raise CostModelError(
                f"{self.what} {name!r} is already registered by {type(self.table[name]).__name__}"
            )
        self.table[name] = cls()

    def get(self, name: str) -> P:
        _load()
        try:
            return self.table[name]
        except KeyError:
            raise CostModelError(
                f"layer {self.what} {name!r} not allowed; allowed: {tuple(self.table)}"
            ) from None

    def names(self) -> tuple[str, ...]:
        _load()
        return tuple(self.table)


_MIXERS: _Registry[Mixer] = _Registry("mixer")
_MLPS: _Registry[MLP] = _Registry("mlp")
M = TypeVar("M", bound=type[Mixer])
F = TypeVar("F", bound=type[MLP])


def register_mixer(cls: M) -> M:
    """Class decorator: register mixer ``cls`` under ``cls.name`` (a second one is refused)."""
    _MIXERS.register(cls)
    return cls


def register_mlp(cls: F) -> F:
    """Class decorator: register MLP kind ``cls`` under ``cls.name`` (a second one is refused)."""
    _MLPS.register(cls)
    return cls


def get_mixer(name: str) -> Mixer:
    """The mixer registered as ``name`` (a clear error naming the known ones otherwise)."""
    return _MIXERS.get(name)


def get_mlp(name: str) -> MLP:
    """The MLP kind registered as ``name`` (a clear error naming the known ones otherwise)."""
    return _MLPS.get(name)


def mixer_names() -> tuple[str, ...]:
    """Every registered mixer name, in registration order."""
    return _MIXERS.names()


def mlp_names() -> tuple[str, ...]:
    """Every registered MLP kind, in registration order."""
    return _MLPS.names()


def hf_families() -> dict[str, HFReader]:
    """The Hugging Face ``model_type`` readers the registered plug-ins bring (a clash refused)."""
    _load()
    out: dict[str, HFReader] = {}
    for m in (*_MIXERS.table.values(), *_MLPS.table.values()):
        for mt, reader in m.hf_families.items():
            if mt in out:
                raise CostModelError(f"model_type {mt!r} is claimed by two plug-ins (one is {m.name!r})")
            out[mt] = reader
    return out
