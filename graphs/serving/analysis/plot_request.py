"""A ``plot`` request: which figure of which step, typed and checked in one place (issue 43 item 3).

Building a :class:`PlotRequest` checks the figure's kind, the step's ranges and the settings that
depend on each other (``measure`` times this machine: batch-sweep only, and without a model or a
device), each refusal one line naming the option as the command line spells it. Standard library
and the core's error only.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.errors import CostModelError

from ..step.defaults import DEFAULT_SEQ
from ..step.option_checks import check_choice, check_number
from .phase_request import INT_RANGES, PHASES

__all__ = ["PlotRequest", "KINDS", "DEFAULT_MODEL", "DEFAULT_DEVICE", "DEFAULT_PRECISION", "PRECISION_KINDS"]

#: the figures ``plot`` draws
KINDS = ("roofline", "ledger", "frontier", "headroom", "batch-sweep")
#: the model and device a figure is of when none is given
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_DEVICE = "h100-sxm"
#: the figures that draw a tensor roof (``precision``), and the roof drawn when none is given
PRECISION_KINDS = ("roofline", "headroom")
DEFAULT_PRECISION = "bf16"


@dataclass(frozen=True, slots=True)
class PlotRequest:
    """One figure, checked when built (module doc).

    Parameters
    ----------
    kind : str
        ``roofline``, ``ledger``, ``frontier``, ``headroom`` or ``batch-sweep``.
    model, device : str, optional
        Catalog model (or config path) and device, as given (None: :data:`DEFAULT_MODEL`,
        :data:`DEFAULT_DEVICE`).
    phase : str
        ``decode`` or ``prefill`` (roofline and headroom).
    batch, seq, ctx : int
        Sequences, prompt length and KV length (tokens).
    tp : int
        Tensor-parallel degree.
    precision : str, optional
        The roofs drawn (roofline and headroom only: another figure refuses it), e.g. ``bf16``
        (None: :data:`DEFAULT_PRECISION`).
    measure : bool
        batch-sweep: time a numpy GEMM on this machine instead of the model's decode bound.
    """

    kind: str
    model: str | None = None
    device: str | None = None
    phase: str = "decode"
    batch: int = 8
    seq: int = DEFAULT_SEQ
    ctx: int = 4096
    tp: int = 1
    precision: str | None = None
    measure: bool = False

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, KINDS)
        check_choice("phase", self.phase, PHASES)
        for name in ("batch", "seq", "ctx", "tp"):
            check_number(name, getattr(self, name), *INT_RANGES[name], whole=True)
        if self.precision is not None and self.kind not in PRECISION_KINDS:
            raise CostModelError(
                f"--precision applies to {' and '.join(PRECISION_KINDS)} only (the roofs drawn), not {self.kind}"
            )
        if self.measure:
            if self.kind != "batch-sweep":
                raise CostModelError(f"--measure applies to batch-sweep only, not {self.kind}")
            if self.device is not None or self.model is not None:
                raise CostModelError(
                    "batch-sweep --measure times a numpy GEMM on this machine; drop --device/--model"
                )

    @property
    def model_name(self) -> str:
        """The model the figure is of (:data:`DEFAULT_MODEL` when none is given)."""
        return self.model or DEFAULT_MODEL

    @property
    def precision_name(self) -> str:
        """The tensor roof drawn (:data:`DEFAULT_PRECISION` when none is given)."""
        return self.precision or DEFAULT_PRECISION

    @property
    def device_name(self) -> str:
        """The device the figure is of (:data:`DEFAULT_DEVICE` when none is given)."""
        return self.device or DEFAULT_DEVICE
