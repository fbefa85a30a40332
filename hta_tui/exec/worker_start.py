"""Imported by the pool's forkserver only (`backends.WORK_MODULES`): what every worker needs
for per-rank work, and would otherwise make on its first rank, done once in the process
they all fork from.

The rank work and every analysis's module (the registry imports them when first used: here
all at once). And what a worker that imported these itself spent ~80 ms of CPU on its first
rank (a 2-core report of 8 ranks: two workers, each paying it): numpy's masked arrays
(polars looks for them when it makes a Series from a numpy array, and numpy imports them on
first use), the modules the rank-wise work imports inside functions (each rank's steps
covered, the findings' summaries, the memory tables' step windows) and `code_version`, every
result's key (the source of analysis/, trace/ and exec/ hashed). A worker runs the code the
forkserver imported, so the version made here is its own.

The list of modules lives here, not with the front end that starts the forkserver: `report`
starts it before it imports the analyses itself (`backends.start_early`).

The forkserver ends at once when its client has gone (`_end_at_once`): it holds the client's
stdout and stderr (multiprocessing passes them on), and tearing down these modules took it
0.1-0.4 s after the report's last byte, which a reader of the report's pipe waited for.
"""

from __future__ import annotations

import atexit
import inspect
import os

import numpy.ma  # noqa: F401

from hta_tui.analysis import coverage, memory_window, registry  # noqa: F401
from hta_tui.analysis.findings import engine, gpu  # noqa: F401
from hta_tui.exec.rank_work import code_version

registry.import_modules()
code_version()


def _in_forkserver() -> bool:
    """Whether this module is being imported by multiprocessing's forkserver (its preload),
    not by a process of its own (a test, say)."""
    from multiprocessing import forkserver

    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


def _end_at_once() -> None:
    """The forkserver's exit with no teardown: it writes nothing, holds no file open for
    writing, and its workers (forked from it) end on their own. Registered last, so run
    first (atexit's order): what was registered before it is skipped."""
    os._exit(0)


if _in_forkserver():
    atexit.register(_end_at_once)
