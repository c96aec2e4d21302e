"""One Hugging Face decoder layer from its config.json on the meta device, planned exactly."""

import pytest

pytest.importorskip("torch", reason="torch extra not installed")
pytest.importorskip("transformers", reason="transformers not installed")

from costmodel.errors import CostModelError
from costmodel.fusion_plan import plan_fusions, solver_available
from costmodel.graph import COST, OP, op_nodes
from graphs.importers.hf_layer import hf_layer_graph
from models.resolver import config_data

exact_only = pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")


def test_bad_requests_are_refused_in_one_line():
    tiny = config_data("tiny")
    with pytest.raises(CostModelError, match="phase must be one of"):
        hf_layer_graph(tiny, "train")
    with pytest.raises(CostModelError, match="batch must be a positive integer, got 0"):
        hf_layer_graph(tiny, "prefill", batch=0)
    with pytest.raises(CostModelError, match="model_type missing"):
        hf_layer_graph({"hidden_size": 64}, "prefill")


@pytest.mark.slow
@exact_only
def test_tiny_llama_layer_matmuls_and_a_certified_plan():
    """models/configs/tiny.json: hidden 64, 4 query heads and 2 KV heads of 16, MLP 176. A prefill
    of 8 tokens runs the seven projections as GEMMs of 8 rows:

    q, o: 2 x 8 x 64 x 64 = 65,536 each; k, v: 2 x 8 x 64 x 32 = 32,768 each;
    gate, up, down: 2 x 8 x 64 x 176 = 180,224 each: 737,280 FLOPs in all.

    SDPA runs alone under the default rules, so it is a region of its own beside the rest (the
    ops before and after it stay linked through the residual's reader of the layer input), and
    the exact solve certifies the whole layer."""
    g = hf_layer_graph(config_data("tiny"), "prefill", batch=1, seq=8, dtype="fp32")
    gemm = sum(float(g.nodes[n][COST].flops) for n in op_nodes(g) if g.nodes[n][OP] == "gemm")
    assert gemm == 2 * 65_536 + 2 * 32_768 + 3 * 180_224 == 737_280
    r = plan_fusions(g, "h100", time_limit_s=30)
    assert r.method == "exact" and r.optimal and r.complete and r.gap == pytest.approx(0.0, abs=1e-9)
    assert r.regions >= 2 and r.units < len(op_nodes(g))
    assert g.graph["hf_layer"] == {
        "layer": "LlamaDecoderLayer",
        "phase": "prefill",
        "batch": 1,
        "seq": 8,
        "ctx": 0,
    }


@pytest.mark.slow
@exact_only
def test_fusion_plan_command_on_an_exported_hf_layer(capsys):
    from graphs.cli import main

    code = main(
        ["fusion", "plan", "tiny", "--hf-layer", "--phase", "prefill", "--seq", "8", "--time-limit", "30"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Hugging Face layer (ATen, meta device)" in out and "certified optimal" in out and "regions" in out


def test_fusion_plan_command_refusals(capsys):
    from graphs.cli import main

    assert main(["fusion", "plan", "tiny", "--hf-layer", "--whole-model"]) != 0
    assert "--hf-layer exports one decoder layer" in capsys.readouterr().err
    assert main(["fusion", "plan", "tiny", "--time-limit", "0"]) == 2
    assert "must be a positive number of seconds, got '0'" in capsys.readouterr().err


@pytest.mark.slow
@exact_only
def test_llama_31_8b_prefill_layer_is_certified():
    """Llama-3.1-8B's shipped config (hidden 4,096; 32 query and 8 KV heads of 128; MLP 14,336),
    one 512-token prompt: the projections' GEMM FLOPs are

    2 x 512 x 4096 x (4096 + 1024 + 1024 + 4096) + 3 x 2 x 512 x 4096 x 14336
    = 42,949,672,960 + 180,388,626,432 = 223,338,299,392

    and the whole layer's exact plan is certified (SDPA a region of its own)."""
    g = hf_layer_graph(config_data("llama-3.1-8b"), "prefill", batch=1, seq=512)
    gemm = sum(float(g.nodes[n][COST].flops) for n in op_nodes(g) if g.nodes[n][OP] == "gemm")
    assert gemm == 2 * 512 * 4096 * (4096 + 1024 + 1024 + 4096) + 3 * 2 * 512 * 4096 * 14336
    assert gemm == 223_338_299_392
    r = plan_fusions(g, "h100", time_limit_s=30)
    assert r.optimal and r.complete and r.gap == pytest.approx(0.0, abs=1e-9) and r.regions >= 2
