"""Layer specs: a model is a sequence of ``LayerSpec(mixer, mlp)``.

A layer is ``norm -> mixer -> residual [-> norm -> MLP -> residual]``. The
*mixer* moves information between tokens; the *MLP* works on each token.

The mixers are plug-ins, one module each in :mod:`models.mixers` (``gqa``, ``mla``,
``sliding``, ``chunked``, ``ssm``, ``mamba``, ``linear_attention``, ``none`` ...): a
:class:`~models.mixers.Mixer` class states the config fields a layer of it needs, its
parameter formula and its graph block, and :class:`LayerSpec` accepts any registered name.

MLPs are plug-ins too (:class:`~models.mixers.MLP`): ``dense`` (``intermediate_size``, gated
or not per ``mlp``), ``moe`` (routed + shared experts) and ``none`` (Mamba-2 blocks have no MLP).

A config without ``layer_types`` is uniform: one mixer everywhere (``gqa``, or the
``uniform_mixer`` of a spec it holds: ``mla``), and one MLP kind (``dense``, or a spec's
``uniform_mlp``: ``moe``) after the leading dense layers a spec states
(:meth:`~models.specs.ConfigSpec.leading_dense`: MoE's ``first_k_dense_replace``).
:func:`layer_groups` collects the layers of each distinct spec into one group
that stands for all its copies: a layer's cost does not depend on where it
sits, so Gemma-3's 52 local and 10 global layers are two groups, not 62.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from costmodel.errors import CostModelError

from .mixers import ConfigView, LayerPlugin, get_mixer, get_mlp
from .mixers import mixer_names as registered_mixers
from .specs import int_at_least_zero

__all__ = [
    "LayerSpec",
    "LayerGroup",
    "layer_groups",
    "mixer_params",
    "uniform_layout",
    "mixer_names",
]


@dataclass(frozen=True)
class LayerSpec:
    """One layer's token mixer and MLP (module doc lists the names)."""

    mixer: str = "gqa"
    mlp: str = "dense"

    def __post_init__(self) -> None:
        get_mixer(self.mixer)  # a clear error naming the registered mixers
        get_mlp(self.mlp)

    @property
    def name(self) -> str:
        """The group name of layers of this spec (``sliding_moe``, ``ssm_none`` ...)."""
        return f"{self.mixer}_{self.mlp}"


@dataclass(frozen=True)
class LayerGroup:
    """The ``count`` layers of one spec, built once and repeated."""

    name: str
    spec: LayerSpec
    count: sympy.Expr


def layer_groups(cfg: ConfigView) -> list[LayerGroup]:
    """The layer groups of ``cfg`` in order of first appearance (module doc).

    Uniform configs keep the historical group names: ``layers`` for a dense
    model, ``dense`` and ``moe`` for a MoE model.

    Parameters
    ----------
    cfg : ConfigView
        The model.

    Returns
    -------
    list of LayerGroup
        Each group's name, layer spec and count.

    >>> from models.config import ModelConfig
    >>> cfg = ModelConfig("g", 64, 6, 4, 128, 100, sliding_window=16,
    ...                   layer_types=("sliding",) * 5 + ("gqa",))
    >>> [(g.name, int(g.count)) for g in layer_groups(cfg)]
    [('sliding_dense', 5), ('gqa_dense', 1)]
    """
    if cfg.layer_types is None:
        mixer, mlp, fk = uniform_layout(cfg)
        if mlp == "dense":
            return [LayerGroup("layers", LayerSpec(mixer, "dense"), cfg.num_hidden_layers)]
        out = []
        if fk:
            out.append(LayerGroup("dense", LayerSpec(mixer, "dense"), sympy.Integer(fk)))
        out.append(LayerGroup(mlp, LayerSpec(mixer, mlp), cfg.num_hidden_layers - fk))
        return out
    counts: dict[LayerSpec, int] = {}
    for spec in cfg.layer_types:
        counts[spec] = counts.get(spec, 0) + 1
    return [LayerGroup(s.name, s, sympy.Integer(n)) for s, n in counts.items()]


def uniform_layout(cfg: ConfigView) -> tuple[str, str, int]:
    """``(mixer, mlp, leading_dense)`` of a config without ``layer_types``, from its specs'
    :attr:`~models.specs.ConfigSpec.uniform_mixer`, :attr:`~models.specs.ConfigSpec.uniform_mlp`
    and :meth:`~models.specs.ConfigSpec.leading_dense` (default ``gqa``, ``dense``, 0)."""
    mixer, mlp, fk = "gqa", "dense", 0
    for spec in cfg.specs.values():
        mixer = spec.uniform_mixer or mixer
        if spec.uniform_mlp is not None:
            mlp, fk = spec.uniform_mlp, spec.leading_dense()
    return mixer, mlp, fk


def mixer_params(cfg: ConfigView, mixer: str) -> sympy.Expr:
    """Weights of one layer's mixer ``mixer`` under ``cfg`` (the plug-in's formula)."""
    return get_mixer(mixer).params(cfg)


def mixer_names() -> tuple[str, ...]:
    """The registered mixer names (:mod:`models.mixers`)."""
    return registered_mixers()


def parse_layer_types(value: Any, name: str, mlp: str = "dense") -> tuple[LayerSpec, ...] | None:
    """``layer_types`` as given to :class:`ModelConfig`: specs, or mixer names (each with MLP ``mlp``)."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise CostModelError(
            f"{name}: layer_types must be a sequence of LayerSpec or mixer names, got {value!r}"
        )
    out = []
    for i, v in enumerate(value):
        if isinstance(v, LayerSpec):
            out.append(v)
        elif isinstance(v, str):
            out.append(LayerSpec(v, mlp))
        else:
            raise CostModelError(f"{name}: layer_types[{i}] must be a LayerSpec or a mixer name, got {v!r}")
    if not out:
        raise CostModelError(f"{name}: layer_types is empty")
    return tuple(out)


def check_layers(cfg: ConfigView, set_: Callable[[str, Any], None]) -> None:
    """Validate and normalise the layer pattern of ``cfg`` and check each layer kind's needs
    (called by its ``__post_init__``, after the nested specs are normalised)."""
    int_at_least_zero(cfg.name, "mtp_layers", cfg.mtp_layers)
    if not isinstance(cfg.mtp_active, bool):
        raise CostModelError(f"{cfg.name}: mtp_active must be True or False, got {cfg.mtp_active!r}")
    mixer, mlp, fk = uniform_layout(cfg)
    L = cfg.num_hidden_layers
    for held in cfg.specs.values():
        lead = held.leading_dense_field
        if lead is not None and L.is_number and held.leading_dense() > L:
            raise CostModelError(
                f"{cfg.name}: {lead} ({held.leading_dense()}) exceeds num_hidden_layers ({L})"
            )
    specs = parse_layer_types(cfg.layer_types, cfg.name, mlp)
    if specs is None:
        used = {LayerSpec(mixer)}
    else:
        if fk:
            specs = tuple(LayerSpec(s.mixer, "dense") if i < fk else s for i, s in enumerate(specs))
        if L.is_number and L != len(specs):
            raise CostModelError(
                f"{cfg.name}: layer_types has {len(specs)} entries but num_hidden_layers is {L}"
            )
        set_("num_hidden_layers", sympy.Integer(len(specs)))
        set_("layer_types", specs)
        used = set(specs)
    for spec in used:
        plugins: tuple[LayerPlugin, ...] = (get_mixer(spec.mixer), get_mlp(spec.mlp))
        for plugin in plugins:
            missing = plugin.missing(cfg)
            if missing:
                raise CostModelError(f"{cfg.name}: {plugin.name} layers need {', '.join(missing)}")
        if spec.mixer == "none" and spec.mlp == "none":
            raise CostModelError(f"{cfg.name}: a layer needs a mixer or an MLP (LayerSpec('none', 'none'))")
        for plugin in plugins:
            plugin.check(cfg)
