"""``--routing``, ``--placement`` and ``--replicate-hot``: a MoE layer's routing distribution and
the EP placement plan option (:mod:`graphs.serving.step.expert_routing`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_routing_options", "add_expert_options", "routing_of", "routed"]


def add_expert_options(sp: argparse.ArgumentParser) -> None:
    """``--ep`` and the routing options, for a one-step command (``decode``, ``prefill``)."""
    sp.add_argument(
        "--ep",
        type=int,
        default=1,
        help="expert-parallel degree (default 1): the routed experts spread over this many ranks, "
        "each a tp group of its own (tp x ep devices, as serve plans counts them), and the step is "
        "the busiest rank's; the all-to-all between ranks is not in the step",
    )
    add_routing_options(sp)


def routed(args: argparse.Namespace) -> bool:
    """Expert parallelism or a non-default routing: the step is not the one a cached card holds
    (the default flags answer without importing the engine: the card path stays light)."""
    if getattr(args, "ep", 1) == 1 and (args.routing, args.placement, args.replicate_hot) == (
        "uniform",
        "contiguous",
        0,
    ):
        return False
    return bool(args.ep > 1 or not routing_of(args).is_default)


def add_routing_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--routing",
        default="uniform",
        help="MoE routing distribution: uniform, zipf:S (expert i gets tokens in proportion to i^-S, "
        "S in [0, 10]) or hist:C1,C2,... (measured token counts, one per expert); the busiest EP rank sets the step "
        "(default uniform)",
    )
    sp.add_argument(
        "--placement",
        choices=("contiguous", "balanced"),
        default="contiguous",
        help="experts on EP ranks: in index order, or the hottest first onto the least loaded rank "
        "(default contiguous)",
    )
    sp.add_argument(
        "--replicate-hot",
        type=int,
        default=0,
        help="give this many of the hottest experts a second copy on another EP rank (experts, default 0)",
    )


def routing_of(args: argparse.Namespace) -> Any:
    """The :class:`graphs.serving.step.expert_routing.Routing` the flags give (a bad value: one-line error)."""
    from graphs.serving.step.expert_routing import parse_routing

    return parse_routing(args.routing, args.placement, args.replicate_hot)
