"""Expert parallelism inside the tp group (``dp`` 1, ``expert_parallel``): vLLM's
``--enable-expert-parallel`` beside ``--tensor-parallel-size`` alone, SGLang's ``--ep-size`` equal
to ``--tp-size`` (:mod:`graphs.serving.sim.data_parallel`, D = 1; issue 42 item 3)."""

from __future__ import annotations

import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from graphs.serving.pricing.predictor import Predictor
from graphs.serving.sim.data_parallel import dp_line, group_step
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.step.mixed import mixed_step
from graphs.serving.step.workload import as_workload

MODEL, DEVICE = "qwen3-30b-a3b", "h100"


def _steps(tp: int):
    w, hw = as_workload(MODEL), get_device(DEVICE)
    plain = mixed_step(w, hw, tp=tp)
    same = group_step(
        w, hw, dp=1, tp=tp, expert_parallel=False, dispatch="allgather_reducescatter", predictor=Predictor()
    )
    ep = group_step(
        w, hw, dp=1, tp=tp, expert_parallel=True, dispatch="allgather_reducescatter", predictor=Predictor()
    )
    return plain, same, ep


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize(("n_dec", "chunk"), [(1, 0), (16, 0), (64, 0), (8, 2048), (0, 8192)])
def test_one_rank_without_ep_is_the_plain_step(tp, n_dec, chunk):
    """D = 1 without EP swaps the rank's width-split experts for the same ones: the plain tp step,
    to 1e-9 (the formula's consistency at D = 1)."""
    plain, same, _ = _steps(tp)
    chunks = [(float(chunk), 0.0)] if chunk else []
    ctx = 1000.0 * n_dec
    assert same.lockstep_s(n_dec, ctx, chunks) == pytest.approx(plain.time_sums(n_dec, ctx, chunks), rel=1e-9)


@pytest.mark.parametrize("tp", [2, 4])
def test_one_decode_token_reads_whole_experts_on_its_busiest_device(tp):
    """One decode token touches 8 experts a layer. Width-split, each device reads 1/tp of each of
    the 8; whole, the busiest device reads its share of the 8 in full: at least as many bytes
    (8/tp whole experts is the even split) and at most all 8 whole, tp times the width-split
    bytes. The experts' kernels at one token are memory-bound, so their seconds bracket the same."""
    plain, same, ep = _steps(tp)
    t_tp, t_ep = plain.time_sums(1, 1000.0), ep.lockstep_s(1, 1000.0)
    experts_tp = same.stage.experts.bound_s(1)  # the width-split experts at one token
    experts_ep = ep.stage.experts.bound_s(1)
    assert experts_tp * (1 - 1e-9) <= experts_ep <= tp * experts_tp * (1 + 1e-9)
    assert t_ep - t_tp == pytest.approx(experts_ep - experts_tp, rel=1e-6)


def test_it_has_no_dispatch_and_says_what_it_assumed():
    """The experts' outputs are summed by the tp all-reduce the rank's step already prices: no
    all-gather or reduce-scatter at D = 1."""
    _, _, ep = _steps(2)
    assert ep.stage.comm_bound_s(4096.0) == 0.0
    line = dp_line(Topology(tp=2, expert_parallel=True))
    assert line.startswith("expert parallel inside tp 2") and "no dispatch" in line


def test_a_simulation_runs_it_and_refuses_it_where_it_cannot_be():
    reqs = [Request(rid=i, arrival_s=0.05 * i, prompt=200, output=20) for i in range(16)]
    tp = simulate(MODEL, DEVICE, reqs, topology=Topology(tp=2))
    ep = simulate(MODEL, DEVICE, reqs, topology=Topology(tp=2, expert_parallel=True))
    assert ep.topology.devices == tp.topology.devices == 2
    # the bound's order, above: the requests end no earlier on the whole with EP
    assert ep.per_request["e2e_s"].mean() >= tp.per_request["e2e_s"].mean() * (1 - 1e-9)
    with pytest.raises(CostModelError, match="has none"):
        simulate("llama-3.1-8b", DEVICE, reqs[:1], topology=Topology(tp=2, expert_parallel=True))
    with pytest.raises(CostModelError, match="needs dp > 1"):
        Topology(tp=2, expert_parallel=True, moe_dispatch="all_to_all")


def test_the_command_line_names_it(capsys):
    from graphs.cli import main

    argv = ["simulate", MODEL, "--tp", "2", "--enable-expert-parallel", "--requests", "8", "--rate", "2"]
    assert main([*argv, "--no-interval"]) == 0
    assert "expert parallel inside tp 2" in capsys.readouterr().out


def test_the_rate_search_refuses_a_dense_model_as_the_simulation_does():
    from graphs.serving.planning.capacity_search import ceiling_rate

    with pytest.raises(CostModelError, match="has none"):
        ceiling_rate(
            "llama-3.1-8b",
            DEVICE,
            [Request(rid=0, arrival_s=0.0, prompt=10, output=2)],
            topology=Topology(tp=2, expert_parallel=True),
        )
