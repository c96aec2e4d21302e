"""The catalog audit: every shipped config's parameter count against ``transformers`` built on the
meta device, and the catalog values the audit corrected, each against its published source."""

import json
from importlib import resources

import pytest

from models import MODELS, get_model, model_names, param_counts
from models.check import inspect_config

from .hf_family_configs import stored_weights_on_meta

#: model_type of the shipped config -> transformers (config class, model class); multimodal
#: configs are built from their ``text_config`` (the vision towers are not built)
CLASSES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),
    "kimi_k2": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),  # Kimi's remote code is DeepseekV3's
    "deepseek_v32": ("DeepseekV32Config", "DeepseekV32ForCausalLM"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "llama4": ("Llama4TextConfig", "Llama4ForCausalLM"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM"),
    "jamba": ("JambaConfig", "JambaForCausalLM"),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM"),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM"),
}


def _data(name):
    entry = MODELS[name]
    path = resources.files("models").joinpath("configs", f"{entry.config or name}.json")
    return json.loads(path.read_text())


def _text_fields(data):
    """The fields the text model is built from: ``text_config`` for a multimodal config, with the
    top level's ``tie_word_embeddings`` (where Gemma 3, Llama 4 and Qwen3.5 state it)."""
    if "text_config" not in data:
        return data
    fields = dict(data["text_config"])
    if "tie_word_embeddings" in data:
        fields["tie_word_embeddings"] = data["tie_word_embeddings"]
    return fields


def test_every_catalog_config_has_a_reference_class():
    assert {_data(n)["model_type"] for n in model_names()} <= set(CLASSES)


@pytest.mark.parametrize("name", [n for n in model_names() if not MODELS[n].mtp])
def test_catalog_count_equals_transformers_on_meta(name):
    """The engine's total equals the parameters ``transformers`` builds from the same shipped
    config (and the router correction biases it keeps as buffers): a second, independent count
    of every catalog model."""
    data = _data(name)
    stored = stored_weights_on_meta(*CLASSES[data["model_type"]], _text_fields(data))
    assert param_counts(get_model(name)).total == stored


def test_deepseek_v3_mtp_module_by_hand():
    """``transformers`` builds DeepSeek-V3 without its multi-token-prediction module; the catalog's
    deepseek-v3-mtp adds it as the checkpoint stores it (README_WEIGHTS.md: one more decoder
    layer, enorm and hnorm, eh_proj, and its own copies of the embedding and output head), derived
    here from the config: the MLA attention (q_a 7168x1536 and its norm, q_b 1536 x 128 heads x 192,
    kv_a 7168 x (512 + 64) and its norm, kv_b 512 x 128 x (128 + 128), o 128 x 128 x 7168), the MoE
    (256 + 1 experts of 3 x 7168 x 2048, the 256 x 7168 router and its 256 correction biases) and
    two norms; README_WEIGHTS.md's "11.5B unique parameters" is that decoder layer (11.507B)."""
    d, v = 7168, 129280
    attn = d * 1536 + 1536 + 1536 * 128 * 192 + d * 576 + 512 + 512 * 128 * 256 + 128 * 128 * d
    moe = 257 * 3 * d * 2048 + 256 * d + 256
    layer = attn + moe + 2 * d
    assert layer == 11_507_286_272 and round(layer / 1e9, 1) == 11.5
    mtp = layer + 2 * d + 2 * d * d + d + 2 * v * d  # enorm, hnorm, eh_proj, head norm, embed + head
    pc = param_counts(get_model("deepseek-v3-mtp"))
    assert pc.mtp == mtp == 13_463_426_304
    assert pc.total == param_counts(get_model("deepseek-v3")).total + mtp


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
