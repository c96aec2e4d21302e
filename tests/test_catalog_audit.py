"""The catalog audit: the catalog values it corrected, each against its published source."""

import json
from importlib import resources

from models import MODELS
from models.check import inspect_config


def _data(name):
    entry = MODELS[name]
    path = resources.files("models").joinpath("configs", f"{entry.config or name}.json")
    return json.loads(path.read_text())


def test_llama_4_maverick_config_states_no_qk_norm():
    """meta-llama/Llama-4-Maverick-17B-128E's config.json: ``"use_qk_norm": false`` (Scout's is
    true); the shipped copy said true. The flag sets Llama 4's weightless L2 norm of q and k, which
    the llama4 family does not build, so ``model check`` lists it as approximated for Scout only."""
    assert _data("llama-4-maverick")["text_config"]["use_qk_norm"] is False
    assert _data("llama-4-scout")["text_config"]["use_qk_norm"] is True

    def approximated(name):
        return inspect_config(_data(name), name).approximated

    assert not any("use_qk_norm" in a for a in approximated("llama-4-maverick"))
    assert any(a.startswith("use_qk_norm True") for a in approximated("llama-4-scout"))
