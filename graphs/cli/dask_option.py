"""``--scheduler local|dask``, ``--dask-address`` and ``--workers``: where a command's independent
pieces of work run (``search``'s blocks, ``size``'s candidate simulations).

A local cluster is ``--workers`` single-threaded worker processes, forked (where the platform
can) from one server process that imported Dask and the modules the tasks need once, not each
worker importing them (about 1.1 CPU s a worker). Its start can overlap the command's own
preparation: :func:`prestart_workers`, called before the command's own imports, starts that
server at once (its imports then run in its own process on another core); :func:`dask_client`
with ``background`` starts the cluster in a thread and yields a :class:`StartingClient` whose
first use waits for it; ``preload`` names the modules each worker imports while it starts, not
on its first task. When the block ends, the local cluster's workers are stopped at once (a
speculative task still running is of no use any more): each is given :data:`WORKER_STOP_S` to
stop, then killed (a worker busy with a task otherwise holds the close for the nanny's 4 s
grace), and what a stopped worker logs about its cut-off task stays off the terminal
(:mod:`graphs.cli.dask_worker`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = [
    "DASK_CONNECT_TIMEOUT_S",
    "WORKER_SETUP",
    "WORKER_STOP_S",
    "STARTING_SWITCH_INTERVAL_S",
    "StartingClient",
    "add_dask_options",
    "client",
    "dask_client",
    "prestart_workers",
]

#: seconds to reach a ``--dask-address`` scheduler before giving up
DASK_CONNECT_TIMEOUT_S = 10
#: the module each local worker runs as it starts (:mod:`graphs.cli.dask_worker`: its log)
WORKER_SETUP = "graphs.cli.dask_worker"
#: the environment a Dask nanny sets before it starts a worker (``distributed.yaml``'s
#: ``distributed.nanny.pre-spawn-environ`` defaults: memory trimming, one BLAS thread a worker),
#: set before :func:`_prestart` starts the server the workers fork from
PRE_SPAWN_ENV = {
    "MALLOC_TRIM_THRESHOLD_": "65536",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
#: the hash seed a nanny gives its workers when none (or 0) is set (``distributed.nanny.Nanny``)
DASK_HASH_SEED = "6640"
#: seconds a local worker is given to stop when the command is done before it is killed: an idle
#: one stops within it, one still on a speculative task is killed (at 0.5 s the close held the
#: command 0.6 s for that task, traced; 0.23 s now)
WORKER_STOP_S = 0.05
#: a local cluster's workers with less housekeeping on their event loop, each call of which takes
#: the GIL a pure-Python task (a simulation) needs: no statistical profiler (it feeds the
#: dashboard, none here, by sampling every running task's stack each 10 ms), the blocked-loop
#: tick each 1 s (not 20 ms), the system monitor each 5 s (not 0.5 s), the memory monitor each
#: 2 s (not 0.1 s). Measured under load (5,000 requests a candidate, 8 candidates): a task's
#: process CPU time was 1.42x what the same call takes in one process with Dask's defaults,
#: 1.25x with these. And the scheduler keeps every task a worker is not running in its own
#: queue, in priority order (``worker-saturation`` 1.0: a single-threaded worker holds one task;
#: Dask's 1.1 rounds up to two, so a second task waits behind the first on that worker while the
#: other worker, freed, takes a later, lower-priority one: ``size``'s search then waits on the
#: candidate it needs while a speculative one runs)
_LOCAL_WORKER_CONFIG = {
    "distributed.scheduler.worker-saturation": 1.0,
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "2s",
}


def add_dask_options(p: argparse.ArgumentParser, what: str) -> None:
    """The three options, ``what`` naming the pieces that run there (for the help)."""
    p.add_argument("--scheduler", choices=("local", "dask"), default="local", help=f"where {what} run")
    p.add_argument("--dask-address", default=None, help="scheduler address (default: a local cluster)")
    p.add_argument("--workers", type=int, default=2, help="local Dask cluster: worker processes")


def _check(args: argparse.Namespace) -> None:
    """The refusals that need no cluster: ``--workers`` out of range, no Dask installed."""
    from costmodel.errors import CostModelError

    if not 1 <= args.workers <= 256:
        raise CostModelError(f"--workers must be in [1, 256], got {args.workers}")
    if importlib.util.find_spec("distributed") is None:
        raise CostModelError("--scheduler dask needs the dask extra: pip install 'costmodel[dask]'")


def client(args: argparse.Namespace, *, preload: Sequence[str] = ()) -> tuple[Any, Any]:
    """A Dask client for ``--scheduler dask`` and the local cluster it owns (None for an address).

    Parameters
    ----------
    args : argparse.Namespace
        The command line (:func:`add_dask_options`'s options).
    preload : sequence of str
        Modules each local worker imports while it starts (Dask's ``preload``).

    Returns
    -------
    tuple
        The client and the local cluster it owns (None: ``--dask-address``'s scheduler).

    Raises
    ------
    CostModelError
        ``--workers`` outside [1, 256], no Dask installed, or no scheduler at ``--dask-address``
        within :data:`DASK_CONNECT_TIMEOUT_S`.
    """
    from costmodel.errors import CostModelError

    _check(args)
    from distributed import Client, LocalCluster

    if args.dask_address:
        try:
            return Client(args.dask_address, timeout=DASK_CONNECT_TIMEOUT_S), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise CostModelError(
                f"--dask-address {args.dask_address[:200]!r}: no scheduler reached within "
                f"{DASK_CONNECT_TIMEOUT_S} s ({type(exc).__name__})"
            ) from None
    import dask

    method = _start_method(preload)
    config = {**_LOCAL_WORKER_CONFIG, "distributed.worker.multiprocessing-method": method}
    with dask.config.set(config):  # the workers take the config their nanny starts with
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            preload=[*preload, WORKER_SETUP],
        )
    return Client(cluster), cluster


def _prestart(preload: Sequence[str]) -> None:
    """Start the forkserver of :func:`_start_method` now, its imports (Dask and ``preload``, about
    1.5 CPU s) running in its own process beside this one's preparation, before this process has
    imported Dask to make the cluster (about 0.4 CPU s, competing with the command's own imports
    for this process's interpreter lock): ``size``'s two workers were up 1.8-2.3 s after the
    cluster's start, the forkserver started last. The cluster's nannies later find it running.
    Nothing without a forkserver (Windows: spawned workers).

    Parameters
    ----------
    preload : sequence of str
        The modules each worker's tasks need (as :func:`_start_method` names them).
    """
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from multiprocessing import forkserver

    # what a nanny sets in this process's environment before it starts a worker (Dask's
    # ``distributed.nanny.pre-spawn-environ`` defaults, and the hash seed it fixes): the server and
    # every worker forked from it read them as they start (numpy's BLAS threads at its import, in
    # the server), so they are set before it starts, as the nanny would have
    for k, v in PRE_SPAWN_ENV.items():  # a value the user set stays, as a nanny keeps it
        os.environ.setdefault(k, v)
    if os.environ.get("PYTHONHASHSEED") in (None, "0"):
        os.environ["PYTHONHASHSEED"] = DASK_HASH_SEED
    multiprocessing.get_context("forkserver").set_forkserver_preload(["distributed", *preload, WORKER_SETUP])
    forkserver.ensure_running()


def prestart_workers(args: argparse.Namespace, preload: Sequence[str]) -> None:
    """For ``--scheduler dask`` on a local cluster, start the server its workers fork from now
    (:func:`_prestart`), before the command's own imports: its imports run in its own process,
    on another core, while this one's run here. Nothing otherwise (``--scheduler local``, a
    ``--dask-address``).

    Parameters
    ----------
    args : argparse.Namespace
        The command line (:func:`add_dask_options`'s options).
    preload : sequence of str
        The modules each worker's tasks need (``dask_client``'s ``preload``).

    Raises
    ------
    CostModelError
        ``--workers`` out of range or no Dask installed (:func:`dask_client`'s refusals, at once).
    """
    if args.scheduler != "dask" or args.dask_address:
        return
    _check(args)  # refused at once (no server started for a command that cannot run)
    _prestart(preload)


def _start_method(preload: Sequence[str]) -> str:
    """How a local worker process starts: ``forkserver`` where the platform has it (Linux, macOS),
    a server process importing Dask and ``preload`` once, each worker a fork of it that finds
    them imported (spawned, each worker imports them itself: Dask and the sizing are about
    1.1 CPU s a worker); else ``spawn``, Dask's default.

    Parameters
    ----------
    preload : sequence of str
        The modules each worker's tasks need.

    Returns
    -------
    str
        The ``multiprocessing`` start method.
    """
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    import distributed.utils

    # the server's imports, set before Dask's first use of the context, which would otherwise
    # set its own list once (Dask's optional packages, pandas among them, imported in this
    # process to see which are installed: about 0.4 CPU s here and again in the server)
    multiprocessing.get_context("forkserver").set_forkserver_preload(["distributed", *preload, WORKER_SETUP])
    distributed.utils._forkserver_preload_set = True
    return "forkserver"


#: Python's thread switch interval (s) while a :class:`StartingClient` is being made. The making
#: thread runs the local cluster's event loop (the scheduler and the nannies live in this
#: process) while the command's own work holds the interpreter lock: at Python's default 5 ms
#: each of the loop's many short wake-ups waits up to that long for the lock: with ``size``'s
#: parent rebuilding its mixed-step cards beside it (a first run after an install or a code
#: change, about 2.8 CPU s), two workers were up 4.5 s after the start; at 0.5 ms, 2.7-2.9 s (the
#: machine otherwise idle; with the cards written the parent's work is short and the interval
#: makes no difference). Restored once the client is made.
STARTING_SWITCH_INTERVAL_S = 0.0005


class StartingClient:
    """A Dask client being made in a thread (:func:`dask_client` with ``background``): any
    attribute of the client (``submit``, ``scatter`` ...) waits until it is up, then is the
    client's; an error making it is raised there. While it is made the interpreter switches
    threads every :data:`STARTING_SWITCH_INTERVAL_S` (at most), so the work beside it does not
    starve the cluster's start."""

    def __init__(self, make: Callable[[], tuple[Any, Any]]) -> None:
        self._made: tuple[Any, Any] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._make, args=(make,), name="dask-start", daemon=True)
        self._thread.start()

    def _make(self, make: Callable[[], tuple[Any, Any]]) -> None:
        sw = sys.getswitchinterval()
        sys.setswitchinterval(min(sw, STARTING_SWITCH_INTERVAL_S))
        try:
            self._made = make()
        except BaseException as exc:  # raised again where the client is first used
            self._error = exc
        finally:
            sys.setswitchinterval(sw)

    def wait(self) -> tuple[Any, Any]:
        """The client and its local cluster (None for an address), once made.

        Returns
        -------
        tuple
            As :func:`client` returns them.

        Raises
        ------
        CostModelError
            What :func:`client` raised.
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._made is not None
        return self._made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wait()[0], name)


async def _stop(nannies: list[Any], timeout: float) -> None:
    # closed, not killed: a nanny whose worker is killed while it runs restarts the worker (a new
    # process importing Dask and the preloaded modules, about 1.5 CPU s each, the cluster's close
    # then waiting for it to come up); a closing nanny kills its worker and stays down
    await asyncio.gather(*(n.close(timeout=timeout) for n in nannies), return_exceptions=True)


def _stop_forkserver() -> None:
    """The forkserver (:func:`_start_method`), its workers closed, stopped and waited for: no
    server process outlives the command, and its CPU time and its workers' (it reaped them) count
    as this process's children's, as spawned workers' do (``getrusage``'s children; unwaited, the
    orphaned server's would count nowhere). ``ForkServer._stop`` is the standard library's own
    (Python 3.11 to 3.14; where it is missing the server stops when this process exits). The
    server is sent ``SIGTERM`` first (its default action: it ends at once): it has nothing left
    to do, every worker having ended and been reaped by it (the cluster's close waits for each
    worker's exit status, which the server sends once it has reaped it), and the finalisation of
    the interpreter that had imported Dask and the sizing held ``size``'s close 0.23 s (traced;
    0.01 s so). None running (spawned workers): nothing to do."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is None:
        return
    pid = getattr(server, "_forkserver_pid", None)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    stop()


def _close(c: Any, cluster: Any) -> None:
    """Close the client and the local cluster it owns, its workers stopped at once (module doc)."""
    # a worker still running a cancelled speculative task is killed: the nanny's "still alive
    # after ... seconds, killing" warning is that, not a fault
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.setLevel(logging.ERROR)
    try:
        c.close()
        if cluster is not None:
            cluster.sync(_stop, list(cluster.workers.values()), WORKER_STOP_S)
            cluster.close()
            _stop_forkserver()
    finally:
        nanny.setLevel(level)


@contextlib.contextmanager
def dask_client(
    args: argparse.Namespace, *, preload: Sequence[str] = (), background: bool = False
) -> Iterator[Any]:
    """The client of :func:`client` while the block runs (None with ``--scheduler local``),
    closed after it, its local cluster with it (module doc).

    Parameters
    ----------
    args : argparse.Namespace
        The command line (:func:`add_dask_options`'s options).
    preload : sequence of str
        Modules each local worker imports while it starts.
    background : bool
        Start it in a thread and yield a :class:`StartingClient` at once: the block's work before
        its first use overlaps the start.

    Yields
    ------
    Client, StartingClient or None
        Where the work runs (None: this process).
    """
    if args.scheduler != "dask":
        yield None
        return
    if not background:
        c, cluster = client(args, preload=preload)
        try:
            yield c
        finally:
            _close(c, cluster)
        return
    _check(args)  # refused at once, not at the first use
    if not args.dask_address:
        _prestart(preload)
    starting = StartingClient(lambda: client(args, preload=preload))
    try:
        yield starting
    finally:
        made: tuple[Any, Any] | None
        try:
            made = starting.wait()
        except Exception:
            made = None  # its error was raised where the client was used, or the block never used it
        if made is not None:
            _close(*made)
        elif not args.dask_address:
            _stop_forkserver()  # the one :func:`_prestart` started, no cluster made on it
