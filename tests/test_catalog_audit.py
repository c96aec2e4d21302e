"""The catalog audit: the catalog values it corrected, each against its published source."""

import json
from importlib import resources

from models import MODELS, get_model, param_counts
from models.check import inspect_config


def _data(name):
    entry = MODELS[name]
    path = resources.files("models").joinpath("configs", f"{entry.config or name}.json")
    return json.loads(path.read_text())


def test_deepseek_v3_activated_count_leaves_the_input_table_out():
    """DeepSeek-V3's README_WEIGHTS.md (the model repository): the main model's activation
    parameters are 36.6B, the 0.9B output head included; the technical report rounds them to 37B.
    The engine's active count, 37.55B, counts the 0.93B input table too: less that table it is
    36.63B, the README's figure to its digit, so the catalog reads the figure as gpt-oss's card
    does (``active_counts="no_embedding"``)."""
    entry, pc = MODELS["deepseek-v3"], param_counts(get_model("deepseek-v3"))
    assert entry.active_counts == "no_embedding" and entry.published_active == 36.6e9
    assert round(float(pc.lm_head) / 1e9, 1) == 0.9
    assert round(float(pc.active - pc.embedding) / 1e9, 1) == 36.6
    assert round(float(pc.active) / 1e9, 1) == 37.6  # with the table, off the README's figure


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
