"""Importer defects a review found, each pinned to a hand count or to another frontend.

Every expected number comes from the op's definition (``2*M*N*K`` for a matmul), from another
frontend the docs say agrees (JAX, ``build_model``), or from the input itself.
"""

import pytest

from costmodel.keys import COST, OP, PARAMS


def _gemms(g):
    return [d for _, d in g.nodes(data=True) if d.get(OP) in ("gemm", "batched_gemm")]


# ------------------------------------------------------------------ 1-D matmul operands
# (left shape, right shape, M, N, K): numpy's matmul reads a 1-D operand as a vector
MATVEC = [
    ((8, 64), (64,), 8, 1, 64),  # matrix x vector
    ((4, 8, 64), (64,), 32, 1, 64),  # batched matrix x vector
    ((64,), (64,), 1, 1, 64),  # dot product
    ((64,), (64, 16), 1, 16, 64),  # vector x matrix
]


@pytest.mark.parametrize(("a", "b", "m", "n", "k"), MATVEC)
def test_torch_matmul_with_a_vector_operand(a, b, m, n, k):
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import from_exported_program

    class MM(torch.nn.Module):
        def forward(self, x, y):
            return x @ y

    ep = torch.export.export(MM(), (torch.randn(*a), torch.randn(*b)))
    (node,) = _gemms(from_exported_program(ep))
    assert (node[PARAMS]["M"], node[PARAMS]["N"], node[PARAMS]["K"]) == (m, n, k)
    assert node[COST].flops == 2 * m * n * k
    assert node[COST].bytes == 4 * (m * k + k * n + m * n)  # fp32 A, B and C, each once


@pytest.mark.parametrize(("a", "b", "m", "n", "k"), MATVEC)
def test_onnx_matmul_with_a_vector_operand(a, b, m, n, k):
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    from graphs.importers import from_onnx

    out = [*a[:-1], *b[:-2], b[-1]] if len(b) > 1 else list(a[:-1])
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("MatMul", ["A", "B"], ["Y"])],
            "g",
            [vi("A", TensorProto.FLOAT, list(a)), vi("B", TensorProto.FLOAT, list(b))],
            [vi("Y", TensorProto.FLOAT, out or None)],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    (node,) = _gemms(from_onnx(model))
    assert node[COST].flops == 2 * m * n * k
    assert node[COST].bytes == 4 * (m * k + k * n + m * n)


def test_matrix_vector_agrees_with_jax():
    pytest.importorskip("jax", reason="jax extra not installed")
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    import jax.numpy as jnp

    from graphs.importers import from_exported_program, from_jax

    class MM(torch.nn.Module):
        def forward(self, x, y):
            return x @ y

    gt = from_exported_program(torch.export.export(MM(), (torch.randn(4, 8, 64), torch.randn(64))))
    gj = from_jax(lambda x, y: x @ y, jnp.ones((4, 8, 64)), jnp.ones(64))
    assert [d[COST].flops for d in _gemms(gt)] == [d[COST].flops for d in _gemms(gj)] == [2 * 32 * 64]


# ------------------------------------------------------------------ SDPA's is_causal per overload
N_Q, HEADS, D_HEAD = 64, 4, 16
# causal self-attention scores N(N+1)/2 pairs per head; QK^T and PV cost 2*d each per pair
CAUSAL_TENSOR_FLOPS = 2 * HEADS * (D_HEAD + D_HEAD) * N_Q * (N_Q + 1) // 2


def _sdpa_overloads(torch):
    aten = torch.ops.aten
    # each overload with is_causal=True passed positionally, at the overload's own place
    return [
        (aten.scaled_dot_product_attention.default, (None, 0.0, True)),
        (aten._scaled_dot_product_flash_attention_for_cpu.default, (0.0, True)),
        # CUDA's flash kernel: its uint64 philox seeds are priced as int64, not refused
        (aten._scaled_dot_product_flash_attention.default, (0.0, True)),
        (aten._scaled_dot_product_efficient_attention.default, (None, False, 0.0, True)),
        (aten._scaled_dot_product_cudnn_attention.default, (None, False, 0.0, True)),
    ]


@pytest.mark.parametrize("which", range(5))
def test_sdpa_overloads_read_is_causal_at_their_own_position(which):
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import from_graph_module

    op, extra = _sdpa_overloads(torch)[which]
    fx = torch.fx.Graph()
    q, k, v = (fx.placeholder(x) for x in "qkv")
    fx.output(fx.call_function(op, (q, k, v, *extra)))
    x = torch.randn(1, HEADS, N_Q, D_HEAD)
    g = from_graph_module(torch.fx.GraphModule(torch.nn.Module(), fx), (x, x, x))
    (node,) = [d for _, d in g.nodes(data=True) if d.get(OP) == "attention"]
    assert node[PARAMS]["causal"] is True
    assert node[COST].flops_on("tensor") == CAUSAL_TENSOR_FLOPS


def test_torch_backend_keeps_is_causal_through_aot_autograd():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import torch_backend

    class Causal(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    x = torch.randn(1, HEADS, N_Q, D_HEAD)
    backend = torch_backend("h100")
    torch.compile(Causal(), backend=backend)(x, x, x)
    (captured,) = backend.report.graphs
    (node,) = [d for _, d in captured.graph.nodes(data=True) if d.get(OP) == "attention"]
    assert node[PARAMS]["causal"] is True
    assert backend.report.matmul_flops() == CAUSAL_TENSOR_FLOPS


# ------------------------------------------------------------------ ONNX Attention
def _onnx_attention(inputs, shapes, outputs=("Y",), **attrs):
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    node = helper.make_node("Attention", list(inputs), list(outputs), **attrs)
    graph_inputs = [vi(n, TensorProto.FLOAT, s) for n, s in shapes.items()]
    graph_outputs = [vi(o, TensorProto.FLOAT, None) for o in outputs]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def test_onnx_attention_past_key_value_are_the_cache():
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from graphs.importers import from_onnx

    b, h, hkv, d, past = 2, 4, 2, 16, 4096
    model = _onnx_attention(
        ["Q", "K", "V", "", "pk", "pv"],  # no mask; past_key and past_value in their slots
        {
            "Q": [b, h, 1, d],
            "K": [b, hkv, 1, d],
            "V": [b, hkv, 1, d],
            "pk": [b, hkv, past, d],
            "pv": [b, hkv, past, d],
        },
        outputs=("Y", "present_k", "present_v"),
    )
    g = from_onnx(model)
    node = g.nodes["Attention_0"]
    kv = past + 1  # the cache and the new token
    assert node[PARAMS]["kv_len"] == kv
    assert node[COST].flops_on("tensor") == 2 * b * h * 1 * kv * (d + d)  # one query, every key
    # fp32: Q read, K and V over every key once per KV head, O written
    assert node[COST].bytes == 4 * (b * h * d + b * hkv * kv * 2 * d + b * h * d)
    assert g.edges["pk", "Attention_0"]["bytes"] == 4 * b * hkv * past * d  # the cache's read is priced


def test_onnx_attention_3d_inputs_split_heads_by_attribute():
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from graphs.importers import from_onnx

    b, h, hkv, s, d = 2, 4, 2, 64, 16
    four = _onnx_attention(
        ["Q", "K", "V"], {"Q": [b, h, s, d], "K": [b, hkv, s, d], "V": [b, hkv, s, d]}, is_causal=1
    )
    three = _onnx_attention(
        ["Q", "K", "V"],
        {"Q": [b, s, h * d], "K": [b, s, hkv * d], "V": [b, s, hkv * d]},
        is_causal=1,
        q_num_heads=h,
        kv_num_heads=hkv,
    )
    n4, n3 = (from_onnx(m).nodes["Attention_0"] for m in (four, three))
    want = {"batch": b, "heads": h, "kv_heads": hkv, "q_len": s, "kv_len": s, "head_dim": d, "v_head_dim": d}
    for node in (n4, n3):
        assert {k: node[PARAMS][k] for k in want} == want
        assert node[COST].flops_on("tensor") == 2 * b * h * (d + d) * s * (s + 1) // 2  # causal pairs
    assert n3[COST] == n4[COST]  # the same tensors in either layout


# ------------------------------------------------------------------ from_hf_layerwise on unlike layers
def _tiny_causal_lm(config_cls, model_cls, **extra):
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    cfg = config_cls(
        hidden_size=64,
        intermediate_size=176,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=3,
        vocab_size=256,
        head_dim=16,
        **extra,
    )
    with torch.device("meta"):
        return model_cls(cfg)


def test_layerwise_refuses_a_dense_layer_before_moe_layers():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    from costmodel.errors import CostModelError
    from graphs.importers import from_hf_layerwise

    model = _tiny_causal_lm(
        transformers.Qwen3MoeConfig,
        transformers.Qwen3MoeForCausalLM,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        mlp_only_layers=[0],  # layer 0 dense, layers 1 and 2 mixtures of experts
    )
    ids = torch.zeros((1, 8), dtype=torch.long, device="meta")
    with pytest.raises(CostModelError, match=r"not alike \(layer 1's mlp class is Qwen3MoeSparseMoeBlock"):
        from_hf_layerwise(model, ids, dynamic=False)


def test_layerwise_refuses_mixed_layer_types():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    from costmodel.errors import CostModelError
    from graphs.importers import from_hf_layerwise

    model = _tiny_causal_lm(
        transformers.Qwen3Config,
        transformers.Qwen3ForCausalLM,
        use_sliding_window=True,
        sliding_window=4,
        layer_types=["full_attention", "full_attention", "sliding_attention"],
    )
    ids = torch.zeros((1, 8), dtype=torch.long, device="meta")
    with pytest.raises(CostModelError, match=r"layer 2 is 'sliding_attention' in config\.layer_types"):
        from_hf_layerwise(model, ids, dynamic=False)


# ------------------------------------------------------------------ hf_layer_graph's sliding window
TINY_GEMMA3 = {
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"],  # the exported layer 0 slides
}


def _attention_node(g):
    (node,) = [d for _, d in g.nodes(data=True) if d.get(OP) == "attention"]
    return node


def test_hf_layer_decode_of_a_sliding_layer_attends_to_the_window():
    pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    from graphs.importers.hf_layer import hf_layer_graph

    b, h, hkv, d, w = 2, 4, 2, 16, 8
    g = hf_layer_graph(TINY_GEMMA3, "decode", batch=b, ctx=32)
    assert g.graph["hf_layer"]["window"] == w and g.graph["hf_layer"]["cached"] == w - 1
    node = _attention_node(g)
    assert node[PARAMS]["kv_len"] == w  # the 7 cached tokens the window keeps and the new one
    assert node[COST].flops_on("tensor") == 2 * b * h * w * (d + d)
    assert node[COST].bytes == 2 * (b * h * d + b * hkv * w * 2 * d + b * h * d)  # bf16 Q, K, V, O
    full = dict(TINY_GEMMA3, layer_types=["full_attention", "sliding_attention"])
    assert _attention_node(hf_layer_graph(full, "decode", batch=b, ctx=32))[PARAMS]["kv_len"] == 33


def test_hf_layer_prefill_of_a_sliding_layer_scores_the_window_pairs():
    pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    from graphs.importers.hf_layer import hf_layer_graph

    h, d, w, s = 4, 16, 8, 32
    node = _attention_node(hf_layer_graph(TINY_GEMMA3, "prefill", batch=1, seq=s))
    pairs = sum(min(i, w) for i in range(1, s + 1))  # query i sees the last min(i, w) keys
    assert node[COST].flops_on("tensor") == 2 * h * pairs * (d + d)


def test_hf_layer_refuses_a_dynamic_decode_of_a_sliding_layer():
    pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    from costmodel.errors import CostModelError
    from graphs.importers.hf_layer import hf_layer_graph

    with pytest.raises(CostModelError, match=r"sliding-window layer \(window 8\).*dynamic=False"):
        hf_layer_graph(TINY_GEMMA3, "decode", batch=2, ctx=32, dynamic=True)


@pytest.mark.slow
def test_hf_layer_gemma3_27b_sliding_decode_equals_build_model():
    pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    from graphs import build_model
    from graphs.importers.hf_layer import hf_layer_graph
    from models import get_model
    from models.resolver import config_data

    exported = _attention_node(hf_layer_graph(config_data("gemma-3-27b"), "decode", batch=8, ctx=4096))
    # the builders count ctx as every key of the step: the export's 4,096 cached + 1 new
    built = build_model(get_model("gemma-3-27b"), "decode", batch=8, ctx=4097)
    sliding = [d for _, d in built.nodes(data=True) if d.get(OP) == "attention" and d[PARAMS].get("window")]
    assert sliding and all(d[COST] == exported[COST] for d in sliding)


# ------------------------------------------------------------------ empty tensors, one rule everywhere
def _op_total(g):
    from costmodel.graph import graph_total

    return graph_total(g, kinds=["op"])


def test_an_op_on_an_empty_tensor_is_priced_zero_and_counted_in_every_frontend():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("onnx", reason="onnx extra not installed")
    pytest.importorskip("jax", reason="jax extra not installed")
    import jax.numpy as jnp
    from onnx import TensorProto, helper

    from graphs.importers import from_exported_program, from_jax, from_onnx

    # a Linear over zero rows does nothing
    gt = from_exported_program(torch.export.export(torch.nn.Linear(64, 64), (torch.randn(0, 64),)))
    assert gt.graph["empty_ops"] == {"linear": 1}
    assert _op_total(gt).flops == 0 and _op_total(gt).bytes == 0
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["A", "B"], ["Y"])],
            "g",
            [vi("A", TensorProto.FLOAT, [0, 64]), vi("B", TensorProto.FLOAT, [0, 64])],
            [vi("Y", TensorProto.FLOAT, [0, 64])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    go = from_onnx(model)
    assert go.graph["empty_ops"] == {"Add": 1} and go.graph["unknown_ops"] == {}
    assert _op_total(go).flops == 0 and _op_total(go).bytes == 0
    gj = from_jax(lambda a: a * 2, jnp.ones((0, 64)))
    assert gj.graph["empty_ops"] == {"mul": 1}
    assert _op_total(gj).flops == 0 and _op_total(gj).bytes == 0


def test_an_empty_operand_moves_nothing_but_the_op_still_works_on_the_rest():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import from_exported_program

    class Cat(torch.nn.Module):
        def forward(self, past, new):
            return torch.cat([past, new], dim=1)

    g = from_exported_program(torch.export.export(Cat(), (torch.randn(2, 0, 4), torch.randn(2, 1, 4))))
    assert g.graph["empty_ops"] == {}
    assert (
        _op_total(g).bytes == 4 * 8 + 4 * 8
    )  # the 8 new fp32 values read and written; the empty past nothing


# ------------------------------------------------------------------ ONNX element types
def test_onnx_int4_weight_is_held_and_its_dequantising_cast_reads_it():
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    from costmodel.keys import KIND, NodeKind
    from graphs.importers import from_onnx

    for code in (TensorProto.INT4, TensorProto.UINT4):
        w4 = helper.make_tensor("W4", code, [64, 8], [0] * 512)
        vi = helper.make_tensor_value_info
        model = helper.make_model(
            helper.make_graph(
                [
                    helper.make_node("Cast", ["W4"], ["Wf"], to=TensorProto.FLOAT),
                    helper.make_node("MatMul", ["A", "Wf"], ["Y"]),
                ],
                "g",
                [vi("A", TensorProto.FLOAT, [4, 64])],
                [vi("Y", TensorProto.FLOAT, [4, 8])],
                [w4],
            ),
            opset_imports=[helper.make_opsetid("", 21)],
        )
        g = from_onnx(model)
        assert g.nodes["W4"][KIND] == NodeKind.WEIGHT
        assert g.nodes["W4"][COST].footprint == 64 * 8 // 2  # 4 bits an element
        assert g.nodes["Cast_0"][COST].bytes == 64 * 8 // 2 + 64 * 8 * 4  # int4 read, fp32 written


def test_onnx_element_type_without_a_dtype_is_refused_by_name():
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    from graphs.importers import from_onnx
    from graphs.importers.onnx import ONNXModelError

    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Mul", ["A", "B"], ["Y"])],
            "g",
            [vi("A", TensorProto.FLOAT, [1024]), vi("B", TensorProto.INT16, [1024])],
            [vi("Y", TensorProto.FLOAT, [1024])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(ONNXModelError, match="tensor 'B' has element type INT16"):
        from_onnx(model)


# ------------------------------------------------------------------ data-dependent sizes
def test_a_data_dependent_size_imports_and_is_priced_in_its_symbol():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import from_exported_program

    class NonZero(torch.nn.Module):
        def forward(self, a):
            return torch.nonzero(a) * 2

    g = from_exported_program(torch.export.export(NonZero(), (torch.randn(8, 64),)))
    assert g.graph["unknown_ops"] == {"aten.nonzero.default": 1}
    (mul,) = [d for _, d in g.nodes(data=True) if d.get(OP) == "elementwise"]
    (rows,) = mul[COST].bytes.free_symbols  # torch's symbol for the count of nonzero entries
    # [rows, 2] int64 indices read and written once
    assert mul[COST].bytes.subs(rows, 5) == 2 * (5 * 2 * 8)


# ------------------------------------------------------------------ --hf-layer on a bad config.json
BAD_CONFIGS = [
    # a negative size transformers accepts and torch refuses when it builds the layer
    ({"intermediate_size": -5}, "negative dimension -5"),
    # transformers' own strict validation, which says why on its second line
    ({"num_attention_heads": 5, "head_dim": None}, "not a multiple of the number of attention heads"),
]


@pytest.mark.parametrize(("change", "why"), BAD_CONFIGS)
def test_fusion_plan_hf_layer_refuses_a_bad_config_as_a_user_error(tmp_path, capsys, change, why):
    pytest.importorskip("torch", reason="torch extra not installed")
    pytest.importorskip("transformers", reason="transformers not installed")
    import json

    from graphs.cli import main

    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "num_hidden_layers": 2,
        "vocab_size": 256,
        "head_dim": 16,
    }
    config.update(change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    code = main(
        ["fusion", "plan", str(path), "--hf-layer", "--phase", "decode", "--batch", "2", "--ctx", "16"]
    )
    err = capsys.readouterr().err
    assert code == 2  # the user's input, not an internal error (3)
    assert "internal error" not in err and why in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ JAX scan over a symbolic length
def test_jax_scan_over_a_symbolic_length_repeats_its_body_symbolically():
    jax = pytest.importorskip("jax", reason="jax extra not installed")
    import jax.numpy as jnp
    from jax import export

    from graphs.importers import from_jax

    def running_sum(a):
        return jax.lax.scan(lambda c, r: (c + r, None), jnp.zeros(64), a)[0]

    (b,) = export.symbolic_shape("b")  # jax's own dimension variable, not a sympy symbol
    sym = _op_total(from_jax(running_sum, jax.ShapeDtypeStruct((b, 64), jnp.float32)))
    fixed = _op_total(from_jax(running_sum, jax.ShapeDtypeStruct((5, 64), jnp.float32)))
    (steps,) = sym.flops.free_symbols
    assert fixed.flops == 5 * 64  # one add per element per step
    assert sym.flops.subs(steps, 5) == fixed.flops and sym.bytes.subs(steps, 5) == fixed.bytes


# ------------------------------------------------------------------ not a model
def test_onnx_empty_file_empty_model_and_wrong_types_are_refused(tmp_path):
    onnx = pytest.importorskip("onnx", reason="onnx extra not installed")
    from graphs.importers import from_onnx
    from graphs.importers.onnx import ONNXModelError

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")  # parses as an empty ModelProto
    with pytest.raises(ONNXModelError, match="has no graph nodes"):
        from_onnx(empty)
    with pytest.raises(ONNXModelError, match="has no graph nodes"):
        from_onnx(onnx.ModelProto())
    for bad in (None, b"abc", 3):
        with pytest.raises(
            ONNXModelError, match=f"takes an onnx.ModelProto or a path to one, got {type(bad).__name__}"
        ):
            from_onnx(bad)


def test_torch_importers_refuse_what_is_not_a_program():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from costmodel.errors import CostModelError
    from graphs.importers import from_exported_program
    from graphs.importers.torch_export import from_graph_module

    with pytest.raises(CostModelError, match=r"takes a torch\.export\.ExportedProgram, got NoneType"):
        from_exported_program(None)
    with pytest.raises(CostModelError, match=r"takes a torch\.fx\.GraphModule, got Linear"):
        from_graph_module(torch.nn.Linear(2, 2), (torch.randn(1, 2),))


# ------------------------------------------------------------------ dims keys that name nothing
def test_torch_dims_key_that_names_no_input_is_refused():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from torch.export import Dim

    from costmodel.errors import CostModelError
    from graphs.importers import from_exported_program

    class Proj(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 64))

        def forward(self, a):
            return a @ self.w

    ep = torch.export.export(Proj(), (torch.randn(8, 64),), dynamic_shapes={"a": {0: Dim("T")}})
    g = from_exported_program(ep, dims={"a": ("T",)})
    (node,) = _gemms(g)
    assert {str(s) for s in node[COST].flops.free_symbols} == {"T"}  # 2 * T * 64 * 64 in the caller's name
    with pytest.raises(CostModelError, match=r"dims names 'x', but the program's tensor inputs are: a$"):
        from_exported_program(ep, dims={"x": ("T",)})


def test_onnx_dims_key_that_names_no_dim_param_is_refused():
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    from graphs.importers import from_onnx
    from graphs.importers.onnx import ONNXModelError

    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("MatMul", ["A", "W"], ["Y"])],
            "g",
            [vi("A", TensorProto.FLOAT, ["s0", 64]), vi("W", TensorProto.FLOAT, [64, 8])],
            [vi("Y", TensorProto.FLOAT, ["s0", 8])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    (node,) = _gemms(from_onnx(model, dims={"s0": "T"}))
    assert {str(s) for s in node[COST].flops.free_symbols} == {"T"}
    with pytest.raises(ONNXModelError, match="dims names 's1', but the model's symbolic dimensions"):
        from_onnx(model, dims={"s1": "T"})


# ------------------------------------------------------------------ torch.fx symbolic traces
def test_fx_python_operators_are_costed_as_their_aten_ops_and_modules_named_by_class():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers import from_exported_program
    from graphs.importers.torch_export import from_graph_module

    class ConvHalf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv1d(8, 8, 3)
            self.p = torch.nn.AvgPool1d(1)  # a module no mapper prices (shape kept)

        def forward(self, a):
            y = self.p(self.c(a)) / 2.0
            y += a[..., :14]
            return y

    x = torch.randn(2, 8, 16)
    fx = from_graph_module(torch.fx.symbolic_trace(ConvHalf()), [x])
    ex = from_exported_program(torch.export.export(ConvHalf(), (x,)))
    assert fx.graph["unknown_ops"] == {"AvgPool1d": 1}  # the op, not the attribute 'p'
    n = 2 * 8 * 14  # the conv's output elements
    # the Conv1d module is priced as export's aten.conv1d: 2 * (2*8*14 outputs) * (8 inputs * 3 taps)
    # + one bias add per output
    convs = [[d[COST].flops for _, d in g.nodes(data=True) if d.get(OP) == "conv"] for g in (fx, ex)]
    assert convs == [[2 * n * 8 * 3 + n]] * 2
    for g in (fx, ex):
        ew = sorted(
            (d[COST].flops, d[COST].bytes) for _, d in g.nodes(data=True) if d.get(OP) == "elementwise"
        )
        # y / 2: one op per element, fp32 read and written; y += a: two fp32 reads and a write
        assert ew == [(n, 2 * 4 * n), (n, 3 * 4 * n)]


# ------------------------------------------------------------------ low: prims casts, Gemm transA
def test_prims_convert_element_type_is_a_cast():
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from graphs.importers.torch_export import from_graph_module

    fx = torch.fx.Graph()
    x = fx.placeholder("x")
    fx.output(fx.call_function(torch.ops.prims.convert_element_type.default, (x, torch.float16)))
    g = from_graph_module(torch.fx.GraphModule(torch.nn.Module(), fx), (torch.randn(4, 8),))
    assert g.graph["unknown_ops"] == {}
    (node,) = [d for _, d in g.nodes(data=True) if d.get(OP) == "copy"]
    assert node[COST].bytes == 32 * 4 + 32 * 2  # 32 fp32 values read, 32 fp16 written


@pytest.mark.parametrize("trans_a", [0, 1])
def test_onnx_gemm_trans_a_reads_m_and_k_from_the_transposed_operand(trans_a):
    pytest.importorskip("onnx", reason="onnx extra not installed")
    from onnx import TensorProto, helper

    from graphs.importers import from_onnx

    m, k, n = 4, 64, 8
    vi = helper.make_tensor_value_info
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Gemm", ["A", "W"], ["Y"], transA=trans_a)],
            "g",
            [vi("A", TensorProto.FLOAT, [k, m] if trans_a else [m, k]), vi("W", TensorProto.FLOAT, [k, n])],
            [vi("Y", TensorProto.FLOAT, [m, n])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    (node,) = _gemms(from_onnx(model))
    assert (node[PARAMS]["M"], node[PARAMS]["N"], node[PARAMS]["K"]) == (m, n, k)
    assert node[COST].flops == 2 * m * n * k


# ------------------------------------------------------------------ low: JAX coverage
def test_jax_exact_gelu_expm1_log1p_update_slice_and_random_are_costed_or_counted():
    jax = pytest.importorskip("jax", reason="jax extra not installed")
    import jax.numpy as jnp

    from graphs.importers import from_jax

    assert from_jax(lambda x: jax.nn.gelu(x, approximate=False), jnp.ones((4, 8))).graph["unknown_ops"] == {}
    g = from_jax(lambda x: jnp.expm1(x) + jnp.log1p(x), jnp.ones((4, 8)))
    sfu = {d["frontend_op"]: d[COST].flops_on("sfu") for _, d in g.nodes(data=True) if d.get(OP)}
    assert g.graph["unknown_ops"] == {} and sfu["expm1"] == sfu["log1p"] == 32  # one transcendental each
    g = from_jax(lambda a, u: jax.lax.dynamic_update_slice(a, u, (3,)), jnp.ones(16), jnp.ones(4))
    (node,) = [d for _, d in g.nodes(data=True) if d.get("frontend_op") == "dynamic_update_slice"]
    assert node[COST].bytes == 4 * 4 + 4 * 4  # the 4 fp32 values of the update read and written
    # a program drawing random numbers imports; what the table does not map is counted by name
    g = from_jax(lambda k: jax.random.normal(k, (8,)), jax.random.PRNGKey(0))
    assert g.graph["unknown_ops"].get("random_bits") == 1


def test_a_layout_torch_cannot_decide_is_said_once(monkeypatch):
    """Where torch cannot decide a reshape input's layout (a data-dependent size), the importer
    takes it as a contiguous view: an assumption, said once on the notes and listed in the graph.
    Which reshapes reach it is torch's to decide; the path is forced here for one reshape."""
    torch = pytest.importorskip("torch", reason="torch extra not installed")
    from costmodel import notes
    from graphs.importers import aten
    from graphs.importers.torch_export import from_exported_program

    def undecided(imp, n, val, torch):
        imp.assumed_contiguous.append(n.name)
        return True

    class M(torch.nn.Module):
        def forward(self, x):
            return x.reshape(4, 8) * 2

    monkeypatch.setattr(aten, "_contiguous", undecided)
    notes.clear()
    g = from_exported_program(torch.export.export(M(), (torch.ones(32),)))
    listed = g.graph["assumed_contiguous"]
    assert len(listed) == 1
    said = [s for s in notes.said() if "taken as contiguous views" in s]
    assert said == [
        f"note: 1 reshape(s) of a data-dependent size ({listed[0]}) taken as contiguous views (torch "
        "could not decide their layout): a copy, if one runs, is not priced"
    ]
