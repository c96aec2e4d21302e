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
GPU, KV pool rule and fused kernels; ASSUMED unchanged in 0.12, whose commit the
search corpus does not hold) with the CUDA-graph capture sizes of 0.11.1 on (vllm PR 26016's
two-step rule, :func:`.vllm.vllm_capture_sizes`, as ``vllm@0.11.1``; 0.11.0 captured 8 apart to
the top) and CPU terms of its own:

* ``iteration_s`` and ``per_seq_s`` (``a + b n`` per iteration of ``n`` sequences, added to the
  GPU's step: :meth:`~.knobs.EngineOverheads.cpu_s`): FITTED by ``benchmarks/sync_overhead_fit.py``
  (``docs/sync_overhead_fit.md``) to the mean TPOT of the aiconfigurator silicon sample's vLLM
  0.12.0 runs outside the held-out split: one deployment, Qwen3-32B on 4 H100s, 30 runs. That
  they ran without ``--async-scheduling`` is INFERRED: the sample states no launch arguments, the
  flag was off unless passed, and aiconfigurator's own vLLM 0.12.0 launch template
  (``src/aiconfigurator/generator/config/backend_templates/vllm/cli_args.0.12.0.j2``, its Dynamo
  worker arguments) passes none. Relative least squares, the terms kept non-negative: ``a`` =
  1.36 ms (standard error 0.12 ms), ``b`` = 46 us (3.6 us), against ``vllm@1``'s 0 and 3.4 us;
  the fitted runs' median |TPOT error| 15.2 -> 1.5 % (in sample; the page's latest refit reads
  ``b`` 45.9 us, the stored 46 us within 0.3 % of it). At one TP, ``a`` cannot be told
  from a fixed per-step latency of the GPU side that depends on TP (``benchmarks/tpot_split.py``
  finds 0.4-0.9 ms at TP 2-4 in TensorRT-LLM's runs, near 0 at TP 8, which schedule
  asynchronously): ``a`` is the CPU time per iteration only if no such gap is there, and the
  standard errors treat 30 runs of one deployment as independent (they understate). The sample's
  vLLM 0.12.0 runs at TP 2 and 8 are in the held-out split (``benchmarks/data/heldout.toml``),
  never fitted: ``docs/serving_accuracy.md`` reports them;
* the sampler's start-up profile run in the KV pool (:mod:`.sampler_memory`): PyTorch's, 38 B a
  logit, as in 0.11, but FlashInfer's sampler is opt-in in 0.12.0 (``VLLM_USE_FLASHINFER_SAMPLER``),
  so it holds with FlashInfer installed too. It changes nothing in the fit above (refitted with
  and without it, the page is the same): the fitted runs (Qwen3-32B at TP 4) hold at most 655,360
  tokens, inside the pool either way (868,064 tokens without the sampler's run, 825,328 with it);
* ``request_s`` and the other CPU and request-path terms: ``vllm@0.11``'s, as it sources or
  ASSUMES them (``request_s`` is ``vllm@1``'s fitted value; no vLLM 0.12.0 TTFT row is compared in
  the validation tables, so none entered that fit).

A 0.12 server started with ``--async-scheduling`` hides its CPU work as ``vllm@1`` does: its
CPU terms are ``vllm@1``'s (fitted to runs that pass the flag, :mod:`.vllm`), or a user's own
from ``costmodel calibrate serving``.
"""

from __future__ import annotations

import dataclasses

from .attention_kernels import VLLM_SINKS_TRITON_012
from .moe_kernels import VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120
from .profile import register_engine
from .vllm import PROFILE as V1
from .vllm import SYNC_CPU_TERMS, SYNC_FIT, vllm_capture_sizes
from .vllm011 import PROFILE as V011

__all__ = ["PROFILE"]
_FITTED = f"fitted: benchmarks/sync_overhead_fit.py, {SYNC_FIT}"

PROFILE = register_engine(
    dataclasses.replace(
        V011,
        version="0.12",
        label="vLLM 0.12 (V1), vllm serve without --async-scheduling (the default before v0.14.0)",
        cpu_terms={**V011.cpu_terms, **SYNC_CPU_TERMS},  # fitted: benchmarks/sync_overhead_fit.py
        moe_kernels=(
            VLLM_MXFP4_MARLIN_PRE_HOPPER,
            VLLM_MXFP4_MARLIN_SM120,
        ),  # triton_kernels vendored (vllm PR 28788): Hopper's own
        attention_kernels=(VLLM_SINKS_TRITON_012,),  # 0.11.0's rule, ASSUMED
        cudagraph_sizes=vllm_capture_sizes,  # vllm PR 26016's two-step rule, 0.11.1 on (not 0.11.0's)
        sampler="torch",  # 0.11.0's rule, read in the 0.12.0 sdist too (FlashInfer's sampler opt-in)
        fitted=("iteration_s", "per_seq_s"),
        cpu_fit=SYNC_FIT,
        sources={
            **V011.sources,
            # the two-step capture rule (vllm PR 26016) is 0.11.1's and later: 0.12.0's own
            "cudagraph_sizes": V1.sources["cudagraph_sizes"] + " (vllm PR 26016, from 0.11.1)",
            "iteration_s": _FITTED,
            "per_seq_s": _FITTED,
            "sampler": "0.12.0's topk_topp_sampler.py takes FlashInfer's sampler only when VLLM_USE_FLASHINFER_SAMPLER "
            "is set (opt-in; flashinfer-python became a dependency), so the PyTorch sampler runs (--sampler "
            "flashinfer where the variable is set)",
        },
    )
)
