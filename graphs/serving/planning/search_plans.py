"""The design search's grid: its plans (device, dtypes, tp, ep, data-parallel ranks) and axes, checked.

A device given twice (also by an alias: ``h100`` and ``h100-sxm``) is refused, naming it, as
every list option refuses a repeat (:func:`~graphs.serving.step.option_checks.check_device_repeats`);
so is a dtype given twice (also by an alias: ``fp8`` and ``fp8_e4m3``,
:func:`~graphs.serving.step.option_checks.check_dtype_repeats`). A plan wider than its device's scale-up domain (``tp x ep`` above the devices one NVLink
bridge, board or NVL72 rack joins) has its collectives priced on the device's ``scale_out`` link,
as ``decode`` and ``simulate`` price it (:meth:`costmodel.hardware.Hardware.group_link`), said
once; on a device without one (an NVLink bridge of two PCIe cards) it is left out and named.

A data-parallel plan (``dp > 1``: attention data-parallel over ``dp`` ranks of ``tp`` devices,
the experts over all ``dp x tp``, :mod:`graphs.serving.sim.data_parallel`) spreads its experts
over its group, by width or whole (``expert_parallel``): it is built with ``ep = 1`` only, and its
``dp x tp`` devices must fit the domain.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, get_device
from graphs.serving.step.option_checks import check_device_repeats, check_dtype_repeats
from models.config import ModelConfig
from models.quantization import native_matmul, weights_in

__all__ = ["Plan", "grid_size", "positive_ints", "plans_of"]


@dataclass(frozen=True)
class Plan:
    """One compiled configuration: a device, dtypes, tensor and expert parallelism, and
    data-parallel attention ranks (``dp``, with how the group holds and reaches its experts)."""

    config: ModelConfig
    device: Hardware
    tp: int
    ep: int
    dp: int = 1
    expert_parallel: bool = False  #: with dp > 1: whole experts per device, else split dp x tp ways
    dispatch: str = "allgather_reducescatter"  #: with dp > 1: graphs.serving.sim.data_parallel.DISPATCHES

    @property
    def devices(self) -> int:
        """Devices of one pipeline stage of the plan: ``tp x ep x dp``."""
        return self.tp * self.ep * self.dp

    @property
    def label(self) -> tuple[str, str, str, int, int]:
        return (self.device.name, self.config.weight_dtype, self.config.cache_dtype, self.tp, self.ep)


def grid_size(
    n_plans: int,
    pps: Sequence[int] | np.ndarray,
    mbs: Sequence[int] | np.ndarray,
    batches: Sequence[int] | np.ndarray,
    ctxs: Sequence[int] | np.ndarray,
) -> int:
    """Points in the grid: plans x pp x micro-batches x batches x contexts.

    Parameters
    ----------
    n_plans : int
        How many plans (:func:`plans_of`).
    pps, mbs : sequence of int or numpy.ndarray
        The pipeline-parallel degrees (stages) and micro-batch counts searched.
    batches : sequence of int or numpy.ndarray
        The batch sizes searched (sequences).
    ctxs : sequence of int or numpy.ndarray
        The context lengths searched (tokens).

    Returns
    -------
    int
        The number of grid points, the product of the five counts.
    """
    return n_plans * len(pps) * len(mbs) * len(batches) * len(ctxs)


def positive_ints(values: Sequence[int], name: str) -> np.ndarray:
    """A search axis checked: whole numbers >= 1, at least one, sorted and each once.

    Parameters
    ----------
    values : sequence of int
        The axis's values as given (floats with no fraction allowed).
    name : str
        The axis's name, for the error message.

    Returns
    -------
    numpy.ndarray
        The distinct values, ascending, as int64.

    Raises
    ------
    CostModelError
        When ``values`` is empty, holds a number that is not whole, or one below 1.

    >>> positive_ints([4, 1, 4.0], "tp").tolist()
    [1, 4]
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise CostModelError(
            f"{name} must be a list of whole numbers, got {type(values).__name__} {repr(values)[:40]}"
        )
    arr = np.asarray(list(values))
    if arr.size == 0:
        raise CostModelError(f"{name}: give at least one value")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(arr == np.floor(arr))):
        raise CostModelError(f"{name} must be whole numbers, got {list(values)[:5]}")
    if (arr < 1).any():
        raise CostModelError(f"{name} must be >= 1, got {sorted(set(arr.tolist()))[:5]}")
    return np.unique(arr.astype(np.int64))


def plans_of(
    cfg: ModelConfig,
    devices: Sequence[Any],
    wds: Sequence[Any],
    kvds: Sequence[Any],
    tps: list[int],
    eps: list[int],
    dps: Sequence[int] = (1,),
    expert_parallel: bool = False,
    dispatch: str = "allgather_reducescatter",
) -> tuple[list[Plan], list[str], tuple[str, ...], tuple[str, ...]]:
    """The plans of the grid, leaving out those wider than their device's scale-up domain where it
    has no scale-out link to price them over (module doc), the plans equal to another (a dtype
    the model already has, searched once; a repeated device or dtype is refused), and the notes on the matmul dtype a weight
    dtype implies on each device (:func:`models.quantization.native_matmul`). A ``dp > 1`` plan
    is built with ``ep = 1`` only (module doc), with ``expert_parallel`` and ``dispatch``.

    Parameters
    ----------
    cfg : ModelConfig
        The model; each plan's config is it with the plan's dtypes.
    devices : sequence
        The devices (catalog names, aliases or :class:`~costmodel.hardware.Hardware`).
    wds, kvds : sequence
        The weight and KV-cache dtypes searched (names; None keeps the model's own).
    tps, eps : list of int
        The tensor- and expert-parallel degrees (devices) searched.
    dps : sequence of int
        The data-parallel attention ranks searched (default ``(1,)``: none).
    expert_parallel : bool
        With ``dp > 1``: whole experts per device, else each expert split ``dp x tp`` ways.
    dispatch : str
        With ``dp > 1``: how tokens reach the experts, one of
        :data:`graphs.serving.sim.data_parallel.DISPATCHES`.

    Returns
    -------
    plans : list of Plan
        The distinct plans that fit their device's scale-up domain.
    beyond : list of str
        The plans left out as wider than their domain on a device without a scale-out link, one
        line each.
    repeats : tuple of str
        The plans equal to another (the model's own dtype given by name), searched once.
    notes : tuple of str
        The notes on the matmul dtype each weight dtype implies on a device, and on a group
        priced across scale-up domains.

    Raises
    ------
    CostModelError
        When a device or a dtype is given twice (or by two aliases), or when every plan spans more devices than its scale-up domain joins, on a device without a
        scale-out link.
    """
    check_device_repeats(devices, "devices")
    check_dtype_repeats(wds, "weight_dtypes")  # the library's parameters: the CLI refused its own
    check_dtype_repeats(kvds, "kv_dtypes")
    hws: dict[str, Hardware] = {hw.name: hw for hw in map(get_device, devices)}
    dups: list[str] = []
    plans, beyond = [], []
    notes: dict[str, None] = {}
    grid = itertools.product(hws.values(), dict.fromkeys(wds), dict.fromkeys(kvds), tps, eps, dps)
    for hw, wd, kvd, t, e, d in grid:
        if d > 1 and e > 1:
            continue  # a group spreads its experts over its own devices (module doc)
        domain = next((lk.domain for lk in hw.links if lk.name == "scale_up"), None)
        if domain is not None and t * e * d > domain:
            if not any(lk.name == "scale_out" for lk in hw.links):  # nothing to price it over
                beyond.append(
                    f"{hw.name} tp={t} ep={e}" + (f" dp={d}" if d > 1 else "") + f" (domain {domain})"
                )
                continue
            for across in hw.group_notes(t * e * d):  # priced on the network, as decode and simulate do
                notes.setdefault(across)
        c = cfg if kvd is None else cfg.replace(kv_dtype=kvd)
        if wd is not None:  # every weight, the routed experts' own format too
            c, note = weights_in(c, wd)
            if note:
                notes.setdefault(note)
        if wd is not None:  # fp8/nvfp4 weights run W8A8/W4A4 where the tensor cores can
            c, note = native_matmul(c, [hw])
            if note:
                notes.setdefault(note)
        if d > 1:
            plans.append(Plan(c, hw, int(t), int(e), int(d), expert_parallel, dispatch))
        else:
            plans.append(Plan(c, hw, int(t), int(e)))
    if not plans and not beyond:  # every (ep, dp) pair had both above 1
        raise CostModelError(
            f"ep {sorted(set(eps))} with dp {sorted(set(dps))}: a data-parallel group spreads its experts over its "
            "own devices (--enable-expert-parallel), so a plan with dp > 1 takes ep 1; give ep 1 among the eps"
        )
    if not plans:
        raise CostModelError(
            "every plan spans more devices than its scale-up domain joins, on a device with no scale_out link "
            "to price it over: " + "; ".join(beyond)
        )
    unique = list(dict.fromkeys(plans))  # None and the model's own dtype make the same plan
    if len(unique) < len(plans):
        dups.append(f"{len(plans) - len(unique)} plan(s) equal to another (a dtype the model already has)")
    return unique, beyond, tuple(dups), tuple(notes)
