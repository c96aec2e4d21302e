"""``size`` on an executor: the candidate simulations run speculatively elsewhere, the answer is the
one-process answer (issue 44 item 5)."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from graphs.serving.planning.sizing import size_deployment

KW = dict(rate=30.0, slo_ttft=1.0, slo_tpot=0.05, devices=["h100", "h200"], tps=[1, 2], requests=80, seed=3)


def _plain(res):
    d = res.to_dict()
    return {k: v for k, v in d.items() if k != "candidates"}, [
        (c["device"], c["tp"], c["replicas"], c["prefill_replicas"], c["decode_replicas"], c["meets"])
        for c in d["candidates"]
    ]


@pytest.mark.parametrize("lookahead", [1, 3])
def test_an_executor_gives_the_one_process_answer(lookahead):
    one = size_deployment("tiny", **KW)
    with ThreadPoolExecutor(2) as ex:
        two = size_deployment("tiny", **KW, executor=ex, lookahead=lookahead)
    assert _plain(two) == _plain(one) and one.simulated >= 2


def test_lookahead_is_checked():
    from costmodel.errors import CostModelError

    with pytest.raises(CostModelError, match="lookahead"):
        size_deployment("tiny", **KW, lookahead=0)


@pytest.mark.slow
def test_dask_workers_give_the_one_process_answer(capsys, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    from graphs.cli import main

    argv = ["size", "tiny", "--rate", "30", "--slo-ttft", "1", "--slo-tpot", "0.05", "--devices", "h100,h200"]
    argv += ["--tp", "1,2", "--requests", "120", "--quiet", "--json"]
    # each run its own empty cache: the workers simulate, never read the one-process run's cards
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "one"))
    assert main(argv) == 0
    one = capsys.readouterr().out
    monkeypatch.setenv("COSTMODEL_CACHE_DIR", str(tmp_path / "dask"))
    assert main([*argv, "--scheduler", "dask", "--workers", "2"]) == 0
    assert list((tmp_path / "dask" / "forms").glob("size-run-*.json"))  # the workers' runs, carded
    captured = capsys.readouterr()
    assert "still alive" not in captured.err
    # the same deployments and numbers, digit for digit: a worker may read the mixed step from its
    # card where this process lambdified it, and the card's text is what lambdify compiled
    assert json.loads(captured.out) == json.loads(one)
