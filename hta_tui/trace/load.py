"""Many trace files, in parallel processes, each landing as soon as it is parsed.

Workers parse and write the cache entry themselves, and hand back only a small result; the
caller reads the Parquet it needs. So the parent never holds JSON, and a warm open never starts
a process.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import TraceFile
from hta_tui.trace.parse import TraceFileError, parse_file

#: Files smaller than this are parsed in the calling process: a worker start costs more.
INLINE_BYTES = 2_000_000


@dataclass
class LoadResult:
    """What became of one file. `status` is loaded, incomplete, not_trace or error."""

    file: TraceFile
    status: str
    meta: dict[str, Any] = field(default_factory=dict)
    entry: Path | None = None
    error: str | None = None
    seconds: float = 0.0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "loaded"


#: Called in the worker, right after a file is parsed and stored, with (entry, meta, frames):
#: where a front end precomputes per-file summaries (into the entry) while the frames are in
#: memory, without reading them back.
AfterParse = Callable[[Path, dict[str, Any], dict[str, pl.DataFrame]], None]


def load_one(tf: TraceFile, cache: Cache, after_parse: AfterParse | None = None) -> LoadResult:
    """Cache hit, else parse and store. Never raises for a bad file: the result says why."""
    return _cached(tf, cache) or _parse_and_store(tf, cache, after_parse)


def _cached(tf: TraceFile, cache: Cache) -> LoadResult | None:
    t0 = time.perf_counter()
    meta = cache.lookup(tf)
    if meta is None:
        return None
    return LoadResult(
        tf, "loaded", meta, cache.entry_dir(tf), seconds=time.perf_counter() - t0, cached=True
    )


def _parse_and_store(
    tf: TraceFile, cache: Cache, after_parse: AfterParse | None = None
) -> LoadResult:
    t0 = time.perf_counter()
    try:
        parsed = parse_file(tf.path)
        entry = cache.store(tf, parsed)
        meta = parsed.meta
        if after_parse is not None:
            after_parse(entry, meta, parsed.frames)
    except TraceFileError as exc:
        status = "incomplete" if exc.incomplete else "not_trace" if exc.not_trace else "error"
        return LoadResult(tf, status, error=str(exc), seconds=time.perf_counter() - t0)
    except PermissionError:
        return LoadResult(tf, "error", error="permission denied", seconds=time.perf_counter() - t0)
    except FileNotFoundError:
        return LoadResult(tf, "error", error="file vanished", seconds=time.perf_counter() - t0)
    except (OSError, MemoryError, ValueError) as exc:
        return LoadResult(tf, "error", error=_one_line(exc), seconds=time.perf_counter() - t0)
    return LoadResult(tf, "loaded", meta, entry, seconds=time.perf_counter() - t0)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


def _worker(
    tf: TraceFile, cache_root: Path, enabled: bool, after_parse: AfterParse | None
) -> LoadResult:
    cache = Cache.__new__(Cache)
    cache.root, cache.enabled = cache_root, enabled
    return _parse_and_store(tf, cache, after_parse)  # the caller found no cache entry


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


def prepare_pool() -> None:
    """Start multiprocessing's helper processes (resource tracker, forkserver) now. The app
    calls this before Textual takes over stderr, so no stream is swapped while it runs."""
    if START_METHOD != "forkserver":
        return
    from multiprocessing import resource_tracker

    with _usable_stderr(), _children_skip_main():
        resource_tracker.ensure_running()
        _start_forkserver()


def _start_forkserver() -> None:
    """Start the process the workers fork from with polars limited to one thread (unless the
    user chose a number). The pool is one process per core already; polars' default of one
    thread per core in every worker spent a quarter of the parse CPU on threads waiting for
    each other. polars reads the setting when it is imported, which the forkserver does once
    for all workers; this process keeps its own threads for the analyses."""
    from multiprocessing import forkserver

    if "POLARS_MAX_THREADS" in os.environ:
        forkserver.ensure_running()
        return
    os.environ["POLARS_MAX_THREADS"] = "1"
    try:
        forkserver.ensure_running()
    finally:
        del os.environ["POLARS_MAX_THREADS"]


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


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def load_files(
    files: Iterable[TraceFile],
    cache: Cache,
    *,
    workers: int | None = None,
    cancelled: Any = None,
    after_parse: AfterParse | None = None,
) -> Iterator[LoadResult]:
    """Yield one result per file as each finishes: cache hits and small files first, in this
    process; the rest from a pool of `workers` processes (default: the usable cores).

    `cancelled`, when given, is called between results; a true answer stops submitting work.
    `after_parse` (a module-level function, so workers can import it) runs after each parse.
    Once every file is in, the cache is pruned to its size limit if anything was added.
    """
    stored = False
    for result in _load(files, cache, workers, cancelled, after_parse):
        stored = stored or (result.ok and not result.cached)
        yield result
    if stored:
        with contextlib.suppress(OSError):
            cache.prune()


def _load(
    files: Iterable[TraceFile],
    cache: Cache,
    workers: int | None,
    cancelled: Any,
    after_parse: AfterParse | None,
) -> Iterator[LoadResult]:
    pending: list[TraceFile] = []
    for tf in files:
        result = _cached(tf, cache)
        if result is None and tf.size < INLINE_BYTES:
            result = _parse_and_store(tf, cache, after_parse)
        if result is None:
            pending.append(tf)
            continue
        yield result
        if cancelled is not None and cancelled():
            return
    if not pending:
        return
    n = min(workers or default_workers(), len(pending))
    if n <= 1:
        for tf in pending:
            yield _parse_and_store(tf, cache, after_parse)
            if cancelled is not None and cancelled():
                return
        return
    # Largest first keeps both cores busy to the end; forkserver avoids forking a process that
    # runs polars or Textual threads.
    pending.sort(key=lambda tf: tf.size, reverse=True)
    ctx = mp.get_context(START_METHOD)
    prepare_pool()
    with _usable_stderr():
        pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
    with pool:
        with _usable_stderr(), _children_skip_main():  # processes start on the first submits
            owner: dict[Future[LoadResult], TraceFile] = {
                pool.submit(_worker, tf, cache.root, cache.enabled, after_parse): tf
                for tf in pending
            }
        futures = set(owner)
        while futures:
            done, futures = wait(futures, return_when=FIRST_COMPLETED)
            for fut in done:
                try:
                    yield fut.result()
                except Exception as exc:  # a worker died (out of memory, killed)
                    yield LoadResult(owner[fut], "error", error=_one_line(exc))
            if cancelled is not None and cancelled():
                for fut in futures:
                    fut.cancel()
                return
