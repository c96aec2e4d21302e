"""A ``plot`` request: which figure of which step, typed and checked in one place (issue 43 item 3).

Building a :class:`PlotRequest` checks the figure's kind, the step's ranges and the settings that
depend on each other (``measure`` times this machine: batch-sweep only, and without a model or a
device), each refusal one line naming the option as the command line spells it. Standard library
and the core's error only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
#: the step settings each figure draws at (the others it sets itself: the ledger and batch-sweep
#: their batches, the frontier its batches and contexts); roofline and headroom take ``seq`` at
#: a prefill and ``ctx`` at a decode. A setting a figure does not use is refused, never ignored.
USES = {
    "roofline": ("phase", "batch", "seq", "ctx", "tp"),
    "headroom": ("phase", "batch", "seq", "ctx", "tp"),
    "ledger": ("ctx", "tp"),
    "frontier": ("tp",),
    "batch-sweep": ("ctx", "tp"),
}
#: what each setting is when not given
DEFAULTS = {"phase": "decode", "batch": 8, "seq": DEFAULT_SEQ, "ctx": 4096, "tp": 1}
#: what a figure draws in place of a setting it does not take (the refusal says it)
_OWN = {
    "ledger": "batches 1 to 128 of a decode's ledger",
    "frontier": "decode batches 1 to 512 at ctx 1024, 4096 and 16384",
    "batch-sweep": "decode batches 1 to 1024",
}


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
    phase : str, optional
        ``decode`` or ``prefill`` (roofline and headroom; None: ``decode``).
    batch, seq, ctx : int, optional
        Sequences, prompt length and KV length (tokens); None: 8, :data:`DEFAULT_SEQ` and 4096.
        Each only where the figure draws at it (:data:`USES`; roofline and headroom take
        ``seq`` at a prefill, ``ctx`` at a decode): another is refused, never ignored.
    tp : int, optional
        Tensor-parallel degree (None: 1).
    precision : str, optional
        The roofs drawn (roofline and headroom only: another figure refuses it), e.g. ``bf16``
        (None: :data:`DEFAULT_PRECISION`).
    measure : bool
        batch-sweep: time a numpy GEMM on this machine instead of the model's decode bound.
    """

    kind: str
    model: str | None = None
    device: str | None = None
    phase: str | None = None
    batch: int | None = None
    seq: int | None = None
    ctx: int | None = None
    tp: int | None = None
    precision: str | None = None
    measure: bool = False

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, KINDS)
        if self.phase is not None:
            check_choice("phase", self.phase, PHASES)
        for name in ("batch", "seq", "ctx", "tp"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), *INT_RANGES[name], whole=True)
        # the fields keep what was given (None: not given), so a copy (dataclasses.replace)
        # checks the same settings; step() resolves the defaults
        self._check_used()
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

    def _check_used(self) -> None:
        """Refuse a step setting the figure does not draw at (``plot frontier --ctx 8192`` drew
        its own three contexts with nothing said), naming what it draws instead."""
        if self.measure:  # a numpy GEMM on this machine: no model step at all
            given = [n for n in DEFAULTS if getattr(self, n) is not None]
            if given and self.kind == "batch-sweep":
                raise CostModelError(
                    f"--{given[0]} does not apply to batch-sweep --measure: it times a numpy GEMM "
                    "[B, 2048] x [2048, 2048] on this machine, no model step"
                )
            return
        uses = USES[self.kind]
        for name in DEFAULTS:
            # every figure without a --phase draws decode steps: saying so is no conflict
            if name == "phase" and self.phase == "decode":
                continue
            if getattr(self, name) is not None and name not in uses:
                raise CostModelError(
                    f"--{name} does not apply to {self.kind}: it draws {_OWN[self.kind]}; "
                    f"{self.kind} takes {', '.join('--' + u for u in uses)}"
                )
        if self.kind in PRECISION_KINDS:  # a prefill reads --seq tokens, a decode attends --ctx
            if (self.phase or "decode") == "decode" and self.seq is not None:
                raise CostModelError(
                    f"--seq {self.seq} is a prefill's prompt length (--phase prefill); a decode step "
                    "attends --ctx tokens"
                )
            if self.phase == "prefill" and self.ctx is not None:
                raise CostModelError(
                    f"--ctx {self.ctx} is a decode's KV length (--phase decode); a prefill step reads "
                    "a --seq-token prompt"
                )

    def step(self) -> tuple[str, int, int, int, int]:
        """The step the figure draws at: ``(phase, batch, seq, ctx, tp)``, each as given or its
        :data:`DEFAULTS` value.

        Returns
        -------
        (str, int, int, int, int)
        """
        v: dict[str, Any] = {
            n: DEFAULTS[n] if getattr(self, n) is None else getattr(self, n) for n in DEFAULTS
        }
        return str(v["phase"]), int(v["batch"]), int(v["seq"]), int(v["ctx"]), int(v["tp"])

    @property
    def model_name(self) -> str:
        """The model the figure is of (:data:`DEFAULT_MODEL` when none is given)."""
        return self.model or DEFAULT_MODEL

    @property
    def precision_name(self) -> str:
        """The tensor roof drawn (:data:`DEFAULT_PRECISION` when none is given), spelled as
        ``--dtype`` is (``FP8``, ``fp8_e4m3``: the fp8 roof; :func:`costmodel.dtypes.precision_of`)."""
        from costmodel.dtypes import precision_of

        return precision_of(self.precision or DEFAULT_PRECISION)

    @property
    def device_name(self) -> str:
        """The device the figure is of (:data:`DEFAULT_DEVICE` when none is given)."""
        return self.device or DEFAULT_DEVICE
