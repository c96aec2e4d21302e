"""Transformer dataflow graphs: structure, totals, closed forms, pitfalls."""

import dataclasses
import json

import networkx as nx
import pytest
import sympy

from costmodel import Tensor, bound, get_device, op_cost
from costmodel.cost import Cost
from costmodel.errors import UnknownRuleError
from costmodel.graph import (
    BYTES,
    COST,
    GROUP,
    KIND,
    OP,
    OUTPUTS,
    TENSOR,
    GraphError,
    classify_graph,
    expand,
    graph_to_dict,
    graph_total,
    validate_graph,
    write_graphml,
)
from costmodel.symbols import B, S, ctx
from graphs import build_layer, build_model, closed_forms, summarize, weight_params
from models import MODELS, ModelConfig, get_model, param_counts


def same(a, b):
    return sympy.simplify(a - b) == 0


def tensor_flops(g, pred=lambda n, d: True):
    return graph_total(g, kinds=["op"], where=pred).flops_on("tensor")


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen2.5-7b"])
def test_layer_matmul_flops_by_hand(name):
    cfg = get_model(name)
    d, H, Hkv, hd, inter = 3584, 28, 4, 128, 18944
    if name == "llama-3.1-8b":
        d, H, Hkv, hd, inter = 4096, 32, 8, 128, 14336
    g = build_layer(cfg, "prefill")
    T = B * S
    # projections: q and o d x H*hd, k and v d x Hkv*hd, MLP 3 d x I; 2 FLOPs per MAC per token
    proj = 2 * T * (2 * d * H * hd + 2 * d * Hkv * hd + 3 * d * inter)
    # causal attention: S(S+1)/2 pairs per head and sequence, 4*hd FLOPs each (QK^T and PV)
    attn = 4 * B * H * hd * S * (S + 1) / 2
    assert same(tensor_flops(g), proj + attn)


def test_graph_weights_equal_parameter_formulas_for_every_model():
    # two independent counts: weight nodes of the graph vs models.params formulas; MTP modules
    # (deepseek-v3-mtp) are in the graph only when loaded (mtp_active), as the count's mtp term
    for name in MODELS:
        cfg = get_model(name)
        pc = param_counts(cfg)
        assert weight_params(build_model(cfg, "decode")) == pc.total - pc.mtp, name
        if cfg.mtp_layers:
            loaded = dataclasses.replace(cfg, mtp_active=True)
            assert weight_params(build_model(loaded, "decode")) == pc.total, name


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_symbolic_totals_substituted_equal_numeric_graph(name, phase):
    cfg = get_model(name)
    sym = ModelConfig.symbolic(like=cfg)
    dims = {B: 3, S: 17, ctx: 257}
    s = summarize(build_model(sym, phase))
    n = summarize(build_model(cfg, phase, batch=3, seq=17, ctx=257))
    vals = {**cfg.bindings(sym), **dims}
    for field in ("flops", "tensor_flops", "dram_bytes", "weight_bytes_read", "kv_bytes_per_token"):
        assert same(sympy.sympify(getattr(s, field)).subs(vals), getattr(n, field)), field


def test_decode_flops_per_token_falls_out_of_the_graph():
    cfg = get_model("llama-3.1-8b")
    sym = ModelConfig.symbolic(like=cfg)
    forms = closed_forms(cfg, "decode")
    pc = param_counts(sym)
    L, H, hd, d, V = (
        sym.num_hidden_layers,
        sym.num_attention_heads,
        sym.head_dim,
        sym.hidden_size,
        sym.vocab_size,
    )
    norms = 2 * d * L + d
    # matmul weights = non-embedding minus norm vectors, plus the lm_head; 2 FLOPs each per token,
    # and 4*H*d_head FLOPs per cached token per layer for attention
    expected = 2 * (pc.non_embedding - norms) + 2 * V * d + 4 * L * H * hd * ctx
    assert same(forms["tensor_flops_per_token"], expected)
    # numbers: 2 * 7.504658432e9 + 524288 * ctx
    assert same(forms["tensor_flops_per_token_bound"], 15_009_316_864 + 524_288 * ctx)
    # KV bytes per token: 2 * L * H_kv * d_head * b = 2*32*8*128*2
    assert forms["kv_bytes_per_token_bound"] == 131_072
    # attention's FLOP share rises with ctx towards 1
    share = forms["attention_flop_share_bound"]
    assert float(share.subs(ctx, 128)) < 0.01 < float(share.subs(ctx, 131072)) < 1


def test_decode_weight_traffic_leaves_out_the_embedding_table():
    cfg = get_model("qwen2.5-7b")
    s = summarize(build_model(cfg, "decode", batch=1, ctx=1024))
    pc = param_counts(cfg)
    # every weight once (2 bytes each), minus the embedding table, plus the one row gathered
    assert s.weight_bytes_read == 2 * pc.total - 2 * pc.embedding + 2 * cfg.hidden_size
    assert float(s.weight_bytes_read / 3e12) * 1e3 == pytest.approx(4.71, abs=0.01)  # ms at 3 TB/s


def test_mla_cache_is_latent_plus_rope_key():
    cfg = get_model("deepseek-v3")
    s = summarize(build_model(cfg, "decode", batch=1, ctx=4096))
    # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes, not 2 x 128 heads x 128
    assert s.kv_bytes_per_token == 61 * (512 + 64) * 2
    g = build_model(cfg, "decode", batch=1, ctx=4096)
    attn = g.nodes["moe.attention"][COST]
    # the latent cache read once (576 per token) + 128 absorbed queries of 512 + 64
    assert attn.bytes_read() == 4096 * 576 * 2 + 128 * 576 * 2


def test_moe_memory_from_total_compute_from_active():
    cfg = get_model("mixtral-8x7b")
    g = build_model(cfg, "decode", batch=1, ctx=1)
    s = summarize(g)
    pc = param_counts(cfg)
    assert s.footprint["weights"] == 2 * pc.total  # residency: all experts
    # one token touches top-2 of 8 experts: matmul FLOPs follow active parameters
    moe_mm = tensor_flops(g, lambda n, d: d.get(GROUP) == "moe" and d.get(OP) != "attention")
    per_layer_active_matmul = (2 * 4096**2 + 2 * 4096 * 1024) + 2 * 3 * 4096 * 14336 + 8 * 4096
    assert moe_mm == 2 * 32 * per_layer_active_matmul
    # and the weights read per step are the touched experts only
    assert s.weight_bytes_read < 2 * pc.active + 2 * 32000 * 4096


def test_views_are_free_and_decode_kv_write_is_a_slice():
    cfg = get_model("llama-3.1-8b")
    g = build_model(cfg, "prefill", batch=2, seq=128)
    assert g.nodes["head.last_token"][COST] == Cost.zero()
    d = build_model(cfg, "decode", batch=4, ctx=8192)
    w = d.nodes["layers.k_cache_write"][COST]
    assert w.bytes == 4 * 8 * 128 * (2 + 2)  # B * H_kv * d_head, read bf16 + write bf16: not the cache
    fp8 = build_model(cfg.replace(kv_dtype="fp8"), "decode", batch=4, ctx=8192)
    assert fp8.nodes["layers.k_cache_write"][COST].bytes == 4 * 8 * 128 * (2 + 1)


def test_exp_on_the_sfu_can_bind_attention():
    # d_head = 64: 4*64 = 256 matmul FLOPs per score vs one exp. B200: 2.25e15/5e12 = 450 FLOPs per exp
    a = op_cost("attention", batch=1, heads=32, q_len=4096, kv_len=4096, head_dim=64, causal=True)
    assert bound(a, get_device("b200")).kind == "sfu"
    assert bound(a, get_device("b300")).kind == "tensor"  # Blackwell Ultra doubled the SFU rate
    a128 = op_cost("attention", batch=1, heads=32, q_len=4096, kv_len=4096, head_dim=128, causal=True)
    assert bound(a128, get_device("b200")).kind == "tensor"


def test_expand_keeps_totals():
    cfg = get_model("tiny")
    g = build_model(cfg, "decode", batch=2, ctx=64)
    e = expand(g)
    validate_graph(e)
    assert graph_total(e) == graph_total(g)
    assert len([n for n in e if n.startswith("layers.1.")]) == len([n for n in g if n.startswith("layers.")])
    ds = expand(build_model(get_model("deepseek-v3"), "decode", batch=1, ctx=16))
    assert sum(1 for n in ds if n.endswith(".attention")) == 61
    with pytest.raises(GraphError, match="symbolic repeat"):
        expand(build_model(ModelConfig.symbolic(like=cfg), "decode"))


def test_validation_catches_problems():
    g = build_model(get_model("tiny"), "decode")
    validate_graph(g)
    bad = g.copy()
    bad.add_edge(
        "head.lm_head", "layers.attn_norm", **{TENSOR: Tensor("head.lm_head", (B, 256), "fp32"), BYTES: 0}
    )
    with pytest.raises(GraphError, match="cycle"):
        validate_graph(bad)
    bad = g.copy()
    bad.nodes["layers.q_proj"][OP] = "conv9d"
    with pytest.raises(UnknownRuleError, match="conv9d"):
        validate_graph(bad)
    bad = g.copy()
    u, v = "layers.q_proj", "layers.rope_q"
    bad.edges[u, v][TENSOR] = Tensor("layers.q_proj", (B, 999), "fp32")
    with pytest.raises(GraphError, match="does not match"):
        validate_graph(bad)
    bad = g.copy()
    bad.add_node("stray", **{KIND: "blob", COST: Cost.zero(), OUTPUTS: ()})
    with pytest.raises(GraphError, match="kind 'blob' not allowed"):
        validate_graph(bad)


def test_classify_table_and_exports(tmp_path):
    g = build_model(get_model("qwen2.5-7b"), "decode", batch=1, ctx=4096)
    rows = classify_graph(g, get_device("h100"))
    assert {r.kind for r in rows} <= {"dram", "tensor", "vector", "sfu", "none"}
    assert sum(r.share for r in rows) == pytest.approx(1)
    assert max(rows, key=lambda r: r.total_time_s).node.startswith("layers.mlp")
    json.dumps(graph_to_dict(g))
    write_graphml(g, tmp_path / "g.graphml")
    back = nx.read_graphml(tmp_path / "g.graphml")
    assert back.number_of_nodes() == g.number_of_nodes()


def test_bad_phase_and_dims():
    cfg = get_model("tiny")
    with pytest.raises(Exception, match="phase 'train' not allowed"):
        build_model(cfg, "train")
    with pytest.raises(Exception, match="ctx must be a positive integer"):
        build_model(cfg, "decode", ctx=0)
    with pytest.raises(Exception, match="batch must be a positive integer"):
        build_model(cfg, "prefill", batch=-1)


def test_gelu_layernorm_tied_variant():
    # GPT-style block: LayerNorm with bias, plain GELU MLP, tied embeddings, MHA
    cfg = ModelConfig(
        "gptish",
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        vocab_size=100,
        mlp="gelu",
        norm="layernorm",
        tie_word_embeddings=True,
    )
    g = build_model(cfg, "decode", batch=2, ctx=16)
    validate_graph(g)
    pc = param_counts(cfg)
    # attention 4*64^2, MLP 2*64*256, two LayerNorms of 2*64; final LayerNorm 2*64; one shared table
    assert pc.total == 2 * (4 * 64**2 + 2 * 64 * 256 + 4 * 64) + 2 * 64 + 100 * 64
    assert weight_params(g) == pc.total
    assert "layers.mlp.gate_proj" not in g and g.nodes["layers.mlp.act"][COST].flops_on("sfu") == 2 * 256
    # the tied table feeds both the gather (2 rows) and the lm_head (all of it)
    table = "embed.embed_tokens.weight"
    assert g.edges[table, "embed.embed_tokens"][BYTES] == 2 * 64 * 2
    assert g.edges[table, "head.lm_head"][BYTES] == 100 * 64 * 2


@pytest.mark.parametrize("name", list(MODELS))
def test_every_variant_validates_edges_against_costs(name):
    # in-edge bytes never exceed a node's reads: W8A8 operands, fp8 caches, chunks and tp included
    cfg = get_model(name)
    for c in (cfg, cfg.replace(matmul_dtype="fp8", kv_dtype="fp8")):
        validate_graph(build_model(c, "decode", batch=2, ctx=16))
        validate_graph(build_model(c, "prefill", batch=2, seq=8, prefix=8))
        validate_graph(build_model(c, "decode", batch=2, ctx=16, tp=2))


def test_validation_rejects_edges_that_read_more_than_the_op():
    g = build_model(get_model("tiny"), "decode", batch=1, ctx=8)
    g.edges["layers.attn_norm", "layers.q_proj"][BYTES] *= 10
    with pytest.raises(GraphError, match="edge bytes must be what the op reads"):
        validate_graph(g)


def test_lm_head_runs_at_the_matmul_dtype():
    """W8A8: the lm_head's tensor term uses the fp8 roof like every other linear.

    Llama-3.1-70B decode, one token: 2 * 8192 * 128256 FLOPs at B300's dense fp8 5e15 FLOP/s.
    """
    cfg = get_model("llama-3.1-70b").replace(dtype="fp8", matmul_dtype="fp8")
    g = build_model(cfg, "decode", batch=1, ctx=4096)
    head = g.nodes["head.lm_head"]
    assert head["params"]["dtype"].startswith("fp8")
    t = bound(head["cost"], get_device("b300")).terms["tensor"]
    assert float(t) == pytest.approx(2 * 8192 * 128256 / 5e15, rel=1e-12)
    validate_graph(g)  # the activation edge carries the fp8 bytes the gemm reads
