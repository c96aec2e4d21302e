"""Where independent simulations run: this process, or an ``executor`` (a Dask ``Client`` or any
``concurrent.futures`` executor), as ``size``, ``simulate --max-rate``/``--rates`` and
``calibrate serving`` use one (the command line makes it: :mod:`graphs.cli.dask_option`).

A task carries everything it needs (the model's config, the device's spec, the engine's knobs, a
predictor: each a small picklable value), so a worker process that knows only the shipped catalog
runs it; its result is the one this process would compute. A Dask client is told which waiting
task to run first (:func:`submit`), and objects every task reads are sent to its workers once
(:func:`send_once`).
"""

from __future__ import annotations

import pickle
import queue
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from costmodel.errors import CostModelError
from costmodel.hardware import Hardware, active_catalog, register_device

__all__ = ["Packed", "iter_ordered", "known_devices", "map_ordered", "received", "send_once", "submit"]

T = TypeVar("T")


def submit(executor: Any, bound: float, fn: Callable[..., T], *args: Any) -> Any:
    """``fn(*args)`` submitted to ``executor``; on a Dask client (it has ``scatter``) with the
    priority ``-bound``, so that of the tasks waiting for a worker the one with the lowest bound
    (the next the caller takes) runs first, ties in submission order (a new generation each call,
    ``fifo_timeout=0``: Dask's 100 ms default leaves the submissions of one step of a search
    unordered, a speculative one then running before the awaited one): the task a caller waits
    for is never queued behind a speculative one (a running task is not pre-empted). No key is
    derived from the arguments (``pure=False``): no task is submitted twice. A
    ``concurrent.futures`` executor runs them in submission order.

    Parameters
    ----------
    executor : Any
        A Dask ``Client`` or a ``concurrent.futures`` executor.
    bound : float
        The task's rank: the lowest runs first on a Dask client.
    fn : callable
        The task (picklable where the executor pickles).
    *args
        Its arguments.

    Returns
    -------
    Future
        The executor's future of ``fn(*args)``.
    """
    if hasattr(executor, "scatter"):
        return executor.submit(fn, *args, priority=-bound, fifo_timeout=0, pure=False)
    return executor.submit(fn, *args)


def send_once(executor: Any, obj: Any) -> Any:
    """``obj`` as every task on ``executor`` takes it (a task reads it through :func:`received`):
    on a Dask client (it has ``scatter``), sent to every worker once, unhashed (a task's arguments
    are pickled and, to name the task, tokenised: 30,000 requests pickle to 1.3 MB and tokenise in
    about 3.6 s, per task), and :class:`Packed` (Dask sends a list item by item, and a worker
    passes it on to the next the same way: 30,000 requests took 1.5-3.4 s to reach two workers,
    against 0.17 s as one blob), the scattered future in its place; else ``obj`` itself.

    Parameters
    ----------
    executor : Any
        A Dask ``Client`` or a ``concurrent.futures`` executor.
    obj : Any
        What every task reads (a list of requests).

    Returns
    -------
    Any
        The scattered future (of a :class:`Packed`), or ``obj``.
    """
    if not hasattr(executor, "scatter"):
        return obj
    return executor.scatter([Packed(obj)], broadcast=True, hash=False)[0]


def known_devices(devices: dict[str, Hardware]) -> None:
    """The devices as the submitting process resolved them, registered here (in a worker) where
    this process's catalog lacks or differs from them (a ``--hw-file`` device, or one replaced with
    ``--hw-override``): a worker process knows only the shipped catalog.

    Parameters
    ----------
    devices : dict of str to Hardware
        Each name the task uses and its spec.
    """
    cat = active_catalog()
    for name, hw in devices.items():
        if name not in cat or cat.get(name) != hw:
            register_device(hw, aliases=[name] if name != hw.name else None, replace=True)


def iter_ordered(
    executor: Any | None,
    fn: Callable[..., T],
    calls: Sequence[tuple[Any, ...]],
    *,
    first: Sequence[int] | None = None,
) -> Iterator[T]:
    """``fn(*args)`` for each of ``calls``, on ``executor`` when one is given, yielded in the order
    of ``calls``: the results this process computes. Those not taken are cancelled when the
    iteration stops (an error in one, or the caller's early stop).

    On a Dask client (it has ``scatter``) at most as many tasks are in flight as the cluster has
    worker threads, the next submitted as one ends: a worker that frees takes the next call. All
    submitted at once, Dask assigns a task to a worker as it is submitted when the group is
    smaller than twice the cluster's threads, busy or not, and there it waits while the other
    worker, freed, idles: ``simulate --rates 5,10,20,40`` on two workers (runs of 8.2, 6.1, 3.7
    and 1.6 s) ended one worker after 8.2 + 3.7 s and the other after 6.1 + 1.6 s, where taking
    the next on a free worker ends both after 9.8 s (list scheduling; Graham, "Bounds on
    multiprocessing timing anomalies", SIAM J. Appl. Math. 1969: within ``2 - 1/m`` of the best on
    ``m`` workers, within ``4/3 - 1/(3m)`` when the longest go first). A ``concurrent.futures``
    executor queues the calls itself and its workers take them as they free: all are submitted.
    Without an executor each call runs here as its result is asked for. The threads are counted
    as tasks end (and every :data:`POLL_S` while none does): a cluster that grows takes more; an
    adaptive one, which scales on its backlog, sees none beyond them.

    Parameters
    ----------
    executor : Any or None
        A Dask ``Client`` or ``concurrent.futures`` executor; None: this process, one after another.
    fn : callable
        The task (picklable where the executor pickles).
    calls : sequence of tuple
        Each call's arguments.
    first : sequence of int, optional
        The calls' indices in the order to start them (the longest first, where the caller knows
        which; default the given order). Results stay in the order of ``calls``.

    Yields
    ------
    Any
        ``fn(*args)``, in the order of ``calls``.

    Raises
    ------
    CostModelError
        ``first`` not a permutation of the calls' indices.
    """
    order = list(range(len(calls))) if first is None else list(first)
    if sorted(order) != list(range(len(calls))):
        raise CostModelError(f"first must order the {len(calls)} calls' indices, each once, got {order[:8]}")
    if executor is None:
        for args in calls:
            yield fn(*args)
        return
    rank = {i: float(k) for k, i in enumerate(order)}
    futures: dict[int, Any] = {}
    todo = iter(order)
    ended: queue.SimpleQueue[None] = queue.SimpleQueue()  # a token as each task ends
    dask = hasattr(executor, "scatter")

    def top_up() -> None:
        """Submit the next calls while fewer than the cluster's threads run (all, off Dask)."""
        slots = _threads(executor) if dask else len(calls)
        running = sum(not f.done() for f in futures.values())
        for _ in range(max(0, slots - running)):
            i = next(todo, None)
            if i is None:
                return
            futures[i] = f = submit(executor, rank[i], fn, *calls[i])
            f.add_done_callback(lambda _: ended.put(None))

    try:
        top_up()
        for i in range(len(calls)):
            # after top_up either call i is submitted or a task runs whose end puts a token; the
            # wait is bounded: a Dask future whose result a dying worker held goes back to pending
            # and ends again without a second callback, and workers that join are counted
            while i not in futures or not futures[i].done():
                try:
                    ended.get(timeout=POLL_S)
                except queue.Empty:
                    pass
                top_up()
            yield futures[i].result()
    finally:
        for f in futures.values():
            f.cancel()  # those not taken


def map_ordered(
    executor: Any | None,
    fn: Callable[..., T],
    calls: Sequence[tuple[Any, ...]],
    each: Callable[[int], None] | None = None,
    *,
    first: Sequence[int] | None = None,
) -> list[T]:
    """``[fn(*args) for args in calls]``, on ``executor`` when one is given (:func:`iter_ordered`:
    one task a worker thread in flight on Dask, started in ``first``'s order), the results taken
    in the order of ``calls``: the list is the one this process computes.

    Parameters
    ----------
    executor : Any or None
        A Dask ``Client`` or ``concurrent.futures`` executor; None: this process, one after another.
    fn : callable
        The task.
    calls : sequence of tuple
        Each call's arguments.
    each : callable, optional
        ``each(done)`` as each result is taken, in order (a progress bar).
    first : sequence of int, optional
        The calls' indices in the order to start them (default the given order).

    Returns
    -------
    list
        The results, in the order of ``calls``.

    Raises
    ------
    CostModelError
        ``first`` not a permutation of the calls' indices.
    """
    out: list[T] = []
    for result in iter_ordered(executor, fn, calls, first=first):
        out.append(result)
        if each is not None:
            each(len(out))
    return out


#: the longest :func:`iter_ordered` waits for a task's end before it looks again at its futures
#: and the cluster's threads (s): a result lost with a worker and recomputed calls no callback
POLL_S = 1.0


def _threads(client: Any) -> int:
    """The worker threads of a Dask client's cluster now (at least 1: a cluster of none yet still
    takes one task, which waits for a worker)."""
    return max(1, sum(client.nthreads().values()))


class Packed:
    """``value`` pickled once, whole, and kept so where it is sent (a worker holds the bytes, and
    passes the bytes on to another worker): :func:`received` unpickles it once per process, the
    first time a task reads it.

    Parameters
    ----------
    value : Any
        What every task reads (picklable).
    """

    __slots__ = ("_value", "blob")

    def __init__(self, value: Any) -> None:
        self.blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._value = value

    @classmethod
    def _of_blob(cls, blob: bytes) -> Packed:
        out = cls.__new__(cls)
        out.blob = blob
        return out

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return Packed._of_blob, (self.blob,)

    def __sizeof__(self) -> int:  # what Dask counts it as on a worker
        return object.__sizeof__(self) + len(self.blob)

    def value(self) -> Any:
        """The value, unpickled here on first use and kept.

        Returns
        -------
        Any
            What was packed (where it was packed: the object itself).
        """
        try:
            return self._value
        except AttributeError:
            self._value = pickle.loads(self.blob)  # this process's own pickle of it
            return self._value


def received(obj: Any) -> Any:
    """What :func:`send_once` sent, as a task reads it: a :class:`Packed` unpacked (once per
    process), anything else as it is.

    Parameters
    ----------
    obj : Any
        A task's argument, as :func:`send_once` returned it where the task was submitted.

    Returns
    -------
    Any
        The object sent.
    """
    return obj.value() if isinstance(obj, Packed) else obj
