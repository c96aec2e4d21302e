"""Skewed expert routing (graphs.serving.step.expert_routing) against hand derivations, on Mixtral-8x7B.

Mixtral-8x7B: E = 8 experts, top k = 2, 32 MoE layers, d = 4096, expert width 14336, gated
(gate, up, down: three [d x 14336] matrices per expert), bf16 weights.

Expected tokens for expert i under top-k Zipf routing. A token picks k distinct experts;
expert i's popularity is w_i = i^-s. Its inclusion probability (the chance one token routes to
it) is pi_i = min(1, c w_i) with c set so that sum_i pi_i = k (each token fills k slots, no
expert takes a token twice). Of T tokens, expert i receives T pi_i in expectation:

* s = 0: pi_i = k / E = 1/4 for every expert (balanced).
* s = 1: H_8 = 1 + 1/2 + ... + 1/8 = 761/280, c = k / H_8, pi_1 = 2 * 280/761 = 560/761 = 0.7359
  (below one: no cap), so the hottest expert receives 0.7359 T tokens, 2.94x the balanced T/4.
* s = 2: sum i^-2 (i = 1..8) = 1.52742, 2 / 1.52742 = 1.309 > 1: expert 1 is capped at pi_1 = 1
  (every token); the other k - 1 = 1 slot spreads over experts 2..8 in proportion to i^-2:
  pi_2 = (1/4) / (1.52742 - 1) = 0.4740. The hottest expert receives T tokens, 4x balanced.

With EP over 8 ranks and one expert per rank (contiguous placement), the busiest rank holds
expert 1: it runs T pi_1 of the T k routed rows (share pi_1 / k; balanced 1/8) and reads its
expert's weights when touched, with probability 1 - (1 - pi_1)^T.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.graph import COST, REPEAT
from costmodel.hardware import get_device
from costmodel.keys import ROLE, Role
from costmodel.roofline import bound
from costmodel.symbols import B as B_sym
from costmodel.symbols import ctx as ctx_sym
from graphs.serving.analysis.parallel import parallel_plan
from graphs.serving.step.compiled import _scale_experts, compiled_step
from graphs.serving.step.expert_routing import Routing, inclusion, parse_routing, rank_load, skew_experts

M = "mixtral-8x7b"
D, IE, LAYERS = 4096, 14336, 32
PI1 = {0: 0.25, 1: 560 / 761, 2: 1.0}  # the module doc's hand derivation


def _experts(c, b):
    """(FLOPs, DRAM bytes read) of the routed-expert nodes of a compiled decode step at batch b."""
    flops = reads = 0.0
    for _, d in c.graph.nodes(data=True):
        if d.get(ROLE) == Role.EXPERT:
            cost = d[COST].subs({B_sym: b, ctx_sym: 4096})
            rep = float(d.get(REPEAT, 1))
            flops += float(cost.flops) * rep
            reads += float(cost.bytes_read()) * rep
    return flops, reads


def test_inclusion_probabilities_by_hand():
    assert inclusion(Routing(), 8, 2).tolist() == [0.25] * 8
    assert inclusion(Routing("zipf", 1.0), 8, 2)[0] == pytest.approx(560 / 761)
    pi2 = inclusion(Routing("zipf", 2.0), 8, 2)
    assert pi2[0] == 1.0 and pi2[1] == pytest.approx(0.25 / (sum(i**-2 for i in range(1, 9)) - 1))
    for s in (0.5, 1.0, 2.0, 5.0):  # k slots per token, none above one
        pi = inclusion(Routing("zipf", s), 8, 2)
        assert pi.sum() == pytest.approx(2.0) and pi.max() <= 1.0


# E max over the 8 ranks of the rows (token-expert assignments) on one rank, per MoE layer
# (graphs.serving.step.expert_routing module doc). Batch 1: a token's 2 experts sit on 2 of the 8 ranks, so
# the busiest rank holds exactly 1 row (the mean is only 2/8). Batch 64: s = 0, all ranks alike,
# mean 64 * 2/8 = 16, spread^2 = 64 (1/4)(3/4) (E - 1)/(E - 1) * 8/7 = 96/7, e_8 = 1.42360
# (Tippett's table): 16 + 1.42360 sqrt(96/7) = 21.272; s = 1: expert 1's mean 64 * 560/761 =
# 47.096 dominates (the next group, 23.55 + e_2 * 3.95 = 25.8, cannot reach it); s = 2: expert 1
# takes every token, 64 rows. Touched experts: one expert per rank, touched at all in every
# case (batch 1: the busiest rank's one row), so each busiest rank reads 1 expert's weights.
E8 = 1.42360
ROWS = {
    (0, 1): 1.0, (1, 1): 1.0, (2, 1): 1.0,
    (0, 64): 16 + E8 * math.sqrt(96 / 7), (1, 64): 64 * 560 / 761, (2, 64): 64.0,
}  # fmt: skip


@pytest.mark.parametrize("s", [0, 1, 2])
def test_the_hottest_expert_sets_the_ep_step(s):
    """Expert FLOPs on the busiest rank: 3 GEMMs x 2 x rows x d x 14336 per layer, x 32 layers;
    its weight reads: one expert's 3 d 14336 x 2 bytes per layer (table above)."""
    hw = get_device("h100")
    c = compiled_step(M, hw, "decode", ep=8, routing=Routing("zipf", float(s)))
    for b in (1, 64):
        flops, reads = _experts(c, b)
        rows = ROWS[s, b]
        assert flops == pytest.approx(LAYERS * 3 * 2 * rows * D * IE, rel=1e-5)
        weights = LAYERS * 1 * 3 * D * IE * 2
        acts = LAYERS * rows * (2 * D + IE) * 2 * 2  # gate/up read x, down reads a: bf16 rows
        assert weights <= reads <= weights + acts * 1.01


def test_skew_against_the_balanced_bound():
    """Zipf 0 is the balanced step itself; skew only slows the step. With the hot rank
    compute-bound (batch 4096), its expert kernels take the ratio of the busiest rank's rows:
    balanced 1024 + e_8 sqrt(4096 (3/16) 8/7) = 1024 + 1.42360 x 29.626 = 1066.18 (the mean
    1024 plus the busiest rank's excess); s = 1: 4096 x 560/761 = 3014.1, 2.827x; s = 2: 4096,
    3.842x (before the expected maximum: 2.944x and 4x, against the mean)."""
    hw = get_device("h100")
    steps = {
        s: parallel_plan(M, hw, batch=64, ctx=4096, ep=8, routing=Routing("zipf", float(s))) for s in PI1
    }
    balanced = parallel_plan(M, hw, batch=64, ctx=4096, ep=8)
    assert steps[0].step_s == balanced.step_s
    assert balanced.step_s < steps[1].step_s < steps[2].step_s
    for s in (1, 2):  # the all-to-all: the hot rank receives its rows, over the balanced busiest rank's
        assert steps[s].expert_all_to_all_s == pytest.approx(
            balanced.expert_all_to_all_s * ROWS[s, 64] / ROWS[0, 64], rel=1e-5
        )

    def expert_time(c):
        return sum(
            float(bound(d[COST].subs({B_sym: 4096, ctx_sym: 4096}), hw).lower) * float(d.get(REPEAT, 1))
            for _, d in c.graph.nodes(data=True)
            if d.get(ROLE) == Role.EXPERT
        )

    base = expert_time(compiled_step(M, hw, "decode", ep=8))
    rows0 = 1024 + E8 * math.sqrt(4096 * 3 / 16 * 8 / 7)
    for s, rows in ((1, 4096 * 560 / 761), (2, 4096.0)):
        skew = expert_time(compiled_step(M, hw, "decode", ep=8, routing=Routing("zipf", float(s))))
        assert skew / base == pytest.approx(rows / rows0, rel=0.02)


def test_uniform_routing_is_the_default_scaling():
    """The default is byte-identical (the same cached step); and the skew transform itself, at
    uniform routing, equals the engine's 1/ep scaling."""
    hw = get_device("h100")
    assert compiled_step(M, hw, "decode", ep=8, routing=Routing()) is compiled_step(M, hw, "decode", ep=8)
    g = compiled_step(M, hw, "decode").graph
    a, b = _scale_experts(g, 8), skew_experts(g, 8, Routing())
    for n, d in a.nodes(data=True):
        if d.get(ROLE) == Role.EXPERT:
            for x, y in (
                (d[COST].flops, b.nodes[n][COST].flops),
                (d[COST].bytes_read(), b.nodes[n][COST].bytes_read()),
            ):
                assert float((x - y).subs(B_sym, 37)) == pytest.approx(0, abs=1e-6 * float(x.subs(B_sym, 37)))


def test_placement_and_replication_by_hand():
    """Zipf 1, 8 experts on 8 ranks. Loads pi: 0.7359, 0.3679, 0.2453, 0.1840, ... Replicating
    expert 1 halves it to 0.3679 per copy; the copy goes to the least loaded other rank (expert
    8's, 0.0920), which then carries 0.0920 + 0.3679 = 0.4599: the busiest, share 0.4599 / 2."""
    r = rank_load(Routing("zipf", 1.0, replicate=1), 8, 2, 8)
    pi = inclusion(Routing("zipf", 1.0), 8, 2)
    assert r.rank == 7 and r.row_share == pytest.approx((pi[7] + pi[0] / 2) / 2)
    assert r.resident_experts == 2
    # 8 experts on 2 ranks of 4: contiguous puts experts 1-4 together (load 1.5319 of 2). LPT,
    # hottest first onto the less loaded rank with room: 1->A .7359, 2->B .3679, 3->B .6132,
    # 4->B .7972, 5->A .8831, 6->B .9198 (B full), 7->A, 8->A: A = {1, 5, 7, 8} 1.0802, B 0.9198
    cont = rank_load(Routing("zipf", 1.0), 8, 2, 2)
    lpt = rank_load(Routing("zipf", 1.0, placement="balanced"), 8, 2, 2)
    assert cont.row_share == pytest.approx(sum(pi[:4]) / 2)
    assert lpt.row_share == pytest.approx(pi[[0, 4, 6, 7]].sum() / 2)
    assert lpt.row_share < cont.row_share


@pytest.mark.parametrize(
    "text, match",
    [
        ("zipf:x", "--routing must be"),
        ("zipf:11", "exponent must be in"),
        ("hist:1,-2", "non-negative"),
        ("pareto", "--routing"),
    ],
)
def test_bad_routing_is_a_one_line_error(text, match):
    with pytest.raises(CostModelError, match=match):
        parse_routing(text)


def test_routing_needs_experts_and_a_dividing_ep():
    hw = get_device("h100")
    with pytest.raises(CostModelError, match="no experts"):
        parallel_plan("llama-3.1-8b", hw, batch=8, ctx=1024, routing=Routing("zipf", 1.0))
    with pytest.raises(CostModelError, match="must divide"):
        parallel_plan(M, hw, batch=8, ctx=1024, ep=3, routing=Routing("zipf", 1.0))
    with pytest.raises(CostModelError, match="2 counts for 8 experts"):
        rank_load(parse_routing("hist:1,2"), 8, 2, 8)


def test_serve_plans_shows_the_skew(capsys):
    from graphs.cli import main

    args = ["serve", "plans", M, "--device", "h100", "--plans", "1x1x8x1", "--batches", "64"]
    assert main([*args, "--routing", "zipf:1"]) == 0
    out = capsys.readouterr().out
    assert "x balanced" in out and "routing zipf:1" in out
    assert main([*args, "--replicate-hot", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--replicate-hot" in err


def test_histogram_routing_matches_its_counts():
    # counts 4:2:1:1:0:0:0:0 of 8 slots: pi = k * count / 8 = 1, 0.5, 0.25, 0.25 (no cap needed)
    pi = inclusion(parse_routing("hist:4,2,1,1,0,0,0,0"), 8, 2)
    assert pi.tolist() == [1.0, 0.5, 0.25, 0.25, 0, 0, 0, 0]
    assert math.isclose(rank_load(parse_routing("hist:4,2,1,1,0,0,0,0"), 8, 2, 4).row_share, 1.5 / 2)


@settings(max_examples=60, deadline=None)
@given(
    s=st.floats(0, 10),
    e_log=st.integers(1, 6),
    k=st.integers(1, 8),
    ep_log=st.integers(0, 6),
    placement=st.sampled_from(["contiguous", "balanced"]),
)
def test_routing_invariants(s, e_log, k, ep_log, placement):
    """Every token fills k slots and no expert more than all tokens; the busiest rank carries at
    least the balanced share 1/ep and at most everything; LPT never loads it more than contiguous."""
    experts = 2**e_log
    ep = 2 ** min(ep_log, e_log)
    k = min(k, experts)
    pi = inclusion(Routing("zipf", s), experts, k)
    assert pi.sum() == pytest.approx(k) and pi.max() <= 1 + 1e-12 and pi.min() >= 0
    load = rank_load(Routing("zipf", s, placement=placement), experts, k, ep)
    assert 1 / ep - 1e-9 <= load.row_share <= 1 + 1e-9
    if placement == "balanced":
        assert load.row_share <= rank_load(Routing("zipf", s), experts, k, ep).row_share + 1e-9


def test_serve_plans_on_a_device_without_power_or_price(capsys):
    # TPU v6e has no TDP and no price in the catalog: energy and cost are unknown, printed as nan
    # with a note each (before: float(None) in the table, an internal error, exit 3)
    from graphs.cli import main

    argv = ["serve", "plans", "llama-3.1-8b", "--device", "tpu-v6e", "--plans", "1x1x1x1", "--batches", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "J/token for tpu-v6e: no power figure" in out and "$/M out for tpu-v6e: no price" in out
