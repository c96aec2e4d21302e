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
    # the runs stay where they ran: the search reads only their outcome (sizing._run_config)
    assert (
        all(d.sim is None for d in two.candidates) and one.winner is not None and one.winner.sim is not None
    )


def test_at_most_lookahead_tasks_beside_the_awaited_one_are_in_flight():
    """A speculative task is submitted only while fewer than ``lookahead + 1`` are unfinished (a
    Dask task submitted beyond the workers may be put on a busy one at once); the awaited one,
    a successor not yet submitted, goes whatever is in flight: at most ``lookahead + 2``. The
    answer is unchanged."""
    one = size_deployment("tiny", **KW)
    in_flight: list[int] = []

    class Counting:
        def __init__(self, ex):
            self.ex, self.futures = ex, []

        def submit(self, fn, *args):
            in_flight.append(1 + sum(not f.done() for f in self.futures))  # with this one
            fut = self.ex.submit(fn, *args)
            self.futures.append(fut)
            return fut

    with ThreadPoolExecutor(4) as ex:
        two = size_deployment("tiny", **KW, executor=Counting(ex), lookahead=1)
    assert _plain(two) == _plain(one)
    assert len(in_flight) >= one.simulated >= 2 and max(in_flight) <= 3  # lookahead 1: 1 + 1 + the awaited


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


def test_a_starting_client_is_the_client_once_made():
    from graphs.cli.dask_option import StartingClient

    with ThreadPoolExecutor(1) as ex:
        starting = StartingClient(lambda: (ex, None))
        assert starting.submit(sum, [1, 2, 3]).result() == 6  # 1 + 2 + 3, on the made executor
        assert starting.wait() == (ex, None)


def test_a_starting_client_switches_threads_often_only_while_it_is_made():
    import sys
    import threading

    from graphs.cli.dask_option import STARTING_SWITCH_INTERVAL_S, StartingClient

    before = sys.getswitchinterval()
    go = threading.Event()
    seen: list[float] = []

    def make():
        seen.append(sys.getswitchinterval())
        go.wait(5)
        return "client", None

    starting = StartingClient(make)
    try:
        assert starting._thread.is_alive()
    finally:
        go.set()
    assert starting.wait() == ("client", None)
    assert seen == [min(before, STARTING_SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == before  # restored once made (or failed)


def test_a_client_that_cannot_be_made_raises_where_it_is_used():
    from costmodel.errors import CostModelError
    from graphs.cli.dask_option import StartingClient

    def refuse():
        raise CostModelError("--dask-address 'tcp://x:1': no scheduler reached within 1 s (OSError)")

    starting = StartingClient(refuse)
    with pytest.raises(CostModelError, match="no scheduler reached"):
        starting.submit  # noqa: B018 - the first use waits for the client, and raises its error


def test_the_requests_go_once_to_an_executor_that_scatters():
    import pickle

    from graphs.serving.planning.executors import Packed, received
    from graphs.serving.planning.executors import send_once as _sent_once
    from graphs.serving.sim.requests import Request

    reqs = [object(), object()]
    with ThreadPoolExecutor(1) as ex:
        assert _sent_once(ex, reqs) is reqs  # no scatter: the requests are each task's argument

    class Scatters:
        def scatter(self, data, *, broadcast, hash):
            self.seen = (data, broadcast, hash)
            return ["future"]

    ex2 = Scatters()
    reqs = [Request(i, 0.1 * i, 100 + i, 10) for i in range(1000)]
    assert _sent_once(ex2, reqs) == "future"
    (packed,), broadcast, hashed = ex2.seen
    assert (broadcast, hashed) == (True, False)  # one object, to every worker, not tokenised
    # one blob, not a list Dask would send item by item: a worker holds the bytes and passes
    # them on as they are, and its task reads the requests themselves, unpickled once
    assert isinstance(packed, Packed) and received(packed) is reqs
    there = pickle.loads(pickle.dumps(packed))
    assert isinstance(there, Packed) and there.blob == packed.blob
    assert pickle.loads(pickle.dumps(there)).blob == packed.blob  # passed on as the same bytes
    got = received(there)
    assert got == reqs and got is not reqs and received(there) is got  # unpickled once there
    assert received(reqs) is reqs  # what was not packed is read as it is


def test_dask_tasks_queue_by_the_search_bound():
    """On a Dask client the lowest objective bound runs first (priority = -bound: Dask runs the
    highest priority first), no key derived from the arguments; a ``concurrent.futures`` executor
    takes neither keyword."""
    from graphs.cli.dask_option import _LOCAL_WORKER_CONFIG
    from graphs.serving.planning.executors import submit as _submit

    class Dask:
        def scatter(self, *a, **k): ...

        def submit(self, fn, *args, **kw):
            self.seen = (fn, args, kw)
            return "future"

    ex = Dask()
    assert _submit(ex, 12.5, max, 1, 2) == "future"
    assert ex.seen == (max, (1, 2), {"priority": -12.5, "fifo_timeout": 0, "pure": False})
    with ThreadPoolExecutor(1) as pool:
        assert _submit(pool, 12.5, max, 1, 2).result() == 2  # max(1, 2)
    # one task held per single-threaded worker: the rest wait on the scheduler, in priority order
    assert _LOCAL_WORKER_CONFIG["distributed.scheduler.worker-saturation"] == 1.0


def test_a_worker_keeps_the_ledgers_the_bounds_built(monkeypatch):
    """The ledgers sent with each task are what ``build_ledger`` returns there: no graph walked."""
    import pickle

    from graphs.serving.step import ledger_fit
    from graphs.serving.step.workload import as_workload

    w = as_workload("tiny")
    led = ledger_fit.build_ledger(w, "decode", 1, 2, None, None)
    led.terms_function()  # compiled on it, as a capacity search does: no pickle takes it
    sent = pickle.loads(pickle.dumps(ledger_fit.ledgers_of(w.config)))  # as a worker receives them
    assert sent[(w.config, "decode", 1, 2, None, None)] == led
    monkeypatch.setattr(ledger_fit, "_LEDGERS", ledger_fit.BoundedCache("ledger-test", 8))  # a fresh process

    def walked(*a, **k):
        raise AssertionError("the graph was walked for a ledger the task carried")

    monkeypatch.setattr(ledger_fit, "model_ledger", walked)
    ledger_fit.keep_ledgers(sent)
    assert ledger_fit.build_ledger(as_workload(w.config), "decode", 1, 2, None, None) == led


def test_a_user_device_reaches_worker_processes(fresh_catalog):
    """A device only this process knows (``--hw-file``) is simulated in fresh worker processes
    too: each task carries the candidates' devices (before, a spawned worker knew only the shipped
    catalog and failed on the name). The answer equals the one-process answer."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from costmodel.hardware import get_device, register_device

    register_device(get_device("h100").replace(name="my-h100"))
    kw = {**KW, "devices": ["my-h100"], "tps": [1]}
    one = size_deployment("tiny", **kw)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
        two = size_deployment("tiny", **kw, executor=ex)
    assert _plain(two) == _plain(one) and one.simulated >= 1
    assert {c["device"] for c in two.to_dict()["candidates"]} == {"my-h100"}


@pytest.mark.slow
def test_a_local_cluster_closes_without_starting_a_worker_again(monkeypatch):
    """Closing the local cluster starts no worker again (its nanny, the worker killed under it,
    restarted it: a new process importing Dask, for nothing, the close waiting for it), and where
    the platform forks workers from a server process, that server is stopped and waited for (its
    workers' CPU counts as this process's children's; no process outlives the command)."""
    pytest.importorskip("distributed")
    import argparse
    import multiprocessing
    import os

    from distributed.nanny import Nanny

    from graphs.cli.dask_option import dask_client

    started = []
    instantiate = Nanny.instantiate

    async def counted(self):
        started.append(self)
        return await instantiate(self)

    monkeypatch.setattr(Nanny, "instantiate", counted)
    args = argparse.Namespace(scheduler="dask", workers=2, dask_address=None)
    with dask_client(args) as c:
        assert c.submit(sum, [1, 2, 3], pure=False).result() == 6  # 1 + 2 + 3, on a worker
        parents = set(c.run(os.getppid).values())
    assert len(started) == 2  # one start a worker, none at the close
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        assert os.getpid() not in parents  # forked from the server, not spawned by this process
        assert forkserver._forkserver._forkserver_pid is None  # the server stopped


def _boom(*args):
    from costmodel.errors import CostModelError

    raise CostModelError("the run failed")


def test_a_failed_run_is_raised_and_cancels_the_speculative_ones():
    """The awaited run's error reaches the caller as raised, and the runs submitted beside it are
    cancelled, not left to run after the search has given up."""
    from costmodel.errors import CostModelError

    submitted = []

    class FailingFirst:
        def __init__(self, ex):
            self.ex = ex

        def submit(self, fn, *args):
            fut = self.ex.submit(_boom if not submitted else fn, *args)
            submitted.append(fut)
            return fut

    with ThreadPoolExecutor(1) as ex:  # one thread: the speculative runs queue behind the failing one
        with pytest.raises(CostModelError, match="the run failed"):
            size_deployment("tiny", **KW, executor=FailingFirst(ex), lookahead=3)
    assert len(submitted) >= 3
    assert any(f.cancelled() for f in submitted[1:])
