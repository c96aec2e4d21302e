"""torch.export / torch.fx / ONNX importers against our own graphs and FlopCounterMode.

Skipped with a reason when the optional extras are missing:
``pip install torch==2.13.0 'transformers>=4.45'`` (and ``onnx onnxscript onnxruntime`` for ONNX).
"""

import json
import warnings
from importlib import resources

import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch extra not installed")
transformers = pytest.importorskip("transformers", reason="transformers (torch extra) not installed")
from torch.export import Dim  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from costmodel import get_device  # noqa: E402
from costmodel.graph import COST, OP, graph_total, validate_graph  # noqa: E402
from costmodel.passes import Pipeline, annotate_hardware, bind_dims, classify, report, suggest_fusion  # noqa: E402
from costmodel.symbols import B, S  # noqa: E402
from graphs import build_model  # noqa: E402
from graphs.importers.torch_export import from_exported_program, from_graph_module  # noqa: E402
from models import get_model  # noqa: E402

warnings.filterwarnings("ignore")


@pytest.fixture(scope="module")
def tiny_hf():
    cfg = json.loads(resources.files("models").joinpath("configs", "tiny.json").read_text())
    config = transformers.LlamaConfig(
        **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def exported(tiny_hf):
    ids = torch.zeros((2, 8), dtype=torch.long)
    b, s = Dim("batch", min=1, max=64), Dim("seq", min=2, max=256)
    return torch.export.export(
        tiny_hf,
        (),
        kwargs={"input_ids": ids, "use_cache": False},
        dynamic_shapes={"input_ids": {0: b, 1: s}, "use_cache": None},
        strict=False,
    )


def tensor_flops(g):
    return sympy.expand(graph_total(g, kinds=["op"]).flops_on("tensor"))


# the tiny config: d=64, I=176, H=4, H_kv=2, d_head=16, V=256, L=2
L, H, HD = 2, 4, 16
PER_TOKEN = 2 * L * (64 * 64 * 2 + 2 * 64 * 32 + 3 * 64 * 176) + 2 * 64 * 256  # projections, MLP, lm_head
MASKED_HALF = 4 * L * B * H * HD * S * (S - 1) / 2  # QK^T and PV over the masked upper triangle


@pytest.mark.slow
@pytest.mark.parametrize("decompose", [False, True])
def test_export_symbolic_total_equals_our_graph(exported, decompose):
    ep = exported.run_decompositions() if decompose else exported
    g = from_exported_program(ep, dims={"input_ids": ("B", "S")})
    validate_graph(g)
    assert g.graph["unknown_ops"] == {}
    ours = tensor_flops(build_model(get_model("tiny"), "prefill", logits="all"))
    theirs = tensor_flops(g)
    # transformers builds an explicit causal mask, so SDPA (or its decomposition) computes the whole
    # S x S score matrix; our FlashAttention count skips the masked half. Nothing else differs.
    assert sympy.simplify(theirs - ours - MASKED_HALF) == 0
    assert sympy.simplify(ours - B * S * PER_TOKEN - 4 * L * B * H * HD * S * (S + 1) / 2) == 0
    if not decompose:  # declared causal, the composite SDPA counts the same pairs as we do
        causal = from_exported_program(ep, dims={"input_ids": ("B", "S")}, masked_sdpa_is_causal=True)
        assert sympy.simplify(tensor_flops(causal) - ours) == 0


@pytest.mark.parametrize(("b", "s"), [(2, 16), (3, 40)])
def test_flopcounter_at_two_shapes(tiny_hf, exported, b, s):
    imported = tensor_flops(from_exported_program(exported, dims={"input_ids": ("B", "S")})).subs(
        {B: b, S: s}
    )
    ids = torch.zeros((b, s), dtype=torch.long)
    counts = {}
    for impl in ("eager", "sdpa"):
        tiny_hf.config._attn_implementation = impl
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            tiny_hf(ids, use_cache=False)
        counts[impl] = fc.get_total_flops()
    tiny_hf.config._attn_implementation = "sdpa"
    # eager attention runs as bmm: FlopCounterMode sees every matmul, and agrees exactly
    assert imported == counts["eager"]
    # the CPU SDPA kernel has no FlopCounterMode formula: it counts zero for attention,
    # so the difference is exactly the full-matrix attention term 4 * L * B * H * d_head * S^2
    assert imported - counts["sdpa"] == 4 * L * b * H * HD * s * s


def test_fx_graph_module_views_casts_and_cache_updates():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(32, 64, bias=True)
            self.register_buffer("cache", torch.zeros(4, 16, 64))

        def forward(self, x, pos: int = 3):
            y = self.lin(x)  # [4, 64]: one GEMM with bias
            y = torch.relu(y).to(torch.float16)  # a cast is a copy: read fp32, write fp16
            z = y.view(4, 1, 64)  # a view: free
            self.cache[:, pos : pos + 1] = z.float()  # in-place update of one slot
            return y

    m = Block()
    gm = torch.fx.symbolic_trace(m)
    g = from_graph_module(gm, [torch.randn(4, 32)])
    validate_graph(g)
    by_op = {}
    for _, d in g.nodes(data=True):
        if d.get(OP):
            by_op.setdefault(d[OP], []).append(d[COST])
    assert by_op["gemm"][0].flops_on("tensor") == 2 * 4 * 64 * 32
    casts = [c for c in by_op["copy"] if c.bytes == 4 * 64 * (4 + 2)]
    assert casts, "the fp32 -> fp16 cast moves 4*64*(4+2) bytes"
    # the cache update charges the 4 x 1 x 64 slice it writes, never the 4 x 16 x 64 cache
    updates = [c for c in by_op["copy"] if c.bytes_written() == 4 * 64 * 4 and c.bytes_read() == 4 * 64 * 4]
    assert updates
    assert all(c.bytes == 0 for c in by_op["view"])
    # the node meta of the FX graph is annotated too
    assert any("costmodel" in n.meta for n in gm.graph.nodes)


def test_unknown_ops_are_reported_not_dropped():
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    gm = torch.fx.symbolic_trace(Odd())
    g = from_graph_module(gm, [torch.randn(8, 16)])
    assert sum(g.graph["unknown_ops"].values()) == 1
    assert any(d.get("unknown") for _, d in g.nodes(data=True))
    with pytest.raises(Exception, match="no cost mapping"):
        from_graph_module(torch.fx.symbolic_trace(Odd()), [torch.randn(8, 16)], strict=True)


def test_torch_pass_manager_and_our_pipeline(exported):
    from torch.fx.passes.infra.pass_manager import PassManager

    from graphs.importers.torch_export import CostAnnotationPass

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()))
    p = CostAnnotationPass(example_inputs=[torch.randn(2, 16)])
    PassManager(passes=[p])(gm)
    assert p.graph is not None and any("costmodel" in n.meta for n in gm.graph.nodes)

    g = from_exported_program(exported, dims={"input_ids": ("B", "S")})
    pipe = Pipeline(
        [
            bind_dims({"B": 2, "S": 64}),
            annotate_hardware("h100"),
            classify("h100"),
            suggest_fusion("h100"),
            report(),
        ]
    )
    out = pipe(g)
    reps = out.graph["reports"]
    assert set(reps) == {"classify", "suggest_fusion", "report"}
    assert reps["report"]["flops_by_unit"]["tensor"] == tensor_flops(g).subs({B: 2, S: 64})
    assert any("roofline" in d for _, d in out.nodes(data=True))
    assert "roofline" not in next(d for _, d in g.nodes(data=True) if d.get(OP) == "gemm")  # input untouched
    assert get_device("h100").name in {r.get("device") for _, r in out.nodes(data="roofline") if r}


@pytest.mark.slow
def test_onnx_gives_the_same_matmul_totals(exported):
    pytest.importorskip("onnx", reason="onnx extra not installed")
    pytest.importorskip("onnxscript", reason="onnxscript (onnx extra) not installed")
    from graphs.importers.onnx import from_onnx

    proto = torch.onnx.export(exported, dynamo=True, verbose=False).model_proto
    dims = [d.dim_param for d in proto.graph.input[0].type.tensor_type.shape.dim]
    g = from_onnx(proto, dims={dims[0]: "B", dims[1]: "S"})
    validate_graph(g)
    assert g.graph["unknown_ops"] == {}
    decomposed = from_exported_program(exported.run_decompositions(), dims={"input_ids": ("B", "S")})
    assert sympy.simplify(tensor_flops(g) - tensor_flops(decomposed)) == 0


def test_sdpa_is_causal_counts_the_causal_pairs():
    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    q = torch.randn(1, 4, 32, 16)
    ep = torch.export.export(Attn(), (q, q, q))
    g = from_exported_program(ep)
    att = next(d for _, d in g.nodes(data=True) if d.get(OP) == "attention")
    assert att["params"]["causal"] is True
    # 4 heads x 32*33/2 pairs x 4*16 FLOPs on the tensor unit
    assert att[COST].flops_on("tensor") == 4 * (32 * 33 // 2) * 4 * 16


def test_example_script_runs(capsys):
    import runpy
    from pathlib import Path

    runpy.run_path(
        str(Path(__file__).resolve().parents[1] / "examples" / "export_report.py"), run_name="__main__"
    )
    out = capsys.readouterr().out
    assert "closed forms" in out and "16777216*B*S" in out and "suggested fusions" in out


def test_imported_nodes_carry_roles(exported):
    """The importers' mappers set each node's role (costmodel.keys.Role), so analyses select
    imported nodes by role as they select built ones: the tiny Llama's 2 x 7 projections plus
    its lm_head are linear (the lm_head is a plain matmul to the importer), SDPA is attention,
    the token gather is an embedding; its RMSNorms arrive decomposed (pow, mean, rsqrt, mul)."""
    from collections import Counter

    from costmodel.keys import ROLE, Role

    g = from_exported_program(exported, dims={"input_ids": ("B", "S")})
    ops = [d for _, d in g.nodes(data=True) if d.get(OP) is not None]
    assert all(isinstance(d.get(ROLE), Role) for d in ops)
    roles = Counter(d[ROLE] for d in ops)
    assert roles[Role.LINEAR] == 2 * 7 + 1
    assert roles[Role.ATTENTION] == 2
    assert roles[Role.EMBEDDING] == 1
