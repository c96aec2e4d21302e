"""``torch.compile(backend=graphs.importers.torch_backend(...))``: the model runs as in eager, and the
costed graphs' matmul FLOPs equal FlopCounterMode's on the same inputs.

FlopCounterMode has no formula for the CPU SDPA kernel, so the comparison runs the tiny Llama
with eager attention (its products as bmm, which FlopCounterMode counts): both sides then count
every matmul of the same forward pass.
"""

import json
import warnings
from importlib import resources

import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch extra not installed")
transformers = pytest.importorskip("transformers", reason="transformers (torch extra) not installed")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import graphs.importers  # noqa: E402
from costmodel.symbols import B, S  # noqa: E402

warnings.filterwarnings("ignore")


@pytest.fixture(scope="module")
def tiny_llama():
    cfg = json.loads(resources.files("models").joinpath("configs", "tiny.json").read_text())
    config = transformers.LlamaConfig(
        **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _flop_counter(model, ids):
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model(ids, use_cache=False)
    return fc.get_total_flops()


@pytest.mark.slow
def test_compiled_llama_runs_and_counts_like_flop_counter(tiny_llama):
    torch._dynamo.reset()
    ids = torch.randint(0, tiny_llama.config.vocab_size, (2, 16))
    backend = graphs.importers.torch_backend("h100")
    with torch.no_grad():
        want = tiny_llama(ids, use_cache=False).logits
        got = torch.compile(tiny_llama, backend=backend)(ids, use_cache=False).logits
    assert torch.equal(got, want)
    rep = backend.report
    assert len(rep.graphs) >= 1 and not rep.unknown_ops()
    assert int(rep.matmul_flops()) == _flop_counter(tiny_llama, ids)
    assert rep.step_time() > 0


@pytest.mark.slow
def test_dynamic_shapes_give_closed_forms(tiny_llama):
    """With dynamic=True the captured sizes are symbols; named B and S they give the FLOP count
    as a closed form that matches FlopCounterMode at other batch and sequence sizes."""
    torch._dynamo.reset()
    backend = graphs.importers.torch_backend("h100", dims={"input_ids": ("B", "S")})
    with torch.no_grad():
        torch.compile(tiny_llama, backend=backend, dynamic=True)(
            torch.zeros((2, 16), dtype=torch.long), use_cache=False
        )
    flops = backend.report.matmul_flops()
    assert flops.free_symbols == {B, S}
    for b, s in ((1, 5), (3, 24)):
        ids = torch.zeros((b, s), dtype=torch.long)
        assert int(flops.subs({B: b, S: s})) == _flop_counter(tiny_llama, ids)
    assert sympy.degree(sympy.expand(flops), S) == 2  # attention's S^2 next to the linear layers' S


def test_graph_breaks_give_one_cost_graph_each():
    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(32, 32)
            self.b = torch.nn.Linear(32, 32)

        def forward(self, x):
            y = self.a(x)
            torch._dynamo.graph_break()
            return self.b(torch.relu(y))

    torch._dynamo.reset()
    m, x = Broken().eval(), torch.randn(4, 32)
    backend = graphs.importers.torch_backend("a100")
    with torch.no_grad():
        assert torch.equal(torch.compile(m, backend=backend)(x), m(x))
    rep = backend.report
    assert len(rep.graphs) == 2
    assert int(rep.matmul_flops()) == 2 * (2 * 4 * 32 * 32)  # two 4x32 @ 32x32 GEMMs
    torch._dynamo.reset()
    assert len(graphs.importers.graph_breaks(m, x)) == 1


def test_bad_dims_name_the_inputs(tiny_llama):
    torch._dynamo.reset()

    class Two(torch.nn.Module):
        def forward(self, x, y):
            return x @ y

    backend = graphs.importers.torch_backend("h100", dims={"tokens": ("B", "S")})
    with pytest.raises(Exception, match="dims names 'tokens', but the captured tensor inputs are"):
        torch.compile(Two(), backend=backend, dynamic=True)(torch.randn(2, 3), torch.randn(3, 4))
