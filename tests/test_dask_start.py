"""A local Dask cluster's start and stop as a command sees them (issue 44 item 5): the server its
workers fork from starts before the command's own imports, is the one the cluster uses, and never
outlives the command; a worker's stop leaves nothing on the terminal."""

import argparse
import logging
import multiprocessing
import os

import pytest

pytestmark = pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver on this platform"
)


def _args(**kw):
    return argparse.Namespace(**{"scheduler": "dask", "workers": 2, "dask_address": None, **kw})


def _server_pid():
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid


def test_prestart_is_nothing_without_a_local_cluster():
    pytest.importorskip("distributed")
    from graphs.cli.dask_option import prestart_workers

    before = _server_pid()
    prestart_workers(_args(scheduler="local"), ())
    prestart_workers(_args(dask_address="tcp://127.0.0.1:1"), ())
    assert _server_pid() == before  # no process started for a command that runs here or elsewhere


def test_the_prestarted_server_is_the_one_the_workers_fork_from_and_it_stops():
    pytest.importorskip("distributed")
    from graphs.cli.dask_option import dask_client, prestart_workers

    args = _args()
    prestart_workers(args, ())
    server = _server_pid()
    assert server is not None and server != os.getpid()
    with dask_client(args, background=True) as c:
        parents = set(c.run(os.getppid).values())
    assert parents == {server}  # both workers forked from it: nothing imported twice
    assert _server_pid() is None  # stopped with the cluster


def test_a_cluster_that_cannot_start_stops_the_prestarted_server(monkeypatch):
    pytest.importorskip("distributed")
    from costmodel.errors import CostModelError
    from graphs.cli import dask_option

    def refuse(args, *, preload=()):
        raise CostModelError("no cluster")

    monkeypatch.setattr(dask_option, "client", refuse)
    args = _args()
    with pytest.raises(CostModelError, match="no cluster"):
        with dask_option.dask_client(args, background=True) as c:
            c.submit  # noqa: B018 - the first use raises the start's error
    assert _server_pid() is None  # the server _prestart started is not left running


def test_a_workers_stop_leaves_no_warning_on_the_terminal():
    """The worker runs :mod:`graphs.cli.dask_worker` as it starts: its task-state log is kept to
    errors, so the "Async instruction ... ended with CancelledError" a speculative task cut off
    at the stop writes stays off the terminal."""
    pytest.importorskip("distributed")
    from graphs.cli.dask_option import dask_client
    from graphs.cli.dask_worker import QUIET_LOGGERS, TASK_LOGGERS, dask_setup

    before = {n: logging.getLogger(n).level for n in (*QUIET_LOGGERS, *TASK_LOGGERS)}
    try:
        dask_setup(None)
        assert all(logging.getLogger(n).level == logging.ERROR for n in QUIET_LOGGERS)
        # a failed task's "Compute Failed" traceback stays off: the command raises it in one line
        assert all(logging.getLogger(n).level == logging.CRITICAL for n in TASK_LOGGERS)
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)
    with dask_client(_args()) as c:
        levels = c.run(lambda: [logging.getLogger(n).level for n in QUIET_LOGGERS])
    assert len(levels) == 2 and all(v == [logging.ERROR] * len(QUIET_LOGGERS) for v in levels.values())


def test_the_prestarted_server_starts_in_the_environment_a_nanny_gives_its_workers(monkeypatch):
    """Dask's nanny sets one BLAS thread a worker (and memory trimming) in this process's
    environment before it starts one; a server started earlier must start in it too: numpy,
    imported in the server, reads it there, and every worker forked from it has its BLAS pools."""
    pytest.importorskip("distributed")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import dask
    import distributed  # noqa: F401 - registers the nanny's defaults

    from graphs.cli.dask_option import PRE_SPAWN_ENV, dask_client, prestart_workers

    assert PRE_SPAWN_ENV == {
        k: str(v) for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()
    }
    for k in PRE_SPAWN_ENV:  # unset, as a nanny finds them; a value the user set would stay
        monkeypatch.delenv(k, raising=False)
    args = _args()
    prestart_workers(args, ("numpy",))
    with dask_client(args, preload=("numpy",), background=True) as c:
        pools = c.run(lambda: [p["num_threads"] for p in threadpoolctl.threadpool_info()])
    assert all(all(n == 1 for n in v) for v in pools.values())


def test_prestart_refuses_what_the_cluster_would_refuse_without_starting_a_server():
    pytest.importorskip("distributed")
    from costmodel.errors import CostModelError
    from graphs.cli.dask_option import prestart_workers

    before = _server_pid()
    with pytest.raises(CostModelError, match="--workers must be in"):
        prestart_workers(_args(workers=0), ())
    assert _server_pid() == before


def _work():
    """A fixed piece of work in the worker, then the CPU seconds its process has used so far
    (user + system, its own account): what the command must find among its children's once the
    worker is stopped and reaped."""
    import resource

    sum(i * i for i in range(2_000_000))
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def test_the_stopped_server_is_reaped_and_its_workers_time_counts():
    """The server is ended with SIGTERM and waited for: no process is left, and the CPU time of
    the workers it reaped counts as this process's children's (what ``size_dask.py`` reports)."""
    pytest.importorskip("distributed")
    import resource

    from graphs.cli.dask_option import dask_client, prestart_workers

    args = _args(workers=1)
    prestart_workers(args, ())
    server = _server_pid()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with dask_client(args, background=True) as c:
        worker_cpu_s = c.submit(_work, pure=False).result()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert _server_pid() is None
    with pytest.raises(ProcessLookupError):
        os.kill(server, 0)  # ended and reaped: no zombie either
    # every second the worker reported of itself reached this process through the server's reaping
    assert worker_cpu_s > 0
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) >= worker_cpu_s
