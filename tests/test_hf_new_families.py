"""The Hugging Face ``model_type`` values mapped for issue 29 (phi3, phi, falcon, gemma2, olmo2, granite,
cohere, glm, glm4, starcoder2, internlm2, exaone, deepseek_v2), each from the published config.json of a
real model (tests/hf_family_configs.py).

Parameter counts are pinned to an independent count: every parameter of the ``transformers`` class built
from the same config.json on the meta device; InternLM2 and EXAONE 3.5 are remote code (no class in
``transformers``), so they are pinned to their technical reports, with the exact count derived by hand.
Each family also runs a decode and a prefill step through the command line.
"""

import json
import math

import pytest

from graphs import build_model, summarize, weight_params
from graphs.cli import main
from models import ModelConfigError, config_from_hf_dict, param_counts

from .hf_family_configs import _HF, CONFIGS, stored_weights_on_meta

#: config key -> the transformers class prefix (``<prefix>Config``, ``<prefix>ForCausalLM``)
CLASSES = {
    "phi3": "Phi3",
    "phi": "Phi",
    "gemma2": "Gemma2",
    "falcon": "Falcon",
    "falcon-40b": "Falcon",
    "olmo2": "Olmo2",
    "granite": "Granite",
    "cohere": "Cohere",
    "cohere-plus": "Cohere",
    "glm": "Glm",
    "glm4": "Glm4",
    "starcoder2": "Starcoder2",
    "deepseek_v2": "DeepseekV2",
}


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _cfg(key):
    repo, data = CONFIGS[key]
    return config_from_hf_dict(data, key, _HF.format(repo))


@pytest.mark.parametrize("key", list(CLASSES))
def test_parameter_count_equals_transformers_on_meta(key):
    """Every parameter of the transformers class built from the same config.json on the meta device."""
    prefix = CLASSES[key]
    stored = stored_weights_on_meta(f"{prefix}Config", f"{prefix}ForCausalLM", CONFIGS[key][1])
    assert stored == param_counts(_cfg(key)).total


def test_internlm2_5_7b_by_hand_and_report():
    """InternLM2.5-7B (remote code): Llama-shaped, d 4096, 32 layers, 32 heads of 128 and 8 KV heads, FFN
    14336, vocabulary 92544 untied (InternLM2 report, arXiv:2403.17297, table 1: the 7B model)."""
    d, L, kv, ff, V = 4096, 32, 8 * 128, 14336, 92544
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d  # wq+wo, wk+wv (in wqkv), w1/w3/w2, 2 norms
    total = 2 * V * d + L * per_layer + d  # 758,120,448 + 32 * 218,112,000 + 4096
    assert total == 7_737_708_544
    assert param_counts(_cfg("internlm2")).total == total
    assert total == pytest.approx(7e9, rel=0.11)  # the card's "7 billion parameter" model


def test_exaone_3_5_7_8b_by_hand_and_report():
    """EXAONE-3.5-7.8B (remote code in this transformers): the report (arXiv:2412.04862, table 1) gives
    7.8B, 32 layers, FFN 14336, 32K context; the model card 6.98B without embeddings."""
    cfg = _cfg("exaone")
    pc = param_counts(cfg)
    d, V = 4096, 102400
    per_layer = 2 * d * d + 2 * d * 1024 + 3 * d * 14336 + 2 * d  # q+o, k+v (8 KV heads), SwiGLU, ln_1/ln_2
    assert pc.total == 2 * V * d + 32 * per_layer + d == 7_818_448_896
    assert float(pc.total) == pytest.approx(7.8e9, rel=0.01)
    assert float(pc.non_embedding) == pytest.approx(6.98e9, rel=0.001)  # 6,979,588,096


@pytest.mark.parametrize("key", list(CONFIGS))
def test_graph_weights_equal_parameter_formulas(key):
    """Two independent counts: the weight nodes of the decode graph and models.params' formulas."""
    cfg = _cfg(key)
    assert weight_params(build_model(cfg, "decode")) == param_counts(cfg).total


def test_layer_patterns_and_shapes():
    phi3 = _cfg("phi3")  # sliding_window 2047 < the 4096-token context: every layer windowed
    assert {s.mixer for s in phi3.layer_types} == {"sliding"} and phi3.attention.sliding_window == 2047
    long = config_from_hf_dict(
        {**CONFIGS["phi3"][1], "sliding_window": 262144, "max_position_embeddings": 131072}
    )
    assert long.layer_types is None  # a window longer than the context is full attention
    g2 = _cfg("gemma2")  # local first, then global, alternating (Gemma2Config.layer_types)
    assert [s.mixer for s in g2.layer_types[:4]] == ["sliding", "gqa", "sliding", "gqa"]
    assert g2.mlp == "geglu" and g2.sandwich_norm and g2.tie_word_embeddings and not g2.attention.qk_norm
    f7 = _cfg("falcon")  # multi-query, one shared LayerNorm
    assert (f7.num_key_value_heads, f7.parallel_block, f7.intermediate_size) == (1, True, 4 * 4544)
    f40 = _cfg("falcon-40b")  # new_decoder_architecture: 8 KV groups, ln_attn + ln_mlp
    assert (f40.num_key_value_heads, f40.parallel_block) == (8, False)
    sc = _cfg("starcoder2")
    assert (
        sc.norm == "layernorm"
        and sc.mlp == "gelu"
        and sc.mlp_bias
        and sc.attention.o_bias
        and sc.attention.sliding_window == 4096
    )
    assert _cfg("cohere-plus").attention.qk_norm_all_heads and not _cfg("cohere").attention.qk_norm
    assert _cfg("phi").lm_head_bias and _cfg("olmo2").attention.qk_norm_all_heads


def test_falcon_7b_kv_cache_is_multi_query():
    """Falcon-7B caches one K and one V head of 64 per layer: 2 * 32 layers * 64 * 2 bytes = 8,192 B/token
    (71 query heads share it)."""
    s = summarize(build_model(_cfg("falcon"), "decode", batch=1, ctx=2048))
    assert s.kv_bytes_per_token == 2 * 32 * 64 * 2


def test_gemma2_decode_step_by_hand(tmp_path, capsys):
    """gemma-2-9b at 8K context on an H100 SXM (3.35 TB/s), batch 1, bf16: every weight read once,
    2 * 9,241,705,984 B (the tied table once, by the lm_head), and the KV cache of 21 global layers over
    8192 tokens plus 21 local ones over their 4096-token window, 2 * 8 heads * 256 * 2 B = 8192 B per
    token and layer: 2 * 9,241,705,984 + 8192 * (21 * 8192 + 21 * 4096) = 20.597 GB -> 6.148 ms;
    memory-bound, so the step is within a few percent above it (norms, rope, the logits)."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps(CONFIGS["gemma2"][1]))
    code, out, _ = _run(capsys, "decode", str(f), "--ctx", "8192", "--json")
    assert code == 0
    hand = (2 * 9_241_705_984 + 8192 * (21 * 8192 + 21 * 4096)) / 3.35e12
    assert json.loads(out)["step_s"] == pytest.approx(hand, rel=0.01)


_TP = {"falcon-40b": 2, "cohere-plus": 4}


@pytest.mark.parametrize("key", list(CONFIGS))
def test_decode_and_prefill_run(tmp_path, capsys, key):
    """One decode and one prefill step per family through the command line, from the config.json file."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps(CONFIGS[key][1]))
    tp = ("--tp", str(_TP.get(key, 1)))  # the 41B and 104B models in bf16 need more than one 80 GB device
    for argv in (("decode", str(f), "--ctx", "2048"), ("prefill", str(f), "--seq", "1024")):
        code, out, err = _run(capsys, *argv, *tp, "--json")
        assert code == 0, err
        step = json.loads(out)["step_s"]
        assert math.isfinite(step) and step > 0


@pytest.mark.parametrize(
    ("model_type", "part"),
    [
        ("minimax", "lightning attention"),
        ("kimi_linear", "Kimi Delta Attention"),
        ("falcon_h1", "in parallel"),
        ("phi3small", "block-sparse"),
    ],
)
def test_new_architectures_are_refused_with_the_missing_part(model_type, part):
    with pytest.raises(
        ModelConfigError, match=rf"model_type '{model_type}' is not supported: mixer: .*{part}"
    ):
        config_from_hf_dict({"model_type": model_type, "hidden_size": 64}, "m")


def test_minimax_lightning_layers_and_phi_qk_layernorm_are_refused():
    base = {"model_type": "minimax_m2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    base |= {"intermediate_size": 32, "vocab_size": 10, "num_local_experts": 4, "num_experts_per_tok": 2}
    with pytest.raises(ModelConfigError, match=r"attn_type_list .* lightning"):
        config_from_hf_dict({**base, "attn_type_list": [0, 1]}, "m")
    with pytest.raises(ModelConfigError, match="qk_layernorm"):
        config_from_hf_dict({**CONFIGS["phi"][1], "qk_layernorm": True}, "p")
