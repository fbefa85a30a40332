"""LiveSession: the sides being compared (main, and test when comparing), each a TraceSet with
its generation, kept up to date by work on the session's own threads.

Threads. Discovering, loading, stat'ing and watching run on the session's executor (and one
watcher thread per side); they never touch a TraceSet, they queue what they found. The owner
(the app's UI thread, a script) applies the queue with `apply_pending()`, the only place a
TraceSet changes, and every listener hears each side's change once: `Change(side,
generation, paths)`. When the queue goes from empty to not empty the session calls `wake()`
(the app posts one coalescing message): a flood of files crosses to the UI once per batch,
and a batch of results bumps a side's generation once.

Staleness. Every queued item carries the scan it belongs to: a new scan of a side drops what
an older one still sends, and a result for a version of a file the side no longer has is
dropped too (a newer load follows). A loader that crashes fails only the files it left
pending, each with the reason. While watching, files left incomplete are stat'ed again every
`RECHECK` seconds on the watcher's thread: a watcher can miss a rewrite (polling compares
whole-second mtimes; network file systems lose events).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hta_tui.analysis.lazy import lazy_module
from hta_tui.analysis.step_overview import precompute
from hta_tui.session.sides import MAIN, TEST, Change, InlineExecutor, Notice, Side, one_line
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import TraceFile, describe, discover
from hta_tui.trace.load import LoadResult, load_files
from hta_tui.trace.model import TraceSet

if TYPE_CHECKING:
    import asyncio

#: (imported when a side is first watched: a report watches nothing, nor imports asyncio)
watch_module = lazy_module("hta_tui.trace.watch")

#: A scan's listing reaches the owner in parts of this many files (each a turn of
#: `apply_pending` with a limit): 10,000 files listed at once held a UI thread 0.06-0.11 s.
FOUND_PART = 1000
#: While watching, incomplete files are stat'ed this often (seconds) in case an event was
#: missed: the one timer left, as the file system cannot be asked to push what it lost.
RECHECK = 1.0

log = logging.getLogger("hta_tui")


# queued items: (side, scan number or None for "whatever scan", kind, payload)
_Item = tuple[str, int | None, str, Any]


class LiveSession:
    """The sides of one session (see the module docstring). `executor`: where scans and loads
    run (default: a small thread pool of the session's own; `InlineExecutor()` runs them in
    the caller); `wake`: called from any thread when work has queued results for
    `apply_pending`; `workers`: parser processes per load; `backend`: where files are parsed
    (hta_tui/exec: in-process, the process pool when None, a Dask cluster)."""

    def __init__(
        self,
        root: str | Path,
        *,
        cache: Cache,
        compare: str | Path | None = None,
        workers: int | None = None,
        poll: bool = False,
        executor: Executor | None = None,
        wake: Callable[[], None] | None = None,
        after_parse: Callable[..., None] | None = precompute,
        backend: Any = None,
    ) -> None:
        self.cache = cache
        #: where files are parsed (hta_tui/exec's back-ends; None: the process pool)
        self.backend = backend
        self.workers = workers
        self.poll = poll
        self.after_parse = after_parse
        self.wake = wake
        self.sides: dict[str, Side] = {MAIN: Side(MAIN, Path(root), TraceSet(root))}
        if compare is not None:
            self.sides[TEST] = Side(TEST, Path(compare), TraceSet(compare))
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(4, thread_name_prefix="hta-session")
        self._lock = threading.Lock()
        self._inbox: list[_Item] = []
        self._busy = 0  # tasks submitted and not finished
        self._closed = False
        self._stops: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._listeners: list[Callable[[Change], None]] = []
        #: what `open_session` was told while loading (a front end without notices prints it)
        self.notices: list[Notice] = []

    # -- what front ends read -------------------------------------------------------------------
    @property
    def trace_set(self) -> TraceSet:
        return self.sides[MAIN].trace_set

    @property
    def compare_set(self) -> TraceSet | None:
        side = self.sides.get(TEST)
        return side.trace_set if side is not None else None

    @property
    def idle(self) -> bool:
        """No work running and nothing queued: every change so far is applied."""
        with self._lock:
            return self._busy == 0 and not self._inbox

    def subscribe(self, listener: Callable[[Change], None]) -> None:
        """`listener(change)` on the owner's thread, once per side per `apply_pending`."""
        self._listeners.append(listener)

    # -- starting work (owner thread) -----------------------------------------------------------
    def scan(self, side: str | None = None) -> None:
        """Discover a side's folder (every side's when None) again and load everything in it
        (cache hits are instant); an older scan of that side is dropped."""
        for s in self._pick(side):
            s.scan += 1
            s.scanning = True
            s.before = set(s.trace_set.entries)
            self._submit(self._scan_task, s, s.scan)

    def reload(self, paths: Iterable[Path], side: str = MAIN) -> None:
        """Stat and load these files again (a change the front end learned of itself)."""
        s = self.sides[side]
        self._submit(self._reload_task, s, list(paths), s.scan, None)

    def recheck(self, side: str | None = None) -> None:
        """Stat the files left incomplete again and load those that changed (any thread)."""
        for s in self._pick(side):
            with self._lock:
                if s.rechecking or not s.incomplete or self._closed:
                    continue
                s.rechecking = True
                known = dict(s.incomplete)
            self._submit(self._reload_task, s, list(known), s.scan, known, recheck=True)

    def select_span(self, rank: int, path: Path, side: str = MAIN) -> None:
        """Show `path` for `rank` (an older span, a conflicting file), announced as a change."""
        s = self.sides[side]
        s.trace_set.select_span(rank, path)
        self._announce([self._change(s, {path}, [])])

    def watch(self) -> None:
        """Follow every side's folder on a thread of its own until `close()`."""
        for s in self.sides.values():
            threading.Thread(
                target=self._watch_thread, args=(s,), daemon=True, name=f"hta-watch-{s.name}"
            ).start()

    def close(self) -> None:
        """Stop the watchers and drop running work (loads stop between files)."""
        with self._lock:
            self._closed = True
            stops, self._stops = self._stops, []
        for loop, stop in stops:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def wait(self) -> list[Change]:
        """Until no work is left, applying what lands (scripts on a thread pool; with an
        `InlineExecutor` the work is already done and this applies it once)."""
        changes: list[Change] = []
        while True:
            changes += self.apply_pending()
            with self._lock:
                if self._busy == 0 and not self._inbox:
                    return changes
            threading.Event().wait(0.01)

    def _pick(self, side: str | None) -> list[Side]:
        return list(self.sides.values()) if side is None else [self.sides[side]]

    # -- work (executor threads) ----------------------------------------------------------------
    def _submit(self, fn: Callable[..., None], *args: Any, **kw: Any) -> None:
        with self._lock:
            if self._closed:
                return
            self._busy += 1
        try:
            self._executor.submit(self._run, fn, *args, **kw)
        except RuntimeError:  # the executor shut down meanwhile
            self._done()

    def _run(self, fn: Callable[..., None], *args: Any, **kw: Any) -> None:
        try:
            fn(*args, **kw)
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1

    def _push(self, side: Side, scan: int | None, kind: str, payload: Any) -> None:
        with self._lock:
            first = not self._inbox
            self._inbox.append((side.name, scan, kind, payload))
        if first and self.wake is not None:
            self.wake()

    def _stale(self, side: Side, scan: int) -> bool:
        return self._closed or side.scan != scan

    def _scan_task(self, side: Side, scan: int) -> None:
        try:
            files = discover(side.root)
            if self._stale(side, scan):
                return
            # in parts, the folder's listing (the paths, made here) with the last: the owner
            # lists 10,000 files in turns (`apply_pending`'s limit), not in one 0.1 s stretch
            listed = frozenset(tf.path for tf in files)
            for start in range(0, max(len(files), 1), FOUND_PART):
                last = start + FOUND_PART >= len(files)
                part = files[start : start + FOUND_PART]
                self._push(side, scan, "found", (part, last, listed if last else None))
            self._load(side, scan, files)
        except Exception as exc:  # the side's pending files get the reason, nothing hangs
            log.exception("loading %s failed", side.root)
            self._push(side, scan, "failed", (None, one_line(exc), True))

    def _reload_task(
        self,
        side: Side,
        paths: list[Path],
        scan: int,
        known: dict[Path, tuple[str, int, int]] | None,
        recheck: bool = False,
    ) -> None:
        """Stat `paths` and load them again; with `known`, only those whose key changed."""
        try:
            files: list[TraceFile] = []
            for path in paths:
                try:
                    tf = describe(path)
                except OSError:
                    self._push(side, scan, "gone", path)
                    continue
                if known is None or known.get(path) != tf.key:
                    files.append(tf)
            if not files or self._stale(side, scan):
                return
            self._push(side, scan, "found", (files, False))
            self._load(side, scan, files)
        except Exception as exc:
            log.exception("reloading files of %s failed", side.root)
            self._push(side, scan, "failed", (paths, one_line(exc), False))
        finally:
            if recheck:
                with self._lock:
                    side.rechecking = False

    def _load(self, side: Side, scan: int, files: list[TraceFile]) -> None:
        results = load_files(
            files,
            self.cache,
            workers=self.workers,
            cancelled=lambda: self._stale(side, scan),
            after_parse=self.after_parse,
            backend=self.backend,
        )
        for result in results:
            self._push(side, scan, "loaded", result)

    # -- watching (a thread per side) -------------------------------------------------------------
    def _watch_thread(self, side: Side) -> None:
        import asyncio

        try:
            asyncio.run(self._watch_loop(side))
        except Exception as exc:  # the session keeps going, unwatched
            self._push(side, None, "watch", ("off", one_line(exc)))

    async def _watch_loop(self, side: Side) -> None:
        import asyncio

        stop = asyncio.Event()
        with self._lock:
            if self._closed:
                return
            self._stops.append((asyncio.get_running_loop(), stop))
        self._push(side, None, "watch", ("polling" if self.poll else "watching", None))
        rechecks = asyncio.create_task(self._recheck_loop(side, stop))
        try:
            async for changes in watch_module.watch(side.root, poll=self.poll, stop_event=stop):
                if changes:
                    self._changed(side, changes)
        except Exception as exc:  # inotify limits, vanished folder: keep going, say why
            self._push(side, None, "watch", ("off", one_line(exc)))
            return
        finally:
            stop.set()
            rechecks.cancel()
        self._push(side, None, "watch", ("off", None))

    async def _recheck_loop(self, side: Side, stop: asyncio.Event) -> None:
        import asyncio

        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), RECHECK)
            if not stop.is_set():
                self.recheck(side.name)

    def _changed(self, side: Side, changes: list[Any]) -> None:
        """A watcher's batch: deletions are applied as they are, the rest load again."""
        reload = []
        for change in changes:
            if change.kind == "deleted":
                self._push(side, None, "deleted", change.path)
            else:
                reload.append(change.path)
        if reload:
            self._submit(self._reload_task, side, reload, side.scan, None)

    # -- applying (owner thread: the only place a TraceSet changes) -----------------------------
    def pending(self) -> bool:
        """Changes are queued for `apply_pending` (some left by a `limit`)."""
        with self._lock:
            return bool(self._inbox)

    def apply_pending(self, limit: int | None = None) -> list[Change]:
        """Apply what was queued since the last call, or its first `limit` loaded files and at
        most one part of a listing (the rest stay queued, in order, for the next call: an
        owner on a UI thread applies 10,000 landed files in turns of a few ms, not one of
        0.15 s); one Change per side it touched."""
        with self._lock:
            items, self._inbox = self._inbox, []
            if limit is not None:
                loaded = found = 0
                for i, item in enumerate(items):
                    loaded += item[2] == "loaded"
                    found += item[2] == "found"  # and one part of a listing per call
                    if (loaded > limit or found > 1) and i:
                        items, self._inbox = items[:i], items[i:] + self._inbox
                        break
        touched: dict[str, tuple[set[Path], list[Notice]]] = {}
        batch: list[LoadResult] = []
        batch_side: Side | None = None
        for name, scan, kind, payload in items:
            side = self.sides.get(name)
            if side is None or (scan is not None and scan != side.scan):
                continue  # an older scan's work, still arriving
            if batch and (kind != "loaded" or side is not batch_side):
                self._apply_results(batch_side, batch, touched)  # type: ignore[arg-type]
                batch = []
            paths, notices = touched.setdefault(name, (set(), []))
            if kind == "loaded":
                batch_side = side
                batch.append(payload)
            elif kind == "found":
                self._found(side, paths, *payload)
            elif kind in ("gone", "deleted"):
                if side.trace_set.entries.get(payload) is not None:
                    side.trace_set.remove(payload)
                    paths.add(payload)
            elif kind == "failed":
                failed, reason, was_scan = payload
                if was_scan:
                    side.scanning = False
                paths |= self._fail_pending(side, failed, f"loader failed: {reason}")
                notices.append(Notice(f"loading failed: {reason}", "error"))
            elif kind == "watch":
                state, reason = payload
                side.watch = state
                if reason:
                    hint = "" if self.poll else " (try --poll)"
                    notices.append(Notice(f"not watching: {reason}{hint}"))
        if batch:
            self._apply_results(batch_side, batch, touched)  # type: ignore[arg-type]
        changes = [
            self._change(self.sides[name], paths, notices)
            for name, (paths, notices) in touched.items()
        ]
        self._announce(changes)
        return changes

    def _announce(self, changes: list[Change]) -> None:
        for change in changes:
            for listener in self._listeners:
                listener(change)

    def _change(self, side: Side, paths: set[Path], notices: list[Notice]) -> Change:
        with self._lock:  # the recheck reads `incomplete` from the watcher's thread
            for path in paths:
                entry = side.trace_set.entries.get(path)
                if entry is not None and entry.status == "incomplete":
                    side.incomplete[path] = entry.file.key
                else:
                    side.incomplete.pop(path, None)
        return Change(
            side=side.name,
            generation=side.trace_set.generation,
            paths=frozenset(paths),
            scanning=side.scanning,
            watch=side.watch,
            notices=tuple(notices),
        )

    def _found(
        self,
        side: Side,
        paths: set[Path],
        files: list[TraceFile],
        full: bool,
        listed: frozenset[Path] | None = None,
    ) -> None:
        """Files listed; `full`: the last part of a scan, whose `listed` (every path the
        folder holds) tells which known files are gone."""
        ts = side.trace_set
        if full:
            side.scanning = False
            if listed is None:
                listed = frozenset(tf.path for tf in files)
            for path in side.before - listed:
                if path in ts.entries:
                    ts.remove(path)
                    paths.add(path)
        fresh = []
        for tf in files:
            current = ts.entries.get(tf.path)
            if current is not None and current.file.mtime_ns > tf.mtime_ns:
                continue  # an older stat than the one already known
            if current is None or current.file.key != tf.key:
                fresh.append(tf)
        if fresh:
            ts.add_pending_many(fresh)
            paths.update(tf.path for tf in fresh)

    def _apply_results(
        self,
        side: Side,
        results: list[LoadResult],
        touched: dict[str, tuple[set[Path], list[Notice]]],
    ) -> None:
        paths, notices = touched.setdefault(side.name, (set(), []))
        keep = []
        for result in results:
            current = side.trace_set.entries.get(result.file.path)
            if current is None or current.file.key != result.file.key:
                continue  # removed, or changed again since this load started: a newer follows
            keep.append(result)
            paths.add(result.file.path)
            if side.name == TEST and result.status in ("error", "not_trace"):
                # the overview lists the main side's files; the test side's problems show here
                notices.append(Notice(f"test side: {result.file.path.name}: {result.error}"))
        side.trace_set.apply_many(keep)

    def _fail_pending(self, side: Side, paths: list[Path] | None, reason: str) -> set[Path]:
        """Files a crashed loader left pending get its error, so nothing waits forever."""
        ts = side.trace_set
        failed = [
            LoadResult(entry.file, "error", error=reason)
            for path, entry in ts.entries.items()
            if entry.status in ("pending", "loading") and (paths is None or path in paths)
        ]
        ts.apply_many(failed)
        return {r.file.path for r in failed}


def open_session(
    root: str | Path,
    cache: Cache | None = None,
    *,
    compare: str | Path | None = None,
    workers: int | None = None,
    after_parse: Callable[..., None] | None = precompute,
    backend: Any = None,
) -> LiveSession:
    """A session with every file under `root` (and `compare`) loaded, in the caller's thread:
    the report and the Python API open their files through this, as the app does."""
    session = LiveSession(
        root,
        cache=cache if cache is not None else Cache(),
        compare=compare,
        workers=workers,
        executor=InlineExecutor(),
        after_parse=after_parse,
        backend=backend,
    )
    session.scan()
    session.notices = [notice for change in session.wait() for notice in change.notices]
    return session
