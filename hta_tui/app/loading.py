"""Loading and watching, mixed into HtaApp: discover and load each side's folder in thread
workers, follow it with the watcher, and apply every loading message to the TraceSet on the
main thread (the only place it changes).

    action_reload -> _load_all (thread): discover, FilesFound, then one FileLoaded per file
    _run_watch (async): FilesChanged per batch; added/modified -> _reload_files (thread)
    _recheck_incomplete (1/s, while watching): stat the incomplete files; reload changed ones
          (a watcher can miss a rewrite: polling compares whole-second mtimes)

Handlers are found by name (`_on_files_found`...), as Textual's `@on` registers only on
classes built by its own metaclass.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual import work
from textual.worker import Worker, WorkerState, get_current_worker

from hta_tui.analysis.step_overview import precompute
from hta_tui.app.environment import one_line
from hta_tui.app.messages import FileGone, FileLoaded, FilesChanged, FilesFound, WatchState
from hta_tui.app.mixin import AppMixin
from hta_tui.app.sides import MAIN, TEST, SideState, side_of, tag
from hta_tui.trace.cache import Cache
from hta_tui.trace.discover import TraceFile, describe, discover
from hta_tui.trace.load import LoadResult, load_files
from hta_tui.trace.model import TraceSet


class LoadingMixin(AppMixin):
    """The loading half of HtaApp; the attributes below are set by HtaApp.__init__."""

    cache: Cache
    poll: bool
    load_workers: int | None
    trace_set: TraceSet
    watcher_state: str
    _sides: dict[str, SideState]
    _worker_paths: dict[Worker, list[Path]]
    _worker_side: dict[Worker, str]
    _stop_watch: asyncio.Event | None
    _recheck_workers: dict[str, Worker]
    _overview_worker: Worker | None

    def scanning(self, side: str = MAIN) -> bool:
        """Is a full scan of that side's folder ("main" or "test") still listing files?"""
        state = self._sides.get(side)
        return state is not None and state.scanning

    @property
    def scan_generation(self) -> int:
        """Bumps on every full scan of the main set; results of an older scan are dropped."""
        return self._sides[MAIN].generation

    def action_reload(self) -> None:
        """Discover the folder (both sides' when comparing) again and load everything (cache
        hits are instant)."""
        for side, state in self._sides.items():
            for worker, owner in list(self._worker_side.items()):
                if owner == side and worker.group == "load" and not worker.is_finished:
                    worker.cancel()  # an older scan of this side; its messages are dropped
            state.generation += 1
            state.scanning = True
            state.before = set(state.trace_set.entries)
            worker = self._load_all(state.root, state.generation, side)
            self._worker_side[worker] = side

    # -- workers --------------------------------------------------------------------------------
    # Not `exclusive`: both sides load at once; action_reload cancels a side's older scan.
    @work(thread=True, group="load", exit_on_error=False, name="load")
    def _load_all(self, root: Path, generation: int, side: str = MAIN) -> None:
        worker = get_current_worker()
        files = discover(root)
        if worker.is_cancelled:
            return
        self.post_message(tag(FilesFound(files, generation, full=True), side))
        self._load_and_post(files, generation, side, worker)

    @work(thread=True, group="reload", exit_on_error=False, name="reload")
    def _reload_files(
        self,
        paths: list[Path],
        generation: int,
        known: dict[Path, tuple[str, int, int]] | None = None,
        side: str = MAIN,
    ) -> None:
        """Stat and load `paths` again; with `known`, only those whose key changed."""
        worker = get_current_worker()
        files = []
        for path in paths:
            try:
                tf = describe(path)
            except OSError:
                self.post_message(tag(FileGone(path, generation), side))
                continue
            if known is None or known.get(path) != tf.key:
                files.append(tf)
        if not files or worker.is_cancelled:
            return
        self.post_message(tag(FilesFound(files, generation, full=False), side))
        self._load_and_post(files, generation, side, worker)

    def _load_and_post(
        self, files: list[TraceFile], generation: int, side: str, worker: Worker
    ) -> None:
        """In a worker thread: load `files`, one FileLoaded message per file as it lands."""
        results = load_files(
            files,
            self.cache,
            workers=self.load_workers,
            cancelled=lambda: worker.is_cancelled,
            after_parse=precompute,
        )
        for result in results:
            self.post_message(tag(FileLoaded(result, generation), side))

    @work(group="watch", exit_on_error=False, name="watch")
    async def _run_watch(self, side: str = MAIN) -> None:
        from hta_tui.trace.watch import watch

        if self._stop_watch is None:
            self._stop_watch = asyncio.Event()  # one for both sides: quitting stops both
        stop = self._stop_watch
        root = self._sides[side].root
        self.post_message(tag(WatchState("polling" if self.poll else "watching"), side))
        try:
            async for changes in watch(root, poll=self.poll, stop_event=stop):
                if changes:
                    self.post_message(tag(FilesChanged(list(changes)), side))
        except Exception as exc:  # inotify limits, vanished folder: keep the app, say why
            self.post_message(tag(WatchState("off", one_line(exc)), side))
            return
        self.post_message(tag(WatchState("off"), side))

    # -- message handlers (main thread: the only place the TraceSet changes) -------------------
    def _current(self, msg: Any) -> SideState | None:
        """The side a loading message belongs to, if the message is of its current scan."""
        state = self._sides.get(side_of(msg))
        if state is None or msg.generation != state.generation:
            return None
        return state

    def _on_files_found(self, msg: FilesFound) -> None:
        state = self._current(msg)
        if state is None:
            return
        ts = state.trace_set
        if msg.full:
            state.scanning = False
            listed = {tf.path for tf in msg.files}
            for path in state.before - listed:
                ts.remove(path)
        fresh = []
        for tf in msg.files:
            current = ts.entries.get(tf.path)
            if current is not None and current.file.mtime_ns > tf.mtime_ns:
                continue  # an older stat than the one we already have
            fresh.append(tf)
        ts.add_pending_many(fresh)

    def _on_file_loaded(self, msg: FileLoaded) -> None:
        state = self._current(msg)
        if state is None:
            return
        result = msg.result
        current = state.trace_set.entries.get(result.file.path)
        if current is None or current.file.key != result.file.key:
            return  # removed, or changed again since this load started: a newer load follows
        state.trace_set.apply(result)
        if side_of(msg) == TEST and result.status in ("error", "not_trace"):
            # the overview lists the control side's files; the test side's problems show here
            name = result.file.path.name
            self.notify(f"test side: {name}: {result.error}", severity="warning", timeout=10)

    def _on_file_gone(self, msg: FileGone) -> None:
        state = self._current(msg)
        if state is not None:
            state.trace_set.remove(msg.path)

    def _on_files_changed(self, msg: FilesChanged) -> None:
        side = side_of(msg)
        state = self._sides.get(side)
        if state is None:
            return
        reload: list[Path] = []
        for change in msg.changes:
            if change.kind == "deleted":
                state.trace_set.remove(change.path)
            else:
                reload.append(change.path)
        if reload:
            worker = self._reload_files(reload, state.generation, side=side)
            self._worker_paths[worker] = reload
            self._worker_side[worker] = side

    def _on_watch_state(self, msg: WatchState) -> None:
        if side_of(msg) == MAIN:
            self.watcher_state = msg.state
        if msg.reason:
            hint = "" if self.poll else " (try --poll)"
            self.notify(f"not watching: {msg.reason}{hint}", severity="warning", timeout=8)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        paths = self._worker_paths.pop(worker, None)
        side = self._worker_side.pop(worker, MAIN)
        if worker is self._overview_worker:
            self._overview_worker = None
        if self._recheck_workers.get(side) is worker:
            del self._recheck_workers[side]
        if event.state != WorkerState.ERROR:
            return
        reason = one_line(worker.error)
        if worker.group in ("load", "reload"):
            state = self._sides[side]
            if worker.group == "load":
                state.scanning = False
            self._fail_pending(paths, f"loader failed: {reason}", state.trace_set)
            self.notify(f"loading failed: {reason}", severity="error", timeout=10)
        elif worker.group == "overview":
            self.notify(f"overview failed: {reason}", severity="error", timeout=10)

    def _fail_pending(
        self, paths: list[Path] | None, reason: str, ts: TraceSet | None = None
    ) -> None:
        """Entries a crashed loader left pending get its error, so nothing waits forever."""
        ts = self.trace_set if ts is None else ts
        for path, entry in list(ts.entries.items()):
            if entry.status in ("pending", "loading") and (paths is None or path in paths):
                ts.apply(LoadResult(entry.file, "error", error=reason))

    def _recheck_incomplete(self) -> None:
        """Files left incomplete wait for their next change; while watching, also look for
        that change here, as a watcher can miss it (a rewrite within the same second in
        polling mode, an event lost on a network file system)."""
        if self.watcher_state == "off":
            return
        for side, state in self._sides.items():
            if side in self._recheck_workers:
                continue
            known = {
                p: e.file.key
                for p, e in state.trace_set.entries.items()
                if e.status == "incomplete"
            }
            if known:
                worker = self._reload_files(list(known), state.generation, known, side=side)
                self._recheck_workers[side] = worker
                self._worker_paths[worker] = list(known)
                self._worker_side[worker] = side
