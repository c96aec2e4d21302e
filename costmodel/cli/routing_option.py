"""``--routing``, ``--placement`` and ``--replicate-hot``: a MoE layer's routing distribution and
the EP placement plan option (:mod:`graphs.serving.routing`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_routing_options", "routing_of"]


def add_routing_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--routing",
        default="uniform",
        help="MoE routing distribution: uniform, zipf:S (expert i gets tokens in proportion to i^-S, "
        "S in [0, 10]) or hist:C1,C2,... (measured token counts, one per expert); the busiest EP rank sets the step",
    )
    sp.add_argument(
        "--placement",
        choices=("contiguous", "balanced"),
        default="contiguous",
        help="experts on EP ranks: in index order, or the hottest first onto the least loaded rank",
    )
    sp.add_argument(
        "--replicate-hot",
        type=int,
        default=0,
        help="give this many of the hottest experts a second copy on another EP rank (experts)",
    )


def routing_of(args: argparse.Namespace) -> Any:
    """The :class:`graphs.serving.routing.Routing` the flags give (a bad value: one-line error)."""
    from graphs.serving.routing import parse_routing

    return parse_routing(args.routing, args.placement, args.replicate_hot)
