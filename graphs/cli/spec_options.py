"""``--spec-draft/--spec-k/--spec-accept/--spec-expected``: speculative decoding options shared by
``simulate`` and ``search`` (:mod:`graphs.serving.sim.specdec_sim`)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_spec_options", "spec_of", "DEFAULT_SPEC_K"]

#: tokens drafted per step when --spec-draft is given without --spec-k
DEFAULT_SPEC_K = 3


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
    """The options as a :class:`SpecConfig` (None without ``--spec-draft``); one-line errors."""
    from costmodel.errors import CostModelError
    from graphs.serving.sim.specdec_sim import SpecConfig

    expected = getattr(args, "spec_expected", False)
    if args.spec_draft is None:
        if args.spec_accept is not None or expected or args.spec_k is not None:
            raise CostModelError(
                "--spec-k/--spec-accept/--spec-expected need --spec-draft (what drafts the tokens)"
            )
        return None
    if args.spec_accept is None:
        raise CostModelError(
            f"--spec-draft {args.spec_draft[:60]} needs --spec-accept (the rate its drafted tokens are accepted at)"
        )
    return SpecConfig.parse(
        args.spec_draft,
        DEFAULT_SPEC_K if args.spec_k is None else args.spec_k,
        args.spec_accept,
        expected=expected,
        seed=getattr(args, "seed", 0),
    )
