"""Where the validation benchmarks' independent replays run: this process, a local process pool,
or Dask (a local cluster, or a scheduler at ``--dask-address``), through the executor that
``size``, ``simulate --rates``/``--max-rate`` and ``calibrate serving`` use
(:mod:`graphs.serving.planning.executors`) and the command line's options for it
(:mod:`graphs.cli.dask_option`: ``--scheduler local|dask``, ``--workers N``, ``--dask-address ADDR``).

A replay is deterministic and reads nothing another replay writes (each worker keeps its own
caches, as one process keeps its own), so the lines are the ones one process gives, taken back in
the order one process makes them. A worker imports the replay (:data:`WORKER_MODULES`) as it
starts; the workers of a ``--dask-address`` cluster need this repository on their ``sys.path``
and the same install (the measured corpus's wheel) as the submitting process.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from costmodel.errors import CostModelError
from graphs.cli.dask_option import add_dask_options, dask_client
from graphs.serving.planning.executors import iter_ordered

__all__ = ["WORKER_MODULES", "add_options", "executor_of", "ordered"]

T = TypeVar("T")

#: what a local Dask worker imports as it starts: the replay its tasks run
WORKER_MODULES = ("benchmarks.replay",)


def add_options(ap: argparse.ArgumentParser, what: str) -> None:
    """``--scheduler local|dask``, ``--dask-address`` and ``--workers``, as the commands take them.

    Parameters
    ----------
    ap : argparse.ArgumentParser
        The script's parser.
    what : str
        The pieces of work that run there, for the help (``"the rows' replays"``).
    """
    add_dask_options(ap, what)


@contextlib.contextmanager
def executor_of(args: argparse.Namespace, jobs: int = 1) -> Iterator[Any]:
    """Where the replays run while the block runs: a Dask client with ``--scheduler dask`` (its
    local cluster starting in the background, closed after the block), a pool of ``jobs`` local
    processes where ``jobs`` > 1, else None (this process).

    Parameters
    ----------
    args : argparse.Namespace
        The script's options (:func:`add_options`).
    jobs : int
        Local processes (``silicon_accuracy --jobs``); only with ``--scheduler local``.

    Yields
    ------
    Client, StartingClient, ProcessPoolExecutor or None
        The executor (None: this process).

    Raises
    ------
    SystemExit
        ``--jobs`` above 1 with ``--scheduler dask`` (the workers are ``--workers`` or the
        cluster's), ``--workers`` outside [1, 256] or no Dask installed (at once), or no
        scheduler reached at ``--dask-address`` (where the block first submits a task).
    """
    if args.scheduler == "dask":
        if jobs != 1:
            raise SystemExit(
                f"--jobs {jobs} with --scheduler dask not allowed: --jobs is the local process pool; "
                "on Dask the workers are --workers (a local cluster) or --dask-address's"
            )
        with contextlib.ExitStack() as stack:
            try:  # --workers out of range, no Dask installed: refused before the cluster starts
                client = stack.enter_context(dask_client(args, preload=WORKER_MODULES, background=True))
            except CostModelError as exc:
                raise SystemExit(str(exc)) from None
            try:
                yield client
            except CostModelError:
                _started(client)  # no scheduler at --dask-address: its one line, not the replay's error
                raise
        return
    if jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            yield pool
        return
    yield None


def _started(client: Any) -> None:
    """Raise the one-line ``SystemExit`` of a client that could not be made (first used in a task's
    submission: the error then surfaced there); a client that is up: nothing."""
    try:
        client.wait()  # a StartingClient (dask_client's background start): its error, raised again
    except CostModelError as exc:
        raise SystemExit(str(exc)) from None


def ordered(executor: Any | None, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]]) -> Iterator[T]:
    """``fn(*args)`` for each of ``calls``, yielded in their order: in this process one after
    another as each is asked for, or on ``executor`` as
    :func:`graphs.serving.planning.executors.iter_ordered` runs them (on Dask one task a worker
    thread in flight, the next submitted as one ends); those not taken are cancelled when the
    iteration stops.

    Parameters
    ----------
    executor : Any or None
        A Dask ``Client`` or a ``concurrent.futures`` executor; None: this process.
    fn : callable
        The task (a module-level function: the executor pickles it by name).
    calls : sequence of tuple
        Each call's arguments.

    Returns
    -------
    Iterator
        ``fn(*args)``, in the order of ``calls``, as each is asked for.
    """
    return iter_ordered(executor, fn, calls)
