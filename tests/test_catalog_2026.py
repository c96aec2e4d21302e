"""The open models teams deploy now (issue 29, item 5): Kimi K2, GLM-4.5 and GLM-4.5-Air, MiniMax-M2 and
Qwen3.5-397B-A17B, each from its published config.json (models/configs).

For each: the parameter count equals the ``transformers`` class built on the meta device (its parameters,
plus the router correction biases that the checkpoint stores and ``transformers`` keeps as buffers),
total and active against the model card, KV-cache and recurrent-state bytes derived by hand, and a decode
and a prefill step through the command line.
"""

import json
import math
from importlib import resources

import pytest

from graphs import build_model
from graphs.cli import main
from graphs.serving.step.totals import cache_terms
from models import MODELS, get_model, param_counts

from .hf_family_configs import stored_weights_on_meta
from .test_model_families import _tolerance

NAMES = ["kimi-k2", "glm-4.5", "glm-4.5-air", "minimax-m2", "qwen3.5-397b-a17b"]

#: catalog name -> transformers (config class, model class)
CLASSES = {
    "kimi-k2": ("DeepseekV3Config", "DeepseekV3ForCausalLM"),  # Kimi's remote code is DeepseekV3Config
    "glm-4.5": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
    "glm-4.5-air": ("Glm4MoeConfig", "Glm4MoeForCausalLM"),
    "minimax-m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM"),
    "qwen3.5-397b-a17b": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM"),
}

#: card figures stated to fewer digits than the shapes give, and by how much they differ
TOLERANCES = {
    # "1T" total and "32B" activated: the shapes give 1,026.4B and 32.86B (DeepseekV3ForCausalLM agrees)
    ("kimi-k2", "total"): 0.03,
    ("kimi-k2", "active"): 0.03,
    # the report's 355B lies between the 352.8B main model and 356.7B with its MTP layer (its own
    # embedding and head left out); transformers builds the main model
    ("glm-4.5", "total"): 0.01,
    # "106B": 106.85B counted (transformers agrees), truncated as Qwen3-30B-A3B's "3.3B" is
    ("glm-4.5-air", "total"): 0.01,
    # "230B": 228.69B counted (transformers agrees) without the 3 MTP modules neither builds
    ("minimax-m2", "total"): 0.01,
    # "10B" active: 9.80B without embedding and head, 11.03B with them
    ("minimax-m2", "active"): 0.03,
}


def _data(name):
    return json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_equals_transformers_on_meta(name):
    data = _data(name)
    stored = stored_weights_on_meta(*CLASSES[name], data.get("text_config", data))
    assert stored == param_counts(get_model(name)).total


@pytest.mark.parametrize("name", NAMES)
def test_totals_and_active_match_the_card(name):
    entry, pc = MODELS[name], param_counts(get_model(name))
    total = float(pc.total)
    assert total == pytest.approx(
        entry.published_total, rel=TOLERANCES.get((name, "total"), _tolerance(entry.published_total))
    )
    active = float(pc.active)
    if entry.active_counts == "non_embedding":
        active -= float(pc.embedding + pc.lm_head)
    assert active == pytest.approx(
        entry.published_active, rel=TOLERANCES.get((name, "active"), _tolerance(entry.published_active))
    )


#: name -> (bytes per cached token, recurrent state bytes per sequence), derived by hand
CACHE = {
    # MLA: one latent of kv_lora_rank 512 + rope 64 per layer, bf16: 61 * 576 * 2
    "kimi-k2": (61 * 576 * 2, 0),
    # GQA, K and V of 8 heads of 128 per layer, bf16: 92 * 2 * 8 * 128 * 2 (and 46 layers for Air)
    "glm-4.5": (92 * 2 * 8 * 128 * 2, 0),
    "glm-4.5-air": (46 * 2 * 8 * 128 * 2, 0),
    # full GQA in all 62 layers (attn_type_list all 1): 62 * 2 * 8 * 128 * 2
    "minimax-m2": (62 * 2 * 8 * 128 * 2, 0),
    # 15 gated-attention layers cache 2 KV heads of 256; the 45 gated-delta-net layers keep, per sequence,
    # a fp32 state of 128 x 128 per value head (64 heads) and a bf16 conv state of the last K - 1 = 3
    # inputs over 2 * 16 * 128 + 64 * 128 = 12,288 channels
    "qwen3.5-397b-a17b": (15 * 2 * 2 * 256 * 2, 45 * (64 * 128 * 128 * 4 + 12288 * 3 * 2)),
}


@pytest.mark.parametrize("name", NAMES)
def test_kv_and_state_bytes_by_hand(name):
    ct = cache_terms(build_model(get_model(name), "decode", batch=1, ctx=4096), 1, 1)
    assert (ct.per_token, ct.capped, ct.state) == (*CACHE[name][:1], (), CACHE[name][1])


@pytest.mark.parametrize("name", NAMES)
def test_decode_and_prefill_run(capsys, name):
    """A step of each phase on 8 B200s (the bf16 and FP8 checkpoints need 0.23-1.0 TB of weights)."""
    for argv in (("decode", name, "--ctx", "8192"), ("prefill", name, "--seq", "4096")):
        code = main([*argv, "--device", "b200", "--tp", "8", "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        step = json.loads(out.out)["step_s"]
        assert math.isfinite(step) and step > 0


def test_glm_4_5_air_decode_step_by_hand(capsys):
    """GLM-4.5-Air decoding one sequence at 4K context on one B300, bf16: the step reads every weight a
    token uses once, 2 * (12.18B active non-embedding + the 4096-wide embedding row + the 151552 x 4096
    lm_head) = 2 * (active - V*d + d) bytes, exactly what the graph reads, and the KV cache,
    188,416 B/token * 4096; memory-bound, so the step is that over the device's HBM bandwidth (plus under
    half a percent of norms, activations and logits)."""
    from costmodel.hardware import shipped_devices
    from graphs import summarize

    cfg = get_model("glm-4.5-air")
    V, d = 151552, 4096
    weights = 2 * (param_counts(cfg).active - V * d + d)
    assert summarize(build_model(cfg, "decode", batch=1, ctx=4096)).weight_bytes_read == weights
    hbm = shipped_devices()["b300"].memory[0].bandwidth_bytes_per_s
    hand = float(weights + 188_416 * 4096) / float(hbm)
    assert main(["decode", "glm-4.5-air", "--device", "b300", "--ctx", "4096", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["step_s"]
    assert hand <= step <= 1.005 * hand
