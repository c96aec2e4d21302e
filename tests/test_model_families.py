"""Layer specs and the model families built from them: parameter counts against the model cards,
cache bytes against hand derivations, the new mixers' rules, the capacity ledger, the CLI."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.rules import op_cost
from costmodel.rules.attention import chunk_keys, chunk_pairs
from graphs import build_layer, build_model
from graphs.cli import main
from graphs.serving.step.ledger_fit import capacity, model_ledger
from graphs.serving.step.totals import cache_terms
from models import MODELS, ModelConfig, ModelConfigError, config_from_hf_dict, get_model, param_counts
from models.layers import LayerSpec, layer_groups

# -------------------------------------------------------------- parameter counts


def _vision_params(name: str) -> int:
    """Llama 4's vision encoder, which the published totals include and the text model omits, derived
    by hand from the shipped ``vision_config``: 34 ViT layers of q/k/v/o (with biases) and a GELU MLP
    (with biases) and two LayerNorms (with biases), the patch projection (3 x 14 x 14 per channel), a
    class token and one position embedding per patch plus the class token, pre/post LayerNorms, the
    pixel-shuffle MLP (4h -> 4096 -> 4096, no biases) and the projector 4096 -> 5120."""
    cfg = json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())
    v, d_text = cfg["vision_config"], cfg["text_config"]["hidden_size"]
    h, i, n = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    per_layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 2 * 2 * h
    patches = (v["image_size"] // v["patch_size"]) ** 2
    embed = 3 * v["patch_size"] ** 2 * h + h + (patches + 1) * h + 2 * 2 * h
    shuffle_in = int(h / v["pixel_shuffle_ratio"] ** 2)
    adapter = shuffle_in * v["projector_input_dim"] + v["projector_input_dim"] * v["projector_output_dim"]
    return n * per_layer + embed + adapter + v["vision_output_dim"] * d_text


#: published figures that round differently from their own digits, and why
EXCEPTIONS = {
    # Qwen3-30B-A3B: total (30.53B) and non-embedding (29.91B) match to 0.1 %, and the active count
    # is 3.353B by the same formulas: the card's "3.3B" truncates rather than rounds
    ("qwen3-30b-a3b", "active"): 0.017,
}


def _tolerance(published: float) -> float:
    """0.5 % or the published figure's own rounding (``17B`` means 16.5-17.5B), whichever is wider."""
    digits = len(f"{published / 1e9:g}".replace(".", "").lstrip("0"))
    half_unit = 0.5 * 10 ** (math.floor(math.log10(published)) - digits + 1)
    return max(0.005, half_unit / published)


NEW = [
    "gpt-oss-120b",
    "gpt-oss-20b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "qwen3-next-80b-a3b",
    "gemma-3-27b",
    "llama-4-scout",
    "llama-4-maverick",
    "deepseek-v3-mtp",
    "mamba2-2.7b",
    "nemotron-h-8b",
    "jamba-v0.1",
]


@pytest.mark.parametrize("name", NEW)
def test_parameter_counts_match_the_model_cards(name):
    entry, pc = MODELS[name], param_counts(get_model(name))
    vision = _vision_params(name) if name.startswith("llama-4") else 0
    checked = 0
    if entry.published_total is not None:
        total = float(pc.total) + vision
        assert total == pytest.approx(entry.published_total, rel=_tolerance(entry.published_total))
        checked += 1
    if entry.published_non_embedding is not None:
        ne = float(pc.non_embedding)
        assert ne == pytest.approx(
            entry.published_non_embedding, rel=_tolerance(entry.published_non_embedding)
        )
        checked += 1
    if entry.published_active is not None:
        active = float(pc.active)
        if entry.active_counts == "no_embedding":
            active -= float(pc.embedding)
        elif entry.active_counts == "non_embedding":
            active -= float(pc.embedding + pc.lm_head)
        rel = EXCEPTIONS.get((name, "active"), _tolerance(entry.published_active))
        assert active == pytest.approx(entry.published_active, rel=rel)
        checked += 1
    assert checked


def test_tolerance_follows_the_published_rounding():
    assert _tolerance(17e9) == pytest.approx(0.5 / 17)
    assert _tolerance(116.83e9) == 0.005


def test_gpt_oss_120b_breakdown_matches_the_card_table():
    """gpt-oss card, table 1: MLP 114.71B, attention 0.96B, embed + unembed 1.16B (hand check)."""
    d, L, E = 2880, 36, 128
    mlp = L * (E * 3 * d * d + E * (2 * d + d) + E * d + E)  # experts, their biases, router with bias
    attn = L * (2 * d * 64 * 64 + 2 * d * 8 * 64 + 64 * 64 + 2 * 8 * 64 + 64)  # q,o; k,v; biases; sinks
    assert mlp / 1e9 == pytest.approx(114.71, abs=0.01)
    assert attn / 1e9 == pytest.approx(0.96, abs=0.01)
    pc = param_counts(get_model("gpt-oss-120b"))
    assert float(pc.embedding + pc.lm_head) / 1e9 == pytest.approx(1.16, abs=0.01)


def test_per_tensor_dtypes_mxfp4_experts():
    """gpt-oss ships MXFP4 experts and bf16 attention: 114.7B at 4.25 bits plus the rest at 16 bits
    is the 60.8 GiB checkpoint the card states (to 0.3 %)."""
    from models.params import param_bytes

    cfg = get_model("gpt-oss-120b")
    assert cfg.expert_weight_dtype == "mxfp4" and cfg.weight_dtype == "bf16"
    assert float(param_bytes(cfg)) / 2**30 == pytest.approx(60.8, rel=0.003)


# -------------------------------------------------------------- layer patterns


def test_patterns_read_from_the_configs():
    gemma = get_model("gemma-3-27b")
    groups = layer_groups(gemma)
    assert [(g.spec.mixer, int(g.count)) for g in groups] == [("sliding", 52), ("gqa", 10)]
    oss = get_model("gpt-oss-120b")
    assert [(g.name, int(g.count)) for g in layer_groups(oss)] == [("sliding_moe", 18), ("gqa_moe", 18)]
    assert oss.attention.attention_sinks == 1
    scout, mav = get_model("llama-4-scout"), get_model("llama-4-maverick")
    assert {(g.name, int(g.count)) for g in layer_groups(scout)} == {("chunked_moe", 36), ("gqa_moe", 12)}
    # MoE on odd layers, NoPE (full attention) on every 4th: the full layers are all MoE
    assert {(g.name, int(g.count)) for g in layer_groups(mav)} == {
        ("chunked_dense", 24),
        ("chunked_moe", 12),
        ("gqa_moe", 12),
    }
    nxt = get_model("qwen3-next-80b-a3b")
    assert {(g.name, int(g.count)) for g in layer_groups(nxt)} == {
        ("linear_attention_moe", 36),
        ("gqa_moe", 12),
    }
    assert [(g.name, int(g.count)) for g in layer_groups(get_model("mamba2-2.7b"))] == [("ssm_none", 64)]
    nem = get_model("nemotron-h-8b")  # M, '-' and '*' layers: 24 Mamba, 24 MLP-only, 4 attention
    assert [(g.name, int(g.count)) for g in layer_groups(nem)] == [
        ("ssm_none", 24),
        ("none_dense", 24),
        ("gqa_none", 4),
    ]
    # uniform configs keep their group names
    assert [g.name for g in layer_groups(get_model("deepseek-v3"))] == ["dense", "moe"]


def test_llama4_nope_layers_and_jamba_take_no_rope():
    """Llama 4 applies RoPE on its chunked layers only (the full ones are NoPE); Jamba uses none."""
    g = build_model(get_model("llama-4-scout"), "decode", batch=1, ctx=64)
    assert sorted(n for n in g if "rope" in n) == ["chunked_moe.rope_k", "chunked_moe.rope_q"]
    assert not [n for n in build_model(get_model("jamba-v0.1"), "decode", batch=1, ctx=64) if "rope" in n]


def test_build_model_repeats_one_group_per_spec():
    g = build_model(get_model("gemma-3-27b"), "decode", batch=1, ctx=4096)
    assert set(g.graph["groups"]) == {"sliding_dense", "gqa_dense"}
    assert {int(v["repeat"]) for v in g.graph["groups"].values()} == {52, 10}


def test_bad_patterns_are_clear_errors():
    base = {"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4}
    base |= {"intermediate_size": 128, "vocab_size": 100, "sliding_window": 16}
    with pytest.raises(ModelConfigError, match="layer_types must be a list of 3 entries"):
        config_from_hf_dict({**base, "layer_types": ["full_attention"]}, "g")
    with pytest.raises(ModelConfigError, match="layer_types entries must be one of"):
        config_from_hf_dict({**base, "layer_types": ["full_attention", "x", "y"]}, "g")
    with pytest.raises(ModelConfigError, match="sliding layers need sliding_window"):
        ModelConfig("m", 64, 2, 4, 128, 100, layer_types=("sliding", "gqa"))
    with pytest.raises(ModelConfigError, match="layer_types has 2 entries but num_hidden_layers is 3"):
        ModelConfig("m", 64, 3, 4, 128, 100, sliding_window=8, layer_types=("sliding", "gqa"))
    with pytest.raises(CostModelError, match="layer mixer 'rwkv' not allowed"):
        LayerSpec("rwkv")
    jamba = json.loads(resources.files("models").joinpath("configs", "jamba-v0.1.json").read_text())
    with pytest.raises(ModelConfigError, match="attn_layer_period must be >= 1, got 0"):
        config_from_hf_dict({**jamba, "attn_layer_period": 0}, "j")
    nem = json.loads(resources.files("models").joinpath("configs", "nemotron-h-8b.json").read_text())
    with pytest.raises(ModelConfigError, match="hybrid_override_pattern must be 52 characters of"):
        config_from_hf_dict({**nem, "hybrid_override_pattern": "M?" * 26}, "n")


# -------------------------------------------------------------- cache bytes by hand


def _cache(name):
    g = build_model(get_model(name), "decode", batch=1, ctx=4096)
    return cache_terms(g, 1, 1)


def test_gpt_oss_120b_cache_bytes_by_hand():
    # 18 full and 18 sliding layers; each token's K and V: 2 x 8 heads x 64 x 2 bytes = 2048
    t = _cache("gpt-oss-120b")
    assert t.per_token == 18 * 2048
    assert t.capped == ((18 * 2048, 128),)
    assert t.state == 0
    assert t.bytes_per_sequence(131072) == 36864 * 131072 + 36864 * 128


def test_gemma_3_27b_cache_bytes_by_hand():
    # 10 global and 52 local layers; K and V: 2 x 16 heads x 128 x 2 bytes = 8192 per token
    t = _cache("gemma-3-27b")
    assert t.per_token == 10 * 8192
    assert t.capped == ((52 * 8192, 1024),)
    assert t.bytes_per_sequence(100) == 62 * 8192 * 100
    assert t.bytes_per_sequence(4096) == 10 * 8192 * 4096 + 52 * 8192 * 1024


def test_qwen3_next_cache_and_state_by_hand():
    # 12 full layers: 2 x 2 kv heads x 256 x 2 bytes; 36 linear layers: a 128 x 128 fp32 state per
    # value head (32) and a conv state of 3 inputs over 2*16*128 + 32*128 channels in bf16
    t = _cache("qwen3-next-80b-a3b")
    assert t.per_token == 12 * 2048
    assert t.capped == ()
    assert t.state == 36 * (32 * 128 * 128 * 4 + 3 * 8192 * 2)


def test_nemotron_h_cache_and_state_by_hand():
    # the hybrid: 4 attention layers (K and V: 2 x 8 kv heads x 128 x 2 bytes per token) and 24 Mamba-2
    # layers (128 heads x 64 x 128 fp32 state, conv state 3 x (8192 + 2 x 8 x 128) bf16)
    t = _cache("nemotron-h-8b")
    assert t.per_token == 4 * 4096
    assert t.state == 24 * (128 * 64 * 128 * 4 + 3 * (8192 + 2048) * 2)
    # a third-party count of the loaded checkpoint's parameters gives 8,100,852,736 exactly
    assert param_counts(get_model("nemotron-h-8b")).total == 8_100_852_736


def test_jamba_cache_and_state_by_hand():
    # 4 attention layers (K and V: 2 x 8 x 128 x 2 bytes per token); 28 Mamba-1 layers, each an fp32
    # state of D x N = 8192 x 16 and a bf16 conv state of 3 x 8192 inputs
    t = _cache("jamba-v0.1")
    assert t.per_token == 4 * 4096
    assert t.state == 28 * (8192 * 16 * 4 + 3 * 8192 * 2)
    assert [(g.name, int(g.count)) for g in layer_groups(get_model("jamba-v0.1"))] == [
        ("mamba_dense", 12),
        ("mamba_moe", 16),
        ("gqa_dense", 4),
    ]


def test_selective_scan_s6_by_hand():
    # Jamba decode: 8 sequences, 8192 channels, 16 states; per (channel, state) 6 vector ops and an exp
    c = op_cost("selective_scan_s6", tokens=8, channels=8192, state_size=16, batch=8)
    assert c.flops_on("vector") == 8 * 8192 * (6 * 16 + 4)
    assert c.flops_on("sfu") == 8 * 8192 * (16 + 2)
    state = 8 * 8192 * 16 * 4
    assert c.bytes == 2 * state + 2 * 8 * (2 * 8192 + 2 * 16) + 2 * 8 * 8192


def test_mamba2_state_by_hand():
    # 64 layers: 80 heads x 64 x 128 fp32 state, conv state 3 x (5120 + 2*128) bf16; no KV at all
    t = _cache("mamba2-2.7b")
    assert t.per_token == 0
    assert t.state == 64 * (80 * 64 * 128 * 4 + 3 * 5376 * 2)


def test_windowed_decode_attention_stops_growing_at_w():
    cfg = get_model("gemma-3-27b")
    ctx = sympy.Symbol("ctx_test", positive=True, integer=True)
    layer = build_layer(cfg, "decode", batch=1, ctx=ctx, spec=LayerSpec("sliding", "dense"))
    cost = layer.nodes["layer.attention"]["cost"]
    at = {
        c: (float(cost.flops.subs(ctx, c)), float(cost.bytes.subs(ctx, c))) for c in (512, 1024, 4096, 65536)
    }
    assert at[1024] == at[4096] == at[65536] and at[512][0] < at[1024][0]
    full = build_layer(cfg, "decode", batch=1, ctx=ctx, spec=LayerSpec("gqa", "dense"))
    fc = full.nodes["layer.attention"]["cost"]
    assert float(fc.bytes.subs(ctx, 65536)) > 30 * at[65536][1]


def test_chunked_decode_reads_the_current_chunk():
    cfg = get_model("llama-4-scout")
    layer = build_layer(cfg, "decode", batch=1, ctx=8192 + 5, spec=LayerSpec("chunked", "moe"))
    p = layer.nodes["layer.attention"]["params"]
    assert int(chunk_keys(1, p["kv_len"], p["chunk"])) == 5  # positions 8192..8196 of the 2nd chunk


# -------------------------------------------------------------- rules by hand


@given(st.integers(1, 60), st.integers(0, 60), st.integers(1, 9))
def test_chunk_pairs_brute_force(q, prefix, chunk):
    kv = prefix + q
    brute = sum((p % chunk) + 1 for p in range(kv - q, kv))
    assert int(chunk_pairs(q, kv, chunk)) == brute
    first = kv - q
    assert int(chunk_keys(q, kv, chunk)) == kv - (first // chunk) * chunk


def test_sinks_add_one_score_column_per_query():
    base = dict(heads=8, q_len=16, kv_len=64, head_dim=64, batch=2, causal=True, window=32)
    a, b = op_cost("attention", **base), op_cost("attention", **base, sinks=1)
    assert b.flops_on("vector") - a.flops_on("vector") == 4 * 2 * 8 * 16  # softmax ops per extra column
    assert b.flops_on("sfu") - a.flops_on("sfu") == 2 * 8 * 16
    assert b.flops_on("tensor") == a.flops_on("tensor")  # a learned logit has no value vector


def test_selective_scan_chunked_by_hand():
    # Mamba-2 2.7B, one 256-token chunk: C B^T per group, scores x X, chunk state, state->output
    c = op_cost("selective_scan", tokens=256, heads=80, head_dim=64, state_size=128, groups=1, chunk=256)
    per_chunk = 2 * 256 * 256 * 128 + 80 * (2 * 256 * 256 * 64 + 2 * 256 * 128 * 64 + 2 * 256 * 128 * 64)
    assert c.flops_on("tensor") == per_chunk
    # prefill writes the final state (fp32) once, reads x, B, C, dt and writes y (bf16)
    assert c.bytes == 80 * 64 * 128 * 4 + 2 * 256 * (80 * 64 + 2 * 128 + 80) + 2 * 256 * 80 * 64


def test_gated_delta_rule_decode_by_hand():
    c = op_cost(
        "gated_delta_rule",
        tokens=4,
        key_heads=16,
        value_heads=32,
        key_dim=128,
        value_dim=128,
        batch=4,
        mode="recurrent",
    )
    state = 4 * 32 * 128 * 128 * 4
    io = 2 * 4 * (2 * 16 * 128 + 32 * 128 + 2 * 32) + 2 * 4 * 32 * 128
    assert c.bytes == 2 * state + io  # the state is read and written every step
    assert c.flops_on("vector") == 4 * 32 * (7 * 128 * 128 + 2 * 128) + 4 * (4 * 32 + 6 * 16 * 128)


# -------------------------------------------------------------- capacity and the CLI


def test_gemma_max_batch_at_128k_reflects_the_window():
    rep = capacity("gemma-3-27b", "h200", batch=1, ctx=131072)
    per_seq = 10 * 8192 * 131072 + 52 * 8192 * 1024  # by hand: global layers grow, local ones stop at W
    spare = rep.capacity_bytes - rep.terms["weights"]
    assert rep.max_batch.value == int(spare // per_seq) == 8  # the H200's 143,771 MiB (nvidia-smi)
    uniform = get_model("gemma-3-27b").replace(layer_types=("gqa",) * 62)
    assert capacity(uniform, "h200", batch=1, ctx=131072).max_batch.value == 1
    led = model_ledger("gemma-3-27b")
    assert led.kv_bytes_per_sequence(131072) == per_seq


def test_cli_decode_shows_the_window_cap(capsys):
    argv = ["decode", "gpt-oss-120b", "--device", "h100", "--batch", "64", "--ctx", "32768"]
    assert main([*argv, "--ignore-capacity"]) == 0  # at most batch 12 fits one H100
    out = capsys.readouterr().out
    held = 64 * 36864 * (32768 + 128)  # 18 full layers x ctx + 18 sliding layers x 128
    assert "layers capped at 128 positions" in out and f"cache held {held / 1e9:.2f} GB" in out


def test_cli_ledger_and_context_limit(capsys):
    assert main(["ledger", "gemma-3-27b", "--device", "h200", "--ctx", "131072"]) == 0
    out = capsys.readouterr().out
    assert "windowed/chunked layers" in out and "max batch at ctx 131072: 8" in out
    assert main(["decode", "gpt-oss-120b", "--device", "h100", "--ctx", "200000"]) == 2
    err = capsys.readouterr().err
    assert "exceeds the model's context limit of 131,072 tokens" in err and err.count("\n") == 1


def test_causal_conv1d_by_hand():
    # Mamba-2 2.7B decode: one token per sequence over d_in + 2GN = 5376 channels, width 4, SiLU
    c = op_cost("causal_conv1d", tokens=8, channels=5376, width=4, batch=8, state="read_write")
    assert c.flops_on("vector") == (2 * 4 + 1 + 4) * 8 * 5376  # K mul-adds, the bias, SiLU's 4
    assert c.flops_on("sfu") == 8 * 5376  # SiLU's exponential
    conv_state = 2 * 8 * 3 * 5376  # bf16, the last K - 1 inputs of each sequence
    assert c.bytes == 2 * 8 * 5376 * 2 + 2 * 5376 * 5 + 2 * conv_state


def test_capacity_factor_pads_every_expert_buffer():
    # Switch Transformer capacity: 16 tokens x top-2 over 8 experts at c = 1.25 -> ceil(5) = 5 rows each
    plain = op_cost("grouped_gemm", tokens=16, experts=8, top_k=2, N=64, K=32)
    padded = op_cost("grouped_gemm", tokens=16, experts=8, top_k=2, N=64, K=32, capacity_factor=1.25)
    assert plain.flops == 2 * 32 * 64 * 32 and padded.flops == 2 * 40 * 64 * 32
    cfg = get_model("mixtral-8x7b").replace(moe_capacity_factor=1.25)
    g = build_model(cfg, "prefill", batch=1, seq=16)
    assert g.nodes["moe.experts.up_proj"]["cost"].flops == 2 * 40 * 4096 * 14336
    with pytest.raises(ModelConfigError, match="moe_capacity_factor must be a positive number"):
        get_model("mixtral-8x7b").replace(moe_capacity_factor=0)


def test_deepseek_moe_layer_frequency():
    """``moe_layer_freq``: a MoE layer every f-th layer after the dense-first ones (DeepSeek-V2 style)."""
    cfg = json.loads(resources.files("models").joinpath("configs", "deepseek-v3.json").read_text())
    cfg = {**cfg, "num_hidden_layers": 8, "first_k_dense_replace": 1, "moe_layer_freq": 2}
    m = config_from_hf_dict(cfg, "ds-freq")
    assert [s.mlp for s in m.layer_types] == [
        "dense",
        "dense",
        "moe",
        "dense",
        "moe",
        "dense",
        "moe",
        "dense",
    ]


def test_numeric_ceiling_agrees_with_the_symbolic_solve():
    """Windowed models make the decode limits piecewise, solved numerically (``_first_root``); on a
    uniform model both routes apply, and they agree."""
    import sympy as sp

    from costmodel.symbols import ctx as ctx_sym
    from costmodel.symbols import quantity
    from graphs.serving.analysis.limits import LimitForms, _first_root
    from graphs.serving.step.compiled import compiled_step

    assert _first_root(lambda x: x - 100.0) == pytest.approx(100.0, rel=1e-12)
    assert _first_root(lambda x: 1.0) is None
    lf = LimitForms.of(compiled_step("llama-3.1-8b", "h100", "decode"))
    _c, symbolic = lf.ceiling("tensor")
    x = quantity("x")
    assert symbolic is not None
    numeric = _first_root(sp.lambdify(x, lf.b_per.subs(ctx_sym, x) - _c.subs(ctx_sym, x), "math"))
    assert numeric == pytest.approx(symbolic, rel=1e-9)
