"""A model described by its layer pattern: a small JSON file (no Hugging Face ``model_type``) that
reaches every command through the model argument, for any registered mixer and MLP kind.

The file is one JSON object:

* ``layer_types`` (required; ``null``: uniform, every layer ``gqa``, or ``mla`` with MLA fields,
  its MLP ``dense``, or ``moe`` after ``first_k_dense_replace`` dense layers with experts, and
  ``num_hidden_layers`` required): one entry per layer, a mixer name (``"gqa"``, ``"sliding"``,
  ``"ssm"`` ...: :func:`models.mixers.mixer_names`; the layer's MLP is ``dense``, or ``moe``
  when the file gives the experts) or an object ``{"mixer": "ssm", "mlp": "none"}``
  (:func:`models.mixers.mlp_names`; ``mlp`` left out: ``dense``);
* the shared shape under :class:`~models.config.ModelConfig`'s names: ``hidden_size``,
  ``num_attention_heads``, ``intermediate_size``, ``vocab_size`` (required),
  ``num_key_value_heads``, ``head_dim``, ``mlp`` (the activation), ``norm``,
  ``tie_word_embeddings``, the dtypes ... (``num_hidden_layers`` defaults to the pattern's
  length and must equal it when given);
* the fields each mixer needs, flat, under their spec's names (``sliding_window``,
  ``ssm_state_size``, ``num_experts`` ...: every field of every registered spec,
  :func:`models.specs.flat_fields`), so a new plug-in's fields are accepted as soon as it
  registers;
* optionally ``name``, ``source`` and ``max_position_embeddings`` (the context limit, read as in
  a ``config.json``: :func:`models.context.context_limit`).

Every key is checked: an unknown one, or a value of the wrong JSON type (a dimension must be a
whole number, a flag ``true``/``false``), is refused in one line naming the key, the value and
what is allowed. :func:`to_layer_file` writes any numeric config as such a file (read back
equal). The layout is documented with an example in ``docs/layer-files.md``.

>>> from models.layers import layer_groups
>>> cfg = config_from_layer_file({"layer_types": ["sliding", "gqa"], "sliding_window": 128,
...     "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100})
>>> [(g.name, int(g.count)) for g in layer_groups(cfg)], cfg.attention.sliding_window
([('sliding_dense', 1), ('gqa_dense', 1)], 128)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from costmodel.errors import CostModelError
from costmodel.notes import ASSUMED_FLOAT, say
from costmodel.text import has_controls

from .config import ModelConfig
from .context import context_limit
from .fields import INT_MAX, ModelConfigError
from .layers import LayerSpec, uniform_layout
from .sources import MAX_NAME
from .specs import spec_classes

__all__ = ["config_from_layer_file", "to_layer_file", "is_layer_file", "LAYER_FILE_KEYS", "LAYER_FILE_FAMILY"]

#: what ``costmodel model check`` names as the family of a layer file
LAYER_FILE_FAMILY = "layer file"

#: keys of the file besides the ModelConfig and spec fields
LAYER_FILE_KEYS = ("layer_types", "max_position_embeddings")
#: ModelConfig fields the file does not take (set from other keys, or not a file's to set)
_NOT_TAKEN = frozenset({"specs", "layer_types", "max_context", "mtp_active"})
#: the shared fields a file must give
_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
#: the most layers a pattern may list (as a config.json's per-layer lists: models.hf_families)
MAX_LAYERS = 4096


def to_layer_file(cfg: ModelConfig) -> dict[str, Any]:
    """``cfg`` as a layer file (JSON-ready; :func:`config_from_layer_file` reads it back equal):
    its name and source, every shared field and spec field that differs from its default, and
    the layer pattern (null for a uniform config). A symbolic config has no file form.

    Parameters
    ----------
    cfg : a numeric ModelConfig

    Returns
    -------
    dict
        The layer file's object, keys in field order.
    """
    out: dict[str, Any] = {"name": cfg.name}
    for key, value in cfg.leaves():
        if key in _NOT_TAKEN or key == "name":
            continue
        default = _defaults().get(key, dataclasses.MISSING)
        if value == default and key not in _REQUIRED:
            continue
        out[key] = _plain(key, value, cfg.name)
    if cfg.max_context is not None:
        out["max_position_embeddings"] = cfg.max_context
    named = uniform_layout(cfg)[1]  # the MLP kind a bare mixer name gets (moe with experts)
    out["layer_types"] = (
        None
        if cfg.layer_types is None
        else [s.mixer if s.mlp == named else {"mixer": s.mixer, "mlp": s.mlp} for s in cfg.layer_types]
    )
    return out


def _plain(key: str, value: Any, name: str) -> Any:
    """A field's value as JSON: a dimension as a whole number, a scale block as a list."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bool | str | float) or value is None:
        return value
    if getattr(value, "is_Integer", False) or isinstance(value, int):
        return int(value)
    raise ModelConfigError(f"{name}: {key} is {value}: a symbolic config has no layer file")


def _defaults() -> dict[str, Any]:
    """Every shared and spec field's default (a field without one is left out)."""
    out = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    for cls in spec_classes().values():
        out.update({f.name: f.default for f in dataclasses.fields(cls)})
    return out


def is_layer_file(data: Mapping[str, Any]) -> bool:
    """Whether a parsed JSON object is a layer file (``layer_types`` and no ``model_type``)."""
    return "layer_types" in data and "model_type" not in data


def _kind(annotation: Any) -> str:
    """The JSON type a field takes, from its annotation: ``dim``, ``int``, ``bool``, ``number``,
    ``str`` or ``pair`` (two whole numbers)."""
    a = str(annotation)
    if a.startswith("Dim"):
        return "dim"
    if a.startswith("bool"):
        return "bool"
    if a.startswith("int"):
        return "int"
    if a.startswith("float"):
        return "number"
    if a.startswith("tuple[int, int]"):
        return "pair"
    return "str"


def _fields() -> dict[str, str]:
    """Every key the file may give -> its JSON kind (:func:`_kind`)."""
    out = {f.name: _kind(f.type) for f in dataclasses.fields(ModelConfig) if f.name not in _NOT_TAKEN}
    for cls in spec_classes().values():
        out.update({f.name: _kind(f.type) for f in dataclasses.fields(cls)})
    return out


def _checked(key: str, value: Any, kind: str, name: str) -> Any:
    """``value`` of ``key`` if it is of the JSON kind the field takes (null: the default)."""
    if value is None:
        return None
    # a config.json's widths and counts are 32-bit integers (models.fields.int_field): a layer file
    # states the same fields, so the same bound (10**30 once priced a model on 1.9e50 devices)
    whole = isinstance(value, int) and not isinstance(value, bool) and value <= INT_MAX
    ok = {
        "dim": whole,
        "int": whole,
        "bool": isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str) and not has_controls(value) and len(value) <= MAX_NAME,
        # as a config.json's weight_block_size (models.quantization): rows and columns >= 1
        "pair": isinstance(value, list)
        and len(value) == 2
        and all(type(v) is int and 1 <= v <= INT_MAX for v in value),
    }[kind]
    if not ok:
        too_big = isinstance(value, int) and not isinstance(value, bool)
        whole_want = f"a whole number of at most {INT_MAX}" if too_big else "a whole number"
        want = {
            "dim": whole_want,
            "int": whole_want,
            "bool": "true or false",
            "number": "a number",
            "str": f"a string of printable characters (no newline, tab or control), at most {MAX_NAME} of them",
            "pair": f"two whole numbers [rows, columns] from 1 to {INT_MAX}",
        }[kind]
        raise ModelConfigError(f"{name}: layer file field {key!r} must be {want}, got {value!r:.60}")
    return tuple(value) if kind == "pair" else value


def _layers(value: Any, name: str) -> tuple[LayerSpec | str, ...]:
    """The ``layer_types`` entries: mixer names, or ``{"mixer": ..., "mlp": ...}`` objects."""
    if not isinstance(value, list) or not value or len(value) > MAX_LAYERS:
        raise ModelConfigError(
            f"{name}: layer file field 'layer_types' must be a list of 1 to {MAX_LAYERS} layers, got {value!r:.60}"
        )
    out: list[LayerSpec | str] = []
    for i, v in enumerate(value):
        if isinstance(v, str):
            out.append(v)
        elif (
            isinstance(v, Mapping)
            and "mixer" in v  # the MLP kind has a default (dense), the mixer none (the docs)
            and set(v) <= {"mixer", "mlp"}
            and all(isinstance(x, str) for x in v.values())
        ):
            out.append(LayerSpec(**v))
        else:
            raise ModelConfigError(
                f"{name}: layer_types[{i}] must be a mixer name or an object with a 'mixer' name (and an "
                "'mlp' name, dense when left out), "
                f"got {v!r:.60}"
            )
    return tuple(out)


def config_from_layer_file(data: Mapping[str, Any], name: str = "model", source: str = "") -> ModelConfig:
    """The ModelConfig a layer file describes (module doc).

    Parameters
    ----------
    data : the parsed JSON object
    name : the model's name when the file gives none
    source : where the file came from, when it says nothing itself

    Returns
    -------
    ModelConfig
        Its layers, shared shape and the registered plug-ins' specs built from the flat fields.
    """
    if not isinstance(data, Mapping):
        raise ModelConfigError(f"{name}: a layer file must be a JSON object")
    given = data.get("name", name)
    if not isinstance(given, str) or not given or has_controls(given) or len(given) > MAX_NAME:
        raise ModelConfigError(
            f"{name}: layer file field 'name' must be a non-empty string of printable characters "
            f"(no newline, tab or control), at most {MAX_NAME} of them, got {given!r:.60}"
        )
    name = given
    kinds = _fields()
    fields: dict[str, Any] = {"name": name, "source": source}
    for key, value in data.items():
        if key in LAYER_FILE_KEYS or key == "name":
            continue
        if key not in kinds:
            hint = "; the limit is max_position_embeddings" if key == "max_context" else ""
            raise ModelConfigError(
                f"{name}: layer file field {key!r} is not a ModelConfig field or a registered mixer's{hint} "
                f"(allowed: layer_types, max_position_embeddings, {', '.join(sorted(kinds))})"
            )
        v = _checked(key, value, kinds[key], name)
        if v is not None:
            fields[key] = v
    missing = [
        k
        for k in ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")
        if k not in fields
    ]
    if missing:
        raise ModelConfigError(f"{name}: layer file is missing {', '.join(missing)}")
    limit = context_limit(data, name)
    if limit is not None:
        fields["max_context"] = limit.tokens
    try:
        if data["layer_types"] is None:  # uniform: every layer the specs' mixer and MLP kind
            if "num_hidden_layers" not in fields:
                raise ModelConfigError(f"{name}: a layer file with layer_types null needs num_hidden_layers")
            cfg = ModelConfig(**fields)
        else:
            layers = _layers(data["layer_types"], name)
            fields.setdefault("num_hidden_layers", len(layers))
            cfg = ModelConfig(layer_types=layers, **fields)
        if "dtype" not in fields:  # ModelConfig's default, bf16: an assumption, said once built
            from .quantization import assumed_float_note

            say(assumed_float_note(data, name), topic=ASSUMED_FLOAT)
        return cfg
    except ModelConfigError:
        raise
    except CostModelError as exc:  # a layer naming no registered mixer or MLP kind
        raise ModelConfigError(f"{name}: {exc}") from None
