"""The block registry: mixers and MLPs by name, none forgotten, each built by a catalog model."""

import pytest

from costmodel.errors import CostModelError
from graphs.blocks import mixer, mixer_names, mlp_names, register_mixer
from graphs.blocks.transformer import mixer_kind
from models import get_model, model_names


def test_registered_blocks():
    assert set(mixer_names()) >= {"gqa", "mla"}
    assert set(mlp_names()) >= {"dense", "moe"}


def test_a_block_name_cannot_be_registered_twice():
    with pytest.raises(CostModelError, match="already registered"):
        register_mixer("gqa")(lambda layer, h: h)


def test_unknown_block_names_list_the_known_ones():
    with pytest.raises(CostModelError, match=r"unknown mixer 'mamba'; known: .*gqa"):
        mixer("mamba")


def test_every_registered_block_is_used_by_a_catalog_model():
    """Derived from the registry: a block no catalog model builds has no test through build_model."""
    cfgs = [get_model(n) for n in model_names()]
    used_mixers = {mixer_kind(c) for c in cfgs}
    used_mlps = {"moe" if c.is_moe else "dense" for c in cfgs} | {
        "dense" for c in cfgs if c.n_dense_layers != 0
    }
    assert set(mixer_names()) <= used_mixers
    assert set(mlp_names()) <= used_mlps
