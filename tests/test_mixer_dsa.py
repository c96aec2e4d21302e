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
from costmodel.symbols import B, S
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


def test_prefill_attention_runs_mqa_mode_over_k_slots():
    """Prefill of S = 256 tokens with k = 64, in MLA's MQA mode (the DeepSeek-V3.2 paper, sec. 2.1):
    every query computes all k slots (FlashMLA's sparse kernel masks the invalid ones), 256 * 64 =
    16,384 pairs per head (not sum_t min(t, 64) = 14,368, nor 256*257/2 = 32,896); per layer
    2 * H 4 * P * (40 + 32) FLOPs (q.k over the latent and rope, r_kv 32 + 8 = 40; p.v over the
    latent, 32) = 9,437,184. No kv_b_proj decompression: the absorbed projections run instead,
    q_absorb 2 * 4 heads * 256 * 16 * 32 = 1,048,576 FLOPs and v_absorb the same. The indexer
    scores all 32,896 causal pairs: 2 * 4 heads * 32,896 * 16 = 4,210,688 tensor FLOPs per layer."""
    g = build_model(config_from_hf_dict(TOY, "toy"), "prefill", batch=1, seq=256)
    by = {n.rsplit(".", 1)[-1]: d for n, d in g.nodes(data=True) if d.get(ROLE) == Role.ATTENTION}
    assert sorted(by) == ["attention", "index_logits", "index_topk"]
    reps = [d[REPEAT] for n, d in g.nodes(data=True) if n.endswith(".attention")]

    def tensor(suffix: str) -> float:
        return sum(
            d["cost"].flops_on("tensor") * d[REPEAT] for n, d in g.nodes(data=True) if n.endswith(suffix)
        )

    assert tensor(".attention") == 9_437_184 * sum(reps)
    assert tensor(".q_absorb") == tensor(".v_absorb") == 1_048_576 * sum(reps)
    assert not [n for n in g.nodes if n.endswith(".kv_b_proj")]
    assert tensor(".index_logits") == 4_210_688 * sum(reps)


def test_the_slots_rule_by_hand():
    """``slots=k``: every query computes k slots, N k pairs; K/V read for min(N_kv, N + k - 1)
    positions. 4 queries after 6 cached tokens (N_kv 10), k 3, 2 query heads of d 8 / d_v 8 over one
    KV head, bf16: pairs 4 * 3 = 12 per head, tensor FLOPs 2 * 2 * 12 * (8 + 8) = 768; K/V of
    min(10, 6) = 6 positions, 6 * (8 + 8) * 2 B = 192 B, with Q 2 * 4 * 8 * 2 = 128 B read."""
    c = op_cost("attention", heads=2, kv_heads=1, q_len=4, kv_len=10, head_dim=8, causal=True, slots=3)
    assert c.flops_on("tensor") == 768
    assert c.bytes_read() == 192 + 128
    with pytest.raises(Exception, match="slots applies to causal=True"):
        op_cost("attention", heads=2, q_len=4, kv_len=10, head_dim=8, slots=3)
    with pytest.raises(Exception, match="slots applies to"):
        op_cost("attention", heads=2, q_len=4, kv_len=10, head_dim=8, causal=True, slots=3, window=3)


@pytest.mark.parametrize(
    ("device", "heads"),
    [("h100", 64), ("h200", 64), ("b200", 128), ("gb300", 128), ("rtx-pro-6000", 4), ("l40s", 4)],
)
def test_the_device_sparse_kernel_pads_the_heads(device, heads):
    """vLLM 0.13.0 pads a rank's query heads to 64 on SM 9.0 and 128 on SM 10.x for FlashMLA's sparse
    kernels (``flashmla_sparse.py``: ``self.padding = 128 if ... family(100) else 64``): the toy's
    4 heads compute as 64 or 128 there, in prefill and decode; elsewhere as they are. Prefill of
    256 tokens: 2 * heads * 16,384 * 72 FLOPs per layer."""
    cfg = config_from_hf_dict(TOY, "toy")
    for phase in ("prefill", "decode"):
        g = compiled_step(cfg, device, phase).graph
        att = [d for n, d in g.nodes(data=True) if n.endswith(".attention")]
        assert {d["params"]["heads"] for d in att} == {heads}
    g = compiled_step(cfg, device, "prefill").graph
    n = next(n for n in g.nodes if n.endswith(".attention"))
    assert g.nodes[n]["cost"].flops_on("tensor").subs({B: 1, S: 256}) == 2 * heads * 16_384 * 72


@pytest.mark.parametrize("tile", [1, 64])
def test_a_chunk_after_a_long_prefix_reads_what_its_kernel_charges(tile):
    """A chunk of 256 after 1,024 cached tokens (k = 64): the latent edges into the attention carry
    the 256 new latents and min(1024, k - 1) = 63 cached ones, what the rule's K/V read is
    (min(N_kv, N + k - 1) = 319 positions): the graph validates, padded or not."""
    from costmodel.graph import validate_graph

    cfg = config_from_hf_dict(TOY, "toy")
    validate_graph(build_model(cfg, "prefill", batch=1, seq=256, prefix=1024, sparse_head_tile=tile))
    validate_graph(build_model(cfg, "decode", batch=3, ctx=1000, sparse_head_tile=tile))


@pytest.mark.parametrize("bad", [0, -64, 1.5, True, "64"])
def test_a_bad_head_tile_is_refused_by_name(bad):
    with pytest.raises(Exception, match="sparse_head_tile must be a whole number >= 1"):
        build_model(config_from_hf_dict(TOY, "toy"), "decode", sparse_head_tile=bad)


@pytest.mark.parametrize(
    ("heads", "prefill", "decode"),
    [(4, 4, 4), (32, 64, 32)],
)
def test_an_fp8_cache_pads_only_a_wide_ranks_prefill(heads, prefill, decode):
    """vLLM 0.13.0 with an FP8 KV cache (``fp8_ds_mla``): a rank of fewer than 32 heads runs every
    token on the FP8 decode kernel, unpadded; a rank of 32 or more pads its prefill (the BF16
    kernel) to 64 on an H100, not its decodes."""
    import dataclasses

    cfg = config_from_hf_dict({**TOY, "num_attention_heads": heads, "num_key_value_heads": heads}, "toy")
    cfg = dataclasses.replace(cfg, kv_dtype="fp8_e4m3")
    for phase, want in (("prefill", prefill), ("decode", decode)):
        g = compiled_step(cfg, "h100", phase).graph
        assert {d["params"]["heads"] for n, d in g.nodes(data=True) if n.endswith(".attention")} == {want}


def test_the_fusion_audit_builds_the_step_the_device_runs():
    """``fusion audit --device h100`` of a DSA model prices the padded heads the compiled step does."""
    from costmodel.hardware import get_device
    from graphs.serving.analysis.fusion_request import FusionStep

    cfg = config_from_hf_dict(TOY, "toy")
    g = FusionStep(device="h100", phase="prefill", seq=256).graph(cfg, get_device("h100"))
    assert {d["params"]["heads"] for n, d in g.nodes(data=True) if n.endswith(".attention")} == {64}
    assert {
        d["params"]["heads"] for n, d in FusionStep().graph(cfg).nodes(data=True) if n.endswith(".attention")
    } == {4}


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


def test_a_report_says_once_which_kernel_priced_the_sparse_attention(config_json, capsys):
    """The padding and the slots are the engine kernel's, not the model's: a device's report says
    so once (the toy's 4 heads computed as 64 on an H100); an RTX PRO 6000 pads nothing."""
    assert main(["prefill", config_json, "--device", "h100", "--seq", "256"]) == 0
    out = capsys.readouterr().out
    assert out.count("sparse attention priced as FlashMLA runs it") == 1
    assert "a rank's 4 query heads computed as 64" in out
    assert main(["prefill", config_json, "--device", "rtx-pro-6000", "--seq", "256"]) == 0
    out = capsys.readouterr().out
    assert out.count("sparse attention priced as FlashMLA runs it") == 1 and "computed as" not in out


def test_a_simulation_says_it_once_too(config_json, capsys):
    """``simulate`` on an H100 says the same note once, as the step reports do."""
    assert main(["simulate", config_json, "--device", "h100", *_SIM]) == 0
    out = capsys.readouterr().out
    assert out.count("sparse attention priced as FlashMLA runs it") == 1
    assert "a rank's 4 query heads computed as 64" in out
