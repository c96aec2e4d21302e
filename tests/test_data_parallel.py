"""Data-parallel attention with the experts over the group (``simulate --dp``): the pieces of a
group iteration, each pinned to a hand derivation or to the parts the engine already prices.

Qwen3-30B-A3B (its Hugging Face config: hidden 2048, 48 layers, all MoE, 128 experts of
intermediate width 768, top-8, bf16) on H100 SXM (3.35 TB/s HBM3, NVIDIA's datasheet).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.keys import Phase
from costmodel.roofline import bound
from costmodel.rules import op_cost
from costmodel.symbols import B as B_sym
from graphs.serving.pricing.predictor import Predictor, predicted_mixed_step
from graphs.serving.sim.data_parallel import (
    ExpertKernels,
    LockstepGroup,
    RankStep,
    rank_step,
)
from graphs.serving.sim.engine import kv_pool
from graphs.serving.sim.requests import Request
from graphs.serving.sim.simulator import Topology, simulate
from graphs.serving.step.compiled import compiled_step
from graphs.serving.step.expert_routing import devices_reached
from graphs.serving.step.mixed import mixed_step, node_time_expr
from graphs.serving.step.workload import as_workload

MODEL, DEVICE = "qwen3-30b-a3b", "h100"
D, LAYERS, E, K, F = 2048, 48, 128, 8, 768
HBM = 3.35e12
#: one expert's gate, up and down projections in bf16 (bytes)
EXPERT_BYTES = 3 * D * F * 2


def test_expert_kernels_bound_is_the_touched_experts_weights():
    """One decode token touches its 8 experts in each of the 48 layers: the routed-expert kernels'
    bound is reading those weights, 8 x 9.44 MB x 48 = 3.62 GB at 3.35 TB/s = 1.082 ms."""
    hw = get_device(DEVICE)
    g = compiled_step(MODEL, hw, Phase.DECODE, tp=1).graph
    ek = ExpertKernels(g, hw, Predictor())
    hand = K * EXPERT_BYTES * LAYERS / HBM
    assert hand == pytest.approx(1.0818e-3, rel=1e-4)
    assert ek.bound_s(1) == pytest.approx(hand, rel=0.02)  # + the token's activations, a few KB


def test_kv_pool_holds_the_experts_spread_over_the_group():
    """DP 2 at TP 1: each device holds half the routed experts, 48 x 128 x 9.44 MB / 2 = 28.99 GB
    less than one device alone, and its KV pool grows by that."""
    alone, spread = kv_pool(MODEL, DEVICE, tp=1), kv_pool(MODEL, DEVICE, tp=1, dp=2)
    routed = LAYERS * E * EXPERT_BYTES
    assert routed == pytest.approx(57.98e9, rel=1e-3)
    assert alone.weights_bytes - spread.weights_bytes == pytest.approx(routed / 2, rel=1e-6)


@pytest.mark.parametrize("predict", [False, True])
def test_rank_step_is_the_rank_less_exactly_its_expert_rows(predict):
    """The rank's share is its whole step less its own routed-expert kernels, each priced as the
    rank's step prices it: recomputed here kernel by kernel from the rank step's own table
    (``tokens_table``: each kernel's prediction, clamped to its bound as the step clamps it)."""
    if predict:
        pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    hw = get_device(DEVICE)
    w = as_workload(MODEL)
    pred = Predictor("grey-box", "vllm") if predict else Predictor()
    rank = predicted_mixed_step(w, hw, tp=1, predictor=pred)
    rs = rank_step(w, hw, rank, mixed_step(w, hw), dp=2, tp=1, expert_parallel=True,
                   dispatch="allgather_reducescatter", predictor=pred)
    g = compiled_step(w, hw, Phase.DECODE, tp=1).graph
    for n in (1, 16, 256):
        whole = rank.time_sums(n, n * 1000.0)
        share = rs.time_sums(n, n * 1000.0)
        if not predict:
            by_hand = sum(float(node_time_expr(g.nodes[x], hw).subs(B_sym, n)) for x in rs.own.names)
        else:
            table = dict(zip(rank.kernel_names, rank.tokens_table(float(n), float(n)), strict=True))
            by_hand = 0.0
            for x in rs.own.names:
                roof = float(node_time_expr(g.nodes[x], hw).subs(B_sym, n))
                by_hand += max(table[x], roof) if x in table else roof
        assert whole - share == pytest.approx(by_hand, rel=1e-9)
        assert 0 < share < whole


def test_the_group_steps_together():
    """Two prompts sent at once go to the two ranks (vLLM's balancer). The first reaches the idle
    group alone: its iteration is rank 0's dense kernels of the 100-token chunk plus the experts
    of those 100 tokens over the 2 devices and, in each of the 48 MoE layers, an all-gather and a
    reduce-scatter of the 100 x 2048 activations over the 2 ranks. The second waits for that
    iteration's end, then both ranks step together: the slower of rank 0's decode (context 101)
    and rank 1's chunk, plus the experts and collectives of all 101 tokens (the bound: no request
    path, no CPU terms)."""
    hw = get_device(DEVICE)
    w = as_workload(MODEL)
    reqs = [Request(rid=i, arrival_s=0.0, prompt=100, output=2) for i in range(2)]
    res = simulate(MODEL, DEVICE, reqs, topology=Topology(dp=2, expert_parallel=True))
    rank = mixed_step(w, hw)
    own = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1).graph, hw, Predictor())
    spread = ExpertKernels(compiled_step(w, hw, Phase.DECODE, tp=1, ep=2).graph, hw, Predictor())

    def comm(tokens: int) -> float:
        return LAYERS * sum(
            as_float(bound(op_cost(op, elements=tokens * D, p=2, dtype="bf16", link=hw.group_link(2)), hw).lower)
            for op in ("all_gather", "reduce_scatter")
        )

    chunk = rank.time_sums(0, 0.0, [(100.0, 0.0)]) - own.bound_s(100)
    decode = rank.time_sums(1, 101.0) - own.bound_s(1)
    first = chunk + spread.bound_s(100) + comm(100)
    second = max(chunk, decode) + spread.bound_s(101) + comm(101)
    ttft = res.per_request["ttft_s"]
    assert ttft[0] == pytest.approx(first, rel=1e-9)
    assert ttft[1] == pytest.approx(first + second, rel=1e-9)
    assert res.topology.devices == 2
    assert comm(100) > 0 and spread.bound_s(101) < own.bound_s(101)  # half the experts each


def test_one_request_is_faster_on_two_ranks_than_on_one_device():
    """A lone request: the other rank idles, but the experts' weights are read from two devices."""
    reqs = [Request(rid=0, arrival_s=0.0, prompt=200, output=50)]
    one = simulate(MODEL, DEVICE, reqs)
    two = simulate(MODEL, DEVICE, reqs, topology=Topology(dp=2, expert_parallel=True))
    assert two.tpot.mean < one.tpot.mean


class _Rank:
    """A rank as the balancer sees it: its waiting and running lists."""

    def __init__(self, index: int, balance: str = "score") -> None:
        from graphs.serving.sim.engine import EngineConfig

        self.index, self.waiting, self.running = index, [], []
        self.cfg = EngineConfig(dp_load_balance=balance)
        self.step_cost = RankStep.__new__(RankStep)
        self.step_cost.bound = self.step_cost  # type: ignore[misc]

    def add(self, seq: object) -> None:
        self.waiting.append(seq)


def _picks(ranks: list[_Rank], n: int) -> list[int]:
    """The rank each of ``n`` requests added to a group of ``ranks`` went to, in order."""
    group = LockstepGroup(ranks, stage=None, index=0)  # type: ignore[arg-type]
    picks = []
    for _ in range(n):
        before = [len(r.waiting) for r in ranks]
        group.add(object())  # type: ignore[arg-type]
        picks.append(next(i for i, r in enumerate(ranks) if len(r.waiting) > before[i]))
    return picks


def test_balancer_scores_waiting_four_times_running():
    """vLLM's DPLBAsyncMPClient: the rank with the smallest 4 x waiting + running, ties to the
    lower index. Rank 0 runs 3 and has none waiting (score 3), rank 1 has one waiting (4): the
    next request goes to rank 0 (now 7), the one after to rank 1 (now 8), the third to rank 0."""
    ranks = [_Rank(0), _Rank(1)]
    ranks[0].running = [object()] * 3
    ranks[1].waiting = [object()]
    assert _picks(ranks, 3) == [0, 1, 0]  # scores (3, 4) -> (7, 4) -> (7, 8)


def test_sglang_deals_requests_to_the_ranks_in_turn():
    """SGLang's data-parallel controller (``--load-balance-method`` round_robin, its default):
    whatever the ranks hold, the requests go 0, 1, 2, 0, 1, ... (the vLLM score above would send
    all three of the first to the idle ranks 1 and 2)."""
    ranks = [_Rank(i, "round_robin") for i in range(3)]
    ranks[0].running = [object()] * 5
    assert _picks(ranks, 5) == [0, 1, 2, 0, 1]


def test_an_sglang_rank_under_attention_dp_takes_its_share_of_the_chunk_and_admits_boldly():
    """SGLang's server_args ``_handle_data_parallelism``: with DP attention over 8 ranks each rank
    prefills at most 8192 // 8 = 1024 tokens an iteration, and its admission estimate is 0.3 x
    (0.7, 0.098, 0.001003) (scheduler.py: init, floor and decay linear in the conservativeness);
    vLLM's ranks keep their own budget."""
    from graphs.serving.engines import get_engine
    from graphs.serving.sim.engine import profile_engine

    cfg = profile_engine(get_engine("sglang"), "deepseek-v3", "h200", tp=1, dp=8)
    assert cfg.max_num_batched_tokens == 1024 and cfg.dp_load_balance == "round_robin"
    assert cfg.new_token_ratio == pytest.approx((0.21, 0.0294, 0.0003009), rel=1e-3)
    assert profile_engine(get_engine("vllm"), MODEL, DEVICE, tp=1, dp=2).max_num_batched_tokens == 8192


def test_sglangs_budget_rule_divides_a_given_budget_and_nothing_without_chunked_prefill():
    """SGLang divides ``--chunked-prefill-size`` by ``dp_size`` whatever set it (a given 16,384 is
    2,048 a rank at DP 8), and with chunked prefill off (-1) nothing is divided."""
    from graphs.serving.engines import get_engine

    given = get_engine("sglang").with_overrides(max_num_batched_tokens=16384).for_data_parallel(8)
    assert given.max_num_batched_tokens == 2048
    off = get_engine("sglang").with_overrides(enable_chunked_prefill=False).for_data_parallel(8)
    assert off.max_num_batched_tokens == get_engine("sglang").max_num_batched_tokens


def test_simulate_reports_what_one_sglang_rank_runs(capsys):
    """The text and --json give a rank's settings (8192 // 2 = 4096 tokens a chunk at DP 2) and the
    engine's data-parallel rules, not the undivided profile's."""
    import json

    from graphs.cli import main

    argv = ["simulate", MODEL, "--device", DEVICE, "--engine", "sglang", "--dp", "2", "--requests", "6"]
    assert main([*argv, "--rate", "2", "--no-interval", "--json"]) == 0
    engine = json.loads(capsys.readouterr().out)["engine"]
    assert engine["settings"]["max_num_batched_tokens"] == 4096
    assert engine["data_parallel"] == {
        "load_balance": "round_robin",
        "chunk_split": True,
        "conservativeness": 0.3,
        "seqs_split": True,
        "ranks": 2,
    }
    assert main([*argv, "--rate", "2", "--no-interval"]) == 0
    assert "SGLang's balancer: each rank in turn" in capsys.readouterr().out


@given(
    st.integers(2, 256).flatmap(lambda e: st.tuples(st.just(e), st.integers(1, min(e, 16)))),
    st.sampled_from([1, 2, 4, 8, 16]),
)
def test_devices_reached_is_between_one_and_k(ek, g):
    """A token's k experts sit on at least one and at most min(k, G) devices; G = 1: one."""
    e, k = ek
    assume(e % g == 0)  # experts split evenly over the devices (uneven splits are refused)
    r = devices_reached(e, k, g)
    assert 1 - 1e-12 <= r <= min(k, g) + 1e-12
    if g == 1:
        assert r == 1.0
    if k == 1:
        assert r == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"dp": 2, "expert_parallel": "yes"}, "expert_parallel must be true or false"),
        ({"dp": 2, "moe_dispatch": "deepep"}, "moe_dispatch must be one of"),
        ({"dp": 1, "expert_parallel": True}, "needs dp > 1 or tp > 1"),
        ({"tp": 2, "expert_parallel": True, "moe_dispatch": "all_to_all"}, "needs dp > 1"),
        ({"tp": 2, "expert_parallel": True, "router": "prefix"}, "inside the tp group runs aggregated"),
        ({"dp": 2, "router": "prefix"}, "least_outstanding or round_robin"),
        ({"dp": 0}, "dp must be a whole number"),
    ],
)
def test_topology_refuses_what_a_group_cannot_be(kwargs, what):
    with pytest.raises(CostModelError, match=what):
        Topology(**kwargs)


def test_a_dense_model_is_told_to_use_replicas():
    reqs = [Request(rid=0, arrival_s=0.0, prompt=10, output=2)]
    with pytest.raises(CostModelError, match=r"use replicas instead \(--replicas on the command line"):
        simulate("llama-3.1-8b", DEVICE, reqs, topology=Topology(dp=2))


def test_the_command_line_names_the_flag_a_dense_model_takes(capsys):
    """docs/serving.md names `--replicas` for independent copies; `simulate --dp 2` on a dense model
    said "use replicas instead" without the flag."""
    from graphs.cli import main

    assert main(["simulate", "llama-3.1-8b", "--device", "h100", "--dp", "2", "--rate", "2"]) == 2
    err = capsys.readouterr().err
    assert "--replicas" in err and len(err.strip().splitlines()) == 1
    assert "--replicas" in (Path(__file__).parents[1] / "docs" / "serving.md").read_text()


def test_devices_count_every_rank():
    assert Topology(replicas=3, dp=2, tp=4).devices == 24
    assert math.isclose(devices_reached(8, 2, 8), 2.0)


def test_the_simulator_sizes_each_rank_pool_without_the_spread_experts():
    """vLLM's rule, floor((u C - W - a N) / (b k)), with W a device's weights once the experts are
    spread over the group: the 28.99 GB a rank no longer holds are all free for KV blocks (not
    u x 28.99 GB), the same as kv_pool's figure. Qwen3-30B-A3B KV per token: 48 layers x 4 KV heads
    x 128 x 2 (K and V) x 2 B = 98,304 B; a 16-token block 1,572,864 B."""
    from graphs.serving.sim.engine import EngineConfig, kv_blocks, pool_memory
    from graphs.serving.step.ledger_fit import build_ledger

    w = as_workload(MODEL)
    led = build_ledger(w, "decode", 1, 1, None, None)
    assert as_float(led.kv_bytes_per_token) == 48 * 4 * 128 * 2 * 2
    cfg = EngineConfig()
    cap = pool_memory(DEVICE)  # the memory the driver reports: vLLM's fraction is of it
    one = kv_blocks(led, cap, cfg)
    res = simulate(
        MODEL, DEVICE, [Request(rid=0, arrival_s=0.0, prompt=10, output=2)], topology=Topology(dp=2), engine=cfg
    )
    # one 12-token request holds one block: the record's share of the pool is 1 / blocks
    sim_blocks = round(1 / float(max(res.timeline["kv_used"])))
    pool = kv_pool(MODEL, DEVICE, tp=1, dp=2)
    free = cfg.gpu_memory_utilization * cap - pool.weights_bytes - pool.activation_bytes_per_token * cfg.max_num_batched_tokens
    expected = math.floor(free / (cfg.block_size * pool.kv_bytes_per_token))
    gained = LAYERS * E * EXPERT_BYTES / 2 / (cfg.block_size * 98304)
    assert expected - one == pytest.approx(gained, abs=1)  # every freed byte, not 90 % of them
    assert sim_blocks == expected


@pytest.mark.parametrize(
    ("flags", "what"),
    [
        (["--dp", "2", "--disagg", "1:1", "--link-bandwidth", "50e9"], "runs aggregated"),
        (["--dp", "2", "--router", "prefix"], "runs aggregated"),
        (["--enable-expert-parallel"], "needs dp > 1 or tp > 1"),
        (["--enable-expert-parallel", "--tp", "2", "--moe-dispatch", "all_to_all"], "needs dp > 1"),
        (["--enable-expert-parallel", "--tp", "2", "--router", "prefix"], "runs aggregated"),
        (["--dp", "2", "--spec-draft", "ngram", "--spec-accept", "0.7"], "speculative decoding with data-parallel"),
    ],
)
def test_the_command_line_refuses_what_a_group_cannot_run(flags, what, capsys):
    """Every --dp combination a group cannot run is one line, never a silent drop of --dp."""
    from graphs.cli import main

    assert main(["simulate", MODEL, "--requests", "4", "--rate", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert what in err and err.count("\n") == 1


def test_the_group_ceiling_bounds_a_saturated_group_and_counts_every_rank():
    """capacity_search's physical ceiling for a DP group: never below what a saturated group
    serves (all 400 requests at once), and above one rank's alone (the ranks run together)."""
    from graphs.serving.planning.capacity_search import ceiling_rate
    from graphs.serving.sim.requests import synthetic

    reqs = synthetic(400, rate=1e6, prompt="fixed:200", output="fixed:50", seed=0)
    topo = Topology(dp=2, expert_parallel=True)
    ceiling = ceiling_rate(MODEL, DEVICE, reqs, topology=topo)
    res = simulate(MODEL, DEVICE, reqs, topology=topo)
    assert res.requests_per_s < ceiling
    assert ceiling > 1.5 * ceiling_rate(MODEL, DEVICE, reqs, topology=Topology())


def test_devices_reached_refuses_an_uneven_split():
    with pytest.raises(CostModelError, match="do not split evenly over 4 devices"):
        devices_reached(10, 2, 4)


def test_sglang_divides_a_given_max_running_requests_among_its_attention_ranks():
    """SGLang's ``TpModelWorker`` (tp_worker.py): ``--max-running-requests // dp_size`` a rank under
    DP attention (256 given at DP 8: 32 a rank); the default is each rank's own and stays; a given
    value below the ranks is refused (SGLang's "max_running_request is zero"); vLLM's ranks each
    keep the value given, and SGLang 0.4's rule is not applied (not verified for the series)."""
    from graphs.serving.engines import get_engine

    sglang = get_engine("sglang")
    assert sglang.with_overrides(max_num_seqs=256).for_data_parallel(8).max_num_seqs == 32
    assert sglang.with_overrides(max_num_seqs=100).for_data_parallel(8).max_num_seqs == 12
    assert sglang.for_data_parallel(8).max_num_seqs == sglang.max_num_seqs
    assert get_engine("sglang@0.5.1").with_overrides(max_num_seqs=64).for_data_parallel(4).max_num_seqs == 16
    with pytest.raises(CostModelError, match=r"max_num_seqs 4 is the engine's whole under 8 .*give at least 8"):
        sglang.with_overrides(max_num_seqs=4).for_data_parallel(8)
    assert get_engine("vllm").with_overrides(max_num_seqs=256).for_data_parallel(8).max_num_seqs == 256
    assert get_engine("sglang@0.4").with_overrides(max_num_seqs=256).for_data_parallel(8).max_num_seqs == 256
    assert sglang.to_dict()["data_parallel"]["seqs_split"] is True


def test_simulate_runs_one_rank_split_once(monkeypatch):
    """The engine the simulator runs at ``--engine sglang --dp 2 --max-num-seqs 64`` is one rank's,
    divided once: 32 sequences, 8192 // 2 tokens a chunk and 0.3 x 0.7 = 0.21 of the admission
    estimate (it was divided twice: 16, 2048 and 0.063); ``--max-num-seqs 2`` runs 1 a rank where
    it was refused; a rank's profile is not divided or set up for a device again."""
    import graphs.serving.sim.engine as sim_engine
    from graphs.cli import main
    from graphs.serving.engines import get_engine
    from graphs.serving.present import simulation_report

    seen = []
    real = sim_engine.profile_engine

    def spy(*args, **kwargs):
        cfg = real(*args, **kwargs)
        seen.append(cfg)
        return cfg

    monkeypatch.setattr(simulation_report, "profile_engine", spy)
    argv = ["simulate", MODEL, "--device", DEVICE, "--engine", "sglang", "--dp", "2", "--requests", "6"]
    assert main([*argv, "--rate", "2", "--no-interval", "--max-num-seqs", "64"]) == 0
    cfg = seen[-1]
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (32, 4096)
    assert cfg.new_token_ratio[0] == pytest.approx(0.21)
    assert main([*argv, "--rate", "2", "--no-interval", "--max-num-seqs", "2"]) == 0
    assert seen[-1].max_num_seqs == 1
    rank = get_engine("sglang").with_overrides(max_num_seqs=64).for_data_parallel(2)
    with pytest.raises(CostModelError, match="already one rank's profile of 2"):
        rank.for_data_parallel(2)
    with pytest.raises(CostModelError, match="set up for its device already"):
        rank.for_device(get_device(DEVICE))
    assert "max_num_seqs 32 a rank (the value given // 2)" in rank.summary()


def test_every_engine_states_its_balancer_and_an_assumed_one_is_said(capsys):
    """Every registered profile's ``dp_load_balance`` has a source (vLLM's score rule too); where
    it stands in for an engine's own (TensorRT-LLM's attention-DP router sends a request to the
    rank with the fewest active tokens), the group line says it is ASSUMED."""
    from graphs.cli import main
    from graphs.serving.engines import engines

    assert all(p.sources.get("dp_load_balance") for p in engines())
    argv = ["simulate", MODEL, "--device", DEVICE, "--engine", "trtllm", "--dp", "2", "--requests", "6"]
    assert main([*argv, "--rate", "2", "--no-interval"]) == 0
    assert "fewest 4 x waiting + running, ASSUMED for trtllm@1.0" in capsys.readouterr().out
