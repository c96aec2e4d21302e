"""The DeepSeek Sparse Attention mixer plug-in (models/mixers/dsa.py) and its rules, end to end.

Parameter counts against transformers' DeepseekV32ForCausalLM on the meta device; the index
rules by hand; a decode step at ctx 100k reading a fraction of DeepSeek-V3's attention KV (hand
ratio); prefill's sparse pair count; the mixed step equal to the compiled steps; and decode,
prefill, simulate and --predict from the command line.
"""

import json
import math

import pytest

from costmodel import op_cost
from costmodel.hardware import get_device
from costmodel.keys import BYTES, KIND, REPEAT, ROLE, Role
from graphs.blocks import build_model
from graphs.cli import main
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.mixed import mixed_step
from models import get_model, param_counts
from models.hf import config_from_hf_dict

#: a small DeepSeek-V3.2: d 256, 3 layers (1 dense), H 4, r_q 64, r_kv 32, indexer 4 x 16, top 64
TOY = {
    "model_type": "deepseek_v32",
    "vocab_size": 1000,
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 3,
    "first_k_dense_replace": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "q_lora_rank": 64,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "index_n_heads": 4,
    "index_head_dim": 16,
    "index_topk": 64,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def _transformers_count(hf):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("transformers.models.deepseek_v32")
    drop = ("model_type", "torch_dtype", "architectures", "quantization_config", "topk_method")
    fields = {k: v for k, v in hf.items() if k not in drop}
    with torch.device("meta"):
        model = transformers.DeepseekV32ForCausalLM(transformers.DeepseekV32Config(**fields))
    # the router's score-correction bias is a buffer in transformers, a checkpoint tensor (and counted
    # here, router_bias) in DeepSeek's weights: parameters plus those buffers
    bias = sum(b.numel() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
    return sum(p.numel() for p in model.parameters()) + bias


def test_toy_parameter_count_equals_transformers():
    assert param_counts(config_from_hf_dict(TOY, "toy")).total == _transformers_count(TOY)


def test_catalog_parameter_count_equals_transformers():
    # DeepSeek-V3's 671,026,419,200 plus the indexer of 61 layers:
    # wq_b 1536*64*128 = 12,582,912; wk 7168*128 = 917,504; k_norm 2*128 = 256; weights_proj 7168*64 = 458,752
    # = 13,959,424 per layer; x 61 = 851,524,864; total 671,877,944,064
    assert param_counts(get_model("deepseek-v3.2")).total == 671_877_944_064
    assert param_counts(get_model("deepseek-v3")).total + 61 * 13_959_424 == 671_877_944_064
    with open("models/configs/deepseek-v3.2.json") as f:
        assert _transformers_count(json.load(f)) == 671_877_944_064


def test_index_rules_by_hand():
    # one decode query, 64 heads of 128 over ctx 1000 keys of 132 B (fp8 + fp32 scale), bf16 q and weights:
    # tensor 2*64*1000*128 = 16,384,000; vector 3*64*1000 = 192,000
    # read 64*128*2 + 64*2 + 1000*132 = 148,512; write 4*1000 logits
    c = op_cost(
        "lightning_indexer", heads=64, q_len=1, kv_len=1000, head_dim=128, key_bytes=132, weight_dtype="bf16"
    )
    assert c.flops_on("tensor") == 16_384_000 and c.flops_on("vector") == 192_000
    assert c.bytes == 148_512 + 4000
    # causal prefill of 8 tokens: 8*9/2 = 36 pairs, 2*1*36*4 = 288 tensor FLOPs at one head of 4
    assert op_cost("lightning_indexer", heads=1, q_len=8, kv_len=8, head_dim=4).flops_on("tensor") == 288
    # top 2048 of 100,000 fp32 logits: 2 ops each; read 400,000 B, write 2048 int32
    t = op_cost("topk", rows=1, elements=100_000, k=2048)
    assert t.flops_on("vector") == 200_000 and t.bytes == 400_000 + 8192


def _kv_read(cfg, ctx):
    """Bytes read from the KV caches (latent and index keys) in one decode step of batch 1."""
    g = build_model(cfg, "decode", batch=1, ctx=ctx)
    return sum(
        float(d[BYTES]) * g.nodes[v].get(REPEAT, 1)
        for u, v, d in g.edges(data=True)
        if g.nodes[u].get(KIND) == "kv_cache"
    )


def test_decode_at_100k_reads_a_fraction_of_v3_attention_kv():
    """Per layer at ctx 100,000 (bf16 latent of 512 + 64): V3 reads 100,000 * 576 * 2 = 115,200,000 B;
    V3.2 reads the 2048 selected latents, 2048 * 576 * 2 = 2,359,296 B, and every index key,
    100,000 * 132 = 13,200,000 B: ratio 15,559,296 / 115,200,000 = 0.13506..."""
    v3, v32 = get_model("deepseek-v3"), get_model("deepseek-v3.2")
    ratio = _kv_read(v32, 100_000) / _kv_read(v3, 100_000)
    assert ratio == pytest.approx(15_559_296 / 115_200_000, rel=1e-12)


def test_prefill_attention_scores_min_t_k_pairs():
    """Prefill of S = 256 tokens with k = 64: attention pairs sum_t min(t, 64) = 64*65/2 + 64*192
    = 2080 + 12288 = 14368 per head (not 256*257/2 = 32896); per layer 2 * H 4 * P * (24 + 16) FLOPs
    (absorbed-free prefill: q.k over nope + rope = 24, p.v over 16). The indexer scores all 32896
    causal pairs: 2 * 4 heads * 32896 * 16 = 4,210,688 tensor FLOPs per layer."""
    g = build_model(config_from_hf_dict(TOY, "toy"), "prefill", batch=1, seq=256)
    by = {n.rsplit(".", 1)[-1]: d for n, d in g.nodes(data=True) if d.get(ROLE) == Role.ATTENTION}
    assert sorted(by) == ["attention", "index_logits", "index_topk"]
    reps = [d[REPEAT] for n, d in g.nodes(data=True) if n.endswith(".attention")]
    att = sum(
        d["cost"].flops_on("tensor") * d[REPEAT] for n, d in g.nodes(data=True) if n.endswith(".attention")
    )
    assert att == 2 * 4 * 14368 * 40 * sum(reps)
    idx = sum(
        d["cost"].flops_on("tensor") * d[REPEAT] for n, d in g.nodes(data=True) if n.endswith(".index_logits")
    )
    assert idx == 4_210_688 * sum(reps)


@pytest.mark.parametrize(
    ("decodes", "chunk"),
    [([30], None), ([2000] * 5, None), ([], (128, 0)), ([], (512, 1024))],
    ids=["1@30", "5@2000", "chunk128", "chunk512+1024"],
)
def test_mixed_step_reduces_to_the_compiled_steps(decodes, chunk):
    """The sparse attention is a windowed kernel (affine in min(k, ctx)), the indexer and top-k
    attention-role kernels affine in ctx: D decodes at one context are the compiled decode step
    (ctx 30 < k = 64 and ctx 2000 > k on either side of the window), a lone chunk the chunked one."""
    cfg, hw = config_from_hf_dict(TOY, "toy"), get_device("h100")
    if chunk is None:
        got = mixed_step(cfg, hw).time(decodes)
        want = compiled_step(cfg, hw, "decode").step(len(decodes), decodes[0])
    else:
        got = mixed_step(cfg, hw).time(chunks=[chunk])
        want = compiled_step(cfg, hw, "prefill", chunked=True).step(1, *chunk)
    assert math.isclose(got, want, rel_tol=1e-9)


@pytest.fixture
def config_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TOY))
    return str(p)


_SIM = ["--requests", "20", "--rate", "5", "--prompt", "fixed:512", "--output", "fixed:32", "--quiet"]


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["decode", "--batch", "8", "--ctx", "2048"], "TPOT bound"),
        (["prefill", "--seq", "1024"], "attention share of FLOPs"),
        (["simulate", *_SIM], "20 requests"),
    ],
    ids=["decode", "prefill", "simulate"],
)
def test_command_line(config_json, capsys, argv, expect):
    assert main([argv[0], config_json, *argv[1:]]) == 0
    out = capsys.readouterr().out
    assert expect in out
    if argv[0] == "prefill":  # the indexer and the sparse attention are found by role
        share = next(ln for ln in out.splitlines() if expect in ln)
        assert float(share.split(":")[1].strip().rstrip("%")) > 0


@pytest.mark.slow
def test_command_line_predict(config_json, capsys):
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    assert main(["decode", config_json, "--batch", "8", "--ctx", "2048", "--predict", "vllm"]) == 0
    assert "predicted" in capsys.readouterr().out
