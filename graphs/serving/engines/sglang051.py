"""SGLang 0.5.1 (``sglang.launch_server``), priced by the corpus's ``sglang`` kernels:
``sglang@0.5.1`` (the silicon sample's ``0.5.1.post1`` and ``0.5.1-rc0.pre1`` runs).

The same scheduler and pool rules as :mod:`.sglang` (``sglang@0.5``, SGLang 0.5.8: the static
fraction of the device for weights and KV, ``floor((s C - W) / k)`` tokens in 1-token pages,
``PrefillAdder``'s ``new_token_ratio`` admission, ``retract_decode``), with the memory defaults
SGLang had between PR 7054 ("Simplify the heuristics for setting --mem-fraction-static", merged
2025-06-10) and PR 10975 ("Use more general heuristics to set the default value of
--mem-fraction-static", opened 2025-09-27; its constants revised by PR 11076 on 2025-09-30), the
rule :mod:`.sglang` follows. ``python/sglang/srt/server_args.py`` of that period
(``ServerArgs.__post_init__``, "_handle_mem_fraction_static", "_handle_chunked_prefill_size",
"_handle_cuda_graph_max_bs"), for a GPU of ``M`` MiB (``get_device_memory_capacity``, nvidia-smi's
``memory.total``) at TP ``t`` (pipeline parallelism 1, no speculative decoding, no DP attention):

* ``mem_fraction_static`` ``s = round((M - R) / M, 3)`` with ``R`` reserved for activations
  and CUDA graphs, by memory alone (MiB):

  .. math::

      R = 1024 \\times \\begin{cases} 2.8 + t / 10 & M < 35 \\cdot 1024 \\\\
      9.5 + t / 2 & M < 90 \\cdot 1024 \\\\ 12 + t / 2 & M < 160 \\cdot 1024 \\\\
      32 & \\text{otherwise} \\end{cases}

  On an H100 SXM (81,559 MiB): ``R`` = 10,240 at TP 1, ``s`` = 0.874 (0.835 from 0.5.4 on);
  10,752 at TP 2, ``s`` = 0.868 (0.834); :func:`sglang051_memory_defaults`;
* ``chunked_prefill_size`` 2,048 below 35 GiB, 8,192 below 160 GiB, else 16,384;
* CUDA-graph capture sizes (``cuda_graph_runner.py`` ``get_batch_sizes_to_capture``, no
  ``cuda_graph_max_bs`` set above 35 GiB): ``[1, 2, 4, 8] + range(16, 161, 8)`` up to 160, the
  list of a GPU of at most 96 GiB (:func:`sglang051_capture_sizes`; a larger GPU also captured
  ``range(160, 257, 8)``: ASSUMED at 160, as the capture rule sees only the batch limits).

``max_running_requests`` (``model_runner`` ``init_memory_pool``, at least 2,048) and the
``new_token_ratio`` constants (``global_config.py``: 0.7, floor 0.7 x 0.14, decay over 600
steps, read from the same environment variables 0.5.8's ``environ.py`` reads) are 0.5.8's; the
CPU terms and the request path: :mod:`.sglang`'s, with its sources.
"""

from __future__ import annotations

from costmodel.errors import CostModelError

from .profile import EngineProfile, register_engine
from .sglang import PROFILE as S05
from .sglang import SGLANG_SOURCES

__all__ = ["PROFILE", "sglang051_capture_sizes", "sglang051_device_defaults", "sglang051_memory_defaults"]

_ARGS = "python/sglang/srt/server_args.py ServerArgs.__post_init__ (sglang 0.5.1, PR 7054's rule)"


def sglang051_memory_defaults(gpu_mem_mib: float, tp: int = 1) -> tuple[int, float]:
    """SGLang 0.5.1's ``chunked_prefill_size`` ``P`` and ``mem_fraction_static`` ``s`` for a GPU of
    ``M`` MiB at TP ``t`` (module doc: ``R`` = 1024 x (2.8 + t / 10) below 35 GiB, (9.5 + t / 2)
    below 90 GiB, (12 + t / 2) below 160 GiB, else 32; ``s = round((M - R) / M, 3)``).

    Parameters
    ----------
    gpu_mem_mib : float
        The GPU's memory ``M`` as nvidia-smi reports it (MiB).
    tp : int
        Tensor-parallel degree ``t``.

    Returns
    -------
    tuple of (int, float)
        ``(P, s)``.

    Raises
    ------
    CostModelError
        When ``tp`` is not a positive integer, or the GPU is no larger than the reserve.

    >>> sglang051_memory_defaults(81559)  # H100 SXM: R = 10 x 1024 = 10240; 71319 / 81559
    (8192, 0.874)
    >>> sglang051_memory_defaults(81559, 2)  # R = 10.5 x 1024 = 10752; 70807 / 81559
    (8192, 0.868)
    """
    if not (isinstance(tp, int) and tp >= 1):
        raise CostModelError(f"sglang@0.5.1 memory defaults: tp must be an integer >= 1, got {tp!r}")
    gib = 1024
    if gpu_mem_mib < 35 * gib:
        reserved = (2.8 + tp / 10) * gib
    elif gpu_mem_mib < 90 * gib:
        reserved = (9.5 + tp / 2) * gib
    elif gpu_mem_mib < 160 * gib:
        reserved = (12 + tp / 2) * gib
    else:
        reserved = 32 * gib
    if not gpu_mem_mib > reserved:  # also NaN and <= 0
        raise CostModelError(
            f"sglang@0.5.1 memory defaults: a GPU of {gpu_mem_mib!r} MiB is no larger than the "
            f"{reserved:g} MiB SGLang 0.5.1 reserves at tp {tp}; allowed: more than that"
        )
    chunk = 2048 if gpu_mem_mib < 35 * gib else 8192 if gpu_mem_mib < 160 * gib else 16384
    return chunk, round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)


def sglang051_device_defaults(
    capacity_bytes: float, device_name: str, tp: int = 1, dp: int = 1, budget: int | None = None
) -> dict[str, float]:
    """SGLang 0.5.1's token budget (``chunked_prefill_size``) and ``mem_fraction_static`` on a
    device (:func:`sglang051_memory_defaults` of its reported memory in MiB).

    Parameters
    ----------
    capacity_bytes : float
        The memory the driver reports (bytes; 2^20 bytes per MiB).
    device_name : str
        Its catalog name (SGLang's rule reads memory only).
    tp : int
        Tensor-parallel degree of a rank.
    dp : int
        Attention data-parallel ranks: the rule reads the whole group's ``--tp-size``
        (``tp x dp``); a DP-attention reserve of its own is not modelled for 0.5.1 (ASSUMED none:
        the reserve came with PR 10975, after it).
    budget : int, optional
        A token budget the user gave (not read: this rule's fraction does not depend on it).

    Returns
    -------
    dict
        ``max_num_batched_tokens`` and ``kv_fraction``.

    >>> sglang051_device_defaults(81559 * 2**20, "h100-sxm", 2)
    {'max_num_batched_tokens': 8192, 'kv_fraction': 0.868}
    """
    chunk, frac = sglang051_memory_defaults(capacity_bytes / 2**20, tp * dp)
    return {"max_num_batched_tokens": chunk, "kv_fraction": frac}


def sglang051_capture_sizes(max_num_seqs: int = 2048, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """SGLang 0.5.1's CUDA-graph capture sizes on a GPU of at most 96 GiB: ``[1, 2, 4, 8] + [16,
    24, ..., 160]`` up to ``max_num_seqs``.

    Parameters
    ----------
    max_num_seqs : int
        Sequences per iteration.
    max_num_batched_tokens : int
        Tokens per iteration (not used by SGLang's rule).

    Returns
    -------
    tuple of int

    >>> sglang051_capture_sizes()[:6], sglang051_capture_sizes()[-1], len(sglang051_capture_sizes())
    ((1, 2, 4, 8, 16, 24), 160, 23)
    """
    return tuple(b for b in (1, 2, 4, 8, *range(16, 161, 8)) if b <= max_num_seqs)


PROFILE = register_engine(
    EngineProfile(
        name="sglang",
        version="0.5.1",
        label="SGLang 0.5.1 launch_server",
        framework="sglang",
        max_num_batched_tokens=8192,
        max_num_seqs=S05.max_num_seqs,
        block_size=1,
        enable_chunked_prefill=True,
        policy="recompute",
        kv_rule="static",
        kv_fraction=0.874,
        new_token_ratio=S05.new_token_ratio,
        dp_load_balance="round_robin",
        dp_chunk_split=True,
        dp_conservativeness=0.3,
        dp_seqs_split=True,
        device_defaults=sglang051_device_defaults,
        cudagraph_sizes=sglang051_capture_sizes,
        small_kernels=S05.small_kernels,
        cpu_terms=dict(S05.cpu_terms),
        fitted=(),
        default_version=False,
        sources={
            **SGLANG_SOURCES,
            "max_num_batched_tokens": f"{_ARGS}: chunked_prefill_size 2048 below 35 GiB, 8192 below 160 GiB, else 16384",
            "max_num_seqs": S05.sources["max_num_seqs"],
            "kv_fraction": f"{_ARGS}: mem_fraction_static = round((M - R) / M, 3), R = (9.5 + tp / 2) GiB "
            "at 35-90 GiB (0.874 on an H100 SXM at TP 1)",
            "cudagraph_sizes": "python/sglang/srt/model_executor/cuda_graph_runner.py get_batch_sizes_to_capture "
            "(sglang 0.5.1): [1, 2, 4, 8] + range(16, 161, 8) at most 96 GiB (ASSUMED above)",
            "new_token_ratio": "python/sglang/global_config.py (sglang 0.5.1) SGLANG_INIT_NEW_TOKEN_RATIO 0.7, "
            "SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600 (as 0.5.8's environ.py)",
        },
    )
)
