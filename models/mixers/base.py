"""The layer plug-in contract: a token mixer (and an MLP kind) is one class in one module of
:mod:`models.mixers`.

A layer is ``norm -> mixer -> residual [-> norm -> MLP -> residual]``. A mixer class holds
everything the engine needs to know about its kind of layer, and nothing else names it:

* ``name`` (the :class:`~models.layers.LayerSpec` mixer name); its typed config, a frozen
  :class:`~models.specs.ConfigSpec` dataclass defined and registered (``@register_spec``) in
  its module, which :class:`~models.config.ModelConfig` holds under ``spec_slot``
  (``cfg.need(MLASpec)``), and ``needs``, the fields of that spec a layer of it cannot do
  without; :meth:`Mixer.check` for any other condition it puts on a config;
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

A plug-in reads the config through :class:`ConfigView`, the read-only part of
:class:`~models.config.ModelConfig` it may use, so no plug-in module imports the config module
(which imports the layer checks, which import this registry): the package has no import circle.

``@register_mixer`` on the class registers it, refusing a second class of the same name;
every module of the package is imported on the first lookup
(:func:`models.specs.load_plugins`), so a plug-in cannot be forgotten. The block builder lives here, below ``graphs`` in the layer contracts,
because it reaches the graph only through :class:`LayerContext`: the graphs package calls
``get_mixer(spec.mixer).build(layer, h)`` and never learns a mixer's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from costmodel.cost import Cost
from costmodel.errors import CostModelError
from costmodel.keys import Role
from costmodel.tensor import Tensor

from ..specs import ConfigSpec, Dim, int_at_least_zero, load_plugins

if TYPE_CHECKING:
    import sympy

__all__ = [
    "Dim",
    "ConfigSpec",
    "ConfigView",
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

#: a block's input or output: (node, tensor)
Ref = tuple[str, Tensor]
#: an op input: (node, tensor), or (node, tensor, bytes the op reads of it)
EdgeRef = tuple[str, Tensor] | tuple[str, Tensor, Any]
#: ``reader(hf_config, common_fields, int_getter, model_name)``: adds a family's fields to ``common``
HFReader = Callable[[Mapping[str, Any], dict[str, Any], Callable[..., Any], str], None]


_S = TypeVar("_S", bound=ConfigSpec)


class ConfigView(Protocol):
    """What a plug-in reads of a :class:`~models.config.ModelConfig` (which satisfies it): the
    shared shape, dtypes and layer pattern, and the plug-ins' specs (:meth:`spec`, :meth:`need`).
    Dimensions are sympy expressions after the config's checks."""

    @property
    def name(self) -> str: ...
    @property
    def hidden_size(self) -> Dim: ...
    @property
    def num_hidden_layers(self) -> Dim: ...
    @property
    def num_attention_heads(self) -> Dim: ...
    @property
    def num_key_value_heads(self) -> Dim | None: ...
    @property
    def head_dim(self) -> Dim | None: ...
    @property
    def intermediate_size(self) -> Dim: ...
    @property
    def vocab_size(self) -> Dim: ...
    @property
    def mlp(self) -> str: ...
    @property
    def mlp_bias(self) -> bool: ...
    @property
    def gated_mlp(self) -> bool: ...
    @property
    def layer_types(self) -> tuple[Any, ...] | None: ...
    @property
    def mtp_layers(self) -> int: ...
    @property
    def mtp_active(self) -> bool: ...
    @property
    def is_moe(self) -> bool: ...
    @property
    def expert_weight_dtype(self) -> str: ...
    @property
    def weight_scale_block(self) -> tuple[int, int] | None: ...
    @property
    def recurrent_state_dtype(self) -> str: ...
    @property
    def specs(self) -> Mapping[str, ConfigSpec]: ...

    def spec(self, kind: type[_S]) -> _S | None: ...
    def need(self, kind: type[_S]) -> _S: ...


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
    @property
    def sparse_head_tile(self) -> int: ...


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
        attrs: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> list[tuple[str, Tensor]]: ...


class LayerContext(Protocol):
    """What a mixer's block may use of the layer being built (``LayerBase`` provides it):
    the config, the phase dimensions, the builder, the layer's dtypes and the shared helpers."""

    @property
    def cfg(self) -> ConfigView: ...
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


class LayerPlugin(ABC):
    """What a mixer and an MLP kind share: a name, the config fields they need, the Hugging Face
    families they bring, and a check of the config (module doc)."""

    #: the LayerSpec name (``LayerSpec.mixer`` or ``LayerSpec.mlp``)
    name: ClassVar[str]
    #: the config slot holding this kind's :class:`ConfigSpec` (None: it has none)
    spec_slot: ClassVar[str | None] = None
    #: fields of that spec a layer of this kind needs (refused when the spec or the field is None)
    needs: ClassVar[tuple[str, ...]] = ()
    #: Hugging Face model_type -> reader of that family's fields
    hf_families: ClassVar[Mapping[str, HFReader]] = {}

    def missing(self, cfg: ConfigView) -> list[str]:
        """The :attr:`needs` fields ``cfg`` lacks (its :attr:`spec_slot` spec unset, or the field None)."""
        own = cfg.specs.get(self.spec_slot) if self.spec_slot else None
        return [f for f in self.needs if own is None or getattr(own, f) is None]

    def check(self, cfg: ConfigView) -> None:
        """Refuse (a :class:`~costmodel.errors.CostModelError` naming the field, the value and
        what is allowed) a config a layer of this kind cannot run; called for every mixer and
        MLP kind a config uses, after its ``needs`` are checked. The default accepts every config."""
        return None

    def linear_inputs(self, cfg: ConfigView) -> dict[str, Any]:
        """The input width ``K`` of each linear a layer of this kind holds (its module name ->
        ``K``): the widths a group-quantised checkpoint's ``group_size`` must divide
        (:func:`models.quantization.check_group_size`). The default: no linears."""
        return {}


class Mixer(LayerPlugin):
    """A token mixer plug-in (module doc). Subclasses set ``name`` and implement both methods."""

    @abstractmethod
    def params(self, cfg: ConfigView) -> sympy.Expr:
        """Weights of one layer's mixer (a count of values, symbolic or numeric)."""

    @abstractmethod
    def build(self, layer: LayerContext, h: Ref) -> Ref:
        """Add the mixer's nodes to ``layer``'s graph, fed by ``h`` (the normed ``[T, d]``
        input); return the output ``[T, d]`` edge (before the residual add)."""


class MLP(LayerPlugin):
    """An MLP kind plug-in (the feed-forward slot of a layer: ``dense``, ``moe``, ``none``)."""

    @abstractmethod
    def params(self, cfg: ConfigView, *, active: bool = False) -> sympy.Expr:
        """Weights of one layer's MLP; ``active``: only those one token uses (``k`` routed experts)."""

    @abstractmethod
    def build(self, layer: LayerContext, x: Ref) -> Ref:
        """Add the MLP's nodes fed by ``x`` (the normed ``[T, d]`` input); return its ``[T, d]`` output."""


P = TypeVar("P", bound=LayerPlugin)


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
        load_plugins()
        try:
            return self.table[name]
        except KeyError:
            raise CostModelError(
                f"layer {self.what} {name!r} not allowed; allowed: {tuple(self.table)}"
            ) from None

    def names(self) -> tuple[str, ...]:
        load_plugins()
        return tuple(self.table)


_MIXERS: _Registry[Mixer] = _Registry("mixer")
_MLPS: _Registry[MLP] = _Registry("mlp")
M = TypeVar("M", bound=type[Mixer])
F = TypeVar("F", bound=type[MLP])


def register_mixer(cls: M) -> M:
    """Class decorator: register mixer ``cls`` under ``cls.name`` (a second one is refused).

    Parameters
    ----------
    cls : type
        A :class:`Mixer` subclass with a unique ``name``.

    Returns
    -------
    type
        ``cls`` itself, registered.
    """
    _MIXERS.register(cls)
    return cls


def register_mlp(cls: F) -> F:
    """Class decorator: register MLP kind ``cls`` under ``cls.name`` (a second one is refused).

    Parameters
    ----------
    cls : type
        An :class:`MLP` subclass with a unique ``name``.

    Returns
    -------
    type
        ``cls`` itself, registered.
    """
    _MLPS.register(cls)
    return cls


def get_mixer(name: str) -> Mixer:
    """The mixer registered as ``name`` (a clear error naming the known ones otherwise).

    Parameters
    ----------
    name : str
        A registered mixer (:func:`mixer_names`: ``gqa``, ``mla``, ``sliding``, ``mamba2`` ...).

    Returns
    -------
    Mixer
        The mixer's instance (its graph builder and parameter formula).
    """
    return _MIXERS.get(name)


def get_mlp(name: str) -> MLP:
    """The MLP kind registered as ``name`` (a clear error naming the known ones otherwise).

    Parameters
    ----------
    name : str
        A registered MLP kind (:func:`mlp_names`: ``dense``, ``moe`` ...).

    Returns
    -------
    MLP
        The MLP kind's instance.
    """
    return _MLPS.get(name)


def mixer_names() -> tuple[str, ...]:
    """Every registered mixer name, in registration order.

    Returns
    -------
    tuple of str
        The names :func:`get_mixer` takes.
    """
    return _MIXERS.names()


def mlp_names() -> tuple[str, ...]:
    """Every registered MLP kind, in registration order.

    Returns
    -------
    tuple of str
        The names :func:`get_mlp` takes.
    """
    return _MLPS.names()


def hf_families() -> dict[str, HFReader]:
    """The Hugging Face ``model_type`` readers the registered plug-ins bring (a clash refused)."""
    load_plugins()
    out: dict[str, HFReader] = {}
    for m in (*_MIXERS.table.values(), *_MLPS.table.values()):
        for mt, reader in m.hf_families.items():
            if mt in out:
                raise CostModelError(f"model_type {mt!r} is claimed by two plug-ins (one is {m.name!r})")
            out[mt] = reader
    return out
