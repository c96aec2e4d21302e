"""SGLang 0.5 (``sglang.launch_server``), priced by the corpus's ``sglang`` kernels: ``sglang``
(``sglang@0.5``; ``sglang@0.4``: :mod:`.sglang04`).

Its own scheduler and KV pool, as SGLang 0.5.8 sets them up (sgl-project/sglang, the 0.5 series
after PR 10975 "general heuristics for --mem-fraction-static"; each default sourced below):

* the pool (``kv_rule`` ``static``, :mod:`.profile`): ``mem_fraction_static`` ``s`` of the device
  holds the weights and the KV pool, the activations and CUDA graphs the rest, so the pool is
  ``floor((s C - W) / k)`` tokens (``model_runner_kv_cache_mixin.py``,
  ``profile_max_num_token``: ``rest_memory = available_gpu_memory - total_gpu_memory * (1 -
  mem_fraction_static)``), one token per page (``page_size`` 1, the token-to-KV pool of 1-token
  pages), ``C`` the memory the driver reports (:func:`graphs.serving.sim.engine.pool_memory`).
  ``s`` is chosen by GPU memory ``M`` (MiB, ``nvidia-smi --query-gpu=memory.total``) and TP
  (``server_args.py``, ``ServerArgs._handle_gpu_memory_settings``; :func:`sglang_memory_defaults`):

  .. math::

      R = 512 + 1.5 \\max(P, 2048) + 2 G + 1024 \\, t / 8, \\quad R \\leftarrow \\max(R, 10240)
      \\text{ if } M > 60 \\cdot 1024, \\qquad s = \\mathrm{round}((M - R) / M, 3)

  (MiB; with DP attention, ``t`` is the whole group's and ``3 G D`` MiB more are held,
  :func:`sglang_memory_defaults`) with ``P`` the chunked-prefill size and ``G`` ``cuda_graph_max_bs`` by GPU memory (below
  20 GiB: 2,048 and 8; 20-35: 2,048 and 24 (80 at TP >= 4); 35-60: 4,096 and 32 (160); 60-160:
  8,192 and 256 (512); above: 16,384 and 512), ``t`` the TP degree (pipeline parallelism 1; no
  DP attention, speculative decoding or piecewise CUDA graphs, each off by default in 0.5.8;
  piecewise CUDA graphs, which add 8 MiB per captured token count to ``R`` (58 counts, 464 MiB,
  up to 8,192 tokens), became the default with PR 16331, merged 2026-03-02, after 0.5.8: the
  silicon sample ran its v0.5.8.post1 image on 2026-02-07). On an
  H100 SXM (81,559 MiB) at TP 1: ``R`` = 512 + 12,288 + 512 + 128 = 13,440, ``s`` = 0.835.
  SGLang 0.5.1's rule (before PR 10975): :mod:`.sglang051`.
* ``max_num_batched_tokens``: ``chunked_prefill_size`` ``P`` by GPU memory (above).
* ``max_num_seqs`` 2,048: ``max_running_requests`` unset is ``max_num_reqs = min(max(int(
  max_total_num_tokens / context_len * 512), 2048), 4096)`` (``model_runner`` ``init_memory_pool``):
  at least 2,048 (up to 4,096 with a pool of 8 context lengths or more).
* admission (``new_token_ratio`` ``(0.7, 0.098, 0.001003)``: :mod:`graphs.serving.sim.engine`):
  ``PrefillAdder`` (``schedule_policy.py``) admits a request only while its prompt plus
  ``max_new_tokens`` fit the pool less ``new_token_ratio`` x the running requests' remaining
  outputs; the ratio starts at ``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7, its floor is 0.7 x
  ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14 = 0.098 and it falls by (0.7 - 0.098) /
  ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600 = 0.001003 per decode step (``environ.py``,
  ``Scheduler.init_schedule_policy``; ``schedule_conservativeness`` 1).
* ``recompute``: when a decode step finds no room, ``retract_decode`` (``schedule_batch.py``)
  retracts requests (their KV freed, recomputed when readmitted) and resets the ratio to
  ``min(1, (decoded + 20 n) / (max_new_tokens + 1))`` over those left.
* CUDA-graph capture sizes ``[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) +
  range(512, G + 1, 32)`` up to ``G`` (``ServerArgs._generate_cuda_graph_batch_sizes``):
  :func:`sglang_capture_sizes`, with ``G`` = 256, the value of every 60-160 GB GPU below TP 4
  (the capture rule sees only the batch limits: other GPUs and TP 4+ are ASSUMED at 256).
* small kernels: SGLang calls the same fused ops as vLLM (sgl-kernel's ``fused_add_rmsnorm``,
  ``rotary_embedding`` over q and k, one KV-cache write): :data:`.vllm.FUSED_SMALL_KERNELS`.

Not modelled: SGLang runs a prefill batch and the decode batch as separate forward passes (no
mixed chunk by default, ``--enable-mixed-chunk``); the simulator mixes them in one iteration.
The radix cache is on by default (``--disable-radix-cache``): prefix caching is ASSUMED off, as
before profiles (give ``--enable-prefix-caching``).

ASSUMED: every CPU term (3e-4 s per iteration, 2 us per sequence, 20 ns per token, 20 us per output
token: no source publishes them; ``costmodel calibrate serving`` fits them). The request path
(:meth:`~.knobs.EngineOverheads.request_path_s`): ``per_prompt_token_s`` 2 us, tokenisation with
Hugging Face ``tokenizers`` in its tokenizer manager (the measured rate is :mod:`.vllm`'s source);
``request_s`` (27 ms) and ``prefix_lookup_per_token_s`` 150 ns are vLLM V1's (ASSUMED: SGLang's
process layout is the same, an HTTP server and tokenizer manager handing requests to the
scheduler over ZMQ; its own TTFT rows outside the held-out split, all above half of capacity, do
not determine a fixed term: ``benchmarks/request_path_fit.py``).
"""

from __future__ import annotations

from .profile import EngineProfile, register_engine
from .vllm import FUSED_SMALL_KERNELS, TOKENISE
from .vllm import PROFILE as V1

__all__ = [
    "CUDA_GRAPH_MAX_BS",
    "NEW_TOKEN_RATIO",
    "PROFILE",
    "SGLANG_SOURCES",
    "sglang_capture_sizes",
    "sglang_device_defaults",
    "sglang_memory_defaults",
]

_ARGS = "python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings (sglang 0.5.8)"
#: ``cuda_graph_max_bs`` of a 60-160 GB GPU below TP 4 (module doc), the capture rule's limit
CUDA_GRAPH_MAX_BS = 256
#: SGLang 0.5's admission estimate (init, min, decay per decode step): 0.7, 0.7 x 0.14, (0.7 - 0.098) / 600
NEW_TOKEN_RATIO = (0.7, 0.7 * 0.14, (0.7 - 0.7 * 0.14) / 600)


def sglang_memory_defaults(
    gpu_mem_mib: float, tp: int = 1, dp: int = 1, chunk: int | None = None
) -> tuple[int, int, float]:
    """SGLang 0.5's chunked-prefill size ``P``, ``cuda_graph_max_bs`` ``G`` and
    ``mem_fraction_static`` ``s`` for a GPU of ``M`` MiB at TP ``t`` (module doc:
    ``R = 512 + 1.5 max(P, 2048) + 2 G + 1024 t / 8`` MiB, at least 10,240 above 60 GiB;
    ``s = round((M - R) / M, 3)``). With DP attention over ``D`` ranks (``--dp-size D``,
    ``--tp-size`` the whole group's ``t = D t_rank``) ``R`` also holds ``3 G D`` MiB, and
    ``1.5 G D`` more when ``G > 300`` (``_handle_gpu_memory_settings``: "DP attention needs more
    padding"), before the 10,240 floor; ``P`` is the engine's whole budget (each rank takes
    ``P // D``: :meth:`~.profile.EngineProfile.for_data_parallel`).

    Parameters
    ----------
    gpu_mem_mib : float
        The GPU's memory ``M`` as nvidia-smi reports it (MiB).
    tp : int
        Tensor-parallel degree of a rank (the whole group's divided by ``dp``).
    dp : int
        Attention data-parallel ranks ``D`` (1: no DP attention).
    chunk : int, optional
        A ``--chunked-prefill-size`` the user gave (the engine's whole): ``P`` is it, in ``R``
        too (``_handle_gpu_memory_settings`` reserves for the value in force); None: by memory.

    Returns
    -------
    tuple of (int, int, float)
        ``(P, G, s)``.

    >>> sglang_memory_defaults(81559)  # H100 SXM: R = 512 + 12288 + 512 + 128 = 13440
    (8192, 256, 0.835)
    >>> sglang_memory_defaults(183359, 8)  # B200 at TP 8: R = 512 + 24576 + 1024 + 1024 = 27136
    (16384, 512, 0.852)
    >>> sglang_memory_defaults(143771, 1, 8)  # H200, DP 8: + 3 x 512 x 8 + 1.5 x 512 x 8 = 33280
    (8192, 512, 0.769)
    >>> sglang_memory_defaults(81559, chunk=16384)  # a given 16,384: R = 512 + 24576 + 512 + 128
    (16384, 256, 0.685)
    """
    gib = 1024
    tp = tp * dp  # --tp-size: the whole group
    big = tp >= 4
    if gpu_mem_mib < 20 * gib:
        by_memory, graphs = 2048, 8
    elif gpu_mem_mib < 35 * gib:
        by_memory, graphs = 2048, 80 if big else 24
    elif gpu_mem_mib < 60 * gib:
        by_memory, graphs = 4096, 160 if big else 32
    elif gpu_mem_mib < 160 * gib:
        by_memory, graphs = 8192, 512 if big else 256
    else:
        by_memory, graphs = 16384, 512
    chunk = by_memory if chunk is None else chunk  # a given --chunked-prefill-size is reserved for as it is
    reserved = 512 + max(chunk, 2048) * 1.5 + graphs * 2 + tp / 8 * 1024
    if dp > 1:  # DP attention's padding (and more above 300 graphs)
        reserved += graphs * dp * 3 + (graphs * dp * 1.5 if graphs > 300 else 0.0)
    if gpu_mem_mib > 60 * gib:
        reserved = max(reserved, 10 * gib)
    return chunk, graphs, round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def sglang_device_defaults(
    capacity_bytes: float, device_name: str, tp: int = 1, dp: int = 1, budget: int | None = None
) -> dict[str, float]:
    """SGLang 0.5's token budget (``chunked_prefill_size``) and ``mem_fraction_static`` on a device
    (:func:`sglang_memory_defaults` of its reported memory in MiB).

    Parameters
    ----------
    capacity_bytes : float
        The memory the driver reports (bytes; 2^20 bytes per MiB).
    device_name : str
        Its catalog name (SGLang's rule reads memory only).
    tp : int
        Tensor-parallel degree of a rank.
    dp : int
        Attention data-parallel ranks (:func:`sglang_memory_defaults`).
    budget : int, optional
        A token budget the user gave (the engine's whole): the fraction reserves for it.

    Returns
    -------
    dict
        ``max_num_batched_tokens`` and ``kv_fraction``.

    Raises
    ------
    CostModelError
        When SGLang's start-up reserve is more than the device's memory.

    >>> sglang_device_defaults(81559 * 2**20, "h100-sxm")
    {'max_num_batched_tokens': 8192, 'kv_fraction': 0.835}
    """
    mib = capacity_bytes / 2**20
    chunk, _, frac = sglang_memory_defaults(mib, tp, dp, budget)
    if frac <= 0:  # the reserve outgrows the device: SGLang starts with no memory for its pool
        from costmodel.errors import CostModelError

        reserved = round((1 - frac) * mib)
        raise CostModelError(
            f"SGLang on {device_name}: its start-up reserve ({reserved:,} MiB: 512 + 1.5 x the chunk of "
            f"{chunk:,} tokens + its CUDA graphs) is more than the device's {mib:,.0f} MiB, so "
            "mem_fraction_static has nothing left for weights and KV: no SGLang default runs here"
        )
    return {"max_num_batched_tokens": chunk, "kv_fraction": frac}


def sglang_capture_sizes(max_num_seqs: int = 2048, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """SGLang 0.5's CUDA-graph capture sizes (``_generate_cuda_graph_batch_sizes``): ``[1, 2, 4, 8,
    12] + range(16, 257, 8) + range(272, 512, 16) + range(512, G + 1, 32)``, up to ``G`` =
    :data:`CUDA_GRAPH_MAX_BS` and ``max_num_seqs``.

    Parameters
    ----------
    max_num_seqs : int
        Sequences per iteration.
    max_num_batched_tokens : int
        Tokens per iteration (not used by SGLang's rule).

    Returns
    -------
    tuple of int

    >>> sglang_capture_sizes()[:7], sglang_capture_sizes()[-2:]
    ((1, 2, 4, 8, 12, 16, 24), (248, 256))
    """
    top = min(CUDA_GRAPH_MAX_BS, max_num_seqs)
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, top + 1, 32)]
    return tuple(b for b in sizes if b <= top)


_ASSUMED = "ASSUMED: no source publishes it (costmodel calibrate serving fits it)"
#: the sources both SGLang profiles share
SGLANG_SOURCES = {
    "dp_chunk_split": "python/sglang/srt/server_args.py _handle_data_parallelism: with --enable-dp-attention "
    "chunked_prefill_size //= dp_size (each rank's budget; dp_size 1 turns DP attention off); "
    "_handle_gpu_memory_settings: mem_fraction_static by the whole --tp-size plus 3 x cuda_graph_max_bs x dp_size MiB",
    "dp_conservativeness": "python/sglang/srt/server_args.py _handle_data_parallelism: with --enable-dp-attention "
    "schedule_conservativeness *= 0.3; scheduler.py init_new_token_ratio = min(0.7 x it, 1), the floor and decay linear in it",
    "dp_seqs_split": "python/sglang/srt/managers/tp_worker.py TpModelWorker: max_running_requests = "
    "min(--max-running-requests // (dp_size if enable_dp_attention else 1), req_to_token_pool.size): a "
    "given value is the engine's whole, each DP-attention rank runs its share (0 fails its "
    "'max_running_request is zero' assert); unset, each rank's own pool sets its limit",
    "dp_load_balance": "python/sglang/srt/server_args.py load_balance_method 'round_robin' (the data-parallel "
    "controller deals requests to the ranks in turn; --load-balance-method)",
    "block_size": "python/sglang/srt/server_args.py page_size 1: the token-to-KV pool holds 1-token pages",
    "enable_chunked_prefill": "python/sglang/srt/server_args.py chunked_prefill_size > 0 by default: chunked",
    "batch_wait_timeout_iters": "SGLang has no batch waiting: 0, off",
    "batch_wait_max_tokens_ratio": "SGLang has no batch waiting: 0, off",
    "policy": "python/sglang/srt/managers/schedule_batch.py retract_decode: retract, recompute",
    "reserve_full_prompt": "SGLang admits by its new_token_ratio estimate (schedule_policy.py PrefillAdder), not vLLM's rule: off",
    "kv_watermark": "SGLang has no watermark (its PrefillAdder estimate holds the room): 0, off",
    "enable_prefix_caching": "ASSUMED off, as before profiles: SGLang's radix cache is on by default "
    "(--disable-radix-cache); give --enable-prefix-caching",
    "kv_rule": "python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py profile_max_num_token: "
    "mem_fraction_static of the device for weights and KV",
    "small_kernels": "sgl-kernel fused_add_rmsnorm, rotary_embedding, one KV write (as vLLM)",
    "iteration_s": _ASSUMED,
    "per_seq_s": _ASSUMED,
    "per_token_s": _ASSUMED,
    "request_s": "ASSUMED: vLLM V1's fitted value stands in (its rows do not determine one)",
    "output_token_s": _ASSUMED,
    "per_prompt_token_s": TOKENISE,
    "prefix_lookup_per_token_s": "ASSUMED: vLLM V1's SHA-256 block hashing stands in for the radix-tree match",
    "frontend_token_s": "NOT IDENTIFIED, 0: benchmarks/frontend_fit.py (docs/frontend_fit.md) bounds it by 49 us/token "
    "on the calibration rows (TP 4 only at the bound); no source publishes the tokenizer manager's ceiling",
}

PROFILE = register_engine(
    EngineProfile(
        name="sglang",
        version="0.5",
        label="SGLang 0.5 launch_server",
        framework="sglang",
        max_num_batched_tokens=8192,
        max_num_seqs=2048,
        block_size=1,
        enable_chunked_prefill=True,
        policy="recompute",
        kv_rule="static",
        kv_fraction=0.835,
        new_token_ratio=NEW_TOKEN_RATIO,
        dp_load_balance="round_robin",
        dp_chunk_split=True,
        dp_conservativeness=0.3,
        dp_seqs_split=True,
        device_defaults=sglang_device_defaults,
        cudagraph_sizes=sglang_capture_sizes,
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
            **SGLANG_SOURCES,
            "max_num_batched_tokens": f"{_ARGS}: chunked_prefill_size by GPU memory (8192 at 60-160 GB)",
            "max_num_seqs": "python/sglang/srt/model_executor/model_runner.py init_memory_pool: "
            "max_num_reqs = min(max(tokens / context_len * 512, 2048), 4096): at least 2048",
            "kv_fraction": f"{_ARGS}: mem_fraction_static = round((M - reserved) / M, 3) (0.835 on an H100 SXM at TP 1)",
            "cudagraph_sizes": "python/sglang/srt/server_args.py _generate_cuda_graph_batch_sizes, "
            "cuda_graph_max_bs 256 (60-160 GB GPUs below TP 4; ASSUMED elsewhere)",
            "new_token_ratio": "python/sglang/srt/environ.py SGLANG_INIT_NEW_TOKEN_RATIO 0.7, "
            "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 (schedule_policy.py PrefillAdder)",
        },
    )
)
