"""vLLM 0.10 (the V1 engine, ``vllm serve --async-scheduling``), priced by the corpus's ``vllm``
kernels: ``vllm@0.10``, the release InferenceX ran its Llama-3.1-70B vLLM campaigns on.

InferenceX (SemiAnalysisAI/InferenceX) launches those runs in the image
``vllm/vllm-openai:v0.10.2``: ``.github/configs/master.yaml`` (commit 78f6b8d2) gives it to
``70b-fp8-h100-vllm``, ``70b-fp8-h200-vllm``, ``70b-fp8-b200-vllm`` and ``70b-fp4-b200-vllm``, and
``.github/workflows/70b-tmpl.yml`` (commit 07e6e8a2) to its ``bmk-h100-fp8``, ``bmk-h200-fp8``,
``bmk-b200-fp8`` and ``bmk-b200-fp4`` jobs. That the silicon sample's ``2026-04-06.csv`` Llama-3.1-70B
vLLM rows (``measured=2025-10-29``, version "not stated") are those runs is INFERRED
(:func:`benchmarks.replay.silicon.client`). Its scripts pass ``async-scheduling: true`` and
``max-num-batched-tokens: 8192`` (``benchmarks/70b_fp8_h100_slurm.sh`` at 2a205bb3,
``70b_fp8_h200_slurm.sh`` at 6ebc8824 and 409e9a48, ``70b_fp8_b200_docker.sh`` at bb4c7f93), so the
profile is V1 with async scheduling, as :mod:`.vllm` (``vllm@1``) prices it, at the release's own
scheduler and memory rules:

* ``reserve_full_prompt`` off: a waiting request is admitted when its first chunk's blocks are
  free; the whole-prompt check (``scheduler_reserve_full_isl``) came with
  https://github.com/vllm-project/vllm/pull/37307 (2026);
* ``kv_watermark`` 0: V1 had no admission watermark before
  https://github.com/vllm-project/vllm/pull/44594;
* the KV pool's non-torch term grows with ``tp`` (:func:`v010_memory_reserve`): before
  https://github.com/vllm-project/vllm/pull/25359 (merged 2025-09-22, after 0.10.2: ASSUMED from
  the order of the merge and the release, whose tag the search corpus does not hold) the V1
  worker took its start-up snapshot before ``init_worker_distributed_environment`` (the
  pre-25359 ``Worker.init_device``, as vllm-omni's copy of it reads), so the NCCL and custom
  all-reduce buffers show as a non-torch increase and come out of ``u (C - d)`` ("The NCCL
  buffer allocation shows up as non-torch memory increase during forward pass", PR 25359, which
  puts them at about 4.5 GiB in its Ray deployment). ``R`` = V1's 0.16 GiB at ``tp`` 1
  (:data:`.vllm.V1_NON_TORCH_BYTES`), plus at ``tp`` >= 2 the 1.79 GiB V0's log grows by from
  ``tp`` 1 to 2 (3.58 - 1.79 GiB, https://github.com/vllm-project/vllm/pull/10511: V0 too measured
  its baseline before NCCL, :mod:`.vllm06`), held above ``tp`` 2: ASSUMED (no V1 0.10 log states
  it);
* CUDA-graph capture sizes (:func:`v010_capture_sizes`): ``cuda_graph_sizes`` defaults to
  ``[min(2 max_num_seqs, 512)]`` (``SchedulerConfig.__post_init__``) and V1 captures
  ``[1, 2, 4] + range(8, M + 1, 8)``, those up to ``max_num_batched_tokens``
  (``VllmConfig._set_cudagraph_sizes``; ``vllm/config/__init__.py`` of the 0.10 series, ASSUMED
  unchanged in 0.10.2): steps of 8 to the top, where ``vllm@1``'s take 16 above 256. A decode
  batch of at most 256 pads the same under both. InferenceX's B200 script sets
  ``cudagraph_mode: FULL_DECODE_ONLY`` (decode batches run one full graph; the simulator pads a
  decode-only batch either way);
* the fused MoE of MXFP4 experts (gpt-oss, from 0.10.1) on Hopper: Marlin, not OpenAI's Triton
  kernel the corpus measures for H100 (ASSUMED for a PyPI install: the wheel did not bring
  ``triton_kernels``, so ``get_mxfp4_backend`` fell back:
  :data:`.moe_kernels.VLLM_MXFP4_MARLIN_HOPPER`), and on Ampere, Ada and SM 12.x cards as every
  release (:data:`.moe_kernels.VLLM_MXFP4_MARLIN_PRE_HOPPER`, :data:`.moe_kernels.VLLM_MXFP4_MARLIN_SM120`);
* attention with learned sinks (gpt-oss) off Hopper and SM 10.0: vLLM's Triton kernel
  (``TRITON_ATTN``, :data:`.attention_kernels.VLLM_SINKS_TRITON_010`, ASSUMED for 0.10.1-0.10.2
  as read in 0.11.0), which the corpus does not time at gpt-oss's shape: the predictor
  counts it as a neighbour of the rows that price it;
* batch limits by device (:func:`.vllm011.vllm011_device_defaults`: 8,192 tokens and 1,024
  sequences on a GPU of >= 70 GiB that is not an A100): 0.11's ``_set_default_args``, ASSUMED the
  same in 0.10. InferenceX's scripts pass ``max-num-batched-tokens: 8192`` and ``--max-num-seqs``
  ``C`` (H100, H200) or 512 (B200), which a replay of ``C`` clients never exceeds;
* ``block_size`` 16, ``gpu_memory_utilization`` 0.9, chunked prefill, ``recompute``, prefix
  caching on by default (InferenceX passes ``no-enable-prefix-caching: true``: the rows'
  ``engine_prefix_caching`` override) and the fused small kernels: V1's, as :mod:`.vllm` cites
  them.

CPU and request-path terms: ``vllm@1``'s, the same values from the same sources. Its
``iteration_s`` and ``per_seq_s`` were fitted by ``benchmarks/overhead_fit.py`` to InferenceX's
Llama-3.1-70B H200 runs, and its ``request_s`` by ``benchmarks/request_path_fit.py`` to the vLLM
TTFT rows of these campaigns: the runs this profile names, on async scheduling as the scripts
set it. (A 0.10 server started without ``--async-scheduling`` schedules synchronously:
``vllm@0.12``'s CPU terms, :mod:`.vllm012`, or ``costmodel calibrate serving``.)
"""

from __future__ import annotations

import dataclasses

from .attention_kernels import VLLM_SINKS_TRITON_010
from .moe_kernels import VLLM_MXFP4_MARLIN_HOPPER, VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120
from .profile import register_engine
from .vllm import DRIVER_RESERVED_BYTES, V1_NON_TORCH_BYTES
from .vllm import PROFILE as V1
from .vllm011 import v010_capture_sizes, vllm011_device_defaults
from .vllm06 import V0_NON_TORCH_BYTES

__all__ = ["NCCL_BYTES", "PROFILE", "v010_capture_sizes", "v010_memory_reserve"]

#: the NCCL and custom all-reduce buffers counted as non-torch memory at ``tp`` >= 2 (bytes):
#: V0's log grows by 3.58 - 1.79 GiB from tp 1 to tp 2 (vllm PR 10511); ASSUMED for 0.10's V1
NCCL_BYTES = V0_NON_TORCH_BYTES[2] - V0_NON_TORCH_BYTES[1]


def v010_memory_reserve(tp: int) -> tuple[float, float]:
    """vLLM 0.10's ``(d, R)`` (module doc): the driver's total less ``mem_get_info``'s, and the
    non-torch increase its memory profile subtracts: V1's 0.16 GiB, plus :data:`NCCL_BYTES` at
    ``tp`` >= 2 (the start-up snapshot precedes NCCL's set-up before vllm PR 25359).

    Parameters
    ----------
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    tuple of (float, float)
        :data:`.vllm.DRIVER_RESERVED_BYTES` and ``R`` (bytes).

    >>> [round(v010_memory_reserve(t)[1] / 2**30, 2) for t in (1, 2, 8)]
    [0.16, 1.95, 1.95]
    """
    return float(DRIVER_RESERVED_BYTES), float(V1_NON_TORCH_BYTES + (NCCL_BYTES if tp > 1 else 0))


_CONFIG = "vllm/config/__init__.py (0.10 series)"

PROFILE = register_engine(
    dataclasses.replace(
        V1,
        version="0.10",
        label="vLLM 0.10 (V1), vllm serve --async-scheduling (InferenceX's Llama-3.1-70B image v0.10.2)",
        max_num_seqs=1024,
        reserve_full_prompt=False,
        kv_watermark=0.0,
        device_defaults=vllm011_device_defaults,
        memory_reserve=v010_memory_reserve,
        cudagraph_sizes=v010_capture_sizes,
        cudagraph_memory=None,  # vLLM subtracts its CUDA graphs' estimate only from v0.21.0
        # the sampler's profile run (.sampler_memory, read in 0.10.1-0.10.2) is not counted: this
        # profile is InferenceX's Docker image (FlashInfer installed: 14 B a logit) and takes vllm@1's
        # CPU terms, fitted to those runs with the pool as it was; counted once they are refitted
        sampler="",
        moe_kernels=(VLLM_MXFP4_MARLIN_HOPPER, VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120),
        attention_kernels=(VLLM_SINKS_TRITON_010,),
        cpu_terms=dict(V1.cpu_terms),
        default_version=False,
        sources={
            **{k: v for k, v in V1.sources.items() if k != "cudagraph_memory"},
            "max_num_batched_tokens": "vllm/engine/arg_utils.py _set_default_args (as in vllm 0.11, ASSUMED in "
            "0.10): OPENAI_API_SERVER 8192 (>= 70 GiB, not A100), else 2048",
            "max_num_seqs": "vllm/engine/arg_utils.py _set_default_args (as in vllm 0.11, ASSUMED in 0.10): "
            "1024 (>= 70 GiB, not A100), else 256; min(that, max_num_batched_tokens)",
            "reserve_full_prompt": "vllm/v1/core/sched/scheduler.py: the first chunk's blocks "
            "(scheduler_reserve_full_isl came later, vllm PR 37307)",
            "kv_watermark": "vLLM V1 had no watermark before vllm PR 44594: 0, off",
            "memory_reserve": "mem_get_info total 0.43 GiB below nvidia-smi's (vllm PR 10511/12126); non-torch "
            "0.16 GiB (PR 12126) + NCCL 1.79 GiB at tp >= 2 (V0's tp 1 -> 2 growth, PR 10511; ASSUMED): the "
            "snapshot precedes NCCL before PR 25359",
            "cudagraph_sizes": f"{_CONFIG} SchedulerConfig cuda_graph_sizes [min(2 max_num_seqs, 512)], "
            "VllmConfig._set_cudagraph_sizes [1, 2, 4] + range(8, M + 1, 8) (ASSUMED in 0.10.2)",
        },
    )
)
