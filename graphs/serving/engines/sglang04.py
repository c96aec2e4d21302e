"""SGLang 0.4 (``sglang.launch_server``), priced by the corpus's ``sglang`` kernels: ``sglang@0.4``.

The same scheduler and pool rules as :mod:`.sglang` (``sglang@0.5``: the static fraction of the
device for weights and KV, 1-token pages, ``PrefillAdder``'s ``new_token_ratio`` admission,
``retract_decode``), with 0.4's defaults (``python/sglang/srt/server_args.py``,
``ServerArgs.__post_init__``, sglang 0.4.x):

* ``mem_fraction_static`` by tensor parallelism alone: 0.88 at TP 1, 0.87 at TP 2-3, 0.85 at
  TP 4-7, 0.81 at TP 8-15, 0.79 at TP 16 and above (:func:`sglang04_device_defaults`);
* ``chunked_prefill_size`` 2,048 on a GPU below 25,000 MiB, else 8,192; ``cuda_graph_max_bs`` 8
  below 25,000 MiB, else 160;
* CUDA-graph capture sizes ``[1, 2, 4] + [8 i for i in 1..20]`` up to 160
  (``cuda_graph_runner.py``, ``get_batch_sizes_to_capture``): :func:`sglang04_capture_sizes`;
* ``new_token_ratio``: ``global_config.py`` ``init_new_token_ratio`` 0.7,
  ``base_min_new_token_ratio`` 0.1, ``new_token_ratio_decay`` 0.001 per decode step.

Every other default, the CPU terms and the request path: :mod:`.sglang`'s, with its sources.
"""

from __future__ import annotations

from .profile import EngineProfile, register_engine
from .sglang import PROFILE as S05
from .sglang import SGLANG_SOURCES

__all__ = ["PROFILE", "sglang04_capture_sizes", "sglang04_device_defaults"]

_ARGS = "python/sglang/srt/server_args.py ServerArgs.__post_init__ (sglang 0.4.x)"


def sglang04_device_defaults(
    capacity_bytes: float, device_name: str, tp: int = 1, dp: int = 1, budget: int | None = None
) -> dict[str, float]:
    """SGLang 0.4's ``mem_fraction_static`` by TP (0.88, 0.87 from 2, 0.85 from 4, 0.81 from 8,
    0.79 from 16) and ``chunked_prefill_size`` by GPU memory (2,048 below 25,000 MiB, else 8,192).

    Parameters
    ----------
    capacity_bytes : float
        The memory the driver reports (bytes; 2^20 bytes per MiB).
    device_name : str
        Its catalog name (not read).
    tp : int
        Tensor-parallel degree.

    dp : int
        Attention data-parallel ranks of ``tp`` devices each: SGLang's ``--tp-size`` is the whole
        group's, ``tp x dp``, and the fraction is read by it (as 0.5's: :mod:`.sglang`).
    budget : int, optional
        A token budget the user gave (not read: this rule's fraction does not depend on it).

    Returns
    -------
    dict
        ``max_num_batched_tokens`` and ``kv_fraction``.

    >>> sglang04_device_defaults(81559 * 2**20, "h100-sxm", 4)
    {'max_num_batched_tokens': 8192, 'kv_fraction': 0.85}
    >>> sglang04_device_defaults(24564 * 2**20, "rtx-4090")
    {'max_num_batched_tokens': 2048, 'kv_fraction': 0.88}
    >>> sglang04_device_defaults(143771 * 2**20, "h200-sxm", 1, 8)["kv_fraction"]  # --tp-size 8 --dp-size 8
    0.81
    """
    t = tp * dp  # --tp-size: the whole group's under DP attention
    frac = 0.79 if t >= 16 else 0.81 if t >= 8 else 0.85 if t >= 4 else 0.87 if t >= 2 else 0.88
    chunk = 2048 if capacity_bytes / 2**20 < 25_000 else 8192
    return {"max_num_batched_tokens": chunk, "kv_fraction": frac}


def sglang04_capture_sizes(max_num_seqs: int = 2048, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """SGLang 0.4's CUDA-graph capture sizes: ``[1, 2, 4] + [8, 16, ..., 160]`` up to
    ``cuda_graph_max_bs`` 160 and ``max_num_seqs``.

    Parameters
    ----------
    max_num_seqs : int
        Sequences per iteration.
    max_num_batched_tokens : int
        Tokens per iteration (not used by SGLang's rule).

    Returns
    -------
    tuple of int

    >>> sglang04_capture_sizes()[-2:], len(sglang04_capture_sizes())
    ((152, 160), 23)
    """
    return tuple(b for b in (1, 2, 4, *range(8, 161, 8)) if b <= max_num_seqs)


PROFILE = register_engine(
    EngineProfile(
        name="sglang",
        version="0.4",
        label="SGLang 0.4 launch_server",
        framework="sglang",
        max_num_batched_tokens=8192,
        max_num_seqs=2048,
        block_size=1,
        enable_chunked_prefill=True,
        policy="recompute",
        kv_rule="static",
        kv_fraction=0.88,
        new_token_ratio=(0.7, 0.1, 0.001),
        dp_load_balance="round_robin",
        dp_conservativeness=0.3,
        device_defaults=sglang04_device_defaults,
        cudagraph_sizes=sglang04_capture_sizes,
        small_kernels=S05.small_kernels,
        cpu_terms=dict(S05.cpu_terms),
        fitted=(),
        default_version=False,
        sources={
            **SGLANG_SOURCES,
            # SGLang 0.4's DP attention halved the budget early in the series and divided it by
            # dp_size later (server_args.py of each): no one rule for the series, so none applied
            "dp_chunk_split": "not applied: SGLang 0.4 halved chunked_prefill_size under DP attention early in "
            "the series, divided it by dp_size later (server_args.py)",
            "dp_seqs_split": "not applied: the later 0.4 releases' tp_worker.py divide --max-running-requests "
            "by dp_size under DP attention; that the series' first ones did is not verified",
            "max_num_batched_tokens": f"{_ARGS}: chunked_prefill_size 2048 below 25,000 MiB, else 8192",
            "max_num_seqs": S05.sources["max_num_seqs"],
            "kv_fraction": f"{_ARGS}: mem_fraction_static 0.88 at TP 1 (0.87 TP 2, 0.85 TP 4, 0.81 TP 8, 0.79 TP 16)",
            "cudagraph_sizes": "python/sglang/srt/model_executor/cuda_graph_runner.py get_batch_sizes_to_capture: "
            "[1, 2, 4] + [8 i for i in 1..20], cuda_graph_max_bs 160",
            "new_token_ratio": "python/sglang/global_config.py init_new_token_ratio 0.7, base_min_new_token_ratio 0.1, "
            "new_token_ratio_decay 0.001 (schedule_policy.py PrefillAdder)",
        },
    )
)
