"""Where a long computation may give way: between its pieces (each table the registry makes,
each rank's shared view, each job-wide intermediate) the analyses call `checkpoint()`.

A front end that runs analyses in threads sets a hook for its own thread (`hooked`): the
app's views raise there once the view is no longer shown, so work nobody waits for stops at
the next piece instead of taking a core from the view on screen (issue 27, point 4). The
report and the API set none: `checkpoint()` then does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


def checkpoint() -> None:
    """A point where the current thread's work may stop (its hook raises) or wait."""
    hook = getattr(_local, "hook", None)
    if hook is not None:
        hook()


@contextmanager
def none_inside() -> Iterator[None]:
    """No checkpoint inside the block: where a lock is held, work that waited there would
    hold up every thread that needs the lock, the view on screen included."""
    before = getattr(_local, "hook", None)
    _local.hook = None
    try:
        yield
    finally:
        _local.hook = before


@contextmanager
def hooked(hook: Callable[[], None]) -> Iterator[None]:
    """`hook` called at every checkpoint this thread passes inside the block."""
    before = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = before
