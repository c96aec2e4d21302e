"""TensorRT-LLM: ``trtllm-serve`` (the PyTorch backend's OpenAI server, :data:`PROFILE`) and
``trtllm-bench`` (its benchmark runner, :data:`BENCH`, whose only differing default is chunked
prefill), both priced by the corpus's ``trtllm`` kernels.

Sources of every default:

* ``max_num_batched_tokens`` 8,192 and ``max_num_seqs`` 2,048: the LLM API's ``max_num_tokens``
  and ``max_batch_size`` defaults (``tensorrt_llm/llmapi/llm_args.py``, ``BaseLlmArgs``; the
  perf overview's stated defaults: https://nvidia.github.io/TensorRT-LLM/performance/perf-overview.html).
* ``block_size`` 32: ``KvCacheConfig.tokens_per_block``'s default.
* KV pool: ``kv_cache_free_gpu_mem_fraction`` 0.90 of the memory left after the engine has loaded
  its weights and activation buffers (``KvCacheConfig.free_gpu_memory_fraction``; the perf
  overview's stated default, "0.95 in many cases"): the ``free`` rule of :mod:`.profile`.
* ``guaranteed_no_evict``: the default capacity scheduler policy: a request is admitted only when
  the blocks of its prompt plus its maximum output can be reserved
  (https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/useful-runtime-flags.html,
  "Capacity Scheduler Policy"; ``trtllm-bench --scheduler_policy`` defaults to it too).
* chunked prefill: ``trtllm-serve`` leaves ``enable_chunked_prefill`` at the LLM API's False
  (``tensorrt_llm/commands/serve.py``: a prompt runs whole in one iteration); ``trtllm-bench
  throughput`` passes ``--enable_chunked_context/--disable_chunked_context``, default True
  (``tensorrt_llm/bench/benchmark/throughput.py``).
* batch waiting off: ``batch_wait_timeout_iters`` and ``batch_wait_max_tokens_ratio`` default to
  0 (``tensorrt_llm/_torch/pyexecutor/py_executor.py``; InferenceX's scripts: "by default they
  are all zeros").
* no CUDA-graph padding: ``CudaGraphConfig.enable_padding`` is False by default ("If true,
  batches are rounded up to the nearest cuda_graph_batch_size", ``tensorrt_llm/llmapi/llm_args.py``
  of the 1.x releases; ``DecodeCudaGraphConfig`` in later ones:
  https://nvidia.github.io/TensorRT-LLM/llm-api/reference/DecodeCudaGraphConfig.html).
* prefix caching: ``trtllm-serve``'s default, ON: ``KvCacheConfig.enable_block_reuse`` defaults to
  True (``tensorrt_llm/llmapi/llm_args.py``) and ``serve.py``'s ``get_llm_args`` builds
  ``KvCacheConfig(free_gpu_memory_fraction=...)`` without touching it, so a default server reuses
  KV blocks across requests (:data:`SERVE_BLOCK_REUSE`, the profile's source;
  ``--no-enable-prefix-caching`` for a server given ``enable_block_reuse: false``). Its lookup costs
  nothing here (``prefix_lookup_per_token_s`` 0, below), so a replay without shared prefixes runs
  as with it off. ``trtllm-bench`` and Triton's backend keep it off (ASSUMED, as before
  profiles: their runs' settings are not read here).
* small kernels: RoPE and the KV append run inside its attention op (``thop.attention`` takes the
  fused QKV, the rotary settings and the cache's block offsets:
  ``tensorrt_llm/_torch/attention_backend/trtllm.py``), the residual add inside the norm
  (``RMSNorm(residual=...)``); one kernel per norm, activation and embedding gather.
* CPU terms: ``iteration_s`` and ``per_seq_s`` fitted by ``benchmarks/overhead_fit.py``
  (``docs/overhead_fit.md``) to the mean TPOT of 12 Llama-3.1-70B FP8 trtllm-serve runs on H200
  (InferenceX's campaigns, attribution inferred), 60 held out: ``a`` = 0 (held at its lower
  bound), ``b`` = 3.09 us (standard error 13 us). ``per_token_s`` (10 ns) and ``output_token_s``
  (20 us) are ASSUMED (no source publishes them).
* the request path (:meth:`~.knobs.EngineOverheads.request_path_s`): ``per_prompt_token_s``
  2 us, tokenisation with Hugging Face ``tokenizers`` (the LLM API's tokenizer; the measured rate
  is :mod:`.vllm`'s source); ``prefix_lookup_per_token_s`` 0, ASSUMED negligible: KV-cache block
  reuse keys its blocks in the C++ KV-cache manager, not in Python; ``request_s`` 22 ms FITTED by
  ``benchmarks/request_path_fit.py`` (``docs/request_path.md``) on the validation tables'
  TensorRT-LLM TTFT rows outside the held-out split (182 calibration rows; Triton's rows, whose
  profile has a sourced request path of its own, left out), the median of ``|error|`` least
  there (7.7 %, tables replayed at 25 ms; 24 ms by least squares over the rows within 50 %). Admission waits for the running iteration's end (the
  executor loop fetches new requests between iterations), which the simulator models exactly.
* ``frontend_token_s`` 0, NOT IDENTIFIED: ``trtllm-serve``'s response loop (detokenising and
  streaming every request's tokens) as one server shared by all requests (:mod:`.knobs`, module
  doc); ``benchmarks/frontend_fit.py`` bounds its cost by 78 us per token on the calibration rows
  (Llama-3.1-8B at 128 clients on H100), reached at TP 4 only, so no value is taken.
"""

from __future__ import annotations

from dataclasses import replace

from costmodel.keys import Role

from .profile import EngineProfile, register_engine
from .vllm import TOKENISE, request_fit

__all__ = ["PROFILE", "BENCH", "SERVE_BLOCK_REUSE"]

_ASSUMED = "ASSUMED: no source publishes it (costmodel calibrate serving fits it)"
_FIT = "fitted: benchmarks/overhead_fit.py, docs/overhead_fit.md (InferenceX Llama-3.1-70B FP8, H200)"
_SOURCES = {
    "dp_load_balance": "ASSUMED: vLLM's score rule (fewest 4 x waiting + running) stands in; TensorRT-LLM's "
    "attention-DP router (_balance_requests_across_ranks) sends a new request to the rank with the "
    "fewest active tokens, not modelled",
    "max_num_batched_tokens": "tensorrt_llm/llmapi/llm_args.py BaseLlmArgs.max_num_tokens: 8192",
    "max_num_seqs": "tensorrt_llm/llmapi/llm_args.py BaseLlmArgs.max_batch_size: 2048",
    "block_size": "KvCacheConfig.tokens_per_block: 32",
    "enable_chunked_prefill": "tensorrt_llm/commands/serve.py: the LLM API's enable_chunked_prefill False",
    "batch_wait_timeout_iters": "tensorrt_llm/_torch/pyexecutor/py_executor.py: 0, off",
    "batch_wait_max_tokens_ratio": "tensorrt_llm/_torch/pyexecutor/py_executor.py: 0, off",
    "policy": "performance-tuning-guide/useful-runtime-flags.html: GUARANTEED_NO_EVICT by default",
    "kv_fraction": "KvCacheConfig.free_gpu_memory_fraction 0.90 (perf-overview.html)",
    "reserve_full_prompt": "GUARANTEED_NO_EVICT reserves prompt + max output already: no separate gate",
    "kv_watermark": "TensorRT-LLM's capacity scheduler keeps no watermark: 0",
    "enable_prefix_caching": "ASSUMED off, as before profiles: KvCacheConfig.enable_block_reuse; give --enable-prefix-caching",
    "kv_rule": "TensorRT-LLM sizes its KV pool from the free memory after the engine loads "
    "(the vendor capacity stands for the driver's total less the runtime's own allocations: KVPool.vendor_bytes, ASSUMED)",
    "cudagraph_sizes": "tensorrt_llm/llmapi/llm_args.py CudaGraphConfig.enable_padding False (1.0; "
    "DecodeCudaGraphConfig in later releases): no padding",
    "small_kernels": "tensorrt_llm/_torch/attention_backend/trtllm.py: RoPE and KV append inside attention",
    "iteration_s": _FIT,
    "per_seq_s": _FIT,
    "per_token_s": _ASSUMED,
    "request_s": request_fit(182, "TensorRT-LLM"),
    "output_token_s": _ASSUMED,
    "per_prompt_token_s": TOKENISE,
    "prefix_lookup_per_token_s": "ASSUMED negligible: block reuse hashes its block keys in the C++ KV-cache manager",
    "frontend_token_s": "NOT IDENTIFIED, 0: benchmarks/frontend_fit.py (docs/frontend_fit.md) bounds it by 78 us/token on the calibration rows (TP 4 only at the bound); no source publishes trtllm-serve's ceiling",
}

#: ``trtllm-serve``'s prefix caching: the engine's default, on (module doc)
SERVE_BLOCK_REUSE = (
    "tensorrt_llm/llmapi/llm_args.py KvCacheConfig.enable_block_reuse default True, and "
    "tensorrt_llm/commands/serve.py get_llm_args builds KvCacheConfig(free_gpu_memory_fraction=...) only: "
    "trtllm-serve reuses KV blocks by default; give --no-enable-prefix-caching for enable_block_reuse: false"
)

PROFILE = register_engine(
    EngineProfile(
        name="trtllm",
        version="1.0",
        label="TensorRT-LLM trtllm-serve, PyTorch backend",
        framework="trtllm",
        max_num_batched_tokens=8192,
        max_num_seqs=2048,
        block_size=32,
        enable_chunked_prefill=False,
        policy="guaranteed_no_evict",
        kv_rule="free",
        kv_fraction=0.90,
        enable_prefix_caching=True,  # trtllm-serve's default: SERVE_BLOCK_REUSE
        cudagraph_sizes=None,
        small_kernels={Role.NORM: "each", Role.ACTIVATION: "each", Role.EMBEDDING: "each"},
        cpu_terms={
            "iteration_s": 0.0,  # fitted: 0, held at its lower bound
            "per_seq_s": 3.1e-6,  # fitted: 3.09e-06 (s.e. 1.3e-05)
            "per_token_s": 1e-8,
            "request_s": 22e-3,  # fitted: benchmarks/request_path_fit.py, 182 calibration rows
            "output_token_s": 2e-5,
            "per_prompt_token_s": 2e-6,
            "prefix_lookup_per_token_s": 0.0,
            "frontend_token_s": 0.0,  # not identified: benchmarks/frontend_fit.py
        },
        fitted=("iteration_s", "per_seq_s", "request_s"),
        sources={**_SOURCES, "enable_prefix_caching": SERVE_BLOCK_REUSE},
    )
)

#: ``trtllm-bench``: the same engine and defaults, prompts chunked (module doc)
BENCH = register_engine(
    replace(
        PROFILE,
        name="trtllm-bench",
        label="TensorRT-LLM trtllm-bench throughput",
        enable_chunked_prefill=True,
        enable_prefix_caching=False,  # ASSUMED off, as before profiles (_SOURCES), not trtllm-serve's on
        sources={
            **_SOURCES,
            "enable_chunked_prefill": "tensorrt_llm/bench/benchmark/throughput.py: --enable_chunked_context default True",
        },
    )
)
