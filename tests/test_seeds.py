"""Pin the seeds' published numbers, computed through the engine (issue 2, Must show).

Sources: shared/seeds/performance-modeling-and-profiling.txt (the profiling
article: sections 3.2-3.4 and its roofline_model.py) and
shared/seeds/prefill_decode_roofline.py.txt.
"""

import pytest
import sympy

from costmodel import (
    Hardware,
    MemoryLevel,
    Roof,
    as_float,
    bound,
    decode_attention_intensity,
    gemm_crossover,
    get_device,
    headroom,
    op_cost,
)
from costmodel.report import standard_ops

A100 = get_device("a100-sxm-40gb")
# The prefill/decode script's rounded H100 figures: 1000 TFLOP/s fp16, 3 TB/s.
H100_SEED = Hardware(
    "h100-seed",
    roofs=(Roof("tensor", "bf16", 1000e12, "seed script: H100_TFLOPS_FP16"),),
    memory=(MemoryLevel("dram", 3.0e12, None, "seed script: H100_BW_BYTES_PER_S"),),
)


def test_a100_bf16_ridge_is_200_6():
    # 312e12 FLOP/s / 1555e9 B/s = 200.64 FLOP/B (article section 3.2)
    assert as_float(A100.balance("tensor", "bf16")) == pytest.approx(200.6, abs=0.05)


# Article section 3.4 headroom table, A100 bf16. The softmax row uses the
# documented count of 5 ops per element (4 vector + 1 exp): with it the
# article's I/I* = 0.002 comes out; its script's 6 would give 0.003.
HEADROOM_TABLE = [
    # (row of standard_ops, I/I* printed, 2x compute, 2x bandwidth)
    ("elementwise add [16M]", 0.001, 1.00, 2.00),
    ("layernorm [4096,3072]", 0.007, 1.00, 2.00),
    ("softmax naive [4096,4096]", 0.002, 1.00, 2.00),
    ("gemm 512x4096x4096", 2.041, 2.00, 1.00),
    ("attention naive [N=4096,d=128]", 0.312, 1.00, 2.00),
    ("attention ideal-min [N=4096,d=128]", 10.307, 2.00, 1.00),
]


@pytest.mark.parametrize(("name", "ratio", "s_compute", "s_bw"), HEADROOM_TABLE)
def test_headroom_table(name, ratio, s_compute, s_bw):
    ops = dict(standard_ops())
    cost = ops[name]
    ridge = A100.balance("tensor", "bf16")
    # printed to three decimals in the article
    assert round(as_float(cost.intensity / ridge), 3) == pytest.approx(ratio, abs=1e-9)
    assert as_float(headroom(cost, A100, "compute", 2)) == pytest.approx(s_compute, abs=0.005)
    assert as_float(headroom(cost, A100, "memory", 2)) == pytest.approx(s_bw, abs=0.005)


def test_attention_naive_and_ideal_minimum():
    # N=4096, d=128, bf16, one head. Naive: D = b(4N^2 + 4Nd) = 2*(67,108,864 + 2,097,152)
    # = 138,412,032 B; F = 4N^2 d + 5N^2 = 8,673,820,672 -> I = 62.67.
    # Ideal minimum: D = 4 N d b = 4,194,304 B -> I = 2068.
    naive = op_cost("attention", heads=1, q_len=4096, kv_len=4096, head_dim=128, variant="naive")
    ideal = op_cost("attention", heads=1, q_len=4096, kv_len=4096, head_dim=128, variant="flash")
    assert naive.bytes == 138_412_032
    assert round(as_float(naive.bytes) / 1e6, 2) == 138.41
    assert round(as_float(naive.intensity), 1) == 62.7
    assert round(as_float(ideal.bytes) / 1e6, 2) == 4.19
    assert as_float(ideal.intensity) == pytest.approx(2068.0)
    assert naive.flops == ideal.flops  # FLOPs unchanged, x1.000
    # roofline time 0.089 ms -> 0.028 ms on A100 (article section 3.3)
    assert round(bound(naive, A100).seconds("lower") * 1e3, 3) == 0.089
    assert round(bound(ideal, A100).seconds("lower") * 1e3, 3) == 0.028
    assert bound(naive, A100).kind == "dram"
    assert bound(ideal, A100).kind == "tensor"


def test_gemm_4096_crosses_between_128_and_256_on_a100():
    # roofline_model.py section 5: [M,4096] x [4096,4096] flips in (128, 256].
    for m, kind in ((128, "dram"), (256, "tensor")):
        assert bound(op_cost("gemm", M=m, N=4096, K=4096), A100).kind == kind
    xo = gemm_crossover(N=4096, K=4096, hw=A100)
    # I(M) = 4096 M / (2M + 4096) = 200.64 -> M = 222.4
    assert 128 < as_float(xo.exact) <= 256
    assert as_float(xo.exact) == pytest.approx(200.6431 * 4096 / (4096 - 2 * 200.6431), rel=1e-6)


@pytest.mark.parametrize(
    ("name", "n", "k", "expected_integer"),
    [
        # exact root M* = balance*b*NK / (2NK - balance*b*(N+K)), balance = 1e15/3e12
        ("mlp down-proj", 18944, 3584, 375),
        ("mlp gate/up", 3584, 18944, 375),
        ("qkv projection", 3584 + 2 * 4 * 128, 3584, 400),
        ("square 4096", 4096, 4096, 399),
    ],
)
def test_h100_qwen_mlp_crossover_vs_asymptote(name, n, k, expected_integer):
    bal = sympy.Rational(1000, 3)
    xo = gemm_crossover(N=n, K=k, hw=H100_SEED)
    hand = bal * 2 * n * k / (2 * n * k - bal * 2 * (n + k))
    assert sympy.simplify(xo.exact - hand) == 0
    assert xo.integer == expected_integer
    # brute force: the smallest M with AI >= balance, as the seed's bisection does
    ai = lambda m: sympy.Rational(2 * m * n * k, 2 * (m * k + k * n + m * n))  # noqa: E731
    assert ai(expected_integer) >= bal > ai(expected_integer - 1)
    # the asymptote balance*b/2 = 333.3 underestimates: finite N, K add the 1/N + 1/K term
    assert as_float(xo.asymptotic) == pytest.approx(1000 / 3)
    assert as_float(xo.exact) > as_float(xo.asymptotic)


@pytest.mark.parametrize(("kv_heads", "expected"), [(28, 1), (4, 7), (1, 28)])
def test_decode_attention_intensity_mha_gqa_mqa(kv_heads, expected):
    # 2*H_q/(H_kv*b) with H_q = 28, bf16 (seed script, print_attention_ai)
    assert decode_attention_intensity(28, kv_heads, "bf16") == expected
