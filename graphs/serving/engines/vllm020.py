"""vLLM 0.14 to 0.20 (the V1 engine, ``vllm serve``, asynchronous scheduling by default) before
the KV pool left room for CUDA graphs: ``vllm@0.20``.

From v0.21.0 vLLM V1 measures its CUDA graphs' memory during the start-up profile and subtracts
that estimate before sizing the KV pool ("CUDA graph memory profiling is enabled (default since
v0.21.0)", the worker's start-up log; ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, added off by
https://github.com/vllm-project/vllm/pull/30515): ``vllm@1`` models it
(:func:`.vllm.v1_cudagraph_memory`). A release before v0.21.0 sizes the pool without it, so this
profile is ``vllm@1`` with no CUDA-graph term (``cudagraph_memory`` None).

It describes the releases from v0.14.0, whose release notes list "Async scheduling is now enabled
by default" under breaking changes (https://github.com/vllm-project/vllm/releases/tag/v0.14.0),
so ``vllm@1``'s CPU terms, fitted to runs that pass ``--async-scheduling``
(``docs/overhead_fit.md``), carry; an earlier V1 release schedules synchronously
(:mod:`.vllm012`). Every other rule (the batch defaults by GPU, the watermark, the memory
reserve ``(d, R)``, the capture sizes, the fused kernels) is ``vllm@1``'s: ASSUMED for these
releases, as the silicon replay already assumed them for its vLLM 0.15.1 to 0.19.0 runs.

Admission is ``vllm@1``'s too (``reserve_full_prompt``: the whole prompt's blocks reserved, vllm
PR 37307's ``scheduler_reserve_full_isl``), and that is likely WRONG for the earlier releases of
the series: the PR was opened on 2026-03-17, first as an opt-in, and releases before it reserved
only the first chunk's blocks (as ``vllm@0.10`` and ``vllm@0.11`` do). Which release first
shipped it is not known here, so the series is not split at it; the profile's source for the
setting says so, and ``--no-reserve-full-prompt`` describes such a server.

>>> from graphs.serving.engines import release_profile
>>> release_profile("vllm", "0.19.0").ref, PROFILE.cudagraph_bytes_per_layer()
('vllm@0.20', 0.0)
"""

from __future__ import annotations

import dataclasses

from .profile import register_engine
from .vllm import PROFILE as V1

__all__ = ["PROFILE"]

#: the release series this profile describes besides its own (``0.20``): async scheduling by
#: default from v0.14.0, the CUDA-graph estimate from v0.21.0 (module doc)
RELEASES = ("0.14", "0.15", "0.16", "0.17", "0.18", "0.19")

PROFILE = register_engine(
    dataclasses.replace(
        V1,
        version="0.20",
        label="vLLM 0.14-0.20 (V1, async scheduling by default), vllm serve: the KV pool without the "
        "CUDA-graph estimate (from v0.21.0)",
        cudagraph_memory=None,
        default_version=False,
        releases=RELEASES,
        sources={
            **{k: v for k, v in V1.sources.items() if k != "cudagraph_memory"},
            "reserve_full_prompt": "vllm@1's (scheduler_reserve_full_isl, vllm PR 37307, opened 2026-03-17 as "
            "an opt-in): likely WRONG for the releases of 0.14-0.20 before it shipped, which reserved the first "
            "chunk's blocks (as vllm@0.11); the release that shipped it is not known here",
            "releases": "vllm v0.14.0 release notes: async scheduling on by default; the CUDA-graph "
            "estimate in the KV pool default from v0.21.0 (its start-up log); the other rules vllm@1's, "
            "ASSUMED for 0.14-0.20",
        },
    )
)
