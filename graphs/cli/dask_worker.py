"""What every local Dask worker of a command runs as it starts (Dask's worker ``preload``: its
:func:`dask_setup` is called with the worker): the worker's log kept to what a user needs.

A command stops its local cluster's workers as soon as it has its answer
(:mod:`graphs.cli.dask_option`), a speculative task ``size`` no longer needs possibly still
running on one. The worker then logs "Async instruction for <Task cancelled ...> ended with
CancelledError" at WARNING for that task, on the command's terminal: the stop, not a fault. Its
logger (``distributed.worker.state_machine``) is kept to errors.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["QUIET_LOGGERS", "dask_setup"]

#: the worker's loggers kept to errors (module doc)
QUIET_LOGGERS = ("distributed.worker.state_machine",)


def dask_setup(worker: Any) -> None:
    """Keep :data:`QUIET_LOGGERS` to errors in this worker process (module doc).

    Parameters
    ----------
    worker : distributed.Worker
        The worker starting (unused: the loggers are the process's).
    """
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
