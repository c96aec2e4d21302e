"""The model a command names (a catalog name, or a ``config.json`` or layer file with
``--assume-family``) with its dtype flags, and its context checked before any work: shared by
every command that takes a model, so none imports another for it."""

from __future__ import annotations

import argparse
from typing import Any

from .options import apply_dtypes

__all__ = ["check_context", "resolve_config", "resolve_model"]


def resolve_model(name: str, args: argparse.Namespace | None = None) -> Any:
    """A catalog name, or a path to a Hugging Face ``config.json`` (or its folder): the one
    resolver the library uses too (:func:`models.resolver.resolve_model`), with the command's
    ``--assume-family`` (:func:`graphs.cli.options.add_dtype_options`)."""
    from models.resolver import resolve_model as resolve

    return resolve(name, assume_family=getattr(args, "assume_family", None))


def resolve_config(args: argparse.Namespace) -> Any:
    return apply_dtypes(resolve_model(args.model, args), args)


def check_context(args: argparse.Namespace, tokens: int, field: str) -> None:
    """``--ctx``/``--seq`` against the model's context limit, before any work.

    A catalog name or a config.json path is read as JSON (no sympy: the cached fast path
    stays fast; :func:`models.resolver.config_data` reads the file once for the whole
    command); a name that does not resolve goes through :func:`resolve_config`, which says why.
    """
    from pathlib import Path

    from costmodel.errors import CostModelError
    from models.context import check_context as check
    from models.context import context_limit
    from models.resolver import config_data

    name = getattr(args, "model", None)
    if name is None or tokens is None:
        return
    allow = getattr(args, "allow_long_context", False)
    try:
        data = config_data(name)
    except CostModelError:
        data = None
    if data is not None:
        lim = context_limit(data, name[:200])  # its errors name the file (or catalog name) given
        if lim is not None:
            check(
                Path(name).stem if name.endswith(".json") else name,
                lim.tokens,
                tokens,
                field,
                allow=allow,
                why=lim.why,
            )
        elif data.get("model_type") not in ("mamba", "mamba2"):
            # said once: the context is not checked (a config of no max_position_embeddings; a
            # state-space model has no positions to run out of); a config the loader refuses is
            # refused first, alone (resolved here: the note is for a model the command answers)
            from .options import note_once

            resolve_config(args)

            note_once(
                args,
                f"{name[:200]} states no max_position_embeddings: {field} is not checked against a context "
                "limit of the model's",
            )
        return
    cfg = resolve_config(args)
    cfg.check_context(tokens, field, allow=allow)
