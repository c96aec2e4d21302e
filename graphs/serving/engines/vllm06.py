"""vLLM 0.6 (the V0 engine, ``vllm serve``) serving a model whose ``max_model_len`` exceeds 32K
tokens (Llama-3.1's 128K, say), priced by the corpus's ``vllm`` kernels: ``vllm@0.6``.

V0 chose its scheduler defaults from the model's context length; this profile is the long-context
branch, the one the catalog's current models take (a model of 32K or less ran without chunked
prefill and ``max_num_batched_tokens = max(max_model_len, 2048)``: give ``--no-chunked-prefill
--max-num-batched-tokens N`` for it). Sources (vLLM v0.6.x):

* chunked prefill on: ``EngineArgs.create_engine_config`` (``vllm/engine/arg_utils.py``) sets
  ``enable_chunked_prefill = True`` when ``max_model_len > 32K`` on CUDA without a sliding window,
  speculative decoding or LoRA, logging "Chunked prefill is enabled by default for models with
  max_model_len > 32K";
* ``max_num_batched_tokens`` 512: ``SchedulerConfig`` (``vllm/config.py``) takes 512 when chunked
  prefill is on and none is given ("Chunked prefill is enabled with max_num_batched_tokens=512"),
  in v0.6.0 to v0.6.4 only: https://github.com/vllm-project/vllm/pull/10544 ("Update default
  max_num_batch_tokens for chunked prefill to 2048", 2024-11-21) made it 2,048 from v0.6.5 (0.6.6's
  ``SchedulerConfig.__post_init__``: ``self.max_num_batched_tokens = 2048``), so a 0.6.5 or 0.6.6
  server takes ``--max-num-batched-tokens 2048``;
* ``max_num_seqs`` 256, ``block_size`` 16, ``gpu_memory_utilization`` 0.9 of the device:
  ``EngineArgs``' defaults;
* ``recompute``: V0's default ``preemption_mode`` for a single-sequence group
  (``vllm/core/scheduler.py``, ``_preempt``);
* ``reserve_full_prompt`` on and ``kv_watermark`` 0.01: a waiting prompt is admitted only when
  its whole prompt's blocks fit and 1 % of the pool stays free
  (``vllm/core/block_manager.py``, ``SelfAttnBlockSpaceManager(watermark=0.01)``,
  ``can_allocate``: ``num_free_gpu_blocks - num_required_blocks >= watermark_blocks``; the
  simulator, as V1, waives the watermark for the first admission into an idle pool);
* the KV pool: ``gpu_memory_utilization`` of ``mem_get_info``'s total (``d`` = 0.43 GiB below
  nvidia-smi's: :data:`.vllm.DRIVER_RESERVED_BYTES`), less weights, the activation peak and the
  memory outside PyTorch that appeared since the worker's start (``vllm/worker/worker.py``
  ``determine_num_available_blocks``: V0 measured its baseline before
  ``init_worker_distributed_environment``, so NCCL and the custom all-reduce count), by ``tp``
  (:func:`v0_memory_reserve`): V0's log of Meta-Llama-3-8B on an H100 reads "non_torch_memory
  1.79GiB" at tp 1 and "3.58GiB" at tp 2 (https://github.com/vllm-project/vllm/pull/10511); held
  at 3.58 GiB above tp 2 (ASSUMED: no log at tp 4 or 8);
* CUDA-graph capture sizes ``[1, 2, 4] + [8 i for i in 1..32]`` up to the padded ``max_num_seqs``
  (``vllm/worker/model_runner.py``, ``_BATCH_SIZES_TO_CAPTURE``, ``_get_graph_batch_size``);
  decode-only batches run the graph, a batch with a prefill chunk runs eager;
* small kernels: the same fused ops as V1 (``fused_add_rms_norm``, ``rotary_embedding``,
  ``reshape_and_cache_flash``: ``vllm/_custom_ops.py``).

ASSUMED: every CPU and request-path term (V1's values stand in; V0's scheduling and API server
took 29 % and 33 % of a Llama-3-8B H100 run's time before 0.6.0's multi-step scheduling and
process split, https://blog.vllm.ai/2024/09/05/perf-update.html; ``costmodel calibrate serving``
fits them to a user's runs).
"""

from __future__ import annotations

from .profile import EngineProfile, register_engine
from .vllm import DRIVER_RESERVED_BYTES, FUSED_SMALL_KERNELS
from .vllm import PROFILE as V1

__all__ = ["PROFILE", "V0_NON_TORCH_BYTES", "v0_capture_sizes", "v0_memory_reserve"]


def v0_capture_sizes(max_num_seqs: int = 256, max_num_batched_tokens: int = 512) -> tuple[int, ...]:
    """V0's ``_BATCH_SIZES_TO_CAPTURE`` (``[1, 2, 4] + [8 i for i in 1..32]``) up to the padded
    ``max_num_seqs`` (``_get_graph_batch_size``: 1, 2, 4, else the next multiple of 8); the token
    budget does not bound a decode batch's graph in V0.

    Parameters
    ----------
    max_num_seqs : int
        Sequences per iteration.
    max_num_batched_tokens : int
        Tokens per iteration (accepted for the profile's signature; V0 ignores it here).

    Returns
    -------
    tuple of int
        Batch sizes (sequences) with a captured CUDA graph, ascending.

    >>> v0_capture_sizes(256)[-2:]
    (248, 256)
    >>> v0_capture_sizes(5), v0_capture_sizes(3)
    ((1, 2, 4, 8), (1, 2, 4))
    """
    n = max_num_seqs
    top = n if n <= 2 else 4 if n <= 4 else -(-n // 8) * 8
    return tuple(s for s in [1, 2, 4] + [8 * i for i in range(1, 33)] if s <= top)


#: V0's non-torch memory by tp (bytes): vllm PR 10511's log, Meta-Llama-3-8B on an H100
V0_NON_TORCH_BYTES = {1: round(1.79 * 2**30), 2: round(3.58 * 2**30)}


def v0_memory_reserve(tp: int) -> tuple[float, float]:
    """vLLM V0's ``(d, R)`` (module doc): the driver's total less ``mem_get_info``'s, and the
    non-torch memory at ``tp`` (:data:`V0_NON_TORCH_BYTES`; above tp 2 the tp-2 value, ASSUMED).

    Parameters
    ----------
    tp : int
        Tensor-parallel degree.

    Returns
    -------
    tuple of (float, float)
        Bytes, bytes.
    """
    return float(DRIVER_RESERVED_BYTES), float(V0_NON_TORCH_BYTES[min(tp, 2)])


_ASSUMED = "ASSUMED: V1's value stands in (no source publishes V0's; costmodel calibrate serving fits it)"
_V0 = "vllm/engine/arg_utils.py EngineArgs (v0.6)"

PROFILE = register_engine(
    EngineProfile(
        name="vllm",
        version="0.6",
        label="vLLM 0.6 (V0), vllm serve, a model of max_model_len > 32K",
        framework="vllm",
        max_num_batched_tokens=512,
        max_num_seqs=256,
        block_size=16,
        enable_chunked_prefill=True,
        policy="recompute",
        reserve_full_prompt=True,
        kv_watermark=0.01,
        kv_rule="device",
        kv_fraction=0.9,
        memory_reserve=v0_memory_reserve,
        cudagraph_sizes=v0_capture_sizes,
        small_kernels=FUSED_SMALL_KERNELS,
        cpu_terms=dict(V1.cpu_terms),
        fitted=(),
        default_version=False,
        sources={
            "dp_load_balance": "ASSUMED: V1's score rule (vllm/v1/engine/core_client.py DPLBAsyncMPClient); "
            "v0.6 ran no data-parallel ranks of its own",
            "max_num_batched_tokens": "vllm/config.py SchedulerConfig: 512 with chunked prefill (v0.6.0-v0.6.4; "
            "2048 from v0.6.5, vllm PR 10544)",
            "max_num_seqs": f"{_V0}.max_num_seqs: 256",
            "block_size": f"{_V0}.block_size: 16",
            "enable_chunked_prefill": f"{_V0}.create_engine_config: on for max_model_len > 32K",
            "batch_wait_timeout_iters": "vLLM has no batch waiting: 0, off",
            "batch_wait_max_tokens_ratio": "vLLM has no batch waiting: 0, off",
            "policy": "vllm/core/scheduler.py _preempt: recompute for single-sequence groups",
            "kv_fraction": f"{_V0}.gpu_memory_utilization: 0.9",
            "reserve_full_prompt": "vllm/core/block_manager.py can_allocate: the whole prompt's blocks",
            "kv_watermark": "vllm/core/block_manager.py SelfAttnBlockSpaceManager watermark: 0.01",
            "enable_prefix_caching": f"{_V0}.enable_prefix_caching: False",
            "kv_rule": "V0 profiles weights and a peak forward, the rest of u x device to KV blocks",
            "memory_reserve": "vllm PR 10511 log (V0, Llama-3-8B, H100): mem_get_info total 79.22 GiB "
            "(0.43 GiB below nvidia-smi's), non-torch 1.79 GiB at tp 1, 3.58 GiB at tp 2 (held above: ASSUMED)",
            "cudagraph_sizes": "vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE, _get_graph_batch_size",
            "small_kernels": "vllm/_custom_ops.py fused_add_rms_norm, rotary_embedding, reshape_and_cache_flash",
            "iteration_s": _ASSUMED,
            "per_seq_s": _ASSUMED,
            "per_token_s": _ASSUMED,
            "request_s": _ASSUMED,
            "output_token_s": _ASSUMED,
            "per_prompt_token_s": _ASSUMED,
            "prefix_lookup_per_token_s": _ASSUMED,
            "frontend_token_s": _ASSUMED,
        },
    )
)
