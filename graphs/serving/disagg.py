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
to ``TPOT / (1 - rho)`` (time sharing: a long prefill stalls the batch).
"""

from __future__ import annotations

import math
from typing import Any

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from models.catalog import get_model
from models.config import ModelConfig

from ..blocks.transformer import build_model
from .capacity import capacity
from .phases import step_time
from .totals import kv_cache_bytes_per_token

__all__ = ["disaggregated", "kv_transfer_crossover"]


def _ttft_terms(
    cfg: ModelConfig,
    a: Hardware,
    b: Hardware,
    prompt: int,
    batch: int,
    link_bw: float,
    link_latency: float,
    overlap: str,
) -> dict[str, float]:
    t_pf = as_float(step_time(build_model(cfg, "prefill", batch=1, seq=prompt), a))
    kv_tok = as_float(kv_cache_bytes_per_token(build_model(cfg, "decode", batch=1, ctx=1), 1))
    layers = as_float(cfg.num_hidden_layers)
    t_kv = prompt * kv_tok / link_bw + layers * link_latency
    t_dec = as_float(step_time(build_model(cfg, "decode", batch=batch, ctx=prompt + 1), b))
    if overlap == "layerwise":
        ttft = max(t_pf, t_kv) + t_kv / layers + t_dec
    else:
        ttft = t_pf + t_kv + t_dec
    return {
        "prefill_s": t_pf,
        "kv_transfer_s": t_kv,
        "first_decode_s": t_dec,
        "ttft_s": ttft,
        "kv_bytes": prompt * kv_tok,
        "kv_share_of_ttft": t_kv / ttft,
    }


def disaggregated(
    config: ModelConfig | str,
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
) -> dict[str, Any]:
    """TTFT, TPOT, pools, energy and the colocated comparison (module doc)."""
    if overlap not in ("after", "layerwise"):
        raise CostModelError(f"overlap {overlap!r} not allowed; allowed: ('after', 'layerwise')")
    if link_bandwidth <= 0 or link_latency < 0:
        raise CostModelError("link_bandwidth must be > 0 and link_latency >= 0")
    if prompt < 1 or output < 1 or decode_batch < 1:
        raise CostModelError("prompt, output and decode_batch must be positive integers")
    cfg = get_model(config) if isinstance(config, str) else config
    a, b = get_device(prefill_device), get_device(decode_device)
    terms = _ttft_terms(cfg, a, b, prompt, decode_batch, link_bandwidth, link_latency, overlap)
    tpot = as_float(
        step_time(build_model(cfg, "decode", batch=decode_batch, ctx=prompt + output // 2 + 1), b)
    )
    fit = capacity(cfg, b, batch=decode_batch, ctx=prompt + output)
    out: dict[str, Any] = {
        "model": cfg.name,
        "prefill_device": a.name,
        "decode_device": b.name,
        "decode_fits": fit.fits,
        "decode_max_batch": fit.max_batch.value,
        "prompt": prompt,
        "output": output,
        "decode_batch": decode_batch,
        "overlap": overlap,
        **terms,
        "tpot_s": tpot,
        "decode_tokens_per_s_per_device": decode_batch / tpot,
    }
    if rate is not None:
        if rate <= 0:
            raise CostModelError(f"rate must be positive, got {rate}")
        n_pf = max(1, math.ceil(rate * terms["prefill_s"]))
        n_dec = max(1, math.ceil(rate * output / (decode_batch / tpot)))
        tokens_per_s = rate * output
        pa = as_float(a.power_w) if a.power_w is not None else float("nan")
        pb = as_float(b.power_w) if b.power_w is not None else float("nan")
        # colocated: the same number of decode-type devices serve both phases by time sharing
        n_col = n_pf + n_dec
        t_pf_b = as_float(step_time(build_model(cfg, "prefill", batch=1, seq=prompt), b))
        rho = rate * t_pf_b / n_col
        col = {
            "devices": n_col,
            "prefill_share": rho,
            "tpot_s": tpot / (1 - rho) if rho < 1 else float("inf"),
            "ttft_s": t_pf_b + terms["first_decode_s"] + tpot,
        }
        out.update(
            rate=rate,
            prefill_devices=n_pf,
            decode_devices=n_dec,
            energy_per_token_j=(n_pf * pa + n_dec * pb) / tokens_per_s,
            device_hours_per_million_tokens=(n_pf + n_dec) / tokens_per_s * 1e6 / 3600,
            colocated=col,
        )
        col["energy_per_token_j"] = n_col * pb / tokens_per_s
        col["device_hours_per_million_tokens"] = n_col / tokens_per_s * 1e6 / 3600
    return out


def kv_transfer_crossover(
    config: ModelConfig | str,
    prefill_device: Hardware | str,
    decode_device: Hardware | str,
    *,
    link_bandwidth: float,
    link_latency: float = 0.0,
    decode_batch: int = 1,
    overlap: str = "after",
    max_prompt: int = 1 << 20,
) -> int | None:
    """Smallest prompt length at which the KV transfer is the largest TTFT term (``None`` if never).

    Doubles the prompt until the transfer dominates, then bisects.
    """
    cfg = get_model(config) if isinstance(config, str) else config
    a, b = get_device(prefill_device), get_device(decode_device)

    def dominates(s: int) -> bool:
        t = _ttft_terms(cfg, a, b, s, decode_batch, link_bandwidth, link_latency, overlap)
        return t["kv_transfer_s"] >= max(t["prefill_s"], t["first_decode_s"])

    hi = 16
    while hi <= max_prompt and not dominates(hi):
        hi *= 2
    if hi > max_prompt:
        return None
    lo = hi // 2
    if dominates(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if dominates(mid) else (mid, hi)
    return hi
