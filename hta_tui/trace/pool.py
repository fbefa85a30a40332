"""The processes parser workers run in: a forkserver that imports the parser once (PRELOAD),
so that every worker forked from it starts parsing at once.

This module imports neither polars nor the parser: a front end may start the forkserver
before it imports anything heavy. `report` does not (a warm open, which needs no worker,
would pay the forkserver's imports: 0.25 s of CPU, twice the wall time under load); the app
does, at start.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
from collections.abc import Iterator, Sequence


@contextlib.contextmanager
def _usable_stderr() -> Iterator[None]:
    """multiprocessing hands sys.stderr's file descriptor to the helper processes it starts.
    Under a running Textual app sys.stderr is a capture object whose fileno() is -1, and the
    start fails ("bad value(s) in fds_to_keep"): use the real one meanwhile."""
    try:
        usable = sys.stderr is not None and sys.stderr.fileno() >= 0
    except (AttributeError, OSError, ValueError):
        usable = False
    if usable or sys.__stderr__ is None:
        yield
        return
    saved, sys.stderr = sys.stderr, sys.__stderr__
    try:
        yield
    finally:
        sys.stderr = saved


#: forkserver where the platform has it (Linux, macOS): it never forks a process running
#: polars or Textual threads. spawn elsewhere (Windows).
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


#: Imported once by the forkserver, so that every worker forked from it starts with the
#: parser (polars, msgspec) in place: each worker importing them itself cost about 0.5 s of
#: CPU per worker and open, on cores the parsers need.
PRELOAD = ("hta_tui.trace.load",)


#: Where polars' allocator (jemalloc, on Linux) reads its settings when polars is imported
#: (polars adds its own decay times to what is there).
MALLOC_CONF = "_RJEM_MALLOC_CONF"
#: The workers' allocator with one arena (with their one polars thread), not jemalloc's four
#: per core: a worker runs one task at a time, and memory freed in an arena is given back
#: only as that arena allocates again (jemalloc's purging thread does not run in a forked
#: process). With eight arenas a worker of 100 MB ranks held ~250 MB after its first rank
#: and ~480 MB after its eighth (peak ~320 -> ~550 MB); with one it stays near ~260 MB
#: (peak ~290), at no more CPU (bench/ANALYSES.md, "mem19"). Unless the user chose either.
WORKER_ARENAS = "narenas:1"


def prepare_pool(preload: Sequence[str] = ()) -> None:
    """Start multiprocessing's helper processes (resource tracker, forkserver) now. The app
    calls this before Textual takes over stderr, so no stream is swapped while it runs.
    `preload`: more modules the workers will need (the `after_parse` function's), imported
    by the forkserver when it starts (later calls cannot add any)."""
    if START_METHOD != "forkserver":
        return
    from multiprocessing import resource_tracker

    with _usable_stderr(), _children_skip_main():
        resource_tracker.ensure_running()
        _start_forkserver(preload)


def _start_forkserver(preload: Sequence[str] = ()) -> None:
    """Start the process the workers fork from with polars limited to one thread (unless the
    user chose a number). The pool is one process per core already; polars' default of one
    thread per core in every worker spent a quarter of the parse CPU on threads waiting for
    each other. polars reads the setting when it is imported, which the forkserver does once
    for all workers (PRELOAD); this process keeps its own threads for the analyses.

    The forkserver imports PRELOAD with its own `sys.path`, which a `-c` process starts with
    the working directory (Python 3.11 does not apply the parent's path before the preload):
    run inside another checkout of hta-tui, the workers would parse with that checkout's
    code. PYTHONSAFEPATH (3.11+) leaves the working directory out and PYTHONPATH puts the
    parent's path first, so the workers import what the parent imported."""
    from multiprocessing import forkserver

    forkserver.set_forkserver_preload([*PRELOAD, *preload])
    env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    if "POLARS_MAX_THREADS" not in os.environ:
        env["POLARS_MAX_THREADS"] = "1"
        conf = os.environ.get(MALLOC_CONF, "")  # (polars put its decay times there if here)
        if "narenas" not in conf:
            env[MALLOC_CONF] = f"{conf},{WORKER_ARENAS}" if conf else WORKER_ARENAS
    with _environ(env):
        forkserver.ensure_running()


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ meanwhile (a process started meanwhile inherits them), then as
    before."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _children_skip_main() -> Iterator[None]:
    """Start processes that do not re-run the caller's `__main__`.

    forkserver and spawn children import the main script again, so a script without an
    `if __name__ == "__main__":` guard (the usual two lines calling the Python API) would run
    again in every worker and fail there. The workers need nothing from it: their functions
    live in this package.
    """
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None  # type: ignore[assignment]
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)
