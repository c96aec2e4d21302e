"""NCCL collectives other than all-reduce, priced from the corpus's own measurements (no fit).

The ``aiconfigurator-core`` wheel times NCCL's ``all_gather``, ``reduce_scatter`` and ``alltoall``
on each measured system (``comm/nccl/<version>/nccl_perf.parquet``, read with :mod:`.corpus`'s
file discovery and version choice) at ``num_gpus`` 2, 4 and 8 (2 and 4 on GB200/GB300), message
sizes of 256 to 2^29 elements, ``half`` (2-byte) and ``int8`` (1-byte) elements. The message size
is the *whole* tensor's elements, nccl-tests' convention (``all_gather_perf``: the gathered
output; ``reduce_scatter_perf``: the input summed; ``alltoall_perf``: each rank's send buffer),
the ``elements`` of the ``all_gather``, ``reduce_scatter`` and ``all_to_all`` rules: on H200, 2^26
``half`` elements gather over 8 GPUs in 380 us, ``7/8 x 134 MB / 380 us = 309 GB/s`` of bus
bandwidth per GPU, under NVLink 4's 450 GB/s per direction (a per-rank reading would be eight
times that, above the link).

:func:`collective_curve` gives one (device, op, GPUs, element size) series as a
:class:`CollectiveCurve`: between measured sizes the latency is linear in ``(log n, log t)``;
below the smallest it is that size's (the launch and a round trip); beyond the largest it grows
in proportion to ``n`` (bandwidth-bound). Only the device's own rows price it: a collective's
time is its links', which another system's rows do not share (None: the caller keeps its bound).
The caller clamps every price to its roofline bound.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from .corpus import SYSTEMS, table_frame

__all__ = ["NCCL_OPS", "NCCL_DTYPES", "CollectiveCurve", "collective_curve"]

#: our collective rule -> the NCCL table's ``op_name``
NCCL_OPS = {"all_gather": "all_gather", "reduce_scatter": "reduce_scatter", "all_to_all": "alltoall"}
#: bytes per element -> the NCCL table's ``nccl_dtype`` (``half``: fp16/bf16; ``int8``: any 1-byte type)
NCCL_DTYPES = {2: "half", 1: "int8"}


@dataclass(frozen=True)
class CollectiveCurve:
    """One collective's measured latency over message sizes (module doc).

    Attributes
    ----------
    op : str
        Our rule's name (``all_gather``, ``reduce_scatter``, ``all_to_all``).
    gpus : int
        The devices it spans.
    elements : tuple of float
        Measured message sizes (elements, ascending, distinct).
    seconds : tuple of float
        The fastest measured latency at each size (s).
    source : str
        Where the rows come from: ``nccl <version> on <system>``.
    """

    op: str
    gpus: int
    elements: tuple[float, ...]
    seconds: tuple[float, ...]
    source: str

    def at(self, n: float) -> float:
        """Seconds at ``n`` elements (module doc).

        .. math:: t(n) = \\begin{cases} t_0 & n \\le n_0 \\\\
            \\exp\\big(\\mathrm{lerp}_{\\log n}(\\log t)\\big) & n_0 < n \\le n_{max} \\\\
            t_{max}\\, n / n_{max} & n > n_{max} \\end{cases}

        Parameters
        ----------
        n : float
            The message's elements (nccl-tests' size).

        Returns
        -------
        float
            Seconds (0 for ``n <= 0``).

        >>> round(CollectiveCurve("all_gather", 8, (256.0, 1024.0), (1e-5, 2e-5), "").at(512.0) * 1e6, 6)
        14.142136
        """
        if n <= 0:
            return 0.0
        xs, ts = self.elements, self.seconds
        if n <= xs[0]:
            return ts[0]
        if n >= xs[-1]:
            return ts[-1] * n / xs[-1]
        i = bisect.bisect_right(xs, n) - 1
        w = math.log(n / xs[i]) / math.log(xs[i + 1] / xs[i])
        return math.exp(math.log(ts[i]) + w * math.log(ts[i + 1] / ts[i]))


@functools.cache
def collective_curve(device: str, op: str, gpus: int, element_bytes: int) -> CollectiveCurve | None:
    """``device``'s own NCCL measurements of ``op`` over ``gpus`` devices with elements of
    ``element_bytes`` bytes (module doc), or None when it has none.

    Parameters
    ----------
    device : str
        The device's catalog name.
    op : str
        One of :data:`NCCL_OPS` (our rule's name).
    gpus : int
        The devices the collective spans.
    element_bytes : int
        Bytes per element (:data:`NCCL_DTYPES`: 2 or 1).

    Returns
    -------
    CollectiveCurve or None
        The measured series; None when the device, the GPU count or the element size is not measured.
    """
    name, dt = NCCL_OPS.get(op), NCCL_DTYPES.get(int(element_bytes))
    if name is None or dt is None:
        return None
    for system, dev in SYSTEMS.items():
        if dev != device:
            continue
        df = table_frame(system, "nccl")
        if df is None:
            continue
        df = df[
            (df["op_name"] == name)
            & (df["num_gpus"] == gpus)
            & (df["nccl_dtype"] == dt)
            & (df["latency"] > 0)
        ]
        if df.empty:
            continue
        best = df.groupby("message_size")["latency"].min().sort_index()
        return CollectiveCurve(
            op,
            int(gpus),
            tuple(float(x) for x in best.index),
            tuple(float(t) * 1e-3 for t in best.to_numpy()),  # the table's milliseconds
            f"nccl {df['version'].iloc[0]} on {system}",
        )
    return None
