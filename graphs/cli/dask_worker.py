"""What every local Dask worker of a command runs as it starts (Dask's worker ``preload``: its
:func:`dask_setup` is called with the worker): the worker's log kept to what a user needs.

A command stops its local cluster's workers as soon as it has its answer
(:mod:`graphs.cli.dask_option`), a speculative task ``size`` no longer needs possibly still
running on one. The worker then logs "Async instruction for <Task cancelled ...> ended with
CancelledError" at WARNING for that task, on the command's terminal: the stop, not a fault. Its
logger (``distributed.worker.state_machine``) is kept to errors. A task that raises is logged by
the worker (``distributed.worker``: "Compute Failed" and its traceback) before the command raises
the same error again as its one-line message: that logger is kept to critical faults
(:data:`TASK_LOGGERS`), so the terminal shows the error once, as a one-process run does.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["QUIET_LOGGERS", "TASK_LOGGERS", "dask_setup"]

#: the worker's loggers kept to errors (module doc)
QUIET_LOGGERS = ("distributed.worker.state_machine",)
#: the worker's loggers kept to critical faults: a failed task's error reaches the command (module doc)
TASK_LOGGERS = ("distributed.worker",)


def dask_setup(worker: Any) -> None:
    """Keep :data:`QUIET_LOGGERS` to errors and :data:`TASK_LOGGERS` to critical faults in this
    worker process (module doc).

    Parameters
    ----------
    worker : distributed.Worker
        The worker starting (unused: the loggers are the process's).
    """
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for name in TASK_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
