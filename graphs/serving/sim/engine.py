"""One serving replica's iteration-level scheduler, modelled on vLLM v1 (knobs named as it names them).

Each iteration (``step``) builds one batch under a token budget ``max_num_batched_tokens`` and
at most ``max_num_seqs`` sequences:

1. running sequences first, in admission order: a decoding sequence takes 1 token, a sequence
   still prefilling takes ``min(remaining prompt, budget left)`` (chunked prefill); each needs
   KV-cache blocks of ``block_size`` tokens for what it will have computed. When the free blocks
   run out, the most recently admitted running sequence is preempted by recompute (its blocks
   freed, its computed tokens forgotten, back to the front of the waiting queue) until the
   sequence fits or is itself the one preempted;
2. then waiting sequences in arrival order, while there is budget, a free sequence slot and
   blocks for their first chunk (none are admitted in an iteration that preempted). With
   ``reserve_full_prompt`` (vLLM's ``scheduler_reserve_full_isl``) the blocks of all a sequence's
   known tokens (prompt + generated) must be free, not only its first chunk's; with
   ``kv_watermark`` ``w`` a further ``floor(w n)`` of the pool's ``n`` blocks must stay free
   when another sequence is running (``KVCacheManager.allocate_slots``,
   ``vllm/v1/core/kv_cache_manager.py``: ``full_sequence_must_fit``, ``watermark_blocks``).

SGLang admits otherwise (``new_token_ratio`` ``(init, min, decay)``: ``PrefillAdder`` in
``python/sglang/srt/managers/schedule_policy.py``, SGLang 0.4-0.5): the running decodes keep room
for a share ``r`` of their remaining outputs, and a waiting sequence of ``e`` tokens still to
compute (its prompt, and what it had generated when it was retracted) and ``o`` still to
generate is admitted only while

.. math::

    e + \\min(o, 4096) + 1 < F - r \\sum_{running} \\min(o_i, 4096) - \\sum_{admitted} (e_j + \\min(o_j, 4096) + 1)

with ``F`` the free (and evictable) tokens of the pool when the iteration's admissions begin and
the last sum over those already admitted in it (a sequence admitted for a first chunk of ``e_j``
tokens counts that chunk and one page, no output: ``add_one_req``, ``_update_prefill_budget``;
4,096 is ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``, 1 the page of one token). ``r`` starts at
``init``, falls by ``decay`` each iteration that decodes, down to ``min``; an iteration that
preempts (SGLang's ``retract_decode``) sets it to ``min(1, (G + 20 n) / (O + 1))`` over the ``n``
sequences still running, ``G`` the tokens they have generated and ``O`` their whole outputs
(``SGLANG_RETRACT_DECODE_STEPS`` 20). SGLang retracts the running request with the fewest
generated tokens; the latest admitted, preempted here, is nearly always that one. A sequence
that would find no room with nothing running is admitted (SGLang clips a request's
``max_new_tokens`` to what its pool holds: ``max_req_len``), so no request waits forever. Decoding
sequences are then not advanced in closed form (:mod:`graphs.serving.sim.skipping`: its sums
carry no per-sequence clip).

With ``enable_prefix_caching`` a preempted sequence's full blocks stay cached (vLLM V1 frees a
request's blocks into the free queue with their hashes, the tail first: ``KVCacheManager.free``):
they count as free, are evicted block by block from its tail, least recently freed first, when
blocks run out, and when it is admitted again it starts after those still cached, so only its
evicted tail is recomputed (``get_computed_blocks``). Under memory pressure the running
sequences then hold at most ``n`` blocks, and a sequence of ``t`` known tokens needs
``ceil(t / block_size)`` of them, so at most ``floor(n / ceil(t_min / block_size))`` run at once.

TensorRT-LLM's batch waiting (``batch_wait_timeout_iters`` ``w``, ``batch_wait_max_tokens_ratio``
``f``; both 0, off, by default) holds new prompts back to prefill them together: in an iteration
that has both decoding sequences and prompts to admit, the prompts are admitted only when the
iteration's tokens (those already scheduled plus the prompts that would be admitted) reach
``f * max_num_batched_tokens``, or when ``w`` such iterations have already held them; otherwise
the iteration runs the decodes alone and counts one more wait. With either knob 0 nothing
waits (``PyExecutor._waiting_requests`` and ``_schedule`` in ``tensorrt_llm/_torch/pyexecutor/
py_executor.py``: ``stop_waiting = iters >= w or tokens >= f * max_num_tokens``, checked only
when context and generation requests are both scheduled; the prompts that would be admitted are
counted here under the token budget and the sequence limit, their blocks not checked).

That is vLLM's ``recompute`` policy. Under TensorRT-LLM's ``guaranteed_no_evict``
(:data:`graphs.serving.engines.POLICIES`) a waiting sequence is admitted only when the blocks
of its prompt plus its whole output can be reserved at once; a running sequence then never
needs a block it does not hold, so nothing is ever preempted.

The waiting queue's outstanding tokens are kept as a running sum (every waiting sequence has
``prompt + output`` tokens still to process: it has computed nothing), so neither an iteration
nor a routing decision costs time that grows with the queue.

With ``enable_prefix_caching`` the full blocks of a request's shared prefix (``prefix_id``,
``prefix`` tokens: a system prompt, a conversation's history) stay cached after the first
sequence computes them: a later sequence with the same prefix references them and starts its
prefill after them (the last prompt token is always computed), and unreferenced cached prefixes
are evicted, least recently used first, only when blocks run out (vLLM's automatic prefix
caching, at the granularity of one shared prefix per request). A finished request marked
``retain`` (a conversation's turn) leaves the full blocks of its prompt and answer cached as its
prefix's entry, for the next turn.

A sequence emits a token at the end of every iteration after which all its known tokens (prompt
plus generated) have KV; it finishes with its last output token and frees its blocks. A
recomputed sequence re-prefills its prompt and what it had generated. The iteration lasts the
mixed-batch step cost (:class:`graphs.serving.step.mixed.MixedStep`: the per-kernel rooflines of that
exact batch; or :class:`graphs.serving.pricing.predictor.PredictedStep`: its kernels priced by a
predictor, never below those rooflines) times the overheads' ``kernel_scale`` (floored at the
iteration's roofline: :func:`graphs.serving.pricing.overheads.scaled_kernels_s`), plus a fixed
per-iteration overhead and the CPU terms of :class:`graphs.serving.pricing.overheads.EngineOverheads`
(a decode-only batch priced at its CUDA-graph capture size).

The number of KV blocks comes from the capacity ledger (:func:`kv_blocks`: vLLM's rule; an engine
profile with another rule sets ``num_blocks`` itself, :mod:`graphs.serving.engines`).
:class:`EngineConfig` lives in the engines wing (:mod:`graphs.serving.engines.knobs`) and is
re-exported here.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.text import fmt_si

from ..engines import EngineConfig, EngineOverheads, EngineProfile, KVPool
from ..engines.knobs import pool_left_words, profile_peak_bytes, sampler_words
from ..pricing.overheads import scaled_kernels_s
from .skipping import LazyDecodes, window_ends

if TYPE_CHECKING:
    from ..pricing.protocols import IterationStep
    from .kv_tiers import KVTiers
    from .specdec_sim import Speculator
from .requests import Request

__all__ = [
    "CLIP_MAX_NEW_TOKENS",
    "RETRACT_DECODE_STEPS",
    "EngineConfig",
    "IterationLog",
    "Sequence",
    "Replica",
    "kv_blocks",
    "state_sequences",
    "UNBOUND_BLOCKS",
    "kv_pool",
    "pool_memory",
    "pool_memory_note",
    "profile_engine",
    "moe_kernel_padding",
]

#: SGLang's clip of a request's remaining output in its admission estimate (tokens;
#: ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``, ``python/sglang/srt/managers/schedule_policy.py``)
CLIP_MAX_NEW_TOKENS = 4096
#: the decode steps of room per request SGLang's ``retract_decode`` re-estimates its ratio with
#: (``SGLANG_RETRACT_DECODE_STEPS``, ``python/sglang/srt/environ.py``; ``global_config`` in 0.4)
RETRACT_DECODE_STEPS = 20

#: a batch, its length, and its decodes' count, summed KV length and contexts (None: not
#: windowed), and its chunks (new tokens, cached): what iteration_time reads off the batch
_Planned = tuple[list[tuple["Sequence", int]], int, int, float, list[float] | None, list[tuple[float, float]]]


def kv_blocks(
    ledger: Any, capacity_bytes: float, cfg: EngineConfig, layers: int | None = None, vocab_size: int | None = None
) -> int:
    """KV-cache blocks on one device: ``floor((u (C - d) - W - P - R - G) / (block_size k))``
    with ``u`` the memory utilisation, ``C`` the capacity, ``d`` what the driver's total exceeds
    CUDA's ``mem_get_info`` total by, ``W`` the weights (and what the engine's kernels pad them
    by, ``cfg.kernel_weight_bytes``), ``P`` the profiled activation peak: ``a N``, ``a`` live
    activation bytes per token at the full token budget ``N``, or the sampler's dummy run over
    ``min(N, max_num_seqs)`` rows of the vocabulary where the engine counts it and it is larger
    (:func:`~graphs.serving.engines.knobs.profile_peak_bytes`, ``cfg.sampler_bytes_per_logit``), ``R`` the memory the engine's profile counts outside PyTorch,
    ``G = L g`` its CUDA graphs' estimate (``g`` per decoder layer, ``L`` layers) and ``k`` KV
    bytes per token (vLLM profiles the same way: weights, a peak-activation forward pass, the
    non-torch increase and, from v0.21.0, the CUDA graphs first, the rest of ``u`` x its total to
    KV blocks; ``d``, ``R`` and ``g`` are ``cfg``'s, 0 unless an engine profile sets them:
    :mod:`graphs.serving.engines.vllm`).

    Parameters
    ----------
    ledger : MemoryLedger
        One device's decode ledger (weights, activation and KV bytes per token).
    capacity_bytes : float
        The device's memory ``C`` (bytes).
    cfg : EngineConfig
        The engine's knobs: ``gpu_memory_utilization`` ``u``, ``max_num_batched_tokens`` ``N``,
        ``block_size`` (tokens per block), ``driver_reserved_bytes`` ``d``, ``non_torch_bytes`` ``R``,
        ``cudagraph_bytes_per_layer`` ``g``.
    layers : int, optional
        The model's decoder layers ``L`` (None: the ledger's ``layers``, a :class:`KVPool`'s);
        needed only when ``g`` > 0.
    vocab_size : int, optional
        The model's vocabulary (None: the ledger's ``vocab_size``, a :class:`KVPool`'s; 0 or
        none: the sampler's run not counted).

    Returns
    -------
    int
        Blocks (at least 1).

    Raises
    ------
    CostModelError
        When no block fits, or ``g`` > 0 and no layer count is known.
    """
    free, k, why = _pool_free(ledger, capacity_bytes, cfg, layers, vocab_size)
    if k <= 0 and free > 0:
        # nothing cached per token (a pure state-space model): tokens never fill the pool, the
        # sequences' recurrent state does (state_sequences caps them); the blocks do not bind
        return UNBOUND_BLOCKS
    n = math.floor(free / (cfg.block_size * k)) if k > 0 else 0
    if n < 1:
        raise CostModelError(f"no room for a KV block: {why}")
    return n


#: the blocks of a pool whose tokens hold no KV (a pure state-space model): more than any run takes
UNBOUND_BLOCKS = 2**40


def state_sequences(
    ledger: Any, capacity_bytes: float, cfg: EngineConfig, layers: int | None = None, vocab_size: int | None = None
) -> int | None:
    """The sequences whose recurrent state fits one device's pool when its tokens hold no KV (a
    pure state-space model: :func:`kv_blocks`' free memory over ``state_bytes_per_sequence``,
    as vLLM allots each running request one state slot); None when the model caches per token.

    Parameters
    ----------
    ledger : MemoryLedger
        One device's decode ledger.
    capacity_bytes : float
        The device's memory (bytes).
    cfg : EngineConfig
        The engine's knobs.
    layers, vocab_size : int, optional
        As :func:`kv_blocks`.

    Returns
    -------
    int or None
        Sequences (at least 1).

    Raises
    ------
    CostModelError
        When not one sequence's state fits.
    """
    free, k, why = _pool_free(ledger, capacity_bytes, cfg, layers, vocab_size)
    state = as_float(getattr(ledger, "state_bytes_per_sequence", 0) or 0)
    if k > 0 or state <= 0:
        return None
    n = math.floor(free / state)
    if n < 1:
        raise CostModelError(f"no room for one sequence's recurrent state ({state / 1e6:.1f} MB): {why}")
    return n


def _pool_free(
    ledger: Any, capacity_bytes: float, cfg: EngineConfig, layers: int | None, vocab_size: int | None
) -> tuple[float, float, str]:
    """:func:`kv_blocks`' free bytes, KV bytes per token and, in words, what took the memory."""
    w = as_float(ledger.weights_bytes) + cfg.kernel_weight_bytes  # padded by its kernels
    vocab = int(getattr(ledger, "vocab_size", 0) or 0) if vocab_size is None else int(vocab_size)
    a = as_float(ledger.activation_bytes_per_token)
    peak = profile_peak_bytes(
        a,
        cfg.max_num_batched_tokens,
        cfg.sampler_bytes_per_logit,
        cfg.sampler_rows or cfg.max_num_seqs,
        vocab,
    )
    k = as_float(ledger.kv_bytes_per_token)
    total = capacity_bytes - cfg.driver_reserved_bytes
    r = cfg.non_torch_bytes
    g = 0.0
    if cfg.cudagraph_bytes_per_layer:
        n_layers = getattr(ledger, "layers", None) if layers is None else layers
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise CostModelError(
                f"the engine's CUDA-graph estimate is per decoder layer: layers must be a whole number >= 1, "
                f"got {n_layers!r}"
            )
        g = cfg.cudagraph_bytes_per_layer * n_layers
    free = cfg.gpu_memory_utilization * total - w - peak - r - g
    other = f", non-torch memory ({r / 1e9:.2f} GB)" if r else ""
    other += f", CUDA graphs ({g / 1e9:.2f} GB)" if g else ""
    which, remedy = sampler_words(peak, a * cfg.max_num_batched_tokens)
    of = (
        f"{total / 1e9:.1f} GB"
        if not cfg.driver_reserved_bytes
        else f"{total / 1e9:.1f} GB (the device's {fmt_si(capacity_bytes, 'B')} less the driver's "
        f"{fmt_si(cfg.driver_reserved_bytes, 'B')})"
    )
    why = (
        f"{cfg.gpu_memory_utilization:.0%} of {of} minus "
        f"weights ({w / 1e9:.1f} GB){other} and activations ({peak / 1e9:.2f} GB{which}) "
        f"leaves {pool_left_words(free)} (more devices, tp, or a smaller token budget{remedy})"
    )
    return free, k, why


def pool_memory(device: Any) -> float:
    """The memory one device's KV pool is sized from (bytes): what the driver reports
    (:meth:`costmodel.hardware.Hardware.reported_memory`; nvidia-smi's 81,559 MiB = 85.52e9 B on
    an H100 SXM, not the vendor's "80 GB"), since vLLM's ``gpu_memory_utilization`` and SGLang's
    ``mem_fraction_static`` are fractions of it (vLLM V1 ``gpu_worker.py``: ``requested_memory =
    total_memory * gpu_memory_utilization``, ``total_memory`` from ``torch.cuda.mem_get_info``;
    SGLang ``server_args.py`` reads ``gpu_mem`` from ``nvidia-smi --query-gpu=memory.total``).
    Where the catalog has no sourced figure the vendor capacity stands in (the simulation report
    says so: :func:`pool_memory_note`).

    Parameters
    ----------
    device : Hardware or str
        The device.

    Returns
    -------
    float
        Bytes.
    """
    from costmodel.hardware import get_device  # the catalog only when a pool is sized

    return as_float(get_device(device).reported_memory()[0])


def pool_memory_note(device: Any) -> str:
    """What the simulation report says, once, when the device's KV pool is sized from its vendor
    capacity (no sourced driver-reported memory: :func:`pool_memory`); empty otherwise.

    Parameters
    ----------
    device : Hardware or str
        The device.

    Returns
    -------
    str
    """
    from costmodel.hardware import get_device

    hw = get_device(device)
    if hw.reported_memory_bytes is not None:
        return ""
    return f"KV pool sized from {hw.reported_memory()[1]}"


def kv_pool(config: Any, device: Any, tp: int = 1, dp: int = 1) -> KVPool:
    """What one device's KV pool is sized from, for ``config`` (a model, its name or a
    :class:`~graphs.serving.step.workload.Workload`) served with ``tp`` devices: the device's capacity
    and the decode ledger's weights, activation and KV bytes per token (the ledger the simulator
    sizes :func:`kv_blocks` from). With ``dp`` data-parallel ranks the routed experts are spread
    over all ``dp x tp`` devices (:func:`graphs.serving.analysis.parallel.dp_weights_saved`).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.
    dp : int
        Data-parallel ranks sharing the routed experts.

    Returns
    -------
    KVPool
        Capacity, weights (bytes), activation and KV bytes per token of one device.
    """
    # imported here, when a pool is sized: the scheduler alone (and `--engine list`) needs
    # neither the catalog nor the symbolic ledger, which import sympy
    from costmodel.hardware import get_device

    from ..analysis.parallel import dp_weights_saved
    from ..step.ledger_fit import build_ledger
    from ..step.workload import as_workload

    w = as_workload(config)
    led = build_ledger(w, "decode", 1, tp, None, None)
    saved = dp_weights_saved(w, tp, dp) if dp > 1 else 0.0
    hw = get_device(device)
    return KVPool(
        capacity_bytes=pool_memory(hw),
        vendor_bytes=as_float(hw.capacity()),
        weights_bytes=as_float(led.weights_bytes) - saved,
        activation_bytes_per_token=as_float(led.activation_bytes_per_token),
        kv_bytes_per_token=as_float(led.kv_bytes_per_token),
        layers=int(w.config.num_hidden_layers),
        vocab_size=int(getattr(w.config, "vocab_size", 0) or 0),
    )


def profile_engine(
    profile: EngineProfile,
    config: Any,
    device: Any,
    *,
    tp: int = 1,
    dp: int = 1,
    request_tokens: int | None = None,
    max_running: int | None = None,
    enable_prefix_caching: bool | None = None,
    iteration_overhead_s: float = 0.0,
    num_blocks: int | None = None,
    expert_parallel: bool = False,
) -> EngineConfig:
    """The :class:`EngineConfig` an engine profile runs ``config`` on ``device`` with (its KV
    pool sized by its own rule from :func:`kv_pool`, the no-evict cap where its scheduler
    reserves blocks: :meth:`graphs.serving.engines.EngineProfile.engine_config`, whose
    parameters these are), with the defaults the engine picks for ``device``
    (:meth:`~graphs.serving.engines.EngineProfile.for_device`). What ``costmodel simulate
    --engine`` and the accuracy pages build; ``dp``: data-parallel ranks sharing the experts
    (:mod:`graphs.serving.sim.data_parallel`).

    Parameters
    ----------
    profile : EngineProfile
        The engine profile (:func:`graphs.serving.engines.get_engine`).
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp : int
        Tensor-parallel degree.
    dp : int
        Data-parallel ranks sharing the routed experts.
    request_tokens : int, optional
        Prompt + output tokens of every request, when all are equal (the no-evict cap).
    max_running : int, optional
        At most this many requests exist at once.
    enable_prefix_caching : bool, optional
        Override the profile's default.
    iteration_overhead_s : float
        CPU seconds added to every iteration (s).
    num_blocks : int, optional
        KV blocks, replacing the profile's sizing rule.
    expert_parallel : bool
        Whole experts spread over the ``dp x tp`` group (else each expert split by width): where
        its MoE kernel's padded weights fall (:func:`moe_kernel_padding`).

    Returns
    -------
    EngineConfig

    Raises
    ------
    CostModelError
        When no KV block fits or a knob is out of range.
    """
    from costmodel.hardware import get_device  # the catalog only when a profile meets a device

    hw = get_device(device)
    profile = profile.for_device(hw, tp, dp).for_data_parallel(dp)
    pool = (
        kv_pool(config, device, tp, dp) if profile.kv_rule != "device" or profile.policy != "recompute" else None
    )
    _, padded = moe_kernel_padding(profile, config, hw, tp=tp, dp=dp, expert_parallel=expert_parallel)
    return profile.engine_config(
        pool,
        request_tokens=request_tokens,
        max_running=max_running,
        enable_prefix_caching=enable_prefix_caching,
        iteration_overhead_s=iteration_overhead_s,
        num_blocks=num_blocks,
        tp=tp,
        kernel_weight_bytes=padded,
    )


def moe_kernel_padding(
    profile: EngineProfile, config: Any, device: Any, *, tp: int = 1, dp: int = 1, expert_parallel: bool = False
) -> tuple[Any, float]:
    """The fused-MoE kernel ``profile`` runs for ``config``'s routed experts on ``device``
    (:meth:`~graphs.serving.engines.EngineProfile.moe_kernel`: vLLM 0.11's Marlin for MXFP4
    experts on Hopper) and the bytes its padded weights add on one device
    (:func:`graphs.serving.engines.moe_kernels.padded_expert_bytes`), the experts split as the
    simulator prices them (:class:`graphs.serving.sim.data_parallel.ExpertStage`, as vLLM's
    FusedMoE splits them): with ``expert_parallel`` the ``ceil(E / (dp tp))`` whole experts of the
    busiest device, else every expert at ``I / (dp tp)`` wide. ``(None, 0.0)`` for a dense model
    or where no rule applies.

    Parameters
    ----------
    profile : EngineProfile
        The engine.
    config : ModelConfig, str or Workload
        The model.
    device : Hardware or str
        The device.
    tp, dp : int
        Tensor-parallel degree, and data-parallel ranks sharing the experts.
    expert_parallel : bool
        Whole experts spread over the ``dp x tp`` devices (else split by width).

    Returns
    -------
    tuple of (MoEKernelRule or None, float)
        The rule, and the bytes (0.0 without one).
    """
    from costmodel.dtypes import get_dtype
    from costmodel.hardware import get_device

    from ..engines.moe_kernels import padded_expert_bytes
    from ..pricing.predict import moe_dtype_key
    from ..step.workload import as_workload

    cfg = as_workload(config).config
    moe = cfg.moe
    if moe is None or not profile.moe_kernels:
        return None, 0.0
    key = moe_dtype_key(cfg.matmul_dtype or cfg.activation_dtype, cfg.expert_weight_dtype)
    hw = get_device(device)
    rule = profile.moe_kernel(key, hw.architecture, hw.name) if key is not None else None
    if rule is None:
        return None, 0.0
    inter, experts, group = int(moe.moe_intermediate_size), int(moe.num_experts), dp * tp
    split = (
        dict(inter_rank=inter, experts_rank=-(-experts // group))
        if expert_parallel
        else dict(inter_rank=max(1, inter // group), experts_rank=experts)
    )
    padded = padded_expert_bytes(
        rule,
        hidden=int(cfg.hidden_size),
        moe_layers=int(cfg.n_moe_layers),
        weight_bits=float(get_dtype(cfg.expert_weight_dtype).bits),
        gated=cfg.gated_mlp,
        bias_bytes=float(get_dtype(cfg.dtype).bytes) if cfg.mlp_bias else 0.0,
        **split,
    )
    return rule, padded


@dataclass(eq=False, slots=True)  # slots: the scheduler reads its fields ~10^8 times a long run
class Sequence:
    """A request being served: KV tokens computed, tokens generated, blocks held, timestamps."""

    req: Request
    computed: int = 0
    generated: int = 0
    blocks: int = 0
    first_token_s: float | None = None
    finish_s: float | None = None
    queued_s: float | None = None  #: reached the engine's queue (its send + the request path)
    scheduled_s: float | None = None  #: its first iteration began (an iteration boundary)
    preemptions: int = 0
    replica: int = -1
    stop_after_prefill: bool = False  #: on a disaggregated prefill instance: hand over after the first token
    prefix_ref: bool = False  #: holds a reference to its shared prefix's cached blocks

    @property
    def known(self) -> int:
        """Tokens whose KV must exist before the next token is sampled (prompt + generated)."""
        return self.req.prompt + self.generated

    @property
    def remaining(self) -> int:
        """Tokens still to process or generate (for least-outstanding routing)."""
        return self.known - self.computed + self.req.output - self.generated


class IterationLog:
    """A replica's per-iteration records ``(t, batch, waiting, running, kv used)``, kept compact.

    Records are appended as tuples (the loop's cheapest append) and folded into float64 blocks of
    :attr:`CHUNK` rows as they accumulate: 40 bytes a record instead of a tuple's and its floats'
    (about 136), which were a long light-load run's largest memory (4.4 million iterations at
    30,000 requests, 1 request/s). The values are the records' as float64, in order; :meth:`array`
    is what the run's timeline is built from.
    """

    #: records folded into one float64 block (the fold's ``np.array`` costs what the run's final
    #: conversion of the same records did)
    CHUNK = 1 << 16
    __slots__ = ("_blocks", "rows")

    def __init__(self) -> None:
        self.rows: list[tuple[float, int, int, int, float]] = []  #: records not yet folded
        self._blocks: list[Any] = []  #: float64 arrays of shape (CHUNK, 5)

    def append(self, record: tuple[float, int, int, int, float]) -> None:
        """Add one record.

        Parameters
        ----------
        record : tuple
            ``(t, batch, waiting, running, kv used)``.
        """
        self.rows.append(record)
        if len(self.rows) >= self.CHUNK:
            self.fold()

    def extend(self, records: Iterable[tuple[float, int, int, int, float]]) -> None:
        """Add records in order.

        Parameters
        ----------
        records : iterable of tuple
            Each ``(t, batch, waiting, running, kv used)``.
        """
        self.rows.extend(records)
        if len(self.rows) >= self.CHUNK:
            self.fold()

    def fold(self) -> None:
        """The pending records into a float64 block."""
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        if self.rows:
            self._blocks.append(np.array(self.rows, dtype=float).reshape(-1, 5))
            self.rows = []

    def last(self) -> tuple[float, ...] | None:
        """The latest record (None before the first).

        Returns
        -------
        tuple or None
            Its five values (floats once folded).
        """
        if self.rows:
            return self.rows[-1]
        return tuple(float(x) for x in self._blocks[-1][-1]) if self._blocks else None

    def array(self) -> Any:
        """Every record in order, as a float64 array of shape (records, 5).

        Returns
        -------
        numpy.ndarray
        """
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        tail = np.array(self.rows, dtype=float).reshape(-1, 5)
        return np.concatenate([*self._blocks, tail]) if self._blocks else tail

    def __len__(self) -> int:
        return len(self.rows) + sum(len(b) for b in self._blocks)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IterationLog):
            return NotImplemented
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        return bool(np.array_equal(self.array(), other.array()))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


class Replica:
    """One replica's waiting queue, running batch, KV blocks and clock (module doc).

    With ``skip`` its steadily decoding sequences are kept in closed form between the iterations
    that change them (:mod:`graphs.serving.sim.skipping`; not when speculating or for a model with
    sliding windows): an iteration then costs its other sequences, and :meth:`batch_len` counts
    the batch :meth:`schedule` returns together with them. The same batches, times and records
    as without it (the per-sequence loop, the reference).
    """

    def __init__(
        self,
        step: IterationStep,
        num_blocks: int,
        cfg: EngineConfig,
        index: int = 0,
        spec: Speculator | None = None,
        tiers: KVTiers | None = None,
        overheads: EngineOverheads | None = None,
        skip: bool = False,
    ) -> None:
        self.step_cost = step
        self.spec = spec  #: speculative decoding: decodes verify drafted tokens (graphs.serving.sim.specdec_sim)
        self.tiers = tiers  #: host memory / SSD below the GPU's prefix cache (graphs.serving.sim.kv_tiers)
        self.cfg = cfg
        self.overheads = overheads or EngineOverheads()
        #: the policy in force: the engine config's, else the overheads', else vLLM's
        self.policy = cfg.scheduler_policy or self.overheads.policy or "recompute"
        self.no_evict = self.policy == "guaranteed_no_evict"
        self._waiting_tokens = 0  #: sum of prompt + output over the waiting queue
        self.num_blocks = num_blocks
        self.free_blocks = num_blocks
        self.index = index
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.busy_until: float | None = None  #: end of the iteration in flight
        self.preemptions = 0
        self.iterations = 0
        self.samples = IterationLog()  #: (t, batch, waiting, running, kv used) per iteration
        #: cached shared prefixes: id -> [blocks, tokens, references, last use]
        self.prefixes: dict[int, list[int]] = {}
        self.prefix_hits = 0
        self.emitted = 0  #: output tokens emitted so far
        self._tick = 0
        #: what the last schedule() read off its batch for iteration_time (plain decoding only)
        self._planned: _Planned | None = None
        #: seconds iterating, and the part attributed to prefill chunks (:mod:`graphs.serving.planning.cost`)
        self.busy_s = 0.0
        self.prefill_s = 0.0
        self.floored = 0  #: iterations whose scaled kernels the roofline floor bound
        self._phase_step = getattr(step, "bound", step)  #: the roofline step that splits a mixed iteration
        self._batch_wait = cfg.batch_wait_timeout_iters > 0 and cfg.batch_wait_max_tokens_ratio > 0
        self._waited = 0  #: iterations new prompts have been held back (batch waiting)
        #: vLLM's admission rules (module doc): all known tokens' blocks, and the watermark
        self._full_prompt = cfg.reserve_full_prompt and not self.no_evict
        self._watermark = math.floor(cfg.kv_watermark * num_blocks)
        #: preempted sequences' cached full blocks (module doc): seq -> [blocks, tokens before
        #: them (its shared prefix's), tick freed]; and their sum, counted as evictable
        self._resume: dict[Sequence, list[int]] = {}
        self._resume_blocks = 0
        #: skip: steady decodes advanced in closed form (:mod:`graphs.serving.sim.skipping`); the
        #: running sequences outside it, in running order; each running sequence's join stamp
        #: SGLang's admission estimate (module doc): its current ratio; None: off
        self._ratio = cfg.new_token_ratio[0] if cfg.new_token_ratio is not None else None
        skip = skip and self._ratio is None  # the estimate clips each sequence: no closed form
        self._lazy: LazyDecodes[Sequence] | None = LazyDecodes(cfg.block_size) if skip and spec is None and not step.windowed else None
        self._active: list[Sequence] = []
        self._stamp: dict[Sequence, int] = {}
        self._stamps = 0
        self._lazy_rows = 0  #: members of the set in the batch schedule() returned last

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.cfg.block_size)

    def fits_ever(self, seq: Sequence) -> bool:
        """Whether ``seq``'s whole prompt and output fit the KV pool when it is alone.

        Parameters
        ----------
        seq : Sequence
            A request's sequence.

        Returns
        -------
        bool
        """
        return self._blocks_for(seq.req.prompt + seq.req.output) <= self.num_blocks

    def add(self, seq: Sequence) -> None:
        """Queue ``seq`` on this replica (waiting for admission).

        Parameters
        ----------
        seq : Sequence
            A request's sequence.
        """
        seq.replica = self.index
        self.waiting.append(seq)
        self._waiting_tokens += seq.req.prompt + seq.req.output

    def admission_blocks(self, seq: Sequence, tokens: int) -> int:
        """Blocks ``seq`` must hold to be admitted with KV for ``tokens`` tokens: those tokens'
        under ``recompute`` (all its known tokens' with ``reserve_full_prompt``), its prompt plus
        whole output's under ``guaranteed_no_evict``.

        Parameters
        ----------
        seq : Sequence
            The sequence to admit.
        tokens : int
            Tokens it needs KV for now.

        Returns
        -------
        int
            KV blocks.
        """
        if self.no_evict:
            return self._blocks_for(seq.req.prompt + seq.req.output)
        return self._blocks_for(max(tokens, seq.known) if self._full_prompt else tokens)

    @property
    def outstanding(self) -> int:
        """Tokens still to process or generate: the running ones' plus the waiting queue's
        running sum (module doc: O(running), not O(queue))."""
        if self._lazy is not None:
            return sum(s.remaining for s in self._active) + self._lazy.outstanding() + self._waiting_tokens
        return sum(s.remaining for s in self.running) + self._waiting_tokens

    def join(self, s: Sequence) -> None:
        """Append ``s`` to the running sequences (admitted, or arrived with its KV).

        Parameters
        ----------
        s : Sequence
            The sequence.
        """
        self.running.append(s)
        if self._lazy is not None:
            self._active.append(s)
            self._stamp[s] = self._stamps
            self._stamps += 1

    def batch_len(self, batch: list[tuple[Sequence, int]]) -> int:
        """Sequences in ``batch`` (the last :meth:`schedule`'s), the steady decodes it leaves out included.

        Parameters
        ----------
        batch : list of (Sequence, int)
            The last :meth:`schedule`'s batch.

        Returns
        -------
        int
            Sequences.
        """
        return len(batch) + self._lazy_rows

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    # ---------------------------------------------------------------- blocks and shared prefixes
    def _owned(self, s: Sequence) -> int:
        return s.blocks + (self._prefix_entry(s)[0] if s.prefix_ref else 0)

    def _prefix_entry(self, s: Sequence) -> list[int]:
        """The shared-prefix entry a sequence references (only one with a prefix_id takes a reference)."""
        pid = s.req.prefix_id
        assert pid is not None
        return self.prefixes[pid]

    def _evictable(self) -> int:
        """Blocks of unreferenced cached prefixes and of preempted sequences (a scan: asked only
        when the free blocks fall short)."""
        return sum(e[0] for e in self.prefixes.values() if e[2] == 0) + self._resume_blocks

    def _take(self, need: int) -> None:
        """Allocate ``need`` blocks, evicting unreferenced cached prefixes (least recently used
        first) and preempted sequences' cached blocks (from their tail, as few as needed) when the
        free ones do not suffice; the caller checked that eviction suffices."""
        while need > self.free_blocks:
            if self._resume:
                seq, r = min(self._resume.items(), key=lambda kv: kv[1][2])
                older = [e[3] for e in self.prefixes.values() if e[2] == 0 and e[3] < r[2]]
                if not older:  # the least recently freed: its tail blocks go first
                    k = min(r[0], need - self.free_blocks)
                    r[0] -= k
                    self._resume_blocks -= k
                    self.free_blocks += k
                    if r[0] == 0:
                        del self._resume[seq]
                    continue
            pid = min((k for k, e in self.prefixes.items() if e[2] == 0), key=lambda k: self.prefixes[k][3])
            blocks = self.prefixes.pop(pid)[0]
            self.free_blocks += blocks
            if self.tiers is not None:  # moved down a tier, not dropped
                self.tiers.demote(pid, blocks)
        self.free_blocks -= need

    def _release(self, s: Sequence) -> None:
        self.free_blocks += s.blocks
        s.blocks = 0
        if s.prefix_ref:
            e = self._prefix_entry(s)
            e[2] -= 1
            e[3] = self._tick
            s.prefix_ref = False

    def _register_prefix(self, s: Sequence) -> None:
        """Once a sequence has computed its shared prefix's full blocks, they become a cached
        prefix (its blocks move from the sequence to the cache, which it references)."""
        pid = s.req.prefix_id
        full = s.req.prefix // self.cfg.block_size
        if pid is None or s.prefix_ref or pid in self.prefixes or full == 0:
            return
        if s.computed >= full * self.cfg.block_size and s.blocks >= full:
            self.prefixes[pid] = [full, full * self.cfg.block_size, 1, self._tick]
            s.blocks -= full
            s.prefix_ref = True

    def _retain(self, s: Sequence) -> None:
        """A finished turn whose conversation goes on (``req.retain``): the full blocks of all it
        computed (prompt and answer) become its prefix's cached entry, for the next turn to start
        after (vLLM keeps a finished request's full blocks cached the same way); an entry another
        running sequence references is left as it is."""
        pid = s.req.prefix_id
        e = self.prefixes.get(pid) if pid is not None else None
        if pid is None or (e is not None and not (s.prefix_ref and e[2] == 1)):
            return
        own = s.computed // self.cfg.block_size - (e[0] if e else 0)  # its full blocks past the entry
        if own <= 0:
            return
        if e is None:
            e = self.prefixes[pid] = [0, 0, 0, self._tick]
        e[0] += own
        e[1] = e[0] * self.cfg.block_size
        s.blocks -= own

    def _promote(self, pid: int) -> bool:
        """A prefix held only in a lower tier is loaded back into GPU blocks, when they can be
        found and the load pays (its transfer time is charged to this iteration:
        :mod:`graphs.serving.sim.kv_tiers`). True: recomputing its tokens is faster than the load
        (``t_load > max(kernel_scale, 1) x T_chunk``, the roofline step's price of one chunk of them,
        never scaled below it),
        so it is left below and the request prefills them (the caller counts it when admitted)."""
        assert self.tiers is not None
        found = self.tiers.find(pid)
        if found is None or found[1] > self.free_blocks + self._evictable():
            return False
        tokens = float(found[1] * self.cfg.block_size)
        redo = self._phase_step.time_sums(0, 0.0, ((tokens, 0.0),), [] if self._phase_step.windowed else None)
        if self.tiers.transfer_s(pid) > max(self.overheads.kernel_scale, 1.0) * redo:  # redo is the bound
            return True
        # loaded (and made the tier's most recent) before room is made: the blocks _take frees
        # move down into the tier, whose evictions must not push out the prefix being promoted
        n = self.tiers.load(pid)
        self._take(found[1])
        self.prefixes[pid] = [n, n * self.cfg.block_size, 0, self._tick]
        return False

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        if self._lazy is not None:  # every counter was written back before the loop preempts
            self._active.remove(victim)
        if self.cfg.enable_prefix_caching:  # its full blocks stay cached (module doc)
            base = self._prefix_entry(victim)[0] if victim.prefix_ref else 0
            keep = min(victim.computed // self.cfg.block_size - base, victim.blocks)
            if keep > 0:
                self._resume[victim] = [keep, base * self.cfg.block_size, self._tick]
                self._resume_blocks += keep
                victim.blocks -= keep
        self._release(victim)
        victim.computed = 0
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)
        self._waiting_tokens += victim.req.prompt + victim.req.output

    def _drafts(self, s: Sequence) -> int:
        """Tokens drafted for a decoding sequence when speculating: ``min(k, r - 1)`` with ``r``
        tokens still to produce (its lookahead slots are allocated with it, as vLLM does)."""
        if self.spec is None or s.generated < 1 or s.computed != s.known - 1:
            return 0
        return min(self.spec.k, s.req.output - s.generated - 1)

    def schedule(self) -> list[tuple[Sequence, int]]:
        """This iteration's batch: ``(sequence, new tokens)`` pairs (module doc).

        Returns
        -------
        list of (Sequence, int)
            ``(sequence, new tokens)`` pairs.
        """
        cfg = self.cfg
        self._tick += 1
        budget = cfg.max_num_batched_tokens
        batch: list[tuple[Sequence, int]] = []
        preempted = False
        bs, chunked, running, spec = cfg.block_size, cfg.enable_chunked_prefill, self.running, self.spec
        append = batch.append
        # what iteration_time reads off the batch, gathered here in the same pass: each decode's
        # KV length (the new token included), and the rest as chunks (new tokens, cached)
        dec: list[float] = []  # whole numbers (ints)
        chunks: list[tuple[float, float]] = []
        lz = self._lazy
        self._lazy_rows = 0
        steady = self._schedule_steady(budget, batch, dec, chunks) if lz is not None and lz.n else None
        if steady is not None:  # the running sequences scheduled without a pass over the steady decodes
            budget = steady
        # the hot loop: one pass per running sequence; a preemption removes the last sequences,
        # never one before the current, so the list's iterator stops where an index would
        for s in running if steady is None else ():
            if budget <= 0:
                break
            c, g = s.computed, s.generated
            want = s.req.prompt + g - c  # s.known - s.computed
            n = want + self._drafts(s) if spec is not None else want
            if n > budget:
                n = budget
            if n < want and not chunked:
                continue
            need = -(-(c + n) // bs) - (self._owned(s) if s.prefix_ref else s.blocks)
            if need > 0:  # a new block (most decodes need none: no allocation, no preemption)
                lost = False
                while need > self.free_blocks and need > self.free_blocks + self._evictable():
                    victim = running[-1]
                    self._preempt(victim)
                    preempted = True
                    if victim is s:
                        lost = True
                        break
                if lost:
                    break
                self._take(need)
                s.blocks += need
            append((s, n))
            budget -= n
            if want == 1 and n == 1 and g:  # decoding (iteration_time's test: g >= 1, c = known - 1)
                dec.append(c + 1)
            else:
                chunks.append((float(n), float(c)))
        hold = self._batch_wait and self.waiting and not preempted and self._hold(batch, budget)
        room = self._ratio_room(preempted, bool(dec)) if self._ratio is not None else math.inf
        while (
            self.waiting
            and not hold
            and not preempted
            and budget > 0
            and len(self.running) < cfg.max_num_seqs
        ):
            s = self.waiting[0]
            cached = None
            c0 = s.computed
            pid = s.req.prefix_id
            redo = False  #: a lower tier's hit recomputed instead of loaded
            if self.tiers is not None and cfg.enable_prefix_caching and s.computed == 0 and pid is not None:
                if pid not in self.prefixes:
                    redo = self._promote(pid)
            if cfg.enable_prefix_caching and s.computed == 0 and s.req.prefix_id in self.prefixes:
                cached = self.prefixes[s.req.prefix_id]
                cached[2] += 1  # referenced from here on: never evicted to make room for its user
                s.prefix_ref = True
                s.computed = min(cached[1], s.known - 1)  # the last prompt token is always computed
            own = self._resume.get(s) if self._resume else None  # preempted: its blocks still cached
            mine = 0
            if own is not None:
                if own[1] != (cached[1] if cached is not None else 0):  # its prefix went: useless
                    self._resume_blocks -= own[0]
                    self.free_blocks += own[0]
                    del self._resume[s]
                    own = None
                else:
                    mine = own[0]
                    s.computed = min(own[1] + mine * cfg.block_size, s.known - 1)
            want = s.known - s.computed
            n = min(want, budget)
            need = self.admission_blocks(s, s.computed + n) - self._owned(s) - mine
            mark = self._watermark if self.running else 0  # vLLM: only while others are scheduled
            # SGLang (module doc): its prompt and whole output within the room the estimate leaves
            total = want + min(s.req.output - s.generated, CLIP_MAX_NEW_TOKENS) + 1
            if (
                (not cfg.enable_chunked_prefill and want > budget)
                or (need + mark > self.free_blocks and need + mark > self.free_blocks + self._evictable() - mine)
                or (total >= room and self.running)  # alone, SGLang clips max_new_tokens to the pool
            ):
                if cached is not None:  # undo: it waits as it was
                    cached[2] -= 1
                    s.prefix_ref = False
                s.computed = c0
                break
            if own is not None:  # its cached blocks are its own again
                del self._resume[s]
                self._resume_blocks -= mine
                s.blocks += mine
            self.prefix_hits += cached is not None
            if redo:
                assert self.tiers is not None and pid is not None
                self.tiers.recompute(pid)
            self.waiting.popleft()
            self._waiting_tokens -= s.req.prompt + s.req.output
            room -= total if n == want else n + 1  # a first chunk reserves no output
            self._take(max(need, 0))
            s.blocks += max(need, 0)
            self.join(s)
            batch.append((s, n))
            budget -= n
            c, g = s.computed, s.generated
            if n == 1 and g >= 1 and c == s.req.prompt + g - 1:  # a cached prefix up to its last token
                dec.append(c + 1)
            else:
                chunks.append((float(n), float(c)))
        # whole-number KV lengths: their sum is exact in a float, whichever order it is taken in
        ctxs = dec if self.step_cost.windowed else None
        n_dec, sum_dec = len(dec), sum(dec)
        if self._lazy_rows:
            assert lz is not None
            n_dec, sum_dec = n_dec + self._lazy_rows, sum_dec + lz.sum_ctx()
        self._planned = (batch, len(batch), n_dec, float(sum_dec), ctxs, chunks) if spec is None else None
        return batch

    def _ratio_room(self, preempted: bool, decoded: bool) -> float:
        """SGLang's estimate (module doc) after this iteration's running part: the ratio re-estimated
        when it preempted (``retract_decode``), else fallen by one decay when it decodes; and the
        tokens left for admissions, ``F - r sum min(o_i, 4096)`` over the decoding sequences."""
        ntr = self.cfg.new_token_ratio
        assert ntr is not None and self._ratio is not None
        running = self.running
        if preempted:
            gen = sum(s.generated for s in running)
            out = sum(s.req.output for s in running)
            self._ratio = min(1.0, (gen + RETRACT_DECODE_STEPS * len(running)) / (out + 1))
        elif decoded:
            self._ratio = max(self._ratio - ntr[2], ntr[1])
        free = self.free_blocks + (self._evictable() if self.prefixes or self._resume else 0)
        left = sum(min(s.req.output - s.generated, CLIP_MAX_NEW_TOKENS) for s in running if s.generated)
        return free * self.cfg.block_size - self._ratio * left

    def _schedule_steady(
        self,
        budget: int,
        batch: list[tuple[Sequence, int]],
        dec: list[float],
        chunks: list[tuple[float, float]],
    ) -> int | None:
        """The running sequences' part of :meth:`schedule` with the steady decodes in closed
        form (:mod:`graphs.serving.sim.skipping`): the sequences outside the set are added to
        ``batch`` (and ``dec`` or ``chunks``) as the per-sequence loop adds them, the set's blocks
        are taken, and the budget left is returned. When the iteration's tokens exceed
        ``budget`` or its new blocks the free ones (the loop would cut, evict or preempt), every
        counter is written back instead and None returned: the loop runs."""
        lz = self._lazy
        assert lz is not None
        bs = self.cfg.block_size
        need_all, tokens = lz.blocks_needed(), lz.n
        plan = []
        for s in self._active:
            c = s.computed
            want = s.req.prompt + s.generated - c
            need = -(-(c + want) // bs) - (self._owned(s) if s.prefix_ref else s.blocks)
            tokens += want
            if need > 0:
                need_all += need
            plan.append((s, want, need))
        if tokens > budget or need_all > self.free_blocks:
            lz.materialise()
            self._active = list(self.running)
            return None
        self.free_blocks -= need_all  # all fit the free blocks: _take would evict nothing
        self._lazy_rows = lz.n
        for s, n, need in plan:
            if need > 0:
                s.blocks += need
            batch.append((s, n))
            if n == 1 and s.generated:  # decoding (the loop's test)
                dec.append(s.computed + 1)
            else:
                chunks.append((float(n), float(s.computed)))
        return budget - tokens

    def _hold(self, batch: list[tuple[Sequence, int]], budget: int) -> bool:
        """Whether batch waiting (module doc) holds the waiting prompts back this iteration."""
        cfg = self.cfg
        # no generation request (the steady decodes are): nothing waits
        if not self._lazy_rows and not any(s.generated for s, _ in batch):
            return False
        new, left, seats = 0, budget, cfg.max_num_seqs - len(self.running)
        for s in self.waiting:  # what the admission loop would take, blocks not checked
            if left <= 0 or seats <= 0:
                break
            want = s.known - s.computed
            if want > left and not cfg.enable_chunked_prefill:
                break
            n = min(want, left)
            new, left, seats = new + n, left - n, seats - 1
        if not new:  # no prompt would be admitted: no check, no count (as the engine)
            return False
        tokens = cfg.max_num_batched_tokens - budget + new
        if self._waited >= cfg.batch_wait_timeout_iters or tokens >= (
            cfg.batch_wait_max_tokens_ratio * cfg.max_num_batched_tokens
        ):
            self._waited = 0
            return False
        self._waited += 1
        return True

    def decode_capacity(self, ctx: float, held: float | None = None, shared: float = 0.0) -> tuple[float, int] | None:
        """The most output tokens per second this replica can emit decoding, and the batch that
        does it: ``max_b b / T(b)`` over batches ``b`` up to its largest, where ``T(b)`` is a
        pure-decode iteration of ``b`` sequences each holding ``ctx`` tokens of KV, priced as
        :meth:`iteration_time` prices one (the kernels with the overheads' scale and padding,
        floored at the roofline, plus the iteration's CPU terms) and the largest batch is
        ``min(max_num_seqs, max_num_batched_tokens, (KV pool tokens - shared) / held)``. The
        batches tried are the largest and every power of two below it. Prefill is not charged: an
        upper bound on what a steady load can draw from the replica
        (:func:`graphs.serving.planning.cost.served_seconds`). Nothing is recorded (no busy time,
        no iteration).

        Parameters
        ----------
        ctx : float
            The mean KV length of a decoding sequence (tokens, > 0): its output tokens' mean
            ``prompt + position``, what its attention reads.
        held : float, optional
            The tokens of KV a sequence holds alone (default ``ctx``): with prefix caching its
            shared prefix is held once for all (``shared``), not by each.
        shared : float
            Tokens of KV the shared prefixes hold once (prefix caching).

        Returns
        -------
        tuple of (float, int) or None
            Tokens/s and the batch; None when speculating (a step emits a variable number of
            tokens) or when not one sequence of ``ctx`` fits the pool.
        """
        if self.spec is not None or not (ctx > 0 and math.isfinite(ctx)):
            return None
        cfg, ov = self.cfg, self.overheads
        own = ctx if held is None else max(held, 1.0)
        room = self.num_blocks * cfg.block_size - shared
        largest = min(cfg.max_num_seqs, cfg.max_num_batched_tokens, int(room // own) if room > 0 else 0)
        if largest < 1:
            return None
        best: tuple[float, int] | None = None
        for n in sorted({largest, *(2**k for k in range(largest.bit_length()) if 2**k < largest)}):
            o = cfg.iteration_overhead_s + (0.0 if ov.is_zero else ov.cpu_s(n, n))
            rows, sums = ov.padded(n), n * ctx
            ctxs = [ctx] * rows if self.step_cost.windowed else None
            t = self.step_cost.time_sums(rows, sums, (), ctxs)
            if ov.kernel_scale != 1:
                floor = self._phase_step.time_sums(rows, sums, (), ctxs) if ov.kernel_scale < 1 else 0.0
                t, _ = scaled_kernels_s(ov.kernel_scale, t, floor)
            t += o
            if t > 0 and (best is None or n / t > best[0]):
                best = (n / t, n)
        return best

    def iteration_time(self, batch: list[tuple[Sequence, int]]) -> float:
        """The mixed-batch step cost of ``batch`` times ``kernel_scale``, plus the per-iteration
        overhead and the CPU terms (s); a decode-only batch runs at its CUDA-graph capture size
        (:class:`graphs.serving.pricing.overheads.EngineOverheads`).

        Parameters
        ----------
        batch : list of (Sequence, int)
            ``(sequence, new tokens)`` pairs of the iteration.

        Returns
        -------
        float
            Seconds.
        """
        ov = self.overheads
        verifies: list[tuple[float, float]] = []  #: speculating decodes: (drafted + 1, cached)
        plan = self._planned
        seqs = len(batch)
        if plan is not None and plan[0] is batch and plan[1] == len(batch):
            n_dec, sum_ctx, ctxs, chunks = plan[2:]  # read off by schedule(), nothing changed since
            todo: list[tuple[Sequence, int]] = []
            seqs += self._lazy_rows
        else:
            n_dec, sum_ctx, chunks, todo = 0, 0.0, [], batch
            ctxs = [] if self.step_cost.windowed else None
        for s, n in todo:  # one pass per sequence of a batch schedule() did not just build
            c, g = s.computed, s.generated
            # decoding: a token generated and the KV of all known tokens but the last computed
            if g >= 1 and c == s.req.prompt + g - 1:
                if n == 1:
                    n_dec += 1
                    sum_ctx += c + 1  # the KV length including the token being processed
                    if ctxs is not None:  # a sliding window reads min(W, ctx) of each
                        ctxs.append(c + 1)
                    continue
                if n > 1:
                    verifies.append((float(n), float(c)))
                    continue
            chunks.append((float(n), float(c)))
        o = self.cfg.iteration_overhead_s
        scale = ov.kernel_scale
        if not ov.is_zero:  # the CPU terms of this batch (overheads doc)
            tokens = n_dec + sum(c for c, _ in chunks) + sum(v for v, _ in verifies)
            o += ov.cpu_s(seqs, int(tokens))
        rows = n_dec if chunks or verifies else ov.padded(n_dec)  # padding slots read no KV
        spec = self.spec
        if spec is not None:
            t = spec.iteration_time(rows, sum_ctx, chunks, ctxs, verifies)
        else:
            t = self.step_cost.time_sums(rows, sum_ctx, chunks, ctxs)
        if scale != 1:  # never below the iteration's roofline (overheads.scaled_kernels_s)
            floor = self._phase_step.time_sums(rows, sum_ctx, chunks + verifies, ctxs) if scale < 1 else 0.0
            t, floored = scaled_kernels_s(scale, t, floor)
            self.floored += floored
        if self.tiers is not None:  # prefix loads from a lower tier, overlapped with the compute
            t += self.tiers.exposed(t)
        t += o
        self.busy_s += t
        if chunks and not n_dec and not verifies:
            self.prefill_s += t
        elif chunks and spec is not None:  # the decodes and verifies alone, the chunks the rest
            alone = scale * spec.iteration_time(n_dec, sum_ctx, [], ctxs, verifies, record=False) + o
            self.prefill_s += t * max(0.0, 1.0 - alone / t)
        elif chunks:  # the decodes are charged what they would take alone, the prefill chunks the rest
            ph = self._phase_step
            alone = scale * ph.time_sums(n_dec, sum_ctx, (), ctxs) + o
            whole = t if ph is self.step_cost else scale * ph.time_sums(n_dec, sum_ctx, chunks, ctxs) + o
            self.prefill_s += t * max(0.0, 1.0 - alone / whole)
        return t

    def finish_iteration(
        self, batch: list[tuple[Sequence, int]], now: float
    ) -> tuple[list[Sequence], list[Sequence]]:
        """Apply ``batch`` at its end time ``now``: tokens emitted, sequences finished (returned
        with those a disaggregated prefill instance hands over after sampling their first token,
        as disaggregated engines do: the decode instance continues from there).

        Parameters
        ----------
        batch : list of (Sequence, int)
            The iteration's ``(sequence, new tokens)`` pairs.
        now : float
            Its end time (s).

        Returns
        -------
        tuple of (list of Sequence, list of Sequence)
            The sequences finished, and those handed to a decode instance.
        """
        done, handed = [], []
        spec, emitted = self.spec, 0
        self._planned = None  # the sequences move on: schedule() reads the next batch afresh
        for s, n in batch:  # the hot loop: one pass per sequence in the batch
            extra = 0  # drafted tokens the target accepted (speculative decoding)
            if spec is not None and n > 1 and s.generated >= 1 and s.computed == s.known - 1:
                extra = spec.accept(s, n - 1)
                n = 1 + extra  # the KV kept: the verified token and the accepted drafts
            r, g = s.req, s.generated
            c = s.computed + n
            s.computed = c
            if c < r.prompt + g + extra:  # s.known + extra
                continue  # a prefill chunk that has not reached the end of the prompt
            g += 1 + extra
            s.generated = g
            emitted += 1 + extra
            if s.first_token_s is None:
                s.first_token_s = now
            if g >= r.output:
                s.finish_s = now
                done.append(s)
            elif s.stop_after_prefill:
                handed.append(s)
        lz = self._lazy
        if lz is not None:  # the steady decodes: one token each, and those whose last it was
            emitted += lz.n
            gone = lz.finish()
            if gone:
                for s in gone:
                    s.finish_s = now
                done += gone
                if len(done) > 1:  # the loop's order: the batch's, which is the running order
                    done.sort(key=self._stamp.__getitem__)
        self.emitted += emitted
        if self.cfg.enable_prefix_caching:
            for s, _ in batch:
                self._register_prefix(s)
        if done or handed:
            if len(done) + len(handed) <= 8:  # the usual few: list.remove's C scan, order kept
                for s in done + handed:
                    self.running.remove(s)
            else:
                leaving = {id(s) for s in done + handed}
                self.running = [s for s in self.running if id(s) not in leaving]
            for s in done + handed:
                if s.req.retain and s.finish_s is not None and self.cfg.enable_prefix_caching:
                    self._retain(s)
                self._release(s)
        if lz is not None:
            self._settle(done, handed)
        self.iterations += 1
        return done, handed

    def decode_window(
        self, now: float, horizon: float, frontend: tuple[float, float] | None = None
    ) -> list[float]:
        """Run at once, from ``now``, the iterations that would only decode this replica's steady
        decodes (:mod:`graphs.serving.sim.skipping`) and end before ``horizon`` (the next event that
        could change or read the replica): no sequence outside the steady set, none admitted (an
        empty queue, or no free sequence slot), none finishing, their new blocks within the free
        ones, a step that prices decodes vectorised (``decode_times``: the bound's
        :class:`~graphs.serving.step.mixed.MixedStep`), no kernel scale and no tier load in flight.
        Their times come from one vectorised call, summed in the loop's order; their records
        (samples, blocks, busy time, counters) are the loop's. Returns the iterations' end times
        (empty: none run).

        Parameters
        ----------
        now : float
            The simulated time the window starts at (s).
        horizon : float
            The time of the next event that could change or read the replica (s): only iterations
            ending before it run.
        frontend : tuple of (float, float), optional
            The shared front end (:mod:`graphs.serving.engines.knobs`, module doc): when it has
            drained the iteration before the window (s) and its seconds per emitted token. Each
            iteration then ends at :func:`~graphs.serving.engines.knobs.frontend_end_s`, the
            first ``max(t_1, F - now)`` after ``now``, each later one ``max(t_j, n f)`` after the
            one before (``n`` tokens each); the busy time stays the engine's ``t_j``.

        Returns
        -------
        list of float
            The end time (s) of each iteration run, in order; empty when the window runs none
            (a condition fails, or fewer than 2 end before ``horizon``).
        """
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        times = getattr(self.step_cost, "decode_times", None)
        plan = self.window_plan() if times is not None else None
        if plan is None or times is None:
            return []
        needs, n, o, sums = plan
        t = times(self.overheads.padded(n), sums) + o
        ends = window_ends(now, t, n, frontend)
        k = int(np.searchsorted(ends, horizon, side="left"))  # those ending before the horizon
        if k < 2:
            return []
        ends_l = ends[:k].tolist()
        self.window_run(k, needs, [now, *ends_l[:-1]], t[:k].tolist())
        return ends_l

    def window_plan(self) -> tuple[list[int], int, float, Any] | None:
        """What a window of :meth:`decode_window` could run from here, its step aside: the
        members' new blocks in each iteration (:meth:`LazyDecodes.quiet_needs`, at least 4), how
        many they are (``n``), each iteration's overhead with its CPU terms (``o``, s) and KV
        lengths' sum (a numpy array); None when a condition of :meth:`decode_window` fails.
        Nothing changes."""
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        lz = self._lazy
        if (
            lz is None
            or not lz.n
            or self._active
            or (self.waiting and len(self.running) < self.cfg.max_num_seqs)
            or lz.n > self.cfg.max_num_batched_tokens
            or self.overheads.kernel_scale != 1
            or (self.tiers is not None and self.tiers.pending_s)
        ):
            return None
        needs = lz.quiet_needs(self.free_blocks)
        if len(needs) < 4:  # a few iterations cost the loop less than the vectorised call
            return None
        n, ov = lz.n, self.overheads
        o = self.cfg.iteration_overhead_s
        if not ov.is_zero:  # iteration_time's CPU terms of n decodes
            o += ov.cpu_s(n, n)
        sums = (lz.ctx_base + n * (lz.j + np.arange(len(needs), dtype=np.int64))).astype(float)
        return needs, n, o, sums

    def window_run(self, k: int, needs: list[int], starts: list[float], busy: Iterable[float]) -> None:
        """Record the first ``k`` iterations of a :meth:`window_plan`, begun at ``starts``, as the
        loop records them: samples, blocks taken, busy time (each of ``busy`` added in turn, the
        loop's running sum) and counters.

        Parameters
        ----------
        k : int
            How many of the window's iterations to record (the first ``k``).
        needs : list of int
            The new KV blocks the members take in each iteration (:meth:`window_plan`).
        starts : list of float
            Each recorded iteration's start time (s).
        busy : iterable of float
            Each recorded iteration's duration (s), added to the busy time in turn.
        """
        import numpy as np  # the simulator's own import: the scheduler alone needs none

        lz = self._lazy
        assert lz is not None
        n = lz.n
        free = self.free_blocks - np.cumsum(np.asarray(needs[:k], dtype=np.int64))
        used = (1 - free / self.num_blocks).tolist()
        w, r = len(self.waiting), len(self.running)
        self.samples.extend((t0, n, w, r, u) for t0, u in zip(starts, used, strict=True))
        for x in busy:
            self.busy_s += x
        self.free_blocks = int(free[-1])
        lz.advance(k)
        self._tick += k
        self.iterations += k
        self.emitted += n * k

    def _settle(self, done: list[Sequence], handed: list[Sequence]) -> None:
        """After an iteration: the finished and handed sequences leave the running ones outside
        the steady set, and those left decoding steadily join it (:mod:`graphs.serving.sim.skipping`:
        decoding, not speculating, not to be handed over, no shared prefix left to register)."""
        lz = self._lazy
        assert lz is not None
        for s in done + handed:
            del self._stamp[s]
        leaving = {id(s) for s in done + handed} if done or handed else ()
        pc = self.cfg.enable_prefix_caching
        keep = []
        for s in self._active:
            if leaving and id(s) in leaving:
                continue
            g = s.generated
            if (
                g >= 1
                and s.computed == s.req.prompt + g - 1
                and not s.stop_after_prefill
                and (not pc or s.prefix_ref or s.req.prefix_id is None)
                and lz.join(s, self._owned(s) if s.prefix_ref else s.blocks)
            ):
                continue
            keep.append(s)
        self._active = keep

    def sample(self, now: float, batch_size: int) -> None:
        """Record the replica's state at ``now`` for the run's timeline.

        Parameters
        ----------
        now : float
            The time (s).
        batch_size : int
            Sequences in the iteration.
        """
        used = 1 - self.free_blocks / self.num_blocks
        rows = self.samples.rows  # appended here, as IterationLog.append does, without its call
        rows.append((now, batch_size, len(self.waiting), len(self.running), used))
        if len(rows) >= IterationLog.CHUNK:
            self.samples.fold()

