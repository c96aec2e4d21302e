"""Types and meanings checked at the config.json boundary (models.fields, models.quantization,
models.context): a boolean is JSON true/false, an integer a whole number in range, a float finite and
in range; GPTQ/AWQ bit widths and group sizes are what their packers pack; FP8 blocks are two positive
whole numbers. Each case was accepted (by truthiness, or silently costed) before the readers."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from models import ModelConfigError, config_from_hf_dict, param_counts
from models.context import context_limit

from .hf_family_configs import CONFIGS

#: values that are not JSON booleans: each was read by truthiness (``"abc"``, ``1.5``, ``inf``, ``1`` as
#: true; ``[]``, ``{}``, ``0`` as false)
NOT_BOOLEANS = ["abc", "false", [], 1.5, math.inf, {}, 1, 0]


def _catalog(name: str) -> dict:
    return json.loads(resources.files("models").joinpath("configs", f"{name}.json").read_text())


def _family(key: str) -> dict:
    return dict(CONFIGS[key][1])


#: (a config that loads, the boolean field the loader reads from it); every boolean the boundary reads
BOOLEAN_FIELDS = [
    ("llama-3.1-8b", "tie_word_embeddings"),
    ("llama-3.1-8b", "attention_bias"),
    ("gpt-oss-20b", "attention_bias"),
    ("mamba2-2.7b", "tie_word_embeddings"),
    ("mamba2-2.7b", "use_conv_bias"),
    ("mamba2-2.7b", "use_bias"),
    ("nemotron-h-8b", "use_conv_bias"),
    ("nemotron-h-8b", "mlp_bias"),
    ("jamba-v0.1", "mamba_conv_bias"),
    ("jamba-v0.1", "mamba_proj_bias"),
    ("gemma-3-27b", "tie_word_embeddings"),
    ("glm-4.5", "use_qk_norm"),
    ("minimax-m2", "use_qk_norm"),
    ("minimax-m2", "use_routing_bias"),
    ("phi", "qk_layernorm"),
    ("falcon", "new_decoder_architecture"),
    ("falcon", "multi_query"),
    ("falcon", "bias"),
    ("falcon", "parallel_attn"),
    ("falcon", "alibi"),
    ("granite", "mlp_bias"),
    ("cohere", "use_qk_norm"),
    ("cohere", "tie_word_embeddings"),
    ("starcoder2", "use_bias"),
    ("internlm2", "bias"),
]


def _load(source: str) -> dict:
    return _family(source) if source in CONFIGS else _catalog(source)


@pytest.mark.parametrize("source,field", BOOLEAN_FIELDS)
def test_boolean_fields_refuse_every_non_boolean(source, field):
    base = _load(source)
    for value in NOT_BOOLEANS:
        with pytest.raises(ModelConfigError, match=f"'{field}' must be true or false \\(a JSON boolean\\)"):
            config_from_hf_dict({**base, field: value}, "m")


#: quantization_config methods and their boolean fields (each read by truthiness before)
QUANT_BOOLEANS = [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "sym"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "lm_head"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "zero_point"),
    ({"quant_method": "bitsandbytes"}, "load_in_4bit"),
    ({"quant_method": "bitsandbytes"}, "load_in_8bit"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bnb_4bit_use_double_quant"),
]


@pytest.mark.parametrize("q,field", QUANT_BOOLEANS)
def test_quantization_booleans_refuse_every_non_boolean(q, field):
    base = _catalog("llama-3.1-8b")
    for value in NOT_BOOLEANS:
        cfg = {**base, "quantization_config": {**q, field: value}}
        with pytest.raises(
            ModelConfigError, match=f"quantization_config: config field '{field}' must be true or false"
        ):
            config_from_hf_dict(cfg, "m")


def test_compressed_tensors_symmetric_is_a_boolean():
    w = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": "yes"}
    q = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": w}}}
    with pytest.raises(ModelConfigError, match="'symmetric' must be true or false"):
        config_from_hf_dict({**_catalog("llama-3.1-8b"), "quantization_config": q}, "m")


def test_booleans_read_as_stated():
    """JSON true/false keep their meaning: the tied lm_head drops V*d = 128,256 * 4,096 parameters."""
    base = _catalog("llama-3.1-8b")
    untied = param_counts(config_from_hf_dict({**base, "tie_word_embeddings": False}, "m")).total
    tied = param_counts(config_from_hf_dict({**base, "tie_word_embeddings": True}, "m")).total
    assert untied - tied == 128256 * 4096
    # null reads as absent (the family's default), as transformers' config classes read it
    assert config_from_hf_dict({**base, "attention_bias": None}, "m").attention.qkv_bias is False


@pytest.mark.parametrize(
    "field,value",
    [
        ("hidden_size", 4096.5),
        ("hidden_size", True),
        ("hidden_size", "4096"),
        ("num_hidden_layers", -1),
        ("vocab_size", 2**31),
        ("num_key_value_heads", math.nan),
        ("head_dim", [128]),
        ("max_position_embeddings", "big"),
        ("max_position_embeddings", 0),
        ("max_position_embeddings", 131072.0),
        ("max_position_embeddings", math.inf),
        ("max_position_embeddings", True),
    ],
)
def test_integer_fields_are_whole_numbers_in_range(field, value):
    with pytest.raises(ModelConfigError, match=f"'{field}' must be an integer in"):
        config_from_hf_dict({**_catalog("llama-3.1-8b"), field: value}, "m")


@pytest.mark.parametrize("factor", ["8", math.nan, math.inf, -1, 0.5, True, 1e7])
def test_rope_factor_is_finite_and_at_least_one(factor):
    base = _catalog("llama-3.1-8b")
    rs = {"rope_type": "llama3", "factor": factor, "original_max_position_embeddings": 8192}
    with pytest.raises(
        ModelConfigError, match="rope_scaling: config field 'factor' must be a finite number in"
    ):
        config_from_hf_dict({**base, "rope_scaling": rs}, "m")


def test_rope_scaling_and_original_length_are_typed():
    with pytest.raises(ModelConfigError, match="'rope_scaling' must be an object or null"):
        context_limit({"max_position_embeddings": 4096, "rope_scaling": "yarn"})
    bad = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": -4096}
    with pytest.raises(ModelConfigError, match="'original_max_position_embeddings' must be an integer"):
        context_limit({"max_position_embeddings": 4096, "rope_scaling": bad})
    # Qwen2.5's card: 32,768 x YaRN 4 = 131,072
    assert (
        context_limit(
            {"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4}}
        ).tokens
        == 131072
    )


def _quant(q: dict, name: str = "llama-3.1-8b"):
    return config_from_hf_dict({**_catalog(name), "quantization_config": q}, "m")


@pytest.mark.parametrize("bits", [5, 6, 7])
def test_gptq_bits_are_what_its_packers_pack(bits):
    with pytest.raises(ModelConfigError, match=f"bits {bits} is not packed by GPTQ; allowed: 2, 3, 4, 8"):
        _quant({"quant_method": "gptq", "bits": bits, "group_size": 128})


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_gptq_packed_widths_load(bits):
    # b bits + one FP16 scale per 128 weights: b + 16/128
    assert _quant({"quant_method": "gptq", "bits": bits, "group_size": 128}).dtype == f"int{bits}_g128"


@pytest.mark.parametrize("bits", [2, 3, 5, 8])
def test_awq_packs_four_bits_only(bits):
    with pytest.raises(ModelConfigError, match=f"bits {bits} is not packed by AWQ; allowed: 4 bits"):
        _quant({"quant_method": "awq", "bits": bits, "group_size": 128})


@pytest.mark.parametrize("method", ["gptq", "awq"])
@pytest.mark.parametrize("group", [3, 7, 100, 1000, 4096])
def test_group_size_must_divide_every_quantised_input_width(method, group):
    """Llama-3.1-8B's linears read d = 4,096 (q/k/v, gate/up), H*h = 32*128 = 4,096 (o_proj) and
    I = 14,336 = 2^11 * 7 (down_proj): a group size must divide gcd(4096, 14336) = 2,048."""
    with pytest.raises(
        ModelConfigError,
        match=rf"group_size {group} does not divide .*allowed: -1 \(per channel\) or a divisor .*of 2048",
    ):
        _quant({"quant_method": method, "bits": 4, "group_size": group})


@pytest.mark.parametrize("group", [-1, 32, 64, 128, 2048])
def test_group_sizes_that_divide_load(group):
    cfg = _quant({"quant_method": "gptq", "bits": 4, "group_size": group})
    assert cfg.dtype == ("int4" if group == -1 else f"int4_g{group}")


def test_group_size_zero_and_below_minus_one_are_refused():
    for group in (0, -2, 1.5, "128"):
        with pytest.raises(ModelConfigError, match="group_size"):
            _quant({"quant_method": "gptq", "bits": 4, "group_size": group})


def test_group_size_checks_the_experts_and_the_moe_widths():
    """Qwen3-30B-A3B: d = 2,048, H*h = 32*128 = 4,096, expert width 768 = 2^8 * 3: 512 divides d and
    H*h but not 768, so the experts' down_proj is named."""
    with pytest.raises(
        ModelConfigError, match=r"group_size 512 does not divide experts\.down_proj's input width 768"
    ):
        _quant({"quant_method": "gptq", "bits": 4, "group_size": 512}, "qwen3-30b-a3b")
    assert (
        _quant({"quant_method": "gptq", "bits": 4, "group_size": 256}, "qwen3-30b-a3b").dtype == "int4_g256"
    )


@pytest.mark.parametrize(
    "blocks", [[math.nan, 128], [math.inf, 128], [-1, 128], [0, 128], [128], [128.0, 128], "x", 128]
)
def test_fp8_weight_block_size_is_two_positive_whole_numbers(blocks):
    with pytest.raises(ModelConfigError, match="weight_block_size must be two positive whole numbers"):
        _quant(
            {
                "quant_method": "fp8",
                "fmt": "e4m3",
                "activation_scheme": "dynamic",
                "weight_block_size": blocks,
            }
        )


def test_fp8_block_quantised_loads_and_its_scheme_is_read():
    q = {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
    }
    cfg = _quant(q)
    assert (cfg.dtype, cfg.matmul_dtype) == ("fp8_e4m3", "fp8_e4m3")
    with pytest.raises(ModelConfigError, match="activation_scheme 'sometimes' is not read"):
        _quant({**q, "activation_scheme": "sometimes"})


def test_bitsandbytes_refuses_both_widths():
    with pytest.raises(ModelConfigError, match="both load_in_4bit and load_in_8bit"):
        _quant({"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True})


def test_unmodelled_mamba_biases_are_refused_not_costed():
    """The Mamba-2 mixer is built with a conv bias and bias-free projections (Mamba2Config's defaults);
    a config stating otherwise is refused naming the field, where it was costed as the default."""
    with pytest.raises(ModelConfigError, match="use_conv_bias false is not modelled"):
        config_from_hf_dict({**_catalog("mamba2-2.7b"), "use_conv_bias": False}, "m")
    with pytest.raises(ModelConfigError, match="mamba_proj_bias true is not modelled"):
        config_from_hf_dict({**_catalog("jamba-v0.1"), "mamba_proj_bias": True}, "m")


def test_llama4_layer_lists_are_typed():
    base = _catalog("llama-4-scout")
    text = base["text_config"]
    n = text["num_hidden_layers"]
    bad_rope = {**text, "no_rope_layers": [2] * n}
    with pytest.raises(ModelConfigError, match="no_rope_layers must list 48 entries of 0"):
        config_from_hf_dict({**base, "text_config": bad_rope}, "m")
    with pytest.raises(ModelConfigError, match=r"moe_layers must be a list of layer indices in \[0, 48\)"):
        config_from_hf_dict({**base, "text_config": {**text, "moe_layers": [48]}}, "m")


@pytest.mark.parametrize("act", [["silu"], 1, True, {"name": "gelu"}])
def test_the_activation_is_a_name(act):
    with pytest.raises(ModelConfigError, match="'hidden_act' must be a string naming the activation"):
        config_from_hf_dict({**_catalog("llama-3.1-8b"), "hidden_act": act}, "m")


def test_a_gated_mlp_stays_gated_whatever_its_activation():
    """transformers' LlamaMLP is ``down(act(gate(x)) * up(x))`` for any ``hidden_act``
    (modeling_llama.py: ``ACT2FN[config.hidden_act]`` picks the function only), so a GELU
    activation is GeGLU with all three matrices: Llama-3.1-8B's 8,030,261,248 parameters either
    way (a review found ``gelu`` read as a plain two-matrix MLP: 6.15 G)."""
    silu = _catalog("llama-3.1-8b")
    gelu = {**silu, "hidden_act": "gelu"}
    a, b = config_from_hf_dict(silu, "silu"), config_from_hf_dict(gelu, "gelu")
    assert (a.mlp, b.mlp) == ("swiglu", "geglu")
    assert param_counts(a).total == param_counts(b).total == 8_030_261_248


@pytest.mark.parametrize("act", ["weird", "relu", "swigluoai", ""])
def test_an_activation_the_mlp_is_not_costed_with_is_refused(act):
    """Any other name once fell through to SwiGLU unsaid; now one line names the field, the value
    and the names known."""
    with pytest.raises(ModelConfigError) as exc:
        config_from_hf_dict({**_catalog("llama-3.1-8b"), "hidden_act": act}, "m")
    msg = str(exc.value)
    assert f"m: config field 'hidden_act' {act!r}" in msg and "known: silu, swish, gelu" in msg


@pytest.mark.parametrize("flag", ["--weight-dtype", "--kv-dtype", "--matmul-dtype"])
@pytest.mark.parametrize("value", ["bool", "complex128", "int64", "uint8"])
def test_a_dtype_option_takes_only_a_tensor_format_and_its_error_names_the_flag(capsys, flag, value):
    """``--weight-dtype bool`` once priced Llama-3.1-8B at one byte a weight, and a bad name's
    error named ``llama-3.1-8b.dtype`` (a review found both): the registry's index, mask and
    complex types are refused, each error naming the option."""
    from graphs.cli import main

    assert main(["decode", "llama-3.1-8b", flag, value]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"costmodel: error: {flag} {value!r}: {value} is not a format")
        and err.count("\n") == 1
    )
    assert main(["decode", "llama-3.1-8b", flag, "int3"]) == 2
    err = capsys.readouterr().err
    assert f"{flag} 'int3': unknown dtype 'int3'; allowed: bf16, fp16" in err and "bool" not in err


def test_nemotron_h_mlp_activation_keeps_its_ungated_shape_or_is_refused():
    """transformers' NemotronHMLP is up_proj, act, down_proj for any ``mlp_hidden_act``: a
    squared ReLU (the released configs) or a GELU keeps that two-matrix shape, another name is
    refused (it once fell through to a gated SwiGLU; an independent review found it)."""
    base = _catalog("nemotron-h-8b")
    assert config_from_hf_dict(base, "n").mlp == "relu2"
    assert config_from_hf_dict({**base, "mlp_hidden_act": "gelu_pytorch_tanh"}, "n").mlp == "gelu"
    with pytest.raises(
        ModelConfigError, match="n: config field 'mlp_hidden_act' 'silu' is not an activation"
    ):
        config_from_hf_dict({**base, "mlp_hidden_act": "silu"}, "n")


def test_a_gemma_activation_error_names_its_own_field():
    """Gemma's configs name the activation ``hidden_activation``; an unknown one is refused
    naming that field, not ``hidden_act``."""
    base = _catalog("gemma-3-27b")  # its text model's config under text_config
    base = {**base, "text_config": {**base["text_config"], "hidden_activation": "weird"}}
    with pytest.raises(ModelConfigError, match="config field 'hidden_activation' 'weird'"):
        config_from_hf_dict(base, "g")


@pytest.mark.parametrize(("command", "flag"), [("sweep", "--weight-dtypes"), ("search", "--kv-dtypes")])
def test_the_plural_dtype_options_refuse_as_the_singular_ones(capsys, command, flag):
    """``sweep --weight-dtypes bool`` and ``search --weight-dtypes int64`` still said
    ``llama-3.1-8b.dtype: ...`` after the singular options were fixed (an independent review
    found it): each entry is checked as a model format, the error naming the option."""
    from graphs.cli import main

    assert main([command, "llama-3.1-8b", flag, "bf16,bool"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costmodel: error: {flag} 'bool': bool is not a format") and err.count("\n") == 1


@pytest.mark.parametrize("value", [5, 0, True, ["noaux_tc"], {}, "noaux-tc", "NOAUX_TC"])
def test_topk_method_is_one_of_deepseeks_names(value):
    """A fuzz run (seeds 1-3) found ``topk_method: 5`` (or true, a list, a misspelling) read as
    "not noaux_tc": DeepSeek-V3 lost its router bias, 256 experts x 58 MoE layers = 14,848
    parameters, unsaid. The field now names its value and the methods DeepSeek's code has."""
    with pytest.raises(ModelConfigError) as exc:
        config_from_hf_dict({**_catalog("deepseek-v3"), "topk_method": value}, "ds")
    msg = str(exc.value)
    assert "'topk_method' must be one of greedy, gready, group_limited_greedy, noaux_tc" in msg
    assert f"got {value!r}" in msg


def test_topk_method_noaux_tc_adds_one_bias_per_routed_expert():
    """noaux_tc's e_score_correction_bias: one value per routed expert on each MoE layer (the
    config's 256 experts on its 61 - 3 dense = 58 MoE layers); greedy has none, and an absent
    field reads as no bias (V2's configs)."""
    cfg = _catalog("deepseek-v3")
    layers = cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]
    with_bias = param_counts(config_from_hf_dict(cfg, "ds")).total
    for method in ("greedy", "group_limited_greedy", None):
        other = config_from_hf_dict({**cfg, "topk_method": method}, "ds")
        assert with_bias - param_counts(other).total == 256 * layers == 14848
