"""Design-space search: its points equal the one-at-a-time analyses, its frontier equals a brute
force over the same points, and a Dask cluster finds the same frontier as one process."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.frontier import pareto_mask
from costmodel.hardware import get_device
from graphs import build_model, capacity, parallel_plan, step_time
from graphs.cli import main
from graphs.serving.planning.design_search import search
from models import get_model

KW = dict(
    devices=["h100", "a100"],
    tp=[1, 2],
    pp=[1, 2],
    microbatches=[1, 2],
    batches=[1, 4, 16, 64, 256],
    ctxs=[1024, 8192, 65536],
)


def _brute_force(model: str, energy: bool = False, slo_tpot: float | None = None):
    """Every point one at a time with parallel_plan and capacity, then an O(n^2) frontier per context."""
    cfg = get_model(model)
    pts = []
    for dev in KW["devices"]:
        hw = get_device(dev)
        power = as_float(hw.power_w)
        for tp in KW["tp"]:
            for pp in KW["pp"]:
                for m in KW["microbatches"]:
                    for b in KW["batches"]:
                        for ctx in KW["ctxs"]:
                            if b % m:
                                continue
                            if not capacity(cfg, hw, batch=b, ctx=ctx, tp=tp).terms["total"] <= pp * as_float(
                                hw.memory_bytes()
                            ):
                                continue
                            r = parallel_plan(cfg, hw, batch=b, ctx=ctx, tp=tp, pp=pp, microbatches=m)
                            if slo_tpot is not None and r.step_s > slo_tpot:
                                continue
                            e = power * r.devices * r.step_s / b
                            pts.append(
                                (
                                    dev,
                                    tp,
                                    pp,
                                    m,
                                    b,
                                    ctx,
                                    r.tokens_per_s_per_user,
                                    r.tokens_per_s_per_device,
                                    e,
                                )
                            )
    objs = [(p[6], p[7], -p[8]) if energy else (p[6], p[7]) for p in pts]
    # the context is a workload coordinate: a point is dominated only by points at its own context
    front = {
        p[:6]
        for p, o in zip(pts, objs, strict=True)
        if not any(
            all(q >= v for q, v in zip(o2, o, strict=True)) and o2 != o
            for p2, o2 in zip(pts, objs, strict=True)
            if p2[5] == p[5]
        )
    }
    return pts, front


@pytest.mark.parametrize("energy", [False, True])
def test_frontier_equals_brute_force(energy):
    pts, want = _brute_force("llama-3.1-8b", energy=energy, slo_tpot=0.05)
    res = search("llama-3.1-8b", slo_tpot=0.05, energy=energy, **KW)
    got = {(r["device"], r["tp"], r["pp"], r["microbatches"], r["batch"], r["ctx"]) for r in res.frontier}
    assert res.points == 2 * 2 * 2 * 2 * 5 * 3
    assert res.meets_slo == len(pts)
    assert got == {(get_device(d).name, *rest) for d, *rest in want}


def test_a_point_equals_the_numeric_graph():
    """TPOT of a tp2 pp1 point from the numeric graph's per-kernel sum (no compiled forms), TTFT
    from the numeric prefill graph of one prompt."""
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    res = search(cfg, devices=["h100"], tp=[2], batches=[8], ctxs=[4096], prompt=2048)
    (row,) = res.frontier
    want_tpot = as_float(step_time(build_model(cfg, "decode", batch=8, ctx=4096, tp=2), hw))
    want_ttft = as_float(step_time(build_model(cfg, "prefill", batch=1, seq=2048, tp=2), hw))
    assert math.isclose(row["tpot_s"], want_tpot, rel_tol=1e-9)
    assert math.isclose(row["ttft_s"], want_ttft, rel_tol=1e-9)
    assert math.isclose(row["tokens_per_s_per_device"], 8 / want_tpot / 2, rel_tol=1e-9)
    assert row["plan"].startswith("h100-sxm bf16/bf16 tp2 pp1 ep1 m1")


def test_expert_parallel_memory_splits_the_experts():
    """ep=4 on Mixtral: each device holds a quarter of the routed experts, so the memory per device
    drops by 3/4 of the expert weights (8 experts x 3 matrices of 4096 x 14336 x 32 layers, bf16)."""
    cfg = get_model("mixtral-8x7b")
    (ep1,) = search(cfg, devices=["b200"], batches=[1], ctxs=[1024]).frontier
    (ep4,) = search(cfg, devices=["b200"], ep=[4], batches=[1], ctxs=[1024]).frontier
    experts = 8 * 3 * 4096 * 14336 * 32 * 2
    assert math.isclose(ep1["memory_bytes"] - ep4["memory_bytes"], experts * 3 / 4, rel_tol=1e-9)
    assert ep4["devices"] == 4 and ep4["tpot_s"] != ep1["tpot_s"]


def test_slos_and_fit_are_respected():
    res = search(
        "llama-3.1-70b",
        devices=["h100"],
        tp=[1, 2, 4, 8],
        batches=[1, 32, 256],
        ctxs=[4096, 131072],
        slo_tpot=0.03,
        slo_ttft=1.0,
    )
    assert res.frontier and all(r["tpot_s"] <= 0.03 and r["ttft_s"] <= 1.0 for r in res.frontier)
    assert all(r["memory_bytes"] <= as_float(get_device("h100").memory_bytes()) for r in res.frontier)
    assert res.meets_slo <= res.fits <= res.valid <= res.points
    # 70B in bf16 (141 GB of weights) fits no single 80 GB H100
    assert all(r["tp"] >= 2 for r in res.frontier)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(tp=[0]), "tp must be >= 1"),
        (dict(pp=[3]), "must divide the 32 layers"),
        (dict(ep=[2]), "has no experts"),
        (dict(slo_tpot=-1.0), "slo_tpot must be a positive"),
        (dict(batches=[]), "batches: give at least one value"),
        (dict(prompt=0), "prompt must be a positive"),
    ],
)
def test_bad_search_input(kw, message):
    args = dict(devices=["h100"], batches=[1], ctxs=[128]) | kw
    with pytest.raises(CostModelError, match=message):
        search("llama-3.1-8b", **args)


def test_search_command(capsys, tmp_path):
    f = tmp_path / "front.csv"
    code = main(
        [
            "search",
            "llama-3.1-8b",
            "--devices",
            "h100,b200",
            "--tp",
            "1,2",
            "--batches",
            "1..64",
            "--ctxs",
            "1024..8192/1024",
            "--slo-tpot",
            "0.02",
            "--energy",
            "--csv",
            str(f),
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "Pareto frontier" in out and "fastest per user" in out and f.exists()
    assert main(["search", "llama-3.1-8b", "--batches", "1,2", "--ctxs", "128", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["points"] == 2 and data["frontier"]
    assert main(["search", "llama-3.1-8b", "--tp", "0", "--quiet"]) == 2
    assert main(["search", "llama-3.1-8b", "--batches", "5..1", "--quiet"]) == 2
    assert "START <= STOP" in capsys.readouterr().err


@pytest.mark.slow
def test_dask_cluster_gives_the_local_frontier():
    distributed = pytest.importorskip("distributed")
    kw = dict(
        devices=["h100", "a100"],
        tp=[1, 2],
        batches=range(1, 65),
        ctxs=range(1024, 16385, 1024),
        slo_tpot=0.05,
        energy=True,
        block=4096,
    )
    local = search("llama-3.1-8b", **kw)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cl:
        with distributed.Client(cl) as client:
            remote = search("llama-3.1-8b", client=client, **kw)
    assert remote == local and local.frontier


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=30),
    st.booleans(),
)
def test_pareto_mask_equals_brute_force(rows, three):
    pts = np.array(rows, dtype=float)[:, : 3 if three else 2]
    sense = (True, False, True)[: pts.shape[1]]
    got = pareto_mask(pts, sense)
    q = pts * np.where(np.array(sense), 1.0, -1.0)
    want = [
        not any((q[j] >= q[i]).all() and (q[j] > q[i]).any() for j in range(len(q))) for i in range(len(q))
    ]
    assert got.tolist() == want


def test_large_pareto_prefilter_keeps_the_frontier():
    rng = np.random.default_rng(0)
    pts = rng.integers(0, 2000, (200_000, 2)).astype(float)
    got = pareto_mask(pts, (True, True))
    order = np.lexsort((-pts[:, 1], -pts[:, 0]))  # brute force by sweep: best second so far
    best, want = -np.inf, np.zeros(len(pts), dtype=bool)
    for i in order:
        if pts[i, 1] > best:
            want[i], best = True, pts[i, 1]
    keep = {tuple(r) for r in pts[want]}
    want |= np.array([tuple(r) in keep for r in pts])
    assert (got == want).all()


def test_plans_wider_than_the_scale_up_domain_are_left_out():
    """An H100 PCIe NVLink bridge joins 2 cards: tp=4 would run over PCIe, which the plan does not model."""
    res = search("tiny", devices=["h100-pcie"], batches=[2], ctxs=[64], tp=[1, 2, 4])
    assert res.beyond_domain == ("h100-pcie tp=4 ep=1 (domain 2)",)
    with pytest.raises(CostModelError, match="scale-up domain"):
        search("tiny", devices=["h100-pcie"], batches=[2], ctxs=[64], tp=[4])


def test_search_table_prints_devices_without_a_tdp_or_price(capsys):
    # TPU v6e has neither a TDP nor a price in the catalog: its energy and cost are None in the
    # rows; the table printed them with float(None) (an internal error, exit 3) before
    argv = ["search", "llama-3.1-8b", "--devices", "tpu-v6e", "--batches", "1", "--ctxs", "1024"]
    assert main([*argv, "--cost", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "no TDP" in out and "no price" in out and "tpu-v6e: no price: pass --price-per-hour" in out


@pytest.mark.parametrize("flag, value", [("--price-per-hour", "2"), ("--electricity-per-kwh", "0.1")])
def test_search_refuses_prices_without_the_cost_objective(flag, value, capsys):
    # without --cost no column or objective uses a price: the flags were silently unused
    argv = ["search", "llama-3.1-8b", "--devices", "h100", "--batches", "1", "--ctxs", "1024", "--quiet"]
    assert main([*argv, flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "add --cost" in err


def test_three_objective_pareto_equals_the_one_at_a_time_filter():
    """Blocks of rows across several chunks, with ties and infinities (no power, no price),
    keep what a one-at-a-time filter keeps: a row joins when no kept row dominates it."""
    rng = np.random.default_rng(3)
    pts = rng.integers(0, 60, (3000, 3)).astype(float)
    pts[:, 2] = pts[:, 0] + pts[:, 1] + rng.integers(0, 4, 3000)  # energy, minimised: a wide front
    pts[::37, 2] = np.inf
    sense = (True, True, False)
    got = pareto_mask(pts, sense)
    q = pts * np.array([1.0, 1.0, -1.0])
    kept: list[int] = []
    front = np.empty((0, 3))  # the kept rows so far, in the order they joined
    for i in np.argsort(-q.sum(axis=1)):
        if not ((front >= q[i]).all(axis=1) & (front > q[i]).any(axis=1)).any():
            kept.append(i)
            front = np.vstack([front, q[i]])
    want = np.zeros(len(pts), dtype=bool)
    want[kept] = True
    assert got.sum() > 1000 and (got == want).all()


def test_a_device_without_links_searches_its_unpipelined_plans(capsys):
    """A review searched a model on groq-lpu (the catalog gives it no link) at tp 1: "device
    'groq-lpu' has no link 'scale_up'", and serve plans skipped its only plan so, while decode
    priced it. A tp 1, pp 1 plan crosses no link: priced as decode prices it; a pipelined plan
    is invalid there (search) or skipped with the reason (serve plans)."""
    from graphs import decode_report
    from graphs.cli import main

    layers = str(
        Path(__file__).resolve().parents[1] / "examples" / "hybrid-layers.json"
    )  # 3 layers, bf16 (a layer file states none)
    res = search(layers, devices=["groq-lpu"], batches=[1], ctxs=[1024], pp=[1, 3])
    assert (res.points, res.valid) == (2, 1)
    (row,) = res.frontier
    want = float(decode_report(layers, "groq-lpu", batch=1, ctx=1024).step_s)
    assert row["pp"] == 1 and row["tpot_s"] == pytest.approx(want, rel=1e-9)
    assert (
        main(
            ["serve", "plans", layers, "--device", "groq-lpu", "--plans", "1x1x1x1,1x3x1x1", "--batches", "1"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "groq-lpu has no scale_up link to pass activations between pipeline stages (pp 3)" in out


def test_a_long_list_of_bad_pp_is_named_in_one_short_line():
    """A review's --pp 1..4096 on a 2-layer model printed a 23 KB line listing every bad value."""
    with pytest.raises(CostModelError) as err:
        search("tiny", devices=["h100"], batches=[1], ctxs=[16], pp=list(range(1, 4097)))
    msg = str(err.value)
    assert msg == "pp 3, 4, 5, 6, 7, 8, 9, 10 and 4086 more must divide the 2 layers of tiny (its divisors: 1, 2)"


def _cli_json(capsys, argv):
    assert main([*argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_empty_frontier_says_which_slo_no_point_met_and_the_best_seen(capsys):
    """`search` where no point met the SLOs printed an empty table with no word of why. It now
    names each SLO no point that fits meets with the lowest value seen, pinned to the same
    search without SLOs (its frontier holds the fastest user's TPOT, and per context a point of
    every TTFT: a prompt's TTFT does not depend on the batch)."""
    argv = ["search", "llama-3.1-8b", "--device", "h100", "--batches", "1,8,64", "--ctxs", "1024,8192"]
    free = _cli_json(capsys, argv)
    best_tpot = min(r["tpot_s"] for r in free["frontier"])
    best_ttft = min(r["ttft_s"] for r in free["frontier"])
    slos = ["--slo-tpot", "0.0001", "--slo-ttft", "0.001"]
    assert main([*argv, *slos, "--quiet"]) == 0
    text = capsys.readouterr().out
    said = (
        f"  no point meets the SLOs: of the {free['fits']} points that fit, the lowest TTFT is {best_ttft:.4g} s > "
        f"0.001 s (--slo-ttft); the lowest TPOT is {best_tpot:.4g} s > 0.0001 s (--slo-tpot)"
    )
    assert text.splitlines()[-1] == said
    doc = _cli_json(capsys, [*argv, *slos])
    assert doc["frontier"] == [] and doc["notes"] == [said.strip()]
    assert doc["best_tpot_s"] == best_tpot and doc["best_ttft_s"] == best_ttft
    # an SLO some point meets is not named: TTFT met by every point at ctx 1024
    assert main([*argv, "--slo-tpot", "0.0001", "--slo-ttft", "1", "--quiet"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"  no point meets the SLOs: of the {free['fits']} points that fit, the lowest TPOT is {best_tpot:.4g} s > 0.0001 s (--slo-tpot)"


def test_each_slo_met_alone_never_both_says_so():
    """Two SLOs each met by some points, never by one point: the counts of each (a result built by
    hand: 5 and 3 of the 9 that fit)."""
    from graphs.serving.planning.design_search import SearchResult

    res = SearchResult(
        "tiny", 9, 9, 9, 0, ("a", "b"), (), {}, meets_slo_ttft=5, meets_slo_tpot=3, best_ttft_s=0.1, best_tpot_s=0.01
    )
    assert res.verdict(0.2, 0.02) == [
        "no point meets the SLOs: of the 9 points that fit, 5 meet TTFT <= 0.2 s and 3 meet TPOT <= 0.02 s, none both"
    ]


def test_a_search_where_nothing_fits_says_the_least_need_as_the_ledger_does(capsys):
    """`search llama-3.1-405b` on one H100 fits nothing: the text said nothing of it. The least
    need and the capacity are `ledger`'s own (its total and capacity at batch 1, ctx 1024)."""
    # ledger exits 1 on a point that does not fit
    assert main(["ledger", "llama-3.1-405b", "--device", "h100", "--batch", "1", "--ctx", "1024", "--json"]) == 1
    led = json.loads(capsys.readouterr().out)
    argv = ["search", "llama-3.1-405b", "--device", "h100", "--batches", "1,8", "--ctxs", "1024,4096"]
    assert main([*argv, "--quiet"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    gib = 1024**3
    assert last == (
        "  nothing fits in memory: the least need, h100-sxm bf16/bf16 tp1 pp1 ep1 m1 at batch 1 and ctx 1024, "
        f"is {led['terms']['total'] / gib:.2f} GiB per device; the device holds {led['capacity_bytes'] / gib:.2f} GiB "
        "(costmodel ledger has the terms)"
    )
