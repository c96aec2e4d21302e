"""Prefix-aware routing (graphs.serving.sim.replica_routing) on hand-countable cases."""

import pytest

from costmodel.errors import CostModelError
from graphs.cli import main
from graphs.serving.sim.engine import EngineConfig
from graphs.serving.sim.requests import Request, synthetic
from graphs.serving.sim.simulator import Topology, simulate

M, HW = "llama-3.1-8b", "h100"
CACHE = EngineConfig(enable_prefix_caching=True)


def _pool_requests(order: str, gap: float = 10.0) -> list[Request]:
    """One request per letter, ``gap`` s apart (none overlaps another): a pool of whole prompts,
    letter = prompt (1,000 tokens, all of it the shared prefix), 20 output tokens."""
    return [Request(i, gap * i, 1000, 20, prefix_id=ord(c), prefix=1000) for i, c in enumerate(order)]


@pytest.mark.parametrize(("router", "hits"), [("round_robin", 0), ("least_outstanding", 2), ("prefix", 2)])
def test_prefix_routing_gets_more_hits_than_round_robin(router, hits):
    """Two replicas, prompts A A B B one after another. Round robin: A->r0, A->r1, B->r0, B->r1,
    every prompt new where it lands: 0 hits. Prefix: A -> r0 (nobody holds it; least outstanding,
    both idle, the lower index), A -> r0 (holds it): hit; B -> r0 (idle tie), B -> r0: hit: 2.
    (Least-outstanding happens to send every lone request to r0 too: the same 2.)"""
    res = simulate(M, HW, _pool_requests("AABB"), topology=Topology(replicas=2, router=router), engine=CACHE)
    assert res.prefix_cache_hits == hits


def test_each_prefix_returns_to_its_holder():
    """A and B together (A -> r0; B held nowhere: least outstanding, the idle r1), then A and B
    again long after: each goes back to its holder (r0 idle, r1 idle: within the bound): 2 hits,
    2 affine routings, none bounded."""
    reqs = [Request(i, 0.01 * i, 1000, 400, prefix_id=ord(c), prefix=1000) for i, c in enumerate("AB")]
    reqs += [
        Request(2 + i, 30.0 + 0.01 * i, 1000, 20, prefix_id=ord(c), prefix=1000) for i, c in enumerate("AB")
    ]
    res = simulate(M, HW, reqs, topology=Topology(replicas=2, router="prefix"), engine=CACHE)
    assert res.prefix_cache_hits == 2 and res.prefix_routed == (2, 0)


def test_session_affinity_keeps_a_conversation_on_its_replica():
    """Four overlapping conversations of 3 turns on 3 replicas (eps = 2: with 3 replicas no
    replica can exceed 3x the mean, so the bound never fires): under prefix routing every later
    turn returns to the replica holding its history: 4 conversations x 2 later turns = 8 hits;
    the load-balancing routers scatter the turns and miss."""
    reqs = synthetic(4, rate=5.0, prompt="fixed:300", output="fixed:300", seed=1, turns=3, think_s=0.5)
    hits = {
        r: simulate(
            M, HW, reqs, topology=Topology(replicas=3, router=r, prefix_eps=2.0), engine=CACHE
        ).prefix_cache_hits
        for r in ("round_robin", "least_outstanding", "prefix")
    }
    assert hits["prefix"] == 8
    assert hits["round_robin"] < 8 and hits["least_outstanding"] < 8


def test_the_load_bound_spreads_a_burst():
    """Two requests of one prefix at t = 0 on two replicas. After the first goes to r0 its
    outstanding is P + O = 1020 tokens and the mean 510: with eps = 0.5 the bound is 765 < 1020,
    so the second goes to r1; with eps = 1 it is 1020, not exceeded: r0 (and a hit once the first
    has cached the prefix)."""
    reqs = [Request(i, 0.0, 1000, 20, prefix_id=1, prefix=1000) for i in range(2)]
    spread = simulate(
        M, HW, reqs, topology=Topology(replicas=2, router="prefix", prefix_eps=0.5), engine=CACHE
    )
    # the first request finds no holder (least outstanding, counted in neither); the second is bounded
    assert spread.prefix_routed == (0, 1)
    kept = simulate(M, HW, reqs, topology=Topology(replicas=2, router="prefix", prefix_eps=1.0), engine=CACHE)
    assert kept.prefix_routed == (1, 0)
    # r0 starts the first's prefill on its arrival; the second waits for that iteration and finds the
    # prefix cached; spread, r1 computes it again
    assert kept.prefix_cache_hits == 1 and spread.prefix_cache_hits == 0


def test_bad_eps_is_refused():
    with pytest.raises(CostModelError, match="eps must be in"):
        Topology(replicas=2, router="prefix", prefix_eps=-1.0)
    try:
        rc = main(
            ["simulate", M, "--rate", "1", "--requests", "2", "--router", "prefix", "--prefix-eps", "-2"]
        )
    except SystemExit as e:
        rc = e.code
    assert rc == 2
