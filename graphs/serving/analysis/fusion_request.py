"""``fusion audit`` and ``fusion plan`` requests: the step whose kernels are audited or planned,
typed and checked in one place (issue 43 item 3).

:class:`FusionStep` is the step (device, phase, batch, prompt or context, one layer or the whole
model) and builds its graph; :class:`AuditRequest` adds which plan the audit reads and how many
boundaries it lists, :class:`PlanRequest` the planner's settings (legality table, objective,
method, time limit, a Hugging Face layer instead of the engine's). Building one checks every range
and every dependency between settings, each refusal one line naming the option as the command line
spells it. Standard library and the core's error only at import: the graph builders load when a
graph is built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError

from ..step.defaults import DEFAULT_SEQ
from ..step.option_checks import check_choice, check_number
from .phase_request import INT_RANGES, PHASES

if TYPE_CHECKING:
    import networkx as nx

    from costmodel.hardware import Hardware
    from models.config import ModelConfig

__all__ = ["FusionStep", "AuditRequest", "PlanRequest", "AUDIT_PLANS", "OBJECTIVES", "METHODS"]

#: the plans an audit reads: the engine's suggestion, or one kernel per op
AUDIT_PLANS = ("suggested", "unfused")
#: what the planner minimises: roofline time or DRAM bytes (:data:`costmodel.fusion_plan.OBJECTIVES`)
OBJECTIVES = ("time", "bytes")
#: how the planner solves: exact (HiGHS, the fusion extra), heuristic, or exact when installed
METHODS = ("auto", "exact", "heuristic")
#: boundaries an audit lists: (fewest, most)
TOP_RANGE = (0, 10**6)


@dataclass(frozen=True, slots=True)
class FusionStep:
    """The step whose kernels are fused: checked when built (module doc).

    Parameters
    ----------
    device : str
        Catalog device name or alias.
    phase : str
        ``decode`` (``batch`` sequences over ``ctx`` cached tokens) or ``prefill`` (``batch``
        prompts of ``seq`` tokens).
    batch, seq, ctx : int
        Sequences, prompt length and KV length (tokens).
    whole_model : bool
        The whole model, not one layer.
    """

    device: str = "h100-sxm"
    phase: str = "decode"
    batch: int = 1
    seq: int = DEFAULT_SEQ
    ctx: int = 4096
    whole_model: bool = False

    def __post_init__(self) -> None:
        check_choice("phase", self.phase, PHASES)
        for name in ("batch", "seq", "ctx"):
            check_number(name, getattr(self, name), *INT_RANGES[name], whole=True)

    @property
    def scope(self) -> str:
        """``model`` or ``layer``."""
        return "model" if self.whole_model else "layer"

    @property
    def where(self) -> str:
        """The step's point as the reports print it: ``batch 1, ctx 4096``."""
        at = f"seq {self.seq}" if self.phase == "prefill" else f"ctx {self.ctx}"
        return f"batch {self.batch}, {at}"

    def graph(self, config: ModelConfig, hw: Hardware | None = None) -> nx.DiGraph:
        """The step's graph of ``config``: one layer, or the whole model, as it runs on ``hw``
        (the build keywords the device decides, :func:`graphs.serving.step.compiled.device_dims`).

        Parameters
        ----------
        config : ModelConfig
            The model.
        hw : Hardware, optional
            The device (None: the model's graph alone).

        Returns
        -------
        networkx.DiGraph
            :func:`graphs.blocks.transformer.build_layer` or :func:`~graphs.blocks.transformer.build_model`.
        """
        from graphs.blocks.transformer import build_layer, build_model

        from ..step.compiled import device_dims

        build = build_model if self.whole_model else build_layer
        at = device_dims(config, hw) if hw is not None else {}
        return build(config, self.phase, batch=self.batch, seq=self.seq, ctx=self.ctx, **at)


@dataclass(frozen=True, slots=True)
class AuditRequest(FusionStep):
    """A ``fusion audit``: the step (:class:`FusionStep`), the plan audited, boundaries listed.

    Parameters
    ----------
    plan : str
        ``suggested`` (the engine's suggestion) or ``unfused`` (one kernel per op).
    top : int
        Kernel boundaries the text lists, most expensive first.
    """

    plan: str = "suggested"
    top: int = 10

    def __post_init__(self) -> None:
        FusionStep.__post_init__(self)
        check_choice("plan", self.plan, AUDIT_PLANS)
        check_number("top", self.top, *TOP_RANGE, whole=True)


@dataclass(frozen=True, slots=True)
class PlanRequest(FusionStep):
    """A ``fusion plan``: the step (:class:`FusionStep`) and the planner's settings.

    Parameters
    ----------
    backend : str
        The legality table (:data:`costmodel.fusion_legality.LEGALITY`: ``default``,
        ``inductor``, ``cublaslt``).
    objective : str
        ``time`` (roofline seconds) or ``bytes`` (DRAM bytes).
    method : str
        ``auto``, ``exact`` or ``heuristic``.
    time_limit : float
        Seconds per region for the exact solve's enumeration, and again for its solves together.
    hf_layer : bool
        Plan the ATen graph of one Hugging Face decoder layer (meta device; torch and
        transformers), not the engine's layer: one layer only.
    """

    backend: str = "default"
    objective: str = "time"
    method: str = "auto"
    time_limit: float = 10.0
    hf_layer: bool = False

    def __post_init__(self) -> None:
        from costmodel.fusion_legality import LEGALITY

        FusionStep.__post_init__(self)
        check_choice("backend", self.backend, tuple(LEGALITY))
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("method", self.method, METHODS)
        check_number("time_limit", self.time_limit, 0.0, math.inf, inclusive=False)
        if self.hf_layer and self.whole_model:
            raise CostModelError("--hf-layer exports one decoder layer: drop --whole-model")

    @property
    def scope(self) -> str:
        """``Hugging Face layer (ATen, meta device)``, ``model`` or ``layer``."""
        if self.hf_layer:  # one layer only: never with whole_model
            return "Hugging Face layer (ATen, meta device)"
        return "model" if self.whole_model else "layer"

    def hf_graph(self, config: Mapping[str, Any]) -> nx.DiGraph:
        """The step's graph of one Hugging Face decoder layer (``hf_layer``).

        Parameters
        ----------
        config : mapping
            A parsed Hugging Face ``config.json``.

        Returns
        -------
        networkx.DiGraph
            :func:`graphs.importers.hf_layer.hf_layer_graph`.
        """
        from graphs.importers.hf_layer import hf_layer_graph

        return hf_layer_graph(config, self.phase, batch=self.batch, seq=self.seq, ctx=self.ctx)
