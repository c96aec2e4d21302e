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

with ``r`` :attr:`~EngineOverheads.request_s` (API server and tokenisation: the request reaches
the engine's queue ``r`` after it was sent), ``d`` :attr:`~EngineOverheads.output_token_s`
per output token (detokenisation and streaming, serial per request) and ``m`` output tokens: the
time per output token after the first grows by exactly ``d``.

Scheduler policy (:data:`POLICIES`): ``recompute`` is vLLM's (blocks are allocated as tokens
are computed; when they run out the latest admitted sequence is preempted and later recomputed);
``guaranteed_no_evict`` is TensorRT-LLM's default capacity scheduler (a request is admitted only
when the blocks of its prompt plus its maximum output can be reserved, so a started request is
never paused: https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/useful-runtime-flags.html,
"Capacity Scheduler Policy").

Sources of the defaults (:meth:`EngineOverheads.for_framework`; the bound uses none):

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
* Everything else (the per-token CPU term, the request path, the per-output-token streaming
  cost, and all of SGLang's terms) is ASSUMED: no source publishes them, and the fit above
  cannot separate the request path from the prefill kernels' error (its TTFT misses grow with
  the prompt). Said so in :attr:`EngineOverheads.basis` and in every output that uses them;
  ``costmodel calibrate serving`` fits them to a user's own benchmark.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from costmodel.errors import CostModelError

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

#: scheduler policies: vLLM's recompute preemption, TensorRT-LLM's reserve-at-admission
POLICIES = ("recompute", "guaranteed_no_evict")
#: the fitted terms (s; ``kernel_scale`` dimensionless), in the order they print
TERMS = ("kernel_scale", "iteration_s", "per_seq_s", "per_token_s", "request_s", "output_token_s")
#: the largest accepted value of each time term (s): a second of CPU per iteration is no engine
_TERM_MAX = {
    "iteration_s": 1.0,
    "per_seq_s": 0.1,
    "per_token_s": 0.01,
    "request_s": 60.0,
    "output_token_s": 1.0,
}
KERNEL_SCALE_RANGE = (0.05, 20.0)  #: accepted kernel_scale values
#: every term's accepted range (its unit: s, or the dimensionless kernel scale)
TERM_RANGES = {"kernel_scale": KERNEL_SCALE_RANGE, **{t: (0.0, hi) for t, hi in _TERM_MAX.items()}}


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


def vllm_capture_sizes(max_num_seqs: int = 256, max_num_batched_tokens: int = 8192) -> tuple[int, ...]:
    """vLLM's default ``cudagraph_capture_sizes``: ``[1, 2, 4] + range(8, 256, 8) +
    range(256, M + 1, 16)`` up to ``M = min(2 max_num_seqs, 512, max_num_batched_tokens)``.

    >>> vllm_capture_sizes(8)[:6]
    (1, 2, 4, 8, 16)
    >>> vllm_capture_sizes()[-3:]
    (480, 496, 512)
    """
    m = min(2 * max_num_seqs, 512, max_num_batched_tokens)
    sizes = [i for i in (1, 2, 4) if i <= m] + list(range(8, min(m + 1, 256), 8))
    if m >= 256:
        sizes += list(range(256, m + 1, 16))
    return tuple(sorted(set(sizes)))


#: defaults per framework: the terms :data:`FITTED` names are fitted (module doc,
#: ``docs/overhead_fit.md``), the others assumed (no source gives them; fit your own)
DEFAULTS: dict[str, dict[str, float]] = {
    "vllm": {
        "iteration_s": 0.0,  # fitted: 0, held at its lower bound
        "per_seq_s": 3.4e-6,  # fitted: 3.42e-06 (s.e. 8.1e-06)
        "per_token_s": 2e-8,
        "request_s": 4e-3,
        "output_token_s": 2e-5,
    },
    "trtllm": {
        "iteration_s": 0.0,  # fitted: 0, held at its lower bound
        "per_seq_s": 3.1e-6,  # fitted: 3.09e-06 (s.e. 1.3e-05)
        "per_token_s": 1e-8,
        "request_s": 3e-3,
        "output_token_s": 2e-5,
    },
    "sglang": {
        "iteration_s": 3e-4,
        "per_seq_s": 2e-6,
        "per_token_s": 2e-8,
        "request_s": 4e-3,
        "output_token_s": 2e-5,
    },
}
#: the terms of :data:`DEFAULTS` fitted to measured runs, per framework (module doc)
FITTED: dict[str, tuple[str, ...]] = {
    "vllm": ("iteration_s", "per_seq_s"),
    "trtllm": ("iteration_s", "per_seq_s"),
}
#: each framework's default scheduler policy (module doc)
FRAMEWORK_POLICY = {"vllm": "recompute", "trtllm": "guaranteed_no_evict", "sglang": "recompute"}


def _basis(name: str) -> str:
    """Where ``name``'s defaults come from, in one phrase (printed with them)."""
    fitted = FITTED.get(name, ())
    if not fitted:
        return f"{name} defaults (assumed, not fitted: `costmodel calibrate serving` fits them)"
    return (
        f"{name} defaults ({' and '.join(fitted)} fitted to InferenceX's H200 runs (inferred), docs/overhead_fit.md; "
        "the rest assumed: `costmodel calibrate serving` fits them)"
    )


@dataclass(frozen=True, slots=True)
class EngineOverheads:
    """The engine terms of the module doc (seconds; ``kernel_scale`` dimensionless).

    ``cudagraph_sizes`` empty: no padding. ``policy`` None: the :class:`EngineConfig`'s.
    ``basis`` says where the values come from (printed with them)."""

    iteration_s: float = 0.0
    per_seq_s: float = 0.0
    per_token_s: float = 0.0
    request_s: float = 0.0
    output_token_s: float = 0.0
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
        """``name``'s defaults (:data:`DEFAULTS`: fitted where :data:`FITTED` says, else assumed),
        its capture sizes and its policy."""
        if name not in DEFAULTS:
            raise CostModelError(f"no engine overheads for framework {name!r}; known: {', '.join(DEFAULTS)}")
        sizes = () if name == "trtllm" else vllm_capture_sizes(max_num_seqs, max_num_batched_tokens)
        return cls(
            **DEFAULTS[name],
            cudagraph_sizes=sizes,
            policy=FRAMEWORK_POLICY[name],
            basis=_basis(name),
        )

    @classmethod
    def default(
        cls, framework: str | None, *, max_num_seqs: int = 256, max_num_batched_tokens: int = 8192
    ) -> EngineOverheads:
        """What a run takes without explicit overheads: the framework's (:meth:`for_framework`)
        when its kernels price the steps, none for the bound (``framework`` None)."""
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
        """``a + b n + c T`` (s) for an iteration of ``seqs`` sequences and ``tokens`` new tokens."""
        return self.iteration_s + self.per_seq_s * seqs + self.per_token_s * tokens

    def padded(self, n: int) -> int:
        """The capture size a decode-only batch of ``n`` runs at: the smallest ``>= n``; ``n``
        itself beyond the largest (no graph: eager, unpadded) or with no sizes."""
        s = self._sorted
        i = bisect.bisect_left(s, n)
        return s[i] if i < len(s) else n

    def with_terms(self, **terms: Any) -> EngineOverheads:
        """A copy with some terms replaced (a fit's values)."""
        return replace(self, **terms)

    def summary(self) -> str:
        """One line: every term used, so that nothing added to the kernels is hidden."""
        graphs = (
            f"CUDA-graph padding to {len(self.cudagraph_sizes)} sizes up to {max(self.cudagraph_sizes)}"
            if self.cudagraph_sizes
            else "no CUDA-graph padding"
        )
        return (
            f"engine overheads ({self.basis}): kernels x{self.kernel_scale:.4g}; per iteration "
            f"{self.iteration_s * 1e3:.4g} ms + {self.per_seq_s * 1e6:.4g} us/sequence + "
            f"{self.per_token_s * 1e9:.4g} ns/token; request path {self.request_s * 1e3:.4g} ms on TTFT; "
            f"{self.output_token_s * 1e6:.4g} us per output token; {graphs}; "
            f"scheduler {self.policy or 'as the engine config says'}"
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("_sorted", None)
        d["cudagraph_sizes"] = list(self.cudagraph_sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "overheads") -> EngineOverheads:
        """Back from :meth:`to_dict`; an unknown or missing key is an error naming it."""
        names = {f.name for f in fields(cls) if f.init}
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
        return cls(**{**d, "cudagraph_sizes": tuple(sizes), "basis": d["basis"][:300]})
