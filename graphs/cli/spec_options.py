"""``--spec-draft/--spec-k/--spec-accept/--spec-expected``: speculative decoding options shared by
``simulate`` and ``search`` (:mod:`graphs.serving.sim.specdec_sim`)."""

from __future__ import annotations

import argparse
from typing import Any

from graphs.serving.sim.simulation_request import DEFAULT_SPEC_K

__all__ = ["add_spec_options", "spec_of", "DEFAULT_SPEC_K"]


def add_spec_options(sp: argparse.ArgumentParser, *, draws: bool = True) -> None:
    """The options; ``draws``: also ``--spec-expected`` (a simulation draws acceptances)."""
    sp.add_argument(
        "--spec-draft",
        default=None,
        help="speculative decoding: a catalog draft model sharing the vocabulary (e.g. llama-3.2-1b), "
        "mtp (the model's own MTP module, e.g. deepseek-v3-mtp) or ngram (prompt lookup on the CPU: free)",
    )
    sp.add_argument(
        "--spec-k",
        type=int,
        default=None,
        help=f"tokens drafted per step (with --spec-draft; {DEFAULT_SPEC_K} when not given)",
    )
    sp.add_argument(
        "--spec-accept",
        default=None,
        help="acceptance of the drafted tokens: one rate A in [0, 1] for every position, or k rates "
        "a1,..,ak (each given the earlier ones accepted)",
    )
    if draws:
        sp.add_argument(
            "--spec-expected",
            action="store_true",
            help="advance every sequence by the expected accepted tokens instead of seeded draws (--seed)",
        )


def spec_of(args: argparse.Namespace) -> Any:
    """The options as a :class:`SpecConfig` (None without ``--spec-draft``); one-line errors
    (:func:`graphs.serving.sim.simulation_request.spec_config`)."""
    from graphs.serving.sim.simulation_request import spec_config

    expected = getattr(args, "spec_expected", False)
    return spec_config(
        args.spec_draft, args.spec_k, args.spec_accept, expected=expected, seed=getattr(args, "seed", 0)
    )
