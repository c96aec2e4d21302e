"""``--dp``, ``--enable-expert-parallel``, ``--moe-dispatch``: a data-parallel group's options,
shared by ``simulate`` (one group size), ``search`` and ``size`` (a list to try)
(:mod:`graphs.serving.sim.data_parallel`)."""

from __future__ import annotations

import argparse

__all__ = ["add_group_options"]


def add_group_options(sp: argparse.ArgumentParser, *, many: bool) -> None:
    """The options; ``many``: ``--dp`` is a list of sizes to try (search, size), else one size."""
    what = (
        "data-parallel attention ranks per replica (an MoE model: each rank its own scheduler and KV "
        "cache, the expert layers over all dp x tp devices, the ranks stepping together; vLLM's "
        "--data-parallel-size)"
    )
    if many:
        sp.add_argument("--dp", default="1", help=f"{what} to try: list or range (1: none)")
    else:
        sp.add_argument("--dp", type=int, default=1, help=what)
    sp.add_argument(
        "--enable-expert-parallel",
        action="store_true",
        help="each device holds whole experts (expert parallel) instead of every expert split dp x tp "
        "ways (vLLM's flag of the same name); with --dp 1 (simulate) over the tp group alone, as "
        "vLLM's flag beside --tensor-parallel-size or SGLang's --ep-size equal to --tp-size",
    )
    sp.add_argument(
        "--moe-dispatch",
        choices=("allgather_reducescatter", "all_to_all"),
        default="allgather_reducescatter",
        help="with --dp: how tokens reach their experts: all-gather then reduce-scatter (vLLM's default "
        "all2all backend), or all-to-all (DeepEP, pplx, TensorRT-LLM)",
    )

