"""The block registry: mixers and MLPs by name, none forgotten, each built by a catalog model."""

import pytest

from costmodel.errors import CostModelError
from graphs.blocks import mixer, mixer_names, mlp_names, register_mixer
from models import get_model, model_names
from models.layers import MLP_KINDS, layer_groups
from models.layers import mixer_names as spec_mixer_names


def test_registered_blocks():
    assert set(mixer_names()) >= {"gqa", "mla"}
    assert set(mlp_names()) >= {"dense", "moe"}


def test_a_block_name_cannot_be_registered_twice():
    with pytest.raises(CostModelError, match="already registered"):
        register_mixer("gqa")(lambda layer, h: h)


def test_unknown_block_names_list_the_known_ones():
    with pytest.raises(CostModelError, match=r"unknown mixer 'rwkv'; known: .*gqa"):
        mixer("rwkv")


def test_every_registered_block_is_used_by_a_catalog_model():
    """Derived from the registry: a block no catalog model builds has no test through build_model."""
    specs = {g.spec for n in model_names() for g in layer_groups(get_model(n))}
    assert set(mixer_names()) <= {s.mixer for s in specs}
    assert set(mlp_names()) <= {s.mlp for s in specs}


def test_layer_specs_and_graph_blocks_name_the_same_mixers():
    """A mixer a LayerSpec may name has a graph block, and every block a spec name."""
    assert set(spec_mixer_names()) == set(mixer_names()) | {"none"}  # 'none': the layer is its MLP
    assert set(MLP_KINDS) == set(mlp_names()) | {"none"}
