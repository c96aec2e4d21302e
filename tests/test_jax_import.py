"""The JAX importer against XLA's own cost analysis (``jax.jit(f).lower(...).cost_analysis()``).

Hand derivation for the MLP ``gelu_tanh(x @ W1 + b1) @ W2`` with x 8x16, W1 16x32, W2 32x4:
matmuls 2*8*16*32 + 2*8*32*4 = 10,240 FLOPs; the bias add and the tanh-GELU's elementwise ops
on 8x32 = 256 elements: add, x^3 (two multiplies), mul, add, mul, add, mul, mul = 9 per element,
2,304; one tanh per element, 256 transcendentals. XLA: 12,544 flops, 256 transcendentals.
"""

import pytest

jax = pytest.importorskip("jax", reason="jax not installed (pip install 'jax[cpu]')")
jnp = jax.numpy

from costmodel.graph import graph_total  # noqa: E402
from costmodel.keys import NodeKind  # noqa: E402
from graphs.importers.jax_import import compare_with_xla, from_jax  # noqa: E402


def mlp(x, w1, b1, w2):
    return jax.nn.gelu(x @ w1 + b1, approximate=True) @ w2


def attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def test_mlp_matches_xla_and_the_hand_count():
    args = (jnp.ones((8, 16)), jnp.ones((16, 32)), jnp.ones((32,)), jnp.ones((32, 4)))
    c = compare_with_xla(mlp, *args)
    assert c["matmul_flops"] == 2 * 8 * 16 * 32 + 2 * 8 * 32 * 4
    assert c["vector_flops"] == 9 * 256 and c["sfu_flops"] == 256
    assert c["xla_flops"] == c["matmul_flops"] + c["vector_flops"] == 12544
    assert c["xla_transcendentals"] == c["sfu_flops"] and c["unknown_ops"] == 0


def test_attention_block_matches_xla_by_convention():
    """Batched einsums become batched GEMMs; softmax's two reductions are the one convention
    difference (XLA: n - m per reduction, ours n)."""
    b, h, s, d = 2, 4, 16, 64
    q = k = v = jnp.ones((b, h, s, d))
    c = compare_with_xla(attention, q, k, v)
    assert c["matmul_flops"] == 2 * (2 * b * h * s * s * d)
    assert c["explained_flops"] == c["xla_flops"]
    assert c["sfu_flops"] == c["xla_transcendentals"] == b * h * s * s  # one exp per score
    assert c["vector_flops"] - c["explained_flops"] + c["matmul_flops"] == 2 * b * h * s  # the m's


def test_weights_and_unknown_ops():
    def f(x, w):
        return jax.lax.cumsum(x @ w, axis=0)  # cumsum: no mapper yet, kept by name

    g = from_jax(f, jnp.ones((4, 8)), jnp.ones((8, 8)), weights=[1])
    kinds = {n: d.get("kind") for n, d in g.nodes(data=True)}
    assert kinds["arg1"] == NodeKind.WEIGHT and kinds["arg0"] == NodeKind.INPUT
    assert g.graph["unknown_ops"] == {"cumsum": 1}
    assert float(graph_total(g, kinds=[NodeKind.OP]).flops_on("tensor")) == 2 * 4 * 8 * 8


def test_symbolic_shapes_become_closed_forms():
    """jax.export.symbolic_shape dimensions come through as the engine's own B and S."""
    from jax import export

    from costmodel.symbols import B, S

    b, s = export.symbolic_shape("B, S")
    x = jax.ShapeDtypeStruct((b, s, 16), jnp.float32)
    w1, w2 = jax.ShapeDtypeStruct((16, 32), jnp.float32), jax.ShapeDtypeStruct((32, 4), jnp.float32)
    g = from_jax(lambda x, w1, w2: jnp.tanh(x @ w1) @ w2, x, w1, w2, weights=[1, 2])
    t = graph_total(g, kinds=[NodeKind.OP])
    assert t.flops_on("tensor") == (2 * 16 * 32 + 2 * 32 * 4) * B * S
    assert t.flops_on("sfu") == 32 * B * S


# loops: M x K = 8 x 16 carry times a 16 x 16 weight, 2*M*N*K = 2*8*16*16 = 4096 FLOPs per trip
_X, _W = jnp.ones((8, 16)), jnp.ones((16, 16))
_MATMUL = 2 * 8 * 16 * 16


def _scan(x, w):
    return jax.lax.scan(lambda c, _: (c @ w, None), x, None, length=10)[0]


def test_scan_body_counts_once_per_trip():
    """XLA's cost analysis counts the body once (4096 + 2 of its loop counter); ours ten times."""
    c = compare_with_xla(_scan, _X, _W)
    assert c["matmul_flops"] == 10 * _MATMUL  # 40,960
    assert c["loops"] == 1 and c["explained_flops"] == _MATMUL  # the body once, as XLA counts
    assert 0 <= c["xla_flops"] - c["explained_flops"] <= 2  # XLA's counter: an add and a compare
    assert from_jax(_scan, _X, _W).graph["loops"] == [("scan", 10)]


def test_nested_scans_multiply():
    def f(x, w):
        inner = lambda d, _: (d @ w, None)  # noqa: E731
        return jax.lax.scan(
            lambda c, _: (jax.lax.scan(inner, c, None, length=4)[0], None), x, None, length=3
        )[0]

    c = compare_with_xla(f, _X, _W)
    assert c["matmul_flops"] == 3 * 4 * _MATMUL and c["explained_flops"] == _MATMUL


def test_static_fori_loop_is_a_scan_of_its_trip_count():
    """Was a TypeError (a Literal operand looked up in a dict); the counter's add is one FLOP a trip."""
    c = compare_with_xla(lambda x, w: jax.lax.fori_loop(0, 10, lambda i, c: c @ w, x), _X, _W)
    assert c["matmul_flops"] == 10 * _MATMUL and c["vector_flops"] == 10 and c["unknown_ops"] == 0


def test_counted_while_loops_scale_and_others_are_unknown():
    # i < 10 from 0 by 1: 10 bodies (a matmul and an add) and 11 compares
    def counted(x, w):
        return jax.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] @ w), (0, x))[1]

    c = compare_with_xla(counted, _X, _W)
    assert c["matmul_flops"] == 10 * _MATMUL and c["vector_flops"] == 10 + 11
    # a fori_loop whose bound is a constant inside jit traces to a while over (i, n, x): 7 trips
    jitted = jax.jit(lambda x, w: jax.lax.fori_loop(0, jnp.int32(7), lambda i, c: c @ w, x))
    assert from_jax(jitted, _X, _W).graph["loops"] == [("while", 7)]
    assert compare_with_xla(jitted, _X, _W)["matmul_flops"] == 7 * _MATMUL

    def traced(x, w, n):  # a traced bound: the trips are not known
        return jax.lax.fori_loop(0, n, lambda i, c: c @ w, x)

    g = from_jax(traced, _X, _W, 3)
    assert g.graph["unknown_ops"] == {"while": 1} and g.graph["loops"] == []
    assert float(graph_total(g, kinds=[NodeKind.OP]).flops_on("tensor")) == 0  # flagged, not guessed


def test_scan_over_a_stacked_input_a_closed_over_constant():
    """The body sees one 8 x 16 slice of the 5 x 8 x 16 stack; the stacked output's reduction
    reads all 5 * 8 * 16 = 640 elements. ``xs`` is closed over: a jaxpr constant, a weight."""
    xs = jnp.ones((5, 8, 16))

    def f(x, w):
        return jax.lax.scan(lambda c, xi: (c + xi @ w, jnp.tanh(xi)), x, xs)[1].sum()

    g = from_jax(f, _X, _W)
    assert g.nodes["const0"]["kind"] == NodeKind.WEIGHT
    t = graph_total(g, kinds=[NodeKind.OP])
    assert t.flops_on("tensor") == 5 * _MATMUL
    assert t.flops_on("sfu") == 5 * 8 * 16  # one tanh per element per trip
    assert t.flops_on("vector") == 5 * 8 * 16 + 5 * 8 * 16  # the add per trip, then the sum over the stack
    # the constant is held like any weight: 5 * 8 * 16 float32 values = 2560 bytes resident, and the
    # whole graph (sources included) totals without a missing cost
    assert graph_total(g).footprint_terms["weights"] == 5 * 8 * 16 * 4
