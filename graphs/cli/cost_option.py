"""``--price-per-hour`` and ``--electricity-per-kwh`` for every serving report
(:mod:`graphs.serving.planning.cost`): the same two flags and the same cost line everywhere."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from graphs.serving.present.report_text import cost_text  # its home: reports render it

__all__ = ["add_cost_options", "rates_of", "cost_text"]

PRICE_HELP = (
    "USD per device-hour replacing the catalog's sourced price: one number for every device, or "
    "DEVICE=USD,...; not given: the catalog's sourced price, and a device without one prints no cost"
)
ELECTRICITY_HELP = "USD per kWh, for TDP x utilisation of every device (cloud rates include power)"


def add_cost_options(sp: argparse.ArgumentParser) -> None:
    """Add ``--price-per-hour`` and ``--electricity-per-kwh`` (range checked by ``FLOAT_RANGES``)."""
    sp.add_argument("--price-per-hour", default=None, help=PRICE_HELP)
    sp.add_argument("--electricity-per-kwh", type=float, default=0.0, help=ELECTRICITY_HELP)


def rates_of(args: argparse.Namespace, devices: Sequence[str]) -> dict[str, Any]:
    """Device name, as given and as the catalog names it -> :class:`graphs.serving.planning.cost.Rates`
    under the flags."""
    from costmodel.hardware import get_device
    from graphs.serving.planning.cost import device_rates, parse_prices

    prices = parse_prices(getattr(args, "price_per_hour", None), devices)
    e = getattr(args, "electricity_per_kwh", 0.0)
    out = {}
    for d in devices:
        name = get_device(d).name
        out[d] = out[name] = device_rates(d, prices.get(name), e)
    return out
