"""vLLM 0.11.0 (the V1 engine, ``vllm serve``), priced by the corpus's ``vllm`` kernels: ``vllm@0.11``
(0.11.1 and 0.11.2, whose CUDA-graph capture sizes differ: ``vllm@0.11.1``, :mod:`.vllm0111`).

The same V1 engine core as :mod:`.vllm` (``vllm@1``), at the release whose batch defaults follow
the GPU: on a GPU of at least 70 GiB whose name does not contain "a100" it runs up to 1,024
sequences an iteration, not 256. Sources (vLLM 0.11, ``vllm-project/vllm`` at commit 99d7eb5,
the series whose ``AsyncEngineArgs.disable_log_requests`` "will be removed in v0.12.0"):

* ``max_num_batched_tokens`` and ``max_num_seqs`` by device: ``EngineArgs._set_default_args``
  (``vllm/engine/arg_utils.py``) takes, for the OpenAI API server, 8,192 tokens and 1,024
  sequences when ``device_memory >= 70 * GiB_bytes and "a100" not in device_name`` ("For GPUs
  like H100 and MI300x, use larger default values": ``default_max_num_seqs =
  {LLM_CLASS: 1024, OPENAI_API_SERVER: 1024}``), else 2,048 tokens and 256 sequences; then
  ``max_num_seqs = min(default_max_num_seqs[usage_context], max_num_batched_tokens)``
  (:func:`vllm011_device_defaults`). The profile's own values are the large-GPU branch (the
  catalog's H100, H200, B200, MI300X take it);
* chunked prefill and prefix caching on: the same function ("V1 uses chunked prefills and prefix
  caching by default for non-pooling tasks"; prefix caching off for hybrid models, which
  ``--no-enable-prefix-caching`` gives);
* ``block_size`` 16, ``gpu_memory_utilization`` 0.9 of the device, ``recompute`` preemption and
  the fused small kernels: V1's, as :mod:`.vllm` cites them;
* the CUDA-graph capture sizes, 0.11.0's: ``[1, 2, 4] + range(8, M + 1, 8)`` with ``M =
  min(2 max_num_seqs, 512)`` (512 at 1,024 sequences: 67 sizes), those up to
  ``max_num_batched_tokens`` (:func:`v010_capture_sizes`, 0.10's rule): 0.11.0 still read
  ``SchedulerConfig.cuda_graph_sizes`` (``[min(2 max_num_seqs, 512)]``), as its gpt-oss override's
  comment counts ("This will increase the number of CUDA graphs from 67 to 81", quoted from vLLM
  0.11.0 in SemiAnalysisAI/InferenceX issue 117: 67 = 3 + 512 / 8) and vllm-ascend's v0.11.0
  PR 4205 lists ("[1, 2, 4, 8, 16, 24, ..., max_capture_size]"). The two-step rule
  (``[1, 2, 4] + range(8, 256, 8) + range(256, M + 1, 16)``, 51 sizes at 512, read at the commit
  above) came with https://github.com/vllm-project/vllm/pull/26016 (opened 2025-10-01, after
  0.11.0's branch; it also removed ``cuda_graph_sizes``), in 0.11.1 on: ``vllm@0.11.1``
  (:mod:`.vllm0111`, 0.11.1 and 0.11.2) and ``vllm@0.12`` take it. A decode batch of at most 256
  sequences pads the same under both rules;
* the KV pool's memory terms, V1's (:func:`.vllm.v1_memory_reserve`): ``gpu_memory_utilization``
  of ``mem_get_info``'s total, less weights, activations and a non-torch increase that does not
  grow with ``tp`` (NCCL set up before the start-up snapshot: vllm PR 25359, merged 2025-09-22;
  ASSUMED in this release, whose commit the search corpus does not hold); no CUDA-graph estimate
  (added in vllm PR 30515, after this release, and off by default until v0.21.0); the activations
  are the larger of the forward pass at the token budget and the sampler's dummy run over
  ``min(N, max_num_seqs)`` rows of the vocabulary (:mod:`.sampler_memory`, read in the 0.11.0
  sdist): ``sampler`` ``torch``, 38 B a logit on the PyTorch top-k/top-p path a PyPI install runs
  (FlashInfer is an extra of the wheel), 7.29 GiB for a 201,088-token vocabulary at 1,024
  sequences, which on one H100 leaves gpt-oss-120b no room (vllm issues 23278 and 27508's logs
  reproduced: tests/test_vllm_memory.py); ``--sampler flashinfer`` where FlashInfer is installed
  (vLLM's Docker image), 14 B a logit;
* ``reserve_full_prompt`` off: a waiting request is admitted when its first chunk's blocks are
  free (``allocate_slots`` for the tokens scheduled); the whole-prompt check
  (``scheduler_reserve_full_isl``) came with https://github.com/vllm-project/vllm/pull/37307, after
  this release;
* ``kv_watermark`` 0: V1 had no admission watermark before
  https://github.com/vllm-project/vllm/pull/44594;
* the fused MoE of MXFP4 experts (gpt-oss, from 0.10.1) on Hopper: Marlin, not OpenAI's Triton
  kernel the corpus measures for H100 (ASSUMED for a PyPI install: the wheel did not bring
  ``triton_kernels``, so ``get_mxfp4_backend`` fell back:
  :data:`.moe_kernels.VLLM_MXFP4_MARLIN_HOPPER`), and on Ampere, Ada and SM 12.x cards as every
  release (:data:`.moe_kernels.VLLM_MXFP4_MARLIN_PRE_HOPPER`, :data:`.moe_kernels.VLLM_MXFP4_MARLIN_SM120`);
* attention with learned sinks (gpt-oss) off Hopper and SM 10.0: vLLM's Triton kernel
  (``TRITON_ATTN``, :data:`.attention_kernels.VLLM_SINKS_TRITON`), which the corpus does not time at gpt-oss's shape:
  the predictor counts it as a neighbour of the rows that price it;
* the request path's tokenisation (2 us per prompt token) and SHA-256 block hashing (150 ns per
  prompt token, the default since v0.10.2): :mod:`.vllm`'s sources, which hold for this release.

ASSUMED: the CPU time per iteration and per sequence are ``vllm@0.12``'s, fitted to runs that
schedule synchronously (:mod:`.vllm012`): async scheduling, which hides them behind the GPU's
step, was opt-in (``--async-scheduling``) until v0.14.0; the other CPU terms and the fixed request
term are ``vllm@1``'s (the same engine core and API-server process split, but fitted to runs of no
named release). ``costmodel calibrate serving`` fits them all to a user's runs.
"""

from __future__ import annotations

from .attention_kernels import VLLM_SINKS_TRITON
from .moe_kernels import VLLM_MXFP4_MARLIN_HOPPER, VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120
from .profile import EngineProfile, register_engine
from .vllm import (
    FUSED_SMALL_KERNELS,
    MEMORY_RESERVE_SOURCE,
    SYNC_CPU_TERMS,
    TOKENISE,
    v1_memory_reserve,
    vllm_device_defaults,
)
from .vllm import PROFILE as V1

__all__ = ["CAPTURE_0110", "PROFILE", "v010_capture_sizes", "vllm011_device_defaults"]


def vllm011_device_defaults(
    capacity_bytes: float, device_name: str, tp: int = 1, dp: int = 1, budget: int | None = None
) -> dict[str, int]:
    """vLLM 0.11's batch limits for ``vllm serve`` on a device (``EngineArgs._set_default_args``):
    on a GPU of at least 70 GiB whose name does not contain "a100", a token budget ``N`` = 8,192
    and ``S`` = 1,024 sequences, else ``N`` = 2,048 and ``S`` = 256; the sequences are then capped
    at the budget, ``max_num_seqs = min(S, N)``.

    Parameters
    ----------
    capacity_bytes : float
        The device's memory (bytes; the threshold is 70 GiB = 75,161,927,680 bytes).
    device_name : str
        Its catalog name (an A100 takes the small branch whatever its memory).
    tp : int
        Tensor-parallel degree (vLLM's defaults do not depend on it).

    dp : int
        Attention data-parallel ranks (unused: the defaults are each rank's own).
    budget : int, optional
        A token budget the user gave (not read: this rule's fraction does not depend on it).

    Returns
    -------
    dict of str to int
        ``max_num_batched_tokens`` and ``max_num_seqs``.

    >>> vllm011_device_defaults(141e9, "h200")
    {'max_num_batched_tokens': 8192, 'max_num_seqs': 1024}
    >>> vllm011_device_defaults(80e9, "a100-sxm-80gb")
    {'max_num_batched_tokens': 2048, 'max_num_seqs': 256}
    """
    # the rule V1's get_batch_defaults keeps: one function for both profiles
    return vllm_device_defaults(capacity_bytes, device_name, tp, dp, budget)


def v010_capture_sizes(max_num_seqs: int = 1024, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """vLLM 0.10's and 0.11.0's V1 capture sizes: ``[1, 2, 4] + range(8, M + 1, 8)`` with
    ``M = min(2 max_num_seqs, 512)``, those no larger than ``max_num_batched_tokens``
    (``VllmConfig._set_cudagraph_sizes`` reading ``SchedulerConfig.cuda_graph_sizes``, until
    https://github.com/vllm-project/vllm/pull/26016 brought the two-step rule of 0.11.1 on:
    :func:`.vllm.vllm_capture_sizes`). Defined here, beside the 0.11.0 profile, and imported by
    :mod:`.vllm010` (which takes 0.11's batch limits from this module).

    Parameters
    ----------
    max_num_seqs : int
        Sequences per iteration.
    max_num_batched_tokens : int
        Tokens per iteration.

    Returns
    -------
    tuple of int
        Batch sizes (sequences) with a captured CUDA graph, ascending.

    >>> v010_capture_sizes()[-3:], len(v010_capture_sizes())
    ((496, 504, 512), 67)
    >>> v010_capture_sizes(64)[-2:], v010_capture_sizes(1)
    ((120, 128), (1, 2, 4))
    """
    m = min(2 * max_num_seqs, 512)
    sizes = [1, 2, 4, *range(8, m + 1, 8)]
    return tuple(s for s in sizes if s <= max_num_batched_tokens)


_ARGS = "vllm/engine/arg_utils.py EngineArgs._set_default_args (vllm 0.11, commit 99d7eb5)"
_STAND_IN = "ASSUMED: vllm@1's value stands in (same V1 engine core; costmodel calibrate serving fits it)"
_SYNC_STAND_IN = (
    "ASSUMED: vllm@0.12's synchronous-scheduling fit stands in (async scheduling opt-in before v0.14.0; "
    "benchmarks/sync_overhead_fit.py)"
)

#: 0.11.0's capture sizes' source (module doc); ``vllm@0.11.1`` and later take the two-step rule
CAPTURE_0110 = (
    "vllm/config/__init__.py VllmConfig._set_cudagraph_sizes (0.11.0): [1, 2, 4] + range(8, M + 1, 8), "
    "M = SchedulerConfig.cuda_graph_sizes = min(2 max_num_seqs, 512), those <= max_num_batched_tokens: "
    "67 sizes at M = 512 (0.11.0's gpt-oss comment 'from 67 to 81', InferenceX issue 117; vllm-ascend PR 4205 "
    "for v0.11.0); the two-step rule of vllm PR 26016 is 0.11.1's on (vllm@0.11.1)"
)

PROFILE = register_engine(
    EngineProfile(
        name="vllm",
        version="0.11",
        label="vLLM 0.11.0 (V1), vllm serve, up to 1,024 sequences on a GPU of >= 70 GiB",
        framework="vllm",
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        block_size=16,
        enable_chunked_prefill=True,
        policy="recompute",
        reserve_full_prompt=False,
        kv_watermark=0.0,
        enable_prefix_caching=True,
        device_defaults=vllm011_device_defaults,
        kv_rule="device",
        kv_fraction=0.9,
        memory_reserve=v1_memory_reserve,
        sampler="torch",
        cudagraph_sizes=v010_capture_sizes,  # 0.11.0's step-8 rule (module doc)
        small_kernels=FUSED_SMALL_KERNELS,
        moe_kernels=(VLLM_MXFP4_MARLIN_HOPPER, VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120),
        attention_kernels=(VLLM_SINKS_TRITON,),
        cpu_terms={**V1.cpu_terms, **SYNC_CPU_TERMS},
        fitted=(),
        default_version=False,
        sources={
            "dp_load_balance": "vllm/v1/engine/core_client.py DPLBAsyncMPClient: a request goes to the rank "
            "with the least score = waiting * 4 + running",
            "max_num_batched_tokens": f"{_ARGS}: OPENAI_API_SERVER 8192 (>= 70 GiB, not A100), else 2048",
            "max_num_seqs": f"{_ARGS}: OPENAI_API_SERVER 1024 (>= 70 GiB, not A100), else 256; "
            "min(that, max_num_batched_tokens)",
            "block_size": V1.sources["block_size"],
            "enable_chunked_prefill": f"{_ARGS}: V1 uses chunked prefills by default",
            "batch_wait_timeout_iters": "vLLM has no batch waiting: 0, off",
            "batch_wait_max_tokens_ratio": "vLLM has no batch waiting: 0, off",
            "policy": V1.sources["policy"],
            "kv_fraction": V1.sources["kv_fraction"],
            "reserve_full_prompt": "vllm/v1/core/sched/scheduler.py: the first chunk's blocks "
            "(scheduler_reserve_full_isl came later, vllm PR 37307)",
            "kv_watermark": "vLLM V1 had no watermark before vllm PR 44594: 0, off",
            "enable_prefix_caching": f"{_ARGS}: V1 uses prefix caching by default (not for hybrid models)",
            "kv_rule": V1.sources["kv_rule"],
            "memory_reserve": MEMORY_RESERVE_SOURCE + " (ASSUMED in 0.11; no CUDA-graph estimate then)",
            "sampler": "a PyPI install: flashinfer is an extra of the 0.11.0 wheel, so the PyTorch sampler runs "
            "(vllm/v1/sample/ops/topk_topp_sampler.py; --sampler flashinfer where it is installed)",
            "cudagraph_sizes": CAPTURE_0110,
            "small_kernels": V1.sources["small_kernels"],
            "iteration_s": _SYNC_STAND_IN,
            "per_seq_s": _SYNC_STAND_IN,
            "per_token_s": _STAND_IN,
            "request_s": _STAND_IN,
            "output_token_s": _STAND_IN,
            "per_prompt_token_s": TOKENISE,
            "prefix_lookup_per_token_s": V1.sources["prefix_lookup_per_token_s"],
            "frontend_token_s": _STAND_IN,
        },
    )
)
