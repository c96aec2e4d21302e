"""The sampler's run in an engine's start-up memory profile: peak bytes per logit by the sampler
that runs (sourced rules; :func:`.knobs.profile_peak_bytes` takes the larger of it and the
forward pass).

vLLM V1 sizes its KV pool after a profile run: a dummy forward pass at the full token budget
``N``, then ``_dummy_sampler_run`` over the last hidden state of each of its ``min(N, R)`` dummy
requests (``R`` = ``max_num_seqs``), with ``temperature`` 0.5, ``top_p`` 0.9 and ``top_k`` =
``V - 1`` (``vllm/v1/worker/gpu_model_runner.py``; one peak counter spans both, the forward's
activations freed before the sampler runs: ``gpu_worker.py`` ``determine_available_memory``).
Read in the 0.10.1.1, 0.10.2, 0.11.0 and 0.12.0 sdists from PyPI. Which sampler runs
(``vllm/v1/sample/ops/topk_topp_sampler.py``): FlashInfer's when ``flashinfer`` imports and
``VLLM_USE_FLASHINFER_SAMPLER`` is not set false (0.10-0.11; opt-in from 0.12), else PyTorch's.
FlashInfer is an extra of the 0.10 and 0.11 wheels (``flashinfer-python`` 0.3.0, 0.3.1), which
vLLM's Docker image installs (its ``docker/Dockerfile``); a plain ``pip install vllm`` has none.

* :data:`SAMPLERS` ``torch``: 38 B a logit, the PyTorch top-k/top-p path
  (``apply_top_k_top_p``): live at the sort's peak, the BF16 logits from ``compute_logits``
  (2 B), their float32 copy (``sampler.py`` ``logits.to(torch.float32)``, 4 B; the temperature
  divides in place), the sort's float32 values and int64 indices (4 + 8 B) and its scratch
  (PyTorch's segmented radix sort for 128 or more rows: int64 reverse indices 8 B, CUB's
  alternate key and value buffers 4 + 8 B): 2 + 4 + 12 + 20 = 38 B. Below 128 rows PyTorch sorts
  by another branch whose scratch is larger (not modelled: 38 B stands in, an underestimate of
  about a tenth of a GiB at 64 rows of a 200,000-token vocabulary). Checked on two logs of
  gpt-oss-120b (V = 201,088) on one H100 at R = 1,024 (7.29 GiB): vllm issue 23278 (0.10.1,
  "Available KV cache memory: -2.14 GiB") and issue 27508 (0.11.0, ``--gpu-memory-utilization
  0.95 --max-num-batched-tokens 1024``: "1.71 GiB"), both reproduced within 0.25 GiB
  (tests/test_vllm_memory.py).
* ``flashinfer``: 14 B a logit, FlashInfer's ``top_k_top_p_sampling_from_logits`` (its
  ``flashinfer/sampling.py`` in 0.3.0 and 0.3.1, ``filter_apply_order="top_k_first"``): the BF16
  logits and their float32 copy (2 + 4 B), ``top_k_mask_logits``' masked float32 logits (4 B)
  and their softmax (4 B); its kernels allocate nothing more. From the code alone: no log
  checks it.
"""

from __future__ import annotations

__all__ = ["SAMPLERS", "SAMPLER_SOURCES"]

#: peak bytes per logit of the sampler's profile run, by the sampler that runs (module doc)
SAMPLERS: dict[str, float] = {"torch": 38.0, "flashinfer": 14.0}

_READ = "gpu_model_runner.py _dummy_sampler_run over min(N, max_num_seqs) rows, read in vLLM 0.10.1-0.12.0"
#: each sampler's rule in one line (printed with the memory note)
SAMPLER_SOURCES: dict[str, str] = {
    "torch": f"38 B a logit: vLLM's PyTorch top-k/top-p sort ({_READ}; 0.10-0.11 without FlashInfer installed, "
    "as a PyPI wheel; 0.12 unless VLLM_USE_FLASHINFER_SAMPLER is set); vllm issues 23278 and 27508's "
    "gpt-oss-120b logs reproduced within 0.25 GiB",
    "flashinfer": f"14 B a logit: FlashInfer 0.3's top_k_top_p_sampling_from_logits ({_READ}; 0.10-0.11 with "
    "FlashInfer installed, as in vLLM's Docker image; 0.12 with VLLM_USE_FLASHINFER_SAMPLER set); from the "
    "code, no log checks it",
}
