"""Model configs, the Hugging Face loader, the catalog and parameter counts."""

import json

import pytest
import sympy

from models import (
    MODELS,
    ModelConfig,
    ModelConfigError,
    MoESpec,
    UnknownModelError,
    config_from_hf_dict,
    get_model,
    load_hf_config,
    param_counts,
)

# Published totals and the tolerance each needs. Norm weights and biases are
# counted exactly here, so the gaps are the publishers' rounding:
#   Llama-3.1-405B: 405.85B counted vs "405B" on the model card (rounded down, 0.21%).
#   DeepSeek-V3: 671.03B vs 671B. Its active count is checked where DeepSeek's own counting is
#   (tests/test_catalog_audit.py: README_WEIGHTS.md's 36.6B, the output head counted and the input
#   table not: 37.55B less the 0.93B table is 36.63B), not against the report's rounded "37B".
PUBLISHED = [
    ("llama-3.1-8b", "total", 8.03e9, 0.001),
    ("llama-3.1-70b", "total", 70.6e9, 0.001),
    ("llama-3.1-405b", "total", 405e9, 0.003),
    ("qwen2.5-7b", "total", 7.61e9, 0.001),
    ("qwen2.5-7b", "non_embedding", 6.53e9, 0.001),
    ("qwen2.5-72b", "total", 72.7e9, 0.001),
    ("qwen2.5-72b", "non_embedding", 70.0e9, 0.004),
    ("mixtral-8x7b", "total", 46.7e9, 0.001),
    ("mixtral-8x7b", "active", 12.9e9, 0.002),
    ("deepseek-v3", "total", 671e9, 0.001),
    ("llama-2-7b", "total", 6.74e9, 0.001),
    ("llama-2-13b", "total", 13.0e9, 0.002),
    ("llama-2-70b", "total", 69.0e9, 0.001),
    ("mistral-7b", "total", 7.25e9, 0.001),
    # Llama-3.2-1B: 1.2358B counted vs "1.23B" on the model card (truncated, 0.47%)
    ("llama-3.2-1b", "total", 1.23e9, 0.005),
]


@pytest.mark.parametrize(("model", "which", "published", "rel"), PUBLISHED)
def test_published_parameter_counts(model, which, published, rel):
    value = float(getattr(param_counts(get_model(model)), which))
    assert value == pytest.approx(published, rel=rel)


def test_llama_3_2_1b_exact_count_by_hand():
    # tied table 128256*2048 = 262,668,288; per layer q,o 2048^2 each, k,v 2048*512 each (8 kv heads
    # of 64), MLP 3*2048*8192, 2 norms of 2048: 60,821,504; x16 = 973,144,064; final norm 2048
    assert param_counts(get_model("llama-3.2-1b")).total == 262_668_288 + 973_144_064 + 2048


def test_llama_3_1_8b_exact_count_by_hand():
    # per layer: q,o 4096^2 each; k,v 4096*1024 each; MLP 3*4096*14336; 2 norms of 4096
    per_layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096  # 218,112,000
    total = 32 * per_layer + 2 * 128256 * 4096 + 4096  # untied embedding and lm_head, final norm
    assert param_counts(get_model("llama-3.1-8b")).total == total == 8_030_261_248


def test_qwen_matches_seed_script_up_to_biases_and_norms():
    # seed: per_layer = d*d + 2*d*(h_kv*hd) + d*d + 2*d*i + i*d (no biases, no norms)
    d, i, hkv, hd = 3584, 18944, 4, 128
    seed_non_emb = 28 * (d * d + 2 * d * (hkv * hd) + d * d + 2 * d * i + i * d)
    pc = param_counts(get_model("qwen2.5-7b"))
    biases = 28 * (d + 2 * hkv * hd)
    norms = 28 * 2 * d + d
    assert pc.non_embedding == seed_non_emb + biases + norms


def test_moe_active_vs_total_and_mla_shapes():
    ds = get_model("deepseek-v3")
    assert ds.is_moe and ds.is_mla and ds.n_dense_layers == 3 and ds.n_moe_layers == 58
    assert ds.head_dim == 192  # qk_nope 128 + qk_rope 64
    pc = param_counts(ds)
    # 58 MoE layers leave 256 - 8 routed experts idle per token, 3*7168*2048 each
    assert pc.total - pc.active == 58 * (256 - 8) * 3 * 7168 * 2048


def test_head_dim_comes_from_the_config():
    # Qwen3-32B-like: hidden 5120 / 64 heads = 80, but head_dim is 128
    cfg = config_from_hf_dict(
        {
            "model_type": "qwen3",
            "hidden_size": 5120,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 64,
            "intermediate_size": 25600,
            "vocab_size": 151936,
        },
        "qwen3-32b",
    )
    assert cfg.head_dim == 128 and cfg.attention.qk_norm
    assert param_counts(cfg).per_dense_layer == (
        5120 * 64 * 128 * 2 + 2 * 5120 * 8 * 128 + 2 * 128 + 3 * 5120 * 25600 + 2 * 5120
    )


def test_loader_reads_files_and_names_problems(tmp_path):
    good = tmp_path / "config.json"
    good.write_text(
        json.dumps(
            {
                "model_type": "mistral",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "intermediate_size": 128,
                "vocab_size": 100,
            }
        )
    )
    cfg = load_hf_config(tmp_path)
    assert cfg.num_key_value_heads == 4 and cfg.head_dim == 16
    with pytest.raises(ModelConfigError, match="missing required field 'vocab_size'"):
        config_from_hf_dict(
            {
                "model_type": "llama",
                "hidden_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "intermediate_size": 8,
            }
        )
    with pytest.raises(ModelConfigError, match="must be a multiple of num_key_value_heads"):
        config_from_hf_dict(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 6,
                "num_key_value_heads": 4,
                "num_hidden_layers": 1,
                "intermediate_size": 8,
                "vocab_size": 10,
                "head_dim": 8,
            }
        )
    with pytest.raises(ModelConfigError, match="model_type 'gpt2' is not supported"):
        config_from_hf_dict({"model_type": "gpt2"})
    with pytest.raises(ModelConfigError, match="must be an integer"):
        config_from_hf_dict(
            {
                "model_type": "llama",
                "hidden_size": "4096",
                "num_attention_heads": 32,
                "num_hidden_layers": 1,
                "intermediate_size": 8,
                "vocab_size": 10,
            }
        )
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_hf_config(bad)
    with pytest.raises(ModelConfigError, match="does not exist"):
        load_hf_config(tmp_path / "nope.json")


def test_a_config_with_no_model_type_is_refused_saying_the_field_is_missing():
    """The loader's own refusal (and --assume-family's) of a config.json with no ``model_type``
    key says the field is missing, never "model_type 'None'"; a non-string value is named as given."""
    fields = {"hidden_size": 64, "num_hidden_layers": 2}  # no model_type, no layer_types
    for kwargs in ({}, {"assume_family": "llama"}):
        with pytest.raises(ModelConfigError) as info:
            config_from_hf_dict(fields, name="acme", **kwargs)
        msg = str(info.value)
        assert msg.startswith("acme: the field model_type is missing (the loader maps a config by it; "), msg
        assert "None" not in msg and "\n" not in msg
    with pytest.raises(
        ModelConfigError, match=r"^acme: model_type 5 is not a string naming the architecture; "
    ):
        config_from_hf_dict({**fields, "model_type": 5}, name="acme")


def test_config_validation():
    with pytest.raises(ModelConfigError, match="not a multiple of num_attention_heads"):
        ModelConfig("x", 100, 1, 3, 8, 10)
    with pytest.raises(ModelConfigError, match="MoE config is missing moe_intermediate_size"):
        ModelConfig("x", 64, 1, 4, 8, 10, num_experts=8, num_experts_per_tok=2)
    with pytest.raises(ModelConfigError, match="exceeds num_experts"):
        ModelConfig("x", 64, 1, 4, 8, 10, num_experts=2, num_experts_per_tok=4, moe_intermediate_size=8)
    with pytest.raises(ModelConfigError, match=r"x\.hidden_size must be a positive integer"):
        ModelConfig("x", 0, 1, 4, 8, 10)
    with pytest.raises(ModelConfigError, match=r"mlp 'relu' not allowed; allowed:.*relu2"):
        ModelConfig("x", 64, 1, 4, 8, 10, mlp="relu")
    with pytest.raises(UnknownModelError, match="catalog models: llama-2-7b"):
        get_model("gpt-5")


def test_symbolic_config_and_bindings():
    cfg = get_model("mixtral-8x7b")
    sym = ModelConfig.symbolic(like=cfg)
    assert isinstance(sym.need(MoESpec).num_experts, sympy.Symbol)
    assert param_counts(sym).total.subs(cfg.bindings(sym)) == param_counts(cfg).total


def test_every_catalog_model_has_a_source():
    for name, entry in MODELS.items():
        assert entry.source, name
        if entry.published_total is not None:
            assert entry.published_source, name


def test_active_parameters_follow_the_publishers_convention_the_list_names(capsys):
    """`model list`'s active/token counts the input-embedding table whole. Published: Mixtral-8x7B
    12.9 B active (Mistral AI, "Mixtral of experts", 2023-12-11), Qwen3-30B-A3B 3.3 B activated
    (its model card), Llama-4-Scout 17 B active (Meta's model card) count it; OpenAI's gpt-oss
    model card (5.13 B and 3.61 B active of 116.83 B and 20.91 B) leaves it out: the column less
    vocab x hidden. The list says which it prints."""
    from costmodel.cost import as_float
    from graphs.cli import main
    from models import get_model, param_counts

    def active(name: str, embedding: bool = True) -> float:
        pc = param_counts(get_model(name))
        return as_float(pc.active - (0 if embedding else pc.embedding)) / 1e9

    assert active("mixtral-8x7b") == pytest.approx(12.9, abs=0.05)
    assert active("qwen3-30b-a3b") == pytest.approx(3.3, abs=0.06)
    assert active("llama-4-scout") == pytest.approx(17.0, abs=0.2)
    assert active("gpt-oss-120b", embedding=False) == pytest.approx(5.13, abs=0.005)
    assert active("gpt-oss-20b", embedding=False) == pytest.approx(3.61, abs=0.005)
    assert main(["model", "list"]) == 0
    assert capsys.readouterr().out.count("the input-embedding table counted whole") == 1
