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
        "window": None,  # a full-attention layer (Llama has no sliding window)
        "cached": 0,  # a prefill caches nothing before its prompt
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


@pytest.mark.slow
@exact_only
def test_qwen3_8b_decode_layer_is_certified_by_the_partition_floor():
    """Qwen3-8B decode (8 sequences, 4,096 cached tokens): the pre-attention region's legal groups
    outrun a 10 s enumeration, and the clique-partition traffic floor certifies the region all the
    same (costmodel.fusion_bound): gap 0, enumeration incomplete. Its best plan keeps the three
    projections' weights (4,096 x 4,096, 4,096 x 1,024 twice, bf16: 33,554,432 + 2 x 8,388,608 B)
    among its reads."""
    g = hf_layer_graph(config_data("qwen3-8b"), "decode", batch=8, seq=1, ctx=4096)
    r = plan_fusions(g, "h100", time_limit_s=10)
    assert r.optimal and not r.complete and r.gap == pytest.approx(0.0, abs=1e-9)
    assert any("clique-partition traffic floor" in n for n in r.notes)
    assert r.bytes >= 33_554_432 + 2 * 8_388_608


@pytest.mark.slow
@exact_only
def test_a_dynamic_decode_export_is_planned_at_stated_sizes_and_priced_in_closed_form():
    """models/configs/tiny.json decode exported with dynamic batch and cache length: the graph is
    symbolic in B and ctx, bound at (4, 32) it moves the static export's bytes op for op, and the
    certified plan's bytes as a closed form grow in B * ctx by what the cache costs per token and
    sequence: K and V of 2 KV heads x 16 dims, bf16, are 2 x 2 x 16 x 2 = 128 B, read from the old
    cache by the cat, written to the new one, and read again by SDPA (which runs alone): 384."""
    import sympy

    from costmodel.fusion import plan_cost
    from costmodel.passes import bind_dims
    from costmodel.symbols import dim

    g = hf_layer_graph(config_data("tiny"), "decode", batch=4, ctx=32, dynamic=True)
    point = g.graph["hf_layer"]["point"]
    assert point == {"B": 4, "ctx": 32}
    total = sympy.Add(*(g.nodes[n][COST].bytes for n in op_nodes(g)))
    assert {str(s) for s in total.free_symbols} == {"B", "ctx"}
    bound = bind_dims({dim(k): v for k, v in point.items()})(g)
    static = hf_layer_graph(config_data("tiny"), "decode", batch=4, ctx=32)
    assert sum(float(bound.nodes[n][COST].bytes) for n in op_nodes(bound)) == sum(
        float(static.nodes[n][COST].bytes) for n in op_nodes(static)
    )
    r = plan_fusions(bound, "h100", time_limit_s=30)
    assert r.optimal
    closed = sympy.expand(plan_cost(g, r.plan, check=False).bytes)
    B, ctx = dim("B"), dim("ctx")
    assert closed.coeff(B * ctx) == 384
    assert float(closed.subs({B: 4, ctx: 32})) == r.bytes


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("mamba2-2.7b", "its layer pattern is derived (state-space or hybrid layers, not softmax attention)"),
        ("jamba-v0.1", "its layer pattern is derived (state-space or hybrid layers, not softmax attention)"),
        ("deepseek-v3", "multi-head latent attention caches a latent vector, not per-head keys and values"),
        (
            "gpt-oss-20b",
            "transformers refuses it (GptOssForCausalLM does not support an attention implementation",
        ),
    ],
)
def test_an_architecture_the_export_does_not_handle_is_refused_in_one_line(model, why, capsys):
    """A review found ``fusion plan mamba2-2.7b --hf-layer`` (and jamba-v0.1) an internal
    AttributeError (their layer_types has no setter), gpt-oss-20b an internal ValueError (no SDPA)
    and deepseek-v3 torch's logged traceback before its error: each is one line that says what the
    export builds and why this one is not it."""
    from graphs.cli import main
    from graphs.importers.hf_layer import SUPPORTED

    with pytest.raises(CostModelError) as exc:
        hf_layer_graph(config_data(model), "decode", batch=1, ctx=8)
    msg = str(exc.value)
    assert f"the Hugging Face layer export builds {SUPPORTED}; " in msg and why in msg and "\n" not in msg
    assert main(["fusion", "plan", model, "--hf-layer", "--ctx", "8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("costmodel: error: model_type ") and err.count("\n") == 1 and "internal" not in err


def test_torch_logs_nothing_while_an_export_runs():
    """A failing export's fake-tensor traceback was logged by torch on stderr (``E1207 ...
    fake_tensor.py``) before the one-line error: torch's loggers are off during the export."""
    import logging

    from graphs.importers.hf_layer import _quiet_torch

    fake = logging.getLogger("torch._subclasses.fake_tensor")
    assert fake.isEnabledFor(logging.ERROR)
    with _quiet_torch():
        assert not fake.isEnabledFor(logging.ERROR) and not logging.getLogger("torch").isEnabledFor(
            logging.ERROR
        )
    assert fake.isEnabledFor(logging.ERROR)
