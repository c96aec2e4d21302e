"""KV-cache tiers below GPU memory: host memory over the device's host link, then local SSD.

With prefix caching a replica keeps unreferenced shared prefixes in GPU blocks and evicts the
least recently used when blocks run out (:mod:`graphs.serving.sim.engine`). With tiers, an evicted
prefix moves down instead of being dropped: to host memory (``host_bytes`` for the replica),
and what host memory evicts, least recently used first, to SSD (``ssd_bytes``); what SSD
evicts is gone. A prefix too large for a tier skips it. Copies are kept (a tier is a cache, as
LMCache's CPU and disk backends and vLLM's ``OffloadingConnector`` CPU block pool are): a
prefix loaded back to the GPU stays below too, and moving it down again only refreshes it.

A request whose prefix is in no GPU block but in a lower tier loads it: its ``n`` blocks
(``n x block_size`` tokens of ``kv`` bytes per token per device, each of the replica's ``tp``
devices over its own link) take

.. math:: t_{load} = \\frac{n \\, b \\, kv}{\\beta}

with ``beta`` the host link (bytes/s per direction: PCIe Gen5 x16 64 GB/s, NVLink-C2C 450 GB/s,
the catalog's ``host`` link) for host memory and ``min(beta_ssd, beta)`` for SSD (the drive, then
the host link). The load overlaps the iteration's compute layer by layer (vLLM's KV connector
starts the load before the forward and waits per layer, ``start_load_kv`` /
``wait_for_layer_load``; the load of layer ``l + 1`` runs during the compute of layer ``l``,
https://docs.vllm.ai/api/vllm/distributed/kv_transfer/kv_connector/v1/lmcache_connector.html),
so the iteration lasts

.. math:: T = T_{compute} + \\max(0, \\textstyle\\sum t_{load} - T_{compute})

(the first layer's load, ``t_load / L``, is not hidden in a real pipeline: neglected).

A load is started only when it pays: a slow SSD, a short prefix or a fast GPU make
recomputing the prefix the cheaper choice, and engines then recompute (SGLang's HiRadixCache
refuses to load back a host hit shorter than its ``load_back_threshold``, 10 tokens, and
prefills it instead: sgl-project/sglang ``python/sglang/srt/mem_cache/hiradix_cache.py``).
The simulator makes the choice by time, per hit: it loads a hit of ``n`` blocks iff

.. math:: t_{load} \\le T_{chunk}(n \\, b \\; \\text{tokens}, \\text{0 cached})

with ``T_chunk`` the step's price of one prefill chunk of those tokens alone (the roofline
bound times ``kernel_scale``; under the predictor its bound, so the choice leaves the
predictor's coverage untouched); otherwise the request is a miss that recomputes them, counted
as "recomputed instead" for the tier (its copy there is refreshed, as a use). Moving
blocks down (device to host) runs asynchronously on its own stream and direction, off the
critical path. Capacities and bandwidths are per replica / per device as the flags say.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from costmodel.errors import CostModelError
from costmodel.results import Result

__all__ = ["KVTierConfig", "KVTiers", "TierStats", "BANDWIDTH_RANGE", "BYTES_RANGE", "tier_stats"]

#: tier bandwidths accepted (bytes/s per direction): 1 MB/s to 10 TB/s
BANDWIDTH_RANGE = (1e6, 1e13)
#: tier capacities accepted (bytes per replica): 0 (no tier) to 1 PB
BYTES_RANGE = (0.0, 1e15)


@dataclass(frozen=True)
class KVTierConfig(Result):
    """Host memory and SSD below the GPU's KV blocks (bytes per replica; bandwidths in bytes/s
    per direction per device). ``host_bandwidth`` None: the device's catalog ``host`` link."""

    host_bytes: float = 0.0
    host_bandwidth: float | None = None
    ssd_bytes: float = 0.0
    ssd_bandwidth: float | None = None

    def __post_init__(self) -> None:
        lo, hi = BYTES_RANGE
        for name in ("host_bytes", "ssd_bytes"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and lo <= v <= hi):
                raise CostModelError(f"{name} must be in [{lo:g}, {hi:g}] bytes, got {v!r}")
        blo, bhi = BANDWIDTH_RANGE
        for name in ("host_bandwidth", "ssd_bandwidth"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int | float) and blo <= v <= bhi):
                raise CostModelError(f"{name} must be in [{blo:g}, {bhi:g}] bytes/s, got {v!r}")
        if self.ssd_bytes > 0 and self.ssd_bandwidth is None:
            raise CostModelError("an SSD tier (ssd_bytes > 0) needs ssd_bandwidth (bytes/s)")
        if self.ssd_bytes > 0 and self.host_bytes == 0:
            raise CostModelError(
                "an SSD tier needs a host tier above it (host_bytes > 0): evicted blocks pass through host memory"
            )

    @property
    def enabled(self) -> bool:
        return self.host_bytes > 0


@dataclass(frozen=True)
class TierStats(Result):
    """Prefix hits by where the prefix was (loaded, or recomputed instead because the load would
    take longer: module doc), and the load seconds (all, and those not hidden)."""

    host_hits: int  #: hits loaded from host memory
    ssd_hits: int  #: hits loaded from SSD
    host_recomputed: int  #: host-memory hits recomputed instead (the load would take longer)
    ssd_recomputed: int  #: SSD hits recomputed instead
    host_bandwidth: float
    load_s: float  #: summed transfer time of every load
    exposed_s: float  #: what the loads added to iterations (not hidden by compute): on TTFT

    def to_dict(self) -> dict[str, Any]:
        """Every field, the host link's under a key that names its unit (``host_bandwidth_bytes_per_s``)."""
        out = super().to_dict()
        out["host_bandwidth_bytes_per_s"] = out.pop("host_bandwidth")
        return out


class _Tier:
    def __init__(self, name: str, capacity_blocks: int, bandwidth: float) -> None:
        self.name = name
        self.capacity = capacity_blocks
        self.bandwidth = bandwidth
        self.entries: OrderedDict[int, int] = OrderedDict()  #: prefix id -> blocks, least recent first
        self.used = 0
        self.hits = 0
        self.recomputed = 0

    def put(self, pid: int, blocks: int) -> list[tuple[int, int]]:
        """Insert (or refresh) ``pid``; returns what it evicts, least recent first."""
        if pid in self.entries:
            self.used -= self.entries.pop(pid)
        if blocks > self.capacity:
            return [(pid, blocks)]  # too large for this tier: straight down
        self.entries[pid] = blocks
        self.used += blocks
        out = []
        while self.used > self.capacity:
            old, n = self.entries.popitem(last=False)
            self.used -= n
            out.append((old, n))
        return out


class KVTiers:
    """One replica's lower tiers (module doc), in blocks of ``block_bytes`` per device."""

    def __init__(
        self, cfg: KVTierConfig, host_bandwidth: float, block_tokens: int, kv_bytes_per_token: float, tp: int
    ) -> None:
        self.block_bytes = block_tokens * kv_bytes_per_token  # per device
        whole = self.block_bytes * tp  # one block across the replica's tp shards
        self.tiers = [_Tier("host", math.floor(cfg.host_bytes / whole), host_bandwidth)]
        if cfg.ssd_bytes > 0:
            assert cfg.ssd_bandwidth is not None
            self.tiers.append(
                _Tier("ssd", math.floor(cfg.ssd_bytes / whole), min(cfg.ssd_bandwidth, host_bandwidth))
            )
        self.pending_s = 0.0  #: loads started for the iteration being scheduled
        self.load_s = 0.0
        self.exposed_s = 0.0

    def demote(self, pid: int, blocks: int) -> None:
        """A prefix evicted from GPU blocks moves down (the host tier, its evictions to SSD).

        Parameters
        ----------
        pid : int
            The prefix's id.
        blocks : int
            Its KV blocks.
        """
        moving = [(pid, blocks)]
        for tier in self.tiers:
            nxt: list[tuple[int, int]] = []
            for p, n in moving:
                nxt += tier.put(p, n)
            moving = nxt
            if not moving:
                return

    def find(self, pid: int) -> tuple[int, int] | None:
        """``(tier index, blocks)`` of the highest tier holding ``pid``, or None.

        Parameters
        ----------
        pid : int
            The prefix's id.

        Returns
        -------
        tuple of (int, int) or None
        """
        for i, tier in enumerate(self.tiers):
            if pid in tier.entries:
                return i, tier.entries[pid]
        return None

    def transfer_s(self, pid: int) -> float:
        """Seconds loading ``pid`` from the highest tier holding it would take:
        ``n x block_bytes / beta`` (module doc).

        Parameters
        ----------
        pid : int
            The prefix's id (held by some tier).

        Returns
        -------
        float
            Seconds.
        """
        found = self.find(pid)
        assert found is not None
        i, n = found
        return n * self.block_bytes / self.tiers[i].bandwidth

    def recompute(self, pid: int) -> None:
        """``pid``'s hit is recomputed instead of loaded (module doc): counted for its tier and
        its copy refreshed there (a use).

        Parameters
        ----------
        pid : int
            The prefix's id.
        """
        found = self.find(pid)
        assert found is not None
        tier = self.tiers[found[0]]
        tier.entries.move_to_end(pid)
        tier.recomputed += 1

    def load(self, pid: int) -> int:
        """Start loading ``pid`` back to GPU blocks for this iteration: its transfer time is
        added to :attr:`pending_s`; returns its blocks (the caller has them free).

        Parameters
        ----------
        pid : int
            The prefix's id (held by some tier).

        Returns
        -------
        int
            Its KV blocks.
        """
        found = self.find(pid)
        assert found is not None
        i, n = found
        tier = self.tiers[i]
        tier.entries.move_to_end(pid)
        t = self.transfer_s(pid)
        tier.hits += 1
        self.pending_s += t
        self.load_s += t
        return n

    def exposed(self, compute_s: float) -> float:
        """What this iteration's loads add to it: ``max(0, sum t_load - T_compute)`` (s).

        Parameters
        ----------
        compute_s : float
            The iteration's compute time (s).

        Returns
        -------
        float
            Seconds added to the iteration.
        """
        extra = max(0.0, self.pending_s - compute_s)
        self.pending_s = 0.0
        self.exposed_s += extra
        return extra


def tier_stats(tiers: list[KVTiers]) -> TierStats:
    """The replicas' tiers summed.

    Parameters
    ----------
    tiers : list of KVTiers
        Each replica's tiers after a run.

    Returns
    -------
    TierStats
        Hits per tier (loaded, or recomputed instead) and the load seconds, summed.
    """
    hits = [sum(t.tiers[i].hits for t in tiers if len(t.tiers) > i) for i in range(2)]
    redo = [sum(t.tiers[i].recomputed for t in tiers if len(t.tiers) > i) for i in range(2)]
    return TierStats(
        host_hits=hits[0],
        ssd_hits=hits[1],
        host_recomputed=redo[0],
        ssd_recomputed=redo[1],
        host_bandwidth=tiers[0].tiers[0].bandwidth,
        load_s=sum(t.load_s for t in tiers),
        exposed_s=sum(t.exposed_s for t in tiers),
    )
