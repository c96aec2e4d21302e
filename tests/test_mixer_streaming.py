"""The StreamingLLM mixer plug-in (models/mixers/streaming.py): its own config fields reach it from a
layer file, its decode reads the sinks plus the window, and every command runs it, with nothing
outside its module naming it."""

import json

import pytest

from costmodel.keys import COST, ROLE, Role
from graphs.blocks import build_model
from graphs.cli import main
from models import get_model
from models.config import ModelConfigError
from models.mixers.streaming import StreamingSpec

#: d 256, H 4, H_kv 2, h 64: one StreamingLLM layer (4 sinks + a window of 124) and one full layer
LAYERS = {
    "name": "streamer",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "layer_types": ["streaming", "gqa"],
    "sink_token_length": 4,
    "streaming_window": 124,
}


@pytest.fixture
def layer_file(tmp_path):
    p = tmp_path / "streamer.json"
    p.write_text(json.dumps(LAYERS))
    return str(p)


def _attention(cfg, ctx):
    g = build_model(cfg, "decode", batch=2, ctx=ctx)
    return {n.split(".")[0]: d[COST] for n, d in g.nodes(data=True) if d.get(ROLE) == Role.ATTENTION}


@pytest.mark.parametrize(
    ("ctx", "keys"),
    [(1024, 128), (100, 100)],  # min(ctx, S + W) with S + W = 4 + 124 = 128
)
def test_decode_reads_the_sinks_and_the_window(layer_file, ctx, keys):
    cfg = get_model(layer_file)
    assert cfg.spec(StreamingSpec) == StreamingSpec(4, 124)
    cost = _attention(cfg, ctx)["streaming_dense"]
    # B 2: K and V of `keys` positions, 2 heads of 64 in bf16: 2 * 2 * keys * 2 * 64 * 2 B, plus
    # q read 2 * 4 * 64 * 2 B = 1024; scores and values 4 * B * H * keys * h FLOPs on the tensor cores
    assert cost.bytes_read() == 2 * 2 * keys * 2 * 64 * 2 + 1024
    assert cost.flops_on("tensor") == 4 * 2 * 4 * keys * 64
    full = _attention(cfg, ctx)["gqa_dense"]  # the full-attention layer reads all ctx positions
    assert full.bytes_read() == 2 * 2 * ctx * 2 * 64 * 2 + 1024


def test_the_fields_are_required(layer_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({k: v for k, v in LAYERS.items() if k != "streaming_window"}))
    with pytest.raises(ModelConfigError, match="StreamingLLM config is missing streaming_window"):
        get_model(str(bad))
    bad.write_text(json.dumps({**LAYERS, "sink_token_length": 0}))
    with pytest.raises(ModelConfigError, match="sink_token_length must be a positive integer"):
        get_model(str(bad))


def test_commands_run_a_streaming_model(layer_file, capsys):
    assert main(["decode", layer_file, "--ctx", "1024"]) == 0
    # held: the streaming layer 128 positions, the full one 1024, each 2 (K, V) * 2 * 64 * 2 B = 512 B
    # a position: (128 + 1024) * 512 = 589,824 B
    assert "cache held 589.82 KB at ctx 1024 (layers capped at 128 positions" in capsys.readouterr().out
    assert main(["prefill", layer_file, "--seq", "2048"]) == 0
    args = ["--requests", "10", "--rate", "5", "--prompt", "fixed:512", "--output", "fixed:32", "--quiet"]
    assert main(["simulate", layer_file, *args]) == 0
    assert "10 requests" in capsys.readouterr().out
