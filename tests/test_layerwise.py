"""Exporting one decoder layer and repeating it gives the whole export's totals, exactly."""

import json
import warnings
from importlib import resources

import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch extra not installed")
transformers = pytest.importorskip("transformers", reason="transformers (torch extra) not installed")
from torch.export import Dim  # noqa: E402

from costmodel.graph import graph_total  # noqa: E402
from graphs.importers.layerwise import from_hf_layerwise  # noqa: E402
from graphs.importers.torch_export import from_exported_program  # noqa: E402

warnings.filterwarnings("ignore")


@pytest.fixture(scope="module")
def tiny_hf():
    cfg = json.loads(resources.files("models").joinpath("configs", "tiny.json").read_text())
    config = transformers.LlamaConfig(
        **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.slow
def test_one_layer_repeated_equals_the_whole_export(tiny_hf):
    ids = torch.zeros((2, 8), dtype=torch.long)
    shapes = {"input_ids": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=2, max=256)}, "use_cache": None}
    whole = torch.export.export(
        tiny_hf, (), kwargs={"input_ids": ids, "use_cache": False}, dynamic_shapes=shapes, strict=False
    )
    full = graph_total(from_exported_program(whole, dims={"input_ids": ("B", "S")}), kinds=["op"])
    g = from_hf_layerwise(tiny_hf, ids)
    lw = graph_total(g, kinds=["op"])
    for unit in ("tensor", "vector", "sfu"):
        assert sympy.expand(lw.flops_on(unit) - full.flops_on(unit)) == 0, unit
    assert sympy.expand(lw.bytes - full.bytes) == 0
    weights = lambda gr: sympy.expand(graph_total(gr, kinds=["weight"]).footprint)  # noqa: E731
    assert weights(g) == weights(from_exported_program(whole))
    assert (
        g.graph["layerwise"]["layers"] == tiny_hf.config.num_hidden_layers == len(tiny_hf.model.layers) == 2
    )
