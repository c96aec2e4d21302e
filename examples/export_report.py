"""Run your own nn.Module through torch.export, the pass pipeline and a report.

    pip install -e '.[torch]'            # the torch extra: torch 2.13, the version the importers accept
    python examples/export_report.py     # prints closed forms and a per-node table

The module below is a small MLP block with a norm; replace it with yours.
Dynamic batch and sequence dimensions stay symbolic (B, S) until bound.
"""

from __future__ import annotations

import sys

import sympy

try:
    import torch
    from torch.export import Dim
except ModuleNotFoundError as exc:  # one line, not a traceback: say which extra to install
    if exc.name is None or exc.name.split(".")[0] != "torch":
        raise
    print(
        "export_report.py: needs torch, which is not installed; install the torch extra: "
        "pip install -e '.[torch]' (torch 2.13, the version graphs.importers accepts)",
        file=sys.stderr,
    )
    raise SystemExit(2) from None

from costmodel.passes import Pipeline, annotate_hardware, bind_dims, classify, report, suggest_fusion
from costmodel.report import format_table
from graphs.importers.torch_export import from_exported_program


class Block(torch.nn.Module):
    def __init__(self, d: int = 1024, hidden: int = 4096) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main() -> None:
    model = Block().eval().to(torch.bfloat16)
    x = torch.randn(2, 16, 1024, dtype=torch.bfloat16)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: Dim("batch"), 1: Dim("seq")},))
    g = from_exported_program(ep, dims={"x": ("B", "S")})

    totals = Pipeline([report()])(g).graph["reports"]["report"]
    print("closed forms in the module's own dimensions:")
    print(f"  FLOPs       = {sympy.factor(totals['flops'])}")
    print(f"  tensor part = {sympy.factor(totals['flops_by_unit']['tensor'])}")
    print(f"  DRAM bytes  = {sympy.factor(totals['dram_bytes'])}")
    if totals["unknown_ops"]:
        print(f"  not costed: {totals['unknown_ops']}")

    out = Pipeline(
        [
            bind_dims({"B": 8, "S": 2048}),
            annotate_hardware("h100"),
            classify("h100"),
            suggest_fusion("h100"),
            report(),
        ]
    )(g)
    rows = out.graph["reports"]["classify"]
    print("\nper node on h100-sxm at B=8, S=2048:")
    print(
        format_table(
            rows,
            (
                ("node", "node", "s"),
                ("op", "op", "s"),
                ("flops", "F", "si"),
                ("bytes", "D", "si"),
                ("intensity", "I", ".1f"),
                ("kind", "bound", "s"),
                ("time_s", "T (s)", ".2e"),
            ),
        )
    )
    audit = out.graph["reports"]["suggest_fusion"]
    print("\nsuggested fusions:")
    for s in audit["suggestions"]:
        print(f"  {' + '.join(s['members'])}: saves {s['bytes_saved'] / 1e6:.1f} MB ({s['pattern']})")
    if not audit["suggestions"]:  # the notes on stderr say which were considered and why not
        print("  none on h100-sxm (the notes above say which groups were considered and why not)")
    t = audit["audit"]
    print(
        f"\nunfused {t['unfused']['sum_of_kernel_bounds_s'] * 1e6:.1f} us -> "
        f"fused {t['plan']['sum_of_kernel_bounds_s'] * 1e6:.1f} us"
    )


if __name__ == "__main__":
    main()
