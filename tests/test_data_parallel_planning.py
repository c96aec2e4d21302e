"""Data-parallel deployments in ``search`` and ``size``: a DP plan is priced by the simulator's own
group step, so its numbers are the lockstep iteration ``simulate --dp`` runs for the same batch,
each part pinned here to a hand derivation.

Qwen3-30B-A3B (its Hugging Face config: hidden 2048, 48 layers, all MoE, 128 experts of
intermediate width 768, top-8, bf16) on H100 SXM (80 GB of HBM3 at 3.35 TB/s, NVIDIA's datasheet).
"""

from __future__ import annotations

import pytest

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.keys import Phase
from costmodel.roofline import bound
from costmodel.rules import op_cost
from graphs.serving.planning.design_search import search
from graphs.serving.planning.sizing import size_deployment
from graphs.serving.pricing.predictor import Predictor
from graphs.serving.sim.data_parallel import ExpertKernels
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.ledger_fit import decode_memory
from graphs.serving.step.mixed import mixed_step
from graphs.serving.step.workload import as_workload

MODEL, DEVICE = "qwen3-30b-a3b", "h100"
D, LAYERS, E, F = 2048, 48, 128, 768
#: one expert's gate, up and down projections in bf16 (bytes)
EXPERT_BYTES = 3 * D * F * 2


def _comm(tokens: int) -> float:
    """vLLM's default dispatch over 2 ranks: per MoE layer an all-gather and a reduce-scatter of
    the group's ``tokens x 2048`` bf16 activations, at their bound over the NVLink the 2 share."""
    hw = get_device(DEVICE)
    return LAYERS * sum(
        as_float(bound(op_cost(op, elements=tokens * D, p=2, dtype="bf16", link=hw.group_link(2)), hw).lower)
        for op in ("all_gather", "reduce_scatter")
    )


def test_search_prices_a_dp_plan_as_simulate_steps_the_group():
    """DP 2 with expert parallelism at TP 1, batch 16 at context 1000: 8 sequences per rank.

    By hand: each rank's dense share is its whole decode step of 8 sequences (KV lengths summing to
    8 x 1000) less its own routed-expert kernels at 8 tokens; the group then runs the experts of all
    16 tokens with half of them per device (EP over 2) and the 48 layers' all-gather and
    reduce-scatter of 16 x 2048 activations. simulate runs the same iteration: 17 requests sent at
    once, the first (1 output token) alone, then 8 prompts of 999 per rank prefilled together, then
    all 16 decode with 999 computed tokens (KV length 1000): that last iteration is each one's TPOT.
    Memory: a rank's decode ledger at 8 sequences less the half of the 48 x 128 x 9.44 MB routed
    experts (57.98 GB) its device does not hold."""
    hw = get_device(DEVICE)
    w = as_workload(MODEL)
    res = search(MODEL, devices=[DEVICE], batches=[16], ctxs=[1000], dp=[2], expert_parallel=True)
    (row,) = res.frontier
    assert (row["dp"], row["tp"], row["devices"], row["expert_parallel"]) == (2, 1, 2, True)
    own = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1).graph, hw, Predictor())
    spread = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1, ep=2).graph, hw, Predictor())
    share = mixed_step(w, hw).time_sums(8, 8 * 1000.0) - own.bound_s(8)
    by_hand = share + spread.bound_s(16) + _comm(16)
    assert row["tpot_s"] == pytest.approx(by_hand, rel=1e-12)
    assert row["tokens_per_s_per_device"] == pytest.approx(16 / by_hand / 2, rel=1e-12)

    reqs = [Request(rid=0, arrival_s=0.0, prompt=999, output=1)]
    reqs += [Request(rid=i, arrival_s=0.0, prompt=999, output=2) for i in range(1, 17)]
    sim = simulate(MODEL, DEVICE, reqs, topology=Topology(dp=2, expert_parallel=True))
    assert sim.per_request["tpot_s"][1:] == pytest.approx([row["tpot_s"]] * 16, rel=1e-12)

    routed = LAYERS * E * EXPERT_BYTES
    assert routed == pytest.approx(57.98e9, rel=1e-3)
    rank_mem = float(decode_memory(MODEL, DEVICE, tp=1)(8, 1000))
    assert row["memory_bytes"] == pytest.approx(rank_mem - routed / 2, rel=1e-9)


def test_search_prices_a_dp_plans_lone_prefill_on_one_rank():
    """TTFT: one rank prefills the 1000-token prompt (its share less its own experts), the experts
    of those 1000 tokens spread over both devices, and the dispatch of 1000 tokens."""
    hw = get_device(DEVICE)
    w = as_workload(MODEL)
    (row,) = search(MODEL, devices=[DEVICE], batches=[2], ctxs=[1000], dp=[2], expert_parallel=True).frontier
    own = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1).graph, hw, Predictor())
    spread = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1, ep=2).graph, hw, Predictor())
    chunk = mixed_step(w, hw).time_sums(0, 0.0, [(1000.0, 0.0)]) - own.bound_s(1000)
    assert row["ttft_s"] == pytest.approx(chunk + spread.bound_s(1000) + _comm(1000), rel=1e-12)


def test_a_dp_plan_is_valid_only_where_its_ranks_split_the_batch():
    """Batches 3 and 4, pp 1 and 2 (48 layers: both divide): the tp plan has all 4 points valid;
    the dp 2 plan only batch 4 at pp 1 (3 does not split over 2 ranks; a group has no stages)."""
    res = search(MODEL, devices=[DEVICE], batches=[3, 4], ctxs=[1000], pp=[1, 2], dp=[1, 2])
    assert (res.points, res.valid) == (8, 4 + 1)
    assert {r["dp"] for r in res.frontier} <= {1, 2}
    assert res.group_note is not None and "every expert split dp x tp ways" in res.group_note


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"config": "llama-3.1-8b", "dp": [2]}, "use replicas"),
        ({"expert_parallel": True}, "need dp > 1"),
        ({"dp": [2], "moe_dispatch": "deepep"}, "moe_dispatch must be one of"),
    ],
)
def test_search_refuses_what_a_group_cannot_be(kwargs, what):
    kw = {"config": MODEL, "devices": [DEVICE], "batches": [4], "ctxs": [100], **kwargs}
    with pytest.raises(CostModelError, match=what):
        search(kw.pop("config"), **kw)


def test_size_picks_a_dp_group_when_it_is_cheaper():
    """45 requests/s at P99 TPOT <= 20 ms on H100s, TP 1: a DP 2 + EP group (2 devices) meets the
    SLOs, while plain TP 1 replicas miss TPOT at 2 and 3 replicas (each replica reads every touched
    expert's weights for its own batch) and need 4: the group wins at half the price, and its
    numbers are simulate's for the same topology and requests."""
    res = size_deployment(
        MODEL, rate=45, slo_ttft=1, slo_tpot=0.02, devices=[DEVICE], tps=(1,), dps=(1, 2),
        expert_parallel=True, requests=200, disaggregated=False,
    )  # fmt: skip
    win = res.winner
    assert win is not None and (win.dp, win.tp, win.replicas, win.devices) == (2, 1, 1, 2)
    assert win.label == "h100-sxm dp2 x tp1 EP x 1 replica(s) = 2 device(s)"
    plain = [d for d in res.candidates if d.dp == 1]
    assert [d.meets for d in plain if d.replicas in (2, 3)] == [False, False]
    best_plain = min((d for d in plain if d.meets), key=lambda d: d.devices)
    assert best_plain.devices == 4
    assert win.cost is not None and best_plain.cost is not None
    assert win.cost.usd_per_hour == pytest.approx(best_plain.cost.usd_per_hour / 2)
    assert win.sim is not None
    again = simulate(MODEL, DEVICE, _requests(), topology=win.sim.topology, rate=45)
    assert again.tpot.p99 == pytest.approx(win.sim.tpot.p99, rel=1e-12)


def _requests() -> list[Request]:
    from graphs.serving.sim.requests import synthetic

    return synthetic(200, rate=45, prompt="lognormal:1000,1.0", output="lognormal:250,1.0", seed=0)


def test_size_refuses_a_group_for_a_dense_model():
    with pytest.raises(CostModelError, match="use replicas"):
        size_deployment("llama-3.1-8b", rate=1, slo_ttft=1, slo_tpot=0.1, devices=[DEVICE], dps=(1, 2))


def test_the_commands_take_the_group_options(capsys):
    """``search --dp`` names what its group plans assume; ``size --dp`` for a dense model is one line."""
    from graphs.cli import main

    assert main(["search", MODEL, "--devices", DEVICE, "--batches", "16", "--ctxs", "1000", "--dp", "2",
                 "--enable-expert-parallel", "--quiet"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "dp2 tp1 pp1 ep1 m1 (experts whole, allgather_reducescatter)" in out
    assert "data-parallel plans (dp > 1)" in out
    assert main(["size", "llama-3.1-8b", "--rate", "1", "--slo-ttft", "1", "--slo-tpot", "0.1", "--dp", "1,2",
                 "--quiet"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "use replicas" in err and err.count("\n") == 1


def test_search_says_what_the_flag_means_for_its_dp_1_plans():
    """``search --dp 1,2 --enable-expert-parallel`` priced its dp 1 plans tensor-parallel while
    ``simulate``/``size`` run the flag at dp 1 as expert parallelism inside the tp group (13 %
    apart on TPOT): the search now says so once; without dp 1 plans, or the flag, nothing."""
    res = search(MODEL, devices=[DEVICE], batches=[16], ctxs=[1000], dp=[1, 2], expert_parallel=True)
    said = [n for n in res.dtype_notes if "--enable-expert-parallel" in n]
    assert len(said) == 1 and "the dp 1 plans here are tensor-parallel" in said[0]
    res = search(MODEL, devices=[DEVICE], batches=[16], ctxs=[1000], dp=[2], expert_parallel=True)
    assert not [n for n in res.dtype_notes if "--enable-expert-parallel" in n]
