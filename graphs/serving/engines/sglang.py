"""SGLang (``sglang.launch_server``), priced by the corpus's ``sglang`` kernels.

Its scheduler differs from vLLM's (a radix-tree cache of 1-token pages, ``mem_fraction_static``
of the device for weights and KV together, ``chunked_prefill_size`` and ``max_running_requests``
chosen by GPU memory and version); none of that is modelled yet, so vLLM V1's scheduler and pool
(:mod:`.vllm`) stand in for it, each default marked ASSUMED below, as the simulator ran it before
profiles. Sourced:

* small kernels: SGLang calls the same fused ops as vLLM (sgl-kernel's ``fused_add_rmsnorm``,
  ``rotary_embedding`` over q and k, one KV-cache write): :data:`.vllm.FUSED_SMALL_KERNELS`;
* ``recompute``: SGLang retracts the latest requests when the KV pool runs out and recomputes
  them (``python/sglang/srt/managers/schedule_batch.py``, ``retract_decode``).

ASSUMED: the CUDA-graph capture sizes (SGLang pads decode batches to its own ``cuda_graph_bs``
list, which differs by version and GPU memory: vLLM's list stands in) and every CPU term (3e-4 s
per iteration, 2 us per sequence, 20 ns per token, 20 us per output token: no source publishes
them; ``costmodel calibrate serving`` fits them).

The request path (:meth:`~.knobs.EngineOverheads.request_path_s`): ``per_prompt_token_s`` 2 us,
tokenisation with Hugging Face ``tokenizers`` in its tokenizer manager (the measured rate is
:mod:`.vllm`'s source); ``request_s`` (27 ms) and ``prefix_lookup_per_token_s`` 150 ns are vLLM
V1's (ASSUMED: SGLang's process layout is the same, an HTTP server and tokenizer manager handing
requests to the scheduler over ZMQ; its own TTFT rows outside the held-out split, all above
half of capacity, do not determine a fixed term: ``benchmarks/request_path_fit.py``).
"""

from __future__ import annotations

from .profile import EngineProfile, register_engine
from .vllm import FUSED_SMALL_KERNELS, TOKENISE, vllm_capture_sizes
from .vllm import PROFILE as V1

__all__ = ["PROFILE"]

_STAND_IN = "ASSUMED: vLLM V1's stands in (SGLang's own scheduler is not modelled)"
_ASSUMED = "ASSUMED: no source publishes it (costmodel calibrate serving fits it)"

PROFILE = register_engine(
    EngineProfile(
        name="sglang",
        version="0.4",
        label="SGLang launch_server (vLLM V1's scheduler stands in)",
        framework="sglang",
        max_num_batched_tokens=8192,
        max_num_seqs=256,
        block_size=16,
        enable_chunked_prefill=True,
        policy="recompute",
        kv_rule="device",
        kv_fraction=0.9,
        cudagraph_sizes=vllm_capture_sizes,
        small_kernels=FUSED_SMALL_KERNELS,
        cpu_terms={
            "iteration_s": 3e-4,
            "per_seq_s": 2e-6,
            "per_token_s": 2e-8,
            "request_s": V1.cpu_terms["request_s"],  # vLLM V1's fitted value stands in
            "output_token_s": 2e-5,
            "per_prompt_token_s": 2e-6,
            "prefix_lookup_per_token_s": 1.5e-7,
            "frontend_token_s": 0.0,  # not identified: benchmarks/frontend_fit.py
        },
        fitted=(),
        sources={
            "max_num_batched_tokens": _STAND_IN,
            "max_num_seqs": _STAND_IN,
            "block_size": _STAND_IN,
            "enable_chunked_prefill": _STAND_IN,
            "batch_wait_timeout_iters": "SGLang has no batch waiting: 0, off",
            "batch_wait_max_tokens_ratio": "SGLang has no batch waiting: 0, off",
            "policy": "python/sglang/srt/managers/schedule_batch.py retract_decode: retract, recompute",
            "kv_fraction": _STAND_IN,
            "reserve_full_prompt": "NOT MODELLED: SGLang's PrefillAdder budget; off, as before profiles",
            "kv_watermark": "NOT MODELLED: SGLang's PrefillAdder budget; off, as before profiles",
            "enable_prefix_caching": "ASSUMED off, as before profiles: SGLang's radix cache is on by default "
            "(--disable-radix-cache); give --enable-prefix-caching",
            "kv_rule": _STAND_IN,
            "cudagraph_sizes": "ASSUMED: vLLM's capture list stands in for SGLang's cuda_graph_bs",
            "small_kernels": "sgl-kernel fused_add_rmsnorm, rotary_embedding, one KV write (as vLLM)",
            "iteration_s": _ASSUMED,
            "per_seq_s": _ASSUMED,
            "per_token_s": _ASSUMED,
            "request_s": "ASSUMED: vLLM V1's fitted value stands in (its rows do not determine one)",
            "output_token_s": _ASSUMED,
            "per_prompt_token_s": TOKENISE,
            "prefix_lookup_per_token_s": "ASSUMED: vLLM V1's SHA-256 block hashing stands in for the radix-tree match",
            "frontend_token_s": "NOT IDENTIFIED, 0: benchmarks/frontend_fit.py (docs/frontend_fit.md) bounds it by 49 us/token on the calibration rows (TP 4 only at the bound); no source publishes the tokenizer manager's ceiling",
        },
    )
)
