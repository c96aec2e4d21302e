"""Dollars per million tokens at an operating point: one definition for every command.

**The deployment's price.** Pools of ``N_i`` devices, each priced ``p_i`` USD per device-hour
(the catalog's sourced ``price_usd_per_hour``, or ``--price-per-hour``), drawing ``TDP_i x u``
watts at utilisation ``u`` and paying ``e`` USD per kWh, cost

.. math::

    C_{hour} = \\sum_i N_i \\left(p_i + \\frac{TDP_i \\cdot u}{1000}\\, e\\right) \\quad \\text{USD/h}

Cloud on-demand rates include the power, so ``e`` defaults to 0; give it for owned hardware
(with its list price amortised per hour). Every device the deployment uses is priced.

**Per million tokens** (:func:`usd_per_m`, :func:`token_cost`). At an operating point the
deployment serves ``r_in`` input (prompt) and ``r_out`` output tokens per second:

.. math::

    \\$/\\text{M input} = \\frac{C_{hour}}{3600\\, r_{in}} 10^6, \\quad
    \\$/\\text{M output} = \\frac{C_{hour}}{3600\\, r_{out}} 10^6, \\quad
    \\$/\\text{M tokens} = \\frac{C_{hour}}{3600\\, (r_{in} + r_{out})} 10^6

(USD per hour over tokens per hour, per million). The input and output figures are each the whole
bill over one kind of token: what a price on that kind alone must be to pay for the deployment.
They do not add; the **blend** is the third, every served token counted once, input and output
alike, in the mix the operating point serves (``r_in : r_out``, printed with it), so
``1 / blended = 1 / input + 1 / output`` and a request costs ``(prompt + output) x blended``.

**The operating point** (each cost line names its own):

* a simulation (``simulate``, ``simulate --max-rate`` at the rate found, ``size``;
  :func:`sim_cost`): the tokens of its requests over the time it took to take them in, from the
  first arrival to the last first token (every prompt prefilled), plus one mean gap between
  arrivals (``n`` requests arrive over ``n - 1`` gaps: without it ``n`` requests at ``r``/s would be
  priced as served at ``n r / (n - 1)``). A deployment that keeps up does that one TTFT after
  the last arrival, so the rate is the offered load's; one that falls
  behind takes its backlog's time, so the rate is what it can serve. Neither the drain tail after
  the last arrival (a finite run's artefact: its length is the longest request's decode, not the
  load) nor the busy time (which counts the tail's small batches: a deployment that met the SLOs
  at a lower $/h printed a higher $/M than a dearer one) enters. But the window is never shorter
  than the run's output tokens at the most its decoding replicas can emit (``decode capacity``:
  each at its best batch up to ``max_num_seqs`` or the KV pool, pure decode, prefill not charged;
  :attr:`~graphs.serving.sim.simulator.SimResult.decode_capacity_tokens_per_s`): a deployment that
  admits every prompt but decodes slower than the load asks prints its first tokens early while
  most of its output is not yet made, and no steady load gets more out of it than that rate.
  Every request sent at once, or a closed loop: the whole run;
* an analytic decode point (``search --cost``, ``serve plans``; :func:`decode_cost`): batch ``B``
  back to back at ``TPOT``, ``r_out = B / TPOT`` and no input: the devices **100 % busy**
  decoding, labelled so wherever it prints;
* ``serve disagg --rate R`` (:func:`graphs.serving.analysis.disagg.disaggregated`): both pools it sizes,
  ``r_in = R S``, ``r_out = R O``; without a rate, each pool 100 % busy alone.

The utilisation ``u`` (for power only) is a simulation's busy device-seconds over devices x its
duration; an analytic point runs flat out (``u = 1``). Power at TDP while busy is the same
estimate the decode report's energy per token makes (:mod:`graphs.serving.analysis.phases`): an upper
bound on what the device draws.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from costmodel.results import Result
from costmodel.text import fmt_num

from ..step.option_checks import real_arg, whole_arg

if TYPE_CHECKING:
    from ..analysis.disagg import DisaggReport

__all__ = [
    "NO_PRICE",
    "MISSING_CELLS",
    "missing_cells",
    "PRICE_RANGE",
    "ELECTRICITY_RANGE",
    "Rates",
    "TokenCost",
    "device_rates",
    "parse_prices",
    "check_prices",
    "token_cost",
    "usd_per_m",
    "served_seconds",
    "decode_bound_seconds",
    "ServedTotals",
    "totals_cost",
    "sim_cost",
    "decode_cost",
    "prefill_cost",
    "disagg_cost",
]

#: what a cost line says for a device without a sourced price
NO_PRICE = "no price: pass --price-per-hour"

#: what a table cell says for a metric the device has no figure for (None or NaN in the rows):
#: energy needs a TDP, $ a price; ``search``, ``sweep`` and ``serve plans`` print the same words
MISSING_CELLS = {"energy_per_token_j": "no TDP", "usd_per_m_output": "no price"}


def missing_cells(
    rows: Sequence[Any], cols: Sequence[tuple[str, str, str]]
) -> tuple[list[dict[str, Any]], tuple[tuple[str, str, str], ...]]:
    """The rows and columns of a text table with the optional metrics (:data:`MISSING_CELLS`)
    formatted here: a device without a TDP (energy) or a price (cost) has None or NaN there,
    which the cell prints as :data:`MISSING_CELLS` says (``no TDP``), never ``nan``; a known
    value keeps its column's format. ``--json`` keeps its null.

    Parameters
    ----------
    rows : sequence of mapping
        The table's rows, by column key.
    cols : sequence of (str, str, str)
        ``(key, heading, format)`` per column (:func:`costmodel.text.format_table`).

    Returns
    -------
    tuple of (list of dict, tuple of (str, str, str))
        The rows with those cells as text, and the columns with their format ``s``.
    """
    fmts = {k: f for k, _, f in cols if k in MISSING_CELLS}
    out = []
    for r in rows:
        d = dict(r)
        for k, f in fmts.items():
            v = d.get(k)
            d[k] = MISSING_CELLS[k] if v is None or math.isnan(float(v)) else fmt_num(float(v), f)
        out.append(d)
    shown = tuple((k, h, "s" if k in MISSING_CELLS else f) for k, h, f in cols)
    return out, shown


#: USD per device-hour accepted (a cent to $10,000)
PRICE_RANGE = (0.01, 1e4)
#: USD per kWh accepted
ELECTRICITY_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class Rates(Result):
    """What one device costs to run: its hourly price (and where it comes from), its TDP and
    the electricity rate.

    Attributes
    ----------
    device : str
        The device's name.
    price_usd_per_hour : float or None
        USD per device-hour (None: no sourced price and none given).
    price_source : str
        Where the price comes from.
    power_w : float or None
        TDP (W).
    electricity_usd_per_kwh : float
        USD per kWh (0: power not priced).
    """

    device: str
    price_usd_per_hour: float | None  #: None: no sourced price and none given
    price_source: str
    power_w: float | None
    electricity_usd_per_kwh: float = 0.0

    def usd_per_hour(self, utilisation: float = 1.0) -> float | None:
        """``p + TDP u e / 1000`` USD per device-hour (module doc); None without a price. A device
        with no TDP figure and a nonzero electricity rate is an error (no silent zero).

        Parameters
        ----------
        utilisation : float
            Busy fraction ``u`` of the device, in ``[0, 1]`` (power term only).

        Returns
        -------
        float or None
            USD per device-hour.

        Raises
        ------
        CostModelError
            When the electricity rate is nonzero and the device has no TDP figure.
        """
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
    the catalog's sourced price (or None); TDP from the catalog.

    Parameters
    ----------
    device : Hardware or str
        The device.
    price_per_hour : float, optional
        USD per device-hour (default: the catalog's sourced price, or None).
    electricity_per_kwh : float
        USD per kWh (0: power not priced).

    Returns
    -------
    Rates
    """
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
    the keys are resolved to catalog names. A bad entry, a device priced twice (``h100=1,h100-sxm=2``:
    one catalog device) or a bare number among pairs is a one-line error.

    Parameters
    ----------
    text : str or None
        ``--price-per-hour``: one number, or ``DEVICE=USD`` pairs, comma-separated.
    devices : sequence of str
        The devices of the run (a bare number prices each).

    Returns
    -------
    dict of str to float
        Catalog device name -> USD per device-hour (empty for None).

    Raises
    ------
    CostModelError
        When an entry is malformed, a price is outside :data:`PRICE_RANGE`, a bare number is mixed
        with pairs, a name is not among ``devices`` or a device is priced twice.
    """
    if text is None or not text.strip():
        return {}
    out: dict[str, float] = {}
    given: dict[str, str] = {}  # catalog name -> the entry that priced it
    names = {get_device(d).name for d in devices}
    parts = text.split(",")
    for part in parts:
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
            if len(parts) > 1:
                raise CostModelError(
                    f"--price-per-hour: {part.strip()[:40]!r} prices every device; give it alone, or DEVICE=USD pairs"
                )
            out.update(dict.fromkeys(names, usd))
        else:
            name = get_device(key.strip()).name
            if name not in names:
                raise CostModelError(
                    f"--price-per-hour names {key.strip()[:40]!r}, which is not among the devices"
                )
            if name in given:
                raise CostModelError(
                    f"--price-per-hour prices {name} twice ({given[name]!r} and {part.strip()[:40]!r}); give each device once"
                )
            given[name] = part.strip()[:40]
            out[name] = usd
    return out


def check_prices(prices: Mapping[str, float] | None, devices: Sequence[Hardware]) -> dict[str, float]:
    """``prices`` as a Python caller gives them (``size_deployment``, ``search``): each key resolved
    to one of ``devices`` (its own name, or a catalog name or alias of it: ``h100`` prices
    ``h100-sxm``), each value checked, as :func:`parse_prices` does for ``--price-per-hour``, so
    a price is never dropped because it was keyed by an alias.

    Parameters
    ----------
    prices : mapping of str to float or None
        USD per device-hour by device name or alias (None: the catalog's prices).
    devices : sequence of Hardware
        The devices of the run, resolved.

    Returns
    -------
    dict of str to float
        Device name -> USD per device-hour (empty for None).

    Raises
    ------
    CostModelError
        When ``prices`` is not a mapping, a key is not one of ``devices``, a device is priced twice
        or a price is not a number in :data:`PRICE_RANGE`.
    """
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise CostModelError(
            f"prices must map device names to USD per device-hour, got {type(prices).__name__} {str(prices)[:40]!r}"
        )
    names = {hw.name for hw in devices}
    out: dict[str, float] = {}
    keyed: dict[str, str] = {}  # device name -> the key that priced it
    lo, hi = PRICE_RANGE
    for key, usd in prices.items():
        name: str | None = key if key in names else None
        if name is None and isinstance(key, str):
            try:
                name = get_device(key.strip()).name
            except CostModelError:  # not a device at all: refused below, with the devices listed
                name = None
        if name is None or name not in names:
            raise CostModelError(
                f"prices names {str(key)[:40]!r}, which is not among the devices ({', '.join(sorted(names))})"
            )
        if name in keyed:
            raise CostModelError(
                f"prices gives {name} twice ({keyed[name]!r} and {str(key)[:40]!r}); give each device once"
            )
        if (
            isinstance(usd, bool)
            or not isinstance(usd, int | float)
            or not (math.isfinite(usd) and lo <= usd <= hi)
        ):
            raise CostModelError(
                f"prices[{str(key)[:40]!r}] must be in [{lo:g}, {hi:g}] USD per device-hour, got {usd!r}"
            )
        keyed[name] = str(key)[:40]
        out[name] = float(usd)
    return out


@dataclass(frozen=True)
class TokenCost(Result):
    """A deployment's cost per hour and per million tokens at one operating point (module doc).

    Attributes
    ----------
    devices : int
        Every device the deployment uses, in all its pools.
    usd_per_hour : float
        The whole deployment, power included.
    input_tokens_per_s, output_tokens_per_s : float
        Served at the operating point.
    usd_per_m_input : float or None
        The whole $/h over input tokens alone (None: none served).
    usd_per_m_output : float or None
        The whole $/h over output tokens alone.
    usd_per_m_tokens : float
        Blended: the whole $/h over every served token.
    basis : str
        The operating point, in words.
    utilisation : float
        Busy fraction of the devices (power term only).
    price_source : str
        Where the prices come from.
    """

    devices: int  #: every device the deployment uses, in all its pools
    usd_per_hour: float  #: the whole deployment, power included
    input_tokens_per_s: float  #: served at the operating point
    output_tokens_per_s: float
    usd_per_m_input: float | None  #: the whole $/h over input tokens alone (None: none served)
    usd_per_m_output: float | None  #: the whole $/h over output tokens alone
    usd_per_m_tokens: float  #: blended: the whole $/h over every served token, input and output alike
    basis: str  #: the operating point, in words ("serving 19.2 requests/s", "at 100 % busy: ...")
    utilisation: float
    price_source: str

    def line(self) -> str:
        """One line for a report: the operating point, $/h and tokens/s it rests on, then $/M."""
        served = " + ".join(  # a rate under 10 tokens/s keeps 3 digits: 0.000844 is not "0"
            f"{v:,.0f} {name}" if v >= 10 else f"{v:.3g} {name}"
            for name, v in (("input", self.input_tokens_per_s), ("output", self.output_tokens_per_s))
            if v > 0
        )
        both = self.input_tokens_per_s > 0 and self.output_tokens_per_s > 0
        per = [
            f"${v:,.4g}/M {name}"
            for name, v in (("input", self.usd_per_m_input), ("output", self.usd_per_m_output))
            if v is not None
        ]
        money = (
            f"${self.usd_per_m_tokens:,.4g}/M tokens blended (every token once, input:output "
            f"{self.input_tokens_per_s / self.output_tokens_per_s:.3g}:1 as served); "
            f"{' or '.join(per)} alone"
            if both
            else per[0]
        )
        return (
            f"cost {self.basis}: ${self.usd_per_hour:,.2f}/h for {self.devices} device(s) / "
            f"{served} tokens/s = {money}"
        )


@overload
def usd_per_m(usd_per_hour: float, tokens_per_s: float) -> float | None: ...
@overload
def usd_per_m(usd_per_hour: float | np.ndarray, tokens_per_s: np.ndarray) -> np.ndarray: ...
def usd_per_m(
    usd_per_hour: float | np.ndarray, tokens_per_s: float | np.ndarray
) -> float | np.ndarray | None:
    """USD per million tokens, the one definition (module doc):

    .. math:: \\$/\\text{M} = \\frac{C_{hour}}{3600\\, r} 10^6

    ``usd_per_hour`` the devices used (USD/h), ``tokens_per_s`` served at the point; None when
    a scalar ``tokens_per_s`` is 0 (none served). Arrays broadcast (``search`` prices a grid).

    Parameters
    ----------
    usd_per_hour : float or numpy.ndarray
        USD per hour of the devices used.
    tokens_per_s : float or numpy.ndarray
        Tokens served per second.

    Returns
    -------
    float, numpy.ndarray or None
        USD per million tokens; None for a scalar 0 tokens/s.

    >>> round(usd_per_m(19.664, 16818.0), 4)  # 4 x $4.916/h over 16,818 tok/s
    0.3248

    Raises
    ------
    CostModelError
        When a scalar ``usd_per_hour`` is not a finite number >= 0, or a scalar ``tokens_per_s``
        not a finite number >= 0 (a negative price was a negative cost, NaN a NaN one).
    """
    if not isinstance(usd_per_hour, np.ndarray):
        usd_per_hour = real_arg("usd_per_hour", usd_per_hour, 0, unit="USD/h")
    if isinstance(tokens_per_s, np.ndarray):
        return np.asarray(usd_per_hour / (3600 * tokens_per_s) * 1e6)
    tokens_per_s = real_arg("tokens_per_s", tokens_per_s, 0)
    if tokens_per_s <= 0:
        return None
    return float(usd_per_hour / (3600 * tokens_per_s) * 1e6)


def token_cost(
    pools: Sequence[tuple[Rates, int]],
    *,
    input_tokens_per_s: float,
    output_tokens_per_s: float,
    basis: str,
    utilisation: float = 1.0,
) -> TokenCost | None:
    """:class:`TokenCost` of ``pools`` (each a device's :class:`Rates` and how many of it the
    deployment uses) serving ``input_tokens_per_s`` and ``output_tokens_per_s`` at the operating
    point ``basis`` names (module doc); None when a device has no price (a report then prints
    :data:`NO_PRICE`). Every command's cost is this function's.

    Parameters
    ----------
    pools : (Rates, devices) pairs; every device the deployment uses
    input_tokens_per_s, output_tokens_per_s : tokens served per second at the point (>= 0, not both 0)
    basis : the operating point in words, printed with the cost
    utilisation : busy fraction of the devices, for the power term only

    Returns
    -------
    TokenCost or None

    Raises
    ------
    CostModelError
        When the tokens per second are not finite, negative, or both 0, or ``pools`` holds no
        device (an empty list was a free deployment, 0 USD per million).
    """
    if not pools or any(
        isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 for _, n in pools
    ):
        raise CostModelError(
            f"pools must list (Rates, devices) pairs with at least one device each, got {list(pools)!r:.80}"
        )
    hourly = [r.usd_per_hour(utilisation) for r, _ in pools]
    if any(h is None for h in hourly):
        return None
    total_in, total_out = float(input_tokens_per_s), float(output_tokens_per_s)
    if (
        not (math.isfinite(total_in) and math.isfinite(total_out))
        or min(total_in, total_out) < 0
        or total_in + total_out <= 0
    ):
        raise CostModelError(
            f"a cost needs tokens served per second (input and output >= 0, not both 0), got {total_in!r} and {total_out!r}"
        )
    usd_h = sum(n * h for (_, n), h in zip(pools, hourly, strict=True) if h is not None)
    sources = list(dict.fromkeys(r.price_source for r, _ in pools))
    blended = usd_per_m(usd_h, total_in + total_out)
    assert blended is not None  # tokens checked above
    return TokenCost(
        devices=sum(n for _, n in pools),
        usd_per_hour=usd_h,
        input_tokens_per_s=total_in,
        output_tokens_per_s=total_out,
        usd_per_m_input=usd_per_m(usd_h, total_in),
        usd_per_m_output=usd_per_m(usd_h, total_out),
        usd_per_m_tokens=blended,
        basis=basis,
        utilisation=utilisation,
        price_source="; ".join(sources),
    )


def served_seconds(res: Any) -> float:
    """The seconds over which a :class:`graphs.serving.sim.simulator.SimResult` serves its tokens
    (module doc): for an open loop whose requests arrive over time, first arrival to last first
    token plus one mean gap between arrivals, and never less than its output at the decode
    capacity (:func:`decode_bound_seconds`); the whole run when they are all sent at once, and for
    a closed loop.

    Parameters
    ----------
    res : SimResult
        A simulated run.

    Returns
    -------
    float
        Seconds.
    """
    pr = res.per_request
    if res.offered_requests_per_s is None:  # all at once, or a closed loop
        return float(res.duration_s)
    arrival = pr["arrival_s"]
    first = float(np.min(arrival))
    # n requests arrive over n - 1 gaps: each takes one mean gap of the time (module doc)
    gap = (float(np.max(arrival)) - first) / (len(arrival) - 1) if len(arrival) > 1 else 0.0
    window = float(np.max(arrival + pr["ttft_s"])) - first + gap
    return max(window, decode_bound_seconds(res))


def decode_bound_seconds(res: Any) -> float:
    """The least time a run's output tokens take at its decode capacity (module doc): the
    output tokens over :attr:`~graphs.serving.sim.simulator.SimResult.decode_capacity_tokens_per_s`,
    at most the run's duration (it made them within it), 0 where the run states none.

    Parameters
    ----------
    res : SimResult
        A simulated run.

    Returns
    -------
    float
        Seconds.
    """
    cap = getattr(res, "decode_capacity_tokens_per_s", None)
    if not cap:
        return 0.0
    # never longer than the run itself: it did make its output within that time
    return min(float(res.per_request["output"].sum()) / float(cap), float(res.duration_s))


@dataclass(frozen=True, slots=True)
class ServedTotals:
    """What a simulated run's cost rests on (:func:`sim_cost`): a few totals of a
    :class:`graphs.serving.sim.simulator.SimResult`, small enough to keep with a sizing's run
    card (:mod:`graphs.serving.planning.run_cards`).

    Attributes
    ----------
    devices : int
        The run's devices, every pool.
    served_s : float
        :func:`served_seconds` (s).
    busy_device_s : float
        Device-seconds iterating.
    duration_s : float
        First send to last finish (s).
    input_tokens, output_tokens : float
        Prompt and output tokens over the requests.
    requests : int
        Requests served.
    whole_run : bool
        True when ``served_s`` is the whole run (every request sent at once, or a closed loop).
    decode_bound : bool
        True when ``served_s`` is the output tokens at the decode capacity (module doc), longer
        than the window to the last first token.
    """

    devices: int
    served_s: float
    busy_device_s: float
    duration_s: float
    input_tokens: float
    output_tokens: float
    requests: int
    whole_run: bool
    decode_bound: bool = False

    @classmethod
    def of(cls, res: Any) -> ServedTotals:
        """The totals of the simulated run ``res`` (a ``SimResult``).

        Parameters
        ----------
        res : SimResult
            A simulated run.

        Returns
        -------
        ServedTotals
            Its devices, served and busy seconds, duration, tokens and requests.
        """
        served = served_seconds(res)
        whole = res.offered_requests_per_s is None
        return cls(
            devices=res.topology.devices,
            served_s=served,
            busy_device_s=float(res.busy_device_s),
            duration_s=float(res.duration_s),
            input_tokens=float(res.per_request["prompt"].sum()),
            output_tokens=float(res.per_request["output"].sum()),
            requests=int(res.requests),
            whole_run=whole,
            decode_bound=not whole and served == decode_bound_seconds(res),
        )


def totals_cost(t: ServedTotals, rates: Rates) -> TokenCost | None:
    """The :class:`TokenCost` of a run's totals ``t`` (:func:`sim_cost`'s rule): its devices'
    $/h over ``r_in = input_tokens / served_s`` and ``r_out = output_tokens / served_s``, the
    utilisation (power only) ``u = min(busy_device_s / (devices x duration_s), 1)`` (1 for a run
    of no duration).

    Parameters
    ----------
    t : ServedTotals
        The run's totals.
    rates : Rates
        What one of its devices costs.

    Returns
    -------
    TokenCost or None
        USD per million input and output tokens (None: no price).

    Raises
    ------
    CostModelError
        When the run serves over no time.
    """
    seconds, devices = t.served_s, t.devices
    util = min(t.busy_device_s / (devices * t.duration_s), 1.0) if t.duration_s > 0 else 1.0
    if not (seconds > 0 and math.isfinite(seconds)):
        raise CostModelError(f"a cost needs a positive duration, got {seconds!r} s")
    return token_cost(
        [(rates, devices)],
        input_tokens_per_s=t.input_tokens / seconds,
        output_tokens_per_s=t.output_tokens / seconds,
        basis=(
            f"serving {t.requests / seconds:,.4g} requests/s ({t.requests:,} in {seconds:,.1f} s, "
            + (
                "the whole run)"
                if t.whole_run
                else "the whole run: its output at the decode capacity would take longer)"
                if t.decode_bound and t.served_s >= t.duration_s
                else "its output at the decode capacity: it falls behind in decode)"
                if t.decode_bound
                else "first arrival to last first token, plus a mean gap between arrivals)"
            )
        ),
        utilisation=util,
    )


def sim_cost(res: Any, rates: Rates) -> TokenCost | None:
    """The :class:`TokenCost` of a :class:`graphs.serving.sim.simulator.SimResult`: its devices'
    $/h over the tokens it served per second, ``tokens / served_seconds`` (module doc).
    Utilisation (power only) is the busy device-seconds over devices x duration
    (:func:`totals_cost` of its :class:`ServedTotals`).

    Parameters
    ----------
    res : SimResult
        A simulated run.
    rates : Rates
        What one of its devices costs.

    Returns
    -------
    TokenCost or None
        USD per million input and output tokens (None: no price).

    Raises
    ------
    CostModelError
        When the run serves over no time.
    """
    return totals_cost(ServedTotals.of(res), rates)


def decode_cost(rates: Rates, *, devices: int, batch: float, tpot_s: float) -> TokenCost | None:
    r"""An analytic decode point's cost, **100 % busy**: ``batch`` sequences each emitting one
    token per ``tpot_s`` back to back on ``devices`` devices, ``r_out = B / TPOT``, no input
    (module doc):

    .. math::

        \$/\text{M output} = \frac{N c}{3600\, B / TPOT} 10^6

    with ``c`` USD per device-hour.

    Parameters
    ----------
    rates : Rates
        What one device costs.
    devices : int
        Devices ``N`` of the deployment.
    batch : float
        Sequences ``B`` decoding at once.
    tpot_s : float
        Time per output token (s).

    Returns
    -------
    TokenCost or None
        USD per million output tokens (None: no price).

    Raises
    ------
    CostModelError
        When ``devices`` is not a positive whole number, or ``batch`` or ``tpot_s`` not a finite
        number > 0 (``tpot_s=0`` was a ZeroDivisionError, ``devices=0`` a free deployment).
    """
    devices = whole_arg("devices", devices, 1, 2**31 - 1)
    batch = real_arg("batch", batch, 0, inclusive=False)
    tpot_s = real_arg("tpot_s", tpot_s, 0, inclusive=False, unit="s")
    return token_cost(
        [(rates, devices)],
        input_tokens_per_s=0.0,
        output_tokens_per_s=batch / tpot_s,
        basis=f"at 100 % busy (decode at batch {batch:g} back to back)",
    )


def prefill_cost(rates: Rates, *, devices: int, prompt: int, prefill_s: float) -> TokenCost | None:
    r"""An analytic prefill point's cost, **100 % busy**: prompts of ``prompt`` tokens prefilled
    back to back, each in ``prefill_s`` on ``devices`` devices, ``r_in = S / T_pf`` and no
    output (module doc):

    .. math::

        \$/\text{M input} = \frac{N c}{3600\, S / T_{pf}} 10^6

    Parameters
    ----------
    rates : Rates
        What one device costs.
    devices : int
        Devices ``N``.
    prompt : int
        Prompt tokens ``S``.
    prefill_s : float
        One prompt's prefill time ``T_pf`` (s).

    Returns
    -------
    TokenCost or None
        USD per million input tokens (None: no price).

    Raises
    ------
    CostModelError
        When ``devices`` or ``prompt`` is not a positive whole number, or ``prefill_s`` not a
        finite number > 0.
    """
    devices = whole_arg("devices", devices, 1, 2**31 - 1)
    prompt = whole_arg("prompt", prompt, 1, 2**63 - 1)
    prefill_s = real_arg("prefill_s", prefill_s, 0, inclusive=False, unit="s")
    return token_cost(
        [(rates, devices)],
        input_tokens_per_s=prompt / prefill_s,
        output_tokens_per_s=0.0,
        basis=f"at 100 % busy (prompts of {prompt:,} tokens prefilled back to back)",
    )


def disagg_cost(report: DisaggReport, prefill_rates: Rates, decode_rates: Rates) -> TokenCost | None:
    """A disaggregated deployment's cost at the rate its pools are sized for
    (:func:`graphs.serving.analysis.disagg.disaggregated` with ``rate``): every device of both pools,
    ``n_pf`` prefill and ``n_dec`` decode, over ``r_in = R S`` and ``r_out = R O`` (module doc).

    Parameters
    ----------
    report : DisaggReport
        A disaggregated deployment sized for a rate.
    prefill_rates, decode_rates : Rates
        What one prefill device and one decode device cost.

    Returns
    -------
    TokenCost or None

    Raises
    ------
    CostModelError
        When ``report`` was computed without a rate.
    """
    if report.rate is None or report.prefill_devices is None or report.decode_devices is None:
        raise CostModelError("a disaggregated deployment's cost needs the rate its pools are sized for")
    return token_cost(
        [(prefill_rates, report.prefill_devices), (decode_rates, report.decode_devices)],
        input_tokens_per_s=report.rate * report.prompt,
        output_tokens_per_s=report.rate * report.output,
        basis=(
            f"serving {report.rate:g} requests/s on {report.prefill_devices} prefill "
            f"{report.prefill_device} + {report.decode_devices} decode {report.decode_device}"
        ),
    )
