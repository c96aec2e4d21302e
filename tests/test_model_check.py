"""``costmodel model check`` and ``--assume-family`` (issue 47, item 3): the loader's reading of a
config.json recorded from the loader itself, the nearest family by field names, and the structural
fallback for an unknown ``model_type``, said in every output."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs.cli import main
from models import ModelConfigError, config_from_hf_dict, param_counts
from models.catalog import MODELS
from models.check import MIN_SIMILARITY, family_fit, inspect_config, nearest_families, read_as
from models.fieldlog import RecordingConfig
from models.resolver import config_data

from .hf_family_configs import CONFIGS, stored_weights_on_meta

#: Llama-3.1-8B's config.json as published (meta-llama/Llama-3.1-8B, config.json), renamed: a
#: day-0 release that is a Llama under a new model_type
ACME = {
    "architectures": ["AcmeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "acme_llm",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 128256,
}

#: an RWKV-6 config (RWKV/v6-Finch-3B-HF, config.json fields): a recurrent architecture no family has
RWKV = {
    "architectures": ["Rwkv6ForCausalLM"],
    "attention_hidden_size": 2560,
    "bos_token_id": 0,
    "context_length": 4096,
    "eos_token_id": 0,
    "head_size": 64,
    "head_size_divisor": 8,
    "hidden_size": 2560,
    "intermediate_size": None,
    "layer_norm_epsilon": 1e-05,
    "model_type": "rwkv6",
    "num_hidden_layers": 32,
    "rescale_every": 6,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 65536,
}

# Llama-3.1-8B by hand: embedding and lm_head 2 * 128256 * 4096 = 1,050,673,152; per layer q and o
# 2 * 4096^2, k and v 2 * 4096 * 1024 (8 KV heads of 128), SwiGLU 3 * 4096 * 14336, two norms 2 * 4096:
# 33,554,432 + 8,388,608 + 176,160,768 + 8,192 = 218,112,000; x 32 = 6,979,584,000; final norm 4,096.
LLAMA_8B_PARAMS = 1_050_673_152 + 32 * 218_112_000 + 4_096  # = 8,030,261,248 (model card: 8.03B)

#: what transformers' LlamaConfig builds Llama's weights from (LlamaForCausalLM: embed_tokens, q/k/v/o,
#: gate/up/down, norms, lm_head), the fields the Llama mapping must read
LLAMA_SHAPE_FIELDS = {
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
    "tie_word_embeddings",
    "attention_bias",
    "hidden_act",
}


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def acme_file(tmp_path):
    p = tmp_path / "acme.json"
    p.write_text(json.dumps(ACME))
    return str(p)


def test_renamed_llama_refused_naming_the_nearest_family_and_the_flag():
    with pytest.raises(ModelConfigError) as e:
        config_from_hf_dict(ACME, "acme")
    msg = str(e.value)
    assert "\n" not in msg
    assert "model_type 'acme_llm' is not supported" in msg
    assert "its fields fit family llama" in msg and "--assume-family llama" in msg


def test_renamed_llama_with_assumed_family_counts_as_llama():
    cfg = config_from_hf_dict(ACME, "acme", assume_family="llama")
    assert param_counts(cfg).total == LLAMA_8B_PARAMS
    llama = config_from_hf_dict({**ACME, "model_type": "llama"}, "llama")
    assert param_counts(cfg) == param_counts(llama)


def test_renamed_llama_count_equals_transformers_llama_on_meta():
    """Every parameter of transformers' LlamaForCausalLM built from the same fields on the meta device."""
    stored = stored_weights_on_meta("LlamaConfig", "LlamaForCausalLM", {**ACME, "model_type": "llama"})
    assert stored == LLAMA_8B_PARAMS
    assert param_counts(config_from_hf_dict(ACME, "acme", assume_family="llama")).total == stored


def test_fields_read_come_from_the_loader_and_hold_what_llama_needs():
    rep = inspect_config(ACME, "acme", assume_family="llama")
    assert rep.family == "llama" and rep.assumed and rep.refused is None
    read = set(rep.read)
    assert LLAMA_SHAPE_FIELDS <= read
    # rope scaling sets the context limit (models.context): 8192 x 8 = 65,536 < 131,072, read anyway
    assert {
        "max_position_embeddings",
        "rope_scaling.factor",
        "rope_scaling.original_max_position_embeddings",
    } <= read
    ignored = {p for p, _, _ in rep.ignored}
    # no family prices these: positions' frequencies, token ids, init and eps
    assert {"rope_theta", "bos_token_id", "eos_token_id", "initializer_range", "rms_norm_eps"} <= ignored
    assert "rope_scaling.low_freq_factor" in ignored
    assert not read & ignored
    assert read | ignored | {"model_type", "rope_scaling"} >= set(ACME)


def test_recording_changes_no_model():
    """The recording view (and the loader's layered copies) give the same ModelConfig as the plain dict,
    for every catalog config and every published family config of the tests."""
    configs = [(k, config_data(k)) for k in MODELS] + [(k, data) for k, (_, data) in CONFIGS.items()]
    for key, data in configs:
        assert config_from_hf_dict(RecordingConfig(data), key) == config_from_hf_dict(data, key), key


def test_every_catalog_config_maps_as_its_own_family():
    for key in ("llama-3.1-8b", "gemma-3-27b", "deepseek-v3", "qwen3.5-397b-a17b", "nemotron-h-8b"):
        data = config_data(key)
        rep = inspect_config(data, key, mtp=MODELS[key].mtp)
        assert rep.family == data["model_type"] and not rep.assumed and rep.refused is None, key
        assert rep.read and set(rep.read).isdisjoint(p for p, _, _ in rep.ignored)


def test_new_architecture_refused_with_nearest_family_not_close_enough():
    with pytest.raises(ModelConfigError) as e:
        config_from_hf_dict(RWKV, "rwkv")
    msg = str(e.value)
    assert "\n" not in msg
    assert "model_type 'rwkv6' is not supported; nearest family" in msg
    assert "is not close enough" in msg and "num_attention_heads" in msg
    best = nearest_families(RWKV)[0]
    assert not best.fits and best.similarity < MIN_SIMILARITY


def test_a_window_the_assumed_family_would_ignore_is_refused():
    """Mistral-7B-v0.1 states a 4096-token window: read as llama the window would vanish."""
    cfg = {**ACME, "sliding_window": 4096}
    with pytest.raises(
        ModelConfigError, match=r"does not fit family llama: llama would ignore sliding_window 4096"
    ):
        config_from_hf_dict(cfg, "acme", assume_family="llama")
    phi3 = config_from_hf_dict(cfg, "acme", assume_family="phi3")  # phi3 reads it: every layer a window
    assert phi3.attention.sliding_window == 4096


@pytest.mark.parametrize(
    ("cfg", "family", "match"),
    [
        (
            config_data("qwen3-8b"),
            "llama",
            r"model_type 'qwen3' is mapped as itself; --assume-family \(llama\)",
        ),
        ({**ACME, "model_type": "minimax"}, "llama", r"model_type 'minimax' is a known architecture"),
        (ACME, "gpt2", r"--assume-family 'gpt2' is not a family the loader maps"),
        (ACME, "mixtral", r"does not fit family mixtral: mixtral cannot read it .*'num_local_experts'"),
    ],
)
def test_assumption_refusals_are_one_line(cfg, family, match):
    with pytest.raises(ModelConfigError, match=match) as e:
        config_from_hf_dict(cfg, "m", assume_family=family)
    assert "\n" not in str(e.value)


def test_a_family_reading_its_own_type_is_no_assumption():
    data = config_data("qwen3-8b")
    assert config_from_hf_dict(data, "q", assume_family="qwen3") == config_from_hf_dict(data, "q")


def test_read_as_records_without_changing_the_input():
    got = read_as(ACME, "llama")
    assert got.error is None and ACME["model_type"] == "acme_llm"
    assert "hidden_size" in got.read and "bos_token_id" not in got.read


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"x_[a-z]{1,8}", fullmatch=True),
        st.one_of(st.integers(-5, 10**6), st.booleans(), st.text(max_size=5), st.none()),
        max_size=4,
    )
)
def test_fields_no_family_reads_change_nothing(extra):
    """Adding fields no mapping reads never changes the fit, the fields read or the count."""
    cfg = {**ACME, **extra}
    fit = family_fit(cfg, "llama", "acme")
    assert fit.fits and fit.similarity == 1.0
    assert set(read_as(cfg, "llama").read) == set(read_as(ACME, "llama").read)
    assert param_counts(config_from_hf_dict(cfg, "acme", assume_family="llama")).total == LLAMA_8B_PARAMS


def test_cli_decode_says_the_assumption_and_refuses_without_it(capsys, acme_file):
    code, out, err = _run(
        capsys, "decode", acme_file, "--device", "h100-sxm", "--batch", "1", "--ctx", "1024"
    )
    assert code == 2 and err.count("\n") == 1 and "--assume-family llama" in err
    note = "costmodel: note: assumed family llama for model_type 'acme_llm' (--assume-family)"
    for _ in range(2):  # the second answer comes from the cached card: said again
        code, out, err = _run(
            capsys, "decode", acme_file, "--device", "h100-sxm", "--batch", "1", "--ctx", "1024",
            "--assume-family", "llama",
        )  # fmt: skip
        assert code == 0 and err.count(note) == 1
        assert out.startswith("acme decode on h100-sxm")
    # the card stored under the assumption never answers the command without it
    code, out, err = _run(
        capsys, "decode", acme_file, "--device", "h100-sxm", "--batch", "1", "--ctx", "1024"
    )
    assert code == 2 and "is not supported" in err


def test_cli_model_check_json_of_a_catalog_model(capsys):
    code, out, _ = _run(capsys, "model", "check", "llama-3.2-1b", "--framework", "vllm", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["family"] == "llama" and not doc["assumed"] and doc["refused"] is None
    # Llama-3.2-1B: d 2048, 16 layers, 32 heads and 8 KV heads of 64, SwiGLU 8192, vocab 128256, tied:
    # 128256 * 2048 + 16 * (2 * 2048^2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048) + 2048 (model card 1.24B)
    per_layer = 2 * 2048**2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048
    assert doc["exact"]["params_total"] == 128256 * 2048 + 16 * per_layer + 2048 == 1_235_814_400
    # one token's K and V in every layer: 2 * 16 layers * 8 heads * 64 * 2 bytes (bf16) = 32,768
    assert doc["exact"]["kv_bytes_per_token"] == "32768"
    dec = doc["kernels"]["vllm"]["decode"]
    assert {g["family"] for g in dec["families"]} >= {"gemm", "generation_attention"}
    assert abs(dec["measured_share"] + dec["neighbour_share"] + dec["bound_share"] - 1) < 1e-3


def test_cli_model_check_of_refused_configs(capsys, tmp_path, acme_file):
    """A refused config is bad input: exit 2 as every command's (the help's exit codes), the
    report still printed, and the reason the report's own ``refused`` field, one line on stderr
    (``model check`` exited 0 on a config every other command refuses)."""
    code, out, err = _run(capsys, "model", "check", acme_file, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["family"] is None and "\n" not in doc["refused"]
    assert err == f"costmodel: error: refused: {doc['refused']}\n"
    assert doc["nearest"][0] == {"family": "llama", "similarity": 1.0, "fits": True, "why_not": None}
    assert doc["exact"] == {} and doc["kernels"] == {}
    # the command the refusal's message points at refuses it with the same reason, also exit 2
    code_decode, _, err_decode = _run(capsys, "decode", acme_file)
    assert code_decode == 2 and "is not supported" in err_decode and "is not supported" in err
    rwkv = tmp_path / "rwkv.json"
    rwkv.write_text(json.dumps(RWKV))
    code, out, err = _run(capsys, "model", "check", str(rwkv))
    assert code == 2 and "-> refused" in out and "is not close enough" in out
    assert err.count("\n") == 1 and "is not close enough" in err
    assert "rescale_every" in out and "read by no family" in out


def test_cli_model_check_exit_codes_are_in_its_help(capsys):
    code, out, _ = _run(capsys, "model", "check", "--help")
    text = " ".join(out.split())
    assert code == 0 and "Exit code 0 when a family" in text and "2 when it is refused" in text


def test_cli_model_check_reports_a_misfit_assumption(capsys, acme_file):
    code, out, err = _run(capsys, "model", "check", acme_file, "--assume-family", "mixtral", "--json")
    doc = json.loads(out)
    assert code == 2 and doc["family"] is None and not doc["assumed"]
    assert doc["refused"].endswith(
        "mixtral cannot read it (config.json is missing required field 'num_local_experts')"
    )
    assert err == f"costmodel: error: refused: {doc['refused']}\n"
    # the family that fits it is read: exit 0, nothing on stderr but the assumption's note
    code, out, err = _run(capsys, "model", "check", acme_file, "--assume-family", "llama", "--json")
    assert code == 0 and json.loads(out)["family"] == "llama" and "error" not in err


def test_a_refusal_shows_a_nested_fields_value_not_the_wrapper(tmp_path):
    """The loader reads a config through a recording wrapper; a nested field the nearest family
    would ignore is named with the file's own value (here gemma-3-27b's rope_scaling, as written
    in models/configs/gemma-3-27b.json), never the wrapper's repr."""
    import json
    from pathlib import Path

    from graphs.serving.analysis.model_check import check_model

    src = Path(__file__).resolve().parent.parent / "models" / "configs" / "gemma-3-27b.json"
    cfg = json.loads(src.read_text())
    cfg["model_type"] = "not_a_family"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(cfg))
    r = check_model(str(path))
    assert r.family is None
    assert "RecordingConfig" not in r.why
    assert f"rope_scaling {cfg['text_config']['rope_scaling']!r}" in r.why


def test_reading_a_deep_config_as_every_family_builds_no_per_layer_list():
    """``model check`` reads a config as every family (the nearest ones); num_hidden_layers may be
    up to 2**31 - 1, so no family may build a per-layer list past MAX_PATTERN_LAYERS (diffllama
    built one: a billion-layer Llama grew past 22 GB). The Llama reading stays uniform."""
    import tracemalloc

    from models.hf_families import MAX_PATTERN_LAYERS

    deep = {**ACME, "model_type": "llama", "num_hidden_layers": 10**6}
    tracemalloc.start()
    try:
        rep = inspect_config(deep, "deep")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rep.family == "llama" and rep.model is not None and rep.model.layer_types is None
    assert peak < 64 * 2**20  # a million LayerSpecs alone take more
    got = read_as({**deep, "num_hidden_layers": 10**9}, "diffllama", "deep")
    assert got.model is None and got.error is not None
    assert "num_hidden_layers" in got.error and str(MAX_PATTERN_LAYERS) in got.error
