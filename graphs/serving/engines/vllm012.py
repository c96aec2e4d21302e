"""vLLM 0.12 (the V1 engine, ``vllm serve``), scheduling synchronously: ``vllm@0.12``.

vLLM's V1 engine core overlaps the next iteration's scheduling and input preparation with the
running one only under async scheduling (https://github.com/vllm-project/vllm/pull/19970,
"minimize scheduler overhead by overlapping scheduling with model execution"; the model runner's
input preparation and sampled-token hand-off overlapped too from
https://github.com/vllm-project/vllm/pull/23569). It was opt-in (``--async-scheduling``) until
v0.14.0, whose release notes list under breaking changes "Async scheduling is now enabled by
default" (https://github.com/vllm-project/vllm/releases/tag/v0.14.0). A 0.12 server started
without the flag therefore runs each iteration's CPU work (scheduling, input preparation, the
sampled tokens' return and the output update) between the GPU's steps, where ``vllm@1`` hides it.

So this profile is ``vllm@0.11``'s (:mod:`.vllm011`: the same V1 engine core, batch defaults by
GPU, KV pool rule, capture sizes and fused kernels; ASSUMED unchanged in 0.12, whose commit the
search corpus does not hold) with CPU terms of its own:

* ``iteration_s`` and ``per_seq_s`` (``a + b n`` per iteration of ``n`` sequences, added to the
  GPU's step: :meth:`~.knobs.EngineOverheads.cpu_s`): FITTED by ``benchmarks/sync_overhead_fit.py``
  (``docs/sync_overhead_fit.md``) to the mean TPOT of the aiconfigurator silicon sample's vLLM
  0.12.0 runs outside the held-out split (Qwen3-32B on H100; aiconfigurator's launch template for
  0.12.0, ``cli_args.0.12.0.j2``, passes no ``--async-scheduling``), relative least squares, the
  terms kept non-negative: ``a`` = 1.36 ms (standard error 0.12 ms), ``b`` = 46 us (3.7 us), against
  ``vllm@1``'s 0 and 3.4 us; the 30 fitted runs' (Qwen3-32B, TP 4) median |TPOT error| 15.0 -> 1.6 %;
  the sample's vLLM 0.12.0 runs at TP 2 and 8 are in the held-out split, never fitted;
* ``request_s``: ``vllm@1``'s, fitted to the validation tables' vLLM TTFT rows (these runs among
  them: ``benchmarks/request_path_fit.py``); the API server's path is not what async scheduling
  changes;
* the other CPU and request-path terms: ``vllm@0.11``'s (ASSUMED or sourced as it says).

A 0.12 server started with ``--async-scheduling`` hides its CPU work as ``vllm@1`` does: its
CPU terms are ``vllm@1``'s (fitted to runs that pass the flag, :mod:`.vllm`), or a user's own
from ``costmodel calibrate serving``.
"""

from __future__ import annotations

import dataclasses

from .profile import register_engine
from .vllm import PROFILE as V1
from .vllm011 import PROFILE as V011

__all__ = ["PROFILE", "SYNC_FIT"]

#: the fitted terms' source (``sources``) and what :attr:`EngineProfile.basis` says they were fitted to
SYNC_FIT = (
    "the silicon sample's vLLM 0.12.0 runs outside the held-out split (synchronous scheduling), "
    "docs/sync_overhead_fit.md"
)
_FITTED = f"fitted: benchmarks/sync_overhead_fit.py, {SYNC_FIT}"

PROFILE = register_engine(
    dataclasses.replace(
        V011,
        version="0.12",
        label="vLLM 0.12 (V1), vllm serve without --async-scheduling (the default before v0.14.0)",
        cpu_terms={
            **V011.cpu_terms,
            "iteration_s": 1.36e-3,  # fitted: 1.36e-03 (s.e. 1.2e-04), benchmarks/sync_overhead_fit.py
            "per_seq_s": 4.6e-5,  # fitted: 4.60e-05 (s.e. 3.7e-06), benchmarks/sync_overhead_fit.py
            "request_s": V1.cpu_terms["request_s"],  # vllm@1's fit, these runs among its rows
        },
        fitted=("iteration_s", "per_seq_s", "request_s"),
        cpu_fit=SYNC_FIT,
        sources={
            **V011.sources,
            "iteration_s": _FITTED,
            "per_seq_s": _FITTED,
            "request_s": V1.sources["request_s"],
        },
    )
)
