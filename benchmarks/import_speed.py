"""Importing a big Hugging Face decoder: the whole torch.export against one layer repeated.

Llama-3.1-8B (the shipped config, random weights on the meta device: nothing is downloaded or
allocated), dynamic batch and sequence. Prints the wall time of each path and checks that their
symbolic totals (tensor FLOPs, DRAM bytes) are equal.

    python -m benchmarks.import_speed [--layerwise-only]
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from importlib import resources

import sympy
import torch
import transformers
from torch.export import Dim

from costmodel.graph import graph_total
from graphs.importers.layerwise import from_hf_layerwise
from graphs.importers.torch_export import from_exported_program

warnings.filterwarnings("ignore")


def model() -> torch.nn.Module:
    cfg = json.loads(resources.files("models").joinpath("configs", "llama-3.1-8b.json").read_text())
    keep = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "torch_dtype")}
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**keep)).eval()


def main() -> None:
    m = model()
    ids = torch.zeros((2, 8), dtype=torch.long, device="meta")
    t = time.perf_counter()
    lw = graph_total(from_hf_layerwise(m, ids), kinds=["op"])
    t_lw = time.perf_counter() - t
    print(f"llama-3.1-8b, one layer exported and repeated x32: {t_lw:6.1f} s")
    if "--layerwise-only" in sys.argv:
        return
    t = time.perf_counter()
    shapes = {
        "input_ids": {0: Dim("batch", min=1, max=4096), 1: Dim("seq", min=2, max=1 << 20)},
        "use_cache": None,
    }
    ep = torch.export.export(
        m, (), kwargs={"input_ids": ids, "use_cache": False}, dynamic_shapes=shapes, strict=False
    )
    full = graph_total(from_exported_program(ep, dims={"input_ids": ("B", "S")}), kinds=["op"])
    t_full = time.perf_counter() - t
    same = all(
        sympy.expand(a - b) == 0
        for a, b in ((lw.flops_on("tensor"), full.flops_on("tensor")), (lw.bytes, full.bytes))
    )
    print(f"llama-3.1-8b, the whole model exported:            {t_full:6.1f} s")
    print(f"  layerwise is {t_full / t_lw:.1f}x faster; totals equal: {same}")


if __name__ == "__main__":
    main()
