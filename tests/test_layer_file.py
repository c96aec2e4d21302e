"""Layer files (issue 43 item 5): a model described by ``layer_types`` and flat mixer fields, without
a Hugging Face ``model_type``, reaches the command line through the model argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.cli import main
from models import ModelConfig, get_model, model_names
from models.config import ModelConfigError
from models.layer_file import config_from_layer_file, to_layer_file
from models.layers import LayerSpec
from models.params import param_counts

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hybrid-layers.json"

# Parameters of the example by hand (d=256, H=4, H_kv=2, h=64, I=512, V=1000; bf16, 2 bytes each):
#   attention layer (sliding, gqa): q 256*256 + k 256*128 + v 256*128 + o 256*256 = 196,608;
#     SwiGLU MLP 3*256*512 = 393,216; two RMSNorms 2*256 = 512            -> 590,336 each
#   Mamba-2 layer (H_s=8, P=32, N=16, G=1, K=4, d_in=256, no MLP): in_proj 256*(2*256+2*16+8) = 141,312,
#     conv (256+32)*(4+1) = 1,440, A/D/dt_bias 3*8 = 24, gated norm 256, out_proj 256*256 = 65,536,
#     one RMSNorm 256                                                      -> 208,824
#   embedding 1000*256 + untied lm_head 1000*256 + final norm 256           -> 512,256
PARAMS = 2 * 590_336 + 208_824 + 512_256  # = 1,901,752


def test_the_example_file_builds_the_hybrid_model() -> None:
    cfg = get_model(str(EXAMPLE))
    assert cfg.name == "hybrid-demo" and cfg.max_context == 8192
    assert cfg.layer_types == (LayerSpec("sliding"), LayerSpec("ssm", "none"), LayerSpec("gqa"))
    assert cfg.attention.sliding_window == 128 and cfg.ssm is not None and cfg.ssm.ssm_num_heads == 8
    assert param_counts(cfg).total == PARAMS == 1_901_752
    same = ModelConfig(
        "hybrid-demo", 256, 3, 4, 512, 1000, num_key_value_heads=2, head_dim=64, max_context=8192,
        layer_types=(LayerSpec("sliding"), LayerSpec("ssm", "none"), LayerSpec("gqa")),
        sliding_window=128, ssm_state_size=16, ssm_num_heads=8, ssm_head_dim=32,
        source=str(EXAMPLE),
    )  # fmt: skip
    assert cfg == same


def test_decode_runs_on_a_layer_file_through_the_model_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["decode", str(EXAMPLE), "--json", "--ctx", "1024"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["model"] == "hybrid-demo"
    assert rep["near_far_memory"]["weights_bytes"] == 2 * PARAMS  # bf16
    assert main(["decode", str(EXAMPLE), "--ctx", "1024"]) == 0
    out = capsys.readouterr().out
    # KV per token per layer 2 (K, V) * 2 heads * 64 * 2 bytes = 512 B: the gqa layer 1024 * 512 =
    # 524,288, the sliding one 128 * 512 = 65,536; the Mamba-2 state 8*32*16 fp32 = 16,384 B and its
    # conv state (4-1)*(256+32) bf16 = 1,728 B (18,112 B): 607,936 B in all
    assert "cache held 607.94 KB at ctx 1024" in out and "recurrent state 18.11 KB" in out


def test_a_new_field_reaches_the_model_and_context_limits_apply(tmp_path: Path) -> None:
    data = json.loads(EXAMPLE.read_text())
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({**data, "name": "mine", "sliding_window": 64}))
    assert get_model(str(path)).attention.sliding_window == 64
    assert main(["decode", str(path), "--ctx", "9000"]) == 2  # beyond max_position_embeddings 8192


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"sliding_windw": 64},
            "layer file field 'sliding_windw' is not a ModelConfig field or a registered mixer's",
        ),
        ({"sliding_window": "64"}, "layer file field 'sliding_window' must be a whole number, got '64'"),
        ({"tie_word_embeddings": "yes"}, "layer file field 'tie_word_embeddings' must be true or false"),
        ({"layer_types": ["gqa", "swirl"]}, "layer mixer 'swirl' not allowed; allowed: "),
        ({"layer_types": ["gqa", 3]}, r"layer_types\[1\] must be a mixer name or an object"),
        # a review: an object without 'mixer' became gqa silently (only the MLP has a default)
        (
            {"layer_types": ["gqa", {"mlp": "dense"}]},
            r"layer_types\[1\] must be a mixer name or an object with a 'mixer'",
        ),
        ({"layer_types": []}, "layer_types' must be a list of 1 to 4096 layers"),
        ({"max_context": 10}, "the limit is max_position_embeddings"),
        ({"sliding_window": None}, "sliding layers need sliding_window"),
        ({"num_hidden_layers": 4}, "layer_types has 3 entries but num_hidden_layers is 4"),
        # a config.json's 32-bit bound (2**31 - 1) holds in a layer file too: 10**30 was priced
        # (a model on 1.9e50 devices), a 0 x 0 FP8 scale block and a source with an escape read
        ({"hidden_size": 10**30}, "'hidden_size' must be a whole number of at most 2147483647, got 1000"),
        ({"sliding_window": 2**31}, "'sliding_window' must be a whole number of at most 2147483647"),
        ({"mtp_layers": 10**12}, "'mtp_layers' must be a whole number of at most 2147483647"),
        (
            {"weight_scale_block": [0, 0]},
            r"'weight_scale_block' must be two whole numbers \[rows, columns\] from 1",
        ),
        ({"weight_scale_block": [128, 10**30]}, r"'weight_scale_block' must be two whole numbers"),
        ({"source": "x\x1b[2J"}, "'source' must be a string of printable characters"),
        # a model name is at most 500 characters wherever it comes from (models.sources.MAX_NAME):
        # a 100,000-character name was printed whole in every report line that names the model
        (
            {"name": "n" * 501},
            "'name' must be a non-empty string of printable characters .*, at most 500 of them",
        ),
        ({"source": "s" * 501}, "'source' must be a string of printable characters .*, at most 500 of them"),
    ],
)
def test_bad_files_are_refused_in_one_line(change: dict[str, object], message: str) -> None:
    data = {**json.loads(EXAMPLE.read_text()), **change}
    with pytest.raises(ModelConfigError, match=message):
        config_from_layer_file(data, "bad")


def test_a_layer_file_and_a_config_json_share_the_32_bit_bound() -> None:
    """The same hidden_size 2**31 is refused by both readers, and 2**31 - 1 passes the layer file's."""
    from models.hf import config_from_hf_dict

    hf = {"model_type": "llama", "hidden_size": 2**31, "num_attention_heads": 4, "num_hidden_layers": 2,
          "intermediate_size": 128, "vocab_size": 100}  # fmt: skip
    with pytest.raises(ModelConfigError, match=r"'hidden_size' must be an integer in \[0, 2147483647\]"):
        config_from_hf_dict(hf, "hf")
    with pytest.raises(ModelConfigError, match="'hidden_size' must be a whole number of at most 2147483647"):
        config_from_layer_file({**json.loads(EXAMPLE.read_text()), "hidden_size": 2**31}, "lf")
    big = config_from_layer_file({**json.loads(EXAMPLE.read_text()), "vocab_size": 2**31 - 1}, "lf")
    assert big.vocab_size == 2_147_483_647


def test_a_refusal_reaches_the_command_line_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**json.loads(EXAMPLE.read_text()), "ssm_state_size": 0}))
    assert main(["decode", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "ssm_state_size" in err and "\n" not in err and "Traceback" not in err


def test_model_check_reads_a_layer_file_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "check", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    assert head.endswith(": a layer file -> read as given") and "None" not in head  # no model_type 'None'
    assert "fields ignored (0)" in out
    assert "parameters 1.90 M total" in out  # PARAMS above


def test_model_check_of_a_refused_layer_file_names_no_model_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**json.loads(EXAMPLE.read_text()), "ssm_state_size": 0}))
    assert main(["model", "check", str(path)]) == 2  # refused: bad input, as `decode` above
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "bad: a layer file -> refused"
    assert err.count("\n") == 1 and "ssm_state_size" in err


@pytest.mark.parametrize("model", model_names())
def test_every_catalog_config_round_trips_through_a_layer_file(model: str) -> None:
    cfg = get_model(model)
    text = json.dumps(to_layer_file(cfg))
    back = config_from_layer_file(json.loads(text), "unused")  # the file names itself
    assert back == cfg and repr(back) == repr(cfg)
    assert json.dumps(to_layer_file(back)) == text  # byte-identical when written again


@pytest.mark.parametrize("model", ["jamba-v0.1", "deepseek-v3"])
def test_a_layer_file_decodes_as_its_catalog_model(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{model}.json"
    path.write_text(json.dumps(to_layer_file(get_model(model))))
    argv = ["--json", "--tp", "8", "--batch", "16", "--ignore-capacity"]
    assert main(["decode", model, *argv]) == 0
    catalog = capsys.readouterr().out
    assert main(["decode", str(path), *argv]) == 0
    from_file, said = json.loads(capsys.readouterr().out), json.loads(catalog)
    # the same document, but for what the file's run said on stderr (kept in --json's notes):
    # a layer file of a bf16 model states no dtype (jamba's), so its bf16 is an assumption the
    # catalog's config states; deepseek-v3's states its fp8 and says nothing more
    catalog_notes = said.pop("notes", [])  # once: a pop inside the comprehension ran per note
    extra = [n for n in from_file.pop("notes", []) if n not in catalog_notes]
    assert from_file == said
    assert len(extra) == (model == "jamba-v0.1")
    assert all("the file states no dtype: its unquantised weights" in n for n in extra)
