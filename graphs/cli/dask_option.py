"""``--scheduler local|dask``, ``--dask-address`` and ``--workers``: where a command's independent
pieces of work run (``search``'s blocks, ``size``'s candidate simulations)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["DASK_CONNECT_TIMEOUT_S", "add_dask_options", "client", "dask_client"]

#: seconds to reach a ``--dask-address`` scheduler before giving up
DASK_CONNECT_TIMEOUT_S = 10


def add_dask_options(p: argparse.ArgumentParser, what: str) -> None:
    """The three options, ``what`` naming the pieces that run there (for the help)."""
    p.add_argument("--scheduler", choices=("local", "dask"), default="local", help=f"where {what} run")
    p.add_argument("--dask-address", default=None, help="scheduler address (default: a local cluster)")
    p.add_argument("--workers", type=int, default=2, help="local Dask cluster: worker processes")


def client(args: argparse.Namespace) -> tuple[Any, Any]:
    """A Dask client for ``--scheduler dask`` and the local cluster it owns (None for an address):
    the given address, or a local cluster of ``--workers`` single-threaded processes."""
    from costmodel.errors import CostModelError

    if not 1 <= args.workers <= 256:
        raise CostModelError(f"--workers must be in [1, 256], got {args.workers}")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise CostModelError("--scheduler dask needs the dask extra: pip install 'costmodel[dask]'") from None
    if args.dask_address:
        try:
            return Client(args.dask_address, timeout=DASK_CONNECT_TIMEOUT_S), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise CostModelError(
                f"--dask-address {args.dask_address[:200]!r}: no scheduler reached within "
                f"{DASK_CONNECT_TIMEOUT_S} s ({type(exc).__name__})"
            ) from None
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster), cluster


@contextlib.contextmanager
def dask_client(args: argparse.Namespace) -> Iterator[Any]:
    """The client of :func:`client` while the block runs (None with ``--scheduler local``), closed
    after it, its local cluster with it."""
    if args.scheduler != "dask":
        yield None
        return
    import logging

    c, cluster = client(args)
    try:
        yield c
    finally:
        # a worker still running a cancelled speculative task is killed on close: the nanny's
        # "still alive after 4.0 seconds, killing" warning is that, not a fault
        nanny = logging.getLogger("distributed.nanny")
        level = nanny.level
        nanny.setLevel(logging.ERROR)
        try:
            c.close()
            if cluster is not None:
                cluster.close()
        finally:
            nanny.setLevel(level)
