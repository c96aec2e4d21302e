"""Dollars per million tokens: device-hours at an hourly price, plus power at an electricity rate.

A deployment of ``N`` devices, each priced ``p`` USD per device-hour (the catalog's sourced
``price_usd_per_hour``, or ``--price-per-hour``), drawing ``TDP x u`` watts at utilisation ``u``
and paying ``e`` USD per kWh, costs

.. math::

    C_{hour} = N \\left(p + \\frac{TDP \\cdot u}{1000}\\, e\\right) \\quad \\text{USD/h}

and over a run of ``t`` seconds ``C = C_{hour} t / 3600``. Cloud on-demand rates include the
power, so ``e`` defaults to 0; give it for owned hardware (with its list price amortised per hour).

**Input vs output tokens.** The device-time is attributed by phase: prefill time to the input
(prompt) tokens, decode time to the output tokens, and the idle time in the same ratio as the
busy time (an idle device is paid for by the traffic it waits for)::

    f_in = prefill device-seconds / busy device-seconds
    USD/M input  = C f_in       / input tokens  x 1e6
    USD/M output = C (1 - f_in) / output tokens x 1e6

In a simulation a mixed iteration (a continuous batch that piggybacks prefill chunks on the
running decodes, as Sarathi-Serve does: Agrawal et al., OSDI 2024) charges its decodes what
they would take alone and its prefill chunks the rest, their marginal time
(:meth:`graphs.serving.engine.Replica.iteration_time`); a disaggregated deployment's prefill pool
is all input and its decode pool all output, which the same rule gives. This is the split a
provider's per-token prices follow when input is cheaper than output: an input token shares a
compute-bound prefill with thousands of others, an output token a memory-bound decode step with
the batch (DistServe, Zhong et al., OSDI 2024, prices each phase's GPUs separately for the same
reason). The total ``C / (input + output tokens)`` is printed too (the blended rate).

The utilisation ``u`` is the fraction of device-time spent iterating (a simulation's busy
time over devices x duration); an analytic point (a decode batch, a prefill) runs flat out
(``u = 1``). Power at TDP while busy is the same estimate the decode report's energy per token
makes (:mod:`graphs.serving.phases`): an upper bound on what the device draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.results import Result

__all__ = [
    "NO_PRICE",
    "PRICE_RANGE",
    "ELECTRICITY_RANGE",
    "Rates",
    "TokenCost",
    "device_rates",
    "parse_prices",
    "token_cost",
    "sim_cost",
    "decode_cost",
]

#: what a cost line says for a device without a sourced price
NO_PRICE = "no price: pass --price-per-hour"
#: USD per device-hour accepted (a cent to $10,000)
PRICE_RANGE = (0.01, 1e4)
#: USD per kWh accepted
ELECTRICITY_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class Rates(Result):
    """What one device costs to run: its hourly price (and where it comes from), its TDP and
    the electricity rate."""

    device: str
    price_usd_per_hour: float | None  #: None: no sourced price and none given
    price_source: str
    power_w: float | None
    electricity_usd_per_kwh: float = 0.0

    def usd_per_hour(self, utilisation: float = 1.0) -> float | None:
        """``p + TDP u e / 1000`` USD per device-hour (module doc); None without a price. A device
        with no TDP figure and a nonzero electricity rate is an error (no silent zero)."""
        if self.price_usd_per_hour is None:
            return None
        if self.electricity_usd_per_kwh == 0:
            return self.price_usd_per_hour
        if self.power_w is None:
            raise CostModelError(
                f"{self.device} has no power figure (TDP): --electricity-per-kwh cannot be priced on it"
            )
        return self.price_usd_per_hour + self.power_w * utilisation / 1000 * self.electricity_usd_per_kwh


def _check(value: float, name: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (lo <= value <= hi):
        raise CostModelError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def device_rates(
    device: Hardware | str, price_per_hour: float | None = None, electricity_per_kwh: float = 0.0
) -> Rates:
    """The :class:`Rates` of ``device``: ``price_per_hour`` (USD per device-hour) when given, else
    the catalog's sourced price (or None); TDP from the catalog."""
    hw = get_device(device)
    e = _check(electricity_per_kwh, "electricity_per_kwh", *ELECTRICITY_RANGE)
    if price_per_hour is not None:
        price: float | None = _check(price_per_hour, "price_per_hour", *PRICE_RANGE)
        source = "given (--price-per-hour)"
    elif hw.price_usd_per_hour is not None:
        price, source = as_float(hw.price_usd_per_hour), hw.price_source
    else:
        price, source = None, ""
    power = as_float(hw.power_w) if hw.power_w is not None else None
    return Rates(hw.name, price, source, power, e)


def parse_prices(text: str | None, devices: Sequence[str]) -> dict[str, float]:
    """``--price-per-hour``: one number for every device, or ``DEVICE=USD`` pairs (``h100=4.9,b200=6``);
    the keys are resolved to catalog names. A bad entry is a one-line error."""
    if text is None or not text.strip():
        return {}
    out: dict[str, float] = {}
    names = {get_device(d).name for d in devices}
    for part in text.split(","):
        key, sep, value = part.strip().rpartition("=")
        try:
            usd = float(value)
        except ValueError:
            raise CostModelError(
                f"--price-per-hour: {part.strip()[:40]!r} must be USD per device-hour, or DEVICE=USD"
            ) from None
        if not (math.isfinite(usd) and PRICE_RANGE[0] <= usd <= PRICE_RANGE[1]):
            raise CostModelError(
                f"--price-per-hour must be in [{PRICE_RANGE[0]:g}, {PRICE_RANGE[1]:g}] USD per device-hour, got {value!r}"
            )
        if not sep:
            out.update(dict.fromkeys(names, usd))
        else:
            name = get_device(key.strip()).name
            if name not in names:
                raise CostModelError(
                    f"--price-per-hour names {key.strip()!r}, which is not among the devices"
                )
            out[name] = usd
    return out


@dataclass(frozen=True)
class TokenCost(Result):
    """A deployment's cost per hour and per million input and output tokens (module doc)."""

    devices: int
    usd_per_hour: float  #: the whole deployment, power included
    utilisation: float
    input_share: float  #: f_in: the share of device-time attributed to input (prefill) tokens
    usd_per_m_input: float | None  #: None when there were no input tokens
    usd_per_m_output: float | None
    usd_per_m_tokens: float  #: all tokens (the blended rate)
    price_source: str

    def line(self) -> str:
        """One line for a report."""
        per = [
            f"${v:,.4g}/M {name}"
            for name, v in (("input", self.usd_per_m_input), ("output", self.usd_per_m_output))
            if v is not None
        ]
        return (
            f"cost: {', '.join(per)} (${self.usd_per_m_tokens:,.4g}/M tokens blended); "
            f"${self.usd_per_hour:,.2f}/h for {self.devices} device(s) at {100 * self.utilisation:.0f}% busy; "
            f"prefill time to input tokens, decode time to output"
        )


def token_cost(
    rates: Rates,
    *,
    devices: int,
    seconds: float,
    input_tokens: float,
    output_tokens: float,
    input_share: float,
    utilisation: float = 1.0,
) -> TokenCost | None:
    """:class:`TokenCost` of ``devices`` devices running ``seconds`` (module doc); None without a
    price (a report then prints :data:`NO_PRICE`)."""
    hourly = rates.usd_per_hour(utilisation)
    if hourly is None:
        return None
    if not (seconds > 0 and math.isfinite(seconds)) or input_tokens + output_tokens <= 0:
        raise CostModelError(f"a cost needs a positive duration and tokens, got {seconds!r} s")
    total = devices * hourly * seconds / 3600
    f_in = min(max(input_share, 0.0), 1.0)
    return TokenCost(
        devices=devices,
        usd_per_hour=devices * hourly,
        utilisation=utilisation,
        input_share=f_in,
        usd_per_m_input=total * f_in / input_tokens * 1e6 if input_tokens > 0 else None,
        usd_per_m_output=total * (1 - f_in) / output_tokens * 1e6 if output_tokens > 0 else None,
        usd_per_m_tokens=total / (input_tokens + output_tokens) * 1e6,
        price_source=rates.price_source,
    )


def sim_cost(res: Any, rates: Rates) -> TokenCost | None:
    """The :class:`TokenCost` of a :class:`graphs.serving.simulator.SimResult` at its load.

    A deployment that keeps up with a sustained rate ``R`` serves what arrives: paying for its
    devices over the ``n / R`` seconds in which ``n`` requests arrive, it serves their tokens. So
    the run is priced over ``n / R`` (``R`` the rate asked, else the arrivals' own rate; the whole
    duration when every request arrives at once), not over the drain tail a finite simulation
    ends with (its length is the longest request's decode, not the load). A deployment that does
    not keep up iterates longer than ``n / R``; its devices are paid for at least while they
    iterate, so the run is priced over ``max(n / R, busy device-seconds / devices)`` (without that
    floor an overloaded run, or a closed loop of few clients given a high ``--rate``, priced its
    tokens below what the device-time they took costs). Utilisation is the busy device-seconds
    over devices x duration; the input share the replicas' prefill device-seconds over their
    busy ones (module doc)."""
    devices = res.topology.devices
    rate = res.rate or res.offered_requests_per_s
    seconds = max(res.requests / rate, res.busy_device_s / devices) if rate else res.duration_s
    util = min(res.busy_device_s / (devices * res.duration_s), 1.0) if res.duration_s > 0 else 1.0
    share = res.prefill_device_s / res.busy_device_s if res.busy_device_s > 0 else 0.0
    return token_cost(
        rates,
        devices=devices,
        seconds=seconds,
        input_tokens=float(res.per_request["prompt"].sum()),
        output_tokens=float(res.per_request["output"].sum()),
        input_share=share,
        utilisation=util,
    )


def decode_cost(
    rates: Rates,
    *,
    devices: int,
    batch: float,
    tpot_s: float,
    prompt: float | None = None,
    ttft_s: float | None = None,
    output: float | None = None,
    prefill_rates: Rates | None = None,
    prefill_devices: int | None = None,
) -> TokenCost | None:
    r"""An analytic point's cost, flat out (``u = 1``): ``batch`` sequences each emitting one token
    per ``tpot_s`` on ``devices`` devices priced by ``rates`` and, given ``prompt`` and ``ttft_s``,
    each prompt prefilled alone in ``ttft_s`` on ``prefill_devices`` devices priced by
    ``prefill_rates`` (default: the decode devices; another device kind when disaggregated).
    With ``c`` USD per device-hour:

    .. math::

        \$/\text{output token} = \frac{N c\, TPOT}{3600 B}, \qquad
        \$/\text{input token} = \frac{N_p c_p\, TTFT}{3600 S}

    (the module's phase split); blended over a request of ``prompt`` + ``output`` tokens when
    ``output`` is given too."""
    hourly = rates.usd_per_hour(1.0)
    p_rates = prefill_rates or rates
    p_hourly = p_rates.usd_per_hour(1.0)
    if hourly is None or p_hourly is None:
        return None
    n_p = prefill_devices or devices
    usd_out = devices * hourly / 3600 * tpot_s / batch
    usd_in = n_p * p_hourly / 3600 * ttft_s / prompt if prompt and ttft_s is not None else None
    f_in, blended = 0.0, usd_out
    if usd_in is not None and prompt:
        n_out = output if output else 1.0
        spent_in, spent_out = usd_in * prompt, usd_out * n_out
        f_in = spent_in / (spent_in + spent_out)
        blended = (spent_in + spent_out) / (prompt + n_out)
    split = prefill_rates is not None and prefill_rates.device != rates.device
    return TokenCost(
        devices=devices + (n_p if split else 0),
        usd_per_hour=devices * hourly + (n_p * p_hourly if split else 0.0),
        utilisation=1.0,
        input_share=f_in,
        usd_per_m_input=usd_in * 1e6 if usd_in is not None else None,
        usd_per_m_output=usd_out * 1e6,
        usd_per_m_tokens=blended * 1e6,
        price_source=rates.price_source
        + (
            f"; prefill: {p_rates.price_source}"
            if split and p_rates.price_source != rates.price_source
            else ""
        ),
    )
