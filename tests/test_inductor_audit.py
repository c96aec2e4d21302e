"""Inductor's real fusion decisions on a norm -> linear -> GELU + residual block, CPU backend.

Hand derivation (x: 64 x 256 fp32 = 65,536 B; the linear's weight 262,144 B, its bias 1,024 B;
the norm's weight and bias 2,048 B). Inductor makes three kernels:

* the layer norm (mean, variance, normalise) in one generated kernel, its statistics kept on
  chip: reads x and the norm's parameters (67,584 B), writes the normalised x (65,536 B);
* the GEMM as a library call: reads the normalised x, the weight and the bias (328,704 B),
  writes 65,536 B;
* GELU and the residual add in one generated kernel: reads the GEMM output and x (131,072 B),
  writes the result (65,536 B).

Total 723,968 B, which the engine's own accounting of Inductor's grouping must reproduce. The
ideal moves x, the parameters and the output once: 396,288 B. Inductor leaves two boundaries
(norm -> GEMM and GEMM -> epilogue), each a 65,536 B write and read back.

The planner under Inductor's own rules (GEMMs are library calls) finds nothing better: 723,968 B.
Under the default rules it makes GELU + residual the GEMM's epilogue: that kernel reads the
normalised x, the weight, the bias and x (394,240 B) and writes the result (65,536 B), so the
plan is 133,120 + 459,776 = 592,896 B: the GEMM -> epilogue boundary (131,072 B) is gone, and the
rule Inductor would have to change is that a GEMM takes no epilogue. The norm -> GEMM boundary
stays: the norm's 64-row tiles of full 256-wide fp32 rows for every internal tensor plus the GEMM
working set exceed one SM's share of on-chip memory.
"""

import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch extra not installed")

from graphs.importers.inductor_audit import check_torch_version, inductor_audit  # noqa: E402

warnings.filterwarnings("ignore")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(256)
        self.lin = torch.nn.Linear(256, 256)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.lin(self.norm(x)))


@pytest.mark.slow
def test_inductor_kernels_and_their_bytes():
    torch.manual_seed(0)
    a = inductor_audit(Block().eval(), (torch.randn(64, 256),), "h100", max_units=16)  # 15 units: all
    kinds = [(k.kind, k.reads_bytes, k.writes_bytes) for k in a.kernels]
    assert kinds == [("generated", 67584, 65536), ("extern", 328704, 65536), ("generated", 131072, 65536)]
    norm, gemm, epilogue = a.kernels
    assert a.pre_fusion_nodes == 6 and norm.members == ("op0", "op1", "op2", "op3")  # 4 nodes fused into 1
    assert "var_mean" in norm.ops and len(norm.on_chip) >= 1  # the statistics never leave the chip
    assert gemm.ops == ("addmm",) and gemm.bound == "compute"
    assert gemm.flops == 2 * 64 * 256 * 256 + 64 * 256  # the products, and the bias added once per output
    assert {"erf", "add_3"} <= set(epilogue.ops)
    assert a.inductor_bytes == 723968 == a.inductor_plan_bytes
    assert a.ideal_bytes == 65536 + 262144 + 1024 + 2048 + 65536
    assert sorted(d.bytes for d in a.differences) == [131072, 131072]
    assert all(d.time_s > 0 for d in a.differences)
    # three-way: Inductor, the planner (under Inductor's rules and the default ones), the ideal
    assert a.planner_same_rules.bytes == 723968 <= a.inductor_plan_bytes
    assert a.planner.bytes == 133120 + 459776 == 592896
    assert a.planner_same_rules.optimal and a.planner.optimal
    (gone,) = a.removed
    assert (gone.producer, gone.bytes) == ("addmm", 131072)
    assert gone.rule.startswith("fusible: class 'gemm'")
    assert a.ideal_time_s < a.planner.time_s < a.inductor_plan_time_s


def test_untested_torch_is_refused():
    check_torch_version("2.13.0+cpu")
    with pytest.raises(Exception, match=r"tested with torch 2\.13"):
        check_torch_version("2.4.1")


@pytest.mark.slow
def test_dynamic_shapes_give_inductor_sizes_as_closed_forms():
    """Compiled with a dynamic token count T, each kernel's bytes come as Inductor's own symbolic
    sizes: the norm reads T x 256 fp32 plus its 2,048 B of parameters; the GEMM the normalised
    rows plus the weight and bias (263,168 B); the epilogue two T x 256 tensors; each writes one.
    At T = 64 they are the static audit's numbers."""
    from costmodel.symbols import dim

    t = dim("T")
    torch.manual_seed(0)
    a = inductor_audit(Block().eval(), (torch.randn(64, 256),), "h100", dims=("T", None))
    assert [(k.reads, k.writes) for k in a.kernels] == [
        (1024 * t + 2048, 1024 * t),
        (1024 * t + 263168, 1024 * t),
        (2048 * t, 1024 * t),
    ]
    assert a.inductor_bytes == 723968 == a.inductor_plan_bytes and a.ideal_bytes == 396288
    assert a.planner.bytes == 592896  # the same plan at T = 64 as the static audit


@pytest.mark.slow
def test_a_pointwise_op_recomputed_in_two_kernels_counts_in_each():
    """Inductor inlines a cheap pointwise op into every consumer kernel, so a node in several
    generated kernels' origins is computed in each; only a library call's node (a convolution,
    whose layout copies list it too) does its FLOPs once. The capture's epilogue kernel given
    twice: both copies count the GELU's FLOPs, the same number (it was counted in the first only)."""
    import dataclasses

    from graphs.importers.inductor_audit import audit_capture, inductor_capture

    torch.manual_seed(0)
    cap = inductor_capture(Block().eval(), (torch.randn(64, 256),), "h100")
    epilogue = cap.kernels[-1]
    assert epilogue["kind"] == "generated"
    twin = dict(epilogue, name=f"{epilogue['name']}_twin")
    a = audit_capture(dataclasses.replace(cap, kernels=(*cap.kernels, twin)), "h100", max_units=16)
    first, second = a.kernels[-2], a.kernels[-1]
    assert second.name.endswith("_twin") and first.flops == second.flops > 0
    assert a.kernels[1].flops == 2 * 64 * 256 * 256 + 64 * 256  # the library call's GEMM, once
