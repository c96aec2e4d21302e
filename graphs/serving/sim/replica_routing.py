"""Prefix-aware routing across replicas, with a load bound and session affinity.

``PrefixRouter.pick`` sends a request to, in this order:

1. the replica serving its conversation's earlier turns (session affinity: that replica holds
   the history its prompt starts with);
2. the replica whose prefix cache holds the request's shared prefix (``Request.prefix_id``)
   with the most tokens (the longest cached prefix match: a conversation's history grows turn by
   turn), ties to the lower index;
3. the replica the router last sent that prefix to, cached or not yet (the router records a
   prefix when it routes it, as SGLang's cache-aware router inserts into its approximate radix
   tree at routing time, so that a burst of one prefix is not spread before the first computes);
4. otherwise the least-outstanding replica (the fewest prompt + output tokens still to process).

Load bound (the rule of bounded-load consistent hashing, Mirrokni, Thorup and Zadimoghaddam
2018: no server above ``(1 + eps)`` x the average load): when the chosen replica's outstanding
tokens exceed ``(1 + eps)`` times the pool's mean, the request goes to the least-outstanding
replica instead (a cache hit is not worth a queue; Ray Serve's ``PrefixCacheAffinityRouter`` and
vLLM production-stack's load-aware routing make the same trade,
https://docs.ray.io/en/latest/serve/llm/prefix-aware-request-router.html). Requests
without a prefix or session are routed least-outstanding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from costmodel.errors import CostModelError

if TYPE_CHECKING:
    from .engine import Replica
    from .engine import Sequence as Seq

__all__ = ["PrefixRouter", "EPS_RANGE", "least_outstanding"]

#: load-bound slack accepted: the chosen replica may hold up to (1 + eps) x the mean outstanding tokens
EPS_RANGE = (0.0, 1e3)


def least_outstanding(pool: Sequence[Replica]) -> Replica:
    """The replica with the fewest tokens still to process (ties: the lower index).

    Parameters
    ----------
    pool : sequence of Replica
        The replicas to choose from (not empty).

    Returns
    -------
    Replica
    """
    return min(pool, key=lambda r: (r.outstanding, r.index))


class PrefixRouter:
    """Prefix-aware routing with a load bound ``eps`` and session affinity (module doc)."""

    def __init__(self, eps: float = 0.5) -> None:
        lo, hi = EPS_RANGE
        if not (isinstance(eps, int | float) and math.isfinite(eps) and lo <= eps <= hi):
            raise CostModelError(f"prefix-routing load bound eps must be in [{lo:g}, {hi:g}], got {eps!r}")
        self.eps = eps
        self._prefix: dict[int, int] = {}  #: prefix id -> replica index it was last routed to
        self._session: dict[int, int] = {}  #: conversation -> replica index of its last turn
        self.affine = 0  #: requests sent where their prefix or conversation is (not load-balanced)
        self.bounded = 0  #: requests the load bound sent elsewhere

    def pick(self, pool: Sequence[Replica], seq: Seq) -> Replica:
        """The replica for ``seq``: where its conversation or prefix is, unless that replica's outstanding
        tokens exceed ``(1 + eps)`` times the mean; else the least outstanding one.

        Parameters
        ----------
        pool : sequence of Replica
            The replicas to choose from.
        seq : Sequence
            The request's sequence.

        Returns
        -------
        Replica
        """
        req = seq.req
        fallback = least_outstanding(pool)
        by_index = {r.index: r for r in pool}
        want: Replica | None = None
        if req.session is not None and req.session in self._session:
            want = by_index.get(self._session[req.session])
        pid = req.prefix_id
        if want is None and pid is not None:
            held = [r for r in pool if pid in r.prefixes]
            if held:
                want = max(held, key=lambda r: (r.prefixes[pid][1], -r.index))
            elif pid in self._prefix:
                want = by_index.get(self._prefix[pid])
        chosen = fallback
        if want is not None:
            mean = sum(r.outstanding for r in pool) / len(pool)
            if want is fallback or want.outstanding <= (1 + self.eps) * mean:
                chosen = want
                self.affine += 1
            else:
                self.bounded += 1
        if pid is not None:
            self._prefix[pid] = chosen.index
        if req.session is not None:
            self._session[req.session] = chosen.index
        return chosen
