"""An engine profile: one serving engine's (and version's) defaults, each with its source, and the
registry that names them (``vllm``, ``trtllm``, ``vllm@0.6``).

A profile holds what the simulator needs to run an engine as it runs by default:

* its scheduler: tokens per iteration, sequences per iteration, the KV block, chunked prefill,
  TensorRT-LLM's batch waiting, the admission policy (:data:`~.knobs.POLICIES`) and vLLM's
  admission gates on top of ``recompute`` (``reserve_full_prompt``, ``kv_watermark``:
  :mod:`graphs.serving.sim.engine`);
* its KV-pool rule (:data:`KV_RULES`), the blocks one device holds,

  .. math::

      n_{device} = \\left\\lfloor \\frac{u C - W - a N}{b k} \\right\\rfloor, \\qquad
      n_{free} = \\left\\lfloor \\frac{f (C - W - a N)}{b k} \\right\\rfloor

  with ``C`` the device's capacity, ``W`` its weight shard, ``a`` live activation bytes per
  token at the token budget ``N``, ``b`` tokens per block, ``k`` KV bytes per token (bytes);
  ``device``: vLLM's ``gpu_memory_utilization`` ``u`` is a fraction of the whole device (with a
  :attr:`EngineProfile.memory_reserve`, ``u (C - d) - W - a N - R``: of CUDA's total, ``d`` below
  the driver's, less the non-torch memory ``R`` its profile sees; with an
  :attr:`EngineProfile.cudagraph_memory`, less its CUDA graphs' estimate ``G`` too: :mod:`.vllm`);
  ``free``: TensorRT-LLM's ``kv_cache_free_gpu_mem_fraction`` ``f`` is a fraction of what the
  weights and activations leave; ``static``: SGLang's ``mem_fraction_static`` ``s`` of the
  device holds the weights and the KV pool, activations and CUDA graphs live in the rest,

  .. math::

      n_{static} = \\left\\lfloor \\frac{s C - W}{b k} \\right\\rfloor

  (``profile_max_num_token`` in ``model_runner.py``, ``model_runner_kv_cache_mixin.py`` from
  0.5: ``rest_memory = available_gpu_memory - total_gpu_memory * (1 - mem_fraction_static)``,
  the memory free after the weights load less the share of the memory before it that the static
  fraction leaves out; the CUDA context both snapshots hold is not modelled); ``C`` is the memory
  the driver reports (:func:`graphs.serving.sim.engine.pool_memory`);
* under ``guaranteed_no_evict``, requests of ``R`` tokens each (prompt + output) run at most
  ``min(max_num_seqs, floor(n / ceil(R / b)))`` at once (their blocks are reserved at admission);
* its CUDA-graph capture sizes (a rule of the batch limits) or none (no padding);
* which small unmeasured ops it runs as their own kernels (``each`` node, or one per ``layer``
  for a role; a role not listed is fused into a neighbour: :mod:`graphs.serving.pricing.predict`);
* its CPU and request-path terms (s), each fitted (named in :attr:`EngineProfile.fitted`, its
  source the fit) or sourced or assumed (its source says which); the request path is
  :meth:`~.knobs.EngineOverheads.request_path_s`: a fixed ``request_s``, tokenisation per prompt
  token and, with prefix caching on, the prompt's block hashing per prompt token;
* the corpus framework whose measured kernels price its steps
  (:data:`costmodel.measured.corpus.FRAMEWORKS`; refused at registration otherwise).

Every default carries a source (:attr:`EngineProfile.sources`; registration refuses one
without). A new engine is one module in this package calling :func:`register_engine` (the
package imports every module, as :mod:`costmodel.rules` does) and one test.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.keys import Role

from .attention_kernels import AttentionKernelRule
from .knobs import (
    CPU_TERMS,
    DP_LOAD_BALANCE,
    POLICIES,
    EngineConfig,
    EngineOverheads,
    check_new_token_ratio,
    install_overheads_lookup,
    pool_left_words,
    profile_peak_bytes,
    sampler_words,
)
from .moe_kernels import MoEKernelRule, moe_kernel_for
from .sampler_memory import SAMPLER_SOURCES, SAMPLERS

__all__ = [
    "EngineProfile",
    "KVPool",
    "KV_RULES",
    "OVERRIDES",
    "SOURCED",
    "register_engine",
    "get_engine",
    "engine_names",
    "engines",
    "load_engines",
]

#: KV-pool rules (module doc): a fraction of the whole device, or of the memory left after
#: weights and activations
KV_RULES = ("device", "free", "static")
#: how an engine runs a small op's role: one kernel per node, or one per layer for the role
FUSION = ("each", "layer")
#: the defaults a user may override, with their accepted ranges (whole numbers unless a float
#: range; ``policy`` one of :data:`~.knobs.POLICIES`, ``enable_chunked_prefill`` a bool)
OVERRIDES: dict[str, tuple[float, float] | None] = {
    "max_num_batched_tokens": (1, 10**7),
    "max_num_seqs": (1, 10**6),
    "block_size": (1, 4096),
    "enable_chunked_prefill": None,
    "batch_wait_timeout_iters": (0, 10_000),
    "batch_wait_max_tokens_ratio": (0.0, 1.0),
    "policy": None,
    "kv_fraction": (0.0, 1.0),
    "reserve_full_prompt": None,
    "kv_watermark": (0.0, 1.0),
    "enable_prefix_caching": None,
    "sampler": None,
}
_FLOATS = ("batch_wait_max_tokens_ratio", "kv_fraction", "kv_watermark")
#: every default that must name its source
SOURCED = (
    *(k for k in OVERRIDES if k != "sampler"),
    "kv_rule",
    "cudagraph_sizes",
    "small_kernels",
    *CPU_TERMS,
)


@dataclass(frozen=True, slots=True)
class KVPool:
    """What one device's KV pool is sized from (bytes; plain numbers, the ledger's).

    Parameters
    ----------
    capacity_bytes : float
        One device's memory ``C``.
    weights_bytes : float
        Its weight shard ``W``.
    activation_bytes_per_token : float
        Live activation bytes ``a`` per token of an iteration.
    kv_bytes_per_token : float
        KV bytes ``k`` per cached token of one shard.
    layers : int
        The model's decoder layers (an engine's CUDA-graph estimate is per layer; 0: not known).
    vocab_size : int
        The model's vocabulary (an engine's sampler profile run is over it; 0: not known).
    vendor_bytes : float or None
        The device's vendor capacity (decimal GB, the catalog's), which the ``free`` rule sizes
        from: TensorRT-LLM's fraction is of the memory ``cudaMemGetInfo`` reports free after the
        engine's own allocations (the CUDA context, the runtime's buffers and workspaces), which
        the model does not itemise; the vendor figure, about 5.5 GB below the driver's total on
        an 80 GB H100, stands for that total less those allocations (ASSUMED: with the driver's
        total instead, the published TensorRT-LLM rows at the edge of the pool, Llama-3.1-70B FP8
        at TP 1 on an H100, were simulated +35 -> +129 % on throughput). None: ``capacity_bytes``.
    """

    capacity_bytes: float
    weights_bytes: float
    activation_bytes_per_token: float
    kv_bytes_per_token: float
    vendor_bytes: float | None = None
    layers: int = 0
    vocab_size: int = 0


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """One engine's defaults, each sourced (module doc).

    Parameters
    ----------
    name, version : str
        Registry key ``name@version``; ``default_version`` marks the one ``name`` alone names.
    label : str
        What it is, in words (printed).
    framework : str
        The corpus framework whose measured kernels price its steps.
    max_num_batched_tokens, max_num_seqs, block_size : int
        Tokens per iteration, sequences per iteration, tokens per KV block.
    enable_chunked_prefill : bool
        Whether a prompt may be split over iterations.
    policy : str
        Admission and preemption (:data:`~.knobs.POLICIES`).
    kv_rule : str
        :data:`KV_RULES`; ``kv_fraction`` its fraction (``u`` or ``f`` of the module doc).
    cudagraph_sizes : callable or None
        ``(max_num_seqs, max_num_batched_tokens) -> sizes`` a decode batch is padded to; None: no
        padding.
    small_kernels : mapping of Role to str
        The roles of small unmeasured ops it runs as their own kernels (:data:`FUSION`).
    cpu_terms : mapping of str to float
        Every :data:`~.knobs.CPU_TERMS` term (s); ``fitted`` names those fitted to measured runs.
    sources : mapping of str to str
        Where each :data:`SOURCED` default comes from.
    releases : tuple of str
        Release series beyond ``version`` that this profile describes (``("0.14", "0.15")``: every
        ``0.14.x`` and ``0.15.x``), for :func:`release_profile`; their source is
        ``sources["releases"]``. Empty: ``version``'s series alone.
    batch_wait_timeout_iters, batch_wait_max_tokens_ratio : int, float
        TensorRT-LLM's batch waiting (0: off).
    reserve_full_prompt : bool
        vLLM's ``scheduler_reserve_full_isl``: a waiting sequence is admitted only when blocks for
        all its known tokens are free (not only its first chunk's).
    kv_watermark : float
        vLLM's ``watermark``: the fraction of the pool kept free when admitting (0: off).
    enable_prefix_caching : bool
        Whether full KV blocks stay cached for reuse by default (shared prefixes, and a preempted
        sequence's own blocks: :mod:`graphs.serving.sim.engine`).
    device_defaults : callable or None
        ``(capacity_bytes, device_name, tp, dp, budget) -> {setting: value}``: the defaults the
        engine picks by device (vLLM's token budget by GPU memory, SGLang's memory fraction by GPU
        memory, tensor parallelism, attention data parallelism and the token budget in force:
        ``budget`` the one the user gave, else None), applied by :meth:`for_device` to the settings
        the user did not give;
        ``capacity_bytes`` is the memory the driver reports
        (:meth:`costmodel.hardware.Hardware.reported_memory`); None: the same on every device.
    memory_reserve : callable or None
        ``tp -> (driver_reserved_bytes, non_torch_bytes)``: under the ``device`` rule, what the
        driver's total exceeds the total the engine reads from CUDA by (its fraction ``u`` is of
        the latter) and the memory its start-up profile counts outside PyTorch, which it takes
        out of ``u`` x that total before the KV pool (vLLM: :mod:`.vllm`); its source is
        ``sources["memory_reserve"]``. None: neither (the pool is ``u`` x the driver's total less
        weights and activations).
    sampler : str
        Under the ``device`` rule, the sampler whose dummy run the engine's start-up memory
        profile counts, over ``min(max_num_batched_tokens, max_num_seqs)`` rows of the
        vocabulary: a key of :data:`.sampler_memory.SAMPLERS` (``torch``, ``flashinfer``), its
        peak bytes per logit :attr:`sampler_bytes_per_logit`; the profile takes the larger of it
        and the forward pass's activations (:func:`~.knobs.profile_peak_bytes`). Its source is
        ``sources["sampler"]``; a user may override it (``--sampler``). ``""``: not counted.
    cpu_fit : str
        What the fitted CPU terms (``fitted`` but ``request_s``) were fitted to, in one phrase
        (printed by :attr:`basis`).
    new_token_ratio : tuple of (float, float, float) or None
        SGLang's admission estimate ``(init, min, decay)`` (:class:`~.knobs.EngineConfig`); None:
        no such rule. Its source is ``sources["new_token_ratio"]``.
    dp_load_balance : str
        How a data-parallel group's requests pick a rank (:data:`~.knobs.DP_LOAD_BALANCE`); its
        source is ``sources["dp_load_balance"]``.
    dp_chunk_split : bool
        Under attention data parallelism (``dp > 1``) the engine divides its chunked-prefill
        budget by ``dp`` for each rank (SGLang: ``chunked_prefill_size // dp_size``); source
        ``sources["dp_chunk_split"]`` (:meth:`for_data_parallel`).
    dp_conservativeness : float
        Under attention data parallelism, the factor on the admission estimate
        ``new_token_ratio`` (SGLang: ``schedule_conservativeness * 0.3``, the ratio's init, floor
        and decay all linear in it); 1: none. Source ``sources["dp_conservativeness"]``.
    dp_seqs_split : bool
        Under attention data parallelism, a ``max_num_seqs`` the user gave is the engine's whole
        and each rank runs ``max_num_seqs // dp`` of it (SGLang: ``--max-running-requests //
        dp_size``); the default is already a rank's own. Source ``sources["dp_seqs_split"]``
        (:meth:`for_data_parallel`).
    dp_ranks : int
        1, or the ranks this is one rank's profile of where :meth:`for_data_parallel` divided
        something (set there; a rank's profile is not split or set up for a device again).
    cudagraph_memory : callable or None
        ``(layers, max_num_seqs, max_num_batched_tokens) -> bytes``: under the ``device`` rule, the
        CUDA graphs' memory the engine's start-up profile estimates and takes out of ``u`` x its
        total before the KV pool (vLLM from v0.21.0: :func:`.vllm.v1_cudagraph_memory`), linear
        in the decoder layers; its source is ``sources["cudagraph_memory"]``. None: none taken.
    overridden : tuple of str
        The defaults a user replaced (:meth:`with_overrides`), said with the profile.
    moe_kernels : tuple of MoEKernelRule
        The fused-MoE kernels the engine runs where they are not the corpus's fastest, each rule
        sourced (:mod:`.moe_kernels`: vLLM 0.10-0.11's Marlin for MXFP4 experts on Hopper); the
        predictor prices the experts with them (:meth:`moe_kernel`).
    attention_kernels : tuple of AttentionKernelRule
        The attention kernels the engine runs where the corpus's rows time another, each rule
        sourced (:mod:`.attention_kernels`: vLLM 0.10-0.11's Triton attention for sinks off
        Hopper); the predictor counts such attention as a neighbour that names it.
    """

    name: str
    version: str
    label: str
    framework: str
    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int
    enable_chunked_prefill: bool
    policy: str
    kv_rule: str
    kv_fraction: float
    cudagraph_sizes: Callable[[int, int], tuple[int, ...]] | None
    small_kernels: Mapping[Role, str]
    cpu_terms: Mapping[str, float]
    fitted: tuple[str, ...]
    sources: Mapping[str, str] = field(repr=False)
    batch_wait_timeout_iters: int = 0
    batch_wait_max_tokens_ratio: float = 0.0
    reserve_full_prompt: bool = False
    kv_watermark: float = 0.0
    enable_prefix_caching: bool = False
    device_defaults: Callable[[float, str, int, int, int | None], Mapping[str, Any]] | None = field(
        default=None, repr=False
    )
    new_token_ratio: tuple[float, float, float] | None = None
    dp_load_balance: str = "score"
    dp_chunk_split: bool = False
    dp_conservativeness: float = 1.0
    dp_seqs_split: bool = False
    dp_ranks: int = 1
    memory_reserve: Callable[[int], tuple[float, float]] | None = field(default=None, repr=False)
    cudagraph_memory: Callable[[int, int, int], float] | None = field(default=None, repr=False)
    sampler: str = ""
    default_version: bool = True
    releases: tuple[str, ...] = ()
    overridden: tuple[str, ...] = ()
    moe_kernels: tuple[MoEKernelRule, ...] = ()
    attention_kernels: tuple[AttentionKernelRule, ...] = ()
    cpu_fit: str = "InferenceX's H200 runs (inferred), docs/overhead_fit.md"

    def __post_init__(self) -> None:
        for key in ("name", "version", "label", "framework"):
            v = getattr(self, key)
            if not isinstance(v, str) or not v or (key in ("name", "version") and ("@" in v or " " in v)):
                raise CostModelError(f"engine profile {key} must be a non-empty word, got {v!r}")
        if self.kv_rule not in KV_RULES:
            raise CostModelError(
                f"engine {self.ref}: kv_rule {self.kv_rule!r} not allowed; allowed: {', '.join(KV_RULES)}"
            )
        for role, how in self.small_kernels.items():
            if not isinstance(role, Role) or how not in FUSION:
                raise CostModelError(
                    f"engine {self.ref}: small_kernels[{role!r}] = {how!r}; allowed: a Role -> {' or '.join(FUSION)}"
                )
        if set(self.cpu_terms) != set(CPU_TERMS):
            raise CostModelError(f"engine {self.ref}: cpu_terms must set exactly {', '.join(CPU_TERMS)}")
        bad = [t for t in self.fitted if t not in CPU_TERMS]
        if bad:
            raise CostModelError(
                f"engine {self.ref}: fitted term {bad[0]!r} is not one of {', '.join(CPU_TERMS)}"
            )
        missing = [k for k in SOURCED if not self.sources.get(k)]
        if missing:
            raise CostModelError(f"engine {self.ref}: default {missing[0]!r} has no source")
        _check(self.ref, {k: getattr(self, k) for k in OVERRIDES})
        _overheads(self.cpu_terms)  # the terms' own ranges
        check_new_token_ratio(self.new_token_ratio)
        if self.new_token_ratio is not None and not self.sources.get("new_token_ratio"):
            raise CostModelError(f"engine {self.ref}: default 'new_token_ratio' has no source")
        if self.dp_load_balance not in DP_LOAD_BALANCE:
            raise CostModelError(
                f"engine {self.ref}: dp_load_balance {self.dp_load_balance!r} not allowed; "
                f"allowed: {', '.join(DP_LOAD_BALANCE)}"
            )
        if not self.sources.get("dp_load_balance"):  # every engine's rule, the score one too
            raise CostModelError(f"engine {self.ref}: default 'dp_load_balance' has no source")
        c = self.dp_conservativeness
        if isinstance(c, bool) or not isinstance(c, int | float) or not (math.isfinite(c) and 0 < c <= 10):
            raise CostModelError(f"engine {self.ref}: dp_conservativeness must be in (0, 10], got {c!r}")
        for k in ("dp_chunk_split", "dp_conservativeness", "dp_seqs_split"):
            if getattr(self, k) not in (False, 1.0) and not self.sources.get(k):
                raise CostModelError(f"engine {self.ref}: default {k!r} has no source")
        if self.memory_reserve is not None and not self.sources.get("memory_reserve"):
            raise CostModelError(f"engine {self.ref}: default 'memory_reserve' has no source")
        if self.cudagraph_memory is not None and not self.sources.get("cudagraph_memory"):
            raise CostModelError(f"engine {self.ref}: default 'cudagraph_memory' has no source")
        if self.sampler and not self.sources.get("sampler"):
            raise CostModelError(f"engine {self.ref}: default 'sampler' has no source")
        if not isinstance(self.releases, tuple) or not all(
            isinstance(r, str) and r and "@" not in r and " " not in r for r in self.releases
        ):
            raise CostModelError(
                f"engine {self.ref}: releases must be a tuple of release words, got {self.releases!r}"
            )
        if self.releases and not self.sources.get("releases"):
            raise CostModelError(f"engine {self.ref}: 'releases' has no source")
        if not isinstance(self.moe_kernels, tuple) or not all(
            isinstance(r, MoEKernelRule) for r in self.moe_kernels
        ):
            raise CostModelError(
                f"engine {self.ref}: moe_kernels must be a tuple of MoEKernelRule, got {self.moe_kernels!r}"
            )
        if not isinstance(self.attention_kernels, tuple) or not all(
            isinstance(r, AttentionKernelRule) for r in self.attention_kernels
        ):
            raise CostModelError(
                f"engine {self.ref}: attention_kernels must be a tuple of AttentionKernelRule, "
                f"got {self.attention_kernels!r}"
            )

    def cudagraph_bytes_per_layer(self) -> float:
        """The CUDA graphs' estimate per decoder layer (bytes) the ``device`` rule takes out of the
        KV pool at this profile's ``max_num_seqs`` and ``max_num_batched_tokens``
        (:attr:`cudagraph_memory` at one layer; 0 for any other rule or none).

        Returns
        -------
        float
            Bytes per decoder layer.
        """
        if self.kv_rule != "device" or self.cudagraph_memory is None:
            return 0.0
        return float(self.cudagraph_memory(1, self.max_num_seqs, self.max_num_batched_tokens))

    @property
    def sampler_bytes_per_logit(self) -> float:
        """Peak bytes per logit of the sampler's profile run the ``device`` rule counts
        (:data:`.sampler_memory.SAMPLERS` of :attr:`sampler`; 0 when none or another rule)."""
        return SAMPLERS[self.sampler] if self.sampler and self.kv_rule == "device" else 0.0

    def reserved_memory(self, tp: int = 1) -> tuple[float, float]:
        """``(driver_reserved_bytes, non_torch_bytes)`` at tensor parallelism ``tp``: what the
        ``device`` rule takes off the driver's total before the fraction and off the fraction
        before the KV pool (:attr:`memory_reserve`; ``(0, 0)`` for any other rule or none).

        Parameters
        ----------
        tp : int
            Tensor-parallel degree (a whole number >= 1).

        Returns
        -------
        tuple of (float, float)
            Bytes, bytes.

        Raises
        ------
        CostModelError
            When ``tp`` is not a whole number >= 1.
        """
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise CostModelError(f"engine {self.ref}: tp must be a whole number >= 1, got {tp!r}")
        if self.kv_rule != "device" or self.memory_reserve is None:
            return 0.0, 0.0
        d, r = self.memory_reserve(tp)
        return float(d), float(r)

    def memory_note(self, tp: int = 1, layers: int | None = None, vocab_size: int | None = None) -> str:
        """What the simulation report says, once, about the memory the KV pool is sized from
        beyond weights and activations (:meth:`reserved_memory`, the CUDA graphs' estimate:
        :meth:`cudagraph_bytes_per_layer`, and the sampler's profile run:
        :attr:`sampler_bytes_per_logit`); empty when nothing is taken.

        Parameters
        ----------
        tp : int
            Tensor-parallel degree.
        layers : int, optional
            The model's decoder layers (the CUDA graphs' estimate in GiB; None: per layer).
        vocab_size : int, optional
            The model's vocabulary (the sampler's run in GiB; None: per logit).

        Returns
        -------
        str
        """
        d, r = self.reserved_memory(tp)
        g = self.cudagraph_bytes_per_layer()
        sb = self.sampler_bytes_per_logit  # 0 under any rule but ``device``
        if not d and not r and not g and not sb:
            return ""
        gib = 2**30
        note = f"{self.ref} KV pool: {self.kv_fraction:g} x "
        if d or r:
            note += (
                f"CUDA's total (the driver's less {d / gib:.2f} GiB), less weights, activations and "
                f"{r / gib:.2f} GiB of non-torch memory at tp {tp} ({self.sources['memory_reserve']})"
            )
        else:
            note += "the device, less weights, activations"
        if g:
            size = (
                f"{layers * g / gib:.2f} GiB for {layers} layers"
                if layers
                else f"{g / 2**20:.1f} MiB a layer"
            )
            note += f", and {size} of CUDA graphs ({self.sources['cudagraph_memory']})"
        if sb:
            rows = min(self.max_num_batched_tokens, self.max_num_seqs)
            why = "given" if "sampler" in self.overridden else self.sources["sampler"]
            size = f"{sb * rows * vocab_size / gib:.2f} GiB" if vocab_size else f"{sb:g} B a logit"
            note += (
                f"; its activations are the larger of the forward pass and the sampler's profile run over "
                f"{rows:,} rows of the vocabulary ({size}: {SAMPLER_SOURCES[self.sampler]}; {why})"
            )
        return note

    @property
    def ref(self) -> str:
        """``name@version``: the registry key."""
        return f"{self.name}@{self.version}"

    @property
    def basis(self) -> str:
        """Where its CPU and request-path terms come from, in one phrase (printed with them)."""
        who = self.name if self.default_version else self.ref
        if not self.fitted:
            return f"{who} defaults (assumed, not fitted: `costmodel calibrate serving` fits them)"
        cpu = [t for t in self.fitted if t != "request_s"]
        fits = [f"{' and '.join(cpu)} fitted to {self.cpu_fit}"] if cpu else []
        if "request_s" in self.fitted:
            fits.append(
                "request_s to the validation tables' TTFT, held-out split excluded, docs/request_path.md"
            )
        return f"{who} defaults ({'; '.join(fits)}; the rest sourced or assumed: `costmodel calibrate serving` fits them)"

    def with_overrides(self, **values: Any) -> EngineProfile:
        """A copy with some defaults replaced (:data:`OVERRIDES`), each checked (a one-line error
        names the field, the value and what is allowed); the replaced names are remembered.

        Parameters
        ----------
        **values
            Settings of :data:`OVERRIDES` by name (``max_num_seqs=512``, ``block_size=32`` ...).

        Returns
        -------
        EngineProfile

        Raises
        ------
        CostModelError
            When a name is not an override or a value is out of its range.
        """
        unknown = sorted(set(values) - set(OVERRIDES))
        if unknown:
            raise CostModelError(
                f"engine setting {unknown[0][:40]!r} not known; allowed: {', '.join(OVERRIDES)}"
            )
        if "sampler" in values and not self.sampler:
            raise CostModelError(
                f"engine {self.ref}: its KV pool does not count the sampler's profile run, so sampler "
                f"{str(values['sampler'])[:40]!r} changes nothing (vllm@0.11's and vllm@0.12's do)"
            )
        merged = {k: getattr(self, k) for k in OVERRIDES} | values
        _check(self.ref, merged, given=set(values))
        changed = tuple(k for k in OVERRIDES if k in values or k in self.overridden)
        return replace(self, **values, overridden=changed)

    def for_device(self, device: Any, tp: int = 1, dp: int = 1) -> EngineProfile:
        """The profile as the engine sets itself up on ``device`` (a
        :class:`~costmodel.hardware.Hardware`) at tensor parallelism ``tp``: its
        :attr:`device_defaults` for that device's reported memory
        (:meth:`~costmodel.hardware.Hardware.reported_memory`), name and ``tp``, each setting the
        user gave (:attr:`overridden`) kept as given.

        Parameters
        ----------
        device : Hardware
            The device (its reported memory in bytes and its name).
        tp : int
            Tensor-parallel degree (SGLang's memory fraction depends on it).
        dp : int
            Attention data-parallel ranks of ``tp`` devices each (SGLang's memory fraction sees
            the whole group's TP and reserves more for DP attention).

        Returns
        -------
        EngineProfile
        """
        if self.dp_ranks != 1:  # its device defaults would undo the rank's split
            raise CostModelError(
                f"engine {self.ref}: one rank's profile of {self.dp_ranks} data-parallel ranks is set up "
                "for its device already (for_device comes before for_data_parallel)"
            )
        if self.device_defaults is None:
            return self
        # loaded on use: the engine registry imports only the stdlib and light core modules
        from costmodel.cost import as_float

        # a budget the user gave is the one the engine reserves memory for (SGLang 0.5's fraction)
        budget = self.max_num_batched_tokens if "max_num_batched_tokens" in self.overridden else None
        picked = self.device_defaults(as_float(device.reported_memory()[0]), str(device.name), tp, dp, budget)
        values = {k: v for k, v in picked.items() if k not in self.overridden and getattr(self, k) != v}
        if not values:
            return self
        _check(self.ref, {k: getattr(self, k) for k in OVERRIDES} | values)
        return replace(self, **values)

    def for_data_parallel(self, dp: int) -> EngineProfile:
        r"""The profile of one rank of ``dp`` attention data-parallel ranks: the chunked-prefill
        budget divided by ``dp`` where the engine divides it (:attr:`dp_chunk_split`, at least one
        KV block) and the admission estimate scaled by :attr:`dp_conservativeness` (SGLang's
        ``_handle_data_parallelism`` in ``server_args.py``; its scheduler's ``new_token_ratio``
        init, floor and decay are each linear in the conservativeness). A budget the user gave is
        the engine's whole and is divided too (SGLang divides ``--chunked-prefill-size`` whatever
        set it); without chunked prefill nothing is divided (SGLang's ``-1 // dp`` stays off). A
        ``max_num_seqs`` the user gave is divided too where the engine divides it
        (:attr:`dp_seqs_split`); the default is a rank's own (SGLang sizes it from each rank's pool).

        .. math:: C_{rank} = \lfloor C / D \rfloor, \qquad r_{rank} = c\,r, \qquad
                  S_{rank} = \lfloor S / D \rfloor \ (S \text{ given})

        Parameters
        ----------
        dp : int
            Data-parallel ranks (1: the profile itself).

        Returns
        -------
        EngineProfile

        Raises
        ------
        CostModelError
            A given ``max_num_seqs`` the engine divides is below ``dp`` (a rank would run none:
            SGLang refuses to start).

        Examples
        --------
        >>> from graphs.serving.engines import get_engine
        >>> rank = get_engine("sglang").for_data_parallel(8)
        >>> rank.max_num_batched_tokens, round(rank.new_token_ratio[0], 4)
        (1024, 0.21)
        """
        if self.dp_ranks != 1:
            raise CostModelError(
                f"engine {self.ref}: already one rank's profile of {self.dp_ranks} data-parallel ranks "
                "(for_data_parallel divides the engine's whole once)"
            )
        if dp <= 1:
            return self
        values: dict[str, Any] = {}
        if self.dp_chunk_split and self.enable_chunked_prefill:  # a given budget too: the engine's whole
            values["max_num_batched_tokens"] = max(self.block_size, self.max_num_batched_tokens // dp)
        if self.dp_seqs_split and "max_num_seqs" in self.overridden:
            if self.max_num_seqs < dp:
                raise CostModelError(
                    f"engine {self.ref}: max_num_seqs {self.max_num_seqs} is the engine's whole under "
                    f"{dp} attention data-parallel ranks ({self.max_num_seqs} // {dp} = 0 a rank: the "
                    f"engine refuses to start); give at least {dp}"
                )
            values["max_num_seqs"] = self.max_num_seqs // dp
        if self.dp_conservativeness != 1.0 and self.new_token_ratio is not None:
            c = self.dp_conservativeness
            init, floor, decay = self.new_token_ratio
            values["new_token_ratio"] = (min(c * init, 1.0), min(c * floor, 1.0), c * decay)
        return replace(self, **values, dp_ranks=dp) if values else self

    def kv_blocks(self, pool: KVPool, tp: int = 1) -> int:
        """Blocks of one device's KV pool by the profile's rule (module doc; at its token budget
        and block size; the ``device`` rule less :meth:`reserved_memory` at ``tp`` and the CUDA
        graphs' estimate for ``pool.layers``); a pool with no room for one block is a one-line error.

        Parameters
        ----------
        pool : KVPool
            What one device's pool is sized from (capacity, weights, activation and KV bytes per token).
        tp : int
            Tensor-parallel degree (the ``device`` rule's non-torch memory may depend on it).

        Returns
        -------
        int
            KV blocks (at least 1).

        Raises
        ------
        CostModelError
            When no block fits, or the rule's CUDA-graph estimate meets a pool with no layer count.
        """
        c, w = pool.capacity_bytes, pool.weights_bytes
        if self.kv_rule == "free" and pool.vendor_bytes is not None:  # KVPool.vendor_bytes
            c = pool.vendor_bytes
        act = pool.activation_bytes_per_token * self.max_num_batched_tokens
        forward = act
        k = pool.kv_bytes_per_token
        if self.kv_rule == "device":
            act = profile_peak_bytes(
                pool.activation_bytes_per_token,
                self.max_num_batched_tokens,
                self.sampler_bytes_per_logit,
                self.max_num_seqs,
                pool.vocab_size,
            )
            d, r = self.reserved_memory(tp)
            c -= d
            g = self.cudagraph_bytes_per_layer()
            if g and pool.layers < 1:
                raise CostModelError(
                    f"engine {self.ref}: its CUDA-graph estimate is per decoder layer: the pool needs the "
                    f"model's layers (KVPool.layers >= 1), got {pool.layers!r}"
                )
            free = self.kv_fraction * c - w - act - r - g * pool.layers
        elif self.kv_rule == "static":  # activations live outside the static fraction
            act = 0.0
            free = self.kv_fraction * c - w
        else:
            free = self.kv_fraction * (c - w - act)
        n = math.floor(free / (self.block_size * k)) if k > 0 else 0
        if n < 1:
            share = f"{self.kv_fraction:.1%} of " + ("what is left of " if self.kv_rule == "free" else "")
            which, remedy = sampler_words(act, forward)
            raise CostModelError(
                f"no room for a KV block ({self.ref}): {share}{c / 1e9:.1f} GB after weights "
                f"({w / 1e9:.1f} GB) and activations ({act / 1e9:.2f} GB{which}) leaves {pool_left_words(free)} "
                f"(more devices, tp, or a smaller token budget{remedy})"
            )
        return n

    def engine_config(
        self,
        pool: KVPool | None,
        *,
        request_tokens: int | None = None,
        max_running: int | None = None,
        enable_prefix_caching: bool | None = None,
        iteration_overhead_s: float = 0.0,
        num_blocks: int | None = None,
        tp: int = 1,
        kernel_weight_bytes: float = 0.0,
    ) -> EngineConfig:
        """The simulator's :class:`~.knobs.EngineConfig` for this profile on one device.

        Parameters
        ----------
        pool : KVPool or None
            What the KV pool is sized from (:meth:`kv_blocks`); None only where the simulator
            sizes it (the ``device`` rule under ``recompute``) or ``num_blocks`` is given.
        request_tokens : int, optional
            Prompt + output tokens of every request, when they are all equal: under
            ``guaranteed_no_evict`` the sequences that run at once are capped at
            ``floor(blocks / ceil(R / b))`` (module doc; unequal requests are admitted one by
            one by the simulator's own reservation rule).
        max_running : int, optional
            At most this many requests exist (a wave of them): a further cap.
        enable_prefix_caching : bool, optional
            As :class:`~.knobs.EngineConfig`; None: the profile's default.
        iteration_overhead_s, num_blocks
            As :class:`~.knobs.EngineConfig` (``num_blocks`` replaces the rule's pool).
        tp : int
            Tensor-parallel degree: the ``device`` rule's :meth:`reserved_memory` at it travels
            in the config (``driver_reserved_bytes``, ``non_torch_bytes``), and the CUDA graphs'
            estimate per layer (``cudagraph_bytes_per_layer``: :meth:`cudagraph_bytes_per_layer`).
        kernel_weight_bytes : float
            Weight bytes the engine's kernels add on one device (padded MoE experts:
            :func:`graphs.serving.sim.engine.moe_kernel_padding`), out of the pool like the weights.

        Returns
        -------
        EngineConfig
            ``scheduler_policy`` is the profile's policy when it is not vLLM's ``recompute`` (the
            simulator's default, left None so a recompute engine's config stays as it was), so a
            run of this config schedules as the engine does whatever overheads it takes (none, a
            fit's, or :meth:`overheads`, which carries the policy too).
            The ``device`` rule leaves ``num_blocks`` to the simulator, which sizes the pool by
            the same rule from its own ledger (a draft model's included); the ``free`` rule sets
            it from ``pool`` (a speculative draft's weights are not in it).

        Raises
        ------
        CostModelError
            When the profile's KV rule needs a pool and none is given, or one request does not fit the
            pool.
        """
        common: dict[str, Any] = dict(
            max_num_batched_tokens=self.max_num_batched_tokens,
            block_size=self.block_size,
            enable_chunked_prefill=self.enable_chunked_prefill,
        )
        extra: dict[str, Any] = {}
        d, r = self.reserved_memory(tp)
        if d:
            extra["driver_reserved_bytes"] = d
        if r:
            extra["non_torch_bytes"] = r
        g = self.cudagraph_bytes_per_layer()
        if g:
            extra["cudagraph_bytes_per_layer"] = g
        if self.kv_rule == "device" and self.sampler_bytes_per_logit:
            extra["sampler_bytes_per_logit"] = float(self.sampler_bytes_per_logit)
            extra["sampler_rows"] = self.max_num_seqs  # the configured limit, before any cap below
        if kernel_weight_bytes:
            extra["kernel_weight_bytes"] = kernel_weight_bytes
            if pool is not None:
                pool = replace(pool, weights_bytes=pool.weights_bytes + kernel_weight_bytes)
        if self.enable_prefix_caching if enable_prefix_caching is None else enable_prefix_caching:
            extra["enable_prefix_caching"] = True
        if iteration_overhead_s:
            extra["iteration_overhead_s"] = iteration_overhead_s
        if self.batch_wait_timeout_iters or self.batch_wait_max_tokens_ratio:
            extra["batch_wait_timeout_iters"] = self.batch_wait_timeout_iters
            extra["batch_wait_max_tokens_ratio"] = self.batch_wait_max_tokens_ratio
        if self.reserve_full_prompt:
            extra["reserve_full_prompt"] = True
        if self.kv_watermark:
            extra["kv_watermark"] = self.kv_watermark
        if self.new_token_ratio is not None:
            extra["new_token_ratio"] = self.new_token_ratio
        if self.dp_load_balance != "score":
            extra["dp_load_balance"] = self.dp_load_balance
        if self.policy != "recompute":  # the scheduler travels with the config, not only the overheads
            extra["scheduler_policy"] = self.policy
        if self.kv_rule == "device" and self.policy != "guaranteed_no_evict":
            return EngineConfig(
                max_num_seqs=self.max_num_seqs,
                gpu_memory_utilization=self.kv_fraction,
                num_blocks=num_blocks,
                **common,
                **extra,
            )
        if num_blocks is not None:
            blocks = num_blocks
        elif pool is None:
            raise CostModelError(
                f"engine {self.ref}: its {self.kv_rule} KV-pool rule needs the device and ledger"
            )
        else:
            blocks = self.kv_blocks(pool, tp)
        seqs = self.max_num_seqs
        if self.policy == "guaranteed_no_evict" and request_tokens is not None:
            per_request = -(-request_tokens // self.block_size)
            seqs = min(seqs, blocks // per_request)
            if seqs < 1:
                raise CostModelError(
                    f"{self.ref}: one {request_tokens}-token request does not fit {blocks} KV blocks"
                )
        if max_running is not None:
            seqs = min(seqs, max_running)
        if self.kv_rule == "device" and num_blocks is None:  # the simulator sizes it by the same rule
            return EngineConfig(max_num_seqs=seqs, gpu_memory_utilization=self.kv_fraction, **common, **extra)
        return EngineConfig(max_num_seqs=seqs, num_blocks=blocks, **common, **extra)

    def overheads(
        self,
        *,
        max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None,
        terms: bool = True,
    ) -> EngineOverheads:
        """Its :class:`~.knobs.EngineOverheads`: the CPU and request-path terms, the capture sizes
        of the batch limits (the profile's unless given: an engine config's, capped) and the
        policy. ``terms=False``: the policy alone (the bound: kernels at their roofline, no CPU
        terms, the engine's scheduler).

        Parameters
        ----------
        max_num_seqs : int, optional
            Sequences per iteration (default the profile's).
        max_num_batched_tokens : int, optional
            Tokens per iteration (default the profile's).
        terms : bool
            Include the CPU and request-path terms (False: the policy alone, for the bound).

        Returns
        -------
        EngineOverheads
        """
        if not terms:
            return EngineOverheads(
                policy=self.policy, basis=f"{self.ref} scheduler; no CPU terms (the bound)"
            )
        seqs = self.max_num_seqs if max_num_seqs is None else max_num_seqs
        tokens = self.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
        sizes = self.cudagraph_sizes(seqs, tokens) if self.cudagraph_sizes is not None else ()
        return _overheads(self.cpu_terms, cudagraph_sizes=sizes, policy=self.policy, basis=self.basis)

    def defaults(self) -> dict[str, Any]:
        """Every scheduler and pool setting in force (overrides applied), by name, plain values.

        Returns
        -------
        dict
        """
        out: dict[str, Any] = {k: getattr(self, k) for k in OVERRIDES if k != "sampler" or self.sampler}
        out["kv_rule"] = self.kv_rule
        return out

    def summary(self) -> str:
        """One line: the profile and every default it assumed (the overridden ones named apart).

        Returns
        -------
        str
        """
        assumed = [f"{k} {_text(v)}" for k, v in self.defaults().items() if k not in self.overridden]
        split = set()  # the given values a data-parallel rank holds its share of
        if self.dp_ranks > 1:
            split = {
                k
                for k, on in (
                    ("max_num_seqs", self.dp_seqs_split),
                    ("max_num_batched_tokens", self.dp_chunk_split and self.enable_chunked_prefill),
                )
                if on
            }
        given = [
            f"{k} {_text(getattr(self, k))}"
            + (f" a rank (the value given // {self.dp_ranks})" if k in split else "")
            for k in self.overridden
        ]
        pool = {
            "device": "of the whole device",
            "free": "of the memory left after weights and activations",
            "static": "of the whole device for weights and KV (mem_fraction_static)",
        }[self.kv_rule]
        admit = (
            f"; admission keeps new_token_ratio {self.new_token_ratio[0]:g} (falling to {self.new_token_ratio[1]:.3g}) "
            "of the running requests' remaining outputs"
            if self.new_token_ratio is not None
            else ""
        )
        text = (
            f"engine {self.ref} ({self.label}; corpus framework {self.framework}): defaults "
            f"{', '.join(assumed)} (KV pool {self.kv_fraction:g} {pool}{admit}; each sourced in graphs/serving/engines/)"
        )
        return text + (f"; given: {', '.join(given)}" if given else "")

    def moe_kernel(self, dtype: str, architecture: str, device: str = "") -> MoEKernelRule | None:
        """The fused-MoE kernel this engine runs for experts of corpus ``dtype`` on ``device`` of
        ``architecture`` where it is not the corpus's fastest (:attr:`moe_kernels`), or None.

        Parameters
        ----------
        dtype : str
            The experts' corpus dtype (``w4a16_mxfp4`` ...).
        architecture : str
            The device's architecture (:attr:`costmodel.hardware.Hardware.architecture`).
        device : str
            The device's catalog name (a rule may name devices: SM 12.x cards).

        Returns
        -------
        MoEKernelRule or None

        Examples
        --------
        >>> from graphs.serving.engines import get_engine
        >>> get_engine("vllm@0.11").moe_kernel("w4a16_mxfp4", "Hopper").kernel
        'marlin'
        >>> get_engine("vllm@0.12").moe_kernel("w4a16_mxfp4", "Hopper") is None
        True
        """
        return moe_kernel_for(self.moe_kernels, dtype, architecture, device)

    def kernel_release_note(self, kernels: str | None, label: str | None = None) -> str | None:
        """What to say when the corpus's kernels that price this profile were measured on a later
        release of its framework than every one the profile describes (``vllm@0.10`` priced by
        vLLM 0.24.0's kernels): a release's kernels can differ from a later one's (MoE kernels
        above all), and nothing in the corpus measures the earlier release. None when ``kernels``
        is None, not a release, or one the profile describes or predates.

        Parameters
        ----------
        kernels : str or None
            The release the corpus measured (:func:`costmodel.measured.corpus.framework_release`;
            of several, the earliest).
        label : str, optional
            How to name the measured releases in the note (default ``kernels``: ``0.14.0 to
            0.24.0 (other devices')`` where a device the corpus lacks is priced from several).

        Returns
        -------
        str or None
            The note's words.

        Examples
        --------
        >>> from graphs.serving.engines import get_engine
        >>> get_engine("vllm@0.10").kernel_release_note("0.24.0")[:60]
        'its kernels are priced from vllm 0.24.0 measurements; vllm@0'
        >>> get_engine("vllm@0.20").kernel_release_note("0.19.0") is None
        True
        >>> "sglang 0.5.14 measurements" in get_engine("sglang@0.5.1").kernel_release_note("0.5.14")
        True
        >>> get_engine("sglang").kernel_release_note("0.5.10") is None  # the 0.5 line's own
        True
        """
        from packaging.version import InvalidVersion, Version

        if not kernels:
            return None
        try:
            measured = Version(kernels)
            mine = [Version(v) for v in (self.version, *self.releases)]
        except InvalidVersion:
            return None  # a profile named for a line (vllm@1), not a release: no comparison
        if release_profile(self.name, kernels) is self or any(
            measured.release[: len(v.release)] <= v.release
            for v in mine  # at the profile's precision
        ):
            return None
        described = ", ".join(sorted({str(v) for v in mine}, key=Version))
        own = "; ".join(f"{r.kernel} for {r.dtype} experts on {r.where}" for r in self.moe_kernels)
        return (
            f"its kernels are priced from {self.framework} {label or kernels} measurements; {self.ref} describes "
            f"{self.name} {described}, whose kernels the corpus does not measure and may be slower"
            + (f" (the MoE kernels its sources say it runs price those experts: {own})" if own else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """The profile as plain values (for ``--json``): its name, the release series it describes
        (its version's and :attr:`releases`), settings, overrides and sources.

        Returns
        -------
        dict
        """
        return {
            "engine": self.ref,
            "label": self.label,
            "releases": [*self.releases, self.version],
            "framework": self.framework,
            "settings": self.defaults(),
            "data_parallel": {
                "load_balance": self.dp_load_balance,
                "chunk_split": self.dp_chunk_split,
                "conservativeness": self.dp_conservativeness,
                "seqs_split": self.dp_seqs_split,
                "ranks": self.dp_ranks,
            },
            "overridden": list(self.overridden),
            "moe_kernels": [r.to_dict() for r in self.moe_kernels],
            "attention_kernels": [r.to_dict() for r in self.attention_kernels],
            "cpu_terms": dict(self.cpu_terms),
            "fitted": list(self.fitted),
            "sources": dict(self.sources),
        }


def _overheads(
    terms: Mapping[str, float],
    *,
    cudagraph_sizes: tuple[int, ...] = (),
    policy: str | None = None,
    basis: str = "none",
) -> EngineOverheads:
    """An :class:`~.knobs.EngineOverheads` of ``terms`` (each :data:`~.knobs.CPU_TERMS` term, s)."""
    return EngineOverheads(
        iteration_s=terms["iteration_s"],
        per_seq_s=terms["per_seq_s"],
        per_token_s=terms["per_token_s"],
        request_s=terms["request_s"],
        output_token_s=terms["output_token_s"],
        per_prompt_token_s=terms["per_prompt_token_s"],
        prefix_lookup_per_token_s=terms["prefix_lookup_per_token_s"],
        frontend_token_s=terms["frontend_token_s"],
        cudagraph_sizes=cudagraph_sizes,
        policy=policy,
        basis=basis,
    )


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)


def _check(ref: str, values: Mapping[str, Any], given: set[str] | None = None) -> None:
    """Each setting in its range (:data:`OVERRIDES`) and the settings consistent with each other."""
    for key, v in values.items():
        rng = OVERRIDES[key]
        if key == "policy":
            if v not in POLICIES:
                raise CostModelError(
                    f"engine {ref}: policy {v!r} not allowed; allowed: {', '.join(POLICIES)}"
                )
            continue
        if key == "sampler":  # "" (not counted) only as a profile's own default
            if v not in SAMPLERS and (v != "" or (given is not None and key in given)):
                raise CostModelError(
                    f"engine {ref}: sampler {str(v)[:40]!r} not allowed; allowed: {', '.join(SAMPLERS)}"
                )
            continue
        if rng is None:
            if not isinstance(v, bool):
                raise CostModelError(f"engine {ref}: {key} must be true or false, got {v!r}")
            continue
        lo, hi = rng
        if key in _FLOATS:
            ok = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and lo <= v <= hi
            ok = ok and (key != "kv_fraction" or v > 0) and (key != "kv_watermark" or v < 1)
            if not ok:
                span = {"kv_fraction": f"(0, {hi:g}]", "kv_watermark": f"[{lo:g}, {hi:g})"}.get(
                    key, f"[{lo:g}, {hi:g}]"
                )
                raise CostModelError(f"engine {ref}: {key} must be in {span}, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise CostModelError(f"engine {ref}: {key} must be a whole number in [{lo:g}, {hi:g}], got {v!r}")
    if values["max_num_batched_tokens"] < values["block_size"]:
        raise CostModelError(
            f"engine {ref}: max_num_batched_tokens (--max-num-batched-tokens) "
            f"{values['max_num_batched_tokens']} is smaller than one KV block (block_size, --block-size: "
            f"{values['block_size']} tokens): give at least {values['block_size']}"
        )
    iters, ratio = values["batch_wait_timeout_iters"], values["batch_wait_max_tokens_ratio"]
    if (iters > 0) != (ratio > 0) and (
        given is None or given & {"batch_wait_timeout_iters", "batch_wait_max_tokens_ratio"}
    ):
        raise CostModelError(
            f"engine {ref}: batch waiting needs both batch_wait_timeout_iters and batch_wait_max_tokens_ratio "
            f"above 0 (got {iters} and {ratio:g}; either at 0 turns it off)"
        )


#: name -> version -> profile; and each name's default version
_REGISTRY: dict[str, dict[str, EngineProfile]] = {}
_DEFAULT: dict[str, str] = {}


def register_engine(profile: EngineProfile) -> EngineProfile:
    """Add ``profile`` to the registry (returned, so a module can assign it).

    Refused, in one line: a ``name@version`` already registered, a second default version of a
    name, a release series (its version or one of :attr:`EngineProfile.releases`) another
    profile of the name describes, or a corpus framework the measured corpus does not hold (its
    kernels could not be priced: :data:`costmodel.measured.corpus.FRAMEWORKS`).

    Parameters
    ----------
    profile : EngineProfile
        The engine's profile (its scheduler defaults, KV rule, capture sizes, overheads, sources).

    Returns
    -------
    EngineProfile
        ``profile`` itself.

    Raises
    ------
    CostModelError
        When its ``name@version`` is taken, a second default version of its name is given, a
        release series of it is another profile's, or its corpus framework is not in the
        measured corpus.
    """
    # loaded on use: the engine registry imports only the stdlib and light core modules
    from costmodel.measured.corpus import FRAMEWORKS

    if profile.framework not in FRAMEWORKS:
        raise CostModelError(
            f"engine {profile.ref}: framework {profile.framework!r} is not in the measured corpus; "
            f"allowed: {', '.join(FRAMEWORKS)}"
        )
    versions = _REGISTRY.setdefault(profile.name, {})
    if profile.version in versions:
        raise CostModelError(f"engine {profile.ref} is already registered")
    if profile.default_version and profile.name in _DEFAULT:
        raise CostModelError(
            f"engine {profile.ref}: {profile.name} already defaults to version {_DEFAULT[profile.name]}"
        )
    claimed = {r: p.ref for p in versions.values() for r in (p.version, *p.releases)}
    twice = [r for r in (profile.version, *profile.releases) if r in claimed and claimed[r] != profile.ref]
    if twice:
        raise CostModelError(
            f"engine {profile.ref}: release series {twice[0]!r} is already {claimed[twice[0]]}'s (a profile's "
            "version and its releases, also one copied with dataclasses.replace, name the series it describes)"
        )
    versions[profile.version] = profile
    if profile.default_version:
        _DEFAULT[profile.name] = profile.version
    return profile


_LOADED: list[bool] = []


def load_engines() -> None:
    """Import every module of this package once (``pkgutil``, as :mod:`costmodel.rules` does):
    importing an engine module registers its profile. The package's ``__init__`` calls it, and
    so does every lookup, to make sure."""
    if _LOADED:
        return
    _LOADED.append(True)
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{mod.name}")


def _overheads_of(name: str, max_num_seqs: int, max_num_batched_tokens: int) -> EngineOverheads:
    """:meth:`EngineOverheads.for_framework`'s lookup: profile ``name``'s overheads at these limits."""
    return get_engine(name, what="engine overheads for framework").overheads(
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
    )


def get_engine(ref: str, *, what: str = "engine profile") -> EngineProfile:
    """The profile ``NAME`` (its default version) or ``NAME@VERSION``; an unknown one is a
    one-line error listing the known ones (:func:`engine_names`).

    Parameters
    ----------
    ref : str
        ``NAME`` (the default version) or ``NAME@VERSION``.
    what : str
        What the caller calls it, in the error (e.g. ``"--engine"``).

    Returns
    -------
    EngineProfile

    Raises
    ------
    CostModelError
        When ``ref`` is malformed or names no registered profile (the known ones listed).
    """
    load_engines()
    if not isinstance(ref, str):
        raise CostModelError(f"{what} must be NAME or NAME@VERSION, got {ref!r}")
    name, at, version = ref.partition("@")
    if at and not version:  # 'vllm@' was read as the default version, unsaid
        raise CostModelError(f"{what} {ref[:60]!r} names no version after '@': give NAME or NAME@VERSION")
    versions = _REGISTRY.get(name)
    if versions is None:
        raise CostModelError(f"no {what} {ref[:60]!r}; known: {', '.join(engine_names())}")
    if not version:
        if name not in _DEFAULT:
            raise CostModelError(
                f"{what} {name!r} has no default version; known: {', '.join(engine_names())}"
            )
        version = _DEFAULT[name]
    if version not in versions:
        known = ", ".join(f"{name}@{v}" for v in versions)
        raise CostModelError(f"no {what} {ref[:60]!r}; {name} has: {known}")
    return versions[version]


def release_profile(name: str, release: str) -> EngineProfile | None:
    """The registered profile of engine ``name`` that describes ``release``: the one whose version,
    or one of whose :attr:`~EngineProfile.releases`, is the longest release prefix of it (``0.12``
    describes ``0.12``, ``0.12.0`` and ``0.12.1-rc1``, not ``0.120``; ``0.5.1`` describes
    ``0.5.1.post1`` before ``0.5`` does; ``vllm@0.20`` describes ``0.19.0``, one of its releases).

    Parameters
    ----------
    name : str
        The engine's registered name (``vllm``, ``sglang``, ...).
    release : str
        A release string as a benchmark or a user states it (``0.12.0``, ``0.5.1.post1``).

    Returns
    -------
    EngineProfile or None
        None when no registered version is a prefix of ``release`` (an unknown name, a nightly
        build, a release between profiles): the caller decides what stands in and says so.

    Raises
    ------
    CostModelError
        When ``release`` is not text.

    >>> release_profile("vllm", "0.12.0").ref
    'vllm@0.12'
    >>> release_profile("sglang", "0.5.1.post1").ref, release_profile("sglang", "0.5.10").ref
    ('sglang@0.5.1', 'sglang@0.5')
    >>> release_profile("vllm", "0.10.2").ref, release_profile("vllm", "0.19.0").ref
    ('vllm@0.10', 'vllm@0.20')
    >>> release_profile("vllm", "0.9.2") is None, release_profile("vllm", "0.21.0") is None
    (True, True)
    """
    if not isinstance(release, str):
        raise CostModelError(f"a release must be text such as '0.12.0', got {release!r}"[:200])
    load_engines()
    found = [
        (len(v), p)
        for p in _REGISTRY.get(name, {}).values()
        for v in (p.version, *p.releases)
        if release == v or release.startswith((v + ".", v + "-", v + "rc", v + "post"))
    ]
    return max(found, key=lambda x: x[0], default=(0, None))[1]


def engines() -> tuple[EngineProfile, ...]:
    """Every registered profile, by name then version.

    Returns
    -------
    tuple of EngineProfile
    """
    load_engines()
    return tuple(p for n in sorted(_REGISTRY) for _, p in sorted(_REGISTRY[n].items(), key=_version_key))


def _version_key(item: tuple[str, EngineProfile]) -> tuple[tuple[int, int | str], ...]:
    """A version's sort key, numerically per dotted part (``0.6`` before ``0.11``; a part that is
    not a number sorts after the numbers, as text)."""
    return tuple((0, int(x)) if x.isdigit() else (1, x) for x in item[0].split("."))


def engine_names() -> tuple[str, ...]:
    """Every registered ``name@version``; a default version also answers to its bare name.

    Returns
    -------
    tuple of str
        ``name@version`` of every profile.
    """
    return tuple(p.ref for p in engines())


install_overheads_lookup(_overheads_of)
