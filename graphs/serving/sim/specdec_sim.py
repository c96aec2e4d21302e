"""Speculative decoding inside the serving simulator: draft ``k`` tokens, verify ``k + 1``.

Each iteration of a speculating replica (vLLM's ``speculative_config``: a draft model, the
model's own MTP module, or an n-gram / prompt-lookup proposer) does, for every decoding
sequence that still has ``r >= 2`` tokens to produce:

1. the proposer drafts ``p = min(k, r - 1)`` tokens (none past the request's last);
2. the target verifies ``p + 1`` positions (the last sampled token and the ``p`` drafted) in the
   same forward as the other sequences' work: a chunk of ``p + 1`` new tokens after the
   sequence's ``c`` cached ones (causal attention over ``c + p + 1`` keys, the cache read once),
   with lm_head rows for all ``p + 1`` (:meth:`MixedStep.time_sums` ``chunks`` and ``logit_rows``);
3. ``a`` of the drafted tokens are accepted, position by position, and the sequence emits
   ``a + 1`` tokens (the accepted ones and the target's own next one); its KV grows by ``a + 1``
   (the rejected positions' slots are overwritten next time, as vLLM's lookahead slots are).

Acceptance. Position ``j`` is accepted, given that ``1 .. j-1`` were, with probability ``a_j``
(a rate ``alpha`` is ``a_j = alpha`` for all ``j``), so

.. math::

    E[a + 1] = 1 + \\sum_{j=1}^{p} \\prod_{i \\le j} a_i
             \\;=\\; \\frac{1 - \\alpha^{p+1}}{1 - \\alpha} \\text{ for i.i.d. } \\alpha

(Leviathan et al. 2023, :func:`graphs.serving.analysis.specdec.expected_tokens`). Draws are seeded; in
expected-value mode every sequence accrues ``E[a]`` per verification and emits the whole part.

Cost per iteration (s), ``F`` the proposer's own mixed step (:class:`MixedStep`) over the ``n``
speculating sequences at contexts ``c_i + 1 + j`` and the iteration's prefill chunks ``P``:

.. math::

    T = T_{target}(D, \\{(p_i + 1, c_i)\\}, P) + F(n, \\textstyle\\sum (c_i + 1), P)
        + \\sum_{j=1}^{k-1} F(n_j, \\textstyle\\sum (c_i + 1 + j), \\varnothing)

(``n_j`` the sequences drafting more than ``j`` tokens; for MLA models the verify runs on the
decode path, :meth:`Speculator.iteration_time`): one forward of the proposer per drafted
token (a separate draft model's decode; DeepSeek-V3's MTP module reused for every position, as
vLLM reuses it beyond ``num_nextn_predict_layers``), the first also prefilling the prompts'
chunks so that the proposer holds their KV. ``mtp``'s ``F`` is the MTP nodes' time: the mixed
step of the model with its MTP module minus the one without (the step is a sum of per-kernel
rooflines, so the difference is exactly those kernels). ``ngram`` drafts on the CPU: ``F = 0``.
A draft model's weights and KV (``kv_d`` bytes per token) share the device: the KV blocks are
``floor((u C - W - W_d - a N) / (b (kv + kv_d)))`` (:func:`graphs.serving.sim.engine.kv_blocks`).

With a predictor (:class:`graphs.serving.pricing.predictor.Predictor`) ``T_target`` and ``F`` are its
predicted mixed steps, each kernel at ``max(prediction, bound)`` (a verify chunk's attention
after its cached prefix has no measured kernel of its shape: the ``q = kv`` kernel at its KV
length scaled by the bound ratio, at least one decode at that length, counted as a neighbour:
:meth:`graphs.serving.pricing.predictor.PredictedStep.prefix_chunk_attention`); ``mtp``'s ``F`` is then the
difference of the two predicted steps, each kernel clamped to its own bound: the plain step's
kernels are the full step's but the module's, priced alike, so the difference is the module's
kernels, and the plain step's seconds come off the full step's coverage (:meth:`PredictedStep.take_off`).

A draft model runs on the target's ``tp`` devices (vLLM's default for the draft's tensor
parallelism). Not modelled: the proposer's first forward runs one token, not the ``a + 1`` just accepted
(EAGLE and draft models re-read those; a few tokens more of a small model), tree drafts, and the
target's rejection-sampling kernel.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware
from costmodel.results import Result

from ..analysis.specdec import K_MAX_LIMIT
from ..pricing.predictor import BOUND, PredictedStep, predicted_mixed_step
from ..pricing.priced import priced_step
from ..step.ledger_fit import build_ledger, decode_memory
from ..step.mixed import MixedStep, mixed_step
from ..step.workload import Workload, as_workload

_Rows = list[tuple[float, float]]  #: (new tokens, cached tokens) per chunk or verify
_Ctxs = list[float] | None  #: each decode's context (a sliding-window model needs them)

__all__ = [
    "SpecConfig",
    "SpecStats",
    "Speculator",
    "PROPOSERS",
    "SpecForms",
    "spec_forms",
]

#: proposers that are not a catalog model: the model's own MTP module, and prompt lookup (free)
PROPOSERS = ("mtp", "ngram")


@dataclass(frozen=True)
class SpecConfig(Result):
    """What drafts (a catalog model name or config path, ``mtp`` or ``ngram``), how many tokens
    ``k`` per step, and the conditional acceptance ``accept[j]`` of position ``j + 1`` (one rate,
    a number or a 1-tuple, holds for every position, as ``--spec-accept A``)."""

    draft: str
    k: int
    accept: tuple[float, ...]
    expected: bool = False  #: expected-value mode instead of seeded draws
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or not 1 <= self.k <= K_MAX_LIMIT:
            raise CostModelError(
                f"k (--spec-k) must be a whole number of drafted tokens in [1, {K_MAX_LIMIT}], got {self.k!r}"
            )
        accept: object = self.accept
        if isinstance(accept, int | float) and not isinstance(accept, bool):
            accept = (accept,)  # one rate for every position, as --spec-accept A
        if not isinstance(accept, tuple | list):
            raise CostModelError(
                f"acceptance (--spec-accept) must be one rate in [0, 1] or k of them, got {type(accept).__name__} "
                f"{repr(accept)[:40]}"
            )
        if len(accept) == 1:
            accept = tuple(accept) * self.k
        object.__setattr__(self, "accept", tuple(accept))
        if len(self.accept) != self.k:
            raise CostModelError(
                f"acceptance (--spec-accept) has {len(self.accept)} per-position rate(s) for k = {self.k} drafted tokens; "
                "give one rate or k of them"
            )
        for a in self.accept:
            if not (isinstance(a, int | float) and 0 <= a <= 1):
                raise CostModelError(f"acceptance rates (--spec-accept) must be in [0, 1], got {a!r}")

    @classmethod
    def parse(cls, draft: str, k: int, accept: str, *, expected: bool = False, seed: int = 0) -> SpecConfig:
        """From the CLI's text: ``accept`` is one rate ``A`` (every position) or ``a1,a2,..,ak``.

        Parameters
        ----------
        draft : str
            What drafts: a catalog model name or config path, ``mtp`` or ``ngram``.
        k : int
            Tokens drafted per step.
        accept : str
            ``--spec-accept``: one rate in ``[0, 1]`` for every position, or ``k`` comma-separated.
        expected : bool
            Accept the expected number of tokens (carrying the fraction) instead of seeded draws.
        seed : int
            The seed of the draws.

        Returns
        -------
        SpecConfig

        Raises
        ------
        CostModelError
            When a rate is not a finite number in ``[0, 1]`` or the count is not 1 or ``k``.
        """
        try:
            rates = tuple(float(x) for x in accept.split(","))
        except ValueError:
            raise CostModelError(
                f"--spec-accept must be a rate in [0, 1] or k comma-separated rates, got {accept[:60]!r}"
            ) from None
        if len(rates) == 1:
            rates = rates * k
        if any(not math.isfinite(r) for r in rates):
            raise CostModelError(f"--spec-accept rates must be finite numbers in [0, 1], got {accept[:60]!r}")
        return cls(draft, k, rates, expected, seed)

    def expected_tokens(self, p: int | None = None) -> float:
        """``E[a + 1] = 1 + sum_j prod_{i<=j} a_i`` over the first ``p`` (default ``k``) positions.

        Parameters
        ----------
        p : int, optional
            Positions drafted (default ``k``).

        Returns
        -------
        float
            Expected tokens emitted per verification.
        """
        p = self.k if p is None else p
        return 1.0 + float(np.cumprod(self.accept[:p]).sum()) if p else 1.0


@dataclass(frozen=True)
class SpecStats(Result):
    """What speculation did over a run: verifications, drafted and accepted tokens, seconds."""

    draft: str
    k: int
    verifications: int  #: sequence-iterations that verified drafted tokens
    drafted: int
    accepted: int
    draft_s: float  #: proposer seconds, summed over the replicas' iterations
    iteration_s: float  #: all iteration seconds of the speculating replicas

    @property
    def tokens_per_verification(self) -> float:
        """Tokens emitted per verifying sequence and iteration: ``(accepted + verifications) / verifications``."""
        return (self.accepted + self.verifications) / self.verifications if self.verifications else math.nan

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else math.nan

    @property
    def draft_share(self) -> float:
        return self.draft_s / self.iteration_s if self.iteration_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The fields, with the tokens per verification, acceptance and the proposer's share of the seconds.

        Returns
        -------
        dict
        """
        d = super().to_dict()
        d.update(
            tokens_per_verification=self.tokens_per_verification,
            acceptance=self.acceptance,
            draft_share=self.draft_share,
        )
        return d


class Speculator:
    """The proposer's cost, the acceptance draws and the counters of one simulation (module doc).

    ``target_step`` prices the target's forwards (for ``mtp``: the model without its MTP
    module, as a plain run builds it), ``ledger`` sizes the KV blocks (weights and KV of target and draft together)."""

    def __init__(
        self, spec: SpecConfig, w: Workload, hw: Hardware, tp: int = 1, predictor: Any = None
    ) -> None:
        pred = predictor or BOUND

        def step_of(x: Any) -> Any:  # the bound's mixed step, or the predictor's (each kernel priced)
            return (
                mixed_step(x, hw, tp=tp)
                if pred.is_bound
                else predicted_mixed_step(x, hw, tp=tp, predictor=pred)
            )

        self.spec = spec
        self.predictor = pred
        self.k = spec.k
        self._rng = np.random.default_rng(spec.seed)
        self._credit: dict[int, float] = {}
        self.verifications = self.drafted = self.accepted = 0
        self.draft_s = self.iteration_s = 0.0
        cfg = w.config
        led = build_ledger(w, "decode", 1, tp, None, None)
        self._draft: MixedStep | None = None
        self._minus: MixedStep | None = None  #: mtp: the step without the module, subtracted
        if spec.draft == "mtp":
            if not cfg.mtp_layers:
                raise CostModelError(
                    f"--spec-draft mtp: {cfg.name} has no multi-token-prediction module (mtp_layers = 0); "
                    "the catalog's deepseek-v3-mtp keeps DeepSeek-V3's"
                )
            # the target is the model as a plain run builds it (no MTP: ModelConfig.mtp_active);
            # the module's forward is the step with it loaded and run minus that. With a predictor
            # both are priced kernel by kernel, each clamped to its own bound, and the plain step's
            # kernels are the full step's less the module's, priced alike: the difference is the
            # module's kernels (:meth:`_forward`)
            full = as_workload(dataclasses.replace(cfg, mtp_active=True))
            self.target_step = step_of(dataclasses.replace(cfg, mtp_active=False))
            self._draft = step_of(full)
            self._minus = self.target_step
            self.ledger: Any = build_ledger(full, "decode", 1, tp, None, None)  # its weights and KV too
            return
        self.target_step = step_of(w)
        self.ledger = led
        if spec.draft == "ngram":
            return
        dw = as_workload(spec.draft)
        if dw.config.vocab_size != cfg.vocab_size:
            raise CostModelError(
                f"--spec-draft {spec.draft[:60]}: its vocabulary ({dw.config.vocab_size}) is not the target's "
                f"({cfg.vocab_size}); a draft must share the target's tokenizer"
            )
        self._draft = step_of(dw)
        dled = build_ledger(dw, "decode", 1, tp, None, None)
        self.ledger = SimpleNamespace(
            weights_bytes=as_float(led.weights_bytes) + as_float(dled.weights_bytes),
            # the two forwards run one after the other: the larger live set
            activation_bytes_per_token=max(
                as_float(led.activation_bytes_per_token), as_float(dled.activation_bytes_per_token)
            ),
            kv_bytes_per_token=as_float(led.kv_bytes_per_token) + as_float(dled.kv_bytes_per_token),
        )

    def _steps(self) -> list[Any]:
        """The predicted steps this run prices (each once: a draft that is the target is one step)."""
        steps = [self.target_step]
        if self._draft is not None and self._draft is not self.target_step:
            steps.append(self._draft)
        return steps

    def reset(self) -> None:
        """Clear the predicted steps' seconds (a predictor's run; the bound has none)."""
        if not self.predictor.is_bound:
            for st in self._steps():
                st.reset()

    def coverage(self) -> Any:
        """What the target's and the proposer's predicted seconds rest on, together.

        Returns
        -------
        Coverage or None
            Seconds by what they rest on (None when no predictor prices the steps).
        """
        parts = [st.coverage() for st in self._steps()]
        return sum(parts[1:], parts[0])

    @property
    def clamped_s(self) -> float:
        """Seconds of target and proposer where a prediction fell below its bound."""
        return float(sum(st.clamped_s for st in self._steps()))

    def _forward(self, n: int, sum_ctx: float, chunks: Sequence[tuple[float, float]], ctxs: Any) -> float:
        if self._draft is None or (n == 0 and not chunks):
            return 0.0
        if self._minus is None:
            return float(self._draft.time_sums(n, sum_ctx, chunks, ctxs))
        if self.predictor.is_bound:
            return float(
                self._draft.time_sums(n, sum_ctx, chunks, ctxs)
                - self._minus.time_sums(n, sum_ctx, chunks, ctxs)
            )
        # MTP on predicted steps: the plain step's seconds come off the full step's, pair by pair
        # of what they rest on, and the target's own coverage keeps only the target's forwards
        full, minus = cast("PredictedStep", self._draft), cast("PredictedStep", self._minus)
        mark = minus.recorded()
        t = full.time_sums(n, sum_ctx, chunks, ctxs) - minus.time_sums(n, sum_ctx, chunks, ctxs)
        full.take_off(minus, mark)
        return float(t)

    def draft_time(
        self, verifies: Sequence[tuple[float, float]], chunks: Sequence[tuple[float, float]]
    ) -> float:
        """The proposer's seconds for one iteration (module doc): ``verifies`` are ``(p + 1, c)``
        per speculating sequence, ``chunks`` the iteration's prefill chunks.

        Parameters
        ----------
        verifies : sequence of (float, float)
            ``(p + 1, c)`` per speculating sequence: tokens verified and its context.
        chunks : sequence of (float, float)
            The iteration's prefill chunks ``(new tokens, cached prefix)``.

        Returns
        -------
        float
            Seconds.
        """
        t = 0.0
        windowed = self._draft is not None and self._draft.windowed
        for j in range(self.k):
            ctx = [c + 1 + j for n, c in verifies if n - 1 > j]
            if j and not ctx:
                break
            t += self._forward(len(ctx), float(sum(ctx)), chunks if j == 0 else (), ctx if windowed else None)
        return t

    def iteration_time(
        self,
        n_dec: int,
        sum_ctx: float,
        chunks: list[tuple[float, float]],
        ctxs: list[float] | None,
        verifies: list[tuple[float, float]],
        *,
        record: bool = True,
    ) -> float:
        """Target forward (verifications as chunks with all their logits) plus the proposer's
        (``record``: counted in the run's draft and iteration seconds).

        A model whose prefill chunks take other token-wise kernels than its decodes (MLA, which
        decompresses a chunk's cached prefix) verifies on the decode path instead, as its decode
        kernels take the ``p + 1`` queries (FlashMLA): ``p + 1`` decodes at contexts
        ``c + 1 .. c + p + 1``, each with its own lm_head row (the cache is then counted as read
        ``p + 1`` times: an upper bound on that part). Not ``record``: a predicted step's
        seconds are not counted in what the run rests on either (the call only splits a time).

        Parameters
        ----------
        n_dec : int
            Plain decodes in the iteration.
        sum_ctx : float
            The sum of their KV lengths (tokens).
        chunks : list of (float, float)
            Prefill chunks ``(new tokens, cached prefix)``.
        ctxs : list of float or None
            Each decode's KV length (sliding-window models).
        verifies : list of (float, float)
            ``(p + 1, c)`` per speculating sequence.
        record : bool
            Count the seconds in the run's draft and iteration totals.

        Returns
        -------
        float
            Seconds for the iteration.
        """
        # a predicted step adds every call's seconds to its coverage: kept as they were here
        saved = [list(st._acc) for st in self._steps()] if not (record or self.predictor.is_bound) else None
        try:
            return self._priced(n_dec, sum_ctx, chunks, ctxs, verifies, record)
        finally:
            for st, acc in zip(self._steps(), saved or (), strict=False):
                st._acc[:] = acc

    def _priced(
        self, n_dec: int, sum_ctx: float, chunks: _Rows, ctxs: _Ctxs, verifies: _Rows, record: bool
    ) -> float:
        step = self.target_step
        if not step.shared_body:
            ctxs = None if ctxs is None else list(ctxs)  # the caller's list stays as it was
            for n, c in verifies:
                more = [c + 1 + j for j in range(int(n))]
                n_dec += len(more)
                sum_ctx += float(sum(more))
                if ctxs is not None:
                    ctxs.extend(more)
            target = step.time_sums(n_dec, sum_ctx, chunks, ctxs)
        else:
            target = step.time_sums(
                n_dec, sum_ctx, chunks + verifies, ctxs, logit_rows=int(sum(n - 1 for n, _ in verifies))
            )
        draft = self.draft_time(verifies, chunks)
        if record:
            self.draft_s += draft
            self.iteration_s += target + draft
        return target + draft

    def accept(self, seq: Any, drafted: int) -> int:
        """How many of ``drafted`` tokens the target accepts (seeded draws, or expected value).

        Parameters
        ----------
        seq : Sequence
            The speculating sequence.
        drafted : int
            Tokens it drafted this iteration.

        Returns
        -------
        int
            Tokens accepted, in ``[0, drafted]``.
        """
        rates = self.spec.accept
        if self.spec.expected:
            c = self._credit.get(id(seq), 0.0) + self.spec.expected_tokens(drafted) - 1.0
            a = min(drafted, math.floor(c + 1e-9))
            self._credit[id(seq)] = c - a
        else:
            a = 0
            while a < drafted and self._rng.random() < rates[a]:
                a += 1
        self.verifications += 1
        self.drafted += drafted
        self.accepted += a
        return a

    def stats(self) -> SpecStats:
        """What speculation did over the run so far.

        Returns
        -------
        SpecStats
        """
        return SpecStats(
            self.spec.draft,
            self.k,
            self.verifications,
            self.drafted,
            self.accepted,
            self.draft_s,
            self.iteration_s,
        )


class SpecForms:
    """Speculation's per-point forms for the design search, vectorised over (batch, ctx)
    arrays: the same verify and draft steps :class:`Speculator` prices each iteration with, for
    ``b`` sequences all drafting ``k`` at KV length ``ctx`` (the cached ``ctx - 1`` plus the
    token being verified):

    .. math::

        TPOT = \\frac{T_{verify}(b, k + 1, ctx - 1) + \\sum_{j=0}^{k-1} F(b, ctx + j)}{E}

    with ``E = 1 + sum_j prod_{i<=j} a_i`` (:meth:`SpecConfig.expected_tokens`), ``T_verify``
    the chunked-prefill step with all logits (MLA: ``b (k + 1)`` decodes at the mean context
    ``ctx + k/2``, exact as decode attention is affine in ctx) and ``F`` the proposer's decode
    step; TTFT adds the proposer's prefill of the prompt, memory the draft's weights and KV.

    ``predictor`` prices the verify, draft and draft-prefill steps (:func:`graphs.serving.pricing.priced.priced_step`:
    each kernel at its prediction, never below its bound; default the bound; MTP's module is the
    full step minus the plain one, both priced, as in :class:`Speculator`)."""

    def __init__(self, config: Any, hw: Hardware, tp: int, spec: SpecConfig, predictor: Any = None) -> None:
        pred = predictor or BOUND

        def compiled_step(x: Any, hw: Hardware, phase: str, **kw: Any) -> Any:
            return priced_step(x, hw, phase, predictor=pred, **kw)

        self.predictor = pred
        self.spec = spec
        self.e = spec.expected_tokens()
        cfg = as_workload(config).config
        target = dataclasses.replace(cfg, mtp_active=False)  # a plain run's model (no MTP)
        if spec.draft == "mtp" and not cfg.mtp_layers:
            raise CostModelError(
                f"spec draft mtp: {cfg.name} has no multi-token-prediction module (mtp_layers = 0)"
            )
        self.mla = not mixed_step(target, hw, tp=tp).shared_body
        if self.mla:
            self.verify = compiled_step(target, hw, "decode", tp=tp)
        else:
            self.verify = compiled_step(target, hw, "prefill", tp=tp, chunked=True, logits="all")
        self.draft = self.minus = self.draft_prefill = self.prefill_minus = self.draft_memory = None
        if spec.draft == "mtp":  # the module's cost: the model with it loaded and run minus without
            full = dataclasses.replace(cfg, mtp_active=True)
            self.draft = compiled_step(full, hw, "decode", tp=tp)
            self.minus = compiled_step(target, hw, "decode", tp=tp)
            self.draft_prefill = compiled_step(full, hw, "prefill", tp=tp)
            self.prefill_minus = compiled_step(target, hw, "prefill", tp=tp)
            with_mtp, without = decode_memory(full, hw, tp=tp), decode_memory(target, hw, tp=tp)
            self.draft_memory = lambda b, ctx: with_mtp(b, ctx) - without(b, ctx)  # its weights and KV
        elif spec.draft != "ngram":
            dw = as_workload(spec.draft)
            if dw.config.vocab_size != cfg.vocab_size:
                raise CostModelError(
                    f"spec draft {spec.draft[:60]}: its vocabulary ({dw.config.vocab_size}) is not the target's "
                    f"({cfg.vocab_size})"
                )
            self.draft = compiled_step(dw, hw, "decode", tp=tp)
            self.draft_prefill = compiled_step(dw, hw, "prefill", tp=tp)
            self.draft_memory = decode_memory(dw, hw, tp=tp)

    def _steps(self, b: np.ndarray, ctx: np.ndarray) -> Iterator[tuple[Any, tuple[np.ndarray, ...], Any]]:
        """The steps one verification runs at the points: (step, its arguments, the step whose
        share of it is not the draft's: MTP's plain step, else None), the verify first."""
        k = self.spec.k
        if self.mla:
            yield self.verify, (b * (k + 1), ctx + k / 2), None
        else:
            yield self.verify, (b, np.full_like(ctx, k + 1.0), ctx - 1), None
        if self.draft is not None:
            for j in range(k):
                yield self.draft, (b, ctx + j), self.minus

    def tpot(self, b: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """Seconds per output token of each point (class doc).

        Parameters
        ----------
        b : numpy.ndarray
            Sequences per step.
        ctx : numpy.ndarray
            KV length per sequence (tokens).

        Returns
        -------
        numpy.ndarray
            Seconds per output token.
        """
        t: Any = 0.0
        for step, args, minus in self._steps(b, ctx):
            t = t + step.step_array(*args)
            if minus is not None:
                t = t - minus.step_array(*args)
        return t / self.e

    def coverage(self, b: np.ndarray, ctx: np.ndarray) -> Any:
        """What :meth:`tpot`'s seconds at the points rest on (a
        :class:`graphs.serving.pricing.kernel_sources.Coverage`: the verify step's and each draft step's
        priced seconds summed, MTP's module as the full step less the plain one, reason by reason),
        or None when the steps are not priced by a predictor.

        Parameters
        ----------
        b : numpy.ndarray
            Sequences per step.
        ctx : numpy.ndarray
            KV length per sequence (tokens).

        Returns
        -------
        Coverage or None
        """
        if not hasattr(self.verify, "coverage_array"):
            return None
        cov: Any = None
        for step, args, minus in self._steps(b, ctx):
            c = step.coverage_array(*args)
            if minus is not None:
                c = c.minus(minus.coverage_array(*args))
            cov = c if cov is None else cov + c
        return cov

    def ttft_extra(self, prompt: np.ndarray) -> np.ndarray:
        """The proposer's prefill of the prompt (s; zero for ngram; for MTP the module's share of
        the prefill, which a plain run's step does not include).

        Parameters
        ----------
        prompt : numpy.ndarray
            Prompt tokens.

        Returns
        -------
        numpy.ndarray
            Seconds added to TTFT.
        """
        if self.draft_prefill is None:
            return np.zeros_like(prompt)
        t = self.draft_prefill.step_array(np.ones_like(prompt), prompt)
        if self.prefill_minus is not None:
            t = t - self.prefill_minus.step_array(np.ones_like(prompt), prompt)
        return t

    def memory(self, b: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """The draft model's bytes per device (weights and its KV), zero without one.

        Parameters
        ----------
        b : numpy.ndarray
            Sequences.
        ctx : numpy.ndarray
            KV length per sequence (tokens).

        Returns
        -------
        numpy.ndarray
            Bytes per device.
        """
        if self.draft_memory is None:
            return np.zeros_like(b)
        return self.draft_memory(b, ctx)


_FORMS: dict[tuple[Any, ...], SpecForms] = {}


def spec_forms(config: Any, hw: Hardware, tp: int, spec: SpecConfig, predictor: Any = None) -> SpecForms:
    """:class:`SpecForms`, built once per (config, device, tp, spec, predictor) in this process.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The target model.
    hw : Hardware
        The device.
    tp : int
        Tensor-parallel degree.
    spec : SpecConfig
        The drafter, ``k`` and the acceptance per position.
    predictor : Predictor, optional
        Prices the steps (default: the bound).

    Returns
    -------
    SpecForms
        TPOT (s), the TTFT the proposer adds (s) and its memory (bytes), numpy-vectorised over
        (batch, ctx).
    """
    key = (config, hw, tp, spec, predictor)
    f = _FORMS.get(key)
    if f is None:
        if len(_FORMS) >= 256:
            _FORMS.clear()
        f = _FORMS[key] = SpecForms(config, hw, tp, spec, predictor)
    return f
