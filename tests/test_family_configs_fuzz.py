"""Hostile edits of the shipped configs: every field of every catalog config.json set, one at a
time, to each of a set of wrong values gives a clear CostModelError or a valid config, never a
traceback from inside the loader; and a value of another JSON type than the field's own is refused
or not read at all (the loaded model is the unedited file's), never read as something else."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from costmodel.errors import CostModelError
from models import MODELS, config_from_hf_dict

_NAMES = sorted({m.config or n for n, m in MODELS.items()})
#: wrong types and values a hand-edited or truncated config.json may hold
HOSTILE = (None, True, 0, -1, 10**13, 1.5, float("nan"), "x", "", [1, 2], ["a"], [], {"a": 1}, {})


#: fields the family loaders read when present, added to configs that lack them
PATTERN_FIELDS = (
    "layer_types",
    "mlp_only_layers",
    "moe_layers",
    "no_rope_layers",
    "layers_block_type",
    "layers_num_experts",
    "hybrid_override_pattern",
    "moe_layer_freq",
    "rope_scaling",
    "quantization_config",
    "num_nextn_predict_layers",
)


def resolve_config(name: str) -> dict:
    return json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())


@pytest.mark.parametrize("name", _NAMES)
def test_every_field_with_every_wrong_value(name):
    failures = []
    base = resolve_config(name)
    nested = isinstance(base.get("text_config"), dict)
    keys = sorted(set((base["text_config"] if nested else base).keys()) | set(PATTERN_FIELDS))
    for key in keys:
        for value in HOSTILE:
            cfg = resolve_config(name)
            (cfg["text_config"] if nested else cfg)[key] = value
            try:
                config_from_hf_dict(cfg, name)
            except CostModelError:
                pass
            except Exception as exc:
                failures.append(f"{key}={value!r}: {type(exc).__name__}: {exc}"[:160])
    assert not failures, "\n".join(failures[:20])


#: values of another JSON type than a field's own (null is "absent" for every reader: left out)
OTHER_TYPES = {
    "bool": (2, 0, 1, "true", [1], {}),
    "number": (True, False, "8", [8], {}),
    "str": (5, 0, True, ["x"], {}),
    "list": (5, "x", True, {}),
    "dict": (5, "x", True, [1]),
}


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, int | float) else type(value).__name__


@pytest.mark.parametrize("name", _NAMES)
def test_a_field_of_another_type_is_refused_or_unread(name):
    """Each field of a catalog config given a value of another JSON type is refused, or the loaded
    model is the unedited file's (the field is not read). A fuzz run found ``topk_method: 5`` read
    as "not noaux_tc" (DeepSeek-V3 without its router bias, unsaid); this sweeps every field for
    another such read."""
    base = resolve_config(name)
    nested = isinstance(base.get("text_config"), dict)
    expected = config_from_hf_dict(base, name)
    read = []
    for key, original in sorted((base["text_config"] if nested else base).items()):
        for value in OTHER_TYPES.get(_json_type(original), ()):
            cfg = resolve_config(name)
            (cfg["text_config"] if nested else cfg)[key] = value
            try:
                model = config_from_hf_dict(cfg, name)
            except CostModelError:
                continue
            if model != expected:
                read.append(f"{key}: {original!r} -> {value!r}")
    assert not read, read
