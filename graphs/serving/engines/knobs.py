"""The simulator's engine knobs: the scheduler's (:class:`EngineConfig`, vLLM's names) and what
a serving engine adds around its kernels (:class:`EngineOverheads`).

They sit in the engines wing so that an engine profile (:mod:`.profile`) can build them without
importing the simulator; :mod:`graphs.serving.sim.engine` and :mod:`graphs.serving.pricing.overheads`
re-export them under their old paths. The formulas they stand for are those modules' docs:

.. math::

    t_{iter} = s \\, t_{step}(\\text{padded batch}) + a + b\\,n + c\\,T, \\qquad
    \\mathrm{TTFT} = \\underbrace{r + p\\,S + [\\text{prefix caching}]\\,h\\,S}_{\\text{request path}}
    + w + t_{first} + d

with ``s`` :attr:`EngineOverheads.kernel_scale`, ``a`` :attr:`~EngineOverheads.iteration_s`,
``b`` :attr:`~EngineOverheads.per_seq_s` per scheduled sequence, ``c``
:attr:`~EngineOverheads.per_token_s` per new token, ``r`` :attr:`~EngineOverheads.request_s`
(the fixed part of the request path: HTTP, request validation, the hand-off to the engine's
scheduler and the first streamed chunk's fixed cost), ``p``
:attr:`~EngineOverheads.per_prompt_token_s` per prompt token (tokenisation), ``h``
:attr:`~EngineOverheads.prefix_lookup_per_token_s` per prompt token when prefix caching is on
(hashing the prompt's blocks for the cache lookup), ``S`` prompt tokens, ``w`` the admission
delay (the request waits in the queue until the iteration running when it arrives has ended:
the scheduler admits requests only at iteration boundaries; the simulator's event loop is exact
there, no term), ``t_first`` the iterations until its first token is sampled and ``d``
:attr:`~EngineOverheads.output_token_s` per output token (detokenisation and streaming; the first
token's included) (s).

The front end (``f`` :attr:`~EngineOverheads.frontend_token_s`, ``m``
:attr:`EngineConfig.api_server_count`): the process that detokenises and streams every output
token of every running request (vLLM's API server, SGLang's tokenizer manager and detokenizer,
TensorRT-LLM's ``trtllm-serve`` response loop) is one server shared by all of them, in tandem after
the engine loop (the GPU step and the engine's CPU). Iteration ``k`` occupies the engine for
``g_k`` (``t_iter`` above) and emits ``n_k`` output tokens, which occupy the front end for
``h_k = n_k f / m`` (``m`` front-end processes sharing the load: vLLM's ``--api-server-count``,
https://github.com/vllm-project/vllm/pull/17546). The engine hands iteration ``k``'s tokens over
when it ends and starts ``k + 1`` at once, but hands ``k + 1``'s over only when the front end has
drained ``k``'s (one iteration's buffer between the processes). With ``E_k`` the hand-over time
(the simulator's iteration event) and ``F_k`` the time the front end has drained iteration ``k``:

.. math::

    E_{k+1} = \\max(E_k + g_{k+1},\\; F_k), \\qquad F_k = E_k + h_k
    \\quad\\Rightarrow\\quad E_{k+1} - E_k = \\max(g_{k+1},\\; n_k f / m)

(:func:`frontend_end_s`), so in steady state the iteration period is ``max(g, n f / m)``: the
engine-bound regime is unchanged, and the front-end-bound one emits ``m / f`` tokens/s whatever
the GPU (a pipeline of two servers runs at its slower server's rate; a longer buffer changes when
the engine idles, not that rate, which bounds the client's tokens/s either way). The client sees
iteration ``k``'s tokens as the front end drains them, the ``j``-th of ``n_k`` at
``E_k + j f / m``: the simulator stamps each at the mean, ``E_k + (n_k + 1) f / (2 m)``
(the order within the batch is arbitrary), on TTFT and on the last token (E2E). Sources that the
front end is such a serial ceiling: sglang#6553 ("TokenizerManager may encounter single-core
bottlenecks under high-concurrency scenarios"), vllm#12705 ("the API server runs in a single
process, utilizing a single CPU ... [it must] process requests fast enough to keep GPU
resources fully utilized") and its scale-out, vllm#17546.

Scheduler policy (:data:`POLICIES`): ``recompute`` is vLLM's (blocks are allocated as tokens
are computed; when they run out the latest admitted sequence is preempted and later recomputed;
with prefix caching on, its full blocks stay cached until evicted, tail first, and it resumes
after those still cached: ``vllm/v1/core/kv_cache_manager.py``, ``free``: "We free the blocks in
reverse order so that the tail blocks are evicted first when caching is enabled"). Two admission
rules of vLLM sit on top of it: ``reserve_full_prompt`` (``scheduler_reserve_full_isl``: a waiting
or preempted sequence is admitted only when blocks for all its known tokens are free, not only
its first chunk's; https://github.com/vllm-project/vllm/pull/37307) and ``kv_watermark``
(``watermark``: that many of the pool's blocks stay free when admitting while others run;
https://github.com/vllm-project/vllm/pull/44594); SGLang's ``new_token_ratio`` (:class:`EngineConfig`:
a waiting request is admitted only while its prompt and whole output fit the pool less a share
``r`` of the running requests' remaining outputs, ``r`` decaying per decode iteration and reset
by a retraction: :mod:`graphs.serving.sim.engine`);
``guaranteed_no_evict`` is TensorRT-LLM's default capacity scheduler (a request is admitted only
when the blocks of its prompt plus its maximum output can be reserved, so a started request is
never paused: https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/useful-runtime-flags.html,
"Capacity Scheduler Policy").
"""

from __future__ import annotations

import bisect
import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from costmodel.errors import CostModelError

__all__ = [
    "DP_LOAD_BALANCE",
    "EngineConfig",
    "EngineOverheads",
    "KERNEL_SCALE_RANGE",
    "check_new_token_ratio",
    "POLICIES",
    "REQUEST_PATH_TERMS",
    "TERMS",
    "TERM_RANGES",
    "CPU_TERMS",
    "FIT_DEFAULT_TERMS",
    "scaled_kernels_s",
    "frontend_end_s",
    "install_overheads_lookup",
    "profile_peak_bytes",
    "sampler_words",
]

#: scheduler policies: vLLM's recompute preemption, TensorRT-LLM's reserve-at-admission
POLICIES = ("recompute", "guaranteed_no_evict")
#: how a data-parallel group's requests pick a rank: vLLM's score (fewest ``4 x waiting +
#: running``, ``DPLBAsyncMPClient``), SGLang's round robin (``--load-balance-method``'s default)
DP_LOAD_BALANCE = ("score", "round_robin")
#: the fitted terms (s; ``kernel_scale`` dimensionless), in the order they print
TERMS = (
    "kernel_scale",
    "iteration_s",
    "per_seq_s",
    "per_token_s",
    "request_s",
    "output_token_s",
    "per_prompt_token_s",
    "prefix_lookup_per_token_s",
    "frontend_token_s",
)
#: the largest accepted value of each time term (s): a second of CPU per iteration is no engine
_TERM_MAX = {
    "iteration_s": 1.0,
    "per_seq_s": 0.1,
    "per_token_s": 0.01,
    "request_s": 60.0,
    "output_token_s": 1.0,
    "per_prompt_token_s": 1e-3,
    "prefix_lookup_per_token_s": 1e-4,
    "frontend_token_s": 0.01,
}
#: terms added after fit files were first written (:meth:`EngineOverheads.from_dict`)
_ADDED_LATER = ("per_prompt_token_s", "prefix_lookup_per_token_s", "frontend_token_s")
#: the request-path terms (module doc: they delay the request's arrival at the engine's queue)
REQUEST_PATH_TERMS = ("request_s", "per_prompt_token_s", "prefix_lookup_per_token_s")
KERNEL_SCALE_RANGE = (0.05, 20.0)  #: accepted kernel_scale values
#: every term's accepted range (its unit: s, or the dimensionless kernel scale)
TERM_RANGES = {"kernel_scale": KERNEL_SCALE_RANGE, **{t: (0.0, hi) for t, hi in _TERM_MAX.items()}}
#: the CPU and request-path terms an engine profile sets (s): every term but ``kernel_scale``
CPU_TERMS = TERMS[1:]
#: the terms ``calibrate serving`` fits unless ``--terms`` says otherwise
#: (:data:`graphs.serving.planning.serving_fit.DEFAULT_TERMS`; the CLI's help is built from it): the
#: per-token CPU term is collinear with the kernels' prefill time (both grow with the prompt),
#: the per-sequence one with the per-iteration one where every run sits at a similar batch size,
#: and the per-output-token one with the per-iteration one (both add to every token)
FIT_DEFAULT_TERMS = ("kernel_scale", "iteration_s", "request_s")


def frontend_end_s(start_s: float, step_s: float, drained_s: float) -> float:
    """When an iteration that starts at ``start_s`` and occupies the engine ``step_s`` is handed
    to the front end: not before the front end has drained the iteration before it (module doc):

    .. math::

        E_{k+1} = \\max(S_{k+1} + g_{k+1},\\; F_k)

    Parameters
    ----------
    start_s : float
        ``S_{k+1}``, the iteration's start (s).
    step_s : float
        ``g_{k+1}``, its time on the engine: kernels and engine CPU (s).
    drained_s : float
        ``F_k``, when the front end has drained the previous iteration's tokens (s; 0 or any
        time before ``start_s``: nothing pending).

    Returns
    -------
    float
        ``E_{k+1}`` (s).

    >>> frontend_end_s(1.0, 0.02, 0.5), frontend_end_s(1.0, 0.02, 1.05)
    (1.02, 1.05)
    """
    return max(start_s + step_s, drained_s)


def profile_peak_bytes(
    activation_bytes_per_token: float,
    max_num_batched_tokens: int,
    sampler_bytes_per_logit: float = 0.0,
    max_num_seqs: int = 0,
    vocab_size: int = 0,
) -> float:
    """The activation peak an engine's start-up memory profile takes out of its KV pool (bytes):
    the larger of the forward pass at the full token budget and the sampler's dummy run,

    .. math::

        P = \\max\\big(a N,\\; s \\min(N, R)\\, V\\big)

    with ``a`` live activation bytes per token, ``N`` the token budget, ``s`` the sampler's peak
    bytes per logit, ``R`` the sequence limit and ``V`` the vocabulary. vLLM V1 runs its dummy
    forward at ``N`` tokens and then samples the last hidden state of each of its ``min(N, R)``
    dummy requests; one peak counter spans both, and the forward's activations are freed before
    the sampler runs, so the profile takes the larger (``vllm/v1/worker/gpu_model_runner.py``
    ``profile_run`` and ``_dummy_sampler_run``; ``gpu_worker.py`` ``determine_available_memory``:
    ``torch_peak_increase`` of ``allocated_bytes.all.peak``). ``s`` is the engine's
    (:data:`graphs.serving.engines.sampler_memory.SAMPLERS`; 0: not counted).

    Parameters
    ----------
    activation_bytes_per_token : float
        ``a`` (bytes).
    max_num_batched_tokens : int
        ``N``.
    sampler_bytes_per_logit : float
        ``s`` (bytes; 0: the sampler's run is not counted).
    max_num_seqs : int
        ``R``.
    vocab_size : int
        ``V`` (0: not known; the sampler is then not counted).

    Returns
    -------
    float
        Bytes.

    >>> profile_peak_bytes(1000.0, 8192)  # the forward alone
    8192000.0
    >>> profile_peak_bytes(1000.0, 8192, 38.0, 1024, 201_088)  # 38 x 1,024 x 201,088
    7824736256.0
    """
    forward = float(activation_bytes_per_token) * max_num_batched_tokens
    if sampler_bytes_per_logit <= 0 or vocab_size <= 0 or max_num_seqs <= 0:
        return forward
    rows = min(max_num_batched_tokens, max_num_seqs)
    return max(forward, float(sampler_bytes_per_logit) * rows * vocab_size)


def pool_left_words(free: float) -> str:
    """What a KV pool keeps, in words: its GB, or nothing and by how much it falls short (an
    engine's log states the negative figure: vLLM's "Available KV cache memory: -2.14 GiB").

    Parameters
    ----------
    free : float
        The pool's bytes before blocks are cut from it (negative: short).

    Returns
    -------
    str

    >>> pool_left_words(2.2e9), pool_left_words(-2.2e9), pool_left_words(0.0)
    ('2.20 GB', 'nothing (2.20 GB short)', 'nothing')
    """
    if free > 0:
        return f"{free / 1e9:.2f} GB"
    return f"nothing ({-free / 1e9:.2f} GB short)" if free < 0 else "nothing"


def sampler_words(peak: float, forward: float) -> tuple[str, str]:
    """What a no-room message says when the sampler's dummy run, not the forward pass
    (``forward`` bytes), sets the profiled activation ``peak`` (:func:`profile_peak_bytes`): the
    peak's name and the remedy it adds; two empty strings otherwise.

    Parameters
    ----------
    peak, forward : float
        Bytes.

    Returns
    -------
    tuple of (str, str)

    >>> sampler_words(2.0, 1.0)[0]
    ": the sampler's profile run"
    """
    if peak <= forward:
        return "", ""
    return ": the sampler's profile run", (
        "; the sampler's run is the larger: fewer sequences (max_num_seqs sets its rows; every rank "
        "samples the whole vocabulary), or FlashInfer's sampler (installed, in 0.10-0.11; "
        "VLLM_USE_FLASHINFER_SAMPLER=1 in 0.12)"
    )


def scaled_kernels_s(scale: float, kernels_s: float, bound_s: float) -> tuple[float, bool]:
    """The kernels' seconds times a fitted or given ``scale``, floored at the step's roofline
    bound (physics is a floor: no scale prices a kernel below its roofline):

    .. math::

        t = \\max(s \\, t_{kernels}, t_{bound})

    Parameters
    ----------
    scale : float
        :attr:`EngineOverheads.kernel_scale` (dimensionless).
    kernels_s, bound_s : float
        The kernels' predicted (or bound) seconds and the same step's roofline bound (s).

    Returns
    -------
    tuple of (float, bool)
        The seconds, and whether the floor bound them (to be said once in the output).

    >>> scaled_kernels_s(0.05, 4.8e-3, 4.8e-3)
    (0.0048, True)
    >>> scaled_kernels_s(1.25, 4e-3, 4e-3)
    (0.005, False)
    """
    t = scale * kernels_s
    return (bound_s, True) if t < bound_s else (t, False)


@dataclass(frozen=True)
class EngineConfig:
    """The scheduler's knobs (vLLM's names) and the per-iteration overhead (s).

    ``scheduler_policy`` (:data:`POLICIES`): None takes the engine
    overheads' policy, and ``recompute`` when they name none.

    Attributes
    ----------
    max_num_batched_tokens : int
        Tokens per iteration at most (the token budget).
    max_num_seqs : int
        Sequences per iteration at most.
    block_size : int
        Tokens per KV block.
    gpu_memory_utilization : float
        Fraction of the device's memory the engine takes (weights, activations, KV pool).
    driver_reserved_bytes : float
        What the device's driver-reported total exceeds the total CUDA's ``cudaMemGetInfo``
        reports by (bytes): the ``gpu_memory_utilization`` fraction is of the smaller (vLLM;
        0: of the driver's total).
    non_torch_bytes : float
        Memory the engine's start-up profile counts outside PyTorch's allocator and takes out
        of its share before sizing the KV pool (bytes; vLLM's ``non_torch_increase``; 0: none).
    cudagraph_bytes_per_layer : float
        The CUDA graphs' memory the engine's start-up profile estimates, per decoder layer, and
        takes out of its share before sizing the KV pool (bytes; vLLM's
        ``cudagraph_memory_estimate_applied`` over the layers: :mod:`graphs.serving.engines.vllm`;
        0: none).
    kernel_weight_bytes : float
        Weight bytes one device holds beyond the checkpoint's because of the kernels the engine
        runs, taken out of the KV pool like the weights (a fused-MoE kernel's padded experts:
        :func:`graphs.serving.engines.moe_kernels.padded_expert_bytes`; 0: none).
    sampler_bytes_per_logit : float
        The peak bytes per logit of the sampler's dummy run in the engine's start-up profile,
        over ``min(max_num_batched_tokens, R)`` rows of the vocabulary; the profile takes the
        larger of it and the forward's activations (:func:`profile_peak_bytes`; 0: not counted).
    sampler_rows : int
        ``R``: the sequence limit the engine was started with, which its profile samples over
        (0: ``max_num_seqs``; a profile that lowers ``max_num_seqs`` to fit its pool or a wave of
        requests keeps the configured limit here).
    enable_chunked_prefill : bool
        A prompt may be split over iterations.
    enable_prefix_caching : bool
        Full KV blocks of a prompt's prefix are kept and reused.
    iteration_overhead_s : float
        Seconds added to every iteration.
    num_blocks : int or None
        KV blocks, overriding the ledger's count.
    scheduler_policy : str or None
        ``recompute`` or ``guaranteed_no_evict`` (None: the overheads' policy).
    batch_wait_timeout_iters : int
        TensorRT-LLM's batch waiting: new prompts wait up to this many iterations ...
    batch_wait_max_tokens_ratio : float
        ... until the iteration's tokens reach this fraction of the token budget.
    reserve_full_prompt : bool
        Admit a waiting sequence only when blocks for all its known tokens are free.
    kv_watermark : float
        This fraction of the pool's blocks stays free when admitting while others run (0: off).
    api_server_count : int
        Front-end processes sharing the detokenising and streaming (module doc).
    new_token_ratio : tuple of (float, float, float) or None
        SGLang's admission estimate ``(init, min, decay)``: the share of the running requests'
        remaining outputs a new request's admission keeps room for, its floor, and its fall per
        decode iteration (None: off; :mod:`graphs.serving.sim.engine`).
    dp_load_balance : str
        How a data-parallel group's requests pick a rank (:data:`DP_LOAD_BALANCE`): ``score``,
        vLLM's fewest ``4 x waiting + running``; ``round_robin``, SGLang's default
        (:mod:`graphs.serving.sim.data_parallel`).
    """

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    enable_chunked_prefill: bool = True
    #: the driver's total less CUDA's ``mem_get_info`` total (bytes; module doc of
    #: :mod:`graphs.serving.engines.vllm`): the utilisation is a fraction of the latter
    driver_reserved_bytes: float = 0.0
    #: memory outside PyTorch the engine's profile subtracts before the KV pool (bytes)
    non_torch_bytes: float = 0.0
    #: the CUDA graphs' estimated memory per decoder layer the engine's profile subtracts (bytes)
    cudagraph_bytes_per_layer: float = 0.0
    #: weights the engine's kernels add to the checkpoint's on one device (padded MoE experts, bytes)
    kernel_weight_bytes: float = 0.0
    #: the sampler's profiled peak per logit (bytes; :func:`profile_peak_bytes`; 0: not counted)
    sampler_bytes_per_logit: float = 0.0
    #: the configured sequence limit the sampler's profile run samples over (0: ``max_num_seqs``)
    sampler_rows: int = 0
    enable_prefix_caching: bool = False
    iteration_overhead_s: float = 0.0
    num_blocks: int | None = None  #: override the ledger's block count
    scheduler_policy: str | None = None
    #: TensorRT-LLM's batch waiting (module doc): new prompts wait up to this many iterations...
    batch_wait_timeout_iters: int = 0
    #: ...until the iteration's tokens reach this fraction of ``max_num_batched_tokens``
    batch_wait_max_tokens_ratio: float = 0.0
    #: vLLM's ``scheduler_reserve_full_isl`` (module doc): admit a waiting sequence only when
    #: blocks for all its known tokens (prompt + generated) are free, not only its first chunk's
    reserve_full_prompt: bool = False
    #: vLLM's ``watermark`` (module doc): this fraction of the pool's blocks stays free when a
    #: waiting sequence is admitted while others run (0: off)
    kv_watermark: float = 0.0
    #: front-end processes sharing the detokenising and streaming (module doc; vLLM's
    #: ``--api-server-count``)
    api_server_count: int = 1
    #: SGLang's PrefillAdder estimate (module doc): (init, min, decay per decode iteration); None: off
    new_token_ratio: tuple[float, float, float] | None = None
    #: how a data-parallel group's requests pick a rank (:data:`DP_LOAD_BALANCE`)
    dp_load_balance: str = "score"

    def __post_init__(self) -> None:
        rows = self.sampler_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise CostModelError(f"sampler_rows must be a whole number >= 0, got {rows!r}")
        for name in ("max_num_batched_tokens", "max_num_seqs", "block_size"):
            v = getattr(self, name)
            if isinstance(v, numbers.Integral) and not isinstance(v, bool | int):
                v = int(v)  # a numpy integer is a whole number (np.int64(8) was refused as not one)
                object.__setattr__(self, name, v)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise CostModelError(f"{name} must be a positive whole number, got {v!r}")
        if self.max_num_batched_tokens < self.block_size:
            raise CostModelError(
                f"max_num_batched_tokens (--max-num-batched-tokens) {self.max_num_batched_tokens} is "
                f"smaller than one KV block (block_size, --block-size: {self.block_size} tokens): give at "
                f"least {self.block_size}"
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise CostModelError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        for name in (
            "driver_reserved_bytes",
            "non_torch_bytes",
            "cudagraph_bytes_per_layer",
            "kernel_weight_bytes",
            "sampler_bytes_per_logit",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
                raise CostModelError(f"{name} must be a finite number of bytes >= 0, got {v!r}")
        if not (math.isfinite(self.iteration_overhead_s) and self.iteration_overhead_s >= 0):
            raise CostModelError(f"iteration_overhead_s must be >= 0, got {self.iteration_overhead_s}")
        if self.num_blocks is not None and (not isinstance(self.num_blocks, int) or self.num_blocks < 1):
            raise CostModelError(f"num_blocks must be a positive whole number, got {self.num_blocks!r}")
        w = self.batch_wait_timeout_iters
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= 10_000:
            raise CostModelError(f"batch_wait_timeout_iters must be a whole number in [0, 10000], got {w!r}")
        r = self.batch_wait_max_tokens_ratio
        if isinstance(r, bool) or not isinstance(r, int | float) or not (math.isfinite(r) and 0 <= r <= 1):
            raise CostModelError(f"batch_wait_max_tokens_ratio must be in [0, 1], got {r!r}")
        if not isinstance(self.reserve_full_prompt, bool):
            raise CostModelError(
                f"reserve_full_prompt must be true or false, got {self.reserve_full_prompt!r}"
            )
        m = self.kv_watermark
        if isinstance(m, bool) or not isinstance(m, int | float) or not (math.isfinite(m) and 0 <= m < 1):
            raise CostModelError(f"kv_watermark must be in [0, 1), got {m!r}")
        a = self.api_server_count
        if isinstance(a, bool) or not isinstance(a, int) or not 1 <= a <= 1024:
            raise CostModelError(f"api_server_count must be a whole number in [1, 1024], got {a!r}")
        if self.scheduler_policy is not None and self.scheduler_policy not in POLICIES:
            raise CostModelError(
                f"scheduler_policy {self.scheduler_policy!r} not allowed; allowed: {', '.join(POLICIES)}"
            )
        check_new_token_ratio(self.new_token_ratio)
        if self.dp_load_balance not in DP_LOAD_BALANCE:
            raise CostModelError(
                f"dp_load_balance {self.dp_load_balance!r} not allowed; allowed: {', '.join(DP_LOAD_BALANCE)}"
            )


def check_new_token_ratio(ratio: Any) -> None:
    """A one-line error unless ``ratio`` is None or SGLang's ``(init, min, decay)`` with
    ``0 <= min <= init <= 1`` and ``0 <= decay <= init`` (finite numbers).

    Parameters
    ----------
    ratio : tuple of (float, float, float) or None
        :attr:`EngineConfig.new_token_ratio`.

    Raises
    ------
    CostModelError
        When it is not.
    """
    if ratio is None:
        return
    ok = isinstance(ratio, tuple) and len(ratio) == 3
    ok = ok and all(
        not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) for v in ratio
    )
    if not ok or not (0 <= ratio[1] <= ratio[0] <= 1 and 0 <= ratio[2] <= ratio[0]):
        raise CostModelError(
            f"new_token_ratio must be (init, min, decay) with 0 <= min <= init <= 1 and 0 <= decay <= init, got {ratio!r}"
        )


@dataclass(frozen=True, slots=True)
class EngineOverheads:
    """The engine terms of the module doc (seconds; ``kernel_scale`` dimensionless).

    ``cudagraph_sizes`` empty: no padding. ``policy`` None: the :class:`EngineConfig`'s.
    ``basis`` says where the values come from (printed with them).

    Attributes
    ----------
    iteration_s : float
        ``a``: fixed CPU seconds per iteration.
    per_seq_s : float
        ``b``: seconds per scheduled sequence.
    per_token_s : float
        ``c``: seconds per new token of the iteration.
    request_s : float
        ``r``: the fixed part of the request path (s).
    output_token_s : float
        ``d``: detokenisation and streaming per output token (s).
    per_prompt_token_s : float
        ``p``: tokenisation per prompt token (s).
    prefix_lookup_per_token_s : float
        ``h``: the prefix-cache lookup per prompt token, with prefix caching on (s).
    frontend_token_s : float
        ``f``: the shared front end's seconds per output token of any request (module doc).
    kernel_scale : float
        ``s``: the kernels' time multiplier (dimensionless; never below the roofline).
    cudagraph_sizes : tuple of int
        Capture sizes a decode-only batch is padded to (empty: no padding).
    policy : str or None
        The scheduler policy (None: the :class:`EngineConfig`'s).
    basis : str
        Where the values come from, printed with them.
    """

    iteration_s: float = 0.0
    per_seq_s: float = 0.0
    per_token_s: float = 0.0
    request_s: float = 0.0
    output_token_s: float = 0.0
    per_prompt_token_s: float = 0.0
    prefix_lookup_per_token_s: float = 0.0
    frontend_token_s: float = 0.0
    kernel_scale: float = 1.0
    cudagraph_sizes: tuple[int, ...] = ()
    policy: str | None = None
    basis: str = "none"
    _sorted: list[int] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, hi in _TERM_MAX.items():
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and 0 <= v <= hi)
            ):
                raise CostModelError(f"overhead {name} must be in [0, {hi:g}] s, got {v!r}")
        lo, hi = KERNEL_SCALE_RANGE
        k = self.kernel_scale
        if isinstance(k, bool) or not isinstance(k, int | float) or not (math.isfinite(k) and lo <= k <= hi):
            raise CostModelError(f"kernel_scale must be in [{lo:g}, {hi:g}], got {k!r}")
        sizes = self.cudagraph_sizes
        if not isinstance(sizes, tuple) or any(
            isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 10**6 for s in sizes
        ):
            raise CostModelError(
                f"cudagraph_sizes must be a tuple of whole numbers in [1, 1e6], got {sizes!r}"
            )
        if self.policy is not None and self.policy not in POLICIES:
            raise CostModelError(
                f"scheduler policy {self.policy!r} not allowed; allowed: {', '.join(POLICIES)}"
            )
        object.__setattr__(self, "_sorted", sorted(set(sizes)))

    @classmethod
    def for_framework(
        cls, name: str, *, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192
    ) -> EngineOverheads:
        """The overheads of engine profile ``name`` (``NAME[@VERSION]``, :func:`~.profile.get_engine`):
        its CPU and request-path terms (fitted where it says, else assumed), its capture sizes for
        these batch limits and its scheduler policy (:meth:`~.profile.EngineProfile.overheads`),
        through the lookup the registry installed (:func:`install_overheads_lookup`).

        Parameters
        ----------
        name : str
            ``NAME[@VERSION]`` of a registered engine profile.
        max_num_seqs : int
            Sequences per iteration.
        max_num_batched_tokens : int
            Tokens per iteration.

        Returns
        -------
        EngineOverheads

        Raises
        ------
        CostModelError
            When no engine registry is loaded, or ``name`` is unknown.
        """
        if not _OVERHEADS_LOOKUP:  # the package's __init__ loads .profile first: never, short of a bug
            raise CostModelError("no engine registry is loaded (import graphs.serving.engines)")
        return _OVERHEADS_LOOKUP[0](name, max_num_seqs, max_num_batched_tokens)

    @classmethod
    def default(
        cls, framework: str | None, *, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192
    ) -> EngineOverheads:
        """What a run takes without explicit overheads: the framework's (:meth:`for_framework`)
        when its kernels price the steps, none for the bound (``framework`` None).

        Parameters
        ----------
        framework : str or None
            The corpus framework pricing the kernels (None: the bound).
        max_num_seqs : int
            Sequences per iteration.
        max_num_batched_tokens : int
            Tokens per iteration.

        Returns
        -------
        EngineOverheads
        """
        if framework is None:
            return cls()
        return cls.for_framework(
            framework, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
        )

    @property
    def is_zero(self) -> bool:
        """No term at all: the simulator runs exactly as without overheads."""
        return (
            all(getattr(self, t) == 0 for t in _TERM_MAX)
            and self.kernel_scale == 1
            and not self.cudagraph_sizes
            and self.policy is None
        )

    def cpu_s(self, seqs: int, tokens: int) -> float:
        """``a + b n + c T`` (s) for an iteration of ``seqs`` sequences and ``tokens`` new tokens.

        Parameters
        ----------
        seqs : int
            Sequences ``n`` in the iteration.
        tokens : int
            New tokens ``T`` in the iteration.

        Returns
        -------
        float
            Seconds.
        """
        return self.iteration_s + self.per_seq_s * seqs + self.per_token_s * tokens

    def request_path_s(self, prompt_tokens: int, prefix_caching: bool) -> float:
        """The request path before the engine's queue (module doc), for a prompt of ``S`` tokens:

        .. math::

            t_{path} = r + p\\,S + [\\text{prefix caching}]\\,h\\,S

        Parameters
        ----------
        prompt_tokens : int
            ``S``, the prompt's tokens (all of them are tokenised and, with prefix caching on,
            hashed for the lookup, whether or not they hit).
        prefix_caching : bool
            Whether the engine looks the prompt up in its prefix cache.

        Returns
        -------
        float
            Seconds from the client's send until the request waits in the engine's queue.

        >>> EngineOverheads(request_s=0.02, per_prompt_token_s=2e-6).request_path_s(1000, False)
        0.022
        """
        per_token = self.per_prompt_token_s + (self.prefix_lookup_per_token_s if prefix_caching else 0.0)
        return self.request_s + per_token * prompt_tokens

    def padded(self, n: int) -> int:
        """The capture size a decode-only batch of ``n`` runs at: the smallest ``>= n``; ``n``
        itself beyond the largest (no graph: eager, unpadded) or with no sizes.

        Parameters
        ----------
        n : int
            Sequences in the decode-only batch.

        Returns
        -------
        int
            Sequences the step is priced at.
        """
        s = self._sorted
        i = bisect.bisect_left(s, n)
        return s[i] if i < len(s) else n

    def with_terms(self, **terms: Any) -> EngineOverheads:
        """A copy with some terms replaced (a fit's values).

        Parameters
        ----------
        **terms
            Terms of :data:`TERMS` by name, in their units (s, s per token, dimensionless scale).

        Returns
        -------
        EngineOverheads
        """
        return replace(self, **terms)

    def summary(self) -> str:
        """One line: every term used, so that nothing added to the kernels is hidden.

        Returns
        -------
        str
        """
        graphs = (
            f"CUDA-graph padding to {len(self.cudagraph_sizes)} sizes up to {max(self.cudagraph_sizes)}"
            if self.cudagraph_sizes
            else "no CUDA-graph padding"
        )
        return (
            f"engine overheads ({self.basis}): kernels x{self.kernel_scale:.4g}; per iteration "
            f"{self.iteration_s * 1e3:.4g} ms + {self.per_seq_s * 1e6:.4g} us/sequence + "
            f"{self.per_token_s * 1e9:.4g} ns/token; request path {self.request_s * 1e3:.4g} ms"
            f"{self._path_per_token()} on TTFT, admitted at the next iteration boundary; "
            f"{self.output_token_s * 1e6:.4g} us per output token{self._frontend()}; {graphs}; "
            f"scheduler {self.policy or 'as the engine config says'}"
        )

    def _frontend(self) -> str:
        """The shared front end, as the summary says it (none: nothing)."""
        f = self.frontend_token_s
        return f"; a front end shared by all requests, {f * 1e6:.4g} us per output token" if f else ""

    def _path_per_token(self) -> str:
        """The per-prompt-token request-path terms, as the summary says them (none: nothing)."""
        parts = [
            f" + {v * 1e6:.4g} us/prompt token {what}"
            for v, what in (
                (self.per_prompt_token_s, "(tokenisation)"),
                (self.prefix_lookup_per_token_s, "(prefix-cache hashing, with prefix caching on)"),
            )
            if v
        ]
        return "".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The terms, capture sizes, policy and basis as plain values.

        Returns
        -------
        dict
        """
        d = asdict(self)
        d.pop("_sorted", None)
        d["cudagraph_sizes"] = list(self.cudagraph_sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "overheads") -> EngineOverheads:
        """Back from :meth:`to_dict`; an unknown or missing key is an error naming it, except the
        per-prompt-token request-path terms, which a file written before they existed lacks (its
        model had none of them: 0).

        Parameters
        ----------
        d : dict
            What :meth:`to_dict` wrote.
        where : str
            What the data is, named in the error.

        Returns
        -------
        EngineOverheads

        Raises
        ------
        CostModelError
            When ``d`` is not an object, a key is unknown or missing, or a value has the wrong type.
        """
        names = {f.name for f in fields(cls) if f.init}
        d = {**{t: 0.0 for t in _ADDED_LATER if t not in d}, **d} if isinstance(d, dict) else d
        if not isinstance(d, dict):
            raise CostModelError(f"{where} must be an object of {', '.join(sorted(names))}")
        extra = sorted(set(d) - names)
        if extra:
            raise CostModelError(
                f"{where}: unknown key {extra[0][:60]!r}; allowed: {', '.join(sorted(names))}"
            )
        missing = sorted(names - set(d))
        if missing:
            raise CostModelError(f"{where}: missing key {missing[0]!r}")
        sizes = d["cudagraph_sizes"]
        if not isinstance(sizes, list):
            raise CostModelError(f"{where}: cudagraph_sizes must be a list of whole numbers")
        if not isinstance(d["basis"], str):
            raise CostModelError(f"{where}: basis must be a string")
        try:
            return cls(**{**d, "cudagraph_sizes": tuple(sizes), "basis": d["basis"][:300]})
        except CostModelError as exc:  # a term out of its range: name the file and key too
            raise CostModelError(f"{where}: {exc}") from None


#: The engine registry's lookup behind :meth:`EngineOverheads.for_framework`: engine profile
#: ``NAME[@VERSION]`` and the batch limits (``max_num_seqs``, ``max_num_batched_tokens``) to its
#: overheads. The knobs sit below the profiles that build them (:mod:`.profile` imports this
#: module), so the registry installs its lookup here when it loads instead of this module
#: importing it back (which would close an import circle).
_OVERHEADS_LOOKUP: list[Callable[[str, int, int], EngineOverheads]] = []


def install_overheads_lookup(lookup: Callable[[str, int, int], EngineOverheads]) -> None:
    """Install the engine registry's ``(name, max_num_seqs, max_num_batched_tokens) -> overheads``
    lookup (done once, by :mod:`.profile`, as it loads).

    Parameters
    ----------
    lookup : callable
        ``lookup(name, max_num_seqs, max_num_batched_tokens)``: the overheads of engine profile
        ``name`` at those batch limits.
    """
    _OVERHEADS_LOOKUP[:] = [lookup]
