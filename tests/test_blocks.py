"""The block registries: mixer plug-ins and MLPs by name, none forgotten, each built by a test."""

from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from models import get_model, model_names
from models.layers import LayerSpec, layer_groups
from models.mixers import Mixer, get_mixer, get_mlp, mixer_names, mlp_names, register_mixer

TESTS = Path(__file__).resolve().parent


def test_registered_blocks():
    assert set(mixer_names()) >= {
        "gqa",
        "mla",
        "sliding",
        "chunked",
        "ssm",
        "mamba",
        "linear_attention",
        "none",
    }
    assert set(mlp_names()) >= {"dense", "moe", "none"}


def test_a_mixer_name_cannot_be_registered_twice():
    class Again(Mixer):
        name = "gqa"

        def params(self, cfg):
            return 0

        def build(self, layer, h):
            return h

    with pytest.raises(CostModelError, match="already registered by GQA"):
        register_mixer(Again)


def test_a_mixer_class_must_name_itself():
    class Nameless(Mixer):
        def params(self, cfg):
            return 0

        def build(self, layer, h):
            return h

    with pytest.raises(CostModelError, match="Nameless must set a non-empty string `name`"):
        register_mixer(Nameless)


def test_unknown_mixer_names_list_the_known_ones():
    with pytest.raises(CostModelError, match=r"layer mixer 'rwkv' not allowed; allowed: .*'gqa'"):
        get_mixer("rwkv")
    with pytest.raises(CostModelError, match=r"layer mixer 'rwkv' not allowed"):
        LayerSpec("rwkv")


def test_every_registered_block_is_built_by_a_test():
    """Derived from the registries: a mixer no catalog model builds has its own test module
    (``tests/test_mixer_<module>.py``, the plug-in's test); every MLP block a catalog model builds."""
    specs = {g.spec for n in model_names() for g in layer_groups(get_model(n))}
    untested = [
        name
        for name in mixer_names()
        if name not in {s.mixer for s in specs}
        and not (TESTS / f"test_mixer_{type(get_mixer(name)).__module__.rsplit('.', 1)[-1]}.py").exists()
    ]
    assert not untested, f"mixers neither built by a catalog model nor tested by their own module: {untested}"
    assert set(mlp_names()) <= {s.mlp for s in specs}


def test_unknown_mlp_kinds_list_the_known_ones():
    with pytest.raises(CostModelError, match=r"layer mlp 'kan' not allowed; allowed: .*'dense'"):
        get_mlp("kan")
    with pytest.raises(CostModelError, match=r"layer mlp 'kan' not allowed"):
        LayerSpec("gqa", "kan")
