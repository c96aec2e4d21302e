"""The accuracy benchmarks' replays on an executor (:mod:`benchmarks.replay.parallel`): the lines of
one process, row by row and number by number, in the same order.

``benchmarks/serving_accuracy.py`` and ``benchmarks/silicon_accuracy.py`` (its load check too) take
``--scheduler dask`` (``--workers``, ``--dask-address``) as ``size`` does; each row's replay is
deterministic, so a Dask worker process computes exactly the number this process does. The
independent reference is the one-process run of the same rows: every :class:`Line` (the values
of every mode, the interval's ends, the queue share, the notes) must be equal, not close.
"""

from __future__ import annotations

import argparse
import concurrent.futures

import pytest

from benchmarks import replay
from benchmarks.replay import parallel, tables

#: published rows of two deployments (three of one, one of the other), replayed with --quick
SERVING_ROWS = (
    "vllmci9513-latency-llama-3.1-8b-tp1",
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-ttft",
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-itl",
    "nim-llama33-70b-h100x2-fp8-5000-500-c1-tput",
)
#: published rows of two deployments and an excluded row (a throughput the source does not fully
#: publish), replayed with --quick in every mode: the Dask test's (small models' kernels: a few
#: seconds each to price)
DASK_SERVING_ROWS = (
    "vllmci9513-latency-llama-3.1-8b-tp1",
    "vllmci9513-throughput-llama-3.1-8b-tp1",
    "vllmci9513-latency-mixtral-8x7b-tp2",
)
#: silicon deployments ((engine, version, model, device, weights, tp) as
#: :func:`benchmarks.replay.silicon.deployment_key` names them), each with the (ISL, OSL) of the
#: runs taken: three runs, each a TTFT, a TPOT and an E2E row
SILICON_RUNS = {
    ("tensorrt-llm", "1.3.0rc1", "qwen3-32b", "gb200", "", "2"): {("2000", "500"), ("4000", "1000")},
    ("sglang", "0.5.8.post1", "qwen3-32b", "h100-sxm", "", "1"): {("1024", "128")},
}


def _serving_rows(ids: tuple[str, ...] = SERVING_ROWS) -> list[dict[str, str]]:
    rows = {r["id"]: r for r in replay.load_rows(subset=None)}
    return [rows[i] for i in ids]


def test_ordered_yields_in_the_given_order_on_any_executor() -> None:
    """Results come back in the calls' order whichever finishes first (a later call is faster)."""
    import time

    def nap(k: int) -> int:
        time.sleep(0.02 * (3 - k))
        return k * k

    calls = [(k,) for k in range(4)]
    assert list(parallel.ordered(None, nap, calls)) == [0, 1, 4, 9]
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        assert list(parallel.ordered(ex, nap, calls)) == [0, 1, 4, 9]


def test_evaluate_on_threads_keeps_one_process_order_and_progress() -> None:
    """Rows grouped by deployment (a task each), the lines back in :data:`tables.ORDER`, each
    row's progress lines handed to ``progress`` with its global index."""
    rows = _serving_rows()
    said: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        two = tables.evaluate(rows, ("bound",), quick=True, progress=said.append, executor=ex)
    one = tables.evaluate(rows, ("bound",), quick=True)
    assert two == one
    assert [ln.row["id"] for ln in one] == [*SERVING_ROWS[1:], SERVING_ROWS[0]]  # nim- first
    assert sorted(s.split("]")[0] for s in said) == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert len({tables.deployment(r) for r in rows}) == 2


def test_a_budget_spent_lists_every_row_as_not_run() -> None:
    """On an executor the budget is a wall-clock deadline each task checks before a row: spent at
    once (0 s), every row is listed as not run, as in one process."""
    rows = _serving_rows()
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        two = tables.evaluate(rows, ("bound",), quick=True, budget_s=-1.0, executor=ex)
    one = tables.evaluate(rows, ("bound",), quick=True, budget_s=-1.0)
    assert two == one and all((ln.excluded or "").startswith("not run") for ln in one)


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"scheduler": "local", "workers": 2, "dask_address": None, **kw})


def test_where_the_replays_run() -> None:
    with parallel.executor_of(_args()) as ex:
        assert ex is None
    with parallel.executor_of(_args(), jobs=2) as ex:
        assert isinstance(ex, concurrent.futures.ProcessPoolExecutor)
    with pytest.raises(SystemExit, match="--jobs 2 with --scheduler dask not allowed"):
        with parallel.executor_of(_args(scheduler="dask"), jobs=2):
            pass
    with pytest.raises(SystemExit, match=r"--workers must be in \[1, 256\], got 0"):
        with parallel.executor_of(_args(scheduler="dask", workers=0)):
            pass


def test_no_scheduler_at_the_address_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client starts in the background: a scheduler not reached surfaces where the first task
    is submitted, as the one-line refusal, not a traceback."""
    pytest.importorskip("distributed")
    from graphs.cli import dask_option

    monkeypatch.setattr(dask_option, "DASK_CONNECT_TIMEOUT_S", 1)
    with pytest.raises(SystemExit, match=r"--dask-address 'tcp://127\.0\.0\.1:9': no scheduler reached"):
        with parallel.executor_of(_args(scheduler="dask", dask_address="tcp://127.0.0.1:9")) as ex:
            list(parallel.ordered(ex, abs, [(-1,)]))


def test_the_scripts_take_the_dask_options() -> None:
    from benchmarks import serving_accuracy

    with pytest.raises(SystemExit, match="--workers must be in"):
        serving_accuracy.main(["--rows", "nim-", "--scheduler", "dask", "--workers", "0"])


@pytest.fixture(scope="module")
def cluster():
    """A local Dask cluster of two single-threaded worker processes (each its own caches, as a
    process of its own computes every number afresh)."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl,
        Client(cl) as c,
    ):
        yield c


@pytest.mark.slow
def test_serving_rows_on_dask_are_those_of_one_process(cluster) -> None:
    """Two deployments' rows in every mode with the interval, and an excluded row: the Dask
    workers' lines equal this process's exactly (every value, the interval's ends, the queue
    share, the notes)."""
    rows = _serving_rows(DASK_SERVING_ROWS)
    two = tables.evaluate(rows, replay.MODES, quick=True, executor=cluster)
    one = tables.evaluate(rows, replay.MODES, quick=True)
    assert [ln.row["id"] for ln in two] == [ln.row["id"] for ln in one]
    for a, b in zip(two, one, strict=True):
        assert a.values == b.values and a.interval == b.interval and a.queue_share == b.queue_share
        assert a.notes == b.notes and a.excluded == b.excluded
    assert [ln.excluded is None for ln in one] == [True, False, True]
    assert all(ln.interval is not None and ln.values["simulated"] is not None for ln in one[::2])


@pytest.mark.slow
def test_silicon_rows_and_load_check_on_dask_are_those_of_one_process(cluster) -> None:
    pytest.importorskip("aiconfigurator_core")
    from benchmarks import silicon_accuracy as si
    from benchmarks.replay import silicon

    rows, _ = silicon.silicon_rows(silicon.load_sample())
    rows = [r for r in rows if (r["isl"], r["osl"]) in SILICON_RUNS.get(silicon.deployment_key(r), ())]
    assert len(rows) == 9
    two = si.evaluate(rows, replay.MODES, executor=cluster)
    one = si.evaluate(rows, replay.MODES)
    assert two == one and [ln.row["id"] for ln in two] == [ln.row["id"] for ln in one]
    check_two = si.load_check(rows, executor=cluster)
    check_one = si.load_check(rows)
    assert check_two == check_one and check_one.runs["all"] == 2  # one run a deployment
