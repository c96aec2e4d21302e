"""vLLM V1 (``vllm serve``, the OpenAI API server), priced by the corpus's ``vllm`` kernels.

Sources of every default (:data:`PROFILE`):

* ``max_num_batched_tokens`` 8,192: V1's default for the OpenAI API server on a GPU of at least
  70 GiB that is not an A100 (``vllm/engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``:
  ``default_max_num_batched_tokens = {LLM_CLASS: 16384, OPENAI_API_SERVER: 8192}``); 2,048 on
  any other GPU (the same function's ``else`` branch: ``{LLM_CLASS: 8192, OPENAI_API_SERVER:
  2048}``), which :func:`vllm_device_defaults` applies. The budget sizes the profiled activation
  peak, so on a 24 GB card it moves the KV pool by a third (Llama-3.1-8B on an RTX 4090: 1,772
  blocks at 8,192 tokens, 2,548 at 2,048: tests/test_overload.py).
* ``max_num_seqs`` 1,024: the same function's value on a GPU of at least 70 GiB that is not an
  A100 (``default_max_num_seqs = {LLM_CLASS: 1024, OPENAI_API_SERVER: 1024}``), 256 on any other
  (``{LLM_CLASS: 256, OPENAI_API_SERVER: 256}``), capped at the token budget; both by device in
  :func:`vllm_device_defaults`. (Until 2026-12-07 the profile kept 256 everywhere, the
  simulator's default before profiles, while ``engines`` printed V1's 1,024 as its source: a
  load of more than 256 running sequences on an H100 was capped where vLLM runs it. The capture
  sizes below are the same for any limit >= 256: ``min(2 x 256, 512) = 512``.)
* ``block_size`` 16: ``CacheConfig.block_size``'s CUDA default (``vllm/config/cache.py``).
* KV pool: ``gpu_memory_utilization`` 0.9 of the whole device, less the weights, a profiled
  peak-activation forward pass, the non-torch memory the profile sees and the CUDA graphs' estimate
  (``CacheConfig.gpu_memory_utilization``; the ``device`` rule of :mod:`.profile`,
  :func:`graphs.serving.sim.engine.kv_blocks`; :func:`v1_memory_reserve`):

  .. math::

      n = \\left\\lfloor \\frac{u (C - d) - W - a N - R - G}{b k} \\right\\rfloor

  (``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory``: ``available =
  requested_memory - non_kv_cache_memory``, ``requested_memory = total_memory *
  gpu_memory_utilization``; ``vllm/utils/mem_utils.py`` ``memory_profiling``:
  ``non_kv_cache_memory = weights_memory + torch_peak_increase + non_torch_increase``; less
  ``cudagraph_memory_estimate_applied`` since v0.21.0).

  - ``C - d``: ``total_memory`` is ``torch.cuda.mem_get_info``'s total, below nvidia-smi's
    (:func:`graphs.serving.sim.engine.pool_memory`'s ``C``, 81,559 MiB on an H100 SXM): vLLM logs
    ``total_gpu_memory 79.22GiB`` on an H100 80 GB (https://github.com/vllm-project/vllm/pull/10511
    and /pull/12126, Llama-3-8B and Llama-3.2-11B-Vision), so ``d`` = 81,559 MiB - 79.22 GiB =
    459.0e6 B (0.43 GiB; :data:`DRIVER_RESERVED_BYTES`). ASSUMED the same on every card (no other
    card's pair is sourced; a 24 GB card's log, total 23.58 GiB in /pull/14447, is 0.41 GiB
    below a 4090's 24,564 MiB);
  - ``R``, the non-torch increase: memory that is neither PyTorch's nor there at the start-up
    snapshot (cuBLAS workspaces, attention-backend buffers). Since
    https://github.com/vllm-project/vllm/pull/25359 (merged 2025-09-22) the worker initialises
    NCCL and the custom all-reduce before the snapshot ("This ensures NCCL buffers are allocated
    before we measure available memory"), so they sit in the ``1 - u`` left over and ``R`` does
    not grow with ``tp``: 0.16 GiB (:data:`V1_NON_TORCH_BYTES`; "non_torch_memory takes 0.16GiB",
    Llama-3.2-11B-Vision at tp 1 on an H100, /pull/12126, the same ``memory_profiling``);
  - ``G``, the CUDA-graph estimate (:func:`v1_cudagraph_memory`, an ESTIMATE: vLLM measures it,
    no source gives it as a formula). Since v0.21.0 V1 captures a few CUDA graphs during its
    memory profile and subtracts their extrapolated memory before sizing the pool ("CUDA graph
    memory profiling is enabled (default since v0.21.0)", the worker's start-up log, e.g.
    https://github.com/gpustack/runner/pull/251; ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, added
    off by https://github.com/vllm-project/vllm/pull/30515; ``gpu_worker.py``:
    ``available_kv_cache_memory_bytes = requested_memory - non_kv_cache_memory -
    cudagraph_memory_estimate_applied``). ``gpu_model_runner.py`` ``profile_cudagraph_memory``
    captures the two largest sizes of each mode (``PIECEWISE`` for every capture size,
    ``FULL`` for uniform decode batches) and takes ``max(first capture) + sum over modes of
    (second capture) x (sizes - 1)``. Its two captures depend on the model, so ``G`` is
    modelled from the logs, as that sum per decoder layer ``L``:

    .. math::

        G = L \\left(f + g \\left(n_{pw} - 1 + n_{full} - 1\\right)\\right)

    with ``n_pw`` the capture sizes (:func:`vllm_capture_sizes`) and ``n_full`` those up to
    ``max_num_seqs``; ``f`` and ``g`` from two logs of the same 28-layer dense backbone
    (Qwen2.5-7B): "Profiling CUDA graph memory: PIECEWISE=5 (largest=16), FULL=4 (largest=8)",
    "Estimated CUDA graph memory: 0.35 GiB" (vLLM 0.22.1, Qwen2.5-7B-Instruct-AWQ on an RTX 3090,
    ``max_num_seqs`` 8; a Runpod lab's annotated start-up log) and "PIECEWISE=51 (largest=512),
    FULL=35 (largest=256)", "0.53 GiB total" (vLLM 0.23.0, Qwen2.5-VL-7B-Instruct at tp 1 on an
    80 GB GPU, the defaults), so ``28 g = (0.53 - 0.35) / (84 - 7)`` GiB = 2.39 MiB a graph and
    ``28 f = 0.35 GiB - 7 x 28 g`` = 0.334 GiB (:data:`V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER`,
    :data:`V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER`). Checked on a third dense model: Gemma-4-E4B
    (42 layers), "Estimated CUDA graph memory: 0.79 GiB total" at the default 51 + 35 sizes (vLLM
    0.22.1, one 24 GB GPU), modelled 0.795 GiB (+0.6 %). ASSUMED: the same at every ``tp`` and on
    every device (every log is at tp 1; a Qwen2.5-7B-Instruct on a 24 GB RTX 4090 logs the same
    0.53 GiB, its capture sizes not shown) and for MoE and hybrid models, whose logged estimates range far wider (3.1x less
    KV on a B200 MoE: https://github.com/vllm-project/vllm/issues/45178; 118.65 GiB:
    /issues/53013). Llama-3.1-8B (32 layers) at 256 sequences (35 FULL graphs, as logged): 0.606
    GiB; Llama-3.1-70B (80 layers): 1.51 GiB a device. At V1's 1,024 sequences on a GPU of >= 70
    GiB every one of the 51 capture sizes is also a FULL graph (``n_full`` counts the sizes up to
    ``max_num_seqs``): 0.648 and 1.62 GiB, an extrapolation of the logged law to 16 more FULL
    graphs (the 80 GB log above, FULL=35, ran 256 sequences: an A100's default, or set).
* the sampler's start-up profile run (:mod:`.sampler_memory`) is not counted here: read in
  0.10.1-0.12.0 only, not in the releases this profile describes (``vllm@0.11`` and ``vllm@0.12``
  count it)
* chunked prefill on: V1 always schedules chunked prefill
  (https://blog.vllm.ai/2025/01/27/v1-alpha-release.html, "chunked prefill ... enabled by default").
* ``recompute``: V1's scheduler preempts the latest running request and recomputes it
  (``vllm/v1/core/sched/scheduler.py``: ``preempted_req = self.running.pop()``; no new request is
  admitted in a step that preempted); with prefix caching on its full blocks stay cached in the
  free queue, tail first to be evicted, and it resumes after those still cached
  (``vllm/v1/core/kv_cache_manager.py``, ``free`` and ``get_computed_blocks``).
* ``reserve_full_prompt`` on: ``SchedulerConfig.scheduler_reserve_full_isl = True``
  (``vllm/config/scheduler.py``, added by https://github.com/vllm-project/vllm/pull/37307, 2026):
  a waiting or preempted request is admitted only when blocks for all its tokens are free
  (``allocate_slots(full_sequence_must_fit=True)``), not only its first chunk's; V1 releases
  before it admit on the first chunk (``--no-reserve-full-prompt``).
* prefix caching on: V1 enables it by default (https://blog.vllm.ai/2025/01/27/v1-alpha-release.html:
  "we now enable prefix caching by default in V1"; ``--no-enable-prefix-caching`` turns it off).
* ``kv_watermark`` 0: ``SchedulerConfig.watermark = 0.0``, off by default
  (https://github.com/vllm-project/vllm/pull/44594: "Disabled by default. Does not apply to
  first new request when cache is empty"; V1 had none before it).
* CUDA-graph capture sizes: ``[1, 2, 4] + range(8, 256, 8) + range(256, M + 1, 16)`` with
  ``M = min(2 max_num_seqs, 512)`` (``vllm/config/compilation.py``, ``cudagraph_capture_sizes``
  and ``max_cudagraph_capture_size``; ``cudagraph_mode`` ``FULL_AND_PIECEWISE`` captures full
  graphs for uniform decode batches: https://docs.vllm.ai/en/latest/design/cuda_graphs.html).
* small kernels: the residual add runs inside the next norm (``fused_add_rms_norm``),
  ``rotary_embedding(positions, query, key, ...)`` rotates q and k in one kernel,
  ``reshape_and_cache_flash(key, value, ...)`` writes k and v in one (``vllm/_custom_ops.py``);
  one kernel per norm, activation (``silu_and_mul``) and embedding gather.
* CPU terms: ``iteration_s`` and ``per_seq_s`` fitted by ``benchmarks/overhead_fit.py``
  (``docs/overhead_fit.md``) to the mean TPOT of 12 Llama-3.1-70B FP8 runs on H200 (InferenceX's
  campaigns in the aiconfigurator wheel's ``silicon_sample.csv``, attribution inferred), 93 held
  out: ``a`` = 0 (held at its lower bound), ``b`` = 3.42 us (standard error 8.1 us). vLLM v0.6.0's
  profile of Llama-3-8B on one H100 put 33 % of the time in the API server and 29 % in scheduling
  (https://blog.vllm.ai/2024/09/05/perf-update.html); V1 moved the API server, detokenisation and
  streaming to their own process (the V1 post above), so little stays exposed per iteration.
  ``per_token_s`` (20 ns) and ``output_token_s`` (20 us) are ASSUMED: no source publishes them
  (``costmodel calibrate serving`` fits them to a user's runs).
* the request path (:meth:`~.knobs.EngineOverheads.request_path_s`), which the API server runs
  before the engine core sees the request:

  - ``per_prompt_token_s`` 2 us: tokenisation with Hugging Face ``tokenizers`` (what vLLM's API
    server runs), Llama-3.1's tokenizer on one thread at 1.93 MB/s for single sentences
    (https://github.com/huggingface/tokenizers/pull/1582, "Add benchmark vs tiktoken") at about
    4 bytes of English per token (OpenAI, "What are tokens and how to count them":
    https://help.openai.com/en/articles/4936856): 4 B / 1.93 MB/s = 2.07 us per token;
  - ``prefix_lookup_per_token_s`` 150 ns, with prefix caching on: V1 hashes every full block of
    the prompt with SHA-256 (the default since v0.10.2) "with a ... performance impact of about
    100-200ns per token (~6ms for 50k tokens of context)"
    (https://docs.vllm.ai/en/latest/design/prefix_caching/, note 2);
  - ``request_s`` 27 ms, the fixed part (HTTP, validation, the hand-off to the engine core, the
    first streamed chunk): FITTED by ``benchmarks/request_path_fit.py`` (``docs/request_path.md``)
    on the 195 vLLM TTFT rows of the validation tables outside the held-out split (calibration
    rows only: InferenceX's Llama-3.1-70B campaigns on H100, H200 and B200), the median of
    ``|error|`` least at 27 ms (13.9 % there, tables replayed at 26 ms; 33 ms by least squares
    over the rows within 50 %). Users' fits of their own vLLM runs put it at 7-30 ms (issue 42).

  A request waits for the iteration running when it reaches the engine to end (V1's engine core
  drains its input queue between steps): the simulator's event loop models that admission delay
  exactly, with no term.
* ``frontend_token_s`` 0, NOT IDENTIFIED: the API server that detokenises and streams every
  request's tokens is one process shared by all of them (https://github.com/vllm-project/vllm/issues/12705;
  ``--api-server-count`` scales it out, https://github.com/vllm-project/vllm/pull/17546: the
  simulator's ``api_server_count``), run as the second server of a pipeline
  (:mod:`.knobs`, module doc); ``benchmarks/frontend_fit.py`` bounds its cost by 157 us per token
  on the calibration rows, but no run reaches the bound at two TP sizes, so no value is taken.
"""

from __future__ import annotations

import numbers

from costmodel.errors import CostModelError
from costmodel.keys import Role

from .moe_kernels import VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120
from .profile import EngineProfile, register_engine

__all__ = [
    "PROFILE",
    "SYNC_CPU_TERMS",
    "SYNC_FIT",
    "DRIVER_RESERVED_BYTES",
    "LARGE_GPU_BYTES",
    "V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER",
    "V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER",
    "V1_NON_TORCH_BYTES",
    "REQUEST_FIT",
    "TOKENISE",
    "request_fit",
    "v1_cudagraph_memory",
    "v1_memory_reserve",
    "vllm_capture_sizes",
    "vllm_device_defaults",
]


#: ``get_batch_defaults``'s memory threshold (bytes): 70 GiB
LARGE_GPU_BYTES = 70 * 2**30
#: nvidia-smi's total less ``torch.cuda.mem_get_info``'s on an H100 80 GB (bytes): 81,559 MiB
#: (the catalog's) less the 79.22 GiB vLLM logs as ``total_gpu_memory`` (vllm PR 10511, 12126)
DRIVER_RESERVED_BYTES = 81_559 * 2**20 - round(79.22 * 2**30)
#: V1's non-torch increase (bytes): "non_torch_memory takes 0.16GiB" (vllm PR 12126, tp 1, H100)
V1_NON_TORCH_BYTES = round(0.16 * 2**30)
#: the memory rule's source, in one line (``sources["memory_reserve"]``, printed with the note)
MEMORY_RESERVE_SOURCE = (
    "vllm PR 10511/12126 logs: mem_get_info total 79.22 GiB on an H100 (0.43 GiB below nvidia-smi's), "
    "non-torch 0.16 GiB; NCCL before the snapshot (PR 25359)"
)
#: the two start-up logs of one 28-layer dense backbone (Qwen2.5-7B) the CUDA-graph estimate is
#: modelled from (module doc): (graphs extrapolated, ``sum over modes of (sizes - 1)``; GiB logged)
CUDAGRAPH_LOGS = ((4 + 3, 0.35), (50 + 34, 0.53))
#: their decoder layers (Qwen2.5-7B's ``num_hidden_layers``)
CUDAGRAPH_LOG_LAYERS = 28
_g28 = (CUDAGRAPH_LOGS[1][1] - CUDAGRAPH_LOGS[0][1]) / (CUDAGRAPH_LOGS[1][0] - CUDAGRAPH_LOGS[0][0])
#: ``g``: the estimate's bytes per decoder layer per extrapolated graph (module doc):
#: (0.53 - 0.35) GiB / (84 - 7) / 28 layers = 89,644 B
V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER = round(_g28 * 2**30 / CUDAGRAPH_LOG_LAYERS)
#: ``f``: the estimate's first capture per decoder layer (module doc): (0.35 GiB - 7 x 28 g) / 28
#: = 12,794,261 B
V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER = round(
    (CUDAGRAPH_LOGS[0][1] - CUDAGRAPH_LOGS[0][0] * _g28) * 2**30 / CUDAGRAPH_LOG_LAYERS
)
#: the CUDA-graph rule's source, in one line (``sources["cudagraph_memory"]``, printed with the note)
CUDAGRAPH_MEMORY_SOURCE = (
    "an ESTIMATE: vLLM >= 0.21.0 subtracts its measured CUDA-graph memory (gpu_model_runner.py "
    "profile_cudagraph_memory); per layer from two Qwen2.5-7B start-up logs, 0.35 GiB at 5+4 graphs "
    "and 0.53 GiB at 51+35 (Gemma-4-E4B's 0.79 GiB within 1 %); assumed the same at any tp and for MoE"
)


def v1_memory_reserve(tp: int) -> tuple[float, float]:
    """vLLM V1's ``(d, R)`` (module doc): the driver's total less ``mem_get_info``'s, and the
    non-torch increase its memory profile subtracts, the same at every ``tp`` (NCCL and the custom
    all-reduce are set up before the start-up snapshot: vllm PR 25359).

    Parameters
    ----------
    tp : int
        Tensor-parallel degree (unused: the non-torch increase does not grow with it).

    Returns
    -------
    tuple of (float, float)
        :data:`DRIVER_RESERVED_BYTES`, :data:`V1_NON_TORCH_BYTES` (bytes).
    """
    del tp
    return float(DRIVER_RESERVED_BYTES), float(V1_NON_TORCH_BYTES)


def v1_cudagraph_memory(layers: int, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192) -> float:
    """vLLM V1's CUDA-graph estimate ``G`` (bytes; module doc), taken out of the KV pool since
    v0.21.0: ``L (f + g (n_pw - 1 + n_full - 1))`` with ``n_pw`` the capture sizes
    (:func:`vllm_capture_sizes`), ``n_full`` those of at most ``max_num_seqs`` (the uniform
    decode batches ``FULL`` graphs are captured for), ``f`` = 12,794,261 B and ``g`` = 89,644 B
    per decoder layer (:data:`V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER`,
    :data:`V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER`). An ESTIMATE: vLLM measures its two largest
    captures per mode and extrapolates; the law per layer is fitted to two logs of one dense
    model (module doc). The capture sizes are vLLM V1's defaults (:func:`vllm_capture_sizes`),
    not a profile's own ``cudagraph_sizes``: a profile with other sizes needs a rule of its own.

    Parameters
    ----------
    layers : int
        Decoder layers ``L`` of the model (``num_hidden_layers``).
    max_num_seqs : int
        Sequences per iteration (the largest ``FULL`` decode graph).
    max_num_batched_tokens : int
        Tokens per iteration (caps the capture sizes).

    Returns
    -------
    float
        Bytes (0 when no size is captured).

    Raises
    ------
    CostModelError
        When ``layers`` is not a whole number >= 1.

    >>> round(v1_cudagraph_memory(28) / 2**30, 3)  # the 51 + 35 log it is fitted to: 0.53 GiB
    0.53
    >>> round(v1_cudagraph_memory(32) / 2**30, 3), round(v1_cudagraph_memory(80) / 2**30, 3)
    (0.606, 1.514)
    """
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise CostModelError(f"layers must be a whole number >= 1 (decoder layers), got {layers!r}")
    sizes = vllm_capture_sizes(max_num_seqs, max_num_batched_tokens)
    if not sizes:
        return 0.0
    n_full = sum(1 for s in sizes if s <= max_num_seqs)
    graphs = len(sizes) - 1 + max(n_full - 1, 0)
    return float(layers * (V1_CUDAGRAPH_FIRST_BYTES_PER_LAYER + V1_CUDAGRAPH_GRAPH_BYTES_PER_LAYER * graphs))


def vllm_device_defaults(
    capacity_bytes: float, device_name: str, tp: int = 1, dp: int = 1, budget: int | None = None
) -> dict[str, int]:
    """V1's batch limits for ``vllm serve`` on a device (``EngineArgs.get_batch_defaults``): on a
    GPU of at least 70 GiB whose name does not contain "a100", a token budget ``N`` = 8,192 and
    ``S`` = 1,024 sequences, else ``N`` = 2,048 and ``S`` = 256; the sequences are then capped at
    the budget, ``max_num_seqs = min(S, N)``: the rule vLLM 0.11's ``_set_default_args`` already had
    (:func:`.vllm011.vllm011_device_defaults` is this function under that release's sources).

    Parameters
    ----------
    capacity_bytes : float
        The device's memory (bytes; 70 GiB is the threshold).
    device_name : str
        The device's catalog name.
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

    >>> vllm_device_defaults(80e9, "h100-sxm")
    {'max_num_batched_tokens': 8192, 'max_num_seqs': 1024}
    >>> vllm_device_defaults(80e9, "a100-sxm-80gb"), vllm_device_defaults(24e9, "rtx-4090")
    ({'max_num_batched_tokens': 2048, 'max_num_seqs': 256}, {'max_num_batched_tokens': 2048, 'max_num_seqs': 256})
    """
    large = capacity_bytes >= LARGE_GPU_BYTES and "a100" not in device_name.lower()
    tokens, seqs = (8192, 1024) if large else (2048, 256)
    return {"max_num_batched_tokens": tokens, "max_num_seqs": min(seqs, tokens)}


def vllm_capture_sizes(max_num_seqs: int = 256, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """vLLM's default ``cudagraph_capture_sizes``: ``[1, 2, 4] + range(8, 256, 8) +
    range(256, M + 1, 16)`` up to ``M = min(2 max_num_seqs, 512, max_num_batched_tokens)``.

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

    >>> vllm_capture_sizes(8)[:6]
    (1, 2, 4, 8, 16)
    >>> vllm_capture_sizes()[-3:]
    (480, 496, 512)

    Raises
    ------
    CostModelError
        When a limit is not a whole number >= 1 (``"256"`` was a bare TypeError, 0 no sizes).
    """
    for name, v in (("max_num_seqs", max_num_seqs), ("max_num_batched_tokens", max_num_batched_tokens)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise CostModelError(f"{name} must be a whole number >= 1, got {type(v).__name__} {v!r:.40}")
    m = min(2 * max_num_seqs, 512, max_num_batched_tokens)
    sizes = [i for i in (1, 2, 4) if i <= m] + list(range(8, min(m + 1, 256), 8))
    if m >= 256:
        sizes += list(range(256, m + 1, 16))
    return tuple(sorted(set(sizes)))


#: vLLM and SGLang fuse the same small ops (module doc; SGLang calls the same sgl-kernel ops)
FUSED_SMALL_KERNELS = {
    Role.NORM: "each",
    Role.ACTIVATION: "each",
    Role.EMBEDDING: "each",
    Role.ROPE: "layer",
    Role.CACHE_WRITE: "layer",
}

_ASSUMED = "ASSUMED: no source publishes it (costmodel calibrate serving fits it)"
#: the request path's sources (module doc), shared with the profiles that reuse them
TOKENISE = (
    "huggingface/tokenizers PR 1582: llama-3.1 tokenizer 1.93 MB/s on one thread, ~4 B/token: 2 us/token"
)
#: the fitted ``request_s``'s source: ``request_fit(rows, engine)`` (module doc)
REQUEST_FIT = (
    "fitted: by benchmarks/request_path_fit.py on {rows} calibration rows ({engine} TTFT rows of the validation "
    "tables outside the held-out split), docs/request_path.md"
)


def request_fit(rows: int, engine: str) -> str:
    """The source of a profile's fitted ``request_s``: :data:`REQUEST_FIT` with the fit's rows.

    Parameters
    ----------
    rows : int
        The calibration rows ``benchmarks/request_path_fit.py`` fitted it on.
    engine : str
        Whose TTFT rows they are.

    Returns
    -------
    str
    """
    return REQUEST_FIT.format(rows=rows, engine=engine)


_FIT = "fitted: benchmarks/overhead_fit.py, docs/overhead_fit.md (InferenceX Llama-3.1-70B FP8, H200)"

#: CPU time per iteration ``a`` and per sequence ``b`` (s) of a V1 engine that schedules
#: synchronously (the default before v0.14.0: :mod:`.vllm012`), FITTED by
#: ``benchmarks/sync_overhead_fit.py`` (docs/sync_overhead_fit.md): a = 1.36e-03 (s.e. 1.2e-04),
#: b = 4.60e-05 (s.e. 3.7e-06) as stored; the page's latest refit reads b = 4.59e-05 (s.e.
#: 3.6e-06), within 0.3 % of the stored value
SYNC_CPU_TERMS = {"iteration_s": 1.36e-3, "per_seq_s": 4.6e-5}
#: what :data:`SYNC_CPU_TERMS` were fitted to, in one phrase (``EngineProfile.cpu_fit``)
SYNC_FIT = (
    "the silicon sample's vLLM 0.12.0 runs outside the held-out split (synchronous scheduling; "
    "one deployment, TP 4), docs/sync_overhead_fit.md"
)

PROFILE = register_engine(
    EngineProfile(
        name="vllm",
        version="1",
        label="vLLM V1, vllm serve",
        moe_kernels=(VLLM_MXFP4_MARLIN_PRE_HOPPER, VLLM_MXFP4_MARLIN_SM120),
        framework="vllm",
        max_num_batched_tokens=8192,
        max_num_seqs=1024,
        block_size=16,
        enable_chunked_prefill=True,
        policy="recompute",
        reserve_full_prompt=True,
        kv_watermark=0.0,
        enable_prefix_caching=True,
        device_defaults=vllm_device_defaults,
        kv_rule="device",
        kv_fraction=0.9,
        memory_reserve=v1_memory_reserve,
        cudagraph_memory=v1_cudagraph_memory,
        cudagraph_sizes=vllm_capture_sizes,
        small_kernels=FUSED_SMALL_KERNELS,
        cpu_terms={
            "iteration_s": 0.0,  # fitted: 0, held at its lower bound
            "per_seq_s": 3.4e-6,  # fitted: 3.42e-06 (s.e. 8.1e-06)
            "per_token_s": 2e-8,
            "request_s": 27e-3,  # fitted: benchmarks/request_path_fit.py, 195 calibration rows
            "output_token_s": 2e-5,
            "per_prompt_token_s": 2e-6,
            "prefix_lookup_per_token_s": 1.5e-7,
            "frontend_token_s": 0.0,  # not identified: benchmarks/frontend_fit.py
        },
        fitted=("iteration_s", "per_seq_s", "request_s"),
        sources={
            "dp_load_balance": "vllm/v1/engine/core_client.py DPLBAsyncMPClient: a request goes to the rank "
            "with the least score = waiting * 4 + running",
            "max_num_batched_tokens": "vllm/engine/arg_utils.py get_batch_defaults: OPENAI_API_SERVER 8192 "
            "(>= 70 GiB, not A100), else 2048",
            "max_num_seqs": "vllm/engine/arg_utils.py get_batch_defaults: OPENAI_API_SERVER 1024 (>= 70 GiB, "
            "not A100), else 256; min(that, max_num_batched_tokens)",
            "block_size": "vllm/config/cache.py CacheConfig.block_size: 16 on CUDA",
            "enable_chunked_prefill": "V1 always chunks prefills (blog.vllm.ai/2025/01/27/v1-alpha-release.html)",
            "batch_wait_timeout_iters": "vLLM has no batch waiting: 0, off",
            "batch_wait_max_tokens_ratio": "vLLM has no batch waiting: 0, off",
            "policy": "vllm/v1/core/sched/scheduler.py: preempt the latest request, recompute it",
            "kv_fraction": "vllm/config/cache.py CacheConfig.gpu_memory_utilization: 0.9",
            "reserve_full_prompt": "vllm/config/scheduler.py scheduler_reserve_full_isl: True (vllm PR 37307)",
            "kv_watermark": "vllm/config/scheduler.py watermark: 0.0, off (vllm PR 44594)",
            "enable_prefix_caching": "on by default in V1 (blog.vllm.ai/2025/01/27/v1-alpha-release.html)",
            "kv_rule": "vLLM profiles weights and a peak forward, the rest of u x device to KV blocks",
            "memory_reserve": MEMORY_RESERVE_SOURCE,
            "cudagraph_memory": CUDAGRAPH_MEMORY_SOURCE,
            "cudagraph_sizes": "vllm/config/compilation.py cudagraph_capture_sizes, max_cudagraph_capture_size",
            "small_kernels": "vllm/_custom_ops.py fused_add_rms_norm, rotary_embedding, reshape_and_cache_flash",
            "iteration_s": _FIT,
            "per_seq_s": _FIT,
            "per_token_s": _ASSUMED,
            "request_s": request_fit(195, "vLLM"),
            "output_token_s": _ASSUMED,
            "per_prompt_token_s": TOKENISE,
            "prefix_lookup_per_token_s": "docs.vllm.ai design/prefix_caching: SHA-256 (default since v0.10.2) 100-200 ns/token",
            "frontend_token_s": "NOT IDENTIFIED, 0: benchmarks/frontend_fit.py (docs/frontend_fit.md) bounds it by 157 us/token on the calibration rows, no run at a ceiling; no source publishes V1's",
        },
    )
)
