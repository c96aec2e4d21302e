"""Build once, pass the result: a model config with the graphs built from it.

Every serving analysis takes a :class:`Workload` (or anything
:func:`as_workload` turns into one: a catalog name, a ``ModelConfig``). The
config is resolved once, and each ``(phase, batch, seq, ctx, tp, prefix,
logits)`` graph is built once and shared by every analysis that asks for it:
pass the same ``Workload`` to several analyses and none of them rebuilds a
graph another already built. Graphs handed out are shared: treat them as
read-only.

>>> w = as_workload("tiny")
>>> w.graph("decode", batch=2, ctx=64) is w.graph("decode", batch=2, ctx=64)
True
>>> as_workload(w) is w
True
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import sympy

from costmodel.errors import CostModelError
from costmodel.graph import step_time
from costmodel.hardware import Hardware
from models.catalog import get_model
from models.config import ModelConfig

from ...blocks.phase import PHASES
from ...blocks.transformer import build_model

__all__ = ["Workload", "as_workload"]


class Workload:
    """A resolved :class:`~models.config.ModelConfig` and a cache of its graphs and step times."""

    def __init__(self, config: ModelConfig | str) -> None:
        # anything else get_model resolves (a path, a parsed config.json) or refuses in one line
        # naming the value (None was a bare TypeError)
        self.config: ModelConfig = config if isinstance(config, ModelConfig) else get_model(config)
        self._graphs: dict[tuple[Any, ...], nx.DiGraph] = {}
        self._times: dict[tuple[Any, ...], sympy.Expr] = {}
        self.builds = 0  #: graphs built so far (each distinct request once)

    @property
    def name(self) -> str:
        return self.config.name

    def graph(self, phase: str, **dims: Any) -> nx.DiGraph:
        """``build_model(config, phase, **dims)``, built on the first request and shared after.

        Parameters
        ----------
        phase : str
            ``"decode"`` or ``"prefill"``.
        **dims
            :func:`build_model`'s keywords (``batch``, ``ctx``, ``seq``, ``tp``, ``logits`` ...).

        Returns
        -------
        networkx.DiGraph

        Raises
        ------
        CostModelError
            When ``phase`` is unknown.
        """
        if phase not in PHASES:
            raise CostModelError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
        key = (phase, *sorted(dims.items()))
        g = self._graphs.get(key)
        if g is None:
            g = build_model(self.config, phase, **dims)
            self._graphs[key] = g
            self.builds += 1
        return g

    def step_time(self, hw: Hardware, phase: str, **dims: Any) -> sympy.Expr:
        """Sum over kernels of each kernel's roofline for that graph on ``hw`` (cached).

        Parameters
        ----------
        hw : Hardware
            The device.
        phase : str
            ``"decode"`` or ``"prefill"``.
        **dims
            :func:`build_model`'s keywords.

        Returns
        -------
        sympy.Expr
            Seconds.
        """
        key = (hw, phase, *sorted(dims.items()))
        t = self._times.get(key)
        if t is None:
            t = step_time(self.graph(phase, **dims), hw)
            self._times[key] = t
        return t

    def __repr__(self) -> str:
        return f"Workload({self.config.name!r}, {self.builds} graph(s) built)"


def as_workload(config: ModelConfig | str | Workload) -> Workload:
    """``config`` as a :class:`Workload`: a workload is passed through, anything else resolved once.

    Parameters
    ----------
    config : ModelConfig, str, os.PathLike, dict or Workload
        A catalog name, a ``config.json`` path (or its folder), a parsed ``config.json``, a
        config, or a workload.

    Returns
    -------
    Workload

    Raises
    ------
    CostModelError
        When ``config`` is none of these (:func:`models.catalog.get_model`'s error), an unknown
        catalog name (:class:`~models.catalog.UnknownModelError`) or a config it cannot read.
    """
    return config if isinstance(config, Workload) else Workload(config)
