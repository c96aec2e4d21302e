"""One step as an engine serves it: the TPOT of a steady decode batch and the mean TTFT of prompts
reaching an idle engine, each with the expected error of deployments like it.

A ``decode`` or ``prefill`` step priced with measured kernels (:mod:`graphs.serving.pricing.predict`)
is the GPU's time alone. What a client measures adds what the engine does around it, as the engine
profile the validation tables replay says (:mod:`graphs.serving.engines`; ``--predict vllm`` runs
``vllm``'s default profile, as ``simulate --predict vllm`` does), and only that served figure is
what the validation tables' residuals (:mod:`graphs.serving.sim.served_errors`) were measured on.

**Decode.** ``B`` sequences decoding steadily, each with ``C`` tokens of KV (the token being
processed included): every iteration is the simulator's decode-only iteration
(:meth:`graphs.serving.sim.engine.Replica.iteration_time`, the same computation: the simulator's
own priced iteration, :func:`graphs.serving.pricing.predictor.predicted_mixed_step`), and in steady
state the engine hands over one iteration's tokens each period, each token then streamed after
``d`` (:mod:`graphs.serving.engines.knobs`):

.. math::

    g = \\max\\big(s\\, t_{step}(P(B), B C),\\; [s < 1]\\, t_{bound}(P(B), B C)\\big) + o + a + b B + c B,
    \\qquad \\mathrm{TPOT} = \\max(g,\\; B f / m) + d

with ``t_step(rows, sum of KV lengths)`` the iteration's kernels (its roofline ``t_bound``; a
sliding-window layer reads ``min(W, C)`` of each sequence), ``P(B)`` the CUDA-graph capture size the
batch is padded to (padding slots read no KV), ``s`` the kernel scale, ``o`` the engine config's
iteration overhead, ``a, b, c`` the CPU terms, ``f / m`` the shared front end's seconds per token
and ``d`` the detokenisation and streaming per output token (seconds). A batch the engine never
runs (more sequences than the profile's ``max_num_seqs`` or tokens than its budget, KV beyond its
pool, a model the simulator cannot serve) gets no served figure, and the answer says why.

**Prefill.** ``B`` requests of ``S`` prompt tokens sent at the same instant to an idle replica of
``tp`` devices: their mean TTFT as :func:`~graphs.serving.sim.simulator.simulate` serves them (one
output token each). The engine starts on the first arrival alone (it does not wait for others),
the rest follow in the next iterations; for each request

.. math::

    \\mathrm{TTFT} = \\underbrace{r + p\\,S + [\\text{prefix caching}]\\,h\\,S}_{\\text{request path}}
    + w + \\sum_{\\text{its iterations}} g_k + \\frac{(n + 1) f}{2 m} + d

(``w`` the wait for earlier requests' iterations, ``n`` the tokens its last iteration emitted; the
engine's chunked prefill, token budget and scheduler as the profile sets them). At light load the
validation tables' TTFT is exactly this: request path plus prefill (issue 42's check). What the
run's kernels rest on is said with it: a chunk after a cached prefix has no measured attention
kernel of its shape and is priced from the ``q = kv`` kernel at its KV length, scaled by the bound
ratio (a neighbour: :mod:`graphs.serving.pricing.predictor`).

**Expected error.** The served TPOT is judged by the TPOT rows, the served TTFT by the TTFT rows
of the run's regime (its simulated queue share of TTFT): the group of deployments like it
(:meth:`~graphs.serving.sim.served_errors.ServedErrors.like`: framework, device, dense/MoE), its
median |error| and its calibrated P10-P90 around the served value, widened where the step's
kernels were priced from other devices' fits (:func:`~graphs.serving.sim.intervals.widen`, and the
statement says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.results import Result

from ..engines import EngineOverheads, EngineProfile, get_engine
from ..engines.knobs import scaled_kernels_s
from ..pricing.kernel_sources import Coverage
from ..pricing.predictor import Predictor, predicted_mixed_step
from ..pricing.protocols import MeteredIterationStep
from ..step.ledger_fit import build_ledger
from ..step.workload import Workload, as_workload
from .engine import EngineConfig, profile_engine
from .intervals import transfer_error, transfer_words, widen
from .requests import Request
from .served_errors import served_errors
from .simulator import Topology, pool_blocks, simulate

__all__ = ["ServedStep", "served_step", "step_expected_errors"]

#: the served metric each phase's step is
_METRIC = {"decode": "TPOT", "prefill": "TTFT"}
#: a refusal's reason is at most about this many characters (a symbolic form can be long)
_REASON_CHARS = 240


@dataclass(frozen=True)
class ServedStep(Result):
    """A step as the engine profile serves it (module doc), or why it has no served figure.

    Attributes
    ----------
    phase : str
        ``"decode"`` (the value is a TPOT) or ``"prefill"`` (a mean TTFT).
    profile : str
        The engine profile (``NAME@VERSION``) whose scheduler and overheads serve it.
    batch : int
        Sequences (decode) or requests sent together (prefill).
    tokens : int
        KV length of each decode (``C``) or prompt length (``S``).
    value_s : float or None
        The served TPOT or mean TTFT (s); None when the engine never runs the step (``refused``).
    kernels_s : float
        Decode: the iteration's kernels at the padded batch, scaled and floored. Prefill: the mean
        time from a request's arrival in the queue to its first token's hand-over (waiting,
        iterations' kernels and CPU). Seconds.
    cpu_s : float
        CPU and iteration overhead of one decode iteration (prefill: 0, inside ``kernels_s``) (s).
    request_path_s : float
        The request path before the queue (prefill; decode: 0) (s).
    streaming_s : float
        Detokenisation and streaming of a token, ``d`` (s).
    frontend_s : float
        The shared front end's period for the batch's tokens, ``B f / m`` (decode; 0 without one) (s).
    padded_batch : int
        The capture size a decode batch runs at (prefill: the batch).
    iterations : int
        Engine iterations the prefill took (decode: 1).
    queue_share : float
        The prefill run's queue share of TTFT (decode: 0).
    bound_share : float
        The share of the kernels' seconds priced at the roofline bound alone.
    bound_reason : str
        The largest of those reasons (empty when none).
    band_s : tuple of float or None
        The calibrated P10-P90 of the served value (s); None without one.
    basis : str
        What the band rests on.
    expected_error : str
        "expected ... error on deployments like this: ..." (empty when refused).
    overheads : str
        The engine overheads used, on one line (:meth:`EngineOverheads.summary`).
    refused : str
        Why there is no served figure (empty when there is one).
    """

    phase: str
    profile: str
    batch: int
    tokens: int
    value_s: float | None
    kernels_s: float = 0.0
    cpu_s: float = 0.0
    request_path_s: float = 0.0
    streaming_s: float = 0.0
    frontend_s: float = 0.0
    padded_batch: int = 0
    iterations: int = 0
    queue_share: float = 0.0
    bound_share: float = 0.0
    bound_reason: str = ""
    band_s: tuple[float, float] | None = None
    basis: str = ""
    expected_error: str = ""
    overheads: str = ""
    refused: str = ""

    @property
    def metric(self) -> str:
        """``TPOT`` (decode) or ``TTFT`` (prefill)."""
        return _METRIC[self.phase]

    def to_text(self) -> str:
        """The lines ``decode`` and ``prefill`` print with ``--predict``: the served value, how it
        is made, what its kernels rest on, its calibrated P10-P90 and the expected error.

        Returns
        -------
        str
        """
        what = (
            f"{self.batch} sequence(s) decoding at {self.tokens:,} tokens of KV each"
            if self.phase == "decode"
            else f"mean of {self.batch} request(s) of {self.tokens:,} prompt tokens sent at once to an idle engine"
        )
        head = f"{self.metric} as {self.profile} serves it ({what}):"
        if self.value_s is None:
            return "\n".join([head, f"  none: {self.refused}"])
        ms = 1e3
        if self.phase == "decode":
            front = (
                f"; the front end's {self.frontend_s * ms:.4g} ms for the batch's tokens bounds it"
                if self.frontend_s > self.kernels_s + self.cpu_s
                else ""
            )
            how = (
                f"  {self.value_s * ms:.3f} ms = kernels {self.kernels_s * ms:.3f} ms at the captured batch "
                f"{self.padded_batch} + CPU {self.cpu_s * ms:.4g} ms + streaming {self.streaming_s * ms:.4g} ms{front}"
            )
        else:
            waits = " (the engine starts the first alone; the others wait for it)" if self.batch > 1 else ""
            how = (
                f"  {self.value_s * ms:.3f} ms = request path {self.request_path_s * ms:.4g} ms + "
                f"{self.kernels_s * ms:.3f} ms in the engine over {self.iterations} iteration(s){waits} + "
                f"streaming {self.streaming_s * ms:.4g} ms"
            )
        lines = [head, how, f"  {self.overheads}"]
        if self.bound_share > 0.1:
            lines.append(
                f"  note: {100 * self.bound_share:.0f}% of its kernels' seconds are priced at the roofline bound "
                f"alone (largest: {self.bound_reason}): the served figure may be optimistic"
            )
        if self.band_s is not None:
            lo, hi = self.band_s
            lines.append(f"  P10-P90 [{lo * ms:.3f}, {hi * ms:.3f}] ms ({self.basis})")
        if self.expected_error:
            lines.append(f"  {self.expected_error}")
        return "\n".join(lines)


def _refused(phase: str, ref: str, batch: int, tokens: int, why: str) -> ServedStep:
    """No served figure, and why: ``why``'s ``": "``-separated parts while they fit
    :data:`_REASON_CHARS` (a symbolic form the simulator could not use is left out, marked ``...``)."""
    kept = ""
    for part in why.split(": "):
        joined = f"{kept}: {part}" if kept else part
        if len(joined) > _REASON_CHARS:
            kept = f"{kept}: ..." if kept else part[: _REASON_CHARS - 3] + "..."
            break
        kept = joined
    return ServedStep(phase, ref, batch, tokens, None, refused=kept)


def served_step(
    config: Any,
    device: str,
    phase: str,
    *,
    batch: int,
    tokens: int,
    tp: int = 1,
    predictor: Predictor,
    engine: str | None = None,
) -> ServedStep:
    """The step of ``phase`` as engine profile ``engine`` serves it, with its expected error
    (module doc).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    device : str
        The catalog device (or a registered one).
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch : int
        Decoding sequences, or prompts sent together.
    tokens : int
        Each decode's KV length ``C`` (the token being processed included), or each prompt's
        length ``S``.
    tp : int
        Tensor-parallel degree of the replica.
    predictor : Predictor
        Prices the kernels (a framework's measured kernels: the bound predicts nothing served and
        is refused).
    engine : str, optional
        ``NAME[@VERSION]`` of the engine profile; default the predictor framework's default profile.

    Returns
    -------
    ServedStep
        Its ``refused`` says why when the engine never runs the step.

    Raises
    ------
    CostModelError
        ``phase`` unknown, ``batch``, ``tokens`` or ``tp`` below 1, the bound as predictor, or an
        unknown engine profile.
    """
    if phase not in _METRIC:
        raise CostModelError(f"phase {phase!r}: a served step is of 'decode' or 'prefill'")
    for name, v in (("batch", batch), ("tokens", tokens), ("tp", tp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CostModelError(f"{name} must be a whole number >= 1, got {v!r}")
    if predictor.is_bound or predictor.framework is None:
        raise CostModelError("a served step needs a framework's measured kernels (--predict), not the bound")
    profile = get_engine(engine or predictor.framework)
    predictor = predictor.for_engine(profile)  # the MoE kernels the engine runs
    ref = profile.ref
    w = as_workload(config)
    hw = get_device(device)
    # what the engine cannot run (no KV block fits, a model the simulator cannot serve) is said;
    # the calibration lookup after it stays outside, so its own error is not blamed on the simulator
    try:
        cfg = profile_engine(profile, w, hw, tp=tp)
        ov = _overheads(profile, cfg)
        if phase == "decode":
            why = _decode_refusal(w, hw, tp, profile, cfg, batch, tokens)
            if why:
                return _refused(phase, ref, batch, tokens, why)
            decoded = _decode(w, hw, tp, predictor, cfg, ov, ref, batch, tokens)
        else:
            reqs = [Request(rid=i, arrival_s=0.0, prompt=tokens, output=1) for i in range(batch)]
            res = simulate(
                w, hw, reqs, topology=Topology(tp=tp), engine=cfg, predictor=predictor, overheads=ov
            )
    except CostModelError as exc:
        return _refused(phase, ref, batch, tokens, f"the simulator cannot serve it: {exc}")
    if phase == "decode":
        return _with_band(*decoded, w, hw, predictor)
    path = ov.request_path_s(tokens, cfg.enable_prefix_caching)
    ttft = float(res.ttft.mean)
    out = ServedStep(
        phase,
        ref,
        batch,
        tokens,
        ttft,
        kernels_s=ttft - path - ov.output_token_s,
        request_path_s=path,
        streaming_s=ov.output_token_s,
        padded_batch=batch,
        iterations=res.iterations,
        queue_share=res.queue_share,
        overheads=ov.summary(),
    )
    return _with_band(out, res.coverage, w, hw, predictor)


def _overheads(profile: EngineProfile, cfg: EngineConfig) -> EngineOverheads:
    """The profile's CPU terms, capture sizes and policy at ``cfg``'s limits: what ``simulate
    --predict`` runs with (:mod:`graphs.serving.present.simulation_report`)."""
    return profile.overheads(max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens)


def _decode_refusal(
    w: Workload, hw: Any, tp: int, profile: EngineProfile, cfg: EngineConfig, batch: int, ctx: int
) -> str:
    """Why the engine of ``cfg`` never runs ``batch`` decodes of KV length ``ctx`` (empty: it does):
    more sequences than it schedules or tokens than its budget, or KV beyond the pool a replica
    has (:func:`~graphs.serving.sim.simulator.pool_blocks`, as the simulator sizes it). Only the KV
    the batch holds is checked: a no-evict scheduler also reserves each request's remaining output,
    which a step does not know."""
    if batch > cfg.max_num_seqs:
        return (
            f"batch {batch} exceeds the {profile.ref} profile's max_num_seqs on {hw.name} "
            f"({cfg.max_num_seqs}): it never runs it"
        )
    if batch > cfg.max_num_batched_tokens:
        return (
            f"batch {batch} exceeds the {profile.ref} profile's token budget, max_num_batched_tokens "
            f"({cfg.max_num_batched_tokens}): it never runs it"
        )
    need = batch * -(-ctx // cfg.block_size)
    blocks = pool_blocks(w, hw, cfg, build_ledger(w, "decode", 1, tp, None, None))
    if need > blocks:
        return (
            f"{batch} x {ctx:,} tokens of KV need {need:,} blocks of {cfg.block_size} tokens; the engine's "
            f"pool holds {blocks:,}: it never runs this batch"
        )
    return ""


def _decode(
    w: Workload,
    hw: Any,
    tp: int,
    predictor: Predictor,
    cfg: EngineConfig,
    ov: EngineOverheads,
    ref: str,
    batch: int,
    ctx: int,
) -> tuple[ServedStep, Coverage | None]:
    """The served TPOT of ``batch`` steady decodes at KV length ``ctx`` (module doc), and what its
    kernels rest on."""
    step = predicted_mixed_step(w, hw, tp=tp, predictor=predictor)
    rows = ov.padded(batch)
    ctxs = [float(ctx)] * batch if step.windowed else None
    metered = step if isinstance(step, MeteredIterationStep) else None
    if metered is not None:
        metered.reset()  # its seconds by source counted afresh, as simulate() does
    t = step.time_sums(rows, float(batch * ctx), (), ctxs)
    coverage = metered.coverage() if metered is not None else None
    if ov.kernel_scale != 1:  # never below the iteration's roofline (Replica.iteration_time)
        bound = getattr(step, "bound", step)
        floor = bound.time_sums(rows, float(batch * ctx), (), ctxs) if ov.kernel_scale < 1 else 0.0
        t = scaled_kernels_s(ov.kernel_scale, t, floor)[0]
    cpu = cfg.iteration_overhead_s + (0.0 if ov.is_zero else ov.cpu_s(batch, batch))
    front = batch * ov.frontend_token_s / cfg.api_server_count
    served = ServedStep(
        "decode",
        ref,
        batch,
        ctx,
        max(t + cpu, front) + ov.output_token_s,
        kernels_s=t,
        cpu_s=cpu,
        streaming_s=ov.output_token_s,
        frontend_s=front,
        padded_batch=rows,
        iterations=1,
        overheads=ov.summary(),
    )
    return served, coverage


def _with_band(
    out: ServedStep, coverage: Coverage | None, w: Workload, hw: Any, predictor: Predictor
) -> ServedStep:
    """``out`` with what its kernels rest on, its calibrated band, what the band rests on and its
    expected error (module doc)."""
    if coverage is not None and coverage.total_s > 0:
        reason = max(coverage.bounds.items(), key=lambda kv: kv[1])[0] if coverage.bounds else ""
        out = replace(out, bound_share=coverage.bound_s / coverage.total_s, bound_reason=reason)
    table = served_errors()
    metric = out.metric
    if not table.covers(metric) or out.value_s is None:
        return out
    assert predictor.framework is not None
    moe = bool(w.config.is_moe)
    share = out.queue_share if table.conditioned(metric) else None
    g, like = table.like(metric, predictor.framework, hw.name, moe, share)
    band = g.interval(out.value_s)
    basis = f"{g.n} validation rows of {g.deployments} deployments: {g.label}; {table.method_words(metric)}"
    if not like:
        basis += "; unlike this deployment"
    statement = table.statement(metric, predictor.framework, hw.name, moe, share)
    dev = transfer_error(coverage, hw.name)
    if dev is not None:
        band = widen(out.value_s, band, dev[0])
        basis += f"; {transfer_words(dev, hw.name)}"
        statement += f"; measured on other devices: {hw.name}'s kernels are priced from their fits, which widens the band"
    lo, hi = band
    if lo > out.value_s or hi < out.value_s:  # a group whose deployments all ran to one side
        side = "slower" if lo > out.value_s else "faster"
        basis += f"; the band lies {'above' if side == 'slower' else 'below'} the value: deployments like this ran {side}"
    return replace(out, band_s=band, basis=basis, expected_error=statement)


def step_expected_errors(
    framework: str, device: str, moe: bool, metrics: Sequence[str] = ("TPOT", "TTFT")
) -> list[str]:
    """The expected error of a served TPOT and of a light-load TTFT (nothing queued) on deployments
    like ``framework`` on ``device`` (module doc): what a command whose numbers are steps, not
    served runs (``search --predict``), says beside them.

    Parameters
    ----------
    framework : str
        The corpus framework whose kernels priced the steps.
    device : str
        A catalog device name.
    moe : bool
        Whether the model routes tokens to experts.
    metrics : sequence of str
        Which of ``TPOT`` and ``TTFT`` (a disaggregated deployment's TTFT is its prefill device's).

    Returns
    -------
    list of str
        One statement per metric the table calibrates
        (:meth:`~graphs.serving.sim.served_errors.ServedErrors.statement`).
    """
    table = served_errors()
    name = get_device(device).name
    return [
        table.statement(metric, framework, name, moe, 0.0 if table.conditioned(metric) else None)
        for metric in metrics
        if table.covers(metric)
    ]
