"""What a real serving engine adds around its kernels: CPU time per iteration, the request path,
per-token streaming, CUDA-graph padding, a per-device kernel correction and the scheduler policy.

An :class:`EngineOverheads` prices, for one iteration of ``n`` sequences and ``T`` new tokens,

.. math::

    t_{iter} = s \\, t_{step}(\\text{padded batch}) + a + b\\,n + c\\,T

with ``s`` the :attr:`~EngineOverheads.kernel_scale` (the kernels' predicted or bound seconds
times a per-device correction, 1 by default), ``a`` a fixed CPU time per iteration (scheduling,
sampling, batch preparation, launch), ``b`` per scheduled sequence, ``c`` per new token (s). A
decode-only batch of ``n`` sequences runs the CUDA graph captured for the smallest capture size
``>= n`` (:meth:`~EngineOverheads.padded`): its token-wise kernels run ``padded(n)`` rows (the
padding slots' attention reads no KV, so the decodes' contexts stay those of the real ones).
What a client sees adds the request path:

.. math::

    \\mathrm{TTFT} = r + t_{first} - t_{in} + d, \\qquad
    \\mathrm{E2E} = r + t_{last} - t_{in} + d\\,m

with ``r`` the request path (:meth:`~EngineOverheads.request_path_s`: the fixed
:attr:`~EngineOverheads.request_s` for the API server, plus
:attr:`~EngineOverheads.per_prompt_token_s` per prompt token for tokenisation and, with prefix
caching on, :attr:`~EngineOverheads.prefix_lookup_per_token_s` per prompt token for the cache
lookup's block hashing: the request reaches the engine's queue ``r`` after it was sent, and then
waits for the running iteration to end: the scheduler admits only at iteration boundaries, which
the event loop models exactly), ``d`` :attr:`~EngineOverheads.output_token_s`
per output token (detokenisation and streaming, serial per request) and ``m`` output tokens: the
time per output token after the first grows by exactly ``d``.

Scheduler policy (:data:`POLICIES`): ``recompute`` is vLLM's (blocks are allocated as tokens
are computed; when they run out the latest admitted sequence is preempted and later recomputed);
``guaranteed_no_evict`` is TensorRT-LLM's default capacity scheduler (a request is admitted only
when the blocks of its prompt plus its maximum output can be reserved, so a started request is
never paused: https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/useful-runtime-flags.html,
"Capacity Scheduler Policy").

The classes live in the engines wing (:mod:`graphs.serving.engines.knobs`) and every default in
an engine profile (:mod:`graphs.serving.engines`: ``vllm.py``, ``trtllm.py``, ``sglang.py``, each
with its sources); :data:`DEFAULTS`, :data:`FITTED` and :data:`FRAMEWORK_POLICY` are views of the
corpus frameworks' profiles, kept for the code that reads them. In short (the bound uses none):

* vLLM's CUDA-graph capture sizes: ``[1, 2, 4] + range(8, 256, 8) + range(256, M + 1, 16)`` with
  ``M = min(2 max_num_seqs, 512)`` (``vllm/config/compilation.py``, ``cudagraph_capture_sizes``
  and ``max_cudagraph_capture_size``; ``cudagraph_mode`` ``FULL_AND_PIECEWISE`` captures full
  graphs for uniform decode batches: https://docs.vllm.ai/en/latest/design/cuda_graphs.html).
* TensorRT-LLM: ``DecodeCudaGraphConfig.enable_padding`` is False by default ("if true, batches
  are rounded up to the nearest cuda_graph_batch_size":
  https://nvidia.github.io/TensorRT-LLM/llm-api/reference/DecodeCudaGraphConfig.html), so no
  padding; ``GUARANTEED_NO_EVICT`` is its default capacity policy (above).
* SGLang pads decode batches to its own ``cuda_graph_bs`` list, which differs by version and
  GPU memory: vLLM's list stands in for it (ASSUMED).
* CPU time: vLLM v0.6.0's profile of Llama-3-8B on one H100 put 33 % of the time in the HTTP
  API server and 29 % in scheduling and input preparation, on a GPU step of ~5 ms
  (https://blog.vllm.ai/2024/09/05/perf-update.html); V1 moved the API server, detokenisation
  and streaming to their own process and overlaps scheduling with the GPU
  (https://blog.vllm.ai/2025/01/27/v1-alpha-release.html), so what stays exposed per iteration
  is a fraction of a millisecond. Vidur (Agrawal et al., MLSys 2024,
  https://arxiv.org/abs/2405.05465) profiles the same CPU terms (schedule, sampler, prepare
  inputs, process outputs) as functions of the batch, which is the ``a + b n + c T`` form here.
* The per-iteration and per-sequence CPU terms of vLLM and TensorRT-LLM (:data:`FITTED`) are
  fitted to measured serving runs: ``benchmarks/overhead_fit.py`` (``docs/overhead_fit.md``)
  fits them by ``fit_serving`` to the mean TPOT of 12 Llama-3.1-70B FP8 runs per engine on H200
  (SemiAnalysis InferenceX's campaigns in the aiconfigurator wheel's ``silicon_sample.csv``,
  attribution inferred, replayed as InferenceX's benchmark client) and holds out 93 (vLLM: 48
  on H200, 45 on H100) and 60 (TensorRT-LLM, H200) others. Both engines: ``a`` = 0 (held at
  its lower bound: the data want less than nothing), ``b`` = 3.4 us (vLLM, standard error
  8.1 us) and 3.1 us (TensorRT-LLM, s.e. 13 us), so 0.2 ms per iteration at 64 sequences and
  0.9 ms at 256. Held-out TPOT median |error| against the values assumed before: vLLM 3.9 ->
  3.8 % (H200) and 7.4 -> 8.9 % (H100), TensorRT-LLM 3.4 -> 2.7 %. What these data say is that
  neither engine exposes a measurable CPU time per iteration for a 70B model at these loads (its
  steps take several to tens of ms); a small model's shorter steps may show one (``calibrate serving``).
* The request path: tokenisation at Hugging Face ``tokenizers``' measured single-thread rate
  (2 us per prompt token) and vLLM's prefix-cache hashing at its documented 100-200 ns per token
  are sourced; the fixed ``request_s`` of vLLM and TensorRT-LLM (26 and 22 ms) is fitted by
  ``benchmarks/request_path_fit.py`` (``docs/request_path.md``) to the validation tables' TTFT
  rows outside the held-out split (each engine profile's module says how).
* Everything else (the per-token CPU term, the per-output-token streaming cost, and SGLang's
  CPU terms) is ASSUMED: no source publishes them. Said so in :attr:`EngineOverheads.basis` and in every output that uses them;
  ``costmodel calibrate serving`` fits them to a user's own benchmark.
"""

from __future__ import annotations

from costmodel.measured.corpus import FRAMEWORKS

from ..engines import (
    CPU_TERMS,
    KERNEL_SCALE_RANGE,
    POLICIES,
    TERM_RANGES,
    TERMS,
    EngineOverheads,
    get_engine,
    scaled_kernels_s,
)
from ..engines.vllm import vllm_capture_sizes

__all__ = [
    "DEFAULTS",
    "EngineOverheads",
    "FITTED",
    "FRAMEWORK_POLICY",
    "KERNEL_SCALE_RANGE",
    "POLICIES",
    "TERMS",
    "TERM_RANGES",
    "scaled_kernels_s",
    "vllm_capture_sizes",
]

#: each corpus framework's profile's CPU and request-path terms (s): a view of the registry
DEFAULTS: dict[str, dict[str, float]] = {
    fw: {t: get_engine(fw).cpu_terms[t] for t in CPU_TERMS} for fw in FRAMEWORKS
}
#: the terms of :data:`DEFAULTS` fitted to measured runs, per framework (those with any)
FITTED: dict[str, tuple[str, ...]] = {fw: get_engine(fw).fitted for fw in FRAMEWORKS if get_engine(fw).fitted}
#: each framework's profile's scheduler policy
FRAMEWORK_POLICY: dict[str, str] = {fw: get_engine(fw).policy for fw in FRAMEWORKS}
