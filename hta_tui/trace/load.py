"""Many trace files, in parallel processes, each landing as soon as it is parsed.

Workers parse and write the cache entry themselves, and hand back only a small result; the
caller reads the Parquet it needs. So the parent never holds JSON, and a warm open never starts
a process (unless its entries lack the front end's summaries, `HitSummaries`: made there).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from hta_tui.trace import stream
from hta_tui.trace.cache import (
    Cache,
    CacheWriteError,
    note,
    note_once,
    take_notices,
    uncached_entry,
    unwritable,
)
from hta_tui.trace.discover import TraceFile
from hta_tui.trace.limits import Limits
from hta_tui.trace.parse import ParsedTrace, TraceFileError, parse_file, read_bytes
from hta_tui.trace.pool import (
    START_METHOD,
    _children_skip_main,
    _usable_stderr,
    prepare_pool,
)

log = logging.getLogger("hta_tui.load")

#: Files of less JSON than this (after gunzip) are parsed in the calling process: a worker
#: start costs more.
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
    #: the full traceback of an unexpected error, for the debug log (never the terminal)
    detail: str | None = None
    #: the frames themselves, when the cache could not take them (`entry` is then a path
    #: nothing can be written to or read from: derived summaries are computed again)
    frames: dict[str, pl.DataFrame] | None = None
    #: what the front ends should be told once (the cache cannot be written)
    notice: str | None = None
    #: the derived tables `after_parse` computed (`RankData.memo` keys), handed to the owner
    #: with the result so it does not read back what the worker just wrote
    memos: dict[str, pl.DataFrame] | None = None
    #: damaged cache entries a worker found (and parsed again) while it made summaries of
    #: cache hits (`HitSummaries`): the front ends' notices, given in the owner's process
    damaged: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "loaded"


#: Called in the worker, right after a file is parsed and stored, with (entry, meta, frames):
#: where a front end precomputes per-file summaries (into the entry) while the frames are in
#: memory, without reading them back. What it returns (memo key -> table) travels back with
#: the result (`LoadResult.memos`). Its `in_pieces` attribute, when it has one
#: (`stream.PieceSummaries`), makes the same for a file parsed in pieces from each piece's
#: events as it is parsed, instead of reading the whole rank's back.
AfterParse = Callable[[Path, dict[str, Any], dict[str, pl.DataFrame]], Any]


@dataclass(frozen=True)
class HitSummaries:
    """How a front end's per-file summaries (`AfterParse`, which carries this as its
    `for_hits`) are made for cache hits whose entry lacks them: a cache another front end
    filled (`report` makes only the overview's summary, the app also the step breakdown).
    `missing(entry)` tells (a stat); `made(hits)` makes them for a batch of (entry, meta)
    at once, kept in each entry, and returns each hit's memos (None: not made, the front
    end makes them when it asks). Made where the files are parsed (the pool, chunks of
    FILL_FILES), not one file at a time on the owner's side. Module-level functions, so
    workers can import them."""

    missing: Callable[[Path], bool]
    made: Callable[[list[tuple[Path, dict[str, Any]]]], list[dict[str, pl.DataFrame] | None]]


def load_one(
    tf: TraceFile,
    cache: Cache,
    after_parse: AfterParse | None = None,
    limits: Limits | None = None,
) -> LoadResult:
    """Cache hit, else parse and store. Never raises for a bad file: the result says why."""
    return _cached(tf, cache) or _parse_and_store(tf, cache, after_parse, limits)


def _cached(tf: TraceFile, cache: Cache) -> LoadResult | None:
    t0 = time.perf_counter()
    try:
        entry = cache.entry_dir(tf)
        meta = cache.lookup(tf, entry)
    except Exception:  # a damaged entry is a miss: the file is parsed again
        log.warning("cache lookup failed for %s", tf.path, exc_info=True)
        return None
    if meta is None:
        return None
    return LoadResult(tf, "loaded", meta, entry, seconds=time.perf_counter() - t0, cached=True)


class FileTimeout(Exception):
    """Raised in a parser worker when its file takes longer than the time limit."""


def _parse_and_store(
    tf: TraceFile,
    cache: Cache,
    after_parse: AfterParse | None = None,
    limits: Limits | None = None,
) -> LoadResult:
    """Any exception here is this file's, whatever step raised it (read, decode, normalise,
    store, summarise): it becomes the file's one-line reason, and its traceback goes to the
    debug log; the other files go on."""
    t0 = time.perf_counter()
    limits = limits or Limits.from_env()

    def failed(status: str, error: str, detail: str | None = None) -> LoadResult:
        return LoadResult(tf, status, error=error, seconds=time.perf_counter() - t0, detail=detail)

    kept: dict[str, pl.DataFrame] | None = None
    notice = None
    hook = getattr(after_parse, "in_pieces", None)
    parts: list[Any] = []
    try:
        entry = None
        try:
            parsed = parse_file(tf.path, replace(limits, max_bytes=stream.whole_limit(limits)))
        except TraceFileError as exc:
            if not exc.too_big:
                raise
            parsed, entry, kept, notice = _in_pieces(tf, cache, limits, hook, parts)
        if entry is None:
            try:
                entry = cache.store(tf, parsed)
            except OSError as exc:  # read-only, full, over quota, a file: loads uncached
                entry, kept, notice = uncached_entry(tf), parsed.frames, unwritable(cache, exc)
        meta = parsed.meta
        # a streamed file's frames are read back from its entry, as far as needed
        frames = parsed.frames or None
        if after_parse is None:
            memos = None
        elif parts and parsed.streamed:
            memos = _merged_summaries(hook, after_parse, entry, meta, parts)
        else:
            memos = after_parse(entry, meta, frames)
    except TraceFileError as exc:
        status = "incomplete" if exc.incomplete else "not_trace" if exc.not_trace else "error"
        return failed(status, str(exc))
    except PermissionError:
        return failed("error", "permission denied")
    except FileNotFoundError:
        return failed("error", "file vanished")
    except FileTimeout:
        return failed("error", _timeout_text(limits, tf))
    except MemoryError:
        return failed("error", "out of memory")
    except OSError as exc:
        return failed("error", _one_line(exc))
    except Exception as exc:
        return failed("error", f"internal error, {_one_line(exc)}", traceback.format_exc())
    seconds = time.perf_counter() - t0
    memos = memos if isinstance(memos, dict) else None
    return LoadResult(
        tf, "loaded", meta, entry, seconds=seconds, frames=kept, notice=notice, memos=memos
    )


def _in_pieces(
    tf: TraceFile,
    cache: Cache,
    limits: Limits,
    hook: stream.PieceSummaries | None = None,
    parts: list[Any] | None = None,
) -> tuple[ParsedTrace, Path | None, dict[str, pl.DataFrame] | None, str | None]:
    """A file too large to hold at once, into its cache entry piece by piece (`stream`):
    the parse, its entry (None: store it as any other, it was parsed whole after all), the
    frames kept and a notice when the cache cannot take them (then it must fit in memory).
    `hook`: the summaries' share of each piece, made as it is parsed, into `parts`."""
    writer = cache.writer(tf)
    summarize = hook.piece if hook is not None else None
    try:
        parsed = stream.parse_in_pieces(tf.path, writer, limits, summarize, parts)
        return parsed, writer.commit(parsed.meta) if parsed.streamed else None, None, None
    except CacheWriteError as exc:
        if parts is not None:
            parts.clear()
        writer.abort()
        parsed = parse_file(tf.path, limits)
        return parsed, uncached_entry(tf), parsed.frames, unwritable(cache, exc)
    except BaseException:
        writer.abort()
        raise


def _merged_summaries(
    hook: stream.PieceSummaries | None,
    after_parse: AfterParse,
    entry: Path,
    meta: dict[str, Any],
    parts: list[Any],
) -> Any:
    """The per-file summaries of a file parsed in pieces, from its pieces' parts; if that
    fails, from its events read back (`after_parse`): a bug there costs time, not the file."""
    try:
        assert hook is not None
        return hook.merge(entry, meta, parts)
    except Exception:
        log.warning("%s: merging the pieces' summaries failed", entry, exc_info=True)
        return after_parse(entry, meta, None)


def _timeout_text(limits: Limits, tf: TraceFile) -> str:
    return f"took longer than {limits.seconds_for(tf.size):g} s (HTA_TUI_FILE_TIMEOUT)"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


def _worker(
    files: list[TraceFile],
    cache_root: Path,
    enabled: bool,
    after_parse: AfterParse | None,
    limits: Limits,
) -> list[LoadResult]:
    """A pool task: one file, or several small ones in turn (`_tasks`), each under its own
    time limit and with its own reason. A file whose entry is there already (a chunk sent
    again after a stuck file, `_pool_round`) is a cache hit."""
    cache = Cache.__new__(Cache)
    cache.root, cache.enabled = cache_root, enabled
    out = []
    for tf in files:
        try:
            with _time_limit(limits.seconds_for(tf.size)):
                out.append(_cached(tf, cache) or _parse_and_store(tf, cache, after_parse, limits))
        except FileTimeout:  # the alarm rang after the file's own handlers
            out.append(LoadResult(tf, "error", error=_timeout_text(limits, tf)))
    _fill_in_time(out, after_parse, limits)
    if out:  # (an entry a summary found damaged: told where the front end is)
        out[0].damaged = tuple(take_notices())
    return out


def _lacks(result: LoadResult, hits: HitSummaries) -> bool:
    """A cache hit whose entry lacks the summaries `hits` makes."""
    return (
        result.cached
        and result.ok
        and result.entry is not None
        and result.memos is None
        and hits.missing(result.entry)
    )


def _fill_in_time(
    results: list[LoadResult], after_parse: AfterParse | None, limits: Limits
) -> None:
    """`_fill` under its files' time limit where an alarm can hold it (a pool worker, the
    main thread). The alarm may ring anywhere in it, a stat of `_lacks` too: that costs the
    summaries, as any failure of `_fill` does, never a file's result (a pool task's files
    as their loads left them): the front end makes the summaries when it asks."""
    seconds = sum(limits.seconds_for(r.file.size) for r in results)
    try:
        with _time_limit_here(seconds):
            _fill(results, after_parse)
    except FileTimeout:
        log.warning("summaries of cached files took longer than %g s", seconds)


def _fill(results: list[LoadResult], after_parse: AfterParse | None) -> None:
    """The summaries `after_parse` makes, made at once for the cache hits among `results`
    whose entry lacks them (`HitSummaries`), into each one's `memos`. A failure leaves them
    to the front end, which makes them when it asks (as before any of this)."""
    hits: HitSummaries | None = getattr(after_parse, "for_hits", None)
    if hits is None:
        return
    lacking = [r for r in results if _lacks(r, hits)]
    if not lacking:
        return
    try:
        made = hits.made([(r.entry, r.meta) for r in lacking])  # type: ignore[misc]
        pairs = list(zip(lacking, made, strict=True))
    except Exception:  # (FileTimeout too: the time limit of the chunk's files)
        log.warning("summaries of %d cached files failed", len(lacking), exc_info=True)
        return
    for result, memos in pairs:
        result.memos = memos if isinstance(memos, dict) else None


#: Files under this size (bytes on disk) go to the pool several to a task: a task costs the
#: pool a round trip (pickling, a pipe, a wake-up of the parent) that outweighed parsing a
#: file of a few kB.
CHUNK_BYTES = 256_000
#: At most this many files, and this many bytes, in one task: a task's files land together.
CHUNK_FILES = 32
CHUNK_TOTAL_BYTES = 2_000_000
#: Tasks per worker at least, so both cores stay busy to the end and files land in a stream.
CHUNKS_PER_WORKER = 4
#: Cache hits whose summaries are made (`HitSummaries`) go this many to a task at most: made
#: over a batch at once, a tiny rank's step breakdown cost ~0.8 ms at 100 ranks, ~1.7 ms at
#: 32, ~2.5 ms alone.
FILL_FILES = 128


def _tasks(
    pending: list[TraceFile], workers: int, most: int = CHUNK_FILES, each: int | None = None
) -> list[list[TraceFile]]:
    """The pool's tasks, largest first: a file of CHUNK_BYTES or more alone, the smaller
    ones in chunks of up to `most` (fewer when there are few: every worker gets `each`
    tasks or more, default CHUNKS_PER_WORKER)."""
    each = each or CHUNKS_PER_WORKER
    ordered = sorted(pending, key=lambda tf: tf.size, reverse=True)
    big = [[tf] for tf in ordered if tf.size >= CHUNK_BYTES]
    small = [tf for tf in ordered if tf.size < CHUNK_BYTES]
    per = max(1, min(most, len(small) // (workers * each)))
    chunks: list[list[TraceFile]] = []
    for tf in small:
        last = chunks[-1] if chunks else None
        if (
            last is None
            or len(last) >= per
            or sum(f.size for f in last) + tf.size > CHUNK_TOTAL_BYTES
        ):
            chunks.append([tf])
        else:
            last.append(tf)
    return big + chunks


def small_json(tf: TraceFile) -> bool:
    """Whether a file is worth no worker: under INLINE_BYTES of JSON, by its size after
    gunzip (1.9 MB of gzip can hold 563 MB of JSON), found by inflating at most that much. A
    file that cannot be read is small: its reason comes at once."""
    if tf.size >= INLINE_BYTES:
        return False
    try:
        read_bytes(tf.path, INLINE_BYTES)
    except TraceFileError as exc:
        return not exc.too_big
    except Exception:
        return True
    return True


def _inline(
    tf: TraceFile, cache: Cache, after_parse: AfterParse | None, limits: Limits
) -> LoadResult:
    try:
        with _time_limit_here(limits.seconds_for(tf.size)):
            return _parse_and_store(tf, cache, after_parse, limits)
    except FileTimeout:  # the alarm rang after the file's own handlers
        return LoadResult(tf, "error", error=_timeout_text(limits, tf))


@contextlib.contextmanager
def _time_limit_here(seconds: float) -> Iterator[None]:
    """The time limit for a file parsed in this process: an alarm, on the main thread (the
    report, scripts) when no other alarm is set there (a caller's own, a test runner's, is
    left alone); a thread cannot have one. Either way such a file's parse is linear."""
    if _alarm_here():
        with _time_limit(seconds):
            yield
    else:
        yield


def _alarm_here() -> bool:
    """Whether this thread can limit a parse's time with an alarm: the main thread, with no
    alarm of its caller's (a test runner's) already set."""
    free = hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    return free and threading.current_thread() is threading.main_thread()


def _raise_timeout(signum: int, frame: Any) -> None:
    raise FileTimeout


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """A worker process's own alarm: the parse stops at the next Python instruction (a read
    that blocks is interrupted too). The parent's watchdog covers a worker stuck in C."""
    if not hasattr(signal, "setitimer"):  # pragma: no cover - Windows
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
    limits: Limits | None = None,
    backend: Any = None,
) -> Iterator[LoadResult]:
    """Yield one result per file as each finishes: cache hits and small files first, in this
    process; the rest from a pool of `workers` processes (default: the usable cores).

    `cancelled`, when given, is called between results; a true answer stops submitting work.
    `after_parse` (a module-level function, so workers can import it) runs after each parse.
    `limits`: bytes and seconds per file (default: `Limits.from_env()`).
    `backend` (hta_tui/exec): where files that are not cache hits are parsed; its kind
    "inline" parses them here, "dask" on the cluster's workers (each file's one-line reason
    as here; a worker that dies costs its file a retry elsewhere), anything else (None, the
    process pool) in this module's own pools.
    Once every file is in, the cache is pruned to its size limit if anything was added.
    """
    stored = False
    limits = limits or Limits.from_env()
    kind = getattr(backend, "kind", "pool")
    for result in _load(files, cache, workers, cancelled, after_parse, limits, backend, kind):
        _log_result(result)
        if result.notice:
            note_once(result.notice)
        for text in result.damaged:
            note(text)
        stored = stored or (result.ok and not result.cached)
        yield result
    if stored:
        with contextlib.suppress(OSError):
            cache.prune()


def _log_result(result: LoadResult) -> None:
    if result.ok:
        return
    path = result.file.path
    if result.detail:
        log.error("%s: %s\n%s", path, result.error, result.detail.rstrip())
    else:
        log.info("%s: %s: %s", path, result.status, result.error)


def _load(
    files: Iterable[TraceFile],
    cache: Cache,
    workers: int | None,
    cancelled: Any,
    after_parse: AfterParse | None,
    limits: Limits,
    backend: Any = None,
    kind: str = "pool",
) -> Iterator[LoadResult]:
    pending: list[TraceFile] = []
    # Off the main thread (the app's session) no alarm can stop a parse: there every file
    # goes to the pool, where the time limit holds however small the file.
    inline = _alarm_here()
    hits: HitSummaries | None = getattr(after_parse, "for_hits", None)
    lacking: list[LoadResult] = []  # hits without `after_parse`'s summaries
    for tf in files:
        result = _cached(tf, cache)
        if result is not None and hits is not None and _lacks(result, hits):
            lacking.append(result)
            continue
        if result is None and (kind == "inline" or (inline and small_json(tf))):
            result = _inline(tf, cache, after_parse, limits)
        if result is None:
            pending.append(tf)
            continue
        yield result
        if cancelled is not None and cancelled():
            return
    fills = [r.file for r in lacking]
    if lacking and (kind != "pool" or inline):
        yield from _filled_here(lacking, after_parse, limits, cancelled)
        fills = []
    if not pending and not fills:
        return
    if kind == "dask":
        yield from _backend_round(pending, backend, cache, after_parse, limits, cancelled)
        return
    n = min(workers or default_workers(), len(pending) + len(fills))
    # Every other file in a pool, even of one process: only there does the time limit hold
    # for a file stuck in C. Largest first keeps both cores busy to the end; forkserver avoids
    # forking a process that runs polars or Textual threads. The hits whose summaries are
    # made first, a chunk a worker at least (a batch costs less a file): listed sooner.
    tasks = _tasks(fills, n, FILL_FILES, 1) + _tasks(pending, n)
    while tasks:
        tasks = yield from _pool_round(tasks, n, cache, after_parse, limits, cancelled)


def _filled_here(
    lacking: list[LoadResult], after_parse: AfterParse | None, limits: Limits, cancelled: Any
) -> Iterator[LoadResult]:
    """Cache hits whose summaries are made in this process (a session on its main thread,
    a back-end that parses here or on a cluster), a chunk at a time, each under its files'
    time limit where an alarm can hold it."""
    by_file = {r.file.path: r for r in lacking}
    for task in _tasks([r.file for r in lacking], 1, FILL_FILES, 1):
        chunk = [by_file[tf.path] for tf in task]
        _fill_in_time(chunk, after_parse, limits)
        yield from chunk
        if cancelled is not None and cancelled():
            return


#: How often the parent looks for a worker past its time limit (s), and how long past the
#: limit it waits for the worker's own alarm before it kills the pool.
WATCHDOG_TICK_S = 0.5
WATCHDOG_GRACE_S = 5.0


def _pool_round(
    tasks: list[list[TraceFile]],
    n: int,
    cache: Cache,
    after_parse: AfterParse | None,
    limits: Limits,
    cancelled: Any,
) -> Iterator[LoadResult]:
    """Parse the files of `tasks` (each a list of files, `_tasks`) in a pool of `n`
    processes. Returns the tasks left to do: none, unless a worker overran its time limit
    (stuck where its alarm cannot reach, in C) or died; then a task of one file gets its
    reason, a chunk's files are sent again one to a task (the culprit is found then, the
    others are cache hits or parsed), and when stuck the pool is killed and the rest go to
    a new one."""
    ctx = mp.get_context(START_METHOD)
    prepare_pool(() if after_parse is None else (after_parse.__module__,))
    with _usable_stderr():
        pool = ProcessPoolExecutor(max_workers=min(n, len(tasks)), mp_context=ctx)
    with pool:
        with _usable_stderr(), _children_skip_main():  # processes start on the first submits
            owner: dict[Future[list[LoadResult]], list[TraceFile]] = {
                pool.submit(_worker, task, cache.root, cache.enabled, after_parse, limits): task
                for task in tasks
            }
        futures = set(owner)
        # When each running task started, as far as the parent can tell: the pool marks one
        # more than it has workers as running (queued), so clocks restart at every finish;
        # a stuck worker is still found, once the others are done.
        started: dict[Future[list[LoadResult]], float] = {}
        grace = WATCHDOG_GRACE_S
        retry: list[list[TraceFile]] = []  # chunks whose worker died, a file to a task

        def limit(fut: Future[list[LoadResult]]) -> float:
            return sum(limits.seconds_for(tf.size) for tf in owner[fut]) + grace

        while futures:
            done, futures = wait(futures, timeout=WATCHDOG_TICK_S, return_when=FIRST_COMPLETED)
            if done:
                started.clear()
            for fut in done:
                try:
                    yield from fut.result()
                except Exception as exc:  # a worker died (out of memory, killed)
                    if len(owner[fut]) > 1:  # which file it was is not known: each alone
                        retry += [[tf] for tf in owner[fut]]
                    else:
                        yield LoadResult(owner[fut][0], "error", error=_one_line(exc))
            if cancelled is not None and cancelled():
                for fut in futures:
                    fut.cancel()
                return []
            now = time.monotonic()
            for fut in futures:
                if fut.running():
                    started.setdefault(fut, now)
            stuck = [f for f in futures if now - started.get(f, now) > limit(f)]
            if stuck:
                left = [owner[f] for f in futures if f not in stuck]
                for fut in stuck:
                    if len(owner[fut]) > 1:
                        left += [[tf] for tf in owner[fut]]
                        continue
                    tf = owner[fut][0]
                    yield LoadResult(tf, "error", error=_timeout_text(limits, tf))
                _kill(pool)
                return retry + left
    return retry


def _any_thread_worker(
    tf: TraceFile, cache_root: Path, enabled: bool, after_parse: AfterParse | None, limits: Limits
) -> LoadResult:
    """A parse on another back-end's worker (a Dask worker's thread): the time limit holds
    where an alarm can (`_time_limit_here`); the result crosses back without frames."""
    cache = Cache.__new__(Cache)
    cache.root, cache.enabled = cache_root, enabled
    result = _inline(tf, cache, after_parse, limits)
    result.frames = None  # a cache that cannot be written: the file is parsed again here
    return result


def _backend_round(
    pending: list[TraceFile],
    backend: Any,
    cache: Cache,
    after_parse: AfterParse | None,
    limits: Limits,
    cancelled: Any,
) -> Iterator[LoadResult]:
    """Parse `pending` on `backend` (largest first), each result as it lands; a task that
    failed even after the back-end's retry (its worker died twice) is that file's error."""
    pending.sort(key=lambda tf: tf.size, reverse=True)
    owner: dict[Future[LoadResult], TraceFile] = {
        backend.submit(_any_thread_worker, tf, cache.root, cache.enabled, after_parse, limits): tf
        for tf in pending
    }
    futures = set(owner)
    while futures:
        done, futures = wait(futures, timeout=WATCHDOG_TICK_S, return_when=FIRST_COMPLETED)
        for fut in done:
            try:
                result = fut.result()
            except Exception as exc:
                result = LoadResult(owner[fut], "error", error=_one_line(exc))
            if result.ok and result.entry is not None and not result.entry.is_dir():
                result = _inline(owner[fut], cache, after_parse, limits)  # stored nowhere
            yield result
        if cancelled is not None and cancelled():
            for fut in futures:
                fut.cancel()
            return


def _kill(pool: ProcessPoolExecutor) -> None:
    """End a pool whose worker will not return (its processes are killed, not waited for)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)
