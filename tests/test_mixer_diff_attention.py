"""The differential-attention mixer plug-in (models/mixers/diff_attention.py), end to end.

Parameter counts against transformers' DiffLlamaForCausalLM (built on the meta device) and a
hand count; the decode step's extra work over the same-shaped Llama by hand (one more attention
call per layer); the config checks; and the command line's decode, prefill, simulate and
--predict on a DiffLlama config.json, with nothing outside the plug-in's module naming it.
"""

import json
import math

import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.keys import COST, ROLE, Role
from graphs.blocks import build_model
from graphs.cli import main
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.mixed import mixed_step
from models import param_counts
from models.hf import config_from_hf_dict

#: a small DiffLlama: d 256, 3 layers, H 8, H_kv 4 (head_dim 32), I 512, V 1000, biased attention
TOY = {
    "model_type": "diffllama",
    "vocab_size": 1000,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 3,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "attention_bias": True,
    "hidden_act": "silu",
    "max_position_embeddings": 2048,
}
#: transformers' DiffLlamaConfig defaults but GQA (d 2048, 16 layers, H 32, H_kv 8, I 8192, V 32000)
BASE = {
    **TOY,
    "vocab_size": 32000,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attention_bias": False,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


def test_parameter_count_by_hand():
    # per layer: q 256*256+256, k and v 128*256+128 each, o 256*256+256 (attention_bias: all four),
    # lambda 4*32, MLP 3*512*256, two norms 2*256:
    # 65792 + 2*32896 + 65792 + 128 + 393216 + 512 = 591232; x 3 layers = 1773696
    # + embedding 1000*256 + lm_head 1000*256 + final norm 256 = 2285952
    assert param_counts(config_from_hf_dict(TOY, "toy")).total == 2285952


@pytest.mark.parametrize("hf", [TOY, BASE], ids=["toy", "base"])
def test_parameter_count_equals_transformers(hf):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in hf.items() if k not in ("model_type", "torch_dtype")}
    with torch.device("meta"):
        model = transformers.DiffLlamaForCausalLM(transformers.DiffLlamaConfig(**fields))
    assert param_counts(config_from_hf_dict(hf, "m")).total == sum(p.numel() for p in model.parameters())


def test_decode_is_llama_plus_one_attention_call_per_layer():
    """Same shapes, model_type llama vs diffllama: the tensor FLOPs differ by one more attention
    call per layer. One decode query over ctx keys scores P = ctx pairs; a call is 2 B H P (h + h):
    3 layers * 2 * B 2 * H 8 * ctx 100 * 64 = 614400."""
    diff = config_from_hf_dict(TOY, "diff")
    llama = config_from_hf_dict({**TOY, "model_type": "llama"}, "llama")
    kw = dict(batch=2, ctx=100)

    def tensor_flops(cfg):
        g = build_model(cfg, "decode", **kw)
        return sum(d[COST].flops_on("tensor") * d["repeat"] for _, d in g.nodes(data=True))

    assert tensor_flops(diff) - tensor_flops(llama) == 614400
    g = build_model(diff, "decode", **kw)
    attention = [n for n, d in g.nodes(data=True) if d.get(ROLE) == Role.ATTENTION]
    assert [n.rsplit(".", 1)[-1] for n in attention] == ["attention_1", "attention_2"]


def test_odd_kv_heads_are_refused():
    """The value heads split into two halves (transformers refuses an odd count too)."""
    with pytest.raises(CostModelError, match="num_key_value_heads must be even, got 1"):
        config_from_hf_dict({**TOY, "num_key_value_heads": 1}, "toy")


def test_sinks_are_refused():
    with pytest.raises(CostModelError, match="diff_attention layers take no attention_sinks"):
        config_from_hf_dict(TOY, "toy").replace(attention_sinks=1)


def test_mixed_step_reduces_to_the_compiled_steps():
    """Both attention calls are attention kernels to the simulator: a mixed iteration of D decodes
    at one context is the compiled decode step, one chunk the compiled chunked-prefill step."""
    cfg, hw = config_from_hf_dict(BASE, "diffllama"), get_device("h100")
    ms = mixed_step(cfg, hw)
    dec = compiled_step(cfg, hw, "decode")
    chunk = compiled_step(cfg, hw, "prefill", chunked=True)
    for d, ctx in ((1, 100), (37, 4096)):
        assert math.isclose(ms.time([ctx] * d), dec.step(d, ctx), rel_tol=1e-9)
    for c, p in ((512, 0), (2048, 4096)):
        assert math.isclose(ms.time(chunks=[(c, p)]), chunk.step(1, c, p), rel_tol=1e-9)


@pytest.fixture
def config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(BASE))
    return str(p)


def test_command_line_decode_prefill_simulate(config_json, capsys):
    assert main(["decode", config_json, "--batch", "8", "--ctx", "4096", "--json"]) == 0
    dec = json.loads(capsys.readouterr().out)
    assert dec["step_s"] > 0
    assert main(["prefill", config_json, "--seq", "2048"]) == 0
    share = [ln for ln in capsys.readouterr().out.splitlines() if "attention share of FLOPs" in ln]
    assert share and float(share[0].split(":")[1].strip().rstrip("%")) > 0  # found by role
    args = ["--requests", "20", "--rate", "5", "--prompt", "fixed:512", "--output", "fixed:32", "--quiet"]
    assert main(["simulate", config_json, *args]) == 0
    assert "20 requests" in capsys.readouterr().out


@pytest.mark.slow
def test_command_line_predict(config_json, capsys):
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    assert main(["decode", config_json, "--batch", "8", "--ctx", "4096", "--predict", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "generation_attention" in out and "predicted" in out  # both calls priced as attention kernels
