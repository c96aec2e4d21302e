"""Each cost rule pinned to a hand derivation written next to it."""

import pytest
import sympy

from costmodel import Cost, RuleArgumentError, get_rule, op_cost, rule_names
from costmodel.errors import CostModelError, UnknownRuleError
from costmodel.rules import register_rule
from costmodel.symbols import K, M, N, dim

n, c, d, h = dim("n"), dim("c"), dim("d"), dim("h")


def same(a, b):
    return sympy.simplify(a - b) == 0


# ------------------------------------------------------------------ linear
def test_gemm_closed_form():
    g = op_cost("gemm", M=M, N=N, K=K)
    assert same(g.flops, 2 * M * N * K)  # one MAC per (m, n, k)
    assert same(g.bytes, 2 * (M * K + K * N + M * N))  # read A, read W, write C in bf16
    assert g.flop_terms == {("tensor", "bf16"): 2 * M * N * K}
    assert g.kernels == 1


def test_gemm_weight_only_quantisation_and_mixed_dtypes():
    # int4 weights under bf16 activations: W costs 1/2 byte per element, compute stays bf16
    g = op_cost("gemm", M=M, N=N, K=K, w_dtype="int4")
    assert same(g.bytes, 2 * M * K + sympy.Rational(1, 2) * K * N + 2 * M * N)
    assert set(g.flop_terms) == {("tensor", "bf16")}
    # NVFP4 weights: 4.5 bits = 9/16 byte
    g = op_cost("gemm", M=M, N=N, K=K, w_dtype="nvfp4")
    assert same(g.bytes_read(), 2 * M * K + sympy.Rational(9, 16) * K * N)
    # W8A8 with bf16 output: int8 roof
    g = op_cost("gemm", M=M, N=N, K=K, dtype="int8", w_dtype="int8", out_dtype="bf16")
    assert set(g.flop_terms) == {("tensor", "int8")}
    assert same(g.bytes, M * K + K * N + 2 * M * N)


def test_gemm_bias_and_tiles():
    g = op_cost("gemm", M=M, N=N, K=K, bias=True)
    assert same(g.flops_on("vector"), M * N)  # one add per output
    assert same(g.bytes_read(), 2 * (M * K + K * N) + 2 * N)
    # 1024x1024x1024 with 128x256 tiles: A re-read 1024/256 = 4 times, W 1024/128 = 8 times
    t = op_cost("gemm", M=1024, N=1024, K=1024, tile_m=128, tile_n=256)
    assert t.bytes_read() == 2 * (1024 * 1024 * 4 + 1024 * 1024 * 8)
    assert t.bytes_written() == 2 * 1024 * 1024


def test_batched_and_per_sample_matmul():
    b = dim("batch")  # "b" is the bytes-per-element quantity
    bg = op_cost("batched_gemm", batch=b, M=M, N=N, K=K)
    assert same(bg.flops, 2 * b * M * N * K)
    assert same(bg.bytes, 2 * b * (M * K + K * N + M * N))
    shared = op_cost("batched_gemm", batch=b, M=M, N=N, K=K, shared_rhs=True)
    assert same(shared.bytes, 2 * b * (M * K + M * N) + 2 * K * N)
    ps = op_cost("per_sample_matmul", batch=b, N=4096, K=4096)
    # I = 2*4096^2 / (2*(4096 + 4096^2 + 4096)) = 4096/4098, whatever the batch
    assert same(ps.intensity, sympy.Rational(4096, 4098))


# -------------------------------------------------------------- elementwise
def test_elementwise_and_reduction():
    e = op_cost("elementwise", n=n, inputs=2)
    assert e.flops == n and same(e.bytes, 6 * n)  # F = n, D = 3bn with b = 2
    assert same(e.intensity, sympy.Rational(1, 6))
    chain = op_cost("elementwise", n=n, inputs=2, passes=2, vector_ops=1, sfu_ops=1, dtype="fp32")
    assert same(chain.flops_on("vector"), 2 * n) and same(chain.flops_on("sfu"), 2 * n)
    assert same(chain.bytes, 2 * 3 * 4 * n) and chain.kernels == 2
    r = op_cost("reduction", rows=n, cols=c, dtype="fp32")
    assert same(r.flops, n * c) and same(r.bytes, 4 * n * c + 4 * n)


# --------------------------------------------------------------------- norms
def test_layernorm_fused_and_multi_pass():
    ln = op_cost("layernorm", rows=n, cols=c, bias=False)
    # 6 vector ops per element + 3 per row; 1 rsqrt per row
    assert same(ln.flops_on("vector"), 6 * n * c + 3 * n)
    assert same(ln.flops_on("sfu"), n)
    assert same(ln.bytes, 2 * n * c + 2 * c + 2 * n * c)  # read x, gamma; write y
    mp = op_cost("layernorm", rows=n, cols=c, bias=False, variant="multi_pass", dtype="fp32")
    # the article counts 10 passes of n*c elements (layernorm_buffered) plus O(n) stats
    assert same(mp.bytes - 4 * 10 * n * c, 4 * 6 * n + 4 * c)
    assert mp.kernels == 7
    with_beta = op_cost("layernorm", rows=n, cols=c)
    assert same(with_beta.flops_on("vector") - ln.flops_on("vector"), n * c)


def test_rmsnorm_fused_and_multi_pass():
    r = op_cost("rmsnorm", rows=n, cols=c)
    assert same(r.flops_on("vector"), 4 * n * c + 2 * n) and same(r.flops_on("sfu"), n)
    assert same(r.bytes, 4 * n * c + 2 * c)
    mp = op_cost("rmsnorm", rows=n, cols=c, variant="multi_pass")
    # x2 = x*x (2), mean (1), y = x*r (2), y = g*y (2): 7 passes of n*c
    assert same(mp.bytes - 2 * 7 * n * c, 2 * 4 * n + 2 * c)


# ------------------------------------------------------------------- softmax
@pytest.mark.parametrize(
    ("variant", "reads", "writes", "vec", "sfu"),
    [("naive", 3, 2, 4, 1), ("online", 2, 1, 7, 3), ("fused", 1, 1, 4, 1)],
)
def test_softmax_variants(variant, reads, writes, vec, sfu):
    s = op_cost("softmax", rows=n, cols=d, variant=variant)
    assert same(s.bytes_read(), 2 * reads * n * d)
    assert same(s.bytes_written(), 2 * writes * n * d)
    assert same(s.flops_on("vector"), vec * n * d) and same(s.flops_on("sfu"), sfu * n * d)


def test_softmax_naive_vs_fused_ideal_ratio_is_2_5():
    # article 3.3: fused 1R1W vs naive 3R2W is a 2.5x traffic ratio
    naive = op_cost("softmax", rows=n, cols=d, variant="naive")
    fused = op_cost("softmax", rows=n, cols=d, variant="fused")
    assert same(naive.bytes / fused.bytes, sympy.Rational(5, 2))


# ----------------------------------------------------------------- attention
def test_attention_gqa_bytes_and_flops():
    # Llama-3-8B-like decode step: B=4, H=32, H_kv=8, d=128, ctx=C, one query
    C = dim("ctx")  # "C" is the capacity quantity
    a = op_cost("attention", batch=4, heads=32, kv_heads=8, q_len=1, kv_len=C, head_dim=128)
    assert same(a.flops_on("tensor"), 4 * 32 * C * 4 * 128)  # 4*H*ctx*d per sequence
    # K and V once per KV head: 2 * B * H_kv * ctx * d * 2 bytes; Q read and O write: B*H*d*2 each
    assert same(a.bytes, 2 * 4 * 8 * C * 128 * 2 + 2 * (4 * 32 * 128 * 2))


def test_attention_causal_pairs_and_tiled_flash():
    # self-attention, causal: N(N+1)/2 pairs -> 4d FLOPs each
    a = op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, causal=True)
    assert same(a.flops_on("tensor"), 4 * d * n * (n + 1) / 2)
    # naive computes the masked matrix in full
    nv = op_cost("attention", heads=1, q_len=n, kv_len=n, head_dim=d, causal=True, variant="naive")
    assert same(nv.flops_on("tensor"), 4 * d * n**2)
    # tiled flash, N = 1024, Br = 128: K and V read 8 times
    t = op_cost("attention", heads=1, q_len=1024, kv_len=1024, head_dim=64, q_block=128)
    assert t.bytes_read() == 2 * (1024 * 64) + 8 * 2 * (2 * 1024 * 64)
    # causal tiled: blocks see 128, 256, ..., 1024 keys -> 128 * (1+...+8) = 4608 rows of K and V
    tc = op_cost("attention", heads=1, q_len=1024, kv_len=1024, head_dim=64, q_block=128, causal=True)
    assert tc.bytes_read() == 2 * (1024 * 64) + 2 * 4608 * (2 * 64)


def test_attention_rejects_bad_grouping():
    with pytest.raises(RuleArgumentError, match="multiple of kv_heads"):
        op_cost("attention", heads=32, kv_heads=5, q_len=1, kv_len=8, head_dim=64)
    with pytest.raises(RuleArgumentError, match="variant"):
        op_cost("attention", heads=1, q_len=1, kv_len=8, head_dim=64, variant="paged")


# ----------------------------------------------------------- embedding/rope
def test_embedding_is_a_gather_and_rope():
    T, H = dim("T"), dim("hidden_size")
    e = op_cost("embedding", tokens=T, hidden=H)
    assert e.flops == 0
    assert same(e.bytes, T * (4 + 2 * H) + 2 * T * H)  # indices + rows read, rows written
    r = op_cost("rope", tokens=T, heads=40, head_dim=128)
    assert same(r.flops, 3 * T * 40 * 128)
    assert same(r.bytes, 2 * 2 * T * 40 * 128 + 2 * 4 * T * 128)  # x in/out, cos+sin fp32


# ------------------------------------------------------------- collectives
def test_collectives_alpha_beta():
    p = dim("p")
    ar = op_cost("all_reduce", elements=n, p=8)
    assert same(ar.comm_terms["scale_up"], 2 * sympy.Rational(7, 8) * 2 * n)
    assert ar.comm_step_terms["scale_up"] == 14  # 2(p-1) ring steps
    two = op_cost("all_reduce", elements=n, p=8, algorithm="direct")
    assert two.comm_step_terms["scale_up"] == 2
    ag = op_cost("all_gather", elements=n, p=p)
    assert same(ag.comm_terms["scale_up"], 2 * n * (p - 1) / p)
    rs = op_cost("reduce_scatter", elements=n, p=4, link="scale_out")
    assert same(rs.comm_terms["scale_out"], 2 * n * sympy.Rational(3, 4))
    assert op_cost("all_reduce", elements=n, p=1) == Cost.zero()


# ---------------------------------------------------------------- registry
def test_registry_refuses_duplicates_and_positional_params():
    with pytest.raises(CostModelError, match="already registered"):
        register_rule("gemm")(lambda *, M: Cost.zero())

    def bad(M):
        """F = 0."""
        return Cost.zero()

    with pytest.raises(CostModelError, match="keyword-only"):
        register_rule("bad_rule")(bad)
    with pytest.raises(UnknownRuleError, match="known rules"):
        get_rule("conv9d")
    with pytest.raises(RuleArgumentError, match="unknown parameter"):
        op_cost("gemm", M=1, N=1, K=1, alpha=2)


def test_every_rule_has_a_formula_docstring():
    for name in rule_names():
        assert ".. math::" in get_rule(name).doc or "F =" in get_rule(name).doc, name


# ------------------------------------------------------- data movement, MoE
def test_view_is_free_and_copy_reads_and_writes():
    assert op_cost("view", elements=n) == Cost.zero()
    cp = op_cost("copy", elements=n, dtype="bf16", out_dtype="fp8")
    assert same(cp.bytes, 2 * n + n) and cp.flops == 0 and cp.kernels == 1


def test_grouped_gemm_compute_active_weights_touched():
    T = dim("T")
    g = op_cost("grouped_gemm", tokens=T, experts=8, top_k=2, N=14336, K=4096)
    assert same(g.flops, 2 * T * 2 * 14336 * 4096)  # T*k rows through [4096, 14336]
    # one token touches exactly k = 2 experts: 2 weight matrices read
    one = op_cost("grouped_gemm", tokens=1, experts=8, top_k=2, N=14336, K=4096)
    assert one.bytes_read() == 2 * (2 * 4096) + 2 * 2 * 4096 * 14336
    # many tokens touch all 8: E(1 - (3/4)^T) -> 8
    big = op_cost("grouped_gemm", tokens=4096, experts=8, top_k=2, N=14336, K=4096)
    w_read = big.bytes_read() - 2 * 4096 * 2 * 4096
    assert float(w_read / (2 * 4096 * 14336)) == pytest.approx(8, rel=1e-9)
    with pytest.raises(RuleArgumentError, match="top_k"):
        op_cost("grouped_gemm", tokens=1, experts=2, top_k=3, N=1, K=1)
    # experts_read at its ceiling T*k = 2*2 = 4 (of 8): bf16 reads 2*(4 rows*64) activations plus
    # 4 experts' [64, 64] weights, 2*(4*64*64) = 32768: 33280 bytes; one more expert is impossible
    four = op_cost("grouped_gemm", tokens=2, experts=8, top_k=2, N=64, K=64, experts_read=4)
    assert four.bytes_read() == 33280
    with pytest.raises(
        RuleArgumentError, match=r"experts_read must be at most tokens\*top_k .* got experts_read=5"
    ):
        op_cost("grouped_gemm", tokens=2, experts=8, top_k=2, N=64, K=64, experts_read=5)


def test_attention_kv_dtype_and_shared_latent():
    C = dim("ctx")  # "C" is the capacity quantity
    fp8 = op_cost("attention", heads=32, kv_heads=8, q_len=1, kv_len=C, head_dim=128, kv_dtype="fp8")
    assert same(fp8.bytes_read(), 8 * C * 256 * 1 + 32 * 128 * 2)  # K,V in 1 byte; Q in bf16
    # absorbed MLA decode: 128 heads over one latent KV head, keys 576 wide, values 512 = a slice
    mla = op_cost(
        "attention", heads=128, kv_heads=1, q_len=1, kv_len=C, head_dim=576, v_head_dim=512, kv_shared=True
    )
    assert same(mla.bytes_read(), 2 * C * 576 + 2 * 128 * 576)
    assert same(mla.flops_on("tensor"), 128 * C * 2 * (576 + 512))


def test_all_to_all():
    # expert-parallel dispatch over 8 devices: 7/8 of each device's n elements leave it
    a = op_cost("all_to_all", elements=n, p=8)
    assert same(a.comm_terms["scale_up"], 2 * n * sympy.Rational(7, 8))
    assert a.comm_step_terms["scale_up"] == 1
    assert op_cost("all_to_all", elements=n, p=8, algorithm="ring").comm_step_terms["scale_up"] == 7
    assert op_cost("all_to_all", elements=n, p=1) == Cost.zero()
