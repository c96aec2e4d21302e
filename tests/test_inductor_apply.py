"""The planner's groups applied inside Inductor: fused where its scheduler can, the rest named."""

import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch extra not installed")

from costmodel.fusion_plan import solver_available  # noqa: E402
from graphs.importers.inductor_apply import apply_plan  # noqa: E402
from graphs.importers.inductor_audit import inductor_audit  # noqa: E402

warnings.filterwarnings("ignore")


class Block(torch.nn.Module):
    """x + GELU(Linear(LayerNorm(x))) on 64 x 256 fp32 (tests/test_inductor_audit.py's block)."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(256)
        self.lin = torch.nn.Linear(256, 256)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.lin(self.norm(x)))


@pytest.mark.slow
@pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")
def test_applied_plan_runs_equal_to_eager_and_moves_the_planned_bytes():
    """The planner under Inductor's rules groups the norm's four scheduler nodes and the GELU with
    the residual add (the GEMM is an extern call, alone); applied before Inductor's own fusion,
    the pass makes those fusions itself and every group is one kernel. Bytes, fp32, from the
    generated kernels' buffers (Inductor's own counts):

    * norm: reads x (64 x 256 x 4 = 65,536) and its weight and bias (2 x 1,024), writes 65,536;
    * GEMM: reads 65,536 + W (256 x 256 x 4 = 262,144) + bias 1,024, writes 65,536;
    * GELU + residual: reads the GEMM's output and x (2 x 65,536), writes 65,536;

    133,120 + 394,240 + 196,608 = 723,968 B, the planner's prediction to the byte."""
    torch.manual_seed(0)
    block, x = Block().eval(), torch.randn(64, 256)
    plan = inductor_audit(block, (x,), "h100", max_units=16).planner_same_rules
    applied = apply_plan(block, (x,), [gr.members for gr in plan.groups])
    assert applied.allclose
    assert applied.fusions >= 1 and not applied.unrealised and not applied.spanning
    assert applied.bytes == 133_120 + 394_240 + 196_608 == 723_968 == plan.bytes


def test_an_empty_plan_is_refused():
    from costmodel.errors import CostModelError

    with pytest.raises(CostModelError, match="the plan has no groups"):
        apply_plan(Block().eval(), (torch.randn(4, 256),), [])


@pytest.mark.slow
@pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")
def test_applied_plan_on_a_real_gpt2_block_moves_what_the_planner_predicts():
    """Hugging Face's ``GPT2Block`` (tiny config: 64 wide, 4 heads, MLP 256; 64 tokens, fp32, SDPA):
    the planner's plan under Inductor's rules, applied in Inductor's pre-fusion pass, runs equal to
    eager, and its generated kernels' buffers (Inductor's own count, a counter independent of the
    engine's accounting) move what the planner predicted, within the issue's 5 % (here to the
    byte); the same count for Inductor's default compile is the third number, equal too: on this
    block the planner under Inductor's rules finds no fusion Inductor's greedy pass leaves."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=1, n_positions=256, vocab_size=128)
    cfg._attn_implementation = "sdpa"

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = transformers.models.gpt2.modeling_gpt2.GPT2Block(cfg, layer_idx=0)

        def forward(self, x):
            out = self.block(x)
            return out[0] if isinstance(out, tuple) else out

    torch.manual_seed(0)
    block, x = Block().eval(), torch.randn(1, 64, 64)
    audit = inductor_audit(block, (x,), "h100", max_units=16)
    plan = audit.planner_same_rules
    applied = apply_plan(block, (x,), [gr.members for gr in plan.groups])
    assert applied.allclose and applied.fusions >= 1
    assert abs(applied.bytes - plan.bytes) <= 0.05 * plan.bytes
    assert applied.bytes == audit.inductor_bytes
