"""Context limits from config.json (max_position_embeddings, rope_scaling) and the CLI's one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import models
from models import ModelConfigError, config_from_hf_dict, get_model
from models.context import ContextLimitError, check_context, context_limit

BASE = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 100,
}


def test_limits_of_rope_scaling_kinds():
    # no scaling: the field itself
    assert context_limit({"max_position_embeddings": 4096}).tokens == 4096
    # Qwen2.5 model card: 32,768 tokens, YaRN factor 4 -> 131,072
    yarn = {"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4.0}}
    assert context_limit(yarn).tokens == 131072
    # Llama-3.1 config: the field already holds the extended length (8,192 x 8 = 65,536 < 131,072)
    llama3 = {
        "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    }
    assert context_limit(llama3).tokens == 131072
    # DeepSeek-V3 config: yarn 40 x 4,096 = 163,840, equal to the field
    ds = {
        "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    }
    assert context_limit(ds).tokens == 163840
    assert context_limit({}) is None
    # a limit that is not a whole number >= 1 is refused naming the field (it once read as "no limit")
    with pytest.raises(ModelConfigError, match=r"'max_position_embeddings' must be an integer.*got 'big'"):
        context_limit({"max_position_embeddings": "big"})


def test_config_carries_the_limit_and_checks_it():
    cfg = config_from_hf_dict({**BASE, "max_position_embeddings": 2048}, "toy")
    assert cfg.max_context == 2048
    cfg.check_context(2048)
    with pytest.raises(ContextLimitError, match=r"toy: ctx 2,049 exceeds the model's context limit of 2,048"):
        cfg.check_context(2049)
    assert get_model("llama-2-7b").max_context == 4096
    assert get_model("llama-3.1-8b").max_context == 131072
    assert config_from_hf_dict(BASE, "nolimit").max_context is None


def test_allow_warns_instead(capsys):
    check_context("m", 10, 11, "--ctx", allow=True)
    assert "warning: m: --ctx 11 exceeds" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["decode", "llama-2-7b", "--ctx", "100000"],
            "llama-2-7b: --ctx 100,000 exceeds the model's context limit of 4,096",
        ),
        (
            ["prefill", "mistral-7b", "--seq", "40000"],
            "mistral-7b: --seq 40,000 exceeds the model's context limit of 32,768",
        ),
        (["ledger", "llama-2-7b", "--ctx", "8192"], "--ctx 8,192 exceeds"),
    ],
)
def test_cli_one_line_error(argv, message):
    r = subprocess.run([sys.executable, "-m", "costmodel", *argv], capture_output=True, text=True)
    assert r.returncode == 2
    assert message in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_cli_override():
    r = subprocess.run(
        [sys.executable, "-m", "costmodel", "decode", "llama-2-7b", "--ctx", "8192", "--allow-long-context"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "warning:" in r.stderr and "TPOT bound" in r.stdout


def test_llama3_rope_scaling_keeps_the_stated_limit():
    """llama3 rope scaling rescales the frequencies of the original 8,192-token model; the served
    limit is max_position_embeddings (transformers' llama3 parameters, vLLM's max_model_len).
    Llama-3.2-1B's config.json (meta-llama/Llama-3.2-1B) states 131,072 with factor 32: it was
    read as 8,192 x 32 = 262,144. Llama-3.1-8B states 131,072, Llama-4-Scout 10,485,760 (more than
    8,192 x 16 = 131,072): both unchanged."""
    d = {
        "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "original_max_position_embeddings": 8192},
    }
    assert context_limit(d).tokens == 131_072
    assert get_model("llama-3.2-1b").max_context == 131_072
    assert get_model("llama-3.1-8b").max_context == 131_072
    assert get_model("llama-4-scout").max_context == 10_485_760
    # yarn with an original length is unchanged: the larger of the field and original x factor
    yarn = {**d, "rope_scaling": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 8192}}
    assert context_limit(yarn).tokens == 262_144


def test_a_bad_limit_field_names_the_file_given(tmp_path, capsys):
    """The command line's context check read the file's fields as 'config.json:' whatever the
    file was called."""
    import json

    from graphs.cli import main

    base = json.loads((Path(models.__file__).parent / "configs" / "llama-3.1-8b.json").read_text())
    for field, value, message in (
        ("max_position_embeddings", "big", "config field 'max_position_embeddings' must be an integer"),
        ("rope_scaling", "yarn", "config field 'rope_scaling' must be an object or null"),
    ):
        path = tmp_path / "mymodel.json"
        path.write_text(json.dumps({**base, field: value}))
        assert main(["decode", str(path), "--ctx", "100"]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{path}: {message}" in err and "config.json" not in err and len(err.splitlines()) == 1
