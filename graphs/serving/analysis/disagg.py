"""Disaggregated serving: prefill on device A, decode on device B, the KV cache in between.

Per request (prompt ``S``, ``O`` output tokens):

* prefill on A: the sum of kernel bounds of the prompt's graph, ``T_pf(S)``;
* KV transfer A -> B: ``S k`` bytes (``k`` = KV bytes per token from the
  graph) over a link of bandwidth ``beta`` and per-message latency ``alpha``,
  sent layer by layer: ``T_kv = S k / beta + L alpha``. Overlapped with
  prefill (``overlap="layerwise"``: each layer ships while the next computes)
  only the last layer's share is exposed: ``TTFT = max(T_pf, T_kv) + T_kv/L + T_dec``;
  shipped after prefill: ``TTFT = T_pf + T_kv + T_dec``;
* decode on B at batch ``b``: ``TPOT`` at the mean context ``S + O/2``.

Pools for an arrival rate ``lambda`` (requests/s): prefill devices
``ceil(lambda T_pf)``, decode devices ``ceil(lambda O / (b / TPOT))``. The
colocated baseline runs both phases on the decode device type: prefills
take ``rho = lambda T_pf / n`` of each device's time, so decode steps stretch
to ``TPOT / (1 - rho)`` (time sharing: a long prefill stalls the batch); its
TTFT is the prefill's on that device, which samples the first token itself.

``T_dec`` in the disaggregated TTFT: the decode instance streams every token, the first
included, and computes the prompt's last token to sample it (vLLM's P/D proxy and scheduler:
:mod:`graphs.serving.sim.simulator`'s module doc), so a lone request's disaggregated TTFT is
what ``simulate --disagg`` gives it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.keys import Phase
from costmodel.results import Result
from models.config import ModelConfig

from ..pricing.predictor import Predictor
from ..pricing.priced import priced_step
from ..step.compiled import compiled_step, positive_int
from ..step.fit_check import CapacityCheck
from ..step.ledger_fit import capacity_check
from ..step.option_checks import real_arg
from ..step.totals import kv_cache_bytes_per_token
from ..step.workload import Workload, as_workload

__all__ = [
    "disaggregated",
    "kv_transfer_crossover",
    "kv_transfer_range",
    "DisaggReport",
    "TTFTTerms",
    "Colocated",
    "Overlap",
]


class Overlap(StrEnum):
    """When the KV cache crosses the link: after the whole prefill, or layer by layer during it."""

    AFTER = "after"
    LAYERWISE = "layerwise"


@dataclass(frozen=True)
class TTFTTerms(Result):
    """Time to first token on a disaggregated pair, term by term (seconds, bytes).

    Attributes
    ----------
    prefill_s : float
        One prompt's prefill on the prefill device ``T_pf`` (s).
    kv_transfer_s : float
        The KV cache over the link, ``S k / beta + L alpha`` (s).
    first_decode_s : float
        The first decode step on the decode device at the pool's batch (s).
    ttft_s : float
        Their sum, or with the transfer hidden under the prefill but for its last layer (s).
    kv_bytes : float
        The prompt's KV cache, ``S k`` (bytes).
    kv_share_of_ttft : float
        ``kv_transfer_s / ttft_s``.
    """

    prefill_s: float
    kv_transfer_s: float
    first_decode_s: float
    ttft_s: float
    kv_bytes: float
    kv_share_of_ttft: float


@dataclass(frozen=True)
class Colocated(Result):
    """The same decode-type devices serving both phases by time sharing, for comparison.

    Attributes
    ----------
    devices : int
        Decode-type devices serving both phases (as many as the two pools together).
    prefill_share : float
        Fraction ``rho`` of device time spent in prefill.
    tpot_s : float
        Decode TPOT stretched by the prefill share, ``TPOT / (1 - rho)`` (s; inf when it saturates).
    ttft_s : float
        Prefill on the decode-type device, whose last iteration samples the first token (s): a
        lone request's, as the disaggregated TTFT's terms are (no queueing on either side), and
        what ``prefill`` and a one-request ``simulate`` print.
    energy_per_token_j : float or None
        The devices' busy energy per output token at TDP (J; docs/conventions.md): a request's
        prefill on the decode-type device plus its decode steps, ``(T_pf P + O TPOT P / b) / O``;
        None when the device has no TDP figure.
    device_hours_per_million_tokens : float
        Device-hours per million output tokens.
    """

    devices: int
    prefill_share: float  #: fraction of device time spent in prefill
    tpot_s: float  #: decode TPOT stretched by the prefill share (inf when it saturates)
    ttft_s: float
    energy_per_token_j: float | None
    device_hours_per_million_tokens: float


@dataclass(frozen=True)
class DisaggReport(Result):
    """Prefill on one device type, decode on another, KV over a link (see module doc).

    Attributes
    ----------
    model, prefill_device, decode_device : str
        What was run, by name.
    decode_fits : bool
        The decode pool's point (``decode_batch`` sequences at ``prompt + output``) fits its memory.
    decode_max_batch : int or None
        The largest decode batch that fits at ``prompt + output`` tokens.
    prompt, output : int
        Tokens per request.
    decode_batch : int
        Sequences per decode step.
    overlap : Overlap
        When the KV cache crosses the link.
    ttft : TTFTTerms
        Time to first token, term by term.
    tpot_s : float
        The decode step at the mean context ``prompt + output / 2`` (s).
    decode_tokens_per_s_per_device : float
        ``decode_batch / tpot_s``.
    rate : float or None
        Requests per second the pools are sized for (None: not sized).
    prefill_devices, decode_devices : int or None
        ``ceil(rate T_pf)`` and ``ceil(rate O / (b / TPOT))``.
    energy_per_token_j : float or None
        Both pools' busy energy per output token at TDP (J; docs/conventions.md): a request's
        prefill on A and its share of the decode steps on B, ``T_pf P_A / O + TPOT P_B / b``
        (idle provisioned devices draw no TDP here; their hours are in the device-hours).
    device_hours_per_million_tokens : float or None
        Both pools' device-hours per million output tokens.
    colocated : Colocated or None
        The time-shared baseline on the decode device type.
    decode_capacity, prefill_capacity : CapacityCheck or None
        Each pool's point against its device's memory.
    """

    model: str
    prefill_device: str
    decode_device: str
    decode_fits: bool
    decode_max_batch: int | None
    prompt: int
    output: int
    decode_batch: int
    overlap: Overlap
    ttft: TTFTTerms
    tpot_s: float  #: decode step at the mean context, prompt + output/2
    decode_tokens_per_s_per_device: float
    rate: float | None = None  #: requests per second the pools are sized for
    prefill_devices: int | None = None
    decode_devices: int | None = None
    energy_per_token_j: float | None = None  #: busy energy at TDP per output token (J)
    device_hours_per_million_tokens: float | None = None
    colocated: Colocated | None = None
    #: the decode pool's point (decode_batch sequences at prompt + output) against its memory
    decode_capacity: CapacityCheck | None = None
    #: one prompt's prefill against the prefill device's memory
    prefill_capacity: CapacityCheck | None = None

    @property
    def fits(self) -> bool:
        """Both pools' points fit their devices (the latencies describe a point that can run)."""
        return all(c is None or c.fits for c in (self.decode_capacity, self.prefill_capacity))


def _ttft_terms(
    w: Workload,
    a: Hardware,
    b: Hardware,
    prompt: int,
    batch: int,
    link_bw: float,
    link_latency: float,
    overlap: Overlap,
    predictor: Predictor | None = None,
) -> TTFTTerms:
    """``TTFT = T_prefill(a) + T_kv + T_decode(b)`` (after), or with the transfer hidden under
    the prefill but for its last layer (layerwise); ``T_kv = S * kv_bytes_per_token / bw + L * latency``."""
    t_pf = priced_step(w, a, Phase.PREFILL, predictor=predictor).step(1, prompt)
    kv_tok = _kv_bytes_per_token(w, b)
    layers = as_float(w.config.num_hidden_layers)
    t_kv = prompt * kv_tok / link_bw + layers * link_latency
    # the decode instance's first step computes the prompt's last token (ctx: the prompt) and
    # samples the first token (module doc)
    t_dec = priced_step(w, b, Phase.DECODE, predictor=predictor).step(batch, prompt)
    if overlap == Overlap.LAYERWISE:
        ttft = max(t_pf, t_kv) + t_kv / layers + t_dec
    else:
        ttft = t_pf + t_kv + t_dec
    return TTFTTerms(t_pf, t_kv, t_dec, ttft, prompt * kv_tok, t_kv / ttft)


def _kv_bytes_per_token(w: Workload, hw: Hardware) -> float:
    """KV-cache bytes one token adds (the decode graph's cache writes), once per compiled step."""
    c = compiled_step(w, hw, Phase.DECODE)
    return c.memo(
        "kv_bytes_per_token",
        lambda: as_float(kv_cache_bytes_per_token(w.graph(Phase.DECODE, batch=1, ctx=1), 1)),
    )


def _checked_link(link_bandwidth: object, link_latency: object, overlap: object) -> tuple[float, float]:
    """The KV link's bandwidth (B/s, > 0) and latency (s, >= 0) as floats, and ``overlap`` one of
    :class:`Overlap`'s, or one line naming the parameter (a string, None or NaN was a bare
    TypeError or a NaN TTFT; an infinite bandwidth a transfer of no time)."""
    if overlap not in tuple(Overlap):
        raise CostModelError(f"overlap {overlap!r} not allowed; allowed: {', '.join(Overlap)}")
    return (
        real_arg("link_bandwidth", link_bandwidth, 0, inclusive=False, unit="B/s"),
        real_arg("link_latency", link_latency, 0, unit="s"),
    )


def disaggregated(
    config: ModelConfig | str | Workload,
    prefill_device: Hardware | str,
    decode_device: Hardware | str,
    *,
    prompt: int,
    output: int,
    decode_batch: int,
    link_bandwidth: float,
    link_latency: float = 0.0,
    rate: float | None = None,
    overlap: str = "after",
    predictor: Predictor | None = None,
    allow_long_context: bool = False,
) -> DisaggReport:
    """TTFT, TPOT, pools, energy and the colocated comparison (module doc); ``predictor``
    prices every step (:func:`graphs.serving.pricing.priced.priced_step`; default the bound).

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    prefill_device, decode_device : Hardware or str
        The devices of the prefill pool (A) and the decode pool (B).
    prompt : int
        Prompt tokens ``S`` per request.
    output : int
        Output tokens ``O`` per request.
    decode_batch : int
        Sequences ``b`` per decode step.
    link_bandwidth : float
        The A -> B link's bandwidth ``beta`` (bytes/s, > 0).
    link_latency : float
        Per-message latency ``alpha`` (s, >= 0), paid once per layer.
    rate : float, optional
        Arrival rate ``lambda`` (requests/s): sizes the pools and the colocated baseline.
    overlap : str
        ``"after"`` (the cache ships after prefill) or ``"layerwise"`` (during it).
    predictor : Predictor, optional
        Prices every step (default: the bound).
    allow_long_context : bool, default False
        Cost ``prompt + output`` beyond the model's context limit (``serve disagg
        --allow-long-context``); False: refused with :class:`~models.context.ContextLimitError`,
        as the command refuses it.

    Returns
    -------
    DisaggReport
        TTFT terms, TPOT (s), pools, energy and the colocated comparison.

    Raises
    ------
    CostModelError
        When ``overlap`` is unknown, the link's numbers or a count are out of range, ``rate``
        is not positive, or ``prompt + output`` exceeds the model's context limit without
        ``allow_long_context``.
    """
    link_bandwidth, link_latency = _checked_link(link_bandwidth, link_latency, overlap)
    prompt, output = positive_int(prompt, "prompt"), positive_int(output, "output")
    decode_batch = positive_int(decode_batch, "decode_batch")
    if rate is not None:
        rate = real_arg("rate", rate, 0, inclusive=False, unit="requests/s")
    w = as_workload(config)
    if not allow_long_context:  # as decode_report refuses a ctx beyond it
        w.config.check_context(prompt + output, "prompt + output")
    a, b = get_device(prefill_device), get_device(decode_device)
    terms = _ttft_terms(
        w, a, b, prompt, decode_batch, link_bandwidth, link_latency, Overlap(overlap), predictor
    )
    tpot = priced_step(w, b, Phase.DECODE, predictor=predictor).step(decode_batch, prompt + output // 2 + 1)
    fit = capacity_check(w, b, phase=Phase.DECODE, batch=decode_batch, tokens=prompt + output)
    pf_fit = capacity_check(w, a, phase=Phase.PREFILL, batch=1, tokens=prompt)
    report = DisaggReport(
        model=w.name,
        prefill_device=a.name,
        decode_device=b.name,
        decode_fits=fit.fits,
        decode_max_batch=fit.max_batch,
        prompt=prompt,
        output=output,
        decode_batch=decode_batch,
        overlap=Overlap(overlap),
        ttft=terms,
        tpot_s=tpot,
        decode_tokens_per_s_per_device=decode_batch / tpot,
        decode_capacity=fit,
        prefill_capacity=pf_fit,
    )
    if rate is None:
        return report
    n_pf = max(1, math.ceil(rate * terms.prefill_s))
    n_dec = max(1, math.ceil(rate * output / (decode_batch / tpot)))
    tokens_per_s = rate * output
    # a device without a TDP figure in the catalog has no energy: None, never a NaN
    pa = as_float(a.power_w) if a.power_w is not None else None
    pb = as_float(b.power_w) if b.power_w is not None else None
    # colocated: the same number of decode-type devices serve both phases by time sharing
    n_col = n_pf + n_dec
    t_pf_b = priced_step(w, b, Phase.PREFILL, predictor=predictor).step(1, prompt)
    rho = rate * t_pf_b / n_col
    col = Colocated(
        devices=n_col,
        prefill_share=rho,
        tpot_s=tpot / (1 - rho) if rho < 1 else float("inf"),
        ttft_s=t_pf_b,  # the aggregated engine's prefill samples the first token: a lone request's
        energy_per_token_j=None if pb is None else (t_pf_b * pb + output * tpot * pb / decode_batch) / output,
        device_hours_per_million_tokens=n_col / tokens_per_s * 1e6 / 3600,
    )
    return dataclasses.replace(
        report,
        rate=rate,
        prefill_devices=n_pf,
        decode_devices=n_dec,
        energy_per_token_j=None
        if pa is None or pb is None
        else (terms.prefill_s * pa + output * tpot * pb / decode_batch) / output,
        device_hours_per_million_tokens=(n_pf + n_dec) / tokens_per_s * 1e6 / 3600,
        colocated=col,
    )


def kv_transfer_crossover(
    config: ModelConfig | str | Workload,
    prefill_device: Hardware | str,
    decode_device: Hardware | str,
    *,
    link_bandwidth: float,
    link_latency: float = 0.0,
    decode_batch: int = 1,
    overlap: str = "after",
    max_prompt: int = 1 << 20,
    predictor: Predictor | None = None,
) -> int | None:
    """Smallest prompt length at which the KV transfer is the largest TTFT term (``None`` if never
    up to ``max_prompt``): the first end of :func:`kv_transfer_range`.

    Parameters
    ----------
    config : ModelConfig, str or Workload
        The model.
    prefill_device, decode_device : Hardware or str
        The prefill and decode devices.
    link_bandwidth : float
        The link's bandwidth (bytes/s).
    link_latency : float
        Per-message latency (s).
    decode_batch : int
        Sequences per decode step.
    overlap : str
        ``"after"`` or ``"layerwise"``.
    max_prompt : int
        The longest prompt (tokens) searched.
    predictor : Predictor, optional
        Prices every step (default: the bound).

    Returns
    -------
    int or None
        The prompt length (tokens), or None when the transfer never dominates.
    """
    span = kv_transfer_range(
        config,
        prefill_device,
        decode_device,
        link_bandwidth=link_bandwidth,
        link_latency=link_latency,
        decode_batch=decode_batch,
        overlap=overlap,
        max_prompt=max_prompt,
        predictor=predictor,
    )
    return span[0] if span is not None else None


def kv_transfer_range(
    config: ModelConfig | str | Workload,
    prefill_device: Hardware | str,
    decode_device: Hardware | str,
    *,
    link_bandwidth: float,
    link_latency: float = 0.0,
    decode_batch: int = 1,
    overlap: str = "after",
    max_prompt: int = 1 << 20,
    predictor: Predictor | None = None,
) -> tuple[int, int] | None:
    """The prompt lengths ``(first, last)``, within ``max_prompt``, over which the KV transfer is
    the largest TTFT term (``None``: none).

    They are one interval: the transfer ``S k / beta + L alpha`` grows linearly in ``S``, the
    first decode's KV read linearly too (so the transfer exceeds it on a half-line), and the
    prefill's time convexly (its attention is quadratic in ``S``), so the transfer exceeds it on
    an interval, which a long enough prompt leaves again (llama-2-7b, B200 to H100 over 12.5 GB/s
    with 5 us per message, decode batch 8: from 94 to 302,887 tokens). Doubles the
    prompt until the transfer dominates, bisects down to the first length, then bisects the far
    end when ``max_prompt`` is past it.

    Parameters
    ----------
    config, prefill_device, decode_device : the model and the two devices
    link_bandwidth, link_latency : the KV link (bytes/s; seconds per message)
    decode_batch, overlap, predictor : as :func:`disaggregated`
    max_prompt : the longest prompt checked (tokens)

    Returns
    -------
    (first, last) prompt lengths in tokens, or None
    """
    link_bandwidth, link_latency = _checked_link(link_bandwidth, link_latency, overlap)
    decode_batch = positive_int(decode_batch, "decode_batch")
    max_prompt = positive_int(max_prompt, "max_prompt")
    w = as_workload(config)
    a, b = get_device(prefill_device), get_device(decode_device)

    def dominates(s: int) -> bool:
        t = _ttft_terms(w, a, b, s, decode_batch, link_bandwidth, link_latency, Overlap(overlap), predictor)
        return t.kv_transfer_s >= max(t.prefill_s, t.first_decode_s)

    hi = 16
    while hi <= max_prompt and not dominates(hi):
        hi *= 2
    if hi > max_prompt:
        return None
    inside = hi  # a length where the transfer dominates
    lo = hi // 2
    if dominates(lo):
        first = lo
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if dominates(mid) else (mid, hi)
        first = hi
    if dominates(max_prompt):
        return first, max_prompt
    lo, hi = inside, max_prompt  # dominates at lo, not at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if dominates(mid) else (lo, mid)
    return first, lo
