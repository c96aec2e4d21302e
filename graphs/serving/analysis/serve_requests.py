"""``serve disagg`` and ``serve plans`` requests: typed and checked in one place (issue 43 item 3).

:class:`DisaggRequest` holds a disaggregated deployment's question (which devices prefill and
decode, the request shape, the KV link, a rate to size both pools at, how the transfer overlaps);
:class:`PlansRequest` a parallel-plan comparison (devices, batches, context, ``TPxPPxEPxMB``
plans, the MoE routing). Building one checks every range, each refusal one line naming the option
as the command line spells it; :func:`parse_plans` reads ``--plans``' words. Standard library and
the core's error only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError

from ..step.option_checks import check_choice, check_devices, check_number, check_whole_list, label

__all__ = ["DisaggRequest", "PlansRequest", "parse_plans", "OVERLAPS", "INT_RANGES", "FLOAT_RANGES"]

#: how the KV transfer overlaps the prefill (:mod:`graphs.serving.analysis.disagg`)
OVERLAPS = ("after", "layerwise")
#: whole-number settings: (smallest, largest) accepted (the command line's, by the same names)
INT_RANGES: dict[str, tuple[int, int]] = {
    "prompt": (1, 10**8),
    "output": (1, 10**8),
    "decode_batch": (1, 10**7),
    "ctx": (1, 10**8),
}
#: real-valued settings (SI units): (low, high, low inclusive); each must be finite
FLOAT_RANGES: dict[str, tuple[float, float, bool]] = {
    "rate": (1e-6, 1e9, True),  # requests/s
    "link_bandwidth": (1e6, 1e15, True),  # bytes/s per direction: 1 MB/s to 1 PB/s
    "link_latency": (0.0, 1.0, True),  # s per layer
}
#: the most plans, batches and devices one comparison takes
MOST_PLANS = 256
MOST_BATCHES = 10_000
#: a plan's degrees (tp, pp, ep) and micro-batches: at most this each
MOST_DEGREE = 4096


def _check(owner: Any, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(owner, name)
        if value is None:
            continue
        if name in INT_RANGES:
            check_number(name, value, *INT_RANGES[name], whole=True)
        else:
            lo, hi, inclusive = FLOAT_RANGES[name]
            check_number(name, value, lo, hi, inclusive=inclusive)


@dataclass(frozen=True, slots=True)
class DisaggRequest:
    """Prefill on one device type, decode on another, the KV cache over a link: checked when built.

    Parameters
    ----------
    prefill_device, decode_device : str
        Catalog device names or aliases.
    prompt, output : int
        Prompt and generated tokens per request.
    decode_batch : int
        Sequences per decode step.
    link_bandwidth : float
        KV link bandwidth per direction (bytes/s).
    link_latency : float
        KV transfer latency per layer (s); 0 by default, as ``simulate --disagg``, ``size`` and
        :func:`graphs.serving.analysis.disagg.disaggregated` take it.
    rate : float, optional
        Requests per second: sizes both pools (None: each device alone, 100 % busy).
    overlap : str
        ``after`` (the transfer after the whole prefill) or ``layerwise`` (layer by layer during it).
    ignore_capacity : bool
        Report a point that does not fit its devices' memory anyway.
    predict : str, optional
        The corpus framework whose measured kernels price the steps (None: the bound).
    allow_long_context : bool
        Cost ``prompt + output`` beyond the model's context limit (``--allow-long-context``);
        False: :func:`~graphs.serving.analysis.disagg.disaggregated` refuses it.
    """

    prefill_device: str = "b200"
    decode_device: str = "h200"
    prompt: int = 8192
    output: int = 512
    decode_batch: int = 32
    link_bandwidth: float = 50e9
    link_latency: float = 0.0
    rate: float | None = None
    overlap: str = "after"
    ignore_capacity: bool = False
    predict: str | None = None
    allow_long_context: bool = False

    def __post_init__(self) -> None:
        check_devices((self.prefill_device,), "--prefill-device")
        check_devices((self.decode_device,), "--decode-device")
        _check(self, ("prompt", "output", "decode_batch", "link_bandwidth", "link_latency", "rate"))
        check_choice("overlap", self.overlap, OVERLAPS)
        for name in ("ignore_capacity", "allow_long_context"):
            if not isinstance(getattr(self, name), bool):
                raise CostModelError(f"{label(name)} must be True or False, got {getattr(self, name)!r:.40}")


def parse_plans(text: str) -> tuple[tuple[int, int, int, int], ...]:
    """``--plans``' comma-separated ``TPxPPxEPxMICROBATCHES`` words as tuples.

    Parameters
    ----------
    text : str
        E.g. ``8x1x1x1,4x2x1x4``.

    Returns
    -------
    tuple of (int, int, int, int)
        ``(tp, pp, ep, microbatches)`` per plan.

    Raises
    ------
    CostModelError
        When a word is not four whole numbers joined by ``x``, or a plan is given twice.
    """
    plans: list[tuple[int, int, int, int]] = []
    for p in text.split(","):
        parts = p.split("x")
        if len(parts) != 4 or not all(x.strip().isdigit() for x in parts):
            raise CostModelError(f"--plans: {p!r} is not TPxPPxEPxMICROBATCHES, e.g. 4x2x1x4")
        plan = (int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]))
        if plan in plans:  # the same rows twice, both on the frontier
            raise CostModelError(f"--plans gives {p.strip()!r} twice: list each plan once")
        plans.append(plan)
    return tuple(plans)


@dataclass(frozen=True, slots=True)
class PlansRequest:
    """Parallel plans x devices x batches at one context: checked when built.

    Parameters
    ----------
    devices : tuple of str
        Catalog device names or aliases.
    batches : tuple of int
        Decode batch sizes.
    ctx : int
        KV length (tokens).
    plans : tuple of (int, int, int, int)
        ``(tp, pp, ep, microbatches)`` per plan (:func:`parse_plans`).
    routing : Routing, optional
        A MoE layer's routing over the EP ranks (None: uniform).
    predict : str, optional
        The corpus framework whose measured kernels price the steps (None: the bound).
    """

    devices: tuple[str, ...] = ("h100-sxm",)
    batches: tuple[int, ...] = (16, 64)
    ctx: int = 4096
    plans: tuple[tuple[int, int, int, int], ...] = ((8, 1, 1, 1), (4, 2, 1, 1), (4, 2, 1, 4), (2, 4, 1, 8))
    routing: Any = None
    predict: str | None = None

    def __post_init__(self) -> None:
        check_devices(self.devices)
        check_whole_list("batches", self.batches, 10**8, MOST_BATCHES)
        _check(self, ("ctx",))
        if not isinstance(self.plans, tuple) or not 0 < len(self.plans) <= MOST_PLANS:
            raise CostModelError(f"--plans must list 1 to {MOST_PLANS} plans, got {self.plans!r}")
        for plan in self.plans:
            ok = isinstance(plan, tuple) and len(plan) == 4
            if not ok or not all(isinstance(v, int) and 1 <= v <= MOST_DEGREE for v in plan):
                raise CostModelError(
                    f"--plans: {plan!r} is not four whole numbers in [1, {MOST_DEGREE}] (tp, pp, ep, micro-batches)"
                )

    @property
    def skewed(self) -> bool:
        """A routing other than the default uniform one: the plans are compared with uniform too."""
        return self.routing is not None and (self.routing.kind != "uniform" or not self.routing.is_default)
