"""A ``decode`` or ``prefill`` request: the one step a phase report prices, typed and checked in
one place (issue 43 item 3).

:class:`PhaseRequest` holds the point (batch and context, or prompt and chunk), the plan (tp, the
MoE routing over ``ep`` ranks) and what prices it (``predict``, ``fp8_scales``); building it
checks each range and the settings that depend on each other (a chunked prompt's number of
chunks, ``--chunk`` beside ``--predict``, FP8 scales without a predictor), each refusal one line
naming the option as the command line spells it. It imports only the standard library and the
core's error (a routing distribution is parsed, with numpy, only when one is given), so the
command's cached fast path stays light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError

from ..step.defaults import DEFAULT_SEQ
from ..step.option_checks import check_choice, check_number

__all__ = ["PhaseRequest", "PHASES", "INT_RANGES", "PLACEMENTS"]

PHASES = ("decode", "prefill")
#: how experts are placed on EP ranks (:mod:`graphs.serving.step.expert_routing`)
PLACEMENTS = ("contiguous", "balanced")
#: whole-number settings: (smallest, largest) accepted (the command line's, by the same names)
INT_RANGES: dict[str, tuple[int, int]] = {
    "batch": (1, 10**7),
    "ctx": (1, 10**8),
    "seq": (1, 10**8),
    "chunk": (1, 10**8),
    "tp": (1, 4096),
    "ep": (1, 4096),
    "replicate_hot": (0, 4096),
}


@dataclass(frozen=True, slots=True)
class PhaseRequest:
    """One decode or prefill step to price, checked when built (module doc).

    Parameters
    ----------
    phase : str
        ``decode`` (``batch`` sequences over ``ctx`` cached tokens) or ``prefill`` (``batch``
        prompts of ``seq`` tokens, in chunks of ``chunk`` when given).
    device : str
        Catalog device name or alias.
    batch, ctx, seq : int
        Sequences, KV length (decode) and prompt length (prefill), tokens.
    chunk : int, optional
        Chunked prefill: tokens per chunk (None: the whole prompt at once).
    tp, ep : int
        Tensor-parallel and expert-parallel degrees.
    routing, placement, replicate_hot : str, str, int
        A MoE layer's routing distribution (``uniform``, ``zipf:S``, ``hist:C1,C2,...``), how
        experts sit on EP ranks, hot experts given a second copy.
    predict, predict_file : str, optional
        The corpus framework whose measured kernels price the step; a fit file's path.
    fp8_scales : str, optional
        How FP8 activations are scaled (``dynamic`` or ``static``; with a predictor only).
    """

    phase: str
    device: str = "h100-sxm"
    batch: int = 1
    ctx: int = 4096
    seq: int = DEFAULT_SEQ
    chunk: int | None = None
    tp: int = 1
    ep: int = 1
    routing: str = "uniform"
    placement: str = "contiguous"
    replicate_hot: int = 0
    predict: str | None = None
    predict_file: str | None = None
    fp8_scales: str | None = None

    def __post_init__(self) -> None:
        from costmodel.measured.corpus import FP8_SCALES, FRAMEWORKS  # stdlib only

        check_choice("phase", self.phase, PHASES)
        for name, (lo, hi) in INT_RANGES.items():
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), lo, hi, whole=True)
        check_choice("placement", self.placement, PLACEMENTS)
        if self.predict is not None:
            check_choice("predict", self.predict, FRAMEWORKS)
        if self.fp8_scales is not None:
            check_choice("fp8_scales", self.fp8_scales, FP8_SCALES)
            if not self.predict and not self.predict_file:
                raise CostModelError(
                    f"--fp8-scales {self.fp8_scales} prices measured FP8 kernels: add --predict FRAMEWORK "
                    "(the bound has none)"
                )
        if self.chunk is not None:
            if self.phase != "prefill":
                raise CostModelError(
                    f"--chunk {self.chunk} splits a prefill's prompt; a decode step has none"
                )
            if self.predict:
                raise CostModelError(
                    f"--chunk {self.chunk} with --predict: the calibrated prediction prices whole-prompt "
                    "prefill only; drop --chunk (or --predict)"
                )
            from ..step.reports import chunk_plan  # light

            chunk_plan(self.seq, self.chunk)  # too many chunks
        self.plan()  # a routing that does not parse

    @property
    def tokens(self) -> int:
        """The tokens the step holds per sequence: ``ctx`` for decode, ``seq`` for prefill."""
        return self.ctx if self.phase == "decode" else self.seq

    @property
    def routed(self) -> bool:
        """Expert parallelism or a routing other than the default (uniform, contiguous, no copies):
        the step is not the one a cached card holds."""
        return self.ep > 1 or (self.routing, self.placement, self.replicate_hot) != (
            "uniform",
            "contiguous",
            0,
        )

    def plan(self) -> dict[str, Any]:
        """The expert plan a phase report takes (``ep`` and a parsed
        :class:`~graphs.serving.step.expert_routing.Routing`), empty for the default step."""
        if not self.routed:
            return {}
        from ..step.expert_routing import parse_routing

        return {"ep": self.ep, "routing": parse_routing(self.routing, self.placement, self.replicate_hot)}
