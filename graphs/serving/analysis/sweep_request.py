"""A ``sweep`` request: the decode grid (devices x weight dtypes x KV dtypes x batches x
contexts), typed and checked in one place (issue 43 item 3).

Building a :class:`SweepRequest` checks the tensor-parallel degree, the rows shown and the grid's
size (:func:`graphs.serving.analysis.sweeps.check_grid`: a grid too large is refused before any
work), each refusal one line naming the option as the command line spells it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..step.option_checks import check_device_repeats, check_devices, check_number
from .phase_request import INT_RANGES

__all__ = ["SweepRequest", "TOP_RANGE"]

#: frontier rows the text shows: (fewest, most); 0 shows all
TOP_RANGE = (0, 10**6)


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """One decode sweep, checked when built (module doc).

    Parameters
    ----------
    devices : tuple of str
        Catalog device names or aliases.
    batches, ctxs : tuple of int
        Decode batches (sequences) and KV lengths (tokens).
    weight_dtypes, kv_dtypes : tuple of (str or None)
        The dtypes swept (None: the model's own).
    tp : int
        Tensor-parallel degree.
    top : int
        Frontier rows the text shows (0: all).
    predict : str, optional
        The corpus framework whose measured kernels price every step (None: the bound).
    """

    devices: tuple[str, ...] = ("h100-sxm",)
    batches: tuple[int, ...] = (1,)
    ctxs: tuple[int, ...] = (4096,)
    weight_dtypes: tuple[str | None, ...] = (None,)
    kv_dtypes: tuple[str | None, ...] = (None,)
    tp: int = 1
    top: int = 0
    predict: str | None = None

    def __post_init__(self) -> None:
        from .sweeps import check_grid  # numpy

        check_devices(self.devices)
        check_device_repeats(self.devices)  # an alias is its device
        check_number("tp", self.tp, *INT_RANGES["tp"], whole=True)
        check_number("top", self.top, *TOP_RANGE, whole=True)
        check_grid(len(self.combos()), self.batches, self.ctxs)

    def combos(self) -> list[tuple[str, str | None, str | None]]:
        """Every (device, weight dtype, KV dtype) configuration swept, in order.

        Returns
        -------
        list of (str, str or None, str or None)
        """
        return list(itertools.product(self.devices, self.weight_dtypes, self.kv_dtypes))
