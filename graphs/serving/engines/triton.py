"""TensorRT-LLM behind Triton Inference Server's ``tensorrtllm_backend`` (the C++ executor of the
TensorRT engine path, v0.x), served through the backend's ensemble of ``preprocessing`` (the
Hugging Face tokenizer in a Python-backend model), ``tensorrt_llm`` and ``postprocessing``
(detokenisation), priced by the corpus's ``trtllm`` kernels: ``triton-trtllm``.

Sources of the defaults that differ from ``trtllm-bench`` (:mod:`.trtllm`, whose scheduler and
kernels it shares):

* chunked prefill off: the backend's model configuration, ``enable_chunked_context`` "Set to true
  to enable context chunking. (default=false)"
  (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/tensorrtllm_backend/docs/model_config.html);
  ``batch_scheduler_policy`` ``guaranteed_no_evict`` and ``kv_cache_free_gpu_mem_fraction`` 0.9
  are that page's defaults too, as ``trtllm-bench``'s are.
* the request path: Triton's C++ HTTP/gRPC front end, not trtllm-serve's Python server. The
  perf_analyzer documentation's server-side breakdown of one request
  (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/perf_analyzer.html:
  "overhead 36 usec + queue 42 usec + compute input 164 usec + ... compute output 15 usec") puts
  Triton's own handling of a request near 0.26 ms; the ensemble passes each request through three
  models, so ``request_s`` is 3 x 0.26 = 0.77 ms (the per-model figure is the documentation's
  example model's, ASSUMED to carry over). Tokenisation is the preprocessing model's Hugging Face
  tokenizer (the ensemble documentation: "preprocessing: This model is used for tokenizing"): the
  same 2 us per prompt token as :mod:`.vllm`'s source. Block reuse keys its blocks in C++ (0).
* every CPU term: ``trtllm``'s (its fits and assumptions stand in; ASSUMED).
"""

from __future__ import annotations

from dataclasses import replace

from .profile import register_engine
from .trtllm import BENCH
from .vllm import TOKENISE

__all__ = ["PROFILE"]

#: Triton's server-side time per request per model, perf_analyzer's documented breakdown (s)
TRITON_PER_MODEL_S = (36 + 42 + 164 + 15) * 1e-6
#: models of the tensorrtllm_backend ensemble a request passes through
ENSEMBLE_MODELS = 3

_DOCS = "tensorrtllm_backend/docs/model_config.html"

PROFILE = register_engine(
    replace(
        BENCH,
        name="triton-trtllm",
        version="0.14",
        label="TensorRT-LLM C++ executor behind Triton's tensorrtllm_backend (ensemble)",
        enable_chunked_prefill=False,
        cpu_terms={
            **BENCH.cpu_terms,
            "request_s": ENSEMBLE_MODELS * TRITON_PER_MODEL_S,
            "per_prompt_token_s": 2e-6,
            "prefix_lookup_per_token_s": 0.0,
        },
        fitted=tuple(t for t in BENCH.fitted if t != "request_s"),
        sources={
            **BENCH.sources,
            "enable_chunked_prefill": f"{_DOCS}: enable_chunked_context default false",
            "policy": f"{_DOCS}: batch_scheduler_policy default guaranteed_no_evict",
            "kv_fraction": f"{_DOCS}: kv_cache_free_gpu_mem_fraction default 0.9",
            "request_s": "user_guide/perf_analyzer.html: Triton's server-side overhead+queue+input+output 0.26 ms per "
            "model x 3 ensemble models (the example model's figure, ASSUMED to carry over)",
            "per_prompt_token_s": f"the ensemble's preprocessing model tokenizes with Hugging Face: {TOKENISE}",
            "prefix_lookup_per_token_s": "ASSUMED negligible: block reuse keys its blocks in the C++ KV-cache manager",
        },
    )
)
