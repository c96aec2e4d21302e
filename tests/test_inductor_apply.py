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
